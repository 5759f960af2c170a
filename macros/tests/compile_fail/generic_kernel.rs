// One PTX entry has one concrete signature: a generic kernel must list the
// instances to build (`instances(...)`).
// (The macro drops a kernel it refuses, so this file names paths in full
// rather than importing what the dropped body would have used.)
use warpforge_macros::kernel;

#[kernel]
pub fn fill<T: Copy>(value: T, mut out: warpforge_device::Out<T>) {
    if let Some(mut slot) = out.at(warpforge_device::thread::global_index_x()) {
        slot.set(value);
    }
}

fn main() {}
