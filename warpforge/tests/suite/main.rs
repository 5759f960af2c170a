//! warpforge's integration tests, one binary (each file under `tests/` used to
//! be its own, each linking the emulator, the library and its PTX). One module
//! per topic; filter as before, e.g. `cargo test -p warpforge --test suite gemm`
//! or by a test's path, `gemm_tensor::`.
//!
//! GPU tests are `#[ignore = "needs a CUDA GPU"]`; `--ignored` runs them.

mod common;

mod atomics;
mod conv2d;
mod emulator_faults;
mod fault_locations;
mod gemm;
mod gemm_batched;
mod gemm_dmma;
mod gemm_split_k;
mod gemm_tensor;
mod gemm_tf32;
mod gemm_tile_table;
mod generic_kernels;
mod guards;
mod hopper_probes;
mod host_api;
mod kernels;
mod lazy_loading;
mod math;
mod memory_profile;
mod modules;
mod owned_writes;
mod primitives;
mod readme_first_kernel;
mod reduce_fused_race;
mod reduce_vector;
mod reductions;
mod streams;
mod tensor;
