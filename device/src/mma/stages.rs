//! A multistage pipeline's shared memory, checked once so that its main loop
//! carries no check, no branch and no 64-bit address arithmetic per access.
//!
//! - [`StageRing`]: the `stages` stages of `stage_len` elements a pipeline
//!   cycles through, checked once against the shared view (in bounds, every
//!   stage 16-byte aligned); it hands out [`Stage`]s (`stage(i)`) and
//!   the per-thread views below.
//! - [`ChunkPlacement`]: where a stored row's 16-byte chunks lie: as stored
//!   (padded rows), or XOR-swizzled in unpadded rows so that neither the
//!   `cp.async` stores nor the `ldmatrix` loads meet a bank conflict.
//! - [`StageWindow`]: one lane's `ldmatrix` rows for one fragment layout
//!   ([`ARowMajor`], [`AKMajor`], [`BKMajorPair`], [`BNMajorPair`]) in every
//!   stage: the lane's row offset is computed and clamped once, so each load
//!   is the stage's address plus a constant (`ldmatrix [r + imm]` once the
//!   kernel's loops unroll).
//! - [`PanelCopy`]: one thread's share of copying each tile of a proven
//!   [`InteriorPanel`] into a stage by `cp.async`: its chunks' source and
//!   destination offsets are computed once, the source advanced by the
//!   panel's step per tile.
//!
//! Every offset a kernel passes is clamped into what was checked (a no-op
//! for the offsets it computes from its tile shape, and free when they are
//! constants), so a wrong offset reads or writes the wrong element of the
//! ring, never outside it; the emulator reports any clamp that changed an
//! offset as a fault, where a checked access would have panicked.

use super::{FragA, FragB, InteriorPanel, MmaInput, MmaKind, row_elems};
use crate::arch;
use crate::global::Global;
use crate::shared::{SharedArray, SharedElement};
use core::marker::PhantomData;

/// Where the 16-byte chunks of a stored row lie in shared memory: as stored
/// ([`PLAIN`](Self::PLAIN), rows padded against bank conflicts), or XOR-
/// swizzled ([`swizzled`](Self::swizzled), rows unpadded, as CUTLASS/CuTe
/// lay out their `ldmatrix` tiles): chunk `c` of row `r` at chunk
/// `c ^ ((r / g) mod m)` of the row, `m = min(row chunks, 8)` and `g = 8 /
/// m` rows sharing one 128-byte line of the 32 banks. Then the 8 rows an
/// `ldmatrix` reads at one logical chunk, and the 8 consecutive chunks a
/// quarter-warp's `cp.async`s write, fall in 8 distinct 16-byte bank
/// groups: no conflict on either side, and no padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkPlacement {
    /// `m`: the chunks of a row XORed (a power of two; 1: as stored).
    period: u32,
    /// `g`: rows per XOR pattern step.
    rows_per_step: u32,
}

impl ChunkPlacement {
    /// Chunks where they are stored.
    pub const PLAIN: ChunkPlacement = ChunkPlacement {
        period: 1,
        rows_per_step: 1,
    };

    /// The XOR swizzle for unpadded rows of `row_bytes` bytes, if that is a
    /// power of two of at least 16 (whole chunks).
    pub const fn swizzled(row_bytes: usize) -> Option<ChunkPlacement> {
        if row_bytes < 16 || !row_bytes.is_power_of_two() {
            return None;
        }
        let chunks = row_bytes / 16;
        let period = if chunks < 8 { chunks } else { 8 };
        Some(ChunkPlacement {
            period: period as u32,
            rows_per_step: (8 / period) as u32,
        })
    }

    /// Where logical chunk `c` of row `row` lies in the row. Stays in the
    /// row for any row whose chunks are a multiple of the period.
    #[inline(always)]
    pub const fn chunk(&self, row: u32, c: u32) -> u32 {
        let mask = self.period - 1;
        (c & !mask) | ((c & mask) ^ ((row / self.rows_per_step) & mask))
    }

    /// Rows after which the pattern repeats (8 swizzled, 1 plain): rows that
    /// far apart place their chunks alike.
    #[inline(always)]
    pub const fn repeat_rows(&self) -> u32 {
        self.period * self.rows_per_step
    }

    /// Whether a row of `chunks` chunks keeps every chunk in itself.
    #[inline(always)]
    const fn fits_row(&self, chunks: usize) -> bool {
        chunks > 0 && chunks.is_multiple_of(self.period as usize)
    }
}

/// The stages of a multistage pipeline in a shared view: `stages` stages of
/// `stage_len` elements each, stage `i` at element `i·stage_len`. Only
/// [`StageRing::check`] makes one.
#[derive(Clone, Copy)]
pub struct StageRing<T> {
    array: SharedArray<T>,
    /// Element 0 as a `.shared` address.
    base: arch::SharedAddr,
    /// Elements per stage; `stage_len · size_of::<T>()` is a multiple of 16.
    stage_len: u32,
    stages: u32,
    /// The last stage's first element: `(stages − 1)·stage_len`.
    last: u32,
}

/// One stage of a [`StageRing`]: made only by [`StageRing::stage`], so
/// always a stage of the ring that made it. (A ring
/// clamps a stage of another, larger ring into its own last stage: a bug the
/// emulator reports.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stage {
    /// First element: `index · stage_len`.
    offset: u32,
}

impl Stage {
    /// The stage's first element in its ring's view (for a fill that
    /// addresses the view itself, with checked accesses).
    #[inline(always)]
    pub fn first(&self) -> usize {
        self.offset as usize
    }
}

impl<T: SharedElement> StageRing<T> {
    /// The ring of `stages` stages of `stage_len` elements at the start of
    /// `array`, if they fit in it, its start is 16-byte aligned and a
    /// stage's bytes are a multiple of 16 (so every stage is aligned);
    /// `None` otherwise, or for no stages.
    #[inline(always)]
    pub fn check(array: &SharedArray<T>, stage_len: usize, stages: usize) -> Option<Self> {
        let size = core::mem::size_of::<T>();
        let total = stage_len.checked_mul(stages)?;
        let fits = stages > 0
            && stage_len > 0
            && total <= array.len()
            // 32-bit byte offsets (shared memory is far smaller).
            && total.checked_mul(size)? <= u32::MAX as usize
            && (stage_len * size).is_multiple_of(16)
            && array.addr(0).is_multiple_of(16);
        fits.then(|| StageRing {
            array: *array,
            base: arch::shared_addr(array.addr(0) as *const u8),
            stage_len: stage_len as u32,
            stages: stages as u32,
            last: ((stages - 1) * stage_len) as u32,
        })
    }

    /// Elements per stage.
    #[inline(always)]
    pub fn stage_len(&self) -> usize {
        self.stage_len as usize
    }

