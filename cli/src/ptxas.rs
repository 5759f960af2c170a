//! Run NVIDIA's `ptxas` over generated PTX and report per-kernel resource usage.
//!
//! The PTX that rustc emits is only text: it can look fine and still be
//! rejected by the driver's JIT, and it says nothing about how many registers,
//! spills or shared memory a kernel will really use. `ptxas` is the assembler
//! the driver itself relies on, so running it ahead of time both validates the
//! PTX for a given architecture and, with `-v`, tells us the numbers that
//! decide occupancy. This module finds a `ptxas` binary (CUDA toolkit or the
//! `nvidia-cuda-nvcc` pip wheel), runs it, and turns its `-v` chatter into
//! [`EntryReport`] rows that can be printed with [`render_table`].
//! [`Ptxas::assemble_cubin`] also hands back the cubin, which
//! [`crate::sass::Disassembler`] turns into SASS.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Environment variable that names the `ptxas` binary to use, overriding the search.
const ENV_OVERRIDE: &str = "WARPFORGE_PTXAS";

/// A located `ptxas` binary together with the version it reports.
#[derive(Debug, Clone)]
pub struct Ptxas {
    /// Path of the `ptxas` executable.
    pub path: PathBuf,
    /// Version reported by `ptxas --version`, e.g. `"13.5.37"`.
    pub version: String,
}

/// Resource usage of one `.entry` kernel as reported by `ptxas -v`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryReport {
    /// Kernel (entry function) name as it appears in the PTX.
    pub kernel: String,
    /// Architecture it was assembled for, e.g. `"sm_80"`.
    pub arch: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of register spill stores to local memory.
    pub spill_stores: u64,
    /// Bytes of register spill loads from local memory.
    pub spill_loads: u64,
    /// Bytes of per-thread stack frame.
    pub stack_frame: u64,
    /// Bytes of statically declared shared memory per block.
    pub static_shared: u64,
    /// Number of named barriers used.
    pub barriers: u32,
}

/// Errors from locating or running `ptxas` and the SASS disassemblers.
#[derive(Debug, thiserror::Error)]
pub enum PtxasError {
    /// No usable `ptxas` was found in any of the searched places.
    #[error("{}", not_found_message(.searched))]
    NotFound {
        /// Every place that was looked at, in search order, with the reason it did not qualify.
        searched: Vec<String>,
    },
    /// An I/O operation (temp files, spawning `ptxas`) failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being attempted when the error happened.
        what: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// `ptxas` ran but exited unsuccessfully.
    #[error("ptxas rejected the PTX for {arch}:\n{stderr}")]
    Rejected {
        /// Architecture that was requested.
        arch: String,
        /// What `ptxas` printed on stderr.
        stderr: String,
    },
    /// Neither `nvdisasm` nor `cuobjdump` was found (see [`crate::sass::Disassembler`]).
    #[error("{}", disassembler_not_found_message(.searched))]
    DisassemblerNotFound {
        /// Every place that was looked at, in search order, with the reason it did not qualify.
        searched: Vec<String>,
    },
    /// The disassembler ran but exited unsuccessfully.
    #[error("{tool} could not disassemble the cubin ptxas wrote:\n{stderr}")]
    DisassemblerFailed {
        /// The disassembler that was run.
        tool: String,
        /// What it printed on stderr.
        stderr: String,
    },
}

/// "could not find NVIDIA's `tool`", each place searched, then the fix.
fn not_found(tool: &str, searched: &[String], fix: &str) -> String {
    let mut msg = format!("could not find NVIDIA's {tool}; searched:\n");
    for place in searched {
        msg.push_str("  - ");
        msg.push_str(place);
        msg.push('\n');
    }
    msg.push_str("fix: ");
    msg.push_str(fix);
    msg
}

fn disassembler_not_found_message(searched: &[String]) -> String {
    not_found(
        "nvdisasm (or cuobjdump)",
        searched,
        "`pip install nvidia-cuda-nvdisasm` (it puts nvdisasm next to the pip ptxas, in \
         site-packages/nvidia/cu13/bin), or install the CUDA toolkit, \
         or set WARPFORGE_NVDISASM to the path of an nvdisasm (or cuobjdump) binary",
    )
}

fn not_found_message(searched: &[String]) -> String {
    not_found(
        "ptxas",
        searched,
        "`pip install nvidia-cuda-nvcc` (or install the CUDA toolkit), \
         or set WARPFORGE_PTXAS to the path of a ptxas binary",
    )
}

