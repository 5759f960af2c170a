//! Every way a warpforge call can fail, each with the sizes involved and the fix.

use cudarc::driver::DriverError;
use warpforge_device::Dim3;
use warpforge_device::emu::EmuError;

/// Result of every fallible warpforge call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong. Messages say what happened, with which sizes, and what to do.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Error {
    /// libcuda could not be loaded.
    #[error(
        "no CUDA driver: libcuda.so could not be loaded on this machine. Install the NVIDIA \
         driver to use a GPU, or run on the CPU emulator (`Device::emulator()`, `--backend emu`)"
    )]
    NoDriver,
    /// The driver loaded but there is no GPU with this ordinal.
    #[error(
        "no CUDA device with ordinal {ordinal}: the driver reports {count} device(s). Pick an \
         ordinal below {count}, check CUDA_VISIBLE_DEVICES, or use the emulator (`--backend emu`)"
    )]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices the driver sees.
        count: usize,
    },
    /// The driver is older than a PTX module needs.
    #[error(
        "the CUDA driver supports CUDA {driver_cuda_version} but the PTX of module `{module}` \
         (ISA {ptx_isa_needed}) needs CUDA {cuda_needed} or newer: update the NVIDIA driver"
    )]
    DriverTooOld {
        /// The driver's CUDA version, e.g. `12.2`.
        driver_cuda_version: String,
        /// The PTX ISA version of the module, e.g. `7.0`.
        ptx_isa_needed: String,
        /// The CUDA version that introduced that ISA.
        cuda_needed: String,
        /// The module (its kernels crate's package name, `warpforge-kernels` for the library).
        module: &'static str,
    },
    /// The GPU is older than every architecture a PTX module was compiled for.
    #[error(
        "{name} has compute capability {}.{}, but module `{module}` has PTX only for {archs}, \
         which this GPU cannot run (warpforge's own kernels need 8.0, Ampere, or newer): use a \
         newer GPU, build the module for an older architecture if its kernels allow it, or run \
         on the CPU emulator (`--backend emu`)",
        compute_capability.0, compute_capability.1
    )]
    UnsupportedGpu {
        /// The GPU's name.
        name: String,
        /// Its compute capability.
        compute_capability: (i32, i32),
        /// The module (its kernels crate's package name).
        module: &'static str,
        /// The architectures the module has PTX for, e.g. `sm_80, sm_90a`.
        archs: String,
    },
    /// A GPU launch of a kernel whose PTX module this process was never given,
    /// so it cannot be loaded (modules are loaded lazily, at the first launch
    /// of one of their kernels, once `Device::load` made them known).
    #[error(
        "kernel `{kernel}` is compiled into PTX module `{module}`, which this process was never \
         given, so it cannot be loaded on this GPU: load it once (on any device) before \
         launching its kernels, with `dev.load(&MODULE)?` where \
         `static MODULE: warpforge::ptx::Module = warpforge::include_module!(\"{module}\");` \
         and the host crate's build.rs builds `{module}` with warpforge-builder. A kernel \
         defined in a crate that is not compiled to PTX (a host crate or its tests) has no \
         module and runs on the CPU emulator only (`Device::emulator()`)"
    )]
    ModuleNotLoaded {
        /// The kernel.
        kernel: &'static str,
        /// The module it belongs to (`Kernel::MODULE`: its crate's package name).
        module: &'static str,
    },
    /// A kernel of a family of warpforge's library that this program was
    /// built without (its cargo feature off: `warpforge/build.rs` compiled
    /// no PTX for it). The same on the GPU and on the emulator, so a program
    /// tested on one does not fail only on the other.
    #[error(
        "{what} warpforge's `{module}` kernels, which this program was built without: enable \
         warpforge's `{feature}` feature (Cargo.toml: `warpforge = {{ …, features = \
         [\"{feature}\"] }}`, or `--features warpforge/{feature}`) and rebuild. The features and \
         what each builds are listed in warpforge's README",
        what = match kernel {
            Some(kernel) => format!("kernel `{kernel}` was not launched: it is one of"),
            None => "nothing was loaded: the module is".to_owned(),
        }
    )]
    FamilyNotBuilt {
        /// The kernel whose launch was refused (`None` for [`Device::load`](crate::Device::load)).
        kernel: Option<&'static str>,
        /// The family's module (`Kernel::MODULE`: its crate's package name).
        module: &'static str,
        /// The cargo feature of `warpforge` that builds it.
        feature: &'static str,
    },
    /// A kernel whose Rust signature does not match its PTX entry's parameters.
    #[error(
        "kernel `{kernel}` does not match its entry in PTX module `{module}`, so it was not \
         launched: its Rust signature passes {expected}, but the PTX declares {found}. The PTX \
         was compiled from other code than the kernel linked into this program: rebuild, so \
         the build.rs that compiles `{module}` runs again, and check that \
         `include_module!(\"{module}\")` embeds the PTX built from the same kernels crate"
    )]
    KernelSignature {
        /// The kernel.
        kernel: &'static str,
        /// The module whose entry was checked.
        module: &'static str,
        /// What the Rust signature passes, parameter by parameter.
        expected: String,
        /// What the PTX entry declares (or that it has no such entry).
        found: String,
    },
    /// `Device::load` of a module whose name is taken by another loaded module.
    #[error(
        "another PTX module named `{module}` is already loaded on this device, with different \
         PTX: kernels find their module by their crate's package name, so a device holds one \
         module per name. Embed each kernels crate once, in one \
         `static … = warpforge::include_module!(\"{module}\")`, and load that static"
    )]
    ModuleConflict {
        /// The module's name.
        module: &'static str,
    },
    /// An allocation did not fit in device memory.
    #[error(
        "out of device memory: asked for {requested} bytes with {free} of {total} bytes free. \
         Free buffers you no longer need, or process the data in smaller pieces"
    )]
    OutOfMemory {
        /// Bytes requested.
        requested: u64,
        /// Bytes free on the device when it failed.
        free: u64,
        /// Device memory in bytes.
        total: u64,
    },
    /// A launch configuration beyond the device's limits or the kernel's needs.
    #[error(
        "kernel `{kernel}`: launch config has {what} = {value}, but the limit is {limit}. {fix}"
    )]
    LaunchConfig {
        /// The kernel.
        kernel: &'static str,
        /// Which quantity.
        what: &'static str,
        /// Its value.
        value: u64,
        /// The limit it breaks.
        limit: u64,
        /// What to do.
        fix: &'static str,
    },
    /// A launch whose block differs from the one the kernel declares (`#[kernel(block = …)]`).
    #[error(
        "kernel `{kernel}` is declared for block {required} (`#[kernel(block = …)]`), but the \
         launch config has block {found}: launch it with \
         `LaunchConfig::new(grid, Dim3::new({}, {}, {}))` and size the grid for that block",
        .required.x, .required.y, .required.z
    )]
    BlockShape {
        /// The kernel.
        kernel: &'static str,
        /// The block shape it declares.
        required: Dim3,
        /// The block shape the launch asked for.
        found: Dim3,
    },
    /// A launch whose block has more threads than the kernel's launch bounds
    /// allow (`#[kernel(max_threads = …)]`, PTX `.maxntid`): the GPU would
    /// refuse it.
    #[error(
        "kernel `{kernel}` is declared for at most {max_threads} threads per block \
         (`#[kernel(max_threads = {max_threads})]`), but the launch config has block {found} \
         = {threads} threads: use a block of at most {max_threads} threads and size the grid \
         for it"
    )]
    BlockOverLaunchBounds {
        /// The kernel.
        kernel: &'static str,
        /// Its declared most threads per block.
        max_threads: u32,
        /// The block the launch asked for.
        found: Dim3,
        /// Its threads.
        threads: u64,
    },
    /// An operation's parameter is out of its domain (a zero stride, groups
    /// that do not divide the channels, a filter larger than its input, …).
    #[error("{op}: invalid `{parameter}`: {detail}")]
    InvalidParameter {
        /// The operation.
        op: &'static str,
        /// The parameter, as the operation's builder names it.
        parameter: &'static str,
        /// Its value, why it is refused, and what would be accepted.
        detail: String,
    },
    /// Buffer sizes that do not fit the operation.
    #[error("{op}: {detail}")]
    ShapeMismatch {
        /// The operation or kernel.
        op: &'static str,
        /// Which sizes, and what they should be.
        detail: String,
    },
    /// A size computation overflowed (e.g. elements × element size).
    #[error("{what}: the size overflows (use smaller buffers)")]
    SizeOverflow {
        /// Which computation.
        what: String,
    },
    /// A buffer was used with a device it does not belong to.
    #[error(
        "buffer belongs to {found} but the launch is on {expected}: copy it explicitly \
         (download, then upload to the other device)"
    )]
    DeviceMismatch {
        /// The device of the launch.
        expected: String,
        /// The device that owns the buffer.
        found: String,
    },
    /// A kernel stopped with a fault: an illegal address or a trap on the GPU
    /// (a panic, failed assertion or bounds check in the kernel traps), or a
    /// fault the emulator detected. The device is poisoned afterwards.
    ///
    /// Its text is a headline (kernel, fault, and on the emulator
    /// `file:line:column`, block and thread) of at most 160 characters, then
    /// the details and the launch on the lines after it, then what to do,
    /// for the backend it happened on: on the emulator, what to change in
    /// the kernel; on a GPU, how to find the thread and what the driver's
    /// sticky faults mean.
    #[error(
        "{}",
        kernel_fault_text(.kernel, .grid, .block, .code, .detail, .emulated)
    )]
    KernelFault {
        /// The kernel. On the GPU, where faults are reported asynchronously:
        /// the oldest kernel still in flight when the fault was seen (a
        /// completed wait — a host read, a stream, event or device
        /// synchronisation — retires the launches it covers); `detail` says
        /// how many were in flight.
        kernel: String,
        /// Its grid.
        grid: Dim3,
        /// Its block.
        block: Dim3,
        /// What kind of fault.
        code: FaultCode,
        /// Where and why, on one line: the block, thread, source locations
        /// and message on the emulator; the driver's error and the launches
        /// in flight on the GPU.
        detail: String,
        /// The emulator's full report (None on the GPU).
        emulated: Option<Box<EmuError>>,
    },
    /// A call on a device that an earlier kernel fault made unusable.
    #[error(
        "the device is unusable after an earlier kernel fault ({}); every call on it \
         fails from then on. To recover, drop every handle of it (Device clones, buffers, \
         pinned buffers, streams, events) and open it again with `Device::gpu`, or call \
         `Device::reset` on the last one: the GPU's context is then reset and its old buffers \
         are gone (StickyFault where the driver keeps the fault: restart the process)",
        .original.headline()
    )]
    ContextPoisoned {
        /// The fault that poisoned it.
        original: Box<Error>,
    },
    /// Opening or resetting a device whose other handles are still alive.
    #[error(
        "{device} is still held by {handles} other handle(s) (Device clones, buffers, pinned \
         buffers, streams or events){}: drop them all first, then {action}",
        poisoned_by.as_ref().map(|e| format!(" and is unusable after an earlier kernel fault \
         ({})", e.headline())).unwrap_or_default()
    )]
    DeviceInUse {
        /// The device, e.g. `GPU 0 (NVIDIA H100 80GB HBM3)`.
        device: String,
        /// Live handles other than the one asking.
        handles: usize,
        /// The fault that poisoned it, if one did.
        poisoned_by: Option<Box<Error>>,
        /// What to do once they are dropped.
        action: &'static str,
    },
    /// Reopening or resetting a GPU after a kernel fault that its driver
    /// keeps for the life of the process: the primary context was reset
    /// (`cuDevicePrimaryCtxReset`) and making a new one still reported the
    /// fault.
    #[error(
        "{device} cannot be used again in this process: after its context was reset \
         (cuDevicePrimaryCtxReset) the driver still reports the sticky fault of an earlier \
         kernel ({}), as NVIDIA driver 580 did after a trap on an H200; restart the \
         process",
        .original.headline()
    )]
    StickyFault {
        /// The GPU, e.g. `GPU 0`.
        device: String,
        /// The fault that poisoned it, or the driver's error where this
        /// process saw none.
        original: Box<Error>,
    },
    /// A reduction over no elements, where the result is undefined (min, max, …).
    #[error("{op} of an empty input is undefined: pass at least one element")]
    EmptyReduction {
        /// The reduction.
        op: &'static str,
    },
    /// A reduction a dtype has no kernel for (e.g. the mean of integers).
    #[error(
        "{op} is not available for {dtype}: {dtype} supports {supported}. Convert the input to a \
         float dtype (f32 or f64) first, or pick one of those operations"
    )]
    UnsupportedDType {
        /// The operation asked for.
        op: &'static str,
        /// The element type it was asked for.
        dtype: &'static str,
        /// The operations that dtype supports, comma-separated.
        supported: &'static str,
    },
    /// `verify` or `bench` was asked for an operation the registry does not have.
    #[error("no operation `{name}`: the operations are {known}")]
    UnknownOperation {
        /// The name asked for.
        name: String,
        /// Every operation's name, comma-separated (`warpforge_tools::registry::OPERATIONS`).
        known: String,
    },
    /// NVTX ranges were asked for, but `libnvToolsExt` cannot be loaded.
    #[error(
        "NVTX ranges need libnvToolsExt.so (NVTX v2), which could not be loaded: install the \
         CUDA 12 toolkit or `pip install nvidia-nvtx-cu12` and put its lib folder \
         (site-packages/nvidia/nvtx/lib) on LD_LIBRARY_PATH"
    )]
    NvtxUnavailable,
    /// A memory-traffic profile was asked of a GPU device.
    #[error(
        "memory-traffic profiles come from the emulator: call `profile_memory` on \
         `Device::emulator()` (on a GPU, run Nsight Compute: `ncu --metrics \
         l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,…`)"
    )]
    ProfileNeedsEmulator,
    /// Any other CUDA driver error.
    #[error("CUDA driver error while {during}: {source}")]
    Driver {
        /// What warpforge was doing.
        during: String,
        /// The driver's error.
        source: DriverError,
    },
    /// A reduction result that cannot be held: reducing an axis of length 0
    /// when the other dimensions are huge (the input has no elements, yet
    /// every output needs a value).
    #[error(
        "{op}: the result has shape {shape:?}: {elements} elements × {item_size} bytes = {} \
         bytes, more than can be held ({why}); every element would be {value}. Reduce the whole \
         tensor (no axis) or along an axis of non-zero length, or make the other dimensions \
         smaller",
        // A usize × a small item size always fits a u128.
        *elements as u128 * *item_size as u128
    )]
    ResultTooLarge {
        /// The reduction.
        op: &'static str,
        /// The result's shape (the input's without the reduced axis).
        shape: Vec<usize>,
        /// Elements of the result.
        elements: usize,
        /// Bytes per element (the result's bytes are `elements × item_size`).
        item_size: usize,
        /// The value every element would hold, e.g. `0.0` or `NaN`.
        value: String,
        /// Where it did not fit, with the sizes.
        why: String,
    },
}

