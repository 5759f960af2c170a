//! Benchmarks, timed with events: the bandwidth-bound operations (reductions,
//! axpy) against the device-to-device copy bandwidth measured in the same run,
//! and copy/compute overlap on two streams. [`crate::registry`] lists which
//! benchmark belongs to which operation. They measure and return the figures as plain data; they assert
//! nothing about speed. The text tables are the CLI's (`warpforge-cli`'s
//! `bench_table`).
//!
//! - [`reduce()`]: `sum`, `max` and `argmax` of f32 and bf16, whole-tensor at
//!   each requested size and along each axis of an R×C matrix (axis 1: one
//!   output per row; axis 0: one per column). GB/s is bytes read ÷ time. The
//!   anchor is a [`DeviceBuffer::copy_from`] of the same tensor, whose GB/s is
//!   (bytes read + bytes written) ÷ time: the rate a memory-bound kernel can
//!   hope for. `ratio` is the reduction's GB/s ÷ that anchor.
//! - [`axpy()`]: `axpy_f32` at each requested size, GB/s = (x read + y read
//!   + y written) ÷ time, against the same copy anchor.
//! - [`gemm()`]: `C = op(A)·op(B)` in f32 (SIMT, and through TF32 tensor
//!   cores) and f64, and f16 and bf16 (f32 accumulation) into f32 and into
//!   their own type, over square and rectangular shapes ([`GemmBench`]); the
//!   rate is TFLOP/s = 2·m·n·k ÷ time ([`BenchRow::flops`],
//!   [`BenchRow::tflops`]), and the anchor is cuBLAS (`cublasSgemm`/
//!   `cublasDgemm` in the default math mode, so no TF32; `cublasGemmEx` with
//!   the same input and output types and `CUBLAS_COMPUTE_32F` for f16/bf16,
//!   and `CUBLAS_COMPUTE_32F_FAST_TF32` on f32 for the TF32 rows; the same
//!   transposes, loaded at run time through cudarc) timed in the same run:
//!   `ratio` is warpforge's rate ÷
//!   cuBLAS's. Where cuBLAS cannot be used (the emulator, no `libcublas` on
//!   the library path) its cases are [`BenchReport::skipped`] with the reason
//!   and warpforge's figures stand alone (`anchor_gbps` and `ratio` NaN).
//!   f32 runs three ways ([`F32Path`]): on the SIMT cores, through TF32
//!   rounded to nearest (the default [`Tf32Rounding::Nearest`]: on the
//!   Hopper kernel, two copy launches round `op(A)` and `op(B)ᵀ` into
//!   K-major temporaries first), and through TF32 truncated
//!   ([`Tf32Rounding::Truncate`], rows `truncated_nn …` to `truncated_tt …`,
//!   [`TRUNCATED_TF32_NAMES`]): the tensor cores drop the low bits of the
//!   f32 operands as they are, as in a library that hands its f32
//!   operands straight to them, which cuBLAS's TF32
//!   (`CUBLAS_COMPUTE_32F_FAST_TF32`) is taken to be (it does not document
//!   its rounding bit for bit), so cuBLAS TF32 on the same transposes is
//!   its like-for-like anchor (the same cuBLAS case as the rounded rows',
//!   timed once). NT (`A` not transposed, `B` transposed, a linear layer's
//!   `x·Wᵀ`) is where that comparison is fair: both operands are K-major
//!   (with rows of whole 16 bytes where `k` is a multiple of 4, as at every
//!   GPU shape) and the kernel reads them in place, one launch and no
//!   temporary, as cuBLAS reads its operands; on the other transposes
//!   it first copies each operand that is not K-major (as it is), work
//!   cuBLAS does not do. It runs on the Hopper kernel only: on another
//!   device its rows are left out and one note says why.
//! - [`conv2d::conv2d()`]: ResNet-50's convolutions against cuDNN (its module docs).
//! - [`overlap`]: a pinned upload alone, a kernel alone, both on one stream,
//!   and both on two streams; the overlap ratio is (copy + kernel) ÷ the
//!   two-stream time (2 when two equally long jobs overlap perfectly, 1 when
//!   they serialise).
//!
//! Every time is measured with events on the device's streams: warm-up
//! first, then `reps` repetitions of `iters` iterations between two events;
//! the median repetition is reported, per iteration. On the emulator the
//! events read the host clock, so its figures only track emulator speed.
//!
//! ```
//! use warpforge::Device;
//! use warpforge_tools::bench::{self, ReduceBench};
//! let dev = Device::emulator();
//! let config = ReduceBench::defaults(&dev).with_max_log2(10)?;
//! let report = bench::reduce(&dev, &config)?;
//! assert_eq!(report.rows.len(), config.cases()?.len());
//! for row in &report.rows {
//!     println!("{}: {:.2} GB/s, {:.3} of the copy anchor", row.case(), row.gbps, row.ratio);
//! }
//! # Ok::<(), warpforge::Error>(())
//! ```
//!
//! `warpforge bench reduce`, `warpforge bench gemm`, `warpforge bench overlap`,
//! `cargo bench -p warpforge-tools --bench reduce` and `--bench gemm` run them.

use half::bf16;
use std::time::Duration;
use warpforge::gemm::Tf32Rounding;
use warpforge::ops::grid_stride_config;
use warpforge::reduce::{self, Op, Reducible};
use warpforge::{
    DType, Device, DeviceBuffer, Error, Event, LaunchConfig, PinnedBuffer, Result, Stream,
};
use warpforge_kernels::elementwise::axpy_f32;

pub mod conv2d;

/// How each figure is timed: `warmup` untimed iterations, then `reps`
/// repetitions of `iters` iterations between two events; the median
/// repetition, per iteration, is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Untimed iterations first (compilation, caches, allocator pools).
    pub warmup: usize,
    /// Iterations between the two events of one repetition (0 counts as 1).
    pub iters: usize,
    /// Repetitions; the median is reported (0 counts as 1).
    pub reps: usize,
}

impl Timing {
    /// Defaults for a device: more iterations on a GPU, few on the slow emulator.
    pub fn defaults(dev: &Device) -> Timing {
        if dev.is_gpu() {
            Timing {
                warmup: 3,
                iters: 20,
                reps: 7,
            }
        } else {
            Timing {
                warmup: 1,
                iters: 1,
                reps: 3,
            }
        }
    }
}

/// The `[[…]]` axis of a matrix case: `Some(1)` reduces rows, `Some(0)` columns.
const ROWS: usize = 1;
const COLS: usize = 0;

/// One measured thing: an op (or `copy`, the anchor) over a tensor of one
/// dtype and shape, whole (`axis: None`) or along an axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// [`Op::name`], or `copy` for the device-to-device copy anchor.
    pub op: &'static str,
    /// Element type.
    pub dtype: DType,
    /// Row-major shape of the input.
    pub shape: Vec<usize>,
    /// The reduced axis; `None` for a whole-tensor reduction and the copy.
    pub axis: Option<usize>,
}

/// The anchor's op name.
pub const COPY: &str = "copy";
/// The axpy case's op name (the kernel it times).
pub const AXPY: &str = "axpy_f32";

impl Case {
    /// Bytes one run of the case moves, for an input of `tensor_bytes`: the
    /// copy reads and writes it, axpy reads x and y and writes y, a reduction
    /// reads it (its output is negligible or, along an axis, counted nowhere).
    fn bytes(&self, tensor_bytes: u64) -> Result<u64> {
        let times = match self.op {
            COPY => 2,
            AXPY => 3,
            _ => 1,
        };
        tensor_bytes
            .checked_mul(times)
            .ok_or_else(|| Error::SizeOverflow {
                what: format!("bench: {times} × {tensor_bytes} bytes"),
            })
    }

    /// The path a reduction case takes with the default options
    /// ([`reduce::Layout::path`]): `small`, `fused` or `multi_pass`; `None`
    /// for the copy and axpy.
    pub fn reduce_path(&self) -> Option<reduce::Path> {
        Op::from_name(self.op)?;
        let elements = self
            .shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))?;
        let layout = reduce::Layout::new(elements, &self.shape, self.axis).ok()?;
        layout.path(reduce::Path::Auto).ok()
    }
}

impl std::fmt::Display for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims: Vec<String> = self.shape.iter().map(usize::to_string).collect();
        write!(f, "{} {} [{}]", self.op, self.dtype.name(), dims.join("×"))?;
        match self.axis {
            Some(ROWS) if self.shape.len() == 2 => write!(f, " rows"),
            Some(COLS) if self.shape.len() == 2 => write!(f, " cols"),
            Some(k) => write!(f, " axis {k}"),
            None => Ok(()),
        }
    }
}

/// The element types the reduction benchmark runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BenchDType {
    /// f32.
    F32,
    /// bf16 (accumulated in f32).
    Bf16,
}

impl BenchDType {
    /// The buffer dtype.
    pub fn dtype(self) -> DType {
        match self {
            BenchDType::F32 => DType::F32,
            BenchDType::Bf16 => DType::BF16,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            BenchDType::F32 => 4,
            BenchDType::Bf16 => 2,
        }
    }
}

/// What to run in [`reduce()`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReduceBench {
    /// The reductions.
    pub ops: Vec<Op>,
    /// Element types.
    pub dtypes: Vec<BenchDType>,
    /// Element counts of the whole-tensor reductions.
    pub sizes: Vec<usize>,
    /// Rows and columns of the matrix reduced along axis 1 (rows) and 0 (columns).
    pub matrix: Option<(usize, usize)>,
    /// How each case is timed.
    pub timing: Timing,
}

/// Largest whole-tensor size on a GPU by default: 2^28 elements (1 GiB of f32).
pub const GPU_MAX_LOG2: u32 = 28;
/// Largest whole-tensor size on the emulator by default: 2^20 elements.
pub const EMULATOR_MAX_LOG2: u32 = 20;
/// Smallest whole-tensor size: 2^16 elements (smaller if the largest is smaller).
pub const MIN_LOG2: u32 = 16;
/// Elements of the largest matrix: 2^26 (8192×8192).
pub const MATRIX_MAX_LOG2: u32 = 26;

impl ReduceBench {
    /// `sum`, `max`, `argmax` of f32 and bf16; sizes 2^16 … 2^28 and an
    /// 8192×8192 matrix on a GPU, 2^16 … 2^20 and 1024×1024 on the emulator.
    pub fn defaults(dev: &Device) -> ReduceBench {
        let max_log2 = if dev.is_gpu() {
            GPU_MAX_LOG2
        } else {
            EMULATOR_MAX_LOG2
        };
        ReduceBench {
            ops: vec![Op::Sum, Op::Max, Op::ArgMax],
            dtypes: vec![BenchDType::F32, BenchDType::Bf16],
            sizes: Vec::new(),
            matrix: None,
            timing: Timing::defaults(dev),
        }
        .with_max_log2(max_log2)
        .expect("the default sizes fit in usize")
    }

    /// Whole-tensor sizes 2^min(16, N) … 2^N, and a matrix of
    /// 2^min(N, 26) elements (rows = 2^⌊k/2⌋, columns = 2^⌈k/2⌉).
    pub fn with_max_log2(mut self, max_log2: u32) -> Result<ReduceBench> {
        let pow = |k: u32| {
            1usize.checked_shl(k).ok_or_else(|| Error::SizeOverflow {
                what: format!("bench: 2^{k} elements"),
            })
        };
        self.sizes = (MIN_LOG2.min(max_log2)..=max_log2)
            .map(pow)
            .collect::<Result<_>>()?;
        let k = max_log2.min(MATRIX_MAX_LOG2);
        self.matrix = Some((pow(k / 2)?, pow(k - k / 2)?));
        Ok(self)
    }

