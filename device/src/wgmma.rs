//! Warpgroup matrix multiply-accumulate (`wgmma.mma_async`, sm_90a): the
//! Hopper tensor-core instruction that a whole *warpgroup* (4 consecutive
//! warps, the first a multiple of 4) issues together, reading its operands
//! straight from shared memory and accumulating a 64 × N tile in registers,
//! asynchronously.
//!
//! One step, `D (64 × N, f32) += A (64 × 16) · B (16 × N)`, f16 or bf16
//! inputs, N ∈ {64, 128, 256}:
//!
//! ```text
//! let a = OperandTile::<bf16, 64, 64, KMajor<Sw128>>::new(a_tile)?;   // once per tile
//! let b = OperandTile::<bf16, 128, 64, KMajor<Sw128>>::new(b_tile)?;
//! let mut acc = Accumulator::<128>::zero();
//! {
//!     let mut run = acc.start();                 // wgmma.fence
//!     run.mma(a.descriptor::<0>(), b.descriptor::<0>());
//!     run.mma(a.descriptor::<1>(), b.descriptor::<1>());   // k 16..32
//!     run.commit();                              // wgmma.commit_group
//!     run.wait::<0>();                           // the operands may be refilled
//!     run.finish();                              // commit + wait_group 0 (as a drop does)
//! }
//! let (row, col) = Accumulator::<128>::coord(thread_in_warpgroup, i);
//! ```
//!
//! What the types guarantee:
//! - A descriptor is made only by an [`OperandTile`], whose type carries the
//!   element, the extents and the layout (K- or MN-major, which swizzle), and
//!   whose start was checked once to lie on the swizzle's period: a
//!   descriptor whose strides or swizzle disagree with the tile's layout
//!   cannot be built, and its k-step is checked at compile time.
//! - B's N is the accumulator's: `mma` takes a `Descriptor<T, _, N>` for an
//!   `Accumulator<N>`, and A's extent is 64.
//! - The accumulator is in flight from [`Accumulator::start`] until the
//!   [`InFlight`] it returns is dropped, which commits and waits for every
//!   group (`wait_group 0`): reading or writing the registers while a
//!   `wgmma` may still write them (undefined on the GPU) is a borrow error.
//!
//! What only the kernel upholds, and the emulator checks, naming the
//! threads: that every warp of the warpgroup issues the same sequence of
//! `mma` (a warp that skips one, or issues it with other operands, is
//! `Fault::Wgmma`); that the operands are not written between an `mma` and
//! the [`InFlight::wait`] that covers it (a changed byte is `Fault::Wgmma`,
//! a refill ordered only by an arrive before that wait a race); that the
//! operands' producers are done before the `mma` reads them (a bulk copy
//! not landed, or an unordered store, is reported at the issue).
//!
//! On the GPU: `wgmma.fence`, `wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}`
//! with both operands through descriptors, `wgmma.commit_group`,
//! `wgmma.wait_group` (PTX 8.0, sm_90a only: kernels that use them belong
//! to the sm_90a module). The accumulator registers are operands of the
//! final `wait_group`, so the compiler keeps them in place until then.
//! Facts and sources: docs/hopper/ptx-semantics.md §3.

use crate::arch;
use crate::shared::{SharedArray, SharedElement, SharedTile};
use crate::swizzle::{Pattern, Swizzle};
use crate::unroll::{unroll, unroll_upto};
use core::marker::PhantomData;

/// Threads in a warpgroup.
pub const WARPGROUP_SIZE: u32 = 128;

/// Rows of A (and of the accumulator) per instruction.
pub const M: usize = 64;

/// k per instruction for the 2-byte types (f16/bf16); [`Element::K`] in
/// general.
pub const K: usize = 16;

/// Bytes of K per instruction, whatever the element: 16 f16/bf16 or 8 tf32.
pub const K_BYTES: usize = 32;

mod sealed {
    pub trait Element {}
    pub trait Layout {}
    /// The accumulator widths, with the per-width instruction (the GPU's
    /// register list is spelled out per width).
    pub trait Width {
        type Regs: Copy;
        const ZERO: Self::Regs;
        fn regs(r: &Self::Regs) -> &[f32];
        fn regs_mut(r: &mut Self::Regs) -> &mut [f32];
        fn mma(d: &mut Self::Regs, a: u64, b: u64, input: super::Input, tnsp_a: bool, tnsp_b: bool);
        fn mma_ra(d: &mut Self::Regs, a: [u32; 4], b: u64, input: super::Input, tnsp_b: bool);
        fn commit_wait_all(d: &mut Self::Regs);
    }
}

/// The instruction's input type (its `.atype`/`.btype`).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    F16,
    Bf16,
    /// f32 in shared memory, read as tf32 (the low 13 fraction bits ignored).
    Tf32,
}

/// The input types of `wgmma` with f32 accumulation: [`f16`](half::f16),
/// [`bf16`](half::bf16), and `f32` read as tf32 (K-major operands only).
pub trait Element: SharedElement + sealed::Element {
    /// What the instruction reads the element as.
    #[doc(hidden)]
    const INPUT: Input;
    /// k per instruction: [`K_BYTES`] of the element (16 for f16/bf16, 8
    /// for tf32).
    const K: usize = K_BYTES / size_of::<Self>();
}

impl sealed::Element for half::f16 {}
impl Element for half::f16 {
    const INPUT: Input = Input::F16;
}
impl sealed::Element for half::bf16 {}
impl Element for half::bf16 {
    const INPUT: Input = Input::Bf16;
}
impl sealed::Element for f32 {}
impl Element for f32 {
    const INPUT: Input = Input::Tf32;
}

/// How an operand tile of `MN` rows (M of A, N of B) by `K` columns lies in
/// shared memory: [`KMajor`] or [`MnMajor`], each with a swizzle. Both are
/// the layouts TMA writes: boxes whose inner extent is the swizzle's span,
/// one after another.
pub trait Layout: sealed::Layout + Copy + 'static {
    /// The swizzle the descriptor names.
    const SWIZZLE: Swizzle;
    /// Whether MN is the contiguous dimension (the instruction's
    /// `imm-tnsp` = 1); else K is.
    const MN_MAJOR: bool;
    /// Whether an `mn × k` tile of `size`-byte elements fits the layout.
    #[doc(hidden)]
    fn fits(mn: usize, k: usize, size: usize) -> bool;
    /// Byte offset of element `(mn, k)` (of `size` bytes) before the swizzle.
    #[doc(hidden)]
    fn dense_offset(mn: usize, k: usize, mn_extent: usize, k_extent: usize, size: usize) -> usize;
    /// A descriptor's fields for k-step `step` (bytes `32·step ..` of K)
    /// of a tile of `size`-byte elements: the start offset from the tile,
    /// the leading and the stride byte offsets.
    #[doc(hidden)]
    fn descriptor_fields(
        step: usize,
        mn_extent: usize,
        k_extent: usize,
        size: usize,
    ) -> (usize, usize, usize);
}

/// K contiguous: row `mn` of the tile is K's elements, in blocks of the
/// swizzle's span (a TMA box of `span` bytes × MN rows per block). The
/// layout of `A` for a row-major A and of `B` for a column-major B (the
/// instruction's "no transpose").
#[derive(Clone, Copy, Debug)]
pub struct KMajor<S: Pattern>(PhantomData<S>);

