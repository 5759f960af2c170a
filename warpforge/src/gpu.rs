//! The GPU backend over `cudarc` (driver API, loaded at run time): the FFI edge.
//!
//! libcuda is opened lazily, so warpforge builds and runs on machines without a
//! driver; every entry point here checks for the library first and turns its
//! absence into [`Error::NoDriver`] instead of cudarc's panic.

use crate::device::lock;
use crate::error::FaultCode;
use crate::error::{Error, Result};
use crate::launch::FunctionLimits;
use crate::ptx::{self, PtxModule};
use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::sys::{CUdevice_attribute, cudaError_enum};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DriverError, PinnedHostSlice,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use warpforge_device::Dim3;

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
    functions: Mutex<HashMap<&'static str, GpuFunction>>,
    launches: Mutex<LaunchLog>,
}

/// A kernel entry point and what it allows, read once from the driver.
#[derive(Clone)]
pub(crate) struct GpuFunction {
    pub(crate) function: CudaFunction,
    pub(crate) limits: FunctionLimits,
    /// The dynamic shared memory it was allowed beyond the default 48 KiB.
    shared_allowed: Arc<Mutex<u32>>,
}

/// The kernels launched since the device last synchronised: a fault reported
/// later (CUDA errors are sticky and asynchronous) came from one of them.
#[derive(Default)]
pub(crate) struct LaunchLog {
    first: Option<(&'static str, Dim3, Dim3)>,
    count: u64,
}

impl LaunchLog {
    pub(crate) fn record(&mut self, kernel: &'static str, grid: Dim3, block: Dim3) {
        self.first.get_or_insert((kernel, grid, block));
        self.count += 1;
    }

    pub(crate) fn clear(&mut self) {
        *self = LaunchLog::default();
    }

