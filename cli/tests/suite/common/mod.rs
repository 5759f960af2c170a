//! What the `warpforge run …` suites share: running the real binary, its
//! scratch directories, and reading its `.npy` output or its error.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use warpforge_cli::npy::{self, NpyArray};

/// What a run gives: the output array, or the exit code and stderr.
pub type RunResult = Result<NpyArray, (Option<i32>, String)>;

/// A fresh directory in the temp dir, `warpforge-LABEL-PID-N`: unique to this
/// process and call.
pub fn temp_dir(label: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "warpforge-{label}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The `warpforge` binary cargo built for these tests, run with `args`.
pub fn warpforge(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warpforge"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs `warpforge ARGS…`: exit code, stdout, stderr.
pub fn warpforge_text(args: &[&str]) -> (Option<i32>, String, String) {
    let out = warpforge(args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `warpforge ARGS`, which writes `out` when it succeeds: the array it
/// wrote, or its exit code and stderr (and then `out` must not exist: a
/// failed run writes nothing).
pub fn run_writing(args: &[&str], out: &str) -> RunResult {
    let output = warpforge(args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if output.status.success() {
        Ok(npy::read(out).unwrap())
    } else {
        assert!(
            !Path::new(out).exists(),
            "a failed run wrote {out}; stderr: {stderr}"
        );
        Err((output.status.code(), stderr))
    }
}

/// Expects a failure with exit code 2 and an `error:` line containing every needle.
pub fn expect_error(r: RunResult, needles: &[&str]) {
    let (code, stderr) = match r {
        Ok(a) => panic!("expected an error mentioning {needles:?}, got {a:?}"),
        Err(e) => e,
    };
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("error: "), "{stderr}");
    for n in needles {
        assert!(stderr.contains(n), "expected {n:?} in: {stderr}");
    }
}