    /// Stage `i` (`i` below the ring's stages; a larger `i` is its last
    /// stage, a bug the emulator reports). A constant once a kernel's loop
    /// over the ring's stages is written out ([`crate::unroll::unroll`]): its
    /// loads and copies then address `register + immediate`, with no stage
    /// arithmetic in the loop at all.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn stage(&self, i: usize) -> Stage {
        #[cfg(not(target_arch = "nvptx64"))]
        assert!(
            i < self.stages as usize,
            "StageRing::stage({i}) of a ring of {} stages",
            self.stages
        );
        Stage {
            offset: (i.min(self.stages as usize - 1) as u32).wrapping_mul(self.stage_len),
        }
    }

    /// `s`'s first element, clamped into this ring (a no-op for its own stages).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    fn stage_offset(&self, s: Stage) -> u32 {
        #[cfg(not(target_arch = "nvptx64"))]
        assert!(
            s.offset <= self.last,
            "the stage at element {} is not a stage of this ring of {} stages",
            s.offset,
            self.stages
        );
        s.offset.min(self.last)
    }

    /// `s`'s first element (see `stage_offset`), for the f64 fragment window.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub(super) fn stage_first(&self, s: Stage) -> u32 {
        self.stage_offset(s)
    }

    /// The 8 bytes at element `at` of the ring (one 64-bit shared load),
    /// recorded for the emulator's race and pending-copy checks.
    ///
    /// # Safety
    /// Element `at` within the ring, `at · size_of::<T>()` a multiple of 8.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub(super) unsafe fn load_u64(&self, at: u32) -> u64 {
        let size = core::mem::size_of::<T>();
        let addr = self.address(at, 8usize.div_ceil(size), Some(false));
        // SAFETY: 8 bytes inside the ring (the caller's contract), 8-byte
        // aligned (the ring's base is 16-byte aligned; the caller's
        // contract for the offset). Ordering: the kernel's barriers.
        let [lo, hi] = unsafe { arch::ld_shared_v2_at(addr) };
        u64::from(lo) | u64::from(hi) << 32
    }

    /// The `.shared` address of element `offset` of the ring (whose bounds
    /// and alignment the caller proved), recorded as one access of `elems`
    /// elements for the emulator's race and pending-copy checks if `access`
    /// says whether it writes.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    fn address(&self, offset: u32, elems: usize, access: Option<bool>) -> arch::SharedAddr {
        let size = core::mem::size_of::<T>() as u32;
        #[cfg(not(target_arch = "nvptx64"))]
        if let Some(write) = access {
            // SAFETY: the caller proved offset + elems within the ring, which
            // is within the view (`check`).
            let _ = unsafe { self.array.row_ptr_proven(offset as usize, elems, write) };
        }
        #[cfg(target_arch = "nvptx64")]
        let _ = (elems, access);
        arch::shared_addr_add(self.base, offset * size)
    }

    /// This lane's [`StageWindow`] for fragments of layout `L` of the tile
    /// stored from element `origin` of each stage with rows `stride`
    /// elements apart, its chunks placed as `place` says, for loads at
    /// constant offsets of up to `reach = (rows, elements along a row)` from
    /// it (the kernel's fragments and k-slices), if the farthest lane's load
    /// fits in a stage, `L` serves `T`, the lanes' starts are aligned as `L`
    /// needs (16-byte rows for `ldmatrix`) and, swizzled, `L` loads whole
    /// chunks and a row is whole periods of the swizzle. Uniform over the
    /// warp for uniform arguments.
    #[inline(always)]
    pub fn window<L: FragmentLayout<T>>(
        &self,
        origin: usize,
        stride: usize,
        (reach_rows, reach_cols): (usize, usize),
        place: ChunkPlacement,
    ) -> Option<StageWindow<T, L>>
    where
        T: MmaInput,
    {
        let chunk = row_elems::<T>();
        let plain = place == ChunkPlacement::PLAIN;
        // The farthest any lane's load reaches from `origin` (constant for a
        // constant stride).
        let spread = (0..32).map(|l| L::lane_start(l, stride)).max().unwrap_or(0);
        let room = (self.stage_len as usize).checked_sub(L::extent(stride))?;
        let down = reach_rows.checked_mul(stride)?;
        let reach = down.checked_add(reach_cols)?;
        // Only uniform conditions (ptxas then knows the lean loop is entered
        // by whole warps, and needs no WARPSYNC at its barrier): the origin,
        // which differs per warp, is clamped below rather than checked.
        let fits = stride.is_multiple_of(L::ALIGN)
            && reach_cols.is_multiple_of(L::ALIGN)
            && reach <= u32::MAX as usize
            && spread.checked_add(reach)? <= room
            && (plain
                || (L::ALIGN == chunk
                    && stride.is_multiple_of(chunk)
                    && place.fits_row(stride / chunk)));
        if !fits {
            return None;
        }
        let at = origin.saturating_add(L::lane_start(crate::thread::lane_id(), stride));
        // Once per thread, a lane start for each shift of 2v chunks along
        // the row (loads step 16 elements): plain, `at` plus the shift;
        // swizzled, the shifted chunk placed (for the shifts the reach
        // allows, within one period), after which loads add whole rows only.
        // Each start is clamped so that any load the window allows stays in
        // the stage, and rounded down to L's alignment: no-ops for an origin
        // inside the stage at a multiple of L's alignment, which a kernel
        // computes from its tile shape.
        let shifts = if plain {
            WINDOW_SHIFTS
        } else {
            (reach_cols / chunk / 2 + 1)
                .min((place.period as usize / 2).max(1))
                .min(WINDOW_SHIFTS)
        };
        let (row, col) = (at / stride, at % stride);
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
        #[inline(always)]
        fn start(
            v: usize,
            (at, row, col): (usize, usize, usize),
            (stride, chunk, place): (usize, usize, ChunkPlacement),
            (room, down, reach_cols, align): (usize, usize, usize, usize),
        ) -> u32 {
            let shift = 2 * v * chunk;
            let (want, limit) = if place == ChunkPlacement::PLAIN {
                // Loads add up to `down + reach_cols − shift` to it.
                (at + shift, (room + shift).saturating_sub(down + reach_cols))
            } else {
                let c = (col / chunk + 2 * v) as u32;
                let placed =
                    row * stride + place.chunk(row as u32, c) as usize * chunk + col % chunk;
                // Loads add whole rows only, up to `down`.
                (placed, room - down)
            };
            let fixed = (want.min(limit) as u32) & !(align as u32 - 1);
            #[cfg(not(target_arch = "nvptx64"))]
            assert!(
                shift > reach_cols || fixed as usize == want,
                "StageWindow: the lane's start ({want}) is outside the stage or misaligned"
            );
            fixed
        }
        let lane = (at, row, col);
        let shape = (stride, chunk, place);
        let bound = (room, down, reach_cols, L::ALIGN);
        let first = start(0, lane, shape, bound);
        let more = |v: usize| {
            if v < shifts {
                start(v, lane, shape, bound)
            } else {
                first
            }
        };
        Some(StageWindow {
            ring: *self,
            starts: [first, more(1), more(2), more(3)],
            shifts: shifts as u32,
            reach: (reach_rows as u32, reach_cols as u32),
            stride: stride as u32,
            plain,
            _l: PhantomData,
        })
    }
}

/// The column shifts (in pairs of chunks, modulo the swizzle's period of at
/// most 8 chunks) a [`StageWindow`] keeps a lane start for.
const WINDOW_SHIFTS: usize = 4;

/// Where each lane's elements of one fragment load lie in a stored tile, and
/// the fragment(s) they make: the layouts the tensor-core GEMM reads.
pub trait FragmentLayout<T: MmaInput>: sealed::Sealed {
    /// What one load gives.
    type Frag: Copy;
    /// The granularity (elements) of a lane's start: a 16-byte row for
    /// `ldmatrix`, one element for plain loads.
    const ALIGN: usize;
    /// Lane `lane`'s start, in elements from the tile's origin, rows
    /// `stride` elements apart.
    fn lane_start(lane: u32, stride: usize) -> usize;
    /// Elements from a lane's start to one past the farthest it reads.
    fn extent(stride: usize) -> usize;
    /// The load at element `first` of `ring`, rows `stride` apart.
    ///
    /// # Safety
    /// `first + extent(stride)` within the ring, `first` a multiple of
    /// `ALIGN`, the stride as the window checked; all 32 lanes together.
    #[doc(hidden)]
    unsafe fn load(ring: &StageRing<T>, first: u32, stride: u32) -> Self::Frag
    where
        T: SharedElement;
}

mod sealed {
    pub trait Sealed {}
}

/// A's 16 × K fragment, A stored row-major (`ldmatrix.x4`), as [`FragA::load`].
#[derive(Clone, Copy, Debug)]
pub struct ARowMajor;
/// A's fragment, A stored k-major: `ldmatrix.x4.trans` for 16-bit types,
/// as [`FragA::load_k_major`]; for tf32 two 64-bit loads, the rows paired
/// ([`MmaOrder`](super::MmaOrder)).
#[derive(Clone, Copy, Debug)]
pub struct AKMajor;
/// Two B fragments side by side (n and n + 8), B stored k-major:
/// `ldmatrix.x4.trans` for 16-bit types, four plain loads for tf32; as two
/// [`FragB::load_k_major`].
#[derive(Clone, Copy, Debug)]
pub struct BKMajorPair;
/// A's tf32 fragment, A stored k-major with rows k and k + 4 interleaved in
/// 2 × 2 blocks, its rows paired ([`MmaOrder`](super::MmaOrder)): one
/// 128-bit load. A fragment's registers are (m, k) = `(2g, t)`, `(2g + 1,
/// t)`, `(2g, t + 4)`, `(2g + 1, t + 4)` as stored; [`PanelCopies::interleave_k_rows`]'s
/// rounding pass stores each pair of rows `p`, `p + 4` (`p mod 8 < 4`) of
/// chunk `c` as `(A[p][4c], A[p][4c + 1], A[p + 4][4c], A[p + 4][4c + 1])`
/// in row `p`'s chunk and the same of columns `4c + 2, 4c + 3` in row `p +
/// 4`'s, which is that order. For the 16-bit types it is [`AKMajor`].
#[derive(Clone, Copy, Debug)]
pub struct AKMajorInterleaved;
/// Two tf32 B fragments side by side (n and n + 8), B stored k-major with
/// rows k and k + 4 interleaved: two 64-bit loads. A fragment's registers
/// are k = t and t + 4 of one column, which k-major rows put a row apart;
/// [`PanelCopies::interleave_k_rows`]'s rounding pass stores each pair of
/// rows `p`, `p + 4` (`p mod 8 < 4`) as pairs `(B[p][n], B[p + 4][n])`,
/// columns `4c, 4c + 1` in row `p`'s chunk `c` and `4c + 2, 4c + 3` in row
/// `p + 4`'s, so each register pair is one load. For the 16-bit types it is
/// [`BKMajorPair`] (one `ldmatrix.x4.trans` already serves both fragments).
#[derive(Clone, Copy, Debug)]
pub struct BKMajorInterleaved;
/// Two B fragments side by side (n and n + 8), B stored n-major
/// (`ldmatrix.x4`), as two [`FragB::load_n_major`].
#[derive(Clone, Copy, Debug)]
pub struct BNMajorPair;

