//! Per-block shared memory, typed and bounds-known.
//!
//! A kernel declares how much launch-sized shared memory it needs in its
//! `#[kernel(shared = [T; N])]` attribute; the host launcher always provides at
//! least that much, and a launch config may add more. [`dynamic`] views it as
//! a typed array whose length is what the launch provided; [`array`](fn@array) (and
//! [`SharedTile::after`] for the next one) view it as arrays whose lengths are
//! compile-time constants, like CUDA's `__shared__ float tile[256]`.
//!
//! Why not true `static` shared variables: Rust has no way to place a static
//! in the PTX `.shared` state space, and a `.shared` declaration inside
//! inline asm would be duplicated wherever LLVM inlines or unrolls it (each
//! copy a different array). Carving compile-time-sized arrays out of the
//! kernel's declared region gives the same typing and bounds, and the size
//! is still part of the kernel's description, so the host always provides it.

use crate::arch;
use crate::atomic::{AtomicRef, AtomicScope};
use crate::global::Vector16;
use core::marker::PhantomData;

/// Element types allowed in shared memory: plain data, no padding, no drop.
///
/// What reading shared memory relies on: the block's shared memory is not a
/// Rust allocation. The GPU provides it at launch holding whatever bits
/// earlier blocks left there (the emulator fills it with `0xff` bytes), and
/// the kernel reaches it only through an external `.shared` symbol
/// (`gpu_launch_sized_workgroup_mem`, an `addrspace(3)` global with no
/// initializer) whose contents the compiler knows nothing about, so it
/// cannot treat them as `undef`: to Rust and LLVM they are initialised bytes
/// of unspecified value, like memory that an FFI call or a device wrote.
/// Reading an element no thread has stored therefore yields *some* bits, and
/// those bits are a valid value only because of this trait's contract. That is
/// not "uninitialised memory is fine for integers": reading genuinely
/// uninitialised memory (a `MaybeUninit` never written, a padding byte) as an
/// integer is undefined behaviour in Rust, which is why the contract also
/// forbids padding.
///
/// # Safety
/// An implementation promises that `T`
/// - is valid for every bit pattern of its size (no invalid values or niches:
///   not `bool`, `char`, an enum or a reference), and has no padding bytes, so
///   storing a `T` writes only initialised bytes and reading any bytes of the
///   window as a `SharedElement` (the same bytes may be viewed as several
///   types, e.g. through [`dynamic`] and [`array`](fn@array)) yields a valid value;
/// - has a size that is not 0 and divides 16, and an alignment equal to its
///   size, so that elements of a view are aligned (for plain and atomic
///   access) and 16-byte `cp.async` chunks hold whole elements.
pub unsafe trait SharedElement: Copy + 'static {}

macro_rules! shared_element {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive number type (or half's `repr(transparent)`
        // wrapper of a `u16`): valid for every bit pattern, no padding, size
        // 1, 2, 4 or 8 and equal to its alignment on nvptx64 and on the
        // 64-bit hosts the emulator runs on (checked below).
        unsafe impl SharedElement for $t {}
        const _: () = assert!(
            core::mem::size_of::<$t>() == core::mem::align_of::<$t>()
                && 16 % core::mem::size_of::<$t>() == 0
        );
    )* };
}
shared_element!(
    u8,
    i8,
    u16,
    i16,
    u32,
    i32,
    u64,
    i64,
    f32,
    f64,
    half::f16,
    half::bf16
);

