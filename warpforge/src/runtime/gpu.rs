//! The GPU backend over `cudarc` (driver API, loaded at run time): the FFI edge.
//!
//! libcuda is opened lazily, so warpforge builds and runs on machines without a
//! driver; every entry point here checks for the library first and turns its
//! absence into [`Error::NoDriver`] instead of cudarc's panic.

use super::device::{ModuleLoad, lock};
use super::error::FaultCode;
use super::error::{Error, Result};
use super::launch::FunctionLimits;
use crate::ptx::{self, Image, Module};
use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::sys::{CUdevice_attribute, cudaError_enum};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DriverError, PinnedHostSlice,
};
use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use warpforge_device::Dim3;
use warpforge_device::kernel::Kernel;

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

/// Starts unpacking the cubin of the library's first `sm_80` family
/// ([`ptx::sm80_family`], the reductions in a default build) for GPU `ordinal` (found by its
/// compute capability) while the driver makes its context: the two take
/// 45 ms and 114 ms on an H100 (2026-11-26), and the first launch needs both.
/// Nothing happens where the capability cannot be read, the GPU runs PTX, or
/// cubins are turned off (`WARPFORGE_CUBINS=0`).
fn unpack_library_ahead(ordinal: usize) {
    if cubins_turned_off() {
        return;
    }
    let Ok(device) =
        cudarc::driver::result::device::get(i32::try_from(ordinal).unwrap_or(i32::MAX))
    else {
        return;
    };
    let attribute = |a: CUdevice_attribute| {
        // SAFETY: `device` came from cuDeviceGet for an ordinal below the
        // device count (checked by the caller) after cuInit; reading an
        // attribute writes one int.
        unsafe { cudarc::driver::result::device::get_attribute(device, a) }.ok()
    };
    let (Some(major), Some(minor)) = (
        attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
        attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
    ) else {
        return;
    };
    if let Some(Image::Cubin { cubin, .. }) =
        ptx::sm80_family().and_then(|m| ptx::choose_image((major, minor), m))
    {
        cubin.unpack_ahead();
    }
}

/// `WARPFORGE_CUBINS=0`: load the PTX (the driver JIT-compiles it) even where
/// the module has a cubin for the GPU.
fn cubins_turned_off() -> bool {
    std::env::var("WARPFORGE_CUBINS").is_ok_and(|v| v == "0")
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
    /// The variant of the library's `sm_80` families ([`ptx::sm80_family`];
    /// `none` when the build holds none) it runs (each loaded
    /// at the first launch of one of its kernels; see [`Device::module_image`](crate::Device::module_image)
    /// for whether its cubin or its PTX was loaded).
    pub ptx_arch: &'static str,
}

/// An opened GPU: context, stream, and the PTX modules loaded on it.
pub(crate) struct Gpu {
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) info: GpuInfo,
    /// The loaded modules by name ([`Module::name`]); the device's module
    /// table makes sure each is loaded once.
    modules: Mutex<HashMap<&'static str, Arc<LoadedModule>>>,
    /// Each kernel type's entry, after it was resolved and its signature checked.
    functions: Mutex<HashMap<TypeId, GpuFunction>>,
    launches: Mutex<LaunchLog>,
}

/// A module loaded on a GPU (its cubin or its JIT-compiled PTX), and the
/// PTX variant its kernels' parameters are read from, each at its first launch.
struct LoadedModule {
    module: &'static Module,
    cuda: Arc<CudaModule>,
    variant: &'static ptx::PtxModule,
}

/// A kernel entry point and what it allows, read once from the driver.
#[derive(Clone)]
pub(crate) struct GpuFunction {
    pub(crate) function: CudaFunction,
    pub(crate) limits: FunctionLimits,
    /// The dynamic shared memory it was allowed beyond the default 48 KiB.
    shared_allowed: Arc<Mutex<u32>>,
}

/// The kernels that may still be running: a fault the driver reports later
/// (CUDA errors are sticky and asynchronous) came from one of them.
///
/// Each launch is logged with its stream; a completed wait removes what it
/// proved finished (everything on the stream it waited for, up to the point
/// the wait was queued), and after every completed wait the streams whose
/// queues the driver reports empty are cleared too. So a fault is attributed
/// to the oldest kernel still in flight, not to one that finished long ago.
#[derive(Default)]
pub(crate) struct LaunchLog {
    next_seq: u64,
    in_flight: std::collections::VecDeque<InFlight>,
    /// Launches not logged because `in_flight` was full.
    untracked: u64,
    /// The streams with logged launches, to ask the driver whether they are idle.
    streams: HashMap<StreamKey, std::sync::Weak<CudaStream>>,
}

