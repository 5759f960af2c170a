//! Library operations on `.npy` arrays: what `warpforge run` does, usable from code.
//!
//! ```no_run
//! use warpforge::{Device, reduce::Op};
//! use warpforge_cli::{npy, run};
//! let input = npy::read("x.npy")?;
//! let out = run::reduce_npy(&Device::emulator(), Op::Sum, Some(1), &input, false)?;
//! out.write("y.npy")?;
//! # Ok::<(), run::RunError>(())
//! ```

use crate::npy::{NpyArray, NpyData, NpyError};
use half::{bf16, f16};
use warpforge::conv2d::{Conv2d, ConvElement, Layout, Padding};
use warpforge::gemm::{Gemm, GemmElement, GemmTypes};
use warpforge::reduce::{self, Op, Reduced, Reducible};
use warpforge::{Device, Element, Error};

/// Why a `run` operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Reading or writing a `.npy` file.
    #[error(transparent)]
    Npy(#[from] NpyError),
    /// The operation itself: bad axis, empty input, unsupported dtype, device errors.
    #[error(transparent)]
    Device(#[from] Error),
    /// `--dtype bf16` asked of an input that is not floating point.
    #[error(
        "bf16 computation needs a float input (float16, float32 or float64), but the input is \
         {dtype}: reduce it in its own dtype (drop `--dtype bf16`)"
    )]
    Bf16NeedsFloat {
        /// The input's dtype.
        dtype: &'static str,
    },
    /// `run gemm`: operands whose shapes, dtypes or options do not fit
    /// together (the message names the operands and sizes).
    #[error("{0}")]
    Gemm(String),
    /// `run conv2d`: operands whose shapes or dtypes do not fit the
    /// convolution (the message names the operands and sizes).
    #[error("conv2d: {0}")]
    Conv2d(String),
}

/// Reduces `input` with `op` on `dev`: the whole array (`axis` `None`, output
/// shape `[]`) or along `axis` (output shape = input shape without that axis).
///
/// The output has the input's dtype, except int64 indices for argmin/argmax.
/// With `as_bf16`, a float input is rounded to bf16 (to nearest, ties to even),
/// reduced in bf16, and the result returned as float32 (`.npy` has no bf16);
/// indices stay int64.
pub fn reduce_npy(
    dev: &Device,
    op: Op,
    axis: Option<usize>,
    input: &NpyArray,
    as_bf16: bool,
) -> Result<NpyArray, RunError> {
    let shape = &input.shape;
    if as_bf16 {
        let x = to_bf16(&input.data).ok_or(RunError::Bf16NeedsFloat {
            dtype: input.data.dtype_name(),
        })?;
        return reduce_typed(dev, op, axis, shape, &x, |v| {
            NpyData::F32(v.into_iter().map(bf16::to_f32).collect())
        });
    }
    match &input.data {
        NpyData::F16(x) => reduce_typed(dev, op, axis, shape, x, NpyData::F16),
        NpyData::F32(x) => reduce_typed(dev, op, axis, shape, x, NpyData::F32),
        NpyData::F64(x) => reduce_typed(dev, op, axis, shape, x, NpyData::F64),
        NpyData::I32(x) => reduce_typed(dev, op, axis, shape, x, NpyData::I32),
        NpyData::I64(x) => reduce_typed(dev, op, axis, shape, x, NpyData::I64),
        NpyData::U32(x) => reduce_typed(dev, op, axis, shape, x, NpyData::U32),
    }
}

/// A float array rounded to bf16 (nearest, ties to even, from the value itself:
/// no double rounding through f32 for float64); `None` for integer arrays.
pub fn to_bf16(data: &NpyData) -> Option<Vec<bf16>> {
    Some(match data {
        // f16 → f32 is exact.
        NpyData::F16(v) => v.iter().map(|&x| bf16::from_f32(f16::to_f32(x))).collect(),
        NpyData::F32(v) => v.iter().map(|&x| bf16::from_f32(x)).collect(),
        NpyData::F64(v) => v.iter().map(|&x| bf16_from_f64(x)).collect(),
        NpyData::I32(_) | NpyData::I64(_) | NpyData::U32(_) => return None,
    })
}

