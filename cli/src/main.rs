//! The `warpforge` command: verify kernels against CPU references, and inspect their PTX.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use warpforge::conv2d::Padding;
use warpforge::ptx::dispatch_table;
use warpforge::reduce::Op;
use warpforge::{Device, Error};
use warpforge_cli::{
    bench_data, bench_plot, bench_table, column_width, npy, profile, run, startup,
};
use warpforge_tools::bench;
use warpforge_tools::registry::{self, OPERATIONS};
use warpforge_tools::verify;

mod ptx_command;

#[derive(Parser)]
#[command(
    name = "warpforge",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("WARPFORGE_BUILD_COMMIT"), ")"),
    about = "CUDA kernels in Rust: verify them, inspect their PTX"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every kernel against its CPU reference (GPU if present, else the emulator).
    Verify {
        /// Where to run.
        #[arg(long, value_enum, default_value_t = Backend::Auto)]
        backend: Backend,
        /// Seed of the generated inputs.
        #[arg(long, default_value_t = 0x5eed)]
        seed: u64,
        /// Random lengths per kernel, on top of 0, 1, 31, 32, 33, 1023, 1025.
        #[arg(long, default_value_t = 3)]
        random_lengths: usize,
        /// Largest random length (default: 4M on a GPU, 200k on the emulator).
        #[arg(long)]
        max_len: Option<usize>,
        /// Only this operation (repeatable; default: all of them).
        #[arg(long = "op", value_parser = operation_parser())]
        ops: Vec<String>,
        /// Also print each kernel's memory traffic over all its cases (emulator only):
        /// sectors per load request, coalescing efficiency, bank conflicts, bytes per element.
        #[arg(long)]
        profile: bool,
        /// Run nothing: print the dispatch table of the device (every kernel of the library
        /// it can run) and the operation whose verification covers each; exit 1 if one is
        /// not covered.
        #[arg(long, conflicts_with = "profile")]
        list: bool,
    },
    /// Assemble PTX with ptxas: per-kernel resources, SASS (--sass), or a before/after table (--diff).
    ///
    /// The module is the embedded library's (`--hopper`: its Hopper kernels', sm_90a) unless a
    /// FILE.ptx is given. Needs ptxas
    /// (`pip install nvidia-cuda-nvcc`); --sass also needs nvdisasm (`pip install
    /// nvidia-cuda-nvdisasm`, or cuobjdump from `nvidia-cuda-cuobjdump`). Exits 2 on a
    /// ptxas error or an unknown --kernel, 1 on spills with --deny-spills.
    Ptx(ptx_command::PtxArgs),
    /// Run a library operation on .npy files.
    #[command(subcommand)]
    Run(RunCommand),
    /// Measure an operation's throughput with events (GB/s against the device's copy
    /// bandwidth in the same run; gemm: TFLOP/s against cuBLAS), or copy/compute overlap on
    /// two streams.
    Bench(BenchArgs),
    /// The emulator's memory-traffic profile of an operation on inputs of a given shape:
    /// per launch, global sectors per request and coalescing efficiency, shared-memory bank
    /// conflicts, bytes per output element, the source lines that move the most.
    #[command(subcommand)]
    Profile(profile::ProfileCommand),
    /// Check the driver, GPUs, embedded PTX, ptxas and emulator; say what to fix.
    ///
    /// Exits 0 when GPU 0 is ready or there is no GPU ("emulator only"), 1 when a GPU
    /// is present but unusable.
    Doctor(DoctorArgs),
}

#[derive(Args)]
struct DoctorArgs {
    /// Measure start-up instead: cuInit, the primary context, the module load (cubin or
    /// PTX JIT, and its parts), the first launch and the first `reduce::sum` of 2^20 f32,
    /// each in a fresh process, against a bare process's driver floor.
    #[arg(long)]
    timings: bool,
    /// The measuring child processes of `--timings` (`floor`, `first-reduction`).
    #[arg(long, hide = true, value_name = "KIND")]
    timings_child: Option<String>,
}

