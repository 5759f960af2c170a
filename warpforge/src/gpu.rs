//! The GPU backend over `cudarc` (driver API, loaded at run time): the FFI edge.
//!
//! libcuda is opened lazily, so warpforge builds and runs on machines without a
//! driver; every entry point here checks for the library first and turns its
//! absence into [`Error::NoDriver`] instead of cudarc's panic.

use crate::error::{Error, Result};
use crate::ptx::{self, PtxModule};
use cudarc::driver::sys::{CUdevice_attribute, cudaError_enum};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DriverError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Whether libcuda can be loaded on this machine.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names; loads no symbol.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// The driver's CUDA version in its encoding (`12080` = 12.8).
pub fn driver_version() -> Result<u32> {
    if !driver_present() {
        return Err(Error::NoDriver);
    }
    let mut version = 0;
    // SAFETY: the library is present (checked above); cuDriverGetVersion writes one int.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(Error::driver("reading the driver version"))?;
    Ok(u32::try_from(version).unwrap_or(0))
}

/// Number of CUDA devices the driver sees.
pub fn device_count() -> Result<usize> {
    if !driver_present() {
        return Err(Error::NoDriver);
    }
    cudarc::driver::result::init().map_err(Error::driver("initialising the CUDA driver"))?;
    let n = cudarc::driver::result::device::get_count()
        .map_err(Error::driver("counting CUDA devices"))?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// What a GPU is and what it allows, read once when it is opened.
#[derive(Clone, Debug)]
pub struct GpuInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Compute capability.
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Device memory in bytes.
    pub total_memory: u64,
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// Block extent per dimension.
    pub max_block_dim: [u32; 3],
    /// Grid extent per dimension.
    pub max_grid_dim: [u32; 3],
    /// Shared memory per block without opt-in, bytes.
    pub max_shared_per_block: u32,
    /// Shared memory per block with opt-in, bytes.
    pub max_shared_per_block_optin: u32,
    /// The driver's CUDA version (`12080` = 12.8).
    pub driver_version: u32,
    /// The embedded PTX module loaded on it.
    pub ptx_arch: &'static str,
}

/// An opened GPU: context, stream, and the embedded PTX module loaded.
pub(crate) struct Gpu {
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) info: GpuInfo,
    module: Arc<CudaModule>,
    functions: Mutex<HashMap<&'static str, CudaFunction>>,
}

impl Gpu {
    pub(crate) fn open(ordinal: usize) -> Result<Gpu> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).map_err(Error::driver("creating a CUDA context"))?;
        let attr = |a: CUdevice_attribute| -> Result<u32> {
            let v = ctx
                .attribute(a)
                .map_err(Error::driver("reading device attributes"))?;
            Ok(u32::try_from(v).unwrap_or(0))
        };
        use CUdevice_attribute::*;
        let compute_capability = ctx
            .compute_capability()
            .map_err(Error::driver("reading the compute capability"))?;
        let driver_version = driver_version()?;
        let name = ctx
            .name()
            .map_err(Error::driver("reading the device name"))?;
        let module_src = pick_module(&name, compute_capability, driver_version)?;
        let info = GpuInfo {
            ordinal,
            name,
            compute_capability,
            multiprocessors: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            total_memory: ctx
                .total_mem()
                .map_err(Error::driver("reading device memory"))? as u64,
            max_threads_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block_dim: [
                attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid_dim: [
                attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            max_shared_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            max_shared_per_block_optin: attr(
                CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
            driver_version,
            ptx_arch: module_src.arch,
        };
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(module_src.source))
            .map_err(Error::driver(format!(
                "loading the embedded {} PTX module (the driver JIT-compiles it)",
                module_src.arch
            )))?;
        let stream = ctx.default_stream();
        Ok(Gpu {
            stream,
            info,
            module,
            functions: Mutex::new(HashMap::new()),
        })
    }

    /// The loaded entry point `name`, looked up once.
    pub(crate) fn function(&self, name: &'static str) -> Result<CudaFunction> {
        let mut cache = self.functions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = cache.get(name) {
            return Ok(f.clone());
        }
        let f = self
            .module
            .load_function(name)
            .map_err(Error::driver(format!(
                "looking up kernel `{name}` in the PTX module"
            )))?;
        cache.insert(name, f.clone());
        Ok(f)
    }

    /// A zeroed allocation of `len` elements; out of memory is `Error::OutOfMemory`.
    pub(crate) fn alloc_zeroed<T: crate::Element>(&self, len: usize) -> Result<CudaSlice<T>> {
        // cuMemAlloc rejects 0 bytes; an empty buffer still owns one element.
        let elements = len.max(1);
        let requested =
            elements
                .checked_mul(size_of::<T>())
                .ok_or_else(|| Error::SizeOverflow {
                    what: format!("allocating {len} elements of {}", T::DTYPE.name()),
                })?;
        self.stream
            .alloc_zeros::<T>(elements)
            .map_err(|e| self.alloc_error(e, requested as u64))
    }

    fn alloc_error(&self, e: DriverError, requested: u64) -> Error {
        if e.0 == cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
            let (free, total) = self.stream.context().mem_get_info().unwrap_or((0, 0));
            Error::OutOfMemory {
                requested,
                free: free as u64,
                total: total as u64,
            }
        } else {
            Error::driver("allocating device memory")(e)
        }
    }
}

/// The embedded module for this GPU, if the driver can JIT it.
fn pick_module(
    name: &str,
    compute_capability: (i32, i32),
    driver_version: u32,
) -> Result<&'static PtxModule> {
    let module = ptx::module_for(compute_capability).ok_or_else(|| Error::UnsupportedGpu {
        name: name.to_owned(),
        compute_capability,
    })?;
    if let Some(isa) = module.isa_version()
        && let Some(needed) = ptx::cuda_version_for_isa(isa)
        && driver_version < needed
    {
        return Err(Error::DriverTooOld {
            driver_cuda_version: ptx::format_cuda_version(driver_version),
            ptx_isa_needed: format!("{}.{}", isa.0, isa.1),
            cuda_needed: ptx::format_cuda_version(needed),
        });
    }
    Ok(module)
}
