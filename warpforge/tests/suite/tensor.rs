//! Tensor-core fragments: the layout tables match the PTX ISA's
//! `mma.m16n8k16` tables, and one warp's `mma` (fragments from global memory,
//! or staged by `cp.async` and loaded by `ldmatrix`) equals A·B + C within
//! the accumulation bound.

use proptest::prelude::*;
use std::collections::HashSet;
use warpforge::{Device, DeviceBuffer, Dim3, Element, LaunchConfig};
use warpforge_device::mma::{K, M, N, a_coord, b_coord, c_coord};
use warpforge_testkit::{self as probe, PROBES};

use crate::common::{assert_same, hopper_gpu};

/// Every (lane, element) pair names a distinct element, and together they
/// cover the matrix: the fragments partition it.
fn partitions(
    rows: usize,
    cols: usize,
    per_lane: usize,
    coord: fn(u32, usize) -> (usize, usize),
) -> bool {
    let seen: HashSet<_> = (0..32)
        .flat_map(|l| (0..per_lane).map(move |i| coord(l, i)))
        .collect();
    seen.len() == rows * cols && seen.iter().all(|&(r, c)| r < rows && c < cols)
}

#[test]
fn fragment_layouts_partition_their_matrices() {
    assert!(partitions(M, K, 8, a_coord));
    assert!(partitions(K, N, 4, b_coord));
    assert!(partitions(M, N, 4, c_coord));
}

#[test]
fn fragment_layouts_match_the_ptx_isa_tables() {
    // PTX ISA 9.7.14.5.8, m16n8k16 .f16/.bf16, groupID = lane / 4, t = lane % 4:
    // A: a0,a1 at (g, 2t..), a2,a3 at (g+8, 2t..), a4,a5 at (g, 2t+8..), a6,a7 at (g+8, 2t+8..).
    assert_eq!(
        (0..8).map(|i| a_coord(0, i)).collect::<Vec<_>>(),
        [
            (0, 0),
            (0, 1),
            (8, 0),
            (8, 1),
            (0, 8),
            (0, 9),
            (8, 8),
            (8, 9)
        ]
    );
    assert_eq!(
        (0..8).map(|i| a_coord(13, i)).collect::<Vec<_>>(),
        [
            (3, 2),
            (3, 3),
            (11, 2),
            (11, 3),
            (3, 10),
            (3, 11),
            (11, 10),
            (11, 11)
        ]
    );
    // B: b0,b1 at (2t.., g), b2,b3 at (2t+8.., g).
    assert_eq!(
        (0..4).map(|i| b_coord(13, i)).collect::<Vec<_>>(),
        [(2, 3), (3, 3), (10, 3), (11, 3)]
    );
    // C/D: c0,c1 at (g, 2t..), c2,c3 at (g+8, 2t..).
    assert_eq!(
        (0..4).map(|i| c_coord(31, i)).collect::<Vec<_>>(),
        [(7, 6), (7, 7), (15, 6), (15, 7)]
    );
}

/// D = A·B + C exactly (f64), and each output's error bound: the GPU adds 17
/// terms with at least single precision in some order.
fn reference(a: &[f64], b: &[f64], c: &[f32]) -> Vec<(f64, f64)> {
    let mut d = Vec::new();
    for r in 0..M {
        for n in 0..N {
            let terms: Vec<f64> = (0..K).map(|k| a[r * K + k] * b[k * N + n]).collect();
            let exact = terms.iter().sum::<f64>() + f64::from(c[r * N + n]);
            let mag = terms.iter().map(|t| t.abs()).sum::<f64>() + f64::from(c[r * N + n]).abs();
            d.push((exact, 17.0 * 2f64.powi(-24) * mag));
        }
    }
    d
}

fn run_mma<T: Element>(
    dev: &Device,
    a: &[T],
    b: &[T],
    c: &[f32],
    launch: impl FnOnce(&DeviceBuffer<T>, &DeviceBuffer<T>, &DeviceBuffer<f32>, &mut DeviceBuffer<f32>),
) -> Vec<f32> {
    let (ab, bb, cb) = (
        dev.upload(a).unwrap(),
        dev.upload(b).unwrap(),
        dev.upload(c).unwrap(),
    );
    let mut d = dev.alloc_zeroed::<f32>(M * N).unwrap();
    launch(&ab, &bb, &cb, &mut d);
    d.to_host().unwrap()
}

