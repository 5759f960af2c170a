//! The build step: compiles a kernels crate to one PTX module per GPU architecture.
//!
//! Used from a host crate's `build.rs`:
//!
//! ```no_run
//! // build.rs of a host crate whose workspace (at "..") has a `my-kernels` member
//! warpforge_builder::PtxBuilder::new("my-kernels", "..").build_or_exit();
//! ```
//!
//! and in the host crate, one line embeds what it built:
//!
//! ```ignore
//! static KERNELS: warpforge::ptx::Module = warpforge::include_module!("my-kernels");
//! ```
//!
//! # What `build` does
//!
//! 1. Checks the toolchain: a nightly with `rust-src` (else [`BuildError::NotNightly`]
//!    or [`BuildError::MissingRustSrc`], each naming the command that fixes it).
//! 2. Finds the package with `cargo metadata` (a name that is not a workspace
//!    member is [`BuildError::UnknownPackage`], listing the members) and prints
//!    `cargo:rerun-if-changed` for its `Cargo.toml` and `src/`, those of its path
//!    dependencies, and the workspace's `Cargo.toml` and `Cargo.lock`, plus every
//!    path given to [`PtxBuilder::watch`]. Host-only edits never recompile PTX.
//! 3. For each architecture, runs a nested `cargo rustc` that compiles the
//!    package for `nvptx64-nvidia-cuda` with `-Zbuild-std=core`, as a
//!    `staticlib` (no linker runs), with fat LTO and one codegen unit, so `core`,
//!    the device library and the kernels end up in one LLVM module that
//!    `--emit=asm` writes as one `.ptx` file. This needs neither
//!    `llvm-bitcode-linker` nor a prebuilt nvptx `rust-std`, only the nightly and
//!    its `rust-src`. Each architecture builds in its own target directory
//!    (in the PTX cache, below), so cargo's fingerprints make an unchanged
//!    kernels crate a no-op.
//!
//!    [`build_all`] builds several kernels packages at once, each one a
//!    separate module: worker threads take the packages in the order given
//!    (list the longest first). Worker 0 runs on the build script's own
//!    jobserver token; each other worker holds a token from cargo's
//!    jobserver while it builds, so the outer build's `-j` bounds them all
//!    (outside cargo, the number of cores does). A worker has its own nested
//!    target directories (cargo locks one per build), and when there is more
//!    than one worker, each nested cargo gets `-j1`: its crates (`core`, the
//!    device library, the kernels) compile one after the other anyway.
//! 4. Assembles machine code: when `ptxas` is found (`WARPFORGE_PTXAS`, `PATH`,
//!    `$CUDA_PATH/bin`, `/usr/local/cuda/bin`, or the `nvidia-cuda-nvcc` pip
//!    package: [`locate_ptxas`]), each PTX module goes through `ptxas -lineinfo`
//!    for the common real architectures ([`DEFAULT_CUBIN_SMS`]: sm_80, which
//!    8.6 and 8.9 GPUs run too, and sm_90; an `sm_90a` module for sm_90a), all
//!    runs in parallel, and the cubins are written beside the PTX, each also
//!    as one zstd frame (`.cubin.zst`, what the module embeds: a cubin is
//!    mostly zero padding). A GPU that can run one of them loads it instead
//!    of JIT-compiling the PTX. Without
//!    `ptxas` the build embeds PTX only and prints one `cargo:warning` saying
//!    how to get it; a failing `ptxas` is a warning too, never an error.
//!    [`PtxBuilder::cubins`] or `WARPFORGE_CUBINS=0` turns this off.
//! 5. Writes the module file that `warpforge::include_module!` includes (see
//!    [`PtxBuilder::module_file`]).
//!
//! Steps 3 and 4 are skipped when the PTX cache holds this build already:
//! its key hashes the sources watched in step 2 and every option, so debug
//! and release builds, `cargo test` and `cargo run -p …` (whose feature sets
//! differ, and with them the build script's `OUT_DIR`), clippy and rustdoc
//! all share one nested build and one set of `ptxas` runs. It lives in the
//! outer target directory (`target/warpforge-ptx/`, emptied by `cargo clean`)
//! or at `WARPFORGE_PTX_CACHE` (`0` turns it off); see the `cache` module's
//! source for its layout and key.
//!
//! # Any workspace
//!
//! The nested build's profile (`ptx`: `inherits = "release"`, `opt-level = 3`,
//! `lto = "fat"`, `codegen-units = 1`, `panic = "abort"`, no debug assertions or
//! overflow checks) is passed with `cargo --config`, so the kernels crate's
//! workspace needs no `[profile.ptx]`; where one exists, the keys set here win.
//! Only the nested build uses this profile: the host's own builds are untouched.
//!
//! # Errors
//!
//! A kernel that does not compile is [`BuildError::Compile`]: rustc's own
//! diagnostics (file, line, the message, the code), read from the nested cargo's
//! `--message-format=json`, then one line that says what failed. Cargo's progress
//! lines never appear. `WARPFORGE_PTX_VERBOSE=1` adds everything the nested cargo
//! printed, for debugging the builder itself.
//!
//! # Paths in the PTX
//!
//! The nested build trims paths (cargo's `trim-paths = ["macro", "object"]`), so
//! the PTX names no directory of the machine that built it, in panic locations
//! and in line info alike: files of the kernels crate's workspace become
//! workspace-relative (`./my-kernels/src/lib.rs`), `core` becomes
//! `/rustc/<commit>/library/core/…` (as in Rust's prebuilt standard library),
//! registry crates `index.crates.io-…/libm-0.2.16/…`, and path dependencies
//! outside the workspace `<name>-<version>/…`. Diagnostics keep real paths.
//!
//! # Line info
//!
//! [`PtxBuilder::line_info`] (on by default) compiles with
//! `-Cdebuginfo=line-directives-only`: LLVM's NVPTX mode that emits the
//! `.file`/`.loc` directives and no variable info, so `ptxas -lineinfo` maps
//! SASS to Rust source lines (`nvdisasm -g` shows `./kernels/src/elementwise.rs,
//! line 11` above the instructions) and Nsight Compute's source view and
//! `compute-sanitizer` show Rust lines. It costs nothing at run time: the PTX
//! instructions are the ones a build without it has, and once [`ptxas_ready`]
//! has dropped the debug labels LLVM still places between them (`$L__tmp…`,
//! which ptxas treats as block boundaries), ptxas emits identical SASS. On
//! warpforge's 150 library kernels (ptxas 13.0, sm_80 and sm_90, with and
//! without `-lineinfo`): the same registers, spills, stack and SASS
//! instructions for every kernel; only the PTX text grows (by about 37 %).
//! `-Cdebuginfo=line-tables-only` is not used: its debug labels and DWARF
//! sections are larger, and the labels changed registers in 26 kernels.
//! To see the mapping in Nsight Compute, add the kernels crate's workspace
//! root as a source folder: the `.file` paths are relative to it.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

mod cache;

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

    /// The compute capability it targets, as a number: 80 for `sm_80`, 90 for `sm_90a`.
    pub fn sm(self) -> u32 {
        match self {
            Arch::Sm80 => 80,
            Arch::Sm90a => 90,
        }
    }

    /// Whether its PTX uses arch-specific features (`sm_90a`), so it runs on
    /// exactly that architecture and assembles only for it.
    pub fn arch_specific(self) -> bool {
        matches!(self, Arch::Sm90a)
    }

    /// The rustc flags that select this architecture.
    ///
    /// `sm_90a` also builds with `-Cpanic=immediate-abort` (core included):
    /// every panic is a bare `trap`, with no call to a panic function. A
    /// kernel with *any* call gets each `wgmma` serialised by ptxas (C7509)
    /// and its `setmaxnreg` dropped (C7506), and the formatted panic paths
    /// are such calls (docs/hopper/ptx-semantics.md §3). A trapped sm_90a
    /// kernel therefore prints no message on the GPU; the emulator, which
    /// runs the same checks, gives it.
    fn rustflags(self) -> &'static [&'static str] {
        match self {
            Arch::Sm80 => &["-Ctarget-cpu=sm_80"],
            Arch::Sm90a => &[
                "-Ctarget-cpu=sm_90a",
                "-Ctarget-feature=+ptx80",
                "-Zunstable-options",
                "-Cpanic=immediate-abort",
            ],
        }
    }
}

/// Flags for every arch. LLVM's NVPTX backend fuses `a * b + c` into one
/// `fma` by default, which Rust's semantics forbid and which would make a
/// kernel round differently on the GPU than in the emulator; `fma` stays
/// available explicitly (`warpforge_device::num::fma_f32`).
const IEEE_FLAGS: &[&str] = &["-Cllvm-args=-nvptx-fma-level=0"];

/// The nested build's profile, as `cargo --config` arguments (see the crate docs).
fn profile_config(line_info: bool) -> Vec<String> {
    let debug = if line_info {
        "\"line-directives-only\""
    } else {
        "false"
    };
    [
        ("inherits", "\"release\""),
        ("opt-level", "3"),
        ("debug", debug),
        ("debug-assertions", "false"),
        ("overflow-checks", "false"),
        ("lto", "\"fat\""),
        ("panic", "\"abort\""),
        ("codegen-units", "1"),
        ("incremental", "false"),
        ("trim-paths", "[\"macro\", \"object\"]"),
        // Build scripts and proc macros of the nested build: the same either way,
        // so turning line info on or off does not rebuild them.
        ("build-override.debug", "false"),
    ]
    .iter()
    .map(|(key, value)| format!("profile.ptx.{key}={value}"))
    .collect()
}

/// A compiled PTX module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxModule {
    /// The architecture it targets.
    pub arch: Arch,
    /// The `.ptx` file.
    pub path: PathBuf,
    /// The machine code `ptxas` assembled from it, one file per real
    /// architecture (empty without `ptxas`, or with cubins turned off).
    pub cubins: Vec<CubinFile>,
}

/// A cubin: machine code (SASS) `ptxas -lineinfo` assembled from one PTX
/// module for one real architecture, which a GPU of that architecture (or,
/// for a plain `sm_XY`, of its major version and a newer minor one) loads
/// without JIT-compiling the PTX.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CubinFile {
    /// The architecture number: 86 for `sm_86`.
    pub sm: u32,
    /// `"a"` for an arch-specific cubin (`sm_90a`), else `""`.
    pub arch_suffix: &'static str,
    /// The `.cubin.zst` file the module embeds: the `.cubin` beside it, as
    /// one zstd frame.
    pub path: PathBuf,
}

impl CubinFile {
    /// `sm_86`, `sm_90a`.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.sm, self.arch_suffix)
    }
}

