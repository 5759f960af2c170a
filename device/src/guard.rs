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
use crate::own::{Indexed, Mapping};
use core::marker::PhantomData;

/// A kernel's 1-D output in global memory: written only through proven [`Slot`]s.
///
/// `M` is how the launch's threads share the output (see [`crate::own`]):
/// [`Indexed`] (the default, `Out<T>`) writes through [`Out::at`], any index
/// in bounds; the owned mappings (`Out<T, Elements>`, `Out<T, ThreadChunks<2>>`,
/// …) hand each thread slots only for elements no other thread can obtain.
pub struct Out<'a, T, M: Mapping = Indexed> {
    ptr: *mut T,
    len: usize,
    _buffer: PhantomData<&'a mut [T]>,
    _mapping: PhantomData<fn() -> M>,
}

impl<'a, T: Copy, M: Mapping> Out<'a, T, M> {
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
            _mapping: PhantomData,
        }
    }

    /// A view of a host slice, for host-side code and tests.
    pub fn from_mut_slice(slice: &'a mut [T]) -> Self {
        Out {
            ptr: slice.as_mut_ptr(),
            len: slice.len(),
            _buffer: PhantomData,
            _mapping: PhantomData,
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

    /// The first element and the length, for the owned forms in [`crate::own`].
    #[inline(always)]
    pub(crate) fn raw_parts(&self) -> (*mut T, usize) {
        (self.ptr, self.len)
    }
}

impl<'a, T: Copy> Out<'a, T> {
    /// Element `i` for atomic access within scope `S`, if `i < len()`.
    ///
    /// Unlike [`Out::at`] this borrows the view shared: many threads may
    /// update the same element, which is what atomics are for.
    #[inline(always)]
    pub fn atomic<S: AtomicScope>(&self, i: usize) -> Option<AtomicRef<'_, T, S>> {
        // SAFETY: the element is inside the view's allocation, which is aligned
        // for T. A plain `Slot` access by another thread racing with these
        // atomics would be a data race (undefined behaviour, not a stale value):
        // safe code can write one, so ordering them is the kernel's discipline
        // (see `AtomicRef::new`).
        self.element(i).map(|ptr| unsafe { AtomicRef::new(ptr) })
    }

    /// The element at `i` if `i < len()`: one compare, then unchecked access.
    ///
    /// **In bounds, not exclusive**: every thread that asks for `i` gets a
    /// slot for it, so two threads writing the same index race. For kernels
    /// whose threads own their outputs, declare the output with an owned
    /// mapping (`Out<T, Elements>` and the others in [`crate::own`]): those
    /// hand a thread only slots no other thread can obtain.
    #[inline(always)]
    pub fn at(&mut self, i: usize) -> Option<Slot<'_, T>> {
        self.element(i).map(|ptr| Slot {
            ptr,
            _element: PhantomData,
        })
    }

    /// The address of element `i`, if `i < len()`: the view's one bounds proof.
    #[inline(always)]
    fn element(&self, i: usize) -> Option<*mut T> {
        // SAFETY: i < len, so the offset stays inside the allocation.
        (i < self.len).then(|| unsafe { self.ptr.add(i) })
    }
}

/// One element of an [`Out`] view, proven in bounds when it was handed out.
pub struct Slot<'s, T> {
    ptr: *mut T,
    _element: PhantomData<&'s mut T>,
}

impl<T> Slot<'_, T> {
    /// The slot of the element at `ptr`, for the owned forms in [`crate::own`].
    ///
    /// # Safety
    /// `ptr` is in bounds of a live output view, and for the slot's lifetime
    /// nothing else in this thread reads or writes that element.
    #[inline(always)]
    pub(crate) unsafe fn from_element(ptr: *mut T) -> Self {
        Slot {
            ptr,
            _element: PhantomData,
        }
    }
}

impl<T: Copy> Slot<'_, T> {
    /// Reads the element.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn get(&self) -> T {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::arch::global_access(self.ptr.cast(), size_of::<T>(), false);
        // SAFETY: `ptr` is in bounds of a live view (checked by `Out::at`) and
        // the slot borrows that view mutably, so nothing else in this thread aliases it.
        unsafe { self.ptr.read() }
    }

    /// Writes the element.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn set(&mut self, value: T) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::arch::global_access(self.ptr.cast(), size_of::<T>(), true);
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

/// Where element (`row`, `col`) of a `rows × cols` matrix with `row_stride`
/// elements between rows lies in its buffer of `len`, if the shape fits.
#[inline(always)]
pub(crate) fn fits_2d(len: usize, rows: usize, cols: usize, row_stride: usize) -> bool {
    if rows == 0 || cols == 0 {
        return cols <= row_stride || rows == 0;
    }
    cols <= row_stride
        && (rows - 1)
            .checked_mul(row_stride)
            .and_then(|last_row| last_row.checked_add(cols))
            .is_some_and(|end| end <= len)
}

impl<'a, T: Copy> Out<'a, T> {
    /// The view as a `rows × cols` matrix whose rows start `row_stride`
    /// elements apart (row-major; `row_stride >= cols`, e.g. a pitch or a
    /// sub-matrix of a wider one). `None` if that shape does not fit in the
    /// view (sizes multiplied with overflow checks).
    #[inline(always)]
    pub fn into_2d(self, rows: usize, cols: usize, row_stride: usize) -> Option<Out2<'a, T>> {
        fits_2d(self.len, rows, cols, row_stride).then_some(Out2 {
            ptr: self.ptr,
            rows,
            cols,
            row_stride,
            _buffer: PhantomData,
        })
    }
}

