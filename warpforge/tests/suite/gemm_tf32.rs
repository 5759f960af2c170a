//! `warpforge::gemm` with TF32 tensor cores (`Gemm::tf32`): f32 `A` and `B`
//! rounded to tf32, `mma.sync.m16n8k8` with f32 accumulation, f32 `C`.
//!
//! Exact cases: operands are small integers (tf32 holds them exactly), so
//! the rounding changes nothing, every partial sum is an integer below 2²⁴
//! (exact in any order) and the result must equal the f64 reference bit for
//! bit, on every transpose, both tile configurations, ragged shapes, leading
//! dimensions past the row length (odd ones too: guarded loads), `alpha`,
//! `beta` including 0 and a NaN-filled `C` with `beta = 0`.
//!
//! Rounding: random f32 operands with all 24 bits of mantissa; the reference
//! rounds each to tf32 with its own model (nearest multiple of the tf32 ulp,
//! ties away from zero, in f64) and accumulates in f64: the result must be
//! within the f32 accumulation bound of it, and (the property TF32 is about)
//! farther than that bound from the unrounded f32 product somewhere.

use crate::common;

use common::gemm::{Case, TRANSPOSES, case};
use half::f16;
use proptest::prelude::*;
use warpforge::gemm::{Gemm, Tf32Rounding, TileConfig};
use warpforge::{Arch, Device, Error, Kernel};
use warpforge_kernels::gemm::tensor::{
    self as tc, TC_TILE, TC_TILE_LARGE, TF32_TILE, TF32_TILE_LARGE,
};

use TileConfig::{Large, Small};

/// `x` rounded to tf32 (10 fraction bits: nearest, ties away from zero), by
/// arithmetic in f64, independent of the library's bit manipulation.
fn tf32(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    // The ulp of a tf32 in x's binade (x is an f32: normal here, |x| ≥ 2⁻¹²⁶).
    let ulp = 2f64.powi(x.abs().log2().floor() as i32 - 10);
    (x / ulp).round() * ulp
}

/// Integers in `[-4, 4]`: exact in tf32; sums of up to 140 products exact in f32.
fn small_int(bits: u64) -> f64 {
    (bits % 9) as f64 - 4.0
}

