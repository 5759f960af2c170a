//! `warpforge profile`: the emulator's memory-traffic profile of a library
//! operation ([`warpforge::Device::profile_memory`]), on inputs of a given
//! shape, with the options of `warpforge run` (files are not needed: the
//! inputs are generated, their values do not change the traffic of these
//! kernels, only which elements argmax picks).
//!
//! ```
//! use warpforge_cli::profile::{ProfileCommand, profile};
//! let cmd = ProfileCommand::Axpy { len: 1000, f64: false };
//! let profiles = profile(&cmd)?;
//! assert_eq!(profiles[0].kernel, "axpy_f32");
//! assert_eq!(profiles[0].output_elements, 1000);
//! # Ok::<(), warpforge_cli::run::RunError>(())
//! ```

use crate::npy::{NpyArray, NpyData};
use crate::run::{self, ConvDType, ConvLayout, ConvRequest, GemmDType, GemmRequest, RunError};
use half::f16;
use warpforge::conv2d::Padding;
use warpforge::reduce::Op;
use warpforge::{Device, MemoryProfile};

/// The operation to profile, and its shape.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum ProfileCommand {
    /// y = a·x + y over `--len` elements.
    Axpy {
        /// Elements of x and y.
        #[arg(long)]
        len: usize,
        /// f64 instead of f32.
        #[arg(long)]
        f64: bool,
    },
    /// A reduction of an array of `--shape`, whole or along `--axis` (as `run reduce`).
    Reduce {
        /// The reduction.
        #[arg(long, value_parser = op_parser())]
        op: Op,
        /// The input's shape, comma-separated (e.g. 64,1024).
        #[arg(long, value_parser = parse_shape)]
        shape: Shape,
        /// Reduce along this axis (0 = outermost); omit it to reduce the whole array.
        #[arg(long)]
        axis: Option<usize>,
        /// The input's dtype.
        #[arg(long, value_enum, default_value_t = ReduceDType::F32)]
        dtype: ReduceDType,
    },
    /// D = alpha·op(A)·op(B) (+ beta·C) for op(A) m × k, op(B) k × n (as `run gemm`).
    Gemm {
        /// Rows of op(A) and D.
        #[arg(long)]
        m: usize,
        /// Columns of op(B) and D.
        #[arg(long)]
        n: usize,
        /// Columns of op(A), rows of op(B).
        #[arg(long)]
        k: usize,
        /// A strided batch of this many products (3-D A, B and D).
        #[arg(long)]
        batch: Option<usize>,
        /// Add beta·C (C is m × n).
        #[arg(long, allow_negative_numbers = true)]
        beta: Option<f64>,
        /// Use Aᵀ (A is stored k × m).
        #[arg(long)]
        trans_a: bool,
        /// Use Bᵀ (B is stored n × k).
        #[arg(long)]
        trans_b: bool,
        /// The computing dtype.
        #[arg(long, value_enum, default_value_t = GemmDType::F32)]
        dtype: GemmDType,
        /// f32 on the TF32 tensor cores.
        #[arg(long)]
        tf32: bool,
    },
    /// y = conv2d(x, w) (+ bias), ReLU if asked (as `run conv2d`).
    Conv2d {
        /// The input's shape in the layout's order: N,C,H,W (NCHW) or N,H,W,C (NHWC).
        #[arg(long, value_parser = parse_shape)]
        input_shape: Shape,
        /// The weights' shape: K,C/groups,R,S (NCHW) or K,R,S,C/groups (NHWC).
        #[arg(long, value_parser = parse_shape)]
        weight_shape: Shape,
        /// Add a bias of K values.
        #[arg(long)]
        bias: bool,
        /// Stride: S (both axes) or SH,SW.
        #[arg(long, value_name = "S|SH,SW", default_value = "1", value_parser = run::parse_pair)]
        stride: (usize, usize),
        /// Zero padding: P (every side), PH,PW, or T,B,L,R.
        #[arg(long, value_name = "P|PH,PW|T,B,L,R", default_value = "0", value_parser = run::parse_padding)]
        padding: Padding,
        /// Dilation: D (both axes) or DH,DW.
        #[arg(long, value_name = "D|DH,DW", default_value = "1", value_parser = run::parse_pair)]
        dilation: (usize, usize),
        /// Groups (C for depthwise).
        #[arg(long, default_value_t = 1)]
        groups: usize,
        /// How x, the weights and y are stored.
        #[arg(long, value_enum, default_value_t = ConvLayout::Nchw)]
        layout: ConvLayout,
        /// ReLU after the bias.
        #[arg(long)]
        relu: bool,
        /// The computing dtype.
        #[arg(long, value_enum, default_value_t = ConvDType::F32)]
        dtype: ConvDType,
    },
}

