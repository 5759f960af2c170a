//! Forward 2-D convolution: `y = conv(x, w) (+ bias[k])`, then ReLU when
//! asked, f32 accumulation, the result rounded once to the input's type.
//!
//! Sizes (logical, whatever the layout): input `N × C × H × W`, weights
//! `K × C/G × R × S` (`G` groups), output `N × K × P × Q`. Output pixel
//! `(p, q)` reads input row `p·sh + r·dh − pad_top` and column
//! `q·sw + s·dw − pad_left`; rows and columns outside the input are zero
//! (padding), never read. Layouts: NCHW (weights `K, C/G, R, S`) and NHWC
//! (weights `K, R, S, C/G`).
//!
//! Two kernel families, both reading sizes from one [`Geometry`] that the
//! host packs into eight `u64` arguments ([`Geometry::pack`], decoded by
//! [`Geometry::unpack`]: one definition of the encoding for both sides):
//!
//! - **Implicit GEMM** (`conv2d_{nchw,nhwc}_f32_64x64x16`): the SIMT GEMM's
//!   main loop ([`warpforge_kernels_gemm_simt::main_loop`], its tile [`F32_TILE`]) with an
//!   operand gathered on the fly (im2col, never materialised) — a
//!   [`Source`] like the GEMM's stored matrices, so
//!   there is one GEMM main loop, not two.
//!   - NHWC, any `G`: per group (`blockIdx.z = g`) `GEMM_M = N·P·Q`
//!     (output pixels), `GEMM_N = K/G`, `GEMM_K = R·S·(C/G)` in `(r, s, c)`
//!     order (channels innermost: consecutive threads read consecutive
//!     channels). `A` is the group's input channels gathered
//!     ([`Im2colNhwc`]), `B` the group's weights `K/G × RS(C/G)` read
//!     transposed, and the output NHWC *is* the row-major `[N·P·Q × K]`
//!     matrix, group `g`'s outputs its columns `g·K/G ..`: `G` side-by-side
//!     batches of the `OutMatrix` binding (batch stride `K/G`, row stride
//!     `K`), disjoint by construction, written through the GEMM's owned
//!     `MicroTiles` epilogue. `G = 1` is the plain GEMM.
//!   - NCHW, any `G`: per image and group (`blockIdx.z = n·G + g`)
//!     `GEMM_M = K/G`, `GEMM_N = P·Q`, `GEMM_K = (C/G)·R·S` in `(c, r, s)`
//!     order; `A` is group `g`'s weights (a plain row-major matrix, the GEMM's
//!     [`Strided`]), `B` the gathered image ([`Im2colNchw`], consecutive
//!     threads on consecutive output columns). The outputs of `(n, g)` are
//!     rows `(n·G + g)·K/G ..` of the `[N·K × P·Q]` matrix that NCHW is:
//!     `N·G` stacked batches of the `OutMatrix` binding (batch stride
//!     `K/G·P·Q`), disjoint by construction.
//! - **Tensor-core implicit GEMM** (`conv2d_nhwc_{f16,bf16}_64x64x32_s3`,
//!   `conv2d_nhwc_{f16,bf16}_128x128x32_s4`): the NHWC GEMM of the f32
//!   kernels (per group) on the tensor-core GEMM's main loops
//!   ([`tensor::main_loop`] and, for a block whose gather is proven once,
//!   the lean [`tensor::pipeline_interior`]), the gathered input a
//!   [`TileSource`] that fills 16-byte channel chunks ([`Im2colNhwcTc`]:
//!   `cp.async` when `C/G % 8 == 0`, the pixel in the image and the address
//!   aligned; zeros in the padding, element loads otherwise). The weights
//!   are a [`Stored`] matrix read transposed; the output goes through the
//!   owned `WarpGrid` epilogue. The tiles: [`TC_CONV_TILE`] (64 × 64, 1 × 2
//!   warps of 64 × 32) and [`TC_CONV_TILE_LARGE`] (the GEMM's 128 × 128).
//!   There is no NCHW tensor-core kernel: in
//!   NCHW, 8 consecutive output pixels of a tap rarely read an aligned
//!   16-byte run of the input, so the host runs an NCHW f16/bf16
//!   convolution as this NHWC one between layout changes
//!   ([`crate::transpose`]), as cuDNN does.
//! - **Tiled depthwise** (`conv2d_depthwise_{nchw,nhwc}_{f32,f16,bf16}`,
//!   [`depthwise`]): `G = C`, any channel multiplier, filters of up to 9
//!   taps; each block stages its output tile's input (with the halo) in
//!   shared memory once — NHWC a ring of full-width input rows loaded as
//!   16-byte channel vectors where the channels allow, each thread a strip
//!   of 7 pixels × one 16-byte channel vector slid through its registers;
//!   NCHW a window per 16 × 64 tile of one plane, the filter taps in
//!   registers.
//! - **Direct** (`conv2d_direct_{nchw,nhwc}_{f32,f16,bf16}`): one output
//!   element per thread (`Out<T, Elements>`, grid-stride), consecutive
//!   threads on the contiguous axis (channels in NHWC, width in NCHW), the
//!   `(C/G)·R·S` products accumulated in f32 by fused multiply-adds: the
//!   depthwise fallback where the tiled kernels do not apply (more than 9
//!   taps, a staging area past 96 KiB, a grid past 65535 in y or z).
//!
//! Epilogue (all): `acc (+ bias[k])`, then `max(·, 0)` with NaN kept (as
//! torch's ReLU), rounded once to the output type. Every output is one
//! fused multiply-add chain in an order fixed by the sizes alone:
//! deterministic, the same bits on every launch and grid.
//!
//! This crate is the library's convolution family, one PTX module of its
//! own (`warpforge-kernels-conv`; the `conv` feature of `warpforge`), with
//! the layout changes NCHW ↔ NHWC ([`transpose`]) its NCHW paths run.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]
// `#[inline(always)]` on the hot loops' closures (`unroll`): LLVM declines to
// inline a large closure otherwise, and its captures (the accumulators) would
// go to the stack.
#![feature(stmt_expr_attributes)]
#![forbid(unsafe_code)]

