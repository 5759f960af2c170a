//! Warp-level tensor-core matrix multiply with f32 accumulation (sm_80):
//! `mma.sync.m16n8k16` with f16 or bf16 inputs and `mma.sync.m16n8k8` with
//! f32 inputs rounded to tf32, `ldmatrix` to load their fragments from
//! shared memory, and `cp.async` to stage tiles from global memory into
//! shared memory without passing through registers.
//!
//! The 32 lanes of a warp together hold one A (16 × [`MmaInput::K`]),
//! B ([`MmaInput::K`] × 8) and C (16×8) tile; each lane holds a *fragment*:
//! four registers of A, two of B, four f32 of C, at coordinates fixed by the
//! PTX ISA (§9.7.14.5.8 and §9.7.14.5.6). For f16/bf16 a register holds two
//! elements (8 of A, 4 of B per lane), for tf32 one (4 of A, 2 of B), and
//! the tf32 tables are the 16-bit ones read in 32-bit units: register `r`
//! holds the same bytes of a row-major tile either way, so one `ldmatrix`
//! serves both wherever a lane's elements are contiguous along k.
//! [`a_coord`], [`b_coord`] and [`c_coord`] are the 16-bit tables as
//! functions, [`a_coord_tf32`] and [`b_coord_tf32`] the tf32 ones, so a kernel
//! can load or store fragments from any layout, and the emulator computes
//! `mma` with the same tables.
//!
//! **tf32**: an f32 fragment ([`FragA<f32>`], [`FragB<f32>`]) always holds
//! its elements rounded to tf32 (`cvt.rna.tf32.f32`: 10 fraction bits,
//! nearest, ties away from zero, as cuBLAS rounds): its loads round, so an
//! `mma` never sees the raw f32 bits (which the hardware would truncate).
//!
//! Rounding: products of f16/bf16/tf32 are exact in f32. The GPU adds them
//! in an unspecified order with at least single precision; the emulator adds
//! each output's `K` products and its C element exactly (in f64) and rounds
//! once, so the two can differ in the last bits of each output (tests allow
//! K · 2⁻²⁴ · Σ|a·b| + |c|·2⁻²⁴).

use crate::arch;
use crate::global::Global;
use crate::shared::{SharedArray, SharedElement};
use core::marker::PhantomData;
use half::{bf16, f16};

pub mod dmma;
mod stages;
pub use stages::{
    AKMajor, AKMajorInterleaved, ARowMajor, AlignedChunks, BKMajorInterleaved, BKMajorPair,
    BNMajorPair, ChunkPlacement, FragmentLayout, GatherCopy, PanelCopies, PanelCopy, Stage,
    StageRing, StageWindow,
};

/// Rows of A and C/D.
pub const M: usize = 16;
/// Columns of B and C/D.
pub const N: usize = 8;
/// Columns of A, rows of B, for f16 and bf16 (`m16n8k16`); tf32's is 8
/// (`m16n8k8`). Generic code uses [`MmaInput::K`].
pub const K: usize = 16;

/// (row, col) in A (16×16) of element `i` (0..8) of lane `lane`'s A fragment.
/// Register r holds elements 2r and 2r+1 (low half first).
#[inline(always)]
pub const fn a_coord(lane: u32, i: usize) -> (usize, usize) {
    let (group, thread) = ((lane >> 2) as usize, (lane % 4) as usize);
    let row = group + if i % 4 >= 2 { 8 } else { 0 };
    let col = thread * 2 + (i & 1) + if i >= 4 { 8 } else { 0 };
    (row, col)
}

/// (row, col) in B (16×8, k × n) of element `i` (0..4) of lane `lane`'s B fragment.
#[inline(always)]
pub const fn b_coord(lane: u32, i: usize) -> (usize, usize) {
    let (group, thread) = ((lane >> 2) as usize, (lane % 4) as usize);
    (thread * 2 + (i & 1) + if i >= 2 { 8 } else { 0 }, group)
}

/// (row, col) in A (16×8) of element `i` (0..4) of lane `lane`'s tf32 A
/// fragment, which is register `i`: the 16-bit table's register `i` read as
/// one 32-bit element (its column halved).
#[inline(always)]
pub const fn a_coord_tf32(lane: u32, i: usize) -> (usize, usize) {
    let (row, col) = a_coord(lane, 2 * i);
    (row, col / 2)
}

/// (row, col) in B (8×8, k × n) of element `i` (0..2) of lane `lane`'s tf32
/// B fragment, register `i` (as [`a_coord_tf32`]).
#[inline(always)]
pub const fn b_coord_tf32(lane: u32, i: usize) -> (usize, usize) {
    let (k, n) = b_coord(lane, 2 * i);
    (k / 2, n)
}

/// (row, col) in C and D (16×8) of element `i` (0..4) of lane `lane`'s fragment.
#[inline(always)]
pub const fn c_coord(lane: u32, i: usize) -> (usize, usize) {
    let (group, thread) = ((lane >> 2) as usize, (lane % 4) as usize);
    (group + if i >= 2 { 8 } else { 0 }, thread * 2 + (i & 1))
}