/// A kernel's 2-D output: written only through [`Slot`]s proven in bounds in
/// both dimensions (two compares), so a thread outside the matrix (the ragged
/// edge of a 2-D grid) gets `None` and cannot write into the next row.
///
/// ```
/// use warpforge_device::guard::Out;
/// let mut data = [0u32; 12];
/// // 3 × 3 inside a 3 × 4 buffer (row stride 4).
/// let mut m = Out::from_mut_slice(&mut data).into_2d(3, 3, 4).unwrap();
/// m.at(2, 1).unwrap().set(7);
/// assert!(m.at(0, 3).is_none()); // col 3 is padding, not part of the matrix
/// assert!(m.at(3, 0).is_none());
/// assert_eq!(data[2 * 4 + 1], 7);
/// ```
pub struct Out2<'a, T> {
    ptr: *mut T,
    rows: usize,
    cols: usize,
    row_stride: usize,
    _buffer: PhantomData<&'a mut [T]>,
}

impl<T: Copy> Out2<'_, T> {
    /// Rows of the matrix.
    #[inline(always)]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the matrix.
    #[inline(always)]
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Elements between the starts of consecutive rows.
    #[inline(always)]
    pub fn row_stride(&self) -> usize {
        self.row_stride
    }

    /// Element (`row`, `col`) if `row < rows()` and `col < cols()`.
    ///
    /// **In bounds, not exclusive**: every thread that asks for (`row`,
    /// `col`) gets a slot for it. The shape is the one this thread chose in
    /// [`Out::into_2d`]; for outputs whose threads own their elements, take
    /// an [`OutMatrix`](crate::own::OutMatrix), whose shape the host binds.
    #[inline(always)]
    pub fn at(&mut self, row: usize, col: usize) -> Option<Slot<'_, T>> {
        self.element(row, col).map(|ptr| Slot {
            ptr,
            _element: PhantomData,
        })
    }

    /// Element (`row`, `col`) for atomic access within scope `S`, if in bounds.
    #[inline(always)]
    pub fn atomic<S: AtomicScope>(&self, row: usize, col: usize) -> Option<AtomicRef<'_, T, S>> {
        // SAFETY: in bounds (`element`); aligned because the view's buffer is.
        self.element(row, col)
            .map(|ptr| unsafe { AtomicRef::new(ptr) })
    }

    /// The address of element (`row`, `col`), if in bounds: the view's one bounds proof.
    #[inline(always)]
    fn element(&self, row: usize, col: usize) -> Option<*mut T> {
        // SAFETY: row·stride + col < (rows−1)·stride + cols ≤ len (checked
        // without overflow by `into_2d`), inside the view's allocation.
        (row < self.rows && col < self.cols)
            .then(|| unsafe { self.ptr.add(row * self.row_stride + col) })
    }
}

/// A read-only 2-D view of an input slice: `rows × cols`, rows `row_stride` apart.
///
/// [`In2::get`] is checked in both dimensions; [`In2::get_unchecked`] skips
/// the checks for loops whose bounds already prove them (it is `unsafe`, and
/// the kernels crate forbids `unsafe`, so it is for users who opt in).
///
/// ```
/// use warpforge_device::guard::In2;
/// let data = [1, 2, 3, 4, 5, 6];
/// let m = In2::new(&data, 2, 2, 3).unwrap(); // 2 × 2, stride 3
/// assert_eq!(m.get(1, 1), Some(5));
/// assert_eq!(m.get(0, 2), None); // padding column
/// assert!(In2::new(&data, 2, 3, 3).is_some());
/// assert!(In2::new(&data, 3, 2, 3).is_none()); // needs (3 − 1)·3 + 2 = 8 elements
/// assert!(In2::new(&data, 1, 4, 3).is_none()); // a row longer than the stride
/// ```
#[derive(Clone, Copy)]
pub struct In2<'a, T> {
    data: &'a [T],
    rows: usize,
    cols: usize,
    row_stride: usize,
}

impl<'a, T: Copy> In2<'a, T> {
    /// `data` as a `rows × cols` matrix with rows `row_stride` apart; `None`
    /// if it does not fit (sizes multiplied with overflow checks).
    #[inline(always)]
    pub fn new(data: &'a [T], rows: usize, cols: usize, row_stride: usize) -> Option<Self> {
        fits_2d(data.len(), rows, cols, row_stride).then_some(In2 {
            data,
            rows,
            cols,
            row_stride,
        })
    }

    /// Rows of the matrix.
    #[inline(always)]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the matrix.
    #[inline(always)]
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Element (`row`, `col`), if `row < rows()` and `col < cols()`.
    #[inline(always)]
    pub fn get(&self, row: usize, col: usize) -> Option<T> {
        if row < self.rows && col < self.cols {
            // SAFETY: in bounds of `data`, as `new` checked the shape fits.
            Some(unsafe { *self.data.get_unchecked(row * self.row_stride + col) })
        } else {
            None
        }
    }

    /// Element (`row`, `col`) without bounds checks.
    ///
    /// # Safety
    /// `row < self.rows()` and `col < self.cols()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, row: usize, col: usize) -> T {
        debug_assert!(row < self.rows && col < self.cols);
        // SAFETY: the caller's contract, and `new`'s check that the shape fits.
        unsafe { *self.data.get_unchecked(row * self.row_stride + col) }
    }

    /// Row `row` (its `cols()` elements), if `row < rows()`.
    #[inline(always)]
    pub fn row(&self, row: usize) -> Option<&'a [T]> {
        if row < self.rows {
            let start = row * self.row_stride;
            self.data.get(start..start + self.cols)
        } else {
            None
        }
    }
}
