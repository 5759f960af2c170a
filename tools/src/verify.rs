//! Runs every kernel against its CPU reference on generated inputs.
//!
//! Used by `warpforge verify` and by the test suite, through the operations of
//! [`registry`](crate::registry) (one entry per family, each with its `verify_*` function here).
//! Each kernel runs on the edge lengths around a warp and a block (0, 1, 31,
//! 32, 33, 1023, 1025) and on random larger ones; each result element is compared with the reference and
//! the kernel passes only if every element is within its tolerance.
//!
//! The reduction family ([`warpforge::reduce`]) is checked per op and dtype (one
//! report each, e.g. `argmax_bf16`), whole-tensor and along an inner, an outer
//! and a middle axis (`[len]`, `[2, len]`, `[len, 3]`, `[2, len, 3]`), against
//! [`reference::reduce`]'s intervals; the whole-tensor case also runs at the
//! random lengths.
//!
//! GEMM ([`warpforge::gemm`]) is checked per kernel (`gemm_{f32,f64}_{nn,nt,tn,tt}_*`
//! on the SIMT cores, f32's 64 × 64 and warp-tiled 128 × 128 tiles both, `gemm_{f16,bf16}_{f32,f16,bf16}_*` and, with
//! [`Gemm::tf32`], `gemm_tf32_f32_*` on the tensor cores, one report each) on shapes around its block tile (0, 1, primes, one past
//! and one short of the tile, tall-skinny and short-wide, `k = 0`), with
//! leading dimensions past the row length, `alpha`/`beta` including 0 and a
//! NaN-filled `C` with `beta = 0`, strided batches of 2 and 3 with `A` or
//! `B` broadcast and `C` packed, padded between batches or side by side in
//! each row (its padding must stay), against [`reference::gemm`]: small-integer
//! inputs must match exactly (the exact result rounded once to the output
//! type), random ones within [`reference::gemm::tolerance`] (derived from `k`
//! and the dtype; doubled for the tensor cores' accumulation, plus the
//! rounding to a narrower output; for TF32 the reference rounds the
//! operands to tf32 first, [`reference::gemm::tf32`]); `C`'s padding must be left untouched and
//! the padding of `A` and `B` (NaN) must not leak.
//!
//! conv2d ([`warpforge::conv2d`]): [`verify_conv2d`], whose module docs list its cases and tolerance.

use crate::registry::Operation;
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use warpforge::gemm::{Gemm, GemmElement, GemmTypes, HopperTile, TileConfig};
use warpforge::reduce::{self, Layout, Op, Path, ReduceOptions, Reduced, Reducible};
use warpforge::reference::gemm::{Problem, needed};
use warpforge::reference::reduce::{RefElement, Value};
use warpforge::{Device, Error, Result, ops, reference};
use warpforge_device::kernel::Kernel;
use warpforge_kernels::gemm::split_k as sk;
use warpforge_kernels_hopper::gemm as hp;
use warpforge_kernels_hopper::tf32 as hp_tf32;

pub mod conv2d;
pub use conv2d::{conv2d_kernels, verify_conv2d};

/// Lengths every kernel is checked at: around the warp (32) and block (1024) sizes.
pub const EDGE_LENGTHS: &[usize] = &[0, 1, 31, 32, 33, 1023, 1025];

/// How one kernel did.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelReport {
    /// Kernel name.
    pub kernel: &'static str,
    /// Lengths it ran at.
    pub lengths: Vec<usize>,
    /// Largest |result − reference| over every element of every case.
    pub max_abs_err: f64,
    /// Largest |result − reference| / |reference| (0 where the reference is 0 and the result too).
    pub max_rel_err: f64,
    /// Largest error as a fraction of its tolerance (≤ 1 passes).
    pub worst_vs_tolerance: f64,
    /// The first failure, if any: length, element, values, tolerance.
    pub failure: Option<String>,
    /// The kernels its cases launched, sorted, each once: recorded at the
    /// launch ([`Device::kernels_launched_by`]), not taken from the name.
    /// A report named after a kernel launched it; a reduction's report
    /// (`sum_f32`) lists every pass's kernels; split-k's the partial
    /// GEMMs' kernels too.
    pub launched: Vec<&'static str>,
}

impl KernelReport {
    /// An empty report for `kernel`.
    pub fn default_for(kernel: &'static str) -> Self {
        KernelReport {
            kernel,
            lengths: Vec::new(),
            max_abs_err: 0.0,
            max_rel_err: 0.0,
            worst_vs_tolerance: 0.0,
            failure: None,
            launched: Vec::new(),
        }
    }

    /// Adds `kernels` to [`launched`](Self::launched).
    pub fn note_launched(&mut self, kernels: &[&'static str]) {
        self.launched.extend_from_slice(kernels);
        self.launched.sort_unstable();
        self.launched.dedup();
    }

    /// Runs `work` on `dev`, adding the kernels it launches there to
    /// [`launched`](Self::launched).
    pub fn record_launches<R>(
        &mut self,
        dev: &Device,
        work: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let (r, kernels) = dev.kernels_launched_by(work)?;
        self.note_launched(&kernels);
        Ok(r)
    }

    /// Whether every element of every case was within tolerance.
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }

    /// Records one checked element: `outcome` is the fraction of its
    /// tolerance used, or why it failed.
    fn record(
        &mut self,
        case: &str,
        index: usize,
        got: f64,
        want: f64,
        outcome: std::result::Result<f64, String>,
    ) {
        let err = (got - want).abs();
        if err.is_finite() && err > 0.0 {
            self.max_abs_err = self.max_abs_err.max(err);
            self.max_rel_err = self.max_rel_err.max(err / want.abs());
        }
        match outcome {
            Ok(ratio) => self.worst_vs_tolerance = self.worst_vs_tolerance.max(ratio),
            Err(why) => {
                if self.failure.is_none() {
                    self.failure = Some(format!("{case}, output {index}: {why}"));
                }
            }
        }
    }

    /// Records one compared element.
    fn compare(&mut self, n: usize, index: usize, got: f64, want: f64, tolerance: f64) {
        // Equal values (±inf included) and NaN for NaN are exact matches, whatever the tolerance.
        if got == want || (got.is_nan() && want.is_nan()) {
            return;
        }
        let err = (got - want).abs();
        let rel = if err == 0.0 { 0.0 } else { err / want.abs() };
        self.max_abs_err = self.max_abs_err.max(err);
        self.max_rel_err = self.max_rel_err.max(rel);
        let ratio = if tolerance > 0.0 {
            err / tolerance
        } else {
            f64::INFINITY
        };
        self.worst_vs_tolerance = self.worst_vs_tolerance.max(ratio);
        // A NaN error (NaN where a number was expected) fails too.
        let within = err <= tolerance;
        if !within && self.failure.is_none() {
            self.failure = Some(format!(
                "length {n}, element {index}: got {got:e}, reference {want:e}, error {err:e} > tolerance {tolerance:e}"
            ));
        }
    }
}

/// The lengths a run covers: the edge lengths, then `random` lengths up to `max_len`.
pub fn lengths(rng: &mut StdRng, random: usize, max_len: usize) -> Vec<usize> {
    let mut v = EDGE_LENGTHS.to_vec();
    v.extend((0..random).map(|_| rng.random_range(2048..=max_len.max(2048))));
    v
}

fn values_f32(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-10.0f32..10.0)).collect()
}

fn values_f64(rng: &mut StdRng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-10.0f64..10.0)).collect()
}

/// `a·x + y` computed on `dev`, copied back.
fn run_axpy<T: ops::Axpy>(dev: &Device, a: T, x: &[T], y: &[T]) -> Result<Vec<T>> {
    let xb = dev.upload(x)?;
    let mut yb = dev.upload(y)?;
    ops::axpy(a, &xb, &mut yb)?;
    yb.to_host()
}

/// `axpy_f32` on `n` elements against the exact `a·x + y`: each element must
/// be it rounded once to f32 (ties to even), as the kernel's fused
/// multiply-add rounds: within half an ulp of the exact value, or exactly
/// ±inf where that value is at or past f32::MAX's rounding boundary
/// (`MAX + ½ ulp`), or NaN for NaN. See [`check_axpy_f32_results`].
pub fn check_axpy_f32(
    dev: &Device,
    report: &mut KernelReport,
    a: f32,
    x: &[f32],
    y: &[f32],
) -> Result<()> {
    let got = report.record_launches(dev, || run_axpy(dev, a, x, y))?;
    check_axpy_f32_results(report, a, x, y, &got);
    Ok(())
}