/// MN contiguous: each k is a row of MN's elements, in blocks of the
/// swizzle's span (the instruction's transpose, `imm-tnsp` = 1).
#[derive(Clone, Copy, Debug)]
pub struct MnMajor<S: Pattern>(PhantomData<S>);

impl<S: Pattern> sealed::Layout for KMajor<S> {}
impl<S: Pattern> Layout for KMajor<S> {
    const SWIZZLE: Swizzle = S::SWIZZLE;
    const MN_MAJOR: bool = false;
    fn fits(mn: usize, k: usize, size: usize) -> bool {
        mn.is_multiple_of(8) && (size * k).is_multiple_of(S::SPAN)
    }
    #[inline(always)]
    fn dense_offset(mn: usize, k: usize, mn_extent: usize, _: usize, size: usize) -> usize {
        let (block, within) = (size * k / S::SPAN, size * k % S::SPAN);
        block * mn_extent * S::SPAN + mn * S::SPAN + within
    }
    #[inline(always)]
    fn descriptor_fields(
        step: usize,
        mn_extent: usize,
        k_extent: usize,
        size: usize,
    ) -> (usize, usize, usize) {
        // Rows are `SPAN` bytes apart, 8-row groups 8 rows apart; the
        // leading offset is unused by swizzled K-major layouts (16: "1").
        (
            Self::dense_offset(0, K_BYTES / size * step, mn_extent, k_extent, size),
            16,
            8 * S::SPAN,
        )
    }
}

impl<S: Pattern> sealed::Layout for MnMajor<S> {}
impl<S: Pattern> Layout for MnMajor<S> {
    const SWIZZLE: Swizzle = S::SWIZZLE;
    const MN_MAJOR: bool = true;
    fn fits(mn: usize, k: usize, size: usize) -> bool {
        (size * mn).is_multiple_of(S::SPAN) && k.is_multiple_of(8)
    }
    #[inline(always)]
    fn dense_offset(mn: usize, k: usize, _: usize, k_extent: usize, size: usize) -> usize {
        let (block, within) = (size * mn / S::SPAN, size * mn % S::SPAN);
        block * k_extent * S::SPAN + k * S::SPAN + within
    }
    #[inline(always)]
    fn descriptor_fields(
        step: usize,
        mn_extent: usize,
        k_extent: usize,
        size: usize,
    ) -> (usize, usize, usize) {
        // Leading: from one span of MN to the next (the next box); stride:
        // from 8 k-rows to the next 8.
        (
            Self::dense_offset(0, K_BYTES / size * step, mn_extent, k_extent, size),
            k_extent * S::SPAN,
            8 * S::SPAN,
        )
    }
}

/// A `wgmma` operand in shared memory: `MN × K` elements of `T` (A: M = 64
/// rows; B: N rows of its transpose) in layout `L`, starting on the
/// swizzle's period (checked once, by [`OperandTile::new`]).
#[derive(Clone, Copy)]
pub struct OperandTile<T, const MN: usize, const KX: usize, L> {
    array: SharedArray<T>,
    /// Its start in the shared window (the descriptor's address).
    window: u32,
    _layout: PhantomData<L>,
}

impl<T: Element, const MN: usize, const KX: usize, L: Layout> OperandTile<T, MN, KX, L> {
    /// The tile's bytes: what a phase expects when the TMA fills it
    /// ([`TensorMap::load_operand`](crate::tma::TensorMap::load_operand)).
    pub const BYTES: u32 = (MN * KX * size_of::<T>()) as u32;

    /// The shared address of element `element` of the tile's storage (a
    /// box's destination).
    #[inline(always)]
    pub(crate) fn block_addr(&self, element: usize) -> arch::SharedAddr {
        arch::shared_addr(self.array.addr(element) as *const u8)
    }

    /// `tile` as an operand, if it starts on a multiple of the swizzle's
    /// period (1024 bytes for [`Sw128`](crate::swizzle::Sw128)), which the
    /// swizzle is keyed to; `None` otherwise. The tile is `MN · KX`
    /// elements of `T` (`LEN` of them, or as many bytes of another element
    /// type `U`: a ring of stages sized in bytes serves every element
    /// size), the extents must fit the layout (MN a multiple of 8, KX of
    /// the instruction's k, the contiguous extent whole spans), and a tf32
    /// tile K-major: compile-time errors otherwise.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn new<U: SharedElement, const LEN: usize>(tile: SharedTile<U, LEN>) -> Option<Self> {
        const {
            assert!(
                LEN * size_of::<U>() == MN * KX * size_of::<T>(),
                "the tile must hold MN x K elements"
            );
            assert!(
                MN > 0 && MN.is_multiple_of(8) && KX > 0 && KX.is_multiple_of(T::K),
                "an operand tile is a multiple of 8 rows by a multiple of 32 bytes of K"
            );
            assert!(
                !matches!(T::INPUT, Input::Tf32) || !L::MN_MAJOR,
                "tf32 operands are K-major (wgmma transposes only 16-bit types)"
            );
        };
        assert!(
            L::fits(MN, KX, size_of::<T>()),
            "OperandTile: the contiguous extent must be whole swizzle spans"
        );
        let window = arch::shared_window_offset(tile.addr(0) as *const u8);
        (window as usize)
            .is_multiple_of(L::SWIZZLE.period())
            .then_some(OperandTile {
                // The same bytes as `MN · KX` of `T` (const-checked), on a
                // 1024-byte boundary (so aligned for `T`).
                array: tile.reinterpret::<T>(),
                window,
                _layout: PhantomData,
            })
    }

    /// The element index of `(mn, k)`, swizzled. Panics outside the tile.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    fn index(mn: usize, k: usize) -> usize {
        assert!(mn < MN && k < KX, "OperandTile: (mn, k) outside the tile");
        L::SWIZZLE.apply(L::dense_offset(mn, k, MN, KX, size_of::<T>())) / size_of::<T>()
    }

    /// Stores element `(mn, k)` (row `mn` of A, or of Bᵀ). Panics outside the tile.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn store(&self, mn: usize, k: usize, value: T) {
        self.array.store(Self::index(mn, k), value);
    }

    /// Loads element `(mn, k)`. Panics outside the tile.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load(&self, mn: usize, k: usize) -> T {
        self.array.load(Self::index(mn, k))
    }

    /// The descriptor of k-step `STEP` (columns `k·STEP .. k·STEP + k`,
    /// `k` = [`Element::K`]); `STEP < KX / k` is checked at compile time.
    #[inline(always)]
    pub fn descriptor<const STEP: usize>(&self) -> Descriptor<T, L, MN> {
        const { assert!(STEP < KX / T::K, "the k-step is outside the tile") };
        let (start, leading, stride) = L::descriptor_fields(STEP, MN, KX, size_of::<T>());
        Descriptor {
            bits: encode(self.window as usize + start, leading, stride, L::SWIZZLE),
            _operand: PhantomData,
        }
    }
}

