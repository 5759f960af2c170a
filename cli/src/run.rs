//! Library operations on `.npy` arrays: what `warpforge run` does, usable from code.
//!
//! ```no_run
//! use warpforge::{Device, reduce::Op};
//! use warpforge_cli::{npy, run};
//! let input = npy::read("x.npy")?;
//! let out = run::reduce_npy(&Device::emulator(), Op::Sum, Some(1), &input, false)?;
//! out.write("y.npy")?;
//! # Ok::<(), run::RunError>(())
//! ```

use crate::npy::{NpyArray, NpyData, NpyError};
use half::{bf16, f16};
use warpforge::reduce::{self, Op, Reduced, Reducible};
use warpforge::{Device, Error};

/// Why a `run` operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Reading or writing a `.npy` file.
    #[error(transparent)]
    Npy(#[from] NpyError),
    /// The operation itself: bad axis, empty input, unsupported dtype, device errors.
    #[error(transparent)]
    Device(#[from] Error),
    /// `--dtype bf16` asked of an input that is not floating point.
    #[error(
        "bf16 computation needs a float input (float16, float32 or float64), but the input is \
         {dtype}: reduce it in its own dtype (drop `--dtype bf16`)"
    )]
    Bf16NeedsFloat {
        /// The input's dtype.
        dtype: &'static str,
    },
}

/// Reduces `input` with `op` on `dev`: the whole array (`axis` `None`, output
/// shape `[]`) or along `axis` (output shape = input shape without that axis).
///
/// The output has the input's dtype, except int64 indices for argmin/argmax.
/// With `as_bf16`, a float input is rounded to bf16 (to nearest, ties to even),
/// reduced in bf16, and the result returned as float32 (`.npy` has no bf16);
/// indices stay int64.
pub fn reduce_npy(
    dev: &Device,
    op: Op,
    axis: Option<usize>,
    input: &NpyArray,
    as_bf16: bool,
) -> Result<NpyArray, RunError> {
    let shape = &input.shape;
    if as_bf16 {
        let x = to_bf16(&input.data).ok_or(RunError::Bf16NeedsFloat {
            dtype: input.data.dtype_name(),
        })?;
        return reduce_typed(dev, op, axis, shape, &x, |v| {
            NpyData::F32(v.into_iter().map(bf16::to_f32).collect())
        });
    }
    match &input.data {
        NpyData::F16(x) => reduce_typed(dev, op, axis, shape, x, NpyData::F16),
        NpyData::F32(x) => reduce_typed(dev, op, axis, shape, x, NpyData::F32),
        NpyData::F64(x) => reduce_typed(dev, op, axis, shape, x, NpyData::F64),
        NpyData::I32(x) => reduce_typed(dev, op, axis, shape, x, NpyData::I32),
        NpyData::I64(x) => reduce_typed(dev, op, axis, shape, x, NpyData::I64),
        NpyData::U32(x) => reduce_typed(dev, op, axis, shape, x, NpyData::U32),
    }
}

/// A float array rounded to bf16 (nearest, ties to even, from the value itself:
/// no double rounding through f32 for float64); `None` for integer arrays.
pub fn to_bf16(data: &NpyData) -> Option<Vec<bf16>> {
    Some(match data {
        // f16 → f32 is exact.
        NpyData::F16(v) => v.iter().map(|&x| bf16::from_f32(f16::to_f32(x))).collect(),
        NpyData::F32(v) => v.iter().map(|&x| bf16::from_f32(x)).collect(),
        NpyData::F64(v) => v.iter().map(|&x| bf16_from_f64(x)).collect(),
        NpyData::I32(_) | NpyData::I64(_) | NpyData::U32(_) => return None,
    })
}

/// `x` rounded to the nearest bf16, ties to even. (`half::bf16::from_f64`
/// drops the low 32 bits of the mantissa first, so it can round the wrong way.)
/// Rounding to f32 with round-to-odd and then to bf16 rounds once: f32 keeps
/// more than two bits beyond bf16's, and the odd last bit records inexactness.
pub fn bf16_from_f64(x: f64) -> bf16 {
    let mut t = x as f32;
    if !x.is_nan() && f64::from(t) != x {
        if f64::from(t).abs() > x.abs() {
            // Rounded away from zero (possibly to ±inf): step back toward zero.
            t = f32::from_bits(t.to_bits() - 1);
        }
        t = f32::from_bits(t.to_bits() | 1);
    }
    bf16::from_f32(t)
}

