//! Split-k (`Gemm::split_k`) on the emulator: a GEMM run as a batch of
//! partial products over consecutive k-ranges into a workspace, then the
//! sum kernel (`gemm_split_k_sum_*`), against a CPU reference in f64.
//!
//! Exact cases, as in `gemm_tensor.rs`: small integer operands and factors,
//! so every partial sum (and the sum of the ranges) is an integer far below
//! 2²⁴, exact in f32 in any order; an f32/f64 result is compared bit for
//! bit, an f16/bf16 one with the reference rounded once to that type.
//! Every pair (SIMT f32 on both tiles, f64, TF32 on both tiles, f16/bf16
//! into each output), every transpose, ranges that split `k` unevenly (a
//! short last range) and leading dimensions that misalign the rows (the
//! guarded copies); `C`'s padding must survive, and a NaN-filled `C` with
//! `beta = 0` must not leak. Each run's launches are checked: the partial
//! kernel on a grid of `ranges` batches, then the sum kernel. Then the
//! heuristic's picks, the fallback when the workspace does not fit, and the
//! refusals.

use crate::common;

use common::gemm::{Case, PADDING, TRANSPOSES, Val, case, case_with_lds, wgmma_lds};
use half::{bf16, f16};
use warpforge::gemm::{Gemm, GemmTypes, TileConfig, split_k_count, wgmma_split_k_count};
use warpforge::{Arch, DType, Device, Error};

use TileConfig::{Large, Small};

/// Integers in `[-4, 4]`: exact in every input type, sums of a few hundred
/// products exact in f32.
fn small_int(bits: u64) -> f64 {
    (bits % 9) as f64 - 4.0
}

/// `C` per element in f64: `alpha·Σ a·b`, plus `beta·c` unless `beta = 0`
/// (C not read); the padding keeps its value.
fn reference(c: &Case) -> Vec<f64> {
    let mut d = c.c.clone();
    for i in 0..c.m {
        for j in 0..c.n {
            // alpha = 0: A and B are not read (the sum is +0).
            let acc: f64 = if c.alpha == 0.0 {
                0.0
            } else {
                (0..c.k).map(|p| c.a_at(i, p) * c.b_at(p, j)).sum()
            };
            let e = &mut d[i * c.ldc + j];
            *e = if c.beta == 0.0 {
                c.alpha * acc
            } else {
                c.beta * *e + c.alpha * acc
            };
        }
    }
    d
}

/// How one run is configured: the pinned ranges (`None`: the default),
/// tile and TF32.
#[derive(Clone, Copy, Debug)]
struct Run {
    ranges: Option<usize>,
    tile: Option<TileConfig>,
    tf32: bool,
}

/// Runs `c` as `I → O` with `run`'s settings, checks `C` against the
/// reference (bit for bit after one rounding to `O`) and returns the
/// launched kernels with their grid's z extent.
fn check<I, O>(dev: &Device, c: &Case, run: Run) -> Vec<(String, u32)>
where
    I: Val + GemmTypes<O>,
    O: Val,
    I::Scalar: Val,
{
    check_with::<I, O>(dev, c, run, |g| g)
}

/// [`check`] with the GEMM further configured by `pin` (`.wgmma(true)`,
/// `.sm_limit(…)`).
fn check_with<I, O>(
    dev: &Device,
    c: &Case,
    run: Run,
    pin: impl Fn(Gemm<I::Scalar>) -> Gemm<I::Scalar>,
) -> Vec<(String, u32)>
where
    I: Val + GemmTypes<O>,
    O: Val,
    I::Scalar: Val,
{
    let up = |v: &[f64]| {
        dev.upload(&v.iter().map(|&x| I::from_f64(x)).collect::<Vec<I>>())
            .unwrap()
    };
    let (a, b) = (up(&c.a), up(&c.b));
    let mut out = dev
        .upload(&c.c.iter().map(|&x| O::from_f64(x)).collect::<Vec<O>>())
        .unwrap();
    let mut gemm = Gemm::<I::Scalar>::new(c.m, c.n, c.k)
        .trans_a(c.ta)
        .trans_b(c.tb)
        .alpha(I::Scalar::from_f64(c.alpha))
        .beta(I::Scalar::from_f64(c.beta))
        .lda(c.lda)
        .ldb(c.ldb)
        .ldc(c.ldc)
        .tf32(run.tf32);
    if let Some(ranges) = run.ranges {
        gemm = gemm.split_k(ranges);
    }
    if let Some(tile) = run.tile {
        gemm = gemm.tile(tile);
    }
    let gemm = pin(gemm);
    // The emulator says what ran; a GPU just runs it.
    let profiles = if dev.is_gpu() {
        gemm.run(dev, &a, &b, &mut out).unwrap();
        Vec::new()
    } else {
        dev.profile_memory(|| gemm.run(dev, &a, &b, &mut out))
            .unwrap()
            .1
    };
    let got = out.to_host().unwrap();
    for (e, (g, w)) in got.iter().zip(reference(c)).enumerate() {
        let (g, w) = (g.to_f64(), O::from_f64(w).to_f64());
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "{} → {}, {run:?}: C[{e}] (row {}, col {}) = {g}, expected {w}{}: {}",
            I::DTYPE.name(),
            O::DTYPE.name(),
            e / c.ldc,
            e % c.ldc,
            if e % c.ldc >= c.n { " (padding)" } else { "" },
            c.describe()
        );
    }
    profiles.into_iter().map(|p| (p.kernel, p.grid.z)).collect()
}

