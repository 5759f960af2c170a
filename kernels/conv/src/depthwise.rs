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
//! q)`) × [`DW_NHWC_CHANNELS`] output channels, walked 56 pixels a step:
//! lane = channel, each warp a strip of 7 consecutive pixels ([`NhwcTiles`]).
//! The input rows those pixels read live in a ring of
//! [`Geometry::dw_nhwc_ring_rows`] rows × 32 channels in shared memory,
//! each row the image's columns between zero columns for the padding
//! ([`Geometry::dw_nhwc_pad_cols`], written once): walking down the image
//! the block loads each input row it needs once (the next rows as the
//! window moves down, a barrier before and after each load), so a block
//! re-reads only the `(R − 1)·dh` halo rows above its first output row.
//! Rows are loaded as whole 16-byte channel vectors (`Global::vectors16`)
//! when the block stages a whole tile of aligned channels — `C` and the
//! first channel a multiple of the vector, 32 channels, the buffer aligned —
//! checked once per block; element loads otherwise (ragged channel counts,
//! multipliers, a misaligned buffer).
//!
//! Where a strip lies in one output row and its taps are consecutive input
//! pixels (dilation 1 along rows, stride 1 or 2, up to 3 × 3: decided once
//! per block, and per strip for the row), each thread loads a window of 9
//! (stride 2: 15) input pixels of its channel per filter row into registers
//! (`SharedWindows`: one clamp per row, no check per load) and runs the
//! strip's 7 × 3 multiply-adds from them, reading each input element once
//! per filter row instead of once per tap; other strips (row ends, larger
//! strides, dilations, larger filters) go output by output, tap by tap.
//!
//! **NCHW** (`conv2d_depthwise_nchw_{f32,f16,bf16}`): the output is `N·K`
//! stacked `[P × Q]` planes (batch `z = n·K + k`), each block owning a
//! [`DW_NCHW_ROWS`] × [`DW_NCHW_COLS`] tile of one plane, its threads
//! walking the tile's outputs packed row-major ([`NchwTiles`]); it stages
//! the input window the tile reads in shared memory in one pass,
//! consecutive threads on consecutive input elements, the padding as zeros
//! (never read from global memory), so that every tap of every output is
//! one unconditional shared load at a fixed offset. Where the tile spans
//! whole rows (planes at most 64 wide) its input and its output are each
//! one contiguous run, read and written in whole sectors.
//!
//! Each output is one f32 fused multiply-add chain over the taps in `(r,
//! s)` order, then the epilogue (`Geometry::finish`): the same bits as
//! the direct kernel for finite filters (padding columns are zeros both
//! tiled kernels multiply, `0·w`, where the direct kernel skips the tap: an
//! infinite or NaN weight over padding gives NaN here, as with cuDNN's
//! zero-filled padding).

use super::{Element, Geometry};
use warpforge_device::global::Plain;
use warpforge_device::own::{BlockTiles, MicroTiles};
use warpforge_device::shared::{self, SharedElement, SharedWindows};
use warpforge_device::sync::sync_threads;
use warpforge_device::thread::WARP_SIZE;
use warpforge_device::{Global, OutMatrix, bf16, f16, num, thread};
use warpforge_macros::kernel;

