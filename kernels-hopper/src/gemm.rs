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
//! Two configurations, one body (`gemm_tiles`): [`WideTile`], 128 × 256
//! tiles (`gemm_wgmma_*_128x256x*`), and [`NarrowTile`], 128 × 128
//! (`*_128x128x*`: half the columns, `wgmma.m64n128`, a 128 KiB ring), for
//! grids whose wide tiles would leave half the SMs idle (the host's rule).
//! The text below describes the wide one; the narrow one differs only in
//! `BN` and the bytes that follow from it.
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

use crate::config::WgmmaTile;
use crate::epilogue::{self, LinearCombination, STAGING_ELEMS};
use crate::mainloop::{self, Ring};
use warpforge_device::mbarrier::Phase;
use warpforge_device::num::Output;
use warpforge_device::own::{RunElement, TileWalk};
use warpforge_device::swizzle::Sw128;
use warpforge_device::tma::TensorMap;
use warpforge_device::wgmma::{
    self, Accumulator, AccumulatorWidth, Element, KMajor, Layout, MnMajor, Width,
};
use warpforge_device::{OutMatrix, bf16, f16, thread, warp};
use warpforge_macros::kernel;

crate::config::tile_config!(
    /// The GEMM's wide configuration: 128 × 256 tiles of D, k-steps of 64,
    /// a 4-stage ring (192 KiB), two consumer warpgroups, the producer at 56
    /// registers (so the consumers at 224). The tile for grids that fill
    /// the GPU.
    WideTile: 128 x 256 x 64, 4 stages, 2 consumers, 56 producer registers
);

crate::config::tile_config!(
    /// The GEMM's narrow configuration: 128 × 128 tiles of D, otherwise
    /// [`WideTile`]'s (a 4-stage ring of 128 KiB, the same split). Twice
    /// the tiles of a grid: the tile for grids whose wide tiles would leave
    /// half the SMs or more idle.
    NarrowTile: 128 x 128 x 64, 4 stages, 2 consumers, 56 producer registers
);

/// Rows of the block's tile of D (both configurations).
pub const BM: usize = WideTile::BM;
/// Columns of the wide configuration's tile of D.
pub const BN: usize = WideTile::BN;
/// Columns of the narrow configuration's tile of D.
pub const BN_NARROW: usize = NarrowTile::BN;
/// K per stage of the f16/bf16 kernels.
pub const BK: usize = WideTile::BK;
/// K per stage, in bytes: one 128-byte swizzle span, whatever the element.
pub const BK_BYTES: usize = 2 * BK;
/// K per stage of the tf32 kernel (`BK_BYTES` of f32).
pub const BK_TF32: usize = BK_BYTES / 4;
/// Stages of the ring (both configurations).
pub const STAGES: usize = WideTile::STAGES;
/// Bands of tile rows the walk takes the tiles in (`TileWalk`'s `G`): the
/// blocks at work at once share few panels of A and B in L2.
pub const BANDS: usize = 8;
/// Threads a block: two consumer warpgroups and the producer's (both
/// configurations).
pub const THREADS: u32 = WideTile::THREADS;
/// The rows of the box every tensor map of this kernel copies: `KB × 64`
/// elements (`KB` = the kernel's K per stage), one 128-byte swizzle span
/// wide.
pub const BOX: usize = 64;
/// The ring's barriers: "full" and "empty" for each stage, then "drained".
const BARRIERS: usize = WideTile::BARRIERS;
const _: () = {
    type N = NarrowTile;
    assert!(THREADS == 384, "the kernels' max_threads");
    assert!(N::BM == BM && N::BK == BK && N::STAGES == STAGES && N::THREADS == THREADS);
    assert!(N::BARRIERS == BARRIERS);
};

/// One consumer's A tile (64 rows of M by a stage's K), in bytes.
const A_BYTES: usize = 64 * BK_BYTES;

/// The output's walk for tiles `BN` wide.
pub type Walk<const BN: usize> = TileWalk<BM, BN, 16, BN, BANDS>;

