//! `warpforge run conv2d`: the real binary on the emulator, on small `.npy`
//! tensors of small integers (every f32 partial sum is exact, so each result
//! must be the exact value rounded once to the output type), compared with
//! `warpforge::reference::conv2d`: each dtype, both layouts, groups and
//! depthwise, bias and ReLU, every way to write stride, padding and
//! dilation, and every invalid parameter (exit 2, a message naming it).

use half::{bf16, f16};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use warpforge::conv2d::{Conv2d, Layout, Padding};
use warpforge_cli::npy::{self, NpyArray, NpyData};

/// A fresh directory in the temp dir, unique to this process and call.
fn temp_dir() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "warpforge-run-conv2d-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn warpforge(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warpforge"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs `warpforge run conv2d --backend emu --input X --weight W [--bias B]
/// [extra…] --out Y` on the arrays written to temp files: `Y`, or the exit
/// code and stderr.
fn conv2d(
    x: &NpyArray,
    w: &NpyArray,
    bias: Option<&NpyArray>,
    extra: &[&str],
) -> Result<NpyArray, (Option<i32>, String)> {
    let dir = temp_dir();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let (px, pw, pb, py) = (path("x.npy"), path("w.npy"), path("b.npy"), path("y.npy"));
    x.write(&px).unwrap();
    w.write(&pw).unwrap();
    let mut args = vec![
        "run",
        "conv2d",
        "--backend",
        "emu",
        "--input",
        &px,
        "--weight",
        &pw,
        "--out",
        &py,
    ];
    if let Some(b) = bias {
        b.write(&pb).unwrap();
        args.extend(["--bias", &pb]);
    }
    args.extend(extra);
    let out = warpforge(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let r = if out.status.success() {
        Ok(npy::read(&py).unwrap())
    } else {
        assert!(
            !Path::new(&py).exists(),
            "a failed run wrote {py}; stderr: {stderr}"
        );
        Err((out.status.code(), stderr))
    };
    std::fs::remove_dir_all(&dir).unwrap();
    r
}

/// Expects exit code 2 and an `error:` line containing every needle.
fn expect_error(r: Result<NpyArray, (Option<i32>, String)>, needles: &[&str]) {
    let (code, stderr) = match r {
        Ok(y) => panic!("expected an error mentioning {needles:?}, got {y:?}"),
        Err(e) => e,
    };
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("error: "), "{stderr}");
    for n in needles {
        assert!(stderr.contains(n), "expected {n:?} in: {stderr}");
    }
}

/// `len` small integers (−3 … 3), different for each `seed`.
fn ints(len: usize, seed: usize) -> Vec<f64> {
    (0..len)
        .map(|i| ((i * 5 + seed * 11 + i / 7) % 7) as f64 - 3.0)
        .collect()
}

/// An array of `dtype` (`f32`, `f16`) with these values (exact: small integers).
fn array(shape: &[usize], v: &[f64], dtype: &str) -> NpyArray {
    let data = match dtype {
        "f16" => NpyData::F16(v.iter().map(|&x| f16::from_f64(x)).collect()),
        _ => NpyData::F32(v.iter().map(|&x| x as f32).collect()),
    };
    NpyArray {
        shape: shape.to_vec(),
        data,
    }
}

/// One run and its check: `conv` (logical sizes, parameters) with its
/// parameters written as `extra`, in `dtype`, against the reference rounded
/// once to the output type (float16 for f16, else float32; bf16's rounding
/// of the exact result for bf16).
fn check(conv: Conv2d, bias: bool, dtype: &str, extra: &[&str]) {
    let count = |d: [usize; 4]| d.iter().product::<usize>();
    let x = ints(count(conv.input_dims()), 1);
    let w = ints(count(conv.weight_dims()), 2);
    let k = conv.weight_dims()[0];
    let b = bias.then(|| ints(k, 3));
    let file_dtype = if dtype == "f16" { "f16" } else { "f32" };
    let layout = match conv.layout() {
        Layout::Nchw => "nchw",
        Layout::Nhwc => "nhwc",
    };
    let mut args = vec!["--layout", layout, "--dtype", dtype];
    args.extend(extra);
    let y = conv2d(
        &array(&conv.input_dims(), &x, file_dtype),
        &array(&conv.weight_dims(), &w, file_dtype),
        b.as_ref().map(|b| array(&[k], b, file_dtype)).as_ref(),
        &args,
    )
    .unwrap_or_else(|e| panic!("{conv:?} {args:?}: {e:?}"));
    let want = warpforge::reference::conv2d(&conv, &x, &w, b.as_deref()).unwrap();
    assert_eq!(y.shape, conv.output_dims().unwrap(), "{conv:?}");
    let expected = match dtype {
        "f16" => NpyData::F16(want.iter().map(|&v| f16::from_f32(v as f32)).collect()),
        "bf16" => NpyData::F32(
            want.iter()
                .map(|&v| bf16::from_f32(v as f32).to_f32())
                .collect(),
        ),
        _ => NpyData::F32(want.iter().map(|&v| v as f32).collect()),
    };
    assert_eq!(y.data, expected, "{conv:?} {args:?}");
}

