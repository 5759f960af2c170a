//! Fault reports that point at the line: every planted fault of
//! `warpforge_testkit::faults` (one per class the emulator reports) names
//! the planted lines of `probes/src/faults.rs`, both sides of a race; its
//! correct twin runs clean; its report's headline fits in 160 characters,
//! with the details and the emulator's advice after it; and the emulator
//! writes nothing to stderr while it finds one (checked in a child process,
//! where no test harness captures the output).

use warpforge::{Device, Dim3, EmuError, Error, Fault, FaultCode, LaunchConfig, SourceLocation};
use warpforge_testkit::faults::{self, BLOCK, FILE};

/// Every planted kernel, in the order of `probes/src/faults.rs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Planted {
    InputOob,
    SharedOob,
    Misaligned,
    Guard,
    Panic,
    DivergentBarrier,
    MaskMissing,
    MaskRead,
    SharedRace,
    GlobalRace,
    Uninit,
    CpAsync,
    Spin,
}

const ALL: [Planted; 13] = [
    Planted::InputOob,
    Planted::SharedOob,
    Planted::Misaligned,
    Planted::Guard,
    Planted::Panic,
    Planted::DivergentBarrier,
    Planted::MaskMissing,
    Planted::MaskRead,
    Planted::SharedRace,
    Planted::GlobalRace,
    Planted::Uninit,
    Planted::CpAsync,
    Planted::Spin,
];

/// Launches `planted` (its twin if `fixed` is 1) on a fresh emulator, with
/// one block of [`BLOCK`] threads.
fn run(planted: Planted, fixed: u32) -> warpforge::Result<()> {
    let dev = Device::emulator();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(BLOCK));
    let n = BLOCK as usize;
    let x = dev.upload(&(0..BLOCK).collect::<Vec<u32>>())?;
    let mut out = dev.alloc_zeroed::<u32>(n)?;
    match planted {
        Planted::InputOob => dev.launch(faults::probe_fault_input_oob, cfg, (&x, fixed, &mut out)),
        Planted::SharedOob => dev.launch(faults::probe_fault_shared_oob, cfg, (fixed, &mut out)),
        Planted::Misaligned => dev.launch(faults::probe_fault_misaligned, cfg, (fixed, &mut out)),
        Planted::Guard => {
            // 40 elements for 64 threads: threads 40.. get no slot.
            let mut short = dev.alloc_zeroed::<u32>(40)?;
            dev.launch(faults::probe_fault_guard, cfg, (fixed, &mut short))
        }
        Planted::Panic => dev.launch(faults::probe_fault_panic, cfg, (&x, fixed, &mut out)),
        Planted::DivergentBarrier => dev.launch(
            faults::probe_fault_divergent_barrier,
            cfg,
            (fixed, &mut out),
        ),
        Planted::MaskMissing => {
            dev.launch(faults::probe_fault_mask_missing, cfg, (fixed, &mut out))
        }
        Planted::MaskRead => dev.launch(faults::probe_fault_mask_read, cfg, (fixed, &mut out)),
        Planted::SharedRace => dev.launch(faults::probe_fault_shared_race, cfg, (fixed, &mut out)),
        Planted::GlobalRace => dev.launch(faults::probe_fault_global_race, cfg, (fixed, &mut out)),
        Planted::Uninit => dev.launch(faults::probe_fault_uninit, cfg, (fixed, &mut out)),
        Planted::CpAsync => dev.launch(faults::probe_fault_cp_async, cfg, (&x, fixed, &mut out)),
        Planted::Spin => dev.launch(faults::probe_fault_spin, cfg, (fixed, &mut out)),
    }
}

/// The planted fault's error, and the emulator's report in it.
fn fault(planted: Planted) -> (Error, EmuError) {
    match run(planted, 0) {
        Err(error @ Error::KernelFault { .. }) => {
            let Error::KernelFault {
                emulated: Some(e), ..
            } = &error
            else {
                panic!("{planted:?}: no emulator report in {error}")
            };
            let e = (**e).clone();
            (error, e)
        }
        other => panic!("{planted:?}: expected a kernel fault, got {other:?}"),
    }
}

