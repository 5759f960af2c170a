//! A device: a GPU opened through the driver, or the CPU emulator.

use crate::buffer::{DeviceBuffer, Memory, PinnedBuffer, PinnedMemory};
use crate::element::Element;
use crate::emulator::{self, Binding, EmuMemory, Pool};
use crate::error::{Error, FaultCode, Result};
use crate::gpu::{Gpu, GpuInfo};
use crate::launch::{KernelArgs, LaunchConfig, Limits};
use crate::stream::{Stream, StreamKind};
use cudarc::driver::DriverError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use warpforge_device::emu::stream::EmuStream;
use warpforge_device::emu::{self, LaunchShape};
use warpforge_device::kernel::Kernel;

enum Backend {
    Gpu(Gpu),
    Emulator {
        pool: Arc<Pool>,
        /// The streams made on it, for `synchronize`.
        streams: Mutex<Vec<Weak<EmuStream>>>,
    },
}

/// Whether the device can still be used.
#[derive(Clone)]
pub(crate) enum Health {
    Usable,
    /// A kernel faulted; no call has reported it yet.
    Faulted(Error),
    /// The fault was reported; every call now fails with `ContextPoisoned`.
    Poisoned(Error),
}

impl Health {
    /// Records a fault if none is recorded yet.
    pub(crate) fn fault(&mut self, e: Error) {
        if matches!(self, Health::Usable) {
            *self = Health::Faulted(e);
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

struct Inner {
    /// Distinguishes devices, so a buffer used with a device it does not belong to is caught.
    id: u64,
    backend: Backend,
    health: Arc<Mutex<Health>>,
}

/// Where kernels run and buffers live: a GPU, or the CPU emulator.
///
/// Cloning is cheap and gives the same device. Both kinds have the same API,
/// so code written against a `Device` runs unchanged on either.
///
/// ```
/// use warpforge::{Device, LaunchConfig};
/// use warpforge_kernels::elementwise::axpy_f32;
///
/// let dev = Device::emulator();
/// let x = dev.upload(&[1.0f32, 2.0, 3.0])?;
/// let mut y = dev.upload(&[10.0f32, 20.0, 30.0])?;
/// dev.launch(axpy_f32, LaunchConfig::for_elements(3, 256)?, (2.0f32, &x, &mut y))?;
/// assert_eq!(y.to_host()?, vec![12.0, 24.0, 36.0]);
/// # Ok::<(), warpforge::Error>(())
/// ```
#[derive(Clone)]
pub struct Device {
    inner: Arc<Inner>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

impl Device {
    fn with_backend(backend: Backend) -> Device {
        Device {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                backend,
                health: Arc::new(Mutex::new(Health::Usable)),
            }),
        }
    }

    /// Opens GPU `ordinal` and loads the embedded PTX on it.
    ///
    /// Fails with `NoDriver`, `NoDevice`, `DriverTooOld` or `UnsupportedGpu`,
    /// never a panic, on machines where that GPU cannot be used.
    pub fn gpu(ordinal: usize) -> Result<Device> {
        Ok(Device::with_backend(Backend::Gpu(Gpu::open(ordinal)?)))
    }

    /// A CPU emulator device: runs the same kernels with CUDA semantics. Its
    /// memory is the host's (allocations beyond it are `OutOfMemory`).
    pub fn emulator() -> Device {
        Device::emulator_with_memory(emulator::host_memory_bytes())
    }

    /// An emulator device with `bytes` of device memory, to test how code
    /// behaves when a GPU's memory runs out.
    ///
    /// ```
    /// use warpforge::{Device, Error};
    /// let dev = Device::emulator_with_memory(1 << 20);
    /// let e = dev.alloc_zeroed::<f32>(1 << 20).unwrap_err();   // 4 MiB > 1 MiB
    /// assert!(matches!(e, Error::OutOfMemory { requested: 4194304, total: 1048576, .. }));
    /// let fits = dev.alloc_zeroed::<f32>(1 << 10)?;             // the device still works
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn emulator_with_memory(bytes: u64) -> Device {
        Device::with_backend(Backend::Emulator {
            pool: Pool::new(bytes),
            streams: Mutex::new(Vec::new()),
        })
    }

    /// GPU 0 if it can be used; else the emulator and the reason there is no GPU.
    pub fn auto() -> (Device, Option<Error>) {
        match Device::gpu(0) {
            Ok(d) => (d, None),
            Err(e) => (Device::emulator(), Some(e)),
        }
    }

    /// Whether this is a GPU (not the emulator).
    pub fn is_gpu(&self) -> bool {
        matches!(self.inner.backend, Backend::Gpu(_))
    }

    /// The GPU's properties, if this is a GPU.
    pub fn gpu_info(&self) -> Option<&GpuInfo> {
        match &self.inner.backend {
            Backend::Gpu(g) => Some(&g.info),
            Backend::Emulator { .. } => None,
        }
    }

    /// `GPU 0 (NVIDIA H100 80GB HBM3)` or `CPU emulator`, with an instance number.
    pub fn name(&self) -> String {
        match &self.inner.backend {
            Backend::Gpu(g) => format!("GPU {} ({})", g.info.ordinal, g.info.name),
            Backend::Emulator { .. } => format!("CPU emulator #{}", self.inner.id),
        }
    }

    /// The launch limits this device enforces.
    pub fn limits(&self) -> Limits {
        match &self.inner.backend {
            Backend::Gpu(g) => Limits {
                max_threads_per_block: g.info.max_threads_per_block,
                max_block_dim: g.info.max_block_dim,
                max_grid_dim: g.info.max_grid_dim,
                max_shared_per_block: g.info.max_shared_per_block,
                max_shared_per_block_optin: g.info.max_shared_per_block_optin,
            },
            Backend::Emulator { .. } => Limits::EMULATOR,
        }
    }

    /// Bytes of device memory free and in total.
    pub fn memory_info(&self) -> Result<(u64, u64)> {
        self.check_health()?;
        match &self.inner.backend {
            Backend::Gpu(g) => g
                .memory_info()
                .map_err(|e| self.observe(e, "reading free memory")),
            Backend::Emulator { pool, .. } => Ok((pool.free(), pool.capacity)),
        }
    }

    /// A buffer of `len` zeros.
    ///
    /// More than the device has free is `Error::OutOfMemory` with the sizes;
    /// nothing is lost and the device stays usable.
    pub fn alloc_zeroed<T: Element>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        self.check_health()?;
        let memory = match &self.inner.backend {
            Backend::Gpu(g) => Memory::Gpu(g.alloc_zeroed(len).map_err(|e| self.refine(e))?),
            Backend::Emulator { pool, .. } => Memory::Emulated(EmuMemory::zeroed(pool, len)?),
        };
        Ok(DeviceBuffer {
            device: self.clone(),
            len,
            memory,
        })
    }

    /// A buffer holding a copy of `data`.
    pub fn upload<T: Element>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buf = self.alloc_zeroed(data.len())?;
        buf.copy_from_host(data)?;
        Ok(buf)
    }

