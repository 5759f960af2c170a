// `Out::at` returns `Option<Slot>`: a write must handle the out-of-bounds case.
use warpforge_device::{Out, thread};
use warpforge_macros::kernel;

#[kernel]
pub fn fill(mut out: Out<f32>) {
    let i = thread::global_index_x();
    out.at(i).set(1.0);
}

fn main() {}
