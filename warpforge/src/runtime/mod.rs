//! The runtime: devices (a GPU through the driver, or the CPU emulator), typed
//! buffers, streams and events, typed launches, and the errors they return.
//! Everything here is re-exported at the crate root (`warpforge::Device`,
//! `warpforge::gpu`, `warpforge::nvtx`, …); this module is the folder, not a path.
//!
//! | file | holds |
//! | --- | --- |
//! | `device.rs` | [`Device`]: opening, loading modules, launching, allocating, faults and resets |
//! | `gpu.rs` | the GPU backend over cudarc (the FFI edge); [`gpu::driver_present`] and friends |
//! | `emulator.rs` | the emulator backend's memory pool, buffers and emulated streams |
//! | `buffer.rs` | [`DeviceBuffer`], [`PinnedBuffer`] |
//! | `stream.rs` | [`Stream`], [`Event`] and the synchronisation warpforge does for you |
//! | `launch.rs` | [`LaunchConfig`], device limits, the argument traits tied to a kernel's signature |
//! | `element.rs` | [`Element`], [`DType`] |
//! | `error.rs` | [`Error`], [`FaultCode`], [`Result`] |
//! | `nvtx.rs` | NVTX ranges around launches, for Nsight |
//! | `tensor_map.rs` | [`TensorMap`]: TMA tensor maps, checked and encoded |

mod buffer;
pub(crate) mod device;
mod element;
mod emulator;
mod error;
pub mod gpu;
pub(crate) mod launch;
pub mod nvtx;
mod stream;
mod tensor_map;

pub use buffer::{DeviceBuffer, PinnedBuffer};
pub use device::{Device, ModuleLoad, WorkCounts};
pub use element::{DType, Element};
pub use error::{Error, FaultCode, Result};
pub use launch::{Arch, FunctionLimits, KernelArg, KernelArgs, LaunchConfig, Limits, MatrixMut};
pub use stream::{Event, Stream};
pub use tensor_map::{StoreMatrix, TensorMap};
