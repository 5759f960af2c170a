//! The warp-tiled SIMT GEMM for f32: the [`super`] kernel's arithmetic
//! (one fused multiply-add per element and `p`, in increasing `p`, so the
//! same bits) on a 128 × 128 block tile, for shapes large enough to fill
//! the GPU with such blocks.
//!
//! What makes it faster than the 64 × 64 tile, per thread and k-step:
//! - **8 × 8 accumulators** (a 2 × 2 grid of 4 × 4 micro-tiles): 64 FMAs
//!   for 16 values read from shared memory, twice the 4 × 4 tile's ratio;
//! - **16-byte shared loads** (`LDS.128`): the four micro-tiles' pieces of a
//!   row of `op(A)` and `op(B)` are 4 contiguous f32 each. The pieces lie a
//!   half tile apart ([`MicroTiles`]`<BM, BN, 4, 4, 2, 2>`), so the 16
//!   threads of a half-warp that share a row of micro-tiles read 16
//!   adjacent vectors of `op(B)` (no bank conflict) and one vector of
//!   `op(A)` (a broadcast);
//! - **16-byte global loads** (`LDG.E.128`): each thread fetches one vector
//!   of each operand's next k-step slice where it is whole and aligned
//!   (scalar loads at ragged edges and odd leading dimensions), two threads
//!   per 32-byte sector along a stored row;
//! - **double buffering**: the next slice is fetched into registers before
//!   the current one's FMAs and stored into the other of two shared stages
//!   before its last row's (the guarded loop: after them), so global latency hides behind arithmetic and
//!   one barrier per k-step suffices; in the lean loop each row's fragments
//!   are loaded one row ahead of its FMAs (double-buffered in registers).
//!
//! **Lean and guarded k-loops.** Once per block, uniform over it, the
//! kernel asks whether the block's whole k-range of `A` and of `B` is inside
//! the matrices (no zero pad: whole rows of the tile in `m` and `n`, `k` a
//! multiple of the k-step), in bounds and 16-byte aligned (leading
//! dimensions and batch offsets multiples of 4 elements). If so, the check
//! yields each thread's [`ThreadVectors`] (a [`VectorPanel`]), and the lean
//! loop reads every k-step's vectors through them with no check per load
//! (an address advanced by a constant), stores them through the aligned
//! [`SharedVectors`] view and the constant-size tile, and meets one
//! barrier per k-step. Its k-step is written out (`lean_loop`: the 8
//! rows of FMAs, each row's fragments loaded a row ahead, the store and
//! the barrier before the last row), so the k-step loop is the innermost
//! loop: in the SASS (ptxas 13.5, sm_80/sm_90) 566–573 instructions per
//! 512 FFMA (1.11–1.12 per FFMA, every instruction of the k-step counted),
//! no CALL, panic path, WARPSYNC or BSSY, 119–123 registers and no spills.
//! Any other block (an edge tile, a ragged `k`, an odd leading dimension or
//! batch offset) takes the guarded loop, each load checked and zero
//! outside the matrix, its rows kept rolled. Both run the same FMA chain
//! in the same order, so the bits do not depend on the path.
//!
//! Both operands sit k-major in shared memory (`As[p][i]`, `Bs[p][j]`):
//! a slice whose stored rows run along k (`A` transposed, `B` not) is
//! stored as it comes, one `STS.128`; the others are transposed on the way
//! in, four scalar stores.

use super::MICRO;
use warpforge_device::global::Vector16;
use warpforge_device::num::Fma;
use warpforge_device::own::MicroTiles;
use warpforge_device::panel::{ThreadVectors, VectorPairs, VectorPanel};
use warpforge_device::shared::{self, SharedVectors};
use warpforge_device::sync::sync_threads;
use warpforge_device::unroll::{order_point, unroll};
use warpforge_device::{Dim3, Global, OutMatrix, thread};
use warpforge_macros::kernel;

/// f32 elements per 16-byte vector.
pub const VEC: usize = 4;

/// A warp-tiled block tile: `m × n` elements of `C` per block, `k` the
/// depth of each k-step. Each thread holds a 2 × 2 grid of
/// [`MICRO`]` × `[`MICRO`] micro-tiles, a half tile apart. Everything the
/// kernel and the host derive from it is a `const fn` here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarpTiledTile {
    /// Rows of `C` per block (`BM`).
    pub m: usize,
    /// Columns of `C` per block (`BN`).
    pub n: usize,
    /// Depth of one k-step (`BK`).
    pub k: usize,
}

