//! Warp-level tensor-core matrix multiply: `mma.sync.m16n8k16` (sm_80) with
//! f16 or bf16 inputs and f32 accumulation, `ldmatrix` to load its fragments
//! from shared memory, and `cp.async` to stage tiles from global memory into
//! shared memory without passing through registers.
//!
//! The 32 lanes of a warp together hold one A (16×16), B (16×8) and C (16×8)
//! tile; each lane holds a *fragment*: 8 elements of A, 4 of B, 4 of C, at
//! coordinates fixed by the PTX ISA (§9.7.14.5.8). [`a_coord`], [`b_coord`]
//! and [`c_coord`] are those tables as functions, so a kernel can load or
//! store fragments from any layout, and the emulator computes `mma` with the
//! same tables.
//!
//! Rounding: products of f16/bf16 are exact in f32. The GPU adds them in an
//! unspecified order with at least single precision; the emulator adds each
//! output's 16 products and its C element exactly (in f64) and rounds once,
//! so the two can differ in the last bits of each output (tests allow
//! 16 · 2⁻²⁴ · Σ|a·b| + |c|·2⁻²⁴).

use crate::arch;
use crate::global::Global;
use crate::shared::{SharedArray, SharedElement};
use core::marker::PhantomData;
use half::{bf16, f16};

/// Rows of A and C/D.
pub const M: usize = 16;
/// Columns of B and C/D.
pub const N: usize = 8;
/// Columns of A, rows of B.
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

/// (row, col) in C and D (16×8) of element `i` (0..4) of lane `lane`'s fragment.
#[inline(always)]
pub const fn c_coord(lane: u32, i: usize) -> (usize, usize) {
    let (group, thread) = ((lane >> 2) as usize, (lane % 4) as usize);
    (group + if i >= 2 { 8 } else { 0 }, thread * 2 + (i & 1))
}

mod sealed {
    pub trait Sealed {}
}

/// Input element types of `mma.sync.m16n8k16`: [`f16`](struct@crate::f16) and [`bf16`](struct@crate::bf16). Sealed.
pub trait MmaInput: SharedElement + sealed::Sealed {
    #[doc(hidden)]
    const KIND: MmaKind;
    #[doc(hidden)]
    fn bits(self) -> u16;
}

#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmaKind {
    F16,
    Bf16,
}

impl sealed::Sealed for f16 {}
impl sealed::Sealed for bf16 {}
impl MmaInput for f16 {
    const KIND: MmaKind = MmaKind::F16;
    #[inline(always)]
    fn bits(self) -> u16 {
        self.to_bits()
    }
}
impl MmaInput for bf16 {
    const KIND: MmaKind = MmaKind::Bf16;
    #[inline(always)]
    fn bits(self) -> u16 {
        self.to_bits()
    }
}

/// This lane's 8 elements of A: four registers of two halves each.
#[derive(Clone, Copy, Debug)]
pub struct FragA<T> {
    /// The registers, in the PTX operand order.
    pub regs: [u32; 4],
    _t: PhantomData<T>,
}

/// This lane's 4 elements of B: two registers of two halves each.
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

/// Packs halves `2r`, `2r + 1` of `elem` into register `r`.
#[inline(always)]
fn pack_regs<T: MmaInput, const R: usize>(elem: impl Fn(usize) -> T) -> [u32; R] {
    core::array::from_fn(|r| {
        u32::from(elem(2 * r).bits()) | u32::from(elem(2 * r + 1).bits()) << 16
    })
}

impl<T: MmaInput> FragA<T> {
    /// This lane's fragment of the A tile whose element (row, col) is `a(row, col)`.
    #[inline(always)]
    pub fn from_fn(a: impl Fn(usize, usize) -> T) -> Self {
        let lane = crate::thread::lane_id();
        FragA {
            regs: pack_regs(|i| {
                let (r, c) = a_coord(lane, i);
                a(r, c)
            }),
            _t: PhantomData,
        }
    }

