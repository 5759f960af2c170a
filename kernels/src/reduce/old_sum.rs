//! The first reduction kernel: `sum_f32`, one pass of block partial sums (the
//! host runs it twice). Superseded by the reduction family in [`super`], whose
//! result does not depend on the grid; still used by `ops::sum_f32` and the
//! `doctor` self-check.

use warpforge_device::thread::{self, WARP_SIZE};
use warpforge_device::{Out, shared, sync, warp};
use warpforge_macros::kernel;

/// Sum of `value` over the block, valid in thread 0: warp butterfly sums, one
/// partial per warp through shared memory, then one more warp sum.
///
/// Needs `block_dim().x` a multiple of 32 (every warp full) and 32 f32 of shared memory.
pub fn block_sum_f32(value: f32) -> f32 {
    let partials = shared::dynamic::<f32>();
    let warp_sum = warp::sum_f32(value);
    let (lane, warp_id) = (thread::lane_id(), thread::warp_id());
    if lane == 0 {
        partials.store(warp_id as usize, warp_sum);
    }
    sync::sync_threads();
    let mut total = 0.0;
    if warp_id == 0 {
        let warps = thread::warps_per_block();
        let mine = if lane < warps {
            partials.load(lane as usize)
        } else {
            0.0
        };
        total = warp::sum_f32(mine);
    }
    total
}

/// `partials[b]` = sum of the elements of `x` that block `b` visits in a
/// grid-stride loop. With one block, `partials[0]` is the sum of `x`.
///
/// The order of additions is fixed by the grid and block size, so the result
/// is bit-for-bit reproducible for a given launch shape.
#[kernel(shared = [f32; WARP_SIZE as usize])]
pub fn sum_f32(x: &[f32], mut partials: Out<f32>) {
    let mut acc = 0.0f32;
    let mut i = thread::global_index_x();
    while i < x.len() {
        acc += x[i];
        i += thread::grid_stride_x();
    }
    let total = block_sum_f32(acc);
    if thread::thread_idx().x == 0
        && let Some(mut out) = partials.at(thread::block_idx().x as usize)
    {
        out.set(total);
    }
}