impl sealed::Sealed for ARowMajor {}
impl sealed::Sealed for AKMajor {}
impl sealed::Sealed for AKMajorInterleaved {}
impl sealed::Sealed for BKMajorPair {}
impl sealed::Sealed for BKMajorInterleaved {}
impl sealed::Sealed for BNMajorPair {}

/// `ldmatrix.x4` (`.trans` if `trans`) of each lane's 16-byte row at
/// element `first` of `ring`.
///
/// # Safety
/// `first + row` within the ring, `first` a whole number of 16-byte rows
/// from its (aligned) base; all 32 lanes together.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
unsafe fn ldmatrix_x4<T: MmaInput + SharedElement>(
    ring: &StageRing<T>,
    first: u32,
    trans: bool,
) -> [u32; 4] {
    let addr = ring.address(first, row_elems::<T>(), Some(false));
    // SAFETY: `addr` is the lane's 16-byte row inside the ring (the
    // caller's contract), so inside the block's shared memory, 16-byte
    // aligned. Every lane passes such an address. Ordering against other
    // threads' writes is the kernel's barrier discipline (see "Races" on
    // `SharedArray`); the whole warp executing it is the caller's contract,
    // checked by the emulator, as for `FragA::load`.
    unsafe { arch::ldmatrix_at::<4>(addr, trans) }
}

/// The f32 at element `at` of `ring`, which its pipeline rounded to tf32 as
/// it landed ([`PanelCopy::round_landed`]): so a fragment holds tf32 values
/// with no rounding per load, as [`FragB<f32>`] must. (The emulator checks
/// that it was rounded: a pipeline that skips the pass fails its tests.)
///
/// # Safety
/// `at` within the ring.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
unsafe fn tf32_at<T: MmaInput + SharedElement>(ring: &StageRing<T>, at: u32) -> u32 {
    let addr = ring.address(at, 1, Some(false));
    // SAFETY: an element inside the ring (the caller's contract), 4-byte
    // aligned (the ring's base is 16-byte aligned, the elements are f32:
    // only tf32 layouts call this). Ordering: the kernel's barriers.
    landed::<T>(unsafe { arch::ld_shared_u32_at(addr) })
}

/// The two f32 at elements `at`, `at + 1` of `ring` (one 64-bit load),
/// which its pipeline rounded to tf32 as they landed
/// ([`PanelCopy::round_landed`]): so a fragment holds tf32 values with no
/// rounding per load, as [`FragA<f32>`] must. (The emulator checks that they
/// were rounded: a pipeline that skips the pass fails its tests.)
///
/// # Safety
/// `at + 1` within the ring, `at` even.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
unsafe fn tf32_pair_at<T: MmaInput + SharedElement>(ring: &StageRing<T>, at: u32) -> [u32; 2] {
    let addr = ring.address(at, 2, Some(false));
    // SAFETY: two elements inside the ring (the caller's contract), 8-byte
    // aligned (the ring's base is 16-byte aligned, the elements are f32 —
    // only tf32 layouts call this — and `at` is even). Ordering: the
    // kernel's barriers.
    unsafe { arch::ld_shared_v2_at(addr) }.map(landed::<T>)
}

/// The four f32 at elements `at .. at + 4` of `ring` (one 128-bit load),
/// which its pipeline rounded to tf32 as they landed, as [`tf32_pair_at`]'s.
///
/// # Safety
/// `at + 3` within the ring, `at` a multiple of 4.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
unsafe fn tf32_quad_at<T: MmaInput + SharedElement>(ring: &StageRing<T>, at: u32) -> [u32; 4] {
    let addr = ring.address(at, 4, Some(false));
    // SAFETY: four elements inside the ring (the caller's contract),
    // 16-byte aligned (the ring's base is 16-byte aligned, the elements are
    // f32 — only tf32 layouts call this — and `at` is a multiple of 4).
    // Ordering: the kernel's barriers.
    unsafe { arch::ld_shared_v4_at(addr) }.map(landed::<T>)
}

/// A register loaded from a stage, as a fragment takes it: for tf32, a
/// value the pipeline rounded as it landed ([`PanelCopy::round_landed`]),
/// which the emulator checks; 16-bit types as stored.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
fn landed<T: MmaInput>(bits: u32) -> u32 {
    #[cfg(not(target_arch = "nvptx64"))]
    assert_eq!(
        bits,
        T::from_stored(bits),
        "a tf32 fragment load from a stage that was not rounded as it landed \
         (PanelCopy::round_landed)"
    );
    bits
}

impl<T: MmaInput> FragmentLayout<T> for ARowMajor {
    type Frag = FragA<T>;
    const ALIGN: usize = row_elems::<T>();
    #[inline(always)]
    fn lane_start(lane: u32, stride: usize) -> usize {
        // Matrices 0–3 are the quadrants (rows 0–7 | 8–15) × (the first |
        // second 16 bytes of k); lane l supplies row l % 8 of matrix l / 8.
        let (matrix, row) = (lane as usize / 8, lane as usize % 8);
        (row + (matrix % 2) * 8) * stride + (matrix / 2) * row_elems::<T>()
    }
    #[inline(always)]
    fn extent(_: usize) -> usize {
        row_elems::<T>()
    }
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    unsafe fn load(ring: &StageRing<T>, first: u32, _: u32) -> FragA<T>
    where
        T: SharedElement,
    {
        // SAFETY: the caller's contract.
        let regs = unsafe { ldmatrix_x4(ring, first, false) };
        FragA::from_regs(regs.map(landed::<T>))
    }
}

/// A k-major layout's start granularity: a 16-byte row for `ldmatrix.trans`;
/// for tf32 `tf32`, two elements for A's 64-bit loads, one for B's.
const fn k_major_align<T: MmaInput>(tf32: usize) -> usize {
    if matches!(T::KIND, MmaKind::Tf32) {
        tf32
    } else {
        row_elems::<T>()
    }
}

/// Where lane `l`'s first element of B's tf32 fragments stored k-major
/// lies: register `i` of the pair's first is `(k, n) = (l % 4 + 4·i, l / 4)`
/// at `k·stride + n` (the second fragment's 8 columns on).
const fn tf32_b_k_major_start(lane: usize, stride: usize) -> usize {
    (lane % 4) * stride + lane / 4
}

/// Where lane `l`'s first pair of A's tf32 fragment stored k-major lies, its
/// rows paired ([`MmaOrder`](super::MmaOrder)): registers `(row, col) =
/// (l / 4 + 8·(i % 2), l % 4 + 4·(i / 2))` are, rows paired, at element
/// `col·stride + 2·(l / 4) + i % 2` — registers 0, 1 side by side at
/// `k = l % 4`, 2, 3 at `k + 4`: two 64-bit loads. With the stage's 32-byte
/// row padding (rows 8 banks apart) a half-warp's loads (k = 0..4,
/// `2·(l / 4)` = 0..8) hit 32 distinct banks.
pub(super) const fn tf32_a_k_major_start(lane: usize, stride: usize) -> usize {
    (lane % 4) * stride + 2 * (lane / 4)
}

/// Elements from a lane's start to one past the farthest it reads, k-major:
/// a 16-byte row, or for tf32 `tf32` (A's two pairs: `4·stride + 2`; B's
/// four loads: `4·stride + 9`).
const fn k_major_extent<T: MmaInput>(tf32: usize) -> usize {
    if matches!(T::KIND, MmaKind::Tf32) {
        tf32
    } else {
        row_elems::<T>()
    }
}

