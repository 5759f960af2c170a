//! The conv2d benchmark ([`conv2d()`]): ResNet-50's convolution layers at
//! batch 32 ([`RESNET50`]), NHWC f16 and NCHW f32, each timed with events
//! against cuDNN in the same run.
//!
//! **What is measured.** Per layer and configuration, the anchor first:
//! cuDNN's fastest engine for that shape through its backend (graph) API
//! (heuristics modes A and B, their first few engine configurations each
//! timed, the fastest kept: `conv2d/cudnn_graph.rs`), the path PyTorch's
//! `benchmark=True` takes. Beside it, for comparison only and labelled
//! `cudnn-legacy`, the legacy API's fastest measured algorithm
//! (`cudnnFindConvolutionForwardAlgorithm`, `conv2d/cudnn_legacy.rs`); its ratio is
//! its rate ÷ the anchor's. On an H200 (2026-11-28) the legacy API ran the
//! 3×3 NHWC f16 layers at 72–77 TFLOP/s where cuDNN's graph API (through
//! PyTorch) did 277–384. Then warpforge's
//! [`Conv2d::run`](warpforge::conv2d::Conv2d::run) on the same shape, no bias, no
//! ReLU. A dense layer's rate is TFLOP/s = `2·N·P·Q·K·(C/G)·R·S` ÷ time
//! ([`BenchRow::flops`]); the depthwise layer does too little arithmetic per
//! byte for that to mean anything, so it reports GB/s of its least traffic
//! (input, weights and output each moved once). `ratio` is warpforge's rate ÷
//! the anchor's. Each anchor case's note names the engine (global index), its
//! knobs and numerical notes, which heuristic ranked it where, its workspace
//! and how many configurations were timed; the report's first note names the
//! cuDNN version and file.
//!
//! **cuDNN** is loaded at run time (cudarc's `cudnn` feature, dynamic
//! loading): it is probed by name first (`libcudnn.so.9` among cudarc's
//! candidates), because cudarc's loader panics when the library is absent.
//! Where it is missing (the emulator, no library on the loader's path, a
//! handle that cannot be created), each anchor case is
//! [`BenchReport::skipped`] with the reason, the report's
//! [`notes`](BenchReport::notes) say it once, and warpforge's figures stand
//! alone. The pip wheel `nvidia-cudnn-cu12` puts it in
//! `site-packages/nvidia/cudnn/lib`: add that directory to
//! `LD_LIBRARY_PATH`. f32 is compared with FMA arithmetic only (engines whose
//! numerical notes say tensor cores, i.e. TF32, or down-converted inputs are
//! left out; the legacy path uses `CUDNN_FMA_MATH`): the same arithmetic as
//! warpforge's f32 kernels. f16 takes any engine, as PyTorch does, with f32
//! as the convolution's compute type.
//!
//! **Sizes.** On a GPU the layers run at their real sizes. On the emulator
//! (or with [`ConvBench::with_max_log2`]) each layer is shrunk until its
//! multiply-adds `N·P·Q·K·(C/G)·R·S` are at most `2^N`: first the batch, then
//! the image (halving H and W, not below 8), then the channels (halving C
//! and K, not below 4; a depthwise layer keeps `G = C ≥ 2`), then the image
//! again (down to the smallest that the padded filter still fits). Its filter, stride, padding and groups stay
//! the layer's, so every case still takes its layer's algorithm.
//!
//! ```
//! use warpforge::Device;
//! use warpforge_tools::bench::conv2d::{self, ConvBench};
//! let dev = Device::emulator();
//! let mut config = ConvBench::defaults(&dev).with_max_log2(10)?;
//! config.layers.truncate(2);
//! config.timing.reps = 1;
//! let report = conv2d::conv2d(&dev, &config)?;
//! // Per layer and configuration: cuDNN (skipped on the emulator), then warpforge.
//! assert_eq!(report.rows.len(), 4);
//! assert_eq!(report.skipped.len(), 4);
//! # Ok::<(), warpforge::Error>(())
//! ```

use super::{BenchReport, BenchRow, Case, Skipped, Timing, row, sample, seconds_per_call};
use half::f16;
use warpforge::conv2d::{Conv2d, ConvElement, Layout, Padding};
use warpforge::{DType, Device, Error, Result};

