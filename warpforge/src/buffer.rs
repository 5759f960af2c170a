//! Typed device buffers.

use crate::device::Device;
use crate::element::Element;
use crate::error::{Error, Result};
use cudarc::driver::CudaSlice;
use warpforge_device::emu::DeviceMemory;

/// Where a buffer's elements live.
pub(crate) enum Memory<T: Element> {
    /// GPU memory (at least one element is allocated even when `len == 0`).
    Gpu(CudaSlice<T>),
    /// The emulator's "device memory": host memory only its launches touch.
    Emulated(DeviceMemory<T>),
}

/// `len` elements of `T` on one device.
///
/// A buffer belongs to the device that made it: launching with it on another
/// device is `Error::DeviceMismatch`. There are no implicit copies: data moves
/// only through [`Device::upload`] and [`DeviceBuffer::to_host`].
///
/// ```
/// use warpforge::Device;
/// let dev = Device::emulator();
/// let buf = dev.upload(&[1.0f32, 2.0, 3.0])?;
/// assert_eq!(buf.len(), 3);
/// assert_eq!(buf.to_host()?, vec![1.0, 2.0, 3.0]);
/// # Ok::<(), warpforge::Error>(())
/// ```
pub struct DeviceBuffer<T: Element> {
    pub(crate) device: Device,
    pub(crate) len: usize,
    pub(crate) memory: Memory<T>,
}

impl<T: Element> DeviceBuffer<T> {
    /// Elements in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device that owns the buffer.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Copies the buffer to the host.
    ///
    /// On the GPU this waits for the work already queued on the device's
    /// stream, so the copy sees every kernel launched before it: reading a
    /// result is never a race with the kernel that writes it.
    pub fn to_host(&self) -> Result<Vec<T>> {
        match &self.memory {
            Memory::Emulated(m) => Ok(m.as_slice().to_vec()),
            Memory::Gpu(slice) => {
                if self.len == 0 {
                    return Ok(Vec::new());
                }
                let stream = slice.stream();
                let host = stream
                    .clone_dtoh(&slice.slice(..self.len))
                    .map_err(Error::driver("copying a buffer to the host"))?;
                stream
                    .synchronize()
                    .map_err(Error::driver("waiting for the copy to the host"))?;
                Ok(host)
            }
        }
    }
}

impl<T: Element> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>[{}] on {}",
            T::DTYPE.name(),
            self.len,
            self.device.name()
        )
    }
}
