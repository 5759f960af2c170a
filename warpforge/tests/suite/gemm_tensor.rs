//! `warpforge::gemm` on the tensor cores (f16/bf16 inputs, f32 accumulation,
//! output f32, f16 or bf16), on the emulator, against a CPU reference
//! computed in f64: every input × output pair, every transpose combination,
//! shapes around every tile edge (0, 1, primes, non-multiples of 64 and 32),
//! leading dimensions past the row length (odd ones too, so rows start at
//! addresses that are not 16-byte aligned and the guarded loads run),
//! `alpha`/`beta` including 0, and `beta = 0` with a NaN-filled `C`.
//!
//! Exact cases: operands are small integers (exact in f16 and bf16),
//! `alpha`/`beta` small dyadic numbers and `|k| ≤ 100`, so every partial sum
//! of the f32 accumulation is an integer below 2²⁴ — exact in any order — and
//! the epilogue's `alpha·acc`, `fma(beta, c, ·)` are exact in f32. An f32
//! result is compared bit for bit with the f64 reference; an f16/bf16 one
//! with the reference rounded once to that type (the kernel rounds the exact
//! f32 value once, so that is exact too). `C`'s padding must be untouched.
//! Then one test with random floats, within a bound derived from `k`.
//!
//! Every tile configuration (`TileConfig::Small`, `Large`, `Wide`) runs the
//! same properties, pinned with `Gemm::tile`; the heuristic that picks
//! between them is tested at its boundaries.

use crate::common;

use common::gemm::{Case, PADDING, TRANSPOSES, case, case_with_lds, wgmma_lds};
use half::{bf16, f16};
use proptest::prelude::*;
use warpforge::gemm::{Gemm, GemmTypes, TileConfig};
use warpforge::{Arch, Device, Element, Error, Kernel};
use warpforge_kernels::gemm::tensor::{self as tc, TC_TILE, TC_TILE_LARGE, TC_TILE_WIDE};

use TileConfig::{Large, Small, Wide};

/// Input element types, from f64 (exact on the values used).
trait In:
    GemmTypes<f32, Scalar = f32> + GemmTypes<f16, Scalar = f32> + GemmTypes<bf16, Scalar = f32>
{
    const NAME: &'static str;
    fn from_f64(x: f64) -> Self;
}

impl In for f16 {
    const NAME: &'static str = "f16";
    fn from_f64(x: f64) -> Self {
        f16::from_f64(x)
    }
}

impl In for bf16 {
    const NAME: &'static str = "bf16";
    fn from_f64(x: f64) -> Self {
        bf16::from_f64(x)
    }
}

/// Output element types: rounding from f64 (nearest, ties to even) and back.
trait OutTy: Element {
    const NAME: &'static str;
    /// 2⁻ᵖ: the unit roundoff of the type.
    const UNIT_ROUNDOFF: f64;
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
}

impl OutTy for f32 {
    const NAME: &'static str = "f32";
    const UNIT_ROUNDOFF: f64 = f32::EPSILON as f64 / 2.0;
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

impl OutTy for f16 {
    const NAME: &'static str = "f16";
    const UNIT_ROUNDOFF: f64 = 1.0 / 2048.0;
    fn from_f64(x: f64) -> Self {
        f16::from_f64(x)
    }
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
}

impl OutTy for bf16 {
    const NAME: &'static str = "bf16";
    const UNIT_ROUNDOFF: f64 = 1.0 / 256.0;
    fn from_f64(x: f64) -> Self {
        bf16::from_f64(x)
    }
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
}

impl Case {
    /// `(d, Σ|a·b|)` per element of `C` (padding: its value, 0), in f64:
    /// `alpha·Σ a·b`, plus `beta·c` unless `beta = 0` (C not read).
    fn reference(&self) -> Vec<(f64, f64)> {
        let mut d: Vec<(f64, f64)> = self.c.iter().map(|&c| (c, 0.0)).collect();
        for i in 0..self.m {
            for j in 0..self.n {
                let (mut acc, mut mag) = (0.0f64, 0.0f64);
                if self.alpha != 0.0 {
                    for p in 0..self.k {
                        let prod = self.a_at(i, p) * self.b_at(p, j);
                        acc += prod;
                        mag += prod.abs();
                    }
                }
                let e = &mut d[i * self.ldc + j];
                let prod = self.alpha * acc;
                e.0 = if self.beta == 0.0 {
                    prod
                } else {
                    self.beta * e.0 + prod
                };
                e.1 = self.alpha.abs() * mag;
            }
        }
        d
    }

    /// Runs the case with `A`, `B` of `I` and `C` of `O` on `dev` with the
    /// tile configuration `tile` (`Path::Wgmma`: the Hopper kernels, pinned
    /// with `Gemm::wgmma`); `C` afterwards as f64.
    fn run_tensor<I, O>(&self, dev: &Device, tile: impl Into<Path>) -> Vec<f64>
    where
        I: In + GemmTypes<O, Scalar = f32>,
        O: OutTy,
    {
        let up = |v: &[f64]| {
            dev.upload(&v.iter().map(|&x| I::from_f64(x)).collect::<Vec<I>>())
                .unwrap()
        };
        let (a, b) = (up(&self.a), up(&self.b));
        let mut c = dev
            .upload(&self.c.iter().map(|&x| O::from_f64(x)).collect::<Vec<O>>())
            .unwrap();
        let gemm = Gemm::new(self.m, self.n, self.k)
            .trans_a(self.ta)
            .trans_b(self.tb)
            .alpha(self.alpha as f32)
            .beta(self.beta as f32)
            .lda(self.lda)
            .ldb(self.ldb)
            .ldc(self.ldc);
        let gemm = match tile.into() {
            Path::Tile(tile) => gemm.tile(tile),
            Path::Wgmma => gemm.wgmma(true),
            Path::WgmmaOn(sms) => gemm.wgmma(true).sm_limit(sms),
        };
        gemm.run(dev, &a, &b, &mut c).unwrap();
        c.to_host().unwrap().into_iter().map(O::to_f64).collect()
    }

    /// Runs the case as `I → O` with `tile` and compares every element of
    /// `C` with the reference rounded once to `O`, bit for bit (NaN matching
    /// NaN).
    fn check_tensor<I, O>(&self, dev: &Device, tile: impl Into<Path>)
    where
        I: In + GemmTypes<O, Scalar = f32>,
        O: OutTy,
    {
        let tile = tile.into();
        let want = self.reference();
        let got = self.run_tensor::<I, O>(dev, tile);
        assert_eq!(got.len(), want.len());
        for (e, (&g, &(w, _))) in got.iter().zip(&want).enumerate() {
            let w = O::from_f64(w).to_f64();
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "{} → {} ({tile:?}): C[{e}] (row {}, col {}) = {g}, expected {w}: {}",
                I::NAME,
                O::NAME,
                e / self.ldc.max(1),
                e % self.ldc.max(1),
                self.describe()
            );
        }
    }

    /// [`check`](Self::check) for the input type and every output type with
    /// the small tile, and with the large tile for the outputs that have it
    /// (f32 and the input type).
    fn check_outputs<I: In>(&self, dev: &Device) {
        self.check_tensor::<I, f32>(dev, Small);
        self.check_tensor::<I, f16>(dev, Small);
        self.check_tensor::<I, bf16>(dev, Small);
        self.check_tensor::<I, f32>(dev, Large);
        if I::NAME == "f16" {
            self.check_tensor::<I, f16>(dev, Large);
        } else {
            self.check_tensor::<I, bf16>(dev, Large);
        }
    }
}