/// The launches of a split run: `partial` (the tile's kernel into the
/// scalar type) on a grid of `ranges` batches, then the sum into `out`.
fn split_launches(partial: &str, out: warpforge::DType, ranges: u32) -> Vec<(String, u32)> {
    let sum = format!("gemm_split_k_sum_{}", out.name());
    vec![(partial.to_owned(), ranges), (sum, 1)]
}

/// Every pair, transpose and tile, split unevenly into 3 ranges (k = 200:
/// 96 + 96 + 8), exact; rows aligned or not (pad 0 or 1).
#[test]
fn split_k_is_exact_for_every_pair_transpose_and_tile() {
    let dev = Device::emulator();
    let shape = (37, 70, 200);
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        for pad in [0, 1] {
            let seed = (t * 2 + pad) as u64;
            let c = case(shape, trans, pad, 2.0, -1.0, None, seed, small_int);
            let gemm = |tile: TileConfig| {
                Gemm::new(c.m, c.n, c.k)
                    .trans_a(c.ta)
                    .trans_b(c.tb)
                    .tile(tile)
            };
            for tile in [Small, Large] {
                let run = Run {
                    ranges: Some(3),
                    tile: Some(tile),
                    tf32: false,
                };
                // The partial products' kernels: the input into f32.
                let partial = gemm(tile).kernel_name_for::<f16, f32>(&dev).unwrap();
                let launches = check::<f16, f32>(&dev, &c, run);
                assert_eq!(launches, split_launches(partial, DType::F32, 3));
                let launches = check::<bf16, bf16>(&dev, &c, run);
                let bf16_partial = gemm(tile).kernel_name_for::<bf16, f32>(&dev).unwrap();
                assert_eq!(launches, split_launches(bf16_partial, DType::BF16, 3));
                check::<f32, f32>(&dev, &c, run);
                let launches = check::<f32, f32>(&dev, &c, Run { tf32: true, ..run });
                let tf32_partial = gemm(tile).tf32(true).kernel_name_for::<f32, f32>(&dev);
                let tf32_partial = tf32_partial.unwrap();
                assert!(tf32_partial.starts_with("gemm_tf32_f32_"), "{tf32_partial}");
                assert_eq!(launches, split_launches(tf32_partial, DType::F32, 3));
            }
            let small = Run {
                ranges: Some(3),
                tile: Some(Small),
                tf32: false,
            };
            check::<f16, bf16>(&dev, &c, small);
            check::<bf16, f16>(&dev, &c, small);
            let launches = check::<f64, f64>(
                &dev,
                &c,
                Run {
                    tile: None,
                    ..small
                },
            );
            assert_eq!(launches[1].0, "gemm_split_k_sum_f64");
        }
    }
}

/// The ranges are whole k-steps but the last: on aligned operands every
/// block of the full ranges takes the lean (interior) path, the short last
/// range's blocks the guarded one, and the result is still exact.
#[test]
fn full_ranges_take_the_lean_path_and_the_remainder_the_guarded_one() {
    let dev = Device::emulator();
    let c = case(
        (128, 64, 200),
        (false, true),
        0,
        1.0,
        0.5,
        None,
        7,
        small_int,
    );
    let up = |v: &[f64]| {
        dev.upload(&v.iter().map(|&x| f16::from_f64(x)).collect::<Vec<f16>>())
            .unwrap()
    };
    let (a, b) = (up(&c.a), up(&c.b));
    let mut out = dev
        .upload(&c.c.iter().map(|&x| x as f32).collect::<Vec<f32>>())
        .unwrap();
    let gemm = Gemm::new(c.m, c.n, c.k)
        .trans_b(true)
        .beta(0.5)
        .tile(Small)
        .split_k(3);
    let ((), profiles) = dev
        .profile_memory(|| gemm.run(&dev, &a, &b, &mut out))
        .unwrap();
    // 2 × 1 blocks per range; ranges 96, 96 and 8 deep.
    let paths = [("guarded".to_owned(), 2), ("lean".to_owned(), 4)];
    assert_eq!(profiles[0].paths, paths);
    let got = out.to_host().unwrap();
    for (e, (g, w)) in got.iter().zip(reference(&c)).enumerate() {
        assert_eq!(f64::from(*g), w, "C[{e}]: {}", c.describe());
    }
}

