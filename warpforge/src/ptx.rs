//! PTX modules: a kernels crate compiled to PTX and embedded in the binary,
//! and what warpforge reads from the PTX text (entries, their `.param`
//! lists, the ISA version).
//!
//! A [`Module`] is one kernels crate: its Cargo package name, one PTX text
//! per architecture, and the cubins (machine code) `ptxas` assembled from
//! them at build time, when it was there. [`LIBRARY`] is warpforge's own
//! kernels, one module per family ([`REDUCE`], [`GEMM_SIMT`], [`GEMM_TENSOR`],
//! [`CONV`], [`HOPPER`]), each loaded on a GPU at the first launch of one of
//! its kernels.
//! A user's kernels crate, compiled by `warpforge-builder` from the host
//! crate's `build.rs`, is embedded with [`include_module!`](crate::include_module)
//! and loaded with [`Device::load`](crate::Device::load), or lazily once
//! [`Module::register`]ed. A GPU loads the cubin for its exact architecture,
//! else JIT-compiles the PTX ([`choose_image`]).
//!
//! A kernel's entry is looked up only in the module named by its
//! [`Kernel::MODULE`] ([`resolve`]), and before its first launch its
//! parameters are checked against the entry's `.param` list
//! ([`check_signature`]): a name alone is never trusted.

use crate::{Error, Result};
use warpforge_device::kernel::{Kernel, Param, ParamKind};

/// One PTX text of a module, for one architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtxModule {
    /// The `-C target-cpu` it was compiled for (`sm_80`).
    pub arch: &'static str,
    /// The PTX text.
    pub source: &'static str,
}

/// A kernels crate compiled to PTX: its name and its PTX per architecture.
///
/// `name` is the kernels crate's Cargo package name, which every `#[kernel]`
/// in it records as [`Kernel::MODULE`]: a launch finds its entry in the
/// loaded module of that name only. Make one with
/// [`include_module!`](crate::include_module) (the build wrote the PTX), or
/// with [`Module::new`], which is what that macro expands to:
///
/// ```
/// use warpforge::ptx::{Module, PtxModule};
/// static TINY: Module = Module::new(
///     "tiny-kernels",
///     &[PtxModule {
///         arch: "sm_80",
///         source: ".version 7.0\n.target sm_80\n.address_size 64\n\
///                  .visible .entry nop(\n\t.param .u32 nop_param_0\n)\n{\n\tret;\n}\n",
///     }],
/// );
/// assert_eq!(TINY.variant_for((9, 0)).map(|v| v.arch), Some("sm_80"));
/// assert_eq!(TINY.variants[0].entries(), ["nop"]);
/// let dev = warpforge::Device::emulator();
/// dev.load(&TINY)?; // a GPU JIT-compiles it (no cubins); the emulator runs kernels from host code
/// # Ok::<(), warpforge::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Module {
    /// The kernels crate's Cargo package name (`"warpforge-kernels-reduce"`, `"my-kernels"`).
    pub name: &'static str,
    /// Its PTX, one per architecture it was compiled for.
    pub variants: &'static [PtxModule],
    /// Machine code `ptxas` assembled from the variants at build time, one
    /// per real architecture (empty when the build had no `ptxas`, or with
    /// `WARPFORGE_CUBINS=0`). A GPU loads the one for its exact compute
    /// capability instead of JIT-compiling the PTX ([`choose_image`]).
    pub cubins: &'static [Cubin],
    /// For a family of warpforge's own library that this build left out
    /// ([`Module::left_out`]): the cargo feature of `warpforge` that builds
    /// it. `None` for every module that holds its PTX.
    pub left_out: Option<&'static str>,
}

/// Machine code (SASS) for one real architecture, assembled by `ptxas
/// -lineinfo` from one PTX variant of a module when it was built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cubin {
    /// The variant it was assembled from ([`PtxModule::arch`], `sm_80`).
    pub variant: &'static str,
    /// The architecture number: 86 for `sm_86`.
    pub sm: u32,
    /// `"a"` for an arch-specific cubin (`sm_90a`), else `""`.
    pub arch_suffix: &'static str,
    /// The ELF image as one zstd frame (the builder's `.cubin.zst`): a cubin
    /// is mostly zero padding, and these bytes are part of every binary that
    /// links the module. [`Cubin::elf`] gives the image the driver loads.
    pub bytes: &'static [u8],
}

/// The largest cubin image [`Cubin::elf`] unpacks: a frame claiming more is
/// damaged (the library's is about 40 MB).
const MAX_CUBIN_BYTES: usize = 1 << 30;

/// An unpacking started ahead of a load: [`Cubin::elf`] on a thread of its own.
type Unpacking = std::thread::JoinHandle<std::result::Result<Vec<u8>, String>>;

/// The cubins being unpacked ahead of their load ([`Cubin::unpack_ahead`]),
/// by the address of their bytes.
static UNPACKING: std::sync::Mutex<Vec<(usize, Unpacking)>> = std::sync::Mutex::new(Vec::new());

fn unpacking() -> std::sync::MutexGuard<'static, Vec<(usize, Unpacking)>> {
    UNPACKING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Cubin {
    /// `sm_86`, `sm_90a`.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.sm, self.arch_suffix)
    }

    /// The ELF image: [`Cubin::bytes`] decompressed. `Err` names what is
    /// wrong if the bytes are not one zstd frame of an ELF file (the loader
    /// then JIT-compiles the PTX instead).
    pub fn elf(&self) -> std::result::Result<Vec<u8>, String> {
        // libzstd decodes the 38 MB image of the library's cubin in about a
        // tenth of the time of a pure-Rust decoder (200 ms at opt-level 2):
        // it is on every GPU process's path to its first launch.
        let size = zstd::zstd_safe::get_frame_content_size(self.bytes)
            .ok()
            .flatten()
            .ok_or_else(|| {
                format!(
                    "the embedded {} cubin is not a zstd frame that records its size",
                    self.arch()
                )
            })?;
        let size = usize::try_from(size)
            .ok()
            .filter(|&s| s <= MAX_CUBIN_BYTES)
            .ok_or_else(|| {
                format!(
                    "the embedded {} cubin claims {size} bytes, over the {MAX_CUBIN_BYTES}-byte limit",
                    self.arch()
                )
            })?;
        let elf = zstd::bulk::decompress(self.bytes, size)
            .map_err(|e| format!("the embedded {} cubin is corrupt: {e}", self.arch()))?;
        if !elf.starts_with(b"\x7fELF") {
            return Err(format!(
                "the embedded {} cubin is not an ELF image",
                self.arch()
            ));
        }
        Ok(elf)
    }

    /// Starts unpacking this cubin on a thread of its own, for a load that
    /// [`Cubin::take_elf`]s it later: a GPU opens its context (about 100 ms
    /// on an H100) while the library's 38 MB image is unpacked (about 45 ms).
    /// Once per cubin until it is taken; where no thread can be started,
    /// nothing happens and the load unpacks it itself.
    pub(crate) fn unpack_ahead(&'static self) {
        let key = self.bytes.as_ptr() as usize;
        let mut started = unpacking();
        if started.iter().any(|(k, _)| *k == key) {
            return;
        }
        let thread = std::thread::Builder::new()
            .name(format!("warpforge-unpack-{}", self.arch()))
            .spawn(move || self.elf());
        if let Ok(handle) = thread {
            started.push((key, handle));
        }
    }

    /// The ELF image: the one [`Cubin::unpack_ahead`] started (waiting for
    /// it), else [`Cubin::elf`] now. The image is the caller's: nothing keeps it.
    pub(crate) fn take_elf(&'static self) -> std::result::Result<Vec<u8>, String> {
        let key = self.bytes.as_ptr() as usize;
        let ahead = {
            let mut started = unpacking();
            let at = started.iter().position(|(k, _)| *k == key);
            at.map(|i| started.swap_remove(i).1)
        };
        match ahead.map(std::thread::JoinHandle::join) {
            Some(Ok(elf)) => elf,
            // Not started, or the thread died: unpack here.
            _ => self.elf(),
        }
    }
}