/// Which kernels a case runs: a pinned `mma.sync` tile configuration, or
/// the Hopper (`wgmma`) kernels (persistent: one block per SM of the
/// device, or at most `n` with `WgmmaOn(n)`, `Gemm::sm_limit`).
#[derive(Clone, Copy, Debug)]
enum Path {
    Tile(TileConfig),
    Wgmma,
    WgmmaOn(u32),
}

impl From<TileConfig> for Path {
    fn from(tile: TileConfig) -> Path {
        Path::Tile(tile)
    }
}

/// Integers in `[-4, 4]`: exact in f16 and bf16, products and sums of up to
/// 100 of them exact in f32.
fn small_int(bits: u64) -> f64 {
    (bits % 9) as f64 - 4.0
}

/// A dimension: mostly edge values (0, 1, primes, both tiles' sizes ± 1),
/// sometimes any up to 140. Small: the emulator runs 128 or 256 threads per
/// block tile.
fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => prop::sample::select(vec![
            0usize, 1, 2, 7, 8, 13, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129
        ]),
        1 => 0usize..=140,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Random shapes, transposes, pads, factors, pair (input, output) and
    /// tile configuration (the large and wide ones for the pairs that have
    /// them).
    #[test]
    fn tensor_gemm_matches_the_exact_reference(
        m in dim(),
        n in dim(),
        k in dim(),
        trans in prop::sample::select(TRANSPOSES.to_vec()),
        pad in prop_oneof![2 => Just(0usize), 1 => 1usize..10],
        alpha in prop::sample::select(vec![1.0, -1.0, 2.0, 0.5, 0.0]),
        beta in prop::sample::select(vec![0.0, 1.0, -2.0, 0.25]),
        nan_c in any::<bool>(),
        pair in 0usize..6,
        tile in prop::sample::select(vec![Small, Large, Wide]),
        seed in any::<u64>(),
    ) {
        // A NaN-filled C only with beta = 0, where it must not be read.
        let fill = (nan_c && beta == 0.0).then_some(f64::NAN);
        let c = case((m, n, k), trans, pad, alpha, beta, fill, seed, small_int);
        let dev = Device::emulator();
        // The mixed f16 → bf16 and bf16 → f16 pairs have the small tile only.
        let tile = if pair == 2 || pair == 4 { Small } else { tile };
        match pair {
            0 => c.check_tensor::<f16, f32>(&dev, tile),
            1 => c.check_tensor::<f16, f16>(&dev, tile),
            2 => c.check_tensor::<f16, bf16>(&dev, tile),
            3 => c.check_tensor::<bf16, f32>(&dev, tile),
            4 => c.check_tensor::<bf16, f16>(&dev, tile),
            _ => c.check_tensor::<bf16, bf16>(&dev, tile),
        }
    }
}

/// Every one of the 24 small-tile kernels on a ragged shape (a partial tile
/// in m, n and k, two k-steps plus a remainder so the pipeline wraps), with
/// aligned and odd leading dimensions; the 16 large-tile kernels on it too
/// (one block, k-steps fewer than the stages).
#[test]
fn every_kernel_on_a_ragged_shape() {
    let dev = Device::emulator();
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        for pad in [0, 8, 3] {
            let seed = (t * 16 + pad) as u64;
            let c = case((67, 70, 77), trans, pad, -1.0, 0.5, None, seed, small_int);
            c.check_outputs::<f16>(&dev);
            c.check_outputs::<bf16>(&dev);
        }
    }
}

/// Every one of `tile`'s 16 kernels (f16 → f32/f16, bf16 → f32/bf16, every
/// transpose) on `shape` with `alpha`, `beta`, aligned and odd leading
/// dimensions, exact; seeds from `seed`.
fn every_kernel_of_the_tile(
    tile: TileConfig,
    shape: (usize, usize, usize),
    (alpha, beta): (f64, f64),
    seed: u64,
) {
    let dev = Device::emulator();
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        for pad in [0, 3] {
            let seed = (t * 16 + pad) as u64 + seed;
            let c = case(shape, trans, pad, alpha, beta, None, seed, small_int);
            c.check_tensor::<f16, f32>(&dev, tile);
            c.check_tensor::<f16, f16>(&dev, tile);
            c.check_tensor::<bf16, f32>(&dev, tile);
            c.check_tensor::<bf16, bf16>(&dev, tile);
        }
    }
}

/// Every one of the 16 large-tile kernels on a shape ragged in every
/// dimension of its tile: 131 rows (a 128-row block tile and 3 rows; in the
/// first block the second row of warps is full, in the second it is empty),
/// 139 columns (one full block tile, then 11 columns: warp columns 1–3 of
/// the second block own nothing), k = 173 (five 32-deep k-steps and 13: six
/// steps through four stages, so the ring wraps), aligned and odd leading
/// dimensions.
#[test]
fn every_large_tile_kernel_on_a_shape_ragged_in_every_tile_dimension() {
    every_kernel_of_the_tile(Large, (131, 139, 173), (1.0, -1.0), 500);
}

/// Every one of the 16 wide-tile kernels on a shape ragged in every
/// dimension of its tile: 131 rows (a 128-row block tile and 3 rows; in the
/// second block the second row of warps owns nothing), 263 columns (one
/// full 256-column block tile, then 7 columns: warp columns 1–3 of the
/// second block own nothing), k = 109 (three 32-deep k-steps and 13: four
/// steps through three stages, so the ring wraps), aligned and odd leading
/// dimensions.
#[test]
fn every_wide_tile_kernel_on_a_shape_ragged_in_every_tile_dimension() {
    every_kernel_of_the_tile(Wide, (131, 263, 109), (-1.0, 0.5), 700);
}

/// Shapes at the edges: empty, single elements, exact tiles (every chunk by
/// `cp.async`), tall-skinny, short-wide, deep.
#[test]
fn edge_shapes() {
    let dev = Device::emulator();
    let shapes = [
        (0, 5, 3),
        (5, 0, 3),
        (1, 1, 1),
        (2, 3, 5),
        (64, 64, 32),
        (64, 64, 96),    // three k-steps, all aligned: the pipeline's full ring
        (128, 128, 160), // the large tile exactly, five k-steps through four stages
        (100, 1, 7),
        (1, 100, 7),
        (3, 2, 100),
    ];
    for (s, &shape) in shapes.iter().enumerate() {
        for (t, &trans) in TRANSPOSES.iter().enumerate() {
            let c = case(
                shape,
                trans,
                0,
                1.0,
                -2.0,
                None,
                (s * 4 + t) as u64,
                small_int,
            );
            if (s + t) % 2 == 0 {
                c.check_tensor::<f16, f32>(&dev, Small);
                c.check_tensor::<bf16, bf16>(&dev, Large);
            } else {
                c.check_tensor::<bf16, bf16>(&dev, Small);
                c.check_tensor::<f16, f32>(&dev, Large);
            }
        }
    }
}

/// `beta = 0` never reads C (NaN there does not leak), `alpha = 0` and
/// `k = 0` give `beta·C`.
#[test]
fn beta_zero_never_reads_c_and_alpha_or_k_zero_scale_c() {
    let dev = Device::emulator();
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        let c = case(
            (9, 70, 33),
            trans,
            1,
            2.0,
            0.0,
            Some(f64::NAN),
            t as u64,
            small_int,
        );
        c.check_outputs::<bf16>(&dev);
        for tile in [Small, Large, Wide] {
            let got = c.run_tensor::<f16, f32>(&dev, tile);
            for i in 0..c.m {
                for j in 0..c.n {
                    assert!(!got[i * c.ldc + j].is_nan(), "NaN leaked at ({i}, {j})");
                }
            }
        }
        for (shape, alpha) in [((5, 9, 40), 0.0), ((5, 9, 0), 1.0)] {
            case(shape, trans, 2, alpha, -0.5, None, t as u64, small_int)
                .check_outputs::<f16>(&dev);
        }
    }
}