impl<T: Element, const MN: usize, const KX: usize, S: Pattern> OperandTile<T, MN, KX, KMajor<S>> {
    /// Starts filling 16-byte chunk `chunk` of row `mn` (its K elements
    /// `8·chunk ..` for 2-byte elements, `4·chunk ..` for 4-byte ones: one
    /// chunk, which the swizzle moves
    /// whole) by `cp.async` from chunk `src_chunk` of `src` if `wanted`,
    /// else with zeros, reading nothing (`cp.async`'s zero fill): a
    /// producer's gather of an A tile that no TMA box describes (the
    /// implicit-GEMM convolution's im2col rows). The row and chunk are taken
    /// modulo the tile's, so no check can fail (a producer's loop keeps no
    /// trap path). A wanted chunk outside `src` is a bug in the kernel:
    /// zeros on the GPU, a fault on the emulator.
    ///
    /// The copy lands at this thread's `cp.async` wait
    /// ([`cp_async_wait_group`](crate::mma::cp_async_wait_group)); `wgmma`
    /// reads the tile through the async proxy, so the thread then fences
    /// ([`fence_operands`]) before it publishes the tile (an mbarrier
    /// arrive): the emulator reports a `wgmma` that reads the chunk
    /// otherwise (`WgmmaProblem::UnfencedOperand`), or before it landed
    /// (`Fault::CpAsyncPending`).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn copy_chunk_or_zero(
        &self,
        mn: usize,
        chunk: usize,
        src: &crate::mma::AlignedChunks<'_, T>,
        src_chunk: u32,
        wanted: bool,
    ) {
        // Elements a chunk: 8 of 2 bytes, 4 of 4.
        let per = 16 / size_of::<T>();
        let (mn, k) = (mn % MN, (per * chunk) % KX);
        let at = S::SWIZZLE.apply(<KMajor<S> as Layout>::dense_offset(
            mn,
            k,
            MN,
            KX,
            size_of::<T>(),
        )) / size_of::<T>();
        #[cfg(not(target_arch = "nvptx64"))]
        // SAFETY: at + per ≤ MN·KX (a whole chunk of a row of the tile:
        // `KX` is whole swizzle spans, `k` a multiple of `per`), the tile's
        // elements.
        let _ = unsafe { self.array.row_ptr_proven(at, per, true) };
        let to = self.block_addr(at);
        let (from, ok) = src.chunk_source(src_chunk, wanted);
        // SAFETY: destination: 16 bytes of the tile (above), 16-byte aligned
        // (the tile starts on the swizzle's period, rows are spans apart, a
        // chunk starts 16·chunk bytes into its swizzled span). Source: unless
        // zero-filling (which reads nothing), chunk `src_chunk` of `src`,
        // inside it (`chunk_source`), 16-byte aligned, in the global state
        // space. The shared bytes are written asynchronously, under the
        // kernel's barrier discipline, as `mma::cp_async_16`'s.
        unsafe { arch::cp_async_16_zfill_at(to, from, !ok, true) };
    }
}

/// A shared-memory matrix descriptor (64 bits, PTX ISA "matrix descriptor
/// format"): one k16 slice of an [`OperandTile`] with `MN` rows.
#[derive(Clone, Copy, Debug)]
pub struct Descriptor<T, L, const MN: usize> {
    bits: u64,
    _operand: PhantomData<(T, L)>,
}

impl<T, L, const MN: usize> Descriptor<T, L, MN> {
    /// The 64 bits the instruction reads.
    pub fn bits(&self) -> u64 {
        self.bits
    }
}

/// A descriptor's bits: the start address (bits 0–13), leading (16–29) and
/// stride (32–45) byte offsets, each in 16-byte units; base offset 0 (the
/// tile starts on its period); the swizzle (62–63).
pub const fn encode(start: usize, leading: usize, stride: usize, swizzle: Swizzle) -> u64 {
    const fn field(bytes: usize) -> u64 {
        ((bytes & 0x3_ffff) >> 4) as u64
    }
    field(start) | field(leading) << 16 | field(stride) << 32 | swizzle.descriptor_code() << 62
}

/// An accumulator width: `N` ∈ {64, 128, 256} (`N / 2` registers a thread).
pub struct Width<const N: usize>;

/// The widths [`Accumulator`] is defined for.
pub trait AccumulatorWidth: sealed::Width {}

macro_rules! width {
    ($($n:literal => $regs:literal),*) => { $(
        impl AccumulatorWidth for Width<$n> {}
        impl sealed::Width for Width<$n> {
            type Regs = [f32; $regs];
            const ZERO: [f32; $regs] = [0.0; $regs];
            #[inline(always)]
            fn regs(r: &Self::Regs) -> &[f32] {
                r
            }
            #[inline(always)]
            fn regs_mut(r: &mut Self::Regs) -> &mut [f32] {
                r
            }
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            fn mma(d: &mut Self::Regs, a: u64, b: u64, input: Input, tnsp_a: bool, tnsp_b: bool) {
                arch::wgmma_mma_async(d, a, b, input, tnsp_a, tnsp_b)
            }
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            fn mma_ra(d: &mut Self::Regs, a: [u32; 4], b: u64, input: Input, tnsp_b: bool) {
                arch::wgmma_mma_async_ra(d, a, b, input, tnsp_b)
            }
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            fn commit_wait_all(d: &mut Self::Regs) {
                arch::wgmma_commit_wait_all(d)
            }
        }
    )* };
}
width!(64 => 32, 128 => 64, 256 => 128);

/// A warpgroup's 64 × `N` f32 accumulator: `N / 2` registers in each of its
/// 128 threads, element `i` of thread `t` at [`Accumulator::coord`]`(t, i)`.
pub struct Accumulator<const N: usize>
where
    Width<N>: AccumulatorWidth,
{
    regs: <Width<N> as sealed::Width>::Regs,
}

