//! Numeric helpers with one definition on the GPU and the host.
//!
//! `core` has no `mul_add` (it lives in `std`), so the fused multiply-add is
//! here: `fma.rn` on the GPU, `f32::mul_add` on the host. Both round once, so
//! the emulator and the GPU agree bit for bit. The f16/bf16 conversions are
//! one `cvt` each on the GPU and the `half` crate on the host; both round to
//! nearest even. [`Divisor`] divides by a divisor fixed for a launch as a
//! multiply-high and a shift, for kernels' index arithmetic.
//!
//! # NaN results
//!
//! One rule for every floating-point operation of this crate (here, in
//! [`crate::warp`], [`crate::atomic`] and [`crate::mma`]): **in the emulator, a
//! NaN result has the bits the GPU writes for it**, so that "bit for bit"
//! holds for NaNs too. An x86 CPU writes `0xffc0_0000` for a NaN it creates
//! and keeps the payload of a NaN it is given; the GPU does neither:
//!
//! - **f32: `0x7fff_ffff`** ([`CANONICAL_NAN_F32`]) for every NaN an f32
//!   instruction computes, from NaN operands or not. Sources: CUDA C++
//!   Programming Guide, "Floating-Point Standard" ("the result of a
//!   single-precision floating-point operation involving one or more input
//!   NaNs is the quiet NaN of bit pattern 0x7fffffff"); an H100 writes it for
//!   `log(-21.1134)` (an f32 division 0/0 inside `libm`'s `logf`). Not
//!   `neg.f32`: it flips a NaN's sign bit and keeps its payload, as the
//!   host's negation does (an H200 wrote `0xffff_ffff` for `tanhf` of a
//!   negative NaN, which negates the canonical NaN; the PTX ISA leaves it
//!   unspecified). Here: [`fma_f32`], the `.approx` functions, [`f16_to_f32`],
//!   [`erf`], [`log`] (see below), [`tanh`] (with its argument's sign),
//!   `warp::sum_f32`/`sum_f32_in`, `AtomicRef<f32>::fetch_add`, and the
//!   accumulators `mma::mma` writes.
//! - **f16 and bf16: `0x7fff`** ([`CANONICAL_NAN_F16`], [`CANONICAL_NAN_BF16`];
//!   `CUDART_NAN_FP16`/`CUDART_NAN_BF16`, which the CUDA Math API names the
//!   canonical NaNs): [`f16_from_f32`], [`bf16_from_f32`], [`F16x2`] and
//!   [`Bf16x2`] arithmetic and `from_f32`, `AtomicRef<f16>::fetch_add`.
//! - **Code from `libm`** runs the same on both, so its NaN is the GPU's
//!   instruction by instruction: [`sqrt_f32`] and [`sqrt_f64`] return
//!   `libm`'s constant `f32::NAN`/`f64::NAN` (`0x7fc0_0000`,
//!   `0x7ff8_0000_0000_0000`) for every NaN result (the GPU runs `libm`'s
//!   generic square root; a host build may use the CPU's `sqrtss`, whose NaN
//!   is replaced); [`exp`], [`exp_f64`], and [`log`]/[`log_f64`] of a NaN with
//!   the sign bit clear return their argument unchanged; every other NaN of
//!   [`log`] and [`erf`] is f32 arithmetic, so `0x7fff_ffff`, and [`tanh`]'s
//!   is that NaN with the argument's sign.
//! - **f64 arithmetic: not fixed.** NVIDIA documents only the single-precision
//!   NaN (of double precision, only that `abs` and `neg` pass NaNs through
//!   unchanged), and no GPU run has recorded one here yet, so [`fma_f64`],
//!   `AtomicRef<f64>::fetch_add` and [`log_f64`] of a negative number or a
//!   NaN with the sign bit set give the host's NaN, which may differ from the
//!   GPU's: compare those by class (both NaN), not by bits.
//!
//! Copies keep a NaN's bits on both: loads and stores, warp shuffles, atomic
//! `swap`/`compare_exchange`/`load`, [`bf16_to_f32`] (a shift), and the
//! selections `warp::max_f32`/`min_f32` (and `_in`) and float atomic
//! `fetch_min`/`fetch_max`, which return one of their operands.
//!
//! Arithmetic written in a kernel's own body (`a + b`, `x * y`, `-x`,
//! `x as f32`) is not an operation of this crate: in the emulator it runs on
//! the host's FPU, and nothing can intercept it, so its NaNs are the host's.
//! Compare such results with the GPU's by class, not by bits.

