//! Index guards: the only way a kernel writes to global memory.
//!
//! A kernel never receives `&mut [T]`: thousands of threads holding the same
//! mutable slice is aliasing undefined behaviour in Rust. Its outputs are
//! [`Out`] views instead, and the one way to touch an element of an `Out` is
//! a [`Slot`], which [`Out::at`] hands out only for an index it has just
//! compared against the view's length. A slot borrows its view, so it can
//! neither be forged nor carried to another view, and every later read and
//! write through it is in bounds without another check.
//!
//! ```
//! use warpforge_device::guard::Out;
//! let mut data = [0.0f32; 4];
//! // The host builds views from buffers it has checked; kernels only receive them.
//! let mut out = Out::from_mut_slice(&mut data);
//! if let Some(mut slot) = out.at(2) {
//!     slot.set(5.0);
//! }
//! assert!(out.at(4).is_none()); // out of bounds: no slot, no write
//! assert_eq!(data, [0.0, 0.0, 5.0, 0.0]);
//! ```

use crate::atomic::{AtomicRef, AtomicScope};
use core::marker::PhantomData;

/// A kernel's 1-D output in global memory: written only through proven [`Slot`]s.
pub struct Out<'a, T> {
    ptr: *mut T,
    len: usize,
    _buffer: PhantomData<&'a mut [T]>,
}

impl<'a, T: Copy> Out<'a, T> {
    /// A view of `len` elements at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` elements of `T` for
    /// `'a` (or dangling and aligned if `len == 0`), and no Rust reference to
    /// that memory may be live. `#[kernel]` calls this with what the host
    /// launcher passed: a buffer whose length it checked.
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut T, len: usize) -> Self {
        Out {
            ptr,
            len,
            _buffer: PhantomData,
        }
    }

    /// A view of a host slice, for host-side code and tests.
    pub fn from_mut_slice(slice: &'a mut [T]) -> Self {
        Out {
            ptr: slice.as_mut_ptr(),
            len: slice.len(),
            _buffer: PhantomData,
        }
    }

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

    /// Element `i` for atomic access within scope `S`, if `i < len()`.
    ///
    /// Unlike [`Out::at`] this borrows the view shared: many threads may
    /// update the same element, which is what atomics are for.
    #[inline(always)]
    pub fn atomic<S: AtomicScope>(&self, i: usize) -> Option<AtomicRef<'_, T, S>> {
        if i < self.len {
            // SAFETY: i < len, so the element is inside the view's allocation, which
            // is aligned for T; plain accesses through `Slot`s to an element that
            // other threads update atomically are a kernel race, as in CUDA.
            Some(unsafe { AtomicRef::new(self.ptr.add(i)) })
        } else {
            None
        }
    }

    /// The element at `i` if `i < len()`: one compare, then unchecked access.
    #[inline(always)]
    pub fn at(&mut self, i: usize) -> Option<Slot<'_, T>> {
        if i < self.len {
            Some(Slot {
                // SAFETY: i < len, so the offset stays inside the allocation.
                ptr: unsafe { self.ptr.add(i) },
                _element: PhantomData,
            })
        } else {
            None
        }
    }
}

/// One element of an [`Out`] view, proven in bounds when it was handed out.
pub struct Slot<'s, T> {
    ptr: *mut T,
    _element: PhantomData<&'s mut T>,
}

impl<T: Copy> Slot<'_, T> {
    /// Reads the element.
    #[inline(always)]
    pub fn get(&self) -> T {
        // SAFETY: `ptr` is in bounds of a live view (checked by `Out::at`) and
        // the slot borrows that view mutably, so nothing else in this thread aliases it.
        unsafe { self.ptr.read() }
    }

    /// Writes the element.
    #[inline(always)]
    pub fn set(&mut self, value: T) {
        // SAFETY: as in `get`.
        unsafe { self.ptr.write(value) }
    }
}

/// An input slice from what the host launcher passed.
///
/// # Safety
/// `ptr` must be valid for reads of `len` elements for `'a` and not written
/// during `'a`; it may be null or dangling only if `len == 0`.
#[inline(always)]
pub unsafe fn input_from_raw<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { core::slice::from_raw_parts(ptr, len) }
    }
}
