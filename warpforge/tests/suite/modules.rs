//! PTX modules: a kernel is found in the module of the crate it was compiled
//! in (`Kernel::MODULE`), never by its name alone, and its parameters are
//! checked against the PTX entry's `.param` list before it runs on a GPU.
//!
//! The checks are pure functions over the PTX text (`ptx::resolve`,
//! `Module::check_kernel`, `ptx::check_signature`), tested here over the
//! library's real embedded PTX; the GPU tests at the end do the real loads and
//! launches, and are ignored without a GPU.

use warpforge::ptx::{self, Module, PtxModule};
use warpforge::{Device, Error, Kernel, LaunchConfig};
use warpforge_device::kernel::{Param, ParamKind, RawIn, RawOut};
use warpforge_device::{Out, thread};
use warpforge_kernels::elementwise;
use warpforge_macros::kernel;

/// Checks each kernel type against its entry in `$module` (a `Module` named
/// `$name`, the kernels' crate): it resolves there, and its parameters match.
macro_rules! check_entries {
    ($module:expr, $name:literal; $($path:path),* $(,)?) => {{
        let mut checked = Vec::new();
        $(
            {
                type K = $path;
                assert_eq!(K::MODULE, $name, "{}", K::NAME);
                assert_eq!(ptx::resolve::<K>(ptx::LIBRARY.into_iter().chain([&$module])).map(|m| m.name).ok(), Some($name));
                $module
                    .check_kernel::<K>()
                    .unwrap_or_else(|e| panic!("{e}"));
                checked.push(K::NAME);
            }
        )*
        checked
    }};
}

#[test]
fn library_kernels_match_their_ptx_entries() {
    use warpforge_kernels::reduce::*;
    // A spread of parameter shapes: f32/f64 scalars, u32 and u64 scalars
    // between buffers, f16/bf16 buffers, up to six buffers.
    let checked = check_entries!(ptx::REDUCE, "warpforge-kernels-reduce";
        elementwise::axpy_f32,
        elementwise::axpy_f64,
        reduce_rows_sum_f16,
        reduce_cols_argmax_bf16,
        combine_rows_lse_f64,
        combine_cols_min_u32,
        finish_f32_to_f16,
        finish_index,
    );
    let entries = ptx::REDUCE.variants[0].entries();
    for name in checked {
        assert!(entries.contains(&name), "{name}");
    }
}

/// The probe kernels (test-only, one per device primitive) are a module of
/// their own, built by warpforge-testkit the way a user's host crate builds
/// its kernels: their entries are there and match, as the library's do.
#[test]
fn probe_kernels_match_their_own_modules_entries() {
    use warpforge_testkit::*;
    let checked = check_entries!(PROBES, "warpforge-probes";
        probe_shuffle_in,
        probe_transpose,
        probe_atomic_f16,
        probe_atomic_cas_u64,
        probe_mma_bf16,
        probe_convert,
        probe_active_mask,
    );
    let entries = PROBES.variants[0].entries();
    for name in checked {
        assert!(entries.contains(&name), "{name}");
    }
    assert!(
        entries.iter().all(|e| e.starts_with("probe_")),
        "{entries:?}"
    );
    // Only the library loaded: a probe is `ModuleNotLoaded`, naming its module.
    assert!(matches!(
        ptx::resolve::<probe_transpose>(ptx::LIBRARY),
        Err(Error::ModuleNotLoaded {
            kernel: "probe_transpose",
            module: "warpforge-probes"
        })
    ));
}

/// The library's PTX holds the library's kernels only: no probe is in it.
#[test]
fn the_library_module_has_no_probe_kernels() {
    for variant in ptx::LIBRARY.iter().flat_map(|m| m.variants) {
        let entries = variant.entries();
        assert!(!entries.is_empty(), "{}", variant.arch);
        let probes: Vec<_> = entries.iter().filter(|e| e.contains("probe_")).collect();
        assert!(probes.is_empty(), "{}: {probes:?}", variant.arch);
    }
}

#[test]
fn every_library_entry_parses() {
    for variant in ptx::LIBRARY.iter().flat_map(|m| m.variants) {
        let entries = variant.entry_signatures();
        assert_eq!(entries.len(), variant.entries().len());
        assert!(!entries.is_empty(), "{}", variant.arch);
        for e in entries {
            let params = e
                .params
                .unwrap_or_else(|err| panic!("{}: {err}", variant.arch));
            assert!(
                params.iter().all(|p| [1, 2, 4, 8].contains(&p.bytes)),
                "{}: {params:?}",
                e.name
            );
        }
    }
}

