//! GEMM: `D = alpha·op(A)·op(B) + beta·C`, written in place of `C`, on the
//! SIMT cores (no tensor cores), for f32 and f64 and the four transpose
//! combinations.
//!
//! All matrices are row-major with a leading dimension (the distance between
//! the starts of consecutive stored rows). `op(A)` is `m × k`: `A` is stored
//! `m × k` (`a[i·lda + p]`), or `k × m` when transposed (`a[p·lda + i]`);
//! `op(B)` is `k × n`: `B` is stored `k × n` (`b[p·ldb + j]`), or `n × k`
//! when transposed (`b[j·ldb + p]`). `C` is the output, an
//! `OutMatrix<T, MicroTiles<BM, BN, MICRO, MICRO>>` whose shape (`m × n`, row stride
//! `ldc`) the host binds at launch.
//!
//! One generic body ([`gemm`]) serves every instance. A [`Tile`] — written
//! once per element type ([`F32_TILE`], [`F64_TILE`]) — fixes the block tile
//! `BM × BN`, its k-step `BK`, and from them everything else: the threads
//! per block ([`Tile::threads`], one per [`MICRO`]` × `[`MICRO`] register
//! micro-tile), the shared memory ([`Tile::shared_len`]), and the host's grid
//! (`warpforge::gemm`).
//!
//! Per block (`blockIdx = (x, y)` owns the `BM × BN` tile of `C` at
//! `(y·BM, x·BN)`), for each k-step of `BK`:
//! 1. the block's threads copy the `BM × BK` slice of `op(A)` and the
//!    `BK × BN` slice of `op(B)` to shared memory, k-major (`As[p][i]`,
//!    `Bs[p][j]`), consecutive threads taking consecutive elements of the
//!    stored matrix (coalesced for every transpose); elements outside `A` or
//!    `B` (the ragged edges) are stored as zero;
//! 2. barrier; each thread accumulates its `MICRO × MICRO` micro-tile with
//!    one fused multiply-add per element and `p`, in increasing `p`;
//! 3. barrier (the next step overwrites the slices).
//!
//! The epilogue writes each thread's micro-tile through
//! [`OutMatrix::micro_tile`](warpforge_device::OutMatrix::micro_tile) (owned:
//! the output's type fixes the one partition, so no two threads write one
//! element):
//! `d = alpha·acc` when `beta = 0` (C is never read, so NaN in C does not
//! leak), else `fma(beta, c, alpha·acc)`. When `alpha = 0` the k-loop is
//! skipped (`D = beta·C`, as BLAS does, so A and B are not read).
//!
//! Every element of `D` is therefore computed in an order fixed by `k`
//! alone: `acc = fma(a[i][k−1], b[k−1][j], … fma(a[i][0], b[0][j], 0))`, then
//! the epilogue; the same bits on every launch and every grid.
//!
//! The tensor-core kernels (f16/bf16 inputs, f32 accumulation) are the
//! crate `warpforge-kernels-gemm-tensor`; f32's warp-tiled 128 × 128 kernels (the same arithmetic,
//! for shapes that fill the GPU) in [`warp_tiled`].
//!
//! This crate is the library's SIMT GEMM family, one PTX module of its own
//! (`warpforge-kernels-gemm-simt`; the `gemm` feature of `warpforge`), with
//! split-k's sum of partial planes ([`split_k`]). Its main loop and tiles
//! are also what the convolutions and the tensor-core GEMM build on: they
//! depend on it without the `entries` feature, so its kernels are not
//! compiled into their modules again.
#![cfg_attr(target_arch = "nvptx64", no_std)]
// The `gpu-kernel` ABI is for the `#[kernel]` entries, which only `entries` has.
#![cfg_attr(
    all(target_arch = "nvptx64", feature = "entries"),
    feature(abi_gpu_kernel)
)]
#![forbid(unsafe_code)]

#[cfg(feature = "entries")]
pub mod split_k;
#[cfg(feature = "entries")]
pub mod warp_tiled;

use core::ops::Mul;
use warpforge_device::num::Fma;
use warpforge_device::shared::{self, SharedElement};
use warpforge_device::sync::sync_threads;
use warpforge_device::thread;
#[cfg(feature = "entries")]
use {
    warpforge_device::{Dim3, OutMatrix, own::MicroTiles},
    warpforge_macros::kernel,
};

