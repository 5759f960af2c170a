//! Implicit-GEMM NHWC convolution on the Hopper main loop (f16/bf16 in, f32
//! accumulation, the input type out, bias and ReLU): the GEMM's
//! composition of collectives — the ring ([`mainloop`]), the epilogue
//! ([`epilogue`], here `acc + bias[k]` then ReLU) and the persistent tile
//! walk (`TileWalk`) — with another producer.
//!
//! The GEMM view: `M = N·P·Q` output pixels (the rows of the NHWC output,
//! so the epilogue writes it as the row-major `M × K` matrix it is), `N =
//! K` output channels, and the depth `R·S·C` in `(r, s, c)` order, the
//! sm_80 implicit GEMM's and the reference's: each k-step is 64 channels of
//! one filter tap, `⌈C / 64⌉` k-steps a tap (a tap's last k-step zero past
//! `C`).
//!
//! - **The producer warpgroup gathers A**: thread `i` owns row `i` of the
//!   tile's A, one output pixel, its `(n, p, q)` decoded once per tile
//!   (two 32-bit divisions by the launch's sizes);
//!   for each k-step it finds the tap's input pixel (one add per
//!   coordinate, two unsigned comparisons: inside the image or in the
//!   padding) and copies the step's 8 chunks of 8 channels as 16-byte
//!   `cp.async` straight into the 128B-swizzled K-major operand tile
//!   `wgmma` reads, zero-filled in the padding, past `C`, and for rows past
//!   `M` (reading nothing there). A thread keeps [`LAG`] k-steps of copies
//!   in flight: after issuing step `j` it waits for step `j − LAG`'s group
//!   (`cp.async.wait_group`), fences (`fence.proxy.async`: the copies are
//!   the generic proxy's writes, `wgmma` reads through the async proxy) and
//!   arrives on that stage's "full" barrier, which expects the 128
//!   producer threads; a tile's last `LAG` steps are flushed after its
//!   walk. `LAG ≤ STAGES − 2` keeps the ring live: a stage the producer
//!   waits to refill was released by a consumer step whose copies had
//!   already been published.
//! - **B, the weights** `K × R·S·C` (the library's NHWC weights `K, R, S,
//!   C`), come by TMA as the GEMM's B, K-major: a map whose dimension 0 is
//!   the channels, 1 the output channels (`R·S·C` apart) and 2 the tap (`C`
//!   apart), so a box at `[c0, k0, tap]` is zero past `C` exactly where A
//!   is. The producer's thread 0 adds B's bytes to the stage's "full"
//!   phase (`expect_tx`) before its own arrival.
//! - **The consumers** are the GEMM's (`mainloop::consume_tile`): a tile
//!   of 128 × 128, four `wgmma.m64n128k16` a k-step per consumer
//!   warpgroup, one group in flight.
//!
//! Bounds: every chunk copied is a whole chunk of `x` (`AlignedChunks`,
//! checked per chunk on the emulator: a wanted chunk outside is a fault;
//! zeros on the GPU); every element written is in the tile `TileWalk`
//! gives the warp, clipped to the output. The host checks that `C` and `K`
//! are multiples of 8, `x` 16-byte aligned, and every size within 32 bits.

use crate::config::WgmmaTile;
use crate::epilogue::{self, Combine, STAGING_ELEMS};
use crate::mainloop::{self, Ring, Stage};
use core::num::NonZeroU32;
use warpforge_device::mbarrier::Phase;
use warpforge_device::mma::{self, AlignedChunks};
use warpforge_device::num::Output;
use warpforge_device::own::{RunElement, TileWalk};
use warpforge_device::swizzle::Sw128;
use warpforge_device::tma::TensorMap;
use warpforge_device::unroll::unroll;
use warpforge_device::wgmma::{self, Accumulator, Element, KMajor};
use warpforge_device::{Global, OutMatrix, bf16, f16, thread, warp};
use warpforge_macros::kernel;

crate::config::tile_config!(
    /// The convolution's tile configuration: 128 output pixels × 128
    /// output channels (ResNet's K is 64…512: a 256-wide tile would leave
    /// half of a 64- or 128-channel layer's B and accumulators empty),
    /// k-steps of 64 (one tap's channels), a 4-stage ring of 32 KiB
    /// stages (`unroll` writes out 4: a fifth stage would be a loop, its
    /// tiles and barriers indexed at run time, in local memory), two
    /// consumer warpgroups, the gathering producer at 112 registers (its
    /// pixel, window and walk state; at 56 it spilled, at 104 it spilled 40
    /// bytes of per-tile state), so the consumers at 192 (a 64 × 128
    /// accumulator is 64 of them; no spills).
    ConvTile: 128 x 128 x 64, 4 stages, 2 consumers, 112 producer registers
);

