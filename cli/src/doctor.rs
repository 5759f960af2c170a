//! `warpforge doctor`: what this machine offers warpforge, and what to fix.
//!
//! [`gather`] collects plain facts — the driver and its CUDA version, each GPU
//! and its properties, whether each embedded PTX module can load on it (predicted
//! from its arch and PTX ISA, then checked by really loading it), `ptxas`, and a
//! self-check of the CPU emulator. [`DoctorReport::verdict`] turns those facts
//! into a [`Verdict`] without touching the machine, so every verdict can be
//! tested with hand-made facts.
//!
//! ```
//! let report = warpforge_cli::doctor::gather();
//! println!("{report}");
//! assert!(report.emulator.is_ok());
//! ```

use crate::ptxas::Ptxas;
use cudarc::driver::CudaContext;
use cudarc::driver::sys::{CUdevice_attribute, cudaError_enum};
use std::fmt;
use std::path::PathBuf;
use warpforge::{Device, gpu, ptx};

/// Everything `warpforge doctor` found out. Plain data: build one by hand to test a verdict.
#[derive(Clone, Debug)]
pub struct DoctorReport {
    /// The CUDA driver.
    pub driver: DriverReport,
    /// One entry per GPU the driver reports, by ordinal.
    pub gpus: Vec<GpuReport>,
    /// The embedded PTX modules: the variants of the library's `sm_80`
    /// families this build holds ([`ptx::LIBRARY`], less the Hopper kernels,
    /// which only sm_90 GPUs load and only for large GEMMs).
    pub modules: Vec<ModuleReport>,
    /// The located `ptxas` (needed only by `warpforge ptx`), or why there is none.
    pub ptxas: Result<PtxasReport, String>,
    /// The emulator's self-check: what was run, or how it failed.
    pub emulator: Result<String, String>,
}

/// The CUDA driver, as far as it could be seen.
#[derive(Clone, Debug)]
pub enum DriverReport {
    /// libcuda could not be loaded: no NVIDIA driver on this machine.
    Missing,
    /// libcuda loaded.
    Present(DriverFacts),
}

/// What a loaded driver reports.
#[derive(Clone, Debug)]
pub struct DriverFacts {
    /// The kernel module's version (`550.54.14`), from `/proc/driver/nvidia/version`.
    pub kernel_module_version: Option<String>,
    /// The CUDA version the driver supports, in its encoding (`12080` = 12.8).
    pub cuda_version: Result<u32, String>,
    /// How many GPUs it reports (`cuInit` finding none counts as 0), or why it could not say.
    pub devices: Result<usize, String>,
    /// `CUDA_VISIBLE_DEVICES`, when set: it hides GPUs from the driver.
    pub visible_devices: Option<String>,
}

/// One GPU.
#[derive(Clone, Debug)]
pub struct GpuReport {
    /// Device ordinal.
    pub ordinal: usize,
    /// Its properties, or why they could not be read.
    pub properties: Result<GpuProperties, String>,
    /// For each embedded module, whether it can load here (predicted from arch and ISA).
    pub modules: Vec<ModuleFit>,
    /// The definitive check, `Device::gpu(ordinal)` then `load` of the
    /// library's module: the arch of the PTX variant it runs, or the error.
    pub load: Result<&'static str, String>,
    /// What was loaded for the library's module, when it loaded: its cubin
    /// (`sm_90 cubin`) or its PTX, JIT-compiled, and why
    /// (`PTX JIT: no cubin for sm_120`); see `Device::module_image`.
    pub image: Option<String>,
}

/// A GPU's properties.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuProperties {
    /// Marketing name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Compute capability.
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Device memory in bytes.
    pub total_memory: u64,
    /// Free device memory in bytes (after doctor's own context was created).
    pub free_memory: u64,
    /// Peak SM clock, kHz.
    pub sm_clock_khz: u32,
    /// Peak memory clock, kHz.
    pub memory_clock_khz: u32,
    /// Global memory bus width, bits.
    pub memory_bus_width_bits: u32,
}

impl GpuProperties {
    /// Theoretical peak memory bandwidth in bytes per second (double data rate).
    pub fn peak_bandwidth(&self) -> u64 {
        2 * u64::from(self.memory_clock_khz) * 1000 * u64::from(self.memory_bus_width_bits) / 8
    }
}

/// One embedded PTX module and what it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleReport {
    /// The module's name: the library family's package (`warpforge-kernels-reduce`).
    pub name: &'static str,
    /// Its arch (`sm_80`).
    pub arch: &'static str,
    /// The compute capability that arch needs (`(8, 0)`).
    pub needs_capability: Option<(i32, i32)>,
    /// Its PTX ISA version (`.version`).
    pub isa: Option<(u32, u32)>,
    /// The CUDA version (driver encoding) that introduced that ISA.
    pub needs_cuda: Option<u32>,
    /// Its kernel entry points.
    pub entries: Vec<&'static str>,
}

impl ModuleReport {
    /// The facts of one variant of embedded module `name`.
    pub fn of(name: &'static str, module: &ptx::PtxModule) -> ModuleReport {
        let isa = module.isa_version();
        ModuleReport {
            name,
            arch: module.arch,
            needs_capability: ptx::arch_capability(module.arch),
            isa,
            needs_cuda: isa.and_then(ptx::cuda_version_for_isa),
            entries: module.entries(),
        }
    }

