//! Benchmark results as SVG charts (`bench --plot FILE.svg`): throughput
//! against problem size on log–log axes, one line per kernel series
//! (warpforge, solid with dots) and one per anchor it was measured against
//! (cuBLAS, cuDNN: thin, with triangles, in the same colour), so the gap to
//! the anchor reads off at every size. The bandwidth benchmarks measure their
//! anchor, the device copy, as cases of their own: it is a series like the
//! others.

use crate::bench_data::{BenchFile, BenchRecord};
use plotters::prelude::*;
use std::collections::BTreeMap;

/// One line of the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Its legend.
    pub name: String,
    /// Whether it is an anchor library's line.
    pub anchor: bool,
    /// The series whose colour it is drawn in: an anchor's line takes the
    /// colour of the warpforge series it was measured against; others their own.
    pub colour_of: String,
    /// (problem size, throughput), by size.
    pub points: Vec<(f64, f64)>,
}

/// What a chart of `file` shows: its series and the axes' units.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// The lines, warpforge's then the anchors', each by name.
    pub series: Vec<Series>,
    /// The x axis's label.
    pub x_label: &'static str,
    /// The y axis's label.
    pub y_label: &'static str,
}

/// The problem size a record is charted at: its FLOPs, else its bytes.
fn size(r: &BenchRecord) -> f64 {
    r.flops.map_or(r.bytes as f64, |f| f as f64)
}

/// The series of `file`: each record's throughput under its series name, and,
/// for compute cases, the anchor's under `{anchor} ({series})`. Records with
/// no positive figures (a case too fast for the timer) are left out.
pub fn chart(file: &BenchFile) -> Chart {
    // (anchor, name) → (the series whose colour it takes, points).
    type Lines = BTreeMap<(bool, String), (String, Vec<(f64, f64)>)>;
    let mut lines = Lines::new();
    let compute = file.records.iter().any(|r| r.flops.is_some());
    // Where the anchor was measured as cases of its own (the copy, cuBLAS's and
    // cuDNN's rows), those are its lines; else they come from each case's figure.
    let anchor_rows = file.records.iter().any(BenchRecord::is_anchor);
    for r in &file.records {
        // A compute-bound chart has no room for the GB/s of the odd bandwidth case.
        if compute && r.flops.is_none() {
            continue;
        }
        let x = size(r);
        let (y, _) = r.throughput();
        if x > 0.0 && y > 0.0 && y.is_finite() {
            lines
                .entry((r.is_anchor(), r.series.clone()))
                .or_insert_with(|| (r.series.clone(), Vec::new()))
                .1
                .push((x, y));
        }
        if let Some(a) = r.anchor_throughput()
            && !anchor_rows
            && !r.is_anchor()
            && r.flops.is_some()
            && a > 0.0
            && a.is_finite()
        {
            lines
                .entry((true, format!("{} ({})", r.anchor, r.series)))
                .or_insert_with(|| (r.series.clone(), Vec::new()))
                .1
                .push((x, a));
        }
    }
    let series = lines
        .into_iter()
        .map(|((anchor, name), (colour_of, mut points))| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                name,
                anchor,
                colour_of,
                points,
            }
        })
        .collect();
    let (x_label, y_label) = if compute {
        (
            "problem size (floating-point operations per call)",
            "TFLOP/s",
        )
    } else {
        ("problem size (bytes moved per call)", "GB/s")
    };
    Chart {
        series,
        x_label,
        y_label,
    }
}

