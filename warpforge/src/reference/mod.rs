//! CPU references: straightforward loops, accumulating in f64, and the
//! tolerances the kernels are held to, derived from dtype and length.

pub mod reduce;

/// `a·x + y` in f64 (exact product; one f64 rounding of the sum), per element.
pub fn axpy_f32(a: f32, x: &[f32], y: &[f32]) -> Vec<f64> {
    x.iter()
        .zip(y)
        .map(|(&xi, &yi)| f64::from(a) * f64::from(xi) + f64::from(yi))
        .collect()
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

/// Half an ulp of `v` as an f32: the most a correctly rounded f32 result differs from `v`.
pub fn half_ulp_f32(v: f64) -> f64 {
    let f = v as f32;
    if !f.is_finite() {
        return f64::INFINITY;
    }
    let next = f32::from_bits(f.abs().to_bits() + 1);
    (f64::from(next) - f64::from(f.abs())) / 2.0
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
    }
}
