//! Disjoint writes by construction: outputs whose threads own their elements.
//!
//! [`Out::at`] proves an index in bounds, not that it is this thread's: every
//! thread that asks for index 0 gets a slot for it, and two threads writing
//! one element is a data race. The forms here hand a thread slots only for
//! elements that the launch assigns to it and to no other thread, so a kernel
//! that writes an output through them cannot race on it.
//!
//! **What a thread owns comes from its own launch coordinates**, read inside
//! the view's methods: there is no index argument to pass another thread's
//! element, and the owned slots ([`Mine`], [`Mine2`], [`Chunk`]) have private
//! fields, are not `Clone`, not `Send`, not [`SharedElement`](crate::shared::SharedElement)
//! (so they cannot be written to shared memory for another thread to take),
//! and borrow the view that minted them, so they cannot outlive it or be
//! used after it is reshaped.
//!
//! **How the threads share an output is part of its type**, the `M` of
//! `Out<T, M>` and [`OutMatrix<T, M>`], written in the kernel's signature, so
//! every thread of the launch uses the same partition of the output and
//! device code cannot pick a different one per thread:
//!
//! | mapping | declared as | a thread gets |
//! | --- | --- | --- |
//! | [`Indexed`] (default) | `Out<T>` | [`Out::at`]`(i)`: any index in bounds; **not exclusive** |
//! | [`Elements`] | `Out<T, Elements>` | elements `r, r + n, r + 2n, …` ([`Out::grid_stride`]; [`Out::mine`] is the first), `r` its rank on the grid's x-line and `n` the threads on it |
//! | [`ThreadChunks<N>`] | `Out<T, ThreadChunks<N>>` | units `u = r, r + n, …`, each the `N` elements `N·u ..`, as a [`Chunk`] |
//! | [`WarpChunks<N>`] | `Out<T, WarpChunks<N>>` | the same per warp: every lane walks its warp's units, lane 0 writes them ([`GroupChunk::leader`]) |
//! | [`BlockChunks<N>`] | `Out<T, BlockChunks<N>>` | the same per block: thread 0 of the block writes |
//! | [`Elements`] | `OutMatrix<T>` | elements `(y + j·ny, x + i·nx)` ([`OutMatrix::grid_stride`]; [`OutMatrix::mine`] is `(y, x)`): the thread's global (y, x) and the grid's extent |
//! | [`BlockTiles<TM, TN>`] | `OutMatrix<T, BlockTiles<TM, TN>>` | block (y, x) owns the `TM × TN` tile at `(y·TM, x·TN)` (clipped to the matrix; batch z of the bound batches); its threads split it packed: element `e` of the clipped tile's `rows × cols` (row-major) to thread `e mod threads` ([`BlockTile::elements`]), so a tile of whole rows of a packed matrix is written as one contiguous run |
//! | [`MicroTiles<TM, TN, MR, MC>`] | `OutMatrix<T, MicroTiles<TM, TN, MR, MC>>` | the same block tiles, cut into `MR × MC` micro-tiles numbered row-major: micro-tile `t` to the thread whose linear id is `t` ([`OutMatrix::micro_tile`]), the SIMT GEMM epilogue; batched by z ([`OutMatrix::batch`]). `MicroTiles<TM, TN, MR, MC, RI, RJ>`: the tile first split into `RI × RJ` sub-tiles, the thread owning micro-tile `t` of each (the warp-tiled SIMT GEMM) |
//! | [`StagedTiles<TM, TN, MR, MC, RI>`] | `OutMatrix<T, StagedTiles<TM, TN, MR, MC, RI>>` | the same block tiles, written one of two ways decided once per block from the tile ([`OutMatrix::tile_stores`]): `MicroTiles`' micro-tiles as 16-byte row vectors where every row of them is whole and aligned, else the whole tile by the block's element walk (as `BlockTiles`), from values the block staged: the depthwise NCHW epilogue, whose ragged-width planes are then written a warp's consecutive elements at a time |
//! | [`WarpTiles<TM, TN>`] | `OutMatrix<T, WarpTiles<TM, TN>>` | warp `w` of block (y, x) owns the `TM × TN` tile at `(y·TM, (x·warps + w)·TN)`; its lanes write the `mma` accumulator layout ([`WarpTile::store_mma_c`]), the conv epilogue; [`WarpTile::update_mma_c`] is the same map; batch z of the bound batches ([`OutMatrix::batch`]) |
//! | [`WarpGrid<BM, BN, TM, TN, G>`] | `OutMatrix<T, WarpGrid<BM, BN, TM, TN, G>>` | block (y, x) owns the `BM × BN` tile at `(y·BM, x·BN)` (`G = 1`, the default) or at [`grouped_block`]`(y, x, G)`'s (bands of `G` tile rows, for L2 reuse), cut into a `(BM/TM) × (BN/TN)` grid of `TM × TN` warp tiles numbered row-major: warp `w` owns warp tile `w` ([`OutMatrix::warp_offset`]); warps past the grid own nothing; written as for `WarpTiles` (or, with `RP` set, with the accumulators' rows paired: [`MmaOrder`]), the tensor-core GEMM epilogue; batch z of the bound batches |
//! | [`TileWalk<BM, BN, TM, TN, G>`] | `OutMatrix<T, TileWalk<BM, BN, TM, TN, G>>` | a persistent kernel's: block `b` of a 1-D grid of `n` owns tiles `b, b + n, …` ([`OutMatrix::walk`]) of the `batches × ⌈rows/BM⌉ × ⌈cols/BN⌉` block tiles (batch by batch, each batch in [`grouped_block`]'s bands of `G` tile rows), each cut into warp tiles as [`WarpGrid`]'s ([`OutMatrix::walk_tile`]), whose lanes write 16-byte runs of rows where C's rows start on 16 bytes, else 32 consecutive elements a request ([`RunTile`]); blocks off the x-line own nothing |
//!
//! The 1-D forms use the grid's x-line (threads and blocks with y = z = 0;
//! the others own nothing, so launch them with a 1-D grid and block); the
//! 2-D forms use the z = 0 plane (and the first batch), except the tiles
//! ([`BlockTiles`], [`MicroTiles`], [`WarpTiles`], [`WarpGrid`]), for which z is the
//! batch ([`TileWalk`] numbers the batches' tiles instead): blocks of z-index
//! `z` write batch `z` of the bound batches, and blocks past the last batch
//! nothing ([`OutMatrix::batch`]). Within it
//! every thread has a distinct rank (or (y, x)), whatever the grid: a
//! grid-stride walk `r + k·n` never meets another thread's, so there is no
//! launch the host has to refuse.
//!
//! **Batches** are `batches` matrices of `rows × cols` (rows `row_stride`
//! apart), batch `b` starting `b·batch_stride` elements in. The host binds
//! them (`warpforge::DeviceBuffer::batched_matrix_mut`) only if no two can
//! share an element, by one of two sufficient rules ([`batched_extent`],
//! checked arithmetic throughout, re-checked by the kernel's view):
//!
//! | layout | condition | e.g. |
//! | --- | --- | --- |
//! | stacked | `batch_stride ≥ (rows − 1)·row_stride + cols` | a batched GEMM's C, packed (`m·ldc`) or padded |
//! | side by side | `batch_stride ≥ cols` and `(batches − 1)·batch_stride + cols ≤ row_stride` | groups of an NHWC convolution: column ranges of one `[N·P·Q × K]` matrix |
//!
//! Anything else is refused with the sizes named; a plain binding
//! (`matrix_mut`) is one batch.
//!
//! **What the mapping depends on comes from the host.** A 1-D output is the
//! whole buffer the host passed. An [`OutMatrix`] is a kernel parameter whose
//! rows, columns, row stride, batch count and batch stride the host binds at
//! launch (`warpforge::DeviceBuffer::matrix_mut` and `batched_matrix_mut`,
//! checked there to fit the buffer with disjoint batches),
//! so every thread sees the same shape; [`Out::into_2d`] views, whose shape
//! each thread picks, have only the non-exclusive [`Out2::at`](crate::guard::Out2::at).
//!
//! **One partition per mapping.** Each view offers one map from threads to
//! elements, so threads that take different branches cannot get slots for
//! one element by different routes: where a view has several methods they
//! use the same map ([`Out::mine`] is the first element of
//! [`Out::grid_stride`], [`WarpTile::store_mma_c`] is
//! [`WarpTile::update_mma_c`]), and a second partition of the same tiles is a
//! second mapping ([`BlockTiles`]' element walk, [`MicroTiles`]' micro-tiles).
//!
//! What remains: a kernel with an `Indexed` output (or atomics on it) can
//! still race on that output; the guarantee is per output, for outputs
//! declared with an owned mapping.
//!
//! ```
//! use warpforge_device::own::{Elements, WarpChunks};
//! use warpforge_device::Out;
//!
//! // y = a·x + y: each index is written by the one thread that owns it.
//! fn axpy(a: f32, x: &[f32], mut y: Out<f32, Elements>) {
//!     for mut yi in y.grid_stride() {
//!         let Some(&xi) = x.get(yi.index()) else { break };
//!         yi.set(a * xi + yi.get());
//!     }
//! }
//!
//! // One warp per unit of two words; lane 0 writes them.
//! fn per_warp(units: u64, mut states: Out<u64, WarpChunks<2>>) {
//!     for mut unit in states.chunks(units) {
//!         let u = unit.unit(); // every lane of the warp sees every unit: shuffle here
//!         if let Some(chunk) = unit.leader() {
//!             chunk.write([u, u + 1]);
//!         }
//!     }
//! }
//! # let _ = (axpy, per_warp);
//! ```

use crate::guard::{Out, Slot, fits_2d};
use crate::mma::{FragC, MmaOrder};
use crate::thread::{self, WARP_SIZE};
use core::marker::PhantomData;
use core::num::NonZeroU32;

mod sealed {
    pub trait Sealed {}
}

/// How the threads of a launch share a 1-D output: the `M` of `Out<T, M>`. Sealed.
pub trait Mapping: sealed::Sealed {}

/// How the threads of a launch share an [`OutMatrix`]: its `M`. Sealed.
pub trait Mapping2: sealed::Sealed {}

/// `Out<T>`: any thread may write any index in bounds ([`Out::at`]); not exclusive.
pub enum Indexed {}

/// Each thread owns the elements of its grid-stride walk (1-D), or of its
/// (y, x) walk (2-D).
pub enum Elements {}

/// Each thread owns units of `N` consecutive elements, grid-striding.
pub enum ThreadChunks<const N: usize> {}

/// Each warp owns units of `N` consecutive elements, grid-striding over the
/// warps; lane 0 writes them.
pub enum WarpChunks<const N: usize> {}

/// Each block owns units of `N` consecutive elements, grid-striding over the
/// blocks; thread 0 writes them.
pub enum BlockChunks<const N: usize> {}

/// Each block owns the `TM × TN` tile at its (y, x) of batch z; its threads
/// split the tile's part inside the matrix, packed row-major.
pub enum BlockTiles<const TM: usize, const TN: usize> {}

/// Each block owns the `TM × TN` tile at its (y, x), cut into `MR × MC`
/// micro-tiles: micro-tile `t` (row-major) to the thread with linear id `t`.
/// A mapping of its own, not a method of [`BlockTile`]: a tile that offered
/// both this and the element walk would let two threads own one element
/// (thread 4 by the walk, thread 1 by 4 × 4 micro-tiles, both (0, 4)).
///
/// With `RI × RJ` other than the default `1 × 1`, the tile is first split
/// into an `RI × RJ` grid of `(TM / RI) × (TN / RJ)` sub-tiles, each cut
/// into `MR × MC` micro-tiles numbered row-major, and thread `t` owns
/// micro-tile `t` of every sub-tile: an `RI·MR × RJ·MC` register tile whose
/// pieces lie `TM / RI` rows and `TN / RJ` columns apart. That is the
/// warp-tiled SIMT GEMM's layout: adjacent threads read adjacent 16-byte
/// vectors of the shared tiles, free of bank conflicts.
pub enum MicroTiles<
    const TM: usize,
    const TN: usize,
    const MR: usize,
    const MC: usize,
    const RI: usize = 1,
    const RJ: usize = 1,
> {}

/// Each block owns the `TM × TN` tile at its (y, x) of batch z, and writes
/// it one of two ways, decided once for the whole block from the tile alone
/// ([`OutMatrix::tile_stores`]):
///
/// - **row vectors** where every row of every micro-tile is one aligned
///   16-byte vector (the tile's columns a multiple of `MC`, its first
///   element and the row stride on 16 bytes): thread `t` owns micro-tile
///   `t` of each of the `RI` sub-tiles, exactly as
///   `MicroTiles<TM, TN, MR, MC, RI>` cuts them, and writes each row with
///   one 16-byte store ([`RowVectors`]);
/// - **the block's element walk** otherwise: the elements of the clipped
///   tile in the order of its addresses, lined up on 32-byte sectors
///   ([`StagedTile::fill`]), from values the block staged (in shared
///   memory), so that a warp's stores are whole sectors of consecutive
///   elements and each sector of the tile is written by one store even
///   where the tile's rows are not whole vectors — where per-thread element
///   stores of `MC`-wide strips would touch a sector once per element.
///
/// Each is a partition of the tile, and every thread of a block takes the
/// same one (the decision reads only the binding and the block's tile,
/// which all its threads share), so two threads never own one element. A
/// mapping of its own (not a method of [`MicroTiles`] or [`BlockTiles`]):
/// a view that also handed out its partitions separately would let one
/// thread take a micro-tile while another walks the tile.
pub enum StagedTiles<
    const TM: usize,
    const TN: usize,
    const MR: usize,
    const MC: usize,
    const RI: usize = 1,
> {}

/// Each warp owns a `TM × TN` tile (multiples of the `mma` 16 × 8); its lanes
/// write the accumulator layout.
pub enum WarpTiles<const TM: usize, const TN: usize> {}

/// Each block owns a `BM × BN` tile, cut into a `(BM / TM) × (BN / TN)`
/// grid of `TM × TN` warp tiles (multiples of the `mma` 16 × 8) numbered
/// row-major; warp `w` of the block owns warp tile `w`, its lanes writing
/// the accumulator layout. The CUTLASS-style block tile with a 2-D grid of
/// warps; `WarpTiles<TM, TN>` is the one-row case with the block's warp
/// count as its width.
///
/// Which tile a block owns: with `G = 1` (the default) the one at its
/// (y, x); with `G > 1` the one at [`grouped_block`]`(y, x, G)`, the
/// launch's blocks taken in their launch order (x fastest) down bands of
/// `G` tile rows, column by column, so that the blocks resident at once
/// share `G` row panels of `A` and few column panels of `B` in L2 (a
/// bijection of the grid: still one block per tile).
///
/// Where a lane's accumulator elements go: [`c_coord`](crate::mma::c_coord)'s
/// layout, or with rows paired (`RP`) as an `mma` that read a k-major tf32
/// A with 64-bit loads computed them ([`MmaOrder`]). The order is part of
/// the type, so every lane of every warp writes through the one map (two
/// lanes choosing different maps could write one element).
pub enum WarpGrid<
    const BM: usize,
    const BN: usize,
    const TM: usize,
    const TN: usize,
    const G: usize = 1,
    const RP: bool = false,
> {}

/// A persistent kernel's output: its blocks walk the tiles instead of being
/// one each. The `batches × ⌈rows / BM⌉ × ⌈cols / BN⌉` block tiles of the
/// bound batches are numbered batch by batch, and within a batch in
/// [`grouped_block`]'s order of bands of `G` tile rows; block `b` of a 1-D
/// grid of `n` blocks owns tiles `b, b + n, b + 2n, …`
/// ([`OutMatrix::walk`]) and cuts each into warp tiles as [`WarpGrid`]
/// does ([`OutMatrix::walk_tile`]). Blocks off the grid's x-line (y or z ≠
/// 0) own nothing. Launch as many blocks as fit on the GPU at once, and each
/// keeps its shared memory and its pipeline from one tile to the next (the
/// loads of its next tile overlap the epilogue of this one).
pub enum TileWalk<
    const BM: usize,
    const BN: usize,
    const TM: usize,
    const TN: usize,
    const G: usize = 1,
> {}

impl sealed::Sealed for Indexed {}
impl sealed::Sealed for Elements {}
impl<const N: usize> sealed::Sealed for ThreadChunks<N> {}
impl<const N: usize> sealed::Sealed for WarpChunks<N> {}
impl<const N: usize> sealed::Sealed for BlockChunks<N> {}
impl<const TM: usize, const TN: usize> sealed::Sealed for BlockTiles<TM, TN> {}
impl<
    const TM: usize,
    const TN: usize,
    const MR: usize,
    const MC: usize,
    const RI: usize,
    const RJ: usize,
