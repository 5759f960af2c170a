//! CPU references: straightforward loops, accumulating in f64, and the
//! tolerances the kernels are held to, derived from dtype and length.

pub mod conv;
pub mod gemm;

pub use conv::conv2d;
pub mod reduce;

/// `a·x + y` in f64 (exact product; one f64 rounding of the sum), per element.
pub fn axpy_f32(a: f32, x: &[f32], y: &[f32]) -> Vec<f64> {
    x.iter()
        .zip(y)
        .map(|(&xi, &yi)| f64::from(a) * f64::from(xi) + f64::from(yi))
        .collect()
}

/// `a·x + y` exactly, per element, as an unevaluated sum `hi + lo` of two
/// f64: `hi` is the sum rounded to f64 and `lo` its rounding error (TwoSum;
/// the product of two f32 is exact in f64 and far from its overflow, so
/// `hi + lo` is the exact value). `lo` is 0 where `hi` is ±inf or NaN.
pub fn axpy_f32_exact(a: f32, x: &[f32], y: &[f32]) -> Vec<(f64, f64)> {
    x.iter()
        .zip(y)
        .map(|(&xi, &yi)| two_sum(f64::from(a) * f64::from(xi), f64::from(yi)))
        .collect()
}

/// `p + q` as `(s, e)`: `s` rounded to f64, `e` the exact error (Knuth's
/// TwoSum, exact for every finite `p`, `q` whose sum does not overflow).
fn two_sum(p: f64, q: f64) -> (f64, f64) {
    let s = p + q;
    if !s.is_finite() {
        return (s, 0.0);
    }
    let p_part = s - q;
    let q_part = s - p_part;
    (s, (p - p_part) + (q - q_part))
}

/// The f32 nearest the exact value `hi + lo` (`|lo|` at most half an f64 ulp
/// of `hi`, as [`axpy_f32_exact`] gives them), ties to even, ±inf past
/// f32::MAX's rounding boundary `MAX + ½ ulp = 2¹²⁸ − 2¹⁰³`: what one IEEE
/// rounding (a fused multiply-add) gives. Unlike `hi as f32` (a second
/// rounding), this is right where `hi` lies exactly halfway between two f32
/// values (the boundary included, halfway between MAX and 2¹²⁸) and `lo`
/// breaks the tie.
///
/// ```
/// use warpforge::reference::round_to_f32;
/// let boundary = 2f64.powi(128) - 2f64.powi(103);
/// assert_eq!(round_to_f32(boundary, 0.0), f32::INFINITY); // the tie goes to even: 2¹²⁸
/// assert_eq!(round_to_f32(boundary, -1.0), f32::MAX); // just below the boundary
/// assert_eq!(round_to_f32(1.0 + 2f64.powi(-24), 2f64.powi(-80)), 1.0 + f32::EPSILON);
/// ```
pub fn round_to_f32(hi: f64, lo: f64) -> f32 {
    let r = hi as f32;
    if lo == 0.0 || !hi.is_finite() {
        return r;
    }
    // The value of an f32 in this rounding: ±inf stands for ±2¹²⁸.
    let value = |f: f32| {
        if f.is_infinite() {
            2f64.powi(128).copysign(f64::from(f))
        } else {
            f64::from(f)
        }
    };
    let rv = value(r);
    if rv == hi {
        return r; // hi is an f32 (or 2¹²⁸), and lo is far below half its ulp
    }
    // The f32 on hi's other side; hi is a tie exactly when it is halfway
    // (adjacent f32 values, 2¹²⁸ included, sum exactly in f64).
    let other = if hi > rv { r.next_up() } else { r.next_down() };
    if rv + value(other) != 2.0 * hi {
        return r;
    }
    if (lo > 0.0) == (value(other) > rv) {
        other
    } else {
        r
    }
}

/// `a·x + y` correctly rounded to f64 (IEEE fusedMultiplyAdd), per element.
pub fn axpy_f64(a: f64, x: &[f64], y: &[f64]) -> Vec<f64> {
    x.iter()
        .zip(y)
        .map(|(&xi, &yi)| a.mul_add(xi, yi))
        .collect()
}

/// Σx in f64 with Kahan–Babuška (Neumaier) compensation, and Σ|x|.
pub fn sum(x: impl IntoIterator<Item = f64>) -> (f64, f64) {
    let (mut s, mut c, mut abs) = (0.0f64, 0.0f64, 0.0f64);
    for v in x {
        let t = s + v;
        c += if s.abs() >= v.abs() {
            (s - t) + v
        } else {
            (v - t) + s
        };
        s = t;
        abs += v.abs();
    }
    (s + c, abs)
}

