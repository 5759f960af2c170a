//! GEMM reference: `alpha·op(A)·op(B) + beta·C` in plain loops, accumulating
//! in f64, and the error bound a kernel of a given precision is held to.
//!
//! Operands are stored row-major with leading dimensions, as in
//! [`crate::gemm`]: `A` is `m × k` (`k × m` when transposed), `B` is `k × n`
//! (`n × k` when transposed), `C` is `m × n`.
//!
//! ```
//! use warpforge::reference::gemm::{Problem, gemm};
//! let p = Problem { m: 2, n: 2, k: 2, trans_a: false, trans_b: true, lda: 2, ldb: 2, ldc: 2 };
//! let (a, b) = ([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]);
//! let d = gemm(&p, 1.0, &a, &b, 0.0, None);
//! assert_eq!(d.values, [17.0, 23.0, 39.0, 53.0]); // A·Bᵀ
//! assert_eq!(d.magnitudes, d.values); // every term positive
//! ```

/// Shapes, transposes and leading dimensions of one GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Rows of `op(A)` and `C`.
    pub m: usize,
    /// Columns of `op(B)` and `C`.
    pub n: usize,
    /// Columns of `op(A)`, rows of `op(B)`.
    pub k: usize,
    /// `op(A) = Aᵀ`.
    pub trans_a: bool,
    /// `op(B) = Bᵀ`.
    pub trans_b: bool,
    /// Elements between `A`'s stored rows.
    pub lda: usize,
    /// Elements between `B`'s stored rows.
    pub ldb: usize,
    /// Elements between `C`'s rows.
    pub ldc: usize,
}

impl Problem {
    /// `A`'s stored `(rows, columns)`.
    pub fn a_stored(&self) -> (usize, usize) {
        if self.trans_a {
            (self.k, self.m)
        } else {
            (self.m, self.k)
        }
    }

    /// `B`'s stored `(rows, columns)`.
    pub fn b_stored(&self) -> (usize, usize) {
        if self.trans_b {
            (self.n, self.k)
        } else {
            (self.k, self.n)
        }
    }

    /// `op(A)[i][p]`'s index in `A`.
    pub fn a_index(&self, i: usize, p: usize) -> usize {
        if self.trans_a {
            p * self.lda + i
        } else {
            i * self.lda + p
        }
    }

    /// `op(B)[p][j]`'s index in `B`.
    pub fn b_index(&self, p: usize, j: usize) -> usize {
        if self.trans_b {
            j * self.ldb + p
        } else {
            p * self.ldb + j
        }
    }
}

/// Elements a stored `rows × cols` matrix with leading dimension `ld` needs.
pub fn needed(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * ld + cols
    }
}

/// The reference result, `m × n` row-major (no padding).
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    /// `alpha·Σ op(A)·op(B) + beta·C`, summed in f64 (`C` not read when
    /// `beta = 0`).
    pub values: Vec<f64>,
    /// `|alpha|·Σ |op(A)·op(B)| + |beta·C|`: the scale of each element's
    /// rounding error.
    pub magnitudes: Vec<f64>,
}

/// `alpha·op(A)·op(B) + beta·C` (`c` with leading dimension `p.ldc`; `None`
/// or `beta = 0`: not read, as BLAS does).
pub fn gemm(
    p: &Problem,
    alpha: f64,
    a: &[f64],
    b: &[f64],
    beta: f64,
    c: Option<&[f64]>,
) -> Reference {
    let mut values = Vec::with_capacity(p.m * p.n);
    let mut magnitudes = Vec::with_capacity(p.m * p.n);
    for i in 0..p.m {
        for j in 0..p.n {
            let (mut sum, mut mag) = (0.0f64, 0.0f64);
            for q in 0..p.k {
                let t = a[p.a_index(i, q)] * b[p.b_index(q, j)];
                sum += t;
                mag += t.abs();
            }
            let (mut v, mut m) = (alpha * sum, alpha.abs() * mag);
            if beta != 0.0 {
                let cv = c.map_or(0.0, |c| c[i * p.ldc + j]);
                v += beta * cv;
                m += (beta * cv).abs();
            }
            values.push(v);
            magnitudes.push(m);
        }
    }
    Reference { values, magnitudes }
}

/// The largest error allowed for an element of magnitude `magnitude` (see
/// [`Reference::magnitudes`]) of a GEMM over `k` computed with unit roundoff
/// `unit_roundoff` (2⁻²⁴ for f32, 2⁻⁵³ for f64): the standard bound for a
/// dot product, `γ(k + 2)·magnitude` with `γ(n) = n·u / (1 − n·u)` (the `k`
/// roundings of the accumulation, `alpha·acc` and the final fused
/// multiply-add), plus the same bound at f64's unit roundoff for the
/// reference's own sum. 0 when the magnitude is 0.
///
/// ```
/// use warpforge::reference::gemm::tolerance;
/// let u32 = 2f64.powi(-24);
/// assert!(tolerance(100.0, 10, u32) > 10.0 * 12.0 * u32 * 10.0);
/// assert_eq!(tolerance(0.0, 10, u32), 0.0);
/// ```
pub fn tolerance(magnitude: f64, k: usize, unit_roundoff: f64) -> f64 {
    let gamma = |u: f64| {
        let nu = (k as f64 + 2.0) * u;
        nu / (1.0 - nu).max(f64::MIN_POSITIVE)
    };
    (gamma(unit_roundoff) + gamma(f64::EPSILON / 2.0)) * magnitude
}

/// `x` rounded to tf32, as [`crate::gemm::Gemm::tf32`] rounds each operand:
/// 10 fraction bits, to nearest, ties away from zero (in f64 arithmetic, a
/// model independent of the kernels' bit manipulation). Zero, infinities and
/// NaN are returned as they are; `x` is an f32 value (so normal or zero in
/// tf32's range, or an f32 subnormal, whose ulp is fixed).
///
/// ```
/// use warpforge::reference::gemm::tf32;
/// assert_eq!(tf32(1.0 + 1.0 / 2048.0), 1.0 + 1.0 / 1024.0); // a tie: away from zero
/// assert_eq!(tf32(-3.0 - 1.0 / 4096.0), -3.0);
/// ```
pub fn tf32(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    // The ulp of a tf32 in x's binade; below f32's normal range, a subnormal
    // tf32's (10 fraction bits of 2⁻¹²⁶).
    let exponent = (x.abs().log2().floor() as i32).max(-126);
    let ulp = 2f64.powi(exponent - 10);
    (x / ulp).round() * ulp
}