/// What every fault report says about the device afterwards, on either backend.
const POISONED: &str = "the device is now unusable (every later call returns ContextPoisoned): \
     to go on in this process, drop every handle of it and open it again, or call \
     `Device::reset` on the last one";

/// The text of [`Error::KernelFault`]: headline, details, launch, advice.
fn kernel_fault_text(
    kernel: &str,
    grid: &Dim3,
    block: &Dim3,
    code: &FaultCode,
    detail: &str,
    emulated: &Option<Box<EmuError>>,
) -> String {
    let launch = format!("launch: grid {grid}, block {block}");
    match emulated.as_deref() {
        Some(e) => {
            let mut lines = vec![e.headline()];
            lines.extend(e.details().into_iter().map(|l| format!("  {l}")));
            lines.push(format!("  {launch}, on the CPU emulator"));
            lines.push(format!("  {}", e.advice()));
            lines.push(format!("  {POISONED}"));
            lines.join("\n")
        }
        None => {
            let mut headline = format!("kernel `{kernel}` faulted on the GPU: {code}");
            if headline.chars().count() > EmuError::HEADLINE_MAX {
                headline = headline.chars().take(EmuError::HEADLINE_MAX - 1).collect();
                headline.push('…');
            }
            [
                headline,
                format!("  {detail}"),
                format!("  {launch}"),
                "  to find the thread and the line: rerun the launch on the CPU emulator \
                 (`Device::emulator()`, `--backend emu`), which names both, or run the \
                 program under compute-sanitizer"
                    .to_owned(),
                format!(
                    "  {POISONED}; a GPU whose driver keeps the fault for the life of the \
                     process (driver 580 did after a trap on an H200) answers StickyFault \
                     instead, and only a new process can use it"
                ),
            ]
            .join("\n")
        }
    }
}