/// `beta = 0` over a NaN-filled `C`: the sum never reads `C`. `alpha = 0`:
/// nothing to split (one launch, `C ← beta·C`). A pinned count deeper than
/// `k` allows gives fewer ranges (each a multiple of 32 deep).
#[test]
fn beta_zero_alpha_zero_and_shallow_k() {
    let dev = Device::emulator();
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        let nan = case(
            (20, 33, 90),
            trans,
            1,
            1.0,
            0.0,
            Some(f64::NAN),
            t as u64,
            small_int,
        );
        let run = Run {
            ranges: Some(2),
            tile: None,
            tf32: false,
        };
        check::<bf16, f32>(&dev, &nan, run);
        check::<f32, f32>(&dev, &nan, run);
        let scale = case((20, 33, 90), trans, 0, 0.0, -0.5, None, t as u64, small_int);
        let launches = check::<f16, f16>(&dev, &scale, run);
        assert_eq!(launches.len(), 1, "{launches:?}");
    }
    // k = 100 in at most 5 ranges: 32, 32, 32 and 4.
    let gemm = Gemm::new(10, 10, 100).split_k(5);
    assert_eq!(gemm.split_k_for::<f16, f32>(&dev).unwrap(), 4);
    assert_eq!(
        Gemm::new(10, 10, 32)
            .split_k(8)
            .split_k_for::<f16, f32>(&dev)
            .unwrap(),
        1
    );
    let c = case(
        (10, 10, 100),
        (true, false),
        2,
        1.0,
        1.0,
        None,
        9,
        small_int,
    );
    let run = Run {
        ranges: Some(5),
        tile: None,
        tf32: false,
    };
    assert_eq!(check::<f16, f32>(&dev, &c, run)[0].1, 4);
}

/// The default: split only where the configuration's grid leaves SMs idle,
/// as the emulated GPU counts them (sm_90: 132 SMs, sm_80: 108), for one
/// GEMM with `k` deep enough; `split_k(1)` turns it off.
#[test]
fn the_heuristic_splits_only_grids_that_cannot_fill_the_gpu() {
    let h100 = Device::emulator_for(Arch::Sm90);
    let a100 = Device::emulator_for(Arch::Sm80);
    let skinny = Gemm::new(128, 4096, 4096);
    // The mma.sync kernels (the Hopper ones off, or a pair without them):
    // 2 × 64 = 128 blocks of 64 × 64 on 132 SMs: 3 ranges (384 blocks).
    assert_eq!(
        skinny.wgmma(false).split_k_for::<f16, f32>(&h100).unwrap(),
        3
    );
    assert_eq!(skinny.split_k_for::<f16, bf16>(&h100).unwrap(), 3);
    // The partial products' kernel, which writes f32 (the sum then rounds).
    assert_eq!(
        skinny.kernel_name_for::<f16, bf16>(&h100).unwrap(),
        "gemm_f16_f32_nn_64x64x32_s3"
    );
    // f64 on sm_90: the 128 × 64 DMMA.16x8x16 tile, 1 × 64 = 64 blocks: 5 ranges.
    let skinny_f64 = Gemm::<f64>::new(128, 4096, 4096);
    assert_eq!(skinny_f64.split_k_for::<f64, f64>(&h100).unwrap(), 5);
    assert_eq!(split_k_count(64, 4096, 1, 132), 5);
    assert_eq!(split_k_count(128, 4096, 1, 132), 3);
    // 128 blocks fill an A100's 108 SMs.
    assert_eq!(skinny.split_k_for::<f16, f32>(&a100).unwrap(), 1);
    // 1024² on sm_90: 256 small blocks fill it, unsplit; its 64 narrow
    // Hopper tiles (32 wide ones would leave 100 SMs idle) split 2 ways
    // only where the Hopper kernels are pinned.
    let square = Gemm::new(1024, 1024, 4096);
    assert_eq!(square.split_k_for::<f16, f32>(&h100).unwrap(), 1);
    assert_eq!(
        square.wgmma(true).split_k_for::<f16, f32>(&h100).unwrap(),
        2
    );
    // A leading dimension no tensor map describes: the mma.sync split.
    assert_eq!(skinny.lda(4100).split_k_for::<f16, f32>(&h100).unwrap(), 3);
    // Pinned large tile: 32 blocks, 9 ranges wanted, 8 allowed (k / 512).
    let large = skinny.tile(Large);
    assert_eq!(large.split_k_for::<bf16, bf16>(&h100).unwrap(), 8);
    for gemm in [
        square,                     // 256 blocks
        skinny.batch(2),            // a batch
        Gemm::new(128, 4096, 1000), // k under 2 · 512
        skinny.alpha(0.0),          // C ← beta·C
        skinny.split_k(1),          // off
    ] {
        assert_eq!(gemm.split_k_for::<f16, f32>(&h100).unwrap(), 1, "{gemm:?}");
    }
}

