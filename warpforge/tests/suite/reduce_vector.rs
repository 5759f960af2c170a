//! The rows kernels' 16-byte vector loads (`warpforge_kernels::reduce::Items`):
//! every op × dtype against the CPU reference at lengths around every vector
//! width and unit boundary, with rows that start at every element offset mod 8
//! (so units begin mid-vector: a partial head group, scalar loads, then
//! vectors), NaN at a row's head, body and tail, and ties; the sum's bits
//! against a CPU model of the documented fold order; the same bits at several
//! grid sizes and on the one-launch and multi-pass paths; and the vector and
//! scalar loads of one group agreeing bit for bit.

use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use warpforge::Device;
use warpforge::reduce::{self, Layout, Op, Path, ReduceOptions, Reduced};
use warpforge::reference::reduce::{RefElement, Value, expected};
use warpforge_device::Global;
use warpforge_device::global::vectors16;
use warpforge_kernels::reduce::state::{ArgMax, Max, Sum};
use warpforge_kernels::reduce::{Items, Reduction, State, vectored};

/// Element types built from small integers (every partial sum exact).
trait Small: RefElement + Copy {
    fn small(v: i32) -> Self;
    /// A NaN, for float types.
    fn nan() -> Option<Self>;
}

macro_rules! small_float {
    ($($t:ty: $from:expr, $nan:expr;)*) => { $(
        impl Small for $t {
            fn small(v: i32) -> Self {
                $from(v)
            }
            fn nan() -> Option<Self> {
                Some($nan)
            }
        }
    )* };
}
small_float! {
    f32: |v| v as f32, f32::NAN;
    f64: f64::from, f64::NAN;
    f16: |v| f16::from_f32(v as f32), f16::NAN;
    bf16: |v| bf16::from_f32(v as f32), bf16::NAN;
}
macro_rules! small_int {
    ($($t:ty),*) => { $(
        impl Small for $t {
            fn small(v: i32) -> Self {
                v as $t
            }
            fn nan() -> Option<Self> {
                None
            }
        }
    )* };
}
small_int!(i32, i64, u32);

/// Lengths around every vector width (2, 4, 8), the warp's 32 groups and the
/// 512-item unit.
const LENGTHS: &[usize] = &[
    0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 255, 257, 511, 512, 513, 1031,
];

/// Nine rows: row `r` starts at element `r·len`, so an odd `len` puts the row
/// starts at every offset mod 8 (every misaligned head a vector can have).
const ROWS: usize = 9;

/// `op` over `x` with `shape`/`axis`, checked against the reference; for a
/// sum of small integers also exactly (the f32/f64 accumulator is exact, then
/// one rounding to the output).
fn check<T: Small>(dev: &Device, op: Op, x: &[T], shape: &[usize], axis: Option<usize>) {
    let ctx = || format!("{op} of {:?} {shape:?} along {axis:?}", T::DTYPE);
    let layout = Layout::new(x.len(), shape, axis).unwrap();
    let want = expected(op, x, layout);
    let buf = dev.upload(x).unwrap();
    let got = reduce::reduce(op, &buf, shape, axis);
    let (want, got) = match (want, got) {
        (Ok(w), Ok(g)) => (w, g),
        (Err(_), Err(_)) => return, // both refuse an empty min/max/arg*
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
    assert_eq!(got.len(), want.len(), "{}", ctx());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = w.check(*g) {
            panic!("{}: output {k}: {e}", ctx());
        }
        if op == Op::Sum
            && let (Value::Float(g), reference) = (*g, w.reference())
            && !reference.is_nan()
        {
            let exact = T::round_out(reference);
            assert_eq!(
                g.to_bits(),
                exact.to_bits(),
                "{}: output {k} exactly",
                ctx()
            );
        }
    }
}

/// Small integers in `-8..=8` (many ties at the extremes), with, for floats,
/// NaN at the head of row 1, the middle of row 4, the tail of row 7 and two
/// NaNs in row 8 (the first must win argmin/argmax).
fn inputs<T: Small>(rng: &mut StdRng, len: usize, with_nan: bool) -> Vec<T> {
    let mut x: Vec<T> = (0..ROWS * len)
        .map(|_| T::small(rng.random_range(-8..=8)))
        .collect();
    if let (true, Some(nan), true) = (with_nan, T::nan(), len > 0) {
        for (row, j) in [
            (1, 0),
            (4, len / 2),
            (7, len - 1),
            (8, len / 3),
            (8, len - 1),
        ] {
            x[row * len + j] = nan;
        }
    }
    x
}

fn every_op<T: Small>(ops: &[Op], seed: u64) {
    let dev = Device::emulator();
    let mut rng = StdRng::seed_from_u64(seed);
    for &len in LENGTHS {
        for with_nan in [false, true] {
            let x = inputs::<T>(&mut rng, len, with_nan);
            for &op in ops {
                check(&dev, op, &x, &[ROWS, len], Some(1));
                check(&dev, op, &x, &[ROWS * len], None);
            }
        }
    }
}

const INT_OPS: &[Op] = &[Op::Sum, Op::Min, Op::Max, Op::ArgMin, Op::ArgMax];

#[test]
fn f32_rows_at_every_vector_boundary_in_emulator() {
    every_op::<f32>(&Op::ALL, 1);
}
#[test]
fn f64_rows_at_every_vector_boundary_in_emulator() {
    every_op::<f64>(&Op::ALL, 2);
}
#[test]
fn f16_rows_at_every_vector_boundary_in_emulator() {
    every_op::<f16>(&Op::ALL, 3);
}
#[test]
fn bf16_rows_at_every_vector_boundary_in_emulator() {
    every_op::<bf16>(&Op::ALL, 4);
}
#[test]
fn integer_rows_at_every_vector_boundary_in_emulator() {
    every_op::<i32>(INT_OPS, 5);
    every_op::<i64>(INT_OPS, 6);
    every_op::<u32>(INT_OPS, 7);
}

/// The documented fold order of a rows reduction's sum, on the CPU: units of
/// 512 items, cut at multiples of `width` in the buffer; lane `l` folds groups
/// `l, l + 32, …` in order from `-0.0`; a `shuffle_down` tree (lanes past the
/// end keep their own value); then passes over the states (width 1) until
/// one per row is left.
fn model_sum<A: Copy + core::ops::Add<Output = A>>(
    mut values: Vec<A>,
    rows: usize,
    mut len: usize,
    width: usize,
    zero: A,
) -> Vec<A> {
    let mut w = width;
    loop {
        let per_row = len.div_ceil(512);
        let mut states = Vec::with_capacity(rows * per_row);
        for row in 0..rows {
            for c in 0..per_row {
                let base = row * len;
                let (first, last) = (base + c * 512, base + len.min(c * 512 + 512));
                let mut lanes = [zero; 32];
                for (lane, acc) in lanes.iter_mut().enumerate() {
                    let mut g = first / w + lane;
                    while g * w < last {
                        for &v in &values[(g * w).max(first)..(g * w + w).min(last)] {
                            *acc = *acc + v;
                        }
                        g += 32;
                    }
                }
                for delta in [16, 8, 4, 2, 1] {
                    let old = lanes;
                    for (l, acc) in lanes.iter_mut().enumerate() {
                        *acc = old[l] + old.get(l + delta).copied().unwrap_or(old[l]);
                    }
                }
                states.push(lanes[0]);
            }
        }
        values = states;
        w = 1;
        if per_row <= 1 {
            return values;
        }
        len = per_row;
    }
}