/// The real architectures cubins are assembled for by default: Ampere (A100,
/// A30: `sm_80`) and Hopper (H100, H200: `sm_90`). The `sm_80` cubin also runs
/// on the rest of the 8.x GPUs (RTX 30xx, A10, A40: 8.6; Ada's L4, L40, RTX
/// 40xx: 8.9), as CUDA runs a cubin on any GPU of its major version and a
/// minor one at or above its own: `warpforge::ptx::choose_image` picks it
/// there. Each architecture costs a `ptxas` run (about a minute of one core
/// for warpforge's library) and its bytes in every binary; [`PtxBuilder::cubin_sms`]
/// adds others (e.g. 86 and 89 for code tuned for them). Any other GPU
/// JIT-compiles the PTX.
pub const DEFAULT_CUBIN_SMS: &[u32] = &[80, 90];

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
    /// `cargo metadata` failed: the workspace's manifests do not parse, usually.
    #[error(
        "`cargo metadata` failed in {}, so the kernels crate's workspace could not be read; \
         fix the manifest error it names:\n{stderr}",
        workspace.display()
    )]
    Metadata {
        /// The directory it ran in.
        workspace: PathBuf,
        /// What cargo printed.
        stderr: String,
    },
    /// The kernels package is not a member of the workspace.
    #[error(
        "there is no package `{package}` in the workspace at {}; its members are: {}. \
         Pass the kernels crate's `[package] name` to `PtxBuilder::new`, with a directory \
         of the workspace that lists it in `[workspace] members`",
        workspace.display(),
        members.join(", ")
    )]
    UnknownPackage {
        /// The name asked for.
        package: String,
        /// The workspace root.
        workspace: PathBuf,
        /// The names of its members.
        members: Vec<String>,
    },
    /// The kernels crate (or a dependency) does not compile for nvptx64.
    #[error(
        "{diagnostics}\nerror: `{package}` does not compile for the GPU (nvptx64, {arch}): {errors} \
         error{s} above (file paths relative to {workspace}); fix the code at the file:line \
         each one names.{hint}",
        s = if *errors == 1 { "" } else { "s" },
        workspace = workspace.display(),
        hint = hint.as_deref().map(|h| format!(" {h}")).unwrap_or_default()
    )]
    Compile {
        /// The kernels package.
        package: String,
        /// The architecture.
        arch: &'static str,
        /// The workspace root, which diagnostic paths are relative to.
        workspace: PathBuf,
        /// How many errors rustc reported.
        errors: usize,
        /// rustc's rendered diagnostics, one after the other.
        diagnostics: String,
        /// A fix for a mistake every kernels crate can make, when one was recognised.
        hint: Option<String>,
    },
    /// The nested cargo failed before rustc reported anything.
    #[error(
        "building `{package}` for the GPU (nvptx64, {arch}) failed before it compiled; \
         cargo said:\n{message}\nFix what it names (run with WARPFORGE_PTX_VERBOSE=1 to see \
         all of the nested cargo's output)"
    )]
    Cargo {
        /// The kernels package.
        package: String,
        /// The architecture.
        arch: &'static str,
        /// Cargo's error lines.
        message: String,
    },
    /// Cargo succeeded but wrote no PTX.
    #[error(
        "cargo reported success but wrote no PTX at {}; delete {} to force a rebuild",
        ptx.display(),
        target_dir.display()
    )]
    NoOutput {
        /// Where rustc should have written it.
        ptx: PathBuf,
        /// The nested target directory.
        target_dir: PathBuf,
    },
    /// Reading or writing a file failed.
    #[error("could not {action} {}: {source}", path.display())]
    Io {
        /// `read`, `write`, `create`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `include_str!` needs a UTF-8 path.
    #[error(
        "the PTX path {} is not UTF-8, so it cannot be embedded with include_str!; \
         build from a directory whose path is UTF-8",
        .0.display()
    )]
    NonUtf8Path(PathBuf),
}

/// Configures and runs the PTX build of one kernels crate.
#[derive(Clone, Debug)]
pub struct PtxBuilder {
    package: String,
    workspace: PathBuf,
    archs: Vec<Arch>,
    watch: Vec<PathBuf>,
    out_dir: Option<PathBuf>,
    line_info: bool,
    cubins: bool,
    cubin_sms: Vec<u32>,
}

impl PtxBuilder {
    /// Builds `package`, a member of the cargo workspace that contains `workspace`
    /// (its root or any directory in it; a relative path is relative to the
    /// build script's directory, i.e. the host crate's).
    pub fn new(package: impl Into<String>, workspace: impl Into<PathBuf>) -> Self {
        PtxBuilder {
            package: package.into(),
            workspace: workspace.into(),
            archs: Vec::new(),
            watch: Vec::new(),
            out_dir: None,
            line_info: true,
            cubins: true,
            cubin_sms: DEFAULT_CUBIN_SMS.to_vec(),
        }
    }

    /// Also assembles each PTX module with `ptxas -lineinfo` into cubins for
    /// the common real architectures and embeds them beside the PTX (default:
    /// on; see [`PtxBuilder::cubin_sms`]). A GPU that can run one of them
    /// loads its machine code at once instead of having
    /// the driver JIT-compile the PTX. Without `ptxas` the build embeds PTX
    /// only and says so in one cargo warning. The environment variable
    /// `WARPFORGE_CUBINS=0` (or `=1`) overrides this for every kernels crate
    /// a build compiles.
    pub fn cubins(mut self, on: bool) -> Self {
        self.cubins = on;
        self
    }

    /// The real architectures to assemble cubins for, as numbers (`[80, 90]`,
    /// the default: [`DEFAULT_CUBIN_SMS`]). Each is assembled from
    /// the PTX module a GPU of that compute capability loads; an arch-specific
    /// module (`sm_90a`) is always assembled for its own architecture only.
    pub fn cubin_sms(mut self, sms: impl IntoIterator<Item = u32>) -> Self {
        self.cubin_sms = sms.into_iter().collect();
        self
    }

    /// Adds an architecture (default: `sm_80` only).
    pub fn arch(mut self, arch: Arch) -> Self {
        if !self.archs.contains(&arch) {
            self.archs.push(arch);
        }
        self
    }

    /// Also reruns the build script when `path` (a file or directory) changes.
    /// The kernels crate and its path dependencies are watched without this.
    pub fn watch(mut self, path: impl Into<PathBuf>) -> Self {
        self.watch.push(path.into());
        self
    }

    /// Where to put the PTX and cubins the module embeds (default: `$OUT_DIR`);
    /// the nested target directories go there too when the PTX cache is off.
    /// The module file goes to `$OUT_DIR` regardless (see [`PtxBuilder::module_file`]).
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// Keeps Rust source lines in the PTX (default: on); see the crate docs
    /// for what it costs (nothing in the machine code). The environment
    /// variable `WARPFORGE_LINE_INFO=0` (or `=1`) overrides this for every
    /// kernels crate a build compiles.
    pub fn line_info(mut self, on: bool) -> Self {
        self.line_info = on;
        self
    }

