//! The operations `verify` and `bench` know, in one table.
//!
//! Each [`Operation`] names a family of the library's kernels and carries
//! what the tools need to check and measure it: its verification (the cases,
//! the independent CPU reference and the tolerance, one [`KernelReport`] per
//! kernel) and, where it has one, its benchmark (the sizes and the anchor it
//! is compared with in the same run). `warpforge verify [--op NAME]`,
//! [`crate::verify::run`] and `warpforge bench NAME` walk [`OPERATIONS`], so a
//! new family (GEMM, conv2d) is one more entry here, not another path through
//! the tools.
//!
//! ```
//! use warpforge_tools::registry::{self, OPERATIONS};
//! let names: Vec<&str> = OPERATIONS.iter().map(|op| op.name).collect();
//! assert_eq!(names, ["axpy", "reduce", "gemm", "conv2d"]);
//! assert!(registry::operation("reduce").unwrap().bench.is_some());
//! let e = registry::operation("gemv").unwrap_err();
//! assert!(e.to_string().contains("axpy, reduce, gemm, conv2d"), "{e}");
//! ```

use crate::bench::conv2d::ConvBench;
use crate::bench::{self, AxpyBench, BenchReport, GemmBench, ReduceBench, Timing};
use crate::verify::{self, KernelReport};
use rand::rngs::StdRng;
use std::collections::BTreeSet;
use warpforge::ptx::{DispatchEntry, dispatch_table};
use warpforge::{Device, Error, Result};

/// One family of kernels as `verify` and `bench` see it.
#[derive(Debug)]
pub struct Operation {
    /// The name the tools take (`warpforge verify --op NAME`, `warpforge bench NAME`).
    pub name: &'static str,
    /// One line: the kernels it covers and how they are checked.
    pub summary: &'static str,
    /// Runs every kernel of the family on the device at the given lengths
    /// (the edge lengths first, then random ones; see [`verify::lengths`]),
    /// with inputs drawn from the generator, against its CPU reference.
    pub verify: fn(&Device, &mut StdRng, &[usize]) -> Result<Vec<KernelReport>>,
    /// The kernels `verify` launches on the device at the edge lengths,
    /// declared without running anything (what `warpforge verify --list`
    /// reports as covered); the tests check the declaration against the
    /// launches [`KernelReport::launched`] records.
    pub kernels: fn(&Device) -> Result<Vec<&'static str>>,
    /// Its benchmark, if it has one.
    pub bench: Option<Bench>,
}

/// An operation's benchmark: its default sizes for the device, optionally
/// capped at 2^`max_log2` elements, timed as [`Timing`] says.
#[derive(Debug)]
pub struct Bench {
    /// One line: what is measured, in which unit, against which anchor.
    pub summary: &'static str,
    /// Runs it on the device as the options say.
    pub run: fn(&Device, &BenchOptions) -> Result<BenchReport>,
}

/// What `warpforge bench NAME` asks of a benchmark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchOptions {
    /// Sizes up to 2^`max_log2` (each benchmark's meaning: [`Bench::summary`]);
    /// `None`: the benchmark's default for the device.
    pub max_log2: Option<u32>,
    /// How each case is timed.
    pub timing: Timing,
    /// gemm: `(trans_a, trans_b)`, the same for both libraries
    /// ([`GemmBench::trans`]). The other benchmarks have no transposes:
    /// `warpforge bench` refuses `--trans` for them.
    pub trans: (bool, bool),
    /// gemm: only these kinds of rows ([`GemmBench::only`], names of
    /// [`bench::GEMM_KINDS`]); empty: every kind. Refused for the others
    /// as `trans` is.
    pub only: Vec<String>,
}

impl BenchOptions {
    /// The benchmark's defaults for `dev`: its sizes and [`Timing::defaults`],
    /// no transposes, every kind of row.
    pub fn defaults(dev: &Device) -> BenchOptions {
        BenchOptions {
            max_log2: None,
            timing: Timing::defaults(dev),
            trans: (false, false),
            only: Vec::new(),
        }
    }
}