/// Where the `mma` results of a warp's tile lie in it: as [`c_coord`] says
/// ([`MmaOrder::PLAIN`]), or with A's rows *paired*.
///
/// Why pair: a k-major tf32 A cannot be loaded by `ldmatrix.trans` (which
/// moves 16-bit elements only), so each lane loads its four elements with
/// plain shared loads; registers 0 and 1 (rows `g` and `g + 8` at one k)
/// lie 8 elements apart, as do 2 and 3. If the `mma` instead reads its row
/// `r` of each 16-row block from stored row [`paired`]`(r)` (rows `g`,
/// `g + 8` from `2g`, `2g + 1`), each pair is adjacent: one 64-bit load
/// fills the two consecutive registers `mma` takes them in, where there
/// were two 32-bit loads. The products are then C with the same rows
/// permuted — a bijection within each 16-row block — which the epilogue
/// undoes by writing each element where this map puts it
/// (`OutMatrix<_, WarpGrid<…, RP>>`,
/// [`WarpTile::update_mma_c`](crate::own::WarpTile::update_mma_c)).
/// (B has no such pairing: its two registers differ in k, which a k-major
/// B stores in different rows, and what lies adjacent — the same k of two
/// fragments — is not a register pair `mma` takes.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MmaOrder {
    /// A's row `r` of each 16-row block read from stored row `paired(r)`.
    pub rows_paired: bool,
}

impl MmaOrder {
    /// Rows as [`c_coord`] says.
    pub const PLAIN: MmaOrder = MmaOrder { rows_paired: false };

    /// The order the stage loads of [`AKMajor`] (A k-major, `a_k_major`)
    /// read `T` in: rows paired for tf32 (64-bit loads), plain for the
    /// 16-bit types (`ldmatrix.trans`) and for an A stored along k
    /// (`ldmatrix`).
    pub const fn of<T: MmaInput>(a_k_major: bool) -> MmaOrder {
        MmaOrder {
            rows_paired: a_k_major && matches!(T::KIND, MmaKind::Tf32),
        }
    }

    /// (row, col) in a warp tile of element `i` (0..4) of lane `lane`'s
    /// fragment of the 16 × 8 sub-tile (`sub_row`, `sub_col`): rows
    /// `16·sub_row ..`, columns `8·sub_col ..`, the rows within the 16
    /// [`paired`] if this order says so. One-to-one over lanes, elements
    /// and sub-tiles, whatever the order.
    #[inline(always)]
    pub const fn c_coord(
        self,
        lane: u32,
        i: usize,
        sub_row: usize,
        sub_col: usize,
    ) -> (usize, usize) {
        let (r, c) = c_coord(lane, i);
        let row = if self.rows_paired { paired(r) } else { r };
        (sub_row * M + row, sub_col * N + c)
    }
}

/// Where [`MmaOrder::rows_paired`] stores row `r` (0..16) of a 16-row block:
/// rows `g` and `g + 8` side by side at `2g`, `2g + 1`. A bijection of 0..16.
#[inline(always)]
pub const fn paired(r: usize) -> usize {
    2 * (r % 8) + r / 8
}

mod sealed {
    pub trait Sealed {}
}

/// Input element types of `mma.sync`: [`f16`](struct@crate::f16) and
/// [`bf16`](struct@crate::bf16) (`m16n8k16`), and `f32`, which the fragments
/// round to tf32 (`m16n8k8`). Sealed.
pub trait MmaInput: SharedElement + sealed::Sealed {
    /// Columns of A and rows of B of one `mma`: 16 for f16/bf16, 8 for tf32
    /// (16 bytes of a stored row either way).
    const K: usize;
    #[doc(hidden)]
    const KIND: MmaKind;
    /// The register holding elements `elem(2r)`, `elem(2r + 1)` (16-bit
    /// types, low half first) or `elem(r)` rounded to tf32 (f32).
    #[doc(hidden)]
    fn pack(r: usize, elem: impl Fn(usize) -> Self) -> u32;
    /// A register as `ldmatrix` loaded it from a stored row: as is for the
    /// 16-bit types, rounded to tf32 for f32.
    #[doc(hidden)]
    fn from_stored(reg: u32) -> u32;
}

#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmaKind {
    F16,
    Bf16,
    Tf32,
}

impl MmaKind {
    /// Elements per register: 2 for f16/bf16, 1 for tf32.
    pub const fn per_reg(self) -> usize {
        match self {
            MmaKind::Tf32 => 1,
            _ => 2,
        }
    }
}

impl sealed::Sealed for f16 {}
impl sealed::Sealed for bf16 {}
impl sealed::Sealed for f32 {}
impl MmaInput for f16 {
    const K: usize = K;
    const KIND: MmaKind = MmaKind::F16;
    #[inline(always)]
    fn pack(r: usize, elem: impl Fn(usize) -> f16) -> u32 {
        u32::from(elem(2 * r).to_bits()) | u32::from(elem(2 * r + 1).to_bits()) << 16
    }
    #[inline(always)]
    fn from_stored(reg: u32) -> u32 {
        reg
    }
}
impl MmaInput for bf16 {
    const K: usize = K;
    const KIND: MmaKind = MmaKind::Bf16;
    #[inline(always)]
    fn pack(r: usize, elem: impl Fn(usize) -> bf16) -> u32 {
        u32::from(elem(2 * r).to_bits()) | u32::from(elem(2 * r + 1).to_bits()) << 16
    }
    #[inline(always)]
    fn from_stored(reg: u32) -> u32 {
        reg
    }
}
impl MmaInput for f32 {
    const K: usize = 8;
    const KIND: MmaKind = MmaKind::Tf32;
    #[inline(always)]
    fn pack(r: usize, elem: impl Fn(usize) -> f32) -> u32 {
        arch::f32_to_tf32_bits(elem(r))
    }
    #[inline(always)]
    fn from_stored(reg: u32) -> u32 {
        arch::f32_to_tf32_bits(f32::from_bits(reg))
    }
}

/// `x` rounded to tf32 (`cvt.rna.tf32.f32`: 10 fraction bits, nearest, ties
/// away from zero; NaN to the canonical `0x7fff_ffff`), as an f32: what an
/// f32 fragment holds.
///
/// ```
/// # use warpforge_device::mma::round_tf32;
/// assert_eq!(round_tf32(1.0 + 1.0 / 2048.0), 1.0 + 1.0 / 1024.0); // a tie: away from zero
/// assert_eq!(round_tf32(1.0 + 1.0 / 4096.0), 1.0);
/// ```
#[inline(always)]
pub fn round_tf32(x: f32) -> f32 {
    f32::from_bits(arch::f32_to_tf32_bits(x))
}