> sealed::Sealed for MicroTiles<TM, TN, MR, MC, RI, RJ>
{
}
impl<const TM: usize, const TN: usize, const MR: usize, const MC: usize, const RI: usize>
    sealed::Sealed for StagedTiles<TM, TN, MR, MC, RI>
{
}
impl<const TM: usize, const TN: usize> sealed::Sealed for WarpTiles<TM, TN> {}
impl<
    const BM: usize,
    const BN: usize,
    const TM: usize,
    const TN: usize,
    const G: usize,
    const RP: bool,
> sealed::Sealed for WarpGrid<BM, BN, TM, TN, G, RP>
{
}
impl<const BM: usize, const BN: usize, const TM: usize, const TN: usize, const G: usize>
    sealed::Sealed for TileWalk<BM, BN, TM, TN, G>
{
}
impl Mapping for Indexed {}
impl Mapping for Elements {}
impl<const N: usize> Mapping for ThreadChunks<N> {}
impl<const N: usize> Mapping for WarpChunks<N> {}
impl<const N: usize> Mapping for BlockChunks<N> {}
impl Mapping2 for Elements {}
impl<const TM: usize, const TN: usize> Mapping2 for BlockTiles<TM, TN> {}
impl<
    const TM: usize,
    const TN: usize,
    const MR: usize,
    const MC: usize,
    const RI: usize,
    const RJ: usize,
> Mapping2 for MicroTiles<TM, TN, MR, MC, RI, RJ>
{
}
impl<const TM: usize, const TN: usize, const MR: usize, const MC: usize, const RI: usize> Mapping2
    for StagedTiles<TM, TN, MR, MC, RI>
{
}
impl<const TM: usize, const TN: usize> Mapping2 for WarpTiles<TM, TN> {}
impl<
    const BM: usize,
    const BN: usize,
    const TM: usize,
    const TN: usize,
    const G: usize,
    const RP: bool,
> Mapping2 for WarpGrid<BM, BN, TM, TN, G, RP>
{
}
impl<const BM: usize, const BN: usize, const TM: usize, const TN: usize, const G: usize> Mapping2
    for TileWalk<BM, BN, TM, TN, G>
{
}

// ---------------------------------------------------------------------------
// Launch coordinates: the only source of what a thread owns.

/// Where a thread, warp or block stands on the grid's x-line: its rank, the
/// number of its kind on the line (the step of its walks), whether it is on
/// the line at all, and whether this thread is its designated writer.
///
/// Plain fields, not an `Option`: the kernels' loops then test only the walk
/// bound, which keeps ptxas's view of a warp-uniform loop (the reductions'
/// shuffles stay on the fast path).
#[derive(Clone, Copy)]
struct Line {
    rank: u64,
    count: u64,
    on: bool,
    leader: bool,
}

/// This thread on the grid's x-line: rank `blockIdx.x·blockDim.x +
/// threadIdx.x` (distinct per thread) of `gridDim.x·blockDim.x`; off the line
/// if its thread or block index has y or z ≠ 0. Both fit in 42 bits, so walks
/// `rank + k·count` below `2⁶³` never wrap.
#[inline(always)]
fn thread_line() -> Line {
    let (t, b) = (thread::thread_idx(), thread::block_idx());
    let d = u64::from(thread::block_dim().x);
    Line {
        rank: u64::from(b.x) * d + u64::from(t.x),
        count: u64::from(thread::grid_dim().x) * d,
        on: (t.y | t.z | b.y | b.z) == 0,
        leader: true,
    }
}

/// This thread's warp on the grid's x-line of blocks: rank
/// `blockIdx.x·warps_per_block + warp` (warps as the hardware forms them, from
/// the linear thread id) of `gridDim.x·warps_per_block`; leader: lane 0; off
/// the line in a block with y or z ≠ 0.
#[inline(always)]
fn warp_line() -> Line {
    let b = thread::block_idx();
    let linear = thread::linear_thread_id();
    let per_block = u64::from(thread::warps_per_block());
    Line {
        rank: u64::from(b.x) * per_block + u64::from(linear / WARP_SIZE),
        count: u64::from(thread::grid_dim().x) * per_block,
        on: (b.y | b.z) == 0,
        leader: linear.is_multiple_of(WARP_SIZE),
    }
}

/// This thread's block on the grid's x-line: rank `blockIdx.x` of
/// `gridDim.x`; leader: thread 0 of the block; off the line if y or z ≠ 0.
#[inline(always)]
fn block_line() -> Line {
    let b = thread::block_idx();
    Line {
        rank: u64::from(b.x),
        count: u64::from(thread::grid_dim().x),
        on: (b.y | b.z) == 0,
        leader: thread::linear_thread_id() == 0,
    }
}

/// The walk `start, start + step, …` below `end`.
#[derive(Clone, Copy)]
struct Walk {
    next: u64,
    end: u64,
    step: u64,
}

impl Walk {
    /// `line`'s walk below `end`; empty off the line.
    #[inline(always)]
    fn new(line: Line, end: u64) -> Walk {
        Walk {
            next: if line.on { line.rank } else { end },
            end,
            step: line.count,
        }
    }

    #[inline(always)]
    fn next(&mut self) -> Option<u64> {
        if self.next < self.end {
            let i = self.next;
            // No wrap: i < end ≤ 2⁶³ and step < 2⁴² (the launch's extent).
            self.next = i + self.step;
            Some(i)
        } else {
            None
        }
    }
}

// ---------------------------------------------------------------------------
// 1-D: one element per step.

/// One element of an output that this thread alone owns, with its index.
///
/// Minted only by the output's own methods from the thread's launch
/// coordinates; borrows the output; not `Clone`, not `Send`.
pub struct Mine<'v, T> {
    index: usize,
    slot: Slot<'v, T>,
}

impl<'v, T: Copy> Mine<'v, T> {
    /// The element's index in the output.
    #[inline(always)]
    pub fn index(&self) -> usize {
        self.index
    }

    /// Reads the element.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn get(&self) -> T {
        self.slot.get()
    }

    /// Writes the element.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn set(&mut self, value: T) {
        self.slot.set(value)
    }

    /// The element's slot.
    #[inline(always)]
    pub fn slot(&mut self) -> &mut Slot<'v, T> {
        &mut self.slot
    }

    /// The element's slot, giving up the index.
    #[inline(always)]
    pub fn into_slot(self) -> Slot<'v, T> {
        self.slot
    }
}

/// This thread's elements of an `Out<T, Elements>`, in increasing order
/// ([`Out::grid_stride`]).
pub struct GridStride<'v, T> {
    ptr: *mut T,
    walk: Walk,
    _view: PhantomData<&'v mut [T]>,
}

impl<'v, T: Copy> Iterator for GridStride<'v, T> {
    type Item = Mine<'v, T>;

    #[inline(always)]
    fn next(&mut self) -> Option<Mine<'v, T>> {
        let i = self.walk.next()? as usize;
        Some(Mine {
            index: i,
            // SAFETY: i < len (the walk's end), so in bounds of the view the
            // iterator borrows mutably for 'v; the walk is strictly
            // increasing, so no two items of it share an element, and no other
            // thread's walk reaches i (ranks are distinct and below the step).
            slot: unsafe { Slot::from_element(self.ptr.add(i)) },
        })
    }

    /// The same elements as `next`, as a plain counted loop (see
    /// [`GroupChunks`]'s `for_each`).
    #[inline(always)]
    fn for_each<F: FnMut(Mine<'v, T>)>(self, mut f: F) {
        let GridStride { ptr, mut walk, .. } = self;
        while walk.next < walk.end {
            let i = walk.next as usize;
            f(Mine {
                index: i,
                // SAFETY: as in `next`.
                slot: unsafe { Slot::from_element(ptr.add(i)) },
            });
            walk.next += walk.step;
        }
    }
}

impl<'a, T: Copy> Out<'a, T, Elements> {
    /// This thread's elements: `r, r + n, r + 2n, …` below `len()`, where `r`
    /// is the thread's rank on the grid's x-line and `n` the threads on it
    /// (`global_index_x()` and `grid_stride_x()` in a 1-D launch). The walks
    /// of all threads partition the view, for any grid: every element is
    /// owned by exactly one thread.
    #[inline(always)]
    pub fn grid_stride(&mut self) -> GridStride<'_, T> {
        let (ptr, len) = self.raw_parts();
        GridStride {
            ptr,
            walk: Walk::new(thread_line(), len as u64),
            _view: PhantomData,
        }
    }

    /// Element `global_index_x()` if this thread is on the grid's x-line and
    /// it is in bounds: the one-thread-per-element form (the first element of
    /// [`grid_stride`](Self::grid_stride)).
    #[inline(always)]
    pub fn mine(&mut self) -> Option<Mine<'_, T>> {
        let (ptr, len) = self.raw_parts();
        let line = thread_line();
        let i = line.rank;
        (line.on && i < len as u64).then(|| Mine {
            index: i as usize,
            // SAFETY: in bounds (just checked); the rank is this thread's alone.
            slot: unsafe { Slot::from_element(ptr.add(i as usize)) },
        })
    }
}

// ---------------------------------------------------------------------------
// 1-D: units of N elements, owned by a thread, a warp or a block.

/// `N` consecutive elements (`N·unit ..`) that this thread (or its warp or
/// block, through [`GroupChunk::leader`]) alone writes.
pub struct Chunk<'v, T, const N: usize> {
    unit: u64,
    first: *mut T,
    _view: PhantomData<&'v mut [T; N]>,
}

impl<'v, T: Copy, const N: usize> Chunk<'v, T, N> {
    /// The unit: the chunk is elements `N·unit .. N·unit + N`.
    #[inline(always)]
    pub fn unit(&self) -> u64 {
        self.unit
    }

    /// Element `j` of the chunk (`N·unit + j`), if `j < N`.
    #[inline(always)]
    pub fn slot(&mut self, j: usize) -> Option<Slot<'_, T>> {
        // SAFETY: j < N and the chunk's N elements are in bounds (checked when
        // it was minted) and owned by this chunk alone; the slot borrows it.
        (j < N).then(|| unsafe { Slot::from_element(self.first.add(j)) })
    }

    /// Writes all `N` elements, each through its [`Slot`].
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn write(&mut self, values: [T; N]) {
        // An index loop, not `values.into_iter()`: the array iterator keeps
        // the array in local memory (40 bytes of stack in the reductions).
        let mut j = 0;
        while j < N {
            // SAFETY: j < N, as in `slot`.
            let mut slot = unsafe { Slot::from_element(self.first.add(j)) };
            slot.set(values[j]);
            j += 1;
        }
    }
}

/// A unit that this thread's warp or block owns: every thread of the owner
/// sees it (so they can shuffle or synchronise), one writes it.
pub struct GroupChunk<'v, T, const N: usize> {
    chunk: Chunk<'v, T, N>,
    leader: bool,
}

impl<'v, T: Copy, const N: usize> GroupChunk<'v, T, N> {
    /// The unit: elements `N·unit .. N·unit + N`.
    #[inline(always)]
    pub fn unit(&self) -> u64 {
        self.chunk.unit
    }

    /// The chunk, on the owner's designated writer (lane 0 of a warp,
    /// thread 0 of a block); `None` on every other thread.
    #[inline(always)]
    pub fn leader(&mut self) -> Option<&mut Chunk<'v, T, N>> {
        self.leader.then_some(&mut self.chunk)
    }
}

/// Units of a chunked output, in increasing order: `Chunk`s for
/// [`ThreadChunks`], [`GroupChunk`]s for [`WarpChunks`] and [`BlockChunks`].
pub struct Chunks<'v, T, const N: usize> {
    first: *mut T,
    walk: Walk,
    leader: bool,
    _view: PhantomData<&'v mut [T]>,
}

impl<'v, T, const N: usize> Chunks<'v, T, N> {
    /// The walk of `line` over `min(units, len / N)` units: only whole chunks.
    #[inline(always)]
    fn new(ptr: *mut T, len: usize, units: u64, line: Line) -> Self {
        const { assert!(N > 0, "a chunk has at least one element") };
        let whole = (len / N) as u64;
        Chunks {
            first: ptr,
            walk: Walk::new(line, units.min(whole)),
            leader: line.leader,
            _view: PhantomData,
        }
    }

    #[inline(always)]
    fn next_chunk(&mut self) -> Option<Chunk<'v, T, N>> {
        let u = self.walk.next()?;
        Some(Chunk {
            unit: u,
            // SAFETY (of the offset): u < len / N, so N·u + N ≤ len.
            first: unsafe { self.first.add(u as usize * N) },
            _view: PhantomData,
        })
    }
}

impl<'v, T: Copy, const N: usize> Iterator for Chunks<'v, T, N> {
    type Item = Chunk<'v, T, N>;

    #[inline(always)]
    fn next(&mut self) -> Option<Chunk<'v, T, N>> {
        self.next_chunk()
    }

    /// The same units as `next`, as a plain counted loop (see
    /// [`GroupChunks`]'s `for_each`).
    #[inline(always)]
    fn for_each<F: FnMut(Chunk<'v, T, N>)>(self, mut f: F) {
        let Chunks {
            first, mut walk, ..
        } = self;
        while walk.next < walk.end {
            let unit = walk.next;
            f(Chunk {
                unit,
                // SAFETY (of the offset): unit < len / N, as in `next_chunk`.
                first: unsafe { first.add(unit as usize * N) },
                _view: PhantomData,
            });
            walk.next = unit + walk.step;
        }
    }
}

/// Units of a warp- or block-owned output ([`WarpChunks`], [`BlockChunks`]).
pub struct GroupChunks<'v, T, const N: usize>(Chunks<'v, T, N>);

impl<'v, T: Copy, const N: usize> Iterator for GroupChunks<'v, T, N> {
    type Item = GroupChunk<'v, T, N>;

    #[inline(always)]
    fn next(&mut self) -> Option<GroupChunk<'v, T, N>> {
        let leader = self.0.leader;
        self.0
            .next_chunk()
            .map(|chunk| GroupChunk { chunk, leader })
    }

    /// The same units as `next`, as a plain counted loop: with the `Option`
    /// of `next` in the loop, ptxas no longer sees the loop as warp-uniform
    /// and puts a divergence check and a slow path around every shuffle in
    /// the body (+60 SASS instructions in `reduce_rows_sum_f32`).
    #[inline(always)]
    fn for_each<F: FnMut(GroupChunk<'v, T, N>)>(self, mut f: F) {
        let Chunks {
            first,
            mut walk,
            leader,
            ..
        } = self.0;
        while walk.next < walk.end {
            let unit = walk.next;
            f(GroupChunk {
                chunk: Chunk {
                    unit,
                    // SAFETY (of the offset): unit < len / N, as in `next_chunk`.
                    first: unsafe { first.add(unit as usize * N) },
                    _view: PhantomData,
                },
                leader,
            });
            walk.next = unit + walk.step;
        }
    }
}

/// A thread's units of a view that starts on a 16-byte boundary, whose `N`
/// elements are 16 bytes ([`Out::aligned_chunks`]): each chunk is one
/// aligned 16-byte vector.
pub struct AlignedChunks<'v, T, const N: usize>(Chunks<'v, T, N>);

/// A chunk of [`AlignedChunks`]: `N` elements, 16 bytes on a 16-byte
/// boundary, that this thread alone writes.
pub struct AlignedChunk<'v, T, const N: usize>(Chunk<'v, T, N>);

impl<T: crate::shared::SharedElement, const N: usize> AlignedChunk<'_, T, N> {
    /// The unit: the chunk is elements `N·unit .. N·unit + N`.
    #[inline(always)]
    pub fn unit(&self) -> u64 {
        self.0.unit
    }

    /// Writes all `N` elements with one 16-byte store.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn write(&mut self, values: [T; N]) {
        let p = self.0.first.cast::<crate::global::Vector16<T, N>>();
        #[cfg(not(target_arch = "nvptx64"))]
        crate::arch::global_access(p.cast(), 16, true);
        // SAFETY: the chunk's N elements are in bounds (checked when it was
        // minted) and this chunk's alone, and `self` borrows it mutably; they
        // are 16 bytes from a 16-byte boundary (`Out::aligned_chunks` checked
        // both for the view, and every chunk starts a multiple of 16 bytes
        // into it), so exactly one aligned `Vector16` of N elements
        // (`repr(C)`, no padding).
        unsafe { p.write(crate::global::Vector16(values)) };
    }
}

impl<'v, T: crate::shared::SharedElement, const N: usize> Iterator for AlignedChunks<'v, T, N> {
    type Item = AlignedChunk<'v, T, N>;