/// The block's launch-sized shared memory as an array of `T`.
///
/// All threads of a block see the same memory. Reads and writes are checked
/// against its length; ordering between threads comes from
/// [`crate::sync::sync_threads`].
///
/// # Races
/// [`load`](Self::load) and [`store`](Self::store) are plain (weak) accesses.
/// Two threads of the block touching the same element, at least one of them
/// writing, with no [`sync_threads`](crate::sync::sync_threads) between the
/// two, is a data race: undefined behaviour in Rust's memory model and in
/// LLVM's (a racing read is `undef`), not merely a stale value, and the same
/// holds for a plain access racing with an [`atomic`](Self::atomic) one. The
/// type system cannot see barriers, so this is the one precondition of the
/// safe shared-memory API that only the kernel's barrier discipline upholds,
/// as in CUDA; the emulator checks it on every access and reports a race as
/// `Fault::SharedRace`, naming both threads, which is why every kernel runs
/// there in the tests.
#[derive(Clone, Copy)]
pub struct SharedArray<T> {
    base: *mut T,
    len: usize,
    _element: PhantomData<T>,
}

/// `N` elements filling 8 bytes on an 8-byte boundary: one 64-bit access.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Vector8<T, const N: usize>([T; N]);

/// A typed view of the block's launch-sized shared memory.
///
/// Its length is the launch's dynamic shared size divided by `size_of::<T>()`;
/// the kernel's `#[kernel(shared = [T; N])]` declaration guarantees `len() >= N`.
#[inline(always)]
pub fn dynamic<T: SharedElement>() -> SharedArray<T> {
    let (base, bytes) = arch::dynamic_shared();
    SharedArray {
        base: base.cast::<T>(),
        len: bytes / core::mem::size_of::<T>(),
        _element: PhantomData,
    }
}

/// A shared array of exactly `N` elements of `T`: the first `N` of the block's
/// shared memory (from [`array`](fn@array)), or the `N` after another tile (from
/// [`SharedTile::after`]). Its bounds checks compare against the constant `N`.
///
/// Declare the total in the kernel, e.g. `#[kernel(shared = [f32; 512])]` for
/// two tiles of 256; a launch that provides less is a fault naming the kernel.
#[derive(Clone, Copy)]
pub struct SharedTile<T, const N: usize> {
    array: SharedArray<T>,
    end_bytes: usize,
}

/// The first `N` elements of the block's shared memory as a compile-time-sized tile.
/// Panics if the launch provides less than `N · size_of::<T>()` bytes (or if
/// that product overflows `usize`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn array<T: SharedElement, const N: usize>() -> SharedTile<T, N> {
    tile_at(0)
}

#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
fn tile_at<T: SharedElement, const N: usize>(offset_bytes: usize) -> SharedTile<T, N> {
    let (base, bytes) = arch::dynamic_shared();
    let Some((start, end)) = tile_bytes(
        offset_bytes,
        N,
        core::mem::size_of::<T>(),
        core::mem::align_of::<T>(),
        bytes,
    ) else {
        panic!(
            "shared tile does not fit in the launch's shared memory: declare it in #[kernel(shared = ...)]"
        )
    };
    SharedTile {
        array: SharedArray {
            // In bounds: start ≤ end ≤ the block's shared size (`tile_bytes`).
            base: base.wrapping_add(start).cast::<T>(),
            len: N,
            _element: PhantomData,
        },
        end_bytes: end,
    }
}

/// The byte range `start..end` of a tile of `n` elements of `size` bytes and
/// alignment `align`, placed at the first multiple of `align` at or after
/// `offset`, if it ends within `available` bytes. Every step is checked:
/// kernels are built without overflow checks, and a wrapped `end` would pass
/// the comparison and hand out a tile past the end of shared memory.
#[inline(always)]
fn tile_bytes(
    offset: usize,
    n: usize,
    size: usize,
    align: usize,
    available: usize,
) -> Option<(usize, usize)> {
    let start = offset.checked_next_multiple_of(align)?;
    let end = start.checked_add(n.checked_mul(size)?)?;
    (end <= available).then_some((start, end))
}

impl<T: SharedElement, const N: usize> SharedTile<T, N> {
    /// Elements in the tile (`N`).
    pub const LEN: usize = N;

