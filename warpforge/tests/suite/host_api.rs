//! The host API turns each misuse into a clear error before anything runs.

use warpforge::{Arch, Device, Dim3, Error, LaunchConfig, ops};
use warpforge_device::{Out, shared, sync, thread};
use warpforge_kernels::elementwise::axpy_f32;
use warpforge_macros::kernel;

/// Side of the square tile `transpose_f32` moves through shared memory.
const TILE: usize = 16;

/// `t = aᵀ` for an `n × n` row-major `a`, one 16 × 16 tile per block: each
/// thread loads one element of its tile into shared memory and stores one of
/// the transposed tile. The tile indexing assumes exactly 16 × 16 threads.
#[kernel(block = (16, 16), shared = [f32; TILE * (TILE + 1)])]
pub fn transpose_f32(n: usize, a: &[f32], mut t: Out<f32>) {
    let tile = shared::dynamic::<f32>();
    let (tx, ty) = (
        thread::thread_idx().x as usize,
        thread::thread_idx().y as usize,
    );
    let (bx, by) = (
        thread::block_idx().x as usize * TILE,
        thread::block_idx().y as usize * TILE,
    );
    // Rows padded to TILE + 1 so the transposed read hits distinct banks.
    let (row, col) = (by + ty, bx + tx);
    if row < n && col < n {
        tile.store(ty * (TILE + 1) + tx, a[row * n + col]);
    }
    sync::sync_threads();
    let (row, col) = (bx + ty, by + tx);
    if row < n
        && col < n
        && let Some(mut out) = t.at(row * n + col)
    {
        out.set(tile.load(tx * (TILE + 1) + ty));
    }
}

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
            // Beyond the default emulated sm_90's 227 KiB.
            LaunchConfig::new(Dim3::x(1), Dim3::x(32)).with_shared_bytes(240_000),
            "shared memory bytes per block (dynamic + static, with opt-in)",
            240_000,
            232_448,
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
    assert_eq!(transpose_f32::SHARED_BYTES, TILE * (TILE + 1) * 4);
    assert_eq!(axpy_f32::SHARED_BYTES, 0);
    // The launches of transpose_f32 below ask for none and still get their tile.
}

#[test]
fn shared_memory_beyond_48_kib_is_opted_into_up_to_the_limit() {
    let dev = Device::emulator();
    let x = dev.upload(&[1.0f32; 4]).unwrap();
    let mut y = dev.upload(&[0.0f32; 4]).unwrap();
    // 96 KiB: above the 48 KiB default, within every target's opt-in limit.
    let cfg = LaunchConfig::for_elements(4, 32)
        .unwrap()
        .with_shared_bytes(96 * 1024);
    dev.launch(axpy_f32, cfg, (1.0f32, &x, &mut y)).unwrap();
    assert_eq!(y.to_host().unwrap(), vec![1.0; 4]);
    // The default emulator is an sm_90 (H100-class) GPU.
    assert_eq!(dev.emulated_arch(), Some(Arch::Sm90));
    assert_eq!(dev.compute_capability(), (9, 0));
    assert_eq!(dev.limits().max_shared_per_block, 48 * 1024);
    assert_eq!(dev.limits().max_shared_per_block_optin, 232448);
}

#[test]
fn each_emulated_arch_has_its_gpus_shared_memory_limit_and_compute_capability() {
    // The CUDA programming guide's per-compute-capability figures, in bytes.
    let expected = [
        (Arch::Sm80, (8, 0), 166912),
        (Arch::Sm86, (8, 6), 101376),
        (Arch::Sm89, (8, 9), 101376),
        (Arch::Sm90, (9, 0), 232448),
    ];
    for (arch, cc, optin) in expected {
        let dev = Device::emulator_for(arch);
        assert_eq!(dev.emulated_arch(), Some(arch));
        assert_eq!(dev.compute_capability(), cc, "{arch}");
        assert_eq!(dev.limits().max_shared_per_block, 49152, "{arch}");
        assert_eq!(dev.limits().max_shared_per_block_optin, optin, "{arch}");
        assert_eq!(arch.to_string().parse::<Arch>(), Ok(arch));
        // The PTX variant a GPU of that kind would load (sm_80: the only one).
        assert_eq!(
            warpforge::ptx::module_for(dev.compute_capability()).map(|m| m.arch),
            Some("sm_80")
        );
        // A reset keeps the architecture.
        assert_eq!(dev.reset().unwrap().emulated_arch(), Some(arch));
    }
    assert!("sm_75".parse::<Arch>().unwrap_err().contains("sm_75"));
}

