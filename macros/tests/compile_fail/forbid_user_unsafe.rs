// `#[kernel]`'s own `unsafe` passes `#![forbid(unsafe_code)]`, but `unsafe`
// the user writes in a kernel is still refused.
#![forbid(unsafe_code)]

use warpforge_device::{Out, thread};
use warpforge_macros::kernel;

#[kernel]
pub fn first(x: &[f32], mut y: Out<f32>) {
    let i = thread::global_index_x();
    if let Some(mut o) = y.at(i) {
        o.set(unsafe { *x.get_unchecked(0) });
    }
}

fn main() {}