    /// Every case [`reduce()`] measures, in order: per dtype, per size the
    /// copy anchor then each op; then the matrix's anchor, its rows (axis 1)
    /// and its columns (axis 0).
    pub fn cases(&self) -> Result<Vec<Case>> {
        Ok(self.groups()?.into_iter().flat_map(|g| g.cases).collect())
    }

    /// The cases grouped by the input tensor they share, in [`ReduceBench::cases`] order.
    pub fn groups(&self) -> Result<Vec<CaseGroup>> {
        let mut groups = Vec::new();
        for &dtype in &self.dtypes {
            let mut shapes: Vec<(Vec<usize>, Vec<Option<usize>>)> =
                self.sizes.iter().map(|&n| (vec![n], vec![None])).collect();
            if let Some((r, c)) = self.matrix {
                shapes.push((vec![r, c], vec![Some(ROWS), Some(COLS)]));
            }
            for (shape, axes) in shapes {
                let elements = shape
                    .iter()
                    .try_fold(1usize, |a, &d| a.checked_mul(d))
                    .ok_or_else(|| Error::SizeOverflow {
                        what: format!("bench: the elements of shape {shape:?}"),
                    })?;
                let case = |op, axis| Case {
                    op,
                    dtype: dtype.dtype(),
                    shape: shape.clone(),
                    axis,
                };
                let mut cases = vec![case(COPY, None)];
                for axis in axes {
                    cases.extend(self.ops.iter().map(|op| case(op.name(), axis)));
                }
                groups.push(CaseGroup {
                    dtype,
                    elements,
                    cases,
                });
            }
        }
        Ok(groups)
    }
}

/// Cases over one input tensor ([`Workload::new`]`(dev, dtype, elements)`);
/// the first is its copy anchor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseGroup {
    /// Element type of the tensor.
    pub dtype: BenchDType,
    /// Its elements.
    pub elements: usize,
    /// The copy anchor, then the reductions.
    pub cases: Vec<Case>,
}

/// One measured case.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchRow {
    /// [`Op::name`], or [`COPY`] for the anchor.
    pub op: &'static str,
    /// Element type.
    pub dtype: DType,
    /// Row-major shape of the input.
    pub shape: Vec<usize>,
    /// The reduced axis (`None`: whole tensor, or the copy).
    pub axis: Option<usize>,
    /// Bytes per iteration: read for a reduction, read + written for the copy.
    pub bytes: u64,
    /// Median seconds per iteration.
    pub seconds: f64,
    /// `bytes / seconds / 1e9`.
    pub gbps: f64,
    /// The copy anchor's GB/s for the same tensor, measured in the same run.
    pub anchor_gbps: f64,
    /// `gbps / anchor_gbps` (1 for the anchor itself).
    pub ratio: f64,
    /// Floating-point operations per iteration of a compute-bound case (GEMM:
    /// `2·m·n·k`); `None` for the bandwidth cases. Where it is set, `bytes` is
    /// the least traffic (each operand read once, the result written once)
    /// and the anchor is the reference library, not the copy.
    pub flops: Option<u64>,
}

impl BenchRow {
    /// `flops / seconds / 1e12`, for a compute-bound case.
    pub fn tflops(&self) -> Option<f64> {
        self.flops.map(|f| f as f64 / self.seconds / 1e12)
    }

    /// The anchor's TFLOP/s for the same case (`tflops / ratio`; NaN without an anchor).
    pub fn anchor_tflops(&self) -> Option<f64> {
        self.tflops().map(|t| t / self.ratio)
    }

    /// What was measured.
    pub fn case(&self) -> Case {
        Case {
            op: self.op,
            dtype: self.dtype,
            shape: self.shape.clone(),
            axis: self.axis,
        }
    }
}

/// A case that did not fit in device memory, or an anchor that is not
/// available (cuBLAS on the emulator or without its library).
#[derive(Clone, Debug, PartialEq)]
pub struct Skipped {
    /// The case.
    pub case: Case,
    /// Why (the `OutOfMemory` error's message, or why cuBLAS cannot be used).
    pub reason: String,
}

/// What a bandwidth benchmark ([`reduce()`], [`axpy()`]) measured.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// [`Device::name`].
    pub device: String,
    /// How each case was timed.
    pub timing: Timing,
    /// The measured cases, in the order the config lists them
    /// ([`ReduceBench::cases`], [`AxpyBench::cases`]).
    pub rows: Vec<BenchRow>,
    /// Cases that ran out of device memory (never on the emulator's default budget
    /// at the default sizes), or whose anchor library is missing; each
    /// requested case is in `rows` or here.
    pub skipped: Vec<Skipped>,
    /// Lines about the run itself (the GEMM bench: which cuBLAS, from where);
    /// empty for the bandwidth benchmarks.
    pub notes: Vec<String>,
}

/// An input tensor and a second buffer of the same size, the copy's destination.
struct Pair<T: Reducible> {
    src: DeviceBuffer<T>,
    dst: DeviceBuffer<T>,
}

/// A [`Pair`] of one of the benchmarked dtypes.
enum Tensors {
    F32(Pair<f32>),
    Bf16(Pair<bf16>),
}

/// The input of a group of cases, on the device, and the copy destination.
pub struct Workload {
    tensors: Tensors,
    bytes: u64,
}

/// A deterministic spread of values in [−1, 1].
fn sample(i: usize) -> f32 {
    let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    (h % 2001) as f32 / 1000.0 - 1.0
}

fn pair<T: Reducible>(dev: &Device, elements: usize, value: impl Fn(f32) -> T) -> Result<Pair<T>> {
    let host: Vec<T> = (0..elements).map(|i| value(sample(i))).collect();
    Ok(Pair {
        src: dev.upload(&host)?,
        dst: dev.alloc_zeroed(elements)?,
    })
}

/// `elements × size` in bytes, checked.
fn byte_count(elements: usize, size: usize, dtype: DType) -> Result<u64> {
    elements
        .checked_mul(size)
        .and_then(|b| u64::try_from(b).ok())
        .ok_or_else(|| Error::SizeOverflow {
            what: format!("bench: {elements} elements of {}", dtype.name()),
        })
}

impl Workload {
    /// Uploads `elements` values of `dtype` and allocates the copy's destination.
    pub fn new(dev: &Device, dtype: BenchDType, elements: usize) -> Result<Workload> {
        let bytes = byte_count(elements, dtype.size(), dtype.dtype())?;
        let tensors = match dtype {
            BenchDType::F32 => Tensors::F32(pair(dev, elements, |v| v)?),
            BenchDType::Bf16 => Tensors::Bf16(pair(dev, elements, bf16::from_f32)?),
        };
        Ok(Workload { tensors, bytes })
    }

    /// Bytes of the input tensor: what a reduction reads, half of what the copy moves.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Queues one reduction of the input (with `shape`) on the default stream.
    pub fn reduce_once(&self, op: Op, shape: &[usize], axis: Option<usize>) -> Result<()> {
        match &self.tensors {
            Tensors::F32(p) => reduce::reduce(op, &p.src, shape, axis).map(drop),
            Tensors::Bf16(p) => reduce::reduce(op, &p.src, shape, axis).map(drop),
        }
    }

    /// Queues one `axpy_f32` (`copy destination = 0.5·input + copy destination`)
    /// on the default stream; an f32 workload only.
    pub fn axpy_once(&mut self) -> Result<()> {
        match &mut self.tensors {
            Tensors::F32(p) => warpforge::ops::axpy(0.5f32, &p.src, &mut p.dst),
            Tensors::Bf16(_) => Err(Error::ShapeMismatch {
                op: "bench axpy",
                detail: "axpy_f32 needs an f32 workload; this one is bf16".into(),
            }),
        }
    }

    /// Queues one device-to-device copy of the input on the default stream.
    pub fn copy_once(&mut self) -> Result<()> {
        match &mut self.tensors {
            Tensors::F32(p) => p.dst.copy_from(&p.src),
            Tensors::Bf16(p) => p.dst.copy_from(&p.src),
        }
    }
}

/// Time from an event recorded on `stream` before `iters` calls of `f` to
/// one recorded after them (the work they queue on `stream` included).
pub fn time_iterations(
    stream: &Stream,
    iters: u64,
    mut f: impl FnMut() -> Result<()>,
) -> Result<Duration> {
    let start = stream.record_event()?;
    for _ in 0..iters {
        f()?;
    }
    stream.record_event()?.elapsed_since(&start)
}

/// The median of `samples` (mean of the middle two for an even count).
fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => samples[n / 2],
        _ => (samples[n / 2 - 1] + samples[n / 2]) / 2.0,
    }
}

