//! Forward 2-D convolution (`warpforge::conv2d`): NCHW or NHWC, stride, zero
//! padding (per side), dilation, groups (dense, grouped, depthwise with any
//! channel multiplier), optional bias and fused ReLU; f32, f16 and bf16 with
//! f32 accumulation, the output in the input's type.
//!
//! **Sizes** are given logically whatever the layout: input `[N, C, H, W]`,
//! weights `[K, C/G, R, S]` (`G` groups). Storage orders:
//!
//! | layout | input `x` | weights `w` | output `y` |
//! |---|---|---|---|
//! | [`Layout::Nchw`] | `N, C, H, W` | `K, C/G, R, S` (PyTorch's) | `N, K, P, Q` |
//! | [`Layout::Nhwc`] | `N, H, W, C` | `K, R, S, C/G` | `N, P, Q, K` |
//!
//! with `P = ⌊(H + pad_top + pad_bottom − dil_h·(R − 1) − 1) / stride_h⌋ + 1`
//! and `Q` likewise; `bias` has `K` elements. Output `(n, k, p, q)` is
//! `Σ x[n, g·C/G + c, p·sh + r·dh − pad_top, q·sw + s·dw − pad_left] ·
//! w[k, c, r, s]` over `c < C/G`, `r < R`, `s < S` (`g = k / (K/G)`, input
//! outside the image is zero), `+ bias[k]`, then `max(·, 0)` when ReLU is on
//! (NaN stays NaN, as in torch).
//!
//! **Algorithm** ([`Conv2d::algorithm`]), by this rule, first match:
//!
//! 1. [`Algorithm::Depthwise`]: `G = C > 1` (any `K = C·multiplier`): the
//!    tiled depthwise kernels (`conv2d_depthwise_{nchw,nhwc}_{dtype}`: each
//!    block stages its output tile's input, halo included, in shared memory
//!    once). Filters of more than 9 taps, staging areas past 96 KiB
//!    and grids past 65535 blocks in y or z run the direct kernel
//!    (`conv2d_direct_{nchw,nhwc}_{dtype}`, one output element per thread).
//! 2. [`Algorithm::Gemm1x1`]: `R = S = 1`, stride 1, no padding, dilation 1,
//!    `G = 1`, no bias and no ReLU: [`crate::gemm::Gemm`] itself — NHWC
//!    `Y[NHW × K] = X[NHW × C]·Wᵀ`; NCHW the batch `Y[n] = W[K × C]·X[n]`
//!    (`stride_a = 0`). f16/bf16 run on the tensor cores there.
//! 3. [`Algorithm::Im2col`]: f16/bf16, `G = 1`, `R·S > 1` and `C % 8 ≠ 0`
//!    (a network's first layer, `C = 3`), where the tensor-core gather
//!    below would load element by element: the input's im2col matrix is
//!    materialised (`im2col_nhwc_{f16,bf16}`, `N·P·Q` rows of `R·S·C`
//!    columns rounded up to 32, the padding zero) with the weights padded
//!    to its width, in temporary buffers allocated per call (no memset:
//!    the kernel writes all of them), and the layer
//!    runs as a 1×1 convolution over it (rule 2 or 4). The `K` order and
//!    the zeros at its end are the gather's, so the sums are the same.
//! 4. [`Algorithm::ImplicitGemm`] otherwise (dense and grouped, `G < C`,
//!    both layouts): the input gathered on the fly (im2col, never
//!    materialised; `warpforge_kernels::conv`) into a GEMM main loop, one
//!    grid z per GEMM: NCHW per image and group (`N·G`, each group's output
//!    channels a stacked batch of rows of `[N·K × P·Q]`), NHWC per group
//!    (`G`, the group's input channels gathered, its weight rows as `B`,
//!    its output channels a side-by-side batch of columns of
//!    `[N·P·Q × K]`). f32 on the SIMT GEMM's main loop
//!    (`conv2d_{nchw,nhwc}_f32_64x64x16`); f16/bf16 on the tensor-core
//!    GEMM's, NHWC (`conv2d_nhwc_{f16,bf16}_64x64x32_s3`: `cp.async`
//!    gather chunks of 8 channels where `C/G % 8 == 0`, the pixel in the
//!    image and the address aligned; f32 accumulation, bias + ReLU in f32
//!    and one rounding), with a 128 × 128 tile
//!    (`conv2d_nhwc_{f16,bf16}_128x128x32_s4`) which [`Conv2d::large_tile`]
//!    picks for layers of at least 128 output channels per group and 128
//!    such blocks, and [`Conv2d::tile`] pins. **NCHW f16/bf16** runs the
//!    same NHWC kernels between layout changes, as cuDNN does: the input and
//!    weights are transposed to NHWC (`transpose_{f16,bf16}`) into temporary
//!    buffers, the NHWC convolution runs into a third, and its output is
//!    transposed back: three more memory-bound launches and temporaries the
//!    size of `x`, `w` and `y` (allocated per call; an allocation failure is
//!    `OutOfMemory` with nothing written).
//!
//! 5. [`Algorithm::Wgmma`] replaces rule 4 on a device of compute
//!    capability 9.0 with the Hopper module ([`Conv2d::algorithm_on`]):
//!    f16/bf16, one group, `C` and `K` multiples of 8, sizes within its
//!    32-bit arithmetic — `conv2d_wgmma_nhwc_{f16,bf16}_128x128x64_s4`, the
//!    Hopper GEMM's main loop and epilogue with a producer warpgroup that
//!    gathers the input (`cp.async`, zero-filled padding) and the weights by
//!    TMA; NCHW between the same layout changes. [`Conv2d::wgmma`] pins it
//!    on or off. There a plain 1×1 layer (rule 2) is the GEMM with its own
//!    choice of kernel, its wgmma one included, not the pinned small tile.
//!    [`Conv2d::algorithm`] and [`Conv2d::kernel_name`] answer without a
//!    device, as rules 1–4 do; [`Conv2d::run`] follows `algorithm_on`.
//!
//! How each kernel works (the depthwise staging, the gathering fill of the
//! tensor-core implicit GEMM, the transposes), with its SASS and emulator
//! figures: the repository's `docs/conv.md`.
//!
//! **Checked before anything runs** ([`Conv2d::validate`] and
//! [`Conv2d::run`]), each a clear [`Error`] naming the parameter: zero
//! stride, dilation, groups or filter size, groups not dividing `C` and `K`,
//! the weights' `C/G` not matching, a (dilated) filter larger than the
//! padded input, any size beyond the kernels' 32-bit geometry
//! ([`Error::InvalidParameter`]); sizes that overflow a `usize`
//! ([`Error::SizeOverflow`]); each buffer's length, naming the operand and
//! both lengths ([`Error::ShapeMismatch`]); every buffer on the device
//! ([`Error::DeviceMismatch`]); the grid within the device's limits
//! ([`Error::LaunchConfig`]). An empty output (`N = 0` or `K = 0`; `P` and
//! `Q` are at least 1 once the filter fits) is `Ok` with nothing launched.
//!
//! **Determinism**: every output is one f32 fused multiply-add chain in an
//! order fixed by the sizes (the tensor-core routes: the hardware's `mma`
//! order, also fixed), then the epilogue; the same bits on every run.
//!
//! ```
//! use warpforge::Device;
//! use warpforge::conv2d::{Algorithm, Conv2d, Layout, Padding};
//! let dev = Device::emulator();
//! // One 3×3 image, one 2×2 all-ones filter, padding 1 → a 4×4 output.
//! let conv = Conv2d::new(Layout::Nchw, [1, 1, 3, 3], [1, 1, 2, 2]).padding(Padding::uniform(1));
//! assert_eq!(conv.output_dims()?, [1, 1, 4, 4]);
//! assert_eq!(conv.algorithm::<f32>()?, Algorithm::ImplicitGemm);
//! let x = dev.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])?;
//! let w = dev.upload(&[1.0f32; 4])?;
//! let mut y = dev.alloc_zeroed::<f32>(16)?;
//! conv.run(&dev, &x, &w, None, &mut y)?;
//! let y = y.to_host()?;
//! assert_eq!(&y[..4], &[1.0, 3.0, 5.0, 3.0]);
//! assert_eq!(y[5], 12.0); // 1 + 2 + 4 + 5
//! # Ok::<(), warpforge::Error>(())
//! ```