/// `x` rounded to the nearest bf16, ties to even. (`half::bf16::from_f64`
/// drops the low 32 bits of the mantissa first, so it can round the wrong way.)
/// Rounding to f32 with round-to-odd and then to bf16 rounds once: f32 keeps
/// more than two bits beyond bf16's, and the odd last bit records inexactness.
pub fn bf16_from_f64(x: f64) -> bf16 {
    bf16::from_f32(f32_round_to_odd(x))
}

/// `x` rounded to the nearest f16, ties to even, through f32 with
/// round-to-odd as [`bf16_from_f64`] does (f32 keeps 13 more bits than f16,
/// and f16's subnormals are f32 normals).
pub fn f16_from_f64(x: f64) -> f16 {
    f16::from_f32(f32_round_to_odd(x))
}

/// `x` rounded to f32 toward zero, with the last bit set when inexact.
fn f32_round_to_odd(x: f64) -> f32 {
    let mut t = x as f32;
    if !x.is_nan() && f64::from(t) != x {
        if f64::from(t).abs() > x.abs() {
            // Rounded away from zero (possibly to ±inf): step back toward zero.
            t = f32::from_bits(t.to_bits() - 1);
        }
        t = f32::from_bits(t.to_bits() | 1);
    }
    t
}

fn reduce_typed<T: Reducible>(
    dev: &Device,
    op: Op,
    axis: Option<usize>,
    shape: &[usize],
    x: &[T],
    values: impl FnOnce(Vec<T>) -> NpyData,
) -> Result<NpyArray, RunError> {
    let buf = dev.upload(x)?;
    let data = match reduce::reduce(op, &buf, shape, axis)? {
        Reduced::Values(v) => values(v.to_host()?),
        Reduced::Indices(i) => NpyData::I64(i.to_host()?),
    };
    let shape = reduce::output_shape(shape, axis);
    Ok(NpyArray { shape, data })
}

/// The dtype `run gemm` computes in (`--dtype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GemmDType {
    /// float16 inputs, f32 accumulation (tensor cores).
    F16,
    /// bfloat16 inputs, f32 accumulation (tensor cores); written as float32.
    Bf16,
    /// float32 (SIMT fused multiply-adds).
    F32,
    /// float64 (SIMT fused multiply-adds).
    F64,
}

impl GemmDType {
    /// `f16`, `bf16`, `f32`, `f64`.
    pub fn name(self) -> &'static str {
        match self {
            GemmDType::F16 => "f16",
            GemmDType::Bf16 => "bf16",
            GemmDType::F32 => "f32",
            GemmDType::F64 => "f64",
        }
    }
}

/// What `warpforge run gemm` computes: `D = alpha·op(A)·op(B) + beta·C`.
#[derive(Clone, Copy, Debug)]
pub struct GemmRequest<'a> {
    /// `A` as stored (2-D).
    pub a: &'a NpyArray,
    /// `B` as stored (2-D).
    pub b: &'a NpyArray,
    /// `C` (`m × n`), if given.
    pub c: Option<&'a NpyArray>,
    /// The factor of `op(A)·op(B)`.
    pub alpha: f64,
    /// The factor of `C`: needs `c`; defaults to 1 with `c`, 0 without.
    pub beta: Option<f64>,
    /// `op(A) = Aᵀ`.
    pub trans_a: bool,
    /// `op(B) = Bᵀ`.
    pub trans_b: bool,
    /// The computing dtype; `None`: the inputs' (they must agree).
    pub dtype: Option<GemmDType>,
    /// f32 only: TF32 tensor cores ([`Gemm::tf32`]); refused for any other
    /// dtype.
    pub tf32: bool,
}

