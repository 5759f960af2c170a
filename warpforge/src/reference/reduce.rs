//! CPU references for [`crate::reduce`]: f64 accumulation (compensated for
//! the sums), numpy's semantics, and the interval each kernel result must lie
//! in, from the error bounds in the `reduce` module docs.
//!
//! A float result is checked against `[round(lo), round(hi)]`, where
//! `[lo, hi]` bounds the kernel's value before its last rounding (exact result
//! ± the derived bound ± the reference's own error) and `round` is the
//! kernel's rounding chain to the output dtype (to the f32 accumulator, then
//! to f16/bf16; the identity for f64). Rounding is monotonic, so this is exact
//! bookkeeping for f16/bf16 outputs and for results that overflow to ±inf.
//!
//! | op | `lo, hi` = exact `∓` |
//! | --- | --- |
//! | `sum` | `γ(D)·Σ|x|` |
//! | `mean` | `γ(D)·Σ|x|`, divided by `n` in f64 |
//! | `sum_of_squares` | `γ(D+1)·Σx² + n·η` |
//! | `norm2` | `√` of the `sum_of_squares` ends (`√` is correctly rounded) |
//! | `logsumexp` | `1.01·ε + 2u·(ln n + |r| + 1)`, `ε = γ(D·(4 + ln n)) + n·η` |
//! | min, max, arg*, integers | exact (min/max: bit for bit, `−0 ≠ +0`) |
//!
//! `D` = [`Layout::fold_depth`], `u` the accumulator's unit roundoff, `η`
//! half its smallest subnormal, `γ(k) = k·u/(1 − k·u)`.

use super::sum;
use crate::reduce::{Layout, Op, Reducible};
use crate::{Error, Result};
use half::{bf16, f16};

/// A reduction input or output value, widened without loss.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// A float (f16, bf16 and f32 are exact in f64).
    Float(f64),
    /// An integer.
    Int(i128),
}

/// Element types with a CPU reference.
pub trait RefElement: Reducible {
    /// The accumulator's unit roundoff (2⁻²⁴ or 2⁻⁵³; 0 for integers).
    const U: f64;
    /// The most an underflowing product loses: half the accumulator's smallest
    /// subnormal (f64: the whole of it, as half is not an f64).
    const ETA: f64;
    /// The value, widened.
    fn value(self) -> Value;
    /// `v` rounded as the kernel rounds its result: to the accumulator, then to `Self`.
    fn round_out(v: f64) -> f64;
    /// `v` rounded to the accumulator (f32 or f64; overflow to ±inf).
    fn round_acc(v: f64) -> f64;
    /// `v` wrapped to `Self` (two's complement), for integer sums.
    fn wrap(v: i128) -> i128;
}

/// 2⁻¹⁵⁰: half the smallest f32 subnormal.
const F32_ETA: f64 = f64::from_bits((1023 - 150) << 52);

macro_rules! ref_float {
    ($($t:ty: $u:expr, $eta:expr, $to:expr, $round:expr, $acc:expr;)*) => { $(
        impl RefElement for $t {
            const U: f64 = $u;
            const ETA: f64 = $eta;
            fn value(self) -> Value {
                Value::Float($to(self))
            }
            fn round_out(v: f64) -> f64 {
                $round(v)
            }
            fn round_acc(v: f64) -> f64 {
                $acc(v)
            }
            fn wrap(v: i128) -> i128 {
                v
            }
        }
    )* };
}
ref_float! {
    f32: f32::EPSILON as f64 / 2.0, F32_ETA, f64::from, |v: f64| f64::from(v as f32),
        |v: f64| f64::from(v as f32);
    f64: f64::EPSILON / 2.0, f64::from_bits(1), |v: f64| v, |v: f64| v, |v: f64| v;
    f16: f32::EPSILON as f64 / 2.0, F32_ETA, |v: f16| v.to_f64(),
        |v: f64| f16::from_f32(v as f32).to_f64(), |v: f64| f64::from(v as f32);
    bf16: f32::EPSILON as f64 / 2.0, F32_ETA, |v: bf16| v.to_f64(),
        |v: f64| bf16::from_f32(v as f32).to_f64(), |v: f64| f64::from(v as f32);
}

