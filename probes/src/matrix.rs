//! 2-D guard probes: a transpose over a 2-D grid, whose ragged edge threads
//! get `None` from the views instead of reading or writing past a row.

use warpforge_device::{In2, Out, thread};
use warpforge_macros::kernel;

/// `out` (cols × rows, row stride `rows`) = the transpose of `x` (rows × cols,
/// row stride `x_stride`). Thread (x, y) of the 2-D grid moves element (y, x).
/// Panics (a kernel fault, not a write out of bounds) if a buffer is too small
/// for the shape.
#[kernel]
pub fn probe_transpose(x: &[f32], rows: u32, cols: u32, x_stride: u32, out: Out<f32>) {
    let (rows, cols) = (rows as usize, cols as usize);
    let input = In2::new(x, rows, cols, x_stride as usize).expect("x is too small for rows × cols");
    let mut output = out
        .into_2d(cols, rows, rows)
        .expect("out is too small for cols × rows");
    let (c, r) = (thread::global_index_x(), thread::global_index_y());
    if let (Some(v), Some(mut o)) = (input.get(r, c), output.at(c, r)) {
        o.set(v);
    }
}

/// Two compile-time-sized shared tiles, one after the other: `a` (64 f32) and
/// `b` (32 u32). Thread t of a 64-thread block stores `x[i]` in `a[t]` and
/// `t` in `b[t % 32]`, then `out[i] = a[63 − t] + b[(t + 1) % 32]`.
#[kernel(shared = [u32; 96])]
pub fn probe_shared_tiles(x: &[f32], mut out: Out<f32>) {
    let a = warpforge_device::shared::array::<f32, 64>();
    let b = a.after::<u32, 32>();
    let t = thread::thread_idx().x as usize;
    let i = thread::global_index_x();
    a.store(t, x.get(i).copied().unwrap_or(0.0));
    if t < 32 {
        b.store(t, t as u32);
    }
    warpforge_device::sync::sync_threads();
    let v = a.load(63 - t) + b.load((t + 1) % 32) as f32;
    if let Some(mut o) = out.at(i) {
        o.set(v);
    }
}