/// Values with magnitudes from 2⁻²⁰ to 2²⁰ and both signs: almost every
/// reassociation changes the sum's bits.
fn wide(rng: &mut StdRng) -> f64 {
    let m: f64 = rng.random_range(1.0..2.0);
    let e = rng.random_range(-20..=20);
    let s = if rng.random() { 1.0 } else { -1.0 };
    s * m * 2f64.powi(e)
}

fn sum_bits<T: Small>(dev: &Device, x: &[T], shape: &[usize], options: ReduceOptions) -> Vec<f64> {
    let buf = dev.upload(x).unwrap();
    let axis = (shape.len() == 2).then_some(1);
    match reduce::reduce_with(Op::Sum, &buf, shape, axis, options).unwrap() {
        Reduced::Values(v) => v
            .to_host()
            .unwrap()
            .into_iter()
            .map(|v| match v.value() {
                Value::Float(f) => f,
                Value::Int(_) => unreachable!("floats"),
            })
            .collect(),
        Reduced::Indices(_) => unreachable!("sum returns values"),
    }
}

/// The kernel's sums against [`model_sum`], bit for bit, at `options`'
/// grid sizes and on every path that applies (small, fused, multi-pass).
fn sums_follow_the_model<T: Small, A: Copy + core::ops::Add<Output = A>>(
    to_t: impl Fn(f64) -> T,
    widen: impl Fn(T) -> A,
    out: impl Fn(A) -> f64,
    zero: A,
) {
    let dev = Device::emulator();
    let mut rng = StdRng::seed_from_u64(11);
    let width = 16 / size_of::<T>();
    for (rows, len) in [
        (1, 1000),
        (1, 40_003),
        (5, 1031),
        (7, 2053),
        (3, 513),
        (9, 77),
    ] {
        let x: Vec<T> = (0..rows * len).map(|_| to_t(wide(&mut rng))).collect();
        let model = model_sum(
            x.iter().map(|&v| widen(v)).collect(),
            rows,
            len,
            width,
            zero,
        );
        let want: Vec<u64> = model.into_iter().map(|a| out(a).to_bits()).collect();
        let shape: Vec<usize> = if rows == 1 {
            vec![len]
        } else {
            vec![rows, len]
        };
        let layout = Layout::new(x.len(), &shape, (shape.len() == 2).then_some(1)).unwrap();
        let paths: Vec<Path> = [Path::Small, Path::Fused, Path::MultiPass]
            .into_iter()
            .filter(|&p| layout.path(p).is_ok())
            .collect();
        assert!(paths.len() >= 2, "{shape:?}: {paths:?}");
        for max_blocks in [1, 3, 64, ReduceOptions::AUTO] {
            for &path in &paths {
                let options = ReduceOptions { max_blocks, path };
                let got: Vec<u64> = sum_bits(&dev, &x, &shape, options)
                    .into_iter()
                    .map(f64::to_bits)
                    .collect();
                assert_eq!(
                    got,
                    want,
                    "{:?} sum of {shape:?}, {max_blocks} blocks, path {path:?}",
                    T::DTYPE
                );
            }
        }
    }
}

#[test]
fn f32_sums_follow_the_documented_order_at_every_grid_size_in_emulator() {
    sums_follow_the_model::<f32, f32>(|v| v as f32, |v| v, f64::from, -0.0);
}
#[test]
fn f64_sums_follow_the_documented_order_at_every_grid_size_in_emulator() {
    sums_follow_the_model::<f64, f64>(|v| v, |v| v, |v| v, -0.0);
}
#[test]
fn bf16_sums_follow_the_documented_order_at_every_grid_size_in_emulator() {
    sums_follow_the_model::<bf16, f32>(
        bf16::from_f64,
        f32::from,
        |a| bf16::from_f32(a).to_f64(),
        -0.0,
    );
}
#[test]
fn f16_sums_follow_the_documented_order_at_every_grid_size_in_emulator() {
    // Scaled into f16's range: no ±inf elements, so no inf − inf NaN.
    sums_follow_the_model::<f16, f32>(
        |v| f16::from_f64(v / 64.0),
        f32::from,
        |a| f16::from_f32(a).to_f64(),
        -0.0,
    );
}

/// Folds `x` group by group (`width` items at multiples of `width` of the
/// slice) through `R`'s [`Items`] (vector loads where the group is aligned,
/// scalar ones otherwise) and encodes the result.
fn fold_groups<T, R>(x: &[T], width: u64) -> [u64; 2]
where
    T: warpforge_kernels::reduce::Input,
    R: Reduction<T>,
{
    // SAFETY: `x` is valid and unwritten while `items` lives; on the host
    // any memory is the emulator's global memory.
    let x_global = unsafe { Global::from_raw(x.as_ptr(), x.len()) };
    let mut items = vectored::<T, R>(x_global);
    let mut acc = R::State::empty();
    let mut k = 0;
    while k < x.len() as u64 {
        let n = width.min(x.len() as u64 - k);
        acc = items.fold(acc, k, k, n);
        k += width;
    }
    acc.encode()
}

/// The same groups at every offset of a buffer: one offset is 16-byte
/// aligned (vector loads), the others are not (scalar loads); the folds
/// agree bit for bit, sums included.
#[test]
fn vector_and_scalar_loads_fold_the_same_bits() {
    let mut rng = StdRng::seed_from_u64(3);
    let n = 203;
    let data: Vec<f32> = (0..n).map(|_| wide(&mut rng) as f32).collect();
    let halves: Vec<bf16> = data.iter().map(|&v| bf16::from_f32(v)).collect();
    let mut buf = vec![0f32; n + 8];
    let mut hbuf = vec![bf16::ZERO; n + 8];
    let (mut aligned, mut h_aligned) = (0, 0);
    let mut first: Option<[[u64; 2]; 4]> = None;
    for off in 0..8 {
        buf[off..off + n].copy_from_slice(&data);
        hbuf[off..off + n].copy_from_slice(&halves);
        let (x, h) = (&buf[off..off + n], &hbuf[off..off + n]);
        aligned += usize::from(vectors16::<f32, 4>(x).0 == 0);
        h_aligned += usize::from(vectors16::<bf16, 8>(h).0 == 0);
        let bits = [
            fold_groups::<f32, Sum>(x, 4),
            fold_groups::<f32, Max>(x, 4),
            fold_groups::<f32, ArgMax>(x, 4),
            fold_groups::<bf16, Sum>(h, 8),
        ];
        match first {
            None => first = Some(bits),
            Some(f) => assert_eq!(bits, f, "offset {off}"),
        }
    }
    assert_eq!((aligned, h_aligned), (2, 1), "both paths ran");
}

