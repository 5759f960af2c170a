//! Tensor copies by the Tensor Memory Accelerator (`cp.async.bulk.tensor`,
//! sm_90): one thread hands the copy engine a *box* of a global tensor —
//! `B0 × B1` elements at a corner the thread names — and a shared
//! destination; the box lands there swizzled, with the elements outside
//! the tensor filled with zeros, and its bytes are counted on an
//! [`MBarrier`]'s transaction count, as a [bulk copy](crate::bulk)'s are.
//!
//! A [`TensorMap`] is a kernel parameter: the host builds it from a device
//! buffer (`warpforge::TensorMap`, which checks every rule of
//! `cuTensorMapEncodeTiled` and encodes it on the GPU), and its type
//! carries what the kernel relies on: the element, the rank, the box and
//! the swizzle. The host's and the kernel's types are the same, so a map
//! whose box or swizzle disagrees with the kernel's is a type error.
//!
//! ```text
//! #[kernel(...)]
//! fn gemm(a: TensorMap<bf16, 2, 64, 128, Sw128>, ...) {
//!     // producer thread:
//!     full.arrive_expect_tx(OperandTile::<bf16, 128, 64, KMajor<Sw128>>::BYTES);
//!     a.load_operand([k0, m0], a_stage, full);   // one box per 128-byte span
//!     // consumers: full.wait(&mut phase), then wgmma on a_stage
//! }
//! ```
//!
//! What the types and checks guarantee: a copy writes only its destination
//! tile (the box's bytes equal the tile's, checked at compile time), which
//! starts where the swizzle needs it (the swizzle's period, at least 128
//! bytes: checked once per copy for a plain tile, once per tile for an
//! [`OperandTile`]); a box reads only the tensor the host described, and
//! the host checked that it lies inside its buffer. What the kernel's
//! protocol upholds, as for every mbarrier (and the emulator checks): that
//! a phase expects exactly the bytes its copies deliver (a whole box,
//! zero-filled elements included), and that nobody touches a destination
//! before waiting for it.
//!
//! On the GPU: `cp.async.bulk.tensor.{1..5}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes`
//! (PTX 8.0, sm_90) with the map's generic address in global memory; in
//! the emulator, the box is gathered at issue and lands as a bulk copy.
//!
//! The other direction, an epilogue's: a [`StoreMatrix`] is an output
//! matrix the TMA writes box by box from shared staging tiles
//! (`cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group`, then
//! `cp.async.bulk.commit_group` / `wait_group.read`), as disjoint by
//! construction as `OutMatrix`'s owned views: a block stores only boxes of
//! the tiles it owns, and only through its [`StoreIssuer`].
//!
//! Facts and sources: docs/hopper/ptx-semantics.md §2.

use crate::arch;
use crate::mbarrier::MBarrier;
use crate::own::{Mapping2, OutMatrix, TileWalk, WalkTile, WalkTiles};
use crate::shared::{SharedElement, SharedTile};
use crate::swizzle::Mode;
use crate::wgmma::{self, Layout, OperandTile};
use core::marker::PhantomData;

/// A tensor map as the kernel receives it: on the GPU the generic address
/// of the 128-byte `CUtensorMap` the host encoded; in the emulator the
/// description it was encoded from.
#[cfg(target_arch = "nvptx64")]
#[doc(hidden)]
pub type MapHandle = *const u8;
/// A tensor map as the kernel receives it: on the GPU the generic address
/// of the 128-byte `CUtensorMap` the host encoded; in the emulator the
/// description it was encoded from.
#[cfg(not(target_arch = "nvptx64"))]
#[doc(hidden)]
pub type MapHandle = crate::emu::tma::TensorDesc;

/// The map as the copy instructions take it: its generic address on the
/// GPU, its description in the emulator.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn handle_ptr(map: &MapHandle) -> *const u8 {
    *map
}

/// The map as the copy instructions take it: its generic address on the
/// GPU, its description in the emulator.
#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
fn handle_ptr(map: &MapHandle) -> &crate::emu::tma::TensorDesc {
    map
}

/// A tensor map: a rank-`R` tensor of `T` in global memory whose copies
/// move boxes of `B0 × B1` elements (`× 1` in every further dimension),
/// landing swizzled by `S`. Made by the host and passed as a kernel
/// parameter; the kernel only reads through it.
#[derive(Clone, Copy)]
pub struct TensorMap<'a, T, const R: usize, const B0: usize, const B1: usize, S: Mode> {
    map: MapHandle,
    _tensor: PhantomData<(&'a [T], S)>,
}

