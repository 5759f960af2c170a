//! The warp-specialised Hopper GEMM: `D = alpha·op(A)·op(B) + beta·C`,
//! f16/bf16 inputs, f32 accumulation, f32/f16/bf16 output, batched; and
//! f32 inputs on the tf32 `wgmma` (`gemm_wgmma_tf32_f32_nt_*`, both
//! operands K-major and already rounded to tf32 by [`crate::tf32`]).
//!
//! A stage holds 128 bytes of K (`BK_BYTES`, one swizzle span): 64
//! elements of f16/bf16, 32 of tf32, the kernel's `KB`. Its tiles, boxes,
//! bytes and four `wgmma`s a step (k16, or k8 for tf32) are the same for
//! every type; the text below counts in 2-byte elements.
//!
//! Persistent: a grid of one block per SM, each block of three warpgroups
//! walking the 128 × 256 tiles of D (`TileWalk`: block `b` of `n` takes
//! tiles `b, b + n, …`, batch by batch, in bands of 8 tile rows), keeping
//! its ring and barriers from one tile to the next:
//!
//! - **warpgroup 2, the producer**, gives its registers back
//!   (`setmaxnreg.dec` to 56) and one of its threads walks K in steps of 64:
//!   for each step it waits until the ring's stage is empty, tells the
//!   stage's "full" barrier to expect the stage's 48 KiB, and has the TMA
//!   copy A's two 64 × 64 tiles and B's 256 × 64 tile into it, 128B-swizzled,
//!   in six 8 KiB boxes (one per 64 × 64), with zeros wherever a box
//!   reaches past the matrices;
//! - **warpgroups 0 and 1, the consumers**, take the registers
//!   (`setmaxnreg.inc` to 224: 128 × 56 + 256 × 224 is exactly the block's
//!   168 × 384 at launch, all the pool can hold — asking more would hang),
//!   and for each step wait for the stage to be full, issue four
//!   `wgmma.m64n256k16` (their 64 rows of A, all of B), commit them, wait
//!   until the *previous* step's group is done, and arrive on that stage's
//!   "empty" barrier: one group stays in flight while the next stage's
//!   copies land;
//! - the epilogue: after the tile's last group the consumers pass the
//!   "drained" barrier (every consumer's `wgmma`s done), and each consumer
//!   warp writes its 16 × 256 rows of the accumulator through shared
//!   memory, one 16 × 64 panel at a time, staged in the ring's stage of the
//!   tile's last step (which nobody has released yet): its lanes store
//!   their `mma` fragments (8-byte stores) into the warp's own 4 KiB
//!   staging tile there (f32, 16-byte chunks XOR-swizzled by row: no bank
//!   conflicts either way), the warp syncs (`warp::sync`), and each lane
//!   reads back 16-byte runs of rows and writes them to C through its
//!   `TileWalk` tile (`RunTile`: owned, no two lanes write one element; one
//!   request of the warp is whole 128-byte lines of C, where the
//!   fragments' stores each touched twice the sectors they wrote). How is
//!   decided once per tile (`RunTile::panels`): a tile inside C and 16-byte
//!   aligned writes each run as one 16-byte store, `alpha·acc` when
//!   `beta = 0` (C never read) else `fma(beta, c, alpha·acc)` with C read
//!   as one 16-byte load, rounded to the output type; a tile on C's right
//!   or bottom edge writes each run wholly inside C the same way and a
//!   row's ragged last run element by element; a C whose rows do not start
//!   on 16 bytes is written element by element, 32 consecutive elements of
//!   a row a request. Then the consumers fence (the staging stores are the
//!   generic proxy's, the TMA's refill the async proxy's) and release the
//!   stage. Meanwhile the producer is already filling the other stages with
//!   the next tile's first steps.
//!
//! Every tile walks the ring from stage 0, and each stage keeps its own
//! "full" and "empty" phases across tiles (a `Phase` per stage, in
//! registers: the walk is written out per stage), so a K that is not a
//! multiple of 4 steps leaves stages unevenly used but never out of step.
//!
//! The ring has 4 stages (192 KiB of shared memory), then the barriers' 72
//! bytes (the H100 and H200 allow 227 KiB a block); the staging tiles are
//! the first 32 KiB of a stage. The k-loop is written out per stage (`unroll`), so each
//! stage's tiles and barriers are constants and nothing is indexed at run
//! time. The transposes are the tiles' layouts: A row-major is K-major, A
//! transposed (stored K × M) MN-major; B row-major (K × N) is MN-major, B
//! transposed (stored N × K) K-major; TMA writes every one of them, one
//! 64 × 64 box at a time, from a map whose dimension 0 is the stored rows.
//!
//! Bounds: every box the TMA copies is clipped to the tensor the host
//! described (zeros outside); every element written is in the tile
//! `TileWalk` gives the warp, clipped to C (a run's vector access only for
//! a run wholly inside C, in a tile whose rows start on 16 bytes). The host checks the shapes,
//! the maps (16-byte strides) and that M, N, K and the batch fit the TMA's
//! 32-bit coordinates.