impl Error {
    /// The first line of this error's text: for a [`Error::KernelFault`],
    /// its headline (kernel, fault, and on the emulator where in the
    /// source, block and thread), which the errors that name an earlier
    /// fault quote.
    pub fn headline(&self) -> String {
        let text = self.to_string();
        match text.split_once('\n') {
            Some((first, _)) => first.to_owned(),
            None => text,
        }
    }

    /// Wraps a driver error with what warpforge was doing.
    pub(crate) fn driver(during: impl Into<String>) -> impl FnOnce(DriverError) -> Error {
        let during = during.into();
        move |source| Error::Driver { during, source }
    }
}

/// What kind of fault stopped a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultCode {
    /// A load or store outside any allocation (`CUDA_ERROR_ILLEGAL_ADDRESS`).
    IllegalAddress,
    /// A misaligned load or store (`CUDA_ERROR_MISALIGNED_ADDRESS`).
    MisalignedAddress,
    /// The kernel trapped: a panic, failed assertion or bounds check
    /// (`CUDA_ERROR_ILLEGAL_INSTRUCTION` / `CUDA_ERROR_ASSERT` on the GPU, a panic in the emulator).
    Trap,
    /// The launch failed for another reason (`CUDA_ERROR_LAUNCH_FAILED`, stack overflow, …).
    LaunchFailed,
    /// The kernel ran too long and the watchdog stopped it (`CUDA_ERROR_LAUNCH_TIMEOUT`).
    Timeout,
    /// Emulator: some threads of a block wait at a barrier others never reach (a hang on a GPU).
    DivergentBarrier,
    /// Emulator: a warp collective's mask names lanes that do not join it.
    WarpMask,
    /// Emulator: two threads touch the same shared-memory byte without a barrier between.
    SharedRace,
    /// Emulator: two threads touch the same element of an output buffer with nothing ordering them.
    GlobalRace,
    /// Emulator: a thread reads shared memory that no thread of its block wrote.
    UninitSharedRead,
    /// Emulator: no thread of a block can make progress (a hang on a GPU).
    Deadlock,
    /// Emulator: an mbarrier used against its protocol (undefined on a GPU).
    MbarrierMisuse,
    /// Emulator: a `wgmma` against the instruction's rules (undefined on a GPU).
    WgmmaMisuse,
    /// Emulator: a TMA store against its protocol (an unfenced or rewritten
    /// staging tile, overlapping stores in flight, or an exit before their
    /// reads; undefined on a GPU).
    TmaStoreMisuse,
}