impl<'a, T: SharedElement, const R: usize, const B0: usize, const B1: usize, S: Mode>
    TensorMap<'a, T, R, B0, B1, S>
{
    /// Bytes one box delivers (zero-filled elements included): what a phase
    /// expects per [`load`](Self::load).
    pub const BOX_BYTES: u32 = {
        assert!(1 <= R && R <= 5, "a tensor map has 1 ..= 5 dimensions");
        assert!(
            1 <= B0 && B0 <= 256 && 1 <= B1 && B1 <= 256,
            "a box extent is 1 ..= 256"
        );
        assert!(R >= 2 || B1 == 1, "a rank-1 map's box is B0 x 1");
        assert!(
            (B0 * size_of::<T>()).is_multiple_of(16),
            "a box's rows are multiples of 16 bytes"
        );
        assert!(
            match S::SWIZZLE.span() {
                Some(span) => B0 * size_of::<T>() <= span,
                None => true,
            },
            "a swizzled box's rows are at most the swizzle's span"
        );
        (B0 * B1 * size_of::<T>()) as u32
    };

    /// The map the launch passed. Only `#[kernel]`'s entry calls this.
    ///
    /// # Safety
    /// `map` must be a tensor map of exactly this type's element, rank,
    /// box and swizzle, of a tensor that stays readable and unwritten for
    /// the launch (the host's `TensorMap` of the same type is).
    #[doc(hidden)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub unsafe fn from_raw(map: MapHandle) -> Self {
        #[cfg(not(target_arch = "nvptx64"))]
        {
            let mut want = [1u32; 5];
            want[0] = B0 as u32;
            if R > 1 {
                want[1] = B1 as u32;
            }
            assert!(
                map.elem() == size_of::<T>()
                    && map.rank() == R
                    && map.box_dims() == &want[..R]
                    && map.swizzle() == S::SWIZZLE,
                "TensorMap::from_raw: the map ({} dimensions, box {:?}, {}-byte elements, {:?}) \
                 is not the kernel's ({R} dimensions, box {:?}, {}-byte elements, {:?})",
                map.rank(),
                map.box_dims(),
                map.elem(),
                map.swizzle(),
                &want[..R],
                size_of::<T>(),
                S::SWIZZLE
            );
        }
        TensorMap {
            map,
            _tensor: PhantomData,
        }
    }

    /// Brings the map into the cache the copy engine reads it through: once,
    /// by the thread that issues the copies, before the first.
    #[inline(always)]
    pub fn prefetch(&self) {
        arch::tma_prefetch_map(handle_ptr(&self.map));
    }

    /// Issues the copy of the box whose start corner is `corner` (element
    /// indices, dimension 0 first; negative or past the end allowed: those
    /// elements are zeros) into `dst`, its [`BOX_BYTES`](Self::BOX_BYTES)
    /// counted on `bar`'s current phase. Called by one thread (e.g. under
    /// [`warp::elect_one`](crate::warp::elect_one)); the phase must expect
    /// the bytes.
    ///
    /// `N` must be the box's elements (a compile-time error otherwise);
    /// panics (a trap on the GPU) unless `dst` starts on the swizzle's
    /// period, and on 128 bytes.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load<const N: usize>(&self, corner: [i32; R], dst: SharedTile<T, N>, bar: MBarrier) {
        const { assert!(N == B0 * B1, "the destination holds one box") };
        let _ = Self::BOX_BYTES;
        let window = arch::shared_window_offset(dst.addr(0) as *const u8);
        assert!(
            (window as usize).is_multiple_of(S::SWIZZLE.period().max(128)),
            "TensorMap::load: the destination must start on 128 bytes and the swizzle's period"
        );
        // SAFETY: the map is the host's, of this type (`from_raw`'s
        // contract): its box is `N` elements of `T`, `dst`'s size; `dst`
        // is aligned as TMA needs (checked); `bar` is a live barrier (an
        // `MBarrier` exists only between `init` and `invalidate`).
        unsafe {
            arch::tma_load(
                arch::shared_addr(dst.addr(0) as *const u8),
                handle_ptr(&self.map),
                corner,
                bar.addr(),
            )
        }
    }

    /// Fills `dst`, a `wgmma` operand tile, from the tensor: the tile's
    /// contiguous extent (K of a K-major tile, MN of an MN-major one) lies
    /// along dimension 0, its other extent along dimension 1, and the tile
    /// starts at `corner`. One box per swizzle span of the contiguous
    /// extent and per `B1` of the other (`corner[0]` advancing by `B0`,
    /// `corner[1]` by `B1`), all counted on `bar`
    /// ([`OperandTile::BYTES`] in all). The box must be one span wide
    /// (`B0` elements = the tile's swizzle span, the map's swizzle the
    /// tile's) and `B1` a multiple of 8 dividing the other extent
    /// (compile-time errors otherwise). No check at run time: the tile's
    /// start was checked when it was made, and every box lands a whole
    /// number of swizzle periods after it.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load_operand<const MN: usize, const K: usize, L: Layout>(
        &self,
        corner: [i32; R],
        dst: OperandTile<T, MN, K, L>,
        bar: MBarrier,
    ) where
        T: wgmma::Element,
    {
        const {
            assert!(R >= 2, "an operand tile is two-dimensional");
            assert!(
                matches!(
                    (S::SWIZZLE, L::SWIZZLE),
                    (crate::swizzle::Swizzle::B32, crate::swizzle::Swizzle::B32)
                        | (crate::swizzle::Swizzle::B64, crate::swizzle::Swizzle::B64)
                        | (crate::swizzle::Swizzle::B128, crate::swizzle::Swizzle::B128)
                ),
                "the map's swizzle is the operand tile's"
            );
            let (contiguous, other) = if L::MN_MAJOR { (MN, K) } else { (K, MN) };
            assert!(
                matches!(L::SWIZZLE.span(), Some(span) if span == size_of::<T>() * B0)
                    && contiguous.is_multiple_of(B0)
                    && B1.is_multiple_of(8)
                    && other.is_multiple_of(B1),
                "the map's box is one swizzle span of the operand tile by a multiple of 8 \
                 dividing its other extent"
            );
        };
        let _ = Self::BOX_BYTES;
        let (contiguous, other) = if L::MN_MAJOR { (MN, K) } else { (K, MN) };
        for span in 0..contiguous / B0 {
            for part in 0..other / B1 {
                let mut at = corner;
                at[0] = corner[0].wrapping_add((span * B0) as i32);
                at[1] = corner[1].wrapping_add((part * B1) as i32);
                // SAFETY: as in `load`: the box is `B0 · B1` elements, a
                // part of the tile (const-checked: the layout's span block
                // `span` holds `other` rows of `B0` elements, and part
                // `part` is `B1` of them), which starts on the swizzle's
                // period (checked by `OperandTile::new`), each box a whole
                // number of periods further (`B1` a multiple of 8 rows of
                // one span).
                unsafe {
                    arch::tma_load(
                        dst.block_addr(span * other * B0 + part * B1 * B0),
                        handle_ptr(&self.map),
                        at,
                        bar.addr(),
                    )
                };
            }
        }
    }
}