pub mod depthwise;
pub mod transpose;
pub use depthwise::*;

use warpforge_device::mma::{
    ARowMajor, AlignedChunks, BNMajorPair, FragC, GatherCopy, PanelCopy, Stage, StageRing,
};
use warpforge_device::own::{Elements, MicroTiles, WarpGrid};
use warpforge_device::shared::{self, SharedArray, SharedElement};
use warpforge_device::unroll::{unroll, unroll2};
use warpforge_device::{Dim3, Global, Out, OutMatrix, bf16, f16, thread};
use warpforge_device::{mma, num};
use warpforge_kernels_gemm_simt::{self as gemm, F32_TILE, MICRO, Source, Strided, Tile};
use warpforge_kernels_gemm_tensor::{
    self as tensor, Input, MmaTile, Output, StageFill, Stored, TileSource, is_aligned,
};
use warpforge_macros::kernel;

/// The sizes one convolution kernel needs (module docs). Each field fits a
/// `u32` (strides and dilations a `u16`); the host checks that before
/// packing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Input rows and columns.
    pub h: usize,
    pub w: usize,
    /// Filter rows and columns.
    pub r: usize,
    pub s: usize,
    /// Output rows and columns.
    pub p: usize,
    pub q: usize,
    /// Strides (rows, columns).
    pub stride_h: usize,
    pub stride_w: usize,
    /// Zero padding before the first row and column (the padding after them
    /// is implied by `p` and `q`).
    pub pad_top: usize,
    pub pad_left: usize,
    /// Dilations (rows, columns).
    pub dil_h: usize,
    pub dil_w: usize,
    /// Input channels per group (`C/G`).
    pub cg: usize,
    /// Output channels per group (`K/G`).
    pub kg: usize,
    /// Groups (`G`).
    pub groups: usize,
    /// Add `bias[k]`.
    pub bias: bool,
    /// Apply ReLU.
    pub relu: bool,
}

const fn pair(hi: usize, lo: usize) -> u64 {
    ((hi as u64) << 32) | (lo as u64 & 0xffff_ffff)
}

const fn split(v: u64) -> (usize, usize) {
    ((v >> 32) as usize, (v & 0xffff_ffff) as usize)
}

impl Geometry {
    /// The eight kernel arguments: `(h, w)`, `(r, s)`, `(p, q)`, strides,
    /// padding, dilations, `(cg, kg)`, `(groups, flags)`, each a pair of
    /// `u32` in one `u64`.
    pub const fn pack(&self) -> [u64; 8] {
        let flags = (self.bias as usize) | ((self.relu as usize) << 1);
        [
            pair(self.h, self.w),
            pair(self.r, self.s),
            pair(self.p, self.q),
            pair(self.stride_h, self.stride_w),
            pair(self.pad_top, self.pad_left),
            pair(self.dil_h, self.dil_w),
            pair(self.cg, self.kg),
            pair(self.groups, flags),
        ]
    }

    /// The geometry [`pack`](Self::pack) encoded.
    #[inline(always)]
    pub const fn unpack(a: [u64; 8]) -> Geometry {
        let (h, w) = split(a[0]);
        let (r, s) = split(a[1]);
        let (p, q) = split(a[2]);
        let (stride_h, stride_w) = split(a[3]);
        let (pad_top, pad_left) = split(a[4]);
        let (dil_h, dil_w) = split(a[5]);
        let (cg, kg) = split(a[6]);
        let (groups, flags) = split(a[7]);
        Geometry {
            h,
            w,
            r,
            s,
            p,
            q,
            stride_h,
            stride_w,
            pad_top,
            pad_left,
            dil_h,
            dil_w,
            cg,
            kg,
            groups,
            bias: flags & 1 != 0,
            relu: flags & 2 != 0,
        }
    }

    /// The input row read by output row `p` through filter row `r`, or None
    /// in the padding.
    #[inline(always)]
    fn in_row(&self, p: usize, r: usize) -> Option<usize> {
        (p * self.stride_h + r * self.dil_h)
            .checked_sub(self.pad_top)
            .filter(|&ih| ih < self.h)
    }

    /// The input column read by output column `q` through filter column `s`,
    /// or None in the padding.
    #[inline(always)]
    fn in_col(&self, q: usize, s: usize) -> Option<usize> {
        (q * self.stride_w + s * self.dil_w)
            .checked_sub(self.pad_left)
            .filter(|&iw| iw < self.w)
    }

    /// The NHWC input's element of channel `c` at pixel `(n, ih, iw)`:
    /// pixels `C = (C/G)·G` channels apart.
    #[inline(always)]
    fn nhwc_at(&self, (n, ih, iw): (usize, usize, usize), c: usize) -> usize {
        ((n * self.h + ih) * self.w + iw) * (self.cg * self.groups) + c
    }

    /// The epilogue: `acc (+ bias)`, ReLU keeping NaN, in f32.
    #[inline(always)]
    fn finish(&self, acc: f32, bias: f32) -> f32 {
        let v = if self.bias { acc + bias } else { acc };
        // `v < 0` is false for NaN: NaN passes through, as in torch.
        if self.relu && v < 0.0 { 0.0 } else { v }
    }
}

/// Element types of the convolution kernels: f32, f16, bf16, read as f32.
pub trait Element: Output {
    /// `0`.
    const ZERO: Self;
}

impl Element for f32 {
    const ZERO: f32 = 0.0;
}

impl Element for f16 {
    const ZERO: f16 = f16::ZERO;
}

impl Element for bf16 {
    const ZERO: bf16 = bf16::ZERO;
}