/// Rows and columns of each thread's register micro-tile.
pub const MICRO: usize = 4;

/// A block tile: `m × n` elements of `C` per block, `k` the depth of each
/// shared-memory step. Everything the kernel and the host derive from it is
/// a `const fn` here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    /// Rows of `C` per block (`BM`).
    pub m: usize,
    /// Columns of `C` per block (`BN`).
    pub n: usize,
    /// Depth of one k-step (`BK`).
    pub k: usize,
}

impl Tile {
    /// The `m × n` tile with k-step `k`.
    pub const fn new(m: usize, n: usize, k: usize) -> Tile {
        Tile { m, n, k }
    }

    /// Threads per block: one per `MICRO × MICRO` micro-tile of the block tile.
    pub const fn threads(&self) -> usize {
        (self.m / MICRO) * (self.n / MICRO)
    }

    /// Elements of shared memory per block: the `k × m` slice of `op(A)`
    /// and the `k × n` slice of `op(B)`.
    pub const fn shared_len(&self) -> usize {
        self.k * (self.m + self.n)
    }

    /// Whether the kernel can use this tile: micro-tiles divide it, and the
    /// threads divide both shared slices (each thread copies whole rounds).
    pub const fn is_valid(&self) -> bool {
        let threads = self.threads();
        self.m > 0
            && self.n > 0
            && self.k > 0
            && self.m.is_multiple_of(MICRO)
            && self.n.is_multiple_of(MICRO)
            && threads <= 1024
            && (self.k * self.m).is_multiple_of(threads)
            && (self.k * self.n).is_multiple_of(threads)
    }
}

/// The f32 tile: 64 × 64 per block, k-step 16, 256 threads, 8 KiB shared.
pub const F32_TILE: Tile = Tile {
    m: 64,
    n: 64,
    k: 16,
};

/// The f64 tile: 64 × 64 per block, k-step 8, 256 threads, 8 KiB shared.
pub const F64_TILE: Tile = Tile { m: 64, n: 64, k: 8 };

const _: () = assert!(F32_TILE.is_valid() && F64_TILE.is_valid());

// The tiles' dimensions as plain constants, the form `instances(...)` takes.
#[cfg(feature = "entries")]
const F32_M: usize = F32_TILE.m;
#[cfg(feature = "entries")]
const F32_N: usize = F32_TILE.n;
#[cfg(feature = "entries")]
const F32_K: usize = F32_TILE.k;
#[cfg(feature = "entries")]
const F64_M: usize = F64_TILE.m;
#[cfg(feature = "entries")]
const F64_N: usize = F64_TILE.n;
#[cfg(feature = "entries")]
const F64_K: usize = F64_TILE.k;

/// The element types the GEMM kernel is instantiated for.
pub trait Element: Fma + SharedElement + PartialEq + Mul<Output = Self> {
    /// `0`.
    const ZERO: Self;
}

impl Element for f32 {
    const ZERO: f32 = 0.0;
}

impl Element for f64 {
    const ZERO: f64 = 0.0;
}

/// The depth of this block's batch (`blockIdx.z`): `k_last` for the grid's
/// last batch, `k` for the others. A plain batch passes `k_last = k`;
/// split-k (`warpforge::gemm`) runs one GEMM's k-ranges as a batch whose
/// strides step along k, `k` deep each but the last, the remainder. One
/// uniform select per block, before its k-loop.
#[inline(always)]
pub fn batch_depth(k: usize, k_last: usize) -> usize {
    if thread::block_idx().z + 1 == thread::grid_dim().z {
        k_last
    } else {
        k
    }
}