/// Median seconds per call of `f` on the default stream, after warm-up.
fn seconds_per_call(
    dev: &Device,
    timing: Timing,
    mut f: impl FnMut() -> Result<()>,
) -> Result<f64> {
    let stream = dev.default_stream();
    for _ in 0..timing.warmup {
        f()?;
    }
    stream.synchronize()?;
    let iters = timing.iters.max(1);
    let samples = (0..timing.reps.max(1))
        .map(|_| {
            time_iterations(&stream, iters as u64, &mut f).map(|t| t.as_secs_f64() / iters as f64)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(median(samples))
}

/// `bytes / seconds` in GB/s (10⁹ bytes per second): the rate every row reports.
///
/// ```
/// assert_eq!(warpforge_tools::bench::gbps(3_000_000_000, 1.5), 2.0);
/// ```
pub fn gbps(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds / 1e9
}

/// Runs every case of `config` on `dev` (see the module docs for what is measured).
///
/// A case, or a whole group sharing one input, that runs out of device
/// memory is recorded in [`BenchReport::skipped`] and the run goes on; any
/// other error ends it.
pub fn reduce(dev: &Device, config: &ReduceBench) -> Result<BenchReport> {
    run_groups(dev, config.timing, config.groups()?)
}

/// What [`axpy()`] runs: `axpy_f32` over each size, after that size's copy anchor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AxpyBench {
    /// Elements of x and y.
    pub sizes: Vec<usize>,
    /// How each case is timed.
    pub timing: Timing,
}

impl AxpyBench {
    /// Sizes 2^16 … 2^28 on a GPU, 2^16 … 2^20 on the emulator.
    pub fn defaults(dev: &Device) -> AxpyBench {
        let max_log2 = if dev.is_gpu() {
            GPU_MAX_LOG2
        } else {
            EMULATOR_MAX_LOG2
        };
        AxpyBench {
            sizes: Vec::new(),
            timing: Timing::defaults(dev),
        }
        .with_max_log2(max_log2)
        .expect("the default sizes fit in usize")
    }

    /// Sizes 2^min(16, N) … 2^N.
    pub fn with_max_log2(mut self, max_log2: u32) -> Result<AxpyBench> {
        self.sizes = (MIN_LOG2.min(max_log2)..=max_log2)
            .map(|k| {
                1usize.checked_shl(k).ok_or_else(|| Error::SizeOverflow {
                    what: format!("bench: 2^{k} elements"),
                })
            })
            .collect::<Result<_>>()?;
        Ok(self)
    }

    /// Every case, in order: per size the copy anchor, then `axpy_f32`.
    pub fn cases(&self) -> Vec<Case> {
        self.groups().into_iter().flat_map(|g| g.cases).collect()
    }

    fn groups(&self) -> Vec<CaseGroup> {
        let group = |n: usize| {
            let case = |op| Case {
                op,
                dtype: DType::F32,
                shape: vec![n],
                axis: None,
            };
            CaseGroup {
                dtype: BenchDType::F32,
                elements: n,
                cases: vec![case(COPY), case(AXPY)],
            }
        };
        self.sizes.iter().map(|&n| group(n)).collect()
    }
}

/// Runs every case of `config` on `dev`: `y = 0.5·x + y` in f32 (see the
/// module docs); out-of-memory cases are skipped as in [`reduce()`].
pub fn axpy(dev: &Device, config: &AxpyBench) -> Result<BenchReport> {
    run_groups(dev, config.timing, config.groups())
}

/// Measures `groups` in order into one report (see [`reduce()`] for what an
/// out-of-memory error does).
fn run_groups(dev: &Device, timing: Timing, groups: Vec<CaseGroup>) -> Result<BenchReport> {
    let mut report = BenchReport {
        device: dev.name(),
        timing,
        rows: Vec::new(),
        skipped: Vec::new(),
        notes: Vec::new(),
    };
    for group in groups {
        if let Err(e) = run_group(dev, timing, &group, &mut report) {
            let Error::OutOfMemory { .. } = e else {
                return Err(e);
            };
            // Whatever of the group was not measured yet is skipped.
            for case in &group.cases {
                let seen = report.rows.iter().any(|r| r.case() == *case)
                    || report.skipped.iter().any(|s| s.case == *case);
                if !seen {
                    report.skipped.push(Skipped {
                        case: case.clone(),
                        reason: e.to_string(),
                    });
                }
            }
        }
    }
    Ok(report)
}

/// Measures one group: the copy anchor, then each case over the same input.
/// An `OutOfMemory` while allocating the input ends the group; one inside a
/// case skips that case.
fn run_group(
    dev: &Device,
    timing: Timing,
    group: &CaseGroup,
    report: &mut BenchReport,
) -> Result<()> {
    let mut work = Workload::new(dev, group.dtype, group.elements)?;
    let (anchor, cases) = group
        .cases
        .split_first()
        .expect("a group starts with its copy anchor");
    let moved = anchor.bytes(work.bytes())?;
    let copy_seconds = seconds_per_call(dev, timing, || work.copy_once())?;
    let anchor_gbps = gbps(moved, copy_seconds);
    report
        .rows
        .push(row(anchor, moved, copy_seconds, anchor_gbps));
    for case in cases {
        let bytes = case.bytes(work.bytes())?;
        let once = |work: &mut Workload| match case.op {
            AXPY => work.axpy_once(),
            op => {
                let op = Op::from_name(op).expect("cases name ops by Op::name");
                work.reduce_once(op, &case.shape, case.axis)
            }
        };
        let seconds = seconds_per_call(dev, timing, || once(&mut work));
        record(report, case, seconds, |s| row(case, bytes, s, anchor_gbps))?;
    }
    Ok(())
}

/// Records one timed case in `report`: its row (`row` of the seconds), or,
/// if it ran out of device memory, a skip with the reason; another error
/// ends the benchmark.
fn record(
    report: &mut BenchReport,
    case: &Case,
    seconds: Result<f64>,
    row: impl FnOnce(f64) -> BenchRow,
) -> Result<()> {
    match seconds {
        Ok(s) => report.rows.push(row(s)),
        Err(e @ Error::OutOfMemory { .. }) => report.skipped.push(Skipped {
            case: case.clone(),
            reason: e.to_string(),
        }),
        Err(e) => return Err(e),
    }
    Ok(())
}

fn row(case: &Case, bytes: u64, seconds: f64, anchor_gbps: f64) -> BenchRow {
    let rate = gbps(bytes, seconds);
    BenchRow {
        op: case.op,
        dtype: case.dtype,
        shape: case.shape.clone(),
        axis: case.axis,
        bytes,
        seconds,
        gbps: rate,
        anchor_gbps,
        ratio: rate / anchor_gbps,
        flops: None,
    }
}

/// Default largest square side of [`gemm()`] on a GPU: 2^13 (8192), whose
/// rectangular shapes (of half that side) are 4096×4096×11008,
/// 8192×1024×4096 and 128×4096×4096.
pub const GEMM_GPU_MAX_LOG2: u32 = 13;
/// Default largest square side of [`gemm()`] on the emulator: 2^6 (64).
pub const GEMM_EMULATOR_MAX_LOG2: u32 = 6;
/// Smallest square side: 2^8 (smaller if the largest is smaller).
pub const GEMM_MIN_LOG2: u32 = 8;

/// The output of an f16 or bf16 GEMM ([`GemmBench::half_outputs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HalfOutput {
    /// `C` in f32.
    F32,
    /// `C` in the inputs' type (f16 for f16, bf16 for bf16).
    Input,
}

/// How [`gemm()`] measures f32 ([`GemmBench::f32_paths`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum F32Path {
    /// On the SIMT cores, against `cublasSgemm` in the default math mode
    /// (no TF32).
    Simt,
    /// Through the TF32 tensor cores ([`warpforge::gemm::Gemm::tf32`]),
    /// the operands made tf32 as this says, against `cublasGemmEx` with
    /// `CUBLAS_COMPUTE_32F_FAST_TF32`. [`Tf32Rounding::Truncate`] runs on
    /// the Hopper kernel only: where the device cannot run it (not sm_90,
    /// a build without the `hopper` feature) its rows are left out and a
    /// note says why ([`GemmBench::truncation_refused`]).
    Tf32(Tf32Rounding),
}

/// One (input, output) pair of [`GemmBench`]: the cuBLAS case's name and
/// warpforge's kernel's (for truncated TF32, the row's op name:
/// [`TRUNCATED_TF32_NAMES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct GemmVariant {
    input: DType,
    output: DType,
    /// f32 through TF32 tensor cores, in both libraries, rounded or
    /// truncated by warpforge.
    tf32: Option<Tf32Rounding>,
    anchor: &'static str,
    kernel: &'static str,
}

/// The TF32 cuBLAS cases' names (`cublasGemmEx`, f32 in and out,
/// `CUBLAS_COMPUTE_32F_FAST_TF32`), `nn`, `nt`, `tn`, `tt`.
const CUBLAS_TF32_NAMES: [&str; 4] = [
    "cublas_gemmex_tf32_nn",
    "cublas_gemmex_tf32_nt",
    "cublas_gemmex_tf32_tn",
    "cublas_gemmex_tf32_tt",
];

/// The truncated-TF32 rows' op names ([`F32Path::Tf32`] of
/// [`Tf32Rounding::Truncate`]), for the wide Hopper tf32 kernel (128 × 256
/// tiles), then for the narrow one (128 × 128, grids the wide tiles would
/// leave half idle), each `nn`, `nt`, `tn`, `tt`: `truncated_` and the
/// transposes, then the kernel they run, the Hopper tf32 kernel, whose name
/// is the same for every transpose (it reads K-major operands: NT's in
/// place, the others' copies), and the same as the rounded TF32 row's
/// where that runs the Hopper kernel. The first word keeps the rows apart
/// from those (and from each other's transposes) in the tables, and in
/// the charts' series; the last is the kernel, as for every row
/// ([`truncated_tf32_name`] picks the one a shape runs).
pub const TRUNCATED_TF32_NAMES: [[&str; 4]; 2] = [
    [
        "truncated_nn gemm_wgmma_tf32_f32_nt_128x256x32_s4",
        "truncated_nt gemm_wgmma_tf32_f32_nt_128x256x32_s4",
        "truncated_tn gemm_wgmma_tf32_f32_nt_128x256x32_s4",
        "truncated_tt gemm_wgmma_tf32_f32_nt_128x256x32_s4",
    ],
    [
        "truncated_nn gemm_wgmma_tf32_f32_nt_128x128x32_s4",
        "truncated_nt gemm_wgmma_tf32_f32_nt_128x128x32_s4",
        "truncated_tn gemm_wgmma_tf32_f32_nt_128x128x32_s4",
        "truncated_tt gemm_wgmma_tf32_f32_nt_128x128x32_s4",
    ],
];

/// The truncated-TF32 GEMM of `[m, n, k]` with these transposes, as its
/// rows run it.
fn truncated_tf32([m, n, k]: [usize; 3], trans: (bool, bool)) -> warpforge::gemm::Gemm<f32> {
    warpforge::gemm::Gemm::new(m, n, k)
        .trans_a(trans.0)
        .trans_b(trans.1)
        .tf32_rounding(Tf32Rounding::Truncate)
}

/// The truncated-TF32 row's op name ([`TRUNCATED_TF32_NAMES`]) for an
/// `m × n × k` GEMM with these transposes on `dev`: the one whose last word
/// is the kernel the library runs there.
pub fn truncated_tf32_name(
    dev: &Device,
    shape: [usize; 3],
    trans: (bool, bool),
) -> Result<&'static str> {
    let kernel = truncated_tf32(shape, trans).kernel_name_for::<f32, f32>(dev)?;
    let which = usize::from(trans.0) * 2 + usize::from(trans.1);
    TRUNCATED_TF32_NAMES
        .iter()
        .map(|names| names[which])
        .find(|name| name.rsplit(' ').next() == Some(kernel))
        .ok_or_else(|| Error::ShapeMismatch {
            op: "bench gemm",
            detail: format!("truncated TF32 runs {kernel}, which no row name names"),
        })
}

/// The cuBLAS cases' names, per (input, output) and then `nn`, `nt`, `tn`, `tt`.
const CUBLAS_NAMES: [(DType, DType, [&str; 4]); 6] = [
    (
        DType::F32,
        DType::F32,
        [
            "cublas_sgemm_nn",
            "cublas_sgemm_nt",
            "cublas_sgemm_tn",
            "cublas_sgemm_tt",
        ],
    ),
    (
        DType::F64,
        DType::F64,
        [
            "cublas_dgemm_nn",
            "cublas_dgemm_nt",
            "cublas_dgemm_tn",
            "cublas_dgemm_tt",
        ],
    ),
    (
        DType::F16,
        DType::F32,
        [
            "cublas_gemmex_f16_f32_nn",
            "cublas_gemmex_f16_f32_nt",
            "cublas_gemmex_f16_f32_tn",
            "cublas_gemmex_f16_f32_tt",
        ],
    ),
    (
        DType::F16,
        DType::F16,
        [
            "cublas_gemmex_f16_f16_nn",
            "cublas_gemmex_f16_f16_nt",
            "cublas_gemmex_f16_f16_tn",
            "cublas_gemmex_f16_f16_tt",
        ],
    ),
    (
        DType::BF16,
        DType::F32,
        [
            "cublas_gemmex_bf16_f32_nn",
            "cublas_gemmex_bf16_f32_nt",
            "cublas_gemmex_bf16_f32_tn",
            "cublas_gemmex_bf16_f32_tt",
        ],
    ),
    (
        DType::BF16,
        DType::BF16,
        [
            "cublas_gemmex_bf16_bf16_nn",
            "cublas_gemmex_bf16_bf16_nt",
            "cublas_gemmex_bf16_bf16_tn",
            "cublas_gemmex_bf16_bf16_tt",
        ],
    ),
];

/// What [`gemm()`] runs: `C = op(A)·op(B)` (`alpha = 1`, `beta = 0`) for
/// each dtype and shape, cuBLAS first (the anchor), then warpforge's kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GemmBench {
    /// `[m, n, k]` of each problem.
    pub shapes: Vec<[usize; 3]>,
    /// Input element types: [`DType::F32`] (each of
    /// [`GemmBench::f32_paths`], output f32) and [`DType::F64`] (output
    /// f64), [`DType::F16`] and [`DType::BF16`] (tensor cores, f32
    /// accumulation, each output of [`GemmBench::half_outputs`]).
    pub dtypes: Vec<DType>,
    /// The outputs of the f16 and bf16 cases: f32, and the input's own type.
    pub half_outputs: Vec<HalfOutput>,
    /// With [`DType::F32`] in `dtypes`: how f32 is measured, in this order
    /// (the SIMT cores, TF32 rounded to nearest, TF32 truncated).
    pub f32_paths: Vec<F32Path>,
    /// `(trans_a, trans_b)`, the same for both libraries.
    pub trans: (bool, bool),
    /// How each case is timed.
    pub timing: Timing,
}