    /// Loads the A tile stored row-major at `tile[base..]` with `row_stride`
    /// elements per row, by one `ldmatrix.x4`. Panics if a row is out of
    /// bounds or not 16-byte aligned.
    ///
    /// All 32 lanes of the warp must call it together: `ldmatrix` from part
    /// of a warp is undefined on the GPU. The types cannot check that (as
    /// with a barrier); the emulator reports it as a fault.
    #[inline(always)]
    pub fn load(tile: &SharedArray<T>, base: usize, row_stride: usize) -> Self {
        // Lane l supplies row l % 8 of 8×8 matrix l / 8; matrices 0–3 are the
        // quadrants (rows 0–7 | 8–15) × (cols 0–7 | 8–15), which are registers 0–3.
        let lane = crate::thread::lane_id() as usize;
        let (matrix, row) = (lane / 8, lane % 8);
        let start = base + (row + (matrix % 2) * 8) * row_stride + (matrix / 2) * 8;
        FragA {
            regs: ldmatrix::<T, 4>(tile, start, false),
            _t: PhantomData,
        }
    }

    /// Loads the A tile stored k-major (transposed: element (row, col) of A
    /// at `tile[base + col·row_stride + row]`, 16 rows of 16) by one
    /// `ldmatrix.x4.trans`. All 32 lanes of the warp must call it together,
    /// as [`FragA::load`].
    #[inline(always)]
    pub fn load_k_major(tile: &SharedArray<T>, base: usize, row_stride: usize) -> Self {
        // Register r is the 8×8 quadrant (rows 8·(r % 2) ..) × (cols 8·(r / 2) ..)
        // of A, stored as rows k = 8·(r / 2) .. of 8 elements at m = 8·(r % 2);
        // lane l supplies stored row l % 8 of quadrant l / 8, and .trans hands
        // each lane the transposed elements, A's (row, col) as `a_coord` says.
        let lane = crate::thread::lane_id() as usize;
        let (matrix, row) = (lane / 8, lane % 8);
        let start = base + (row + (matrix / 2) * 8) * row_stride + (matrix % 2) * 8;
        FragA {
            regs: ldmatrix::<T, 4>(tile, start, true),
            _t: PhantomData,
        }
    }
}

impl<T: MmaInput> FragB<T> {
    /// This lane's fragment of the B tile (k × n) whose element (k, n) is `b(k, n)`.
    #[inline(always)]
    pub fn from_fn(b: impl Fn(usize, usize) -> T) -> Self {
        let lane = crate::thread::lane_id();
        FragB {
            regs: pack_regs(|i| {
                let (k, n) = b_coord(lane, i);
                b(k, n)
            }),
            _t: PhantomData,
        }
    }

    /// Loads the B tile stored row-major as k × n (16 rows of 8) at
    /// `tile[base..]`, by one `ldmatrix.x2.trans`. All 32 lanes of the warp
    /// must call it together, as [`FragA::load`].
    #[inline(always)]
    pub fn load_k_major(tile: &SharedArray<T>, base: usize, row_stride: usize) -> Self {
        // Lanes 0–15 supply rows k = 0..16; .trans hands each lane the column n = lane / 4.
        let k = crate::thread::lane_id() as usize % 16;
        FragB {
            regs: ldmatrix::<T, 2>(tile, base + k * row_stride, true),
            _t: PhantomData,
        }
    }
}