    /// `len` zeroed elements of page-locked host memory, for async copies.
    pub fn alloc_pinned<T: Element>(&self, len: usize) -> Result<PinnedBuffer<T>> {
        self.check_health()?;
        let memory = match &self.inner.backend {
            Backend::Gpu(g) => PinnedMemory::Gpu(g.alloc_pinned(len).map_err(|e| self.refine(e))?),
            Backend::Emulator { .. } => {
                // Host memory: not counted against the emulated device memory.
                PinnedMemory::Emulated(EmuMemory::zeroed(&Pool::new(u64::MAX), len)?)
            }
        };
        Ok(PinnedBuffer {
            device: self.clone(),
            len,
            memory,
        })
    }

    /// A new stream: work queued on it runs in order, and may overlap with
    /// work on other streams (copies with kernels, kernels with kernels).
    pub fn new_stream(&self) -> Result<Stream> {
        self.check_health()?;
        let kind = match &self.inner.backend {
            Backend::Gpu(g) => StreamKind::Gpu(
                g.stream
                    .context()
                    .new_stream()
                    .map_err(|e| self.observe(e, "creating a stream"))?,
            ),
            Backend::Emulator { streams, .. } => {
                let health = self.inner.health.clone();
                let stream = Arc::new(EmuStream::new(Arc::new(move || {
                    !matches!(*lock(&health), Health::Usable)
                })));
                let mut list = lock(streams);
                list.retain(|w| w.strong_count() > 0);
                list.push(Arc::downgrade(&stream));
                StreamKind::Emulated(stream)
            }
        };
        Ok(Stream {
            device: self.clone(),
            kind,
        })
    }

