// `#[kernel(block = …)]` values no CUDA GPU can launch, or the macro cannot read.
use warpforge_macros::kernel;

const SIDE: u32 = 16;

#[kernel(block = (16, 0))]
pub fn zero_dim(y: warpforge_device::Out<f32>) {}

#[kernel(block = (4, 4, 4, 4))]
pub fn four_dims(y: warpforge_device::Out<f32>) {}

#[kernel(block = 1.5)]
pub fn float_dim(y: warpforge_device::Out<f32>) {}

#[kernel(shared = [f32; 32], block = "256")]
pub fn string_dim(y: warpforge_device::Out<f32>) {}

#[kernel(block = (SIDE, SIDE))]
pub fn const_dim(y: warpforge_device::Out<f32>) {}

#[kernel(block = (64, 32), shared = [f32; 32])]
pub fn too_many_threads(y: warpforge_device::Out<f32>) {}

#[kernel(block = (1, 1, 128))]
pub fn z_too_large(y: warpforge_device::Out<f32>) {}

#[kernel(block = 256, block = 128)]
pub fn given_twice(y: warpforge_device::Out<f32>) {}

#[kernel(blocks = 256)]
pub fn misspelt(y: warpforge_device::Out<f32>) {}

fn main() {}