use warpforge_device::mbarrier::{MBarriers, Phase};
use warpforge_device::num::Output;
use warpforge_device::own::{RunElement, RunPanels, TileWalk};
use warpforge_device::shared::{self, SharedTile, SharedVectors};
use warpforge_device::swizzle::Sw128;
use warpforge_device::tma::TensorMap;
use warpforge_device::unroll::unroll;
use warpforge_device::wgmma::{self, Accumulator, Element, KMajor, Layout, MnMajor, OperandTile};
use warpforge_device::{OutMatrix, bf16, f16, thread, warp};
use warpforge_macros::kernel;

/// Rows of the block's tile of D.
pub const BM: usize = 128;
/// Columns of the block's tile of D.
pub const BN: usize = 256;
/// K per stage, in bytes: one 128-byte swizzle span, whatever the element
/// (so a stage's tiles, boxes and bytes are the same for every type).
pub const BK_BYTES: usize = 128;
/// K per stage of the f16/bf16 kernels (`BK_BYTES` of 2-byte elements).
pub const BK: usize = BK_BYTES / 2;
/// K per stage of the tf32 kernel (`BK_BYTES` of f32).
pub const BK_TF32: usize = BK_BYTES / 4;
/// Stages of the ring.
pub const STAGES: usize = 4;
/// Bands of tile rows the walk takes the tiles in (`TileWalk`'s `G`): the
/// blocks at work at once share few panels of A and B in L2.
pub const BANDS: usize = 8;
/// Threads a block: two consumer warpgroups and the producer's.
pub const THREADS: u32 = 384;
/// The rows of the box every tensor map of this kernel copies: `KB × 64`
/// elements (`KB` = the kernel's K per stage), one 128-byte swizzle span
/// wide.
pub const BOX: usize = 64;

/// One consumer's A tile (64 rows of M by a stage's K) and B's tile (BN
/// rows), in bytes.
const A_BYTES: usize = 64 * BK_BYTES;
const B_BYTES: usize = BN * BK_BYTES;
/// Bytes a stage holds: both A tiles and B's.
const STAGE_BYTES: u32 = (2 * A_BYTES + B_BYTES) as u32;
/// The ring's stages, in bytes.
const RING_BYTES: usize = STAGES * (2 * A_BYTES + B_BYTES);
/// The ring's barriers: "full" and "empty" for each stage, then "drained".
const BARRIERS: usize = 2 * STAGES + 1;
/// The barrier the consumers pass after a tile's last `wgmma` group, before
/// its epilogue stages the accumulator in the ring.
const DRAINED: usize = 2 * STAGES;
/// The launch's shared memory, in bytes: the stages, then the barriers (8
/// bytes each). The epilogue stages the accumulator in the stage of the
/// tile's last step (`staging_tiles`), not in memory of its own.
const SHARED_BYTES: usize = RING_BYTES + BARRIERS * 8;

/// A tensor map of this kernel's operands (batched: dimension 2 is the
/// batch), boxes of `KB` (a stage's K) by [`BOX`] rows.
pub type OperandMap<'a, T, const KB: usize> = TensorMap<'a, T, 3, KB, BOX, Sw128>;

/// One stage of the ring: each consumer's A tile and B's, `KB` deep.
#[derive(Clone, Copy)]
struct Stage<T, const KB: usize, LA, LB> {
    a: [OperandTile<T, 64, KB, LA>; 2],
    b: OperandTile<T, BN, KB, LB>,
}