/// An output matrix that the Tensor Memory Accelerator writes, box by box,
/// from shared memory (`cp.async.bulk.tensor` shared → global): the
/// epilogue of a kernel that stages its tile in shared memory, as
/// CUTLASS's TMA epilogues do. A kernel parameter (`c: StoreMatrix<f32,
/// TileWalk<128, 256, 16, 256, 8>, 32, 32, Sw128>`); the host passes
/// `buffer.matrix_mut(..)?.tma_store()?` (`warpforge::StoreMatrix`), which
/// encodes a rank-3 map of the same matrix — dimension 0 the columns, 1 the
/// rows, 2 the batches; boxes of `B0` columns × `B1` rows, laid out in
/// shared memory swizzled by `S`.
///
/// Why it is as safe as [`OutMatrix`]'s owned views: a store writes one
/// box of a tile the block owns (a [`WalkTile`], which only
/// [`walk`](Self::walk) makes, for the block whose residue it is), at a
/// box position inside the tile (checked), clipped by the copy engine to
/// the matrix; only one thread of a block can store (the
/// [`StoreIssuer`], thread 0); and the matrix has no other writers (no
/// per-thread view of it exists). What the kernel's protocol upholds, and
/// the emulator checks (`Fault::TmaStore`): each thread that wrote the
/// staging tile fences it for the copy engine ([`fence_for_store`]) before
/// the barrier that hands it over; nobody writes it again until the
/// issuer's [`StoreIssuer::wait_read`] covers the store (then a barrier);
/// the issuer waits before it exits.
///
/// ```text
/// for tile in c.walk() {
///     // every consumer: write its part of the staging box, then
///     tma::fence_for_store();
///     sync_threads();                       // or a named barrier
///     if let Some(issuer) = &issuer {
///         c.store(issuer, &tile, [0, 0], staging);
///         issuer.commit();
///         issuer.wait_read::<0>();          // before the staging is rewritten
///     }
///     sync_threads();
/// }
/// ```
pub struct StoreMatrix<'a, T, M: Mapping2, const B0: usize, const B1: usize, S: Mode> {
    matrix: OutMatrix<'a, T, M>,
    map: MapHandle,
    _swizzle: PhantomData<S>,
}

impl<'a, T: SharedElement, M: Mapping2, const B0: usize, const B1: usize, S: Mode>
    StoreMatrix<'a, T, M, B0, B1, S>
{
    /// Bytes one box reads from shared memory (its staging tile's size).
    pub const BOX_BYTES: u32 = TensorMap::<'a, T, 3, B0, B1, S>::BOX_BYTES;

    /// The matrix and its map as the launch passed them. Only `#[kernel]`'s
    /// entry calls this.
    ///
    /// # Safety
    /// `map` must be a tensor map of this type's element, box and swizzle,
    /// of exactly the matrix `matrix` binds (rank 3: columns, rows, batches;
    /// the row and batch strides), encoded for a buffer the launch may
    /// write, and nothing else may write that buffer during the launch.
    #[doc(hidden)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub unsafe fn from_raw(map: MapHandle, matrix: OutMatrix<'a, T, M>) -> Self {
        #[cfg(not(target_arch = "nvptx64"))]
        {
            let (ptr, batches, batch_stride) = matrix.binding();
            let elem = size_of::<T>() as u64;
            let made_for = map.elem() == size_of::<T>()
                && map.rank() == 3
                && map.box_dims() == [B0 as u32, B1 as u32, 1]
                && map.swizzle() == S::SWIZZLE
                && map.base() == ptr.cast_const().cast::<u8>()
                && (batches == 0
                    || (matrix.rows() == 0
                        || map.dims()
                            == [matrix.cols() as u64, matrix.rows() as u64, batches as u64])
                        && map.strides()[0] == matrix.row_stride() as u64 * elem
                        && (batches == 1 || map.strides()[1] == batch_stride as u64 * elem));
            assert!(
                made_for,
                "StoreMatrix::from_raw: the map (dims {:?}, box {:?}, {}-byte elements, {:?}) is \
                 not of the kernel's matrix ({} x {}, box [{B0}, {B1}, 1], {}-byte elements, {:?})",
                map.dims(),
                map.box_dims(),
                map.elem(),
                map.swizzle(),
                matrix.rows(),
                matrix.cols(),
                size_of::<T>(),
                S::SWIZZLE
            );
        }
        let _ = Self::BOX_BYTES;
        StoreMatrix {
            matrix,
            map,
            _swizzle: PhantomData,
        }
    }

    /// Rows of the matrix (this block's batch's; 0 if it has none).
    #[inline(always)]
    pub fn rows(&self) -> usize {
        self.matrix.rows()
    }

    /// Columns of the matrix.
    #[inline(always)]
    pub fn cols(&self) -> usize {
        self.matrix.cols()
    }

    /// Brings the map into the copy engine's cache: once, by the storing
    /// thread, before its first store.
    #[inline(always)]
    pub fn prefetch(&self) {
        arch::tma_prefetch_map(handle_ptr(&self.map));
    }
}