/// Checks `got` as the result of `axpy_f32(a, x, y)`, element by element,
/// into `report`: `got[i]` must have the bits of [`reference::round_to_f32`]
/// of the exact `a·x + y` ([`reference::axpy_f32_exact`]); any NaN for NaN.
/// The report's error ratio is the distance from the exact value in half
/// ulps of its binade (at most 1 for a pass, 0 for an exact ±inf).
///
/// Unlike a tolerance of half an ulp of the rounded reference, which is
/// infinite once the reference overflows f32, this also holds results that
/// overflow, and ones just below the boundary, to the one right answer.
///
/// ```
/// use warpforge_tools::verify::{KernelReport, check_axpy_f32_results};
/// let (x, y) = ([f32::MAX, f32::MAX], [2f32.powi(103), 2f32.powi(102)]);
/// let mut ok = KernelReport::default_for("axpy_f32");
/// check_axpy_f32_results(&mut ok, 1.0, &x, &y, &[f32::INFINITY, f32::MAX]);
/// assert!(ok.passed()); // MAX + 2¹⁰³ is the boundary: ties to even, to inf
/// let mut bad = KernelReport::default_for("axpy_f32");
/// check_axpy_f32_results(&mut bad, 1.0, &x, &y, &[f32::MAX, f32::INFINITY]);
/// assert!(!bad.passed());
/// ```
pub fn check_axpy_f32_results(
    report: &mut KernelReport,
    a: f32,
    x: &[f32],
    y: &[f32],
    got: &[f32],
) {
    let n = x.len();
    report.lengths.push(n);
    if got.len() != n {
        let why = format!("{} results for {n} elements", got.len());
        report.record(&format!("length {n}"), 0, 0.0, 0.0, Err(why));
        return;
    }
    for (i, (&g, (hi, lo))) in got
        .iter()
        .zip(reference::axpy_f32_exact(a, x, y))
        .enumerate()
    {
        let want = reference::round_to_f32(hi, lo);
        let outcome = if g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()) {
            let err = ((f64::from(g) - hi) - lo).abs();
            // The exact value's binade: below hi's when hi is a power of two
            // and lo pulls it toward zero.
            let toward_zero = lo != 0.0 && lo.is_sign_negative() != hi.is_sign_negative();
            let magnitude = if toward_zero {
                hi.abs().next_down()
            } else {
                hi.abs()
            };
            let ratio = err / reference::half_ulp_f32(magnitude);
            Ok(if ratio.is_finite() { ratio } else { 0.0 })
        } else {
            Err(format!(
                "got {g:e} ({:#010x}), expected {want:e} ({:#010x}): \
                 a·x + y = {hi:e} {lo:+e} exactly, rounded once to f32",
                g.to_bits(),
                want.to_bits()
            ))
        };
        report.record(&format!("length {n}"), i, f64::from(g), hi, outcome);
    }
}

/// `axpy_f64` against `f64::mul_add`: bit-for-bit (both round once).
pub fn check_axpy_f64(
    dev: &Device,
    report: &mut KernelReport,
    a: f64,
    x: &[f64],
    y: &[f64],
) -> Result<()> {
    let got = report.record_launches(dev, || run_axpy(dev, a, x, y))?;
    let want = reference::axpy_f64(a, x, y);
    report.lengths.push(x.len());
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        report.compare(x.len(), i, g, w, 0.0);
    }
    Ok(())
}

/// Element types `verify` generates reduction inputs for.
pub trait VerifyElement: RefElement {
    /// A random value: ordinary floats in (−10, 10) with some exact ties and
    /// zeros of both signs; integers over their whole range, or (`small`)
    /// in 0..8 so that min/max/arg have ties.
    fn random(rng: &mut StdRng, small: bool) -> Self;
}

fn random_f64(rng: &mut StdRng) -> f64 {
    match rng.random_range(0..16) {
        0 => -0.0,
        1 => 0.0,
        2 => f64::from(rng.random_range(-3..3)),
        _ => rng.random_range(-10.0..10.0),
    }
}

macro_rules! verify_float {
    ($($t:ty: $from:expr),*) => { $(
        impl VerifyElement for $t {
            fn random(rng: &mut StdRng, _: bool) -> Self {
                $from(random_f64(rng))
            }
        }
    )* };
}
verify_float!(f32: |v| v as f32, f64: |v| v, f16: f16::from_f64, bf16: bf16::from_f64);

macro_rules! verify_int {
    ($($t:ty),*) => { $(
        impl VerifyElement for $t {
            fn random(rng: &mut StdRng, small: bool) -> Self {
                if small { rng.random_range(0..8) } else { rng.random() }
            }
        }
    )* };
}
verify_int!(i32, i64, u32);

/// `reduce(op, x, shape, axis)` on `dev` against [`reference::reduce::expected`].
pub fn check_reduction<T: VerifyElement>(
    dev: &Device,
    report: &mut KernelReport,
    op: Op,
    x: &[T],
    shape: &[usize],
    axis: Option<usize>,
) -> Result<()> {
    check_reduction_on(dev, report, op, x, (shape, axis), Path::Auto)
}

/// [`check_reduction`] on a forced [`Path`] ([`ReduceOptions::path`]; `Auto`: the one
/// the shape takes), which must apply to the shape.
pub fn check_reduction_on<T: VerifyElement>(
    dev: &Device,
    report: &mut KernelReport,
    op: Op,
    x: &[T],
    (shape, axis): (&[usize], Option<usize>),
    path: Path,
) -> Result<()> {
    let layout = Layout::new(x.len(), shape, axis)?;
    let case = match path {
        Path::Auto => format!("shape {shape:?} along {axis:?}"),
        path => format!("shape {shape:?} along {axis:?}, path {}", path.name()),
    };
    report.lengths.push(x.len());
    let buf = dev.upload(x)?;
    let options = ReduceOptions {
        path,
        ..ReduceOptions::default()
    };
    let run = |report: &mut KernelReport| {
        report.record_launches(dev, || reduce::reduce_with(op, &buf, shape, axis, options))
    };
    let want = match reference::reduce::expected(op, x, layout) {
        Ok(want) => want,
        Err(Error::EmptyReduction { .. }) => {
            if !matches!(run(report), Err(Error::EmptyReduction { .. })) {
                report.record(&case, 0, 0.0, 0.0, Err("expected EmptyReduction".into()));
            }
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let got: Vec<Value> = match run(report)? {
        Reduced::Values(v) => v.to_host()?.into_iter().map(T::value).collect(),
        Reduced::Indices(v) => v
            .to_host()?
            .into_iter()
            .map(|i| Value::Int(i.into()))
            .collect(),
    };
    if got.len() != want.len() {
        let why = format!("{} outputs, expected {}", got.len(), want.len());
        report.record(&case, 0, 0.0, 0.0, Err(why));
    }
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let g64 = match *g {
            Value::Float(v) => v,
            Value::Int(v) => v as f64,
        };
        report.record(&case, k, g64, w.reference(), w.check(*g));
    }
    Ok(())
}

/// The report name of `op` on `T`, e.g. `argmax_bf16` (names live for the program).
fn reduction_name<T: Reducible>(op: Op) -> &'static str {
    Box::leak(format!("{}_{}", op.name(), T::DTYPE.name()).into_boxed_str())
}

/// Every op `T` supports, at every axis kind and length.
fn check_reductions<T: VerifyElement>(
    dev: &Device,
    rng: &mut StdRng,
    lens: &[usize],
    reports: &mut Vec<KernelReport>,
) -> Result<()> {
    for op in Op::ALL.into_iter().filter(|&op| T::supports(op)) {
        let mut report = KernelReport::default_for(reduction_name::<T>(op));
        let small = matches!(op, Op::Min | Op::Max | Op::ArgMin | Op::ArgMax);
        for (i, &len) in lens.iter().enumerate() {
            let mut cases = vec![(vec![len], None)];
            if i < EDGE_LENGTHS.len() {
                cases.extend([
                    (vec![2, len], Some(1)),
                    (vec![len, 3], Some(0)),
                    (vec![2, len, 3], Some(1)),
                ]);
            }
            for (shape, axis) in cases {
                let n = shape.iter().product();
                let x: Vec<T> = (0..n).map(|_| T::random(rng, small)).collect();
                check_reduction(dev, &mut report, op, &x, &shape, axis)?;
                // At the edge lengths, the other paths too (`Auto` takes the
                // one-launch small path for rows there, the fused one for
                // columns): the fused rows kernel and the multi-pass rows,
                // columns and combine kernels.
                if i < EDGE_LENGTHS.len() {
                    let layout = Layout::new(n, &shape, axis)?;
                    for path in [Path::Fused, Path::MultiPass] {
                        if layout.path(path).is_ok() {
                            check_reduction_on(dev, &mut report, op, &x, (&shape, axis), path)?;
                        }
                    }
                }
            }
        }
        reports.push(report);
    }
    Ok(())
}