#[test]
fn a_kernel_is_checked_against_the_widths_the_ptx_declares() {
    // axpy_f32(a: f32, x: &[f32], y: Out<f32>) is `.f32, .u64 .ptr, .u64, .u64 .ptr, .u64`.
    let entry = ptx::REDUCE.variants[0]
        .entry_params("axpy_f32")
        .expect("the library has axpy_f32")
        .expect("it parses");
    let got: Vec<(usize, bool)> = entry.iter().map(|p| (p.bytes, p.pointer)).collect();
    let mut want = Vec::new();
    for p in <elementwise::axpy_f32 as Kernel>::PARAMS {
        match p.kind {
            ParamKind::Scalar => want.push((p.bytes, false)),
            ParamKind::Input | ParamKind::Output => want.extend([(8, true), (8, false)]),
            ParamKind::TensorMap => want.extend([(8, true), (8, true)]),
            ParamKind::OutputMatrix | ParamKind::StoreMatrix => {
                if p.kind == ParamKind::StoreMatrix {
                    want.push((8, true)); // the map
                }
                want.push((8, true));
                want.extend([(8, false); 6]); // length, rows, cols, strides, batches
            }
        }
    }
    assert_eq!(got, want);
    assert_eq!(want[0], (size_of::<f32>(), false));
}

/// A parameter of a hand-written description.
const fn param(name: &'static str, kind: ParamKind, ty: &'static str, bytes: usize) -> Param {
    Param {
        name,
        kind,
        ty,
        bytes,
    }
}

/// Hand-written descriptions that claim to be the library's `axpy_f32`
/// (`a: f32, x: &[f32], y: Out<f32>`) but describe other parameters.
macro_rules! lying_kernel {
    ($ty:ident, $name:literal, $args:ty, [$($p:expr),* $(,)?]) => {
        #[derive(Clone, Copy)]
        struct $ty;
        // SAFETY: NOT upheld, on purpose: this description does not match the
        // entry it names. It is only handed to the signature checks (the pure
        // ones, and a GPU launch's, which refuses it before anything runs); it
        // is never launched on the emulator, whose entry this is.
        unsafe impl Kernel for $ty {
            const NAME: &'static str = $name;
            const MODULE: &'static str = "warpforge-kernels-reduce";
            const PARAMS: &'static [Param] = &[$($p),*];
            const SHARED_BYTES: usize = 0;
            const BLOCK: Option<warpforge::Dim3> = None;
            type Args = $args;
            unsafe fn run_thread(_: Self::Args) {
                unreachable!("a lying description is never run");
            }
        }
    };
}

use ParamKind::{Input, Output, Scalar};
// `a` as f64: 8 bytes where the entry takes 4.
lying_kernel!(
    WiderScalar,
    "axpy_f32",
    (f64, RawIn<f32>, RawOut<f32>),
    [
        param("a", Scalar, "f64", 8),
        param("x", Input, "f32", 4),
        param("y", Output, "f32", 4),
    ]
);
// The buffer before the scalar: the same count, other widths in order.
lying_kernel!(
    Reordered,
    "axpy_f32",
    (RawIn<f32>, f32, RawOut<f32>),
    [
        param("x", Input, "f32", 4),
        param("a", Scalar, "f32", 4),
        param("y", Output, "f32", 4),
    ]
);
// `x` as two u64 scalars: the same widths, but an integer where the entry takes a pointer.
lying_kernel!(
    PointerAsInteger,
    "axpy_f32",
    (f32, u64, u64, RawOut<f32>),
    [
        param("a", Scalar, "f32", 4),
        param("x_ptr", Scalar, "u64", 8),
        param("x_len", Scalar, "u64", 8),
        param("y", Output, "f32", 4),
    ]
);
// A parameter missing.
lying_kernel!(
    Shorter,
    "axpy_f32",
    (f32, RawOut<f32>),
    [param("a", Scalar, "f32", 4), param("y", Output, "f32", 4),]
);
// A parameter too many.
lying_kernel!(
    Longer,
    "axpy_f32",
    (f32, RawIn<f32>, RawOut<f32>, u32),
    [
        param("a", Scalar, "f32", 4),
        param("x", Input, "f32", 4),
        param("y", Output, "f32", 4),
        param("n", Scalar, "u32", 4),
    ]
);
// A name the library has no entry for.
lying_kernel!(
    NoSuchEntry,
    "axpy_f16",
    (f32, RawIn<f32>, RawOut<f32>),
    [
        param("a", Scalar, "f32", 4),
        param("x", Input, "f32", 4),
        param("y", Output, "f32", 4),
    ]
);
// The truth, written by hand: passes, so the refusals above are the check's doing.
lying_kernel!(
    Truthful,
    "axpy_f32",
    (f32, RawIn<f32>, RawOut<f32>),
    [
        param("a", Scalar, "f32", 4),
        param("x", Input, "f32", 4),
        param("y", Output, "f32", 4),
    ]
);

