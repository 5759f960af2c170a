//! `warpforge doctor --timings`: where a process's start-up goes, up to its
//! first reduction, and how far that is above the driver's own floor.
//!
//! Two kinds of child process of the same executable do the measuring, so
//! that neither inherits a loaded driver from the other:
//! - **floor** (`doctor --timings-child floor`): loads libcuda, `cuInit`,
//!   retains GPU 0's primary context, exits. Nothing a CUDA program does can
//!   start faster.
//! - **first reduction** (`doctor --timings-child first-reduction`): the same,
//!   then everything warpforge does for `reduce::sum` of 2^20 f32: open the
//!   device, load the library's module (cubin or PTX JIT, and what that load
//!   cost: unpacking and the driver), a first launch, the
//!   upload, the first sum and a second one. It prints each phase as a line
//!   `phase<TAB>seconds or -<TAB>note`.
//!
//! The parent times each child from spawn to exit, twice, and judges the
//! smallest first-reduction process against the smallest floor: the target is
//! at most [`TARGET_OVER_FLOOR_MS`] above it. Without a GPU the GPU phases are
//! reported as not measured, with the reason, and the emulator's are measured.

use cudarc::driver::CudaContext;
use std::fmt;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use warpforge::{Device, LaunchConfig, ptx, reduce};
use warpforge_kernels::elementwise::axpy_f32;

/// The target: the first reduction's process within this many milliseconds
/// of the driver's floor.
pub const TARGET_OVER_FLOOR_MS: f64 = 100.0;

/// Elements of the first reduction: 2^20 f32.
pub const FIRST_SUM_ELEMENTS: usize = 1 << 20;

/// Each kind of child runs this many times; the smallest time counts.
const RUNS: usize = 2;

/// One measured (or unmeasurable) phase.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// What it is.
    pub name: String,
    /// How long it took, or `None` where it could not be measured.
    pub seconds: Option<f64>,
    /// What was loaded, or why it was not measured.
    pub note: String,
}

impl Phase {
    fn measured(name: impl Into<String>, took: Duration, note: impl Into<String>) -> Phase {
        Phase {
            name: name.into(),
            seconds: Some(took.as_secs_f64()),
            note: note.into(),
        }
    }

    fn unmeasured(name: impl Into<String>, why: impl Into<String>) -> Phase {
        Phase {
            name: name.into(),
            seconds: None,
            note: why.into(),
        }
    }

    /// The child's line for this phase.
    pub fn to_line(&self) -> String {
        let secs = self
            .seconds
            .map_or_else(|| "-".to_owned(), |s| format!("{s:.6}"));
        format!(
            "{}\t{secs}\t{}",
            self.name,
            self.note.replace(['\t', '\n'], " ")
        )
    }

    /// Parses a child's line; `None` for anything else it printed.
    pub fn from_line(line: &str) -> Option<Phase> {
        let mut parts = line.splitn(3, '\t');
        let (name, secs, note) = (parts.next()?, parts.next()?, parts.next()?);
        let seconds = match secs {
            "-" => None,
            s => Some(
                s.parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s >= 0.0)?,
            ),
        };
        Some(Phase {
            name: name.to_owned(),
            seconds,
            note: note.to_owned(),
        })
    }
}

/// Times `f`.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

/// The floor child: libcuda, `cuInit` and GPU 0's primary context, nothing
/// else. Err says why there is no floor to measure.
pub fn floor_child() -> Result<(), String> {
    if !warpforge::gpu::driver_present() {
        return Err("no NVIDIA driver (libcuda) on this machine".to_owned());
    }
    let ctx = CudaContext::new(0).map_err(|e| format!("{e:?}"))?;
    drop(ctx);
    Ok(())
}