/// A tensor map of this kernel's operands (batched: dimension 2 is the
/// batch), boxes of `KB` (a stage's K) by [`BOX`] rows.
pub type OperandMap<'a, T, const KB: usize> = TensorMap<'a, T, 3, KB, BOX, Sw128>;

/// `D = alpha·op(A)·op(B) + beta·C` on the wide configuration
/// ([`WideTile`]): each block computes the 128 × 256 tiles its walk gives
/// it (see the module). `a` and `b` are batched maps of the stored
/// matrices (A: M × K row-major, or K × M for `LA = MnMajor`; B: K × N
/// row-major, or N × K for `LB = KMajor`); `k` the depth. Launch with
/// [`THREADS`] threads and a 1-D grid of at most one block per SM (more
/// blocks than tiles only idle): each block walks its tiles (`TileWalk`).
#[kernel(
    shared = [u8; WideTile::SHARED_BYTES],
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
    c: OutMatrix<TOut, Walk<BN>>,
) {
    gemm_tiles::<
        T,
        TOut,
        LA,
        LB,
        WideTile,
        KB,
        BN,
        { BN * BK_BYTES },
        { WideTile::RING_BYTES },
        { WideTile::STAGE_BYTES / 4 - STAGING_ELEMS },
    >(a, b, k, alpha, beta, c)
}

/// [`gemm_wgmma`] on the narrow configuration ([`NarrowTile`]): 128 × 128
/// tiles, twice as many blocks' worth of work in a grid, for grids whose
/// wide tiles would leave SMs idle. Launched as `gemm_wgmma`.
#[kernel(
    shared = [u8; NarrowTile::SHARED_BYTES],
    max_threads = 384,
    min_blocks = 1,
    instances(
        gemm_wgmma_bf16_f32_nn_128x128x64_s4 = <bf16, f32, KMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_bf16_f32_nt_128x128x64_s4 = <bf16, f32, KMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_bf16_f32_tn_128x128x64_s4 = <bf16, f32, MnMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_bf16_f32_tt_128x128x64_s4 = <bf16, f32, MnMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_f16_f32_nn_128x128x64_s4 = <f16, f32, KMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_f16_f32_nt_128x128x64_s4 = <f16, f32, KMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_f16_f32_tn_128x128x64_s4 = <f16, f32, MnMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_f16_f32_tt_128x128x64_s4 = <f16, f32, MnMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_bf16_bf16_nn_128x128x64_s4 = <bf16, bf16, KMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_bf16_bf16_nt_128x128x64_s4 = <bf16, bf16, KMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_bf16_bf16_tn_128x128x64_s4 = <bf16, bf16, MnMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_bf16_bf16_tt_128x128x64_s4 = <bf16, bf16, MnMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_f16_f16_nn_128x128x64_s4 = <f16, f16, KMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_f16_f16_nt_128x128x64_s4 = <f16, f16, KMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_f16_f16_tn_128x128x64_s4 = <f16, f16, MnMajor<Sw128>, MnMajor<Sw128>, 64>,
        gemm_wgmma_f16_f16_tt_128x128x64_s4 = <f16, f16, MnMajor<Sw128>, KMajor<Sw128>, 64>,
        gemm_wgmma_tf32_f32_nt_128x128x32_s4 = <f32, f32, KMajor<Sw128>, KMajor<Sw128>, 32>,
    )
)]
pub fn gemm_wgmma_narrow<
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
    c: OutMatrix<TOut, Walk<BN_NARROW>>,
) {
    gemm_tiles::<
        T,
        TOut,
        LA,
        LB,
        NarrowTile,
        KB,
        BN_NARROW,
        { BN_NARROW * BK_BYTES },
        { NarrowTile::RING_BYTES },
        { NarrowTile::STAGE_BYTES / 4 - STAGING_ELEMS },
    >(a, b, k, alpha, beta, c)
}