/// The dtype of `profile reduce`'s input (`bf16`: f32 values reduced in
/// bf16, as `run reduce --dtype bf16`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReduceDType {
    /// float16.
    F16,
    /// bfloat16.
    Bf16,
    /// float32.
    F32,
    /// float64.
    F64,
    /// int32.
    I32,
    /// int64.
    I64,
    /// uint32.
    U32,
}

/// `--op`: the names in `Op::ALL`.
fn op_parser() -> impl clap::builder::TypedValueParser<Value = Op> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Op::ALL.map(Op::name))
        .map(|name| Op::from_name(&name).expect("every name in Op::ALL parses"))
}

/// An array's shape (one argument, comma-separated sizes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape(pub Vec<usize>);

/// A shape: comma-separated sizes.
///
/// ```
/// use warpforge_cli::profile::{Shape, parse_shape};
/// assert_eq!(parse_shape("2,3,4"), Ok(Shape(vec![2, 3, 4])));
/// assert!(parse_shape("2,x").is_err());
/// ```
pub fn parse_shape(s: &str) -> Result<Shape, String> {
    run::parse_list(s).map(Shape)
}

/// Element `i` of a generated input: small integers in -8..=8, varied
/// enough that reductions do not all pick the first element.
fn value(i: usize) -> i32 {
    (i.wrapping_mul(2_654_435_761) % 17) as i32 - 8
}

/// An array of `shape` with generated values of `dtype`.
fn array(shape: &[usize], dtype: ReduceDType) -> NpyArray {
    let n: usize = shape.iter().product();
    let values = (0..n).map(value);
    let data = match dtype {
        ReduceDType::F16 => NpyData::F16(values.map(|v| f16::from_f32(v as f32)).collect()),
        ReduceDType::F32 | ReduceDType::Bf16 => NpyData::F32(values.map(|v| v as f32).collect()),
        ReduceDType::F64 => NpyData::F64(values.map(f64::from).collect()),
        ReduceDType::I32 => NpyData::I32(values.collect()),
        ReduceDType::I64 => NpyData::I64(values.map(i64::from).collect()),
        ReduceDType::U32 => NpyData::U32(values.map(|v| (v + 8) as u32).collect()),
    };
    NpyArray {
        shape: shape.to_vec(),
        data,
    }
}

/// f32 values of `shape` (the gemm and conv operands; the operation
/// converts them to its dtype).
fn floats(shape: &[usize]) -> NpyArray {
    array(shape, ReduceDType::F32)
}

/// Runs `cmd` on a fresh emulator; returns the profile of each launch it made.
pub fn profile(cmd: &ProfileCommand) -> Result<Vec<MemoryProfile>, RunError> {
    let dev = Device::emulator();
    let ((), profiles) = dev.profile_memory(|| run_once(&dev, cmd).map_err(into_error))?;
    Ok(profiles)
}

/// A `RunError` inside `profile_memory`, whose closure returns warpforge's error.
fn into_error(e: RunError) -> warpforge::Error {
    match e {
        RunError::Device(e) => e,
        other => warpforge::Error::InvalidParameter {
            op: "profile",
            parameter: "shape",
            detail: other.to_string(),
        },
    }
}