/// The GPU's phases: libcuda and `cuInit`, GPU 0's primary context, then
/// `Device::gpu(0)`. The context is returned with the device and held, as a
/// program holds it; `None` where a phase fails, with the reason recorded.
fn open_gpu(phases: &mut Vec<Phase>) -> Option<(Device, Arc<CudaContext>)> {
    const INIT: &str = "load libcuda + cuInit";
    const CONTEXT: &str = "primary context of GPU 0";
    const DEVICE: &str = "Device::gpu(0)";
    if !warpforge::gpu::driver_present() {
        let why = "not measured: no NVIDIA driver (libcuda) on this machine";
        phases.push(Phase::unmeasured(INIT, why));
        phases.push(Phase::unmeasured(CONTEXT, why));
        return None;
    }
    let (init, took) = timed(cudarc::driver::result::init);
    if let Err(e) = init {
        phases.push(Phase::unmeasured(INIT, format!("failed: {e:?}")));
        return None;
    }
    phases.push(Phase::measured(INIT, took, ""));
    let (context, took) = timed(|| CudaContext::new(0));
    let context = match context {
        Ok(context) => context,
        Err(e) => {
            phases.push(Phase::unmeasured(
                CONTEXT,
                format!("not measured: no usable GPU 0 ({e:?})"),
            ));
            return None;
        }
    };
    phases.push(Phase::measured(CONTEXT, took, ""));
    let (dev, took) = timed(|| Device::gpu(0));
    match dev {
        Ok(dev) => {
            phases.push(Phase::measured(
                DEVICE,
                took,
                "attributes, library variant check",
            ));
            Some((dev, context))
        }
        Err(e) => {
            phases.push(Phase::unmeasured(
                DEVICE,
                format!("failed: {}", e.headline()),
            ));
            None
        }
    }
}

/// The first-reduction child's phases, measured in this process (call it
/// first thing in a fresh process, as `doctor --timings-child` does).
pub fn first_reduction_phases() -> Vec<Phase> {
    let mut phases = Vec::new();
    let (dev, _context, on) = match open_gpu(&mut phases) {
        Some((dev, context)) => (dev, Some(context), ""),
        None => (Device::emulator(), None, " (emulator)"),
    };
    let load = format!("load module {}", ptx::REDUCE.name);
    let (loaded, took) = timed(|| dev.load(&ptx::REDUCE));
    match loaded {
        Err(e) => {
            phases.push(Phase::unmeasured(load, format!("failed: {}", e.headline())));
            return phases;
        }
        Ok(()) if dev.is_gpu() => {
            let what = dev.module_load(&ptx::REDUCE);
            phases.push(Phase::measured(
                load,
                took,
                what.map_or_else(String::new, |l| l.to_string()),
            ));
        }
        Ok(()) => {
            phases.push(Phase::unmeasured(
                load,
                "not measured: the emulator loads no machine code",
            ));
            phases.extend(host_side_of_a_load((9, 0)));
        }
    }
    let mut run = |name: &str, f: &mut dyn FnMut() -> warpforge::Result<String>| {
        let (r, took) = timed(&mut *f);
        let ok = r.is_ok();
        phases.push(match r {
            Ok(note) => Phase::measured(format!("{name}{on}"), took, note),
            Err(e) => Phase::unmeasured(format!("{name}{on}"), format!("failed: {}", e.headline())),
        });
        ok
    };
    let ok = run("first launch (axpy, 1 element, synchronised)", &mut || {
        let x = dev.upload(&[1.0f32])?;
        let mut y = dev.upload(&[1.0f32])?;
        dev.launch(
            axpy_f32,
            LaunchConfig::for_elements(1, 32)?,
            (2.0f32, &x, &mut y),
        )?;
        dev.synchronize()?;
        Ok(String::new())
    });
    if !ok {
        return phases;
    }
    let host: Vec<f32> = (0..FIRST_SUM_ELEMENTS).map(|i| (i % 7) as f32).collect();
    let mut buffer = None;
    let ok = run("upload 2^20 f32", &mut || {
        buffer = Some(dev.upload(&host)?);
        Ok("4 MiB from pageable memory".to_owned())
    });
    let Some(x) = buffer.filter(|_| ok) else {
        return phases;
    };
    let expected: f64 = host.iter().map(|&v| f64::from(v)).sum();
    for name in ["first reduce::sum of 2^20 f32", "second reduce::sum"] {
        let ok = run(name, &mut || {
            let s = reduce::sum(&x)?;
            // Integers below 2^24 per element: the f32 sum is exact to 1e-6 relative.
            let close = (f64::from(s) - expected).abs() <= expected * 1e-6;
            Ok(if close {
                format!("= {s}")
            } else {
                format!("= {s}, expected {expected}: WRONG")
            })
        });
        if !ok {
            break;
        }
    }
    phases
}