    /// The next tile: `M` elements of `U` right after this one (aligned for `U`).
    /// Panics if it does not end within the launch's shared memory (sizes
    /// computed with overflow checks, which kernels are otherwise built without).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn after<U: SharedElement, const M: usize>(&self) -> SharedTile<U, M> {
        tile_at(self.end_bytes)
    }
}

impl<T: SharedElement, const LEN: usize> SharedTile<T, LEN> {
    /// The tile as 16-byte vectors of `N` elements (vector `v` is elements
    /// `N·v .. N·v + N`), if the tile starts on a 16-byte boundary (one
    /// check: tiles from [`array`](fn@array) do); `None` otherwise. Each
    /// vector access then checks only its index against the constant
    /// `LEN / N`, never an alignment. `N · size_of::<T>()` must be 16 (a
    /// compile-time error otherwise).
    ///
    /// ```
    /// use warpforge_device::{Dim3, emu::{LaunchShape, launch}, shared};
    /// let shape = LaunchShape { grid: Dim3::x(1), block: Dim3::x(1), dynamic_shared_bytes: 32 };
    /// launch("doc", shape, &|| {
    ///     let tile = shared::array::<f32, 8>();
    ///     let v = tile.vectors16::<4>().unwrap();
    ///     v.store(1, [1.0, 2.0, 3.0, 4.0]);
    ///     assert_eq!((v.len(), v.load(1), tile.load(5)), (2, [1.0, 2.0, 3.0, 4.0], 2.0));
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn vectors16<const N: usize>(&self) -> Option<SharedVectors<T, N>> {
        const {
            assert!(
                N * size_of::<T>() == 16,
                "a shared-memory vector is 16 bytes"
            )
        };
        self.array
            .addr(0)
            .is_multiple_of(16)
            .then_some(SharedVectors {
                base: self.array.base.cast(),
                len: LEN / N,
            })
    }
}

/// A shared tile as 16-byte vectors (from [`SharedTile::vectors16`]): its
/// start is 16-byte aligned, so every vector is, and an access checks only
/// the vector's index (`LDS.128`/`STS.128` with no alignment test).
#[derive(Clone, Copy)]
pub struct SharedVectors<T, const N: usize> {
    /// 16-byte aligned, `len` vectors of the block's shared memory.
    base: *mut Vector16<T, N>,
    len: usize,
}

impl<T: SharedElement, const N: usize> SharedVectors<T, N> {
    /// Vectors in the view.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view has no vectors.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads vector `v` with one 16-byte load. Panics (traps on the GPU) if
    /// `v >= len()`.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load(&self, v: usize) -> [T; N] {
        assert!(v < self.len, "shared memory vector read out of bounds");
        arch::shared_access(self.base.wrapping_add(v).cast(), 16, false);
        // SAFETY: in bounds (checked above) of the tile, which is in the
        // block's shared memory, and 16-byte aligned (the view's start is,
        // `vectors16`, and vectors are 16 bytes apart). Any bytes are a valid
        // `T` (`SharedElement`) and `Vector16<T, N>` is exactly `N` of them
        // (`repr(C)`, no padding). Conflicting accesses are the kernel's
        // barriers' to order, as for `SharedArray::load`.
        unsafe { self.base.add(v).read().0 }
    }

    /// Writes vector `v` with one 16-byte store. Panics (traps on the GPU)
    /// if `v >= len()`.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn store(&self, v: usize, values: [T; N]) {
        assert!(v < self.len, "shared memory vector write out of bounds");
        arch::shared_access(self.base.wrapping_add(v).cast(), 16, true);
        // SAFETY: as in `load`; the write invalidates no Rust reference (none
        // to shared memory exists), and a concurrent access to these
        // elements is the kernel's barriers' to order, as for `store`.
        unsafe { self.base.add(v).write(Vector16(values)) }
    }

    /// Writes half `h` (0 or 1: elements `h·H ..` of the `N = 2·H`) of
    /// vector `v` with one 8-byte store (`STS.64`): a pair of f32, as an
    /// `mma` accumulator fragment holds them. Panics (traps on the GPU) if
    /// `v >= len()` or `h > 1`; `2·H` must be `N` (a compile-time error
    /// otherwise).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn store_half<const H: usize>(&self, v: usize, h: usize, values: [T; H]) {
        const { assert!(2 * H == N, "half a vector") };
        assert!(
            v < self.len && h < 2,
            "shared memory vector write out of bounds"
        );
        let p = self.base.wrapping_add(v).cast::<T>().wrapping_add(h * H);
        arch::shared_access(p.cast(), 8, true);
        // SAFETY: vector `v` is in bounds and 16-byte aligned (the view's
        // invariant), so its half `h` is 8 in-bounds, 8-byte-aligned bytes,
        // written as `H` elements of `T` (`Vector8`: exactly those, no
        // padding); concurrent accesses are the kernel's barriers' to order,
        // as for `store`.
        unsafe { p.cast::<Vector8<T, H>>().write(Vector8(values)) }
    }
}

