//! Warp-synchronous shuffles and reductions over the 32 lanes of a warp.
//!
//! Every collective takes the lanes that take part as a `mask` (bit i = lane i),
//! like CUDA's `__shfl_*_sync`; [`FULL_MASK`] is all 32. The full-warp
//! reductions (`sum_f32`, `reduce`, …) have explicit-mask forms (`sum_f32_in`,
//! `reduce_in`, and the `redux.sync` integer ones `reduce_add`/`_min`/`_max`/
//! `_and`/`_or`/`_xor`). Every lane named in the
//! mask must call the same function with the same mask. The emulator checks
//! this and reports `Fault::WarpMask` naming the lane that did not join. On
//! the GPU a collective whose mask names a lane that does not execute it is
//! undefined (it may hang or return garbage): that is the one precondition of
//! these safe functions that the types cannot check and only the kernel's
//! control flow upholds, as with a block barrier.

use crate::arch::{self, MatchMode, ReduxOp, ShuffleMode, VoteMode};

/// All 32 lanes.
pub const FULL_MASK: u32 = 0xffff_ffff;

/// Values a warp can exchange: 32- and 64-bit numbers (64-bit ones as two 32-bit shuffles).
pub trait ShuffleValue: Copy {
    /// Exchanges `self` in `mode` with `arg` among the lanes of `mask`.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn shuffle(self, mode: ShuffleMode, arg: u32, mask: u32) -> Self;
}

macro_rules! shuffle_32 {
    ($($t:ty),*) => { $(
        impl ShuffleValue for $t {
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
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
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
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

/// Lane `src_lane & 31`'s value (`__shfl_sync`, `shfl.sync.idx`).
///
/// Only the low 5 bits of `src_lane` are used (PTX ISA `shfl.sync`:
/// `bval = b[4:0]`): `shuffle_idx(mask, v, 33)` reads lane 1. The lane read
/// must be in `mask`: a value read from another lane is undefined on the GPU,
/// and the emulator reports `Fault::WarpMask`.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn shuffle_idx<T: ShuffleValue>(mask: u32, value: T, src_lane: u32) -> T {
    value.shuffle(ShuffleMode::Idx, src_lane, mask)
}

/// Lane `lane - (delta & 31)`'s value (`__shfl_up_sync`, `shfl.sync.up`);
/// lanes below `delta & 31` keep their own.
///
/// Only the low 5 bits of `delta` are used: `shuffle_up(mask, v, 33)` is up
/// by 1 and `shuffle_up(mask, v, 32)` up by 0 (every lane keeps its own). The
/// lane read must be in `mask` (see [`shuffle_idx`]).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn shuffle_up<T: ShuffleValue>(mask: u32, value: T, delta: u32) -> T {
    value.shuffle(ShuffleMode::Up, delta, mask)
}

/// Lane `lane + (delta & 31)`'s value (`__shfl_down_sync`, `shfl.sync.down`);
/// lanes above `31 - (delta & 31)` keep their own.
///
/// Only the low 5 bits of `delta` are used: `shuffle_down(mask, v, 33)` is
/// down by 1 and `shuffle_down(mask, v, 32)` down by 0. The lane read must be
/// in `mask` (see [`shuffle_idx`]).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn shuffle_down<T: ShuffleValue>(mask: u32, value: T, delta: u32) -> T {
    value.shuffle(ShuffleMode::Down, delta, mask)
}

/// Lane `lane ^ (lane_mask & 31)`'s value (`__shfl_xor_sync`,
/// `shfl.sync.bfly`), the butterfly step. Every lane is in range.
///
/// Only the low 5 bits of `lane_mask` are used: `shuffle_xor(mask, v, 33)`
/// swaps neighbours like `lane_mask` 1. The lane read must be in `mask` (see
/// [`shuffle_idx`]).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn shuffle_xor<T: ShuffleValue>(mask: u32, value: T, lane_mask: u32) -> T {
    value.shuffle(ShuffleMode::Xor, lane_mask, mask)
}

/// Whether `predicate` is true in every lane of `mask` (`__all_sync`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn all(mask: u32, predicate: bool) -> bool {
    arch::vote(VoteMode::All, predicate, mask) != 0
}