/// The kinds of rows [`GemmBench::only`] selects by name (`warpforge bench
/// gemm --only`): f32's paths ([`F32Path::name`]), then the other input types.
pub const GEMM_KINDS: [&str; 6] = ["f32", "tf32", "tf32-truncate", "f64", "f16", "bf16"];

impl F32Path {
    /// Every path, in the order [`GemmBench::defaults`] measures them.
    pub const ALL: [F32Path; 3] = [
        F32Path::Simt,
        F32Path::Tf32(Tf32Rounding::Nearest),
        F32Path::Tf32(Tf32Rounding::Truncate),
    ];

    /// Its name in [`GEMM_KINDS`]: `f32`, `tf32`, `tf32-truncate`.
    pub fn name(self) -> &'static str {
        match self {
            F32Path::Simt => "f32",
            F32Path::Tf32(Tf32Rounding::Nearest) => "tf32",
            F32Path::Tf32(Tf32Rounding::Truncate) => "tf32-truncate",
        }
    }
}

impl GemmBench {
    /// f32 (SIMT, TF32 rounded and TF32 truncated), f64, f16 and bf16
    /// (into f32 and into their own type), no transposes, squares 256 …
    /// 8192 and the three rectangular shapes of N = 13 on a GPU; squares of
    /// 64 and the rectangles of N = 6 on the emulator.
    pub fn defaults(dev: &Device) -> GemmBench {
        let max_log2 = if dev.is_gpu() {
            GEMM_GPU_MAX_LOG2
        } else {
            GEMM_EMULATOR_MAX_LOG2
        };
        GemmBench {
            shapes: Vec::new(),
            dtypes: vec![DType::F32, DType::F64, DType::F16, DType::BF16],
            half_outputs: vec![HalfOutput::F32, HalfOutput::Input],
            f32_paths: F32Path::ALL.to_vec(),
            trans: (false, false),
            timing: Timing::defaults(dev),
        }
        .with_max_log2(max_log2)
        .expect("the default shapes fit in usize")
    }

    /// Squares of side 2^min(8, N) … 2^N, then, with `s = 2^(N−1)` (1 at
    /// N = 0), the rectangles `s × s × 43·s/16` (an MLP's up-projection:
    /// 4096×4096×11008 at N = 13), `2s × s/4 × s` (short-wide) and
    /// `max(s/32, 1) × s × s` (a few rows: 128×4096×4096 at N = 13).
    pub fn with_max_log2(mut self, max_log2: u32) -> Result<GemmBench> {
        let overflow = || Error::SizeOverflow {
            what: format!("bench gemm: 2^{max_log2} × 2^{max_log2} matrices"),
        };
        let s = 1usize
            .checked_shl(max_log2)
            .filter(|s| s.checked_mul(*s).and_then(|ss| ss.checked_mul(8)).is_some())
            .ok_or_else(overflow)?;
        let mut shapes: Vec<[usize; 3]> = (GEMM_MIN_LOG2.min(max_log2)..=max_log2)
            .map(|k| [1 << k; 3])
            .collect();
        let s = (s / 2).max(1);
        let up = s.checked_mul(43).ok_or_else(overflow)? / 16;
        shapes.extend([
            [s, s, up],
            [2 * s, (s / 4).max(1), s],
            [(s / 32).max(1), s, s],
        ]);
        self.shapes = shapes;
        Ok(self)
    }

    /// Only the kinds of rows named (of [`GEMM_KINDS`]), in this
    /// configuration's order: `tf32-truncate` alone times the truncated
    /// TF32 rows and their cuBLAS anchor, and nothing else.
    /// `InvalidParameter` for a name not in [`GEMM_KINDS`].
    ///
    /// ```
    /// use warpforge::{DType, Device};
    /// use warpforge_tools::bench::{F32Path, GemmBench};
    /// use warpforge::gemm::Tf32Rounding;
    /// let config = GemmBench::defaults(&Device::emulator()).only(&["tf32-truncate", "f16"])?;
    /// assert_eq!(config.dtypes, [DType::F32, DType::F16]);
    /// assert_eq!(config.f32_paths, [F32Path::Tf32(Tf32Rounding::Truncate)]);
    /// assert!(GemmBench::defaults(&Device::emulator()).only(&["tf16"]).is_err());
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn only(mut self, kinds: &[&str]) -> Result<GemmBench> {
        if let Some(unknown) = kinds.iter().find(|k| !GEMM_KINDS.contains(k)) {
            return Err(Error::InvalidParameter {
                op: "bench gemm",
                parameter: "only",
                detail: format!(
                    "`{unknown}` is not a kind of GEMM row; the kinds are {}",
                    GEMM_KINDS.join(", ")
                ),
            });
        }
        self.f32_paths.retain(|p| kinds.contains(&p.name()));
        let f32_paths = !self.f32_paths.is_empty();
        self.dtypes.retain(|&d| match d {
            DType::F32 => f32_paths,
            other => kinds.contains(&other.name()),
        });
        Ok(self)
    }

    /// Why `dev` cannot run the truncated TF32 rows this configuration asks
    /// for ([`F32Path::Tf32`] of [`Tf32Rounding::Truncate`]: the Hopper
    /// kernel only), the library's refusal of the first shape it refuses;
    /// `None` where it runs them all, or none are asked for. [`gemm()`]
    /// leaves those rows out and notes this once.
    pub fn truncation_refused(&self, dev: &Device) -> Option<String> {
        let truncates = self.dtypes.contains(&DType::F32)
            && self
                .f32_paths
                .contains(&F32Path::Tf32(Tf32Rounding::Truncate));
        if !truncates {
            return None;
        }
        self.shapes.iter().find_map(|&shape| {
            truncated_tf32(shape, self.trans)
                .kernel_name_for::<f32, f32>(dev)
                .err()
                .map(|e| e.to_string())
        })
    }

    /// The row name of variant `v`'s kernel at `shape` on `dev`: the
    /// variant's, but for truncated TF32, whose name follows the kernel
    /// the shape runs ([`truncated_tf32_name`]).
    fn row_name(&self, dev: &Device, v: &GemmVariant, shape: [usize; 3]) -> Result<&'static str> {
        if v.tf32 == Some(Tf32Rounding::Truncate) {
            truncated_tf32_name(dev, shape, self.trans)
        } else {
            Ok(v.kernel)
        }
    }

    /// Every case [`gemm()`] measures on `dev`, in order: per (input,
    /// output) dtype pair and shape, the cuBLAS anchor (unless an earlier
    /// pair's: the truncated TF32 rows share the rounded ones' cuBLAS case)
    /// then warpforge's kernel (shape `[m, n, k]`).
    pub fn cases(&self, dev: &Device) -> Result<Vec<Case>> {
        let mut cases = Vec::new();
        for v in self.variants(dev)? {
            for shape in &self.shapes {
                let case = |op| Case {
                    op,
                    dtype: v.input,
                    shape: shape.to_vec(),
                    axis: None,
                };
                if !cases.contains(&case(v.anchor)) {
                    cases.push(case(v.anchor));
                }
                cases.push(case(self.row_name(dev, &v, *shape)?));
            }
        }
        Ok(cases)
    }

    /// The (input, output) pairs in order, with the cuBLAS case's and
    /// warpforge's kernel's names for the transposes; the truncated TF32
    /// pair only where `dev` runs it ([`truncation_refused`](Self::truncation_refused)).
    fn variants(&self, dev: &Device) -> Result<Vec<GemmVariant>> {
        use half::f16;
        use warpforge::gemm::{GemmTypes, TileConfig};
        fn small<TIn: GemmTypes<TOut>, TOut: warpforge::Element>(
            ta: bool,
            tb: bool,
        ) -> &'static str {
            TIn::kernel_name(ta, tb, Some(TileConfig::Small), false)
        }
        let which = usize::from(self.trans.0) * 2 + usize::from(self.trans.1);
        let (ta, tb) = self.trans;
        let truncates = self.truncation_refused(dev).is_none();
        let mut variants = Vec::new();
        for &input in &self.dtypes {
            if input == DType::F32 {
                for &path in &self.f32_paths {
                    let (anchor, kernel, tf32) = match path {
                        F32Path::Simt => (
                            cublas_name(input, input, which),
                            warpforge::gemm::Gemm::<f32>::new(0, 0, 0)
                                .trans_a(ta)
                                .trans_b(tb)
                                .kernel_name(),
                            None,
                        ),
                        F32Path::Tf32(Tf32Rounding::Nearest) => (
                            CUBLAS_TF32_NAMES[which],
                            <f32 as GemmTypes<f32>>::kernel_name(
                                ta,
                                tb,
                                Some(TileConfig::Small),
                                true,
                            ),
                            Some(Tf32Rounding::Nearest),
                        ),
                        F32Path::Tf32(Tf32Rounding::Truncate) if truncates => (
                            CUBLAS_TF32_NAMES[which],
                            // Per shape: `row_name`.
                            TRUNCATED_TF32_NAMES[0][which],
                            Some(Tf32Rounding::Truncate),
                        ),
                        F32Path::Tf32(Tf32Rounding::Truncate) => continue,
                    };
                    variants.push(GemmVariant {
                        input,
                        output: input,
                        tf32,
                        anchor,
                        kernel,
                    });
                }
                continue;
            }
            let outputs: Vec<DType> = match input {
                DType::F64 => vec![input],
                DType::F16 | DType::BF16 => self
                    .half_outputs
                    .iter()
                    .map(|o| match o {
                        HalfOutput::F32 => DType::F32,
                        HalfOutput::Input => input,
                    })
                    .collect(),
                other => {
                    return Err(Error::ShapeMismatch {
                        op: "bench gemm",
                        detail: format!(
                            "no GEMM benchmark for {} (f32, f64, f16 and bf16 only)",
                            other.name()
                        ),
                    });
                }
            };
            for output in outputs {
                let name = match (input, output) {
                    (DType::F64, _) => warpforge::gemm::Gemm::<f64>::new(0, 0, 0)
                        .trans_a(ta)
                        .trans_b(tb)
                        .kernel_name(),
                    // The small tile's kernel; a shape the tile heuristic
                    // gives the large tile is measured and named with its
                    // kernel (`gemm_variant`).
                    (DType::F16, DType::F32) => small::<f16, f32>(ta, tb),
                    (DType::F16, _) => small::<f16, f16>(ta, tb),
                    (DType::BF16, DType::F32) => small::<bf16, f32>(ta, tb),
                    _ => small::<bf16, bf16>(ta, tb),
                };
                variants.push(GemmVariant {
                    input,
                    output,
                    tf32: None,
                    anchor: cublas_name(input, output, which),
                    kernel: name,
                });
            }
        }
        Ok(variants)
    }
}

/// The cuBLAS case of `input` into `output` with the transposes `which`
/// (`nn`, `nt`, `tn`, `tt`: 0 … 3), not through TF32.
fn cublas_name(input: DType, output: DType, which: usize) -> &'static str {
    CUBLAS_NAMES
        .iter()
        .find(|(i, o, _)| (*i, *o) == (input, output))
        .expect("every pair of the benchmark has cuBLAS names")
        .2[which]
}

