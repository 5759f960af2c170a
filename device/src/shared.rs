//! Per-block shared memory, typed and bounds-known.
//!
//! A kernel declares how much launch-sized shared memory it needs in its
//! `#[kernel(shared = [T; N])]` attribute; the host launcher always provides at
//! least that much, and a launch config may add more. [`dynamic`] views it as
//! a typed array whose length is what the launch provided; [`array`] (and
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
use core::marker::PhantomData;

/// Element types allowed in shared memory: plain data, no padding, no drop.
///
/// # Safety
/// Every bit pattern must be a valid value (shared memory starts uninitialised).
pub unsafe trait SharedElement: Copy + 'static {}

macro_rules! shared_element {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive number type: every bit pattern is valid.
        unsafe impl SharedElement for $t {}
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
#[derive(Clone, Copy)]
pub struct SharedArray<T> {
    base: *mut T,
    len: usize,
    _element: PhantomData<T>,
}

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
/// shared memory (from [`array`]), or the `N` after another tile (from
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
/// Panics if the launch provides less than `N · size_of::<T>()` bytes.
#[inline(always)]
pub fn array<T: SharedElement, const N: usize>() -> SharedTile<T, N> {
    tile_at(0)
}

#[inline(always)]
fn tile_at<T: SharedElement, const N: usize>(offset_bytes: usize) -> SharedTile<T, N> {
    let (base, bytes) = arch::dynamic_shared();
    let start = offset_bytes.next_multiple_of(core::mem::align_of::<T>());
    let end = start + N * core::mem::size_of::<T>();
    assert!(
        end <= bytes,
        "shared tile does not fit in the launch's shared memory: declare it in #[kernel(shared = ...)]"
    );
    SharedTile {
        array: SharedArray {
            // SAFETY (of the offset): start ≤ end ≤ the block's shared size.
            base: base.wrapping_add(start).cast::<T>(),
            len: N,
            _element: PhantomData,
        },
        end_bytes: end,
    }
}

impl<T: SharedElement, const N: usize> SharedTile<T, N> {
    /// Elements in the tile (`N`).
    pub const LEN: usize = N;

    /// The next tile: `M` elements of `U` right after this one (aligned for `U`).
    #[inline(always)]
    pub fn after<U: SharedElement, const M: usize>(&self) -> SharedTile<U, M> {
        tile_at(self.end_bytes)
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
    #[inline(always)]
    pub fn load(&self, i: usize) -> T {
        assert!(i < self.len, "shared memory read out of bounds");
        arch::shared_access(self.base.wrapping_add(i).cast(), size_of::<T>(), false);
        // SAFETY: in bounds (checked above) of the block's shared allocation,
        // which is aligned to 16 bytes; every bit pattern is a valid T.
        unsafe { self.base.add(i).read() }
    }

    /// The address of elements `start .. start + n`, checked in bounds and
    /// recorded as one access; for instructions that take a shared address
    /// (`ldmatrix`, `cp.async`).
    #[inline(always)]
    pub(crate) fn row_ptr(&self, start: usize, n: usize, write: bool) -> *mut T {
        assert!(
            start.checked_add(n).is_some_and(|end| end <= self.len),
            "shared memory range out of bounds"
        );
        arch::shared_access(
            self.base.wrapping_add(start).cast(),
            n * size_of::<T>(),
            write,
        );
        // SAFETY: start ≤ len (checked above): at most one past the end.
        unsafe { self.base.add(start) }
    }

    /// Element `i` for atomic access within scope `S` (usually
    /// [`crate::atomic::Block`]: shared memory is the block's). Panics if `i >= len()`.
    #[inline(always)]
    pub fn atomic<S: AtomicScope>(&self, i: usize) -> AtomicRef<'_, T, S> {
        assert!(i < self.len, "shared memory atomic out of bounds");
        // SAFETY: in bounds (checked above); the allocation is 16-byte aligned and
        // T's size divides 16, so the element is aligned.
        unsafe { AtomicRef::new(self.base.add(i)) }
    }

    /// Writes element `i`. Panics (traps on the GPU) if `i >= len()`.
    #[inline(always)]
    pub fn store(&self, i: usize, value: T) {
        assert!(i < self.len, "shared memory write out of bounds");
        arch::shared_access(self.base.wrapping_add(i).cast(), size_of::<T>(), true);
        // SAFETY: in bounds (checked above) of the block's shared allocation.
        // Concurrent writes from several threads are a kernel race, not a Rust
        // aliasing violation: no reference to the memory is ever created.
        unsafe { self.base.add(i).write(value) }
    }
}
