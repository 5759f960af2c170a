// A type parameter takes a type and a const parameter a constant.
use warpforge_macros::kernel;

#[kernel(instances(tile_a = <8, f32>, tile_b = <f32, [u8; 2]>))]
pub fn tile<T: Copy, const R: usize>(x: &[T], mut out: warpforge_device::Out<T>) {
    let i = warpforge_device::thread::global_index_x();
    if let (Some(&v), Some(mut slot)) = (x.get(i * R), out.at(i)) {
        slot.set(v);
    }
}

fn main() {}