/// The ring's stages, one after another from the start of shared memory
/// (each a multiple of the swizzle's 1024-byte period). Each warpgroup role
/// builds them after its `setmaxnreg`: they are addresses from the shared
/// base, cheaper rebuilt than carried across the register split (a value
/// live there must fit the producer's smaller limit, or ptxas spills it).
#[inline(always)]
fn stages<T: Element, const KB: usize, LA: Layout, LB: Layout>() -> [Stage<T, KB, LA, LB>; STAGES] {
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

/// The ring's barriers, after the stages, initialised (by thread 0, then a
/// block barrier): "full" `0 .. STAGES` (one arrival, the producer's, plus
/// the bytes), "empty" `STAGES .. 2·STAGES` (one arrival per consumer
/// thread), and "drained" (one arrival per consumer thread, once a tile:
/// every consumer's `wgmma`s are done, so the ring's stage that nobody has
/// released may hold the epilogue's staging tiles).
#[inline(always)]
fn barriers() -> MBarriers<BARRIERS> {
    let bars = shared::array::<u8, RING_BYTES>().after::<u64, BARRIERS>();
    let consumers = 2 * wgmma::WARPGROUP_SIZE;
    MBarriers::init(
        bars,
        [
            1, 1, 1, 1, consumers, consumers, consumers, consumers, consumers,
        ],
    )
}

/// `D = alpha·op(A)·op(B) + beta·C`, each block computing the 128 × 256
/// tiles its walk gives it (see the module). `a` and `b` are batched maps of the stored matrices (A:
/// M × K row-major, or K × M for `LA = MnMajor`; B: K × N row-major, or
/// N × K for `LB = KMajor`); `k` the depth. Launch with [`THREADS`] threads
/// and a 1-D grid of at most one block per SM (more blocks than tiles only
/// idle): each block walks its tiles (`TileWalk`).
#[kernel(
    shared = [u8; SHARED_BYTES],
    max_threads = 384,
    min_blocks = 1,
    instances(
        gemm_wgmma_bf16_f32_nn_128x256x64_s4 = <bf16, f32, KMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_bf16_f32_nt_128x256x64_s4 = <bf16, f32, KMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_bf16_f32_tn_128x256x64_s4 = <bf16, f32, MnMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_bf16_f32_tt_128x256x64_s4 = <bf16, f32, MnMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_f16_f32_nn_128x256x64_s4 = <f16, f32, KMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_f16_f32_nt_128x256x64_s4 = <f16, f32, KMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_f16_f32_tn_128x256x64_s4 = <f16, f32, MnMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_f16_f32_tt_128x256x64_s4 = <f16, f32, MnMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_bf16_bf16_nn_128x256x64_s4 = <bf16, bf16, KMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_bf16_bf16_nt_128x256x64_s4 = <bf16, bf16, KMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_bf16_bf16_tn_128x256x64_s4 = <bf16, bf16, MnMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_bf16_bf16_tt_128x256x64_s4 = <bf16, bf16, MnMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_f16_f16_nn_128x256x64_s4 = <f16, f16, KMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_f16_f16_nt_128x256x64_s4 = <f16, f16, KMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_f16_f16_tn_128x256x64_s4 = <f16, f16, MnMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_f16_f16_tt_128x256x64_s4 = <f16, f16, MnMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_tf32_f32_nt_128x256x32_s4 = <f32, f32, KMajor<Sw128>, KMajor<Sw128>, 32>,
    )
)]
pub fn gemm_wgmma<
    T: Element,
    TOut: Output + RunElement,
    LA: Layout,
    LB: Layout,
    const KB: usize,