    #[inline(always)]
    fn next(&mut self) -> Option<AlignedChunk<'v, T, N>> {
        self.0.next_chunk().map(AlignedChunk)
    }

    /// The same units as `next`, as a plain counted loop ([`Chunks`]'s).
    #[inline(always)]
    fn for_each<F: FnMut(AlignedChunk<'v, T, N>)>(self, mut f: F) {
        self.0.for_each(|chunk| f(AlignedChunk(chunk)));
    }
}

impl<'a, T: Copy, const N: usize> Out<'a, T, ThreadChunks<N>> {
    /// This thread's units among the first `units` (and the whole chunks the
    /// view holds): `r, r + n, …` as on [`Out::grid_stride`].
    #[inline(always)]
    pub fn chunks(&mut self, units: u64) -> Chunks<'_, T, N> {
        let (ptr, len) = self.raw_parts();
        Chunks::new(ptr, len, units, thread_line())
    }

    /// [`chunks`](Self::chunks) as 16-byte vector stores, if the view starts
    /// on a 16-byte boundary (`N` elements being 16 bytes, every chunk then
    /// does); `None` otherwise. Checked once, so a kernel can keep two loops,
    /// one storing vectors and one elements, rather than test every chunk
    /// (after which LLVM merges both stores into the element ones).
    #[inline(always)]
    pub fn aligned_chunks(&mut self, units: u64) -> Option<AlignedChunks<'_, T, N>>
    where
        T: crate::shared::SharedElement,
    {
        const { assert!(N * size_of::<T>() == 16, "a 16-byte chunk") };
        let (ptr, len) = self.raw_parts();
        (ptr as usize)
            .is_multiple_of(16)
            .then(|| AlignedChunks(Chunks::new(ptr, len, units, thread_line())))
    }
}

impl<'a, T: Copy, const N: usize> Out<'a, T, WarpChunks<N>> {
    /// This warp's units among the first `units`: `w, w + warps, …`, `w` the
    /// warp's rank on the grid's x-line of blocks. Every lane of the warp
    /// walks the same units; lane 0 is the [`leader`](GroupChunk::leader).
    #[inline(always)]
    pub fn chunks(&mut self, units: u64) -> GroupChunks<'_, T, N> {
        let (ptr, len) = self.raw_parts();
        GroupChunks(Chunks::new(ptr, len, units, warp_line()))
    }
}

impl<'a, T: Copy, const N: usize> Out<'a, T, BlockChunks<N>> {
    /// This block's units among the first `units`: `b, b + gridDim.x, …`.
    /// Every thread of the block walks the same units; thread 0 is the
    /// [`leader`](GroupChunk::leader).
    #[inline(always)]
    pub fn chunks(&mut self, units: u64) -> GroupChunks<'_, T, N> {
        let (ptr, len) = self.raw_parts();
        GroupChunks(Chunks::new(ptr, len, units, block_line()))
    }
}

// ---------------------------------------------------------------------------
// 2-D: a matrix whose shape the host binds.

/// A kernel's 2-D output whose shape the host binds at launch: `batches`
/// matrices of `rows × cols`, rows `row_stride` elements apart and batches
/// `batch_stride` apart, the same for every thread. `M` says how the threads
/// share it ([`Elements`], [`BlockTiles`], [`MicroTiles`], [`WarpTiles`],
/// [`WarpGrid`]).
///
/// As a kernel parameter (`y: OutMatrix<f32>`) it is passed as pointer,
/// length, rows, cols, row stride, batches and batch stride; the host
/// launches it with `buffer.matrix_mut(rows, cols, row_stride)?` (one
/// batch) or `buffer.batched_matrix_mut(rows, cols, row_stride, batches,
/// batch_stride)?`, which check the shape fits and the batches are disjoint
/// ([`batched_extent`]).
///
/// The view addresses the one batch its block writes (`blockIdx.z`): its
/// rows are 0 when that batch does not exist, and the batch's first element
/// is found from the launch's parameters only where an element is
/// addressed (so ptxas can reload them rather than hold them in registers).
pub struct OutMatrix<'a, T, M: Mapping2 = Elements> {
    /// The buffer's first element.
    ptr: *mut T,
    /// The rows, columns and batches as passed: read through
    /// [`rows`](Self::rows), [`cols`](Self::cols) and `bound_batches`,
    /// which give 0 unless `fits`. (Kept as passed, not zeroed at the
    /// binding, so that the zeroing is computed where it is used: a kernel
    /// that splits into roles with `setmaxnreg` then carries only `fits`
    /// across the split, and ptxas reads the rest from the parameters
    /// again, where values computed before it would be spilled.)
    rows: usize,
    cols: usize,
    row_stride: usize,
    /// Elements between consecutive batches (0 for a host slice).
    batch_stride: usize,
    batches: usize,
    /// Whether the binding fits its buffer and this block's z has a batch
    /// (`from_raw`).
    fits: bool,
    _buffer: PhantomData<&'a mut [T]>,
    _mapping: PhantomData<fn() -> M>,
}

/// Why a (batched) matrix binding is refused ([`batched_extent`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindError {
    /// A row of the matrix is longer than the row stride, so rows overlap.
    RowLongerThanStride,
    /// The elements the batches span overflow `usize`.
    Overflow,
    /// With more than one batch, the batch stride is neither stacked
    /// (`batch_stride ≥ span`, the `span = (rows − 1)·row_stride + cols`
    /// elements of one matrix) nor side by side (`batch_stride ≥ cols` and
    /// `(batches − 1)·batch_stride + cols ≤ row_stride`): two batches could
    /// share an element.
    Overlap {
        /// `(rows − 1)·row_stride + cols`: the elements one batch spans.
        span: usize,
    },
}

/// The elements that `batches` matrices of `rows × cols` need (rows
/// `row_stride` apart, batch `b` starting at `b·batch_stride`), if no two
/// batches share an element by one of two sufficient rules: stacked
/// (`batch_stride ≥ (rows − 1)·row_stride + cols`, each batch after the
/// previous one's last element) or side by side (`batch_stride ≥ cols` and
/// `(batches − 1)·batch_stride + cols ≤ row_stride`: each batch a column
/// range of one wider matrix). An empty binding (no rows, columns or
/// batches) needs 0 elements; one batch needs no rule. Every size in
/// checked arithmetic. The one definition of a sound binding, used by the
/// host when it binds ([`OutMatrix`]'s docs) and by [`OutMatrix::from_raw`]
/// in the kernel.
#[inline(always)]
pub fn batched_extent(
    rows: usize,
    cols: usize,
    row_stride: usize,
    batches: usize,
    batch_stride: usize,
) -> Result<usize, BindError> {
    if rows == 0 || cols == 0 || batches == 0 {
        return Ok(0);
    }
    if cols > row_stride {
        return Err(BindError::RowLongerThanStride);
    }
    let span = (rows - 1)
        .checked_mul(row_stride)
        .and_then(|n| n.checked_add(cols))
        .ok_or(BindError::Overflow)?;
    let last = (batches - 1)
        .checked_mul(batch_stride)
        .ok_or(BindError::Overflow)?;
    if batches > 1 {
        let stacked = batch_stride >= span;
        let side_by_side =
            batch_stride >= cols && last.checked_add(cols).is_some_and(|end| end <= row_stride);
        if !stacked && !side_by_side {
            return Err(BindError::Overlap { span });
        }
    }
    last.checked_add(span).ok_or(BindError::Overflow)
}

impl<'a, T: Copy, M: Mapping2> OutMatrix<'a, T, M> {
    /// `batches` matrices of `rows × cols` (rows `row_stride` apart, batch
    /// `b` at element `b·batch_stride`) in the `len` elements at `ptr`, as
    /// this block sees it: batch `blockIdx.z`, empty (0 × 0) if there is no
    /// such batch, or if the binding does not fit or its batches could
    /// overlap ([`batched_extent`]), which the host launcher has already
    /// refused.
    ///
    /// # Safety
    /// As [`Out::from_raw`]: `ptr` valid for reads and writes of `len`
    /// elements for `'a`, no Rust reference to them live.
    #[inline(always)]
    pub unsafe fn from_raw(
        ptr: *mut T,
        len: usize,
        rows: usize,
        cols: usize,
        row_stride: usize,
        batches: usize,
        batch_stride: usize,
    ) -> Self {
        let z = thread::block_idx().z as usize;
        let fits = z < batches
            && batched_extent(rows, cols, row_stride, batches, batch_stride)
                .is_ok_and(|needed| needed <= len);
        OutMatrix {
            ptr,
            rows,
            cols,
            row_stride,
            batch_stride,
            batches,
            fits,
            _buffer: PhantomData,
            _mapping: PhantomData,
        }
    }

    /// A host slice as one matrix (batch 0), for host-side code and tests;
    /// `None` if the shape does not fit (sizes multiplied with overflow
    /// checks).
    pub fn from_mut_slice(
        slice: &'a mut [T],
        rows: usize,
        cols: usize,
        row_stride: usize,
    ) -> Option<Self> {
        fits_2d(slice.len(), rows, cols, row_stride).then_some(OutMatrix {
            ptr: slice.as_mut_ptr(),
            rows,
            cols,
            row_stride,
            batch_stride: 0,
            batches: 1,
            fits: true,
            _buffer: PhantomData,
            _mapping: PhantomData,
        })
    }

    /// The buffer's first element, its bound batches and their stride (for
    /// a TMA store map's check against the matrix it was made for).
    #[cfg(not(target_arch = "nvptx64"))]
    pub(crate) fn binding(&self) -> (*mut T, usize, usize) {
        (self.ptr, self.bound_batches(), self.batch_stride)
    }

    /// Rows of this block's batch (0 if its z has none).
    #[inline(always)]
    pub fn rows(&self) -> usize {
        if self.fits { self.rows } else { 0 }
    }

    /// Columns of this block's batch (0 if its z has none).
    #[inline(always)]
    pub fn cols(&self) -> usize {
        if self.fits { self.cols } else { 0 }
    }

    /// The bound batches (0 if the binding does not fit).
    #[inline(always)]
    fn bound_batches(&self) -> usize {
        if self.fits { self.batches } else { 0 }
    }

    /// Elements between the starts of consecutive rows.
    #[inline(always)]
    pub fn row_stride(&self) -> usize {
        self.row_stride
    }

    /// This block's batch, for the tile mappings ([`BlockTiles`], [`MicroTiles`],
    /// [`WarpTiles`], [`WarpGrid`]): block (x, y, z) works in batch
    /// `z = blockIdx.z`, the `rows × cols` matrix starting `z·batch_stride`
    /// elements into the buffer, which is what this view addresses. Returns
    /// `z` and the batch's rows: 0 rows, an empty batch, for `z ≥ batches`
    /// (so a grid taller in z than the binding writes nothing there). The
    /// host binds the batches
    /// (`warpforge::DeviceBuffer::batched_matrix_mut`), checked not to
    /// overlap ([`batched_extent`]: stacked or side by side), and `z` is
    /// the same for every thread of a block, so blocks of distinct z write
    /// disjoint batches. A plain binding is one batch: the whole matrix for
    /// `z = 0`.
    #[inline(always)]
    pub fn batch(&self) -> (usize, usize) {
        (thread::block_idx().z as usize, self.rows())
    }

    /// The address of (`row`, `col`) of this block's batch.
    ///
    /// # Safety
    /// `row < rows` and `col < cols`.
    #[inline(always)]
    unsafe fn element(&self, row: usize, col: usize) -> *mut T {
        // SAFETY: rows > 0, so z < batches (`from_raw`); the rest is the caller's.
        unsafe { self.element_in(thread::block_idx().z as usize, row, col) }
    }

    /// The address of (`row`, `col`) of batch `batch`.
    ///
    /// # Safety
    /// `batch < batches`, `row < rows` and `col < cols` (rows > 0: the
    /// binding fits).
    #[inline(always)]
    unsafe fn element_in(&self, batch: usize, row: usize, col: usize) -> *mut T {
        // SAFETY: the binding fits (`from_raw`, rows > 0):
        // batch·batch_stride + row·stride + col < (batches − 1)·batch_stride
        // + (rows − 1)·stride + cols ≤ len (`batched_extent`). A host slice
        // has batch stride 0 and one batch.
        unsafe {
            self.ptr
                .add(batch * self.batch_stride + row * self.row_stride + col)
        }
    }
}

impl<T: Copy, M: Mapping2> OutMatrix<'_, T, M> {
    /// The `tm × tn` tile at (`blockIdx.y·tm`, `blockIdx.x·tn`) of this
    /// block's batch ([`batch`](Self::batch)), clipped to it: `(row0, col0,
    /// rows, cols)`, if it starts inside. The block tiles of [`BlockTiles`]
    /// and [`MicroTiles`] ([`WarpGrid`] places its own: its bands).
    #[inline(always)]
    fn block_tile(&self, tm: usize, tn: usize) -> Option<(usize, usize, usize, usize)> {
        let b = thread::block_idx();
        let (_, batch_rows) = self.batch();
        tile_in(
            u64::from(b.y),
            u64::from(b.x),
            tm,
            tn,
            batch_rows,
            self.cols(),
        )
    }
}

/// This thread on the grid's z = 0 plane: its global y of the plane's
/// extent in y, and its global x of the extent in x; off the plane if its
/// thread or block index has z ≠ 0.
#[inline(always)]
fn plane() -> (Line, Line) {
    let (t, b) = (thread::thread_idx(), thread::block_idx());
    let (d, g) = (thread::block_dim(), thread::grid_dim());
    let on = (t.z | b.z) == 0;
    let axis = |b: u32, d: u32, t: u32, g: u32| Line {
        rank: u64::from(b) * u64::from(d) + u64::from(t),
        count: u64::from(g) * u64::from(d),
        on,
        leader: true,
    };
    (axis(b.y, d.y, t.y, g.y), axis(b.x, d.x, t.x, g.x))
}

/// One element of an [`OutMatrix`] that this thread alone owns.
pub struct Mine2<'v, T> {
    row: usize,
    col: usize,
    slot: Slot<'v, T>,
}

impl<'v, T: Copy> Mine2<'v, T> {
    /// The element's row.
    #[inline(always)]
    pub fn row(&self) -> usize {
        self.row
    }

    /// The element's column.
    #[inline(always)]
    pub fn col(&self) -> usize {
        self.col
    }

    /// Reads the element.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn get(&self) -> T {
        self.slot.get()
    }

    /// Writes the element.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn set(&mut self, value: T) {
        self.slot.set(value)
    }

    /// The element's slot.
    #[inline(always)]
    pub fn slot(&mut self) -> &mut Slot<'v, T> {
        &mut self.slot
    }

    /// The element's slot, giving up the coordinates.
    #[inline(always)]
    pub fn into_slot(self) -> Slot<'v, T> {
        self.slot
    }
}

/// This thread's elements of an `OutMatrix<T, Elements>`, row by row
/// ([`OutMatrix::grid_stride`]).
pub struct GridStride2<'v, T> {
    matrix: OutMatrix<'v, T, Elements>,
    rows: Walk,
    row: u64,
    col0: u64,
    cols: Walk,
}

impl<'v, T: Copy> Iterator for GridStride2<'v, T> {
    type Item = Mine2<'v, T>;

    #[inline(always)]
    fn next(&mut self) -> Option<Mine2<'v, T>> {
        loop {
            if let Some(col) = self.cols.next() {
                let (row, col) = (self.row as usize, col as usize);
                return Some(Mine2 {
                    row,
                    col,
                    // SAFETY: row < rows and col < cols (the walks' ends); each
                    // (row, col) comes once from this iterator, which borrows
                    // the matrix for 'v, and from no other thread's walk.
                    slot: unsafe { Slot::from_element(self.matrix.element(row, col)) },
                });
            }
            self.row = self.rows.next()?;
            self.cols.next = self.col0;
        }
    }
}

impl<'a, T: Copy> OutMatrix<'a, T, Elements> {
    /// Element (`global_index_y()`, `global_index_x()`) if this thread is on
    /// the grid's z = 0 plane and it is in the matrix: one thread per element.
    #[inline(always)]
    pub fn mine(&mut self) -> Option<Mine2<'_, T>> {
        let (ly, lx) = plane();
        let (y, x) = (ly.rank, lx.rank);
        (ly.on && y < self.rows() as u64 && x < self.cols() as u64).then(|| {
            let (row, col) = (y as usize, x as usize);
            Mine2 {
                row,
                col,
                // SAFETY: in the matrix (just checked); (y, x) is this thread's alone.
                slot: unsafe { Slot::from_element(self.element(row, col)) },
            }
        })
    }

    /// This thread's elements: rows `y, y + ny, …` × columns `x, x + nx, …`
    /// within the matrix, `(y, x)` its global index and `(ny, nx)` the grid's
    /// extent in threads. The walks of all threads partition the matrix.
    #[inline(always)]
    pub fn grid_stride(&mut self) -> GridStride2<'_, T> {
        let (rows, cols) = (self.rows() as u64, self.cols() as u64);
        // A thread off the plane, or right of the matrix, owns nothing.
        let (ly, lx) = plane();
        let on = ly.on && lx.rank < cols;
        let mut rows = Walk::new(Line { on, ..ly }, rows);
        let mut cols = Walk::new(Line { on, ..lx }, cols);
        let col0 = cols.next;
        let row = match rows.next() {
            Some(row) => row,
            None => {
                cols.next = cols.end; // no row of the matrix: nothing
                0
            }
        };
        GridStride2 {
            matrix: OutMatrix {
                ptr: self.ptr,
                rows: self.rows,
                cols: self.cols,
                row_stride: self.row_stride,
                batch_stride: self.batch_stride,
                batches: self.batches,
                fits: self.fits,
                _buffer: PhantomData,
                _mapping: PhantomData,
            },
            rows,
            row,
            col0,
            cols,
        }
    }
}

