//! `warpforge::conv2d` on the emulator (and, ignored without one, a GPU)
//! against the direct seven-loop f64 reference (`reference::conv2d`):
//! random N, C, H, W, K, R, S, stride, per-side padding, dilation, groups
//! (1, a divisor, depthwise with a channel multiplier), bias and ReLU on or
//! off, both layouts, every dtype; then named edge cases and every error.
//!
//! **Tolerance.** Inputs, weights and bias are integers in [-3, 3], so every
//! product is an integer of magnitude ≤ 9 and every partial sum of the
//! `(C/G)·R·S` products plus the bias is an integer of magnitude
//! ≤ 9·(C/G)·R·S + 3 — below 2²⁴ for every case here ((C/G)·R·S ≤ 6·5·5),
//! hence exact in the kernels' f32 accumulator whatever the order (the
//! tensor-core 1×1 route included). The output is then one rounding of the
//! exact value to the dtype, so the check is exact: `y == T::from(ref)`
//! (for f32 that is `ref` itself; for f16/bf16 the reference rounded once,
//! to nearest-even, by `half`). One dropped, duplicated or misplaced product
//! changes the integer, so it fails.

use half::{bf16, f16};
use proptest::prelude::*;
use warpforge::conv2d::{Algorithm, Conv2d, ConvElement, Layout, Padding};
use warpforge::gemm::TileConfig;
use warpforge::{Device, Error, reference};

trait Val: ConvElement {
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
}

impl Val for f32 {
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

impl Val for f16 {
    fn from_f64(x: f64) -> f16 {
        f16::from_f64(x)
    }
    fn to_f64(self) -> f64 {
        f16::to_f64(self)
    }
}

impl Val for bf16 {
    fn from_f64(x: f64) -> bf16 {
        bf16::from_f64(x)
    }
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
}

/// Small integers in [-3, 3] from a seed (xorshift).
fn ints(len: usize, seed: &mut u64) -> Vec<f64> {
    (0..len)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed % 7) as f64 - 3.0
        })
        .collect()
}

/// Runs `conv` on `dev` in `T` and compares with the reference exactly
/// (module docs). Returns the algorithm it ran (on `dev`: the emulator is
/// an sm_90, where the Hopper convolution runs the layers it can; tests of
/// the sm_80 kernels pin it off, `Conv2d::wgmma(false)`).
fn check<T: Val>(dev: &Device, conv: &Conv2d, bias: bool, seed: u64) -> Algorithm {
    let mut seed = seed | 1;
    let len = |d: [usize; 4]| d.iter().product::<usize>();
    let x = ints(len(conv.input_dims()), &mut seed);
    let w = ints(len(conv.weight_dims()), &mut seed);
    let k = conv.weight_dims()[0];
    let b = bias.then(|| ints(k, &mut seed));
    let want = reference::conv2d(conv, &x, &w, b.as_deref()).unwrap();
    let up = |v: &[f64]| {
        dev.upload(&v.iter().map(|&e| T::from_f64(e)).collect::<Vec<T>>())
            .unwrap()
    };
    let (xd, wd) = (up(&x), up(&w));
    let bd = b.as_deref().map(up);
    // NaN-filled output: every element must be written.
    let out_len = len(conv.output_dims().unwrap());
    let mut y = dev.upload(&vec![T::from_f64(f64::NAN); out_len]).unwrap();
    conv.run(dev, &xd, &wd, bd.as_ref(), &mut y)
        .unwrap_or_else(|e| panic!("{conv:?}: {e}"));
    let got = y.to_host().unwrap();
    for (i, (g, r)) in got.iter().zip(&want).enumerate() {
        let expect = T::from_f64(*r);
        assert!(
            g.to_f64() == expect.to_f64(),
            "{conv:?} bias {bias}: y[{i}] = {:?}, reference {r} (rounded {:?}); algorithm {}",
            g,
            expect,
            conv.algorithm_on::<T>(dev, bias).unwrap()
        );
    }
    conv.algorithm_on::<T>(dev, bias).unwrap()
}

#[derive(Clone, Debug)]
struct Case {
    layout: Layout,
    n: usize,
    c: usize,
    k: usize,
    groups: usize,
    h: usize,
    w: usize,
    r: usize,
    s: usize,
    stride: (usize, usize),
    pad: Padding,
    dil: (usize, usize),
    bias: bool,
    relu: bool,
    seed: u64,
}

impl Case {
    fn conv(&self) -> Conv2d {
        Conv2d::new(
            self.layout,
            [self.n, self.c, self.h, self.w],
            [self.k, self.c / self.groups, self.r, self.s],
        )
        .stride(self.stride.0, self.stride.1)
        .padding(self.pad)
        .dilation(self.dil.0, self.dil.1)
        .groups(self.groups)
        .relu(self.relu)
    }
}