impl<T: MmaInput> FragmentLayout<T> for AKMajor {
    type Frag = FragA<T>;
    const ALIGN: usize = k_major_align::<T>(2);
    #[inline(always)]
    fn lane_start(lane: u32, stride: usize) -> usize {
        let lane = lane as usize;
        if T::KIND == MmaKind::Tf32 {
            tf32_a_k_major_start(lane, stride)
        } else {
            // Register r is the quadrant (rows 8·(r % 2) ..) × (k 8·(r / 2) ..),
            // stored as rows k = 8·(r / 2) .. of 8 elements at m = 8·(r % 2).
            let (matrix, row) = (lane / 8, lane % 8);
            (row + (matrix / 2) * 8) * stride + (matrix % 2) * 8
        }
    }
    #[inline(always)]
    fn extent(stride: usize) -> usize {
        k_major_extent::<T>(4 * stride + 2)
    }
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    unsafe fn load(ring: &StageRing<T>, first: u32, stride: u32) -> FragA<T>
    where
        T: SharedElement,
    {
        if T::KIND == MmaKind::Tf32 {
            // Rows paired: registers 0, 1 (rows g, g + 8 at k) side by
            // side, then 2, 3 (at k + 4).
            // SAFETY: both within first + extent, `first` even and the
            // stride even (the caller's contract: ALIGN is 2).
            let ([r0, r1], [r2, r3]) = unsafe {
                (
                    tf32_pair_at(ring, first),
                    tf32_pair_at(ring, first + 4 * stride),
                )
            };
            return FragA::from_regs([r0, r1, r2, r3]);
        }
        // SAFETY: the caller's contract.
        FragA::from_regs(unsafe { ldmatrix_x4(ring, first, true) })
    }
}

/// Where lane `l`'s A fragment lies in a k-major tf32 stage with rows k,
/// k + 4 interleaved in 2 × 2 blocks ([`AKMajorInterleaved`]): registers
/// `(2g, t)` .. `(2g + 1, t + 4)` (`t = l % 4`, `g = l / 4`, rows paired)
/// are the 4 elements of row `t` (g even) or `t + 4` (g odd) at column
/// `4·(g / 2)`. With rows `stride ≡ 4 (mod 32)` words apart a quarter-warp's
/// 128-bit loads — 8 rows, one column — hit 32 distinct banks.
const fn tf32_a_interleaved_start(lane: usize, stride: usize) -> usize {
    let (t, g) = (lane % 4, lane / 4);
    (t + 4 * (g % 2)) * stride + 4 * (g / 2)
}

impl<T: MmaInput> FragmentLayout<T> for AKMajorInterleaved {
    type Frag = FragA<T>;
    const ALIGN: usize = k_major_align::<T>(4);
    #[inline(always)]
    fn lane_start(lane: u32, stride: usize) -> usize {
        if T::KIND == MmaKind::Tf32 {
            tf32_a_interleaved_start(lane as usize, stride)
        } else {
            <AKMajor as FragmentLayout<T>>::lane_start(lane, stride)
        }
    }
    #[inline(always)]
    fn extent(_: usize) -> usize {
        k_major_extent::<T>(4)
    }
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    unsafe fn load(ring: &StageRing<T>, first: u32, stride: u32) -> FragA<T>
    where
        T: SharedElement,
    {
        if T::KIND != MmaKind::Tf32 {
            // SAFETY: the caller's contract, which is AKMajor's here.
            return unsafe { <AKMajor as FragmentLayout<T>>::load(ring, first, stride) };
        }
        // SAFETY: within first + extent, `first` a multiple of 4 (the
        // caller's contract: ALIGN is 4).
        FragA::from_regs(unsafe { tf32_quad_at(ring, first) })
    }
}

impl<T: MmaInput> FragmentLayout<T> for BKMajorPair {
    type Frag = [FragB<T>; 2];
    const ALIGN: usize = k_major_align::<T>(1);
    #[inline(always)]
    fn lane_start(lane: u32, stride: usize) -> usize {
        let lane = lane as usize;
        if T::KIND == MmaKind::Tf32 {
            tf32_b_k_major_start(lane, stride)
        } else {
            // Matrices 0, 1: k 0–7, 8–15 at column n; 2, 3: the same at n + 8.
            (lane % 16) * stride + (lane / 16) * 8
        }
    }
    #[inline(always)]
    fn extent(stride: usize) -> usize {
        k_major_extent::<T>(4 * stride + 9)
    }
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    unsafe fn load(ring: &StageRing<T>, first: u32, stride: u32) -> [FragB<T>; 2]
    where
        T: SharedElement,
    {
        let [r0, r1, r2, r3] = if T::KIND == MmaKind::Tf32 {
            // SAFETY: each within first + extent (the caller's contract).
            unsafe {
                [
                    tf32_at(ring, first),
                    tf32_at(ring, first + 4 * stride),
                    tf32_at(ring, first + 8),
                    tf32_at(ring, first + 4 * stride + 8),
                ]
            }
        } else {
            // SAFETY: the caller's contract.
            unsafe { ldmatrix_x4(ring, first, true) }
        };
        [FragB::from_regs([r0, r1]), FragB::from_regs([r2, r3])]
    }
}

/// Where lane `l`'s first pair of B's tf32 fragments lies in a k-major
/// stage with rows k, k + 4 interleaved ([`BKMajorInterleaved`]): its
/// registers are `(k, n) = (t, g)` and `(t + 4, g)` (`t = l % 4`, `g = l /
/// 4`), stored side by side in row `t` (columns `g mod 4` < 2) or `t + 4`
/// of chunk `g / 4`. With rows `stride ≡ 4 (mod 32)` words apart (16-byte
/// padding of 64 or 128 f32) a half-warp's 64-bit loads — 8 rows, 4 words
/// each — hit 32 distinct banks.
const fn tf32_b_interleaved_start(lane: usize, stride: usize) -> usize {
    let (t, g) = (lane % 4, lane / 4);
    (t + 4 * ((g % 4) / 2)) * stride + 4 * (g / 4) + 2 * (g % 2)
}

impl<T: MmaInput> FragmentLayout<T> for BKMajorInterleaved {
    type Frag = [FragB<T>; 2];
    const ALIGN: usize = k_major_align::<T>(2);
    #[inline(always)]
    fn lane_start(lane: u32, stride: usize) -> usize {
        if T::KIND == MmaKind::Tf32 {
            tf32_b_interleaved_start(lane as usize, stride)
        } else {
            <BKMajorPair as FragmentLayout<T>>::lane_start(lane, stride)
        }
    }
    #[inline(always)]
    fn extent(_: usize) -> usize {
        // tf32: the second fragment's pair, 8 columns on.
        k_major_extent::<T>(8 + 2)
    }
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    unsafe fn load(ring: &StageRing<T>, first: u32, stride: u32) -> [FragB<T>; 2]
    where
        T: SharedElement,
    {
        if T::KIND != MmaKind::Tf32 {
            // SAFETY: the caller's contract, which is BKMajorPair's here.
            return unsafe { <BKMajorPair as FragmentLayout<T>>::load(ring, first, stride) };
        }
        // SAFETY: both pairs within first + extent, `first` even (the
        // caller's contract: ALIGN is 2).
        let ([r0, r1], [r2, r3]) =
            unsafe { (tf32_pair_at(ring, first), tf32_pair_at(ring, first + 8)) };
        [FragB::from_regs([r0, r1]), FragB::from_regs([r2, r3])]
    }
}

impl<T: MmaInput> FragmentLayout<T> for BNMajorPair {
    type Frag = [FragB<T>; 2];
    const ALIGN: usize = row_elems::<T>();
    #[inline(always)]
    fn lane_start(lane: u32, stride: usize) -> usize {
        // Matrices 0, 1: the first and second 16 bytes of k of rows n 0–7;
        // 2, 3: the same of rows n 8–15.
        let lane = lane as usize;
        (lane % 8 + (lane / 16) * 8) * stride + ((lane / 8) % 2) * row_elems::<T>()
    }
    #[inline(always)]
    fn extent(_: usize) -> usize {
        row_elems::<T>()
    }
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    unsafe fn load(ring: &StageRing<T>, first: u32, _: u32) -> [FragB<T>; 2]
    where
        T: SharedElement,
    {
        // SAFETY: the caller's contract.
        let regs = unsafe { ldmatrix_x4(ring, first, false) };
        let [r0, r1, r2, r3] = regs.map(landed::<T>);
        [FragB::from_regs([r0, r1]), FragB::from_regs([r2, r3])]
    }
}

