//! Split-k's second pass: the sum of a GEMM's partial products.
//!
//! A GEMM whose tile grid cannot fill the GPU (`128 × 4096 × 4096` is 128
//! blocks of 64 × 64) runs as `splits` GEMMs over consecutive k-ranges
//! (`warpforge::gemm`, as a batch whose strides step along k), each
//! writing `alpha·op(A)·op(B)` of its range into its own `m × n` plane of a
//! workspace in the accumulation type `S` (f32, or f64 for f64). This
//! kernel then forms, per element of `C`,
//! `d = p₀ + p₁ + … + p_{splits−1}` in `S`, in that order (the same bits on
//! every launch), and `d ← fma(beta, c, d)` unless `beta = 0` (`C` not
//! read: NaN there does not leak), rounded once to `C`'s type.
//!
//! One thread per element of `C` (`OutMatrix<_, Elements>`, a grid-stride
//! walk over rows and columns: consecutive threads on consecutive columns,
//! so the plane reads and the writes of `C` are coalesced). The workspace
//! is read through bounds-checked loads; the host sizes it `splits·m·n`.

use core::ops::Add;
use warpforge_device::own::Elements;
use warpforge_device::{Global, OutMatrix, bf16, f16};
use warpforge_macros::kernel;

use super::Element;
use warpforge_device::num::Output;

/// An output type of the sum: `C`'s element, to and from the accumulation
/// type `S` of the partial planes.
pub trait Summed<S>: Copy {
    /// `x` rounded to this type (nearest, ties to even).
    fn from_acc(x: S) -> Self;
    /// This value in the accumulation type (exact).
    fn to_acc(self) -> S;
}

impl<T: Output> Summed<f32> for T {
    #[inline(always)]
    fn from_acc(x: f32) -> T {
        T::from_f32(x)
    }
    #[inline(always)]
    fn to_acc(self) -> f32 {
        self.to_f32()
    }
}

impl Summed<f64> for f64 {
    #[inline(always)]
    fn from_acc(x: f64) -> f64 {
        x
    }
    #[inline(always)]
    fn to_acc(self) -> f64 {
        self
    }
}

/// `C ← Σ_s partials[s] + beta·C` (module docs): `partials` holds `splits`
/// planes of `m × n` elements (`m`, `n` = `c`'s shape), plane `s` at
/// `s·m·n`, row-major and packed. Any 2-D grid covers any `C`
/// (grid-stride); a 32 × 8 block on a grid of the column and row blocks is
/// the design.
#[kernel(instances(
    gemm_split_k_sum_f32 = <f32, f32>,
    gemm_split_k_sum_f16 = <f32, f16>,
    gemm_split_k_sum_bf16 = <f32, bf16>,
    gemm_split_k_sum_f64 = <f64, f64>,
))]
pub fn split_k_sum<S: Element + Add<Output = S>, TOut: Summed<S>>(
    splits: usize,
    beta: S,
    partials: Global<S>,
    mut c: OutMatrix<TOut, Elements>,
) {
    let cols = c.cols();
    let plane = c.rows().wrapping_mul(cols);
    for mut out in c.grid_stride() {
        let at = out.row() * cols + out.col();
        let mut sum = S::ZERO;
        let mut s = 0;
        while s < splits {
            // In bounds by the host's sizing; a short workspace reads as
            // zero rather than out of bounds.
            if let Some(p) = partials.load(s.wrapping_mul(plane).wrapping_add(at)) {
                sum = sum + p;
            }
            s += 1;
        }
        // beta = 0: C is never read (NaN there must not leak).
        let d = if beta == S::ZERO {
            sum
        } else {
            beta.fma(out.get().to_acc(), sum)
        };
        out.set(TOut::from_acc(d));
    }
}