/// An f32 in `[-1, 1]` with a full 24-bit mantissa (rarely a tf32).
fn float(bits: u64) -> f64 {
    f64::from((((bits >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0) as f32)
}

/// `(d, Σ|a·b|)` per element of `C` (padding: its value, 0) in f64, each
/// operand first passed through `round`: `alpha·Σ a·b`, plus `beta·c` unless
/// `beta = 0` (C not read).
fn reference(c: &Case, round: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
    let mut d: Vec<(f64, f64)> = c.c.iter().map(|&x| (x, 0.0)).collect();
    for i in 0..c.m {
        for j in 0..c.n {
            let (mut acc, mut mag) = (0.0f64, 0.0f64);
            if c.alpha != 0.0 {
                for p in 0..c.k {
                    let prod = round(c.a_at(i, p)) * round(c.b_at(p, j));
                    acc += prod;
                    mag += prod.abs();
                }
            }
            let e = &mut d[i * c.ldc + j];
            let prod = c.alpha * acc;
            e.0 = if c.beta == 0.0 {
                prod
            } else {
                c.beta * e.0 + prod
            };
            e.1 = c.alpha.abs() * mag;
        }
    }
    d
}

/// Which TF32 kernels a case runs on.
#[derive(Clone, Copy, Debug)]
enum Path {
    /// The `mma.sync` kernels of a pinned tile.
    Tile(TileConfig),
    /// The Hopper kernel (`wgmma(true)`, after the tf32 K-major copies).
    Wgmma,
    /// The Hopper kernel, its operands truncated
    /// (`Tf32Rounding::Truncate`).
    WgmmaTruncate,
}

impl From<TileConfig> for Path {
    fn from(tile: TileConfig) -> Path {
        Path::Tile(tile)
    }
}

/// The GEMM of a case, TF32, on `path`.
fn gemm_of(c: &Case, path: Path) -> Gemm<f32> {
    let gemm = Gemm::new(c.m, c.n, c.k)
        .trans_a(c.ta)
        .trans_b(c.tb)
        .alpha(c.alpha as f32)
        .beta(c.beta as f32)
        .lda(c.lda)
        .ldb(c.ldb)
        .ldc(c.ldc)
        .tf32(true);
    match path {
        Path::Tile(tile) => gemm.tile(tile),
        Path::Wgmma => gemm.wgmma(true),
        Path::WgmmaTruncate => gemm.tf32_rounding(Tf32Rounding::Truncate),
    }
}

/// Runs the case with TF32 on `dev` on `path`; `C` afterwards as f64.
fn run(c: &Case, dev: &Device, path: impl Into<Path>) -> Vec<f64> {
    let up = |v: &[f64]| {
        dev.upload(&v.iter().map(|&x| x as f32).collect::<Vec<f32>>())
            .unwrap()
    };
    let (a, b) = (up(&c.a), up(&c.b));
    let mut out = up(&c.c);
    gemm_of(c, path.into()).run(dev, &a, &b, &mut out).unwrap();
    out.to_host().unwrap().into_iter().map(f64::from).collect()
}

/// Runs an integer case and compares every element of `C` (padding too)
/// with the reference bit for bit (NaN matching NaN).
fn check_exact(c: &Case, dev: &Device, tile: impl Into<Path>) {
    let tile = tile.into();
    let want = reference(c, |x| x);
    let got = run(c, dev, tile);
    assert_eq!(got.len(), want.len());
    for (e, (&g, &(w, _))) in got.iter().zip(&want).enumerate() {
        let w = f64::from(w as f32);
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "tf32 ({tile:?} tile): C[{e}] (row {}, col {}) = {g}, expected {w}: {}",
            e / c.ldc.max(1),
            e % c.ldc.max(1),
            c.describe()
        );
    }
}

/// A dimension: mostly edge values (0, 1, primes, the tiles' sizes ± 1 and
/// the k-step's), sometimes any up to 140.
fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => prop::sample::select(vec![
            0usize, 1, 2, 3, 5, 8, 13, 15, 16, 17, 33, 47, 63, 64, 65, 127, 128, 129
        ]),
        1 => 0usize..=140,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random shapes, transposes, pads, factors and tile configuration on
    /// integer operands: the exact reference, bit for bit.
    #[test]
    fn tf32_gemm_matches_the_exact_reference(
        m in dim(),
        n in dim(),
        k in dim(),
        trans in prop::sample::select(TRANSPOSES.to_vec()),
        pad in prop_oneof![2 => Just(0usize), 1 => 1usize..10],
        alpha in prop::sample::select(vec![1.0, -1.0, 2.0, 0.5, 0.0]),
        beta in prop::sample::select(vec![0.0, 1.0, -2.0, 0.25]),
        nan_c in any::<bool>(),
        large in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let fill = (nan_c && beta == 0.0).then_some(f64::NAN);
        let c = case((m, n, k), trans, pad, alpha, beta, fill, seed, small_int);
        check_exact(&c, &Device::emulator(), if large { Large } else { Small });
    }
}

/// Every one of the 8 TF32 kernels on shapes ragged in every dimension of
/// its tile (k = 77 and 173: 16-deep k-steps with a remainder, through the
/// 3- and 4-stage rings several times), with aligned and odd leading
/// dimensions.
#[test]
fn every_tf32_kernel_on_a_ragged_shape() {
    let dev = Device::emulator();
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        for pad in [0, 3] {
            let seed = (t * 16 + pad) as u64;
            let small = case((67, 70, 77), trans, pad, -1.0, 0.5, None, seed, small_int);
            check_exact(&small, &dev, Small);
            let large = case(
                (131, 139, 173),
                trans,
                pad,
                1.0,
                -1.0,
                None,
                seed,
                small_int,
            );
            check_exact(&large, &dev, Large);
        }
    }
}

/// `beta = 0` never reads C (NaN there does not leak); `alpha = 0` and
/// `k = 0` give `beta·C`; empty shapes do nothing.
#[test]
fn tf32_edge_cases() {
    let dev = Device::emulator();
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        for tile in [Small, Large] {
            let nan = case(
                (9, 70, 33),
                trans,
                1,
                2.0,
                0.0,
                Some(f64::NAN),
                t as u64,
                small_int,
            );
            check_exact(&nan, &dev, tile);
            assert!(run(&nan, &dev, tile).iter().all(|x| !x.is_nan()));
            for (shape, alpha) in [
                ((5, 9, 40), 0.0),
                ((5, 9, 0), 1.0),
                ((0, 9, 4), 1.0),
                ((5, 0, 4), 1.0),
                ((1, 1, 1), 1.0),
                ((64, 64, 48), 1.0), // exact tiles: every chunk by cp.async
            ] {
                check_exact(
                    &case(shape, trans, 0, alpha, -0.5, None, t as u64, small_int),
                    &dev,
                    tile,
                );
            }
        }
    }
}