// ---------------------------------------------------------------------------
// 2-D tiles, owned by a block or a warp.

/// The `TM × TN` tile of an `OutMatrix<T, BlockTiles<TM, TN>>` that this
/// thread's block owns (clipped to the matrix), shared among its threads by
/// [`elements`](Self::elements).
pub struct BlockTile<'v, T, const TM: usize, const TN: usize> {
    origin: *mut T,
    row_stride: usize,
    row0: usize,
    col0: usize,
    rows: usize,
    cols: usize,
    _view: PhantomData<&'v mut [T]>,
}

/// The tile `(y', x')` that block `(y, x)` of a launch takes when its blocks,
/// in their launch order (x fastest: `l = y·gx + x`), walk the `gy × gx`
/// grid of tiles down bands of `g` tile rows, column by column: band
/// `l / (g·gx)` holds `h = min(g, gy − g·band)` rows, and `r = l mod
/// (g·gx)` its tile `(g·band + r mod h, r / h)`. A bijection of the grid
/// onto itself (within a band, `r ↦ (r mod h, r / h)` maps `0 .. h·gx`
/// one-to-one onto `h × gx`), so one block per tile whatever `g`; the
/// identity for `g ≤ 1`, and for a grid of more than 2³² blocks in a plane
/// (its order then kept: 32-bit arithmetic, once per block). Why: the
/// blocks resident at once then span about `g` row panels and `resident /
/// g` column panels instead of one or two rows of the whole grid, so more
/// of their operand panels are shared in L2.
#[inline(always)]
pub fn grouped_block(block: crate::Dim3, grid: crate::Dim3, g: usize) -> (u32, u32) {
    let (y, x, gy, gx) = (block.y, block.x, grid.y, grid.x);
    let g = g.min(u32::MAX as usize) as u32;
    let band = gx.checked_mul(g).filter(|_| gx.checked_mul(gy).is_some());
    match band {
        Some(band) if g > 1 && y < gy && x < gx => {
            let l = y * gx + x;
            let first = (l / band) * g;
            let h = (gy - first).min(g);
            let r = l % band;
            (first + r % h, r / h)
        }
        _ => (y, x),
    }
}

/// [`grouped_block`]'s bijection for the `l`-th tile (x fastest) of a
/// `gy × gx` grid of them, as [`TileWalk`] places its tiles: the same
/// bands, with every divisor a `NonZeroU32` so that the persistent loop,
/// which places a tile per iteration, has no division-by-zero trap path.
/// (`grouped_block` itself is left as it is: the `WarpGrid` kernels' sm_90
/// SASS is budgeted as it compiles, and the same arithmetic with
/// `NonZeroU32` costs them registers there.) `l < gy·gx`; the
/// `a_tile_walk_places_tiles_as_grouped_block_orders_blocks` test checks
/// the two agree.
#[inline(always)]
fn banded(l: u32, gx: NonZeroU32, gy: u32, g: usize) -> (u32, u32) {
    let g = g.min(u32::MAX as usize) as u32;
    let band = gx
        .get()
        .checked_mul(g)
        .filter(|_| gx.get().checked_mul(gy).is_some())
        .and_then(NonZeroU32::new);
    let (y, x) = (l / gx, l % gx);
    match band {
        Some(band) if g > 1 && y < gy => {
            let first = (l / band) * g;
            // `first ≤ y < gy` and `g > 1`, so `h ≥ 1`.
            match NonZeroU32::new((gy - first).min(g)) {
                Some(h) => {
                    let r = l % band;
                    (first + r % h, r / h)
                }
                None => (y, x),
            }
        }
        _ => (y, x),
    }
}

/// The tile's corner and clipped extent, if `(tile_row, tile_col)` of
/// `TM × TN` tiles starts inside a `rows × cols` matrix.
#[inline(always)]
fn tile_in(
    tile_row: u64,
    tile_col: u64,
    tm: usize,
    tn: usize,
    rows: usize,
    cols: usize,
) -> Option<(usize, usize, usize, usize)> {
    let row0 = usize::try_from(tile_row).ok()?.checked_mul(tm)?;
    let col0 = usize::try_from(tile_col).ok()?.checked_mul(tn)?;
    (row0 < rows && col0 < cols).then(|| (row0, col0, tm.min(rows - row0), tn.min(cols - col0)))
}

impl<'a, T: Copy, const TM: usize, const TN: usize> OutMatrix<'a, T, BlockTiles<TM, TN>> {
    /// This block's tile: the one at (`blockIdx.y·TM`, `blockIdx.x·TN`) of
    /// batch `blockIdx.z` ([`OutMatrix::batch`]; the whole matrix for a plain
    /// binding, nothing for z past it), if it starts inside the batch.
    /// Coordinates are the batch's. Batches share no element and block
    /// tiles of a batch are disjoint (distinct (y, x)).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn tile(&mut self) -> Option<BlockTile<'_, T, TM, TN>> {
        const { assert!(TM > 0 && TN > 0, "a tile has at least one element") };
        let (row0, col0, rows, cols) = self.block_tile(TM, TN)?;
        Some(BlockTile {
            // SAFETY: (row0, col0) is in the batch (`tile_in`), one of the
            // bound batches (`batch`).
            origin: unsafe { self.element(row0, col0) },
            row_stride: self.row_stride,
            row0,
            col0,
            rows,
            cols,
            _view: PhantomData,
        })
    }
}

impl<'a, T: crate::shared::SharedElement, const TILE: usize>
    OutMatrix<'a, T, BlockTiles<TILE, TILE>>
{
    /// This block's square tile written through shared memory, as a
    /// transpose or a layout change does it: the block's threads stage
    /// element `(i, j)` of a `TILE × TILE` input tile (`e = t, t + threads,
    /// …` over `(e / TILE, e % TILE)`: consecutive threads on consecutive
    /// input columns, coalesced) at `i·pitch + j` of `staged` where
    /// `stage(i, j)` gives a value (`None`: nothing, for elements no output
    /// reads), then one barrier, then each thread writes its elements of the
    /// block's output tile (`tile()`, consecutive threads on
    /// consecutive output columns) from `(r, c)` of the staged tile, or from
    /// `(c, r)` when `transposed`. A `pitch` of `TILE` plus an odd number of
    /// 4-byte words keeps a staged column in 32 banks. Every thread of the
    /// block calls it (the barrier); `staged` must hold `TILE · pitch`
    /// elements (its accesses are checked).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn write_staged<const STAGED: usize>(
        &mut self,
        staged: crate::shared::SharedTile<T, STAGED>,
        pitch: usize,
        transposed: bool,
        stage: impl Fn(usize, usize) -> Option<T>,
    ) {
        let (t, threads) = (
            thread::linear_thread_id() as usize,
            thread::block_dim().volume() as usize,
        );
        let mut e = t;
        while e < TILE * TILE {
            let (i, j) = (e / TILE, e % TILE);
            if let Some(v) = stage(i, j) {
                staged.store(i * pitch + j, v);
            }
            e += threads;
        }
        // Every thread of the block reaches it: the tile and the loop
        // bounds are the block's.
        crate::sync::sync_threads();
        let Some(mut tile) = self.tile() else {
            return;
        };
        let (row0, col0) = tile.origin();
        for mut out in tile.elements() {
            let (r, c) = (out.row() - row0, out.col() - col0);
            out.set(staged.load(if transposed {
                c * pitch + r
            } else {
                r * pitch + c
            }));
        }
    }
}

impl<'v, T: Copy, const TM: usize, const TN: usize> BlockTile<'v, T, TM, TN> {
    /// The tile's first row and column in the matrix.
    #[inline(always)]
    pub fn origin(&self) -> (usize, usize) {
        (self.row0, self.col0)
    }

    /// Rows of the tile inside the matrix (`TM` except at the bottom edge).
    #[inline(always)]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the tile inside the matrix (`TN` except at the right edge).
    #[inline(always)]
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// This thread's elements of the tile: element `e` of its part inside
    /// the matrix, `rows() × cols()` packed row-major (`(e / cols(), e %
    /// cols())`), for `e = t, t + threads, …`, `t` the thread's linear id in
    /// the block. Consecutive threads take consecutive elements across row
    /// ends, so a warp's stores stay contiguous where the tile is whole rows
    /// of a packed matrix (a `TM × TN` tile of a narrower matrix included).
    /// With a `TN × TM` block and a tile inside the matrix that is element
    /// (`threadIdx.y`, `threadIdx.x`) alone.
    #[inline(always)]
    pub fn elements(&mut self) -> TileElements<'_, T, TN> {
        const {
            assert!(
                TM * TN <= u32::MAX as usize,
                "a block tile's elements are numbered in 32 bits"
            )
        };
        let d = thread::block_dim();
        TileElements {
            origin: self.origin,
            row_stride: self.row_stride,
            row0: self.row0,
            col0: self.col0,
            cols: self.cols,
            walk: Walk {
                next: u64::from(thread::linear_thread_id()),
                // rows ≤ TM and cols ≤ TN: no overflow.
                end: (self.rows * self.cols) as u64,
                step: d.volume(),
            },
            _view: PhantomData,
        }
    }
}

impl<
    'a,
    T: Copy,
    const TM: usize,
    const TN: usize,
    const MR: usize,
    const MC: usize,
    const RI: usize,
    const RJ: usize,
> OutMatrix<'a, T, MicroTiles<TM, TN, MR, MC, RI, RJ>>
{
    /// This thread's `MR × MC` micro-tile of its block's `TM × TN` tile (with
    /// `RI × RJ` sub-tiles: its micro-tile of each, an `RI·MR × RJ·MC`
    /// register tile), for a kernel that keeps a register micro-tile per
    /// thread (the SIMT GEMM epilogue).
    ///
    /// Block (y, x) owns the tile at (`blockIdx.y·TM`, `blockIdx.x·TN`), as
    /// for [`BlockTiles`]. The tile is cut into `RI × RJ` sub-tiles of
    /// `SM × SN = (TM / RI) × (TN / RJ)`, each into `(SM / MR) × (SN / MC)`
    /// micro-tiles, numbered row-major; the thread whose linear id in the
    /// block is `t` owns micro-tile `t` of every sub-tile: rows
    /// `qi·SM + (t / (SN / MC))·MR ..` and columns `qj·SN + (t % (SN /
    /// MC))·MC ..` of the tile for `qi < RI`, `qj < RJ`, clipped to the
    /// matrix. A batched binding ([`OutMatrix::batch`]): block (x, y, z)
    /// works in batch `z`, and the coordinates are the batch's. `None` if
    /// `t` is past the last micro-tile (a block with more threads than
    /// micro-tiles), or the micro-tile starts outside the matrix.
    ///
    /// Disjoint for any grid and block shape: batches share no element
    /// (distinct z; the binding is checked stacked or side by side), block
    /// tiles of a batch are disjoint (distinct (y, x)), the sub-tiles
    /// partition the tile and the micro-tiles each sub-tile (`RI·MR | TM`
    /// and `RJ·MC | TN`, checked at compile time), `t ↦ (t / (SN/MC), t %
    /// (SN/MC))` is one-to-one on `t < (SM/MR)·(SN/MC)`, and linear ids are
    /// distinct within the block. This is the only way to write an output
    /// declared with this mapping, so no thread can take the same tile by
    /// another partition (a [`BlockTile::elements`] walk is only on
    /// [`BlockTiles`] outputs). The micro-tile borrows the matrix mutably,
    /// so a thread holds at most one at a time.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn micro_tile(&mut self) -> Option<MicroTile<'_, T, MR, MC, RI, RJ>> {
        const {
            assert!(
                MR > 0
                    && MC > 0
                    && RI > 0
                    && RJ > 0
                    && TM.is_multiple_of(RI * MR)
                    && TN.is_multiple_of(RJ * MC),
                "a micro-tile has at least one element, and the sub-tiles and micro-tiles \
                 divide the block tile"
            )
        };
        // SAFETY: this mapping's micro-tiles are the thread's own.
        unsafe { self.micro_tile_of::<TM, TN, MR, MC, RI, RJ>() }
    }
}

impl<T: Copy, M: Mapping2> OutMatrix<'_, T, M> {
    /// Micro-tile `t` (this thread's linear id) of each sub-tile of the
    /// block's `TM × TN` tile ([`OutMatrix::micro_tile`]'s map), or `None`.
    ///
    /// # Safety
    /// The caller's mapping gives this thread that micro-tile
    /// ([`MicroTiles`], or [`StagedTiles`] when its block writes row vectors).
    #[inline(always)]
    unsafe fn micro_tile_of<
        const TM: usize,
        const TN: usize,
        const MR: usize,
        const MC: usize,
        const RI: usize,
        const RJ: usize,
    >(
        &mut self,
    ) -> Option<MicroTile<'_, T, MR, MC, RI, RJ>> {
        let (row0, col0, rows, cols) = self.block_tile(TM, TN)?;
        let per_row = TN / RJ / MC;
        let t = thread::linear_thread_id() as usize;
        if t >= (TM / RI / MR) * per_row {
            return None;
        }
        let (r, c) = ((t / per_row) * MR, (t % per_row) * MC);
        if r >= rows || c >= cols {
            return None;
        }
        let (row0, col0) = (row0 + r, col0 + c);
        Some(MicroTile {
            // SAFETY: (row0, col0) is inside the clipped tile (just checked),
            // so in the batch, one of the bound batches (`batch`).
            origin: unsafe { self.element(row0, col0) },
            row_stride: self.row_stride,
            row0,
            col0,
            rows: rows - r,
            cols: cols - c,
            sub: (TM / RI, TN / RJ),
            _view: PhantomData,
        })
    }
}

/// How a block writes its tile of an `OutMatrix<T, StagedTiles<TM, TN, MR,
/// MC, RI>>` ([`OutMatrix::tile_stores`]), the same for all its threads.
pub enum TileStores<
    'v,
    T,
    const TM: usize,
    const TN: usize,
    const MR: usize,
    const MC: usize,
    const RI: usize,
