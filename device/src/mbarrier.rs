//! Split-phase barriers in shared memory (`mbarrier`, sm_90).
//!
//! An mbarrier completes a *phase* once the arrivals it expects have come
//! and, on sm_90, once the bytes of asynchronous copies it was told to
//! expect have landed; then it re-arms for the next phase. Arriving and
//! waiting are separate operations, and only the threads that wait are held:
//! the full/empty handshakes of a producer/consumer pipeline (a producer
//! warp fills a stage and arrives on its "full" barrier; the consumers wait
//! there, read the stage and arrive on its "empty" barrier, where the
//! producer waits before refilling it), where
//! [`sync_threads`] would hold the whole block.
//!
//! What the types guarantee:
//! - A barrier exists only as an [`MBarrier`] of an [`MBarriers`] from
//!   [`MBarriers::init`], which every thread of the block calls together:
//!   thread 0 initialises them and a block barrier publishes them, so no
//!   thread uses one before its `init` (undefined on the GPU).
//! - A wait names its phase by a [`Phase`] that the waiting thread carries
//!   and [`MBarrier::wait`] advances. The hardware answers only about the
//!   current phase and the one before it, by parity, so a thread must know
//!   which one it waits for over the barrier's whole life: the `Phase` is
//!   that knowledge.
//! - [`MBarriers::invalidate`] consumes the barriers, after a block barrier,
//!   so none is used after its `inval` (or before it by a slower thread).
//!
//! What only the kernel's protocol upholds, as barriers do for shared memory
//! (see "Races" on [`SharedArray`](crate::shared::SharedArray)): that each
//! phase receives exactly the arrivals and bytes it expects, that a phase a
//! thread waits for can complete, and that no plain access touches a live
//! barrier's 8 bytes. The emulator checks each and reports the thread and
//! the line: too many arrivals, a tx-count out of range, a wait for a phase
//! that is neither the current one nor the one before it, or a plain access
//! are [`Fault::Mbarrier`](crate::emu::Fault::Mbarrier); a wait that nothing
//! can complete is [`Fault::SpinDeadlock`](crate::emu::Fault::SpinDeadlock),
//! naming the waiting threads.
//!
//! Ordering: an arrive (and a `complete_tx`) *releases* the thread's earlier
//! accesses, and a wait that sees its phase complete *acquires* every
//! release of that phase (`.release` / `.acquire` at `.cta` scope, the PTX
//! defaults): the waiters see what the arrivers wrote before arriving. The
//! emulator's race detector orders shared-memory accesses by exactly these
//! edges, besides block barriers.
//!
//! On the GPU these are the sm_90 forms (`.shared::cta`, `try_wait`,
//! `expect_tx`; PTX 8.0): kernels that use them belong to the sm_90a module.

use crate::arch;
use crate::shared::SharedTile;
use crate::sync::sync_threads;
use crate::thread;

/// The most arrivals a phase may expect, and the largest transaction count
/// (bytes) a phase may have pending: 2^20 − 1 (PTX ISA, "contents of the
/// mbarrier object").
pub const MAX_COUNT: u32 = (1 << 20) - 1;

/// One initialised barrier of an [`MBarriers`]: its operations.
#[derive(Clone, Copy)]
pub struct MBarrier {
    addr: arch::SharedAddr,
}

/// `N` barriers in shared memory, initialised and published to the block
/// (from [`MBarriers::init`]); [`MBarriers::invalidate`] retires them.
pub struct MBarriers<const N: usize> {
    bars: [MBarrier; N],
}

/// Which phase of a barrier a thread waits for: its number, of which the
/// hardware sees the parity. Each thread keeps its own for each barrier it
/// waits on; [`MBarrier::wait`] moves it to the next phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Phase {
    number: u32,
}

impl Phase {
    /// A fresh barrier's first phase (phase 0).
    pub const FIRST: Phase = Phase { number: 0 };

    /// The phase before a fresh barrier's first, which counts as complete:
    /// a wait on it returns at once. A producer's first wait on an "empty"
    /// barrier (every stage starts empty) starts here.
    pub const BEFORE_FIRST: Phase = Phase { number: u32::MAX };

    /// The phase after this one.
    #[inline(always)]
    pub const fn next(self) -> Phase {
        Phase {
            number: self.number.wrapping_add(1),
        }
    }