impl<T, const N: usize> core::ops::Deref for SharedTile<T, N> {
    type Target = SharedArray<T>;
    #[inline(always)]
    fn deref(&self) -> &SharedArray<T> {
        &self.array
    }
}

impl<T: SharedElement> SharedArray<T> {
    /// Elements in the view.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view has no elements.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads element `i`. Panics (traps on the GPU) if `i >= len()`.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load(&self, i: usize) -> T {
        assert!(i < self.len, "shared memory read out of bounds");
        arch::shared_access(self.base.wrapping_add(i).cast(), size_of::<T>(), false);
        // SAFETY: in bounds (checked above) of the block's shared memory, and
        // aligned (the view starts aligned for T, elements are size_of::<T>()
        // apart). The bytes are initialised with some value, and any value is
        // a valid T (`SharedElement`'s contract and docs). No other thread
        // writes them concurrently: the kernel's barriers order conflicting
        // accesses (see "Races" on `SharedArray`; checked by the emulator).
        unsafe { self.base.add(i).read() }
    }

    /// Reads elements `i .. i + N` (16 bytes) with one vector load
    /// (`ld.shared.v4.b32` or `.v2.b64`, SASS `LDS.128`) instead of `N`
    /// scalar ones. Panics (traps on the GPU) if they are not in bounds or
    /// do not start on a 16-byte boundary; `N · size_of::<T>()` must be 16
    /// (a compile-time error otherwise). Views from [`dynamic`] start on one.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load16<const N: usize>(&self, i: usize) -> [T; N] {
        let p = self.vector16::<N>(i, false);
        // SAFETY: 16 in-bounds, 16-byte-aligned bytes of the block's shared
        // memory (`vector16`), read as `N` elements of `T`: any bytes are a
        // valid `T` (`SharedElement`), and `Vector16<T, N>` is exactly those
        // `N` elements (`repr(C)`, no padding). Conflicting accesses are the
        // kernel's barriers' to order, as for `load`.
        unsafe { p.read().0 }
    }

    /// Writes elements `i .. i + N` (16 bytes) with one vector store
    /// (`st.shared.v4.b32` or `.v2.b64`, SASS `STS.128`); the bounds,
    /// alignment and size rules of [`load16`](Self::load16).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn store16<const N: usize>(&self, i: usize, values: [T; N]) {
        let p = self.vector16::<N>(i, true);
        // SAFETY: as in `load16`; the write invalidates no Rust reference
        // (none to shared memory exists), and a concurrent access to these
        // elements is the kernel's barriers' to order, as for `store`.
        unsafe { p.write(Vector16(values)) }
    }

    /// Elements `i .. i + N` as a 16-byte vector's address, checked in
    /// bounds and aligned, and recorded as one access.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    fn vector16<const N: usize>(&self, i: usize, write: bool) -> *mut Vector16<T, N> {
        const {
            assert!(
                N * size_of::<T>() == 16,
                "a shared-memory vector is 16 bytes"
            )
        };
        let p = self.base.wrapping_add(i);
        assert!(
            i.checked_add(N).is_some_and(|end| end <= self.len) && (p as usize).is_multiple_of(16),
            "shared memory vector access out of bounds or not 16-byte aligned"
        );
        arch::shared_access(p.cast(), 16, write);
        p.cast()
    }

    /// The address of elements `start .. start + n`, checked in bounds and
    /// recorded as one access; for instructions that take a shared address
    /// (`ldmatrix`, `cp.async`).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub(crate) fn row_ptr(&self, start: usize, n: usize, write: bool) -> *mut T {
        assert!(
            start.checked_add(n).is_some_and(|end| end <= self.len),
            "shared memory range out of bounds"
        );
        arch::shared_operand_access(
            self.base.wrapping_add(start).cast(),
            n * size_of::<T>(),
            write,
        );
        // SAFETY: start ≤ start + n ≤ len (checked above): in the view, or one
        // past its end when n = 0. Only an address: whoever uses it for an
        // access (`ldmatrix`, `cp.async`) has its own contract.
        unsafe { self.base.add(start) }
    }

    /// The same bytes as elements of `U` (as many as fit whole). The
    /// caller keeps the view aligned for `U` (a `SharedElement`'s
    /// alignment is its size, at most 8): every shared element type is
    /// valid for every bit pattern, so only alignment can go wrong.
    #[inline(always)]
    pub(crate) fn reinterpret<U: SharedElement>(&self) -> SharedArray<U> {
        SharedArray {
            base: self.base.cast::<U>(),
            len: self.len * size_of::<T>() / size_of::<U>(),
            _element: PhantomData,
        }
    }

    /// The address of element `i` (wrapping; for alignment checks).
    #[inline(always)]
    pub(crate) fn addr(&self, i: usize) -> usize {
        self.base.wrapping_add(i) as usize
    }

    /// `row_ptr` without the bounds check, for a caller that proved
    /// `start + n <= len()` once for many accesses. Records the access (the
    /// emulator's race and pending-copy checks) as `row_ptr` does.
    ///
    /// # Safety
    /// `start + n <= self.len()`.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub(crate) unsafe fn row_ptr_proven(&self, start: usize, n: usize, write: bool) -> *mut T {
        arch::shared_access(
            self.base.wrapping_add(start).cast(),
            n * size_of::<T>(),
            write,
        );
        // SAFETY: the caller's contract: start ≤ start + n ≤ len, in the view.
        unsafe { self.base.add(start) }
    }

    /// The view as windows of `REACH` elements ([`SharedWindows::at`]) whose
    /// loads at constant offsets need no bounds check, for hot loops that
    /// read a few neighbours of a start computed once (a stencil's input
    /// row): `None` if the view is shorter than `REACH`. One check here; each
    /// window then costs one clamp of its start, never a branch or a panic
    /// path per load.
    ///
    /// ```
    /// use warpforge_device::{Dim3, emu::{LaunchShape, launch}, shared};
    /// let shape = LaunchShape { grid: Dim3::x(1), block: Dim3::x(1), dynamic_shared_bytes: 40 };
    /// launch("doc", shape, &|| {
    ///     let s = shared::dynamic::<f32>(); // 10 elements
    ///     for i in 0..10 {
    ///         s.store(i, i as f32);
    ///     }
    ///     let rows = s.windows::<4>().unwrap(); // starts 0 ..= 6
    ///     let w = rows.at(6);
    ///     assert_eq!((w.load(0), w.load(3)), (6.0, 9.0));
    ///     assert!(s.windows::<11>().is_none());
    /// })
    /// .unwrap();
    /// // A window that would end past the view: the emulator reports the clamp.
    /// let past = launch("doc", shape, &|| {
    ///     let _ = shared::dynamic::<f32>().windows::<4>().unwrap().at(7);
    /// });
    /// assert!(past.is_err());
    /// ```
    #[inline(always)]
    pub fn windows<const REACH: usize>(&self) -> Option<SharedWindows<T, REACH>> {
        // Shared memory is far below 4 GiB: the view's length fits in 32 bits.
        (REACH <= self.len && self.len <= u32::MAX as usize).then(|| SharedWindows {
            array: *self,
            last: (self.len - REACH) as u32,
        })
    }

    /// The view as windows of `REACH` 16-byte vectors of `N` elements
    /// ([`SharedVectorWindows::at`], starts and offsets counted in vectors),
    /// for hot loops that read (or write) a few neighbouring vectors of a
    /// start computed once (a depthwise strip's input row, 8 channels a
    /// vector; its staged outputs): `None` if
    /// the view does not start on a 16-byte boundary (views from
    /// [`dynamic`] do) or holds fewer than `REACH` vectors. One check here;
    /// each window then costs one clamp of its start, and each load one
    /// `LDS.128` at a constant offset, never an alignment test, a branch or a
    /// panic path. `N · size_of::<T>()` must be 16 (a compile-time error
    /// otherwise).
    ///
    /// ```
    /// use warpforge_device::{Dim3, emu::{LaunchShape, launch}, shared};
    /// let shape = LaunchShape { grid: Dim3::x(1), block: Dim3::x(1), dynamic_shared_bytes: 64 };
    /// launch("doc", shape, &|| {
    ///     let s = shared::dynamic::<f32>(); // 16 elements, 4 vectors
    ///     for i in 0..16 {
    ///         s.store(i, i as f32);
    ///     }
    ///     let rows = s.vector_windows::<4, 2>().unwrap(); // starts 0 ..= 2
    ///     assert_eq!(rows.at(2).load(1), [12.0, 13.0, 14.0, 15.0]);
    ///     rows.at(0).store(1, [-1.0; 4]); // vector 1: elements 4 .. 8
    ///     assert_eq!((s.load(3), s.load(4), s.load(7), s.load(8)), (3.0, -1.0, -1.0, 8.0));
    ///     assert!(s.vector_windows::<4, 5>().is_none());
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn vector_windows<const N: usize, const REACH: usize>(
        &self,
    ) -> Option<SharedVectorWindows<T, N, REACH>> {
        const {
            assert!(
                N * size_of::<T>() == 16,
                "a shared-memory vector is 16 bytes"
            )
        };
        let vectors = self.len / N;
        (self.addr(0).is_multiple_of(16) && REACH <= vectors && vectors <= u32::MAX as usize).then(
            || SharedVectorWindows {
                base: self.base.cast(),
                last: (vectors - REACH) as u32,
            },
        )
    }

    /// Element `i` for atomic access within scope `S` (usually
    /// [`crate::atomic::Block`]: shared memory is the block's). Panics if `i >= len()`.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn atomic<S: AtomicScope>(&self, i: usize) -> AtomicRef<'_, T, S> {
        assert!(i < self.len, "shared memory atomic out of bounds");
        // SAFETY: in bounds (checked above) of the block's shared memory, which
        // lives for the whole launch. Aligned for atomic access: the view starts
        // aligned for T and elements are size_of::<T>() apart, and
        // `SharedElement` requires the alignment to equal the size, as `atom`
        // needs. Plain accesses racing with atomic ones are the kernel's to
        // order (see "Races").
        unsafe { AtomicRef::new(self.base.add(i)) }
    }

    /// Writes element `i`. Panics (traps on the GPU) if `i >= len()`.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn store(&self, i: usize, value: T) {
        assert!(i < self.len, "shared memory write out of bounds");
        arch::shared_access(self.base.wrapping_add(i).cast(), size_of::<T>(), true);
        // SAFETY: in bounds (checked above) of the block's shared memory, and
        // aligned (as in `load`). No Rust reference to shared memory exists,
        // so the write invalidates none. Another thread's access to the same
        // element concurrently would be a data race, which is undefined
        // behaviour (not just a lost write): the kernel's barriers must order
        // it, see "Races" on `SharedArray` (checked by the emulator).
        unsafe { self.base.add(i).write(value) }
    }
}