fn one_warp() -> LaunchConfig {
    LaunchConfig::new(Dim3::x(1), Dim3::x(32))
}

fn check(d: &[f32], a: &[f64], b: &[f64], c: &[f32]) -> Result<(), TestCaseError> {
    for (i, (exact, bound)) in reference(a, b, c).into_iter().enumerate() {
        prop_assert!(
            (f64::from(d[i]) - exact).abs() <= bound,
            "D[{}][{}] = {} vs {} (bound {:e})",
            i / N,
            i % N,
            d[i],
            exact,
            bound
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn mma_computes_a_times_b_plus_c(
        a in proptest::collection::vec(-4.0f32..4.0, M * K),
        b in proptest::collection::vec(-4.0f32..4.0, K * N),
        c in proptest::collection::vec(-10.0f32..10.0, M * N),
    ) {
        let dev = Device::emulator();
        let (ah, bh): (Vec<half::f16>, Vec<half::f16>) = (a.iter().map(|&v| half::f16::from_f32(v)).collect(), b.iter().map(|&v| half::f16::from_f32(v)).collect());
        let (af, bf): (Vec<f64>, Vec<f64>) = (ah.iter().map(|v| v.to_f64()).collect(), bh.iter().map(|v| v.to_f64()).collect());
        let d = run_mma(&dev, &ah, &bh, &c, |a, b, c, d| dev.launch(probe::probe_mma_f16, one_warp(), (a, b, c, d)).unwrap());
        check(&d, &af, &bf, &c)?;
        let staged = run_mma(&dev, &ah, &bh, &c, |a, b, c, d| dev.launch(probe::probe_mma_ldmatrix, one_warp(), (a, b, c, d)).unwrap());
        prop_assert_eq!(&staged, &d, "ldmatrix + cp.async load the same fragments as the layout tables");

        let (ab, bb): (Vec<half::bf16>, Vec<half::bf16>) = (a.iter().map(|&v| half::bf16::from_f32(v)).collect(), b.iter().map(|&v| half::bf16::from_f32(v)).collect());
        let (af, bf): (Vec<f64>, Vec<f64>) = (ab.iter().map(|v| v.to_f64()).collect(), bb.iter().map(|v| v.to_f64()).collect());
        let d = run_mma(&dev, &ab, &bb, &c, |a, b, c, d| dev.launch(probe::probe_mma_bf16, one_warp(), (a, b, c, d)).unwrap());
        check(&d, &af, &bf, &c)?;
    }
}

/// The NaN rule of `warpforge_device::num` ("NaN results"), restated from its
/// source (CUDA Programming Guide, "Floating-Point Standard"): every NaN an
/// f32 result of the GPU gets is 0x7fffffff, the accumulators of `mma` too.
const GPU_NAN_F32: u32 = 0x7fff_ffff;

/// A: f16 values with, in row 0, a NaN (a payload unlike the canonical one)
/// and, in row 1, an infinity that meets a zero of B (∞·0). D rows 0 and 1
/// are NaN, the others finite.
fn nan_making_operands() -> (Vec<half::f16>, Vec<half::f16>, Vec<f32>) {
    let mut a: Vec<half::f16> = (0..M * K)
        .map(|i| half::f16::from_f32(((i * 5) % 9) as f32 - 4.0))
        .collect();
    let mut b: Vec<half::f16> = (0..K * N)
        .map(|i| half::f16::from_f32(((i * 7) % 5) as f32 - 2.0))
        .collect();
    a[3] = half::f16::from_bits(0xfe01);
    a[K + 5] = half::f16::INFINITY;
    for n in 0..N {
        b[5 * N + n] = half::f16::ZERO;
    }
    let c: Vec<f32> = (0..M * N).map(|i| i as f32 / 4.0).collect();
    (a, b, c)
}

#[test]
fn mma_nans_are_the_gpus_nan() {
    let dev = Device::emulator();
    let (a, b, c) = nan_making_operands();
    let d = run_mma(&dev, &a, &b, &c, |a, b, c, d| {
        dev.launch(probe::probe_mma_f16, one_warp(), (a, b, c, d))
            .unwrap()
    });
    for (i, v) in d.iter().enumerate() {
        if i / N < 2 {
            assert_eq!(v.to_bits(), GPU_NAN_F32, "D[{}][{}]", i / N, i % N);
        } else {
            assert!(v.is_finite(), "D[{}][{}] = {v}", i / N, i % N);
        }
    }
}

#[test]
fn mma_with_a_partial_warp_is_a_reported_fault() {
    let dev = Device::emulator();
    let z = vec![half::f16::ZERO; M * K];
    let c = vec![0.0f32; M * N];
    let (a, b, cb) = (
        dev.upload(&z).unwrap(),
        dev.upload(&z[..K * N]).unwrap(),
        dev.upload(&c).unwrap(),
    );
    let mut d = dev.alloc_zeroed::<f32>(M * N).unwrap();
    let err = dev
        .launch(
            probe::probe_mma_f16,
            LaunchConfig::new(Dim3::x(1), Dim3::x(20)),
            (&a, &b, &cb, &mut d),
        )
        .unwrap_err();
    assert!(err.to_string().contains("lane 20"), "{err}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_mma_is_within_the_bound_and_ldmatrix_agrees_with_the_tables() {
    let gpu = Device::gpu(0).expect("this test needs a CUDA GPU");
    gpu.load(&PROBES).unwrap();
    let a: Vec<half::f16> = (0..M * K)
        .map(|i| half::f16::from_f32(((i * 37) % 17) as f32 / 4.0 - 2.0))
        .collect();
    let b: Vec<half::f16> = (0..K * N)
        .map(|i| half::f16::from_f32(((i * 11) % 13) as f32 / 3.0 - 2.0))
        .collect();
    let c: Vec<f32> = (0..M * N).map(|i| i as f32 / 7.0 - 5.0).collect();
    let d = run_mma(&gpu, &a, &b, &c, |a, b, c, d| {
        gpu.launch(probe::probe_mma_f16, one_warp(), (a, b, c, d))
            .unwrap()
    });
    let staged = run_mma(&gpu, &a, &b, &c, |a, b, c, d| {
        gpu.launch(probe::probe_mma_ldmatrix, one_warp(), (a, b, c, d))
            .unwrap()
    });
    assert_eq!(d, staged);
    let (af, bf): (Vec<f64>, Vec<f64>) = (
        a.iter().map(|v| v.to_f64()).collect(),
        b.iter().map(|v| v.to_f64()).collect(),
    );
    check(&d, &af, &bf, &c).unwrap();

    // NaN accumulators: the NaN rule fixes their bits, on both.
    let (a, b, c) = nan_making_operands();
    let on = |dev: &Device| {
        run_mma(dev, &a, &b, &c, |a, b, c, d| {
            dev.launch(probe::probe_mma_f16, one_warp(), (a, b, c, d))
                .unwrap()
        })
    };
    let (g, e) = (on(&gpu), on(&Device::emulator()));
    for (i, (g, e)) in g.iter().zip(&e).enumerate() {
        if e.is_nan() {
            assert_eq!(g.to_bits(), e.to_bits(), "D[{}][{}]", i / N, i % N);
        } else {
            assert!(g.is_finite(), "D[{}][{}] = {g}", i / N, i % N);
        }
    }
}

/// `probe_wgmma_bf16` (64 × 64 · 64 × 128 + C) on `dev`, inputs row-major.
fn run_wgmma(dev: &Device, a: &[half::bf16], b: &[half::bf16], c: &[f32]) -> Vec<f32> {
    run_wgmma_probe(dev, a, b, c, false)
}

/// `probe_wgmma_bf16` (one warpgroup), or `probe_wgmma_specialised` (two,
/// one giving its registers to the other), on `dev`.
fn run_wgmma_probe(
    dev: &Device,
    a: &[half::bf16],
    b: &[half::bf16],
    c: &[f32],
    specialised: bool,
) -> Vec<f32> {
    let (ab, bb, cb) = (
        dev.upload(a).unwrap(),
        dev.upload(b).unwrap(),
        dev.upload(c).unwrap(),
    );
    let mut d = dev.alloc_zeroed::<f32>(64 * probe::WGMMA_N).unwrap();
    if specialised {
        let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(256));
        dev.launch(probe::probe_wgmma_specialised, cfg, (&ab, &bb, &cb, &mut d))
    } else {
        let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(128));
        dev.launch(probe::probe_wgmma_bf16, cfg, (&ab, &bb, &cb, &mut d))
    }
    .unwrap();
    d.to_host().unwrap()
}

/// Integer-valued operands for `probe_wgmma_bf16` from `seed`: every product
/// and sum exact in f32, so any two correct devices agree bit for bit.
fn wgmma_operands(seed: usize) -> (Vec<half::bf16>, Vec<half::bf16>, Vec<f32>) {
    let (n, k) = (probe::WGMMA_N, probe::WGMMA_K);
    let int = |i: usize, m: usize, r: usize| ((i * m + seed) % r) as f32 - (r / 2) as f32;
    let a = (0..64 * k)
        .map(|i| half::bf16::from_f32(int(i, 7, 9)))
        .collect();
    let b = (0..k * n)
        .map(|i| half::bf16::from_f32(int(i, 5, 7)))
        .collect();
    let c = (0..64 * n).map(|i| int(i, 3, 11)).collect();
    (a, b, c)
}

/// `A·B + C` in f64 (exact for these operands), row-major 64 × N.
fn wgmma_reference(a: &[half::bf16], b: &[half::bf16], c: &[f32]) -> Vec<f32> {
    let (n, k) = (probe::WGMMA_N, probe::WGMMA_K);
    (0..64 * n)
        .map(|i| {
            let (r, col) = (i / n, i % n);
            let dot: f64 = (0..k)
                .map(|j| a[r * k + j].to_f64() * b[j * n + col].to_f64())
                .sum();
            (dot + f64::from(c[i])) as f32
        })
        .collect()
}

/// A warpgroup's `wgmma` through the host launch path (the emulator): the
/// exact `A·B + C` in every element, for several operand sets; and the same
/// from the warp-specialised probe (`setmaxnreg` in both warpgroups).
#[test]
fn wgmma_probe_computes_the_exact_product() {
    let dev = Device::emulator();
    for seed in [0, 3, 8] {
        let (a, b, c) = wgmma_operands(seed);
        assert_eq!(
            run_wgmma(&dev, &a, &b, &c),
            wgmma_reference(&a, &b, &c),
            "seed {seed}"
        );
    }
    let (a, b, c) = wgmma_operands(5);
    assert_eq!(
        run_wgmma_probe(&dev, &a, &b, &c, true),
        wgmma_reference(&a, &b, &c),
        "the warp-specialised probe"
    );
}

/// On a Hopper GPU (sm_90: the probe is in the sm_90a module only), the
/// `wgmma` probe gives the exact product, bit for bit the emulator's.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_wgmma_matches_the_emulator_bit_for_bit() {
    let gpu = hopper_gpu();
    let emu = Device::emulator();
    for seed in [0, 5] {
        let (a, b, c) = wgmma_operands(seed);
        let on_gpu = run_wgmma(&gpu, &a, &b, &c);
        assert_eq!(on_gpu, wgmma_reference(&a, &b, &c), "seed {seed}");
        let specialised = run_wgmma_probe(&gpu, &a, &b, &c, true);
        assert_eq!(
            specialised, on_gpu,
            "seed {seed}: the warp-specialised probe"
        );
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&on_gpu),
            bits(&run_wgmma(&emu, &a, &b, &c)),
            "seed {seed}"
        );
    }
}

