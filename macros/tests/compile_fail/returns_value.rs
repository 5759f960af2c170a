// A kernel's results go through `Out<T>`: returning a value is refused.
use warpforge_macros::kernel;

#[kernel]
pub fn twice(x: f32) -> f32 {
    2.0 * x
}

fn main() {}
