//! The builder on a user's own kernels crate, in a workspace of its own (not
//! warpforge's): a missing package, a crate that does not compile (rustc's
//! diagnostics with file:line, none of cargo's noise), then the fixed crate
//! built with line info into a module file that `include_module!` can embed.
//!
//! One test, because every nested build compiles `core` for nvptx64 (about
//! 30 s on 2 cores): the broken and the fixed crate share one nested target
//! directory under `target/tmp`, which also keeps later runs warm.

use std::path::{Path, PathBuf};
use std::process::Command;
use warpforge_builder::{Arch, BuildError, PtxBuilder};

/// warpforge's workspace root (for the device and macros crates, and a Cargo.lock).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("builder/ is in the workspace")
        .to_path_buf()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A workspace with one kernels crate, `tiny-kernels`, at `<ws>/k`.
fn user_workspace(ws: &Path) {
    let _ = std::fs::remove_dir_all(ws);
    write(
        &ws.join("Cargo.toml"),
        "[workspace]\nresolver = \"3\"\nmembers = [\"k\"]\n",
    );
    // warpforge's lock file pins the same dependency versions, so no network is needed.
    std::fs::copy(repo().join("Cargo.lock"), ws.join("Cargo.lock")).unwrap();
    write(
        &ws.join("k/Cargo.toml"),
        &format!(
            "[package]\nname = \"tiny-kernels\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [dependencies]\nwarpforge-device = {{ path = {:?} }}\nwarpforge-macros = {{ path = {:?} }}\n",
            repo().join("device"),
            repo().join("macros"),
        ),
    );
}

const HEADER: &str = "#![cfg_attr(target_arch = \"nvptx64\", no_std)]
#![cfg_attr(target_arch = \"nvptx64\", feature(abi_gpu_kernel))]
use warpforge_device::{Out, thread};
use warpforge_macros::kernel;
";

/// `twice` with a type error on line 10 (`2.0 * i`: f64 times usize).
const BROKEN_LIB: &str = "mod bad_sig;

#[kernel]
pub fn twice(x: &[f32], mut y: Out<f32>) {
    let i = thread::global_index_x();
    if let (Some(&xi), Some(mut yi)) = (x.get(i), y.at(i)) {
        let _ = xi;
        let two: f32 = 2.0;
        yi.set(two * xi);
        let wrong: f32 = i;
    }
}
";

/// Not `#[kernel]`-valid: a mutable slice parameter, on line 4.
const BAD_SIGNATURE: &str = "use super::*;

#[kernel]
pub fn fill(v: f32, y: &mut [f32]) {
    let _ = (v, y);
}
";

const FIXED_LIB: &str = "
#[kernel]
pub fn twice(x: &[f32], mut y: Out<f32>) {
    let i = thread::global_index_x();
    if let (Some(&xi), Some(mut yi)) = (x.get(i), y.at(i)) {
        yi.set(2.0 * xi);
    }
}

#[kernel(max_threads = 128, min_blocks = 4, max_registers = 32)]
pub fn twice_bounded(x: &[f32], mut y: Out<f32>) {
    let i = thread::global_index_x();
    if let (Some(&xi), Some(mut yi)) = (x.get(i), y.at(i)) {
        yi.set(2.0 * xi);
    }
}
";

/// `ptxas`: `WARPFORGE_PTXAS`, `PATH`, or pip's `nvidia-cuda-nvcc`.
fn find_tool(name: &str) -> Option<PathBuf> {
    let from_env = std::env::var_os("WARPFORGE_PTXAS")
        .map(PathBuf::from)
        .and_then(|p| p.parent().map(|d| d.join(name)));
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name));
    let pip = Command::new("python3")
        .args(["-c", "import nvidia, os; print(list(nvidia.__path__)[0])"])
        .output()
        .ok()
        .map(|o| {
            PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
                .join("cu13/bin")
                .join(name)
        });
    from_env
        .into_iter()
        .chain(on_path)
        .chain(pip)
        .find(|p| p.is_file())
}