/// A ragged problem for `probe_tma_wgmma`: A is `TMA_M × TMA_K` (rows
/// `TMA_LDA` apart), B is `TMA_K × TMA_N` (rows `TMA_LDB` apart), both
/// smaller than the probe's 64 × 64 and 64 × 128 tiles in some dimension,
/// so boxes reach past their ends.
const TMA_M: usize = 50;
const TMA_K: usize = 40;
const TMA_N: usize = 100;
const TMA_LDA: usize = 48;
const TMA_LDB: usize = 104;

/// Integer-valued A and B for `probe_tma_wgmma` (padding included).
fn tma_operands(seed: usize) -> (Vec<half::bf16>, Vec<half::bf16>) {
    let int = |i: usize, m: usize, r: usize| ((i * m + seed) % r) as f32 - (r / 2) as f32;
    let a = (0..TMA_M * TMA_LDA)
        .map(|i| half::bf16::from_f32(int(i, 7, 9)))
        .collect();
    let b = (0..TMA_K * TMA_LDB)
        .map(|i| half::bf16::from_f32(int(i, 5, 7)))
        .collect();
    (a, b)
}

/// `probe_tma_wgmma` on `dev`: the 64 × 128 tile of `A·B` whose corner is
/// row `m0`, column `n0`.
fn run_tma_probe(dev: &Device, a: &[half::bf16], b: &[half::bf16], m0: i32, n0: i32) -> Vec<f32> {
    use warpforge::TensorMap;
    use warpforge_device::swizzle::Sw128;
    let (ab, bb) = (dev.upload(a).unwrap(), dev.upload(b).unwrap());
    let map_a =
        TensorMap::<half::bf16, 2, 64, 64, Sw128>::matrix(&ab, TMA_M, TMA_K, TMA_LDA).unwrap();
    let map_b =
        TensorMap::<half::bf16, 2, 64, 64, Sw128>::matrix(&bb, TMA_K, TMA_N, TMA_LDB).unwrap();
    let mut d = dev.alloc_zeroed::<f32>(64 * probe::WGMMA_N).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(128));
    dev.launch(
        probe::probe_tma_wgmma,
        cfg,
        (&map_a, &map_b, m0, n0, &mut d),
    )
    .unwrap();
    d.to_host().unwrap()
}