/// Random f32 operands: within the f32 accumulation bound of the reference
/// on tf32-rounded inputs (`k` products, exact in f32, added in any order:
/// `2·k·u₃₂·Σ|a·b|`, plus the epilogue's two roundings), and beyond that
/// bound from the reference on the unrounded inputs for some element (the
/// inputs were rounded: this is TF32, not f32 FMA).
#[test]
fn tf32_rounds_each_operand_to_tf32() {
    // The test's model of the rounding, on values the doc names.
    assert_eq!(tf32(1.0 + 1.0 / 2048.0), 1.0 + 1.0 / 1024.0);
    assert_eq!(tf32(-(1.0 + 3.0 / 2048.0)), -(1.0 + 2.0 / 1024.0));
    assert_eq!(tf32(1.0 + 1.0 / 4096.0), 1.0);
    assert_eq!(tf32(0.75 + 1.0 / 8192.0), 0.75);
    assert_eq!(tf32(0.75 + 1.0 / 4096.0), 0.75 + 1.0 / 2048.0); // a tie in [0.5, 1)
    let dev = Device::emulator();
    let u = f32::EPSILON as f64 / 2.0;
    // A ragged shape (every block on the guarded path, rounding each fragment
    // as it loads) and one of whole aligned tiles (every block on the lean
    // path, where each stage is rounded in place as it lands: rows padded to
    // 16 bytes).
    for (shape, pad, lean) in [((33, 40, 100), 1, false), ((128, 128, 64), 4, true)] {
        for (t, &trans) in TRANSPOSES.iter().enumerate() {
            for tile in [Small, Large] {
                let c = case(shape, trans, pad, 1.0, 0.5, None, 70 + t as u64, float);
                let (got, profiles) = dev.profile_memory(|| Ok(run(&c, &dev, tile))).unwrap();
                let path = if lean { "lean" } else { "guarded" };
                assert!(
                    profiles[0].paths.iter().all(|(p, _)| p == path),
                    "tf32 ({tile:?}) {shape:?}: blocks per path {:?}, expected all {path}",
                    profiles[0].paths
                );
                let want = reference(&c, tf32);
                let unrounded = reference(&c, |x| x);
                let mut beyond_f32 = 0;
                for (e, (&g, (&(w, mag), &(f, _)))) in
                    got.iter().zip(want.iter().zip(&unrounded)).enumerate()
                {
                    let bound = (mag + 4.0) * (2.0 * c.k as f64 * u + 2.0 * u) + 1e-30;
                    assert!(
                        (g - w).abs() <= bound,
                        "tf32 ({tile:?}): C[{e}] = {g}, tf32 reference {w}, error {} > {bound}: {}",
                        (g - w).abs(),
                        c.describe()
                    );
                    beyond_f32 += usize::from((g - f).abs() > bound);
                }
                assert!(
                    beyond_f32 > got.len() / 4,
                    "tf32 ({tile:?}): only {beyond_f32} of {} elements differ from f32 \
                 beyond the bound: were the operands rounded?",
                    got.len()
                );
            }
        }
    }
}

