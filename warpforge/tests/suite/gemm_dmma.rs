//! f64 GEMM on the FP64 tensor cores on the emulator: `gemm_dmma_f64_*`
//! (`mma.sync.m8n8k4`, 64 × 64 × 16) on sm_80 and `gemm_dmma16_f64_*`
//! (sm_90's `mma.sync.m16n8k16`, 128 × 64 × 16, the Hopper module) on
//! sm_90: which kernel runs where (sm_86 and sm_89 the SIMT cores), and
//! exact results against a CPU reference, on both, for every transpose,
//! ragged shapes around both tiles, 1 × 1 × 1, leading dimensions that
//! force the guarded path, batches (broadcast included) and split-k. Operands are small integers and
//! the factors dyadic, so every partial sum is exact in f64 and any
//! accumulation order gives the same bits: the results must equal the
//! reference bit for bit (a dropped or doubled product changes an element).
//! The lean path's 64-bit fragment loads are checked free of bank
//! conflicts (the 32-byte row padding's purpose).

use crate::common;

use common::gemm::{Case, TRANSPOSES, case};
use warpforge::gemm::{Gemm, TileConfig};
use warpforge::{Arch, Device};

/// Integers in `[-8, 8]`.
fn ints(word: u64) -> f64 {
    (word % 17) as f64 - 8.0
}

/// The reference: per element an fma chain over `p` in order from +0, then
/// `alpha·acc`, then `fma(beta, c, ·)` unless `beta = 0` (C not read),
/// padding untouched. Exact on these inputs.
fn expected(c: &Case) -> Vec<f64> {
    let mut d = c.c.clone();
    for i in 0..c.m {
        for j in 0..c.n {
            let acc = if c.alpha == 0.0 {
                0.0
            } else {
                (0..c.k).fold(0.0f64, |acc, p| c.a_at(i, p).mul_add(c.b_at(p, j), acc))
            };
            let prod = c.alpha * acc;
            let out = &mut d[i * c.ldc + j];
            *out = if c.beta == 0.0 {
                prod
            } else {
                c.beta.mul_add(*out, prod)
            };
        }
    }
    d
}

fn gemm(c: &Case) -> Gemm<f64> {
    Gemm::new(c.m, c.n, c.k)
        .trans_a(c.ta)
        .trans_b(c.tb)
        .alpha(c.alpha)
        .beta(c.beta)
        .lda(c.lda)
        .ldb(c.ldb)
        .ldc(c.ldc)
}

/// Runs `c` on `dev` with `gemm` (the case's, adjusted), asserts the kernel
/// is `kernel` and every element of `C` (padding included) is the
/// reference's bits.
fn check_with(dev: &Device, c: &Case, gemm: Gemm<f64>, kernel: &str) {
    assert_eq!(
        gemm.kernel_name_for::<f64, f64>(dev).unwrap(),
        kernel,
        "{}",
        c.describe()
    );
    let (a, b) = (dev.upload(&c.a).unwrap(), dev.upload(&c.b).unwrap());
    let mut out = dev.upload(&c.c).unwrap();
    gemm.run(dev, &a, &b, &mut out).unwrap();
    let (got, want) = (out.to_host().unwrap(), expected(c));
    for (e, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g.to_bits() == w.to_bits(),
            "{kernel}: C[{}][{}] = {g}, expected {w}: {}",
            e / c.ldc.max(1),
            e % c.ldc.max(1),
            c.describe()
        );
    }
}

/// Whether `dev` runs sm_90's `m16n8k16` kernels: an sm_90, in a build
/// with the Hopper module (the workspace's tests have it).
fn runs_m16n8k16(dev: &Device) -> bool {
    dev.compute_capability() == (9, 0) && warpforge::ptx::HOPPER.left_out.is_none()
}

/// The FP64 tensor-core kernel `dev` runs for these transposes.
fn dmma_kernel(dev: &Device, (ta, tb): (bool, bool)) -> String {
    let t = |x: bool| if x { 't' } else { 'n' };
    if runs_m16n8k16(dev) {
        format!("gemm_dmma16_f64_{}{}_128x64x16_s3", t(ta), t(tb))
    } else {
        format!("gemm_dmma_f64_{}{}_64x64x16_s3", t(ta), t(tb))
    }
}

/// The two FP64 tensor-core families' devices: an A100 (m8n8k4) and an
/// H100 (m16n8k16).
fn devices() -> [Device; 2] {
    [
        Device::emulator_for(Arch::Sm80),
        Device::emulator_for(Arch::Sm90),
    ]
}

