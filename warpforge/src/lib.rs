//! warpforge: CUDA kernels written in Rust, launched with typed arguments,
//! guarded against out-of-bounds writes, and verified against CPU references
//! on the GPU or on a CPU emulator of the CUDA execution model.
//!
//! How a kernel travels:
//!
//! 1. `kernels/` — plain Rust functions marked `#[kernel]` over `warpforge-device`.
//! 2. `builder/` — `build.rs` compiles that crate to PTX with rustc's NVPTX backend;
//!    [`ptx::LIBRARY`] embeds it as a [`Module`] named after the crate's package.
//! 3. [`Device::launch`] — checks the config against the device's limits and the
//!    buffers against the kernel's signature, then launches it on the GPU (cudarc)
//!    or runs it in the emulator.
//! 4. [`reference`](mod@reference) and [`verify`] — CPU references and the checks that compare them.
//!
//! Your own kernels crate travels the same way: your host crate's `build.rs`
//! runs `warpforge-builder` on it, [`include_module!`] embeds the PTX as a
//! [`Module`], and [`Device::load`] loads it on a GPU (the library's module is
//! loaded by [`Device::gpu`]). Every `#[kernel]` records the package name of
//! the crate it is compiled in ([`Kernel::MODULE`]); a GPU launch looks its
//! entry up in the loaded module of that name only (else
//! [`Error::ModuleNotLoaded`]) and, before its first launch, checks its
//! parameters against the entry's `.param` list, count, widths and pointers
//! (else [`Error::KernelSignature`]). A kernel name alone is never trusted,
//! so a kernel of yours named like a library kernel never runs the library's
//! entry. On the emulator kernels run from host code and `load` is a no-op.
//!
//! ```
//! use warpforge::{Device, reduce};
//! let dev = Device::emulator();
//! let x = dev.upload(&[1.0f32, 2.0, 3.0, 4.0])?;
//! assert_eq!(reduce::sum(&x)?, 10.0);
//! # Ok::<(), warpforge::Error>(())
//! ```

pub mod bench;
mod buffer;
mod device;
pub mod doctor;
mod element;
mod emulator;
mod error;
pub mod gpu;
mod launch;
pub mod npy;
pub mod nvtx;
pub mod ops;
pub mod ptx;
pub mod ptx_diff;
pub mod ptxas;
pub mod reduce;
pub mod reference;
pub mod run;
pub mod sass;
mod stream;
pub mod verify;

pub use buffer::{DeviceBuffer, PinnedBuffer};
pub use device::Device;
pub use element::{DType, Element};
pub use error::{Error, FaultCode, Result};
pub use launch::{FunctionLimits, KernelArg, KernelArgs, LaunchConfig, Limits};
pub use ptx::Module;
pub use stream::{Event, Stream};
pub use warpforge_device::Dim3;
pub use warpforge_device::emu::{EmuError, Fault};
pub use warpforge_device::kernel::Kernel;
