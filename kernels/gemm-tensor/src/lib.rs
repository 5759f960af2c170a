//! Tensor-core GEMM: `D = alpha·op(A)·op(B) + beta·C`, written in place of
//! `C`, with f16 or bf16 `A` and `B` (`mma.sync.m16n8k16`) or f32 `A` and
//! `B` rounded to tf32 (`mma.sync.m16n8k8`, the opt-in TF32 path), f32
//! accumulation on the tensor cores, and `C`/`D` in f32, f16 or bf16.
//!
//! Layouts and `op` are as for the SIMT kernels (`warpforge-kernels-gemm-simt`): row-major with
//! leading dimensions, `TA`/`TB` meaning `A`/`B` are stored transposed.
//!
//! One generic body ([`gemm_tc`]) serves every instance. An [`MmaTile`] —
//! written once per configuration (below) — fixes
//! the block tile `BM × BN`, its k-step `BK`, the warp tile `WM × WN` (a
//! block's warps in a `(BM/WM) × (BN/WN)` grid, numbered row-major, as
//! [`WarpGrid`] maps them) and the pipeline depth `S`; from it come the
//! threads per block ([`MmaTile::threads`]), the shared memory
//! ([`MmaTile::shared_len`]), the kernel names (`_{BM}x{BN}x{BK}_s{S}`) and
//! the host's grid (`warpforge::gemm`, which also picks the configuration).
//!
//! The configurations are [`TC_TILE`], [`TC_TILE_LARGE`] and [`TC_TILE_WIDE`]
//! (f16/bf16) and [`TF32_TILE`], [`TF32_TILE_LARGE`]; the table of their
//! parameters, threads, shared memory and kernels is generated from these
//! constants into the repository's `docs/gemm.md` (with the design notes and
//! measurements), and a test fails when the two disagree.
//!
//! The tf32 tiles are the 16-bit ones with half the k-step: a stored row of
//! `BK` f32 is as long as one of `2·BK` halves, and copy chunks and padding
//! are alike in bytes, so a stage takes the same bytes where its rows run
//! along k (the largest layout, NT) and less where k counts rows (their
//! padding is counted half as often); each k-step is two `m16n8k8` slices
//! instead of two `m16n8k16`. Rounding to tf32 exactly (`cvt.rna`) costs 3
//! instructions an element on sm_80/sm_90, and a block rounds each of its
//! `(BM + BN)·BK` stage elements once: `32·(BM + BN)/(BM·BN)` elements per
//! `mma`, 0.5 for the large tile, 1.0 for the small one — at least 3.5
//! instructions per `mma` on rounding alone, whatever its warps, so the
//! small tf32 tile cannot be as lean per `mma` as the others; it is the one
//! that keeps small grids busy (its 4× more blocks).
//! Each tile is written in elements of its input type ([`MmaTile::of`]):
//! [`MmaTile::chunk`] elements are one 16-byte copy chunk, [`MmaTile::pad`]
//! elements pad each stored row.
//!
//! Per `mma`, the large tile's 64 × 64 warp tile loads 0.25 `ldmatrix.x4`
//! (4 A and 4 B per 32 `mma`s), against the small one's 0.75 (4 A and 2 B
//! per 8): shared-memory bandwidth, not the tensor cores, bounds a warp
//! tile as narrow as 64 × 16 or 64 × 32 (each `ldmatrix.x4` reads 512
//! bytes, 4 cycles of an SM's 128 bytes per cycle, about what two
//! `m16n8k16` take), and its 128 × 128 block tile reads half the global
//! bytes of a 64 × 64 one. Its 128 threads hold 128 accumulators each
//! (223–242 registers, no spills), so 2 blocks run per SM, and one block's
//! barrier leaves the other's warps issuing. It is instantiated for the pairs whose output is f32 or the input type
//! (the mixed f16 → bf16 and bf16 → f16 outputs keep the 64 × 64 tile only,
//! to keep the PTX module smaller).
//!
//! Per block (each owns a `BM × BN` tile of `C`, at
//! [`WarpGrid`]`::block_origin`: the blocks take the tiles in bands of
//! [`BLOCK_BANDS`] tile rows, for L2 reuse), k-steps of `BK` flow through an `S`-stage ring of
//! shared-memory buffers:
//! 1. **load stage** (`load_tile`): the block copies the `op(A)` and
//!    `op(B)` slices of a k-step into a stage, each in its stored
//!    orientation (rows padded by 16 bytes against bank conflicts; tf32's
//!    k-major slices by 32 bytes, [`MmaTile::k_major_pad`]), in
//!    chunks of 16 bytes (8 halves, 4 f32), each asked of the operand's
//!    [`TileSource`]. For the GEMM's stored matrices ([`Stored`]): a chunk wholly inside its matrix
//!    whose global address is 16-byte aligned is copied by `cp.async`; any
//!    other chunk (a ragged edge, an odd leading dimension or buffer offset)
//!    is loaded element by element with plain shared stores, elements
//!    outside the matrix as zero. So one kernel is both the aligned fast
//!    path (every chunk a `cp.async` when `lda`/`ldb` are multiples of 8 and
//!    the buffers 16-byte aligned) and the guarded path; the test is per
//!    chunk and never reads outside `A` or `B`. That per-chunk path is the
//!    **guarded** path, for edge blocks.
//! 2. **pipeline**: `S − 1` k-steps are in flight; at step `kt` each thread
//!    waits until at most `S − 2` of its groups are pending (step `kt` has
//!    landed), a barrier publishes it (and frees the stage read at `kt − 1`),
//!    the block issues step `kt + S − 1` into that freed stage, then:
//! 3. **ldmatrix → mma** (from a [`FragmentSource`]: the stages' alignment
//!    checked once, no check or branch per fragment load): for each `K`-deep
//!    slice of the stage (`K` = [`MmaInput::K`]: 16, or 8 for tf32), each
//!    warp loads the `WM/16` A fragments of its own rows and the `WN/8` B
//!    fragments of its own columns with `ldmatrix` (`.trans` where the
//!    stored orientation asks for it; for f32, plain shared loads there,
//!    since `.trans` moves 16-bit elements only, and every f32 fragment
//!    rounded to tf32) and issues `WM/16 · WN/8` `mma.sync` into its f32
//!    accumulators. A k-major f32 A is read with its rows *paired*
//!    ([`MmaOrder`]): rows `g`, `g + 8` of each 16 from stored rows `2g`,
//!    `2g + 1`, so that on the lean path each lane's register pairs are one
//!    64-bit load each; the accumulators then hold C with those rows
//!    permuted within each 16, which the epilogue's view (`WarpGrid<…, RP>`,
//!    the order a type parameter of the kernel) writes back in place.
//!
//! **The lean path** ([`pipeline_interior`]): before its k-loop each block
//! asks both operands once for an [`InteriorPanel`] of its whole k-range
//! (every k-step's tile inside the matrix, in bounds and 16-byte aligned: an
//! interior block of a GEMM whose `k` is a multiple of `BK`, with 16-byte
//! aligned leading dimensions and buffers). When both are proven, the same
//! three steps run with everything per access decided once: the stages are a
//! [`StageRing`] (checked against the shared view once; the k-loop is
//! written out over its `S` stages, so each [`Stage`] is a constant); each thread's share
//! of a stage's copy is a [`PanelCopies`] (its chunks' source pointers and
//! shared offsets computed once, the sources advanced by the panel's step,
//! every `cp.async` predicated on a k-step being left: no branch); each
//! lane's fragment loads are [`StageWindow`]s (the lane's `ldmatrix` start
//! computed and clamped once per layout, each load the stage's address plus
//! a constant, `ldmatrix.x4` for B too, two fragments a load); the k-slice
//! and fragment loops are written out ([`unroll()`]). Every check that picks
//! the path is uniform over the block (ptxas then needs no WARPSYNC at the
//! barrier), and each unchecked access is a method of a value only its check
//! makes. The k-tile loop is then its `cp.async`s, a wait, a barrier, the
//! `ldmatrix`s and the `mma`s: 2.1 instructions per HMMA for the 128 × 128
//! tile, 3.6 for the 64 × 64 (sm_90; `cli/sass-budget.toml` holds the
//! limits). Its stages differ from the guarded path's in two ways: 16-bit
//! rows are unpadded with their 16-byte chunks XOR-swizzled
//! ([`ChunkPlacement`], as CUTLASS/CuTe lay out `ldmatrix` tiles), so neither
//! the `cp.async` stores nor the `ldmatrix` loads meet a bank conflict (the
//! emulator's profile counts none; padded rows cost the stores 1.5
//! wavefronts per request); and tf32 stages are rounded in place as they
//! land, once per element, by the threads that copied them — the large
//! tile's k-major panels also interleaved there, rows k and k + 4 side by
//! side (each thread copies both: 4 rows a pass), so that an A fragment is
//! one 128-bit load ([`AKMajorInterleaved`]) instead of two 64-bit ones and
//! a B fragment one 64-bit load ([`BKMajorInterleaved`]) instead of two
//! 32-bit ones, their rows padded by 16 bytes. The fragments
//! are double-buffered: each k-slice's loads issue before the previous
//! slice's `mma`s, and the next stage's first slice before the last one's.
//! The implicit-GEMM NHWC convolution (`warpforge-kernels-conv`) runs the same
//! pipeline with a gathering fill instead of [`PanelCopies`] ([`StageFill`]).
//!
//! A Hopper main loop (sm_90a: TMA into the stages, `wgmma` reading them
//! straight from shared memory) replaces steps 1–3 — a [`StageFill`] and
//! the ldmatrix → mma body — and nothing else: the tile
//! parameters, the epilogue and the host side stay as they are.
//!
//! The epilogue writes each warp's accumulators through its [`WarpGrid`]
//! tile, [`WarpTile::update_mma_c`](warpforge_device::own::WarpTile::update_mma_c)
//! (owned: no two lanes write one element): in f32, `d = alpha·acc` when
//! `beta = 0` (C is never read, so NaN in C does not leak), else
//! `fma(beta, c, alpha·acc)`; then rounded to the output type (nearest,
//! ties to even). When `alpha = 0` the k-loop is skipped (`D = beta·C`, A and
//! B not read).
//!
//! This crate is the library's tensor-core (`mma.sync`) GEMM family, one PTX
//! module of its own (`warpforge-kernels-gemm-tensor`; the `gemm` feature of
//! `warpforge`). Its main loops and tiles are also what the convolutions
//! build on: they depend on it without the `entries` feature, so its kernels
//! are not compiled into their module again.
#![cfg_attr(target_arch = "nvptx64", no_std)]
// The `gpu-kernel` ABI is for the `#[kernel]` entries, which only `entries` has.
#![cfg_attr(
    all(target_arch = "nvptx64", feature = "entries"),
    feature(abi_gpu_kernel)
)]
// `#[inline(always)]` on the hot loops' closures (`unroll`): LLVM declines to
// inline a large closure otherwise, and its captures (the accumulators) would
// go to the stack.
#![feature(stmt_expr_attributes)]
#![forbid(unsafe_code)]

