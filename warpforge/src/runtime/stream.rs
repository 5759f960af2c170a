//! Streams and events: queues of work that run in order, overlap with each
//! other, and are timed with events.
//!
//! Which synchronisation warpforge does for you: a host read of a buffer
//! ([`DeviceBuffer::to_host`], [`PinnedBuffer::as_slice`]) waits for the
//! queued work that writes that buffer, on whatever stream, and nothing else;
//! work on one stream that uses a buffer another stream writes waits for that
//! write (cudarc's events on the GPU, the allocation's hazards on the
//! emulator). So reading a result can never race the kernel that writes it,
//! and no blanket `synchronize` is ever needed for correctness. What the
//! borrow checker adds: queuing work takes the buffers by `&` (read) or
//! `&mut` (write), so the host cannot hold a view into pinned memory that a
//! queued copy is writing.
//!
//! ```
//! use warpforge::{Device, LaunchConfig};
//! use warpforge_kernels::elementwise::axpy_f32;
//!
//! let dev = Device::emulator();
//! let (copies, compute) = (dev.new_stream()?, dev.new_stream()?);
//! let mut host = dev.alloc_pinned::<f32>(1024)?;
//! host.copy_from_slice(&vec![1.0; 1024])?;
//! let mut x = dev.alloc_zeroed::<f32>(1024)?;
//! let mut y = dev.alloc_zeroed::<f32>(1024)?;
//! copies.upload(&host, &mut x)?;                                   // async
//! compute.launch(axpy_f32, LaunchConfig::for_elements(1024, 256)?, (2.0f32, &x, &mut y))?;
//! // `compute` waits for the upload into x (another stream) by itself;
//! // reading y waits for the kernel that writes it.
//! assert_eq!(y.to_host()?, vec![2.0; 1024]);
//! # Ok::<(), warpforge::Error>(())
//! ```

use super::buffer::{DeviceBuffer, Memory, PinnedBuffer, PinnedMemory};
use super::device::Device;
use super::element::Element;
use super::emulator::{Binding, EmuMemory};
use super::error::{Error, Result};
use super::gpu::{StreamKey, stream_key};
use super::launch::{KernelArgs, LaunchConfig};
use cudarc::driver::{CudaEvent, CudaStream};
use std::sync::Arc;
use std::time::Duration;
use warpforge_device::emu::stream::{Access, Completion, EmuStream, Outcome};
use warpforge_device::kernel::Kernel;

/// What runs a stream's work.
pub(crate) enum StreamKind {
    /// A CUDA stream.
    Gpu(Arc<CudaStream>),
    /// An emulated stream: a worker thread.
    Emulated(Arc<EmuStream>),
    /// The emulator's default stream: work runs in the calling thread, to
    /// completion, so a fault is reported by the call that caused it.
    Inline,
}

/// A queue of kernels and copies on one device that run in order; work on
/// different streams may overlap. Made by [`Device::new_stream`] (or
/// [`Device::default_stream`], the one [`Device::launch`] uses).
pub struct Stream {
    pub(crate) device: Device,
    pub(crate) kind: StreamKind,
}

/// A point in a stream's work: wait for it, or time the work between two.
pub struct Event {
    device: Device,
    kind: EventKind,
}

enum EventKind {
    /// The event, its stream and the launch log's mark when it was recorded:
    /// once it completes, the launches before it on that stream are done.
    Gpu(CudaEvent, StreamKey, u64),
    Emulated(Completion),
}

impl Stream {
    /// The device it belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Queues `kernel` on this stream. Checked exactly as [`Device::launch`];
    /// returns once queued. A fault shows at the next call that waits for it
    /// (a host read, `synchronize`, an event), and poisons the device.
    pub fn launch<K: Kernel, A: KernelArgs<K::Args>>(
        &self,
        kernel: K,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        let _ = kernel;
        let _range = super::nvtx::launch_range(K::NAME);
        self.device.launch_on::<K, A>(&self.kind, config, args)
    }