#[derive(Subcommand)]
enum RunCommand {
    /// Reduce an .npy array, whole or along one axis, and write the result as .npy.
    ///
    /// Reads float16/32/64, int32/64 and uint32 arrays (either byte order; Fortran order is
    /// read as the same array in C order). Writes the input's dtype, int64 indices for
    /// argmin/argmax (flat indices for a whole-array reduction), float32 with `--dtype bf16`.
    /// A whole-array reduction writes a 0-d array.
    Reduce {
        /// The reduction.
        #[arg(long, value_parser = op_parser())]
        op: Op,
        /// Reduce along this axis (0 = outermost); omit it to reduce the whole array.
        #[arg(long)]
        axis: Option<usize>,
        /// The input .npy file.
        #[arg(long)]
        input: PathBuf,
        /// Where to write the result (.npy).
        #[arg(long)]
        out: PathBuf,
        /// Where to run.
        #[arg(long, value_enum, default_value_t = Backend::Auto)]
        backend: Backend,
        /// Compute in another dtype than the input's.
        #[arg(long, value_enum)]
        dtype: Option<ComputeDType>,
    },
    /// D = alpha·op(A)·op(B) + beta·C on .npy matrices, written as .npy.
    ///
    /// A and B are 2-D, as stored in the files (Fortran order is read as the same matrix);
    /// --trans-a uses Aᵀ, --trans-b Bᵀ. op(A) is m × k, op(B) k × n, C and D m × n.
    /// The dtype is the files' (float32 or float64; they must agree) unless --dtype is given,
    /// which converts every operand to it (rounding to nearest; integer files need it).
    /// D is written in the computing dtype: float32 for f32, float64 for f64; f16 and bf16
    /// round A and B to that dtype, accumulate in f32 on the tensor cores and write float32
    /// (.npy has no bf16). --beta needs --c, and defaults to 1 with --c (0 without: C is not
    /// read). A 3-D operand ([batch, rows, cols]) runs a strided batch; a 2-D one is then
    /// broadcast to every batch, and C and D are [batch, m, n]. Mismatched shapes or batch
    /// counts and mixed dtypes without --dtype are errors (exit 2) that name the operands and
    /// sizes.
    Gemm {
        /// A (m × k, or k × m with --trans-a; [batch, ..] for a batch).
        #[arg(long)]
        a: PathBuf,
        /// B (k × n, or n × k with --trans-b; [batch, ..] for a batch).
        #[arg(long)]
        b: PathBuf,
        /// C (m × n), added as beta·C.
        #[arg(long)]
        c: Option<PathBuf>,
        /// The factor of op(A)·op(B).
        #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
        alpha: f64,
        /// The factor of C (needs --c; default 1 with --c).
        #[arg(long, allow_negative_numbers = true)]
        beta: Option<f64>,
        /// Use Aᵀ (A is stored k × m).
        #[arg(long)]
        trans_a: bool,
        /// Use Bᵀ (B is stored n × k).
        #[arg(long)]
        trans_b: bool,
        /// Compute in this dtype, converting the inputs (default: the files' dtype).
        #[arg(long, value_enum)]
        dtype: Option<run::GemmDType>,
        /// f32 on the TF32 tensor cores: A and B rounded to tf32 (10 fraction bits),
        /// f32 accumulation; f32 only (off: full-precision f32 FMA).
        #[arg(long)]
        tf32: bool,
        /// Where to write D (.npy).
        #[arg(long)]
        out: PathBuf,
        /// Where to run.
        #[arg(long, value_enum, default_value_t = Backend::Auto)]
        backend: Backend,
    },
    /// y = conv2d(x, w) (+ bias), ReLU if asked, on .npy tensors, written as .npy.
    ///
    /// NCHW (default): x is [N, C, H, W], the weight [K, C/groups, R, S] (PyTorch's), y
    /// [N, K, P, Q]. NHWC: x [N, H, W, C], the weight [K, R, S, C/groups], y [N, P, Q, K].
    /// The bias has K values. The dtype is the files' (float16 or float32; they must agree)
    /// unless --dtype is given, which converts every operand to it (rounding to nearest).
    /// y is written in the computing dtype: float16 for f16, float32 for f32 and bf16 (.npy
    /// has no bf16); every dtype accumulates in f32. Invalid parameters (a zero stride or
    /// dilation, groups that do not divide the channels, a filter larger than the padded
    /// input, mismatched shapes) are errors (exit 2) that name the parameter.
    Conv2d {
        /// The input x (4-D, in the layout's order).
        #[arg(long)]
        input: PathBuf,
        /// The weights (4-D, in the layout's order).
        #[arg(long)]
        weight: PathBuf,
        /// The bias (K values).
        #[arg(long)]
        bias: Option<PathBuf>,
        /// Stride: S (both axes) or SH,SW.
        #[arg(long, allow_hyphen_values = true, value_name = "S|SH,SW", default_value = "1", value_parser = run::parse_pair)]
        stride: (usize, usize),
        /// Zero padding: P (every side), PH,PW, or T,B,L,R.
        #[arg(long, allow_hyphen_values = true, value_name = "P|PH,PW|T,B,L,R", default_value = "0", value_parser = run::parse_padding)]
        padding: Padding,
        /// Dilation: D (both axes) or DH,DW.
        #[arg(long, allow_hyphen_values = true, value_name = "D|DH,DW", default_value = "1", value_parser = run::parse_pair)]
        dilation: (usize, usize),
        /// Groups (C for depthwise).
        #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
        groups: usize,
        /// How x, the weights and y are stored.
        #[arg(long, value_enum, default_value_t = run::ConvLayout::Nchw)]
        layout: run::ConvLayout,
        /// ReLU after the bias.
        #[arg(long)]
        relu: bool,
        /// Compute in this dtype, converting the operands (default: the files' dtype).
        #[arg(long, value_enum)]
        dtype: Option<run::ConvDType>,
        /// Where to write y (.npy).
        #[arg(long)]
        out: PathBuf,
        /// Where to run.
        #[arg(long, value_enum, default_value_t = Backend::Auto)]
        backend: Backend,
    },
}

