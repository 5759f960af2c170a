//! Tiled depthwise convolution (`G = C`, any channel multiplier
//! `M = K/C`, stride, padding, dilation, both layouts, f32/f16/bf16, bias
//! and ReLU): each block stages the input its output tile reads — the tile
//! and its halo — in shared memory once, reading every input element from
//! global memory about once per tile, and its threads keep their filter
//! taps in registers. Filters of up to [`DW_TAPS`] taps (`R·S ≤ 9`: 3×3
//! and smaller); the host runs the direct kernel for larger ones, and for
//! shapes whose staging area or grid does not fit ([`Geometry::dw_plan`]).
//!
//! **NHWC** (`conv2d_depthwise_nhwc_{f32,f16,bf16}`): the output is `N`
//! stacked `[P·Q × K]` matrices (batch `z` = image), each block owning a
//! tile of [`DW_NHWC_PIXELS`] consecutive output pixels (row-major `(p,
//! q)`) × 4 channel vectors of 16 bytes ([`dw_nhwc_channels`]: 32 f16/bf16
//! or 16 f32 channels), walked 224 pixels a step by [`DW_NHWC_THREADS`]
//! threads: thread `t` owns the 16-byte vector `t % 4` of channels (8 f16
//! or 4 f32) of a strip of 7 consecutive pixels ([`NhwcTiles`]). The input
//! rows a step reads live in a ring of [`Geometry::dw_nhwc_ring_rows`] rows
//! in shared memory, each row the image's columns between zero columns for
//! the padding ([`Geometry::dw_nhwc_pad_cols`]), every pixel its 4 channel
//! vectors: walking down the image the block loads each input row it needs
//! once (the next rows as the window moves down, a barrier before and after
//! each load), so a block re-reads only the `(R − 1)·dh` halo rows above its
//! first output row. Rows are loaded as whole 16-byte channel vectors
//! (`Global::vectors16`) when the block stages a whole tile of aligned
//! channels — `C` a multiple of the vector, multiplier 1, a whole channel
//! tile, the buffer aligned — checked once per block; element loads
//! otherwise (ragged channel counts, multipliers, a misaligned buffer). The
//! ring holds the block's *output* channels: with a multiplier `M`, ring
//! channel `j` is input channel `(k0 + j) / M`, so every path below reads
//! its own channels as one vector whatever `M`.
//!
//! Where the taps of a row are consecutive input pixels (dilation 1 along
//! rows, stride 1 or 2, up to 3 × 3: decided once per block) a thread runs
//! its strip from registers (`strip`): per filter row it slides a window
//! of 9 (stride 2: 15) input pixels through its registers, each pixel one
//! `LDS.128` of its channel vector converted to f32 once and used by every
//! tap that reads it (3 per pixel at stride 1), against the filter taps
//! held in registers as f32 — 7 × 9 × 8 FMAs (f16) from 27 vector loads and
//! 216 conversions. A strip that crosses an output row end (images whose
//! width is not a multiple of 7) runs once per row it touches, each run
//! keeping the outputs of its row (decided once per strip, never per tap).
//! Other geometries (larger strides, dilations along rows, filters wider or
//! taller than 3) go output by output, tap by tap, still a channel vector
//! at a time. Outputs are stored as one 16-byte vector per pixel where the
//! strip's channels are whole and aligned (`MicroTile::row_vectors`, once
//! per strip), element by element otherwise (the ragged channel tile, `K`
//! not a multiple of the vector).
//!
//! **NCHW** (`conv2d_depthwise_nchw_{f32,f16,bf16}`): the output is `N·K`
//! stacked `[P × Q]` planes (batch `z = n·K + k`), each block owning a
//! [`DW_NCHW_ROWS`] × [`DW_NCHW_COLS`] tile of one plane (the whole plane
//! up to 64 × 64), each thread strips of `V` consecutive output columns (a
//! 16-byte vector: 4 f32 or 8 f16/bf16) in 16 (f32) or 8 (f16/bf16) rows
//! of it ([`NchwStrips`]). The block stages the input window its tile
//! reads in shared memory in one pass, consecutive threads on consecutive
//! elements, the padding as zeros (never read from global memory), its
//! rows a whole number of 16-byte vectors apart, so that every strip's
//! window row starts on a vector boundary. Where a row's taps are
//! consecutive input columns (dilation 1 along rows, stride 1 or 2, 3-wide
//! filters of up to 3 rows: decided once per block) a strip runs from
//! registers: per filter row its `(V − 1)·sw + 3` input columns are 2
//! (stride 2: 3) `LDS.128`, each element converted to f32 once and used by
//! every tap that reads it, against the 9 taps held in registers as f32 —
//! 4 × 9 FMAs (f32) from 6 vector loads. Other geometries (larger strides,
//! dilations along rows, other filter widths) go tap by tap, one shared
//! load per tap and output, from the same window. Outputs are stored as
//! one 16-byte vector per strip where the tile's rows are whole aligned
//! vectors; otherwise (`Q` not a multiple of the vector, a misaligned
//! view) each strip is one 16-byte store into a stage in shared memory
//! after the window, and the block writes the tile from it in a walk lined
//! up on 32-byte sectors, each sector one store ([`NchwStrips`], decided
//! once per block); the general path then computes each output in that
//! walk, from the window.
//!
//! **Rounding**: each output is one f32 fused multiply-add chain over the
//! taps in `(r, s)` order from 0, each input and weight converted to f32
//! exactly, then the epilogue (`Geometry::finish`: `+ bias` in f32, ReLU,
//! one rounding to the output type): the same bits as the direct kernel
//! for finite filters (padding columns are zeros both tiled kernels
//! multiply, `0·w`, where the direct kernel skips the tap: an infinite or
//! NaN weight over padding gives NaN here, as with cuDNN's zero-filled
//! padding). Packed f16x2 FMAs (`HFMA2`) would halve the FMAs but round
//! every partial sum to f16, so they are not used.

use super::{Element, Geometry};
use warpforge_device::global::{Plain, Vector16};
use warpforge_device::own::{MicroTile, MicroTiles, RowVectors, StagedTiles, TileStores};
use warpforge_device::shared::{self, SharedElement, SharedVectorWindows, SharedWindows};
use warpforge_device::sync::sync_threads;
use warpforge_device::{Global, OutMatrix, bf16, f16, num, thread, unroll};
use warpforge_macros::kernel;

/// Threads per block of the tiled NCHW depthwise kernel (1-D).
pub const DW_THREADS: usize = 256;
/// Threads per block of the tiled NHWC depthwise kernel (1-D).
pub const DW_NHWC_THREADS: usize = 128;
/// Most filter taps (`R·S`) the tiled kernels keep in registers.
pub const DW_TAPS: usize = 9;
/// NHWC: output pixels each thread computes per step, consecutive along a
/// row (its registers slide one input row window across them).
const NHWC_STRIP: usize = 7;
/// NHWC: 16-byte channel vectors per pixel of a block tile (a thread owns
/// one of a strip's pixels).
const NHWC_GROUPS: usize = 4;
/// NHWC: pixels a block computes per step: a strip per 4 threads.
const NHWC_STEP: usize = DW_NHWC_THREADS / NHWC_GROUPS * NHWC_STRIP;
/// NHWC: steps per block tile.
const NHWC_STEPS: usize = 4;
/// NHWC: output pixels per block tile.
pub const DW_NHWC_PIXELS: usize = NHWC_STEP * NHWC_STEPS;
/// NHWC: filter rows and columns the strip path unrolls (3 × 3 and smaller).
const NHWC_STRIP_TAPS: usize = 3;
/// NHWC: input pixels a strip's row window spans at stride `sw` (1 or 2):
/// `sw·(7 − 1) + 3`.
const fn nhwc_window(sw: usize) -> usize {
    sw * (NHWC_STRIP - 1) + NHWC_STRIP_TAPS
}
/// NHWC: vectors a strip's row window reaches from its first, at the
/// widest stride the strip path takes (2): its last pixel's vector,
/// `(nhwc_window(2) − 1)` pixels of 4 vectors on.
const NHWC_REACH: usize = (nhwc_window(2) - 1) * NHWC_GROUPS + 1;
/// NHWC: 16-byte vectors at the start of shared memory before the ring:
/// the block's filters as f32, tap-major (`[tap][channel]`, at most 9 × 32
/// f32: a thread's 8 channels of one tap are 2 vectors), its bias as f32
/// after them (tap 9's place): 80 vectors, which are also the room for a
/// strip window that starts up to 12 pixels (48 vectors) before the first
/// ring row (a strip's run for the row after the one it starts in, whose
/// first outputs are the previous row's and are discarded).
const NHWC_FILTER_VECS: usize = 80;
/// NHWC: f32 vectors a filter row's window reaches (3 taps of up to 32
/// channels, a thread's 8 of each: `2·32/4 + 8/4`).
const NHWC_FILTER_REACH: usize = 2 * 32 / 4 + 2;

