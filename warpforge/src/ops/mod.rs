//! High-level operations: each picks its kernels and launch shapes, checks
//! sizes, and runs on any [`Device`](crate::Device). One module per family;
//! each has its CPU reference in [`reference`](crate::reference) under the same name.
//!
//! - [`conv`]: forward 2-D convolution, NCHW and NHWC (also `warpforge::conv2d`).
//! - [`elementwise`]: `axpy` (its items are also here, as `ops::axpy`, …).
//! - [`gemm`]: SIMT GEMM, f32 and f64 (also `warpforge::gemm`).
//! - [`reduce`]: whole-tensor and per-axis reductions (also `warpforge::reduce`).

pub mod conv;
pub mod elementwise;
pub mod gemm;
pub mod reduce;

pub use elementwise::{Axpy, BLOCK_THREADS, MAX_BLOCKS, axpy, grid_stride_config};
