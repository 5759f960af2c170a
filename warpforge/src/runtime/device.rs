//! A device: a GPU opened through the driver, or the CPU emulator.

use super::buffer::{DeviceBuffer, Memory, PinnedBuffer, PinnedMemory};
use super::element::Element;
use super::emulator::{self, Binding, EmuMemory, Pool};
use super::error::{Error, FaultCode, Result};
use super::gpu::{Gpu, GpuInfo, StreamKey};
use super::launch::{Arch, KernelArgs, LaunchConfig, Limits};
use super::stream::{Stream, StreamKind};
use super::tensor_map::UploadedMaps;
use crate::ptx::Module;
use cudarc::driver::DriverError;
use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;
use warpforge_device::emu::stream::EmuStream;
use warpforge_device::emu::{self, LaunchShape, MemoryProfile, OutputBuffer};
use warpforge_device::kernel::Kernel;

enum Backend {
    /// Boxed: its launch log and caches dwarf the emulator's handles.
    Gpu(Box<Gpu>),
    Emulator {
        pool: Arc<Pool>,
        /// The GPU it emulates: its limits and compute capability.
        arch: Arch,
        /// The streams made on it, for `synchronize`.
        streams: Mutex<Vec<Weak<EmuStream>>>,
        /// Where launches put their memory profiles while
        /// [`Device::profile_memory`] runs; `None` otherwise.
        profiles: Mutex<Option<ProfileSink>>,
    },
}

/// The memory profiles of the launches made while [`Device::profile_memory`] runs.
type ProfileSink = Arc<Mutex<Vec<MemoryProfile>>>;

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
    /// The fault that made the device unusable, reported or not.
    fn fault_seen(&self) -> Option<Error> {
        match self {
            Health::Usable => None,
            Health::Faulted(e) | Health::Poisoned(e) => Some(e.clone()),
        }
    }

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
    modules: ModuleTable,
    /// Scratch buffers kept between calls ([`Device::scratch`]).
    scratch: Mutex<Vec<(&'static str, usize, Memory<u64>)>>,
    /// Kernel outputs given back by their dropped buffers
    /// ([`Device::cached_output`]): element type, length, `Memory<T>`; the
    /// most recently returned last.
    outputs: Mutex<Vec<CachedOutput>>,
    /// How many [`Device::work_done_by`] calls are running: launches
    /// are counted only then, so other launches pay one atomic load.
    recording: AtomicUsize,
    /// Launches counted while recording, per kernel name.
    launches: Mutex<BTreeMap<&'static str, u64>>,
    /// Device allocations made, ever ([`Device::work_done_by`] takes differences).
    allocations: AtomicU64,
    /// Memsets queued (one per zeroed allocation), ever.
    memsets: AtomicU64,
    /// Encoded tensor maps in device memory, by their bytes
    /// ([`Device::uploaded_map`]).
    uploaded_maps: Mutex<UploadedMaps<Arc<cudarc::driver::CudaSlice<u64>>>>,
}

/// What some host code made a device do ([`Device::work_done_by`]): how a
/// call's cost on the stream can be counted without a GPU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkCounts {
    /// Launches per kernel name: every launch that passed its checks and
    /// was run or queued, on any stream.
    pub launches: BTreeMap<&'static str, u64>,
    /// Device allocations (a scratch buffer or a kernel output lent from the
    /// device's caches is none; a new one is one).
    pub allocations: u64,
    /// Memsets (a zeroed allocation is an allocation and a memset).
    pub memsets: u64,
}

impl WorkCounts {
    /// Launches of every kernel together.
    pub fn total_launches(&self) -> u64 {
        self.launches.values().sum()
    }
}

/// Scratch buffers a device keeps at most: one per host thread that queues
/// work needing one at the same moment; a buffer returned beyond this is freed.
const SCRATCH_KEPT: usize = 8;

/// A kernel output's memory kept for the next call that needs one of the
/// same element type and length: `Memory<T>` for that type.
type CachedOutput = (TypeId, usize, Box<dyn Any + Send>);

/// Kernel outputs a device keeps at most (of every type and length
/// together); returning one more frees the one returned longest ago.
const OUTPUTS_KEPT: usize = 16;

/// The modules a device knows, each loaded on it at most once, when
/// [`Device::load`] asks or at the first launch of one of its kernels. The
/// same code runs for both backends: on the emulator "loading" does
/// nothing (kernels run from host code) but is counted all the same.
#[derive(Default)]
struct ModuleTable {
    slots: Mutex<HashMap<&'static str, Arc<ModuleSlot>>>,
    /// Modules loaded, for tests ([`Device::module_loads`]).
    loads: AtomicU64,
}

/// One module on one device.
struct ModuleSlot {
    module: &'static Module,
    /// What was loaded (`sm_90 cubin`, `PTX JIT: …`) and its cost, once it
    /// is. Held while the module loads, so concurrent first launches load it once.
    image: Mutex<Option<ModuleLoad>>,
}

/// What loading a module on a device did ([`Device::module_load`]): which
/// image, and where the time went, so start-up can be measured
/// (`warpforge doctor --timings`) rather than guessed at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleLoad {
    /// `sm_90 cubin` (machine code for this GPU), `PTX JIT: no cubin for
    /// sm_120` (the driver compiled the PTX, and why), or `CPU emulator`.
    pub image: String,
    /// Decompressing the embedded cubin (zero for PTX and on the emulator).
    pub unpack: Duration,
    /// The driver's `cuModuleLoadData`: loading the cubin, or JIT-compiling the PTX.
    pub driver: Duration,
}

