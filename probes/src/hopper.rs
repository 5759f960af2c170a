//! Hopper probes: `wgmma` (f16/bf16 and tf32), `setmaxnreg`, TMA tensor
//! copies, and the convolution producer's `cp.async` gather into swizzled
//! operand tiles (sm_90a only: the instructions exist nowhere else, so the
//! kernels are compiled into the probes' sm_90a module and left out of the
//! sm_80 one).

use warpforge_device::mbarrier::{MBarriers, Phase};
use warpforge_device::mma::{self, AlignedChunks};
use warpforge_device::own::TileWalk;
use warpforge_device::swizzle::{Mode, Sw128};
use warpforge_device::tma::{self, StoreIssuer, StoreMatrix, TensorMap};
use warpforge_device::wgmma::{self, Accumulator, Element, KMajor, Layout, MnMajor, OperandTile};
use warpforge_device::{Global, Out, bf16, f16, shared, sync, thread};
use warpforge_macros::kernel;

/// Columns of the probes' product.
pub const WGMMA_N: usize = 128;
/// Its depth in 2-byte elements: 4 k-steps of 16.
pub const WGMMA_K: usize = 64;
/// Its depth in tf32 (f32) elements: 4 k-steps of 8, the same 128 bytes of K.
pub const WGMMA_K_TF32: usize = 32;

/// A's tile (64 rows) and B's (`WGMMA_N` rows) in bytes: 128 bytes of K a
/// row (one swizzle span) whatever the element, so one shared layout serves
/// every probe type.
const A_TILE_BYTES: usize = 64 * 128;
const B_TILE_BYTES: usize = WGMMA_N * 128;

/// A's tile (`64 × KX`, K-major) and B's (`WGMMA_N × KX` of Bᵀ, layout
/// `LB`) at the start of shared memory, 128B-swizzled.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "ptx80"))]
type Tiles<T, LB, const KX: usize> = (
    OperandTile<T, 64, KX, KMajor<Sw128>>,
    OperandTile<T, WGMMA_N, KX, LB>,
);

/// The probes' [`Tiles`]; `None` if shared memory does not start on the
/// swizzle's 1024-byte period.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "ptx80"))]
#[inline(always)]
fn tiles<T: Element, LB: Layout, const KX: usize>() -> Option<Tiles<T, LB, KX>> {
    let a_tile = shared::array::<u8, A_TILE_BYTES>();
    let b_tile = a_tile.after::<u8, B_TILE_BYTES>();
    Some((OperandTile::new(a_tile)?, OperandTile::new(b_tile)?))
}

/// `D = A·B` (64 × `WGMMA_N`, row-major, f32) from the tiles by the calling
/// warpgroup: a zero accumulator, the tiles' 4 k-steps in one group, each
/// thread's results written to `d`.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "ptx80"))]
#[inline(always)]
fn store_product<T: Element, LB: Layout, const KX: usize>(
    (at, bt): Tiles<T, LB, KX>,
    d: &mut Out<f32>,
) {
    let t = wgmma::thread_in_warpgroup();
    let mut acc = Accumulator::<WGMMA_N>::zero();
    let mut run = acc.start();
    run.mma(at.descriptor::<0>(), bt.descriptor::<0>());
    run.mma(at.descriptor::<1>(), bt.descriptor::<1>());
    run.mma(at.descriptor::<2>(), bt.descriptor::<2>());
    run.mma(at.descriptor::<3>(), bt.descriptor::<3>());
    run.finish();
    acc.for_each(t, |_, r, col, v| {
        if let Some(mut o) = d.at(r * WGMMA_N + col) {
            o.set(v);
        }
    });
}