/// `axpy_f32` and `axpy_f64` at each of `lens` (the [`registry`](crate::registry) entry `axpy`).
pub fn verify_axpy(dev: &Device, rng: &mut StdRng, lens: &[usize]) -> Result<Vec<KernelReport>> {
    let mut axpy32 = KernelReport::default_for("axpy_f32");
    let mut axpy64 = KernelReport::default_for("axpy_f64");
    for &n in lens {
        let (x, y) = (values_f32(rng, n), values_f32(rng, n));
        check_axpy_f32(dev, &mut axpy32, rng.random_range(-4.0..4.0), &x, &y)?;
        let (x, y) = (values_f64(rng, n), values_f64(rng, n));
        check_axpy_f64(dev, &mut axpy64, rng.random_range(-4.0..4.0), &x, &y)?;
    }
    Ok(vec![axpy32, axpy64])
}

/// The kernels [`verify_axpy`] launches (the registry's declaration for `axpy`).
pub fn axpy_kernels(_dev: &Device) -> Result<Vec<&'static str>> {
    use warpforge_kernels::elementwise::{axpy_f32, axpy_f64};
    Ok(vec![axpy_f32::NAME, axpy_f64::NAME])
}

/// The kernels a reduction of `op` over `T` runs on its paths: the
/// one-launch small, fused rows and fused columns kernels, the multi-pass rows and columns
/// kernels, the combine passes over their states (f32's for f16 and bf16,
/// the sum's for the sum of squares) and the finish (the index's for argmin
/// and argmax). Names as `warpforge_kernels::reduce` spells them.
fn reduction_kernels<T: Reducible>(op: Op) -> Vec<&'static str> {
    let kernel_op = match op {
        Op::Sum | Op::Mean => "sum",
        Op::SumOfSquares | Op::Norm2 => "sumsq",
        Op::LogSumExp => "lse",
        op => op.name(),
    };
    let dtype = T::DTYPE.name();
    let (state_dtype, finish) = match dtype {
        "f16" | "bf16" => ("f32", format!("finish_f32_to_{dtype}")),
        _ => (dtype, format!("finish_{dtype}")),
    };
    let state_op = if kernel_op == "sumsq" {
        "sum"
    } else {
        kernel_op
    };
    let finish = if op.returns_indices() {
        "finish_index".to_owned()
    } else {
        finish
    };
    let mut names: Vec<String> = ["small", "fused", "fused_cols", "rows", "cols"]
        .iter()
        .map(|kind| format!("reduce_{kind}_{kernel_op}_{dtype}"))
        .collect();
    names.extend(["rows", "cols"].map(|kind| format!("combine_{kind}_{state_op}_{state_dtype}")));
    names.push(finish);
    names
        .into_iter()
        .map(|n| &*Box::leak(n.into_boxed_str()))
        .collect()
}

/// The kernels [`verify_reductions`] launches (the registry's declaration
/// for `reduce`): every op of every dtype on every path.
pub fn reduction_kernel_names(_dev: &Device) -> Result<Vec<&'static str>> {
    fn of<T: Reducible>(names: &mut Vec<&'static str>) {
        for op in Op::ALL.into_iter().filter(|&op| T::supports(op)) {
            names.extend(reduction_kernels::<T>(op));
        }
    }
    let mut names = Vec::new();
    of::<f32>(&mut names);
    of::<f64>(&mut names);
    of::<f16>(&mut names);
    of::<bf16>(&mut names);
    of::<i32>(&mut names);
    of::<i64>(&mut names);
    of::<u32>(&mut names);
    names.sort_unstable();
    names.dedup();
    Ok(names)
}

/// Every reduction op of every dtype at each of `lens` (the [`registry`](crate::registry) entry `reduce`).
pub fn verify_reductions(
    dev: &Device,
    rng: &mut StdRng,
    lens: &[usize],
) -> Result<Vec<KernelReport>> {
    let mut reports = Vec::new();
    check_reductions::<f32>(dev, rng, lens, &mut reports)?;
    check_reductions::<f64>(dev, rng, lens, &mut reports)?;
    check_reductions::<f16>(dev, rng, lens, &mut reports)?;
    check_reductions::<bf16>(dev, rng, lens, &mut reports)?;
    check_reductions::<i32>(dev, rng, lens, &mut reports)?;
    check_reductions::<i64>(dev, rng, lens, &mut reports)?;
    check_reductions::<u32>(dev, rng, lens, &mut reports)?;
    Ok(reports)
}

/// GEMM element types `verify` checks (inputs, outputs, scalars), with their
/// conversions and rounding.
trait GemmValue: warpforge::Element {
    /// 2⁻²⁴ for f32, 2⁻⁵³ for f64, 2⁻¹¹ for f16, 2⁻⁸ for bf16.
    const UNIT_ROUNDOFF: f64;
    /// Half the smallest subnormal: the absolute error of rounding near 0.
    const UNDERFLOW: f64;
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
}

macro_rules! gemm_value {
    ($($t:ty: $u:expr, $under:expr, $from:expr, $to:expr;)*) => { $(
        impl GemmValue for $t {
            const UNIT_ROUNDOFF: f64 = $u;
            const UNDERFLOW: f64 = $under;
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
            fn to_f64(self) -> f64 {
                $to(self)
            }
        }
    )* };
}
gemm_value! {
    f32: f32::EPSILON as f64 / 2.0, f32::from_bits(1) as f64 / 2.0, |v| v as f32, f64::from;
    f64: f64::EPSILON / 2.0, 0.0, |v| v, |v| v;
    // 2⁻¹¹ and half of 2⁻²⁴; 2⁻⁸ and half of 2⁻¹³³.
    f16: 1.0 / 2048.0, 1.0 / 33_554_432.0, f16::from_f64, f16::to_f64;
    bf16: 1.0 / 256.0, f32::from_bits(1) as f64 * 32_768.0, bf16::from_f64, bf16::to_f64;
}

/// One GEMM verification case.
#[derive(Clone, Copy, Debug)]
struct GemmCase {
    p: Problem,
    alpha: f64,
    beta: f64,
    /// Inputs are small integers (|x| ≤ 4) and `alpha`/`beta` dyadic: every
    /// partial sum is exact, so the result must be the exact one rounded once
    /// to the output type.
    integers: bool,
    /// `C` is all NaN (with `beta = 0` it must not leak).
    nan_c: bool,
    /// A strided batch of this many GEMMs (1: none); `A` and `B` apart by
    /// their extent plus a NaN gap, `C` as `c_layout` says.
    batch: usize,
    /// 1: `A` broadcast (`stride_a = 0`); 2: `B` broadcast; 0: neither.
    broadcast: u8,
    /// Where a batch's `C` starts.
    c_layout: CLayout,
    /// Split-k ranges to pin ([`Gemm::split_k`]; `None`: the default).
    split: Option<usize>,
    /// Pins the Hopper kernels ([`Gemm::wgmma`]) on this tile
    /// configuration: the wide one through a persistent grid of one block
    /// ([`Gemm::sm_limit`]`(1)`: two narrow tiles would be more than half
    /// its SMs), the narrow one on the device's SMs (every Hopper case is at
    /// most 4 wide tiles: narrow on 8 SMs or more).
    wgmma: Option<HopperTile>,
    /// Batch strides of `A` and `B` rounded up to 8 elements (16 bytes),
    /// as the Hopper kernels' tensor maps need.
    aligned: bool,
}

/// How a batch of `C` matrices is laid out (`stride_c`); every element no
/// batch owns holds [`C_PADDING`] and must keep it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CLayout {
    /// Stacked, `stride_c = m·ldc`.
    Packed,
    /// Stacked with a gap, `stride_c = m·ldc + 5`.
    Padded,
    /// Side by side in each row, `stride_c = n` (`ldc ≥ batch·n`).
    SideBySide,
}

/// The value `C`'s padding (between `n` and `ldc`, and between batches) holds; it must stay.
const C_PADDING: f64 = 7.0;