    /// The module file [`PtxBuilder::build`] writes:
    /// `$OUT_DIR/warpforge-modules/<package>.rs` in a build script (outside one,
    /// under the output directory). It holds one expression,
    /// `::warpforge::ptx::Module::new("<package>", &[::warpforge::ptx::PtxModule {
    /// arch: "sm_80", source: include_str!("<the .ptx>") }, …])`, one entry per
    /// architecture, which `warpforge::include_module!("<package>")` includes;
    /// with cubins, `Module::with_cubins("<package>", &[…], &[::warpforge::ptx::Cubin
    /// { variant: "sm_80", sm: 86, arch_suffix: "", bytes: include_bytes!("<the .cubin.zst>") }, …])`.
    pub fn module_file(&self) -> PathBuf {
        let dir = std::env::var_os("OUT_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.output_dir());
        dir.join("warpforge-modules")
            .join(format!("{}.rs", self.package))
    }

    /// [`PtxBuilder::line_info`], unless `WARPFORGE_LINE_INFO` says otherwise.
    fn line_info_wanted(&self, lines: &mut Vec<String>) -> bool {
        match std::env::var("WARPFORGE_LINE_INFO").as_deref() {
            Ok("1" | "true" | "yes" | "on") => true,
            Ok("0" | "false" | "no" | "off") => false,
            Ok(other) => {
                lines.push(format!(
                    "cargo:warning=WARPFORGE_LINE_INFO={other:?} is neither 1 nor 0; \
                     building with line_info({})",
                    self.line_info
                ));
                self.line_info
            }
            Err(_) => self.line_info,
        }
    }

    /// [`PtxBuilder::cubins`], unless `WARPFORGE_CUBINS` says otherwise.
    fn cubins_wanted(&self, lines: &mut Vec<String>) -> bool {
        match std::env::var("WARPFORGE_CUBINS").as_deref() {
            Ok("1" | "true" | "yes" | "on") => true,
            Ok("0" | "false" | "no" | "off") => false,
            Ok(other) => {
                lines.push(format!(
                    "cargo:warning=WARPFORGE_CUBINS={other:?} is neither 1 nor 0; \
                     building with cubins({})",
                    self.cubins
                ));
                self.cubins
            }
            Err(_) => self.cubins,
        }
    }

    fn output_dir(&self) -> PathBuf {
        self.out_dir
            .clone()
            .or_else(|| std::env::var_os("OUT_DIR").map(PathBuf::from))
            .unwrap_or_else(|| self.workspace.join("target").join("warpforge-ptx"))
    }

    /// Compiles the PTX for every architecture and writes the module file
    /// ([`PtxBuilder::module_file`]); then prints the `cargo:rerun-if-changed`
    /// lines. A failed build prints none: cargo reruns a failed build script
    /// anyway, and its error report then shows only the error. The same as
    /// [`build_all`] with this one package.
    pub fn build(&self) -> Result<Vec<PtxModule>, BuildError> {
        let mut built = build_all(std::slice::from_ref(self))?;
        Ok(built.pop().unwrap_or_default())
    }

    /// The whole build of this package on `worker`: the lines it prints for
    /// cargo (warnings; after a success, the `rerun-if` lines), and its modules.
    fn build_on(&self, cargo: &OsStr, worker: Worker) -> Built {
        let mut lines = Vec::new();
        let result = self.build_recording(cargo, worker, &mut lines);
        Built { lines, result }
    }

    /// [`PtxBuilder::build_on`], recording what it prints in `lines`.
    fn build_recording(
        &self,
        cargo: &OsStr,
        worker: Worker,
        lines: &mut Vec<String>,
    ) -> Result<Vec<PtxModule>, BuildError> {
        let (workspace_root, watched) = self.watched(cargo)?;
        let modules = self.build_modules(cargo, &workspace_root, &watched, worker, lines)?;
        for var in [
            "WARPFORGE_PTX_VERBOSE",
            "WARPFORGE_LINE_INFO",
            "WARPFORGE_CUBINS",
            "WARPFORGE_PTXAS",
            "WARPFORGE_PTX_CACHE",
            "CUDA_PATH",
        ] {
            lines.push(format!("cargo:rerun-if-env-changed={var}"));
        }
        for path in &watched {
            lines.push(format!("cargo:rerun-if-changed={}", path.display()));
        }
        Ok(modules)
    }

    /// The workspace's root and the files this build watches (step 2 of the
    /// crate docs): what the cache key hashes.
    fn watched(&self, cargo: &OsStr) -> Result<(PathBuf, Vec<PathBuf>), BuildError> {
        let workspace = Workspace::read(cargo, &self.workspace)?;
        let member = workspace.member(&self.package)?;
        let watched = member.watch.into_iter().chain(self.watch.clone()).collect();
        Ok((workspace.root, watched))
    }

    fn build_modules(
        &self,
        cargo: &OsStr,
        workspace_root: &Path,
        watched: &[PathBuf],
        worker: Worker,
        lines: &mut Vec<String>,
    ) -> Result<Vec<PtxModule>, BuildError> {
        let out_dir = std::path::absolute(self.output_dir()).map_err(|source| BuildError::Io {
            action: "resolve",
            path: self.output_dir(),
            source,
        })?;
        let archs = if self.archs.is_empty() {
            vec![Arch::Sm80]
        } else {
            self.archs.clone()
        };
        let line_info = self.line_info_wanted(lines);
        // Without ptxas there is nothing to assemble: said every build, hit or miss.
        let ptxas = self.cubins_wanted(lines).then(locate_ptxas);
        if let Some(Err(searched)) = &ptxas {
            lines.push(format!(
                "cargo:warning={}",
                no_ptxas_warning(&self.package, searched)
            ));
        }
        let ptxas = ptxas.and_then(Result::ok);
        let cache = cache::Cache::locate(&self.package, &out_dir);
        let key = match &cache {
            Some(_) => Some(self.cache_key(
                workspace_root,
                watched,
                &archs,
                line_info,
                ptxas.as_deref(),
            )?),
            None => None,
        };
        let hit = cache
            .as_ref()
            .zip(key.as_deref())
            .and_then(|(cache, key)| cache.fetch(key, &out_dir));
        let (modules, warnings) = match hit {
            Some(entry) => (entry.modules, entry.warnings),
            None => {
                let nested_root = self.nested_workspace(workspace_root, &out_dir)?;
                let mut modules = archs
                    .into_iter()
                    .map(|arch| {
                        let target_dir =
                            nested_target_dir(cache.as_ref(), &out_dir, arch, worker.index);
                        self.build_arch(
                            cargo,
                            &nested_root,
                            &out_dir,
                            &target_dir,
                            arch,
                            line_info,
                            worker.one_job,
                        )
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let warnings = match &ptxas {
                    Some(ptxas) => {
                        assemble_cubins(ptxas, &self.package, &mut modules, &self.cubin_sms)
                    }
                    None => Vec::new(),
                };
                if let (Some(cache), Some(key)) = (&cache, &key) {
                    // A cache that cannot be written costs only time: said, not fatal.
                    if let Err(e) = cache.store(key, &modules, &warnings) {
                        lines.push(format!("cargo:warning={e}"));
                    }
                }
                (modules, warnings)
            }
        };
        for w in warnings {
            lines.push(format!("cargo:warning={w}"));
        }
        let module_file = std::path::absolute(self.module_file()).unwrap_or(self.module_file());
        write_if_changed(&module_file, &module_source(&self.package, &modules)?)?;
        Ok(modules)
    }

    /// Where the nested cargo runs: the kernels crate's own workspace
    /// (`workspace_root`), except for a package that cargo unpacked — a
    /// registry or git checkout (`.cargo-ok`) or a vendored copy
    /// (`.cargo-checksum.json`), as every kernel family is when warpforge
    /// comes from a registry. Such a directory is cargo's, not the build's
    /// (a nested build there would write its `Cargo.lock` into it, and may
    /// not be able to), so the nested cargo runs in a workspace of its own
    /// under `out_dir` that depends on the package by path; its registry
    /// dependencies resolve through the same sources and configuration as
    /// the outer build's.
    fn nested_workspace(
        &self,
        workspace_root: &Path,
        out_dir: &Path,
    ) -> Result<PathBuf, BuildError> {
        let unpacked = [".cargo-ok", ".cargo-checksum.json"]
            .iter()
            .any(|marker| workspace_root.join(marker).exists());
        if !unpacked {
            return Ok(workspace_root.to_path_buf());
        }
        let dir = out_dir.join("nested-workspace").join(&self.package);
        let manifest = format!(
            "# Written by warpforge-builder: the nested PTX build of `{package}`, a package\n\
             # cargo unpacked (never built in place).\n\
             [package]\nname = \"warpforge-nested-build\"\nversion = \"0.0.0\"\n\
             edition = \"2024\"\npublish = false\n\n[lib]\npath = \"lib.rs\"\n\n\
             [dependencies]\n{package:?} = {{ path = {path:?} }}\n\n[workspace]\n",
            package = self.package,
            path = workspace_root.display().to_string(),
        );
        write_if_changed(&dir.join("Cargo.toml"), &manifest)?;
        write_if_changed(&dir.join("lib.rs"), "#![no_std]\n")?;
        Ok(dir)
    }

    /// The PTX cache's key for this build (see the `cache` module): everything that
    /// decides the PTX and the cubins.
    fn cache_key(
        &self,
        workspace_root: &Path,
        watched: &[PathBuf],
        archs: &[Arch],
        line_info: bool,
        ptxas: Option<&Path>,
    ) -> Result<String, BuildError> {
        let mut key = cache::Key::new(&self.package);
        for arch in archs {
            key.text("arch", arch.name());
            for flag in arch.rustflags().iter().chain(IEEE_FLAGS) {
                key.text("rustflag", flag);
            }
        }
        for config in profile_config(line_info) {
            key.text("profile", &config);
        }
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| OsString::from("rustc"));
        let version =
            Command::new(&rustc)
                .arg("-vV")
                .output()
                .map_err(|source| BuildError::Spawn {
                    command: format!("{} -vV", rustc.to_string_lossy()),
                    source,
                })?;
        key.bytes("rustc", &version.stdout);
        match ptxas {
            Some(ptxas) => {
                let version = Command::new(ptxas)
                    .arg("--version")
                    .output()
                    .map_err(|source| BuildError::Spawn {
                        command: format!("{} --version", ptxas.display()),
                        source,
                    })?;
                key.bytes("ptxas", &version.stdout);
                for sm in &self.cubin_sms {
                    key.text("cubin", &sm.to_string());
                }
            }
            None => key.text("ptxas", "none"),
        }
        let config = workspace_root.join(".cargo").join("config.toml");
        for path in watched.iter().chain([&config]) {
            key.tree(workspace_root, path)
                .map_err(|source| BuildError::Io {
                    action: "read",
                    path: path.clone(),
                    source,
                })?;
        }
        Ok(key.finish())
    }

    /// [`PtxBuilder::build`] for a `build.rs`: on failure prints the error (rustc's
    /// diagnostics, then what failed and the fix) and exits with status 1.
    pub fn build_or_exit(&self) -> Vec<PtxModule> {
        self.build().unwrap_or_else(|e| exit_with(e))
    }

    /// Runs the nested cargo for `arch` in `target_dir` (with `-j1` when
    /// `one_job`) and writes the PTX, made ready for ptxas, to `out_dir`.
    #[allow(clippy::too_many_arguments)]
    fn build_arch(
        &self,
        cargo: &OsStr,
        workspace: &Path,
        out_dir: &Path,
        target_dir: &Path,
        arch: Arch,
        line_info: bool,
        one_job: bool,
    ) -> Result<PtxModule, BuildError> {
        let crate_name = self.package.replace('-', "_");
        let ptx = out_dir.join(format!("{crate_name}.{}.ptx", arch.name()));
        // rustc writes here; `ptx` is this, made ready for ptxas (see `ptxas_ready`).
        let raw = target_dir.join(format!("{crate_name}.{}.rustc.ptx", arch.name()));
        let mut cmd =
            self.arch_command(cargo, workspace, target_dir, &raw, arch, line_info, one_job);
        let output = cmd.output().map_err(|source| BuildError::Spawn {
            command: format!("{cmd:?}"),
            source,
        })?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        if std::env::var_os("WARPFORGE_PTX_VERBOSE").is_some_and(|v| v != "0") {
            eprintln!("warpforge-builder: {cmd:?}\n{stderr}");
        }
        if !output.status.success() {
            return Err(self.failure(arch, workspace, &stdout, &stderr));
        }
        let source = std::fs::read_to_string(&raw).map_err(|_| BuildError::NoOutput {
            ptx: raw.clone(),
            target_dir: target_dir.to_path_buf(),
        })?;
        write_if_changed(&ptx, &ptxas_ready(&source))?;
        Ok(PtxModule {
            arch,
            path: ptx,
            cubins: Vec::new(),
        })
    }

    /// The nested `cargo rustc` that writes `arch`'s PTX to `raw`, building in
    /// `target_dir`; one job at a time when `one_job` (other workers run beside it).
    #[allow(clippy::too_many_arguments)]
    fn arch_command(
        &self,
        cargo: &OsStr,
        workspace: &Path,
        target_dir: &Path,
        raw: &Path,
        arch: Arch,
        line_info: bool,
        one_job: bool,
    ) -> Command {
        let mut cmd = nested_cargo(cargo, workspace);
        cmd.args(["rustc", "--package", &self.package, "--profile", "ptx"])
            .args(["-Zbuild-std=core", "-Ztrim-paths"]);
        if one_job {
            cmd.arg("-j1");
        }
        for config in profile_config(line_info) {
            cmd.arg("--config").arg(config);
        }
        // Only the kernels crate's own features: a workspace that unifies
        // features across its members (`resolver.feature-unification =
        // "workspace"`, as warpforge's does for its host builds) would pull
        // host-only dependencies (std, getrandom, …) into the nvptx build.
        cmd.args(["--config", "resolver.feature-unification=\"selected\""]);
        cmd.args([
            "--target",
            "nvptx64-nvidia-cuda",
            "--crate-type",
            "staticlib",
        ])
        .args(["--message-format=json", "--target-dir"])
        .arg(target_dir)
        .arg("--")
        .arg(format!("--emit=asm={}", raw.display()));
        let flags: Vec<&str> = arch.rustflags().iter().chain(IEEE_FLAGS).copied().collect();
        cmd.env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"));
        cmd
    }

    /// The error for a failed nested build: rustc's diagnostics when it reported
    /// any, else cargo's own error lines.
    fn failure(&self, arch: Arch, workspace: &Path, stdout: &str, stderr: &str) -> BuildError {
        let diagnostics = compiler_errors(stdout);
        if diagnostics.is_empty() {
            let mut message = cargo_errors(stderr);
            if let Some(hint) = build_std_source_hint(&message) {
                message.push('\n');
                message.push_str(hint);
            }
            return BuildError::Cargo {
                package: self.package.clone(),
                arch: arch.name(),
                message,
            };
        }
        let hint = hint_for(&diagnostics);
        BuildError::Compile {
            package: self.package.clone(),
            arch: arch.name(),
            workspace: workspace.to_path_buf(),
            errors: diagnostics.len(),
            diagnostics: diagnostics.concat().trim_end().to_owned(),
            hint,
        }
    }
}

/// Builds several kernels packages at once, each as [`PtxBuilder::build`]
/// would build it alone, and returns their modules in the order given.
///
/// The packages are taken by worker threads from a queue in the order given,
/// so list the longest build first. Worker 0 runs on the build script's own
/// jobserver token; each other worker takes a token from cargo's jobserver
/// before it starts a package and gives it back after, so the outer build's
/// `-j` (or, outside cargo, the number of cores) bounds the packages
/// building at once; there are never more workers than packages. Each worker
/// builds in its own nested target directories (`nvptx-<arch>` for worker 0,
/// `nvptx-<arch>-w<N>` for worker N), and when there is more than one
/// worker, each nested cargo gets `-j1`.
///
/// Once a build fails, no further package starts. The error returned is the
/// first in the order given, once every started build has finished; every
/// build that succeeded still prints its `cargo:rerun-if-changed` lines.
/// What each build prints (warnings, then those lines) comes out package by
/// package, in the order given.
///
/// ```no_run
/// // build.rs of a host crate whose workspace (at "..") has two kernels packages
/// use warpforge_builder::{Arch, PtxBuilder};
///
/// let modules = warpforge_builder::build_all_or_exit(&[
///     // The longest build first.
///     PtxBuilder::new("my-gemm-kernels", "..").arch(Arch::Sm80).arch(Arch::Sm90a),
///     PtxBuilder::new("my-reduce-kernels", ".."),
/// ]);
/// assert_eq!(modules.len(), 2); // each package's modules, in the order given
/// ```
pub fn build_all(builders: &[PtxBuilder]) -> Result<Vec<Vec<PtxModule>>, BuildError> {
    if builders.is_empty() {
        return Ok(Vec::new());
    }
    // One package needs no token but the build script's own.
    let client = if builders.len() > 1 {
        outer_jobserver()
    } else {
        None
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    check_toolchain(&std::env::var_os("RUSTC").unwrap_or_else(|| OsString::from("rustc")))?;
    let cores = || std::thread::available_parallelism().map_or(1, usize::from);
    let tokens = match client {
        // Cargo's `-j`, which its jobserver's tokens (ours included) add up to.
        Some(_) => std::env::var("NUM_JOBS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(cores),
        None => cores(),
    };
    let mut workers = worker_count(builders.len(), tokens);
    let jobserver = match client {
        Some(client) if workers > 1 => {
            let tokens = Tokens::new(client);
            if tokens.is_none() {
                // Without a way to take tokens, only the build script's own.
                workers = 1;
            }
            tokens
        }
        _ => None,
    };
    let one_job = workers > 1;
    let built = run_queue(
        builders.len(),
        workers,
        jobserver.as_ref(),
        |i, index| builders[i].build_on(&cargo, Worker { index, one_job }),
        |built: &Built| built.result.is_err(),
    );
    drop(jobserver);
    let mut modules = Vec::with_capacity(builders.len());
    let mut first_error = None;
    for Built { lines, result } in built.into_iter().flatten() {
        for line in lines {
            println!("{line}");
        }
        match result {
            Ok(m) => modules.push(m),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(modules),
    }
}

/// [`build_all`] for a `build.rs`: on failure prints the first error (as
/// [`PtxBuilder::build_or_exit`] does) and exits with status 1.
pub fn build_all_or_exit(builders: &[PtxBuilder]) -> Vec<Vec<PtxModule>> {
    build_all(builders).unwrap_or_else(|e| exit_with(e))
}

/// Prints `e` for cargo's error report and exits with status 1.
fn exit_with(e: BuildError) -> ! {
    match e {
        // Already rustc-style: diagnostics, then an `error:` line.
        BuildError::Compile { .. } => eprintln!("{e}"),
        _ => eprintln!("error: {e}"),
    }
    std::process::exit(1);
}

/// The worker a package builds on: it decides the nested target directories
/// (see [`nested_target_dir`]) and whether the nested cargo runs one job at a
/// time (other workers run beside it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Worker {
    index: usize,
    one_job: bool,
}

/// One package's build: what it prints for cargo, and its outcome.
struct Built {
    lines: Vec<String>,
    result: Result<Vec<PtxModule>, BuildError>,
}

/// How many workers build `builds` packages when `tokens` jobs may run at
/// once (cargo's `-j`, or the number of cores): never more than either, and
/// at least one while there is a package.
fn worker_count(builds: usize, tokens: usize) -> usize {
    builds.min(tokens.max(1))
}

/// The nested cargo's target directory for `arch` on worker `worker`: in the
/// PTX cache when there is one, else under `out_dir`; see
/// [`cache::nested_dir_name`].
fn nested_target_dir(
    cache: Option<&cache::Cache>,
    out_dir: &Path,
    arch: Arch,
    worker: usize,
) -> PathBuf {
    match cache {
        Some(cache) => cache.nested_target_dir(arch, worker),
        None => out_dir.join(cache::nested_dir_name(arch, worker)),
    }
}

/// The jobserver of the cargo (or make) that runs this build script, if it
/// passed one; connected to once per process.
fn outer_jobserver() -> Option<&'static jobserver::Client> {
    static CLIENT: std::sync::OnceLock<Option<jobserver::Client>> = std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            // SAFETY: `from_env_ext` reads and writes the descriptors that
            // `CARGO_MAKEFLAGS` (or `MAKEFLAGS`, `MFLAGS`) names as the
            // jobserver's pipe, which is wrong only if those numbers now
            // belong to another file of this process. Cargo passes the
            // jobserver's descriptors, open, to every build script it runs,
            // and nothing here closes them, so no other file can take their
            // numbers. A parent that names descriptors it did not pass on
            // (make without `+`) leaves numbers that are closed when this
            // runs: it runs once per process (the `OnceLock`), first thing in
            // `build_all`, when this crate holds no descriptor of its own, and
            // `check_pipe` refuses a closed descriptor or one that is not a
            // pipe (no jobserver then). The descriptors are duplicated, not
            // owned, so the client never closes them.
            unsafe { jobserver::Client::from_env_ext(true) }.client.ok()
        })
        .as_ref()
}

/// Tokens of the outer jobserver for workers 1…: a helper thread acquires
/// them on request, so a worker can stop waiting once no package is left
/// (a blocking `acquire` could keep the build script waiting for another
/// job's token after its last build). Dropping it stops the helper; a token
/// that arrives after its worker gave up is released when dropped.
struct Tokens {
    helper: jobserver::HelperThread,
    received: std::sync::Mutex<std::sync::mpsc::Receiver<std::io::Result<jobserver::Acquired>>>,
}

impl Tokens {
    fn new(client: &jobserver::Client) -> Option<Tokens> {
        let (send, received) = std::sync::mpsc::channel();
        let helper = client
            .clone()
            .into_helper_thread(move |token| {
                // A token nobody waits for any more is released as it drops.
                let _ = send.send(token);
            })
            .ok()?;
        Some(Tokens {
            helper,
            received: std::sync::Mutex::new(received),
        })
    }