    /// Its parity (what `try_wait.parity` is given): 0 for even phases, 1
    /// for odd ones ([`BEFORE_FIRST`](Self::BEFORE_FIRST) is odd).
    #[inline(always)]
    pub const fn parity(self) -> u32 {
        self.number & 1
    }
}

impl MBarrier {
    /// Its shared address (for the instructions that count on it, e.g. a
    /// bulk copy's `complete_tx`).
    #[inline(always)]
    pub(crate) fn addr(&self) -> arch::SharedAddr {
        self.addr
    }
}

impl<const N: usize> MBarriers<N> {
    /// `N` barriers in `tile`, barrier `i` expecting `arrivals[i]` arrivals
    /// a phase (1 ..= [`MAX_COUNT`]: a count outside is a panic that names
    /// it). Every thread of the block calls it together: thread 0
    /// initialises the barriers, then a block barrier publishes them.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn init(tile: SharedTile<u64, N>, arrivals: [u32; N]) -> Self {
        let mut i = 0;
        while i < N {
            assert!(
                arrivals[i] >= 1 && arrivals[i] <= MAX_COUNT,
                "MBarriers::init: a barrier expects 1 ..= 2^20 - 1 arrivals a phase"
            );
            i += 1;
        }
        let bars: [MBarrier; N] = core::array::from_fn(|i| MBarrier {
            // i < N: an element of the tile (its address only; no access).
            addr: arch::shared_addr(tile.addr(i) as *const u8),
        });
        if thread::linear_thread_id() == 0 {
            for (bar, &count) in bars.iter().zip(arrivals.iter()) {
                // SAFETY: 8 bytes of the block's shared memory, 8-byte
                // aligned (an element of a `u64` tile), which only this
                // thread touches before the barrier below publishes them;
                // the count is in range (checked above).
                unsafe { arch::mbarrier_init(bar.addr, count) };
            }
            // The async proxy (bulk copies counting their bytes) then sees
            // the initialised barriers too. The PTX ISA 9.1 says the copy
            // engine reads its mbarrier through the generic proxy, so the
            // block barrier below would do; NVIDIA's Hopper examples fence
            // anyway, and it costs one instruction per block.
            arch::fence_proxy_async_shared();
        }
        sync_threads();
        MBarriers { bars }
    }

    /// Barrier `i` (a panic past `N`).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn get(&self, i: usize) -> MBarrier {
        self.bars[i]
    }

    /// Retires the barriers: every thread of the block calls it together,
    /// once it is done with them; after a block barrier thread 0 invalidates
    /// each, so that their memory may be used for anything else.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn invalidate(self) {
        sync_threads();
        if thread::linear_thread_id() == 0 {
            for bar in self.bars {
                // SAFETY: a live barrier (from `init`, not yet invalidated:
                // `self` is consumed) that no thread uses after the barrier
                // above.
                unsafe { arch::mbarrier_inval(bar.addr) };
            }
        }
    }
}

