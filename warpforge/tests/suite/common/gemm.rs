//! What the GEMM suites (`gemm`, `gemm_tensor`, `gemm_tf32`, `gemm_batched`)
//! share: one problem as stored ([`Case`]: shapes, transposes, leading
//! dimensions, factors, operands and `C` with its padding, all as f64, built
//! by [`case`] from a value generator), the transpose combinations, and the
//! seeded integer generator. Each suite adds its own
//! reference and checks (`impl Case` in the suite): the SIMT kernels' fma
//! chain, the tensor cores' one rounding to the output type.

// Not every suite that includes `common` uses it.
#[allow(unused_imports)]
pub use warpforge::reference::gemm::needed;

/// Element types from and to f64, exact on the values the suites use
/// (small integers, dyadic factors).
#[allow(dead_code)]
pub trait Val: warpforge::Element {
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
}

macro_rules! val {
    ($t:ty, $from:expr, $to:expr) => {
        impl Val for $t {
            fn from_f64(x: f64) -> Self {
                $from(x)
            }
            fn to_f64(self) -> f64 {
                $to(self)
            }
        }
    };
}
val!(f32, |x| x as f32, f64::from);
val!(f64, |x| x, |x| x);
val!(half::f16, half::f16::from_f64, half::f16::to_f64);
val!(half::bf16, half::bf16::from_f64, half::bf16::to_f64);

/// `(trans_a, trans_b)`: all four combinations.
pub const TRANSPOSES: [(bool, bool); 4] =
    [(false, false), (false, true), (true, false), (true, true)];

/// One xorshift64 step of `s` (never 0 if it was not): the suites' operands.
pub fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// The generator state the matrix suites start from for `seed`.
pub fn seeded(seed: u64) -> u64 {
    seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1
}

/// One problem: shapes, transposes, leading dimensions, factors and the
/// operands as stored (values exact in every type the suite runs), `C` with
/// its padding.
#[derive(Clone, Debug)]
pub struct Case {
    /// The configuration to pin (`Gemm::tile`); `None`: the heuristic's.
    pub tile: Option<warpforge::gemm::TileConfig>,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub ta: bool,
    pub tb: bool,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
    pub alpha: f64,
    pub beta: f64,
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    pub c: Vec<f64>,
}

/// `(rows, cols)` of a stored matrix.
pub type Dims = (usize, usize);
/// `(lda, ldb, ldc)`.
pub type LeadingDims = (usize, usize, usize);

/// The stored shapes of a problem: `(rows, cols)` of A and of B as stored,
/// and `(lda, ldb, ldc)` = each row length + `pad`.
pub fn layout(
    (m, n, k): (usize, usize, usize),
    (ta, tb): (bool, bool),
    pad: usize,
) -> (Dims, Dims, LeadingDims) {
    let (ar, ac) = if ta { (k, m) } else { (m, k) };
    let (br, bc) = if tb { (n, k) } else { (k, n) };
    ((ar, ac), (br, bc), (ac + pad, bc + pad, n + pad))
}

/// Leading dimensions a tensor map can describe (the Hopper kernels'):
/// each stored row length rounded up to 8 elements (16 bytes), plus
/// `extra` · 8; C's `n + extra`.
#[allow(dead_code)]
pub fn wgmma_lds(
    (m, n, k): (usize, usize, usize),
    trans: (bool, bool),
    extra: usize,
) -> LeadingDims {
    let ((_, ac), (_, bc), _) = layout((m, n, k), trans, 0);
    let up = |x: usize| x.next_multiple_of(8) + 8 * extra;
    (up(ac), up(bc), n + extra)
}

impl Case {
    /// `op(A)[i][p]`.
    pub fn a_at(&self, i: usize, p: usize) -> f64 {
        self.a[if self.ta {
            p * self.lda + i
        } else {
            i * self.lda + p
        }]
    }

    /// `op(B)[p][j]`.
    pub fn b_at(&self, p: usize, j: usize) -> f64 {
        self.b[if self.tb {
            j * self.ldb + p
        } else {
            p * self.ldb + j
        }]
    }

    /// The sizes and factors, for a failure message.
    pub fn describe(&self) -> String {
        format!(
            "m {} n {} k {} ta {} tb {} lda {} ldb {} ldc {} alpha {} beta {}",
            self.m,
            self.n,
            self.k,
            self.ta,
            self.tb,
            self.lda,
            self.ldb,
            self.ldc,
            self.alpha,
            self.beta
        )
    }
}

/// The value in `C`'s padding (the columns past `n` of each stored row): a
/// kernel that writes there leaves something else.
#[allow(dead_code)]
pub const PADDING: f64 = 99.0;

/// A deterministic case: operands from `draw` of successive generator words
/// (from `seed`), leading dimensions `row length + pad`, `C` filled with
/// `c_fill` where given, else integers in `[-4, 4]`; its padding [`PADDING`].
#[allow(clippy::too_many_arguments, dead_code)]
pub fn case(
    (m, n, k): (usize, usize, usize),
    (ta, tb): (bool, bool),
    pad: usize,
    alpha: f64,
    beta: f64,
    c_fill: Option<f64>,
    seed: u64,
    draw: impl Fn(u64) -> f64,
) -> Case {
    let (_, _, lds) = layout((m, n, k), (ta, tb), pad);
    case_with_lds((m, n, k), (ta, tb), lds, alpha, beta, c_fill, seed, draw)
}

/// [`case`] with the leading dimensions given (each at least its stored
/// row length).
#[allow(clippy::too_many_arguments, dead_code)]
pub fn case_with_lds(
    (m, n, k): (usize, usize, usize),
    (ta, tb): (bool, bool),
    (lda, ldb, ldc): LeadingDims,
    alpha: f64,
    beta: f64,
    c_fill: Option<f64>,
    seed: u64,
    draw: impl Fn(u64) -> f64,
) -> Case {
    let ((ar, ac), (br, bc), _) = layout((m, n, k), (ta, tb), 0);
    assert!(
        lda >= ac && ldb >= bc && ldc >= n,
        "leading dimensions below the row lengths"
    );
    let mut s = seeded(seed);
    let mut next = move || xorshift(&mut s);
    let a = (0..needed(ar, ac, lda)).map(|_| draw(next())).collect();
    let b = (0..needed(br, bc, ldb)).map(|_| draw(next())).collect();
    let c = (0..needed(m, n, ldc))
        .map(|e| {
            if e % ldc.max(1) >= n {
                PADDING
            } else {
                c_fill.unwrap_or_else(|| (next() % 9) as f64 - 4.0)
            }
        })
        .collect();
    Case {
        tile: None,
        m,
        n,
        k,
        ta,
        tb,
        lda,
        ldb,
        ldc,
        alpha,
        beta,
        a,
        b,
        c,
    }
}