impl ModuleLoad {
    /// The whole load.
    pub fn total(&self) -> Duration {
        self.unpack + self.driver
    }
}

impl std::fmt::Display for ModuleLoad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        write!(
            f,
            "{} in {:.1} ms (unpack {:.1} ms, driver {:.1} ms)",
            self.image,
            ms(self.total()),
            ms(self.unpack),
            ms(self.driver)
        )
    }
}

/// The modules registered with [`Module::register`] (besides the library's
/// families, always known): every device loads them at the first launch of one of
/// their kernels, a device made afresh included.
static REGISTERED: Mutex<Vec<&'static Module>> = Mutex::new(Vec::new());

/// The module named `name` that this process knows, if any.
fn registered(name: &str) -> Option<&'static Module> {
    let known = |m: &&'static Module| m.name == name;
    (crate::ptx::LIBRARY.iter().copied().find(known))
        .or_else(|| lock(&REGISTERED).iter().copied().find(known))
}

/// [`Module::register`]: `ModuleConflict` if another module of its name is known.
pub(crate) fn register(module: &'static Module) -> Result<()> {
    let mut known = lock(&REGISTERED);
    match known
        .iter()
        .copied()
        .chain(crate::ptx::LIBRARY)
        .find(|m| m.name == module.name)
    {
        Some(m) if m.same_ptx(module) => Ok(()),
        Some(_) => Err(Error::ModuleConflict {
            module: module.name,
        }),
        None => {
            known.push(module);
            Ok(())
        }
    }
}

/// A scratch buffer lent by [`Device::scratch`]: a `DeviceBuffer<u64>` that
/// goes back to its device's cache when dropped.
pub(crate) struct Scratch {
    use_: &'static str,
    buffer: Option<DeviceBuffer<u64>>,
}

impl std::ops::Deref for Scratch {
    type Target = DeviceBuffer<u64>;
    fn deref(&self) -> &DeviceBuffer<u64> {
        self.buffer.as_ref().expect("a lent scratch buffer")
    }
}

