//! warpforge: CUDA kernels written in Rust, launched with typed arguments,
//! guarded against out-of-bounds writes, and verified against CPU references
//! on the GPU or on a CPU emulator of the CUDA execution model.
//!
//! How a kernel travels:
//!
//! 1. `kernels/` — plain Rust functions marked `#[kernel]` over `warpforge-device`.
//! 2. `builder/` — `build.rs` compiles that crate to PTX with rustc's NVPTX backend;
//!    [`ptx::MODULES`] embeds it.
//! 3. [`Device::launch`] — checks the config against the device's limits and the
//!    buffers against the kernel's signature, then launches it on the GPU (cudarc)
//!    or runs it in the emulator.
//! 4. [`reference`] and [`verify`] — CPU references and the checks that compare them.
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
pub mod ops;
pub mod ptx;
pub mod ptxas;
pub mod reduce;
pub mod reference;
pub mod run;
mod stream;
pub mod verify;

pub use buffer::{DeviceBuffer, PinnedBuffer};
pub use device::Device;
pub use element::{DType, Element};
pub use error::{Error, FaultCode, Result};
pub use launch::{FunctionLimits, KernelArg, KernelArgs, LaunchConfig, Limits};
pub use stream::{Event, Stream};
pub use warpforge_device::Dim3;
pub use warpforge_device::emu::{EmuError, Fault};
pub use warpforge_device::kernel::Kernel;