/// Names and shared memory come from the TF32 tiles, which are the 16-bit
/// tiles' blocks and warps at half the k-step, in no more bytes (the same
/// for the largest layout, NT, whose rows are all k long); the
/// heuristic picks as for f16; TF32 on any other pair is refused, naming the
/// parameter.
/// The lean path's tf32 k-major fragment loads meet no bank conflict: on
/// the small tile the k-major slices (`A` transposed, `B` not), read by
/// plain 64-bit (`A`, rows paired) and 32-bit (`B`) loads of 4 rows, are
/// padded by 32 bytes so those rows fall 8 banks apart; on the large tile
/// their rows k, k + 4 are interleaved as they are rounded and read by one
/// 128-bit (`A`) or 64-bit (`B`) load a fragment from 8 rows, padded by 16
/// bytes so those fall 4 banks apart. TN has both operands k-major, so every shared load of its k-loop
/// (those fragment loads and the tf32 rounding pass's 16-byte loads along
/// rows of 64 or 128 f32) must be conflict-free; the other transposes run
/// the same layouts exact on the lean path. (With 16-byte padding TN's
/// fragment loads cost 2 wavefronts each: a regression shows here. The
/// k-contiguous slices' rounding pass, 16-byte loads over rows of 16 f32
/// plus 4, does meet conflicts: counted in the memory profile, not here.)
#[test]
fn tf32_lean_fragment_loads_are_free_of_bank_conflicts() {
    let dev = Device::emulator();
    let (m, n, k) = (128, 128, 32);
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 - 2.0).collect();
    let (da, db) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
    for (ta, tb) in TRANSPOSES {
        // op(A)·op(B) in f64 (small integers: exact in tf32 and f32).
        let want: Vec<f32> = (0..m * n)
            .map(|e| {
                let (i, j) = (e / n, e % n);
                (0..k)
                    .map(|p| {
                        let x = if ta { a[p * m + i] } else { a[i * k + p] };
                        let y = if tb { b[j * k + p] } else { b[p * n + j] };
                        f64::from(x) * f64::from(y)
                    })
                    .sum::<f64>() as f32
            })
            .collect();
        for tile in [Small, Large] {
            let mut c = dev.alloc_zeroed::<f32>(m * n).unwrap();
            let gemm = Gemm::new(m, n, k)
                .trans_a(ta)
                .trans_b(tb)
                .tf32(true)
                .tile(tile);
            let ((), profiles) = dev
                .profile_memory(|| gemm.run(&dev, &da, &db, &mut c))
                .unwrap();
            let p = &profiles[0];
            let what = format!("ta {ta}, tb {tb}, {tile:?}");
            assert_eq!(c.to_host().unwrap(), want, "{what}");
            assert!(
                p.paths.iter().all(|(path, _)| path == "lean"),
                "{what}: {:?}",
                p.paths
            );
            assert!(p.shared_load.requests > 0, "{what}");
            assert_eq!(p.ldmatrix.bank_conflicts, 0, "{what}: ldmatrix loads");
            if !(ta && !tb) {
                continue;
            }
            assert_eq!(
                p.shared_load.bank_conflicts,
                0,
                "{what}: shared loads; by line: {:?}",
                p.lines
                    .iter()
                    .filter(|l| l.shared_requests > 0)
                    .map(|l| (l.file, l.line, l.shared_requests, l.wavefronts))
                    .collect::<Vec<_>>()
            );
        }
    }
}

