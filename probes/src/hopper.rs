//! Hopper probes (sm_90a only: the instructions exist nowhere else, so the
//! kernels are compiled into the probes' sm_90a module and left out of the
//! sm_80 one).

use warpforge_device::swizzle::Sw128;
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