/// The dtype an `.npy` array computes in by default, if it is a float one.
fn own_dtype(data: &NpyData) -> Option<GemmDType> {
    match data {
        NpyData::F16(_) => Some(GemmDType::F16),
        NpyData::F32(_) => Some(GemmDType::F32),
        NpyData::F64(_) => Some(GemmDType::F64),
        NpyData::I32(_) | NpyData::I64(_) | NpyData::U32(_) => None,
    }
}

/// The values of an `.npy` array as f64 (exact for every dtype but int64
/// beyond 2⁵³, which rounds to nearest).
fn as_f64(data: &NpyData) -> Vec<f64> {
    match data {
        NpyData::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
        NpyData::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        NpyData::F64(v) => v.clone(),
        NpyData::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        NpyData::I64(v) => v.iter().map(|&x| x as f64).collect(),
        NpyData::U32(v) => v.iter().map(|&x| f64::from(x)).collect(),
    }
}

/// `(batch, rows, columns)` of an operand: a 2-D matrix (no batch: the same
/// for every batch), or a 3-D batch `[batch, rows, cols]`.
fn matrix_dims(name: &str, x: &NpyArray) -> Result<(Option<usize>, usize, usize), RunError> {
    match x.shape[..] {
        [rows, cols] => Ok((None, rows, cols)),
        [batch, rows, cols] => Ok((Some(batch), rows, cols)),
        _ => Err(RunError::Gemm(format!(
            "{name} must be a 2-D matrix or a 3-D batch of them, but has shape {:?} ({}-D)",
            x.shape,
            x.shape.len()
        ))),
    }
}