#[test]
fn each_dtype_and_layout_with_groups_bias_and_relu() {
    for layout in [Layout::Nchw, Layout::Nhwc] {
        for dtype in ["f32", "f16", "bf16"] {
            // Dense 3×3, padding 1, bias and ReLU.
            let dense = Conv2d::new(layout, [2, 3, 5, 6], [4, 3, 3, 3])
                .padding(Padding::uniform(1))
                .relu(true);
            check(dense, true, dtype, &["--padding", "1", "--relu"]);
            // Two groups (C = 4, K = 6), stride 2.
            let grouped = Conv2d::new(layout, [1, 4, 7, 7], [6, 2, 3, 3])
                .groups(2)
                .stride(2, 2);
            check(grouped, false, dtype, &["--groups", "2", "--stride", "2"]);
            // Depthwise, channel multiplier 2, with a bias.
            let depthwise = Conv2d::new(layout, [1, 3, 6, 5], [6, 1, 3, 3])
                .groups(3)
                .padding(Padding::uniform(1));
            check(depthwise, true, dtype, &["--groups", "3", "--padding", "1"]);
            // 1×1 without bias (the GEMM route).
            let pointwise = Conv2d::new(layout, [2, 5, 3, 4], [7, 5, 1, 1]);
            check(pointwise, false, dtype, &[]);
        }
    }
}

#[test]
fn every_way_to_write_stride_padding_and_dilation() {
    let base = |layout| Conv2d::new(layout, [1, 2, 9, 8], [3, 2, 3, 2]);
    for layout in [Layout::Nchw, Layout::Nhwc] {
        let b = base(layout);
        let asym = Padding {
            top: 0,
            bottom: 1,
            left: 2,
            right: 1,
        };
        let cases: [(Conv2d, &[&str]); 8] = [
            (b, &[]),
            (b.stride(2, 2), &["--stride", "2"]),
            (b.stride(1, 3), &["--stride", "1,3"]),
            (b.padding(Padding::uniform(2)), &["--padding", "2"]),
            (b.padding(Padding::symmetric(1, 2)), &["--padding", "1,2"]),
            (b.padding(asym), &["--padding", "0,1,2,1"]),
            (b.dilation(2, 2), &["--dilation", "2"]),
            (
                b.dilation(2, 3).padding(Padding::uniform(1)).stride(2, 1),
                &["--dilation", "2,3", "--padding", "1", "--stride", "2,1"],
            ),
        ];
        for (conv, extra) in cases {
            check(conv, false, "f32", extra);
        }
    }
}

#[test]
fn the_files_dtype_is_the_default_and_mixed_dtypes_need_dtype() {
    let conv = Conv2d::new(Layout::Nchw, [1, 2, 4, 4], [3, 2, 2, 2]);
    let (x, w) = (ints(32, 1), ints(24, 2));
    let want = warpforge::reference::conv2d(&conv, &x, &w, None).unwrap();
    // float16 files: computed in f16, written as float16.
    let y = conv2d(
        &array(&[1, 2, 4, 4], &x, "f16"),
        &array(&[3, 2, 2, 2], &w, "f16"),
        None,
        &[],
    )
    .unwrap();
    let want16: Vec<f16> = want.iter().map(|&v| f16::from_f64(v)).collect();
    assert_eq!(y.data, NpyData::F16(want16));
    // Mixed: an error naming both, unless --dtype converts them.
    let (x32, w16) = (
        array(&[1, 2, 4, 4], &x, "f32"),
        array(&[3, 2, 2, 2], &w, "f16"),
    );
    expect_error(
        conv2d(&x32, &w16, None, &[]),
        &["the input is float32 but the weight is float16", "--dtype"],
    );
    let y = conv2d(&x32, &w16, None, &["--dtype", "f32"]).unwrap();
    assert_eq!(
        y.data,
        NpyData::F32(want.iter().map(|&v| v as f32).collect())
    );
    // float64 and integer files convert only when asked.
    let x64 = NpyArray {
        shape: vec![1, 2, 4, 4],
        data: NpyData::F64(x.clone()),
    };
    let w64 = NpyArray {
        shape: vec![3, 2, 2, 2],
        data: NpyData::F64(w.clone()),
    };
    expect_error(conv2d(&x64, &w64, None, &[]), &["float64", "--dtype"]);
    let y = conv2d(&x64, &w64, None, &["--dtype", "bf16"]).unwrap();
    assert_eq!(
        y.data,
        NpyData::F32(want.iter().map(|&v| bf16::from_f64(v).to_f32()).collect())
    );
    let xi = NpyArray {
        shape: vec![1, 2, 4, 4],
        data: NpyData::I32(x.iter().map(|&v| v as i32).collect()),
    };
    expect_error(conv2d(&xi, &w64, None, &[]), &["int32", "--dtype"]);
}