/// The Hopper split's heuristic (`wgmma_split_k_count`) and tile choice
/// (128 × 128 where the 128 × 256 tiles number at most half the SMs) on
/// the issue's shapes, on the emulated H100's 132 SMs: where the tiles
/// leave SMs idle (and, unpinned, the mma.sync kernels would split too),
/// k-ranges of the f32-output Hopper kernel, as many as fit one wave; a
/// grid of a wave or more runs unsplit (2048³ is 16 × 8 = 128 wide tiles:
/// one wave at 97 %), and a shallow k, a batch or a pin of the mma.sync
/// kernels keeps today's choice.
#[test]
fn the_hopper_split_fills_one_wave_of_the_issues_shapes() {
    let h100 = Device::emulator_for(Arch::Sm90);
    let plan = |g: Gemm<f32>| {
        (
            g.split_k_for::<bf16, bf16>(&h100).unwrap(),
            g.kernel_name_for::<bf16, bf16>(&h100).unwrap(),
            g.wgmma_blocks::<bf16, bf16>(&h100).unwrap(),
        )
    };
    let (whole, partial, narrow_partial) = (
        "gemm_wgmma_bf16_bf16_nn_128x256x64_s4",
        "gemm_wgmma_bf16_f32_nn_128x256x64_s4",
        "gemm_wgmma_bf16_f32_nn_128x128x64_s4",
    );
    // 128 × 4096 × 4096: 1 × 16 wide tiles, so 1 × 32 narrow ones; 4
    // ranges of 1024, 128 blocks (8 of 512 on the wide tiles).
    let skinny = Gemm::new(128, 4096, 4096);
    assert_eq!(
        plan(skinny.trans_b(true)),
        (4, "gemm_wgmma_bf16_f32_nt_128x128x64_s4", Some(128))
    );
    assert_eq!(skinny.split_k_for::<f16, f32>(&h100).unwrap(), 4);
    // 2048³: 128 tiles, one wave already: unsplit.
    let cube = Gemm::new(2048, 2048, 2048);
    assert_eq!(plan(cube), (1, whole, Some(128)));
    // 1024 × 2048 × 2048: 8 × 8 = 64 wide tiles, 8 × 16 = 128 narrow ones:
    // one wave unsplit where the Hopper kernels are pinned (2 ranges of
    // the wide tiles before); by default the mma.sync small tile's 512
    // blocks fill the GPU unsplit, as before.
    let mid = Gemm::new(1024, 2048, 2048);
    assert_eq!(
        plan(mid.wgmma(true)),
        (1, "gemm_wgmma_bf16_bf16_nn_128x128x64_s4", Some(128))
    );
    assert_eq!(plan(mid), (1, "gemm_bf16_bf16_nn_64x64x32_s3", None));
    // 8192 × 1024 × 4096: 64 × 4 = 256 tiles, two waves: unsplit.
    assert_eq!(plan(Gemm::new(8192, 1024, 4096)), (1, whole, Some(132)));
    assert_eq!(wgmma_split_k_count(128, 2048, 1, 132), 1);
    assert_eq!(wgmma_split_k_count(16, 4096, 1, 132), 8);
    assert_eq!(wgmma_split_k_count(32, 4096, 1, 132), 4);
    // The SMs the persistent grid may take (`sm_limit`) are the ones to
    // fill: 64 of them hold 2 ranges of 32 narrow tiles. (An unpinned split
    // is always of narrow tiles: wide ones split only on twice their count
    // of SMs, where the narrow ones are taken.)
    assert_eq!(plan(skinny.sm_limit(64)), (2, narrow_partial, Some(64)));
    // 16 SMs for 16 wide tiles: no Hopper split, and the mma.sync heuristic's
    // small tile keeps the Hopper kernels off (their own split, which
    // `sm_limit` does not bound).
    assert_eq!(
        plan(skinny.sm_limit(16)),
        (3, "gemm_bf16_f32_nn_64x64x32_s3", None)
    );
    // A pinned count with the Hopper kernels pinned; without the pin,
    // `.split_k` is the mma.sync split (the large tile: 256 blocks).
    assert_eq!(plan(cube.wgmma(true).split_k(3)), (3, partial, Some(132)));
    assert_eq!(
        cube.split_k(3)
            .kernel_name_for::<bf16, bf16>(&h100)
            .unwrap(),
        "gemm_bf16_f32_nn_128x128x32_s4"
    );
    // k under two ranges of 512, a batch: no split; the grid fills (Large:
    // 256 blocks of 128 × 128 and more), so the unsplit Hopper kernel.
    for (g, blocks) in [(Gemm::new(2048, 2048, 1000), 128), (skinny.batch(64), 132)] {
        assert_eq!(plan(g), (1, whole, Some(blocks)), "{g:?}");
    }
}

