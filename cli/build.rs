//! Records the commit the `warpforge` binary is built from, so that
//! `warpforge --version` and every bench record name it wherever the binary
//! runs (a GPU machine gets the binary, not the repository).
//!
//! `WARPFORGE_BUILD_COMMIT` is `git rev-parse HEAD` of the checkout, with
//! ` (modified)` when the sources the binary is built from differ from that
//! commit, or `unknown (not built from a git checkout)` (a packaged crate).
//! The script reruns when HEAD, the branch it points to or the index moves,
//! and when any of those sources changes (which rebuilds the binary anyway).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace folders the binary is compiled from (`Cargo.lock` and the
/// workspace manifest too): what `(modified)` is about. Docs and scripts are not.
const SOURCES: &[&str] = &[
    "Cargo.toml",
    "Cargo.lock",
    "builder",
    "cli/src",
    "cli/Cargo.toml",
    "device",
    "kernels",
    "kernels-hopper",
    "macros",
    "tools",
    "warpforge",
];

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Read when the script runs, not baked in when it compiles: cargo may reuse
    // a compiled script across checkouts that share a target directory.
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.parent().unwrap_or(&manifest).to_path_buf();
    let commit = match git(&root, &["rev-parse", "HEAD"]) {
        Some(head) if !head.is_empty() => {
            for what in ["HEAD", "index", "packed-refs"] {
                if let Some(p) = git(
                    &root,
                    &["rev-parse", "--path-format=absolute", "--git-path", what],
                ) {
                    println!("cargo:rerun-if-changed={p}");
                }
            }
            if let Some(branch) = git(&root, &["symbolic-ref", "-q", "HEAD"])
                && let Some(p) = git(
                    &root,
                    &["rev-parse", "--path-format=absolute", "--git-path", &branch],
                )
            {
                println!("cargo:rerun-if-changed={p}");
            }
            let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--"];
            status.extend(SOURCES);
            for s in SOURCES {
                println!("cargo:rerun-if-changed={}", root.join(s).display());
            }
            match git(&root, &status) {
                Some(changes) if changes.is_empty() => head,
                Some(_) => format!("{head} (modified)"),
                None => format!("{head} (status unknown)"),
            }
        }
        _ => "unknown (not built from a git checkout)".to_owned(),
    };
    println!("cargo:rustc-env=WARPFORGE_BUILD_COMMIT={commit}");
}
