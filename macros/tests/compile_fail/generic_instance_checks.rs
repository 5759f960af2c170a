// The checks every kernel gets apply to every instance, with its arguments
// substituted: an unsupported element type is reported at the instance that
// gives it, and `unsafe fn` and `&mut [T]` are refused once for all.
use warpforge_macros::kernel;

#[kernel(instances(fill_f32 = <f32>, fill_bool = <bool>, fill_string = <String>))]
pub fn fill<T: Copy>(value: T, mut out: warpforge_device::Out<T>) {
    if let Some(mut slot) = out.at(warpforge_device::thread::global_index_x()) {
        slot.set(value);
    }
}

#[kernel(instances(bad_f32 = <f32>, bad_f64 = <f64>))]
pub unsafe fn bad<T: Copy>(x: &mut [T]) {
    let _ = x;
}

fn main() {}