    /// The stream `launch` and the buffer copies use.
    pub fn default_stream(&self) -> Stream {
        let kind = match &self.inner.backend {
            Backend::Gpu(g) => StreamKind::Gpu(g.stream.clone()),
            Backend::Emulator { .. } => StreamKind::Inline,
        };
        Stream {
            device: self.clone(),
            kind,
        }
    }

    /// Waits for all work queued on this device, on every stream.
    pub fn synchronize(&self) -> Result<()> {
        self.check_health()?;
        match &self.inner.backend {
            Backend::Gpu(g) => {
                g.stream
                    .context()
                    .synchronize()
                    .map_err(|e| self.observe(e, "synchronising the device"))?;
                g.launched_since_sync().clear();
            }
            Backend::Emulator { streams, .. } => {
                let live: Vec<_> = lock(streams).iter().filter_map(Weak::upgrade).collect();
                for s in live {
                    if let Some(last) = s.last() {
                        last.wait();
                    }
                }
            }
        }
        self.check_health()
    }

    /// Launches `kernel` with `config` and `args` on the default stream.
    ///
    /// `args` must match the kernel's signature (checked at compile time); the
    /// config is checked against the kernel's declared block shape (`BlockShape`),
    /// the device's limits, the kernel's own limits (registers × threads, shared
    /// memory) and the problem size it was made for (every output must hold
    /// it), and every buffer against this device, before anything runs.
    /// On the GPU the launch is queued; reading a result (`to_host`) waits for it.
    /// On the emulator it runs to completion, and a fault (out-of-bounds,
    /// divergent barrier, …) is `Error::KernelFault` here; on the GPU a fault
    /// shows at the next call that waits for the kernel.
    pub fn launch<K: Kernel, A: KernelArgs<K::Args>>(
        &self,
        kernel: K,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        self.default_stream().launch(kernel, config, args)
    }