/// FLOPs and least bytes of one `m × n × k` GEMM: `A` and `B` of
/// `in_size`-byte elements read, `C` of `out_size`-byte elements written.
fn gemm_work(shape: &[usize], in_size: usize, out_size: usize) -> Result<(u64, u64)> {
    let overflow = || Error::SizeOverflow {
        what: format!("bench gemm: shape {shape:?}"),
    };
    let [m, n, k] = [shape[0], shape[1], shape[2]].map(|d| d as u64);
    let flops = m
        .checked_mul(n)
        .and_then(|mn| mn.checked_mul(k))
        .and_then(|mnk| mnk.checked_mul(2))
        .ok_or_else(overflow)?;
    let bytes = m
        .checked_mul(k)
        .and_then(|a| a.checked_add(k.checked_mul(n)?))
        .and_then(|ab| ab.checked_mul(in_size as u64))
        .and_then(|ab| ab.checked_add(m.checked_mul(n)?.checked_mul(out_size as u64)?))
        .ok_or_else(overflow)?;
    Ok((flops, bytes))
}

fn gemm_row(case: &Case, flops: u64, bytes: u64, seconds: f64, anchor_gbps: f64) -> BenchRow {
    BenchRow {
        flops: Some(flops),
        ..row(case, bytes, seconds, anchor_gbps)
    }
}

/// cuBLAS's time for one shape (median seconds per call), or why there is none.
type Anchor<'a> = &'a dyn Fn(&cublas::Cublas, [usize; 3]) -> std::result::Result<f64, String>;

/// Measures one (input, output) pair's cases (anchor and kernel per shape, in
/// order) into `report`; `to_input` makes the inputs' elements. An anchor
/// case an earlier pair measured (the truncated TF32 rows share the
/// rounded ones' cuBLAS case) is not timed again: its figure is the
/// anchor.
fn gemm_variant<TIn, TOut>(
    dev: &Device,
    config: &GemmBench,
    v: &GemmVariant,
    blas: &std::result::Result<cublas::Cublas, String>,
    anchor_time: Anchor<'_>,
    to_input: fn(f32) -> TIn,
    report: &mut BenchReport,
) -> Result<()>
where
    TIn: warpforge::gemm::GemmTypes<TOut>,
    TOut: warpforge::Element,
{
    for &[m, n, k] in &config.shapes {
        let case = |op| Case {
            op,
            dtype: v.input,
            shape: vec![m, n, k],
            axis: None,
        };
        let (anchor, kernel) = (case(v.anchor), case(config.row_name(dev, v, [m, n, k])?));
        let (flops, bytes) = gemm_work(&kernel.shape, size_of::<TIn>(), size_of::<TOut>())?;
        // The anchor first: cuBLAS's figure (measured now or by an earlier
        // pair), or why there is none.
        let measured = report.rows.iter().find(|r| r.case() == anchor);
        let anchor_gbps = match measured {
            Some(row) => row.gbps,
            None if report.skipped.iter().any(|s| s.case == anchor) => f64::NAN,
            None => match blas
                .as_ref()
                .map_err(String::clone)
                .and_then(|blas| anchor_time(blas, [m, n, k]))
            {
                Ok(seconds) => {
                    let rate = gbps(bytes, seconds);
                    report
                        .rows
                        .push(gemm_row(&anchor, flops, bytes, seconds, rate));
                    rate
                }
                Err(reason) => {
                    report.skipped.push(Skipped {
                        case: anchor,
                        reason,
                    });
                    f64::NAN
                }
            },
        };
        let host = |len: usize| (0..len).map(|i| to_input(sample(i))).collect::<Vec<TIn>>();
        let mut buffers = (|| {
            Ok::<_, Error>((
                dev.upload(&host(m * k))?,
                dev.upload(&host(k * n))?,
                dev.alloc_zeroed::<TOut>(m * n)?,
            ))
        })();
        let mut gemm = warpforge::gemm::Gemm::<TIn::Scalar>::new(m, n, k)
            .trans_a(config.trans.0)
            .trans_b(config.trans.1);
        if let Some(rounding) = v.tf32 {
            gemm = gemm.tf32_rounding(rounding);
        }
        // A split shape runs its kernel into the workspace, then the sum.
        let ranges = gemm.split_k_for::<TIn, TOut>(dev)?;
        if ranges > 1 {
            report.notes.push(format!(
                "{m} × {n} × {k} ({}): split-k into {ranges} k-ranges, then \
                 gemm_split_k_sum_{}",
                gemm.kernel_name_for::<TIn, TOut>(dev)?,
                TOut::DTYPE.name()
            ));
        }
        // The shape as the heuristic runs it; where that is the Hopper
        // kernel (unsplit or split), the mma.sync kernel it replaces too
        // (not for truncated TF32, which the Hopper kernel alone runs);
        // where it is the wide tile, whose rule is not yet measured against
        // the large one, the large tile too; where it is a split of the
        // large tile (f32's skinny path), the small tile's split it
        // replaces; on the same buffers.
        use warpforge::gemm::TileConfig::{Large, Small, Wide};
        let truncated = v.tf32 == Some(Tf32Rounding::Truncate);
        let mma_sync = gemm.wgmma(false);
        let tile = gemm.tile_config_for::<TIn, TOut>(dev)?;
        let replaced = if truncated {
            None
        } else if gemm.kernel_name_for::<TIn, TOut>(dev)?
            != mma_sync.kernel_name_for::<TIn, TOut>(dev)?
        {
            Some(mma_sync)
        } else if tile == Some(Wide) {
            Some(gemm.tile(Large))
        } else if tile == Some(Large) && ranges > 1 {
            Some(gemm.tile(Small))
        } else {
            None
        };
        for run in std::iter::once(gemm).chain(replaced) {
            // The row names the kernel it runs (the truncated rows: after
            // their own first word, TRUNCATED_TF32_NAMES).
            let kernel = &Case {
                op: if truncated {
                    kernel.op
                } else {
                    run.kernel_name_for::<TIn, TOut>(dev)?
                },
                ..kernel.clone()
            };
            // Out of memory allocating the operands skips the case as one in the run does.
            let seconds = match &mut buffers {
                Ok((a, b, c)) => seconds_per_call(dev, config.timing, || run.run(dev, a, b, c)),
                Err(e) => Err(e.clone()),
            };
            record(report, kernel, seconds, |s| {
                gemm_row(kernel, flops, bytes, s, anchor_gbps)
            })?;
        }
    }
    Ok(())
}

/// Runs every case of `config` on `dev` (see the module docs): cuBLAS and
/// warpforge on the same shapes, in the same run. cuBLAS is opened once; if
/// it cannot be (the emulator, no library, no handle), each of its cases is
/// skipped with the reason and warpforge is measured alone. Truncated TF32
/// rows the device cannot run are left out, with one note saying why
/// ([`GemmBench::truncation_refused`]). Out-of-memory cases are skipped as
/// in [`reduce()`].
pub fn gemm(dev: &Device, config: &GemmBench) -> Result<BenchReport> {
    use half::f16;
    let variants = config.variants(dev)?;
    let blas = cublas::Cublas::open(dev);
    let mut report = BenchReport {
        device: dev.name(),
        timing: config.timing,
        rows: Vec::new(),
        skipped: Vec::new(),
        notes: vec![match &blas {
            Ok(blas) => blas.describe(),
            Err(why) => why.clone(),
        }],
    };
    if let Some(why) = config.truncation_refused(dev) {
        report.notes.push(format!(
            "truncated TF32 (Tf32Rounding::Truncate) not measured: {why}"
        ));
    }
    let (timing, trans) = (config.timing, config.trans);
    for v in &variants {
        let ex = |b: &cublas::Cublas, shape| b.time_ex(timing, shape, trans, v.input, v.output);
        let (c, r) = (config, &mut report);
        match (v.input, v.output) {
            (DType::F32, _) if v.tf32.is_some() => {
                gemm_variant::<f32, f32>(dev, c, v, &blas, &ex, |v| v, r)?
            }
            (DType::F32, _) => {
                let sgemm = |b: &cublas::Cublas, shape| b.time::<f32>(timing, shape, trans);
                gemm_variant::<f32, f32>(dev, c, v, &blas, &sgemm, |v| v, r)?
            }
            (DType::F64, _) => {
                let dgemm = |b: &cublas::Cublas, shape| b.time::<f64>(timing, shape, trans);
                gemm_variant::<f64, f64>(dev, c, v, &blas, &dgemm, f64::from, r)?
            }
            (DType::F16, DType::F32) => {
                gemm_variant::<f16, f32>(dev, c, v, &blas, &ex, f16::from_f32, r)?
            }
            (DType::F16, _) => gemm_variant::<f16, f16>(dev, c, v, &blas, &ex, f16::from_f32, r)?,
            (DType::BF16, DType::F32) => {
                gemm_variant::<bf16, f32>(dev, c, v, &blas, &ex, bf16::from_f32, r)?
            }
            _ => gemm_variant::<bf16, bf16>(dev, c, v, &blas, &ex, bf16::from_f32, r)?,
        }
    }
    Ok(report)
}

/// cuBLAS through cudarc, loaded at run time: on its own stream of the same
/// GPU (the primary context warpforge uses), timed with events on that stream.
/// Median seconds per call of `once` on `stream`, the way the vendor anchors
/// (cuBLAS, cuDNN; `library` names it in errors) are timed on their own
/// stream: `timing.warmup` calls, a synchronise, then `timing.reps` samples of
/// `timing.iters` calls each between two events.
fn time_anchor_calls(
    stream: &cudarc::driver::CudaStream,
    timing: Timing,
    library: &str,
    mut once: impl FnMut() -> std::result::Result<(), String>,
) -> std::result::Result<f64, String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("{library}: {what}: {e}");
    for _ in 0..timing.warmup {
        once()?;
    }
    stream
        .synchronize()
        .map_err(|e| fail("synchronising", &e))?;
    let iters = timing.iters.max(1);
    let event = || {
        stream
            .record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| fail("recording an event", &e))
    };
    let mut samples = Vec::new();
    for _ in 0..timing.reps.max(1) {
        let start = event()?;
        for _ in 0..iters {
            once()?;
        }
        let end = event()?;
        let ms = start.elapsed_ms(&end).map_err(|e| fail("timing", &e))?;
        samples.push(f64::from(ms) / 1e3 / iters as f64);
    }
    Ok(median(samples))
}

