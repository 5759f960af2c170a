//! Benchmark results as data: the records `bench --json FILE` writes, the
//! comparison of two such files (`bench compare OLD NEW`), and the Markdown
//! tables the README's current GPU results and the docs' are generated from
//! (`bench table FILES…`).
//!
//! A results file is one JSON object: the schema name ([`SCHEMA`]), the run's
//! notes and skipped cases, and one flat [`BenchRecord`] per measured case, each
//! carrying the machine and the commit it was measured on, so records from
//! several files can be pooled (`jq`, pandas) without losing where they came
//! from. Figures that do not exist (no anchor on the emulator, no FLOP count
//! for a bandwidth case) are `null`, never NaN (which JSON cannot hold).
//!
//! ```
//! use warpforge_cli::bench_data::{compare, BenchFile, BenchRecord, RunFacts};
//! let facts = RunFacts::unknown();
//! let record = |seconds: f64, ratio: f64| BenchRecord {
//!     seconds_per_call: seconds,
//!     ratio: Some(ratio),
//!     ..BenchRecord::example("reduce", "sum f32 [1048576]", &facts)
//! };
//! let old = BenchFile::new(vec![record(10e-6, 0.80)], vec![], vec![]);
//! let new = BenchFile::new(vec![record(8e-6, 1.00)], vec![], vec![]);
//! let c = compare(&old, &new, 0.05);
//! assert_eq!(c.rows.len(), 1);
//! assert!((c.rows[0].change - 1.25).abs() < 1e-12); // ratio of ratios
//! assert!(c.to_string().contains("faster"));
//! ```

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::path::Path;
use warpforge::Device;
use warpforge_tools::bench::{BenchReport, BenchRow};

/// The schema name and version every results file starts with; a reader
/// refuses other schemas instead of misreading them.
pub const SCHEMA: &str = "warpforge-bench/1";

/// The default noise threshold of `bench compare`: a change of the ratio of
/// ratios by more than 5 % either way is flagged.
pub const DEFAULT_NOISE: f64 = 0.05;

/// One measured case, flat: what, how fast, against which anchor, on which
/// machine, at which commit, when.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchRecord {
    /// The benchmark (`reduce`, `axpy`, `gemm`, `conv2d`).
    pub family: String,
    /// The case as the text table names it (`sum f32 [1048576]`,
    /// `gemm_f16_f32_nn_128x128x32_s4 f16 [4096×4096×4096]`); unique in a run.
    pub case: String,
    /// The kernel or operation measured (`sum`, `copy`, a GEMM kernel's name).
    pub kernel: String,
    /// The chart series the case belongs to (the kernel without its tile
    /// shape, after the words before it that name a series: conv2d's
    /// layout, gemm's `truncated_nt`; plus the dtype and the reduced axis).
    pub series: String,
    /// Element type of the input.
    pub dtype: String,
    /// Row-major shape of the input; GEMM `[m, n, k]`; conv2d `[N, C, H, W, K, R, S]`.
    pub shape: Vec<usize>,
    /// The reduced axis, for a reduction along one.
    pub axis: Option<usize>,
    /// Median seconds per call.
    pub seconds_per_call: f64,
    /// Bytes per call: moved (bandwidth cases) or the least traffic (compute cases).
    pub bytes: u64,
    /// `bytes / seconds_per_call / 1e9`.
    pub gbps: f64,
    /// Floating-point operations per call of a compute-bound case.
    pub flops: Option<u64>,
    /// `flops / seconds_per_call / 1e12`.
    pub tflops: Option<f64>,
    /// What the case is measured against: `copy` (a device-to-device copy of
    /// the same tensor), `cuBLAS`, `cuDNN`.
    pub anchor: String,
    /// The anchor's GB/s on the same case, measured in the same run.
    pub anchor_gbps: Option<f64>,
    /// The anchor's TFLOP/s on the same case (compute cases).
    pub anchor_tflops: Option<f64>,
    /// warpforge ÷ anchor (throughput); `None` without an anchor.
    pub ratio: Option<f64>,
    /// The GPU's name, or the emulator's.
    pub gpu: String,
    /// `8.0`, `9.0`; the emulated architecture's on the emulator.
    pub compute_capability: String,
    /// The NVIDIA driver's version (`580.105.08`), or `none`.
    pub driver: String,
    /// The CUDA version the driver supports (`13.0`), or `none`.
    pub cuda: String,
    /// The commit measured: `WARPFORGE_COMMIT`, else the one the binary was
    /// built from ([`BUILD_COMMIT`]).
    pub commit: String,
    /// When, UTC, RFC 3339 to the second.
    pub date: String,
}

