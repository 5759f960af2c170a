//! `warpforge profile OP …`: the real binary prints each launch's memory
//! profile on the emulator.

use crate::common::warpforge_text as warpforge;

/// The numbers of the table row that starts with `name` (e.g. `ld`), after the name.
fn row(stdout: &str, name: &str) -> Vec<f64> {
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no `{name}` row in\n{stdout}"));
    line.split_whitespace()
        .skip(1)
        .map_while(|w| w.trim_end_matches('%').parse().ok())
        .collect()
}

#[test]
fn profile_axpy_counts_both_reads_and_the_write_as_whole_sectors() {
    let n = 4096;
    let (code, stdout, stderr) = warpforge(&["profile", "axpy", "--len", &n.to_string()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("memory profile of `axpy_f32`"), "{stdout}");
    let warps = (n / 32) as f64;
    // requests, sectors, sectors/request, lines, efficiency %: x and y are read, y written.
    assert_eq!(
        row(&stdout, "ld"),
        [2.0 * warps, 8.0 * warps, 4.0, 2.0 * warps, 100.0]
    );
    assert_eq!(row(&stdout, "st"), [warps, 4.0 * warps, 4.0, warps, 100.0]);
    assert!(
        stdout.contains(&format!(
            "per output element ({n}): 8.00 bytes read, 4.00 bytes written"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("kernels/reduce/src/elementwise.rs"),
        "{stdout}"
    );
}

#[test]
fn profile_reduce_and_gemm_print_every_launch() {
    let (code, stdout, stderr) = warpforge(&[
        "profile", "reduce", "--op", "sum", "--shape", "64,1024", "--axis", "1",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("memory profile of `reduce_"), "{stdout}");
    let (code, stdout, stderr) = warpforge(&[
        "profile", "gemm", "--m", "32", "--n", "32", "--k", "32", "--dtype", "bf16",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("memory profile of `gemm_bf16"), "{stdout}");
    // The tensor-core GEMM stages tiles with cp.async and reads them with ldmatrix.
    assert!(row(&stdout, "ldgsts")[0] > 0.0, "{stdout}");
    assert!(row(&stdout, "ldsm")[0] > 0.0, "{stdout}");
}

#[test]
fn profile_refuses_a_bad_shape_naming_it() {
    let (code, _, stderr) = warpforge(&["profile", "reduce", "--op", "sum", "--shape", "2,x"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("`x` is not a non-negative integer"),
        "{stderr}"
    );
    let (code, _, stderr) = warpforge(&[
        "profile",
        "conv2d",
        "--input-shape",
        "1,8,16,16",
        "--weight-shape",
        "8,3,3",
    ]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("must be 4-D"), "{stderr}");
}

#[test]
fn verify_profile_adds_a_row_per_kernel() {
    let (code, stdout, stderr) = warpforge(&[
        "verify",
        "--backend",
        "emu",
        "--op",
        "axpy",
        "--random-lengths",
        "0",
        "--profile",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let table = stdout
        .split("memory traffic per kernel")
        .nth(1)
        .unwrap_or_else(|| panic!("no profile table in\n{stdout}"));
    let kernels: Vec<&str> = table
        .lines()
        .skip(2)
        // The table ends where verify's summary lines (coverage, totals) begin.
        .take_while(|l| !l.starts_with("coverage:") && !l.starts_with("verify:"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(kernels, ["axpy_f32", "axpy_f64"], "{table}");
    // Lengths 0, 1, 31, 32, 33, 1023, 1025: one launch each per kernel.
    assert!(
        table.lines().nth(2).unwrap().split_whitespace().nth(1) == Some("7"),
        "{table}"
    );
}
