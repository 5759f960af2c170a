//! Hopper probes: `wgmma`, `setmaxnreg`, TMA tensor copies (sm_90a only: the instructions exist nowhere else, so the
//! kernels are compiled into the probes' sm_90a module and left out of the
//! sm_80 one).

use warpforge_device::mbarrier::{MBarriers, Phase};
use warpforge_device::own::TileWalk;
use warpforge_device::swizzle::{Mode, Sw128};
use warpforge_device::tma::{self, StoreIssuer, StoreMatrix, TensorMap};
use warpforge_device::wgmma::{self, Accumulator, KMajor, MnMajor, OperandTile};
use warpforge_device::{Out, bf16, shared, sync, thread};
use warpforge_macros::kernel;

/// Columns of the probes' product.
pub const WGMMA_N: usize = 128;
/// Its depth: 4 k-steps.
pub const WGMMA_K: usize = 64;

/// The block's `threads` threads store A (64 × 64, row-major) K-major and B
/// (64 × 128, k × n, row-major) MN-major, both 128-byte swizzled; then the
/// warpgroup from thread `first` computes `D = A·B + C` (64 × 128, row-major)
/// in 4 k-steps (two committed groups, a `wait::<1>` between them).
/// Threads outside that warpgroup return after the barrier.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "ptx80"))]
fn product(
    a: &[bf16],
    b: &[bf16],
    c: &[f32],
    d: &mut Out<f32>,
    threads: usize,
    consumer: impl FnOnce() -> bool,
) {
    let a_tile = shared::array::<bf16, { 64 * WGMMA_K }>();
    let b_tile = a_tile.after::<bf16, { WGMMA_N * WGMMA_K }>();
    let (Some(at), Some(bt)) = (
        OperandTile::<bf16, 64, WGMMA_K, KMajor<Sw128>>::new(a_tile),
        OperandTile::<bf16, WGMMA_N, WGMMA_K, MnMajor<Sw128>>::new(b_tile),
    ) else {
        return;
    };
    let me = thread::linear_thread_id() as usize;
    for i in (me..64 * WGMMA_K).step_by(threads) {
        at.store(
            i / WGMMA_K,
            i % WGMMA_K,
            a.get(i).copied().unwrap_or_default(),
        );
    }
    for i in (me..WGMMA_K * WGMMA_N).step_by(threads) {
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
    product(a, b, c, &mut d, 128, || true);
}

/// The same product in a warp-specialised block of two warpgroups: after
/// both store the tiles, warpgroup 0 gives registers back (`setmaxnreg.dec`
/// to 40) and ends, warpgroup 1 takes them (`.inc` to 232) and multiplies.
/// The launch bounds give ptxas the register budget `setmaxnreg` needs.
/// Launch with one block of 256 threads.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "ptx80"))]
#[kernel(shared = [bf16; 12288], max_threads = 256, min_blocks = 1)]
pub fn probe_wgmma_specialised(a: &[bf16], b: &[bf16], c: &[f32], mut d: Out<f32>) {
    product(a, b, c, &mut d, 256, || {
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
    let a_tile = shared::array::<bf16, { 64 * WGMMA_K }>();
    let b_tile = a_tile.after::<bf16, { WGMMA_N * WGMMA_K }>();
    let bars = MBarriers::init(b_tile.after::<u64, 1>(), [1]);
    let full = bars.get(0);
    type ATile = OperandTile<bf16, 64, WGMMA_K, KMajor<Sw128>>;
    type BTile = OperandTile<bf16, WGMMA_N, WGMMA_K, MnMajor<Sw128>>;
    let (Some(at), Some(bt)) = (ATile::new(a_tile), BTile::new(b_tile)) else {
        return;
    };
    if thread::linear_thread_id() == 0 {
        a.prefetch();
        b.prefetch();
        full.arrive_expect_tx(ATile::BYTES + BTile::BYTES);
        a.load_operand([0, m0], at, full);
        b.load_operand([n0, 0], bt, full);
    }
    full.wait(&mut Phase::FIRST.clone());
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