/// A case that was not measured, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SkippedRecord {
    /// The benchmark.
    pub family: String,
    /// The case.
    pub case: String,
    /// Why (out of memory, anchor library missing).
    pub reason: String,
}

/// A results file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchFile {
    /// [`SCHEMA`].
    pub schema: String,
    /// Lines about the run (which cuBLAS, from where).
    pub notes: Vec<String>,
    /// Cases not measured.
    pub skipped: Vec<SkippedRecord>,
    /// One per measured case.
    pub records: Vec<BenchRecord>,
}

/// Where and when a run happened: the fields every record repeats.
#[derive(Clone, Debug, PartialEq)]
pub struct RunFacts {
    /// The device's name.
    pub gpu: String,
    /// Its compute capability (`9.0`).
    pub compute_capability: String,
    /// The NVIDIA driver version, or `none`.
    pub driver: String,
    /// The CUDA version of the driver, or `none`.
    pub cuda: String,
    /// The commit.
    pub commit: String,
    /// RFC 3339, UTC.
    pub date: String,
}

impl RunFacts {
    /// The facts of a run on `dev`, now.
    pub fn gather(dev: &Device) -> RunFacts {
        let (major, minor) = dev.compute_capability();
        let (driver, cuda) = match dev.gpu_info() {
            Some(info) => (
                crate::doctor::nvidia_driver_version().unwrap_or_else(|| "unknown".to_owned()),
                warpforge::ptx::format_cuda_version(info.driver_version),
            ),
            None => ("none".to_owned(), "none".to_owned()),
        };
        RunFacts {
            gpu: dev.name(),
            compute_capability: format!("{major}.{minor}"),
            driver,
            cuda,
            commit: commit(),
            date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        }
    }

    /// Facts of nowhere, for tests and examples.
    pub fn unknown() -> RunFacts {
        let unknown = || "unknown".to_owned();
        RunFacts {
            gpu: unknown(),
            compute_capability: unknown(),
            driver: unknown(),
            cuda: unknown(),
            commit: unknown(),
            date: "1970-01-01T00:00:00Z".to_owned(),
        }
    }
}

/// The commit the `warpforge` binary was built from (cli/build.rs:
/// `git rev-parse HEAD`, ` (modified)` when its sources differed), or
/// `WARPFORGE_COMMIT` when set (the GPU suite sets the commit it packed).
pub const BUILD_COMMIT: &str = env!("WARPFORGE_BUILD_COMMIT");

/// `WARPFORGE_COMMIT` if set, else [`BUILD_COMMIT`]: the binary's own build,
/// not whatever checkout the command happens to run in.
fn commit() -> String {
    match std::env::var("WARPFORGE_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_owned(),
        _ => BUILD_COMMIT.to_owned(),
    }
}

/// `x` if it is a finite number.
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// conv2d's anchor: cuDNN's fastest engine through its backend (graph) API.
const CUDNN_GRAPH: &str = "cuDNN graph";

/// The anchor a family is measured against.
fn anchor_of(family: &str) -> &'static str {
    match family {
        "gemm" => "cuBLAS",
        "conv2d" => CUDNN_GRAPH,
        _ => "copy",
    }
}

/// The kernel's name without its tile shape and stage count
/// (`gemm_f16_f32_nn_128x128x32_s4` → `gemm_f16_f32_nn`), so the cases of one
/// kernel family form one chart series whatever tile each size picked.
fn without_tile(kernel: &str) -> String {
    let is_tile = |part: &str| {
        part.starts_with(|c: char| c.is_ascii_digit())
            || (part.len() > 1
                && part.starts_with('s')
                && part[1..].chars().all(|c| c.is_ascii_digit()))
    };
    kernel
        .split('_')
        .filter(|p| !is_tile(p))
        .collect::<Vec<_>>()
        .join("_")
}