/// Element `i` of `x` as f32, zero past its end (the host checked every
/// buffer against the sizes, so that never happens in a checked launch).
#[inline(always)]
fn read<T: Element>(x: &[T], i: usize) -> f32 {
    x.get(i).copied().unwrap_or(T::ZERO).to_f32()
}

/// Direct convolution, one output element per thread (module docs).
/// `NHWC` picks the layout. Launch with any 1-D grid and block.
#[inline(always)]
fn direct<T: Element, const NHWC: bool>(
    x: &[T],
    w: &[T],
    bias: &[T],
    y: &mut Out<T, Elements>,
    g: Geometry,
) {
    let k_all = g.kg * g.groups;
    let c_all = g.cg * g.groups;
    let (rs, pq) = (g.r * g.s, g.p * g.q);
    for mut out in y.grid_stride() {
        let i = out.index();
        // The output element's coordinates; the fastest-varying one is the
        // layout's contiguous axis, so consecutive threads read neighbours.
        let (n, k, p, q) = if NHWC {
            let (k, pix) = (i % k_all, i / k_all);
            (pix / pq, k, (pix % pq) / g.q, pix % g.q)
        } else {
            let (q, rest) = (i % g.q, i / g.q);
            let (p, rest) = (rest % g.p, rest / g.p);
            (rest / k_all, rest % k_all, p, q)
        };
        let c0 = (k / g.kg) * g.cg;
        let mut acc = 0.0f32;
        for r in 0..g.r {
            let Some(ih) = g.in_row(p, r) else { continue };
            for s in 0..g.s {
                let Some(iw) = g.in_col(q, s) else { continue };
                for c in 0..g.cg {
                    let (xi, wi) = if NHWC {
                        (
                            ((n * g.h + ih) * g.w + iw) * c_all + c0 + c,
                            (k * rs + r * g.s + s) * g.cg + c,
                        )
                    } else {
                        (
                            ((n * c_all + c0 + c) * g.h + ih) * g.w + iw,
                            (k * g.cg + c) * rs + r * g.s + s,
                        )
                    };
                    acc = num::fma_f32(read(x, xi), read(w, wi), acc);
                }
            }
        }
        let b = if g.bias { read(bias, k) } else { 0.0 };
        out.set(T::from_f32(g.finish(acc, b)));
    }
}

macro_rules! direct_kernels {
    ($($name:ident = <$t:ty, $nhwc:literal>),* $(,)?) => { $(
        /// Direct convolution (module docs): `x`, `w`, `bias` (read only
        /// when the geometry says so) and the output `y`, the geometry in
        /// the eight [`Geometry::pack`] words.
        #[kernel]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            x: &[$t],
            w: &[$t],
            bias: &[$t],
            mut y: Out<$t, Elements>,
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
            direct::<$t, $nhwc>(x, w, bias, &mut y, g);
        }
    )* };
}

direct_kernels!(
    conv2d_direct_nchw_f32 = <f32, false>,
    conv2d_direct_nhwc_f32 = <f32, true>,
    conv2d_direct_nchw_f16 = <f16, false>,
    conv2d_direct_nhwc_f16 = <f16, true>,
    conv2d_direct_nchw_bf16 = <bf16, false>,
    conv2d_direct_nhwc_bf16 = <bf16, true>,
);

/// One group of the NHWC input as the implicit GEMM's `A`:
/// `N·P·Q × R·S·(C/G)`, row = output pixel `(n, p, q)`, column = `(r, s, c)`
/// (channels fastest), channel `c0 + c` of the input, zero in the padding.
pub struct Im2colNhwc<'a> {
    /// The input, `N × H × W × C`.
    pub x: &'a [f32],
    /// The group's first input channel (`g·C/G`).
    pub c0: usize,
    /// The sizes.
    pub g: Geometry,
}

impl Source<f32> for Im2colNhwc<'_> {
    const ROW_FAST: bool = true;
    #[inline(always)]
    fn get(&self, row: usize, col: usize) -> f32 {
        let g = &self.g;
        let pq = g.p * g.q;
        let (n, p, q) = (row / pq, (row % pq) / g.q, row % g.q);
        let (c, rs) = (col % g.cg, col / g.cg);
        let (r, s) = (rs / g.s, rs % g.s);
        match (g.in_row(p, r), g.in_col(q, s)) {
            (Some(ih), Some(iw)) => read(self.x, g.nhwc_at((n, ih, iw), self.c0 + c)),
            _ => 0.0,
        }
    }
}

/// One image's group of the NCHW input as the implicit GEMM's `B`:
/// `(C/G)·R·S × P·Q`, row = `(c, r, s)`, column = output pixel `(p, q)`,
/// zero in the padding; `off` is the first element of the image's group.
pub struct Im2colNchw<'a> {
    /// The input, `N × C × H × W`.
    pub x: &'a [f32],
    /// Where channel 0 of this image's group starts.
    pub off: usize,
    /// The sizes.
    pub g: Geometry,
}

impl Source<f32> for Im2colNchw<'_> {
    const ROW_FAST: bool = true;
    #[inline(always)]
    fn get(&self, row: usize, col: usize) -> f32 {
        let g = &self.g;
        let rs = g.r * g.s;
        let (c, r, s) = (row / rs, (row % rs) / g.s, row % g.s);
        let (p, q) = (col / g.q, col % g.q);
        match (g.in_row(p, r), g.in_col(q, s)) {
            (Some(ih), Some(iw)) => read(self.x, self.off.wrapping_add((c * g.h + ih) * g.w + iw)),
            _ => 0.0,
        }
    }
}

const F32_M: usize = F32_TILE.m;
const F32_N: usize = F32_TILE.n;
const F32_K: usize = F32_TILE.k;

