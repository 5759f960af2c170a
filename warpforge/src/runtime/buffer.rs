//! Typed device buffers and page-locked host buffers.

use super::device::Device;
use super::element::Element;
use super::emulator::EmuMemory;
use super::error::{Error, Result};
use super::gpu::stream_key;
use cudarc::driver::{CudaSlice, PinnedHostSlice};
use std::sync::Arc;

/// Where a buffer's elements live.
pub(crate) enum Memory<T: Element> {
    /// GPU memory (at least one element is allocated even when `len == 0`).
    Gpu(CudaSlice<T>),
    /// The emulator's "device memory": host memory only its launches touch.
    Emulated(Arc<EmuMemory<T>>),
}

/// `len` elements of `T` on one device.
///
/// A buffer belongs to the device that made it: launching with it on another
/// device is `Error::DeviceMismatch`. There are no implicit copies: data moves
/// only through [`Device::upload`], [`DeviceBuffer::to_host`],
/// [`DeviceBuffer::copy_from_host`], [`DeviceBuffer::copy_from`] and the
/// streams' async copies.
///
/// Reading a buffer on the host waits for the work queued on it — on any
/// stream — that writes it, and only for that: a result is never read before
/// the kernel that writes it has finished, and no blanket synchronisation is
/// needed.
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
    /// `None` only while the buffer drops ([`DeviceBuffer::memory`]).
    memory: Option<Memory<T>>,
    /// Whether dropping the buffer returns its memory to the device's cache
    /// of kernel outputs (`Device::cached_output`) rather than freeing it.
    cached: bool,
}

impl<T: Element> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.cached
            && let Some(memory) = self.memory.take()
        {
            self.device.return_output(self.len, memory);
        }
    }
}

impl<T: Element> DeviceBuffer<T> {
    /// A buffer of `len` elements in `memory`, freed when dropped; `cached`:
    /// given back to the device's cache of kernel outputs instead.
    pub(crate) fn new(device: Device, len: usize, memory: Memory<T>, cached: bool) -> Self {
        DeviceBuffer {
            device,
            len,
            memory: Some(memory),
            cached,
        }
    }

    /// Where the elements live.
    pub(crate) fn memory(&self) -> &Memory<T> {
        self.memory
            .as_ref()
            .expect("a live buffer holds its memory")
    }

    /// Where the elements live, and the device (borrowed apart, so that an
    /// error can be reported while the memory is borrowed).
    pub(crate) fn memory_mut(&mut self) -> (&mut Memory<T>, &usize, &Device) {
        let memory = self
            .memory
            .as_mut()
            .expect("a live buffer holds its memory");
        (memory, &self.len, &self.device)
    }

    /// The buffer's memory, taken out of it (it will not be freed or
    /// cached by the buffer).
    pub(crate) fn into_memory(mut self) -> Memory<T> {
        self.cached = false;
        self.memory.take().expect("a live buffer holds its memory")
    }

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

    /// Copies the buffer to the host, after every queued kernel or copy that writes it.
    pub fn to_host(&self) -> Result<Vec<T>> {
        self.device.check_health()?;
        match self.memory() {
            Memory::Emulated(m) => Ok(m.to_vec()),
            Memory::Gpu(slice) => {
                if self.len == 0 {
                    return Ok(Vec::new());
                }
                // cudarc makes the copy wait for the buffer's last writer on any
                // stream (its events); synchronising the copy's stream then waits
                // for exactly that.
                let stream = slice.stream();
                let mark = self.device.launch_mark();
                let host = stream
                    .clone_dtoh(&slice.slice(..self.len))
                    .map_err(|e| self.device.observe(e, "copying a buffer to the host"))?;
                stream
                    .synchronize()
                    .map_err(|e| self.device.observe(e, "waiting for the copy to the host"))?;
                self.device.waited(Some(stream_key(stream)), mark);
                Ok(host)
            }
        }
    }

    /// Overwrites the buffer with `data`, after every queued work that uses it.
    pub fn copy_from_host(&mut self, data: &[T]) -> Result<()> {
        self.check_len("copy_from_host", data.len())?;
        self.device.check_health()?;
        let (memory, _, device) = self.memory_mut();
        match memory {
            Memory::Emulated(m) => m.write(data),
            Memory::Gpu(slice) => {
                if !data.is_empty() {
                    let stream = slice.stream().clone();
                    stream
                        .memcpy_htod(data, &mut slice.slice_mut(..data.len()))
                        .map_err(|e| device.observe(e, "copying a buffer to the device"))?;
                }
            }
        }
        Ok(())
    }