/// Identifies a stream in the log (its `CudaStream`'s address).
pub(crate) type StreamKey = usize;

/// The key of `stream` in the launch log.
pub(crate) fn stream_key(stream: &Arc<CudaStream>) -> StreamKey {
    Arc::as_ptr(stream) as usize
}

struct InFlight {
    seq: u64,
    stream: StreamKey,
    kernel: &'static str,
    grid: Dim3,
    block: Dim3,
}

/// Launches logged at most between two waits; beyond, they are only counted.
const LAUNCH_LOG_CAPACITY: usize = 4096;

impl LaunchLog {
    /// Logs a launch on `stream`.
    pub(crate) fn record(
        &mut self,
        stream: &Arc<CudaStream>,
        kernel: &'static str,
        grid: Dim3,
        block: Dim3,
    ) {
        let key = stream_key(stream);
        self.streams
            .entry(key)
            .or_insert_with(|| Arc::downgrade(stream));
        self.record_key(key, kernel, grid, block);
    }

    fn record_key(&mut self, stream: StreamKey, kernel: &'static str, grid: Dim3, block: Dim3) {
        self.next_seq += 1;
        if self.in_flight.len() < LAUNCH_LOG_CAPACITY {
            self.in_flight.push_back(InFlight {
                seq: self.next_seq,
                stream,
                kernel,
                grid,
                block,
            });
        } else {
            self.untracked += 1;
        }
    }

    /// The position a wait queued now reaches: pass it to [`LaunchLog::finished`].
    pub(crate) fn mark(&self) -> u64 {
        self.next_seq
    }

    /// A wait for `stream`'s work up to `mark` completed.
    pub(crate) fn finished(&mut self, stream: StreamKey, mark: u64) {
        self.in_flight
            .retain(|l| !(l.stream == stream && l.seq <= mark));
        self.forget_idle_streams();
    }

    /// The whole device synchronised: nothing is in flight.
    pub(crate) fn clear(&mut self) {
        *self = LaunchLog {
            next_seq: self.next_seq,
            ..LaunchLog::default()
        };
    }

    /// Asks the driver which logged streams have finished all their work and
    /// forgets their launches (called after a completed wait, so no error is pending).
    pub(crate) fn poll_streams(&mut self) {
        let mark = self.next_seq;
        let idle: Vec<StreamKey> = self
            .streams
            .iter()
            .filter(|(_, s)| s.upgrade().is_some_and(|s| stream_is_idle(&s)))
            .map(|(k, _)| *k)
            .collect();
        for key in idle {
            self.in_flight
                .retain(|l| !(l.stream == key && l.seq <= mark));
        }
        self.forget_idle_streams();
    }

    fn forget_idle_streams(&mut self) {
        let in_flight = &self.in_flight;
        self.streams
            .retain(|k, _| in_flight.iter().any(|l| l.stream == *k));
    }

