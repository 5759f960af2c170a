//! The host API turns each misuse into a clear error before anything runs.

use warpforge::{Device, Dim3, Error, LaunchConfig, ops};
use warpforge_kernels::elementwise::axpy_f32;
use warpforge_kernels::reduce::sum_f32;

#[test]
fn no_driver_or_no_device_is_an_error_never_a_panic() {
    match (warpforge::gpu::driver_present(), Device::gpu(0)) {
        (false, Err(e)) => assert!(matches!(e, Error::NoDriver), "{e}"),
        (false, Ok(_)) => panic!("opened a GPU without a driver"),
        // With a driver, either a usable GPU or a specific reason there is none.
        (true, Ok(dev)) => assert!(dev.is_gpu()),
        (true, Err(e)) => assert!(
            matches!(
                e,
                Error::NoDevice { .. } | Error::DriverTooOld { .. } | Error::UnsupportedGpu { .. }
            ),
            "{e}"
        ),
    }
    // An ordinal no machine has is NoDevice (or NoDriver without a driver).
    let e = Device::gpu(1 << 20).unwrap_err();
    assert!(matches!(e, Error::NoDriver | Error::NoDevice { .. }), "{e}");
}

#[test]
fn auto_falls_back_to_the_emulator_with_the_reason() {
    let (dev, why) = Device::auto();
    assert_eq!(dev.is_gpu(), why.is_none());
}

#[test]
fn mismatched_lengths_are_a_shape_error_naming_both() {
    let dev = Device::emulator();
    let x = dev.upload(&[1.0f32; 10]).unwrap();
    let mut y = dev.upload(&[1.0f32; 12]).unwrap();
    let e = ops::axpy(2.0, &x, &mut y).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { op: "axpy", .. }));
    let msg = e.to_string();
    assert!(msg.contains("10") && msg.contains("12"), "{msg}");
    // Nothing was written.
    assert_eq!(y.to_host().unwrap(), vec![1.0; 12]);
}

#[test]
fn a_buffer_from_another_device_is_rejected_before_launch() {
    let (a, b) = (Device::emulator(), Device::emulator());
    let x = a.upload(&[1.0f32; 4]).unwrap();
    let mut y = b.upload(&[0.0f32; 4]).unwrap();
    let e = b
        .launch(
            axpy_f32,
            LaunchConfig::for_elements(4, 32).unwrap(),
            (1.0f32, &x, &mut y),
        )
        .unwrap_err();
    let Error::DeviceMismatch { expected, found } = &e else {
        panic!("{e}")
    };
    assert_eq!((expected, found), (&b.name(), &a.name()));
    assert_eq!(y.to_host().unwrap(), vec![0.0; 4]);
}

#[test]
fn launch_configs_beyond_the_limits_name_the_limit() {
    let dev = Device::emulator();
    let x = dev.upload(&[1.0f32; 4]).unwrap();
    let mut y = dev.upload(&[0.0f32; 4]).unwrap();
    let cases = [
        (
            LaunchConfig::new(Dim3::x(1), Dim3::x(2048)),
            "threads per block",
            2048,
            1024,
        ),
        (
            LaunchConfig::new(Dim3::xy(1, 70_000), Dim3::x(32)),
            "grid.y",
            70_000,
            65_535,
        ),
        (
            LaunchConfig::new(Dim3::x(1), Dim3::new(1, 1, 65)),
            "block.z",
            65,
            64,
        ),
        (LaunchConfig::new(Dim3::x(0), Dim3::x(32)), "grid.x", 0, 1),
        (
            LaunchConfig::new(Dim3::x(1), Dim3::x(32)).with_shared_bytes(100_000),
            "dynamic shared memory bytes",
            100_000,
            49_152,
        ),
    ];
    for (cfg, what_expected, value_expected, limit_expected) in cases {
        let e = dev.launch(axpy_f32, cfg, (1.0f32, &x, &mut y)).unwrap_err();
        let Error::LaunchConfig {
            kernel,
            what,
            value,
            limit,
            ..
        } = e
        else {
            panic!("{e}")
        };
        assert_eq!(
            (kernel, what, value, limit),
            ("axpy_f32", what_expected, value_expected, limit_expected)
        );
    }
}

#[test]
fn a_kernel_gets_the_shared_memory_it_declares() {
    use warpforge::Kernel;
    assert_eq!(sum_f32::SHARED_BYTES, 32 * 4);
    // A launch that asks for none still gets the declared 128 bytes: the sum works.
    let dev = Device::emulator();
    let x = dev.upload(&[1.0f32; 100]).unwrap();
    let mut partial = dev.alloc_zeroed::<f32>(1).unwrap();
    dev.launch(
        sum_f32,
        LaunchConfig::new(Dim3::x(1), Dim3::x(64)),
        (&x, &mut partial),
    )
    .unwrap();
    assert_eq!(partial.to_host().unwrap(), vec![100.0]);
}

#[test]
fn kernel_description_matches_its_rust_signature() {
    use warpforge::Kernel;
    use warpforge_device::kernel::ParamKind;
    let kinds: Vec<_> = axpy_f32::PARAMS
        .iter()
        .map(|p| (p.name, p.kind, p.ty))
        .collect();
    assert_eq!(
        kinds,
        [
            ("a", ParamKind::Scalar, "f32"),
            ("x", ParamKind::Input, "f32"),
            ("y", ParamKind::Output, "f32")
        ]
    );
    assert_eq!(axpy_f32::NAME, "axpy_f32");
    assert!(
        warpforge::ptx::MODULES[0]
            .entries()
            .contains(&axpy_f32::NAME)
    );
}

#[test]
fn zero_length_buffers_work_everywhere() {
    let dev = Device::emulator();
    let x = dev.upload::<f32>(&[]).unwrap();
    assert!(x.is_empty());
    assert_eq!(ops::sum_f32(&x).unwrap(), 0.0);
    let mut y = dev.alloc_zeroed::<f32>(0).unwrap();
    ops::axpy(1.0, &x, &mut y).unwrap();
    assert_eq!(y.to_host().unwrap(), Vec::<f32>::new());
}