/// What a GPU loads for a module: machine code built for it, or the PTX
/// variant for the driver to JIT-compile, and why ([`choose_image`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Image {
    /// The cubin for the GPU's exact architecture.
    Cubin {
        /// The variant it was assembled from: its PTX is what the kernels'
        /// signatures are checked against.
        variant: &'static PtxModule,
        /// The machine code.
        cubin: &'static Cubin,
    },
    /// The PTX, JIT-compiled by the driver.
    Ptx {
        /// The variant.
        variant: &'static PtxModule,
        /// Why no cubin: `PTX JIT: no cubin for sm_120`.
        reason: String,
    },
}

impl Image {
    /// The PTX variant: loaded as it is, or the source of the cubin.
    pub fn variant(&self) -> &'static PtxModule {
        match self {
            Image::Cubin { variant, .. } | Image::Ptx { variant, .. } => variant,
        }
    }
}

/// `sm_90 cubin`, or the reason the PTX is JIT-compiled
/// (`PTX JIT: no cubin for sm_120`): what `warpforge doctor` shows.
impl std::fmt::Display for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Image::Cubin { cubin, .. } => write!(f, "{} cubin", cubin.arch()),
            Image::Ptx { reason, .. } => f.write_str(reason),
        }
    }
}

/// What a GPU of compute capability `major.minor` loads of `module`: the
/// cubin assembled from the variant it runs ([`Module::variant_for`]) for its
/// architecture (`sm_86` for 8.6), else for the newest architecture of the
/// same major version at or below it (`sm_80` on 8.6 and 8.9: CUDA runs a
/// cubin on every GPU of its major version and the same or a higher minor
/// one); an arch-specific cubin (`sm_90a`) only from an `sm_90a` variant and
/// only on exactly 9.0. Else that variant's PTX, JIT-compiled, with the
/// reason. A cubin of another major version or a newer minor one, or
/// assembled from another variant, is never chosen. `None` if the GPU runs
/// no variant.
///
/// ```
/// use warpforge::ptx::{choose_image, Cubin, Image, Module, PtxModule};
/// static M: Module = Module::with_cubins(
///     "k",
///     &[PtxModule { arch: "sm_80", source: "" }],
///     &[Cubin { variant: "sm_80", sm: 90, arch_suffix: "", bytes: b"\x7fELF" }],
/// );
/// assert_eq!(choose_image((9, 0), &M).unwrap().to_string(), "sm_90 cubin");
/// assert_eq!(choose_image((8, 9), &M).unwrap().to_string(), "PTX JIT: no cubin for sm_89");
/// assert_eq!(choose_image((12, 0), &M).unwrap().to_string(), "PTX JIT: no cubin for sm_120");
/// assert!(choose_image((7, 5), &M).is_none());
/// ```
pub fn choose_image(compute_capability: (i32, i32), module: &Module) -> Option<Image> {
    let variant = module.variant_for(compute_capability)?;
    Some(image_of(compute_capability, variant, module.cubins))
}

/// [`choose_image`] once the variant is known.
fn image_of(
    (major, minor): (i32, i32),
    variant: &'static PtxModule,
    cubins: &'static [Cubin],
) -> Image {
    let suffix = if variant.arch.ends_with('a') { "a" } else { "" };
    let sm = u32::try_from(major * 10 + minor).unwrap_or(0);
    let wanted = format!("sm_{sm}{suffix}");
    let runs_here = |c: &&Cubin| {
        c.variant == variant.arch
            && c.arch_suffix == suffix
            && if suffix.is_empty() {
                c.sm / 10 == sm / 10 && c.sm <= sm
            } else {
                c.sm == sm
            }
    };
    match cubins.iter().filter(runs_here).max_by_key(|c| c.sm) {
        Some(cubin) => Image::Cubin { variant, cubin },
        None if cubins.is_empty() => Image::Ptx {
            variant,
            reason: format!(
                "PTX JIT: no cubin for {wanted} (the module embeds none: built without ptxas, \
                 or with WARPFORGE_CUBINS=0)"
            ),
        },
        None => Image::Ptx {
            variant,
            reason: format!("PTX JIT: no cubin for {wanted}"),
        },
    }
}

// Each family is embedded exactly as a user embeds their kernels crate: the
// module file warpforge-builder wrote in `build.rs`, read by `include_module!`
// (for a family this build left out, `build.rs` writes `Module::left_out`).

/// The reductions and elementwise kernels (`kernels/reduce`, package
/// `warpforge-kernels-reduce`; warpforge's `reduce` feature): `reduce_*`,
/// `combine_*`, `finish_*`, `axpy_*`. Like every `sm_80` family, a GPU
/// loads it at the first launch of one of its kernels: the cubin for its
/// architecture (sm_80, on sm_86 and sm_89 too, and sm_90, when the build
/// had `ptxas`), else the `sm_80` PTX, which JIT-compiles on every GPU from
/// Ampere up.
///
/// ```
/// use warpforge::Kernel;
/// use warpforge_kernels::elementwise::axpy_f32;
/// assert_eq!(warpforge::ptx::REDUCE.name, axpy_f32::MODULE);
/// warpforge::ptx::REDUCE.check_kernel::<axpy_f32>()?;
/// # Ok::<(), warpforge::Error>(())
/// ```
pub static REDUCE: Module = crate::include_module!("warpforge-kernels-reduce");

/// The SIMT GEMMs and split-k's sums (`kernels/gemm-simt`, package
/// `warpforge-kernels-gemm-simt`; warpforge's `gemm` feature).
pub static GEMM_SIMT: Module = crate::include_module!("warpforge-kernels-gemm-simt");

/// The tensor-core (`mma.sync`) GEMMs (`kernels/gemm-tensor`, package
/// `warpforge-kernels-gemm-tensor`; warpforge's `gemm` feature).
pub static GEMM_TENSOR: Module = crate::include_module!("warpforge-kernels-gemm-tensor");

/// The convolutions and layout transposes (`kernels/conv`, package
/// `warpforge-kernels-conv`; warpforge's `conv` feature).
pub static CONV: Module = crate::include_module!("warpforge-kernels-conv");

/// warpforge's Hopper kernels (`kernels-hopper/`, package
/// `warpforge-kernels-hopper`; warpforge's `hopper` feature): `sm_90a` PTX
/// only (`wgmma`, TMA), so they load on sm_90 GPUs alone (H100, H200), where
/// the GEMM picks them (`warpforge::gemm`) when they were built.
///
/// ```
/// use warpforge::Kernel;
/// use warpforge_kernels_hopper::gemm::gemm_wgmma_bf16_f32_nn_128x256x64_s4 as k;
/// assert_eq!(warpforge::ptx::HOPPER.name, k::MODULE);
/// warpforge::ptx::HOPPER.check_kernel::<k>()?;
/// # Ok::<(), warpforge::Error>(())
/// ```
pub static HOPPER: Module = crate::include_module!("warpforge-kernels-hopper");

/// Every family of warpforge's kernel library, built or left out
/// ([`Module::left_out`]): each is a module of its own, known to every
/// device and loaded on a GPU at the first launch of one of its kernels.
pub static LIBRARY: [&Module; 5] = [&REDUCE, &GEMM_SIMT, &GEMM_TENSOR, &CONV, &HOPPER];

