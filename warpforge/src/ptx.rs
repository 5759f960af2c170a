//! The PTX modules the build compiled from the kernels crate, embedded in the binary.

/// One embedded PTX module.
#[derive(Clone, Copy, Debug)]
pub struct PtxModule {
    /// The `-C target-cpu` it was compiled for (`sm_80`).
    pub arch: &'static str,
    /// The PTX text.
    pub source: &'static str,
}

/// Every embedded module. `sm_80` PTX JIT-compiles on every GPU from Ampere up.
pub const MODULES: &[PtxModule] = &[PtxModule {
    arch: "sm_80",
    source: include_str!(env!("WARPFORGE_PTX_SM_80")),
}];

/// The module a GPU of compute capability `major.minor` loads: the newest arch it can run.
pub fn module_for(compute_capability: (i32, i32)) -> Option<&'static PtxModule> {
    MODULES
        .iter()
        .filter(|m| arch_capability(m.arch).is_some_and(|cc| cc <= compute_capability))
        .max_by_key(|m| arch_capability(m.arch))
}

/// `sm_80` → `(8, 0)`; `sm_90a` → `(9, 0)`.
pub fn arch_capability(arch: &str) -> Option<(i32, i32)> {
    let digits: String = arch
        .strip_prefix("sm_")?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let n: i32 = digits.parse().ok()?;
    Some((n / 10, n % 10))
}

impl PtxModule {
    /// The PTX ISA version from the module's `.version` directive, e.g. `(7, 0)`.
    pub fn isa_version(&self) -> Option<(u32, u32)> {
        let line = self
            .source
            .lines()
            .find_map(|l| l.trim().strip_prefix(".version"))?;
        let (major, minor) = line.trim().split_once('.')?;
        Some((major.parse().ok()?, minor.trim().parse().ok()?))
    }

    /// The kernel entry points (`.entry NAME`) in the module, in order.
    pub fn entries(&self) -> Vec<&'static str> {
        self.source
            .lines()
            .filter_map(|l| {
                let rest = l.trim().strip_prefix(".visible .entry ")?;
                Some(
                    rest.split(|c: char| c == '(' || c.is_whitespace())
                        .next()
                        .unwrap_or(rest),
                )
            })
            .collect()
    }
}

/// The CUDA version (`major·1000 + minor·10`, the driver's encoding) that
/// introduced PTX ISA `major.minor`; a driver older than this cannot JIT the module.
///
/// ```
/// assert_eq!(warpforge::ptx::cuda_version_for_isa((7, 0)), Some(11000));
/// assert_eq!(warpforge::ptx::cuda_version_for_isa((8, 0)), Some(12000));
/// ```
pub fn cuda_version_for_isa(isa: (u32, u32)) -> Option<u32> {
    // PTX ISA release notes: 7.x shipped with CUDA 11.x, 8.0–8.5 with 12.0–12.5,
    // 8.6 with 12.7, 8.7 with 12.8, 8.8 with 12.9, 9.0 with 13.0.
    let (major, minor) = isa;
    let cuda = match (major, minor) {
        (7, m @ 0..=8) => 11000 + m * 10,
        (8, m @ 0..=5) => 12000 + m * 10,
        (8, 6) => 12070,
        (8, 7) => 12080,
        (8, 8) => 12090,
        (9, 0) => 13000,
        _ => return None,
    };
    Some(cuda)
}

/// `12080` → `"12.8"`.
pub fn format_cuda_version(v: u32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_module_names_every_kernel_by_its_rust_name() {
        let m = &MODULES[0];
        let entries = m.entries();
        for k in [
            "axpy_f32",
            "axpy_f64",
            "reduce_rows_sum_f32",
            "reduce_cols_argmax_bf16",
            "combine_rows_lse_f64",
            "combine_cols_min_u32",
            "finish_f32_to_f16",
            "finish_index",
        ] {
            assert!(entries.contains(&k), "{k} missing from {entries:?}");
        }
        assert_eq!(m.isa_version().map(|v| v.0 >= 7), Some(true));
    }

    #[test]
    fn picks_the_newest_module_a_gpu_can_run() {
        assert_eq!(module_for((9, 0)).map(|m| m.arch), Some("sm_80"));
        assert_eq!(module_for((8, 0)).map(|m| m.arch), Some("sm_80"));
        assert!(module_for((7, 5)).is_none());
        assert_eq!(arch_capability("sm_90a"), Some((9, 0)));
    }
}