/// `D = alpha·op(A)·op(B) + beta·C` on `dev` (see [`GemmRequest`]): `D` is
/// `m × n` in the computing dtype: float32 for f32, float64 for f64; with
/// f16 or bf16, `A` and `B` are rounded to it (nearest, ties to even), the
/// tensor-core kernels accumulate in f32, and `D` (and `C`) are float32
/// (`.npy` has no bf16; f32 keeps the accumulator's precision).
///
/// A 3-D `A` (`[batch, rows, cols]`) or `B` is a strided batch, a 2-D one
/// broadcast to every batch; `D` (and `C`) are then `[batch, m, n]`.
///
/// Every shape and option is checked before anything runs: `A` and `B` 2-D
/// or 3-D with one batch count,
/// `op(A)`'s columns equal to `op(B)`'s rows, `C` of shape `m × n`, `beta`
/// only with `C`, one dtype for every operand unless `dtype` is given (then
/// each is converted to it, rounding to nearest), and integer inputs only with
/// an explicit `dtype`.
///
/// Returns `D` and the name of the kernel that computed it.
pub fn gemm_npy(dev: &Device, req: &GemmRequest<'_>) -> Result<(NpyArray, &'static str), RunError> {
    let (a_batch, ar, ac) = matrix_dims("A", req.a)?;
    let (b_batch, br, bc) = matrix_dims("B", req.b)?;
    // A 3-D A or B is a batch; a 2-D one is broadcast to every batch.
    let batch = match (a_batch, b_batch) {
        (Some(x), Some(y)) if x != y => {
            return Err(RunError::Gemm(format!(
                "batch counts do not match: A has shape {:?} (a batch of {x}), B has shape {:?} \
                 (a batch of {y}); give both the same batch, or one as a 2-D matrix to \
                 broadcast",
                req.a.shape, req.b.shape
            )));
        }
        (x, y) => x.or(y),
    };
    let describe = |name: &str, rows: usize, cols: usize, trans: bool| {
        if trans {
            format!("op({name}) = {name}ᵀ is {cols} × {rows} ({name} stored {rows} × {cols})")
        } else {
            format!("op({name}) = {name} is {rows} × {cols}")
        }
    };
    let (m, ka) = if req.trans_a { (ac, ar) } else { (ar, ac) };
    let (kb, n) = if req.trans_b { (bc, br) } else { (br, bc) };
    if ka != kb {
        return Err(RunError::Gemm(format!(
            "shapes do not match: {}, {}; op(A)'s columns ({ka}) must equal op(B)'s rows ({kb})",
            describe("A", ar, ac, req.trans_a),
            describe("B", br, bc, req.trans_b),
        )));
    }
    let k = ka;
    if req.c.is_none() && req.beta.is_some() {
        return Err(RunError::Gemm(
            "--beta needs --c: beta scales C, and there is no C".to_owned(),
        ));
    }
    if let Some(c) = req.c {
        let want: Vec<usize> = batch.into_iter().chain([m, n]).collect();
        if let ([cr, cc], None) = (&c.shape[..], batch)
            && (*cr, *cc) != (m, n)
        {
            return Err(RunError::Gemm(format!(
                "C is {cr} × {cc}, but the result is m × n = {m} × {n} ({}, {})",
                describe("A", ar, ac, req.trans_a),
                describe("B", br, bc, req.trans_b),
            )));
        }
        if c.shape != want {
            return Err(RunError::Gemm(format!(
                "C has shape {:?}, but the result has shape {want:?} ({}, {}{})",
                c.shape,
                describe("A", ar, ac, req.trans_a),
                describe("B", br, bc, req.trans_b),
                match batch {
                    Some(b) => format!(", a batch of {b}"),
                    None => String::new(),
                },
            )));
        }
    }
    let operands: Vec<(&str, &NpyArray)> = [("A", req.a), ("B", req.b)]
        .into_iter()
        .chain(req.c.map(|c| ("C", c)))
        .collect();
    let dtype = match req.dtype {
        Some(d) => d,
        None => {
            let mut found: Option<(&str, &NpyArray, GemmDType)> = None;
            for &(name, x) in &operands {
                let Some(d) = own_dtype(&x.data) else {
                    return Err(RunError::Gemm(format!(
                        "{name} is {}: GEMM computes in floating point; pass --dtype f32 or \
                         --dtype f64 to convert it",
                        x.data.dtype_name()
                    )));
                };
                match found {
                    Some((first, fx, fd)) if fd != d => {
                        return Err(RunError::Gemm(format!(
                            "{first} is {} but {name} is {}: pass --dtype to compute in one \
                             dtype (every operand is converted to it)",
                            fx.data.dtype_name(),
                            x.data.dtype_name()
                        )));
                    }
                    Some(_) => {}
                    None => found = Some((name, x, d)),
                }
            }
            found.expect("A is always an operand").2
        }
    };
    let beta = req.beta.unwrap_or(if req.c.is_some() { 1.0 } else { 0.0 });
    let problem = Problem {
        m,
        n,
        k,
        trans_a: req.trans_a,
        trans_b: req.trans_b,
        alpha: req.alpha,
        beta,
        batch: batch.unwrap_or(1),
        stride_a: if a_batch.is_some() { ar * ac } else { 0 },
        stride_b: if b_batch.is_some() { br * bc } else { 0 },
        tf32: req.tf32,
    };
    let [a, b] = [req.a, req.b].map(|x| as_f64(&x.data));
    let c = req.c.map(|c| as_f64(&c.data));
    let c = c.as_deref();
    let p = &problem;
    // One arm per computing dtype: the input type, the output type (what `D`
    // and `C` are held in) and the scalar type of `alpha`, `beta`.
    let (data, kernel) = match dtype {
        GemmDType::F32 => gemm_typed(
            dev,
            p,
            (a, b, c),
            |v| v as f32,
            |v| v as f32,
            |v| v as f32,
            NpyData::F32,
        )?,
        GemmDType::F64 => gemm_typed(dev, p, (a, b, c), |v| v, |v| v, |v| v, NpyData::F64)?,
        // Tensor cores: f16/bf16 inputs, f32 accumulation and output.
        GemmDType::F16 => gemm_typed(
            dev,
            p,
            (a, b, c),
            f16_from_f64,
            |v| v as f32,
            |v| v as f32,
            NpyData::F32,
        )?,
        GemmDType::Bf16 => gemm_typed(
            dev,
            p,
            (a, b, c),
            bf16_from_f64,
            |v| v as f32,
            |v| v as f32,
            NpyData::F32,
        )?,
    };
    let shape = batch.into_iter().chain([m, n]).collect();
    Ok((NpyArray { shape, data }, kernel))
}

