//! The build step: compiles a kernels crate to one PTX module per GPU architecture.
//!
//! Used from a host crate's `build.rs`:
//!
//! ```no_run
//! use warpforge_builder::{Arch, PtxBuilder};
//! let modules = PtxBuilder::new("warpforge-kernels", "..")
//!     .arch(Arch::Sm80)
//!     .watch("../kernels/src")
//!     .build()
//!     .unwrap_or_else(|e| panic!("{e}"));
//! for m in &modules {
//!     println!("cargo:rustc-env=MY_PTX_{}={}", m.arch.name(), m.path.display());
//! }
//! ```
//!
//! # How
//!
//! A nested `cargo rustc` compiles the kernels crate for `nvptx64-nvidia-cuda`
//! with `-Zbuild-std=core`, as a `staticlib` (no linker runs), in the `ptx`
//! profile (fat LTO, one codegen unit), so `core`, the device library and the
//! kernels end up in one LLVM module that `--emit=asm` writes as one `.ptx`
//! file. This needs neither `llvm-bitcode-linker` nor a prebuilt nvptx
//! `rust-std`, only the nightly toolchain and its `rust-src` component.
//!
//! Each architecture builds in its own target directory under `OUT_DIR`, so
//! cargo's fingerprints make an unchanged kernels crate a no-op; and the build
//! script reruns only when a watched path changes, so editing host-only code
//! never recompiles PTX.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A GPU architecture the kernels are compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Ampere (`sm_80`): JIT-compiles on every GPU from Ampere up, Hopper included.
    Sm80,
    /// Hopper with its arch-specific features (`sm_90a`: wgmma, TMA), PTX ISA 8.0.
    Sm90a,
}

impl Arch {
    /// Every architecture warpforge knows.
    pub const ALL: [Arch; 2] = [Arch::Sm80, Arch::Sm90a];

    /// `sm_80`, `sm_90a`.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm80 => "sm_80",
            Arch::Sm90a => "sm_90a",
        }
    }

    /// The rustc flags that select this architecture.
    fn rustflags(self) -> &'static [&'static str] {
        match self {
            Arch::Sm80 => &["-Ctarget-cpu=sm_80"],
            Arch::Sm90a => &["-Ctarget-cpu=sm_90a", "-Ctarget-feature=+ptx80"],
        }
    }
}

/// Flags for every arch. LLVM's NVPTX backend fuses `a * b + c` into one
/// `fma` by default, which Rust's semantics forbid and which would make a
/// kernel round differently on the GPU than in the emulator; `fma` stays
/// available explicitly (`warpforge_device::num::fma_f32`).
const IEEE_FLAGS: &[&str] = &["-Cllvm-args=-nvptx-fma-level=0"];

/// A compiled PTX module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxModule {
    /// The architecture it targets.
    pub arch: Arch,
    /// The `.ptx` file.
    pub path: PathBuf,
}

/// Why the PTX build failed; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The toolchain is not a nightly (the NVPTX build needs `-Zbuild-std`).
    #[error(
        "warpforge compiles kernels with `-Zbuild-std`, which needs a nightly toolchain, but the \
         active rustc is `{version}`. Run `rustup toolchain install nightly-2026-05-20 -c rust-src`, \
         or build from the workspace whose rust-toolchain.toml selects it"
    )]
    NotNightly {
        /// `rustc -V` output.
        version: String,
    },
    /// `rust-src` is missing (needed to build `core` for nvptx64).
    #[error(
        "the `rust-src` component is missing from the toolchain at {sysroot} (it is needed to \
         build `core` for nvptx64). Run `rustup component add rust-src --toolchain {toolchain}`"
    )]
    MissingRustSrc {
        /// The toolchain's sysroot.
        sysroot: String,
        /// The toolchain name, for the fix.
        toolchain: String,
    },
    /// A tool could not be started.
    #[error("could not run `{command}`: {source}")]
    Spawn {
        /// What was run.
        command: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The nested cargo failed: a compile error in a kernel, usually.
    #[error("compiling `{package}` to PTX for {arch} failed:\n{stderr}")]
    Compile {
        /// The kernels package.
        package: String,
        /// The architecture.
        arch: &'static str,
        /// What cargo printed.
        stderr: String,
    },
    /// Cargo succeeded but wrote no PTX.
    #[error("cargo reported success but wrote no PTX at {0}")]
    NoOutput(PathBuf),
}

/// Configures and runs the PTX build of one kernels crate.
#[derive(Clone, Debug)]
pub struct PtxBuilder {
    package: String,
    workspace: PathBuf,
    archs: Vec<Arch>,
    watch: Vec<PathBuf>,
    out_dir: Option<PathBuf>,
}

impl PtxBuilder {
    /// Builds `package` from the cargo workspace (or package) rooted at `workspace`.
    pub fn new(package: impl Into<String>, workspace: impl Into<PathBuf>) -> Self {
        PtxBuilder {
            package: package.into(),
            workspace: workspace.into(),
            archs: Vec::new(),
            watch: Vec::new(),
            out_dir: None,
        }
    }

    /// Adds an architecture (default: `sm_80` only).
    pub fn arch(mut self, arch: Arch) -> Self {
        if !self.archs.contains(&arch) {
            self.archs.push(arch);
        }
        self
    }

    /// Reruns the build script when `path` (a file or directory) changes.
    pub fn watch(mut self, path: impl Into<PathBuf>) -> Self {
        self.watch.push(path.into());
        self
    }