mod cublas {
    use super::{Timing, sample};
    use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, sys};
    use cudarc::driver::{
        CudaContext, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits,
    };
    use std::sync::Arc;
    use warpforge::{DType, Device};

    /// An open cuBLAS handle on its own stream.
    pub(super) struct Cublas {
        stream: Arc<CudaStream>,
        blas: CudaBlas,
        version: Option<i32>,
    }

    /// Why cuBLAS is not used on the emulator.
    pub(super) const EMULATOR: &str = "cuBLAS: not available on the emulator";

    impl Cublas {
        /// cuBLAS on `dev`'s GPU, or why not (never a panic: the library is
        /// looked for before cudarc's loader, which panics without it, runs).
        ///
        /// cudarc 0.19 (built for CUDA 12.8) dlopens `libcublas.so`, then
        /// `libcublas.so.12`, `.11`, … but never `libcublas.so.13`, and has no
        /// variable naming the file. Preloading `libcublas.so.13` does not help:
        /// dlopen matches a loaded library by its soname (`libcublas.so.13`), not
        /// by the name asked for. A CUDA 13 install is found through the
        /// unversioned `libcublas.so` symlink (the toolkit's `lib64`, or one made
        /// to point at `libcublas.so.13`) on `LD_LIBRARY_PATH`.
        pub(super) fn open(dev: &Device) -> Result<Cublas, String> {
            let Some(info) = dev.gpu_info() else {
                return Err(EMULATOR.to_owned());
            };
            // SAFETY: only tries to load the library (dlopen) under each candidate name.
            if !unsafe { sys::is_culib_present() } {
                return Err(format!(
                    "cuBLAS not found (no libcublas under the names cudarc loads: {}; put \
                     the directory of libcublas.so on LD_LIBRARY_PATH; CUDA 13's \
                     libcublas.so.13 is not among those names: its directory's \
                     libcublas.so symlink, or one made next to it, is)",
                    cudarc::get_lib_name_candidates("cublas").join(", ")
                ));
            }
            let ctx = CudaContext::new(info.ordinal).map_err(|e| {
                format!("cuBLAS: not available (opening GPU {}: {e})", info.ordinal)
            })?;
            // SAFETY: the bench uses these buffers on this one stream only.
            unsafe { ctx.disable_event_tracking() };
            let stream = ctx
                .new_stream()
                .map_err(|e| format!("cuBLAS: not available (a stream: {e})"))?;
            let blas = CudaBlas::new(stream.clone())
                .map_err(|e| format!("cuBLAS: not available (cublasCreate: {e})"))?;
            let mut version = 0;
            // SAFETY: a live handle and a valid out-pointer.
            let version = unsafe { sys::cublasGetVersion_v2(*blas.handle(), &mut version) }
                .result()
                .ok()
                .map(|()| version);
            Ok(Cublas {
                stream,
                blas,
                version,
            })
        }

        /// `cuBLAS 13.1.0 (/usr/local/cuda/lib64/libcublas.so.13)`: the
        /// version the library reports and the file the process mapped.
        pub(super) fn describe(&self) -> String {
            let version = self.version.map_or("version unknown".to_owned(), |v| {
                format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
            });
            let path = std::fs::read_to_string("/proc/self/maps")
                .ok()
                .and_then(|maps| {
                    maps.lines()
                        .filter_map(|l| l.split_whitespace().nth(5))
                        .find(|p| p.contains("libcublas.") || p.contains("libcublas64"))
                        .map(str::to_owned)
                })
                .unwrap_or_else(|| "path unknown".to_owned());
            format!("anchor: cuBLAS {version} ({path}), default math mode, on its own stream")
        }

        /// The column-major call computing the row-major `m × n` `D =
        /// op(A)·op(B)`: cuBLAS computes `Dᵀ = op(B)ᵀ·op(A)ᵀ`, an `n × m`
        /// column-major matrix with the bytes of `D`, so B goes first.
        /// Returns `(transa, transb, m, n, k, lda, ldb, ldc)` of that call.
        #[allow(clippy::type_complexity)]
        fn column_major(
            [m, n, k]: [usize; 3],
            (trans_a, trans_b): (bool, bool),
        ) -> Result<
            (
                sys::cublasOperation_t,
                sys::cublasOperation_t,
                [i32; 3],
                [i32; 3],
            ),
            String,
        > {
            let int = |v: usize, what: &str| {
                i32::try_from(v).map_err(|_| format!("cuBLAS: {what} = {v} does not fit an int"))
            };
            let op = |t: bool| {
                if t {
                    sys::cublasOperation_t::CUBLAS_OP_T
                } else {
                    sys::cublasOperation_t::CUBLAS_OP_N
                }
            };
            // Stored row lengths: A is m × k (k × m transposed), B k × n (n × k).
            let lda = if trans_a { m } else { k };
            let ldb = if trans_b { k } else { n };
            Ok((
                op(trans_b),
                op(trans_a),
                [int(n, "n")?, int(m, "m")?, int(k, "k")?],
                [
                    int(ldb.max(1), "ldb")?,
                    int(lda.max(1), "lda")?,
                    int(n.max(1), "n")?,
                ],
            ))
        }

        /// Median seconds per call of `once` (already set up) on this
        /// handle's stream ([`super::time_anchor_calls`]).
        fn time_calls(
            &self,
            timing: Timing,
            once: impl FnMut() -> Result<(), String>,
        ) -> Result<f64, String> {
            super::time_anchor_calls(&self.stream, timing, "cuBLAS", once)
        }

        /// Median seconds per `gemm` (`cublasSgemm`/`cublasDgemm`) of
        /// `shape = [m, n, k]` with `trans`, row-major as warpforge's
        /// ([`Cublas::column_major`]).
        pub(super) fn time<T>(
            &self,
            timing: Timing,
            [m, n, k]: [usize; 3],
            trans: (bool, bool),
        ) -> Result<f64, String>
        where
            T: DeviceRepr + ValidAsZeroBits + From<f32> + Copy,
            CudaBlas: Gemm<T>,
        {
            let (transa, transb, [cm, cn, ck], [lda, ldb, ldc]) =
                Self::column_major([m, n, k], trans)?;
            let cfg = GemmConfig {
                transa,
                transb,
                m: cm,
                n: cn,
                k: ck,
                alpha: T::from(1.0),
                lda,
                ldb,
                beta: T::from(0.0),
                ldc,
            };
            let fail = |what: &str, e: &dyn std::fmt::Display| format!("cuBLAS: {what}: {e}");
            let host = |len: usize| (0..len).map(|i| T::from(sample(i))).collect::<Vec<T>>();
            let s = &self.stream;
            let a = s
                .clone_htod(&host(m * k))
                .map_err(|e| fail("uploading A", &e))?;
            let b = s
                .clone_htod(&host(k * n))
                .map_err(|e| fail("uploading B", &e))?;
            let mut d = s
                .alloc_zeros::<T>(m * n)
                .map_err(|e| fail("allocating D", &e))?;
            self.time_calls(timing, || {
                // SAFETY: the sizes above match the shapes and leading dimensions in `cfg`.
                unsafe { self.blas.gemm(cfg, &b, &a, &mut d) }.map_err(|e| fail("gemm", &e))
            })
        }

        /// Median seconds per `cublasGemmEx` of `shape` with `trans` on
        /// `input` (f16 or bf16) `A` and `B` into an `output` `D` (f32 or the
        /// input's type), accumulating in f32 (`CUBLAS_COMPUTE_32F`, the
        /// default math mode: tensor cores), row-major as warpforge's; or on
        /// f32 `A`, `B` and `D` through TF32 (`CUBLAS_COMPUTE_32F_FAST_TF32`).
        pub(super) fn time_ex(
            &self,
            timing: Timing,
            [m, n, k]: [usize; 3],
            trans: (bool, bool),
            input: DType,
            output: DType,
        ) -> Result<f64, String> {
            use sys::cudaDataType_t::{CUDA_R_16BF, CUDA_R_16F, CUDA_R_32F};
            let fail = |what: &str, e: &dyn std::fmt::Display| format!("cuBLAS: {what}: {e}");
            let data_type = |d: DType| match d {
                DType::F16 => Ok(CUDA_R_16F),
                DType::BF16 => Ok(CUDA_R_16BF),
                DType::F32 => Ok(CUDA_R_32F),
                other => Err(format!("cuBLAS: no GemmEx case for {}", other.name())),
            };
            let (in_type, out_type) = (data_type(input)?, data_type(output)?);
            // f32 inputs: the TF32 case (f32 output).
            let compute = if in_type == CUDA_R_32F {
                if out_type != CUDA_R_32F {
                    return Err("cuBLAS: the TF32 GemmEx case writes f32".to_owned());
                }
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
            } else {
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F
            };
            let (transa, transb, [cm, cn, ck], [lda, ldb, ldc]) =
                Self::column_major([m, n, k], trans)?;
            // The inputs as 16-bit words, the same values warpforge's run
            // gets: an f32 as its two halves, low first (little-endian, as the
            // host and the GPU store it).
            let bits = |len: usize| -> Vec<u16> {
                (0..len)
                    .flat_map(|i| match input {
                        DType::F16 => vec![half::f16::from_f32(sample(i)).to_bits()],
                        DType::BF16 => vec![half::bf16::from_f32(sample(i)).to_bits()],
                        _ => {
                            let w = sample(i).to_bits();
                            vec![w as u16, (w >> 16) as u16]
                        }
                    })
                    .collect()
            };
            let s = &self.stream;
            let a = s
                .clone_htod(&bits(m * k))
                .map_err(|e| fail("uploading A", &e))?;
            let b = s
                .clone_htod(&bits(k * n))
                .map_err(|e| fail("uploading B", &e))?;
            let out_words = if out_type == CUDA_R_32F { 2 } else { 1 };
            let mut d = s
                .alloc_zeros::<u16>(m * n * out_words)
                .map_err(|e| fail("allocating D", &e))?;
            let (alpha, beta) = (1.0f32, 0.0f32);
            self.time_calls(timing, || {
                let (a_ptr, _a) = a.device_ptr(s);
                let (b_ptr, _b) = b.device_ptr(s);
                let (d_ptr, _d) = d.device_ptr_mut(s);
                // SAFETY: the buffers hold the elements the shapes and leading
                // dimensions name, in the types named (u16 bits of f16/bf16, two
                // u16 per f32; D sized for f32 when the output is f32); alpha and
                // beta are f32, as both compute types take them, and live
                // across the call.
                unsafe {
                    cudarc::cublas::result::gemm_ex(
                        *self.blas.handle(),
                        transa,
                        transb,
                        cm,
                        cn,
                        ck,
                        (&alpha as *const f32).cast(),
                        b_ptr as *const std::ffi::c_void,
                        in_type,
                        lda,
                        a_ptr as *const std::ffi::c_void,
                        in_type,
                        ldb,
                        (&beta as *const f32).cast(),
                        d_ptr as *mut std::ffi::c_void,
                        out_type,
                        ldc,
                        compute,
                        sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                    )
                }
                .map_err(|e| fail("GemmEx", &e))
            })
        }
    }
}

/// What [`overlap`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverlapBench {
    /// Bytes of each pinned upload.
    pub copy_bytes: usize,
    /// Elements of the `axpy_f32` the kernel side runs.
    pub kernel_elements: usize,
    /// Warm-up and repetitions; `iters` is unused (the kernel side launches
    /// as many `axpy_f32` as take about as long as one upload, so both sides
    /// weigh the same).
    pub timing: Timing,
}

impl OverlapBench {
    /// 256 MiB uploads and axpy over 2^26 elements on a GPU; 32 MiB and 2^16 on the emulator.
    pub fn defaults(dev: &Device) -> OverlapBench {
        let timing = Timing::defaults(dev);
        if dev.is_gpu() {
            OverlapBench {
                copy_bytes: 256 << 20,
                kernel_elements: 1 << 26,
                timing,
            }
        } else {
            OverlapBench {
                copy_bytes: 32 << 20,
                kernel_elements: 1 << 16,
                timing,
            }
        }
    }
}

/// What [`overlap`] measured (median seconds).
#[derive(Clone, Debug, PartialEq)]
pub struct OverlapReport {
    /// [`Device::name`].
    pub device: String,
    /// Bytes of the pinned upload.
    pub copy_bytes: u64,
    /// Elements of each `axpy_f32`.
    pub kernel_elements: usize,
    /// `axpy_f32` launches on the kernel side.
    pub kernel_launches: usize,
    /// The upload alone.
    pub copy_seconds: f64,
    /// The kernels alone.
    pub kernel_seconds: f64,
    /// Upload then kernels, on one stream.
    pub serial_seconds: f64,
    /// Upload on one stream, kernels on another, from a common start.
    pub two_stream_seconds: f64,
    /// `(copy_seconds + kernel_seconds) / two_stream_seconds`.
    pub overlap_ratio: f64,
}