/// Every operation, in the order `verify` reports them.
pub static OPERATIONS: &[Operation] = &[
    Operation {
        name: "axpy",
        summary: "axpy_f32 and axpy_f64: each element the exact a·x + y rounded once",
        verify: verify::verify_axpy,
        kernels: verify::axpy_kernels,
        bench: Some(Bench {
            summary: "axpy_f32 at 2^16 … 2^N elements, GB/s (x, y read, y written) against \
                      the device-to-device copy of the same size",
            run: |dev, options| {
                let mut config = AxpyBench::defaults(dev);
                if let Some(n) = options.max_log2 {
                    config = config.with_max_log2(n)?;
                }
                config.timing = options.timing;
                bench::axpy(dev, &config)
            },
        }),
    },
    Operation {
        name: "reduce",
        summary: "every reduction op × dtype, whole-tensor and along an inner, outer and \
                  middle axis, against exact intervals",
        verify: verify::verify_reductions,
        kernels: verify::reduction_kernel_names,
        bench: Some(Bench {
            summary: "sum/max/argmax of f32 and bf16, whole-tensor at 2^16 … 2^N elements and \
                      along each axis of a matrix of 2^min(N, 26), GB/s (bytes read) against \
                      the device-to-device copy of the same tensor",
            run: |dev, options| {
                let mut config = ReduceBench::defaults(dev);
                if let Some(n) = options.max_log2 {
                    config = config.with_max_log2(n)?;
                }
                config.timing = options.timing;
                bench::reduce(dev, &config)
            },
        }),
    },
    Operation {
        name: "gemm",
        summary: "gemm f32, f64 (SIMT and FP64 tensor cores), f32 through TF32 and f16/bf16 \
                  into f32/f16/bf16 (tensor cores) × NN, NT, TN, TT: edge shapes around the tile, leading \
                  dimensions past the row length, beta = 0 over a NaN C, against an f64 \
                  reference (exact for integer inputs, else within a bound from k and dtype)",
        verify: verify::verify_gemm,
        kernels: verify::gemm_kernels,
        bench: Some(Bench {
            summary: "gemm f32 (SIMT, TF32 rounded, and TF32 truncated where the Hopper kernel \
                      runs), f64, f16 and bf16 (NN, or --trans), squares 2^8 … 2^N and \
                      three rectangular shapes of side 2^(N−1) (N = 13: 4096×4096×11008, 8192×1024×4096, \
                      128×4096×4096), TFLOP/s (2·m·n·k / time) against cuBLAS (sgemm, dgemm, \
                      GemmEx) in the same run where it loads",
            run: |dev, options| {
                let mut config = GemmBench::defaults(dev);
                if let Some(n) = options.max_log2 {
                    config = config.with_max_log2(n)?;
                }
                if !options.only.is_empty() {
                    let kinds: Vec<&str> = options.only.iter().map(String::as_str).collect();
                    config = config.only(&kinds)?;
                }
                config.trans = options.trans;
                config.timing = options.timing;
                bench::gemm(dev, &config)
            },
        }),
    },
    Operation {
        name: "conv2d",
        summary: "conv2d NCHW and NHWC × f32, f16, bf16: dense, stride, asymmetric padding, \
                  dilation, groups, depthwise, 1×1, bias and ReLU, one report per kernel, \
                  against an f64 seven-loop reference (exact for integer inputs, else within a \
                  bound from C·R·S/G and dtype)",
        verify: verify::verify_conv2d,
        kernels: verify::conv2d_kernels,
        bench: Some(Bench {
            summary: "ResNet-50's convolutions at batch 32 (conv1 7×7/2, the 3×3 and 1×1 \
                      layers, a depthwise 3×3), NHWC f16 and NCHW f32, TFLOP/s (GB/s for \
                      depthwise) against cuDNN's fastest measured algorithm in the same run \
                      where it loads; N caps each layer at 2^N multiply-adds (emulator: 16)",
            run: |dev, options| {
                let mut config = ConvBench::defaults(dev);
                if let Some(n) = options.max_log2 {
                    config = config.with_max_log2(n)?;
                }
                config.timing = options.timing;
                bench::conv2d::conv2d(dev, &config)
            },
        }),
    },
];