/// The launches of a Hopper split: the ranges' batch (a 1-D persistent
/// grid: the batch is the maps' third dimension), the tail's launch when k
/// leaves one (the same kernel), then the sum into `out`.
fn wgmma_split_launches(partial: &str, out: DType, tail: bool) -> Vec<(String, u32)> {
    let mut launches = vec![(partial.to_owned(), 1)];
    if tail {
        launches.push((partial.to_owned(), 1));
    }
    launches.push((format!("gemm_split_k_sum_{}", out.name()), 1));
    launches
}

/// Split-k on the Hopper kernels (`.wgmma(true).split_k(r)`), exact for
/// every pair and output (two pairs a transpose): a 131 × 263 C (2 × 3
/// narrow tiles, or 2 × 2 wide ones where 7 SMs make the grid take them,
/// alternately by transpose; ragged in both), k = 200 in 3 ranges of 64 and
/// a tail of 8 (its own launch, added into the first plane), k = 256 in 2
/// of 128 (no tail); packed and padded leading dimensions; alpha −2 with
/// beta 0.5, and alpha 1 with beta 0 over a NaN-filled C (the sum never
/// reads it).
#[test]
fn the_hopper_split_is_exact_for_every_pair_transpose_and_output() {
    let dev = Device::emulator_for(Arch::Sm90);
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        // 4 wide tiles: narrow on 132 SMs, wide on 7 (8 narrow ones would
        // be more than half of them).
        let (sms, tile) = if t % 2 == 0 {
            (132, "128x128x64")
        } else {
            (7, "128x256x64")
        };
        let pin = |g: Gemm<f32>| g.wgmma(true).sm_limit(sms);
        for (k, ranges, tail) in [(200, 3, true), (256, 2, false)] {
            let shape = (131, 263, k);
            let lds = wgmma_lds(shape, trans, t % 2);
            let seed = 500 + (t * 2 + ranges) as u64;
            let (alpha, beta, fill) = if ranges == 3 {
                (-2.0, 0.5, None)
            } else {
                (1.0, 0.0, Some(f64::NAN))
            };
            let c = case_with_lds(shape, trans, lds, alpha, beta, fill, seed, small_int);
            let run = Run {
                ranges: Some(ranges),
                tile: None,
                tf32: false,
            };
            let gemm = Gemm::<f32>::new(131, 263, k)
                .trans_a(trans.0)
                .trans_b(trans.1)
                .lda(lds.0)
                .ldb(lds.1)
                .ldc(lds.2)
                .split_k(ranges)
                .wgmma(true)
                .sm_limit(sms);
            let partial = |name: &str| {
                let suffix = ["nn", "nt", "tn", "tt"][t];
                format!("gemm_wgmma_{name}_f32_{suffix}_{tile}_s4")
            };
            assert_eq!(
                gemm.kernel_name_for::<f16, f16>(&dev).unwrap(),
                partial("f16")
            );
            assert_eq!(gemm.split_k_for::<f16, f16>(&dev).unwrap(), ranges);
            // Two pairs a transpose, each pair on two transposes.
            let of_f16 = |out| wgmma_split_launches(&partial("f16"), out, tail);
            let of_bf16 = |out| wgmma_split_launches(&partial("bf16"), out, tail);
            if t % 2 == 0 {
                assert_eq!(
                    check_with::<f16, f32>(&dev, &c, run, pin),
                    of_f16(DType::F32)
                );
                let launches = check_with::<bf16, bf16>(&dev, &c, run, pin);
                assert_eq!(launches, of_bf16(DType::BF16));
            } else {
                assert_eq!(
                    check_with::<f16, f16>(&dev, &c, run, pin),
                    of_f16(DType::F16)
                );
                let launches = check_with::<bf16, f32>(&dev, &c, run, pin);
                assert_eq!(launches, of_bf16(DType::F32));
            }
        }
    }
}

