//! `warpforge run gemm`: the real binary on the emulator, on small `.npy`
//! matrices of small integers (so every partial sum is exact and results are
//! compared exactly with a reference computed here), every transpose, beta
//! with C, and every error path (exit 2, a message naming the operands).

use crate::common;

use common::{expect_error, run_writing, temp_dir, warpforge};
use half::f16;
use warpforge_cli::npy::{NpyArray, NpyData};

/// Runs `warpforge run gemm --backend emu --a A --b B [--c C] [extra…] --out D`
/// on the arrays written to temp files: `D`, or the exit code and stderr.
fn gemm(a: &NpyArray, b: &NpyArray, c: Option<&NpyArray>, extra: &[&str]) -> common::RunResult {
    let dir = temp_dir("run-gemm");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let (pa, pb, pc, pd) = (path("a.npy"), path("b.npy"), path("c.npy"), path("d.npy"));
    a.write(&pa).unwrap();
    b.write(&pb).unwrap();
    let mut args = vec![
        "run",
        "gemm",
        "--backend",
        "emu",
        "--a",
        &pa,
        "--b",
        &pb,
        "--out",
        &pd,
    ];
    if let Some(c) = c {
        c.write(&pc).unwrap();
        args.extend(["--c", &pc]);
    }
    args.extend(extra);
    let r = run_writing(&args, &pd);
    std::fs::remove_dir_all(&dir).unwrap();
    r
}

/// A `rows × cols` matrix of small integers (−4 … 4), different for each `seed`.
fn ints(rows: usize, cols: usize, seed: usize) -> Vec<f64> {
    (0..rows * cols)
        .map(|i| ((i * 7 + seed * 13 + i / 3) % 9) as f64 - 4.0)
        .collect()
}

fn f32s(shape: &[usize], v: &[f64]) -> NpyArray {
    NpyArray {
        shape: shape.to_vec(),
        data: NpyData::F32(v.iter().map(|&x| x as f32).collect()),
    }
}

fn f64s(shape: &[usize], v: &[f64]) -> NpyArray {
    NpyArray {
        shape: shape.to_vec(),
        data: NpyData::F64(v.to_vec()),
    }
}

/// The reference: `alpha·op(A)·op(B) + beta·C`, `m × n`, with `A` stored
/// `a_shape` and `B` stored `b_shape` (row-major), in f64.
#[allow(clippy::too_many_arguments)]
fn reference(
    a: &[f64],
    a_shape: [usize; 2],
    trans_a: bool,
    b: &[f64],
    b_shape: [usize; 2],
    trans_b: bool,
    alpha: f64,
    beta: f64,
    c: Option<&[f64]>,
) -> (Vec<usize>, Vec<f64>) {
    let (m, k) = if trans_a {
        (a_shape[1], a_shape[0])
    } else {
        (a_shape[0], a_shape[1])
    };
    let n = if trans_b { b_shape[0] } else { b_shape[1] };
    let op_a = |i: usize, p: usize| {
        if trans_a {
            a[p * a_shape[1] + i]
        } else {
            a[i * a_shape[1] + p]
        }
    };
    let op_b = |p: usize, j: usize| {
        if trans_b {
            b[j * b_shape[1] + p]
        } else {
            b[p * b_shape[1] + j]
        }
    };
    let mut d = Vec::new();
    for i in 0..m {
        for j in 0..n {
            let dot: f64 = (0..k).map(|p| op_a(i, p) * op_b(p, j)).sum();
            d.push(alpha * dot + c.map_or(0.0, |c| beta * c[i * n + j]));
        }
    }
    (vec![m, n], d)
}

#[test]
fn f32_without_transposes_matches_the_reference_exactly() {
    // 37 × 70 by 70 × 19: primes and sizes past one 64 × 64 × 16 tile.
    let (m, k, n) = (37, 70, 19);
    let (a, b) = (ints(m, k, 1), ints(k, n, 2));
    let d = gemm(&f32s(&[m, k], &a), &f32s(&[k, n], &b), None, &[]).unwrap();
    let (shape, want) = reference(&a, [m, k], false, &b, [k, n], false, 1.0, 0.0, None);
    assert_eq!(d.shape, shape);
    assert_eq!(
        d.data,
        NpyData::F32(want.iter().map(|&v| v as f32).collect())
    );
}

