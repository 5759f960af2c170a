//! Runs every kernel against its CPU reference on generated inputs.
//!
//! Used by `warpforge verify` and by the test suite. Each kernel runs on the
//! edge lengths around a warp and a block (0, 1, 31, 32, 33, 1023, 1025) and on
//! random larger ones; each result element is compared with the reference and
//! the kernel passes only if every element is within its tolerance.

use crate::device::Device;
use crate::error::Result;
use crate::{ops, reference};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

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
        }
    }

    /// Whether every element of every case was within tolerance.
    pub fn passed(&self) -> bool {
        self.failure.is_none()
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

/// `axpy_f32` on `n` elements against the f64 reference: each element within
/// half an f32 ulp of the exact value (plus the reference's own f64 rounding).
pub fn check_axpy_f32(
    dev: &Device,
    report: &mut KernelReport,
    a: f32,
    x: &[f32],
    y: &[f32],
) -> Result<()> {
    let got = run_axpy(dev, a, x, y)?;
    let want = reference::axpy_f32(a, x, y);
    report.lengths.push(x.len());
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let tol = reference::half_ulp_f32(w) + w.abs() * f64::EPSILON;
        report.compare(x.len(), i, f64::from(g), w, tol);
    }
    Ok(())
}

/// `axpy_f64` against `f64::mul_add`: bit-for-bit (both round once).
pub fn check_axpy_f64(
    dev: &Device,
    report: &mut KernelReport,
    a: f64,
    x: &[f64],
    y: &[f64],
) -> Result<()> {
    let got = run_axpy(dev, a, x, y)?;
    let want = reference::axpy_f64(a, x, y);
    report.lengths.push(x.len());
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        report.compare(x.len(), i, g, w, 0.0);
    }
    Ok(())
}

/// `ops::sum_f32` against the compensated f64 sum, within `reference::sum_f32_tolerance`.
pub fn check_sum_f32(dev: &Device, report: &mut KernelReport, x: &[f32]) -> Result<()> {
    let xb = dev.upload(x)?;
    let got = ops::sum_f32(&xb)?;
    let (want, abs) = reference::sum(x.iter().map(|&v| f64::from(v)));
    report.lengths.push(x.len());
    report.compare(
        x.len(),
        0,
        f64::from(got),
        want,
        reference::sum_f32_tolerance(x.len(), abs),
    );
    Ok(())
}

/// Runs every kernel on `dev` at the edge lengths and `random_lengths` random
/// lengths up to `max_len`, with inputs from `seed`.
pub fn run(
    dev: &Device,
    seed: u64,
    random_lengths: usize,
    max_len: usize,
) -> Result<Vec<KernelReport>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let lens = lengths(&mut rng, random_lengths, max_len);

    let mut axpy32 = KernelReport::default_for("axpy_f32");
    let mut axpy64 = KernelReport::default_for("axpy_f64");
    let mut sum32 = KernelReport::default_for("sum_f32");
    for &n in &lens {
        let (x, y) = (values_f32(&mut rng, n), values_f32(&mut rng, n));
        check_axpy_f32(dev, &mut axpy32, rng.random_range(-4.0..4.0), &x, &y)?;
        let (x, y) = (values_f64(&mut rng, n), values_f64(&mut rng, n));
        check_axpy_f64(dev, &mut axpy64, rng.random_range(-4.0..4.0), &x, &y)?;
        check_sum_f32(dev, &mut sum32, &values_f32(&mut rng, n))?;
    }
    Ok(vec![axpy32, axpy64, sum32])
}