/// The tile at (`m0`, `n0`) of `A·B` in f64 (exact here), zero outside A's
/// rows and B's columns (K past the tensors is zero on both sides).
fn tma_reference(a: &[half::bf16], b: &[half::bf16], m0: i32, n0: i32) -> Vec<f32> {
    let n = probe::WGMMA_N;
    (0..64 * n)
        .map(|i| {
            let (r, c) = (
                i as i64 / n as i64 + i64::from(m0),
                (i % n) as i64 + i64::from(n0),
            );
            if !(0..TMA_M as i64).contains(&r) || !(0..TMA_N as i64).contains(&c) {
                return 0.0;
            }
            let (r, c) = (r as usize, c as usize);
            let dot: f64 = (0..TMA_K)
                .map(|k| a[r * TMA_LDA + k].to_f64() * b[k * TMA_LDB + c].to_f64())
                .sum();
            dot as f32
        })
        .collect()
}

/// Corners of the probe's tile: inside, hanging over every edge, and
/// wholly outside (all zeros).
const TMA_CORNERS: [(i32, i32); 5] = [(0, 0), (-4, -30), (20, 50), (-64, 0), (49, 99)];

/// TMA-fed `wgmma` through the host launch path (host tensor maps, the
/// `TensorMap` kernel parameter, the emulator's box gather with zero fill):
/// the exact tile of `A·B` at every corner.
#[test]
fn tma_probe_multiplies_the_boxes_it_loaded() {
    let dev = Device::emulator();
    let (a, b) = tma_operands(2);
    for (m0, n0) in TMA_CORNERS {
        assert_same(
            &run_tma_probe(&dev, &a, &b, m0, n0),
            &tma_reference(&a, &b, m0, n0),
            &format!("corner ({m0}, {n0})"),
        );
    }
}

