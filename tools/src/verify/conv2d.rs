//! conv2d verification ([`verify_conv2d`], the [`registry`](crate::registry)
//! entry `conv2d`): every kernel [`Conv2d::run`] can launch, in both layouts
//! and each dtype, against [`reference::conv2d`] (the f64 seven-loop
//! definition, sharing no index code with the kernels).
//!
//! **Cases** ([`cases`]): a dense 3×3 with bias and ReLU, stride 2 with
//! asymmetric padding, dilation 2 with a non-square filter, 2 groups,
//! depthwise with channel multipliers 1 and 2 (stride, dilation, ReLU),
//! depthwise over several of the tiled kernels' tiles, a depthwise 5×5 (the
//! direct kernel), 1×1
//! without bias (the GEMM route) and with it, an empty batch, a 1×1 image,
//! and one past the implicit GEMM's 64×64 tile in both directions; then one
//! random geometry per random length of `lens` (multiply-adds about that
//! length). Each runs NCHW and NHWC, in f32, f16 and bf16; the
//! implicit-GEMM ones run NHWC f16 and bf16 once more on the large tile
//! (`Conv2d::tile`), which the heuristic picks only for layers too large to
//! emulate.
//!
//! **One report per kernel**, named as [`Conv2d::kernel_name_for`] names it
//! (`conv2d_depthwise_nhwc_f16`, `conv2d_nchw_f32_64x64x16`, …), except the 1×1
//! route, whose kernel is a GEMM that the `gemm` entry already reports: it is
//! `conv2d_1x1_{nchw,nhwc}_{dtype}` here; the im2col route (f16/bf16 with
//! `C % 8 ≠ 0` and one group: `im2col_*`, then a 1×1 convolution),
//! `conv2d_im2col_{nchw,nhwc}_{dtype}`; and NCHW f16/bf16 implicit GEMMs,
//! which run the NHWC kernels between layout changes:
//! `conv2d_nchw_{f16,bf16}_via_nhwc`. A report's `lengths` hold each
//! case's multiply-adds `N·P·Q·K·(C/G)·R·S`.
//!
//! **Tolerance.** The output is poisoned with NaN first, so an element no
//! thread writes fails. Small-integer inputs (|x|, |w| ≤ 4, |bias| ≤ 8) make
//! every f32 partial sum exact: the result must be the exact value rounded
//! once to the output type, bit for bit. Random inputs in (−1, 1) are held to
//! [`tolerance`]: the dot-product bound of `C·R·S/G` products (plus the
//! bias) accumulated in f32 over `Σ|x·w| + |bias|` (doubled on the tensor
//! cores, whose `mma` order is the hardware's), plus the final rounding to a
//! narrower output.

use super::{EDGE_LENGTHS, GemmValue, KernelReport};
use half::{bf16, f16};
use rand::Rng;
use rand::rngs::StdRng;
use warpforge::conv2d::{Algorithm, Conv2d, ConvElement, Layout, Padding};
use warpforge::gemm::TileConfig;
use warpforge::{Device, Dim3, Kernel, LaunchConfig, Result, reference};
use warpforge_kernels::conv as kc;
use warpforge_kernels::transpose::{self as kt, TRANSPOSE_THREADS, TRANSPOSE_TILE};

/// One verification geometry, in logical sizes (any layout).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spec {
    /// `[N, C, H, W]`.
    pub input: [usize; 4],
    /// `[K, C/G, R, S]`.
    pub weight: [usize; 4],
    /// `(rows, columns)`.
    pub stride: (usize, usize),
    /// Zero padding.
    pub padding: Padding,
    /// `(rows, columns)`.
    pub dilation: (usize, usize),
    /// Groups.
    pub groups: usize,
    /// ReLU after the bias.
    pub relu: bool,
    /// With a bias of `K` values.
    pub bias: bool,
    /// Small-integer inputs (exact results) rather than random ones in (−1, 1).
    pub integers: bool,
}

impl Spec {
    fn dense(input: [usize; 4], weight: [usize; 4]) -> Spec {
        Spec {
            input,
            weight,
            stride: (1, 1),
            padding: Padding::default(),
            dilation: (1, 1),
            groups: 1,
            relu: false,
            bias: false,
            integers: true,
        }
    }