fn refused<K: Kernel>() -> (String, String) {
    match ptx::REDUCE.check_kernel::<K>() {
        Err(e @ Error::KernelSignature { .. }) => {
            let msg = e.to_string();
            let Error::KernelSignature {
                kernel,
                module,
                expected,
                found,
            } = e
            else {
                unreachable!()
            };
            assert_eq!((kernel, module), (K::NAME, "warpforge-kernels-reduce"));
            for part in [
                K::NAME,
                "warpforge-kernels-reduce",
                &expected,
                &found,
                "rebuild",
            ] {
                assert!(msg.contains(part), "{part:?} missing from: {msg}");
            }
            (expected, found)
        }
        other => panic!("{} was not refused: {other:?}", std::any::type_name::<K>()),
    }
}

#[test]
fn descriptions_that_do_not_match_the_entry_are_refused_naming_both_signatures() {
    ptx::REDUCE.check_kernel::<Truthful>().unwrap();
    let (expected, found) = refused::<WiderScalar>();
    assert!(expected.starts_with("(a: f64 = 8 bytes,"), "{expected}");
    assert!(found.starts_with("(.f32 = 4 bytes, .u64 .ptr"), "{found}");
    assert!(found.ends_with("(5 parameters)"), "{found}");
    let (expected, _) = refused::<Reordered>();
    assert!(expected.starts_with("(x: &[f32] = pointer + 8-byte length, a: f32 = 4 bytes"));
    let (expected, found) = refused::<PointerAsInteger>();
    assert!(expected.contains("x_ptr: u64 = 8 bytes"), "{expected}");
    assert!(found.contains("= pointer"), "{found}");
    let (expected, _) = refused::<Shorter>();
    assert!(expected.ends_with("(3 PTX parameters)"), "{expected}");
    let (expected, _) = refused::<Longer>();
    assert!(expected.ends_with("(6 PTX parameters)"), "{expected}");
    let (_, found) = refused::<NoSuchEntry>();
    assert!(found.starts_with("no entry `axpy_f16`"), "{found}");
}

#[test]
fn the_same_check_over_an_entry_list() {
    let entry = ptx::REDUCE.variants[0]
        .entry_params("axpy_f32")
        .unwrap()
        .unwrap();
    let check = |params: &[Param]| {
        ptx::check_signature("axpy_f32", "warpforge-kernels-reduce", params, &entry)
    };
    check(Truthful::PARAMS).unwrap();
    for params in [
        WiderScalar::PARAMS,
        Reordered::PARAMS,
        PointerAsInteger::PARAMS,
        Shorter::PARAMS,
        Longer::PARAMS,
    ] {
        assert!(
            matches!(check(params), Err(Error::KernelSignature { .. })),
            "{params:?}"
        );
    }
    // An entry that marks no pointer (not what LLVM writes) is checked by width.
    let mut unmarked = entry.clone();
    for p in &mut unmarked {
        p.pointer = false;
    }
    ptx::check_signature("axpy_f32", "m", Truthful::PARAMS, &unmarked).unwrap();
    assert!(ptx::check_signature("axpy_f32", "m", WiderScalar::PARAMS, &unmarked).is_err());
}

/// A test-local kernel named like the library's `axpy_f32`, with other types:
/// it is compiled in this test crate (package `warpforge`), which has no PTX.
#[kernel]
fn axpy_f32(a: f64, x: &[f64], mut y: Out<f64>) {
    let i = thread::global_index_x();
    if let (Some(&xi), Some(mut yi)) = (x.get(i), y.at(i)) {
        yi.set(a * xi - yi.get());
    }
}

