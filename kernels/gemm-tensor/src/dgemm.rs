//! FP64 GEMM on the tensor cores (sm_80 and later): `D = alpha·op(A)·op(B) +
//! beta·C`, all f64, each `mma` a `mma.sync.m8n8k4.f64` ([`dmma`]).
//!
//! The f16/bf16/tf32 kernels' machinery with the f64 instruction: the tile
//! is an [`MmaTile`] of f64 ([`DMMA_TILE`]: its stage layouts, shared memory,
//! threads and names), the operands are [`TileSource`]s copied chunk by
//! chunk by `load_tile` (`cp.async` where aligned, zeros outside the
//! matrix) or, for a block whose whole k-range is interior, by one proven
//! [`PanelCopies`](mma::PanelCopies) per thread (no check per chunk, every `cp.async`
//! predicated on a k-step being left), and the stages are a [`StageRing`]
//! driven by the same [`StageFill`] protocol as [`pipeline_interior`]
//! (prologue, one wait and one barrier per k-step). What differs is what
//! the instruction asks of the stages:
//!
//! - **Fragments**: one f64 of `A` and one of `B` per lane, which no
//!   `ldmatrix` delivers (it moves 16-bit elements); each is one 64-bit
//!   shared load, from a [`dmma::Window`] (the lane's element computed and
//!   clamped once, each load the stage's address plus a constant).
//! - **Rows**: padded by 32 bytes in every orientation
//!   ([`MmaTile`]'s `f64_pad`), so that a half-warp's 64-bit loads meet no
//!   bank twice; no XOR swizzle (a lane reads one element, not a 16-byte
//!   row).
//!
//! Per k-step of 16 a warp issues `(32/8)·(32/8)·4 = 64` DMMA and loads
//! `(4 + 4)·4 = 32` fragments: 0.5 shared loads per DMMA, 128 bytes of
//! shared memory per DMMA and warp.
//!
//! The epilogue writes each 8 × 8 accumulator through the warp's owned tile
//! ([`update_dmma_c`](warpforge_device::own::WarpTile::update_dmma_c)): `d =
//! alpha·acc` when `beta = 0` (C not read), else `fma(beta, c, alpha·acc)`,
//! in f64, as the SIMT kernels do. `alpha = 0` skips the k-loop (A and B
//! not read).
//!
//! [`pipeline_interior`]: super::pipeline_interior

use super::{
    BLOCK_BANDS, MmaTile, StageElement, StageFill, Stored, TileSource, a_offset, b_offset,
    enter_block_tile, load_tile,
};
use warpforge_device::mma::dmma::{self, FragA, FragB, FragC, Orientation, Window};
use warpforge_device::mma::{self, ChunkPlacement, Stage, StageRing};
use warpforge_device::shared::{self, SharedArray};
use warpforge_device::sync::sync_threads;
use warpforge_device::thread;
use warpforge_device::unroll::{self, unroll_upto, unroll2};
#[cfg(feature = "entries")]
use {
    warpforge_device::num::Fma,
    warpforge_device::{Global, OutMatrix, own::WarpGrid},
    warpforge_macros::kernel,
};

/// The FP64 tensor-core tile: 64 × 64 per block, k-step 16, four 32 × 32
/// warp tiles as 2 × 2 (128 threads, 32 f64 accumulators a thread), 3
/// stages: 51–60 KiB of shared memory (dynamic, above 48 KiB: the host opts
/// in, as for [`TC_TILE_LARGE`](super::TC_TILE_LARGE)).
pub const DMMA_TILE: MmaTile = MmaTile::of::<f64>(64, 64, 16, 32, 32, 3);

const _: () = assert!(DMMA_TILE.is_valid() && DMMA_TILE.max_shared_bytes() <= 99 * 1024);

