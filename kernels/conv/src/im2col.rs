//! The im2col matrix of an NHWC input, materialised
//! (`im2col_nhwc_{f16,bf16}`): row `(n, p, q)` (output pixel), column `j`
//! the input element that filter tap `(r, s)`, channel `c` reads there,
//! `j = (r·S + s)·C + c` — the `(r, s, c)` order of the implicit GEMM's
//! `K` dimension and of NHWC weights `K, R, S, C` — zero in the padding
//! and in the columns from `R·S·C` up to the row's length.
//!
//! What it is for: a layer with few input channels, ResNet-50's first
//! (`C = 3`, 7 × 7). The tensor-core implicit GEMM gathers 16-byte chunks of
//! 8 channels of one filter tap; with `C % 8 ≠ 0` no chunk is one tap's
//! channels, so it loads element by element (an H200 ran that layer at 0.08
//! of cuDNN). Materialised with its rows padded to a multiple of 32 columns
//! ([`im2col_cols`]), the layer is a 1 × 1 convolution over a `cols`-channel
//! image, which runs the implicit GEMM's lean gather (every k-step one
//! "tap" of 32 channels) or, without bias and ReLU, the GEMM itself. The
//! padded columns multiply zero weights: the same `K` order and the same
//! zeros at its end as the element-wise gather, so the same sums.
//!
//! The weights `K × R·S·C` are padded to `K × cols` by the same kernel: they
//! are the im2col matrix of a `K`-image batch of 1 × 1 images with `R·S·C`
//! channels under a 1 × 1 filter.
//!
//! Each thread writes 8-element (16-byte) chunks of the matrix, grid-stride
//! (`Out<T, ThreadChunks<8>>`), so a warp writes 512 contiguous bytes; the
//! chunk's pixel and first tap are decoded once, and its 8 elements step
//! through `(r, s, c)`. Consecutive elements of one filter row are
//! consecutive input elements (NHWC, dilation 1), so a warp's loads fall in
//! a few sectors.

use crate::{Element, Geometry};
use warpforge_device::num::Divisor;
use warpforge_device::own::ThreadChunks;
use warpforge_device::shared::SharedElement;
use warpforge_device::unroll::unroll;
use warpforge_device::{Out, bf16, f16};
use warpforge_macros::kernel;

/// Elements of one thread's unit: 16 bytes of f16/bf16.
pub const IM2COL_CHUNK: usize = 8;

/// The columns of the im2col matrix of `taps = R·S·C` products: padded to
/// a multiple of 32, the tensor-core implicit GEMM's k-step, so that its
/// 1 × 1 convolution runs the lean gather (`None` past `usize::MAX`).
pub const fn im2col_cols(taps: usize) -> Option<usize> {
    taps.checked_next_multiple_of(32)
}

/// The chunk of an interior pixel's row of the matrix whose first column
/// is column `k` of filter row `r` (`k < run`), where each of the `rows`
/// filter rows is one run of `run` consecutive input elements, row `r`'s
/// starting at `row_at` and each next one `row_step` further: the
/// run's elements from `k` (at most 8), then the next filter row's from its
/// start, zero past the filter's `rows` rows (the padding columns). A run
/// of at least 8 (checked here) leaves a chunk in at most two runs, so the
/// chunk is two windows of 8 consecutive inputs, each bounds-checked once,
/// and a select per element — not a checked load and a step per element.
/// `None` where a window would leave `x` (the caller's element-wise path).
#[inline(always)]
fn interior_chunk<T: Element>(
    x: &[T],
    (rows, row_step): (usize, usize),
    run: usize,
    (r, k): (usize, usize),
    row_at: usize,
) -> Option<[T; IM2COL_CHUNK]> {
    if run < IM2COL_CHUNK || k >= run {
        return None;
    }
    // The chunk's elements from row `r`; the rest are row `r + 1`'s.
    let first = (run - k).min(IM2COL_CHUNK);
    let window = |start: usize| -> Option<[T; IM2COL_CHUNK]> {
        let w = x.get(start..start.checked_add(IM2COL_CHUNK)?)?;
        <[T; IM2COL_CHUNK]>::try_from(w).ok()
    };
    let zeros = [T::ZERO; IM2COL_CHUNK];
    // Past the filter's rows: the padding columns, zero.
    let a = if r < rows {
        window(row_at.checked_add(k)?)?
    } else {
        zeros
    };
    // Element `i ≥ first` is row `r + 1`'s element `i − first`: the window
    // starting `first` before that row's run, at index `i`.
    let b = if r + 1 < rows {
        window(row_at.checked_add(row_step)?.checked_sub(first)?)?
    } else {
        zeros
    };
    let mut values = zeros;
    unroll::<IM2COL_CHUNK>(
        #[inline(always)]
        |i| values[i] = if i < first { a[i] } else { b[i] },
    );
    Some(values)
}