#[cfg(feature = "entries")]
/// `D = alpha·op(A)·op(B) + beta·C` for the `BM × BN` tile of `C` this block
/// owns (module docs). `TA`/`TB`: `A`/`B` stored transposed. Launch with
/// blocks of `Tile::new(BM, BN, BK).threads()` threads (1-D) and a
/// `⌈n/BN⌉ × ⌈m/BM⌉ × batch` grid; any other block shape traps. Batch `z`
/// reads `A` from `z·stride_a` and `B` from `z·stride_b` (stride 0: one
/// matrix for all batches) and writes batch `z` of `c`, bound by the host
/// as `batch` matrices of `m × n`, `stride_c` apart (`OutMatrix::batch`;
/// stacked or side by side, never overlapping). Every batch is `k` deep but
/// the last, `k_last` deep ([`batch_depth`]: split-k's remainder).
#[kernel(
    shared = [T; Tile::new(BM, BN, BK).shared_len()],
    instances(
        gemm_f32_nn_64x64x16 = <f32, false, false, F32_M, F32_N, F32_K>,
        gemm_f32_nt_64x64x16 = <f32, false, true, F32_M, F32_N, F32_K>,
        gemm_f32_tn_64x64x16 = <f32, true, false, F32_M, F32_N, F32_K>,
        gemm_f32_tt_64x64x16 = <f32, true, true, F32_M, F32_N, F32_K>,
        gemm_f64_nn_64x64x8 = <f64, false, false, F64_M, F64_N, F64_K>,
        gemm_f64_nt_64x64x8 = <f64, false, true, F64_M, F64_N, F64_K>,
        gemm_f64_tn_64x64x8 = <f64, true, false, F64_M, F64_N, F64_K>,
        gemm_f64_tt_64x64x8 = <f64, true, true, F64_M, F64_N, F64_K>,
    )
)]
#[allow(clippy::too_many_arguments)]
pub fn gemm<
    T: Element,
    const TA: bool,
    const TB: bool,
    const BM: usize,
    const BN: usize,
    const BK: usize,
>(
    k: usize,
    k_last: usize,
    alpha: T,
    beta: T,
    a: &[T],
    lda: usize,
    stride_a: usize,
    b: &[T],
    ldb: usize,
    stride_b: usize,
    mut c: OutMatrix<T, MicroTiles<BM, BN, MICRO, MICRO>>,
) {
    const { assert!(Tile::new(BM, BN, BK).is_valid(), "an invalid GEMM tile") };
    let threads = Tile::new(BM, BN, BK).threads();
    // The thread → element maps below assume exactly this block; a uniform
    // check (every thread of every block traps alike, before any barrier).
    assert!(
        thread::block_dim() == Dim3::x(threads as u32),
        "gemm: launch with a 1-D block of Tile::threads() threads"
    );
    // Batch z (`blockIdx.z`): A and B at z·stride_a and z·stride_b (0 =
    // the same matrix for every batch), C the z-th of the host-bound
    // batches (`OutMatrix::batch`): m × n matrices stride_c elements apart.
    let (_, m) = c.batch();
    let n = c.cols();
    let t = thread::linear_thread_id() as usize;
    let block = thread::block_idx();
    let z = block.z as usize;
    let (a_off, b_off_g) = (z.wrapping_mul(stride_a), z.wrapping_mul(stride_b));
    let (row0, col0) = (block.y as usize * BM, block.x as usize * BN);

    let k = batch_depth(k, k_last);
    // alpha = 0: D = beta·C, with no reads of A or B. Uniform over the block.
    let k_eff = if alpha == T::ZERO { 0 } else { k };
    let a = Strided::<T, TA> {
        data: a,
        ld: lda,
        off: a_off,
    };
    let b = Strided::<T, TB> {
        data: b,
        ld: ldb,
        off: b_off_g,
    };
    let acc = main_loop::<T, _, _, BM, BN, BK>(&a, &b, (m, n, k_eff), (row0, col0), t);

    let Some(mut mine) = c.micro_tile() else {
        return;
    };
    for (i, row) in acc.iter().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            if let Some(mut d) = mine.slot(i, j) {
                let prod = alpha * v;
                // beta = 0: C is never read (NaN there must not leak).
                d.set(if beta == T::ZERO {
                    prod
                } else {
                    beta.fma(d.get(), prod)
                });
            }
        }
    }
}

/// Where one operand of the SIMT main loop comes from: `op(A)` (`m × k`) or
/// `op(B)` (`k × n`), element `(r, c)` of it. The GEMM's stored matrix is one
/// source ([`Strided`]); the convolution's on-the-fly im2col gather
/// (`warpforge-kernels-conv`) is another.
pub trait Source<T> {
    /// Consecutive columns `c` are consecutive in memory (a row-major stored
    /// operand), so the copy gives consecutive threads consecutive columns;
    /// otherwise consecutive rows (coalesced either way).
    const ROW_FAST: bool;
    /// Element `(r, c)`, called only inside the operand (`r`, `c` below its
    /// rows and columns); zero where the source has no element there
    /// (padding) or the index falls outside its buffer.
    fn get(&self, r: usize, c: usize) -> T;
}