/// Rows (output pixels) of the block's tile.
pub const BM: usize = ConvTile::BM;
/// Columns (output channels) of the block's tile.
pub const BN: usize = ConvTile::BN;
/// K per stage: 64 channels of one tap.
pub const BK: usize = ConvTile::BK;
/// Stages of the ring.
pub const STAGES: usize = ConvTile::STAGES;
/// Consumer warpgroups (each 64 rows of the tile).
const CONSUMERS: usize = ConvTile::CONSUMERS;
/// Bands of tile rows the walk takes the tiles in (`TileWalk`'s `G`).
pub const BANDS: usize = 8;
/// Threads a block: two consumer warpgroups and the producer's.
pub const THREADS: u32 = ConvTile::THREADS;
const _: () = assert!(THREADS == 384, "the kernel's max_threads");
/// The weights' map's box: 64 channels × 64 output channels, one 128-byte
/// swizzle span wide.
pub const BOX: usize = 64;
/// The k-steps of copies a producer thread keeps in flight.
pub const LAG: u32 = 2;
const _: () = assert!(
    LAG as usize <= STAGES - 2 && LAG <= 7,
    "the ring stays live"
);

const A_ELEMS: usize = 64 * BK;
const B_ELEMS: usize = BN * BK;
/// B's bytes a stage (the TMA's; A's are the gather's arrivals).
const B_BYTES: u32 = (B_ELEMS * 2) as u32;
const STAGE_BYTES: usize = ConvTile::STAGE_BYTES;
const RING_BYTES: usize = ConvTile::RING_BYTES;
const BARRIERS: usize = ConvTile::BARRIERS;
const SHARED_BYTES: usize = ConvTile::SHARED_BYTES;
const STAGE_REST: usize = STAGE_BYTES / 4 - STAGING_ELEMS;
const _: () = assert!(
    STAGE_BYTES >= 4 * STAGING_ELEMS,
    "the staging tiles fit a stage"
);
/// The producer's threads: one per row of the tile's A.
const PRODUCERS: u32 = wgmma::WARPGROUP_SIZE;
const _: () = assert!(PRODUCERS as usize == BM, "one producer thread per row of A");

/// The weights' tensor map (dimension 0 the channels, 1 the output
/// channels, 2 the filter tap).
pub type WeightMap<'a, T> = TensorMap<'a, T, 3, BOX, BOX, Sw128>;

type Operand = KMajor<Sw128>;

#[inline(always)]
fn stages<T: Element>() -> [Stage<T, Operand, Operand, BN, BK>; STAGES] {
    mainloop::stages::<
        T,
        Operand,
        Operand,
        BN,
        BK,
        STAGES,
        CONSUMERS,
        { A_ELEMS * 2 },
        { B_ELEMS * 2 },
    >()
}

/// The convolution's epilogue: `acc + bias[k]` (when there is a bias),
/// then `max(·, 0)` when ReLU is on (NaN kept, as torch's), in f32, one
/// rounding — the sm_80 kernels' `Geometry::finish`. The output is never
/// read.
struct BiasRelu<'a, T> {
    bias: &'a [T],
    add: bool,
    relu: bool,
}

impl<T: Output> Combine<T> for BiasRelu<'_, T> {
    #[inline(always)]
    fn reads_output(&self) -> bool {
        false
    }

    #[inline(always)]
    fn combine(&self, acc: f32, col: usize, _old: impl FnOnce() -> T) -> T {
        self.fresh(acc, col)
    }

    #[inline(always)]
    fn fresh(&self, acc: f32, col: usize) -> T {
        // Past the bias (never, for a checked launch): no bias, and no
        // bounds check (a trap path in the tile loop serialises the
        // `wgmma`s, C7519).
        let v = if self.add {
            acc + self.bias.get(col).map_or(0.0, |b| b.to_f32())
        } else {
            acc
        };
        // `v < 0` is false for NaN: NaN passes through.
        T::from_f32(if self.relu && v < 0.0 { 0.0 } else { v })
    }
}