/// One convolution layer of a network: logical sizes, square image and filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layer {
    /// What it is, e.g. `res3 3x3` (unique in its table).
    pub name: &'static str,
    /// Input channels `C`.
    pub c: usize,
    /// Input height and width `H = W`.
    pub hw: usize,
    /// Output channels `K`.
    pub k: usize,
    /// Filter height and width `R = S`.
    pub rs: usize,
    /// Stride (both axes).
    pub stride: usize,
    /// Zero padding on every side.
    pub pad: usize,
    /// Groups (`C` for a depthwise layer).
    pub groups: usize,
}

impl Layer {
    /// Whether it is depthwise (`G = C > 1`): rated in GB/s, not TFLOP/s.
    pub fn depthwise(&self) -> bool {
        self.groups > 1 && self.groups == self.c
    }
}

const fn layer(name: &'static str, c: usize, hw: usize, k: usize, rs: usize) -> Layer {
    Layer {
        name,
        c,
        hw,
        k,
        rs,
        stride: 1,
        pad: rs / 2,
        groups: 1,
    }
}

/// The batch of [`RESNET50`].
pub const RESNET50_BATCH: usize = 32;

/// ResNet-50's distinct convolution shapes (at 224×224): the 7×7/2 stem, the
/// 3×3 layer of each stage, each stage's 1×1 reduce (4·w → w channels) and
/// expand (w → 4·w), and a depthwise 3×3 over 56×56×256 (a MobileNet-style
/// layer at ResNet's stage-2 size).
pub static RESNET50: &[Layer] = &[
    Layer {
        stride: 2,
        ..layer("conv1 7x7/2", 3, 224, 64, 7)
    },
    layer("res2 3x3", 64, 56, 64, 3),
    layer("res3 3x3", 128, 28, 128, 3),
    layer("res4 3x3", 256, 14, 256, 3),
    layer("res5 3x3", 512, 7, 512, 3),
    layer("res2 1x1 reduce", 256, 56, 64, 1),
    layer("res2 1x1 expand", 64, 56, 256, 1),
    layer("res3 1x1 reduce", 512, 28, 128, 1),
    layer("res3 1x1 expand", 128, 28, 512, 1),
    layer("res4 1x1 reduce", 1024, 14, 256, 1),
    layer("res4 1x1 expand", 256, 14, 1024, 1),
    layer("res5 1x1 reduce", 2048, 7, 512, 1),
    layer("res5 1x1 expand", 512, 7, 2048, 1),
    Layer {
        groups: 256,
        ..layer("dw 3x3", 256, 56, 256, 3)
    },
];

/// Default cap on the emulator: 2^16 multiply-adds per layer.
pub const CONV_EMULATOR_MAX_LOG2: u32 = 16;

/// What [`conv2d()`] runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvBench {
    /// The layers, at full size.
    pub layers: Vec<Layer>,
    /// Their batch.
    pub batch: usize,
    /// `(layout, dtype)` pairs, each over every layer: NHWC f16 and NCHW f32
    /// by default (f32 and f16 only).
    pub configs: Vec<(Layout, DType)>,
    /// Shrink each layer to at most 2^N multiply-adds (module docs); `None`: full size.
    pub max_log2: Option<u32>,
    /// How each case is timed.
    pub timing: Timing,
}

/// One measured convolution: a layer (shrunk or not) in one configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvCase {
    /// The layer it comes from.
    pub layer: Layer,
    /// The element type (f16 or f32).
    pub dtype: DType,
    /// The convolution, with the sizes it runs at.
    pub conv: Conv2d,
}

impl ConvCase {
    /// Logical `[N, C, H, W, K, R, S]`: the shape its report rows carry.
    pub fn shape(&self) -> Vec<usize> {
        let d = self.conv.input_dims();
        let w = self.conv.weight_dims();
        let ([n, c, h, wd], [k, r, s]) = match self.conv.layout() {
            Layout::Nchw => (d, [w[0], w[2], w[3]]),
            Layout::Nhwc => ([d[0], d[3], d[1], d[2]], [w[0], w[1], w[2]]),
        };
        vec![n, c, h, wd, k, r, s]
    }

