//! `warpforge run reduce`: the real binary on the emulator, on small `.npy` files.

use crate::common;

use common::{expect_error, run_writing, temp_dir};
use half::{bf16, f16};
use std::path::Path;
use warpforge_cli::npy::{self, NpyArray, NpyData};

/// Runs `warpforge run reduce --backend emu --op OP [--axis K] [extra…]` on
/// `input` written to a temp file; the output array, or the exit code and stderr.
fn reduce(
    op: &str,
    axis: Option<usize>,
    input: &NpyArray,
    extra: &[&str],
) -> Result<NpyArray, (Option<i32>, String)> {
    let dir = temp_dir(&format!("run-reduce-{op}"));
    let (x, y) = (dir.join("x.npy"), dir.join("y.npy"));
    input.write(&x).unwrap();
    let r = reduce_files(op, axis, &x, &y, extra);
    std::fs::remove_dir_all(&dir).unwrap();
    r
}

fn reduce_files(
    op: &str,
    axis: Option<usize>,
    x: &Path,
    y: &Path,
    extra: &[&str],
) -> Result<NpyArray, (Option<i32>, String)> {
    let axis = axis.map(|k| k.to_string());
    let mut args = vec!["run", "reduce", "--backend", "emu", "--op", op];
    if let Some(k) = &axis {
        args.extend(["--axis", k]);
    }
    let (x, y) = (x.to_str().unwrap(), y.to_str().unwrap());
    args.extend(["--input", x, "--out", y]);
    args.extend(extra);
    run_writing(&args, y)
}

/// Sums a C-order `[d0, d1, d2]` array of f64 along `axis` (or all of it).
fn sum_along(shape: [usize; 3], x: &[f64], axis: Option<usize>) -> (Vec<usize>, Vec<f64>) {
    let [d0, d1, d2] = shape;
    let at = |i: usize, j: usize, k: usize| x[(i * d1 + j) * d2 + k];
    match axis {
        None => (vec![], vec![x.iter().sum()]),
        Some(0) => (
            vec![d1, d2],
            (0..d1)
                .flat_map(|j| (0..d2).map(move |k| (0..d0).map(|i| at(i, j, k)).sum()))
                .collect(),
        ),
        Some(1) => (
            vec![d0, d2],
            (0..d0)
                .flat_map(|i| (0..d2).map(move |k| (0..d1).map(|j| at(i, j, k)).sum()))
                .collect(),
        ),
        Some(2) => (
            vec![d0, d1],
            (0..d0)
                .flat_map(|i| (0..d1).map(move |j| (0..d2).map(|k| at(i, j, k)).sum()))
                .collect(),
        ),
        _ => unreachable!(),
    }
}

/// A [2, 3, 4] ramp of quarter-integers: every partial sum is exact in f32,
/// so the result does not depend on the summation order.
fn ramp_234() -> Vec<f64> {
    (0..24)
        .map(|i| (i as f64 * 7.0 % 24.0 - 11.0) * 0.25)
        .collect()
}

#[test]
fn sum_along_each_axis_and_whole_f32() {
    let x = ramp_234();
    let input = NpyArray {
        shape: vec![2, 3, 4],
        data: NpyData::F32(x.iter().map(|&v| v as f32).collect()),
    };
    for axis in [None, Some(0), Some(1), Some(2)] {
        let (shape, want) = sum_along([2, 3, 4], &x, axis);
        let got = reduce("sum", axis, &input, &[]).unwrap();
        assert_eq!(got.shape, shape, "axis {axis:?}");
        let want = NpyData::F32(want.iter().map(|&v| v as f32).collect());
        assert_eq!(got.data, want, "axis {axis:?}");
    }
}

#[test]
fn argmax_writes_int64_first_indices() {
    // Rows of a [2, 3] int32 array, with a tie in each row: the first index wins.
    let input = NpyArray {
        shape: vec![2, 3],
        data: NpyData::I32(vec![5, -1, 5, -7, 9, 9]),
    };
    let got = reduce("argmax", Some(1), &input, &[]).unwrap();
    assert_eq!(got.shape, [2]);
    assert_eq!(got.data, NpyData::I64(vec![0, 1]));
    let got = reduce("argmin", Some(0), &input, &[]).unwrap();
    assert_eq!(got.shape, [3]);
    assert_eq!(got.data, NpyData::I64(vec![1, 0, 0]));
    // Whole tensor, f64 input: a flat index, still int64, shape [].
    let input = NpyArray {
        shape: vec![2, 2],
        data: NpyData::F64(vec![0.5, 3.0, -2.0, 3.0]),
    };
    let got = reduce("argmax", None, &input, &[]).unwrap();
    assert_eq!(got.shape, Vec::<usize>::new());
    assert_eq!(got.data, NpyData::I64(vec![1]));
}