impl GemmCase {
    fn describe(&self) -> String {
        let p = &self.p;
        format!(
            "m={} n={} k={} lda={} ldb={} ldc={} alpha={} beta={}{}{}{}{}{}{}",
            p.m,
            p.n,
            p.k,
            p.lda,
            p.ldb,
            p.ldc,
            self.alpha,
            self.beta,
            if self.nan_c { " C=NaN" } else { "" },
            if self.integers { " (exact)" } else { "" },
            match (self.batch, self.broadcast) {
                (1, _) => String::new(),
                (b, 1) => format!(" batch={b} (A broadcast)"),
                (b, 2) => format!(" batch={b} (B broadcast)"),
                (b, _) => format!(" batch={b}"),
            },
            match (self.batch, self.c_layout) {
                (1, _) | (_, CLayout::Packed) => "",
                (_, CLayout::Padded) => " (C padded)",
                (_, CLayout::SideBySide) => " (C side by side)",
            },
            match self.split {
                Some(r) => format!(" split_k={r}"),
                None => String::new(),
            },
            match self.wgmma {
                Some(HopperTile::Wide) => " wgmma (128 × 256, one block)",
                Some(HopperTile::Narrow) => " wgmma (128 × 128)",
                None => "",
            },
        )
    }
}

/// The GEMM cases for a kernel with block tile `(tm, tn, tk)` (rows, columns,
/// k-step) and these transposes: the edge shapes, then one random shape per
/// length of `lens` past the edge lengths (`m·n·k` about that length).
fn gemm_cases(
    rng: &mut StdRng,
    (tm, tn, tk): (usize, usize, usize),
    (trans_a, trans_b): (bool, bool),
    lens: &[usize],
) -> Vec<GemmCase> {
    let mut shapes = vec![
        (0, 3, 5),
        (3, 0, 5),
        (3, 4, 0),
        (1, 1, 1),
        (tm, tn, tk),
        (tm + 1, tn - 1, tk + 1),
        (7, 13, 2 * tk + 3),
        (2 * tm + 3, 1, 5),
        (1, 2 * tn + 3, 5),
        (tm - 1, tn + 1, 3 * tk - 1),
    ];
    for &len in lens.iter().skip(EDGE_LENGTHS.len()) {
        let side = ((len as f64).cbrt() as usize).max(2);
        let m = rng.random_range(1..=2 * side);
        let n = rng.random_range(1..=2 * side);
        shapes.push((m, n, (len / (m * n)).clamp(1, 4 * side)));
    }
    // (alpha, beta, NaN in C): beta = 0 with NaN, both nonzero, alpha = 0.
    let factors = [
        (1.0, 0.0, true),
        (-0.5, 2.0, false),
        (2.0, -1.0, false),
        (0.0, 1.5, false),
        (0.75, 0.0, true),
    ];
    shapes
        .into_iter()
        .enumerate()
        .map(|(i, (m, n, k))| {
            let pad = if i % 2 == 1 { 3 } else { 0 };
            let (alpha, beta, nan_c) = factors[i % factors.len()];
            let a_cols = if trans_a { m } else { k };
            let b_cols = if trans_b { k } else { n };
            // Some shapes as a strided batch, with A or B broadcast, and C
            // packed, padded or side by side.
            let batch = match i % 4 {
                1 => 2,
                3 => 3,
                _ => 1,
            };
            let c_layout = match (i / 2) % 3 {
                0 => CLayout::Packed,
                1 => CLayout::Padded,
                _ => CLayout::SideBySide,
            };
            let c_row = if c_layout == CLayout::SideBySide {
                batch * n
            } else {
                n
            };
            GemmCase {
                p: Problem {
                    m,
                    n,
                    k,
                    trans_a,
                    trans_b,
                    lda: a_cols + pad,
                    ldb: b_cols + 2 * pad,
                    ldc: c_row + pad,
                },
                alpha,
                beta,
                integers: i % 3 != 2,
                nan_c,
                batch,
                broadcast: ((i / 4) % 3) as u8,
                c_layout,
                split: None,
                wgmma: None,
                aligned: false,
            }
        })
        .collect()
}

/// How a GEMM family accumulates, for its tolerance.
#[derive(Clone, Copy, Debug)]
enum Accumulation {
    /// One fused multiply-add chain in the scalar type, in order (SIMT).
    FmaChain,
    /// Tensor-core `mma` in f32, in the hardware's order and rounding: twice
    /// the fused chain's bound.
    TensorCores,
    /// f32 operands rounded to tf32 ([`Gemm::tf32`]), then as
    /// `TensorCores`: the reference rounds them too
    /// ([`reference::gemm::tf32`]).
    Tf32,
}

/// Runs one case on `dev` and checks it into `report`: every element of the
/// result against the reference, `C`'s padding unchanged.
fn check_gemm<TIn, TOut, S>(
    dev: &Device,
    report: &mut KernelReport,
    rng: &mut StdRng,
    case: &GemmCase,
    accumulation: Accumulation,
    tile: Option<TileConfig>,
) -> Result<()>
where
    TIn: GemmTypes<TOut, Scalar = S> + GemmValue,
    TOut: GemmValue,
    S: GemmElement + GemmValue,
{
    let p = &case.p;
    let name = case.describe();
    report.lengths.push(p.m * p.n * p.k);
    let mut draw = |integers: bool| {
        if integers {
            f64::from(rng.random_range(-4i32..=4))
        } else {
            rng.random_range(-1.0..1.0)
        }
    };
    // Padding of A and B is NaN: a kernel that reads it into a sum fails.
    // A batch: `count` matrices `stride` apart (0: one, broadcast), a NaN
    // gap of 3 between them.
    let nb = case.batch;
    let mut stored = |rows: usize, cols: usize, ld: usize, broadcast: bool| {
        let extent = needed(rows, cols, ld);
        let stride = match (broadcast || nb == 1, case.aligned) {
            (true, _) => 0,
            (false, false) => extent + 3,
            (false, true) => (extent + 3).next_multiple_of(8),
        };
        let len = if stride == 0 {
            extent
        } else {
            (nb - 1) * stride + extent
        };
        let v = (0..len)
            .map(|i| {
                let i = if stride == 0 { i } else { i % stride };
                if i < extent && i % ld < cols {
                    TIn::from_f64(draw(case.integers)).to_f64()
                } else {
                    f64::NAN
                }
            })
            .collect::<Vec<f64>>();
        (v, stride)
    };
    let (ar, ac) = p.a_stored();
    let (br, bc) = p.b_stored();
    let (a, stride_a) = stored(ar, ac, p.lda, case.broadcast == 1);
    let (b, stride_b) = stored(br, bc, p.ldb, case.broadcast == 2);
    // C: the batches' m × n matrices `stride_c` apart; `owner` maps each
    // element to its (batch, row, column), `None` for the padding.
    let stride_c = match case.c_layout {
        CLayout::Packed => p.m * p.ldc,
        CLayout::Padded => p.m * p.ldc + 5,
        CLayout::SideBySide => p.n,
    };
    let extent = needed(p.m, p.n, p.ldc);
    let c_len = if extent == 0 {
        0
    } else {
        (nb - 1) * stride_c + extent
    };
    let mut owner = vec![None; c_len];
    for z in 0..nb {
        for i in 0..p.m {
            for j in 0..p.n {
                owner[z * stride_c + i * p.ldc + j] = Some((z, i, j));
            }
        }
    }
    let c: Vec<f64> = owner
        .iter()
        .map(|o| match o {
            None => C_PADDING,
            Some(_) if case.nan_c => f64::NAN,
            Some(_) => TOut::from_f64(draw(case.integers)).to_f64(),
        })
        .collect();
    // TF32: the reference multiplies the operands as the kernel rounds them.
    let tf32 = matches!(accumulation, Accumulation::Tf32);
    let operand = |v: &[f64]| -> Vec<f64> {
        if tf32 {
            v.iter().map(|&x| reference::gemm::tf32(x)).collect()
        } else {
            v.to_vec()
        }
    };
    let (ra, rb) = (operand(&a), operand(&b));
    let want: Vec<_> = (0..nb)
        .map(|z| {
            let c = c.get(z * stride_c..).unwrap_or(&[]);
            reference::gemm::gemm(
                p,
                case.alpha,
                &ra[z * stride_a..],
                &rb[z * stride_b..],
                case.beta,
                Some(c),
            )
        })
        .collect();
    let a_buf = dev.upload(&a.iter().map(|&x| TIn::from_f64(x)).collect::<Vec<_>>())?;
    let b_buf = dev.upload(&b.iter().map(|&x| TIn::from_f64(x)).collect::<Vec<_>>())?;
    let mut c_buf = dev.upload(&c.iter().map(|&x| TOut::from_f64(x)).collect::<Vec<_>>())?;
    let mut gemm = pin_config::<TIn, TOut, S>(Gemm::<S>::new(p.m, p.n, p.k), tile);
    gemm = gemm
        .trans_a(p.trans_a)
        .trans_b(p.trans_b)
        .tf32(tf32)
        .alpha(S::from_f64(case.alpha))
        .beta(S::from_f64(case.beta))
        .lda(p.lda)
        .ldb(p.ldb)
        .ldc(p.ldc)
        .batch(nb)
        .stride_a(stride_a)
        .stride_b(stride_b)
        .stride_c(stride_c);
    if let Some(ranges) = case.split {
        gemm = gemm.split_k(ranges);
    }
    if let Some(tile) = case.wgmma {
        gemm = pin_hopper_tile(gemm.wgmma(true), tile);
    }
    report.record_launches(dev, || gemm.run(dev, &a_buf, &b_buf, &mut c_buf))?;
    let got: Vec<f64> = c_buf.to_host()?.into_iter().map(TOut::to_f64).collect();
    for (index, &g) in got.iter().enumerate() {
        let Some((z, i, j)) = owner[index] else {
            let outcome = if g == C_PADDING {
                Ok(0.0)
            } else {
                Err(format!(
                    "C's padding at element {index} (no batch's) was overwritten: {g:e}"
                ))
            };
            report.record(&name, index, g, C_PADDING, outcome);
            continue;
        };
        let want = &want[z];
        let exact = want.values[i * p.n + j];
        // Exact inputs: the exact result rounded once to the output type.
        let (w, tolerance) = if case.integers {
            (TOut::from_f64(exact).to_f64(), 0.0)
        } else {
            let mag = want.magnitudes[i * p.n + j];
            let mut tol = reference::gemm::tolerance(mag, p.k, S::UNIT_ROUNDOFF);
            if let Accumulation::TensorCores | Accumulation::Tf32 = accumulation {
                tol *= 2.0;
            }
            if TOut::UNIT_ROUNDOFF > S::UNIT_ROUNDOFF {
                // The epilogue's rounding of the f32 result to a narrower output.
                tol += TOut::UNIT_ROUNDOFF * (exact.abs() + tol) + TOut::UNDERFLOW;
            }
            (exact, tol)
        };
        let err = (g - w).abs();
        let outcome = if g == w {
            Ok(0.0)
        } else if err <= tolerance {
            Ok(err / tolerance)
        } else {
            Err(format!(
                "batch {z}, element ({i}, {j}): got {g:e}, reference {w:e}, error {err:e} > \
                 tolerance {tolerance:e}"
            ))
        };
        report.record(&name, index, g, w, outcome);
    }
    Ok(())
}