use crate::arch;
use half::{bf16, f16};

pub use crate::arch::{CANONICAL_NAN_BF16, CANONICAL_NAN_F16, CANONICAL_NAN_F32};

/// `x` rounded to the nearest f16 (ties to even; overflow to ±inf; NaN to
/// the canonical `0x7fff`).
///
/// ```
/// # use warpforge_device::num::f16_from_f32;
/// assert_eq!(f16_from_f32(1.0 + 1.0 / 4096.0).to_f32(), 1.0); // below half an f16 ulp
/// ```
#[inline(always)]
pub fn f16_from_f32(x: f32) -> f16 {
    f16::from_bits(arch::f32_to_f16_bits(x))
}

/// The f32 equal to `h` (exact; a NaN becomes the canonical `0x7fff_ffff`).
#[inline(always)]
pub fn f16_to_f32(h: f16) -> f32 {
    arch::f16_bits_to_f32(h.to_bits())
}

/// `x` rounded to the nearest bf16 (ties to even; NaN to the canonical `0x7fff`).
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

/// `a · b + c` with a single rounding (IEEE 754 fusedMultiplyAdd); a NaN
/// result is the canonical `0x7fff_ffff`.
///
/// ```
/// # use warpforge_device::num::fma_f32;
/// assert_eq!(fma_f32(2.0, 3.0, 1.0), 7.0);
/// ```
#[inline(always)]
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    arch::fma_f32(a, b, c)
}

/// `a · b + c` with a single rounding (IEEE 754 fusedMultiplyAdd); a NaN
/// result's bits are left open (see "NaN results" above).
///
/// ```
/// # use warpforge_device::num::fma_f64;
/// assert_eq!(fma_f64(0.1, 10.0, -1.0), 0.1f64.mul_add(10.0, -1.0));
/// ```
#[inline(always)]
pub fn fma_f64(a: f64, b: f64, c: f64) -> f64 {
    arch::fma_f64(a, b, c)
}

/// Output element types of the tensor-core kernels' epilogues: f32, f16,
/// bf16, to and from the f32 the epilogue computes in.
pub trait Output: Copy {
    /// `x` rounded to this type (nearest, ties to even).
    fn from_f32(x: f32) -> Self;
    /// The f32 equal to `self`.
    fn to_f32(self) -> f32;

    /// A GEMM epilogue's `alpha·acc + beta·c` in f32, rounded once to this
    /// type: `alpha·acc` when `beta = 0`, without calling `c` (C is not
    /// read, so a NaN there does not leak, as BLAS specifies), else
    /// `fma(beta, c, alpha·acc)`.
    ///
    /// ```
    /// # use warpforge_device::num::Output;
    /// assert_eq!(f32::axpby(2.0, 3.0, 0.0, || f32::NAN), 6.0);
    /// assert_eq!(f32::axpby(2.0, 3.0, 0.5, || 4.0), 8.0);
    /// ```
    #[inline(always)]
    fn axpby(alpha: f32, acc: f32, beta: f32, c: impl FnOnce() -> Self) -> Self {
        let prod = alpha * acc;
        let r = if beta == 0.0 {
            prod
        } else {
            fma_f32(beta, c().to_f32(), prod)
        };
        Self::from_f32(r)
    }
}

