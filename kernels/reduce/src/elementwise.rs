//! Elementwise kernels: one thread per element, grid-stride so any grid covers any length.
//!
//! Each output is declared `Out<T, Elements>`: a thread gets slots only for
//! the elements of its own grid-stride walk, which no other thread's walk
//! meets, so the kernels cannot race on their outputs
//! (`warpforge_device::own`).

use warpforge_device::num::Fma;
use warpforge_device::own::Elements;
use warpforge_device::{Global, Out};
use warpforge_macros::kernel;

/// `y[i] = a * x[i] + y[i]` for every `i` in both, with one rounding (fused multiply-add).
#[inline(always)]
fn axpy<T: Fma>(a: T, x: Global<'_, T>, y: &mut Out<T, Elements>) {
    for mut yi in y.grid_stride() {
        // The walk is increasing: past the end of `x`, so is every later index.
        // (`load`, not `get`: the emulator's memory profile counts it.)
        let Some(xi) = x.load(yi.index()) else {
            break;
        };
        yi.set(a.fma(xi, yi.get()));
    }
}

/// `y = a·x + y` in f32, one rounding per element.
#[kernel]
pub fn axpy_f32(a: f32, x: Global<f32>, mut y: Out<f32, Elements>) {
    axpy(a, x, &mut y);
}

/// `y = a·x + y` in f64, one rounding per element.
#[kernel]
pub fn axpy_f64(a: f64, x: Global<f64>, mut y: Out<f64, Elements>) {
    axpy(a, x, &mut y);
}
