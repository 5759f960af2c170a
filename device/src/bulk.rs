//! Bulk asynchronous copies (`cp.async.bulk`, sm_90): the Tensor Memory
//! Accelerator's one-dimensional form. One thread hands the copy engine a
//! contiguous run of global memory and a shared destination; the bytes land
//! some time later, and the engine counts them on an [`MBarrier`]'s
//! transaction count (`complete_tx`). The threads that read the destination
//! wait on that barrier's phase first, which completes only once its
//! expected arrivals have come *and* every byte it was told to expect has
//! landed.
//!
//! The protocol, one stage of a producer/consumer ring:
//!
//! 1. the producer thread arrives on the stage's "full" barrier expecting the
//!    bytes ([`MBarrier::arrive_expect_tx`]) and issues the copies
//!    ([`BulkSource::copy_to_shared`]), each counting its bytes there;
//! 2. the consumers [`MBarrier::wait`] for that phase, then read the stage.
//!
//! What the types and checks guarantee: a copy reads only inside its source
//! slice and writes only inside its shared tile (checked once per copy: the
//! run's bounds, 16-byte alignment of both ends and its size, which the
//! instruction requires, a fault otherwise); the source's base alignment is
//! checked once, when the [`BulkSource`] is made. What only the kernel's
//! protocol upholds, as for every mbarrier: that a phase expects exactly the
//! bytes its copies deliver, and that nobody touches a destination before
//! waiting. The emulator checks both: it delivers a copy only when a wait on
//! its barrier would otherwise find the phase incomplete, and until then any
//! access to the destination is `Fault::BulkCopyPending`, naming the thread
//! that issued the copy; a read after delivery by a thread that did not wait
//! is a `Fault::SharedRace` (the delivery's writes are ordered by the
//! barrier, as the copy engine's `complete_tx` releases them); a phase whose
//! bytes never all arrive is a `Fault::SpinDeadlock` naming the barrier and
//! its pending tx-count.
//!
//! On the GPU: `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`
//! (PTX 8.0, sm_90); a shared::cta address is a shared::cluster address of
//! the block itself, so no cluster is needed.

use crate::Global;
use crate::arch;
use crate::mbarrier::{MAX_COUNT, MBarrier};
use crate::shared::{SharedElement, SharedTile};

/// The alignment, in bytes, of a bulk copy's source, destination and size.
pub const ALIGN: usize = 16;

/// A [`Global`] input whose start is 16-byte aligned (checked once, by
/// [`BulkSource::new`]): the source of bulk copies into shared memory. A
/// `Global`, not a `&[T]`: the instruction reads the global state space,
/// and only a `Global` is known by its type to be there.
#[derive(Clone, Copy)]
pub struct BulkSource<'a, T> {
    src: Global<'a, T>,
}

impl<'a, T: SharedElement> BulkSource<'a, T> {
    /// `src` as a bulk-copy source, if it starts on a 16-byte boundary
    /// (`None` otherwise: a buffer at an odd offset, for which a kernel
    /// takes its plain path).
    #[inline(always)]
    pub fn new(src: Global<'a, T>) -> Option<Self> {
        (src.as_ptr() as usize)
            .is_multiple_of(ALIGN)
            .then_some(BulkSource { src })
    }