    /// A token, or `None` once `give_up()` says none is needed (or the
    /// jobserver failed).
    fn acquire(&self, give_up: impl Fn() -> bool) -> Option<jobserver::Acquired> {
        use std::sync::mpsc::RecvTimeoutError;
        self.helper.request_token();
        let received = self
            .received
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            if give_up() {
                return None;
            }
            match received.recv_timeout(std::time::Duration::from_millis(50)) {
                Ok(Ok(token)) => return Some(token),
                Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => return None,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

/// Runs `job(i, worker)` for each `i` in `0..jobs`, started in that order,
/// on `workers` workers (worker 0 on this thread): each takes the next job
/// when it is free, and workers other than 0 first take a token from
/// `tokens` (when given), which they give back after the job. Once a job is
/// `failed`, no further job starts. Returns every job's result, `None` for
/// one that never started, after every started job has finished.
fn run_queue<R: Send>(
    jobs: usize,
    workers: usize,
    tokens: Option<&Tokens>,
    job: impl Fn(usize, usize) -> R + Sync,
    failed: impl Fn(&R) -> bool + Sync,
) -> Vec<Option<R>> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let nothing_left = || stop.load(SeqCst) || next.load(SeqCst) >= jobs;
    let work = |worker: usize| {
        let mut done = Vec::new();
        loop {
            let token = match tokens {
                Some(tokens) if worker > 0 => match tokens.acquire(nothing_left) {
                    Some(token) => Some(token),
                    None => break,
                },
                _ => None,
            };
            if stop.load(SeqCst) {
                break;
            }
            let i = next.fetch_add(1, SeqCst);
            if i >= jobs {
                break;
            }
            let result = job(i, worker);
            if failed(&result) {
                stop.store(true, SeqCst);
            }
            done.push((i, result));
            drop(token);
        }
        done
    };
    let work = &work;
    let mut results: Vec<Option<R>> = (0..jobs).map(|_| None).collect();
    std::thread::scope(|scope| {
        let others: Vec<_> = (1..workers.min(jobs))
            .map(|worker| scope.spawn(move || work(worker)))
            .collect();
        let mut done = work(0);
        for other in others {
            done.extend(
                other
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            );
        }
        for (i, result) in done {
            results[i] = Some(result);
        }
    });
    results
}

/// A cargo command for the nested build, run in `dir`. The outer build's flags
/// and wrappers are for the host; they must not leak into the nvptx build (and
/// a changed RUSTFLAGS would defeat its caching).
fn nested_cargo(cargo: &OsStr, dir: &Path) -> Command {
    let mut cmd = Command::new(cargo);
    cmd.current_dir(dir);
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
    cmd
}

/// A hint for a nested build that could not resolve the standard library's
/// own registry crates (`-Zbuild-std` resolves rust-src's `library/`
/// workspace): what an offline or vendored source lacks.
fn build_std_source_hint(cargo_message: &str) -> Option<&'static str> {
    (cargo_message.contains("no matching package")
        && cargo_message.contains("rustlib/src/rust/library"))
    .then_some(
        "hint: -Zbuild-std builds `core` from rust-src, whose workspace needs a few registry \
         crates of its own; a vendored or offline source must hold them too: \
         `cargo vendor --sync \"$(rustc --print sysroot)/lib/rustlib/src/rust/library/Cargo.toml\"` \
         (docs/build-times.md, \"Outside this repository\")",
    )
}

/// The rendered text of every error rustc reported in cargo's JSON messages,
/// without the closing "aborting due to N previous errors".
fn compiler_errors(json_lines: &str) -> Vec<String> {
    json_lines
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-message")
        .filter_map(|msg| {
            let m = &msg["message"];
            let level = m["level"].as_str()?;
            let text = m["message"].as_str().unwrap_or_default();
            let is_error = level == "error" || level.starts_with("error:");
            let summary = m["spans"].as_array().is_none_or(Vec::is_empty)
                && text.starts_with("aborting due to");
            (is_error && !summary).then(|| m["rendered"].as_str().unwrap_or(text).to_owned())
        })
        .collect()
}

/// Cargo's error lines, without its progress lines.
fn cargo_errors(stderr: &str) -> String {
    const PROGRESS: &[&str] = &[
        "Compiling",
        "Checking",
        "Downloading",
        "Downloaded",
        "Updating",
        "Locking",
        "Adding",
        "Blocking",
        "Finished",
        "Fresh",
        "Running",
    ];
    let kept: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            let word = l.split_whitespace().next().unwrap_or_default();
            !PROGRESS.contains(&word) && !l.starts_with("warning: build failed")
        })
        .collect();
    kept.join("\n").trim().to_owned()
}

/// A fix for the mistakes every new kernels crate can make, recognised in rustc's messages.
fn hint_for(diagnostics: &[String]) -> Option<String> {
    let any = |needle: &str| diagnostics.iter().any(|d| d.contains(needle));
    if any("can't find crate for `std`") {
        Some(
            "A kernels crate must not use `std` on the GPU: start its lib.rs with \
             `#![cfg_attr(target_arch = \"nvptx64\", no_std)]` (and use `core` in kernels)."
                .to_owned(),
        )
    } else if let Some(method) = std_float_method(diagnostics) {
        Some(format!(
            "`{method}` on floats comes from `std`, which kernels do not have on the GPU: use \
             `warpforge_device::num` (`exp`, `log`, `tanh`, `erf`, `sqrt_f32`, `fma_f32`, … \
             the same code on the GPU and in the emulator)."
        ))
    } else if any("gpu-kernel") && any("E0658") {
        Some(
            "`#[kernel]` needs the `gpu-kernel` ABI on nvptx64: add \
             `#![cfg_attr(target_arch = \"nvptx64\", feature(abi_gpu_kernel))]` to the kernels \
             crate's lib.rs."
                .to_owned(),
        )
    } else {
        None
    }
}

/// The method of an "no method named `exp` found for type `f32`" error, when it is
/// float math that `std` has and `core` does not.
fn std_float_method(diagnostics: &[String]) -> Option<&str> {
    const STD_ONLY: &[&str] = &[
        "exp",
        "exp2",
        "exp_m1",
        "ln",
        "log",
        "log2",
        "log10",
        "ln_1p",
        "powf",
        "powi",
        "sqrt",
        "cbrt",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "atan2",
        "sinh",
        "cosh",
        "tanh",
        "hypot",
        "mul_add",
        "floor",
        "ceil",
        "round",
        "trunc",
        "fract",
        "rem_euclid",
        "div_euclid",
    ];
    diagnostics.iter().find_map(|d| {
        let rest = d.split("no method named `").nth(1)?;
        let (method, after) = rest.split_once('`')?;
        let on_float = after.contains("type `f32`") || after.contains("type `f64`");
        (on_float && STD_ONLY.contains(&method)).then_some(method)
    })
}

/// rustc's PTX made acceptable to ptxas, with nothing ptxas would compile
/// differently because of line info. PTX built without debug info comes back
/// as rustc wrote it. With it:
/// - DWARF `.section .debug_*` blocks after the last function (ptxas rejects
///   them: "Parsing error near '$L__sec_end0'") are cut, keeping any `.file`
///   directive found among them, which the `.loc`s need;
/// - `debug` is dropped from `.target sm_XX, debug` (it would make ptxas
///   compile without optimisation);
/// - labels nothing refers to (`$L__tmp…`, `$L__func_begin…`: anchors for the
///   DWARF just cut) are dropped, because ptxas treats every label as a block
///   boundary and allocates registers differently around them.
///
/// The `.file`/`.loc` directives stay: `ptxas -lineinfo` needs no more.
///
/// ```
/// let ptx = ".target sm_80, debug\n$L__tmp0:\n.loc 1 2 3\n.section .debug_abbrev\n{\n}\n";
/// assert_eq!(warpforge_builder::ptxas_ready(ptx), ".target sm_80\n.loc 1 2 3\n");
/// ```
pub fn ptxas_ready(ptx: &str) -> String {
    let is_debug_section = |line: &str| {
        line.trim_start()
            .strip_prefix(".section")
            .is_some_and(|rest| {
                rest.starts_with(char::is_whitespace) && rest.trim_start().starts_with(".debug_")
            })
    };
    let mut kept: Vec<&str> = Vec::new();
    let mut lines = ptx.split_inclusive('\n');
    for line in lines.by_ref() {
        if is_debug_section(line) {
            break;
        }
        kept.push(line);
    }
    kept.extend(lines.filter(|l| l.trim_start().starts_with(".file")));

    // Every `$L__` name used other than as a label definition.
    let mut referenced = std::collections::HashSet::new();
    for line in kept.iter().filter(|l| label_definition(l).is_none()) {
        let mut rest = *line;
        while let Some(at) = rest.find("$L__") {
            let name = &rest[at..];
            let len = name
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
                .unwrap_or(name.len());
            referenced.insert(&name[..len]);
            rest = &name[len..];
        }
    }
    let mut out = String::with_capacity(ptx.len());
    for line in kept {
        if label_definition(line).is_some_and(|name| !referenced.contains(name)) {
            continue;
        }
        if let Some(targets) = line.trim_start().strip_prefix(".target")
            && targets.split(',').any(|t| t.trim() == "debug")
        {
            let targets: Vec<&str> = targets
                .split(',')
                .map(str::trim)
                .filter(|t| *t != "debug")
                .collect();
            out.push_str(&format!(".target {}\n", targets.join(", ")));
            continue;
        }
        out.push_str(line);
    }
    apply_launch_bounds(&out)
}