const fn split(v: u64) -> (u32, u32) {
    ((v >> 32) as u32, v as u32)
}

/// The convolution's sizes, each pair of `u32` packed in a `u64` (the
/// sm_80 kernels' `Geometry::pack`, `groups = 1`): `(h, w)`, `(r, s)`,
/// `(p, q)`, strides, padding (top, left), dilations, `(c, k)`, `(1,
/// flags)` with flags bit 0 bias, bit 1 ReLU.
#[kernel(
    shared = [u8; SHARED_BYTES],
    max_threads = 384,
    min_blocks = 1,
    instances(
        conv2d_wgmma_nhwc_f16_128x128x64_s4 = <f16>,
        conv2d_wgmma_nhwc_bf16_128x128x64_s4 = <bf16>,
    )
)]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_wgmma<T: Element + Output + RunElement>(
    x: Global<T>,
    w: TensorMap<T, 3, BOX, BOX, Sw128>,
    bias: &[T],
    mut y: OutMatrix<T, TileWalk<BM, BN, 16, BN, BANDS>>,
    hw: u64,
    rs: u64,
    pq: u64,
    stride: u64,
    pad: u64,
    dil: u64,
    chans: u64,
    groups: u64,
) {
    // "Full": the producer warpgroup's 128 arrivals, plus B's bytes.
    let ring = Ring::<STAGES, BARRIERS>::init::<RING_BYTES>(PRODUCERS, ConvTile::CONSUMER_THREADS);
    let ((h, wd), (r, s), (p, q)) = (split(hw), split(rs), split(pq));
    let (c, _) = split(chans);
    // k-steps a tap, and a tile's.
    let per_tap = c.div_ceil(BK as u32);
    let steps = (r * s).wrapping_mul(per_tap);
    let warpgroup = warp::shuffle_idx(u32::MAX, thread::warp_id() / 4, 0);

    if warpgroup == 2 {
        ConvTile::producer_registers();
        let stages = stages::<T>();
        let (sh, sw) = split(stride);
        let (pt, pl) = split(pad);
        let (dh, dw) = split(dil);
        // This thread's row of A, and which consumer's A tile holds it.
        let row = (thread::linear_thread_id() - 2 * wgmma::WARPGROUP_SIZE) as usize;
        let (half, row_in) = ((row / 64) % 2, row % 64);
        let leader = row == 0;
        let Some(x) = AlignedChunks::check(x) else {
            panic!("conv2d_wgmma: the input must start 16-byte aligned, below 2^32 chunks")
        };
        // 32-bit divisions by the launch's sizes, once per tile (a
        // `Divisor` is made by a 64-bit division, a call, and any call in
        // the kernel makes ptxas serialise the consumers' `wgmma`s, C7509).
        let (Some(by_pq), Some(by_q)) = (NonZeroU32::new(p * q), NonZeroU32::new(q)) else {
            panic!("conv2d_wgmma: P·Q and Q within 1 ..= 2^32 − 1")
        };
        let rows = y.rows();
        let c8 = c / 8;
        // Whether every k-step's 8 chunks are inside C (C a multiple of
        // 64): then no chunk is tested against C.
        let whole_steps = c.is_multiple_of(BK as u32);
        // Moves per tap (wrapping, uniform over the block), in chunks of
        // the input: to the next tap's column (`dw` pixels on), and after
        // a row's last tap (which already moved `S` columns on) to the next
        // row's first (`dh` rows on, `S` columns back).
        let col_step = dw.wrapping_mul(c8);
        let row_step = dh
            .wrapping_mul(wd)
            .wrapping_mul(c8)
            .wrapping_sub(col_step.wrapping_mul(s));
        if leader {
            w.prefetch();
        }
        let mut emptied = [Phase::BEFORE_FIRST; STAGES];
        for tile in y.walk() {
            let (_, m0, n0) = y.walk_origin(&tile);
            // This thread's output pixel, decoded once per tile: its input
            // window's corner (wrapping below 0 in the padding) and, as
            // chunks of the input, the corner's first channel.
            let m = m0 + row;
            let row_ok = m < rows;
            let m32 = m as u32;
            let (n, pix) = (m32 / by_pq, m32 % by_pq);
            let (op, oq) = (pix / by_q, pix % by_q);
            let ih0 = (op * sh).wrapping_sub(pt);
            let iw0 = (oq * sw).wrapping_sub(pl);
            let corner = ((n * h).wrapping_add(ih0))
                .wrapping_mul(wd)
                .wrapping_add(iw0)
                .wrapping_mul(c8);
            // The k-step's tap (ri, si), its offsets from the corner (rows,
            // columns: `ri·dh`, `si·dw`), its channels' first chunk, and
            // the steps left in the tap: uniform over the block.
            let (mut ri, mut si, mut dy, mut dx) = (0u32, 0u32, 0u32, 0u32);
            let (mut offset, mut in_tap) = (0u32, per_tap);
            let k0 = n0 as i32;
            mainloop::walk_ring::<STAGES>(
                steps,
                #[inline(always)]
                |step, st| {
                    ring.empty(st).wait(&mut emptied[st]);
                    let stage = &stages[st];
                    let c0 = (per_tap - in_tap) * BK as u32;
                    if leader {
                        let full = ring.full(st);
                        full.expect_tx(B_BYTES);
                        w.load_operand([c0 as i32, k0, (ri * s + si) as i32], stage.b, full);
                    }
                    // The tap's input pixel: inside the image, or padding.
                    let ih = ih0.wrapping_add(dy);
                    let iw = iw0.wrapping_add(dx);
                    let inside = row_ok & (ih < h) & (iw < wd);
                    let a = if half == 0 { stage.a[0] } else { stage.a[1] };
                    let first = corner.wrapping_add(offset);
                    unroll::<8>(
                        #[inline(always)]
                        |j| {
                            let in_c = whole_steps | (c0 + 8 * (j as u32) < c);
                            a.copy_chunk_or_zero(
                                row_in,
                                j,
                                &x,
                                first.wrapping_add(j as u32),
                                inside & in_c,
                            );
                        },
                    );
                    mma::cp_async_commit();
                    // Step `step − LAG`'s copies have landed: publish them.
                    if step >= LAG {
                        mma::cp_async_wait_group(LAG);
                        wgmma::fence_operands();
                        ring.full((st + STAGES - LAG as usize) % STAGES).arrive();
                    }
                    // The next k-step: 64 channels on, or the next tap.
                    in_tap -= 1;
                    offset = offset.wrapping_add((BK / 8) as u32);
                    if in_tap == 0 {
                        in_tap = per_tap;
                        offset = offset.wrapping_sub(per_tap * (BK / 8) as u32);
                        si += 1;
                        dx = dx.wrapping_add(dw);
                        offset = offset.wrapping_add(col_step);
                        if si == s {
                            si = 0;
                            ri += 1;
                            dx = 0;
                            dy = dy.wrapping_add(dh);
                            offset = offset.wrapping_add(row_step);
                        }
                    }
                },
            );
            // The tile's last `LAG` steps: every copy landed, published.
            mma::cp_async_wait_group(0);
            wgmma::fence_operands();
            unroll::<STAGES>(
                #[inline(always)]
                |st| {
                    // Stage `st` held step `steps − 1 − d` for d < min(LAG, steps).
                    let d = (steps as usize + STAGES - 1 - st) % STAGES;
                    if (d as u32) < LAG.min(steps) {
                        ring.full(st).arrive();
                    }
                },
            );
        }
        return;
    }

    ConvTile::consumer_registers();
    let stages = stages::<T>();
    let last = Ring::<STAGES, BARRIERS>::last_stage(steps);
    let staged_tile = epilogue::staged_tile::<STAGES, STAGE_REST>(last);
    let mut drained_phase = Phase::FIRST;
    let mine = if warpgroup == 0 { 0 } else { 1 };
    let mut filled = [Phase::FIRST; STAGES];
    let (_, flags) = split(groups);
    let op = BiasRelu {
        bias,
        add: flags & 1 != 0,
        relu: flags & 2 != 0,
    };
    for tile in y.walk() {
        let mut acc = Accumulator::<BN>::zero();
        mainloop::consume_tile(
            &ring,
            steps,
            &mut filled,
            &mut acc,
            #[inline(always)]
            |st| (stages[st].a[mine], stages[st].b),
        );
        mainloop::drain(&ring, &mut drained_phase);
        epilogue::write_tile(&acc, &staged_tile, y.walk_tile(&tile), &op);
        ring.release_held(steps, last);
    }
}