impl Output for f32 {
    #[inline(always)]
    fn from_f32(x: f32) -> f32 {
        x
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
}

impl Output for f16 {
    #[inline(always)]
    fn from_f32(x: f32) -> f16 {
        f16_from_f32(x)
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16_to_f32(self)
    }
}

impl Output for bf16 {
    #[inline(always)]
    fn from_f32(x: f32) -> bf16 {
        bf16_from_f32(x)
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16_to_f32(self)
    }
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
/// A NaN argument is returned unchanged; no other argument gives NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    libm::expf(x)
}

/// Natural logarithm, within 1 ulp (`libm`'s `logf`). A NaN with the sign
/// bit clear is returned unchanged; for any other negative argument (NaN or
/// not) `logf` computes `(x - x) / 0`, whose NaN is the canonical one.
#[inline(always)]
pub fn log(x: f32) -> f32 {
    let r = libm::logf(x);
    if x.is_nan() && x.is_sign_positive() {
        r
    } else {
        arch::f32_op(r)
    }
}

/// Hyperbolic tangent, within 3 ulp (`libm`'s `tanhf`; measured worst 2.3).
/// The NaN of a NaN argument is the canonical one with the argument's sign
/// (`tanhf` computes `1 + 0/|x|` and negates it for a negative `x`; a
/// negation keeps a NaN's payload and flips its sign: `0xffff_ffff` for a
/// negative NaN, measured on an H200).
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let sign = x.to_bits() & 0x8000_0000;
    arch::gpu_nan_f32(libm::tanhf(x), CANONICAL_NAN_F32 | sign)
}

/// The error function, within 2 ulp (`libm`'s `erff`; measured worst 0.9).
/// The NaN of a NaN argument is the canonical one (`erff` computes `1 + 1/x`).
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    arch::f32_op(libm::erff(x))
}

/// `eˣ` in f64, within 1 ulp (`libm`'s `exp`; the same code on GPU and emulator).
/// A NaN argument is returned unchanged; no other argument gives NaN.
#[inline(always)]
pub fn exp_f64(x: f64) -> f64 {
    libm::exp(x)
}

/// Natural logarithm in f64, within 1 ulp (`libm`'s `log`). A NaN with the
/// sign bit clear is returned unchanged; the NaN of any other negative
/// argument is f64 arithmetic, whose bits the NaN rule leaves open.
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
///
/// A negative or NaN argument gives `f32::NAN` (`0x7fc0_0000`): the constant
/// `libm`'s generic square root returns, which the GPU runs.
#[inline(always)]
pub fn sqrt_f32(x: f32) -> f32 {
    arch::gpu_nan_f32(libm::sqrtf(x), f32::NAN.to_bits())
}

/// `√x` in f64, correctly rounded (`libm`'s `sqrt`). A negative or NaN
/// argument gives `f64::NAN` (`0x7ff8_0000_0000_0000`), as [`sqrt_f32`].
#[inline(always)]
pub fn sqrt_f64(x: f64) -> f64 {
    arch::gpu_nan_f64(libm::sqrt(x), f64::NAN.to_bits())
}

/// Two f16 in one 32-bit register (`.f16x2`): `lo` in bits 0–15, `hi` in 16–31.
/// Arithmetic works on both halves at once, rounding each to nearest even;
/// a NaN result is the canonical NaN `0x7fff` (see "NaN results" above).
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