> {
    /// Every row of every micro-tile of the tile is one aligned 16-byte
    /// vector: this thread's micro-tile's rows (`None`: it has no
    /// micro-tile inside the tile), written one store each.
    Vectors(Option<RowVectors<'v, T, MR, MC, RI>>),
    /// Anything else (the tile's columns not a multiple of `MC`, its rows
    /// not on 16 bytes): the tile, which the block's threads write
    /// together ([`StagedTile::fill`]).
    Staged(StagedTile<'v, T, TM, TN>),
}

impl<
    'a,
    T: Copy,
    const TM: usize,
    const TN: usize,
    const MR: usize,
    const MC: usize,
    const RI: usize,
> OutMatrix<'a, T, StagedTiles<TM, TN, MR, MC, RI>>
{
    /// How this block writes its tile (the one at (`blockIdx.y·TM`,
    /// `blockIdx.x·TN`) of batch `blockIdx.z`, clipped), `None` if it
    /// starts outside the batch: [`TileStores::Vectors`], this thread's
    /// micro-tile as [`MicroTiles`]`<TM, TN, MR, MC, RI>` places it, as
    /// 16-byte row vectors, where the tile's first element and the row
    /// stride are on 16 bytes and its columns a multiple of `MC` (so every
    /// micro-tile inside it is whole vectors); [`TileStores::Staged`], the
    /// tile for the block's element walk, otherwise.
    ///
    /// Disjoint for any grid: the decision reads only the binding and the
    /// block's tile, the same for every thread of the block, so a block's
    /// threads all take one partition of its tile (micro-tiles, or the
    /// element walk), each one-to-one; block tiles are disjoint as for
    /// [`BlockTiles`]. The result borrows the matrix mutably, so a thread
    /// holds one at a time, and a second call decides the same.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn tile_stores(&mut self) -> Option<TileStores<'_, T, TM, TN, MR, MC, RI>> {
        const {
            assert!(
                MR > 0
                    && RI > 0
                    && MC * size_of::<T>() == 16
                    && TM.is_multiple_of(RI * MR)
                    && TN.is_multiple_of(MC),
                "micro-tiles of 16-byte rows that divide the block tile"
            )
        };
        let (row0, col0, rows, cols) = self.block_tile(TM, TN)?;
        // SAFETY: (row0, col0) is in the batch (`tile_in`), one of the
        // bound batches (`batch`).
        let origin = unsafe { self.element(row0, col0) };
        let vectors = (origin as usize).is_multiple_of(16)
            && (self.row_stride * size_of::<T>()).is_multiple_of(16)
            && cols.is_multiple_of(MC);
        if vectors {
            // SAFETY: the block writes micro-tiles (`vectors`, the same for
            // all its threads), so this one is the thread's own.
            let tile = unsafe { self.micro_tile_of::<TM, TN, MR, MC, RI, 1>() };
            // Every micro-tile inside is whole (`cols − c ≥ MC`: both
            // multiples of `MC`) and starts on 16 bytes (the tile's origin
            // and row stride do, and its column offset is `MC` elements
            // times a whole number).
            Some(TileStores::Vectors(tile.map(|m| RowVectors {
                origin: m.origin.cast(),
                row_stride: m.row_stride * size_of::<T>() / 16,
                rows: m.rows,
                sub: m.sub.0,
                _tile: PhantomData,
            })))
        } else {
            Some(TileStores::Staged(StagedTile {
                origin,
                row_stride: self.row_stride,
                row0,
                col0,
                rows,
                cols,
                _view: PhantomData,
            }))
        }
    }
}

/// Elements of `T` in a 32-byte sector, the unit a store moves.
const fn sector_elements<T>() -> usize {
    32 / size_of::<T>()
}

/// A block's tile of an `OutMatrix<T, StagedTiles<…>>` that its threads
/// write together ([`TileStores::Staged`], [`StagedTile::fill`]).
pub struct StagedTile<'v, T, const TM: usize, const TN: usize> {
    origin: *mut T,
    row_stride: usize,
    row0: usize,
    col0: usize,
    rows: usize,
    cols: usize,
    _view: PhantomData<&'v mut [T]>,
}

impl<T: Copy, const TM: usize, const TN: usize> StagedTile<'_, T, TM, TN> {
    /// The tile's first row and column in the matrix.
    #[inline(always)]
    pub fn origin(&self) -> (usize, usize) {
        (self.row0, self.col0)
    }

    /// Rows of the tile inside the matrix (`TM` except at the bottom edge).
    #[inline(always)]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the tile inside the matrix (`TN` except at the right edge).
    #[inline(always)]
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Writes `value(r, c)` into each of this thread's elements of the tile
    /// (`r`, `c` its place in the tile). The block's threads take *slots*
    /// `u = t, t + threads, …` (`t` the linear id) of a numbering that lines
    /// the tile's elements up on 32-byte sectors, so that a warp's 32
    /// consecutive slots are whole sectors and no sector is written by two
    /// of the block's stores:
    ///
    /// - where the tile is one run of memory (whole rows of a packed
    ///   matrix, or one row), slot `u` is its element `u − lead`, `lead`
    ///   the elements of the first sector before the tile's first (slots
    ///   before the first element or past the last write nothing);
    /// - otherwise rows are `⌈(cols + S − 1) / S⌉·S` slots apart (`S` the
    ///   elements of a sector), and slot `c' ` of row `r` is its column `c'
    ///   − lead_r`, `lead_r` the elements of that row's first sector before
    ///   it.
    ///
    /// One-to-one onto the tile either way, and the same for every thread
    /// of the block (it reads only the tile and the binding). Each next
    /// slot is the last one plus a constant step (divisions once, none per
    /// element). `32` must be a multiple of `size_of::<T>()` (a
    /// compile-time error otherwise).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn fill(&mut self, mut value: impl FnMut(usize, usize) -> T) {
        const {
            assert!(
                TM * TN <= i32::MAX as usize && size_of::<T>() > 0 && 32 % size_of::<T>() == 0,
                "a block tile's elements are numbered in 32 bits, and a sector is whole elements"
            )
        };
        let s = sector_elements::<T>() as u32;
        // The element offset of the tile's first element in its sector
        // (pointers to `T` are aligned to it).
        let lead = ((self.origin as usize / size_of::<T>()) % s as usize) as u32;
        // rows ≤ TM, cols ≤ TN (cols > 0: the tile starts inside the
        // matrix, `tile_in`), the block's threads ≤ 1024: all in 32 bits.
        let (rows, cols) = (self.rows as u32, self.cols as u32);
        let (t, threads) = (
            thread::linear_thread_id(),
            thread::block_dim().volume() as u32,
        );
        if self.rows == 1 || self.row_stride == self.cols {
            // One run: element e = u − lead at offset e from the origin,
            // tile (e / cols, e % cols), stepped with e; signed, as the first
            // slots lie before the tile.
            let e = t as i32 - lead as i32;
            let (cols, len) = (cols as i32, (rows * cols) as i32);
            let (step_r, step_c) = (threads as i32 / cols, threads as i32 % cols);
            let (mut e, mut r, mut c) = (e, e.div_euclid(cols), e.rem_euclid(cols));
            while e < len {
                if e >= 0 {
                    let (ru, cu) = (r as usize, c as usize);
                    let v = value(ru, cu);
                    // SAFETY: 0 ≤ e < rows·cols, so (r, c) is inside the
                    // clipped tile, and the tile is one run (one row, or rows
                    // `cols` apart), so it is `e` elements from the origin, in
                    // the matrix; slot e + lead = t + k·threads is this
                    // thread's alone (distinct linear ids; the numbering is
                    // the block's, decided from values all its threads share)
                    // and the tile is this block's alone.
                    unsafe { Slot::from_element(self.origin.add(e as usize)) }.set(v);
                }
                e += threads as i32;
                (r, c) = (r + step_r, c + step_c);
                if c >= cols {
                    (r, c) = (r + 1, c - cols);
                }
            }
        } else {
            // Rows of `pitch` slots, each starting on its first sector.
            let pitch = (cols + s - 1).div_ceil(s) * s;
            let stride = (self.row_stride % s as usize) as u32;
            let (step_r, step_c) = (threads / pitch, threads % pitch);
            let (mut r, mut slot) = (t / pitch, t % pitch);
            while r < rows {
                // Row r's lead: its first element's offset in its sector.
                let lead_r = (lead + r * stride) % s;
                let c = slot.wrapping_sub(lead_r);
                if c < cols {
                    let (ru, cu) = (r as usize, c as usize);
                    let v = value(ru, cu);
                    // SAFETY: r < rows and c < cols, so (r, c) is inside the
                    // clipped tile, so in the matrix; slot (r, c + lead_r) is
                    // t + k·threads of the walk, this thread's alone (as
                    // above), and the tile is this block's alone.
                    unsafe { Slot::from_element(self.origin.add(ru * self.row_stride + cu)) }
                        .set(v);
                }
                (r, slot) = (r + step_r, slot + step_c);
                if slot >= pitch {
                    (r, slot) = (r + 1, slot - pitch);
                }
            }
        }
    }
}

/// A thread's micro-tile of an `OutMatrix<T, MicroTiles<TM, TN, MR, MC, RI,
/// RJ>>` ([`OutMatrix::micro_tile`]): an `RI·MR × RJ·MC` register tile whose
/// `MR × MC` pieces lie `TM / RI` rows and `TN / RJ` columns apart, clipped
/// to the matrix.
pub struct MicroTile<
    'v,
    T,
    const MR: usize,
    const MC: usize,
    const RI: usize = 1,
    const RJ: usize = 1,
> {
    origin: *mut T,
    row_stride: usize,
    row0: usize,
    col0: usize,
    /// Rows of the block tile (clipped to the matrix) from `row0` on.
    rows: usize,
    /// Columns of the block tile (clipped to the matrix) from `col0` on.
    cols: usize,
    /// Rows and columns between the pieces: the sub-tile, `TM / RI × TN / RJ`.
    sub: (usize, usize),
    _view: PhantomData<&'v mut [T]>,
}

impl<'v, T: Copy, const MR: usize, const MC: usize> MicroTile<'v, T, MR, MC> {
    /// Rows of the micro-tile inside the matrix (`MR` except at the bottom edge).
    #[inline(always)]
    pub fn rows(&self) -> usize {
        MR.min(self.rows)
    }

    /// Columns of the micro-tile inside the matrix (`MC` except at the right edge).
    #[inline(always)]
    pub fn cols(&self) -> usize {
        MC.min(self.cols)
    }
}

impl<'v, T: Copy, const MR: usize, const MC: usize, const RI: usize, const RJ: usize>
    MicroTile<'v, T, MR, MC, RI, RJ>
{
    /// The micro-tile's first row and column in the matrix (of its first
    /// sub-tile's piece).
    #[inline(always)]
    pub fn origin(&self) -> (usize, usize) {
        (self.row0, self.col0)
    }

    /// Element (`i`, `j`) of the register tile, `i < RI·MR`, `j < RJ·MC`:
    /// matrix element `(origin.0 + (i / MR)·(TM / RI) + i % MR, origin.1 +
    /// (j / MC)·(TN / RJ) + j % MC)`, if it is inside the matrix. With the
    /// default `1 × 1` sub-tiles: `(origin.0 + i, origin.1 + j)`, `i <
    /// rows()`, `j < cols()`.
    #[inline(always)]
    pub fn slot(&mut self, i: usize, j: usize) -> Option<Slot<'_, T>> {
        let di = (i / MR) * self.sub.0 + i % MR;
        let dj = (j / MC) * self.sub.1 + j % MC;
        // SAFETY: (di, dj) is inside the matrix (rows and cols count from
        // the origin), and in one of the thread's own pieces (i < RI·MR, j <
        // RJ·MC, pieces a sub-tile apart), which are this thread's alone
        // (`OutMatrix::micro_tile`); the slot borrows the micro-tile
        // mutably, so one slot at a time.
        (i < RI * MR && j < RJ * MC && di < self.rows && dj < self.cols)
            .then(|| unsafe { Slot::from_element(self.origin.add(di * self.row_stride + dj)) })
    }
}

impl<'v, T: Copy, const MR: usize, const MC: usize, const RI: usize>
    MicroTile<'v, T, MR, MC, RI, 1>
{
    /// The micro-tile's rows as 16-byte vectors (`MC · size_of::<T>() =
    /// 16`: 4 f32 or 8 f16), each written by one 128-bit store
    /// ([`RowVectors::store`]), for an epilogue that owns whole rows of `MC`
    /// consecutive elements (a depthwise strip's pixels × 8 channels).
    /// `Some` only if every row of it is whole and 16-byte aligned: its
    /// columns all inside the matrix (`cols() == MC`), its first element on
    /// a 16-byte boundary and the row stride a multiple of 16 bytes. One
    /// check for all its rows; a `None` leaves the per-element
    /// [`slot`](Self::slot)s.
    #[inline(always)]
    pub fn row_vectors(&mut self) -> Option<RowVectors<'_, T, MR, MC, RI>> {
        const { assert!(MC * size_of::<T>() == 16, "a row vector is 16 bytes") };
        let aligned = (self.origin as usize).is_multiple_of(16)
            && (self.row_stride * size_of::<T>()).is_multiple_of(16);
        (self.cols >= MC && aligned).then(|| RowVectors {
            origin: self.origin.cast(),
            row_stride: self.row_stride * size_of::<T>() / 16,
            rows: self.rows,
            sub: self.sub.0,
            _tile: PhantomData,
        })
    }
}

/// A micro-tile's rows as 16-byte vectors ([`MicroTile::row_vectors`]):
/// every row starts on a 16-byte boundary and lies inside the matrix.
pub struct RowVectors<'t, T, const MR: usize, const MC: usize, const RI: usize> {
    /// The micro-tile's first row (16-byte aligned).
    origin: *mut crate::global::Vector16<T, MC>,
    /// Vectors between rows.
    row_stride: usize,
    /// Rows of the block tile (clipped to the matrix) from the origin on.
    rows: usize,
    /// Rows between the pieces (the sub-tile's, `TM / RI`).
    sub: usize,
    _tile: PhantomData<&'t mut [T]>,
}

impl<T: Copy, const MR: usize, const MC: usize, const RI: usize> RowVectors<'_, T, MR, MC, RI> {
    /// Writes row `i` of the register tile (`i < RI·MR`: matrix row
    /// `origin.0 + (i / MR)·(TM / RI) + i % MR`, columns `origin.1 ..
    /// origin.1 + MC`) with one 16-byte store, if the row is inside the
    /// matrix; returns whether it was (a row past the matrix is not
    /// written, as its [`MicroTile::slot`]s would be `None`).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn store(&mut self, i: usize, values: [T; MC]) -> bool {
        let di = (i / MR) * self.sub + i % MR;
        if i >= RI * MR || di >= self.rows {
            return false;
        }
        let p = self.origin.wrapping_add(di * self.row_stride);
        #[cfg(not(target_arch = "nvptx64"))]
        crate::arch::global_access(p.cast(), 16, true);
        // SAFETY: row di is inside the matrix (di < rows) and in one of the
        // micro-tile's own pieces (i < RI·MR), whose MC columns are all in
        // the matrix (`row_vectors`: cols ≥ MC) and this thread's alone
        // (`OutMatrix::micro_tile`); the row starts on a 16-byte boundary
        // (the origin and the row stride are, `row_vectors`), so the 16
        // bytes are one aligned `Vector16` of exactly those MC elements
        // (`repr(C)`, no padding). `self` borrows the micro-tile mutably, so
        // nothing else in this thread touches them meanwhile.
        unsafe { p.write(crate::global::Vector16(values)) };
        true
    }
}

/// A thread's elements of a [`BlockTile`] ([`BlockTile::elements`]).
pub struct TileElements<'v, T, const TN: usize> {
    origin: *mut T,
    row_stride: usize,
    row0: usize,
    col0: usize,
    cols: usize,
    walk: Walk,
    _view: PhantomData<&'v mut [T]>,
}

impl<'v, T: Copy, const TN: usize> Iterator for TileElements<'v, T, TN> {
    type Item = Mine2<'v, T>;

    #[inline(always)]
    fn next(&mut self) -> Option<Mine2<'v, T>> {
        // e < rows·cols ≤ TM·TN < 2³² (`BlockTile::elements`): divided in
        // 32 bits (a few instructions; 64-bit division is a call). cols > 0:
        // the tile starts inside the matrix (`tile_in`).
        let (e, cols) = (self.walk.next()? as u32, self.cols as u32);
        let (r, c) = ((e / cols) as usize, (e % cols) as usize);
        Some(Mine2 {
            row: self.row0 + r,
            col: self.col0 + c,
            // SAFETY: e < rows·cols, so (r, c) is inside the clipped tile,
            // so inside the batch; e comes once from this walk, from no
            // other thread of the block (distinct linear ids), and the tile
            // is this block's alone.
            slot: unsafe { Slot::from_element(self.origin.add(r * self.row_stride + c)) },
        })
    }
}

/// The `TM × TN` tile of an `OutMatrix<T, WarpTiles<TM, TN>>` (or
/// `WarpGrid<_, _, TM, TN>`) that this thread's warp owns, written lane by
/// lane in the `mma` accumulator layout ([`c_coord`](crate::mma::c_coord)'s,
/// or with rows paired if `RP`: [`MmaOrder`], fixed by the view's type).
///
/// `CLIPPED`: a tile as the view hands it out (`true`), whose writes skip
/// each element outside the matrix, or one that [`WarpTile::interior`]
/// found wholly inside it ([`InteriorWarpTile`], `false`), whose writes
/// test nothing per element.
pub struct WarpTile<
    'v,
    T,
    const TM: usize,
    const TN: usize,
    const RP: bool = false,
    const CLIPPED: bool = true,
> {
    origin: *mut T,
    row_stride: usize,
    row0: usize,
    col0: usize,
    rows: usize,
    cols: usize,
    _view: PhantomData<&'v mut [T]>,
}

impl<'a, T: Copy, const TM: usize, const TN: usize> OutMatrix<'a, T, WarpTiles<TM, TN>> {
    /// This warp's tile: warp `w` of block (y, x) owns tile row `y`, tile
    /// column `x·warps_per_block + w` (a block's warps side by side along a
    /// row) of batch `z` ([`OutMatrix::batch`]; the whole matrix for a
    /// plain binding), if it starts inside the batch. Coordinates are the
    /// batch's. Batches share no element, so tiles stay disjoint across z.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn tile(&mut self) -> Option<WarpTile<'_, T, TM, TN>> {
        const {
            assert!(
                TM > 0
                    && TN > 0
                    && TM.is_multiple_of(crate::mma::M)
                    && TN.is_multiple_of(crate::mma::N),
                "a warp tile is a whole number of 16 × 8 mma tiles"
            )
        };
        let b = thread::block_idx();
        let (_, batch_rows) = self.batch();
        let per_block = u64::from(thread::warps_per_block());
        let tile_col = u64::from(b.x) * per_block + u64::from(thread::warp_id());
        let (row0, col0, rows, cols) =
            tile_in(u64::from(b.y), tile_col, TM, TN, batch_rows, self.cols())?;
        Some(WarpTile {
            // SAFETY: (row0, col0) is in the batch (`tile_in`), which is one
            // of the bound batches (`batch`), so in the buffer.
            origin: unsafe { self.element(row0, col0) },
            row_stride: self.row_stride,
            row0,
            col0,
            rows,
            cols,
            _view: PhantomData,
        })
    }
}