#[test]
fn tf32_kernels_names_tiles_and_refusals() {
    let dev = Device::emulator();
    let t = |x: bool| if x { "t" } else { "n" };
    for (ta, tb) in TRANSPOSES {
        let tr = format!("{}{}", t(ta), t(tb));
        for (config, tile) in [(Small, "64x64x16_s3"), (Large, "128x128x16_s4")] {
            let g = Gemm::<f32>::new(1, 1, 1)
                .trans_a(ta)
                .trans_b(tb)
                .tf32(true)
                .tile(config);
            assert_eq!(
                g.kernel_name_for::<f32, f32>(&dev).unwrap(),
                format!("gemm_tf32_f32_{tr}_{tile}")
            );
            assert_eq!(g.tile_config_for::<f32, f32>(&dev).unwrap(), Some(config));
        }
    }
    for (tf, f16_tile) in [(TF32_TILE, TC_TILE), (TF32_TILE_LARGE, TC_TILE_LARGE)] {
        assert_eq!(
            (tf.m, tf.n, tf.threads(), tf.stages),
            (f16_tile.m, f16_tile.n, f16_tile.threads(), f16_tile.stages)
        );
        assert_eq!(
            (tf.k * 2, tf.elem_bytes, tf.chunk(), tf.mma_k()),
            (f16_tile.k, 4, 4, 8)
        );
        for (ta, tb) in TRANSPOSES {
            assert!(tf.shared_bytes(ta, tb) <= f16_tile.shared_bytes(ta, tb));
        }
        assert_eq!(tf.max_shared_bytes(), f16_tile.max_shared_bytes());
        assert_eq!(
            tf.shared_bytes(false, true),
            f16_tile.shared_bytes(false, true)
        );
    }
    assert_eq!(
        tc::gemm_tf32_f32_nt_128x128x16_s4::SHARED_BYTES,
        tc::gemm_f16_f32_nt_128x128x32_s4::SHARED_BYTES
    );
    // 64 × (16 + 4) for A, 16 × (64 + 8) for B (k-major: 32 bytes of
    // padding, so its plain fragment loads meet no bank conflict): 2432 f32
    // a stage, 3 stages.
    assert_eq!(tc::gemm_tf32_f32_nn_64x64x16_s3::SHARED_BYTES, 2432 * 3 * 4);
    // The heuristic: as for f16 (1024² is half an H100 in large blocks).
    let pick = |m, n| {
        Gemm::<f32>::new(m, n, 64)
            .tf32(true)
            .tile_config_for::<f32, f32>(&dev)
            .unwrap()
    };
    assert_eq!(pick(4096, 4096), Some(Large));
    assert_eq!(pick(1024, 1024), Some(Small));
    // Off by default: f32 stays on the SIMT cores (the warp-tiled tile at
    // this size).
    assert_eq!(
        Gemm::<f32>::new(4096, 4096, 64)
            .kernel_name_for::<f32, f32>(&dev)
            .unwrap(),
        "gemm_f32_nn_128x128x8"
    );
    // Refused on f16 → f32 and on f64, before anything runs.
    let refused = |err: Error| {
        assert!(
            matches!(
                err,
                Error::InvalidParameter {
                    parameter: "tf32",
                    ..
                }
            ),
            "{err}"
        );
    };
    let a = dev.upload(&[f16::ONE; 4]).unwrap();
    let mut c = dev.upload(&[0.0f32; 4]).unwrap();
    refused(
        Gemm::new(2, 2, 2)
            .tf32(true)
            .run(&dev, &a, &a, &mut c)
            .unwrap_err(),
    );
    let a = dev.upload(&[1.0f64; 4]).unwrap();
    let mut c = dev.upload(&[7.0f64; 4]).unwrap();
    refused(
        Gemm::new(2, 2, 2)
            .tf32(true)
            .run(&dev, &a, &a, &mut c)
            .unwrap_err(),
    );
    assert_eq!(c.to_host().unwrap(), [7.0; 4], "a refused GEMM wrote C");
}

// ---------------------------------------------------------------------------
// TF32 on Hopper (`gemm_wgmma_tf32_f32_nt_128x256x32_s4`, after the K-major
// copies `tf32_k_major_{rows,cols}`), on the emulator of sm_90.

/// Every transpose through the Hopper tf32 kernel on shapes ragged in
/// every dimension of its tile (131 × 263, k = 173: six 32-deep stages, the
/// last 13, so the 4-stage ring wraps), with packed and odd leading
/// dimensions (the copies do not need the 16-byte rows a tensor map of the
/// operands would), a 1 × 1 × 1 one, and beta = 0 over a NaN-filled C:
/// the exact reference, bit for bit.
#[test]
fn wgmma_tf32_matches_the_exact_reference_on_every_transpose() {
    let dev = Device::emulator_for(Arch::Sm90);
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        for pad in [0, 3] {
            let seed = (t * 16 + pad) as u64 + 500;
            let c = case(
                (131, 263, 173),
                trans,
                pad,
                -1.0,
                0.5,
                None,
                seed,
                small_int,
            );
            check_exact(&c, &dev, Path::Wgmma);
        }
        let nan = Some(f64::NAN);
        let c = case(
            (70, 9, 40),
            trans,
            1,
            2.0,
            0.0,
            nan,
            t as u64 + 550,
            small_int,
        );
        check_exact(&c, &dev, Path::Wgmma);
        assert!(run(&c, &dev, Path::Wgmma).iter().all(|x| !x.is_nan()));
        let c = case((1, 1, 1), trans, 0, 1.0, 1.0, None, t as u64, small_int);
        check_exact(&c, &dev, Path::Wgmma);
    }
}