/// NHWC: output channels per block tile for `elem_bytes`-byte elements:
/// 4 vectors of 16 bytes (32 f16/bf16 or 16 f32 channels).
pub const fn dw_nhwc_channels(elem_bytes: usize) -> usize {
    NHWC_GROUPS * 16 / elem_bytes
}

/// NCHW: output rows and columns per block tile (one block per plane up to
/// 64 × 64: the 56 × 56 planes are read once, halo rows included).
pub const DW_NCHW_ROWS: usize = 64;
pub const DW_NCHW_COLS: usize = 64;
/// NCHW: the filter's taps and the bias at the start of shared memory,
/// padded to 16 elements (a whole number of 16-byte vectors, so the window
/// after them starts on one).
const NCHW_FILTER: usize = 16;
/// NCHW: filter rows and columns the strip path unrolls (3 × 3 and smaller
/// rows; the strip path takes 3-wide filters).
const NCHW_STRIP_TAPS: usize = 3;
/// NCHW: 16-byte vectors a strip's row window reaches at the widest
/// stride the strip path takes (2): `⌈(2·(V − 1) + 3) / V⌉` = 3 for f32
/// (4 outputs, 9 input columns) and f16/bf16 (8 outputs, 17 columns).
const NCHW_REACH: usize = 3;
/// NCHW: vectors of a strip's row window at stride `sw` for `v`-element
/// vectors: the `(v − 1)·sw + 3` input columns its `v` outputs read.
const fn nchw_window_vectors(v: usize, sw: usize) -> usize {
    ((v - 1) * sw + NCHW_STRIP_TAPS).div_ceil(v)
}
/// The largest shared memory the host gives a tiled depthwise block: what
/// every GPU from sm_80 on gives a block that opts in (sm_86 and sm_89:
/// 99 KiB; the launch opts in above the default 48 KiB). The NHWC ring
/// holds every input row one step of 224 output pixels reads: on narrow
/// images a step is many rows (28 × 28 at stride 2: the whole image, 56
/// KiB).
pub const DW_MAX_SHARED_BYTES: usize = 96 * 1024;
/// The largest grid y and z.
const GRID_YZ: usize = 65535;

const _: () = assert!(
    DW_TAPS < NCHW_FILTER
        && dw_nhwc_channels(2) * (DW_TAPS + 1) * 4 <= NHWC_FILTER_VECS * 16
        && NHWC_FILTER_VECS >= 2 * (NHWC_STRIP - 1) * NHWC_GROUPS
        // A filter window from the bias's start is in the view: the ring
        // and the reach past it follow the filter area.
        && DW_TAPS * dw_nhwc_channels(2) / 4 + 8 / 4 + NHWC_FILTER_REACH
            <= NHWC_FILTER_VECS + NHWC_REACH
);

/// The NHWC output mapping for `V`-element channel vectors and `CT = 4·V`
/// channels a block: block tiles of `DW_NHWC_PIXELS` pixels × `CT`
/// channels, walked in 4 steps of 224 pixels; in each step the thread with
/// linear id `t` owns channels `V·(t % 4) ..` of the strip of 7 pixels from
/// `7·(t / 4)`.
pub type NhwcTiles<const V: usize, const CT: usize> =
    MicroTiles<DW_NHWC_PIXELS, CT, NHWC_STRIP, V, NHWC_STEPS, 1>;

/// The NCHW output mapping for `V`-element (16-byte) strips: block tiles
/// of 64 × 64 outputs of one plane, cut into `RI` sub-tiles of `64 / RI`
/// rows; thread `t` computes the strip of `V` consecutive columns `V·(t %
/// (64 / V)) ..` of row `t / (64 / V)` of every sub-tile (f32: 4 columns of
/// rows `t / 16 + 16·i`, `i < 4`; f16/bf16: 8 columns of rows `t / 8 +
/// 32·i`, `i < 2`: `nchw_strip_origin`). A quarter warp's strips are 8
/// consecutive 16-byte vectors of one row: its shared loads are free of
/// bank conflicts at stride 1. Where the tile's rows are whole aligned
/// vectors (`Q` a multiple of `V`, the plane on 16 bytes) the thread stores
/// its strips, one 16-byte store each; otherwise the block stages its tile
/// in shared memory and writes it a warp's 32 consecutive elements at a
/// time ([`StagedTiles`]).
pub type NchwStrips<const V: usize, const RI: usize> =
    StagedTiles<DW_NCHW_ROWS, DW_NCHW_COLS, 1, V, RI>;

/// NCHW: the tile row and column of thread `t`'s first strip
/// ([`NchwStrips`]: micro-tile `t` of the first sub-tile).
#[inline(always)]
const fn nchw_strip_origin(t: usize, v: usize) -> (usize, usize) {
    let per_row = DW_NCHW_COLS / v;
    (t / per_row, (t % per_row) * v)
}

/// How the host launches a tiled depthwise kernel ([`Geometry::dw_plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DwPlan {
    /// Blocks along x, y and z.
    pub grid: (u32, u32, u32),
    /// Threads per block (1-D).
    pub threads: u32,
    /// Dynamic shared memory per block.
    pub shared_bytes: u32,
}

impl Geometry {
    /// Rows of the NHWC kernel's input ring: enough for the input rows of
    /// any 224 consecutive output pixels (`≤ 223/Q + 2` output rows, so
    /// `(rows − 1)·sh + (R − 1)·dh + 1` input rows), at most `H`.
    #[inline(always)]
    pub fn dw_nhwc_ring_rows(&self) -> usize {
        let out_rows = ((NHWC_STEP - 1) / self.q.max(1) + 2).min(self.p.max(1));
        let span = (self.r.max(1) - 1) * self.dil_h + 1;
        ((out_rows - 1) * self.stride_h + span).min(self.h)
    }

    /// The NHWC ring's zero columns `(left, right)`: the padding columns an
    /// output row reads (`pad_left`, and past the image what its last output
    /// reaches), so that every tap of every output reads its ring row
    /// unconditionally.
    #[inline(always)]
    pub fn dw_nhwc_pad_cols(&self) -> (usize, usize) {
        let reach = (self.q.max(1) - 1) * self.stride_w + (self.s.max(1) - 1) * self.dil_w + 1;
        (self.pad_left, reach.saturating_sub(self.pad_left + self.w))
    }

    /// Pixels of one NHWC ring row, zero columns included (`None` on
    /// overflow: the host then runs the direct kernel, so the tiled kernel
    /// never sees it).
    #[inline(always)]
    pub fn dw_nhwc_row_pixels(&self) -> Option<usize> {
        let (left, right) = self.dw_nhwc_pad_cols();
        left.checked_add(self.w)?.checked_add(right)
    }

    /// The NCHW kernel's input window for a block tile of `tp × tq` outputs
    /// (at most 64 × 64) with `v`-element strips: `(rows, pitch)`, the input
    /// rows the tile reads, padding included, and the elements between
    /// them in shared memory — the columns every strip's outputs read (the
    /// last strip's whole `v` columns, those past `tq` discarded), at least
    /// the `NCHW_REACH` (3) vectors of the last strip's row window, rounded up
    /// to whole 16-byte vectors so that every strip's window starts on one.
    #[inline(always)]
    pub fn dw_nchw_window(&self, tp: usize, tq: usize, v: usize) -> (usize, usize) {
        let qv = tq.max(1).div_ceil(v) * v;
        let rows = (tp.max(1) - 1) * self.stride_h + (self.r.max(1) - 1) * self.dil_h + 1;
        let cols = (qv - 1) * self.stride_w + (self.s.max(1) - 1) * self.dil_w + 1;
        let reach = (qv - v) * self.stride_w + NCHW_REACH * v;
        (rows, cols.max(reach).div_ceil(v) * v)
    }

    /// The NCHW kernel's output stage for a block tile of `tp × tq` outputs
    /// with `v`-element strips, in elements: `tp` rows of the strips' whole
    /// columns (`tq` rounded up to `v`), each row a whole number of 16-byte
    /// vectors. Where the plane's rows are not whole aligned vectors the
    /// block's strips land here and the block writes the tile from it
    /// ([`NchwStrips`]).
    #[inline(always)]
    pub fn dw_nchw_stage(&self, tp: usize, tq: usize, v: usize) -> (usize, usize) {
        (tp.max(1), tq.max(1).div_ceil(v) * v)
    }

