//! The reduction family against its CPU reference (`reference::reduce`):
//! every op × dtype × axis kind on the emulator, with lengths around every
//! warp and unit boundary and values including ±0, subnormals, ±inf and NaN;
//! bit-for-bit determinism across grid sizes; the documented edge semantics.
//! The `_on_gpu` tests run the same properties on GPU 0 (ignored without one).

use half::{bf16, f16};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use warpforge::reduce::{self, Layout, Op, ReduceOptions, Reduced};
use warpforge::reference::reduce::{RefElement, Value, expected};
use warpforge::{Device, Error};

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
        Layout::new(n, &[n], None).unwrap().fold_depth(),
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
    match reduce::reduce_with(op, &buf, shape, axis, ReduceOptions { max_blocks }).unwrap() {
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
            for max_blocks in [3, 7, 64, 1024] {
                assert_eq!(
                    output_bits(&dev, op, &x, &shape, axis, max_blocks),
                    first,
                    "{op} of {shape:?} along {axis:?} at {max_blocks} blocks"
                );
            }
        }
    }
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
    let err = reduce::reduce(Op::Sum, &x, &[usize::MAX, 2, 0], None).unwrap_err();
    assert!(matches!(err, Error::SizeOverflow { .. }), "{err}");
    assert!(reduce::reduce(Op::Sum, &x, &[], Some(0)).is_err());
    // A rank-0 tensor (one element) reduces whole.
    let one = dev.upload(&[4.0f32]).unwrap();
    assert!(
        matches!(reduce::reduce(Op::Sum, &one, &[], None).unwrap(), Reduced::Values(v) if v.to_host().unwrap() == [4.0])
    );
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

#[test]
#[ignore = "needs a CUDA GPU"]
fn large_reductions_match_reference_on_gpu() {
    let dev = gpu();
    let mut rng = StdRng::seed_from_u64(3);
    let n = (1 << 24) + 3;
    let x: Vec<f32> = (0..n).map(|_| f32::gen_value(&mut rng, 0.0)).collect();
    for op in Op::ALL {
        check(&dev, op, &x, &[n], None, ReduceOptions::default());
        check(
            &dev,
            op,
            &x,
            &[4099, 4093],
            Some(0),
            ReduceOptions::default(),
        );
        check(
            &dev,
            op,
            &x[..4099 * 4093],
            &[4099, 4093],
            Some(1),
            ReduceOptions::default(),
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_and_emulator_agree_bit_for_bit() {
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
                    output_bits(&gpu(), op, &x, &shape, axis, max_blocks),
                    output_bits(&Device::emulator(), op, &x, &shape, axis, max_blocks),
                    "{op} of {shape:?} along {axis:?}"
                );
            }
        }
    }
}