    /// `2·N·P·Q·K·(C/G)·R·S` and the least bytes (input, weights and output
    /// once each), checked.
    pub fn work(&self) -> Result<(u64, u64)> {
        let flops = self.conv.flops()?;
        let overflow = || Error::SizeOverflow {
            what: format!("bench conv2d: the bytes of {}", self.layer.name),
        };
        let elements = [
            self.conv.input_dims(),
            self.conv.weight_dims(),
            self.conv.output_dims()?,
        ]
        .iter()
        .try_fold(0u64, |acc, dims| {
            let n = dims
                .iter()
                .try_fold(1u64, |p, &d| p.checked_mul(d as u64))?;
            acc.checked_add(n)
        })
        .ok_or_else(overflow)?;
        let size: u64 = if self.dtype == DType::F16 { 2 } else { 4 };
        let bytes = elements.checked_mul(size).ok_or_else(overflow)?;
        Ok((flops, bytes))
    }

    /// `nhwc` or `nchw`.
    fn layout_name(&self) -> &'static str {
        match self.conv.layout() {
            Layout::Nchw => "nchw",
            Layout::Nhwc => "nhwc",
        }
    }

    /// The report cases of the anchor, of the legacy cuDNN API (comparison
    /// only) and of warpforge (op: `{layer} {layout} cudnn`, `… cudnn-legacy`
    /// and `{layer} {layout} {kernel}`, the kernel `dev` runs: on an H100
    /// the Hopper convolution where it applies).
    pub fn report_cases(&self, dev: &Device) -> Result<(Case, Case, Case)> {
        let kernel = match self.dtype {
            DType::F16 => self.conv.kernel_name_on::<f16>(dev, false)?,
            _ => self.conv.kernel_name_on::<f32>(dev, false)?,
        };
        let name = |who: &str| -> &'static str {
            Box::leak(format!("{} {} {who}", self.layer.name, self.layout_name()).into_boxed_str())
        };
        let case = |op| Case {
            op,
            dtype: self.dtype,
            shape: self.shape(),
            axis: None,
        };
        Ok((
            case(name("cudnn")),
            case(name("cudnn-legacy")),
            case(name(kernel)),
        ))
    }
}

/// `n` halved, rounded up.
fn half_of(n: usize) -> usize {
    n.div_ceil(2)
}

/// Multiply-adds of a layer at batch `n`: `N·P·Q·K·(C/G)·R·S`, saturating.
fn macs(l: &Layer, n: usize) -> u128 {
    let out = ((l.hw + 2 * l.pad).saturating_sub(l.rs) / l.stride + 1) as u128;
    [n, l.k, l.c / l.groups.max(1), l.rs, l.rs]
        .iter()
        .fold(out * out, |acc, &d| acc.saturating_mul(d as u128))
}

/// `l` at batch `n` shrunk to at most `cap` multiply-adds (module docs).
fn shrink(mut l: Layer, mut n: usize, cap: u128) -> (Layer, usize) {
    // Channels in whole 16-byte f16 chunks stay so (down to 8), others go
    // down to 4: a layer with `C % 8 ≠ 0` takes the im2col route in f16,
    // and the shrunk layer must take the full one's algorithm.
    let halves_c = |c: usize| {
        if c.is_multiple_of(8) {
            c.is_multiple_of(16)
        } else {
            c > 4
        }
    };
    while macs(&l, n) > cap {
        if n > 1 {
            n = half_of(n);
        } else if l.hw > 8 {
            l.hw = half_of(l.hw);
        } else if l.depthwise() && l.c > 2 {
            l.c = half_of(l.c);
            l.k = l.c * (l.k / l.groups);
            l.groups = l.c;
        } else if !l.depthwise() && (halves_c(l.c) || l.k > 4) {
            l.c = if halves_c(l.c) { half_of(l.c) } else { l.c };
            l.k = if l.k > 4 { half_of(l.k) } else { l.k };
        } else if l.hw > 1 && l.hw + 2 * l.pad > l.rs {
            l.hw -= 1;
        } else {
            break;
        }
    }
    (l, n)
}

impl ConvBench {
    /// [`RESNET50`] at batch 32, NHWC f16 and NCHW f32; full size on a GPU,
    /// shrunk to 2^[`CONV_EMULATOR_MAX_LOG2`] multiply-adds per layer on the
    /// emulator.
    pub fn defaults(dev: &Device) -> ConvBench {
        ConvBench {
            layers: RESNET50.to_vec(),
            batch: RESNET50_BATCH,
            configs: vec![(Layout::Nhwc, DType::F16), (Layout::Nchw, DType::F32)],
            max_log2: (!dev.is_gpu()).then_some(CONV_EMULATOR_MAX_LOG2),
            timing: Timing::defaults(dev),
        }
    }