/// `file` drawn as an SVG document titled `title`.
pub fn render_svg(file: &BenchFile, title: &str) -> Result<String, String> {
    let chart = chart(file);
    let points = chart.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if chart.series.is_empty() {
        return Err(format!("{title}: no case with a positive time to chart"));
    }
    // Some room around the data, and a range even for a single point.
    let (x0, x1, y0, y1) = (x0 / 1.5, x1 * 1.5, y0 / 1.5, y1 * 1.5);
    let err = |e: &dyn std::fmt::Display| format!("drawing {title}: {e}");
    let mut svg = String::new();
    {
        let height = 480 + 18 * chart.series.len() as u32;
        let root = SVGBackend::with_string(&mut svg, (960, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let (plot, legend) = root.split_vertically(480);
        let mut ctx = ChartBuilder::on(&plot)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
            .map_err(|e| err(&e))?;
        ctx.configure_mesh()
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 16))
            .x_desc(chart.x_label)
            .y_desc(chart.y_label)
            .x_label_formatter(&|x| format!("{x:.0e}"))
            .y_label_formatter(&|y| format!("{y:.3}"))
            .draw()
            .map_err(|e| err(&e))?;
        // Each warpforge series gets a colour; its anchor line takes the same one.
        let mut colours: BTreeMap<&str, RGBAColor> = BTreeMap::new();
        for s in chart.series.iter().filter(|s| !s.anchor) {
            let n = colours.len();
            colours.insert(&s.name, Palette99::pick(n).to_rgba());
        }
        let mut extra = colours.len();
        for (i, s) in chart.series.iter().enumerate() {
            let colour = match colours.get(s.colour_of.as_str()) {
                Some(c) => *c,
                None => {
                    extra += 1;
                    Palette99::pick(extra).to_rgba()
                }
            };
            let width = if s.anchor { 1 } else { 2 };
            ctx.draw_series(LineSeries::new(
                s.points.iter().copied(),
                colour.stroke_width(width),
            ))
            .map_err(|e| err(&e))?;
            if s.anchor {
                ctx.draw_series(
                    s.points
                        .iter()
                        .map(|&p| TriangleMarker::new(p, 5, colour.filled())),
                )
                .map_err(|e| err(&e))?;
            } else {
                ctx.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                    .map_err(|e| err(&e))?;
            }
            // The legend, below the plot: one line per series.
            let y = 8 + 18 * i as i32;
            legend
                .draw(&PathElement::new(
                    vec![(90, y + 6), (120, y + 6)],
                    colour.stroke_width(width),
                ))
                .map_err(|e| err(&e))?;
            let label = if s.anchor {
                s.name.clone()
            } else {
                format!("warpforge {}", s.name)
            };
            legend
                .draw(&Text::new(label, (128, y), ("sans-serif", 14)))
                .map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_data::{BenchRecord, RunFacts};

    fn gemm(series: &str, flops: u64, tflops: f64, anchor: Option<f64>) -> BenchRecord {
        BenchRecord {
            series: series.to_owned(),
            kernel: format!("{series}_64x64x32_s3"),
            flops: Some(flops),
            tflops: Some(tflops),
            anchor_tflops: anchor,
            ..BenchRecord::example("gemm", &format!("{series} {flops}"), &RunFacts::unknown())
        }
    }

    /// The text of every `<text>` element of an SVG.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| {
                Some(
                    t.split_once('>')?
                        .1
                        .split_once("</text>")?
                        .0
                        .trim()
                        .to_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn a_compute_chart_has_a_line_per_kernel_series_and_per_anchor_and_its_axes_labelled() {
        let file = BenchFile::new(
            vec![
                gemm("gemm_f16_f32_nn f16", 1 << 30, 10.0, Some(100.0)),
                gemm("gemm_f16_f32_nn f16", 1 << 36, 50.0, Some(500.0)),
                gemm("gemm_f32_nn f32", 1 << 30, 5.0, None),
            ],
            vec![],
            vec![],
        );
        let c = chart(&file);
        let names: Vec<(&str, bool)> = c
            .series
            .iter()
            .map(|s| (s.name.as_str(), s.anchor))
            .collect();
        assert_eq!(
            names,
            [
                ("gemm_f16_f32_nn f16", false),
                ("gemm_f32_nn f32", false),
                ("cuBLAS (gemm_f16_f32_nn f16)", true)
            ]
        );
        assert_eq!(
            c.series[0].points,
            [((1u64 << 30) as f64, 10.0), ((1u64 << 36) as f64, 50.0)]
        );
        assert_eq!(c.series[2].points[1], ((1u64 << 36) as f64, 500.0));
        assert_eq!(c.series[2].colour_of, "gemm_f16_f32_nn f16");

        let svg = render_svg(&file, "bench gemm on H100").unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let t = texts(&svg);
        for label in [
            "bench gemm on H100",
            "TFLOP/s",
            "problem size (floating-point operations per call)",
            "warpforge gemm_f16_f32_nn f16",
            "warpforge gemm_f32_nn f32",
            "cuBLAS (gemm_f16_f32_nn f16)",
        ] {
            assert_eq!(
                t.iter().filter(|x| *x == label).count(),
                1,
                "{label} in {t:?}"
            );
        }
        // A dot per warpforge point, a triangle per anchor point.
        assert_eq!(svg.matches("<circle").count(), 3);
        assert_eq!(svg.matches("<polygon").count(), 2);
    }

    #[test]
    fn a_bandwidth_chart_charts_the_copy_as_a_series_and_an_empty_file_is_an_error() {
        let copy = BenchRecord {
            kernel: "copy".into(),
            series: "copy f32".into(),
            gbps: 3000.0,
            ..BenchRecord::example("reduce", "copy f32 [1]", &RunFacts::unknown())
        };
        let sum = BenchRecord {
            gbps: 2500.0,
            anchor_gbps: Some(3000.0),
            ..BenchRecord::example("reduce", "sum f32 [1]", &RunFacts::unknown())
        };
        let file = BenchFile::new(vec![copy, sum], vec![], vec![]);
        let c = chart(&file);
        assert_eq!(c.y_label, "GB/s");
        assert_eq!(c.series.len(), 2, "{c:?}"); // no extra anchor line: the copy is one
        let t = texts(&render_svg(&file, "reduce").unwrap());
        assert!(
            t.contains(&"copy f32".to_owned()) && t.contains(&"warpforge sum f32".to_owned()),
            "{t:?}"
        );
        assert!(t.contains(&"problem size (bytes moved per call)".to_owned()));

        let e = render_svg(&BenchFile::new(vec![], vec![], vec![]), "empty").unwrap_err();
        assert!(e.contains("no case"), "{e}");
    }
}