/// The sizes and factors of one `run gemm`.
struct Problem {
    m: usize,
    n: usize,
    k: usize,
    trans_a: bool,
    trans_b: bool,
    alpha: f64,
    beta: f64,
    /// Batch count (1 without a batch) and the strides of `A` and `B`
    /// between batches (0: a 2-D operand, broadcast); `C`/`D` are packed.
    batch: usize,
    stride_a: usize,
    stride_b: usize,
    /// TF32 tensor cores for f32 ([`Gemm::tf32`]).
    tf32: bool,
}

/// The operands as f64: `A`, `B` and `C` if given.
type Operands<'a> = (Vec<f64>, Vec<f64>, Option<&'a [f64]>);

/// Converts `A` and `B` to `TIn` and `C` to `TOut` (each to nearest), runs
/// the library's GEMM (`alpha`, `beta` in `S`) on `dev` and returns `D`,
/// `batch × m × n`, as `TOut` held by `wrap`, and the kernel's name.
fn gemm_typed<TIn, TOut, S>(
    dev: &Device,
    p: &Problem,
    (a, b, c): Operands<'_>,
    to_in: impl Fn(f64) -> TIn,
    to_out: impl Fn(f64) -> TOut,
    to_scalar: impl Fn(f64) -> S,
    wrap: impl FnOnce(Vec<TOut>) -> NpyData,
) -> Result<(NpyData, &'static str), RunError>
where
    TIn: GemmTypes<TOut, Scalar = S>,
    TOut: Element,
    S: GemmElement,
{
    let a = dev.upload(&a.iter().map(|&x| to_in(x)).collect::<Vec<_>>())?;
    let b = dev.upload(&b.iter().map(|&x| to_in(x)).collect::<Vec<_>>())?;
    let mut d = match c {
        Some(c) => dev.upload(&c.iter().map(|&x| to_out(x)).collect::<Vec<_>>())?,
        None => dev.alloc_zeroed(p.batch * p.m * p.n)?,
    };
    let gemm = Gemm::<S>::new(p.m, p.n, p.k)
        .trans_a(p.trans_a)
        .trans_b(p.trans_b)
        .batch(p.batch)
        .stride_a(p.stride_a)
        .stride_b(p.stride_b)
        .stride_c(p.m * p.n)
        .alpha(to_scalar(p.alpha))
        .beta(to_scalar(p.beta))
        .tf32(p.tf32);
    gemm.run(dev, &a, &b, &mut d)?;
    let kernel = gemm.kernel_name_for::<TIn, TOut>(dev)?;
    Ok((wrap(d.to_host()?), kernel))
}

/// `S` or `SH,SW` (`--stride`, `--dilation`): one value for both axes, or
/// rows then columns. Zero is accepted here and refused by the library,
/// whose error names the parameter.
///
/// ```
/// use warpforge_cli::run::parse_pair;
/// assert_eq!(parse_pair("2"), Ok((2, 2)));
/// assert_eq!(parse_pair("1,3"), Ok((1, 3)));
/// assert!(parse_pair("1,2,3").is_err());
/// ```
pub fn parse_pair(s: &str) -> Result<(usize, usize), String> {
    match parse_list(s)?[..] {
        [v] => Ok((v, v)),
        [h, w] => Ok((h, w)),
        ref other => Err(format!(
            "expected one value (both axes) or two (rows,columns), got {}",
            other.len()
        )),
    }
}

/// `P`, `PH,PW` or `T,B,L,R` (`--padding`): every side, rows and columns,
/// or each side (top, bottom, left, right).
///
/// ```
/// use warpforge::conv2d::Padding;
/// use warpforge_cli::run::parse_padding;
/// assert_eq!(parse_padding("1"), Ok(Padding::uniform(1)));
/// assert_eq!(parse_padding("1,2"), Ok(Padding::symmetric(1, 2)));
/// let p = parse_padding("0,1,2,3").unwrap();
/// assert_eq!((p.top, p.bottom, p.left, p.right), (0, 1, 2, 3));
/// assert!(parse_padding("1,2,3").is_err());
/// ```
pub fn parse_padding(s: &str) -> Result<Padding, String> {
    match parse_list(s)?[..] {
        [p] => Ok(Padding::uniform(p)),
        [ph, pw] => Ok(Padding::symmetric(ph, pw)),
        [top, bottom, left, right] => Ok(Padding {
            top,
            bottom,
            left,
            right,
        }),
        ref other => Err(format!(
            "expected 1 value (every side), 2 (rows,columns) or 4 (top,bottom,left,right), got {}",
            other.len()
        )),
    }
}

/// Comma-separated non-negative integers.
pub(crate) fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    s.split(',')
        .map(|v| {
            v.trim()
                .parse::<usize>()
                .map_err(|e| format!("`{}` is not a non-negative integer ({e})", v.trim()))
        })
        .collect()
}