/// Floats at every edge of the order: NaNs of both signs, ±inf, ±0,
/// subnormals, ties.
fn edge_values() -> Vec<f32> {
    let sub = f32::from_bits(1);
    vec![
        f32::NAN,
        -f32::NAN,
        f32::NEG_INFINITY,
        -1e30,
        -1.0,
        -sub,
        -0.0,
        0.0,
        sub,
        1.0,
        1.0,
        1e30,
        f32::INFINITY,
    ]
}

/// The integer keys order non-NaN values like `Acc::below` (`-0 < +0`), the
/// arg keys like `==` (`-0 == +0`), and keys round-trip; for f32 and f64.
#[test]
fn keys_order_values_like_the_float_order() {
    use warpforge_kernels::reduce::Acc;
    let vals = edge_values();
    for &a in vals.iter().filter(|v| !v.is_nan()) {
        assert_eq!(f32::from_key(a.key()).to_bits(), a.to_bits());
        let (wa, wide_a) = (a, f64::from(a));
        assert_eq!(f64::from_key(wide_a.key()).to_bits(), wide_a.to_bits());
        for &b in vals.iter().filter(|v| !v.is_nan()) {
            assert_eq!(wa.key() < b.key(), wa.below(b), "{a} < {b}");
            assert_eq!(wa.arg_key() == b.arg_key(), a == b, "{a} == {b}");
            let wide_b = f64::from(b);
            assert_eq!(wide_a.key() < wide_b.key(), wide_a.below(wide_b));
            assert_eq!(wide_a.arg_key() == wide_b.arg_key(), a == b);
        }
    }
}

/// numpy's argmin/argmax: the first NaN, else the first extreme (`-0 == +0`).
fn numpy_arg(xs: &[f32], max: bool) -> u64 {
    if let Some(i) = xs.iter().position(|v| v.is_nan()) {
        return i as u64;
    }
    let mut best = 0;
    for (i, &v) in xs.iter().enumerate() {
        if (max && v > xs[best]) || (!max && v < xs[best]) {
            best = i;
        }
    }
    best as u64
}

/// numpy's min/max with `-0 < +0` and NaN propagating, as bits (NaN canonical).
fn numpy_extreme(xs: &[f32], max: bool) -> u32 {
    if xs.iter().any(|v| v.is_nan()) {
        return f32::NAN.to_bits();
    }
    let total = |v: &f32| {
        let b = v.to_bits() as i32;
        b ^ (((b >> 31) as u32) >> 1) as i32
    };
    let pick = if max {
        xs.iter().max_by_key(|v| total(v))
    } else {
        xs.iter().min_by_key(|v| total(v))
    };
    pick.map_or(0, |v| v.to_bits())
}

/// The min/max/argmin/argmax states over random lists of edge values: a
/// lane's in-order `push` fold and a `combine` tree over an arbitrary split
/// both give numpy's answer (first index of ties and of NaN).
#[test]
fn extreme_and_arg_states_follow_numpy_in_push_and_combine() {
    use warpforge_kernels::reduce::state::{ArgMin, Min};
    let vals = edge_values();
    let mut rng = StdRng::seed_from_u64(9);
    for _ in 0..3000 {
        let n = rng.random_range(1..12);
        let xs: Vec<f32> = (0..n)
            .map(|_| vals[rng.random_range(0..vals.len())])
            .collect();
        let split = rng.random_range(0..=n);
        macro_rules! both {
            ($r:ty) => {{
                let load = |i: usize| <$r as Reduction<f32>>::load(xs[i], i as u64);
                let pushed = (0..n).fold(State::empty(), |a, i| State::push(a, load(i)));
                // A lane's fold in the kernels: its first element, the rest
                // pushed onto it without the empty-state test.
                let nonempty = (1..n).fold(load(0), |a, i| State::push_nonempty(a, load(i)));
                assert_eq!(State::encode(nonempty), State::encode(pushed), "{xs:?}");
                let left = (0..split).fold(State::empty(), |a, i| State::combine(a, load(i)));
                let right = (split..n)
                    .rev()
                    .fold(State::empty(), |a, i| State::combine(load(i), a));
                let combined = State::combine(left, right);
                let (p, c): ([u64; 2], [u64; 2]) = (State::encode(pushed), State::encode(combined));
                (p, c)
            }};
        }
        for max in [false, true] {
            let ((p, c), (ap, ac)) = if max {
                (both!(Max), both!(ArgMax))
            } else {
                (both!(Min), both!(ArgMin))
            };
            let want = u64::from(numpy_extreme(&xs, max));
            assert_eq!((p[0], c[0]), (want, want), "{xs:?} max {max}");
            let want = numpy_arg(&xs, max);
            assert_eq!((ap[1], ac[1]), (want, want), "{xs:?} arg max {max}");
        }
    }
}

/// The output bits of `op` over `x` (`shape`, `axis`) with `options`.
fn bits_with<T: Small>(
    dev: &Device,
    op: Op,
    x: &[T],
    shape: &[usize],
    axis: Option<usize>,
    options: ReduceOptions,
) -> Vec<u64> {
    let buf = dev.upload(x).unwrap();
    match reduce::reduce_with(op, &buf, shape, axis, options) {
        Ok(Reduced::Values(v)) => v
            .to_host()
            .unwrap()
            .into_iter()
            .map(|v| match v.value() {
                Value::Float(f) => f.to_bits(),
                Value::Int(i) => i as u64,
            })
            .collect(),
        Ok(Reduced::Indices(v)) => v.to_host().unwrap().into_iter().map(|i| i as u64).collect(),
        Err(e) => panic!("{op} of {:?} {shape:?}: {e}", T::DTYPE),
    }
}

/// The small path's threshold (`SMALL_MAX_LEN`, 2¹⁶ items per row).
const THRESHOLD: usize = 1 << 16;

/// Row lengths at the small path's edges: empty, one item, a warp's lanes, a
/// unit, two units, and the threshold.
const SMALL_LENGTHS: &[usize] = &[
    0,
    1,
    31,
    32,
    33,
    511,
    512,
    513,
    1023,
    1024,
    1025,
    8 * 512 + 3,
    16 * 512 + 1,
    THRESHOLD - 1,
    THRESHOLD,
    THRESHOLD + 1,
];

