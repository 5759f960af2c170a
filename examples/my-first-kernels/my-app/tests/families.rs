//! This app depends on warpforge with its default features, which build the
//! kernel library's reductions and elementwise kernels and leave the other
//! families out (README: "Features"). An operation of a family that was left
//! out is an error that names the feature to enable, on the emulator as on a
//! GPU; the families that were built run.

use warpforge::gemm::Gemm;
use warpforge::{Device, Error, reduce};

#[test]
fn a_gemm_without_the_gemm_feature_is_family_not_built_naming_the_feature() {
    let dev = Device::emulator();
    let a = dev.upload(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let b = dev.upload(&[5.0f32, 6.0, 7.0, 8.0]).unwrap();
    let mut c = dev.upload(&[-1.0f32; 4]).unwrap();
    let e = Gemm::new(2, 2, 2).run(&dev, &a, &b, &mut c).unwrap_err();
    assert!(
        matches!(
            e,
            Error::FamilyNotBuilt {
                module: "warpforge-kernels-gemm-simt",
                feature: "gemm",
                ..
            }
        ),
        "{e}"
    );
    let message = e.to_string();
    for part in ["`gemm` feature", "features = [\"gemm\"]", "warpforge-kernels-gemm-simt"] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    // Nothing ran: the output is as it was.
    assert_eq!(c.to_host().unwrap(), [-1.0; 4]);
}

#[test]
fn the_default_features_run_a_reduction() {
    let dev = Device::emulator();
    let x: Vec<f32> = (1..=1000).map(|i| i as f32).collect();
    let got = reduce::sum(&dev.upload(&x).unwrap()).unwrap();
    assert_eq!(got, 500_500.0);
}