/// The conv epilogue on the SIMT micro-tiles: thread `t`'s accumulators
/// into its owned micro-tile of `y`, `bias_of(row, col)` the bias index of
/// an element at `(row, col)` of the block's batch.
#[inline(always)]
fn store_micro_tile<const BM: usize, const BN: usize>(
    y: &mut OutMatrix<f32, MicroTiles<BM, BN, MICRO, MICRO>>,
    acc: &[[f32; MICRO]; MICRO],
    g: &Geometry,
    bias: &[f32],
    bias_of: impl Fn(usize, usize) -> usize,
    (row0, col0): (usize, usize),
    t: usize,
) {
    let (ti, tj) = gemm::micro_origin::<BN>(t);
    let Some(mut mine) = y.micro_tile() else {
        return;
    };
    for (i, row) in acc.iter().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            if let Some(mut d) = mine.slot(i, j) {
                let b = if g.bias {
                    read(bias, bias_of(row0 + ti + i, col0 + tj + j))
                } else {
                    0.0
                };
                d.set(g.finish(v, b));
            }
        }
    }
}

/// Implicit-GEMM convolution in f32 on the SIMT cores (module docs):
/// `NHWC` picks the layout. NHWC: `y` bound as `G` side-by-side batches of
/// `N·P·Q × K/G` (row stride `K`, batch stride `K/G`: group `g`'s output
/// channels), grid `⌈(K/G)/BN⌉ × ⌈NPQ/BM⌉ × G`. NCHW: `y` bound as `N·G`
/// stacked batches of `K/G × P·Q`, grid `⌈PQ/BN⌉ × ⌈(K/G)/BM⌉ × N·G`.
/// Blocks of `Tile::threads()` threads (1-D); any other block traps.
#[inline(always)]
fn implicit_gemm_f32<const NHWC: bool, const BM: usize, const BN: usize, const BK: usize>(
    x: &[f32],
    w: &[f32],
    bias: &[f32],
    mut y: OutMatrix<f32, MicroTiles<BM, BN, MICRO, MICRO>>,
    g: Geometry,
) {
    let threads = Tile::new(BM, BN, BK).threads();
    assert!(
        thread::block_dim() == Dim3::x(threads as u32),
        "conv2d: launch with a 1-D block of Tile::threads() threads"
    );
    let t = thread::linear_thread_id() as usize;
    let block = thread::block_idx();
    let (row0, col0) = (block.y as usize * BM, block.x as usize * BN);
    let rs = g.r * g.s;
    if NHWC {
        // Batch z = group gr: its input channels, weights and output channels.
        let gr = block.z as usize;
        let (m, n, k) = (y.rows(), y.cols(), rs * g.cg);
        let a = Im2colNhwc {
            x,
            c0: gr * g.cg,
            g,
        };
        // Group gr's weights, rows gr·K/G .. of K × RS(C/G), read as
        // op(B) = Wᵀ (RS(C/G) × K/G).
        let b = Strided::<f32, true> {
            data: w,
            ld: k,
            off: gr * g.kg * k,
        };
        let acc = gemm::main_loop::<f32, _, _, BM, BN, BK>(&a, &b, (m, n, k), (row0, col0), t);
        let bias_base = gr * g.kg;
        store_micro_tile(
            &mut y,
            &acc,
            &g,
            bias,
            |_, col| bias_base + col,
            (row0, col0),
            t,
        );
    } else {
        // Batch z = n·G + gr: image n, group gr.
        let z = block.z as usize;
        let (n_img, gr) = (z / g.groups, z % g.groups);
        let (_, m) = y.batch();
        let (n, k) = (y.cols(), g.cg * rs);
        let a = Strided::<f32, false> {
            data: w,
            ld: k,
            off: gr * g.kg * k,
        };
        let b = Im2colNchw {
            x,
            off: (n_img * g.groups + gr) * g.cg * g.h * g.w,
            g,
        };
        let acc = gemm::main_loop::<f32, _, _, BM, BN, BK>(&a, &b, (m, n, k), (row0, col0), t);
        let bias_base = gr * g.kg;
        store_micro_tile(
            &mut y,
            &acc,
            &g,
            bias,
            |row, _| bias_base + row,
            (row0, col0),
            t,
        );
    }
}

macro_rules! implicit_gemm_kernels {
    ($($name:ident = <$nhwc:literal>),* $(,)?) => { $(
        /// Implicit-GEMM convolution in f32 (module docs): `x`, `w`, `bias`
        /// (read only when the geometry says so), the output matrix `y`, and
        /// the geometry in the eight [`Geometry::pack`] words.
        #[kernel(shared = [f32; F32_TILE.shared_len()])]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            x: &[f32],
            w: &[f32],
            bias: &[f32],
            y: OutMatrix<f32, MicroTiles<F32_M, F32_N, MICRO, MICRO>>,
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
            implicit_gemm_f32::<$nhwc, F32_M, F32_N, F32_K>(x, w, bias, y, g);
        }
    )* };
}

implicit_gemm_kernels!(
    conv2d_nchw_f32_64x64x16 = <false>,
    conv2d_nhwc_f32_64x64x16 = <true>,
);

/// One group of the NHWC input as the tensor-core implicit GEMM's `A`:
/// `N·P·Q × R·S·(C/G)`, row = output pixel `(n, p, q)`, column =
/// `(r, s, c)`, channel `c0 + c` of the input, gathered a 16-byte chunk at
/// a time. When `C/G % 8 == 0` a chunk is 8 consecutive channels of one
/// input pixel: `cp.async` when that pixel is in the image (not padding)
/// and the address 16-byte aligned, zeros in the padding, element loads
/// otherwise. Any other `C/G`: element by element, each column decomposed
/// on its own, zeros outside the matrix and in the padding. Never reads
/// outside `x`.
pub struct Im2colNhwcTc<'a, T> {
    /// The input, `N × H × W × C`.
    pub x: Global<'a, T>,
    /// The group's first input channel (`g·C/G`).
    pub c0: usize,
    /// The sizes.
    pub g: Geometry,
    /// `N·P·Q` and `R·S·(C/G)`: the matrix's rows and columns.
    pub rows: usize,
    pub cols: usize,
}