use crate::gemm::{Gemm, GemmTypes, TileConfig};
use crate::ops::elementwise::grid_stride_config;
use crate::runtime::launch::grid_axis;
use crate::{Device, DeviceBuffer, Element, Error, LaunchConfig, Result};
use half::{bf16, f16};
use std::fmt;
use warpforge_device::Dim3;
use warpforge_device::kernel::Kernel;
use warpforge_device::swizzle::Sw128;
use warpforge_kernels::conv::{self as kc, Geometry};
use warpforge_kernels::gemm::F32_TILE;
use warpforge_kernels::transpose::{self as kt, TRANSPOSE_THREADS, TRANSPOSE_TILE};
use warpforge_kernels_hopper::conv as hc;

/// The weights' tensor map the Hopper convolution takes (dimension 0 the
/// channels, 1 the output channels, 2 the filter tap; 64 × 64 boxes,
/// 128B-swizzled).
#[doc(hidden)]
pub type WeightMap<'b, T> = crate::TensorMap<'b, T, 3, { hc::BOX }, { hc::BOX }, Sw128>;

const OP: &str = "conv2d";

/// How the tensors are stored (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `N, C, H, W`; weights `K, C/G, R, S`.
    Nchw,
    /// `N, H, W, C`; weights `K, R, S, C/G`.
    Nhwc,
}

/// Zero padding on each side of the input's rows (`top`, `bottom`) and
/// columns (`left`, `right`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Padding {
    /// Rows of zeros above the input.
    pub top: usize,
    /// Rows of zeros below it.
    pub bottom: usize,
    /// Columns of zeros left of it.
    pub left: usize,
    /// Columns of zeros right of it.
    pub right: usize,
}

impl Padding {
    /// `ph` rows above and below, `pw` columns left and right.
    pub fn symmetric(ph: usize, pw: usize) -> Padding {
        Padding {
            top: ph,
            bottom: ph,
            left: pw,
            right: pw,
        }
    }

    /// `p` on every side.
    pub fn uniform(p: usize) -> Padding {
        Padding::symmetric(p, p)
    }
}

/// Which algorithm [`Conv2d::run`] uses (the rule is in the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// Implicit GEMM: the GEMM main loop with the input gathered on the fly.
    ImplicitGemm,
    /// A 1×1, stride-1 convolution run as [`crate::gemm::Gemm`].
    Gemm1x1,
    /// A depthwise convolution (`G = C`): the tiled depthwise kernels, or
    /// the direct kernel where they do not apply (module docs).
    Depthwise,
    /// The input's im2col matrix materialised (`im2col_nhwc_{f16,bf16}`),
    /// then a 1×1 convolution over it: f16/bf16 layers with one group and
    /// `C % 8 ≠ 0`, such as a network's first (module docs).
    Im2col,
    /// Implicit GEMM on the Hopper main loop (`conv2d_wgmma_nhwc_*`: a
    /// producer warpgroup gathering the input, the TMA loading the
    /// weights, two `wgmma` consumer warpgroups): f16/bf16, one group,
    /// `C` and `K` multiples of 8, on a device of compute capability 9.0
    /// with the Hopper module ([`Conv2d::algorithm_on`]).
    Wgmma,
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Algorithm::ImplicitGemm => "implicit GEMM",
            Algorithm::Gemm1x1 => "1x1 as GEMM",
            Algorithm::Depthwise => "depthwise",
            Algorithm::Im2col => "im2col + 1x1",
            Algorithm::Wgmma => "implicit GEMM on wgmma",
        })
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// The convolution kernels of one element type, as `run` drives them.
#[doc(hidden)]
pub struct ConvKernels {
    /// The tiled depthwise kernels.
    depthwise_nchw: &'static str,
    depthwise_nhwc: &'static str,
    /// The direct kernels (the depthwise fallback).
    direct_nchw: &'static str,
    direct_nhwc: &'static str,
    /// The implicit-GEMM kernels; no NCHW one where NCHW runs the NHWC
    /// kernel between layout changes (f16, bf16: [`Conv2d::run`]).
    implicit_nchw: Option<&'static str>,
    implicit_nhwc: &'static str,
    /// The batched transpose (the NCHW route's layout changes).
    transpose: &'static str,
    /// The im2col kernel, where the type has one (f16, bf16).
    im2col: Option<&'static str>,
    /// The implicit GEMM's block tile `(BM, BN)` and threads per block.
    implicit_tile: (usize, usize, usize),
    /// The tensor-core implicit GEMM's large tile, if the type has one
    /// ([`Conv2d::large_tile`] picks it).
    implicit_nhwc_large: Option<LargeTile>,
    /// The Hopper implicit GEMM (NHWC), if the type has one: its name and
    /// shared memory a block.
    wgmma: Option<(&'static str, usize)>,
}

/// The tensor-core implicit GEMM's large tile of one element type (NHWC
/// kernels; NCHW runs them too): its kernel and
/// its launch shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LargeTile {
    /// The kernel's name (`conv2d_nhwc_{f16,bf16}_128x128x32_s4`).
    pub kernel: &'static str,
    /// Output pixels (`BM`) and output channels (`BN`) per block, threads per block.
    pub tile: (usize, usize, usize),
}

/// Element types of [`Conv2d::run`]: `f32`, `f16`, `bf16` (sealed).
pub trait ConvElement: Element + sealed::Sealed {
    #[doc(hidden)]
    const KERNELS: ConvKernels;
    /// The 1×1 route's GEMM kernel (`trans_b`: NHWC).
    #[doc(hidden)]
    fn gemm_name(trans_b: bool) -> &'static str;
    /// The kernel `gemm` (this type in and out) picks on `dev`.
    #[doc(hidden)]
    fn gemm_name_on(dev: &Device, gemm: Gemm<f32>) -> Result<&'static str>;
    /// Launches a direct kernel.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn launch_direct(
        dev: &Device,
        nhwc: bool,
        cfg: LaunchConfig,
        x: &DeviceBuffer<Self>,
        w: &DeviceBuffer<Self>,
        bias: &DeviceBuffer<Self>,
        y: &mut DeviceBuffer<Self>,
        g: [u64; 8],
    ) -> Result<()>;
    /// Launches a tiled depthwise kernel.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn launch_depthwise(
        dev: &Device,
        nhwc: bool,
        cfg: LaunchConfig,
        x: &DeviceBuffer<Self>,
        w: &DeviceBuffer<Self>,
        bias: &DeviceBuffer<Self>,
        y: crate::MatrixMut<'_, Self>,
        g: [u64; 8],
    ) -> Result<()>;
    /// Launches the batched transpose (`transpose_*`: the layout changes of
    /// the NCHW f16/bf16 route).
    #[doc(hidden)]
    fn launch_transpose(
        dev: &Device,
        cfg: LaunchConfig,
        x: &DeviceBuffer<Self>,
        y: crate::MatrixMut<'_, Self>,
    ) -> Result<()>;
    /// Launches the im2col kernel (`im2col_*`): `x`'s im2col matrix of
    /// `cols` columns into `y`. A type without one is `InvalidParameter`.
    #[doc(hidden)]
    fn launch_im2col(
        dev: &Device,
        cfg: LaunchConfig,
        x: &DeviceBuffer<Self>,
        y: &mut DeviceBuffer<Self>,
        cols: u64,
        g: [u64; 8],
    ) -> Result<()>;
    /// Launches an implicit-GEMM kernel (`large`: the NHWC large tile's).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn launch_implicit(
        dev: &Device,
        nhwc_large: (bool, bool),
        cfg: LaunchConfig,
        x: &DeviceBuffer<Self>,
        w: &DeviceBuffer<Self>,
        bias: &DeviceBuffer<Self>,
        y: crate::MatrixMut<'_, Self>,
        g: [u64; 8],
    ) -> Result<()>;
    /// Launches the Hopper implicit GEMM (`conv2d_wgmma_nhwc_*`). A type
    /// without one is `InvalidParameter`.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn launch_wgmma(
        dev: &Device,
        cfg: LaunchConfig,
        x: &DeviceBuffer<Self>,
        w: &WeightMap<'_, Self>,
        bias: &DeviceBuffer<Self>,
        y: crate::MatrixMut<'_, Self>,
        g: [u64; 8],
    ) -> Result<()>;
    /// `Y = op(A)·op(B)` by [`Gemm`] with this type in and out, on the
    /// small tile unless `free` (the GEMM's choice: its Hopper kernels
    /// pinned).
    #[doc(hidden)]
    fn run_gemm(
        dev: &Device,
        gemm: Gemm<f32>,
        free: bool,
        a: &DeviceBuffer<Self>,
        b: &DeviceBuffer<Self>,
        c: &mut DeviceBuffer<Self>,
    ) -> Result<()>;
}