/// Whether `predicate` is true in any lane of `mask` (`__any_sync`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn any(mask: u32, predicate: bool) -> bool {
    arch::vote(VoteMode::Any, predicate, mask) != 0
}

/// One lane of `mask`, the same for all of them: `true` in that lane only
/// (`elect.sync`, sm_90; the lane that issues a TMA copy or an
/// `arrive_expect_tx` for its warp). Every lane of `mask` calls it together.
/// The hardware picks the lane deterministically but does not say which:
/// the emulator picks one by the block's seeded interleaving, so a kernel
/// that assumes lane 0 fails there rather than on some future GPU.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn elect_one(mask: u32) -> bool {
    arch::elect_sync(mask)
}

/// The lanes of `mask` wait for each other (`bar.warp.sync`, CUDA's
/// `__syncwarp`), and each one's shared- and global-memory accesses before
/// it are ordered before the others' after it: lanes that exchange data
/// through shared memory (a warp's staging tile) write, sync, then read.
/// Every lane of `mask` calls it together (the emulator reports a lane that
/// does not as `Fault::WarpMask`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn sync(mask: u32) {
    arch::warp_sync(mask)
}

/// Bit i is set iff lane i is in `mask` and its `predicate` is true (`__ballot_sync`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn ballot(mask: u32, predicate: bool) -> u32 {
    arch::vote(VoteMode::Ballot, predicate, mask)
}

/// Combines `value` over all 32 lanes with `op` by a butterfly (xor) tree:
/// five shuffles, and every lane gets the result.
///
/// The tree has a fixed shape, so the result is bit-for-bit the same on every
/// run, on the GPU and in the emulator, even for non-associative `op` (floats)
/// — except a NaN's bits where `op` is float arithmetic of the kernel's own,
/// which the emulator runs on the host FPU (`crate::num`, "NaN results").
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
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

/// Sum over the 32 lanes (see [`reduce`]); a NaN sum is the canonical
/// `0x7fff_ffff`, as `add.f32` writes it (`crate::num`, "NaN results").
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn sum_f32(value: f32) -> f32 {
    reduce(value, |a, b| arch::f32_op(a + b))
}

/// Largest value over the 32 lanes; NaN if any lane holds NaN (one of the
/// lanes' NaNs, bits unchanged: this selects, it does not compute).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn max_f32(value: f32) -> f32 {
    reduce(value, |a, b| if a.is_nan() || a > b { a } else { b })
}

/// Smallest value over the 32 lanes; NaN if any lane holds NaN (one of the
/// lanes' NaNs, bits unchanged).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn min_f32(value: f32) -> f32 {
    reduce(value, |a, b| if a.is_nan() || a < b { a } else { b })
}

/// Wrapping sum over the 32 lanes (one `redux.sync`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn sum_i32(value: i32) -> i32 {
    reduce_add(FULL_MASK, value)
}

/// Largest value over the 32 lanes (one `redux.sync`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn max_i32(value: i32) -> i32 {
    reduce_max(FULL_MASK, value)
}

/// Smallest value over the 32 lanes (one `redux.sync`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn min_i32(value: i32) -> i32 {
    reduce_min(FULL_MASK, value)
}

/// Combines `value` over the lanes of `mask` with `op`, in ascending lane
/// order: `op(op(v[l0], v[l1]), v[l2])…` for the set lanes l0 < l1 < ….
/// Every lane of the mask gets the same result (one shuffle per lane of the
/// mask). The explicit-mask form of [`reduce`], for partial warps.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn reduce_in<T: ShuffleValue>(mask: u32, value: T, op: impl Fn(T, T) -> T) -> T {
    let mut rest = mask;
    let first = rest.trailing_zeros();
    rest &= rest.wrapping_sub(1);
    let mut acc = shuffle_idx(mask, value, first);
    while rest != 0 {
        let lane = rest.trailing_zeros();
        rest &= rest - 1;
        acc = op(acc, shuffle_idx(mask, value, lane));
    }
    acc
}