/// Buffers of the overlap benchmark.
struct OverlapWork {
    host: PinnedBuffer<f32>,
    dst: DeviceBuffer<f32>,
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    cfg: LaunchConfig,
}

impl OverlapWork {
    fn upload(&mut self, s: &Stream) -> Result<()> {
        s.upload(&self.host, &mut self.dst)
    }

    fn kernels(&mut self, s: &Stream, launches: usize) -> Result<()> {
        for _ in 0..launches {
            s.launch(axpy_f32, self.cfg, (0.5f32, &self.x, &mut self.y))?;
        }
        Ok(())
    }
}

/// Median over `reps` of `measure`, after `warmup` untimed runs.
fn median_of(timing: Timing, mut measure: impl FnMut() -> Result<f64>) -> Result<f64> {
    for _ in 0..timing.warmup {
        measure()?;
    }
    let samples = (0..timing.reps.max(1))
        .map(|_| measure())
        .collect::<Result<Vec<_>>>()?;
    Ok(median(samples))
}

fn since(start: &Event, end: &Event) -> Result<f64> {
    Ok(end.elapsed_since(start)?.as_secs_f64())
}

/// Times a pinned upload and `axpy_f32` kernels alone, serialised on one
/// stream, and on two streams (see the module docs).
pub fn overlap(dev: &Device, config: &OverlapBench) -> Result<OverlapReport> {
    let floats = config.copy_bytes / 4;
    let copy_bytes = byte_count(floats, 4, DType::F32)?;
    let n = config.kernel_elements;
    let mut work = OverlapWork {
        host: dev.alloc_pinned::<f32>(floats)?,
        dst: dev.alloc_zeroed::<f32>(floats)?,
        x: dev.upload(&(0..n).map(sample).collect::<Vec<_>>())?,
        y: dev.alloc_zeroed::<f32>(n)?,
        cfg: grid_stride_config(n),
    };
    work.host
        .copy_from_slice(&(0..floats).map(sample).collect::<Vec<_>>())?;
    let (copies, compute) = (dev.new_stream()?, dev.new_stream()?);
    let timing = config.timing;

    let copy_seconds = median_of(timing, || {
        let start = copies.record_event()?;
        work.upload(&copies)?;
        since(&start, &copies.record_event()?)
    })?;
    let one_kernel = median_of(timing, || {
        let start = compute.record_event()?;
        work.kernels(&compute, 1)?;
        since(&start, &compute.record_event()?)
    })?;
    // As many launches as take about as long as the upload: both sides weigh the same.
    let launches = if one_kernel > 0.0 {
        (copy_seconds / one_kernel).round().clamp(1.0, 10_000.0) as usize
    } else {
        1
    };
    let kernel_seconds = median_of(timing, || {
        let start = compute.record_event()?;
        work.kernels(&compute, launches)?;
        since(&start, &compute.record_event()?)
    })?;
    let serial_seconds = median_of(timing, || {
        let start = compute.record_event()?;
        work.upload(&compute)?;
        work.kernels(&compute, launches)?;
        since(&start, &compute.record_event()?)
    })?;
    let two_stream_seconds = median_of(timing, || {
        let start = copies.record_event()?;
        compute.wait_event(&start)?;
        work.upload(&copies)?;
        work.kernels(&compute, launches)?;
        let (copy_end, kernel_end) = (copies.record_event()?, compute.record_event()?);
        Ok(since(&start, &copy_end)?.max(since(&start, &kernel_end)?))
    })?;
    Ok(OverlapReport {
        device: dev.name(),
        copy_bytes,
        kernel_elements: n,
        kernel_launches: launches,
        copy_seconds,
        kernel_seconds,
        serial_seconds,
        two_stream_seconds,
        overlap_ratio: (copy_seconds + kernel_seconds) / two_stream_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(dev: &Device) -> ReduceBench {
        let mut config = ReduceBench::defaults(dev).with_max_log2(10).unwrap();
        config.timing = Timing {
            warmup: 1,
            iters: 2,
            reps: 3,
        };
        config
    }

    fn check_row(r: &BenchRow) {
        let case = r.case();
        assert!(r.seconds > 0.0 && r.seconds.is_finite(), "{case}: {r:?}");
        assert!(r.gbps > 0.0 && r.anchor_gbps > 0.0, "{case}: {r:?}");
        assert_eq!(r.gbps, r.bytes as f64 / r.seconds / 1e9, "{case}");
        assert_eq!(r.ratio, r.gbps / r.anchor_gbps, "{case}");
        let elements: usize = r.shape.iter().product();
        let size = if r.dtype == DType::BF16 { 2 } else { 4 };
        let moved = if r.op == COPY { 2 } else { 1 };
        assert_eq!(r.bytes, (moved * size * elements) as u64, "{case}");
    }

    #[test]
    fn every_requested_case_is_a_well_formed_row() {
        let dev = Device::emulator();
        let config = tiny(&dev);
        assert_eq!(config.sizes, [1 << 10]);
        assert_eq!(config.matrix, Some((32, 32)));
        let report = reduce(&dev, &config).unwrap();
        let cases = config.cases().unwrap();
        // Per dtype: the vector's copy + 3 ops, the matrix's copy + 3 ops × 2 axes.
        assert_eq!(cases.len(), 2 * (4 + 7));
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        let measured: Vec<Case> = report.rows.iter().map(BenchRow::case).collect();
        assert_eq!(measured, cases);
        for r in &report.rows {
            check_row(r);
        }
        // Each reduction's anchor is the copy row of its own tensor.
        for r in &report.rows {
            let anchor = report
                .rows
                .iter()
                .find(|a| a.op == COPY && a.dtype == r.dtype && a.shape == r.shape)
                .unwrap();
            assert_eq!(r.anchor_gbps, anchor.gbps, "{}", r.case());
        }
        assert_eq!(report.device, dev.name());
    }

    /// The time-per-call cases of issue 16: the 2^16 whole-tensor reductions
    /// take the small path (one launch), 2^20 the fused one (one launch,
    /// the finish included), the 8192×8192 rows the small one (8192 items per row), and
    /// the copy and the columns no reduction path or the multi-pass one.
    #[test]
    fn the_bench_cases_name_their_reduction_path() {
        let dev = Device::emulator();
        let cases = ReduceBench::defaults(&dev)
            .with_max_log2(GPU_MAX_LOG2)
            .unwrap()
            .cases()
            .unwrap();
        let path = |op: &str, shape: &[usize], axis| {
            cases
                .iter()
                .find(|c| c.op == op && c.shape == shape && c.axis == axis)
                .unwrap_or_else(|| panic!("{op} {shape:?} {axis:?}"))
                .reduce_path()
        };
        for op in ["sum", "max", "argmax"] {
            assert_eq!(path(op, &[1 << 16], None), Some(reduce::Path::Small));
            assert_eq!(path(op, &[1 << 20], None), Some(reduce::Path::Fused));
            assert_eq!(path(op, &[1 << 28], None), Some(reduce::Path::Fused));
            assert_eq!(path(op, &[8192, 8192], Some(1)), Some(reduce::Path::Small));
            assert_eq!(path(op, &[8192, 8192], Some(0)), Some(reduce::Path::Fused));
        }
        assert_eq!(path(COPY, &[1 << 16], None), None);
    }

    #[test]
    fn sizes_and_matrix_follow_max_log2() {
        let dev = Device::emulator();
        let c = ReduceBench::defaults(&dev);
        assert_eq!(c.sizes.first(), Some(&(1 << MIN_LOG2)));
        assert_eq!(c.sizes.last(), Some(&(1 << EMULATOR_MAX_LOG2)));
        assert_eq!(c.matrix, Some((1 << 10, 1 << 10)));
        let big = c.clone().with_max_log2(GPU_MAX_LOG2).unwrap();
        assert_eq!(big.sizes.len(), 13);
        assert_eq!(big.matrix, Some((8192, 8192)));
        let odd = c.clone().with_max_log2(17).unwrap();
        assert_eq!(odd.sizes, [1 << 16, 1 << 17]);
        assert_eq!(odd.matrix, Some((256, 512)));
        assert!(matches!(
            c.with_max_log2(usize::BITS),
            Err(Error::SizeOverflow { .. })
        ));
    }

    #[test]
    fn a_tensor_that_does_not_fit_is_skipped_not_fatal() {
        // 1 MiB of device memory: 2^10 f32 fits, 2^18 (1 MiB, twice for the copy) does not.
        let dev = Device::emulator_with_memory(1 << 20);
        let mut config = tiny(&dev);
        config.dtypes = vec![BenchDType::F32];
        config.sizes = vec![1 << 10, 1 << 18];
        config.matrix = None;
        let report = reduce(&dev, &config).unwrap();
        let cases = config.cases().unwrap();
        assert_eq!(report.rows.len(), 4);
        assert_eq!(report.skipped.len(), 4);
        for case in &cases {
            let found = report.rows.iter().filter(|r| r.case() == *case).count()
                + report.skipped.iter().filter(|s| s.case == *case).count();
            assert_eq!(found, 1, "{case}");
        }
        for s in &report.skipped {
            assert_eq!(s.case.shape, [1 << 18]);
            assert!(s.reason.contains("out of device memory"), "{}", s.reason);
        }
        // The device still works after the failed allocation.
        assert_eq!(
            warpforge::reduce::sum(&dev.upload(&[1.0f32, 2.0]).unwrap()).unwrap(),
            3.0
        );
    }

    #[test]
    fn overlap_reports_every_phase() {
        let dev = Device::emulator();
        let config = OverlapBench {
            copy_bytes: 1 << 20,
            kernel_elements: 1 << 12,
            timing: Timing {
                warmup: 1,
                iters: 1,
                reps: 3,
            },
        };
        let r = overlap(&dev, &config).unwrap();
        assert_eq!(r.copy_bytes, 1 << 20);
        assert!(r.kernel_launches >= 1);
        for s in [
            r.copy_seconds,
            r.kernel_seconds,
            r.serial_seconds,
            r.two_stream_seconds,
        ] {
            assert!(s > 0.0 && s.is_finite(), "{r:?}");
        }
        assert_eq!(
            r.overlap_ratio,
            (r.copy_seconds + r.kernel_seconds) / r.two_stream_seconds
        );
    }

    /// The shapes of issue 14 at N = 13 (the GPU default), every (input,
    /// output) pair, and FLOPs and bytes against figures worked out by hand.
    #[test]
    fn gemm_cases_cover_each_pair_and_shape_with_their_work() {
        let h100 = Device::emulator_for(warpforge::Arch::Sm90);
        let config = GemmBench::defaults(&h100)
            .with_max_log2(GEMM_GPU_MAX_LOG2)
            .unwrap();
        let squares = [256, 512, 1024, 2048, 4096, 8192].map(|s| [s, s, s]);
        let transformer = [[4096, 4096, 11008], [8192, 1024, 4096], [128, 4096, 4096]];
        assert_eq!(config.shapes, [&squares[..], &transformer[..]].concat());
        // (input dtype, kernel prefix, anchor, whether the anchor is a case
        // of this pair's): TF32 rounded and truncated after SIMT f32, the
        // truncated rows against the rounded rows' cuBLAS case.
        let pairs = [
            ("f32", "gemm_f32_nn_", "cublas_sgemm_nn", true),
            ("f32", "gemm_tf32_f32_nn_", "cublas_gemmex_tf32_nn", true),
            // The wide or the narrow Hopper kernel, as the shape's grid takes.
            (
                "f32",
                "truncated_nn gemm_wgmma_tf32_f32_nt_128x",
                "cublas_gemmex_tf32_nn",
                false,
            ),
            ("f64", "gemm_f64_nn_", "cublas_dgemm_nn", true),
            ("f16", "gemm_f16_f32_nn_", "cublas_gemmex_f16_f32_nn", true),
            ("f16", "gemm_f16_f16_nn_", "cublas_gemmex_f16_f16_nn", true),
            (
                "bf16",
                "gemm_bf16_f32_nn_",
                "cublas_gemmex_bf16_f32_nn",
                true,
            ),
            (
                "bf16",
                "gemm_bf16_bf16_nn_",
                "cublas_gemmex_bf16_bf16_nn",
                true,
            ),
        ];
        let cases = config.cases(&h100).unwrap();
        let mut rest = &cases[..];
        for (input, prefix, anchor, own_anchor) in pairs {
            for shape in &config.shapes {
                let (anchors, tail) = rest.split_at(usize::from(own_anchor));
                let (kernel, tail) = tail.split_first().expect("a kernel case per shape");
                rest = tail;
                for case in anchors.iter().chain([kernel]) {
                    assert_eq!(case.dtype.name(), input, "{case}");
                    assert_eq!(case.shape, shape.to_vec(), "{case}");
                }
                assert!(anchors.iter().all(|a| a.op == anchor), "{anchors:?}");
                assert!(kernel.op.starts_with(prefix), "{kernel} for {prefix}");
            }
        }
        assert!(rest.is_empty(), "{rest:?}");
        // 2·m·n·k, and A and B read plus C written, by hand.
        assert_eq!(
            gemm_work(&[4096, 4096, 11008], 2, 4).unwrap(),
            (
                369_367_187_456,
                2 * (45_088_768 + 45_088_768) + 4 * 16_777_216
            )
        );
        assert_eq!(
            gemm_work(&[8192, 1024, 4096], 2, 2).unwrap(),
            (68_719_476_736, 2 * (33_554_432 + 4_194_304 + 8_388_608))
        );
        assert_eq!(
            gemm_work(&[128, 4096, 4096], 2, 4).unwrap(),
            (4_294_967_296, 36_700_160)
        );
        assert_eq!(
            gemm_work(&[3, 5, 7], 8, 8).unwrap(),
            (210, 8 * (21 + 35 + 15))
        );
        assert!(matches!(
            gemm_work(&[1 << 40, 1 << 40, 1 << 40], 2, 2),
            Err(Error::SizeOverflow { .. })
        ));
        let mut ints = config;
        ints.dtypes = vec![DType::I32];
        assert!(ints.cases(&h100).unwrap_err().to_string().contains("i32"));
    }

    /// The truncated TF32 rows, one per shape, on every transpose of an
    /// emulated H100, each after the rounded row it shares its cuBLAS case
    /// with; none on an emulated A100, which names the library's refusal
    /// (and refuses nothing else); `only` keeps the kinds named.
    #[test]
    fn the_truncated_tf32_rows_are_measured_where_the_hopper_kernel_runs() {
        use warpforge::Arch;
        let (h100, a100) = (
            Device::emulator_for(Arch::Sm90),
            Device::emulator_for(Arch::Sm80),
        );
        let defaults = GemmBench::defaults(&h100).with_max_log2(4).unwrap();
        let tf32 = defaults.clone().only(&["tf32", "tf32-truncate"]).unwrap();
        assert_eq!(tf32.dtypes, [DType::F32]);
        assert_eq!(tf32.f32_paths, F32Path::ALL[1..]);
        for (which, trans) in [(false, false), (false, true), (true, false), (true, true)]
            .into_iter()
            .enumerate()
        {
            let config = GemmBench {
                trans,
                ..tf32.clone()
            };
            assert_eq!(config.truncation_refused(&h100), None);
            let ops: Vec<&str> = config.cases(&h100).unwrap().iter().map(|c| c.op).collect();
            // Per shape of the rounded pair, the anchor and the kernel; then
            // the truncated pair's kernel alone.
            let shapes = config.shapes.len();
            assert_eq!(ops.len(), 3 * shapes, "{ops:?}");
            for pair in ops[..2 * shapes].chunks(2) {
                assert_eq!(pair[0], CUBLAS_TF32_NAMES[which], "{ops:?}");
                assert!(pair[1].starts_with("gemm_tf32_f32_"), "{ops:?}");
            }
            assert!(
                ops[2 * shapes..]
                    .iter()
                    .all(|&op| op == TRUNCATED_TF32_NAMES[1][which])
            );
            // The name's last word is the kernel the library runs.
            let [m, n, k] = config.shapes[0];
            let kernel = warpforge::gemm::Gemm::<f32>::new(m, n, k)
                .trans_a(trans.0)
                .trans_b(trans.1)
                .tf32_rounding(Tf32Rounding::Truncate)
                .kernel_name_for::<f32, f32>(&h100)
                .unwrap();
            // The emulated H100's 132 SMs: tiny shapes run the narrow kernel.
            assert_eq!(
                TRUNCATED_TF32_NAMES[1][which].rsplit(' ').next(),
                Some(kernel)
            );
            assert!(TRUNCATED_TF32_NAMES[1][which].starts_with(&format!(
                "truncated_{}{} ",
                ["n", "t"][usize::from(trans.0)],
                ["n", "t"][usize::from(trans.1)]
            )));

            let why = config
                .truncation_refused(&a100)
                .expect("an sm_80 refuses truncation");
            assert!(
                why.contains("tf32_rounding") && why.contains("8.0"),
                "{why}"
            );
            let ops: Vec<&str> = config.cases(&a100).unwrap().iter().map(|c| c.op).collect();
            assert_eq!(ops.len(), 2 * shapes, "{ops:?}");
            assert!(!ops.iter().any(|op| op.starts_with("truncated")), "{ops:?}");
        }
        // Without the truncated path, nothing to refuse.
        let rounded = defaults.clone().only(&["tf32"]).unwrap();
        assert_eq!(rounded.truncation_refused(&a100), None);
        let e = defaults.only(&["tf32", "int8"]).unwrap_err().to_string();
        assert!(e.contains("`int8`") && e.contains("tf32-truncate"), "{e}");
        assert_eq!(
            F32Path::ALL.map(F32Path::name),
            GEMM_KINDS[..3],
            "f32's paths are the first kinds"
        );
    }

    /// A run on an emulated H100 at NT (the truncated rows' fair anchor):
    /// per shape the cuBLAS TF32 case (skipped once, the emulator has no
    /// cuBLAS), the rounded row and the truncated row, each with its FLOPs;
    /// on an emulated A100 the rounded rows alone and one note saying why.
    #[test]
    fn gemm_bench_times_the_truncated_tf32_rows_on_an_emulated_h100() {
        use warpforge::Arch;
        let h100 = Device::emulator_for(Arch::Sm90);
        let mut config = GemmBench::defaults(&h100)
            .only(&["tf32", "tf32-truncate"])
            .unwrap();
        config.shapes = vec![[16, 24, 32], [8, 8, 20]];
        config.trans = (false, true);
        config.timing = Timing {
            warmup: 0,
            iters: 1,
            reps: 1,
        };
        let (report, work) = h100.work_done_by(|| gemm(&h100, &config)).unwrap();
        // One timed call a row: the rounded rows on mma.sync (these grids
        // are small), the truncated ones on the Hopper kernel reading both
        // operands in place (k = 32 and 20: rows of whole 16 bytes), so no
        // copy kernel runs.
        let mut launches: Vec<(&str, u64)> = work.launches.into_iter().collect();
        launches.sort();
        assert_eq!(
            launches,
            [
                ("gemm_tf32_f32_nt_64x64x16_s3", 2),
                ("gemm_wgmma_tf32_f32_nt_128x128x32_s4", 2)
            ]
        );
        let ops: Vec<&str> = report.rows.iter().map(|r| r.op).collect();
        let truncated = TRUNCATED_TF32_NAMES[1][1];
        assert_eq!(
            ops,
            [
                "gemm_tf32_f32_nt_64x64x16_s3",
                "gemm_tf32_f32_nt_64x64x16_s3",
                truncated,
                truncated
            ]
        );
        let skipped: Vec<String> = report.skipped.iter().map(|s| s.case.to_string()).collect();
        assert_eq!(
            skipped,
            [
                "cublas_gemmex_tf32_nt f32 [16×24×32]",
                "cublas_gemmex_tf32_nt f32 [8×8×20]"
            ]
        );
        assert!(report.skipped.iter().all(|s| s.reason == cublas::EMULATOR));
        for (row, shape) in report.rows.iter().zip(config.shapes.repeat(2)) {
            assert_eq!(row.shape, shape);
            let [m, n, k] = shape;
            assert_eq!(row.flops, Some(2 * (m * n * k) as u64), "{row:?}");
            assert_eq!(row.bytes, (4 * (m * k + k * n + m * n)) as u64, "{row:?}");
            assert!(row.tflops().unwrap() > 0.0 && row.ratio.is_nan(), "{row:?}");
        }
        assert!(
            !report.notes.iter().any(|n| n.contains("truncated")),
            "{:?}",
            report.notes
        );

        let a100 = Device::emulator_for(Arch::Sm80);
        let report = gemm(&a100, &config).unwrap();
        let ops: Vec<&str> = report.rows.iter().map(|r| r.op).collect();
        assert_eq!(ops, ["gemm_tf32_f32_nt_64x64x16_s3"; 2]);
        assert_eq!(report.skipped.len(), 2);
        let notes: Vec<&String> = report
            .notes
            .iter()
            .filter(|n| n.starts_with("truncated TF32 (Tf32Rounding::Truncate) not measured: "))
            .collect();
        assert_eq!(notes.len(), 1, "{:?}", report.notes);
        assert!(notes[0].contains("tf32_rounding"), "{}", notes[0]);
    }

    /// f16 and bf16 into f32 and into their own type, on the emulator: every
    /// kernel case measured with its FLOPs, every cuBLAS case skipped with the reason.
    #[test]
    fn gemm_bench_runs_the_half_cases_on_the_emulator() {
        let dev = Device::emulator();
        let mut config = GemmBench::defaults(&dev).with_max_log2(4).unwrap();
        config.dtypes = vec![DType::F16, DType::BF16];
        config.timing = Timing {
            warmup: 0,
            iters: 1,
            reps: 1,
        };
        let report = gemm(&dev, &config).unwrap();
        let cases = config.cases(&dev).unwrap();
        assert_eq!(cases.len(), 4 * 4 * 2);
        assert_eq!(report.rows.len(), 16, "{:?}", report.skipped);
        assert_eq!(report.skipped.len(), 16);
        for s in &report.skipped {
            assert!(s.case.op.starts_with("cublas_gemmex_"), "{}", s.case);
            assert_eq!(s.reason, cublas::EMULATOR);
        }
        for (row, case) in report.rows.iter().zip(cases.chunks(2).map(|p| &p[1])) {
            assert_eq!(row.case(), *case);
            let [m, n, k] = [row.shape[0], row.shape[1], row.shape[2]];
            assert_eq!(row.flops, Some(2 * (m * n * k) as u64), "{case}");
            let out = if row.op.contains("_f32_") { 4 } else { 2 };
            assert_eq!(
                row.bytes,
                (2 * (m * k + k * n) + out * m * n) as u64,
                "{case}"
            );
            let tflops = row.tflops().unwrap();
            assert!(tflops > 0.0 && tflops.is_finite(), "{case}: {row:?}");
            assert!(row.ratio.is_nan(), "no anchor on the emulator: {row:?}");
        }
    }

    #[test]
    fn median_takes_the_middle() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