pub mod dgemm;

use warpforge_device::mma::{
    self, AKMajor, AKMajorInterleaved, ARowMajor, BKMajorInterleaved, BKMajorPair, BNMajorPair,
    ChunkPlacement, FragA, FragB, FragC, FragmentLayout, FragmentSource, InteriorPanel, MmaInput,
    MmaKind, MmaOrder, PanelCopies, Stage, StageRing, StageWindow, dmma, row_elems,
};
use warpforge_device::shared::{self, SharedArray, SharedElement};
use warpforge_device::sync::sync_threads;
use warpforge_device::unroll::{self, unroll, unroll_upto, unroll2};
use warpforge_device::{Dim3, Global, bf16, f16, thread};
#[cfg(feature = "entries")]
use {
    warpforge_device::{OutMatrix, own::WarpGrid},
    warpforge_macros::kernel,
};

/// A tensor-core block tile: `m × n` elements of `C` per block, `k` the depth
/// of each pipeline stage, `warp_m × warp_n` each warp's tile (the block's
/// warps in an `(m / warp_m) × (n / warp_n)` grid, numbered row-major),
/// `stages` the pipeline depth, all counted in elements of the input type,
/// whose size is `elem_bytes` (2 for f16/bf16, 4 for tf32). Everything the
/// kernel and the host derive from it is a `const fn` here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmaTile {
    /// Rows of `C` per block (`BM`).
    pub m: usize,
    /// Columns of `C` per block (`BN`).
    pub n: usize,
    /// Depth of one k-step (`BK`).
    pub k: usize,
    /// Rows of each warp's tile (`WM`); `m / warp_m` rows of warps.
    pub warp_m: usize,
    /// Columns of each warp's tile (`WN`); `n / warp_n` warps per row.
    pub warp_n: usize,
    /// Shared-memory stages of the `cp.async` pipeline (`S`).
    pub stages: usize,
    /// Bytes of one input element: 2 (f16, bf16), 4 (f32 as tf32) or 8
    /// (f64, `mma.sync.m8n8k4`: [`dmma`]).
    pub elem_bytes: usize,
}

impl MmaTile {
    /// The tile with these parameters, for 16-bit (f16, bf16) inputs.
    pub const fn new(
        m: usize,
        n: usize,
        k: usize,
        warp_m: usize,
        warp_n: usize,
        stages: usize,
    ) -> MmaTile {
        MmaTile {
            m,
            n,
            k,
            warp_m,
            warp_n,
            stages,
            elem_bytes: 2,
        }
    }

    /// The tile with these parameters for inputs of type `T`.
    pub const fn of<T>(
        m: usize,
        n: usize,
        k: usize,
        warp_m: usize,
        warp_n: usize,
        stages: usize,
    ) -> MmaTile {
        MmaTile {
            elem_bytes: core::mem::size_of::<T>(),
            ..MmaTile::new(m, n, k, warp_m, warp_n, stages)
        }
    }

    /// Elements of one 16-byte copy chunk (one `cp.async`, one `ldmatrix`
    /// row): 8 halves or 4 f32.
    pub const fn chunk(&self) -> usize {
        16 / self.elem_bytes
    }

    /// Elements of padding after each stored row of a stage whose rows run
    /// along k: 16 bytes, so that the 8 rows an `ldmatrix` reads fall in
    /// distinct banks.
    pub const fn pad(&self) -> usize {
        self.chunk()
    }

    /// Elements of padding after each stored row of a stage whose rows run
    /// along m or n (a k-major slice: `A` transposed, `B` not): [`pad`]
    /// for the 16-bit types (`ldmatrix.trans`); 32 bytes for tf32, whose
    /// k-major fragments are plain 32-bit loads of 4 rows (k) × 8 columns:
    /// with rows 8 banks apart (a row of 64 or 128 f32 plus 8) the 32 lanes
    /// hit 32 distinct banks, where 16-byte padding puts them 4 banks apart
    /// and half the lanes share a bank with another (2 wavefronts a load).
    ///
    /// [`pad`]: Self::pad
    pub const fn k_major_pad(&self) -> usize {
        if self.elem_bytes == 4 {
            2 * self.chunk()
        } else {
            self.pad()
        }
    }

    /// f64 ([`dmma`]) pads every stored row by 32 bytes, along k or not:
    /// a lane's fragment element is `g·stride + t` or `t·stride + g` (`g =
    /// lane / 4`, `t = lane % 4`), and a 64-bit shared load is served a
    /// half-warp at a time, whose 16 lanes (4 values of the one index, 4 of
    /// the other) meet no bank twice exactly when the rows start 8 banks
    /// apart: a stride ≡ 4 (mod 16) elements, which the tiles' rows (16 or
    /// 64 f64) plus 4 are.
    const fn f64_pad(&self) -> usize {
        2 * self.chunk()
    }

    /// The padding after a stored row that runs along k (`along_k`) or not.
    const fn row_pad(&self, along_k: bool) -> usize {
        if self.elem_bytes == 8 {
            self.f64_pad()
        } else if along_k {
            self.pad()
        } else {
            self.k_major_pad()
        }
    }

    /// Depth of one `mma`: 16 (`m16n8k16`, 16-bit inputs) or 8 (`m16n8k8`, tf32).
    pub const fn mma_k(&self) -> usize {
        match self.elem_bytes {
            4 => 8,
            8 => dmma::K,
            _ => mma::K,
        }
    }

    /// Rows of one `mma`'s `C`: 16 (`m16n8k*`), or 8 for f64 (`m8n8k4`);
    /// its columns are 8 either way.
    pub const fn mma_m(&self) -> usize {
        if self.elem_bytes == 8 {
            dmma::M
        } else {
            mma::M
        }
    }

    /// Warps per block: `(m / warp_m) · (n / warp_n)`.
    pub const fn warps(&self) -> usize {
        (self.m / self.warp_m) * (self.n / self.warp_n)
    }

    /// Threads per block.
    pub const fn threads(&self) -> usize {
        self.warps() * 32
    }

    /// `(rows, row stride)` in elements of one stage's `A` slice, stored as
    /// `A` is: `BM × BK`, or `BK × BM` when transposed.
    pub const fn a_layout(&self, trans_a: bool) -> (usize, usize) {
        if trans_a {
            (self.k, self.m + self.row_pad(false))
        } else {
            (self.m, self.k + self.row_pad(true))
        }
    }

    /// `(rows, row stride)` of one stage's `B` slice: `BK × BN`, or `BN × BK`
    /// when transposed.
    pub const fn b_layout(&self, trans_b: bool) -> (usize, usize) {
        if trans_b {
            (self.n, self.k + self.row_pad(true))
        } else {
            (self.k, self.n + self.row_pad(false))
        }
    }

