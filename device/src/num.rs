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

/// `2ˣ` by `ex2.approx.f32`: at most 2 ulp from the exact value (PTX ISA).
/// Subnormal inputs and results are kept (no `.ftz`).
#[inline(always)]
pub fn ex2_approx(x: f32) -> f32 {
    arch::ex2_approx(x)
}

/// `log₂ x` by `lg2.approx.f32`: absolute error at most 2⁻²² for x in
/// (0.5, 2), relative error at most 2⁻²² elsewhere (PTX ISA).
#[inline(always)]
pub fn lg2_approx(x: f32) -> f32 {
    arch::lg2_approx(x)
}

/// `1/√x` by `rsqrt.approx.f32`: relative error at most 2⁻²²·⁹ (PTX ISA).
#[inline(always)]
pub fn rsqrt_approx(x: f32) -> f32 {
    arch::rsqrt_approx(x)
}

/// `1/x` by `rcp.approx.f32`: at most 1 ulp (PTX ISA). Plain `1.0 / x` is
/// the correctly rounded (and slower) `div.rn.f32`.
#[inline(always)]
pub fn rcp_approx(x: f32) -> f32 {
    arch::rcp_approx(x)
}

/// `eˣ`, within 1 ulp (the `libm` crate's `expf`; the same code
/// runs on the GPU and in the emulator, so they agree bit for bit).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    libm::expf(x)
}

/// Natural logarithm, within 1 ulp (`libm`'s `logf`).
#[inline(always)]
pub fn log(x: f32) -> f32 {
    libm::logf(x)
}

/// Hyperbolic tangent, within 3 ulp (`libm`'s `tanhf`; measured worst 2.3).
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    libm::tanhf(x)
}

/// The error function, within 2 ulp (`libm`'s `erff`; measured worst 0.9).
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    libm::erff(x)
}

/// `eˣ` in f64, within 1 ulp (`libm`'s `exp`; the same code on GPU and emulator).
#[inline(always)]
pub fn exp_f64(x: f64) -> f64 {
    libm::exp(x)
}

/// Natural logarithm in f64, within 1 ulp (`libm`'s `log`).
#[inline(always)]
pub fn log_f64(x: f64) -> f64 {
    libm::log(x)
}

/// `√x`, correctly rounded (`libm`'s `sqrtf`: IEEE `squareRoot`, so GPU and
/// emulator agree bit for bit; `core` has no `sqrt` without `std`).
///
/// ```
/// # use warpforge_device::num::sqrt_f32;
/// assert_eq!(sqrt_f32(2.0), 2.0f32.sqrt());
/// ```
#[inline(always)]
pub fn sqrt_f32(x: f32) -> f32 {
    libm::sqrtf(x)
}

/// `√x` in f64, correctly rounded (`libm`'s `sqrt`).
#[inline(always)]
pub fn sqrt_f64(x: f64) -> f64 {
    libm::sqrt(x)
}

/// Two f16 in one 32-bit register (`.f16x2`): `lo` in bits 0–15, `hi` in 16–31.
/// Arithmetic works on both halves at once, rounding each to nearest even;
/// a NaN result is the canonical NaN `0x7fff`.
///
/// ```
/// # use warpforge_device::{f16, num::F16x2};
/// let a = F16x2::from_f32(1.5, -2.0);
/// let b = F16x2::from_f32(0.25, 4.0);
/// let c = F16x2::fma(a, b, a);
/// assert_eq!((c.lo().to_f32(), c.hi().to_f32()), (1.875, -10.0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct F16x2(u32);

/// Two bf16 in one 32-bit register (`.bf16x2`), laid out as [`F16x2`].
/// sm_80 has only the fused multiply-add for bf16x2, so `+` is `fma(a, 1, b)`
/// and `*` is `fma(a, b, -0)`: one rounding each, as a plain add or multiply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct Bf16x2(u32);

macro_rules! packed_common {
    ($t:ident, $h:ty, $pack:ident) => {
        impl $t {
            /// Packs two halves.
            #[inline(always)]
            pub fn new(lo: $h, hi: $h) -> Self {
                $t(u32::from(lo.to_bits()) | u32::from(hi.to_bits()) << 16)
            }

            /// Rounds two f32 (one `cvt.rn` for both).
            #[inline(always)]
            pub fn from_f32(lo: f32, hi: f32) -> Self {
                $t(arch::$pack(hi.to_bits(), lo.to_bits()))
            }

            /// Both halves equal to `v`.
            #[inline(always)]
            pub fn splat(v: $h) -> Self {
                Self::new(v, v)
            }

            /// The low half (bits 0–15).
            #[inline(always)]
            pub fn lo(self) -> $h {
                <$h>::from_bits(self.0 as u16)
            }

            /// The high half (bits 16–31).
            #[inline(always)]
            pub fn hi(self) -> $h {
                <$h>::from_bits((self.0 >> 16) as u16)
            }

            /// The register's bits.
            #[inline(always)]
            pub fn to_bits(self) -> u32 {
                self.0
            }

            /// From a register's bits.
            #[inline(always)]
            pub fn from_bits(bits: u32) -> Self {
                $t(bits)
            }
        }
    };
}
packed_common!(F16x2, f16, pack_f16x2);
packed_common!(Bf16x2, bf16, pack_bf16x2);

impl F16x2 {
    /// `a·b + c` on each half, rounded once (`fma.rn.f16x2`).
    #[inline(always)]
    pub fn fma(a: Self, b: Self, c: Self) -> Self {
        F16x2(arch::fma_f16x2(a.0, b.0, c.0))
    }
}

impl Bf16x2 {
    /// `a·b + c` on each half, rounded once (`fma.rn.bf16x2`).
    #[inline(always)]
    pub fn fma(a: Self, b: Self, c: Self) -> Self {
        Bf16x2(arch::fma_bf16x2(a.0, b.0, c.0))
    }
}

impl core::ops::Add for F16x2 {
    type Output = Self;
    #[inline(always)]
    fn add(self, rhs: Self) -> Self {
        F16x2(arch::add_f16x2(self.0, rhs.0))
    }
}

impl core::ops::Sub for F16x2 {
    type Output = Self;
    #[inline(always)]
    fn sub(self, rhs: Self) -> Self {
        F16x2(arch::sub_f16x2(self.0, rhs.0))
    }
}

impl core::ops::Mul for F16x2 {
    type Output = Self;
    #[inline(always)]
    fn mul(self, rhs: Self) -> Self {
        F16x2(arch::mul_f16x2(self.0, rhs.0))
    }
}

impl core::ops::Add for Bf16x2 {
    type Output = Self;
    #[inline(always)]
    fn add(self, rhs: Self) -> Self {
        Bf16x2::fma(self, Bf16x2::splat(bf16::ONE), rhs)
    }
}

impl core::ops::Mul for Bf16x2 {
    type Output = Self;
    #[inline(always)]
    fn mul(self, rhs: Self) -> Self {
        Bf16x2::fma(self, rhs, Bf16x2::splat(bf16::NEG_ZERO))
    }
}