>(
    a: TensorMap<T, 3, KB, BOX, Sw128>,
    b: TensorMap<T, 3, KB, BOX, Sw128>,
    k: u32,
    alpha: f32,
    beta: f32,
    mut c: OutMatrix<TOut, TileWalk<BM, BN, 16, BN, BANDS>>,
) {
    const {
        assert!(
            KB * size_of::<T>() == BK_BYTES,
            "a stage is one swizzle span of K"
        )
    };
    let bars = barriers();
    let full = |s: usize| bars.get(s);
    let empty = |s: usize| bars.get(STAGES + s);
    // alpha = 0: D = beta·C, A and B not read (as the library's other GEMMs).
    let steps = if alpha == 0.0 {
        0
    } else {
        k.div_ceil(KB as u32)
    };
    // The warpgroup, broadcast from lane 0: the same value, but one ptxas
    // can see is uniform over the warp, so the `wgmma`s below are not on a
    // divergent path (ptxas would serialise them otherwise, C7519).
    let warpgroup = warp::shuffle_idx(u32::MAX, thread::warp_id() / 4, 0);

    if warpgroup == 2 {
        wgmma::release_registers::<56>();
        let stages = stages::<T, KB, LA, LB>();
        if thread::linear_thread_id() == 2 * wgmma::WARPGROUP_SIZE {
            a.prefetch();
            b.prefetch();
            // Each stage's "empty" phase: a fresh stage counts as empty, so
            // its first use waits on the phase before the first, complete.
            let mut emptied = [Phase::BEFORE_FIRST; STAGES];
            for tile in c.walk() {
                let (z, m0, n0) = c.walk_origin(&tile);
                let (m0, n0, z) = (m0 as i32, n0 as i32, z as i32);
                walk_ring(
                    steps,
                    #[inline(always)]
                    |step, s| {
                        empty(s).wait(&mut emptied[s]);
                        let (stage, bar) = (&stages[s], full(s));
                        bar.arrive_expect_tx(STAGE_BYTES);
                        let k0 = (step * KB as u32) as i32;
                        for (half, a_tile) in stage.a.iter().enumerate() {
                            let m = m0.wrapping_add(64 * half as i32);
                            let at = if LA::MN_MAJOR { [m, k0, z] } else { [k0, m, z] };
                            a.load_operand(at, *a_tile, bar);
                        }
                        let at = if LB::MN_MAJOR {
                            [n0, k0, z]
                        } else {
                            [k0, n0, z]
                        };
                        b.load_operand(at, stage.b, bar);
                    },
                );
            }
        }
        return;
    }

    wgmma::increase_registers::<224>();
    let stages = stages::<T, KB, LA, LB>();
    // The stage of every tile's last step (the same for every tile: each
    // starts at stage 0), whose "empty" arrival waits until the epilogue
    // has staged the accumulator in it. Its staging tiles are chosen here
    // (after the register split, as the stages are, and outside the tile
    // loop: their checks are no trap path there).
    let last = steps.wrapping_sub(1) as usize % STAGES;
    let staging = staging_tiles();
    let mut chunks = staging[0];
    unroll::<STAGES>(
        #[inline(always)]
        |s| {
            if s == last {
                chunks = staging[s];
            }
        },
    );
    // This warp's staging tile in that stage.
    let staged_tile = Staged {
        chunks,
        base: (thread::warp_id() as usize % 8) * PANEL_ELEMS,
    };
    let drained = bars.get(DRAINED);
    let mut drained_phase = Phase::FIRST;
    // 16-byte chunks of f32 a run of the output type reads (1 or 2).
    let chunks = TOut::RUN / 4;
    let mine = if warpgroup == 0 { 0 } else { 1 };
    // Each stage's "full" phase, carried from tile to tile as the
    // producer's "empty" ones are: both walk the same tiles and steps.
    let mut filled = [Phase::FIRST; STAGES];
    for tile in c.walk() {
        let mut acc = Accumulator::<BN>::zero();
        {
            let mut run = acc.start();
            walk_ring(
                steps,
                #[inline(always)]
                |step, s| {
                    let stage = &stages[s];
                    full(s).wait(&mut filled[s]);
                    let at = stage.a[mine];
                    run.mma(at.descriptor::<0>(), stage.b.descriptor::<0>());
                    run.mma(at.descriptor::<1>(), stage.b.descriptor::<1>());
                    run.mma(at.descriptor::<2>(), stage.b.descriptor::<2>());
                    run.mma(at.descriptor::<3>(), stage.b.descriptor::<3>());
                    run.commit();
                    // The previous step's group is done: its stage may refill.
                    run.wait::<1>();
                    if step > 0 {
                        empty((s + STAGES - 1) % STAGES).arrive();
                    }
                },
            );
            run.finish();
        }
        // Every consumer's groups are done (each thread arrives after its
        // own `finish`), so no `wgmma` still reads the last step's stage,
        // and nobody refills it before its "empty" arrival below: the
        // epilogue stages the accumulator there. The producer meanwhile
        // fills the other stages with the next tile's first steps.
        drained.arrive();
        drained.wait(&mut drained_phase);
        // Every consumer warp stages every panel (straight-line code: the
        // accumulator is read on no divergent path, which would make ptxas
        // serialise the `wgmma`s, C7519); a warp with a part of C writes it.
        let mut out = c.walk_tile(&tile);
        let zero = TOut::from_f32(0.0);
        epilogue(&acc, &staged_tile, |p, staged| {
            let Some(out) = out.as_mut() else {
                return;
            };
            // How the warp writes its tile is decided once for the tile
            // (`RunTile::panels`). Inside C and aligned (all but the tiles
            // on its right and bottom edges): whole 16-byte runs, and with
            // beta = 0 passed as the constant it is, no test of beta per
            // run either. On an edge of an aligned C: each run wholly
            // inside one vector, a row's ragged last run element by
            // element. A C whose rows do not start on 16 bytes: element by
            // element, 32 consecutive elements of a row a request.
            match out.panels() {
                RunPanels::Interior(mut inner) if beta == 0.0 => {
                    inner.update_panel(p, |r, col, run| {
                        let v = staged.read(r, col, chunks);
                        run.store(TOut::run(|j| TOut::axpby(alpha, v[j], 0.0, || zero)));
                    })
                }
                RunPanels::Interior(mut inner) => inner.update_panel(p, |r, col, run| {
                    let (v, old) = (staged.read(r, col, chunks), run.load());
                    let old = old.as_ref();
                    run.store(TOut::run(|j| TOut::axpby(alpha, v[j], beta, || old[j])));
                }),
                RunPanels::Edge(mut edge) => edge.update_panel(p, |r, col, run| {
                    let v = staged.read(r, col, chunks);
                    if let Some(mut whole) = run.whole() {
                        let old = if beta == 0.0 {
                            TOut::run(|_| zero)
                        } else {
                            whole.load()
                        };
                        let old = old.as_ref();
                        whole.store(TOut::run(|j| TOut::axpby(alpha, v[j], beta, || old[j])));
                        return;
                    }
                    // Written out (a loop over `v` indexed at run time
                    // would put it in local memory).
                    unroll::<8>(
                        #[inline(always)]
                        |j| {
                            if j < TOut::RUN
                                && let Some(mut d) = run.slot(j)
                            {
                                let r = TOut::axpby(alpha, v[j], beta, || d.get());
                                d.set(r);
                            }
                        },
                    );
                }),
                RunPanels::Elements(mut elements) => elements.update_panel(p, |r, col, mut d| {
                    let y = TOut::axpby(alpha, staged.read_one(r, col), beta, || d.get());
                    d.set(y);
                }),
            }
        });
        // The staging stores are the generic proxy's and the TMA that
        // refills the stage writes through the async proxy: fence, then
        // release the stage (written out per stage: a barrier indexed at
        // run time would put the barriers' addresses in local memory).
        wgmma::fence_operands();
        unroll::<STAGES>(
            #[inline(always)]
            |s| {
                if steps > 0 && s == last {
                    empty(s).arrive();
                }
            },
        );
    }
}

