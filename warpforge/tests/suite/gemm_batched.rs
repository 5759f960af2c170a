//! Strided batched `warpforge::gemm` (`Gemm::batch`, `stride_a/b/c`) on the
//! emulator, every dtype path (SIMT f32 and f64, tensor-core f16 and bf16
//! inputs), against a CPU reference in f64: batch counts 1–4, A or B
//! broadcast (stride 0) or strided (strides past the extent too), C's
//! batches packed, stacked with padding (`ldc > n`, `stride_c` past the
//! extent) or side by side (column ranges of one wider matrix), random
//! transposes, `beta` 0 (C NaN-filled: never read) or not, every element of
//! C outside the batches a sentinel that must survive; then the errors.
//!
//! Exact cases, as in `gemm_tensor.rs`: small integer operands, `k ≤ 24`,
//! `alpha`, `beta` small integers, so every partial sum is an integer far
//! below 2²⁴ and exact in f32; an f32/f64 result is compared exactly, a
//! bf16/f16 one with the reference rounded once to that type.

use crate::common;

use common::gemm::{Val, xorshift};
use half::{bf16, f16};
use proptest::prelude::*;
use warpforge::gemm::{Gemm, GemmTypes, TileConfig};
use warpforge::{Device, Error};

#[derive(Clone, Copy, Debug)]
enum CLayout {
    /// `ldc = n`, `stride_c = m·n` (the default).
    Packed,
    /// `ldc = n + c_pad`, `stride_c = (m − 1)·ldc + n + c_gap`.
    Stacked,
    /// `stride_c = n + c_gap`, `ldc = (batch − 1)·stride_c + n + c_pad`.
    SideBySide,
}

impl CLayout {
    /// `(ldc, stride_c)` for an `m × n` C of `batch` batches.
    fn strides(
        self,
        (m, n, batch): (usize, usize, usize),
        pad: usize,
        gap: usize,
    ) -> (usize, usize) {
        match self {
            CLayout::Packed => (n, m * n),
            CLayout::Stacked => {
                let ldc = n + pad;
                (ldc, (m - 1) * ldc + n + gap)
            }
            CLayout::SideBySide => {
                let stride = n + gap;
                ((batch - 1) * stride + n + pad, stride)
            }
        }
    }
}

#[derive(Clone, Debug)]
struct Case {
    m: usize,
    n: usize,
    k: usize,
    batch: usize,
    trans_a: bool,
    trans_b: bool,
    /// 0: strided A and B; 1: A broadcast; 2: B broadcast.
    broadcast: u8,
    /// Extra elements between batches of A and B beyond the extent.
    gap: usize,
    /// C's batches: packed, stacked with padding, or side by side.
    c_layout: CLayout,
    /// C's padding: extra elements per row (`ldc − ` the rows' need) and
    /// between batches.
    c_pad: usize,
    c_gap: usize,
    alpha: i8,
    beta: i8,
    seed: u64,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        (1usize..20, 1usize..20, 0usize..24, 1usize..=4),
        (any::<bool>(), any::<bool>(), 0u8..3, 0usize..3),
        (
            prop_oneof![
                Just(CLayout::Packed),
                Just(CLayout::Stacked),
                Just(CLayout::SideBySide)
            ],
            0usize..3,
            0usize..3,
        ),
        (
            -2i8..=2,
            prop_oneof![Just(0i8), Just(1i8), Just(-2i8)],
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                (m, n, k, batch),
                (trans_a, trans_b, broadcast, gap),
                (c_layout, c_pad, c_gap),
                (alpha, beta, seed),
            )| Case {
                m,
                n,
                k,
                batch,
                trans_a,
                trans_b,
                broadcast,
                gap,
                c_layout,
                c_pad,
                c_gap,
                alpha,
                beta,
                seed,
            },
        )
}

/// C's elements outside every batch: exact in f16, bf16, f32 and f64.
const SENTINEL: f64 = -77.0;

/// Small integers in [-3, 3] from a seed (xorshift).
fn ints(len: usize, seed: &mut u64) -> Vec<f64> {
    (0..len)
        .map(|_| (xorshift(seed) % 7) as f64 - 3.0)
        .collect()
}