/// This lane's fragment of A: four registers of two halves each (f16, bf16)
/// or of one tf32 each (f32).
#[derive(Clone, Copy, Debug)]
pub struct FragA<T> {
    /// The registers, in the PTX operand order.
    pub regs: [u32; 4],
    _t: PhantomData<T>,
}

/// This lane's fragment of B: two registers of two halves each (f16, bf16)
/// or of one tf32 each (f32).
#[derive(Clone, Copy, Debug)]
pub struct FragB<T> {
    /// The registers, in the PTX operand order.
    pub regs: [u32; 2],
    _t: PhantomData<T>,
}

/// This lane's 4 elements of C or D, in f32.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FragC {
    /// Element i is at [`c_coord`]`(lane, i)`.
    pub regs: [f32; 4],
}

/// Elements of a 16-byte stored row: what one `ldmatrix` row and one
/// `cp.async` chunk hold (8 f16/bf16, 4 f32).
pub const fn row_elems<T>() -> usize {
    16 / core::mem::size_of::<T>()
}

/// Proof, from one check, that a shared view starts 16-byte aligned and
/// holds at least one 16-byte row: the fragment loads that take it
/// ([`FragA::load_from`], [`FragA::load_k_major_from`],
/// [`FragB::load_k_major_from`], [`FragB::load_n_major_from`]) need no check
/// and no branch per load. Each lane's row offset is clamped into the view
/// and rounded down to a whole 16-byte row (two instructions, no-ops for the
/// offsets a kernel computes from its tile shape), so every `ldmatrix`
/// address is in bounds and aligned whatever the offsets; the emulator
/// reports an offset that needed either as a fault, where the checked loads
/// ([`FragA::load`], …) would have panicked.
#[derive(Clone, Copy)]
pub struct FragmentSource<T> {
    array: SharedArray<T>,
    /// The view's first element as a `.shared` address (computed once).
    base: arch::SharedAddr,
    /// The last element a 16-byte row may start at: `len − row`, at most
    /// `u32::MAX` (shared memory is far smaller).
    last: u32,
}

impl<T: MmaInput> FragmentSource<T> {
    /// The proof for `array`, if it starts 16-byte aligned and holds a row.
    #[inline(always)]
    pub fn check(array: &SharedArray<T>) -> Option<Self> {
        let last = array.len().checked_sub(row_elems::<T>())?;
        let last = u32::try_from(last).unwrap_or(u32::MAX);
        array.addr(0).is_multiple_of(16).then(|| FragmentSource {
            array: *array,
            base: arch::shared_addr(array.addr(0) as *const u8),
            last,
        })
    }

    /// The view.
    #[inline(always)]
    pub fn array(&self) -> &SharedArray<T> {
        &self.array
    }

    /// The two 32-bit elements at `at` (one 64-bit load), checked: `at` even
    /// and `at + 1` in the view, the elements 4 bytes (tf32's f32) — a
    /// panic, a trap on the GPU, otherwise.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    fn pair(&self, at: usize) -> [u32; 2] {
        assert!(
            core::mem::size_of::<T>() == 4
                && at.is_multiple_of(2)
                && at < self.array.len().saturating_sub(1),
            "fragment pair at element {at} is outside the shared view or not 8-byte aligned"
        );
        // SAFETY: at + 2 ≤ len (just checked); records the access for the
        // emulator's race and pending-copy checks.
        let _ = unsafe { self.array.row_ptr_proven(at, 2, false) };
        let addr = arch::shared_addr_add(self.base, (at * 4) as u32);
        // SAFETY: 8 bytes of the view (in bounds, above), 8-byte aligned (the
        // view starts 16-byte aligned, `check`, and `at` is even), in the
        // block's shared memory. Ordering: the kernel's barriers (see
        // "Races" on `SharedArray`; checked by the emulator).
        unsafe { arch::ld_shared_v2_at(addr) }
    }

    /// The 16-byte row at `start`, clamped into the view and rounded down to
    /// a row boundary (a fault on the emulator if that changed it).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    fn row(&self, start: usize) -> arch::SharedAddr {
        let row = row_elems::<T>() as u32;
        // 32-bit: a shared-memory offset. `last` ≤ len − row, so fixed + row ≤ len;
        // rounded down to a whole row (16 bytes), so aligned as the base is.
        let fixed = (start as u32).min(self.last) & !(row - 1);
        #[cfg(not(target_arch = "nvptx64"))]
        {
            assert!(
                fixed as usize == start,
                "fragment row at element {start} is outside the shared view ({} elements) or \
                 not 16-byte aligned",
                self.array.len()
            );
            // The emulator's race and pending-copy checks of the read.
            // SAFETY: fixed + row ≤ len (above).
            let _ = unsafe {
                self.array
                    .row_ptr_proven(fixed as usize, row as usize, false)
            };
        }
        arch::shared_addr_add(self.base, fixed * core::mem::size_of::<T>() as u32)
    }
}

/// Row `start` of each lane's 8×8 matrix for an A fragment stored row-major
/// (see [`FragA::load`]).
#[inline(always)]
fn a_rows_start<T>(base: usize, row_stride: usize) -> usize {
    let lane = crate::thread::lane_id() as usize;
    let (matrix, row) = (lane / 8, lane % 8);
    base + (row + (matrix % 2) * 8) * row_stride + (matrix / 2) * row_elems::<T>()
}