impl BenchRecord {
    /// A record of `row` of a `family` benchmark measured on `facts`.
    pub fn of_row(family: &str, row: &BenchRow, facts: &RunFacts) -> BenchRecord {
        let case = row.case();
        // conv2d's cases are `{layer} {layout} {kernel}`: the kernel is the last word.
        let kernel = row.op.rsplit(' ').next().unwrap_or(row.op).to_owned();
        let axis = match row.axis {
            None => "",
            Some(1) => " rows",
            Some(_) => " cols",
        };
        // The words before the kernel that name a series: conv2d's layout
        // (its layer is the case, not the series), and the rest's whole
        // prefix (gemm's `truncated_nt`: truncated TF32 runs the rounded
        // rows' Hopper kernel, and is a series of its own per transpose).
        let layout = match family {
            "conv2d" => row
                .op
                .split(' ')
                .find(|w| *w == "nhwc" || *w == "nchw")
                .map(|l| format!("{l} "))
                .unwrap_or_default(),
            _ => row
                .op
                .rsplit_once(' ')
                .map(|(prefix, _)| format!("{prefix} "))
                .unwrap_or_default(),
        };
        BenchRecord {
            family: family.to_owned(),
            case: case.to_string(),
            series: format!(
                "{layout}{} {}{axis}",
                without_tile(&kernel),
                row.dtype.name()
            ),
            kernel,
            dtype: row.dtype.name().to_owned(),
            shape: row.shape.clone(),
            axis: row.axis,
            seconds_per_call: row.seconds,
            bytes: row.bytes,
            gbps: row.gbps,
            flops: row.flops,
            tflops: row.tflops(),
            anchor: anchor_of(family).to_owned(),
            anchor_gbps: finite(row.anchor_gbps),
            anchor_tflops: row.anchor_tflops().and_then(finite),
            ratio: finite(row.ratio),
            gpu: facts.gpu.clone(),
            compute_capability: facts.compute_capability.clone(),
            driver: facts.driver.clone(),
            cuda: facts.cuda.clone(),
            commit: facts.commit.clone(),
            date: facts.date.clone(),
        }
    }

    /// A placeholder record of `case` (1 µs, 1 GB/s, no anchor), to be
    /// completed with struct-update syntax in tests and examples.
    pub fn example(family: &str, case: &str, facts: &RunFacts) -> BenchRecord {
        BenchRecord {
            family: family.to_owned(),
            case: case.to_owned(),
            kernel: case.split(' ').next().unwrap_or(case).to_owned(),
            series: case.split(" [").next().unwrap_or(case).to_owned(),
            dtype: "f32".to_owned(),
            shape: vec![1000],
            axis: None,
            seconds_per_call: 1e-6,
            bytes: 1000,
            gbps: 1.0,
            flops: None,
            tflops: None,
            anchor: anchor_of(family).to_owned(),
            anchor_gbps: None,
            anchor_tflops: None,
            ratio: None,
            gpu: facts.gpu.clone(),
            compute_capability: facts.compute_capability.clone(),
            driver: facts.driver.clone(),
            cuda: facts.cuda.clone(),
            commit: facts.commit.clone(),
            date: facts.date.clone(),
        }
    }

    /// The throughput the record is charted and compared by: TFLOP/s for a
    /// compute case, else GB/s.
    pub fn throughput(&self) -> (f64, &'static str) {
        match self.tflops {
            Some(t) => (t, "TFLOP/s"),
            None => (self.gbps, "GB/s"),
        }
    }

    /// The anchor's throughput in the same unit, if measured.
    pub fn anchor_throughput(&self) -> Option<f64> {
        match self.tflops {
            Some(_) => self.anchor_tflops,
            None => self.anchor_gbps,
        }
    }

    /// Whether its anchor is cuDNN's legacy API: conv2d records written before
    /// the graph-API anchor (2026-11-29) name it `cuDNN` and were measured
    /// against `cudnnFindConvolutionForwardAlgorithm`, which is not cuDNN's
    /// best (on an H200 it ran the 3×3 NHWC f16 layers at a fifth of the
    /// rate of cuDNN's graph API). Tables show no ratio against it.
    pub fn legacy_anchor(&self) -> bool {
        self.family == "conv2d" && self.anchor == "cuDNN"
    }

    /// Whether the record measures the anchor itself: the copy rows of the
    /// bandwidth benchmarks, cuBLAS's rows (`cublas_…`) of `gemm`, cuDNN's
    /// (`cudnn`, and `cudnn-legacy`: the legacy API beside it) of `conv2d`.
    pub fn is_anchor(&self) -> bool {
        self.kernel == self.anchor
            || self.kernel.starts_with("cublas")
            || self.kernel.starts_with("cudnn")
    }
}

impl BenchFile {
    /// A file of these records.
    pub fn new(
        records: Vec<BenchRecord>,
        skipped: Vec<SkippedRecord>,
        notes: Vec<String>,
    ) -> BenchFile {
        BenchFile {
            schema: SCHEMA.to_owned(),
            notes,
            skipped,
            records,
        }
    }

    /// The records of a `family` benchmark's report, measured on `facts`.
    pub fn of_report(family: &str, report: &BenchReport, facts: &RunFacts) -> BenchFile {
        BenchFile::new(
            report
                .rows
                .iter()
                .map(|r| BenchRecord::of_row(family, r, facts))
                .collect(),
            report
                .skipped
                .iter()
                .map(|s| SkippedRecord {
                    family: family.to_owned(),
                    case: s.case.to_string(),
                    reason: s.reason.clone(),
                })
                .collect(),
            report.notes.clone(),
        )
    }