/// The line of a location in the planted kernels' file (asserting the file).
#[track_caller]
fn line_in_file(at: Option<SourceLocation>, e: &EmuError) -> u32 {
    let at = at.unwrap_or_else(|| panic!("no location in {e}"));
    assert_eq!(at.file, FILE, "{e}");
    assert!(at.column > 0, "{e}");
    at.line
}

fn idx(x: u32) -> Dim3 {
    Dim3::new(x, 0, 0)
}

#[test]
fn each_planted_fault_names_its_file_and_line() {
    for planted in ALL {
        let (_, e) = fault(planted);
        let thread = |t: u32| assert_eq!((e.block, e.thread), (idx(0), idx(t)), "{e}");
        match (&e.fault, planted) {
            (Fault::Panic { message, at }, Planted::InputOob) => {
                assert_eq!(line_in_file(*at, &e), faults::INPUT_OOB_LINE, "{e}");
                assert!(message.contains("index out of bounds"), "{e}");
                thread(63);
            }
            (Fault::Panic { message, at }, Planted::SharedOob) => {
                assert_eq!(line_in_file(*at, &e), faults::SHARED_OOB_LINE, "{e}");
                assert!(message.contains("shared memory write out of bounds"), "{e}");
                thread(63);
            }
            (Fault::Panic { message, at }, Planted::Misaligned) => {
                assert_eq!(line_in_file(*at, &e), faults::MISALIGNED_LINE, "{e}");
                assert!(message.contains("not 16-byte aligned"), "{e}");
                thread(0);
            }
            (Fault::Panic { message, at }, Planted::Guard) => {
                assert_eq!(line_in_file(*at, &e), faults::GUARD_LINE, "{e}");
                assert_eq!(message, "planted: output index out of bounds", "{e}");
                thread(40);
            }
            (Fault::Panic { message, at }, Planted::Panic) => {
                assert_eq!(line_in_file(*at, &e), faults::PANIC_LINE, "{e}");
                assert_eq!(message, "planted: an input is above the limit", "{e}");
                thread(41);
            }
            (
                Fault::DivergentBarrier {
                    waiting,
                    exited,
                    waiting_at,
                    exited_after,
                },
                Planted::DivergentBarrier,
            ) => {
                assert_eq!((*waiting, *exited), (16, 48), "{e}");
                assert_eq!(waiting_at.len(), 1, "{e}");
                assert_eq!(waiting_at[0].1, 16, "{e}");
                assert_eq!(
                    line_in_file(Some(waiting_at[0].0), &e),
                    faults::BARRIER_LINE,
                    "{e}"
                );
                assert_eq!(
                    line_in_file(*exited_after, &e),
                    faults::BARRIER_EXIT_LINE,
                    "{e}"
                );
                thread(16);
            }
            (
                Fault::WarpMask {
                    missing_lane,
                    at,
                    missing_at,
                    ..
                },
                Planted::MaskMissing,
            ) => {
                assert_eq!(line_in_file(*at, &e), faults::MASK_MISSING_LINE, "{e}");
                assert_eq!(*missing_lane, 16, "{e}");
                assert_eq!(
                    line_in_file(*missing_at, &e),
                    faults::MASK_MISSING_EXIT_LINE,
                    "{e}"
                );
                thread(0);
            }
            (
                Fault::WarpMask {
                    mask,
                    missing_lane,
                    at,
                    ..
                },
                Planted::MaskRead,
            ) => {
                assert_eq!(line_in_file(*at, &e), faults::MASK_READ_LINE, "{e}");
                assert_eq!((*mask, *missing_lane), (0xffff, 16), "{e}");
                thread(0);
            }
            (
                Fault::SharedRace {
                    other,
                    this_writes,
                    other_writes,
                    at,
                    other_at,
                    ..
                },
                Planted::SharedRace,
            ) => {
                // Thread 0 ran first: it stored its slot and read thread 1's; then
                // thread 1's store is the race.
                assert_eq!(
                    line_in_file(Some(*at), &e),
                    faults::SHARED_RACE_STORE_LINE,
                    "{e}"
                );
                assert_eq!(
                    line_in_file(*other_at, &e),
                    faults::SHARED_RACE_LOAD_LINE,
                    "{e}"
                );
                assert_eq!((*this_writes, *other_writes), (true, false), "{e}");
                assert_eq!(*other, Some(idx(0)), "{e}");
                thread(1);
            }
            (Fault::GlobalRace { at, other_at, .. }, Planted::GlobalRace) => {
                // Which thread's read or write comes first depends on the
                // seeded interleaving; the two sides are the read and the write.
                let mut lines = [line_in_file(Some(*at), &e), line_in_file(*other_at, &e)];
                lines.sort_unstable();
                let mut want = [faults::GLOBAL_RACE_GET_LINE, faults::GLOBAL_RACE_SET_LINE];
                want.sort_unstable();
                assert_eq!(lines, want, "{e}");
            }
            (Fault::UninitSharedRead { offset, at }, Planted::Uninit) => {
                assert_eq!(line_in_file(Some(*at), &e), faults::UNINIT_LINE, "{e}");
                assert_eq!(*offset, 4 * 32, "{e}");
                thread(32);
            }
            (
                Fault::CpAsyncPending {
                    issuer,
                    at,
                    issued_at,
                    ..
                },
                Planted::CpAsync,
            ) => {
                assert_eq!(
                    line_in_file(Some(*at), &e),
                    faults::CP_ASYNC_READ_LINE,
                    "{e}"
                );
                assert_eq!(
                    line_in_file(Some(*issued_at), &e),
                    faults::CP_ASYNC_ISSUE_LINE,
                    "{e}"
                );
                assert_eq!(*issuer, idx(0), "{e}");
                thread(0);
            }
            (Fault::SpinDeadlock { at, spinners, .. }, Planted::Spin) => {
                assert_eq!(line_in_file(*at, &e), faults::SPIN_LINE, "{e}");
                assert_eq!(*spinners, 1, "{e}");
                thread(0);
            }
            (fault, planted) => panic!("{planted:?} faulted as {fault:?}: {e}"),
        }
        // The headline names the fault's location as `file:line:column`.
        let at = e
            .fault
            .location()
            .expect("every planted fault has a location");
        assert!(e.headline().contains(&format!(" at {at},")), "{e}");
    }
}

