//! The numeric library against exact definitions: fast and accurate f32 math
//! within stated ulp bounds of an f64 reference, and packed f16x2/bf16x2
//! arithmetic correctly rounded, checked in exact fixed-point integers.

use crate::common;

use proptest::prelude::*;
use warpforge::{Device, LaunchConfig};
use warpforge_testkit::{self as probe, MATH_F64_FUNCTIONS, MATH_FUNCTIONS, PACKED_OPS, PROBES};

/// The NaN rule of `warpforge_device::num` ("NaN results"), restated here
/// from its sources rather than read from the crate: every NaN an f32
/// instruction of the GPU computes is 0x7fffffff (CUDA Programming Guide,
/// "Floating-Point Standard"; an H100's `log(-21.1134)`).
const GPU_NAN_F32: u32 = 0x7fff_ffff;
/// The f16/bf16 NaN of the GPU (`CUDART_NAN_FP16`, `CUDART_NAN_BF16`).
const GPU_NAN_HALF: u16 = 0x7fff;
/// `libm`'s generic square root returns the constant `f32::NAN`, these bits.
const LIBM_NAN_F32: u32 = 0x7fc0_0000;
/// And for f64, `f64::NAN`.
const LIBM_NAN_F64: u64 = 0x7ff8_0000_0000_0000;

/// The bits the NaN rule gives [`MATH_FUNCTIONS`]`[k]` at `x` when its value
/// is NaN: `libm`'s `expf`, and `logf` of a NaN with the sign bit clear,
/// return their argument; `tanhf` negates its f32 NaN for a negative `x`
/// (a negation flips a NaN's sign: an H200 wrote `0xffff_ffff`); every
/// other NaN is computed by f32 instructions.
fn nan_rule_bits(k: usize, x: f32) -> u32 {
    match MATH_FUNCTIONS[k] {
        "exp" => x.to_bits(),
        "log" if x.is_nan() && x.is_sign_positive() => x.to_bits(),
        "tanh" => GPU_NAN_F32 | (x.to_bits() & 0x8000_0000),
        _ => GPU_NAN_F32,
    }
}

/// A NaN with any sign and payload (quiet or signalling).
fn any_nan_f32() -> impl Strategy<Value = f32> {
    (any::<bool>(), 1u32..0x80_0000)
        .prop_map(|(neg, payload)| f32::from_bits(u32::from(neg) << 31 | 0x7f80_0000 | payload))
}

/// As [`any_nan_f32`], for f64.
fn any_nan_f64() -> impl Strategy<Value = f64> {
    (any::<bool>(), 1u64..1 << 52).prop_map(|(neg, payload)| {
        f64::from_bits(u64::from(neg) << 63 | 0x7ff0_0000_0000_0000 | payload)
    })
}

/// The spacing of f32 values at `x` (subnormal spacing below 2⁻¹²⁶).
fn ulp_f32(x: f64) -> f64 {
    let e = x.abs().log2().floor().max(-126.0);
    2f64.powf(e - 23.0)
}

/// `got`'s distance from `exact` in f32 ulps at `exact`; 0 for a NaN that
/// should be NaN or an infinity (or overflow) matched by the same infinity.
fn ulps(got: f32, exact: f64) -> f64 {
    if got.is_nan() && exact.is_nan() {
        return 0.0;
    }
    if exact.abs() > f64::from(f32::MAX) {
        let same_inf = got.is_infinite() && (got > 0.0) == (exact > 0.0);
        return if same_inf { 0.0 } else { f64::INFINITY };
    }
    (f64::from(got) - exact).abs() / ulp_f32(exact)
}

/// Each function's f64 reference, and its bound: ulps, or (for lg2, whose
/// PTX ISA bound is absolute near 1) an absolute error.
enum Bound {
    Ulps(f64),
    /// Absolute error 2⁻²² in (0.5, 2), relative 2⁻²² elsewhere.
    Lg2,
    Rel(f64),
}

