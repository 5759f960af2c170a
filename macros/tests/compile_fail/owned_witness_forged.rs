// An owned element is minted only by its output, from the calling thread's
// launch coordinates: a kernel cannot build one by hand for an index it picks.
use warpforge_device::Out;
use warpforge_device::own::{Elements, Mine};
use warpforge_macros::kernel;

#[kernel]
pub fn forge(mut out: Out<f32, Elements>) {
    if let Some(mine) = out.mine() {
        // Another thread's element, with this thread's slot: the fields are private.
        let mut other = Mine { index: 0, ..mine };
        other.set(1.0);
    }
}

fn main() {}