/// Threads per block of the tiled depthwise kernels (1-D).
pub const DW_THREADS: usize = 256;
/// Most filter taps (`R·S`) the tiled kernels keep in registers.
pub const DW_TAPS: usize = 9;
/// NHWC: output pixels each thread computes per step, consecutive along a
/// row (its registers slide one input row window across them).
const NHWC_STRIP: usize = 7;
/// NHWC: output channels per block tile, one per lane.
pub const DW_NHWC_CHANNELS: usize = 32;
/// NHWC: pixels a block computes per step: a strip per warp.
const NHWC_STEP: usize = DW_THREADS / DW_NHWC_CHANNELS * NHWC_STRIP;
/// NHWC: output pixels per block tile (16 steps).
pub const DW_NHWC_PIXELS: usize = NHWC_STEP * 16;
/// NHWC: filter rows and columns the strip path unrolls (3 × 3 and smaller).
const NHWC_STRIP_TAPS: usize = 3;
/// NHWC: input pixels a strip's row window spans at stride `sw` (1 or 2):
/// `sw·(7 − 1) + 3`.
const fn nhwc_window(sw: usize) -> usize {
    sw * (NHWC_STRIP - 1) + NHWC_STRIP_TAPS
}
/// NHWC: elements a strip's row window reaches from its first, at the
/// widest stride the strip path takes (2): its last pixel's channel,
/// `(nhwc_window(2) − 1)` pixels of 32 channels on.
const NHWC_REACH: usize = (nhwc_window(2) - 1) * DW_NHWC_CHANNELS + 1;
/// NHWC: elements of the filter area at the start of shared memory (the
/// block's 32 channels, [`filter_stride`] ≤ 10 elements apart; a multiple
/// of 8, so the ring after it starts 16-byte aligned for every element
/// type).
const NHWC_FILTER: usize = DW_NHWC_CHANNELS * (DW_TAPS + 1);

/// Elements between two channels' filters in the NHWC kernel's shared
/// memory: at least `taps`, an odd number of 4-byte words (so 32 lanes
/// reading one tap of 32 channels hit 32 banks): 9 for f32 3 × 3 filters,
/// 10 for f16 and bf16; at most `DW_TAPS + 1`.
#[inline(always)]
fn filter_stride<T>(taps: usize) -> usize {
    let size = core::mem::size_of::<T>();
    let words = (taps * size).div_ceil(4) | 1;
    words * 4 / size
}
/// NCHW: output rows and columns per block tile.
pub const DW_NCHW_ROWS: usize = 16;
pub const DW_NCHW_COLS: usize = 64;
/// NCHW: the filter's taps and the bias at the start of shared memory,
/// padded to 16 elements.
const NCHW_FILTER: usize = 16;
/// The largest shared memory the host gives a tiled depthwise block: what
/// every CUDA GPU provides without opting in.
pub const DW_MAX_SHARED_BYTES: usize = 48 * 1024;
/// The largest grid y and z.
const GRID_YZ: usize = 65535;

const _: () = assert!(DW_TAPS < NCHW_FILTER && NHWC_FILTER.is_multiple_of(8));

/// The NHWC output mapping: block tiles of `DW_NHWC_PIXELS` pixels × 32
/// channels, walked in steps of 56 pixels; in each step the thread with
/// linear id `t` owns channel `t % 32` of the strip of 7 pixels from
/// `7·(t / 32)`.
pub type NhwcTiles =
    MicroTiles<DW_NHWC_PIXELS, DW_NHWC_CHANNELS, NHWC_STRIP, 1, { DW_NHWC_PIXELS / NHWC_STEP }, 1>;

/// The NCHW output mapping: block tiles of 16 × 64 outputs of one plane,
/// the threads walking the tile's part inside the plane packed row-major
/// (thread `t` owning elements `t + 256·i`), so a tile of whole rows — any
/// plane at most 64 wide — is stored as one contiguous run, not row by row
/// straddling sectors.
pub type NchwTiles = BlockTiles<DW_NCHW_ROWS, DW_NCHW_COLS>;

/// How the host launches a tiled depthwise kernel ([`Geometry::dw_plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DwPlan {
    /// Blocks along x, y and z.
    pub grid: (u32, u32, u32),
    /// Dynamic shared memory per block.
    pub shared_bytes: u32,
}

impl Geometry {
    /// Rows of the NHWC kernel's input ring: enough for the input rows of
    /// any 56 consecutive output pixels (`≤ 55/Q + 2` output rows, so
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

    /// Elements of one NHWC ring row: its pixels, zero columns included, ×
    /// 32 channels (`None` on overflow: the host then runs the direct
    /// kernel, so the tiled kernel never sees it).
    #[inline(always)]
    pub fn dw_nhwc_row_len(&self) -> Option<usize> {
        let (left, right) = self.dw_nhwc_pad_cols();
        left.checked_add(self.w)?
            .checked_add(right)?
            .checked_mul(DW_NHWC_CHANNELS)
    }