    /// The launch of a tiled depthwise kernel over `n` images with
    /// `elem_bytes`-byte elements, or `None` where the direct kernel runs
    /// instead: more than [`DW_TAPS`] taps, a staging area over
    /// [`DW_MAX_SHARED_BYTES`], or a grid past 65535 blocks in y or z.
    /// Every size in checked arithmetic. For a depthwise geometry
    /// (`cg = 1`).
    pub fn dw_plan(&self, nhwc: bool, n: usize, elem_bytes: usize) -> Option<DwPlan> {
        if self.cg != 1 || self.r * self.s > DW_TAPS || n == 0 {
            return None;
        }
        let k_all = self.kg.checked_mul(self.groups)?;
        let (grid, threads, bytes) = if nhwc {
            // In 16-byte vectors: the filters (and the lead before the
            // ring), the ring, and the reach of a strip window past the
            // ring's end (read only by a strip's discarded outputs past its
            // row's end: a window is as wide as the widest stride and filter
            // the strip path takes).
            let vectors = self
                .dw_nhwc_ring_rows()
                .checked_mul(self.dw_nhwc_row_pixels()?)?
                .checked_mul(NHWC_GROUPS)?
                .checked_add(NHWC_FILTER_VECS + NHWC_REACH)?;
            let pixels = self.p.checked_mul(self.q)?;
            // The kernel's pixel and row indices in 32 bits (`div_u32`).
            u32::try_from(pixels.max(self.h)).ok()?;
            let grid = (
                k_all.div_ceil(dw_nhwc_channels(elem_bytes.max(1))),
                pixels.div_ceil(DW_NHWC_PIXELS),
                n,
            );
            (grid, DW_NHWC_THREADS, vectors.checked_mul(16)?)
        } else {
            let v = 16 / elem_bytes.clamp(1, 16);
            let (tp, tq) = (DW_NCHW_ROWS.min(self.p), DW_NCHW_COLS.min(self.q));
            let (rows, pitch) = self.dw_nchw_window(tp, tq, v);
            // The filter, the input window, then the output stage (sized
            // whatever the binding: the kernel decides per block whether it
            // stages).
            let (stage_rows, stage_pitch) = self.dw_nchw_stage(tp, tq, v);
            let elems = rows
                .checked_mul(pitch)?
                .checked_add(NCHW_FILTER)?
                .checked_add(stage_rows.checked_mul(stage_pitch)?)?;
            // The kernel's offsets into a plane in 32 bits.
            u32::try_from(self.h.checked_mul(self.w)?).ok()?;
            let grid = (
                self.q.div_ceil(DW_NCHW_COLS),
                self.p.div_ceil(DW_NCHW_ROWS),
                n.checked_mul(k_all)?,
            );
            (grid, DW_THREADS, elems.checked_mul(elem_bytes)?)
        };
        if bytes > DW_MAX_SHARED_BYTES || grid.1 > GRID_YZ || grid.2 > GRID_YZ {
            return None;
        }
        Some(DwPlan {
            grid: (u32::try_from(grid.0).ok()?, grid.1 as u32, grid.2 as u32),
            threads: threads as u32,
            shared_bytes: bytes as u32,
        })
    }
}

/// A strip of 7 NHWC outputs × `V` channels at stride `SW` from the
/// windows of its filter rows, starting at vector `row_start(r)` (`None`:
/// an input row outside the image): output `o` takes tap `(r, s)`, `s <
/// taps`, from pixel `SW·o + s` of row r's window, each of the window's
/// `WIN = SW·6 + 3` pixels (those `taps` needs) loaded as one channel
/// vector and converted to f32 once, then used by every tap that reads it;
/// every index a constant, each output's taps in `(r, s)` order.
#[inline(always)]
fn strip<
    T: Element + SharedElement,
    const V: usize,
    const CT: usize,
    const SW: usize,
    const WIN: usize,
>(
    windows: SharedVectorWindows<T, V, NHWC_REACH>,
    row_start: impl Fn(usize) -> Option<u32>,
    taps: usize,
    filters: &Filters<V, CT>,
) -> [[f32; V]; NHWC_STRIP] {
    const { assert!(WIN == nhwc_window(SW) && (WIN - 1) * NHWC_GROUPS < NHWC_REACH && WIN <= 16) };
    let mut acc = [[0.0f32; V]; NHWC_STRIP];
    // Every loop written out: the accumulators and taps are registers
    // only while every index into them is a constant.
    unroll::unroll::<NHWC_STRIP_TAPS>(
        #[inline(always)]
        |r| {
            let Some(start) = row_start(r) else { return };
            // Filter row r's taps: loaded (as f32) once per strip run, so only
            // one row of them is live.
            let (wr, row) = (filters.row(r, taps), windows.at(start as usize));
            // Window pixel i = 4·hi + lo, written out (16 ≥ WIN).
            unroll::unroll2::<4, 4>(
                #[inline(always)]
                |hi, lo| {
                    let i = 4 * hi + lo;
                    if i >= WIN || i >= SW * (NHWC_STRIP - 1) + taps {
                        return;
                    }
                    let raw = row.load(i * NHWC_GROUPS);
                    let x: [f32; V] = unroll::array(
                        #[inline(always)]
                        |v| raw[v].to_f32(),
                    );
                    unroll::unroll::<NHWC_STRIP_TAPS>(
                        #[inline(always)]
                        |s| {
                            // Output o = (i − s) / SW reads pixel i at tap s.
                            if s < taps && i >= s && (i - s) % SW == 0 && (i - s) / SW < NHWC_STRIP
                            {
                                let (out, ws) = (&mut acc[(i - s) / SW], &wr[s]);
                                unroll::unroll::<V>(
                                    #[inline(always)]
                                    |v| out[v] = num::fma_f32(x[v], ws[v], out[v]),
                                );
                            }
                        },
                    );
                },
            );
        },
    );
    acc
}

/// Stores outputs `o` of a strip (rows `first + o` of the thread's
/// micro-tile) for `o` in `keep`: the epilogue (one rounding), then one
/// [`StripOut::put`] each.
#[inline(always)]
fn store_strip<T: Element, const V: usize>(
    out: &mut impl StripOut<T, V>,
    first: usize,
    keep: core::ops::Range<usize>,
    acc: &[[f32; V]; NHWC_STRIP],
    g: &Geometry,
    bias: &[f32; V],
) {
    // 8 ≥ 7 outputs, written out (`unroll` writes out 4 and 8). The bias
    // is added whether there is one or not (`Geometry::finish` selects):
    // without one it is +0, and `acc + 0` is `acc` — an FMA chain from +0
    // never ends at −0 (round to nearest: +0 + −0 = +0, and an exact
    // cancellation gives +0) — so the bits are `finish`'s.
    let relu = Geometry { bias: true, ..*g };
    unroll::unroll::<8>(
        #[inline(always)]
        |o| {
            if o < NHWC_STRIP && keep.contains(&o) {
                let values = unroll::array(
                    #[inline(always)]
                    |v| T::from_f32(relu.finish(acc[o][v], bias[v])),
                );
                out.put(first + o, values);
            }
        },
    );
}

/// `(a / b, a % b)` in 32 bits (~20 instructions, where 64-bit division
/// is a call of about 70): for the NHWC kernel's pixel and row indices and
/// the NCHW plane's channel, which fit (`Geometry::dw_plan` takes only
/// images of `P·Q` and `H` below 2³² and grids of `N·K ≤ 65535` planes;
/// any other launch gets wrong indices, never an out-of-bounds access: its
/// loads are checked or clamped and its writes owned). Not
/// `num::Divisor`: made once per thread (a 64-bit division each) for `Q`,
/// the ring's rows and the multiplier, it took the NHWC step loop from
/// 29.3 to 26.8 instructions per output (f16, sm_80) and 2–13 registers
/// off, but ptxas then laid out the strip loop 5–23 instructions longer
/// (bf16 24.0 -> 24.2 per output, past its budget), so the divisions stay
/// these (2026-11-29).
#[inline(always)]
fn div_u32(a: usize, b: usize) -> (usize, usize) {
    let (a, b) = (a as u32, (b as u32).max(1));
    ((a / b) as usize, (a % b) as usize)
}