/// Half the f32 ulp of `v`'s binade (`2^(e−24)` for `2^e ≤ |v| < 2^(e+1)`,
/// `2⁻¹⁵⁰` among the subnormals): the most a correctly rounded f32 result
/// differs from `v` while it does not overflow. +inf where `|v| ≥ 2¹²⁸` or `v`
/// is NaN; values from `2¹²⁸ − 2¹⁰³` on round to ±inf, which this does not
/// bound (see [`round_to_f32`]).
pub fn half_ulp_f32(v: f64) -> f64 {
    let v = v.abs();
    if v.is_nan() || v >= 2f64.powi(128) {
        return f64::INFINITY;
    }
    if v < 2f64.powi(-126) {
        return 2f64.powi(-150);
    }
    let e = ((v.to_bits() >> 52) as i32) - 1023;
    2f64.powi(e - 24)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compensated_sum_recovers_what_naive_summation_loses() {
        let xs = [1e16, 1.0, -1e16, 1.0];
        assert_eq!(sum(xs).0, 2.0);
        assert_eq!(sum(xs).1, 2e16 + 2.0);
        assert_eq!(xs.iter().sum::<f64>(), 1.0); // what the reference protects against
    }

    #[test]
    fn half_ulp_matches_the_spacing_of_f32() {
        assert_eq!(half_ulp_f32(1.0), f64::from(f32::EPSILON) / 2.0);
        assert_eq!(half_ulp_f32(-2.0), f64::from(f32::EPSILON));
        // Just below a power of two: the spacing below it, not above.
        assert_eq!(half_ulp_f32(2.0 - 1e-9), f64::from(f32::EPSILON) / 2.0);
        assert_eq!(half_ulp_f32(1e-40), 2f64.powi(-150)); // subnormal
        assert_eq!(half_ulp_f32(0.0), 2f64.powi(-150));
        assert_eq!(half_ulp_f32(f64::from(f32::MAX)), 2f64.powi(103));
        assert_eq!(half_ulp_f32(2f64.powi(128)), f64::INFINITY);
    }

    #[test]
    fn round_to_f32_rounds_once_where_hi_is_a_tie() {
        let boundary = 2f64.powi(128) - 2f64.powi(103);
        let mid = 1.0 + 2f64.powi(-24); // halfway between 1 and 1 + 2⁻²³
        for (hi, lo, want) in [
            (boundary, 0.0, f32::INFINITY),
            (boundary, 1.0, f32::INFINITY),
            (boundary, -1.0, f32::MAX),
            (-boundary, 1.0, -f32::MAX),
            (-boundary, -1.0, f32::NEG_INFINITY),
            (mid, 0.0, 1.0),
            (mid, 2f64.powi(-80), 1.0 + f32::EPSILON),
            (mid, -2f64.powi(-80), 1.0),
            (-mid, -2f64.powi(-80), -1.0 - f32::EPSILON),
            (2f64.powi(-150), 2f64.powi(-300), f32::from_bits(1)), // tie with 0
            (2f64.powi(-150), -2f64.powi(-300), 0.0),
            (f64::from(f32::MAX) + 2f64.powi(102), 0.0, f32::MAX),
        ] {
            assert_eq!(
                round_to_f32(hi, lo).to_bits(),
                want.to_bits(),
                "{hi:e} {lo:+e}"
            );
        }
    }

    #[test]
    fn round_to_f32_picks_the_nearest_neighbour() {
        use rand::{Rng, SeedableRng, rngs::StdRng};
        let mut rng = StdRng::seed_from_u64(1);
        for _ in 0..100_000 {
            // Two adjacent f32 values (finite, positive or negative, any binade)...
            let f = f32::from_bits(rng.random_range(0..0x7f7f_ffff))
                * if rng.random() { 1.0 } else { -1.0 };
            let g = if rng.random() {
                f.next_up()
            } else {
                f.next_down()
            };
            if !g.is_finite() {
                continue;
            }
            let (f, g) = (f64::from(f), f64::from(g));
            // ...and a point between them (exactly halfway a quarter of the
            // time), pushed by lo, which decides a tie.
            let t = if rng.random_bool(0.25) {
                0.5
            } else {
                rng.random::<f64>()
            };
            let hi = f + (g - f) * t;
            let lo = hi * 2f64.powi(-60) * (rng.random::<f64>() - 0.5);
            let nearer_g =
                (g - hi).abs() < (f - hi).abs() || (g - hi == hi - f && (lo > 0.0) == (g > f));
            let want = if nearer_g { g } else { f };
            assert_eq!(
                f64::from(round_to_f32(hi, lo)),
                want,
                "{f:e} {g:e} {hi:e} {lo:+e}"
            );
        }
    }

    #[test]
    fn axpy_f32_exact_is_exact() {
        // 1 + 2⁻²⁴ exactly as a product, plus 2⁻⁸⁰: hi holds the product,
        // lo the addend that f64 cannot.
        let a = 24929.0 * 2f32.powi(-15);
        let x = 673.0 * 2f32.powi(-9);
        let [(hi, lo)] = axpy_f32_exact(a, &[x], &[2f32.powi(-80)])[..] else {
            unreachable!()
        };
        assert_eq!((hi, lo), (1.0 + 2f64.powi(-24), 2f64.powi(-80)));
        let [(hi, lo)] = axpy_f32_exact(1.0, &[f32::MAX], &[f32::MAX])[..] else {
            unreachable!()
        };
        assert_eq!((hi, lo), (2.0 * f64::from(f32::MAX), 0.0));
    }
}