impl<
    'a,
    T: Copy,
    const BM: usize,
    const BN: usize,
    const TM: usize,
    const TN: usize,
    const G: usize,
    const RP: bool,
> OutMatrix<'a, T, WarpGrid<BM, BN, TM, TN, G, RP>>
{
    /// The corner `(row, column)` of this block's `BM × BN` tile (unclipped,
    /// in its batch's coordinates): `(y'·BM, x'·BN)` for
    /// `(y', x') = `[`grouped_block`]`(blockIdx.y, blockIdx.x, G)`. The one
    /// block → tile map of this mapping, for the kernel to read the operands
    /// of the tile [`tile`](Self::tile) writes.
    #[inline(always)]
    pub fn block_origin(&self) -> (usize, usize) {
        let (y, x) = grouped_block(thread::block_idx(), thread::grid_dim(), G);
        ((y as usize).wrapping_mul(BM), (x as usize).wrapping_mul(BN))
    }

    /// Where this warp's tile lies in its block's `BM × BN` tile: warp `w`
    /// is at row `(w / (BN/TN))·TM` and column `(w mod (BN/TN))·TN`; `None`
    /// for a warp past the `(BM/TM) × (BN/TN)` grid (a block with more
    /// warps than warp tiles). The one warp → tile map of this mapping, for
    /// the kernel to read the operands of the tile [`tile`](Self::tile)
    /// writes (a function of the launch alone, the same whatever the matrix).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn warp_offset(&self) -> Option<(usize, usize)> {
        warp_offset::<BM, BN, TM, TN>()
    }

    /// This warp's tile: the block owns the `BM × BN` tile at
    /// [`block_origin`](Self::block_origin) of batch `z`
    /// ([`OutMatrix::batch`]; the whole matrix for a plain binding), and the
    /// warp the `TM × TN` part of it at [`warp_offset`](Self::warp_offset),
    /// clipped to the batch; `None` if the warp has no warp tile or its tile
    /// starts outside the batch. Coordinates are the batch's.
    ///
    /// Disjoint for any grid and block shape: batches share no element
    /// (distinct z), block tiles of a batch are disjoint (distinct (y, x),
    /// and [`grouped_block`] is one-to-one on the grid),
    /// `w ↦ (w / (BN/TN), w mod (BN/TN))` is one-to-one on the
    /// `(BM/TM)·(BN/TN)` warps that get a tile (warp ids are distinct within
    /// the block), and those warp tiles partition the block tile (`TM | BM`,
    /// `TN | BN`, checked at compile time), so no element lies in two warps'
    /// tiles; within a tile the lanes own distinct elements
    /// ([`WarpTile::update_mma_c`]).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn tile(&mut self) -> Option<WarpTile<'_, T, TM, TN, RP>> {
        let (ty, tx) = grouped_block(thread::block_idx(), thread::grid_dim(), G);
        let (_, rows) = self.batch();
        // SAFETY: rows > 0 only if z < batches (`from_raw`).
        unsafe {
            self.warp_tile::<BM, BN, TM, TN, RP>(
                thread::block_idx().z as usize,
                u64::from(ty),
                u64::from(tx),
                rows,
            )
        }
    }
}

/// Where warp tile `warp_id` lies in a `BM × BN` block tile cut into
/// `TM × TN` warp tiles numbered row-major ([`WarpGrid`], [`TileWalk`]).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
fn warp_offset<const BM: usize, const BN: usize, const TM: usize, const TN: usize>()
-> Option<(usize, usize)> {
    const {
        assert!(
            TM > 0
                && TN > 0
                && TM.is_multiple_of(crate::mma::M)
                && TN.is_multiple_of(crate::mma::N)
                && BM.is_multiple_of(TM)
                && BN.is_multiple_of(TN),
            "warp tiles are whole 16 × 8 mma tiles and divide the block tile"
        )
    };
    let (per_row, per_col) = (BN / TN, BM / TM);
    let w = thread::warp_id() as usize;
    (w < per_row * per_col).then(|| ((w / per_row) * TM, (w % per_row) * TN))
}

impl<T: Copy, M: Mapping2> OutMatrix<'_, T, M> {
    /// This warp's tile of block tile (`tile_row`, `tile_col`) of batch
    /// `batch` (whose matrix has `rows` rows: 0 for none), clipped to it;
    /// `None` if the warp has no warp tile or its tile starts outside.
    ///
    /// # Safety
    /// `rows` is 0 or `batch < batches`; the block tile is this block's
    /// alone (the caller's mapping).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    unsafe fn warp_tile<
        const BM: usize,
        const BN: usize,
        const TM: usize,
        const TN: usize,
        const RP: bool,
    >(
        &mut self,
        batch: usize,
        tile_row: u64,
        tile_col: u64,
        rows: usize,
    ) -> Option<WarpTile<'_, T, TM, TN, RP>> {
        let (dr, dc) = warp_offset::<BM, BN, TM, TN>()?;
        let (brow, bcol, brows, bcols) = tile_in(tile_row, tile_col, BM, BN, rows, self.cols())?;
        if dr >= brows || dc >= bcols {
            return None;
        }
        let (row0, col0) = (brow + dr, bcol + dc);
        Some(WarpTile {
            // SAFETY: (row0, col0) is inside the clipped block tile (just
            // checked), so in the batch (rows > 0, so batch < batches: the
            // caller's contract).
            origin: unsafe { self.element_in(batch, row0, col0) },
            row_stride: self.row_stride,
            row0,
            col0,
            rows: TM.min(brows - dr),
            cols: TN.min(bcols - dc),
            _view: PhantomData,
        })
    }
}

/// A block tile of an `OutMatrix<T, TileWalk<…>>` that this thread's block
/// owns: the `index`-th of the output's tiles, handed out only by
/// [`OutMatrix::walk`] (private field, not `Clone`), so only to the block
/// whose residue it is. Read its place with [`OutMatrix::walk_origin`]; its
/// warps write it through [`OutMatrix::walk_tile`].
pub struct WalkTile {
    index: u32,
}

impl WalkTile {
    /// The tile's number in the walk (batch-major).
    #[inline(always)]
    pub fn index(&self) -> u32 {
        self.index
    }
}

/// The tiles a block of a [`TileWalk`] output owns, in order: `b, b + n,
/// …` below the output's tile count (empty off the grid's x-line).
pub struct WalkTiles {
    next: u32,
    step: u32,
    end: u32,
}

impl Iterator for WalkTiles {
    type Item = WalkTile;

    #[inline(always)]
    fn next(&mut self) -> Option<WalkTile> {
        if self.next >= self.end {
            return None;
        }
        let index = self.next;
        self.next = self.next.saturating_add(self.step);
        Some(WalkTile { index })
    }
}

impl<
    'a,
    T: Copy,
    const BM: usize,
    const BN: usize,
    const TM: usize,
    const TN: usize,
    const G: usize,
> OutMatrix<'a, T, TileWalk<BM, BN, TM, TN, G>>
{
    /// Tile rows and columns of one batch, and the tiles of all batches,
    /// if that count is below 2³² (`None` otherwise).
    #[inline(always)]
    fn tile_grid(&self) -> Option<(u32, u32, u32)> {
        const { assert!(BM > 0 && BN > 0, "a tile has at least one element") };
        let gy = u32::try_from(self.rows().div_ceil(BM)).ok()?;
        let gx = u32::try_from(self.cols().div_ceil(BN)).ok()?;
        let batches = u32::try_from(self.bound_batches()).ok()?;
        let count = gy.checked_mul(gx)?.checked_mul(batches)?;
        Some((gy, gx, count))
    }

    /// The tiles this block owns, in the order it should compute them:
    /// `blockIdx.x + i·gridDim.x` for `i = 0, 1, …` below the
    /// `batches × ⌈rows / BM⌉ × ⌈cols / BN⌉` tiles. Distinct blocks of the
    /// x-line own distinct residues, so no tile is any two blocks'; every
    /// tile is one block's when the grid has at least one block. A block
    /// off the x-line (y or z ≠ 0) owns none. The producer and the consumers
    /// of a block each take the walk and see the same tiles.
    ///
    /// Panics (a trap on the GPU) if the output has 2³² tiles or more (the
    /// walk counts in 32 bits, as a grid does: a host binding that large is
    /// refused before the launch).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn walk(&self) -> WalkTiles {
        let (b, n) = (thread::block_idx(), thread::grid_dim());
        let Some((_, _, count)) = self.tile_grid() else {
            panic!("OutMatrix::walk: 2^32 tiles or more")
        };
        WalkTiles {
            next: b.x,
            step: n.x,
            end: if (b.y | b.z) == 0 { count } else { 0 },
        }
    }

    /// Where `tile` lies: its batch and its corner `(row, column)` in the
    /// batch (unclipped), for the kernel to read the operands of the tile
    /// [`walk_tile`](Self::walk_tile) writes. Within a batch, tiles go in
    /// [`grouped_block`]'s banded order of a `⌈rows / BM⌉ × ⌈cols / BN⌉`
    /// grid (one-to-one, as for [`WarpGrid`]).
    #[inline(always)]
    pub fn walk_origin(&self, tile: &WalkTile) -> (usize, usize, usize) {
        let (batch, ty, tx) = self.place(tile);
        (
            batch,
            (ty as usize).wrapping_mul(BM),
            (tx as usize).wrapping_mul(BN),
        )
    }

    /// The batch, tile row and tile column of `tile` (past the last batch
    /// for a tile of a larger output, which no tile of this one is).
    #[inline(always)]
    fn place(&self, tile: &WalkTile) -> (usize, u64, u64) {
        let Some((gy, gx, _)) = self.tile_grid() else {
            return (usize::MAX, 0, 0);
        };
        let (Some(gx), Some(per_batch)) = (NonZeroU32::new(gx), NonZeroU32::new(gy * gx)) else {
            return (usize::MAX, 0, 0);
        };
        let (batch, l) = (tile.index / per_batch, tile.index % per_batch);
        let (ty, tx) = banded(l, gx, gy, G);
        (batch as usize, u64::from(ty), u64::from(tx))
    }

    /// Where this warp's tile lies in a `BM × BN` tile: as
    /// [`WarpGrid`]'s ([`OutMatrix::warp_offset`]).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn walk_warp_offset(&self) -> Option<(usize, usize)> {
        warp_offset::<BM, BN, TM, TN>()
    }

    /// This warp's part of `tile`, a tile this block owns: the `TM × TN`
    /// warp tile at [`walk_warp_offset`](Self::walk_warp_offset) of the
    /// block tile at [`walk_origin`](Self::walk_origin), clipped to the
    /// batch; `None` if the warp has no warp tile or its tile starts
    /// outside. Coordinates are the batch's.
    ///
    /// Disjoint for any grid: tile numbers are one block's each
    /// ([`walk`](Self::walk): a `WalkTile` exists only for the block whose
    /// residue its number is), numbers map one-to-one onto the tiles of the
    /// bound batches (batch-major, then [`grouped_block`], a bijection of
    /// each batch's grid), the batches share no element, and within a tile
    /// warps and lanes own distinct elements as in [`WarpGrid`]. A
    /// `WalkTile` of another `TileWalk` output names a tile by its number,
    /// so here too it is this block's.
    ///
    /// Its lanes write it through [`RunTile::panels`]: 16-byte runs of
    /// rows, or elements where the rows do not start on 16 bytes, one map
    /// for the whole warp.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn walk_tile(&mut self, tile: &WalkTile) -> Option<RunTile<'_, T, TM, TN>> {
        let (batch, ty, tx) = self.place(tile);
        let rows = if batch < self.bound_batches() {
            self.rows()
        } else {
            0
        };
        // SAFETY: rows is 0 unless batch < batches; the tile is this
        // block's (above).
        let t = unsafe { self.warp_tile::<BM, BN, TM, TN, false>(batch, ty, tx, rows) }?;
        Some(RunTile {
            origin: t.origin,
            row_stride: t.row_stride,
            row0: t.row0,
            col0: t.col0,
            rows: t.rows,
            cols: t.cols,
            _view: PhantomData,
        })
    }
}

/// Columns of a [`RunTile`]'s panel: 256 bytes of f32, 128 of f16 — whole
/// 128-byte lines of every row.
pub const RUN_PANEL: usize = 64;

/// The `TM × TN` warp tile of an `OutMatrix<T, TileWalk<…>>` (from
/// [`OutMatrix::walk_tile`]), written by its lanes panel by panel, as a warp
/// writes a tile it staged in shared memory (the Hopper GEMM's epilogue).
/// The tile is cut into panels of [`RUN_PANEL`] columns. How its lanes
/// share a panel is fixed by the tile, once, in [`panels`](Self::panels):
/// where C's rows start on 16 bytes, in *runs* ([`RunRows`]: 16 bytes of a
/// row, lane `l` owning runs `l, l + 32, …` of the panel's, numbered
/// row-major), so one request of the warp's writes `32·16` bytes of whole
/// rows; where they do not, element by element ([`ElementPanels`]: lane `l`
/// owning elements `l, l + 32, …`, so one request writes 32 consecutive
/// elements of a row). Either way one map for the whole warp, decided from
/// the tile (the same for every lane): no lane can reach another's element.
pub struct RunTile<'v, T, const TM: usize, const TN: usize> {
    origin: *mut T,
    row_stride: usize,
    row0: usize,
    col0: usize,
    rows: usize,
    cols: usize,
    _view: PhantomData<&'v mut [T]>,
}

/// How a warp writes its [`RunTile`] ([`RunTile::panels`]), decided once for
/// the tile.
pub enum RunPanels<'t, T, const TM: usize, const TN: usize> {
    /// All `TM × TN` elements inside the matrix and every run on 16 bytes:
    /// each run one 16-byte vector, no clipping at all.
    Interior(InteriorRunRows<'t, T, TM, TN>),
    /// Every run on 16 bytes, the tile clipped by the matrix's right or
    /// bottom edge: runs starting outside are skipped, a run wholly inside
    /// is one vector ([`Run::whole`]), a row's ragged last run is written
    /// element by element ([`Run::slot`]).
    Edge(RunRows<'t, T, TM, TN, true>),
    /// The rows do not start on 16 bytes (C's first element or its row
    /// stride in bytes not a multiple of 16): element by element, in
    /// coalesced order.
    Elements(ElementPanels<'t, T, TM, TN>),
}

impl<'v, T: Copy, const TM: usize, const TN: usize> RunTile<'v, T, TM, TN> {
    /// The tile's first row and column in the matrix.
    #[inline(always)]
    pub fn origin(&self) -> (usize, usize) {
        (self.row0, self.col0)
    }

    /// How this warp writes the tile: [`RunPanels::Interior`] if all
    /// `TM × TN` elements are inside the matrix and every run starts on 16
    /// bytes (the tile's first element and the row stride in bytes
    /// multiples of 16), [`RunPanels::Edge`] if the runs start on 16 bytes
    /// but the tile is clipped, [`RunPanels::Elements`] otherwise. One
    /// check for the tile, from values every lane of the warp shares, so
    /// the warp's lanes all take the same map. It borrows the tile, so the
    /// forms are never used at once.
    #[inline(always)]
    pub fn panels(&mut self) -> RunPanels<'_, T, TM, TN> {
        let aligned = (self.origin as usize).is_multiple_of(16)
            && (self.row_stride * size_of::<T>()).is_multiple_of(16);
        let whole = self.rows == TM && self.cols == TN;
        match (aligned, whole) {
            (true, true) => RunPanels::Interior(self.rows_view()),
            (true, false) => RunPanels::Edge(self.rows_view()),
            (false, _) => RunPanels::Elements(ElementPanels {
                origin: self.origin,
                row_stride: self.row_stride,
                rows: self.rows,
                cols: self.cols,
                _view: PhantomData,
            }),
        }
    }

    #[inline(always)]
    fn rows_view<const CLIPPED: bool>(&mut self) -> RunRows<'_, T, TM, TN, CLIPPED> {
        RunRows {
            origin: self.origin,
            row_stride: self.row_stride,
            rows: self.rows,
            cols: self.cols,
            _view: PhantomData,
        }
    }
}

