//! Numeric helpers with one definition on the GPU and the host.
//!
//! `core` has no `mul_add` (it lives in `std`), so the fused multiply-add is
//! here: `fma.rn` on the GPU, `f32::mul_add` on the host. Both round once, so
//! the emulator and the GPU agree bit for bit.

use crate::arch;

/// `a · b + c` with a single rounding (IEEE 754 fusedMultiplyAdd).
///
/// ```
/// # use warpforge_device::num::fma_f32;
/// assert_eq!(fma_f32(2.0, 3.0, 1.0), 7.0);
/// ```
#[inline(always)]
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    arch::fma_f32(a, b, c)
}

/// `a · b + c` with a single rounding (IEEE 754 fusedMultiplyAdd).
///
/// ```
/// # use warpforge_device::num::fma_f64;
/// assert_eq!(fma_f64(0.1, 10.0, -1.0), 0.1f64.mul_add(10.0, -1.0));
/// ```
#[inline(always)]
pub fn fma_f64(a: f64, b: f64, c: f64) -> f64 {
    arch::fma_f64(a, b, c)
}

/// Floats with a fused multiply-add, for kernels generic over the float type.
pub trait Fma: Copy {
    /// `self · b + c` with a single rounding.
    fn fma(self, b: Self, c: Self) -> Self;
}

impl Fma for f32 {
    #[inline(always)]
    fn fma(self, b: f32, c: f32) -> f32 {
        fma_f32(self, b, c)
    }
}

impl Fma for f64 {
    #[inline(always)]
    fn fma(self, b: f64, c: f64) -> f64 {
        fma_f64(self, b, c)
    }
}