fn reference(k: usize, x: f64) -> (f64, Bound) {
    match MATH_FUNCTIONS[k] {
        "ex2_approx" => (x.exp2(), Bound::Ulps(2.0)),
        "lg2_approx" => (x.log2(), Bound::Lg2),
        "rsqrt_approx" => (1.0 / x.sqrt(), Bound::Rel(2f64.powf(-22.9))),
        "rcp_approx" => (1.0 / x, Bound::Ulps(1.0)),
        "exp" => (x.exp(), Bound::Ulps(1.0)),
        "log" => (x.ln(), Bound::Ulps(1.0)),
        // libm's tanhf measured up to 2.3 ulp (sweep of every 97th f32 and proptest).
        "tanh" => (x.tanh(), Bound::Ulps(3.0)),
        "erf" => (libm::erf(x), Bound::Ulps(2.0)),
        other => unreachable!("{other}"),
    }
}

fn within(got: f32, exact: f64, bound: &Bound) -> bool {
    if exact.is_nan() {
        return got.is_nan();
    }
    match *bound {
        Bound::Ulps(u) => ulps(got, exact) <= u,
        Bound::Rel(r) => {
            exact.is_infinite() && f64::from(got) == exact
                || (f64::from(got) - exact).abs() <= r * exact.abs()
        }
        Bound::Lg2 => {
            if exact.is_infinite() {
                return f64::from(got) == exact;
            }
            let e = (f64::from(got) - exact).abs();
            let x = exact.exp2();
            if x > 0.5 && x < 2.0 {
                e <= 2f64.powi(-22)
            } else {
                e <= 2f64.powi(-22) * exact.abs()
            }
        }
    }
}

fn math_results(dev: &Device, x: &[f32]) -> Vec<f32> {
    let xb = dev.upload(x).unwrap();
    let mut out = dev.alloc_zeroed::<f32>(8 * x.len()).unwrap();
    dev.launch(
        probe::probe_math,
        LaunchConfig::for_elements(x.len(), 64).unwrap(),
        (&xb, &mut out),
    )
    .unwrap();
    out.to_host().unwrap()
}

fn math_input() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => -20.0f32..20.0,
        2 => 0.0f32..4.0,
        1 => any::<u32>().prop_map(f32::from_bits),
        1 => prop_oneof![Just(0.0f32), Just(-0.0), Just(f32::INFINITY), Just(f32::NEG_INFINITY), Just(1.0), Just(f32::MIN_POSITIVE / 4.0)],
    ]
}

/// Packed-half inputs that keep every exact result finite and inside the
/// fixed-point window of [`Exact`]: magnitudes in [2⁻¹⁴, 2⁶) for products,
/// [2⁻¹⁴, 2¹²) for addends, either sign, or zero.
fn half_value(max_exp: i32) -> impl Strategy<Value = f64> {
    (any::<bool>(), -14..max_exp, 0u32..1024, 0u32..8).prop_map(|(neg, e, m, zero)| {
        if zero == 0 {
            return if neg { -0.0 } else { 0.0 };
        }
        let v = (1.0 + f64::from(m) / 1024.0) * 2f64.powi(e);
        if neg { -v } else { v }
    })
}

/// Fixed-point exact arithmetic: values scaled by 2⁶² as i128 (inputs above
/// have at most 2⁻³¹ resolution, so products have 2⁻⁶² and all fit).
struct Exact;
impl Exact {
    const SCALE: f64 = 4611686018427387904.0; // 2^62
    fn of(v: f64) -> i128 {
        let s = v * Self::SCALE;
        assert_eq!(s.fract(), 0.0, "{v} is not on the fixed-point grid");
        s as i128
    }
    fn mul(a: f64, b: f64) -> i128 {
        // (a·2³¹)(b·2³¹): each factor is an integer for inputs of 2⁻³¹ resolution.
        let (sa, sb) = (a * 2f64.powi(31), b * 2f64.powi(31));
        assert!(
            sa.fract() == 0.0 && sb.fract() == 0.0,
            "{a} or {b} is not on the fixed-point grid"
        );
        sa as i128 * sb as i128
    }
}

