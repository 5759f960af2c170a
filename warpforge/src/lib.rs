//! warpforge: CUDA kernels written in Rust, launched with typed arguments,
//! guarded against out-of-bounds writes, and verified against CPU references
//! on the GPU or on a CPU emulator of the CUDA execution model.
//!
//! How a kernel travels:
//!
//! 1. `kernels/` — plain Rust functions marked `#[kernel]` over `warpforge-device`,
//!    one crate per family (`kernels/reduce`, `kernels/gemm-simt`,
//!    `kernels/gemm-tensor`, `kernels/conv`, and `kernels-hopper`).
//! 2. `builder/` — `build.rs` compiles each family this build's features select
//!    to PTX with rustc's NVPTX backend, all at once; [`ptx::LIBRARY`] embeds
//!    each as a [`Module`] named after the crate's package.
//! 3. [`Device::launch`] — checks the config against the device's limits and the
//!    buffers against the kernel's signature, then launches it on the GPU (cudarc)
//!    or runs it in the emulator.
//! 4. [`reference`](mod@reference) — CPU references; `warpforge-tools`' `verify`
//!    compares every kernel with them (`warpforge verify`).
//!
//! # Where things are
//!
//! | folder or file | role | public paths |
//! | --- | --- | --- |
//! | `src/runtime/` | devices (GPU or emulator), buffers, streams and events, launches, errors, NVTX | [`Device`], [`DeviceBuffer`], [`Stream`], [`LaunchConfig`], [`Error`], …, [`gpu`], [`nvtx`] |
//! | `src/ops/` | the operations users call: elementwise ([`ops::axpy`]) and [`reduce`] | [`ops`], [`reduce`] |
//! | `src/reference/` | CPU references, one module per family of `ops/` | [`reference`](mod@reference) |
//! | `src/ptx.rs` | embedded PTX modules, [`include_module!`], what is read from PTX text | [`ptx`], [`Module`] |
//!
//! The references sit beside `ops/`, not inside it: a reference is the independent
//! definition an op is checked against, so it takes the op's vocabulary (`reduce::Op`,
//! the shape as a `reduce::Layout`, whose fold depth sets the tolerance) but none of
//! its kernels or launch code; `verify` and the tests read it from one place, and
//! `reference/gemm.rs` will sit opposite `ops/gemm.rs` as `reduce.rs` does now.
//! The `warpforge` command (`verify`, `ptx`, `run`, `profile`, `bench`, `doctor`; clap, `.npy`,
//! ptxas and nvdisasm) is the `warpforge-cli` crate, and what its `verify` and
//! `bench` run (every kernel against its reference, the benchmarks against cuBLAS
//! and cuDNN, the registry of operations they walk) is `warpforge-tools`: a
//! program that depends on this library compiles neither, nor their
//! dependencies (cuBLAS and cuDNN bindings, `rand`).
//!
//! Your own kernels crate travels the same way: your host crate's `build.rs`
//! runs `warpforge-builder` on it, [`include_module!`] embeds the PTX as a
//! [`Module`], and [`Device::load`] loads it on a GPU (the library's families
//! load lazily, at the first launch of one of their kernels). Every `#[kernel]` records the package name of
//! the crate it is compiled in ([`Kernel::MODULE`]); a GPU launch looks its
//! entry up in the loaded module of that name only (else
//! [`Error::ModuleNotLoaded`]) and, before its first launch, checks its
//! parameters against the entry's `.param` list, count, widths and pointers
//! (else [`Error::KernelSignature`]). A kernel name alone is never trusted,
//! so a kernel of yours named like a library kernel never runs the library's
//! entry. On the emulator kernels run from host code and `load` is a no-op.
//!
//! The design notes behind each part (the kernel families, the emulator, the
//! host API's failure classes, the builder) and the GPU measurements are the
//! repository's `docs/` pages, indexed by `docs/README.md`.
//!
//! On the emulator, [`Device::profile_memory`] returns each launch's
//! [`MemoryProfile`]: its global and shared-memory traffic counted per
//! warp-level request as a GPU serves it (sectors per request, coalescing
//! efficiency, bank conflicts, bytes per output element, the busiest source
//! lines), for the library's operations and your own kernels alike.
//!
//! ```
//! use warpforge::{Device, reduce};
//! let dev = Device::emulator();
//! let x = dev.upload(&[1.0f32, 2.0, 3.0, 4.0])?;
//! assert_eq!(reduce::sum(&x)?, 10.0);
//! # Ok::<(), warpforge::Error>(())
//! ```

// The module files warpforge-builder writes name `::warpforge::ptx::…`;
// this lets the library embed its own module the way a user's crate does.
extern crate self as warpforge;

mod runtime;

pub mod ops;
pub mod ptx;
pub mod reference;

pub use ops::conv as conv2d;
pub use ops::gemm;
pub use ops::reduce;
pub use ptx::Module;
pub use runtime::{
    Arch, DType, Device, DeviceBuffer, Element, Error, Event, FaultCode, FunctionLimits, KernelArg,
    KernelArgs, LaunchConfig, Limits, MatrixMut, ModuleLoad, PinnedBuffer, Result, StoreMatrix,
    Stream, TensorMap, WorkCounts, gpu, nvtx,
};
pub use warpforge_device::Dim3;
pub use warpforge_device::emu::profile::{
    AtomicTraffic, GlobalTraffic, LineTraffic, MemoryProfile, SharedTraffic,
};
pub use warpforge_device::emu::{EmuError, Fault, SourceLocation};
pub use warpforge_device::kernel::Kernel;