/// One lane's loads of fragments of layout `L` in every stage of a
/// [`StageRing`] (from [`StageRing::window`]): a load is the stage's
/// address, the lane's start (computed once) and a constant offset.
#[derive(Clone, Copy)]
pub struct StageWindow<T, L> {
    ring: StageRing<T>,
    /// The lane's start in a stage (elements) for a load `2v` chunks along
    /// its row, clamped so that every load the window allows stays in the
    /// stage: plain, `at + 2v·chunk`; swizzled, that chunk placed (`v` below
    /// `shifts`; the others repeat `starts[0]`).
    starts: [u32; WINDOW_SHIFTS],
    /// How many of `starts` a swizzled window made.
    shifts: u32,
    /// The most rows and elements along a row a load may add.
    reach: (u32, u32),
    stride: u32,
    /// Chunks as stored (else swizzled: loads add whole rows to a start).
    plain: bool,
    _l: PhantomData<L>,
}

impl<T: MmaInput + SharedElement, L: FragmentLayout<T>> StageWindow<T, L> {
    /// The fragment(s) `(rows, cols)` from the window's origin (rows down,
    /// elements along a row) in stage `stage`, with no check: the offset is
    /// clamped to the window's reach (no work when it is a constant; the
    /// emulator reports a clamp that changed it), and along a swizzled row
    /// it must be a whole pair of chunks within the reach's. All 32 lanes of
    /// the warp must call it together, as [`FragA::load`].
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load(&self, stage: Stage, (rows, cols): (usize, usize)) -> L::Frag {
        let chunk = row_elems::<T>();
        #[cfg(not(target_arch = "nvptx64"))]
        let asked = cols;
        // Rounded down to L's alignment (a no-op on the constant offsets a
        // kernel passes; a misaligned `ldmatrix` would fault).
        let cols = cols & !(L::ALIGN - 1);
        // The start by the offset's constant part alone (never by a field:
        // then the starts stay in registers).
        let v = (cols / (2 * chunk)).min(WINDOW_SHIFTS - 1);
        let (r, c) = (
            (rows as u32).min(self.reach.0),
            (cols as u32).min(self.reach.1),
        );
        #[cfg(not(target_arch = "nvptx64"))]
        {
            assert!(
                (r as usize, c as usize) == (rows, asked),
                "StageWindow::load: offset ({rows}, {cols}) is past the window's reach {:?} \
                 or misaligned",
                self.reach
            );
            assert!(
                self.plain || (cols.is_multiple_of(2 * chunk) && (v as u32) < self.shifts),
                "StageWindow::load: offset {cols} along a swizzled row is not a whole pair \
                 of chunks within the window's reach"
            );
        }
        // Swizzled, the start holds the column; plain, the rest of it is
        // added (c ≥ 2v·chunk: v is at most the offset's pairs).
        let along = if self.plain {
            c - (2 * v * chunk) as u32
        } else {
            0
        };
        // stage ≤ (stages − 1)·stage_len, and the start's clamp keeps it plus
        // these rows, `along` and the extent within a stage (plain: start ≤
        // room + 2v·chunk − down − reach_cols, rows·stride ≤ down, along ≤
        // reach_cols − 2v·chunk; swizzled: start ≤ room − down, along = 0):
        // within the ring; aligned as L needs (the starts, the stride, `c`
        // and 2v·chunk are multiples of L's alignment: `cols` is rounded down
        // and the reach's columns were checked).
        let first = self.ring.stage_offset(stage) + self.starts[v] + r * self.stride + along;
        // SAFETY: as just said; the whole warp calling it is documented
        // above and checked by the emulator.
        unsafe { L::load(&self.ring, first, self.stride) }
    }
}

impl<T: MmaInput + SharedElement, L: FragmentLayout<T, Frag = [FragB<T>; 2]>> StageWindow<T, L> {
    /// `NI` B fragments side by side (`NI` even, checked at compile time):
    /// fragments `2j` and `2j + 1` are the pair [`load`](Self::load)ed at
    /// `offset(j)` of stage `stage`. All 32 lanes together.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load_pairs<const NI: usize>(
        &self,
        stage: Stage,
        offset: impl Fn(usize) -> (usize, usize),
    ) -> [FragB<T>; NI] {
        const {
            assert!(
                NI.is_multiple_of(2),
                "load_pairs: an even number of B fragments"
            )
        };
        let mut out = [FragB::from_regs([0; 2]); NI];
        crate::unroll::unroll_upto::<NI>(NI / 2, |j| {
            let [x, y] = self.load(stage, offset(j));
            out[2 * j] = x;
            out[2 * j + 1] = y;
        });
        out
    }
}

/// One thread's share of copying each tile of an [`InteriorPanel`] into a
/// stage of a [`StageRing`] (from [`InteriorPanel::thread_copy`]): the
/// tile's 16-byte chunks `t, t + threads, …`, their source and destination
/// offsets computed once.
#[derive(Clone, Copy)]
pub struct PanelCopy<'a, T> {
    src: Global<'a, T>,
    ring: StageRing<T>,
    /// This thread's first chunk of the next tile, in `src`.
    next: *const u8,
    /// Bytes of `src` between this thread's chunks of a tile (kept in bytes:
    /// the loop adds them with no scaling).
    src_pass: usize,
    /// Bytes of `src` between tiles.
    step: usize,
    /// Tiles not yet copied.
    left: u32,
    /// Element of a stage of this thread's first chunk, and between its chunks.
    dst: u32,
    dst_pass: u32,
    /// Chunks per tile for this thread, and the tile rows between them.
    chunks: u32,
    rows_per_pass: u32,
}

impl<'a, T: SharedElement, const ROWS: usize, const COLS: usize> InteriorPanel<'a, T, ROWS, COLS> {
    /// Thread `t` of `threads`' share of copying each tile of the panel, in
    /// order, to `ring`'s stages, row `r` of a tile at element `base +
    /// r·stride` of the stage: chunks `t, t + threads, …` of the tile's
    /// `ROWS · COLS/chunk` (coalesced), `None` unless `threads` is a multiple
    /// of a row's chunks and divides the tile's (every thread then copies
    /// the same number of whole chunks, in the same column), the
    /// destination is inside a stage with 16-byte aligned rows, and `place`
    /// keeps a row's chunks in the row and places each pass of the block's
    /// threads alike (each chunk lands where `place` puts it). One check,
    /// uniform over the block.
    #[inline(always)]
    pub fn thread_copy(
        &self,
        ring: &StageRing<T>,
        base: usize,
        stride: usize,
        place: ChunkPlacement,
        (t, threads): (usize, usize),
    ) -> Option<PanelCopy<'a, T>> {
        let (chunk, size) = (Self::CHUNK, core::mem::size_of::<T>());
        let per_row = COLS / chunk;
        let total = ROWS * per_row;
        let end = (ROWS - 1)
            .checked_mul(stride)?
            .checked_add(base)?
            .checked_add(COLS)?;
        // Uniform conditions only (as for `StageRing::window`).
        let fits = threads > 0
            && self.steps <= u32::MAX as usize
            && threads.is_multiple_of(per_row)
            && total.is_multiple_of(threads)
            && end <= ring.stage_len()
            && (base * size).is_multiple_of(16)
            && (ROWS == 1 || (stride * size).is_multiple_of(16))
            // Placed chunks stay in their row, and each pass of the block's
            // threads places its chunks alike (so one offset per pass).
            && place.fits_row(per_row)
            && (threads / per_row).is_multiple_of(place.repeat_rows() as usize);
        if !fits {
            return None;
        }
        // A thread index past the block (a bug) copies the last thread's chunks.
        let t = t.min(threads - 1);
        let (r, c) = (t / per_row, (t % per_row) * chunk);
        // Where the chunk lands in its row (the source is where it is).
        let placed = place.chunk(r as u32, (c / chunk) as u32) as usize * chunk;
        let rows_per_pass = threads / per_row;
        // In bounds (the panel's check; r, r + rows_per_pass, … < ROWS): no
        // product here overflows.
        Some(PanelCopy {
            src: self.src,
            ring: *ring,
            next: self
                .src
                .as_ptr()
                .wrapping_add(self.origin + r * self.ld + c)
                .cast(),
            src_pass: rows_per_pass * self.ld * size,
            step: self.step * size,
            left: self.steps as u32,
            dst: (base + r * stride + placed) as u32,
            dst_pass: (rows_per_pass * stride) as u32,
            chunks: (total / threads) as u32,
            rows_per_pass: rows_per_pass as u32,
        })
    }
}

