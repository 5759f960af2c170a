// Each instance gives one argument per type and const parameter; the error
// names the instance.
use warpforge_macros::kernel;

#[kernel(instances(tile_f32 = <f32, 8>, tile_f64 = <f64, 8, 4>, tile_short = <f32>))]
pub fn tile<T: Copy, const R: usize, const C: usize>(x: &[T], mut out: warpforge_device::Out<T>) {
    let i = warpforge_device::thread::global_index_x();
    if let (Some(&v), Some(mut slot)) = (x.get(i * R * C), out.at(i)) {
        slot.set(v);
    }
}

fn main() {}
