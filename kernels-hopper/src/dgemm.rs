//! FP64 GEMM on sm_90's large f64 shape: `D = alpha·op(A)·op(B) + beta·C`,
//! all f64, each `mma` one `mma.sync.aligned.m16n8k16.row.col.f64`
//! (`DMMA.16x8x16`, 2048 FMA; [`M16n8k16`]).
//!
//! The instruction exists on sm_90 alone (ptxas refuses it for sm_80), so
//! its kernels live in this module, which only an sm_90 GPU (or an
//! emulator of one) loads; the body is the sm_80 module's
//! (`warpforge_kernels_gemm_tensor::dgemm::gemm_dmma_body`: its tile
//! copies, stage ring, fragment windows, guarded and lean paths, batches,
//! split-k's `k_last`, `alpha = 0`, `beta = 0` and epilogue), with the
//! shape and the tile ([`DMMA16_TILE`]: 128 × 64 × 16, 4 × 2 warps of 32 ×
//! 32, 3 stages) its parameters. Per k-step of 16 a warp issues 8
//! `DMMA.16x8x16` and 32 `LDS.64`.

use warpforge_device::mma::dmma::{M16n8k16, Shape};
use warpforge_device::{Global, OutMatrix, own::WarpGrid};
use warpforge_kernels_gemm_tensor::dgemm::{DMMA16_TILE, gemm_dmma_body};
use warpforge_kernels_gemm_tensor::{BLOCK_BANDS, MmaTile};
use warpforge_macros::kernel;

const D_M: usize = DMMA16_TILE.m;
const D_N: usize = DMMA16_TILE.n;
const D_K: usize = DMMA16_TILE.k;
const D_WM: usize = DMMA16_TILE.warp_m;
const D_WN: usize = DMMA16_TILE.warp_n;
const D_S: usize = DMMA16_TILE.stages;
const D_MI: usize = D_WM / <M16n8k16 as Shape>::M;
const D_NI: usize = D_WN / <M16n8k16 as Shape>::N;

/// `gemm_dmma_body` with `m16n8k16` on [`DMMA16_TILE`]: launch with blocks
/// of `DMMA16_TILE.threads()` (256) threads and a `⌈n/64⌉ × ⌈m/128⌉ ×
/// batch` grid, `MmaTile::shared_bytes` of dynamic shared memory.
#[kernel(
    shared = [f64; MmaTile::of::<f64>(BM, BN, BK, WM, WN, S).shared_len(TA, TB)],
    instances(
        gemm_dmma16_f64_nn_128x64x16_s3 = <false, false, D_M, D_N, D_K, D_WM, D_WN, D_S, D_MI, D_NI>,
        gemm_dmma16_f64_nt_128x64x16_s3 = <false, true, D_M, D_N, D_K, D_WM, D_WN, D_S, D_MI, D_NI>,
        gemm_dmma16_f64_tn_128x64x16_s3 = <true, false, D_M, D_N, D_K, D_WM, D_WN, D_S, D_MI, D_NI>,
        gemm_dmma16_f64_tt_128x64x16_s3 = <true, true, D_M, D_N, D_K, D_WM, D_WN, D_S, D_MI, D_NI>,
    )
)]
#[allow(clippy::too_many_arguments)]
pub fn gemm_dmma16<
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
    k: usize,
    k_last: usize,
    alpha: f64,
    beta: f64,
    a: Global<f64>,
    lda: usize,
    stride_a: usize,
    b: Global<f64>,
    ldb: usize,
    stride_b: usize,
    c: OutMatrix<f64, WarpGrid<BM, BN, WM, WN, BLOCK_BANDS, false>>,
) {
    gemm_dmma_body::<M16n8k16, TA, TB, BM, BN, BK, WM, WN, S, MI, NI>(
        (k, k_last),
        (alpha, beta),
        (a, lda, stride_a),
        (b, ldb, stride_b),
        c,
    );
}