/// The prefix of the statics in which `#[kernel(max_threads = …, min_blocks =
/// …, max_registers = …)]` records a kernel's launch bounds.
const LAUNCH_BOUNDS_PREFIX: &str = "__warpforge_launch_bounds_";

/// Moves each kernel's launch bounds from the static `#[kernel]` records them
/// in (`__warpforge_launch_bounds_NAME`, `[max_threads, min_blocks,
/// max_registers]`, 0 for none) into its entry, as the PTX performance
/// directives `.maxntid X, 1, 1`, `.minnctapersm N` and `.maxnreg R` between
/// the parameter list and the body (rustc's NVPTX backend has no way to emit
/// them), and drops the static. Called by [`ptxas_ready`]; PTX without such
/// statics comes back unchanged, and a static whose entry the module lacks
/// is left where it is.
///
/// ```
/// let ptx = "\t// .globl\t__warpforge_launch_bounds_k\n\
///            .visible .global .align 4 .u32 __warpforge_launch_bounds_k[3] = {256, 2, 0};\n\
///            .visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\tret;\n}\n";
/// assert_eq!(
///     warpforge_builder::apply_launch_bounds(ptx),
///     ".visible .entry k(\n\t.param .u64 k_param_0\n)\n.maxntid 256, 1, 1\n.minnctapersm 2\n{\n\tret;\n}\n"
/// );
/// ```
pub fn apply_launch_bounds(ptx: &str) -> String {
    if !ptx.contains(LAUNCH_BOUNDS_PREFIX) {
        return ptx.to_owned();
    }
    let lines: Vec<&str> = ptx.split_inclusive('\n').collect();
    // (static's line, kernel, bounds)
    let mut bounds: Vec<(usize, &str, [u32; 3])> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some((name, values)) = launch_bounds_static(line) {
            bounds.push((i, name, values));
        }
    }
    let mut drop = vec![false; lines.len()];
    let mut insert_after: Vec<Option<String>> = vec![None; lines.len()];
    for &(at, name, [threads, blocks, registers]) in &bounds {
        let Some(entry) = lines.iter().position(|l| entry_declares(l, name)) else {
            continue;
        };
        let Some(close) = (entry..lines.len()).find(|&i| {
            let t = lines[i].trim();
            (i == entry && t.ends_with(')')) || (i > entry && t == ")")
        }) else {
            continue;
        };
        let mut directives = String::new();
        if threads > 0 {
            directives.push_str(&format!(".maxntid {threads}, 1, 1\n"));
        }
        if blocks > 0 {
            directives.push_str(&format!(".minnctapersm {blocks}\n"));
        }
        if registers > 0 {
            directives.push_str(&format!(".maxnreg {registers}\n"));
        }
        insert_after[close] = Some(directives);
        drop[at] = true;
        // LLVM's `// .globl NAME` comment above the static.
        if at > 0
            && lines[at - 1].trim_start().starts_with("// .globl")
            && lines[at - 1].contains(name)
        {
            drop[at - 1] = true;
        }
    }
    let mut out = String::with_capacity(ptx.len() + 64 * bounds.len());
    for (i, line) in lines.iter().enumerate() {
        if drop[i] {
            continue;
        }
        out.push_str(line);
        if let Some(directives) = &insert_after[i] {
            if !line.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(directives);
        }
    }
    out
}

/// `(kernel, [max_threads, min_blocks, max_registers])` if `line` defines a
/// launch-bounds static: `.u32 __warpforge_launch_bounds_k[3] = {256, 2, 0};`
/// or the same as 12 little-endian bytes (`.b8 …[12] = {0, 1, 0, 0, 2}`;
/// LLVM leaves out trailing zeros).
fn launch_bounds_static(line: &str) -> Option<(&str, [u32; 3])> {
    let t = line.trim();
    if !t.starts_with('.') || !t.contains(".global") {
        return None;
    }
    let at = t.find(LAUNCH_BOUNDS_PREFIX)?;
    let bytes = t[..at].split_whitespace().any(|tok| tok == ".b8");
    let rest = &t[at + LAUNCH_BOUNDS_PREFIX.len()..];
    let open = rest.find('[')?;
    let name = &rest[..open];
    let count: usize = rest[open + 1..rest.find(']')?].parse().ok()?;
    let values = &rest[rest.find('{')? + 1..rest.find('}')?];
    let mut values: Vec<u32> = values
        .split(',')
        .map(|v| v.trim().parse().ok())
        .collect::<Option<_>>()?;
    if values.len() > count || count != if bytes { 12 } else { 3 } {
        return None;
    }
    values.resize(count, 0);
    let words: Vec<u32> = if bytes {
        values
            .chunks(4)
            .map(|b| b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24)
            .collect()
    } else {
        values
    };
    Some((name, [words[0], words[1], words[2]]))
}

/// Whether `line` declares the entry `name` (`.visible .entry name(`).
fn entry_declares(line: &str, name: &str) -> bool {
    let t = line.trim_start();
    t.starts_with('.')
        && t.split(|c: char| c.is_whitespace() || c == '(')
            .skip_while(|tok| *tok != ".entry")
            .nth(1)
            == Some(name)
}

/// `$L__name` if `line` is the definition `$L__name:` of an LLVM-local label.
fn label_definition(line: &str) -> Option<&str> {
    let name = line.trim().strip_suffix(':')?;
    (name.starts_with("$L__") && !name.contains(char::is_whitespace)).then_some(name)
}

/// The module file's expression for `modules` of `package` (see [`PtxBuilder::module_file`]):
/// `Module::new(…)` with the PTX, or `Module::with_cubins(…)` with the cubins
/// too, each `include_bytes!`'d.
pub fn module_source(package: &str, modules: &[PtxModule]) -> Result<String, BuildError> {
    let utf8 = |path: &Path| {
        path.to_str()
            .map(str::to_owned)
            .ok_or_else(|| BuildError::NonUtf8Path(path.to_path_buf()))
    };
    let mut entries = String::new();
    let mut cubins = String::new();
    for m in modules {
        let path = utf8(&m.path)?;
        entries.push_str(&format!(
            "    ::warpforge::ptx::PtxModule {{ arch: {:?}, source: include_str!({path:?}) }},\n",
            m.arch.name()
        ));
        for c in &m.cubins {
            let path = utf8(&c.path)?;
            cubins.push_str(&format!(
                "    ::warpforge::ptx::Cubin {{ variant: {:?}, sm: {}, arch_suffix: {:?}, \
                 bytes: include_bytes!({path:?}) }},\n",
                m.arch.name(),
                c.sm,
                c.arch_suffix
            ));
        }
    }
    let header = format!(
        "// Written by warpforge-builder; embedded with `warpforge::include_module!({package:?})`.\n"
    );
    Ok(if cubins.is_empty() {
        format!("{header}::warpforge::ptx::Module::new({package:?}, &[\n{entries}])\n")
    } else {
        format!(
            "{header}::warpforge::ptx::Module::with_cubins({package:?}, &[\n{entries}], &[\n{cubins}])\n"
        )
    })
}

/// Finds `ptxas` as `warpforge ptx` does: the file named by `WARPFORGE_PTXAS`;
/// `ptxas` on `PATH`; `$CUDA_PATH/bin`; `/usr/local/cuda/bin`; the
/// `nvidia-cuda-nvcc` pip wheel under the `purelib` of `python3` or `python`
/// (`nvidia/cu13/bin`, `nvidia/cuda_nvcc/bin`). A candidate must answer
/// `--version`. Else the places searched.
pub fn locate_ptxas() -> Result<PathBuf, Vec<String>> {
    let mut searched = Vec::new();
    let runs = |path: &Path| {
        path.is_file()
            && Command::new(path)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
    };
    if let Some(value) = std::env::var_os("WARPFORGE_PTXAS") {
        let path = PathBuf::from(value);
        if runs(&path) {
            return Ok(path);
        }
        searched.push(format!(
            "WARPFORGE_PTXAS={} (not a runnable ptxas)",
            path.display()
        ));
        return Err(searched);
    }
    let exe = format!("ptxas{}", std::env::consts::EXE_SUFFIX);
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join(&exe)).collect())
        .unwrap_or_default();
    searched.push("PATH".to_owned());
    if let Some(cuda) = std::env::var_os("CUDA_PATH") {
        candidates.push(Path::new(&cuda).join("bin").join(&exe));
        searched.push("$CUDA_PATH/bin".to_owned());
    }
    candidates.push(Path::new("/usr/local/cuda/bin").join(&exe));
    searched.push("/usr/local/cuda/bin".to_owned());
    if let Some(found) = candidates.into_iter().find(|p| runs(p)) {
        return Ok(found);
    }
    for python in ["python3", "python"] {
        let Ok(out) = Command::new(python)
            .args([
                "-c",
                "import sysconfig;print(sysconfig.get_paths()['purelib'])",
            ])
            .output()
        else {
            continue;
        };
        let purelib = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if !out.status.success() || purelib.as_os_str().is_empty() {
            continue;
        }
        for dir in ["nvidia/cu13/bin", "nvidia/cuda_nvcc/bin"] {
            let path = purelib.join(dir).join(&exe);
            if runs(&path) {
                return Ok(path);
            }
        }
        searched.push(format!(
            "{}/nvidia/{{cu13,cuda_nvcc}}/bin",
            purelib.display()
        ));
        break;
    }
    Err(searched)
}

/// One `ptxas` run: the PTX module (index into the modules) and the real architecture.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CubinJob {
    module: usize,
    sm: u32,
    arch_suffix: &'static str,
}

/// Which cubins to assemble: for each of `sms`, from the module a GPU of that
/// compute capability loads (the newest architecture at or below it, as
/// `warpforge::ptx::Module::variant_for` picks); an arch-specific module
/// (`sm_90a`) only for its own architecture, which it always gets.
fn cubin_jobs(archs: &[Arch], sms: &[u32]) -> Vec<CubinJob> {
    let mut jobs: Vec<CubinJob> = Vec::new();
    let mut add = |job: CubinJob| {
        if !jobs.contains(&job) {
            jobs.push(job);
        }
    };
    for &sm in sms {
        let chosen = archs
            .iter()
            .enumerate()
            .filter(|(_, a)| a.sm() <= sm)
            .max_by_key(|(_, a)| a.sm());
        match chosen {
            Some((i, a)) if !a.arch_specific() => add(CubinJob {
                module: i,
                sm,
                arch_suffix: "",
            }),
            Some((i, a)) if a.sm() == sm => add(CubinJob {
                module: i,
                sm,
                arch_suffix: "a",
            }),
            _ => {}
        }
    }
    for (i, a) in archs.iter().enumerate() {
        if a.arch_specific() {
            add(CubinJob {
                module: i,
                sm: a.sm(),
                arch_suffix: "a",
            });
        }
    }
    jobs
}

