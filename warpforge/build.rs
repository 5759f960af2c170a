//! Compiles the kernels crate to PTX (see warpforge-builder) and hands the
//! module's path to `src/ptx.rs`, which embeds it.

use warpforge_builder::{Arch, PtxBuilder};

fn main() {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the host crate lives in the workspace")
        .to_path_buf();
    let modules = PtxBuilder::new("warpforge-kernels", &workspace)
        .arch(Arch::Sm80)
        .watch(workspace.join("kernels"))
        .watch(workspace.join("device"))
        .watch(workspace.join("macros"))
        .watch(workspace.join("Cargo.lock"))
        .watch(workspace.join("rust-toolchain.toml"))
        .build()
        .unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(1);
        });
    for m in modules {
        println!(
            "cargo:rustc-env=WARPFORGE_PTX_{}={}",
            m.arch.name().to_uppercase(),
            m.path.display()
        );
    }
}
