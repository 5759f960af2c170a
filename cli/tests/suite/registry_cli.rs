//! `warpforge verify --op` and `warpforge bench OPERATION`: the real binary on
//! the emulator, walking `warpforge_tools::registry`.

use crate::common::warpforge_text as warpforge;

/// The first word of each table line that ends in `pass` or `FAIL`.
fn verified_kernels(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.ends_with("pass") || l.ends_with("FAIL"))
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

#[test]
fn verify_op_runs_that_operation_only() {
    let args = ["verify", "--backend", "emu", "--random-lengths", "0"];
    let (code, stdout, stderr) = warpforge(&[&args[..], &["--op", "axpy"]].concat());
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(
        verified_kernels(&stdout),
        ["axpy_f32", "axpy_f64"],
        "{stdout}"
    );
    assert!(stdout.contains("verify: 2 passed, 0 failed"), "{stdout}");

    let (code, stdout, stderr) = warpforge(&[&args[..], &["--op", "reduce"]].concat());
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let kernels = verified_kernels(&stdout);
    assert!(kernels.contains(&"sum_f32") && kernels.contains(&"argmax_bf16"));
    assert!(!kernels.iter().any(|k| k.starts_with("axpy")), "{stdout}");

    let (code, stdout, stderr) = warpforge(&[&args[..], &["--op", "gemm"]].concat());
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let kernels = verified_kernels(&stdout);
    // f32 (SIMT, both tiles) and f64 (SIMT, and the FP64 tensor cores: m8n8k4
    // and, the emulator being an sm_90, m16n8k16), f16/bf16 into f32/f16/bf16 (tensor cores, small
    // tile), f16 → f32/f16 and bf16 → f32/bf16 (large and wide tiles), f32
    // through TF32 (small and large tiles), the Hopper kernels of f16 → f32/f16
    // and bf16 → f32/bf16 (the emulator is an sm_90; wide and narrow tiles),
    // × NN, NT, TN, TT; TF32 on Hopper (the two K-major copies and the NT
    // kernel, wide and narrow); then split-k's four sum kernels.
    assert_eq!(kernels.len(), 124, "{stdout}");
    assert!(
        kernels
            .iter()
            .all(|k| k.starts_with("gemm_") || k.starts_with("tf32_k_major_")),
        "{stdout}"
    );
    for k in [
        "gemm_f32_tn_64x64x16",
        "gemm_f32_nt_128x128x8",
        "gemm_f64_tt_64x64x8",
        "gemm_dmma_f64_tn_64x64x16_s3",
        "gemm_dmma16_f64_nt_128x64x16_s3",
        "gemm_bf16_f16_nt_64x64x32_s3",
        "gemm_bf16_bf16_tn_128x128x32_s4",
        "gemm_f16_f32_tt_128x256x32_s3",
        "gemm_tf32_f32_nt_64x64x16_s3",
        "gemm_tf32_f32_tt_128x128x16_s4",
        "gemm_wgmma_bf16_f32_tn_128x256x64_s4",
        "gemm_wgmma_f16_f16_tt_128x256x64_s4",
        "gemm_wgmma_tf32_f32_nt_128x256x32_s4",
        "gemm_wgmma_bf16_bf16_nt_128x128x64_s4",
        "gemm_wgmma_tf32_f32_nt_128x128x32_s4",
        "tf32_k_major_cols",
        "gemm_split_k_sum_bf16",
        "gemm_split_k_sum_f64",
    ] {
        assert!(
            kernels.iter().any(|name| name.starts_with(k)),
            "{k}: {stdout}"
        );
    }
    assert!(stdout.contains("verify: 124 passed, 0 failed"), "{stdout}");
}