impl WarpTiledTile {
    /// The `m × n` tile with k-step `k`.
    pub const fn new(m: usize, n: usize, k: usize) -> WarpTiledTile {
        WarpTiledTile { m, n, k }
    }

    /// Threads per block: one per micro-tile of a quarter of the tile.
    pub const fn threads(&self) -> usize {
        (self.m / 2 / MICRO) * (self.n / 2 / MICRO)
    }

    /// Elements of one shared stage: `op(A)`'s `k × m` slice, then
    /// `op(B)`'s `k × n`.
    pub const fn stage_len(&self) -> usize {
        self.k * (self.m + self.n)
    }

    /// Elements of shared memory per block: two stages.
    pub const fn shared_len(&self) -> usize {
        2 * self.stage_len()
    }

    /// Whether the kernel can use this tile: quarters of whole micro-tiles,
    /// at most 1024 threads, and each operand's slice exactly one 16-byte
    /// vector per thread (`m·k = n·k = 4·threads`).
    pub const fn is_valid(&self) -> bool {
        let threads = self.threads();
        self.m > 0
            && self.n > 0
            && self.k > 0
            && self.m.is_multiple_of(2 * MICRO)
            && self.n.is_multiple_of(2 * MICRO)
            && self.k.is_multiple_of(VEC)
            && threads <= 1024
            && self.m * self.k == VEC * threads
            && self.n * self.k == VEC * threads
    }
}

/// The f32 warp-tiled tile: 128 × 128 per block, k-step 8, 256 threads,
/// 16 KiB of shared memory (two stages).
pub const F32_TILE_LARGE: WarpTiledTile = WarpTiledTile::new(128, 128, 8);

const _: () = assert!(F32_TILE_LARGE.is_valid() && MICRO == VEC);

// The tile as plain constants: the kernel is generic over the transposes
// only, so its shared tile has a constant length and its bounds checks
// compare against constants (most fold away).
const BM: usize = F32_TILE_LARGE.m;
const BN: usize = F32_TILE_LARGE.n;
const BK: usize = F32_TILE_LARGE.k;
const SHARED_LEN: usize = F32_TILE_LARGE.shared_len();

/// A stored row-major f32 matrix of `rows × cols`, rows `ld` apart,
/// starting `off` elements into `data`, with `data`'s aligned 16-byte
/// vectors (`vectors16`) for whole, aligned loads.
struct Stored<'a> {
    data: Global<'a, f32>,
    head: usize,
    vectors: Global<'a, Vector16<f32, VEC>>,
    ld: usize,
    off: usize,
    rows: usize,
    cols: usize,
}

impl<'a> Stored<'a> {
    #[inline(always)]
    fn new(data: Global<'a, f32>, ld: usize, off: usize, (rows, cols): (usize, usize)) -> Self {
        let (head, vectors) = data.vectors16::<VEC>();
        Stored {
            data,
            head,
            vectors,
            ld,
            off,
            rows,
            cols,
        }
    }

    /// Stored row `r`, columns `c .. c + VEC`, zero outside the matrix: one
    /// 16-byte load where the four are inside it and aligned, else scalar
    /// loads (the guarded path: each load checked).
    #[inline(always)]
    fn load(&self, r: usize, c: usize) -> [f32; VEC] {
        let at = self
            .off
            .wrapping_add(r.wrapping_mul(self.ld))
            .wrapping_add(c);
        // r < rows and c + VEC ≤ cols: at .. at + VEC are the matrix's own
        // elements, within the buffer the host checked.
        if r < self.rows
            && c + VEC <= self.cols
            && let Some(rel) = at.checked_sub(self.head)
            && rel.is_multiple_of(VEC)
            && let Some(v) = self.vectors.load(rel / VEC)
        {
            return v.0;
        }
        core::array::from_fn(|q| {
            if r < self.rows && c + q < self.cols {
                self.data.load(at + q).unwrap_or(0.0)
            } else {
                0.0
            }
        })
    }