/// Random floats in `[-1, 1]` (rounded to the input type, so the reference
/// sees the same inputs). Error bound, per element, for an f32 accumulation
/// of `k` products (exact in f32) in any order, the GPU possibly truncating
/// instead of rounding each add: `2·k·u₃₂·Σ|a·b|`; the epilogue adds one
/// rounding of `alpha·acc` and of the fma (`2·u₃₂·|d|`, `|alpha| = 1`,
/// `beta = 0.5`, `|c| ≤ 1`, so `|d| ≤ Σ|a·b| + 1`), and an f16/bf16 output
/// one more rounding, `u_out·|d|` (plus the smallest subnormal for f16).
#[test]
fn random_floats_are_within_the_error_bound() {
    fn check<I, O>(dev: &Device, c: &Case)
    where
        I: In + GemmTypes<O, Scalar = f32>,
        O: OutTy,
    {
        for tile in [Small, Large, Wide] {
            let got = c.run_tensor::<I, O>(dev, tile);
            let u32_ = f32::EPSILON as f64 / 2.0;
            for (e, (&g, &(w, mag))) in got.iter().zip(&c.reference()).enumerate() {
                let bound = (mag + 1.0) * (2.0 * c.k as f64 * u32_ + 2.0 * u32_)
                    + (mag + 1.0) * O::UNIT_ROUNDOFF * f64::from(u8::from(O::NAME != "f32"))
                    + 6e-8;
                assert!(
                    (g - w).abs() <= bound,
                    "{} → {} ({tile:?}): C[{e}] = {g}, reference {w}, error {} > bound {bound}: {}",
                    I::NAME,
                    O::NAME,
                    (g - w).abs(),
                    c.describe()
                );
            }
        }
    }
    let dev = Device::emulator();
    let float = |bits: u64| ((bits >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0;
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        let mut c = case(
            (33, 40, 100),
            trans,
            1,
            1.0,
            0.5,
            None,
            100 + t as u64,
            float,
        );
        // The operands as the input types hold them (bf16 is coarser: round
        // to bf16 and then to f16 — exact in both, |x| ≥ 2⁻¹⁴ or 0).
        let round = |x: f64| {
            let v = bf16::from_f64(x).to_f64();
            if v.abs() < 1.0 / 16384.0 {
                0.0
            } else {
                f16::from_f64(v).to_f64()
            }
        };
        c.a.iter_mut().for_each(|x| *x = round(*x));
        c.b.iter_mut().for_each(|x| *x = round(*x));
        for x in c.c.iter_mut() {
            if *x != PADDING {
                *x = round(*x / 4.0);
            }
        }
        check::<f16, f32>(&dev, &c);
        check::<bf16, f32>(&dev, &c);
        check::<f16, f16>(&dev, &c);
        check::<bf16, bf16>(&dev, &c);
    }
}

/// Names, block shape and shared memory come from the one definition of
/// each tile, and `kernel_name_for` names the configuration `run` uses.
#[test]
fn kernel_names_and_resources_come_from_the_tile() {
    let dev = Device::emulator();
    let t = |x: bool| if x { "t" } else { "n" };
    let suffix = |tile: tc::MmaTile| format!("{}x{}x{}_s{}", tile.m, tile.n, tile.k, tile.stages);
    let (small, large, wide) = (suffix(TC_TILE), suffix(TC_TILE_LARGE), suffix(TC_TILE_WIDE));
    assert_eq!(
        (small.as_str(), large.as_str(), wide.as_str()),
        ("64x64x32_s3", "128x128x32_s4", "128x256x32_s3")
    );
    for (ta, tb) in TRANSPOSES {
        let tr = format!("{}{}", t(ta), t(tb));
        for (config, tile) in [(Small, &small), (Large, &large), (Wide, &wide)] {
            let g = Gemm::<f32>::new(1, 1, 1)
                .trans_a(ta)
                .trans_b(tb)
                .tile(config);
            assert_eq!(
                g.kernel_name_for::<f16, f32>(&dev).unwrap(),
                format!("gemm_f16_f32_{tr}_{tile}")
            );
            assert_eq!(
                g.kernel_name_for::<f16, f16>(&dev).unwrap(),
                format!("gemm_f16_f16_{tr}_{tile}")
            );
            assert_eq!(
                g.kernel_name_for::<bf16, bf16>(&dev).unwrap(),
                format!("gemm_bf16_bf16_{tr}_{tile}")
            );
        }
        let g = Gemm::<f32>::new(1, 1, 1).trans_a(ta).trans_b(tb);
        assert_eq!(
            g.kernel_name_for::<bf16, f16>(&dev).unwrap(),
            format!("gemm_bf16_f16_{tr}_{small}")
        );
    }
    assert_eq!(
        tc::gemm_bf16_f32_tn_64x64x32_s3::NAME,
        "gemm_bf16_f32_tn_64x64x32_s3"
    );
    assert_eq!(
        tc::gemm_f16_f32_nn_64x64x32_s3::SHARED_BYTES,
        TC_TILE.shared_bytes(false, false)
    );
    assert_eq!(
        tc::gemm_bf16_bf16_tn_64x64x32_s3::SHARED_BYTES,
        TC_TILE.shared_bytes(true, false)
    );
    assert!(TC_TILE.max_shared_bytes() <= 48 * 1024);
    assert_eq!(TC_TILE.threads(), 128);
    // 128 × 40 + 32 × 136 = 9472 elements a stage (A then B), 4 stages, 2 bytes.
    assert_eq!(
        tc::gemm_f16_f32_nn_128x128x32_s4::SHARED_BYTES,
        9472 * 4 * 2
    );
    assert_eq!(
        tc::gemm_bf16_bf16_nt_128x128x32_s4::SHARED_BYTES,
        TC_TILE_LARGE.shared_bytes(false, true)
    );
    // NT is the largest: 128 × 40 for A and for B, 80 KiB in all.
    assert_eq!(TC_TILE_LARGE.max_shared_bytes(), 80 * 1024);
    // 2 × 2 warps of 64 × 64 (128 threads): 2 blocks per SM on registers.
    assert_eq!((TC_TILE_LARGE.warps(), TC_TILE_LARGE.threads()), (4, 128));
    assert_eq!((TC_TILE_LARGE.warp_m, TC_TILE_LARGE.warp_n), (64, 64));
    // The wide tile: 2 × 4 warps of 64 × 64 (256 threads), 3 stages; NT the
    // largest layout again: (128 + 256) × 40 elements a stage, 90 KiB.
    assert_eq!((TC_TILE_WIDE.warps(), TC_TILE_WIDE.threads()), (8, 256));
    assert_eq!(
        tc::gemm_f16_f16_nt_128x256x32_s3::SHARED_BYTES,
        (128 + 256) * 40 * 3 * 2
    );
    assert_eq!(TC_TILE_WIDE.max_shared_bytes(), 90 * 1024);
    // f32 on the SIMT cores has the same two choices (its own tiles);
    // f64 has one tile and no choice.
    let g = Gemm::<f32>::new(1, 1, 1).tile(Large);
    assert_eq!(
        g.kernel_name_for::<f32, f32>(&dev).unwrap(),
        "gemm_f32_nn_128x128x8"
    );
    assert_eq!(g.tile_config_for::<f32, f32>(&dev).unwrap(), Some(Large));
    // The wide tile is the 16-bit tensor cores' only: refused for f32
    // (SIMT and TF32) and the mixed pairs, naming the parameter.
    for g in [Gemm::<f32>::new(1, 1, 1), Gemm::new(1, 1, 1).tf32(true)] {
        let err = g.tile(Wide).kernel_name_for::<f32, f32>(&dev).unwrap_err();
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
    let err = Gemm::<f32>::new(1, 1, 1)
        .tile(Wide)
        .kernel_name_for::<f16, bf16>(&dev)
        .unwrap_err();
    assert!(err.to_string().contains("f16 → bf16"), "{err}");
    // f64: `.tile` pins the FP64 tensor-core shape (`Small`: m8n8k4 on
    // any device), its SIMT tile pinned by `.dmma(false)` ignores it.
    let g = Gemm::<f64>::new(1, 1, 1).tile(Small);
    assert_eq!(
        g.kernel_name_for::<f64, f64>(&dev).unwrap(),
        "gemm_dmma_f64_nn_64x64x16_s3"
    );
    assert_eq!(g.tile_config_for::<f64, f64>(&dev).unwrap(), Some(Small));
    let err = Gemm::<f64>::new(1, 1, 1)
        .tile(Wide)
        .kernel_name_for::<f64, f64>(&dev)
        .unwrap_err();
    assert!(err.to_string().contains("Wide"), "{err}");
    let g = g.dmma(false);
    assert_eq!(
        g.kernel_name_for::<f64, f64>(&dev).unwrap(),
        "gemm_f64_nn_64x64x8"
    );
    assert_eq!(g.tile_config_for::<f64, f64>(&dev).unwrap(), None);
}

/// The heuristic at its boundaries: the large tile exactly when its grid,
/// `⌈m/128⌉·⌈n/128⌉·batch`, has a block for every SM of the device (132 on
/// the sm_90 emulator, 108 on sm_80, as the GPUs they emulate), the pair has
/// large-tile kernels and the device its shared memory; else the small tile.
#[test]
fn the_tile_heuristic_picks_the_large_tile_once_its_grid_fills_the_sms() {
    let choice = |dev: &Device, g: Gemm<f32>| g.tile_config_for::<f16, f32>(dev).unwrap();
    let h100 = Device::emulator();
    let a100 = Device::emulator_for(Arch::Sm80);
    // 12 × 11 = 132 large blocks: one per H100 SM; 12 × 10 = 120 is short.
    assert_eq!(choice(&h100, Gemm::new(1536, 1408, 64)), Some(Large));
    assert_eq!(choice(&h100, Gemm::new(1536, 1280, 64)), Some(Small));
    // One row or column more is one more tile: 12 × 11 again.
    assert_eq!(choice(&h100, Gemm::new(1536, 1281, 64)), Some(Large));
    // 108 blocks (12 × 9): all of an A100's SMs, not an H100's.
    assert_eq!(choice(&a100, Gemm::new(1536, 1152, 64)), Some(Large));
    assert_eq!(choice(&h100, Gemm::new(1536, 1152, 64)), Some(Small));
    assert_eq!(choice(&a100, Gemm::new(1536, 1024, 64)), Some(Small));
    // The batch counts: 64 blocks a GEMM, ×3 = 192.
    assert_eq!(choice(&h100, Gemm::new(1024, 1024, 64)), Some(Small));
    assert_eq!(
        choice(&h100, Gemm::new(1024, 1024, 64).batch(3)),
        Some(Large)
    );
    // Skinny: 8192 × 64 is 64 large blocks (256 small ones): small.
    assert_eq!(choice(&h100, Gemm::new(8192, 64, 4096)), Some(Small));
    // The wide tile once its grid, ⌈m/128⌉·⌈n/256⌉, is two blocks per SM:
    // 24 × 11 = 264 on an H100 (216 on an A100: 24 × 9), 24 × 10 short.
    assert_eq!(choice(&h100, Gemm::new(3072, 2816, 64)), Some(Wide));
    assert_eq!(choice(&h100, Gemm::new(3072, 2560, 64)), Some(Large));
    assert_eq!(choice(&a100, Gemm::new(3072, 2304, 64)), Some(Wide));
    assert_eq!(choice(&a100, Gemm::new(3072, 2048, 64)), Some(Large));
    // Narrow or ragged n: 256-column tiles covering more than 9/8 of the
    // 128-column ones' columns stay large (384: 512 against 384; 1152: 1280
    // against 1152, under 9/8), however many blocks.
    assert_eq!(choice(&h100, Gemm::new(65536, 384, 64)), Some(Large));
    assert_eq!(choice(&h100, Gemm::new(65536, 64, 64)), Some(Large));
    assert_eq!(choice(&h100, Gemm::new(65536, 1152, 64)), Some(Wide));
    // 8192 × 1024: 256 wide blocks, short of 264: large (512 blocks).
    assert_eq!(choice(&h100, Gemm::new(8192, 1024, 4096)), Some(Large));
    // k does not enter; the large square benchmarks' shapes pick wide.
    assert_eq!(choice(&h100, Gemm::new(4096, 4096, 1)), Some(Wide));
    assert_eq!(choice(&h100, Gemm::new(8192, 8192, 8192)), Some(Wide));
    assert_eq!(choice(&h100, Gemm::new(2048, 2048, 2048)), Some(Large));
    // A pair without large- and wide-tile kernels: small, whatever the
    // shape; pinning the large tile there is refused, naming the parameter.
    let big = Gemm::<f32>::new(4096, 4096, 64);
    assert_eq!(
        big.tile_config_for::<f16, bf16>(&h100).unwrap(),
        Some(Small)
    );
    // (The mma.sync kernel the heuristic names: on sm_90 the Hopper kernel
    // replaces it unless turned off, `wgmma_is_chosen_on_sm90_where_the_gpu_fills`.)
    assert_eq!(
        big.wgmma(false)
            .kernel_name_for::<bf16, bf16>(&h100)
            .unwrap(),
        "gemm_bf16_bf16_nn_128x256x32_s3"
    );
    // TF32 has no wide tile: large (on sm_90 the Hopper tf32 kernel
    // replaces it, `gemm_tf32::wgmma_tf32_names_launches_and_fallbacks`).
    assert_eq!(
        big.tf32(true)
            .wgmma(false)
            .kernel_name_for::<f32, f32>(&h100)
            .unwrap(),
        "gemm_tf32_f32_nn_128x128x16_s4"
    );
    let err = big
        .tile(Large)
        .tile_config_for::<bf16, f16>(&h100)
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::InvalidParameter {
                parameter: "tile",
                ..
            }
        ) && err.to_string().contains("bf16 → f16"),
        "{err}"
    );
    let a = h100.upload(&[bf16::ZERO; 4]).unwrap();
    let mut c = h100.upload(&[f16::ZERO; 4]).unwrap();
    let err = Gemm::new(2, 2, 2)
        .tile(Large)
        .run(&h100, &a, &a, &mut c)
        .unwrap_err();
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
    // The rule itself: a tile whose shared memory the device cannot give
    // is passed over (the wide tile needs 90 KiB, the large 80).
    let all = [Small, Large, Wide];
    assert_eq!(
        TileConfig::choose(4096, 4096, 1, &all, 132, 99 * 1024),
        Wide
    );
    assert_eq!(
        TileConfig::choose(4096, 4096, 1, &all, 132, 85 * 1024),
        Large
    );
    assert_eq!(
        TileConfig::choose(4096, 4096, 1, &all, 132, 64 * 1024),
        Small
    );
    assert_eq!(
        TileConfig::choose(4096, 4096, 1, &[Small], 132, 227 * 1024),
        Small
    );
    assert_eq!(TileConfig::choose(0, 4096, 1, &all, 132, 227 * 1024), Small);
}