impl Ptxas {
    /// Finds a `ptxas` binary and asks it for its version.
    ///
    /// Search order: the file named by `WARPFORGE_PTXAS`; `ptxas` on `PATH`;
    /// `$CUDA_PATH/bin/ptxas`; `/usr/local/cuda/bin/ptxas`; and finally the
    /// `nvidia-cuda-nvcc` pip wheel under the `purelib` directory of
    /// `python3` or `python` (`nvidia/cu13/bin/ptxas` or
    /// `nvidia/cuda_nvcc/bin/ptxas`). A candidate that exists but cannot run
    /// `--version` is skipped and noted in the error.
    pub fn locate() -> Result<Ptxas, PtxasError> {
        let mut searched = Vec::new();
        match locate_tool(&PTXAS_TOOL, &mut searched)? {
            Some(tool) => Ok(Ptxas {
                path: tool.path,
                version: tool.version,
            }),
            None => Err(PtxasError::NotFound { searched }),
        }
    }

    /// Assembles `ptx` for `arch` (e.g. `"sm_80"`, `"sm_90a"`) and returns one
    /// report per entry function, sorted by kernel name.
    ///
    /// The PTX and the resulting cubin live in uniquely named temp files that
    /// are removed before returning. A non-zero exit from `ptxas` becomes
    /// [`PtxasError::Rejected`] carrying its stderr.
    pub fn assemble(&self, ptx: &str, arch: &str) -> Result<Vec<EntryReport>, PtxasError> {
        Ok(self.assemble_cubin(ptx, arch, &[], false)?.reports)
    }

    /// Assembles `ptx` for `arch` like [`Ptxas::assemble`] and also returns the cubin.
    ///
    /// `entries`, when not empty, limits code generation to those entry
    /// functions (`ptxas -e NAME`; every name must be an entry of the module,
    /// or ptxas rejects the run). `line_info` adds `-lineinfo`, which keeps the
    /// PTX's `.loc` line numbers in the cubin for `nvdisasm -g`; it does not
    /// change the generated code.
    pub fn assemble_cubin(
        &self,
        ptx: &str,
        arch: &str,
        entries: &[&str],
        line_info: bool,
    ) -> Result<Assembled, PtxasError> {
        let input = TempFile::create("ptx", ptx.as_bytes())?;
        let cubin = TempFile::reserve("cubin");
        let mut command = Command::new(&self.path);
        command.arg(format!("-arch={arch}")).arg("-v");
        if line_info {
            command.arg("-lineinfo");
        }
        for entry in entries {
            command.arg("-e").arg(entry);
        }
        let output = command
            .arg(&input.path)
            .arg("-o")
            .arg(&cubin.path)
            .output()
            .map_err(|source| PtxasError::Io {
                what: format!("running {}", self.path.display()),
                source,
            })?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            let mut stderr = stderr.trim_end().to_owned();
            // A crash (killed by a signal) leaves stderr empty; say so instead
            // of producing an error with nothing after the colon.
            if stderr.is_empty() {
                stderr = format!("(no output; {})", output.status);
            }
            return Err(PtxasError::Rejected {
                arch: arch.to_owned(),
                stderr,
            });
        }
        let cubin = fs::read(&cubin.path).map_err(|source| PtxasError::Io {
            what: format!("reading the cubin ptxas wrote to {}", cubin.path.display()),
            source,
        })?;
        Ok(Assembled {
            reports: parse_report(&stderr),
            cubin,
        })
    }
}

/// What one `ptxas` run produced.
#[derive(Clone, Debug)]
pub struct Assembled {
    /// One row per entry function, sorted by kernel name.
    pub reports: Vec<EntryReport>,
    /// The cubin (an ELF file) ptxas wrote.
    pub cubin: Vec<u8>,
}

/// How to find one of NVIDIA's command-line tools.
pub(crate) struct ToolSpec {
    /// Executable name without suffix, e.g. `"ptxas"`.
    pub(crate) exe: &'static str,
    /// Environment variable naming the binary; authoritative when set.
    pub(crate) env: &'static str,
    /// Directories under Python's `purelib` where pip wheels put it.
    pub(crate) wheel_dirs: &'static [&'static str],
}

const PTXAS_TOOL: ToolSpec = ToolSpec {
    exe: "ptxas",
    env: ENV_OVERRIDE,
    wheel_dirs: &["nvidia/cu13/bin", "nvidia/cuda_nvcc/bin"],
};

