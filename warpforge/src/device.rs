//! A device: a GPU opened through the driver, or the CPU emulator.

use crate::buffer::{DeviceBuffer, Memory};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::gpu::{Gpu, GpuInfo};
use crate::launch::{KernelArgs, LaunchConfig, Limits};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use warpforge_device::emu::{self, DeviceMemory, LaunchShape};
use warpforge_device::kernel::Kernel;

enum Backend {
    Gpu(Gpu),
    Emulator,
}

struct Inner {
    /// Distinguishes devices, so a buffer used with a device it does not belong to is caught.
    id: u64,
    backend: Backend,
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

    /// A CPU emulator device: runs the same kernels with CUDA semantics.
    pub fn emulator() -> Device {
        Device::with_backend(Backend::Emulator)
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
            Backend::Emulator => None,
        }
    }

    /// `GPU 0 (NVIDIA H100 80GB HBM3)` or `CPU emulator`, with an instance number.
    pub fn name(&self) -> String {
        match &self.inner.backend {
            Backend::Gpu(g) => format!("GPU {} ({})", g.info.ordinal, g.info.name),
            Backend::Emulator => format!("CPU emulator #{}", self.inner.id),
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
            },
            Backend::Emulator => Limits::EMULATOR,
        }
    }

    /// A buffer of `len` zeros.
    pub fn alloc_zeroed<T: Element>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let memory = match &self.inner.backend {
            Backend::Gpu(g) => Memory::Gpu(g.alloc_zeroed(len)?),
            Backend::Emulator => {
                Memory::Emulated(DeviceMemory::zeroed(len).ok_or_else(|| Error::OutOfMemory {
                    requested: (len as u64).saturating_mul(size_of::<T>() as u64),
                    free: 0,
                    total: 0,
                })?)
            }
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
        match &mut buf.memory {
            Memory::Emulated(m) => m.as_mut_slice().copy_from_slice(data),
            Memory::Gpu(slice) => {
                if !data.is_empty() {
                    let stream = slice.stream().clone();
                    stream
                        .memcpy_htod(data, &mut slice.slice_mut(..data.len()))
                        .map_err(Error::driver("copying a buffer to the device"))?;
                }
            }
        }
        Ok(buf)
    }

    /// Waits for all work queued on this device.
    pub fn synchronize(&self) -> Result<()> {
        match &self.inner.backend {
            Backend::Gpu(g) => g
                .stream
                .synchronize()
                .map_err(Error::driver("synchronising the stream")),
            Backend::Emulator => Ok(()),
        }
    }

    /// Launches `kernel` with `config` and `args`.
    ///
    /// `args` must match the kernel's signature (checked at compile time); the
    /// config is checked against the kernel's declared block shape (`BlockShape`),
    /// the device's limits and the kernel's declared shared memory, and every
    /// buffer against this device, before anything runs.
    /// On the GPU the launch is queued on the device's stream; reading a result
    /// (`to_host`) waits for it. On the emulator it runs to completion, and a
    /// fault (out-of-bounds, divergent barrier, …) is `Error::KernelFault`.
    pub fn launch<K: Kernel, A: KernelArgs<K::Args>>(
        &self,
        kernel: K,
        config: LaunchConfig,
        mut args: A,
    ) -> Result<()> {
        let _ = kernel;
        if let Some(required) = K::BLOCK
            && config.block != required
        {
            return Err(Error::BlockShape {
                kernel: K::NAME,
                required,
                found: config.block,
            });
        }
        let shared = self.limits().check(K::NAME, &config, K::SHARED_BYTES)?;
        for owner in args.owners() {
            if owner.inner.id != self.inner.id {
                return Err(Error::DeviceMismatch {
                    expected: self.name(),
                    found: owner.name(),
                });
            }
        }
        match &self.inner.backend {
            Backend::Emulator => {
                let abi = args.emu_abi().ok_or_else(|| Error::DeviceMismatch {
                    expected: self.name(),
                    found: "a GPU".into(),
                })?;
                let shape = LaunchShape {
                    grid: config.grid,
                    block: config.block,
                    dynamic_shared_bytes: shared as usize,
                };
                // SAFETY: `args` borrows every buffer (inputs shared, outputs
                // exclusively) for this whole call, the emulator runs the launch to
                // completion before returning, and each RawIn/RawOut carries its
                // Vec's own pointer and length.
                emu::launch(K::NAME, shape, &|| unsafe { K::run_thread(abi) })?;
                Ok(())
            }
            Backend::Gpu(gpu) => {
                let function = gpu.function(K::NAME)?;
                let mut builder = gpu.stream.launch_builder(&function);
                args.push_gpu(&mut builder);
                let cfg = cudarc::driver::LaunchConfig {
                    grid_dim: (config.grid.x, config.grid.y, config.grid.z),
                    block_dim: (config.block.x, config.block.y, config.block.z),
                    shared_mem_bytes: shared,
                };
                // SAFETY: the PTX entry and `K::Args` come from the same `#[kernel]`
                // signature: scalars by value and each buffer as (device pointer,
                // element count), in order, which is what `push_gpu` pushes. The
                // counts are the allocations' own, and the guards in the kernel
                // never write past them. cudarc's stream events keep the buffers'
                // memory alive and ordered until the kernel is done with it.
                unsafe { builder.launch(cfg) }
                    .map_err(Error::driver(format!("launching kernel `{}`", K::NAME)))?;
                Ok(())
            }
        }
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}