#[cfg(feature = "entries")]
const D_M: usize = DMMA_TILE.m;
#[cfg(feature = "entries")]
const D_N: usize = DMMA_TILE.n;
#[cfg(feature = "entries")]
const D_K: usize = DMMA_TILE.k;
#[cfg(feature = "entries")]
const D_WM: usize = DMMA_TILE.warp_m;
#[cfg(feature = "entries")]
const D_WN: usize = DMMA_TILE.warp_n;
#[cfg(feature = "entries")]
const D_S: usize = DMMA_TILE.stages;
#[cfg(feature = "entries")]
const D_MI: usize = D_WM / dmma::M;
#[cfg(feature = "entries")]
const D_NI: usize = D_WN / dmma::N;

/// The most k-slices (`BK / 4`) a stage holds (`k_step` writes its slice
/// loop out for at most this many, and checks it).
const MAX_SLICES: usize = 4;

/// A source with no matrix: every chunk zeros (a prologue's stage past the
/// last k-step).
struct Zeros;

impl<T: StageElement> TileSource<T> for Zeros {
    #[inline(always)]
    fn load_chunk(&self, smem: &SharedArray<T>, dst: usize, _: usize, _: usize) {
        for q in 0..T::CHUNK {
            smem.store(dst + q, T::ZERO);
        }
    }
}

/// The guarded path's [`StageFill`]: each k-step copied chunk by chunk
/// (`load_tile`: `cp.async` for a whole aligned chunk, plain stores and
/// zeros otherwise), for blocks at a ragged edge or with a misaligned
/// operand. The stages are the lean path's ring, so one pipeline serves both.
struct GuardedFill<
    's,
    A,
    B,
    const TA: bool,
    const TB: bool,
    const BM: usize,
    const BN: usize,
    const BK: usize,
> {
    smem: SharedArray<f64>,
    a: &'s A,
    b: &'s B,
    /// The next k-step to copy.
    next: usize,
    ktiles: usize,
    /// The block tile's origin `(row0, col0)`.
    origin: (usize, usize),
    /// `(t, threads)`.
    me: (usize, usize),
    /// Row strides of the stage's slices, and `A`'s length.
    sa: usize,
    sb: usize,
    a_len: usize,
}

impl<
    A: TileSource<f64>,
    B: TileSource<f64>,
    const TA: bool,
    const TB: bool,
    const BM: usize,
    const BN: usize,
    const BK: usize,
> GuardedFill<'_, A, B, TA, TB, BM, BN, BK>
{
    /// Copies k-step `kt` of `a` and `b` into `stage`.
    #[inline(always)]
    fn copy<SA: TileSource<f64>, SB: TileSource<f64>>(
        &self,
        stage: Stage,
        a: &SA,
        b: &SB,
        kt: usize,
    ) {
        let (base, p0) = (stage.first(), kt * BK);
        let (row0, col0) = self.origin;
        let (smem, me) = (&self.smem, self.me);
        if TA {
            load_tile::<f64, SA, BK, BM>(smem, base, self.sa, a, (p0, row0), me);
        } else {
            load_tile::<f64, SA, BM, BK>(smem, base, self.sa, a, (row0, p0), me);
        }
        let base = base + self.a_len;
        if TB {
            load_tile::<f64, SB, BN, BK>(smem, base, self.sb, b, (col0, p0), me);
        } else {
            load_tile::<f64, SB, BK, BN>(smem, base, self.sb, b, (p0, col0), me);
        }
    }
}

impl<
    A: TileSource<f64>,
    B: TileSource<f64>,
    const TA: bool,
    const TB: bool,
    const BM: usize,
    const BN: usize,
    const BK: usize,
> StageFill for GuardedFill<'_, A, B, TA, TB, BM, BN, BK>
{
    #[inline(always)]
    fn fill(&mut self, stage: Stage) {
        if self.next < self.ktiles {
            self.copy(stage, self.a, self.b, self.next);
            self.next += 1;
        }
    }

    #[inline(always)]
    fn prime(&mut self, stage: Stage) {
        if self.next < self.ktiles {
            self.fill(stage);
        } else {
            self.copy(stage, &Zeros, &Zeros, 0);
        }
    }
}