    /// Elements of one stage's `A` slice.
    pub const fn a_len(&self, trans_a: bool) -> usize {
        let (rows, stride) = self.a_layout(trans_a);
        rows * stride
    }

    /// Elements of one stage (`A` then `B`).
    pub const fn stage_len(&self, trans_a: bool, trans_b: bool) -> usize {
        let (rows, stride) = self.b_layout(trans_b);
        self.a_len(trans_a) + rows * stride
    }

    /// Elements (of the input type) of shared memory per block: every stage.
    pub const fn shared_len(&self, trans_a: bool, trans_b: bool) -> usize {
        self.stages * self.stage_len(trans_a, trans_b)
    }

    /// Bytes of shared memory per block.
    pub const fn shared_bytes(&self, trans_a: bool, trans_b: bool) -> usize {
        self.shared_len(trans_a, trans_b) * self.elem_bytes
    }

    /// Bytes of shared memory per block for the transposes that need the
    /// most (what a device must allow for every instance of the tile).
    pub const fn max_shared_bytes(&self) -> usize {
        let (nn, nt) = (
            self.shared_bytes(false, false),
            self.shared_bytes(false, true),
        );
        let (tn, tt) = (
            self.shared_bytes(true, false),
            self.shared_bytes(true, true),
        );
        let a = if nn > nt { nn } else { nt };
        let b = if tn > tt { tn } else { tt };
        if a > b { a } else { b }
    }

    /// Whether the kernel can use this tile: 2-, 4- or 8-byte inputs, warp tiles
    /// of whole `mma` tiles that divide the block tile, whole chunks per
    /// stored row, at most 1024 threads, and 2–9 stages
    /// (`cp.async.wait_group` takes 0–7 pending groups).
    pub const fn is_valid(&self) -> bool {
        (self.elem_bytes == 2 || self.elem_bytes == 4 || self.elem_bytes == 8)
            && self.m > 0
            && self.warp_m > 0
            && self.warp_n > 0
            && self.k > 0
            && self.warp_m.is_multiple_of(mma::M)
            && self.m.is_multiple_of(self.warp_m)
            && self.warp_n.is_multiple_of(mma::N)
            && self.n.is_multiple_of(self.warp_n)
            && self.n > 0
            && self.k.is_multiple_of(self.mma_k())
            && self.k.is_multiple_of(self.chunk())
            && self.m.is_multiple_of(self.chunk())
            && self.n.is_multiple_of(self.chunk())
            && self.threads() <= 1024
            && self.stages >= 2
            && self.stages <= 9
    }
}

/// The small tensor-core tile: 64 × 64 per block, k-step 32, four 64 × 16
/// warp tiles side by side (128 threads), 3 stages: 27–30 KiB of shared
/// memory (under the 48 KiB every launch gets without opting in). Many
/// blocks: the tile for shapes whose large-tile grid would leave SMs idle.
pub const TC_TILE: MmaTile = MmaTile::new(64, 64, 32, 64, 16, 3);

/// The large tensor-core tile: 128 × 128 per block, k-step 32, four 64 × 64
/// warp tiles as 2 × 2 (128 threads), 4 stages: 68–80 KiB of shared memory
/// (dynamic, above 48 KiB: the host opts in; every target from sm_80 allows
/// it, sm_86/sm_89 up to 99 KiB). Three times the `mma`s per loaded
/// fragment of the small tile (module docs): the tile for large GEMMs.
pub const TC_TILE_LARGE: MmaTile = MmaTile::new(128, 128, 32, 64, 64, 4);

/// The wide tensor-core tile: 128 × 256 per block, k-step 32, eight 64 × 64
/// warp tiles as 2 × 4 (256 threads), 3 stages: 75–90 KiB of shared memory
/// (dynamic, opt-in; within sm_86/sm_89's 99 KiB, where 4 stages would not
/// be). The same warp tile as [`TC_TILE_LARGE`], so the same `mma`s per
/// loaded fragment, with a quarter fewer global bytes per `mma`
/// (`(128 + 256)·32` elements per k-step for `128·256·32` multiply-adds,
/// against `(128 + 128)·32` for half as many) and 6 copy chunks a thread
/// per k-step instead of 8. One block of 8 warps per SM (≤ 255 registers a
/// thread): the tile for GEMMs large enough to fill the GPU twice over with
/// it (CUTLASS's sm80 default for large f16 GEMMs has this shape).
pub const TC_TILE_WIDE: MmaTile = MmaTile::new(128, 256, 32, 64, 64, 3);

/// The small tf32 tile: [`TC_TILE`]'s blocks and warps with a k-step of 16
/// f32, no more bytes per stage (27–30 KiB in all).
pub const TF32_TILE: MmaTile = MmaTile::of::<f32>(64, 64, 16, 64, 16, 3);

/// The large tf32 tile: [`TC_TILE_LARGE`]'s blocks and warps with a k-step
/// of 16 f32, no more bytes per stage (68–80 KiB, dynamic: the host opts in).
pub const TF32_TILE_LARGE: MmaTile = MmaTile::of::<f32>(128, 128, 16, 64, 64, 4);

const _: () = assert!(TC_TILE.is_valid() && TC_TILE.shared_bytes(true, false) <= 48 * 1024);
const _: () = assert!(TC_TILE_LARGE.is_valid() && TC_TILE_LARGE.max_shared_bytes() <= 99 * 1024);
const _: () = assert!(TC_TILE_WIDE.is_valid() && TC_TILE_WIDE.max_shared_bytes() <= 99 * 1024);
const _: () = assert!(TF32_TILE.is_valid() && TF32_TILE.max_shared_bytes() <= 48 * 1024);
const _: () = assert!(
    TF32_TILE_LARGE.is_valid()
        && TF32_TILE_LARGE.max_shared_bytes() == TC_TILE_LARGE.max_shared_bytes()
);

/// The most k-slices (`BK / K` of one `mma`) a stage holds: every tile has 2
/// (`k_step` writes its slice loop out for at most this many, and checks it).
const MAX_SLICES: usize = 2;

// The tiles' parameters as plain constants, the form `instances(...)` takes,
// with the fragments per warp tile (the accumulator array's shape; derived,
// since array lengths cannot be computed from const generics).
const TC_M: usize = TC_TILE.m;
const TC_N: usize = TC_TILE.n;
#[cfg(feature = "entries")]
const TC_K: usize = TC_TILE.k;
const TC_WM: usize = TC_TILE.warp_m;
const TC_WN: usize = TC_TILE.warp_n;
const TC_S: usize = TC_TILE.stages;
#[cfg(feature = "entries")]
const TC_MI: usize = TC_WM / mma::M;
#[cfg(feature = "entries")]
const TC_NI: usize = TC_WN / mma::N;
const TL_M: usize = TC_TILE_LARGE.m;
const TL_N: usize = TC_TILE_LARGE.n;
#[cfg(feature = "entries")]
const TL_K: usize = TC_TILE_LARGE.k;
const TL_WM: usize = TC_TILE_LARGE.warp_m;
const TL_WN: usize = TC_TILE_LARGE.warp_n;
const TL_S: usize = TC_TILE_LARGE.stages;
#[cfg(feature = "entries")]
const TL_MI: usize = TL_WM / mma::M;
#[cfg(feature = "entries")]
const TL_NI: usize = TL_WN / mma::N;
#[cfg(feature = "entries")]
const TW_M: usize = TC_TILE_WIDE.m;
#[cfg(feature = "entries")]
const TW_N: usize = TC_TILE_WIDE.n;
#[cfg(feature = "entries")]
const TW_K: usize = TC_TILE_WIDE.k;
#[cfg(feature = "entries")]
const TW_WM: usize = TC_TILE_WIDE.warp_m;
#[cfg(feature = "entries")]
const TW_WN: usize = TC_TILE_WIDE.warp_n;
#[cfg(feature = "entries")]
const TW_S: usize = TC_TILE_WIDE.stages;
#[cfg(feature = "entries")]
const TW_MI: usize = TW_WM / mma::M;
#[cfg(feature = "entries")]
const TW_NI: usize = TW_WN / mma::N;
// The tf32 tiles differ from the 16-bit ones in k only (asserted).
#[cfg(feature = "entries")]
const TF_K: usize = TF32_TILE.k;
#[cfg(feature = "entries")]
const TFL_K: usize = TF32_TILE_LARGE.k;
const _: () = assert!(
    TF32_TILE.m == TC_M
        && TF32_TILE.n == TC_N
        && TF32_TILE.warp_m == TC_WM
        && TF32_TILE.warp_n == TC_WN
        && TF32_TILE.stages == TC_S
        && TF32_TILE_LARGE.m == TL_M
        && TF32_TILE_LARGE.n == TL_N
        && TF32_TILE_LARGE.warp_m == TL_WM
        && TF32_TILE_LARGE.warp_n == TL_WN
        && TF32_TILE_LARGE.stages == TL_S
);