/// Every op of `T` at every length of [`SMALL_LENGTHS`], whole and as 3 rows
/// (rows 1 and 2 start mid-buffer, off the 16-byte vectors, for every length
/// that is not a multiple of the vector width): the path `Auto` picks is the
/// small one exactly up to the threshold, and it gives the multi-pass path's
/// bits (NaN at a row's head and tail included), which also pass the
/// reference check.
fn small_path_matches_multi_pass<T: Small>(dev: &Device, ops: &[Op], seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for &len in SMALL_LENGTHS {
        let rows = if len > 4096 { 2 } else { 3 };
        let mut x: Vec<T> = (0..rows * len)
            .map(|_| T::small(rng.random_range(-8..=8)))
            .collect();
        if let (Some(nan), true) = (T::nan(), len > 0) {
            x[len] = nan; // row 1's head
            x[rows * len - 1] = nan; // the last row's tail
        }
        for (shape, axis) in [(vec![rows, len], Some(1)), (vec![len], None)] {
            let x = &x[..shape.iter().product()];
            let layout = Layout::new(x.len(), &shape, axis).unwrap();
            let auto = layout.path(Path::Auto).unwrap();
            assert_eq!(auto == Path::Small, len <= THRESHOLD, "{shape:?}: {auto:?}");
            if len > THRESHOLD {
                let e = layout.path(Path::Small).unwrap_err();
                assert!(e.to_string().contains("`path`"), "{e}");
            }
            for &op in ops {
                let multi = ReduceOptions {
                    path: Path::MultiPass,
                    ..Default::default()
                };
                if len == 0 && op.returns_indices() || len == 0 && matches!(op, Op::Min | Op::Max) {
                    continue; // EmptyReduction on every path
                }
                let want = bits_with(dev, op, x, &shape, axis, multi);
                let got = bits_with(dev, op, x, &shape, axis, ReduceOptions::default());
                assert_eq!(got, want, "{op} of {:?} {shape:?}", T::DTYPE);
                if auto == Path::Small && len > 0 && len < THRESHOLD {
                    check(dev, op, x, &shape, axis); // against the reference
                }
            }
        }
    }
}

/// Every dtype's ops on `dev` ([`small_path_matches_multi_pass`]).
fn small_path_matches_multi_pass_every_dtype(dev: &Device) {
    small_path_matches_multi_pass::<f32>(dev, &Op::ALL, 21);
    small_path_matches_multi_pass::<f64>(dev, &Op::ALL, 22);
    small_path_matches_multi_pass::<f16>(dev, &Op::ALL, 23);
    small_path_matches_multi_pass::<bf16>(dev, &Op::ALL, 24);
    small_path_matches_multi_pass::<i32>(dev, INT_OPS, 25);
    small_path_matches_multi_pass::<i64>(dev, INT_OPS, 26);
    small_path_matches_multi_pass::<u32>(dev, INT_OPS, 27);
}

