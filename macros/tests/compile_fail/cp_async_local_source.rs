// `cp.async` reads global memory only: its source must be a `Global` kernel
// input, not a kernel-local array or a plain `&[T]`.
use warpforge_device::{Out, f16, mma, shared};
use warpforge_macros::kernel;

#[kernel(shared = [f16; 16])]
pub fn stage(x: &[f16], mut y: Out<f32>) {
    let tile = shared::dynamic::<f16>();
    let local = [f16::ZERO; 8];
    mma::cp_async_16(&tile, 0, &local, 0);
    mma::cp_async_16(&tile, 8, x, 0);
    mma::cp_async_wait_all();
    if let Some(mut o) = y.at(0) {
        o.set(tile.load(0).to_f32());
    }
}

fn main() {}
