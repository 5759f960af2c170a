//! A hand-written `impl Kernel` does not compile without `unsafe`: the trait
//! is unsafe because a description that does not match its PTX entry (here:
//! the library's `axpy_f32` claimed with an f64 scalar and no parameters
//! listed) would let a safe launch pass the GPU the wrong arguments.
use warpforge::{Dim3, Kernel};
use warpforge_device::kernel::{Param, RawIn, RawOut};

#[derive(Clone, Copy)]
struct FakeAxpy;

impl Kernel for FakeAxpy {
    const NAME: &'static str = "axpy_f32";
    const MODULE: &'static str = "warpforge-kernels";
    const PARAMS: &'static [Param] = &[];
    const SHARED_BYTES: usize = 0;
    const BLOCK: Option<Dim3> = None;
    type Args = (f64, RawIn<f32>, RawOut<f32>);
    unsafe fn run_thread(_: Self::Args) {}
}

fn main() {}