    /// Checks a launch and runs or queues it on `stream`.
    pub(crate) fn launch_on<K: Kernel, A: KernelArgs<K::Args>>(
        &self,
        stream: &StreamKind,
        config: LaunchConfig,
        mut args: A,
    ) -> Result<()> {
        self.check_health()?;
        if let Some(required) = K::BLOCK
            && config.block != required
        {
            return Err(Error::BlockShape {
                kernel: K::NAME,
                required,
                found: config.block,
            });
        }
        for owner in args.owners() {
            self.check_same(owner)?;
        }
        args.check_outputs(K::NAME, &config)?;
        match (&self.inner.backend, stream) {
            (Backend::Emulator { .. }, StreamKind::Inline | StreamKind::Emulated(_)) => {
                let shared = self
                    .limits()
                    .check(K::NAME, &config, K::SHARED_BYTES, None)?;
                let shape = LaunchShape {
                    grid: config.grid,
                    block: config.block,
                    dynamic_shared_bytes: shared as usize,
                };
                let mut binding = Binding::new();
                let abi = args
                    .emu_bind(&mut binding)
                    .ok_or_else(|| Error::DeviceMismatch {
                        expected: self.name(),
                        found: "a GPU".into(),
                    })?;
                let (grid, block) = (config.grid, config.block);
                // SAFETY: `abi` holds the addresses and lengths of the buffers'
                // allocations, each claimed in `binding` (read for inputs, write for
                // outputs), so the kernel runs only after the work that writes them,
                // and the host and other jobs wait for it before touching them; the
                // binding keeps the allocations alive until the kernel is done.
                let run = move || emu::launch(K::NAME, shape, &|| unsafe { K::run_thread(abi) });
                match stream {
                    StreamKind::Emulated(s) => {
                        let health = self.inner.health.clone();
                        binding.enqueue(s, move || {
                            let result = run();
                            if let Err(e) = &result {
                                lock(&health).fault(emulator::kernel_fault(e.clone(), grid, block));
                            }
                            result
                        });
                        Ok(())
                    }
                    _ => binding
                        .run_inline(run)
                        .map_err(|e| self.report_fault(emulator::kernel_fault(e, grid, block))),
                }
            }
            (Backend::Gpu(gpu), StreamKind::Gpu(cu_stream)) => {
                let function = gpu.function(K::NAME).map_err(|e| self.refine(e))?;
                let shared = self.limits().check(
                    K::NAME,
                    &config,
                    K::SHARED_BYTES,
                    Some(function.limits),
                )?;
                gpu.allow_shared(&function, shared)
                    .map_err(|e| self.observe(e, "raising the kernel's shared memory limit"))?;
                let mut builder = cu_stream.launch_builder(&function.function);
                args.push_gpu(&mut builder);
                let cfg = cudarc::driver::LaunchConfig {
                    grid_dim: (config.grid.x, config.grid.y, config.grid.z),
                    block_dim: (config.block.x, config.block.y, config.block.z),
                    shared_mem_bytes: shared,
                };
                gpu.launched_since_sync()
                    .record(K::NAME, config.grid, config.block);
                // SAFETY: the PTX entry and `K::Args` come from the same `#[kernel]`
                // signature: scalars by value and each buffer as (device pointer,
                // element count), in order, which is what `push_gpu` pushes. The
                // counts are the allocations' own, and the guards in the kernel
                // never write past them. cudarc's stream events keep the buffers'
                // memory alive and ordered until the kernel is done with it.
                unsafe { builder.launch(cfg) }
                    .map(|_| ())
                    .map_err(|e| self.observe(e, &format!("launching kernel `{}`", K::NAME)))
            }
            _ => unreachable!("a stream belongs to the device that made it"),
        }
    }

    /// Fails if `other` is not this device.
    pub(crate) fn check_same(&self, other: &Device) -> Result<()> {
        if other.inner.id == self.inner.id {
            Ok(())
        } else {
            Err(Error::DeviceMismatch {
                expected: self.name(),
                found: other.name(),
            })
        }
    }

    /// `Ok` while the device is usable. The first call after a kernel fault
    /// returns that fault; every later call returns `ContextPoisoned`.
    pub fn check_health(&self) -> Result<()> {
        let mut health = lock(&self.inner.health);
        match &*health {
            Health::Usable => Ok(()),
            Health::Faulted(e) => {
                let e = e.clone();
                *health = Health::Poisoned(e.clone());
                Err(e)
            }
            Health::Poisoned(e) => Err(Error::ContextPoisoned {
                original: Box::new(e.clone()),
            }),
        }
    }

    /// Records `fault` as the one poisoning the device and returns what this call reports.
    fn report_fault(&self, fault: Error) -> Error {
        lock(&self.inner.health).fault(fault);
        self.check_health()
            .err()
            .unwrap_or_else(|| unreachable!("just faulted"))
    }

    /// A GPU error from `during`: a kernel fault (sticky in CUDA) poisons the
    /// device and names the kernels that may have caused it; others are `Driver`.
    pub(crate) fn observe(&self, e: DriverError, during: &str) -> Error {
        let Backend::Gpu(gpu) = &self.inner.backend else {
            return Error::driver(during)(e);
        };
        match FaultCode::from_driver(e.0) {
            Some(code) => self.report_fault(gpu.launched_since_sync().fault(code, e, during)),
            None => Error::driver(during)(e),
        }
    }

    /// Turns a GPU backend error that carries a kernel fault into the poisoned form.
    fn refine(&self, e: Error) -> Error {
        match e {
            Error::Driver { during, source } => self.observe(source, &during),
            other => other,
        }
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}