/// `y = im2col(x)` (module docs): `x` NHWC with one group, `y` the
/// row-major `N·P·Q × cols` matrix, `cols` a multiple of [`IM2COL_CHUNK`]
/// at least `R·S·C`, the geometry in the eight [`Geometry::pack`] words.
/// Any 1-D grid and block (grid-stride).
#[kernel(instances(im2col_nhwc_f16 = <f16>, im2col_nhwc_bf16 = <bf16>))]
#[allow(clippy::too_many_arguments)]
pub fn im2col_nhwc<T: Element + SharedElement>(
    x: &[T],
    mut y: Out<T, ThreadChunks<IM2COL_CHUNK>>,
    cols: u64,
    hw: u64,
    rs: u64,
    pq: u64,
    stride: u64,
    pad: u64,
    dil: u64,
    chans: u64,
    groups: u64,
) {
    let g = Geometry::unpack([hw, rs, pq, stride, pad, dil, chans, groups]);
    // 32-bit index arithmetic, its divisions by the launch's sizes as
    // multiply-and-shift ([`Divisor`], made once per thread; a 32-bit
    // division by a run-time value is ~20 instructions, a 64-bit one a
    // call of ~70): the host keeps the chunks, and so the rows, columns and
    // sizes, within 2^31 (a `Divisor`'s range).
    let units = y.len() as u64 / IM2COL_CHUNK as u64;
    let per_row = cols / IM2COL_CHUNK as u64;
    let fits = units <= u64::from(u32::MAX) && cols <= u64::from(u32::MAX);
    if !fits || !cols.is_multiple_of(IM2COL_CHUNK as u64) {
        return; // not a launch `Conv2d` makes: nothing is written
    }
    let divisor = |d: u64| u32::try_from(d).ok().and_then(Divisor::new);
    let row_len = g.s.wrapping_mul(g.cg) as u64; // a filter row's `S·C` columns
    let (Some(per_row), Some(pixels), Some(q_cols), Some(cg), Some(s_taps), Some(row_len)) = (
        divisor(per_row),
        divisor((g.p as u64).wrapping_mul(g.q as u64)),
        divisor(g.q as u64),
        divisor(g.cg as u64),
        divisor(g.s as u64),
        divisor(row_len),
    ) else {
        return;
    };
    // Interior pixels (the whole filter window inside the image) of a
    // layer without column dilation read each filter row's `S·C` columns
    // as one contiguous run of the input: one bounds-checked load and one
    // step per element.
    let (dh, dw) = (g.dil_h as i64, g.dil_w as i64);
    let image_row = g.w as i64 * g.cg as i64; // elements between input rows
    // Elements between the input runs of consecutive filter rows.
    let row_step = (dh * image_row) as usize;
    // The chunk of unit `unit`: row `(n, p, q)`, columns `j .. j + 8`.
    let chunk_values = #[inline(always)]
    |unit: u64| -> [T; IM2COL_CHUNK] {
        // A chunk never crosses a row: `cols` is a multiple of its length.
        let (row, j) = per_row.div_rem(unit as u32); // unit < units ≤ u32::MAX
        let j = j * IM2COL_CHUNK as u32;
        let (n, pixel) = pixels.div_rem(row);
        let (p, q) = q_cols.div_rem(pixel);
        // The window's corner in the input (negative or past the image in
        // the padding).
        let ih0 = p as i64 * g.stride_h as i64 - g.pad_top as i64;
        let iw0 = q as i64 * g.stride_w as i64 - g.pad_left as i64;
        let pixel_at =
            |ih: i64, iw: i64| ((n as i64 * g.h as i64 + ih) * g.w as i64 + iw) * g.cg as i64;
        let mut values = [T::ZERO; IM2COL_CHUNK];
        let (p, q) = (p as usize, q as usize);
        // Tap (r, s) inside the image: `Geometry::in_row`/`in_col`, the one
        // definition of the padding test.
        let inside = |r: usize, s: usize| g.in_row(p, r).is_some() && g.in_col(q, s).is_some();
        // The first and last taps of both axes inside: every tap is (the
        // input index grows with the tap).
        let interior = dw == 1 && inside(0, 0) && inside(g.r - 1, g.s - 1);
        if interior {
            let (r, mut k) = row_len.div_rem(j);
            let r = r as usize;
            let row_at = pixel_at(ih0 + r as i64 * dh, iw0) as usize;
            let run = row_len.divisor() as usize;
            if let Some(values) = interior_chunk(x, (g.r, row_step), run, (r, k as usize), row_at) {
                return values;
            }
            // Past either end of `x` (a window of the first or last pixels):
            // element by element.
            let (mut r, mut at) = (r, row_at);
            unroll::<IM2COL_CHUNK>(|i| {
                if r < g.r {
                    values[i] = x.get(at + k as usize).copied().unwrap_or(T::ZERO);
                }
                k += 1;
                if k == row_len.divisor() {
                    k = 0;
                    r += 1;
                    at = at.wrapping_add(row_step);
                }
            });
            return values;
        }
        let (tap, mut c) = cg.div_rem(j);
        let (r, s) = s_taps.div_rem(tap);
        // The tap (r, s) as the input pixel (ih, iw) it reads, its channel
        // 0's index `at` (meaningful when inside), and the steps of both
        // from one tap to the next along a filter row and to the next row's
        // first: no division and no `Option` per element.
        let (mut r, mut s) = (r as usize, s);
        let mut at = pixel_at(ih0 + r as i64 * dh, iw0 + s as i64 * dw);
        let reads_tap = |r: usize, s: u32| r < g.r && inside(r, s as usize);
        let mut reads = reads_tap(r, s);
        let (col_step, row_step) = (
            dw * g.cg as i64,
            pixel_at(dh, -(g.s as i64) * dw) - pixel_at(0, 0),
        );
        unroll::<IM2COL_CHUNK>(|i| {
            if reads {
                values[i] = x.get(at as usize + c as usize).copied().unwrap_or(T::ZERO);
            }
            c += 1;
            if c == cg.divisor() {
                c = 0;
                s += 1;
                at += col_step;
                if s == s_taps.divisor() {
                    s = 0;
                    r += 1;
                    at += row_step;
                }
                reads = reads_tap(r, s);
            }
        });
        values
    };
    // One 16-byte store a chunk where the matrix is aligned (always, for a
    // buffer `Conv2d` allocates), else element stores: decided once.
    if let Some(chunks) = y.aligned_chunks(units) {
        chunks.for_each(|mut chunk| chunk.write(chunk_values(chunk.unit())));
    } else {
        y.chunks(units)
            .for_each(|mut chunk| chunk.write(chunk_values(chunk.unit())));
    }
}