/// The tensor-core kernels take their block tiles in bands of this many tile
/// rows ([`WarpGrid`]'s `G`, [`warpforge_device::own::grouped_block`]):
/// consecutive blocks walk down 8 row tiles, then the next column, so the
/// 264 blocks an H100 holds at once (2 per SM) read 8 row panels of `A` and
/// about 33 column panels of `B` per wave, where row-major order reads
/// every column panel (64 at 8192²) with 4 row panels.
pub const BLOCK_BANDS: usize = 8;

/// What a pipeline stage holds and `load_tile` copies in 16-byte chunks:
/// every [`Input`], and f64 ([`dmma`]).
pub trait StageElement: SharedElement + Copy {
    /// `0`: what a chunk outside its matrix holds.
    const ZERO: Self;
    /// Elements of one 16-byte copy chunk (one `cp.async`).
    const CHUNK: usize = row_elems::<Self>();
}

impl<T: Input> StageElement for T {
    const ZERO: T = <T as Input>::ZERO;
    const CHUNK: usize = <T as Input>::CHUNK;
}

impl StageElement for f64 {
    const ZERO: f64 = 0.0;
}

/// Input element types of the `mma.sync` f32-accumulating kernels: f16,
/// bf16, and f32 (rounded to tf32 as its fragments load).
pub trait Input: MmaInput + Copy {
    /// `0`.
    const ZERO: Self;
    /// Elements of one 16-byte copy chunk (one `cp.async`): 8 halves, 4 f32.
    const CHUNK: usize = row_elems::<Self>();
}

impl Input for f16 {
    const ZERO: f16 = f16::ZERO;
}

impl Input for bf16 {
    const ZERO: bf16 = bf16::ZERO;
}

impl Input for f32 {
    const ZERO: f32 = 0.0;
}

pub use warpforge_device::num::Output;

/// Where a stage's operand slice comes from: a stored row-major matrix
/// ([`Stored`], the GEMM's `A` and `B`) or a matrix computed on the fly (the
/// convolution's im2col gather, `warpforge-kernels-conv`). `load_tile` walks a slice in
/// 16-byte chunks of a stored row (`T::CHUNK` elements: 8 halves, 4
/// f32) and asks the source for each one.
pub trait TileSource<T: StageElement> {
    /// Copies stored row `row`, columns `col .. col + c` to
    /// `smem[dst .. dst + c]`, `c = T::CHUNK` (16 bytes): by
    /// `cp.async` where the source can (the
    /// copy lands at the thread's next `cp.async` wait), else by plain
    /// stores, zero for every element outside the matrix.
    fn load_chunk(&self, smem: &SharedArray<T>, dst: usize, row: usize, col: usize);

    /// The block's whole k-range of this operand as an [`InteriorPanel`]:
    /// `steps` tiles of `ROWS × COLS` stored elements, the first at stored
    /// `(r0, c0)`, the next ones `ROWS` rows further (`k_along_rows`) or
    /// `COLS` columns further, if every one is inside the matrix, in bounds
    /// and 16-byte aligned: then the main loop copies them with no check per
    /// chunk. `None` (the default, and any edge or misaligned block) takes
    /// the chunk-by-chunk [`load_chunk`](Self::load_chunk) path.
    #[inline(always)]
    fn interior_panel<const ROWS: usize, const COLS: usize>(
        &self,
        (r0, c0): (usize, usize),
        k_along_rows: bool,
        steps: usize,
    ) -> Option<InteriorPanel<'_, T, ROWS, COLS>> {
        let _ = (r0, c0, k_along_rows, steps);
        None
    }
}

/// A stored `rows × cols` matrix, rows `ld` apart, starting `off` elements
/// into `src` (its batch).
#[derive(Clone, Copy)]
pub struct Stored<'a, T> {
    /// The buffer.
    pub src: Global<'a, T>,
    /// Row stride (elements).
    pub ld: usize,
    /// First element (the batch's offset).
    pub off: usize,
    /// Stored rows and columns.
    pub rows: usize,
    pub cols: usize,
}

impl<T: StageElement> TileSource<T> for Stored<'_, T> {
    /// A chunk wholly inside the matrix at a 16-byte aligned address goes by
    /// `cp.async`; any other by plain stores, zero outside the matrix,
    /// without reading outside it.
    #[inline(always)]
    fn load_chunk(&self, smem: &SharedArray<T>, dst: usize, gr: usize, gc: usize) {
        let (rows, cols, chunk) = (self.rows, self.cols, T::CHUNK);
        // gr < rows: gr·ld + gc is within the buffer the host checked.
        let whole = gr < rows && gc + chunk <= cols;
        let at = self
            .off
            .wrapping_add(gr.wrapping_mul(self.ld))
            .wrapping_add(gc);
        if whole && is_aligned(self.src, at) {
            mma::cp_async_16(smem, dst, self.src, at);
        } else {
            for q in 0..chunk {
                let v = if gr < rows && gc + q < cols {
                    self.src.get(at + q).copied().unwrap_or(T::ZERO)
                } else {
                    T::ZERO
                };
                smem.store(dst + q, v);
            }
        }
    }

    /// Every tile inside the `rows × cols` matrix (so no element of it is
    /// a zero pad) and the panel proven in bounds and aligned in `src`.
    #[inline(always)]
    fn interior_panel<const ROWS: usize, const COLS: usize>(
        &self,
        (r0, c0): (usize, usize),
        k_along_rows: bool,
        steps: usize,
    ) -> Option<InteriorPanel<'_, T, ROWS, COLS>> {
        let (row_end, col_end, step) = if k_along_rows {
            (
                steps.checked_mul(ROWS)?.checked_add(r0)?,
                c0.checked_add(COLS)?,
                ROWS.checked_mul(self.ld)?,
            )
        } else {
            (
                r0.checked_add(ROWS)?,
                steps.checked_mul(COLS)?.checked_add(c0)?,
                COLS,
            )
        };
        if row_end > self.rows || col_end > self.cols {
            return None;
        }
        let origin = self
            .off
            .checked_add(r0.checked_mul(self.ld)?)?
            .checked_add(c0)?;
        InteriorPanel::check(self.src, origin, self.ld, step, steps)
    }
}

/// Whether element `at` of `src` is at a 16-byte aligned address (a
/// `cp.async` of 16 bytes needs it).
#[inline(always)]
pub fn is_aligned<T>(src: Global<'_, T>, at: usize) -> bool {
    (src.as_ptr() as usize)
        .wrapping_add(at.wrapping_mul(core::mem::size_of::<T>()))
        .is_multiple_of(16)
}

/// Copies the `ROWS × COLS` slice at stored `(r0, c0)` of `src` to
/// `smem[base..]` (rows `stride` apart), the block's `threads` threads taking
/// consecutive 16-byte chunks (coalesced), each by
/// [`TileSource::load_chunk`].
#[inline(always)]
fn load_tile<T: StageElement, Src: TileSource<T>, const ROWS: usize, const COLS: usize>(
    smem: &SharedArray<T>,
    base: usize,
    stride: usize,
    src: &Src,
    (r0, c0): (usize, usize),
    (t, threads): (usize, usize),
) {
    let chunk = T::CHUNK;
    let per_row = COLS / chunk;
    let mut e = t;
    while e < ROWS * per_row {
        let (r, c) = (e / per_row, (e % per_row) * chunk);
        src.load_chunk(smem, base + r * stride + c, r0 + r, c0 + c);
        e += threads;
    }
}

/// The entry of every tensor-core kernel (the GEMM and the implicit-GEMM
/// convolutions): checks at compile time that `MmaTile::of::<T>(BM, BN, BK,
/// WM, WN, S)` is a valid tile whose warp tiles are `MI × NI` `mma`
/// fragments, and at run time that the block is the 1-D block of its
/// threads which the thread → chunk and warp → tile maps assume (a uniform
/// check: every thread traps alike, before any barrier). Returns this
/// thread's index in the block and the origin `(blockIdx.y·BM,
/// blockIdx.x·BN)` of the block's tile in launch order (the NCHW
/// convolution's; the kernels whose output map takes the tiles in bands read
/// theirs from it: `WarpGrid::block_origin`).
#[inline(always)]
pub fn enter_block_tile<
    T,
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const WM: usize,
    const WN: usize,
    const S: usize,
    const MI: usize,
    const NI: usize,