#[test]
fn each_correct_twin_runs_clean() {
    for planted in ALL {
        if let Err(e) = run(planted, 1) {
            panic!("{planted:?}'s twin faulted: {e}");
        }
    }
}

#[test]
fn each_report_is_a_headline_of_at_most_160_characters_then_details_and_advice() {
    for planted in ALL {
        let (error, e) = fault(planted);
        let text = error.to_string();
        let lines: Vec<&str> = text.lines().collect();
        let headline = lines[0];
        assert_eq!(headline, e.headline(), "{planted:?}");
        assert!(
            headline.chars().count() <= EmuError::HEADLINE_MAX && EmuError::HEADLINE_MAX == 160,
            "{planted:?}: {} characters: {headline}",
            headline.chars().count()
        );
        let kernel = format!("kernel `{}`: {} at {FILE}:", e.kernel, e.fault.class());
        assert!(headline.starts_with(&kernel), "{headline}");
        assert!(
            headline.ends_with(&format!(", block {}, thread {}", e.block, e.thread)),
            "{headline}"
        );
        // The details, the launch and the advice follow, indented.
        assert!(lines.len() >= 4, "{text}");
        assert!(lines[1..].iter().all(|l| l.starts_with("  ")), "{text}");
        for detail in e.details() {
            assert!(lines.contains(&format!("  {detail}").as_str()), "{text}");
        }
        assert!(
            lines.contains(&"  launch: grid (1, 1, 1), block (64, 1, 1), on the CPU emulator"),
            "{text}"
        );
        assert!(
            lines.contains(&format!("  {}", e.advice()).as_str())
                && e.advice().starts_with("fix: "),
            "{text}"
        );
        // Nothing that applies only to a GPU.
        for gpu_only in [
            "compute-sanitizer",
            "StickyFault",
            "--backend emu",
            "H200",
            "driver",
        ] {
            assert!(!text.contains(gpu_only), "{gpu_only:?} in: {text}");
        }
        // The EmuError alone: the same headline, details and advice, without the launch.
        let alone = e.to_string();
        assert!(alone.starts_with(&format!("{headline}\n")), "{alone}");
        assert!(alone.ends_with(e.advice()), "{alone}");
    }
}