/// The input rows `lo .. hi` that output rows `p_lo ..= p_hi` read, clipped
/// to the image (`lo = hi` when they read none: all padding).
#[inline(always)]
fn input_rows(g: &Geometry, p_lo: usize, p_hi: usize) -> (usize, usize) {
    let hi =
        g.h.min((p_hi * g.stride_h + (g.r - 1) * g.dil_h + 1).saturating_sub(g.pad_top));
    (hi.min((p_lo * g.stride_h).saturating_sub(g.pad_top)), hi)
}

/// Each tap's offset in an NCHW window of row pitch `pitch` from its
/// output's first element, `(r·dh)·pitch + s·dw`, taps `(r, s)` row-major
/// (the first `R·S` of [`DW_TAPS`]; in 32 bits: offsets within a window).
#[inline(always)]
fn tap_offsets(g: &Geometry, pitch: usize) -> [u32; DW_TAPS] {
    let (row, col) = ((g.dil_h * pitch) as u32, g.dil_w as u32);
    let (mut at, mut r, mut s) = ([0u32; DW_TAPS], 0u32, 0usize);
    for tap_at in &mut at {
        *tap_at = r * row + s as u32 * col;
        s += 1;
        if s >= g.s {
            (r, s) = (r + 1, 0);
        }
    }
    at
}

/// Calls `f(r, c)` for the elements `u = t, t + 256, …` below `rows ×
/// cols` of a row-major `rows × cols` grid (the block's threads walking it
/// together, consecutive threads on consecutive elements), each `(r, c)`
/// advanced by a constant step: no division per element. In 32 bits (the
/// grids are parts of one plane's staging window).
#[inline(always)]
fn walk_2d(t: u32, cols: u32, rows: u32, mut f: impl FnMut(u32, u32)) {
    if cols == 0 {
        return;
    }
    let threads = DW_THREADS as u32;
    let (step_r, step_c) = (threads / cols, threads % cols);
    let (mut r, mut c) = (t / cols, t % cols);
    while r < rows {
        f(r, c);
        (r, c) = (r + step_r, c + step_c);
        if c >= cols {
            (r, c) = (r + 1, c - cols);
        }
    }
}

/// Tiled depthwise NHWC convolution (module docs): `x` the input `N × H × W
/// × C`, `w` the filters `K × R × S` (`K = C·M`), `bias` (`K`, read only when
/// the geometry says so), `y` bound as `N` stacked `[P·Q × K]` matrices.
/// Grid `⌈K/CT⌉ × ⌈PQ/896⌉ × N` ([`DW_NHWC_PIXELS`] pixels and `CT =
/// 4·V` channels a block: [`dw_nhwc_channels`]), blocks of
/// [`DW_NHWC_THREADS`] threads (1-D), dynamic shared memory as
/// [`Geometry::dw_plan`] sizes it; another block shape or a filter of more
/// than [`DW_TAPS`] taps traps.
#[kernel(
    max_threads = 128,
    min_blocks = 2,
    instances(
    conv2d_depthwise_nhwc_f32 = <f32, 4, 16>,
    conv2d_depthwise_nhwc_f16 = <f16, 8, 32>,
    conv2d_depthwise_nhwc_bf16 = <bf16, 8, 32>,
))]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_depthwise_nhwc<
    T: Element + SharedElement + Plain,
    const V: usize,
    const CT: usize,
>(
    x: Global<T>,
    w: Global<T>,
    bias: Global<T>,
    mut y: OutMatrix<T, NhwcTiles<V, CT>>,
    hw: u64,
    rs: u64,
    pq: u64,
    stride: u64,
    pad: u64,
    dil: u64,
    chans: u64,
    groups: u64,
) {
    const {
        assert!(
            CT == NHWC_GROUPS * V
                && V * core::mem::size_of::<T>() == 16
                && CT == dw_nhwc_channels(core::mem::size_of::<T>())
        )
    };
    let g = Geometry::unpack([hw, rs, pq, stride, pad, dil, chans, groups]);
    let taps = g.r * g.s;
    assert!(
        thread::block_dim().volume() == DW_NHWC_THREADS as u64 && taps <= DW_TAPS,
        "conv2d_depthwise_nhwc: 128 threads per block and at most 9 filter taps"
    );
    let (_, batch_rows) = y.batch();
    let block = thread::block_idx();
    // Block-uniform: image n, pixels m0 .. m_end, output channels k0 .. k_end.
    let (n, m0, k0) = (
        block.z as usize,
        block.y as usize * DW_NHWC_PIXELS,
        block.x as usize * CT,
    );
    let (c_all, mult) = (g.groups, g.kg);
    let k_all = c_all * mult;
    let (m_end, k_end) = (batch_rows.min(m0 + DW_NHWC_PIXELS), k_all.min(k0 + CT));
    if m0 >= m_end || k0 >= k_end {
        return; // the whole block: nothing of the output is its
    }
    let t = thread::linear_thread_id() as usize;
    // This thread's channel vector (output channels k0 + V·group ..) and
    // strip row (pixels 7·strip_row .. of each step).
    let (group, strip_row) = (t % NHWC_GROUPS, t / NHWC_GROUPS);
    let smem = shared::dynamic::<T>();
    let ring = g.dw_nhwc_ring_rows();
    let (Some(row_px), (left, _)) = (g.dw_nhwc_row_pixels(), g.dw_nhwc_pad_cols()) else {
        return; // the whole block: a geometry `dw_plan` refuses
    };
    // In 16-byte vectors: the filter area (`NHWC_FILTER_VECS`), then the
    // ring — pixel px of ring slot `slot` at `NHWC_FILTER_VECS + (slot·
    // row_px + px)·4`, its channel vector j 1 more each — then the reach.
    let vectors = smem.len() / V;

    // The filter area — tap `tap` of channel j as f32 at `tap·CT + j`, the
    // bias at `9·CT + j` (zeros past K, past the taps, without a bias) —
    // and zeros everywhere after it: the ring's zero columns (never
    // overwritten: input rows land between them), the rows not loaded yet
    // and the reach past the ring, which a strip's discarded outputs may
    // read. Two disjoint areas, one barrier.
    let fsmem = shared::dynamic::<f32>();
    // The taps: consecutive threads on consecutive filter elements (the
    // block's `CT·R·S` are one run of `w`), each element once.
    let mut u = t;
    while u < CT * taps {
        let (j, tap) = div_u32(u, taps);
        let v = if k0 + j < k_end {
            w.load(k0 * taps + u).map_or(0.0, T::to_f32)
        } else {
            0.0
        };
        fsmem.store(tap * CT + j, v);
        u += DW_NHWC_THREADS;
    }
    // The rest of the area: the bias at tap 9's place, zeros elsewhere.
    let mut u = t + taps * CT;
    while u < NHWC_FILTER_VECS * 4 {
        let (tap, j) = (u / CT, u % CT);
        let v = if tap == DW_TAPS && g.bias && k0 + j < k_end {
            bias.load(k0 + j).map_or(0.0, T::to_f32)
        } else {
            0.0
        };
        fsmem.store(u, v);
        u += DW_NHWC_THREADS;
    }
    let mut u = NHWC_FILTER_VECS + t;
    while u < vectors {
        smem.store16::<V>(u * V, [T::ZERO; V]);
        u += DW_NHWC_THREADS;
    }
    sync_threads();
    let Some(filters) = fsmem.vector_windows::<4, NHWC_FILTER_REACH>() else {
        return; // the whole block: a launch `dw_plan` did not size
    };
    let filters = Filters::<V, CT> {
        windows: filters,
        first: group * V / 4,
    };
    // Strips read one input-row window in registers where each output's
    // taps are consecutive input pixels (dilation 1 along rows, stride 1 or
    // 2, filters up to 3 × 3): decided once, for the whole block.
    let strips = (g.stride_w == 1 || g.stride_w == 2)
        && g.dil_w == 1
        && g.r <= NHWC_STRIP_TAPS
        && g.s <= NHWC_STRIP_TAPS;
    let Some(windows) = smem.vector_windows::<V, NHWC_REACH>() else {
        return; // the whole block: a launch `dw_plan` did not size
    };

    // Whole 16-byte vectors when the block stages a whole tile of channels
    // as aligned vectors: decided once, for the whole block.
    let (head, x_vectors) = x.vectors16::<V>();
    let stage = Stage {
        g,
        x,
        x_vectors,
        vector: head == 0 && mult == 1 && c_all.is_multiple_of(V) && k_end - k0 == CT,
        smem,
        m0,
        m_end,
        k0,
        k_end,
        image_row: n * g.h,
        ring,
        row_px,
        left,
        t,
        group,
        strip_row,
    };

    // The paths, each its own loop nest (decided once, for the whole
    // block), so that each main loop holds only its own path's code.
    macro_rules! paths {
        ($out:expr) => {{
            let mut out = $out;
            match (strips, g.stride_w) {
                (true, 1) => strip_steps::<T, V, CT, 1, { nhwc_window(1) }, _>(
                    &mut out, &stage, &filters, windows,
                ),
                (true, _) => strip_steps::<T, V, CT, 2, { nhwc_window(2) }, _>(
                    &mut out, &stage, &filters, windows,
                ),
                _ => walk_steps::<T, V, CT, _>(
                    &mut out,
                    &stage,
                    #[inline(always)]
                    |out, at| {
                        let acc = general::<T, V, CT>(windows, &filters, &g, &at);
                        store_strip(out, at.first, 0..at.count, &acc, &g, &filters.bias());
                    },
                ),
            }
        }};
    }
    let Some(mut tile) = y.micro_tile() else {
        // Owns no output: still stages its share of every input row.
        return walk_steps::<T, V, CT, MicroTile<'_, T, NHWC_STRIP, V, NHWC_STEPS, 1>>(
            &mut None,
            &stage,
            |_, _| {},
        );
    };
    // Whole rows of aligned channel vectors (every strip's stores one
    // 16-byte vector a pixel) or element stores: decided once, for all
    // the thread's strips.
    if tile.row_vectors().is_some() {
        paths!(tile.row_vectors())
    } else {
        paths!(Some(tile))
    }
}

