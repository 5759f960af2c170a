//! The reduction family against its CPU reference (`reference::reduce`):
//! every op × dtype × axis kind on the emulator, with lengths around every
//! warp and unit boundary and values including ±0, subnormals, ±inf and NaN;
//! bit-for-bit determinism across grid sizes; the documented edge semantics;
//! exact results on integer inputs whose every partial sum is exact, at every
//! size class the kernels treat differently (a dropped or duplicated element
//! fails them, where it can pass the error bounds).
//! The `_on_gpu` tests run the same properties on GPU 0 (ignored without one),
//! through the same helpers as their emulator twins, at sizes past 2²⁴.

use half::{bf16, f16};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use warpforge::reduce::{self, Layout, Op, Path, ReduceOptions, Reduced};
use warpforge::reference::reduce::{RefElement, Value, expected};
use warpforge::{Device, Error, WorkCounts};

/// Element types the tests generate.
trait Gen: RefElement {
    /// A value; with probability `specials`, ±inf or NaN (floats).
    fn gen_value(rng: &mut StdRng, specials: f64) -> Self;
}

/// An ordinary, zero, subnormal, large, or (at rate `specials`) special f64,
/// with `subnormal` and `large` scaled for the dtype.
fn float(rng: &mut StdRng, specials: f64, subnormal: f64, large: f64) -> f64 {
    if rng.random_bool(specials) {
        return [f64::INFINITY, f64::NEG_INFINITY, f64::NAN][rng.random_range(0..3)];
    }
    let sign = if rng.random() { 1.0 } else { -1.0 };
    sign * match rng.random_range(0..20) {
        0 => 0.0,
        1 => subnormal * f64::from(rng.random_range(1..64)),
        2 => rng.random_range(0.0..large),
        3 => f64::from(rng.random_range(0..4)), // ties for min/max/arg
        _ => rng.random_range(0.0..100.0),
    }
}

impl Gen for f32 {
    fn gen_value(rng: &mut StdRng, specials: f64) -> Self {
        float(rng, specials, f64::from(f32::from_bits(1)), 1e30) as f32
    }
}
impl Gen for f64 {
    fn gen_value(rng: &mut StdRng, specials: f64) -> Self {
        float(rng, specials, f64::from_bits(1), 1e300)
    }
}
impl Gen for f16 {
    fn gen_value(rng: &mut StdRng, specials: f64) -> Self {
        f16::from_f64(float(rng, specials, 2f64.powi(-24), 6e4))
    }
}
impl Gen for bf16 {
    fn gen_value(rng: &mut StdRng, specials: f64) -> Self {
        bf16::from_f64(float(
            rng,
            specials,
            f64::from(f32::from_bits(1 << 16)),
            1e30,
        ))
    }
}
macro_rules! gen_int {
    ($($t:ty),*) => { $(
        impl Gen for $t {
            fn gen_value(rng: &mut StdRng, _: f64) -> Self {
                if rng.random() { rng.random() } else { rng.random_range(0..4) as $t }
            }
        }
    )* };
}
gen_int!(i32, i64, u32);

/// Runs `op` over `x` (`shape`, `axis`) on `dev` and checks every output
/// against the reference (or that both fail for an empty reduction).
fn check<T: Gen>(
    dev: &Device,
    op: Op,
    x: &[T],
    shape: &[usize],
    axis: Option<usize>,
    options: ReduceOptions,
) {
    let layout = Layout::new(x.len(), shape, axis).unwrap();
    let want = expected(op, x, layout);
    let buf = dev.upload(x).unwrap();
    let got = reduce::reduce_with(op, &buf, shape, axis, options);
    let ctx = || format!("{op} of {:?} {shape:?} along {axis:?}", T::DTYPE);
    let (want, got) = match (want, got) {
        (Ok(w), Ok(g)) => (w, g),
        (Err(Error::EmptyReduction { .. }), Err(Error::EmptyReduction { op: name })) => {
            assert_eq!(name, op.name());
            return;
        }
        (w, g) => panic!("{}: reference {w:?}, kernel {g:?}", ctx()),
    };
    let got: Vec<Value> = match got {
        Reduced::Values(v) => v.to_host().unwrap().into_iter().map(T::value).collect(),
        Reduced::Indices(v) => v
            .to_host()
            .unwrap()
            .into_iter()
            .map(|i| Value::Int(i.into()))
            .collect(),
    };
    assert_eq!(got.len(), want.len(), "{}: output count", ctx());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = w.check(*g) {
            panic!("{}: output {k}: {e}", ctx());
        }
    }
}

/// Lengths around the warp (32), the columns unit (64), the rows unit (512)
/// and the second pass of the columns kernel (4096).
const LENGTHS: &[usize] = &[
    0, 1, 2, 31, 32, 33, 63, 64, 65, 511, 512, 513, 1000, 4095, 4097,
];

/// A shape and axis of each kind: 0 whole, 1 inner (rows kernel), 2 outer and 3 middle (columns kernel).
fn shape_for(kind: u8, len: usize, a: usize, b: usize) -> (Vec<usize>, Option<usize>) {
    match kind {
        0 => (vec![len], None),
        1 => (vec![a, len], Some(1)),
        2 => (vec![len, b], Some(0)),
        _ => (vec![a, len, b], Some(1)),
    }
}

fn length() -> impl Strategy<Value = usize> {
    prop_oneof![3 => proptest::sample::select(LENGTHS), 1 => 0usize..2000]
}

fn specials() -> impl Strategy<Value = f64> {
    proptest::sample::select(&[0.0, 0.002, 0.03][..])
}

/// One random case of `T`: op, axis kind, sizes, values.
fn case<T: Gen>(
    dev: &Device,
    op: Op,
    (kind, len, a, b): (u8, usize, usize, usize),
    rate: f64,
    seed: u64,
) {
    let (shape, axis) = shape_for(kind, len, a, b);
    let n: usize = shape.iter().product();
    let mut rng = StdRng::seed_from_u64(seed);
    let x: Vec<T> = (0..n).map(|_| T::gen_value(&mut rng, rate)).collect();
    check(dev, op, &x, &shape, axis, ReduceOptions::default());
}

fn float_op() -> impl Strategy<Value = Op> {
    proptest::sample::select(&Op::ALL[..])
}

fn int_op() -> impl Strategy<Value = Op> {
    proptest::sample::select(&[Op::Sum, Op::Min, Op::Max, Op::ArgMin, Op::ArgMax][..])
}

macro_rules! emulator_properties {
    ($($name:ident: $t:ty, $ops:expr;)*) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            $(
                #[test]
                fn $name(op in $ops, kind in 0u8..4, len in length(), a in 1usize..4, b in 1usize..5,
                         rate in specials(), seed: u64) {
                    case::<$t>(&Device::emulator(), op, (kind, len, a, b), rate, seed);
                }
            )*
        }
    };
}