#[test]
fn every_transpose_combination_in_f64_with_alpha() {
    let (m, k, n) = (5, 9, 7);
    for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
        let a_shape = if ta { [k, m] } else { [m, k] };
        let b_shape = if tb { [n, k] } else { [k, n] };
        let (a, b) = (
            ints(a_shape[0], a_shape[1], 3),
            ints(b_shape[0], b_shape[1], 4),
        );
        let mut extra = vec!["--alpha", "-0.5"];
        if ta {
            extra.push("--trans-a");
        }
        if tb {
            extra.push("--trans-b");
        }
        let d = gemm(&f64s(&a_shape, &a), &f64s(&b_shape, &b), None, &extra).unwrap();
        let (shape, want) = reference(&a, a_shape, ta, &b, b_shape, tb, -0.5, 0.0, None);
        assert_eq!(d.shape, shape, "{ta} {tb}");
        assert_eq!(d.data, NpyData::F64(want), "trans_a {ta}, trans_b {tb}");
    }
}

#[test]
fn beta_scales_c_and_defaults_to_one_with_c() {
    let (m, k, n) = (4, 3, 6);
    let (a, b, c) = (ints(m, k, 5), ints(k, n, 6), ints(m, n, 7));
    let (pa, pb, pc) = (f32s(&[m, k], &a), f32s(&[k, n], &b), f32s(&[m, n], &c));
    for (extra, beta) in [
        (&["--beta", "2"][..], 2.0),
        (&[][..], 1.0),
        (&["--beta", "0"], 0.0),
    ] {
        let d = gemm(&pa, &pb, Some(&pc), &[&["--alpha", "3"], extra].concat()).unwrap();
        let (_, want) = reference(&a, [m, k], false, &b, [k, n], false, 3.0, beta, Some(&c));
        assert_eq!(
            d.data,
            NpyData::F32(want.iter().map(|&v| v as f32).collect()),
            "beta {beta}"
        );
    }
    // beta = 0 never reads C: NaN in it does not leak.
    let nan_c = f32s(&[m, n], &vec![f64::NAN; m * n]);
    let d = gemm(&pa, &pb, Some(&nan_c), &["--beta", "0"]).unwrap();
    let (_, want) = reference(&a, [m, k], false, &b, [k, n], false, 1.0, 0.0, None);
    assert_eq!(
        d.data,
        NpyData::F32(want.iter().map(|&v| v as f32).collect())
    );
}

#[test]
fn empty_and_k_zero_shapes() {
    // m = 0: an empty 0 × 3 result.
    let d = gemm(
        &f64s(&[0, 4], &[]),
        &f64s(&[4, 3], &ints(4, 3, 1)),
        None,
        &[],
    )
    .unwrap();
    assert_eq!((d.shape, d.data), (vec![0, 3], NpyData::F64(vec![])));
    // k = 0: D = beta·C.
    let c = ints(2, 3, 2);
    let d = gemm(
        &f64s(&[2, 0], &[]),
        &f64s(&[0, 3], &[]),
        Some(&f64s(&[2, 3], &c)),
        &["--beta", "-2"],
    )
    .unwrap();
    assert_eq!(d.data, NpyData::F64(c.iter().map(|v| -2.0 * v).collect()));
}