>() -> (usize, (usize, usize)) {
    const {
        assert!(
            MmaTile::of::<T>(BM, BN, BK, WM, WN, S).is_valid()
                && MI * MmaTile::of::<T>(BM, BN, BK, WM, WN, S).mma_m() == WM
                && NI * mma::N == WN,
            "an invalid tensor-core tile"
        )
    };
    let threads = MmaTile::of::<T>(BM, BN, BK, WM, WN, S).threads();
    assert!(
        thread::block_dim() == Dim3::x(threads as u32),
        "tensor-core kernel: launch with a 1-D block of MmaTile::threads() threads"
    );
    let block = thread::block_idx();
    (
        thread::linear_thread_id() as usize,
        (block.y as usize * BM, block.x as usize * BN),
    )
}

/// Steps 1–3 of the module docs for one block: `ktiles` k-steps of
/// `op(A)·op(B)` for the `BM × BN` tile at `(row0, col0)`, `A` and `B` from
/// any [`TileSource`] (stored as `TA`/`TB` say), into this warp's
/// accumulators (its `WM × WN` tile at `(warp_row, warp_col)` of the block
/// tile, `WM = 16·MI`, `WN = 8·NI`); the tile is [`MmaTile::of`]`::<TIn>`.
/// Shared by the GEMM kernels and the implicit-GEMM convolutions, so there
/// is one tensor-core main loop. Every thread of the block must call it
/// (barriers); `t` is the thread's index in its 1-D block.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn main_loop<
    TIn: Input,
    A: TileSource<TIn>,
    B: TileSource<TIn>,
    const TA: bool,
    const TB: bool,
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const WM: usize,
    const WN: usize,
    const S: usize,
    const MI: usize,
    const NI: usize,
>(
    a: &A,
    b: &B,
    ktiles: usize,
    (row0, col0): (usize, usize),
    t: usize,
    (warp_row, warp_col): (usize, usize),
) -> [[FragC; NI]; MI] {
    let tile = MmaTile::of::<TIn>(BM, BN, BK, WM, WN, S);
    let threads = tile.threads();
    let smem = shared::dynamic::<TIn>();
    let (_, sa) = tile.a_layout(TA);
    let (_, sb) = tile.b_layout(TB);
    let a_len = tile.a_len(TA);
    let stage_len = tile.stage_len(TA, TB);
    let me = (t, threads);

    // Once per block: is the block's whole k-range of A and B interior (every
    // k-step's tile inside its matrix, in bounds and 16-byte aligned)? Then
    // the lean pipeline: each thread's copies and fragment loads computed
    // once, no check per chunk or fragment. Otherwise (an edge block, a
    // ragged k, an odd leading dimension or buffer offset) the guarded one,
    // chunk by chunk (step 1 of the module docs). Every check is uniform over
    // the block. (The panels' shapes and fragment layouts are types: one arm
    // per transpose pair, of which each instance keeps the one its `TA`/`TB`
    // select.)
    // The lean path's stages: 16-bit rows unpadded, their chunks
    // XOR-swizzled (no bank conflict for the `cp.async` stores or the
    // `ldmatrix` loads); tf32 keeps the padded rows (its k-major fragments
    // are plain 32-bit loads, which this swizzle does not spread).
    let (a_rows, _) = tile.a_layout(TA);
    let (b_rows, _) = tile.b_layout(TB);
    let pad_a = if TA { tile.k_major_pad() } else { tile.pad() };
    let pad_b = if TB { tile.pad() } else { tile.k_major_pad() };
    let (sa_lean, place_a) = lean_rows::<TIn>(sa, pad_a);
    let (sb_lean, place_b) = lean_rows::<TIn>(sb, pad_b);
    // The interleaved k-major panels' rows, padded by 16 bytes (`interleaves`).
    let (sa_il, sb_il) = (
        if TA { BM + tile.pad() } else { sa_lean },
        if TB { sb_lean } else { BN + tile.pad() },
    );
    macro_rules! interior {
        ($ar:expr, $ac:expr, $a0:expr, $a_rows:expr, $la:ty, $sa:expr,
         $br:expr, $bc:expr, $b0:expr, $b_rows:expr, $lb:ty, $sb:expr, $fill:expr) => {{
            let (sa_lean, sb_lean) = ($sa, $sb);
            let a_len_lean = a_rows * sa_lean;
            if NI.is_multiple_of(2)
                && let Some(ring) = StageRing::check(&smem, a_len_lean + b_rows * sb_lean, S)
                && let Some(pa) = a.interior_panel::<{ $ar }, { $ac }>($a0, $a_rows, ktiles)
                && let Some(pb) = b.interior_panel::<{ $br }, { $bc }>($b0, $b_rows, ktiles)
                && let Some(ca) = pa.thread_copy(&ring, 0, sa_lean, place_a, me)
                && let Some(copies) = pb
                    .thread_copy(&ring, a_len_lean, sb_lean, place_b, me)
                    .and_then(|cb| ca.zip(cb))
                    .and_then($fill)
                && let Some(wa) = ring.window::<$la>(
                    a_offset::<TA>(warp_row, 0, sa_lean),
                    sa_lean,
                    a_at::<TA>((MI - 1) * mma::M, BK - TIn::K),
                    place_a,
                )
                && let Some(wb) = ring.window::<$lb>(
                    a_len_lean + b_offset::<TB>(warp_col, 0, sb_lean),
                    sb_lean,
                    b_at::<TB>((NI - 2) * mma::N, BK - TIn::K),
                    place_b,
                )
            {
                thread::path("lean");
                return pipeline_interior::<TIn, _, _, TA, TB, BK, S, MI, NI>(
                    &ring, copies, &wa, &wb, ktiles,
                );
            }
        }};
    }
    // One arm per instance: `TA`, `TB` and whether the tile interleaves are
    // constants, so an instance compiles only the lean pipeline it runs (a
    // `match` on `(TA, TB)`, or a guard on a local, would have every
    // instance compile every arm's). A's panel and fragment layout, then
    // B's, each stage's fill last.
    if TA {
        if TB {
            if const { interleaves::<TIn, BM, BN, BK, WM, WN, S>() } {
                interior!(
                    BK,
                    BM,
                    (0, row0),
                    true,
                    AKMajorInterleaved,
                    sa_il,
                    BN,
                    BK,
                    (col0, 0),
                    false,
                    BNMajorPair,
                    sb_lean,
                    PanelCopies::interleave_k_rows::<true, false>
                );
            } else {
                interior!(
                    BK,
                    BM,
                    (0, row0),
                    true,
                    AKMajor,
                    sa_lean,
                    BN,
                    BK,
                    (col0, 0),
                    false,
                    BNMajorPair,
                    sb_lean,
                    Some
                );
            }
        } else if const { interleaves::<TIn, BM, BN, BK, WM, WN, S>() } {
            interior!(
                BK,
                BM,
                (0, row0),
                true,
                AKMajorInterleaved,
                sa_il,
                BK,
                BN,
                (0, col0),
                true,
                BKMajorInterleaved,
                sb_il,
                PanelCopies::interleave_k_rows::<true, true>
            );
        } else {
            interior!(
                BK,
                BM,
                (0, row0),
                true,
                AKMajor,
                sa_lean,
                BK,
                BN,
                (0, col0),
                true,
                BKMajorPair,
                sb_lean,
                Some
            );
        }
    } else if TB {
        interior!(
            BM,
            BK,
            (row0, 0),
            false,
            ARowMajor,
            sa_lean,
            BN,
            BK,
            (col0, 0),
            false,
            BNMajorPair,
            sb_lean,
            Some
        );
    } else if const { interleaves::<TIn, BM, BN, BK, WM, WN, S>() } {
        interior!(
            BM,
            BK,
            (row0, 0),
            false,
            ARowMajor,
            sa_lean,
            BK,
            BN,
            (0, col0),
            true,
            BKMajorInterleaved,
            sb_il,
            PanelCopies::interleave_k_rows::<false, true>
        );
    } else {
        interior!(
            BM,
            BK,
            (row0, 0),
            false,
            ARowMajor,
            sa_lean,
            BK,
            BN,
            (0, col0),
            true,
            BKMajorPair,
            sb_lean,
            Some
        );
    }

    thread::path("guarded");
    // Step 1, guarded: k-step `kt` into stage `stage`, chunk by chunk.
    let load = |kt: usize, stage: usize| {
        let (base, p0) = (stage * stage_len, kt * BK);
        if TA {
            load_tile::<TIn, A, BK, BM>(&smem, base, sa, a, (p0, row0), me);
        } else {
            load_tile::<TIn, A, BM, BK>(&smem, base, sa, a, (row0, p0), me);
        }
        let base = base + a_len;
        if TB {
            load_tile::<TIn, B, BN, BK>(&smem, base, sb, b, (col0, p0), me);
        } else {
            load_tile::<TIn, B, BK, BN>(&smem, base, sb, b, (p0, col0), me);
        }
    };
    pipeline::<TIn, _, TA, TB, BM, BN, BK, WM, WN, S, MI, NI>(&load, ktiles, (warp_row, warp_col))
}