mod same_signature {
    use super::*;
    /// Named like the library's `axpy_f32` and with its very signature, but
    /// another body: only the module tells them apart.
    #[kernel]
    pub fn axpy_f32(a: f32, x: &[f32], mut y: Out<f32>) {
        let i = thread::global_index_x();
        if let (Some(&xi), Some(mut yi)) = (x.get(i), y.at(i)) {
            yi.set(a * xi - yi.get());
        }
    }
}

#[test]
fn a_kernel_named_like_a_library_kernel_resolves_to_its_own_crate() {
    assert_eq!(axpy_f32::MODULE, "warpforge");
    assert_eq!(same_signature::axpy_f32::MODULE, "warpforge");
    // Among the modules a GPU has loaded (the library), neither is found:
    // a launch is `ModuleNotLoaded`, never the library's entry.
    for e in [
        ptx::resolve::<axpy_f32>(ptx::LIBRARY).unwrap_err(),
        ptx::resolve::<same_signature::axpy_f32>(ptx::LIBRARY).unwrap_err(),
    ] {
        assert!(
            matches!(
                e,
                Error::ModuleNotLoaded {
                    kernel: "axpy_f32",
                    module: "warpforge"
                }
            ),
            "{e}"
        );
        let msg = e.to_string();
        for part in [
            "`axpy_f32`",
            "`warpforge`",
            "dev.load(&MODULE)",
            "include_module!(\"warpforge\")",
            "emulator",
        ] {
            assert!(msg.contains(part), "{part:?} missing from: {msg}");
        }
    }
    // The signature check alone would not tell the second from the library's.
    ptx::REDUCE
        .check_kernel::<same_signature::axpy_f32>()
        .unwrap();
    assert!(ptx::REDUCE.check_kernel::<axpy_f32>().is_err());
    // A module of the same name, if one were loaded, is where it resolves.
    static OURS: Module = Module::new("warpforge", &[]);
    assert_eq!(
        ptx::resolve::<axpy_f32>(ptx::LIBRARY.into_iter().chain([&OURS]))
            .unwrap()
            .name,
        "warpforge"
    );
    assert_eq!(
        ptx::resolve::<elementwise::axpy_f32>([&OURS].into_iter().chain(ptx::LIBRARY))
            .unwrap()
            .name,
        "warpforge-kernels-reduce"
    );
}

#[test]
fn on_the_emulator_each_runs_its_own_body() {
    let dev = Device::emulator();
    // `load` checks nothing on the emulator, so the same program runs on both.
    dev.load(&ptx::REDUCE).unwrap();
    dev.load(&ptx::REDUCE).unwrap();
    let cfg = LaunchConfig::for_elements(3, 32).unwrap();

    let x = dev.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let mut ours = dev.upload(&[10.0f32, 10.0, 10.0]).unwrap();
    let mut library = dev.upload(&[10.0f32, 10.0, 10.0]).unwrap();
    dev.launch(same_signature::axpy_f32, cfg, (2.0f32, &x, &mut ours))
        .unwrap();
    dev.launch(elementwise::axpy_f32, cfg, (2.0f32, &x, &mut library))
        .unwrap();
    assert_eq!(ours.to_host().unwrap(), [-8.0, -6.0, -4.0]);
    assert_eq!(library.to_host().unwrap(), [12.0, 14.0, 16.0]);

    let x = dev.upload(&[1.0f64, 2.0, 3.0]).unwrap();
    let mut y = dev.upload(&[1.0f64, 1.0, 1.0]).unwrap();
    dev.launch(axpy_f32, cfg, (0.5f64, &x, &mut y)).unwrap();
    assert_eq!(y.to_host().unwrap(), [-0.5, 0.0, 0.5]);
}

/// The library's reductions family again, from the file warpforge's build.rs had the
/// builder write: what a host crate does for its own kernels crate.
static LIBRARY_AGAIN: Module = warpforge::include_module!("warpforge-kernels-reduce");

#[test]
fn include_module_embeds_the_module_the_build_wrote() {
    assert_eq!(LIBRARY_AGAIN.name, ptx::REDUCE.name);
    assert_eq!(LIBRARY_AGAIN.name, elementwise::axpy_f32::MODULE);
    let archs = |m: &Module| m.variants.iter().map(|v| v.arch).collect::<Vec<_>>();
    assert_eq!(archs(&LIBRARY_AGAIN), archs(&ptx::REDUCE));
    for (a, b) in LIBRARY_AGAIN.variants.iter().zip(ptx::REDUCE.variants) {
        assert!(a.source == b.source, "{} differs", a.arch);
    }
    LIBRARY_AGAIN
        .check_kernel::<elementwise::axpy_f32>()
        .unwrap();
    Device::emulator().load(&LIBRARY_AGAIN).unwrap();
}