impl std::ops::DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut DeviceBuffer<u64> {
        self.buffer.as_mut().expect("a lent scratch buffer")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            let (device, len) = (buffer.device.clone(), buffer.len);
            device.return_scratch(self.use_, len, buffer.into_memory());
        }
    }
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
                modules: ModuleTable::default(),
                scratch: Mutex::new(Vec::new()),
                outputs: Mutex::new(Vec::new()),
                recording: AtomicUsize::new(0),
                launches: Mutex::new(BTreeMap::new()),
                allocations: AtomicU64::new(0),
                memsets: AtomicU64::new(0),
                uploaded_maps: Mutex::new(UploadedMaps::new()),
            }),
        }
    }

    /// Opens GPU `ordinal`; while a handle of it is alive, this returns that
    /// device again (one context per GPU and process, each module loaded
    /// once). It checks that the library's `sm_80` families
    /// ([`ptx::sm80_family`](crate::ptx::sm80_family)) can run on it but loads no
    /// module: each is loaded at the first launch of one of its kernels (see
    /// [`Device::load`]).
    ///
    /// Fails with `NoDriver`, `NoDevice`, `DriverTooOld` or `UnsupportedGpu`,
    /// never a panic, on machines where that GPU cannot be used.
    ///
    /// After a kernel fault the device is poisoned (`ContextPoisoned`). Once
    /// every handle of it (clones, buffers, pinned buffers, streams, events)
    /// has been dropped, `Device::gpu` resets the GPU's context
    /// (`cuDevicePrimaryCtxReset`) and opens it afresh; while any is alive it
    /// is `Error::DeviceInUse` naming the fault and the count, never a
    /// silently broken device. [`Device::reset`] does the same for the last
    /// handle. Where the driver keeps the fault past the reset, both are
    /// `Error::StickyFault`: only a new process can use that GPU.
    pub fn gpu(ordinal: usize) -> Result<Device> {
        open_gpu(&mut lock(&OPEN_GPUS), ordinal)
    }

    /// Loads a module on this device now, so that its kernels can be launched
    /// on it: once per device (later calls return at once; it is thread-safe).
    ///
    /// Loading is otherwise lazy: each family of the library
    /// ([`ptx::LIBRARY`](crate::ptx::LIBRARY)), and any module made known to
    /// the whole process with [`Module::register`], is loaded on a device the
    /// first time one of its kernels is launched there, once per device
    /// however many threads launch at the same time (a family this build
    /// left out is `FamilyNotBuilt`, naming its feature). A kernel of a module
    /// that is neither loaded on the device nor registered is
    /// `ModuleNotLoaded` on a GPU: its entry is looked up in the module named
    /// by its `Kernel::MODULE` only, never by name elsewhere. Call `load` for
    /// a module of yours on each device (a device made afresh by
    /// [`Device::reset`] too), or `register` it once; `load` also pays the
    /// loading cost up front and shows its errors before the first launch.
    ///
    /// On a GPU it picks the variant for the GPU's compute capability
    /// (`UnsupportedGpu` if there is none), checks its PTX ISA against the
    /// driver (`DriverTooOld`), loads the cubin the build embedded for the
    /// GPU's exact architecture, else has the driver JIT-compile the PTX
    /// ([`Device::module_image`] says which), and reads every entry's
    /// `.param` list from the PTX. Before a kernel's first launch its Rust
    /// parameters are checked against its entry's (`KernelSignature` if they
    /// differ). A different module under a name this device already knows is
    /// `ModuleConflict`.
    ///
    /// On the emulator kernels run from host code, so loading does nothing
    /// but record the module: the same program runs on both.
    ///
    /// ```
    /// use warpforge::{Device, LaunchConfig, ptx};
    /// use warpforge_kernels::elementwise::axpy_f32;
    /// // A host crate whose build.rs compiles `my-kernels` writes
    /// // `static MY_KERNELS: ptx::Module = warpforge::include_module!("my-kernels");`
    /// // and then `dev.load(&MY_KERNELS)?`. The library's reductions family:
    /// let (dev, _why_not_gpu) = Device::auto();
    /// dev.load(&ptx::REDUCE)?; // optional: the first launch would load it
    /// let x = dev.upload(&[1.0f32, 2.0])?;
    /// let mut y = dev.upload(&[1.0f32, 1.0])?;
    /// dev.launch(axpy_f32, LaunchConfig::for_elements(2, 256)?, (3.0f32, &x, &mut y))?;
    /// assert_eq!(y.to_host()?, [4.0, 7.0]);
    /// assert_eq!(dev.module_loads(), 1);
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn load(&self, module: &'static Module) -> Result<()> {
        self.check_health()?;
        self.ensure_loaded(module, None).map(|_| ())
    }

    /// What was loaded for `module` on this device: `sm_90 cubin` (machine
    /// code built for this GPU), `PTX JIT: no cubin for sm_120` (the driver
    /// JIT-compiled the PTX, and why), or on the emulator `CPU emulator`;
    /// `None` until a module of that name is loaded here.
    pub fn module_image(&self, module: &Module) -> Option<String> {
        self.module_load(module).map(|l| l.image)
    }

    /// What was loaded for `module` on this device and what the load cost
    /// ([`ModuleLoad`]); `None` until a module of that name is loaded here.
    pub fn module_load(&self, module: &Module) -> Option<ModuleLoad> {
        let slot = lock(&self.inner.modules.slots).get(module.name).cloned()?;
        lock(&slot.image).clone()
    }

    /// How many modules were loaded on this device (each at most once).
    #[doc(hidden)]
    pub fn module_loads(&self) -> u64 {
        self.inner.modules.loads.load(Ordering::SeqCst)
    }

    /// Loads `module` on this device unless it is loaded: once, however many
    /// threads ask at the same time. Returns what was loaded. A family of the
    /// library this build left out is `FamilyNotBuilt` (naming `kernel`, the
    /// one being launched, if any), on either backend, and loads nothing.
    fn ensure_loaded(
        &self,
        module: &'static Module,
        kernel: Option<&'static str>,
    ) -> Result<String> {
        if let Some(feature) = module.left_out {
            return Err(Error::FamilyNotBuilt {
                kernel,
                module: module.name,
                feature,
            });
        }
        let slot = {
            let mut slots = lock(&self.inner.modules.slots);
            match slots.get(module.name) {
                Some(slot) if slot.module.same_ptx(module) => slot.clone(),
                Some(_) => {
                    return Err(Error::ModuleConflict {
                        module: module.name,
                    });
                }
                None => slots
                    .entry(module.name)
                    .or_insert_with(|| {
                        Arc::new(ModuleSlot {
                            module,
                            image: Mutex::new(None),
                        })
                    })
                    .clone(),
            }
        };
        let mut image = lock(&slot.image);
        if let Some(loaded) = &*image {
            return Ok(loaded.image.clone());
        }
        let loaded = match &self.inner.backend {
            Backend::Gpu(g) => g.load(slot.module).map_err(|e| self.refine(e))?,
            Backend::Emulator { .. } => {
                // What the GPU it emulates would do: refuse a module with
                // PTX for other architectures only (the sm_90a module, its
                // `wgmma` and f64 `m16n8k16`, on an sm_80 emulator), rather
                // than run instructions that GPU does not have.
                let cc = self.compute_capability();
                let module = slot.module;
                if !module.variants.is_empty() && module.variant_for(cc).is_none() {
                    return Err(Error::UnsupportedGpu {
                        name: self.name(),
                        compute_capability: cc,
                        module: module.name,
                        archs: module.archs(),
                    });
                }
                ModuleLoad {
                    image: "CPU emulator".to_owned(),
                    unpack: Duration::ZERO,
                    driver: Duration::ZERO,
                }
            }
        };
        if std::env::var_os("WARPFORGE_LOG_MODULES").is_some_and(|v| !v.is_empty() && v != "0") {
            // Straight to the process's stderr, past the test harness's
            // capture: the GPU suite's logs say what every process loaded.
            let _ = writeln!(
                std::io::stderr(),
                "warpforge: module `{}` on {}: {loaded}",
                slot.module.name,
                self.name()
            );
        }
        self.inner.modules.loads.fetch_add(1, Ordering::SeqCst);
        let image_name = loaded.image.clone();
        *image = Some(loaded);
        Ok(image_name)
    }

    /// Loads the module named `name` (a kernel's `Kernel::MODULE`) if this
    /// device knows it or it is registered; `false` if neither.
    /// `kernel` is the one being launched, named if its module is a family
    /// this build left out.
    fn ensure_module_named(&self, name: &str, kernel: &'static str) -> Result<bool> {
        let here = lock(&self.inner.modules.slots)
            .get(name)
            .map(|slot| slot.module);
        match here.or_else(|| registered(name)) {
            Some(module) => self.ensure_loaded(module, Some(kernel)).map(|_| true),
            None => Ok(false),
        }
    }

    /// Resets this device, consuming its last handle, and returns a fresh one:
    /// the way to recover from a kernel fault (`ContextPoisoned`) without
    /// restarting the process, where that can be done. An emulator always
    /// recovers. A GPU recovers where its driver clears the fault when the
    /// context is reset; where the driver keeps it for the life of the
    /// process (driver 580 on an H200 did, after a trap) this is
    /// `Error::StickyFault`, as is every later `Device::gpu` of that GPU:
    /// restart the process.
    ///
    /// On a GPU the context is destroyed and made anew, so every buffer of the
    /// old one would dangle: while any other handle (a clone, buffer, pinned
    /// buffer, stream or event) is alive this is `Error::DeviceInUse` with
    /// their count, and only this handle is dropped. On the emulator it is a
    /// new emulator with the same memory budget, under the same rule.
    ///
    /// ```
    /// use warpforge::{Device, Error};
    /// let dev = Device::emulator_with_memory(1 << 20);
    /// let buf = dev.alloc_zeroed::<f32>(4)?;
    /// let e = dev.clone().reset().unwrap_err();     // `dev` and `buf` still hold it
    /// assert!(matches!(e, Error::DeviceInUse { handles: 2, .. }), "{e}");
    /// drop(buf);
    /// let fresh = dev.reset()?;
    /// assert_eq!(fresh.memory_info()?.1, 1 << 20);
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn reset(self) -> Result<Device> {
        let mut open = lock(&OPEN_GPUS);
        let others = Arc::strong_count(&self.inner) - 1;
        if others > 0 {
            return Err(Error::DeviceInUse {
                device: self.name(),
                handles: others,
                poisoned_by: self.fault().map(Box::new),
                action: "call `reset` again",
            });
        }
        match &self.inner.backend {
            Backend::Gpu(g) => {
                let ordinal = g.info.ordinal;
                // This call promises a fresh context even if none faulted.
                if let Some(slot) = open.get_mut(&ordinal) {
                    slot.reset_on_open = true;
                }
                drop(self);
                open_gpu(&mut open, ordinal)
            }
            Backend::Emulator { pool, arch, .. } => Ok(Device::emulated(*arch, pool.capacity)),
        }
    }

    /// The fault that poisoned this device, if one did (reported or not).
    fn fault(&self) -> Option<Error> {
        lock(&self.inner.health).fault_seen()
    }

    /// A CPU emulator device: runs the same kernels with CUDA semantics. Its
    /// memory is the host's (allocations beyond it are `OutOfMemory`). It
    /// emulates the default [`Arch`], an sm_90 (H100-class) GPU: its limits
    /// (227 KiB of shared memory per block with opt-in) and compute capability.
    pub fn emulator() -> Device {
        Device::emulator_for(Arch::default())
    }

    /// An emulator of `arch`: it enforces that GPU's launch limits and reports
    /// its compute capability; its memory is the host's.
    ///
    /// ```
    /// use warpforge::{Arch, Device};
    /// let dev = Device::emulator_for(Arch::Sm80);
    /// assert_eq!(dev.compute_capability(), (8, 0));
    /// assert_eq!(dev.emulated_arch(), Some(Arch::Sm80));
    /// assert_eq!(dev.limits().max_shared_per_block_optin, 163 * 1024);
    /// ```
    pub fn emulator_for(arch: Arch) -> Device {
        Device::emulated(arch, emulator::host_memory_bytes())
    }

    /// An emulator of `arch` with `bytes` of device memory.
    fn emulated(arch: Arch, bytes: u64) -> Device {
        Device::with_backend(Backend::Emulator {
            pool: Pool::new(bytes),
            arch,
            streams: Mutex::new(Vec::new()),
            profiles: Mutex::new(None),
        })
    }

    /// An emulator device with `bytes` of device memory, to test how code
    /// behaves when a GPU's memory runs out. It emulates the default [`Arch`].
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
        Device::emulated(Arch::default(), bytes)
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

    /// The architecture this emulator emulates; `None` on a GPU.
    pub fn emulated_arch(&self) -> Option<Arch> {
        match &self.inner.backend {
            Backend::Gpu(_) => None,
            Backend::Emulator { arch, .. } => Some(*arch),
        }
    }

    /// The compute capability `(major, minor)`: the GPU's, or the one the
    /// emulator emulates. What [`crate::ptx::choose_image`] and
    /// [`crate::ptx::Module::variant_for`] take to pick the machine code a GPU
    /// of this kind would load.
    pub fn compute_capability(&self) -> (i32, i32) {
        match &self.inner.backend {
            Backend::Gpu(g) => g.info.compute_capability,
            Backend::Emulator { arch, .. } => arch.compute_capability(),
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
            Backend::Emulator { arch, .. } => Limits::emulating(*arch),
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
        self.inner.allocations.fetch_add(1, Ordering::Relaxed);
        self.inner.memsets.fetch_add(1, Ordering::Relaxed);
        Ok(DeviceBuffer::new(self.clone(), len, memory, false))
    }

    /// A buffer of `len` elements that a kernel queued next writes whole (a
    /// reduction's outputs): no memset on a GPU, so the call is that one
    /// kernel on the stream. Until written its elements are unspecified
    /// (every bit pattern is an [`Element`]); on the emulator each is
    /// [`Element::UNWRITTEN`] (all bits set), so that a kernel that leaves
    /// one unwritten shows in the results it is tested on.
    pub(crate) fn alloc_for_kernel_output<T: Element>(
        &self,
        len: usize,
    ) -> Result<DeviceBuffer<T>> {
        self.unset_buffer(len, false)
    }

    /// [`Device::alloc_for_kernel_output`], lent from this device's cache of
    /// kernel outputs when it holds one of `T` and `len` elements: the buffer
    /// goes back to the cache when dropped (up to [`OUTPUTS_KEPT`] are kept,
    /// the oldest freed), so a warm call that returns a fresh result (a
    /// reduction's) allocates nothing. An entry is out of the cache while a
    /// buffer holds it, so two calls never share one, whatever the threads;
    /// the work queued on it stays ordered before the next borrower's as
    /// for [`Device::scratch`] (one stream's order, or the buffer's events
    /// across streams). On the emulator a lent buffer is set to
    /// [`Element::UNWRITTEN`] again (a host write, after the work queued on
    /// it), so a kernel that leaves an output unwritten still shows.
    /// [`Device::release_scratch`] frees the cache.
    pub(crate) fn cached_output<T: Element>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        self.check_health()?;
        let cached = {
            let mut cache = lock(&self.inner.outputs);
            let fit = cache
                .iter()
                .rposition(|(ty, l, _)| *ty == TypeId::of::<T>() && *l == len);
            fit.map(|i| cache.remove(i).2)
        };
        match cached.and_then(|memory| memory.downcast::<Memory<T>>().ok()) {
            Some(memory) => {
                if let Memory::Emulated(m) = &*memory {
                    m.write(&vec![T::UNWRITTEN; len]);
                }
                Ok(DeviceBuffer::new(self.clone(), len, *memory, true))
            }
            None => self.unset_buffer(len, true),
        }
    }

    /// Takes back a dropped cached output's memory ([`Device::cached_output`]).
    pub(crate) fn return_output<T: Element>(&self, len: usize, memory: Memory<T>) {
        let oldest = {
            let mut cache = lock(&self.inner.outputs);
            cache.push((TypeId::of::<T>(), len, Box::new(memory)));
            (cache.len() > OUTPUTS_KEPT).then(|| cache.remove(0))
        };
        drop(oldest); // outside the lock: freeing waits for the work that uses it
    }

    /// A new buffer of `len` unset elements (see
    /// [`Device::alloc_for_kernel_output`]); `cached`: returned to the
    /// cache of kernel outputs when dropped.
    fn unset_buffer<T: Element>(&self, len: usize, cached: bool) -> Result<DeviceBuffer<T>> {
        self.check_health()?;
        let memory = match &self.inner.backend {
            Backend::Gpu(g) => Memory::Gpu(g.alloc_unset(len).map_err(|e| self.refine(e))?),
            Backend::Emulator { pool, .. } => {
                let memory = EmuMemory::zeroed(pool, len)?;
                memory.write(&vec![T::UNWRITTEN; len]);
                Memory::Emulated(memory)
            }
        };
        self.inner.allocations.fetch_add(1, Ordering::Relaxed);
        Ok(DeviceBuffer::new(self.clone(), len, memory, cached))
    }

    /// A scratch buffer of at least `words` words for `use_`, lent from this
    /// device's cache until the returned [`Scratch`] drops (then kept for the next
    /// call): the partial states of a reduction, without an allocation or a
    /// memset per call. Its contents are whatever the last user for the same
    /// `use_` left (a zeroed buffer if it is new), so a kernel can leave state
    /// there for the next call (a ticket counter it resets itself).
    ///
    /// The smallest cached buffer for `use_` that is large enough is lent; if
    /// none is, the largest too-small one is freed and a new one of `words` words is
    /// allocated (so the cache grows to the largest request and stays there).
    /// A buffer is lent to one caller at a time, so two host threads never
    /// share one; the work a caller queues with it on a stream stays ordered
    /// before a later borrower's use: on the same stream by the stream's own
    /// order, on another stream by the buffer's read/write events (cudarc
    /// makes every launch wait for the buffer's earlier users on any stream).
    /// [`Device::release_scratch`] frees the cache.
    pub(crate) fn scratch(&self, use_: &'static str, words: usize) -> Result<Scratch> {
        let cached = {
            let mut cache = lock(&self.inner.scratch);
            let fit = (0..cache.len())
                .filter(|&i| cache[i].0 == use_ && cache[i].1 >= words)
                .min_by_key(|&i| cache[i].1);
            match fit {
                Some(i) => Some(cache.swap_remove(i)),
                None => {
                    // Free the largest one that is too small: it is outgrown.
                    if let Some(i) = (0..cache.len())
                        .filter(|&i| cache[i].0 == use_)
                        .max_by_key(|&i| cache[i].1)
                    {
                        drop(cache.swap_remove(i));
                    }
                    None
                }
            }
        };
        let buffer = match cached {
            Some((_, len, memory)) => DeviceBuffer::new(self.clone(), len, memory, false),
            None => self.alloc_zeroed::<u64>(words)?,
        };
        Ok(Scratch {
            use_,
            buffer: Some(buffer),
        })
    }

    /// Frees the scratch buffers this device keeps between calls (the
    /// partial states of reductions) and its cache of kernel outputs (the
    /// memory of dropped reduction results); the next call that needs one
    /// allocates it again. Buffers lent at the moment are kept when returned.
    ///
    /// ```
    /// use warpforge::{Device, reduce};
    /// let dev = Device::emulator_with_memory(1 << 20);
    /// // Above 2^16 elements (the one-launch small path, which needs none), a
    /// // reduction keeps partial states in scratch.
    /// let x = dev.upload(&vec![1.0f32; 1 << 17])?;
    /// assert_eq!(reduce::sum(&x)?, 131072.0);
    /// let (free, total) = dev.memory_info()?;
    /// assert!(free < total - (1 << 17) * 4); // x, and the reduction's scratch states
    /// dev.release_scratch();
    /// assert_eq!(dev.memory_info()?.0, total - (1 << 17) * 4);
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn release_scratch(&self) {
        let freed = std::mem::take(&mut *lock(&self.inner.scratch));
        drop(freed);
        let freed = std::mem::take(&mut *lock(&self.inner.outputs));
        drop(freed);
    }

    /// Takes back a lent scratch buffer's memory (see [`Device::scratch`]).
    fn return_scratch(&self, use_: &'static str, len: usize, memory: Memory<u64>) {
        let mut cache = lock(&self.inner.scratch);
        cache.push((use_, len, memory));
        if cache.len() > SCRATCH_KEPT
            && let Some(i) = (0..cache.len()).min_by_key(|&i| cache[i].1)
        {
            let smallest = cache.swap_remove(i);
            drop(cache);
            drop(smallest);
        }
    }

    /// A buffer holding a copy of `data`.
    pub fn upload<T: Element>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        // Unset, not zeroed: the copy writes every element (no memset).
        let mut buf = self.unset_buffer(data.len(), false)?;
        buf.copy_from_host(data)?;
        Ok(buf)
    }

    /// The device's copy of the encoded tensor map `bytes`, uploaded by
    /// `upload` the first time (or after it was evicted), then reused
    /// ([`UploadedMaps`]: a repeated call's maps cost no allocation or copy).
    pub(crate) fn uploaded_map(
        &self,
        bytes: [u64; 16],
        upload: impl FnOnce() -> Result<Arc<cudarc::driver::CudaSlice<u64>>>,
    ) -> Result<Arc<cudarc::driver::CudaSlice<u64>>> {
        if let Some(map) = lock(&self.inner.uploaded_maps).get(&bytes) {
            return Ok(map);
        }
        // Uploaded outside the lock (two threads may both upload one map:
        // the second insert replaces the first, both correct).
        let map = upload()?;
        lock(&self.inner.uploaded_maps).insert(bytes, map.clone());
        Ok(map)
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
                g.in_flight().clear();
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
    /// On the GPU the kernel's entry is looked up in the module named by
    /// `K::MODULE`, which is loaded now if this is the first launch of one of
    /// its kernels on this device (`ModuleNotLoaded` if this process was never
    /// given that module: see [`Device::load`]), and its parameters checked against the entry's before its first
    /// launch (`KernelSignature` if they differ).
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

    /// Runs `work` and returns its result with the memory-traffic profile of
    /// every kernel launch it made on this device (in the order they ran),
    /// on the emulator only: each global and shared access counted per
    /// warp-level request, as a GPU serves it — sectors per request,
    /// coalescing efficiency, bank conflicts, bytes per output element, the
    /// source lines that move the most (see [`MemoryProfile`], whose
    /// `Display` is an Nsight Compute-like table). `work` may call the
    /// library's operations or launch its own kernels, on any stream of this
    /// device; the device is synchronised before the profiles are returned.
    ///
    /// The profile sees the accesses a kernel makes through the device API
    /// (`Slot`, `Global::load`, shared views, atomics, `ldmatrix`,
    /// `cp.async`), not plain reads of a `&[T]` input (see
    /// `warpforge_device::emu::profile`). A launch from another thread of
    /// this device while `work` runs is profiled too. On a GPU this is
    /// `Error::ProfileNeedsEmulator`: use Nsight Compute there.
    ///
    /// ```
    /// use warpforge::Device;
    /// let dev = Device::emulator();
    /// let x = dev.upload(&vec![1.0f32; 4096])?;
    /// let mut y = dev.alloc_zeroed::<f32>(4096)?;
    /// let ((), profiles) = dev.profile_memory(|| warpforge::ops::axpy(2.0, &x, &mut y))?;
    /// let p = &profiles[0];
    /// assert_eq!(p.kernel, "axpy_f32");
    /// // y is read and written once, as whole sectors: 4 per 32-lane request.
    /// assert_eq!(p.global_store.sectors_per_request(), 4.0);
    /// assert_eq!(p.global_store.efficiency(), 1.0);
    /// println!("{p}");
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn profile_memory<R>(
        &self,
        work: impl FnOnce() -> Result<R>,
    ) -> Result<(R, Vec<MemoryProfile>)> {
        let Backend::Emulator { profiles, .. } = &self.inner.backend else {
            return Err(Error::ProfileNeedsEmulator);
        };
        /// Puts back the sink that was there before (a `profile_memory` may
        /// run inside another's `work`), however `work` ends, a panic included.
        struct Restore<'a> {
            slot: &'a Mutex<Option<ProfileSink>>,
            outer: Option<ProfileSink>,
        }
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                *lock(self.slot) = self.outer.take();
            }
        }
        let sink = ProfileSink::default();
        let restore = Restore {
            slot: profiles,
            outer: lock(profiles).replace(sink.clone()),
        };
        let result = work().and_then(|r| self.synchronize().map(|()| r));
        drop(restore);
        let r = result?;
        let collected = std::mem::take(&mut *lock(&sink));
        Ok((r, collected))
    }

    /// Runs `work` and returns its result with the names of the kernels it
    /// launched on this device (every launch that passed its checks and was
    /// run or queued, on any stream), sorted, each once. A launch from
    /// another thread of this device while `work` runs counts too. Works on a
    /// GPU and on the emulator alike; `warpforge verify` uses it to report
    /// which kernels its cases ran. [`Device::work_done_by`] counts them.
    ///
    /// ```
    /// use warpforge::Device;
    /// let dev = Device::emulator();
    /// let x = dev.upload(&[1.0f64; 4])?;
    /// let mut y = dev.alloc_zeroed::<f64>(4)?;
    /// let ((), launched) = dev.kernels_launched_by(|| warpforge::ops::axpy(2.0, &x, &mut y))?;
    /// assert_eq!(launched, ["axpy_f64"]);
    /// let ((), launched) = dev.kernels_launched_by(|| Ok(()))?;
    /// assert!(launched.is_empty());
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn kernels_launched_by<R>(
        &self,
        work: impl FnOnce() -> Result<R>,
    ) -> Result<(R, Vec<&'static str>)> {
        let (r, counts) = self.work_done_by(work)?;
        Ok((r, counts.launches.into_keys().collect()))
    }

    /// Runs `work` and returns its result with what it made this device do:
    /// launches per kernel (each launch counted, so a kernel launched twice
    /// shows 2), device allocations and memsets. Work from another thread of
    /// this device while `work` runs counts too. Works on a GPU and on the
    /// emulator alike.
    ///
    /// ```
    /// use warpforge::Device;
    /// let dev = Device::emulator();
    /// let x = dev.upload(&[1.0f64; 4])?;
    /// let mut y = dev.alloc_zeroed::<f64>(4)?;
    /// let ((), work) = dev.work_done_by(|| {
    ///     warpforge::ops::axpy(2.0, &x, &mut y)?;
    ///     warpforge::ops::axpy(2.0, &x, &mut y)
    /// })?;
    /// assert_eq!(work.launches.get("axpy_f64"), Some(&2));
    /// assert_eq!((work.allocations, work.memsets), (0, 0));
    /// let (_, work) = dev.work_done_by(|| dev.alloc_zeroed::<f32>(8))?;
    /// assert_eq!((work.total_launches(), work.allocations, work.memsets), (0, 1, 1));
    /// // An upload writes every element: an allocation, no memset.
    /// let (up, work) = dev.work_done_by(|| dev.upload(&[3.0f32; 8]))?;
    /// assert_eq!((work.total_launches(), work.allocations, work.memsets), (0, 1, 0));
    /// assert_eq!(up.to_host()?, [3.0f32; 8]);
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn work_done_by<R>(&self, work: impl FnOnce() -> Result<R>) -> Result<(R, WorkCounts)> {
        /// Ends this call's recording however `work` returns.
        struct Recording<'a>(&'a AtomicUsize);
        impl Drop for Recording<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let counter = |c: &AtomicU64| c.load(Ordering::SeqCst);
        let before = lock(&self.inner.launches).clone();
        let allocations = counter(&self.inner.allocations);
        let memsets = counter(&self.inner.memsets);
        self.inner.recording.fetch_add(1, Ordering::SeqCst);
        let recording = Recording(&self.inner.recording);
        let r = work();
        drop(recording);
        let r = r?;
        let launches = lock(&self.inner.launches)
            .iter()
            .map(|(&name, &count)| (name, count - before.get(name).copied().unwrap_or(0)))
            .filter(|&(_, count)| count > 0)
            .collect();
        let counts = WorkCounts {
            launches,
            allocations: counter(&self.inner.allocations) - allocations,
            memsets: counter(&self.inner.memsets) - memsets,
        };
        Ok((r, counts))
    }

    /// Counts a launch of `kernel` while a [`work_done_by`](Self::work_done_by) runs.
    fn count_launch(&self, kernel: &'static str) {
        if self.inner.recording.load(Ordering::SeqCst) > 0 {
            *lock(&self.inner.launches).entry(kernel).or_insert(0) += 1;
        }
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
        let threads = config.block.volume();
        if let Some(max_threads) = K::LAUNCH_BOUNDS.max_threads
            && !K::LAUNCH_BOUNDS.admits(threads)
        {
            return Err(Error::BlockOverLaunchBounds {
                kernel: K::NAME,
                max_threads,
                found: config.block,
                threads,
            });
        }
        for owner in args.owners() {
            self.check_same(owner)?;
        }
        args.check_outputs(K::NAME, &config)?;
        match (&self.inner.backend, stream) {
            (Backend::Emulator { profiles, .. }, StreamKind::Inline | StreamKind::Emulated(_)) => {
                // Kernels of modules the process was never given run too.
                self.ensure_module_named(K::MODULE, K::NAME)?;
                let shared = self
                    .limits()
                    .check(K::NAME, &config, K::SHARED_BYTES, None)?;
                self.count_launch(K::NAME);
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
                // The outputs, named by their parameters (`PARAMS` and `Args` are in the same order).
                let outputs: Vec<OutputBuffer> = K::PARAMS
                    .iter()
                    .zip(A::emu_outputs(&abi))
                    .filter_map(|(p, output)| {
                        output.map(|(addr, len, elem_bytes)| OutputBuffer {
                            name: p.name,
                            addr,
                            len,
                            elem_bytes,
                        })
                    })
                    .collect();
                // SAFETY: `abi` holds the addresses and lengths of the buffers'
                // allocations, each claimed in `binding` (read for inputs, write for
                // outputs), so the kernel runs only after the work that writes them,
                // and the host and other jobs wait for it before touching them; the
                // binding keeps the allocations alive until the kernel is done.
                // Checked once per launch: an unprofiled launch pays nothing more.
                let sink = lock(profiles).clone();
                let run = move || {
                    let body = &|| unsafe { K::run_thread(abi) };
                    match &sink {
                        None => emu::launch_with_outputs(K::NAME, shape, &outputs, body),
                        Some(sink) => emu::launch_profiled(K::NAME, shape, &outputs, body)
                            .map(|profile| lock(sink).push(profile)),
                    }
                };
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
                let function = match gpu.function::<K>() {
                    // Its module is not loaded here yet: load it, if it is known.
                    Err(Error::ModuleNotLoaded { .. })
                        if self.ensure_module_named(K::MODULE, K::NAME)? =>
                    {
                        gpu.function::<K>()
                    }
                    other => other,
                }
                .map_err(|e| self.refine(e))?;
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
                gpu.in_flight()
                    .record(cu_stream, K::NAME, config.grid, config.block);
                self.count_launch(K::NAME);
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

    /// Where the launch log stands: a wait queued now covers the launches up
    /// to here (0 on the emulator, which attributes faults exactly).
    pub(crate) fn launch_mark(&self) -> u64 {
        match &self.inner.backend {
            Backend::Gpu(g) => g.in_flight().mark(),
            Backend::Emulator { .. } => 0,
        }
    }

    /// A wait completed: forgets the launches on `stream` up to `mark`, and
    /// those on every stream the driver reports idle, so that a later fault is
    /// attributed to a kernel still in flight.
    pub(crate) fn waited(&self, stream: Option<StreamKey>, mark: u64) {
        if let Backend::Gpu(g) = &self.inner.backend {
            let mut log = g.in_flight();
            if let Some(key) = stream {
                log.finished(key, mark);
            }
            log.poll_streams();
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
            Some(code) => self.report_fault(gpu.in_flight().fault(code, e, during)),
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

/// What the process knows of a GPU it opened: the device while any handle of
/// it is alive, and whether its context must be reset before it is opened again.
struct OpenGpu {
    device: Weak<Inner>,
    health: Arc<Mutex<Health>>,
    reset_on_open: bool,
}

/// Every GPU opened in this process, by ordinal. Its lock is held while a GPU
/// is opened or reset, so a context is never reset under a live handle.
static OPEN_GPUS: Mutex<BTreeMap<usize, OpenGpu>> = Mutex::new(BTreeMap::new());

fn open_gpu(open: &mut BTreeMap<usize, OpenGpu>, ordinal: usize) -> Result<Device> {
    let (mut previous_fault, mut reset_first) = (None, false);
    if let Some(slot) = open.get(&ordinal) {
        if let Some(inner) = slot.device.upgrade() {
            let dev = Device { inner };
            return match dev.fault() {
                None => Ok(dev),
                Some(fault) => Err(Error::DeviceInUse {
                    device: dev.name(),
                    handles: Arc::strong_count(&dev.inner) - 1,
                    poisoned_by: Some(Box::new(fault)),
                    action: "open it again (its context is reset then)",
                }),
            };
        }
        previous_fault = lock(&slot.health).fault_seen();
        reset_first = previous_fault.is_some() || slot.reset_on_open;
    }
    let gpu = Gpu::open(ordinal, reset_first, previous_fault.as_ref())?;
    let dev = Device::with_backend(Backend::Gpu(Box::new(gpu)));
    open.insert(
        ordinal,
        OpenGpu {
            device: Arc::downgrade(&dev.inner),
            health: dev.inner.health.clone(),
            reset_on_open: false,
        },
    );
    Ok(dev)
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}
