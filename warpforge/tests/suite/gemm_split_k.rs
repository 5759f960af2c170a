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

use common::gemm::{Case, PADDING, TRANSPOSES, Val, case};
use half::{bf16, f16};
use warpforge::gemm::{Gemm, GemmTypes, TileConfig, split_k_count};
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

/// How one run is configured: the pinned ranges, tile and TF32.
#[derive(Clone, Copy, Debug)]
struct Run {
    ranges: usize,
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
    let up = |v: &[f64]| {
        dev.upload(&v.iter().map(|&x| I::from_f64(x)).collect::<Vec<I>>())
            .unwrap()
    };
    let (a, b) = (up(&c.a), up(&c.b));
    let mut out = dev
        .upload(&c.c.iter().map(|&x| O::from_f64(x)).collect::<Vec<O>>())
        .unwrap();
    let mut gemm = Gemm::new(c.m, c.n, c.k)
        .trans_a(c.ta)
        .trans_b(c.tb)
        .alpha(I::Scalar::from_f64(c.alpha))
        .beta(I::Scalar::from_f64(c.beta))
        .lda(c.lda)
        .ldb(c.ldb)
        .ldc(c.ldc)
        .tf32(run.tf32)
        .split_k(run.ranges);
    if let Some(tile) = run.tile {
        gemm = gemm.tile(tile);
    }
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
                    ranges: 3,
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
                ranges: 3,
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
            ranges: 2,
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
        ranges: 5,
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
    // 2 × 64 = 128 blocks of 64 × 64 on 132 SMs: 3 ranges (384 blocks).
    assert_eq!(skinny.split_k_for::<f16, f32>(&h100).unwrap(), 3);
    // f64 on sm_90: the 128 × 64 DMMA.16x8x16 tile, 1 × 64 = 64 blocks: 5 ranges.
    let skinny_f64 = Gemm::<f64>::new(128, 4096, 4096);
    assert_eq!(skinny_f64.split_k_for::<f64, f64>(&h100).unwrap(), 5);
    assert_eq!(split_k_count(64, 4096, 1, 132), 5);
    assert_eq!(split_k_count(128, 4096, 1, 132), 3);
    // 128 blocks fill an A100's 108 SMs.
    assert_eq!(skinny.split_k_for::<f16, f32>(&a100).unwrap(), 1);
    // Pinned large tile: 32 blocks, 9 ranges wanted, 8 allowed (k / 512).
    let large = skinny.tile(Large);
    assert_eq!(large.split_k_for::<bf16, bf16>(&h100).unwrap(), 8);
    for gemm in [
        Gemm::new(1024, 1024, 4096), // 256 blocks
        skinny.batch(2),             // a batch
        Gemm::new(128, 4096, 1000),  // k under 2 · 512
        skinny.alpha(0.0),           // C ← beta·C
        skinny.split_k(1),           // off
    ] {
        assert_eq!(gemm.split_k_for::<f16, f32>(&h100).unwrap(), 1, "{gemm:?}");
    }
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
/// (`128 × 1000 × 2048`) and a pinned uneven split.
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
        let auto = Run {
            ranges: Gemm::<f32>::new(128, 1000, 2048)
                .split_k_for::<f16, f32>(&gpu)
                .unwrap(),
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
            ranges: 3,
            tile: Some(Small),
            tf32: false,
        };
        check::<f16, f16>(&gpu, &uneven, run);
        check::<f32, f32>(&gpu, &uneven, Run { tf32: true, ..run });
    }
}
