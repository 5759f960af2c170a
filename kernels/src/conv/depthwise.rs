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
//! q)`) × [`DW_NHWC_CHANNELS`] output channels (an `NhwcTiles` micro-tile
//! mapping: lane = channel, warp = pixel, the block walking its pixels 8 at
//! a time). The input rows those pixels read live in a ring of
//! [`Geometry::dw_nhwc_ring_rows`] full-width rows × 32 channels in shared
//! memory: walking down the image the block loads each input row it needs
//! once (the next rows as the window moves down, a barrier before and after
//! each load), so a block re-reads only the `(R − 1)·dh` halo rows above its
//! first output row. Rows are loaded as whole 16-byte channel vectors
//! (`Global::vectors16`) when the block's channels allow it — `C` and the
//! first channel a multiple of the vector, the buffer aligned — checked once
//! per block; element loads otherwise (ragged channel counts, multipliers
//! that split a vector, a misaligned buffer).
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
//! the direct kernel.

use super::{Element, Geometry};
use warpforge_device::global::Plain;
use warpforge_device::own::{BlockTiles, MicroTiles};
use warpforge_device::shared::{self, SharedElement};
use warpforge_device::sync::sync_threads;
use warpforge_device::thread::WARP_SIZE;
use warpforge_device::{Global, OutMatrix, bf16, f16, num, thread};
use warpforge_macros::kernel;