/// The lean path's [`StageFill`]: both panels' proven copies (a newtype:
/// the library's `PanelCopies` fill rounds tf32 as it lands, f64 needs
/// nothing done).
struct PanelFill<'a>(mma::PanelCopies<'a, f64>);

impl StageFill for PanelFill<'_> {
    #[inline(always)]
    fn fill(&mut self, stage: Stage) {
        self.0.copy_next(stage);
    }

    #[inline(always)]
    fn prime(&mut self, stage: Stage) {
        self.0.copy_next_or_zero(stage);
    }
}

/// The FP64 main loop for one block (the f64 [`super::main_loop`]):
/// `ktiles` k-steps of `op(A)·op(B)` for the `BM × BN` tile at `(row0,
/// col0)` into this warp's `WM × WN` accumulators at `(warp_row,
/// warp_col)`, `WM = 8·MI`, `WN = 8·NI`. The lean pipeline when both
/// operands' whole k-range is interior (proven once), else the guarded one;
/// the same ring, fragment windows and k-loop either way. Every thread of
/// the block must call it (barriers); `t` is its index in the 1-D block.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn main_loop<
    A: TileSource<f64>,
    B: TileSource<f64>,
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
    let tile = MmaTile::of::<f64>(BM, BN, BK, WM, WN, S);
    let me = (t, tile.threads());
    let smem = shared::dynamic::<f64>();
    let (_, sa) = tile.a_layout(TA);
    let (_, sb) = tile.b_layout(TB);
    let a_len = tile.a_len(TA);
    // Once per block (uniform): the stages, and each lane's fragment
    // element in them, for the farthest fragment and k-slice of its warp.
    let ring = StageRing::check(&smem, tile.stage_len(TA, TB), S)
        .expect("dgemm: the dynamic shared memory does not hold the stages");
    let (a_orient, b_orient) = (
        if TA {
            Orientation::KMajor
        } else {
            Orientation::KContiguous
        },
        if TB {
            Orientation::KContiguous
        } else {
            Orientation::KMajor
        },
    );
    let frags_a = ring
        .dmma_window(
            a_offset::<TA>(warp_row, 0, sa),
            sa,
            a_orient,
            a_offset::<TA>((MI - 1) * dmma::M, BK - dmma::K, sa),
        )
        .expect("dgemm: A's fragments lie outside a stage");
    let frags_b = ring
        .dmma_window(
            a_len + b_offset::<TB>(warp_col, 0, sb),
            sb,
            b_orient,
            b_offset::<TB>((NI - 1) * dmma::N, BK - dmma::K, sb),
        )
        .expect("dgemm: B's fragments lie outside a stage");
    let frags = Slices::<TA, TB> {
        a: &frags_a,
        b: &frags_b,
        sa,
        sb,
    };
    // The lean path: each thread's share of every k-step's copies proven
    // once (both operands' whole k-range inside their matrices, in bounds
    // and 16-byte aligned). One arm per transpose pair (the panels' shapes
    // are types); each instance keeps the one its `TA`/`TB` select.
    macro_rules! lean {
        ($ar:expr, $ac:expr, $a0:expr, $a_rows:expr, $br:expr, $bc:expr, $b0:expr, $b_rows:expr) => {
            if let Some(pa) = a.interior_panel::<{ $ar }, { $ac }>($a0, $a_rows, ktiles)
                && let Some(pb) = b.interior_panel::<{ $br }, { $bc }>($b0, $b_rows, ktiles)
                && let Some(ca) = pa.thread_copy(&ring, 0, sa, ChunkPlacement::PLAIN, me)
                && let Some(copies) = pb
                    .thread_copy(&ring, a_len, sb, ChunkPlacement::PLAIN, me)
                    .and_then(|cb| ca.zip(cb))
            {
                thread::path("lean");
                return pipeline::<BK, S, MI, NI, TA, TB>(&ring, PanelFill(copies), &frags, ktiles);
            }
        };
    }
    // (Nested `if`s on the constants, as `super::main_loop`'s: an instance
    // compiles only its own arm.)
    if TA {
        if TB {
            lean!(BK, BM, (0, row0), true, BN, BK, (col0, 0), false);
        } else {
            lean!(BK, BM, (0, row0), true, BK, BN, (0, col0), true);
        }
    } else if TB {
        lean!(BM, BK, (row0, 0), false, BN, BK, (col0, 0), false);
    } else {
        lean!(BM, BK, (row0, 0), false, BK, BN, (0, col0), true);
    }
    thread::path("guarded");
    let fill = GuardedFill::<A, B, TA, TB, BM, BN, BK> {
        smem,
        a,
        b,
        next: 0,
        ktiles,
        origin: (row0, col0),
        me,
        sa,
        sb,
        a_len,
    };
    pipeline::<BK, S, MI, NI, TA, TB>(&ring, fill, &frags, ktiles)
}