/// A located tool and the version it reports.
#[derive(Debug, Clone)]
pub(crate) struct Located {
    pub(crate) path: PathBuf,
    pub(crate) version: String,
}

/// Looks for `spec`'s binary: the file named by its environment variable
/// (authoritative: if it is set but unusable, the search stops there); the
/// name on `PATH`; `$CUDA_PATH/bin`; `/usr/local/cuda/bin`; and the pip
/// wheels under the `purelib` of `python3` or `python`.
///
/// `Ok(None)` means nothing was found; `searched` then says where it looked.
/// An environment override that names no file is `Ok(None)` after noting
/// it; one that exists but does not run is an error.
pub(crate) fn locate_tool(
    spec: &ToolSpec,
    searched: &mut Vec<String>,
) -> Result<Option<Located>, PtxasError> {
    // An explicit override is authoritative: silently falling back to some
    // other binary would hide a typo and give results from the wrong toolkit.
    if let Some(value) = std::env::var_os(spec.env) {
        let path = PathBuf::from(&value);
        if !path.is_file() {
            searched.push(format!("{}={} (no such file)", spec.env, path.display()));
            return Ok(None);
        }
        let version = query_version(&path)?;
        return Ok(Some(Located { path, version }));
    }

    let exe = format!("{}{}", spec.exe, std::env::consts::EXE_SUFFIX);
    let on_path: Vec<PathBuf> = match std::env::var_os("PATH") {
        Some(path_var) => std::env::split_paths(&path_var)
            .map(|dir| dir.join(&exe))
            .collect(),
        None => {
            searched.push("PATH (not set)".to_owned());
            Vec::new()
        }
    };
    if let Some(found) = first_runnable(&on_path, searched) {
        return Ok(Some(found));
    }
    match std::env::var_os("CUDA_PATH") {
        Some(cuda) => {
            let candidate = [Path::new(&cuda).join("bin").join(&exe)];
            if let Some(found) = first_runnable(&candidate, searched) {
                return Ok(Some(found));
            }
        }
        None => searched.push("$CUDA_PATH/bin (CUDA_PATH not set)".to_owned()),
    }
    let default_toolkit = [Path::new("/usr/local/cuda/bin").join(&exe)];
    if let Some(found) = first_runnable(&default_toolkit, searched) {
        return Ok(Some(found));
    }

    // The pip wheel is looked up last because asking Python costs a
    // process spawn, and a toolkit install is the more deliberate choice.
    for python in ["python3", "python"] {
        match purelib_of(python) {
            Ok(purelib) => {
                let wheel_candidates: Vec<PathBuf> = spec
                    .wheel_dirs
                    .iter()
                    .map(|dir| purelib.join(dir).join(&exe))
                    .collect();
                if let Some(found) = first_runnable(&wheel_candidates, searched) {
                    return Ok(Some(found));
                }
            }
            Err(why) => searched.push(format!("pip package via `{python}` ({why})")),
        }
    }
    Ok(None)
}

/// Returns the first candidate that exists and answers `--version`, noting
/// every rejected one in `searched`.
fn first_runnable(candidates: &[PathBuf], searched: &mut Vec<String>) -> Option<Located> {
    for path in candidates {
        if !path.is_file() {
            searched.push(format!("{} (not found)", path.display()));
            continue;
        }
        match query_version(path) {
            Ok(version) => {
                return Some(Located {
                    path: path.clone(),
                    version,
                });
            }
            Err(err) => searched.push(format!("{} (found, but {err})", path.display())),
        }
    }
    None
}

pub(crate) fn query_version(path: &Path) -> Result<String, PtxasError> {
    let output = Command::new(path)
        .arg("--version")
        .output()
        .map_err(|source| PtxasError::Io {
            what: format!("running `{} --version`", path.display()),
            source,
        })?;
    if !output.status.success() {
        return Err(PtxasError::Io {
            what: format!("running `{} --version`", path.display()),
            source: std::io::Error::other(format!("exited with {}", output.status)),
        });
    }
    // Toolkits differ in which stream the banner goes to, so look at both.
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push('\n');
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    Ok(parse_version(&text))
}