/// A shared array cut into windows of `REACH` elements
/// ([`SharedArray::windows`]): every start from 0 to `len − REACH` is one.
#[derive(Clone, Copy)]
pub struct SharedWindows<T, const REACH: usize> {
    array: SharedArray<T>,
    /// `len − REACH`: the last start whose window is in the view (32 bits:
    /// shared addresses are, so the clamp is one instruction).
    last: u32,
}

/// `REACH` elements of shared memory from a start proven in bounds
/// ([`SharedWindows::at`]).
#[derive(Clone, Copy)]
pub struct SharedWindow<T, const REACH: usize> {
    array: SharedArray<T>,
    /// `start ≤ len − REACH`.
    start: u32,
}

impl<T: SharedElement, const REACH: usize> SharedWindows<T, REACH> {
    /// The window of `REACH` elements from `start`, clamped into the view
    /// (`start.min(len − REACH)`, in 32 bits): a no-op for every start a
    /// kernel means, and memory-safe for any other, which reads the last
    /// window instead.
    /// The emulator reports a clamp that changed the start (a kernel bug
    /// its tests then see) by panicking.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn at(&self, start: usize) -> SharedWindow<T, REACH> {
        #[cfg(not(target_arch = "nvptx64"))]
        assert!(
            start <= self.last as usize,
            "a shared window of {REACH} elements at {start} ends past the view ({} elements)",
            self.last as usize + REACH
        );
        SharedWindow {
            array: self.array,
            // Truncated, then clamped: in the view whatever `start` was.
            start: (start as u32).min(self.last),
        }
    }
}