impl<
    'a,
    T: SharedElement,
    const BM: usize,
    const BN: usize,
    const TM: usize,
    const TN: usize,
    const G: usize,
    const B0: usize,
    const B1: usize,
    S: Mode,
> StoreMatrix<'a, T, TileWalk<BM, BN, TM, TN, G>, B0, B1, S>
{
    /// Boxes per tile: `BM / B1` rows of `BN / B0` (the box must divide
    /// the tile: a compile-time error otherwise).
    pub const BOXES: [usize; 2] = {
        assert!(
            BM.is_multiple_of(B1) && BN.is_multiple_of(B0),
            "a store box (B0 columns x B1 rows) divides the block tile (BN x BM)"
        );
        [BM / B1, BN / B0]
    };

    /// The tiles this block owns, in order ([`OutMatrix::walk`]).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn walk(&self) -> WalkTiles {
        self.matrix.walk()
    }

    /// Where `tile` lies: its batch and corner (row, column)
    /// ([`OutMatrix::walk_origin`]).
    #[inline(always)]
    pub fn walk_origin(&self, tile: &WalkTile) -> (usize, usize, usize) {
        self.matrix.walk_origin(tile)
    }

    /// Issues the store of box `part = [i, j]` of `tile` — rows `i·B1 ..
    /// (i + 1)·B1` and columns `j·B0 .. (j + 1)·B0` of the tile, clipped to
    /// the matrix — from `src`, laid out as a load of the box would land it
    /// (row-major `B1 × B0`, swizzled by `S`), in the issuer's current group
    /// ([`StoreIssuer::commit`]). `N` must be the box's elements (a
    /// compile-time error otherwise); panics (a trap on the GPU) if `part`
    /// is outside [`BOXES`](Self::BOXES) or `src` does not start on 128
    /// bytes and the swizzle's period.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn store<const N: usize>(
        &self,
        _issuer: &StoreIssuer,
        tile: &WalkTile,
        part: [usize; 2],
        src: SharedTile<T, N>,
    ) {
        const { assert!(N == B0 * B1, "the staging tile holds one box") };
        let [rows, cols] = Self::BOXES;
        assert!(
            part[0] < rows && part[1] < cols,
            "StoreMatrix::store: the box is outside the tile"
        );
        let window = arch::shared_window_offset(src.addr(0) as *const u8);
        assert!(
            (window as usize).is_multiple_of(S::SWIZZLE.period().max(128)),
            "StoreMatrix::store: the staging tile must start on 128 bytes and the swizzle's period"
        );
        let (batch, row, col) = self.matrix.walk_origin(tile);
        let at = |x: usize| i32::try_from(x).ok();
        // A corner past i32 is past every extent (the host refuses maps
        // whose extents do not fit i32): nothing of the box is the matrix's.
        let (Some(c0), Some(c1), Some(c2)) = (
            at(col.wrapping_add(part[1] * B0)),
            at(row.wrapping_add(part[0] * B1)),
            at(batch),
        ) else {
            return;
        };
        // SAFETY: the map is of this matrix, writable by the launch and
        // written by nothing else (`from_raw`'s contract); the box lies in
        // `tile` (checked above), which only this block owns (`WalkTile`),
        // and only this block's `StoreIssuer` stores; `src` holds one box
        // (`N`, const-checked) and is aligned (checked). The protocol
        // (fenced source, untouched until `wait_read`) is the kernel's, as
        // for every asynchronous copy, and the emulator checks it.
        unsafe {
            arch::tma_store(
                arch::shared_addr(src.addr(0) as *const u8),
                handle_ptr(&self.map),
                [c0, c1, c2],
            )
        }
    }
}

/// The one thread of a block that issues its TMA stores (thread 0): made
/// only by [`StoreIssuer::new`], not `Clone`, so a block's stores come from
/// one thread, in its program order, and its bulk async-groups
/// ([`commit`](Self::commit), [`wait_read`](Self::wait_read)) are that
/// thread's.
pub struct StoreIssuer {
    _not_clone: (),
}

impl StoreIssuer {
    /// The issuer, for thread 0 of the block; `None` for every other thread.
    #[inline(always)]
    pub fn new() -> Option<StoreIssuer> {
        (crate::thread::linear_thread_id() == 0).then_some(StoreIssuer { _not_clone: () })
    }

    /// Closes this thread's current group of stores
    /// (`cp.async.bulk.commit_group`).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn commit(&self) {
        arch::bulk_commit_group();
    }

    /// Waits until at most `N` (0 ..= 3) of this thread's committed groups
    /// may still read their staging tiles (`cp.async.bulk.wait_group.read
    /// N`): after it, and a barrier, the staging tiles of the others may be
    /// rewritten. Call `wait_read::<0>()` before the thread exits.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn wait_read<const N: u32>(&self) {
        const { assert!(N <= 3, "wait for at most 3 groups in flight") };
        arch::bulk_wait_group_read(N);
    }
}

