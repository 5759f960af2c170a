//! Every kernel equals its CPU reference: on the emulator always, on the GPU
//! when there is one (those tests are ignored elsewhere, never passed).
//! Lengths: 0, 1, 31, 32, 33, 1023, 1025 and random ones up to 70k.

mod common;

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

    #[test]
    fn sum_f32_matches_reference_in_emulator(n in length(), seed: u64) {
        sum_f32_matches_reference(&Device::emulator(), n, seed);
    }
}

#[test]
fn every_edge_length_in_emulator() {
    let dev = Device::emulator();
    for (i, &n) in EDGE_LENGTHS.iter().enumerate() {
        axpy_f32_matches_reference(&dev, n, i as u64);
        axpy_f64_matches_reference(&dev, n, i as u64);
        sum_f32_matches_reference(&dev, n, i as u64);
    }
}

#[test]
fn sum_is_bitwise_reproducible_in_emulator() {
    let dev = Device::emulator();
    let x: Vec<f32> = (0..50_000)
        .map(|i| ((i * 7919) % 1000) as f32 * 0.001 - 0.37)
        .collect();
    let buf = dev.upload(&x).unwrap();
    let first = warpforge::ops::sum_f32(&buf).unwrap();
    for _ in 0..3 {
        assert_eq!(
            warpforge::ops::sum_f32(&buf).unwrap().to_bits(),
            first.to_bits()
        );
    }
}

fn gpu() -> Device {
    Device::gpu(0).expect("this test needs a CUDA GPU")
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn axpy_and_sum_match_reference_on_gpu() {
    let dev = gpu();
    let mut lengths = EDGE_LENGTHS.to_vec();
    lengths.extend([65_537, 1_000_003, 16 << 20]);
    for (i, &n) in lengths.iter().enumerate() {
        axpy_f32_matches_reference(&dev, n, i as u64);
        axpy_f64_matches_reference(&dev, n, i as u64);
        sum_f32_matches_reference(&dev, n, i as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn kernels_match_reference_on_gpu(n in 0usize..3_000_000, seed: u64) {
        let dev = gpu();
        axpy_f32_matches_reference(&dev, n, seed);
        axpy_f64_matches_reference(&dev, n, seed);
        sum_f32_matches_reference(&dev, n, seed);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_and_emulator_agree_bit_for_bit_on_sum() {
    let x: Vec<f32> = (0..300_000)
        .map(|i| ((i * 104_729) % 2001) as f32 * 0.01 - 10.0)
        .collect();
    let on = |dev: &Device| warpforge::ops::sum_f32(&dev.upload(&x).unwrap()).unwrap();
    assert_eq!(on(&gpu()).to_bits(), on(&Device::emulator()).to_bits());
}