/// Whether the half `bits` (decoded by `value`) is the round-to-nearest-even of
/// `exact`: no neighbour is closer, and on a tie its last bit is 0. (The sign
/// of a zero result is not checked.)
fn nearest_even(bits: u16, exact: i128, value: impl Fn(u16) -> f64) -> bool {
    let r = value(bits);
    if !r.is_finite() {
        return false;
    }
    if exact == 0 {
        return r == 0.0;
    }
    let d = (Exact::of(r) - exact).abs();
    [bits.wrapping_add(1), bits.wrapping_sub(1)]
        .into_iter()
        .all(|n| {
            let v = value(n);
            if !v.is_finite() {
                return true;
            }
            let dn = (Exact::of(v) - exact).abs();
            dn > d || (dn == d && bits & 1 == 0)
        })
}

fn f16v(b: u16) -> f64 {
    half::f16::from_bits(b).to_f64()
}
fn bf16v(b: u16) -> f64 {
    half::bf16::from_bits(b).to_f64()
}

fn pack(lo: u16, hi: u16) -> u32 {
    u32::from(lo) | u32::from(hi) << 16
}

fn packed_results(dev: &Device, a: &[u32], b: &[u32], c: &[u32], f: &[f32]) -> Vec<u32> {
    let (ab, bb, cb, fb) = (
        dev.upload(a).unwrap(),
        dev.upload(b).unwrap(),
        dev.upload(c).unwrap(),
        dev.upload(f).unwrap(),
    );
    let mut out = dev.alloc_zeroed::<u32>(8 * a.len()).unwrap();
    let cfg = LaunchConfig::for_elements(a.len(), 64).unwrap();
    dev.launch(probe::probe_packed, cfg, (&ab, &bb, &cb, &fb, &mut out))
        .unwrap();
    out.to_host().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn math_functions_are_within_their_stated_bounds(x in proptest::collection::vec(math_input(), 1..100)) {
        let got = math_results(&Device::emulator(), &x);
        for (i, &v) in x.iter().enumerate() {
            for k in 0..MATH_FUNCTIONS.len() {
                let (exact, bound) = reference(k, f64::from(v));
                let g = got[8 * i + k];
                prop_assert!(within(g, exact, &bound), "{}({:e}) = {:e}, exact {:e}", MATH_FUNCTIONS[k], v, g, exact);
            }
        }
    }

    #[test]
    fn packed_half_arithmetic_rounds_correctly(
        abc in proptest::collection::vec((half_value(6), half_value(6), half_value(12), half_value(6), half_value(6), half_value(12)), 1..64),
        f in proptest::collection::vec(-1.0e5f32..1.0e5, 128),
    ) {
        let h = |v: f64| half::f16::from_f64(v).to_bits();
        // The inputs are exact f16 values; reuse them (rounded) as bf16 inputs.
        let a: Vec<u32> = abc.iter().map(|t| pack(h(t.0), h(t.3))).collect();
        let b: Vec<u32> = abc.iter().map(|t| pack(h(t.1), h(t.4))).collect();
        let c: Vec<u32> = abc.iter().map(|t| pack(h(t.2), h(t.5))).collect();
        let got = packed_results(&Device::emulator(), &a, &b, &c, &f);
        let halves = |x: u32| [x as u16, (x >> 16) as u16];
        for i in 0..a.len() {
            let r = &got[8 * i..][..8];
            for (lane, shift) in [(0usize, 0u32), (1, 16)] {
                let take = |x: u32| (x >> shift) as u16;
                let (fa, fb, fc) = (f16v(take(a[i])), f16v(take(b[i])), f16v(take(c[i])));
                let exact = [
                    Exact::of(fa) + Exact::of(fb),
                    Exact::of(fa) - Exact::of(fb),
                    Exact::mul(fa, fb),
                    Exact::mul(fa, fb) + Exact::of(fc),
                ];
                for (k, e) in exact.iter().enumerate() {
                    prop_assert!(nearest_even(halves(r[k])[lane], *e, f16v), "{} lane {}: {:e} {:e} {:e} -> {:e}", PACKED_OPS[k], lane, fa, fb, fc, f16v(halves(r[k])[lane]));
                }
                // bf16 reinterprets the same bits: recompute the exact values from them.
                let (ba, bb, bc) = (bf16v(take(a[i])), bf16v(take(b[i])), bf16v(take(c[i])));
                let in_window = [ba, bb, bc].iter().all(|v| *v == 0.0 || (v.abs() >= 2f64.powi(-24) && v.abs() < 2f64.powi(20)));
                if in_window {
                    let e_add = Exact::of(ba) + Exact::of(bb);
                    let e_fma = Exact::mul(ba, bb) + Exact::of(bc);
                    prop_assert!(nearest_even(halves(r[4])[lane], e_add, bf16v), "bf16x2 add lane {}", lane);
                    prop_assert!(nearest_even(halves(r[5])[lane], e_fma, bf16v), "bf16x2 fma lane {}", lane);
                }
            }
            // from_f32 packs f[2i] low, f[2i+1] high, each rounded once.
            let (lo, hi) = (f[2 * i], f[2 * i + 1]);
            prop_assert_eq!(r[6], pack(half::f16::from_f32(lo).to_bits(), half::f16::from_f32(hi).to_bits()));
            prop_assert_eq!(r[7], pack(half::bf16::from_f32(lo).to_bits(), half::bf16::from_f32(hi).to_bits()));
        }
    }
}