#[test]
fn small_path_matches_multi_pass_in_emulator() {
    small_path_matches_multi_pass_every_dtype(&Device::emulator());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn small_path_matches_multi_pass_on_gpu() {
    small_path_matches_multi_pass_every_dtype(&Device::gpu(0).expect("this test needs a CUDA GPU"));
}

/// Many short rows (a warp per row) and a few long ones (a block per row):
/// the same bits at every grid size (the warps and blocks grid-stride over
/// the rows), equal to the multi-pass path's.
#[test]
fn small_path_has_the_same_bits_at_every_grid_size_in_emulator() {
    let dev = Device::emulator();
    let mut rng = StdRng::seed_from_u64(28);
    for (rows, len) in [(2000, 64), (300, 511), (37, 1500)] {
        let x: Vec<f32> = (0..rows * len).map(|_| wide(&mut rng) as f32).collect();
        let shape = [rows, len];
        for op in [Op::Sum, Op::LogSumExp, Op::ArgMin, Op::Mean] {
            let multi = ReduceOptions {
                path: Path::MultiPass,
                ..Default::default()
            };
            let want = bits_with(&dev, op, &x, &shape, Some(1), multi);
            for max_blocks in [1, 2, 7, 64, ReduceOptions::AUTO] {
                let small = ReduceOptions {
                    max_blocks,
                    path: Path::Small,
                };
                assert_eq!(
                    bits_with(&dev, op, &x, &shape, Some(1), small),
                    want,
                    "{op} of {shape:?} at {max_blocks} blocks"
                );
            }
        }
    }
}

/// Row lengths of the fused path (more than one unit per row): a unit and
/// one item, two units and 7, eight and 3 (none a multiple of a vector
/// width, so rows after the first start mid-vector), one past the small
/// path's threshold, and 512² + 1 (two combine levels in the last block).
const FUSED_LENGTHS: &[usize] = &[513, 1031, 8 * 512 + 3, THRESHOLD + 1, 512 * 512 + 1];

/// Every op of `T` on the one-launch fused path (forced, where the rows are
/// short enough for the small path) against the multi-pass path, bit for
/// bit, at 1, 2, 3, 64 blocks and the device's wave: whole tensors and 3
/// rows (2 for the longer lengths), small integers (exact sums, ties at the
/// extremes), then, for floats, the same with NaN at a row's head, in the
/// middle and at the tail (two in row 0: the first wins argmin/argmax). Where `Auto` takes the fused path it is also checked against
/// the reference.
fn fused_path_matches_multi_pass<T: Small>(dev: &Device, ops: &[Op], seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for (&len, with_nan) in FUSED_LENGTHS.iter().flat_map(|l| [(l, false), (l, true)]) {
        if with_nan && T::nan().is_none() {
            continue;
        }
        let rows = match len {
            ..=4096 => 3,
            4097..=THRESHOLD => 2,
            _ => 1, // the whole tensor alone: rows would only repeat it
        };
        let mut x: Vec<T> = (0..rows * len)
            .map(|_| T::small(rng.random_range(-8..=8)))
            .collect();
        if let (true, Some(nan)) = (with_nan, T::nan()) {
            x[len / 3] = nan; // row 0: the first NaN wins
            x[len - 1] = nan;
            x[rows * len - 1] = nan; // the last row's tail
            if rows > 1 {
                x[len] = nan; // row 1's head
            }
        }
        let mut shapes = vec![(vec![len], None)];
        if rows > 1 {
            shapes.push((vec![rows, len], Some(1)));
        }
        for (shape, axis) in shapes {
            let x = &x[..shape.iter().product()];
            let layout = Layout::new(x.len(), &shape, axis).unwrap();
            let auto = layout.path(Path::Auto).unwrap();
            assert_eq!(auto == Path::Fused, len > THRESHOLD, "{shape:?}: {auto:?}");
            assert_eq!(layout.path(Path::Fused).unwrap(), Path::Fused, "{shape:?}");
            for &op in ops {
                let ctx = format!("{op} of {:?} {shape:?}, NaN {with_nan}", T::DTYPE);
                let with = |max_blocks, path| ReduceOptions { max_blocks, path };
                let want = bits_with(dev, op, x, &shape, axis, with(7, Path::MultiPass));
                for max_blocks in [1, 2, 3, 64, ReduceOptions::AUTO] {
                    let got = bits_with(dev, op, x, &shape, axis, with(max_blocks, Path::Fused));
                    assert_eq!(got, want, "{ctx} at {max_blocks} blocks");
                }
                if auto == Path::Fused {
                    check(dev, op, x, &shape, axis); // against the reference
                }
            }
        }
    }
}

/// Every dtype's ops on `dev` ([`fused_path_matches_multi_pass`]).
fn fused_path_matches_multi_pass_every_dtype(dev: &Device) {
    fused_path_matches_multi_pass::<f32>(dev, &Op::ALL, 31);
    fused_path_matches_multi_pass::<f64>(dev, &Op::ALL, 32);
    fused_path_matches_multi_pass::<f16>(dev, &Op::ALL, 33);
    fused_path_matches_multi_pass::<bf16>(dev, &Op::ALL, 34);
    fused_path_matches_multi_pass::<i32>(dev, INT_OPS, 35);
    fused_path_matches_multi_pass::<i64>(dev, INT_OPS, 36);
    fused_path_matches_multi_pass::<u32>(dev, INT_OPS, 37);
}

#[test]
fn fused_path_matches_multi_pass_in_emulator() {
    fused_path_matches_multi_pass_every_dtype(&Device::emulator());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_path_matches_multi_pass_on_gpu() {
    fused_path_matches_multi_pass_every_dtype(&Device::gpu(0).expect("this test needs a CUDA GPU"));
}

/// Columns shapes `(outer, len, inner)` of the fused columns kernel: one
/// chunk of 64 rows (finished where it is folded, no tickets), one combine
/// level (65 rows; 700 with 3 columns, read one per thread), two levels
/// (4097 rows: 65 chunks, 2 level-1 states), several column tiles (300
/// columns: 2 tiles of 256 where a thread takes one column, 1030 f32
/// columns in 5), an outer axis of 2.
const FUSED_COLS: &[(usize, usize, usize)] = &[
    (1, 64, 5),
    (1, 65, 8),
    (1, 700, 3),
    (1, 4097, 4),
    (1, 130, 300),
    (1, 66, 1030),
    (2, 130, 12),
];

/// Every op of `T` along columns on the one-launch fused path (the
/// default for columns) against the multi-pass path (a columns pass, a
/// combine pass per level, the finish), bit for bit, at 1, 2, 3, 64 blocks
/// and the device's wave, small integers with ties, and for floats NaN in
/// column 0's head and twice in the last column (the first wins
/// argmin/argmax).
fn fused_columns_match_multi_pass<T: Small>(dev: &Device, ops: &[Op], seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for (&(outer, len, inner), with_nan) in FUSED_COLS.iter().flat_map(|c| [(c, false), (c, true)])
    {
        if with_nan && T::nan().is_none() {
            continue;
        }
        let n = outer * len * inner;
        let mut x: Vec<T> = (0..n).map(|_| T::small(rng.random_range(-8..=8))).collect();
        if let (true, Some(nan)) = (with_nan, T::nan()) {
            x[0] = nan;
            x[(len / 2) * inner + inner - 1] = nan;
            x[(len - 1) * inner + inner - 1] = nan;
        }
        let (shape, axis) = match outer {
            1 => (vec![len, inner], 0),
            _ => (vec![outer, len, inner], 1),
        };
        let layout = Layout::new(n, &shape, Some(axis)).unwrap();
        assert_eq!(layout.path(Path::Auto).unwrap(), Path::Fused, "{shape:?}");
        for &op in ops {
            let ctx = format!("{op} of {:?} {shape:?}, NaN {with_nan}", T::DTYPE);
            let with = |max_blocks, path| ReduceOptions { max_blocks, path };
            let want = bits_with(dev, op, &x, &shape, Some(axis), with(7, Path::MultiPass));
            for max_blocks in [1, 2, 3, 64, ReduceOptions::AUTO] {
                let got = bits_with(
                    dev,
                    op,
                    &x,
                    &shape,
                    Some(axis),
                    with(max_blocks, Path::Fused),
                );
                assert_eq!(got, want, "{ctx} at {max_blocks} blocks");
            }
        }
    }
}

#[test]
fn fused_columns_match_multi_pass_in_emulator() {
    let dev = Device::emulator();
    fused_columns_match_multi_pass::<f32>(&dev, &Op::ALL, 51);
    fused_columns_match_multi_pass::<f64>(&dev, &Op::ALL, 52);
    fused_columns_match_multi_pass::<f16>(&dev, &Op::ALL, 53);
    fused_columns_match_multi_pass::<bf16>(&dev, &Op::ALL, 54);
    fused_columns_match_multi_pass::<i32>(&dev, INT_OPS, 55);
    fused_columns_match_multi_pass::<i64>(&dev, INT_OPS, 56);
    fused_columns_match_multi_pass::<u32>(&dev, INT_OPS, 57);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_columns_match_multi_pass_on_gpu() {
    let dev = Device::gpu(0).expect("this test needs a CUDA GPU");
    fused_columns_match_multi_pass::<f32>(&dev, &Op::ALL, 51);
    fused_columns_match_multi_pass::<bf16>(&dev, &Op::ALL, 54);
    fused_columns_match_multi_pass::<i64>(&dev, INT_OPS, 56);
}

/// Column counts around every vector width (2, 4, 8) and a warp's 32
/// groups: most are not multiples of the width, so most rows' column groups
/// start mid-vector (scalar loads) and the last group of a row is partial.
const INNERS: &[usize] = &[
    1,
    2,
    3,
    4,
    5,
    7,
    8,
    9,
    15,
    16,
    17,
    33,
    37,
    67,
    256 + 8,
    256 + 3,
];

/// Lengths of the reduced axis around the 64-item column unit.
const COL_LENGTHS: &[usize] = &[1, 2, 63, 64, 65, 129];

/// Every op of `T` along an outer axis (`[len, inner]`, axis 0) and a middle
/// one (`[3, len, inner]`, axis 1) at every column count of [`INNERS`],
/// against the reference (sums of small integers exactly): ties at the
/// extremes, and for floats NaN at column 0's head, the last column's tail
/// and twice in column 1 (the first wins argmin/argmax).
fn every_op_along_columns<T: Small>(ops: &[Op], seed: u64) {
    let dev = Device::emulator();
    let mut rng = StdRng::seed_from_u64(seed);
    for &inner in INNERS {
        for &len in COL_LENGTHS {
            for with_nan in [false, true] {
                if with_nan && T::nan().is_none() {
                    continue;
                }
                for (shape, axis) in [(vec![len, inner], 0), (vec![3, len, inner], 1)] {
                    let n: usize = shape.iter().product();
                    let mut x: Vec<T> =
                        (0..n).map(|_| T::small(rng.random_range(-8..=8))).collect();
                    if let (true, Some(nan)) = (with_nan, T::nan()) {
                        x[0] = nan;
                        x[n - 1] = nan;
                        if inner > 1 {
                            x[(len / 2) * inner + 1] = nan;
                            x[(len - 1) * inner + 1] = nan;
                        }
                    }
                    for &op in ops {
                        check(&dev, op, &x, &shape, Some(axis));
                    }
                }
            }
        }
    }
}

#[test]
fn f32_columns_at_every_vector_boundary_in_emulator() {
    every_op_along_columns::<f32>(&Op::ALL, 41);
}
#[test]
fn f64_columns_at_every_vector_boundary_in_emulator() {
    every_op_along_columns::<f64>(&Op::ALL, 42);
}
#[test]
fn f16_columns_at_every_vector_boundary_in_emulator() {
    every_op_along_columns::<f16>(&Op::ALL, 43);
}
#[test]
fn bf16_columns_at_every_vector_boundary_in_emulator() {
    every_op_along_columns::<bf16>(&Op::ALL, 44);
}
#[test]
fn integer_columns_at_every_vector_boundary_in_emulator() {
    every_op_along_columns::<i32>(INT_OPS, 45);
    every_op_along_columns::<i64>(INT_OPS, 46);
    every_op_along_columns::<u32>(INT_OPS, 47);
}

/// The documented fold order of a columns reduction's sum, on the CPU: each
/// output's `len` items (`values`, in order along the axis) in units of 64,
/// folded in order from `-0.0`; then passes over the unit states in units of
/// 64 until one is left.
fn model_column_sum<A: Copy + core::ops::Add<Output = A>>(mut values: Vec<A>, zero: A) -> A {
    loop {
        values = values
            .chunks(64)
            .map(|unit| unit.iter().fold(zero, |acc, &v| acc + v))
            .collect();
        if values.len() == 1 {
            return values[0];
        }
    }
}

/// The kernel's column sums against [`model_column_sum`], bit for bit, at
/// several grid sizes: ragged column counts (rows start mid-vector), one
/// columns pass and two (a combine pass), an outer and a middle axis.
fn column_sums_follow_the_model<T: Small, A: Copy + core::ops::Add<Output = A>>(
    to_t: impl Fn(f64) -> T,
    widen: impl Fn(T) -> A,
    out: impl Fn(A) -> f64,
    zero: A,
) {
    let dev = Device::emulator();
    let mut rng = StdRng::seed_from_u64(12);
    for (outer, len, inner) in [(1, 4097, 37), (1, 200, 264), (3, 130, 9), (2, 65, 5)] {
        let x: Vec<T> = (0..outer * len * inner)
            .map(|_| to_t(wide(&mut rng)))
            .collect();
        let want: Vec<u64> = (0..outer * inner)
            .map(|k| {
                let (o, i) = (k / inner, k % inner);
                let line = (0..len)
                    .map(|j| widen(x[(o * len + j) * inner + i]))
                    .collect();
                out(model_column_sum(line, zero)).to_bits()
            })
            .collect();
        let (shape, axis) = match outer {
            1 => (vec![len, inner], 0),
            _ => (vec![outer, len, inner], 1),
        };
        for max_blocks in [1, 3, 64, ReduceOptions::AUTO] {
            let options = ReduceOptions {
                max_blocks,
                path: Path::Auto,
            };
            let got = bits_with(&dev, Op::Sum, &x, &shape, Some(axis), options);
            assert_eq!(
                got,
                want,
                "{:?} sum of {shape:?} along {axis}, {max_blocks} blocks",
                T::DTYPE
            );
        }
    }
}

#[test]
fn column_sums_follow_the_documented_order_at_every_grid_size_in_emulator() {
    column_sums_follow_the_model::<f32, f32>(|v| v as f32, |v| v, f64::from, -0.0);
    column_sums_follow_the_model::<f64, f64>(|v| v, |v| v, |v| v, -0.0);
    column_sums_follow_the_model::<bf16, f32>(
        bf16::from_f64,
        f32::from,
        |a| bf16::from_f32(a).to_f64(),
        -0.0,
    );
    // Scaled into f16's range: no ±inf elements, so no inf − inf NaN.
    column_sums_follow_the_model::<f16, f32>(
        |v| f16::from_f64(v / 64.0),
        f32::from,
        |a| f16::from_f32(a).to_f64(),
        -0.0,
    );
}

/// The profiles of the launches `work` makes on a fresh emulator, with the
/// value it returns.
fn profiled<R>(
    work: impl FnOnce(&Device) -> warpforge::Result<R>,
) -> (R, Vec<warpforge::MemoryProfile>) {
    let dev = Device::emulator();
    dev.profile_memory(|| work(&dev)).unwrap()
}

/// The launch of `kernel` among `profiles`.
fn launch_of<'a>(
    profiles: &'a [warpforge::MemoryProfile],
    kernel: &str,
) -> &'a warpforge::MemoryProfile {
    let names: Vec<&str> = profiles.iter().map(|p| p.kernel.as_str()).collect();
    profiles
        .iter()
        .find(|p| p.kernel == kernel)
        .unwrap_or_else(|| panic!("no launch of {kernel} among {names:?}"))
}

/// Asserts that `p`'s global loads are all 128-bit and coalesced (≥ 0.95).
fn assert_vector_loads(p: &warpforge::MemoryProfile) {
    let l = &p.global_load;
    assert!(l.requests > 0, "{}: the input's loads are seen", p.kernel);
    assert_eq!(
        l.requests_by_width,
        [0, 0, 0, 0, l.requests],
        "{}: every load is 16 bytes",
        p.kernel
    );
    assert!(
        l.efficiency() >= 0.95,
        "{}: load efficiency {}",
        p.kernel,
        l.efficiency()
    );
}

/// The main pass of a whole-tensor f32 sum and bf16 max on aligned buffers
/// of a few thousand elements reads its input with 16-byte vector loads
/// through `Global` (so the emulator's profile sees them), at ≥ 0.95
/// coalescing efficiency; so do the columns pass and the one-launch columns
/// kernel when `inner` is a multiple of the vector width, and the combine and
/// finish passes (one 16-byte load per state).
#[test]
fn main_passes_read_16_byte_vectors_at_full_efficiency_in_emulator() {
    let n = 4096;
    let xs: Vec<f32> = (0..n).map(|i| (i % 17) as f32 - 8.0).collect();
    let (sum, profiles) = profiled(|dev| {
        let x = dev.upload(&xs)?;
        match reduce::reduce(Op::Sum, &x, &[n], None)? {
            Reduced::Values(v) => v.to_host(),
            Reduced::Indices(_) => unreachable!(),
        }
    });
    assert_eq!(sum, [xs.iter().sum::<f32>()]);
    let p = launch_of(&profiles, "reduce_small_sum_f32");
    assert_vector_loads(p);
    // 8 units of 512 floats: 4 vectors per lane each, 16 sectors a request.
    assert_eq!(p.global_load.requests, 8 * 4);
    assert_eq!(p.global_load.sectors_per_request(), 16.0);

    let n = 3000; // 5 whole units and a partial one of 55 whole vectors
    let hs: Vec<bf16> = (0..n)
        .map(|i| bf16::from_f32(((i * 7919) % 1000) as f32))
        .collect();
    let (max, profiles) = profiled(|dev| {
        let x = dev.upload(&hs)?;
        match reduce::reduce(Op::Max, &x, &[n], None)? {
            Reduced::Values(v) => v.to_host(),
            Reduced::Indices(_) => unreachable!(),
        }
    });
    assert_eq!(max, [hs.iter().copied().fold(bf16::MIN, bf16::max)]);
    assert_vector_loads(launch_of(&profiles, "reduce_small_max_bf16"));

    // Columns: 256 floats per row, so every thread's 4 columns are a vector.
    let (rows, inner) = (130, 256);
    let xs: Vec<f32> = (0..rows * inner).map(|i| (i % 13) as f32).collect();
    let (_, profiles) = profiled(|dev| {
        let x = dev.upload(&xs)?;
        let multi_pass = ReduceOptions {
            path: Path::MultiPass,
            ..Default::default()
        };
        reduce::reduce_with(Op::Sum, &x, &[rows, inner], Some(0), multi_pass).map(|_| ())
    });
    assert_vector_loads(launch_of(&profiles, "reduce_cols_sum_f32"));
    assert_vector_loads(launch_of(&profiles, "combine_cols_sum_f32"));
    assert_vector_loads(launch_of(&profiles, "finish_f32"));
    // The one-launch columns kernel (the default) reads the elements the
    // same way: 64 rows, one chunk, so no combining block reads states
    // (those it reads 8 bytes at a time through the scratch's `Out`).
    let (_, profiles) = profiled(|dev| {
        let x = dev.upload(&xs[..64 * inner])?;
        reduce::reduce(Op::Sum, &x, &[64, inner], Some(0)).map(|_| ())
    });
    assert_vector_loads(launch_of(&profiles, "reduce_fused_cols_sum_f32"));
}

/// Columns whose rows are not whole vectors (`inner` = 250 floats) take a
/// thread per column: consecutive lanes read consecutive floats, coalesced,
/// where 4 columns per thread would read 4 bytes of every 16.
#[test]
fn ragged_columns_take_a_thread_per_column_in_emulator() {
    let (rows, inner) = (64, 250);
    let xs: Vec<f32> = (0..rows * inner).map(|i| (i % 13) as f32).collect();
    let (sums, profiles) = profiled(|dev| {
        let x = dev.upload(&xs)?;
        match reduce::reduce(Op::Sum, &x, &[rows, inner], Some(0))? {
            Reduced::Values(v) => v.to_host(),
            Reduced::Indices(_) => unreachable!(),
        }
    });
    let want: Vec<f32> = (0..inner)
        .map(|c| (0..rows).map(|r| xs[r * inner + c]).sum())
        .collect();
    assert_eq!(sums, want);
    let l = &launch_of(&profiles, "reduce_fused_cols_sum_f32").global_load;
    assert_eq!(
        l.requests_by_width,
        [0, 0, l.requests, 0, 0],
        "scalar loads"
    );
    // 128 bytes per warp request, 8 bytes further into a sector each row.
    assert!(l.efficiency() >= 0.75, "load efficiency {}", l.efficiency());
}

macro_rules! from_kernels {
    ($($name:ident: $t:ty, $r:ty;)*) => { $(
        /// `out[0..2]` = the encoded state of `x[from .. from + len]` (`len ≤
        /// 2¹⁶`), by the small rows kernel's fold over a sub-view that may
        /// start anywhere.
        #[warpforge_macros::kernel(
            block = 512,
            shared = [u64; 2 * warpforge_kernels::reduce::SMALL_MAX_UNITS as usize]
        )]
        fn $name(x: Global<$t>, from: u64, len: u64, mut out: warpforge_device::Out<u64>) {
            let Some(x) = x.get_range(from as usize..(from + len) as usize) else {
                return;
            };
            warpforge_kernels::reduce::rows_small(
                1,
                len,
                vectored::<$t, $r>(x),
                |_, state: <$r as Reduction<$t>>::State| {
                    let [a, b] = state.encode();
                    if let Some(mut w) = out.at(0) {
                        w.set(a);
                    }
                    if let Some(mut w) = out.at(1) {
                        w.set(b);
                    }
                },
            );
        }
    )* };
}
from_kernels! {
    sum_from_f32: f32, Sum;
    argmax_from_bf16: bf16, ArgMax;
}

