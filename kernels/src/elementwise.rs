//! Elementwise kernels: one thread per element, grid-stride so any grid covers any length.

use warpforge_device::num::Fma;
use warpforge_device::{Out, thread};
use warpforge_macros::kernel;

/// `y[i] = a * x[i] + y[i]` for every `i` in both, with one rounding (fused multiply-add).
#[inline(always)]
fn axpy<T: Fma>(a: T, x: &[T], y: &mut Out<T>) {
    let mut i = thread::global_index_x();
    while i < x.len() {
        if let Some(mut yi) = y.at(i) {
            yi.set(a.fma(x[i], yi.get()));
        }
        i += thread::grid_stride_x();
    }
}

/// `y = a·x + y` in f32, one rounding per element.
#[kernel]
pub fn axpy_f32(a: f32, x: &[f32], mut y: Out<f32>) {
    axpy(a, x, &mut y);
}

/// `y = a·x + y` in f64, one rounding per element.
#[kernel]
pub fn axpy_f64(a: f64, x: &[f64], mut y: Out<f64>) {
    axpy(a, x, &mut y);
}