macro_rules! ref_int {
    ($($t:ty),*) => { $(
        impl RefElement for $t {
            const U: f64 = 0.0;
            const ETA: f64 = 0.0;
            fn value(self) -> Value {
                Value::Int(i128::from(self))
            }
            fn round_out(v: f64) -> f64 {
                v
            }
            fn round_acc(v: f64) -> f64 {
                v
            }
            fn wrap(v: i128) -> i128 {
                i128::from(v as $t)
            }
        }
    )* };
}
ref_int!(i32, i64, u32);

/// What one output of a reduction must be.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Expected {
    /// A float in `[lo, hi]` (ends already rounded to the output dtype);
    /// NaN exactly when `reference` is NaN. `reference` is the exact value.
    Float {
        /// The exact result (f64).
        reference: f64,
        /// Smallest acceptable output.
        lo: f64,
        /// Largest acceptable output.
        hi: f64,
    },
    /// Exactly this float, bit for bit (min/max; any NaN for NaN).
    Exact(f64),
    /// Exactly this integer.
    Int(i128),
    /// Exactly this index.
    Index(u64),
}

impl Expected {
    /// The reference value as f64 (for reports).
    pub fn reference(&self) -> f64 {
        match *self {
            Expected::Float { reference, .. } | Expected::Exact(reference) => reference,
            Expected::Int(v) => v as f64,
            Expected::Index(i) => i as f64,
        }
    }

    /// How much of its tolerance `got` uses (≤ 1), or why it fails.
    pub fn check(&self, got: Value) -> std::result::Result<f64, String> {
        let fail = || Err(format!("got {got:?}, expected {self:?}"));
        match (*self, got) {
            (Expected::Float { reference, lo, hi }, Value::Float(g)) => {
                if reference.is_nan() || g.is_nan() {
                    return if reference.is_nan() && g.is_nan() {
                        Ok(0.0)
                    } else {
                        fail()
                    };
                }
                if !(lo <= g && g <= hi) {
                    return fail();
                }
                if g == reference {
                    return Ok(0.0);
                }
                let side = if g < reference {
                    reference - lo
                } else {
                    hi - reference
                };
                Ok(if side > 0.0 && side.is_finite() {
                    (g - reference).abs() / side
                } else {
                    0.0
                })
            }
            (Expected::Exact(w), Value::Float(g)) => {
                if (w.is_nan() && g.is_nan()) || w.to_bits() == g.to_bits() {
                    Ok(0.0)
                } else {
                    fail()
                }
            }
            (Expected::Int(w), Value::Int(g)) if w == g => Ok(0.0),
            (Expected::Index(w), Value::Int(g)) if i128::from(w) == g => Ok(0.0),
            _ => fail(),
        }
    }
}

/// `γ(k) = k·u / (1 − k·u)`.
fn gamma(k: f64, u: f64) -> f64 {
    k * u / (1.0 - k * u)
}