#[derive(Args)]
struct BenchArgs {
    /// What to measure: an operation's benchmark, or `overlap` (a pinned upload and axpy
    /// kernels alone, serialised on one stream, and overlapped on two streams).
    #[arg(value_parser = bench_parser())]
    what: String,
    /// Where to run.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    backend: Backend,
    /// Operations: the largest size, 2^N elements (default: 28 on a GPU, 20 on the emulator);
    /// gemm: the largest square's side, 2^N, the rectangles' 2^(N-1) (default: 13 on a GPU, 6
    /// on the emulator).
    #[arg(long)]
    max_log2: Option<u32>,
    /// Operations: iterations between the two events of each timed repetition (default: 20
    /// on a GPU, 1 on the emulator).
    #[arg(long)]
    iters: Option<usize>,
    /// gemm: the transposes of op(A) and op(B), the same for warpforge and cuBLAS (nt: A
    /// as stored, B transposed, a linear layer's x·Wᵀ, where truncated TF32 reads both
    /// operands in place).
    #[arg(long, value_name = "nn|nt|tn|tt", value_parser = trans_parser())]
    trans: Option<(bool, bool)>,
    /// gemm: only these kinds of rows, comma-separated (f32 SIMT, tf32 rounded,
    /// tf32-truncate: truncated TF32 on the Hopper kernel, f64, f16, bf16), each with its
    /// cuBLAS case.
    #[arg(long, value_name = "KINDS", value_delimiter = ',', value_parser = kinds_parser())]
    only: Vec<String>,
    /// overlap: bytes per upload, in MiB (default: 256 on a GPU, 32 on the emulator).
    #[arg(long)]
    mib: Option<usize>,
    /// Operations: also write the results as JSON records, one per case (see
    /// `bench compare`, `bench table`).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Operations: also draw the results as an SVG chart (throughput against size,
    /// warpforge beside its anchor).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// table: only each chart series' largest case (the headline figures of a sweep).
    #[arg(long)]
    largest: bool,
    /// compare: flag changes of the ratio to the anchor beyond this fraction.
    #[arg(long, default_value_t = bench_data::DEFAULT_NOISE)]
    noise: f64,
    /// compare: OLD.json NEW.json; table: the results files to tabulate.
    #[arg(value_name = "FILES")]
    files: Vec<PathBuf>,
}