/// A batch on the large tile: each GEMM of the batch against its own
/// reference, exact, ragged in m and n, with a NaN-filled C and beta = 0.
#[test]
fn a_batch_on_the_large_tile_is_each_gemm_of_the_batch() {
    let dev = Device::emulator();
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        let cases: Vec<Case> = (0..3)
            .map(|z| {
                let seed = 900 + (t * 3 + z) as u64;
                case(
                    (130, 129, 40),
                    trans,
                    0,
                    1.0,
                    0.0,
                    Some(f64::NAN),
                    seed,
                    small_int,
                )
            })
            .collect();
        let c0 = &cases[0];
        // Each matrix padded to its rows × leading dimension: the default strides.
        let (ar, _) = if c0.ta { (c0.k, c0.m) } else { (c0.m, c0.k) };
        let (br, _) = if c0.tb { (c0.n, c0.k) } else { (c0.k, c0.n) };
        let stack = |v: &dyn Fn(&Case) -> &Vec<f64>, len: usize| -> Vec<f64> {
            cases
                .iter()
                .flat_map(|c| {
                    let mut x = v(c).clone();
                    x.resize(len, 0.0);
                    x
                })
                .collect()
        };
        let a = stack(&|c| &c.a, ar * c0.lda);
        let b = stack(&|c| &c.b, br * c0.ldb);
        let cc = stack(&|c| &c.c, c0.m * c0.ldc);
        let a = dev
            .upload(&a.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>())
            .unwrap();
        let b = dev
            .upload(&b.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>())
            .unwrap();
        let mut c = dev
            .upload(&cc.iter().map(|&x| x as f32).collect::<Vec<_>>())
            .unwrap();
        let g = Gemm::new(c0.m, c0.n, c0.k)
            .trans_a(c0.ta)
            .trans_b(c0.tb)
            .batch(3)
            .tile(Large);
        assert_eq!(
            g.kernel_name_for::<f16, f32>(&dev).unwrap(),
            format!("gemm_f16_f32_{}_128x128x32_s4", ["nn", "nt", "tn", "tt"][t])
        );
        g.run(&dev, &a, &b, &mut c).unwrap();
        let got = c.to_host().unwrap();
        for (z, cs) in cases.iter().enumerate() {
            let want = cs.reference();
            let at = z * c0.m * c0.ldc;
            for (e, &(w, _)) in want.iter().enumerate() {
                let g = f64::from(got[at + e]);
                assert_eq!(
                    g.to_bits(),
                    (w as f32 as f64).to_bits(),
                    "batch {z}, C[{e}]: {}",
                    cs.describe()
                );
            }
        }
    }
}