/// A launch asking for `bytes` of shared memory on an emulator of `arch`.
fn launch_with_shared(arch: Arch, bytes: u32) -> Result<Vec<f32>, Error> {
    let dev = Device::emulator_for(arch);
    let x = dev.upload(&[1.0f32, 2.0, 3.0])?;
    let mut y = dev.upload(&[1.0f32; 3])?;
    let cfg = LaunchConfig::for_elements(3, 32)?.with_shared_bytes(bytes);
    dev.launch(axpy_f32, cfg, (2.0f32, &x, &mut y))?;
    y.to_host()
}

#[test]
fn more_than_99_kib_of_shared_memory_runs_on_an_sm_90_and_is_refused_on_an_sm_86() {
    let bytes = 160 * 1024; // an H100-sized tile: above sm_86's 99 KiB, below sm_80's 163 KiB
    for arch in [Arch::Sm90, Arch::Sm80] {
        assert_eq!(
            launch_with_shared(arch, bytes).unwrap(),
            [3.0, 5.0, 7.0],
            "{arch}"
        );
    }
    // One byte past each limit is refused, naming the kernel, the bytes and the limit.
    for (arch, limit) in [
        (Arch::Sm86, 101376),
        (Arch::Sm89, 101376),
        (Arch::Sm90, 232448),
    ] {
        let asked = if arch == Arch::Sm90 { limit + 1 } else { bytes };
        let e = launch_with_shared(arch, asked).unwrap_err();
        let Error::LaunchConfig {
            kernel,
            value,
            limit: got_limit,
            ..
        } = &e
        else {
            panic!("{arch}: {e}")
        };
        assert_eq!(
            (*kernel, *value, *got_limit),
            ("axpy_f32", u64::from(asked), u64::from(limit)),
            "{arch}"
        );
        let text = e.to_string();
        for part in [
            "axpy_f32",
            &asked.to_string(),
            &limit.to_string(),
            "shared memory",
        ] {
            assert!(text.contains(part), "{arch}: {text:?} lacks {part:?}");
        }
        // Exactly at the limit it runs.
        assert_eq!(
            launch_with_shared(arch, limit).unwrap(),
            [3.0, 5.0, 7.0],
            "{arch}"
        );
    }
}

#[test]
fn an_output_smaller_than_the_problem_is_refused_before_launch() {
    let dev = Device::emulator();
    let x = dev.upload(&[1.0f32; 100]).unwrap();
    let mut y = dev.upload(&[5.0f32; 50]).unwrap();
    let cfg = LaunchConfig::for_elements(100, 256).unwrap();
    let e = dev.launch(axpy_f32, cfg, (1.0f32, &x, &mut y)).unwrap_err();
    let Error::ShapeMismatch { op, detail } = &e else {
        panic!("{e}")
    };
    assert_eq!(*op, "axpy_f32");
    assert!(
        detail.contains("argument 3") && detail.contains("50") && detail.contains("100"),
        "{detail}"
    );
    // Nothing ran: y is untouched.
    assert_eq!(y.to_host().unwrap(), vec![5.0; 50]);
    // A config without a problem size (explicit grid and block) is the kernel's business.
    let explicit = LaunchConfig::new(Dim3::x(1), Dim3::x(128));
    dev.launch(axpy_f32, explicit, (1.0f32, &x, &mut y))
        .unwrap();
}

#[test]
fn a_kernel_runs_with_the_block_shape_it_declares() {
    use warpforge::Kernel;
    assert_eq!(transpose_f32::BLOCK, Some(Dim3::xy(16, 16)));
    assert_eq!(axpy_f32::BLOCK, None);
    // 40 is not a multiple of the tile: the edge tiles are partial.
    let n = 40;
    let a: Vec<f32> = (0..n * n).map(|i| i as f32).collect();
    let dev = Device::emulator();
    let a_dev = dev.upload(&a).unwrap();
    let mut t = dev.alloc_zeroed::<f32>(n * n).unwrap();
    let cfg = LaunchConfig::for_2d(n, n, (16, 16)).unwrap();
    assert_eq!(cfg.grid, Dim3::xy(3, 3));
    dev.launch(transpose_f32, cfg, (n, &a_dev, &mut t)).unwrap();
    let t = t.to_host().unwrap();
    for r in 0..n {
        for c in 0..n {
            assert_eq!(t[r * n + c], a[c * n + r], "t[{r}][{c}]");
        }
    }
}