/// `gemm` with the configuration `config` pinned ([`Gemm::tile`]); for
/// f64, whose kind of core [`Gemm::dmma`] picks, its FP64 tensor-core
/// family of that configuration with one (`Small`: m8n8k4, `Large`:
/// sm_90's m16n8k16) and its SIMT one without (unpinned, a GPU would pick
/// by its compute capability).
fn pin_config<TIn, TOut, S>(gemm: Gemm<S>, config: Option<TileConfig>) -> Gemm<S>
where
    TIn: GemmTypes<TOut, Scalar = S>,
    TOut: GemmValue,
    S: GemmElement,
{
    match config {
        Some(c) if TIn::HAS_DMMA => gemm.dmma(true).tile(c),
        None if TIn::HAS_DMMA => gemm.dmma(false),
        Some(c) => gemm.tile(c),
        None => gemm,
    }
}

/// The transposes, in the order of every GEMM family: NN, NT, TN, TT.
const TRANSPOSES: [(bool, bool); 4] = [(false, false), (false, true), (true, false), (true, true)];

/// One family of GEMM kernels `verify` checks: a `TIn → TOut` pair's kernels
/// of one configuration, × NN, NT, TN, TT ([`gemm_families`]).
#[derive(Clone, Copy, Debug)]
enum GemmFamily {
    /// The SIMT or `mma.sync` kernels of block tile `tile` (`(m, n, k)`) and
    /// configuration `config`, pinned (`None`: f64's one SIMT tile, pinned by
    /// [`Gemm::dmma`]`(false)`).
    Tiled {
        tile: (usize, usize, usize),
        config: Option<TileConfig>,
        accumulation: Accumulation,
    },
    /// The Hopper kernels ([`Gemm::wgmma`]) of one tile configuration,
    /// where the device runs them (sm_90 and the emulator of sm_90, in a
    /// build with them): none elsewhere.
    Wgmma(HopperTile),
    /// TF32 on Hopper ([`Gemm::tf32`] with [`Gemm::wgmma`]): the K-major
    /// copies `tf32_k_major_{rows,cols}` and the one NT kernel every
    /// transpose runs, one report each ([`WGMMA_TF32_KERNELS`]); none where
    /// the device cannot run them.
    WgmmaTf32,
}

/// Transposes (`trans_a`, `trans_b`) a report runs.
type Transposes = &'static [(bool, bool)];

/// The Hopper tf32 family's kernels, in report order, each with the
/// transposes its report runs and the tile configuration its cases take:
/// the copy by rows (NT: both operands' rows are their K-major rows), the
/// copy by columns (TN: both are transposed), the wide GEMM (NN and TT,
/// which take one copy of each kind) and the narrow one (the same).
const WGMMA_TF32_KERNELS: [(&str, Transposes, HopperTile); 4] = [
    (
        hp_tf32::tf32_k_major_rows::NAME,
        &[(false, true)],
        HopperTile::Wide,
    ),
    (
        hp_tf32::tf32_k_major_cols::NAME,
        &[(true, false)],
        HopperTile::Narrow,
    ),
    (
        hp::gemm_wgmma_tf32_f32_nt_128x256x32_s4::NAME,
        &[(false, false), (true, true)],
        HopperTile::Wide,
    ),
    (
        hp::gemm_wgmma_tf32_f32_nt_128x128x32_s4::NAME,
        &[(false, false), (true, true)],
        HopperTile::Narrow,
    ),
];

/// What walks [`gemm_families`]: `verify` runs each family's cases, the
/// registry's declaration collects each family's kernel names.
trait GemmVisitor {
    fn visit<TIn, TOut, S>(&mut self, family: GemmFamily) -> Result<()>
    where
        TIn: GemmTypes<TOut, Scalar = S> + GemmValue,
        TOut: GemmValue,
        S: GemmElement + GemmValue;
}