/// The lean path's row stride (elements) and chunk placement for a stage
/// slice whose guarded layout pads each row of `padded` elements by `pad`:
/// for 16-bit inputs, rows unpadded and swizzled when a row is a power of
/// two of 16-byte chunks; else (tf32, odd rows) the padded rows as stored.
#[inline(always)]
pub const fn lean_rows<TIn: Input>(padded: usize, pad: usize) -> (usize, ChunkPlacement) {
    let row = padded - pad;
    let bytes = row * core::mem::size_of::<TIn>();
    match ChunkPlacement::swizzled(bytes) {
        Some(place) if !matches!(TIn::KIND, MmaKind::Tf32) => (row, place),
        _ => (padded, ChunkPlacement::PLAIN),
    }
}

/// Whether the lean path of a tile stores its tf32 k-major panels rows k,
/// k + 4 interleaved: tf32 on a tile whose copy passes are 4 rows (the 128 ×
/// 128 tile), so that each thread holds both rows; an `A` fragment is then
/// one 128-bit load and a `B` fragment one 64-bit load
/// (`AKMajorInterleaved`, `BKMajorInterleaved`), their rows padded by 16
/// bytes (4 banks apart: the 8 rows a load's lanes read hit 32 distinct
/// banks).
const fn interleaves<
    TIn: Input,
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const WM: usize,
    const WN: usize,
    const S: usize,
>() -> bool {
    let tile = MmaTile::of::<TIn>(BM, BN, BK, WM, WN, S);
    let rows_a_pass = 4 * BM == tile.threads() * tile.chunk();
    let rows_b_pass = 4 * BN == tile.threads() * tile.chunk();
    matches!(TIn::KIND, MmaKind::Tf32) && rows_a_pass && rows_b_pass
}

/// `(rows, elements along a row)` in a stage's `A` slice (stored as `TA`
/// says) of A's element `(i, p)`: row `i` of the block tile, k `p`.
#[inline(always)]
pub const fn a_at<const TA: bool>(i: usize, p: usize) -> (usize, usize) {
    if TA { (p, i) } else { (i, p) }
}

/// `(rows, elements along a row)` in a stage's `B` slice (stored as `TB`
/// says) of op(B)'s element `(p, j)`: k `p`, column `j` of the block tile.
#[inline(always)]
pub const fn b_at<const TB: bool>(j: usize, p: usize) -> (usize, usize) {
    if TB { (j, p) } else { (p, j) }
}

/// Element offset in a stage's `A` slice (stored as `TA` says, rows `sa`
/// apart) of A's element `(i, p)`: row `i` of the block tile, k `p`.
#[inline(always)]
pub const fn a_offset<const TA: bool>(i: usize, p: usize, sa: usize) -> usize {
    if TA { p * sa + i } else { i * sa + p }
}

/// Element offset in a stage's `B` slice (stored as `TB` says, rows `sb`
/// apart) of op(B)'s element `(p, j)`: k `p`, column `j` of the block tile.
#[inline(always)]
pub const fn b_offset<const TB: bool>(j: usize, p: usize, sb: usize) -> usize {
    if TB { j * sb + p } else { p * sb + j }
}

/// What fills each stage of [`pipeline_interior`]: this thread's share of
/// the next k-step's copies (by `cp.async`, landing at its wait),
/// predicated off once no k-step is left. Uniform over the block.
pub trait StageFill {
    /// Starts filling `stage` with the next k-step, if one is left.
    fn fill(&mut self, stage: Stage);

    /// As [`fill`](Self::fill), but with zeros (this thread's share of the
    /// stage) if no k-step is left: the prologue's fill, so that every stage
    /// is initialised even when there are fewer k-steps than stages (the
    /// pipelined loop loads the stage after the last k-step's, and discards
    /// it, rather than branch).
    fn prime(&mut self, stage: Stage);

    /// This thread's copies into `stage` have landed (its wait), before the
    /// barrier that publishes them: finish them in place if the fragment
    /// loads need it (tf32's rounding). Nothing by default.
    #[inline(always)]
    fn landed(&mut self, stage: Stage) {
        let _ = stage;
    }

    /// The pipeline's prologue: [`prime`](Self::prime) stages `0 .. S` of
    /// `ring`, one `cp.async` group each (empty groups past the end keep
    /// the count uniform). A fill overrides it only to change how it is
    /// inlined (the NHWC conv's gather).
    #[inline(always)]
    fn prime_ring<T: SharedElement, const S: usize>(&mut self, ring: &StageRing<T>) {
        unroll::<S>(|s| {
            self.prime(ring.stage(s));
            mma::cp_async_commit();
        });
    }
}

impl<T: SharedElement + MmaInput, const A: bool, const B: bool> StageFill
    for PanelCopies<'_, T, A, B>
{
    #[inline(always)]
    fn fill(&mut self, stage: Stage) {
        self.copy_next(stage);
    }

    #[inline(always)]
    fn prime(&mut self, stage: Stage) {
        self.copy_next_or_zero(stage);
    }

    /// tf32: each element of the stage rounded once, by the thread that
    /// copied it (the fragment loads then round nothing), the k-major
    /// panels interleaved (rows k, k + 4) for [`AKMajorInterleaved`]'s and
    /// [`BKMajorInterleaved`]'s loads if `A`, `B`.
    #[inline(always)]
    fn landed(&mut self, stage: Stage) {
        self.round_landed(stage);
    }
}

/// Steps 2 and 3 for a block whose whole k-range is interior: the same
/// pipeline as the guarded `pipeline`, with each thread's share of every stage's copy
/// ([`StageFill`]: the next k-step's, predicated off once none is left:
/// [`PanelCopies`] for the GEMM, a gather for the convolutions) and its
/// warp's fragment loads ([`StageWindow`]) computed and checked once, so
/// that a k-step is its `cp.async`s, a wait, a barrier, the `ldmatrix`s at
/// constant offsets from the stage and the `mma`s, every loop over k-slices
/// and fragments written out ([`unroll()`]). `ktiles ≤ u32::MAX`.
#[inline(always)]
pub fn pipeline_interior<
    TIn: Input + SharedElement,
    LA: FragmentLayout<TIn, Frag = FragA<TIn>>,
    LB: FragmentLayout<TIn, Frag = [FragB<TIn>; 2]>,
    const TA: bool,
    const TB: bool,
    const BK: usize,
    const S: usize,
    const MI: usize,
    const NI: usize,
>(
    ring: &StageRing<TIn>,
    mut fill: impl StageFill,
    frags_a: &StageWindow<TIn, LA>,
    frags_b: &StageWindow<TIn, LB>,
    ktiles: usize,
) -> [[FragC; NI]; MI] {
    const { assert!(S >= 2, "a pipeline of at least 2 stages") };
    let mut acc = [[FragC::default(); NI]; MI];
    let slices = SliceLoads::<TIn, LA, LB, TA, TB> {
        a: frags_a,
        b: frags_b,
    };
    // A 32-bit count (the caller's `ktiles ≤ u32::MAX`).
    let mut left = ktiles.min(u32::MAX as usize) as u32;
    // Prologue: k-steps 0 .. S in flight, one group each; then step 0 has
    // landed (at most S − 1 newer groups pending), the barrier publishes
    // it, and its first k-slice's fragments load.
    fill.prime_ring::<TIn, S>(ring);
    if left == 0 {
        return acc;
    }
    mma::cp_async_wait_group((S - 1) as u32);
    fill.landed(ring.stage(0));
    sync_threads();
    let mut frags = slices.load::<MI, NI>(ring.stage(0), 0);
    // The k-loop written out over the ring's S stages, so that k-step kt
    // reads stage kt mod S as a constant: every load and copy addresses a
    // register plus an immediate, and the ring costs the loop nothing. One
    // uniform test per k-step ends it. (Written out by a macro, not
    // `unroll`'s closure: LLVM declines to inline a closure this large, and
    // the accumulators would go to the stack.)
    macro_rules! k_step {
        ($s:expr) => {
            if left > 0 {
                slices.k_step::<BK, S, MI, NI>(ring, &mut fill, $s, &mut frags, &mut acc);
                left -= 1;
            }
        };
    }
    while left > 0 {
        match S {
            2 => {
                k_step!(0);
                k_step!(1);
            }
            3 => {
                k_step!(0);
                k_step!(1);
                k_step!(2);
            }
            4 => {
                k_step!(0);
                k_step!(1);
                k_step!(2);
                k_step!(3);
            }
            _ => {
                for s in 0..S {
                    k_step!(s);
                }
            }
        }
    }
    acc
}

/// A warp's fragment loads of one k-slice of a stage: its A fragments
/// (layout `LA`) and B fragment pairs (`LB`), each a [`StageWindow`] load at
/// a constant offset; stage slices stored as `TA`/`TB` say.
struct SliceLoads<'w, TIn, LA, LB, const TA: bool, const TB: bool> {
    a: &'w StageWindow<TIn, LA>,
    b: &'w StageWindow<TIn, LB>,
}