/// … stored k-major (see [`FragA::load_k_major`]).
#[inline(always)]
fn a_k_major_start(base: usize, row_stride: usize) -> usize {
    let lane = crate::thread::lane_id() as usize;
    let (matrix, row) = (lane / 8, lane % 8);
    base + (row + (matrix / 2) * 8) * row_stride + (matrix % 2) * 8
}

/// … of a B fragment stored k-major (see [`FragB::load_k_major`]).
#[inline(always)]
fn b_k_major_start(base: usize, row_stride: usize) -> usize {
    base + (crate::thread::lane_id() as usize % 16) * row_stride
}

/// … stored n-major (see [`FragB::load_n_major`]).
#[inline(always)]
fn b_n_major_start<T>(base: usize, row_stride: usize) -> usize {
    let lane = crate::thread::lane_id() as usize % 16;
    let (matrix, n) = (lane / 8, lane % 8);
    base + n * row_stride + matrix * row_elems::<T>()
}

/// `ldmatrix` of the row at `start` of `src`, no check per load.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
fn ldmatrix_from<T: MmaInput, const R: usize>(
    src: &FragmentSource<T>,
    start: usize,
    trans: bool,
) -> [u32; R] {
    let addr = src.row(start);
    // SAFETY: `addr` is the 16-byte row at an in-bounds offset of the block's
    // shared memory (`FragmentSource::row` clamps it into the view), 16-byte
    // aligned (the view's base is, by the check, and the offset is a whole
    // number of rows). Every lane passes such an address, supplying or not.
    // Ordering and the whole warp executing it: as for `ldmatrix` above.
    unsafe { arch::ldmatrix_at::<R>(addr, trans) }
}

impl<T> FragA<T> {
    /// The fragment holding these registers (as loaded: tf32 already rounded).
    #[inline(always)]
    pub(crate) fn from_regs(regs: [u32; 4]) -> Self {
        FragA {
            regs,
            _t: PhantomData,
        }
    }
}

impl<T> FragB<T> {
    /// The fragment holding these registers (as loaded: tf32 already rounded).
    #[inline(always)]
    pub(crate) fn from_regs(regs: [u32; 2]) -> Self {
        FragB {
            regs,
            _t: PhantomData,
        }
    }
}

impl<T: MmaInput> FragA<T> {
    /// This lane's fragment of the A tile whose element (row, col) is `a(row, col)`.
    #[inline(always)]
    pub fn from_fn(a: impl Fn(usize, usize) -> T) -> Self {
        let lane = crate::thread::lane_id();
        let at = |i| {
            let (r, c) = match T::KIND {
                MmaKind::Tf32 => a_coord_tf32(lane, i),
                _ => a_coord(lane, i),
            };
            a(r, c)
        };
        FragA {
            regs: core::array::from_fn(|r| T::pack(r, at)),
            _t: PhantomData,
        }
    }

    /// Loads the A tile stored row-major at `tile[base..]` with `row_stride`
    /// elements per row, by one `ldmatrix.x4` (for f32, then rounded to
    /// tf32). Panics if a row is out of bounds or not 16-byte aligned.
    ///
    /// All 32 lanes of the warp must call it together: `ldmatrix` from part
    /// of a warp is undefined on the GPU. The types cannot check that (as
    /// with a barrier); the emulator reports it as a fault.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load(tile: &SharedArray<T>, base: usize, row_stride: usize) -> Self {
        // Lane l supplies row l % 8 of 8×8 matrix l / 8; matrices 0–3 are the
        // quadrants (rows 0–7 | 8–15) × (the first | second 16 bytes of k),
        // which are registers 0–3, for 16- and 32-bit elements alike.
        let start = a_rows_start::<T>(base, row_stride);
        FragA {
            regs: ldmatrix::<T, 4>(tile, start, false).map(T::from_stored),
            _t: PhantomData,
        }
    }

    /// Loads the A tile stored k-major (transposed: element (row, col) of A
    /// at `tile[base + col·row_stride + row]`, K rows of 16) by one
    /// `ldmatrix.x4.trans` (16-bit types), or for f32 by four shared loads
    /// (`.trans` moves 16-bit elements only), rounded to tf32. All 32 lanes
    /// of the warp must call it together, as [`FragA::load`].
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load_k_major(tile: &SharedArray<T>, base: usize, row_stride: usize) -> Self {
        if T::KIND == MmaKind::Tf32 {
            return FragA::from_fn(|row, col| tile.load(base + col * row_stride + row));
        }
        // Register r is the 8×8 quadrant (rows 8·(r % 2) ..) × (cols 8·(r / 2) ..)
        // of A, stored as rows k = 8·(r / 2) .. of 8 elements at m = 8·(r % 2);
        // lane l supplies stored row l % 8 of quadrant l / 8, and .trans hands
        // each lane the transposed elements, A's (row, col) as `a_coord` says.
        let start = a_k_major_start(base, row_stride);
        FragA {
            regs: ldmatrix::<T, 4>(tile, start, true),
            _t: PhantomData,
        }
    }
}

impl<T: MmaInput> FragA<T> {
    /// [`FragA::load`] from a proven view: no check or branch per load.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load_from(src: &FragmentSource<T>, base: usize, row_stride: usize) -> Self {
        FragA {
            regs: ldmatrix_from::<T, 4>(src, a_rows_start::<T>(base, row_stride), false)
                .map(T::from_stored),
            _t: PhantomData,
        }
    }

    /// [`FragA::load_k_major`] from a proven view: no check or branch per
    /// load for the 16-bit types (f32's four plain shared loads stay checked).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load_k_major_from(src: &FragmentSource<T>, base: usize, row_stride: usize) -> Self {
        if T::KIND == MmaKind::Tf32 {
            return FragA::load_k_major(&src.array, base, row_stride);
        }
        FragA {
            regs: ldmatrix_from::<T, 4>(src, a_k_major_start(base, row_stride), true),
            _t: PhantomData,
        }
    }
}