#[test]
fn float16_in_float16_out() {
    let vals = [1.5f32, -3.0, 0.25, 2.0, 7.5, -0.5];
    let x: Vec<f16> = vals.iter().map(|&v| f16::from_f32(v)).collect();
    let input = NpyArray {
        shape: vec![2, 3],
        data: NpyData::F16(x),
    };
    let got = reduce("max", Some(0), &input, &[]).unwrap();
    assert_eq!(got.shape, [3]);
    let want = [2.0f32, 7.5, 0.25].map(f16::from_f32).to_vec();
    assert_eq!(got.data, NpyData::F16(want));
    let got = reduce("sum", None, &input, &[]).unwrap();
    let total: f32 = vals.iter().sum(); // exact: quarter-integers
    assert_eq!(got.data, NpyData::F16(vec![f16::from_f32(total)]));
}

#[test]
fn dtype_bf16_rounds_the_input_and_writes_float32() {
    // 1 + 3·2⁻⁹ is not a bf16: it rounds to 1 + 2⁻⁷. In f32 the max would be
    // 1.005859375; computed in bf16 it is 1.0078125.
    let a = 1.0 + 3.0 * 2f32.powi(-9);
    let input = NpyArray {
        shape: vec![2, 2],
        data: NpyData::F32(vec![a, 0.5, -4.0, 3.0]),
    };
    let got = reduce("max", Some(1), &input, &["--dtype", "bf16"]).unwrap();
    assert_eq!(got.shape, [2]);
    assert_eq!(got.data, NpyData::F32(vec![1.0078125, 3.0]));
    let plain = reduce("max", Some(1), &input, &[]).unwrap();
    assert_eq!(plain.data, NpyData::F32(vec![a, 3.0]));
    // sum: of the bf16-rounded inputs, rounded to bf16.
    let got = reduce("sum", None, &input, &["--dtype", "bf16"]).unwrap();
    let rounded: f32 = [a, 0.5, -4.0, 3.0]
        .iter()
        .map(|&v| bf16::from_f32(v).to_f32())
        .sum();
    assert_eq!(got.shape, Vec::<usize>::new());
    assert_eq!(
        got.data,
        NpyData::F32(vec![bf16::from_f32(rounded).to_f32()])
    );
    // From float64 and float16 too; argmax still gives int64.
    let input = NpyArray {
        shape: vec![3],
        data: NpyData::F64(vec![1.0, 1.0 + 2f64.powi(-10), 0.0]),
    };
    let got = reduce("argmax", None, &input, &["--dtype", "bf16"]).unwrap();
    assert_eq!(
        got.data,
        NpyData::I64(vec![0]),
        "both round to 1.0: first wins"
    );
    let input = NpyArray {
        shape: vec![2],
        data: NpyData::F16(vec![f16::from_f32(2.5), f16::from_f32(-1.0)]),
    };
    let got = reduce("min", None, &input, &["--dtype", "bf16"]).unwrap();
    assert_eq!(got.data, NpyData::F32(vec![-1.0]));
    // Integers cannot be computed in bf16.
    let input = NpyArray {
        shape: vec![2],
        data: NpyData::I32(vec![1, 2]),
    };
    expect_error(
        reduce("sum", None, &input, &["--dtype", "bf16"]),
        &["bf16", "int32"],
    );
}