/// The kernels' body, for configuration `C` (`BN` its tile's columns; the
/// byte counts its layout's, passed as constants since Rust cannot yet
/// compute a const argument from a type parameter, and checked against `C`
/// at compile time): B's tile in a stage (`B_BYTES`), the ring
/// (`RING_BYTES`), a stage's f32 after the epilogue's staging tiles
/// (`STAGE_REST`).
#[inline(always)]
fn gemm_tiles<
    T: Element,
    TOut: Output + RunElement,
    LA: Layout,
    LB: Layout,
    C: WgmmaTile,
    const KB: usize,
    const BN: usize,
    const B_BYTES: usize,
    const RING_BYTES: usize,
    const STAGE_REST: usize,
>(
    a: TensorMap<T, 3, KB, BOX, Sw128>,
    b: TensorMap<T, 3, KB, BOX, Sw128>,
    k: u32,
    alpha: f32,
    beta: f32,
    mut c: OutMatrix<TOut, Walk<BN>>,
) where
    Width<BN>: AccumulatorWidth,
{
    const {
        assert!(C::BM == BM && C::BN == BN && C::STAGES == STAGES && C::BARRIERS == BARRIERS);
        assert!(
            C::CONSUMERS == 2,
            "the ring's stages hold two consumers' A tiles"
        );
        assert!(C::STAGE_BYTES == 2 * A_BYTES + B_BYTES && B_BYTES == BN * BK_BYTES);
        assert!(RING_BYTES == C::RING_BYTES);
        assert!(C::STAGE_BYTES >= 4 * STAGING_ELEMS && C::STAGE_BYTES.is_multiple_of(16));
        assert!(STAGE_REST == C::STAGE_BYTES / 4 - STAGING_ELEMS);
    };
    const {
        assert!(
            KB * size_of::<T>() == BK_BYTES,
            "a stage is one swizzle span of K"
        )
    };
    // "Full": one arrival, the producer's, plus the stage's bytes.
    let ring = Ring::<STAGES, BARRIERS>::init::<RING_BYTES>(1, C::CONSUMER_THREADS);
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
        C::producer_registers();
        let stages = mainloop::stages::<T, LA, LB, BN, KB, STAGES, 2, A_BYTES, B_BYTES>();
        if thread::linear_thread_id() == 2 * wgmma::WARPGROUP_SIZE {
            a.prefetch();
            b.prefetch();
            // Each stage's "empty" phase: a fresh stage counts as empty, so
            // its first use waits on the phase before the first, complete.
            let mut emptied = [Phase::BEFORE_FIRST; STAGES];
            for tile in c.walk() {
                let (z, m0, n0) = c.walk_origin(&tile);
                let (m0, n0, z) = (m0 as i32, n0 as i32, z as i32);
                mainloop::walk_ring::<STAGES>(
                    steps,
                    #[inline(always)]
                    |step, s| {
                        ring.empty(s).wait(&mut emptied[s]);
                        let (stage, bar) = (&stages[s], ring.full(s));
                        bar.arrive_expect_tx(C::STAGE_BYTES as u32);
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

    C::consumer_registers();
    let stages = mainloop::stages::<T, LA, LB, BN, KB, STAGES, 2, A_BYTES, B_BYTES>();
    // The stage of every tile's last step, whose "empty" arrival waits
    // until the epilogue has staged the accumulator in it, and this warp's
    // staging tile there.
    let last = Ring::<STAGES, BARRIERS>::last_stage(steps);
    let staged_tile = epilogue::staged_tile::<STAGES, STAGE_REST>(last);
    let mut drained_phase = Phase::FIRST;
    let mine = if warpgroup == 0 { 0 } else { 1 };
    // Each stage's "full" phase, carried from tile to tile as the
    // producer's "empty" ones are: both walk the same tiles and steps.
    let mut filled = [Phase::FIRST; STAGES];
    let op = LinearCombination { alpha, beta };
    for tile in c.walk() {
        let mut acc = Accumulator::<BN>::zero();
        mainloop::consume_tile(
            &ring,
            steps,
            &mut filled,
            &mut acc,
            #[inline(always)]
            |s| (stages[s].a[mine], stages[s].b),
        );
        mainloop::drain(&ring, &mut drained_phase);
        epilogue::write_tile(&acc, &staged_tile, c.walk_tile(&tile), &op);
        ring.release_held(steps, last);
    }
}