/// One kernel of warpforge's library that a device can run: its PTX entry
/// and the family (module) that holds it. See [`dispatch_table`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DispatchEntry {
    /// The module's name, e.g. `warpforge-kernels-hopper`.
    pub module: &'static str,
    /// The kernel's name (its PTX entry), e.g. `gemm_wgmma_f16_f32_nn_128x256x64_s4`.
    pub kernel: &'static str,
}

/// Every kernel of warpforge's library that a device of compute capability
/// `major.minor` (a GPU's, or the one an emulator emulates,
/// [`Device::compute_capability`](crate::Device::compute_capability)) can
/// run: every PTX entry of the variant it loads of each family in
/// [`LIBRARY`] this build holds, in module order, each module's entries
/// sorted. Taken from the embedded PTX itself, so no kernel of a built
/// family can be missing; the Hopper family's entries appear on sm_90
/// only, and a family left out of the build ([`Module::left_out`]) has
/// none. What `warpforge verify --list` prints and `verify` must cover.
///
/// ```
/// use warpforge::ptx::{self, dispatch_table};
/// let h100 = dispatch_table((9, 0));
/// let a100 = dispatch_table((8, 0));
/// let hopper = |t: &[ptx::DispatchEntry]| t.iter().filter(|e| e.module == ptx::HOPPER.name).count();
/// assert!(h100.iter().any(|e| e.kernel == "axpy_f32"));
/// // wgmma, wide and narrow tiles: 4 type pairs × 4 transposes and tf32's
/// // one each, tf32's 2 K-major copies; f64 m16n8k16: 4 transposes; the
/// // wgmma convolutions: 2.
/// assert_eq!(hopper(&h100), 42);
/// assert_eq!(hopper(&a100), 0);
/// assert_eq!(h100.len(), a100.len() + 42);
/// assert!(dispatch_table((7, 5)).is_empty()); // runs none of them
/// ```
pub fn dispatch_table(compute_capability: (i32, i32)) -> Vec<DispatchEntry> {
    let mut table = Vec::new();
    for module in LIBRARY {
        let Some(variant) = module.variant_for(compute_capability) else {
            continue;
        };
        let mut entries = variant.entries();
        entries.sort_unstable();
        entries.dedup();
        table.extend(entries.into_iter().map(|kernel| DispatchEntry {
            module: module.name,
            kernel,
        }));
    }
    table
}

/// The first `sm_80` family this build holds (they share one architecture
/// and ISA version, so a GPU that runs one runs them all): what a GPU is
/// checked against when it opens. `None` when only Hopper kernels, or none,
/// were built.
pub fn sm80_family() -> Option<&'static Module> {
    LIBRARY
        .iter()
        .copied()
        .find(|m| m.left_out.is_none() && m.name != HOPPER.name)
}

/// The `sm_80` families' variant a GPU of compute capability `major.minor`
/// loads ([`sm80_family`]): `None` if it runs none, or none was built.
pub fn module_for(compute_capability: (i32, i32)) -> Option<&'static PtxModule> {
    sm80_family()?.variant_for(compute_capability)
}

impl Module {
    /// A module named `name` (the kernels crate's package name) with these
    /// variants and no cubins (every GPU JIT-compiles its PTX).
    pub const fn new(name: &'static str, variants: &'static [PtxModule]) -> Module {
        Module {
            name,
            variants,
            cubins: &[],
            left_out: None,
        }
    }

    /// A family of warpforge's library that this build left out: no PTX, and
    /// every launch of one of its kernels is
    /// [`FamilyNotBuilt`](Error::FamilyNotBuilt), naming `feature`, the
    /// cargo feature of `warpforge` that builds it. What `build.rs` writes
    /// for a family whose feature is off.
    pub const fn left_out(name: &'static str, feature: &'static str) -> Module {
        Module {
            name,
            variants: &[],
            cubins: &[],
            left_out: Some(feature),
        }
    }

    /// A module with these variants and the cubins `ptxas` assembled from
    /// them: what `include_module!` expands to when the build had `ptxas`.
    pub const fn with_cubins(
        name: &'static str,
        variants: &'static [PtxModule],
        cubins: &'static [Cubin],
    ) -> Module {
        Module {
            name,
            variants,
            cubins,
            left_out: None,
        }
    }

    /// Makes this module known to every device of the process, present and
    /// future: each loads it the first time one of its kernels is launched
    /// there (once per device), as it does the library's, so no
    /// [`Device::load`](crate::Device::load) is needed on any device. A
    /// different module already registered under its name (or the library's
    /// name) is [`ModuleConflict`](Error::ModuleConflict); the same one again is `Ok`.
    ///
    /// ```
    /// static KERNELS: warpforge::ptx::Module = warpforge::include_module!("warpforge-kernels-reduce");
    /// KERNELS.register()?; // a family of the library, already known: nothing to do
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn register(&'static self) -> Result<()> {
        crate::runtime::device::register(self)
    }

    /// What GPU `gpu_name` loads of this module: [`Module::variant_for_gpu`]
    /// (with its errors), then [`choose_image`]'s cubin or PTX.
    pub fn image_for_gpu(
        &self,
        gpu_name: &str,
        compute_capability: (i32, i32),
        driver_version: u32,
    ) -> Result<Image> {
        let variant = self.variant_for_gpu(gpu_name, compute_capability, driver_version)?;
        Ok(image_of(compute_capability, variant, self.cubins))
    }

    /// The variant a GPU of compute capability `major.minor` loads: the
    /// newest architecture it can run. An arch-specific variant (`sm_90a`)
    /// runs on exactly its architecture, not on newer ones.
    ///
    /// ```
    /// let lib = &warpforge::ptx::REDUCE;
    /// assert_eq!(lib.variant_for((9, 0)).map(|m| m.arch), Some("sm_80"));
    /// assert!(lib.variant_for((7, 5)).is_none());
    /// let hopper = &warpforge::ptx::HOPPER;
    /// assert_eq!(hopper.variant_for((9, 0)).map(|m| m.arch), Some("sm_90a"));
    /// assert!(hopper.variant_for((10, 0)).is_none() && hopper.variant_for((8, 0)).is_none());
    /// ```
    pub fn variant_for(&self, compute_capability: (i32, i32)) -> Option<&'static PtxModule> {
        let runs = |arch: &str| {
            arch_capability(arch).is_some_and(|cc| {
                cc <= compute_capability && (!arch.ends_with('a') || cc == compute_capability)
            })
        };
        self.variants
            .iter()
            .filter(|m| runs(m.arch))
            .max_by_key(|m| arch_capability(m.arch))
    }

    /// The variant GPU `gpu_name` (compute capability `compute_capability`,
    /// driver CUDA version `driver_version` in the driver's encoding) loads:
    /// [`UnsupportedGpu`](Error::UnsupportedGpu) if it runs none of them,
    /// [`DriverTooOld`](Error::DriverTooOld) if the driver cannot JIT its PTX ISA.
    ///
    /// ```
    /// use warpforge::{Error, ptx::REDUCE};
    /// assert!(REDUCE.variant_for_gpu("NVIDIA H100", (9, 0), 13000).is_ok());
    /// let e = REDUCE.variant_for_gpu("Tesla T4", (7, 5), 13000).unwrap_err();
    /// assert!(matches!(e, Error::UnsupportedGpu { .. }), "{e}");
    /// ```
    pub fn variant_for_gpu(
        &self,
        gpu_name: &str,
        compute_capability: (i32, i32),
        driver_version: u32,
    ) -> Result<&'static PtxModule> {
        let variant =
            self.variant_for(compute_capability)
                .ok_or_else(|| Error::UnsupportedGpu {
                    name: gpu_name.to_owned(),
                    compute_capability,
                    module: self.name,
                    archs: self.archs(),
                })?;
        if let Some(isa) = variant.isa_version()
            && let Some(needed) = cuda_version_for_isa(isa)
            && driver_version < needed
        {
            return Err(Error::DriverTooOld {
                driver_cuda_version: format_cuda_version(driver_version),
                ptx_isa_needed: format!("{}.{}", isa.0, isa.1),
                cuda_needed: format_cuda_version(needed),
                module: self.name,
            });
        }
        Ok(variant)
    }

    /// `sm_80, sm_90a`, or `no architecture` for an empty module.
    pub(crate) fn archs(&self) -> String {
        if self.variants.is_empty() {
            return "no architecture".to_owned();
        }
        let names: Vec<&str> = self.variants.iter().map(|v| v.arch).collect();
        names.join(", ")
    }

    /// Whether `other` holds the same PTX (same architectures, same text).
    pub(crate) fn same_ptx(&self, other: &Module) -> bool {
        std::ptr::eq(self, other)
            || (self.variants.len() == other.variants.len()
                && self.variants.iter().zip(other.variants).all(|(a, b)| {
                    a.arch == b.arch && (std::ptr::eq(a.source, b.source) || a.source == b.source)
                }))
    }

    /// Checks `K`'s parameters against its entry in every variant of this
    /// module, as a launch does before the first time it runs `K` on a GPU:
    /// [`KernelSignature`](Error::KernelSignature) if a variant has no entry
    /// `K::NAME` or declares other parameters (see [`check_signature`]).
    /// Pure: reads the PTX text, needs no GPU. It does not look at
    /// `K::MODULE`; [`resolve`] does.
    ///
    /// ```
    /// use warpforge_kernels::elementwise::axpy_f64;
    /// warpforge::ptx::REDUCE.check_kernel::<axpy_f64>()?;
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn check_kernel<K: Kernel>(&self) -> Result<()> {
        for variant in self.variants {
            let entry = variant.entry_params(K::NAME);
            check_entry(K::NAME, self.name, K::PARAMS, entry.as_ref(), || {
                variant.entries().len()
            })?;
        }
        Ok(())
    }
}

