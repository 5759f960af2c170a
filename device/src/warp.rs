//! Warp-synchronous shuffles and reductions over the 32 lanes of a warp.
//!
//! Every function takes the lanes that take part as a `mask` (bit i = lane i),
//! like CUDA's `__shfl_*_sync`; [`FULL_MASK`] is all 32. Every lane named in the
//! mask must call the same function with the same mask. The emulator checks
//! this and reports `Fault::WarpMask` naming the lane that did not join.

use crate::arch::{self, ShuffleMode, VoteMode};

/// All 32 lanes.
pub const FULL_MASK: u32 = 0xffff_ffff;

/// Values a warp can exchange: 32- and 64-bit numbers (64-bit ones as two 32-bit shuffles).
pub trait ShuffleValue: Copy {
    /// Exchanges `self` in `mode` with `arg` among the lanes of `mask`.
    fn shuffle(self, mode: ShuffleMode, arg: u32, mask: u32) -> Self;
}

macro_rules! shuffle_32 {
    ($($t:ty),*) => { $(
        impl ShuffleValue for $t {
            #[inline(always)]
            fn shuffle(self, mode: ShuffleMode, arg: u32, mask: u32) -> Self {
                <$t>::from_ne_bytes(arch::shuffle_u32(mode, u32::from_ne_bytes(self.to_ne_bytes()), arg, mask).to_ne_bytes())
            }
        }
    )* };
}
macro_rules! shuffle_64 {
    ($($t:ty),*) => { $(
        impl ShuffleValue for $t {
            #[inline(always)]
            fn shuffle(self, mode: ShuffleMode, arg: u32, mask: u32) -> Self {
                let bits = u64::from_ne_bytes(self.to_ne_bytes());
                let lo = arch::shuffle_u32(mode, bits as u32, arg, mask);
                let hi = arch::shuffle_u32(mode, (bits >> 32) as u32, arg, mask);
                <$t>::from_ne_bytes((u64::from(hi) << 32 | u64::from(lo)).to_ne_bytes())
            }
        }
    )* };
}
shuffle_32!(u32, i32, f32);
shuffle_64!(u64, i64, f64);

pub use crate::arch::ShuffleMode as Mode;

/// Lane `src_lane`'s value (`__shfl_sync`).
#[inline(always)]
pub fn shuffle_idx<T: ShuffleValue>(mask: u32, value: T, src_lane: u32) -> T {
    value.shuffle(ShuffleMode::Idx, src_lane, mask)
}

/// Lane `lane - delta`'s value; lanes below `delta` keep their own (`__shfl_up_sync`).
#[inline(always)]
pub fn shuffle_up<T: ShuffleValue>(mask: u32, value: T, delta: u32) -> T {
    value.shuffle(ShuffleMode::Up, delta, mask)
}

/// Lane `lane + delta`'s value; lanes above `31 - delta` keep their own (`__shfl_down_sync`).
#[inline(always)]
pub fn shuffle_down<T: ShuffleValue>(mask: u32, value: T, delta: u32) -> T {
    value.shuffle(ShuffleMode::Down, delta, mask)
}

/// Lane `lane ^ lane_mask`'s value (`__shfl_xor_sync`), the butterfly step.
#[inline(always)]
pub fn shuffle_xor<T: ShuffleValue>(mask: u32, value: T, lane_mask: u32) -> T {
    value.shuffle(ShuffleMode::Xor, lane_mask, mask)
}

/// Whether `predicate` is true in every lane of `mask` (`__all_sync`).
#[inline(always)]
pub fn all(mask: u32, predicate: bool) -> bool {
    arch::vote(VoteMode::All, predicate, mask) != 0
}

/// Whether `predicate` is true in any lane of `mask` (`__any_sync`).
#[inline(always)]
pub fn any(mask: u32, predicate: bool) -> bool {
    arch::vote(VoteMode::Any, predicate, mask) != 0
}

/// Bit i is set iff lane i is in `mask` and its `predicate` is true (`__ballot_sync`).
#[inline(always)]
pub fn ballot(mask: u32, predicate: bool) -> u32 {
    arch::vote(VoteMode::Ballot, predicate, mask)
}

/// Combines `value` over all 32 lanes with `op` by a butterfly (xor) tree:
/// five shuffles, and every lane gets the result.
///
/// The tree has a fixed shape, so the result is bit-for-bit the same on every
/// run, on the GPU and in the emulator, even for non-associative `op` (floats).
#[inline(always)]
pub fn reduce<T: ShuffleValue>(value: T, op: impl Fn(T, T) -> T) -> T {
    let mut v = value;
    let mut offset = 16;
    while offset > 0 {
        v = op(v, shuffle_xor(FULL_MASK, v, offset));
        offset /= 2;
    }
    v
}

/// Sum over the 32 lanes (see [`reduce`]).
#[inline(always)]
pub fn sum_f32(value: f32) -> f32 {
    reduce(value, |a, b| a + b)
}

/// Largest value over the 32 lanes; NaN if any lane holds NaN.
#[inline(always)]
pub fn max_f32(value: f32) -> f32 {
    reduce(value, |a, b| if a.is_nan() || a > b { a } else { b })
}

/// Smallest value over the 32 lanes; NaN if any lane holds NaN.
#[inline(always)]
pub fn min_f32(value: f32) -> f32 {
    reduce(value, |a, b| if a.is_nan() || a < b { a } else { b })
}

/// Wrapping sum over the 32 lanes.
#[inline(always)]
pub fn sum_i32(value: i32) -> i32 {
    reduce(value, i32::wrapping_add)
}

/// Largest value over the 32 lanes.
#[inline(always)]
pub fn max_i32(value: i32) -> i32 {
    reduce(value, i32::max)
}

/// Smallest value over the 32 lanes.
#[inline(always)]
pub fn min_i32(value: i32) -> i32 {
    reduce(value, i32::min)
}