fn reduce_typed<T: Reducible>(
    dev: &Device,
    op: Op,
    axis: Option<usize>,
    shape: &[usize],
    x: &[T],
    values: impl FnOnce(Vec<T>) -> NpyData,
) -> Result<NpyArray, RunError> {
    let buf = dev.upload(x)?;
    let data = match reduce::reduce(op, &buf, shape, axis)? {
        Reduced::Values(v) => values(v.to_host()?),
        Reduced::Indices(i) => NpyData::I64(i.to_host()?),
    };
    let shape = reduce::output_shape(shape, axis);
    Ok(NpyArray { shape, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_once_to_nearest_even() {
        // 1 + 2^-8 + 2^-30: above the halfway point between bf16 1 and 1 + 2^-7, so it
        // rounds up; through f32 it would first become the tie 1 + 2^-8 and round to 1.
        let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-30);
        let b = to_bf16(&NpyData::F64(vec![x, 1.0 + 2f64.powi(-8)])).unwrap();
        assert_eq!(b[0].to_f32(), 1.0 + 2f32.powi(-7));
        assert_eq!(b[1].to_f32(), 1.0, "a tie goes to the even neighbour");
        assert_eq!(bf16_from_f64(x), bf16::from_f32(1.0 + 2f32.powi(-7)));
        let b = to_bf16(&NpyData::F16(vec![f16::from_f32(3.0), f16::from_f32(-0.5)])).unwrap();
        assert_eq!(b, [bf16::from_f32(3.0), bf16::from_f32(-0.5)]);
        assert!(to_bf16(&NpyData::I32(vec![1])).is_none());
    }

    /// Nearest, ties to even, against the two neighbours, over deterministic
    /// pseudo-random f64 bit patterns and the edge cases.
    #[test]
    fn bf16_from_f64_is_correctly_rounded() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut xs: Vec<f64> = vec![
            0.0,
            -0.0,
            1.0 + 2f64.powi(-8),
            1.0 + 2f64.powi(-8) + 2f64.powi(-60),
            f64::from(f32::MAX),
            f64::MAX,
            -f64::MAX,
            f64::MIN_POSITIVE,
            2f64.powi(-133) * 1.5,
            2f64.powi(-134),
            2f64.powi(-134) * (1.0 + 2f64.powi(-40)),
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for _ in 0..20_000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Exponents around bf16's range, random mantissas and signs.
            let exp = 1023 - 140 + (state >> 40) % 280;
            let bits = (state & 0x800f_ffff_ffff_ffff) | (exp << 52);
            xs.push(f64::from_bits(bits));
            // Exact ties and near-ties: a bf16 plus half an ulp, ± a hair.
            let b = f64::from(bf16::from_bits((state >> 16) as u16 & 0x7f7f).to_f32());
            let half_ulp = (b * 2f64.powi(-8)).abs();
            xs.extend([b + half_ulp, b + half_ulp * (1.0 + 2f64.powi(-30))]);
        }
        for x in xs {
            let b = bf16_from_f64(x);
            if x.is_infinite() {
                assert_eq!(f64::from(b.to_f32()), x);
                continue;
            }
            let bv = f64::from(b.to_f32());
            if bv.is_infinite() {
                // Only past the largest bf16 plus half its ulp.
                let max = f64::from(bf16::MAX.to_f32());
                assert!(x.abs() >= max + max * 2f64.powi(-9), "{x:e} -> {bv}");
                continue;
            }
            // The neighbours: one step away from zero, one toward (or across) it.
            let (sign, mag) = (b.to_bits() & 0x8000, b.to_bits() & 0x7fff);
            let toward = match mag {
                0 => (sign ^ 0x8000) | 1,
                _ => sign | (mag - 1),
            };
            for n in [sign | (mag + 1), toward].map(bf16::from_bits) {
                let nv = f64::from(n.to_f32());
                if nv.is_infinite() {
                    continue;
                }
                let (d, dn) = ((x - bv).abs(), (x - nv).abs());
                assert!(d <= dn, "{x:e} -> {bv:e}, but {nv:e} is nearer");
                if d == dn {
                    assert_eq!(b.to_bits() & 1, 0, "{x:e}: tie went to odd {bv:e}");
                }
            }
        }
    }

    #[test]
    fn bf16_of_an_integer_input_is_refused() {
        let input = NpyArray {
            shape: vec![2],
            data: NpyData::I64(vec![1, 2]),
        };
        let e = reduce_npy(&Device::emulator(), Op::Sum, None, &input, true).unwrap_err();
        assert!(
            matches!(e, RunError::Bf16NeedsFloat { dtype: "int64" }),
            "{e}"
        );
    }
}
