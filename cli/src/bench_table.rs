//! The tables `warpforge bench OPERATION` and `warpforge bench overlap` print:
//! [`warpforge_tools::bench`]'s reports as text, one line per case.
//!
//! ```
//! use warpforge::Device;
//! use warpforge_tools::bench::{self, ReduceBench};
//! let dev = Device::emulator();
//! let report = bench::reduce(&dev, &ReduceBench::defaults(&dev).with_max_log2(10)?)?;
//! print!("{}", warpforge_cli::bench_table::render(&report));
//! # Ok::<(), warpforge::Error>(())
//! ```

use std::fmt::Write as _;
use warpforge_tools::bench::{BenchReport, OverlapReport, gbps};

/// `12.3 µs`, `4.56 ms`, `1.23 s`.
fn human_time(seconds: f64) -> String {
    if seconds < 1e-3 {
        format!("{:.1} µs", seconds * 1e6)
    } else if seconds < 1.0 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{seconds:.2} s")
    }
}

/// `512 KiB`, `1.0 GiB`.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `12.345`, `3.1e-5` below 0.001 (the emulator's rates), or `—` for NaN (no anchor).
fn rate(value: f64, width: usize, decimals: usize) -> String {
    if value.is_nan() {
        format!("{:>width$}", "—")
    } else if value != 0.0 && value.abs() < 1e-3 {
        format!("{value:>width$.1e}")
    } else {
        format!("{value:>width$.decimals$}")
    }
}

/// The report as a table, one line per case (and one per skipped case).
/// Compute-bound reports (GEMM: rows with [`BenchRow::flops`](warpforge_tools::bench::BenchRow::flops))
/// get TFLOP/s columns against their anchor library instead of GB/s against the copy.
pub fn render(report: &BenchReport) -> String {
    if report.rows.iter().any(|r| r.flops.is_some()) {
        return render_flops(report);
    }
    let mut out = String::new();
    let t = report.timing;
    let _ = writeln!(
        out,
        "{}: median of {} × {} iteration(s) after {} warm-up, timed with events",
        report.device,
        t.reps.max(1),
        t.iters.max(1),
        t.warmup
    );
    let _ = writeln!(
        out,
        "{:<34} {:>9} {:>10} {:>9} {:>10} {:>6}  path",
        "case", "bytes", "time", "GB/s", "copy GB/s", "ratio"
    );
    for r in &report.rows {
        let case = r.case();
        let _ = writeln!(
            out,
            "{:<34} {:>9} {:>10} {:>9.2} {:>10.2} {:>6.3}  {}",
            case.to_string(),
            human_bytes(r.bytes),
            human_time(r.seconds),
            r.gbps,
            r.anchor_gbps,
            r.ratio,
            case.reduce_path().map_or("-", |p| p.name())
        );
    }
    for s in &report.skipped {
        let _ = writeln!(out, "{:<34} skipped: {}", s.case.to_string(), s.reason);
    }
    out
}