#[test]
fn both_sides_of_a_race_are_in_the_report_text() {
    let (error, _) = fault(Planted::SharedRace);
    let text = error.to_string();
    for line in [
        faults::SHARED_RACE_STORE_LINE,
        faults::SHARED_RACE_LOAD_LINE,
    ] {
        assert!(
            text.contains(&format!("{FILE}:{line}:")),
            "{line} not in: {text}"
        );
    }
    assert!(text.contains("thread (0, 0, 0) read it at"), "{text}");
}

#[test]
fn a_gpu_fault_report_advises_the_emulator_and_explains_sticky_faults() {
    let error = Error::KernelFault {
        kernel: "transpose".to_owned(),
        grid: Dim3::x(4),
        block: Dim3::x(256),
        code: FaultCode::Trap,
        detail: "CUDA_ERROR_ILLEGAL_INSTRUCTION (seen while testing; the only kernel in flight)"
            .to_owned(),
        emulated: None,
    };
    let text = error.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "kernel `transpose` faulted on the GPU: trap (a panic, failed assertion or bounds check \
         in the kernel)"
    );
    assert!(lines[0].chars().count() <= 160);
    assert_eq!(
        lines[1],
        "  CUDA_ERROR_ILLEGAL_INSTRUCTION (seen while testing; the only kernel in flight)"
    );
    assert_eq!(lines[2], "  launch: grid (4, 1, 1), block (256, 1, 1)");
    for part in [
        "--backend emu",
        "compute-sanitizer",
        "StickyFault",
        "Device::reset",
    ] {
        assert!(text.contains(part), "{part:?} not in: {text}");
    }
    // Nothing that applies only to the emulator.
    assert!(!text.contains("fix: "), "{text}");
    assert!(
        !text.contains("block (256, 1, 1), on the CPU emulator"),
        "{text}"
    );
}

#[test]
fn a_long_kernel_name_and_path_still_fit_the_headline() {
    let e = EmuError {
        kernel: "k".repeat(200),
        block: Dim3::new(65535, 65535, 63),
        thread: Dim3::new(1023, 1023, 63),
        fault: Fault::UninitSharedRead {
            offset: 0,
            at: SourceLocation {
                file: "/home/someone/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/a-very-long-crate-name-0.1.0/src/kernels/transpose.rs",
                line: 1234,
                column: 56,
            },
        },
    };
    let headline = e.headline();
    assert!(headline.chars().count() <= 160, "{headline}");
    // The file's name and line survive; the kernel's name keeps its start.
    assert!(
        headline.contains("kernels/transpose.rs:1234:56"),
        "{headline}"
    );
    assert!(headline.starts_with("kernel `kkkk"), "{headline}");
    assert!(
        headline.ends_with(", block (65535, 65535, 63), thread (1023, 1023, 63)"),
        "{headline}"
    );
}

/// Runs every planted fault (in the child process of
/// [`planted_faults_write_nothing_to_stderr`]).
#[test]
#[ignore = "run in a child process by planted_faults_write_nothing_to_stderr"]
fn child_runs_every_planted_fault() {
    for planted in ALL {
        let (error, _) = fault(planted);
        println!("{planted:?}: {error}");
    }
    // A twin after the faults: the emulator is still usable in a new device.
    run(Planted::SharedRace, 1).unwrap();
}

#[test]
fn planted_faults_write_nothing_to_stderr() {
    // The test's name in this binary: its module path without the crate's name.
    let name = format!(
        "{}::child_runs_every_planted_fault",
        module_path!().split_once("::").map_or("", |(_, m)| m)
    );
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", &name, "--nocapture"])
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run the test binary");
    let stdout = String::from_utf8_lossy(&child.stdout);
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(child.status.success(), "{stdout}\n{stderr}");
    // The child ran every fault (libtest may start the line with the test's name).
    for planted in ALL {
        assert!(
            stdout.contains(&format!("{planted:?}: kernel `probe_fault_")),
            "{planted:?} not in: {stdout}"
        );
    }
    assert!(stdout.contains("1 passed"), "{stdout}");
    // No panic message (the hook's `thread '…' panicked at`), no backtrace,
    // nothing at all.
    assert_eq!(stderr, "", "the emulator wrote to stderr");
    assert!(!stdout.contains("' panicked at"), "{stdout}");
    assert!(!stdout.contains("stack backtrace"), "{stdout}");
}
