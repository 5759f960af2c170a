//! The kernel library. Each kernel is a plain Rust function marked `#[kernel]`,
//! written against `warpforge-device` only: no `unsafe`, no inline asm, no
//! target `cfg`s. The build (`warpforge/build.rs` via `warpforge-builder`)
//! compiles this crate to PTX; on the host the same functions run in the emulator.
//!
//! | module | kernels |
//! | --- | --- |
//! | [`conv`] | `conv2d_{nchw,nhwc}_f32_64x64x16` (implicit GEMM on the SIMT GEMM's main loop), `conv2d_nhwc_{f16,bf16}_{64x64x32_s3,128x128x32_s4}` (NHWC on the tensor cores; NCHW f16/bf16 runs them between layout changes), `conv2d_depthwise_{nchw,nhwc}_{f32,f16,bf16}` (tiled depthwise: the input tile and halo staged once in shared memory), `conv2d_direct_{nchw,nhwc}_{f32,f16,bf16}` (direct: the depthwise fallback) |
//! | [`elementwise`] | `axpy_f32`, `axpy_f64` |
//! | [`gemm`] | `gemm_{f32,f64}_{nn,nt,tn,tt}_BMxBNxBK`: SIMT GEMM, block-tiled in shared memory ([`gemm::warp_tiled`]: f32's 128 × 128 warp-tiled one); [`gemm::tensor`]: `gemm_{f16,bf16,tf32}_*` on the tensor cores; [`gemm::split_k`]: `gemm_split_k_sum_{f32,f16,bf16,f64}`, split-k's sum of partial planes |
//! | [`reduce`] | the reduction family: `reduce_{rows,cols}_OP_DTYPE`, `combine_{rows,cols}_STATE_ACC`, `finish_*` |
//! | [`transpose`] | `transpose_{f32,f16,bf16}`: batched 2-D transpose through a shared-memory tile (the NCHW ↔ NHWC layout changes) |
//!
//! Only the library's kernels live here, so the library's PTX module holds
//! nothing else. The probe kernels that exercise each device primitive in the
//! tests are a crate of their own (`warpforge-probes`, with its own PTX module).
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]
// `#[inline(always)]` on the hot loops' closures (`unroll`): LLVM declines to
// inline a large closure otherwise, and its captures (the accumulators) would
// go to the stack.
#![feature(stmt_expr_attributes)]
#![forbid(unsafe_code)]

pub mod conv;
pub mod elementwise;
pub mod gemm;
pub mod reduce;
pub mod transpose;