/// A sub-view of a buffer that starts mid-vector (offsets 1–3 of 4 floats,
/// 1–7 of 8 bf16s) has no aligned vectors: every element is read with a
/// scalar load, in the same order, so the state has the same bits as at an
/// aligned offset, where the same elements are read as 16-byte vectors.
#[test]
fn a_misaligned_sub_view_reads_scalars_and_keeps_the_bits_in_emulator() {
    let len = 3001u64;
    let mut rng = StdRng::seed_from_u64(27);
    let data: Vec<f32> = (0..len).map(|_| wide(&mut rng) as f32).collect();
    let halves: Vec<bf16> = data.iter().map(|&v| bf16::from_f32(v)).collect();
    let mut first: Option<[[u64; 2]; 2]> = None;
    let mut widths = Vec::new();
    for from in 0..8u64 {
        // The same elements at element offset `from` of a fresh buffer.
        let mut buf = vec![0f32; from as usize];
        buf.extend_from_slice(&data);
        let mut hbuf = vec![bf16::ZERO; from as usize];
        hbuf.extend_from_slice(&halves);
        let (bits, profiles) = profiled(|dev| {
            let cfg = warpforge::LaunchConfig::new(
                warpforge::Dim3::x(1),
                warpforge::Dim3::x(warpforge_kernels::reduce::SMALL_BLOCK_THREADS),
            );
            let (x, h) = (dev.upload(&buf)?, dev.upload(&hbuf)?);
            let mut out = dev.alloc_zeroed::<u64>(2)?;
            let mut hout = dev.alloc_zeroed::<u64>(2)?;
            dev.launch(sum_from_f32, cfg, (&x, from, len, &mut out))?;
            dev.launch(argmax_from_bf16, cfg, (&h, from, len, &mut hout))?;
            let (o, ho) = (out.to_host()?, hout.to_host()?);
            Ok([[o[0], o[1]], [ho[0], ho[1]]])
        });
        match first {
            None => first = Some(bits),
            Some(f) => assert_eq!(bits, f, "offset {from}"),
        }
        let width = |kernel| launch_of(&profiles, kernel).global_load.requests_by_width;
        widths.push((width("sum_from_f32"), width("argmax_from_bf16")));
    }
    // The sum is the documented fold (as the library's small path), the
    // argmax numpy's.
    let want_sum = bits_of_library_sum(&data);
    assert_eq!(first.unwrap()[0][0], want_sum);
    let want_arg = halves
        .iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |(bi, bv), (i, h)| {
            let v = h.to_f32();
            if v > bv { (i, v) } else { (bi, bv) }
        })
        .0;
    assert_eq!(first.unwrap()[1][1], want_arg as u64);
    for (from, (f, h)) in widths.iter().enumerate() {
        // Aligned (offset 0, and 4 for floats): all 128-bit, but for the
        // partial last group (3001 = 4·750 + 1: one scalar float; 3001 =
        // 8·375 + 1: one scalar bf16). Misaligned: no vector at all.
        let f_aligned = from % 4 == 0;
        let h_aligned = from == 0;
        assert_eq!(f[4] > 0, f_aligned, "offset {from}: f32 widths {f:?}");
        assert_eq!(h[4] > 0, h_aligned, "offset {from}: bf16 widths {h:?}");
        assert_eq!((f[0], f[1], f[3]), (0, 0, 0), "offset {from}: {f:?}");
        assert_eq!((h[0], h[2], h[3]), (0, 0, 0), "offset {from}: {h:?}");
    }
}