/// The module `K`'s entry is in, among `loaded`: the one named `K::MODULE`,
/// else [`ModuleNotLoaded`](Error::ModuleNotLoaded). A GPU launch resolves
/// its kernel this way among the modules loaded on the device, so a kernel
/// is never looked up by name in another crate's module.
///
/// ```
/// use warpforge::{Error, ptx};
/// use warpforge_kernels::elementwise::axpy_f32;
/// assert_eq!(ptx::resolve::<axpy_f32>([&ptx::REDUCE])?.name, "warpforge-kernels-reduce");
/// let e = ptx::resolve::<axpy_f32>([]).unwrap_err();
/// assert!(matches!(e, Error::ModuleNotLoaded { kernel: "axpy_f32", module: "warpforge-kernels-reduce" }));
/// # Ok::<(), warpforge::Error>(())
/// ```
pub fn resolve<'m, K: Kernel>(loaded: impl IntoIterator<Item = &'m Module>) -> Result<&'m Module> {
    loaded
        .into_iter()
        .find(|m| m.name == K::MODULE)
        .ok_or(Error::ModuleNotLoaded {
            kernel: K::NAME,
            module: K::MODULE,
        })
}

/// `sm_80` → `(8, 0)`; `sm_90a` → `(9, 0)`.
pub fn arch_capability(arch: &str) -> Option<(i32, i32)> {
    let digits: String = arch
        .strip_prefix("sm_")?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let n: i32 = digits.parse().ok()?;
    Some((n / 10, n % 10))
}

impl PtxModule {
    /// The PTX ISA version from the module's `.version` directive, e.g. `(7, 0)`.
    pub fn isa_version(&self) -> Option<(u32, u32)> {
        let line = self
            .source
            .lines()
            .find_map(|l| l.trim().strip_prefix(".version"))?;
        let (major, minor) = line.trim().split_once('.')?;
        Some((major.parse().ok()?, minor.trim().parse().ok()?))
    }

    /// The kernel entry points (`.entry NAME`) in the module, in order.
    pub fn entries(&self) -> Vec<&'static str> {
        parse_entries(self.source)
            .into_iter()
            .map(|e| e.name)
            .collect()
    }

    /// Every kernel entry with its parameters, in order.
    pub fn entry_signatures(&self) -> Vec<PtxEntry<'static>> {
        parse_entries(self.source)
    }

    /// The parameters of entry `name`, or `None` if the module has no such entry.
    ///
    /// ```
    /// use warpforge::ptx::REDUCE;
    /// let params = REDUCE.variants[0].entry_params("axpy_f32").expect("an entry").unwrap();
    /// let widths: Vec<(usize, bool)> = params.iter().map(|p| (p.bytes, p.pointer)).collect();
    /// // a: f32, then x and y as (pointer, length)
    /// assert_eq!(widths, [(4, false), (8, true), (8, false), (8, true), (8, false)]);
    /// ```
    pub fn entry_params(&self, name: &str) -> Option<Result<Vec<PtxParam>, ParamParseError>> {
        find_entry(self.source, name).map(|e| e.params)
    }
}

/// One kernel entry of a PTX text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxEntry<'a> {
    /// The entry's name.
    pub name: &'a str,
    /// Its parameters, or the declaration warpforge could not read.
    pub params: Result<Vec<PtxParam>, ParamParseError>,
}

/// One `.param` of a kernel entry, as a launch passes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxParam {
    /// Bytes the driver copies for it: the type's width times the array
    /// length (`.u64` → 8; `.align 2 .b8 x[2]` → 2).
    pub bytes: usize,
    /// Declared `.ptr`: LLVM marks every pointer parameter of a kernel so.
    pub pointer: bool,
    /// The declaration without `.param` and the name (`.u64 .ptr .align 1`, `.b8[2]`).
    pub declaration: String,
}

/// A `.param` declaration of a kernel entry that warpforge cannot read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot read `{declaration}` of entry `{entry}`: {reason}")]
pub struct ParamParseError {
    /// The entry.
    pub entry: String,
    /// The declaration as written.
    pub declaration: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Every kernel entry (`.entry`, optionally `.visible` or `.weak`) of a PTX
/// text with its parameters, in order.
///
/// ```
/// let ptx = ".visible .entry k(\n\t.param .f32 k_param_0,\n\t.param .u64 .ptr .align 1 k_param_1,\n\
///            \t.param .align 2 .b8 k_param_2[2]\n)\n{\n\tret;\n}\n";
/// let entries = warpforge::ptx::parse_entries(ptx);
/// let params = entries[0].params.as_ref().unwrap();
/// assert_eq!(entries[0].name, "k");
/// assert_eq!(params.iter().map(|p| p.bytes).collect::<Vec<_>>(), [4, 8, 2]);
/// assert!(params[1].pointer && !params[2].pointer);
/// ```
pub fn parse_entries(source: &str) -> Vec<PtxEntry<'_>> {
    // Only the lines that hold `.entry` are read: a search for it skips the
    // library's 14 MB of instructions in milliseconds (tokenising every line
    // took 240 ms, on every GPU process's way to its first launch).
    let mut entries = Vec::new();
    let mut last_line = None;
    for (at, _) in source.match_indices(".entry") {
        let start = line_start(source, at);
        if last_line != Some(start) {
            last_line = Some(start);
            entries.extend(entry_on_line(source, start));
        }
    }
    entries
}

/// Where the line holding byte `at` starts.
fn line_start(source: &str, at: usize) -> usize {
    source[..at].rfind('\n').map_or(0, |n| n + 1)
}