/// A [`RunTile`] whose rows start on 16 bytes, written in 16-byte runs
/// ([`RunPanels::Interior`], `CLIPPED = false`, or [`RunPanels::Edge`]).
pub struct RunRows<'t, T, const TM: usize, const TN: usize, const CLIPPED: bool> {
    origin: *mut T,
    row_stride: usize,
    rows: usize,
    cols: usize,
    _view: PhantomData<&'t mut [T]>,
}

/// A [`RunRows`] wholly inside its matrix, every run 16-byte aligned.
pub type InteriorRunRows<'t, T, const TM: usize, const TN: usize> = RunRows<'t, T, TM, TN, false>;

impl<T: Copy, const TM: usize, const TN: usize, const CLIPPED: bool>
    RunRows<'_, T, TM, TN, CLIPPED>
{
    /// Hands each of this lane's runs of panel `panel` (columns
    /// `RUN_PANEL·panel ..` of the tile) to `f(row, col, run)`, `row` and
    /// `col` its first element's place in the tile: runs `lane, lane + 32,
    /// …` of the panel's `TM · RUN_PANEL / E` (row-major). A clipped tile
    /// skips the runs that start outside the matrix and clips the others
    /// ([`Run::len`]); a panel past the tile has none. `E · size_of::<T>()`
    /// must be 16, `TN` a multiple of [`RUN_PANEL`], and a panel whole
    /// requests of the warp (compile-time errors otherwise).
    #[inline(always)]
    pub fn update_panel(
        &mut self,
        panel: usize,
        mut f: impl FnMut(usize, usize, &mut Run<'_, T, CLIPPED>),
    ) where
        T: RunElement,
    {
        const {
            assert!(
                size_of::<T::Run>() == 16
                    && TN.is_multiple_of(RUN_PANEL)
                    && (TM * RUN_PANEL / T::RUN).is_multiple_of(WARP_SIZE as usize),
                "runs of 16 bytes, whole panels, whole requests"
            )
        };
        if panel >= TN / RUN_PANEL {
            return;
        }
        let lane = thread::lane_id() as usize;
        let per_row = RUN_PANEL / T::RUN;
        let mut k = 0;
        while k < TM * per_row / WARP_SIZE as usize {
            let u = WARP_SIZE as usize * k + lane;
            let (r, c) = (u / per_row, panel * RUN_PANEL + (u % per_row) * T::RUN);
            if !CLIPPED || (r < self.rows && c < self.cols) {
                let mut run = Run {
                    // SAFETY: (r, c) is inside the clipped tile (checked, or
                    // for an unclipped one every (r, c) of the tile is:
                    // `RunTile::panels`), so in the matrix; the run's `len`
                    // elements stay in its row and in the tile.
                    first: unsafe { self.origin.add(r * self.row_stride + c) },
                    len: if CLIPPED {
                        T::RUN.min(self.cols - c)
                    } else {
                        T::RUN
                    },
                    _run: PhantomData,
                };
                f(r, c, &mut run);
            }
            k += 1;
        }
    }
}

/// A [`RunTile`] whose rows do not start on 16 bytes
/// ([`RunPanels::Elements`]), written element by element: lane `l` owns
/// elements `l, l + 32, l + 64, …` of each panel (its `TM × RUN_PANEL`
/// elements numbered row-major), so one request of the warp's is 32
/// consecutive elements of a row (128 bytes of f32, 64 of f16), where runs
/// written element by element would spread a request over 32 runs.
pub struct ElementPanels<'t, T, const TM: usize, const TN: usize> {
    origin: *mut T,
    row_stride: usize,
    rows: usize,
    cols: usize,
    _view: PhantomData<&'t mut [T]>,
}

impl<T: Copy, const TM: usize, const TN: usize> ElementPanels<'_, T, TM, TN> {
    /// Hands each of this lane's elements of panel `panel` inside the
    /// matrix to `f(row, col, slot)`, `row` and `col` its place in the
    /// tile; a panel past the tile has none. `TN` must be a multiple of
    /// [`RUN_PANEL`] (a compile-time error otherwise).
    #[inline(always)]
    pub fn update_panel(&mut self, panel: usize, mut f: impl FnMut(usize, usize, Slot<'_, T>)) {
        const {
            assert!(
                TN.is_multiple_of(RUN_PANEL) && RUN_PANEL.is_multiple_of(WARP_SIZE as usize),
                "whole panels, whole requests"
            )
        };
        if panel >= TN / RUN_PANEL {
            return;
        }
        let lane = thread::lane_id() as usize;
        let mut k = 0;
        while k < TM * RUN_PANEL / WARP_SIZE as usize {
            let u = WARP_SIZE as usize * k + lane;
            let (r, c) = (u / RUN_PANEL, panel * RUN_PANEL + u % RUN_PANEL);
            if r < self.rows && c < self.cols {
                // SAFETY: (r, c) is inside the clipped tile (just checked),
                // so in the matrix, and this lane's alone (element `u` of
                // the panel); the slot lives for the call.
                f(r, c, unsafe {
                    Slot::from_element(self.origin.add(r * self.row_stride + c))
                });
            }
            k += 1;
        }
    }
}

/// An element type a [`RunTile`] writes in 16-byte runs: `RUN` of them,
/// as the array `Run`.
pub trait RunElement: crate::shared::SharedElement {
    /// Elements in 16 bytes.
    const RUN: usize;
    /// A run's elements: `[Self; RUN]`.
    type Run: Copy + AsRef<[Self]> + AsMut<[Self]>;
    /// The run whose element `j` is `f(j)`.
    fn run(f: impl FnMut(usize) -> Self) -> Self::Run;
}

macro_rules! run_element {
    ($($t:ty => $n:literal),*) => { $(
        impl RunElement for $t {
            const RUN: usize = $n;
            type Run = [$t; $n];
            #[inline(always)]
            fn run(f: impl FnMut(usize) -> $t) -> [$t; $n] {
                core::array::from_fn(f)
            }
        }
        const _: () = assert!($n * size_of::<$t>() == 16);
    )* };
}
run_element!(f32 => 4, u32 => 4, i32 => 4, f64 => 2, u64 => 2, i64 => 2,
    crate::f16 => 8, crate::bf16 => 8, u16 => 8, i16 => 8);

/// One run of a [`RunTile`]: `T::RUN` consecutive elements of a row (16
/// bytes) that this lane alone owns, or fewer where a clipped tile meets
/// the matrix's right edge. Lives only for the call that hands it out.
pub struct Run<'r, T, const CLIPPED: bool> {
    first: *mut T,
    len: usize,
    _run: PhantomData<&'r mut [T]>,
}

impl<T: Copy, const CLIPPED: bool> Run<'_, T, CLIPPED> {
    /// Elements of the run inside the matrix (`T::RUN` unless clipped).
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no element is inside (never, for a run handed out).
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Element `j` of the run, if it is inside the matrix (`j < len()`).
    #[inline(always)]
    pub fn slot(&mut self, j: usize) -> Option<Slot<'_, T>> {
        // SAFETY: j < len: in the matrix and this lane's alone (the run's);
        // the slot borrows the run.
        (j < self.len).then(|| unsafe { Slot::from_element(self.first.add(j)) })
    }
}

impl<T: RunElement> Run<'_, T, true> {
    /// The run as one 16-byte vector, if none of it is clipped (`len() ==
    /// T::RUN`): a run of a [`RunPanels::Edge`] tile starts on 16 bytes, so
    /// its length is the one check, made once for the run.
    #[inline(always)]
    pub fn whole(&mut self) -> Option<Run<'_, T, false>> {
        (self.len == T::RUN).then_some(Run {
            first: self.first,
            len: T::RUN,
            _run: PhantomData,
        })
    }
}

impl<T: RunElement> Run<'_, T, false> {
    /// Reads the run with one 16-byte load (`LDG.E.128`).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load(&self) -> T::Run {
        const { assert!(size_of::<T::Run>() == 16) };
        #[cfg(not(target_arch = "nvptx64"))]
        crate::arch::global_access(self.first.cast(), 16, false);
        // SAFETY: an interior run: 16 bytes of the matrix, 16-byte aligned
        // (`RunTile::panels`), this lane's alone. Any 16 bytes are a
        // valid `T::Run` (`[T; RUN]` of a `SharedElement`: every bit
        // pattern valid, no padding, 16 bytes like `[u32; 4]`).
        unsafe {
            let words = crate::arch::ld_global_v4_output(self.first.cast());
            core::mem::transmute_copy::<[u32; 4], T::Run>(&words)
        }
    }

    /// Writes the run with one 16-byte store (`STG.E.128`).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn store(&mut self, values: T::Run) {
        const { assert!(size_of::<T::Run>() == 16) };
        #[cfg(not(target_arch = "nvptx64"))]
        crate::arch::global_access(self.first.cast(), 16, true);
        // SAFETY: as in `load`; `values` has no padding (`SharedElement`),
        // so its 16 bytes are 4 initialised words.
        unsafe {
            let words = core::mem::transmute_copy::<T::Run, [u32; 4]>(&values);
            crate::arch::st_global_v4(self.first.cast(), words)
        }
    }
}