impl<T: Input + Element> Im2colNhwcTc<'_, T> {
    /// Element `(pixel (n, p, q), column col)` of the gathered matrix.
    #[inline(always)]
    fn element(&self, (n, p, q): (usize, usize, usize), col: usize) -> T {
        let g = &self.g;
        let (c, rs) = (col % g.cg, col / g.cg);
        let (r, s) = (rs / g.s, rs % g.s);
        match (g.in_row(p, r), g.in_col(q, s)) {
            (Some(ih), Some(iw)) => {
                let at = g.nhwc_at((n, ih, iw), self.c0 + c);
                self.x.get(at).copied().unwrap_or(<T as Input>::ZERO)
            }
            _ => <T as Input>::ZERO,
        }
    }
}

impl<T: Input + Element> TileSource<T> for Im2colNhwcTc<'_, T> {
    #[inline(always)]
    fn load_chunk(&self, smem: &SharedArray<T>, dst: usize, row: usize, col: usize) {
        let g = &self.g;
        let zero = <T as Input>::ZERO;
        if row >= self.rows || col >= self.cols {
            for i in 0..T::CHUNK {
                smem.store(dst + i, zero);
            }
            return;
        }
        let pq = g.p * g.q;
        let pix = (row / pq, (row % pq) / g.q, row % g.q);
        if g.cg.is_multiple_of(T::CHUNK) {
            // col is a multiple of 8, so the chunk is channels c .. c + 8 of
            // one filter tap (r, s), contiguous in the input.
            let (c, rs) = (col % g.cg, col / g.cg);
            let (r, s) = (rs / g.s, rs % g.s);
            if let (Some(ih), Some(iw)) = (g.in_row(pix.1, r), g.in_col(pix.2, s)) {
                let at = g.nhwc_at((pix.0, ih, iw), self.c0 + c);
                if is_aligned(self.x, at) {
                    mma::cp_async_16(smem, dst, self.x, at);
                } else {
                    for i in 0..T::CHUNK {
                        let v = self.x.get(at + i).copied().unwrap_or(zero);
                        smem.store(dst + i, v);
                    }
                }
            } else {
                for i in 0..T::CHUNK {
                    smem.store(dst + i, zero);
                }
            }
        } else {
            for i in 0..T::CHUNK {
                let v = if col + i < self.cols {
                    self.element(pix, col + i)
                } else {
                    zero
                };
                smem.store(dst + i, v);
            }
        }
    }
}

/// The most 16-byte chunks of `A` one thread gathers per k-step in
/// [`nhwc_lean_main_loop`] (4 for the small tile's 64 threads and for the
/// large tile's 128).
const MAX_CHUNKS: usize = 4;

/// The filter taps `first..end` (of `taps`) whose row (or column) `at +
/// tap·dil` lies in `0..len`: a range, as `at + tap·dil` grows with `tap`.
#[inline(always)]
fn inside_range(at: isize, dil: usize, len: usize, taps: usize) -> (usize, usize) {
    let dil = dil.max(1) as isize;
    // The taps before `x` (those whose `tap·dil < x`): ⌈x / dil⌉ for x > 0.
    let before = |x: isize| if x <= 0 { 0 } else { (x + dil - 1) / dil };
    let first = before(-at).min(taps as isize) as usize;
    let end = before(len as isize - at).min(taps as isize) as usize;
    (first, end.max(first))
}

/// The bits `r·S + s` of the taps inside both ranges (rows `r`, columns
/// `s`), for `R·S ≤ 32`: the columns' bits repeated once per filter row
/// (no carries: each copy is below `2^S`), masked to the rows'. No loop.
#[inline(always)]
fn tap_bits(rows: (usize, usize), cols: (usize, usize), s: usize) -> u64 {
    let span = |(first, end): (usize, usize), width: usize| {
        ((1u64 << (end * width)) - 1) & !((1u64 << (first * width)) - 1)
    };
    // 1 at bit r·S for each row r < 32 / S.
    let s = s.max(1);
    let repeat = span((0, 32 / s), s)
        .checked_div((1u64 << s) - 1)
        .unwrap_or(0);
    (span(cols, 1) * repeat) & span(rows, s)
}

/// The most filter taps `R·S` of the lean NHWC gather: each chunk keeps
/// which taps read inside the image as the bits of one `u32`.
const MAX_TAPS: usize = 32;

/// One thread's fill of each stage of [`nhwc_lean_main_loop`]: its chunks of
/// the gathered `A` and its copies of the weights' `B`. A chunk's source is
/// a number of 8-channel chunks of the input: its own `base` (once per
/// thread) plus the k-step's `offset` (once per k-step, uniform over the
/// block); whether it reads inside the image is one bit of its `taps`, the
/// k-step's `tap_bit` — per chunk and k-step one add and one test, no
/// multiply and no comparison of coordinates.
struct NhwcFill<'a, T> {
    x: AlignedChunks<'a, T>,
    gather: GatherCopy<T>,
    weights: PanelCopy<'a, T>,
    /// Per chunk: the input chunk its channels would read at filter tap
    /// (0, 0) (wrapping below 0 where that pixel is in the padding), and its
    /// taps that read inside the image (bit `r·S + s`).
    base: [u32; MAX_CHUNKS],
    taps: [u32; MAX_CHUNKS],
    /// The next k-step (uniform over the block): its input chunks' offset
    /// from `base`, its tap's bit, its k-steps left in that tap (1: the
    /// tap's last) and its tap's filter column; then the k-steps left.
    offset: u32,
    tap_bit: u32,
    in_tap: u32,
    s: u32,
    left: u32,
    /// The k-steps per tap (`C/G / BK`), the filter's columns, and the
    /// change of `offset` to the next k-step (`BK / 8` chunks), plus, after
    /// a tap's last, what takes it to the next column's tap instead, plus,
    /// after a row's last tap, what takes it to the next row's first.
    per_tap: u32,
    taps_s: u32,
    step: (u32, u32, u32),
}