/// A batch of 3 with B broadcast (stride 0) through the Hopper tf32
/// kernel: each batch exactly its own product.
#[test]
fn wgmma_tf32_batches_are_their_own_products() {
    let dev = Device::emulator_for(Arch::Sm90);
    let (m, n, k, count) = (40, 300, 70, 3);
    let a: Vec<f32> = (0..count * m * k).map(|i| (i % 9) as f32 - 4.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 - 3.0).collect();
    let (da, db) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
    let mut dc = dev.alloc_zeroed::<f32>(count * m * n).unwrap();
    Gemm::<f32>::new(m, n, k)
        .batch(count)
        .stride_b(0)
        .tf32(true)
        .wgmma(true)
        .run(&dev, &da, &db, &mut dc)
        .unwrap();
    let got = dc.to_host().unwrap();
    for z in 0..count {
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k)
                    .map(|p| f64::from(a[z * m * k + i * k + p]) * f64::from(b[p * n + j]))
                    .sum();
                assert_eq!(
                    f64::from(got[z * m * n + i * n + j]),
                    want,
                    "batch {z}, ({i}, {j})"
                );
            }
        }
    }
}

/// On random f32 operands (full 24-bit mantissas, so the rounding matters)
/// the Hopper tf32 path gives the `mma.sync` TF32 kernels' bits exactly:
/// both round each operand to tf32 the same way (nearest, ties away) before
/// the tensor cores read it, and both add the k-steps' products 8 at a time
/// in k order (one `wgmma` k8 or one `mma` k8), rounding once a step. The
/// Hopper kernel reads tf32 as 19 bits (the low 13 ignored): without the
/// copies' rounding it would truncate instead and differ.
#[test]
fn wgmma_tf32_rounds_as_the_mma_sync_kernels_do() {
    let dev = Device::emulator_for(Arch::Sm90);
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        let c = case(
            (70, 300, 100),
            trans,
            1,
            1.0,
            0.5,
            None,
            t as u64 + 600,
            float,
        );
        let hopper = run(&c, &dev, Path::Wgmma);
        let sync = run(&c, &dev, Large);
        for (e, (h, s)) in hopper.iter().zip(&sync).enumerate() {
            assert_eq!(
                h.to_bits(),
                s.to_bits(),
                "C[{e}]: Hopper {h}, mma.sync {s}: {}",
                c.describe()
            );
        }
        // Within the f32 accumulation bound of the reference on rounded
        // operands everywhere, beyond it from the unrounded one mostly (as
        // `tf32_rounds_each_operand_to_tf32` has it).
        let u = f32::EPSILON as f64 / 2.0;
        let bound = |mag: f64| (mag + 4.0) * (2.0 * c.k as f64 * u + 2.0 * u) + 1e-30;
        let within = |r: &[(f64, f64)]| {
            hopper
                .iter()
                .zip(r)
                .filter(|(g, (w, mag))| (*g - w).abs() <= bound(*mag))
                .count()
        };
        let (want, unrounded) = (reference(&c, tf32), reference(&c, |x| x));
        assert_eq!(within(&want), hopper.len(), "{}", c.describe());
        assert!(
            within(&unrounded) < hopper.len() * 3 / 4,
            "{}",
            c.describe()
        );
    }
}

/// `x` as the tensor cores read an f32 given as tf32: its 13 low fraction
/// bits dropped.
fn truncated(x: f64) -> f64 {
    f64::from(f32::from_bits((x as f32).to_bits() & !0x1fff))
}

/// `Tf32Rounding::Truncate` on random f32 operands (full mantissas): bit
/// for bit the rounded path's result on the operands truncated on the host
/// (a truncated f32 is a tf32, which rounding leaves as it is), whether
/// the kernel reads an operand in place (NT with rows on 16 bytes: pad 0
/// and 4, k = 100) or copies it as it is (the other transposes, and the
/// odd pitch of pad 1); and not the rounded path's result on the operands
/// themselves, so the mode is what changed it.
#[test]
fn wgmma_tf32_truncation_drops_the_low_bits_in_place_and_in_the_copies() {
    let dev = Device::emulator_for(Arch::Sm90);
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        for pad in [0, 1, 4] {
            let c = case(
                (70, 140, 100),
                trans,
                pad,
                1.0,
                0.5,
                None,
                (t * 8 + pad) as u64 + 700,
                float,
            );
            let got = run(&c, &dev, Path::WgmmaTruncate);
            let on_truncated = Case {
                a: c.a.iter().map(|&x| truncated(x)).collect(),
                b: c.b.iter().map(|&x| truncated(x)).collect(),
                ..c.clone()
            };
            let want = run(&on_truncated, &dev, Path::Wgmma);
            for (e, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.to_bits(), w.to_bits(), "C[{e}]: {}", c.describe());
            }
            let rounded = run(&c, &dev, Path::Wgmma);
            let differ = got.iter().zip(&rounded).filter(|(g, r)| g != r).count();
            assert!(differ > got.len() / 2, "{differ}: {}", c.describe());
        }
    }
}