/// The strip path's step loop at stride `SW` (1 or 2; `WIN` its window,
/// [`nhwc_window`]): each step's strip runs from registers. 3-wide filters
/// get the strip with their width a constant (no test per tap), a loop
/// nest of its own; narrower ones pass it at run time.
#[inline(always)]
fn strip_steps<
    T: Element + SharedElement + Plain,
    const V: usize,
    const CT: usize,
    const SW: usize,
    const WIN: usize,
    O: StripOut<T, V>,
>(
    out: &mut Option<O>,
    stage: &Stage<'_, T, V>,
    filters: &Filters<V, CT>,
    windows: SharedVectorWindows<T, V, NHWC_REACH>,
) {
    let g = &stage.g;
    let mut steps = #[inline(always)]
    |taps: usize| {
        walk_steps::<T, V, CT, _>(
            out,
            stage,
            #[inline(always)]
            |out, at| {
                strip_runs(
                    out,
                    &at,
                    g,
                    filters,
                    #[inline(always)]
                    |rows| {
                        strip::<T, V, CT, SW, WIN>(
                            windows,
                            #[inline(always)]
                            |r| rows.start(r),
                            taps,
                            filters,
                        )
                    },
                )
            },
        )
    };
    if g.s == NHWC_STRIP_TAPS {
        steps(NHWC_STRIP_TAPS)
    } else {
        steps(g.s)
    }
}

/// The general path's strip (any stride, dilation and filter): output by
/// output, tap by tap in `(r, s)` order, a channel vector at a time, the
/// taps read from shared memory; outputs past the strip's `count` left 0.
#[inline(always)]
fn general<T: Element + SharedElement, const V: usize, const CT: usize>(
    windows: SharedVectorWindows<T, V, NHWC_REACH>,
    filters: &Filters<V, CT>,
    g: &Geometry,
    at: &StripAt,
) -> [[f32; V]; NHWC_STRIP] {
    let mut acc = [[0.0f32; V]; NHWC_STRIP];
    unroll::unroll::<8>(
        #[inline(always)]
        |o| {
            if o >= at.count.min(NHWC_STRIP) {
                return;
            }
            let (po, qo) = div_u32(at.m + o, g.q);
            let out = &mut acc[o];
            for r in 0..g.r {
                let ih = (po * g.stride_h + r * g.dil_h).wrapping_sub(g.pad_top);
                if ih >= g.h {
                    continue;
                }
                let row = NHWC_FILTER_VECS + at.slots.of(ih) * at.slot_vecs + at.group;
                for s in 0..g.s {
                    // Ring column (its first `left` are the padding).
                    let px = qo * g.stride_w + s * g.dil_w;
                    let raw = windows.at(row + px * NHWC_GROUPS).load(0);
                    let wt = filters.tap(r * g.s + s);
                    unroll::unroll::<V>(
                        #[inline(always)]
                        |v| out[v] = num::fma_f32(raw[v].to_f32(), wt[v], out[v]),
                    );
                }
            }
        },
    );
    acc
}

/// Where a strip's outputs go: row `i` (`step·7 + o`) of the thread's
/// micro-tile, `V` channels.
trait StripOut<T, const V: usize> {
    /// Writes row `i`'s `V` channels (those inside the output).
    fn put(&mut self, i: usize, values: [T; V]);
}

/// Whole aligned rows: one 16-byte store each.
impl<T: Copy, const MR: usize, const V: usize, const RI: usize> StripOut<T, V>
    for RowVectors<'_, T, MR, V, RI>
{
    #[inline(always)]
    fn put(&mut self, i: usize, values: [T; V]) {
        self.store(i, values);
    }
}

/// Anything else (a ragged channel tile, `K` not a multiple of the vector,
/// a misaligned buffer): element by element.
impl<T: Copy, const MR: usize, const V: usize, const RI: usize> StripOut<T, V>
    for MicroTile<'_, T, MR, V, RI, 1>
{
    #[inline(always)]
    fn put(&mut self, i: usize, values: [T; V]) {
        unroll::unroll::<V>(
            #[inline(always)]
            |v| {
                if let Some(mut slot) = self.slot(i, v) {
                    slot.set(values[v]);
                }
            },
        );
    }
}

/// The NHWC block's filters and bias in shared memory as f32, read as
/// 16-byte vectors of 4: tap `tap` of the thread's channels at vectors
/// `tap·per_tap + first ..`, the bias at tap 9's.
struct Filters<const V: usize, const CT: usize> {
    windows: SharedVectorWindows<f32, 4, NHWC_FILTER_REACH>,
    /// The thread's first channel / 4.
    first: usize,
}

impl<const V: usize, const CT: usize> Filters<V, CT> {
    /// Vectors per tap.
    const PER_TAP: usize = CT / 4;

    /// The thread's `V` channels of tap `tap` (`≤ 9`: 9 is the bias).
    #[inline(always)]
    fn tap(&self, tap: usize) -> [f32; V] {
        let w = self.windows.at(tap * Self::PER_TAP + self.first);
        unroll::array(
            #[inline(always)]
            |v| w.load(v / 4)[v % 4],
        )
    }

    /// Filter row r's first `taps` taps, then (unused: the strip reads
    /// only taps `s < taps`) whatever follows them: one window, 3·V/4
    /// vector loads at constant offsets but for the row's start.
    #[inline(always)]
    fn row(&self, r: usize, taps: usize) -> [[f32; V]; NHWC_STRIP_TAPS] {
        let w = self.windows.at(r * taps * Self::PER_TAP + self.first);
        unroll::array(
            #[inline(always)]
            |s| {
                unroll::array(
                    #[inline(always)]
                    |v| w.load(s * Self::PER_TAP + v / 4)[v % 4],
                )
            },
        )
    }

    /// The thread's `V` channels of the bias (zeros without one).
    #[inline(always)]
    fn bias(&self) -> [f32; V] {
        self.tap(DW_TAPS)
    }
}

/// What the NHWC kernel's step loop needs to stage input rows
/// ([`walk_steps`]): block-uniform but for the thread's id.
struct Stage<'a, T: Plain, const V: usize> {
    g: Geometry,
    x: Global<'a, T>,
    x_vectors: Global<'a, Vector16<T, V>>,
    /// Rows as whole aligned vectors (else element loads).
    vector: bool,
    smem: shared::SharedArray<T>,
    /// Pixels `m0 .. m_end` of the block's tile; output channels `k0 ..
    /// k_end`; the first row of the image in the input.
    m0: usize,
    m_end: usize,
    k0: usize,
    k_end: usize,
    image_row: usize,
    /// Ring rows, pixels per ring row, the left zero columns.
    ring: usize,
    row_px: usize,
    left: usize,
    /// The thread's id, channel vector and strip row.
    t: usize,
    group: usize,
    strip_row: usize,
}

/// Where input row `ih ≥ lo` sits in the ring: slot `ih % ring = (ih − lo
/// + lo % ring)` wrapped once (in 32 bits, as `div_u32`).
#[derive(Clone, Copy)]
struct RingSlots {
    lo: u32,
    lo_slot: u32,
    ring: u32,
}

