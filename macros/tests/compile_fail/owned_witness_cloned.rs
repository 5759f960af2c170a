// An owned element cannot be duplicated: it is not `Clone` (nor `Copy`), so
// there is never a second handle to give away.
use warpforge_device::Out;
use warpforge_device::own::Elements;
use warpforge_macros::kernel;

#[kernel]
pub fn duplicate(mut out: Out<f32, Elements>) {
    if let Some(mine) = out.mine() {
        let mut copy = mine.clone();
        copy.set(1.0);
    }
}

fn main() {}
