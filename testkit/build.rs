//! Compiles the probe kernels (`warpforge-probes`) to their own PTX module, as
//! a user's host crate compiles its kernels crate: the builder writes
//! `$OUT_DIR/warpforge-modules/warpforge-probes.rs`, which
//! `include_module!("warpforge-probes")` in `src/lib.rs` reads. The path of
//! each `.ptx` file is handed on too (`WARPFORGE_PROBES_PTX_SM_80`, `…_SM_90A`), so CI can
//! run `warpforge ptx FILE --deny-spills` on it.

use warpforge_builder::{Arch, PtxBuilder};

fn main() {
    // Read when the script runs, not baked in when it is compiled: cargo
    // reuses a build script compiled in another checkout of this workspace
    // (its hash does not depend on the path), which would build that
    // checkout's probes.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it");
    let workspace = std::path::Path::new(&manifest_dir)
        .parent()
        .expect("the testkit lives in the workspace")
        .to_path_buf();
    let modules = PtxBuilder::new("warpforge-probes", &workspace)
        .arch(Arch::Sm80)
        // The Hopper probes (`wgmma`) exist only here.
        .arch(Arch::Sm90a)
        .watch(workspace.join("rust-toolchain.toml"))
        .build_or_exit();
    for m in modules {
        println!(
            "cargo:rustc-env=WARPFORGE_PROBES_PTX_{}={}",
            m.arch.name().to_uppercase(),
            m.path.display()
        );
    }
}