impl RingSlots {
    #[inline(always)]
    fn of(&self, ih: usize) -> usize {
        let slot = (ih as u32).wrapping_sub(self.lo) + self.lo_slot;
        (if slot >= self.ring {
            slot - self.ring
        } else {
            slot
        }) as usize
    }
}

/// One thread's strip in one step: pixels `m .. m + count`, rows `first ..`
/// of its micro-tile, channel vector `group`.
#[derive(Clone, Copy)]
struct StripAt {
    m: usize,
    count: usize,
    first: usize,
    group: usize,
    slots: RingSlots,
    /// Vectors per ring row.
    slot_vecs: usize,
}

/// The NHWC kernel's step loop: for each step of 224 pixels, stage the
/// input rows it reads that are not in the ring yet (a barrier before and
/// after), then run `compute` on the thread's strip, if it has one.
#[inline(always)]
fn walk_steps<
    T: Element + SharedElement + Plain,
    const V: usize,
    const CT: usize,
    O: StripOut<T, V>,
>(
    mine: &mut Option<O>,
    st: &Stage<'_, T, V>,
    mut compute: impl FnMut(&mut O, StripAt),
) {
    let g = &st.g;
    let c_all = g.groups;
    let ring0 = NHWC_FILTER_VECS * V;
    // The first input row not staged yet.
    let mut next_row = 0;
    for step in 0..(st.m_end - st.m0).div_ceil(NHWC_STEP) {
        // This step's pixels a .. a_end and the input rows lo .. hi they read.
        let a = st.m0 + step * NHWC_STEP;
        let a_end = st.m_end.min(a + NHWC_STEP);
        let (lo, hi) = input_rows(g, div_u32(a, g.q).0, div_u32(a_end - 1, g.q).0);
        let from = next_row.max(lo);
        if from < hi {
            // Rows from .. hi replace rows at least `ring` above them, which
            // no pixel from here on reads; wait until this step's readers
            // of the old rows are done, load, and wait for the load.
            sync_threads();
            for ih in from..hi {
                // Ring pixel of input column 0, and the input's pixel.
                let dst = div_u32(ih, st.ring).1 * st.row_px + st.left;
                let src = (st.image_row + ih) * g.w;
                if st.vector {
                    let mut u = st.t;
                    while u < g.w * NHWC_GROUPS {
                        let (iw, j) = (u / NHWC_GROUPS, u % NHWC_GROUPS);
                        let at = (src + iw) * c_all + st.k0 + j * V;
                        let v = st.x_vectors.load(at / V).map_or([T::ZERO; V], |v| v.0);
                        st.smem.store16::<V>(ring0 + (dst + iw) * CT + j * V, v);
                        u += DW_NHWC_THREADS;
                    }
                } else {
                    // Ring channel j is output channel k0 + j's input
                    // channel; zeros past K.
                    let mut u = st.t;
                    while u < g.w * CT {
                        let (iw, j) = (u / CT, u % CT);
                        let k = st.k0 + j;
                        let v = if k < st.k_end {
                            st.x.load((src + iw) * c_all + div_u32(k, g.kg).0)
                                .unwrap_or(T::ZERO)
                        } else {
                            T::ZERO
                        };
                        st.smem.store(ring0 + (dst + iw) * CT + j, v);
                        u += DW_NHWC_THREADS;
                    }
                }
            }
            sync_threads();
            next_row = hi;
        }
        let m = a + st.strip_row * NHWC_STRIP;
        if let Some(out) = mine.as_mut()
            && m < a_end
        {
            let at = StripAt {
                m,
                count: (a_end - m).min(NHWC_STRIP),
                first: step * NHWC_STRIP,
                group: st.group,
                slots: RingSlots {
                    lo: lo as u32,
                    lo_slot: div_u32(lo, st.ring).1 as u32,
                    ring: st.ring as u32,
                },
                slot_vecs: st.row_px * NHWC_GROUPS,
            };
            compute(out, at);
        }
    }
}

/// A strip run's filter-row windows ([`strip_runs`]): output row `p`, the
/// vector of window pixel 0 in ring slot 0.
struct RowStarts<'a> {
    g: &'a Geometry,
    at: &'a StripAt,
    p: usize,
    base: u32,
}

impl RowStarts<'_> {
    /// Filter row r's window start, `None` for an input row outside the
    /// image.
    #[inline(always)]
    fn start(&self, r: usize) -> Option<u32> {
        let g = self.g;
        let ih = (self.p * g.stride_h + r * g.dil_h).wrapping_sub(g.pad_top);
        (r < g.r && ih < g.h).then(|| self.base + (self.at.slots.of(ih) * self.at.slot_vecs) as u32)
    }
}

/// A strip on the register path: one run of `run` per output row the strip
/// touches (one unless it crosses a row end), each storing the outputs of
/// its row. In row p, output o is column `m + o − p·Q` (negative for the
/// previous row's outputs, whose windows then start up to 12 pixels before
/// the row: in the lead before the ring or the previous ring row, read and
/// discarded).
#[inline(always)]
fn strip_runs<T: Element, const V: usize, const CT: usize>(
    out: &mut impl StripOut<T, V>,
    at: &StripAt,
    g: &Geometry,
    filters: &Filters<V, CT>,
    mut run: impl FnMut(&RowStarts<'_>) -> [[f32; V]; NHWC_STRIP],
) {
    let (p_first, _) = div_u32(at.m, g.q);
    let p_last = div_u32(at.m + at.count - 1, g.q).0;
    for p in p_first..=p_last {
        let row_first = p * g.q;
        let col = (at.m as u32).wrapping_sub(row_first as u32) as i32;
        // Vector of window pixel 0 (ring column col·sw: ring column iw +
        // left holds input column iw, and left is the padding) in ring
        // slot 0.
        let base =
            NHWC_FILTER_VECS as i32 + col * (g.stride_w * NHWC_GROUPS) as i32 + at.group as i32;
        let acc = run(&RowStarts {
            g,
            at,
            p,
            base: base as u32,
        });
        let keep = row_first.saturating_sub(at.m)..(row_first + g.q - at.m).min(at.count);
        store_strip(out, at.first, keep, &acc, g, &filters.bias());
    }
}

/// Tiled depthwise NCHW convolution (module docs): `x` the input `N × C × H
/// × W`, `w` the filters `K × 1 × R × S` (`K = C·M`), `bias` (`K`, read only
/// when the geometry says so), `y` bound as `N·K` stacked `[P × Q]` planes.
/// Grid `⌈Q/64⌉ × ⌈P/64⌉ × N·K`, blocks of [`DW_THREADS`] threads (1-D),
/// dynamic shared memory as [`Geometry::dw_plan`] sizes it; another block
/// shape or a filter of more than [`DW_TAPS`] taps traps. `V`: outputs per
/// strip (a 16-byte vector), `RI`: strips per thread ([`NchwStrips`]).
///
/// f32 here, held to 80 registers (3 blocks of 256 threads per SM, no
/// spills), f16/bf16 in [`conv2d_depthwise_nchw_half`], held to 104 (2
/// blocks; 80 spills 64 bytes there): one body (`nchw_tile`), two entries
/// for the two register limits. Uncapped, ptxas gave the kernel with the
/// staged output path 98 (f32) to 173 (f16) registers, most of them
/// loads of the general path's 8 × 9 taps in flight at once.
#[kernel(
    max_threads = 256,
    max_registers = 80,
    instances(conv2d_depthwise_nchw_f32 = <f32, 4, 4>)
)]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_depthwise_nchw<
    T: Element + SharedElement + Plain,
    const V: usize,
    const RI: usize,
>(
    x: Global<T>,
    w: Global<T>,
    bias: Global<T>,
    y: OutMatrix<T, NchwStrips<V, RI>>,
    hw: u64,
    rs: u64,
    pq: u64,
    stride: u64,
    pad: u64,
    dil: u64,
    chans: u64,
    groups: u64,
) {
    nchw_tile(x, w, bias, y, [hw, rs, pq, stride, pad, dil, chans, groups]);
}

/// [`conv2d_depthwise_nchw`] for f16 and bf16 (8-element strips), held to
/// 104 registers.
#[kernel(
    max_threads = 256,
    max_registers = 104,
    instances(
        conv2d_depthwise_nchw_f16 = <f16, 8, 2>,
        conv2d_depthwise_nchw_bf16 = <bf16, 8, 2>,
    )
)]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_depthwise_nchw_half<
    T: Element + SharedElement + Plain,
    const V: usize,
    const RI: usize,