/// The Hopper split's work: one allocation (the planes, unset: every
/// element is written by the ranges' launch, no memset), the ranges' launch
/// and the tail's, the sum; nothing else. The mma.sync split's likewise
/// (its batch, the sum).
#[test]
fn the_hopper_split_allocates_its_planes_unset_and_launches_three_kernels() {
    let dev = Device::emulator_for(Arch::Sm90);
    // k = 200: 3 ranges of 64 and a tail of 8; k = 192: 3 of 64, no tail.
    for (k, tail) in [(200usize, 1u64), (192, 0)] {
        let (m, n) = (131usize, 263usize);
        let lds = wgmma_lds((m, n, k), (false, false), 0);
        let c = case_with_lds((m, n, k), (false, false), lds, 1.0, 1.0, None, 3, small_int);
        let a = dev.upload(&c.a.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>());
        let b = dev.upload(&c.b.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>());
        let (a, b) = (a.unwrap(), b.unwrap());
        let mut out = dev
            .upload(&c.c.iter().map(|&x| x as f32).collect::<Vec<_>>())
            .unwrap();
        let gemm = Gemm::new(m, n, k)
            .beta(1.0)
            .lda(lds.0)
            .ldb(lds.1)
            .ldc(lds.2)
            .wgmma(true)
            .split_k(3);
        let ((), work) = dev
            .work_done_by(|| gemm.run(&dev, &a, &b, &mut out))
            .unwrap();
        assert_eq!(work.allocations, 1, "k = {k}: {work:?}");
        assert_eq!(work.memsets, 0, "k = {k}: {work:?}");
        // 131 × 263: 2 × 3 narrow tiles on the emulated 132 SMs.
        assert_eq!(
            work.launches.get("gemm_wgmma_f16_f32_nn_128x128x64_s4"),
            Some(&(1 + tail)),
            "k = {k}: {work:?}"
        );
        assert_eq!(work.launches.get("gemm_split_k_sum_f32"), Some(&1));
        assert_eq!(work.total_launches(), 2 + tail);
        let want: Vec<f32> = reference(&c).into_iter().map(|x| x as f32).collect();
        assert_eq!(out.to_host().unwrap(), want, "k = {k}");
        // The mma.sync split's planes are unset too: its batch writes every
        // element of every plane (the short last range passed as `k_last`).
        out.copy_from_host(&c.c.iter().map(|&x| x as f32).collect::<Vec<_>>())
            .unwrap();
        let mma_sync = gemm.wgmma(false);
        let ((), work) = dev
            .work_done_by(|| mma_sync.run(&dev, &a, &b, &mut out))
            .unwrap();
        assert_eq!((work.allocations, work.memsets), (1, 0), "{work:?}");
        assert_eq!(work.total_launches(), 2, "{work:?}");
        assert_eq!(out.to_host().unwrap(), want, "mma.sync, k = {k}");
    }
}

/// The default splits on the Hopper kernels where the persistent grid's
/// SMs outnumber the tiles: 128 × 512 is 2 wide tiles, so 4 narrow ones on
/// 8 SMs (`sm_limit`): 2 ranges of 512 and a tail of 6 (k = 1030), exact.
#[test]
fn the_default_splits_on_the_hopper_kernels_where_the_tiles_leave_sms_idle() {
    let dev = Device::emulator_for(Arch::Sm90);
    let shape = (128, 512, 1030);
    let trans = (true, false);
    let lds = wgmma_lds(shape, trans, 0);
    let c = case_with_lds(shape, trans, lds, 1.0, -1.0, None, 11, small_int);
    let pin = |g: Gemm<f32>| g.sm_limit(8);
    let gemm = pin(Gemm::new(128, 512, 1030).trans_a(true).lda(lds.0));
    assert_eq!(gemm.split_k_for::<bf16, bf16>(&dev).unwrap(), 2);
    assert_eq!(gemm.wgmma_blocks::<bf16, bf16>(&dev).unwrap(), Some(8));
    let run = Run {
        ranges: None,
        tile: None,
        tf32: false,
    };
    let partial = "gemm_wgmma_bf16_f32_tn_128x128x64_s4";
    assert_eq!(
        check_with::<bf16, bf16>(&dev, &c, run, pin),
        wgmma_split_launches(partial, DType::BF16, true)
    );
}