/// The bits of the library's f32 sum of `xs` (one launch, aligned).
fn bits_of_library_sum(xs: &[f32]) -> u64 {
    let dev = Device::emulator();
    let x = dev.upload(xs).unwrap();
    match reduce::reduce(Op::Sum, &x, &[xs.len()], None).unwrap() {
        Reduced::Values(v) => u64::from(v.to_host().unwrap()[0].to_bits()),
        Reduced::Indices(_) => unreachable!(),
    }
}

/// A loaded bf16 vector widened from its words (`w << 16`, `w & 0xffff_0000`,
/// what the kernels' vector paths do) gives the bits of the scalar
/// conversion for every one of the 65536 bf16 values at every position of
/// the vector: the NaNs, both zeros and the subnormals included.
#[test]
fn bf16_vectors_widen_from_their_words_like_each_element() {
    use warpforge_device::global::Vector16;
    use warpforge_kernels::reduce::Input;
    for first in (0..=u16::MAX).step_by(8) {
        let v = Vector16(std::array::from_fn(|i| bf16::from_bits(first + i as u16)));
        for i in 0..8 {
            let widened = <bf16 as Input>::widen_lane(&v, i);
            let scalar = warpforge_device::num::bf16_to_f32(v.0[i]);
            assert_eq!(
                widened.to_bits(),
                scalar.to_bits(),
                "bits {:#06x}",
                first + i as u16
            );
        }
    }
}