/// The checks before launching name the operand and the sizes, as for f32.
#[test]
fn shapes_are_checked_before_launching() {
    let dev = Device::emulator();
    let a = dev.upload(&[bf16::ZERO; 6]).unwrap();
    let b = dev.upload(&[bf16::ZERO; 6]).unwrap();
    let mut c = dev.upload(&[0.0f32; 3]).unwrap();
    let err = Gemm::new(2, 2, 3)
        .run(&dev, &a, &b, &mut c)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("C is stored 2 × 2") && err.contains("has 3"),
        "{err}"
    );
    let mut c = dev.upload(&[f16::ZERO; 4]).unwrap();
    let err = Gemm::new(2, 2, 3)
        .lda(2)
        .run(&dev, &a, &b, &mut c)
        .unwrap_err()
        .to_string();
    assert!(err.contains("lda = 2") && err.contains("A"), "{err}");
    let err = Gemm::new(2, 3, 3)
        .run(&dev, &a, &b, &mut c)
        .unwrap_err()
        .to_string();
    assert!(err.contains("B is stored 3 × 3"), "{err}");
}

/// On a GPU: the exact property on every input × output pair, every
/// transpose and both tiles, at ragged shapes, a grid of many large tiles
/// and a deep k (every partial sum still an integer below 2²⁴), plus `beta
/// = 0` over a NaN-filled `C`.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_tensor_gemm_matches_the_exact_reference() {
    let gpu = Device::gpu(0).expect("this test needs a CUDA GPU");
    let shapes = [
        (67, 70, 77),
        (131, 139, 173),
        (1030, 1000, 40),
        (257, 263, 1100),
    ];
    for (s, &shape) in shapes.iter().enumerate() {
        for (t, &trans) in TRANSPOSES.iter().enumerate() {
            let seed = (s * 4 + t) as u64 + 8000;
            let c = case(
                shape,
                trans,
                (s + t) % 2 * 3,
                -1.0,
                0.5,
                None,
                seed,
                small_int,
            );
            c.check_outputs::<f16>(&gpu);
            c.check_outputs::<bf16>(&gpu);
            let nan = case(shape, trans, 0, 1.0, 0.0, Some(f64::NAN), seed, small_int);
            nan.check_tensor::<f16, f32>(&gpu, Large);
            nan.check_tensor::<bf16, bf16>(&gpu, Small);
            nan.check_tensor::<f16, f16>(&gpu, Wide);
            c.check_tensor::<bf16, f32>(&gpu, Wide);
        }
    }
}