emulator_properties! {
    f32_matches_reference_in_emulator: f32, float_op();
    f64_matches_reference_in_emulator: f64, float_op();
    f16_matches_reference_in_emulator: f16, float_op();
    bf16_matches_reference_in_emulator: bf16, float_op();
    i32_matches_reference_in_emulator: i32, int_op();
    i64_matches_reference_in_emulator: i64, int_op();
    u32_matches_reference_in_emulator: u32, int_op();
}

#[test]
fn every_op_and_dtype_at_every_axis_kind_in_emulator() {
    let dev = Device::emulator();
    for kind in 0..4 {
        for (seed, &len) in [0usize, 1, 33, 513, 4097].iter().enumerate() {
            let seed = seed as u64 * 4 + u64::from(kind);
            for op in Op::ALL {
                case::<f32>(&dev, op, (kind, len, 2, 3), 0.002, seed);
                case::<f64>(&dev, op, (kind, len, 2, 3), 0.002, seed);
                case::<f16>(&dev, op, (kind, len, 2, 3), 0.002, seed);
                case::<bf16>(&dev, op, (kind, len, 2, 3), 0.002, seed);
            }
            for op in [Op::Sum, Op::Min, Op::Max, Op::ArgMin, Op::ArgMax] {
                case::<i32>(&dev, op, (kind, len, 2, 3), 0.0, seed);
                case::<i64>(&dev, op, (kind, len, 2, 3), 0.0, seed);
                case::<u32>(&dev, op, (kind, len, 2, 3), 0.0, seed);
            }
        }
    }
}

#[test]
fn three_rows_passes_in_emulator() {
    // 512² + 1 elements: units of 512, then 513 states, then 2, then 1.
    let dev = Device::emulator();
    let n = 512 * 512 + 1;
    let mut rng = StdRng::seed_from_u64(7);
    let x: Vec<f32> = (0..n).map(|_| f32::gen_value(&mut rng, 0.0)).collect();
    for op in [Op::Sum, Op::ArgMax, Op::LogSumExp] {
        check(&dev, op, &x, &[n], None, ReduceOptions::default());
    }
    assert_eq!(
        Layout::new(n, &[n], None).unwrap().fold_depth(4),
        20 + 20 + 1
    );
}

/// The bits of `op`'s outputs over `x` with at most `max_blocks` blocks.
fn output_bits(
    dev: &Device,
    op: Op,
    x: &[f32],
    shape: &[usize],
    axis: Option<usize>,
    max_blocks: u32,
) -> Vec<u64> {
    let buf = dev.upload(x).unwrap();
    match reduce::reduce_with(
        op,
        &buf,
        shape,
        axis,
        ReduceOptions {
            max_blocks,
            ..Default::default()
        },
    )
    .unwrap()
    {
        Reduced::Values(v) => v
            .to_host()
            .unwrap()
            .iter()
            .map(|v| u64::from(v.to_bits()))
            .collect(),
        Reduced::Indices(v) => v.to_host().unwrap().iter().map(|&i| i as u64).collect(),
    }
}

#[test]
fn same_bits_at_every_grid_size_in_emulator() {
    let dev = Device::emulator();
    let cases: [(Vec<usize>, Option<usize>); 4] = [
        (vec![40_000], None),
        (vec![3, 5000], Some(1)),
        (vec![3000, 7], Some(0)),
        (vec![2, 3000, 5], Some(1)),
    ];
    for (shape, axis) in cases {
        let n: usize = shape.iter().product();
        let x: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 2001) as f32 * 0.37 - 370.0)
            .collect();
        for op in [Op::Sum, Op::LogSumExp, Op::ArgMax] {
            let first = output_bits(&dev, op, &x, &shape, axis, 1);
            for max_blocks in [3, 7, 64, 1024, ReduceOptions::AUTO] {
                assert_eq!(
                    output_bits(&dev, op, &x, &shape, axis, max_blocks),
                    first,
                    "{op} of {shape:?} along {axis:?} at {max_blocks} blocks"
                );
            }
        }
    }
}

/// The partial states come from the device's scratch cache (and the outputs
/// from its cache of outputs): after the first call of each output type
/// nothing is allocated (free memory stays put), a smaller reduction
/// reuses the larger buffer, host threads reducing at once each get their
/// own and agree bit for bit, and `release_scratch` gives the memory back.
#[test]
fn reductions_reuse_the_device_scratch_states_in_emulator() {
    let dev = Device::emulator_with_memory(64 << 20);
    let n = 512 * 512 + 1; // the fused path, two combine levels: tickets and states
    let x: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 2001) as f32 * 0.37 - 370.0)
        .collect();
    let xb = dev.upload(&x).unwrap();
    let total = dev.memory_info().unwrap().1;
    let sum = reduce::sum(&xb).unwrap().to_bits();
    reduce::argmax(&xb).unwrap(); // its i64 output joins the cache of outputs
    let free = dev.memory_info().unwrap().0;
    assert!(
        free < total - 4 * n as u64,
        "the scratch states stay cached"
    );
    for _ in 0..3 {
        assert_eq!(reduce::sum(&xb).unwrap().to_bits(), sum);
        assert_eq!(reduce::argmax(&xb).unwrap(), reduce::argmax(&xb).unwrap());
        let Reduced::Values(rows) = reduce::reduce(Op::Sum, &xb, &[1, n], Some(1)).unwrap() else {
            unreachable!()
        };
        assert_eq!(rows.to_host().unwrap()[0].to_bits(), sum);
        drop(rows);
        assert_eq!(
            dev.memory_info().unwrap().0,
            free,
            "no allocation after the first call"
        );
    }
    std::thread::scope(|s| {
        for op in [Op::Sum, Op::Max, Op::ArgMin, Op::LogSumExp] {
            let (dev, x, xb) = (&dev, &x, &xb);
            s.spawn(move || {
                let first = output_bits(dev, op, x, &[n], None, 64);
                for _ in 0..3 {
                    let Reduced::Values(v) = reduce::reduce(Op::Sum, xb, &[n], None).unwrap()
                    else {
                        unreachable!()
                    };
                    assert_eq!(v.to_host().unwrap()[0].to_bits(), sum);
                    assert_eq!(output_bits(dev, op, x, &[n], None, 7), first, "{op}");
                }
            });
        }
    });
    dev.release_scratch();
    assert_eq!(dev.memory_info().unwrap().0, total - 4 * n as u64);
}

