//! Modules load lazily: at the first launch of one of their kernels on a
//! device, once per device, however many threads launch at the same time;
//! and a GPU loads the cubin built for it when the build embedded one.
//!
//! The emulator goes through the same module table as a GPU (its "load" does
//! nothing but is counted), so the once-only rule is tested without a GPU.

use warpforge::ptx::{self, Module};
use warpforge::{Device, Error, LaunchConfig};
use warpforge_device::{Out, thread};
use warpforge_kernels::elementwise::axpy_f32;
use warpforge_macros::kernel;

/// A kernel of this test crate: its module is `warpforge` (the package name).
#[kernel]
pub fn fill_u32(v: u32, mut y: Out<u32>) {
    if let Some(mut slot) = y.at(thread::global_index_x()) {
        slot.set(v);
    }
}

/// This crate's module, as a host crate would embed its kernels crate's
/// (no PTX: the emulator runs kernels from host code).
static OURS: Module = Module::new("warpforge", &[]);

fn axpy(dev: &Device) {
    let x = dev.upload(&[1.0f32, 2.0]).unwrap();
    let mut y = dev.upload(&[1.0f32, 1.0]).unwrap();
    dev.launch(
        axpy_f32,
        LaunchConfig::for_elements(2, 32).unwrap(),
        (3.0f32, &x, &mut y),
    )
    .unwrap();
    assert_eq!(y.to_host().unwrap(), [4.0, 7.0]);
}

/// Sixteen threads launch a library kernel on a fresh device at once.
fn concurrent_first_launches(dev: &Device) {
    assert_eq!(
        dev.module_loads(),
        0,
        "a module was loaded before any launch"
    );
    assert_eq!(dev.module_image(&ptx::REDUCE), None);
    let start = std::sync::Barrier::new(16);
    std::thread::scope(|s| {
        for _ in 0..16 {
            s.spawn(|| {
                start.wait();
                axpy(dev);
            });
        }
    });
    assert_eq!(dev.module_loads(), 1);
    // Later launches and explicit loads load nothing more.
    axpy(dev);
    dev.load(&ptx::REDUCE).unwrap();
    assert_eq!(dev.module_loads(), 1);
}

#[test]
fn concurrent_first_launches_load_the_module_once_per_device() {
    let dev = Device::emulator();
    concurrent_first_launches(&dev);
    assert_eq!(
        dev.module_image(&ptx::REDUCE).as_deref(),
        Some("CPU emulator")
    );
    // A clone is the same device; another device loads its own copy, once.
    axpy(&dev.clone());
    assert_eq!(dev.module_loads(), 1);
    let other = Device::emulator();
    concurrent_first_launches(&other);
    assert_eq!(dev.module_loads(), 1);
}

#[test]
fn an_explicit_load_is_eager_and_a_different_module_under_its_name_conflicts() {
    let dev = Device::emulator();
    dev.load(&ptx::REDUCE).unwrap();
    assert_eq!(dev.module_loads(), 1);
    axpy(&dev);
    assert_eq!(dev.module_loads(), 1);
    static IMPOSTOR: Module = Module::new("warpforge-kernels-reduce", &[]);
    let e = dev.load(&IMPOSTOR).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ModuleConflict {
                module: "warpforge-kernels-reduce"
            }
        ),
        "{e}"
    );
}

#[test]
fn a_registered_module_is_loaded_at_the_first_launch_on_every_device() {
    // An unknown module's kernels still run on the emulator; nothing is loaded.
    let before = Device::emulator();
    let mut y = before.alloc_zeroed::<u32>(3).unwrap();
    let cfg = LaunchConfig::for_elements(3, 32).unwrap();
    before.launch(fill_u32, cfg, (5u32, &mut y)).unwrap();
    assert_eq!(before.module_loads(), 0);
    assert_eq!(before.module_image(&OURS), None);

    OURS.register().unwrap();
    OURS.register().unwrap(); // the same module again: fine
    static OTHER: Module = Module::new("warpforge", ptx::REDUCE.variants);
    assert!(matches!(
        OTHER.register(),
        Err(Error::ModuleConflict {
            module: "warpforge"
        })
    ));
    assert!(matches!(Module::register(&ptx::REDUCE), Ok(())));
    for dev in [Device::emulator(), Device::emulator()] {
        let mut y = dev.alloc_zeroed::<u32>(3).unwrap();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let mut mine = dev.alloc_zeroed::<u32>(3).unwrap();
                    dev.launch(fill_u32, cfg, (7u32, &mut mine)).unwrap();
                });
            }
        });
        dev.launch(fill_u32, cfg, (7u32, &mut y)).unwrap();
        assert_eq!(y.to_host().unwrap(), [7; 3]);
        assert_eq!(dev.module_loads(), 1);
        assert_eq!(dev.module_image(&OURS).as_deref(), Some("CPU emulator"));
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn on_a_gpu_opening_loads_nothing_and_the_first_launches_load_the_chosen_image_once() {
    let dev = Device::gpu(0).unwrap();
    let cc = dev.gpu_info().unwrap().compute_capability;
    let started = std::time::Instant::now();
    concurrent_first_launches(&dev);
    let expected = ptx::choose_image(cc, &ptx::REDUCE).unwrap().to_string();
    assert_eq!(
        dev.module_image(&ptx::REDUCE).as_deref(),
        Some(expected.as_str())
    );
    eprintln!(
        "first launches on {}: {:?} ({expected})",
        dev.name(),
        started.elapsed()
    );
}

/// A family of the library that a build left out (its feature off) holds no
/// PTX: loading it is `FamilyNotBuilt`, naming the feature, on the emulator
/// as on a GPU, and the device loads nothing.
#[test]
fn loading_a_family_the_build_left_out_is_family_not_built_naming_its_feature() {
    static LEFT_OUT: Module = Module::left_out("warpforge-kernels-demo", "demo");
    let dev = Device::emulator();
    let e = dev.load(&LEFT_OUT).unwrap_err();
    assert!(
        matches!(
            e,
            Error::FamilyNotBuilt {
                kernel: None,
                module: "warpforge-kernels-demo",
                feature: "demo"
            }
        ),
        "{e}"
    );
    let message = e.to_string();
    for part in [
        "nothing was loaded",
        "`warpforge-kernels-demo`",
        "`demo` feature",
        "features = [\"demo\"]",
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    assert_eq!(dev.module_loads(), 0);
    // Every family this build holds is known and loads.
    for family in ptx::LIBRARY.iter().filter(|m| m.left_out.is_none()) {
        dev.load(family).unwrap();
    }
}
