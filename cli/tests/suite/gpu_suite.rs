//! `scripts/gpu-suite run`'s planner, without a GPU: the runner is run over a
//! fake archive (a fake `warpforge` CLI, test binary and compute-sanitizer,
//! all shell scripts that answer as the real ones do), with budgets, hangs and
//! signals, and its summary is read back.

use crate::common::temp_dir;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNNER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/gpu-suite");

/// The fake CLI: `doctor` is ready, `verify` and `bench` pass, and
/// `FAKE_HANG=verify|bench` makes that command hang (not `verify --list`,
/// which runs nothing). Every call's arguments are appended to `$FAKE_CALLS`.
const FAKE_CLI: &str = r#"#!/usr/bin/env bash
echo "$*" >>"$FAKE_CALLS"
case $1 in
doctor)
    if [[ ${2:-} == --timings ]]; then echo "start-up: fake"; exit 0; fi
    echo "GPU 0: Fake GPU"; echo; echo "ready: GPU 0 (Fake GPU)" ;;
verify|bench)
    [[ ${FAKE_HANG:-} == "$1" && ${2:-} != --list ]] && exec sleep 1000
    echo "$1 done" ;;
*) exit 2 ;;
esac
"#;

/// The fake test binary: two ignored tests, no default ones.
const FAKE_TESTS: &str = r#"#!/usr/bin/env bash
if [[ "$*" == "--list --ignored" ]]; then printf 'gpu_a: test\ngpu_b: test\n\n2 tests, 0 benchmarks\n'; exit 0; fi
if [[ $1 == --ignored && ${2:-} == --exact ]]; then printf 'running 1 test\ntest %s ... ok\n' "$3"; exit 0; fi
if [[ $1 == --ignored ]]; then printf 'running 2 tests\n'; exit 0; fi
printf 'running 0 tests\n'
"#;

/// The fake compute-sanitizer: runs the command after `--tool T --error-exitcode N`.
const FAKE_SANITIZER: &str = r#"#!/usr/bin/env bash
shift 4
exec "$@"
"#;

struct Fake {
    dir: PathBuf,
    results: PathBuf,
}

fn write_script(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    let status = Command::new("chmod").arg("755").arg(path).status().unwrap();
    assert!(status.success());
}

impl Fake {
    fn new(label: &str) -> Fake {
        let dir = temp_dir(label);
        write_script(&dir.join("warpforge"), FAKE_CLI);
        write_script(&dir.join("tests"), FAKE_TESTS);
        write_script(&dir.join("compute-sanitizer"), FAKE_SANITIZER);
        let manifest = format!(
            "# warpforge GPU suite manifest: kind, name, absolute path, note\n\
             # commit: 0123abc\n# profile: release\n\
             test\tfake/test/suite\t{}\t-\ncli\twarpforge\t{}\t-\n",
            dir.join("tests").display(),
            dir.join("warpforge").display()
        );
        std::fs::write(dir.join("manifest.tsv"), manifest).unwrap();
        let results = dir.join("results");
        Fake { dir, results }
    }

    /// The runner with `args`, every estimate 1 s unless `env` says otherwise.
    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = Command::new("bash");
        c.arg(RUNNER)
            .args(["run", "--manifest"])
            .arg(self.dir.join("manifest.tsv"))
            .args(["--root", "/", "--results"])
            .arg(&self.results)
            .args(args)
            .env("FAKE_CALLS", self.dir.join("calls.txt"))
            .env("GPU_SUITE_SANITIZER", self.dir.join("compute-sanitizer"));
        for kind in [
            "DOCTOR",
            "TIMINGS",
            "VERIFY",
            "IGNORED",
            "IGNORED_SET",
            "DEFAULT",
            "SANITIZER",
            "BENCH",
        ] {
            c.env(format!("GPU_SUITE_EST_{kind}"), "1");
        }
        for (k, v) in env {
            c.env(k, v);
        }
        c
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
        let out = self.command(args, env).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    fn summary(&self) -> String {
        std::fs::read_to_string(self.results.join("summary.txt"))
            .expect("the runner wrote no summary.txt")
    }

    /// The status column of the summary line of step `label`.
    fn status(&self, label: &str) -> String {
        let tsv = std::fs::read_to_string(self.results.join("summary.tsv")).unwrap();
        tsv.lines()
            .find(|l| l.split('\t').next() == Some(label))
            .unwrap_or_else(|| panic!("no step {label} in:\n{tsv}"))
            .split('\t')
            .nth(1)
            .unwrap()
            .to_owned()
    }

    fn calls(&self) -> String {
        std::fs::read_to_string(self.dir.join("calls.txt")).unwrap_or_default()
    }
}