/// Sum over the lanes of `mask`, in ascending lane order (see [`reduce_in`]);
/// a NaN sum is the canonical `0x7fff_ffff`, as in [`sum_f32`].
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn sum_f32_in(mask: u32, value: f32) -> f32 {
    reduce_in(mask, value, |a, b| arch::f32_op(a + b))
}

/// Largest value over the lanes of `mask`; NaN if any of them holds NaN (one
/// of their NaNs, bits unchanged).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn max_f32_in(mask: u32, value: f32) -> f32 {
    reduce_in(mask, value, |a, b| if a.is_nan() || a > b { a } else { b })
}

/// Smallest value over the lanes of `mask`; NaN if any of them holds NaN (one
/// of their NaNs, bits unchanged).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn min_f32_in(mask: u32, value: f32) -> f32 {
    reduce_in(mask, value, |a, b| if a.is_nan() || a < b { a } else { b })
}

/// 32-bit integers with a one-instruction warp reduction (`redux.sync`, sm_80).
pub trait ReduxValue: Copy {
    #[doc(hidden)]
    const MIN: ReduxOp;
    #[doc(hidden)]
    const MAX: ReduxOp;
    #[doc(hidden)]
    fn to_bits(self) -> u32;
    #[doc(hidden)]
    fn from_bits(bits: u32) -> Self;
}

impl ReduxValue for u32 {
    const MIN: ReduxOp = ReduxOp::MinU32;
    const MAX: ReduxOp = ReduxOp::MaxU32;
    #[inline(always)]
    fn to_bits(self) -> u32 {
        self
    }
    #[inline(always)]
    fn from_bits(bits: u32) -> Self {
        bits
    }
}

impl ReduxValue for i32 {
    const MIN: ReduxOp = ReduxOp::MinI32;
    const MAX: ReduxOp = ReduxOp::MaxI32;
    #[inline(always)]
    fn to_bits(self) -> u32 {
        self as u32
    }
    #[inline(always)]
    fn from_bits(bits: u32) -> Self {
        bits as i32
    }
}

/// Wrapping sum over the lanes of `mask` (`__reduce_add_sync`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn reduce_add<T: ReduxValue>(mask: u32, value: T) -> T {
    T::from_bits(arch::redux(ReduxOp::Add, value.to_bits(), mask))
}

/// Smallest value over the lanes of `mask` (`__reduce_min_sync`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn reduce_min<T: ReduxValue>(mask: u32, value: T) -> T {
    T::from_bits(arch::redux(T::MIN, value.to_bits(), mask))
}

/// Largest value over the lanes of `mask` (`__reduce_max_sync`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn reduce_max<T: ReduxValue>(mask: u32, value: T) -> T {
    T::from_bits(arch::redux(T::MAX, value.to_bits(), mask))
}

/// Bitwise and over the lanes of `mask` (`__reduce_and_sync`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn reduce_and(mask: u32, value: u32) -> u32 {
    arch::redux(ReduxOp::And, value, mask)
}

/// Bitwise or over the lanes of `mask` (`__reduce_or_sync`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn reduce_or(mask: u32, value: u32) -> u32 {
    arch::redux(ReduxOp::Or, value, mask)
}

/// Bitwise xor over the lanes of `mask` (`__reduce_xor_sync`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn reduce_xor(mask: u32, value: u32) -> u32 {
    arch::redux(ReduxOp::Xor, value, mask)
}

/// Values `match_any`/`match_all` compare, by their bits (32 or 64 of them).
pub trait MatchValue: Copy {
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[doc(hidden)]
    fn match_sync(self, mode: MatchMode, mask: u32) -> u32;
}

macro_rules! match_value {
    ($f:ident, $bits:ty: $($t:ty),*) => { $(
        impl MatchValue for $t {
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            fn match_sync(self, mode: MatchMode, mask: u32) -> u32 {
                arch::$f(mode, <$bits>::from_ne_bytes(self.to_ne_bytes()), mask)
            }
        }
    )* };
}
match_value!(match_u32, u32: u32, i32, f32);
match_value!(match_u64, u64: u64, i64, f64);