#[test]
fn input_errors_exit_2_naming_the_problem() {
    let dir = temp_dir("run-reduce-errors");
    let y = dir.join("y.npy");
    // A missing file.
    let missing = dir.join("missing.npy");
    expect_error(
        reduce_files("sum", None, &missing, &y, &[]),
        &[missing.to_str().unwrap(), "reading"],
    );
    // Not an .npy file.
    let junk = dir.join("junk.npy");
    std::fs::write(&junk, b"sum,axis\n1,2\n").unwrap();
    expect_error(
        reduce_files("sum", None, &junk, &y, &[]),
        &[junk.to_str().unwrap(), "not a valid .npy file"],
    );
    // Data cut short.
    let short = dir.join("short.npy");
    npy::write(&short, &[4], &NpyData::F32(vec![1.0; 4])).unwrap();
    let bytes = std::fs::read(&short).unwrap();
    std::fs::write(&short, &bytes[..bytes.len() - 3]).unwrap();
    expect_error(
        reduce_files("sum", None, &short, &y, &[]),
        &["16 bytes of data", "13 bytes"],
    );
    // uint8, written by hand as numpy would.
    let u8_file = dir.join("u8.npy");
    crafted_npy(&u8_file, "|u1", false, "(3,)", &[1, 2, 3]);
    expect_error(
        reduce_files("sum", None, &u8_file, &y, &[]),
        &["uint8", "float32"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn operation_errors_exit_2_naming_the_problem() {
    let x = NpyArray {
        shape: vec![2, 3, 4],
        data: NpyData::F32(vec![1.0; 24]),
    };
    expect_error(reduce("sum", Some(3), &x, &[]), &["axis"]);
    let empty = NpyArray {
        shape: vec![0],
        data: NpyData::F32(vec![]),
    };
    expect_error(reduce("min", None, &empty, &[]), &["empty"]);
    expect_error(reduce("argmax", None, &empty, &[]), &["empty"]);
    // An empty sum is 0, not an error.
    let got = reduce("sum", None, &empty, &[]).unwrap();
    assert_eq!(got.data, NpyData::F32(vec![0.0]));
    // Unknown op: clap's usage error lists the ops.
    let (code, stderr) = reduce("median", None, &x, &[]).unwrap_err();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("median") && stderr.contains("logsumexp"),
        "{stderr}"
    );
}

/// A `.npy` file written byte by byte as numpy would (header dict padded to
/// 64 bytes), with any shape text and data: for shapes numpy cannot make.
fn crafted_npy(path: &Path, descr: &str, fortran: bool, shape: &str, data: &[u8]) {
    let fortran = if fortran { "True" } else { "False" };
    let mut text =
        format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}");
    while !(10 + text.len() + 1).is_multiple_of(64) {
        text.push(' ');
    }
    text.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((text.len() as u16).to_le_bytes());
    bytes.extend(text.as_bytes());
    bytes.extend(data);
    std::fs::write(path, bytes).unwrap();
}

/// Runs `op` along `axis` of a crafted empty float32 file of shape `shape`
/// (C or Fortran order). The process must exit normally, never by a signal
/// (an abort on a failed allocation is SIGABRT).
fn reduce_crafted(
    op: &str,
    axis: Option<usize>,
    shape: &str,
    fortran: bool,
) -> Result<NpyArray, (Option<i32>, String)> {
    let dir = temp_dir("run-reduce-crafted");
    let (x, y) = (dir.join("x.npy"), dir.join("y.npy"));
    crafted_npy(&x, "<f4", fortran, shape, &[]);
    let r = reduce_files(op, axis, &x, &y, &[]);
    std::fs::remove_dir_all(&dir).unwrap();
    if let Err((code, stderr)) = &r {
        assert!(
            code.is_some(),
            "{op} along {axis:?} of {shape}: killed by a signal; stderr: {stderr}"
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("memory allocation"),
            "{op} along {axis:?} of {shape}: {stderr}"
        );
    }
    r
}

const SHAPE_2_40: &str = "(1048576, 0, 1048576)";

/// (2²⁰, 0, 2²⁰) along axis 1 is 2⁴⁰ outputs: a clear error naming the
/// result's shape, element count and bytes, not an abort on a 4 TiB `vec!`.
#[test]
fn an_empty_axis_leaving_2_pow_40_outputs_is_an_error_not_an_abort() {
    for fortran in [false, true] {
        for (op, value) in [("sum", "0.0"), ("mean", "NaN"), ("logsumexp", "-inf")] {
            expect_error(
                reduce_crafted(op, Some(1), SHAPE_2_40, fortran),
                &[
                    "x.npy",
                    "the result has shape [1048576, 1048576]",
                    "1099511627776 elements",
                    "4398046511104 bytes",
                    &format!("would be {value}"),
                    "Reduce the whole tensor",
                ],
            );
        }
        // No value at all for an empty axis: the existing error, whatever the size.
        expect_error(
            reduce_crafted("max", Some(1), SHAPE_2_40, fortran),
            &["max of an empty input is undefined"],
        );
        expect_error(
            reduce_crafted("argmin", Some(1), SHAPE_2_40, fortran),
            &["argmin of an empty input is undefined"],
        );
    }
}

/// Reductions of (2²⁰, 0, 2²⁰) whose results are empty or one value work.
#[test]
fn empty_results_of_huge_empty_shapes_are_written() {
    for fortran in [false, true] {
        for op in ["sum", "max", "argmax"] {
            let got = reduce_crafted(op, Some(0), SHAPE_2_40, fortran).unwrap();
            assert_eq!(got.shape, [0, 1 << 20], "{op}");
            assert!(got.data.is_empty(), "{op}");
            let got = reduce_crafted(op, Some(2), SHAPE_2_40, fortran).unwrap();
            assert_eq!(got.shape, [1 << 20, 0], "{op}");
            assert!(got.data.is_empty(), "{op}");
        }
        assert_eq!(
            got_dtype(reduce_crafted("argmax", Some(0), SHAPE_2_40, fortran)),
            "int64"
        );
        // The whole tensor has no elements: sum 0, mean NaN, min undefined.
        let got = reduce_crafted("sum", None, SHAPE_2_40, fortran).unwrap();
        assert_eq!(got.shape, Vec::<usize>::new());
        assert_eq!(got.data, NpyData::F32(vec![0.0]));
        let got = reduce_crafted("mean", None, SHAPE_2_40, fortran).unwrap();
        let NpyData::F32(v) = got.data else {
            panic!("{got:?}")
        };
        assert!(v.len() == 1 && v[0].is_nan(), "{v:?}");
        let got = reduce_crafted("logsumexp", None, SHAPE_2_40, fortran).unwrap();
        assert_eq!(got.data, NpyData::F32(vec![f32::NEG_INFINITY]));
        expect_error(
            reduce_crafted("min", None, SHAPE_2_40, fortran),
            &["min of an empty input is undefined"],
        );
        expect_error(
            reduce_crafted("argmax", None, SHAPE_2_40, fortran),
            &["argmax of an empty input is undefined"],
        );
    }
}

fn got_dtype(r: Result<NpyArray, (Option<i32>, String)>) -> &'static str {
    r.unwrap().data.dtype_name()
}

