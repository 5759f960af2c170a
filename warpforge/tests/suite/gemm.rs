//! `warpforge::gemm` on the emulator against a CPU reference computed in
//! f64: every transpose combination, shapes around every tile edge (0, 1,
//! primes, multiples of the tile ± 1, tall-skinny and short-wide), leading
//! dimensions past the row length, `alpha`/`beta` including 0, and `beta = 0`
//! with a NaN-filled `C`. Inputs are small integers (and `alpha`/`beta`
//! small dyadic numbers), so every partial sum is exact in f32 and f64 and
//! the results are compared bit for bit, padding of `C` included (it must be
//! left untouched). Then every check `run` makes before launching.

use crate::common;

use common::gemm::{Case, TRANSPOSES, layout, needed, seeded, xorshift};
use proptest::prelude::*;
use warpforge::gemm::{Gemm, GemmElement, TileConfig};
use warpforge::{Device, DeviceBuffer, Error, Kernel};
use warpforge_kernels::gemm::{self as k, F32_TILE, F64_TILE};

impl Case {
    /// The expected `C` after the GEMM, padding included, as the kernel's
    /// operations in f64: an fma chain over `p` from +0, then `alpha·acc`,
    /// then `fma(beta, c, ·)` unless `beta = 0`. All exact on these inputs,
    /// so it is also the exact result, and rounds to itself in f32.
    fn expected(&self) -> Vec<f64> {
        let mut d = self.c.clone();
        for i in 0..self.m {
            for j in 0..self.n {
                let mut acc = 0.0f64;
                if self.alpha != 0.0 {
                    for p in 0..self.k {
                        acc = self.a_at(i, p).mul_add(self.b_at(p, j), acc);
                    }
                }
                let prod = self.alpha * acc;
                let c = &mut d[i * self.ldc + j];
                *c = if self.beta == 0.0 {
                    prod
                } else {
                    self.beta.mul_add(*c, prod)
                };
            }
        }
        d
    }

    fn gemm<T: GemmElement>(&self, cast: fn(f64) -> T) -> Gemm<T> {
        let g = Gemm::new(self.m, self.n, self.k);
        match self.tile {
            Some(tile) => g.tile(tile),
            None => g,
        }
        .trans_a(self.ta)
        .trans_b(self.tb)
        .alpha(cast(self.alpha))
        .beta(cast(self.beta))
        .lda(self.lda)
        .ldb(self.ldb)
        .ldc(self.ldc)
    }

    /// Runs the case in `T` on the emulator; `C` afterwards, as f64.
    fn run<T: GemmElement + Into<f64>>(&self, dev: &Device, cast: fn(f64) -> T) -> Vec<f64> {
        let up = |v: &[f64]| {
            dev.upload(&v.iter().map(|&x| cast(x)).collect::<Vec<T>>())
                .unwrap()
        };
        let (a, b, mut c) = (up(&self.a), up(&self.b), up(&self.c));
        self.gemm(cast).run(dev, &a, &b, &mut c).unwrap();
        c.to_host().unwrap().into_iter().map(Into::into).collect()
    }

    /// Runs the case in f32 and f64 (on `dev`, and f64 also on an sm_86
    /// emulator: the SIMT kernels where `dev` has FP64 tensor cores) and
    /// compares every element of `C` bit for bit.
    fn check(&self, dev: &Device) {
        let want = self.expected();
        let got32 = self.run(dev, |x| x as f32);
        let got64 = self.run(dev, |x| x);
        let simt64 = self.run(&Device::emulator_for(warpforge::Arch::Sm86), |x| x);
        for (what, got) in [("f32", got32), ("f64", got64), ("f64 SIMT", simt64)] {
            assert_eq!(got.len(), want.len());
            for (e, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                    "{what}: C[{e}] (row {}, col {}) = {g}, expected {w}: {}",
                    e / self.ldc.max(1),
                    e % self.ldc.max(1),
                    self.describe()
                );
            }
        }
    }
}

/// A deterministic case: integer operands in `[-8, 8]` from `seed`, leading
/// dimensions `row length + pad`, `C` (padding too) filled with `c_fill`
/// where given, else with integers.
#[allow(clippy::too_many_arguments)]
fn case(
    (m, n, k): (usize, usize, usize),
    (ta, tb): (bool, bool),
    pad: usize,
    alpha: f64,
    beta: f64,
    c_fill: Option<f64>,
    seed: u64,
) -> Case {
    let ((ar, ac), (br, bc), (lda, ldb, ldc)) = layout((m, n, k), (ta, tb), pad);
    let mut s = seeded(seed);
    let mut ints = move |len: usize| -> Vec<f64> {
        (0..len)
            .map(|_| (xorshift(&mut s) % 17) as f64 - 8.0)
            .collect()
    };
    let a = ints(needed(ar, ac, lda));
    let b = ints(needed(br, bc, ldb));
    let c = match c_fill {
        Some(v) => vec![v; needed(m, n, ldc)],
        None => ints(needed(m, n, ldc)),
    };
    Case {
        tile: None,
        m,
        n,
        k,
        ta,
        tb,
        lda,
        ldb,
        ldc,
        alpha,
        beta,
        a,
        b,
        c,
    }
}