/// The host's share of loading the library on a GPU of `compute_capability`,
/// measured without one: unpacking its cubin and reading every entry's
/// parameters from the PTX (the driver's share needs the GPU).
fn host_side_of_a_load(compute_capability: (i32, i32)) -> Vec<Phase> {
    let (major, minor) = compute_capability;
    let mut phases = Vec::new();
    let Some(image) = ptx::choose_image(compute_capability, &ptx::REDUCE) else {
        return phases;
    };
    if let ptx::Image::Cubin { cubin, .. } = &image {
        let (elf, took) = timed(|| cubin.elf());
        let note = match elf {
            Ok(bytes) => format!(
                "{} MB of ELF (host only, no GPU needed)",
                bytes.len() / 1_000_000
            ),
            Err(e) => format!("failed: {e}"),
        };
        phases.push(Phase::measured(
            format!("  unpack the {} cubin for {major}.{minor}", cubin.arch()),
            took,
            note,
        ));
    }
    let (params, took) = timed(|| image.variant().entry_params("axpy_f32"));
    phases.push(Phase::measured(
        "  find one entry's parameters in the PTX",
        took,
        format!(
            "axpy_f32: {} parameters, in {} MB of PTX (host only; once per kernel, at its first launch)",
            params.map_or(0, |p| p.map_or(0, |p| p.len())),
            image.variant().source.len() / 1_000_000
        ),
    ));
    phases
}

/// What `doctor --timings` found.
#[derive(Clone, Debug, PartialEq)]
pub struct StartupReport {
    /// The first-reduction child's phases (its first run).
    pub phases: Vec<Phase>,
    /// The floor processes' wall times, spawn to exit; empty where there is
    /// no floor to measure, with the reason in `floor_missing`.
    pub floor: Vec<Duration>,
    /// Why the floor was not measured.
    pub floor_missing: Option<String>,
    /// The first-reduction processes' wall times.
    pub first_reduction: Vec<Duration>,
}

impl StartupReport {
    /// The smallest first-reduction process minus the smallest floor, in ms.
    pub fn over_floor_ms(&self) -> Option<f64> {
        let min = |v: &[Duration]| v.iter().min().map(|d| d.as_secs_f64() * 1e3);
        Some(min(&self.first_reduction)? - min(&self.floor)?)
    }

    /// Whether the first reduction's process is within the target.
    pub fn meets_target(&self) -> Option<bool> {
        self.over_floor_ms().map(|ms| ms <= TARGET_OVER_FLOOR_MS)
    }
}

