//! The Hopper kernels' epilogue, shared by the GEMM and the convolution:
//! after a tile's last `wgmma` group (and the ring's "drained" barrier,
//! `mainloop::drain`) each consumer warp writes its 16 rows of the
//! accumulator through shared memory, one 16 × 64 panel at a time, staged
//! in the ring's stage of the tile's last step (which nobody releases
//! until the epilogue is done, `mainloop::Ring::release_held`): its lanes
//! store their `mma` fragments (8-byte stores) into the warp's own 4 KiB
//! staging tile there (f32, 16-byte chunks XOR-swizzled by row: no bank
//! conflicts either way), the warp syncs, and each lane reads back 16-byte
//! runs of rows and writes them to the output through its `TileWalk` tile
//! (`RunTile`: owned, one request of the warp whole 128-byte lines). How is
//! decided once per tile (`RunTile::panels`: interior, edge, elements).
//! What is written is the kernel's [`Combine`]: the GEMM's linear
//! combination `alpha·acc + beta·C` ([`LinearCombination`]), the
//! convolution's `acc + bias[k]` then ReLU — computed in f32 from the
//! unrounded accumulator and rounded once to the output type.

use warpforge_device::num::Output;
use warpforge_device::own::{RunElement, RunPanels, RunTile};
use warpforge_device::shared::{self, SharedTile, SharedVectors};
use warpforge_device::unroll::unroll;
use warpforge_device::wgmma::{Accumulator, AccumulatorWidth, Width};
use warpforge_device::{thread, warp};

/// The columns of a panel a warp stages at a time.
pub const PANEL: usize = 64;
/// Each consumer warp's staging tile: one 16 × 64 panel of its rows of the
/// accumulator, in f32 (4 KiB).
pub const PANEL_ELEMS: usize = 16 * PANEL;
/// The eight consumer warps' staging tiles (two consumer warpgroups), in
/// f32: 32 KiB at the start of a stage.
pub const STAGING_ELEMS: usize = 8 * PANEL_ELEMS;

/// What an epilogue writes for each accumulator value, in f32, rounded once
/// to the output type.
pub trait Combine<TOut: Output> {
    /// Whether the output's previous values are read (the GEMM's beta ≠ 0).
    fn reads_output(&self) -> bool;
    /// The value for accumulator value `acc` at column `col` of the output
    /// (the batch's), `old` its previous value (read only if
    /// [`reads_output`](Self::reads_output)).
    fn combine(&self, acc: f32, col: usize, old: impl FnOnce() -> TOut) -> TOut;
    /// The same where the output is not read (a path on which that is a
    /// constant, so nothing tests it per element).
    fn fresh(&self, acc: f32, col: usize) -> TOut;
}

/// The GEMM's `alpha·acc + beta·C` ([`Output::axpby`]: C not read when
/// `beta = 0`, as BLAS specifies).
#[derive(Clone, Copy)]
pub struct LinearCombination {
    pub alpha: f32,
    pub beta: f32,
}

impl<TOut: Output> Combine<TOut> for LinearCombination {
    #[inline(always)]
    fn reads_output(&self) -> bool {
        self.beta != 0.0
    }

    #[inline(always)]
    fn combine(&self, acc: f32, _col: usize, old: impl FnOnce() -> TOut) -> TOut {
        TOut::axpby(self.alpha, acc, self.beta, old)
    }

    #[inline(always)]
    fn fresh(&self, acc: f32, _col: usize) -> TOut {
        TOut::axpby(self.alpha, acc, 0.0, || TOut::from_f32(0.0))
    }
}

/// The consumer warps' staging tiles in each stage of a ring of `STAGES`
/// stages of `STAGING_ELEMS + STAGE_REST` f32 each (its first 32 KiB), as
/// 16-byte chunks of f32.
#[inline(always)]
pub fn staging_tiles<const STAGES: usize, const STAGE_REST: usize>()
-> [SharedVectors<f32, 4>; STAGES] {
    let mut tiles = [None; STAGES];
    let mut tile: SharedTile<f32, STAGING_ELEMS> = shared::array::<f32, STAGING_ELEMS>();
    for (s, chunks) in tiles.iter_mut().enumerate() {
        if s > 0 {
            tile = tile
                .after::<f32, STAGE_REST>()
                .after::<f32, STAGING_ELEMS>();
        }
        *chunks = tile.vectors16::<4>();
    }
    tiles.map(|t| t.expect("the stages start 16-byte aligned"))
}

