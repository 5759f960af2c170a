//! The device library: everything a warpforge kernel may call.
//!
//! One module per GPU concept, as in rust-cuda's `cuda_std`:
//!
//! | module | concept |
//! | --- | --- |
//! | [`thread`] | thread, block and grid indices and dimensions; lanes and warps |
//! | [`sync`] | block-wide barriers |
//! | [`shared`] | per-block shared memory, typed and bounds-known |
//! | [`warp`] | warp-synchronous shuffles, votes, reductions and `elect.sync` |
//! | [`atomic`] | scoped atomic read-modify-write on global and shared memory |
//! | [`mma`] | tensor-core `mma.sync` fragments, `ldmatrix`, `cp.async` |
//! | [`mbarrier`] | split-phase barriers in shared memory: arrivals and transaction bytes per phase, waits by phase (sm_90) |
//! | [`bulk`] | bulk asynchronous copies global → shared (`cp.async.bulk`, the TMA's 1-D form), counted on an mbarrier (sm_90) |
//! | [`tma`] | TMA tensor copies (`cp.async.bulk.tensor`): boxes of a host-made tensor map into shared tiles and `wgmma` operands, counted on an mbarrier (sm_90) |
//! | [`swizzle`] | the shared-memory swizzles TMA writes and `wgmma` reads, as values and as types |
//! | [`wgmma`] | warpgroup `wgmma.mma_async` from typed, swizzled shared tiles into a 64 × N accumulator (sm_90a) |
//! | [`num`] | fma, f16/bf16 conversion, packed halves, fast and accurate math, division by a launch-invariant divisor |
//! | [`guard`] | index guards: the only way a kernel writes to global memory |
//! | [`own`] | owned outputs: slots only for the elements this thread alone writes |
//! | [`global`] | [`Global`]: read-only inputs known by their type to be in global memory |
//! | [`panel`] | a panel of a `Global` matrix proven in bounds and aligned once, read into registers with no check per load |
//! | [`kernel`] | the typed description `#[kernel]` derives from a kernel's signature |
//!
//! The same source compiles two ways. On `nvptx64-nvidia-cuda` every primitive
//! is a PTX special register, intrinsic or a few lines of inline `asm!`
//! (`arch::nvptx`). On the host the same functions ask the CPU emulator
//! ([`emu`]) for the calling fiber's indices, barriers and warp exchanges, so a
//! kernel runs unchanged in `cargo test` on a machine without a GPU.
//!
//! This crate and the host crate's FFI edge are the only places with `unsafe`.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        stdarch_nvptx,
        asm_experimental_arch,
        core_intrinsics,
        gpu_intrinsics,
        gpu_launch_sized_workgroup_mem
    )
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]
#![feature(stmt_expr_attributes)]

mod arch;
#[cfg(any(target_arch = "nvptx64", test))]
mod panic_text;

pub mod atomic;
pub mod bulk;
pub mod global;
pub mod guard;
pub mod kernel;
pub mod mbarrier;
pub mod mma;
pub mod num;
pub mod own;
pub mod panel;
pub mod shared;
pub mod swizzle;
pub mod sync;
pub mod thread;
pub mod tma;
pub mod unroll;
pub mod warp;
pub mod wgmma;

#[cfg(not(target_arch = "nvptx64"))]
pub mod emu;

pub use global::Global;
pub use guard::{In2, Out, Out2, Slot};
pub use half::{bf16, f16};
pub use own::OutMatrix;
pub use thread::Dim3;