    /// The convolution in `layout`.
    pub fn conv(&self, layout: Layout) -> Conv2d {
        Conv2d::new(layout, self.input, self.weight)
            .stride(self.stride.0, self.stride.1)
            .padding(self.padding)
            .dilation(self.dilation.0, self.dilation.1)
            .groups(self.groups)
            .relu(self.relu)
    }

    /// Multiply-adds `N·P·Q·K·(C/G)·R·S` (0 for an invalid geometry).
    pub fn macs(&self) -> usize {
        let conv = self.conv(Layout::Nchw);
        conv.flops().map_or(0, |f| (f / 2) as usize)
    }

    fn describe(&self, layout: Layout) -> String {
        let p = self.padding;
        format!(
            "{layout:?} x {:?} w {:?} stride {:?} pad ({}, {}, {}, {}) dilation {:?} groups {}{}{}{}",
            self.input,
            self.weight,
            self.stride,
            p.top,
            p.bottom,
            p.left,
            p.right,
            self.dilation,
            self.groups,
            if self.bias { " bias" } else { "" },
            if self.relu { " relu" } else { "" },
            if self.integers { " (exact)" } else { "" },
        )
    }
}

/// The fixed cases (module docs), then one random geometry per length of
/// `lens` past [`EDGE_LENGTHS`].
pub fn cases(rng: &mut StdRng, lens: &[usize]) -> Vec<Spec> {
    let d = Spec::dense;
    let mut v = vec![
        Spec {
            padding: Padding::uniform(1),
            relu: true,
            bias: true,
            ..d([2, 3, 7, 7], [5, 3, 3, 3])
        },
        Spec {
            stride: (2, 2),
            padding: Padding {
                top: 1,
                bottom: 0,
                left: 2,
                right: 1,
            },
            ..d([1, 4, 9, 8], [6, 4, 3, 3])
        },
        Spec {
            dilation: (2, 2),
            padding: Padding::symmetric(2, 1),
            integers: false,
            ..d([1, 3, 8, 9], [4, 3, 3, 2])
        },
        Spec {
            groups: 2,
            stride: (1, 2),
            padding: Padding::uniform(1),
            bias: true,
            ..d([2, 4, 6, 7], [6, 2, 3, 3])
        },
        // Depthwise, channel multiplier 2, dilation along rows.
        Spec {
            groups: 4,
            padding: Padding::uniform(1),
            dilation: (2, 1),
            bias: true,
            ..d([1, 4, 7, 6], [8, 1, 3, 3])
        },
        // Depthwise, multiplier 1, stride 2, ReLU, random values.
        Spec {
            groups: 6,
            stride: (2, 2),
            padding: Padding::uniform(1),
            relu: true,
            integers: false,
            ..d([2, 6, 9, 9], [6, 1, 3, 3])
        },
        // Depthwise over several tiles of the tiled kernels (NHWC: 1296
        // pixels, two 32-channel tiles; NCHW: three 16-row tiles), ragged
        // channels (40: whole 16-byte vectors in f16 only at 8).
        Spec {
            groups: 40,
            padding: Padding::uniform(1),
            bias: true,
            ..d([1, 40, 36, 36], [40, 1, 3, 3])
        },
        // Depthwise 5 × 5: more taps than the tiled kernels hold, the
        // direct kernel.
        Spec {
            groups: 3,
            padding: Padding::uniform(2),
            ..d([1, 3, 6, 7], [6, 1, 5, 5])
        },
        // 1×1, stride 1, no padding, no bias: the GEMM route.
        d([2, 5, 4, 6], [7, 5, 1, 1]),
        Spec {
            integers: false,
            ..d([1, 9, 5, 3], [4, 9, 1, 1])
        },
        // 1×1 with a bias: not the GEMM route.
        Spec {
            bias: true,
            ..d([1, 5, 4, 6], [7, 5, 1, 1])
        },
        // An empty batch, and a 1×1 image with a padded 3×3 filter.
        Spec {
            padding: Padding::uniform(1),
            ..d([0, 3, 5, 5], [4, 3, 3, 3])
        },
        Spec {
            padding: Padding::uniform(1),
            bias: true,
            ..d([1, 2, 1, 1], [3, 2, 3, 3])
        },
        // Past the 64×64 tile both ways (NHWC rows N·P·Q = 81, NCHW columns P·Q = 81; K = 70):
        // 3 channels (f16/bf16: the im2col route), and 8 (their implicit GEMM's 16-byte gather).
        Spec {
            padding: Padding::uniform(1),
            integers: false,
            ..d([1, 3, 9, 9], [70, 3, 3, 3])
        },
        Spec {
            padding: Padding::uniform(1),
            bias: true,
            ..d([1, 8, 9, 9], [70, 8, 3, 3])
        },
        // C and K multiples of 8, one group: the Hopper implicit GEMM on an
        // sm_90 device (f16/bf16; `conv2d_wgmma_nhwc_*`, NCHW between layout
        // changes). Ragged in M (N·P·Q = 162 over the 128-pixel tile) and in
        // K (24 of 128 channels), C = 16 (each tap's k-step zero past C),
        // bias and ReLU.
        Spec {
            padding: Padding::uniform(1),
            bias: true,
            relu: true,
            ..d([2, 16, 9, 9], [24, 16, 3, 3])
        },
        // 7 × 7, stride 2, padding 3 (conv1's geometry on 8 channels).
        Spec {
            stride: (2, 2),
            padding: Padding::uniform(3),
            ..d([1, 8, 12, 10], [16, 8, 7, 7])
        },
        // Dilation 2 with random values, C = 72 (two k-steps a tap, the
        // second 8 channels wide).
        Spec {
            dilation: (2, 2),
            padding: Padding::uniform(2),
            integers: false,
            ..d([1, 72, 6, 7], [16, 72, 3, 3])
        },
        // 1 × 1 with a bias (not the GEMM route): C = 64, one whole k-step.
        Spec {
            bias: true,
            ..d([1, 64, 5, 6], [8, 64, 1, 1])
        },
    ];
    for &len in lens.iter().skip(EDGE_LENGTHS.len()) {
        v.push(random_spec(rng, len));
    }
    v
}