    /// The NCHW kernel's input window, `(rows, columns)`: what a 16 × 64
    /// output tile (at most `P × Q`) reads, padding included.
    #[inline(always)]
    pub fn dw_nchw_window(&self) -> (usize, usize) {
        let (tp, tq) = (
            DW_NCHW_ROWS.min(self.p.max(1)),
            DW_NCHW_COLS.min(self.q.max(1)),
        );
        (
            (tp - 1) * self.stride_h + (self.r.max(1) - 1) * self.dil_h + 1,
            (tq - 1) * self.stride_w + (self.s.max(1) - 1) * self.dil_w + 1,
        )
    }

    /// The NCHW window's row pitch in shared memory, for an output tile of
    /// `tile_cols` columns whose window is `cols` wide, with `elem_bytes`-byte
    /// elements: `cols`, except where the tile is whole output rows (then a
    /// warp's packed walk crosses row ends): the first pitch from `cols` on
    /// with `pitch ≡ Q·sw + e` modulo the 32 banks' 128 bytes, so a row's
    /// first output reads one stride past the previous row's last and a
    /// warp's taps stay on distinct banks across the row end; `e = 4 /
    /// elem_bytes − 1` elements more for elements narrower than a bank word
    /// (two f16 lanes share a word only if it is one word: a row end in
    /// mid-word would put the next row's first element in the same bank,
    /// another word).
    #[inline(always)]
    pub fn dw_nchw_pitch(&self, tile_cols: usize, cols: usize, elem_bytes: usize) -> usize {
        let period = 128 / elem_bytes.max(1);
        if tile_cols != self.q || self.stride_h != 1 {
            return cols;
        }
        let skip = (4 / elem_bytes.max(1)).saturating_sub(1);
        let want = ((self.q % period) * (self.stride_w % period) + skip) % period;
        cols + (want + period - cols % period) % period
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
        let (grid, elems) = if nhwc {
            // The filters, the ring, and what a strip's window in the last
            // ring row reaches past its end (never read: a window is as
            // wide as the widest stride and filter the strip path takes).
            let row_len = self.dw_nhwc_row_len()?;
            let last_start = self
                .q
                .saturating_sub(NHWC_STRIP)
                .checked_mul(self.stride_w)?
                .checked_mul(DW_NHWC_CHANNELS)?
                .checked_add(DW_NHWC_CHANNELS - 1)?;
            let tail = (last_start + NHWC_REACH).saturating_sub(row_len);
            let elems = self
                .dw_nhwc_ring_rows()
                .checked_mul(row_len)?
                .checked_add(NHWC_FILTER + tail)?;
            let pixels = self.p.checked_mul(self.q)?;
            // The kernel's pixel and row indices in 32 bits (`div_u32`).
            u32::try_from(pixels.max(self.h)).ok()?;
            let grid = (
                k_all.div_ceil(DW_NHWC_CHANNELS),
                pixels.div_ceil(DW_NHWC_PIXELS),
                n,
            );
            (grid, elems)
        } else {
            let (rows, cols) = self.dw_nchw_window();
            let pitch = self.dw_nchw_pitch(DW_NCHW_COLS.min(self.q), cols, elem_bytes);
            let elems = rows.checked_mul(pitch)?.checked_add(NCHW_FILTER)?;
            let grid = (
                self.q.div_ceil(DW_NCHW_COLS),
                self.p.div_ceil(DW_NCHW_ROWS),
                n.checked_mul(k_all)?,
            );
            (grid, elems)
        };
        let bytes = elems.checked_mul(elem_bytes)?;
        if bytes > DW_MAX_SHARED_BYTES || grid.1 > GRID_YZ || grid.2 > GRID_YZ {
            return None;
        }
        Some(DwPlan {
            grid: (u32::try_from(grid.0).ok()?, grid.1 as u32, grid.2 as u32),
            shared_bytes: bytes as u32,
        })
    }
}