#[test]
fn f64_runs_on_the_fp64_tensor_cores_where_the_gpu_has_them() {
    let g = Gemm::<f64>::new(4096, 4096, 4096);
    let a100 = Device::emulator_for(Arch::Sm80);
    assert_eq!(
        g.kernel_name_for::<f64, f64>(&a100).unwrap(),
        "gemm_dmma_f64_nn_64x64x16_s3"
    );
    assert_eq!(
        g.tile_config_for::<f64, f64>(&a100).unwrap(),
        Some(TileConfig::Small)
    );
    // sm_90's large shape is not there: pinning it is refused, naming why.
    let e = g
        .tile(TileConfig::Large)
        .kernel_name_for::<f64, f64>(&a100)
        .unwrap_err();
    assert!(e.to_string().contains("m16n8k16"), "{e}");
    let h100 = Device::emulator_for(Arch::Sm90);
    assert!(
        runs_m16n8k16(&h100),
        "the workspace's tests build the Hopper module"
    );
    assert_eq!(
        g.kernel_name_for::<f64, f64>(&h100).unwrap(),
        "gemm_dmma16_f64_nn_128x64x16_s3"
    );
    assert_eq!(
        g.tile_config_for::<f64, f64>(&h100).unwrap(),
        Some(TileConfig::Large)
    );
    // `.dmma(true)` picks the device's best FP64 tensor-core kernel; `.tile`
    // pins the shape: m8n8k4 runs on sm_90 too.
    assert_eq!(
        g.dmma(true).kernel_name_for::<f64, f64>(&h100).unwrap(),
        "gemm_dmma16_f64_nn_128x64x16_s3"
    );
    assert_eq!(
        g.tile(TileConfig::Small)
            .kernel_name_for::<f64, f64>(&h100)
            .unwrap(),
        "gemm_dmma_f64_nn_64x64x16_s3"
    );
    for arch in [Arch::Sm86, Arch::Sm89] {
        let dev = Device::emulator_for(arch);
        assert_eq!(
            g.kernel_name_for::<f64, f64>(&dev).unwrap(),
            "gemm_f64_nn_64x64x8",
            "{arch:?}: no FP64 tensor cores"
        );
        // Pinned, the tensor-core kernels run there too.
        assert_eq!(
            g.dmma(true).kernel_name_for::<f64, f64>(&dev).unwrap(),
            "gemm_dmma_f64_nn_64x64x16_s3"
        );
    }
    // Pinned to the SIMT cores on a GPU with FP64 tensor cores; `.tile`
    // does not choose for f64.
    let h100 = Device::emulator_for(Arch::Sm90);
    assert_eq!(
        g.dmma(false).kernel_name_for::<f64, f64>(&h100).unwrap(),
        "gemm_f64_nn_64x64x8"
    );
    assert_eq!(
        g.dmma(false).tile_config_for::<f64, f64>(&h100).unwrap(),
        None
    );
    // The SIMT cores have one f64 tile: `.tile` does not choose there.
    assert_eq!(
        g.dmma(false)
            .tile(TileConfig::Large)
            .kernel_name_for::<f64, f64>(&h100)
            .unwrap(),
        "gemm_f64_nn_64x64x8"
    );
    // The pin is f64's: refused for another pair, naming it.
    let e = Gemm::<f32>::new(2, 2, 2)
        .dmma(false)
        .kernel_name_for::<f32, f32>(&h100)
        .unwrap_err();
    assert!(e.to_string().contains("dmma"), "{e}");
}

/// Both families, around both tiles (64 × 64 × 16 and 128 × 64 × 16):
/// each shape on the A100 (m8n8k4) and the H100 (m16n8k16).
#[test]
fn every_transpose_on_ragged_shapes_is_exact() {
    let shapes = [
        (1, 1, 1),
        (2, 3, 5),
        (64, 64, 16),
        (63, 65, 15),
        (65, 63, 17),
        (128, 64, 48),
        (127, 65, 17),
        (129, 63, 31),
        (7, 130, 33),
        (129, 1, 3),
        (1, 129, 20),
        (3, 2, 100),
    ];
    for dev in devices() {
        for (s, &shape) in shapes.iter().enumerate() {
            for (t, &trans) in TRANSPOSES.iter().enumerate() {
                // pad 0: the lean path where a block is interior; 1: odd
                // leading dimensions, every block guarded.
                for pad in [0, 1] {
                    let seed = (s * 8 + t * 2 + pad) as u64;
                    let c = case(shape, trans, pad, -1.5, 0.25, None, seed, ints);
                    check_with(&dev, &c, gemm(&c), &dmma_kernel(&dev, trans));
                }
            }
        }
    }
}