/// A random valid geometry of about `len` multiply-adds (random values).
fn random_spec(rng: &mut StdRng, len: usize) -> Spec {
    let groups = [1, 1, 2, 3][rng.random_range(0..4)];
    let cg = rng.random_range(1..=6);
    let depthwise = rng.random_range(0..4) == 0;
    let (c, groups, cg) = if depthwise {
        let c = rng.random_range(2..=16);
        (c, c, 1)
    } else {
        (groups * cg, groups, cg)
    };
    let k = groups * rng.random_range(1..=8);
    let (r, s) = (rng.random_range(1..=4), rng.random_range(1..=4));
    let stride = (rng.random_range(1..=2), rng.random_range(1..=2));
    let dilation = (rng.random_range(1..=2), rng.random_range(1..=2));
    let padding = Padding {
        top: rng.random_range(0..=2),
        bottom: rng.random_range(0..=2),
        left: rng.random_range(0..=2),
        right: rng.random_range(0..=2),
    };
    let n = rng.random_range(1..=2);
    // P·Q ≈ len / (N·K·(C/G)·R·S); H and W about stride · sqrt of that.
    let per_pixel = n * k * cg * r * s;
    let side = ((len / per_pixel.max(1)) as f64).sqrt().max(1.0) as usize;
    let extent = |f: usize, d: usize| (f - 1) * d + 1;
    let h = (side * stride.0).max(extent(r, dilation.0)).min(96);
    let w = (side * stride.1).max(extent(s, dilation.1)).min(96);
    Spec {
        input: [n, c, h, w],
        weight: [k, cg, r, s],
        stride,
        padding,
        dilation,
        groups,
        relu: rng.random_range(0..2) == 0,
        bias: rng.random_range(0..2) == 0,
        integers: false,
    }
}

/// The bound on `|result − exact|` for one output: `terms` products (plus a
/// bias) accumulated in f32 over `magnitude = Σ|x·w| + |bias|`
/// ([`reference::gemm::tolerance`]), doubled for the tensor cores, plus
/// rounding the f32 result to an output type of unit roundoff `out_unit`
/// (with `out_underflow` near 0) when that is coarser than f32.
pub fn tolerance(
    exact: f64,
    magnitude: f64,
    terms: usize,
    tensor_cores: bool,
    (out_unit, out_underflow): (f64, f64),
) -> f64 {
    let f32_unit = f64::from(f32::EPSILON) / 2.0;
    let mut tol = reference::gemm::tolerance(magnitude, terms + 1, f32_unit);
    if tensor_cores {
        tol *= 2.0;
    }
    if out_unit > f32_unit {
        tol += out_unit * (exact.abs() + tol) + out_underflow;
    }
    tol
}

