//! No implicit copies: a host slice is not a device buffer.
use warpforge::{Device, LaunchConfig};
use warpforge_kernels::elementwise::axpy_f32;

fn main() {
    let dev = Device::emulator();
    let x = vec![1.0f32, 2.0];
    let mut y = dev.alloc_zeroed::<f32>(2).unwrap();
    let cfg = LaunchConfig::for_elements(2, 256).unwrap();
    dev.launch(axpy_f32, cfg, (2.0f32, &x[..], &mut y)).unwrap();
}