    /// Caps each layer at 2^`max_log2` multiply-adds (module docs).
    pub fn with_max_log2(mut self, max_log2: u32) -> Result<ConvBench> {
        if max_log2 >= 127 {
            return Err(Error::SizeOverflow {
                what: format!("bench conv2d: 2^{max_log2} multiply-adds"),
            });
        }
        self.max_log2 = Some(max_log2);
        Ok(self)
    }

    /// Every case, in order: per configuration, per layer.
    pub fn cases(&self) -> Result<Vec<ConvCase>> {
        let mut cases = Vec::new();
        for &(layout, dtype) in &self.configs {
            if !matches!(dtype, DType::F16 | DType::F32) {
                return Err(Error::ShapeMismatch {
                    op: "bench conv2d",
                    detail: format!(
                        "no conv2d benchmark for {} (f16 and f32 only)",
                        dtype.name()
                    ),
                });
            }
            for full in &self.layers {
                let (l, n) = match self.max_log2 {
                    Some(k) => shrink(*full, self.batch, 1u128 << k),
                    None => (*full, self.batch),
                };
                let conv = Conv2d::new(
                    layout,
                    [n, l.c, l.hw, l.hw],
                    [l.k, l.c / l.groups.max(1), l.rs, l.rs],
                )
                .stride(l.stride, l.stride)
                .padding(Padding::uniform(l.pad))
                .groups(l.groups);
                conv.validate()?;
                cases.push(ConvCase {
                    layer: l,
                    dtype,
                    conv,
                });
            }
        }
        Ok(cases)
    }
}

/// Element types [`conv2d()`] times on both libraries.
trait BenchConv: ConvElement + cudnn::CudnnElement {
    fn from_f32(v: f32) -> Self;
}

impl BenchConv for f32 {
    fn from_f32(v: f32) -> Self {
        v
    }
}

impl BenchConv for f16 {
    fn from_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
}

/// A rate row: TFLOP/s for a dense layer, GB/s (no FLOP count) for a depthwise one.
fn conv_row(case: &ConvCase, report_case: &Case, seconds: f64, anchor: f64) -> Result<BenchRow> {
    let (flops, bytes) = case.work()?;
    let mut r = row(report_case, bytes, seconds, anchor);
    // The ratio is of GB/s over the same bytes either way: the ratio of times.
    if !case.layer.depthwise() {
        r.flops = Some(flops);
    }
    Ok(r)
}