    /// This operand's whole k-range for the block as a proven panel,
    /// read one vector per thread per k-step: `steps` tiles of `ROWS × COLS`
    /// stored elements, the first at stored `(r0, c0)`, the next ones
    /// `ROWS` rows further (`k_along_rows`) or `COLS` columns further, if
    /// every one is inside the matrix (so no element of it is a zero pad),
    /// in bounds and 16-byte aligned. Thread `t`'s vector is the one
    /// [`Slice::place`] gives it. `None` for an edge block, a ragged k, an
    /// odd leading dimension or a misaligned batch: the guarded path.
    /// Uniform over the block.
    #[inline(always)]
    fn interior<const ROWS: usize, const COLS: usize>(
        &self,
        (r0, c0): (usize, usize),
        k_along_rows: bool,
        steps: usize,
        t: usize,
    ) -> Option<ThreadVectors<'a, f32, VEC>> {
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
        VectorPanel::<f32, ROWS, COLS>::check(self.data, origin, self.ld, step, steps)?
            .thread_vectors::<VEC>((t, F32_TILE_LARGE.threads()))
    }
}

/// One operand's k-step slice, `K` deep and `W` wide (`BM` of `op(A)` or
/// `BN` of `op(B)`), as this thread fetches and stores it. `k_rows`: its
/// stored rows run along k (`A` transposed, `B` not), so a vector is 4 of
/// the `W` columns at one depth; otherwise 4 consecutive depths of one of
/// the `W` (a constant in every instance, so each branch folds away).
struct Slice<const K: usize, const W: usize> {
    k_rows: bool,
}

impl<const K: usize, const W: usize> Slice<K, W> {
    /// Where thread `t`'s vector goes in the slice: its first element's
    /// depth `p` and column `w`.
    #[inline(always)]
    fn place(&self, t: usize) -> (usize, usize) {
        if self.k_rows {
            (t / (W / VEC), (t % (W / VEC)) * VEC)
        } else {
            ((t % (K / VEC)) * VEC, t / (K / VEC))
        }
    }

    /// Fetches thread `t`'s vector of the slice at depth `p0`, column `w0`
    /// of the operand, from its stored matrix `src`.
    #[inline(always)]
    fn fetch(&self, src: &Stored<'_>, (p0, w0): (usize, usize), t: usize) -> [f32; VEC] {
        let (p, w) = self.place(t);
        if self.k_rows {
            src.load(p0 + p, w0 + w)
        } else {
            src.load(w0 + w, p0 + p)
        }
    }

    /// Stores a fetched vector k-major, element `(p, w)` of the slice at
    /// `smem[base + p·W + w]` (`base` a multiple of `VEC`).
    #[inline(always)]
    fn store(&self, smem: &Smem, vecs: &Vecs, base: usize, t: usize, v: [f32; VEC]) {
        let (p, w) = self.place(t);
        if self.k_rows {
            vecs.store((base + p * W + w) / VEC, v);
        } else {
            for (q, &x) in v.iter().enumerate() {
                smem.store(base + (p + q) * W + w, x);
            }
        }
    }
}

/// The block's shared memory: two stages of `op(A)`'s and `op(B)`'s
/// k-step slices, k-major; offsets are constants and per-thread offsets
/// bounded by the tile, so the compiler proves every access in range.
type Smem = warpforge_device::shared::SharedTile<f32, SHARED_LEN>;
/// The same memory as 16-byte vectors (`LDS.128`/`STS.128`, aligned by
/// construction: only the index is checked, against a constant).
type Vecs = SharedVectors<f32, VEC>;

/// Elements of one stage; `op(B)`'s slice starts `B_AT` into it.
const STAGE: usize = F32_TILE_LARGE.stage_len();
const B_AT: usize = BK * BM;

/// This thread's micro-tiles' rows `ti` (and `ti + BM/2`) and columns `tj`
/// (and `tj + BN/2`) of the block tile, as `MicroTiles<BM, BN, 4, 4, 2, 2>`
/// maps them.
#[inline(always)]
fn micro_origin(t: usize) -> (usize, usize) {
    let (per_row, per_col) = (BN / 2 / MICRO, BM / 2 / MICRO);
    // (`% per_col` is a no-op for a thread of the block; it tells the
    // compiler the bound.)
    (((t / per_row) % per_col) * MICRO, (t % per_row) * MICRO)
}