    /// The `KernelFault` for a sticky driver error seen while `during`.
    pub(crate) fn fault(&self, code: FaultCode, e: DriverError, during: &str) -> Error {
        let first = self.in_flight.front();
        let (kernel, grid, block) = first.map_or(("(unknown)", Dim3::x(0), Dim3::x(0)), |l| {
            (l.kernel, l.grid, l.block)
        });
        let logged = self.in_flight.len() as u64;
        let which = match (logged, self.untracked) {
            (0, 0) => "no kernel of this device was in flight".to_owned(),
            (1, 0) => "the only kernel in flight".to_owned(),
            (n, 0) => format!(
                "the oldest of {n} kernels in flight; set CUDA_LAUNCH_BLOCKING=1 to make the \
                 faulting launch report it"
            ),
            (n, u) => format!(
                "the oldest of {} kernels in flight ({u} not logged); set \
                 CUDA_LAUNCH_BLOCKING=1 to make the faulting launch report it",
                n + u
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

/// Whether every operation queued on `stream` has completed (`cuStreamQuery`).
fn stream_is_idle(stream: &CudaStream) -> bool {
    if stream.context().bind_to_thread().is_err() {
        return false;
    }
    // SAFETY: the stream is alive (we hold it) and belongs to the context just
    // made current; cuStreamQuery only reads its state.
    let status = unsafe { cudarc::driver::sys::cuStreamQuery(stream.cu_stream()) };
    status == cudaError_enum::CUDA_SUCCESS
}

impl Gpu {
    /// Opens GPU `ordinal`, resetting its primary context first if `reset_first`
    /// (the caller checked that no handle of it is alive). `previous_fault` is
    /// the fault that poisoned its last context in this process, if one did.
    pub(crate) fn open(
        ordinal: usize,
        reset_first: bool,
        previous_fault: Option<&Error>,
    ) -> Result<Gpu> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        unpack_library_ahead(ordinal);
        let ctx = open_context(ordinal, reset_first, previous_fault)?;
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
        // Checked now, loaded at the first launch of one of its kernels.
        let ptx_arch = match ptx::sm80_family() {
            Some(family) => {
                family
                    .variant_for_gpu(&name, compute_capability, driver_version)?
                    .arch
            }
            None => "none",
        };
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
            ptx_arch,
        };
        Ok(Gpu {
            stream: ctx.default_stream(),
            info,
            modules: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            launches: Mutex::new(LaunchLog::default()),
        })
    }

    /// Loads `module` on this GPU: the cubin for its exact compute capability
    /// if the module has one, else the variant's PTX, which the driver
    /// JIT-compiles ([`Module::image_for_gpu`]); a cubin the driver rejects
    /// falls back to the PTX. Each entry's parameters are read from the
    /// variant's PTX at its kernel's first launch ([`Gpu::function`]).
    /// Returns what was loaded (`sm_90 cubin`, `PTX JIT: no cubin for sm_120`)
    /// and what each part cost. The caller (the device's module table) loads
    /// each module once.
    pub(crate) fn load(&self, module: &'static Module) -> Result<ModuleLoad> {
        let started = Instant::now();
        let info = &self.info;
        let mut image =
            module.image_for_gpu(&info.name, info.compute_capability, info.driver_version)?;
        if matches!(image, Image::Cubin { .. }) && cubins_turned_off() {
            image = Image::Ptx {
                variant: image.variant(),
                reason: "PTX JIT: WARPFORGE_CUBINS=0".to_owned(),
            };
        }
        let variant = image.variant();
        let ctx = self.stream.context();
        let jit = || {
            ctx.load_module(cudarc::nvrtc::Ptx::from_src(variant.source))
                .map_err(Error::driver(format!(
                    "loading the {} PTX of module `{}` (the driver JIT-compiles it)",
                    variant.arch, module.name
                )))
        };
        let elf = match &image {
            Image::Cubin { cubin, .. } => Some(cubin.take_elf()),
            Image::Ptx { .. } => None,
        };
        let unpack = started.elapsed();
        let (cuda, loaded) = match (&image, elf) {
            (_, Some(Err(why))) => (jit()?, format!("PTX JIT: {why}")),
            (Image::Cubin { cubin, .. }, Some(Ok(elf))) => {
                match ctx.load_module(cudarc::nvrtc::Ptx::from_binary(elf)) {
                    Ok(cuda) => (cuda, image.to_string()),
                    Err(e) if FaultCode::from_driver(e.0).is_some() => {
                        return Err(Error::driver(format!(
                            "loading the {} cubin of module `{}`",
                            cubin.arch(),
                            module.name
                        ))(e));
                    }
                    Err(e) => (
                        jit()?,
                        format!(
                            "PTX JIT: the driver rejected the {} cubin ({:?})",
                            cubin.arch(),
                            e.0
                        ),
                    ),
                }
            }
            _ => (jit()?, image.to_string()),
        };
        let driver = started.elapsed() - unpack;
        lock(&self.modules).insert(
            module.name,
            Arc::new(LoadedModule {
                module,
                cuda,
                variant,
            }),
        );
        Ok(ModuleLoad {
            image: loaded,
            unpack,
            driver,
        })
    }

    /// The kernels that may still be running.
    pub(crate) fn in_flight(&self) -> MutexGuard<'_, LaunchLog> {
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

    /// `K`'s entry point and its limits, looked up once per kernel type: in
    /// the loaded module named `K::MODULE` only (else `ModuleNotLoaded`, which
    /// the device answers by loading that module if it knows it),
    /// after checking `K::PARAMS` against the entry's `.param` list (else
    /// `KernelSignature`).
    pub(crate) fn function<K: Kernel>(&self) -> Result<GpuFunction> {
        // By type, not name: each kernel type's description is checked on its own.
        let key = TypeId::of::<K>();
        if let Some(f) = lock(&self.functions).get(&key) {
            return Ok(f.clone());
        }
        let loaded = {
            let modules = lock(&self.modules);
            let module = ptx::resolve::<K>(modules.values().map(|l| l.module))?;
            modules[module.name].clone()
        };
        ptx::check_entry(
            K::NAME,
            loaded.module.name,
            K::PARAMS,
            loaded.variant.entry_params(K::NAME).as_ref(),
            || loaded.variant.entry_signatures().len(),
        )?;
        let during = format!(
            "looking up kernel `{}` in PTX module `{}`",
            K::NAME,
            loaded.module.name
        );
        let function = loaded
            .cuda
            .load_function(K::NAME)
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
        Ok(lock(&self.functions).entry(key).or_insert(f).clone())
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

    /// An allocation of `len` elements left as the allocator hands it over
    /// (no memset); out of memory is `Error::OutOfMemory`.
    pub(crate) fn alloc_unset<T: crate::Element>(&self, len: usize) -> Result<CudaSlice<T>> {
        let elements = len.max(1);
        let requested =
            elements
                .checked_mul(size_of::<T>())
                .ok_or_else(|| Error::SizeOverflow {
                    what: format!("allocating {len} elements of {}", T::DTYPE.name()),
                })?;
        // SAFETY: cudarc marks this allocation unsafe because its memory is
        // unset. `T: Element` is plain old data for which every bit pattern
        // is a valid value, so whatever the memory holds is a `T`: reading it
        // before a kernel writes it gives unspecified values, never undefined
        // behaviour. The size was checked above.
        unsafe { self.stream.alloc::<T>(elements) }
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

/// Retains GPU `ordinal`'s primary context, resetting it first when a kernel
/// fault poisoned it. A sticky fault reported while retaining it (the context
/// was poisoned and never reset) gets one reset and a retry; if that fails
/// too the driver keeps the fault for the life of the process (driver 580 on
/// an H200 did, after a trap): `StickyFault`.
fn open_context(
    ordinal: usize,
    reset_first: bool,
    previous_fault: Option<&Error>,
) -> Result<Arc<CudaContext>> {
    if reset_first {
        reset_primary_context(ordinal)?;
    }
    let sticky = |source: DriverError| Error::StickyFault {
        device: format!("GPU {ordinal}"),
        original: Box::new(previous_fault.cloned().unwrap_or_else(|| Error::Driver {
            during: format!("creating a CUDA context on GPU {ordinal}"),
            source,
        })),
    };
    match CudaContext::new(ordinal) {
        Ok(ctx) => Ok(ctx),
        Err(e) if FaultCode::from_driver(e.0).is_some() => {
            reset_primary_context(ordinal)?;
            CudaContext::new(ordinal).map_err(sticky)
        }
        Err(e) => Err(Error::driver("creating a CUDA context")(e)),
    }
}

/// Destroys GPU `ordinal`'s primary context with everything in it
/// (`cuDevicePrimaryCtxReset`): the way out of a sticky kernel fault.
fn reset_primary_context(ordinal: usize) -> Result<()> {
    let during = format!("resetting GPU {ordinal}'s primary context after a kernel fault");
    let ordinal = i32::try_from(ordinal).map_err(|_| Error::NoDevice {
        ordinal,
        count: device_count().unwrap_or(0),
    })?;
    let device =
        cudarc::driver::result::device::get(ordinal).map_err(Error::driver(during.clone()))?;
    // SAFETY: `device` comes from cuDeviceGet. The caller holds the registry of
    // open GPUs and checked that no handle of this GPU is alive in warpforge, so
    // nothing of ours uses the context being destroyed.
    unsafe { cudarc::driver::sys::cuDevicePrimaryCtxReset_v2(device) }
        .result()
        .map_err(Error::driver(during))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The library's variant for a GPU, as `Gpu::open` picks it.
    fn pick_module(name: &str, cc: (i32, i32), driver: u32) -> Result<&'static ptx::PtxModule> {
        ptx::REDUCE.variant_for_gpu(name, cc, driver)
    }

    #[test]
    fn a_driver_older_than_the_ptx_isa_is_driver_too_old_naming_both() {
        let isa = ptx::REDUCE.variants[0]
            .isa_version()
            .expect("the module has a .version");
        let needed = ptx::cuda_version_for_isa(isa).expect("a known ISA");
        let e = pick_module("NVIDIA H100", (9, 0), needed - 10).unwrap_err();
        let Error::DriverTooOld {
            driver_cuda_version,
            ptx_isa_needed,
            cuda_needed,
            module,
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!(driver_cuda_version, &ptx::format_cuda_version(needed - 10));
        assert_eq!(ptx_isa_needed, &format!("{}.{}", isa.0, isa.1));
        assert_eq!(cuda_needed, &ptx::format_cuda_version(needed));
        assert_eq!(*module, "warpforge-kernels-reduce");
        assert!(e.to_string().contains("update the NVIDIA driver"), "{e}");
        assert!(
            e.to_string().contains("module `warpforge-kernels-reduce`"),
            "{e}"
        );
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
                    module: "warpforge-kernels-reduce",
                    archs,
                    ..
                } if archs == "sm_80"
            ),
            "{e}"
        );
        assert!(e.to_string().contains("PTX only for sm_80"), "{e}");
        // A module with no PTX at all is unsupported everywhere, and says so.
        static EMPTY: Module = Module::new("empty-kernels", &[]);
        let e = EMPTY
            .variant_for_gpu("NVIDIA H100", (9, 0), 13000)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("`empty-kernels` has PTX only for no architecture"),
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
        log.record_key(1, "first", Dim3::x(4), Dim3::x(256));
        log.record_key(2, "second", Dim3::x(1), Dim3::x(32));
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
        assert!(detail.contains("oldest of 2 kernels in flight"), "{detail}");
    }

    fn blamed(log: &LaunchLog) -> (String, String) {
        use cudarc::driver::sys::cudaError_enum::CUDA_ERROR_ASSERT;
        match log.fault(FaultCode::Trap, DriverError(CUDA_ERROR_ASSERT), "testing") {
            Error::KernelFault { kernel, detail, .. } => (kernel, detail),
            e => panic!("{e}"),
        }
    }

    #[test]
    fn a_fault_is_blamed_on_a_kernel_still_in_flight_not_one_a_wait_saw_finish() {
        let (a, b) = (10, 20);
        let mut log = LaunchLog::default();
        // Several launches and reads before the faulting one.
        log.record_key(a, "fill", Dim3::x(8), Dim3::x(256));
        log.record_key(a, "scale", Dim3::x(8), Dim3::x(256));
        let read_a = log.mark();
        log.record_key(b, "other_stream", Dim3::x(2), Dim3::x(64));
        log.finished(a, read_a); // a host read of stream a's result completed
        log.record_key(a, "faulty", Dim3::x(3), Dim3::x(128));
        let (kernel, detail) = blamed(&log);
        assert_eq!(kernel, "other_stream", "{detail}");
        assert!(detail.contains("oldest of 2 kernels in flight"), "{detail}");
        // Stream b's wait, queued after its launch, completes: only `faulty` is left.
        let read_b = log.mark();
        log.finished(b, read_b);
        let (kernel, detail) = blamed(&log);
        assert_eq!(kernel, "faulty");
        assert!(detail.contains("the only kernel in flight"), "{detail}");
    }

    #[test]
    fn a_wait_covers_only_the_launches_queued_before_it() {
        let mut log = LaunchLog::default();
        log.record_key(1, "before", Dim3::x(1), Dim3::x(32));
        let mark = log.mark();
        log.record_key(1, "after", Dim3::x(1), Dim3::x(32));
        log.finished(1, mark);
        assert_eq!(blamed(&log).0, "after");
        log.clear();
        let (kernel, detail) = blamed(&log);
        assert_eq!(kernel, "(unknown)");
        assert!(
            detail.contains("no kernel of this device was in flight"),
            "{detail}"
        );
    }

    #[test]
    fn launches_beyond_the_log_are_counted_and_the_oldest_stays_blamed() {
        let mut log = LaunchLog::default();
        let extra = 7;
        for i in 0..LAUNCH_LOG_CAPACITY + extra {
            log.record_key(
                1,
                if i == 0 { "oldest" } else { "later" },
                Dim3::x(1),
                Dim3::x(1),
            );
        }
        let (kernel, detail) = blamed(&log);
        assert_eq!(kernel, "oldest");
        let total = LAUNCH_LOG_CAPACITY + extra;
        assert!(
            detail.contains(&format!(
                "oldest of {total} kernels in flight ({extra} not logged)"
            )),
            "{detail}"
        );
    }
}