/// Every GEMM family `verify` checks, in its report order (one list for the
/// run and for the declaration of what it covers): f32 (both
/// configurations, pinned) and f64 on the SIMT and the FP64 tensor cores
/// (each pinned), then f16 and bf16
/// inputs into f32, f16 and bf16 outputs on the tensor cores with the small
/// tile, then the pairs with large- and wide-tile kernels with those
/// tiles (pinned, [`Gemm::tile`]), then f32 through TF32 ([`Gemm::tf32`])
/// with both tiles, then the Hopper kernels of f16 and bf16 into f32 and
/// into their own type.
fn gemm_families(v: &mut impl GemmVisitor) -> Result<()> {
    use Accumulation::{FmaChain, TensorCores, Tf32};
    let simt = |t: warpforge_kernels::gemm::Tile| (t.m, t.n, t.k);
    let tiled = |tile, config, accumulation| GemmFamily::Tiled {
        tile,
        config,
        accumulation,
    };
    // f32 on the SIMT cores: both configurations, pinned.
    let f32_small = tiled(
        simt(<f32 as GemmElement>::TILE),
        Some(TileConfig::Small),
        FmaChain,
    );
    let l = warpforge_kernels::gemm::warp_tiled::F32_TILE_LARGE;
    let f32_large = tiled((l.m, l.n, l.k), Some(TileConfig::Large), FmaChain);
    let f64_tile = tiled(simt(<f64 as GemmElement>::TILE), None, FmaChain);
    // f64 on the FP64 tensor cores (pinned: `TileConfig::Small`), its
    // accumulation order the hardware's: twice the fused chain's bound.
    let d = warpforge_kernels::gemm::tensor::dgemm::DMMA_TILE;
    let f64_dmma = tiled((d.m, d.n, d.k), Some(TileConfig::Small), TensorCores);
    // sm_90's m16n8k16 f64 (`TileConfig::Large`, the Hopper module): none
    // where the device does not load it.
    let d = warpforge_kernels::gemm::tensor::dgemm::DMMA16_TILE;
    let f64_dmma16 = tiled((d.m, d.n, d.k), Some(TileConfig::Large), TensorCores);
    let config = |c: TileConfig| {
        let t = c.tile();
        tiled((t.m, t.n, t.k), Some(c), TensorCores)
    };
    let (tc, large, wide) = (
        config(TileConfig::Small),
        config(TileConfig::Large),
        config(TileConfig::Wide),
    );
    let tf32_config = |c: TileConfig| {
        let t = c.tf32_tile().expect("a TF32 configuration");
        tiled((t.m, t.n, t.k), Some(c), Tf32)
    };
    v.visit::<f32, f32, f32>(f32_small)?;
    v.visit::<f32, f32, f32>(f32_large)?;
    v.visit::<f64, f64, f64>(f64_tile)?;
    v.visit::<f64, f64, f64>(f64_dmma)?;
    v.visit::<f64, f64, f64>(f64_dmma16)?;
    v.visit::<f16, f32, f32>(tc)?;
    v.visit::<f16, f16, f32>(tc)?;
    v.visit::<f16, bf16, f32>(tc)?;
    v.visit::<bf16, f32, f32>(tc)?;
    v.visit::<bf16, f16, f32>(tc)?;
    v.visit::<bf16, bf16, f32>(tc)?;
    for c in [large, wide] {
        v.visit::<f16, f32, f32>(c)?;
        v.visit::<f16, f16, f32>(c)?;
        v.visit::<bf16, f32, f32>(c)?;
        v.visit::<bf16, bf16, f32>(c)?;
    }
    v.visit::<f32, f32, f32>(tf32_config(TileConfig::Small))?;
    v.visit::<f32, f32, f32>(tf32_config(TileConfig::Large))?;
    for tile in [HopperTile::Wide, HopperTile::Narrow] {
        v.visit::<f16, f32, f32>(GemmFamily::Wgmma(tile))?;
        v.visit::<f16, f16, f32>(GemmFamily::Wgmma(tile))?;
        v.visit::<bf16, f32, f32>(GemmFamily::Wgmma(tile))?;
        v.visit::<bf16, bf16, f32>(GemmFamily::Wgmma(tile))?;
    }
    v.visit::<f32, f32, f32>(GemmFamily::WgmmaTf32)?;
    Ok(())
}

/// A Hopper configuration's block tile (`warpforge_kernels_hopper::gemm`'s
/// `BM`, the configuration's columns, `BK`).
fn wgmma_tile(tile: HopperTile) -> (usize, usize, usize) {
    (hp::BM, tile.columns(), hp::BK)
}

/// `gemm` (the Hopper kernels pinned) on `tile`'s kernels (see
/// [`GemmCase::wgmma`]).
fn pin_hopper_tile<S: GemmElement>(gemm: Gemm<S>, tile: HopperTile) -> Gemm<S> {
    match tile {
        HopperTile::Wide => gemm.sm_limit(1),
        HopperTile::Narrow => gemm,
    }
}

/// The kernels of `family` for `TIn → TOut` on `dev`, NN, NT, TN, TT (none
/// for the Hopper families where `dev` cannot run them: [`Gemm::wgmma`],
/// or for f64's `Large` tile [`Gemm::tile`], refuses).
fn family_kernels<TIn, TOut, S>(dev: &Device, family: GemmFamily) -> Result<Vec<&'static str>>
where
    TIn: GemmTypes<TOut, Scalar = S>,
    TOut: GemmValue,
    S: GemmElement,
{
    if matches!(family, GemmFamily::WgmmaTf32) {
        // Runs where the GEMM runs (every transpose names the one kernel).
        return match Gemm::<S>::new(1, 1, 1)
            .tf32(true)
            .wgmma(true)
            .kernel_name_for::<TIn, TOut>(dev)
        {
            Ok(_) => Ok(WGMMA_TF32_KERNELS.iter().map(|&(k, ..)| k).collect()),
            Err(Error::InvalidParameter {
                parameter: "wgmma", ..
            }) => Ok(Vec::new()),
            Err(e) => Err(e),
        };
    }
    let mut names = Vec::new();
    for (trans_a, trans_b) in TRANSPOSES {
        let (m, n, k) = wgmma_tile(HopperTile::Wide);
        let gemm = Gemm::<S>::new(m, n, k).trans_a(trans_a).trans_b(trans_b);
        let gemm = match family {
            GemmFamily::Tiled {
                config,
                accumulation,
                ..
            } => {
                let gemm = gemm.tf32(matches!(accumulation, Accumulation::Tf32));
                pin_config::<TIn, TOut, S>(gemm, config)
            }
            GemmFamily::Wgmma(tile) => pin_hopper_tile(gemm.wgmma(true), tile),
            GemmFamily::WgmmaTf32 => gemm.wgmma(true),
        };
        match gemm.kernel_name_for::<TIn, TOut>(dev) {
            Ok(name) => names.push(name),
            Err(Error::InvalidParameter {
                parameter: "wgmma", ..
            }) if matches!(family, GemmFamily::Wgmma(_)) => return Ok(Vec::new()),
            Err(Error::InvalidParameter {
                parameter: "tile", ..
            }) if TIn::HAS_DMMA => return Ok(Vec::new()),
            Err(e) => return Err(e),
        }
    }
    Ok(names)
}

/// The cases of a Hopper kernel: its tile exactly (exact inputs, `beta = 0`
/// over a NaN `C`); one row, column and k-step past it (129 × 257 × 65: four
/// tiles, two k-steps, each ragged, leading dimensions padded past the row
/// length and `C`'s not a multiple of 8; exact inputs); a tile ragged within
/// it (100 × 200 × 40, random inputs); a 1 × 1 × 1; and a strided batch of 2
/// with `C` padded between batches (70 × 90 × 40). Leading dimensions and batch
/// strides are multiples of 8 elements (16 bytes), what a tensor map takes.
fn wgmma_cases((trans_a, trans_b): (bool, bool), tile: HopperTile) -> Vec<GemmCase> {
    let (tm, tn, tk) = wgmma_tile(tile);
    let shapes = [
        ((tm, tn, tk), 0, 1),
        ((tm + 1, tn + 1, tk + 1), 8, 1),
        ((tm - 28, tn - 56, tk - 24), 8, 1),
        ((1, 1, 1), 0, 1),
        ((70, 90, 40), 8, 2),
    ];
    // (alpha, beta, NaN in C, exact inputs) per shape.
    let factors = [
        (1.0, 0.0, true, true),
        (2.0, -1.0, false, true),
        (-0.5, 0.75, false, false),
        (1.5, 0.0, true, false),
        (1.0, -1.0, false, true),
    ];
    shapes
        .into_iter()
        .zip(factors)
        .map(
            |(((m, n, k), pad, batch), (alpha, beta, nan_c, integers))| {
                let a_cols = if trans_a { m } else { k };
                let b_cols = if trans_b { k } else { n };
                let ld = |cols: usize| cols.next_multiple_of(8) + pad;
                GemmCase {
                    p: Problem {
                        m,
                        n,
                        k,
                        trans_a,
                        trans_b,
                        lda: ld(a_cols),
                        ldb: ld(b_cols),
                        ldc: n + pad / 8 * 3,
                    },
                    alpha,
                    beta,
                    integers,
                    nan_c,
                    batch,
                    broadcast: 0,
                    c_layout: if batch > 1 {
                        CLayout::Padded
                    } else {
                        CLayout::Packed
                    },
                    split: None,
                    wgmma: Some(tile),
                    aligned: true,
                }
            },
        )
        .collect()
}