fn cases() -> impl Strategy<Value = Case> {
    (
        (
            any::<bool>(),
            1usize..=2,
            0u8..3,
            1usize..=6,
            1usize..=5,
            1usize..=3,
        ),
        (
            1usize..=3,
            1usize..=3,
            1usize..=2,
            1usize..=2,
            1usize..=2,
            1usize..=2,
        ),
        (
            0usize..=2,
            0usize..=2,
            0usize..=2,
            0usize..=2,
            0usize..=4,
            0usize..=4,
        ),
        (any::<bool>(), any::<bool>(), any::<u64>()),
    )
        .prop_map(
            |(
                (nhwc, n, mode, cg, kg, g),
                (r, s, sh, sw, dh, dw),
                (top, bottom, left, right, eh, ew),
                (bias, relu, seed),
            )| {
                // Groups: 1, a divisor (g of C = cg·g), or depthwise (G = C,
                // K = C·multiplier, the multiplier kg).
                let (c, k, groups) = match mode {
                    0 => (cg, kg, 1),
                    1 => (cg * (g + 1), kg * (g + 1), g + 1),
                    _ => (cg, cg * kg.min(3), cg),
                };
                let pad = Padding {
                    top,
                    bottom,
                    left,
                    right,
                };
                // The input at least as large as the dilated filter once padded.
                let (er, es) = (dh * (r - 1) + 1, dw * (s - 1) + 1);
                let h = er.saturating_sub(top + bottom).max(1) + eh;
                let w = es.saturating_sub(left + right).max(1) + ew;
                Case {
                    layout: if nhwc { Layout::Nhwc } else { Layout::Nchw },
                    n,
                    c,
                    k,
                    groups,
                    h,
                    w,
                    r,
                    s,
                    stride: (sh, sw),
                    pad,
                    dil: (dh, dw),
                    bias,
                    relu,
                    seed,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn f32_matches_reference(case in cases()) {
        check::<f32>(&Device::emulator(), &case.conv(), case.bias, case.seed);
    }

    #[test]
    fn f16_matches_reference(case in cases()) {
        check::<f16>(&Device::emulator(), &case.conv(), case.bias, case.seed);
    }

    #[test]
    fn bf16_matches_reference(case in cases()) {
        check::<bf16>(&Device::emulator(), &case.conv(), case.bias, case.seed);
    }
}

#[test]
fn channels_not_multiples_of_8_and_odd_sizes() {
    let dev = Device::emulator();
    for layout in [Layout::Nchw, Layout::Nhwc] {
        let conv = Conv2d::new(layout, [2, 5, 9, 7], [7, 5, 3, 3])
            .stride(2, 1)
            .padding(Padding {
                top: 1,
                bottom: 0,
                left: 2,
                right: 1,
            });
        assert_eq!(conv.output_hw().unwrap(), (4, 8));
        assert_eq!(check::<f32>(&dev, &conv, true, 7), Algorithm::ImplicitGemm);
        check::<f16>(&dev, &conv, true, 8);
        check::<bf16>(&dev, &conv, false, 9);
    }
}

/// A tile's worth and more of output pixels and channels: the implicit
/// GEMM's ragged tile edges in both dimensions and several k-steps.
#[test]
fn implicit_gemm_across_tiles() {
    let dev = Device::emulator();
    for layout in [Layout::Nchw, Layout::Nhwc] {
        let conv = Conv2d::new(layout, [1, 6, 9, 9], [67, 6, 3, 3]).padding(Padding::uniform(1));
        assert_eq!(check::<f32>(&dev, &conv, true, 11), Algorithm::ImplicitGemm);
    }
}

/// Grouped NHWC (`1 < G < C`) on the implicit GEMMs, one grid z per group:
/// `C/G` and `K/G` not multiples of 8 (3 and 67: two column tiles, the last
/// ragged, so a group's tiles end inside the next group's columns' row) and
/// multiples (16 and 24, the tensor-core gather's `cp.async` chunks at a
/// group's channel offset), bias (the group's slice of it) and ReLU, on the
/// SIMT f32 and tensor-core f16/bf16 kernels; exact against the reference.
#[test]
fn grouped_nhwc_runs_per_group_on_the_implicit_gemm() {
    let dev = Device::emulator();
    for (c, k, groups) in [(6, 134, 2), (15, 21, 3), (48, 72, 3), (10, 25, 5)] {
        let conv = Conv2d::new(Layout::Nhwc, [2, c, 7, 9], [k, c / groups, 3, 2])
            .padding(Padding::uniform(1))
            .stride(1, 2)
            .groups(groups)
            .relu(true);
        assert_eq!(
            conv.kernel_name::<f32>().unwrap(),
            "conv2d_nhwc_f32_64x64x16"
        );
        assert_eq!(check::<f32>(&dev, &conv, true, 31), Algorithm::ImplicitGemm);
        assert_eq!(check::<f16>(&dev, &conv, true, 32), Algorithm::ImplicitGemm);
        assert_eq!(
            check::<bf16>(&dev, &conv, false, 33),
            Algorithm::ImplicitGemm
        );
    }
}

/// NHWC, 1–3 groups, f16/bf16: the tensor-core implicit GEMM (one grid z
/// per group), with the channel counts per group that take each gather
/// path (`C/G % 8 == 0`: `cp.async` chunks; otherwise element loads),
/// padding on every side, stride and dilation, and sizes that leave ragged
/// tiles in `N·P·Q`, `K/G` and `R·S·C/G` (several k-steps of 32).
fn tensor_core_cases() -> impl Strategy<Value = Case> {
    (
        (
            1usize..=2,
            prop::sample::select(vec![3usize, 8, 16, 13]),
            1usize..=3,
        ),
        (1usize..=70, 1usize..=3, 1usize..=3),
        (1usize..=2, 1usize..=2, 1usize..=2, 1usize..=2),
        (0usize..=2, 0usize..=2, 0usize..=2, 0usize..=2),
        (3usize..=9, 3usize..=9),
        (any::<bool>(), any::<bool>(), any::<u64>()),
    )
        .prop_map(
            |(
                (n, cg, groups),
                (kg, r, s),
                (sh, sw, dh, dw),
                (top, bottom, left, right),
                (eh, ew),
                (bias, relu, seed),
            )| {
                let (er, es) = (dh * (r - 1) + 1, dw * (s - 1) + 1);
                Case {
                    layout: Layout::Nhwc,
                    n,
                    c: cg * groups,
                    k: kg * groups,
                    groups,
                    h: er.saturating_sub(top + bottom).max(1) + eh,
                    w: es.saturating_sub(left + right).max(1) + ew,
                    r,
                    s,
                    stride: (sh, sw),
                    pad: Padding {
                        top,
                        bottom,
                        left,
                        right,
                    },
                    dil: (dh, dw),
                    bias,
                    relu,
                    seed,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn half_nhwc_tensor_core_matches_reference(case in tensor_core_cases()) {
        let dev = Device::emulator();
        // The sm_80 kernel (the emulator is an sm_90, where the Hopper
        // convolution would take most cases: `wgmma_convolution_is_exact`).
        let conv = case.conv().wgmma(false);
        // 1×1 unpadded stride-1 cases without bias/ReLU take the GEMM route.
        let tc = conv.algorithm_for::<f16>(case.bias).unwrap() == Algorithm::ImplicitGemm;
        let alg = check::<f16>(&dev, &conv, case.bias, case.seed);
        prop_assert!(!tc || alg == Algorithm::ImplicitGemm);
        check::<bf16>(&dev, &conv, case.bias, case.seed ^ 0x5a5a);
    }
}

/// The tensor-core NHWC kernel across tiles: `N·P·Q = 2·9·9 = 162` output
/// pixels (3 row tiles, the last ragged), `K = 67` (2 column tiles), and
/// `R·S·C = 3·3·16 = 144` (5 k-steps, the last ragged), `C % 8 == 0` so the
/// gather goes by `cp.async`; then 2 groups of `C/G = 12` and `K/G = 67`
/// (element loads: one group of 12 channels is the im2col route's).
#[test]
fn tensor_core_nhwc_across_tiles() {
    let dev = Device::emulator();
    for (c, k, groups) in [(16, 67, 1), (24, 134, 2)] {
        let conv = Conv2d::new(Layout::Nhwc, [2, c, 9, 9], [k, c / groups, 3, 3])
            .padding(Padding::uniform(1))
            .groups(groups)
            .relu(true);
        assert_eq!(check::<f16>(&dev, &conv, true, 21), Algorithm::ImplicitGemm);
        assert_eq!(
            check::<bf16>(&dev, &conv, false, 22),
            Algorithm::ImplicitGemm
        );
    }
}

/// The NHWC kernel's lean main loop (a block whose every k-step is one
/// filter tap's channels: `C/G` a multiple of 32, the input aligned, the
/// block's weights inside `K/G`), next to the guarded one: `K/G = 67` puts
/// the first column tile on the lean path and the ragged second on the
/// guarded one in the same launch; `K/G = 64` all lean. Padding on every
/// side (zero-filled chunks), 3 row tiles (the last ragged: rows past
/// `N·P·Q` zero-filled), strides, dilations and groups move the gathered
/// taps; ReLU and bias.
/// Both tiles: the 64 × 64 one and the 128 × 128 one (pinned; 8 warps,
/// 4 stages), on which `K/G = 67` and `64` are ragged column tiles and the
/// 162 output rows two row tiles; `K/G = 128` (grouped, 2 groups) fills its
/// columns.
#[test]
fn tensor_core_nhwc_lean_gather_across_tiles() {
    let dev = Device::emulator();
    for tile in [TileConfig::Small, TileConfig::Large] {
        for (c, k, groups) in [(64, 67, 1), (64, 256, 2), (32, 64, 1)] {
            let conv = Conv2d::new(Layout::Nhwc, [2, c, 9, 9], [k, c / groups, 3, 3])
                .padding(Padding::uniform(1))
                .groups(groups)
                .relu(true)
                .tile(tile)
                // The sm_80 kernels (the emulator is an sm_90).
                .wgmma(false);
            let want = if tile == TileConfig::Large {
                "conv2d_nhwc_f16_128x128x32_s4"
            } else {
                "conv2d_nhwc_f16_64x64x32_s3"
            };
            assert_eq!(conv.kernel_name::<f16>().unwrap(), want);
            assert_eq!(check::<f16>(&dev, &conv, true, 31), Algorithm::ImplicitGemm);
            let conv = conv.stride(2, 1).dilation(1, 2);
            assert_eq!(
                check::<bf16>(&dev, &conv, true, 32),
                Algorithm::ImplicitGemm
            );
        }
    }
}

/// The lean NHWC gather's tap walk over filter shapes: one tap, one row,
/// one column, `R ≠ S`, dilated, 32 taps (the most whose in-image bits fit
/// the gather's one word per chunk), each with padding on every side,
/// uneven (so a chunk's taps inside the image are a different
/// sub-rectangle at every edge), and strides; `K/G = 64`, so every block of
/// the small tile takes the lean path (the emulator's per-launch path count
/// says so) — and 7 × 7 (49 taps) every block the guarded one. Exact
/// against the reference on integer inputs: a tap's bit or chunk offset one
/// off reads a wrong pixel or a zero.
#[test]
fn tensor_core_nhwc_lean_gather_filter_shapes() {
    let dev = Device::emulator();
    let pad = Padding {
        top: 2,
        bottom: 1,
        left: 1,
        right: 3,
    };
    for (r, s, stride, dil, lean) in [
        (1, 1, (1, 1), (1, 1), true),
        (1, 3, (1, 2), (1, 1), true),
        (3, 1, (2, 1), (1, 1), true),
        (2, 5, (1, 1), (2, 1), true),
        (5, 3, (2, 2), (1, 2), true),
        (4, 8, (1, 1), (1, 1), true),
        (7, 7, (1, 1), (1, 1), false),
    ] {
        let conv = Conv2d::new(Layout::Nhwc, [2, 32, 9, 11], [64, 32, r, s])
            .padding(pad)
            .stride(stride.0, stride.1)
            .dilation(dil.0, dil.1)
            .tile(TileConfig::Small)
            // The sm_80 kernel (the emulator is an sm_90).
            .wgmma(false);
        // One block per 64 output pixels (`N·P·Q` rows; `K/G` one column tile).
        let pixels = conv.output_dims().unwrap().iter().product::<usize>() / 64;
        let (algorithm, profiles) = dev
            .profile_memory(|| Ok(check::<f16>(&dev, &conv, true, 41)))
            .unwrap();
        assert_eq!(algorithm, Algorithm::ImplicitGemm);
        let path = if lean { "lean" } else { "guarded" };
        assert_eq!(
            profiles[0].paths,
            vec![(path.to_owned(), pixels.div_ceil(64) as u64)],
            "{r} x {s}, stride {stride:?}, dilation {dil:?}: blocks per path"
        );
    }
}

/// The large NHWC tile: picked for layers of at least 128 output channels
/// per group whose grid has at least 128 large blocks (ResNet-50's res3
/// 3 × 3 layer at batch 32: 196), else the small tile (res2: 64 channels;
/// res4, res5: 98 and 52 large blocks, too few for 132 SMs), in NCHW too
/// (which runs the NHWC kernels); pinning it is refused where no large
/// kernel exists (f32), and pinning the GEMM's wide tile always, naming
/// `tile`.
#[test]
fn the_large_nhwc_tile_is_chosen_by_shape() {
    let layer = |c: usize, hw: usize, k: usize| {
        Conv2d::new(Layout::Nhwc, [32, c, hw, hw], [k, c, 3, 3]).padding(Padding::uniform(1))
    };
    let large = |conv: Conv2d| conv.large_tile::<f16>().unwrap().map(|l| l.kernel);
    assert_eq!(large(layer(64, 56, 64)), None); // res2: 64 output channels
    assert_eq!(
        large(layer(128, 28, 128)),
        Some("conv2d_nhwc_f16_128x128x32_s4")
    ); // res3: 196 blocks
    assert_eq!(large(layer(256, 14, 256)), None); // res4: 49 row tiles × 2 = 98 blocks
    assert_eq!(large(layer(512, 7, 512)), None); // res5: 13 row tiles × 4 = 52 blocks
    assert_eq!(
        large(layer(128, 56, 256)),
        Some("conv2d_nhwc_f16_128x128x32_s4")
    ); // 784 row tiles × 2
    assert_eq!(
        layer(128, 28, 128).kernel_name::<bf16>().unwrap(),
        "conv2d_nhwc_bf16_128x128x32_s4"
    );
    assert_eq!(
        layer(128, 28, 128)
            .tile(TileConfig::Small)
            .kernel_name::<f16>()
            .unwrap(),
        "conv2d_nhwc_f16_64x64x32_s3"
    );
    // NCHW runs the NHWC kernels, the large one included.
    let nchw = Conv2d::new(Layout::Nchw, [32, 128, 28, 28], [128, 128, 3, 3]);
    assert_eq!(
        nchw.padding(Padding::uniform(1))
            .kernel_name::<f16>()
            .unwrap(),
        "conv2d_nhwc_f16_128x128x32_s4"
    );
    assert_eq!(
        nchw.tile(TileConfig::Large).kernel_name::<bf16>().unwrap(),
        "conv2d_nhwc_bf16_128x128x32_s4"
    );
    // Large where no large kernel runs (f32), and Wide (the GEMM's only)
    // for every type: refused, naming the parameter.
    for err in [
        layer(128, 28, 128)
            .tile(TileConfig::Large)
            .kernel_name::<f32>()
            .unwrap_err(),
        layer(128, 28, 128)
            .tile(TileConfig::Wide)
            .kernel_name::<f16>()
            .unwrap_err(),
    ] {
        assert!(
            matches!(
                err,
                Error::InvalidParameter {
                    parameter: "tile",
                    ..
                }
            ),
            "{err}"
        );
    }
}

/// NCHW f16/bf16 runs the NHWC tensor-core kernels between layout changes:
/// four launches (the input and the weights to NHWC, the NHWC convolution,
/// its output back to NCHW), exact against the reference, with every
/// temporary freed afterwards; across tiles, dense and grouped (`K/G` of 67
/// and 66: 2 column tiles of the NHWC GEMM, ragged), with stride 2 and
/// dilation, and on the pinned large tile.
#[test]
fn nchw_tensor_core_runs_nhwc_between_layout_changes() {
    let dev = Device::emulator();
    for (c, k, groups) in [(16, 67, 1), (12, 132, 2)] {
        let conv = Conv2d::new(Layout::Nchw, [2, c, 9, 16], [k, c / groups, 3, 3])
            .padding(Padding::uniform(1))
            .groups(groups)
            .relu(true);
        let strided = conv.stride(2, 2).dilation(2, 1);
        let large = conv.tile(TileConfig::Large);
        let free = dev.memory_info().unwrap().0;
        for (conv, main, seed) in [
            (conv, "conv2d_nhwc_f16_64x64x32_s3", 23),
            (strided, "conv2d_nhwc_f16_64x64x32_s3", 24),
            (large, "conv2d_nhwc_f16_128x128x32_s4", 25),
        ] {
            assert_eq!(conv.kernel_name::<f16>().unwrap(), main);
            let (algorithm, profiles) = dev
                .profile_memory(|| Ok(check::<f16>(&dev, &conv, true, seed)))
                .unwrap();
            assert_eq!(algorithm, Algorithm::ImplicitGemm);
            let kernels: Vec<&str> = profiles.iter().map(|p| p.kernel.as_str()).collect();
            assert_eq!(
                kernels,
                ["transpose_f16", "transpose_f16", main, "transpose_f16"],
                "{conv:?}"
            );
        }
        assert_eq!(
            check::<bf16>(&dev, &conv.stride(2, 1), false, 26),
            Algorithm::ImplicitGemm
        );
        assert_eq!(dev.memory_info().unwrap().0, free, "temporaries left");
    }
}

/// f16/bf16 layers with one group and `C % 8 ≠ 0` (ResNet-50's first: 3
/// channels, 7 × 7, stride 2, padding 3) run the im2col route: the input's
/// im2col matrix (`R·S·C = 147` columns padded to 160) and the weights
/// padded to its width, then a 1 × 1 convolution over it — the GEMM without
/// bias and ReLU, the tensor-core implicit GEMM with them. Exact against
/// the reference on integer inputs, in both layouts (NCHW between layout
/// changes), with dilation and asymmetric padding, on the pinned large
/// tile, every temporary freed afterwards.
#[test]
fn few_channel_layers_run_im2col_then_a_1x1_convolution() {
    let dev = Device::emulator();
    let conv1 = Conv2d::new(Layout::Nhwc, [2, 3, 21, 18], [10, 3, 7, 7])
        .stride(2, 2)
        .padding(Padding::uniform(3));
    let odd = Conv2d::new(Layout::Nhwc, [1, 5, 9, 11], [67, 5, 3, 2])
        .stride(1, 2)
        .dilation(2, 1)
        .padding(Padding {
            top: 2,
            bottom: 0,
            left: 1,
            right: 3,
        });
    let free = dev.memory_info().unwrap().0;
    let im2col = "im2col_nhwc_f16";
    for (conv, bias, seed) in [
        (conv1, false, 61),
        (conv1.relu(true), true, 62),
        (odd, true, 63),
        (odd.tile(TileConfig::Large), false, 64),
        (odd.relu(true).tile(TileConfig::Large), true, 65),
    ] {
        assert_eq!(conv.algorithm_for::<f16>(bias).unwrap(), Algorithm::Im2col);
        let main = conv.kernel_name_for::<f16>(bias).unwrap();
        let fused = bias || conv.relu_enabled();
        let large = conv.relu_enabled() && conv.large_tile::<f16>().unwrap().is_some();
        match (fused, large) {
            (true, true) => assert_eq!(main, "conv2d_nhwc_f16_128x128x32_s4"),
            (true, false) => assert_eq!(main, "conv2d_nhwc_f16_64x64x32_s3"),
            (false, _) => assert!(main.starts_with("gemm_"), "{main}"),
        }
        let (algorithm, profiles) = dev
            .profile_memory(|| Ok(check::<f16>(&dev, &conv, bias, seed)))
            .unwrap();
        assert_eq!(algorithm, Algorithm::Im2col);
        let kernels: Vec<&str> = profiles.iter().map(|p| p.kernel.as_str()).collect();
        assert_eq!(kernels, [im2col, im2col, main], "{conv:?}");
    }
    assert_eq!(check::<bf16>(&dev, &conv1, true, 66), Algorithm::Im2col);
    // NCHW: the same route between layout changes.
    let nchw = Conv2d::new(Layout::Nchw, [2, 3, 21, 18], [10, 3, 7, 7])
        .stride(2, 2)
        .padding(Padding::uniform(3))
        .relu(true);
    let main = nchw.kernel_name::<f16>().unwrap();
    assert_eq!(main, "conv2d_nhwc_f16_64x64x32_s3");
    let (algorithm, profiles) = dev
        .profile_memory(|| Ok(check::<f16>(&dev, &nchw, false, 67)))
        .unwrap();
    assert_eq!(algorithm, Algorithm::Im2col);
    let kernels: Vec<&str> = profiles.iter().map(|p| p.kernel.as_str()).collect();
    let t = "transpose_f16";
    assert_eq!(kernels, [t, t, im2col, im2col, main, t]);
    assert_eq!(dev.memory_info().unwrap().0, free, "temporaries left");
}

/// The im2col kernel on its own, against the matrix built from its
/// definition (row `(n, p, q)`, column `(r·S + s)·C + c` the input element
/// that tap `(r, s)`, channel `c` reads, zero in the padding and past
/// `R·S·C`): every element written (a NaN-filled output); its stores whole
/// 16-byte vectors. Two layers: stride, dilation and asymmetric padding
/// (the element-wise gather); and no padding or dilation, so every pixel is
/// interior (the two-window path, its filter rows of `S·C = 9` elements
/// leaving chunks across two rows), the last pixel's windows reaching past
/// the input's end (the element-wise fallback there).
#[test]
fn im2col_kernel_writes_every_element_of_the_gathered_matrix() {
    use warpforge::{Dim3, LaunchConfig};
    use warpforge_kernels::conv::{Geometry, IM2COL_CHUNK, im2col_cols, im2col_nhwc_f16};
    let dev = Device::emulator();
    // (input N, H, W, C; filter R, S; stride; dilation; padding top, bottom, left, right)
    type Layer = (
        [usize; 4],
        (usize, usize),
        (usize, usize),
        (usize, usize),
        [usize; 4],
    );
    let layers: [Layer; 2] = [
        ([2, 7, 6, 3], (3, 2), (2, 1), (1, 2), [1, 2, 0, 1]),
        ([2, 9, 8, 3], (3, 3), (1, 1), (1, 1), [0, 0, 0, 0]),
    ];
    for ([n, h, w, c], (r, s), (sh, sw), (dh, dw), [top, bottom, left, right]) in layers {
        let conv = Conv2d::new(Layout::Nhwc, [n, c, h, w], [4, c, r, s])
            .stride(sh, sw)
            .dilation(dh, dw)
            .padding(Padding {
                top,
                bottom,
                left,
                right,
            });
        assert_eq!(conv.input_dims(), [n, h, w, c]);
        let (p, q) = conv.output_hw().unwrap();
        let cols = im2col_cols(r * s * c).unwrap();
        assert_eq!(cols, 32);
        // Distinct values, exact in f16.
        let x: Vec<f64> = (0..n * h * w * c).map(|i| i as f64 + 1.0).collect();
        let mut want = vec![0.0; n * p * q * cols];
        for (row, out) in want.chunks_mut(cols).enumerate() {
            let (img, pp, qq) = (row / (p * q), row / q % p, row % q);
            for rr in 0..r {
                for ss in 0..s {
                    let ih = (pp * sh + rr * dh) as isize - top as isize;
                    let iw = (qq * sw + ss * dw) as isize - left as isize;
                    if ih < 0 || ih >= h as isize || iw < 0 || iw >= w as isize {
                        continue;
                    }
                    for cc in 0..c {
                        let at = ((img * h + ih as usize) * w + iw as usize) * c + cc;
                        out[(rr * s + ss) * c + cc] = x[at];
                    }
                }
            }
        }
        let g = Geometry {
            h,
            w,
            r,
            s,
            p,
            q,
            stride_h: sh,
            stride_w: sw,
            pad_top: top,
            pad_left: left,
            dil_h: dh,
            dil_w: dw,
            cg: c,
            kg: 4,
            groups: 1,
            bias: false,
            relu: false,
        }
        .pack();
        let xd = dev
            .upload(&x.iter().map(|&v| f16::from_f64(v)).collect::<Vec<f16>>())
            .unwrap();
        let mut yd = dev.upload(&vec![f16::NAN; want.len()]).unwrap();
        let units = want.len() / IM2COL_CHUNK;
        let cfg = LaunchConfig::new(Dim3::x(3), Dim3::x(32));
        assert!(units > 3 * 32, "several chunks per thread");
        let (_, profiles) = dev
            .profile_memory(|| {
                let [a, b, c, d, e, f, g, h] = g;
                dev.launch(
                    im2col_nhwc_f16,
                    cfg,
                    (&xd, &mut yd, cols as u64, a, b, c, d, e, f, g, h),
                )
            })
            .unwrap();
        let got: Vec<f64> = yd.to_host().unwrap().into_iter().map(f64::from).collect();
        assert_eq!(got, want, "layer {n}x{h}x{w}x{c}, filter {r}x{s}");
        // One 16-byte store per chunk, a warp's 512 contiguous bytes: each
        // 32-byte sector of the matrix stored once.
        let stores = profiles[0].global_store;
        let (bytes, chunks) = ((want.len() * 2) as u64, units as u64);
        assert_eq!(stores.lane_accesses, chunks, "{stores:?}");
        assert_eq!(stores.requests_by_width[4], stores.requests, "{stores:?}");
        assert_eq!(stores.sectors, bytes / 32, "{stores:?}");
    }
}

/// The batched transpose kernel on its own: `y[b] = x[b]ᵀ` for ragged
/// sizes (several 32 × 32 tiles each way, partial ones at both edges) and
/// whole tiles, every output written exactly (a NaN-filled output,
/// distinct values), in f32 and f16; on whole tiles its staged column reads
/// are free of bank conflicts for 4- and 2-byte elements (rows of 33).
#[test]
fn transpose_kernel_moves_every_element_and_reads_columns_without_conflicts() {
    use warpforge::{DeviceBuffer, Dim3, LaunchConfig, MatrixMut, MemoryProfile};
    use warpforge_kernels::transpose::{
        TRANSPOSE_THREADS, TRANSPOSE_TILE, transpose_f16, transpose_f32,
    };
    type Launch<T> =
        fn(&Device, LaunchConfig, &DeviceBuffer<T>, MatrixMut<'_, T>) -> warpforge::Result<()>;
    fn run<T: Val + warpforge::Element>(
        dev: &Device,
        launch: Launch<T>,
        (batches, rows, cols): (usize, usize, usize),
        distinct: usize,
    ) -> MemoryProfile {
        let n = batches * rows * cols;
        let x: Vec<f64> = (0..n).map(|i| (i % distinct) as f64).collect();
        let mut want = vec![f64::NAN; n];
        for b in 0..batches {
            for i in 0..rows {
                for j in 0..cols {
                    want[(b * cols + j) * rows + i] = x[(b * rows + i) * cols + j];
                }
            }
        }
        let xd = dev
            .upload(&x.iter().map(|&v| T::from_f64(v)).collect::<Vec<T>>())
            .unwrap();
        let mut yd = dev.upload(&vec![T::from_f64(f64::NAN); n]).unwrap();
        let tiles = |v: usize| v.div_ceil(TRANSPOSE_TILE) as u32;
        let grid = Dim3::new(tiles(rows), tiles(cols), batches as u32);
        let cfg = LaunchConfig::new(grid, Dim3::x(TRANSPOSE_THREADS as u32));
        let (_, profiles) = dev
            .profile_memory(|| {
                let y = yd.batched_matrix_mut(cols, rows, rows, batches, rows * cols)?;
                launch(dev, cfg, &xd, y)
            })
            .unwrap();
        let got: Vec<f64> = yd.to_host().unwrap().into_iter().map(T::to_f64).collect();
        assert_eq!(got, want, "{batches} x {rows} x {cols}");
        profiles.into_iter().next().unwrap()
    }
    let dev = Device::emulator();
    for dims in [(3, 37, 70), (2, 64, 96)] {
        let f32_profile = run::<f32>(
            &dev,
            |dev, cfg, x, y| dev.launch(transpose_f32, cfg, (x, y)),
            dims,
            usize::MAX,
        );
        // Distinct within each 2048: exact in f16.
        let f16_profile = run::<f16>(
            &dev,
            |dev, cfg, x, y| dev.launch(transpose_f16, cfg, (x, y)),
            dims,
            2048,
        );
        if dims.1 % TRANSPOSE_TILE == 0 && dims.2 % TRANSPOSE_TILE == 0 {
            assert_eq!(f32_profile.bank_conflicts(), 0, "f32");
            assert_eq!(f16_profile.bank_conflicts(), 0, "f16");
        }
    }
}

/// A depthwise case: `[n, c, h, w]`, multiplier `m`, filter `r × s`,
/// strides, padding (top, bottom, left, right), dilations.
#[allow(clippy::too_many_arguments)]
fn depthwise(
    layout: Layout,
    [n, c, h, w]: [usize; 4],
    m: usize,
    (r, s): (usize, usize),
    stride: (usize, usize),
    (top, bottom, left, right): (usize, usize, usize, usize),
    dil: (usize, usize),
) -> Conv2d {
    Conv2d::new(layout, [n, c, h, w], [c * m, 1, r, s])
        .groups(c)
        .stride(stride.0, stride.1)
        .padding(Padding {
            top,
            bottom,
            left,
            right,
        })
        .dilation(dil.0, dil.1)
}

/// Runs `conv` in f32, f16 and bf16 (bias and ReLU varied) and checks that
/// each ran `kernel` with `{dtype}` filled in.
fn check_depthwise(dev: &Device, conv: &Conv2d, kernel: &str, seed: u64) {
    let relu = conv.relu(seed.is_multiple_of(2));
    assert_eq!(check::<f32>(dev, &relu, true, seed), Algorithm::Depthwise);
    assert_eq!(
        check::<f16>(dev, conv, seed.is_multiple_of(3), seed + 1),
        Algorithm::Depthwise
    );
    assert_eq!(
        check::<bf16>(dev, &relu, false, seed + 2),
        Algorithm::Depthwise
    );
    for (dtype, name) in [
        ("f32", conv.kernel_name::<f32>().unwrap()),
        ("f16", conv.kernel_name::<f16>().unwrap()),
        ("bf16", conv.kernel_name::<bf16>().unwrap()),
    ] {
        assert_eq!(name, kernel.replace("{dtype}", dtype), "{conv:?}");
    }
}

/// The tiled NHWC depthwise kernel across its tiles: several 1024-pixel
/// tiles whose boundaries fall inside an output row, several 32-channel
/// tiles, the halo at the image's borders (padding, never read) and between
/// tiles (re-read), strides, dilations, multipliers that split a 16-byte
/// vector, channel counts that are not a multiple of it (element loads),
/// images narrower than the 8 pixels of a step (a step spans several
/// output rows), and non-square filters.
#[test]
fn depthwise_nhwc_tiles_interior_and_edges() {
    let dev = Device::emulator();
    let nhwc = Layout::Nhwc;
    let tiled = "conv2d_depthwise_nhwc_{dtype}";
    let cases = [
        // Two pixel tiles (1600 pixels), two channel tiles (64), vectors.
        depthwise(
            nhwc,
            [1, 64, 40, 40],
            1,
            (3, 3),
            (1, 1),
            (1, 1, 1, 1),
            (1, 1),
        ),
        // Batch 2, stride 2, asymmetric padding, 48 channels (a ragged
        // channel tile, still whole vectors).
        depthwise(
            nhwc,
            [2, 48, 23, 30],
            1,
            (3, 3),
            (2, 2),
            (1, 0, 2, 1),
            (1, 1),
        ),
        // Odd channels: element loads.
        depthwise(
            nhwc,
            [2, 13, 17, 11],
            1,
            (3, 3),
            (1, 1),
            (1, 1, 1, 1),
            (1, 1),
        ),
        // Multipliers 2 and 3 (3: a tile's first input channel mid-vector).
        depthwise(
            nhwc,
            [1, 40, 9, 12],
            2,
            (3, 3),
            (1, 1),
            (1, 1, 1, 1),
            (1, 1),
        ),
        depthwise(
            nhwc,
            [1, 24, 8, 10],
            3,
            (3, 2),
            (1, 2),
            (0, 1, 1, 0),
            (1, 1),
        ),
        // Dilation 2 × 3, no padding; stride 3 × 1.
        depthwise(
            nhwc,
            [1, 16, 14, 15],
            1,
            (3, 3),
            (1, 1),
            (0, 0, 0, 0),
            (2, 3),
        ),
        depthwise(nhwc, [1, 8, 20, 9], 1, (2, 3), (3, 1), (2, 2, 0, 1), (1, 1)),
        // Narrow images: 1, 2 and 3 output columns (a step of 8 pixels
        // spans several rows), one of them taller than the tile.
        depthwise(
            nhwc,
            [1, 16, 1100, 1],
            1,
            (3, 1),
            (1, 1),
            (1, 1, 0, 0),
            (1, 1),
        ),
        depthwise(nhwc, [2, 8, 7, 2], 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
        depthwise(nhwc, [1, 9, 6, 3], 2, (1, 3), (2, 1), (0, 0, 1, 1), (1, 1)),
        // 1 × 1 and 9 × 1 filters.
        depthwise(nhwc, [1, 32, 5, 7], 1, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),
        depthwise(nhwc, [1, 8, 12, 5], 1, (9, 1), (1, 1), (4, 4, 0, 0), (1, 1)),
    ];
    for (i, conv) in cases.iter().enumerate() {
        check_depthwise(&dev, conv, tiled, 100 + 10 * i as u64);
    }
}

/// The NHWC kernel's register strips (7 pixels × one 16-byte channel
/// vector a thread) at their edges: image widths that are multiples of 7
/// (every strip in one row) and not (strips crossing row ends, run once
/// per row they touch), strides 1 and 2 with every padding, channel counts
/// that fill the vectors (vector loads and stores) and that do not (a
/// ragged last vector: element loads, element stores; 20 channels are whole
/// f32 vectors but not f16 ones), several channel tiles, batches, the
/// 1 × 3 and 3 × 1 and 2 × 2 filters the strip path also takes.
#[test]
fn depthwise_nhwc_strips_edges_strides_and_ragged_channels() {
    let dev = Device::emulator();
    let nhwc = Layout::Nhwc;
    let tiled = "conv2d_depthwise_nhwc_{dtype}";
    let cases = [
        // The layer, smaller: 56 wide (8 strips a row), 2 tiles of
        // f32 channels, batch 2.
        depthwise(
            nhwc,
            [2, 32, 9, 56],
            1,
            (3, 3),
            (1, 1),
            (1, 1, 1, 1),
            (1, 1),
        ),
        // 10 wide: most strips cross a row end; stride 1 and 2.
        depthwise(
            nhwc,
            [1, 16, 11, 10],
            1,
            (3, 3),
            (1, 1),
            (1, 1, 1, 1),
            (1, 1),
        ),
        depthwise(
            nhwc,
            [3, 16, 13, 19],
            1,
            (3, 3),
            (2, 2),
            (1, 1, 1, 1),
            (1, 1),
        ),
        // Stride 2 with padding only on one side, and none.
        depthwise(
            nhwc,
            [1, 24, 12, 23],
            1,
            (3, 3),
            (2, 2),
            (0, 1, 0, 1),
            (1, 1),
        ),
        depthwise(nhwc, [1, 8, 9, 30], 1, (3, 3), (2, 1), (0, 0, 0, 0), (1, 1)),
        // Ragged channels: 20 (whole f32 vectors, a ragged f16 one), 13, 3.
        depthwise(
            nhwc,
            [2, 20, 7, 15],
            1,
            (3, 3),
            (1, 1),
            (1, 1, 1, 1),
            (1, 1),
        ),
        depthwise(
            nhwc,
            [1, 13, 8, 17],
            1,
            (3, 3),
            (1, 2),
            (1, 1, 1, 1),
            (1, 1),
        ),
        depthwise(nhwc, [1, 3, 6, 9], 1, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
        // Smaller filters on the strip path.
        depthwise(
            nhwc,
            [1, 16, 7, 12],
            1,
            (1, 3),
            (1, 1),
            (0, 0, 1, 1),
            (1, 1),
        ),
        depthwise(
            nhwc,
            [1, 16, 7, 12],
            1,
            (3, 1),
            (1, 2),
            (1, 1, 0, 0),
            (1, 1),
        ),
        depthwise(
            nhwc,
            [1, 16, 8, 11],
            1,
            (2, 2),
            (2, 2),
            (1, 0, 1, 0),
            (1, 1),
        ),
        // Padding wider than the filter's reach on the right.
        depthwise(nhwc, [1, 8, 5, 6], 1, (3, 3), (1, 1), (2, 2, 2, 3), (1, 1)),
    ];
    for (i, conv) in cases.iter().enumerate() {
        check_depthwise(&dev, conv, tiled, 700 + 10 * i as u64);
    }
}

/// The NHWC depthwise kernels' memory traffic at the roofline's shape (56²,
/// 3 × 3, stride 1, 64 channels: two channel tiles in f16, four in f32, 3.5
/// pixel tiles): at most 1.1 bytes moved (whole 32-byte sectors, loads and
/// stores) per byte of least traffic (the input, the filters and the bias
/// read once, the output written once) — the halo rows a block re-reads,
/// the filters each block loads — on the emulator's profile.
#[test]
fn depthwise_nhwc_moves_at_most_1_1_bytes_per_least_byte_at_56x56() {
    fn ratio<T: Val>(dev: &Device, conv: &Conv2d) -> f64 {
        let (algorithm, profiles) = dev
            .profile_memory(|| Ok(check::<T>(dev, conv, true, 51)))
            .unwrap();
        assert_eq!(algorithm, Algorithm::Depthwise);
        let p = profiles
            .iter()
            .find(|p| p.kernel.starts_with("conv2d_depthwise_nhwc_"))
            .unwrap();
        let len = |d: [usize; 4]| d.iter().product::<usize>();
        let least = (len(conv.input_dims())
            + len(conv.weight_dims())
            + conv.weight_dims()[0]
            + len(conv.output_dims().unwrap()))
            * size_of::<T>();
        (p.global_load.bytes_moved() + p.global_store.bytes_moved()) as f64 / least as f64
    }
    let dev = Device::emulator();
    let conv = depthwise(
        Layout::Nhwc,
        [1, 64, 56, 56],
        1,
        (3, 3),
        (1, 1),
        (1, 1, 1, 1),
        (1, 1),
    );
    let (f16, f32) = (ratio::<f16>(&dev, &conv), ratio::<f32>(&dev, &conv));
    eprintln!("bytes moved per least byte at 56²: f16 {f16:.3}, f32 {f32:.3}");
    assert!(f16 <= 1.1 && f32 <= 1.1, "f16 {f16:.3}, f32 {f32:.3}");
}

/// The tiled NCHW depthwise kernel across its 64 × 64 tiles: interior
/// tiles with the halo on every side, ragged right and bottom tiles,
/// strides, dilations, multipliers, non-square filters.
#[test]
fn depthwise_nchw_tiles_interior_and_edges() {
    let dev = Device::emulator();
    let nchw = Layout::Nchw;
    let tiled = "conv2d_depthwise_nchw_{dtype}";
    let cases = [
        // 3 × 2 tiles of one plane, the middle ones with a halo all round.
        depthwise(
            nchw,
            [1, 2, 150, 100],
            1,
            (3, 3),
            (1, 1),
            (1, 1, 1, 1),
            (1, 1),
        ),
        // Stride 2, asymmetric padding, batch 2, multiplier 2.
        depthwise(
            nchw,
            [2, 3, 137, 140],
            2,
            (3, 3),
            (2, 2),
            (1, 0, 0, 1),
            (1, 1),
        ),
        // Dilation, multiplier 3, non-square filter, stride 1 × 3.
        depthwise(
            nchw,
            [1, 2, 71, 70],
            3,
            (2, 3),
            (1, 3),
            (2, 1, 1, 2),
            (3, 2),
        ),
        // Odd small sizes and a 1 × 9 filter.
        depthwise(nchw, [3, 5, 7, 3], 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
        depthwise(nchw, [1, 4, 3, 80], 1, (1, 9), (1, 1), (0, 0, 4, 4), (1, 1)),
    ];
    for (i, conv) in cases.iter().enumerate() {
        check_depthwise(&dev, conv, tiled, 300 + 10 * i as u64);
    }
}

/// The NCHW strips (4 f32 or 8 f16/bf16 output columns a thread): the
/// strip path at strides 1 and 2 (3-wide filters of 1 to 3 rows, dilation
/// along columns, padding on every side, wider than the 64-column tile),
/// planes whose width is not a multiple of the strip (element stores, the
/// last strip's columns past the plane discarded) or narrower than one,
/// the roofline's 56 × 56 plane, a thread's strips ending inside the tile
/// (planes of fewer than 64 rows), and the general path (other widths,
/// dilation along rows, stride 3).
#[test]
fn depthwise_nchw_strips_edges_strides_and_ragged_widths() {
    let dev = Device::emulator();
    let nchw = Layout::Nchw;
    let tiled = "conv2d_depthwise_nchw_{dtype}";
    let cases = [
        // The roofline's plane: stride 1, padding 1, two images, 3 channels.
        depthwise(
            nchw,
            [2, 3, 56, 56],
            1,
            (3, 3),
            (1, 1),
            (1, 1, 1, 1),
            (1, 1),
        ),
        // Stride 2 on the same plane, multiplier 2.
        depthwise(
            nchw,
            [1, 2, 56, 56],
            2,
            (3, 3),
            (2, 2),
            (1, 1, 1, 1),
            (1, 1),
        ),
        // Ragged widths (not a multiple of 4 or 8), both strides, no padding
        // on the left, more on the right.
        depthwise(
            nchw,
            [1, 2, 19, 30],
            1,
            (3, 3),
            (1, 1),
            (0, 2, 0, 3),
            (1, 1),
        ),
        depthwise(
            nchw,
            [2, 2, 21, 37],
            1,
            (3, 3),
            (2, 2),
            (2, 0, 1, 0),
            (1, 1),
        ),
        // Filters of 1 and 2 rows on the strip path, dilation along rows.
        depthwise(
            nchw,
            [1, 2, 13, 66],
            1,
            (1, 3),
            (1, 1),
            (0, 0, 1, 1),
            (1, 1),
        ),
        depthwise(
            nchw,
            [1, 2, 23, 44],
            2,
            (2, 3),
            (1, 2),
            (1, 1, 1, 1),
            (3, 1),
        ),
        // Planes narrower than a strip, wider than a tile by a ragged strip.
        depthwise(nchw, [2, 3, 9, 2], 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
        depthwise(
            nchw,
            [1, 2, 5, 131],
            1,
            (3, 3),
            (1, 2),
            (1, 1, 1, 1),
            (1, 1),
        ),
        // The general path: a 3 × 2 filter, dilation along columns, stride 3.
        depthwise(
            nchw,
            [1, 2, 17, 29],
            1,
            (3, 2),
            (1, 1),
            (1, 1, 1, 1),
            (1, 1),
        ),
        depthwise(
            nchw,
            [1, 2, 17, 29],
            1,
            (3, 3),
            (1, 1),
            (2, 2, 2, 2),
            (1, 2),
        ),
        depthwise(
            nchw,
            [1, 2, 26, 41],
            1,
            (3, 3),
            (3, 3),
            (1, 1, 1, 1),
            (1, 1),
        ),
    ];
    for (i, conv) in cases.iter().enumerate() {
        check_depthwise(&dev, conv, tiled, 900 + 10 * i as u64);
    }
}

/// The NCHW depthwise kernels' memory traffic at the roofline's shape (56²,
/// 3 × 3, stride 1, 8 channels): at most 1.1 bytes moved (whole 32-byte
/// sectors, loads and stores) per byte of least traffic, on the emulator's
/// profile. One block per plane: nothing is re-read but the sectors a
/// warp's run of the window shares with the next warp's.
#[test]
fn depthwise_nchw_moves_at_most_1_1_bytes_per_least_byte_at_56x56() {
    fn ratio<T: Val>(dev: &Device, conv: &Conv2d) -> f64 {
        let (algorithm, profiles) = dev
            .profile_memory(|| Ok(check::<T>(dev, conv, true, 52)))
            .unwrap();
        assert_eq!(algorithm, Algorithm::Depthwise);
        let p = profiles
            .iter()
            .find(|p| p.kernel.starts_with("conv2d_depthwise_nchw_"))
            .unwrap();
        let len = |d: [usize; 4]| d.iter().product::<usize>();
        let least = (len(conv.input_dims())
            + len(conv.weight_dims())
            + conv.weight_dims()[0]
            + len(conv.output_dims().unwrap()))
            * size_of::<T>();
        (p.global_load.bytes_moved() + p.global_store.bytes_moved()) as f64 / least as f64
    }
    let dev = Device::emulator();
    let conv = depthwise(
        Layout::Nchw,
        [1, 8, 56, 56],
        1,
        (3, 3),
        (1, 1),
        (1, 1, 1, 1),
        (1, 1),
    );
    let (f16, f32) = (ratio::<f16>(&dev, &conv), ratio::<f32>(&dev, &conv));
    eprintln!("NCHW bytes moved per least byte at 56²: f16 {f16:.3}, f32 {f32:.3}");
    assert!(f16 <= 1.1 && f32 <= 1.1, "f16 {f16:.3}, f32 {f32:.3}");
}

/// NCHW planes whose width is not a multiple of the 16-byte strip (4 f32,
/// 8 f16) are written through the block's stage, lined up on sectors: every
/// 32-byte sector of a block's tile is written by one store of the block —
/// the kernel's store sectors are exactly the sectors each block's tile
/// spans, summed over the blocks, where every tile is one run starting on
/// a sector (`72 × 30` planes: two blocks down each, all on sectors), and
/// within 1/8 of them otherwise (the emulator's rebuild of requests, below;
/// per-thread element stores of the strips wrote each sector once per
/// element of it, 16.4 bytes per 2-byte output). `70 × 30`: tiles starting
/// mid-sector; `5 × 102`: a 64- and a 38-column tile, each row its own run;
/// `5 × 13` at stride 2 with a multiplier.
#[test]
fn depthwise_nchw_ragged_widths_write_each_sector_once_per_block() {
    fn check_sectors<T: Val>(dev: &Device, conv: &Conv2d) {
        let (algorithm, profiles) = dev
            .profile_memory(|| Ok(check::<T>(dev, conv, true, 61)))
            .unwrap();
        assert_eq!(algorithm, Algorithm::Depthwise);
        let p = profiles
            .iter()
            .find(|p| p.kernel.starts_with("conv2d_depthwise_nchw_"))
            .unwrap();
        let [n, k, rows, cols] = conv.output_dims().unwrap();
        assert!(!cols.is_multiple_of(16 / size_of::<T>()), "{conv:?}");
        // Sectors of the elements `at .. at + len` (the buffer starts on a
        // sector: the emulator aligns allocations to 256 bytes).
        let spans = |at: usize, len: usize| {
            let (first, end) = (at * size_of::<T>(), (at + len) * size_of::<T>());
            ((end - 1) / 32 - first / 32 + 1) as u64
        };
        // Exact where every block's tile is one run starting on a sector.
        let (mut want, mut exact) = (0, true);
        for plane in 0..n * k {
            for r0 in (0..rows).step_by(64) {
                for c0 in (0..cols).step_by(64) {
                    let (tp, tq) = ((rows - r0).min(64), (cols - c0).min(64));
                    let at = |r: usize| plane * rows * cols + (r0 + r) * cols + c0;
                    exact &= tq == cols && (at(0) * size_of::<T>()).is_multiple_of(32);
                    want += if tq == cols {
                        spans(at(0), tp * tq)
                    } else {
                        (0..tp).map(|r| spans(at(r), tq)).sum()
                    };
                }
            }
        }
        let got = p.global_store.sectors;
        if exact {
            assert_eq!(got, want, "{conv:?} {}", p.kernel);
        } else {
            // The emulator rebuilds a request as the k-th store of each
            // lane at a call site: a lane that skips the slots before a
            // tile's first element (or between a row's runs) joins later
            // requests one store late, which touch a sector more. On a GPU
            // it is an inactive lane of the same request. Per-thread element
            // stores of the strips moved 4 (f32) to 8 (f16) times the least.
            assert!(
                got >= want && got <= want + want / 8,
                "{conv:?} {}: {got} sectors, {want} spanned",
                p.kernel
            );
        }
    }
    let dev = Device::emulator();
    let nchw = Layout::Nchw;
    for conv in [
        depthwise(
            nchw,
            [1, 3, 72, 30],
            1,
            (3, 3),
            (1, 1),
            (1, 1, 1, 1),
            (1, 1),
        ),
        depthwise(
            nchw,
            [1, 3, 70, 30],
            1,
            (3, 3),
            (1, 1),
            (1, 1, 1, 1),
            (1, 1),
        ),
        depthwise(
            nchw,
            [1, 2, 5, 102],
            1,
            (3, 3),
            (1, 1),
            (1, 1, 1, 1),
            (1, 1),
        ),
        depthwise(nchw, [1, 2, 9, 26], 2, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ] {
        check_sectors::<f32>(&dev, &conv);
        check_sectors::<f16>(&dev, &conv);
        check_sectors::<bf16>(&dev, &conv);
    }
}

/// Depthwise convolutions the tiled kernels do not take — more than 9
/// taps, an NHWC input row too wide for the staging ring — run the direct
/// kernel, with the same results.
#[test]
fn depthwise_fallbacks_run_the_direct_kernel() {
    let dev = Device::emulator();
    for layout in [Layout::Nchw, Layout::Nhwc] {
        let conv = depthwise(
            layout,
            [1, 6, 9, 8],
            2,
            (5, 5),
            (1, 1),
            (2, 2, 2, 2),
            (1, 1),
        );
        let direct = match layout {
            Layout::Nchw => "conv2d_direct_nchw_{dtype}",
            Layout::Nhwc => "conv2d_direct_nhwc_{dtype}",
        };
        check_depthwise(&dev, &conv, direct, 500);
    }
    // The NHWC ring holds 64 bytes a pixel whatever the type (4 vectors of
    // 16 bytes: 16 f32 or 32 f16 channels), at most 96 KiB: 3 ring rows ×
    // 522 pixels = 98 KiB is the direct kernel in every type, 3 × 402 = 75
    // KiB tiled.
    let wide = |w| {
        depthwise(
            Layout::Nhwc,
            [1, 8, 3, w],
            1,
            (3, 3),
            (1, 1),
            (1, 1, 1, 1),
            (1, 1),
        )
    };
    for (dtype, name) in [
        ("f32", wide(520).kernel_name::<f32>().unwrap()),
        ("bf16", wide(520).kernel_name::<bf16>().unwrap()),
    ] {
        assert_eq!(name, format!("conv2d_direct_nhwc_{dtype}"));
    }
    assert_eq!(
        wide(400).kernel_name::<f32>().unwrap(),
        "conv2d_depthwise_nhwc_f32"
    );
    assert_eq!(
        check::<f32>(&dev, &wide(520), true, 7),
        Algorithm::Depthwise
    );
    assert_eq!(
        check::<bf16>(&dev, &wide(400), true, 8),
        Algorithm::Depthwise
    );
}

#[test]
fn algorithm_rule() {
    let nchw = |c, k, g| Conv2d::new(Layout::Nchw, [1, c, 8, 8], [k, c / g, 3, 3]).groups(g);
    let nhwc = |c, k, g| Conv2d::new(Layout::Nhwc, [1, c, 8, 8], [k, c / g, 3, 3]).groups(g);
    assert_eq!(
        nchw(4, 8, 1).algorithm::<f32>().unwrap(),
        Algorithm::ImplicitGemm
    );
    assert_eq!(
        nchw(4, 8, 2).algorithm::<f32>().unwrap(),
        Algorithm::ImplicitGemm
    );
    assert_eq!(
        nhwc(4, 8, 1).algorithm::<f32>().unwrap(),
        Algorithm::ImplicitGemm
    );
    // Grouped NHWC: one implicit GEMM per group (its output channels a
    // side-by-side batch of columns).
    assert_eq!(
        nhwc(4, 8, 2).algorithm::<f32>().unwrap(),
        Algorithm::ImplicitGemm
    );
    assert_eq!(
        nhwc(4, 8, 2).kernel_name::<f32>().unwrap(),
        "conv2d_nhwc_f32_64x64x16"
    );
    assert_eq!(
        nchw(4, 8, 4).algorithm::<f32>().unwrap(),
        Algorithm::Depthwise
    );
    assert_eq!(
        nhwc(4, 4, 4).algorithm::<f16>().unwrap(),
        Algorithm::Depthwise
    );
    // f16/bf16 with one group and C % 8 ≠ 0: im2col, then a 1×1
    // convolution (the GEMM without bias and ReLU); with groups, or
    // channels in 16-byte chunks, the implicit GEMM.
    assert_eq!(nchw(4, 8, 1).algorithm::<f16>().unwrap(), Algorithm::Im2col);
    assert_eq!(
        nhwc(4, 8, 1).kernel_name::<f16>().unwrap(),
        Conv2d::new(Layout::Nhwc, [1, 8, 2, 2], [8, 8, 1, 1])
            .kernel_name::<f16>()
            .unwrap() // the 1×1 route's GEMM
    );
    assert_eq!(
        nhwc(4, 8, 1).relu(true).kernel_name::<f16>().unwrap(),
        "conv2d_nhwc_f16_64x64x32_s3"
    );
    assert_eq!(
        nhwc(4, 8, 1).algorithm::<f32>().unwrap(),
        Algorithm::ImplicitGemm
    );
    assert_eq!(
        Conv2d::new(Layout::Nhwc, [1, 5, 4, 4], [3, 5, 1, 1])
            .algorithm_for::<f16>(true)
            .unwrap(),
        Algorithm::ImplicitGemm // 1×1: nothing to gather
    );
    assert_eq!(
        nchw(4, 8, 2).kernel_name::<bf16>().unwrap(),
        "conv2d_nhwc_bf16_64x64x32_s3" // NCHW runs it between layout changes
    );
    assert_eq!(nhwc(4, 8, 1).algorithm::<f16>().unwrap(), Algorithm::Im2col);
    assert_eq!(
        nhwc(4, 8, 2).algorithm::<bf16>().unwrap(),
        Algorithm::ImplicitGemm
    );
    assert_eq!(
        nhwc(6, 9, 3).kernel_name::<f16>().unwrap(),
        "conv2d_nhwc_f16_64x64x32_s3"
    );
    assert_eq!(
        nhwc(8, 8, 1).kernel_name::<f16>().unwrap(),
        "conv2d_nhwc_f16_64x64x32_s3"
    );
    assert_eq!(
        nhwc(16, 8, 1).kernel_name::<bf16>().unwrap(),
        "conv2d_nhwc_bf16_64x64x32_s3"
    );
    let one = Conv2d::new(Layout::Nhwc, [2, 4, 3, 3], [5, 4, 1, 1]);
    assert_eq!(one.algorithm::<f32>().unwrap(), Algorithm::Gemm1x1);
    assert_eq!(one.algorithm::<bf16>().unwrap(), Algorithm::Gemm1x1);
    assert_eq!(
        one.algorithm_for::<f32>(true).unwrap(),
        Algorithm::ImplicitGemm
    );
    assert_eq!(
        one.relu(true).algorithm::<f32>().unwrap(),
        Algorithm::ImplicitGemm
    );
    assert_eq!(
        one.stride(2, 1).algorithm::<f32>().unwrap(),
        Algorithm::ImplicitGemm
    );
    assert_eq!(
        one.kernel_name::<f32>().unwrap(),
        warpforge::gemm::Gemm::<f32>::new(1, 1, 1)
            .trans_b(true)
            .kernel_name()
    );
    assert_eq!(
        nhwc(4, 8, 1).kernel_name::<f32>().unwrap(),
        "conv2d_nhwc_f32_64x64x16"
    );
    assert_eq!(
        nchw(4, 4, 4).kernel_name::<bf16>().unwrap(),
        "conv2d_depthwise_nchw_bf16"
    );
    assert_eq!(format!("{}", Algorithm::ImplicitGemm), "implicit GEMM");
    assert_eq!(format!("{}", Algorithm::Im2col), "im2col + 1x1");
}

#[test]
fn one_by_one_route_matches_reference() {
    let dev = Device::emulator();
    for layout in [Layout::Nchw, Layout::Nhwc] {
        let conv = Conv2d::new(layout, [3, 5, 3, 5], [6, 5, 1, 1]);
        assert_eq!(check::<f32>(&dev, &conv, false, 3), Algorithm::Gemm1x1);
        assert_eq!(check::<f16>(&dev, &conv, false, 4), Algorithm::Gemm1x1);
        assert_eq!(check::<bf16>(&dev, &conv, false, 5), Algorithm::Gemm1x1);
        // With a bias the route changes, the result does not.
        check::<f32>(&dev, &conv, true, 6);
    }
}

#[test]
fn relu_keeps_nan() {
    let dev = Device::emulator();
    for layout in [Layout::Nchw, Layout::Nhwc] {
        let conv = Conv2d::new(layout, [1, 1, 1, 2], [1, 1, 1, 1]).relu(true);
        let x = dev.upload(&[f32::NAN, -2.0]).unwrap();
        let w = dev.upload(&[1.0f32]).unwrap();
        let b = dev.upload(&[0.5f32]).unwrap();
        let mut y = dev.alloc_zeroed::<f32>(2).unwrap();
        conv.run(&dev, &x, &w, Some(&b), &mut y).unwrap();
        let y = y.to_host().unwrap();
        assert!(y[0].is_nan(), "{y:?}");
        assert_eq!(y[1], 0.0);
    }
}

#[test]
fn empty_batch_writes_nothing() {
    let dev = Device::emulator();
    for layout in [Layout::Nchw, Layout::Nhwc] {
        let conv = Conv2d::new(layout, [0, 3, 5, 5], [4, 3, 3, 3]);
        assert_eq!(conv.output_dims().unwrap().iter().product::<usize>(), 0);
        let x = dev.alloc_zeroed::<f32>(0).unwrap();
        let w = dev.upload(&[1.0f32; 4 * 27]).unwrap();
        let mut y = dev.alloc_zeroed::<f32>(0).unwrap();
        conv.run(&dev, &x, &w, None, &mut y).unwrap();
        assert_eq!(conv.flops().unwrap(), 0);
        // K = 0: also empty, with a sentinel-filled output of length 0.
        let conv = Conv2d::new(layout, [1, 3, 5, 5], [0, 3, 3, 3]);
        let x = dev.upload(&[1.0f32; 75]).unwrap();
        let w = dev.alloc_zeroed::<f32>(0).unwrap();
        conv.run(&dev, &x, &w, None, &mut y).unwrap();
    }
}

fn invalid_parameter(result: warpforge::Result<()>) -> &'static str {
    match result {
        Err(Error::InvalidParameter { op, parameter, .. }) => {
            assert_eq!(op, "conv2d");
            parameter
        }
        other => panic!("expected InvalidParameter, got {other:?}"),
    }
}

#[test]
fn invalid_parameters_name_the_parameter() {
    let base = Conv2d::new(Layout::Nchw, [1, 4, 5, 5], [8, 4, 3, 3]);
    assert_eq!(invalid_parameter(base.stride(0, 1).validate()), "stride");
    assert_eq!(
        invalid_parameter(base.dilation(1, 0).validate()),
        "dilation"
    );
    assert_eq!(invalid_parameter(base.groups(0).validate()), "groups");
    assert_eq!(invalid_parameter(base.groups(3).validate()), "groups");
    // Groups 2 divide C and K, but the weight still says C/g = 4.
    assert_eq!(invalid_parameter(base.groups(2).validate()), "weight");
    // A 3×3 filter with dilation 3 spans 7 > 5; padding 1 makes 7: it fits.
    let big = base.dilation(3, 1);
    assert_eq!(invalid_parameter(big.validate()), "weight");
    assert!(big.padding(Padding::symmetric(1, 0)).validate().is_ok());
    let err = big.validate().unwrap_err().to_string();
    assert!(err.contains("larger than the padded input"), "{err}");
    // run refuses it too, before looking at the buffers.
    let dev = Device::emulator();
    let x = dev.alloc_zeroed::<f32>(1).unwrap();
    let mut y = dev.alloc_zeroed::<f32>(1).unwrap();
    assert_eq!(
        invalid_parameter(big.run(&dev, &x, &x, None, &mut y)),
        "weight"
    );
    assert!(matches!(
        Conv2d::new(Layout::Nhwc, [usize::MAX, 4, 5, 5], [8, 4, 3, 3]).validate(),
        Err(Error::SizeOverflow { .. })
    ));
}

#[test]
fn wrong_buffer_lengths_name_the_operand() {
    let dev = Device::emulator();
    let conv = Conv2d::new(Layout::Nhwc, [1, 2, 4, 4], [3, 2, 3, 3]);
    let buf = |len| dev.alloc_zeroed::<f32>(len).unwrap();
    let (x, w, b, mut y) = (buf(32), buf(54), buf(3), buf(12));
    assert!(conv.run(&dev, &x, &w, Some(&b), &mut y).is_ok());
    let mismatch = |r: warpforge::Result<()>, operand: &str, lens: [&str; 2]| match r {
        Err(Error::ShapeMismatch { op, detail }) => {
            assert_eq!(op, "conv2d");
            assert!(detail.starts_with(operand), "{detail}");
            for l in lens {
                assert!(detail.contains(l), "{detail}");
            }
        }
        other => panic!("expected ShapeMismatch for {operand}, got {other:?}"),
    };
    mismatch(
        conv.run(&dev, &buf(31), &w, None, &mut y),
        "x ",
        ["31", "32"],
    );
    mismatch(
        conv.run(&dev, &x, &buf(55), None, &mut y),
        "w ",
        ["55", "54"],
    );
    mismatch(
        conv.run(&dev, &x, &w, Some(&buf(2)), &mut y),
        "bias",
        ["2", "3"],
    );
    mismatch(
        conv.run(&dev, &x, &w, None, &mut buf(13)),
        "y ",
        ["13", "12"],
    );
}

// ---------------------------------------------------------------------------
// On a GPU (ignored without one).

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn gpu_matches_reference(case in cases()) {
        let dev = Device::gpu(0).unwrap();
        check::<f32>(&dev, &case.conv(), case.bias, case.seed);
        check::<f16>(&dev, &case.conv(), case.bias, case.seed);
        check::<bf16>(&dev, &case.conv(), case.bias, case.seed);
    }
}

/// ResNet-50 layer shapes, batch 2 (the CPU reference stays fast). Sums of
/// up to 9·(C·R·S = 4608) are still exact in f32.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_resnet50_layers() {
    let dev = Device::gpu(0).unwrap();
    // (C, H, K, R, stride, padding)
    let layers = [
        (3, 224, 64, 7, 2, 3),
        (64, 56, 64, 1, 1, 0),
        (64, 56, 64, 3, 1, 1),
        (64, 56, 256, 1, 1, 0),
        (128, 28, 128, 3, 1, 1),
        (256, 56, 128, 1, 2, 0),
        (256, 14, 256, 3, 1, 1),
        (512, 7, 512, 3, 1, 1),
    ];
    for layout in [Layout::Nchw, Layout::Nhwc] {
        for (i, &(c, h, k, r, st, pad)) in layers.iter().enumerate() {
            let conv = Conv2d::new(layout, [2, c, h, h], [k, c, r, r])
                .stride(st, st)
                .padding(Padding::uniform(pad));
            check::<f32>(&dev, &conv, true, i as u64);
            check::<f16>(&dev, &conv, false, i as u64);
            check::<bf16>(&dev, &conv, true, i as u64);
        }
    }
}

/// A Hopper convolution test case: layout, input, weight, stride, padding,
/// dilation, bias, ReLU.
type WgmmaCase = (
    Layout,
    [usize; 4],
    [usize; 4],
    (usize, usize),
    Padding,
    (usize, usize),
    bool,
    bool,
);

/// The Hopper implicit GEMM (`conv2d_wgmma_nhwc_*`) on the emulator of
/// sm_90, exact against the reference on integer inputs: 3 × 3 with
/// padding, stride 2, dilation, 7 × 7 and 1 × 1 (with a bias: not the GEMM
/// route), batches, `N·P·Q` ragged over the 128-pixel tile and several
/// tiles, `K` ragged over the 128-channel tile (8, 24, 136), `C` below,
/// at and past one 64-channel k-step (8, 64, 72: each tap's last k-step
/// zero past `C`), bias and ReLU on and off, NHWC and NCHW (between
/// layout changes), f16 and bf16. The output is NaN first: an element no
/// thread writes fails.
#[test]
fn wgmma_convolution_is_exact() {
    if warpforge::ptx::HOPPER.left_out.is_some() {
        return;
    }
    let dev = Device::emulator();
    let pad = |t, b, l, r| Padding {
        top: t,
        bottom: b,
        left: l,
        right: r,
    };
    let cases: [WgmmaCase; 8] = [
        (
            Layout::Nhwc,
            [2, 16, 9, 9],
            [24, 16, 3, 3],
            (1, 1),
            Padding::uniform(1),
            (1, 1),
            true,
            true,
        ),
        (
            Layout::Nhwc,
            [1, 64, 12, 13],
            [136, 64, 3, 3],
            (2, 2),
            pad(1, 0, 2, 1),
            (1, 1),
            true,
            false,
        ),
        (
            Layout::Nhwc,
            [1, 72, 10, 9],
            [16, 72, 3, 3],
            (1, 1),
            Padding::uniform(2),
            (2, 2),
            false,
            true,
        ),
        (
            Layout::Nhwc,
            [1, 8, 13, 12],
            [16, 8, 7, 7],
            (2, 2),
            Padding::uniform(3),
            (1, 1),
            false,
            false,
        ),
        (
            Layout::Nhwc,
            [2, 64, 5, 7],
            [8, 64, 1, 1],
            (1, 1),
            Padding::default(),
            (1, 1),
            true,
            true,
        ),
        (
            Layout::Nhwc,
            [3, 8, 11, 11],
            [32, 8, 2, 5],
            (1, 2),
            pad(0, 1, 2, 0),
            (1, 1),
            true,
            false,
        ),
        (
            Layout::Nchw,
            [2, 16, 7, 6],
            [24, 16, 3, 3],
            (1, 1),
            Padding::uniform(1),
            (1, 1),
            true,
            true,
        ),
        (
            Layout::Nchw,
            [1, 8, 9, 9],
            [8, 8, 3, 3],
            (2, 1),
            Padding::uniform(1),
            (1, 2),
            false,
            false,
        ),
    ];
    for (i, (layout, input, weight, stride, padding, dil, bias, relu)) in
        cases.into_iter().enumerate()
    {
        let conv = Conv2d::new(layout, input, weight)
            .stride(stride.0, stride.1)
            .padding(padding)
            .dilation(dil.0, dil.1)
            .relu(relu);
        assert_eq!(
            conv.algorithm_on::<f16>(&dev, bias).unwrap(),
            Algorithm::Wgmma
        );
        // NCHW too: the NHWC kernel between layout changes.
        assert_eq!(
            conv.kernel_name_on::<f16>(&dev, bias).unwrap(),
            "conv2d_wgmma_nhwc_f16_128x128x64_s4"
        );
        let (_, profiles) = dev
            .profile_memory(|| {
                check::<f16>(&dev, &conv, bias, 100 + i as u64);
                check::<bf16>(&dev, &conv, bias, 200 + i as u64);
                Ok(())
            })
            .unwrap();
        let launched: Vec<&str> = profiles.iter().map(|p| p.kernel.as_str()).collect();
        assert!(
            launched.contains(&"conv2d_wgmma_nhwc_f16_128x128x64_s4")
                && launched.contains(&"conv2d_wgmma_nhwc_bf16_128x128x64_s4"),
            "{conv:?}: launched {launched:?}"
        );
    }
}

/// Where the sum's order is the same — every k16 slice one tap's channels
/// (`C` a multiple of 16), in `(r, s, c)` order — the Hopper convolution's
/// results are bit for bit the sm_80 implicit GEMM's (`wgmma(false)`), on
/// random inputs whose sums round: both accumulate each `k16` slice's
/// products exactly and round once per slice, in the same order. With
/// `C % 64 ≠ 0` the Hopper kernel's zero-filled slices add exact zeros.
#[test]
fn wgmma_convolution_matches_the_sm80_implicit_gemm_bit_for_bit() {
    if warpforge::ptx::HOPPER.left_out.is_some() {
        return;
    }
    let dev = Device::emulator();
    for (c, k, r, stride) in [(64, 40, 3, 1), (48, 16, 3, 2), (128, 8, 1, 1)] {
        let conv = Conv2d::new(Layout::Nhwc, [2, c, 8, 9], [k, c, r, r])
            .stride(stride, stride)
            .padding(Padding::uniform(r / 2))
            .relu(true);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (c * k) as u64;
        let mut random = |len: usize| -> Vec<f16> {
            (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    f16::from_f64((seed % 2001) as f64 / 1000.0 - 1.0)
                })
                .collect()
        };
        let len = |d: [usize; 4]| d.iter().product::<usize>();
        let x = dev.upload(&random(len(conv.input_dims()))).unwrap();
        let w = dev.upload(&random(len(conv.weight_dims()))).unwrap();
        let b = dev.upload(&random(k)).unwrap();
        let out = len(conv.output_dims().unwrap());
        let run = |conv: Conv2d| {
            let mut y = dev.upload(&vec![f16::NAN; out]).unwrap();
            conv.run(&dev, &x, &w, Some(&b), &mut y).unwrap();
            y.to_host().unwrap()
        };
        assert_eq!(
            conv.algorithm_on::<f16>(&dev, true).unwrap(),
            Algorithm::Wgmma
        );
        let hopper = run(conv);
        let sm80 = run(conv.wgmma(false));
        let differ = hopper
            .iter()
            .zip(&sm80)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(
            differ, 0,
            "C {c}, K {k}, {r} x {r}: {differ} of {out} outputs differ"
        );
    }
}

/// The Hopper convolution's dispatch: pinned off, the sm_80 kernels; pinned
/// on where it cannot run, `InvalidParameter` naming `wgmma` and why (C or
/// K not a multiple of 8, groups, f32, a device other than sm_90); a 1 × 1
/// layer without bias or ReLU is the GEMM's, which takes the pin.
#[test]
fn wgmma_convolution_dispatch_and_refusals() {
    if warpforge::ptx::HOPPER.left_out.is_some() {
        return;
    }
    let h100 = Device::emulator();
    let a100 = Device::emulator_for(warpforge::Arch::Sm80);
    let conv = |c, k, g| {
        Conv2d::new(Layout::Nhwc, [1, c, 8, 8], [k, c / g, 3, 3])
            .groups(g)
            .padding(Padding::uniform(1))
    };
    assert_eq!(
        conv(16, 16, 1).algorithm_on::<f16>(&h100, false).unwrap(),
        Algorithm::Wgmma
    );
    assert_eq!(
        conv(16, 16, 1)
            .wgmma(false)
            .algorithm_on::<f16>(&h100, false)
            .unwrap(),
        Algorithm::ImplicitGemm
    );
    assert_eq!(
        conv(16, 16, 1).algorithm_on::<f16>(&a100, false).unwrap(),
        Algorithm::ImplicitGemm
    );
    assert_eq!(
        conv(16, 16, 1).algorithm_on::<f32>(&h100, false).unwrap(),
        Algorithm::ImplicitGemm
    );
    let refused =
        |c: Conv2d, dev: &Device, why: &str| match c.wgmma(true).algorithm_on::<bf16>(dev, false) {
            Err(Error::InvalidParameter {
                parameter, detail, ..
            }) => {
                assert_eq!(parameter, "wgmma");
                assert!(detail.contains(why), "{detail}");
            }
            other => panic!("{c:?}: {other:?}"),
        };
    // C % 8 ≠ 0 with one group is the im2col route's; K % 8 ≠ 0 and groups
    // the layer's own.
    refused(conv(12, 16, 1), &h100, "im2col");
    refused(conv(16, 12, 1), &h100, "multiples of 8");
    refused(conv(16, 16, 2), &h100, "groups");
    refused(conv(16, 16, 1), &a100, "compute capability 9.0");
    assert_eq!(
        conv(16, 16, 1)
            .wgmma(true)
            .algorithm_on::<bf16>(&h100, true)
            .unwrap(),
        Algorithm::Wgmma
    );
    // Pinned on and run: the same exact results as unpinned.
    check::<bf16>(&h100, &conv(16, 16, 1).wgmma(true), true, 77);
    let one = Conv2d::new(Layout::Nhwc, [2, 64, 8, 8], [64, 64, 1, 1]);
    assert_eq!(
        one.algorithm_on::<f16>(&h100, false).unwrap(),
        Algorithm::Gemm1x1
    );
    assert!(
        one.wgmma(true)
            .kernel_name_on::<f16>(&h100, false)
            .unwrap()
            .starts_with("gemm_wgmma_f16_f16_nt_"),
        "{}",
        one.wgmma(true).kernel_name_on::<f16>(&h100, false).unwrap()
    );
    check::<f16>(&h100, &one.wgmma(true), false, 78);
}