/// This warp's staging tile in the stage of every tile's last step
/// (`last`, from `mainloop::Ring::last_stage`): chosen once, before the
/// tile loop, from the views of every stage (after the register split, as
/// the stages are, and outside the tile loop: their checks are no trap
/// path there, where one would make ptxas serialise the `wgmma`s, C7519).
#[inline(always)]
pub fn staged_tile<const STAGES: usize, const STAGE_REST: usize>(last: usize) -> Staged {
    let staging = staging_tiles::<STAGES, STAGE_REST>();
    let mut chunks = staging[0];
    unroll::<STAGES>(
        #[inline(always)]
        |s| {
            if s == last {
                chunks = staging[s];
            }
        },
    );
    Staged {
        chunks,
        base: (thread::warp_id() as usize % 8) * PANEL_ELEMS,
    }
}

/// Where element (`row`, `col`) of a warp's 16 × 64 panel lies in its
/// staging tile: row-major, each row's 16-byte chunks permuted by
/// `(row mod 4)·2`, so that the fragments' 8-byte stores (a half-warp: 4
/// rows, the same 8 columns) and the runs' 16-byte loads (a quarter-warp: 8
/// chunks of one row) each hit 32 distinct banks.
///
/// The row and column are taken modulo the panel's (they are in it), so
/// the compiler sees every index in the staging tiles: no bounds check,
/// and so no trap path, is left in the tile loop (one there makes ptxas
/// serialise the `wgmma`s, C7519).
#[inline(always)]
fn staged(row: usize, col: usize) -> usize {
    let (row, col) = (row % 16, col % PANEL);
    row * PANEL + (((col / 4) ^ ((row % 4) * 2)) * 4) + col % 4
}

/// A warp's staging tile, as its runs read it.
#[derive(Clone, Copy)]
pub struct Staged {
    chunks: SharedVectors<f32, 4>,
    /// The warp's tile's first element.
    base: usize,
}

impl Staged {
    /// The accumulator values of the run at (`row`, `col`) of the warp's
    /// tile (in the panel staged now):
    /// its first `4·chunks` (1 or 2 chunks: a run of f32 is 4 elements, of
    /// f16 8). Of two chunks, lanes 4..8 of each quarter-warp (runs 4..8 of
    /// a row) load them in the other order, so each load's 8 lanes meet 8
    /// distinct groups of 4 banks.
    #[inline(always)]
    fn read(&self, row: usize, col: usize, chunks: usize) -> [f32; 8] {
        // The run's column in the tile, in the panel.
        let col = col % PANEL;
        let chunk = |h: usize| self.chunks.load((self.base + staged(row, col + 4 * h)) / 4);
        if chunks == 1 {
            let a = chunk(0);
            return [a[0], a[1], a[2], a[3], 0.0, 0.0, 0.0, 0.0];
        }
        let swap = (col / 8) % 8 >= 4;
        let s = usize::from(swap);
        let x = chunk(s);
        let y = chunk(1 - s);
        let (lo, hi) = if swap { (y, x) } else { (x, y) };
        [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]]
    }

    /// The accumulator value at (`row`, `col`) of the warp's tile (in the
    /// panel staged now): its chunk's load, the element picked by selects
    /// (the swizzle moves whole chunks, so it is element `col mod 4` of the
    /// chunk), not an array indexed at run time (which would live in local
    /// memory).
    #[inline(always)]
    fn read_one(&self, row: usize, col: usize) -> f32 {
        let v = self.chunks.load((self.base + staged(row, col % PANEL)) / 4);
        match col % 4 {
            0 => v[0],
            1 => v[1],
            2 => v[2],
            _ => v[3],
        }
    }
}

/// The epilogue of one tile, panel by panel: this warp writes the 8
/// accumulator fragments of panel `p` (its 16 rows, columns `64p ..`) into
/// its staging tile, syncs the warp, and has `write(p, staged)` store the
/// panel in runs (reading each run's values with [`Staged::read`]); then
/// syncs again before the next panel overwrites the tile. Every consumer
/// warp stages every panel in straight-line code (the accumulator read on
/// no divergent path, which would make ptxas serialise the `wgmma`s,
/// C7519), whether it has a part of the output or not.
#[inline(always)]
fn stage_panels<const N: usize>(
    acc: &Accumulator<N>,
    staged_tile: &Staged,
    mut write: impl FnMut(usize, &Staged),
) where
    Width<N>: AccumulatorWidth,
{
    let lane = thread::lane_id() as usize;
    let (g, t) = (lane / 4, lane % 4);
    let base = staged_tile.base;
    let regs = acc.regs();
    // At most 4 panels (N ≤ 256), written out.
    unroll::<4>(
        #[inline(always)]
        |p| {
            if p >= N / PANEL {
                return;
            }
            // Fragment f of the panel: rows g and g + 8, columns 8f + 2t
            // and the next (`mma`'s accumulator layout).
            unroll::<{ PANEL / 8 }>(
                #[inline(always)]
                |f| {
                    let j = 4 * (8 * p + f);
                    let col = 8 * f + 2 * t;
                    let half = (col / 2) % 2;
                    let chunks = staged_tile.chunks;
                    chunks.store_half((base + staged(g, col)) / 4, half, [regs[j], regs[j + 1]]);
                    chunks.store_half(
                        (base + staged(g + 8, col)) / 4,
                        half,
                        [regs[j + 2], regs[j + 3]],
                    );
                },
            );
            warp::sync(u32::MAX);
            write(p, staged_tile);
            warp::sync(u32::MAX);
        },
    );
}

