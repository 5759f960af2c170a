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
//! The warp-specialised kernels are compositions of shared collectives,
//! as CUTLASS 3 separates them: [`config`] (one type per tile
//! configuration: shape, stages, warpgroups, the register split derived
//! from them), [`mainloop`] (the mbarrier ring between a producer warpgroup
//! and the `wgmma` consumers), [`epilogue`] (the accumulator through shared
//! memory to the output in whole lines, the per-element operation a
//! parameter) and the tile scheduler, `warpforge_device::own::TileWalk`.
//!
//! | module | kernels |
//! | --- | --- |
//! | [`gemm`] | `gemm_wgmma_{f16,bf16}_{f32,f16,bf16}_{nn,nt,tn,tt}_128x256x64_s4` and `gemm_wgmma_tf32_f32_nt_128x256x32_s4`, and their 128 × 128 twins (`…_128x128x64_s4`, `…_128x128x32_s4`, for grids the wide tiles would leave half idle): warp-specialised GEMM, a TMA producer warpgroup feeding two `wgmma` consumer warpgroups through a 4-stage mbarrier ring |
//! | [`tf32`] | `tf32_k_major_{rows,cols}`: f32 operands rounded to tf32 and laid out K-major for the tf32 GEMM |
//! | [`conv`] | `conv2d_wgmma_nhwc_{f16,bf16}_128x128x64_s4`: implicit-GEMM NHWC convolution, the producer warpgroup gathering A (`cp.async`, zero-filled padding) and the TMA loading the weights into a 4-stage ring for two `wgmma` consumer warpgroups; bias and ReLU in the epilogue |
//! | [`dgemm`] | `gemm_dmma16_f64_{nn,nt,tn,tt}_128x64x16_s3`: FP64 GEMM on sm_90's `mma.sync.m16n8k16.f64` (`DMMA.16x8x16`), the sm_80 module's f64 body on a 128 × 64 tile |
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]
#![forbid(unsafe_code)]

pub mod config;
pub mod conv;
pub mod dgemm;
pub mod epilogue;
pub mod gemm;
pub mod mainloop;
pub mod tf32;