macro_rules! depthwise_launch {
    ($nchw:ident, $nhwc:ident) => {
        fn launch_depthwise(
            dev: &Device,
            nhwc: bool,
            cfg: LaunchConfig,
            x: &DeviceBuffer<Self>,
            w: &DeviceBuffer<Self>,
            bias: &DeviceBuffer<Self>,
            y: crate::MatrixMut<'_, Self>,
            [a, b, c, d, e, f, g, h]: [u64; 8],
        ) -> Result<()> {
            let args = (x, w, bias, y, a, b, c, d, e, f, g, h);
            if nhwc {
                dev.launch(kc::$nhwc, cfg, args)
            } else {
                dev.launch(kc::$nchw, cfg, args)
            }
        }
    };
}

macro_rules! direct_launch {
    ($nchw:ident, $nhwc:ident) => {
        fn launch_direct(
            dev: &Device,
            nhwc: bool,
            cfg: LaunchConfig,
            x: &DeviceBuffer<Self>,
            w: &DeviceBuffer<Self>,
            bias: &DeviceBuffer<Self>,
            y: &mut DeviceBuffer<Self>,
            [a, b, c, d, e, f, g, h]: [u64; 8],
        ) -> Result<()> {
            let args = (x, w, bias, y, a, b, c, d, e, f, g, h);
            if nhwc {
                dev.launch(kc::$nhwc, cfg, args)
            } else {
                dev.launch(kc::$nchw, cfg, args)
            }
        }
    };
}

impl ConvElement for f32 {
    const KERNELS: ConvKernels = ConvKernels {
        depthwise_nchw: kc::conv2d_depthwise_nchw_f32::NAME,
        depthwise_nhwc: kc::conv2d_depthwise_nhwc_f32::NAME,
        direct_nchw: kc::conv2d_direct_nchw_f32::NAME,
        direct_nhwc: kc::conv2d_direct_nhwc_f32::NAME,
        implicit_nchw: Some(kc::conv2d_nchw_f32_64x64x16::NAME),
        implicit_nhwc: kc::conv2d_nhwc_f32_64x64x16::NAME,
        transpose: kt::transpose_f32::NAME,
        im2col: None,
        implicit_tile: (F32_TILE.m, F32_TILE.n, F32_TILE.threads()),
        implicit_nhwc_large: None,
        wgmma: None,
    };
    fn gemm_name(trans_b: bool) -> &'static str {
        <f32 as GemmTypes<f32>>::kernel_name(false, trans_b, Some(TileConfig::Small), false)
    }
    fn gemm_name_on(dev: &Device, gemm: Gemm<f32>) -> Result<&'static str> {
        gemm.tile(TileConfig::Small)
            .kernel_name_for::<f32, f32>(dev)
    }
    direct_launch!(conv2d_direct_nchw_f32, conv2d_direct_nhwc_f32);
    depthwise_launch!(conv2d_depthwise_nchw_f32, conv2d_depthwise_nhwc_f32);
    fn launch_transpose(
        dev: &Device,
        cfg: LaunchConfig,
        x: &DeviceBuffer<f32>,
        y: crate::MatrixMut<'_, f32>,
    ) -> Result<()> {
        dev.launch(kt::transpose_f32, cfg, (x, y))
    }
    fn launch_im2col(
        _: &Device,
        _: LaunchConfig,
        _: &DeviceBuffer<f32>,
        _: &mut DeviceBuffer<f32>,
        _: u64,
        _: [u64; 8],
    ) -> Result<()> {
        // `algorithm_for` never picks the route for f32 (no `im2col`).
        Err(invalid(
            "dtype",
            "f32 has no im2col kernel: its implicit GEMM gathers element by element".to_owned(),
        ))
    }
    fn launch_wgmma(
        _: &Device,
        _: LaunchConfig,
        _: &DeviceBuffer<f32>,
        _: &WeightMap<'_, f32>,
        _: &DeviceBuffer<f32>,
        _: crate::MatrixMut<'_, f32>,
        _: [u64; 8],
    ) -> Result<()> {
        // `algorithm_on` never picks the route for f32 (no `wgmma`).
        Err(invalid(
            "dtype",
            "f32 has no Hopper convolution: wgmma multiplies f16/bf16".to_owned(),
        ))
    }
    fn launch_implicit(
        dev: &Device,
        (nhwc, _): (bool, bool),
        cfg: LaunchConfig,
        x: &DeviceBuffer<f32>,
        w: &DeviceBuffer<f32>,
        bias: &DeviceBuffer<f32>,
        y: crate::MatrixMut<'_, f32>,
        [a, b, c, d, e, f, g, h]: [u64; 8],
    ) -> Result<()> {
        let args = (x, w, bias, y, a, b, c, d, e, f, g, h);
        if nhwc {
            dev.launch(kc::conv2d_nhwc_f32_64x64x16, cfg, args)
        } else {
            dev.launch(kc::conv2d_nchw_f32_64x64x16, cfg, args)
        }
    }
    fn run_gemm(
        dev: &Device,
        gemm: Gemm<f32>,
        _free: bool,
        a: &DeviceBuffer<f32>,
        b: &DeviceBuffer<f32>,
        c: &mut DeviceBuffer<f32>,
    ) -> Result<()> {
        // The small tile, pinned as for f16/bf16: the route's kernel name
        // (`gemm_name`) needs no device then. (f32 has no Hopper GEMM: a
        // wgmma pin is the GEMM's refusal.)
        gemm.tile(TileConfig::Small).run(dev, a, b, c)
    }
}