impl<'a, T: SharedElement> PanelCopy<'a, T> {
    /// Starts copying the panel's next tile (the first, then each in turn)
    /// into `stage`, by `cp.async` (landing at the thread's wait, as
    /// [`super::cp_async_16`]'s), no check per chunk; `false` (and nothing
    /// copied) once every tile has been. Uniform over the block. No branch:
    /// the copies are predicated on a tile being left.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn copy_next(&mut self, stage: Stage) -> bool {
        let issue = self.left > 0;
        // SAFETY: `issue` is that a tile is left.
        unsafe { self.issue(stage, issue) };
        issue
    }

    /// For tf32 (f32 inputs; a no-op for 16-bit types): rounds this thread's
    /// chunks of `stage` to tf32 in place (`cvt.rna.tf32.f32`), once they
    /// have landed (after the thread's `cp.async` wait for that stage's
    /// group, before the barrier that publishes it), so the block's fragment
    /// loads ([`StageWindow`]) read rounded values and round nothing
    /// themselves: each element is rounded once per block instead of once
    /// per warp that loads it. The chunks are the ones this thread copied
    /// into every stage (the same offsets each tile), so no other thread
    /// touches them before the barrier.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn round_landed(&self, stage: Stage)
    where
        T: MmaInput,
    {
        if T::KIND != MmaKind::Tf32 {
            return;
        }
        let stage = self.ring.stage_offset(stage);
        for i in 0..self.chunks {
            let at = stage + self.dst + i * self.dst_pass;
            let from = self.ring.address(at, 4, Some(false));
            let to = self.ring.address(at, 4, Some(true));
            // SAFETY: the 16 bytes of this thread's chunk i in `stage`, inside
            // the ring and 16-byte aligned (as `issue`'s destination). Only
            // this thread accesses them between its wait and the barrier (its
            // own copies; other threads read the stage after the barrier); an
            // access before the copy landed is a fault on the emulator.
            unsafe {
                let v = arch::ld_shared_v4_at(from);
                arch::st_shared_v4_at(to, v.map(T::from_stored));
            }
        }
    }

    /// As [`round_landed`](Self::round_landed), and stores each pair of
    /// this thread's chunks — tile rows `p` and `p + 4` of one column, `x`
    /// and `y`, a pass of the block being 4 rows — interleaved: in 2 × 2
    /// blocks if `BLOCKS` (`(x0, x1, y0, y1)` in row `p`'s chunk, `(x2, x3,
    /// y2, y3)` in row `p + 4`'s: [`AKMajorInterleaved`]), else by column
    /// (`(x0, y0, x1, y1)`, `(x2, y2, x3, y3)`: [`BKMajorInterleaved`]).
    /// Reached only through [`PanelCopies::interleave_k_rows`], which
    /// checked the passes.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    fn round_interleaving<const BLOCKS: bool>(&self, stage: Stage)
    where
        T: MmaInput,
    {
        let stage = self.ring.stage_offset(stage);
        for j in 0..self.chunks / 2 {
            let (p, q) = (
                stage + self.dst + 2 * j * self.dst_pass,
                stage + self.dst + (2 * j + 1) * self.dst_pass,
            );
            // SAFETY: this thread's chunks 2j and 2j + 1 in `stage`, 16 bytes
            // each, inside the ring and 16-byte aligned (as `issue`'s
            // destinations); only this thread accesses them between its wait
            // and the barrier, as in `round_landed`. Both are read before
            // either is written.
            unsafe {
                let x = arch::ld_shared_v4_at(self.ring.address(p, 4, Some(false)));
                let y = arch::ld_shared_v4_at(self.ring.address(q, 4, Some(false)));
                let (x, y) = (x.map(T::from_stored), y.map(T::from_stored));
                let (to_p, to_q) = if BLOCKS {
                    ([x[0], x[1], y[0], y[1]], [x[2], x[3], y[2], y[3]])
                } else {
                    ([x[0], y[0], x[1], y[1]], [x[2], y[2], x[3], y[3]])
                };
                arch::st_shared_v4_at(self.ring.address(p, 4, Some(true)), to_p);
                arch::st_shared_v4_at(self.ring.address(q, 4, Some(true)), to_q);
            }
        }
    }

    /// As [`copy_next`](Self::copy_next), but once every tile has been
    /// copied, fills this thread's chunks of `stage` with zeros (plain
    /// stores) instead: for a pipeline's prologue, so that every stage holds
    /// initialised values even when the panel has fewer tiles than the ring
    /// has stages (a pipelined loop loads the stage after the last tile's
    /// before it ends, and discards what it loaded). A branch: for the
    /// prologue, not the loop.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn copy_next_or_zero(&mut self, stage: Stage) -> bool {
        if self.copy_next(stage) {
            return true;
        }
        let chunk = 16 / core::mem::size_of::<T>();
        let stage = self.ring.stage_offset(stage);
        for i in 0..self.chunks {
            let to = self
                .ring
                .address(stage + self.dst + i * self.dst_pass, chunk, Some(true));
            // SAFETY: this thread's chunk i of `stage`: inside the ring and
            // 16-byte aligned, as `issue`'s destination. No other thread
            // accesses it before the kernel's next barrier (the chunks of a
            // stage are the threads' own), and no copy of this thread's is
            // pending into it (none was issued: every tile has been copied).
            unsafe { arch::st_shared_v4_at(to, [0; 4]) };
        }
        false
    }

    /// The two panels' copies (a stage's `A` and `B` slices) as one, if
    /// they have as many tiles left: then one check per stage serves both.
    #[inline(always)]
    pub fn zip(self, other: PanelCopy<'a, T>) -> Option<PanelCopies<'a, T>> {
        (self.left == other.left).then_some(PanelCopies {
            first: self,
            second: other,
        })
    }

    /// Copies the next tile into `stage` if `issue`; then moves to the next
    /// tile.
    ///
    /// # Safety
    /// `issue` implies a tile is left (`left > 0`; a caller may have checked
    /// it of a twin with as many tiles left).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    unsafe fn issue(&mut self, stage: Stage, issue: bool) {
        let (chunk, size) = (16 / core::mem::size_of::<T>(), core::mem::size_of::<T>());
        let stage = self.ring.stage_offset(stage);
        for i in 0..self.chunks {
            let from = self.next.wrapping_add(i as usize * self.src_pass);
            let to = stage + self.dst + i * self.dst_pass;
            // The emulator checks what the panel's proof claims, per chunk, so
            // that a wrong proof is an out-of-bounds fault in the tests rather
            // than a silent read past the buffer; the GPU trusts it.
            #[cfg(not(target_arch = "nvptx64"))]
            if issue {
                assert!(
                    self.left > 0,
                    "PanelCopy: a copy past the panel's last tile"
                );
                let at = (from as usize).wrapping_sub(self.src.as_ptr() as usize) / size;
                assert!(
                    at + chunk <= self.src.len(),
                    "PanelCopy: chunk at {at} is past its buffer ({}): the panel's check was \
                     wrong",
                    self.src.len()
                );
            }
            #[cfg(target_arch = "nvptx64")]
            let _ = size;
            let to = self.ring.address(to, chunk, issue.then_some(true));
            // SAFETY: if `issue`, a tile is left (the caller's contract), and: source:
            // this thread's chunk i of tile `steps − left` of the panel
            // (`thread_copy`: row r + i·rows_per_pass < ROWS, column c, c +
            // chunk ≤ COLS), inside `src` and 16-byte aligned by the panel's
            // check, in the global state space (`Global`'s invariant).
            // Destination: stage + dst + i·dst_pass + chunk ≤ (stages − 1)·
            // stage_len + base + (ROWS − 1)·stride + COLS ≤ the ring's
            // elements (`thread_copy`, `stage_offset`), 16-byte aligned (the
            // ring's stages, `base` and `stride` are). The shared bytes are
            // written asynchronously, under the kernel's barrier discipline as
            // with `cp_async_16` (the emulator defers the copy and faults on
            // any access before the wait). If not, nothing is accessed.
            unsafe { arch::cp_async_16_at(to, from.cast(), issue) };
        }
        self.next = self.next.wrapping_add(self.step);
        self.left = self.left.saturating_sub(1);
    }
}

/// Two [`PanelCopy`]s with as many tiles left (from [`PanelCopy::zip`]),
/// copied together into each stage: one check of what is left per stage.
/// With `A` (`B`), the first (second) panel is tf32 and k-major, and the
/// rounding pass stores its rows k, k + 4 interleaved, as
/// [`AKMajorInterleaved`] ([`BKMajorInterleaved`]) loads it (from
/// [`PanelCopies::interleave_k_rows`], which checked that each thread holds
/// both chunks of every pair it interleaves).
#[derive(Clone, Copy)]
pub struct PanelCopies<'a, T, const A: bool = false, const B: bool = false> {
    /// Invariant: `first.left == second.left`.
    first: PanelCopy<'a, T>,
    second: PanelCopy<'a, T>,
}

