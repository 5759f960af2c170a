//! Hopper probes (sm_90a only: the instructions exist nowhere else, so the
//! kernels are compiled into the probes' sm_90a module and left out of the
//! sm_80 one). Launch with one block of 128 threads (one warpgroup).

use warpforge_device::swizzle::Sw128;
use warpforge_device::wgmma::{self, Accumulator, KMajor, MnMajor, OperandTile};
use warpforge_device::{Out, bf16, shared, sync, thread};
use warpforge_macros::kernel;

/// Columns of the probe's product.
pub const WGMMA_N: usize = 128;
/// Its depth: 4 k-steps.
pub const WGMMA_K: usize = 64;

/// `D = A·B + C` through `wgmma` (bf16 in, f32 out): A is 64 × 64 and B
/// 64 × 128 (k × n), C and D 64 × 128, all row-major. The threads store A
/// K-major and B MN-major, both 128-byte swizzled, then the warpgroup issues
/// the 4 k-steps (two committed groups, a `wait::<1>` between them).
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "ptx80"))]
#[kernel(shared = [bf16; 12288])]
pub fn probe_wgmma_bf16(a: &[bf16], b: &[bf16], c: &[f32], mut d: Out<f32>) {
    let a_tile = shared::array::<bf16, { 64 * WGMMA_K }>();
    let b_tile = a_tile.after::<bf16, { WGMMA_N * WGMMA_K }>();
    let (Some(at), Some(bt)) = (
        OperandTile::<bf16, 64, WGMMA_K, KMajor<Sw128>>::new(a_tile),
        OperandTile::<bf16, WGMMA_N, WGMMA_K, MnMajor<Sw128>>::new(b_tile),
    ) else {
        return;
    };
    let me = thread::linear_thread_id() as usize;
    for i in (me..64 * WGMMA_K).step_by(128) {
        at.store(
            i / WGMMA_K,
            i % WGMMA_K,
            a.get(i).copied().unwrap_or_default(),
        );
    }
    for i in (me..WGMMA_K * WGMMA_N).step_by(128) {
        let (k, n) = (i / WGMMA_N, i % WGMMA_N);
        bt.store(n, k, b.get(i).copied().unwrap_or_default());
    }
    wgmma::fence_operands();
    sync::sync_threads();
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