/// `probe_tma_store` on `dev` over `batches` of `rows × cols` f32 (rows
/// `ld` apart, batches `ld·rows + 32` apart; padding −1) on `blocks`
/// blocks: the buffer afterwards.
fn run_store_probe(
    dev: &Device,
    (batches, rows, cols, ld): (usize, usize, usize, usize),
    blocks: u32,
) -> Vec<f32> {
    use warpforge_device::swizzle::Sw128;
    let stride = rows * ld + 32;
    let mut c = dev.upload(&vec![-1.0f32; batches * stride]).unwrap();
    let matrix = c
        .batched_matrix_mut(rows, cols, ld, batches, stride)
        .unwrap()
        .tma_store::<32, 32, Sw128>()
        .unwrap();
    let cfg = LaunchConfig::new(Dim3::x(blocks), Dim3::x(128));
    dev.launch(probe::probe_tma_store, cfg, (matrix,)).unwrap();
    c.to_host().unwrap()
}

/// The store probe's matrix: 3 batches of 100 × 92 f32, rows 96 apart.
/// Ragged in both tile dimensions (64 × 64 tiles, 32 × 32 boxes); 92
/// columns are 368 bytes a row, a whole number of the 16-byte chunks a TMA
/// store writes (90, the shape an H200 wrote two columns past, is refused:
/// `tma_store_of_rows_ending_mid_chunk_is_refused`).
const STORE_PROBE_SHAPE: (usize, usize, usize, usize) = (3, 100, 92, 96);