/// Each consumer warp's staging tile: one 16 × 64 panel of its rows of the
/// accumulator, in f32 (4 KiB; the eight warps' 32 KiB in the first 32 of
/// a stage's 48 KiB).
const PANEL: usize = 64;
const PANEL_ELEMS: usize = 16 * PANEL;
const STAGING_ELEMS: usize = 8 * PANEL_ELEMS;
/// A stage's f32 after its staging tiles.
const STAGE_REST: usize = STAGE_BYTES as usize / 4 - STAGING_ELEMS;
const _: () = assert!(STAGE_BYTES as usize >= 4 * STAGING_ELEMS && STAGE_BYTES.is_multiple_of(16));

/// The consumer warps' staging tiles in each stage of the ring (its first
/// 32 KiB), as 16-byte chunks of f32.
#[inline(always)]
fn staging_tiles() -> [SharedVectors<f32, 4>; STAGES] {
    let mut tiles = [None; STAGES];
    let mut tile: SharedTile<f32, STAGING_ELEMS> = shared::array::<f32, STAGING_ELEMS>();
    for (s, chunks) in tiles.iter_mut().enumerate() {
        if s > 0 {
            tile = tile
                .after::<f32, STAGE_REST>()
                .after::<f32, STAGING_ELEMS>();
        }
        *chunks = tile.vectors16::<4>();
    }
    tiles.map(|t| t.expect("the stages start 16-byte aligned"))
}

/// Where element (`row`, `col`) of a warp's 16 × 64 panel lies in its
/// staging tile: row-major, each row's 16-byte chunks permuted by
/// `(row mod 4)·2`, so that the fragments' 8-byte stores (a half-warp: 4
/// rows, the same 8 columns) and the runs' 16-byte loads (a quarter-warp: 8
/// chunks of one row) each hit 32 distinct banks.
#[inline(always)]
///
/// The row and column are taken modulo the panel's (they are in it), so
/// the compiler sees every index in the staging tiles: no bounds check,
/// and so no trap path, is left in the tile loop (one there makes ptxas
/// serialise the `wgmma`s, C7519).
fn staged(row: usize, col: usize) -> usize {
    let (row, col) = (row % 16, col % PANEL);
    row * PANEL + (((col / 4) ^ ((row % 4) * 2)) * 4) + col % 4
}