/// One row of a thread's fragments: `op(A)`'s two vectors (its
/// micro-tiles' rows, a half tile apart), then `op(B)`'s two.
type Fragments = [[f32; VEC]; 4];

/// This thread's fragments of row `p` of the stage `cur_v` vectors into
/// shared memory (0 or `STAGE / VEC`): four `LDS.128`, each the stage's
/// `op(A)` or `op(B)` address plus a constant once `p` is one.
#[inline(always)]
fn load_row(vecs: &Vecs, cur_v: usize, p: usize, (ti, tj): (usize, usize)) -> Fragments {
    // Vector indices (every offset here is a multiple of VEC). The stage's
    // offset is added in vectors: added in elements and divided, the
    // address needed a shift and a mask after it, 4–6 instructions a
    // k-step in the lean loop.
    let (ra, rb) = (
        cur_v + (ti + p * BM) / VEC,
        cur_v + (B_AT + tj + p * BN) / VEC,
    );
    [
        vecs.load(ra),
        vecs.load(ra + BM / 2 / VEC),
        vecs.load(rb),
        vecs.load(rb + BN / 2 / VEC),
    ]
}

/// One row's 64 FMAs into `acc` (each element's next step of its chain
/// in `p`), then [`order_point`]: the next row's FMAs stay after these in
/// the PTX, so ptxas holds one or two rows of fragments, not eight.
#[inline(always)]
fn fma_row([a_lo, a_hi, b_lo, b_hi]: Fragments, acc: &mut [[f32; 2 * MICRO]; 2 * MICRO]) {
    for i in 0..2 * MICRO {
        let av = if i < MICRO { a_lo[i] } else { a_hi[i - MICRO] };
        for j in 0..2 * MICRO {
            let bv = if j < MICRO { b_lo[j] } else { b_hi[j - MICRO] };
            acc[i][j] = av.fma(bv, acc[i][j]);
        }
    }
    order_point(acc);
}

/// One k-step's FMAs: the stage at `cur` (0 or `STAGE`) into `acc`, in
/// increasing `p` (the same chain as the 64 × 64 kernel). Kept rolled: the
/// guarded path's loop (edge blocks), where code size matters more than
/// the loop's bookkeeping.
#[inline(always)]
fn multiply(
    vecs: &Vecs,
    cur: usize,
    micro: (usize, usize),
    acc: &mut [[f32; 2 * MICRO]; 2 * MICRO],
) {
    for p in 0..BK {
        fma_row(load_row(vecs, cur / VEC, p, micro), acc);
    }
}

/// The k-loop of a block whose whole k-range of `A` and `B` is interior
/// (`pairs`: each thread's vector of every k-step's slices, proven once),
/// software-pipelined as CUTLASS's SIMT GEMM is: per k-step, the next
/// slices' two 16-byte global loads with no check first; then the eight
/// rows written out (`unroll`), each row's fragments loaded from shared
/// memory one row ahead of its FMAs (the fragments double-buffered in
/// registers); before the last row's FMAs, the fetched slices stored into
/// the other stage, the one barrier, and the next stage's first row
/// loaded. The last k-step's rows after the loop.
///
/// Why one barrier is enough: a stage is written at the last row of the
/// k-step before the one that reads it, after the barrier of the k-step
/// that last read it (whose last row's fragments were loaded one row
/// before that barrier).
#[inline(always)]
fn lean_loop<const TA: bool, const TB: bool>(
    (smem, vecs): (&Smem, &Vecs),
    mut pairs: VectorPairs<'_, f32, VEC, f32, VEC>,
    t: usize,
    acc: &mut [[f32; 2 * MICRO]; 2 * MICRO],
) {
    let sa = Slice::<BK, BM> { k_rows: TA };
    let sb = Slice::<BK, BN> { k_rows: !TB };
    let micro = micro_origin(t);
    let Some((va, vb)) = pairs.load_next() else {
        return;
    };
    sa.store(smem, vecs, 0, t, va);
    sb.store(smem, vecs, B_AT, t, vb);
    sync_threads();
    // The stage being read, in vectors (0 or STAGE / VEC): k-step `s`'s is
    // `(s mod 2)·STAGE / VEC`.
    let mut cur = 0;
    let mut frags = load_row(vecs, cur, 0, micro);
    // Every k-step but the last. (The loop tests `left` itself, so that
    // `load_next`'s own test folds into it: looping on the `Option`
    // instead, LLVM merged the paths and ptxas predicated the global
    // loads and the pointers' updates.)
    while pairs.left() > 0 {
        let Some((va, vb)) = pairs.load_next() else {
            break;
        };
        let next = STAGE / VEC - cur;
        unroll::<BK>(
            #[inline(always)]
            |p| {
                let ahead = if p + 1 < BK {
                    load_row(vecs, cur, p + 1, micro)
                } else {
                    // The other stage: last read before the previous
                    // k-step's barrier.
                    sa.store(smem, vecs, next * VEC, t, va);
                    sb.store(smem, vecs, next * VEC + B_AT, t, vb);
                    sync_threads();
                    load_row(vecs, next, 0, micro)
                };
                fma_row(frags, acc);
                frags = ahead;
            },
        );
        cur = next;
    }
    // The last k-step: each row's FMAs, then the next row's loads (not
    // ahead of the FMAs, as in the loop, so LLVM cannot merge these rows
    // with the loop's first seven and predicate the loop's global loads).
    unroll::<BK>(
        #[inline(always)]
        |p| {
            fma_row(frags, acc);
            if p + 1 < BK {
                frags = load_row(vecs, cur, p + 1, micro);
            }
        },
    );
}