macro_rules! half_element {
    ($t:ty, $dw_nchw:ident, $dw_nhwc:ident, $nchw:ident, $nhwc:ident, $transpose:ident, $im2col:ident, $tc_nhwc:ident, $tc_nhwc_large:ident, $wgmma:ident) => {
        impl ConvElement for $t {
            const KERNELS: ConvKernels = ConvKernels {
                depthwise_nchw: kc::$dw_nchw::NAME,
                depthwise_nhwc: kc::$dw_nhwc::NAME,
                direct_nchw: kc::$nchw::NAME,
                direct_nhwc: kc::$nhwc::NAME,
                implicit_nchw: None,
                implicit_nhwc: kc::$tc_nhwc::NAME,
                transpose: kt::$transpose::NAME,
                im2col: Some(kc::$im2col::NAME),
                implicit_tile: (
                    kc::TC_CONV_TILE.m,
                    kc::TC_CONV_TILE.n,
                    kc::TC_CONV_TILE.threads(),
                ),
                implicit_nhwc_large: Some(LargeTile {
                    kernel: kc::$tc_nhwc_large::NAME,
                    tile: (
                        kc::TC_CONV_TILE_LARGE.m,
                        kc::TC_CONV_TILE_LARGE.n,
                        kc::TC_CONV_TILE_LARGE.threads(),
                    ),
                }),
                wgmma: Some((hc::$wgmma::NAME, hc::$wgmma::SHARED_BYTES)),
            };
            // The 1 × 1 GEMM path pins the small tile, so the name needs no
            // device (the tile heuristic counts its SMs).
            fn gemm_name(trans_b: bool) -> &'static str {
                <$t as GemmTypes<$t>>::kernel_name(false, trans_b, Some(TileConfig::Small), false)
            }
            fn gemm_name_on(dev: &Device, gemm: Gemm<f32>) -> Result<&'static str> {
                gemm.kernel_name_for::<$t, $t>(dev)
            }
            direct_launch!($nchw, $nhwc);
            depthwise_launch!($dw_nchw, $dw_nhwc);
            fn launch_transpose(
                dev: &Device,
                cfg: LaunchConfig,
                x: &DeviceBuffer<$t>,
                y: crate::MatrixMut<'_, $t>,
            ) -> Result<()> {
                dev.launch(kt::$transpose, cfg, (x, y))
            }
            fn launch_im2col(
                dev: &Device,
                cfg: LaunchConfig,
                x: &DeviceBuffer<$t>,
                y: &mut DeviceBuffer<$t>,
                cols: u64,
                [a, b, c, d, e, f, g, h]: [u64; 8],
            ) -> Result<()> {
                dev.launch(kc::$im2col, cfg, (x, y, cols, a, b, c, d, e, f, g, h))
            }
            // NHWC only: `run` takes NCHW through the layout changes.
            fn launch_implicit(
                dev: &Device,
                (_, large): (bool, bool),
                cfg: LaunchConfig,
                x: &DeviceBuffer<$t>,
                w: &DeviceBuffer<$t>,
                bias: &DeviceBuffer<$t>,
                y: crate::MatrixMut<'_, $t>,
                [a, b, c, d, e, f, g, h]: [u64; 8],
            ) -> Result<()> {
                let args = (x, w, bias, y, a, b, c, d, e, f, g, h);
                if large {
                    dev.launch(kc::$tc_nhwc_large, cfg, args)
                } else {
                    dev.launch(kc::$tc_nhwc, cfg, args)
                }
            }
            fn launch_wgmma(
                dev: &Device,
                cfg: LaunchConfig,
                x: &DeviceBuffer<$t>,
                w: &WeightMap<'_, $t>,
                bias: &DeviceBuffer<$t>,
                y: crate::MatrixMut<'_, $t>,
                [a, b, c, d, e, f, g, h]: [u64; 8],
            ) -> Result<()> {
                dev.launch(hc::$wgmma, cfg, (x, w, bias, y, a, b, c, d, e, f, g, h))
            }
            fn run_gemm(
                dev: &Device,
                gemm: Gemm<f32>,
                free: bool,
                a: &DeviceBuffer<$t>,
                b: &DeviceBuffer<$t>,
                c: &mut DeviceBuffer<$t>,
            ) -> Result<()> {
                if free {
                    gemm.run(dev, a, b, c)
                } else {
                    gemm.tile(TileConfig::Small).run(dev, a, b, c)
                }
            }
        }
    };
}

half_element!(
    f16,
    conv2d_depthwise_nchw_f16,
    conv2d_depthwise_nhwc_f16,
    conv2d_direct_nchw_f16,
    conv2d_direct_nhwc_f16,
    transpose_f16,
    im2col_nhwc_f16,
    conv2d_nhwc_f16_64x64x32_s3,
    conv2d_nhwc_f16_128x128x32_s4,
    conv2d_wgmma_nhwc_f16_128x128x64_s4
);
half_element!(
    bf16,
    conv2d_depthwise_nchw_bf16,
    conv2d_depthwise_nhwc_bf16,
    conv2d_direct_nchw_bf16,
    conv2d_direct_nhwc_bf16,
    transpose_bf16,
    im2col_nhwc_bf16,
    conv2d_nhwc_bf16_64x64x32_s3,
    conv2d_nhwc_bf16_128x128x32_s4,
    conv2d_wgmma_nhwc_bf16_128x128x64_s4
);

/// The convolution's parameters (module docs); the builder never fails,
/// [`validate`](Self::validate) and [`run`](Self::run) report errors.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Conv2d {
    layout: Layout,
    input: [usize; 4],
    weight: [usize; 4],
    stride: (usize, usize),
    padding: Padding,
    dilation: (usize, usize),
    groups: usize,
    relu: bool,
    /// The f16/bf16 implicit GEMM's tile, if pinned ([`Conv2d::tile`]).
    tile: Option<TileConfig>,
    /// The Hopper implicit GEMM pinned on or off ([`Conv2d::wgmma`]).
    wgmma: Option<bool>,
}

fn invalid(parameter: &'static str, detail: String) -> Error {
    Error::InvalidParameter {
        op: OP,
        parameter,
        detail,
    }
}

fn overflow(what: String) -> Error {
    Error::SizeOverflow {
        what: format!("{OP}: {what}"),
    }
}

/// `a·b·c·d`, checked.
fn product(dims: [usize; 4], what: &str) -> Result<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| overflow(format!("{what} {dims:?}")))
}

/// The largest size the kernels' 32-bit geometry carries.
const MAX_DIM: usize = u32::MAX as usize;

impl Conv2d {
    /// `input` = `[N, C, H, W]` and `weight` = `[K, C/groups, R, S]`, logical
    /// sizes whatever the layout; stride 1, no padding, dilation 1, one
    /// group, no ReLU.
    pub fn new(layout: Layout, input: [usize; 4], weight: [usize; 4]) -> Conv2d {
        Conv2d {
            layout,
            input,
            weight,
            stride: (1, 1),
            padding: Padding::default(),
            dilation: (1, 1),
            groups: 1,
            relu: false,
            tile: None,
            wgmma: None,
        }
    }

    /// Strides along rows and columns (default 1, 1).
    pub fn stride(mut self, sh: usize, sw: usize) -> Conv2d {
        self.stride = (sh, sw);
        self
    }

    /// Zero padding (default none).
    pub fn padding(mut self, p: Padding) -> Conv2d {
        self.padding = p;
        self
    }

    /// Dilations along rows and columns (default 1, 1).
    pub fn dilation(mut self, dh: usize, dw: usize) -> Conv2d {
        self.dilation = (dh, dw);
        self
    }

    /// Groups (default 1; `C` for depthwise).
    pub fn groups(mut self, g: usize) -> Conv2d {
        self.groups = g;
        self
    }

    /// ReLU after the bias (NaN kept).
    pub fn relu(mut self, on: bool) -> Conv2d {
        self.relu = on;
        self
    }

    /// Pins the f16/bf16 implicit GEMM's tile (NHWC, and NCHW, which runs
    /// the NHWC kernels): [`TileConfig::Small`] (64 × 64) or
    /// [`TileConfig::Large`] (128 × 128, 128 threads) instead of
    /// [`large_tile`](Self::large_tile)'s choice. Large is refused
    /// (`Error::InvalidParameter`, naming `tile`) where no large kernel runs:
    /// f32; [`TileConfig::Wide`] always (the GEMM's only). Other algorithms
    /// ignore it.
    pub fn tile(mut self, tile: TileConfig) -> Conv2d {
        self.tile = Some(tile);
        self
    }

