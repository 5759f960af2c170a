// Buffers live for the whole launch: a kernel names no lifetimes, generic or not.
use warpforge_macros::kernel;

#[kernel(instances(copy_f32 = <f32>))]
pub fn copy<'a, T: Copy>(x: &'a [T], mut out: warpforge_device::Out<T>) {
    let i = warpforge_device::thread::global_index_x();
    if let (Some(&v), Some(mut slot)) = (x.get(i), out.at(i)) {
        slot.set(v);
    }
}

fn main() {}
