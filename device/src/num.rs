//! Numeric helpers with one definition on the GPU and the host.
//!
//! `core` has no `mul_add` (it lives in `std`), so the fused multiply-add is
//! here: `fma.rn` on the GPU, `f32::mul_add` on the host. Both round once, so
//! the emulator and the GPU agree bit for bit. The f16/bf16 conversions are
//! one `cvt` each on the GPU and the `half` crate on the host; both round to
//! nearest even.

use crate::arch;
use half::{bf16, f16};

/// `x` rounded to the nearest f16 (ties to even; overflow to ±inf).
///
/// ```
/// # use warpforge_device::num::f16_from_f32;
/// assert_eq!(f16_from_f32(1.0 + 1.0 / 4096.0).to_f32(), 1.0); // below half an f16 ulp
/// ```
#[inline(always)]
pub fn f16_from_f32(x: f32) -> f16 {
    f16::from_bits(arch::f32_to_f16_bits(x))
}

/// The f32 equal to `h` (exact).
#[inline(always)]
pub fn f16_to_f32(h: f16) -> f32 {
    arch::f16_bits_to_f32(h.to_bits())
}

/// `x` rounded to the nearest bf16 (ties to even; NaN stays NaN).
///
/// ```
/// # use warpforge_device::num::bf16_from_f32;
/// assert_eq!(bf16_from_f32(3.0).to_f32(), 3.0);
/// ```
#[inline(always)]
pub fn bf16_from_f32(x: f32) -> bf16 {
    bf16::from_bits(arch::f32_to_bf16_bits(x))
}

/// The f32 equal to `h` (exact: bf16 is the top half of an f32, so this is a shift,
/// which also avoids `cvt.f32.bf16`, an sm_90 instruction).
#[inline(always)]
pub fn bf16_to_f32(h: bf16) -> f32 {
    f32::from_bits(u32::from(h.to_bits()) << 16)
}

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