/// What truncation launches: the kernel reads each K-major operand whose
/// rows start on 16 bytes where it is (NT: no copy, no allocation; one
/// GEMM launch), and copies the others as they are (one copy and one
/// allocation each); a pitch off 16 bytes is copied too. Where the Hopper
/// kernel cannot run it is refused naming `tf32_rounding`, and C is left
/// as it was: an sm_80, `.wgmma(false)`, a pinned tile.
#[test]
fn wgmma_tf32_truncation_reads_k_major_operands_in_place_and_is_refused_elsewhere() {
    let h100 = Device::emulator_for(Arch::Sm90);
    let (m, n, k) = (33, 40, 48);
    let (da, db) = (
        h100.upload(&vec![1.0f32; m * (k + 1)]).unwrap(),
        h100.upload(&vec![1.0f32; (k + 1) * n.max(k + 1)]).unwrap(),
    );
    let mut dc = h100.alloc_zeroed::<f32>(m * n).unwrap();
    for (ta, tb) in TRANSPOSES {
        for pitch in [k, k + 1] {
            let gemm = Gemm::<f32>::new(m, n, k)
                .trans_a(ta)
                .trans_b(tb)
                .lda(if ta { m } else { pitch })
                .ldb(if tb { pitch } else { n })
                .tf32_rounding(Tf32Rounding::Truncate);
            let ((), work) = h100
                .work_done_by(|| gemm.run(&h100, &da, &db, &mut dc))
                .unwrap();
            // A is K-major unless transposed, B when transposed; in place
            // where its pitch is whole 16 bytes.
            let copies = u64::from(ta || pitch % 4 != 0) + u64::from(!tb || pitch % 4 != 0);
            assert_eq!(
                work.total_launches(),
                1 + copies,
                "{ta} {tb} {pitch}: {work:?}"
            );
            // One narrow tile (the 132 SMs would leave a wide one's half idle).
            assert_eq!(
                work.launches.get("gemm_wgmma_tf32_f32_nt_128x128x32_s4"),
                Some(&1)
            );
            assert_eq!((work.allocations, work.memsets), (copies, 0));
            assert!(dc.to_host().unwrap().iter().all(|&x| x == k as f32));
        }
    }
    let a100 = Device::emulator_for(Arch::Sm80);
    let truncating = Gemm::<f32>::new(m, n, k).tf32_rounding(Tf32Rounding::Truncate);
    let mut c100 = a100.upload(&vec![7.0f32; m * n]).unwrap();
    let (a1, b1) = (
        a100.upload(&vec![1.0f32; m * k]).unwrap(),
        a100.upload(&vec![1.0f32; k * n]).unwrap(),
    );
    let refused = |e: Error| {
        assert!(
            matches!(
                e,
                Error::InvalidParameter {
                    parameter: "tf32_rounding",
                    ..
                }
            ),
            "{e}"
        )
    };
    refused(truncating.run(&a100, &a1, &b1, &mut c100).unwrap_err());
    assert!(c100.to_host().unwrap().iter().all(|&x| x == 7.0));
    let mut c90 = h100.upload(&vec![7.0f32; m * n]).unwrap();
    let (a9, b9) = (
        h100.upload(&vec![1.0f32; m * k]).unwrap(),
        h100.upload(&vec![1.0f32; k * n]).unwrap(),
    );
    for pinned in [truncating.wgmma(false), truncating.tile(Large)] {
        refused(pinned.run(&h100, &a9, &b9, &mut c90).unwrap_err());
        refused(pinned.kernel_name_for::<f32, f32>(&h100).unwrap_err());
    }
    assert!(c90.to_host().unwrap().iter().all(|&x| x == 7.0));
}