/// A compute-bound report: TFLOP/s (2·m·n·k / time for GEMM, shape `[m×n×k]`;
/// conv2d: shape `[N×C×H×W×K×R×S]`) and the anchor's (cuBLAS, cuDNN)
/// TFLOP/s and ratio, `—` where there is no anchor. A row without a FLOP
/// count (conv2d's depthwise layer) gives GB/s in those columns instead,
/// marked `GB/s` at the end of its line.
fn render_flops(report: &BenchReport) -> String {
    let mut out = String::new();
    let t = report.timing;
    let _ = writeln!(
        out,
        "{}: median of {} × {} iteration(s) after {} warm-up, timed with events",
        report.device,
        t.reps.max(1),
        t.iters.max(1),
        t.warmup
    );
    for note in &report.notes {
        let _ = writeln!(out, "{note}");
    }
    let legend = match report.rows.first().map_or(3, |r| r.shape.len()) {
        7 => "case [N×C×H×W×K×R×S]",
        _ => "case [m×n×k]",
    };
    let width = report
        .rows
        .iter()
        .map(|r| r.case().to_string().chars().count() + 1)
        .chain(
            report
                .skipped
                .iter()
                .map(|s| s.case.to_string().chars().count() + 1),
        )
        .max()
        .unwrap_or(0)
        .max(44);
    let _ = writeln!(
        out,
        "{legend:<width$} {:>10} {:>9} {:>12} {:>6}",
        "time", "TFLOP/s", "anchor TF/s", "ratio"
    );
    for r in &report.rows {
        let (value, anchor, unit) = match r.tflops() {
            Some(tflops) => (tflops, r.anchor_tflops().unwrap_or(f64::NAN), ""),
            None => (r.gbps, r.anchor_gbps, "  GB/s"),
        };
        let _ = writeln!(
            out,
            "{:<width$} {:>10} {} {} {}{unit}",
            r.case().to_string(),
            human_time(r.seconds),
            rate(value, 9, 3),
            rate(anchor, 12, 3),
            rate(r.ratio, 6, 3)
        );
    }
    for s in &report.skipped {
        let _ = writeln!(out, "{:<width$} skipped: {}", s.case.to_string(), s.reason);
    }
    out
}