impl<T: SharedElement, const REACH: usize> SharedWindow<T, REACH> {
    /// Element `off` of the window. Panics (traps on the GPU) if `off >=
    /// REACH`: a check that constant offsets (unrolled loops) fold away.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load(&self, off: usize) -> T {
        assert!(off < REACH, "shared window read past its reach");
        // SAFETY: start ≤ len − REACH (`SharedWindows::at`) and off < REACH
        // (checked above), so start + off < len: in the view. The rest as
        // for `SharedArray::load`: aligned, initialised bytes of a valid `T`,
        // races the kernel's barriers' to order (checked by the emulator).
        unsafe {
            self.array
                .row_ptr_proven(self.start as usize + off, 1, false)
                .read()
        }
    }
}

/// A shared array cut into windows of `REACH` 16-byte vectors
/// ([`SharedArray::vector_windows`]): every start from 0 to `vectors −
/// REACH` is one.
#[derive(Clone, Copy)]
pub struct SharedVectorWindows<T, const N: usize, const REACH: usize> {
    /// 16-byte aligned, in the block's shared memory, with `last + REACH`
    /// vectors from it in the view.
    base: *mut Vector16<T, N>,
    /// The last start whose window is in the view (32 bits, as shared
    /// addresses: the clamp is one instruction).
    last: u32,
}