/// Division by a divisor fixed for a whole launch (`1 ≤ d ≤ 2^31`) as a
/// multiply-high, an add and a shift: the round-up method of Granlund and
/// Montgomery ("Division by invariant integers using multiplication",
/// 1994; CUTLASS's `FastDivmod`). Made once (one 64-bit division), then
/// `n / d` for every `u32` `n` in 3–4 instructions, where a 32-bit division
/// by a run-time value takes ~20. Exact for all `n` (tested exhaustively
/// over ranges and at the edges).
///
/// Why here: a kernel's index arithmetic divides by the launch's sizes
/// (a convolution's `Q`, `P·Q`, `C`, `S`, an im2col row's chunks), and a
/// division by a run-time value is a ~20-instruction sequence in 32 bits
/// (a call of ~70 in 64 bits); made once per thread, this is the one fast
/// division every kernel family shares.
///
/// ```
/// # use warpforge_device::num::Divisor;
/// let seven = Divisor::new(7).unwrap();
/// assert_eq!(seven.div_rem(100), (14, 2));
/// assert_eq!(seven.div(u32::MAX), u32::MAX / 7);
/// assert_eq!(Divisor::new(0), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Divisor {
    d: u32,
    /// `⌊2^32·(2^shift − d) / d⌋ + 1`, below 2^32.
    m: u32,
    /// `⌈log2 d⌉`.
    shift: u32,
}

impl Divisor {
    /// The divisor `d`; `None` for 0 and past 2^31.
    #[inline(always)]
    pub const fn new(d: u32) -> Option<Divisor> {
        if d == 0 || d > 1 << 31 {
            return None;
        }
        let shift = 32 - (d - 1).leading_zeros();
        // 2^(shift−1) < d ≤ 2^shift, so (2^shift − d)/d < 1 and m < 2^32.
        let m = ((1u64 << 32) * ((1u64 << shift) - d as u64)) / d as u64 + 1;
        Some(Divisor {
            d,
            m: m as u32,
            shift,
        })
    }

    /// `d`.
    #[inline(always)]
    pub const fn divisor(self) -> u32 {
        self.d
    }

    /// `⌊n / d⌋`: `(mulhi(m, n) + n) >> shift`, the sum in 64 bits.
    #[inline(always)]
    pub const fn div(self, n: u32) -> u32 {
        let hi = (n as u64 * self.m as u64) >> 32;
        ((hi + n as u64) >> self.shift) as u32
    }

    /// `(⌊n / d⌋, n mod d)`.
    #[inline(always)]
    pub const fn div_rem(self, n: u32) -> (u32, u32) {
        let q = self.div(n);
        (q, n.wrapping_sub(q.wrapping_mul(self.d)))
    }
}

#[cfg(test)]
mod divisor_tests {
    use super::Divisor;

    /// Every divisor up to 2^12 and a spread of larger ones (powers of two
    /// and their neighbours, 2^31, primes), against `/` and `%` for the
    /// numerators around each multiple's edge, the first 2^10, a stride
    /// through the whole range and the top of it.
    #[test]
    fn divisor_divides_exactly_at_the_edges_and_across_the_range() {
        let mut divisors: Vec<u32> = (1..=4096).collect();
        for k in 12..31 {
            let p = 1u32 << k;
            divisors.extend([p - 1, p, p + 1]);
        }
        divisors.extend([
            (1 << 31) - 1,
            1 << 31,
            65_521,
            1_000_003,
            2_147_483_629,
            3 * 7 * 11 * 13 * 17,
        ]);
        for &d in &divisors {
            let div = Divisor::new(d).unwrap();
            assert_eq!(div.divisor(), d);
            let check = |n: u32| {
                assert_eq!(div.div_rem(n), (n / d, n % d), "{n} / {d}");
            };
            for n in 0..1024 {
                check(n);
            }
            for n in (0..=u32::MAX).step_by(1_000_003) {
                check(n);
            }
            for m in [1u64, 2, 3, 1 << 16, (u32::MAX / d) as u64] {
                let edge = m * d as u64;
                for n in [edge.saturating_sub(1), edge, edge + 1] {
                    if let Ok(n) = u32::try_from(n) {
                        check(n);
                    }
                }
            }
            for n in u32::MAX - 1024..=u32::MAX {
                check(n);
            }
        }
        assert_eq!(Divisor::new(0), None);
        assert_eq!(Divisor::new((1 << 31) + 1), None);
    }
}