/// A kernel of the device's dispatch table ([`dispatch_table`]) and the
/// first operation whose verification covers it (declares it: [`Operation::kernels`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coverage {
    /// The kernel and its module.
    pub entry: DispatchEntry,
    /// The operation whose `verify` launches it; `None`: none does.
    pub operation: Option<&'static str>,
}

/// Every kernel the library can dispatch to on `dev` ([`dispatch_table`] of
/// its compute capability: on sm_90 and the emulator of sm_90, the Hopper
/// kernels too), each with the first of `operations` that declares it;
/// runs nothing. What `warpforge verify --list` prints.
pub fn coverage(dev: &Device, operations: &[&Operation]) -> Result<Vec<Coverage>> {
    let declared = operations
        .iter()
        .map(|op| Ok((op.name, (op.kernels)(dev)?)))
        .collect::<Result<Vec<_>>>()?;
    Ok(dispatch_table(dev.compute_capability())
        .into_iter()
        .map(|entry| Coverage {
            entry,
            operation: declared
                .iter()
                .find(|(_, kernels)| kernels.contains(&entry.kernel))
                .map(|&(name, _)| name),
        })
        .collect())
}

/// The entries of `table` that are not in `covered` (kernel names), in table order.
///
/// ```
/// use std::collections::BTreeSet;
/// use warpforge::ptx::DispatchEntry;
/// use warpforge_tools::registry::not_covered;
/// let entry = |kernel| DispatchEntry { module: "m", kernel };
/// let table = [entry("a"), entry("b"), entry("c")];
/// let launched: BTreeSet<&str> = ["a", "c", "z"].into();
/// assert_eq!(not_covered(&table, &launched), [entry("b")]);
/// ```
pub fn not_covered(table: &[DispatchEntry], covered: &BTreeSet<&str>) -> Vec<DispatchEntry> {
    table
        .iter()
        .filter(|e| !covered.contains(e.kernel))
        .copied()
        .collect()
}