/// The k-loop of any other block (an edge tile, a ragged k, an odd leading
/// dimension or batch offset): each k-step's vectors fetched with checked
/// loads, zero outside the matrix.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn guarded_loop<const TA: bool, const TB: bool>(
    (smem, vecs): (&Smem, &Vecs),
    (a, b): (&Stored<'_>, &Stored<'_>),
    (row0, col0): (usize, usize),
    steps: usize,
    t: usize,
    acc: &mut [[f32; 2 * MICRO]; 2 * MICRO],
) {
    let sa = Slice::<BK, BM> { k_rows: TA };
    let sb = Slice::<BK, BN> { k_rows: !TB };
    let micro = micro_origin(t);
    let mut va = sa.fetch(a, (0, row0), t);
    let mut vb = sb.fetch(b, (0, col0), t);
    sa.store(smem, vecs, 0, t, va);
    sb.store(smem, vecs, B_AT, t, vb);
    sync_threads();
    let mut step = 0;
    while step < steps {
        let cur = (step % 2) * STAGE;
        let more = step + 1 < steps;
        if more {
            let p0 = (step + 1) * BK;
            va = sa.fetch(a, (p0, row0), t);
            vb = sb.fetch(b, (p0, col0), t);
        }
        multiply(vecs, cur, micro, acc);
        if more {
            // The other stage: last read a step ago, before the barrier
            // that ended it.
            let next = STAGE - cur;
            sa.store(smem, vecs, next, t, va);
            sb.store(smem, vecs, next + B_AT, t, vb);
        }
        sync_threads();
        step += 1;
    }
}