#[test]
fn an_unknown_operation_is_a_usage_error_listing_the_known_ones() {
    let (code, _, stderr) = warpforge(&["verify", "--backend", "emu", "--op", "gemv"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("gemv") && stderr.contains("axpy"),
        "{stderr}"
    );
    assert!(
        stderr.contains("reduce") && stderr.contains("gemm"),
        "{stderr}"
    );

    let (code, _, stderr) = warpforge(&["bench", "gemv", "--backend", "emu"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("overlap"), "{stderr}");
}

#[test]
fn bench_axpy_measures_each_size_against_its_copy() {
    let (code, stdout, stderr) = warpforge(&[
        "bench",
        "axpy",
        "--backend",
        "emu",
        "--max-log2",
        "10",
        "--iters",
        "1",
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("copy ") || l.starts_with("axpy_f32 "))
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    // 2^10 f32: the copy moves 8 KiB (read + write), axpy 12 KiB (x, y read, y written).
    assert!(rows[0].starts_with("copy f32 [1024]") && rows[0].contains("8 KiB"));
    assert!(rows[1].starts_with("axpy_f32 f32 [1024]") && rows[1].contains("12 KiB"));
}

/// `warpforge bench gemm` on the emulator, one iteration, squares up to
/// `2^max_log2`, with `more` arguments: its exit code, stdout and stderr.
fn bench_gemm_on_the_emulator(max_log2: &str, more: &[&str]) -> (Option<i32>, String, String) {
    let args = [
        "bench",
        "gemm",
        "--backend",
        "emu",
        "--iters",
        "1",
        "--max-log2",
        max_log2,
    ];
    warpforge(&[&args[..], more].concat())
}

#[test]
fn bench_gemm_reports_tflops_and_says_cublas_is_not_on_the_emulator() {
    let (code, stdout, stderr) = bench_gemm_on_the_emulator("4", &[]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("TFLOP/s"), "{stdout}");
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("gemm_")).collect();
    // f32, f32 through TF32, f64, and f16 and bf16 into f32 and into their
    // own type × the square 16 and three rectangles.
    assert_eq!(rows.len(), 28, "{stdout}");
    for kernel in [
        "gemm_tf32_f32_nn",
        "gemm_f16_f32_nn",
        "gemm_f16_f16_nn",
        "gemm_bf16_f32_nn",
        "gemm_bf16_bf16_nn",
    ] {
        assert_eq!(
            rows.iter().filter(|r| r.starts_with(kernel)).count(),
            4,
            "{stdout}"
        );
    }
    assert!(
        rows[0].starts_with("gemm_f32_nn_64x64x16 f32 [16×16×16]"),
        "{stdout}"
    );
    // The emulator is an H100's: truncated TF32 too, against the rounded
    // rows' cuBLAS case (no case of its own), on the narrow Hopper kernel
    // (these grids' wide tiles would leave most of its 132 SMs idle).
    let truncated = "truncated_nn gemm_wgmma_tf32_f32_nt_128x128x32_s4 f32 [";
    assert_eq!(stdout.matches(truncated).count(), 4, "{stdout}");
    assert_eq!(
        stdout
            .matches("skipped: cuBLAS: not available on the emulator")
            .count(),
        28,
        "{stdout}"
    );
}

#[test]
fn bench_gemm_times_the_truncated_tf32_rows_at_the_transposes_asked_for() {
    let (code, stdout, stderr) =
        bench_gemm_on_the_emulator("3", &["--trans", "nt", "--only", "tf32-truncate"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    // 8³ and the three rectangles of side 4: the truncated rows and their
    // cuBLAS TF32 NT cases, nothing else.
    let truncated = "truncated_nt gemm_wgmma_tf32_f32_nt_128x128x32_s4 f32 [";
    assert_eq!(stdout.matches(truncated).count(), 4, "{stdout}");
    assert!(stdout.contains(&format!("{truncated}8×8×8]")), "{stdout}");
    assert_eq!(
        stdout.matches("cublas_gemmex_tf32_nt f32 [").count(),
        4,
        "{stdout}"
    );
    assert!(
        !stdout.contains("gemm_tf32_f32_") && !stdout.contains("gemm_f32_"),
        "{stdout}"
    );
    let (code, _, stderr) = warpforge(&["bench", "gemm", "--backend", "emu", "--trans", "tx"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("nn, nt, tn, tt"), "{stderr}");
}

#[test]
fn bench_options_that_do_not_apply_are_refused() {
    let (code, _, stderr) = warpforge(&["bench", "overlap", "--backend", "emu", "--iters", "3"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("does not apply to `bench overlap`"),
        "{stderr}"
    );
    let (code, _, stderr) = warpforge(&["bench", "reduce", "--backend", "emu", "--mib", "1"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--mib does not apply to `bench reduce`"),
        "{stderr}"
    );
    for (what, gemm_only) in [
        ("reduce", ["--trans", "nt"]),
        ("overlap", ["--only", "f32"]),
    ] {
        let mut args = vec!["bench", what, "--backend", "emu"];
        args.extend(gemm_only);
        let (code, _, stderr) = warpforge(&args);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!("--trans/--only does not apply to `bench {what}`")),
            "{stderr}"
        );
    }
}

#[test]
fn bench_json_plot_compare_and_table_work_together() {
    let dir = crate::common::temp_dir("bench-json");
    let path = |name: &str| dir.join(name).display().to_string();
    let bench = |json: &str, plot: Option<&str>| {
        let mut args = vec![
            "bench",
            "reduce",
            "--backend",
            "emu",
            "--max-log2",
            "10",
            "--iters",
            "1",
            "--json",
            json,
        ];
        if let Some(svg) = plot {
            args.extend(["--plot", svg]);
        }
        let (code, stdout, stderr) = warpforge(&args);
        assert_eq!(code, Some(0), "{stdout}{stderr}");
        stdout
    };
    let (old, new, svg) = (path("old.json"), path("new.json"), path("reduce.svg"));
    let table = bench(&old, Some(&svg));
    bench(&new, None);

    // One record per line of the text table, with the machine and the date.
    let file = warpforge_cli::bench_data::BenchFile::read(old.as_ref()).unwrap();
    let rows = table.lines().filter(|l| l.contains(" [")).count();
    assert_eq!(file.records.len(), rows, "{table}");
    assert!(
        file.records
            .iter()
            .all(|r| r.family == "reduce" && r.gpu.contains("emulator"))
    );
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.contains("<svg") && chart.contains("GB/s"), "{chart}");

    let (code, stdout, stderr) = warpforge(&["bench", "compare", &old, &new]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(&format!("{rows} cases compared")),
        "{stdout}"
    );

    let (code, stdout, stderr) = warpforge(&["bench", "table", &old]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.starts_with("| device | benchmark | case |"),
        "{stdout}"
    );
    assert!(stdout.contains("| reduce | sum f32 [1024] |"), "{stdout}");

    // Misuse is a usage error that says what is wrong.
    let (code, _, stderr) = warpforge(&["bench", "compare", &old]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("two results files"), "{stderr}");
    std::fs::write(dir.join("bad.json"), "{\"schema\": \"other/9\"}").unwrap();
    let (code, _, stderr) = warpforge(&["bench", "table", &path("bad.json")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("schema `other/9`") && stderr.contains("bad.json"),
        "{stderr}"
    );
    let (code, _, stderr) = warpforge(&["bench", "overlap", "--backend", "emu", "--json", &old]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("does not apply to `bench overlap`"),
        "{stderr}"
    );
}

#[test]
fn doctor_timings_on_the_emulator_says_what_it_could_not_measure() {
    if warpforge::gpu::driver_present() {
        return; // a machine with a driver measures it all (the GPU suite runs it there)
    }
    let (code, stdout, stderr) = warpforge(&["doctor", "--timings"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    for line in [
        "load libcuda + cuInit",
        "primary context of GPU 0",
        "load module warpforge-kernels",
    ] {
        let l = stdout
            .lines()
            .find(|l| l.contains(line))
            .unwrap_or_else(|| panic!("{line}: {stdout}"));
        assert!(l.contains("not measured"), "{l}");
    }
    let sum = stdout
        .lines()
        .find(|l| l.contains("first reduce::sum of 2^20 f32 (emulator)"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(sum.contains(" ms") && sum.contains("= "), "{sum}");
    assert!(
        stdout.contains("driver floor (cuInit + context only): not measured"),
        "{stdout}"
    );
    assert!(stdout.contains("over the floor: not measured"), "{stdout}");
    assert!(
        stdout.contains("not measured: load libcuda + cuInit"),
        "{stdout}"
    );
}

/// `verify --list`: the emulator's dispatch table (it emulates an sm_90, so
/// the 16 Hopper kernels are in it) with the operation covering each, run
/// without verifying anything; exit 1 when an operation subset leaves
/// kernels uncovered.
#[test]
fn verify_list_prints_the_dispatch_table_and_what_covers_each_kernel() {
    let (code, stdout, stderr) = warpforge(&["verify", "--backend", "emu", "--list"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("dispatch table of CPU emulator") && stdout.contains("9.0"),
        "{stdout}"
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .skip(2)
        .take_while(|l| !l.starts_with("verify --list:"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    let wgmma: Vec<&Vec<&str>> = rows
        .iter()
        .filter(|r| r[0].starts_with("gemm_wgmma_"))
        .collect();
    // 17 wide and 17 narrow.
    assert_eq!(wgmma.len(), 34, "{stdout}");
    for r in &wgmma {
        assert_eq!(
            r[1..],
            ["warpforge-kernels-hopper", "yes", "(gemm)"],
            "{r:?}"
        );
    }
    for (kernel, op) in [
        ("axpy_f32", "(axpy)"),
        ("reduce_fused_lse_bf16", "(reduce)"),
        ("transpose_f32", "(conv2d)"),
    ] {
        let row = rows.iter().find(|r| r[0] == kernel).unwrap();
        assert_eq!(row[2..], ["yes", op], "{row:?}");
    }
    assert!(
        stdout.contains(&format!(
            "verify --list: {n} of {n} kernels covered, 0 not covered",
            n = rows.len()
        )),
        "{stdout}"
    );

    let (code, stdout, stderr) =
        warpforge(&["verify", "--backend", "emu", "--list", "--op", "axpy"]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("axpy_f64"), "{stdout}");
    let no = stdout.lines().filter(|l| l.ends_with(" NO")).count();
    assert!(
        stdout.contains(&format!("kernels covered, {no} not covered")) && no > 300,
        "{stdout}"
    );
}

/// `warpforge --version` and every bench record name the commit the binary was
/// built from, wherever it runs (here: a folder that is no git checkout);
/// `WARPFORGE_COMMIT` overrides it (the GPU suite names the commit it packed).
#[test]
fn the_binary_and_its_bench_records_name_the_commit_it_was_built_from() {
    use warpforge_cli::bench_data::{BUILD_COMMIT, BenchFile};
    let head = std::process::Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    match head {
        // Built in this checkout: its HEAD, maybe with ` (modified)`.
        Some(head) => assert!(
            BUILD_COMMIT == head || BUILD_COMMIT == format!("{head} (modified)"),
            "{BUILD_COMMIT} is not HEAD {head}"
        ),
        None => assert!(BUILD_COMMIT.starts_with("unknown"), "{BUILD_COMMIT}"),
    }
    let (code, stdout, _) = warpforge(&["--version"]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains(BUILD_COMMIT), "{stdout}");

    let dir = crate::common::temp_dir("bench-commit");
    let json = dir.join("r.json").display().to_string();
    let commit_of = |env: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_warpforge"));
        cmd.current_dir(&dir).env_remove("WARPFORGE_COMMIT");
        if let Some(c) = env {
            cmd.env("WARPFORGE_COMMIT", c);
        }
        let args = [
            "bench",
            "reduce",
            "--backend",
            "emu",
            "--max-log2",
            "6",
            "--iters",
            "1",
        ];
        let out = cmd.args(args).args(["--json", &json]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = BenchFile::read(json.as_ref()).unwrap();
        assert!(!file.records.is_empty());
        let commits: std::collections::BTreeSet<String> =
            file.records.into_iter().map(|r| r.commit).collect();
        assert_eq!(commits.len(), 1, "{commits:?}");
        commits.into_iter().next().unwrap()
    };
    assert_eq!(commit_of(None), BUILD_COMMIT);
    assert_eq!(commit_of(Some("0123abc")), "0123abc");
}