#[test]
fn alpha_zero_beta_zero_and_k_zero() {
    for dev in devices() {
        for &trans in &TRANSPOSES {
            let kernel = dmma_kernel(&dev, trans);
            // beta = 0 with a NaN C: never read.
            let c = case((70, 66, 20), trans, 0, 2.0, 0.0, Some(f64::NAN), 3, ints);
            check_with(&dev, &c, gemm(&c), &kernel);
            // alpha = 0 with NaN operands: A and B not read, C ← beta·C.
            let mut c = case((9, 70, 5), trans, 1, 0.0, -2.0, None, 7, ints);
            c.a.fill(f64::NAN);
            c.b.fill(f64::NAN);
            check_with(&dev, &c, gemm(&c), &kernel);
            // k = 0.
            let c = case((9, 70, 0), trans, 0, 3.0, 0.5, None, 8, ints);
            check_with(&dev, &c, gemm(&c), &kernel);
        }
    }
}

/// A batch of 3 (each batch its own A; B broadcast with stride 0), checked
/// per batch against the reference of that batch.
#[test]
fn batches_with_a_broadcast_operand_are_exact() {
    for dev in devices() {
        batches_on(&dev);
    }
}

fn batches_on(dev: &Device) {
    for &(ta, tb) in &TRANSPOSES {
        let (m, n, k, count) = (70, 65, 24, 3);
        let parts: Vec<Case> = (0..count)
            .map(|z| case((m, n, k), (ta, tb), 0, 1.0, 0.5, None, 40 + z as u64, ints))
            .collect();
        // Broadcast B: every batch uses batch 0's.
        let parts: Vec<Case> = parts
            .into_iter()
            .map(|mut c| {
                c.b = case((m, n, k), (ta, tb), 0, 1.0, 0.5, None, 40, ints).b;
                c
            })
            .collect();
        let (sa, sc) = (parts[0].a.len(), parts[0].c.len());
        let cat = |f: fn(&Case) -> &Vec<f64>| parts.iter().flat_map(f).copied().collect::<Vec<_>>();
        let (a, b) = (
            dev.upload(&cat(|c| &c.a)).unwrap(),
            dev.upload(&parts[0].b).unwrap(),
        );
        let mut c = dev.upload(&cat(|c| &c.c)).unwrap();
        let g = gemm(&parts[0])
            .batch(count)
            .stride_a(sa)
            .stride_b(0)
            .stride_c(sc);
        assert_eq!(
            g.kernel_name_for::<f64, f64>(dev).unwrap(),
            dmma_kernel(dev, (ta, tb))
        );
        g.run(dev, &a, &b, &mut c).unwrap();
        let got = c.to_host().unwrap();
        for (z, part) in parts.iter().enumerate() {
            let want = expected(part);
            let batch = &got[z * sc..(z + 1) * sc];
            for (e, (g, w)) in batch.iter().zip(&want).enumerate() {
                assert!(
                    g.to_bits() == w.to_bits(),
                    "batch {z}, C[{e}] = {g}, expected {w}: {}",
                    part.describe()
                );
            }
        }
    }
}

/// Split-k (3 ranges of 32, 32 and 26 of k = 90) through the DMMA
/// kernels' batched launch and the f64 sum: exact on integers.
#[test]
fn split_k_is_exact() {
    for dev in devices() {
        for &trans in &TRANSPOSES {
            let c = case((40, 33, 90), trans, 0, 0.5, -1.0, None, 11, ints);
            let g = gemm(&c).split_k(3);
            assert_eq!(g.split_k_for::<f64, f64>(&dev).unwrap(), 3);
            check_with(&dev, &c, g, &dmma_kernel(&dev, trans));
        }
    }
}

/// Interior blocks take the lean path (proven copies, no check per chunk)
/// and odd leading dimensions the guarded one; both are exact, and the
/// lean path's 64-bit fragment loads meet no bank conflict (the 32-byte
/// padding of every stored row: rows 8 banks apart).
#[test]
fn lean_and_guarded_paths_are_exact_and_fragment_loads_conflict_free() {
    for dev in devices() {
        paths_on(&dev);
    }
}

