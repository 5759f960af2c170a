// A generic kernel in a crate that forbids `unsafe_code`: each instance is a
// kernel of its own, as a non-generic `#[kernel]` of that name would be, and
// the generic fn stays an ordinary fn.
#![forbid(unsafe_code)]

use warpforge_device::{Out, thread};
use warpforge_macros::kernel;

/// `out[i] = x[i·K]`.
#[kernel(block = 32, shared = [T; K], instances(
    pick_f32_2 = <f32, 2>,
    pick_u64_4 = <u64, { 2 * 2 }>,
))]
pub fn pick<T, const K: usize>(x: &[T], mut out: Out<T>)
where
    T: Copy,
{
    let i = thread::global_index_x();
    if let (Some(&v), Some(mut o)) = (x.get(i * K), out.at(i)) {
        o.set(v);
    }
}

fn main() {
    use warpforge_device::kernel::Kernel;
    assert_eq!(pick_f32_2::NAME, "pick_f32_2");
    assert_eq!(pick_u64_4::NAME, "pick_u64_4");
    assert_eq!(pick_f32_2::PARAMS[0].ty, "f32");
    assert_eq!(pick_u64_4::PARAMS[1].ty, "u64");
    assert_eq!(pick_f32_2::SHARED_BYTES, 8);
    assert_eq!(pick_u64_4::SHARED_BYTES, 32);
    let _: fn(&[f32], Out<f32>) = pick::<f32, 2>;
}