/// Checks a run's output `got` against the reference `want` (exact values)
/// and `magnitude` (`Σ|x·w| + |bias|` per output) into `report`: exactly
/// `T`'s rounding of `want` for an `integers` case, within [`tolerance`]
/// otherwise; NaN where a number is due fails.
#[allow(clippy::too_many_arguments)]
pub(super) fn check_results<T: GemmValue>(
    report: &mut KernelReport,
    case: &str,
    got: &[f64],
    want: &[f64],
    magnitude: &[f64],
    terms: usize,
    integers: bool,
    tensor_cores: bool,
) {
    if got.len() != want.len() {
        let why = format!("{} outputs, expected {}", got.len(), want.len());
        report.record(case, 0, 0.0, 0.0, Err(why));
        return;
    }
    for (i, ((&g, &exact), &mag)) in got.iter().zip(want).zip(magnitude).enumerate() {
        let (w, tol) = if integers {
            // The exact integer fits f32, so through f32 it rounds once to T.
            (T::from_f64(f64::from(exact as f32)).to_f64(), 0.0)
        } else {
            let tol = tolerance(
                exact,
                mag,
                terms,
                tensor_cores,
                (T::UNIT_ROUNDOFF, T::UNDERFLOW),
            );
            (exact, tol)
        };
        let err = (g - w).abs();
        let outcome = if g == w {
            Ok(0.0)
        } else if err <= tol {
            Ok(err / tol)
        } else {
            Err(format!(
                "got {g:e}, reference {w:e}, error {err:e} > tolerance {tol:e}"
            ))
        };
        report.record(case, i, g, w, outcome);
    }
}

/// The report name of `spec` in `layout` for `T`: the kernel's own,
/// `conv2d_1x1_{layout}_{dtype}` for the GEMM route,
/// `conv2d_im2col_{layout}_{dtype}` for the im2col route, or
/// `conv2d_nchw_{dtype}_via_nhwc` for an NCHW convolution that runs an NHWC
/// kernel between layout changes (module docs).
fn report_name<T: ConvElement>(dev: &Device, conv: &Conv2d, bias: bool) -> Result<&'static str> {
    let layout = match conv.layout() {
        Layout::Nchw => "nchw",
        Layout::Nhwc => "nhwc",
    };
    let dtype = T::DTYPE.name();
    let kernel = conv.kernel_name_on::<T>(dev, bias)?;
    let algorithm = conv.algorithm_on::<T>(dev, bias)?;
    let name = if algorithm == Algorithm::Gemm1x1 {
        format!("conv2d_1x1_{layout}_{dtype}")
    } else if algorithm == Algorithm::Im2col {
        format!("conv2d_im2col_{layout}_{dtype}")
    } else if layout == "nchw"
        && (kernel.starts_with("conv2d_nhwc_") || kernel.starts_with("conv2d_wgmma_nhwc_"))
    {
        format!("conv2d_nchw_{dtype}_via_nhwc")
    } else {
        return Ok(kernel);
    };
    Ok(Box::leak(name.into_boxed_str()))
}