/// The overlap report as a table.
pub fn render_overlap(r: &OverlapReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: pinned upload of {} and {} × axpy_f32 over {} elements, timed with events",
        r.device,
        human_bytes(r.copy_bytes),
        r.kernel_launches,
        r.kernel_elements
    );
    let lines = [
        ("upload alone", r.copy_seconds),
        ("kernels alone", r.kernel_seconds),
        ("one stream (serialised)", r.serial_seconds),
        ("two streams", r.two_stream_seconds),
    ];
    for (what, s) in lines {
        let _ = writeln!(out, "{what:<26} {:>10}", human_time(s));
    }
    let _ = writeln!(
        out,
        "upload GB/s {:.2}; overlap ratio (upload + kernels) / two streams = {:.3} \
         (2 = full overlap, 1 = none)",
        gbps(r.copy_bytes, r.copy_seconds),
        r.overlap_ratio
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use warpforge::Device;
    use warpforge_tools::bench::{
        BenchDType, GemmBench, OverlapBench, ReduceBench, Timing, gemm, overlap, reduce,
    };

    /// The library's own test configuration: 2^10 elements and a 32×32 matrix.
    fn tiny(dev: &Device) -> ReduceBench {
        let mut config = ReduceBench::defaults(dev).with_max_log2(10).unwrap();
        config.timing = Timing {
            warmup: 1,
            iters: 2,
            reps: 3,
        };
        config
    }

    #[test]
    fn the_reduce_table_has_a_header_and_a_line_per_case() {
        let dev = Device::emulator();
        let config = tiny(&dev);
        let report = reduce(&dev, &config).unwrap();
        let cases = config.cases().unwrap();
        let table = render(&report);
        assert_eq!(table.lines().count(), 2 + cases.len(), "{table}");
        assert!(table.contains("argmax bf16 [32×32] cols"), "{table}");
        // Which kernels ran: the small path for the whole-tensor and rows
        // cases (at most 2^16 items per row), the fused one for columns.
        let line = |case: &str| {
            table
                .lines()
                .find(|l| l.starts_with(case))
                .unwrap_or_else(|| panic!("{case}: {table}"))
        };
        assert!(line("sum f32 [1024] ").ends_with("  small"), "{table}");
        assert!(line("sum f32 [32×32] rows").ends_with("  small"), "{table}");
        assert!(line("sum f32 [32×32] cols").ends_with("  fused"), "{table}");
        assert!(line("copy f32").ends_with("  -"), "{table}");
    }

    #[test]
    fn a_skipped_case_is_a_line_of_the_table() {
        // 1 MiB of device memory: 2^10 f32 fits, 2^18 (1 MiB, twice for the copy) does not.
        let dev = Device::emulator_with_memory(1 << 20);
        let mut config = tiny(&dev);
        config.dtypes = vec![BenchDType::F32];
        config.sizes = vec![1 << 10, 1 << 18];
        config.matrix = None;
        let report = reduce(&dev, &config).unwrap();
        assert_eq!(report.skipped.len(), 4);
        let table = render(&report);
        assert_eq!(table.matches("skipped: ").count(), 4, "{table}");
    }

    #[test]
    fn the_overlap_table_names_every_phase() {
        let dev = Device::emulator();
        let config = OverlapBench {
            copy_bytes: 1 << 20,
            kernel_elements: 1 << 12,
            timing: Timing {
                warmup: 1,
                iters: 1,
                reps: 3,
            },
        };
        let table = render_overlap(&overlap(&dev, &config).unwrap());
        for phase in [
            "upload alone",
            "kernels alone",
            "one stream (serialised)",
            "two streams",
            "overlap ratio",
        ] {
            assert!(table.contains(phase), "{phase}: {table}");
        }
    }

    #[test]
    fn the_gemm_table_has_tflops_columns_and_says_why_cublas_is_missing() {
        let dev = Device::emulator();
        let mut config = GemmBench::defaults(&dev)
            .with_max_log2(4)
            .unwrap()
            .only(&["f32", "tf32"])
            .unwrap();
        config.timing = Timing {
            warmup: 0,
            iters: 1,
            reps: 1,
        };
        let report = gemm(&dev, &config).unwrap();
        let table = render(&report);
        // Header, the note, column names, 4 shapes × (SIMT, TF32) warpforge
        // rows, and as many skipped cuBLAS cases.
        assert_eq!(table.lines().count(), 3 + 8 + 8, "{table}");
        assert!(
            table.contains("TFLOP/s") && !table.contains("GB/s"),
            "{table}"
        );
        assert!(
            table.contains("gemm_f32_nn_64x64x16 f32 [8×8×21]"),
            "{table}"
        );
        assert!(
            table.contains("gemm_tf32_f32_nn_64x64x16_s3 f32 [8×8×21]")
                && table.contains("cublas_gemmex_tf32_nn f32 [8×8×21]"),
            "{table}"
        );
        assert_eq!(
            table
                .matches("skipped: cuBLAS: not available on the emulator")
                .count(),
            8,
            "{table}"
        );
        // No anchor: its rate and the ratio read as a dash.
        let row = table.lines().find(|l| l.starts_with("gemm_f32")).unwrap();
        assert_eq!(row.matches('—').count(), 2, "{row}");
    }

    /// Truncated TF32 at NT on an emulated H100: a line per shape named
    /// `truncated_nt` and its kernel, after the rounded line, beside the one
    /// cuBLAS TF32 NT case both share (skipped: no cuBLAS on the emulator);
    /// on an emulated A100 no such line, and one note saying why.
    #[test]
    fn the_gemm_table_has_the_truncated_tf32_lines_or_says_once_why_not() {
        use warpforge::Arch;
        use warpforge_tools::bench::TRUNCATED_TF32_NAMES;
        let h100 = Device::emulator_for(Arch::Sm90);
        let mut config = GemmBench::defaults(&h100)
            .only(&["tf32", "tf32-truncate"])
            .unwrap();
        config.shapes = vec![[16, 16, 16], [8, 8, 24]];
        config.trans = (false, true);
        config.timing = Timing {
            warmup: 0,
            iters: 1,
            reps: 1,
        };
        let table = render(&gemm(&h100, &config).unwrap());
        // Header, the cuBLAS note, column names, 2 shapes × (rounded,
        // truncated) lines, 2 skipped cuBLAS cases.
        assert_eq!(table.lines().count(), 3 + 4 + 2, "{table}");
        for shape in ["16×16×16", "8×8×24"] {
            let line = |op: &str| {
                table
                    .lines()
                    .position(|l| l.starts_with(&format!("{op} f32 [{shape}] ")))
                    .unwrap_or_else(|| panic!("{op} {shape}: {table}"))
            };
            let truncated = line(TRUNCATED_TF32_NAMES[1][1]);
            assert!(line("gemm_tf32_f32_nt_64x64x16_s3") < truncated, "{table}");
            let row = table.lines().nth(truncated).unwrap();
            // A rate; no anchor, so its rate and the ratio read as a dash.
            assert_eq!(row.matches('—').count(), 2, "{row}");
            let anchor = format!("cublas_gemmex_tf32_nt f32 [{shape}] ");
            assert!(
                table.lines().any(|l| l.starts_with(&anchor)
                    && l.ends_with("skipped: cuBLAS: not available on the emulator")),
                "{table}"
            );
        }
        assert_eq!(table.matches("cublas_gemmex_tf32_nt").count(), 2, "{table}");
        assert!(!table.contains("not measured"), "{table}");

        let a100 = Device::emulator_for(Arch::Sm80);
        let table = render(&gemm(&a100, &config).unwrap());
        assert_eq!(table.lines().count(), 4 + 2 + 2, "{table}");
        assert!(!table.contains("truncated_"), "{table}");
        let notes: Vec<&str> = table
            .lines()
            .filter(|l| l.starts_with("truncated TF32 (Tf32Rounding::Truncate) not measured: "))
            .collect();
        assert_eq!(notes.len(), 1, "{table}");
        assert!(notes[0].contains("compute capability 9.0"), "{table}");
    }

    #[test]
    fn the_conv2d_table_rates_depthwise_in_gb_per_s_and_says_why_cudnn_is_missing() {
        use warpforge_tools::bench::conv2d::{self, ConvBench};
        let dev = Device::emulator();
        let mut config = ConvBench::defaults(&dev).with_max_log2(8).unwrap();
        config.configs.truncate(1);
        // conv1 and the depthwise layer.
        config.layers = vec![config.layers[0], *config.layers.last().unwrap()];
        config.timing = Timing {
            warmup: 0,
            iters: 1,
            reps: 1,
        };
        let report = conv2d::conv2d(&dev, &config).unwrap();
        let table = render(&report);
        // Header, the note, column names, 2 warpforge rows, 2 skipped cuDNN cases.
        assert_eq!(table.lines().count(), 3 + 2 + 2, "{table}");
        assert!(table.contains("case [N×C×H×W×K×R×S]"), "{table}");
        let rows: Vec<&str> = table.lines().filter(|l| l.contains(" f16 [")).collect();
        assert_eq!(rows.len(), 4, "{table}");
        // conv1 (3 channels) takes the im2col route, then the 1×1 GEMM.
        assert!(
            rows[0].starts_with("conv1 7x7/2 nhwc gemm_f16_f16_nt_64x64x32_s3 f16 ["),
            "{table}"
        );
        assert!(!rows[0].ends_with("GB/s"), "{table}");
        assert!(
            rows[1].starts_with("dw 3x3 nhwc conv2d_depthwise_nhwc_f16"),
            "{table}"
        );
        assert!(rows[1].ends_with("  GB/s"), "{table}");
        assert_eq!(
            table
                .matches("skipped: cuDNN: not available on the emulator")
                .count(),
            2,
            "{table}"
        );
    }

    #[test]
    fn rates_read_as_numbers_or_a_dash() {
        assert_eq!(rate(51.5, 9, 3), "   51.500");
        assert_eq!(rate(3.14e-5, 9, 3), "   3.1e-5");
        assert_eq!(rate(f64::NAN, 6, 3), "     —");
    }

    #[test]
    fn times_and_sizes_read_as_units() {
        assert_eq!(human_time(12.34e-6), "12.3 µs");
        assert_eq!(human_time(4.561e-3), "4.56 ms");
        assert_eq!(human_time(1.234), "1.23 s");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(512 << 10), "512 KiB");
        assert_eq!(human_bytes(3 << 19), "1.5 MiB");
        assert_eq!(human_bytes(1 << 30), "1 GiB");
    }
}