/// Threads per block of the tiled depthwise kernels (1-D).
pub const DW_THREADS: usize = 256;
/// Most filter taps (`R·S`) the tiled kernels keep in registers.
pub const DW_TAPS: usize = 9;
/// NHWC: output pixels per block tile.
pub const DW_NHWC_PIXELS: usize = 1024;
/// NHWC: output channels per block tile, one per lane.
pub const DW_NHWC_CHANNELS: usize = 32;
/// NHWC: pixels a block computes per step, one per warp.
const NHWC_STEP: usize = DW_THREADS / DW_NHWC_CHANNELS;
/// NHWC: elements of the filter area at the start of shared memory (the
/// block's 32 channels × up to 9 taps; a multiple of 8, so the ring after
/// it starts 16-byte aligned for every element type).
const NHWC_FILTER: usize = DW_NHWC_CHANNELS * DW_TAPS;
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
/// channels, the thread with linear id `t` owning channel `t % 32` of
/// pixels `t / 32 + 8·i`.
pub type NhwcTiles =
    MicroTiles<DW_NHWC_PIXELS, DW_NHWC_CHANNELS, 1, 1, { DW_NHWC_PIXELS / NHWC_STEP }, 1>;

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
    /// any 8 consecutive output pixels (`≤ 7/Q + 2` output rows, so
    /// `(rows − 1)·sh + (R − 1)·dh + 1` input rows), at most `H`.
    #[inline(always)]
    pub fn dw_nhwc_ring_rows(&self) -> usize {
        let out_rows = ((NHWC_STEP - 1) / self.q.max(1) + 2).min(self.p.max(1));
        let span = (self.r.max(1) - 1) * self.dil_h + 1;
        ((out_rows - 1) * self.stride_h + span).min(self.h)
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
            let ring = self.dw_nhwc_ring_rows();
            let elems = ring
                .checked_mul(self.w)?
                .checked_mul(DW_NHWC_CHANNELS)?
                .checked_add(NHWC_FILTER)?;
            let pixels = self.p.checked_mul(self.q)?;
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
/// Grid `⌈K/32⌉ × ⌈PQ/1024⌉ × N`, blocks of [`DW_THREADS`] threads (1-D),
/// dynamic shared memory as [`Geometry::dw_plan`] sizes it; another block
/// shape or a filter of more than [`DW_TAPS`] taps traps.
#[kernel(instances(
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
    let row_len = g.w * DW_NHWC_CHANNELS;

    // The block's filters, `(k_end − k0)·R·S` contiguous elements, into
    // shared memory; each thread takes its channel's taps into registers.
    let mut u = t;
    while u < (k_end - k0) * taps {
        smem.store(u, w.load(k0 * taps + u).unwrap_or(T::ZERO));
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
    let mut wr = [0.0f32; DW_TAPS];
    for (tap, wt) in wr.iter_mut().enumerate() {
        if tap < taps && mine_k {
            *wt = smem.load(lane * taps + tap).to_f32();
        }
    }
    let (tap_dh, tap_dw) = tap_offsets(&g);

    // Whole 16-byte vectors when every row segment the block stages is one
    // run of aligned vectors: decided once, for the whole block.
    let (head, vectors) = x.vectors16::<V>();
    let vector =
        head == 0 && c_all.is_multiple_of(V) && ci0.is_multiple_of(V) && ci_n.is_multiple_of(V);
    let image_row = n * g.h;

    let mut mine = y.micro_tile();
    // The first input row not staged yet.
    let mut next_row = 0;
    let mut step = 0;
    while m0 + step * NHWC_STEP < m_end {
        // This step's pixels a .. a_end and the input rows lo .. hi they read.
        let a = m0 + step * NHWC_STEP;
        let a_end = m_end.min(a + NHWC_STEP);
        let (lo, hi) = input_rows(&g, a / g.q, (a_end - 1) / g.q);
        let from = next_row.max(lo);
        if from < hi {
            // Rows from .. hi replace rows at least `ring` above them, which
            // no pixel from here on reads; wait until this step's readers
            // of the old rows are done, load, and wait for the load.
            sync_threads();
            if vector {
                let per_pixel = ci_n / V;
                let per_row = g.w * per_pixel;
                let mut u = t;
                while u < (hi - from) * per_row {
                    let (ih, rest) = (from + u / per_row, u % per_row);
                    let (iw, j) = (rest / per_pixel, rest % per_pixel);
                    let at = ((image_row + ih) * g.w + iw) * c_all + ci0 + j * V;
                    let v = vectors.load(at / V).map_or([T::ZERO; V], |v| v.0);
                    let dst = NHWC_FILTER + (ih % ring) * row_len + iw * DW_NHWC_CHANNELS + j * V;
                    smem.store16::<V>(dst, v);
                    u += DW_THREADS;
                }
            } else {
                let per_row = g.w * ci_n;
                let mut u = t;
                while u < (hi - from) * per_row {
                    let (ih, rest) = (from + u / per_row, u % per_row);
                    let (iw, c) = (rest / ci_n, rest % ci_n);
                    let at = ((image_row + ih) * g.w + iw) * c_all + ci0 + c;
                    let v = x.load(at).unwrap_or(T::ZERO);
                    smem.store(
                        NHWC_FILTER + (ih % ring) * row_len + iw * DW_NHWC_CHANNELS + c,
                        v,
                    );
                    u += DW_THREADS;
                }
            }
            sync_threads();
            next_row = hi;
        }
        // Pixel a + warp, channel k: row ih of the image is in ring slot
        // ih % ring = (ih − lo + lo % ring) wrapped once.
        if let Some(tile) = mine.as_mut()
            && let Some(mut out) = tile.slot(step, 0)
        {
            let m = a + warp;
            let (p, q) = (m / g.q, m % g.q);
            let lo_slot = lo % ring;
            let mut acc = 0.0f32;
            for tap in 0..DW_TAPS {
                if tap < taps {
                    let ih = (p * g.stride_h + tap_dh[tap]).wrapping_sub(g.pad_top);
                    let iw = (q * g.stride_w + tap_dw[tap]).wrapping_sub(g.pad_left);
                    if ih < g.h && iw < g.w {
                        let mut slot = ih - lo + lo_slot;
                        if slot >= ring {
                            slot -= ring;
                        }
                        let at = NHWC_FILTER + slot * row_len + iw * DW_NHWC_CHANNELS + cl;
                        acc = num::fma_f32(smem.load(at).to_f32(), wr[tap], acc);
                    }
                }
            }
            out.set(T::from_f32(g.finish(acc, b)));
        }
        step += 1;
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
    let (tap_dh, tap_dw) = tap_offsets(&g);
    let Some(mut tile) = y.tile() else {
        return;
    };
    for mut out in tile.elements() {
        let (p, q) = (out.row(), out.col());
        // Output (p, q)'s window position; each tap a fixed offset from it.
        let at = NCHW_FILTER + (p - p0) * g.stride_h * pitch + (q - q0) * g.stride_w;
        let mut acc = 0.0f32;
        for tap in 0..DW_TAPS {
            if tap < taps {
                let v = smem.load(at + tap_dh[tap] * pitch + tap_dw[tap]);
                acc = num::fma_f32(v.to_f32(), wr[tap], acc);
            }
        }
        out.set(T::from_f32(g.finish(acc, b)));
    }
}