/// Runs `spec` in `layout` on `dev` in `T` and checks it into the report of
/// its kernel (created in `reports` on first use).
fn check_case<T: ConvElement + GemmValue>(
    dev: &Device,
    rng: &mut StdRng,
    spec: &Spec,
    (layout, tile): (Layout, Option<TileConfig>),
    reports: &mut Vec<KernelReport>,
) -> Result<()> {
    let conv = spec.conv(layout);
    let conv = tile.map_or(conv, |t| conv.tile(t));
    let name = report_name::<T>(dev, &conv, spec.bias)?;
    let at = match reports.iter().position(|r| r.kernel == name) {
        Some(i) => i,
        None => {
            reports.push(KernelReport::default_for(name));
            reports.len() - 1
        }
    };
    let report = &mut reports[at];
    report.lengths.push(spec.macs());
    let mut draw = |len: usize, limit: i32| -> Vec<f64> {
        (0..len)
            .map(|_| {
                let v = if spec.integers {
                    f64::from(rng.random_range(-limit..=limit))
                } else {
                    rng.random_range(-1.0..1.0)
                };
                T::from_f64(v).to_f64()
            })
            .collect()
    };
    let count = |d: [usize; 4]| d.iter().product::<usize>();
    let x = draw(count(conv.input_dims()), 4);
    let w = draw(count(conv.weight_dims()), 4);
    let bias = spec.bias.then(|| draw(spec.weight[0], 8));
    let want = reference::conv2d(&conv, &x, &w, bias.as_deref())?;
    let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
    let magnitude = reference::conv2d(
        &conv.relu(false),
        &abs(&x),
        &abs(&w),
        bias.as_deref().map(abs).as_deref(),
    )?;
    let upload = |v: &[f64]| dev.upload(&v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>());
    let (xb, wb) = (upload(&x)?, upload(&w)?);
    let bb = bias.as_deref().map(upload).transpose()?;
    // NaN first: an output no thread writes fails.
    let mut yb = dev.upload(&vec![T::from_f64(f64::NAN); want.len()])?;
    report.record_launches(dev, || conv.run(dev, &xb, &wb, bb.as_ref(), &mut yb))?;
    let got: Vec<f64> = yb.to_host()?.into_iter().map(T::to_f64).collect();
    let tensor_cores = matches!(
        conv.algorithm_on::<T>(dev, spec.bias)?,
        Algorithm::Gemm1x1 | Algorithm::Im2col | Algorithm::Wgmma
    ) && T::DTYPE.name() != "f32";
    let terms = spec.weight[1] * spec.weight[2] * spec.weight[3];
    check_results::<T>(
        report,
        &match tile {
            Some(t) => format!("{} ({t:?} tile)", spec.describe(layout)),
            None => spec.describe(layout),
        },
        &got,
        &want,
        &magnitude,
        terms,
        spec.integers,
        tensor_cores,
    );
    Ok(())
}

/// Every conv2d kernel (module docs): each case of [`cases`] in NCHW and
/// NHWC, in f32, f16 and bf16, one report per kernel; then the batched
/// transposes (`transpose_{f32,f16,bf16}`, each against the exact transpose).
pub fn verify_conv2d(dev: &Device, rng: &mut StdRng, lens: &[usize]) -> Result<Vec<KernelReport>> {
    let specs = cases(rng, lens);
    let mut reports = Vec::new();
    for layout in [Layout::Nchw, Layout::Nhwc] {
        for spec in &specs {
            let how = (layout, None);
            check_case::<f32>(dev, rng, spec, how, &mut reports)?;
            check_case::<f16>(dev, rng, spec, how, &mut reports)?;
            check_case::<bf16>(dev, rng, spec, how, &mut reports)?;
        }
    }
    // The NHWC large tile, which `Conv2d` picks by shape for layers too large
    // to emulate here: the implicit-GEMM cases again with it pinned.
    for spec in &specs {
        if spec.conv(Layout::Nhwc).algorithm_for::<f16>(spec.bias)? == Algorithm::ImplicitGemm {
            check_case::<f16>(dev, rng, spec, LARGE, &mut reports)?;
            check_case::<bf16>(dev, rng, spec, LARGE, &mut reports)?;
        }
    }
    reports.push(check_transposes::<f32>(dev, rng)?);
    reports.push(check_transposes::<f16>(dev, rng)?);
    reports.push(check_transposes::<bf16>(dev, rng)?);
    Ok(reports)
}

/// The NHWC large tile, pinned: [`verify_conv2d`]'s second round of the implicit-GEMM cases.
const LARGE: (Layout, Option<TileConfig>) = (Layout::Nhwc, Some(TileConfig::Large));

/// The kernels [`verify_conv2d`] launches on `dev` at the edge lengths (the
/// registry's declaration for `conv2d`): each fixed case's main kernel
/// ([`Conv2d::kernel_name_for`], a GEMM's for the 1×1 route) in each layout and
/// dtype and on the pinned large tile, the im2col kernels (the im2col
/// route's first launches), and the three transposes (the NCHW route's
/// layout changes of f16 and bf16, each also checked on its own).
pub fn conv2d_kernels(dev: &Device) -> Result<Vec<&'static str>> {
    use rand::SeedableRng;
    // The fixed cases do not draw from the generator.
    let specs = cases(&mut StdRng::seed_from_u64(0), EDGE_LENGTHS);
    let mut names = Vec::new();
    let main_kernel = |spec: &Spec, (layout, tile): (Layout, Option<TileConfig>), dtype: usize| {
        let conv = spec.conv(layout);
        let conv = tile.map_or(conv, |t| conv.tile(t));
        match dtype {
            0 => conv.kernel_name_on::<f32>(dev, spec.bias),
            1 => conv.kernel_name_on::<f16>(dev, spec.bias),
            _ => conv.kernel_name_on::<bf16>(dev, spec.bias),
        }
    };
    for spec in &specs {
        for layout in [Layout::Nchw, Layout::Nhwc] {
            for dtype in 0..3 {
                names.push(main_kernel(spec, (layout, None), dtype)?);
            }
        }
        let algorithm = spec.conv(Layout::Nhwc).algorithm_for::<f16>(spec.bias)?;
        if algorithm == Algorithm::ImplicitGemm {
            names.push(main_kernel(spec, LARGE, 1)?);
            names.push(main_kernel(spec, LARGE, 2)?);
        }
        if algorithm == Algorithm::Im2col {
            names.extend([kc::im2col_nhwc_f16::NAME, kc::im2col_nhwc_bf16::NAME]);
        }
    }
    names.extend([
        kt::transpose_f32::NAME,
        kt::transpose_f16::NAME,
        kt::transpose_bf16::NAME,
    ]);
    names.sort_unstable();
    names.dedup();
    Ok(names)
}