    /// Whether this module can load on a GPU of `compute_capability` under a
    /// driver supporting `driver_cuda` (unknown: `None`).
    pub fn fit(&self, compute_capability: (i32, i32), driver_cuda: Option<u32>) -> ModuleFit {
        // `sm_90a`-style arch-specific code runs only on exactly that arch.
        let arch_ok = self.needs_capability.is_some_and(|cc| {
            cc <= compute_capability && (!self.arch.ends_with('a') || cc == compute_capability)
        });
        let driver_ok = match (driver_cuda, self.needs_cuda) {
            (Some(have), Some(need)) => Some(have >= need),
            _ => None,
        };
        ModuleFit {
            arch: self.arch,
            arch_ok,
            driver_ok,
        }
    }
}

/// Whether one embedded module can load on one GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleFit {
    /// The module's arch.
    pub arch: &'static str,
    /// The GPU's compute capability is at least the arch's.
    pub arch_ok: bool,
    /// The driver's CUDA version is at least the module's ISA needs (`None`: unknown).
    pub driver_ok: Option<bool>,
}

impl ModuleFit {
    /// Predicted to load: the arch fits and the driver is not known to be too old.
    pub fn can_load(&self) -> bool {
        self.arch_ok && self.driver_ok != Some(false)
    }
}

/// A located `ptxas`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxasReport {
    /// Its path.
    pub path: PathBuf,
    /// The version it reports (`13.5.37`).
    pub version: String,
}

/// How bad a problem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The GPU (or the emulator) cannot be used.
    Error,
    /// Something works less well, or a side tool is missing.
    Warning,
}

/// One thing found wrong, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong.
    pub what: String,
    /// What to do.
    pub fix: String,
}

impl Problem {
    fn error(what: impl Into<String>, fix: impl Into<String>) -> Problem {
        Problem {
            severity: Severity::Error,
            what: what.into(),
            fix: fix.into(),
        }
    }

    fn warning(what: impl Into<String>, fix: impl Into<String>) -> Problem {
        Problem {
            severity: Severity::Warning,
            what: what.into(),
            fix: fix.into(),
        }
    }
}

/// The conclusion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// GPU 0 is usable; `warnings` are things that do not stop it.
    Ready {
        /// Warnings (ptxas missing, other GPUs unusable, …).
        warnings: Vec<Problem>,
    },
    /// No driver or no GPU: kernels run on the CPU emulator. Not a failure.
    EmulatorOnly {
        /// Why there is no GPU.
        reason: String,
        /// Warnings (ptxas missing, …).
        warnings: Vec<Problem>,
    },
    /// A GPU is there but cannot be used (or the emulator failed): at least one
    /// [`Severity::Error`], errors first, then warnings.
    Problems(Vec<Problem>),
}

impl Verdict {
    /// Whether `warpforge doctor` exits 0: ready, or emulator only.
    pub fn is_ok(&self) -> bool {
        !matches!(self, Verdict::Problems(_))
    }

    /// Every problem, errors and warnings.
    pub fn problems(&self) -> &[Problem] {
        match self {
            Verdict::Ready { warnings } | Verdict::EmulatorOnly { warnings, .. } => warnings,
            Verdict::Problems(p) => p,
        }
    }
}

/// Looks at this machine. Never panics without a driver: libcuda is only
/// called into after [`gpu::driver_present`] says it loads.
pub fn gather() -> DoctorReport {
    let modules: Vec<ModuleReport> = ptx::LIBRARY
        .iter()
        .filter(|m| m.name != ptx::HOPPER.name)
        .flat_map(|m| m.variants.iter().map(|v| ModuleReport::of(m.name, v)))
        .collect();
    let driver = gather_driver();
    let gpus = match &driver {
        DriverReport::Present(DriverFacts {
            devices: Ok(n),
            cuda_version,
            ..
        }) => (0..*n)
            .map(|ordinal| gather_gpu(ordinal, &modules, cuda_version.as_ref().ok().copied()))
            .collect(),
        _ => Vec::new(),
    };
    DoctorReport {
        driver,
        gpus,
        modules,
        ptxas: Ptxas::locate()
            .map(|p| PtxasReport {
                path: p.path,
                version: p.version,
            })
            .map_err(|e| e.to_string()),
        emulator: check_emulator(),
    }
}

fn gather_driver() -> DriverReport {
    if !gpu::driver_present() {
        return DriverReport::Missing;
    }
    let kernel_module_version = nvidia_driver_version();
    // cudarc panics when libcuda lacks a symbol it binds (a very old driver):
    // report that instead of dying.
    let cuda_version = guarded(|| gpu::driver_version().map_err(|e| e.to_string()));
    let devices = guarded(count_devices);
    DriverReport::Present(DriverFacts {
        kernel_module_version,
        cuda_version,
        devices,
        visible_devices: std::env::var("CUDA_VISIBLE_DEVICES").ok(),
    })
}

/// Runs `f`, turning a panic inside cudarc into an error message.
fn guarded<T>(f: impl FnOnce() -> Result<T, String> + std::panic::UnwindSafe) -> Result<T, String> {
    std::panic::catch_unwind(f).unwrap_or_else(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        Err(format!("the CUDA driver library could not be used: {msg}"))
    })
}

