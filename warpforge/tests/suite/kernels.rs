//! The elementwise kernels equal their CPU references: on the emulator always, on the GPU
//! when there is one (those tests are ignored elsewhere, never passed).
//! Lengths: 0, 1, 31, 32, 33, 1023, 1025, 65 537, 1 000 003 and random ones up to 70k
//! (on the GPU also 16M, and random ones up to 3M).
//! The reductions are tested in `reductions.rs`.

use crate::common;

use common::*;
use proptest::prelude::*;
use warpforge::Device;

fn length() -> impl Strategy<Value = usize> {
    prop_oneof![proptest::sample::select(EDGE_LENGTHS), 1026usize..70_000]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn axpy_f32_matches_reference_in_emulator(n in length(), seed: u64) {
        axpy_f32_matches_reference(&Device::emulator(), n, seed);
    }

    #[test]
    fn axpy_f64_matches_reference_in_emulator(n in length(), seed: u64) {
        axpy_f64_matches_reference(&Device::emulator(), n, seed);
    }
}

/// Both axpy kernels on `dev` at every edge length and at `more`.
fn axpy_at_lengths(dev: &Device, more: &[usize]) {
    for (i, &n) in EDGE_LENGTHS.iter().chain(more).enumerate() {
        axpy_f32_matches_reference(dev, n, i as u64);
        axpy_f64_matches_reference(dev, n, i as u64);
    }
}

#[test]
fn every_edge_length_in_emulator() {
    axpy_at_lengths(&Device::emulator(), &[65_537, 1_000_003]);
}

fn gpu() -> Device {
    Device::gpu(0).expect("this test needs a CUDA GPU")
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn axpy_matches_reference_on_gpu() {
    axpy_at_lengths(&gpu(), &[65_537, 1_000_003, 16 << 20]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn kernels_match_reference_on_gpu(n in 0usize..3_000_000, seed: u64) {
        let dev = gpu();
        axpy_f32_matches_reference(&dev, n, seed);
        axpy_f64_matches_reference(&dev, n, seed);
    }
}
