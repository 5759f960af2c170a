// Parameter types a kernel cannot take; each kernel gets the macro's message,
// and a kernel with several bad parameters gets one error for each.
use warpforge_macros::kernel;

pub struct Point {
    pub x: f32,
    pub y: f32,
}

#[kernel]
pub fn takes_vec(x: Vec<f32>, y: warpforge_device::Out<f32>) {}

#[kernel]
pub fn takes_string(name: String) {}

#[kernel]
pub fn takes_struct(p: Point, y: warpforge_device::Out<f32>) {}

#[kernel]
pub fn takes_slice_of_strings(names: &[String]) {}

#[kernel]
pub fn takes_two_bad(x: Vec<f32>, n: bool, y: warpforge_device::Out<f32>) {}

fn main() {}