impl<
    TIn: Input + SharedElement,
    LA: FragmentLayout<TIn, Frag = FragA<TIn>>,
    LB: FragmentLayout<TIn, Frag = [FragB<TIn>; 2]>,
    const TA: bool,
    const TB: bool,
> SliceLoads<'_, TIn, LA, LB, TA, TB>
{
    /// k-slice `kk` (k from `kk·K`) of `stage`: `MI` A and `NI` B fragments.
    #[inline(always)]
    fn load<const MI: usize, const NI: usize>(
        &self,
        stage: Stage,
        kk: usize,
    ) -> ([FragA<TIn>; MI], [FragB<TIn>; NI]) {
        let p = kk * TIn::K;
        (
            unroll::array(
                #[inline(always)]
                |mi| self.a.load(stage, a_at::<TA>(mi * mma::M, p)),
            ),
            self.b.load_pairs(stage, |j| b_at::<TB>(j * 2 * mma::N, p)),
        )
    }

    /// One k-step of [`pipeline_interior`]: it reads stage `s` of the ring (a
    /// constant once the caller's loop over the stages is written out), whose
    /// first k-slice's fragments `frags` holds. The fragments are
    /// double-buffered: each slice's `mma`s issue after the next slice's
    /// loads, and before the last slice's, the next stage is waited for,
    /// published, and its first slice loaded — so the barrier and the loads'
    /// latency hide behind `mma`s. That barrier also
    /// says every warp has loaded all of stage `s`, which is then refilled with
    /// the k-step `S` on (if any; one uniform predicate for every copy).
    #[inline(always)]
    fn k_step<const BK: usize, const S: usize, const MI: usize, const NI: usize>(
        &self,
        ring: &StageRing<TIn>,
        fill: &mut impl StageFill,
        s: usize,
        frags: &mut ([FragA<TIn>; MI], [FragB<TIn>; NI]),
        acc: &mut [[FragC; NI]; MI],
    ) {
        let slices_per_stage = BK / TIn::K;
        const {
            assert!(
                BK / TIn::K <= MAX_SLICES,
                "k_step: more k-slices per stage than MAX_SLICES"
            )
        };
        unroll_upto::<MAX_SLICES>(
            slices_per_stage,
            #[inline(always)]
            |kk| {
                let (fa, fb) = *frags;
                if kk + 1 < slices_per_stage {
                    *frags = self.load::<MI, NI>(ring.stage(s), kk + 1);
                } else {
                    // Step kt + 1 has landed (at most S − 2 newer groups pending:
                    // S in the prologue, one per k-step since); the barrier
                    // publishes it and frees stage s for step kt + S. After the
                    // last k-step, the same with nothing to copy: its stage holds
                    // what the prologue or an earlier step left there (initialised),
                    // loaded and discarded — no branch, so the fragments stay in
                    // their registers.
                    mma::cp_async_wait_group((S - 2) as u32);
                    let next = ring.stage((s + 1) % S);
                    fill.landed(next);
                    sync_threads();
                    fill.fill(ring.stage(s));
                    mma::cp_async_commit();
                    *frags = self.load::<MI, NI>(next, 0);
                }
                mma_all(acc, &fa, &fb);
            },
        );
    }
}

/// `acc[mi][ni] += fa[mi]·fb[ni]` for every pair: the warp tile's `MI · NI`
/// `mma`s, written out ([`unroll2`]) so that every accumulator is a constant
/// index, which keeps them in registers (an indexed loop would put all of
/// them in local memory).
#[inline(always)]
fn mma_all<TIn: Input, const MI: usize, const NI: usize>(
    acc: &mut [[FragC; NI]; MI],
    fa: &[FragA<TIn>; MI],
    fb: &[FragB<TIn>; NI],
) {
    unroll2::<MI, NI>(
        #[inline(always)]
        |mi, ni| acc[mi][ni] = mma::mma(fa[mi], fb[ni], acc[mi][ni]),
    );
}

/// Steps 2 and 3 of the module docs: the `cp.async` pipeline over `ktiles`
/// k-steps, each loaded into its stage by `load(kt, stage)` (the interior or
/// the guarded copy of [`main_loop`]), and the ldmatrix → mma loop over each
/// stage into this warp's accumulators.
#[inline(always)]
fn pipeline<
    TIn: Input,
    L: Fn(usize, usize),
    const TA: bool,
    const TB: bool,
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const WM: usize,
    const WN: usize,
    const S: usize,
    const MI: usize,
    const NI: usize,
>(
    load: &L,
    ktiles: usize,
    (warp_row, warp_col): (usize, usize),
) -> [[FragC; NI]; MI] {
    let tile = MmaTile::of::<TIn>(BM, BN, BK, WM, WN, S);
    let smem = shared::dynamic::<TIn>();
    let (_, sa) = tile.a_layout(TA);
    let (_, sb) = tile.b_layout(TB);
    let a_len = tile.a_len(TA);
    let stage_len = tile.stage_len(TA, TB);
    // Once: the stages start 16-byte aligned (the dynamic shared memory
    // does), so the fragment loads need no check or branch per load.
    let frags = FragmentSource::check(&smem)
        .expect("tensor-core kernel: the dynamic shared memory is not 16-byte aligned");
    // The order the lean path's k-major A loads compute in (rows paired for
    // tf32), which the epilogue's view undoes: the guarded loads read the same.
    let order = MmaOrder::of::<TIn>(TA);
    let mut acc = [[FragC::default(); NI]; MI];
    // Step 2, pipeline prologue: k-steps 0 .. S − 1 in flight, one group each
    // (empty groups past the end keep the count uniform).
    for s in 0..S - 1 {
        if s < ktiles {
            load(s, s);
        }
        mma::cp_async_commit();
    }
    // The main loop. A Hopper path replaces this loop and the prologue (TMA
    // into the stages, `wgmma` from them); the epilogues stay.
    let mut kt = 0;
    while kt < ktiles {
        // Step kt has landed (at most S − 2 newer groups pending) and the
        // barrier publishes it; every warp is also done with step kt − 1.
        mma::cp_async_wait_group((S - 2) as u32);
        sync_threads();
        let next = kt + S - 1;
        if next < ktiles {
            load(next, next % S);
        }
        mma::cp_async_commit();
        // Step 3, ldmatrix → mma over the stage's K-deep slices.
        let base = (kt % S) * stage_len;
        for kk in 0..BK / TIn::K {
            let p = kk * TIn::K;
            let fa: [FragA<TIn>; MI] = unroll::array(|mi| {
                let i = warp_row + mi * mma::M;
                if !TA {
                    FragA::load_from(&frags, base + i * sa + p, sa)
                } else if order.rows_paired {
                    FragA::load_k_major_paired_from(&frags, base + p * sa + i, sa)
                } else {
                    FragA::load_k_major_from(&frags, base + p * sa + i, sa)
                }
            });
            let fb: [FragB<TIn>; NI] = unroll::array(|ni| {
                let j = warp_col + ni * mma::N;
                if TB {
                    FragB::load_n_major_from(&frags, base + a_len + j * sb + p, sb)
                } else {
                    FragB::load_k_major_from(&frags, base + a_len + p * sb + j, sb)
                }
            });
            mma_all(&mut acc, &fa, &fb);
        }
        kt += 1;
    }
    acc
}

