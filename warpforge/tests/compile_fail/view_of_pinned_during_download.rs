//! Missing synchronisation: holding a view of pinned memory while a download
//! into it is queued. Queuing the download needs `&mut`, so it cannot compile.
use warpforge::Device;

fn main() {
    let dev = Device::emulator();
    let stream = dev.new_stream().unwrap();
    let y = dev.alloc_zeroed::<f32>(4).unwrap();
    let mut pinned = dev.alloc_pinned::<f32>(4).unwrap();
    let view = pinned.as_slice().unwrap();
    stream.download(&y, &mut pinned).unwrap();
    println!("{}", view[0]);
}