/// The interior (proven, no check per chunk) and guarded (chunk by chunk)
/// copy paths of the tensor-core main loop give bit-identical results: one
/// logical `A·B` of small integers (exact), as a batch of two, stored so
/// that every block tile is interior (aligned leading dimensions and batch
/// offsets, k a multiple of the k-step), every one is an edge (odd leading
/// dimensions: misaligned rows), or they are mixed (a ragged m, and a
/// second batch at an odd offset: its blocks misaligned while the first
/// batch's are interior), each with every tile and every transpose; the
/// emulator's per-launch path count (`MemoryProfile::paths`) says which
/// blocks took the lean path and which the guarded one.
#[test]
fn interior_edge_and_mixed_block_tiles_agree_bit_for_bit() {
    let dev = Device::emulator();
    // n = 256: one whole column of wide tiles too.
    let (k, n) = (64usize, 256usize);
    for m in [128usize, 100] {
        let a_val = |i: usize, p: usize| ((i * 7 + p * 3) % 9) as f64 - 4.0;
        let b_val = |p: usize, j: usize| ((p * 5 + j * 11) % 9) as f64 - 4.0;
        let want: Vec<f32> = (0..m * n)
            .map(|e| {
                (0..k)
                    .map(|p| a_val(e / n, p) * b_val(p, e % n))
                    .sum::<f64>() as f32
            })
            .collect();
        for &(ta, tb) in TRANSPOSES.iter() {
            // (leading-dimension padding, extra elements between batches)
            for (pad, gap) in [(0usize, 0usize), (8, 8), (3, 0), (0, 1), (8, 5)] {
                let (a_rows, a_cols) = if ta { (k, m) } else { (m, k) };
                let (b_rows, b_cols) = if tb { (n, k) } else { (k, n) };
                let (lda, ldb) = (a_cols + pad, b_cols + pad);
                let (stride_a, stride_b) = (a_rows * lda + gap, b_rows * ldb + gap);
                let mut a = vec![f16::from_f32(0.0); 2 * stride_a];
                let mut b = vec![f16::from_f32(0.0); 2 * stride_b];
                for z in 0..2 {
                    for r in 0..a_rows {
                        for c in 0..a_cols {
                            let (i, p) = if ta { (c, r) } else { (r, c) };
                            a[z * stride_a + r * lda + c] = f16::from_f64(a_val(i, p));
                        }
                    }
                    for r in 0..b_rows {
                        for c in 0..b_cols {
                            let (p, j) = if tb { (c, r) } else { (r, c) };
                            b[z * stride_b + r * ldb + c] = f16::from_f64(b_val(p, j));
                        }
                    }
                }
                let (a, b) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
                for tile in [Small, Large, Wide] {
                    let mut c = dev.alloc_zeroed::<f32>(2 * m * n).unwrap();
                    let gemm = Gemm::new(m, n, k)
                        .trans_a(ta)
                        .trans_b(tb)
                        .lda(lda)
                        .ldb(ldb)
                        .batch(2)
                        .stride_a(stride_a)
                        .stride_b(stride_b)
                        .tile(tile);
                    let ((), profiles) = dev
                        .profile_memory(|| gemm.run(&dev, &a, &b, &mut c))
                        .unwrap();
                    // Which path each block took: lean where the block's rows
                    // are whole in m and both operands' rows and batch start
                    // are 16-byte aligned (k is a multiple of the k-step).
                    let t = tile.tile();
                    let (bm, bn) = (t.m, t.n);
                    let aligned =
                        |ld: usize, at: usize| ld.is_multiple_of(8) && at.is_multiple_of(8);
                    let lean: u64 = (0..2)
                        .filter(|z| aligned(lda, z * stride_a) && aligned(ldb, z * stride_b))
                        .map(|_| ((m / bm) * (n / bn)) as u64)
                        .sum();
                    let blocks = (2 * m.div_ceil(bm) * n.div_ceil(bn)) as u64;
                    let want_paths: Vec<(String, u64)> =
                        [("guarded", blocks - lean), ("lean", lean)]
                            .into_iter()
                            .filter(|p| p.1 > 0)
                            .map(|(p, b)| (p.to_owned(), b))
                            .collect();
                    assert_eq!(
                        profiles[0].paths, want_paths,
                        "m {m}, ta {ta}, tb {tb}, pad {pad}, gap {gap}, {tile:?}: blocks per path"
                    );
                    let got = c.to_host().unwrap();
                    for z in 0..2 {
                        let batch = &got[z * m * n..(z + 1) * m * n];
                        if let Some(e) =
                            (0..m * n).find(|&e| batch[e].to_bits() != want[e].to_bits())
                        {
                            panic!(
                                "m {m}, ta {ta}, tb {tb}, pad {pad}, gap {gap}, {tile:?}, batch {z}: \
                                 C[{}][{}] = {}, expected {}",
                                e / n,
                                e % n,
                                batch[e],
                                want[e]
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The lean path's stages are unpadded and XOR-swizzled: every transpose's
/// `cp.async` stores and `ldmatrix` loads are free of bank conflicts (the
/// padded rows they replace cost 1.5 wavefronts per store request), and the
/// results stay exact.
#[test]
fn lean_stages_are_swizzled_without_bank_conflicts() {
    let dev = Device::emulator();
    let (m, n, k) = (128, 256, 64);
    let a: Vec<f16> = (0..m * k)
        .map(|i| f16::from_f32((i % 7) as f32 - 3.0))
        .collect();
    let b: Vec<f16> = (0..k * n)
        .map(|i| f16::from_f32((i % 5) as f32 - 2.0))
        .collect();
    let (a, b) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
    for (ta, tb) in TRANSPOSES {
        for tile in [Small, Large, Wide] {
            let mut c = dev.alloc_zeroed::<f32>(m * n).unwrap();
            let gemm = Gemm::new(m, n, k).trans_a(ta).trans_b(tb).tile(tile);
            let ((), profiles) = dev
                .profile_memory(|| gemm.run(&dev, &a, &b, &mut c))
                .unwrap();
            let p = &profiles[0];
            let what = format!("ta {ta}, tb {tb}, {tile:?}");
            assert!(
                p.paths.iter().all(|(path, _)| path == "lean"),
                "{what}: {:?}",
                p.paths
            );
            assert!(
                p.shared_store.requests > 0 && p.ldmatrix.requests > 0,
                "{what}"
            );
            assert_eq!(p.shared_store.bank_conflicts, 0, "{what}: cp.async stores");
            assert_eq!(p.ldmatrix.bank_conflicts, 0, "{what}: ldmatrix loads");
        }
    }
}

// ---------------------------------------------------------------------------
// The Hopper kernels (`Gemm::wgmma`: a TMA producer warpgroup and two
// `wgmma` consumer warpgroups, 128 × 256 × 64 tiles through a 4-stage ring),
// on the emulator of sm_90: the same exact properties.

/// A dimension around the Hopper tile's edges (128 rows, 256 columns, 64
/// deep, 4 stages: past 256 the ring wraps), sometimes any up to 300.
fn wgmma_dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => prop::sample::select(vec![0usize, 1, 7, 63, 64, 65, 127, 128, 129, 255, 257, 300]),
        1 => 0usize..=300,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random shapes, transposes, leading dimensions, factors and pair
    /// through the Hopper kernels on a random persistent grid (1–3 blocks,
    /// or one per SM), exact.
    #[test]
    fn wgmma_gemm_matches_the_exact_reference(
        m in wgmma_dim(),
        n in wgmma_dim(),
        k in wgmma_dim(),
        trans in prop::sample::select(TRANSPOSES.to_vec()),
        extra in 0usize..2,
        alpha in prop::sample::select(vec![1.0, -1.0, 2.0, 0.5, 0.0]),
        beta in prop::sample::select(vec![0.0, 1.0, -2.0, 0.25]),
        nan_c in any::<bool>(),
        pair in 0usize..4,
        sms in prop::sample::select(vec![1u32, 2, 3, u32::MAX]),
        seed in any::<u64>(),
    ) {
        let fill = (nan_c && beta == 0.0).then_some(f64::NAN);
        let lds = wgmma_lds((m, n, k), trans, extra);
        let c = case_with_lds((m, n, k), trans, lds, alpha, beta, fill, seed, small_int);
        let dev = Device::emulator_for(Arch::Sm90);
        let path = Path::WgmmaOn(sms);
        match pair {
            0 => c.check_tensor::<f16, f32>(&dev, path),
            1 => c.check_tensor::<f16, f16>(&dev, path),
            2 => c.check_tensor::<bf16, f32>(&dev, path),
            _ => c.check_tensor::<bf16, bf16>(&dev, path),
        }
    }
}

/// Every one of the 16 Hopper kernels (f16 → f32/f16, bf16 → f32/bf16,
/// every transpose) on a shape ragged in every dimension of its tile: 131
/// rows (the second block's second consumer warpgroup owns nothing), 263
/// columns (7 past one block tile), k = 300 (five 64-deep steps, the last
/// 44: the 4-stage ring wraps), packed and padded leading dimensions. The
/// first tile is inside C (its warps write with no clipping), the others
/// on its edges; with beta = 0.5 the unclipped writes read C, and with
/// beta = 0 over a NaN-filled C (its unclipped writes' own path) they must
/// not.
#[test]
fn every_wgmma_kernel_on_a_shape_ragged_in_every_tile_dimension() {
    let dev = Device::emulator_for(Arch::Sm90);
    let shape = (131, 263, 300);
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        for extra in [0, 1] {
            let seed = (t * 16 + extra) as u64 + 900;
            let lds = wgmma_lds(shape, trans, extra);
            let c = case_with_lds(shape, trans, lds, -1.0, 0.5, None, seed, small_int);
            c.check_tensor::<f16, f32>(&dev, Path::Wgmma);
            c.check_tensor::<f16, f16>(&dev, Path::Wgmma);
            c.check_tensor::<bf16, f32>(&dev, Path::Wgmma);
            c.check_tensor::<bf16, bf16>(&dev, Path::Wgmma);
        }
        let lds = wgmma_lds(shape, trans, 0);
        let nan = Some(f64::NAN);
        let c = case_with_lds(shape, trans, lds, 2.0, 0.0, nan, t as u64 + 950, small_int);
        c.check_tensor::<f16, f32>(&dev, Path::Wgmma);
        c.check_tensor::<bf16, bf16>(&dev, Path::Wgmma);
    }
}

/// A batch of 3 through the Hopper kernels (the maps' third dimension),
/// walked by two persistent blocks: each batch exactly its own product,
/// strides past the extents.
#[test]
fn wgmma_batches_are_their_own_products() {
    for trans in TRANSPOSES {
        // C packed (ldc = n = 90: rows not on 16 bytes), batches 5
        // elements past C's extent.
        wgmma_batches(trans, 90, 5);
    }
}

/// The epilogue's clipped forms: C's rows 16-byte aligned (ldc = 96 > n =
/// 90, so a row's last run is ragged against n, inside the padding), batch
/// 0 at the buffer's start (its tile clipped by C's edges: the runs wholly
/// inside as vectors, the ragged ones element by element); batches 6715
/// elements apart (C's extent + 1), so batches 1 and 2 start 12 and 8
/// bytes past 16 (misaligned views of C: element by element), or 6716
/// apart (every batch on 16 bytes: all three clipped, aligned).
#[test]
fn wgmma_writes_a_padded_c_and_a_misaligned_batch_of_it() {
    for trans in [(false, false), (true, true)] {
        wgmma_batches(trans, 96, 1);
        wgmma_batches(trans, 96, 2);
    }
}

/// `batch` = 3 products of 70 × 90 × 80 (bf16 → f32, beta = -1) through the
/// Hopper kernel on two persistent blocks, C's rows `ldc` apart and its
/// batches `shift` elements past C's extent, each batch exactly its own.
fn wgmma_batches(trans: (bool, bool), ldc: usize, shift: usize) {
    let dev = Device::emulator_for(Arch::Sm90);
    let (m, n, k, batch) = (70usize, 90usize, 80usize, 3usize);
    {
        let lds = wgmma_lds((m, n, k), trans, 0);
        let lds = (lds.0, lds.1, ldc);
        let cases: Vec<Case> = (0..batch)
            .map(|z| {
                case_with_lds(
                    (m, n, k),
                    trans,
                    lds,
                    1.0,
                    -1.0,
                    None,
                    40 + z as u64,
                    small_int,
                )
            })
            .collect();
        let (sa, sb, sc) = (
            cases[0].a.len().next_multiple_of(8) + 8,
            cases[0].b.len().next_multiple_of(8) + 8,
            cases[0].c.len() + shift,
        );
        let stack = |len: usize, stride: usize, part: &dyn Fn(&Case) -> &Vec<f64>| {
            let mut v = vec![0.0f64; (batch - 1) * stride + len];
            for (z, c) in cases.iter().enumerate() {
                v[z * stride..z * stride + len].copy_from_slice(part(c));
            }
            v
        };
        let a = stack(cases[0].a.len(), sa, &|c| &c.a);
        let b = stack(cases[0].b.len(), sb, &|c| &c.b);
        let c0 = stack(cases[0].c.len(), sc, &|c| &c.c);
        let up = |v: &[f64]| {
            dev.upload(&v.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<_>>())
                .unwrap()
        };
        let (ab, bb) = (up(&a), up(&b));
        let mut cb = dev
            .upload(&c0.iter().map(|&x| x as f32).collect::<Vec<_>>())
            .unwrap();
        let gemm = Gemm::new(m, n, k)
            .trans_a(trans.0)
            .trans_b(trans.1)
            .beta(-1.0)
            .lda(lds.0)
            .ldb(lds.1)
            .ldc(lds.2)
            .batch(batch)
            .stride_a(sa)
            .stride_b(sb)
            .stride_c(sc)
            .wgmma(true)
            .sm_limit(2);
        // One tile a batch, two blocks: block 0 walks batches 0 and 2.
        assert_eq!(gemm.wgmma_blocks::<bf16, f32>(&dev).unwrap(), Some(2));
        gemm.run(&dev, &ab, &bb, &mut cb).unwrap();
        let got = cb.to_host().unwrap();
        for (z, c) in cases.iter().enumerate() {
            let want = c.reference();
            for (e, &(w, _)) in want.iter().enumerate() {
                assert_eq!(got[z * sc + e], w as f32, "batch {z}, C[{e}], {trans:?}");
            }
        }
    }
}

/// The persistent Hopper kernel on grids of 1, 2, 4 and 9 blocks for 9
/// tiles (300 × 600 in 128 × 256): every block walks its tiles with one
/// ring, k = 330 (6 steps, so stages 0 and 1 are used twice a tile and 2
/// and 3 once, each stage's barrier phases drifting apart across tiles),
/// exact for each; and on 18 SMs, where the 9 wide tiles would leave half
/// idle, the narrow kernel's 15 tiles of 128 × 128 (3 × 5, ragged), one a
/// block. The grid is the tiles when they are fewer than the SMs.
#[test]
fn the_persistent_wgmma_kernel_walks_every_tile_on_any_grid() {
    let dev = Device::emulator_for(Arch::Sm90);
    let shape = (300, 600, 330);
    for (i, sms) in [1u32, 2, 4, 9, 18].into_iter().enumerate() {
        let trans = TRANSPOSES[i % TRANSPOSES.len()];
        let lds = wgmma_lds(shape, trans, 0);
        let c = case_with_lds(shape, trans, lds, 1.0, -0.5, None, 70 + i as u64, small_int);
        c.check_tensor::<bf16, f32>(&dev, Path::WgmmaOn(sms));
        if sms == 2 {
            c.check_tensor::<f16, f16>(&dev, Path::WgmmaOn(sms));
        }
    }
    let blocks = |g: Gemm<f32>| g.wgmma(true).wgmma_blocks::<f16, f32>(&dev).unwrap();
    let g = Gemm::<f32>::new(300, 600, 336);
    let name = |g: Gemm<f32>| g.wgmma(true).kernel_name_for::<f16, f32>(&dev).unwrap();
    assert_eq!(blocks(g.sm_limit(9)), Some(9));
    assert_eq!(blocks(g.sm_limit(4)), Some(4));
    assert_eq!(name(g.sm_limit(17)), "gemm_wgmma_f16_f32_nn_128x256x64_s4");
    // 18 SMs and more: the narrow tiles, 15 of them.
    assert_eq!(name(g.sm_limit(18)), "gemm_wgmma_f16_f32_nn_128x128x64_s4");
    assert_eq!(blocks(g.sm_limit(18)), Some(15));
    assert_eq!(blocks(g), Some(15));
    // 8192² is 64 × 32 tiles: the emulated H100's 132 SMs, one block each.
    assert_eq!(blocks(Gemm::new(8192, 8192, 64)), Some(132));
    assert_eq!(
        Gemm::<f32>::new(8192, 8192, 64)
            .wgmma_blocks::<f16, f32>(&Device::emulator_for(Arch::Sm80))
            .unwrap(),
        None
    );
    match g.sm_limit(0).run(
        &dev,
        &dev.alloc_zeroed::<f16>(300 * 336).unwrap(),
        &dev.alloc_zeroed::<f16>(336 * 600).unwrap(),
        &mut dev.alloc_zeroed::<f32>(300 * 600).unwrap(),
    ) {
        Err(Error::InvalidParameter {
            parameter: "sm_limit",
            ..
        }) => {}
        other => panic!("sm_limit(0) not refused: {other:?}"),
    }
}

/// A Hopper GEMM call is its one launch: no allocation and no memset on
/// the host's side (the per-call cost a benchmark's loop and a training
/// step pay, every call), for every transpose and a batch, and the bits
/// of two calls are the same.
#[test]
fn a_wgmma_call_is_one_launch_without_allocations_or_memsets() {
    let dev = Device::emulator_for(Arch::Sm90);
    let (m, n, k) = (136, 264, 72);
    let a = dev
        .upload(
            &(0..2 * m * k)
                .map(|i| bf16::from_f32((i % 7) as f32))
                .collect::<Vec<_>>(),
        )
        .unwrap();
    let b = dev
        .upload(
            &(0..2 * k * n)
                .map(|i| bf16::from_f32((i % 5) as f32))
                .collect::<Vec<_>>(),
        )
        .unwrap();
    let mut c = dev.alloc_zeroed::<f32>(2 * m * n).unwrap();
    for (ta, tb) in TRANSPOSES {
        let gemm = Gemm::<f32>::new(m, n, k)
            .trans_a(ta)
            .trans_b(tb)
            .batch(2)
            .wgmma(true);
        let kernel = gemm.kernel_name_for::<bf16, f32>(&dev).unwrap();
        gemm.run(&dev, &a, &b, &mut c).unwrap();
        let first = c.to_host().unwrap();
        let ((), work) = dev.work_done_by(|| gemm.run(&dev, &a, &b, &mut c)).unwrap();
        assert_eq!(work.launches.get(kernel), Some(&1), "{ta} {tb}: {work:?}");
        assert_eq!(work.total_launches(), 1, "{work:?}");
        assert_eq!((work.allocations, work.memsets), (0, 0), "{work:?}");
        assert_eq!(c.to_host().unwrap(), first);
    }
}

/// What the Hopper kernels cannot run is refused when pinned, naming why,
/// and runs on the `mma.sync` kernels when not.
#[test]
fn wgmma_refuses_what_it_cannot_run_and_the_default_falls_back() {
    use warpforge_kernels_hopper::gemm as hp;
    let h100 = Device::emulator_for(Arch::Sm90);
    let reason =
        |gemm: Gemm<f32>, dev: &Device| match gemm.wgmma(true).kernel_name_for::<bf16, f32>(dev) {
            Err(Error::InvalidParameter {
                parameter: "wgmma",
                detail,
                ..
            }) => detail,
            other => panic!("not refused: {other:?}"),
        };
    let g = Gemm::<f32>::new(4096, 4096, 512);
    assert!(reason(g.lda(4100), &h100).contains("A's leading dimension 4100"));
    assert!(reason(g.trans_b(true).ldb(515), &h100).contains("B's leading dimension 515"));
    assert!(reason(g.batch(2).stride_a(4096 * 512 + 4), &h100).contains("batch stride"));
    assert!(reason(g, &Device::emulator_for(Arch::Sm80)).contains("compute capability 9.0"));
    assert!(reason(g.tile(Large), &h100).contains("pinned"));
    // A pinned split with the Hopper kernels pinned is theirs (the
    // f32-output kernel's k-ranges, `gemm_split_k`); alone, the mma.sync one.
    assert_eq!(
        g.split_k(2)
            .wgmma(true)
            .kernel_name_for::<bf16, f32>(&h100)
            .unwrap(),
        hp::gemm_wgmma_bf16_f32_nn_128x256x64_s4::NAME
    );
    assert_eq!(
        g.split_k(2).kernel_name_for::<bf16, f32>(&h100).unwrap(),
        tc::gemm_bf16_f32_nn_128x256x32_s3::NAME
    );
    let mixed = g
        .wgmma(true)
        .kernel_name_for::<bf16, f16>(&h100)
        .unwrap_err();
    assert!(mixed.to_string().contains("no Hopper kernels"), "{mixed}");
    // Unpinned: the same GEMMs take the mma.sync kernels.
    assert_eq!(
        g.lda(4100).kernel_name_for::<bf16, f32>(&h100).unwrap(),
        tc::gemm_bf16_f32_nn_128x256x32_s3::NAME
    );
    assert_eq!(
        g.kernel_name_for::<bf16, f16>(&h100).unwrap(),
        tc::gemm_bf16_f16_nn_64x64x32_s3::NAME
    );
}

/// Unpinned, the Hopper kernels run on sm_90 where the `mma.sync`
/// heuristic fills the GPU (a large or wide tile), and not on smaller
/// GEMMs, on other archs, or when turned off.
#[test]
fn wgmma_is_chosen_on_sm90_where_the_gpu_fills() {
    use warpforge_kernels_hopper::gemm as hp;
    let h100 = Device::emulator_for(Arch::Sm90);
    let name = |g: Gemm<f32>, dev: &Device| g.kernel_name_for::<f16, f32>(dev).unwrap();
    let big = Gemm::<f32>::new(4096, 4096, 4096);
    assert_eq!(
        name(big, &h100),
        hp::gemm_wgmma_f16_f32_nn_128x256x64_s4::NAME
    );
    assert_eq!(
        name(big.trans_a(true).trans_b(true), &h100),
        hp::gemm_wgmma_f16_f32_tt_128x256x64_s4::NAME
    );
    assert_eq!(
        name(Gemm::new(2048, 2048, 64), &h100),
        hp::gemm_wgmma_f16_f32_nn_128x256x64_s4::NAME
    );
    assert_eq!(
        name(Gemm::new(1024, 1024, 64), &h100),
        tc::gemm_f16_f32_nn_64x64x32_s3::NAME
    );
    assert_eq!(
        name(big.wgmma(false), &h100),
        tc::gemm_f16_f32_nn_128x256x32_s3::NAME
    );
    assert_eq!(
        name(big, &Device::emulator_for(Arch::Sm80)),
        tc::gemm_f16_f32_nn_128x256x32_s3::NAME
    );
}

/// On a Hopper GPU, every Hopper kernel gives the exact result on a shape
/// ragged in every tile dimension, and a batch; on other GPUs a pinned
/// `wgmma` is refused naming the compute capability.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_wgmma_gemm_is_exact() {
    let gpu = Device::gpu(0).expect("this test needs a CUDA GPU");
    if gpu.compute_capability() != (9, 0) {
        let e = Gemm::<f32>::new(256, 256, 64)
            .wgmma(true)
            .kernel_name_for::<bf16, f32>(&gpu)
            .unwrap_err();
        assert!(e.to_string().contains("compute capability 9.0"), "{e}");
        return;
    }
    let shape = (131, 263, 300);
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        let lds = wgmma_lds(shape, trans, 1);
        let c = case_with_lds(shape, trans, lds, -1.0, 0.5, None, 77 + t as u64, small_int);
        c.check_tensor::<f16, f32>(&gpu, Path::Wgmma);
        c.check_tensor::<f16, f16>(&gpu, Path::Wgmma);
        c.check_tensor::<bf16, f32>(&gpu, Path::Wgmma);
        c.check_tensor::<bf16, bf16>(&gpu, Path::Wgmma);
    }
    let big = (1024, 2048, 512);
    let lds = wgmma_lds(big, (false, false), 0);
    let c = case_with_lds(
        big,
        (false, false),
        lds,
        1.0,
        0.0,
        Some(f64::NAN),
        5,
        small_int,
    );
    c.check_tensor::<bf16, f32>(&gpu, Path::Wgmma);
}
