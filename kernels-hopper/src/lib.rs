//! The Hopper kernels: `sm_90a` only (`wgmma`, `setmaxnreg` and the TMA's
//! tensor copies exist nowhere else), so they are a crate of their own,
//! compiled to a module of their own (`warpforge/build.rs`,
//! `Arch::Sm90a`) that the host loads on sm_90 GPUs; elsewhere the library's
//! `mma.sync` kernels run. The sm_90a build turns every panic into a bare
//! trap (`-Cpanic=immediate-abort`): a kernel with any call has its
//! `wgmma`s serialised and its `setmaxnreg` dropped by ptxas. On the host
//! the same functions run in the emulator, which gives every check's
//! message.
//!
//! | module | kernels |
//! | --- | --- |
//! | [`gemm`] | `gemm_wgmma_{f16,bf16}_{f32,f16,bf16}_{nn,nt,tn,tt}_128x256x64_s4` and `gemm_wgmma_tf32_f32_nt_128x256x32_s4`: warp-specialised GEMM, a TMA producer warpgroup feeding two `wgmma` consumer warpgroups through a 4-stage mbarrier ring |
//! | [`tf32`] | `tf32_k_major_{rows,cols}`: f32 operands rounded to tf32 and laid out K-major for the tf32 GEMM |
//! | [`dgemm`] | `gemm_dmma16_f64_{nn,nt,tn,tt}_128x64x16_s3`: FP64 GEMM on sm_90's `mma.sync.m16n8k16.f64` (`DMMA.16x8x16`), the sm_80 module's f64 body on a 128 × 64 tile |
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]
#![forbid(unsafe_code)]

pub mod dgemm;
pub mod gemm;
pub mod tf32;
