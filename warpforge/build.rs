//! Compiles the kernel library's families to PTX, one module each (see
//! warpforge-builder), for the families this build's features select, all
//! at once on cargo's jobserver: `$OUT_DIR/warpforge-modules/<package>.rs`,
//! which `src/ptx.rs` embeds with `include_module!`, as a user's host crate
//! does. A family left out gets a module file too, `Module::left_out`, so
//! that its kernels' launches are `Error::FamilyNotBuilt` naming the feature.
//!
//! Each family is found through cargo (`cargo metadata`: the package that
//! this crate depends on, wherever it lives), never by its place in a
//! directory layout. Each is its own nested build with its own PTX cache
//! entry, keyed by its own sources: an edit to one family rebuilds that
//! family (and the families that build on it: the convolutions use both
//! GEMM main loops) and no other.
//!
//! `WARPFORGE_LINE_INFO=0 cargo build` gives a build without Rust source
//! lines in the PTX (they cost nothing in the SASS; see warpforge-builder).

use std::path::{Path, PathBuf};
use warpforge_builder::{Arch, PtxBuilder};

/// A family of the library: its package, the feature of this crate that
/// builds it, and its architecture.
struct Family {
    package: &'static str,
    feature: &'static str,
    arch: Arch,
}

/// Longest build first: the builds run in parallel and the first taken are
/// the first done.
const FAMILIES: [Family; 5] = [
    Family {
        package: "warpforge-kernels-gemm-tensor",
        feature: "gemm",
        arch: Arch::Sm80,
    },
    Family {
        package: "warpforge-kernels-conv",
        feature: "conv",
        arch: Arch::Sm80,
    },
    Family {
        package: "warpforge-kernels-gemm-simt",
        feature: "gemm",
        arch: Arch::Sm80,
    },
    Family {
        package: "warpforge-kernels-reduce",
        feature: "reduce",
        arch: Arch::Sm80,
    },
    // The Hopper kernels (wgmma, TMA): sm_90a only, so the sm_80 families'
    // builds neither grow nor wait for them.
    Family {
        package: "warpforge-kernels-hopper",
        feature: "hopper",
        arch: Arch::Sm90a,
    },
];

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let wanted: Vec<&Family> = FAMILIES.iter().filter(|f| feature_on(f.feature)).collect();
    let dirs = package_dirs(&manifest_dir, wanted.iter().map(|f| f.package));
    let builds: Vec<PtxBuilder> = wanted
        .iter()
        .map(|f| PtxBuilder::new(f.package, &dirs[f.package]).arch(f.arch))
        .collect();
    warpforge_builder::build_all_or_exit(&builds);
    for family in FAMILIES.iter().filter(|f| !feature_on(f.feature)) {
        let file = out_dir
            .join("warpforge-modules")
            .join(format!("{}.rs", family.package));
        let source = format!(
            "::warpforge::ptx::Module::left_out({:?}, {:?})\n",
            family.package, family.feature
        );
        std::fs::create_dir_all(file.parent().expect("a directory")).expect("OUT_DIR is writable");
        if std::fs::read_to_string(&file).ok().as_deref() != Some(&source) {
            std::fs::write(&file, source).expect("OUT_DIR is writable");
        }
    }
}

/// Whether this crate's feature `name` is on.
fn feature_on(name: &str) -> bool {
    let var = format!("CARGO_FEATURE_{}", name.to_uppercase().replace('-', "_"));
    std::env::var_os(var).is_some()
}

/// The directory of each package in `packages`, from `cargo metadata` of
/// this crate's dependency graph: a path dependency in a workspace, a
/// registry or git checkout, or a vendored copy alike.
fn package_dirs<'a>(
    manifest_dir: &Path,
    packages: impl Iterator<Item = &'a str>,
) -> std::collections::HashMap<&'a str, PathBuf> {
    let found = warpforge_builder::locate_packages(manifest_dir).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1);
    });
    packages
        .map(|name| match found.get(name) {
            Some(dir) => (name, dir.clone()),
            None => {
                eprintln!(
                    "error: `cargo metadata` in {} lists no package `{name}`, a dependency of \
                     warpforge; check that warpforge's Cargo.toml names it",
                    manifest_dir.display()
                );
                std::process::exit(1);
            }
        })
        .collect()
}
