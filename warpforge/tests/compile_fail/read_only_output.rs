//! A read-only borrow where the kernel writes.
use warpforge::{Device, LaunchConfig};
use warpforge_kernels::elementwise::axpy_f32;

fn main() {
    let dev = Device::emulator();
    let x = dev.upload(&[1.0f32, 2.0]).unwrap();
    let y = dev.alloc_zeroed::<f32>(2).unwrap();
    let cfg = LaunchConfig::for_elements(2, 256).unwrap();
    dev.launch(axpy_f32, cfg, (2.0f32, &x, &y)).unwrap();
}
