// A kernels crate may `#![forbid(unsafe_code)]`: what `#[kernel]` generates
// (the PTX entry, the `unsafe impl Kernel`, the raw-pointer views) is the
// macro's, and is not reported in the user's crate. Every parameter kind.
#![forbid(unsafe_code)]

use warpforge_device::{Global, Out, thread};
use warpforge_macros::kernel;

/// `y[i] = a·x[i] + z[i]`.
#[kernel(shared = [f32; 32], block = 32)]
pub fn axpy(a: f32, x: &[f32], z: Global<f32>, mut y: Out<f32>) {
    let i = thread::global_index_x();
    if let (Some(&v), Some(&w), Some(mut o)) = (x.get(i), z.get(i), y.at(i)) {
        o.set(a * v + w);
    }
}

fn main() {
    use warpforge_device::kernel::{Kernel, ParamKind};
    let kinds: Vec<ParamKind> = axpy::PARAMS.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        [
            ParamKind::Scalar,
            ParamKind::Input,
            ParamKind::Input,
            ParamKind::Output
        ]
    );
}