/// The TMA store through the host launch path (a `StoreMatrix` argument,
/// its map checked and bound as the launch's output): every element of 3
/// batches of 100 × 90 (ragged in both tile dimensions) written once with
/// its value (the global race detector on), the padding columns and the
/// gaps between batches untouched, on persistent grids of 1, 2 and 5
/// blocks (12 tiles of 4 boxes; two staging tiles in turn).
#[test]
fn tma_store_probe_writes_every_owned_box_once() {
    // The sm_90a PTX entry declares the parameters a launch pushes: the
    // map's address, then the matrix's seven.
    let (variant, params) = PROBES
        .variants
        .iter()
        .find_map(|v| Some((v, v.entry_params("probe_tma_store")?.unwrap())))
        .expect("the probes' sm_90a module has probe_tma_store");
    assert_eq!(variant.arch, "sm_90a");
    warpforge::ptx::check_signature(
        "probe_tma_store",
        "warpforge-testkit",
        <probe::probe_tma_store as warpforge_device::kernel::Kernel>::PARAMS,
        &params,
    )
    .unwrap();
    assert_eq!(params.len(), 8);

    let dev = Device::emulator();
    let (batches, rows, cols, ld) = STORE_PROBE_SHAPE;
    let stride = rows * ld + 32;
    for blocks in [1, 2, 5] {
        let c = run_store_probe(&dev, (batches, rows, cols, ld), blocks);
        for (i, &v) in c.iter().enumerate() {
            let (b, r, col) = (i / stride, i % stride / ld, i % stride % ld);
            let want = if r < rows && col < cols {
                probe::stored_value(b, r, col)
            } else {
                -1.0
            };
            assert_eq!(v, want, "{blocks} blocks, element {i} ({b}, {r}, {col})");
        }
    }
}

/// A matrix whose rows end mid-way through a 16-byte chunk is refused for
/// TMA stores, naming the columns a GPU would write past it (an H200 wrote
/// columns 90 and 91 of every row of a 90-column f32 matrix, rows 96
/// apart); and were such a map made, the emulator's store is the fault
/// that names the same columns, not a silently clipped write.
#[test]
fn tma_store_of_rows_ending_mid_chunk_is_refused() {
    use warpforge::Error;
    use warpforge_device::swizzle::Sw128;
    let dev = Device::emulator();
    let mut c = dev.alloc_zeroed::<f32>(100 * 96).unwrap();
    let e = c
        .matrix_mut(100, 90, 96)
        .unwrap()
        .tma_store::<32, 32, Sw128>()
        .unwrap_err();
    match e {
        Error::InvalidParameter {
            parameter, detail, ..
        } => {
            assert_eq!(parameter, "cols");
            assert!(detail.contains("columns 90..92"), "{detail}");
            assert!(detail.contains("multiple of 4"), "{detail}");
        }
        other => panic!("not InvalidParameter: {other}"),
    }
    // f16: 8 to a chunk. 100 columns end mid-chunk (columns 100..104); 104 do not.
    let mut h = dev.alloc_zeroed::<half::f16>(100 * 128).unwrap();
    let e = h
        .matrix_mut(100, 100, 128)
        .unwrap()
        .tma_store::<64, 32, Sw128>()
        .unwrap_err();
    assert!(e.to_string().contains("columns 100..104"), "{e}");
    assert!(
        h.matrix_mut(100, 104, 128)
            .unwrap()
            .tma_store::<64, 32, Sw128>()
            .is_ok()
    );
}