/// A strip of 7 NHWC outputs at stride `SW` from the windows of its
/// filter rows, starting at `row_start(r)` (`None`: an input row outside
/// the image): output `o` takes tap `(r, s)`, `s < taps`, from pixel `SW·o + s`
/// of row r's window, each window's `WIN = SW·6 + 3` pixels (those `taps`
/// needs) loaded into registers once; every index a constant, the taps in
/// `(r, s)` order.
#[inline(always)]
fn strip<T: Element + SharedElement, const SW: usize, const WIN: usize>(
    windows: SharedWindows<T, NHWC_REACH>,
    row_start: impl Fn(usize) -> Option<u32>,
    taps: usize,
    weights: &[[f32; NHWC_STRIP_TAPS]; NHWC_STRIP_TAPS],
) -> [f32; NHWC_STRIP] {
    const { assert!(WIN == nhwc_window(SW) && (WIN - 1) * DW_NHWC_CHANNELS < NHWC_REACH) };
    let mut acc = [0.0f32; NHWC_STRIP];
    for (r, wr) in weights.iter().enumerate() {
        let Some(start) = row_start(r) else { continue };
        let row = windows.at(start as usize);
        let mut xs = [0.0f32; WIN];
        for (i, xi) in xs.iter_mut().enumerate() {
            if i < SW * (NHWC_STRIP - 1) + taps {
                *xi = row.load(i * DW_NHWC_CHANNELS).to_f32();
            }
        }
        for (s, &wt) in wr.iter().enumerate() {
            if s < taps {
                for (o, acc) in acc.iter_mut().enumerate() {
                    *acc = num::fma_f32(xs[SW * o + s], wt, *acc);
                }
            }
        }
    }
    acc
}

/// `(a / b, a % b)` in 32 bits (a few instructions, where 64-bit division
/// is a call of about 70): for the NHWC kernel's pixel and row indices,
/// which fit (`Geometry::dw_plan` takes only images of `P·Q` and `H` below
/// 2³²; any other launch gets wrong indices, never an out-of-bounds
/// access: its loads are checked or clamped and its writes owned).
#[inline(always)]
fn div_u32(a: usize, b: usize) -> (usize, usize) {
    let (a, b) = (a as u32, (b as u32).max(1));
    ((a / b) as usize, (a % b) as usize)
}

/// Each tap's row and column offsets `(r·dh, s·dw)`, `(r, s)` row-major,
/// for the first `R·S` of [`DW_TAPS`].
#[inline(always)]
fn tap_offsets(g: &Geometry) -> ([usize; DW_TAPS], [usize; DW_TAPS]) {
    let (mut dh, mut dw) = ([0; DW_TAPS], [0; DW_TAPS]);
    let s = g.s.max(1);
    for tap in 0..DW_TAPS {
        dh[tap] = (tap / s) * g.dil_h;
        dw[tap] = (tap % s) * g.dil_w;
    }
    (dh, dw)
}

/// The input rows `lo .. hi` that output rows `p_lo ..= p_hi` read, clipped
/// to the image (`lo = hi` when they read none: all padding).
#[inline(always)]
fn input_rows(g: &Geometry, p_lo: usize, p_hi: usize) -> (usize, usize) {
    let hi =
        g.h.min((p_hi * g.stride_h + (g.r - 1) * g.dil_h + 1).saturating_sub(g.pad_top));
    (hi.min((p_lo * g.stride_h).saturating_sub(g.pad_top)), hi)
}

/// The input columns `lo .. hi` that output columns `q_lo ..= q_hi` read,
/// clipped to the image.
#[inline(always)]
fn input_cols(g: &Geometry, q_lo: usize, q_hi: usize) -> (usize, usize) {
    let hi =
        g.w.min((q_hi * g.stride_w + (g.s - 1) * g.dil_w + 1).saturating_sub(g.pad_left));
    (hi.min((q_lo * g.stride_w).saturating_sub(g.pad_left)), hi)
}

