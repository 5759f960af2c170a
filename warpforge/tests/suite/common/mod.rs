//! Shared by the test suites: input generators with the values IEEE arithmetic
//! finds hard, and the per-kernel property checks run on any device.

#![allow(dead_code)]

pub mod docs;
pub mod gemm;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use warpforge::Device;
use warpforge_tools::verify::{self, KernelReport};

/// Lengths around the warp (32) and block sizes, and random ones.
pub const EDGE_LENGTHS: &[usize] = warpforge_tools::verify::EDGE_LENGTHS;

/// An f32 that is usually ordinary, sometimes ±0, subnormal, huge, ±inf or NaN.
pub fn any_f32(rng: &mut StdRng, specials: bool) -> f32 {
    match rng.random_range(0..40) {
        0 => -0.0,
        1 => 0.0,
        2 => {
            f32::from_bits(rng.random_range(1..0x0080_0000)) * if rng.random() { 1.0 } else { -1.0 }
        }
        3 => rng.random_range(-1.0e30f32..1.0e30),
        4 if specials => f32::INFINITY,
        5 if specials => f32::NEG_INFINITY,
        6 if specials => f32::NAN,
        _ => rng.random_range(-100.0f32..100.0),
    }
}

/// As [`any_f32`], for f64.
pub fn any_f64(rng: &mut StdRng, specials: bool) -> f64 {
    match rng.random_range(0..40) {
        0 => -0.0,
        1 => 0.0,
        2 => f64::from_bits(rng.random_range(1..0x000f_ffff_ffff_ffff)),
        3 => rng.random_range(-1.0e300f64..1.0e300),
        4 if specials => f64::INFINITY,
        5 if specials => f64::NEG_INFINITY,
        6 if specials => f64::NAN,
        _ => rng.random_range(-100.0f64..100.0),
    }
}

fn assert_passed(report: &KernelReport) {
    assert!(
        report.passed(),
        "{} disagrees with its CPU reference: {}",
        report.kernel,
        report.failure.as_deref().unwrap_or("")
    );
}

/// axpy_f32 on `dev` equals a·x + y rounded once to f32 (within ½ ulp of the exact value).
pub fn axpy_f32_matches_reference(dev: &Device, n: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let x: Vec<f32> = (0..n).map(|_| any_f32(&mut rng, true)).collect();
    let y: Vec<f32> = (0..n).map(|_| any_f32(&mut rng, true)).collect();
    let a = any_f32(&mut rng, false);
    let mut report = KernelReport::default_for("axpy_f32");
    verify::check_axpy_f32(dev, &mut report, a, &x, &y).expect("launch");
    assert_passed(&report);
}

/// axpy_f64 on `dev` equals `f64::mul_add` bit for bit.
pub fn axpy_f64_matches_reference(dev: &Device, n: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let x: Vec<f64> = (0..n).map(|_| any_f64(&mut rng, true)).collect();
    let y: Vec<f64> = (0..n).map(|_| any_f64(&mut rng, true)).collect();
    let a = any_f64(&mut rng, false);
    let mut report = KernelReport::default_for("axpy_f64");
    verify::check_axpy_f64(dev, &mut report, a, &x, &y).expect("launch");
    assert_passed(&report);
}

/// Whether a GPU result agrees with the emulator's where the NaN rule of
/// `warpforge_device::num` ("NaN results") leaves a NaN's bits open (f64
/// arithmetic, arithmetic in a kernel's own body): the same bits, or both
/// NaN. Where the rule fixes the bits, compare bits instead.
pub fn same_bits_or_both_nan_f64(gpu: f64, emu: f64) -> bool {
    gpu.to_bits() == emu.to_bits() || (gpu.is_nan() && emu.is_nan())
}

/// As [`same_bits_or_both_nan_f64`], for f32 computed in a kernel's own body.
pub fn same_bits_or_both_nan_f32(gpu: f32, emu: f32) -> bool {
    gpu.to_bits() == emu.to_bits() || (gpu.is_nan() && emu.is_nan())
}

/// `got == want` element for element (bit for bit for floats: NaNs of the
/// same bits equal); on a mismatch, panics with the count of differing
/// elements and the first ten as index, got, want, not the whole buffers.
pub fn assert_same<T: Copy + PartialEq + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    let differing: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
    if differing.is_empty() {
        return;
    }
    let first: Vec<String> = differing
        .iter()
        .take(10)
        .map(|&i| format!("  [{i}]: {:?} vs {:?}", got[i], want[i]))
        .collect();
    panic!(
        "{what}: {} of {} elements differ; the first {}:\n{}",
        differing.len(),
        got.len(),
        first.len(),
        first.join("\n")
    );
}

/// GPU 0, an sm_90, with the probes loaded: the Hopper probes (`wgmma`,
/// TMA) are in the probes' sm_90a module only.
pub fn hopper_gpu() -> Device {
    let gpu = Device::gpu(0).expect("this test needs a CUDA GPU");
    assert_eq!(
        gpu.compute_capability(),
        (9, 0),
        "wgmma and the TMA need an sm_90 GPU (H100, H200)"
    );
    gpu.load(&warpforge_testkit::PROBES).unwrap();
    gpu
}