>(
    x: Global<T>,
    w: Global<T>,
    bias: Global<T>,
    y: OutMatrix<T, NchwStrips<V, RI>>,
    hw: u64,
    rs: u64,
    pq: u64,
    stride: u64,
    pad: u64,
    dil: u64,
    chans: u64,
    groups: u64,
) {
    nchw_tile(x, w, bias, y, [hw, rs, pq, stride, pad, dil, chans, groups]);
}

/// The NCHW kernels' body ([`conv2d_depthwise_nchw`]): one block's tile,
/// the geometry in its eight [`Geometry::pack`] words.
#[inline(always)]
fn nchw_tile<T: Element + SharedElement + Plain, const V: usize, const RI: usize>(
    x: Global<T>,
    w: Global<T>,
    bias: Global<T>,
    mut y: OutMatrix<T, NchwStrips<V, RI>>,
    words: [u64; 8],
) {
    const {
        assert!(
            V * core::mem::size_of::<T>() == 16
                && RI * V * DW_THREADS == DW_NCHW_ROWS * DW_NCHW_COLS
                && NCHW_FILTER.is_multiple_of(V)
                && nchw_window_vectors(V, 2) <= NCHW_REACH
        )
    };
    let g = Geometry::unpack(words);
    let taps = g.r * g.s;
    assert!(
        thread::block_dim().volume() == DW_THREADS as u64 && taps <= DW_TAPS,
        "conv2d_depthwise_nchw: 256 threads per block and at most 9 filter taps"
    );
    let (z, batch_rows) = y.batch();
    let block = thread::block_idx();
    let k_all = g.groups * g.kg;
    let (p0, q0) = (
        block.y as usize * DW_NCHW_ROWS,
        block.x as usize * DW_NCHW_COLS,
    );
    if p0 >= batch_rows || q0 >= g.q || k_all == 0 {
        return; // the whole block: nothing of the output is its
    }
    // Plane z = n·K + k reads input channel k / M of image n.
    let (n, k) = div_u32(z, k_all); // N·K ≤ 65535: the grid's z
    let plane = (n * g.groups + k / g.kg) * g.h * g.w;
    // The tile: tp × tq outputs from (p0, q0); its window, rows × pitch
    // elements from input (row0, col0) minus the padding.
    let (tp, tq) = (
        batch_rows.min(p0 + DW_NCHW_ROWS) - p0,
        g.q.min(q0 + DW_NCHW_COLS) - q0,
    );
    let (rows, pitch) = g.dw_nchw_window(tp, tq, V);
    let (row0, col0) = (p0 * g.stride_h, q0 * g.stride_w);
    let t = thread::linear_thread_id() as usize;
    let smem = shared::dynamic::<T>();

    // The filter's taps and the bias.
    if t < taps {
        smem.store(t, w.load(k * taps + t).unwrap_or(T::ZERO));
    } else if t == DW_TAPS && g.bias {
        smem.store(t, bias.load(k).unwrap_or(T::ZERO));
    }
    // The window: zeros first (16-byte stores: it starts on a vector
    // boundary and is whole vectors long), then, after a barrier, its part
    // inside the image over them — the padding is never read from global
    // memory.
    let mut u = t;
    while u < rows * pitch / V {
        smem.store16::<V>(NCHW_FILTER + u * V, [T::ZERO; V]);
        u += DW_THREADS;
    }
    // The input rows ih_lo .. ih_hi and columns iw_lo .. iw_hi the window
    // holds; input (ih, iw) is window element (ih + pad_top − row0, iw +
    // pad_left − col0).
    let (ih_lo, ih_hi) = input_rows(&g, p0, p0 + tp - 1);
    let iw_lo = col0.saturating_sub(g.pad_left).min(g.w);
    let iw_hi = (col0 + pitch).saturating_sub(g.pad_left).min(g.w);
    // (Wrapping: meaningless, and unused, when no input is inside.)
    let corner = (ih_lo + g.pad_top)
        .wrapping_sub(row0)
        .wrapping_mul(pitch)
        .wrapping_add(NCHW_FILTER);
    // The image's plane: every offset into it below H·W (32 bits: the host
    // takes only planes below 2³² elements).
    let Some(xp) = x.get_range(plane..plane + g.h * g.w) else {
        return; // the whole block: an input shorter than the geometry
    };
    let (head, xv) = xp.vectors16::<V>();
    sync_threads();
    if head == 0 && g.w.is_multiple_of(V) {
        // Whole rows of aligned vectors (decided once, for the block): the
        // vectors covering iw_lo .. iw_hi, each one 16-byte load, its
        // elements stored where they fall in the window (the padding
        // shifts them off the shared vectors' boundaries), those past its
        // columns not at all.
        let (jv_lo, jv_hi) = (iw_lo / V, iw_hi.div_ceil(V));
        // Window column of vector jv_lo's first element (wrapping: below 0
        // when it lies left of the window).
        let wc0 = (jv_lo * V + g.pad_left).wrapping_sub(col0) as u32;
        let row_vecs = (g.w / V) as u32;
        let first = (ih_lo * g.w / V + jv_lo) as u32;
        walk_2d(
            t as u32,
            (jv_hi - jv_lo) as u32,
            (ih_hi - ih_lo) as u32,
            #[inline(always)]
            |r, c| {
                let v = xv
                    .load((first + r * row_vecs + c) as usize)
                    .map_or([T::ZERO; V], |v| v.0);
                let wc = wc0.wrapping_add(c * V as u32);
                let at = corner + (r * pitch as u32) as usize;
                unroll::unroll::<V>(
                    #[inline(always)]
                    |e| {
                        let col = wc.wrapping_add(e as u32);
                        if col < pitch as u32 {
                            smem.store(at + col as usize, v[e]);
                        }
                    },
                );
            },
        );
    } else {
        // Element by element (a width that is not a multiple of the
        // vector, a misaligned plane).
        let first = (ih_lo * g.w + iw_lo) as u32;
        let at0 = corner.wrapping_add((iw_lo + g.pad_left).wrapping_sub(col0));
        walk_2d(
            t as u32,
            (iw_hi - iw_lo) as u32,
            (ih_hi - ih_lo) as u32,
            #[inline(always)]
            |r, c| {
                let v = xp
                    .load((first + r * g.w as u32 + c) as usize)
                    .unwrap_or(T::ZERO);
                smem.store(at0 + (r * pitch as u32 + c) as usize, v);
            },
        );
    }
    sync_threads();
    let wr: [f32; DW_TAPS] = core::array::from_fn(|tap| {
        if tap < taps {
            smem.load(tap).to_f32()
        } else {
            0.0
        }
    });
    // Without a bias it is +0, and `acc + 0` is `acc` (an FMA chain from +0
    // never ends at −0), so the epilogue adds it unconditionally.
    let b = if g.bias {
        smem.load(DW_TAPS).to_f32()
    } else {
        0.0
    };
    let (Some(windows), Some(elements), Some(stage_vectors)) = (
        smem.vector_windows::<V, NCHW_REACH>(),
        smem.windows::<1>(),
        smem.vector_windows::<V, 1>(),
    ) else {
        return;
    };
    // The thread's strips: rows pr + i·(64 / RI) of the tile (those below
    // tp), columns pc .. pc + V; none where its first is outside the tile.
    let (pr, pc) = nchw_strip_origin(t, V);
    let strips = if pr < tp && pc < tq {
        (tp - pr).div_ceil(DW_NCHW_ROWS / RI).min(RI)
    } else {
        0
    };
    let nchw = NchwStrip {
        g,
        wr,
        b,
        pitch,
        // Vector of the window element strip 0's output 0 reads at tap (0, 0),
        // and vectors between a thread's strips (64 / RI output rows).
        first: (NCHW_FILTER + pr * g.stride_h * pitch + pc * g.stride_w) / V,
        strip_step: DW_NCHW_ROWS / RI * g.stride_h * pitch / V,
        strips,
        tap_at: tap_offsets(&g, pitch),
        windows,
        elements,
    };
    // The paths, each its own loop nest (decided once, for the whole
    // block): the strip path where a row's taps are consecutive input
    // columns (dilation 1 along rows, stride 1 or 2, 3-wide filters of up
    // to 3 rows), the general path otherwise.
    let path = match (
        g.stride_w,
        g.dil_w == 1 && g.s == NCHW_STRIP_TAPS && g.r <= NCHW_STRIP_TAPS,
    ) {
        (1, true) => NchwPath::Strip1,
        (2, true) => NchwPath::Strip2,
        _ => NchwPath::General,
    };
    // How the block writes its tile (decided once, for the whole block):
    // each strip one 16-byte store where the tile's rows are whole aligned
    // vectors, else through the block's stage.
    match y.tile_stores() {
        None => {}
        Some(TileStores::Vectors(mut out)) => nchw.run(&mut out, path),
        Some(TileStores::Staged(mut tile)) => {
            // The stage: tp rows of `stage_pitch` elements after the window
            // (both whole vectors from a vector boundary), each strip one
            // 16-byte shared store; after a barrier the block writes the
            // tile from it element by element, lined up on 32-byte sectors
            // (`StagedTile::fill`): each sector of the output one store,
            // where per-thread element stores of the strips wrote it once
            // per element of it.
            let (_, stage_pitch) = g.dw_nchw_stage(tp, tq, V);
            let stage0 = NCHW_FILTER + rows * pitch;
            if stage0 + tp * stage_pitch > smem.len() {
                return; // the whole block: a launch `dw_plan` did not size
            }
            let mut stage = StagedStrips {
                windows: stage_vectors,
                first: (stage0 + pr * stage_pitch + pc) / V,
                step: DW_NCHW_ROWS / RI * stage_pitch / V,
            };
            match path {
                NchwPath::Strip1 => nchw.each(&mut stage, |at| nchw.strip::<1>(at)),
                NchwPath::Strip2 => nchw.each(&mut stage, |at| nchw.strip::<2>(at)),
                NchwPath::General => {
                    // No stage: the general path loads each tap of each
                    // output from the window anyway, so the walk computes
                    // each output where it writes it (its strips through
                    // the stage took ptxas to 118–196 registers, the 36
                    // tap addresses of a strip held across the strips,
                    // where 78–108 fit).
                    tile.fill(
                        #[inline(always)]
                        |r, c| nchw.general_one(r, c),
                    );
                    return;
                }
            }
            sync_threads();
            tile.fill(
                #[inline(always)]
                |r, c| elements.at(stage0 + r * stage_pitch + c).load(0),
            );
        }
    }
}