/// The entry declared on the line starting at `start` (`.entry NAME(`,
/// optionally after `.visible`/`.weak`), if it declares one.
fn entry_on_line(source: &str, start: usize) -> Option<PtxEntry<'_>> {
    let end = source[start..]
        .find('\n')
        .map_or(source.len(), |n| start + n + 1);
    let line = &source[start..end];
    let mut tokens = line
        .split_whitespace()
        .skip_while(|t| matches!(*t, ".visible" | ".weak"));
    match tokens.next() {
        Some(".entry") => {}
        // `.entry name(` written without a space.
        Some(t) if t.starts_with(".entry(") => {}
        _ => return None,
    }
    let at = line.find(".entry")?;
    let rest = &source[start + at + ".entry".len()..];
    let name_len = rest
        .trim_start()
        .find(|c: char| c == '(' || c == '{' || c.is_whitespace())
        .unwrap_or(rest.trim_start().len());
    let name_at = rest.len() - rest.trim_start().len();
    let name = &rest[name_at..name_at + name_len];
    if name.is_empty() {
        return None;
    }
    let after = &rest[name_at + name_len..];
    let params = match after.find(['(', '{', ';']) {
        Some(open) if after.as_bytes()[open] == b'(' => match after[open + 1..].find(')') {
            Some(close) => parse_params(name, &after[open + 1..open + 1 + close]),
            None => Err(ParamParseError {
                entry: name.to_owned(),
                declaration: after[open..].lines().next().unwrap_or("").to_owned(),
                reason: "the parameter list has no closing `)`".to_owned(),
            }),
        },
        // No parameter list.
        _ => Ok(Vec::new()),
    };
    Some(PtxEntry { name, params })
}

/// The entry named `name` of `source`, found by searching for its
/// declaration rather than reading every entry: what a GPU does at a kernel's
/// first launch. The same as `parse_entries(source)`'s entry of that name.
pub fn find_entry<'a>(source: &'a str, name: &str) -> Option<PtxEntry<'a>> {
    source
        .match_indices(name)
        .filter(|&(at, _)| {
            // `name` as a whole word right after `.entry` and blanks.
            let before = source[..at].trim_end_matches([' ', '\t']);
            let next = source[at + name.len()..].chars().next();
            before.ends_with(".entry")
                && before.len() < at
                && next.is_none_or(|c| c == '(' || c == '{' || c.is_whitespace())
        })
        .find_map(|(at, _)| entry_on_line(source, line_start(source, at)))
        .filter(|e| e.name == name)
}

/// The parameters between an entry's parentheses.
fn parse_params(entry: &str, list: &str) -> Result<Vec<PtxParam>, ParamParseError> {
    let without_comments: String = list
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    without_comments
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            parse_param(d).map_err(|reason| ParamParseError {
                entry: entry.to_owned(),
                declaration: d.split_whitespace().collect::<Vec<_>>().join(" "),
                reason,
            })
        })
        .collect()
}

/// One `.param [.align N] .TYPE [.ptr [.SPACE] [.align N]] NAME[[N]…]`.
fn parse_param(declaration: &str) -> Result<PtxParam, String> {
    let mut tokens = declaration.split_whitespace();
    if tokens.next() != Some(".param") {
        return Err("it is not a `.param` declaration".to_owned());
    }
    let (mut width, mut pointer, mut name) = (None, false, None);
    let mut shown = Vec::new();
    while let Some(t) = tokens.next() {
        if name.is_some() {
            return Err(format!("`{t}` follows the parameter's name"));
        }
        match t {
            ".ptr" => pointer = true,
            ".align" => {
                let n = tokens.next().unwrap_or("");
                if n.parse::<u32>().is_err() {
                    return Err(format!("`.align {n}` is not an alignment"));
                }
                shown.extend([t.to_owned(), n.to_owned()]);
                continue;
            }
            ".global" | ".const" | ".local" | ".shared" => {}
            _ if t.starts_with('.') => match type_width(t) {
                Some(_) if width.is_some() => return Err(format!("a second type `{t}`")),
                Some(w) => width = Some(w),
                None => return Err(format!("unknown type or qualifier `{t}`")),
            },
            _ => {
                name = Some(t);
                let mut count = 1usize;
                for dim in t.split('[').skip(1) {
                    let n = dim
                        .strip_suffix(']')
                        .and_then(|n| n.parse::<usize>().ok())
                        .ok_or_else(|| format!("`{t}` has an array length that is not a number"))?;
                    count = count.checked_mul(n).ok_or("an array too large")?;
                    shown.push(format!("[{n}]"));
                }
                let bytes = width.ok_or("no type before the name")?;
                width = Some(bytes.checked_mul(count).ok_or("an array too large")?);
                continue;
            }
        }
        shown.push(t.to_owned());
    }
    if name.is_none() {
        return Err("no parameter name".to_owned());
    }
    let bytes = width.ok_or("no type")?;
    if pointer && bytes != 8 {
        return Err(format!(
            "a `.ptr` parameter of {bytes} bytes (pointers are 8)"
        ));
    }
    Ok(PtxParam {
        bytes,
        pointer,
        declaration: shown.join(" ").replace(" [", "["),
    })
}

/// Bytes of a PTX fundamental type (`.u8` → 1, `.f16x2` → 4).
fn type_width(ty: &str) -> Option<usize> {
    Some(match ty {
        ".b8" | ".u8" | ".s8" | ".pred" => 1,
        ".b16" | ".u16" | ".s16" | ".f16" | ".bf16" => 2,
        ".b32" | ".u32" | ".s32" | ".f32" | ".f16x2" | ".bf16x2" => 4,
        ".b64" | ".u64" | ".s64" | ".f64" => 8,
        ".b128" => 16,
        _ => return None,
    })
}

/// Bytes of a device pointer and of a buffer's `usize` length on nvptx64.
const POINTER_BYTES: usize = 8;
const LENGTH_BYTES: usize = 8;

/// One PTX parameter a Rust kernel signature passes.
struct Expected {
    bytes: usize,
    pointer: bool,
}

/// The PTX parameters `params` pass, in order, as the launch pushes them:
/// a scalar by value (its `size_of`), a buffer as its device pointer then its
/// `usize` length, an output matrix as pointer, length, rows, cols and row
/// stride (`usize` each).
fn expected(params: &[Param]) -> Vec<Expected> {
    let mut out = Vec::with_capacity(params.len() * 2);
    for p in params {
        match p.kind {
            ParamKind::Scalar => out.push(Expected {
                bytes: p.bytes,
                pointer: false,
            }),
            ParamKind::Input | ParamKind::Output => out.extend([
                Expected {
                    bytes: POINTER_BYTES,
                    pointer: true,
                },
                Expected {
                    bytes: LENGTH_BYTES,
                    pointer: false,
                },
            ]),
            // The device address of the map's 128 bytes, then its tensor's.
            ParamKind::TensorMap => out.extend([
                Expected {
                    bytes: POINTER_BYTES,
                    pointer: true,
                },
                Expected {
                    bytes: POINTER_BYTES,
                    pointer: true,
                },
            ]),
            // Pointer, length, rows, cols, row stride, batches, batch stride:
            // the shape the host binds; a TMA-stored one after its map.
            ParamKind::OutputMatrix | ParamKind::StoreMatrix => {
                if p.kind == ParamKind::StoreMatrix {
                    out.push(Expected {
                        bytes: POINTER_BYTES,
                        pointer: true,
                    });
                }
                out.push(Expected {
                    bytes: POINTER_BYTES,
                    pointer: true,
                });
                out.extend((0..6).map(|_| Expected {
                    bytes: LENGTH_BYTES,
                    pointer: false,
                }));
            }
        }
    }
    out
}