/// A second module, written in PTX by hand: `wf_test_fill(value, out)` sets
/// `out[i] = value` for every `i < out.len()`, one thread per element.
static FILL_MODULE: Module = Module::new(
    "wf-test-fill",
    &[PtxModule {
        arch: "sm_80",
        source: FILL_PTX,
    }],
);

const FILL_PTX: &str = "\
.version 7.0
.target sm_80
.address_size 64

.visible .entry wf_test_fill(
\t.param .u32 wf_test_fill_param_0,
\t.param .u64 .ptr .align 1 wf_test_fill_param_1,
\t.param .u64 wf_test_fill_param_2
)
{
\t.reg .pred \t%p<2>;
\t.reg .b32 \t%r<5>;
\t.reg .b64 \t%rd<7>;

\tld.param.u32 \t%r1, [wf_test_fill_param_0];
\tld.param.u64 \t%rd1, [wf_test_fill_param_1];
\tld.param.u64 \t%rd2, [wf_test_fill_param_2];
\tmov.u32 \t%r2, %ctaid.x;
\tmov.u32 \t%r3, %ntid.x;
\tmov.u32 \t%r4, %tid.x;
\tmul.wide.u32 \t%rd3, %r2, %r3;
\tcvt.u64.u32 \t%rd4, %r4;
\tadd.s64 \t%rd3, %rd3, %rd4;
\tsetp.ge.u64 \t%p1, %rd3, %rd2;
\t@%p1 bra \t$L__done;
\tcvta.to.global.u64 \t%rd5, %rd1;
\tshl.b64 \t%rd6, %rd3, 2;
\tadd.s64 \t%rd5, %rd5, %rd6;
\tst.global.u32 \t[%rd5], %r1;
$L__done:
\tret;
}
";

/// `wf_test_fill`'s description.
#[derive(Clone, Copy)]
#[allow(non_camel_case_types)]
struct wf_test_fill;
// SAFETY: written to match `FILL_PTX` exactly: entry `wf_test_fill` in module
// `wf-test-fill` takes a u32 then an output buffer as (pointer, u64 length),
// and writes only indices below that length; `run_thread` does the same for
// the emulator; no shared memory, any block.
unsafe impl Kernel for wf_test_fill {
    const NAME: &'static str = "wf_test_fill";
    const MODULE: &'static str = "wf-test-fill";
    const PARAMS: &'static [Param] = &[
        param("value", Scalar, "u32", 4),
        param("out", Output, "u32", 4),
    ];
    const SHARED_BYTES: usize = 0;
    const BLOCK: Option<warpforge::Dim3> = None;
    type Args = (u32, RawOut<u32>);
    unsafe fn run_thread((value, out): Self::Args) {
        // SAFETY: the caller's contract: `out` is valid for its length.
        let mut out = unsafe { out.as_out() };
        if let Some(mut slot) = out.at(thread::global_index_x()) {
            slot.set(value);
        }
    }
}

#[test]
fn a_second_module_resolves_and_checks_on_its_own() {
    assert_eq!(FILL_MODULE.variants[0].entries(), ["wf_test_fill"]);
    FILL_MODULE.check_kernel::<wf_test_fill>().unwrap();
    assert_eq!(
        ptx::resolve::<wf_test_fill>(ptx::LIBRARY.into_iter().chain([&FILL_MODULE]))
            .unwrap()
            .name,
        "wf-test-fill"
    );
    assert!(matches!(
        ptx::resolve::<wf_test_fill>(ptx::LIBRARY),
        Err(Error::ModuleNotLoaded {
            kernel: "wf_test_fill",
            module: "wf-test-fill"
        })
    ));
    // The library's kernels are not in it.
    assert!(FILL_MODULE.check_kernel::<elementwise::axpy_f32>().is_err());
    // And it runs on the emulator.
    let dev = Device::emulator();
    dev.load(&FILL_MODULE).unwrap();
    let mut out = dev.alloc_zeroed::<u32>(5).unwrap();
    dev.launch(
        wf_test_fill,
        LaunchConfig::for_elements(5, 32).unwrap(),
        (7u32, &mut out),
    )
    .unwrap();
    assert_eq!(out.to_host().unwrap(), [7; 5]);
}

