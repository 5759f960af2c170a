//! `warpforge doctor` as a user runs it: the real binary, on this machine.

use std::process::{Command, Output};
use warpforge::gpu;
use warpforge_cli::doctor::{self, Verdict};

fn doctor(env: &[(&str, &str)]) -> (Output, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_warpforge"))
        .arg("doctor")
        .envs(env.iter().copied())
        .output()
        .expect("running warpforge doctor");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, stdout)
}

fn gpus_here() -> usize {
    if gpu::driver_present() {
        gpu::device_count().unwrap_or(0)
    } else {
        0
    }
}

fn last_line(stdout: &str) -> &str {
    stdout.trim_end().lines().last().unwrap_or("")
}

#[test]
fn doctor_reports_this_machine() {
    let (out, stdout) = doctor(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for section in [
        "Driver",
        "GPUs",
        "PTX (embedded)",
        "ptxas (for `warpforge ptx`)",
        "Emulator",
        "Verdict",
    ] {
        assert!(
            stdout.lines().any(|l| l == section),
            "no {section} section:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("  warpforge-kernels-reduce sm_80: PTX ISA "),
        "{stdout}"
    );
    assert!(
        stdout.contains("  available (always built in): an f32 sum over 4099 elements"),
        "{stdout}"
    );
    let n = gpus_here();
    if n == 0 {
        assert!(
            out.status.success(),
            "exit {:?}\n{stdout}\n{stderr}",
            out.status
        );
        assert!(
            last_line(&stdout).starts_with("emulator only: "),
            "{stdout}"
        );
        assert!(!stdout.contains("GPU 0:"), "{stdout}");
    } else {
        let report = doctor::gather();
        for g in &report.gpus {
            let name = g.properties.as_ref().map(|p| p.name.as_str()).unwrap_or("");
            let line = format!("  GPU {}: {name}", g.ordinal);
            assert!(stdout.contains(&line), "missing {line:?}:\n{stdout}");
        }
        assert_eq!(report.gpus.len(), n);
        assert_eq!(out.status.success(), report.verdict().is_ok(), "{stdout}");
    }
}

#[test]
fn a_missing_ptxas_is_a_warning_with_its_fix_and_does_not_fail_doctor() {
    let (out, stdout) = doctor(&[("WARPFORGE_PTXAS", "/nonexistent/ptxas")]);
    assert!(
        stdout.contains("WARPFORGE_PTXAS=/nonexistent/ptxas (no such file)"),
        "{stdout}"
    );
    assert!(stdout.contains("  warning: ptxas not found"), "{stdout}");
    assert!(
        stdout.contains("    fix: `pip install nvidia-cuda-nvcc`"),
        "{stdout}"
    );
    if gpus_here() == 0 {
        assert!(out.status.success(), "{stdout}");
        assert!(
            last_line(&stdout).starts_with("emulator only: "),
            "{stdout}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn doctor_says_ready_on_a_gpu_machine() {
    let report = doctor::gather();
    assert!(
        matches!(report.verdict(), Verdict::Ready { .. }),
        "{report}"
    );
    // GPU 0 loads the newest embedded module its compute capability runs
    // (sm_80 on an A100, and on an H100 too while sm_80 is the only one).
    let gpu0 = &report.gpus[0];
    let props = gpu0.properties.as_ref().expect("GPU 0's properties");
    let arch = warpforge::ptx::module_for(props.compute_capability)
        .expect("an embedded module for GPU 0")
        .arch;
    assert_eq!(gpu0.load, Ok(arch), "{report}");
    let (out, stdout) = doctor(&[]);
    assert!(out.status.success(), "{stdout}");
    assert_eq!(
        last_line(&stdout),
        format!("ready: GPU 0 ({}) runs warpforge's kernels", props.name),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("    loaded the {arch} module: ok")),
        "{stdout}"
    );
    // Which machine code it loaded, and why: the library's cubin for this
    // GPU if the build had one, else the PTX, JIT-compiled.
    let expected = warpforge::ptx::choose_image(props.compute_capability, &warpforge::ptx::REDUCE)
        .expect("an image for GPU 0")
        .to_string();
    assert_eq!(gpu0.image.as_deref(), Some(expected.as_str()), "{report}");
    assert!(
        stdout.contains(&format!("    machine code: {expected}\n")),
        "{stdout}"
    );
}