/// `a: f32 = 4 bytes, x: &[f32] = pointer + 8-byte length (3 PTX parameters)`.
fn show_expected(params: &[Param]) -> String {
    let items: Vec<String> = params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Scalar => format!("{}: {} = {} bytes", p.name, p.ty, p.bytes),
            ParamKind::Input => format!(
                "{}: &[{}] = pointer + {LENGTH_BYTES}-byte length",
                p.name, p.ty
            ),
            ParamKind::Output => format!(
                "{}: Out<{}> = pointer + {LENGTH_BYTES}-byte length",
                p.name, p.ty
            ),
            ParamKind::TensorMap => format!(
                "{}: TensorMap<{}, ..> = pointer (the map) + pointer (its tensor)",
                p.name, p.ty
            ),
            ParamKind::OutputMatrix => format!(
                "{}: OutMatrix<{}> = pointer + {LENGTH_BYTES}-byte length, rows, cols, row stride, \
                 batches, batch stride",
                p.name, p.ty
            ),
            ParamKind::StoreMatrix => format!(
                "{}: StoreMatrix<{}, ..> = pointer (the map) + pointer + {LENGTH_BYTES}-byte \
                 length, rows, cols, row stride, batches, batch stride",
                p.name, p.ty
            ),
        })
        .collect();
    format!(
        "({}) ({} PTX parameters)",
        items.join(", "),
        expected(params).len()
    )
}

/// `.f32 = 4 bytes, .u64 .ptr .align 1 = pointer (2 parameters)`.
fn show_found(entry: &[PtxParam]) -> String {
    let items: Vec<String> = entry
        .iter()
        .map(|p| {
            if p.pointer {
                format!("{} = pointer", p.declaration)
            } else {
                format!("{} = {} bytes", p.declaration, p.bytes)
            }
        })
        .collect();
    format!("({}) ({} parameters)", items.join(", "), entry.len())
}

/// Checks a kernel's Rust parameters against its PTX entry's `.param` list:
/// the same count, each of the same width, and pointers where the Rust
/// signature passes a buffer's device pointer. A buffer (`&[T]`, `Out<T>`)
/// is a `.ptr` parameter of 8 bytes then its 8-byte `usize` length, a scalar
/// its `size_of` (`f16` and `bf16` are 2 bytes, whether declared `.u16`,
/// `.b16` or `.align 2 .b8 x[2]`). If the entry marks no parameter `.ptr`
/// (not what LLVM writes), pointers are checked by width only.
///
/// A mismatch is [`KernelSignature`](Error::KernelSignature), naming both
/// signatures: launching anyway would pass the driver arguments of the
/// wrong size, or a length where the kernel reads a pointer.
///
/// ```
/// use warpforge::{Error, Kernel, ptx};
/// use warpforge_kernels::elementwise::{axpy_f32, axpy_f64};
/// let entry = ptx::REDUCE.variants[0].entry_params("axpy_f32").unwrap().unwrap();
/// ptx::check_signature("axpy_f32", "warpforge-kernels", axpy_f32::PARAMS, &entry)?;
/// // axpy_f64's `a` is 8 bytes, not axpy_f32's 4.
/// let e = ptx::check_signature("axpy_f32", "warpforge-kernels", axpy_f64::PARAMS, &entry)
///     .unwrap_err();
/// assert!(matches!(e, Error::KernelSignature { .. }), "{e}");
/// # Ok::<(), warpforge::Error>(())
/// ```
pub fn check_signature(
    kernel: &'static str,
    module: &'static str,
    params: &[Param],
    entry: &[PtxParam],
) -> Result<()> {
    let want = expected(params);
    let marks_pointers = entry.iter().any(|p| p.pointer);
    let matches = want.len() == entry.len()
        && want.iter().zip(entry).all(|(w, f)| {
            w.bytes == f.bytes && (w.pointer == f.pointer || (w.pointer && !marks_pointers))
        });
    if matches {
        Ok(())
    } else {
        Err(Error::KernelSignature {
            kernel,
            module,
            expected: show_expected(params),
            found: show_found(entry),
        })
    }
}

/// [`check_signature`] for an entry that may be missing or unreadable.
pub(crate) fn check_entry(
    kernel: &'static str,
    module: &'static str,
    params: &[Param],
    entry: Option<&Result<Vec<PtxParam>, ParamParseError>>,
    entry_count: impl FnOnce() -> usize,
) -> Result<()> {
    let mismatch = |found: String| Error::KernelSignature {
        kernel,
        module,
        expected: show_expected(params),
        found,
    };
    match entry {
        Some(Ok(entry)) => check_signature(kernel, module, params, entry),
        Some(Err(e)) => Err(mismatch(format!(
            "a parameter list warpforge cannot read ({e})"
        ))),
        None => Err(mismatch(format!(
            "no entry `{kernel}` at all (the module has {} entries)",
            entry_count()
        ))),
    }
}

/// The CUDA version (`major·1000 + minor·10`, the driver's encoding) that
/// introduced PTX ISA `major.minor`; a driver older than this cannot JIT the module.
///
/// ```
/// assert_eq!(warpforge::ptx::cuda_version_for_isa((7, 0)), Some(11000));
/// assert_eq!(warpforge::ptx::cuda_version_for_isa((8, 0)), Some(12000));
/// ```
pub fn cuda_version_for_isa(isa: (u32, u32)) -> Option<u32> {
    // PTX ISA release notes: 7.x shipped with CUDA 11.x, 8.0–8.5 with 12.0–12.5,
    // 8.6 with 12.7, 8.7 with 12.8, 8.8 with 12.9, 9.0 with 13.0.
    let (major, minor) = isa;
    let cuda = match (major, minor) {
        (7, m @ 0..=8) => 11000 + m * 10,
        (8, m @ 0..=5) => 12000 + m * 10,
        (8, 6) => 12070,
        (8, 7) => 12080,
        (8, 8) => 12090,
        (9, 0) => 13000,
        _ => return None,
    };
    Some(cuda)
}