/// Extracts the most precise version the `--version` banner offers.
fn parse_version(banner: &str) -> String {
    // "Cuda compilation tools, release 13.5, V13.5.37" carries the full version.
    for line in banner.lines() {
        if let Some((_, tail)) = line.split_once(", V") {
            let version = tail.trim();
            if !version.is_empty() {
                return version.to_owned();
            }
        }
    }
    // "Build cuda_13.5.r13.5/compiler.39125733_0" at least carries the release.
    for line in banner.lines() {
        if let Some(rest) = line.trim().strip_prefix("Build cuda_") {
            let tag = rest.split('/').next().unwrap_or_default();
            let release = tag.split(".r").next().unwrap_or_default();
            if !release.is_empty() {
                return release.to_owned();
            }
        }
    }
    banner
        .lines()
        .map(str::trim)
        .rfind(|line| !line.is_empty())
        .unwrap_or("unknown")
        .to_owned()
}

/// Asks `python` where its pure-Python site-packages live.
fn purelib_of(python: &str) -> Result<PathBuf, String> {
    let output = Command::new(python)
        .args([
            "-c",
            "import sysconfig;print(sysconfig.get_paths()[\"purelib\"])",
        ])
        .output()
        .map_err(|err| format!("could not run it: {err}"))?;
    if !output.status.success() {
        return Err(format!("sysconfig query exited with {}", output.status));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let purelib = stdout.trim();
    if purelib.is_empty() {
        return Err("sysconfig query printed nothing".to_owned());
    }
    Ok(PathBuf::from(purelib))
}

/// A uniquely named file in the temp dir, deleted on drop so that early
/// returns and errors do not leave files behind.
pub(crate) struct TempFile {
    pub(crate) path: PathBuf,
}

impl TempFile {
    /// A fresh path ending in `.EXT` that no file has yet (for a tool to write).
    pub(crate) fn reserve(ext: &str) -> TempFile {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        // The clock only adds uniqueness across processes that reuse a pid, so
        // a clock before 1970 is harmless and need not be an error.
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let name = format!(
            "warpforge-ptxas-{}-{count}-{nanos}.{ext}",
            std::process::id()
        );
        TempFile {
            path: std::env::temp_dir().join(name),
        }
    }

    /// A fresh file ending in `.EXT` holding `contents`.
    pub(crate) fn create(ext: &str, contents: &[u8]) -> Result<TempFile, PtxasError> {
        let file = TempFile::reserve(ext);
        // create_new so a name collision is an error rather than silently
        // overwriting (or following a planted symlink to) someone else's file.
        let mut handle = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&file.path)
            .map_err(|source| PtxasError::Io {
                what: format!("creating {}", file.path.display()),
                source,
            })?;
        handle
            .write_all(contents)
            .map_err(|source| PtxasError::Io {
                what: format!("writing {}", file.path.display()),
                source,
            })?;
        Ok(file)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        // Best effort: a reserved file does not exist when its tool failed.
        let _ = fs::remove_file(&self.path);
    }
}

/// Parses the stderr of `ptxas -v` into one row per entry function, sorted by
/// kernel name (ties keep their order of appearance).
///
/// Only blocks introduced by `Compiling entry function 'NAME' for 'ARCH'`
/// produce rows. `Function properties for X` blocks of non-entry functions
/// (e.g. panic handlers that were not inlined) are skipped. Missing figures,
/// such as an absent `used N barriers`, are reported as 0.
pub fn parse_report(stderr: &str) -> Vec<EntryReport> {
    let mut rows: Vec<EntryReport> = Vec::new();
    // Whether the lines being read describe the last entry in `rows`. A
    // "Function properties" header for a different function switches this
    // off, so a helper's stack frame is not charged to the kernel before it.
    let mut in_entry = false;

    for line in stderr.lines() {
        let Some(body) = info_body(line) else {
            continue;
        };
        if let Some((kernel, arch)) = entry_header(body) {
            rows.push(EntryReport {
                kernel: kernel.to_owned(),
                arch: arch.to_owned(),
                registers: 0,
                spill_stores: 0,
                spill_loads: 0,
                stack_frame: 0,
                static_shared: 0,
                barriers: 0,
            });
            in_entry = true;
            continue;
        }
        if let Some(function) = body.strip_prefix("Function properties for ") {
            in_entry = rows.last().is_some_and(|row| row.kernel == function.trim());
            continue;
        }
        if !in_entry {
            continue;
        }
        let Some(row) = rows.last_mut() else {
            continue;
        };
        for item in body.split(',') {
            apply_figure(row, item);
        }
    }

    rows.sort_by(|a, b| a.kernel.cmp(&b.kernel));
    rows
}