/// Makes this thread's plain stores to shared memory visible to the copy
/// engine's reads (`fence.proxy.async.shared::cta`): each thread that wrote
/// a staging tile calls it before the barrier that hands the tile to the
/// [`StoreIssuer`]. The emulator reports a store that reads a byte whose
/// writer did not (`TmaStoreProblem::UnfencedSource`).
#[inline(always)]
pub fn fence_for_store() {
    arch::fence_proxy_async_shared();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::tma::TensorDesc;
    use crate::emu::{EmuError, Fault, LaunchShape, launch};
    use crate::mbarrier::{MBarriers, Phase};
    use crate::swizzle::{Sw64, Sw128, Swizzle, Unswizzled};
    use crate::wgmma::{Accumulator, KMajor, MnMajor, thread_in_warpgroup};
    use crate::{Dim3, shared, thread};
    use half::bf16;
    use std::sync::Mutex;

    /// `len` elements of `T`, 16-byte aligned (a `Vec<T>` need not be),
    /// filled by `f`.
    fn aligned<T: Copy>(len: usize, f: impl Fn(usize) -> T) -> Vec<u128> {
        let mut backing = vec![0u128; (len * size_of::<T>()).div_ceil(16)];
        let elems = backing.as_mut_ptr().cast::<T>();
        for i in 0..len {
            // SAFETY: `backing` holds at least `len` `T`s, and is 16-aligned.
            unsafe { elems.add(i).write(f(i)) };
        }
        backing
    }

    /// The element of a `rows × cols` tensor (rows `ld` apart) at `(r, c)`:
    /// distinct, and never zero inside.
    fn element(r: i64, c: i64) -> f32 {
        (1000 * r + c + 1) as f32
    }

    /// Thread 0 loads the 8 × 16 f32 box at `corner` of a 30 × 20 tensor
    /// (rows 24 elements apart) with swizzle `S`; every thread waits and
    /// reads the tile back through the swizzle. Each element is the
    /// tensor's, or zero outside it.
    fn box_at<S: Mode>(
        corner: [i32; 2],
        read_before_wait: bool,
    ) -> Result<Vec<f32>, Box<EmuError>> {
        let (rows, cols, ld) = (30usize, 20usize, 24usize);
        let tensor = aligned::<f32>(rows * ld, |i| element((i / ld) as i64, (i % ld) as i64));
        let desc = TensorDesc::new(
            tensor.as_ptr().cast(),
            rows * ld * 4,
            &[cols as u64, rows as u64],
            &[ld as u64 * 4],
            &[16, 8],
            4,
            S::SWIZZLE,
        )
        .unwrap();
        let got = Mutex::new(vec![f32::NAN; 128]);
        let shape = LaunchShape {
            grid: Dim3::x(1),
            block: Dim3::x(64),
            dynamic_shared_bytes: 1024 + 8,
        };
        launch("tma_box", shape, &|| {
            // SAFETY: `desc` is of this type, its tensor lives through the launch.
            let map = unsafe { TensorMap::<f32, 2, 16, 8, S>::from_raw(desc) };
            let tile = shared::array::<f32, 128>();
            let bars = MBarriers::init(tile.after::<u64, 1>(), [1]);
            let full = bars.get(0);
            if thread::linear_thread_id() == 0 {
                map.prefetch();
                full.arrive_expect_tx(TensorMap::<f32, 2, 16, 8, S>::BOX_BYTES);
                map.load(corner, tile, full);
            }
            let me = thread::linear_thread_id() as usize;
            if read_before_wait && me == 33 {
                let _ = tile.load(0);
            }
            full.wait(&mut Phase::FIRST.clone());
            for i in (me..128).step_by(64) {
                let dense = 4 * i;
                let v = tile.load(S::SWIZZLE.apply(dense) / 4);
                got.lock().unwrap()[i] = v;
            }
            bars.invalidate();
        })?;
        Ok(got.into_inner().unwrap())
    }

    #[test]
    fn a_box_lands_swizzled_with_zeros_outside_the_tensor() {
        fn check<S: Mode>() {
            for corner in [
                [0, 0],
                [3, 5],
                [-4, -2],
                [10, 25],
                [-20, 0],
                [19, 29],
                [20, 30],
            ] {
                let got = box_at::<S>(corner, false).unwrap();
                for (i, &v) in got.iter().enumerate() {
                    let (r, c) = (
                        i64::from(corner[1]) + (i / 16) as i64,
                        i64::from(corner[0]) + (i % 16) as i64,
                    );
                    let want = if (0..30).contains(&r) && (0..20).contains(&c) {
                        element(r, c)
                    } else {
                        0.0
                    };
                    assert_eq!(
                        v,
                        want,
                        "{:?} corner {corner:?}, box element {i}",
                        S::SWIZZLE
                    );
                }
            }
        }
        check::<Unswizzled>();
        check::<Sw64>();
    }

    /// A thread that reads the box without waiting: before the box lands
    /// that is a read of a pending copy, after it a race with the copy's
    /// writes (which only the wait orders); either way it names thread 0,
    /// the issuer. The correct twin is the test above.
    #[test]
    fn reading_a_box_before_its_wait_is_reported() {
        let err = box_at::<Unswizzled>([0, 0], true).unwrap_err();
        let zero = Some(Dim3::new(0, 0, 0));
        assert!(
            matches!(err.fault, Fault::BulkCopyPending { issuer, .. } if Some(issuer) == zero)
                || matches!(err.fault, Fault::SharedRace { other, other_writes: true, .. } if other == zero),
            "{err}"
        );
    }

    /// Both operands of a 64 × 128 × 64 `wgmma` filled by the TMA from
    /// ragged tensors (A 50 × 40 row-major, so K-major tiles; B 40 × 100
    /// row-major, so MN-major tiles of Bᵀ, two boxes along N; or B stored
    /// transposed, 100 × 40 row-major, so K-major, two boxes along N's
    /// rows), the corners placing the tensors' ends inside the tiles: the
    /// product is exactly `A·B` with the elements outside both tensors zero.
    #[test]
    fn operands_filled_by_the_tma_multiply_exactly() {
        let (m, k, n) = (50usize, 40usize, 100usize);
        let (lda, ldb, ldbt) = (48usize, 104usize, 48usize);
        let a_val = |r: usize, c: usize| ((r * 7 + c * 3) % 7) as f64 - 3.0;
        let b_val = |r: usize, c: usize| ((r * 5 + c * 11) % 5) as f64 - 2.0;
        let a = aligned::<bf16>(m * lda, |i| bf16::from_f64(a_val(i / lda, i % lda)));
        let b = aligned::<bf16>(k * ldb, |i| bf16::from_f64(b_val(i / ldb, i % ldb)));
        let bt = aligned::<bf16>(n * ldbt, |i| bf16::from_f64(b_val(i % ldbt, i / ldbt)));
        let map = |t: &[u128], rows: usize, cols: usize, ld: usize| {
            let dims = [cols as u64, rows as u64];
            let (bytes, strides) = (rows * ld * 2, [ld as u64 * 2]);
            TensorDesc::new(
                t.as_ptr().cast(),
                bytes,
                &dims,
                &strides,
                &[64, 64],
                2,
                Swizzle::B128,
            )
            .unwrap()
        };
        let (map_a, map_b, map_bt) = (map(&a, m, k, lda), map(&b, k, n, ldb), map(&bt, n, k, ldbt));
        // Tile corners: A's rows from -4 (4 zero rows first), k from 0;
        // B's columns from 0 (128 > 100: zeros past the end).
        let (m0, n0) = (-4i32, 0i32);
        type Map<'a> = TensorMap<'a, bf16, 2, 64, 64, Sw128>;
        type A = OperandTile<bf16, 64, 64, KMajor<Sw128>>;
        type B = OperandTile<bf16, 128, 64, MnMajor<Sw128>>;
        type Bt = OperandTile<bf16, 128, 64, KMajor<Sw128>>;
        for transposed in [false, true] {
            let out = Mutex::new(vec![f32::NAN; 64 * 128]);
            let shape = LaunchShape {
                grid: Dim3::x(1),
                block: Dim3::x(128),
                dynamic_shared_bytes: (64 + 128) * 64 * 2 + 8,
            };
            launch("tma_wgmma", shape, &|| {
                // SAFETY: the descriptions are of this type; their tensors
                // live through the launch.
                let (ma, mb) = unsafe {
                    (
                        Map::from_raw(map_a),
                        Map::from_raw(if transposed { map_bt } else { map_b }),
                    )
                };
                let a_tile = shared::array::<bf16, { 64 * 64 }>();
                let b_tile = a_tile.after::<bf16, { 128 * 64 }>();
                let bars = MBarriers::init(b_tile.after::<u64, 1>(), [1]);
                let full = bars.get(0);
                let a_op = A::new(a_tile).unwrap();
                let (b_op, bt_op) = (B::new(b_tile).unwrap(), Bt::new(b_tile).unwrap());
                if thread::linear_thread_id() == 0 {
                    full.arrive_expect_tx(A::BYTES + B::BYTES);
                    ma.load_operand([0, m0], a_op, full);
                    if transposed {
                        mb.load_operand([0, n0], bt_op, full);
                    } else {
                        mb.load_operand([n0, 0], b_op, full);
                    }
                }
                full.wait(&mut Phase::FIRST.clone());
                let mut acc = Accumulator::<128>::zero();
                {
                    let mut run = acc.start();
                    if transposed {
                        run.mma(a_op.descriptor::<0>(), bt_op.descriptor::<0>());
                        run.mma(a_op.descriptor::<1>(), bt_op.descriptor::<1>());
                        run.mma(a_op.descriptor::<2>(), bt_op.descriptor::<2>());
                        run.mma(a_op.descriptor::<3>(), bt_op.descriptor::<3>());
                    } else {
                        run.mma(a_op.descriptor::<0>(), b_op.descriptor::<0>());
                        run.mma(a_op.descriptor::<1>(), b_op.descriptor::<1>());
                        run.mma(a_op.descriptor::<2>(), b_op.descriptor::<2>());
                        run.mma(a_op.descriptor::<3>(), b_op.descriptor::<3>());
                    }
                }
                let t = thread_in_warpgroup();
                let mut out = out.lock().unwrap();
                for (i, &v) in acc.regs().iter().enumerate() {
                    let (row, col) = Accumulator::<128>::coord(t, i);
                    out[row * 128 + col] = v;
                }
            })
            .unwrap();
            let out = out.into_inner().unwrap();
            for row in 0..64 {
                for col in 0..128 {
                    let r = row as i64 + i64::from(m0);
                    let c = col as i64 + i64::from(n0);
                    let want: f64 = if (0..m as i64).contains(&r) && (0..n as i64).contains(&c) {
                        (0..k)
                            .map(|kk| a_val(r as usize, kk) * b_val(kk, c as usize))
                            .sum()
                    } else {
                        0.0
                    };
                    assert_eq!(
                        out[row * 128 + col],
                        want as f32,
                        "element ({row}, {col}), B transposed: {transposed}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_map_of_another_type_is_refused_by_name() {
        let t = aligned::<f32>(64, |i| i as f32);
        let desc = TensorDesc::new(
            t.as_ptr().cast(),
            256,
            &[16, 4],
            &[64],
            &[16, 4],
            4,
            Swizzle::None,
        )
        .unwrap();
        // SAFETY: refused before any use.
        let refused = std::panic::catch_unwind(|| unsafe {
            TensorMap::<f32, 2, 16, 8, Unswizzled>::from_raw(desc)
        });
        let message = *refused.err().unwrap().downcast::<String>().unwrap();
        assert!(
            message.contains("box [16, 4]") && message.contains("box [16, 8]"),
            "{message}"
        );
    }

    /// Each rule of `TensorDesc::new`, broken once, is refused naming its
    /// field; the same map with it kept is accepted.
    #[test]
    fn tensor_maps_are_checked_field_by_field() {
        let t = aligned::<u16>(64 * 64, |_| 0);
        let base: *const u8 = t.as_ptr().cast();
        let bytes = 64 * 64 * 2;
        let ok = |dims: &[u64], strides: &[u64], boxes: &[u32], sw| {
            TensorDesc::new(base, bytes, dims, strides, boxes, 2, sw)
        };
        assert!(ok(&[64, 64], &[128], &[64, 8], Swizzle::B128).is_ok());
        let cases: [(Result<TensorDesc, _>, &str); 9] = [
            (
                ok(
                    &[64, 64, 1, 1, 1, 1],
                    &[128, 128, 128, 128, 128],
                    &[1; 6],
                    Swizzle::None,
                ),
                "tensorRank",
            ),
            (ok(&[64, 64], &[], &[64, 8], Swizzle::None), "globalStrides"),
            (
                TensorDesc::new(
                    base.wrapping_add(2),
                    bytes - 2,
                    &[8, 8],
                    &[128],
                    &[8, 8],
                    2,
                    Swizzle::None,
                ),
                "globalAddress",
            ),
            (ok(&[0, 64], &[128], &[8, 8], Swizzle::None), "globalDim[0]"),
            (
                ok(&[60, 64], &[120], &[8, 8], Swizzle::None),
                "globalStrides[0]",
            ),
            (ok(&[64, 65], &[128], &[8, 8], Swizzle::None), "globalDim"),
            (ok(&[64, 64], &[128], &[8, 257], Swizzle::None), "boxDim[1]"),
            (ok(&[64, 64], &[128], &[4, 8], Swizzle::None), "boxDim[0]"),
            (ok(&[64, 64], &[128], &[64, 8], Swizzle::B64), "boxDim[0]"),
        ];
        for (i, (result, field)) in cases.into_iter().enumerate() {
            let e = result.expect_err(&format!("case {i} accepted"));
            assert_eq!(e.field, field, "case {i}: {e}");
        }
    }

    /// What a TMA-store test run plants (each one thing a kernel can get wrong).
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    enum Plant {
        /// Nothing: the correct protocol.
        None,
        /// Thread 5 writes its staging elements and does not fence them.
        NoFence,
        /// The issuer never waits for its stores' reads.
        NoWait,
        /// The issuer stores box [0, 0] twice.
        Twice,
        /// The issuer stores box [2, 0] (the tile has 2 × 1).
        OutsideTile,
        /// The matrix has 45 columns (180 bytes a row: not a multiple of
        /// 16), so the right tiles' boxes reach into the last 16-byte chunk.
        RaggedChunk,
    }

    const STORE_ROWS: usize = 37;
    /// 176 bytes a row, a multiple of 16 (a TMA store writes whole 16-byte
    /// chunks of a row: [`Plant::RaggedChunk`] has 45), ragged for the tiles.
    const STORE_COLS: usize = 44;
    const STORE_LD: usize = 48;
    const STORE_BATCHES: usize = 2;
    /// Stacked batches, 16 bytes past the last element of the one before.
    const STORE_BATCH_STRIDE: usize = STORE_ROWS * STORE_LD + 4;
    const STORE_PAD: f32 = -1.0;

    /// The value the test writes at (batch, row, col): distinct, not the pad.
    fn stored(b: usize, r: usize, c: usize) -> f32 {
        (100_000 * b + 1000 * r + c) as f32
    }

    /// A persistent launch of `grid` blocks of 64 threads storing, by TMA,
    /// 2 batches of a 37 × 44 f32 matrix (rows 48 apart; 45 columns with
    /// [`Plant::RaggedChunk`]) in 32 × 32 tiles,
    /// each tile as two 32-column × 16-row boxes staged in two swizzled
    /// shared tiles: every thread writes its share of the staging (at the
    /// swizzled place of each element), fences it, a barrier, thread 0
    /// stores both boxes, commits and waits for their reads, a barrier.
    /// Returns the buffer.
    fn store_run<S: Mode>(grid: u32, plant: Plant) -> Result<Vec<f32>, Box<EmuError>> {
        use crate::emu::{OutputBuffer, launch_with_outputs};
        let len = STORE_BATCH_STRIDE * STORE_BATCHES;
        let cols = STORE_COLS + usize::from(plant == Plant::RaggedChunk);
        let mut backing = aligned::<f32>(len, |_| STORE_PAD);
        let base = backing.as_mut_ptr().cast::<f32>();
        let desc = TensorDesc::new(
            base.cast_const().cast(),
            len * 4,
            &[cols as u64, STORE_ROWS as u64, STORE_BATCHES as u64],
            &[STORE_LD as u64 * 4, STORE_BATCH_STRIDE as u64 * 4],
            &[32, 16, 1],
            4,
            S::SWIZZLE,
        )
        .unwrap();
        let (ptr, addr) = (base as usize, base as usize);
        let shape = LaunchShape {
            grid: Dim3::x(grid),
            block: Dim3::x(64),
            dynamic_shared_bytes: 2 * 512 * 4,
        };
        let out = OutputBuffer {
            name: "c",
            addr,
            len,
            elem_bytes: 4,
        };
        type Walk = TileWalk<32, 32, 16, 32, 2>;
        launch_with_outputs("tma_store", shape, &[out], &|| {
            // SAFETY: the buffer lives through the launch and nothing else
            // writes it; the map is of exactly this matrix.
            let c = unsafe {
                let matrix = OutMatrix::<f32, Walk>::from_raw(
                    ptr as *mut f32,
                    len,
                    STORE_ROWS,
                    cols,
                    STORE_LD,
                    STORE_BATCHES,
                    STORE_BATCH_STRIDE,
                );
                StoreMatrix::<f32, Walk, 32, 16, S>::from_raw(desc, matrix)
            };
            let staging = [
                shared::array::<f32, 512>(),
                shared::array::<f32, 512>().after::<f32, 512>(),
            ];
            let issuer = StoreIssuer::new();
            if issuer.is_some() {
                c.prefetch();
            }
            let me = thread::linear_thread_id() as usize;
            for tile in c.walk() {
                let (b, r0, c0) = c.walk_origin(&tile);
                for (part, stage) in staging.iter().enumerate() {
                    for i in (me..512).step_by(64) {
                        let (r, col) = (r0 + 16 * part + i / 32, c0 + i % 32);
                        stage.store(S::SWIZZLE.apply(4 * i) / 4, stored(b, r, col));
                    }
                }
                if !(plant == Plant::NoFence && me == 5) {
                    fence_for_store();
                }
                crate::sync::sync_threads();
                if let Some(issuer) = &issuer {
                    c.store(issuer, &tile, [0, 0], staging[0]);
                    let second = match plant {
                        Plant::Twice => [0, 0],
                        Plant::OutsideTile => [2, 0],
                        _ => [1, 0],
                    };
                    c.store(issuer, &tile, second, staging[1]);
                    issuer.commit();
                    if plant != Plant::NoWait {
                        issuer.wait_read::<0>();
                    }
                }
                crate::sync::sync_threads();
            }
        })?;
        // SAFETY: `backing` holds `len` f32s.
        Ok(unsafe { core::slice::from_raw_parts(base, len) }.to_vec())
    }

    /// Every element of both batches is the stored value, exactly once
    /// (the global race detector is on), and nothing outside the matrix —
    /// the 3 padding columns of each row, the 4 elements between the
    /// batches — is written, on 1, 3 and 8 blocks (8 tiles: 4 per batch,
    /// the right and bottom ones ragged), unswizzled and 128B-swizzled.
    #[test]
    fn tma_stores_write_each_owned_box_clipped_to_the_matrix() {
        fn check<S: Mode>() {
            for grid in [1, 3, 8] {
                let c = store_run::<S>(grid, Plant::None).unwrap();
                for (i, &v) in c.iter().enumerate() {
                    let (b, rest) = (i / STORE_BATCH_STRIDE, i % STORE_BATCH_STRIDE);
                    let (r, col) = (rest / STORE_LD, rest % STORE_LD);
                    let want = if r < STORE_ROWS && col < STORE_COLS {
                        stored(b, r, col)
                    } else {
                        STORE_PAD
                    };
                    assert_eq!(v, want, "{:?}, grid {grid}, element {i}", S::SWIZZLE);
                }
            }
        }
        check::<Unswizzled>();
        check::<Sw128>();
    }

    /// Each planted mistake is reported as what it is, naming the thread
    /// (its correct twin is the test above).
    #[test]
    fn tma_store_protocol_mistakes_are_reported() {
        use crate::emu::TmaStoreProblem;
        let problem = |plant, grid| match store_run::<Sw128>(grid, plant).unwrap_err().fault {
            Fault::TmaStore { problem, .. } => problem,
            other => panic!("{plant:?}: {other:?}"),
        };
        assert_eq!(
            problem(Plant::NoFence, 1),
            TmaStoreProblem::UnfencedSource {
                // Thread 5's first element, the box's 5th, at its swizzled place.
                offset: Sw128::SWIZZLE.apply(4 * 5),
                writer: Dim3::new(5, 0, 0),
            }
        );
        // On one block the next tile's staging writes meet the pending
        // stores; on 8 (a tile each), the issuer exits with them.
        assert!(matches!(
            problem(Plant::NoWait, 1),
            TmaStoreProblem::SourceInUse { issuer, .. } if issuer == Dim3::new(0, 0, 0)
        ));
        assert_eq!(
            problem(Plant::NoWait, 8),
            TmaStoreProblem::NotWaited { stores: 2 }
        );
        assert_eq!(
            problem(Plant::Twice, 1),
            TmaStoreProblem::Overlapping { corner: [0, 0, 0] }
        );
        // 45 f32 columns: the right tiles' boxes reach past column 44, and
        // a GPU writes columns 45..48 (the rest of the 16-byte chunk).
        assert_eq!(
            problem(Plant::RaggedChunk, 1),
            TmaStoreProblem::PastTheRow {
                cols: 45,
                end: 48,
                elem: 4
            }
        );
        let err = store_run::<Sw128>(1, Plant::OutsideTile).unwrap_err();
        assert!(
            matches!(&err.fault, Fault::Panic { message, .. } if message.contains("outside the tile")),
            "{err}"
        );
    }
}