/// `D = alpha·op(A)·op(B) + beta·C` for the `BM × BN` tile of `C` this
/// block owns, as [`super::gemm`] computes it (the same bits), warp-tiled
/// (module docs), on the [`F32_TILE_LARGE`] tile (`BM × BN × BK`). Launch
/// with blocks of `F32_TILE_LARGE.threads()` threads (1-D) and a
/// `⌈n/BN⌉ × ⌈m/BM⌉ × batch` grid; any other block shape traps. Batches
/// (and their depths, `k` and `k_last`) as for [`super::gemm`].
#[kernel(
    shared = [f32; SHARED_LEN],
    // Two blocks of 256 threads per SM: at most 128 registers a thread.
    // (Uncapped, ptxas took the written-out k-step to 170–244 before
    // `order_point`; capped, the kernel needs 119–123 with no spills.)
    max_threads = 256,
    min_blocks = 2,
    instances(
        gemm_f32_nn_128x128x8 = <false, false>,
        gemm_f32_nt_128x128x8 = <false, true>,
        gemm_f32_tn_128x128x8 = <true, false>,
        gemm_f32_tt_128x128x8 = <true, true>,
    )
)]
#[allow(clippy::too_many_arguments)]
pub fn gemm_warp_tiled<const TA: bool, const TB: bool>(
    k: usize,
    k_last: usize,
    alpha: f32,
    beta: f32,
    a: Global<f32>,
    lda: usize,
    stride_a: usize,
    b: Global<f32>,
    ldb: usize,
    stride_b: usize,
    mut c: OutMatrix<f32, MicroTiles<BM, BN, MICRO, MICRO, 2, 2>>,
) {
    let tile = F32_TILE_LARGE;
    // The thread → vector and thread → micro-tile maps assume exactly this
    // block; a uniform check (every thread traps alike, before any barrier).
    assert!(
        thread::block_dim() == Dim3::x(tile.threads() as u32),
        "gemm: launch with a 1-D block of WarpTiledTile::threads() threads"
    );
    let (_, m) = c.batch();
    let n = c.cols();
    // (`%` is a no-op for the asserted block; it tells the compiler the
    // bound, so shared offsets derived from `t` are proven in range.)
    let t = thread::linear_thread_id() as usize % tile.threads();
    let block = thread::block_idx();
    let z = block.z as usize;
    let k = super::batch_depth(k, k_last);
    let (row0, col0) = (block.y as usize * BM, block.x as usize * BN);
    let a = Stored::new(
        a,
        lda,
        z.wrapping_mul(stride_a),
        if TA { (k, m) } else { (m, k) },
    );
    let b = Stored::new(
        b,
        ldb,
        z.wrapping_mul(stride_b),
        if TB { (n, k) } else { (k, n) },
    );
    // alpha = 0: D = beta·C, with no reads of A or B. Uniform over the block.
    let steps = if alpha == 0.0 { 0 } else { k.div_ceil(BK) };

    let smem = shared::array::<f32, SHARED_LEN>();
    let mut acc = [[0f32; 2 * MICRO]; 2 * MICRO];
    // The block's shared memory starts 16-byte aligned, on a GPU and in the
    // emulator alike: a uniform check, once (every thread alike, before any
    // barrier).
    let Some(vecs) = smem.vectors16::<VEC>() else {
        panic!("gemm: the block's shared memory is not 16-byte aligned")
    };
    if steps > 0 {
        // Once per block: is the block's whole k-range of A and B interior
        // (every k-step's slice inside its matrix, in bounds and 16-byte
        // aligned)? Then the lean loop, its loads proven by this check;
        // otherwise the guarded one. Every condition is uniform over the
        // block.
        let pa = if TA {
            a.interior::<BK, BM>((0, row0), true, steps, t)
        } else {
            a.interior::<BM, BK>((row0, 0), false, steps, t)
        };
        let pb = if TB {
            b.interior::<BN, BK>((col0, 0), false, steps, t)
        } else {
            b.interior::<BK, BN>((0, col0), true, steps, t)
        };
        if let Some(pairs) = pa.zip(pb).and_then(|(pa, pb)| pa.zip(pb)) {
            thread::path("lean");
            lean_loop::<TA, TB>((&smem, &vecs), pairs, t, &mut acc);
        } else {
            thread::path("guarded");
            guarded_loop::<TA, TB>((&smem, &vecs), (&a, &b), (row0, col0), steps, t, &mut acc);
        }
    }

    let Some(mut mine) = c.micro_tile() else {
        return;
    };
    // Row `i` is always `acc[0]` and column `j` of it `row[0]`, rows and
    // columns rotating one place per step: constant indices, so the
    // accumulators stay in registers where the compiler keeps these loops
    // rolled (an indexed walk would put all 64 in local memory).
    for i in 0..2 * MICRO {
        let mut row = acc[0];
        for j in 0..2 * MICRO {
            if let Some(mut d) = mine.slot(i, j) {
                let prod = alpha * row[0];
                // beta = 0: C is never read (NaN there must not leak).
                d.set(if beta == 0.0 {
                    prod
                } else {
                    beta.fma(d.get(), prod)
                });
            }
            row = core::array::from_fn(|q| row[(q + 1) % (2 * MICRO)]);
        }
        acc = core::array::from_fn(|q| acc[(q + 1) % (2 * MICRO)]);
    }
}