/// Runs the children (`exe doctor --timings-child KIND`) and gathers the report.
pub fn measure(exe: &std::path::Path) -> Result<StartupReport, String> {
    let spawn = |kind: &str| -> Result<(Duration, String, String, bool), String> {
        let start = Instant::now();
        let out = Command::new(exe)
            .args(["doctor", "--timings-child", kind])
            .output()
            .map_err(|e| format!("starting {}: {e}", exe.display()))?;
        Ok((
            start.elapsed(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.status.success(),
        ))
    };
    let mut report = StartupReport {
        phases: Vec::new(),
        floor: Vec::new(),
        floor_missing: None,
        first_reduction: Vec::new(),
    };
    for run in 0..RUNS {
        let (took, _, err, ok) = spawn("floor")?;
        if ok {
            report.floor.push(took);
        } else if report.floor_missing.is_none() {
            report.floor_missing = Some(
                err.lines()
                    .last()
                    .map(|l| l.trim_start_matches("error: "))
                    .unwrap_or("the floor process failed")
                    .to_owned(),
            );
        }
        let (took, out2, err2, ok2) = spawn("first-reduction")?;
        if !ok2 {
            return Err(format!(
                "the first-reduction process failed: {}{}",
                out2.trim(),
                err2.trim()
            ));
        }
        report.first_reduction.push(took);
        if run == 0 {
            report.phases = out2.lines().filter_map(Phase::from_line).collect();
        }
    }
    Ok(report)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

impl fmt::Display for StartupReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "start-up, in one fresh process (first run):")?;
        let width = self
            .phases
            .iter()
            .map(|p| p.name.chars().count())
            .max()
            .unwrap_or(0);
        let mut total = 0.0;
        let mut unmeasured = Vec::new();
        for p in &self.phases {
            match p.seconds {
                Some(s) => {
                    total += s;
                    writeln!(
                        f,
                        "  {:<width$}  {:>9}  {}",
                        p.name,
                        format!("{:.1} ms", s * 1e3),
                        p.note
                    )?;
                }
                None => {
                    writeln!(f, "  {:<width$}  {:>9}  {}", p.name, "—", p.note)?;
                    unmeasured.push(p.name.as_str());
                }
            }
        }
        writeln!(
            f,
            "  {:<width$}  {:>9}",
            "sum of the phases",
            format!("{:.1} ms", total * 1e3)
        )?;
        writeln!(f, "whole processes, spawn to exit ({RUNS} runs each):")?;
        let list = |v: &[Duration]| v.iter().map(|d| ms(*d)).collect::<Vec<_>>().join(", ");
        match &self.floor_missing {
            Some(why) if self.floor.is_empty() => writeln!(
                f,
                "  driver floor (cuInit + context only): not measured: {why}"
            )?,
            _ => writeln!(
                f,
                "  driver floor (cuInit + context only): {}",
                list(&self.floor)
            )?,
        }
        writeln!(
            f,
            "  first reduction (all of the above):   {}",
            list(&self.first_reduction)
        )?;
        match self.over_floor_ms() {
            Some(over) => writeln!(
                f,
                "over the floor: {over:.1} ms (target ≤ {TARGET_OVER_FLOOR_MS:.0} ms): {}",
                if over <= TARGET_OVER_FLOOR_MS {
                    "met"
                } else {
                    "MISSED"
                }
            )?,
            None => writeln!(
                f,
                "over the floor: not measured (no driver floor on this machine)"
            )?,
        }
        if !unmeasured.is_empty() {
            writeln!(f, "not measured: {}", unmeasured.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_lines_round_trip_and_other_output_is_ignored() {
        let p = Phase::measured("load module m", Duration::from_micros(1500), "sm_90\tcubin");
        let back = Phase::from_line(&p.to_line()).unwrap();
        assert_eq!(back.name, "load module m");
        assert!((back.seconds.unwrap() - 0.0015).abs() < 1e-9);
        assert_eq!(back.note, "sm_90 cubin");
        let u = Phase::unmeasured("cuInit", "not measured: no driver");
        assert_eq!(Phase::from_line(&u.to_line()), Some(u));
        assert_eq!(Phase::from_line("warning: something"), None);
        assert_eq!(Phase::from_line("a\tNaN\tb"), None);
    }

    #[test]
    fn the_report_judges_the_smallest_process_against_the_smallest_floor() {
        let d = Duration::from_millis;
        let mut r = StartupReport {
            phases: vec![Phase::measured("x", d(5), "")],
            floor: vec![d(300), d(200)],
            floor_missing: None,
            first_reduction: vec![d(400), d(290)],
        };
        assert_eq!(r.over_floor_ms(), Some(90.0));
        assert_eq!(r.meets_target(), Some(true));
        assert!(
            r.to_string()
                .contains("over the floor: 90.0 ms (target ≤ 100 ms): met")
        );
        r.first_reduction = vec![d(350)];
        assert_eq!(r.meets_target(), Some(false));
        assert!(r.to_string().contains("MISSED"));
        r.floor.clear();
        r.floor_missing = Some("no NVIDIA driver".into());
        assert_eq!(r.over_floor_ms(), None);
        let text = r.to_string();
        assert!(
            text.contains("driver floor (cuInit + context only): not measured: no NVIDIA driver")
        );
        assert!(text.contains("over the floor: not measured"));
    }
}