/// A warp's fragment loads of one k-slice (4 deep) of a stage: its `MI`
/// `A` and `NI` `B` fragments, each a [`Window`] load at a constant offset.
struct Slices<'w, const TA: bool, const TB: bool> {
    a: &'w Window,
    b: &'w Window,
    sa: usize,
    sb: usize,
}

impl<const TA: bool, const TB: bool> Slices<'_, TA, TB> {
    /// k-slice `kk` (k from `4·kk`) of `stage`.
    #[inline(always)]
    fn load<const MI: usize, const NI: usize>(
        &self,
        stage: Stage,
        kk: usize,
    ) -> ([FragA; MI], [FragB; NI]) {
        let p = kk * dmma::K;
        (
            unroll::array(
                #[inline(always)]
                |mi| self.a.a(stage, a_offset::<TA>(mi * dmma::M, p, self.sa)),
            ),
            unroll::array(
                #[inline(always)]
                |ni| self.b.b(stage, b_offset::<TB>(ni * dmma::N, p, self.sb)),
            ),
        )
    }
}

/// The k-loop: `S` stages primed; then per k-step its slices' fragment
/// loads and `dmma`s, after which the next stage is waited for and
/// published by the barrier (which also says every warp is done with stage
/// `s`), and stage `s` refilled with the k-step `S` on. Written out over the
/// ring's stages (every stage a constant, every load `register +
/// immediate`) and over the slices, with no fragment carried from one
/// slice or k-step to the next: ptxas schedules each k-step's loads ahead
/// of its `dmma`s itself, where `pipeline_interior`'s explicit double
/// buffering (kept for `ldmatrix`) cost here a register move for every
/// half of every f64 fragment (177 `IMAD.MOV` a loop of 192 DMMA, sm_80).
#[inline(always)]
fn pipeline<
    const BK: usize,
    const S: usize,
    const MI: usize,
    const NI: usize,
    const TA: bool,
    const TB: bool,