/// The Hopper kernel `report` names (NN) as the default dispatch picks it,
/// unpinned: a batch of one tile per SM (128 × 128 × 8, exact inputs), the smallest GEMM for which the `mma.sync` heuristic picks a
/// tile that fills the GPU (`TileConfig::choose`), so that the Hopper kernel
/// runs. A failure if the dispatch picks another kernel there.
fn check_wgmma_default<TIn, TOut, S>(
    dev: &Device,
    rng: &mut StdRng,
    report: &mut KernelReport,
) -> Result<()>
where
    TIn: GemmTypes<TOut, Scalar = S> + GemmValue,
    TOut: GemmValue,
    S: GemmElement + GemmValue,
{
    // The SMs the heuristic counts: the GPU's, or the emulated H100's 132.
    let sms = dev.gpu_info().map_or(132, |info| info.multiprocessors) as usize;
    let (m, n, k) = (hp::BM, hp::BM, 8);
    let case = GemmCase {
        p: Problem {
            m,
            n,
            k,
            trans_a: false,
            trans_b: false,
            lda: k,
            ldb: n,
            ldc: n,
        },
        alpha: 1.0,
        beta: -1.0,
        integers: true,
        nan_c: false,
        batch: sms,
        broadcast: 0,
        c_layout: CLayout::Packed,
        split: None,
        wgmma: None,
        aligned: true,
    };
    let picked = Gemm::<S>::new(m, n, k)
        .batch(sms)
        .kernel_name_for::<TIn, TOut>(dev)?;
    if picked != report.kernel {
        let why = format!("the default dispatch picks {picked}, not this kernel");
        report.record(&case.describe(), 0, 0.0, 0.0, Err(why));
        return Ok(());
    }
    check_gemm::<TIn, TOut, S>(dev, report, rng, &case, Accumulation::TensorCores, None)
}

/// Runs each family's cases on the device, one report per kernel ([`verify_gemm`]).
struct RunFamilies<'a> {
    dev: &'a Device,
    rng: &'a mut StdRng,
    lens: &'a [usize],
    reports: Vec<KernelReport>,
}

impl GemmVisitor for RunFamilies<'_> {
    fn visit<TIn, TOut, S>(&mut self, family: GemmFamily) -> Result<()>
    where
        TIn: GemmTypes<TOut, Scalar = S> + GemmValue,
        TOut: GemmValue,
        S: GemmElement + GemmValue,
    {
        let kernels = family_kernels::<TIn, TOut, S>(self.dev, family)?;
        // Each kernel with the transposes its report runs: one each, but the
        // Hopper tf32 family's (its table).
        let reports: Vec<(&'static str, Transposes, HopperTile)> = match family {
            GemmFamily::WgmmaTf32 => kernels
                .into_iter()
                .zip(WGMMA_TF32_KERNELS)
                .map(|(kernel, (_, transposes, tile))| (kernel, transposes, tile))
                .collect(),
            _ => kernels
                .into_iter()
                .zip(TRANSPOSES.iter().map(core::slice::from_ref))
                .map(|(kernel, transposes)| (kernel, transposes, HopperTile::Wide))
                .collect(),
        };
        for (kernel, transposes, tf32_tile) in reports {
            let mut report = KernelReport::default_for(kernel);
            for &trans in transposes {
                let (cases, accumulation, config) = match family {
                    GemmFamily::Tiled {
                        tile,
                        config,
                        accumulation,
                    } => (
                        gemm_cases(self.rng, tile, trans, self.lens),
                        accumulation,
                        config,
                    ),
                    GemmFamily::Wgmma(tile) => {
                        (wgmma_cases(trans, tile), Accumulation::TensorCores, None)
                    }
                    GemmFamily::WgmmaTf32 => {
                        (wgmma_cases(trans, tf32_tile), Accumulation::Tf32, None)
                    }
                };
                for case in cases {
                    check_gemm::<TIn, TOut, S>(
                        self.dev,
                        &mut report,
                        self.rng,
                        &case,
                        accumulation,
                        config,
                    )?;
                }
                // The default dispatch's pick, NN: every pair on a GPU; on the
                // emulator (a tile per SM is 132 tiles to emulate) bf16 → f32's.
                let emulated_pair = (TIn::DTYPE.name(), TOut::DTYPE.name()) == ("bf16", "f32");
                if matches!(family, GemmFamily::Wgmma(HopperTile::Wide))
                    && trans == TRANSPOSES[0]
                    && (self.dev.is_gpu() || emulated_pair)
                {
                    check_wgmma_default::<TIn, TOut, S>(self.dev, self.rng, &mut report)?;
                }
            }
            self.reports.push(report);
        }
        Ok(())
    }
}

/// Collects each family's kernels on the device ([`gemm_kernels`]).
struct NameFamilies<'a> {
    dev: &'a Device,
    kernels: Vec<&'static str>,
}

impl GemmVisitor for NameFamilies<'_> {
    fn visit<TIn, TOut, S>(&mut self, family: GemmFamily) -> Result<()>
    where
        TIn: GemmTypes<TOut, Scalar = S> + GemmValue,
        TOut: GemmValue,
        S: GemmElement + GemmValue,
    {
        let kernels = family_kernels::<TIn, TOut, S>(self.dev, family)?;
        self.kernels.extend(kernels);
        Ok(())
    }
}

/// Split GEMMs ([`Gemm::split_k`]) of `TIn` into `TOut` into `report`
/// (the sum kernel's): every transpose, `k` split unevenly into 2 or 3 ranges
/// (the last one short), exact and random inputs, `beta = 0` over NaN; on
/// the `mma.sync` kernels, then on the Hopper ones where the pair has them.
fn check_split_k<TIn, TOut, S>(
    dev: &Device,
    rng: &mut StdRng,
    accumulation: Accumulation,
    report: &mut KernelReport,
) -> Result<()>
where
    TIn: GemmTypes<TOut, Scalar = S> + GemmValue,
    TOut: GemmValue,
    S: GemmElement + GemmValue,
{
    // (m, n, k, pinned ranges): 2 or 3 ranges of whole 32s, the last short.
    let shapes = [
        (1, 1, 65, 2),
        (7, 13, 100, 3),
        (65, 63, 129, 4),
        (3, 70, 200, 3),
    ];
    for (t, (trans_a, trans_b)) in [(false, false), (false, true), (true, false), (true, true)]
        .into_iter()
        .enumerate()
    {
        for (i, &(m, n, k, ranges)) in shapes.iter().enumerate() {
            let pad = (i + t) % 2;
            let (alpha, beta, nan_c) = [(1.0, 0.0, true), (2.0, -1.0, false)][(i + t) % 2];
            let case = GemmCase {
                p: Problem {
                    m,
                    n,
                    k,
                    trans_a,
                    trans_b,
                    lda: if trans_a { m } else { k } + pad,
                    ldb: if trans_b { k } else { n } + pad,
                    ldc: n + pad,
                },
                alpha,
                beta,
                integers: i % 2 == 0,
                nan_c,
                batch: 1,
                broadcast: 0,
                c_layout: CLayout::Packed,
                split: Some(ranges),
                wgmma: None,
                aligned: false,
            };
            check_gemm::<TIn, TOut, S>(dev, report, rng, &case, accumulation, None)?;
        }
    }
    // Split-k on the Hopper kernels, where the pair has them on this
    // device: the ranges as a batch of the f32-output kernel (leading
    // dimensions multiples of 8, as its tensor maps need), a tail of k
    // after them as a second launch (k = 130: 2 ranges of 64 and 2; k =
    // 200: 3 of 64 and 8; k = 192: 3 of 64, none).
    let hopper = Gemm::<S>::new(8, 8, 128)
        .wgmma(true)
        .split_k(2)
        .kernel_name_for::<TIn, TOut>(dev)
        .is_ok();
    if !hopper {
        return Ok(());
    }
    let shapes = [(1, 1, 130, 2), (70, 90, 200, 3), (131, 263, 192, 3)];
    for (t, (trans_a, trans_b)) in [(false, false), (false, true), (true, false), (true, true)]
        .into_iter()
        .enumerate()
    {
        for (i, &(m, n, k, ranges)) in shapes.iter().enumerate() {
            let pad = 8 * ((i + t) % 2);
            let ld = |cols: usize| cols.next_multiple_of(8) + pad;
            let (alpha, beta, nan_c) = [(1.0, 0.0, true), (-2.0, 0.5, false)][(i + t) % 2];
            let case = GemmCase {
                p: Problem {
                    m,
                    n,
                    k,
                    trans_a,
                    trans_b,
                    lda: ld(if trans_a { m } else { k }),
                    ldb: ld(if trans_b { k } else { n }),
                    ldc: n + pad / 8,
                },
                alpha,
                beta,
                integers: i % 2 == 0,
                nan_c,
                batch: 1,
                broadcast: 0,
                c_layout: CLayout::Packed,
                split: Some(ranges),
                wgmma: Some(HopperTile::Narrow),
                aligned: true,
            };
            check_gemm::<TIn, TOut, S>(dev, report, rng, &case, accumulation, None)?;
        }
    }
    Ok(())
}