    /// Pins the Hopper implicit GEMM ([`Algorithm::Wgmma`]) on (`true`:
    /// [`run`](Self::run) refuses, `InvalidParameter` naming `wgmma` and
    /// the reason, a layer or device it cannot run) or off (`false`: the
    /// `mma.sync` kernels on any device). Unpinned, it runs wherever it
    /// can ([`algorithm_on`](Self::algorithm_on)). A 1 × 1 layer that runs
    /// as a GEMM passes the pin to the GEMM ([`Gemm::wgmma`]).
    pub fn wgmma(mut self, pin: bool) -> Conv2d {
        self.wgmma = Some(pin);
        self
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The strides `(rows, columns)`.
    pub fn strides(&self) -> (usize, usize) {
        self.stride
    }

    /// The padding.
    pub fn pad(&self) -> Padding {
        self.padding
    }

    /// The dilations `(rows, columns)`.
    pub fn dilations(&self) -> (usize, usize) {
        self.dilation
    }

    /// The groups.
    pub fn group_count(&self) -> usize {
        self.groups
    }

    /// Whether ReLU is on.
    pub fn relu_enabled(&self) -> bool {
        self.relu
    }

    /// Every check [`run`](Self::run) makes that needs no buffers (module
    /// docs).
    pub fn validate(&self) -> Result<()> {
        self.geometry().map(|_| ())
    }

    /// The checked sizes, as the kernels take them.
    fn geometry(&self) -> Result<Geometry> {
        let [n, c, h, w] = self.input;
        let [k, cw, r, s] = self.weight;
        let (sh, sw) = self.stride;
        let (dh, dw) = self.dilation;
        let g = self.groups;
        let pad = self.padding;
        if sh == 0 || sw == 0 {
            return Err(invalid(
                "stride",
                format!("stride = ({sh}, {sw}); each stride must be at least 1"),
            ));
        }
        if dh == 0 || dw == 0 {
            return Err(invalid(
                "dilation",
                format!("dilation = ({dh}, {dw}); each dilation must be at least 1 (1 = none)"),
            ));
        }
        if g == 0 {
            return Err(invalid(
                "groups",
                "groups = 0; use at least 1 (1 = a dense convolution)".into(),
            ));
        }
        if !c.is_multiple_of(g) || !k.is_multiple_of(g) {
            return Err(invalid(
                "groups",
                format!(
                    "groups = {g} must divide both the input channels C = {c} and the output \
                     channels K = {k}"
                ),
            ));
        }
        if cw != c / g {
            return Err(invalid(
                "weight",
                format!(
                    "weight = {:?} has {cw} input channels per filter, but C / groups = {c} / \
                     {g} = {}; the weight must be [K, C/groups, R, S]",
                    self.weight,
                    c / g
                ),
            ));
        }
        if r == 0 || s == 0 {
            return Err(invalid(
                "weight",
                format!(
                    "weight = {:?}: the filter is {r} × {s}; R and S must be at least 1",
                    self.weight
                ),
            ));
        }
        // The dilated filter's extent and the padded input's, checked.
        let extent = |len: usize, d: usize, what: &str| {
            (len - 1)
                .checked_mul(d)
                .and_then(|e| e.checked_add(1))
                .ok_or_else(|| overflow(format!("the dilated filter {what}: ({len} − 1)·{d} + 1")))
        };
        let (er, es) = (extent(r, dh, "height")?, extent(s, dw, "width")?);
        let padded = |len: usize, a: usize, b: usize, what: &str| {
            len.checked_add(a)
                .and_then(|x| x.checked_add(b))
                .ok_or_else(|| overflow(format!("the padded input {what}: {len} + {a} + {b}")))
        };
        let ph = padded(h, pad.top, pad.bottom, "height")?;
        let pw = padded(w, pad.left, pad.right, "width")?;
        if er > ph || es > pw {
            return Err(invalid(
                "weight",
                format!(
                    "the filter {r} × {s} with dilation ({dh}, {dw}) spans {er} × {es}, larger \
                     than the padded input {ph} × {pw} (H = {h}, W = {w}, padding {pad:?}): \
                     pad more, or use a smaller filter or dilation"
                ),
            ));
        }
        let (p, q) = ((ph - er) / sh + 1, (pw - es) / sw + 1);
        // Everything the kernels' 32-bit geometry carries.
        let sizes = [
            ("input", h, "H"),
            ("input", w, "W"),
            ("weight", r, "R"),
            ("weight", s, "S"),
            ("stride", sh, "stride_h"),
            ("stride", sw, "stride_w"),
            ("padding", pad.top, "top"),
            ("padding", pad.left, "left"),
            ("dilation", dh, "dilation_h"),
            ("dilation", dw, "dilation_w"),
            ("weight", cw, "C/groups"),
            ("weight", k / g, "K/groups"),
            ("groups", g, "groups"),
        ];
        for (parameter, v, name) in sizes {
            if v > MAX_DIM {
                return Err(invalid(
                    parameter,
                    format!("{name} = {v} is larger than the kernels' limit {MAX_DIM}"),
                ));
            }
        }
        // Every buffer's element count fits a usize.
        product([n, c, h, w], "the input")?;
        product([k, cw, r, s], "the weight")?;
        product([n, k, p, q], "the output")?;
        Ok(Geometry {
            h,
            w,
            r,
            s,
            p,
            q,
            stride_h: sh,
            stride_w: sw,
            pad_top: pad.top,
            pad_left: pad.left,
            dil_h: dh,
            dil_w: dw,
            cg: cw,
            kg: k / g,
            groups: g,
            bias: false,
            relu: self.relu,
        })
    }

    /// The output's rows and columns `(P, Q)`.
    pub fn output_hw(&self) -> Result<(usize, usize)> {
        let g = self.geometry()?;
        Ok((g.p, g.q))
    }

    /// The input's dimensions in storage order: `[N, C, H, W]` or `[N, H, W, C]`.
    pub fn input_dims(&self) -> [usize; 4] {
        let [n, c, h, w] = self.input;
        match self.layout {
            Layout::Nchw => [n, c, h, w],
            Layout::Nhwc => [n, h, w, c],
        }
    }

    /// The weights' dimensions in storage order: `[K, C/G, R, S]` or `[K, R, S, C/G]`.
    pub fn weight_dims(&self) -> [usize; 4] {
        let [k, c, r, s] = self.weight;
        match self.layout {
            Layout::Nchw => [k, c, r, s],
            Layout::Nhwc => [k, r, s, c],
        }
    }

    /// The output's dimensions in storage order: `[N, K, P, Q]` or `[N, P, Q, K]`.
    pub fn output_dims(&self) -> Result<[usize; 4]> {
        let (p, q) = self.output_hw()?;
        let (n, k) = (self.input[0], self.weight[0]);
        Ok(match self.layout {
            Layout::Nchw => [n, k, p, q],
            Layout::Nhwc => [n, p, q, k],
        })
    }

    /// Floating-point operations: `2·N·P·Q·K·(C/G)·R·S`.
    pub fn flops(&self) -> Result<u64> {
        let (p, q) = self.output_hw()?;
        let [n, _, _, _] = self.input;
        let [k, cg, r, s] = self.weight;
        [2, n, p, q, k, cg, r, s]
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
            .ok_or_else(|| overflow("the flop count".into()))
    }

    /// The algorithm [`run`](Self::run) uses for element type `T` without a
    /// bias (module docs); [`algorithm_for`](Self::algorithm_for) with one.
    pub fn algorithm<T: ConvElement>(&self) -> Result<Algorithm> {
        self.algorithm_for::<T>(false)
    }

    /// The algorithm [`run`](Self::run) uses for `T`, with or without a bias
    /// (a bias rules out the 1×1 GEMM route, whose GEMM has no bias).
    pub fn algorithm_for<T: ConvElement>(&self, bias: bool) -> Result<Algorithm> {
        self.geometry()?;
        let [_, c, _, _] = self.input;
        let [_, _, r, s] = self.weight;
        let g = self.groups;
        if g > 1 && g == c {
            return Ok(Algorithm::Depthwise);
        }
        let p = self.padding;
        if r == 1
            && s == 1
            && self.stride == (1, 1)
            && p == Padding::default()
            && self.dilation == (1, 1)
            && g == 1
            && !bias
            && !self.relu
        {
            return Ok(Algorithm::Gemm1x1);
        }
        if T::KERNELS.im2col.is_some() && g == 1 && r * s > 1 && !c.is_multiple_of(8) {
            return Ok(Algorithm::Im2col);
        }
        Ok(Algorithm::ImplicitGemm)
    }

    /// The algorithm [`run`](Self::run) uses for `T` on `dev`, with or
    /// without a bias: [`algorithm_for`](Self::algorithm_for)'s, except
    /// that on a device of compute capability 9.0 with the Hopper module an
    /// implicit GEMM it can run is [`Algorithm::Wgmma`] (f16/bf16, one
    /// group, `C` and `K` multiples of 8, sizes within its 32-bit
    /// coordinates; NCHW between the usual layout changes), unless
    /// [`wgmma(false)`](Self::wgmma) pins it off. A pinned `wgmma(true)`
    /// that cannot run is `InvalidParameter` naming `wgmma` and why.
    pub fn algorithm_on<T: ConvElement>(&self, dev: &Device, bias: bool) -> Result<Algorithm> {
        let algorithm = self.algorithm_for::<T>(bias)?;
        let plan = match algorithm {
            Algorithm::ImplicitGemm => self.wgmma_blocks::<T>(dev),
            // A 1 × 1 GEMM takes the pin itself (`Gemm::wgmma`).
            Algorithm::Gemm1x1 => return Ok(algorithm),
            _ => Err(format!("the layer runs as {algorithm}")),
        };
        match (self.wgmma, plan) {
            (Some(false), _) => Ok(algorithm),
            (_, Ok(_)) => Ok(Algorithm::Wgmma),
            (Some(true), Err(why)) => Err(invalid(
                "wgmma",
                format!("the Hopper convolution cannot run this layer: {why}"),
            )),
            (None, Err(_)) => Ok(algorithm),
        }
    }

    /// The main kernel [`run`](Self::run) launches for `T` on `dev`, with or
    /// without a bias ([`algorithm_on`](Self::algorithm_on)).
    pub fn kernel_name_on<T: ConvElement>(&self, dev: &Device, bias: bool) -> Result<&'static str> {
        match self.algorithm_on::<T>(dev, bias)? {
            Algorithm::Wgmma => Ok(T::KERNELS.wgmma.map_or("", |(name, _)| name)),
            Algorithm::Gemm1x1 => match self.gemm_1x1::<T>(dev) {
                (gemm, true) => T::gemm_name_on(dev, gemm),
                (_, false) => self.kernel_name_for::<T>(bias),
            },
            _ => self.kernel_name_for::<T>(bias),
        }
    }