/// The dtype `run conv2d` computes in (`--dtype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ConvDType {
    /// float16 operands and output, f32 accumulation.
    F16,
    /// bfloat16 operands, f32 accumulation; written as float32 (.npy has no bf16).
    Bf16,
    /// float32.
    F32,
}

/// `--layout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ConvLayout {
    /// Input `[N, C, H, W]`, weights `[K, C/G, R, S]` (PyTorch's).
    Nchw,
    /// Input `[N, H, W, C]`, weights `[K, R, S, C/G]`.
    Nhwc,
}

/// What `warpforge run conv2d` computes: `y = conv(x, w) (+ bias)`, ReLU if asked.
#[derive(Clone, Copy, Debug)]
pub struct ConvRequest<'a> {
    /// The input, 4-D in the layout's order.
    pub x: &'a NpyArray,
    /// The weights, 4-D in the layout's order.
    pub w: &'a NpyArray,
    /// `K` values, if given.
    pub bias: Option<&'a NpyArray>,
    /// `(rows, columns)`.
    pub stride: (usize, usize),
    /// Zero padding.
    pub padding: Padding,
    /// `(rows, columns)`.
    pub dilation: (usize, usize),
    /// Groups.
    pub groups: usize,
    /// The storage layout of `x`, `w` and the result.
    pub layout: ConvLayout,
    /// ReLU after the bias.
    pub relu: bool,
    /// The computing dtype; `None`: the files' (float16 or float32; they must agree).
    pub dtype: Option<ConvDType>,
}

/// A 4-D operand's dims, or an error naming it and its shape.
fn dims4(name: &str, order: &str, x: &NpyArray) -> Result<[usize; 4], RunError> {
    match x.shape[..] {
        [a, b, c, d] => Ok([a, b, c, d]),
        _ => Err(RunError::Conv2d(format!(
            "{name} must be 4-D [{order}], but has shape {:?} ({}-D)",
            x.shape,
            x.shape.len()
        ))),
    }
}

