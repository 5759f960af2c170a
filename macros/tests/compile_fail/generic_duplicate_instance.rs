// Each instance is a PTX entry of its own: two instances cannot share a name,
// nor take the generic fn's own.
use warpforge_macros::kernel;

#[kernel(instances(fill_f32 = <f32>, fill_f32 = <f64>, fill = <u32>))]
pub fn fill<T: Copy>(value: T, mut out: warpforge_device::Out<T>) {
    if let Some(mut slot) = out.at(warpforge_device::thread::global_index_x()) {
        slot.set(value);
    }
}

fn main() {}