    /// The file as pretty JSON.
    pub fn to_json(&self) -> String {
        // A struct of strings, numbers and vectors always serialises.
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// Parses a results file, refusing another schema.
    pub fn from_json(text: &str) -> Result<BenchFile, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA) => {}
            Some(other) => return Err(format!("schema `{other}`, expected `{SCHEMA}`")),
            None => return Err(format!("no `schema` field (expected `{SCHEMA}`)")),
        }
        serde_json::from_value(value).map_err(|e| format!("not a {SCHEMA} file: {e}"))
    }

    /// Reads and parses `path`; the error names the file.
    pub fn read(path: &Path) -> Result<BenchFile, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        BenchFile::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Writes the file to `path`.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        std::fs::write(path, self.to_json()).map_err(|e| format!("writing {}: {e}", path.display()))
    }

    /// All records of several files, in order.
    pub fn merge(files: impl IntoIterator<Item = BenchFile>) -> BenchFile {
        let mut all = BenchFile::new(vec![], vec![], vec![]);
        for f in files {
            all.records.extend(f.records);
            all.skipped.extend(f.skipped);
            all.notes.extend(f.notes);
        }
        all
    }
}

/// How one case changed between two files.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseChange {
    /// Family and case.
    pub family: String,
    /// The case.
    pub case: String,
    /// Seconds per call, before and after.
    pub seconds: (f64, f64),
    /// The ratio to the anchor, before and after, where both were measured.
    pub ratios: Option<(f64, f64)>,
    /// The ratio of ratios (new ÷ old) where both have an anchor, else the
    /// speed-up (old time ÷ new time): above 1 is better.
    pub change: f64,
    /// Whether `change` compares ratios (true) or raw times.
    pub of_ratios: bool,
    /// Whether the change is beyond the noise threshold.
    pub flagged: bool,
}

/// `bench compare`'s result.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The noise threshold used.
    pub noise: f64,
    /// Cases in both files, in the new file's order.
    pub rows: Vec<CaseChange>,
    /// Cases only in the old file.
    pub only_old: Vec<String>,
    /// Cases only in the new file.
    pub only_new: Vec<String>,
    /// Whether the two files were measured on different GPUs.
    pub gpus: (String, String),
}

/// Compares two results files case by case (family and case name). The ratio
/// to the anchor cancels most of a machine's state (clocks, other load) out of
/// the comparison, so it is compared where both runs measured one; a change
/// beyond `noise` (0.05 = 5 %) either way is flagged.
pub fn compare(old: &BenchFile, new: &BenchFile, noise: f64) -> Comparison {
    let key = |r: &BenchRecord| (r.family.clone(), r.case.clone());
    let before: BTreeMap<_, &BenchRecord> = old.records.iter().map(|r| (key(r), r)).collect();
    let after: BTreeMap<_, &BenchRecord> = new.records.iter().map(|r| (key(r), r)).collect();
    let mut rows = Vec::new();
    let mut only_new = Vec::new();
    for r in &new.records {
        let Some(o) = before.get(&key(r)) else {
            only_new.push(format!("{} {}", r.family, r.case));
            continue;
        };
        let ratios = match (o.ratio, r.ratio) {
            (Some(a), Some(b)) if a > 0.0 && !r.is_anchor() => Some((a, b)),
            _ => None,
        };
        let (change, of_ratios) = match ratios {
            Some((a, b)) => (b / a, true),
            None => (o.seconds_per_call / r.seconds_per_call, false),
        };
        rows.push(CaseChange {
            family: r.family.clone(),
            case: r.case.clone(),
            seconds: (o.seconds_per_call, r.seconds_per_call),
            ratios,
            change,
            of_ratios,
            flagged: !(change.is_finite() && (change - 1.0).abs() <= noise),
        });
    }
    let only_old = old
        .records
        .iter()
        .filter(|r| !after.contains_key(&key(r)))
        .map(|r| format!("{} {}", r.family, r.case))
        .collect();
    let gpu = |f: &BenchFile| {
        f.records
            .first()
            .map_or_else(|| "none".to_owned(), |r| r.gpu.clone())
    };
    Comparison {
        noise,
        rows,
        only_old,
        only_new,
        gpus: (gpu(old), gpu(new)),
    }
}

impl Comparison {
    /// The cases flagged slower.
    pub fn regressions(&self) -> impl Iterator<Item = &CaseChange> {
        self.rows.iter().filter(|r| r.flagged && r.change < 1.0)
    }
}