impl<T: MmaInput> FragA<T> {
    /// [`FragA::load_k_major_from`] with A's rows paired
    /// ([`MmaOrder::rows_paired`]): row `r` of the fragment from stored row
    /// [`paired`]`(r)`. For tf32 each register pair (rows `g`, `g + 8` at one
    /// k: stored side by side) is one 64-bit shared load, checked in bounds
    /// and 8-byte aligned (a panic, a trap on the GPU, otherwise), then
    /// rounded; the 16-bit types load element by element. The guarded
    /// path's; the lean one's are [`AKMajor`]'s, unchecked.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load_k_major_paired_from(
        src: &FragmentSource<T>,
        base: usize,
        row_stride: usize,
    ) -> Self {
        if T::KIND != MmaKind::Tf32 {
            return FragA::from_fn(|row, col| {
                src.array.load(base + col * row_stride + paired(row))
            });
        }
        let first =
            base + stages::tf32_a_k_major_start(crate::thread::lane_id() as usize, row_stride);
        let [r0, r1] = src.pair(first);
        let [r2, r3] = src.pair(first + 4 * row_stride);
        FragA::from_regs([r0, r1, r2, r3].map(T::from_stored))
    }
}

impl<T: MmaInput> FragB<T> {
    /// [`FragB::load_k_major`] from a proven view: no check or branch per
    /// load for the 16-bit types (f32's plain shared loads stay checked).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load_k_major_from(src: &FragmentSource<T>, base: usize, row_stride: usize) -> Self {
        if T::KIND == MmaKind::Tf32 {
            return FragB::load_k_major(&src.array, base, row_stride);
        }
        FragB {
            regs: ldmatrix_from::<T, 2>(src, b_k_major_start(base, row_stride), true),
            _t: PhantomData,
        }
    }

    /// [`FragB::load_n_major`] from a proven view: no check or branch per load.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load_n_major_from(src: &FragmentSource<T>, base: usize, row_stride: usize) -> Self {
        FragB {
            regs: ldmatrix_from::<T, 2>(src, b_n_major_start::<T>(base, row_stride), false)
                .map(T::from_stored),
            _t: PhantomData,
        }
    }
}

impl<T: MmaInput> FragB<T> {
    /// This lane's fragment of the B tile (k × n) whose element (k, n) is `b(k, n)`.
    #[inline(always)]
    pub fn from_fn(b: impl Fn(usize, usize) -> T) -> Self {
        let lane = crate::thread::lane_id();
        let at = |i| {
            let (k, n) = match T::KIND {
                MmaKind::Tf32 => b_coord_tf32(lane, i),
                _ => b_coord(lane, i),
            };
            b(k, n)
        };
        FragB {
            regs: core::array::from_fn(|r| T::pack(r, at)),
            _t: PhantomData,
        }
    }

    /// Loads the B tile stored row-major as k × n (K rows of 8) at
    /// `tile[base..]`, by one `ldmatrix.x2.trans` (16-bit types), or for f32
    /// by two shared loads, rounded to tf32. All 32 lanes of the warp must
    /// call it together, as [`FragA::load`].
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load_k_major(tile: &SharedArray<T>, base: usize, row_stride: usize) -> Self {
        if T::KIND == MmaKind::Tf32 {
            return FragB::from_fn(|k, n| tile.load(base + k * row_stride + n));
        }
        // Lanes 0–15 supply rows k = 0..16; .trans hands each lane the column n = lane / 4.
        FragB {
            regs: ldmatrix::<T, 2>(tile, b_k_major_start(base, row_stride), true),
            _t: PhantomData,
        }
    }
}

impl<T: MmaInput> FragB<T> {
    /// Loads the B tile (k × n) stored n-major (transposed: element (k, n) at
    /// `tile[base + n·row_stride + k]`, 8 rows of K) by one `ldmatrix.x2`
    /// (for f32, then rounded to tf32). All 32 lanes of the warp must call it
    /// together, as [`FragA::load`].
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load_n_major(tile: &SharedArray<T>, base: usize, row_stride: usize) -> Self {
        // Register r is the r-th 16 bytes of k: lanes 8·r .. supply stored
        // rows n = 0..8 there; without .trans lane l receives row n = l / 4,
        // its 32 bits l % 4 (elements k = 2·(l % 4), +1, or k = l % 4 for
        // tf32), which is `b_coord` (`b_coord_tf32`).
        let start = b_n_major_start::<T>(base, row_stride);
        FragB {
            regs: ldmatrix::<T, 2>(tile, start, false).map(T::from_stored),
            _t: PhantomData,
        }
    }
}

impl FragC {
    /// This lane's fragment of the C tile whose element (row, col) is `c(row, col)`.
    #[inline(always)]
    pub fn from_fn(c: impl Fn(usize, usize) -> f32) -> Self {
        let lane = crate::thread::lane_id();
        FragC {
            regs: core::array::from_fn(|i| {
                let (row, col) = c_coord(lane, i);
                c(row, col)
            }),
        }
    }

    /// Calls `f(row, col, value)` for this lane's 4 elements.
    #[inline(always)]
    pub fn for_each(&self, mut f: impl FnMut(usize, usize, f32)) {
        let lane = crate::thread::lane_id();
        for (i, &v) in self.regs.iter().enumerate() {
            let (row, col) = c_coord(lane, i);
            f(row, col, v);
        }
    }
}