/// The block's `threads` threads store A (64 × KX, row-major) K-major and
/// B (KX × 128, k × n, row-major) in layout `LB`, both 128-byte swizzled;
/// then the warpgroup whose threads `consumer` says `true` for computes
/// `D = A·B + C` (64 × 128, row-major) in 4 k-steps (two committed groups,
/// a `wait::<1>` between them). Threads outside that warpgroup return
/// after the barrier.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "ptx80"))]
fn product<T: Element + Default, LB: Layout, const KX: usize>(
    a: &[T],
    b: &[T],
    c: &[f32],
    d: &mut Out<f32>,
    threads: usize,
    consumer: impl FnOnce() -> bool,
) {
    let Some((at, bt)) = tiles::<T, LB, KX>() else {
        return;
    };
    let me = thread::linear_thread_id() as usize;
    for i in (me..64 * KX).step_by(threads) {
        at.store(i / KX, i % KX, a.get(i).copied().unwrap_or_default());
    }
    for i in (me..KX * WGMMA_N).step_by(threads) {
        let (k, n) = (i / WGMMA_N, i % WGMMA_N);
        bt.store(n, k, b.get(i).copied().unwrap_or_default());
    }
    wgmma::fence_operands();
    sync::sync_threads();
    if !consumer() {
        return;
    }
    let t = wgmma::thread_in_warpgroup();
    let mut acc = Accumulator::<WGMMA_N>::from_fn(t, |r, col| {
        c.get(r * WGMMA_N + col).copied().unwrap_or(0.0)
    });
    let mut run = acc.start();
    run.mma(at.descriptor::<0>(), bt.descriptor::<0>());
    run.mma(at.descriptor::<1>(), bt.descriptor::<1>());
    run.commit();
    run.mma(at.descriptor::<2>(), bt.descriptor::<2>());
    run.mma(at.descriptor::<3>(), bt.descriptor::<3>());
    run.commit();
    run.wait::<1>();
    run.finish();
    acc.for_each(t, |_, r, col, v| {
        if let Some(mut o) = d.at(r * WGMMA_N + col) {
            o.set(v);
        }
    });
}

/// `D = A·B + C` through `wgmma` (bf16 in, f32 out; see `product`) by one
/// warpgroup. Launch with one block of 128 threads.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "ptx80"))]
#[kernel(shared = [bf16; 12288])]
pub fn probe_wgmma_bf16(a: &[bf16], b: &[bf16], c: &[f32], mut d: Out<f32>) {
    product::<bf16, MnMajor<Sw128>, WGMMA_K>(a, b, c, &mut d, 128, || true);
}

/// The same product in a warp-specialised block of two warpgroups: after
/// both store the tiles, warpgroup 0 gives registers back (`setmaxnreg.dec`
/// to 40) and ends, warpgroup 1 takes them (`.inc` to 232) and multiplies.
/// The launch bounds give ptxas the register budget `setmaxnreg` needs.
/// Launch with one block of 256 threads.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "ptx80"))]
#[kernel(shared = [bf16; 12288], max_threads = 256, min_blocks = 1)]
pub fn probe_wgmma_specialised(a: &[bf16], b: &[bf16], c: &[f32], mut d: Out<f32>) {
    product::<bf16, MnMajor<Sw128>, WGMMA_K>(a, b, c, &mut d, 256, || {
        if thread::warp_id() < 4 {
            wgmma::release_registers::<40>();
            false
        } else {
            wgmma::increase_registers::<232>();
            true
        }
    });
}