/// The warning for a build that wants cubins but finds no `ptxas` (`searched`:
/// where it looked): the module embeds PTX only.
fn no_ptxas_warning(package: &str, searched: &[String]) -> String {
    format!(
        "warpforge: `ptxas` not found (searched {}), so `{package}` embeds PTX only and \
         each GPU JIT-compiles it when its module is first loaded (seconds, per process \
         with a cold driver cache). To embed machine code for sm_80/sm_90: `pip install \
         nvidia-cuda-nvcc`, install the CUDA toolkit, or set WARPFORGE_PTXAS; to \
         silence this, WARPFORGE_CUBINS=0",
        searched.join(", ")
    )
}

/// Assembles `modules`' cubins with `ptxas`: one `ptxas -lineinfo` per cubin
/// (see [`cubin_jobs`]), all in parallel, each written beside its `.ptx`, and
/// added to its module's `cubins`. Returns the warnings to print, one per
/// `ptxas` that failed (that architecture JIT-compiles the PTX). Never an
/// error: cubins only make loading faster. A cubin newer than its PTX, made
/// by the same command, is reused.
fn assemble_cubins(
    ptxas: &Path,
    package: &str,
    modules: &mut [PtxModule],
    sms: &[u32],
) -> Vec<String> {
    let archs: Vec<Arch> = modules.iter().map(|m| m.arch).collect();
    let jobs = cubin_jobs(&archs, sms);
    let results: Vec<Result<CubinFile, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|job| {
                let ptx = modules[job.module].path.clone();
                scope.spawn(move || assemble_one(ptxas, &ptx, job))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("ptxas thread panicked".to_owned()))
            })
            .collect()
    });
    let mut warnings = Vec::new();
    for (job, result) in jobs.iter().zip(results) {
        match result {
            Ok(cubin) => modules[job.module].cubins.push(cubin),
            Err(e) => warnings.push(format!(
                "warpforge: no sm_{}{} cubin for `{package}` (GPUs of that architecture will \
                 JIT-compile its PTX): {e}",
                job.sm, job.arch_suffix
            )),
        }
    }
    warnings
}

/// Runs `ptxas -lineinfo -arch=sm_XX -o X.cubin X.ptx` for `job`, unless the
/// cubin is up to date.
fn assemble_one(ptxas: &Path, ptx: &Path, job: &CubinJob) -> Result<CubinFile, String> {
    let arch = format!("sm_{}{}", job.sm, job.arch_suffix);
    let cubin = ptx.with_extension(format!("{arch}.cubin"));
    let stamp = cubin.with_extension("cubin.cmd");
    let mut cmd = Command::new(ptxas);
    cmd.args(["-lineinfo", &format!("-arch={arch}"), "-o"])
        .arg(&cubin)
        .arg(ptx);
    let line = format!("{cmd:?}");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let fresh = matches!((modified(&cubin), modified(ptx)), (Some(c), Some(p)) if c >= p)
        && std::fs::read_to_string(&stamp).is_ok_and(|s| s == line);
    if !fresh {
        let output = cmd
            .output()
            .map_err(|e| format!("could not run {}: {e}", ptxas.display()))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let first: Vec<&str> = stderr.lines().filter(|l| !l.is_empty()).take(5).collect();
            return Err(format!(
                "`ptxas -arch={arch}` failed ({}): {}",
                output.status,
                first.join(" | ")
            ));
        }
        std::fs::write(&stamp, &line)
            .map_err(|e| format!("could not write {}: {e}", stamp.display()))?;
    }
    let compressed = cubin.with_extension("cubin.zst");
    if !fresh || !matches!((modified(&compressed), modified(&cubin)), (Some(z), Some(c)) if z >= c)
    {
        compress_cubin(&cubin, &compressed)?;
    }
    Ok(CubinFile {
        sm: job.sm,
        arch_suffix: job.arch_suffix,
        path: compressed,
    })
}

/// Writes `cubin` as one zstd frame to `compressed`: what the module embeds.
/// A cubin is mostly zero padding (the library's sm_80 cubin: 8.4 MB, 0.4 MB
/// compressed), and the embedded bytes are part of every binary that links
/// the module; the GPU loader decompresses the one cubin it loads.
fn compress_cubin(cubin: &Path, compressed: &Path) -> Result<(), String> {
    let elf =
        std::fs::read(cubin).map_err(|e| format!("could not read {}: {e}", cubin.display()))?;
    // Level 9: 8.4 MB → 0.42 MB in about 0.1 s (level 19 saves 15 % more in 30× the time).
    let frame = zstd::bulk::compress(&elf, 9)
        .map_err(|e| format!("could not compress {}: {e}", cubin.display()))?;
    std::fs::write(compressed, frame)
        .map_err(|e| format!("could not write {}: {e}", compressed.display()))
}

/// Writes `contents` to `path` (creating its directory) unless it already holds
/// exactly that, so an unchanged build leaves timestamps alone.
fn write_if_changed(path: &Path, contents: &str) -> Result<(), BuildError> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == contents) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| BuildError::Io {
            action: "create",
            path: dir.to_path_buf(),
            source,
        })?;
    }
    std::fs::write(path, contents).map_err(|source| BuildError::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    })
}

/// The directory of every package in the dependency graph of the crate
/// whose manifest is in `manifest_dir` (a build script's
/// `CARGO_MANIFEST_DIR`), by package name, from `cargo metadata`: a path
/// dependency in a workspace, a registry or git checkout, or a vendored copy
/// alike. A host crate that depends on its kernels crates finds them this
/// way rather than by their place in a directory layout, so it builds
/// wherever cargo put them (`warpforge/build.rs` does).
pub fn locate_packages(
    manifest_dir: &Path,
) -> Result<std::collections::HashMap<String, PathBuf>, BuildError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let manifest = manifest_dir.join("Cargo.toml");
    let json = cargo_metadata(
        &cargo,
        manifest_dir,
        &[OsStr::new("--manifest-path"), manifest.as_os_str()],
    )?;
    Ok(json["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let name = p["name"].as_str()?;
            let dir = Path::new(p["manifest_path"].as_str()?).parent()?;
            Some((name.to_owned(), dir.to_path_buf()))
        })
        .collect())
}

