// An output is written only through a slot `Out::at` hands out for an index it
// has checked: indexing an `Out` like a slice does not compile.
use warpforge_device::{Out, thread};
use warpforge_macros::kernel;

#[kernel]
pub fn fill(mut out: Out<f32>) {
    let i = thread::global_index_x();
    out[i] = 1.0;
}

fn main() {}