/// The one-launch rows reduction (the last block combines and finishes) and,
/// where the rows are short enough, the small one-launch path give the bits
/// of the multi-pass path (a combine launch per level, then the finish) at
/// every grid size, for every op (mean and norm2 through the runtime finish
/// code), whole tensors and rows, one combine level or two.
#[test]
fn one_launch_matches_the_multi_pass_path_bit_for_bit_in_emulator() {
    let dev = Device::emulator();
    let cases: [(Vec<usize>, Option<usize>); 4] = [
        (vec![40_000], None),
        (vec![3, 5000], Some(1)),
        (vec![512 * 512 + 1], None),
        (vec![5, 2, 1300], Some(2)),
    ];
    for (shape, axis) in cases {
        let n: usize = shape.iter().product();
        let x: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 2001) as f32 * 0.37 - 370.0)
            .collect();
        let buf = dev.upload(&x).unwrap();
        let layout = Layout::new(n, &shape, axis).unwrap();
        let bits = |op, max_blocks, path| -> Vec<u64> {
            let options = ReduceOptions { max_blocks, path };
            match reduce::reduce_with(op, &buf, &shape, axis, options).unwrap() {
                Reduced::Values(v) => v
                    .to_host()
                    .unwrap()
                    .iter()
                    .map(|v| u64::from(v.to_bits()))
                    .collect(),
                Reduced::Indices(v) => v.to_host().unwrap().iter().map(|&i| i as u64).collect(),
            }
        };
        let one_launch: Vec<Path> = [Path::Small, Path::Fused]
            .into_iter()
            .filter(|&p| layout.path(p).is_ok())
            .collect();
        assert!(!one_launch.is_empty(), "{shape:?}");
        for op in Op::ALL {
            let multi = bits(op, 7, Path::MultiPass);
            for &path in &one_launch {
                for max_blocks in [1, 2, 3, 7, 64, 1024, ReduceOptions::AUTO] {
                    assert_eq!(
                        bits(op, max_blocks, path),
                        multi,
                        "{op} of {shape:?} along {axis:?} on {path:?} at {max_blocks} blocks"
                    );
                }
            }
        }
    }
}

/// Short rows (one unit, at most 16 groups of 16 bytes: several rows per
/// warp on the small path, `lanes` lanes each) give the bits of the
/// multi-pass path, which folds every row with a whole warp, for every op
/// (NaN, a row of −0 and tied maxima included), at each length where the
/// lane count changes, a row count that leaves the last warp part-filled,
/// and several grid sizes.
#[test]
fn short_rows_share_a_warp_with_the_bits_of_a_warp_per_row_in_emulator() {
    fn case<T: reduce::Reducible + Copy>(dev: &Device, of: fn(f32) -> T, bits: fn(T) -> u64) {
        let w = 16 / std::mem::size_of::<T>();
        let rows = 37;
        for len in [
            1,
            2,
            3,
            w - 1,
            w,
            w + 1,
            2 * w + 1,
            3 * w + 2,
            4 * w + 1,
            7 * w + 3,
        ]
        .into_iter()
        .chain([8 * w + 1, 15 * w + 1, 16 * w, 16 * w + 1])
        {
            let n = rows * len;
            let x: Vec<T> = (0..n)
                .map(|i| match (i / len, i % len) {
                    (3, _) => -0.0,
                    (11, j) if j == len / 2 => f32::NAN,
                    (20, j) if j % 2 == 1 => 9.0e3,
                    _ => ((i * 7919) % 2001) as f32 * 0.37 - 370.0,
                })
                .map(of)
                .collect();
            let buf = dev.upload(&x).unwrap();
            let shape = [rows, len];
            assert_eq!(
                Layout::new(n, &shape, Some(1))
                    .unwrap()
                    .path(Path::Auto)
                    .unwrap(),
                Path::Small
            );
            let run = |op, max_blocks, path| -> Vec<u64> {
                let options = ReduceOptions { max_blocks, path };
                match reduce::reduce_with(op, &buf, &shape, Some(1), options).unwrap() {
                    Reduced::Values(v) => v.to_host().unwrap().into_iter().map(bits).collect(),
                    Reduced::Indices(v) => v.to_host().unwrap().iter().map(|&i| i as u64).collect(),
                }
            };
            for op in Op::ALL {
                let multi = run(op, 7, Path::MultiPass);
                for max_blocks in [1, 3, ReduceOptions::AUTO] {
                    assert_eq!(
                        run(op, max_blocks, Path::Small),
                        multi,
                        "{op} of {rows} rows of {len} {} at {max_blocks} blocks",
                        std::any::type_name::<T>()
                    );
                }
            }
        }
    }
    let dev = Device::emulator();
    case::<f32>(&dev, |x| x, |x| u64::from(x.to_bits()));
    case::<f64>(&dev, f64::from, f64::to_bits);
    case::<bf16>(&dev, bf16::from_f32, |x| u64::from(x.to_bits()));
}

#[test]
fn integer_sums_wrap() {
    let dev = Device::emulator();
    assert_eq!(
        reduce::sum(&dev.upload(&[i32::MAX, 1]).unwrap()).unwrap(),
        i32::MIN
    );
    assert_eq!(
        reduce::sum(&dev.upload(&[i64::MIN, -1]).unwrap()).unwrap(),
        i64::MAX
    );
    assert_eq!(
        reduce::sum(&dev.upload(&[u32::MAX, 2]).unwrap()).unwrap(),
        1
    );
    // Across lanes, units and passes too: 70 000 × 2³⁰ wraps many times.
    let x = vec![1i32 << 30; 70_000];
    let want = (0..70_000).fold(0i32, |s, _| s.wrapping_add(1 << 30));
    assert_eq!(reduce::sum(&dev.upload(&x).unwrap()).unwrap(), want);
}