fn gpu() -> Device {
    Device::gpu(0).expect("GPU 0")
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_a_kernel_named_like_a_library_kernel_is_module_not_loaded() {
    let dev = gpu();
    let x = dev.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let mut y = dev.upload(&[10.0f32, 10.0, 10.0]).unwrap();
    let cfg = LaunchConfig::for_elements(3, 32).unwrap();
    let e = dev
        .launch(same_signature::axpy_f32, cfg, (2.0f32, &x, &mut y))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ModuleNotLoaded {
                kernel: "axpy_f32",
                module: "warpforge"
            }
        ),
        "{e}"
    );
    let xd = dev.upload(&[1.0f64, 2.0, 3.0]).unwrap();
    let mut yd = dev.upload(&[1.0f64; 3]).unwrap();
    let e = dev
        .launch(axpy_f32, cfg, (0.5f64, &xd, &mut yd))
        .unwrap_err();
    assert!(matches!(e, Error::ModuleNotLoaded { .. }), "{e}");
    // Nothing ran, and the device still works: the library's kernel runs.
    assert_eq!(y.to_host().unwrap(), [10.0; 3]);
    assert_eq!(yd.to_host().unwrap(), [1.0; 3]);
    dev.launch(elementwise::axpy_f32, cfg, (2.0f32, &x, &mut y))
        .unwrap();
    assert_eq!(y.to_host().unwrap(), [12.0, 14.0, 16.0]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_a_description_that_lies_about_its_entry_is_refused_before_launch() {
    let dev = gpu();
    let x = dev.upload(&[1.0f32, 2.0]).unwrap();
    let mut y = dev.upload(&[0.0f32; 2]).unwrap();
    let cfg = LaunchConfig::for_elements(2, 32).unwrap();
    // `a` as f64 where the entry takes an f32.
    let e = dev
        .launch(WiderScalar, cfg, (1.0f64, &x, &mut y))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::KernelSignature {
                kernel: "axpy_f32",
                ..
            }
        ),
        "{e}"
    );
    // Refused again (nothing cached a lie), and the true kernel still runs.
    assert!(dev.launch(WiderScalar, cfg, (1.0f64, &x, &mut y)).is_err());
    dev.launch(elementwise::axpy_f32, cfg, (1.0f32, &x, &mut y))
        .unwrap();
    assert!(dev.launch(WiderScalar, cfg, (1.0f64, &x, &mut y)).is_err());
    assert_eq!(y.to_host().unwrap(), [1.0, 2.0]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_several_modules_load_once_and_each_kernel_runs_from_its_own() {
    let dev = gpu();
    let mut out = dev.alloc_zeroed::<u32>(1000).unwrap();
    let cfg = LaunchConfig::for_elements(1000, 128).unwrap();
    let e = dev.launch(wf_test_fill, cfg, (7u32, &mut out)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ModuleNotLoaded {
                kernel: "wf_test_fill",
                module: "wf-test-fill"
            }
        ),
        "{e}"
    );
    // Loading is idempotent, from any thread.
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| dev.load(&FILL_MODULE).unwrap());
        }
    });
    dev.load(&ptx::REDUCE).unwrap();
    // The same PTX under the same name, from another static: already loaded.
    dev.load(&LIBRARY_AGAIN).unwrap();
    dev.launch(wf_test_fill, cfg, (7u32, &mut out)).unwrap();
    assert_eq!(out.to_host().unwrap(), vec![7; 1000]);
    // The library's kernels still run beside it.
    library_axpy_runs(&dev);
    // Another module under a loaded name is refused, not silently ignored.
    static IMPOSTOR: Module = Module::new("wf-test-fill", ptx::REDUCE.variants);
    let e = dev.load(&IMPOSTOR).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ModuleConflict {
                module: "wf-test-fill"
            }
        ),
        "{e}"
    );
    // A clone of a device shares its loaded modules.
    dev.clone()
        .launch(wf_test_fill, cfg, (9u32, &mut out))
        .unwrap();
    assert_eq!(out.to_host().unwrap(), vec![9; 1000]);
}

fn library_axpy_runs(dev: &Device) {
    let x = dev.upload(&[1.0f32, 2.0]).unwrap();
    let mut y = dev.upload(&[1.0f32, 1.0]).unwrap();
    dev.launch(
        elementwise::axpy_f32,
        LaunchConfig::for_elements(2, 32).unwrap(),
        (3.0f32, &x, &mut y),
    )
    .unwrap();
    assert_eq!(y.to_host().unwrap(), [4.0, 7.0]);
}