fn time(seconds: f64) -> String {
    match seconds {
        s if s >= 1.0 => format!("{s:.2} s"),
        s if s >= 1e-3 => format!("{:.2} ms", s * 1e3),
        s => format!("{:.1} µs", s * 1e6),
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.gpus.0 != self.gpus.1 {
            writeln!(
                f,
                "note: measured on different devices: {} (old), {} (new)",
                self.gpus.0, self.gpus.1
            )?;
        }
        let width = self
            .rows
            .iter()
            .map(|r| r.family.len() + r.case.chars().count() + 1)
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(
            f,
            "{:<width$} {:>10} {:>10} {:>7} {:>7} {:>8}",
            "case", "old time", "new time", "old r", "new r", "change"
        )?;
        for r in &self.rows {
            let (o, n) = r.ratios.map_or_else(
                || ("—".to_owned(), "—".to_owned()),
                |(a, b)| (format!("{a:.3}"), format!("{b:.3}")),
            );
            let what = if r.of_ratios { "" } else { " (time)" };
            let flag = match (r.flagged, r.change >= 1.0) {
                (false, _) => "",
                (true, true) => "  faster",
                (true, false) => "  SLOWER",
            };
            writeln!(
                f,
                "{:<width$} {:>10} {:>10} {o:>7} {n:>7} {:>7.3}×{what}{flag}",
                format!("{} {}", r.family, r.case),
                time(r.seconds.0),
                time(r.seconds.1),
                r.change
            )?;
        }
        for c in &self.only_old {
            writeln!(f, "{c:<width$} only in the old file")?;
        }
        for c in &self.only_new {
            writeln!(f, "{c:<width$} only in the new file")?;
        }
        let flagged = self.rows.iter().filter(|r| r.flagged).count();
        let slower = self.regressions().count();
        writeln!(
            f,
            "{} cases compared; {flagged} changed by more than {:.0} % ({} faster, {slower} slower); change = new ratio ÷ old ratio to the anchor (time: old ÷ new where a run has no anchor)",
            self.rows.len(),
            self.noise * 100.0,
            flagged - slower
        )
    }
}

/// Only each chart series' largest case (by FLOPs, else bytes) of each
/// family, in the file's order: the headline figures of a sweep. `conv2d`'s
/// cases are layers, not sizes of one problem: each is kept.
pub fn largest_per_series(file: &BenchFile) -> BenchFile {
    let size = |r: &BenchRecord| r.flops.unwrap_or(r.bytes);
    let mut best: BTreeMap<(&str, &str, &str), (u64, usize)> = BTreeMap::new();
    for (i, r) in file.records.iter().enumerate() {
        let layer = if r.family == "conv2d" {
            r.case.as_str()
        } else {
            ""
        };
        let entry = best
            .entry((&r.family, &r.series, layer))
            .or_insert((size(r), i));
        if size(r) > entry.0 {
            *entry = (size(r), i);
        }
    }
    let keep: std::collections::BTreeSet<usize> = best.values().map(|&(_, i)| i).collect();
    BenchFile {
        records: file
            .records
            .iter()
            .enumerate()
            .filter(|(i, _)| keep.contains(i))
            .map(|(_, r)| r.clone())
            .collect(),
        ..file.clone()
    }
}

/// The Markdown table of GPU results (the README's, the journal's): per measured case (the
/// anchors' own rows left out), the device, the case, time per call,
/// throughput, the anchor's and the ratio, and one line naming the runs
/// (devices, drivers, commits, dates) under it.
pub fn markdown_table(file: &BenchFile) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| device | benchmark | case | time | throughput | anchor | ratio |"
    );
    let _ = writeln!(out, "| --- | --- | --- | ---: | ---: | ---: | ---: |");
    for r in file.records.iter().filter(|r| !r.is_anchor()) {
        let (value, unit) = r.throughput();
        let anchor = match r.anchor_throughput() {
            _ if r.legacy_anchor() => format!(
                "{} legacy API {}",
                r.anchor,
                r.anchor_throughput().map_or_else(|| "—".to_owned(), figure)
            ),
            Some(a) => format!("{} {}", r.anchor, figure(a)),
            None => format!("{}: —", r.anchor),
        };
        let ratio = match r.ratio {
            _ if r.legacy_anchor() => "not shown (legacy anchor)".to_owned(),
            Some(x) => format!("{x:.2}"),
            None => "—".to_owned(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} {unit} | {anchor} | {ratio} |",
            r.gpu,
            r.family,
            r.case.replace('|', "\\|"),
            time(r.seconds_per_call),
            figure(value),
        );
    }
    let mut runs: Vec<String> = file
        .records
        .iter()
        .map(|r| {
            format!(
                "{} (compute capability {}, driver {}, CUDA {}), commit {}, {}",
                r.gpu,
                r.compute_capability,
                r.driver,
                r.cuda,
                short_commit(&r.commit),
                r.date.split('T').next().unwrap_or(&r.date)
            )
        })
        .collect();
    runs.sort();
    runs.dedup();
    let _ = writeln!(out);
    let _ = writeln!(out, "Measured on {}.", runs.join("; "));
    if file.records.iter().any(BenchRecord::legacy_anchor) {
        let _ = writeln!(
            out,
            "No ratio is shown for conv2d rows whose anchor is cuDNN's legacy API \
             (`cudnnFindConvolutionForwardAlgorithm`): it is not cuDNN's best on that GPU. \
             The run's folder compares them with cuDNN's graph API where it was measured."
        );
    }
    for s in &file.skipped {
        let _ = writeln!(out, "Not measured: {} {}: {}.", s.family, s.case, s.reason);
    }
    out
}