/// The names of every operation, comma-separated (for messages).
pub fn names() -> String {
    OPERATIONS
        .iter()
        .map(|op| op.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The operation called `name`; an error listing the known ones otherwise.
pub fn operation(name: &str) -> Result<&'static Operation> {
    OPERATIONS
        .iter()
        .find(|op| op.name == name)
        .ok_or_else(|| Error::UnknownOperation {
            name: name.to_owned(),
            known: names(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{AXPY, COPY};
    use rand::SeedableRng;
    use warpforge::ptx::DispatchEntry;

    #[test]
    fn names_are_unique_and_found() {
        for (i, op) in OPERATIONS.iter().enumerate() {
            assert!(
                OPERATIONS[..i].iter().all(|other| other.name != op.name),
                "{} twice",
                op.name
            );
            assert!(std::ptr::eq(operation(op.name).unwrap(), op));
        }
        assert!(matches!(
            operation("Reduce"),
            Err(Error::UnknownOperation { .. })
        ));
    }

    /// The coverage test (`verify` must run every kernel the library can
    /// dispatch to): every operation at the edge lengths on the emulator of
    /// sm_90 (the default, so the Hopper kernels are in its dispatch table),
    /// each report passing under a name of its own; the kernels each
    /// operation's reports launched are exactly those it declares
    /// ([`Operation::kernels`], what `verify --list` shows); a report named
    /// after a kernel launched it; and together they launched every kernel
    /// of the dispatch table, and nothing outside it.
    #[test]
    fn verify_launches_every_kernel_of_the_dispatch_table_as_declared() {
        let dev = Device::emulator();
        assert_eq!(dev.compute_capability(), (9, 0));
        let table = dispatch_table(dev.compute_capability());
        let in_table = |k: &str| table.iter().any(|e| e.kernel == k);
        let mut rng = StdRng::seed_from_u64(7);
        let mut seen: Vec<&str> = Vec::new();
        let mut launched: BTreeSet<&str> = BTreeSet::new();
        for op in OPERATIONS {
            let reports = (op.verify)(&dev, &mut rng, verify::EDGE_LENGTHS).unwrap();
            assert!(!reports.is_empty(), "{}", op.name);
            if op.name == "gemm" {
                check_gemm_reports(&reports);
            }
            let mut by_op: BTreeSet<&str> = BTreeSet::new();
            for r in reports {
                assert!(r.passed(), "{}: {:?}", r.kernel, r.failure);
                assert!(!r.lengths.is_empty(), "{}", r.kernel);
                assert!(!seen.contains(&r.kernel), "{} reported twice", r.kernel);
                assert!(!r.launched.is_empty(), "{} launched nothing", r.kernel);
                if in_table(r.kernel) {
                    assert!(r.launched.contains(&r.kernel), "{r:?}");
                }
                seen.push(r.kernel);
                by_op.extend(&r.launched);
            }
            let declared: BTreeSet<&str> = (op.kernels)(&dev).unwrap().into_iter().collect();
            assert_eq!(
                by_op.difference(&declared).collect::<Vec<_>>(),
                Vec::<&&str>::new(),
                "{}: launched but not declared",
                op.name
            );
            assert_eq!(
                declared.difference(&by_op).collect::<Vec<_>>(),
                Vec::<&&str>::new(),
                "{}: declared but not launched",
                op.name
            );
            launched.extend(by_op);
        }
        let missing = not_covered(&table, &launched);
        assert!(missing.is_empty(), "not covered by verify: {missing:#?}");
        let outside: Vec<&&str> = launched.iter().filter(|k| !in_table(k)).collect();
        assert!(
            outside.is_empty(),
            "launched, not in the table: {outside:?}"
        );
        // The 42 Hopper kernels (wgmma, wide and narrow: 4 type pairs × 4
        // transposes and tf32's one; its two K-major copies; f64 m16n8k16:
        // 4 transposes; the wgmma convolutions: f16, bf16) among them.
        let hopper: Vec<&DispatchEntry> = table
            .iter()
            .filter(|e| e.module == warpforge::ptx::HOPPER.name)
            .collect();
        assert_eq!(hopper.len(), 42, "{hopper:?}");
        assert!(hopper.iter().all(|e| seen.contains(&e.kernel)));
        // `verify::run` walks the operations in order.
        let axpy = operation("axpy").unwrap();
        let run = verify::run(&dev, &[axpy], 7, 0, 0).unwrap();
        let names: Vec<&str> = run.iter().map(|r| r.kernel).collect();
        assert_eq!(names, ["axpy_f32", "axpy_f64"]);
    }

    /// `verify --list`'s table without running anything: on the emulator of
    /// sm_90 every kernel covered, the Hopper ones by `gemm`; on sm_80 no
    /// Hopper kernels at all; and a kernel no operation declares is listed
    /// as not covered (here: `gemm` left out).
    #[test]
    fn the_list_marks_each_kernel_with_the_operation_that_covers_it() {
        let all: Vec<&Operation> = OPERATIONS.iter().collect();
        let h100 = Device::emulator();
        let rows = coverage(&h100, &all).unwrap();
        assert_eq!(rows.len(), dispatch_table((9, 0)).len());
        let missing: Vec<&Coverage> = rows.iter().filter(|r| r.operation.is_none()).collect();
        assert!(missing.is_empty(), "{missing:#?}");
        let wgmma = |rows: &[Coverage]| {
            rows.iter()
                .filter(|r| r.entry.kernel.starts_with("gemm_wgmma_"))
                .map(|r| r.operation)
                .collect::<Vec<_>>()
        };
        assert_eq!(wgmma(&rows), [Some("gemm"); 34]);
        let a100 = Device::emulator_for(warpforge::Arch::Sm80);
        let rows_80 = coverage(&a100, &all).unwrap();
        assert!(wgmma(&rows_80).is_empty());
        // The Hopper module: 34 wgmma GEMM kernels (17 wide, 17 narrow),
        // tf32's 2 copies, 4 f64 m16n8k16 ones and 2 wgmma convolutions, the
        // last covered by conv2d.
        assert_eq!(rows_80.len() + 42, rows.len());
        let conv_wgmma: Vec<Option<&str>> = rows
            .iter()
            .filter(|r| r.entry.kernel.starts_with("conv2d_wgmma_"))
            .map(|r| r.operation)
            .collect();
        assert_eq!(conv_wgmma, [Some("conv2d"); 2]);
        assert!(rows_80.iter().all(|r| r.operation.is_some()));
        let without_gemm: Vec<&Operation> =
            OPERATIONS.iter().filter(|op| op.name != "gemm").collect();
        let rows = coverage(&h100, &without_gemm).unwrap();
        assert_eq!(wgmma(&rows), [None; 34]);
        let covered = |kernel: &str| {
            rows.iter()
                .find(|r| r.entry.kernel == kernel)
                .unwrap()
                .operation
        };
        assert_eq!(covered("gemm_split_k_sum_f32"), None);
        // conv2d's 1×1 route runs the small tile's GEMMs: those stay covered.
        assert_eq!(covered("gemm_f16_f16_nt_64x64x32_s3"), Some("conv2d"));
        assert_eq!(covered("axpy_f64"), Some("axpy"));
    }

    #[test]
    fn the_axpy_bench_moves_three_vectors_against_a_two_vector_copy() {
        let dev = Device::emulator();
        let options = BenchOptions {
            max_log2: Some(11),
            timing: Timing {
                warmup: 0,
                iters: 1,
                reps: 1,
            },
            ..BenchOptions::defaults(&dev)
        };
        let run = operation("axpy").unwrap().bench.as_ref().unwrap().run;
        let report = run(&dev, &options).unwrap();
        let cases: Vec<(&str, Vec<usize>)> = report
            .rows
            .iter()
            .map(|r| (r.op, r.shape.clone()))
            .collect();
        assert_eq!(cases, [(COPY, vec![1 << 11]), (AXPY, vec![1 << 11])]);
        assert_eq!(
            report.rows[0].bytes,
            (2 * 4) << 11,
            "copy: read n, write n f32"
        );
        assert_eq!(
            report.rows[1].bytes,
            (3 * 4) << 11,
            "axpy: read x and y, write y"
        );
        assert_eq!(report.rows[1].anchor_gbps, report.rows[0].gbps);
        assert!(report.skipped.is_empty());
        assert!(report.notes.is_empty());
        assert!(report.rows.iter().all(|r| r.flops.is_none()));
    }

    /// `gemm`'s reports at the edge lengths on the emulator of sm_90 (from
    /// the coverage test's run, which makes them once): every dtype pair,
    /// configuration and transpose, the Hopper kernels, split-k's sums.
    fn check_gemm_reports(reports: &[KernelReport]) {
        let names: Vec<&str> = reports.iter().map(|r| r.kernel).collect();
        let mut expected: Vec<String> = Vec::new();
        for (types, tile) in [
            ("f32", "64x64x16"),
            ("f32", "128x128x8"),
            ("f64", "64x64x8"),
            ("dmma_f64", "64x64x16_s3"),
            ("dmma16_f64", "128x64x16_s3"),
            ("f16_f32", "64x64x32_s3"),
            ("f16_f16", "64x64x32_s3"),
            ("f16_bf16", "64x64x32_s3"),
            ("bf16_f32", "64x64x32_s3"),
            ("bf16_f16", "64x64x32_s3"),
            ("bf16_bf16", "64x64x32_s3"),
            ("f16_f32", "128x128x32_s4"),
            ("f16_f16", "128x128x32_s4"),
            ("bf16_f32", "128x128x32_s4"),
            ("bf16_bf16", "128x128x32_s4"),
            ("f16_f32", "128x256x32_s3"),
            ("f16_f16", "128x256x32_s3"),
            ("bf16_f32", "128x256x32_s3"),
            ("bf16_bf16", "128x256x32_s3"),
            ("tf32_f32", "64x64x16_s3"),
            ("tf32_f32", "128x128x16_s4"),
            ("wgmma_f16_f32", "128x256x64_s4"),
            ("wgmma_f16_f16", "128x256x64_s4"),
            ("wgmma_bf16_f32", "128x256x64_s4"),
            ("wgmma_bf16_bf16", "128x256x64_s4"),
            ("wgmma_f16_f32", "128x128x64_s4"),
            ("wgmma_f16_f16", "128x128x64_s4"),
            ("wgmma_bf16_f32", "128x128x64_s4"),
            ("wgmma_bf16_bf16", "128x128x64_s4"),
        ] {
            for t in ["nn", "nt", "tn", "tt"] {
                expected.push(format!("gemm_{types}_{t}_{tile}"));
            }
        }
        // TF32 on Hopper: the two K-major copies, then the NT kernels, wide
        // and narrow.
        expected.extend(
            [
                "tf32_k_major_rows",
                "tf32_k_major_cols",
                "gemm_wgmma_tf32_f32_nt_128x256x32_s4",
                "gemm_wgmma_tf32_f32_nt_128x128x32_s4",
            ]
            .map(String::from),
        );
        for out in ["f32", "f16", "bf16", "f64"] {
            expected.push(format!("gemm_split_k_sum_{out}"));
        }
        assert_eq!(names, expected, "{names:?}");
        let (kernels, sums) = reports.split_at(120);
        let (kernels, tf32) = kernels.split_at(116);
        let (kernels, hopper) = kernels.split_at(84);
        // The tf32 family: each copy with a GEMM on its transposes' 5 cases
        // (NT: both copies by rows, the wide GEMM; TN: by columns, the
        // narrow one), each GEMM on NN's and TT's (one copy of each kind).
        let (wide, narrow) = (
            "gemm_wgmma_tf32_f32_nt_128x256x32_s4",
            "gemm_wgmma_tf32_f32_nt_128x128x32_s4",
        );
        let (rows, cols) = ("tf32_k_major_rows", "tf32_k_major_cols");
        for (r, (launched, cases)) in tf32.iter().zip([
            (vec![wide, rows], 5),
            (vec![narrow, cols], 5),
            (vec![wide, cols, rows], 10),
            (vec![narrow, cols, rows], 10),
        ]) {
            assert!(r.passed(), "{}: {:?}", r.kernel, r.failure);
            let mut got = r.launched.clone();
            got.sort();
            assert_eq!(got, launched, "{r:?}");
            assert_eq!(r.lengths.len(), cases, "{r:?}");
        }
        // The Hopper kernels (the emulator is an sm_90): each launched alone,
        // pinned on its 5 cases; bf16 → f32 NN once more as the default
        // dispatch picks it.
        for r in hopper {
            assert!(r.passed(), "{}: {:?}", r.kernel, r.failure);
            assert_eq!(r.launched, [r.kernel], "{r:?}");
            let default = r.kernel == "gemm_wgmma_bf16_f32_nn_128x256x64_s4";
            assert_eq!(r.lengths.len(), if default { 6 } else { 5 }, "{r:?}");
        }
        // Split-k's sums: 4 transposes × 4 shapes per input pair (f32: from
        // f16, bf16 and f32), and on this sm_90 4 transposes × 3 shapes of
        // the Hopper split per f16/bf16 pair; none of them empty.
        for (r, (pairs, hopper_pairs)) in sums.iter().zip([(3, 2), (1, 1), (1, 1), (1, 0)]) {
            assert!(r.passed(), "{}: {:?}", r.kernel, r.failure);
            assert_eq!(r.lengths.len(), 16 * pairs + 12 * hopper_pairs, "{r:?}");
            assert!(r.lengths.iter().all(|&l| l > 0), "{r:?}");
        }
        for r in kernels {
            assert!(r.passed(), "{}: {:?}", r.kernel, r.failure);
            // The edge shapes: m·n·k of 0 (three of them), 1, and larger ones.
            assert_eq!(r.lengths.iter().filter(|&&l| l == 0).count(), 3, "{r:?}");
            assert!(r.lengths.contains(&1), "{r:?}");
            assert!(r.worst_vs_tolerance <= 1.0, "{r:?}");
        }
    }

    #[test]
    fn gemm_verifies_a_random_shape_per_random_length_and_no_hopper_kernel_on_sm80() {
        // A random length adds one random shape per kernel; an sm_80 has no
        // Hopper kernels to check.
        let mut rng = StdRng::seed_from_u64(3);
        let a100 = Device::emulator_for(warpforge::Arch::Sm80);
        let reports =
            verify::verify_gemm(&a100, &mut rng, &[verify::EDGE_LENGTHS, &[3000]].concat())
                .unwrap();
        assert_eq!(reports.len(), 84);
        assert!(!reports.iter().any(|r| r.kernel.contains("wgmma")));
        assert!(
            reports[..80]
                .iter()
                .all(|r| r.passed() && r.lengths.len() == 11)
        );
    }

    #[test]
    fn the_gemm_bench_counts_2mnk_flops_and_skips_cublas_on_the_emulator() {
        let dev = Device::emulator();
        let options = BenchOptions {
            max_log2: Some(4),
            timing: Timing {
                warmup: 0,
                iters: 1,
                reps: 1,
            },
            ..BenchOptions::defaults(&dev)
        };
        let run = operation("gemm").unwrap().bench.as_ref().unwrap().run;
        let report = run(&dev, &options).unwrap();
        // N = 4: the square 16, then 8×8×21, 16×2×8, 1×8×8; f32, f32
        // through TF32 rounded and truncated (this sm_90 runs the Hopper
        // kernel), f64 (on its FP64 tensor cores), then f16 and bf16 into
        // f32 and into their own type.
        let shapes = [[16, 16, 16], [8, 8, 21], [16, 2, 8], [1, 8, 8]];
        let measured: Vec<(&str, Vec<usize>)> = report
            .rows
            .iter()
            .map(|r| (r.op, r.shape.clone()))
            .collect();
        let expected: Vec<(&str, Vec<usize>)> = [
            "gemm_f32_nn_64x64x16",
            "gemm_tf32_f32_nn_64x64x16_s3",
            bench::TRUNCATED_TF32_NAMES[1][0],
            "gemm_dmma16_f64_nn_128x64x16_s3",
            "gemm_f16_f32_nn_64x64x32_s3",
            "gemm_f16_f16_nn_64x64x32_s3",
            "gemm_bf16_f32_nn_64x64x32_s3",
            "gemm_bf16_bf16_nn_64x64x32_s3",
        ]
        .into_iter()
        .flat_map(|k| shapes.iter().map(move |s| (k, s.to_vec())))
        .collect();
        assert_eq!(measured, expected);
        for r in &report.rows {
            let [m, n, k] = [r.shape[0], r.shape[1], r.shape[2]];
            // A and B read in the input type, C written in the output type.
            let size = |t: &str| match t {
                "f64" => 8,
                "f32" | "tf32" => 4,
                _ => 2,
            };
            // `[truncated_nn ]gemm_[dmma16_|wgmma_]TIN[_TOUT]_…`: f64 on the
            // FP64 tensor cores (the emulator is an sm_90: its m16n8k16) is
            // `gemm_dmma16_f64_…`, truncated TF32 the Hopper kernel.
            let kernel = r.op.rsplit(' ').next().unwrap();
            let types: Vec<&str> = kernel
                .split('_')
                .skip(1)
                .skip_while(|&t| t.starts_with("dmma") || t == "wgmma")
                .take_while(|t| t.starts_with(['f', 'b', 't']))
                .collect();
            let (input, output) = (types[0], *types.last().unwrap());
            assert_eq!(r.flops, Some(2 * (m * n * k) as u64), "{r:?}");
            assert_eq!(
                r.bytes,
                (size(input) * (m * k + k * n) + size(output) * m * n) as u64,
                "{r:?}"
            );
            let tflops = r.tflops().unwrap();
            assert!(tflops > 0.0 && tflops.is_finite(), "{r:?}");
            assert!(
                r.ratio.is_nan() && r.anchor_gbps.is_nan(),
                "no anchor: {r:?}"
            );
        }
        // Every cuBLAS case is a skip that says why, and the report says it once.
        assert_eq!(report.skipped.len(), 28);
        for s in &report.skipped {
            assert!(s.case.op.starts_with("cublas_"), "{s:?}");
            assert_eq!(s.reason, "cuBLAS: not available on the emulator");
        }
        assert_eq!(report.notes, ["cuBLAS: not available on the emulator"]);
    }

    #[test]
    fn conv2d_covers_both_layouts_every_dtype_and_its_bench_runs_without_cudnn() {
        let dev = Device::emulator();
        let mut rng = StdRng::seed_from_u64(9);
        let op = operation("conv2d").unwrap();
        let reports = (op.verify)(&dev, &mut rng, verify::EDGE_LENGTHS).unwrap();
        for layout in ["nchw", "nhwc"] {
            for dtype in ["f32", "f16", "bf16"] {
                for kind in ["depthwise", "direct"] {
                    let name = format!("conv2d_{kind}_{layout}_{dtype}");
                    let report = reports.iter().find(|r| r.kernel == name).unwrap();
                    assert!(report.passed(), "{name}: {:?}", report.failure);
                }
            }
        }
        let options = BenchOptions {
            max_log2: Some(8),
            timing: Timing {
                warmup: 0,
                iters: 1,
                reps: 1,
            },
            ..BenchOptions::defaults(&dev)
        };
        let report = (op.bench.as_ref().unwrap().run)(&dev, &options).unwrap();
        // 14 layers × (NHWC f16, NCHW f32): warpforge measured, cuDNN skipped.
        assert_eq!(report.rows.len(), 28);
        assert_eq!(report.skipped.len(), 28);
        assert_eq!(report.notes, ["cuDNN: not available on the emulator"]);
    }

    /// `bench gemm --trans nt --only tf32-truncate`: the options reach the
    /// GEMM's configuration (an emulated H100: the truncated NT rows alone,
    /// beside their cuBLAS case, skipped).
    #[test]
    fn the_gemm_bench_takes_its_transposes_and_kinds_of_rows() {
        let dev = Device::emulator_for(warpforge::Arch::Sm90);
        let options = BenchOptions {
            max_log2: Some(3),
            timing: Timing {
                warmup: 0,
                iters: 1,
                reps: 1,
            },
            trans: (false, true),
            only: vec!["tf32-truncate".to_owned()],
        };
        let run = operation("gemm").unwrap().bench.as_ref().unwrap().run;
        let report = run(&dev, &options).unwrap();
        // 8³ and the three rectangles of side 4.
        assert_eq!(report.rows.len(), 4, "{:?}", report.skipped);
        assert!(
            report
                .rows
                .iter()
                .all(|r| r.op == bench::TRUNCATED_TF32_NAMES[1][1])
        );
        assert_eq!(report.skipped.len(), 4);
        assert!(
            report
                .skipped
                .iter()
                .all(|s| s.case.op == "cublas_gemmex_tf32_nt")
        );
        let bad = BenchOptions {
            only: vec!["f8".to_owned()],
            ..options
        };
        assert!(run(&dev, &bad).unwrap_err().to_string().contains("`f8`"));
    }
}