    /// Elements in the source.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.src.len()
    }

    /// Whether the source is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    /// Issues the copy of `src[start .. start + N]` into `dst`, whose
    /// `N · size_of::<T>()` bytes complete on `bar`'s current phase. Called
    /// by one thread (the others of a warp skip it: e.g. under
    /// [`warp::elect_one`](crate::warp::elect_one)); the phase must expect
    /// the bytes ([`MBarrier::arrive_expect_tx`] or
    /// [`MBarrier::expect_tx`]).
    ///
    /// Panics (a trap naming the call on the GPU) if the run leaves the
    /// source, if `start` is not on a 16-byte boundary, or if `dst` does not
    /// start on one. The size must be a multiple of 16 bytes and at most
    /// [`MAX_COUNT`] bytes (a compile-time error otherwise).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn copy_to_shared<const N: usize>(
        &self,
        start: usize,
        dst: SharedTile<T, N>,
        bar: MBarrier,
    ) {
        const {
            assert!(
                (N * size_of::<T>()).is_multiple_of(ALIGN) && N > 0,
                "a bulk copy moves a positive multiple of 16 bytes"
            );
            assert!(
                N * size_of::<T>() <= MAX_COUNT as usize,
                "a bulk copy moves at most 2^20 - 1 bytes (an mbarrier's tx-count)"
            );
        };
        let Some(run) = start
            .checked_add(N)
            .and_then(|end| self.src.get_range(start..end))
        else {
            panic!("BulkSource::copy_to_shared: the run leaves the source slice")
        };
        assert!(
            (start * size_of::<T>()).is_multiple_of(ALIGN),
            "BulkSource::copy_to_shared: the run must start on a 16-byte boundary"
        );
        let to = arch::shared_addr(dst.addr(0) as *const u8);
        assert!(
            dst.addr(0).is_multiple_of(ALIGN),
            "BulkSource::copy_to_shared: the shared tile must start on a 16-byte boundary"
        );
        // SAFETY: `run` is `N · size_of::<T>()` readable bytes of global
        // memory (a `Global`), 16-byte aligned (the source's start, checked by `new`,
        // plus a multiple of 16); `to` is the tile's `N` elements of shared
        // memory, 16-byte aligned (checked); the size is a positive multiple
        // of 16 (const-checked); `bar` is a live barrier (an `MBarrier`
        // exists only between `MBarriers::init` and `invalidate`).
        unsafe {
            arch::bulk_copy_to_shared(
                to,
                run.as_ptr().cast::<u8>(),
                (N * size_of::<T>()) as u32,
                bar.addr(),
            )
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::{EmuError, Fault, LaunchShape, MbarrierProblem, launch};
    use crate::mbarrier::{MBarriers, Phase};
    use crate::{Dim3, shared, thread};
    use std::sync::Mutex;

    /// Items through the ring, each 64 `u32`s (256 bytes) in two copies.
    const ITEMS: usize = 6;
    /// Two stages of 64 `u32`s, then four barriers.
    const SHARED: usize = 2 * 64 * 4 + 4 * 8;

    /// How [`ring`] misbehaves, if it does.
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Misstep {
        None,
        /// The consumers read a stage before waiting for it to be full.
        ReadBeforeWait,
        /// The producer expects 256 bytes a stage but copies only the first half.
        ShortCopy,
        /// The consumers arrive on "empty" before reading the stage (so the
        /// refill is not ordered after their reads).
        ArriveBeforeRead,
        /// The second half's copy starts 4 bytes into its run (not on 16).
        Misaligned,
        /// The last item's second half reads past the source.
        PastTheEnd,
    }

    /// A two-stage ring fed by bulk copies: thread 0 (the producer) waits
    /// for stage `i % 2` to be empty, arrives on its "full" barrier
    /// expecting 256 bytes, and copies item `i` of `src` there in two
    /// 128-byte copies; warp 1 (the consumers) waits for "full", each lane
    /// reads elements `lane` and `lane + 32`, and arrives on "empty". What
    /// each consumer lane received, in order.
    fn ring(misstep: Misstep) -> Result<Vec<Vec<u32>>, Box<EmuError>> {
        let src: Vec<u32> = (0..ITEMS as u32 * 64).map(|i| i * 7 + 3).collect();
        // A source 16-byte aligned for sure (a `Vec<u32>` is only 4-aligned).
        let mut backing = vec![0u128; src.len() / 4 + 1];
        // SAFETY: `backing` holds at least `src.len()` u32s.
        let words = unsafe {
            core::slice::from_raw_parts_mut(backing.as_mut_ptr().cast::<u32>(), src.len())
        };
        words.copy_from_slice(&src);
        let len = if misstep == Misstep::PastTheEnd {
            src.len() - 16
        } else {
            src.len()
        };
        // SAFETY: `words` lives, unwritten, through the launch; in the
        // emulator any host memory is global memory.
        let words = unsafe { Global::from_raw(words.as_ptr(), len) };
        let got = Mutex::new(vec![Vec::new(); 32]);
        let shape = LaunchShape {
            grid: Dim3::x(1),
            block: Dim3::x(64),
            dynamic_shared_bytes: SHARED,
        };
        launch("bulk_ring", shape, &|| {
            let lo0 = shared::array::<u32, 32>();
            let hi0 = lo0.after::<u32, 32>();
            let lo1 = hi0.after::<u32, 32>();
            let hi1 = lo1.after::<u32, 32>();
            let halves = [(lo0, hi0), (lo1, hi1)];
            let bars = MBarriers::init(hi1.after::<u64, 4>(), [1, 1, 32, 32]);
            let (full, empty) = ([bars.get(0), bars.get(1)], [bars.get(2), bars.get(3)]);
            let source = BulkSource::new(words).unwrap();
            let lane = thread::lane_id() as usize;
            if thread::linear_thread_id() == 0 {
                let mut phase = [Phase::BEFORE_FIRST; 2];
                for i in 0..ITEMS {
                    let s = i % 2;
                    empty[s].wait(&mut phase[s]);
                    full[s].arrive_expect_tx(256);
                    let (lo, hi) = halves[s];
                    source.copy_to_shared(64 * i, lo, full[s]);
                    let second = if misstep == Misstep::Misaligned {
                        64 * i + 33
                    } else {
                        64 * i + 32
                    };
                    if misstep != Misstep::ShortCopy {
                        source.copy_to_shared(second, hi, full[s]);
                    }
                }
            } else if thread::linear_thread_id() >= 32 {
                let mut phase = [Phase::FIRST; 2];
                let mut mine = Vec::new();
                for i in 0..ITEMS {
                    let s = i % 2;
                    let (lo, hi) = halves[s];
                    if misstep == Misstep::ReadBeforeWait {
                        mine.push(lo.load(lane));
                    }
                    full[s].wait(&mut phase[s]);
                    if misstep == Misstep::ArriveBeforeRead {
                        empty[s].arrive();
                    }
                    mine.push(lo.load(lane));
                    mine.push(hi.load(lane));
                    if misstep != Misstep::ArriveBeforeRead {
                        empty[s].arrive();
                    }
                }
                got.lock().unwrap()[lane] = mine;
            }
            bars.invalidate();
        })?;
        Ok(got.into_inner().unwrap())
    }

    /// Every consumer lane receives both its elements of every item, in
    /// order, through copies that land only when a wait needs them; the
    /// race detector, on, finds the barriers' edges order every copy after
    /// the reads of the stage's previous item and before its own reads.
    #[test]
    fn a_ring_fed_by_bulk_copies_delivers_every_item() {
        let got = ring(Misstep::None).unwrap();
        for (lane, items) in got.iter().enumerate() {
            let want: Vec<u32> = (0..ITEMS as u32)
                .flat_map(|i| [64 * i + lane as u32, 64 * i + 32 + lane as u32])
                .map(|e| e * 7 + 3)
                .collect();
            assert_eq!(items, &want, "consumer lane {lane}");
        }
    }

    /// The planted twins: a read before the "full" wait touches bytes not
    /// landed (or, once another lane's wait landed them, races with the
    /// copy); readers that arrive on "empty" before reading race with the
    /// refill, which the arrive does not order after their reads; a stage whose phase
    /// expects 256 bytes but gets 128 never completes: every thread waits
    /// for good, and the report names "full" of stage 0 (byte 512) with 128
    /// bytes pending.
    #[test]
    fn a_ring_without_its_handshakes_is_reported() {
        for misstep in [Misstep::ReadBeforeWait, Misstep::ArriveBeforeRead] {
            let err = ring(misstep).unwrap_err();
            assert!(
                matches!(
                    err.fault,
                    Fault::BulkCopyPending {
                        barrier: 512 | 520,
                        ..
                    } | Fault::SharedRace { .. }
                ),
                "{misstep:?}: {err}"
            );
        }
        let err = ring(Misstep::ShortCopy).unwrap_err();
        let Fault::SpinDeadlock {
            mbarrier: Some(wait),
            ..
        } = err.fault
        else {
            panic!("{err}")
        };
        assert_eq!(
            (wait.offset, wait.phase, wait.pending, wait.tx),
            (512, 0, 0, 128),
            "{err}"
        );
    }

    /// A copy the instruction cannot make is a panic naming it, before
    /// anything is issued: a run that does not start on 16 bytes, a run past
    /// the end of the source.
    #[test]
    fn a_copy_outside_its_source_or_off_alignment_panics() {
        for (misstep, says) in [
            (Misstep::Misaligned, "16-byte boundary"),
            (Misstep::PastTheEnd, "leaves the source"),
        ] {
            let err = ring(misstep).unwrap_err();
            let Fault::Panic { message, .. } = &err.fault else {
                panic!("{misstep:?}: {err}")
            };
            assert!(message.contains(says), "{misstep:?}: {err}");
        }
    }

    /// What would corrupt a barrier on the GPU is `Fault::Mbarrier`: a copy
    /// whose destination covers a live barrier, and `inval` of a barrier a
    /// copy still counts on (retired before anyone waited).
    #[test]
    fn a_copy_onto_a_barrier_or_past_its_retirement_is_misuse() {
        let backing = [0u128; 4];
        // SAFETY: 64 bytes of `u32`s, unwritten while the view lives.
        let words = unsafe { Global::from_raw(backing.as_ptr().cast::<u32>(), 16) };
        let shape = LaunchShape {
            grid: Dim3::x(1),
            block: Dim3::x(32),
            dynamic_shared_bytes: 64,
        };
        let run = |onto_barrier: bool| {
            launch("bulk_misuse", shape, &|| {
                let bars = MBarriers::init(shared::array::<u64, 2>(), [1, 1]);
                let source = BulkSource::new(words).unwrap();
                if thread::linear_thread_id() == 0 {
                    bars.get(0).arrive_expect_tx(16);
                    if onto_barrier {
                        source.copy_to_shared(0, shared::array::<u32, 4>(), bars.get(0));
                    } else {
                        let after = shared::array::<u64, 2>().after::<u32, 4>();
                        source.copy_to_shared(0, after, bars.get(0));
                    }
                }
                bars.invalidate();
            })
            .unwrap_err()
        };
        let problem = |err: Box<EmuError>| match err.fault {
            Fault::Mbarrier {
                offset, problem, ..
            } => (offset, problem),
            _ => panic!("{err}"),
        };
        assert_eq!(problem(run(true)), (0, MbarrierProblem::PlainAccess));
        assert_eq!(
            problem(run(false)),
            (0, MbarrierProblem::CopiesInFlight { copies: 1 })
        );
    }

    /// A source that does not start on 16 bytes is refused once, up front.
    #[test]
    fn a_misaligned_source_is_refused() {
        let backing = [0u128; 4];
        // SAFETY: 64 bytes of `u32`s, unwritten while the view lives.
        let words = unsafe { Global::from_raw(backing.as_ptr().cast::<u32>(), 16) };
        let from = |i: usize| BulkSource::new(words.get_range(i..16).unwrap());
        assert!(from(0).is_some());
        assert!(from(1).is_none());
        assert!(from(4).is_some());
    }
}