/// The lanes of `mask` whose `value` has the same bits as this lane's
/// (`__match_any_sync`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn match_any<T: MatchValue>(mask: u32, value: T) -> u32 {
    value.match_sync(MatchMode::Any, mask)
}

/// `Some(mask)` if every lane of `mask` holds the same bits, else `None`
/// (`__match_all_sync`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn match_all<T: MatchValue>(mask: u32, value: T) -> Option<u32> {
    match value.match_sync(MatchMode::All, mask) {
        0 => None,
        m => Some(m),
    }
}

/// The lanes of the warp executing this call together (`__activemask`): a
/// hint for building a mask, not a synchronisation. In the emulator, the lanes
/// of the warp that wait at this same call site when none can run further.
#[inline(always)]
#[track_caller]
pub fn active_mask() -> u32 {
    arch::active_mask()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::{LaunchShape, launch};
    use crate::{Dim3, thread};
    use std::sync::Mutex;

    /// Lanes that hand values to each other through shared memory: each
    /// writes its word, `sync`s, reads its neighbour's, `sync`s, and writes
    /// again. With the syncs the race detector sees every access ordered
    /// and the values arrive, in both warps; without the first, the read is
    /// a `Fault::SharedRace` naming the writer.
    #[test]
    fn sync_orders_a_warps_shared_accesses() {
        let run = |synced: bool| {
            let got = Mutex::new(Vec::new());
            let shape = LaunchShape {
                grid: Dim3::x(1),
                block: Dim3::x(64),
                dynamic_shared_bytes: 64 * 4,
            };
            let result = launch("warp_sync", shape, &|| {
                let tile = crate::shared::array::<u32, 64>();
                let me = thread::linear_thread_id() as usize;
                let warp = me / 32 * 32;
                for round in 0..2u32 {
                    tile.store(me, 100 * round + me as u32);
                    if synced {
                        sync(FULL_MASK);
                    }
                    let next = warp + (me + 1) % 32;
                    got.lock().unwrap().push((round, me, tile.load(next)));
                    sync(FULL_MASK);
                }
            });
            (result, got.into_inner().unwrap())
        };
        let (result, mut got) = run(true);
        result.unwrap();
        got.sort_unstable();
        let want: Vec<_> = (0..2u32)
            .flat_map(|round| {
                (0..64usize).map(move |me| {
                    (
                        round,
                        me,
                        100 * round + (me / 32 * 32 + (me + 1) % 32) as u32,
                    )
                })
            })
            .collect();
        assert_eq!(got, want);
        let (result, _) = run(false);
        let err = result.unwrap_err();
        assert!(
            matches!(err.fault, crate::emu::Fault::SharedRace { .. }),
            "{err}"
        );
    }

    /// `elect_one` is true in exactly one lane of its mask, in every warp:
    /// the full warp, and 8 lanes of it calling with their own mask.
    #[test]
    fn elect_one_elects_one_lane_of_the_mask() {
        let elected = Mutex::new(Vec::new());
        let shape = LaunchShape {
            grid: Dim3::x(1),
            block: Dim3::x(64),
            dynamic_shared_bytes: 0,
        };
        launch("elect", shape, &|| {
            let (warp, lane) = (thread::linear_thread_id() / 32, thread::lane_id());
            if elect_one(FULL_MASK) {
                elected.lock().unwrap().push(("full", warp, lane));
            }
            if (4..12).contains(&lane) && elect_one(0x0ff0) {
                elected.lock().unwrap().push(("part", warp, lane));
            }
        })
        .unwrap();
        let mut elected = elected.into_inner().unwrap();
        elected.sort_unstable();
        let of = |what: &str, warp: u32| {
            elected
                .iter()
                .filter(|&&(w, k, _)| w == what && k == warp)
                .map(|&(_, _, lane)| lane)
                .collect::<Vec<_>>()
        };
        for warp in 0..2 {
            assert_eq!(of("full", warp).len(), 1, "{elected:?}");
            let part = of("part", warp);
            assert!(part.len() == 1 && (4..12).contains(&part[0]), "{elected:?}");
        }
    }
}
