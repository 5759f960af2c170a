//! [`Global`]: a read-only kernel input that is known, by its type, to live in
//! the GPU's global memory.
//!
//! A kernel's `&[T]` parameters are in global memory too, but a `&[T]` can
//! equally point at a kernel-local array (the GPU's `.local` space) or at a
//! shared-memory copy, and nothing in its type says which. Instructions that
//! name the global state space explicitly, like `cp.async.cg.shared.global`
//! ([`crate::mma::cp_async_16`]), are undefined on any other address, so they
//! take a `Global` instead. Only `#[kernel]` (and the host launcher, through
//! `unsafe` [`Global::from_raw`]) creates one, from the device buffer the
//! launch passed; safe code can narrow it ([`Global::get_range`]) or read it (it
//! dereferences to `[T]`), never make one from other memory.
//!
//! ```
//! use warpforge_device::Global;
//! let host = [1u32, 2, 3, 4];
//! // SAFETY: `host` is valid and unwritten for the view's life; on the host the
//! // emulator's global memory is ordinary host memory.
//! let g = unsafe { Global::from_raw(host.as_ptr(), host.len()) };
//! assert_eq!(g.len(), 4);
//! assert_eq!(g.get_range(1..3).map(|s| s.to_vec()), Some(vec![2, 3]));
//! assert_eq!(g.get(2), Some(&3)); // slice methods, through `Deref`
//! assert!(g.get_range(3..5).is_none());
//! ```

use core::ops::{Deref, Range};

/// A read-only kernel input in global memory: `&[T]` plus the type-level fact
/// that its elements are in the global state space.
///
/// Write `x: Global<T>` instead of `x: &[T]` in a `#[kernel]` signature to
/// get one; the host passes the same buffer either way. Read it like a slice
/// (it dereferences to `[T]`), or pass it to instructions that need a global
/// address ([`crate::mma::cp_async_16`]).
pub struct Global<'a, T> {
    /// Invariant: if non-empty, every element is in the GPU's global state
    /// space (a device allocation); on the host, in the emulator's buffers.
    data: &'a [T],
}

impl<T> Clone for Global<'_, T> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Global<'_, T> {}

impl<'a, T> Global<'a, T> {
    /// A view of `len` elements at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads of `len` elements of `T` for `'a` and
    /// not written during `'a` (it may be null or dangling only if
    /// `len == 0`), and, if `len > 0`, it must be an address in the GPU's
    /// global state space: a device allocation, as the host launcher passes
    /// (in the emulator, any host memory is its global memory). `#[kernel]`
    /// calls this with what the launcher passed for a `&[T]` or `Global<T>`
    /// parameter.
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *const T, len: usize) -> Self {
        Global {
            // SAFETY: the caller's contract (validity, no writes during 'a);
            // the global-space part is this type's invariant, passed on.
            data: unsafe { crate::guard::input_from_raw(ptr, len) },
        }
    }

    /// The elements as a plain slice (which forgets that they are global).
    #[inline(always)]
    pub fn as_slice(self) -> &'a [T] {
        self.data
    }

    /// The sub-view `range`, still in global memory; `None` if out of bounds.
    #[inline(always)]
    pub fn get_range(self, range: Range<usize>) -> Option<Global<'a, T>> {
        // A sub-slice of a global buffer is in the same buffer.
        self.data.get(range).map(|data| Global { data })
    }
}

impl<'a, T: Copy> Global<'a, T> {
    /// Element `i`, or `None` if out of bounds: one load, like `get(i)`, but
    /// one that the emulator's memory profile counts (a plain slice read
    /// cannot be seen; see `emu::profile`). On the GPU it is the same load.
    ///
    /// ```
    /// use warpforge_device::Global;
    /// let host = [1u32, 2, 3];
    /// // SAFETY: as for `Global::from_raw` above: valid and unwritten.
    /// let g = unsafe { Global::from_raw(host.as_ptr(), host.len()) };
    /// assert_eq!((g.load(1), g.load(3)), (Some(2), None));
    /// ```
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load(self, i: usize) -> Option<T> {
        let element = self.data.get(i)?;
        crate::arch::global_input_load(core::ptr::from_ref(element).cast(), size_of::<T>());
        Some(*element)
    }
}

impl<'a, T: Plain> Global<'a, T> {
    /// The buffer as [`vectors16`] splits it, the vectors still a `Global`:
    /// `(head, vectors)`, where `vectors.load(v)` is one 128-bit load of
    /// elements `head + N·v ..` (counted by the emulator's memory profile).
    ///
    /// ```
    /// use warpforge_device::Global;
    /// use warpforge_device::global::Vector16;
    /// let host = Vector16([1.0f32, 2.0, 3.0, 4.0]);
    /// // SAFETY: as for `Global::from_raw` above: valid and unwritten.
    /// let g = unsafe { Global::from_raw(host.0.as_ptr(), 4) };
    /// let (head, v) = g.vectors16::<4>();
    /// assert_eq!((head, v.load(0).map(|v| v.0)), (0, Some([1.0, 2.0, 3.0, 4.0])));
    /// ```
    #[inline(always)]
    pub fn vectors16<const N: usize>(self) -> (usize, Global<'a, Vector16<T, N>>) {
        let (head, data) = vectors16::<T, N>(self.data);
        // The vectors are elements of this global buffer.
        (head, Global { data })
    }
}

impl<T> Deref for Global<'_, T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        self.data
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for Global<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("Global").field(&self.data).finish()
    }
}