/// Tiled depthwise NHWC convolution (module docs): `x` the input `N × H × W
/// × C`, `w` the filters `K × R × S` (`K = C·M`), `bias` (`K`, read only when
/// the geometry says so), `y` bound as `N` stacked `[P·Q × K]` matrices.
/// Grid `⌈K/32⌉ × ⌈PQ/896⌉ × N` ([`DW_NHWC_PIXELS`] pixels a block), blocks
/// of [`DW_THREADS`] threads (1-D),
/// dynamic shared memory as [`Geometry::dw_plan`] sizes it; another block
/// shape or a filter of more than [`DW_TAPS`] taps traps.
#[kernel(
    max_threads = 256,
    min_blocks = 2,
    instances(
    conv2d_depthwise_nhwc_f32 = <f32, 4>,
    conv2d_depthwise_nhwc_f16 = <f16, 8>,
    conv2d_depthwise_nhwc_bf16 = <bf16, 8>,
))]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_depthwise_nhwc<T: Element + SharedElement + Plain, const V: usize>(
    x: Global<T>,
    w: Global<T>,
    bias: Global<T>,
    mut y: OutMatrix<T, NhwcTiles>,
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
    let taps = g.r * g.s;
    assert!(
        thread::block_dim().volume() == DW_THREADS as u64 && taps <= DW_TAPS,
        "conv2d_depthwise_nhwc: 256 threads per block and at most 9 filter taps"
    );
    let (_, batch_rows) = y.batch();
    let block = thread::block_idx();
    // Block-uniform: image n, pixels m0 .. m_end, output channels k0 .. k_end.
    let (n, m0, k0) = (
        block.z as usize,
        block.y as usize * DW_NHWC_PIXELS,
        block.x as usize * DW_NHWC_CHANNELS,
    );
    let (c_all, mult) = (g.groups, g.kg);
    let k_all = c_all * mult;
    let (m_end, k_end) = (
        batch_rows.min(m0 + DW_NHWC_PIXELS),
        k_all.min(k0 + DW_NHWC_CHANNELS),
    );
    if m0 >= m_end || k0 >= k_end {
        return; // the whole block: nothing of the output is its
    }
    // The input channels ci0 .. ci0 + ci_n those output channels read.
    let ci0 = k0 / mult;
    let ci_n = (k_end - 1) / mult + 1 - ci0;
    let t = thread::linear_thread_id() as usize;
    let (lane, warp) = (t % DW_NHWC_CHANNELS, t / DW_NHWC_CHANNELS);
    let smem = shared::dynamic::<T>();
    let ring = g.dw_nhwc_ring_rows();
    let (Some(row_len), (left, right)) = (g.dw_nhwc_row_len(), g.dw_nhwc_pad_cols()) else {
        return; // the whole block: a geometry `dw_plan` refuses
    };

    // The block's filters, `(k_end − k0)·R·S` contiguous elements, into
    // shared memory, channel j's at `j·fs` (an odd number of 4-byte words
    // apart, so a warp reads a tap of its 32 channels from 32 banks), and
    // every ring row's zero columns (never overwritten: input rows land
    // between them).
    let fs = filter_stride::<T>(taps);
    let mut u = t;
    while u < (k_end - k0) * taps {
        let (j, tap) = div_u32(u, taps);
        let v = w.load(k0 * taps + u).unwrap_or(T::ZERO);
        smem.store(j * fs + tap, v);
        u += DW_THREADS;
    }
    let zero_cols = (left + right) * DW_NHWC_CHANNELS;
    let mut u = t;
    while u < ring * zero_cols {
        let (slot, e) = div_u32(u, zero_cols);
        let col = if e < left * DW_NHWC_CHANNELS {
            e
        } else {
            e + g.w * DW_NHWC_CHANNELS
        };
        smem.store(NHWC_FILTER + slot * row_len + col, T::ZERO);
        u += DW_THREADS;
    }
    let k = k0 + lane;
    let mine_k = k < k_end;
    let b = if g.bias && mine_k {
        bias.load(k).map_or(0.0, T::to_f32)
    } else {
        0.0
    };
    // The input channel of output channel k, within the staged ones.
    let cl = if mine_k { k / mult - ci0 } else { 0 };
    sync_threads();
    // The strip path's taps in registers, (r, s) < 3 × 3.
    let mut w3 = [[0.0f32; NHWC_STRIP_TAPS]; NHWC_STRIP_TAPS];
    for (r, row) in w3.iter_mut().enumerate() {
        for (s, wt) in row.iter_mut().enumerate() {
            if r < g.r && s < g.s && mine_k {
                *wt = smem.load(lane * fs + r * g.s + s).to_f32();
            }
        }
    }
    // Strips of 7 outputs read one input-row window in registers where
    // each output's taps are consecutive input pixels (dilation 1 along
    // rows, stride 1 or 2, filters up to 3 × 3): decided once, for the
    // whole block.
    let strips = (g.stride_w == 1 || g.stride_w == 2)
        && g.dil_w == 1
        && g.r <= NHWC_STRIP_TAPS
        && g.s <= NHWC_STRIP_TAPS;
    let windows = smem.windows::<NHWC_REACH>();

    // Whole 16-byte vectors when the block stages a whole tile of channels
    // as aligned vectors: decided once, for the whole block.
    let (head, vectors) = x.vectors16::<V>();
    let vector =
        head == 0 && c_all.is_multiple_of(V) && ci0.is_multiple_of(V) && ci_n == DW_NHWC_CHANNELS;
    let image_row = n * g.h;

    let mut mine = y.micro_tile();
    // The first input row not staged yet.
    let mut next_row = 0;
    for step in 0..(m_end - m0).div_ceil(NHWC_STEP) {
        // This step's pixels a .. a_end and the input rows lo .. hi they read.
        let a = m0 + step * NHWC_STEP;
        let a_end = m_end.min(a + NHWC_STEP);
        let (lo, hi) = input_rows(&g, div_u32(a, g.q).0, div_u32(a_end - 1, g.q).0);
        let from = next_row.max(lo);
        if from < hi {
            // Rows from .. hi replace rows at least `ring` above them, which
            // no pixel from here on reads; wait until this step's readers
            // of the old rows are done, load, and wait for the load.
            sync_threads();
            for ih in from..hi {
                let dst = NHWC_FILTER + div_u32(ih, ring).1 * row_len + left * DW_NHWC_CHANNELS;
                let src = (image_row + ih) * g.w * c_all + ci0;
                if vector {
                    let per_pixel = DW_NHWC_CHANNELS / V;
                    let mut u = t;
                    while u < g.w * per_pixel {
                        let (iw, j) = (u / per_pixel, u % per_pixel);
                        let at = src + iw * c_all + j * V;
                        let v = vectors.load(at / V).map_or([T::ZERO; V], |v| v.0);
                        smem.store16::<V>(dst + iw * DW_NHWC_CHANNELS + j * V, v);
                        u += DW_THREADS;
                    }
                } else {
                    let mut u = t;
                    while u < g.w * ci_n {
                        let (iw, c) = div_u32(u, ci_n);
                        let v = x.load(src + iw * c_all + c).unwrap_or(T::ZERO);
                        smem.store(dst + iw * DW_NHWC_CHANNELS + c, v);
                        u += DW_THREADS;
                    }
                }
            }
            sync_threads();
            next_row = hi;
        }
        // The warp's strip: pixels m .. m + 7 (those before a_end), channel
        // k. Input row ih ≥ lo is in ring slot ih % ring = (ih − lo + lo %
        // ring) wrapped once; column iw in ring column iw + left.
        let m = a + warp * NHWC_STRIP;
        if let Some(tile) = mine.as_mut()
            && m < a_end
        {
            // (In 32 bits, as `div_u32`: indices of one image and of shared
            // memory.)
            let lo_slot = div_u32(lo, ring).1;
            let slot_of = |ih: usize| {
                let slot = (ih as u32).wrapping_sub(lo as u32) + lo_slot as u32;
                let slot = if slot >= ring as u32 {
                    slot - ring as u32
                } else {
                    slot
                };
                slot as usize
            };
            let (p, q) = div_u32(m, g.q);
            if strips
                && q + NHWC_STRIP <= g.q
                && let Some(windows) = windows
            {
                // One row of the strip's input per filter row: output q + o
                // reads window pixels sw·o + s (ring columns from q·sw).
                // Filter row r's window, if its input row is in the image.
                let first = (NHWC_FILTER + q * g.stride_w * DW_NHWC_CHANNELS + cl) as u32;
                let row_start = #[inline(always)]
                |r: usize| {
                    let ih = (p * g.stride_h + r * g.dil_h).wrapping_sub(g.pad_top);
                    (r < g.r && ih < g.h).then(|| first + slot_of(ih) as u32 * row_len as u32)
                };
                let acc = if g.stride_w == 1 {
                    strip::<T, 1, { nhwc_window(1) }>(windows, row_start, g.s, &w3)
                } else {
                    strip::<T, 2, { nhwc_window(2) }>(windows, row_start, g.s, &w3)
                };
                for (o, &acc) in acc.iter().enumerate() {
                    if let Some(mut out) = tile.slot(step * NHWC_STRIP + o, 0) {
                        out.set(T::from_f32(g.finish(acc, b)));
                    }
                }
            } else {
                // Any stride, dilation and filter: output by output, tap by
                // tap, the same order.
                for o in 0..NHWC_STRIP {
                    let Some(mut out) = tile.slot(step * NHWC_STRIP + o, 0) else {
                        continue;
                    };
                    let (po, qo) = div_u32(m + o, g.q);
                    let mut acc = 0.0f32;
                    for r in 0..g.r {
                        let ih = (po * g.stride_h + r * g.dil_h).wrapping_sub(g.pad_top);
                        if ih < g.h {
                            let row = NHWC_FILTER + slot_of(ih) * row_len + cl;
                            for s in 0..g.s {
                                let col = qo * g.stride_w + s * g.dil_w;
                                let v = smem.load(row + col * DW_NHWC_CHANNELS).to_f32();
                                let wt = smem.load(lane * fs + r * g.s + s).to_f32();
                                acc = num::fma_f32(v, wt, acc);
                            }
                        }
                    }
                    out.set(T::from_f32(g.finish(acc, b)));
                }
            }
        }
    }
}