#[test]
fn a_budget_too_small_for_a_step_skips_it_and_says_so() {
    let fake = Fake::new("suite-small-budget");
    let (code, out) = fake.run(&["--budget", "60"], &[("GPU_SUITE_EST_VERIFY", "1000")]);
    assert_eq!(code, Some(0), "{out}");
    let summary = fake.summary();
    // Both verify steps (the coverage list, then verify) are too big.
    assert_eq!(fake.status("verify --list --backend gpu"), "skipped");
    assert_eq!(fake.status("verify --backend gpu"), "skipped");
    assert!(summary.contains("budget: needs ~1000 s"), "{summary}");
    // Everything that fits ran, in order of value, after the skipped steps.
    for step in [
        "doctor --timings",
        "ignored fake/test/suite gpu_a",
        "bench gemm --backend gpu",
        "bench gemm --trans nt --only tf32-truncate",
        "sanitizer memcheck: verify --backend gpu --op gemm",
        "ignored-set fake/test/suite",
    ] {
        assert_eq!(fake.status(step), "pass", "{step}: {summary}");
    }
    assert!(
        summary.contains("OK so far: 2 steps did not fit in the 60 s budget"),
        "{summary}"
    );
    // Budgeted benches time fewer iterations and leave JSON and a chart.
    let calls = fake.calls();
    let gemm = calls.lines().find(|l| l.starts_with("bench gemm")).unwrap();
    assert!(gemm.contains("--iters 5"), "{gemm}");
    let json = fake.results.join("bench-gemm.json");
    assert!(
        gemm.contains(&format!("--json {}", json.display())),
        "{gemm}"
    );
    assert!(gemm.contains(".svg"), "{gemm}");
    // The truncated TF32 rows at NT beside cuBLAS TF32 NT, up to 4096³, a file of their own.
    let nt = calls.lines().find(|l| l.contains("--trans nt")).unwrap();
    assert!(
        nt.starts_with(
            "bench gemm --backend gpu --trans nt --only tf32-truncate --max-log2 12 --iters 5"
        ),
        "{nt}"
    );
    let json = fake.results.join("bench-gemm-tf32-nt.json");
    assert!(nt.contains(&format!("--json {}", json.display())), "{nt}");
}

#[test]
fn a_step_hanging_past_what_the_budget_left_is_out_of_time_and_the_rest_is_skipped() {
    let fake = Fake::new("suite-hang-budget");
    let start = Instant::now();
    let (code, out) = fake.run(&["--budget", "10"], &[("FAKE_HANG", "verify")]);
    let took = start.elapsed();
    assert_eq!(code, Some(0), "out of time is not a failure: {out}");
    assert!(took < Duration::from_secs(40), "took {took:?}: {out}");
    assert_eq!(fake.status("verify --backend gpu"), "out of time");
    assert_eq!(fake.status("ignored fake/test/suite gpu_a"), "skipped");
    let summary = fake.summary();
    assert!(summary.contains("stopped at the"), "{summary}");
    assert!(
        summary.contains("budget: needs ~1 s, 0 s left"),
        "{summary}"
    );
    assert!(summary.contains("1 out of time"), "{summary}");
}

#[test]
fn a_step_hanging_past_its_own_limit_fails_the_run_with_a_summary() {
    let fake = Fake::new("suite-hang");
    let (code, out) = fake.run(
        &["--only", "verify"],
        &[("FAKE_HANG", "verify"), ("GPU_SUITE_TIMEOUT_VERIFY", "2")],
    );
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(fake.status("verify --backend gpu"), "FAIL");
    let summary = fake.summary();
    assert!(summary.contains("timed out after 2s"), "{summary}");
    assert!(summary.trim_end().ends_with("FAILED"), "{summary}");
}