/// Returns the informative part of a `ptxas -v` line, or `None` for lines that
/// carry no per-function data (warnings, errors).
fn info_body(line: &str) -> Option<&str> {
    let trimmed = line.trim();
    if let Some(rest) = trimmed.strip_prefix("ptxas") {
        // "ptxas info    : ..." — anything else prefixed "ptxas" is a
        // warning or error, whose numbers must not be mistaken for usage.
        let (kind, body) = rest.split_once(':')?;
        return (kind.trim() == "info").then_some(body.trim());
    }
    // The stack/spill figures come on an indented continuation line.
    (!trimmed.is_empty()).then_some(trimmed)
}

/// Recognises `Compiling entry function 'NAME' for 'ARCH'`.
fn entry_header(body: &str) -> Option<(&str, &str)> {
    let rest = body.strip_prefix("Compiling entry function '")?;
    let (kernel, rest) = rest.split_once("' for '")?;
    let arch = rest.strip_suffix('\'')?;
    Some((kernel, arch))
}

/// Applies one comma-separated figure such as `used 1 barriers` or
/// `128 bytes smem` to `row`; unknown figures (cmem, cumulative stack) are
/// ignored.
fn apply_figure(row: &mut EntryReport, item: &str) {
    let mut words = item.split_whitespace().peekable();
    if words.peek().is_some_and(|w| w.eq_ignore_ascii_case("used")) {
        words.next();
    }
    let Some(Ok(value)) = words.next().map(str::parse::<u64>) else {
        return;
    };
    let unit: Vec<&str> = words.collect();
    let narrow = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    match unit.as_slice() {
        ["registers" | "register"] => row.registers = narrow(value),
        ["barriers" | "barrier"] => row.barriers = narrow(value),
        ["bytes", "stack", "frame"] => row.stack_frame = value,
        ["bytes", "spill", "stores"] => row.spill_stores = value,
        ["bytes", "spill", "loads"] => row.spill_loads = value,
        ["bytes", "smem"] => row.static_shared = value,
        _ => {}
    }
}

/// Renders rows as a fixed-width text table with the columns kernel, arch,
/// registers, spill stores, spill loads, stack, static smem and barriers.
///
/// Columns are as wide as their widest cell; text is left-aligned and numbers
/// right-aligned. The output is a header line, a rule, and one line per row.
pub fn render_table(rows: &[EntryReport]) -> String {
    const HEADERS: [&str; 8] = [
        "kernel",
        "arch",
        "registers",
        "spill stores",
        "spill loads",
        "stack",
        "static smem",
        "barriers",
    ];
    // Only the first two columns are text; the rest read better right-aligned.
    const TEXT_COLUMNS: usize = 2;

    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            [
                r.kernel.clone(),
                r.arch.clone(),
                r.registers.to_string(),
                r.spill_stores.to_string(),
                r.spill_loads.to_string(),
                r.stack_frame.to_string(),
                r.static_shared.to_string(),
                r.barriers.to_string(),
            ]
        })
        .collect();

    let mut widths = HEADERS.map(|h| h.chars().count());
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }

    let mut out = String::new();
    let header: Vec<String> = HEADERS.iter().map(|h| (*h).to_owned()).collect();
    push_line(&mut out, &header, &widths, TEXT_COLUMNS);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    push_line(&mut out, &rule, &widths, TEXT_COLUMNS);
    for row in &cells {
        push_line(&mut out, row, &widths, TEXT_COLUMNS);
    }
    out
}