fn fma_sqrt_results(dev: &Device, x: &[f32], y: &[f32], z: &[f32]) -> Vec<f32> {
    let (xb, yb, zb) = (
        dev.upload(x).unwrap(),
        dev.upload(y).unwrap(),
        dev.upload(z).unwrap(),
    );
    let mut out = dev.alloc_zeroed::<f32>(2 * x.len()).unwrap();
    let cfg = LaunchConfig::for_elements(x.len(), 64).unwrap();
    dev.launch(probe::probe_fma_sqrt_f32, cfg, (&xb, &yb, &zb, &mut out))
        .unwrap();
    out.to_host().unwrap()
}

fn math_f64_results(dev: &Device, x: &[f64], y: &[f64], z: &[f64]) -> Vec<f64> {
    let (xb, yb, zb) = (
        dev.upload(x).unwrap(),
        dev.upload(y).unwrap(),
        dev.upload(z).unwrap(),
    );
    let mut out = dev.alloc_zeroed::<f64>(4 * x.len()).unwrap();
    let cfg = LaunchConfig::for_elements(x.len(), 64).unwrap();
    dev.launch(probe::probe_math_f64, cfg, (&xb, &yb, &zb, &mut out))
        .unwrap();
    out.to_host().unwrap()
}

/// What an H100 wrote for `num::log(-21.1134)`, and the other f32 functions
/// whose exact value at a negative number is NaN.
#[test]
fn log_of_a_negative_number_is_the_gpus_nan() {
    let got = math_results(&Device::emulator(), &[-21.1134]);
    for k in 0..MATH_FUNCTIONS.len() {
        if reference(k, -21.1134).0.is_nan() {
            assert_eq!(got[k].to_bits(), GPU_NAN_F32, "{}", MATH_FUNCTIONS[k]);
        }
    }
    assert_eq!(got[5].to_bits(), 0x7fff_ffff, "log, as the H100 wrote it");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn nan_results_of_the_f32_functions_follow_the_nan_rule(
        x in proptest::collection::vec(prop_oneof![any_nan_f32(), -1.0e30f32..-1.0e-30, Just(f32::NEG_INFINITY)], 1..64),
    ) {
        let got = math_results(&Device::emulator(), &x);
        for (i, &v) in x.iter().enumerate() {
            for k in 0..MATH_FUNCTIONS.len() {
                let g = got[8 * i + k];
                if reference(k, f64::from(v)).0.is_nan() {
                    prop_assert_eq!(g.to_bits(), nan_rule_bits(k, v), "{}({:#x})", MATH_FUNCTIONS[k], v.to_bits());
                }
            }
        }
    }

    #[test]
    fn fma_and_sqrt_nans_follow_the_nan_rule(
        x in proptest::collection::vec((prop_oneof![any_nan_f32(), Just(f32::INFINITY), -1.0e3f32..-1.0e-3], prop_oneof![any_nan_f32(), Just(0.0f32), Just(1.0f32)], -4.0f32..4.0), 1..64),
    ) {
        let (a, (b, c)): (Vec<f32>, (Vec<f32>, Vec<f32>)) = x.iter().map(|&(a, b, c)| (a, (b, c))).unzip();
        let got = fma_sqrt_results(&Device::emulator(), &a, &b, &c);
        for i in 0..a.len() {
            let exact_fma = f64::from(a[i]) * f64::from(b[i]) + f64::from(c[i]);
            if exact_fma.is_nan() {
                prop_assert_eq!(got[2 * i].to_bits(), GPU_NAN_F32, "fma({:e}, {:e}, {:e})", a[i], b[i], c[i]);
            }
            // Every a here is NaN, +inf or negative: sqrt is NaN except at +inf.
            if a[i] != f32::INFINITY {
                prop_assert_eq!(got[2 * i + 1].to_bits(), LIBM_NAN_F32, "sqrt({:#x})", a[i].to_bits());
            }
        }
    }

    #[test]
    fn f64_nans_follow_the_nan_rule(
        x in proptest::collection::vec(prop_oneof![any_nan_f64(), -1.0e300f64..-1.0e-300, Just(f64::NEG_INFINITY)], 1..64),
    ) {
        let ones = vec![1.0f64; x.len()];
        let got = math_f64_results(&Device::emulator(), &x, &ones, &ones);
        for (i, &v) in x.iter().enumerate() {
            let r = &got[4 * i..][..4];
            if v.is_nan() {
                prop_assert_eq!(r[0].to_bits(), v.to_bits(), "exp_f64 returns a NaN argument");
            }
            if v.is_nan() && v.is_sign_positive() {
                prop_assert_eq!(r[1].to_bits(), v.to_bits(), "log_f64 returns a NaN argument with the sign bit clear");
            }
            // log_f64 of a negative number and fma_f64 of a NaN: NaN, bits open.
            prop_assert!(r[1].is_nan(), "log_f64({:e}) = {:e}", v, r[1]);
            prop_assert_eq!(r[3].is_nan(), v.is_nan(), "fma_f64({:e}, 1, 1) = {:e}", v, r[3]);
            prop_assert_eq!(r[2].to_bits(), LIBM_NAN_F64, "sqrt_f64({:#x})", v.to_bits());
        }
    }

    #[test]
    fn packed_nans_are_the_canonical_half_nan(
        halves in proptest::collection::vec((0u16..0x40, any::<bool>(), 0u16..0x8000), 1..32),
        f in proptest::collection::vec(prop_oneof![any_nan_f32(), -10.0f32..10.0], 64),
    ) {
        // a: halves that are NaN both as f16 (exponent 0x7c00 set, mantissa
        // nonzero) and as bf16 (exponent 0x7f80 set, mantissa bit 6 set), of
        // either sign and with a 6-bit payload.
        let nan_half = |payload: u16, neg: bool| (u16::from(neg) << 15) | 0x7fc0 | payload;
        let a: Vec<u32> = halves.iter().map(|&(p, n, _)| u32::from(nan_half(p, n)) * 0x1_0001).collect();
        let b: Vec<u32> = halves.iter().map(|&(_, _, v)| u32::from(v) * 0x1_0001).collect();
        let got = packed_results(&Device::emulator(), &a, &b, &b, &f);
        for i in 0..a.len() {
            let r = &got[8 * i..][..8];
            // Every arithmetic result has a NaN operand in both halves.
            for (k, &bits) in r[..6].iter().enumerate() {
                prop_assert_eq!(bits, u32::from(GPU_NAN_HALF) * 0x1_0001, "{} of {:#x} and {:#x}", PACKED_OPS[k], a[i], b[i]);
            }
            // from_f32: each NaN input becomes the canonical half NaN.
            for (half, &v) in [f[2 * i], f[2 * i + 1]].iter().enumerate() {
                if v.is_nan() {
                    for (name, &packed) in ["f16x2", "bf16x2"].iter().zip(&r[6..]) {
                        prop_assert_eq!((packed >> (16 * half)) as u16, GPU_NAN_HALF, "{} from_f32({:#x})", name, v.to_bits());
                    }
                }
            }
        }
    }
}