/// A lane's fold as the kernels do it (`Reduction::lane_first`, `lane_push`,
/// `lane_state`: min and max
/// from integer min/max of the raw bits and one NaN test per element; and
/// `Reduction::lane_elements`, which the unit loop calls: for argmin and
/// argmax the extreme first, then the first position holding it) gives
/// the state of pushing the elements one by one onto the empty state, for
/// f32 (as f16/bf16 widen to) and f64, lanes of 1, 3 and 16 elements drawn
/// from NaNs of both signs, both zeros, subnormals and infinities (and from
/// a few values only, so that ties and both zeros meet), for i32, and for
/// every op (the others fold from the first element, `push_nonempty`).
#[test]
fn a_lanes_fold_is_its_elements_pushed_in_order() {
    use warpforge_kernels::reduce::state::{ArgMin, LogSumExp, Min, SumOfSquares};
    fn check<const N: usize>(rng: &mut StdRng, vals: &[f32]) {
        let xs: [f32; N] = std::array::from_fn(|_| vals[rng.random_range(0..vals.len())]);
        let wide: [f64; N] = xs.map(f64::from);
        macro_rules! same {
            ($r:ty, $t:ty, $xs:expr) => {{
                let index = |i: usize| 7 + 3 * i as u64;
                let pushed = (0..N).fold(State::empty(), |a, i| {
                    State::push(a, <$r as Reduction<$t>>::load($xs[i], index(i)))
                });
                let first = <$r as Reduction<$t>>::lane_first($xs[0], index(0));
                let lane = (1..N).fold(first, |l, i| {
                    <$r as Reduction<$t>>::lane_push(l, $xs[i], index(i))
                });
                let lane = <$r as Reduction<$t>>::lane_state(lane);
                assert_eq!(
                    State::encode(lane),
                    State::encode(pushed),
                    "{} of {:?}",
                    stringify!($r),
                    $xs
                );
                // A sum's NaN payload is the compiler's choice (`fadd`
                // commutes); the finish makes every NaN the canonical one.
                let payload_free = |words: [u64; 2]| {
                    let nan = match size_of::<$t>() {
                        4 => f32::from_bits(words[0] as u32).is_nan(),
                        _ => f64::from_bits(words[0]).is_nan(),
                    };
                    let float = matches!(stringify!($t), "f32" | "f64");
                    let sum = matches!(stringify!($r), "Sum" | "SumOfSquares" | "LogSumExp");
                    if float && sum && nan {
                        [u64::MAX, u64::MAX]
                    } else {
                        words
                    }
                };
                // One vector of N, and N vectors of one.
                let elements = <$r as Reduction<$t>>::lane_elements::<1, N>(
                    |_, k| $xs[k],
                    7,
                    |_, k| 3 * k as u32,
                );
                assert_eq!(
                    payload_free(State::encode(elements)),
                    payload_free(State::encode(pushed)),
                    "{} of {:?}, lane_elements",
                    stringify!($r),
                    $xs
                );
                let by_ones = <$r as Reduction<$t>>::lane_elements::<N, 1>(
                    |k, _| $xs[k],
                    7,
                    |k, _| 3 * k as u32,
                );
                assert_eq!(
                    payload_free(State::encode(by_ones)),
                    payload_free(State::encode(pushed)),
                    "{} of {:?}, lane_elements by vectors of 1",
                    stringify!($r),
                    $xs
                );
            }};
        }
        macro_rules! every_op {
            ($t:ty, $xs:expr) => {{
                same!(Max, $t, $xs);
                same!(Min, $t, $xs);
                same!(ArgMax, $t, $xs);
                same!(ArgMin, $t, $xs);
                same!(Sum, $t, $xs);
                same!(SumOfSquares, $t, $xs);
                same!(LogSumExp, $t, $xs);
            }};
        }
        every_op!(f32, xs);
        every_op!(f64, wide);
        // Integers: the values' bits as i32 (both extremes, ties).
        let ints: [i32; N] = xs.map(|x| (x.to_bits() as i32) >> 28);
        same!(Max, i32, ints);
        same!(Min, i32, ints);
        same!(ArgMax, i32, ints);
        same!(ArgMin, i32, ints);
        same!(Sum, i32, ints);
    }
    let mut vals = edge_values();
    vals.extend([
        f32::from_bits(0xffc0_0001),
        -2.5,
        3.0,
        -1e-40,
        f32::MAX,
        -f32::MAX,
    ]);
    let finite: Vec<f32> = vals.iter().copied().filter(|v| !v.is_nan()).collect();
    let mut rng = StdRng::seed_from_u64(51);
    for _ in 0..2000 {
        check::<1>(&mut rng, &vals);
        check::<3>(&mut rng, &vals);
        check::<16>(&mut rng, &vals);
        check::<16>(&mut rng, &finite);
        check::<16>(&mut rng, &[0.0, -0.0, 1.0, -1.0, f32::NAN]);
        check::<16>(&mut rng, &[0.0, -0.0, 2.0, -2.0]);
    }
}
