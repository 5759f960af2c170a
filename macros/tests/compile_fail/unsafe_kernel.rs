// The host launches kernels from safe code, so an `unsafe fn` kernel's
// preconditions would have no one to uphold them.
use warpforge_macros::kernel;

#[kernel]
pub unsafe fn scale(a: f32, x: &[f32], mut y: warpforge_device::Out<f32>) {
    let i = warpforge_device::thread::global_index_x();
    if let (Some(&v), Some(mut o)) = (x.get(i), y.at(i)) {
        o.set(a * v);
    }
}

fn main() {}