impl<T: Input + SharedElement> StageFill for NhwcFill<'_, T> {
    #[inline(always)]
    fn fill(&mut self, stage: Stage) {
        self.gather(stage, false);
    }

    #[inline(always)]
    fn prime(&mut self, stage: Stage) {
        self.gather(stage, true);
    }

    /// The default prologue, its closure inlined by force: where LLVM
    /// declined (this fill is large), `&mut self` escaped into the calls and
    /// the whole gather state went to local memory for the k-loop (272
    /// bytes of stack). The GEMMs keep the default, which LLVM inlines.
    #[inline(always)]
    fn prime_ring<U: SharedElement, const S: usize>(&mut self, ring: &StageRing<U>) {
        unroll::<S>(
            #[inline(always)]
            |s| {
                self.prime(ring.stage(s));
                warpforge_device::mma::cp_async_commit();
            },
        );
    }
}

impl<T: Input + SharedElement> NhwcFill<'_, T> {
    /// Starts filling `stage` with the next k-step, if one is left; if not,
    /// with zeros when `zero_rest` (the prologue), else nothing.
    #[inline(always)]
    fn gather(&mut self, stage: Stage, zero_rest: bool) {
        let issue = self.left > 0;
        // Over a constant count, so the per-chunk arrays stay in registers.
        unroll::<MAX_CHUNKS>(
            #[inline(always)]
            |i| {
                if i >= self.gather.chunks() {
                    return;
                }
                // Padding (the tap's pixel outside the image) or no k-step
                // left: zeros (reading nothing), if asked.
                let inside = self.taps[i] & self.tap_bit != 0;
                let chunk = self.base[i].wrapping_add(self.offset);
                self.gather.copy_or_zero(
                    stage,
                    i,
                    &self.x,
                    chunk,
                    issue & inside,
                    issue | zero_rest,
                );
            },
        );
        if zero_rest {
            self.weights.copy_next_or_zero(stage);
        } else {
            self.weights.copy_next(stage);
        }
        // BK channels on; after a tap's last channels, the next tap: the next
        // column's, or after the row's last, the next row's first. As masks,
        // not selects of two of `self`'s fields.
        let next_s = self.in_tap == 1;
        let next_r = next_s & (self.s + 1 == self.taps_s);
        let (mask_s, mask_r) = (
            0u32.wrapping_sub(next_s as u32),
            0u32.wrapping_sub(next_r as u32),
        );
        let (step, to_col, to_row) = self.step;
        self.offset = self
            .offset
            .wrapping_add(step)
            .wrapping_add(mask_s & to_col)
            .wrapping_add(mask_r & to_row);
        self.tap_bit <<= next_s as u32;
        // On a tap's last k-step `in_tap − 1` is 0.
        self.in_tap = self
            .in_tap
            .wrapping_sub(1)
            .wrapping_add(mask_s & self.per_tap);
        self.s = self.s.wrapping_add(next_s as u32) & !mask_r;
        self.left = self.left.saturating_sub(1);
    }
}

/// The implicit-GEMM NHWC convolution's lean main loop
/// ([`tensor::pipeline_interior`]): `A`'s im2col rows gathered by
/// [`GatherCopy`](warpforge_device::mma::GatherCopy) as [`NhwcFill`] walks
/// them — each thread's chunks' input chunk at tap (0, 0) and the taps that
/// read inside the image computed once, the k-step's offset and tap bit
/// advanced once per step for the block, each 16-byte chunk of 8 channels
/// copied by `cp.async` when its tap reads inside the image and zero-filled
/// in the padding, predicated (no branch, no check that can fail) — and
/// `B`, the weights, as the GEMM's
/// [`InteriorPanel`](warpforge_device::mma::InteriorPanel) copies.
/// `None` (before any barrier: the checks are uniform over the block) unless
/// every k-step is one tap's channels (`C/G` a non-zero multiple of `BK`, so
/// the chunks of a k-step share a tap, and whole 16-byte chunks), the filter
/// has at most [`MAX_TAPS`] taps, the input starts 16-byte aligned with its
/// chunks numbered in 32 bits, and the block's weights are an interior
/// panel.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn nhwc_lean_main_loop<
    T: Input + Element + SharedElement,
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const WM: usize,
    const WN: usize,
    const S: usize,
    const MI: usize,
    const NI: usize,
