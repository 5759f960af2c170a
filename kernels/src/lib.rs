//! The kernel library, one crate per family, each compiled to a PTX module of
//! its own so that a family builds (in parallel with the others), caches and
//! loads on its own, and an application builds only the families it calls.
//! This crate re-exports them under one name, by feature (`warpforge`'s
//! features of the same names turn these on); the host compiles them too, to
//! run them in the emulator.
//!
//! | feature | crate (folder) | module | kernels |
//! | --- | --- | --- | --- |
//! | `reduce` | `warpforge-kernels-reduce` (`kernels/reduce`) | [`reduce`], [`elementwise`] | `reduce_*`, `combine_*`, `finish_*`; `axpy_f32`, `axpy_f64` |
//! | `gemm` | `warpforge-kernels-gemm-simt` (`kernels/gemm-simt`) | [`gemm`] | `gemm_{f32,f64}_{nn,nt,tn,tt}_BMxBNxBK` (SIMT; f32's warp-tiled 128 × 128 in [`gemm::warp_tiled`]), `gemm_split_k_sum_*` ([`gemm::split_k`]) |
//! | `gemm` | `warpforge-kernels-gemm-tensor` (`kernels/gemm-tensor`) | [`gemm::tensor`] | `gemm_{f16,bf16,tf32}_*` on the tensor cores (`mma.sync`) |
//! | `conv` | `warpforge-kernels-conv` (`kernels/conv`) | [`conv`], [`transpose`] | `conv2d_*` (implicit GEMM, depthwise, direct); `transpose_{f32,f16,bf16}` |
//!
//! The Hopper kernels (`wgmma`, TMA: `sm_90a`) are `warpforge-kernels-hopper`
//! (`kernels-hopper/`, the `hopper` feature of `warpforge`).
//!
//! Each family is plain Rust over `warpforge-device`: no `unsafe`, no inline
//! asm, no target `cfg`s. `warpforge/build.rs` compiles each to PTX with
//! `warpforge-builder`. The GEMM crates' `entries` feature holds their
//! `#[kernel]`s: the convolutions and the tensor-core GEMM use the main loops
//! without it, so a module never carries another family's kernels.
#![forbid(unsafe_code)]

#[cfg(feature = "conv")]
pub use warpforge_kernels_conv as conv;
#[cfg(feature = "conv")]
pub use warpforge_kernels_conv::transpose;
#[cfg(feature = "reduce")]
pub use warpforge_kernels_reduce as reduce;
#[cfg(feature = "reduce")]
pub use warpforge_kernels_reduce::elementwise;

/// The GEMM kernels: the SIMT ones (`warpforge-kernels-gemm-simt`, re-exported
/// here) and the tensor-core ones ([`gemm::tensor`]: `warpforge-kernels-gemm-tensor`).
#[cfg(feature = "gemm")]
pub mod gemm {
    pub use warpforge_kernels_gemm_simt::*;
    pub use warpforge_kernels_gemm_tensor as tensor;
}