impl std::fmt::Display for FaultCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FaultCode::IllegalAddress => "illegal memory address",
            FaultCode::MisalignedAddress => "misaligned memory address",
            FaultCode::Trap => "trap (a panic, failed assertion or bounds check in the kernel)",
            FaultCode::LaunchFailed => "launch failed",
            FaultCode::Timeout => "timed out",
            FaultCode::DivergentBarrier => "divergent barrier",
            FaultCode::WarpMask => "bad warp mask",
            FaultCode::SharedRace => "shared-memory race",
            FaultCode::GlobalRace => "global-memory race",
            FaultCode::UninitSharedRead => "read of uninitialised shared memory",
            FaultCode::Deadlock => "deadlock",
            FaultCode::MbarrierMisuse => "mbarrier misuse",
            FaultCode::WgmmaMisuse => "wgmma misuse",
            FaultCode::TmaStoreMisuse => "TMA store misuse",
        })
    }
}

impl FaultCode {
    /// The fault a driver error reports, if it is a kernel fault (these errors
    /// are sticky: the context cannot be used afterwards).
    pub fn from_driver(code: cudarc::driver::sys::cudaError_enum) -> Option<FaultCode> {
        use cudarc::driver::sys::cudaError_enum::*;
        Some(match code {
            CUDA_ERROR_ILLEGAL_ADDRESS => FaultCode::IllegalAddress,
            CUDA_ERROR_MISALIGNED_ADDRESS => FaultCode::MisalignedAddress,
            CUDA_ERROR_ILLEGAL_INSTRUCTION | CUDA_ERROR_ASSERT => FaultCode::Trap,
            CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_INVALID_ADDRESS_SPACE => FaultCode::LaunchFailed,
            CUDA_ERROR_LAUNCH_TIMEOUT => FaultCode::Timeout,
            _ => return None,
        })
    }