/// `D = A·B + C` for the warp's 16 × K A, K × 8 B and 16×8 C tiles
/// (`mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32`, or
/// `m16n8k8….tf32.tf32…` for f32 fragments, which hold tf32).
/// All 32 lanes of the warp must call it together: `mma.sync` from part of
/// a warp is undefined on the GPU (the emulator reports it as a fault).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn mma<T: MmaInput>(a: FragA<T>, b: FragB<T>, c: FragC) -> FragC {
    FragC {
        regs: arch::mma_sync(T::KIND, a.regs, b.regs, c.regs),
    }
}

/// `ldmatrix.sync.aligned.m8n8.xR{.trans}.shared.b16`: this lane supplies the
/// 16-byte row at `tile[row_start..]`; returns its R registers.
/// `ldmatrix.x4` with rows of the lane's choosing: lane `l` supplies row
/// `l % 8` of 8×8 matrix `l / 8` as the 16 bytes at `tile[row_start..]`,
/// and register `k` of lane `l` holds the 32 bits at bytes `4·(l % 4)..` of
/// row `l / 4` of matrix `k` (two 16-bit elements, the lower-indexed in the
/// low half, or one f32 as stored). For tiles laid
/// out in a layout the fragment loads ([`FragA::load`]) cannot address, such
/// as an XOR-swizzled one, where a row's 16-byte chunks are permuted so that
/// the 8 rows an `ldmatrix` reads fall in different banks. Panics if a row
/// is out of bounds or not 16-byte aligned. All 32 lanes of the warp must
/// call it together, as [`FragA::load`].
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn ldmatrix_x4<T: MmaInput>(tile: &SharedArray<T>, row_start: usize) -> [u32; 4] {
    ldmatrix::<T, 4>(tile, row_start, false)
}

#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
fn ldmatrix<T: MmaInput, const R: usize>(
    tile: &SharedArray<T>,
    row_start: usize,
    trans: bool,
) -> [u32; R] {
    let lanes_supplying = 8 * R;
    let supplies = (crate::thread::lane_id() as usize) < lanes_supplying;
    let ptr = if supplies {
        tile.row_ptr(row_start, row_elems::<T>(), false)
    } else {
        tile.row_ptr(0, 0, false)
    };
    assert!(
        (ptr as usize).is_multiple_of(16),
        "ldmatrix row is not 16-byte aligned: start rows at multiples of 16 bytes"
    );
    // SAFETY: in a supplying lane `ptr` is the 16-byte row starting at
    // `row_start` of a `SharedArray` (the block's shared memory), checked in
    // bounds by `row_ptr`, 16-byte aligned (checked above). Other
    // lanes pass the view's base, which `ldmatrix` ignores. Ordering against
    // other threads' writes of those rows is the kernel's barrier discipline
    // (see "Races" on `SharedArray`). All 32 lanes executing it together is
    // a precondition safe code cannot be held to, like a barrier's: it is
    // documented on `FragA::load` and its siblings, and the emulator
    // reports a partial warp as a fault.
    unsafe { arch::ldmatrix::<R>(ptr.cast(), trans) }
}

/// Starts copying 16 bytes from `src[src_index..]` in global memory to
/// `dst[dst_index..]` in shared memory (`cp.async.cg.shared.global`, 16 bytes).
/// The copy lands after [`cp_async_wait_all`]; make it visible to other
/// threads with a barrier after the wait. Panics if either range is out of
/// bounds or not 16-byte aligned. The emulator defers the copy to the wait,
/// as a GPU may, and reports any access to the destination before it as
/// `Fault::CpAsyncPending` (a barrier alone does not complete the copy).
///
/// The source is a [`Global`]: `cp.async` reads the global state space only,
/// and a `Global` is the one slice type that is in it by construction (a
/// kernel parameter declared `Global<T>`); a kernel-local array or a `&[T]`
/// does not compile here.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn cp_async_16<T: SharedElement>(
    dst: &SharedArray<T>,
    dst_index: usize,
    src: Global<'_, T>,
    src_index: usize,
) {
    let n = const {
        let size = core::mem::size_of::<T>();
        assert!(
            size != 0 && 16 % size == 0,
            "cp_async_16: the element size must divide 16"
        );
        16 / size
    };
    // A sub-slice of `src`, so in the same global buffer. (Saturating: an end
    // past usize::MAX is past the end of any buffer.)
    let from = src
        .as_slice()
        .get(src_index..src_index.saturating_add(n))
        .expect("cp_async_16: source range out of bounds");
    let to = dst.row_ptr(dst_index, n, true);
    assert!(
        (from.as_ptr() as usize).is_multiple_of(16) && (to as usize).is_multiple_of(16),
        "cp_async_16: both addresses must be 16-byte aligned"
    );
    // SAFETY: `to` is n·size_of::<T>() = 16 bytes of the block's shared memory
    // (a `SharedArray` is only ever carved out of it; `row_ptr` checked the
    // range); `from` is 16 bytes of the `Global` `src`, non-empty, so in the
    // global state space (`Global`'s invariant); both are 16-byte aligned
    // (checked above). The copy writes those shared bytes asynchronously: no
    // thread may touch them until this one has waited and a barrier orders
    // the others, which is the kernel's barrier discipline (see "Races" on
    // `SharedArray`; the emulator defers the copy to the wait and faults on any
    // access to the destination before it).
    unsafe { arch::cp_async_16(to.cast(), from.as_ptr().cast()) }
}

