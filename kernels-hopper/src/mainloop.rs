//! The Hopper main loop, shared by the warp-specialised kernels (the GEMM,
//! the convolution): a ring of `STAGES` shared-memory stages between one
//! producer warpgroup, which fills each stage with a k-step's A and B
//! tiles, and the consumer warpgroups, which `wgmma` them — each stage with
//! a "full" mbarrier (the producer's arrivals and the bytes its copies
//! count) and an "empty" one (one arrival per consumer thread), plus one
//! "drained" barrier the consumers pass after a tile's last `wgmma` group
//! before the epilogue reuses the ring (`epilogue`).
//!
//! Every tile walks the ring from stage 0 ([`walk_ring`]), and each stage
//! keeps its own "full" and "empty" phases across tiles (a `Phase` per
//! stage, in registers: the walk is written out per stage, so each stage's
//! barrier and phase are constants, nothing indexed at run time), so a K
//! that is not a multiple of `STAGES` steps leaves stages unevenly used but
//! never out of step. How a stage is filled is the kernel's (the GEMM's
//! TMA boxes, the convolution's gather); how it is consumed is
//! [`consume_tile`]; which registers each role has is the configuration's
//! ([`WgmmaTile`](crate::config::WgmmaTile)).

use warpforge_device::mbarrier::{MBarrier, MBarriers, Phase};
use warpforge_device::shared::{self, SharedTile};
use warpforge_device::unroll::unroll;
use warpforge_device::wgmma::{
    self, Accumulator, AccumulatorWidth, Element, Layout, OperandTile, Width,
};

/// The ring's barriers (`BARRIERS = 2·STAGES + 1`): "full" `0 .. STAGES`,
/// "empty" `STAGES .. 2·STAGES`, "drained" last.
pub struct Ring<const STAGES: usize, const BARRIERS: usize> {
    bars: MBarriers<BARRIERS>,
}

impl<const STAGES: usize, const BARRIERS: usize> Ring<STAGES, BARRIERS> {
    /// The barriers, right after the ring's `RING_BYTES` bytes at the
    /// start of shared memory (bytes, whatever the operands' element),
    /// initialised (by thread 0, then a
    /// block barrier: every thread of the block calls it together): "full"
    /// expecting `full_arrivals` a phase (plus the bytes its fill counts),
    /// "empty" and "drained" `consumer_threads` (one arrival per consumer
    /// thread; "drained" once a tile: every consumer's `wgmma`s are done,
    /// so the stage that nobody has released may hold the epilogue's
    /// staging tiles).
    #[inline(always)]
    pub fn init<const RING_BYTES: usize>(full_arrivals: u32, consumer_threads: u32) -> Self {
        const {
            assert!(
                BARRIERS == 2 * STAGES + 1,
                "full and empty per stage, then drained"
            )
        };
        let bars = shared::array::<u8, RING_BYTES>().after::<u64, BARRIERS>();
        let arrivals = core::array::from_fn(|i| {
            if i < STAGES {
                full_arrivals
            } else {
                consumer_threads
            }
        });
        Ring {
            bars: MBarriers::init(bars, arrivals),
        }
    }

    /// Stage `s`'s "full" barrier.
    #[inline(always)]
    pub fn full(&self, s: usize) -> MBarrier {
        self.bars.get(s)
    }

    /// Stage `s`'s "empty" barrier.
    #[inline(always)]
    pub fn empty(&self, s: usize) -> MBarrier {
        self.bars.get(STAGES + s)
    }

    /// The "drained" barrier.
    #[inline(always)]
    pub fn drained(&self) -> MBarrier {
        self.bars.get(2 * STAGES)
    }

    /// The stage of every tile's last step (the same for every tile: each
    /// starts at stage 0), which the consumers hold through the epilogue.
    #[inline(always)]
    pub fn last_stage(steps: u32) -> usize {
        steps.wrapping_sub(1) as usize % STAGES
    }

    /// After a tile's epilogue: the consumers' staging stores (the generic
    /// proxy's) are fenced against the refill of the held stage (the async
    /// proxy's, or a `wgmma`'s read of the next fill), then each consumer
    /// thread releases that stage (written out per stage: a barrier indexed
    /// at run time would put the barriers' addresses in local memory).
    #[inline(always)]
    pub fn release_held(&self, steps: u32, last: usize) {
        wgmma::fence_operands();
        unroll::<STAGES>(
            #[inline(always)]
            |s| {
                if steps > 0 && s == last {
                    self.empty(s).arrive();
                }
            },
        );
    }
}

/// One tile's walk of the ring, shared by the producer and the consumers:
/// `f(step, stage)` for each of the `steps` k-steps in order, `stage = step
/// mod STAGES` (every tile starts at stage 0; each stage's barrier phases
/// are the caller's, carried across tiles). Written out per stage
/// (`unroll`), so each call's stage is a constant: its tiles, barriers and
/// phase are fixed addresses and registers, nothing is indexed at run time.
#[inline(always)]
pub fn walk_ring<const STAGES: usize>(steps: u32, mut f: impl FnMut(u32, usize)) {
    let mut step = 0;
    while step < steps {
        unroll::<STAGES>(
            #[inline(always)]
            |s| {
                if step + (s as u32) < steps {
                    f(step + s as u32, s);
                }
            },
        );
        step += STAGES as u32;
    }
}