    /// The 1 × 1 route's GEMM on `dev` ([`Algorithm::Gemm1x1`]): NHWC `Y[NHW
    /// × K] = X[NHW × C]·Wᵀ` (W stored K × C), NCHW the batch `Y[n] = W[K ×
    /// C]·X[n]`; and whether the GEMM picks its kernel (`true`: on a device
    /// that runs the Hopper module, where its wgmma kernels may run, or
    /// with [`wgmma`](Self::wgmma) pinned on, which it takes) rather than
    /// the small `mma.sync` tile, whose name needs no device.
    fn gemm_1x1<T: ConvElement>(&self, dev: &Device) -> (Gemm<f32>, bool) {
        let [n, c, h, w] = self.input;
        let k = self.weight[0];
        let gemm = if self.layout == Layout::Nhwc {
            Gemm::<f32>::new(n * h * w, k, c).trans_b(true)
        } else {
            Gemm::<f32>::new(k, h * w, c).batch(n).stride_a(0)
        };
        let hopper = T::KERNELS.wgmma.is_some()
            && crate::ops::gemm::wgmma::hopper_unavailable(dev, 0).is_none();
        match self.wgmma {
            Some(on) => (gemm.wgmma(on), on),
            None => (gemm, hopper),
        }
    }

    /// The Hopper convolution's persistent grid (blocks) for this layer on
    /// `dev`, or why it cannot run it. Shape rules as the module docs'; the
    /// sizes within its 32-bit arithmetic: the input's 16-byte chunks below
    /// 2^32, the output's pixels `N·P·Q` within 2^31, the depth `R·S·C` and
    /// `K` within the TMA's 32-bit coordinates.
    fn wgmma_blocks<T: ConvElement>(&self, dev: &Device) -> Result<u32, String> {
        let Some((_, shared_bytes)) = T::KERNELS.wgmma else {
            return Err(format!(
                "{} has no Hopper convolution (f16/bf16 do)",
                T::DTYPE.name()
            ));
        };
        if let Some(why) = crate::ops::gemm::wgmma::hopper_unavailable(dev, shared_bytes) {
            return Err(why);
        }
        let geo = self.geometry().map_err(|e| e.to_string())?;
        let [n, c, h, w] = self.input;
        let k = self.weight[0];
        if self.groups != 1 {
            return Err(format!("{} groups (it runs one)", self.groups));
        }
        if !c.is_multiple_of(8) || !k.is_multiple_of(8) {
            return Err(format!(
                "C = {c} and K = {k} must be multiples of 8 (16-byte rows of the input, weights                  and output)"
            ));
        }
        let limit = 1usize << 31;
        let chunks = [n, h, w, c / 8]
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d));
        let pixels = n.checked_mul(geo.p).and_then(|x| x.checked_mul(geo.q));
        let depth = geo.r.checked_mul(geo.s).and_then(|x| x.checked_mul(c));
        let fits = chunks.is_some_and(|x| x < 1 << 32)
            && pixels.is_some_and(|x| x <= limit)
            && depth.is_some_and(|x| x < limit - 64)
            && k < limit - hc::BN;
        let (Some(pixels), true) = (pixels, fits) else {
            return Err(
                "the layer is beyond its 32-bit coordinates (input chunks below 2^32, N·P·Q                  within 2^31, R·S·C and K below 2^31)"
                    .to_owned(),
            );
        };
        let tiles = pixels.div_ceil(hc::BM) * k.div_ceil(hc::BN);
        let sms = crate::ops::gemm::multiprocessors(dev) as usize;
        Ok(tiles.min(sms).max(1) as u32)
    }

    /// The main kernel [`run`](Self::run) launches for `T` without a bias.
    pub fn kernel_name<T: ConvElement>(&self) -> Result<&'static str> {
        self.kernel_name_for::<T>(false)
    }

    /// The main kernel [`run`](Self::run) launches for `T`, with or without a bias.
    pub fn kernel_name_for<T: ConvElement>(&self, bias: bool) -> Result<&'static str> {
        let kernels = T::KERNELS;
        let nhwc = self.layout == Layout::Nhwc;
        Ok(match self.algorithm_for::<T>(bias)? {
            Algorithm::Depthwise => match (self.depthwise_plan::<T>()?.is_some(), nhwc) {
                (true, true) => kernels.depthwise_nhwc,
                (true, false) => kernels.depthwise_nchw,
                (false, true) => kernels.direct_nhwc,
                (false, false) => kernels.direct_nchw,
            },
            Algorithm::Gemm1x1 => T::gemm_name(nhwc),
            Algorithm::Im2col => self.im2col_conv()?.kernel_name_for::<T>(bias)?,
            // Only `algorithm_on` picks it (a device's choice).
            Algorithm::Wgmma => kernels
                .wgmma
                .map_or(kernels.implicit_nhwc, |(name, _)| name),
            Algorithm::ImplicitGemm => {
                match (
                    self.large_tile::<T>()?,
                    kernels.implicit_nchw.filter(|_| !nhwc),
                ) {
                    (Some(large), _) => large.kernel,
                    (None, Some(nchw)) => nchw,
                    // NHWC, or NCHW run as NHWC between layout changes.
                    (None, None) => kernels.implicit_nhwc,
                }
            }
        })
    }

    /// The tensor-core implicit GEMM's large tile (128 output pixels × 128
    /// output channels, 128 threads), its kernel and `(BM, BN, threads)`,
    /// where `T` has one (f16, bf16; in NCHW too, which runs the NHWC
    /// kernels) and the layer fills it: at least 128 output channels per
    /// group (the tile's columns), and a grid of at least 128 large blocks
    /// (about one per SM of the GPUs warpforge targets; fewer would leave
    /// SMs idle that the small tile's 4× as many blocks fill). `None`: the
    /// 64 × 64 tile. Shape-only, so the kernel's name needs no device; a
    /// tile pinned by [`tile`](Self::tile) overrides it.
    pub fn large_tile<T: ConvElement>(&self) -> Result<Option<LargeTile>> {
        let geo = self.geometry()?;
        if self.tile == Some(TileConfig::Wide) {
            return Err(invalid(
                "tile",
                "the implicit-GEMM convolutions have the Small and Large tiles; Wide \
                 (128 × 256) is the GEMM's only: pin TileConfig::Large or Small"
                    .to_owned(),
            ));
        }
        let Some(large) = T::KERNELS.implicit_nhwc_large else {
            return match self.tile {
                Some(TileConfig::Large) => Err(invalid(
                    "tile",
                    format!(
                        "the large tile runs f16/bf16 implicit GEMMs only, not {}: \
                         leave the tile to the heuristic or pin TileConfig::Small",
                        T::DTYPE.name()
                    ),
                )),
                _ => Ok(None),
            };
        };
        match self.tile {
            Some(TileConfig::Large) => return Ok(Some(large)),
            Some(TileConfig::Small) => return Ok(None),
            Some(TileConfig::Wide) | None => {}
        }
        let (bm, bn, _) = large.tile;
        let rows = self.input[0].saturating_mul(geo.p).saturating_mul(geo.q);
        let blocks = rows
            .div_ceil(bm)
            .saturating_mul(geo.kg / bn)
            .saturating_mul(self.groups);
        let fills = geo.kg >= bn && blocks >= 128;
        Ok(fills.then_some(large))
    }

    /// The tiled depthwise kernel's launch for `T`, or `None` where the
    /// direct kernel runs (`warpforge_kernels::conv::Geometry::dw_plan`:
    /// more than 9 taps, a staging area past 96 KiB, a grid past 65535
    /// blocks in y or z). For a depthwise convolution.
    fn depthwise_plan<T: ConvElement>(&self) -> Result<Option<kc::DwPlan>> {
        let g = self.geometry()?;
        Ok(g.dw_plan(
            self.layout == Layout::Nhwc,
            self.input[0],
            std::mem::size_of::<T>(),
        ))
    }

    /// `y = conv(x, w) (+ bias)`, ReLU if asked, on `dev`, after every check
    /// (module docs). `x`, `w` and `y` in the layout's storage order; `bias`
    /// has `K` elements. On the emulator it runs to completion; on a GPU it
    /// is queued.
    pub fn run<T: ConvElement>(
        &self,
        dev: &Device,
        x: &DeviceBuffer<T>,
        w: &DeviceBuffer<T>,
        bias: Option<&DeviceBuffer<T>>,
        y: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        let mut geo = self.geometry()?;
        dev.check_same(x.device())?;
        dev.check_same(w.device())?;
        dev.check_same(y.device())?;
        if let Some(b) = bias {
            dev.check_same(b.device())?;
        }
        let [n, c, _, _] = self.input;
        let k = self.weight[0];
        let (p, q) = (geo.p, geo.q);
        let lens = [
            (
                "x",
                "the input",
                product(self.input_dims(), "the input")?,
                x.len(),
            ),
            (
                "w",
                "the weight",
                product(self.weight_dims(), "the weight")?,
                w.len(),
            ),
            (
                "y",
                "the output",
                product(self.output_dims()?, "the output")?,
                y.len(),
            ),
        ];
        for (name, what, needed, len) in lens {
            if len != needed {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    detail: format!(
                        "{name} has {len} elements, but {what} {:?} needs {needed}",
                        match name {
                            "x" => self.input_dims(),
                            "w" => self.weight_dims(),
                            _ => self.output_dims()?,
                        }
                    ),
                });
            }
        }
        if let Some(b) = bias
            && b.len() != k
        {
            return Err(Error::ShapeMismatch {
                op: OP,
                detail: format!(
                    "bias has {} elements, but K = {k} output channels need {k}",
                    b.len()
                ),
            });
        }
        if n == 0 || k == 0 {
            return Ok(());
        }
        let nhwc = self.layout == Layout::Nhwc;
        let algorithm = self.algorithm_on::<T>(dev, bias.is_some())?;
        let kernel = self.kernel_name_for::<T>(bias.is_some())?;
        geo.bias = bias.is_some();
        // An unread stand-in when there is no bias (the kernels read it only
        // when the geometry's bias flag is set).
        let bias_buf = bias.unwrap_or(w);
        let packed = geo.pack();
        match algorithm {
            Algorithm::Gemm1x1 => {
                let (gemm, free) = self.gemm_1x1::<T>(dev);
                if nhwc {
                    T::run_gemm(dev, gemm, free, x, w, y)
                } else {
                    T::run_gemm(dev, gemm, free, w, x, y)
                }
            }
            Algorithm::Depthwise => match self.depthwise_plan::<T>()? {
                Some(plan) => {
                    let (gx, gy, gz) = plan.grid;
                    let cfg = LaunchConfig::new(Dim3::new(gx, gy, gz), Dim3::x(plan.threads))
                        .with_shared_bytes(plan.shared_bytes);
                    // NHWC: N stacked [P·Q × K] matrices; NCHW: N·K
                    // stacked [P × Q] planes (sizes fit: the output's
                    // element count does).
                    let y = if nhwc {
                        y.batched_matrix_mut(p * q, k, k, n, p * q * k)?
                    } else {
                        y.batched_matrix_mut(p, q, q, n * k, p * q)?
                    };
                    T::launch_depthwise(dev, nhwc, cfg, x, w, bias_buf, y, packed)
                }
                None => {
                    let cfg = grid_stride_config(y.len());
                    T::launch_direct(dev, nhwc, cfg, x, w, bias_buf, y, packed)
                }
            },
            Algorithm::ImplicitGemm | Algorithm::Im2col | Algorithm::Wgmma
                if !nhwc && T::KERNELS.implicit_nchw.is_none() =>
            {
                self.run_nchw_as_nhwc(dev, x, w, bias, y)
            }
            Algorithm::Im2col => self.run_im2col(dev, x, w, bias, y),
            Algorithm::Wgmma => {
                let blocks = self
                    .wgmma_blocks::<T>(dev)
                    .map_err(|why| invalid("wgmma", why))?;
                // The weights K × R·S·C as a tensor of taps: dimension 0
                // the channels, 1 the output channels (R·S·C apart), 2 the
                // tap (C apart), so a box is zero past C (sizes fit: the
                // weights' element count does).
                let taps = geo.r * geo.s;
                let map = WeightMap::new(w, [c, k, taps], &[taps * c, c])?;
                let cfg = LaunchConfig::new(Dim3::x(blocks), Dim3::x(hc::THREADS));
                let y = y.batched_matrix_mut(n * p * q, k, k, 1, n * p * q * k)?;
                T::launch_wgmma(dev, cfg, x, &map, bias_buf, y, packed)
            }
            Algorithm::ImplicitGemm => {
                let large = self.large_tile::<T>()?;
                let (bm, bn, threads) = large.map_or(T::KERNELS.implicit_tile, |l| l.tile);
                // One batch per grid z (sizes fit: the output's element
                // count does). NHWC: group g's output channels, columns
                // g·K/G .. of [N·P·Q × K], side by side. NCHW: image n's
                // group g, rows (n·G + g)·K/G .. of [N·K × P·Q], stacked.
                let (rows, cols, row_stride, batches, batch_stride) = if nhwc {
                    (n * p * q, geo.kg, k, self.groups, geo.kg)
                } else {
                    let batches = n
                        .checked_mul(self.groups)
                        .ok_or_else(|| overflow(format!("N·groups = {n}·{}", self.groups)))?;
                    (geo.kg, p * q, p * q, batches, geo.kg * p * q)
                };
                let cfg = grid(dev, kernel, bm, bn, threads, (rows, cols, batches))?;
                let y = y.batched_matrix_mut(rows, cols, row_stride, batches, batch_stride)?;
                T::launch_implicit(dev, (nhwc, large.is_some()), cfg, x, w, bias_buf, y, packed)
            }
        }
    }
}

