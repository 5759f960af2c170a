//! NVTX ranges: off by default (then `libnvToolsExt` is never even loaded),
//! on with `WARPFORGE_NVTX=1` (every launch is a range named after its
//! kernel). A stand-in `libnvToolsExt.so`, compiled here with `cc`, logs what
//! the `warpforge` process does with it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use warpforge_cli::npy::{NpyArray, NpyData};

/// The two NVTX v2 entry points warpforge calls, and a constructor that says
/// the library was loaded; each appends a line to `$FAKE_NVTX_LOG`.
const FAKE_NVTX: &str = r#"
#include <stdio.h>
#include <stdlib.h>
static void note(const char *what, const char *name) {
    const char *path = getenv("FAKE_NVTX_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f) return;
    fprintf(f, "%s %s\n", what, name);
    fclose(f);
}
__attribute__((constructor)) static void loaded(void) { note("loaded", "-"); }
int nvtxRangePushA(const char *message) { note("push", message); return 0; }
int nvtxRangePop(void) { note("pop", "-"); return 0; }
"#;

/// A scratch directory with the stand-in library and a small `.npy` input.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("warpforge-nvtx-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("fake_nvtx.c"), FAKE_NVTX).unwrap();
    let cc = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.join("libnvToolsExt.so"))
        .arg(dir.join("fake_nvtx.c"))
        .output()
        .expect("this test compiles a stand-in libnvToolsExt with `cc` (the C compiler rustc links with)");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let x = NpyArray {
        shape: vec![3, 1000],
        data: NpyData::F32((0..3000).map(|i| (i % 7) as f32).collect()),
    };
    x.write(dir.join("x.npy")).unwrap();
    dir
}

/// `warpforge run reduce --op sum --axis 1` on the emulator with the stand-in
/// library on the search path, `WARPFORGE_NVTX` as given (unset if None).
fn run_reduce(dir: &Path, nvtx: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warpforge"));
    cmd.args([
        "run",
        "reduce",
        "--backend",
        "emu",
        "--op",
        "sum",
        "--axis",
        "1",
    ])
    .arg("--input")
    .arg(dir.join("x.npy"))
    .arg("--out")
    .arg(dir.join("y.npy"))
    .env("LD_LIBRARY_PATH", dir)
    .env("FAKE_NVTX_LOG", dir.join("log"))
    .env_remove("WARPFORGE_NVTX");
    if let Some(v) = nvtx {
        cmd.env("WARPFORGE_NVTX", v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn off_by_default_the_library_is_never_loaded() {
    let dir = scratch("off");
    run_reduce(&dir, None);
    run_reduce(&dir, Some("0"));
    let log = dir.join("log");
    assert!(
        !log.exists(),
        "NVTX was off but the library was used: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn on_every_launch_is_a_range_named_after_its_kernel() {
    let dir = scratch("on");
    run_reduce(&dir, Some("1"));
    let log = std::fs::read_to_string(dir.join("log")).expect("the library was loaded");
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.contains(&"loaded -"), "{log}");
    let pushes: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("push "))
        .collect();
    let pops = lines.iter().filter(|l| **l == "pop -").count();
    assert_eq!(pushes.len(), pops, "every range is closed: {log}");
    // A small rows sum of f32: the one launch of the small path, named as
    // in the PTX.
    assert_eq!(pushes, ["reduce_small_sum_f32"], "{log}");
    // Ranges do not nest: each push is followed by its pop.
    let mut depth = 0i32;
    for l in &lines {
        depth += i32::from(l.starts_with("push ")) - i32::from(*l == "pop -");
        assert!((0..=1).contains(&depth), "{log}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn on_through_the_environment_without_the_library_runs_without_ranges() {
    let dir = scratch("missing");
    std::fs::remove_file(dir.join("libnvToolsExt.so")).unwrap();
    if library_on_default_path() {
        return; // a real libnvToolsExt is installed: nothing to test here
    }
    let out = run_reduce(&dir, Some("1"));
    assert!(out.status.success());
    assert!(!dir.join("log").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn enabling_through_the_api_says_whether_the_library_loads() {
    match warpforge::nvtx::enable() {
        Ok(()) => assert!(library_on_default_path()),
        Err(e) => {
            assert!(!library_on_default_path());
            assert!(matches!(e, warpforge::Error::NvtxUnavailable), "{e}");
            assert!(e.to_string().contains("nvidia-nvtx"), "{e}");
        }
    }
    warpforge::nvtx::disable();
    assert!(!warpforge::nvtx::enabled());
}

/// Whether a real `libnvToolsExt` loads in this process (no stand-in here).
fn library_on_default_path() -> bool {
    warpforge::nvtx::available()
}