/// A warp's staging tile, as its runs read it.
#[derive(Clone, Copy)]
struct Staged {
    chunks: SharedVectors<f32, 4>,
    /// The warp's tile's first element.
    base: usize,
}

impl Staged {
    /// The accumulator values of the run at (`row`, `col`) of the warp's
    /// tile (in the panel staged now):
    /// its first `4·chunks` (1 or 2 chunks: a run of f32 is 4 elements, of
    /// f16 8). Of two chunks, lanes 4..8 of each quarter-warp (runs 4..8 of
    /// a row) load them in the other order, so each load's 8 lanes meet 8
    /// distinct groups of 4 banks.
    #[inline(always)]
    fn read(&self, row: usize, col: usize, chunks: usize) -> [f32; 8] {
        // The run's column in the tile, in the panel.
        let col = col % PANEL;
        let chunk = |h: usize| self.chunks.load((self.base + staged(row, col + 4 * h)) / 4);
        if chunks == 1 {
            let a = chunk(0);
            return [a[0], a[1], a[2], a[3], 0.0, 0.0, 0.0, 0.0];
        }
        let swap = (col / 8) % 8 >= 4;
        let s = usize::from(swap);
        let x = chunk(s);
        let y = chunk(1 - s);
        let (lo, hi) = if swap { (y, x) } else { (x, y) };
        [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]]
    }

    /// The accumulator value at (`row`, `col`) of the warp's tile (in the
    /// panel staged now): its chunk's load, the element picked by selects
    /// (the swizzle moves whole chunks, so it is element `col mod 4` of the
    /// chunk), not an array indexed at run time (which would live in local
    /// memory).
    #[inline(always)]
    fn read_one(&self, row: usize, col: usize) -> f32 {
        let v = self.chunks.load((self.base + staged(row, col % PANEL)) / 4);
        match col % 4 {
            0 => v[0],
            1 => v[1],
            2 => v[2],
            _ => v[3],
        }
    }
}

/// The epilogue of one tile, panel by panel: this warp writes the 8
/// accumulator fragments of panel `p` (its 16 rows, columns `64p ..`) into
/// its staging tile, syncs the warp, and has `write(p, staged)` store the
/// panel to C in runs (reading each run's values with [`Staged::read`]);
/// then syncs again before the next panel overwrites the tile. The values
/// are the accumulator's, unrounded: `write` computes alpha·acc + beta·C
/// and rounds once, as the fragments' epilogue did.
#[inline(always)]
fn epilogue(acc: &Accumulator<BN>, staged_tile: &Staged, mut write: impl FnMut(usize, &Staged)) {
    let lane = thread::lane_id() as usize;
    let (g, t) = (lane / 4, lane % 4);
    let base = staged_tile.base;
    let regs = acc.regs();
    unroll::<{ BN / PANEL }>(
        #[inline(always)]
        |p| {
            // Fragment f of the panel: rows g and g + 8, columns 8f + 2t
            // and the next (`mma`'s accumulator layout).
            unroll::<{ PANEL / 8 }>(
                #[inline(always)]
                |f| {
                    let j = 4 * (8 * p + f);
                    let col = 8 * f + 2 * t;
                    let half = (col / 2) % 2;
                    let chunks = staged_tile.chunks;
                    chunks.store_half((base + staged(g, col)) / 4, half, [regs[j], regs[j + 1]]);
                    chunks.store_half(
                        (base + staged(g + 8, col)) / 4,
                        half,
                        [regs[j + 2], regs[j + 3]],
                    );
                },
            );
            warp::sync(u32::MAX);
            write(p, staged_tile);
            warp::sync(u32::MAX);
        },
    );
}

/// One tile's walk of the ring, shared by the producer and the consumers:
/// `f(step, stage)` for each of the `steps` k-steps in order, `stage = step
/// mod STAGES` (every tile starts at stage 0; each stage's barrier phases
/// are the caller's, carried across tiles). Written out per stage
/// (`unroll`), so each call's stage is a constant: its tiles, barriers and
/// phase are fixed addresses and registers, nothing is indexed at run time.
#[inline(always)]
fn walk_ring(steps: u32, mut f: impl FnMut(u32, usize)) {
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
