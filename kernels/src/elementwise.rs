//! Elementwise kernels: one thread per element, grid-stride so any grid covers any length.

use warpforge_device::{Out, num, thread};
use warpforge_macros::kernel;

/// `y[i] = a * x[i] + y[i]` for `i < y.len()`, in f32 (one rounding: fused multiply-add).
#[kernel]
pub fn axpy_f32(a: f32, x: &[f32], mut y: Out<f32>) {
    let mut i = thread::global_index_x();
    while i < x.len() {
        if let Some(mut yi) = y.at(i) {
            yi.set(num::fma_f32(a, x[i], yi.get()));
        }
        i += thread::grid_stride_x();
    }
}

/// `y[i] = a * x[i] + y[i]` for `i < y.len()`, in f64 (one rounding: fused multiply-add).
#[kernel]
pub fn axpy_f64(a: f64, x: &[f64], mut y: Out<f64>) {
    let mut i = thread::global_index_x();
    while i < x.len() {
        if let Some(mut yi) = y.at(i) {
            yi.set(num::fma_f64(a, x[i], yi.get()));
        }
        i += thread::grid_stride_x();
    }
}
