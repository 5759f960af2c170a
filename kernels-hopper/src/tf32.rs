//! f32 operands made ready for the tf32 `wgmma` GEMM
//! (`gemm_wgmma_tf32_f32_nt_*`, [`crate::gemm`]): laid out K-major, the
//! only layout `wgmma` reads tf32 in, and each element rounded to tf32
//! (`cvt.rna.tf32.f32`: 10 fraction bits, nearest, ties away from zero —
//! the rounding the `mma.sync` TF32 kernels apply) or, with `round` 0,
//! copied as it is (the GEMM's `wgmma` then truncates it: the host's
//! `Tf32Rounding::Truncate`, for operands it cannot read in place).
//!
//! Why a pass of its own: `wgmma` reads its tf32 operands straight from
//! shared memory and ignores each f32's low 13 fraction bits (truncation,
//! not rounding), and it cannot transpose them. Rounding in shared memory
//! inside the GEMM would cost a read and a write of every stage on top of
//! the instruction's own reads (shared-memory bandwidth the main loop
//! needs); rounding once in global memory costs a read and a write of each
//! operand, once, against the GEMM's `k`-fold reuse of them, and handles
//! the transposes on the way.
//!
//! `tf32_k_major_rows` (`op(x) = x`: x's rows are the output's) and
//! `tf32_k_major_cols` (`op(x) = xᵀ`: x's columns are): each block owns one
//! `32 × 32` tile of its batch's output (`BlockTiles`), reads the matching
//! input tile with consecutive threads on consecutive input columns,
//! stages it in shared memory (rows of 33 words: a staged column lies in 32
//! banks) and, after one barrier, writes its output tile with consecutive
//! threads on consecutive output columns (`OutMatrix::write_staged`, the
//! walk of the conv module's `transpose_*`). Grid `⌈K/32⌉ × ⌈rows/32⌉ ×
//! batches`, 256 threads.

use warpforge_device::mma::round_tf32;
use warpforge_device::own::BlockTiles;
use warpforge_device::shared;
use warpforge_device::{Global, OutMatrix, thread};
use warpforge_macros::kernel;

/// The side of a block's square tile.
pub const TF32_TILE: usize = 32;

/// Threads per block: each moves `32 · 32 / 256 = 4` elements.
pub const TF32_THREADS: usize = 256;

/// A staged row's pitch: an odd number of words, so that the 32 elements
/// of a staged column lie in 32 distinct banks.
const PITCH: usize = TF32_TILE + 1;

/// The staged tile.
const STAGED: usize = TF32_TILE * PITCH;

/// `y[b][r][k] = round_tf32(op(x_b)[r][k])` (`op(x_b)[r][k]` itself
/// where `round` is 0) for `k < depth`, and `0` in
/// `y`'s columns past `depth` (module docs): `y` bound as the batches of
/// `rows × padded` matrices (`padded ≥ depth`: the row pitch a tensor map
/// needs), `x`'s batch `b` at `b·stride`, its stored rows `ld` apart:
/// `rows × depth` when `TRANSPOSED` is false, `depth × rows` when it is
/// true. Every element of `y` is written. Grid `⌈padded/32⌉ × ⌈rows/32⌉ ×
/// batches` (block `(x, y)` owns output tile row `y`, column `x`); any
/// block shape works (each thread strides by the block's size).
#[kernel(
    shared = [f32; STAGED],
    instances(
        tf32_k_major_rows = <false>,
        tf32_k_major_cols = <true>,
    )
)]
pub fn tf32_k_major<const TRANSPOSED: bool>(
    x: Global<f32>,
    ld: usize,
    stride: usize,
    depth: usize,
    round: u32,
    mut y: OutMatrix<f32, BlockTiles<TF32_TILE, TF32_TILE>>,
) {
    let staged = shared::array::<f32, STAGED>();
    let (batch, rows) = y.batch();
    let block = thread::block_idx();
    // The output tile's corner: row r0 of op(x), column (k) k0.
    let (r0, k0) = (block.y as usize * TF32_TILE, block.x as usize * TF32_TILE);
    // The input tile's corner and extents, as stored.
    let (in_row0, in_col0, in_rows, in_cols) = if TRANSPOSED {
        (k0, r0, depth, rows)
    } else {
        (r0, k0, rows, depth)
    };
    let first = batch.wrapping_mul(stride);
    // Output (r, k) was staged at (r, k) of the tile, or at (k, r) when x
    // holds op(x)ᵀ; outside op(x) (the padding columns, or past an edge): 0.
    y.write_staged(
        staged,
        PITCH,
        TRANSPOSED,
        #[inline(always)]
        |i, j| {
            let (row, col) = (in_row0 + i, in_col0 + j);
            let v = if row < in_rows && col < in_cols {
                x.load(first.wrapping_add(row.wrapping_mul(ld)).wrapping_add(col))
            } else {
                None
            };
            let v = v.unwrap_or(0.0);
            Some(if round != 0 { round_tf32(v) } else { v })
        },
    );
}