fn push_line(out: &mut String, cells: &[String], widths: &[usize], text_columns: usize) {
    let mut line = String::new();
    for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
        if i > 0 {
            line.push_str("  ");
        }
        if i < text_columns {
            line.push_str(&format!("{cell:<width$}"));
        } else {
            line.push_str(&format!("{cell:>width$}"));
        }
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
ptxas info    : 197 bytes gmem, 64 bytes cmem[4]
ptxas info    : Compiling entry function 'sum_f32' for 'sm_80'
ptxas info    : Function properties for sum_f32
    32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 24 registers, used 1 barriers, 32 bytes cumulative stack size, 384 bytes cmem[0]
ptxas info    : Compile time = 10.406 ms
ptxas info    : Function properties for _RNvCseulmdZsCeCG_7___rustc17rust_begin_unwind
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'axpy_f64' for 'sm_80'
ptxas info    : Function properties for axpy_f64
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 392 bytes cmem[0]
ptxas info    : Compile time = 2.688 ms
";

    #[test]
    fn parses_entries_sorted_by_name() {
        let rows = parse_report(SAMPLE);

        let row = |kernel: &str, registers, barriers, stack_frame| EntryReport {
            kernel: kernel.to_owned(),
            arch: "sm_80".to_owned(),
            registers,
            spill_stores: 0,
            spill_loads: 0,
            stack_frame,
            static_shared: 0,
            barriers,
        };
        assert_eq!(
            rows,
            vec![row("axpy_f64", 24, 0, 0), row("sum_f32", 24, 1, 32)]
        );
    }

    #[test]
    fn non_entry_function_blocks_are_not_rows() {
        let rows = parse_report(SAMPLE);
        assert!(rows.iter().all(|r| !r.kernel.contains("rust_begin_unwind")));
    }

    #[test]
    fn non_entry_stack_frame_is_not_charged_to_preceding_entry() {
        let text = "\
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers
ptxas info    : Function properties for helper
    64 bytes stack frame, 16 bytes spill stores, 16 bytes spill loads
";
        let rows = parse_report(text);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].stack_frame, 0);
        assert_eq!(rows[0].spill_stores, 0);
        assert_eq!(rows[0].registers, 10);
        assert_eq!(rows[0].barriers, 0);
    }

    #[test]
    fn parses_smem_and_spills() {
        let text = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'tiled' for 'sm_90a'
ptxas info    : Function properties for tiled
    48 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 128 bytes smem, 384 bytes cmem[0]
ptxas info    : Compile time = 1.000 ms
";
        let rows = parse_report(text);
        assert_eq!(
            rows,
            vec![EntryReport {
                kernel: "tiled".to_owned(),
                arch: "sm_90a".to_owned(),
                registers: 32,
                spill_stores: 8,
                spill_loads: 4,
                stack_frame: 48,
                static_shared: 128,
                barriers: 1,
            }]
        );
    }

    #[test]
    fn warnings_are_ignored() {
        let text = "\
ptxas warning : For profile sm_80 adjusting per thread register count of 16 to lower bound of 24
ptxas info    : Compiling entry function 'k' for 'sm_80'
ptxas info    : Used 24 registers
";
        let rows = parse_report(text);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].registers, 24);
    }

    #[test]
    fn empty_input_gives_no_rows() {
        assert!(parse_report("").is_empty());
    }

    #[test]
    fn table_has_header_and_one_line_per_row() {
        let rows = parse_report(SAMPLE);
        let table = render_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2 + rows.len());

        let header = lines[0];
        for column in [
            "kernel",
            "arch",
            "registers",
            "spill stores",
            "spill loads",
            "stack",
            "static smem",
            "barriers",
        ] {
            assert!(header.contains(column), "header lacks {column:?}: {header}");
        }
        assert!(lines[1].chars().all(|c| c == '-' || c == ' '));
        assert!(lines[2].starts_with("axpy_f64"));
        assert!(lines[3].starts_with("sum_f32"));
        // Fixed width: every data line lines up with the rule beneath the header.
        let rule_len = lines[1].len();
        assert!(lines[2..].iter().all(|l| l.len() == rule_len));
    }

    #[test]
    fn table_of_no_rows_is_just_the_header() {
        assert_eq!(render_table(&[]).lines().count(), 2);
    }

    #[test]
    fn version_from_banner() {
        let banner = "\
ptxas: NVIDIA (R) Ptx optimizing assembler
Copyright (c) 2005-2026 NVIDIA Corporation
Built on Mon_Oct_12_19:25:48_PDT_2026
Cuda compilation tools, release 13.5, V13.5.37
Build cuda_13.5.r13.5/compiler.39125733_0
";
        assert_eq!(parse_version(banner), "13.5.37");
        assert_eq!(
            parse_version("Build cuda_13.5.r13.5/compiler.39125733_0\n"),
            "13.5"
        );
    }

    #[test]
    fn not_found_message_names_places_and_fix() {
        let err = PtxasError::NotFound {
            searched: vec!["/usr/local/cuda/bin/ptxas (not found)".to_owned()],
        };
        let msg = err.to_string();
        assert!(msg.contains("/usr/local/cuda/bin/ptxas"));
        assert!(msg.contains("pip install nvidia-cuda-nvcc"));
        assert!(msg.contains("WARPFORGE_PTXAS"));
    }
}