/// f32's skinny path: where the small SIMT tile's grid cannot fill the GPU
/// and the large one splits, the large (warp-tiled) tile runs split.
#[test]
fn skinny_f32_splits_the_large_simt_tile() {
    let h100 = Device::emulator_for(Arch::Sm90);
    let a100 = Device::emulator_for(Arch::Sm80);
    let skinny = Gemm::<f32>::new(128, 4096, 4096);
    let plan = |g: Gemm<f32>, dev: &Device| {
        (
            g.tile_config_for::<f32, f32>(dev).unwrap(),
            g.split_k_for::<f32, f32>(dev).unwrap(),
            g.kernel_name_for::<f32, f32>(dev).unwrap(),
        )
    };
    // 1 × 32 large blocks: 8 ranges (⌈264 / 32⌉ = 9, at most 4096 / 512).
    assert_eq!(
        plan(skinny, &h100),
        (Some(Large), 8, "gemm_f32_nn_128x128x8")
    );
    assert_eq!(
        plan(skinny.trans_a(true), &h100),
        (Some(Large), 8, "gemm_f32_tn_128x128x8")
    );
    // 128 small blocks fill an A100's 108 SMs: the small tile, unsplit.
    assert_eq!(
        plan(skinny, &a100),
        (Some(Small), 1, "gemm_f32_nn_64x64x16")
    );
    // The small tile where the large one's 128 rows would cover twice C's
    // 64, k too shallow to split, a pinned split, a batch, TF32.
    assert_eq!(
        plan(Gemm::new(64, 4096, 4096), &h100),
        (Some(Small), 5, "gemm_f32_nn_64x64x16")
    );
    assert_eq!(
        plan(Gemm::new(128, 4096, 1000), &h100),
        (Some(Small), 1, "gemm_f32_nn_64x64x16")
    );
    assert_eq!(plan(skinny.split_k(3), &h100).0, Some(Small));
    assert_eq!(plan(skinny.batch(2), &h100).0, Some(Small));
    assert_eq!(
        plan(skinny.tf32(true), &h100),
        (Some(Small), 3, "gemm_tf32_f32_nn_64x64x16_s3")
    );
}

/// The workspace does not fit: a pinned split is refused with
/// `OutOfMemory` and `C` untouched; the default runs the unsplit GEMM.
#[test]
fn a_workspace_that_does_not_fit_is_refused_when_pinned_else_skipped() {
    // A, B: 64 × 1024 f32 (256 KiB each), C: 64 × 64 (16 KiB); the default
    // split (one block: 2 ranges) would need 32 KiB more.
    let dev = Device::emulator_with_memory(256 * 1024 * 2 + 16 * 1024 + 8 * 1024);
    let c = case(
        (64, 64, 1024),
        (false, false),
        0,
        1.0,
        1.0,
        None,
        3,
        small_int,
    );
    let up = |v: &[f64]| {
        dev.upload(&v.iter().map(|&x| x as f32).collect::<Vec<f32>>())
            .unwrap()
    };
    let (a, b, mut out) = (up(&c.a), up(&c.b), up(&c.c));
    let gemm = Gemm::new(64, 64, 1024).beta(1.0);
    assert_eq!(gemm.split_k_for::<f32, f32>(&dev).unwrap(), 2);
    let err = gemm.split_k(2).run(&dev, &a, &b, &mut out).unwrap_err();
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    let untouched: Vec<f32> = c.c.iter().map(|&x| x as f32).collect();
    assert_eq!(out.to_host().unwrap(), untouched);
    let ((), profiles) = dev
        .profile_memory(|| gemm.run(&dev, &a, &b, &mut out))
        .unwrap();
    assert_eq!(profiles.len(), 1, "the unsplit GEMM only");
    let want: Vec<f32> = reference(&c).into_iter().map(|x| x as f32).collect();
    assert_eq!(out.to_host().unwrap(), want);
}

/// The Hopper split's planes do not fit: pinned, `OutOfMemory` and `C`
/// untouched; by default the unsplit Hopper kernel runs.
#[test]
fn a_hopper_split_that_does_not_fit_is_refused_when_pinned_else_runs_unsplit() {
    // A: 128 × 1024 bf16 (256 KiB), B: 1024 × 256 (512 KiB), C: 128 × 256
    // f32 (128 KiB); the default split (2 narrow tiles: 2 ranges of 512)
    // needs two f32 planes, 256 KiB more than the 64 KiB left.
    let dev = Device::emulator_with_memory((256 + 512 + 128 + 64) * 1024);
    let (m, n, k) = (128, 256, 1024);
    let c = case((m, n, k), (false, false), 0, 1.0, 1.0, None, 5, small_int);
    let up = |v: &[f64]| {
        dev.upload(&v.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<_>>())
            .unwrap()
    };
    let (a, b) = (up(&c.a), up(&c.b));
    let mut out = dev
        .upload(&c.c.iter().map(|&x| x as f32).collect::<Vec<_>>())
        .unwrap();
    let gemm = Gemm::new(m, n, k).beta(1.0);
    assert_eq!(gemm.split_k_for::<bf16, f32>(&dev).unwrap(), 2);
    let err = gemm
        .wgmma(true)
        .split_k(2)
        .run(&dev, &a, &b, &mut out)
        .unwrap_err();
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    let untouched: Vec<f32> = c.c.iter().map(|&x| x as f32).collect();
    assert_eq!(out.to_host().unwrap(), untouched);
    let ((), work) = dev
        .work_done_by(|| gemm.run(&dev, &a, &b, &mut out))
        .unwrap();
    assert_eq!(work.total_launches(), 1, "the unsplit GEMM only: {work:?}");
    assert_eq!(
        work.launches.get("gemm_wgmma_bf16_f32_nn_128x128x64_s4"),
        Some(&1)
    );
    let want: Vec<f32> = reference(&c).into_iter().map(|x| x as f32).collect();
    assert_eq!(out.to_host().unwrap(), want);
}