/// What `bench` measures besides the operations' benchmarks.
const OVERLAP: &str = "overlap";
/// `bench compare OLD.json NEW.json`: two results files, case by case.
const COMPARE: &str = "compare";
/// `bench table FILES…`: results files as the Markdown table of the README and the docs.
const TABLE: &str = "table";
/// `bench plot FILES… --plot OUT.svg`: results files as a chart.
const PLOT: &str = "plot";

/// `bench gemm --trans`: `nn`, `nt`, `tn`, `tt` as `(trans_a, trans_b)`.
fn trans_parser() -> impl clap::builder::TypedValueParser<Value = (bool, bool)> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["nn", "nt", "tn", "tt"])
        .map(|t| (t.starts_with('t'), t.ends_with('t')))
}

/// `bench gemm --only`: the kinds of GEMM rows, listed in usage errors.
fn kinds_parser() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(bench::GEMM_KINDS)
}

/// `verify --op`: the registry's names, listed in the help and in usage errors.
fn operation_parser() -> clap::builder::PossibleValuesParser {
    let values = OPERATIONS
        .iter()
        .map(|op| clap::builder::PossibleValue::new(op.name).help(op.summary));
    clap::builder::PossibleValuesParser::new(values)
}

/// `bench WHAT`: every operation with a benchmark, and `overlap`.
fn bench_parser() -> clap::builder::PossibleValuesParser {
    let values = OPERATIONS
        .iter()
        .filter_map(|op| op.bench.as_ref().map(|b| (op.name, b.summary)))
        .chain([
            (OVERLAP, "copy/compute overlap of two streams"),
            (
                COMPARE,
                "compare two `--json` results files: each case's ratio of ratios",
            ),
            (TABLE, "`--json` results files as a Markdown table"),
            (
                PLOT,
                "`--json` results files as an SVG chart (`--plot OUT.svg`)",
            ),
        ])
        .map(|(name, help)| clap::builder::PossibleValue::new(name).help(help));
    clap::builder::PossibleValuesParser::new(values)
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ComputeDType {
    /// bfloat16: round a float input to bf16 (to nearest, ties to even), reduce in bf16 and
    /// write float32 (.npy has no bf16 dtype).
    Bf16,
}

/// `--op`: the names in `Op::ALL`, listed in the help and in usage errors.
fn op_parser() -> impl clap::builder::TypedValueParser<Value = Op> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Op::ALL.map(Op::name))
        .map(|name| Op::from_name(&name).expect("every name in Op::ALL parses"))
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// GPU 0 if usable, else the CPU emulator.
    Auto,
    /// GPU 0, or fail.
    Gpu,
    /// The CPU emulator.
    Emu,
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Verify {
            backend,
            seed,
            random_lengths,
            max_len,
            ops,
            profile,
            list,
        } => {
            if list {
                list_coverage(backend, &ops)
            } else {
                run_verify(backend, seed, random_lengths, max_len, &ops, profile)
            }
        }
        Command::Ptx(args) => ptx_command::run(&args),
        Command::Run(RunCommand::Reduce {
            op,
            axis,
            input,
            out,
            backend,
            dtype,
        }) => run_reduce(op, axis, &input, &out, backend, dtype),
        Command::Run(RunCommand::Gemm {
            a,
            b,
            c,
            alpha,
            beta,
            trans_a,
            trans_b,
            dtype,
            tf32,
            out,
            backend,
        }) => run_gemm(
            GemmFiles {
                a: &a,
                b: &b,
                c: c.as_deref(),
                out: &out,
            },
            alpha,
            beta,
            (trans_a, trans_b),
            (dtype, tf32),
            backend,
        ),
        Command::Run(RunCommand::Conv2d {
            input,
            weight,
            bias,
            stride,
            padding,
            dilation,
            groups,
            layout,
            relu,
            dtype,
            out,
            backend,
        }) => run_conv2d(
            ConvFiles {
                input: &input,
                weight: &weight,
                bias: bias.as_deref(),
                out: &out,
            },
            ConvParams {
                stride,
                padding,
                dilation,
                groups,
                layout,
                relu,
                dtype,
            },
            backend,
        ),
        Command::Profile(cmd) => profile::profile(&cmd)
            .map(|profiles| {
                for p in &profiles {
                    println!("{p}");
                }
                ExitCode::SUCCESS
            })
            .map_err(|e| e.to_string()),
        Command::Doctor(args) => run_doctor(&args),
        Command::Bench(args) => run_bench(&args),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// The operations `verify --op` names, or all of them.