/// Every GEMM kernel, the [`registry`](crate::registry) entry `gemm`: f32
/// (both configurations, pinned) and f64 on the SIMT and the FP64 tensor
/// cores (each pinned), then f16 and
/// bf16 inputs into f32, f16 and bf16 outputs on the tensor cores with the
/// small tile, then the pairs with large- and wide-tile kernels with those
/// tiles (pinned, [`Gemm::tile`]), then f32 through TF32 ([`Gemm::tf32`])
/// with both tiles, then the Hopper kernels of f16 and bf16 into f32 and
/// into their own type, each × NN, NT, TN, TT, one report per kernel: the
/// edge shapes (the tile's), then one random shape per random length of
/// `lens` (`m·n·k` about that length); the Hopper kernels (on sm_90 only)
/// their own cases, pinned ([`Gemm::wgmma`]); then split-k's sum kernels
/// (`gemm_split_k_sum_*`), one report each over split GEMMs into its output
/// type (f32: from f16 and bf16 on the tensor cores — the `mma.sync`
/// kernels, and on sm_90 the Hopper ones — and from f32 on the SIMT cores;
/// f16 and bf16 from their own type, likewise; f64). Each report's
/// `lengths` holds `m·n·k` per case.
pub fn verify_gemm(dev: &Device, rng: &mut StdRng, lens: &[usize]) -> Result<Vec<KernelReport>> {
    use Accumulation::{FmaChain, TensorCores};
    let mut run = RunFamilies {
        dev,
        rng,
        lens,
        reports: Vec::new(),
    };
    gemm_families(&mut run)?;
    let (rng, mut r) = (run.rng, run.reports);
    let mut sum = KernelReport::default_for(sk::gemm_split_k_sum_f32::NAME);
    check_split_k::<f16, f32, f32>(dev, rng, TensorCores, &mut sum)?;
    check_split_k::<bf16, f32, f32>(dev, rng, TensorCores, &mut sum)?;
    check_split_k::<f32, f32, f32>(dev, rng, FmaChain, &mut sum)?;
    r.push(sum);
    let mut sum = KernelReport::default_for(sk::gemm_split_k_sum_f16::NAME);
    check_split_k::<f16, f16, f32>(dev, rng, TensorCores, &mut sum)?;
    r.push(sum);
    let mut sum = KernelReport::default_for(sk::gemm_split_k_sum_bf16::NAME);
    check_split_k::<bf16, bf16, f32>(dev, rng, TensorCores, &mut sum)?;
    r.push(sum);
    let mut sum = KernelReport::default_for(sk::gemm_split_k_sum_f64::NAME);
    check_split_k::<f64, f64, f64>(dev, rng, FmaChain, &mut sum)?;
    r.push(sum);
    Ok(r)
}

/// The kernels [`verify_gemm`] launches on `dev` (the registry's declaration
/// for `gemm`): each family's four, then split-k's sums (its partial
/// products run the small tile's kernels, which are among them).
pub fn gemm_kernels(dev: &Device) -> Result<Vec<&'static str>> {
    let mut names = NameFamilies {
        dev,
        kernels: Vec::new(),
    };
    gemm_families(&mut names)?;
    names.kernels.extend([
        sk::gemm_split_k_sum_f32::NAME,
        sk::gemm_split_k_sum_f16::NAME,
        sk::gemm_split_k_sum_bf16::NAME,
        sk::gemm_split_k_sum_f64::NAME,
    ]);
    Ok(names.kernels)
}

/// Runs every kernel of `operations` on `dev` at the edge lengths and
/// `random_lengths` random lengths up to `max_len`, with inputs from `seed`,
/// in the order given ([`crate::registry::OPERATIONS`] for all of them).
pub fn run(
    dev: &Device,
    operations: &[&Operation],
    seed: u64,
    random_lengths: usize,
    max_len: usize,
) -> Result<Vec<KernelReport>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let lens = lengths(&mut rng, random_lengths, max_len);
    let mut reports = Vec::new();
    for op in operations {
        reports.extend((op.verify)(dev, &mut rng, &lens)?);
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(a, x, y, the f32 nearest the exact a·x + y)`, worked out by hand at
    /// and around f32::MAX's rounding boundary `B = MAX + 2¹⁰³ = 2¹²⁸ − 2¹⁰³`
    /// and at an f32 tie that an f64 reference would round twice.
    fn boundary_cases() -> Vec<(f32, f32, f32, f32)> {
        let max = f32::MAX;
        let inf = f32::INFINITY;
        // 18631 · 1801·2¹⁰³ = (2²⁵ − 1)·2¹⁰³ = B exactly.
        let (a_b, x_b) = (18631.0, 1801.0 * 2f32.powi(103));
        // 24929·2⁻¹⁵ · 673·2⁻⁹ = 1 + 2⁻²⁴, halfway between 1 and 1 + 2⁻²³.
        let (a_m, x_m) = (24929.0 * 2f32.powi(-15), 673.0 * 2f32.powi(-9));
        vec![
            (1.0, max, 2f32.powi(103), inf),    // = B: the tie goes to even, inf
            (1.0, -max, -2f32.powi(103), -inf), // = −B
            (1.0, max, 2f32.powi(103).next_down(), max), // just below B
            (1.0, max, 2f32.powi(102), max),    // MAX + ¼ ulp
            (1.0, max, max, inf),               // 2·MAX
            (2.0, max, -max, max),              // 2·MAX − MAX, exactly MAX
            (-3.0, max, 0.0, -inf),             // far past
            (1.0, max, -max, 0.0),              // exact cancellation
            (a_b, x_b, 0.0, inf),               // B as a product
            (a_b, x_b, 1.0, inf),               // B + 1
            (a_b, x_b, -1.0, max),              // B − 1: f64 rounds it to B
            (a_b, -x_b, 1.0, -max),             // −B + 1
            (a_m, x_m, 2f32.powi(-80), 1.0 + f32::EPSILON), // above the tie
            (a_m, x_m, -2f32.powi(-80), 1.0),   // below the tie
            (a_m, x_m, 0.0, 1.0),               // the tie: to even
        ]
    }

    fn check_results(a: f32, x: f32, y: f32, got: f32) -> KernelReport {
        let mut report = KernelReport::default_for("axpy_f32");
        check_axpy_f32_results(&mut report, a, &[x], &[y], &[got]);
        report
    }

    #[test]
    fn axpy_f32_overflow_is_inf_exactly_and_just_below_is_max() {
        let dev = Device::emulator();
        for (a, x, y, want) in boundary_cases() {
            // The right answer passes, on its own and from the kernel.
            let report = check_results(a, x, y, want);
            assert!(report.passed(), "{a:e}·{x:e} + {y:e}: {:?}", report.failure);
            assert!(report.worst_vs_tolerance <= 1.0, "{report:?}");
            let mut report = KernelReport::default_for("axpy_f32");
            check_axpy_f32(&dev, &mut report, a, &[x], &[y]).unwrap();
            assert!(report.passed(), "{a:e}·{x:e} + {y:e}: {:?}", report.failure);
            // Its neighbours and a far-off value fail (with an infinite
            // tolerance, every one of them passed where the answer is ±inf).
            let wrong = [
                want.next_up(),
                want.next_down(),
                if want.is_infinite() {
                    0.0
                } else {
                    f32::INFINITY
                },
                f32::NAN,
            ];
            for bad in wrong.into_iter().filter(|b| b.to_bits() != want.to_bits()) {
                let report = check_results(a, x, y, bad);
                assert!(!report.passed(), "{a:e}·{x:e} + {y:e} accepted {bad:e}");
            }
        }
    }

    #[test]
    fn axpy_f32_specials_and_lengths() {
        // NaN for NaN (any payload), inf for inf, and a short result is a failure.
        let (x, y) = (
            [f32::NAN, 1.0, 0.0],
            [1.0, f32::INFINITY, f32::NEG_INFINITY],
        );
        let mut report = KernelReport::default_for("axpy_f32");
        let nan = f32::from_bits(0x7fc0_0001);
        check_axpy_f32_results(
            &mut report,
            2.0,
            &x,
            &y,
            &[nan, f32::INFINITY, f32::NEG_INFINITY],
        );
        assert!(report.passed(), "{:?}", report.failure);
        let mut report = KernelReport::default_for("axpy_f32");
        check_axpy_f32_results(&mut report, 2.0, &x, &y, &[f32::NAN, f32::INFINITY]);
        assert!(!report.passed());
        // −0 is not +0: 0·(−1) + (−0) is −0.
        let mut report = KernelReport::default_for("axpy_f32");
        check_axpy_f32_results(&mut report, 0.0, &[-1.0], &[-0.0], &[0.0]);
        assert!(!report.passed());
    }
}