#[test]
fn every_invalid_parameter_exits_2_naming_it() {
    let x = array(&[1, 4, 5, 5], &ints(100, 1), "f32");
    let w = array(&[6, 2, 3, 3], &ints(108, 2), "f32");
    let dense_w = array(&[6, 4, 3, 3], &ints(216, 2), "f32");
    let groups2 = ["--groups", "2"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { [&groups2[..], extra].concat() };
    // Malformed values: clap's usage error names the flag.
    for (extra, flag) in [
        (&["--stride", "1,2,3"][..], "--stride"),
        (&["--stride", "two"], "--stride"),
        (&["--stride", "-1"], "--stride"),
        (&["--padding", "1,2,3"], "--padding"),
        (&["--padding", "1,,2"], "--padding"),
        (&["--dilation", "1,2,3,4"], "--dilation"),
        (&["--groups", "x"], "--groups"),
        (&["--groups", "-2"], "--groups"),
        (&["--dilation", "-1,1"], "--dilation"),
        (&["--layout", "chwn"], "--layout"),
        (&["--dtype", "f64"], "--dtype"),
    ] {
        expect_error(conv2d(&x, &w, None, &with(extra)), &[flag]);
    }
    // Values the library refuses: its error names the parameter.
    for (extra, needles) in [
        (
            &["--stride", "0"][..],
            &["conv2d: invalid `stride`", "(0, 0)"][..],
        ),
        (&["--stride", "1,0"], &["invalid `stride`", "(1, 0)"]),
        (&["--dilation", "0"], &["invalid `dilation`"]),
        (
            &["--dilation", "3"],
            &["invalid `weight`", "larger than the padded input"],
        ),
    ] {
        expect_error(conv2d(&x, &w, None, &with(extra)), needles);
    }
    for (extra, needles) in [
        (
            &["--groups", "0"][..],
            &["invalid `groups`", "groups = 0"][..],
        ),
        (&["--groups", "3"], &["invalid `groups`", "C = 4"]),
        (&["--groups", "4"], &["invalid `groups`", "K = 6"]),
    ] {
        expect_error(conv2d(&x, &dense_w, None, extra), needles);
    }
    // The weight's C/groups does not match: dense weights with 2 groups.
    expect_error(
        conv2d(&x, &dense_w, None, &groups2),
        &["invalid `weight`", "C / groups = 4 / 2"],
    );
    // A filter larger than the padded input.
    let big = array(&[6, 2, 7, 7], &ints(588, 2), "f32");
    expect_error(
        conv2d(&x, &big, None, &groups2),
        &["invalid `weight`", "7 × 7"],
    );
    expect_error(
        conv2d(&x, &big, None, &with(&["--padding", "0,0,1,1"])),
        &["invalid `weight`", "padded input 5 × 7"],
    );
    // Shapes: a 3-D input, a 5-D weight, a bias of the wrong length.
    let x3 = array(&[4, 5, 5], &ints(100, 1), "f32");
    expect_error(
        conv2d(&x3, &w, None, &groups2),
        &["the input (--input) must be 4-D [N, C, H, W]", "[4, 5, 5]"],
    );
    let w5 = array(&[6, 2, 3, 3, 1], &ints(108, 2), "f32");
    expect_error(
        conv2d(&x, &w5, None, &with(&["--layout", "nhwc"])),
        &["the weight (--weight) must be 4-D [K, R, S, C/groups]"],
    );
    let bias = array(&[5], &ints(5, 3), "f32");
    expect_error(
        conv2d(&x, &w, Some(&bias), &groups2),
        &["the bias (--bias) has shape [5]", "K = 6"],
    );
    let bias2 = array(&[6, 1], &ints(6, 3), "f32");
    expect_error(
        conv2d(&x, &w, Some(&bias2), &groups2),
        &["the bias (--bias) has shape [6, 1]"],
    );
}