/// `y = conv(x, w) (+ bias)`, ReLU if asked, on `dev` (see [`ConvRequest`]
/// and [`warpforge::conv2d`]): `y` in the layout's order (`[N, K, P, Q]` or
/// `[N, P, Q, K]`) and in the computing dtype: float32 for f32 and bf16
/// (.npy has no bf16; the operands are rounded to bf16, to nearest), float16
/// for f16. Every shape and parameter is checked before anything runs: `x`
/// and `w` 4-D, `bias` 1-D of `K`, one float dtype for every operand unless
/// `dtype` is given (then each is converted to it, to nearest), and the
/// library's checks (stride, padding, dilation, groups, the weights' `C/G`,
/// a filter that fits), each error naming its parameter.
pub fn conv2d_npy(dev: &Device, req: &ConvRequest<'_>) -> Result<NpyArray, RunError> {
    let (layout, x_order, w_order) = match req.layout {
        ConvLayout::Nchw => (Layout::Nchw, "N, C, H, W", "K, C/groups, R, S"),
        ConvLayout::Nhwc => (Layout::Nhwc, "N, H, W, C", "K, R, S, C/groups"),
    };
    let xd = dims4("the input (--input)", x_order, req.x)?;
    let wd = dims4("the weight (--weight)", w_order, req.w)?;
    let (input, weight) = match layout {
        Layout::Nchw => (xd, wd),
        Layout::Nhwc => ([xd[0], xd[3], xd[1], xd[2]], [wd[0], wd[3], wd[1], wd[2]]),
    };
    let conv = Conv2d::new(layout, input, weight)
        .stride(req.stride.0, req.stride.1)
        .padding(req.padding)
        .dilation(req.dilation.0, req.dilation.1)
        .groups(req.groups)
        .relu(req.relu);
    conv.validate()?;
    let k = weight[0];
    if let Some(b) = req.bias
        && b.shape != [k]
    {
        return Err(RunError::Conv2d(format!(
            "the bias (--bias) has shape {:?}, but the weight {:?} has K = {k} output channels: \
             it must be [{k}]",
            b.shape, req.w.shape
        )));
    }
    let operands: Vec<(&str, &NpyArray)> = [("the input", req.x), ("the weight", req.w)]
        .into_iter()
        .chain(req.bias.map(|b| ("the bias", b)))
        .collect();
    let dtype = match req.dtype {
        Some(d) => d,
        None => {
            let own = |x: &NpyArray| match x.data {
                NpyData::F16(_) => Some(ConvDType::F16),
                NpyData::F32(_) => Some(ConvDType::F32),
                _ => None,
            };
            let (first, fx) = operands[0];
            let Some(d) = own(fx) else {
                return Err(RunError::Conv2d(format!(
                    "{first} is {}: conv2d computes in float16, bfloat16 or float32; pass \
                     --dtype f32 (or f16, bf16) to convert every operand",
                    fx.data.dtype_name()
                )));
            };
            for &(name, x) in &operands[1..] {
                if own(x) != Some(d) {
                    return Err(RunError::Conv2d(format!(
                        "{first} is {} but {name} is {}: pass --dtype to compute in one dtype \
                         (every operand is converted to it)",
                        fx.data.dtype_name(),
                        x.data.dtype_name()
                    )));
                }
            }
            d
        }
    };
    let [x, w] = [req.x, req.w].map(|a| as_f64(&a.data));
    let bias = req.bias.map(|b| as_f64(&b.data));
    let operands = (x, w, bias);
    let data = match dtype {
        ConvDType::F32 => NpyData::F32(conv_typed(dev, &conv, operands, |v| v as f32)?),
        ConvDType::F16 => NpyData::F16(conv_typed(dev, &conv, operands, f16_from_f64)?),
        ConvDType::Bf16 => NpyData::F32(
            conv_typed(dev, &conv, operands, bf16_from_f64)?
                .into_iter()
                .map(bf16::to_f32)
                .collect(),
        ),
    };
    Ok(NpyArray {
        shape: conv.output_dims()?.to_vec(),
        data,
    })
}