    /// Queues a copy of pinned host memory into `dst` (same length).
    pub fn upload<T: Element>(
        &self,
        src: &PinnedBuffer<T>,
        dst: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        self.check_copy("Stream::upload", &src.device, &dst.device, src.len, dst.len)?;
        match (&self.kind, &src.memory, dst.memory_mut().0) {
            (StreamKind::Gpu(s), PinnedMemory::Gpu(p), Memory::Gpu(d)) => {
                if src.len > 0 {
                    s.memcpy_htod(p, &mut d.slice_mut(..src.len))
                        .map_err(|e| self.device.observe(e, "queuing a copy to the device"))?;
                }
                Ok(())
            }
            (_, PinnedMemory::Emulated(p), Memory::Emulated(d)) => {
                self.copy_emulated(p, d, src.len)
            }
            _ => unreachable!("check_copy: stream and buffers belong to one device"),
        }
    }

    /// Queues a copy of `src` into pinned host memory (same length).
    pub fn download<T: Element>(
        &self,
        src: &DeviceBuffer<T>,
        dst: &mut PinnedBuffer<T>,
    ) -> Result<()> {
        self.check_copy(
            "Stream::download",
            &src.device,
            &dst.device,
            src.len,
            dst.len,
        )?;
        match (&self.kind, src.memory(), &mut dst.memory) {
            (StreamKind::Gpu(s), Memory::Gpu(d), PinnedMemory::Gpu(p)) => {
                if src.len > 0 {
                    s.memcpy_dtoh(&d.slice(..src.len), p)
                        .map_err(|e| self.device.observe(e, "queuing a copy to the host"))?;
                }
                Ok(())
            }
            (_, Memory::Emulated(d), PinnedMemory::Emulated(p)) => {
                self.copy_emulated(d, p, src.len)
            }
            _ => unreachable!("check_copy: stream and buffers belong to one device"),
        }
    }

    fn check_copy(
        &self,
        op: &'static str,
        a: &Device,
        b: &Device,
        src: usize,
        dst: usize,
    ) -> Result<()> {
        self.device.check_same(a)?;
        self.device.check_same(b)?;
        self.device.check_health()?;
        if src != dst {
            return Err(Error::ShapeMismatch {
                op,
                detail: format!(
                    "the source has {src} elements but the destination holds {dst}; \
                     copies need equal lengths"
                ),
            });
        }
        Ok(())
    }

    /// Runs or queues an emulated copy of the first `len` elements of `src` into `dst`.
    pub(crate) fn copy_emulated<T: Element>(
        &self,
        src: &Arc<EmuMemory<T>>,
        dst: &Arc<EmuMemory<T>>,
        len: usize,
    ) -> Result<()> {
        let mut binding = Binding::new();
        let from = binding.claim(src, Access::Read) as usize;
        let to = binding.claim(dst, Access::Write) as usize;
        let copy = move || {
            // SAFETY: both addresses come from allocations claimed in the binding
            // (source read, destination write) that it keeps alive; the job runs
            // after the work they depend on, and no one else touches the
            // destination until the job's completion is signalled.
            unsafe { std::ptr::copy_nonoverlapping(from as *const T, to as *mut T, len) };
            Ok(())
        };
        match &self.kind {
            StreamKind::Emulated(s) => {
                binding.enqueue(s, copy);
                Ok(())
            }
            _ => {
                // A copy cannot fault; a dependency that faulted poisoned the device.
                binding.run_inline(copy).ok();
                self.device.check_health()
            }
        }
    }

    /// Marks the current end of the stream's queue.
    pub fn record_event(&self) -> Result<Event> {
        self.device.check_health()?;
        let kind = match &self.kind {
            StreamKind::Gpu(s) => {
                let mark = self.device.launch_mark();
                let event = s
                    .record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(|e| self.device.observe(e, "recording an event"))?;
                EventKind::Gpu(event, stream_key(s), mark)
            }
            StreamKind::Emulated(s) => {
                let done = Completion::pending();
                let after = s.last().into_iter().collect();
                s.enqueue(after, done.clone(), || Ok(()));
                EventKind::Emulated(done)
            }
            StreamKind::Inline => EventKind::Emulated(Completion::ran_now()),
        };
        Ok(Event {
            device: self.device.clone(),
            kind,
        })
    }

