//! Elementwise operations (`axpy`): pick the kernel and launch shape, check sizes, run.

use crate::{DeviceBuffer, Element, Error, LaunchConfig, Result};
use warpforge_device::Dim3;
use warpforge_kernels::elementwise;

/// Threads per block for elementwise kernels.
pub const BLOCK_THREADS: u32 = 256;

/// Most blocks a grid-stride kernel launches: enough to fill any current GPU
/// several times over (each thread then loops over several elements).
pub const MAX_BLOCKS: u32 = 1024;

/// Element types with an `axpy` kernel.
pub trait Axpy: Element {
    /// Launches the kernel for this type.
    #[doc(hidden)]
    fn launch_axpy(
        a: Self,
        x: &DeviceBuffer<Self>,
        y: &mut DeviceBuffer<Self>,
        cfg: LaunchConfig,
    ) -> Result<()>;
}

impl Axpy for f32 {
    fn launch_axpy(
        a: f32,
        x: &DeviceBuffer<f32>,
        y: &mut DeviceBuffer<f32>,
        cfg: LaunchConfig,
    ) -> Result<()> {
        let dev = y.device().clone();
        dev.launch(elementwise::axpy_f32, cfg, (a, x, y))
    }
}

impl Axpy for f64 {
    fn launch_axpy(
        a: f64,
        x: &DeviceBuffer<f64>,
        y: &mut DeviceBuffer<f64>,
        cfg: LaunchConfig,
    ) -> Result<()> {
        let dev = y.device().clone();
        dev.launch(elementwise::axpy_f64, cfg, (a, x, y))
    }
}

/// A grid-stride launch over `n` elements: one thread per element up to `MAX_BLOCKS` blocks.
pub fn grid_stride_config(n: usize) -> LaunchConfig {
    let blocks = n
        .div_ceil(BLOCK_THREADS as usize)
        .clamp(1, MAX_BLOCKS as usize) as u32;
    LaunchConfig::new(Dim3::x(blocks), Dim3::x(BLOCK_THREADS))
}

/// `y = a·x + y`, elementwise, with one rounding per element (fused multiply-add).
///
/// ```
/// use warpforge::{Device, ops};
/// let dev = Device::emulator();
/// let x = dev.upload(&[1.0f64, 2.0])?;
/// let mut y = dev.upload(&[0.5f64, 0.5])?;
/// ops::axpy(3.0, &x, &mut y)?;
/// assert_eq!(y.to_host()?, vec![3.5, 6.5]);
/// # Ok::<(), warpforge::Error>(())
/// ```
pub fn axpy<T: Axpy>(a: T, x: &DeviceBuffer<T>, y: &mut DeviceBuffer<T>) -> Result<()> {
    if x.len() != y.len() {
        return Err(Error::ShapeMismatch {
            op: "axpy",
            detail: format!(
                "x has {} elements but y has {}; axpy needs equal lengths",
                x.len(),
                y.len()
            ),
        });
    }
    T::launch_axpy(a, x, y, grid_stride_config(x.len()))
}