    /// The `KernelFault` for a sticky driver error seen while `during`.
    pub(crate) fn fault(&self, code: FaultCode, e: DriverError, during: &str) -> Error {
        let (kernel, grid, block) = self.first.unwrap_or(("(unknown)", Dim3::x(0), Dim3::x(0)));
        let which = match self.count {
            0 | 1 => "the last kernel launched".to_owned(),
            n => format!(
                "the first of {n} kernels launched since the last synchronisation; set \
                 CUDA_LAUNCH_BLOCKING=1 to make the faulting launch report it"
            ),
        };
        Error::KernelFault {
            kernel: kernel.to_owned(),
            grid,
            block,
            code,
            // The error's name, not its Display: that asks libcuda for a string.
            detail: format!("{:?} (seen while {during}; {which})", e.0),
            emulated: None,
        }
    }
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
            launches: Mutex::new(LaunchLog::default()),
        })
    }

    pub(crate) fn launched_since_sync(&self) -> MutexGuard<'_, LaunchLog> {
        lock(&self.launches)
    }

    /// Bytes free and total.
    pub(crate) fn memory_info(&self) -> Result<(u64, u64), DriverError> {
        let (free, total) = self.stream.context().mem_get_info()?;
        Ok((free as u64, total as u64))
    }

    /// Lets `function` use `shared` bytes of dynamic shared memory: above the
    /// default 48 KiB a kernel must opt in (`cuFuncSetAttribute`).
    pub(crate) fn allow_shared(
        &self,
        function: &GpuFunction,
        shared: u32,
    ) -> Result<(), DriverError> {
        let mut allowed = lock(&function.shared_allowed);
        if shared > self.info.max_shared_per_block && shared > *allowed {
            function.function.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                i32::try_from(shared).unwrap_or(i32::MAX),
            )?;
            *allowed = shared;
        }
        Ok(())
    }

    /// `len` zeroed elements of page-locked host memory.
    pub(crate) fn alloc_pinned<T: crate::Element>(&self, len: usize) -> Result<PinnedHostSlice<T>> {
        let elements = len.max(1);
        let requested =
            elements
                .checked_mul(size_of::<T>())
                .ok_or_else(|| Error::SizeOverflow {
                    what: format!("allocating {len} pinned elements of {}", T::DTYPE.name()),
                })?;
        // SAFETY: flags 0 (not write-combined: the host reads it too); the memory
        // is zeroed below before anyone can read it.
        let mut pinned = unsafe {
            self.stream
                .context()
                .alloc_pinned_with_flags::<T>(elements, 0)
        }
        .map_err(|e| self.alloc_error(e, requested as u64))?;
        pinned
            .as_mut_slice()
            .map_err(Error::driver("zeroing pinned memory"))?
            .fill(T::default());
        Ok(pinned)
    }

    /// The loaded entry point `name` and its limits, looked up once.
    pub(crate) fn function(&self, name: &'static str) -> Result<GpuFunction> {
        let mut cache = lock(&self.functions);
        if let Some(f) = cache.get(name) {
            return Ok(f.clone());
        }
        let during = format!("looking up kernel `{name}` in the PTX module");
        let function = self
            .module
            .load_function(name)
            .map_err(Error::driver(during.clone()))?;
        let attr = |a| {
            function
                .get_attribute(a)
                .map(|v| u32::try_from(v).unwrap_or(0))
                .map_err(Error::driver(during.clone()))
        };
        let limits = FunctionLimits {
            max_threads_per_block: attr(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            )?,
            registers_per_thread: attr(CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            static_shared_bytes: attr(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
        };
        let f = GpuFunction {
            function,
            limits,
            shared_allowed: Arc::new(Mutex::new(0)),
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_older_than_the_ptx_isa_is_driver_too_old_naming_both() {
        let isa = ptx::MODULES[0]
            .isa_version()
            .expect("the module has a .version");
        let needed = ptx::cuda_version_for_isa(isa).expect("a known ISA");
        let e = pick_module("NVIDIA H100", (9, 0), needed - 10).unwrap_err();
        let Error::DriverTooOld {
            driver_cuda_version,
            ptx_isa_needed,
            cuda_needed,
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!(driver_cuda_version, &ptx::format_cuda_version(needed - 10));
        assert_eq!(ptx_isa_needed, &format!("{}.{}", isa.0, isa.1));
        assert_eq!(cuda_needed, &ptx::format_cuda_version(needed));
        assert!(e.to_string().contains("update the NVIDIA driver"), "{e}");
        // The driver that introduced the ISA, or any newer one, loads it.
        assert!(pick_module("NVIDIA H100", (9, 0), needed).is_ok());
    }

    #[test]
    fn a_gpu_older_than_sm_80_is_unsupported() {
        let e = pick_module("Tesla T4", (7, 5), 13000).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::UnsupportedGpu {
                    compute_capability: (7, 5),
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn sticky_driver_errors_are_kernel_faults_and_others_are_not() {
        use cudarc::driver::sys::cudaError_enum::*;
        assert_eq!(
            FaultCode::from_driver(CUDA_ERROR_ILLEGAL_ADDRESS),
            Some(FaultCode::IllegalAddress)
        );
        assert_eq!(
            FaultCode::from_driver(CUDA_ERROR_ASSERT),
            Some(FaultCode::Trap)
        );
        assert_eq!(FaultCode::from_driver(CUDA_ERROR_OUT_OF_MEMORY), None);
        let mut log = LaunchLog::default();
        log.record("first", Dim3::x(4), Dim3::x(256));
        log.record("second", Dim3::x(1), Dim3::x(32));
        let e = log.fault(
            FaultCode::IllegalAddress,
            DriverError(CUDA_ERROR_ILLEGAL_ADDRESS),
            "copying a buffer to the host",
        );
        let Error::KernelFault {
            kernel,
            grid,
            detail,
            ..
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!((kernel.as_str(), grid.x), ("first", 4));
        assert!(detail.contains("first of 2 kernels"), "{detail}");
    }
}
