//! Generic kernels: one `#[kernel(instances(...))]` body instantiated for
//! several type and const arguments, each instance a kernel of its own (its
//! own name, parameters, shared memory), run on the emulator against a CPU
//! reference; and, in the probes' PTX module, an entry per instance with the
//! instance's parameters.

use core::ops::Add;
use warpforge::{Device, Kernel, LaunchConfig};
use warpforge_device::kernel::ParamKind;
use warpforge_device::num::Fma;
use warpforge_device::own::Elements;
use warpforge_device::{Out, thread};
use warpforge_macros::kernel;

/// `y[i] = a · x[i] + y[i]` (fused), grid-stride.
#[kernel(block = 256, instances(
    scale_f32 = <f32>,
    scale_f64 = <f64>,
))]
pub fn scale<T: Fma + Copy>(a: T, x: &[T], mut y: Out<T, Elements>) {
    for mut o in y.grid_stride() {
        if let Some(&v) = x.get(o.index()) {
            o.set(a.fma(v, o.get()));
        }
    }
}

const ROWS: usize = 3;

/// `out[i]` = the sum of thread `i`'s `R × C` tile, `x[i·R·C .. (i + 1)·R·C]`,
/// row by row (missing elements count 0). It declares (and does not use)
/// `R` elements of `T` of shared memory, to check each instance's size.
#[kernel(shared = [T; R], instances(
    tile_sum_8x4 = <f32, 8, 4>,
    tile_sum_16x2 = <f64, 16, 2>,
    tile_sum_rows_x2 = <u32, ROWS, 2>,
))]
pub fn tile_sum<T, const R: usize, const C: usize>(x: &[T], mut out: Out<T>)
where
    T: Copy + Default + Add<Output = T>,
{
    let i = thread::global_index_x();
    let mut total = T::default();
    for r in 0..R {
        let mut row = T::default();
        for c in 0..C {
            row = row + x.get((i * R + r) * C + c).copied().unwrap_or_default();
        }
        total = total + row;
    }
    if let Some(mut o) = out.at(i) {
        o.set(total);
    }
}

/// Small integers, so every sum and product is exact in f32 and f64.
fn ints(n: usize, modulus: usize) -> impl Iterator<Item = i32> {
    (0..n).map(move |i| (i * 7 + 3) as i32 % modulus as i32 - (modulus as i32) / 2)
}

#[test]
fn each_instance_has_its_own_name_and_parameters() {
    assert_eq!(scale_f32::NAME, "scale_f32");
    assert_eq!(scale_f64::NAME, "scale_f64");
    assert_eq!(tile_sum_8x4::NAME, "tile_sum_8x4");
    assert_eq!(tile_sum_16x2::NAME, "tile_sum_16x2");
    assert_eq!(tile_sum_rows_x2::NAME, "tile_sum_rows_x2");
    for (params, ty, bytes) in [(scale_f32::PARAMS, "f32", 4), (scale_f64::PARAMS, "f64", 8)] {
        let shape: Vec<_> = params
            .iter()
            .map(|p| (p.name, p.kind, p.ty, p.bytes))
            .collect();
        assert_eq!(
            shape,
            [
                ("a", ParamKind::Scalar, ty, bytes),
                ("x", ParamKind::Input, ty, bytes),
                ("y", ParamKind::Output, ty, bytes),
            ]
        );
    }
    assert_eq!(tile_sum_16x2::PARAMS[0].ty, "f64");
    assert_eq!(tile_sum_rows_x2::PARAMS[1].ty, "u32");
    // The block shape is every instance's; the shared size is each one's own.
    assert_eq!(scale_f32::BLOCK, scale_f64::BLOCK);
    assert_eq!(scale_f32::BLOCK.map(|b| (b.x, b.y, b.z)), Some((256, 1, 1)));
    assert_eq!(tile_sum_8x4::SHARED_BYTES, 8 * 4);
    assert_eq!(tile_sum_16x2::SHARED_BYTES, 16 * 8);
    assert_eq!(tile_sum_rows_x2::SHARED_BYTES, ROWS * 4);
    // The generic fn stays an ordinary fn.
    let generic: fn(f32, &[f32], Out<f32, Elements>) = scale::<f32>;
    let _ = generic;
}

#[test]
fn scale_instances_match_the_reference_exactly() {
    let dev = Device::emulator();
    for n in [0usize, 1, 255, 256, 1000] {
        let cfg = LaunchConfig::for_elements(n, 256).unwrap();

        let x: Vec<f32> = ints(n, 41).map(|v| v as f32).collect();
        let y0: Vec<f32> = ints(n, 13).map(|v| v as f32 * 0.5).collect();
        let want: Vec<f32> = x.iter().zip(&y0).map(|(x, y)| -3.0 * x + y).collect();
        let xd = dev.upload(&x).unwrap();
        let mut yd = dev.upload(&y0).unwrap();
        dev.launch(scale_f32, cfg, (-3.0f32, &xd, &mut yd)).unwrap();
        assert_eq!(yd.to_host().unwrap(), want, "f32, n = {n}");

        let x: Vec<f64> = ints(n, 1001).map(f64::from).collect();
        let y0: Vec<f64> = ints(n, 17).map(|v| f64::from(v) * 0.25).collect();
        let want: Vec<f64> = x.iter().zip(&y0).map(|(x, y)| 1.5 * x + y).collect();
        let xd = dev.upload(&x).unwrap();
        let mut yd = dev.upload(&y0).unwrap();
        dev.launch(scale_f64, cfg, (1.5f64, &xd, &mut yd)).unwrap();
        assert_eq!(yd.to_host().unwrap(), want, "f64, n = {n}");
    }
}