/// Refused before anything runs, naming the parameter: 0 ranges, and a
/// split of a batch. `C` untouched.
#[test]
fn zero_ranges_and_a_split_batch_are_refused() {
    let dev = Device::emulator();
    let a = dev.upload(&[f16::ONE; 64]).unwrap();
    let mut c = dev.upload(&[PADDING as f32; 64]).unwrap();
    for gemm in [
        Gemm::new(4, 4, 4).split_k(0),
        Gemm::new(4, 4, 2).batch(2).split_k(2),
        // With the Hopper kernels pinned too (the refusal comes first).
        Gemm::new(4, 4, 4).split_k(0).wgmma(true),
        Gemm::new(4, 4, 2).batch(2).split_k(2).wgmma(true),
    ] {
        match gemm.run(&dev, &a, &a, &mut c) {
            Err(Error::InvalidParameter { parameter, .. }) => assert_eq!(parameter, "split_k"),
            other => panic!("{gemm:?}: {other:?}"),
        }
        assert_eq!(c.to_host().unwrap(), [PADDING as f32; 64]);
    }
}

/// On a GPU: the exact property through split-k for the tensor-core pairs
/// and SIMT f32, every transpose, at a skinny shape the heuristic splits
/// (`128 × 1000 × 2048`: on an H100 or H200 the Hopper split where the
/// leading dimensions allow it), a pinned uneven split, and a pinned Hopper
/// split with a tail on sm_90.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_split_k_matches_the_exact_reference() {
    let gpu = Device::gpu(0).expect("this test needs a CUDA GPU");
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        let c = case(
            (128, 1000, 2048),
            trans,
            t % 2,
            1.0,
            0.5,
            None,
            t as u64,
            small_int,
        );
        // The default: on an H100 or H200 the Hopper split where the leading
        // dimensions allow it (f16/bf16, even t), else the mma.sync one;
        // f32's large SIMT tile split.
        let auto = Run {
            ranges: None,
            tile: None,
            tf32: false,
        };
        check::<f16, f32>(&gpu, &c, auto);
        check::<bf16, bf16>(&gpu, &c, auto);
        check::<f32, f32>(&gpu, &c, auto);
        let uneven = case(
            (67, 70, 300),
            trans,
            1,
            2.0,
            0.0,
            Some(f64::NAN),
            t as u64,
            small_int,
        );
        let run = Run {
            ranges: Some(3),
            tile: Some(Small),
            tf32: false,
        };
        check::<f16, f16>(&gpu, &uneven, run);
        check::<f32, f32>(&gpu, &uneven, Run { tf32: true, ..run });
        if gpu.compute_capability() == (9, 0) {
            let shape = (131, 263, 200);
            let lds = wgmma_lds(shape, trans, t % 2);
            let c = case_with_lds(shape, trans, lds, -2.0, 0.5, None, t as u64, small_int);
            let run = Run {
                ranges: Some(3),
                tile: None,
                tf32: false,
            };
            let pin = |g: Gemm<f32>| g.wgmma(true);
            check_with::<f16, f32>(&gpu, &c, run, pin);
            check_with::<bf16, bf16>(&gpu, &c, run, pin);
        }
    }
}

/// `kernel_name_for` names what a split launches first: the partial
/// products' kernel, which writes f32 (the sum kernel follows), whatever C's
/// type — on the `mma.sync` tiles and on the Hopper kernels alike.
#[test]
fn kernel_name_for_a_split_names_the_partial_products_kernel_it_launches() {
    for (dev, wgmma) in [
        (Device::emulator(), false),
        (Device::emulator_for(Arch::Sm90), true),
    ] {
        let (m, n, k) = (64usize, 72usize, 1536usize);
        let a = dev.alloc_zeroed::<f16>(m * k).unwrap();
        let b = dev.alloc_zeroed::<f16>(k * n).unwrap();
        let mut c = dev.alloc_zeroed::<f16>(m * n).unwrap();
        let gemm = Gemm::new(m, n, k).wgmma(wgmma).split_k(3);
        let named = gemm.kernel_name_for::<f16, f16>(&dev).unwrap();
        let ((), work) = dev.work_done_by(|| gemm.run(&dev, &a, &b, &mut c)).unwrap();
        assert!(
            named.contains("_f16_f32_"),
            "wgmma {wgmma}: {named} writes f32"
        );
        assert_eq!(
            work.launches.get(named),
            Some(&1),
            "wgmma {wgmma}: {work:?}"
        );
        assert_eq!(
            work.launches.get("gemm_split_k_sum_f16"),
            Some(&1),
            "{work:?}"
        );
    }
}