/// Where it runs and what it launches: on sm_90 TF32 names the Hopper
/// kernel for every transpose (pinned, and by default where the GPU
/// fills), and a call is the two K-major copies (one per operand, by their
/// layout), then the GEMM: three launches, two allocations, no memset; on
/// sm_80, or with a pinned tile, the `mma.sync` kernels; the copies' and
/// the GEMM's shared memory fit an H100.
#[test]
fn wgmma_tf32_names_launches_and_fallbacks() {
    let h100 = Device::emulator_for(Arch::Sm90);
    let a100 = Device::emulator_for(Arch::Sm80);
    let name = "gemm_wgmma_tf32_f32_nt_128x256x32_s4";
    // The narrow kernel: grids whose wide tiles would leave half the SMs idle.
    let narrow = "gemm_wgmma_tf32_f32_nt_128x128x32_s4";
    for (ta, tb) in TRANSPOSES {
        let gemm = Gemm::<f32>::new(4096, 4096, 256)
            .trans_a(ta)
            .trans_b(tb)
            .tf32(true);
        assert_eq!(gemm.kernel_name_for::<f32, f32>(&h100).unwrap(), name);
        assert_ne!(gemm.kernel_name_for::<f32, f32>(&a100).unwrap(), name);
        let pinned = gemm.tile(Large).kernel_name_for::<f32, f32>(&h100).unwrap();
        assert!(pinned.starts_with("gemm_tf32_f32_"), "{pinned}");
        assert!(gemm.wgmma(true).kernel_name_for::<f32, f32>(&a100).is_err());
        // Small grids stay on mma.sync unless pinned.
        let small = Gemm::<f32>::new(64, 64, 64)
            .trans_a(ta)
            .trans_b(tb)
            .tf32(true);
        assert_ne!(small.kernel_name_for::<f32, f32>(&h100).unwrap(), narrow);
        assert_eq!(
            small
                .wgmma(true)
                .kernel_name_for::<f32, f32>(&h100)
                .unwrap(),
            narrow
        );
        let (m, n, k) = (33, 40, 50);
        let (da, db) = (
            h100.upload(&vec![1.0f32; m * k]).unwrap(),
            h100.upload(&vec![1.0f32; k * n]).unwrap(),
        );
        let mut dc = h100.alloc_zeroed::<f32>(m * n).unwrap();
        let ((), work) = h100
            .work_done_by(|| {
                Gemm::<f32>::new(m, n, k)
                    .trans_a(ta)
                    .trans_b(tb)
                    .tf32(true)
                    .wgmma(true)
                    .run(&h100, &da, &db, &mut dc)
            })
            .unwrap();
        let copy = |transposed: bool| {
            if transposed {
                "tf32_k_major_cols"
            } else {
                "tf32_k_major_rows"
            }
        };
        let mut launches: Vec<(&str, usize)> = work
            .launches
            .iter()
            .map(|(&k, &v)| (k, v as usize))
            .collect();
        launches.sort();
        let mut want = vec![(narrow, 1), (copy(ta), 1)];
        if copy(!tb) == copy(ta) {
            want[1].1 = 2;
        } else {
            want.push((copy(!tb), 1));
        }
        want.sort();
        assert_eq!(launches, want, "trans {ta} {tb}");
        assert_eq!((work.allocations, work.memsets), (2, 0));
        assert!(dc.to_host().unwrap().iter().all(|&x| x == k as f32));
    }
    assert!(
        warpforge_kernels_hopper::gemm::gemm_wgmma_tf32_f32_nt_128x256x32_s4::SHARED_BYTES
            <= h100.limits().max_shared_per_block_optin as usize
    );
}

/// On a GPU: the exact property on every transpose and both tiles, ragged
/// large shapes among them, and the rounding property.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_tf32_gemm_matches_the_references() {
    let gpu = Device::gpu(0).expect("this test needs a CUDA GPU");
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        for (shape, pad) in [
            ((67, 70, 77), 3),
            ((131, 139, 173), 0),
            ((1000, 1030, 1100), 1),
            ((2048, 2048, 96), 0),
        ] {
            for tile in [Small, Large] {
                let c = case(shape, trans, pad, 1.0, -0.5, None, t as u64, small_int);
                check_exact(&c, &gpu, tile);
            }
        }
        let c = case(
            (256, 256, 512),
            trans,
            0,
            1.0,
            0.0,
            Some(f64::NAN),
            t as u64,
            float,
        );
        let u = f32::EPSILON as f64 / 2.0;
        for tile in [Small, Large] {
            let got = run(&c, &gpu, tile);
            for (e, (&g, &(w, mag))) in got.iter().zip(&reference(&c, tf32)).enumerate() {
                let bound = (mag + 4.0) * (2.0 * c.k as f64 * u + 2.0 * u);
                assert!(
                    (g - w).abs() <= bound,
                    "C[{e}] = {g}, tf32 reference {w}: {}",
                    c.describe()
                );
            }
        }
    }
}