/// Proof, from one check, that a *panel* of a stored row-major matrix is
/// inside its [`Global`] buffer and that each of its 16-byte chunks is
/// 16-byte aligned: `steps` tiles of `ROWS × COLS` elements (`COLS` a
/// multiple of the 16-byte chunk), rows `ld` elements apart, tile `s`
/// starting `s·step` elements after tile 0, which starts at element `origin`
/// — the `A` or `B` slices a GEMM block copies at each of its k-steps.
///
/// Only [`InteriorPanel::check`] makes one (the fields are private), and
/// the copies with no check per chunk ([`PanelCopy`], from
/// [`InteriorPanel::thread_copy`]) come from it: the unchecked copy cannot
/// be reached without the check. A tile that is not proven takes the checked path
/// ([`cp_async_16`] per chunk, or plain loads at a ragged edge).
///
/// ```
/// # use warpforge_device::{Global, mma::InteriorPanel};
/// let data = [0u16; 256];
/// // SAFETY (doc example): host memory is the emulator's global memory.
/// let src = unsafe { Global::from_raw(data.as_ptr(), data.len()) };
/// let aligned = data.as_ptr() as usize % 16 == 0;
/// // 4 tiles of 2 × 8, rows 32 apart, 8 apart along the row: elements 0..64 (+ 24).
/// let panel = InteriorPanel::<u16, 2, 8>::check(src, 0, 32, 8, 4);
/// assert_eq!(panel.is_some(), aligned);
/// // One tile too many: past the buffer's end, whatever the alignment.
/// assert!(InteriorPanel::<u16, 2, 8>::check(src, 0, 32, 224, 2).is_none());
/// // A row stride of 12 halves (24 bytes) leaves the second row misaligned.
/// assert!(InteriorPanel::<u16, 2, 8>::check(src, 0, 12, 8, 1).is_none());
/// ```
#[derive(Clone, Copy)]
pub struct InteriorPanel<'a, T, const ROWS: usize, const COLS: usize> {
    src: Global<'a, T>,
    origin: usize,
    ld: usize,
    step: usize,
    steps: usize,
}

impl<'a, T: SharedElement, const ROWS: usize, const COLS: usize> InteriorPanel<'a, T, ROWS, COLS> {
    /// Elements of one 16-byte chunk; checks the shape at compile time.
    const CHUNK: usize = {
        let size = core::mem::size_of::<T>();
        assert!(
            size != 0 && 16 % size == 0,
            "InteriorPanel: the element size must divide 16"
        );
        assert!(
            ROWS > 0 && COLS > 0 && COLS.is_multiple_of(16 / size),
            "InteriorPanel: a tile of whole 16-byte chunks per row"
        );
        16 / size
    };

    /// The panel, if every element of its `steps` tiles is inside `src` and
    /// every 16-byte chunk of them is 16-byte aligned (the first chunk, `ld`
    /// and `step` in bytes multiples of 16, wherever they are used); `None`
    /// otherwise, or for no tiles. One check, whatever the panel's size.
    #[inline(always)]
    pub fn check(
        src: Global<'a, T>,
        origin: usize,
        ld: usize,
        step: usize,
        steps: usize,
    ) -> Option<Self> {
        let _ = Self::CHUNK;
        let size = core::mem::size_of::<T>();
        // The farthest element: the last tile's last row's end (every
        // offset is non-negative, so no element lies beyond it).
        let end = steps
            .checked_sub(1)?
            .checked_mul(step)?
            .checked_add((ROWS - 1).checked_mul(ld)?)?
            .checked_add(origin)?
            .checked_add(COLS)?;
        if end > src.len() {
            return None;
        }
        // In bounds, so `origin`, and `ld` and `step` where used, are at most
        // the buffer's length: their byte counts do not overflow.
        let first = (src.as_ptr() as usize).wrapping_add(origin * size);
        let aligned = first.is_multiple_of(16)
            && (ROWS == 1 || (ld * size).is_multiple_of(16))
            && (steps == 1 || (step * size).is_multiple_of(16));
        aligned.then_some(InteriorPanel {
            src,
            origin,
            ld,
            step,
            steps,
        })
    }

    /// The number of tiles.
    #[inline(always)]
    pub fn steps(&self) -> usize {
        self.steps
    }
}

/// Ends the current group of `cp.async` copies (`cp.async.commit_group`).
#[inline(always)]
pub fn cp_async_commit() {
    arch::cp_async_commit()
}

/// Waits for all of this thread's `cp.async` copies (`cp.async.wait_all`).
#[inline(always)]
pub fn cp_async_wait_all() {
    arch::cp_async_wait_all()
}