/// Converts the operands to `T` (to nearest), runs `conv` on `dev`, and returns `y`.
fn conv_typed<T: ConvElement>(
    dev: &Device,
    conv: &Conv2d,
    (x, w, bias): (Vec<f64>, Vec<f64>, Option<Vec<f64>>),
    to: impl Fn(f64) -> T,
) -> Result<Vec<T>, RunError> {
    let upload = |v: &[f64]| dev.upload(&v.iter().map(|&x| to(x)).collect::<Vec<T>>());
    let (xb, wb) = (upload(&x)?, upload(&w)?);
    let bb = bias.as_deref().map(upload).transpose()?;
    let len = conv
        .output_dims()?
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| RunError::Conv2d("the output's element count overflows".into()))?;
    let mut y = dev.alloc_zeroed::<T>(len)?;
    conv.run(dev, &xb, &wb, bb.as_ref(), &mut y)?;
    Ok(y.to_host()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_once_to_nearest_even() {
        // 1 + 2^-8 + 2^-30: above the halfway point between bf16 1 and 1 + 2^-7, so it
        // rounds up; through f32 it would first become the tie 1 + 2^-8 and round to 1.
        let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-30);
        let b = to_bf16(&NpyData::F64(vec![x, 1.0 + 2f64.powi(-8)])).unwrap();
        assert_eq!(b[0].to_f32(), 1.0 + 2f32.powi(-7));
        assert_eq!(b[1].to_f32(), 1.0, "a tie goes to the even neighbour");
        assert_eq!(bf16_from_f64(x), bf16::from_f32(1.0 + 2f32.powi(-7)));
        let b = to_bf16(&NpyData::F16(vec![f16::from_f32(3.0), f16::from_f32(-0.5)])).unwrap();
        assert_eq!(b, [bf16::from_f32(3.0), bf16::from_f32(-0.5)]);
        assert!(to_bf16(&NpyData::I32(vec![1])).is_none());
    }

    /// Nearest, ties to even, against the two neighbours, over deterministic
    /// pseudo-random f64 bit patterns and the edge cases.
    #[test]
    fn bf16_from_f64_is_correctly_rounded() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut xs: Vec<f64> = vec![
            0.0,
            -0.0,
            1.0 + 2f64.powi(-8),
            1.0 + 2f64.powi(-8) + 2f64.powi(-60),
            f64::from(f32::MAX),
            f64::MAX,
            -f64::MAX,
            f64::MIN_POSITIVE,
            2f64.powi(-133) * 1.5,
            2f64.powi(-134),
            2f64.powi(-134) * (1.0 + 2f64.powi(-40)),
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for _ in 0..20_000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Exponents around bf16's range, random mantissas and signs.
            let exp = 1023 - 140 + (state >> 40) % 280;
            let bits = (state & 0x800f_ffff_ffff_ffff) | (exp << 52);
            xs.push(f64::from_bits(bits));
            // Exact ties and near-ties: a bf16 plus half an ulp, ± a hair.
            let b = f64::from(bf16::from_bits((state >> 16) as u16 & 0x7f7f).to_f32());
            let half_ulp = (b * 2f64.powi(-8)).abs();
            xs.extend([b + half_ulp, b + half_ulp * (1.0 + 2f64.powi(-30))]);
        }
        for x in xs {
            let b = bf16_from_f64(x);
            if x.is_infinite() {
                assert_eq!(f64::from(b.to_f32()), x);
                continue;
            }
            let bv = f64::from(b.to_f32());
            if bv.is_infinite() {
                // Only past the largest bf16 plus half its ulp.
                let max = f64::from(bf16::MAX.to_f32());
                assert!(x.abs() >= max + max * 2f64.powi(-9), "{x:e} -> {bv}");
                continue;
            }
            // The neighbours: one step away from zero, one toward (or across) it.
            let (sign, mag) = (b.to_bits() & 0x8000, b.to_bits() & 0x7fff);
            let toward = match mag {
                0 => (sign ^ 0x8000) | 1,
                _ => sign | (mag - 1),
            };
            for n in [sign | (mag + 1), toward].map(bf16::from_bits) {
                let nv = f64::from(n.to_f32());
                if nv.is_infinite() {
                    continue;
                }
                let (d, dn) = ((x - bv).abs(), (x - nv).abs());
                assert!(d <= dn, "{x:e} -> {bv:e}, but {nv:e} is nearer");
                if d == dn {
                    assert_eq!(b.to_bits() & 1, 0, "{x:e}: tie went to odd {bv:e}");
                }
            }
        }
    }

    #[test]
    fn bf16_of_an_integer_input_is_refused() {
        let input = NpyArray {
            shape: vec![2],
            data: NpyData::I64(vec![1, 2]),
        };
        let e = reduce_npy(&Device::emulator(), Op::Sum, None, &input, true).unwrap_err();
        assert!(
            matches!(e, RunError::Bf16NeedsFloat { dtype: "int64" }),
            "{e}"
        );
    }
}