/// The driver's device count; `cuInit` saying there is no device is 0 devices.
fn count_devices() -> Result<usize, String> {
    match cudarc::driver::result::init() {
        Err(e) if e.0 == cudaError_enum::CUDA_ERROR_NO_DEVICE => return Ok(0),
        Err(e) => return Err(format!("cuInit failed: {e}")),
        Ok(()) => {}
    }
    let n = cudarc::driver::result::device::get_count()
        .map_err(|e| format!("cuDeviceGetCount failed: {e}"))?;
    Ok(usize::try_from(n).unwrap_or(0))
}

fn gather_gpu(ordinal: usize, modules: &[ModuleReport], driver_cuda: Option<u32>) -> GpuReport {
    let properties = guarded(move || read_properties(ordinal));
    let modules = match &properties {
        Ok(p) => modules
            .iter()
            .map(|m| m.fit(p.compute_capability, driver_cuda))
            .collect(),
        Err(_) => Vec::new(),
    };
    let loaded = guarded(move || {
        let dev = Device::gpu(ordinal).map_err(|e| e.to_string())?;
        // Modules load lazily, at their first launch: load the library's
        // first sm_80 family now (the reductions, in every build of the command).
        let family = ptx::sm80_family().ok_or("no sm_80 family of the library was built")?;
        dev.load(family).map_err(|e| e.to_string())?;
        let arch = dev.gpu_info().map_or("?", |info| info.ptx_arch);
        Ok((arch, dev.module_image(family)))
    });
    let (load, image) = match loaded {
        Ok((arch, image)) => (Ok(arch), image),
        Err(e) => (Err(e), None),
    };
    GpuReport {
        ordinal,
        properties,
        modules,
        load,
        image,
    }
}

fn read_properties(ordinal: usize) -> Result<GpuProperties, String> {
    let ctx = CudaContext::new(ordinal).map_err(|e| format!("creating a context: {e}"))?;
    let attr = |a: CUdevice_attribute| -> Result<u32, String> {
        let v = ctx
            .attribute(a)
            .map_err(|e| format!("reading {a:?}: {e}"))?;
        Ok(u32::try_from(v).unwrap_or(0))
    };
    use CUdevice_attribute::*;
    let (free, total) = ctx
        .mem_get_info()
        .map_err(|e| format!("reading free memory: {e}"))?;
    Ok(GpuProperties {
        name: ctx.name().map_err(|e| format!("reading its name: {e}"))?,
        compute_capability: ctx
            .compute_capability()
            .map_err(|e| format!("reading its compute capability: {e}"))?,
        multiprocessors: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        total_memory: total as u64,
        free_memory: free as u64,
        sm_clock_khz: attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
        memory_clock_khz: attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
        memory_bus_width_bits: attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
    })
}

/// Runs `reduce::sum` (f32) over a ragged multi-unit input in the emulator and checks the exact result.
fn check_emulator() -> Result<String, String> {
    const N: usize = 4099;
    let data: Vec<f32> = (0..N).map(|i| (i % 17) as f32).collect();
    // Small integers: every partial sum is exact in f32, whatever the order.
    let expected = (0..N).map(|i| (i % 17) as u64).sum::<u64>() as f32;
    let dev = Device::emulator();
    let x = dev.upload(&data).map_err(|e| e.to_string())?;
    let got = warpforge::reduce::sum(&x).map_err(|e| e.to_string())?;
    if got == expected {
        // What `--backend emu` emulates: its compute capability and shared-memory limit.
        let arch = dev.emulated_arch().unwrap_or_default();
        let (major, minor) = dev.compute_capability();
        Ok(format!(
            "an f32 sum over {N} elements gave the exact {expected}; it emulates {arch} \
             (compute capability {major}.{minor}, {} KiB of shared memory per block with opt-in)",
            dev.limits().max_shared_per_block_optin / 1024
        ))
    } else {
        Err(format!(
            "an f32 sum over {N} elements gave {got}, expected exactly {expected}"
        ))
    }
}

/// The loaded NVIDIA kernel module's version (`580.105.08`), from
/// `/proc/driver/nvidia/version`; `None` without one.
pub fn nvidia_driver_version() -> Option<String> {
    std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|text| parse_nvrm_version(&text))
}

/// The version in `/proc/driver/nvidia/version`'s `NVRM version:` line (`550.54.14`).
fn parse_nvrm_version(text: &str) -> Option<String> {
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("NVRM version:"))?;
    line.split_whitespace()
        .find(|t| {
            t.starts_with(|c: char| c.is_ascii_digit())
                && t.contains('.')
                && t.chars().all(|c| c.is_ascii_digit() || c == '.')
        })
        .map(str::to_owned)
}

/// `13.5.37` → `13050` (the driver's CUDA encoding).
fn ptxas_cuda_release(version: &str) -> Option<u32> {
    let mut parts = version.split('.');
    let major: u32 = parts.next()?.trim().parse().ok()?;
    let minor: u32 = parts.next().unwrap_or("0").trim().parse().ok()?;
    Some(major * 1000 + minor * 10)
}