impl Conv2d {
    /// The 1×1 convolution the im2col route runs ([`Algorithm::Im2col`]):
    /// NHWC over the `N × P × Q` image of `R·S·C` rounded up to 32
    /// channels ([`kc::im2col_cols`]), the weights `K × cols`, with this layer's ReLU and pinned
    /// tile (its bias is `run`'s).
    fn im2col_conv(&self) -> Result<Conv2d> {
        let [n, c, _, _] = self.input;
        let [k, _, r, s] = self.weight;
        let (p, q) = self.output_hw()?;
        let cols = r
            .checked_mul(s)
            .and_then(|rs| rs.checked_mul(c))
            .and_then(kc::im2col_cols)
            .ok_or_else(|| overflow(format!("R·S·C = {r}·{s}·{c} rounded up to 32")))?;
        let conv = Conv2d::new(Layout::Nhwc, [n, cols, p, q], [k, cols, 1, 1]).relu(self.relu);
        Ok(match self.tile {
            Some(tile) => conv.tile(tile),
            None => conv,
        })
    }

    /// The im2col route ([`Algorithm::Im2col`], NHWC; NCHW reaches it
    /// between layout changes): the input's im2col matrix and the weights
    /// padded to its columns, both by `im2col_*` into temporary buffers
    /// (the matrix is `N·P·Q × cols` elements, `cols = R·S·C` rounded up
    /// to 32; allocated without a memset, the kernel writes all of it),
    /// then the 1×1 convolution over them into `y`. Sizes are checked
    /// (`run`'s lengths; the matrix's by checked arithmetic, at most 2^32
    /// chunks of 8 elements).
    fn run_im2col<T: ConvElement>(
        &self,
        dev: &Device,
        x: &DeviceBuffer<T>,
        w: &DeviceBuffer<T>,
        bias: Option<&DeviceBuffer<T>>,
        y: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        let geo = self.geometry()?;
        let inner = self.im2col_conv()?;
        let [n, cols, p, q] = inner.input;
        let k = self.weight[0];
        let matrix = product([n, p, q, cols], "the im2col matrix")?;
        let taps = w.len() / k; // R·S·C: `run` checked w's length, K ≥ 1
        let cols64 = cols as u64;
        // The kernel indexes its 8-element chunks and the taps in 32 bits
        // and divides by sizes up to 2^31 (`warpforge_device::num::Divisor`): chunks, and so
        // rows and columns, and `R·S·C` within 2^31, or it writes nothing.
        let units = matrix / kc::IM2COL_CHUNK;
        if units > 1 << 31 || taps > 1 << 31 {
            return Err(invalid(
                "input",
                format!(
                    "the im2col matrix of N·P·Q = {} rows × {cols} columns (R·S·C = {taps}) \
                     has more than 2^31 chunks of 8 elements or taps: split the batch over \
                     several calls",
                    n * p * q
                ),
            ));
        }
        // No memset: the kernel writes every element (`cols` and so the
        // matrix are whole chunks).
        let mut x_cols = dev.alloc_for_kernel_output::<T>(matrix)?;
        T::launch_im2col(
            dev,
            grid_stride_config(units),
            x,
            &mut x_cols,
            cols64,
            geo.pack(),
        )?;
        // The weights: the im2col matrix of K 1×1 images of R·S·C channels.
        let one = Geometry {
            h: 1,
            w: 1,
            r: 1,
            s: 1,
            p: 1,
            q: 1,
            stride_h: 1,
            stride_w: 1,
            pad_top: 0,
            pad_left: 0,
            dil_h: 1,
            dil_w: 1,
            cg: taps,
            kg: k,
            groups: 1,
            bias: false,
            relu: false,
        };
        let mut w_cols = dev.alloc_for_kernel_output::<T>(k * cols)?;
        let units = k * cols / kc::IM2COL_CHUNK;
        T::launch_im2col(
            dev,
            grid_stride_config(units),
            w,
            &mut w_cols,
            cols64,
            one.pack(),
        )?;
        // The temporaries are freed in stream order, after the launches.
        inner.run(dev, &x_cols, &w_cols, bias, y)
    }