fn run_once(dev: &Device, cmd: &ProfileCommand) -> Result<(), RunError> {
    match cmd {
        ProfileCommand::Axpy { len, f64 } => {
            let xs: Vec<f64> = (0..*len).map(|i| f64::from(value(i))).collect();
            if *f64 {
                let x = dev.upload(&xs)?;
                let mut y = dev.upload(&xs)?;
                warpforge::ops::axpy(2.0, &x, &mut y)?;
            } else {
                let xs: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
                let x = dev.upload(&xs)?;
                let mut y = dev.upload(&xs)?;
                warpforge::ops::axpy(2.0f32, &x, &mut y)?;
            }
        }
        ProfileCommand::Reduce {
            op,
            shape,
            axis,
            dtype,
        } => {
            let x = array(&shape.0, *dtype);
            run::reduce_npy(dev, *op, *axis, &x, *dtype == ReduceDType::Bf16)?;
        }
        ProfileCommand::Gemm {
            m,
            n,
            k,
            batch,
            beta,
            trans_a,
            trans_b,
            dtype,
            tf32,
        } => {
            let stored = |rows: usize, cols: usize, trans: bool| {
                let dims = if trans { [cols, rows] } else { [rows, cols] };
                match batch {
                    Some(b) => floats(&[*b, dims[0], dims[1]]),
                    None => floats(&dims),
                }
            };
            let (a, b) = (stored(*m, *k, *trans_a), stored(*k, *n, *trans_b));
            let c = beta.map(|_| stored(*m, *n, false));
            // The files' dtype is f32; gemm converts it to --dtype (f64 too).
            run::gemm_npy(
                dev,
                &GemmRequest {
                    a: &a,
                    b: &b,
                    c: c.as_ref(),
                    alpha: 1.0,
                    beta: *beta,
                    trans_a: *trans_a,
                    trans_b: *trans_b,
                    dtype: Some(*dtype),
                    tf32: *tf32,
                },
            )?;
        }
        ProfileCommand::Conv2d {
            input_shape,
            weight_shape,
            bias,
            stride,
            padding,
            dilation,
            groups,
            layout,
            relu,
            dtype,
        } => {
            let x = floats(&input_shape.0);
            let w = floats(&weight_shape.0);
            let bias = bias.then(|| floats(&weight_shape.0[..1.min(weight_shape.0.len())]));
            run::conv2d_npy(
                dev,
                &ConvRequest {
                    x: &x,
                    w: &w,
                    bias: bias.as_ref(),
                    stride: *stride,
                    padding: *padding,
                    dilation: *dilation,
                    groups: *groups,
                    layout: *layout,
                    relu: *relu,
                    dtype: Some(*dtype),
                },
            )?;
        }
    }
    Ok(())
}

/// `verify --profile`'s column set: one row per kernel (its launches'
/// profiles added up, in order of first launch): launches, global load
/// sectors per request, load and store coalescing efficiency, shared-memory
/// bank conflicts per request, and bytes moved per output element.
///
/// ```
/// use warpforge::MemoryProfile;
/// use warpforge_cli::profile::kernel_table;
/// let mut p = MemoryProfile { kernel: "k".into(), output_elements: 32, ..Default::default() };
/// p.global_store.requests = 1;
/// p.global_store.sectors = 4;
/// p.global_store.bytes_requested = 128;
/// let table = kernel_table(&[p.clone(), p]);
/// assert!(table.lines().nth(1).unwrap().starts_with("k "), "{table}");
/// assert!(table.contains("100.0%"), "{table}");
/// ```
pub fn kernel_table(profiles: &[MemoryProfile]) -> String {
    let mut kernels: Vec<(MemoryProfile, usize)> = Vec::new();
    for p in profiles {
        match kernels.iter_mut().find(|(k, _)| k.kernel == p.kernel) {
            Some((k, n)) => {
                k.add(p);
                *n += 1;
            }
            None => kernels.push((p.clone(), 1)),
        }
    }
    let width = crate::column_width(kernels.iter().map(|(k, _)| k.kernel.as_str()));
    let mut out = format!(
        "{:<width$} {:>8} {:>8} {:>7} {:>7} {:>10} {:>10} {:>10}\n",
        "kernel", "launches", "ld s/rq", "ld eff", "st eff", "confl/rq", "B rd/elem", "B wr/elem"
    );
    let percent = |requests: u64, efficiency: f64| {
        if requests == 0 {
            "-".to_owned()
        } else {
            format!("{:.1}%", 100.0 * efficiency)
        }
    };
    for (k, launches) in &kernels {
        let shared_requests =
            k.shared_load.requests + k.shared_store.requests + k.ldmatrix.requests;
        let conflicts = if shared_requests == 0 {
            "-".to_owned()
        } else {
            format!("{:.2}", k.bank_conflicts() as f64 / shared_requests as f64)
        };
        let (read, written) = k
            .bytes_per_output_element()
            .map_or(("-".to_owned(), "-".to_owned()), |(r, w)| {
                (format!("{r:.2}"), format!("{w:.2}"))
            });
        out += &format!(
            "{:<width$} {:>8} {:>8.2} {:>7} {:>7} {:>10} {:>10} {:>10}\n",
            k.kernel,
            launches,
            k.global_load.sectors_per_request(),
            percent(k.global_load.requests, k.global_load.efficiency()),
            percent(k.global_store.requests, k.global_store.efficiency()),
            conflicts,
            read,
            written,
        );
    }
    out
}