const EMULATOR_HINT: &str = "the CPU emulator (`--backend emu`)";

impl DoctorReport {
    /// The verdict: a pure function of the facts in the report.
    pub fn verdict(&self) -> Verdict {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();

        if let Err(e) = &self.emulator {
            errors.push(Problem::error(
                format!("the CPU emulator failed its self-check: {e}"),
                "this is a warpforge bug: report it with this output",
            ));
        }
        match &self.ptxas {
            Err(_) => warnings.push(Problem::warning(
                "ptxas not found (only `warpforge ptx` needs it)",
                "`pip install nvidia-cuda-nvcc` (or install the CUDA toolkit), \
                 or set WARPFORGE_PTXAS to a ptxas binary",
            )),
            Ok(p) => {
                let needed = self.modules.iter().filter_map(|m| m.needs_cuda).max();
                if let (Some(have), Some(need)) = (ptxas_cuda_release(&p.version), needed)
                    && have < need
                {
                    warnings.push(Problem::warning(
                        format!(
                            "ptxas {} is older than CUDA {}, which the embedded PTX ISA needs: \
                             `warpforge ptx` will fail",
                            p.version,
                            ptx::format_cuda_version(need)
                        ),
                        "`pip install -U nvidia-cuda-nvcc`, or set WARPFORGE_PTXAS to a newer ptxas",
                    ));
                }
            }
        }

        let emulator_reason = match &self.driver {
            DriverReport::Missing => {
                Some("no CUDA driver on this machine (libcuda could not be loaded)".to_owned())
            }
            DriverReport::Present(facts) => match &facts.devices {
                Err(e) => {
                    errors.push(Problem::error(
                        format!("the CUDA driver is installed but does not work: {e}"),
                        "run `nvidia-smi`: if it fails too, the driver is broken (kernel module \
                         not loaded, or libcuda and the kernel module from different driver \
                         versions: reinstall the driver, or reboot after an update); in a \
                         container, start it with GPU access (`--gpus all`). Until then use \
                         the CPU emulator (`--backend emu`)",
                    ));
                    None
                }
                Ok(0) => Some(match &facts.visible_devices {
                    Some(v) => format!(
                        "the CUDA driver is installed but reports no GPU \
                         (CUDA_VISIBLE_DEVICES={v:?} may hide them)"
                    ),
                    None => "the CUDA driver is installed but reports no GPU".to_owned(),
                }),
                Ok(_) => {
                    self.judge_gpus(&mut errors, &mut warnings);
                    None
                }
            },
        };

        if !errors.is_empty() {
            errors.extend(warnings);
            Verdict::Problems(errors)
        } else if let Some(reason) = emulator_reason {
            Verdict::EmulatorOnly { reason, warnings }
        } else {
            Verdict::Ready { warnings }
        }
    }

    /// GPU 0 is the one `Device::auto` and `verify` use: if it cannot be used,
    /// that is an error; other unusable GPUs are warnings.
    fn judge_gpus(&self, errors: &mut Vec<Problem>, warnings: &mut Vec<Problem>) {
        let usable: Vec<usize> = self
            .gpus
            .iter()
            .filter(|g| g.load.is_ok())
            .map(|g| g.ordinal)
            .collect();
        if self.gpus.is_empty() {
            errors.push(Problem::error(
                "the driver reports GPUs, but none could be examined",
                "run `nvidia-smi` to see their state",
            ));
        }
        for g in &self.gpus {
            let Some(mut problem) = self.gpu_problem(g) else {
                continue;
            };
            if g.ordinal == 0 {
                if let Some(&other) = usable.first() {
                    problem.fix.push_str(&format!(
                        "; GPU {other} works: `CUDA_VISIBLE_DEVICES={other}` makes it GPU 0"
                    ));
                }
                errors.push(problem);
            } else {
                problem.severity = Severity::Warning;
                if usable.contains(&0) {
                    problem
                        .what
                        .push_str(" (warpforge uses GPU 0, which works)");
                }
                warnings.push(problem);
            }
        }
    }