/// Element types with a batched transpose kernel (`transpose_*`).
trait Transposable: ConvElement + GemmValue {
    /// Launches `transpose_*`: `y` bound as the batches of `cols × rows`.
    fn launch(
        dev: &Device,
        cfg: LaunchConfig,
        x: &warpforge::DeviceBuffer<Self>,
        y: warpforge::MatrixMut<'_, Self>,
    ) -> Result<()>;
    const NAME: &'static str;
}

macro_rules! transposable {
    ($($t:ty: $k:ident),*) => { $(
        impl Transposable for $t {
            fn launch(
                dev: &Device,
                cfg: LaunchConfig,
                x: &warpforge::DeviceBuffer<Self>,
                y: warpforge::MatrixMut<'_, Self>,
            ) -> Result<()> {
                dev.launch(kt::$k, cfg, (x, y))
            }
            const NAME: &'static str = kt::$k::NAME;
        }
    )* };
}
transposable!(f32: transpose_f32, f16: transpose_f16, bf16: transpose_bf16);

/// The batched transpose of `T` (`transpose_*`: what `Conv2d` runs around
/// the NHWC kernels for an NCHW f16 or bf16 convolution; f32's, which
/// `Conv2d` does not launch, is a kernel of the library all the same),
/// launched as `Conv2d` launches it (a block per 32 × 32 tile of each
/// matrix), on batches of matrices around its tile (1 × 1, 31 × 33,
/// 32 × 32, 65 × 64, 3 × 100), each output element exactly its input's; the
/// output is NaN first, so an element no thread writes fails.
fn check_transposes<T: Transposable>(dev: &Device, rng: &mut StdRng) -> Result<KernelReport> {
    let mut report = KernelReport::default_for(<T as Transposable>::NAME);
    for (batches, rows, cols) in [
        (1, 1, 1),
        (2, 31, 33),
        (1, 32, 32),
        (3, 65, 64),
        (2, 3, 100),
    ] {
        let n = batches * rows * cols;
        report.lengths.push(n);
        let x: Vec<f64> = (0..n)
            .map(|_| T::from_f64(f64::from(rng.random_range(-1000i32..=1000))).to_f64())
            .collect();
        let xb = dev.upload(&x.iter().map(|&v| T::from_f64(v)).collect::<Vec<T>>())?;
        let mut yb = dev.upload(&vec![T::from_f64(f64::NAN); n])?;
        let tiles = |v: usize| v.div_ceil(TRANSPOSE_TILE) as u32;
        let cfg = LaunchConfig::new(
            Dim3::new(tiles(rows), tiles(cols), batches as u32),
            Dim3::x(TRANSPOSE_THREADS as u32),
        );
        report.record_launches(dev, || {
            let y = yb.batched_matrix_mut(cols, rows, rows, batches, rows * cols)?;
            T::launch(dev, cfg, &xb, y)
        })?;
        let got: Vec<f64> = yb.to_host()?.into_iter().map(T::to_f64).collect();
        // y[b][j][i] = x[b][i][j].
        let want: Vec<f64> = (0..n)
            .map(|e| {
                let (b, rest) = (e / (rows * cols), e % (rows * cols));
                let (j, i) = (rest / rows, rest % rows);
                x[b * rows * cols + i * cols + j]
            })
            .collect();
        let case = format!("{batches} batches of {rows} × {cols}");
        check_results::<T>(&mut report, &case, &got, &want, &want, 1, true, false);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn every_kernel_passes_with_a_report_each_covering_its_cases() {
        let dev = Device::emulator();
        let mut rng = StdRng::seed_from_u64(11);
        let reports = verify_conv2d(&dev, &mut rng, EDGE_LENGTHS).unwrap();
        let names: Vec<&str> = reports.iter().map(|r| r.kernel).collect();
        let hopper = warpforge::ptx::HOPPER.left_out.is_none();
        let mut expected = Vec::new();
        for layout in ["nchw", "nhwc"] {
            expected.push(format!("conv2d_{layout}_f32_64x64x16"));
            for dtype in ["f16", "bf16"] {
                if layout == "nhwc" {
                    expected.push(format!("conv2d_nhwc_{dtype}_64x64x32_s3"));
                    expected.push(format!("conv2d_nhwc_{dtype}_128x128x32_s4"));
                    // The emulator is an sm_90: the Hopper convolution runs
                    // the cases it can (NCHW between layout changes).
                    if hopper {
                        expected.push(format!("conv2d_wgmma_nhwc_{dtype}_128x128x64_s4"));
                    }
                } else {
                    expected.push(format!("conv2d_nchw_{dtype}_via_nhwc"));
                }
                expected.push(format!("conv2d_im2col_{layout}_{dtype}"));
            }
            for dtype in ["f32", "f16", "bf16"] {
                expected.push(format!("conv2d_depthwise_{layout}_{dtype}"));
                expected.push(format!("conv2d_direct_{layout}_{dtype}"));
                expected.push(format!("conv2d_1x1_{layout}_{dtype}"));
            }
        }
        for dtype in ["f32", "f16", "bf16"] {
            expected.push(format!("transpose_{dtype}"));
        }
        let mut sorted = names.clone();
        sorted.sort_unstable();
        let mut want: Vec<&str> = expected.iter().map(String::as_str).collect();
        want.sort_unstable();
        assert_eq!(sorted, want, "{names:?}");
        for r in &reports {
            assert!(r.passed(), "{}: {:?}", r.kernel, r.failure);
            assert!(r.worst_vs_tolerance <= 1.0, "{r:?}");
        }
        // NCHW f16 runs the NHWC kernel between two transposes; a transpose's
        // report launched it alone.
        let via = reports
            .iter()
            .find(|r| r.kernel == "conv2d_nchw_f16_via_nhwc")
            .unwrap();
        // With the Hopper module, the cases it can run take its kernel
        // between the same transposes.
        let mut via_kernels = vec!["conv2d_nhwc_f16_64x64x32_s3"];
        if hopper {
            via_kernels.push("conv2d_wgmma_nhwc_f16_128x128x64_s4");
        }
        via_kernels.push("transpose_f16");
        assert_eq!(via.launched, via_kernels, "{via:?}");
        let t = reports
            .iter()
            .find(|r| r.kernel == "transpose_f32")
            .unwrap();
        assert_eq!(t.launched, ["transpose_f32"]);
        // The tensor-core implicit GEMM sees the grouped, the 1×1 with a
        // bias and the 8-channel cases; the im2col route the dense and
        // dilated ones with 2–4 channels, the empty batch among them; the
        // tiled depthwise kernel the two depthwise NHWC ones (and the random
        // depthwise ones), the direct kernel the 5 × 5 depthwise one.
        let tensor_core = reports
            .iter()
            .find(|r| r.kernel == "conv2d_nhwc_bf16_64x64x32_s3")
            .unwrap();
        assert!(tensor_core.lengths.len() >= 3, "{tensor_core:?}");
        let im2col = reports
            .iter()
            .find(|r| r.kernel == "conv2d_im2col_nhwc_bf16")
            .unwrap();
        assert!(im2col.lengths.len() >= 5, "{im2col:?}");
        assert!(im2col.lengths.contains(&0), "{im2col:?}");
        // The 1×1 convolution after the im2col: the GEMM without a bias,
        // the implicit GEMM with one.
        assert!(im2col.launched.contains(&"im2col_nhwc_bf16"), "{im2col:?}");
        assert!(
            im2col.launched.contains(&"conv2d_nhwc_bf16_64x64x32_s3"),
            "{im2col:?}"
        );
        assert!(
            im2col.launched.iter().any(|k| k.starts_with("gemm_")),
            "{im2col:?}"
        );
        let direct = reports
            .iter()
            .find(|r| r.kernel == "conv2d_depthwise_nhwc_bf16")
            .unwrap();
        assert!(direct.lengths.len() >= 2, "{direct:?}");
        // Depthwise NHWC f32 runs the tiled depthwise kernel, the dense and
        // grouped f32 ones the implicit GEMM.
        let f32_direct = reports
            .iter()
            .find(|r| r.kernel == "conv2d_depthwise_nhwc_f32")
            .unwrap();
        assert!(f32_direct.lengths.len() >= 2, "{f32_direct:?}");
        // The fixed grouped case (2 groups of 2 channels) runs NHWC on the
        // implicit GEMMs, per group, not on the direct kernel.
        let grouped = cases(&mut StdRng::seed_from_u64(0), &[])
            .into_iter()
            .find(|c| c.groups == 2 && c.input[1] == 4)
            .unwrap()
            .macs();
        for (kernel, runs) in [
            ("conv2d_nhwc_f32_64x64x16", true),
            ("conv2d_nhwc_bf16_64x64x32_s3", true),
            ("conv2d_depthwise_nhwc_f32", false),
            ("conv2d_depthwise_nhwc_bf16", false),
            ("conv2d_direct_nhwc_f32", false),
            ("conv2d_direct_nhwc_bf16", false),
        ] {
            let r = reports.iter().find(|r| r.kernel == kernel).unwrap();
            assert_eq!(r.lengths.contains(&grouped), runs, "{r:?}");
        }
    }

    #[test]
    fn a_wrong_element_fails_exact_and_toleranced_cases() {
        // Exact case: the reference 5 (representable) against 5 and 6.
        let mut ok = KernelReport::default_for("k");
        check_results::<f32>(
            &mut ok,
            "c",
            &[5.0, -3.0],
            &[5.0, -3.0],
            &[9.0; 2],
            4,
            true,
            false,
        );
        assert!(ok.passed(), "{:?}", ok.failure);
        let mut bad = KernelReport::default_for("k");
        check_results::<f32>(
            &mut bad,
            "c",
            &[5.0, -2.0],
            &[5.0, -3.0],
            &[9.0; 2],
            4,
            true,
            false,
        );
        assert!(!bad.passed());
        // bf16 rounds 257 to 256 (ties to even): 257 itself is not a bf16.
        let mut r = KernelReport::default_for("k");
        check_results::<bf16>(&mut r, "c", &[256.0], &[257.0], &[257.0], 4, true, false);
        assert!(r.passed(), "{:?}", r.failure);
        // Random values: within the bound passes, a dropped product (0.5 off) fails,
        // and a NaN (an unwritten output) fails.
        let tol = tolerance(1.0, 2.0, 27, false, (f64::from(f32::EPSILON) / 2.0, 0.0));
        assert!(tol > 0.0 && tol < 1e-5, "{tol}");
        let mut r = KernelReport::default_for("k");
        check_results::<f32>(
            &mut r,
            "c",
            &[1.0 + tol / 2.0],
            &[1.0],
            &[2.0],
            27,
            false,
            false,
        );
        assert!(r.passed(), "{:?}", r.failure);
        for wrong in [1.5, f64::NAN] {
            let mut r = KernelReport::default_for("k");
            check_results::<f32>(&mut r, "c", &[wrong], &[1.0], &[2.0], 27, false, false);
            assert!(!r.passed(), "{wrong} accepted");
        }
        // A short output fails.
        let mut r = KernelReport::default_for("k");
        check_results::<f16>(
            &mut r,
            "c",
            &[1.0],
            &[1.0, 2.0],
            &[1.0, 2.0],
            1,
            true,
            false,
        );
        assert!(!r.passed());
    }

    #[test]
    fn random_geometries_are_valid_and_near_their_length() {
        let mut rng = StdRng::seed_from_u64(5);
        for len in [2048, 20_000, 200_000] {
            for _ in 0..50 {
                let spec = random_spec(&mut rng, len);
                for layout in [Layout::Nchw, Layout::Nhwc] {
                    spec.conv(layout).validate().unwrap();
                }
                assert!(spec.macs() > 0, "{spec:?}");
                assert!(
                    spec.macs() <= 100 * len.max(10_000),
                    "{spec:?}: {}",
                    spec.macs()
                );
            }
        }
    }
}