/// A throughput with three significant digits.
fn figure(x: f64) -> String {
    match x.abs() {
        a if a >= 100.0 => format!("{x:.0}"),
        a if a >= 10.0 => format!("{x:.1}"),
        a if a >= 0.01 => format!("{x:.2}"),
        _ => format!("{x:.1e}"),
    }
}

/// The first 10 characters of a commit hash, keeping a ` (modified)` mark.
fn short_commit(commit: &str) -> String {
    match commit.split_once(' ') {
        Some((hash, rest)) => format!("{} {rest}", &hash[..hash.len().min(10)]),
        None => commit[..commit.len().min(10)].to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(gpu: &str) -> RunFacts {
        RunFacts {
            gpu: gpu.to_owned(),
            commit: "0123456789abcdef".to_owned(),
            ..RunFacts::unknown()
        }
    }

    /// A GEMM case at `seconds` per call, `tflops`, against cuBLAS at `anchor`.
    fn gemm(case: &str, seconds: f64, tflops: f64, anchor: Option<f64>) -> BenchRecord {
        BenchRecord {
            kernel: "gemm_f16_f32_nn_128x128x32_s4".to_owned(),
            series: "gemm_f16_f32_nn f16".to_owned(),
            flops: Some((tflops * seconds * 1e12) as u64),
            tflops: Some(tflops),
            anchor_tflops: anchor,
            ratio: anchor.map(|a| tflops / a),
            seconds_per_call: seconds,
            ..BenchRecord::example("gemm", case, &facts("H100"))
        }
    }

    #[test]
    fn a_results_file_round_trips_through_json_and_refuses_other_schemas() {
        let dev = Device::emulator();
        let config = warpforge_tools::bench::ReduceBench::defaults(&dev)
            .with_max_log2(10)
            .unwrap();
        let report = warpforge_tools::bench::reduce(&dev, &config).unwrap();
        let file = BenchFile::of_report("reduce", &report, &RunFacts::gather(&dev));
        assert_eq!(file.records.len(), report.rows.len());
        assert!(file.records.iter().all(|r| r.family == "reduce"
            && r.gpu == dev.name()
            && r.driver == "none"
            && r.seconds_per_call > 0.0));
        // The copy anchors are records of their own, ratio 1.
        assert!(
            file.records
                .iter()
                .any(|r| r.is_anchor() && r.ratio == Some(1.0))
        );
        let back = BenchFile::from_json(&file.to_json()).unwrap();
        assert_eq!(back, file);

        let other = file.to_json().replace(SCHEMA, "warpforge-bench/0");
        let e = BenchFile::from_json(&other).unwrap_err();
        assert!(e.contains("schema `warpforge-bench/0`"), "{e}");
        assert!(
            BenchFile::from_json("{}")
                .unwrap_err()
                .contains("no `schema`")
        );
        assert!(
            BenchFile::from_json("[1,")
                .unwrap_err()
                .contains("not JSON")
        );
    }

    #[test]
    fn missing_figures_are_null_not_nan() {
        let r = BenchRecord {
            anchor_tflops: finite(f64::NAN),
            ratio: finite(f64::INFINITY),
            ..BenchRecord::example("gemm", "g f16 [1×1×1]", &facts("emu"))
        };
        let json = BenchFile::new(vec![r], vec![], vec![]).to_json();
        assert!(json.contains("\"ratio\": null"), "{json}");
        assert!(!json.contains("NaN"));
        BenchFile::from_json(&json).unwrap();
    }

    #[test]
    fn compare_gives_the_ratio_of_ratios_and_flags_changes_beyond_the_noise() {
        let old = BenchFile::new(
            vec![
                gemm("a [4096×4096×4096]", 2e-3, 60.0, Some(600.0)), // 0.10
                gemm("b [8192×8192×8192]", 16e-3, 60.0, Some(600.0)),
                gemm("c [128×4096×4096]", 1e-4, 10.0, None),
                gemm("gone [1×1×1]", 1e-6, 1.0, None),
            ],
            vec![],
            vec![],
        );
        let new = BenchFile::new(
            vec![
                // 0.103 of a faster cuBLAS: within 5 %.
                gemm("a [4096×4096×4096]", 1.9e-3, 63.0, Some(610.0)),
                // 0.50: five times the ratio.
                gemm("b [8192×8192×8192]", 3.2e-3, 300.0, Some(600.0)),
                // No anchor: by time, 1e-4 → 1.25e-4 is 0.8×.
                gemm("c [128×4096×4096]", 1.25e-4, 8.0, None),
                gemm("new [2×2×2]", 1e-6, 1.0, None),
            ],
            vec![],
            vec![],
        );
        let c = compare(&old, &new, 0.05);
        assert_eq!(c.rows.len(), 3);
        let by = |case: &str| c.rows.iter().find(|r| r.case.starts_with(case)).unwrap();
        let a = by("a ");
        assert!(a.of_ratios && !a.flagged);
        assert!((a.change - (63.0 / 610.0) / 0.1).abs() < 1e-12);
        let b = by("b ");
        assert!(b.of_ratios && b.flagged && (b.change - 5.0).abs() < 1e-9);
        let cc = by("c ");
        assert!(!cc.of_ratios && cc.flagged && (cc.change - 0.8).abs() < 1e-12);
        assert_eq!(c.only_old, ["gemm gone [1×1×1]"]);
        assert_eq!(c.only_new, ["gemm new [2×2×2]"]);
        assert_eq!(c.regressions().count(), 1);
        let text = c.to_string();
        assert!(text.contains("faster") && text.contains("SLOWER"), "{text}");
        assert!(text.contains("only in the old file") && text.contains("only in the new file"));
        assert!(text.contains("3 cases compared; 2 changed by more than 5 % (1 faster, 1 slower)"));
        // A wider threshold flags only the fivefold change.
        assert_eq!(
            compare(&old, &new, 0.3)
                .rows
                .iter()
                .filter(|r| r.flagged)
                .count(),
            1
        );
    }

    #[test]
    fn the_markdown_table_has_a_row_per_measured_case_and_names_the_runs() {
        let mut copy = BenchRecord::example("reduce", "copy f32 [1024]", &facts("H100"));
        copy.kernel = "copy".to_owned();
        let sum = BenchRecord {
            gbps: 2000.0,
            anchor_gbps: Some(2500.0),
            ratio: Some(0.8),
            ..BenchRecord::example("reduce", "sum f32 [1024]", &facts("H100"))
        };
        let g = gemm("a [4096×4096×4096]", 2e-3, 60.0, Some(600.0));
        let file = BenchFile::new(
            vec![copy, sum, g],
            vec![SkippedRecord {
                family: "gemm".into(),
                case: "huge".into(),
                reason: "out of memory".into(),
            }],
            vec![],
        );
        let table = markdown_table(&file);
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| H100")).collect();
        assert_eq!(rows.len(), 2, "{table}"); // the copy anchor is not a row
        assert_eq!(
            rows[0],
            "| H100 | reduce | sum f32 [1024] | 1.0 µs | 2000 GB/s | copy 2500 | 0.80 |"
        );
        assert_eq!(
            rows[1],
            "| H100 | gemm | a [4096×4096×4096] | 2.00 ms | 60.0 TFLOP/s | cuBLAS 600 | 0.10 |"
        );
        assert!(table.contains("Measured on H100 (compute capability unknown, driver unknown, CUDA unknown), commit 0123456789, 1970-01-01."));
        assert!(table.contains("Not measured: gemm huge: out of memory."));
    }

    #[test]
    fn conv2d_rows_against_the_legacy_cudnn_api_show_no_ratio_and_say_why() {
        let conv = |anchor: &str, case: &str, kernel: &str| BenchRecord {
            anchor: anchor.to_owned(),
            kernel: kernel.to_owned(),
            flops: Some(4_000_000_000),
            tflops: Some(200.0),
            anchor_tflops: Some(80.0),
            ratio: Some(2.5),
            seconds_per_call: 20e-6,
            ..BenchRecord::example("conv2d", case, &facts("H200"))
        };
        // A record written now names the graph API and keeps its ratio.
        let now = BenchRecord::of_row(
            "conv2d",
            &warpforge_tools::bench::BenchRow {
                op: "res3 3x3 nhwc conv2d_nhwc_f16_128x128x32_s4",
                dtype: warpforge::DType::F16,
                shape: vec![32, 128, 28, 28, 128, 3, 3],
                axis: None,
                bytes: 1,
                seconds: 1e-3,
                gbps: 1.0,
                anchor_gbps: 2.0,
                ratio: 0.5,
                flops: None,
            },
            &facts("H200"),
        );
        assert_eq!(now.anchor, CUDNN_GRAPH);
        assert!(!now.legacy_anchor());
        let old = conv("cuDNN", "res3 3x3 nhwc k [1]", "k");
        let graph = conv(CUDNN_GRAPH, "res4 3x3 nhwc k [1]", "k");
        let legacy_row = conv(
            CUDNN_GRAPH,
            "res4 3x3 nhwc cudnn-legacy [1]",
            "cudnn-legacy",
        );
        assert!(old.legacy_anchor() && !graph.legacy_anchor());
        assert!(
            legacy_row.is_anchor(),
            "the legacy API's own row is an anchor row"
        );
        let table = markdown_table(&BenchFile::new(
            vec![old, graph, legacy_row],
            vec![],
            vec![],
        ));
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| H200")).collect();
        assert_eq!(
            rows,
            [
                "| H200 | conv2d | res3 3x3 nhwc k [1] | 20.0 µs | 200 TFLOP/s | cuDNN legacy API 80.0 | not shown (legacy anchor) |",
                "| H200 | conv2d | res4 3x3 nhwc k [1] | 20.0 µs | 200 TFLOP/s | cuDNN graph 80.0 | 2.50 |",
            ],
            "{table}"
        );
        assert!(
            table.contains("No ratio is shown for conv2d rows whose anchor is cuDNN's legacy API")
        );
    }

    #[test]
    fn largest_per_series_keeps_each_series_biggest_case_in_order() {
        let rec = |series: &str, bytes: u64| BenchRecord {
            series: series.to_owned(),
            bytes,
            ..BenchRecord::example("reduce", &format!("{series} {bytes}"), &facts("H100"))
        };
        let file = BenchFile::new(
            vec![
                rec("sum f32", 10),
                rec("max f32", 10),
                rec("sum f32", 30),
                rec("max f32", 5),
            ],
            vec![],
            vec![],
        );
        let cases: Vec<String> = largest_per_series(&file)
            .records
            .into_iter()
            .map(|r| r.case)
            .collect();
        assert_eq!(cases, ["max f32 10", "sum f32 30"]);
    }

    /// The truncated TF32 rows run the rounded rows' Hopper kernel: the
    /// records name that kernel, and keep the first word in their case and
    /// their series, so tables, charts and comparisons tell them apart (and
    /// the transposes of the truncated rows from each other).
    #[test]
    fn truncated_tf32_rows_are_a_series_of_their_own_on_the_same_kernel() {
        use warpforge::DType;
        use warpforge_tools::bench::TRUNCATED_TF32_NAMES;
        let kernel = "gemm_wgmma_tf32_f32_nt_128x256x32_s4";
        let row = |op| BenchRow {
            op,
            dtype: DType::F32,
            shape: vec![4096; 3],
            axis: None,
            bytes: 3 * 4 * 4096 * 4096,
            seconds: 1e-3,
            gbps: 0.2,
            anchor_gbps: 0.25,
            ratio: 0.8,
            flops: Some(2 * 4096 * 4096 * 4096),
        };
        let facts = facts("H100");
        let [rounded, nn, nt] = [
            kernel,
            TRUNCATED_TF32_NAMES[0][0],
            TRUNCATED_TF32_NAMES[0][1],
        ]
        .map(|op| BenchRecord::of_row("gemm", &row(op), &facts));
        for r in [&rounded, &nn, &nt] {
            assert_eq!(r.kernel, kernel);
            assert!(!r.is_anchor(), "{r:?}");
        }
        assert_eq!(rounded.series, "gemm_wgmma_tf32_f32_nt f32");
        assert_eq!(nn.series, "truncated_nn gemm_wgmma_tf32_f32_nt f32");
        assert_eq!(nt.series, "truncated_nt gemm_wgmma_tf32_f32_nt f32");
        assert_eq!(
            nt.case,
            "truncated_nt gemm_wgmma_tf32_f32_nt_128x256x32_s4 f32 [4096×4096×4096]"
        );
        let file = BenchFile::new(vec![rounded, nn, nt.clone()], vec![], vec![]);
        assert_eq!(largest_per_series(&file).records.len(), 3);
        let table = markdown_table(&file);
        assert!(table.contains(&format!("| {} |", nt.case)), "{table}");
        assert_eq!(table.matches(kernel).count(), 3, "{table}");
    }

    #[test]
    fn a_kernel_series_drops_the_tile_shape() {
        assert_eq!(
            without_tile("gemm_f16_f32_nn_128x128x32_s4"),
            "gemm_f16_f32_nn"
        );
        assert_eq!(
            without_tile("conv2d_nhwc_f16_64x64x32_s3"),
            "conv2d_nhwc_f16"
        );
        assert_eq!(without_tile("sum"), "sum");
        assert_eq!(without_tile("gemm_f32_nn_64x64x16"), "gemm_f32_nn");
    }
}