/// `REACH` 16-byte vectors of shared memory from a start proven in bounds
/// ([`SharedVectorWindows::at`]).
#[derive(Clone, Copy)]
pub struct SharedVectorWindow<T, const N: usize, const REACH: usize> {
    /// `base + start`, with `REACH` vectors from it in the view.
    first: *mut Vector16<T, N>,
}

impl<T: SharedElement, const N: usize, const REACH: usize> SharedVectorWindows<T, N, REACH> {
    /// The window of `REACH` vectors from vector `start`, clamped into the
    /// view (`start.min(vectors − REACH)`, in 32 bits): a no-op for every
    /// start a kernel means, and memory-safe for any other, which reads the
    /// last window instead. The emulator reports a clamp that changed the
    /// start (a kernel bug its tests then see) by panicking.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn at(&self, start: usize) -> SharedVectorWindow<T, N, REACH> {
        #[cfg(not(target_arch = "nvptx64"))]
        assert!(
            start <= self.last as usize,
            "a shared window of {REACH} vectors at vector {start} ends past the view ({} vectors)",
            self.last as usize + REACH
        );
        // Truncated, then clamped: in the view whatever `start` was.
        let start = (start as u32).min(self.last);
        SharedVectorWindow {
            first: self.base.wrapping_add(start as usize),
        }
    }
}