/// The reference `tile_sum::<T, R, C>`: thread `i`'s tile, summed in the same order.
fn tile_sums<T: Copy + Default + Add<Output = T>>(
    x: &[T],
    r: usize,
    c: usize,
    threads: usize,
) -> Vec<T> {
    (0..threads)
        .map(|i| {
            (0..r).fold(T::default(), |total, row| {
                let s = (0..c).fold(T::default(), |s, col| {
                    s + x.get((i * r + row) * c + col).copied().unwrap_or_default()
                });
                total + s
            })
        })
        .collect()
}

#[test]
fn tile_sum_instances_match_the_reference_exactly() {
    let dev = Device::emulator();
    // 70 threads: the last tiles run past `x`, whose missing elements count 0.
    let threads = 70;
    let cfg = LaunchConfig::for_elements(threads, 32).unwrap();

    let x: Vec<f32> = ints(threads * 32 - 5, 29).map(|v| v as f32).collect();
    let xd = dev.upload(&x).unwrap();
    let mut out = dev.alloc_zeroed::<f32>(threads).unwrap();
    dev.launch(tile_sum_8x4, cfg, (&xd, &mut out)).unwrap();
    assert_eq!(out.to_host().unwrap(), tile_sums(&x, 8, 4, threads));

    let x: Vec<f64> = ints(threads * 32 - 9, 57)
        .map(|v| f64::from(v) * 0.125)
        .collect();
    let xd = dev.upload(&x).unwrap();
    let mut out = dev.alloc_zeroed::<f64>(threads).unwrap();
    dev.launch(tile_sum_16x2, cfg, (&xd, &mut out)).unwrap();
    assert_eq!(out.to_host().unwrap(), tile_sums(&x, 16, 2, threads));

    let x: Vec<u32> = (0..threads as u32 * 6).map(|v| v * 3 + 1).collect();
    let xd = dev.upload(&x).unwrap();
    let mut out = dev.alloc_zeroed::<u32>(threads).unwrap();
    dev.launch(tile_sum_rows_x2, cfg, (&xd, &mut out)).unwrap();
    let want = tile_sums(&x, ROWS, 2, threads);
    assert_eq!(out.to_host().unwrap(), want);
    assert_eq!(want[1], (6..12).map(|v| v * 3 + 1).sum::<u32>());
}

/// The probes' generic kernel (`warpforge_probes::probe_window`) is two PTX
/// entries in the probes' module, one per instance, each with its own
/// parameters (the `pad` scalar is 4 bytes in one, 8 in the other), and its
/// descriptions match them; the generic fn is no entry.
#[test]
fn each_instance_is_a_ptx_entry_of_its_own() {
    use warpforge_testkit::{PROBES, probe_window_f32_2, probe_window_u64_3};
    assert!(!PROBES.variants.is_empty());
    for variant in PROBES.variants {
        let entries = variant.entries();
        for (name, pad_bytes) in [("probe_window_f32_2", 4), ("probe_window_u64_3", 8)] {
            assert!(entries.contains(&name), "{}: {entries:?}", variant.arch);
            let params = variant.entry_params(name).unwrap().unwrap();
            let widths: Vec<(usize, bool)> = params.iter().map(|p| (p.bytes, p.pointer)).collect();
            // x as (pointer, length), pad, out as (pointer, length)
            assert_eq!(
                widths,
                [
                    (8, true),
                    (8, false),
                    (pad_bytes, false),
                    (8, true),
                    (8, false)
                ],
                "{}: {name}",
                variant.arch
            );
        }
        assert!(!entries.contains(&"probe_window"), "{}", variant.arch);
    }
    PROBES.check_kernel::<probe_window_f32_2>().unwrap();
    PROBES.check_kernel::<probe_window_u64_3>().unwrap();
    assert_eq!(probe_window_f32_2::MODULE, "warpforge-probes");

    // And on the emulator each runs the generic body with its arguments.
    let dev = Device::emulator();
    let x = dev.upload(&[1u64, 2, 3, 4]).unwrap();
    let mut out = dev.alloc_zeroed::<u64>(12).unwrap();
    let cfg = LaunchConfig::for_elements(4, 32).unwrap();
    dev.launch(probe_window_u64_3, cfg, (&x, 9u64, &mut out))
        .unwrap();
    assert_eq!(out.to_host().unwrap(), [1, 2, 3, 2, 3, 4, 3, 4, 9, 4, 9, 9]);
    let x = dev.upload(&[0.5f32, -1.0, 2.0]).unwrap();
    let mut out = dev.alloc_zeroed::<f32>(6).unwrap();
    dev.launch(probe_window_f32_2, cfg, (&x, 7.0f32, &mut out))
        .unwrap();
    assert_eq!(out.to_host().unwrap(), [0.5, -1.0, -1.0, 2.0, 2.0, 7.0]);
}
