// `instances(...)` only makes sense for a generic kernel.
use warpforge_macros::kernel;

#[kernel(instances(fill_f32 = <f32>))]
pub fn fill(value: f32, mut out: warpforge_device::Out<f32>) {
    if let Some(mut slot) = out.at(warpforge_device::thread::global_index_x()) {
        slot.set(value);
    }
}

fn main() {}