/// `cargo metadata --format-version 1 ARGS…` run in `dir`, parsed; a failure
/// is [`BuildError::Metadata`] with what cargo said.
fn cargo_metadata(
    cargo: &OsStr,
    dir: &Path,
    args: &[&OsStr],
) -> Result<serde_json::Value, BuildError> {
    let mut cmd = nested_cargo(cargo, dir);
    cmd.args(["metadata", "--format-version", "1"]).args(args);
    let output = cmd.output().map_err(|source| BuildError::Spawn {
        command: format!("{cmd:?}"),
        source,
    })?;
    let metadata_error = |stderr: String| BuildError::Metadata {
        workspace: dir.to_path_buf(),
        stderr,
    };
    if !output.status.success() {
        return Err(metadata_error(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| metadata_error(format!("its output is not JSON: {e}")))
}

/// What `cargo metadata --no-deps` says about the kernels crate's workspace.
struct Workspace {
    root: PathBuf,
    packages: serde_json::Value,
}

/// A workspace member and what to watch for it.
struct Member {
    watch: Vec<PathBuf>,
}

impl Workspace {
    fn read(cargo: &OsStr, dir: &Path) -> Result<Self, BuildError> {
        let dir = std::path::absolute(dir).map_err(|source| BuildError::Io {
            action: "resolve",
            path: dir.to_path_buf(),
            source,
        })?;
        let json = cargo_metadata(cargo, &dir, &[OsStr::new("--no-deps")])?;
        let root = json["workspace_root"]
            .as_str()
            .ok_or_else(|| BuildError::Metadata {
                workspace: dir.clone(),
                stderr: "its output has no workspace_root".to_owned(),
            })?;
        Ok(Workspace {
            root: PathBuf::from(root),
            packages: json["packages"].clone(),
        })
    }

    /// The member named `package`, with its sources and its path dependencies' to watch.
    fn member(&self, package: &str) -> Result<Member, BuildError> {
        let packages = self.packages.as_array().map(Vec::as_slice).unwrap_or(&[]);
        let Some(found) = packages.iter().find(|p| p["name"] == package) else {
            let mut members: Vec<String> = packages
                .iter()
                .filter_map(|p| p["name"].as_str().map(str::to_owned))
                .collect();
            members.sort();
            return Err(BuildError::UnknownPackage {
                package: package.to_owned(),
                workspace: self.root.clone(),
                members,
            });
        };
        let package_dir = found["manifest_path"]
            .as_str()
            .and_then(|m| Path::new(m).parent())
            .map(Path::to_path_buf);
        let dependency_dirs = found["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["path"].as_str().map(PathBuf::from));
        // Each crate's manifest and `src/`, not its whole directory: a package at
        // the workspace root would otherwise watch `target/`, which every build changes.
        let mut watch = Vec::new();
        for dir in package_dir.into_iter().chain(dependency_dirs) {
            watch.push(dir.join("Cargo.toml"));
            watch.push(dir.join("src"));
        }
        watch.push(self.root.join("Cargo.toml"));
        watch.push(self.root.join("Cargo.lock"));
        watch.retain(|p| p.exists());
        watch.dedup();
        Ok(Member { watch })
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

    const WITH_DEBUG: &str = "//\n.version 7.0\n.target sm_80, debug\n.address_size 64\n\n\
        .visible .entry k()\n{\n$L__func_begin0:\n\t.loc\t1 11 5\n$L__BB0_1:\n\
        \tadd.s32 \t%r1, %r1, 1;\n$L__tmp0:\n\t@%p1 bra \t$L__BB0_1;\n\tret;\n$L__tmp1:\n}\n\
        \t.section\t.debug_info\n\t{\n.b64 $L__tmp1\n\t}\n\
        \t.file\t1 \"./kernels/src/elementwise.rs\"\n\
        \t.section\t.debug_abbrev\n\t{\n.b8 1\n\t}\n\
        \t.section\t.debug_aranges\n\t{\n.b64 $L__sec_end0-$L__func_begin0\n\t}\n\
        \t.section\t.debug_macinfo\t{\t}\n";

    #[test]
    fn line_info_ptx_keeps_file_loc_and_branch_labels_and_loses_dwarf_and_debug_labels() {
        let ready = ptxas_ready(WITH_DEBUG);
        // The branch target stays; labels only the DWARF pointed at go.
        assert!(ready.contains("$L__BB0_1:\n"), "{ready}");
        assert!(ready.contains("bra \t$L__BB0_1;"), "{ready}");
        for gone in ["$L__tmp0", "$L__tmp1", "$L__func_begin0"] {
            assert!(!ready.contains(gone), "{gone} in {ready}");
        }
        assert!(ready.contains(".target sm_80\n"), "{ready}");
        assert!(ready.contains("\t.loc\t1 11 5\n"), "{ready}");
        assert!(
            ready.contains(".file\t1 \"./kernels/src/elementwise.rs\""),
            "{ready}"
        );
        assert!(!ready.contains(".section"), "{ready}");
        assert!(!ready.contains("debug"), "{ready}");
        // Idempotent: what comes out goes through unchanged.
        assert_eq!(ptxas_ready(&ready), ready);
    }

    /// Both forms LLVM may print the static in; entries without bounds, and a
    /// static whose entry is missing, are left alone.
    #[test]
    fn launch_bounds_move_from_their_static_into_the_entry() {
        let ptx = "\
.version 7.0
.target sm_80
\t// .globl\t__warpforge_launch_bounds_a
.visible .global .align 4 .u32 __warpforge_launch_bounds_a[3] = {128, 0, 64};
.visible .global .align 4 .b8 __warpforge_launch_bounds_b[12] = {0, 1, 0, 0, 4};
.visible .global .align 4 .u32 __warpforge_launch_bounds_gone[3] = {32, 0, 0};
.visible .entry a(
\t.param .u64 a_param_0
)
{
\tret;
}
.visible .entry b()
{
\tret;
}
.visible .entry c()
{
\tret;
}
";
        let out = apply_launch_bounds(ptx);
        assert_eq!(
            out,
            "\
.version 7.0
.target sm_80
.visible .global .align 4 .u32 __warpforge_launch_bounds_gone[3] = {32, 0, 0};
.visible .entry a(
\t.param .u64 a_param_0
)
.maxntid 128, 1, 1
.maxnreg 64
{
\tret;
}
.visible .entry b()
.maxntid 256, 1, 1
.minnctapersm 4
{
\tret;
}
.visible .entry c()
{
\tret;
}
"
        );
        assert_eq!(apply_launch_bounds(&out), out);
        assert_eq!(ptxas_ready(ptx), out);
        let plain = ".visible .entry c()\n{\n\tret;\n}\n";
        assert_eq!(apply_launch_bounds(plain), plain);
    }

    #[test]
    fn ptx_without_line_info_is_left_as_rustc_wrote_it() {
        let plain =
            ".version 7.0\n.target sm_90a\n.address_size 64\n\n.visible .entry k()\n{\n\tret;\n}\n";
        assert_eq!(ptxas_ready(plain), plain);
    }

    #[test]
    fn the_module_file_is_one_expression_with_escaped_paths() {
        let modules = [
            PtxModule {
                arch: Arch::Sm80,
                path: PathBuf::from("/out/my \"odd\" dir\\x/my_kernels.sm_80.ptx"),
                cubins: Vec::new(),
            },
            PtxModule {
                arch: Arch::Sm90a,
                path: PathBuf::from("/out/my_kernels.sm_90a.ptx"),
                cubins: Vec::new(),
            },
        ];
        let src = module_source("my-kernels", &modules).unwrap();
        let expected = "::warpforge::ptx::Module::new(\"my-kernels\", &[\n    \
            ::warpforge::ptx::PtxModule { arch: \"sm_80\", source: \
            include_str!(\"/out/my \\\"odd\\\" dir\\\\x/my_kernels.sm_80.ptx\") },\n    \
            ::warpforge::ptx::PtxModule { arch: \"sm_90a\", source: \
            include_str!(\"/out/my_kernels.sm_90a.ptx\") },\n])\n";
        assert!(src.ends_with(expected), "{src}");
        // A comment, then exactly one expression.
        assert_eq!(
            src.lines().filter(|l| l.starts_with("::warpforge")).count(),
            1
        );
    }

    #[test]
    fn cubins_are_embedded_beside_the_ptx_with_include_bytes() {
        let modules = [
            PtxModule {
                arch: Arch::Sm80,
                path: PathBuf::from("/out/k.sm_80.ptx"),
                cubins: vec![CubinFile {
                    sm: 86,
                    arch_suffix: "",
                    path: PathBuf::from("/out/k.sm_80.sm_86.cubin"),
                }],
            },
            PtxModule {
                arch: Arch::Sm90a,
                path: PathBuf::from("/out/k.sm_90a.ptx"),
                cubins: vec![CubinFile {
                    sm: 90,
                    arch_suffix: "a",
                    path: PathBuf::from("/out/k.sm_90a.sm_90a.cubin"),
                }],
            },
        ];
        let src = module_source("k", &modules).unwrap();
        let expected = "::warpforge::ptx::Module::with_cubins(\"k\", &[\n    \
            ::warpforge::ptx::PtxModule { arch: \"sm_80\", source: include_str!(\"/out/k.sm_80.ptx\") },\n    \
            ::warpforge::ptx::PtxModule { arch: \"sm_90a\", source: include_str!(\"/out/k.sm_90a.ptx\") },\n\
            ], &[\n    \
            ::warpforge::ptx::Cubin { variant: \"sm_80\", sm: 86, arch_suffix: \"\", \
            bytes: include_bytes!(\"/out/k.sm_80.sm_86.cubin\") },\n    \
            ::warpforge::ptx::Cubin { variant: \"sm_90a\", sm: 90, arch_suffix: \"a\", \
            bytes: include_bytes!(\"/out/k.sm_90a.sm_90a.cubin\") },\n])\n";
        assert!(src.ends_with(expected), "{src}");
    }

    fn jobs(archs: &[Arch], sms: &[u32]) -> Vec<(Arch, String)> {
        cubin_jobs(archs, sms)
            .into_iter()
            .map(|j| (archs[j.module], format!("sm_{}{}", j.sm, j.arch_suffix)))
            .collect()
    }

    #[test]
    fn each_cubin_comes_from_the_ptx_that_gpu_would_load() {
        use Arch::*;
        let sm80 = |a: &str| (Sm80, a.to_owned());
        assert_eq!(
            jobs(&[Sm80], DEFAULT_CUBIN_SMS),
            [sm80("sm_80"), sm80("sm_90")]
        );
        assert_eq!(
            jobs(&[Sm80], &[80, 86, 89, 90]),
            [sm80("sm_80"), sm80("sm_86"), sm80("sm_89"), sm80("sm_90")]
        );
        // A Hopper loads the sm_90a PTX, so its cubin is sm_90a, and nothing else is.
        assert_eq!(
            jobs(&[Sm80, Sm90a], DEFAULT_CUBIN_SMS),
            [sm80("sm_80"), (Sm90a, "sm_90a".to_owned())]
        );
        // sm_90a PTX runs on sm_90 only: no sm_100 cubin from it; its own one always.
        assert_eq!(jobs(&[Sm90a], &[80, 100]), [(Sm90a, "sm_90a".to_owned())]);
        assert!(jobs(&[Sm80], &[]).is_empty());
    }

    /// A script standing in for `ptxas`: writes the `-o` file, or fails when `fail` is set.
    fn fake_ptxas(dir: &Path, fail: bool) -> PathBuf {
        let path = dir.join("ptxas");
        let body = if fail {
            "echo 'ptxas fatal   : Unresolved extern function' >&2; exit 255".to_owned()
        } else {
            "while [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then printf '\\177ELF' > \"$2\"; fi; shift; done"
                .to_owned()
        };
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn one_module(dir: &Path) -> Vec<PtxModule> {
        let ptx = dir.join("k.sm_80.ptx");
        std::fs::write(&ptx, ".version 7.0\n.target sm_80\n").unwrap();
        vec![PtxModule {
            arch: Arch::Sm80,
            path: ptx,
            cubins: Vec::new(),
        }]
    }

    #[test]
    fn without_ptxas_the_build_embeds_ptx_only_and_says_how_to_get_it() {
        let dir = scratch("noptxas");
        let modules = one_module(&dir);
        let searched = ["PATH".to_owned(), "/usr/local/cuda/bin".to_owned()];
        let warning = no_ptxas_warning("k", &searched);
        for needle in [
            "`ptxas` not found",
            "PATH, /usr/local/cuda/bin",
            "embeds PTX only",
            "pip install nvidia-cuda-nvcc",
            "WARPFORGE_CUBINS=0",
        ] {
            assert!(warning.contains(needle), "{needle}: {warning}");
        }
        let src = module_source("k", &modules).unwrap();
        assert!(src.contains("::warpforge::ptx::Module::new(\"k\""), "{src}");
        assert!(!src.contains("Cubin"), "{src}");
    }

    #[test]
    fn ptxas_runs_once_per_architecture_and_a_failure_is_a_warning() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let dir = scratch("fakeptxas");
        let mut modules = one_module(&dir);
        let ptxas = fake_ptxas(&dir, false);
        let warnings = assemble_cubins(&ptxas, "k", &mut modules, &[80, 90]);
        assert!(warnings.is_empty(), "{warnings:?}");
        let archs: Vec<String> = modules[0].cubins.iter().map(CubinFile::arch).collect();
        assert_eq!(archs, ["sm_80", "sm_90"]);
        for c in &modules[0].cubins {
            // What the module embeds: the cubin ptxas wrote, as a zstd frame.
            let frame = std::fs::read(&c.path).unwrap();
            assert_eq!(zstd::bulk::decompress(&frame, 1 << 10).unwrap(), b"\x7fELF");
        }
        assert_eq!(
            modules[0].cubins[1].path,
            dir.join("k.sm_80.sm_90.cubin.zst")
        );

        let dir = scratch("failingptxas");
        let mut modules = one_module(&dir);
        let ptxas = fake_ptxas(&dir, true);
        let warnings = assemble_cubins(&ptxas, "k", &mut modules, &[80]);
        assert!(modules[0].cubins.is_empty());
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("no sm_80 cubin for `k`")
                && warnings[0].contains("Unresolved extern function"),
            "{}",
            warnings[0]
        );
    }

    #[test]
    fn real_ptxas_assembles_elf_cubins_when_installed() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let Ok(ptxas) = locate_ptxas() else {
            eprintln!("no ptxas here: skipped");
            return;
        };
        let dir = scratch("realptxas");
        let ptx = dir.join("k.sm_80.ptx");
        std::fs::write(
            &ptx,
            ".version 7.0\n.target sm_80\n.address_size 64\n\n\
             .visible .entry nop(\n\t.param .u32 nop_param_0\n)\n{\n\tret;\n}\n",
        )
        .unwrap();
        let mut modules = vec![PtxModule {
            arch: Arch::Sm80,
            path: ptx,
            cubins: Vec::new(),
        }];
        let warnings = assemble_cubins(&ptxas, "k", &mut modules, DEFAULT_CUBIN_SMS);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(modules[0].cubins.len(), DEFAULT_CUBIN_SMS.len());
        for c in &modules[0].cubins {
            // Embedded as a zstd frame of the ELF image ptxas wrote beside it.
            let frame = std::fs::read(&c.path).unwrap();
            assert_eq!(&frame[..4], b"\x28\xb5\x2f\xfd", "{}", c.path.display());
            let elf = zstd::bulk::decompress(&frame, 64 << 20).unwrap();
            assert_eq!(&elf[..4], b"\x7fELF", "{}", c.path.display());
            assert_eq!(elf, std::fs::read(c.path.with_extension("")).unwrap());
        }
    }

    #[test]
    fn compiler_errors_are_rustc_s_rendered_text_without_the_aborting_summary() {
        let json = [
            r#"{"reason":"compiler-artifact","package_id":"x"}"#,
            r#"{"reason":"compiler-message","message":{"level":"warning","message":"unused","spans":[{}],"rendered":"warning: unused\n"}}"#,
            r#"{"reason":"compiler-message","message":{"level":"error","message":"mismatched types","spans":[{}],"rendered":"error[E0308]: mismatched types\n --> k/src/lib.rs:9:9\n"}}"#,
            r#"{"reason":"compiler-message","message":{"level":"error","message":"aborting due to 1 previous error","spans":[],"rendered":"error: aborting due to 1 previous error\n"}}"#,
            "not json",
            r#"{"reason":"build-finished","success":false}"#,
        ]
        .join("\n");
        assert_eq!(
            compiler_errors(&json),
            ["error[E0308]: mismatched types\n --> k/src/lib.rs:9:9\n"]
        );
    }

    #[test]
    fn std_float_math_in_a_kernel_gets_a_hint_naming_the_device_library() {
        let d = [
            "error[E0599]: no method named `exp` found for type `f32` in the current scope\n"
                .to_owned(),
        ];
        let hint = hint_for(&d).unwrap();
        assert!(
            hint.contains("`exp` on floats comes from `std`")
                && hint.contains("warpforge_device::num"),
            "{hint}"
        );
        let other =
            ["error[E0599]: no method named `frobnicate` found for type `f32`\n".to_owned()];
        assert_eq!(hint_for(&other), None);
    }

    #[test]
    fn a_vendored_source_without_the_standard_library_s_crates_gets_the_vendor_command() {
        // What cargo said in a vendored build whose source lacked them.
        let said = "error: no matching package named `rustc-literal-escaper` found\n\
                    location searched: directory source `/tmp/v` (which is replacing registry `crates-io`)\n\
                    required by package `proc_macro v0.0.0 (/root/.rustup/toolchains/nightly/lib/rustlib/src/rust/library/proc_macro)`";
        let hint = build_std_source_hint(said).unwrap();
        assert!(hint.contains("cargo vendor --sync"), "{hint}");
        assert!(hint.contains("library/Cargo.toml"), "{hint}");
        // A missing package of the user's own graph is not this.
        assert_eq!(
            build_std_source_hint(
                "error: no matching package named `nope` found\n  required by package `k`"
            ),
            None
        );
    }

    #[test]
    fn cargo_errors_drop_progress_lines() {
        let stderr = "    Updating crates.io index\n   Compiling core v0.0.0\nerror: failed to select a version for `nope`.\n  required by package `k`\nwarning: build failed, waiting for other jobs to finish...\n";
        assert_eq!(
            cargo_errors(stderr),
            "error: failed to select a version for `nope`.\n  required by package `k`"
        );
    }

    #[test]
    fn the_profile_needs_nothing_from_the_workspace() {
        let config = profile_config(false);
        for key in [
            "inherits=\"release\"",
            "lto=\"fat\"",
            "panic=\"abort\"",
            "codegen-units=1",
        ] {
            assert!(config.contains(&format!("profile.ptx.{key}")), "{config:?}");
        }
        assert!(config.contains(&"profile.ptx.debug=false".to_owned()));
        assert!(
            profile_config(true).contains(&"profile.ptx.debug=\"line-directives-only\"".to_owned())
        );
    }

    #[test]
    fn a_package_cargo_unpacked_builds_in_a_workspace_of_its_own_and_a_member_in_its_workspace() {
        let dir = scratch("nested-workspace");
        families_workspace(&dir);
        let out = dir.join("out");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
        let metadata = |manifest_dir: &Path| {
            let json = cargo_metadata(&cargo, manifest_dir, &[OsStr::new("--no-deps")]).unwrap();
            PathBuf::from(json["workspace_root"].as_str().unwrap())
        };
        // A workspace member builds where it is, writing nothing.
        let builder = PtxBuilder::new("a", &dir);
        let root = metadata(&dir);
        assert_eq!(builder.nested_workspace(&root, &out).unwrap(), root);
        assert!(!out.exists());

        // An unpacked registry copy (`.cargo-ok`) of `a`, its dependency by
        // version as `cargo package` writes it: a workspace under `out`
        // that depends on it by path, and the copy is left as it was.
        let copy = dir.join("registry/a-0.1.0");
        std::fs::create_dir_all(copy.join("src")).unwrap();
        std::fs::write(
            copy.join("Cargo.toml"),
            "[package]\nname = \"a\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [dependencies]\nshared = \"0.1.0\"\n",
        )
        .unwrap();
        std::fs::write(copy.join("src/lib.rs"), "#![no_std]\n").unwrap();
        std::fs::write(copy.join(".cargo-ok"), "{\"v\":1}").unwrap();
        let nested = builder.nested_workspace(&copy, &out).unwrap();
        assert!(nested.starts_with(&out), "{}", nested.display());
        let manifest = std::fs::read_to_string(nested.join("Cargo.toml")).unwrap();
        assert!(
            manifest.contains(&format!(
                "\"a\" = {{ path = {:?} }}",
                copy.display().to_string()
            )),
            "{manifest}"
        );
        assert!(manifest.contains("[workspace]"), "{manifest}");
        // It is a workspace cargo reads, and `a` is in its graph.
        let json = cargo_metadata(
            &cargo,
            &nested,
            &[OsStr::new("--offline"), OsStr::new("--no-deps")],
        )
        .unwrap();
        assert_eq!(Path::new(json["workspace_root"].as_str().unwrap()), nested);
        assert_eq!(
            std::fs::read_dir(&copy).unwrap().count(),
            3,
            "the unpacked copy was written into"
        );
        // A vendored copy (`.cargo-checksum.json`) the same.
        std::fs::remove_file(copy.join(".cargo-ok")).unwrap();
        std::fs::write(copy.join(".cargo-checksum.json"), "{\"files\":{}}").unwrap();
        assert_eq!(builder.nested_workspace(&copy, &out).unwrap(), nested);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A workspace on disk: `shared`, and `a` and `b`, which depend on it.
    fn families_workspace(dir: &Path) {
        let package = |name: &str, deps: &str| {
            std::fs::create_dir_all(dir.join(name).join("src")).unwrap();
            std::fs::write(
                dir.join(name).join("Cargo.toml"),
                format!(
                    "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
                     [dependencies]\n{deps}"
                ),
            )
            .unwrap();
            std::fs::write(dir.join(name).join("src/lib.rs"), "#![no_std]\n").unwrap();
        };
        std::fs::write(
            dir.join("Cargo.toml"),
            "[workspace]\nresolver = \"3\"\nmembers = [\"shared\", \"a\", \"b\"]\n",
        )
        .unwrap();
        package("shared", "");
        package("a", "shared = { path = \"../shared\" }\n");
        package("b", "shared = { path = \"../shared\" }\n");
    }

    /// The PTX cache's key of `package` in `workspace`, computed as a build
    /// computes it (for sm_80, with line info, without ptxas).
    fn cache_key_of(package: &str, workspace: &Path) -> String {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
        let builder = PtxBuilder::new(package, workspace);
        let (root, watched) = builder.watched(&cargo).unwrap();
        builder
            .cache_key(&root, &watched, &[Arch::Sm80], true, None)
            .unwrap()
    }

    #[test]
    fn editing_one_family_leaves_the_other_families_cache_keys_unchanged() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let dir = scratch("families");
        families_workspace(&dir);
        let keys = || (cache_key_of("a", &dir), cache_key_of("b", &dir));
        let (a0, b0) = keys();
        assert_ne!(a0, b0, "each package has its own key");
        assert_eq!(
            keys(),
            (a0.clone(), b0.clone()),
            "nothing edited, nothing changed"
        );

        std::fs::write(dir.join("a/src/lib.rs"), "#![no_std]\npub fn f() {}\n").unwrap();
        let (a1, b1) = keys();
        assert_ne!(a1, a0, "a's own source changed its key");
        assert_eq!(b1, b0, "b does not build a's sources");

        std::fs::write(dir.join("shared/src/lib.rs"), "#![no_std]\npub fn g() {}\n").unwrap();
        let (a2, b2) = keys();
        assert_ne!(a2, a1, "a depends on shared");
        assert_ne!(b2, b1, "b depends on shared");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn worker_0_keeps_the_single_build_s_target_dirs_and_each_other_worker_gets_its_own() {
        let out = Path::new("/out");
        let cache = cache::Cache::locate("k", Path::new("/t/debug/build/k-1/out"));
        for cache in [None, cache.as_ref()] {
            let root = match cache {
                Some(_) => std::env::var_os("WARPFORGE_PTX_CACHE")
                    .filter(|v| !v.is_empty() && v != "0" && v != "off")
                    .map_or_else(|| PathBuf::from("/t/warpforge-ptx"), PathBuf::from),
                None => out.to_path_buf(),
            };
            let dir = |arch, worker| nested_target_dir(cache, out, arch, worker);
            assert_eq!(dir(Arch::Sm80, 0), root.join("nvptx-sm_80"));
            assert_eq!(dir(Arch::Sm90a, 0), root.join("nvptx-sm_90a"));
            assert_eq!(dir(Arch::Sm80, 1), root.join("nvptx-sm_80-w1"));
            assert_eq!(dir(Arch::Sm90a, 3), root.join("nvptx-sm_90a-w3"));
            let all: std::collections::HashSet<PathBuf> = Arch::ALL
                .into_iter()
                .flat_map(|arch| (0..4).map(move |worker| dir(arch, worker)))
                .collect();
            assert_eq!(all.len(), 8, "{all:?}");
        }
    }

    #[test]
    fn there_are_as_many_workers_as_builds_or_tokens_whichever_is_fewer() {
        assert_eq!(worker_count(0, 8), 0);
        assert_eq!(worker_count(1, 8), 1);
        assert_eq!(worker_count(5, 8), 5);
        assert_eq!(worker_count(5, 2), 2);
        assert_eq!(worker_count(5, 1), 1);
        // The build script's own token is always there.
        assert_eq!(worker_count(5, 0), 1);
    }

    #[test]
    fn only_builds_beside_other_workers_run_their_nested_cargo_one_job_at_a_time() {
        let builder = PtxBuilder::new("k", "/ws");
        let args = |one_job| -> Vec<String> {
            let cmd = builder.arch_command(
                OsStr::new("cargo"),
                Path::new("/ws"),
                Path::new("/t"),
                Path::new("/t/k.sm_80.rustc.ptx"),
                Arch::Sm80,
                true,
                one_job,
            );
            cmd.get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let alone = args(false);
        assert!(
            !alone.iter().any(|a| a.starts_with("-j") || a == "--jobs"),
            "{alone:?}"
        );
        assert!(args(true).contains(&"-j1".to_owned()));
    }

    /// Runs `jobs` jobs of `millis` each on `workers` workers; returns the
    /// order they started in and the most that ran at once. Asserts that a
    /// worker runs one job at a time.
    fn run_timed(
        jobs: usize,
        workers: usize,
        tokens: Option<&Tokens>,
        millis: u64,
    ) -> (Vec<usize>, usize) {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
        let started = std::sync::Mutex::new(Vec::new());
        let running = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let busy: Vec<AtomicBool> = (0..workers).map(|_| AtomicBool::new(false)).collect();
        let results = run_queue(
            jobs,
            workers,
            tokens,
            |i, worker| {
                assert!(!busy[worker].swap(true, SeqCst), "worker {worker} is busy");
                started.lock().unwrap().push(i);
                most.fetch_max(running.fetch_add(1, SeqCst) + 1, SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(millis));
                running.fetch_sub(1, SeqCst);
                busy[worker].store(false, SeqCst);
                i
            },
            |_| false,
        );
        let expected: Vec<Option<usize>> = (0..jobs).map(Some).collect();
        assert_eq!(results, expected);
        (started.into_inner().unwrap(), most.into_inner())
    }

    /// Whether `order` (the jobs as they recorded their start) is the jobs
    /// handed out in order, as far as `workers` workers can show it: each
    /// records its start only after taking its job, so two workers taking
    /// neighbouring jobs at once may record them either way round, but no
    /// job lands `workers` places or more from its own (a queue handing
    /// jobs out in another order would put one there).
    fn started_in_order(order: &[usize], workers: usize) -> bool {
        let mut sorted = order.to_vec();
        sorted.sort_unstable();
        sorted.iter().copied().eq(0..order.len())
            && order
                .iter()
                .enumerate()
                .all(|(at, &i)| at.abs_diff(i) < workers)
    }

    #[test]
    fn jobs_start_in_the_order_given_and_jobserver_tokens_bound_how_many_run_at_once() {
        assert!(started_in_order(&[0, 1, 2, 4, 3, 5], 3));
        assert!(!started_in_order(&[5, 4, 3, 2, 1, 0], 3));
        assert!(!started_in_order(&[0, 1, 2, 3, 3, 5], 3));
        let (order, most) = run_timed(6, 3, None, 20);
        assert!(started_in_order(&order, 3), "{order:?}");
        assert!(most <= 3, "{most}");

        // One token to hand out, beside the build script's own: two at once.
        let client = jobserver::Client::new(1).unwrap();
        let tokens = Tokens::new(&client).unwrap();
        let (order, most) = run_timed(6, 4, Some(&tokens), 50);
        // Two run at once: two workers' worth of reordering at most.
        assert!(started_in_order(&order, 2), "{order:?}");
        assert!(most <= 2, "{most}");
        drop(tokens);
        assert_eq!(client.available().unwrap(), 1, "every token is given back");

        // No token to hand out: worker 0 runs them all, and the others do not wait on.
        let client = jobserver::Client::new(0).unwrap();
        let tokens = Tokens::new(&client).unwrap();
        let (order, most) = run_timed(3, 3, Some(&tokens), 1);
        assert_eq!((order, most), (vec![0, 1, 2], 1));
    }

    #[test]
    fn after_a_failure_no_further_job_starts_and_started_ones_finish() {
        for workers in [1, 2] {
            let results = run_queue(
                5,
                workers,
                None,
                |i, _| {
                    if i != 1 {
                        std::thread::sleep(std::time::Duration::from_millis(200));
                    }
                    if i == 1 { Err(i) } else { Ok(i) }
                },
                Result::is_err,
            );
            assert_eq!(
                results,
                [Some(Ok(0)), Some(Err(1)), None, None, None],
                "{workers} workers"
            );
        }
    }
}