#[test]
fn another_block_shape_is_refused_before_anything_runs() {
    let n = 16;
    let dev = Device::emulator();
    let a = dev.upload(&vec![1.0f32; n * n]).unwrap();
    let mut t = dev.upload(&vec![-1.0f32; n * n]).unwrap();
    // Same thread count in another shape, another count, and a 1-D block.
    for block in [Dim3::xy(32, 8), Dim3::xy(16, 8), Dim3::x(256)] {
        let e = dev
            .launch(
                transpose_f32,
                LaunchConfig::new(Dim3::x(1), block),
                (n, &a, &mut t),
            )
            .unwrap_err();
        let Error::BlockShape {
            kernel,
            required,
            found,
        } = e
        else {
            panic!("{e}")
        };
        assert_eq!(
            (kernel, required, found),
            ("transpose_f32", Dim3::xy(16, 16), block)
        );
        let msg = e.to_string();
        for part in [
            "transpose_f32",
            "(16, 16, 1)",
            &block.to_string(),
            "Dim3::new(16, 16, 1)",
        ] {
            assert!(msg.contains(part), "{part:?} missing from: {msg}");
        }
    }
    // Nothing ran: the output is as uploaded.
    assert_eq!(t.to_host().unwrap(), vec![-1.0; n * n]);
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
        warpforge::ptx::REDUCE.variants[0]
            .entries()
            .contains(&axpy_f32::NAME)
    );
}

#[test]
fn zero_length_buffers_work_everywhere() {
    let dev = Device::emulator();
    let x = dev.upload::<f32>(&[]).unwrap();
    assert!(x.is_empty());
    assert_eq!(warpforge::reduce::sum(&x).unwrap(), 0.0);
    let mut y = dev.alloc_zeroed::<f32>(0).unwrap();
    ops::axpy(1.0, &x, &mut y).unwrap();
    assert_eq!(y.to_host().unwrap(), Vec::<f32>::new());
}

/// `y[i] = 2·x[i]`, declared for blocks of at most 128 threads, 4 blocks per
/// SM and 64 registers (`.maxntid 128, 1, 1`, `.minnctapersm 4`, `.maxnreg 64`).
#[kernel(max_threads = 128, min_blocks = 4, max_registers = 64)]
pub fn twice_bounded(x: &[f32], mut y: Out<f32>) {
    let i = thread::global_index_x();
    if let (Some(&xi), Some(mut yi)) = (x.get(i), y.at(i)) {
        yi.set(2.0 * xi);
    }
}

#[test]
fn a_block_over_the_launch_bounds_is_refused_naming_the_kernel() {
    use warpforge::Kernel;
    use warpforge_device::kernel::LaunchBounds;
    assert_eq!(
        twice_bounded::LAUNCH_BOUNDS,
        LaunchBounds {
            max_threads: Some(128),
            min_blocks: Some(4),
            max_registers: Some(64),
        }
    );
    assert_eq!(axpy_f32::LAUNCH_BOUNDS, LaunchBounds::NONE);
    let n = 300;
    let dev = Device::emulator();
    let x = dev
        .upload(&(0..n).map(|i| i as f32).collect::<Vec<_>>())
        .unwrap();
    let mut y = dev.upload(&vec![-1.0f32; n]).unwrap();
    for block in [Dim3::x(256), Dim3::xy(16, 16), Dim3::new(8, 4, 5)] {
        let grid = Dim3::x(n.div_ceil(block.volume() as usize) as u32);
        let e = dev
            .launch(twice_bounded, LaunchConfig::new(grid, block), (&x, &mut y))
            .unwrap_err();
        let Error::BlockOverLaunchBounds {
            kernel,
            max_threads,
            found,
            threads,
        } = e
        else {
            panic!("{e}")
        };
        assert_eq!(
            (kernel, max_threads, found, threads),
            ("twice_bounded", 128, block, block.volume())
        );
        let msg = e.to_string();
        for part in ["twice_bounded", "max_threads = 128", &block.to_string()] {
            assert!(msg.contains(part), "{part:?} missing from: {msg}");
        }
    }
    assert!(
        y.to_host().unwrap().iter().all(|&v| v == -1.0),
        "a refused launch ran"
    );
    // At the bound, and under it, it runs.
    for block in [Dim3::x(128), Dim3::x(64)] {
        let grid = Dim3::x(n.div_ceil(block.volume() as usize) as u32);
        dev.launch(twice_bounded, LaunchConfig::new(grid, block), (&x, &mut y))
            .unwrap();
    }
    let y = y.to_host().unwrap();
    assert!((0..n).all(|i| y[i] == 2.0 * i as f32));
}