    /// Makes work queued on this stream from now on wait for `event`.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.device.check_same(&event.device)?;
        self.device.check_health()?;
        match (&self.kind, &event.kind) {
            (StreamKind::Gpu(s), EventKind::Gpu(e, ..)) => s.wait(e).map_err(|err| {
                self.device
                    .observe(err, "making a stream wait for an event")
            }),
            (StreamKind::Emulated(s), EventKind::Emulated(c)) => {
                s.enqueue(vec![c.clone()], Completion::pending(), || Ok(()));
                Ok(())
            }
            (StreamKind::Inline, EventKind::Emulated(c)) => {
                c.wait();
                self.device.check_health()
            }
            _ => unreachable!("check_same: the event belongs to this device"),
        }
    }

    /// Waits for everything queued on this stream.
    pub fn synchronize(&self) -> Result<()> {
        self.device.check_health()?;
        match &self.kind {
            StreamKind::Gpu(s) => {
                let mark = self.device.launch_mark();
                s.synchronize()
                    .map_err(|e| self.device.observe(e, "synchronising a stream"))?;
                self.device.waited(Some(stream_key(s)), mark);
                Ok(())
            }
            StreamKind::Emulated(s) => {
                if let Some(last) = s.last() {
                    last.wait();
                }
                self.device.check_health()
            }
            StreamKind::Inline => Ok(()),
        }
    }
}

impl Event {
    /// Waits until the work before the event has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.device.check_health()?;
        match &self.kind {
            EventKind::Gpu(e, stream, mark) => {
                e.synchronize()
                    .map_err(|err| self.device.observe(err, "waiting for an event"))?;
                self.device.waited(Some(*stream), *mark);
                Ok(())
            }
            EventKind::Emulated(c) => {
                c.wait();
                self.device.check_health()
            }
        }
    }

    /// Whether the work before the event has finished (never waits).
    pub fn is_complete(&self) -> Result<bool> {
        self.device.check_health()?;
        match &self.kind {
            EventKind::Gpu(e, stream, mark) => {
                let done = e
                    .try_is_complete()
                    .map_err(|err| self.device.observe(err, "querying an event"))?;
                if done {
                    self.device.waited(Some(*stream), *mark);
                }
                Ok(done)
            }
            EventKind::Emulated(c) => Ok(c.outcome().is_some()),
        }
    }

    /// Time from `start` to this event, both finished (waits for this one).
    /// GPU events have about half a microsecond of resolution.
    pub fn elapsed_since(&self, start: &Event) -> Result<Duration> {
        self.device.check_same(&start.device)?;
        self.synchronize()?;
        start.synchronize()?;
        match (&start.kind, &self.kind) {
            (EventKind::Gpu(a, ..), EventKind::Gpu(b, ..)) => {
                let ms = a
                    .elapsed_ms(b)
                    .map_err(|e| self.device.observe(e, "timing between events"))?;
                Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
            }
            (EventKind::Emulated(a), EventKind::Emulated(b)) => match (a.outcome(), b.outcome()) {
                (Some(Outcome::Ran { end: t0, .. }), Some(Outcome::Ran { end: t1, .. })) => {
                    Ok(t1.saturating_duration_since(t0))
                }
                _ => self.device.check_health().map(|_| Duration::ZERO),
            },
            _ => unreachable!("check_same: both events belong to this device"),
        }
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            StreamKind::Gpu(_) => "CUDA stream",
            StreamKind::Emulated(_) => "emulated stream",
            StreamKind::Inline => "default stream",
        };
        write!(f, "{kind} on {}", self.device.name())
    }
}
