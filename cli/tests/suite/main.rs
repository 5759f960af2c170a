//! The `warpforge` command's integration tests, one binary: each module runs
//! the real executable (`CARGO_BIN_EXE_warpforge`) for one command or topic.
//! Filter by module, e.g. `cargo test -p warpforge-cli --test suite run_gemm_cli`.

mod common;

mod doctor;
mod gpu_suite;
mod nvtx;
mod profile_cli;
mod ptx_cli;
mod readme_tables;
mod registry_cli;
mod run_conv2d_cli;
mod run_gemm_cli;
mod run_reduce_cli;