/// A consumer warpgroup's k-loop of one tile: for each step, wait for its
/// stage to be full, issue the four `wgmma`s of the k-step (`KB` deep, 128
/// bytes of K: `m64nNk16` for 2-byte types, `m64nNk8` for tf32)
/// (`operands(stage)`: this warpgroup's 64 rows of A and all of B's `N`
/// columns), commit them, wait until the *previous* step's group is done
/// and arrive on that stage's "empty" barrier — one group stays in flight
/// while the next stage's copies land. Then every group is waited for
/// (`finish`): `acc` holds the tile's sum. The tile's last stage is not
/// released here (the epilogue holds it: [`Ring::release_held`]).
#[inline(always)]
pub fn consume_tile<
    T: Element,
    LA: Layout,
    LB: Layout,
    const N: usize,
    const KB: usize,
    const STAGES: usize,
    const BARRIERS: usize,
>(
    ring: &Ring<STAGES, BARRIERS>,
    steps: u32,
    filled: &mut [Phase; STAGES],
    acc: &mut Accumulator<N>,
    operands: impl Fn(usize) -> (OperandTile<T, 64, KB, LA>, OperandTile<T, N, KB, LB>),
) where
    Width<N>: AccumulatorWidth,
{
    const { assert!(KB == 4 * T::K, "a k-step is four wgmmas (128 bytes of K)") };
    let mut run = acc.start();
    walk_ring::<STAGES>(
        steps,
        #[inline(always)]
        |step, s| {
            ring.full(s).wait(&mut filled[s]);
            let (a, b) = operands(s);
            run.mma(a.descriptor::<0>(), b.descriptor::<0>());
            run.mma(a.descriptor::<1>(), b.descriptor::<1>());
            run.mma(a.descriptor::<2>(), b.descriptor::<2>());
            run.mma(a.descriptor::<3>(), b.descriptor::<3>());
            run.commit();
            // The previous step's group is done: its stage may refill.
            run.wait::<1>();
            if step > 0 {
                ring.empty((s + STAGES - 1) % STAGES).arrive();
            }
        },
    );
    run.finish();
}

/// The consumers' pass after a tile's k-loop: every consumer thread
/// arrives on "drained" after its own `finish`, then waits for all, so no
/// consumer's `wgmma` still reads the tile's last stage, and nobody
/// refills it before [`Ring::release_held`]: the epilogue may stage the
/// accumulator there. The producer meanwhile fills the other stages with
/// the next tile's first steps.
#[inline(always)]
pub fn drain<const STAGES: usize, const BARRIERS: usize>(
    ring: &Ring<STAGES, BARRIERS>,
    phase: &mut Phase,
) {
    let drained = ring.drained();
    drained.arrive();
    drained.wait(phase);
}

/// The tiles of A and B in the stages of a ring whose stages follow each
/// other from the start of shared memory, each two A tiles of `64 × KB`
/// (`A_BYTES` bytes, one per consumer warpgroup) then B's `N × KB`
/// (`B_BYTES`): every tile a multiple of the 128-byte swizzle's 1024-byte
/// period from the start. The ring is laid out in bytes (`u8` tiles, each
/// an `OperandTile` of its bytes), so one layout serves 2-byte operands
/// (`KB` = 64) and tf32 (`KB` = 32). Each warpgroup role builds them after
/// its `setmaxnreg`: they are addresses from the shared base, cheaper
/// rebuilt than carried across the register split (a value live there must
/// fit the producer's smaller limit, or ptxas spills it).
///
/// Two consumer warpgroups, fixed: [`stages`] refuses at compile time a
/// configuration with another count. `[OperandTile; CONSUMERS]` needs no
/// `generic_const_exprs`, but every way of building a const-length array of
/// checked tiles measured so far perturbs ptxas's allocation of the GEMM's
/// 56-register producer (docs/hopper/README.md, "`Stage` and the consumer
/// count"), so it waits for a configuration that needs it.
#[derive(Clone, Copy)]
pub struct Stage<T, LA, LB, const N: usize, const KB: usize> {
    pub a: [OperandTile<T, 64, KB, LA>; 2],
    pub b: OperandTile<T, N, KB, LB>,
}

/// The ring's `STAGES` stages (see [`Stage`]) of a configuration with
/// `CONSUMERS` consumer warpgroups (its
/// [`WgmmaTile::CONSUMERS`](crate::config::WgmmaTile::CONSUMERS); two, checked
/// at compile time); `A_BYTES = 64·KB` and `B_BYTES = N·KB` elements of `T`
/// (checked at compile time by `OperandTile::new`).
#[inline(always)]
pub fn stages<
    T: Element,
    LA: Layout,
    LB: Layout,
    const N: usize,
    const KB: usize,
    const STAGES: usize,
    const CONSUMERS: usize,
    const A_BYTES: usize,
    const B_BYTES: usize,
>() -> [Stage<T, LA, LB, N, KB>; STAGES] {
    const {
        assert!(
            CONSUMERS == 2,
            "a Stage holds two consumer warpgroups' A tiles (see its docs)"
        )
    };
    let mut stages = [None; STAGES];
    let mut a0: SharedTile<u8, A_BYTES> = shared::array::<u8, A_BYTES>();
    let mut last_b: Option<SharedTile<u8, B_BYTES>> = None;
    for (s, stage) in stages.iter_mut().enumerate() {
        if s > 0 {
            a0 = last_b
                .expect("set by the previous stage")
                .after::<u8, A_BYTES>();
        }
        let a1 = a0.after::<u8, A_BYTES>();
        let b = a1.after::<u8, B_BYTES>();
        last_b = Some(b);
        // Every tile starts a multiple of 8 KiB in: on the swizzle's period.
        *stage = match (
            OperandTile::new(a0),
            OperandTile::new(a1),
            OperandTile::new(b),
        ) {
            (Some(a0), Some(a1), Some(b)) => Some(Stage { a: [a0, a1], b }),
            _ => None,
        };
    }
    stages.map(|s| s.expect("the dynamic shared memory starts 1024-byte aligned"))
}