#[test]
fn a_signal_during_a_step_stops_it_and_still_writes_the_summary() {
    let fake = Fake::new("suite-signal");
    let mut child = fake
        .command(&[], &[("FAKE_HANG", "verify")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the hanging step to start.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !fake.calls().contains("verify --backend gpu") {
        assert!(Instant::now() < deadline, "verify never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let start = Instant::now();
    let status = child.wait().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "the runner waited for the step"
    );
    assert_eq!(status.code(), Some(1));
    let summary = fake.summary();
    assert!(summary.contains("interrupted by SIGTERM"), "{summary}");
    assert!(
        summary.trim_end().ends_with("INTERRUPTED (SIGTERM)"),
        "{summary}"
    );
    assert!(
        summary.contains("doctor --timings"),
        "the steps done are listed: {summary}"
    );
}

#[test]
fn the_quick_plan_runs_each_binarys_gpu_tests_in_one_process_and_smaller_benches() {
    let fake = Fake::new("suite-quick");
    let (code, out) = fake.run(&["--quick", "--list"], &[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("ignored-set fake/test/suite"), "{out}");
    assert!(!out.contains("ignored fake/test/suite gpu_a"), "{out}");
    assert!(out.contains("--max-log2 12"), "{out}");
    assert!(
        out.contains("sanitizer memcheck") && !out.contains("racecheck"),
        "{out}"
    );
    assert!(!out.contains("bench overlap"), "{out}");
    // Order of value: verify, then the GPU tests, then the benches.
    let at = |s: &str| out.find(s).unwrap_or_else(|| panic!("{s} not in {out}"));
    assert!(at("verify --backend gpu") < at("ignored-set"));
    assert!(at("ignored-set") < at("bench reduce"));
    assert!(at("bench conv2d") < at("sanitizer memcheck"));
}

#[test]
fn a_bad_budget_is_a_usage_error() {
    let fake = Fake::new("suite-bad-budget");
    let (code, out) = fake.run(&["--budget", "soon"], &[]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("--budget takes whole seconds"), "{out}");
}

/// The sanitizers run over verify one registry operation at a time, each of
/// memcheck, racecheck, synccheck and initcheck, after `verify --list` (the
/// GPU's dispatch table and what covers it) and `verify`; the script's list
/// of operations is the registry's.
#[test]
fn the_sanitizers_run_over_verify_of_every_operation_after_the_coverage_list() {
    let script = std::fs::read_to_string(RUNNER).unwrap();
    let line = script
        .lines()
        .find(|l| l.starts_with("readonly VERIFY_OPS=("))
        .expect("VERIFY_OPS in the script");
    let ops: Vec<&str> = line
        .trim_start_matches("readonly VERIFY_OPS=(")
        .trim_end_matches(')')
        .split_whitespace()
        .collect();
    let registry: Vec<&str> = warpforge_tools::registry::OPERATIONS
        .iter()
        .map(|op| op.name)
        .collect();
    assert_eq!(ops, registry);

    let fake = Fake::new("suite-sanitizers");
    let (code, out) = fake.run(&["--list"], &[]);
    assert_eq!(code, Some(0), "{out}");
    let at = |s: &str| out.find(s).unwrap_or_else(|| panic!("{s} not in {out}"));
    assert!(at("verify --list --backend gpu") < at("verify --backend gpu\n"));
    for tool in ["memcheck", "racecheck", "synccheck", "initcheck"] {
        for op in &ops {
            let label = format!("sanitizer {tool}: verify --backend gpu --op {op}");
            assert!(at("verify --backend gpu\n") < at(&label), "{label}");
            assert!(
                out.contains(&format!("--tool {tool} --error-exitcode 1")),
                "{out}"
            );
        }
    }
    // Every step of the plan runs, and each sanitizer step calls verify with its --op.
    let (code, out) = fake.run(&["--only", "verify,sanitizer"], &[]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(fake.status("verify --list --backend gpu"), "pass");
    let calls = fake.calls();
    for op in &ops {
        let n = calls
            .lines()
            .filter(|l| *l == format!("verify --backend gpu --op {op}"))
            .count();
        assert_eq!(n, 4, "{op}: {calls}");
    }
}

/// The peers script (PyTorch, CuPy/CUB) times the conv2d bench's layers, and
/// the plan runs it after the conv2d bench whose anchor it checks (here, with
/// no torch and no GPU, it is listed as skipped with the reason).
#[test]
fn the_peers_time_the_benchs_layers_after_the_conv2d_bench() {
    let peers = std::fs::read_to_string(RUNNER.replace("gpu-suite", "peers.py")).unwrap();
    let listed: Vec<String> = peers
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("(\"") && l.ends_with("),"))
        .map(|l| l.trim_end_matches(',').to_owned())
        .collect();
    let bench: Vec<String> = warpforge_tools::bench::conv2d::RESNET50
        .iter()
        .map(|l| {
            let pad = l.rs / 2;
            assert_eq!(l.pad, pad, "{}: peers.py pads R/2", l.name);
            format!(
                "(\"{}\", {}, {}, {}, {}, {}, {})",
                l.name, l.c, l.hw, l.k, l.rs, l.stride, l.groups
            )
        })
        .collect();
    assert_eq!(listed, bench);
    assert!(peers.contains(&format!(
        "BATCH = {}",
        warpforge_tools::bench::conv2d::RESNET50_BATCH
    )));

    let fake = Fake::new("suite-peers");
    let (code, out) = fake.run(&["--list"], &[]);
    assert_eq!(code, Some(0), "{out}");
    let at = |s: &str| out.find(s).unwrap_or_else(|| panic!("{s} not in {out}"));
    assert!(at("bench conv2d --backend gpu") < at("peers: PyTorch and CuPy/CUB"));
}