/// A matrix the TMA cannot store is refused on the host, naming the field.
#[test]
fn tma_store_maps_the_tma_cannot_use_are_refused() {
    use warpforge::Error;
    use warpforge_device::swizzle::Sw128;
    let dev = Device::emulator();
    let mut c = dev.alloc_zeroed::<f32>(100 * 96).unwrap();
    let detail = |e: Error| match e {
        Error::InvalidParameter { detail, .. } => detail,
        other => panic!("not InvalidParameter: {other}"),
    };
    // Rows 91 elements apart: 364 bytes, not a multiple of 16.
    let e = c
        .matrix_mut(100, 88, 91)
        .unwrap()
        .tma_store::<32, 32, Sw128>()
        .unwrap_err();
    assert!(detail(e).starts_with("globalStrides[0]"));
    // Two batches 9604 elements apart: 38416 bytes, a multiple of 16; 9601 is not.
    let mut c = dev.alloc_zeroed::<f32>(2 * 9604).unwrap();
    let e = c
        .batched_matrix_mut(100, 92, 96, 2, 9601)
        .unwrap()
        .tma_store::<32, 32, Sw128>()
        .unwrap_err();
    assert!(detail(e).starts_with("globalStrides[1]"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_tma_store_probe_matches_the_emulator() {
    let gpu = hopper_gpu();
    assert_same(
        &run_store_probe(&gpu, STORE_PROBE_SHAPE, 5),
        &run_store_probe(&Device::emulator(), STORE_PROBE_SHAPE, 5),
        "the GPU's TMA stores (left) against the emulator's",
    );
}

/// Maps the TMA cannot use are refused on the host, naming the field.
#[test]
fn tensor_maps_the_tma_cannot_use_are_refused() {
    use warpforge::{Error, TensorMap};
    use warpforge_device::swizzle::{Sw64, Unswizzled};
    let dev = Device::emulator();
    let buf = dev.alloc_zeroed::<half::bf16>(64 * 72).unwrap();
    let field = |e: Error| match e {
        Error::InvalidParameter { detail, .. } => detail,
        other => panic!("not InvalidParameter: {other}"),
    };
    // Rows 66 elements apart: 132 bytes, not a multiple of 16.
    let e = TensorMap::<half::bf16, 2, 32, 8, Sw64>::matrix(&buf, 64, 66, 66).unwrap_err();
    assert!(field(e).starts_with("globalStrides[0]"));
    // 65 rows of 72 do not fit the buffer.
    let e = TensorMap::<half::bf16, 2, 32, 8, Sw64>::matrix(&buf, 65, 72, 72).unwrap_err();
    assert!(field(e).contains("reaches past its buffer"));
    // A box row of 64 bf16 (128 bytes) is over the 64-byte swizzle's span.
    let e = TensorMap::<half::bf16, 2, 64, 8, Sw64>::matrix(&buf, 64, 72, 72).unwrap_err();
    assert!(field(e).starts_with("boxDim[0]"));
    // Zero rows.
    let e = TensorMap::<half::bf16, 2, 8, 8, Unswizzled>::matrix(&buf, 0, 72, 72).unwrap_err();
    assert!(field(e).starts_with("globalDim[1]"));
    // Strides in elements that overflow in bytes.
    let e =
        TensorMap::<half::bf16, 2, 8, 8, Unswizzled>::new(&buf, [8, 8], &[usize::MAX]).unwrap_err();
    assert!(matches!(e, Error::SizeOverflow { .. }), "{e}");
    // The same maps, kept within the rules, are accepted.
    assert!(TensorMap::<half::bf16, 2, 32, 8, Sw64>::matrix(&buf, 64, 72, 72).is_ok());
    assert!(TensorMap::<half::bf16, 3, 32, 8, Sw64>::batched(&buf, 2, 32, 64, 72, 32 * 72).is_ok());
}

/// On a Hopper GPU, the TMA-fed probe gives the exact tiles (the driver's
/// encoded maps, zero fill at every edge), bit for bit the emulator's.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_tma_probe_matches_the_emulator_bit_for_bit() {
    let gpu = hopper_gpu();
    let emu = Device::emulator();
    let (a, b) = tma_operands(6);
    for (m0, n0) in TMA_CORNERS {
        let on_gpu = run_tma_probe(&gpu, &a, &b, m0, n0);
        let corner = format!("corner ({m0}, {n0})");
        assert_same(&on_gpu, &tma_reference(&a, &b, m0, n0), &corner);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_same(
            &bits(&on_gpu),
            &bits(&run_tma_probe(&emu, &a, &b, m0, n0)),
            &format!("{corner}, bits: the GPU (left) against the emulator"),
        );
    }
}