#[cfg(feature = "entries")]
/// `D = alpha·op(A)·op(B) + beta·C` on the tensor cores for the `BM × BN`
/// tile of `C` this block owns (module docs). `TA`/`TB`: `A`/`B` stored
/// transposed; `BM, BN, BK, WM, WN, S` the [`MmaTile`] (of `TIn`); `MI = WM/16`,
/// `NI = WN/8` (checked); `RP` whether the accumulators' rows are paired
/// ([`MmaOrder::of`]`(TA)`: a k-major tf32 A; checked). Launch with blocks
/// of `MmaTile::threads()` threads (1-D) and a `⌈n/BN⌉ × ⌈m/BM⌉ × batch`
/// grid; any other block shape traps. Batches (and their depths, `k` and `k_last`) as for the
/// SIMT kernel (`warpforge_kernels_gemm_simt::gemm`).
#[kernel(
    shared = [TIn; MmaTile::of::<TIn>(BM, BN, BK, WM, WN, S).shared_len(TA, TB)],
    instances(
        gemm_f16_f32_nn_64x64x32_s3 = <f16, f32, false, false, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_f16_f32_nt_64x64x32_s3 = <f16, f32, false, true, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_f16_f32_tn_64x64x32_s3 = <f16, f32, true, false, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_f16_f32_tt_64x64x32_s3 = <f16, f32, true, true, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_f16_f16_nn_64x64x32_s3 = <f16, f16, false, false, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_f16_f16_nt_64x64x32_s3 = <f16, f16, false, true, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_f16_f16_tn_64x64x32_s3 = <f16, f16, true, false, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_f16_f16_tt_64x64x32_s3 = <f16, f16, true, true, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_f16_bf16_nn_64x64x32_s3 = <f16, bf16, false, false, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_f16_bf16_nt_64x64x32_s3 = <f16, bf16, false, true, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_f16_bf16_tn_64x64x32_s3 = <f16, bf16, true, false, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_f16_bf16_tt_64x64x32_s3 = <f16, bf16, true, true, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_bf16_f32_nn_64x64x32_s3 = <bf16, f32, false, false, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_bf16_f32_nt_64x64x32_s3 = <bf16, f32, false, true, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_bf16_f32_tn_64x64x32_s3 = <bf16, f32, true, false, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_bf16_f32_tt_64x64x32_s3 = <bf16, f32, true, true, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_bf16_f16_nn_64x64x32_s3 = <bf16, f16, false, false, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_bf16_f16_nt_64x64x32_s3 = <bf16, f16, false, true, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_bf16_f16_tn_64x64x32_s3 = <bf16, f16, true, false, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_bf16_f16_tt_64x64x32_s3 = <bf16, f16, true, true, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_bf16_bf16_nn_64x64x32_s3 = <bf16, bf16, false, false, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_bf16_bf16_nt_64x64x32_s3 = <bf16, bf16, false, true, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_bf16_bf16_tn_64x64x32_s3 = <bf16, bf16, true, false, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_bf16_bf16_tt_64x64x32_s3 = <bf16, bf16, true, true, TC_M, TC_N, TC_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_f16_f32_nn_128x128x32_s4 = <f16, f32, false, false, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_f16_f32_nt_128x128x32_s4 = <f16, f32, false, true, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_f16_f32_tn_128x128x32_s4 = <f16, f32, true, false, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_f16_f32_tt_128x128x32_s4 = <f16, f32, true, true, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_f16_f16_nn_128x128x32_s4 = <f16, f16, false, false, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_f16_f16_nt_128x128x32_s4 = <f16, f16, false, true, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_f16_f16_tn_128x128x32_s4 = <f16, f16, true, false, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_f16_f16_tt_128x128x32_s4 = <f16, f16, true, true, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_bf16_f32_nn_128x128x32_s4 = <bf16, f32, false, false, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_bf16_f32_nt_128x128x32_s4 = <bf16, f32, false, true, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_bf16_f32_tn_128x128x32_s4 = <bf16, f32, true, false, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_bf16_f32_tt_128x128x32_s4 = <bf16, f32, true, true, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_bf16_bf16_nn_128x128x32_s4 = <bf16, bf16, false, false, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_bf16_bf16_nt_128x128x32_s4 = <bf16, bf16, false, true, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_bf16_bf16_tn_128x128x32_s4 = <bf16, bf16, true, false, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_bf16_bf16_tt_128x128x32_s4 = <bf16, bf16, true, true, TL_M, TL_N, TL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_f16_f32_nn_128x256x32_s3 = <f16, f32, false, false, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_f16_f32_nt_128x256x32_s3 = <f16, f32, false, true, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_f16_f32_tn_128x256x32_s3 = <f16, f32, true, false, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_f16_f32_tt_128x256x32_s3 = <f16, f32, true, true, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_f16_f16_nn_128x256x32_s3 = <f16, f16, false, false, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_f16_f16_nt_128x256x32_s3 = <f16, f16, false, true, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_f16_f16_tn_128x256x32_s3 = <f16, f16, true, false, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_f16_f16_tt_128x256x32_s3 = <f16, f16, true, true, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_bf16_f32_nn_128x256x32_s3 = <bf16, f32, false, false, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_bf16_f32_nt_128x256x32_s3 = <bf16, f32, false, true, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_bf16_f32_tn_128x256x32_s3 = <bf16, f32, true, false, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_bf16_f32_tt_128x256x32_s3 = <bf16, f32, true, true, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_bf16_bf16_nn_128x256x32_s3 = <bf16, bf16, false, false, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_bf16_bf16_nt_128x256x32_s3 = <bf16, bf16, false, true, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_bf16_bf16_tn_128x256x32_s3 = <bf16, bf16, true, false, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_bf16_bf16_tt_128x256x32_s3 = <bf16, bf16, true, true, TW_M, TW_N, TW_K, TW_WM, TW_WN, TW_S, TW_MI, TW_NI, false>,
        gemm_tf32_f32_nn_64x64x16_s3 = <f32, f32, false, false, TC_M, TC_N, TF_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_tf32_f32_nt_64x64x16_s3 = <f32, f32, false, true, TC_M, TC_N, TF_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, false>,
        gemm_tf32_f32_tn_64x64x16_s3 = <f32, f32, true, false, TC_M, TC_N, TF_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, true>,
        gemm_tf32_f32_tt_64x64x16_s3 = <f32, f32, true, true, TC_M, TC_N, TF_K, TC_WM, TC_WN, TC_S, TC_MI, TC_NI, true>,
        gemm_tf32_f32_nn_128x128x16_s4 = <f32, f32, false, false, TL_M, TL_N, TFL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_tf32_f32_nt_128x128x16_s4 = <f32, f32, false, true, TL_M, TL_N, TFL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, false>,
        gemm_tf32_f32_tn_128x128x16_s4 = <f32, f32, true, false, TL_M, TL_N, TFL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, true>,
        gemm_tf32_f32_tt_128x128x16_s4 = <f32, f32, true, true, TL_M, TL_N, TFL_K, TL_WM, TL_WN, TL_S, TL_MI, TL_NI, true>,
    )
)]
#[allow(clippy::too_many_arguments)]
pub fn gemm_tc<
    TIn: Input,
    TOut: Output,
    const TA: bool,
    const TB: bool,
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const WM: usize,
    const WN: usize,
    const S: usize,
    const MI: usize,
    const NI: usize,
    const RP: bool,
>(
    k: usize,
    k_last: usize,
    alpha: f32,
    beta: f32,
    a: Global<TIn>,
    lda: usize,
    stride_a: usize,
    b: Global<TIn>,
    ldb: usize,
    stride_b: usize,
    mut c: OutMatrix<TOut, WarpGrid<BM, BN, WM, WN, BLOCK_BANDS, RP>>,
) {
    const {
        assert!(
            MmaOrder::of::<TIn>(TA).rows_paired == RP,
            "gemm_tc: RP must be the order its k-major A loads compute in (MmaOrder::of)"
        )
    };
    let (t, _) = enter_block_tile::<TIn, BM, BN, BK, WM, WN, S, MI, NI>();
    // The block's tile, by the map its epilogue writes through: blocks in
    // bands of `BLOCK_BANDS` tile rows (L2 reuse).
    let (row0, col0) = c.block_origin();
    // Batch z (`blockIdx.z`), as in the SIMT kernel: A and B at z·stride_a
    // and z·stride_b, C the z-th of the host-bound batches (m rows each).
    let (_, m) = c.batch();
    let n = c.cols();
    // The warp's tile in the block tile, by the map its epilogue writes
    // through (`WarpGrid`); with the checked block every warp has one.
    let warp_at = c.warp_offset().unwrap_or((0, 0));
    let z = thread::block_idx().z as usize;
    let (a_off, b_off) = (z.wrapping_mul(stride_a), z.wrapping_mul(stride_b));
    // Every batch is k deep but the last (split-k's remainder).
    let k = warpforge_kernels_gemm_simt::batch_depth(k, k_last);
    let a_src = Stored {
        src: a,
        ld: lda,
        off: a_off,
        rows: if TA { k } else { m },
        cols: if TA { m } else { k },
    };
    let b_src = Stored {
        src: b,
        ld: ldb,
        off: b_off,
        rows: if TB { n } else { k },
        cols: if TB { k } else { n },
    };
    // alpha = 0: D = beta·C, with no reads of A or B. Uniform over the block.
    let ktiles = if alpha == 0.0 { 0 } else { k.div_ceil(BK) };
    let acc = main_loop::<TIn, _, _, TA, TB, BM, BN, BK, WM, WN, S, MI, NI>(
        &a_src,
        &b_src,
        ktiles,
        (row0, col0),
        t,
        warp_at,
    );

    // Epilogue: this warp's WM × WN tile, through its owned view.
    let Some(mut out) = c.tile() else {
        return;
    };
    // Written out (`unroll2`): every accumulator a constant index, so they
    // stay in registers (a loop indexing them would put them in local
    // memory: 512 bytes of stack for a 64 × 64 warp tile).
    unroll2::<MI, NI>(
        #[inline(always)]
        |mi, ni| {
            out.update_mma_c(mi, ni, &acc[mi][ni], |v, d| {
                let r = TOut::axpby(alpha, v, beta, || d.get());
                d.set(r);
            })
        },
    );
}