fn selected_operations(names: &[String]) -> Result<Vec<&'static registry::Operation>, String> {
    if names.is_empty() {
        Ok(OPERATIONS.iter().collect())
    } else {
        names
            .iter()
            .map(|name| registry::operation(name))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())
    }
}

/// What the device is, for the coverage lines: `GPU 0 (…), compute capability 9.0`.
fn device_line(dev: &Device) -> String {
    let (major, minor) = dev.compute_capability();
    format!("{}, compute capability {major}.{minor}", dev.name())
}

/// `verify --list`: the dispatch table of the device and what covers each kernel.
fn list_coverage(backend: Backend, names: &[String]) -> Result<ExitCode, String> {
    let operations = selected_operations(names)?;
    let dev = open_backend(backend)?;
    let rows = registry::coverage(&dev, &operations).map_err(|e| e.to_string())?;
    println!("dispatch table of {}", device_line(&dev));
    let width = column_width(rows.iter().map(|r| r.entry.kernel));
    let module_width = column_width(rows.iter().map(|r| r.entry.module));
    println!("{:<width$} {:<module_width$}  covered", "kernel", "module");
    for r in &rows {
        let covered = match r.operation {
            Some(op) => format!("yes ({op})"),
            None => "NO".to_owned(),
        };
        println!(
            "{:<width$} {:<module_width$}  {covered}",
            r.entry.kernel, r.entry.module
        );
    }
    let missing = rows.iter().filter(|r| r.operation.is_none()).count();
    println!(
        "verify --list: {} of {} kernels covered, {missing} not covered",
        rows.len() - missing,
        rows.len()
    );
    Ok(if missing == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn run_verify(
    backend: Backend,
    seed: u64,
    random_lengths: usize,
    max_len: Option<usize>,
    names: &[String],
    profile: bool,
) -> Result<ExitCode, String> {
    let operations = selected_operations(names)?;
    let dev = open_backend(backend)?;
    let max_len = max_len.unwrap_or(if dev.is_gpu() { 4 << 20 } else { 200_000 });
    println!("verifying on {}", dev.name());
    let verify = || verify::run(&dev, &operations, seed, random_lengths, max_len);
    let (reports, profiles) = if profile {
        dev.profile_memory(verify).map_err(|e| e.to_string())?
    } else {
        (verify().map_err(|e| e.to_string())?, Vec::new())
    };
    let width = column_width(reports.iter().map(|r| r.kernel));
    println!(
        "{:<width$} {:>7} {:>12} {:>12} {:>10}  result",
        "kernel", "cases", "max abs err", "max rel err", "worst/tol"
    );
    for r in &reports {
        println!(
            "{:<width$} {:>7} {:>12.3e} {:>12.3e} {:>10.3}  {}",
            r.kernel,
            r.lengths.len(),
            r.max_abs_err,
            r.max_rel_err,
            r.worst_vs_tolerance,
            if r.passed() { "pass" } else { "FAIL" }
        );
        if let Some(f) = &r.failure {
            println!("    {f}");
        }
    }
    if profile {
        println!("\nmemory traffic per kernel, all its cases (emulator):");
        print!("{}", profile::kernel_table(&profiles));
    }
    // Coverage, from the launches the reports recorded: every kernel of the
    // device's dispatch table must have run (when every operation did).
    let launched: BTreeSet<&str> = reports
        .iter()
        .flat_map(|r| r.launched.iter().copied())
        .collect();
    let table = dispatch_table(dev.compute_capability());
    let missing = registry::not_covered(&table, &launched);
    println!(
        "coverage: {} of the {} kernels of the dispatch table of {} launched ({} kernels in all)",
        table.len() - missing.len(),
        table.len(),
        device_line(&dev),
        launched.len()
    );
    let all = operations.len() == OPERATIONS.len();
    if all {
        for e in &missing {
            println!("    not covered: {} ({})", e.kernel, e.module);
        }
    }
    let uncovered = if all { missing.len() } else { 0 };
    let failed = reports.iter().filter(|r| !r.passed()).count();
    println!(
        "verify: {} passed, {} failed{}",
        reports.len() - failed,
        failed,
        if uncovered > 0 {
            format!(", {uncovered} kernels of the dispatch table not covered")
        } else {
            String::new()
        }
    );
    Ok(if failed == 0 && uncovered == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn run_reduce(
    op: Op,
    axis: Option<usize>,
    input: &Path,
    out: &Path,
    backend: Backend,
    dtype: Option<ComputeDType>,
) -> Result<ExitCode, String> {
    let x = npy::read(input).map_err(|e| e.to_string())?;
    let dev = open_backend(backend)?;
    let as_bf16 = dtype == Some(ComputeDType::Bf16);
    let y = run::reduce_npy(&dev, op, axis, &x, as_bf16)
        .map_err(|e| format!("{}: {e}", input.display()))?;
    y.write(out).map_err(|e| e.to_string())?;
    let along = axis.map_or("the whole array".to_owned(), |k| format!("axis {k}"));
    println!(
        "{} over {along} of {} {:?} on {}{}: {} {:?} -> {}",
        op.name(),
        x.data.dtype_name(),
        x.shape,
        dev.name(),
        if as_bf16 { " in bf16" } else { "" },
        y.data.dtype_name(),
        y.shape,
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The files of `run gemm`.
struct GemmFiles<'a> {
    a: &'a Path,
    b: &'a Path,
    c: Option<&'a Path>,
    out: &'a Path,
}

fn run_gemm(
    files: GemmFiles<'_>,
    alpha: f64,
    beta: Option<f64>,
    (trans_a, trans_b): (bool, bool),
    (dtype, tf32): (Option<run::GemmDType>, bool),
    backend: Backend,
) -> Result<ExitCode, String> {
    let read = |name: &str, path: &Path| {
        npy::read(path).map_err(|e| format!("{name} ({}): {e}", path.display()))
    };
    let a = read("A", files.a)?;
    let b = read("B", files.b)?;
    let c = files.c.map(|p| read("C", p)).transpose()?;
    let request = run::GemmRequest {
        a: &a,
        b: &b,
        c: c.as_ref(),
        alpha,
        beta,
        trans_a,
        trans_b,
        dtype,
        tf32,
    };
    let dev = open_backend(backend)?;
    let (d, kernel) = run::gemm_npy(&dev, &request).map_err(|e| e.to_string())?;
    d.write(files.out).map_err(|e| e.to_string())?;
    println!(
        "gemm {}{} × {}{} on {} ({kernel}): {} {:?} -> {}",
        a.data.dtype_name(),
        if trans_a { "ᵀ" } else { "" },
        b.data.dtype_name(),
        if trans_b { "ᵀ" } else { "" },
        dev.name(),
        d.data.dtype_name(),
        d.shape,
        files.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The files of `run conv2d`.
struct ConvFiles<'a> {
    input: &'a Path,
    weight: &'a Path,
    bias: Option<&'a Path>,
    out: &'a Path,
}

/// The parameters of `run conv2d`.
struct ConvParams {
    stride: (usize, usize),
    padding: Padding,
    dilation: (usize, usize),
    groups: usize,
    layout: run::ConvLayout,
    relu: bool,
    dtype: Option<run::ConvDType>,
}

fn run_conv2d(
    files: ConvFiles<'_>,
    params: ConvParams,
    backend: Backend,
) -> Result<ExitCode, String> {
    let read = |name: &str, path: &Path| {
        npy::read(path).map_err(|e| format!("{name} ({}): {e}", path.display()))
    };
    let x = read("--input", files.input)?;
    let w = read("--weight", files.weight)?;
    let bias = files.bias.map(|p| read("--bias", p)).transpose()?;
    let request = run::ConvRequest {
        x: &x,
        w: &w,
        bias: bias.as_ref(),
        stride: params.stride,
        padding: params.padding,
        dilation: params.dilation,
        groups: params.groups,
        layout: params.layout,
        relu: params.relu,
        dtype: params.dtype,
    };
    let dev = open_backend(backend)?;
    let y = run::conv2d_npy(&dev, &request).map_err(|e| e.to_string())?;
    y.write(files.out).map_err(|e| e.to_string())?;
    println!(
        "conv2d {} {:?} * {:?} ({:?}) on {}: {} {:?} -> {}",
        x.data.dtype_name(),
        x.shape,
        w.shape,
        params.layout,
        dev.name(),
        y.data.dtype_name(),
        y.shape,
        files.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The device `--backend` names; `auto` says on stderr why it fell back to the emulator.
fn open_backend(backend: Backend) -> Result<Device, String> {
    match backend {
        Backend::Gpu => Device::gpu(0).map_err(|e| e.to_string()),
        Backend::Emu => Ok(Device::emulator()),
        Backend::Auto => {
            let (dev, why) = Device::auto();
            if let Some(why) = why {
                eprintln!(
                    "no usable GPU ({}); running on the CPU emulator",
                    short_reason(&why)
                );
            }
            Ok(dev)
        }
    }
}

fn run_bench(args: &BenchArgs) -> Result<ExitCode, String> {
    let not_for = |option: &str| {
        format!(
            "{option} does not apply to `bench {}`; see `warpforge bench --help`",
            args.what
        )
    };
    let measures = ![COMPARE, TABLE, PLOT].contains(&args.what.as_str());
    if measures && !args.files.is_empty() {
        return Err(format!(
            "`bench {}` takes no file arguments (got {}); see `warpforge bench --help`",
            args.what,
            args.files[0].display()
        ));
    }
    if !measures || args.what == OVERLAP {
        if args.max_log2.is_some() || args.iters.is_some() {
            return Err(not_for("--max-log2/--iters"));
        }
        if args.json.is_some() || (args.plot.is_some() && args.what != PLOT) {
            return Err(not_for("--json/--plot"));
        }
    }
    if args.what != "gemm" && (args.trans.is_some() || !args.only.is_empty()) {
        return Err(not_for("--trans/--only"));
    }
    match args.what.as_str() {
        COMPARE => return run_bench_compare(&args.files, args.noise),
        TABLE => return run_bench_table(&args.files, args.largest),
        PLOT => return run_bench_plot(&args.files, args.plot.as_deref()),
        OVERLAP => return run_bench_overlap(args.backend, args.mib),
        _ => {}
    }
    if args.mib.is_some() {
        return Err(not_for("--mib"));
    }
    let operation = registry::operation(&args.what).map_err(|e| e.to_string())?;
    let bench = operation
        .bench
        .as_ref()
        .ok_or_else(|| format!("operation `{}` has no benchmark", operation.name))?;
    let dev = open_backend(args.backend)?;
    let mut options = registry::BenchOptions::defaults(&dev);
    options.max_log2 = args.max_log2;
    if let Some(iters) = args.iters {
        options.timing.iters = iters;
    }
    options.trans = args.trans.unwrap_or_default();
    options.only = args.only.clone();
    let report = (bench.run)(&dev, &options).map_err(|e| e.to_string())?;
    print!("{}", bench_table::render(&report));
    if args.json.is_none() && args.plot.is_none() {
        return Ok(ExitCode::SUCCESS);
    }
    // The run's facts (a git call for the commit) only when something records them.
    let results = bench_data::BenchFile::of_report(
        operation.name,
        &report,
        &bench_data::RunFacts::gather(&dev),
    );
    if let Some(path) = &args.json {
        results.write(path)?;
        eprintln!("results: {}", path.display());
    }
    if let Some(path) = &args.plot {
        let title = format!("warpforge bench {} on {}", operation.name, report.device);
        write_chart(&results, &title, path)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `results` drawn as an SVG chart titled `title`, written to `path`.
fn write_chart(results: &bench_data::BenchFile, title: &str, path: &Path) -> Result<(), String> {
    let svg = bench_plot::render_svg(results, title)?;
    std::fs::write(path, svg).map_err(|e| format!("writing {}: {e}", path.display()))?;
    eprintln!("chart: {}", path.display());
    Ok(())
}

/// `bench compare OLD.json NEW.json`.
fn run_bench_compare(files: &[PathBuf], noise: f64) -> Result<ExitCode, String> {
    let [old, new] = files else {
        return Err(format!(
            "`bench compare` takes two results files, OLD.json NEW.json (got {})",
            files.len()
        ));
    };
    if !(noise.is_finite() && noise >= 0.0) {
        return Err(format!("--noise {noise}: a fraction ≥ 0 (0.05 = 5 %)"));
    }
    let old = bench_data::BenchFile::read(old)?;
    let new = bench_data::BenchFile::read(new)?;
    print!("{}", bench_data::compare(&old, &new, noise));
    Ok(ExitCode::SUCCESS)
}

/// The records of `files` (`bench table`, `bench plot`), one file at least.
fn read_results(files: &[PathBuf], what: &str) -> Result<bench_data::BenchFile, String> {
    if files.is_empty() {
        return Err(format!(
            "`bench {what}` takes one or more results files (`bench --json`)"
        ));
    }
    let all = files
        .iter()
        .map(|f| bench_data::BenchFile::read(f))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(bench_data::BenchFile::merge(all))
}

/// `bench table FILES…`.
fn run_bench_table(files: &[PathBuf], largest: bool) -> Result<ExitCode, String> {
    let mut results = read_results(files, TABLE)?;
    if largest {
        results = bench_data::largest_per_series(&results);
    }
    print!("{}", bench_data::markdown_table(&results));
    Ok(ExitCode::SUCCESS)
}

/// `bench plot FILES… --plot OUT.svg`: the chart `bench --plot` draws, from saved results.
fn run_bench_plot(files: &[PathBuf], out: Option<&Path>) -> Result<ExitCode, String> {
    let out = out.ok_or("`bench plot` needs `--plot OUT.svg`")?;
    let results = read_results(files, PLOT)?;
    let family = results.records.first().map_or_else(
        || "results".to_owned(),
        |r| format!("bench {} on {}", r.family, r.gpu),
    );
    write_chart(&results, &format!("warpforge {family}"), out)?;
    Ok(ExitCode::SUCCESS)
}

fn run_bench_overlap(backend: Backend, mib: Option<usize>) -> Result<ExitCode, String> {
    let dev = open_backend(backend)?;
    let mut config = bench::OverlapBench::defaults(&dev);
    if let Some(mib) = mib {
        config.copy_bytes = mib
            .checked_mul(1 << 20)
            .ok_or_else(|| format!("--mib {mib}: the byte count overflows"))?;
    }
    let report = bench::overlap(&dev, &config).map_err(|e| e.to_string())?;
    print!("{}", bench_table::render_overlap(&report));
    Ok(ExitCode::SUCCESS)
}

/// The first sentence of an error, for a one-line notice.
fn short_reason(e: &Error) -> String {
    let s = e.to_string();
    s.split(". ").next().unwrap_or(&s).to_owned()
}

fn run_doctor(args: &DoctorArgs) -> Result<ExitCode, String> {
    match args.timings_child.as_deref() {
        Some("floor") => {
            startup::floor_child()?;
            return Ok(ExitCode::SUCCESS);
        }
        Some("first-reduction") => {
            for phase in startup::first_reduction_phases() {
                println!("{}", phase.to_line());
            }
            return Ok(ExitCode::SUCCESS);
        }
        Some(other) => return Err(format!("unknown --timings-child {other}")),
        None => {}
    }
    if args.timings {
        let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
        print!("{}", startup::measure(&exe)?);
        return Ok(ExitCode::SUCCESS);
    }
    let report = warpforge_cli::doctor::gather();
    print!("{report}");
    Ok(if report.verdict().is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
