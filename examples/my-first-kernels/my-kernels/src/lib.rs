//! My first warpforge kernels. Each is a plain Rust function marked
//! `#[kernel]`: `my-app`'s build compiles this crate to PTX for the GPU, and on
//! the host the same functions run in warpforge's CPU emulator.
//!
//! The two attributes below are all a kernels crate needs: no `std` on the GPU,
//! and the `gpu-kernel` ABI that `#[kernel]` gives each entry point there.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]

use warpforge_device::{In2, Out, thread, warp};
use warpforge_macros::kernel;

/// `y = min(max(x + bias, 0), cap)` over a `rows × cols` row-major matrix,
/// with one bias per column: a bias, then a ReLU clamped at `cap` (ReLU6 for
/// `cap = 6`). One thread per element on a 2-D grid: x along a row, y down a
/// column. Threads of the ragged edge get no slot and write nothing.
#[kernel]
pub fn bias_relu_clamp(rows: usize, cols: usize, cap: f32, x: &[f32], bias: &[f32], y: Out<f32>) {
    // Views of the flat buffers as matrices; `None` (nothing to do) if they are too short.
    let (Some(x), Some(mut y)) = (In2::new(x, rows, cols, cols), y.into_2d(rows, cols, cols))
    else {
        return;
    };
    let (row, col) = (thread::global_index_y(), thread::global_index_x());
    if let (Some(v), Some(&b), Some(mut out)) = (x.get(row, col), bias.get(col), y.at(row, col)) {
        out.set((v + b).max(0.0).min(cap));
    }
}

/// Divides each row of a `rows × cols` row-major matrix by its largest
/// absolute value, so every row's largest magnitude becomes 1 (a row of zeros
/// stays zero). One warp per row: each lane strides over the row's columns,
/// `warp::max_f32` gives every lane the row's maximum, then each lane writes
/// its columns. `block = (32, 4)`: 32 lanes along a row, 4 rows per block; the
/// host refuses any other block shape before it launches.
#[kernel(block = (32, 4))]
pub fn row_maxabs_normalize(rows: usize, cols: usize, x: &[f32], y: Out<f32>) {
    let (Some(x), Some(mut y)) = (In2::new(x, rows, cols, cols), y.into_2d(rows, cols, cols))
    else {
        return;
    };
    let row = thread::global_index_y();
    let lane = thread::thread_idx().x as usize;
    // The same for all 32 lanes of a warp, so a warp past the last row leaves
    // as a whole and the warp-wide max below always has all its lanes.
    let Some(values) = x.row(row) else {
        return;
    };
    let mut largest = 0.0f32;
    for v in values.iter().skip(lane).step_by(32) {
        largest = largest.max(v.abs());
    }
    let largest = warp::max_f32(largest);
    for col in (lane..cols).step_by(32) {
        if let Some(mut out) = y.at(row, col) {
            out.set(if largest == 0.0 {
                0.0
            } else {
                values[col] / largest
            });
        }
    }
}