#[test]
fn empty_inputs_follow_the_documented_semantics() {
    let dev = Device::emulator();
    let e = dev.upload::<f32>(&[]).unwrap();
    assert_eq!(reduce::sum(&e).unwrap().to_bits(), 0);
    assert_eq!(reduce::sum_of_squares(&e).unwrap().to_bits(), 0);
    assert_eq!(reduce::norm2(&e).unwrap().to_bits(), 0);
    assert!(reduce::mean(&e).unwrap().is_nan());
    assert_eq!(reduce::logsumexp(&e).unwrap(), f32::NEG_INFINITY);
    for op in [Op::Min, Op::Max, Op::ArgMin, Op::ArgMax] {
        let err = reduce::reduce(op, &e, &[0], None).unwrap_err();
        assert!(
            matches!(err, Error::EmptyReduction { op: name } if name == op.name()),
            "{err}"
        );
    }
    assert_eq!(reduce::sum(&dev.upload::<i64>(&[]).unwrap()).unwrap(), 0);
    assert!(matches!(
        reduce::argmax(&dev.upload::<u32>(&[]).unwrap()),
        Err(Error::EmptyReduction { .. })
    ));
    // Along an empty axis with outputs: one result per output.
    let Reduced::Values(v) = reduce::reduce(Op::LogSumExp, &e, &[3, 0], Some(1)).unwrap() else {
        panic!()
    };
    assert_eq!(v.to_host().unwrap(), [f32::NEG_INFINITY; 3]);
    assert!(reduce::reduce(Op::Min, &e, &[3, 0], Some(1)).is_err());
    // No outputs at all: nothing to fail.
    assert!(
        reduce::reduce(Op::Min, &e, &[0, 3], Some(1))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn nan_zero_and_first_index_semantics() {
    let dev = Device::emulator();
    let up = |v: &[f32]| dev.upload(v).unwrap();
    assert!(reduce::sum(&up(&[1.0, f32::NAN, 2.0])).unwrap().is_nan());
    assert!(reduce::mean(&up(&[1.0, f32::NAN])).unwrap().is_nan());
    assert!(
        reduce::min(&up(&[f32::NEG_INFINITY, f32::NAN]))
            .unwrap()
            .is_nan()
    );
    assert!(
        reduce::max(&up(&[f32::INFINITY, f32::NAN]))
            .unwrap()
            .is_nan()
    );
    assert!(
        reduce::sum(&up(&[f32::INFINITY, f32::NEG_INFINITY]))
            .unwrap()
            .is_nan()
    );
    assert!(reduce::logsumexp(&up(&[1.0, f32::NAN])).unwrap().is_nan());
    assert_eq!(
        reduce::logsumexp(&up(&[1.0, f32::INFINITY, 3.0])).unwrap(),
        f32::INFINITY
    );
    assert_eq!(
        reduce::logsumexp(&up(&[f32::NEG_INFINITY; 40])).unwrap(),
        f32::NEG_INFINITY
    );
    assert_eq!(
        reduce::logsumexp(&up(&[f32::NEG_INFINITY, 0.0])).unwrap(),
        0.0
    );
    // −0 < +0 for min/max, in either order.
    for v in [[0.0f32, -0.0], [-0.0, 0.0]] {
        assert_eq!(reduce::min(&up(&v)).unwrap().to_bits(), (-0.0f32).to_bits());
        assert_eq!(reduce::max(&up(&v)).unwrap().to_bits(), 0.0f32.to_bits());
    }
    // −0 == +0 for arg: the first wins. NaN is the extreme: the first NaN wins.
    assert_eq!(reduce::argmin(&up(&[1.0, 0.0, -0.0])).unwrap(), 1);
    assert_eq!(reduce::argmax(&up(&[-0.0, 0.0, -1.0])).unwrap(), 0);
    let mut x = vec![1.0f32; 3000];
    x[2999] = 5.0;
    x[1700] = 5.0;
    assert_eq!(reduce::argmax(&up(&x)).unwrap(), 1700); // first of equal maxima, in another unit
    x[2500] = f32::NAN;
    x[2600] = f32::NAN;
    assert_eq!(reduce::argmax(&up(&x)).unwrap(), 2500);
    assert_eq!(reduce::argmin(&up(&x)).unwrap(), 2500);
    // The same rule along a column (columns kernel, different 64-row units).
    let mut m = vec![0i32; 200 * 3];
    m[130 * 3 + 1] = -4;
    m[70 * 3 + 1] = -4;
    let Reduced::Indices(i) =
        reduce::reduce(Op::ArgMin, &dev.upload(&m).unwrap(), &[200, 3], Some(0)).unwrap()
    else {
        panic!()
    };
    assert_eq!(i.to_host().unwrap(), [0, 70, 0]);
}

#[test]
fn unsupported_ops_name_the_dtype_and_the_alternatives() {
    let dev = Device::emulator();
    let x = dev.upload(&[1i32, 2]).unwrap();
    for op in [Op::Mean, Op::SumOfSquares, Op::Norm2, Op::LogSumExp] {
        match reduce::reduce(op, &x, &[2], None) {
            Err(
                e @ Error::UnsupportedDType {
                    op: o,
                    dtype: "i32",
                    supported,
                },
            ) => {
                assert_eq!(o, op.name());
                assert!(supported.contains("argmax") && !supported.contains("mean"));
                assert!(
                    e.to_string().contains("Convert the input to a float dtype"),
                    "{e}"
                );
            }
            other => panic!("{op}: {other:?}"),
        }
    }
    assert!(matches!(
        reduce::mean(&dev.upload(&[1u32]).unwrap()),
        Err(Error::UnsupportedDType { .. })
    ));
    assert!(reduce::mean(&dev.upload(&[1.0f32]).unwrap()).is_ok());
}

#[test]
fn bad_shapes_and_axes_are_errors() {
    let dev = Device::emulator();
    let x = dev.upload(&[1.0f32; 6]).unwrap();
    let err = reduce::reduce(Op::Sum, &x, &[2, 3], Some(2)).unwrap_err();
    assert!(
        matches!(&err, Error::ShapeMismatch { detail, .. } if detail.contains("axis 2") && detail.contains("rank 2")),
        "{err}"
    );
    let err = reduce::reduce(Op::Sum, &x, &[2, 4], None).unwrap_err();
    assert!(
        matches!(&err, Error::ShapeMismatch { detail, .. } if detail.contains("8 elements")),
        "{err}"
    );
    let err = reduce::reduce(Op::Sum, &x, &[usize::MAX, 2], None).unwrap_err();
    assert!(matches!(err, Error::SizeOverflow { .. }), "{err}");
    // A 0 makes the product 0, however large the other dimensions.
    let err = reduce::reduce(Op::Sum, &x, &[usize::MAX, 2, 0], None).unwrap_err();
    assert!(
        matches!(&err, Error::ShapeMismatch { detail, .. } if detail.contains("0 elements")),
        "{err}"
    );
    assert!(reduce::reduce(Op::Sum, &x, &[], Some(0)).is_err());
    // A rank-0 tensor (one element) reduces whole.
    let one = dev.upload(&[4.0f32]).unwrap();
    assert!(
        matches!(reduce::reduce(Op::Sum, &one, &[], None).unwrap(), Reduced::Values(v) if v.to_host().unwrap() == [4.0])
    );
}

// Exactness. The bound the tests above hold a float sum to, γ(D)·Σ|x|, grows
// with the length: for inputs in (−10, 10) it is about 2 at 200k elements and
// 55 at 4M, so a kernel that dropped or duplicated one element would pass
// them. Here the inputs are small integers chosen so that every partial sum
// (and sum of squares) the kernels can form is an integer the accumulator
// holds exactly: then sum, min, max, argmin, argmax and sum_of_squares have
// one right answer, and mean and norm2 are that exact value rounded as
// documented (one f64 division or a correctly rounded √, then the output
// dtype). The expected results come from i64 arithmetic on the CPU.

/// Float dtypes and the integers they hold exactly.
trait ExactInt: Gen {
    /// Every integer up to this magnitude is exact in the accumulator: 2²⁴
    /// for f32, f16 and bf16 (which accumulate in f32), 2⁵³ for f64.
    const ACC_EXACT: i64;
    /// Every integer up to this magnitude is exact in the dtype itself.
    const OUT_EXACT: i64;
    /// `v` (|v| ≤ [`ExactInt::OUT_EXACT`]), exactly.
    fn from_int(v: i64) -> Self;
}

impl ExactInt for f32 {
    const ACC_EXACT: i64 = 1 << 24;
    const OUT_EXACT: i64 = 1 << 24;
    fn from_int(v: i64) -> Self {
        v as f32
    }
}
impl ExactInt for f64 {
    const ACC_EXACT: i64 = 1 << 53;
    const OUT_EXACT: i64 = 1 << 53;
    fn from_int(v: i64) -> Self {
        v as f64
    }
}
impl ExactInt for f16 {
    const ACC_EXACT: i64 = 1 << 24;
    const OUT_EXACT: i64 = 1 << 11;
    fn from_int(v: i64) -> Self {
        f16::from_f64(v as f64)
    }
}
impl ExactInt for bf16 {
    const ACC_EXACT: i64 = 1 << 24;
    const OUT_EXACT: i64 = 1 << 8;
    fn from_int(v: i64) -> Self {
        bf16::from_f64(v as f64)
    }
}

/// The ops with an exact answer on integer inputs (all but logsumexp).
fn exact_ops() -> impl Iterator<Item = Op> {
    Op::ALL.into_iter().filter(|&op| op != Op::LogSumExp)
}

/// `[outer, len, inner]` for reducing `axis` of `shape` (`None`: everything,
/// one line), from the shape alone.
fn split(shape: &[usize], axis: Option<usize>) -> [usize; 3] {
    match axis {
        None => [1, shape.iter().product(), 1],
        Some(a) => [
            shape[..a].iter().product(),
            shape[a],
            shape[a + 1..].iter().product(),
        ],
    }
}

/// The element index of item `j` of line `k` (output `k = o·inner + i`):
/// `(o·len + j)·inner + i`.
fn at([_, len, inner]: [usize; 3], k: usize, j: usize) -> usize {
    ((k / inner) * len + j) * inner + k % inner
}

/// What the exact results of one line are computed from.
#[derive(Clone, Copy, Debug)]
struct Line {
    len: usize,
    sum: i64,
    squares: i64,
    min: i64,
    max: i64,
    /// First index of the minimum and of the maximum.
    argmin: usize,
    argmax: usize,
}

/// Each output's [`Line`], in output order.
fn line_stats(xs: &[i64], shape: &[usize], axis: Option<usize>) -> Vec<Line> {
    let dims @ [outer, len, inner] = split(shape, axis);
    (0..outer * inner)
        .map(|k| {
            let mut l = Line {
                len,
                sum: 0,
                squares: 0,
                min: i64::MAX,
                max: i64::MIN,
                argmin: 0,
                argmax: 0,
            };
            for j in 0..len {
                let v = xs[at(dims, k, j)];
                l.sum += v;
                l.squares += v * v;
                if v < l.min {
                    (l.min, l.argmin) = (v, j);
                }
                if v > l.max {
                    (l.max, l.argmax) = (v, j);
                }
            }
            l
        })
        .collect()
}

/// An exact result: a value (compared bit for bit) or an index.
#[derive(Clone, Copy, Debug)]
enum Exact {
    Value(f64),
    Index(i64),
}

impl PartialEq for Exact {
    fn eq(&self, other: &Exact) -> bool {
        match (*self, *other) {
            (Exact::Value(a), Exact::Value(b)) => a.to_bits() == b.to_bits(),
            (Exact::Index(a), Exact::Index(b)) => a == b,
            _ => false,
        }
    }
}

/// What `op` over one line of integers, held as `T`s, must give.
fn exact<T: ExactInt>(op: Op, l: &Line) -> Exact {
    match op {
        Op::Sum => Exact::Value(l.sum as f64),
        // The exact sum divided in f64, then rounded to the output dtype.
        Op::Mean => Exact::Value(T::round_out(l.sum as f64 / l.len as f64)),
        Op::Min => Exact::Value(l.min as f64),
        Op::Max => Exact::Value(l.max as f64),
        Op::ArgMin => Exact::Index(l.argmin as i64),
        Op::ArgMax => Exact::Index(l.argmax as i64),
        // Exact in the accumulator; f16/bf16 round it once.
        Op::SumOfSquares => Exact::Value(T::round_out(l.squares as f64)),
        // √ correctly rounded: in f64 then f32 (53 ≥ 2·24 + 2, so the double
        // rounding is innocuous), then the output dtype, as the kernel rounds.
        Op::Norm2 => Exact::Value(T::round_out((l.squares as f64).sqrt())),
        Op::LogSumExp => unreachable!("logsumexp is never exact"),
    }
}

/// Runs every op of [`exact_ops`] over the integers `xs` as `T`s (`shape`,
/// along `axis`) on `dev`, and requires every output to be exactly the
/// [`exact`] result. Asserts the premise first: each line's Σx² is exact in
/// the accumulator (so every partial sum and sum of squares is, as each is
/// at most Σx² in magnitude), and each line's sum is exact in `T` with room
/// for a dropped or duplicated element (±4) to stay exact, and so visible.
fn check_exact<T: ExactInt>(
    dev: &Device,
    xs: &[i64],
    shape: &[usize],
    axis: Option<usize>,
    options: ReduceOptions,
) {
    let dtype = T::DTYPE.name();
    let lines = line_stats(xs, shape, axis);
    for l in &lines {
        assert!(
            l.squares <= T::ACC_EXACT && l.sum.abs() + 4 <= T::OUT_EXACT,
            "test input not exact in {dtype}: {l:?}"
        );
    }
    let x: Vec<T> = xs.iter().map(|&v| T::from_int(v)).collect();
    let buf = dev.upload(&x).unwrap();
    for op in exact_ops() {
        let ctx = || format!("{op} of {dtype} {shape:?} along {axis:?}, {options:?}");
        let got: Vec<Exact> = match reduce::reduce_with(op, &buf, shape, axis, options)
            .unwrap_or_else(|e| panic!("{}: {e}", ctx()))
        {
            Reduced::Values(v) => v
                .to_host()
                .unwrap()
                .into_iter()
                .map(|v| match v.value() {
                    Value::Float(f) => Exact::Value(f),
                    Value::Int(i) => panic!("{}: an integer {i} from a float op", ctx()),
                })
                .collect(),
            Reduced::Indices(v) => v.to_host().unwrap().into_iter().map(Exact::Index).collect(),
        };
        assert_eq!(got.len(), lines.len(), "{}: output count", ctx());
        for (k, (g, l)) in got.iter().zip(&lines).enumerate() {
            let want = exact::<T>(op, l);
            assert_eq!(*g, want, "{}: output {k} ({l:?})", ctx());
        }
    }
}

/// Integers for `shape` along `axis`, exact for `T`: each is 0 or ±1..=m,
/// with `m ≤ 4` and the share of non-zeros such that each line's Σx² stays
/// within the accumulator's exact integers; for f16 and bf16, whose own exact
/// integers end at 2048 and 256, elements are then zeroed until each line's
/// sum is within ±64.
fn exact_ints<T: ExactInt>(rng: &mut StdRng, shape: &[usize], axis: Option<usize>) -> Vec<i64> {
    let dims @ [outer, len, inner] = split(shape, axis);
    let budget = T::ACC_EXACT / 8 * 7; // room for chance above the expected Σx²
    let m = (1..=4i64)
        .rev()
        .find(|m| m * m * len as i64 <= budget)
        .unwrap_or(1);
    let density = (budget as f64 / len.max(1) as f64).min(1.0);
    let mut x: Vec<i64> = (0..outer * len * inner)
        .map(|_| {
            if !rng.random_bool(density) {
                return 0;
            }
            let v = rng.random_range(1..=m);
            if rng.random() { v } else { -v }
        })
        .collect();
    if T::OUT_EXACT < T::ACC_EXACT {
        for k in 0..outer * inner {
            let mut sum: i64 = (0..len).map(|j| x[at(dims, k, j)]).sum();
            while sum.abs() > 64 {
                let e = at(dims, k, rng.random_range(0..len));
                if x[e] * sum > 0 {
                    sum -= x[e];
                    x[e] = 0;
                }
            }
        }
    }
    x
}

/// Zeros but for one `v` per line: line `k` has it at position `(offset + k) mod len`.
fn one_hot(shape: &[usize], axis: Option<usize>, v: i64, offset: usize) -> Vec<i64> {
    let dims @ [outer, len, inner] = split(shape, axis);
    let mut x = vec![0; outer * len * inner];
    for k in 0..outer * inner {
        x[at(dims, k, (offset + k) % len)] = v;
    }
    x
}

/// Shapes and axes that take every path of the kernels: the rows kernel
/// (whole and inner axis) below a warp, at one warp, one full unit (the
/// unrolled loop), one block of 8 units, several blocks, and two and three
/// passes; the columns kernel (outer and middle axis) at one item, one unit
/// of 64, two and three passes, and enough columns for several blocks.
const EXACT_CASES: &[(&[usize], Option<usize>)] = &[
    (&[1], None),
    (&[2], None),
    (&[31], None),
    (&[32], None),
    (&[33], None),
    (&[511], None),
    (&[512], None),
    (&[513], None),
    (&[4096], None),
    (&[4097], None),
    (&[12_293], None),
    (&[262_147], None),
    (&[3, 1], Some(1)),
    (&[5, 33], Some(1)),
    (&[3, 512], Some(1)),
    (&[4, 1000], Some(1)),
    (&[300, 40], Some(1)),
    (&[2, 262_657], Some(1)),
    (&[1, 7], Some(0)),
    (&[2, 3], Some(0)),
    (&[63, 5], Some(0)),
    (&[64, 5], Some(0)),
    (&[65, 5], Some(0)),
    (&[4097, 3], Some(0)),
    (&[100, 300], Some(0)),
    (&[2, 1, 3], Some(1)),
    (&[3, 64, 2], Some(1)),
    (&[2, 65, 3], Some(1)),
    (&[3, 4097, 5], Some(1)),
    (&[2, 700, 130], Some(1)),
];

/// The grid limits each case runs at: the default, one block and three
/// blocks (warps and threads grid-stride over several units).
const EXACT_GRIDS: [u32; 3] = [ReduceOptions::DEFAULT_MAX_BLOCKS, 1, 3];

fn exact_random_ints<T: ExactInt>(dev: &Device, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for &(shape, axis) in EXACT_CASES {
        let x = exact_ints::<T>(&mut rng, shape, axis);
        for max_blocks in EXACT_GRIDS {
            check_exact::<T>(
                dev,
                &x,
                shape,
                axis,
                ReduceOptions {
                    max_blocks,
                    ..Default::default()
                },
            );
        }
    }
}

#[test]
fn random_small_integers_reduce_exactly_in_emulator() {
    let dev = Device::emulator();
    exact_random_ints::<f32>(&dev, 11);
    exact_random_ints::<f64>(&dev, 12);
    exact_random_ints::<f16>(&dev, 13);
    exact_random_ints::<bf16>(&dev, 14);
}

fn exact_one_hot<T: ExactInt>(dev: &Device, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for &(shape, axis) in EXACT_CASES {
        let len = axis.map_or(shape.iter().product(), |a| shape[a]);
        // For a whole buffer: the ends of the lanes, units and blocks, and a
        // random position; along an axis, each line has its own position.
        let mut offsets = vec![rng.random_range(0..len)];
        if axis.is_none() {
            offsets.push(len - 1);
            if len <= 4097 {
                offsets.extend([0, 31, 32, 511, 512, 4095, 4096]);
            } else {
                offsets.extend([262_143, 262_144]); // the ends of a second-pass unit
            }
            offsets.retain(|&p| p < len);
        }
        for offset in offsets {
            for v in [1, -1] {
                let x = one_hot(shape, axis, v, offset);
                check_exact::<T>(dev, &x, shape, axis, ReduceOptions::default());
            }
        }
    }
}

#[test]
fn a_single_nonzero_element_is_counted_exactly_once_in_emulator() {
    let dev = Device::emulator();
    exact_one_hot::<f32>(&dev, 21);
    exact_one_hot::<f64>(&dev, 22);
    exact_one_hot::<f16>(&dev, 23);
    exact_one_hot::<bf16>(&dev, 24);
}

#[test]
fn every_position_of_a_line_is_counted_exactly_once_in_emulator() {
    // Line k has its single ±1 at position k mod len, so over all lines every
    // position of the reduced axis is the one that matters once: a position a
    // kernel skips or reads twice changes that line's sum, extreme or index.
    let dev = Device::emulator();
    // 600 items: a full rows unit and a partial one, ten columns units.
    let cases: [(&[usize], Option<usize>); 6] = [
        (&[600, 600], Some(1)),
        (&[600, 600], Some(0)),
        (&[2, 600, 300], Some(1)),
        (&[3, 70, 30], Some(1)),
        // Short rows, several per warp on the small path.
        (&[37, 13], Some(1)),
        (&[45, 3], Some(1)),
    ];
    for (shape, axis) in cases {
        for v in [1, -1] {
            let x = one_hot(shape, axis, v, 0);
            check_exact::<f32>(&dev, &x, shape, axis, ReduceOptions::default());
            check_exact::<f64>(
                &dev,
                &x,
                shape,
                axis,
                ReduceOptions {
                    max_blocks: 3,
                    ..Default::default()
                },
            );
            check_exact::<f16>(&dev, &x, shape, axis, ReduceOptions::default());
            check_exact::<bf16>(
                &dev,
                &x,
                shape,
                axis,
                ReduceOptions {
                    max_blocks: 1,
                    ..Default::default()
                },
            );
        }
    }
}

#[test]
fn exact_int_constants_are_the_edges_of_exactness() {
    fn edge<T: ExactInt>() {
        let out = |i: i64| match T::from_int(i).value() {
            Value::Float(f) => f as i64 == i,
            Value::Int(_) => unreachable!(),
        };
        let acc = |i: i64| T::round_acc(i as f64) as i64 == i;
        assert!((-4..=4).all(out));
        assert!(out(T::OUT_EXACT) && out(-T::OUT_EXACT) && !out(T::OUT_EXACT + 1));
        assert!(acc(T::ACC_EXACT) && acc(-T::ACC_EXACT) && !acc(T::ACC_EXACT + 1));
    }
    edge::<f32>();
    edge::<f64>();
    edge::<f16>();
    edge::<bf16>();
}

/// Exactness on `dev` at sizes beyond the unit tests': random small integers
/// and one-hot lines over `[whole]`, a `[rows, cols]` matrix along both axes,
/// and a `[a, len, b]` tensor along its middle axis.
fn exact_at_scale<T: ExactInt>(
    dev: &Device,
    whole: usize,
    (rows, cols): (usize, usize),
    (a, len, b): (usize, usize, usize),
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let cases: [(&[usize], Option<usize>); 4] = [
        (&[whole], None),
        (&[rows, cols], Some(0)),
        (&[rows, cols], Some(1)),
        (&[a, len, b], Some(1)),
    ];
    for (shape, axis) in cases {
        let x = exact_ints::<T>(&mut rng, shape, axis);
        check_exact::<T>(dev, &x, shape, axis, ReduceOptions::default());
        let n: usize = shape.iter().product();
        let x = one_hot(shape, axis, 1, rng.random_range(0..n));
        check_exact::<T>(dev, &x, shape, axis, ReduceOptions::default());
    }
}

#[test]
fn exact_at_scale_in_emulator() {
    let dev = Device::emulator();
    let sizes = ((1 << 18) + 3, (515, 509), (3, 4097, 2));
    exact_at_scale::<f32>(&dev, sizes.0, sizes.1, sizes.2, 31);
    exact_at_scale::<f64>(&dev, sizes.0, sizes.1, sizes.2, 32);
    exact_at_scale::<f16>(&dev, sizes.0, sizes.1, sizes.2, 33);
    exact_at_scale::<bf16>(&dev, sizes.0, sizes.1, sizes.2, 34);
}

fn gpu() -> Device {
    Device::gpu(0).expect("this test needs a CUDA GPU")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn every_dtype_matches_reference_on_gpu(op in float_op(), iop in int_op(), kind in 0u8..4,
            len in prop_oneof![length(), 0usize..300_000], a in 1usize..9, b in 1usize..9,
            rate in specials(), seed: u64) {
        let dev = gpu();
        case::<f32>(&dev, op, (kind, len, a, b), rate, seed);
        case::<f64>(&dev, op, (kind, len, a, b), rate, seed);
        case::<f16>(&dev, op, (kind, len, a, b), rate, seed);
        case::<bf16>(&dev, op, (kind, len, a, b), rate, seed);
        case::<i32>(&dev, iop, (kind, len, a, b), rate, seed);
        case::<i64>(&dev, iop, (kind, len, a, b), rate, seed);
        case::<u32>(&dev, iop, (kind, len, a, b), rate, seed);
    }
}

/// Every op over `n` generated f32 values on `dev`: the whole buffer, and its
/// first `rows · cols` values as a `[rows, cols]` matrix along both axes.
fn large_reductions_match_reference(dev: &Device, n: usize, rows: usize, cols: usize) {
    assert!(rows * cols <= n, "the matrix is a prefix of the buffer");
    let mut rng = StdRng::seed_from_u64(3);
    let x: Vec<f32> = (0..n).map(|_| f32::gen_value(&mut rng, 0.0)).collect();
    let m = &x[..rows * cols];
    for op in Op::ALL {
        check(dev, op, &x, &[n], None, ReduceOptions::default());
        check(dev, op, m, &[rows, cols], Some(0), ReduceOptions::default());
        check(dev, op, m, &[rows, cols], Some(1), ReduceOptions::default());
    }
}

#[test]
fn large_reductions_match_reference_in_emulator() {
    // Three rows passes (512² + 3 items) and two columns passes (515 rows).
    large_reductions_match_reference(&Device::emulator(), (1 << 18) + 3, 515, 509);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn large_reductions_match_reference_on_gpu() {
    large_reductions_match_reference(&gpu(), (1 << 24) + 3, 4099, 4093);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_and_emulator_agree_bit_for_bit() {
    let (gpu, emulator) = (gpu(), Device::emulator());
    let x: Vec<f32> = (0..300_000)
        .map(|i| ((i * 104_729) % 2001) as f32 * 0.01 - 10.0)
        .collect();
    for (shape, axis) in [
        (vec![300_000], None),
        (vec![300, 1000], Some(1)),
        (vec![300, 1000], Some(0)),
        (vec![30, 100, 100], Some(1)),
    ] {
        for op in [
            Op::Sum,
            Op::Mean,
            Op::Max,
            Op::ArgMax,
            Op::Norm2,
            Op::LogSumExp,
        ] {
            for max_blocks in [1, 1024] {
                assert_eq!(
                    output_bits(&gpu, op, &x, &shape, axis, max_blocks),
                    output_bits(&emulator, op, &x, &shape, axis, max_blocks),
                    "{op} of {shape:?} along {axis:?}"
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn exact_at_scale_on_gpu() {
    // Past 2²⁴ items: a whole buffer, a matrix and a middle axis of 4M + 1.
    let dev = gpu();
    let sizes = ((1 << 24) + 3, (4099, 4097), (3, (1 << 22) + 1, 2));
    exact_at_scale::<f32>(&dev, sizes.0, sizes.1, sizes.2, 41);
    exact_at_scale::<f64>(&dev, sizes.0, sizes.1, sizes.2, 42);
    exact_at_scale::<f16>(&dev, sizes.0, sizes.1, sizes.2, 43);
    exact_at_scale::<bf16>(&dev, sizes.0, sizes.1, sizes.2, 44);
    // f64 accumulates exactly far beyond f32: 2²⁵ items of ±1..=4.
    exact_at_scale::<f64>(&dev, (1 << 25) + 5, (8193, 4097), (2, (1 << 23) + 3, 2), 45);
}

/// Warm calls of every op family on `2^log2` f32 elements on `dev`: the
/// whole-tensor `sum`, `max` and `argmax`, and up to 2^20 the sums of the
/// rows of `[64, 2^log2 / 64]` and of the columns of `[2^log2 / 64, 64]`, each counted
/// with the device's work recording after one call of the same shape (the
/// first call of a shape allocates its scratch and its output; the output
/// goes back to the device's cache when the result drops): one launch (of
/// one kernel, counted, so a kernel launched twice fails), the small kernel
/// up to 2¹⁶ elements and the fused one above (no combine or finish
/// launches), no memset and no allocation. The inputs are ones and one 2.0,
/// so every result is exact and a dropped or doubled unit fails, and so
/// does an output the kernel left unwritten (the emulator fills outputs with
/// NaN / -1 before each call, cached or not).
fn one_launch_per_call(dev: &Device, log2s: &[u32]) {
    // What one call did: its launches by name, allocations, memsets.
    let counted = |w: &WorkCounts| {
        let launches: Vec<(String, u64)> = w
            .launches
            .iter()
            .map(|(k, &n)| (k.to_string(), n))
            .collect();
        (launches, w.allocations, w.memsets)
    };
    // One warm-up call, then the counted one, whose result is returned.
    let warm = |call: &dyn Fn() -> warpforge::Result<Reduced<f32>>| {
        drop(call().unwrap());
        let (r, work) = dev.work_done_by(call).unwrap();
        (r, counted(&work))
    };
    let values = |r: Reduced<f32>| match r {
        Reduced::Values(v) => v.to_host().unwrap(),
        Reduced::Indices(_) => unreachable!(),
    };
    for &log2 in log2s {
        let n = 1usize << log2;
        let mut host = vec![1.0f32; n];
        let peak = n / 3 + 5;
        host[peak] = 2.0;
        let x = dev.upload(&host).unwrap();
        let kind = if log2 <= 16 { "small" } else { "fused" };
        let one = |kernel: String| (vec![(kernel, 1)], 0, 0);
        let expect = |op: &str| one(format!("reduce_{kind}_{op}_f32"));
        let x = &x;
        let whole = |op| move || reduce::reduce(op, x, &[n], None);
        let (r, work) = warm(&whole(Op::Sum));
        assert_eq!(values(r), [n as f32 + 1.0], "sum 2^{log2}");
        assert_eq!(work, expect("sum"), "sum 2^{log2}");
        let (r, work) = warm(&whole(Op::Max));
        assert_eq!(values(r), [2.0], "max 2^{log2}");
        assert_eq!(work, expect("max"), "max 2^{log2}");
        reduce::argmax(x).unwrap();
        let (index, work) = dev.work_done_by(|| reduce::argmax(x)).unwrap();
        assert_eq!(index, peak as u64, "argmax 2^{log2}");
        assert_eq!(counted(&work), expect("argmax"), "argmax 2^{log2}");
        if log2 > 20 {
            continue; // the emulator's time: the whole-tensor calls only
        }
        // Rows: 64 rows of 2^log2 / 64, the small kernel (up to 2^16 a row).
        let len = n / 64;
        let (r, work) = warm(&|| reduce::reduce(Op::Sum, x, &[64, len], Some(1)));
        let rows: Vec<f32> = (0..64)
            .map(|r| len as f32 + f32::from(u8::from(peak / len == r)))
            .collect();
        assert_eq!(values(r), rows, "rows 2^{log2}");
        assert_eq!(work, one("reduce_small_sum_f32".into()), "rows 2^{log2}");
        // Columns: 64 columns of 2^log2 / 64 rows.
        let (r, work) = warm(&|| reduce::reduce(Op::Sum, x, &[len, 64], Some(0)));
        let cols: Vec<f32> = (0..64)
            .map(|c| len as f32 + f32::from(u8::from(peak % 64 == c)))
            .collect();
        assert_eq!(values(r), cols, "columns 2^{log2}");
        assert_eq!(
            work,
            one("reduce_fused_cols_sum_f32".into()),
            "columns 2^{log2}"
        );
    }
}

/// The rule of the device's cache of kernel outputs: a result that is alive
/// is never lent to another call (that call allocates), from one thread or
/// several at once, and its values stay its own; a dropped one is lent again.
#[test]
fn a_held_result_is_never_lent_to_another_call_in_emulator() {
    let dev = Device::emulator();
    let inputs: Vec<_> = (0..4)
        .map(|i| dev.upload(&vec![i as f32 + 1.0; 1000]).unwrap())
        .collect();
    let sum = |x| match reduce::reduce(Op::Sum, x, &[1000], None).unwrap() {
        Reduced::Values(v) => v,
        Reduced::Indices(_) => unreachable!(),
    };
    drop(sum(&inputs[0])); // one output of this type and length in the cache
    let (held, work) = dev.work_done_by(|| Ok(sum(&inputs[0]))).unwrap();
    assert_eq!(work.allocations, 0, "the cached output is lent");
    let (other, work) = dev.work_done_by(|| Ok(sum(&inputs[1]))).unwrap();
    assert_eq!(work.allocations, 1, "the held one is not lent again");
    assert_eq!(held.to_host().unwrap(), [1000.0]);
    assert_eq!(other.to_host().unwrap(), [2000.0]);
    drop((held, other));
    let (_, work) = dev
        .work_done_by(|| Ok((sum(&inputs[2]), sum(&inputs[3]))))
        .unwrap();
    assert_eq!(work.allocations, 0, "both dropped outputs are lent again");
    // Four threads, each holding its last results while it makes more.
    std::thread::scope(|s| {
        for (i, x) in inputs.iter().enumerate() {
            let sum = &sum;
            s.spawn(move || {
                let expected = 1000.0 * (i as f32 + 1.0);
                let mut held = Vec::new();
                for _ in 0..20 {
                    held.push(sum(x));
                    if held.len() > 2 {
                        held.remove(0);
                    }
                    for r in &held {
                        assert_eq!(r.to_host().unwrap(), [expected], "thread {i}");
                    }
                }
            });
        }
    });
}

#[test]
fn a_whole_tensor_reduction_is_one_launch_at_every_size_in_emulator() {
    one_launch_per_call(&Device::emulator(), &[10, 16, 17, 20, 24]);
    // 2^28 f32 (1 GiB) is past what the emulator reduces in a test's time:
    // the same path (the GPU twin below launches it).
    let layout = Layout::new(1 << 28, &[1 << 28], None).unwrap();
    assert_eq!(layout.path(Path::Auto).unwrap(), Path::Fused);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_whole_tensor_reduction_is_one_launch_at_every_size_on_gpu() {
    one_launch_per_call(&gpu(), &[10, 16, 17, 20, 24, 28]);
}