/// `12080` → `"12.8"`.
pub fn format_cuda_version(v: u32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// Embeds the PTX module the build compiled from kernels crate `name`: a
/// [`ptx::Module`](crate::ptx::Module) expression.
///
/// `warpforge-builder`, run from the host crate's `build.rs`, writes
/// `$OUT_DIR/warpforge-modules/NAME.rs` holding one
/// `::warpforge::ptx::Module::new("NAME", &[…])` expression whose PTX is
/// `include_str!`'d from the build's output; this macro `include!`s that file.
/// `name` is the kernels crate's Cargo package name, which is also what its
/// kernels record as [`Kernel::MODULE`](crate::Kernel::MODULE). When the
/// build found `ptxas`, the expression is `Module::with_cubins(…)` and the
/// cubins are `include_bytes!`'d too. Load the module on a device with
/// [`Device::load`](crate::Device::load) before launching its kernels on a
/// GPU, or [`Module::register`] it once for every device to load it lazily.
///
/// ```
/// use warpforge::{Device, Kernel, ptx::Module};
/// // warpforge's own build.rs runs the builder on each family of its library,
/// // `warpforge-kernels-reduce` among them; a host crate names its own
/// // kernels crate the same way.
/// static KERNELS: Module = warpforge::include_module!("warpforge-kernels-reduce");
///
/// assert_eq!(KERNELS.name, warpforge_kernels::elementwise::axpy_f32::MODULE);
/// let dev = Device::emulator(); // or Device::gpu(0)?
/// dev.load(&KERNELS)?;
/// # Ok::<(), warpforge::Error>(())
/// ```
#[macro_export]
macro_rules! include_module {
    ($name:literal) => {
        ::core::include!(::core::concat!(
            ::core::env!("OUT_DIR"),
            "/warpforge-modules/",
            $name,
            ".rs"
        ))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_module_names_every_kernel_by_its_rust_name() {
        let m = &REDUCE.variants[0];
        let entries = m.entries();
        for k in [
            "axpy_f32",
            "axpy_f64",
            "reduce_rows_sum_f32",
            "reduce_cols_argmax_bf16",
            "combine_rows_lse_f64",
            "combine_cols_min_u32",
            "finish_f32_to_f16",
            "finish_index",
        ] {
            assert!(entries.contains(&k), "{k} missing from {entries:?}");
        }
        assert_eq!(m.isa_version().map(|v| v.0 >= 7), Some(true));
    }

    #[test]
    fn picks_the_newest_module_a_gpu_can_run() {
        assert_eq!(module_for((9, 0)).map(|m| m.arch), Some("sm_80"));
        assert_eq!(module_for((8, 0)).map(|m| m.arch), Some("sm_80"));
        assert!(module_for((7, 5)).is_none());
        assert_eq!(arch_capability("sm_90a"), Some((9, 0)));
        static TWO: Module = Module::new(
            "two",
            &[
                PtxModule {
                    arch: "sm_90a",
                    source: "",
                },
                PtxModule {
                    arch: "sm_80",
                    source: "",
                },
            ],
        );
        assert_eq!(TWO.variant_for((9, 0)).map(|m| m.arch), Some("sm_90a"));
        assert_eq!(TWO.variant_for((8, 9)).map(|m| m.arch), Some("sm_80"));
        // sm_90a PTX is for sm_90 alone (arch-specific features): a newer GPU
        // JIT-compiles the sm_80 variant.
        assert_eq!(TWO.variant_for((12, 0)).map(|m| m.arch), Some("sm_80"));
    }

    #[test]
    fn every_embedded_cubin_is_a_zstd_frame_of_an_elf_image() {
        // Built here with ptxas (CI installs it): one cubin per default arch.
        for c in REDUCE.cubins {
            let elf = c.elf().unwrap();
            assert!(
                elf.len() > 4 * c.bytes.len(),
                "{}: {} → {}",
                c.arch(),
                c.bytes.len(),
                elf.len()
            );
        }
    }

    #[test]
    fn finding_one_entry_gives_what_reading_them_all_gives() {
        for variant in REDUCE.variants {
            let all = parse_entries(variant.source);
            assert!(all.len() > 100, "{}", all.len());
            for e in &all {
                assert_eq!(
                    find_entry(variant.source, e.name).as_ref(),
                    Some(e),
                    "{}",
                    e.name
                );
            }
        }
        let src = "// .entry k(\n.visible .entry kk(\n.param .u32 a\n)\n{\n}\n.entry k (\n.param .u64 p\n)\n";
        let k = find_entry(src, "k").unwrap();
        assert_eq!(k.params.unwrap().len(), 1);
        assert_eq!(find_entry(src, "kk").unwrap().name, "kk");
        assert!(find_entry(src, "kkk").is_none());
        assert!(find_entry(src, "a").is_none());
    }

    #[test]
    fn a_cubin_unpacked_ahead_is_the_one_unpacked_now_and_is_taken_once() {
        // Built with ptxas here (CI installs it); without, there is nothing to unpack.
        let Some(cubin) = REDUCE.cubins.first() else {
            return;
        };
        let now = cubin.elf().unwrap();
        cubin.unpack_ahead();
        cubin.unpack_ahead(); // started once
        let key = cubin.bytes.as_ptr() as usize;
        assert_eq!(unpacking().iter().filter(|(k, _)| *k == key).count(), 1);
        assert_eq!(cubin.take_elf().unwrap(), now);
        assert_eq!(unpacking().iter().filter(|(k, _)| *k == key).count(), 0);
        // Nothing ahead: unpacked on the spot.
        assert_eq!(cubin.take_elf().unwrap(), now);
    }

    #[test]
    fn a_cubin_that_is_not_a_zstd_frame_of_elf_says_so() {
        let frame = |data: &[u8]| -> &'static [u8] {
            Box::leak(zstd::bulk::compress(data, 1).unwrap().into_boxed_slice())
        };
        let with = |bytes| Cubin {
            variant: "sm_80",
            sm: 86,
            arch_suffix: "",
            bytes,
        };
        let image = [b"\x7fELF".as_slice(), &[0; 4096]].concat();
        assert_eq!(with(frame(&image)).elf(), Ok(image.clone()));
        let e = with(b"\x7fELF raw").elf().unwrap_err();
        assert!(e.contains("sm_86 cubin is not a zstd frame"), "{e}");
        // A frame whose header claims more than any cubin holds is refused
        // before anything is allocated.
        let huge = [0x28, 0xb5, 0x2f, 0xfd, 0xe4, 0, 0, 0, 0, 0x10, 0, 0, 0, 0];
        let e = with(Box::leak(Box::new(huge))).elf().unwrap_err();
        assert!(e.contains("over the"), "{e}");
        let e = with(frame(b"not an elf")).elf().unwrap_err();
        assert!(e.contains("sm_86 cubin is not an ELF image"), "{e}");
        let truncated = frame(&image);
        let e = with(&truncated[..truncated.len() - 3]).elf().unwrap_err();
        assert!(e.contains("sm_86 cubin is corrupt"), "{e}");
    }

    const fn cubin(variant: &'static str, sm: u32, arch_suffix: &'static str) -> Cubin {
        Cubin {
            variant,
            sm,
            arch_suffix,
            bytes: b"\x7fELF",
        }
    }

    static SM80_ONLY: Module = Module::with_cubins(
        "k",
        &[PtxModule {
            arch: "sm_80",
            source: "",
        }],
        &[
            cubin("sm_80", 80, ""),
            cubin("sm_80", 86, ""),
            cubin("sm_80", 89, ""),
            cubin("sm_80", 90, ""),
        ],
    );

    static WITH_90A: Module = Module::with_cubins(
        "k",
        &[
            PtxModule {
                arch: "sm_80",
                source: "",
            },
            PtxModule {
                arch: "sm_90a",
                source: "",
            },
        ],
        &[
            cubin("sm_80", 80, ""),
            cubin("sm_80", 86, ""),
            // Assembled from the sm_80 PTX: a Hopper loads the sm_90a variant, so never this.
            cubin("sm_80", 90, ""),
            cubin("sm_90a", 90, "a"),
        ],
    );

    fn chosen(cc: (i32, i32), m: &Module) -> String {
        choose_image(cc, m).map_or("none".to_owned(), |i| i.to_string())
    }

    /// What the builder embeds by default: sm_80 and sm_90 cubins.
    static SM80_AND_90: Module = Module::with_cubins(
        "k",
        &[PtxModule {
            arch: "sm_80",
            source: "",
        }],
        &[cubin("sm_80", 80, ""), cubin("sm_80", 90, "")],
    );

    #[test]
    fn a_gpu_of_a_newer_minor_version_runs_the_newest_cubin_of_its_major_version() {
        for (cc, want) in [
            ((8, 0), "sm_80 cubin"),
            ((8, 6), "sm_80 cubin"),
            ((8, 9), "sm_80 cubin"),
            ((9, 0), "sm_90 cubin"),
            ((12, 0), "PTX JIT: no cubin for sm_120"),
        ] {
            assert_eq!(chosen(cc, &SM80_AND_90), want, "{cc:?}");
        }
        // The exact one wins over an older one of the same major version.
        assert_eq!(chosen((8, 6), &SM80_ONLY), "sm_86 cubin");
        assert_eq!(chosen((8, 7), &SM80_ONLY), "sm_86 cubin");
    }

    #[test]
    fn the_cubin_for_the_exact_compute_capability_is_chosen() {
        for (cc, want) in [
            ((8, 0), "sm_80 cubin"),
            ((8, 6), "sm_86 cubin"),
            ((8, 9), "sm_89 cubin"),
            ((9, 0), "sm_90 cubin"),
        ] {
            assert_eq!(chosen(cc, &SM80_ONLY), want);
            let image = choose_image(cc, &SM80_ONLY).unwrap();
            let Image::Cubin { variant, cubin } = image else {
                panic!("{image}")
            };
            assert_eq!(variant.arch, "sm_80");
            assert_eq!(cubin.sm, u32::try_from(cc.0 * 10 + cc.1).unwrap());
        }
    }

    #[test]
    fn an_unknown_compute_capability_jit_compiles_the_ptx_and_says_why() {
        for (cc, want) in [
            ((12, 0), "PTX JIT: no cubin for sm_120"),
            ((10, 0), "PTX JIT: no cubin for sm_100"),
        ] {
            let image = choose_image(cc, &SM80_ONLY).unwrap();
            assert_eq!(image.to_string(), want);
            assert!(matches!(image, Image::Ptx { variant, .. } if variant.arch == "sm_80"));
        }
        // Older than every variant: nothing to load.
        assert_eq!(chosen((7, 5), &SM80_ONLY), "none");
        // A module built without ptxas says so.
        let text = chosen((9, 0), &LIBRARY_WITHOUT_CUBINS);
        assert!(
            text.starts_with("PTX JIT: no cubin for sm_90 (the module embeds none"),
            "{text}"
        );
    }

    static LIBRARY_WITHOUT_CUBINS: Module =
        Module::new("warpforge-kernels-reduce", REDUCE.variants);

    #[test]
    fn a_cubin_of_another_architecture_or_variant_is_never_chosen() {
        // Only an sm_86 cubin: it runs on 8.6 and 8.9, not on 8.0 (an older
        // minor version) nor on 9.0 (another major version).
        static ONLY_86: Module = Module::with_cubins(
            "k",
            &[PtxModule {
                arch: "sm_80",
                source: "",
            }],
            &[cubin("sm_80", 86, "")],
        );
        assert_eq!(chosen((8, 0), &ONLY_86), "PTX JIT: no cubin for sm_80");
        assert_eq!(chosen((8, 9), &ONLY_86), "sm_86 cubin");
        assert_eq!(chosen((8, 6), &ONLY_86), "sm_86 cubin");
        assert_eq!(chosen((9, 0), &ONLY_86), "PTX JIT: no cubin for sm_90");
        // A cubin whose variant the module does not pick for the GPU.
        static STRAY: Module = Module::with_cubins(
            "k",
            &[PtxModule {
                arch: "sm_80",
                source: "",
            }],
            &[cubin("sm_75", 80, "")],
        );
        assert_eq!(chosen((8, 0), &STRAY), "PTX JIT: no cubin for sm_80");
    }

    #[test]
    fn sm_90a_cubins_only_from_the_sm_90a_variant_and_only_on_9_0() {
        let image = choose_image((9, 0), &WITH_90A).unwrap();
        assert_eq!(image.to_string(), "sm_90a cubin");
        assert_eq!(image.variant().arch, "sm_90a");
        // Blackwell cannot run the sm_90a variant (arch-specific PTX): it
        // JIT-compiles the sm_80 one.
        assert_eq!(chosen((10, 0), &WITH_90A), "PTX JIT: no cubin for sm_100");
        assert_eq!(chosen((8, 6), &WITH_90A), "sm_86 cubin");
        assert_eq!(chosen((8, 9), &WITH_90A), "sm_86 cubin");
        // A plain sm_90 cubin never stands in for the sm_90a variant.
        static PLAIN_ONLY: Module = Module::with_cubins(
            "k",
            &[PtxModule {
                arch: "sm_90a",
                source: "",
            }],
            &[cubin("sm_90a", 90, "")],
        );
        assert_eq!(chosen((9, 0), &PLAIN_ONLY), "PTX JIT: no cubin for sm_90a");
    }

    #[test]
    fn image_for_gpu_keeps_the_variant_errors() {
        assert!(matches!(
            SM80_ONLY.image_for_gpu("Tesla T4", (7, 5), 13000),
            Err(Error::UnsupportedGpu { .. })
        ));
        let image = SM80_ONLY.image_for_gpu("H100", (9, 0), 13000).unwrap();
        assert_eq!(image.to_string(), "sm_90 cubin");
    }

    #[test]
    fn every_entry_of_the_library_parses_with_pointers_in_pairs() {
        let entries = REDUCE.variants[0].entry_signatures();
        let visible = REDUCE.variants[0]
            .source
            .lines()
            .filter(|l| l.trim_start().starts_with(".visible .entry"))
            .count();
        assert_eq!(entries.len(), visible);
        assert!(visible > 100, "{visible} entries");
        for e in &entries {
            let params = e.params.as_ref().unwrap_or_else(|err| panic!("{err}"));
            // Every pointer is a buffer's, followed by its 8-byte length.
            for (i, p) in params.iter().enumerate() {
                if p.pointer {
                    assert_eq!(p.bytes, 8, "{}: {p:?}", e.name);
                    let len = params.get(i + 1).unwrap_or_else(|| panic!("{}", e.name));
                    assert_eq!((len.bytes, len.pointer), (8, false), "{}", e.name);
                }
            }
        }
    }

    #[test]
    fn declarations_in_every_form_llvm_writes() {
        let ptx = "\
// .globl k
.visible .entry k(
\t.param .f32 k_param_0,
\t.param .f64 k_param_1,
\t.param .u8 k_param_2,
\t.param .u16 k_param_3,
\t.param .b32 k_param_4,
\t.param .align 2 .b8 k_param_5[2],
\t.param .u64 .ptr .global .align 16 k_param_6,
\t.param .u64 k_param_7,
\t.param .align 16 .b8 k_param_8[4][8]
)
.maxntid 256, 1, 1
{
\tret;
}
.entry no_params()
{
}
.weak .entry spaced (  .param .s64 x )
{
}
.func (.param .b32 func_retval0) helper(.param .b64 helper_param_0)
{
}
";
        let entries = parse_entries(ptx);
        let names: Vec<&str> = entries.iter().map(|e| e.name).collect();
        assert_eq!(names, ["k", "no_params", "spaced"]);
        let k = entries[0].params.as_ref().unwrap();
        let got: Vec<(usize, bool)> = k.iter().map(|p| (p.bytes, p.pointer)).collect();
        assert_eq!(
            got,
            [
                (4, false),
                (8, false),
                (1, false),
                (2, false),
                (4, false),
                (2, false),
                (8, true),
                (8, false),
                (32, false)
            ]
        );
        assert_eq!(k[5].declaration, ".align 2 .b8[2]");
        assert_eq!(k[6].declaration, ".u64 .ptr .global .align 16");
        assert_eq!(entries[1].params, Ok(Vec::new()));
        assert_eq!(entries[2].params.as_ref().map(Vec::len), Ok(1));
    }

    #[test]
    fn unreadable_declarations_are_errors_naming_them() {
        for (decl, why) in [
            (".param .u64 .weird x", "unknown type or qualifier `.weird`"),
            (".param .u32 .u64 x", "a second type"),
            (".param .u32 .ptr x", ".ptr"),
            (".param .b8 x[n]", "not a number"),
            (".param .u32", "no parameter name"),
            (".param x", "no type"),
            (".reg .u32 x", "not a `.param`"),
        ] {
            let ptx = format!(".visible .entry bad(\n\t{decl}\n)\n{{\n}}\n");
            let entries = parse_entries(&ptx);
            let e = entries[0].params.clone().unwrap_err();
            assert!(e.to_string().contains(why), "{decl}: {e}");
            assert!(e.to_string().contains("`bad`"), "{e}");
        }
    }
}
