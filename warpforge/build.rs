//! Compiles the kernels crates to PTX (see warpforge-builder), which writes
//! `$OUT_DIR/warpforge-modules/warpforge-kernels.rs` (sm_80) and
//! `warpforge-kernels-hopper.rs` (sm_90a): `src/ptx.rs` embeds them with
//! `include_module!`, as a user's host crate does.
//!
//! Line info stays off for the shipped library: with it, LLVM generates
//! slightly different code (26 of the 150 kernels' register counts change on
//! sm_80; spills, stack and occupancy do not), so the PTX that was measured
//! would not be the PTX that ships. `WARPFORGE_LINE_INFO=1 cargo build` gives a
//! build with Rust source lines in the SASS, for profiling.

use warpforge_builder::{Arch, PtxBuilder};

fn main() {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the host crate lives in the workspace")
        .to_path_buf();
    // The kernels crate, its path dependencies (device, macros) and the
    // workspace's Cargo.toml/Cargo.lock are watched by the builder itself.
    PtxBuilder::new("warpforge-kernels", &workspace)
        .arch(Arch::Sm80)
        .watch(workspace.join("rust-toolchain.toml"))
        .build_or_exit();
    // The Hopper kernels (wgmma, TMA): sm_90a only, a module of their own,
    // so the library's sm_80 build neither grows nor waits for them.
    PtxBuilder::new("warpforge-kernels-hopper", &workspace)
        .arch(Arch::Sm90a)
        .watch(workspace.join("rust-toolchain.toml"))
        .build_or_exit();
}