impl<T: MmaInput> FragB<T> {
    /// Loads the B tile (k × n) stored n-major (transposed: element (k, n) at
    /// `tile[base + n·row_stride + k]`, 8 rows of 16) by one `ldmatrix.x2`.
    /// All 32 lanes of the warp must call it together, as [`FragA::load`].
    #[inline(always)]
    pub fn load_n_major(tile: &SharedArray<T>, base: usize, row_stride: usize) -> Self {
        // Register r is k = 8·r .. 8·r + 8: lanes 8·r .. supply stored rows
        // n = 0..8 at column 8·r; without .trans lane l receives row n = l / 4,
        // elements k = 2·(l % 4), +1, which is `b_coord`.
        let lane = crate::thread::lane_id() as usize % 16;
        let (matrix, n) = (lane / 8, lane % 8);
        FragB {
            regs: ldmatrix::<T, 2>(tile, base + n * row_stride + matrix * 8, false),
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

/// `D = A·B + C` for the warp's 16×16 A, 16×8 B and 16×8 C tiles
/// (`mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32`).
/// All 32 lanes of the warp must call it together: `mma.sync` from part of
/// a warp is undefined on the GPU (the emulator reports it as a fault).
#[inline(always)]
pub fn mma<T: MmaInput>(a: FragA<T>, b: FragB<T>, c: FragC) -> FragC {
    FragC {
        regs: arch::mma_m16n8k16(T::KIND, a.regs, b.regs, c.regs),
    }
}

/// `ldmatrix.sync.aligned.m8n8.xR{.trans}.shared.b16`: this lane supplies the
/// row of 8 elements at `tile[row_start..]`; returns its R registers.
#[inline(always)]
fn ldmatrix<T: MmaInput, const R: usize>(
    tile: &SharedArray<T>,
    row_start: usize,
    trans: bool,
) -> [u32; R] {
    let lanes_supplying = 8 * R;
    let supplies = (crate::thread::lane_id() as usize) < lanes_supplying;
    let ptr = if supplies {
        tile.row_ptr(row_start, 8, false)
    } else {
        tile.row_ptr(0, 0, false)
    };
    assert!(
        (ptr as usize).is_multiple_of(16),
        "ldmatrix row is not 16-byte aligned: start rows at multiples of 8 elements"
    );
    // SAFETY: in a supplying lane `ptr` is the row `row_start .. row_start + 8`
    // of a `SharedArray` (the block's shared memory), checked in bounds by
    // `row_ptr`: 8 halves = 16 bytes, 16-byte aligned (checked above). Other
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

    /// One warp stores A (16×16) k-major and B (16×8) n-major in shared
    /// memory, with row strides past the row length, loads them with
    /// `load_k_major` / `load_n_major`, and compares each lane's registers
    /// with `from_fn` on the same matrices (the layout tables).
    #[test]
    fn transposed_loads_match_the_layout_tables() {
        fn check<T: MmaInput + Copy + Send + Sync>(of: fn(f32) -> T) {
            let a = |r: usize, c: usize| of((r * 16 + c) as f32 - 100.0);
            let b = |k: usize, n: usize| of((k * 8 + n) as f32 + 300.0);
            // Rows of 24 (A, indexed by k) and of 40 (B, indexed by n).
            let (sa, sb, b_base) = (24, 40, 16 * 24);
            let mismatches = Mutex::new(Vec::new());
            let shape = LaunchShape {
                grid: Dim3::x(1),
                block: Dim3::x(32),
                dynamic_shared_bytes: (b_base + 8 * sb) * 2,
            };
            launch("mma_transposed_loads", shape, &|| {
                let tile = shared::dynamic::<T>();
                if crate::thread::lane_id() == 0 {
                    for k in 0..16 {
                        for m in 0..16 {
                            tile.store(k * sa + m, a(m, k));
                        }
                        for n in 0..8 {
                            tile.store(b_base + n * sb + k, b(k, n));
                        }
                    }
                }
                sync::sync_threads();
                let (la, fa) = (FragA::load_k_major(&tile, 0, sa), FragA::from_fn(a));
                let (lb, fb) = (FragB::load_n_major(&tile, b_base, sb), FragB::from_fn(b));
                if la.regs != fa.regs || lb.regs != fb.regs {
                    mismatches.lock().unwrap().push(crate::thread::lane_id());
                }
            })
            .unwrap();
            assert_eq!(*mismatches.lock().unwrap(), Vec::<u32>::new());
        }
        check(f16::from_f32);
        check(bf16::from_f32);
    }
}