/// Writes one tile's accumulator (this warp's 16 rows of it, `N` columns)
/// to `out`, this warp's part of the tile (`None`: it has none, and only
/// stages), through `staged_tile`, each value `op`'s combination of it,
/// rounded once to the output type; `op` is told each value's column in the
/// output (the warp tile's first, `RunTile::origin`, plus the run's).
#[inline(always)]
pub fn write_tile<TOut: Output + RunElement, const N: usize>(
    acc: &Accumulator<N>,
    staged_tile: &Staged,
    mut out: Option<RunTile<'_, TOut, 16, N>>,
    op: &impl Combine<TOut>,
) where
    Width<N>: AccumulatorWidth,
{
    // 16-byte chunks of f32 a run of the output type reads (1 or 2).
    let chunks = TOut::RUN / 4;
    let zero = TOut::from_f32(0.0);
    let reads = op.reads_output();
    // Inlined by force: the convolution's bias + ReLU made LLVM keep this
    // closure a call, and any call in the kernel makes ptxas serialise the
    // `wgmma`s (C7509).
    stage_panels(
        acc,
        staged_tile,
        #[inline(always)]
        |p, staged| {
            let Some(out) = out.as_mut() else {
                return;
            };
            let col0 = out.origin().1;
            // How the warp writes its tile is decided once for the tile
            // (`RunTile::panels`). Inside the output and aligned (all but the
            // tiles on its right and bottom edges): whole 16-byte runs, and
            // where the output is not read (the GEMM's beta = 0) passed as the
            // constant it is, no test of it per run either. On an edge of an
            // aligned output: each run wholly inside one vector, a row's ragged
            // last run element by element. An output whose rows do not start
            // on 16 bytes: element by element, 32 consecutive elements of a row
            // a request.
            match out.panels() {
                RunPanels::Interior(mut inner) if !reads => inner.update_panel(
                    p,
                    #[inline(always)]
                    |r, col, run| {
                        let v = staged.read(r, col, chunks);
                        let col = col0 + col;
                        run.store(TOut::run(|j| op.fresh(v[j], col + j)));
                    },
                ),
                RunPanels::Interior(mut inner) => inner.update_panel(
                    p,
                    #[inline(always)]
                    |r, col, run| {
                        let (v, old) = (staged.read(r, col, chunks), run.load());
                        let (old, col) = (old.as_ref(), col0 + col);
                        run.store(TOut::run(|j| op.combine(v[j], col + j, || old[j])));
                    },
                ),
                RunPanels::Edge(mut edge) => edge.update_panel(
                    p,
                    #[inline(always)]
                    |r, col, run| {
                        let v = staged.read(r, col, chunks);
                        let at = col0 + col;
                        if let Some(mut whole) = run.whole() {
                            let old = if reads {
                                whole.load()
                            } else {
                                TOut::run(|_| zero)
                            };
                            let old = old.as_ref();
                            whole.store(TOut::run(|j| op.combine(v[j], at + j, || old[j])));
                            return;
                        }
                        // Written out (a loop over `v` indexed at run time would
                        // put it in local memory).
                        unroll::<8>(
                            #[inline(always)]
                            |j| {
                                if j < TOut::RUN
                                    && let Some(mut d) = run.slot(j)
                                {
                                    let r = op.combine(v[j], at + j, || d.get());
                                    d.set(r);
                                }
                            },
                        );
                    },
                ),
                RunPanels::Elements(mut elements) => elements.update_panel(
                    p,
                    #[inline(always)]
                    |r, col, mut d| {
                        let y = op.combine(staged.read_one(r, col), col0 + col, || d.get());
                        d.set(y);
                    },
                ),
            }
        },
    );
}