impl<T: SharedElement, const A: bool, const B: bool> PanelCopies<'_, T, A, B> {
    /// Starts copying both panels' next tiles into `stage` (as
    /// [`PanelCopy::copy_next`]); `false` (and nothing copied) once every
    /// tile has been. Uniform over the block; no branch.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn copy_next(&mut self, stage: Stage) -> bool {
        // The invariant: what is left of one is left of the other.
        let issue = self.first.left > 0;
        // SAFETY: `issue` is that a tile is left in the first, so in the
        // second (the invariant; both step together here).
        unsafe {
            self.first.issue(stage, issue);
            self.second.issue(stage, issue);
        }
        issue
    }
}

impl<T: SharedElement, const A: bool, const B: bool> PanelCopies<'_, T, A, B> {
    /// Both panels' [`PanelCopy::copy_next_or_zero`] (for a prologue; zeros
    /// interleave to zeros).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn copy_next_or_zero(&mut self, stage: Stage) -> bool {
        let issued = self.first.copy_next_or_zero(stage);
        self.second.copy_next_or_zero(stage);
        issued
    }
}

impl<'a, T: SharedElement + MmaInput> PanelCopies<'a, T> {
    /// These copies with tf32 k-major panels stored rows k, k + 4
    /// interleaved by the rounding pass: the first (A) in 2 × 2 blocks if
    /// `A`, for [`AKMajorInterleaved`]'s 128-bit fragment loads, the second
    /// (B) by column if `B`, for [`BKMajorInterleaved`]'s 64-bit ones.
    /// `None` unless the inputs are tf32 and each thread's chunks of an
    /// interleaved panel come in pairs 4 rows apart (the block's threads
    /// copy 4 rows a pass: e.g. 128 threads and rows of 128 f32), so that
    /// the thread that rounds a chunk also holds the one it interleaves
    /// with. One check, uniform over the block.
    #[inline(always)]
    pub fn interleave_k_rows<const A: bool, const B: bool>(
        self,
    ) -> Option<PanelCopies<'a, T, A, B>> {
        let pairs = |c: &PanelCopy<'a, T>| c.rows_per_pass == 4 && c.chunks.is_multiple_of(2);
        (matches!(T::KIND, MmaKind::Tf32)
            && (!A || pairs(&self.first))
            && (!B || pairs(&self.second)))
        .then_some(PanelCopies {
            first: self.first,
            second: self.second,
        })
    }
}

impl<T: SharedElement + MmaInput, const A: bool, const B: bool> PanelCopies<'_, T, A, B> {
    /// Both panels' chunks rounded to tf32 once they have landed (as
    /// [`PanelCopy::round_landed`]: after this thread's wait for `stage`'s
    /// group, before the barrier that publishes it; a no-op for 16-bit
    /// types), and interleaved as `A` and `B` say.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn round_landed(&self, stage: Stage) {
        if A {
            self.first.round_interleaving::<true>(stage);
        } else {
            self.first.round_landed(stage);
        }
        if B {
            self.second.round_interleaving::<false>(stage);
        } else {
            self.second.round_landed(stage);
        }
    }
}

/// Proof, from one check, that a [`Global`] buffer starts 16-byte aligned
/// and that its 16-byte chunks (elements `8·j ..` for 16-bit types, `4·j ..`
/// for f32) are numbered by a `u32`: a gather that computes its chunks'
/// numbers per tile ([`GatherCopy`]) needs no alignment check per chunk (a
/// chunk number is aligned by construction) and one 32-bit comparison for
/// its bounds.
#[derive(Clone, Copy)]
pub struct AlignedChunks<'a, T> {
    src: Global<'a, T>,
    /// The buffer's whole chunks: `len / chunk`.
    chunks: u32,
}

impl<'a, T: SharedElement> AlignedChunks<'a, T> {
    /// The proof for `src`, if it starts 16-byte aligned and has fewer than
    /// 2³² chunks (an empty buffer too: it has no chunk to read).
    #[inline(always)]
    pub fn check(src: Global<'a, T>) -> Option<Self> {
        let size = core::mem::size_of::<T>();
        let fits = size != 0 && 16 % size == 0 && (src.as_ptr() as usize).is_multiple_of(16);
        let chunks = u32::try_from(src.len() / (16 / size.max(1))).ok()?;
        fits.then_some(AlignedChunks { src, chunks })
    }

    /// The source of a `cp.async` of chunk `chunk` if `wanted` and inside
    /// the buffer, with whether it is (else chunk 0's address, which a
    /// zero-filling copy does not read). One 32-bit comparison, no branch.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub(crate) fn chunk_source(&self, chunk: u32, wanted: bool) -> (*const u8, bool) {
        let ok = wanted & (chunk < self.chunks);
        #[cfg(not(target_arch = "nvptx64"))]
        assert!(
            !wanted || ok,
            "a gathered chunk {chunk} of a buffer of {} elements ({} whole chunks) is not inside it",
            self.src.len(),
            self.chunks
        );
        let chunk = if ok { chunk } else { 0 };
        let from = self
            .src
            .as_ptr()
            .cast::<[u8; 16]>()
            .wrapping_add(chunk as usize);
        (from.cast(), ok)
    }
}

/// One thread's chunks of a stage slice whose sources the kernel computes per
/// tile (a gather: the implicit-GEMM convolution's im2col rows), from
/// [`StageRing::gather_copy`]: the slice's 16-byte chunks `t, t + threads,
/// …`, their destinations computed once, each copied by `cp.async` from a
/// chunk of an [`AlignedChunks`] buffer or zero-filled (padding, ragged
/// edges), predicated: no branch and no check that can fail per chunk.
#[derive(Clone, Copy)]
pub struct GatherCopy<T> {
    ring: StageRing<T>,
    /// Element of a stage of this thread's first chunk, and between its chunks.
    dst: u32,
    dst_pass: u32,
    /// This thread's chunks per tile, the slice row of its first, the rows
    /// between them, and its column in the slice.
    chunks: u32,
    row: u32,
    rows_per_pass: u32,
    col: u32,
}

impl<T: SharedElement> StageRing<T> {
    /// Thread `t` of `threads`' chunks of a `rows × cols` slice stored at
    /// element `base` of each stage with rows `stride` apart: chunks `t, t +
    /// threads, …` of its `rows · cols/chunk` (consecutive threads along a
    /// row: coalesced where the sources are), `None` unless `cols` is whole
    /// chunks, `threads` a multiple of a row's chunks that divides the
    /// slice's, and the slice inside a stage with 16-byte aligned rows; each
    /// chunk lands where `place` puts it in its row (a pass of the block's
    /// threads placing its chunks alike). One check, uniform over the block.
    #[inline(always)]
    pub fn gather_copy(
        &self,
        (base, stride): (usize, usize),
        (rows, cols): (usize, usize),
        place: ChunkPlacement,
        (t, threads): (usize, usize),
    ) -> Option<GatherCopy<T>> {
        let size = core::mem::size_of::<T>();
        let chunk = 16 / size;
        let per_row = cols / chunk;
        let total = rows.checked_mul(per_row)?;
        let end = rows
            .checked_sub(1)?
            .checked_mul(stride)?
            .checked_add(base)?
            .checked_add(cols)?;
        let fits = per_row > 0
            && cols.is_multiple_of(chunk)
            && threads > 0
            && threads.is_multiple_of(per_row)
            && total.is_multiple_of(threads)
            && end <= self.stage_len()
            && (base * size).is_multiple_of(16)
            && (stride * size).is_multiple_of(16)
            && place.fits_row(per_row)
            && (threads / per_row).is_multiple_of(place.repeat_rows() as usize);
        if !fits {
            return None;
        }
        // A thread index past the block (a bug) copies the last thread's chunks.
        let t = t.min(threads - 1);
        let (r, c) = (t / per_row, (t % per_row) * chunk);
        let rows_per_pass = threads / per_row;
        // Inside a stage (checked), so every figure fits in 32 bits.
        Some(GatherCopy {
            ring: *self,
            dst: (base + r * stride + place.chunk(r as u32, (c / chunk) as u32) as usize * chunk)
                as u32,
            dst_pass: (rows_per_pass * stride) as u32,
            chunks: (total / threads) as u32,
            row: r as u32,
            rows_per_pass: rows_per_pass as u32,
            col: c as u32,
        })
    }
}

impl<T: SharedElement> GatherCopy<T> {
    /// This thread's chunks per tile.
    #[inline(always)]
    pub fn chunks(&self) -> usize {
        self.chunks as usize
    }