#[test]
fn a_users_kernels_crate_from_errors_to_an_embeddable_module_with_line_info() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("warpforge-builder-it");
    let ws = tmp.join(format!("ws-{}", std::process::id()));
    let out = tmp.join("out"); // shared by every run: the nested target dirs stay warm
    user_workspace(&ws);
    write(&ws.join("k/src/lib.rs"), &format!("{HEADER}{BROKEN_LIB}"));
    write(&ws.join("k/src/bad_sig.rs"), BAD_SIGNATURE);
    let header_lines = HEADER.lines().count();

    // A name that is not a member: says so, and lists the members.
    let e = PtxBuilder::new("tiny-kernel", &ws)
        .out_dir(&out)
        .build()
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, BuildError::UnknownPackage { .. }), "{text}");
    assert!(
        text.contains("no package `tiny-kernel`") && text.contains("members are: tiny-kernels"),
        "{text}"
    );

    // A crate that does not compile: rustc's diagnostics with file:line, then one line.
    let builder = PtxBuilder::new("tiny-kernels", &ws)
        .arch(Arch::Sm80)
        .out_dir(&out)
        .line_info(true);
    let e = builder.build().unwrap_err();
    let text = e.to_string();
    eprintln!("--- the error a user sees ---\n{text}\n---");
    assert!(matches!(e, BuildError::Compile { errors: 2, .. }), "{text}");
    let type_error_line = header_lines + 10;
    for expected in [
        "error[E0308]: mismatched types",
        &format!("k/src/lib.rs:{type_error_line}:"),
        "a kernel cannot take `&mut [T]`",
        "k/src/bad_sig.rs:4:",
        "`tiny-kernels` does not compile for the GPU (nvptx64, sm_80): 2 errors above",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    for noise in [
        "Compiling",
        "Caused by",
        "warning: build failed",
        "aborting due to",
        "\"reason\"",
    ] {
        assert!(!text.contains(noise), "{noise:?} in:\n{text}");
    }
    assert_eq!(
        text.lines().last().map(|l| l.contains("fix the code")),
        Some(true),
        "{text}"
    );

    // Fixed: PTX with line info, and the module file include_module! reads.
    write(&ws.join("k/src/lib.rs"), &format!("{HEADER}{FIXED_LIB}"));
    std::fs::remove_file(ws.join("k/src/bad_sig.rs")).unwrap();
    let modules = builder.build().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(modules.len(), 1);
    let ptx = std::fs::read_to_string(&modules[0].path).unwrap();
    assert!(ptx.contains(".visible .entry twice("), "no `twice` entry");
    // The launch bounds, moved from their static into the entry.
    let bounded = ptx
        .split(".visible .entry twice_bounded(")
        .nth(1)
        .expect("no `twice_bounded` entry");
    let head = &bounded[..bounded.find('{').unwrap()];
    assert!(
        head.contains(")\n.maxntid 128, 1, 1\n.minnctapersm 4\n.maxnreg 32\n"),
        "no launch bounds in:\n{head}"
    );
    assert!(
        !ptx.contains("__warpforge_launch_bounds"),
        "the static is left"
    );
    assert!(
        !ptx.split(".visible .entry twice(")
            .nth(1)
            .unwrap()
            .split('{')
            .next()
            .unwrap()
            .contains(".maxntid"),
        "bounds on the kernel without them"
    );
    assert!(
        ptx.contains("\n.target sm_80\n"),
        "target line kept `debug`"
    );
    assert!(!ptx.contains(".section"), "DWARF sections left in the PTX");
    assert!(
        ptx.contains(".file\t1 \"./k/src/lib.rs\""),
        "kernel file not workspace-relative"
    );
    assert!(ptx.contains("\t.loc\t1 "), "no line of k/src/lib.rs");
    let leaks: Vec<&str> = ptx
        .lines()
        .filter(|l| l.trim_start().starts_with(".file"))
        .filter(|l| l.contains("\"/") && !l.contains("\"/rustc/"))
        .collect();
    assert!(
        leaks.is_empty(),
        "build-machine paths in the PTX: {leaks:?}"
    );
    assert!(!ptx.contains(ws.to_str().unwrap()));

    let module_file = builder.module_file();
    let source = std::fs::read_to_string(&module_file).unwrap();
    let ptx_entry = format!(
        "&[\n    ::warpforge::ptx::PtxModule \
         {{ arch: \"sm_80\", source: include_str!({:?}) }},\n]",
        modules[0].path
    );
    if modules[0].cubins.is_empty() {
        // No ptxas here (or WARPFORGE_CUBINS=0): PTX only.
        let expected = format!("::warpforge::ptx::Module::new(\"tiny-kernels\", {ptx_entry})\n");
        assert!(source.ends_with(&expected), "{source}");
    } else {
        // With ptxas: a cubin per default architecture, each included from beside the PTX.
        let archs: Vec<String> = modules[0].cubins.iter().map(|c| c.arch()).collect();
        assert_eq!(archs, ["sm_80", "sm_90"]);
        let expected =
            format!("::warpforge::ptx::Module::with_cubins(\"tiny-kernels\", {ptx_entry}, &[\n");
        assert!(source.contains(&expected), "{source}");
        for c in &modules[0].cubins {
            // Embedded as a zstd frame (magic 28 b5 2f fd) of the ELF cubin beside it.
            assert!(
                std::fs::read(&c.path)
                    .unwrap()
                    .starts_with(b"\x28\xb5\x2f\xfd")
            );
            let elf = c.path.with_extension("");
            assert!(
                std::fs::read(&elf).unwrap().starts_with(b"\x7fELF"),
                "{}",
                elf.display()
            );
            assert!(
                source.contains(&format!(
                    "sm: {}, arch_suffix: \"\", bytes: include_bytes!({:?})",
                    c.sm, c.path
                )),
                "{source}"
            );
        }
    }
    assert!(modules[0].path.is_absolute());

    // ptxas accepts it with -lineinfo, and the SASS maps back to the Rust line.
    match (find_tool("ptxas"), find_tool("nvdisasm")) {
        (Some(ptxas), Some(nvdisasm)) => {
            let cubin = out.join("twice.cubin");
            let status = Command::new(&ptxas)
                .args(["-arch=sm_80", "-lineinfo", "-o"])
                .arg(&cubin)
                .arg(&modules[0].path)
                .status()
                .unwrap();
            assert!(status.success(), "ptxas -lineinfo rejected the PTX");
            let sass = Command::new(&nvdisasm)
                .arg("-g")
                .arg(&cubin)
                .output()
                .unwrap();
            let sass = String::from_utf8_lossy(&sass.stdout);
            let kernel_line = HEADER.lines().count() + 6; // `yi.set(2.0 * xi)`
            assert!(
                sass.contains(&format!("\"./k/src/lib.rs\", line {kernel_line}")),
                "nvdisasm -g shows no SASS for k/src/lib.rs:{kernel_line}:\n{sass}"
            );
        }
        _ => eprintln!(
            "ptxas/nvdisasm not found (pip install nvidia-cuda-nvcc nvidia-cuda-nvdisasm): skipped the SASS line check"
        ),
    }
    let _ = std::fs::remove_dir_all(&ws);
}