>(
    ring: &StageRing<f64>,
    mut fill: impl StageFill,
    slices: &Slices<'_, TA, TB>,
    ktiles: usize,
) -> [[FragC; NI]; MI] {
    const {
        assert!(
            S >= 2 && BK / dmma::K <= MAX_SLICES && BK.is_multiple_of(dmma::K),
            "dgemm: at least 2 stages, at most MAX_SLICES k-slices of 4 a stage"
        )
    };
    let mut acc = [[FragC::default(); NI]; MI];
    // A 32-bit count (k-steps of 16 of a k below 2^36 at least).
    let mut left = ktiles.min(u32::MAX as usize) as u32;
    // Prologue: k-steps 0 .. S in flight, one group each; then step 0 has
    // landed (at most S − 1 newer groups pending) and the barrier publishes it.
    fill.prime_ring::<f64, S>(ring);
    if left == 0 {
        return acc;
    }
    mma::cp_async_wait_group((S - 1) as u32);
    fill.landed(ring.stage(0));
    sync_threads();
    let slices_per_stage = BK / dmma::K;
    macro_rules! k_step {
        ($s:expr) => {
            if left > 0 {
                let s = $s;
                unroll_upto::<MAX_SLICES>(
                    slices_per_stage,
                    #[inline(always)]
                    |kk| {
                        let (fa, fb) = slices.load::<MI, NI>(ring.stage(s), kk);
                        unroll2::<MI, NI>(
                            #[inline(always)]
                            |mi, ni| acc[mi][ni] = dmma::dmma(fa[mi], fb[ni], acc[mi][ni]),
                        );
                    },
                );
                // Step kt + 1 has landed (at most S − 2 newer groups pending:
                // S in the prologue, one per k-step since); the barrier
                // publishes it and frees stage s for step kt + S (if any:
                // one uniform predicate for every copy).
                mma::cp_async_wait_group((S - 2) as u32);
                fill.landed(ring.stage((s + 1) % S));
                sync_threads();
                fill.fill(ring.stage(s));
                mma::cp_async_commit();
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

#[cfg(feature = "entries")]
/// `D = alpha·op(A)·op(B) + beta·C` in f64 on the tensor cores for the
/// `BM × BN` tile of `C` this block owns (module docs). `TA`/`TB`: `A`/`B`
/// stored transposed; `BM, BN, BK, WM, WN, S` the [`MmaTile`] (of f64);
/// `MI = WM/8`, `NI = WN/8` (checked). Launch with blocks of
/// `MmaTile::threads()` threads (1-D) and a `⌈n/BN⌉ × ⌈m/BM⌉ × batch`
/// grid; any other block shape traps. Batches (and their depths, `k` and
/// `k_last`) as for the SIMT kernel (`warpforge_kernels_gemm_simt::gemm`).
#[kernel(
    shared = [f64; MmaTile::of::<f64>(BM, BN, BK, WM, WN, S).shared_len(TA, TB)],
    instances(
        gemm_dmma_f64_nn_64x64x16_s3 = <false, false, D_M, D_N, D_K, D_WM, D_WN, D_S, D_MI, D_NI>,
        gemm_dmma_f64_nt_64x64x16_s3 = <false, true, D_M, D_N, D_K, D_WM, D_WN, D_S, D_MI, D_NI>,
        gemm_dmma_f64_tn_64x64x16_s3 = <true, false, D_M, D_N, D_K, D_WM, D_WN, D_S, D_MI, D_NI>,
        gemm_dmma_f64_tt_64x64x16_s3 = <true, true, D_M, D_N, D_K, D_WM, D_WN, D_S, D_MI, D_NI>,
    )
)]
#[allow(clippy::too_many_arguments)]
pub fn gemm_dmma<
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
    mut c: OutMatrix<f64, WarpGrid<BM, BN, WM, WN, BLOCK_BANDS, false>>,
) {
    let (t, _) = enter_block_tile::<f64, BM, BN, BK, WM, WN, S, MI, NI>();
    // As `gemm_tc`: the block's tile by the map its epilogue writes
    // through, batch z at z·stride_a / z·stride_b, every batch k deep but
    // the last (split-k's remainder).
    let (row0, col0) = c.block_origin();
    let (_, m) = c.batch();
    let n = c.cols();
    let warp_at = c.warp_offset().unwrap_or((0, 0));
    let z = thread::block_idx().z as usize;
    let (a_off, b_off) = (z.wrapping_mul(stride_a), z.wrapping_mul(stride_b));
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
    let acc = main_loop::<_, _, TA, TB, BM, BN, BK, WM, WN, S, MI, NI>(
        &a_src,
        &b_src,
        ktiles,
        (row0, col0),
        t,
        warp_at,
    );
    let Some(mut out) = c.tile() else {
        return;
    };
    // Written out: every accumulator a constant index (registers).
    unroll2::<MI, NI>(
        #[inline(always)]
        |mi, ni| {
            out.update_dmma_c(mi, ni, &acc[mi][ni], |v, d| {
                let prod = alpha * v;
                // beta = 0: C is never read (NaN there must not leak).
                d.set(if beta == 0.0 {
                    prod
                } else {
                    beta.fma(d.get(), prod)
                });
            })
        },
    );
}