#[test]
fn mixed_dtypes_need_dtype_which_converts_every_operand() {
    let (a, b) = (ints(3, 4, 1), ints(4, 2, 2));
    let (pa, pb) = (f32s(&[3, 4], &a), f64s(&[4, 2], &b));
    expect_error(
        gemm(&pa, &pb, None, &[]),
        &["A is float32 but B is float64", "--dtype"],
    );
    let (_, want) = reference(&a, [3, 4], false, &b, [4, 2], false, 1.0, 0.0, None);
    let d = gemm(&pa, &pb, None, &["--dtype", "f64"]).unwrap();
    assert_eq!(d.data, NpyData::F64(want.clone()));
    let d = gemm(&pa, &pb, None, &["--dtype", "f32"]).unwrap();
    assert_eq!(
        d.data,
        NpyData::F32(want.iter().map(|&v| v as f32).collect())
    );
    // Integers convert only when asked.
    let ia = NpyArray {
        shape: vec![3, 4],
        data: NpyData::I32(a.iter().map(|&v| v as i32).collect()),
    };
    expect_error(gemm(&ia, &pb, None, &[]), &["A is int32", "--dtype"]);
    let d = gemm(&ia, &pb, None, &["--dtype", "f64"]).unwrap();
    assert_eq!(d.data, NpyData::F64(want));
}

#[test]
fn mismatched_shapes_name_the_operands_and_sizes() {
    let a = f32s(&[3, 4], &ints(3, 4, 1));
    let b = f32s(&[5, 2], &ints(5, 2, 2));
    expect_error(
        gemm(&a, &b, None, &[]),
        &["op(A) = A is 3 × 4", "op(B) = B is 5 × 2", "(4)", "(5)"],
    );
    // With the transposes, the message says what was transposed.
    expect_error(
        gemm(&a, &b, None, &["--trans-a"]),
        &[
            "op(A) = Aᵀ is 4 × 3 (A stored 3 × 4)",
            "op(A)'s columns (3)",
        ],
    );
    // C must be m × n.
    let b = f32s(&[4, 2], &ints(4, 2, 2));
    let c = f32s(&[2, 3], &ints(2, 3, 3));
    expect_error(
        gemm(&a, &b, Some(&c), &[]),
        &["C is 2 × 3", "m × n = 3 × 2"],
    );
}

#[test]
fn beta_without_c_is_an_error() {
    let a = f32s(&[2, 2], &ints(2, 2, 1));
    expect_error(gemm(&a, &a, None, &["--beta", "1"]), &["--beta needs --c"]);
}

/// The batched reference: batch `z` of a 3-D operand is its `z`-th matrix,
/// a 2-D operand the same matrix for every batch.
#[allow(clippy::too_many_arguments)]
fn batched_reference(
    batch: usize,
    a: &[f64],
    a_shape: [usize; 2],
    a_batched: bool,
    trans_a: bool,
    b: &[f64],
    b_shape: [usize; 2],
    b_batched: bool,
    alpha: f64,
    beta: f64,
    c: Option<&[f64]>,
) -> (Vec<usize>, Vec<f64>) {
    let (a_len, b_len) = (a_shape[0] * a_shape[1], b_shape[0] * b_shape[1]);
    let mut out = Vec::new();
    let mut shape = Vec::new();
    for z in 0..batch {
        let az = if a_batched {
            &a[z * a_len..][..a_len]
        } else {
            a
        };
        let bz = if b_batched {
            &b[z * b_len..][..b_len]
        } else {
            b
        };
        let m = if trans_a { a_shape[1] } else { a_shape[0] };
        let n = b_shape[1];
        let cz = c.map(|c| &c[z * m * n..][..m * n]);
        let (s, d) = reference(az, a_shape, trans_a, bz, b_shape, false, alpha, beta, cz);
        shape = s;
        out.extend(d);
    }
    ([batch].into_iter().chain(shape).collect::<Vec<_>>(), out)
}