/// Runs the case for `TIn → TOut` and checks every batch against the f64
/// reference, exactly after one rounding to `TOut`.
fn check<TIn, TOut>(dev: &Device, case: &Case, tile: Option<TileConfig>)
where
    TIn: Val + GemmTypes<TOut>,
    TOut: Val,
    TIn::Scalar: Val,
{
    let Case {
        m,
        n,
        k,
        batch,
        trans_a,
        trans_b,
        broadcast,
        gap,
        c_layout,
        c_pad,
        c_gap,
        alpha,
        beta,
        seed,
    } = *case;
    let mut seed = seed | 1;
    let (lda, ldb) = (if trans_a { m } else { k }, if trans_b { k } else { n });
    let (a_ext, b_ext) = (m * k, k * n);
    let stride_a = if broadcast == 1 { 0 } else { a_ext + gap };
    let stride_b = if broadcast == 2 { 0 } else { b_ext + gap };
    let a_len = (batch - 1) * stride_a + a_ext;
    let b_len = (batch - 1) * stride_b + b_ext;
    let (ldc, stride_c) = c_layout.strides((m, n, batch), c_pad, c_gap);
    let c_len = (batch - 1) * stride_c + (m - 1) * ldc + n;
    let c_at = |z: usize, i: usize, j: usize| z * stride_c + i * ldc + j;
    let a = ints(a_len, &mut seed);
    let b = ints(b_len, &mut seed);
    // Outside the batches a sentinel (exact in every type) that no write
    // may touch; inside NaN when beta = 0 (never read), else integers.
    let mut c0 = vec![SENTINEL; c_len];
    let mut in_batch = vec![false; c_len];
    let fill = ints(c_len, &mut seed);
    for z in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let e = c_at(z, i, j);
                assert!(!in_batch[e], "the test's C layout overlaps at {e}");
                in_batch[e] = true;
                c0[e] = if beta == 0 { f64::NAN } else { fill[e] };
            }
        }
    }
    let da = dev
        .upload(&a.iter().map(|&x| TIn::from_f64(x)).collect::<Vec<_>>())
        .unwrap();
    let db = dev
        .upload(&b.iter().map(|&x| TIn::from_f64(x)).collect::<Vec<_>>())
        .unwrap();
    let mut dc = dev
        .upload(&c0.iter().map(|&x| TOut::from_f64(x)).collect::<Vec<_>>())
        .unwrap();
    let gemm = Gemm::<TIn::Scalar>::new(m, n, k);
    let gemm = match tile {
        Some(tile) => gemm.tile(tile),
        None => gemm,
    };
    gemm.trans_a(trans_a)
        .trans_b(trans_b)
        .alpha(<TIn::Scalar as Val>::from_f64(f64::from(alpha)))
        .beta(<TIn::Scalar as Val>::from_f64(f64::from(beta)))
        .batch(batch)
        .stride_a(stride_a)
        .stride_b(stride_b)
        .ldc(ldc)
        .stride_c(stride_c)
        .run(dev, &da, &db, &mut dc)
        .unwrap();
    let got = dc.to_host().unwrap();
    for (e, &inside) in in_batch.iter().enumerate() {
        if !inside {
            assert_eq!(
                got[e].to_f64(),
                SENTINEL,
                "C[{e}] between batches, {case:?}"
            );
        }
    }
    for z in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0;
                for p in 0..k {
                    let av = a[z * stride_a + if trans_a { p * lda + i } else { i * lda + p }];
                    let bv = b[z * stride_b + if trans_b { j * ldb + p } else { p * ldb + j }];
                    acc += av * bv;
                }
                let e = c_at(z, i, j);
                let mut want = f64::from(alpha) * acc;
                if beta != 0 {
                    want += f64::from(beta) * c0[e];
                }
                let want = TOut::from_f64(want).to_f64();
                assert_eq!(got[e].to_f64(), want, "batch {z} ({i}, {j}) of {case:?}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn batched_matches_reference_every_dtype(case in cases()) {
        let dev = Device::emulator();
        check::<f32, f32>(&dev, &case, None);
        // The warp-tiled f32 kernels, pinned (these shapes are small).
        check::<f32, f32>(&dev, &case, Some(TileConfig::Large));
        check::<f64, f64>(&dev, &case, None);
        check::<f16, f32>(&dev, &case, None);
        check::<bf16, bf16>(&dev, &case, None);
        check::<f16, f16>(&dev, &case, None);
    }
}

fn err(r: warpforge::Result<()>) -> String {
    let e = r.unwrap_err();
    assert!(
        matches!(e, Error::ShapeMismatch { .. } | Error::LaunchConfig { .. }),
        "{e:?}"
    );
    e.to_string()
}

/// The batched errors' texts are one sentence each: no runs of spaces left by
/// a lost line continuation in a multi-line format string.
#[test]
fn batched_error_messages_have_no_runs_of_spaces() {
    let dev = Device::emulator();
    let a = dev.alloc_zeroed::<f32>(2 * 3 * 4).unwrap();
    let b = dev.alloc_zeroed::<f32>(4 * 5).unwrap();
    let mut c = dev.alloc_zeroed::<f32>(2 * 3 * 5).unwrap();
    let mut short = dev.alloc_zeroed::<f32>(29).unwrap();
    let g = Gemm::new(3, 5, 4).batch(2);
    let messages = [
        // "B: a batch of 2 with stride_b = 20 needs (2 − 1)·20 + 20 = 40 elements …"
        err(g.run(&dev, &a, &b, &mut c)),
        // C's batches overlapping: "C, 2 batches of 3 × 5 with ldc = 5, … (two batches would write one element) …"
        err(g.stride_b(0).stride_c(7).run(&dev, &a, &b, &mut c)),
        err(g.stride_b(0).run(&dev, &a, &b, &mut short)),
    ];
    assert!(
        messages[0].contains("needs (2 − 1)·20 + 20 = 40"),
        "{}",
        messages[0]
    );
    assert!(
        messages[1].contains("with ldc = 5") && messages[1].contains("two batches would write"),
        "{}",
        messages[1]
    );
    for m in &messages {
        assert!(!m.contains("  "), "a run of spaces in {m:?}");
    }
}