    /// The slice row of this thread's chunk `i`.
    #[inline(always)]
    pub fn row(&self, i: usize) -> usize {
        (self.row + i as u32 * self.rows_per_pass) as usize
    }

    /// The slice column of this thread's chunks (the first of 16 bytes).
    #[inline(always)]
    pub fn col(&self) -> usize {
        self.col as usize
    }

    /// If `issue`, starts filling this thread's chunk `i` (of
    /// [`chunks`](Self::chunks)) of `stage`: by `cp.async` from chunk
    /// `chunk` of `src` (its elements `chunk · 16/size ..`) if `wanted` and
    /// that chunk is inside `src`, else with zeros (reading nothing). Lands
    /// at the thread's wait, as [`super::cp_async_16`]'s copies; uniform
    /// `issue` keeps the block's groups in step. A wanted chunk past `src` is
    /// a bug in the kernel: zeros on the GPU, a fault on the emulator. One
    /// 32-bit comparison, no branch: a chunk number is aligned by
    /// construction.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn copy_or_zero(
        &self,
        stage: Stage,
        i: usize,
        src: &AlignedChunks<'_, T>,
        chunk: u32,
        wanted: bool,
        issue: bool,
    ) {
        let elems = 16 / core::mem::size_of::<T>();
        // Branch-free (`&`, not `&&`): a chunk inside the buffer, or zeros.
        let ok = wanted & (chunk < src.chunks);
        #[cfg(not(target_arch = "nvptx64"))]
        assert!(
            !(issue && wanted) || ok,
            "GatherCopy: chunk {chunk} of a buffer of {} elements ({} whole chunks) is not inside it",
            src.src.len(),
            src.chunks
        );
        // Clamped to this thread's chunks: `i` past them (a bug) refills the last.
        let i = (i as u32).min(self.chunks - 1);
        let to = self.ring.stage_offset(stage) + self.dst + i * self.dst_pass;
        let to = self.ring.address(to, elems, issue.then_some(true));
        // Chunk 0 when zero-filling (nothing is read): selected in 32 bits,
        // then the address formed once, base + chunk·16 (a 64-bit select of
        // the element index cost a wide multiply, two selects and an add).
        let chunk = if ok { chunk } else { 0 };
        let from = src
            .src
            .as_ptr()
            .cast::<[u8; 16]>()
            .wrapping_add(chunk as usize);
        // SAFETY: destination: stage + dst + i·dst_pass + chunk ≤ (stages −
        // 1)·stage_len + base + (rows − 1)·stride + cols ≤ the ring's elements
        // (`gather_copy`, `stage_offset`, i < chunks), 16-byte aligned (the
        // ring's stages, `base`, `stride` and the chunk column are). Source:
        // unless zero-filling (which reads nothing), the 16 bytes of chunk
        // `chunk` < len / chunk of `src` (checked just above): inside it, in
        // the global state space (`Global`'s invariant), 16-byte aligned (the
        // buffer's start is, by `AlignedChunks::check`, and the chunk starts
        // a multiple of 16 bytes after it). The shared bytes are written
        // asynchronously, under the kernel's barrier discipline as with
        // `cp_async_16`.
        unsafe { arch::cp_async_16_zfill_at(to, from.cast(), !ok, issue) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stores k-major 16 × 32 tiles as [`PanelCopy::round_interleaving`]
    /// does — B by column (rows p, p + 4 of a chunk as `(x0, y0, x1, y1)`,
    /// `(x2, y2, x3, y3)`), A in 2 × 2 blocks (`(x0, x1, y0, y1)`, `(x2, x3,
    /// y2, y3)`) — then reads them as [`BKMajorInterleaved`] and
    /// [`AKMajorInterleaved`] do: every lane's load holds the elements the
    /// `m16n8k8` layout names (B: register `i` of fragment `f` is `(k, n) =
    /// (t + 4i, g + 8f)`; A: rows paired) in every k-slice and column block;
    /// with rows padded by 16 bytes neither load meets a bank conflict.
    #[test]
    fn interleaved_k_rows_put_each_fragment_register_in_one_load() {
        const ROWS: usize = 16;
        const COLS: usize = 32;
        let stride = COLS + 4;
        let value = |k: usize, n: usize| (k * 1000 + n) as u32;
        let mut stage = vec![u32::MAX; ROWS * stride];
        for p in (0..ROWS).filter(|p| p % 8 < 4) {
            for c in 0..COLS / 4 {
                let x: [u32; 4] = core::array::from_fn(|j| value(p, 4 * c + j));
                let y: [u32; 4] = core::array::from_fn(|j| value(p + 4, 4 * c + j));
                stage[p * stride + 4 * c..][..4].copy_from_slice(&[x[0], y[0], x[1], y[1]]);
                stage[(p + 4) * stride + 4 * c..][..4].copy_from_slice(&[x[2], y[2], x[3], y[3]]);
            }
        }
        for slice in 0..ROWS / 8 {
            for pair in 0..COLS / 16 {
                for lane in 0..32u32 {
                    let first = slice * 8 * stride
                        + pair * 16
                        + <BKMajorInterleaved as FragmentLayout<f32>>::lane_start(lane, stride);
                    assert!(first.is_multiple_of(2), "lane {lane}: a 64-bit load");
                    let (t, g) = (lane as usize % 4, lane as usize / 4);
                    for f in 0..2 {
                        let got = [stage[first + 8 * f], stage[first + 8 * f + 1]];
                        let n = pair * 16 + 8 * f + g;
                        let want = [value(slice * 8 + t, n), value(slice * 8 + t + 4, n)];
                        assert_eq!(
                            got, want,
                            "slice {slice}, pair {pair}, lane {lane}, frag {f}"
                        );
                    }
                }
            }
        }
        // A, stored k-major as `value(k, m)` and interleaved in 2 × 2
        // blocks: each lane's one load holds registers (m, k) = (2g, t),
        // (2g + 1, t), (2g, t + 4), (2g + 1, t + 4) — rows paired, so mma
        // rows g and g + 8 are stored columns 2g and 2g + 1.
        let mut stage = vec![u32::MAX; ROWS * stride];
        for p in (0..ROWS).filter(|p| p % 8 < 4) {
            for c in 0..COLS / 4 {
                let x: [u32; 4] = core::array::from_fn(|j| value(p, 4 * c + j));
                let y: [u32; 4] = core::array::from_fn(|j| value(p + 4, 4 * c + j));
                stage[p * stride + 4 * c..][..4].copy_from_slice(&[x[0], x[1], y[0], y[1]]);
                stage[(p + 4) * stride + 4 * c..][..4].copy_from_slice(&[x[2], x[3], y[2], y[3]]);
            }
        }
        for slice in 0..ROWS / 8 {
            for block in 0..COLS / 16 {
                for lane in 0..32u32 {
                    let first = slice * 8 * stride
                        + block * 16
                        + <AKMajorInterleaved as FragmentLayout<f32>>::lane_start(lane, stride);
                    assert!(first.is_multiple_of(4), "lane {lane}: a 128-bit load");
                    let (t, g) = (lane as usize % 4, lane as usize / 4);
                    let (k, m) = (slice * 8 + t, block * 16 + 2 * g);
                    let want = [
                        value(k, m),
                        value(k, m + 1),
                        value(k + 4, m),
                        value(k + 4, m + 1),
                    ];
                    assert_eq!(
                        &stage[first..first + 4],
                        &want,
                        "A: slice {slice}, block {block}, lane {lane}"
                    );
                }
            }
        }
        // Banks of a half-warp's loads (8 bytes = 2 banks a lane), rows of
        // 128 f32 padded by 4 (the large tile's).
        let stride = 128 + 4;
        for half in 0..2u32 {
            let mut banks: Vec<usize> = (16 * half..16 * half + 16)
                .flat_map(|l| {
                    let at = <BKMajorInterleaved as FragmentLayout<f32>>::lane_start(l, stride);
                    [at % 32, (at + 1) % 32]
                })
                .collect();
            banks.sort_unstable();
            banks.dedup();
            assert_eq!(banks.len(), 32, "half-warp {half}");
        }
        // A's 128-bit loads: a quarter-warp's 8 lanes, 4 banks each.
        for quarter in 0..4u32 {
            let mut banks: Vec<usize> = (8 * quarter..8 * quarter + 8)
                .flat_map(|l| {
                    let at = <AKMajorInterleaved as FragmentLayout<f32>>::lane_start(l, stride);
                    (0..4).map(move |w| (at + w) % 32)
                })
                .collect();
            banks.sort_unstable();
            banks.dedup();
            assert_eq!(banks.len(), 32, "quarter-warp {quarter}");
        }
    }
}
