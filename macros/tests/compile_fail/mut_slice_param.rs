// Every GPU thread would hold the same `&mut [f32]`: aliasing, refused by the macro.
use warpforge_macros::kernel;

#[kernel]
pub fn fill(out: &mut [f32]) {
    out[warpforge_device::thread::global_index_x()] = 1.0;
}

fn main() {}