impl<'v, T: Copy, const TM: usize, const TN: usize, const RP: bool, const CLIPPED: bool>
    WarpTile<'v, T, TM, TN, RP, CLIPPED>
{
    /// The tile's first row and column in the matrix.
    #[inline(always)]
    pub fn origin(&self) -> (usize, usize) {
        (self.row0, self.col0)
    }

    /// Writes this lane's 4 elements of the 16 × 8 accumulator `frag` into
    /// sub-tile (`sub_row`, `sub_col`) of the tile (rows `16·sub_row ..`,
    /// columns `8·sub_col ..`), each `convert`ed, through its [`Slot`];
    /// elements outside the matrix, and sub-tiles outside the tile, are
    /// skipped. Lanes own distinct elements of every sub-tile
    /// ([`c_coord`](crate::mma::c_coord) is one-to-one), so a warp's lanes
    /// never write the same element.
    #[inline(always)]
    pub fn store_mma_c(
        &mut self,
        sub_row: usize,
        sub_col: usize,
        frag: &FragC,
        convert: impl Fn(f32) -> T,
    ) {
        self.update_mma_c(sub_row, sub_col, frag, |v, slot| slot.set(convert(v)));
    }

    /// As [`store_mma_c`](Self::store_mma_c) (which calls this, so the two
    /// use the one lane → element map: a lane that stores one sub-tile and
    /// updates another can never reach another lane's element), but hands
    /// each of this lane's elements of the sub-tile to `f(value, slot)` with
    /// the element's [`Slot`], which may read the old value (a GEMM
    /// epilogue's `beta·C`) before writing, or not read it at all. Same
    /// ownership: the slot is this lane's alone and lives only for the call.
    ///
    /// The map is [`MmaOrder::c_coord`] of the tile's order (`RP`):
    /// [`c_coord`](crate::mma::c_coord)'s layout at rows `16·sub_row ..`,
    /// columns `8·sub_col ..`, its rows paired for accumulators an `mma`
    /// computed from a paired tf32 A. One order per view type, one-to-one
    /// over lanes, elements and sub-tiles.
    #[inline(always)]
    pub fn update_mma_c(
        &mut self,
        sub_row: usize,
        sub_col: usize,
        frag: &FragC,
        mut f: impl FnMut(f32, &mut Slot<'_, T>),
    ) {
        if sub_row >= TM / crate::mma::M || sub_col >= TN / crate::mma::N {
            return;
        }
        let order = MmaOrder { rows_paired: RP };
        let lane = thread::lane_id();
        for (i, &v) in frag.regs.iter().enumerate() {
            let (r, c) = order.c_coord(lane, i, sub_row, sub_col);
            // An unclipped tile has all TM × TN elements inside (`interior`).
            if !CLIPPED || (r < self.rows && c < self.cols) {
                // SAFETY: (r, c) is inside the clipped tile (rows ≤ TM, cols
                // ≤ TN) — for an unclipped one, made only by `interior`,
                // which checked rows = TM and cols = TN, r < TM and c < TN
                // hold for every sub-tile inside the tile (a lane is below
                // 32) — so in the matrix and in this warp's tile alone; it is
                // this lane's alone (every lane maps by the one order of this
                // type, and `MmaOrder::c_coord` is one-to-one over lanes, i
                // and sub-tiles), and the slot lives only here (`f` borrows it
                // for any lifetime, so it cannot keep it).
                let mut slot =
                    unsafe { Slot::from_element(self.origin.add(r * self.row_stride + c)) };
                f(v, &mut slot);
            }
        }
    }
}

impl<'v, T: Copy, const TM: usize, const TN: usize, const CLIPPED: bool>
    WarpTile<'v, T, TM, TN, false, CLIPPED>
{
    /// As [`update_mma_c`](Self::update_mma_c) for an f64 accumulator of
    /// shape `S` ([`dmma`](crate::mma::dmma): `m8n8k4`, `m16n8k16`): this
    /// lane's elements of the `S::M × S::N` sub-tile (`sub_row`, `sub_col`)
    /// (rows `S::M·sub_row ..`, columns `S::N·sub_col ..`) at
    /// [`Shape::c_coord`](crate::mma::dmma::Shape::c_coord), each handed to
    /// `f(value, slot)`; elements outside the matrix, and sub-tiles outside
    /// the tile, are skipped. `c_coord` is one-to-one over lanes and
    /// elements (the sealed shapes' tables, tested), and the sub-tiles
    /// partition the tile, so a warp's lanes never write the same element.
    #[inline(always)]
    pub fn update_dmma_c<S: crate::mma::dmma::Shape>(
        &mut self,
        sub_row: usize,
        sub_col: usize,
        frag: &S::C,
        mut f: impl FnMut(f64, &mut Slot<'_, T>),
    ) {
        use crate::mma::dmma::Fragment;
        if sub_row >= TM / S::M || sub_col >= TN / S::N {
            return;
        }
        let lane = thread::lane_id();
        for i in 0..S::C::LEN {
            let v = frag.element(i);
            let (r0, c0) = S::c_coord(lane, i);
            let (r, c) = (sub_row * S::M + r0, sub_col * S::N + c0);
            // An unclipped tile has all TM × TN elements inside (`interior`).
            if !CLIPPED || (r < self.rows && c < self.cols) {
                // SAFETY: (r, c) is inside the clipped tile (rows ≤ TM, cols
                // ≤ TN; for an unclipped one, made only by `interior`, r < TM
                // and c < TN hold for every sub-tile inside the tile), so in
                // the matrix and in this warp's tile alone; it is this lane's
                // alone (`S::c_coord` is one-to-one over lanes and
                // elements, the sub-tiles are disjoint), and the slot lives
                // only here (`f` borrows it for any lifetime, so it cannot
                // keep it).
                let mut slot =
                    unsafe { Slot::from_element(self.origin.add(r * self.row_stride + c)) };
                f(v, &mut slot);
            }
        }
    }
}

impl<'v, T: Copy, const TM: usize, const TN: usize, const RP: bool> WarpTile<'v, T, TM, TN, RP> {
    /// This tile without its clipping, if none of it is clipped: all
    /// `TM × TN` elements inside the matrix. One check for the tile; the
    /// [`InteriorWarpTile`] it gives then writes each element with no test
    /// (a GEMM's every tile but those on the matrix's right and bottom
    /// edges). It borrows this one, so the two are never used at once.
    #[inline(always)]
    pub fn interior(&mut self) -> Option<InteriorWarpTile<'_, T, TM, TN, RP>> {
        (self.rows == TM && self.cols == TN).then_some(WarpTile {
            origin: self.origin,
            row_stride: self.row_stride,
            row0: self.row0,
            col0: self.col0,
            rows: TM,
            cols: TN,
            _view: PhantomData,
        })
    }
}

/// A [`WarpTile`] that [`WarpTile::interior`] found wholly inside its
/// matrix: the same lane → element map, written with no per-element test.
pub type InteriorWarpTile<'t, T, const TM: usize, const TN: usize, const RP: bool = false> =
    WarpTile<'t, T, TM, TN, RP, false>;

#[cfg(test)]
mod tests {
    use super::{OutMatrix, RunPanels, TileWalk, grouped_block};
    use crate::Dim3;
    use crate::emu::{LaunchShape, OutputBuffer, launch_with_outputs};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// `MicroTile::row_vectors`: on a 10 × 12 matrix (rows `ld` apart) in
    /// 8 × 8 block tiles of 2 × 4 micro-tiles with 2 sub-tiles of rows
    /// (4 threads a block), every thread whose micro-tile is whole and
    /// aligned writes its rows as 16-byte vectors — each element of the
    /// matrix exactly once, rows past the matrix refused — and a micro-tile
    /// with ragged columns (12 = 8 + 4: whole) or a row stride that is not a
    /// multiple of 16 bytes gets `None` (every micro-tile here is whole:
    /// 12 columns are 8 + 4).
    #[test]
    fn row_vectors_write_whole_aligned_rows_once() {
        use super::MicroTiles;
        let (rows, cols) = (10usize, 12usize);
        for ld in [12usize, 13] {
            let len = (rows - 1) * ld + cols;
            // 16-byte aligned storage.
            let mut store = vec![crate::global::Vector16([0f32; 4]); len.div_ceil(4)];
            let ptr = store.as_mut_ptr().cast::<f32>() as usize;
            let vectors = AtomicUsize::new(0);
            let shape = LaunchShape {
                grid: Dim3::new(2, 2, 1),
                block: Dim3::x(4),
                dynamic_shared_bytes: 0,
            };
            let out = OutputBuffer {
                name: "y",
                addr: ptr,
                len,
                elem_bytes: 4,
            };
            launch_with_outputs("row_vectors", shape, &[out], &|| {
                // SAFETY: `store` lives through the launch, untouched by the host.
                let mut view = unsafe {
                    OutMatrix::<f32, MicroTiles<8, 8, 2, 4, 2, 1>>::from_raw(
                        ptr as *mut f32,
                        len,
                        rows,
                        cols,
                        ld,
                        1,
                        len,
                    )
                };
                let Some(mut tile) = view.micro_tile() else {
                    return;
                };
                let (r0, c0) = tile.origin();
                match tile.row_vectors() {
                    Some(mut rv) => {
                        assert_eq!(ld, 12, "({r0}, {c0})");
                        for i in 0..4 {
                            // Row i: matrix row r0 + (i / 2)·4 + i % 2.
                            let r = r0 + (i / 2) * 4 + i % 2;
                            let v = core::array::from_fn(|j| (r * cols + c0 + j) as f32 + 1.0);
                            assert_eq!(rv.store(i, v), r < rows);
                            vectors.fetch_add(usize::from(r < rows), Ordering::Relaxed);
                        }
                        assert!(!rv.store(4, [0.0; 4]));
                    }
                    None => assert_eq!(ld, 13, "({r0}, {c0})"),
                }
            })
            .unwrap();
            let y = &store.iter().flat_map(|v| v.0).collect::<Vec<f32>>()[..len];
            if ld == 12 {
                // 10 rows × 3 vectors a row.
                assert_eq!(vectors.load(Ordering::Relaxed), 30);
                for r in 0..rows {
                    for c in 0..cols {
                        assert_eq!(y[r * ld + c], (r * cols + c) as f32 + 1.0, "({r}, {c})");
                    }
                }
            } else {
                assert_eq!(vectors.load(Ordering::Relaxed), 0);
                assert!(y.iter().all(|&v| v == 0.0));
            }
        }
    }

    /// `StagedTiles`: 8 × 16 block tiles of 1 × 4 f32 micro-tiles in 2
    /// sub-tiles of rows (16 threads own micro-tiles; blocks of 24, so some
    /// own none), over matrices whose tiles are whole aligned rows (every
    /// block takes row vectors) or not (columns not a multiple of 4, a row
    /// stride that is not, a first element off 16 bytes: every block stages
    /// and walks its tile, in one run where the tile is whole rows of a
    /// packed matrix, row by row otherwise). Every element is written
    /// exactly once, with the race detector on, and nothing outside the
    /// matrix.
    #[test]
    fn staged_tiles_write_every_element_once_by_either_map() {
        use super::{StagedTiles, TileStores};
        for (rows, cols, ld, shift, vectors) in [
            (10usize, 32usize, 32usize, 0usize, true),
            (19, 12, 16, 0, true),
            (19, 30, 30, 0, false),
            (9, 13, 13, 0, false),
            (10, 40, 42, 0, false),
            (10, 32, 32, 1, false),
            (3, 7, 9, 2, false),
        ] {
            let len = (rows - 1) * ld + cols;
            // 16-byte aligned storage, the matrix `shift` elements in, a
            // guard element past it.
            let mut store = vec![crate::global::Vector16([0f32; 4]); (shift + len + 1).div_ceil(4)];
            let base = store.as_mut_ptr().cast::<f32>() as usize;
            let ptr = base + shift * 4;
            let staged = AtomicUsize::new(0);
            let shape = LaunchShape {
                grid: Dim3::new(cols.div_ceil(16) as u32, rows.div_ceil(8) as u32, 1),
                block: Dim3::x(24),
                dynamic_shared_bytes: 0,
            };
            let out = OutputBuffer {
                name: "y",
                addr: ptr,
                len,
                elem_bytes: 4,
            };
            let value = |r: usize, c: usize| (r * cols + c) as f32 + 1.0;
            launch_with_outputs("staged_tiles", shape, &[out], &|| {
                // SAFETY: `store` lives through the launch, untouched by the host.
                let mut view = unsafe {
                    OutMatrix::<f32, StagedTiles<8, 16, 1, 4, 2>>::from_raw(
                        ptr as *mut f32,
                        len,
                        rows,
                        cols,
                        ld,
                        1,
                        len,
                    )
                };
                let t = crate::thread::linear_thread_id() as usize;
                let b = crate::thread::block_idx();
                let (r0, c0) = (b.y as usize * 8, b.x as usize * 16);
                let tile_rows = (rows - r0).min(8);
                match view.tile_stores().unwrap() {
                    TileStores::Vectors(rv) => {
                        assert!(vectors);
                        // Micro-tile t of each sub-tile: rows t / 4 and t / 4 + 4.
                        let Some(mut rv) = rv else {
                            assert!(t >= 16 || t / 4 >= tile_rows || c0 + (t % 4) * 4 >= cols);
                            return;
                        };
                        for i in 0..2 {
                            let (r, c) = (r0 + t / 4 + 4 * i, c0 + (t % 4) * 4);
                            let v = core::array::from_fn(|j| value(r, c + j));
                            assert_eq!(rv.store(i, v), r < rows);
                        }
                    }
                    TileStores::Staged(mut tile) => {
                        assert!(!vectors);
                        assert_eq!(tile.origin(), (r0, c0));
                        staged.fetch_add(usize::from(t == 0), Ordering::Relaxed);
                        let (tr, tc) = (tile.rows(), tile.cols());
                        tile.fill(|r, c| {
                            assert!(r < tr && c < tc);
                            value(r0 + r, c0 + c)
                        });
                    }
                }
            })
            .unwrap();
            let y: Vec<f32> = store.iter().flat_map(|v| v.0).collect();
            let blocks = cols.div_ceil(16) * rows.div_ceil(8);
            assert_eq!(
                staged.load(Ordering::Relaxed),
                if vectors { 0 } else { blocks }
            );
            for (i, &got) in y.iter().enumerate() {
                let at = i.wrapping_sub(shift);
                let inside = i >= shift && at % ld < cols && at < len;
                let want = if inside { value(at / ld, at % ld) } else { 0.0 };
                assert_eq!(
                    got, want,
                    "{rows} x {cols} (ld {ld}, shift {shift}): y[{i}]"
                );
            }
        }
    }

    /// A persistent launch of `grid` blocks of 2 warps over `batches` of
    /// 37 × 150 (rows 152 apart, batches 37·152 + `shift` apart) in 32 × 64
    /// tiles (warp tiles 16 × 64, bands of 3 tile rows): every lane adds 1
    /// to each element of its runs of each tile it walks. Every element of
    /// every batch ends at exactly 1, padding at 0, with the race detector
    /// on; the walk's tile numbers are each one block's, and the origin it
    /// gives the producer is the one the writers write; a warp tile is
    /// written unclipped (whole 16-byte runs) exactly when it is inside the
    /// matrix and 16-byte aligned, clipped runs of an aligned tile whole
    /// exactly where they lie inside the matrix, and an unaligned tile's
    /// elements in requests of 32 consecutive elements of a row.
    #[test]
    fn a_tile_walk_covers_every_tile_once_across_blocks() {
        let (rows, cols, ld) = (37usize, 150usize, 152usize);
        for (batches, shift) in [(1usize, 0usize), (3, 3), (2, 4)] {
            let stride = rows * ld + shift;
            let len = (batches - 1) * stride + (rows - 1) * ld + cols;
            for grid in [
                Dim3::x(1),
                Dim3::x(3),
                Dim3::x(7),
                Dim3::new(5, 2, 1),
                Dim3::x(64),
            ] {
                // 16-byte aligned (a `Vec<f32>` need not be).
                let mut backing = vec![0u128; len.div_ceil(4)];
                let c = &mut bytemuck_f32(&mut backing)[..len];
                let (ptr, addr) = (c.as_mut_ptr() as usize, c.as_ptr() as usize);
                let walked = Mutex::new(Vec::new());
                // Lanes that wrote through an interior (unclipped) tile.
                let interior = AtomicUsize::new(0);
                let shape = LaunchShape {
                    grid,
                    block: Dim3::x(64),
                    dynamic_shared_bytes: 0,
                };
                let out = OutputBuffer {
                    name: "c",
                    addr,
                    len,
                    elem_bytes: 4,
                };
                launch_with_outputs("tile_walk", shape, &[out], &|| {
                    // SAFETY: `c` lives through the launch, untouched by the host.
                    let mut view = unsafe {
                        OutMatrix::<f32, TileWalk<32, 64, 16, 64, 3>>::from_raw(
                            ptr as *mut f32,
                            len,
                            rows,
                            cols,
                            ld,
                            batches,
                            stride,
                        )
                    };
                    for tile in view.walk() {
                        let (batch, r0, c0) = view.walk_origin(&tile);
                        let (dr, dc) = view.walk_warp_offset().unwrap();
                        if crate::thread::linear_thread_id() == 0 {
                            let b = crate::thread::block_idx();
                            walked.lock().unwrap().push((tile.index(), b));
                        }
                        if let Some(mut warp_tile) = view.walk_tile(&tile) {
                            let (wr, wc) = (r0 + dr, c0 + dc);
                            assert_eq!(warp_tile.origin(), (wr, wc));
                            assert!(batch < batches);
                            // Inside and aligned: no clipping; else clipped.
                            let aligned = |batch: usize| (batch * stride).is_multiple_of(4);
                            let unclipped = wr + 16 <= rows && wc + 64 <= cols && aligned(batch);
                            let lane = crate::thread::lane_id() as usize;
                            match warp_tile.panels() {
                                RunPanels::Interior(mut inner) => {
                                    assert!(unclipped, "({wr}, {wc}) is on an edge");
                                    interior.fetch_add(1, Ordering::Relaxed);
                                    inner.update_panel(0, |_, _, run| {
                                        let v = run.load();
                                        run.store(v.map(|x| x + 1.0));
                                    });
                                    // Past the tile: nothing.
                                    inner.update_panel(1, |_, _, _| unreachable!());
                                }
                                RunPanels::Edge(mut edge) => {
                                    assert!(!unclipped, "({wr}, {wc}) is inside");
                                    assert!(aligned(batch), "batch {batch} is not aligned");
                                    edge.update_panel(0, |r, col, run| {
                                        assert!(wr + r < rows && wc + col < cols);
                                        assert_eq!(run.len(), 4.min(cols - wc - col));
                                        // Whole exactly when none of it is clipped.
                                        match run.whole() {
                                            Some(mut whole) => {
                                                assert!(wc + col + 4 <= cols);
                                                let v = whole.load();
                                                whole.store(v.map(|x| x + 1.0));
                                            }
                                            None => {
                                                assert!(wc + col + 4 > cols);
                                                for j in 0..4 {
                                                    if let Some(mut d) = run.slot(j) {
                                                        d.set(d.get() + 1.0);
                                                    }
                                                }
                                            }
                                        }
                                    });
                                }
                                RunPanels::Elements(mut elements) => {
                                    assert!(!aligned(batch), "batch {batch} is aligned");
                                    elements.update_panel(0, |r, col, mut d| {
                                        assert!(wr + r < rows && wc + col < cols);
                                        // Coalesced: a request's lanes take
                                        // 32 consecutive elements of a row.
                                        assert_eq!((r * 64 + col) % 32, lane);
                                        d.set(d.get() + 1.0);
                                    });
                                    elements.update_panel(1, |_, _, _| unreachable!());
                                }
                            }
                        }
                    }
                })
                .unwrap();
                for b in 0..batches {
                    for r in 0..rows {
                        for col in 0..ld {
                            let i = b * stride + r * ld + col;
                            if i < len {
                                let want = if col < cols { 1.0 } else { 0.0 };
                                assert_eq!(c[i], want, "{grid:?}, batch {b}, ({r}, {col})");
                            }
                        }
                    }
                }
                // Of each batch's 16 × 64 warp tiles, the 4 in rows 0..32
                // and columns 0..128 are inside: 32 lanes each, in the
                // batches that start on 16 bytes.
                let aligned = (0..batches)
                    .filter(|b| (b * stride).is_multiple_of(4))
                    .count();
                assert_eq!(interior.into_inner(), aligned * 4 * 32, "{grid:?}");
                let tiles = batches * 37usize.div_ceil(32) * 150usize.div_ceil(64);
                let mut walked = walked.into_inner().unwrap();
                walked.sort_by_key(|&(t, _)| t);
                assert_eq!(walked.len(), tiles, "{grid:?}");
                for (i, &(t, b)) in walked.iter().enumerate() {
                    assert_eq!(t, i as u32, "{grid:?}");
                    assert_eq!((b.y, b.z, b.x), (0, 0, t % grid.x));
                }
            }
        }
    }

    /// `words` as f32s (each u128 four of them).
    fn bytemuck_f32(words: &mut [u128]) -> &mut [f32] {
        // SAFETY: a u128 is 16 initialised bytes, any of which are a valid
        // f32, with at least f32's alignment; the slice borrows `words`.
        unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), words.len() * 4) }
    }

    /// Every block of a grid takes a distinct tile of it (a bijection), for
    /// bands that divide the rows and ones that do not; `g ≤ 1` and grids
    /// of more than 2³² blocks keep the launch order; and the order is the
    /// banded one: consecutive blocks walk down a band's rows first.
    #[test]
    fn a_tile_walk_places_tiles_as_grouped_block_orders_blocks() {
        for (gy, gx) in [(1, 1), (1, 7), (7, 1), (8, 8), (13, 5), (17, 32), (64, 3)] {
            for g in [0, 1, 2, 3, 8, 16, 100] {
                let grid = Dim3::new(gx, gy, 1);
                for l in 0..gx * gy {
                    let (y, x) = (l / gx, l % gx);
                    assert_eq!(
                        super::banded(l, super::NonZeroU32::new(gx).unwrap(), gy, g),
                        grouped_block(Dim3::new(x, y, 0), grid, g),
                        "{gy}×{gx} g={g}: tile {l}"
                    );
                }
            }
        }
    }

    #[test]
    fn grouped_block_is_a_bijection_walking_bands_of_rows() {
        for (gy, gx) in [(1, 1), (1, 7), (7, 1), (8, 8), (13, 5), (17, 32), (64, 3)] {
            for g in [0, 1, 2, 3, 8, 16, 100] {
                let grid = Dim3::new(gx, gy, 1);
                let mut seen = vec![false; (gx * gy) as usize];
                for y in 0..gy {
                    for x in 0..gx {
                        let (ty, tx) = grouped_block(Dim3::new(x, y, 0), grid, g);
                        assert!(
                            ty < gy && tx < gx,
                            "{gy}×{gx} g={g}: ({y},{x}) -> ({ty},{tx})"
                        );
                        let i = (ty * gx + tx) as usize;
                        assert!(!seen[i], "{gy}×{gx} g={g}: tile ({ty},{tx}) twice");
                        seen[i] = true;
                        if g <= 1 {
                            assert_eq!((ty, tx), (y, x));
                        }
                    }
                }
            }
        }
        // 13 rows in bands of 8: blocks 0..8 take column 0 of rows 0..8,
        // block 8 column 1; the last band (rows 8..13) walks 5 rows.
        let grid = Dim3::new(4, 13, 1);
        let at = |l: u32| grouped_block(Dim3::new(l % 4, l / 4, 0), grid, 8);
        assert_eq!(
            (0..9).map(at).collect::<Vec<_>>()[..],
            [
                (0, 0),
                (1, 0),
                (2, 0),
                (3, 0),
                (4, 0),
                (5, 0),
                (6, 0),
                (7, 0),
                (0, 1)
            ]
        );
        assert_eq!([at(32), at(36), at(37)], [(8, 0), (12, 0), (8, 1)]);
        // 2^16 × 2^16 blocks overflow 32 bits: the launch order is kept.
        let huge = Dim3::new(1 << 16, 1 << 16, 1);
        assert_eq!(grouped_block(Dim3::new(5, 9, 0), huge, 8), (9, 5));
    }
}