/// Tiled depthwise NCHW convolution (module docs): `x` the input `N × C × H
/// × W`, `w` the filters `K × 1 × R × S` (`K = C·M`), `bias` (`K`, read only
/// when the geometry says so), `y` bound as `N·K` stacked `[P × Q]` planes.
/// Grid `⌈Q/64⌉ × ⌈P/16⌉ × N·K`, blocks of [`DW_THREADS`] threads (1-D),
/// dynamic shared memory as [`Geometry::dw_plan`] sizes it; another block
/// shape or a filter of more than [`DW_TAPS`] taps traps.
#[kernel(instances(
    conv2d_depthwise_nchw_f32 = <f32>,
    conv2d_depthwise_nchw_f16 = <f16>,
    conv2d_depthwise_nchw_bf16 = <bf16>,
))]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_depthwise_nchw<T: Element + SharedElement>(
    x: Global<T>,
    w: Global<T>,
    bias: Global<T>,
    mut y: OutMatrix<T, NchwTiles>,
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
    let (n, k) = (z / k_all, z % k_all);
    let plane = (n * g.groups + k / g.kg) * g.h * g.w;
    let p_last = batch_rows.min(p0 + DW_NCHW_ROWS) - 1;
    let q_last = g.q.min(q0 + DW_NCHW_COLS) - 1;
    // The window: input rows p0·sh − pad_top .. and columns q0·sw −
    // pad_left .. that the tile reads, padding included (as zeros), so that
    // every tap of every output reads it unconditionally; the part inside
    // the image is ih_lo .. ih_hi × iw_lo .. iw_hi.
    let rows = (p_last - p0) * g.stride_h + (g.r - 1) * g.dil_h + 1;
    let cols = (q_last - q0) * g.stride_w + (g.s - 1) * g.dil_w + 1;
    let (row0, col0) = (p0 * g.stride_h, q0 * g.stride_w); // minus the padding
    let (ih_lo, ih_hi) = input_rows(&g, p0, p_last);
    let (iw_lo, iw_hi) = input_cols(&g, q0, q_last);
    let t = thread::linear_thread_id() as usize;
    let smem = shared::dynamic::<T>();

    // The filter's taps and the bias; the window's padding as zeros; then
    // its part in the image, consecutive threads on consecutive columns.
    if t < taps {
        smem.store(t, w.load(k * taps + t).unwrap_or(T::ZERO));
    } else if t == DW_TAPS && g.bias {
        smem.store(t, bias.load(k).unwrap_or(T::ZERO));
    }
    // The window's rows lie `pitch` apart (`Geometry::dw_nchw_pitch`: the
    // packed output walk free of bank conflicts across row ends).
    let pitch = g.dw_nchw_pitch(q_last - q0 + 1, cols, core::mem::size_of::<T>());
    // (Walked by pitch, so a warp's stores are consecutive words whatever
    // the pitch.)
    let mut u = t;
    while u < rows * pitch {
        let (r, c) = (u / pitch, u % pitch);
        // Input row and column (wrapping below 0 to past the image).
        let ih = (row0 + r).wrapping_sub(g.pad_top);
        let iw = (col0 + c).wrapping_sub(g.pad_left);
        if c < cols && !(ih < g.h && iw < g.w) {
            smem.store(NCHW_FILTER + u, T::ZERO);
        }
        u += DW_THREADS;
    }
    let inside = iw_hi - iw_lo;
    // Where input (ih_lo, iw_lo) lies in the window (wrapping: meaningless,
    // and unused, when no input is inside).
    let corner = (ih_lo + g.pad_top)
        .wrapping_sub(row0)
        .wrapping_mul(pitch)
        .wrapping_add((iw_lo + g.pad_left).wrapping_sub(col0));
    // Where the part inside is whole rows it is one run of the plane: walk
    // it from the warp-width boundary at or before its start, so each
    // warp's loads cover whole sectors instead of straddling them (a
    // 56-wide f16 row is 3.5 sectors, so row-aligned walks waste a third).
    let first = plane + ih_lo * g.w + iw_lo;
    let lead = if inside == g.w {
        first % WARP_SIZE as usize
    } else {
        0
    };
    let mut u = t;
    while u < lead + (ih_hi - ih_lo) * inside {
        if let Some(f) = u.checked_sub(lead) {
            let (r, c) = (f / inside, f % inside);
            let v = x.load(first + r * g.w + c).unwrap_or(T::ZERO);
            smem.store(NCHW_FILTER + corner + r * pitch + c, v);
        }
        u += DW_THREADS;
    }
    sync_threads();
    let mut wr = [0.0f32; DW_TAPS];
    for (tap, wt) in wr.iter_mut().enumerate() {
        if tap < taps {
            *wt = smem.load(tap).to_f32();
        }
    }
    let b = if g.bias {
        smem.load(DW_TAPS).to_f32()
    } else {
        0.0
    };
    // Each tap a fixed offset from an output's window position, all in 32
    // bits (offsets within the staged window, far below 2³²).
    let (tap_dh, tap_dw) = tap_offsets(&g);
    let tap_at: [u32; DW_TAPS] =
        core::array::from_fn(|tap| (tap_dh[tap] * pitch + tap_dw[tap]) as u32);
    let (row_step, col_step) = ((g.stride_h * pitch) as u32, g.stride_w as u32);
    // Every tap's element is in the staged window by construction: a clamp
    // per load (`SharedWindows`), not a check and a panic path.
    let (Some(mut tile), Some(elements)) = (y.tile(), smem.windows::<1>()) else {
        return;
    };
    for mut out in tile.elements() {
        let (p, q) = ((out.row() - p0) as u32, (out.col() - q0) as u32);
        let at = NCHW_FILTER as u32 + p * row_step + q * col_step;
        let mut acc = 0.0f32;
        for tap in 0..DW_TAPS {
            if tap < taps {
                let v = elements.at((at + tap_at[tap]) as usize).load(0);
                acc = num::fma_f32(v.to_f32(), wr[tap], acc);
            }
        }
        out.set(T::from_f32(g.finish(acc, b)));
    }
}