    /// An NCHW implicit GEMM for a type without an NCHW kernel (f16, bf16;
    /// module docs): the input `[N][C][H·W]` and the weights `[K][C/G][R·S]`
    /// transposed per image (per output channel) into temporary NHWC
    /// buffers, the NHWC convolution into a third, and its `[N][P·Q][K]`
    /// transposed back into `y`. Sizes are checked (`run`'s lengths).
    fn run_nchw_as_nhwc<T: ConvElement>(
        &self,
        dev: &Device,
        x: &DeviceBuffer<T>,
        w: &DeviceBuffer<T>,
        bias: Option<&DeviceBuffer<T>>,
        y: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        let [n, c, h, wd] = self.input;
        let [k, cg, r, s] = self.weight;
        let (p, q) = self.output_hw()?;
        let nhwc = Conv2d {
            layout: Layout::Nhwc,
            ..*self
        };
        // Products of sizes whose buffers `run` checked: no overflow.
        let mut x_nhwc = dev.alloc_zeroed::<T>(x.len())?;
        transpose(dev, x, (n, c, h * wd), &mut x_nhwc)?;
        let mut w_nhwc = dev.alloc_zeroed::<T>(w.len())?;
        transpose(dev, w, (k, cg, r * s), &mut w_nhwc)?;
        let mut y_nhwc = dev.alloc_zeroed::<T>(y.len())?;
        nhwc.run(dev, &x_nhwc, &w_nhwc, bias, &mut y_nhwc)?;
        // The temporaries are freed in stream order (after the launches
        // that use them), on a GPU as on the emulator.
        transpose(dev, &y_nhwc, (n, p * q, k), y)
    }
}

/// `y[b] = x[b]ᵀ` for the `batches` row-major `rows × cols` matrices packed
/// in `x` (`transpose_*`; `x` and `y` hold `batches·rows·cols` elements,
/// the caller's check): one block per 32 × 32 tile of each `cols × rows`
/// output, within the device's grid limits.
fn transpose<T: ConvElement>(
    dev: &Device,
    x: &DeviceBuffer<T>,
    (batches, rows, cols): (usize, usize, usize),
    y: &mut DeviceBuffer<T>,
) -> Result<()> {
    if batches == 0 || rows == 0 || cols == 0 {
        return Ok(());
    }
    let kernel = T::KERNELS.transpose;
    let limits = dev.limits().max_grid_dim;
    let axis = |what, v, limit| {
        let fix = "split the batch (or the image) over several calls, or use NHWC tensors";
        grid_axis(kernel, what, v, limit, fix)
    };
    let grid = Dim3::new(
        axis(
            "grid.x (32-row tiles of each matrix)",
            rows.div_ceil(TRANSPOSE_TILE),
            limits[0],
        )?,
        axis(
            "grid.y (32-column tiles of each matrix)",
            cols.div_ceil(TRANSPOSE_TILE),
            limits[1],
        )?,
        axis("grid.z (matrices)", batches, limits[2])?,
    );
    let cfg = LaunchConfig::new(grid, Dim3::x(TRANSPOSE_THREADS as u32));
    let y = y.batched_matrix_mut(cols, rows, rows, batches, rows * cols)?;
    T::launch_transpose(dev, cfg, x, y)
}

/// The implicit GEMM's launch: one block per `bm × bn` tile of each batch's
/// `rows × cols` output, `batches` along z, within the device's limits.
fn grid(
    dev: &Device,
    kernel: &'static str,
    bm: usize,
    bn: usize,
    threads: usize,
    (rows, cols, batches): (usize, usize, usize),
) -> Result<LaunchConfig> {
    let limits = dev.limits().max_grid_dim;
    let axis = |what, v, limit, fix| grid_axis(kernel, what, v, limit, fix);
    let x = axis(
        "grid.x (column tiles of the output matrix)",
        cols.div_ceil(bn),
        limits[0],
        "split the output channels (NHWC) or the image (NCHW) over several calls",
    )?;
    let y = axis(
        "grid.y (row tiles of the output matrix)",
        rows.div_ceil(bm),
        limits[1],
        "split the batch over several calls",
    )?;
    let z = axis(
        "grid.z (groups in NHWC, images × groups in NCHW)",
        batches,
        limits[2].min(65535),
        "split the batch (NCHW) or the groups (NHWC) over several calls",
    )?;
    Ok(LaunchConfig::new(
        Dim3::new(x, y, z),
        Dim3::x(threads as u32),
    ))
}
