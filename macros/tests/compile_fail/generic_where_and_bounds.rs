// Where-clauses and bounds stay on the generic fn, and rustc checks each
// instance against them: `u32` is not `Fma`.
use warpforge_device::num::Fma;
use warpforge_macros::kernel;

#[kernel(instances(axpy_f32 = <f32>, axpy_u32 = <u32>))]
pub fn axpy<T>(a: T, x: &[T], mut y: warpforge_device::Out<T>)
where
    T: Fma,
{
    let i = warpforge_device::thread::global_index_x();
    if let (Some(&v), Some(mut o)) = (x.get(i), y.at(i)) {
        o.set(a.fma(v, o.get()));
    }
}

fn main() {}