/// (0, 2⁴⁰): along axis 1 an empty result; along axis 0, 2⁴⁰ zeros: an error.
#[test]
fn zero_by_2_pow_40() {
    let shape = "(0, 1099511627776)";
    let got = reduce_crafted("sum", Some(1), shape, false).unwrap();
    assert_eq!((got.shape, got.data), (vec![0], NpyData::F32(vec![])));
    let got = reduce_crafted("argmin", Some(1), shape, true).unwrap();
    assert_eq!((got.shape, got.data), (vec![0], NpyData::I64(vec![])));
    for fortran in [false, true] {
        expect_error(
            reduce_crafted("sum", Some(0), shape, fortran),
            &[
                "the result has shape [1099511627776]",
                "1099511627776 elements",
                "4398046511104 bytes",
            ],
        );
    }
    let got = reduce_crafted("sum", None, shape, false).unwrap();
    assert_eq!(got.data, NpyData::F32(vec![0.0]));
}

/// Shapes whose sizes overflow 64 bits: refused on reading, naming the shape.
/// (0, 2³², 2³²) used to overflow npyz's strides (a panic, exit 101);
/// (2⁴⁰, 0, 2⁴⁰) along axis 1 overflowed the output count (also a panic).
#[test]
fn shapes_whose_sizes_overflow_are_refused() {
    for fortran in [false, true] {
        for shape in [
            "(0, 4294967296, 4294967296)",
            "(4294967296, 4294967296, 0)",
            "(1099511627776, 0, 1099511627776)",
            "(4294967296, 4294967296, 4294967296)",
        ] {
            for axis in [None, Some(0), Some(1), Some(2)] {
                expect_error(
                    reduce_crafted("sum", axis, shape, fortran),
                    &["x.npy", "is too large", "non-zero dimensions", "64-bit"],
                );
            }
        }
        // Fits in 64 bits, but 2⁶¹ × 4 bytes is more than any array holds.
        expect_error(
            reduce_crafted("sum", None, "(2, 0, 2305843009213693952)", fortran),
            &["[2, 0, 2305843009213693952]", "too large for an array"],
        );
    }
}

/// A real Fortran-order file next to the crafted ones: the transpose still
/// gives the C-order values.
#[test]
fn fortran_order_input_is_reduced_as_c_order() {
    let dir = temp_dir("run-reduce-fortran");
    let (x, y) = (dir.join("x.npy"), dir.join("y.npy"));
    // [[1, 2, 3], [4, 5, 6]] stored column-major.
    let data: Vec<u8> = [1.0f64, 4.0, 2.0, 5.0, 3.0, 6.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    crafted_npy(&x, "<f8", true, "(2, 3)", &data);
    let got = reduce_files("sum", Some(1), &x, &y, &[]).unwrap();
    assert_eq!(got.shape, [2]);
    assert_eq!(got.data, NpyData::F64(vec![6.0, 15.0]));
    let got = reduce_files("argmax", Some(0), &x, &y, &[]).unwrap();
    assert_eq!(got.data, NpyData::I64(vec![1, 1, 1]));
    std::fs::remove_dir_all(&dir).unwrap();
}