/// A dimension: mostly the edge values (0, 1, primes, tile sizes ± 1), sometimes any up to 100.
fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => prop::sample::select(vec![0usize, 1, 2, 3, 5, 7, 8, 9, 13, 15, 16, 17, 31, 33, 63, 64, 65, 97]),
        1 => 0usize..=100,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn gemm_matches_the_exact_reference(
        m in dim(),
        n in dim(),
        k in dim(),
        trans in prop::sample::select(TRANSPOSES.to_vec()),
        pad in prop_oneof![3 => Just(0usize), 1 => 1usize..4],
        alpha in prop::sample::select(vec![1.0, -1.0, 2.0, 0.5, 0.0]),
        beta in prop::sample::select(vec![0.0, 1.0, -2.0, 0.25]),
        nan_c in any::<bool>(),
        seed in any::<u64>(),
    ) {
        // A NaN-filled C only with beta = 0, where it must not be read.
        let fill = (nan_c && beta == 0.0).then_some(f64::NAN);
        case((m, n, k), trans, pad, alpha, beta, fill, seed).check(&Device::emulator());
    }
}

/// A dimension around the warp-tiled f32 tile's 128 × 128 × 8 edges.
fn large_dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => prop::sample::select(vec![1usize, 4, 7, 8, 9, 63, 64, 65, 127, 128, 129, 131, 193, 256, 257]),
        1 => 0usize..=270,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// The warp-tiled f32 kernels (`TileConfig::Large`, pinned: the
    /// heuristic keeps these shapes on the small tile), bit for bit against
    /// the exact reference, ragged in every dimension, with odd leading
    /// dimensions (scalar loads) beside aligned ones (16-byte loads).
    #[test]
    fn warp_tiled_f32_matches_the_exact_reference(
        m in large_dim(),
        n in large_dim(),
        k in prop_oneof![3 => prop::sample::select(vec![0usize, 1, 3, 4, 8, 9, 16, 17, 40]), 1 => 0usize..=64],
        trans in prop::sample::select(TRANSPOSES.to_vec()),
        pad in prop_oneof![2 => Just(0usize), 1 => 1usize..5],
        alpha in prop::sample::select(vec![1.0, -1.0, 0.5, 0.0]),
        beta in prop::sample::select(vec![0.0, 1.0, -2.0]),
        seed in any::<u64>(),
    ) {
        let fill = (beta == 0.0).then_some(f64::NAN);
        let mut c = case((m, n, k), trans, pad, alpha, beta, fill, seed);
        c.tile = Some(TileConfig::Large);
        c.check(&Device::emulator());
    }
}