>(
    a: &Im2colNhwcTc<'_, T>,
    b: &Stored<'_, T>,
    ktiles: usize,
    (row0, col0): (usize, usize),
    t: usize,
    (warp_row, warp_col): (usize, usize),
) -> Option<[[FragC; NI]; MI]> {
    let tile = MmaTile::new(BM, BN, BK, WM, WN, S);
    let me = (t, tile.threads());
    let g = &a.g;
    let (pq, channels) = (g.p * g.q, g.cg * g.groups);
    let fits = g.cg.is_multiple_of(BK)
        && g.cg >= BK
        && pq > 0
        && (1..=MAX_TAPS).contains(&(g.r * g.s))
        && ktiles <= u32::MAX as usize
        && NI.is_multiple_of(2);
    if !fits {
        return None;
    }
    let smem = shared::dynamic::<T>();
    // The GEMM's lean stage layout: rows unpadded, chunks XOR-swizzled.
    let (sa, place_a) = tensor::lean_rows::<T>(tile.a_layout(false).1, tile.pad());
    let (sb, place_b) = tensor::lean_rows::<T>(tile.b_layout(true).1, tile.pad());
    let a_len = BM * sa;
    let ring = StageRing::check(&smem, a_len + BN * sb, S)?;
    let x = AlignedChunks::check(a.x)?;
    let weights = b
        .interior_panel::<BN, BK>((col0, 0), false, ktiles)?
        .thread_copy(&ring, a_len, sb, place_b, me)?;
    let gather = ring.gather_copy((0, sa), (BM, BK), place_a, me)?;
    let frags_a = ring.window::<ARowMajor>(
        tensor::a_offset::<false>(warp_row, 0, sa),
        sa,
        tensor::a_at::<false>((MI - 1) * mma::M, BK - T::K),
        place_a,
    )?;
    let frags_b = ring.window::<BNMajorPair>(
        a_len + tensor::b_offset::<true>(warp_col, 0, sb),
        sb,
        tensor::b_at::<true>((NI - 2) * mma::N, BK - T::K),
        place_b,
    )?;
    if gather.chunks() > MAX_CHUNKS {
        return None;
    }
    // Once per thread: each chunk's input chunk at tap (0, 0) and the taps
    // that read inside the image. In 8-channel chunks of the input (`C` and
    // the chunk's first channel are multiples of 8: checked), wrapping in 32
    // bits: a tap inside the image reads a chunk of the input, whose every
    // number fits (checked), so base + offset is exact there. A chunk whose
    // row is past the matrix (the last block row's) gathers the last row's
    // pixels instead: in bounds, and its accumulators are never written
    // (the epilogue's view ends at the matrix).
    let c8 = (channels / 8) as u32;
    let (h, w) = (g.h as isize, g.w as isize);
    let mut base = [0u32; MAX_CHUNKS];
    let mut taps = [0u32; MAX_CHUNKS];
    unroll::<MAX_CHUNKS>(
        #[inline(always)]
        |i| {
            if i >= gather.chunks() {
                return;
            }
            let m = (row0 + gather.row(i)).min(a.rows.saturating_sub(1));
            let (n, p, q) = (m / pq, (m % pq) / g.q, m % g.q);
            let ih0 = (p * g.stride_h) as isize - g.pad_top as isize;
            let iw0 = (q * g.stride_w) as isize - g.pad_left as isize;
            let pixel = (n as isize * h + ih0) * w + iw0;
            base[i] = (pixel as u32)
                .wrapping_mul(c8)
                .wrapping_add(((a.c0 + gather.col()) / 8) as u32);
            let rows = inside_range(ih0, g.dil_h, g.h, g.r);
            let cols = inside_range(iw0, g.dil_w, g.w, g.s);
            taps[i] = tap_bits(rows, cols, g.s) as u32;
        },
    );
    // The offset's steps (wrapping): BK channels on; from a tap's last
    // channels to the next column's first (dil_w pixels on); from a row's
    // last tap to the next row's first (dil_h rows on, S − 1 columns back).
    let (col_step, row_step) = (
        ((g.dil_w as u32).wrapping_mul(c8)),
        (g.dil_h as u32).wrapping_mul(g.w as u32).wrapping_mul(c8),
    );
    let back = ((g.cg - BK) / 8) as u32;
    let step = (BK / 8) as u32;
    let to_col = col_step.wrapping_sub(back);
    let to_row = row_step
        .wrapping_sub(col_step.wrapping_mul(g.s as u32 - 1))
        .wrapping_sub(back);
    let fill = NhwcFill {
        x,
        gather,
        weights,
        base,
        taps,
        offset: 0,
        tap_bit: 1,
        in_tap: (g.cg / BK) as u32,
        s: 0,
        left: ktiles as u32,
        per_tap: (g.cg / BK) as u32,
        taps_s: g.s as u32,
        step: (step, to_col.wrapping_sub(step), to_row.wrapping_sub(to_col)),
    };
    thread::path("lean");
    Some(tensor::pipeline_interior::<
        T,
        ARowMajor,
        BNMajorPair,
        false,
        true,
        BK,
        S,
        MI,
        NI,
    >(&ring, fill, &frags_a, &frags_b, ktiles))
}

/// The NHWC convolutions' small tile: 64 output pixels × 64 output
/// channels per block, k-step 32, 3 stages, as the GEMM's
/// ([`TC_TILE`](warpforge_kernels_gemm_tensor::TC_TILE)), but in 1 × 2 warps of
/// 64 × 32 (64 threads) instead of 4 of 64 × 16: each warp issues 32 `mma`
/// per k-step instead of 16, so the k-step's fixed work (the gather's
/// advance to the next tap, the wait, the barrier), which a thread does once
/// whatever its share, is spread over twice the `mma`s, and each `ldmatrix`
/// feeds more of them. The same blocks (the tile's point: layers whose
/// large-tile grid would leave SMs idle), half the threads a block, more
/// blocks per SM.
pub const TC_CONV_TILE: MmaTile = MmaTile::new(64, 64, 32, 64, 32, 3);
const _: () = assert!(TC_CONV_TILE.is_valid() && TC_CONV_TILE.max_shared_bytes() <= 48 * 1024);
const TC_M: usize = TC_CONV_TILE.m;
const TC_N: usize = TC_CONV_TILE.n;
const TC_K: usize = TC_CONV_TILE.k;
const TC_WM: usize = TC_CONV_TILE.warp_m;
const TC_WN: usize = TC_CONV_TILE.warp_n;
const TC_S: usize = TC_CONV_TILE.stages;
const TC_MI: usize = TC_WM / mma::M;
const TC_NI: usize = TC_WN / mma::N;

/// The NHWC convolutions' large tile: 128 output pixels × 128 output
/// channels per block, k-step 32, 2 × 2 warps of 64 × 64 (the GEMM's large
/// tile, [`TC_TILE_LARGE`](warpforge_kernels_gemm_tensor::TC_TILE_LARGE)), 4 stages —
/// 80 KiB of shared memory on the guarded path (dynamic: the host opts in),
/// 64 KiB on the lean one. Each thread gathers 4 chunks per k-step (as
/// the small tile's) and feeds 4 times the `mma`s; each warp loads half the
/// fragments per `mma` of the small tile's. For layers of at least 128
/// output channels per group.
pub const TC_CONV_TILE_LARGE: MmaTile = tensor::TC_TILE_LARGE;
const _: () =
    assert!(TC_CONV_TILE_LARGE.is_valid() && TC_CONV_TILE_LARGE.max_shared_bytes() <= 99 * 1024);