    /// Why GPU `g` cannot be used, or `None` if the module loaded on it.
    fn gpu_problem(&self, g: &GpuReport) -> Option<Problem> {
        let load_error = g.load.as_ref().err()?;
        let props = match &g.properties {
            Ok(p) => p,
            Err(e) => {
                return Some(Problem::error(
                    format!("GPU {}: its properties could not be read: {e}", g.ordinal),
                    "check it with `nvidia-smi`; a GPU in a bad state (Xid errors, fallen off \
                     the bus) needs a reset or a reboot",
                ));
            }
        };
        let label = format!(
            "GPU {} ({}, compute capability {}.{})",
            g.ordinal, props.name, props.compute_capability.0, props.compute_capability.1
        );
        let arch_fits: Vec<&ModuleFit> = g.modules.iter().filter(|f| f.arch_ok).collect();
        if arch_fits.is_empty() {
            let oldest = self
                .modules
                .iter()
                .filter_map(|m| m.needs_capability)
                .min()
                .map_or("?".to_owned(), |(a, b)| format!("{a}.{b}"));
            return Some(Problem::error(
                format!("{label} is older than any embedded PTX module supports"),
                format!(
                    "warpforge's PTX needs compute capability {oldest} or newer: use such a GPU, \
                     or {EMULATOR_HINT}"
                ),
            ));
        }
        if arch_fits.iter().all(|f| f.driver_ok == Some(false)) {
            let needed = arch_fits
                .iter()
                .filter_map(|f| self.module(f.arch).and_then(|m| m.needs_cuda))
                .min();
            let have = match &self.driver {
                DriverReport::Present(DriverFacts {
                    cuda_version: Ok(v),
                    ..
                }) => ptx::format_cuda_version(*v),
                _ => "?".to_owned(),
            };
            let needed = needed.map_or("?".to_owned(), ptx::format_cuda_version);
            return Some(Problem::error(
                format!(
                    "{label}: the driver supports CUDA {have}, but the embedded PTX needs CUDA \
                     {needed}"
                ),
                format!(
                    "update the NVIDIA driver to one supporting CUDA {needed} or newer \
                     (`nvidia-smi` shows the CUDA version a driver supports), or use \
                     {EMULATOR_HINT}"
                ),
            ));
        }
        Some(Problem::error(
            format!("{label}: loading the embedded PTX failed: {load_error}"),
            format!(
                "the driver's JIT rejected a module it should accept: update the NVIDIA driver, \
                 and run `warpforge ptx` to check the PTX with ptxas; meanwhile use \
                 {EMULATOR_HINT}"
            ),
        ))
    }