/// `D = A·B` (64 × 128, row-major, f32) with both operands brought by the
/// TMA: A's 64 × 64 tile of the row-major tensor `a` from row `m0`, B's
/// 64 × 128 tile of the row-major (k × n) tensor `b` from column `n0`, one
/// mbarrier phase for all three boxes; elements outside the tensors are
/// zeros. Both maps are of bf16 rows, copied in boxes of 64 columns (one
/// 128-byte swizzle span) × 64 rows. Launch with one block of 128 threads.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "ptx80"))]
#[kernel(shared = [bf16; 12292], max_threads = 128, min_blocks = 1)]
pub fn probe_tma_wgmma(
    a: TensorMap<bf16, 2, 64, 64, Sw128>,
    b: TensorMap<bf16, 2, 64, 64, Sw128>,
    m0: i32,
    n0: i32,
    mut d: Out<f32>,
) {
    let bars = MBarriers::init(
        shared::array::<u8, { A_TILE_BYTES + B_TILE_BYTES }>().after::<u64, 1>(),
        [1],
    );
    let full = bars.get(0);
    let Some((at, bt)) = tiles::<bf16, MnMajor<Sw128>, WGMMA_K>() else {
        return;
    };
    if thread::linear_thread_id() == 0 {
        a.prefetch();
        b.prefetch();
        full.arrive_expect_tx(A_TILE_BYTES as u32 + B_TILE_BYTES as u32);
        a.load_operand([0, m0], at, full);
        b.load_operand([n0, 0], bt, full);
    }
    full.wait(&mut Phase::FIRST.clone());
    store_product((at, bt), &mut d);
}

/// `D = A·B + C` through `wgmma.mma_async...f32.tf32.tf32` (`m64n128k8`,
/// f32 in, read as tf32: each element's low 13 fraction bits ignored) by
/// one warpgroup: A 64 × 32 row-major, B 32 × 128 (k × n) row-major, both
/// stored K-major (tf32 has no transposed operand), D and C 64 × 128
/// row-major (see `product`). Launch with one block of 128 threads.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "ptx80"))]
#[kernel(shared = [u8; A_TILE_BYTES + B_TILE_BYTES])]
pub fn probe_wgmma_tf32(a: &[f32], b: &[f32], c: &[f32], mut d: Out<f32>) {
    product::<f32, KMajor<Sw128>, WGMMA_K_TF32>(a, b, c, &mut d, 128, || true);
}

/// The gather probe's destination chunks: A's 64 rows, then B's `WGMMA_N`,
/// 8 chunks of 16 bytes (128 bytes of K) each.
pub const GATHER_CHUNKS: usize = (64 + WGMMA_N) * 8;
/// A destination chunk of the gather probe's map that is zero-filled.
pub const ZERO_FILL: u32 = u32::MAX;

/// The Hopper convolution's A path (`conv2d_wgmma`'s producer), on both
/// operands: in a block of two warpgroups, every thread first fills A's
/// and B's tiles with all-ones bits (a NaN in every element type, so a
/// chunk neither copied nor zero-filled poisons D), then the block's
/// barrier; warpgroup 1, the producer, fills destination chunk `q` of the
/// tiles (A's 64 rows × 8 chunks, then B's `WGMMA_N` rows, both K-major,
/// 128B-swizzled: `OperandTile::copy_chunk_or_zero`) by a 16-byte
/// `cp.async` of chunk `map[q]` of `x`, or with zeros where `map[q]` is
/// [`ZERO_FILL`] (reading nothing), waits for its copies, fences them for
/// the async proxy (`wgmma` reads through it) and arrives on a "full"
/// mbarrier that expects its 128 threads; warpgroup 0 waits on it and
/// computes `D = A·Bᵀ` (64 × `WGMMA_N`, row-major, f32; `KX` deep: 64 f16
/// or 32 tf32) in 4 k-steps of `wgmma`. Launch with one block of 256
/// threads.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "ptx80"))]
#[kernel(
    shared = [u8; A_TILE_BYTES + B_TILE_BYTES + 8],
    max_threads = 256,
    min_blocks = 1,
    instances(
        probe_gather_wgmma_f16 = <f16, 64>,
        probe_gather_wgmma_tf32 = <f32, 32>,
    )
)]
pub fn probe_gather_wgmma<T: Element, const KX: usize>(x: Global<T>, map: &[u32], mut d: Out<f32>) {
    const WORDS: usize = (A_TILE_BYTES + B_TILE_BYTES) / 4;
    let me = thread::linear_thread_id() as usize;
    let words = shared::array::<u32, WORDS>();
    for i in (me..WORDS).step_by(256) {
        words.store(i, u32::MAX);
    }
    // The poison is the generic proxy's, as the copies are: fenced like
    // them, and ordered before them by the barrier in `MBarriers::init`.
    wgmma::fence_operands();
    let bars = MBarriers::init(words.after::<u64, 1>(), [wgmma::WARPGROUP_SIZE]);
    let full = bars.get(0);
    let (Some(tiles), Some(x)) = (tiles::<T, KMajor<Sw128>, KX>(), AlignedChunks::check(x)) else {
        return;
    };
    let t = wgmma::thread_in_warpgroup() as usize;
    if thread::warp_id() >= 4 {
        let (at, bt) = tiles;
        let source = |q: usize| {
            let chunk = map.get(q).copied().unwrap_or(ZERO_FILL);
            (chunk, chunk != ZERO_FILL)
        };
        for q in (t..64 * 8).step_by(128) {
            let (chunk, wanted) = source(q);
            at.copy_chunk_or_zero(q / 8, q % 8, &x, chunk, wanted);
        }
        for q in (t..WGMMA_N * 8).step_by(128) {
            let (chunk, wanted) = source(64 * 8 + q);
            bt.copy_chunk_or_zero(q / 8, q % 8, &x, chunk, wanted);
        }
        mma::cp_async_commit();
        mma::cp_async_wait_group(0);
        wgmma::fence_operands();
        full.arrive();
        return;
    }
    full.wait(&mut Phase::FIRST.clone());
    store_product(tiles, &mut d);
}