impl MBarrier {
    /// Arrives on the current phase (one of the arrivals it expects),
    /// releasing this thread's earlier accesses to the threads that wait
    /// for the phase.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn arrive(&self) {
        // SAFETY: a live barrier (`MBarriers`' invariant).
        unsafe { arch::mbarrier_arrive(self.addr) }
    }

    /// Tells the current phase to expect `bytes` more bytes of asynchronous
    /// copies (at most [`MAX_COUNT`]), then arrives: the phase completes
    /// once its arrivals have come and those bytes have landed.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn arrive_expect_tx(&self, bytes: u32) {
        // SAFETY: a live barrier (`MBarriers`' invariant).
        unsafe { arch::mbarrier_arrive_expect_tx(self.addr, bytes) }
    }

    /// Tells the current phase to expect `bytes` more bytes of asynchronous
    /// copies, without arriving.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn expect_tx(&self, bytes: u32) {
        // SAFETY: a live barrier (`MBarriers`' invariant).
        unsafe { arch::mbarrier_expect_tx(self.addr, bytes) }
    }

    /// Counts `bytes` of the current phase's expected bytes as landed, as
    /// an asynchronous copy does when it completes (releasing this
    /// thread's earlier accesses, as an arrive does).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn complete_tx(&self, bytes: u32) {
        // SAFETY: a live barrier (`MBarriers`' invariant).
        unsafe { arch::mbarrier_complete_tx(self.addr, bytes) }
    }

    /// Whether phase `phase` has completed (`test_wait.parity`, which never
    /// blocks); if so, this thread acquires what its arrivals released.
    /// `phase` must be the barrier's current phase or the one before it.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn test(&self, phase: Phase) -> bool {
        // SAFETY: a live barrier (`MBarriers`' invariant).
        unsafe { arch::mbarrier_test_wait(self.addr, phase.number) }
    }

    /// Waits until phase `*phase` has completed (`try_wait.parity` in a
    /// loop), acquiring what its arrivals released, then moves `*phase` to
    /// the next one. `*phase` must be the barrier's current phase or the
    /// one before it.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn wait(&self, phase: &mut Phase) {
        // SAFETY: a live barrier (`MBarriers`' invariant).
        while !unsafe { arch::mbarrier_try_wait(self.addr, phase.number) } {}
        *phase = phase.next();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::{Fault, LaunchShape, MbarrierProblem, launch};
    use crate::{Dim3, shared};
    use std::sync::Mutex;

    const ITEMS: u32 = 5;
    const SHARED: usize = 64 * 4 + 4 * 8;

    fn one_block(threads: u32) -> LaunchShape {
        LaunchShape {
            grid: Dim3::x(1),
            block: Dim3::x(threads),
            dynamic_shared_bytes: SHARED,
        }
    }

    /// How [`ring`] misbehaves, if it does.
    #[derive(Clone, Copy, PartialEq)]
    enum Misstep {
        None,
        /// The consumers read a stage before waiting for it to be full.
        ConsumerReadsEarly,
        /// One producer lane never counts its bytes.
        ProducerDropsALane,
        /// Consumer lane 5 reads its element again after arriving on
        /// "empty" (a read the arrive did not release).
        ConsumerReadsAfterArrive,
    }

    /// A two-stage ring between warp 0 (producer) and warp 1 (consumers):
    /// item `i` goes through stage `i % 2`, each producer lane writing its
    /// element and counting its 4 bytes landed on the stage's "full"
    /// barrier (lane 0 arrives, expecting the 128), each consumer lane
    /// reading its neighbour's (another thread's) element, then arriving on
    /// "empty" (`broadcast`: every consumer lane reads producer lane 0's
    /// element, so each of those bytes has 32 readers for the refill to be
    /// ordered after). What each consumer lane received, in order.
    fn ring(misstep: Misstep, broadcast: bool) -> Result<Vec<Vec<u32>>, Box<crate::emu::EmuError>> {
        let got = Mutex::new(vec![Vec::new(); 32]);
        launch("ring", one_block(64), &|| {
            let stages = shared::array::<u32, 64>();
            let bars = MBarriers::init(stages.after::<u64, 4>(), [1, 1, 32, 32]);
            let (full, empty) = ([bars.get(0), bars.get(1)], [bars.get(2), bars.get(3)]);
            let lane = thread::lane_id() as usize;
            let from = if broadcast { 0 } else { lane ^ 1 };
            if thread::linear_thread_id() < 32 {
                let mut phase = [Phase::BEFORE_FIRST; 2];
                for i in 0..ITEMS {
                    let s = (i % 2) as usize;
                    empty[s].wait(&mut phase[s]);
                    if lane == 0 {
                        full[s].arrive_expect_tx(4 * 32);
                    }
                    stages.store(32 * s + lane, i * 100 + lane as u32);
                    if !(misstep == Misstep::ProducerDropsALane && lane == 31) {
                        full[s].complete_tx(4);
                    }
                }
            } else {
                let mut phase = [Phase::FIRST; 2];
                let mut mine = Vec::new();
                for i in 0..ITEMS {
                    let s = (i % 2) as usize;
                    if misstep == Misstep::ConsumerReadsEarly {
                        mine.push(stages.load(32 * s + from));
                        full[s].wait(&mut phase[s]);
                    } else {
                        full[s].wait(&mut phase[s]);
                        mine.push(stages.load(32 * s + from));
                    }
                    empty[s].arrive();
                    if misstep == Misstep::ConsumerReadsAfterArrive && lane == 5 {
                        stages.load(32 * s + from);
                    }
                }
                got.lock().unwrap()[lane] = mine;
            }
            bars.invalidate();
        })?;
        Ok(got.into_inner().unwrap())
    }

    /// Every consumer lane receives every item, from the right producer
    /// lane, in order; the race detector finds nothing (the barriers'
    /// release/acquire edges order each write before its reads and each
    /// read before the refill), with no block barrier in the loop.
    #[test]
    fn a_two_stage_ring_hands_each_item_over_in_order() {
        for broadcast in [false, true] {
            let got = ring(Misstep::None, broadcast).unwrap();
            for (lane, items) in got.iter().enumerate() {
                let from = if broadcast { 0 } else { lane ^ 1 };
                let want: Vec<u32> = (0..ITEMS).map(|i| i * 100 + from as u32).collect();
                assert_eq!(items, &want, "consumer lane {lane}, broadcast {broadcast}");
            }
        }
    }

    /// The planted faults of the same ring, each against its twin above: a
    /// read of a stage before its "full" wait races with the producer's
    /// write (whichever comes first), and so does one of 32 readers of an
    /// element reading it again after its "empty" arrive; a producer lane that never counts its
    /// bytes leaves "full" incomplete, so the consumers never arrive on
    /// "empty" and all 64 threads wait for good — a deadlock reported at the
    /// cause: a consumer's wait on stage 0's "full" (byte 256), phase 0, all
    /// arrivals in and 4 bytes (the dropped lane's) still expected.
    #[test]
    fn a_ring_without_its_handshakes_is_reported() {
        let err = ring(Misstep::ConsumerReadsEarly, false).unwrap_err();
        assert!(matches!(err.fault, Fault::SharedRace { .. }), "{err}");
        let err = ring(Misstep::ConsumerReadsAfterArrive, true).unwrap_err();
        assert!(matches!(err.fault, Fault::SharedRace { .. }), "{err}");
        let err = ring(Misstep::ProducerDropsALane, false).unwrap_err();
        let Fault::SpinDeadlock {
            mbarrier: Some(wait),
            spinners,
            ..
        } = err.fault
        else {
            panic!("{err}")
        };
        assert_eq!(spinners, 64, "{err}");
        assert!(err.thread.x >= 32, "a consumer: {err}");
        assert_eq!(
            (wait.offset, wait.waited, wait.phase, wait.pending, wait.tx),
            (256, 0, 0, 0, 4),
            "{err}"
        );
        assert!(err.to_string().contains("wait on mbarrier phases"), "{err}");
    }

    /// Misuse the types cannot stop, reported with its line: a wait for a
    /// phase two behind the barrier's (its parity names the current one), an
    /// arrival beyond a phase's expected ones, a plain store to a live
    /// barrier.
    #[test]
    fn protocol_misuse_is_a_fault() {
        let run = |misuse: u32| {
            launch("misuse", one_block(32), &|| {
                let tile = shared::array::<u32, 64>().after::<u64, 4>();
                let bars = MBarriers::init(tile, [32, 32, 32, 32]);
                let bar = bars.get(0);
                match misuse {
                    0 => {
                        let mut phase = Phase::FIRST;
                        for _ in 0..2 {
                            bar.arrive();
                            bar.wait(&mut phase);
                        }
                        // Two phases completed: phase 0 is neither current nor preceding.
                        bar.test(Phase::FIRST);
                    }
                    1 => {
                        if thread::lane_id() == 0 {
                            bar.arrive_expect_tx(16);
                        } else {
                            bar.arrive();
                        }
                        // Arrivals all in, 16 bytes pending: one arrival too many.
                        if thread::lane_id() == 7 {
                            bar.arrive();
                        }
                    }
                    _ => {
                        if thread::lane_id() == 3 {
                            tile.store(0, 0);
                        }
                    }
                }
            })
            .unwrap_err()
        };
        let problem = |err: Box<crate::emu::EmuError>| match err.fault {
            Fault::Mbarrier { problem, .. } => problem,
            _ => panic!("{err}"),
        };
        assert_eq!(
            problem(run(0)),
            MbarrierProblem::PhaseNotCurrentOrPreceding {
                waited: 0,
                current: 2
            }
        );
        assert_eq!(
            problem(run(1)),
            MbarrierProblem::TooManyArrivals {
                phase: 0,
                expected: 32
            }
        );
        let err = run(2);
        assert_eq!(err.thread.x, 3, "{err}");
        assert_eq!(problem(err), MbarrierProblem::PlainAccess);
    }
}
