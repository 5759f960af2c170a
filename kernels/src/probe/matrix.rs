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