impl<const N: usize> Accumulator<N>
where
    Width<N>: AccumulatorWidth,
{
    /// Registers per thread.
    pub const REGS: usize = N / 2;

    /// All zeros.
    #[inline(always)]
    pub fn zero() -> Self {
        Accumulator {
            regs: <Width<N> as sealed::Width>::ZERO,
        }
    }

    /// The accumulator whose element at (row, column) is `f(row, column)`,
    /// for the warpgroup's thread `thread` (e.g. β·C before accumulating);
    /// written out, every index a constant (see [`for_each`](Self::for_each)).
    #[inline(always)]
    pub fn from_fn(thread: u32, mut f: impl FnMut(usize, usize) -> f32) -> Self {
        let mut acc = Self::zero();
        let regs = <Width<N> as sealed::Width>::regs_mut(&mut acc.regs);
        each_register::<N>(|i| {
            let (row, col) = Self::coord(thread, i);
            regs[i] = f(row, col);
        });
        acc
    }

    /// Calls `f(i, row, column, value)` for each of this thread's registers,
    /// in order, written out (every index a constant): the way to read the
    /// accumulator in a GPU kernel. A loop over [`regs`](Self::regs) with a
    /// run-time index would make the compiler keep the registers in local
    /// memory, and ptxas then waits for every `wgmma` before each use.
    #[inline(always)]
    pub fn for_each(&self, thread: u32, mut f: impl FnMut(usize, usize, usize, f32)) {
        let regs = <Width<N> as sealed::Width>::regs(&self.regs);
        each_register::<N>(|i| {
            let (row, col) = Self::coord(thread, i);
            f(i, row, col, regs[i]);
        });
    }

    /// This thread's registers.
    #[inline(always)]
    pub fn regs(&self) -> &[f32] {
        <Width<N> as sealed::Width>::regs(&self.regs)
    }

    /// This thread's registers, to set (e.g. to β·C before accumulating).
    #[inline(always)]
    pub fn regs_mut(&mut self) -> &mut [f32] {
        <Width<N> as sealed::Width>::regs_mut(&mut self.regs)
    }

    /// The (row, column) of the 64 × N tile that register `i` of the
    /// warpgroup's thread `thread` (0..128) holds: warp `w` has rows
    /// `16w .. 16w + 16`, and each group of 4 registers is the `mma.sync`
    /// m16n8 C fragment of columns `8·(i/4) ..` (PTX ISA, "wgmma register
    /// fragments"; docs/hopper §3.5).
    pub const fn coord(thread: u32, i: usize) -> (usize, usize) {
        let (warp, lane) = ((thread / 32) as usize % 4, (thread % 32) as usize);
        (
            16 * warp + lane / 4 + 8 * ((i >> 1) & 1),
            8 * (i >> 2) + 2 * (lane & 3) + (i & 1),
        )
    }

    /// Puts the accumulator in flight (`wgmma.fence`: the registers' values
    /// so far are what the first `mma` reads). Every thread of the
    /// warpgroup calls it, and the same `mma`s on the result.
    #[inline(always)]
    pub fn start(&mut self) -> InFlight<'_, N> {
        arch::wgmma_fence();
        InFlight { acc: self }
    }
}

/// `f(0)` … `f(N/2 − 1)`, written out on the GPU (`N / 2` = 16 · {2, 4, 8}).
#[inline(always)]
fn each_register<const N: usize>(mut f: impl FnMut(usize)) {
    unroll_upto::<8>(N / 32, |hi| {
        unroll::<8>(|mid| unroll::<2>(|lo| f(16 * hi + 2 * mid + lo)))
    });
}

/// An accumulator in flight: `mma`s accumulate into it asynchronously. Its
/// registers come back when this is dropped, which commits the last group
/// and waits for every group (`wait_group 0`).
pub struct InFlight<'a, const N: usize>
where
    Width<N>: AccumulatorWidth,
{
    acc: &'a mut Accumulator<N>,
}

impl<const N: usize> InFlight<'_, N>
where
    Width<N>: AccumulatorWidth,
{
    /// `D += A · B` for one k16 slice: A's 64 rows, B's `N` (both from
    /// shared memory, same element type). Issued, not finished: the
    /// operands must stay unchanged until a [`wait`](Self::wait) covers it.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn mma<T: Element, LA: Layout, LB: Layout>(
        &mut self,
        a: Descriptor<T, LA, M>,
        b: Descriptor<T, LB, N>,
    ) {
        <Width<N> as sealed::Width>::mma(
            &mut self.acc.regs,
            a.bits,
            b.bits,
            T::INPUT,
            LA::MN_MAJOR,
            LB::MN_MAJOR,
        );
    }

    /// [`mma`](Self::mma) with A in registers: `a` is this lane's fragment
    /// of its warp's 16 rows of the k16 slice (warp `w` of the warpgroup
    /// holds rows `16w .. 16w + 16`, in the `mma.m16n8k16` A layout of
    /// [`FragA`](crate::mma::FragA): loaded by `ldmatrix`, or from any
    /// function). A is K-major here (the instruction transposes only
    /// descriptor operands).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn mma_a_registers<T: Element + crate::mma::MmaInput, LB: Layout>(
        &mut self,
        a: crate::mma::FragA<T>,
        b: Descriptor<T, LB, N>,
    ) {
        const {
            assert!(
                size_of::<T>() == 2,
                "A from registers: f16 or bf16 (the mma.m16n8k16 A fragment)"
            )
        };
        <Width<N> as sealed::Width>::mma_ra(
            &mut self.acc.regs,
            a.regs,
            b.bits,
            T::INPUT,
            LB::MN_MAJOR,
        );
    }

    /// Closes the group of `mma`s issued since the last commit
    /// (`wgmma.commit_group`).
    #[inline(always)]
    pub fn commit(&mut self) {
        arch::wgmma_commit();
    }

    /// Waits until at most `PENDING` of the newest committed groups are
    /// still running (`wgmma.wait_group`): the older groups' operands may
    /// then be refilled. `PENDING ≤ 7` (compile-time).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn wait<const PENDING: u32>(&mut self) {
        const { assert!(PENDING <= 7, "wait_group takes 0 ..= 7") };
        arch::wgmma_wait::<PENDING>();
    }
}

impl<const N: usize> InFlight<'_, N>
where
    Width<N>: AccumulatorWidth,
{
    /// Commits the last group and waits for every group: the registers are
    /// the accumulator's again. What dropping it does; calling it names
    /// this line in the emulator's reports about the final wait.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn finish(self) {
        let mut this = core::mem::ManuallyDrop::new(self);
        <Width<N> as sealed::Width>::commit_wait_all(&mut this.acc.regs);
    }
}

impl<const N: usize> Drop for InFlight<'_, N>
where
    Width<N>: AccumulatorWidth,
{
    #[inline(always)]
    fn drop(&mut self) {
        <Width<N> as sealed::Width>::commit_wait_all(&mut self.acc.regs);
    }
}

/// Raises this warp's per-thread register limit to `REGS`
/// (`setmaxnreg.inc`, sm_90a): what a warp-specialised kernel's consumer
/// warpgroups do with the registers its producer gave back. Every warp of the
/// warpgroup calls it together; it waits until the block's pool can supply
/// them — and the pool holds only what the block's [`release_registers`]
/// gave back, so over all warps, threads × final limit must be at most the
/// block's registers at launch (its threads × the kernel's register count,
/// which is at most `65536 / threads` in steps of 8: 168 for 384 threads).
/// More waits for ever; the emulator reports it
/// (`WgmmaProblem::RegisterPoolShort`). `REGS` in 24 ..= 256, a multiple of
/// 8, at least the current limit (compile-time checks for the first two).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn increase_registers<const REGS: u32>() {
    const {
        assert!(
            REGS >= 24 && REGS <= 256 && REGS.is_multiple_of(8),
            "setmaxnreg: 24 ..= 256, a multiple of 8"
        )
    };
    arch::setmaxnreg::<true, REGS>();
}

/// Lowers this warp's per-thread register limit to `REGS` (`setmaxnreg.dec`,
/// sm_90a), returning the rest to the block's pool: a producer warpgroup's
/// first act. As [`increase_registers`], `REGS` at most the current limit.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn release_registers<const REGS: u32>() {
    const {
        assert!(
            REGS >= 24 && REGS <= 256 && REGS.is_multiple_of(8),
            "setmaxnreg: 24 ..= 256, a multiple of 8"
        )
    };
    arch::setmaxnreg::<false, REGS>();
}