    /// The code of an emulator fault.
    pub fn from_emulator(fault: &warpforge_device::emu::Fault) -> FaultCode {
        use warpforge_device::emu::{Fault, TmaStoreProblem, WgmmaProblem};
        match fault {
            Fault::Panic { .. } => FaultCode::Trap,
            Fault::DivergentBarrier { .. } => FaultCode::DivergentBarrier,
            Fault::WarpMask { .. } => FaultCode::WarpMask,
            Fault::SharedRace { .. } => FaultCode::SharedRace,
            Fault::GlobalRace { .. } => FaultCode::GlobalRace,
            Fault::UninitSharedRead { .. } => FaultCode::UninitSharedRead,
            Fault::Deadlock { .. } | Fault::SpinDeadlock { .. } => FaultCode::Deadlock,
            // The copy engine writes the bytes while the thread touches them: a race.
            Fault::CpAsyncPending { .. } | Fault::BulkCopyPending { .. } => FaultCode::SharedRace,
            Fault::Mbarrier { .. } => FaultCode::MbarrierMisuse,
            Fault::Wgmma {
                problem: WgmmaProblem::OperandChanged { .. },
                ..
            } => FaultCode::SharedRace,
            // The warp waits for ever: the launch hangs on the GPU.
            Fault::Wgmma {
                problem: WgmmaProblem::RegisterPoolShort { .. },
                ..
            } => FaultCode::Deadlock,
            Fault::Wgmma { .. } => FaultCode::WgmmaMisuse,
            // The copy engine reads the staging while the thread writes it.
            Fault::TmaStore {
                problem: TmaStoreProblem::SourceInUse { .. },
                ..
            } => FaultCode::SharedRace,
            Fault::TmaStore { .. } => FaultCode::TmaStoreMisuse,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn errors_stay_small() {
        // Clippy's `result_large_err` starts at 128 bytes; big payloads are boxed.
        assert!(
            size_of::<super::Error>() <= 120,
            "{}",
            size_of::<super::Error>()
        );
    }
}
