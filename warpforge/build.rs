//! Compiles the kernels crate to PTX (see warpforge-builder) and hands the
//! module's path to `src/ptx.rs`, which embeds it. The builder also writes
//! `$OUT_DIR/warpforge-modules/warpforge-kernels.rs`, the file
//! `include_module!("warpforge-kernels")` reads.
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
    let modules = PtxBuilder::new("warpforge-kernels", &workspace)
        .arch(Arch::Sm80)
        .watch(workspace.join("rust-toolchain.toml"))
        .build_or_exit();
    for m in modules {
        println!(
            "cargo:rustc-env=WARPFORGE_PTX_{}={}",
            m.arch.name().to_uppercase(),
            m.path.display()
        );
    }
}
