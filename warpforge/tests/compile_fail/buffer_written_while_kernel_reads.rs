//! An input cannot be the output of the same launch (aliasing a buffer a
//! kernel reads while it writes it).
use warpforge::{Device, LaunchConfig};
use warpforge_kernels::elementwise::axpy_f32;

fn main() {
    let dev = Device::emulator();
    let mut y = dev.alloc_zeroed::<f32>(2).unwrap();
    let cfg = LaunchConfig::for_elements(2, 256).unwrap();
    dev.launch(axpy_f32, cfg, (2.0f32, &y, &mut y)).unwrap();
}