/// NaN, ±inf, or None when every value is finite (IEEE sum of the specials).
fn special_sum(line: &[f64]) -> Option<f64> {
    let nan = line.iter().any(|v| v.is_nan());
    let pos = line.contains(&f64::INFINITY);
    let neg = line.contains(&f64::NEG_INFINITY);
    match (nan || (pos && neg), pos, neg) {
        (true, _, _) => Some(f64::NAN),
        (_, true, _) => Some(f64::INFINITY),
        (_, _, true) => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// Σx² of finite f64 values, compensated, exact products by two-product;
/// +inf when it is beyond f64.
fn sum_of_squares_exact(line: &[f64]) -> f64 {
    if line.iter().map(|&x| x * x).sum::<f64>().is_infinite() {
        return f64::INFINITY;
    }
    sum(line.iter().flat_map(|&x| {
        let p = x * x;
        [p, x.mul_add(x, -p)]
    }))
    .0
}

/// The extreme of `line` (`max`: largest) in the order `−0 < +0`; NaN if any.
fn extreme(line: &[f64], max: bool) -> f64 {
    if line.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    line.iter()
        .copied()
        .reduce(|a, b| {
            let b_wins = if max {
                a.total_cmp(&b).is_lt()
            } else {
                b.total_cmp(&a).is_lt()
            };
            if b_wins { b } else { a }
        })
        .unwrap_or(f64::NAN)
}

/// The first index of the extreme; NaN counts as the extreme, `−0 == +0`.
fn arg_extreme<V: PartialOrd + Copy>(line: &[V], max: bool, is_nan: impl Fn(V) -> bool) -> u64 {
    if let Some(i) = line.iter().position(|&v| is_nan(v)) {
        return i as u64;
    }
    let mut best = 0;
    for (i, &v) in line.iter().enumerate() {
        let better = if max { v > line[best] } else { v < line[best] };
        if better {
            best = i;
        }
    }
    best as u64
}

/// The interval for a float `op` over `line` with fold depth `depth`, before rounding.
fn float_interval<T: RefElement>(op: Op, line: &[f64], depth: u32) -> (f64, f64, f64) {
    let n = line.len() as f64;
    let u = T::U;
    let d = f64::from(depth);
    let point = |v: f64| (v, v, v);
    match op {
        Op::Sum | Op::Mean => {
            if let Some(s) = special_sum(line) {
                let s = if op == Op::Mean { s / n } else { s };
                return point(s);
            }
            let (e, abs) = sum(line.iter().copied());
            let bound =
                gamma(d, u) * abs + 2f64.powi(-51) * e.abs() + n * n * 2f64.powi(-105) * abs;
            let (lo, hi) = (e - bound, e + bound);
            if op == Op::Mean {
                (e / n, lo / n, hi / n)
            } else {
                (e, lo, hi)
            }
        }
        Op::SumOfSquares | Op::Norm2 => {
            if line.iter().any(|v| v.is_nan()) {
                return point(f64::NAN);
            }
            if line.iter().any(|v| v.is_infinite()) {
                return point(f64::INFINITY);
            }
            let e = sum_of_squares_exact(line);
            if e.is_infinite() {
                return point(f64::INFINITY); // beyond f64, so beyond either accumulator
            }
            let bound = gamma(d + 1.0, u) * e + n * T::ETA + 2f64.powi(-51) * e;
            let (lo, hi) = ((e - bound).max(0.0), e + bound);
            if op == Op::Norm2 {
                let w = 1.0 + 2f64.powi(-51);
                // √ of the accumulator, which overflows to +inf past its range.
                let (lo, hi) = (T::round_acc(lo), T::round_acc(hi));
                (e.sqrt(), lo.sqrt() / w, hi.sqrt() * w)
            } else {
                (e, lo, hi)
            }
        }
        Op::LogSumExp => {
            if line.iter().any(|v| v.is_nan()) {
                return point(f64::NAN);
            }
            let m = line.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if m.is_infinite() {
                return point(m); // +inf if any +inf; -inf if all are -inf (or none)
            }
            let (s, _) = sum(line.iter().map(|&x| (x - m).exp()));
            let e = m + s.ln();
            let ln_n = n.ln().max(1.0);
            let eps = gamma(d * (4.0 + ln_n), u) + n * T::ETA;
            let bound = 1.01 * eps
                + 2.0 * u * (ln_n + e.abs() + 1.0)
                + 2f64.powi(-50) * (e.abs() + ln_n + 1.0);
            (e, e - bound, e + bound)
        }
        Op::Min | Op::Max | Op::ArgMin | Op::ArgMax => unreachable!("exact ops"),
    }
}

/// What every output of `op` over `x` (laid out as `layout`) must be, in
/// output order; `EmptyReduction` where the kernel must fail.
pub fn expected<T: RefElement>(op: Op, x: &[T], layout: Layout) -> Result<Vec<Expected>> {
    let Layout { outer, len, inner } = layout;
    if len == 0 && layout.outputs() > 0 && T::empty_result(op).is_none() {
        return Err(Error::EmptyReduction { op: op.name() });
    }
    let depth = layout.fold_depth(size_of::<T>());
    let mut out = Vec::with_capacity(layout.outputs());
    for o in 0..outer {
        for i in 0..inner {
            let line: Vec<Value> = (0..len)
                .map(|j| x[(o * len + j) * inner + i].value())
                .collect();
            out.push(expected_line::<T>(op, &line, depth));
        }
    }
    Ok(out)
}

/// The expected result of `op` over one line of values.
fn expected_line<T: RefElement>(op: Op, line: &[Value], depth: u32) -> Expected {
    let ints: Option<Vec<i128>> = line
        .iter()
        .map(|v| match v {
            Value::Int(i) => Some(*i),
            Value::Float(_) => None,
        })
        .collect();
    if let (Some(ints), false) = (ints, T::U > 0.0) {
        return match op {
            Op::Sum => Expected::Int(T::wrap(ints.iter().sum())),
            Op::Min => Expected::Int(ints.iter().copied().min().unwrap_or(0)),
            Op::Max => Expected::Int(ints.iter().copied().max().unwrap_or(0)),
            Op::ArgMin => Expected::Index(arg_extreme(&ints, false, |_| false)),
            Op::ArgMax => Expected::Index(arg_extreme(&ints, true, |_| false)),
            _ => unreachable!("{op} is float-only"),
        };
    }
    let floats: Vec<f64> = line
        .iter()
        .map(|v| match *v {
            Value::Float(f) => f,
            Value::Int(i) => i as f64,
        })
        .collect();
    match op {
        Op::Min => Expected::Exact(T::round_out(extreme(&floats, false))),
        Op::Max => Expected::Exact(T::round_out(extreme(&floats, true))),
        Op::ArgMin => Expected::Index(arg_extreme(&floats, false, f64::is_nan)),
        Op::ArgMax => Expected::Index(arg_extreme(&floats, true, f64::is_nan)),
        _ if floats.is_empty() => {
            let v = match op {
                Op::Mean => f64::NAN,
                Op::LogSumExp => f64::NEG_INFINITY,
                _ => 0.0,
            };
            Expected::Float {
                reference: v,
                lo: v,
                hi: v,
            }
        }
        _ => {
            let (reference, lo, hi) = float_interval::<T>(op, &floats, depth);
            Expected::Float {
                reference,
                lo: T::round_out(lo),
                hi: T::round_out(hi),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(n: usize) -> Layout {
        Layout::new(n, &[n], None).unwrap()
    }

    #[test]
    fn min_orders_negative_zero_first_and_propagates_nan() {
        let e = expected(Op::Min, &[0.0f32, -0.0, 1.0], layout(3)).unwrap();
        assert_eq!(e, [Expected::Exact(-0.0)]);
        assert!(e[0].check(Value::Float(0.0)).is_err());
        let e = expected(Op::Max, &[1.0f32, f32::NAN], layout(2)).unwrap();
        assert!(e[0].check(Value::Float(f64::NAN)).is_ok());
        assert!(e[0].check(Value::Float(1.0)).is_err());
    }

    #[test]
    fn arg_takes_the_first_extreme_and_the_first_nan() {
        let e = expected(
            Op::ArgMax,
            &[1.0f32, 3.0, 3.0, f32::NAN, f32::NAN],
            layout(5),
        );
        assert_eq!(e.unwrap(), [Expected::Index(3)]);
        let e = expected(Op::ArgMin, &[0.0f64, -0.0, -1.0, -1.0], layout(4));
        assert_eq!(e.unwrap(), [Expected::Index(2)]);
    }

    #[test]
    fn integer_sums_wrap_and_empty_min_fails() {
        let e = expected(Op::Sum, &[i32::MAX, 1], layout(2)).unwrap();
        assert_eq!(e, [Expected::Int(i128::from(i32::MIN))]);
        assert!(expected(Op::Min, &[] as &[u32], layout(0)).is_err());
    }

    #[test]
    fn the_sum_interval_is_tight_but_not_empty() {
        let x = [1.0f32, 2.0f32.powi(-24), -1.0];
        let e = expected(Op::Sum, &x, layout(3)).unwrap()[0];
        assert!(e.check(Value::Float(2f64.powi(-24))).is_ok());
        assert!(e.check(Value::Float(0.0)).is_ok()); // one rounding may lose it
        assert!(e.check(Value::Float(1e-3)).is_err());
    }

    #[test]
    fn f16_results_round_like_the_kernel() {
        // 60000 + 60000 overflows f16: the only acceptable result is +inf.
        let e = expected(Op::Sum, &[f16::from_f32(60000.0); 2], layout(2)).unwrap()[0];
        assert!(e.check(Value::Float(f64::INFINITY)).is_ok());
        assert!(e.check(Value::Float(65504.0)).is_err());
    }
}