/// The value `probe_tma_store` writes at (batch, row, column): exact in f32
/// for the sizes the tests use, distinct, never 0.
#[inline(always)]
pub fn stored_value(batch: usize, row: usize, col: usize) -> f32 {
    (100_000 * batch + 1000 * row + col + 1) as f32
}

/// Writes [`stored_value`] to every element of `c` by TMA stores: a
/// persistent walk of 64 × 64 tiles, each stored as 2 × 2 boxes of 32 × 32
/// f32 (128B-swizzled) through two staging tiles in turn — the block's 128
/// threads fill one (each its 8 elements, at their swizzled places), fence
/// it for the copy engine, a barrier; thread 0 stores it, commits and
/// waits until only that store may still read (`wait_read::<1>`), so the
/// other staging tile is free again after the next barrier. Launch with a
/// 1-D grid of any size, 128 threads.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "ptx80"))]
#[kernel(shared = [f32; 2048], max_threads = 128, min_blocks = 1)]
pub fn probe_tma_store(c: StoreMatrix<f32, TileWalk<64, 64, 64, 64, 1>, 32, 32, Sw128>) {
    let staging = [
        shared::array::<f32, 1024>(),
        shared::array::<f32, 1024>().after::<f32, 1024>(),
    ];
    let issuer = StoreIssuer::new();
    if issuer.is_some() {
        c.prefetch();
    }
    let me = thread::linear_thread_id() as usize;
    for tile in c.walk() {
        let (batch, r0, c0) = c.walk_origin(&tile);
        for k in 0..4 {
            let (part, stage) = ([k / 2, k % 2], staging[k % 2]);
            for i in (me..1024).step_by(128) {
                let (r, col) = (r0 + 32 * part[0] + i / 32, c0 + 32 * part[1] + i % 32);
                let at = Sw128::SWIZZLE.apply(4 * i) / 4;
                stage.store(at, stored_value(batch, r, col));
            }
            tma::fence_for_store();
            sync::sync_threads();
            if let Some(issuer) = &issuer {
                c.store(issuer, &tile, part, stage);
                issuer.commit();
                issuer.wait_read::<1>();
            }
            sync::sync_threads();
        }
    }
    if let Some(issuer) = &issuer {
        issuer.wait_read::<0>();
    }
}
