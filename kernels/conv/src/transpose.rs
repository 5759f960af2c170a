//! Batched 2-D transpose: `y[b][j][i] = x[b][i][j]` for each of `B`
//! row-major `R × C` matrices of `x`, each written as a row-major `C × R`
//! matrix of `y` (`transpose_{f32,f16,bf16}`).
//!
//! What it is for: the layout changes around a convolution — NCHW's
//! `[N][C][H·W]` to NHWC's `[N][H·W][C]` and back, and `K, C/G, R, S`
//! weights to `K, R, S, C/G` — so that an NCHW convolution runs the NHWC
//! implicit GEMM, whose gather copies whole 16-byte channel chunks (as
//! cuDNN runs NCHW tensor-core convolutions).
//!
//! Each block owns one `32 × 32` tile of its batch's output
//! (`BlockTiles`): it reads the matching `32 × 32` tile of the input with
//! consecutive threads on consecutive input columns (coalesced), stages it
//! in shared memory with rows of an odd number of 4-byte words (33 for
//! 4-byte elements, 34 of 2 bytes), so that a staged column's 32 elements
//! lie in 32 distinct banks, and after one barrier writes its output tile
//! with consecutive threads on consecutive output columns (coalesced). No
//! bank conflicts on a whole tile; an edge tile's packed walk (a warp over
//! several short output rows) can meet a few. Grid `⌈R/32⌉ × ⌈C/32⌉ × B`,
//! 256 threads. The staged walk is `OutMatrix::write_staged`, shared with
//! the Hopper module's tf32 operand copies (`tf32_k_major_*`).

use warpforge_device::own::BlockTiles;
use warpforge_device::shared::{self, SharedElement};
use warpforge_device::{Global, OutMatrix, bf16, f16, thread};
use warpforge_macros::kernel;

/// The side of a block's square tile.
pub const TRANSPOSE_TILE: usize = 32;

/// Threads per block: each moves `32 · 32 / 256 = 4` elements.
pub const TRANSPOSE_THREADS: usize = 256;

/// A staged tile's row pitch for elements of `size` bytes (4 or 2): an odd
/// number of 4-byte words (33 or 17), so that the 32 elements of a staged
/// column lie in 32 distinct banks.
const fn pitch(size: usize) -> usize {
    TRANSPOSE_TILE + 4 / size
}

/// The staged tile's elements: room for the 2-byte pitch, the longest.
const STAGED: usize = TRANSPOSE_TILE * pitch(2);

/// `y = xᵀ` per batch (module docs): `y` bound as `B` batches of `C × R`
/// (its rows are `x`'s columns), `x` the `B` row-major `R × C` matrices
/// packed one after another (batch `b` at `b·R·C`). Grid `⌈R/32⌉ × ⌈C/32⌉ ×
/// B` (block `(x, y)` owns output tile row `y`, column `x`: the input tile
/// at rows `32·x ..`, columns `32·y ..`); any block shape works (each
/// thread strides by the block's size), 256 threads is the design.
#[kernel(
    shared = [T; STAGED],
    instances(
        transpose_f32 = <f32>,
        transpose_f16 = <f16>,
        transpose_bf16 = <bf16>,
    )
)]
pub fn transpose<T: SharedElement>(
    x: Global<T>,
    mut y: OutMatrix<T, BlockTiles<TRANSPOSE_TILE, TRANSPOSE_TILE>>,
) {
    const { assert!(matches!(size_of::<T>(), 2 | 4), "2- or 4-byte elements") };
    let staged = shared::array::<T, STAGED>();
    let pitch = const { pitch(size_of::<T>()) };
    let (batch, rows_out) = y.batch();
    let cols_out = y.cols();
    let block = thread::block_idx();
    // The input tile's corner: rows are the output's columns.
    let (row0, col0) = (
        block.x as usize * TRANSPOSE_TILE,
        block.y as usize * TRANSPOSE_TILE,
    );
    // Batch `batch` of the input (`R·C` elements each: `cols_out × rows_out`).
    let first = batch.wrapping_mul(rows_out * cols_out);
    // Output (r, c) is input (c, r): staged at column r, row c.
    y.write_staged(
        staged,
        pitch,
        true,
        #[inline(always)]
        |i, j| {
            let (row, col) = (row0 + i, col0 + j);
            if row < cols_out && col < rows_out {
                x.load(first.wrapping_add(row * rows_out + col))
            } else {
                None
            }
        },
    );
}
