//! The README's "write your first kernel" walkthrough, so it keeps working.

use warpforge::{Device, LaunchConfig};
use warpforge_device::{Out, thread};
use warpforge_macros::kernel;

#[kernel]
pub fn scale_f32(s: f32, x: &[f32], mut y: Out<f32>) {
    let i = thread::global_index_x();
    if let (Some(&xi), Some(mut yi)) = (x.get(i), y.at(i)) {
        yi.set(s * xi);
    }
}

#[test]
fn first_kernel() -> warpforge::Result<()> {
    let dev = Device::emulator(); // or Device::gpu(0)? once the kernel lives in kernels/
    let x = dev.upload(&[1.0f32, 2.0, 3.0])?;
    let mut y = dev.alloc_zeroed::<f32>(3)?;
    let cfg = LaunchConfig::for_elements(3, 256)?;
    dev.launch(scale_f32, cfg, (2.0f32, &x, &mut y))?;
    assert_eq!(y.to_host()?, [2.0, 4.0, 6.0]);
    Ok(())
}