#[test]
fn the_fixed_point_rounding_check_rejects_wrong_answers() {
    let one = half::f16::ONE.to_bits();
    assert!(nearest_even(one, Exact::of(1.0), f16v));
    assert!(!nearest_even(one + 1, Exact::of(1.0), f16v));
    // 1 + 2⁻¹¹ is a tie between 1 and 1 + 2⁻¹⁰: even (1.0) wins.
    let tie = Exact::of(1.0) + Exact::of(2f64.powi(-11));
    assert!(nearest_even(one, tie, f16v));
    assert!(!nearest_even(one + 1, tie, f16v));
    // Just above the tie rounds up.
    assert!(nearest_even(one + 1, tie + 1, f16v));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_math_is_within_the_same_bounds_and_accurate_functions_match_the_emulator() {
    let gpu = Device::gpu(0).expect("this test needs a CUDA GPU");
    gpu.load(&PROBES).unwrap();
    let emu = Device::emulator();
    // NaNs of either sign, quiet and signalling, with payloads: their results
    // are compared by the NaN rule, bit for bit where it fixes the bits.
    let nans = [
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffc0_1234),
    ];
    let x: Vec<f32> = (0..4096u32)
        .map(|i| (i as f32 - 2048.0) / 97.0)
        .chain([0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, 1.0])
        .chain([f32::MIN_POSITIVE / 4.0, -21.1134])
        .chain(nans)
        .collect();
    let (g, e) = (math_results(&gpu, &x), math_results(&emu, &x));
    for (i, &v) in x.iter().enumerate() {
        for k in 0..MATH_FUNCTIONS.len() {
            let (exact, bound) = reference(k, f64::from(v));
            assert!(
                within(g[8 * i + k], exact, &bound),
                "GPU {}({v:e}) = {:e}",
                MATH_FUNCTIONS[k],
                g[8 * i + k]
            );
            // libm runs the same code on both; the NaN rule fixes every NaN's bits.
            if k >= 4 || exact.is_nan() {
                assert_eq!(
                    g[8 * i + k].to_bits(),
                    e[8 * i + k].to_bits(),
                    "{}({:#x})",
                    MATH_FUNCTIONS[k],
                    v.to_bits()
                );
            }
        }
    }

    // fma_f32 and sqrt_f32: correctly rounded, and their NaNs fixed by the rule.
    let a: Vec<f32> = x.iter().map(|&v| v * 3.0).collect();
    let b: Vec<f32> = x.iter().rev().copied().collect();
    let c: Vec<f32> = x
        .iter()
        .map(|&v| if v.is_nan() { 0.0 } else { -v })
        .collect();
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    assert_eq!(
        bits(fma_sqrt_results(&gpu, &a, &b, &c)),
        bits(fma_sqrt_results(&emu, &a, &b, &c))
    );

    // f64: exp_f64 and sqrt_f64 bit for bit; log_f64 and fma_f64 too, except
    // that the rule leaves the bits of their computed f64 NaNs open.
    let x64: Vec<f64> = a.iter().map(|&v| f64::from(v) * 1.5).collect();
    let y64: Vec<f64> = b.iter().map(|&v| f64::from(v)).collect();
    let z64: Vec<f64> = c.iter().map(|&v| f64::from(v)).collect();
    let (g, e) = (
        math_f64_results(&gpu, &x64, &y64, &z64),
        math_f64_results(&emu, &x64, &y64, &z64),
    );
    for (i, (g, e)) in g.chunks(4).zip(e.chunks(4)).enumerate() {
        for k in 0..4 {
            let agree = match MATH_F64_FUNCTIONS[k] {
                "log_f64" | "fma_f64" => common::same_bits_or_both_nan_f64(g[k], e[k]),
                _ => g[k].to_bits() == e[k].to_bits(),
            };
            assert!(
                agree,
                "{}({:e}): GPU {:#x}, emulator {:#x}",
                MATH_F64_FUNCTIONS[k],
                x64[i],
                g[k].to_bits(),
                e[k].to_bits()
            );
        }
    }

    // Packed halves: correctly rounded on both, NaNs the canonical 0x7fff.
    let halves = |seed: u32| -> Vec<u32> {
        (0..512u32)
            .map(|i| (i ^ seed).wrapping_mul(2_654_435_761))
            .collect()
    };
    let (pa, pb, pc) = (halves(1), halves(2), halves(3));
    let pf: Vec<f32> = x.iter().take(2 * pa.len()).copied().collect();
    assert_eq!(
        packed_results(&gpu, &pa, &pb, &pc, &pf),
        packed_results(&emu, &pa, &pb, &pc, &pf)
    );
}