    fn module(&self, arch: &str) -> Option<&ModuleReport> {
        self.modules.iter().find(|m| m.arch == arch)
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn mhz(khz: u32) -> String {
    format!("{} MHz", khz / 1000)
}

fn write_problem(f: &mut fmt::Formatter<'_>, p: &Problem) -> fmt::Result {
    let tag = match p.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    writeln!(f, "  {tag}: {}", p.what)?;
    writeln!(f, "    fix: {}", p.fix)
}

impl fmt::Display for DoctorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Driver")?;
        match &self.driver {
            DriverReport::Missing => {
                writeln!(f, "  none: libcuda could not be loaded (no NVIDIA driver)")?
            }
            DriverReport::Present(d) => {
                writeln!(
                    f,
                    "  NVIDIA driver {}",
                    d.kernel_module_version
                        .as_deref()
                        .unwrap_or("(version unknown: no /proc/driver/nvidia/version)")
                )?;
                match &d.cuda_version {
                    Ok(v) => writeln!(f, "  supports CUDA {}", ptx::format_cuda_version(*v))?,
                    Err(e) => writeln!(f, "  CUDA version unknown: {e}")?,
                }
                if let Some(v) = &d.visible_devices {
                    writeln!(f, "  CUDA_VISIBLE_DEVICES={v:?}")?;
                }
            }
        }

        writeln!(f, "\nGPUs")?;
        match &self.driver {
            DriverReport::Missing => writeln!(f, "  none (no driver)")?,
            DriverReport::Present(d) => match &d.devices {
                Err(e) => writeln!(f, "  unknown: {e}")?,
                Ok(0) => writeln!(f, "  none: the driver reports no GPU")?,
                Ok(_) => {}
            },
        }
        for g in &self.gpus {
            match &g.properties {
                Ok(p) => {
                    writeln!(f, "  GPU {}: {}", g.ordinal, p.name)?;
                    writeln!(
                        f,
                        "    compute capability {}.{}, {} SMs, SM clock {}",
                        p.compute_capability.0,
                        p.compute_capability.1,
                        p.multiprocessors,
                        mhz(p.sm_clock_khz)
                    )?;
                    writeln!(
                        f,
                        "    memory {} total, {} free; {}-bit bus at {} ({:.0} GB/s peak)",
                        gib(p.total_memory),
                        gib(p.free_memory),
                        p.memory_bus_width_bits,
                        mhz(p.memory_clock_khz),
                        p.peak_bandwidth() as f64 / 1e9
                    )?;
                }
                Err(e) => writeln!(f, "  GPU {}: properties unreadable: {e}", g.ordinal)?,
            }
            for m in &g.modules {
                let why = if !m.arch_ok {
                    "no: the GPU is older than the arch"
                } else {
                    match m.driver_ok {
                        Some(true) => "yes",
                        Some(false) => "no: the driver is too old for its PTX ISA",
                        None => "arch fits; driver support unknown",
                    }
                };
                writeln!(f, "    PTX {} can load: {why}", m.arch)?;
            }
            match &g.load {
                Ok(arch) => writeln!(f, "    loaded the {arch} module: ok")?,
                Err(e) => writeln!(f, "    loading failed: {e}")?,
            }
            if let Some(image) = &g.image {
                writeln!(f, "    machine code: {image}")?;
            }
        }

        writeln!(f, "\nPTX (embedded)")?;
        for m in &self.modules {
            let cc = m
                .needs_capability
                .map_or("?".to_owned(), |(a, b)| format!("{a}.{b}"));
            let isa = m.isa.map_or("?".to_owned(), |(a, b)| format!("{a}.{b}"));
            let cuda = m
                .needs_cuda
                .map_or("an unknown CUDA version".to_owned(), |v| {
                    format!("CUDA {}", ptx::format_cuda_version(v))
                });
            writeln!(
                f,
                "  {} {}: PTX ISA {isa}; needs compute capability {cc}+ and a driver with {cuda}+; \
                 {} kernels",
                m.name,
                m.arch,
                m.entries.len()
            )?;
        }

        writeln!(f, "\nptxas (for `warpforge ptx`)")?;
        match &self.ptxas {
            Ok(p) => writeln!(f, "  {} at {}", p.version, p.path.display())?,
            Err(e) => {
                for line in e.lines() {
                    writeln!(f, "  {line}")?;
                }
            }
        }

        writeln!(f, "\nEmulator")?;
        match &self.emulator {
            Ok(what) => writeln!(f, "  available (always built in): {what}")?,
            Err(e) => writeln!(f, "  FAILED: {e}")?,
        }

        writeln!(f, "\nVerdict")?;
        let verdict = self.verdict();
        for p in verdict.problems() {
            write_problem(f, p)?;
        }
        match &verdict {
            Verdict::Ready { .. } => {
                let gpu = self
                    .gpus
                    .first()
                    .and_then(|g| g.properties.as_ref().ok())
                    .map_or("GPU 0".to_owned(), |p| format!("GPU 0 ({})", p.name));
                writeln!(f, "ready: {gpu} runs warpforge's kernels")
            }
            Verdict::EmulatorOnly { reason, .. } => writeln!(
                f,
                "emulator only: {reason}; kernels run on the CPU emulator"
            ),
            Verdict::Problems(p) => {
                let n = p.iter().filter(|p| p.severity == Severity::Error).count();
                writeln!(
                    f,
                    "not usable: {n} error(s) above; fix them, or use {EMULATOR_HINT}"
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sm80() -> ModuleReport {
        ModuleReport {
            name: "warpforge-kernels-reduce",
            arch: "sm_80",
            needs_capability: Some((8, 0)),
            isa: Some((8, 0)),
            needs_cuda: Some(12000),
            entries: vec!["axpy_f32", "sum_f32"],
        }
    }

    fn ptxas_found() -> Result<PtxasReport, String> {
        Ok(PtxasReport {
            path: PathBuf::from("/opt/cuda/bin/ptxas"),
            version: "13.5.37".to_owned(),
        })
    }

    fn props(name: &str, cc: (i32, i32)) -> GpuProperties {
        GpuProperties {
            name: name.to_owned(),
            compute_capability: cc,
            multiprocessors: 108,
            total_memory: 40 << 30,
            free_memory: 39 << 30,
            sm_clock_khz: 1_410_000,
            memory_clock_khz: 1_215_000,
            memory_bus_width_bits: 5120,
        }
    }

    /// A GPU as `gather` would see it: predictions from the module, and `load` as given.
    fn gpu(
        ordinal: usize,
        name: &str,
        cc: (i32, i32),
        driver: u32,
        load: Result<&'static str, String>,
    ) -> GpuReport {
        let image = load.is_ok().then(|| "sm_80 cubin".to_owned());
        GpuReport {
            ordinal,
            properties: Ok(props(name, cc)),
            modules: vec![sm80().fit(cc, Some(driver))],
            load,
            image,
        }
    }

    fn with_driver(cuda: u32, gpus: Vec<GpuReport>) -> DoctorReport {
        DoctorReport {
            driver: DriverReport::Present(DriverFacts {
                kernel_module_version: Some("550.54.14".to_owned()),
                cuda_version: Ok(cuda),
                devices: Ok(gpus.len()),
                visible_devices: None,
            }),
            gpus,
            modules: vec![sm80()],
            ptxas: ptxas_found(),
            emulator: Ok("self-check passed".to_owned()),
        }
    }

    fn no_driver() -> DoctorReport {
        DoctorReport {
            driver: DriverReport::Missing,
            gpus: Vec::new(),
            modules: vec![sm80()],
            ptxas: ptxas_found(),
            emulator: Ok("self-check passed".to_owned()),
        }
    }

    fn errors(v: &Verdict) -> Vec<&Problem> {
        v.problems()
            .iter()
            .filter(|p| p.severity == Severity::Error)
            .collect()
    }

    #[test]
    fn a_working_gpu_is_ready() {
        let r = with_driver(12080, vec![gpu(0, "A100", (8, 0), 12080, Ok("sm_80"))]);
        assert_eq!(r.verdict(), Verdict::Ready { warnings: vec![] });
        let text = r.to_string();
        assert!(text.contains("GPU 0: A100"), "{text}");
        assert!(text.contains("PTX sm_80 can load: yes"), "{text}");
        assert!(text.contains("1555 GB/s peak"), "{text}");
        assert!(
            text.trim_end()
                .ends_with("ready: GPU 0 (A100) runs warpforge's kernels")
        );
    }

    #[test]
    fn the_gpu_section_says_which_machine_code_was_loaded_and_why() {
        let mut cubin = gpu(0, "A100", (8, 0), 12080, Ok("sm_80"));
        let mut jit = gpu(1, "RTX PRO 6000", (12, 0), 12080, Ok("sm_80"));
        jit.image = Some("PTX JIT: no cubin for sm_120".to_owned());
        let failed = gpu(2, "A100", (8, 0), 12080, Err("boom".to_owned()));
        cubin.image = Some("sm_80 cubin".to_owned());
        let text = with_driver(12080, vec![cubin, jit, failed]).to_string();
        assert!(
            text.contains("    loaded the sm_80 module: ok\n    machine code: sm_80 cubin\n"),
            "{text}"
        );
        assert!(
            text.contains("    machine code: PTX JIT: no cubin for sm_120\n"),
            "{text}"
        );
        // A GPU where loading failed says nothing about machine code.
        assert_eq!(text.matches("machine code:").count(), 2, "{text}");
        // Without a GPU there is no such line.
        assert!(!no_driver().to_string().contains("machine code"));
    }

    #[test]
    fn no_driver_is_emulator_only_and_exits_ok() {
        let r = no_driver();
        let v = r.verdict();
        assert!(v.is_ok());
        match &v {
            Verdict::EmulatorOnly { reason, warnings } => {
                assert!(reason.contains("no CUDA driver"), "{reason}");
                assert!(warnings.is_empty());
            }
            other => panic!("expected EmulatorOnly, got {other:?}"),
        }
        let text = r.to_string();
        let last = text.trim_end().lines().last().unwrap();
        assert!(last.contains("emulator only"), "{last}");
    }

    #[test]
    fn a_driver_without_gpus_is_emulator_only_and_names_cuda_visible_devices() {
        let mut r = with_driver(12080, vec![]);
        if let DriverReport::Present(d) = &mut r.driver {
            d.visible_devices = Some(String::new());
        }
        match r.verdict() {
            Verdict::EmulatorOnly { reason, .. } => {
                assert!(reason.contains("reports no GPU"), "{reason}");
                assert!(reason.contains("CUDA_VISIBLE_DEVICES"), "{reason}");
            }
            other => panic!("expected EmulatorOnly, got {other:?}"),
        }
    }

    #[test]
    fn a_driver_too_old_for_the_ptx_isa_is_an_error_with_the_cuda_version_to_update_to() {
        let r = with_driver(
            11040,
            vec![gpu(
                0,
                "A100",
                (8, 0),
                11040,
                Err("the CUDA driver supports CUDA 11.4 but …".to_owned()),
            )],
        );
        let v = r.verdict();
        assert!(!v.is_ok());
        let e = errors(&v);
        assert_eq!(e.len(), 1, "{v:?}");
        assert!(e[0].what.contains("supports CUDA 11.4"), "{}", e[0].what);
        assert!(e[0].fix.contains("CUDA 12.0 or newer"), "{}", e[0].fix);
        assert!(
            r.to_string()
                .contains("the driver is too old for its PTX ISA")
        );
    }

    #[test]
    fn a_gpu_below_compute_capability_8_is_an_error_pointing_at_the_emulator() {
        let r = with_driver(
            12080,
            vec![gpu(
                0,
                "Tesla T4",
                (7, 5),
                12080,
                Err("unsupported".to_owned()),
            )],
        );
        let v = r.verdict();
        let e = errors(&v);
        assert_eq!(e.len(), 1, "{v:?}");
        assert!(e[0].what.contains("Tesla T4"));
        assert!(e[0].what.contains("7.5"));
        assert!(e[0].fix.contains("8.0 or newer"), "{}", e[0].fix);
        assert!(e[0].fix.contains("--backend emu"), "{}", e[0].fix);
        let text = r.to_string();
        assert!(text.contains("    fix: warpforge's PTX needs compute capability 8.0"));
        assert!(
            text.trim_end()
                .lines()
                .last()
                .unwrap()
                .starts_with("not usable")
        );
    }

    #[test]
    fn a_load_failure_the_predictions_did_not_expect_is_reported_with_its_error() {
        let r = with_driver(
            12080,
            vec![gpu(
                0,
                "H100",
                (9, 0),
                12080,
                Err("CUDA_ERROR_INVALID_PTX".to_owned()),
            )],
        );
        let e = errors(&r.verdict())
            .into_iter()
            .cloned()
            .collect::<Vec<_>>();
        assert_eq!(e.len(), 1);
        assert!(
            e[0].what.contains("CUDA_ERROR_INVALID_PTX"),
            "{}",
            e[0].what
        );
        assert!(e[0].fix.contains("update the NVIDIA driver"));
    }

    #[test]
    fn missing_ptxas_is_a_warning_not_a_failure() {
        let mut ready = with_driver(12080, vec![gpu(0, "A100", (8, 0), 12080, Ok("sm_80"))]);
        ready.ptxas = Err("could not find NVIDIA's ptxas".to_owned());
        match ready.verdict() {
            Verdict::Ready { warnings } => {
                assert_eq!(warnings.len(), 1);
                assert_eq!(warnings[0].severity, Severity::Warning);
                assert!(warnings[0].fix.contains("pip install nvidia-cuda-nvcc"));
                assert!(warnings[0].fix.contains("WARPFORGE_PTXAS"));
            }
            other => panic!("expected Ready, got {other:?}"),
        }
        let mut emu = no_driver();
        emu.ptxas = Err("could not find NVIDIA's ptxas".to_owned());
        let v = emu.verdict();
        assert!(v.is_ok());
        assert!(matches!(&v, Verdict::EmulatorOnly { warnings, .. } if warnings.len() == 1));
        let text = emu.to_string();
        assert!(text.contains("  warning: ptxas not found"), "{text}");
        assert!(
            text.trim_end()
                .lines()
                .last()
                .unwrap()
                .contains("emulator only")
        );
    }

    #[test]
    fn a_ptxas_older_than_the_ptx_isa_is_a_warning() {
        let mut r = no_driver();
        r.ptxas = Ok(PtxasReport {
            path: PathBuf::from("/usr/local/cuda-11.8/bin/ptxas"),
            version: "11.8.89".to_owned(),
        });
        let v = r.verdict();
        assert!(v.is_ok());
        assert_eq!(v.problems().len(), 1, "{v:?}");
        assert!(v.problems()[0].what.contains("ptxas 11.8.89"));
        assert!(v.problems()[0].what.contains("CUDA 12.0"));
    }

    #[test]
    fn gpu_0_unusable_is_an_error_even_when_another_gpu_works() {
        let r = with_driver(
            12080,
            vec![
                gpu(
                    0,
                    "Tesla V100",
                    (7, 0),
                    12080,
                    Err("unsupported".to_owned()),
                ),
                gpu(1, "A100", (8, 0), 12080, Ok("sm_80")),
            ],
        );
        let v = r.verdict();
        let e = errors(&v);
        assert_eq!(e.len(), 1, "{v:?}");
        assert!(e[0].fix.contains("CUDA_VISIBLE_DEVICES=1"), "{}", e[0].fix);
    }

    #[test]
    fn another_unusable_gpu_beside_a_working_gpu_0_is_a_warning() {
        let r = with_driver(
            12080,
            vec![
                gpu(0, "A100", (8, 0), 12080, Ok("sm_80")),
                gpu(
                    1,
                    "Tesla V100",
                    (7, 0),
                    12080,
                    Err("unsupported".to_owned()),
                ),
            ],
        );
        match r.verdict() {
            Verdict::Ready { warnings } => {
                assert_eq!(warnings.len(), 1);
                assert!(warnings[0].what.contains("GPU 1 (Tesla V100"));
                assert!(warnings[0].what.contains("GPU 0, which works"));
            }
            other => panic!("expected Ready, got {other:?}"),
        }
    }

    #[test]
    fn a_broken_driver_or_emulator_is_an_error() {
        let mut r = with_driver(12080, vec![]);
        if let DriverReport::Present(d) = &mut r.driver {
            d.devices = Err("cuInit failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH".to_owned());
        }
        let v = r.verdict();
        assert_eq!(errors(&v).len(), 1, "{v:?}");
        assert!(errors(&v)[0].fix.contains("nvidia-smi"));

        let mut r = no_driver();
        r.emulator = Err("sum_f32 gave 3, expected 4".to_owned());
        assert!(!r.verdict().is_ok());
    }

    #[test]
    fn unreadable_gpu_properties_are_an_error() {
        let mut g = gpu(
            0,
            "A100",
            (8, 0),
            12080,
            Err("CUDA_ERROR_UNKNOWN".to_owned()),
        );
        g.properties = Err("creating a context: CUDA_ERROR_UNKNOWN".to_owned());
        g.modules.clear();
        let v = with_driver(12080, vec![g]).verdict();
        assert!(errors(&v)[0].what.contains("properties could not be read"));
    }

    #[test]
    fn module_fit_compares_arch_with_capability_and_isa_with_driver() {
        let m = sm80();
        assert!(m.fit((8, 6), Some(12000)).can_load());
        assert!(m.fit((9, 0), None).can_load());
        let old_gpu = m.fit((7, 5), Some(12080));
        assert!(!old_gpu.arch_ok && !old_gpu.can_load());
        let old_driver = m.fit((8, 0), Some(11080));
        assert_eq!(old_driver.driver_ok, Some(false));
        assert!(!old_driver.can_load());
        let specific = ModuleReport {
            arch: "sm_90a",
            needs_capability: Some((9, 0)),
            ..sm80()
        };
        assert!(specific.fit((9, 0), Some(12080)).arch_ok);
        assert!(!specific.fit((10, 0), Some(12080)).arch_ok);
    }

    #[test]
    fn the_embedded_module_facts_come_from_its_ptx() {
        let m = ModuleReport::of(ptx::REDUCE.name, &ptx::REDUCE.variants[0]);
        assert_eq!(m.arch, "sm_80");
        assert_eq!(m.needs_capability, Some((8, 0)));
        assert!(m.needs_cuda.is_some_and(|v| v >= 11000), "{m:?}");
        assert!(m.entries.contains(&"reduce_rows_sum_f32"));
    }

    #[test]
    fn parses_driver_and_ptxas_versions() {
        let closed = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 \
                      01:44:30 UTC 2024\nGCC version:  gcc version 12.3.0\n";
        assert_eq!(parse_nvrm_version(closed).as_deref(), Some("550.54.14"));
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  \
                    Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Jan 23 2025\n";
        assert_eq!(parse_nvrm_version(open).as_deref(), Some("570.86.15"));
        assert_eq!(parse_nvrm_version("garbage"), None);
        assert_eq!(ptxas_cuda_release("13.5.37"), Some(13050));
        assert_eq!(ptxas_cuda_release("12.8"), Some(12080));
        assert_eq!(ptxas_cuda_release("unknown"), None);
    }
}