/// A stored row-major matrix, rows `ld` apart, starting `off` elements into
/// `data`; `TRANS`: the operand is its transpose (element `(r, c)` at
/// `c·ld + r`).
pub struct Strided<'a, T, const TRANS: bool> {
    /// The buffer.
    pub data: &'a [T],
    /// Elements between stored rows.
    pub ld: usize,
    /// Where the matrix starts (its batch).
    pub off: usize,
}

impl<T: Element, const TRANS: bool> Source<T> for Strided<'_, T, TRANS> {
    const ROW_FAST: bool = !TRANS;
    #[inline(always)]
    fn get(&self, r: usize, c: usize) -> T {
        let idx = if TRANS {
            c * self.ld + r
        } else {
            r * self.ld + c
        };
        self.data
            .get(self.off.wrapping_add(idx))
            .copied()
            .unwrap_or(T::ZERO)
    }
}

/// The SIMT main loop (module docs, steps 1–3) of the `BM × BN` tile at
/// `(row0, col0)` of `op(A)·op(B)`, `op(A)` `m × k` and `op(B)` `k × n`:
/// returns thread `t`'s `MICRO × MICRO` accumulators, the micro-tile at
/// [`micro_origin`] within the block tile. `k = 0` reads nothing. Every
/// thread of the block calls it (it has barriers), with the same sizes.
#[inline(always)]
pub fn main_loop<
    T: Element,
    A: Source<T>,
    B: Source<T>,
    const BM: usize,
    const BN: usize,
    const BK: usize,
>(
    a: &A,
    b: &B,
    (m, n, k): (usize, usize, usize),
    (row0, col0): (usize, usize),
    t: usize,
) -> [[T; MICRO]; MICRO] {
    let threads = Tile::new(BM, BN, BK).threads();
    let (ti, tj) = micro_origin::<BN>(t);
    let smem = shared::dynamic::<T>();
    let b_off = BK * BM;
    let mut acc = [[T::ZERO; MICRO]; MICRO];
    let steps = k.div_ceil(BK);
    let mut step = 0;
    while step < steps {
        let p0 = step * BK;
        // op(A)[row0 .. row0+BM][p0 .. p0+BK] → As[p][i] at p·BM + i.
        let mut e = t;
        while e < BK * BM {
            // Consecutive e: consecutive elements of the stored rows.
            let (i, p) = if A::ROW_FAST {
                (e / BK, e % BK)
            } else {
                (e % BM, e / BM)
            };
            let (gi, gp) = (row0 + i, p0 + p);
            let v = if gi < m && gp < k {
                a.get(gi, gp)
            } else {
                T::ZERO
            };
            smem.store(p * BM + i, v);
            e += threads;
        }
        // op(B)[p0 .. p0+BK][col0 .. col0+BN] → Bs[p][j] at b_off + p·BN + j.
        let mut e = t;
        while e < BK * BN {
            let (p, j) = if B::ROW_FAST {
                (e / BN, e % BN)
            } else {
                (e % BK, e / BK)
            };
            let (gp, gj) = (p0 + p, col0 + j);
            let v = if gp < k && gj < n {
                b.get(gp, gj)
            } else {
                T::ZERO
            };
            smem.store(b_off + p * BN + j, v);
            e += threads;
        }
        sync_threads();
        for p in 0..BK {
            let av: [T; MICRO] = core::array::from_fn(|i| smem.load(p * BM + ti + i));
            let bv: [T; MICRO] = core::array::from_fn(|j| smem.load(b_off + p * BN + tj + j));
            for i in 0..MICRO {
                for j in 0..MICRO {
                    acc[i][j] = av[i].fma(bv[j], acc[i][j]);
                }
            }
        }
        sync_threads();
        step += 1;
    }
    acc
}

/// `(row, column)` of thread `t`'s micro-tile within a block tile `BN`
/// wide, as `OutMatrix::micro_tile` maps it (micro-tiles numbered row-major).
#[inline(always)]
pub const fn micro_origin<const BN: usize>(t: usize) -> (usize, usize) {
    let per_row = BN / MICRO;
    ((t / per_row) * MICRO, (t % per_row) * MICRO)
}