/// How `#[kernel]` hands an input buffer to the kernel body: as `&[T]` or as
/// [`Global<T>`], whichever the parameter declares. Not for kernels to call.
#[doc(hidden)]
pub trait FromGlobal<'a, T>: Sized {
    /// The parameter from the launch's buffer.
    fn from_global(buffer: Global<'a, T>) -> Self;
}

impl<'a, T> FromGlobal<'a, T> for &'a [T] {
    #[inline(always)]
    fn from_global(buffer: Global<'a, T>) -> Self {
        buffer.data
    }
}

impl<'a, T> FromGlobal<'a, T> for Global<'a, T> {
    #[inline(always)]
    fn from_global(buffer: Global<'a, T>) -> Self {
        buffer
    }
}

/// Element types whose every bit pattern is a valid value and that have no
/// padding: what a 16-byte vector load may reinterpret ([`vectors16`]).
///
/// # Safety
/// Implement only for types where any `size_of::<Self>()` initialised bytes
/// are a valid `Self` and `Self` has no padding bytes.
pub unsafe trait Plain: Copy {}

// SAFETY: primitive numbers and half's f16/bf16 (a `u16` inside): every bit
// pattern is a value, no padding.
unsafe impl Plain for f32 {}
// SAFETY: as above.
unsafe impl Plain for f64 {}
// SAFETY: as above.
unsafe impl Plain for i32 {}
// SAFETY: as above.
unsafe impl Plain for i64 {}
// SAFETY: as above.
unsafe impl Plain for u32 {}
// SAFETY: as above.
unsafe impl Plain for u64 {}
// SAFETY: as above.
unsafe impl Plain for half::f16 {}
// SAFETY: as above.
unsafe impl Plain for half::bf16 {}

/// `N` elements that start on a 16-byte boundary and fill 16 bytes: reading
/// one is a single 128-bit load (`ld.global.v4.b32`/`.v2.b64`, SASS
/// `LDG.E.128`) instead of `N` scalar ones.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
pub struct Vector16<T, const N: usize>(pub [T; N]);

impl<T: Plain, const N: usize> Vector16<T, N> {
    /// The 16 bytes as four 32-bit words, word `i` being bytes `4i .. 4i + 4`
    /// (little-endian, as on the GPU): the registers a 128-bit load fills, so
    /// two 16-bit elements can be taken apart with one instruction each
    /// (`w << 16` is the f32 of a bf16 in the low half, `w & 0xffff_0000`
    /// of the one in the high half) rather than extracted one by one.
    ///
    /// ```
    /// use warpforge_device::global::Vector16;
    /// let v = Vector16([1u32, 2, 3, 0xdead_beef]);
    /// assert_eq!(v.words(), [1, 2, 3, 0xdead_beef]);
    /// use warpforge_device::bf16;
    /// let mut pairs = [bf16::ZERO; 8];
    /// (pairs[0], pairs[1]) = (bf16::from_f32(1.0), bf16::from_f32(-2.0));
    /// let h = Vector16(pairs);
    /// assert_eq!(f32::from_bits(h.words()[0] << 16), 1.0);
    /// assert_eq!(f32::from_bits(h.words()[0] & 0xffff_0000), -2.0);
    /// ```
    #[inline(always)]
    pub fn words(self) -> [u32; 4] {
        const {
            assert!(
                N * core::mem::size_of::<T>() == 16,
                "a Vector16 is 16 bytes"
            )
        };
        // SAFETY: `Self` is `repr(C)` around `[T; N]`, exactly 16 bytes with
        // no padding (asserted above) and every byte initialised (`T:
        // Plain` has no padding either); `[u32; 4]` is 16 bytes for which
        // every bit pattern is valid, and `transmute_copy` reads it unaligned.
        unsafe { core::mem::transmute_copy::<Self, [u32; 4]>(&self) }
    }
}

/// `x` as `(head, vectors)`: its first `head` elements (fewer than `N`: those
/// before the first 16-byte boundary, or all of `x` if it is shorter), then
/// every whole, 16-byte-aligned run of `N` elements after them, as
/// [`Vector16`]s; the elements after the last whole vector are left out.
/// Element `head + N·v + i` of `x` is element `i` of vector `v`.
///
/// `N · size_of::<T>()` must be 16 (a compile-time error otherwise). The
/// split is safe by construction: a vector is only ever made from elements of
/// `x` at an aligned address, so a vector load through it can neither fault on
/// alignment (as `ld.v4` would on the GPU) nor read past `x`, on the GPU and
/// in the emulator alike.
///
/// ```
/// use warpforge_device::global::{Vector16, vectors16};
/// let x = Vector16([1.0f32, 2.0, 3.0, 4.0]);
/// let (head, v) = vectors16::<f32, 4>(&x.0[1..]);
/// assert_eq!(head, 3); // 16-byte aligned again only past the end
/// assert!(v.is_empty());
/// let (head, v) = vectors16::<f32, 4>(&x.0);
/// assert_eq!((head, v[0].0), (0, [1.0, 2.0, 3.0, 4.0]));
/// ```
#[inline(always)]
pub fn vectors16<T: Plain, const N: usize>(x: &[T]) -> (usize, &[Vector16<T, N>]) {
    const {
        assert!(
            N * core::mem::size_of::<T>() == 16,
            "a Vector16 is 16 bytes"
        )
    };
    // SAFETY: `Vector16<T, N>` is `repr(C)` around `[T; N]` and exactly 16
    // bytes (asserted above: no padding), and `T: Plain` makes every bit
    // pattern of those bytes valid; `align_to` only hands out the middle part
    // at addresses aligned for `Vector16` and within `x`.
    let (head, body, _) = unsafe { x.align_to::<Vector16<T, N>>() };
    (head.len(), body)
}