/// Makes this thread's plain stores to shared memory visible to `wgmma`'s
/// operand reads (`fence.proxy.async.shared::cta`: the instruction reads
/// through the async proxy). Call it after storing an operand tile with
/// [`OperandTile::store`] and before the block barrier that publishes it;
/// tiles that TMA fills need none. The emulator reports a `wgmma` that
/// reads a byte whose writer stored it and did not fence since
/// (`WgmmaProblem::UnfencedOperand`, naming the writer and its store).
#[inline(always)]
pub fn fence_operands() {
    arch::fence_proxy_async_shared();
}

/// This thread's index in its warpgroup (0..128), for [`Accumulator::coord`].
#[inline(always)]
pub fn thread_in_warpgroup() -> u32 {
    crate::thread::linear_thread_id() % WARPGROUP_SIZE
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::{EmuError, Fault, LaunchShape, WgmmaProblem, launch};
    use crate::swizzle::{Sw32, Sw64, Sw128};
    use crate::{Dim3, shared, sync::sync_threads, thread};
    use half::{bf16, f16};
    use std::sync::Mutex;

    /// K of the test tiles: 4 k-steps.
    const KX: usize = 64;

    /// How a test launch misbehaves, if it does.
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Misstep {
        None,
        /// Warp 3 issues none of the `mma`s.
        WarpSkips,
        /// Warp 1 issues its second `mma` with B's first k-step.
        WarpDisagrees,
        /// Lane 5 of warp 0 issues A's second k-step where the others issue the first.
        LaneDisagrees,
        /// Thread 0 stores into B between the last `mma` and the wait.
        StoreBeforeWait,
        /// Thread 0 stores into the chunk of A that is its own share of the
        /// third `mma`'s reads, before the wait.
        StoreOwnShareBeforeWait,
        /// Thread 0 stores into B after every warp's wait and a block
        /// barrier (the correct twin).
        StoreAfterWait,
        /// Thread 70 stores its share of the operands but skips
        /// `fence_operands` before the barrier.
        NoFence,
    }

    /// A test element: from an integer-valued f64.
    trait Value: Element {
        /// K of the test tiles: 4 k-steps.
        const KX: usize = 4 * Self::K;
        fn of(x: f64) -> Self;
    }
    impl Value for f16 {
        fn of(x: f64) -> Self {
            f16::from_f64(x)
        }
    }
    impl Value for bf16 {
        fn of(x: f64) -> Self {
            bf16::from_f64(x)
        }
    }
    /// tf32: the integer with its 12 low fraction bits set, which the
    /// instruction ignores (so the product is exact only if they are).
    impl Value for f32 {
        fn of(x: f64) -> Self {
            f32::from_bits((x as f32).to_bits() | 0xfff)
        }
    }

    /// Small integers: every product and sum below is exact in f32.
    fn a_at(r: usize, k: usize) -> f64 {
        ((r * 7 + k * 3) % 7) as f64 - 3.0
    }
    fn b_at(c: usize, k: usize) -> f64 {
        ((c * 5 + k * 11) % 5) as f64 - 2.0
    }
    fn c_at(r: usize, c: usize) -> f64 {
        ((r + 2 * c) % 9) as f64
    }

    /// `C + A·B` (64 × N, K = 64) through `wgmma` on a warpgroup of
    /// `threads` threads, as the accumulator's registers say it: `out[r][c]`.
    macro_rules! product {
        ($t:ty, $la:ty, $lb:ty, $n:literal, $threads:expr, $misstep:expr) => {{
            let misstep: Misstep = $misstep;
            let out = Mutex::new(vec![f32::NAN; 64 * $n]);
            let shape = LaunchShape {
                grid: Dim3::x(1),
                block: Dim3::x($threads),
                dynamic_shared_bytes: (64 + $n) * <$t as Value>::KX * size_of::<$t>(),
            };
            launch("wgmma_product", shape, &|| {
                let a_tile = shared::array::<$t, { 64 * <$t as Value>::KX }>();
                let b_tile = a_tile.after::<$t, { $n * <$t as Value>::KX }>();
                let a = OperandTile::<$t, 64, { <$t as Value>::KX }, $la>::new(a_tile).unwrap();
                let b = OperandTile::<$t, $n, { <$t as Value>::KX }, $lb>::new(b_tile).unwrap();
                let me = thread::linear_thread_id() as usize;
                const KX: usize = <$t as Value>::KX;
                for i in (me..64 * KX).step_by($threads) {
                    a.store(i / KX, i % KX, <$t>::of(a_at(i / KX, i % KX)));
                }
                for i in (me..$n * KX).step_by($threads) {
                    b.store(i / KX, i % KX, <$t>::of(b_at(i / KX, i % KX)));
                }
                if !(misstep == Misstep::NoFence && me == 70) {
                    fence_operands();
                }
                sync_threads();
                let t = thread_in_warpgroup();
                let mut acc = Accumulator::<$n>::zero();
                for (i, r) in acc.regs_mut().iter_mut().enumerate() {
                    let (row, col) = Accumulator::<$n>::coord(t, i);
                    *r = c_at(row, col) as f32;
                }
                let warp = thread::warp_id();
                {
                    let mut run = acc.start();
                    if !(misstep == Misstep::WarpSkips && warp == 3) {
                        if misstep == Misstep::LaneDisagrees && me == 5 {
                            run.mma(a.descriptor::<1>(), b.descriptor::<0>());
                        } else {
                            run.mma(a.descriptor::<0>(), b.descriptor::<0>());
                        }
                        if misstep == Misstep::WarpDisagrees && warp == 1 {
                            run.mma(a.descriptor::<1>(), b.descriptor::<0>());
                        } else {
                            run.mma(a.descriptor::<1>(), b.descriptor::<1>());
                        }
                        run.commit();
                        run.mma(a.descriptor::<2>(), b.descriptor::<2>());
                        run.mma(a.descriptor::<3>(), b.descriptor::<3>());
                    }
                    if misstep == Misstep::StoreBeforeWait && me == 0 {
                        b.store(1, 40, <$t>::of(1.0));
                    }
                    if misstep == Misstep::StoreOwnShareBeforeWait && me == 0 {
                        // A's row 0, k 32..40: chunk 0 of the third mma's
                        // warp-0 reads, which lane 0 checks.
                        a.store(0, 33, <$t>::of(1.0));
                    }
                    run.finish();
                }
                if misstep == Misstep::StoreAfterWait {
                    // Every warp's wait, then the store.
                    sync_threads();
                    if me == 0 {
                        b.store(1, 40, <$t>::of(1.0));
                    }
                }
                let mut out = out.lock().unwrap();
                for (i, &v) in acc.regs().iter().enumerate() {
                    let (row, col) = Accumulator::<$n>::coord(t, i);
                    out[row * $n + col] = v;
                }
            })
            .map(|()| out.into_inner().unwrap())
        }};
        ($t:ty, $la:ty, $lb:ty, $n:literal) => {
            product!($t, $la, $lb, $n, 128, Misstep::None)
        };
    }

    /// `C + A·B`, in f64 from the element functions themselves, `kx` deep.
    fn reference(n: usize, kx: usize) -> Vec<f32> {
        (0..64 * n)
            .map(|i| {
                let (r, c) = (i / n, i % n);
                let dot: f64 = (0..kx).map(|k| a_at(r, k) * b_at(c, k)).sum();
                (c_at(r, c) + dot) as f32
            })
            .collect()
    }

    /// Every width, both element types and every layout (K- and MN-major,
    /// each swizzle, for A and for B) give exactly `C + A·B` (integer
    /// inputs: the f64 reference is exact), every element of it where the
    /// accumulator's layout puts it.
    #[test]
    fn every_width_type_and_layout_computes_the_exact_product() {
        let cases: [(&str, usize, Vec<f32>); 6] = [
            (
                "f16 K128 K128",
                64,
                product!(f16, KMajor<Sw128>, KMajor<Sw128>, 64).unwrap(),
            ),
            (
                "bf16 MN128 MN64",
                64,
                product!(bf16, MnMajor<Sw128>, MnMajor<Sw64>, 64).unwrap(),
            ),
            (
                "bf16 K64 MN128",
                128,
                product!(bf16, KMajor<Sw64>, MnMajor<Sw128>, 128).unwrap(),
            ),
            (
                "f16 MN32 K32",
                128,
                product!(f16, MnMajor<Sw32>, KMajor<Sw32>, 128).unwrap(),
            ),
            (
                "f16 K32 MN32",
                256,
                product!(f16, KMajor<Sw32>, MnMajor<Sw32>, 256).unwrap(),
            ),
            (
                "bf16 MN64 K128",
                256,
                product!(bf16, MnMajor<Sw64>, KMajor<Sw128>, 256).unwrap(),
            ),
        ];
        assert_exact(&cases, KX);
    }

    /// Each case `(name, n, C + A·B as computed)` equals the reference
    /// `kx` deep, element for element.
    fn assert_exact(cases: &[(&str, usize, Vec<f32>)], kx: usize) {
        for (name, n, got) in cases {
            let want = reference(*n, kx);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g, w, "{name}: element ({}, {})", i / n, i % n);
            }
        }
    }

    /// tf32 (`m64nNk8`): every width and every swizzle, both operands
    /// K-major, give exactly `C + A·B` over 32 columns of K, each input's
    /// 12 low fraction bits ignored as the hardware ignores them (the
    /// inputs are integers with those bits set: a product that used them
    /// would not be the integer one), and each k-step's 32 bytes of K are
    /// its 8 columns.
    #[test]
    fn tf32_reads_k_major_f32_as_19_bits_eight_columns_a_step() {
        let kx = <f32 as Value>::KX;
        assert_eq!((f32::K, kx), (8, 32));
        let cases: [(&str, usize, Vec<f32>); 3] = [
            (
                "tf32 K128 K128",
                64,
                product!(f32, KMajor<Sw128>, KMajor<Sw128>, 64).unwrap(),
            ),
            (
                "tf32 K64 K32",
                128,
                product!(f32, KMajor<Sw64>, KMajor<Sw32>, 128).unwrap(),
            ),
            (
                "tf32 K32 K128",
                256,
                product!(f32, KMajor<Sw32>, KMajor<Sw128>, 256).unwrap(),
            ),
        ];
        assert_exact(&cases, kx);
    }

    /// The typed tiles lie exactly as TMA boxes land: a K-major tile is
    /// boxes of one swizzle span of K by all rows, an MN-major one boxes
    /// of one span of MN by all of K, one after another, each swizzled
    /// (the emulator's box gather, written from the ISA's box rules).
    #[test]
    fn tiles_lie_as_tma_boxes_land() {
        use crate::emu::tma::BoxGeometry;
        fn check<L: Layout>(mn: usize, kx: usize, span_elems: usize, k_major: bool) {
            // The matrix as TMA sees it: dimension 0 the contiguous extent.
            let (inner, outer) = if k_major { (kx, mn) } else { (mn, kx) };
            let value = |i: usize, o: usize| (o * inner + i) as u16;
            let mut tile = vec![0u16; mn * kx];
            for m in 0..mn {
                for k in 0..kx {
                    let at = L::SWIZZLE.apply(L::dense_offset(m, k, mn, kx, 2)) / 2;
                    tile[at] = if k_major { value(k, m) } else { value(m, k) };
                }
            }
            let mut landed = Vec::new();
            for first in (0..inner).step_by(span_elems) {
                let geometry = BoxGeometry {
                    dims: &[inner as u64, outer as u64],
                    strides: &[2 * inner as u64],
                    box_dims: &[span_elems as u32, outer as u32],
                    corner: &[first as i64, 0],
                    elem: 2,
                };
                let bytes = geometry.gather(L::SWIZZLE, |offset, out| {
                    let i = offset as usize / 2;
                    out.copy_from_slice(&value(i % inner, i / inner).to_le_bytes());
                });
                landed.extend(bytes.chunks(2).map(|b| u16::from_le_bytes([b[0], b[1]])));
            }
            assert_eq!(tile, landed, "{mn} x {kx}, k-major {k_major}");
        }
        check::<KMajor<Sw128>>(64, 128, 64, true);
        check::<KMajor<Sw64>>(24, 64, 32, true);
        check::<KMajor<Sw32>>(8, 48, 16, true);
        check::<MnMajor<Sw128>>(128, 32, 64, false);
        check::<MnMajor<Sw64>>(64, 16, 32, false);
        check::<MnMajor<Sw32>>(32, 24, 16, false);
    }

    /// The emulator's decoding of a typed tile's descriptors finds every
    /// element of every k-step where the tile stored it.
    #[test]
    fn descriptors_decode_to_the_tiles_elements() {
        use crate::emu::wgmma::{decode, element_offset};
        fn check<L: Layout>(mn: usize, kx: usize, window: usize, size: usize) {
            let k_step = K_BYTES / size;
            for step in 0..kx / k_step {
                let (start, leading, stride) = L::descriptor_fields(step, mn, kx, size);
                let d = decode(encode(window + start, leading, stride, L::SWIZZLE)).unwrap();
                for m in 0..mn {
                    for k in 0..k_step {
                        let tile = window
                            + L::SWIZZLE.apply(L::dense_offset(m, k_step * step + k, mn, kx, size));
                        assert_eq!(
                            element_offset(&d, L::MN_MAJOR, size, m, k),
                            tile,
                            "({m}, {k}) step {step}, {size}-byte elements"
                        );
                    }
                }
            }
        }
        check::<KMajor<Sw128>>(64, 128, 2048, 2);
        check::<KMajor<Sw64>>(128, 64, 512, 2);
        check::<KMajor<Sw32>>(256, 32, 0, 2);
        check::<MnMajor<Sw128>>(128, 64, 1024, 2);
        check::<MnMajor<Sw64>>(64, 32, 3584, 2);
        check::<MnMajor<Sw32>>(256, 16, 256, 2);
        // tf32: K-major only, 8 columns a step.
        check::<KMajor<Sw128>>(64, 64, 2048, 4);
        check::<KMajor<Sw64>>(128, 32, 512, 4);
        check::<KMajor<Sw32>>(256, 16, 0, 4);
        // The ISA's reserved bits and base offset are refused.
        assert!(decode(1 << 14).is_err() && decode(1 << 49).is_err());
    }

    fn wgmma_fault(result: Result<Vec<f32>, Box<EmuError>>) -> (WgmmaProblem, Box<EmuError>) {
        let e = result.expect_err("the misstep is reported");
        match e.fault {
            Fault::Wgmma { problem, .. } => (problem, e),
            _ => panic!("not a wgmma fault: {e}"),
        }
    }

    /// A warp that skips the warpgroup's `mma`s, one that issues another
    /// operand, a lane that does, and a block too small for a warpgroup are
    /// each reported, naming the warps; the correct twin passes above.
    #[test]
    fn warpgroups_that_disagree_are_reported() {
        let (p, e) = wgmma_fault(product!(
            f16,
            KMajor<Sw128>,
            KMajor<Sw128>,
            64,
            128,
            Misstep::WarpSkips
        ));
        assert_eq!(
            p,
            WgmmaProblem::Unmatched {
                issued: 4,
                behind: 3,
                behind_issued: 0
            },
            "{e}"
        );
        let (p, e) = wgmma_fault(product!(
            f16,
            KMajor<Sw128>,
            KMajor<Sw128>,
            64,
            128,
            Misstep::WarpDisagrees
        ));
        assert!(
            matches!(p, WgmmaProblem::WarpsDisagree { nth: 1, other_warp } if other_warp != 1),
            "{e}"
        );
        let (p, e) = wgmma_fault(product!(
            f16,
            KMajor<Sw128>,
            KMajor<Sw128>,
            64,
            128,
            Misstep::LaneDisagrees
        ));
        assert_eq!(p, WgmmaProblem::LanesDisagree { lane: 5 }, "{e}");
        assert!(e.to_string().contains("lane 5 issued it"), "{e}");
        let (p, e) = wgmma_fault(product!(
            f16,
            KMajor<Sw128>,
            KMajor<Sw128>,
            64,
            96,
            Misstep::None
        ));
        assert_eq!(p, WgmmaProblem::PartialWarpgroup { threads: 96 }, "{e}");
        // Two warpgroups each issuing the same sequence agree.
        let got = product!(bf16, KMajor<Sw128>, MnMajor<Sw128>, 64, 256, Misstep::None).unwrap();
        assert_eq!(got, reference(64, KX));
    }

    /// A store into an operand between its `mma` and the wait that retires
    /// it is reported: by the race detector at the store, as racing with the
    /// `mma`'s read (the other lanes' shares of it), or with the detector off
    /// (`WARPFORGE_EMU_RACECHECK=0`) at the wait, naming the changed byte
    /// and the issue. The same store after the wait is not, and leaves the
    /// result as computed.
    #[test]
    fn an_operand_written_before_its_wait_is_reported() {
        let e = product!(
            f16,
            KMajor<Sw128>,
            KMajor<Sw128>,
            64,
            128,
            Misstep::StoreBeforeWait
        )
        .expect_err("the early store is reported");
        let b_bytes = 8192..16384;
        match e.fault {
            Fault::SharedRace {
                offset,
                this_writes: true,
                other_writes: false,
                other_at: Some(_),
                ..
            } => {
                assert!(b_bytes.contains(&offset), "{e}")
            }
            Fault::Wgmma {
                problem: WgmmaProblem::OperandChanged { offset },
                other_at: Some(_),
                ..
            } => {
                assert!(b_bytes.contains(&offset), "{e}")
            }
            _ => panic!("not the early store: {e}"),
        }
        // A thread changing bytes that only it reads for the wgmma (no race
        // to see): the wait finds them changed.
        let e = product!(
            f16,
            KMajor<Sw128>,
            KMajor<Sw128>,
            64,
            128,
            Misstep::StoreOwnShareBeforeWait
        )
        .expect_err("the change is reported");
        assert!(
            matches!(e.fault, Fault::Wgmma { problem: WgmmaProblem::OperandChanged { offset }, other_at: Some(_), .. } if offset < 8192),
            "{e}"
        );
        let got = product!(
            f16,
            KMajor<Sw128>,
            KMajor<Sw128>,
            64,
            128,
            Misstep::StoreAfterWait
        )
        .unwrap();
        assert_eq!(got, reference(64, KX));
    }

    /// Operands stored with plain stores are read by `wgmma` through the
    /// async proxy: a thread that stores its share and skips
    /// `fence_operands` (`fence.proxy.async`) before the barrier is
    /// reported, naming it and its store; the correct twin (every thread
    /// fences) is every other test of this module.
    #[test]
    fn an_operand_stored_without_a_proxy_fence_is_reported() {
        let e = product!(
            f16,
            KMajor<Sw128>,
            MnMajor<Sw128>,
            64,
            128,
            Misstep::NoFence
        )
        .expect_err("the unfenced store is reported");
        let (writer, text) = (Dim3::new(70, 0, 0), e.to_string());
        assert!(
            matches!(e.fault, Fault::Wgmma { problem: WgmmaProblem::UnfencedOperand { writer: w, .. }, other_at: Some(_), .. } if w == writer),
            "{e}"
        );
        assert!(
            text.contains("fence.proxy.async") && text.contains("the store is at"),
            "{text}"
        );
    }

    /// `C + A·B` (bf16, N = 128) with both operands delivered by bulk
    /// copies from global memory already in the tiles' layout (as TMA
    /// delivers them), counted on one mbarrier; unless `early`, every
    /// thread waits for its phase before the first `mma`.
    fn bulk_fed(early: bool) -> Result<Vec<f32>, Box<EmuError>> {
        use crate::Global;
        use crate::bulk::BulkSource;
        use crate::mbarrier::{MBarriers, Phase};
        type LA = KMajor<Sw128>;
        type LB = MnMajor<Sw128>;
        /// The tile's bytes as a 16-byte aligned global buffer (a
        /// `Vec<u128>` as backing) of bf16 bits.
        fn laid_out<L: Layout>(mn: usize, at: impl Fn(usize, usize) -> f64) -> Vec<u128> {
            let mut backing = vec![0u128; mn * KX / 8];
            // SAFETY: the backing holds mn · KX u16s.
            let halves = unsafe {
                core::slice::from_raw_parts_mut(backing.as_mut_ptr().cast::<u16>(), mn * KX)
            };
            for m in 0..mn {
                for k in 0..KX {
                    let i = L::SWIZZLE.apply(L::dense_offset(m, k, mn, KX, 2)) / 2;
                    halves[i] = bf16::from_f64(at(m, k)).to_bits();
                }
            }
            backing
        }
        let (a_src, b_src) = (laid_out::<LA>(64, a_at), laid_out::<LB>(128, b_at));
        // SAFETY: both live, unwritten, through the launch; in the emulator
        // host memory is global memory.
        let (a_glob, b_glob) = unsafe {
            (
                Global::from_raw(a_src.as_ptr().cast::<bf16>(), 64 * KX),
                Global::from_raw(b_src.as_ptr().cast::<bf16>(), 128 * KX),
            )
        };
        let out = Mutex::new(vec![f32::NAN; 64 * 128]);
        let shape = LaunchShape {
            grid: Dim3::x(1),
            block: Dim3::x(128),
            dynamic_shared_bytes: (64 + 128) * KX * 2 + 8,
        };
        launch("wgmma_bulk_fed", shape, &|| {
            let a_tile = shared::array::<bf16, { 64 * KX }>();
            let b_tile = a_tile.after::<bf16, { 128 * KX }>();
            let bars = MBarriers::init(b_tile.after::<u64, 1>(), [1]);
            let full = bars.get(0);
            if thread::linear_thread_id() == 0 {
                full.arrive_expect_tx(((64 + 128) * KX * 2) as u32);
                BulkSource::new(a_glob)
                    .unwrap()
                    .copy_to_shared(0, a_tile, full);
                BulkSource::new(b_glob)
                    .unwrap()
                    .copy_to_shared(0, b_tile, full);
            }
            let a = OperandTile::<bf16, 64, KX, LA>::new(a_tile).unwrap();
            let b = OperandTile::<bf16, 128, KX, LB>::new(b_tile).unwrap();
            if !early {
                let mut phase = Phase::FIRST;
                full.wait(&mut phase);
            }
            let mut acc = Accumulator::<128>::zero();
            let t = thread_in_warpgroup();
            for (i, r) in acc.regs_mut().iter_mut().enumerate() {
                let (row, col) = Accumulator::<128>::coord(t, i);
                *r = c_at(row, col) as f32;
            }
            let mut run = acc.start();
            run.mma(a.descriptor::<0>(), b.descriptor::<0>());
            run.mma(a.descriptor::<1>(), b.descriptor::<1>());
            run.mma(a.descriptor::<2>(), b.descriptor::<2>());
            run.mma(a.descriptor::<3>(), b.descriptor::<3>());
            run.finish();
            let mut out = out.lock().unwrap();
            acc.for_each(t, |_, row, col, v| out[row * 128 + col] = v);
            drop(out);
            sync_threads();
            bars.invalidate();
        })
        .map(|()| out.into_inner().unwrap())
    }

    /// Operands that bulk copies deliver give the exact product once the
    /// threads wait for the copies' phase; an `mma` issued before that
    /// wait reads a destination whose bytes have not landed, and is
    /// reported naming the copy.
    #[test]
    fn operands_from_bulk_copies_are_read_only_after_their_wait() {
        assert_eq!(bulk_fed(false).unwrap(), reference(128, KX));
        let e = bulk_fed(true).expect_err("the early mma is reported");
        assert!(
            matches!(
                e.fault,
                Fault::BulkCopyPending {
                    this_writes: false,
                    ..
                }
            ),
            "{e}"
        );
    }

    /// A from registers (each warp's fragment of its 16 rows, through
    /// `mma.sync`'s A table) with B from a descriptor: the exact product,
    /// for two widths and both B layouts.
    #[test]
    fn a_from_registers_computes_the_exact_product() {
        use crate::mma::FragA;
        macro_rules! run {
            ($lb:ty, $n:literal) => {{
                let out = Mutex::new(vec![f32::NAN; 64 * $n]);
                let shape = LaunchShape {
                    grid: Dim3::x(1),
                    block: Dim3::x(128),
                    dynamic_shared_bytes: $n * KX * 2,
                };
                launch("wgmma_a_registers", shape, &|| {
                    let b =
                        OperandTile::<bf16, $n, KX, $lb>::new(shared::array::<bf16, { $n * KX }>())
                            .unwrap();
                    let me = thread::linear_thread_id() as usize;
                    for i in (me..$n * KX).step_by(128) {
                        b.store(i / KX, i % KX, bf16::of(b_at(i / KX, i % KX)));
                    }
                    fence_operands();
                    sync_threads();
                    let t = thread_in_warpgroup();
                    let rows = 16 * (t as usize / 32);
                    let a = |step: usize| {
                        FragA::<bf16>::from_fn(|r, k| bf16::of(a_at(rows + r, 16 * step + k)))
                    };
                    let mut acc = Accumulator::<$n>::from_fn(t, |r, c| c_at(r, c) as f32);
                    let mut run = acc.start();
                    run.mma_a_registers(a(0), b.descriptor::<0>());
                    run.mma_a_registers(a(1), b.descriptor::<1>());
                    run.mma_a_registers(a(2), b.descriptor::<2>());
                    run.mma_a_registers(a(3), b.descriptor::<3>());
                    run.finish();
                    let mut out = out.lock().unwrap();
                    acc.for_each(t, |_, r, c, v| out[r * $n + c] = v);
                })
                .unwrap();
                out.into_inner().unwrap()
            }};
        }
        assert_eq!(run!(KMajor<Sw128>, 64), reference(64, KX));
        assert_eq!(run!(MnMajor<Sw64>, 256), reference(256, KX));
    }

    /// `setmaxnreg` by every warp of a warpgroup passes; a warp that
    /// increases where the others release, and a block without a whole
    /// warpgroup, are reported.
    #[test]
    fn setmaxnreg_is_checked_per_warpgroup() {
        let run = |threads: u32, odd_warp: Option<u32>| {
            let shape = LaunchShape {
                grid: Dim3::x(1),
                block: Dim3::x(threads),
                dynamic_shared_bytes: 0,
            };
            launch("setmaxnreg", shape, &|| {
                if Some(thread::warp_id()) == odd_warp {
                    increase_registers::<232>();
                } else {
                    release_registers::<40>();
                }
            })
        };
        run(256, None).unwrap();
        let e = run(256, Some(6)).unwrap_err();
        assert!(
            matches!(e.fault, Fault::Wgmma { problem: WgmmaProblem::WarpsDisagree { nth: 0, other_warp }, .. } if (4..8).contains(&other_warp)),
            "{e}"
        );
        let e = run(64, None).unwrap_err();
        assert!(
            matches!(
                e.fault,
                Fault::Wgmma {
                    problem: WgmmaProblem::PartialWarpgroup { threads: 64 },
                    ..
                }
            ),
            "{e}"
        );
    }

    /// The block's registers as `setmaxnreg` shares them out: 384 threads
    /// start with at most 168 each (64512 in all). A producer warpgroup
    /// releasing to 56 (or 40) leaves two consumer warpgroups enough for
    /// 224 (or 232) each, though they ask before it releases; releasing
    /// only to 64 leaves the last consumer warp 1024 registers short, a
    /// wait for ever on the GPU: reported, naming that warp.
    #[test]
    fn setmaxnreg_takes_only_what_the_block_released() {
        let run = |split: u32| {
            let shape = LaunchShape {
                grid: Dim3::x(1),
                block: Dim3::x(384),
                dynamic_shared_bytes: 0,
            };
            launch("setmaxnreg_pool", shape, &move || {
                let producer = thread::warp_id() / 4 == 2;
                match (split, producer) {
                    (56, true) => release_registers::<56>(),
                    (40, true) => release_registers::<40>(),
                    (_, true) => release_registers::<64>(),
                    (40, false) => increase_registers::<232>(),
                    (_, false) => increase_registers::<224>(),
                }
            })
        };
        run(56).unwrap();
        run(40).unwrap();
        let e = run(64).unwrap_err();
        let Fault::Wgmma { problem, at, .. } = e.fault else {
            panic!("{e}")
        };
        assert_eq!(
            problem,
            WgmmaProblem::RegisterPoolShort {
                regs: 224,
                from: 168,
                pool: 128 * (168 - 64) - 7 * 32 * (224 - 168),
                entry: 168,
                threads: 384,
            },
            "{e}"
        );
        assert_eq!(at.file, file!(), "{e}");
        assert_eq!(e.thread.x, 7 * 32, "{e}");
        assert!(e.to_string().contains("waits for ever"), "{e}");
    }
}