#[test]
fn three_d_operands_run_as_a_strided_batch_with_broadcast() {
    // A batch of 3 A's (5 × 4, transposed: stored 4 × 5) by one broadcast B,
    // with a batched C and beta, in f64.
    let (batch, m, k, n) = (3, 5, 4, 6);
    let a = ints(batch * k, m, 1);
    let b = ints(k, n, 2);
    let c = ints(batch * m, n, 3);
    let d = gemm(
        &f64s(&[batch, k, m], &a),
        &f64s(&[k, n], &b),
        Some(&f64s(&[batch, m, n], &c)),
        &["--trans-a", "--alpha", "2", "--beta", "-1"],
    )
    .unwrap();
    let (shape, want) = batched_reference(
        batch,
        &a,
        [k, m],
        true,
        true,
        &b,
        [k, n],
        false,
        2.0,
        -1.0,
        Some(&c),
    );
    assert_eq!(d.shape, shape);
    assert_eq!(d.data, NpyData::F64(want));
    // One broadcast A by a batch of 2 B's, on the tensor cores (f16, exact
    // on small integers), written as float32.
    let (batch, m, k, n) = (2, 3, 7, 9);
    let a = ints(m, k, 4);
    let b = ints(batch * k, n, 5);
    let d = gemm(
        &f32s(&[m, k], &a),
        &f32s(&[batch, k, n], &b),
        None,
        &["--dtype", "f16"],
    )
    .unwrap();
    let (shape, want) = batched_reference(
        batch,
        &a,
        [m, k],
        false,
        false,
        &b,
        [k, n],
        true,
        1.0,
        0.0,
        None,
    );
    assert_eq!(d.shape, shape);
    assert_eq!(
        d.data,
        NpyData::F32(want.iter().map(|&x| x as f32).collect())
    );
}

#[test]
fn batch_mismatches_and_non_matrix_operands_are_errors() {
    let a3 = f32s(&[2, 3, 4], &ints(6, 4, 1));
    let b3 = f32s(&[3, 4, 2], &ints(12, 2, 2));
    expect_error(
        gemm(&a3, &b3, None, &[]),
        &["batch counts do not match", "[2, 3, 4]", "[3, 4, 2]"],
    );
    let b = f32s(&[4, 2], &ints(4, 2, 2));
    // A batched result needs a batched C.
    let c2 = f32s(&[3, 2], &ints(3, 2, 3));
    expect_error(
        gemm(&a3, &b, Some(&c2), &[]),
        &["C has shape [3, 2]", "[2, 3, 2]", "a batch of 2"],
    );
    let a = f32s(&[3, 4], &ints(3, 4, 1));
    let v = f32s(&[4], &ints(1, 4, 1));
    expect_error(gemm(&a, &v, None, &[]), &["B must be a 2-D matrix", "[4]"]);
    let a4 = f32s(&[1, 1, 3, 4], &ints(3, 4, 1));
    expect_error(gemm(&a4, &b, None, &[]), &["A must be a 2-D matrix", "4-D"]);
}

#[test]
fn f16_and_bf16_run_on_the_tensor_cores_and_write_float32() {
    // Small integers are exact in f16 and bf16, and so is every f32 partial sum.
    let (m, k, n) = (19, 40, 11);
    let (a, b, c) = (ints(k, m, 1), ints(n, k, 2), ints(m, n, 3));
    let (pa, pb, pc) = (f32s(&[k, m], &a), f64s(&[n, k], &b), f32s(&[m, n], &c));
    let (_, want) = reference(&a, [k, m], true, &b, [n, k], true, 2.0, -1.0, Some(&c));
    let want = NpyData::F32(want.iter().map(|&v| v as f32).collect());
    for dtype in ["f16", "bf16"] {
        let args = [
            "--dtype",
            dtype,
            "--trans-a",
            "--trans-b",
            "--alpha",
            "2",
            "--beta",
            "-1",
        ];
        let d = gemm(&pa, &pb, Some(&pc), &args).unwrap();
        assert_eq!((&d.shape, &d.data), (&vec![m, n], &want), "{dtype}");
    }
    // An f16 file computes in f16 by default, into float32.
    let h = |v: &[f64], shape: &[usize]| NpyArray {
        shape: shape.to_vec(),
        data: NpyData::F16(v.iter().map(|&x| f16::from_f64(x)).collect()),
    };
    let (a, b) = (ints(3, 5, 4), ints(5, 2, 5));
    let d = gemm(&h(&a, &[3, 5]), &h(&b, &[5, 2]), None, &[]).unwrap();
    let (_, want) = reference(&a, [3, 5], false, &b, [5, 2], false, 1.0, 0.0, None);
    assert_eq!(
        d.data,
        NpyData::F32(want.iter().map(|&v| v as f32).collect())
    );
    // The inputs are rounded to the dtype: 1 + 2⁻⁹ is an f16 but rounds to 1 in bf16.
    let x = f64s(&[1, 1], &[1.0 + 2f64.powi(-9)]);
    let one = f64s(&[1, 1], &[1.0]);
    let d = gemm(&x, &one, None, &["--dtype", "f16"]).unwrap();
    assert_eq!(d.data, NpyData::F32(vec![1.0 + 2f32.powi(-9)]));
    let d = gemm(&x, &one, None, &["--dtype", "bf16"]).unwrap();
    assert_eq!(d.data, NpyData::F32(vec![1.0]));
}