    /// Where to put the PTX and the nested target directories (default: `$OUT_DIR`).
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// Runs the build; prints `cargo:rerun-if-changed` lines for the watched paths.
    pub fn build(&self) -> Result<Vec<PtxModule>, BuildError> {
        for path in &self.watch {
            println!("cargo:rerun-if-changed={}", path.display());
        }
        println!("cargo:rerun-if-env-changed=WARPFORGE_PTX_VERBOSE");
        let out_dir = self
            .out_dir
            .clone()
            .or_else(|| std::env::var_os("OUT_DIR").map(PathBuf::from))
            .unwrap_or_else(|| self.workspace.join("target").join("warpforge-ptx"));
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
        check_toolchain(&std::env::var_os("RUSTC").unwrap_or_else(|| OsString::from("rustc")))?;
        let archs = if self.archs.is_empty() {
            vec![Arch::Sm80]
        } else {
            self.archs.clone()
        };
        archs
            .into_iter()
            .map(|arch| self.build_arch(&cargo, &out_dir, arch))
            .collect()
    }

    fn build_arch(
        &self,
        cargo: &OsString,
        out_dir: &Path,
        arch: Arch,
    ) -> Result<PtxModule, BuildError> {
        let crate_name = self.package.replace('-', "_");
        let ptx = out_dir.join(format!("{crate_name}.{}.ptx", arch.name()));
        let target_dir = out_dir.join(format!("nvptx-{}", arch.name()));
        let mut cmd = Command::new(cargo);
        cmd.current_dir(&self.workspace)
            .args(["rustc", "--package", &self.package, "--profile", "ptx"])
            .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
            .args(["--crate-type", "staticlib", "--target-dir"])
            .arg(&target_dir)
            .arg("--")
            .arg(format!("--emit=asm={}", ptx.display()));
        // The outer build's flags and wrappers are for the host; they must not leak
        // into the nvptx build (and a changed RUSTFLAGS would defeat its caching).
        for var in [
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTC_WRAPPER",
            "RUSTC_WORKSPACE_WRAPPER",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET",
            "CARGO_MAKEFLAGS",
            "MAKEFLAGS",
            "MFLAGS",
        ] {
            cmd.env_remove(var);
        }
        let flags: Vec<&str> = arch.rustflags().iter().chain(IEEE_FLAGS).copied().collect();
        cmd.env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"));
        let output = cmd.output().map_err(|source| BuildError::Spawn {
            command: format!("{cmd:?}"),
            source,
        })?;
        if !output.status.success() {
            return Err(BuildError::Compile {
                package: self.package.clone(),
                arch: arch.name(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            });
        }
        if !ptx.is_file() {
            return Err(BuildError::NoOutput(ptx));
        }
        Ok(PtxModule { arch, path: ptx })
    }
}

/// Checks that `rustc` is a nightly with `rust-src`, so a missing piece is an
/// error that names the fix rather than an obscure `-Zbuild-std` failure.
pub fn check_toolchain(rustc: &std::ffi::OsStr) -> Result<(), BuildError> {
    let run = |args: &[&str]| -> Result<String, BuildError> {
        let out = Command::new(rustc)
            .args(args)
            .output()
            .map_err(|source| BuildError::Spawn {
                command: format!("{} {}", rustc.to_string_lossy(), args.join(" ")),
                source,
            })?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let version = run(&["-V"])?;
    if !version.contains("nightly") {
        return Err(BuildError::NotNightly { version });
    }
    let sysroot = run(&["--print", "sysroot"])?;
    let core_src = Path::new(&sysroot).join("lib/rustlib/src/rust/library/core/src/lib.rs");
    if !core_src.is_file() {
        let toolchain = Path::new(&sysroot)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "nightly".to_owned());
        return Err(BuildError::MissingRustSrc { sysroot, toolchain });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Writing a script and executing it while another test thread forks can fail
    /// with ETXTBSY (the child briefly holds the write descriptor); one at a time.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// A stand-in `rustc` that prints `version` for `-V` and `sysroot` for `--print sysroot`.
    fn fake_rustc(dir: &Path, version: &str, sysroot: &Path) -> PathBuf {
        let path = dir.join("rustc");
        let script = format!(
            "#!/bin/sh\nif [ \"$1\" = -V ]; then echo '{version}'; else echo '{}'; fi\n",
            sysroot.display()
        );
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("warpforge-builder-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_stable_toolchain_is_an_error_naming_the_nightly_to_install() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let dir = scratch("stable");
        let rustc = fake_rustc(&dir, "rustc 1.95.0 (59807616e 2026-04-14)", &dir);
        let e = check_toolchain(rustc.as_os_str()).unwrap_err();
        assert!(matches!(e, BuildError::NotNightly { .. }));
        assert!(
            e.to_string()
                .contains("rustup toolchain install nightly-2026-05-20"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_rust_src_is_an_error_naming_the_component() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let dir = scratch("nosrc");
        let sysroot = dir.join("nightly-2026-05-20-x86_64-unknown-linux-gnu");
        std::fs::create_dir_all(&sysroot).unwrap();
        let rustc = fake_rustc(
            &dir,
            "rustc 1.97.0-nightly (e50aa6fba 2026-05-19)",
            &sysroot,
        );
        let e = check_toolchain(rustc.as_os_str()).unwrap_err();
        assert!(
            e.to_string()
                .contains("rustup component add rust-src --toolchain nightly-2026-05-20-x86_64-unknown-linux-gnu"),
            "{e}"
        );
    }

    #[test]
    fn a_nightly_with_rust_src_passes() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let dir = scratch("ok");
        let core = dir.join("lib/rustlib/src/rust/library/core/src");
        std::fs::create_dir_all(&core).unwrap();
        std::fs::write(core.join("lib.rs"), "").unwrap();
        let rustc = fake_rustc(&dir, "rustc 1.97.0-nightly (e50aa6fba 2026-05-19)", &dir);
        check_toolchain(rustc.as_os_str()).unwrap();
    }
}