    /// Copies `src` (same device, same length) into this buffer, device to device.
    pub fn copy_from(&mut self, src: &DeviceBuffer<T>) -> Result<()> {
        self.check_len("copy_from", src.len)?;
        self.device.check_same(&src.device)?;
        self.device.check_health()?;
        let (memory, &len, device) = self.memory_mut();
        match (memory, src.memory()) {
            (Memory::Emulated(dst), Memory::Emulated(s)) => {
                device.default_stream().copy_emulated(s, dst, len)?;
            }
            (Memory::Gpu(dst), Memory::Gpu(s)) => {
                if len > 0 {
                    let stream = dst.stream().clone();
                    stream
                        .memcpy_dtod(&s.slice(..len), &mut dst.slice_mut(..len))
                        .map_err(|e| device.observe(e, "copying device to device"))?;
                }
            }
            _ => unreachable!("check_same: both buffers belong to one device"),
        }
        Ok(())
    }

    fn check_len(&self, op: &'static str, other: usize) -> Result<()> {
        if other == self.len {
            return Ok(());
        }
        Err(Error::ShapeMismatch {
            op,
            detail: format!(
                "the destination holds {} elements but the source has {other}; copies need \
                 equal lengths (allocate a buffer of the source's length)",
                self.len
            ),
        })
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

/// Where a pinned buffer's elements live.
pub(crate) enum PinnedMemory<T: Element> {
    /// Page-locked host memory registered with the driver.
    Gpu(PinnedHostSlice<T>),
    /// Ordinary host memory shared with the emulator's streams.
    Emulated(Arc<EmuMemory<T>>),
}

/// Page-locked host memory: the source and destination of async copies
/// ([`crate::Stream::upload`], [`crate::Stream::download`]), which can overlap
/// with kernels on other streams.
///
/// Reading it waits for a queued download into it; writing waits for every
/// queued copy that uses it. Queuing a copy borrows it (`&` to upload from,
/// `&mut` to download into), so the host cannot write it while a copy reads
/// it, nor hold a view while a copy writes it.
///
/// ```
/// use warpforge::Device;
/// let dev = Device::emulator();
/// let mut pinned = dev.alloc_pinned::<f32>(4)?;
/// pinned.copy_from_slice(&[1.0, 2.0, 3.0, 4.0])?;
/// let stream = dev.new_stream()?;
/// let mut buf = dev.alloc_zeroed::<f32>(4)?;
/// stream.upload(&pinned, &mut buf)?;
/// assert_eq!(buf.to_host()?, [1.0, 2.0, 3.0, 4.0]);
/// # Ok::<(), warpforge::Error>(())
/// ```
pub struct PinnedBuffer<T: Element> {
    pub(crate) device: Device,
    pub(crate) len: usize,
    pub(crate) memory: PinnedMemory<T>,
}

impl<T: Element> PinnedBuffer<T> {
    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements, after any queued download into them. After a kernel
    /// fault it is `ContextPoisoned`, like every call on the device.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.device.check_health()?;
        let slice = match &self.memory {
            PinnedMemory::Emulated(m) => {
                m.alloc.wait_writes();
                // SAFETY: waited for the queued writers; a new one needs `&mut self`,
                // which the returned borrow of `self` rules out while the slice lives.
                unsafe { m.alloc.host_slice() }
            }
            PinnedMemory::Gpu(p) => {
                let slice = p.as_slice().map_err(|e| {
                    self.device
                        .observe(e, "waiting for a copy into pinned memory")
                })?;
                self.device.waited(None, 0);
                &slice[..self.len]
            }
        };
        // A dependency that faulted poisoned the device: no stale data.
        self.device.check_health()?;
        Ok(slice)
    }

    /// The elements, mutably, after every queued copy that uses them. After a
    /// kernel fault it is `ContextPoisoned`, like every call on the device.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        let PinnedBuffer {
            device,
            len,
            memory,
        } = self;
        device.check_health()?;
        let slice = match memory {
            PinnedMemory::Emulated(m) => {
                m.alloc.wait_all();
                // SAFETY: waited for every queued copy; queuing another needs a borrow
                // of `self`, which the returned `&mut` rules out while the slice lives.
                unsafe { m.alloc.host_slice_mut() }
            }
            PinnedMemory::Gpu(p) => {
                // Waits for the copies that use the memory (cudarc's event).
                let slice = p
                    .as_mut_slice()
                    .map_err(|e| device.observe(e, "waiting for a copy from pinned memory"))?;
                device.waited(None, 0);
                &mut slice[..*len]
            }
        };
        // A copy whose dependency faulted poisoned the device: no stale data.
        device.check_health()?;
        Ok(slice)
    }

    /// Overwrites the elements with `data` (same length).
    pub fn copy_from_slice(&mut self, data: &[T]) -> Result<()> {
        let len = self.len;
        if data.len() != len {
            return Err(Error::ShapeMismatch {
                op: "PinnedBuffer::copy_from_slice",
                detail: format!(
                    "the pinned buffer holds {len} elements but the data has {}",
                    data.len()
                ),
            });
        }
        self.as_mut_slice()?.copy_from_slice(data);
        Ok(())
    }
}

impl<T: Element> std::fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PinnedBuffer<{}>[{}] for {}",
            T::DTYPE.name(),
            self.len,
            self.device.name()
        )
    }
}