fn paths_on(dev: &Device) {
    // 128 × 128: 4 blocks of the 64 × 64 tile, 2 of the 128 × 64 one.
    let blocks = if runs_m16n8k16(dev) { 2 } else { 4 };
    for &trans in &TRANSPOSES {
        for (pad, path) in [(0, "lean"), (1, "guarded")] {
            let c = case((128, 128, 64), trans, pad, 1.0, 0.0, None, 5, ints);
            let (a, b) = (dev.upload(&c.a).unwrap(), dev.upload(&c.b).unwrap());
            let mut out = dev.upload(&c.c).unwrap();
            let ((), profiles) = dev
                .profile_memory(|| gemm(&c).run(dev, &a, &b, &mut out))
                .unwrap();
            let p = &profiles[0];
            assert_eq!(p.kernel, dmma_kernel(dev, trans));
            assert_eq!(p.paths, vec![(path.to_owned(), blocks)], "{}", c.describe());
            if path == "lean" {
                assert!(p.shared_load.requests > 0);
                assert_eq!(
                    p.shared_load.bank_conflicts,
                    0,
                    "{}: fragment loads",
                    c.describe()
                );
            }
            let (got, want) = (out.to_host().unwrap(), expected(&c));
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits()),
                "{path}: {}",
                c.describe()
            );
        }
    }
}

/// The Hopper module (its `m16n8k16` f64 kernels, and `wgmma`) on an
/// emulator of a GPU without those instructions is refused as that GPU's
/// driver refuses it: `UnsupportedGpu`, naming the module and its
/// architecture. An emulated H100 loads it.
#[test]
fn an_sm80_emulator_refuses_the_sm90_module() {
    let hopper = &warpforge::ptx::HOPPER;
    let e = Device::emulator_for(Arch::Sm80).load(hopper).unwrap_err();
    assert!(
        matches!(e, warpforge::Error::UnsupportedGpu { module, .. } if module == hopper.name),
        "{e}"
    );
    assert!(e.to_string().contains("sm_90a"), "{e}");
    Device::emulator_for(Arch::Sm90).load(hopper).unwrap();
}

/// Uniform f64 in (−1, 1) with full 53-bit mantissas: every product and
/// partial sum rounds, so the accumulation's order and rounding show.
fn float64(word: u64) -> f64 {
    (word >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

/// On a GPU with FP64 tensor cores: its DMMA kernels give the emulator's
/// bits on random f64 operands, where every step's rounding shows — each
/// output the fma chain over k in order from C that the emulator executes
/// for `DMMA.884` (sm_80, and sm_90 pinned to the small tile) and
/// `DMMA.16x8x16` (sm_90): every transpose, a shape ragged in every tile
/// dimension, padded leading dimensions, alpha and beta. A GPU whose FP64
/// tensor cores sum a k-step's products another way fails here, naming
/// the elements.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_dmma_gemm_matches_the_emulator_bit_for_bit() {
    let gpu = Device::gpu(0).expect("this test needs a CUDA GPU");
    let arch = match gpu.compute_capability() {
        (9, 0) => Arch::Sm90,
        (8, 0) => Arch::Sm80,
        cc => panic!("FP64 tensor cores are sm_80's and sm_90's, not {cc:?}'s"),
    };
    let emulator = Device::emulator_for(arch);
    let mut tiles = vec![TileConfig::Small];
    if runs_m16n8k16(&gpu) {
        tiles.push(TileConfig::Large);
    }
    for (t, &trans) in TRANSPOSES.iter().enumerate() {
        let c = case(
            (131, 263, 173),
            trans,
            1,
            1.5,
            -0.5,
            None,
            900 + t as u64,
            float64,
        );
        for &tile in &tiles {
            let g = gemm(&c).dmma(true).tile(tile);
            let kernel = g.kernel_name_for::<f64, f64>(&gpu).unwrap();
            assert_eq!(g.kernel_name_for::<f64, f64>(&emulator).unwrap(), kernel);
            let run = |dev: &Device| {
                let (a, b) = (dev.upload(&c.a).unwrap(), dev.upload(&c.b).unwrap());
                let mut out = dev.upload(&c.c).unwrap();
                g.run(dev, &a, &b, &mut out).unwrap();
                let bits: Vec<u64> = out.to_host().unwrap().iter().map(|x| x.to_bits()).collect();
                bits
            };
            common::assert_same(
                &run(&gpu),
                &run(&emulator),
                &format!("{kernel}, GPU against the emulator: {}", c.describe()),
            );
        }
    }
}