const TL_M: usize = TC_CONV_TILE_LARGE.m;
const TL_N: usize = TC_CONV_TILE_LARGE.n;
const TL_K: usize = TC_CONV_TILE_LARGE.k;
const TL_WM: usize = TC_CONV_TILE_LARGE.warp_m;
const TL_WN: usize = TC_CONV_TILE_LARGE.warp_n;
const TL_S: usize = TC_CONV_TILE_LARGE.stages;
const TL_MI: usize = TL_WM / mma::M;
const TL_NI: usize = TL_WN / mma::N;

/// Implicit-GEMM NHWC convolution (any groups but depthwise) on the tensor
/// cores (module docs): per group (`blockIdx.z = g`) `A` the group's
/// gathered input channels ([`Im2colNhwcTc`]), `B` the group's weights
/// `K/G × RS(C/G)` read transposed (a [`Stored`] matrix), the GEMM's
/// [`main_loop`](tensor::main_loop), and the output `y` bound as `G`
/// side-by-side batches of `[N·P·Q × K/G]` (row stride `K`, batch stride
/// `K/G`: the group's output channels of the NHWC output) through the owned
/// `WarpGrid` epilogue: in f32 `acc (+ bias[g·K/G + col])`, ReLU keeping
/// NaN, one rounding to `T`. Grid `⌈(K/G)/BN⌉ × ⌈NPQ/BM⌉ × G`, blocks of
/// `MmaTile::threads()` threads (1-D); any other block traps.
#[kernel(
    shared = [T; MmaTile::new(BM, BN, BK, WM, WN, S).shared_len(false, true)],
    instances(
        conv2d_nhwc_f16_64x64x32_s3 = <f16, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI>,
        conv2d_nhwc_bf16_64x64x32_s3 = <bf16, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI>,
        conv2d_nhwc_f16_128x128x32_s4 = <f16, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI>,
        conv2d_nhwc_bf16_128x128x32_s4 = <bf16, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI>,
    )
)]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_nhwc_tc<
    T: Input + Element,
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const WM: usize,
    const WN: usize,
    const S: usize,
    const MI: usize,
    const NI: usize,
>(
    x: Global<T>,
    w: Global<T>,
    bias: &[T],
    mut y: OutMatrix<T, WarpGrid<BM, BN, WM, WN>>,
    hw: u64,
    rs: u64,
    pq: u64,
    stride: u64,
    pad: u64,
    dil: u64,
    chans: u64,
    groups: u64,
) {
    let (t, _) = tensor::enter_block_tile::<T, BM, BN, BK, WM, WN, S, MI, NI>();
    // The block's tile, as its epilogue's map (`WarpGrid`) places it: in
    // launch order, not in the GEMM's bands (`BLOCK_BANDS`). A layer's grid
    // is 1–4 channel tiles wide, so consecutive blocks already share their
    // gathered pixels; on an H100 the bands made the ResNet-50 3 × 3 layers
    // 4–7 % slower (2026-11-27, docs/gpu-results/2026-11-27-h100-bands).
    let (row0, col0) = y.block_origin();
    let g = Geometry::unpack([hw, rs, pq, stride, pad, dil, chans, groups]);
    // The warp's tile in the block tile, by the map its epilogue writes
    // through (`WarpGrid`); with the checked block every warp has one.
    let warp_at = y.warp_offset().unwrap_or((0, 0));
    let block = thread::block_idx();
    // Batch z = group gr: its input channels, weights and output channels.
    let gr = block.z as usize;
    let (m, n, k) = (y.rows(), y.cols(), g.r * g.s * g.cg);
    let a = Im2colNhwcTc {
        x,
        c0: gr * g.cg,
        g,
        rows: m,
        cols: k,
    };
    // Group gr's weights, rows gr·K/G .. of K × RS(C/G): op(B) = Wᵀ,
    // stored transposed.
    let b = Stored {
        src: w,
        ld: k,
        off: gr * g.kg * k,
        rows: n,
        cols: k,
    };
    let ktiles = k.div_ceil(BK);
    // The lean pipeline where its checks (once per block, uniform) pass;
    // else the guarded main loop, chunk by chunk.
    let lean = nhwc_lean_main_loop::<T, BM, BN, BK, WM, WN, S, MI, NI>(
        &a,
        &b,
        ktiles,
        (row0, col0),
        t,
        warp_at,
    );
    let acc = match lean {
        Some(acc) => acc,
        None => tensor::main_loop::<T, _, _, false, true, BM, BN, BK, WM, WN, S, MI, NI>(
            &a,
            &b,
            ktiles,
            (row0, col0),
            t,
            warp_at,
        ),
    };
    let Some(mut out) = y.tile() else {
        return;
    };
    let (_, tile_col) = out.origin();
    let (lane, bias_base) = (thread::lane_id(), gr * g.kg);
    // Bias and ReLU in f32 on a copy of each fragment (its element i is at
    // `c_coord(lane, i)`, so its column and bias are known), then one
    // rounding per element through the owned view. Written out (`unroll2`):
    // every accumulator a constant index, so they stay in registers.
    unroll2::<MI, NI>(
        #[inline(always)]
        |mi, ni| {
            let mut done = acc[mi][ni];
            for (i, v) in done.regs.iter_mut().enumerate() {
                let col = tile_col + ni * mma::N + mma::c_coord(lane, i).1;
                let b = if g.bias {
                    read(bias, bias_base + col)
                } else {
                    0.0
                };
                *v = g.finish(*v, b);
            }
            out.store_mma_c(mi, ni, &done, T::from_f32);
        },
    );
}