/// An NCHW block's output stage in shared memory ([`NchwStrips`]): the
/// thread's strip `i` at vector `first + i·step`.
struct StagedStrips<T, const V: usize> {
    windows: SharedVectorWindows<T, V, 1>,
    first: usize,
    step: usize,
}

impl<T: SharedElement, const V: usize> StripOut<T, V> for StagedStrips<T, V> {
    #[inline(always)]
    fn put(&mut self, i: usize, values: [T; V]) {
        self.windows.at(self.first + i * self.step).store(0, values);
    }
}

/// Which loop nest an NCHW block runs (decided once per block).
#[derive(Clone, Copy)]
enum NchwPath {
    /// The strip path at stride 1 or 2.
    Strip1,
    Strip2,
    /// Any stride, dilation and filter of up to 9 taps.
    General,
}

/// What an NCHW thread's strips need: the geometry, the taps and bias as
/// f32, the window's pitch, where the first strip's window starts (in
/// vectors), the vectors between strips, how many strips the thread has,
/// and the window as vectors (the strip path) and elements (the general
/// path).
struct NchwStrip<T, const V: usize> {
    g: Geometry,
    wr: [f32; DW_TAPS],
    b: f32,
    pitch: usize,
    first: usize,
    strip_step: usize,
    strips: usize,
    /// Each tap's offset in the window from its output's first element
    /// (the general path).
    tap_at: [u32; DW_TAPS],
    windows: SharedVectorWindows<T, V, NCHW_REACH>,
    elements: SharedWindows<T, 1>,
}

impl<T: Element + SharedElement, const V: usize> NchwStrip<T, V> {
    /// Runs the thread's strips on `path`, storing each through `out` (the
    /// thread's micro-tile; `None`: it owns no output).
    #[inline(always)]
    fn run(&self, out: &mut Option<impl StripOut<T, V>>, path: NchwPath) {
        let Some(out) = out.as_mut() else { return };
        match path {
            NchwPath::Strip1 => self.each(out, |at| self.strip::<1>(at)),
            NchwPath::Strip2 => self.each(out, |at| self.strip::<2>(at)),
            NchwPath::General => self.each(out, |at| self.general(at)),
        }
    }

    /// The strip loop: for each of the thread's strips (`i`, its window's
    /// first vector `at`), `compute`, then the epilogue (`+ bias`, ReLU, one
    /// rounding) and one [`StripOut::put`].
    #[inline(always)]
    fn each(&self, out: &mut impl StripOut<T, V>, mut compute: impl FnMut(usize) -> [f32; V]) {
        let g = Geometry {
            bias: true,
            ..self.g
        };
        let mut at = self.first;
        for i in 0..self.strips as u32 {
            let acc = compute(at);
            out.put(
                i as usize,
                unroll::array(
                    #[inline(always)]
                    |v| T::from_f32(g.finish(acc[v], self.b)),
                ),
            );
            at += self.strip_step;
        }
    }

    /// A strip of `V` outputs at stride `SW` (1 or 2) of a 3-wide filter,
    /// its window's first vector `at`: per filter row, the row's `(V − 1)·
    /// SW + 3` input columns as whole vectors from shared memory, each
    /// element converted to f32 once and used by every tap that reads it;
    /// each output's taps in `(r, s)` order, every index a constant.
    #[inline(always)]
    fn strip<const SW: usize>(&self, at: usize) -> [f32; V] {
        let nv = const { nchw_window_vectors(V, SW) };
        let row_vectors = self.g.dil_h * self.pitch / V;
        let mut acc = [0.0f32; V];
        unroll::unroll::<NCHW_STRIP_TAPS>(
            #[inline(always)]
            |r| {
                if r >= self.g.r {
                    return;
                }
                let row = self.windows.at(at + r * row_vectors);
                // Input column i = NCHW_REACH·hi + lo of the row's window,
                // written out; output o reads column SW·o + s at tap s.
                let mut x = [0.0f32; NCHW_REACH * 8];
                unroll::unroll::<NCHW_REACH>(
                    #[inline(always)]
                    |j| {
                        if j < nv {
                            let raw = row.load(j);
                            unroll::unroll::<V>(
                                #[inline(always)]
                                |e| {
                                    if j * V + e < (V - 1) * SW + NCHW_STRIP_TAPS {
                                        x[j * V + e] = raw[e].to_f32();
                                    }
                                },
                            );
                        }
                    },
                );
                unroll::unroll2::<V, NCHW_STRIP_TAPS>(
                    #[inline(always)]
                    |o, s| {
                        acc[o] =
                            num::fma_f32(x[SW * o + s], self.wr[r * NCHW_STRIP_TAPS + s], acc[o])
                    },
                );
            },
        );
        acc
    }

    /// Output `(r, c)` of the tile on the general path, rounded: its taps
    /// in `(r, s)` order from +0, each one shared load from the window,
    /// then the epilogue — the bits [`general`](Self::general) and the
    /// strip's epilogue give it.
    #[inline(always)]
    fn general_one(&self, r: usize, c: usize) -> T {
        let g = &self.g;
        let taps = g.r * g.s;
        let first = (NCHW_FILTER + r * g.stride_h * self.pitch + c * g.stride_w) as u32;
        let mut acc = 0.0f32;
        // Written out: every tap's index a constant (the taps in registers).
        for tap in 0..DW_TAPS {
            if tap < taps {
                let v = self
                    .elements
                    .at((first + self.tap_at[tap]) as usize)
                    .load(0);
                acc = num::fma_f32(v.to_f32(), self.wr[tap], acc);
            }
        }
        T::from_f32(Geometry { bias: true, ..*g }.finish(acc, self.b))
    }

    /// The general path's strip (any stride, dilation and filter of up to
    /// 9 taps): output by output, tap by tap in `(r, s)` order, each tap a
    /// fixed offset from the output's window position (`tap_at`), one
    /// shared load per tap and output, from its window's first vector `at`.
    #[inline(always)]
    fn general(&self, at: usize) -> [f32; V] {
        let g = &self.g;
        let taps = g.r * g.s;
        let mut acc = [0.0f32; V];
        unroll::unroll::<V>(
            #[inline(always)]
            |o| {
                let first = (at * V + o * g.stride_w) as u32;
                // A loop of 9 the compiler writes out: every tap's index a
                // constant, so the taps stay in registers.
                for tap in 0..DW_TAPS {
                    if tap < taps {
                        let v = self
                            .elements
                            .at((first + self.tap_at[tap]) as usize)
                            .load(0);
                        acc[o] = num::fma_f32(v.to_f32(), self.wr[tap], acc[o]);
                    }
                }
            },
        );
        acc
    }
}