/// The warp-tiled kernel's lean k-loop (a block whose whole k-range of A
/// and B is inside the matrices and 16-byte aligned, proven once) and its
/// guarded one (edge blocks, odd leading dimensions, misaligned batches) in
/// one launch: bit for bit against the exact reference, and the emulator's
/// path count says which blocks took which.
#[test]
fn warp_tiled_interior_edge_and_mixed_blocks_agree_bit_for_bit() {
    let dev = Device::emulator();
    let (k, n) = (64usize, 256usize);
    for m in [256usize, 200] {
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
            for (pad, gap) in [(0usize, 0usize), (4, 4), (1, 0), (0, 1), (4, 3)] {
                let (a_rows, a_cols) = if ta { (k, m) } else { (m, k) };
                let (b_rows, b_cols) = if tb { (n, k) } else { (k, n) };
                let (lda, ldb) = (a_cols + pad, b_cols + pad);
                let (stride_a, stride_b) = (a_rows * lda + gap, b_rows * ldb + gap);
                let mut a = vec![0f32; 2 * stride_a];
                let mut b = vec![0f32; 2 * stride_b];
                for z in 0..2 {
                    for r in 0..a_rows {
                        for c in 0..a_cols {
                            let (i, p) = if ta { (c, r) } else { (r, c) };
                            a[z * stride_a + r * lda + c] = a_val(i, p) as f32;
                        }
                    }
                    for r in 0..b_rows {
                        for c in 0..b_cols {
                            let (p, j) = if tb { (c, r) } else { (r, c) };
                            b[z * stride_b + r * ldb + c] = b_val(p, j) as f32;
                        }
                    }
                }
                let (a, b) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
                let mut c = dev.alloc_zeroed::<f32>(2 * m * n).unwrap();
                let gemm = Gemm::new(m, n, k)
                    .trans_a(ta)
                    .trans_b(tb)
                    .lda(lda)
                    .ldb(ldb)
                    .batch(2)
                    .stride_a(stride_a)
                    .stride_b(stride_b)
                    .tile(TileConfig::Large);
                assert_eq!(
                    gemm.kernel_name_for::<f32, f32>(&dev).unwrap(),
                    format!(
                        "gemm_f32_{}{}_128x128x8",
                        if ta { 't' } else { 'n' },
                        if tb { 't' } else { 'n' }
                    )
                );
                let ((), profiles) = dev
                    .profile_memory(|| gemm.run(&dev, &a, &b, &mut c))
                    .unwrap();
                // Lean where the block's rows are whole in m (k and n are
                // multiples of the tile) and both operands' rows and batch
                // start are 16-byte aligned.
                let aligned = |ld: usize, at: usize| ld.is_multiple_of(4) && at.is_multiple_of(4);
                let lean: u64 = (0..2)
                    .filter(|z| aligned(lda, z * stride_a) && aligned(ldb, z * stride_b))
                    .map(|_| ((m / 128) * (n / 128)) as u64)
                    .sum();
                let blocks = (2 * m.div_ceil(128) * n.div_ceil(128)) as u64;
                let want_paths: Vec<(String, u64)> = [("guarded", blocks - lean), ("lean", lean)]
                    .into_iter()
                    .filter(|p| p.1 > 0)
                    .map(|(p, b)| (p.to_owned(), b))
                    .collect();
                assert_eq!(
                    profiles[0].paths, want_paths,
                    "m {m}, ta {ta}, tb {tb}, pad {pad}, gap {gap}: blocks per path"
                );
                let got = c.to_host().unwrap();
                for z in 0..2 {
                    let batch = &got[z * m * n..(z + 1) * m * n];
                    if let Some(e) = (0..m * n).find(|&e| batch[e].to_bits() != want[e].to_bits()) {
                        panic!(
                            "m {m}, ta {ta}, tb {tb}, pad {pad}, gap {gap}, batch {z}: \
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

/// The lean k-loop's written-out k-step at each count of k-steps it
/// handles differently: 1 (the last k-step alone, after the loop), 2 and 3
/// (the stages alternating an odd and an even number of times before the
/// last), 5; every transpose; interior blocks beside ragged edge blocks
/// (200 × 136: one lean block, three guarded) in one launch; `beta = 0`
/// with a NaN-filled `C`, and `alpha`, `beta` other than 1 and 0. Bit for
/// bit against the exact reference (`Case::check`), and the emulator's
/// path count says which blocks took the lean loop.
#[test]
fn warp_tiled_lean_k_steps_of_every_count_are_exact() {
    let dev = Device::emulator();
    for k in [8usize, 16, 24, 40] {
        for (t, &trans) in TRANSPOSES.iter().enumerate() {
            for ((m, n), lean, guarded) in [((256usize, 128usize), 2u64, 0u64), ((200, 136), 1, 3)]
            {
                for (alpha, beta, fill) in [(1.0, 0.0, Some(f64::NAN)), (-0.5, 2.0, None)] {
                    let seed = (k * 8 + t) as u64;
                    let mut c = case((m, n, k), trans, 0, alpha, beta, fill, seed);
                    c.tile = Some(TileConfig::Large);
                    let ((), profiles) = dev
                        .profile_memory(|| {
                            c.check(&dev);
                            Ok(())
                        })
                        .unwrap();
                    let f32_run = profiles
                        .iter()
                        .find(|p| {
                            p.kernel.starts_with("gemm_f32_") && p.kernel.ends_with("_128x128x8")
                        })
                        .unwrap_or_else(|| panic!("no warp-tiled f32 launch: {}", c.describe()));
                    let want: Vec<(String, u64)> = [("guarded", guarded), ("lean", lean)]
                        .into_iter()
                        .filter(|p| p.1 > 0)
                        .map(|(p, b)| (p.to_owned(), b))
                        .collect();
                    assert_eq!(f32_run.paths, want, "blocks per path: {}", c.describe());
                }
            }
        }
    }
}

/// The small and the warp-tiled f32 kernels compute every element with the
/// same FMA chain: the same bits on random (inexact) floats, and the
/// heuristic picks the large tile once its grid fills the GPU.
#[test]
fn warp_tiled_and_small_f32_tiles_agree_bit_for_bit() {
    let dev = Device::emulator();
    let mut s = seeded(7);
    for (m, n, k, (ta, tb)) in [
        (130, 129, 37, (false, false)),
        (67, 200, 20, (true, false)),
        (128, 128, 16, (false, true)),
        (129, 77, 9, (true, true)),
    ] {
        let mut floats = |len: usize| -> Vec<f32> {
            (0..len)
                .map(|_| (xorshift(&mut s) % 2001) as f32 / 997.0 - 1.0)
                .collect()
        };
        let a = dev.upload(&floats(m * k)).unwrap();
        let b = dev.upload(&floats(k * n)).unwrap();
        let c0 = floats(m * n);
        let g = Gemm::new(m, n, k)
            .trans_a(ta)
            .trans_b(tb)
            .alpha(0.75f32)
            .beta(-1.5);
        let run = |tile| {
            let mut c = dev.upload(&c0).unwrap();
            g.tile(tile).run(&dev, &a, &b, &mut c).unwrap();
            c.to_host().unwrap()
        };
        let (small, large) = (run(TileConfig::Small), run(TileConfig::Large));
        for (e, (x, y)) in small.iter().zip(&large).enumerate() {
            assert_eq!(x.to_bits(), y.to_bits(), "C[{e}] of {m}×{n}×{k} {ta}/{tb}");
        }
    }
    // 12 × 11 = 132 large blocks fill an H100 (the default emulator's 132
    // SMs); one row fewer does not.
    let pick = |m: usize| {
        Gemm::<f32>::new(m, 1408, 8)
            .kernel_name_for::<f32, f32>(&dev)
            .unwrap()
    };
    assert_eq!(pick(1536), "gemm_f32_nn_128x128x8");
    assert_eq!(pick(1408), "gemm_f32_nn_64x64x16");
    // f64: the FP64 tensor cores (the default emulator is an H100: its
    // m16n8k16 kernels, in a build with the Hopper module), or on a GPU
    // without them the one SIMT tile.
    assert_eq!(
        Gemm::<f64>::new(4096, 4096, 8)
            .kernel_name_for::<f64, f64>(&dev)
            .unwrap(),
        if warpforge::ptx::HOPPER.left_out.is_none() {
            "gemm_dmma16_f64_nn_128x64x16_s3"
        } else {
            "gemm_dmma_f64_nn_64x64x16_s3"
        }
    );
    assert_eq!(
        Gemm::<f64>::new(4096, 4096, 8)
            .kernel_name_for::<f64, f64>(&Device::emulator_for(warpforge::Arch::Sm86))
            .unwrap(),
        "gemm_f64_nn_64x64x8",
        "f64 has one SIMT tile"
    );
}

#[test]
fn every_transpose_on_edge_shapes() {
    let dev = Device::emulator();
    let shapes = [
        (1, 1, 1),
        (2, 3, 5),
        (64, 64, 16),
        (65, 63, 17),
        (67, 71, 9),
        (100, 1, 7),  // tall-skinny
        (1, 100, 7),  // short-wide
        (3, 2, 100),  // deep
        (100, 97, 3), // two by two tiles, ragged
    ];
    for (s, &shape) in shapes.iter().enumerate() {
        for (t, &trans) in TRANSPOSES.iter().enumerate() {
            for pad in [0, 3] {
                let seed = (s * 8 + t * 2 + pad) as u64;
                case(shape, trans, pad, -1.0, 0.5, None, seed).check(&dev);
            }
        }
    }
}

#[test]
fn beta_zero_never_reads_c() {
    let dev = Device::emulator();
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        for (shape, pad) in [((5, 7, 3), 2), ((70, 66, 20), 1), ((4, 9, 0), 0)] {
            let c = case(shape, trans, pad, 2.0, 0.0, Some(f64::NAN), t as u64);
            c.check(&dev);
            // Inside the m × n result there is no NaN (the padding keeps its NaN).
            let got = c.run(&dev, |x| x as f32);
            for i in 0..c.m {
                for j in 0..c.n {
                    assert!(!got[i * c.ldc + j].is_nan(), "{}", c.describe());
                }
            }
        }
    }
}

#[test]
fn alpha_zero_and_k_zero_scale_c_without_reading_a_or_b() {
    let dev = Device::emulator();
    for &trans in &TRANSPOSES {
        // alpha = 0: A and B are NaN, and not read: C ← beta·C.
        let mut c = case((9, 70, 5), trans, 1, 0.0, -2.0, None, 7);
        c.a.fill(f64::NAN);
        c.b.fill(f64::NAN);
        c.check(&dev);
        let got = c.run(&dev, |x| x);
        assert!(got.iter().all(|v| !v.is_nan()));
        // k = 0: empty A and B: C ← beta·C (and 0 with beta = 0).
        case((9, 70, 0), trans, 0, 3.0, 0.5, None, 8).check(&dev);
        case((9, 70, 0), trans, 0, 3.0, 0.0, Some(f64::NAN), 9).check(&dev);
    }
}

#[test]
fn empty_results_do_nothing() {
    let dev = Device::emulator();
    for shape in [(0, 5, 3), (5, 0, 3), (0, 0, 0), (0, 0, 7)] {
        for &trans in &TRANSPOSES {
            let c = case(shape, trans, 2, 1.0, 1.0, None, 3);
            c.check(&dev);
        }
    }
    // C with padding rows only: n = 0 leaves a non-empty buffer alone.
    let mut c = dev.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let a = dev.upload(&[1.0f32; 6]).unwrap();
    let b = dev.upload::<f32>(&[]).unwrap();
    Gemm::new(3, 0, 2).run(&dev, &a, &b, &mut c).unwrap();
    assert_eq!(c.to_host().unwrap(), [1.0, 2.0, 3.0]);
}

#[test]
fn random_floats_are_deterministic_and_within_the_error_bound() {
    let dev = Device::emulator();
    let (m, n, k) = (37, 70, 45);
    let mut s = 0x1234_5678_9abc_def1u64;
    let mut vals = |len: usize| -> Vec<f32> {
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 11) as f32 / (1u64 << 53) as f32 * 2.0 - 1.0
            })
            .collect()
    };
    let (a, b, c) = (vals(m * k), vals(k * n), vals(m * n));
    let (ad, bd) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
    let run = || {
        let mut cd = dev.upload(&c).unwrap();
        Gemm::new(m, n, k)
            .alpha(1.5f32)
            .beta(-0.75)
            .run(&dev, &ad, &bd, &mut cd)
            .unwrap();
        cd.to_host().unwrap()
    };
    let (first, second) = (run(), run());
    assert_eq!(
        first.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        second.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    // |error| ≤ γ_(k+2)·(|alpha|·Σ|a||b| + |beta·c|), γ_j = j·u / (1 − j·u).
    let u = f64::from(f32::EPSILON) / 2.0;
    let gamma = (k + 2) as f64 * u / (1.0 - (k + 2) as f64 * u);
    for i in 0..m {
        for j in 0..n {
            let (mut exact, mut mag) = (0.0f64, 0.0f64);
            for p in 0..k {
                let t = f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
                exact += t;
                mag += t.abs();
            }
            let cij = f64::from(c[i * n + j]);
            let want = 1.5 * exact - 0.75 * cij;
            let bound = gamma * (1.5 * mag + 0.75 * cij.abs());
            let got = f64::from(first[i * n + j]);
            assert!(
                (got - want).abs() <= bound,
                "({i}, {j}): {got} vs {want}, bound {bound}"
            );
        }
    }
}

#[test]
fn kernel_names_and_resources_come_from_the_tiles() {
    let names32 = [
        k::gemm_f32_nn_64x64x16::NAME,
        k::gemm_f32_nt_64x64x16::NAME,
        k::gemm_f32_tn_64x64x16::NAME,
        k::gemm_f32_tt_64x64x16::NAME,
    ];
    let names64 = [
        k::gemm_f64_nn_64x64x8::NAME,
        k::gemm_f64_nt_64x64x8::NAME,
        k::gemm_f64_tn_64x64x8::NAME,
        k::gemm_f64_tt_64x64x8::NAME,
    ];
    for (names, ty, tile) in [(names32, "f32", F32_TILE), (names64, "f64", F64_TILE)] {
        for (name, (ta, tb)) in names.iter().zip(TRANSPOSES) {
            let t = |x: bool| if x { "t" } else { "n" };
            assert_eq!(
                *name,
                format!(
                    "gemm_{ty}_{}{}_{}x{}x{}",
                    t(ta),
                    t(tb),
                    tile.m,
                    tile.n,
                    tile.k
                )
            );
        }
    }
    assert_eq!(
        Gemm::<f32>::new(1, 1, 1).trans_b(true).kernel_name(),
        names32[1]
    );
    assert_eq!(
        Gemm::<f64>::new(1, 1, 1).trans_a(true).kernel_name(),
        names64[2]
    );
    assert_eq!(
        k::gemm_f32_nn_64x64x16::SHARED_BYTES,
        F32_TILE.shared_len() * 4
    );
    assert_eq!(
        k::gemm_f64_tt_64x64x8::SHARED_BYTES,
        F64_TILE.shared_len() * 8
    );
    assert_eq!(<f32 as GemmElement>::TILE, F32_TILE);
    assert_eq!(<f64 as GemmElement>::TILE, F64_TILE);
}

// ---------------------------------------------------------------------------
// The checks before launching.

fn buffers(dev: &Device, a: usize, b: usize, c: usize) -> [DeviceBuffer<f32>; 3] {
    [a, b, c].map(|len| dev.alloc_zeroed::<f32>(len).unwrap())
}

/// The `ShapeMismatch` detail of running `g` on buffers of these lengths.
fn shape_error(g: Gemm<f32>, (a, b, c): (usize, usize, usize)) -> String {
    let dev = Device::emulator();
    let [a, b, mut c] = buffers(&dev, a, b, c);
    match g.run(&dev, &a, &b, &mut c) {
        Err(Error::ShapeMismatch { op: "gemm", detail }) => detail,
        other => panic!("expected ShapeMismatch, got {other:?}"),
    }
}

#[test]
fn leading_dimensions_shorter_than_a_row_are_refused() {
    // m = 4, n = 5, k = 6: A 4 × 6 (or 6 × 4), B 6 × 5 (or 5 × 6), C 4 × 5.
    let big = (1000, 1000, 1000);
    let e = shape_error(Gemm::new(4, 5, 6).lda(5), big);
    assert!(
        e.contains("lda = 5") && e.contains("A, stored 4 × 6"),
        "{e}"
    );
    let e = shape_error(Gemm::new(4, 5, 6).trans_a(true).lda(3), big);
    assert!(
        e.contains("lda = 3") && e.contains("6 × 4 (transposed)"),
        "{e}"
    );
    let e = shape_error(Gemm::new(4, 5, 6).ldb(4), big);
    assert!(
        e.contains("ldb = 4") && e.contains("B, stored 6 × 5"),
        "{e}"
    );
    let e = shape_error(Gemm::new(4, 5, 6).trans_b(true).ldb(5), big);
    assert!(
        e.contains("ldb = 5") && e.contains("5 × 6 (transposed)"),
        "{e}"
    );
    let e = shape_error(Gemm::new(4, 5, 6).ldc(4), big);
    assert!(
        e.contains("ldc = 4") && e.contains("C, stored 4 × 5"),
        "{e}"
    );
}

#[test]
fn buffers_too_short_for_their_matrices_are_refused() {
    // A 4 × 6 with lda 8 needs 3·8 + 6 = 30.
    let e = shape_error(Gemm::new(4, 5, 6).lda(8), (29, 30, 20));
    assert!(
        e.contains("A is stored 4 × 6") && e.contains("30 elements") && e.contains("has 29"),
        "{e}"
    );
    // B 6 × 5 needs 30; transposed, 5 × 6 with ldb 7: 4·7 + 6 = 34.
    let e = shape_error(Gemm::new(4, 5, 6), (24, 29, 20));
    assert!(
        e.contains("B is stored 6 × 5") && e.contains("has 29"),
        "{e}"
    );
    let e = shape_error(Gemm::new(4, 5, 6).trans_b(true).ldb(7), (24, 33, 20));
    assert!(
        e.contains("B is stored 5 × 6 (transposed)") && e.contains("34 elements"),
        "{e}"
    );
    // C 4 × 5 with ldc 6 needs 3·6 + 5 = 23.
    let e = shape_error(Gemm::new(4, 5, 6).ldc(6), (24, 30, 22));
    assert!(
        e.contains("C is stored 4 × 5") && e.contains("23 elements") && e.contains("has 22"),
        "{e}"
    );
    // Exactly enough runs.
    let dev = Device::emulator();
    let [a, b, mut c] = buffers(&dev, 30, 34, 23);
    Gemm::new(4, 5, 6)
        .lda(8)
        .trans_b(true)
        .ldb(7)
        .ldc(6)
        .run(&dev, &a, &b, &mut c)
        .unwrap();
    // m = 0 still checks B (and an empty result is no excuse for a short one).
    let e = shape_error(Gemm::new(0, 5, 6), (0, 29, 0));
    assert!(e.contains("B is stored"), "{e}");
}

#[test]
fn sizes_that_overflow_are_refused() {
    let dev = Device::emulator();
    let [a, b, mut c] = buffers(&dev, 8, 8, 8);
    for g in [
        Gemm::<f32>::new(usize::MAX, 1, 2),
        Gemm::new(1, 1, usize::MAX).trans_a(true).lda(usize::MAX),
        Gemm::new(1, 3, 3).ldb(usize::MAX),
        Gemm::new(3, 1, 0).ldc(usize::MAX / 2 + 1),
    ] {
        let e = g.run(&dev, &a, &b, &mut c).unwrap_err();
        assert!(
            matches!(&e, Error::SizeOverflow { what } if what.starts_with("gemm: ")),
            "{e}"
        );
    }
}

#[test]
fn grids_past_the_limit_are_refused() {
    // 65535 row tiles is the most grid.y holds; one more row is refused,
    // for the small tile (64 rows) and the warp-tiled one (128).
    let dev = Device::emulator();
    for (tile, rows, name) in [
        (TileConfig::Small, F32_TILE.m, "gemm_f32_nn_64x64x16"),
        (TileConfig::Large, 128, "gemm_f32_nn_128x128x8"),
    ] {
        let m = 65535 * rows + 1;
        let [a, b, mut c] = buffers(&dev, 0, 0, m);
        let e = Gemm::new(m, 1, 0)
            .tile(tile)
            .run(&dev, &a, &b, &mut c)
            .unwrap_err();
        match e {
            Error::LaunchConfig {
                kernel,
                what,
                value,
                limit,
                ..
            } => {
                assert_eq!(kernel, name);
                assert!(what.starts_with("grid.y"), "{what}");
                assert_eq!((value, limit), (65536, 65535));
            }
            e => panic!("expected LaunchConfig, got {e}"),
        }
    }
}

#[test]
fn buffers_of_another_device_are_refused() {
    let (dev, other) = (Device::emulator(), Device::emulator());
    for which in 0..3 {
        let mut bufs = buffers(&dev, 4, 4, 4);
        bufs[which] = other.alloc_zeroed(4).unwrap();
        let [a, b, mut c] = bufs;
        // Also for an empty result, which launches nothing.
        for g in [Gemm::new(2, 2, 2), Gemm::new(0, 2, 2)] {
            let e = g.run(&dev, &a, &b, &mut c).unwrap_err();
            assert!(matches!(e, Error::DeviceMismatch { .. }), "{which}: {e}");
        }
    }
}

// ---------------------------------------------------------------------------
// `OutMatrix<T, MicroTiles<..>>::micro_tile`, the epilogue's owned view.

/// Adds 1 to every element of this thread's 2 × 4 micro-tile of its block's
/// 6 × 8 tile, and records its linear id + 1 as the owner.
#[warpforge_macros::kernel]
fn own_micro_tiles(
    mut count: warpforge_device::OutMatrix<u32, warpforge_device::own::MicroTiles<6, 8, 2, 4>>,
    mut owner: warpforge_device::OutMatrix<u32, warpforge_device::own::MicroTiles<6, 8, 2, 4>>,
) {
    if let Some(mut mine) = count.micro_tile() {
        for i in 0..2 {
            for j in 0..4 {
                if let Some(mut c) = mine.slot(i, j) {
                    c.set(c.get() + 1);
                }
            }
        }
        assert!(mine.slot(2, 0).is_none() && mine.slot(0, 4).is_none());
    }
    if let Some(mut mine) = owner.micro_tile() {
        let (r0, c0) = mine.origin();
        let (rows, cols) = (mine.rows(), mine.cols());
        // The origin is the matrix coordinate of (0, 0): the tile's corner
        // plus the micro-tile's offset.
        let (br, bc) = (
            warpforge_device::thread::block_idx().y as usize * 6,
            warpforge_device::thread::block_idx().x as usize * 8,
        );
        let t = warpforge_device::thread::linear_thread_id() as usize;
        assert_eq!((r0, c0), (br + t / 2 * 2, bc + t % 2 * 4));
        for i in 0..rows {
            for j in 0..cols {
                if let Some(mut o) = mine.slot(i, j) {
                    o.set((t as u32 + 1) * 1000);
                }
            }
        }
    }
}

#[test]
fn micro_tiles_partition_each_block_tile_for_any_block() {
    use warpforge::{Dim3, LaunchConfig};
    let dev = Device::emulator();
    // 6 × 8 tiles of 3 × 2 micro-tiles of 2 × 4: threads 0..6 own them.
    for (rows, cols, stride) in [(6usize, 8usize, 8usize), (13, 17, 20), (1, 1, 1), (5, 9, 9)] {
        // One matrix, and a batch of 3 stacked (`OutMatrix::batch`: block z
        // works in rows z·rows ..), plus a last row that no batch owns.
        for nz in [1usize, 3] {
            let grid = Dim3::new(cols.div_ceil(8) as u32, rows.div_ceil(6) as u32, nz as u32);
            let all = nz * rows + usize::from(nz > 1);
            // Exactly 6 threads, more (they own nothing), 2-D; fewer leaves micro-tiles unwritten.
            for block in [
                Dim3::x(6),
                Dim3::x(64),
                Dim3::new(3, 4, 1),
                Dim3::new(2, 2, 2),
            ] {
                let len = (all - 1) * stride + cols;
                let mut count = dev.alloc_zeroed::<u32>(len).unwrap();
                let mut owner = dev.alloc_zeroed::<u32>(len).unwrap();
                let cfg = LaunchConfig::new(grid, block);
                dev.launch(
                    own_micro_tiles,
                    cfg,
                    (
                        count
                            .batched_matrix_mut(rows, cols, stride, nz, rows * stride)
                            .unwrap(),
                        owner
                            .batched_matrix_mut(rows, cols, stride, nz, rows * stride)
                            .unwrap(),
                    ),
                )
                .unwrap();
                let (count, owner) = (count.to_host().unwrap(), owner.to_host().unwrap());
                for r in 0..all {
                    for c in 0..cols {
                        let e = r * stride + c;
                        // Thread t owns micro-tile t = (tile row / 2)·2 + tile col / 4,
                        // rows counted within the batch.
                        let t = (((r % rows) % 6) / 2 * 2 + (c % 8) / 4) as u32;
                        let want = u32::from(u64::from(t) < block.volume() && r < nz * rows);
                        assert_eq!(count[e], want, "({r}, {c}), block {block:?}");
                        assert_eq!(
                            owner[e],
                            want * (t + 1) * 1000,
                            "({r}, {c}), block {block:?}"
                        );
                    }
                    for c in cols..stride.min(len - r * stride) {
                        assert_eq!(count[r * stride + c], 0, "padding ({r}, {c})");
                    }
                }
            }
        }
    }
}

/// Adds 1 to every element of this thread's split micro-tile of its block's
/// 8 × 12 tile (2 × 2 sub-tiles of 4 × 6, micro-tiles of 2 × 3: a 4 × 6
/// register tile in four pieces), and records its linear id + 1.
#[warpforge_macros::kernel]
fn own_split_micro_tiles(
    mut count: warpforge_device::OutMatrix<
        u32,
        warpforge_device::own::MicroTiles<8, 12, 2, 3, 2, 2>,
    >,
    mut owner: warpforge_device::OutMatrix<
        u32,
        warpforge_device::own::MicroTiles<8, 12, 2, 3, 2, 2>,
    >,
) {
    let t = warpforge_device::thread::linear_thread_id();
    if let Some(mut mine) = count.micro_tile() {
        for i in 0..4 {
            for j in 0..6 {
                if let Some(mut c) = mine.slot(i, j) {
                    c.set(c.get() + 1);
                }
            }
        }
        assert!(mine.slot(4, 0).is_none() && mine.slot(0, 6).is_none());
    }
    if let Some(mut mine) = owner.micro_tile() {
        for i in 0..4 {
            for j in 0..6 {
                if let Some(mut o) = mine.slot(i, j) {
                    o.set(t + 1);
                }
            }
        }
    }
}

#[test]
fn split_micro_tiles_partition_each_block_tile_for_any_block() {
    use warpforge::{Dim3, LaunchConfig};
    let dev = Device::emulator();
    // Each 4 × 6 sub-tile holds 2 × 2 micro-tiles: threads 0..4 own one
    // of each sub-tile.
    for (rows, cols, stride) in [
        (8usize, 12usize, 12usize),
        (13, 29, 31),
        (1, 1, 1),
        (6, 7, 7),
    ] {
        for nz in [1usize, 2] {
            let grid = Dim3::new(cols.div_ceil(12) as u32, rows.div_ceil(8) as u32, nz as u32);
            for block in [Dim3::x(4), Dim3::x(40), Dim3::new(2, 2, 1), Dim3::x(3)] {
                let len = (nz * rows - 1) * stride + cols;
                let mut count = dev.alloc_zeroed::<u32>(len).unwrap();
                let mut owner = dev.alloc_zeroed::<u32>(len).unwrap();
                dev.launch(
                    own_split_micro_tiles,
                    LaunchConfig::new(grid, block),
                    (
                        count
                            .batched_matrix_mut(rows, cols, stride, nz, rows * stride)
                            .unwrap(),
                        owner
                            .batched_matrix_mut(rows, cols, stride, nz, rows * stride)
                            .unwrap(),
                    ),
                )
                .unwrap();
                let (count, owner) = (count.to_host().unwrap(), owner.to_host().unwrap());
                for r in 0..nz * rows {
                    for c in 0..cols {
                        // Within the sub-tile: (row % 4, col % 6); its micro-tile
                        // (row / 2, col / 3), numbered row-major, 2 per row.
                        let (sr, sc) = ((r % rows) % 8 % 4, c % 12 % 6);
                        let t = (sr / 2 * 2 + sc / 3) as u32;
                        let want = u32::from(u64::from(t) < block.volume());
                        let e = r * stride + c;
                        assert_eq!(count[e], want, "({r}, {c}), block {block:?}");
                        assert_eq!(owner[e], want * (t + 1), "({r}, {c}), block {block:?}");
                    }
                    for c in cols..stride.min(len - r * stride) {
                        assert_eq!(count[r * stride + c], 0, "padding ({r}, {c})");
                    }
                }
            }
        }
    }
}

/// On a GPU: the exact property (f32 on both tiles and f64, bit for bit,
/// padding kept) on every transpose, at the edge shapes and at large ragged ones (two
/// grid columns and many rows of tiles, a deep k), with a NaN-filled `C`
/// and `beta = 0` among them.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_gemm_matches_the_exact_reference() {
    let gpu = Device::gpu(0).expect("this test needs a CUDA GPU");
    let shapes = [
        (0, 5, 3),
        (1, 1, 1),
        (65, 63, 17),
        (1000, 130, 77),
        (129, 1030, 40),
        (70, 66, 2000),
    ];
    for (s, &shape) in shapes.iter().enumerate() {
        for (t, &trans) in TRANSPOSES.iter().enumerate() {
            let seed = (s * 4 + t) as u64 + 7000;
            // The heuristic's pick, then f32's two tiles pinned (f64 has one).
            for tile in [None, Some(TileConfig::Small), Some(TileConfig::Large)] {
                let mut c = case(shape, trans, (s + t) % 4, 2.0, -0.5, None, seed);
                c.tile = tile;
                c.check(&gpu);
                let mut c = case(shape, trans, 1, 1.0, 0.0, Some(f64::NAN), seed);
                c.tile = tile;
                c.check(&gpu);
            }
        }
    }
}