/// Measures one case: cuDNN, then warpforge.
fn measure<T: BenchConv>(
    dev: &Device,
    timing: Timing,
    dnn: &std::result::Result<cudnn::Cudnn, String>,
    case: &ConvCase,
    report: &mut BenchReport,
) -> Result<()> {
    let (anchor_case, legacy_case, kernel_case) = case.report_cases(dev)?;
    let (_, bytes) = case.work()?;
    let skip = |report: &mut BenchReport, c: &Case, reason: String| {
        report.skipped.push(Skipped {
            case: c.clone(),
            reason,
        })
    };
    // The anchor: the backend API's fastest engine; the legacy API beside it.
    let timed = dnn.as_ref().map_err(Clone::clone).and_then(|d| {
        let mut ops = d.operands::<T>(&case.conv)?;
        let graph = d.time_graph::<T>(timing, &case.conv, &mut ops);
        let legacy = d.time_legacy::<T>(timing, &case.conv, &mut ops);
        Ok((graph, legacy))
    });
    let (graph, legacy) = match timed {
        Ok((g, l)) => (g, Some(l)),
        Err(why) => (Err(why), None),
    };
    // A timed cuDNN row against `anchor` (`None`: it is the anchor), and a
    // note naming how cuDNN ran it.
    let layer = anchor_case.op.trim_end_matches(" cudnn");
    let push =
        |report: &mut BenchReport, c: &Case, timed: &cudnn::Timed, anchor: Option<f64>, api| {
            let rate = super::gbps(bytes, timed.seconds);
            let anchor = anchor.unwrap_or(rate);
            report.rows.push(conv_row(case, c, timed.seconds, anchor)?);
            report
                .notes
                .push(format!("{layer}: cuDNN {api} {}", timed.algorithm));
            Ok::<f64, Error>(rate)
        };
    let anchor_gbps = match graph {
        Ok(timed) => push(report, &anchor_case, &timed, None, "graph API")?,
        Err(why) => {
            skip(report, &anchor_case, why);
            f64::NAN
        }
    };
    match legacy {
        Some(Ok(timed)) => {
            push(
                report,
                &legacy_case,
                &timed,
                Some(anchor_gbps),
                "legacy API (comparison only)",
            )?;
        }
        Some(Err(why)) => skip(report, &legacy_case, why),
        None => {}
    }
    let conv = case.conv;
    let host = |dims: [usize; 4]| {
        (0..dims.iter().product::<usize>())
            .map(|i| T::from_f32(sample(i)))
            .collect::<Vec<T>>()
    };
    let buffers = (|| {
        Ok::<_, Error>((
            dev.upload(&host(conv.input_dims()))?,
            dev.upload(&host(conv.weight_dims()))?,
            dev.alloc_zeroed::<T>(conv.output_dims()?.iter().product())?,
        ))
    })();
    let (x, w, mut y) = match buffers {
        Ok(b) => b,
        Err(e @ Error::OutOfMemory { .. }) => {
            skip(report, &kernel_case, e.to_string());
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    match seconds_per_call(dev, timing, || conv.run(dev, &x, &w, None, &mut y)) {
        Ok(s) => report
            .rows
            .push(conv_row(case, &kernel_case, s, anchor_gbps)?),
        Err(e @ Error::OutOfMemory { .. }) => skip(report, &kernel_case, e.to_string()),
        Err(e) => return Err(e),
    }
    Ok(())
}

/// Runs every case of `config` on `dev` (module docs): cuDNN and warpforge
/// on the same shapes, in the same run. cuDNN is opened once; if it cannot
/// be, each anchor case is skipped with the reason and warpforge is measured
/// alone. Out-of-memory cases are skipped, as in [`super::reduce()`].
pub fn conv2d(dev: &Device, config: &ConvBench) -> Result<BenchReport> {
    let cases = config.cases()?;
    let dnn = cudnn::Cudnn::open(dev);
    let mut report = BenchReport {
        device: dev.name(),
        timing: config.timing,
        rows: Vec::new(),
        skipped: Vec::new(),
        notes: vec![match &dnn {
            Ok(d) => d.describe(),
            Err(why) => why.clone(),
        }],
    };
    for case in &cases {
        match case.dtype {
            DType::F16 => measure::<f16>(dev, config.timing, &dnn, case, &mut report)?,
            _ => measure::<f32>(dev, config.timing, &dnn, case, &mut report)?,
        }
    }
    Ok(report)
}

mod cudnn;
mod cudnn_graph;
mod cudnn_legacy;

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's layers written out by hand: `(name, N, C, H, K, R, stride,
    /// groups, P)` with `P` the output side worked out from the layer
    /// (`⌊(H + 2·pad − R) / stride⌋ + 1`, pad = R/2).
    type Row = (&'static str, u64, u64, u64, u64, u64, u64, u64, u64);
    const TABLE: &[Row] = &[
        ("conv1 7x7/2", 32, 3, 224, 64, 7, 2, 1, 112),
        ("res2 3x3", 32, 64, 56, 64, 3, 1, 1, 56),
        ("res3 3x3", 32, 128, 28, 128, 3, 1, 1, 28),
        ("res4 3x3", 32, 256, 14, 256, 3, 1, 1, 14),
        ("res5 3x3", 32, 512, 7, 512, 3, 1, 1, 7),
        ("res2 1x1 reduce", 32, 256, 56, 64, 1, 1, 1, 56),
        ("res2 1x1 expand", 32, 64, 56, 256, 1, 1, 1, 56),
        ("res3 1x1 reduce", 32, 512, 28, 128, 1, 1, 1, 28),
        ("res3 1x1 expand", 32, 128, 28, 512, 1, 1, 1, 28),
        ("res4 1x1 reduce", 32, 1024, 14, 256, 1, 1, 1, 14),
        ("res4 1x1 expand", 32, 256, 14, 1024, 1, 1, 1, 14),
        ("res5 1x1 reduce", 32, 2048, 7, 512, 1, 1, 1, 7),
        ("res5 1x1 expand", 32, 512, 7, 2048, 1, 1, 1, 7),
        ("dw 3x3", 32, 256, 56, 256, 3, 1, 256, 56),
    ];

    fn gpu_sized() -> ConvBench {
        ConvBench {
            layers: RESNET50.to_vec(),
            batch: RESNET50_BATCH,
            configs: vec![(Layout::Nhwc, DType::F16), (Layout::Nchw, DType::F32)],
            max_log2: None,
            timing: Timing {
                warmup: 0,
                iters: 1,
                reps: 1,
            },
        }
    }

    #[test]
    fn the_full_size_cases_count_flops_and_bytes_from_the_layer_table() {
        let cases = gpu_sized().cases().unwrap();
        assert_eq!(cases.len(), 2 * TABLE.len());
        for (i, case) in cases.iter().enumerate() {
            let (name, n, c, h, k, r, stride, g, p) = TABLE[i % TABLE.len()];
            let size = if i < TABLE.len() { 2 } else { 4 };
            assert_eq!(case.layer.name, name);
            assert_eq!(
                case.dtype,
                if i < TABLE.len() {
                    DType::F16
                } else {
                    DType::F32
                }
            );
            assert_eq!(case.shape(), [n, c, h, h, k, r, r].map(|v| v as usize));
            assert_eq!(case.conv.strides(), (stride as usize, stride as usize));
            assert_eq!(case.conv.output_hw().unwrap(), (p as usize, p as usize));
            let (flops, bytes) = case.work().unwrap();
            assert_eq!(flops, 2 * n * p * p * k * (c / g) * r * r, "{name}");
            let moved = n * c * h * h + k * (c / g) * r * r + n * k * p * p;
            assert_eq!(bytes, size * moved, "{name}");
        }
        // Two figures checked by hand: conv1 is 7.55 GFLOP at batch 32, and
        // the depthwise layer moves 2 · 25.7 M f16 elements and 2304 weights.
        assert_eq!(cases[0].work().unwrap().0, 7_552_892_928);
        assert_eq!(cases[13].work().unwrap().1, 2 * (2 * 25_690_112 + 2304));
    }

    #[test]
    fn each_layer_takes_its_algorithm_at_full_and_shrunk_size() {
        use warpforge::conv2d::Algorithm;
        let full = gpu_sized().cases().unwrap();
        let tiny = gpu_sized().with_max_log2(10).unwrap().cases().unwrap();
        for (f, t) in full.iter().zip(&tiny) {
            let (flops, _) = t.work().unwrap();
            assert!(flops / 2 <= 1 << 10, "{}: {flops} flops", t.layer.name);
            assert_eq!(t.conv.strides(), f.conv.strides());
            assert_eq!(t.layer.rs, f.layer.rs);
            assert_eq!(t.layer.depthwise(), f.layer.depthwise(), "{}", t.layer.name);
            let algo = |c: &ConvCase| match c.dtype {
                DType::F16 => c.conv.algorithm::<f16>().unwrap(),
                _ => c.conv.algorithm::<f32>().unwrap(),
            };
            assert_eq!(algo(t), algo(f), "{}", t.layer.name);
            if f.layer.depthwise() {
                assert_eq!(algo(f), Algorithm::Depthwise);
            }
        }
    }

    #[test]
    fn the_emulator_run_measures_warpforge_and_skips_cudnn_with_the_reason() {
        let dev = Device::emulator();
        let mut config = ConvBench::defaults(&dev).with_max_log2(9).unwrap();
        config.timing = Timing {
            warmup: 0,
            iters: 1,
            reps: 1,
        };
        let cases = config.cases().unwrap();
        let report = conv2d(&dev, &config).unwrap();
        assert_eq!(report.notes, [cudnn::EMULATOR]);
        assert_eq!(report.rows.len(), cases.len());
        assert_eq!(report.skipped.len(), cases.len());
        for ((case, r), s) in cases.iter().zip(&report.rows).zip(&report.skipped) {
            let (anchor, _, kernel) = case.report_cases(&dev).unwrap();
            assert_eq!(r.case(), kernel);
            assert_eq!(s.case, anchor);
            assert_eq!(s.reason, cudnn::EMULATOR);
            let (flops, bytes) = case.work().unwrap();
            assert_eq!(r.bytes, bytes);
            if case.layer.depthwise() {
                assert_eq!(r.flops, None, "depthwise is rated in GB/s");
            } else {
                assert_eq!(r.flops, Some(flops));
            }
            assert!(r.seconds > 0.0 && r.seconds.is_finite(), "{r:?}");
            assert!(r.ratio.is_nan(), "no anchor: {r:?}");
        }
    }
}