#[test]
fn batched_errors_name_the_operand_and_sizes() {
    let dev = Device::emulator();
    let a = dev.alloc_zeroed::<f32>(2 * 3 * 4).unwrap(); // two 3 × 4
    let b = dev.alloc_zeroed::<f32>(4 * 5).unwrap(); // one 4 × 5
    let mut c = dev.alloc_zeroed::<f32>(2 * 3 * 5).unwrap();
    let g = Gemm::new(3, 5, 4).batch(2);
    // B too short for two strided matrices; fine broadcast.
    let e = err(g.run(&dev, &a, &b, &mut c));
    assert!(
        e.contains("B") && e.contains("stride_b = 20") && e.contains("40"),
        "{e}"
    );
    g.stride_b(0).run(&dev, &a, &b, &mut c).unwrap();
    // A: three batches need (3 − 1)·12 + 12 = 36.
    let e = err(Gemm::new(3, 5, 4)
        .batch(3)
        .stride_b(0)
        .run(&dev, &a, &b, &mut c));
    assert!(
        e.contains("A") && e.contains("36") && e.contains("24"),
        "{e}"
    );
    // C overlapping across batches: a race, refused.
    let e = err(g.stride_b(0).stride_c(7).run(&dev, &a, &b, &mut c));
    assert!(e.contains("stride_c = 7") && e.contains("overlap"), "{e}");
    let e = err(g.stride_b(0).stride_c(0).run(&dev, &a, &b, &mut c));
    assert!(e.contains("stride_c = 0") && e.contains("overlap"), "{e}");
    // One batch: any C stride.
    Gemm::new(3, 5, 4)
        .batch(1)
        .stride_c(0)
        .run(&dev, &a, &b, &mut c)
        .unwrap();
    // A C stride past the packed one: stacked with a gap, accepted (its
    // results are checked in `gemm_strided_c.rs`).
    let mut big = dev.alloc_zeroed::<f32>(100).unwrap();
    g.stride_b(0)
        .stride_c(20)
        .run(&dev, &a, &b, &mut big)
        .unwrap();
    // Side by side needs the batches within one row of ldc: with ldc = 5
    // there is no room for a second 5-column batch.
    let e = err(g.stride_b(0).stride_c(5).ldc(5).run(&dev, &a, &b, &mut c));
    assert!(e.contains("stride_c = 5") && e.contains("overlap"), "{e}");
    // C too short.
    let mut short = dev.alloc_zeroed::<f32>(29).unwrap();
    let e = err(g.stride_b(0).run(&dev, &a, &b, &mut short));
    assert!(
        e.contains("C") && e.contains("30") && e.contains("29"),
        "{e}"
    );
    // Overflowing strides: SizeOverflow, not a wrap.
    let e = g
        .stride_a(usize::MAX)
        .stride_b(0)
        .run(&dev, &a, &b, &mut c)
        .unwrap_err();
    assert!(matches!(e, Error::SizeOverflow { .. }), "{e:?}");
    // Past the grid's z limit (65535 batches), before any size check matters.
    let a1 = dev.alloc_zeroed::<f32>(1).unwrap();
    let mut c1 = dev.alloc_zeroed::<f32>(65536).unwrap();
    let e = Gemm::new(1, 1, 1)
        .batch(65536)
        .stride_a(0)
        .stride_b(0)
        .run(&dev, &a1, &a1, &mut c1)
        .unwrap_err();
    assert!(
        matches!(e, Error::LaunchConfig { .. }) && e.to_string().contains("65536"),
        "{e}"
    );
    // Batch 0: nothing, after the checks.
    Gemm::new(3, 5, 4)
        .batch(0)
        .run(&dev, &a, &b, &mut c)
        .unwrap();
}

/// C's batches padded or side by side across several block tiles in both
/// directions (m, n past every tile configuration's block tile), on the SIMT
/// and tensor-core kernels, beta ≠ 0 (C read) and beta = 0 (never read).
#[test]
fn strided_c_batches_span_several_tiles() {
    let dev = Device::emulator();
    for c_layout in [CLayout::Stacked, CLayout::SideBySide] {
        for beta in [0i8, -2] {
            let case = Case {
                m: 133,
                n: 141,
                k: 19,
                batch: 3,
                trans_a: false,
                trans_b: true,
                broadcast: 0,
                gap: 1,
                c_layout,
                c_pad: 3,
                c_gap: 5,
                alpha: 2,
                beta,
                seed: 0x5eed,
            };
            check::<f32, f32>(&dev, &case, None);
            check::<f32, f32>(&dev, &case, Some(TileConfig::Large));
            check::<f16, f32>(&dev, &case, None);
            check::<bf16, bf16>(&dev, &case, None);
        }
    }
}