impl<T: SharedElement, const N: usize, const REACH: usize> SharedVectorWindow<T, N, REACH> {
    /// Vector `off` of the window, one 16-byte load. Panics (traps on the
    /// GPU) if `off >= REACH`: a check that constant offsets (unrolled
    /// loops) fold away.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load(&self, off: usize) -> [T; N] {
        assert!(off < REACH, "shared vector window read past its reach");
        let p = self.first.wrapping_add(off);
        arch::shared_access(p.cast(), 16, false);
        // SAFETY: `first` is a start ≤ vectors − REACH of a 16-byte-aligned
        // view (`SharedVectorWindows::at`, `SharedArray::vector_windows`) and
        // off < REACH (checked above): a whole, aligned vector in the view.
        // Any bytes are a valid `T` (`SharedElement`) and `Vector16<T, N>`
        // is exactly `N` of them (`repr(C)`, no padding); races are the
        // kernel's barriers' to order, as for `SharedArray::load` (checked by
        // the emulator).
        unsafe { p.read().0 }
    }

    /// Writes vector `off` of the window with one 16-byte store. Panics
    /// (traps on the GPU) if `off >= REACH`: a check that constant offsets
    /// fold away.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn store(&self, off: usize, values: [T; N]) {
        assert!(off < REACH, "shared vector window write past its reach");
        let p = self.first.wrapping_add(off);
        arch::shared_access(p.cast(), 16, true);
        // SAFETY: as in `load`: a whole, aligned vector in the view. The
        // write invalidates no Rust reference (none to shared memory
        // exists), and a concurrent access to it is the kernel's barriers'
        // to order (checked by the emulator).
        unsafe { p.write(Vector16(values)) }
    }
}

#[cfg(test)]
mod tests {
    use super::tile_bytes;

    #[test]
    fn tiles_are_aligned_and_bounded() {
        // 4 f32 after 6 bytes: aligned up to 8, ends at 24.
        assert_eq!(tile_bytes(6, 4, 4, 4, 24), Some((8, 24)));
        assert_eq!(tile_bytes(6, 4, 4, 4, 23), None);
        assert_eq!(tile_bytes(0, 0, 8, 8, 0), Some((0, 0)));
    }

    #[test]
    fn a_tile_whose_size_overflows_is_refused_not_wrapped() {
        // (2^62 + 1) · 4 wraps to 4 bytes: unchecked, it would "fit" in 1 KiB.
        let n = usize::MAX / 4 + 2;
        assert_eq!(tile_bytes(0, n, 4, 4, 1024), None);
        // The end overflows: a small tile after a huge offset.
        assert_eq!(tile_bytes(usize::MAX - 7, 4, 4, 4, 1024), None);
        // Aligning the offset up overflows.
        assert_eq!(tile_bytes(usize::MAX, 1, 8, 8, usize::MAX), None);
        // Near the top of the range, a tile that ends in range still fits.
        let top = usize::MAX - 15; // a multiple of 8
        assert_eq!(tile_bytes(top, 1, 8, 8, usize::MAX), Some((top, top + 8)));
    }
}