/// Waits until at most `pending` (0–7) of this thread's committed groups are
/// still in flight (`cp.async.wait_group`), for double buffering.
#[inline(always)]
pub fn cp_async_wait_group(pending: u32) {
    arch::cp_async_wait_group(pending)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::{LaunchShape, launch};
    use crate::{Dim3, shared, sync};
    use std::sync::Mutex;

    /// Both orders map the 32 lanes × 4 elements × sub-tiles of a 32 × 32
    /// warp tile one-to-one onto it: plain is `c_coord` shifted by the
    /// sub-tile; paired rows put row `g` (`g + 8`) of each 16 at `2g`
    /// (`2g + 1`). Only a k-major tf32 A pairs.
    #[test]
    fn mma_orders_are_bijections_of_the_warp_tile() {
        for rows_paired in [false, true] {
            let order = MmaOrder { rows_paired };
            let mut seen = [[0u32; 32]; 32];
            for lane in 0..32u32 {
                for (i, sr, sc) in (0..4)
                    .flat_map(|i| (0..2).flat_map(move |sr| (0..4).map(move |sc| (i, sr, sc))))
                {
                    let (r, c) = order.c_coord(lane, i, sr, sc);
                    let (r0, c0) = c_coord(lane, i);
                    let want = if rows_paired {
                        2 * (r0 % 8) + r0 / 8
                    } else {
                        r0
                    };
                    assert_eq!(
                        (r, c),
                        (16 * sr + want, 8 * sc + c0),
                        "{order:?} lane {lane} i {i}"
                    );
                    seen[r][c] += 1;
                }
            }
            assert!(seen.iter().flatten().all(|&n| n == 1), "{order:?}");
        }
        assert_eq!(MmaOrder::of::<f32>(true), MmaOrder { rows_paired: true });
        assert_eq!(MmaOrder::of::<f32>(false), MmaOrder::PLAIN);
        assert_eq!(MmaOrder::of::<f16>(true), MmaOrder::PLAIN);
    }

    /// One warp stores A (16 × K) row-major and k-major and B (K × 8)
    /// k-major and n-major in shared memory, with row strides past the row
    /// length, loads each with its `load*` and compares each lane's
    /// registers with `from_fn` on the same matrices (the layout tables),
    /// for f16, bf16 and f32 (tf32: the loads round as `from_fn` does, and
    /// every register has its low 13 bits clear).
    #[test]
    fn fragment_loads_match_the_layout_tables() {
        fn check<T: MmaInput + Copy + Send + Sync>(of: fn(f32) -> T) {
            // Values with bits below tf32's precision, so the rounding shows.
            let a = |r: usize, c: usize| of(((r * 16 + c) as f32 - 100.0) * 1.000_3);
            let b = |k: usize, n: usize| of(((k * 8 + n) as f32 + 300.0) * 1.000_7);
            let (sa, sb) = (24, 40);
            let (a_rows, b_kmaj, b_nmaj) = (
                T::K * sa,
                T::K * sa + M * sa,
                T::K * sa + M * sa + T::K * sb,
            );
            let len = b_nmaj + N * sb;
            let mismatches = Mutex::new(Vec::new());
            let shape = LaunchShape {
                grid: Dim3::x(1),
                block: Dim3::x(32),
                dynamic_shared_bytes: len * core::mem::size_of::<T>(),
            };
            launch("mma_fragment_loads", shape, &|| {
                let tile = shared::dynamic::<T>();
                if crate::thread::lane_id() == 0 {
                    for k in 0..T::K {
                        for m in 0..M {
                            tile.store(k * sa + m, a(m, k));
                            tile.store(a_rows + m * sa + k, a(m, k));
                        }
                        for n in 0..N {
                            tile.store(b_kmaj + k * sb + n, b(k, n));
                            tile.store(b_nmaj + n * sb + k, b(k, n));
                        }
                    }
                }
                sync::sync_threads();
                let (fa, fb) = (FragA::from_fn(a), FragB::from_fn(b));
                let loads_a = [
                    FragA::load_k_major(&tile, 0, sa),
                    FragA::load(&tile, a_rows, sa),
                ];
                let loads_b = [
                    FragB::load_k_major(&tile, b_kmaj, sb),
                    FragB::load_n_major(&tile, b_nmaj, sb),
                ];
                // The proven loads give the same registers.
                let src = FragmentSource::check(&tile).expect("the dynamic view is aligned");
                let from_a = [
                    FragA::load_k_major_from(&src, 0, sa),
                    FragA::load_from(&src, a_rows, sa),
                ];
                let from_b = [
                    FragB::load_k_major_from(&src, b_kmaj, sb),
                    FragB::load_n_major_from(&src, b_nmaj, sb),
                ];
                let rounded = T::KIND != MmaKind::Tf32
                    || fa.regs.iter().chain(&fb.regs).all(|r| r & 0x1fff == 0);
                if loads_a.iter().chain(&from_a).any(|l| l.regs != fa.regs)
                    || loads_b.iter().chain(&from_b).any(|l| l.regs != fb.regs)
                    || !rounded
                {
                    mismatches.lock().unwrap().push(crate::thread::lane_id());
                }
            })
            .unwrap();
            assert_eq!(*mismatches.lock().unwrap(), Vec::<u32>::new());
        }
        check(f16::from_f32);
        check(bf16::from_f32);
        check(|x| x);
    }

    /// A tf32 `mma` on the emulator against an f64 reference of the inputs
    /// rounded to tf32 (`round_tf32`, checked against a hand-computed tie and
    /// a value below half an ulp), with exact products and one rounding:
    /// inputs whose rounding matters, and C added.
    #[test]
    fn tf32_mma_multiplies_the_rounded_inputs() {
        assert_eq!(round_tf32(1.0 + 3.0 / 2048.0), 1.0 + 2.0 / 1024.0); // tie away
        assert_eq!(round_tf32(-1.0 - 1.0 / 2048.0), -1.0 - 1.0 / 1024.0);
        assert_eq!(round_tf32(1.0 + 1.0 / 2049.0), 1.0);
        assert!(round_tf32(f32::NAN).is_nan());
        assert_eq!(round_tf32(f32::INFINITY), f32::INFINITY);
        let a = |r: usize, k: usize| (r as f32 - 7.5) * (1.0 + (k as f32) / 3000.0);
        let b = |k: usize, n: usize| (n as f32 + 0.25) * (1.0 - (k as f32) / 5000.0);
        let c = |r: usize, n: usize| (r * 8 + n) as f32 / 7.0;
        let errors = Mutex::new(Vec::new());
        let shape = LaunchShape {
            grid: Dim3::x(1),
            block: Dim3::x(32),
            dynamic_shared_bytes: 0,
        };
        launch("mma_tf32", shape, &|| {
            let d = mma(
                FragA::<f32>::from_fn(a),
                FragB::<f32>::from_fn(b),
                FragC::from_fn(c),
            );
            d.for_each(|r, n, v| {
                let exact = (0..8)
                    .map(|k| f64::from(round_tf32(a(r, k))) * f64::from(round_tf32(b(k, n))))
                    .sum::<f64>()
                    + f64::from(c(r, n));
                if v != exact as f32 {
                    errors.lock().unwrap().push((r, n, v, exact));
                }
            });
        })
        .unwrap();
        assert_eq!(*errors.lock().unwrap(), Vec::new());
    }
}