#[test]
fn a_missing_file_is_an_error_naming_the_operand() {
    let dir = temp_dir("run-gemm");
    let (a, d) = (dir.join("a.npy"), dir.join("d.npy"));
    f32s(&[2, 2], &ints(2, 2, 1)).write(&a).unwrap();
    let missing = dir.join("missing.npy");
    let out = warpforge(&[
        "run",
        "gemm",
        "--backend",
        "emu",
        "--a",
        a.to_str().unwrap(),
        "--b",
        missing.to_str().unwrap(),
        "--out",
        d.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error: B (") && stderr.contains("missing.npy"),
        "{stderr}"
    );
    assert!(!d.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tf32_rounds_f32_inputs_on_the_tensor_cores_and_is_refused_elsewhere() {
    // 1 + 2⁻¹² is an f32 but not a tf32 (it rounds to 1): the product shows
    // which path ran.
    let x = f32s(&[1, 1], &[1.0 + 2f64.powi(-12)]);
    let one = f32s(&[1, 1], &[1.0]);
    let d = gemm(&x, &one, None, &["--tf32"]).unwrap();
    assert_eq!(d.data, NpyData::F32(vec![1.0]));
    let d = gemm(&x, &one, None, &[]).unwrap();
    assert_eq!(d.data, NpyData::F32(vec![1.0 + 2f32.powi(-12)]));
    // Integers are tf32s: exact, on every transpose combination, with C.
    let (m, k, n) = (37, 70, 19);
    for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
        let a_shape = if ta { [k, m] } else { [m, k] };
        let b_shape = if tb { [n, k] } else { [k, n] };
        let (a, b, c) = (
            ints(a_shape[0], a_shape[1], 1),
            ints(b_shape[0], b_shape[1], 2),
            ints(m, n, 3),
        );
        let mut args = vec!["--tf32", "--alpha", "-2"];
        if ta {
            args.push("--trans-a");
        }
        if tb {
            args.push("--trans-b");
        }
        let d = gemm(
            &f32s(&a_shape, &a),
            &f32s(&b_shape, &b),
            Some(&f32s(&[m, n], &c)),
            &args,
        )
        .unwrap();
        let (shape, want) = reference(&a, a_shape, ta, &b, b_shape, tb, -2.0, 1.0, Some(&c));
        assert_eq!(d.shape, shape);
        assert_eq!(
            d.data,
            NpyData::F32(want.iter().map(|&v| v as f32).collect()),
            "ta {ta} tb {tb}"
        );
    }
    // The summary line names the kernel that ran.
    let dir = temp_dir("run-gemm-tf32");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let (pa, pd) = (path("a.npy"), path("d.npy"));
    f32s(&[2, 2], &ints(2, 2, 1)).write(&pa).unwrap();
    let out = warpforge(&[
        "run",
        "gemm",
        "--backend",
        "emu",
        "--a",
        &pa,
        "--b",
        &pa,
        "--tf32",
        "--out",
        &pd,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("(gemm_tf32_f32_nn_64x64x16_s3)"),
        "{stdout}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // Any other dtype: exit 2, naming the option.
    let x64 = f64s(&[1, 1], &[1.0]);
    expect_error(gemm(&x64, &x64, None, &["--tf32"]), &["tf32", "f64"]);
    expect_error(
        gemm(&x, &one, None, &["--tf32", "--dtype", "bf16"]),
        &["tf32", "bf16"],
    );
}
