//! Every way a warpforge call can fail, each with the sizes involved and the fix.

use cudarc::driver::DriverError;
use warpforge_device::Dim3;
use warpforge_device::emu::EmuError;

/// Result of every fallible warpforge call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong. Messages say what happened, with which sizes, and what to do.
#[derive(Debug, thiserror::Error)]
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
    /// The driver is older than the PTX embedded in warpforge needs.
    #[error(
        "the CUDA driver supports CUDA {driver_cuda_version} but the embedded PTX (ISA \
         {ptx_isa_needed}) needs CUDA {cuda_needed} or newer: update the NVIDIA driver"
    )]
    DriverTooOld {
        /// The driver's CUDA version, e.g. `12.2`.
        driver_cuda_version: String,
        /// The PTX ISA version of the module, e.g. `7.0`.
        ptx_isa_needed: String,
        /// The CUDA version that introduced that ISA.
        cuda_needed: String,
    },
    /// The GPU is older than the embedded PTX supports.
    #[error(
        "{name} has compute capability {}.{}, but warpforge's PTX needs 8.0 (Ampere) or newer: \
         use a newer GPU, or the CPU emulator (`--backend emu`)",
        compute_capability.0, compute_capability.1
    )]
    UnsupportedGpu {
        /// The GPU's name.
        name: String,
        /// Its compute capability.
        compute_capability: (i32, i32),
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
    /// A kernel faulted in the emulator (bounds, barrier, warp mask, deadlock).
    #[error("{0}")]
    KernelFault(#[from] EmuError),
    /// A reduction over no elements, where the result is undefined (min, max, …).
    #[error("{op} of an empty input is undefined: pass at least one element")]
    EmptyReduction {
        /// The reduction.
        op: &'static str,
    },
    /// Any other CUDA driver error.
    #[error("CUDA driver error while {during}: {source}")]
    Driver {
        /// What warpforge was doing.
        during: String,
        /// The driver's error.
        source: DriverError,
    },
}

impl Error {
    /// Wraps a driver error with what warpforge was doing.
    pub(crate) fn driver(during: impl Into<String>) -> impl FnOnce(DriverError) -> Error {
        let during = during.into();
        move |source| Error::Driver { during, source }
    }
}
