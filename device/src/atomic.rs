//! Atomic read-modify-write on global and shared memory.
//!
//! An [`AtomicRef`] names one element and the *scope* of its atomicity as a
//! type: [`Block`] (the threads of this block, PTX `.cta`), [`Device`] (every
//! thread of the grid, `.gpu`) or [`System`] (also the host and peer GPUs,
//! `.sys`). A narrower scope is cheaper; using one narrower than the threads
//! that actually share the element is a race. Kernels get one from a guarded
//! output ([`crate::guard::Out::atomic`], in bounds or `None`) or from shared
//! memory ([`crate::shared::SharedArray::atomic`], bounds-checked).
//!
//! | operation | types |
//! | --- | --- |
//! | `fetch_add` | i32 u32 i64 u64 f32 f64 f16 |
//! | `fetch_min`, `fetch_max` | i32 u32 i64 u64 (one `atom`); f32 f64 (compare-and-swap loop) |
//! | `fetch_and`, `fetch_or`, `fetch_xor` | i32 u32 i64 u64 |
//! | `swap`, `compare_exchange` | i32 u32 i64 u64 f32 f64 |
//!
//! Float results follow the NaN rule of [`crate::num`] ("NaN results"): an
//! f32 or f16 `fetch_add` that makes a NaN stores the canonical NaN
//! (`0x7fff_ffff`, `0x7fff`), an f64 one a NaN whose bits are left open;
//! `fetch_min`/`fetch_max`, `swap` and `compare_exchange` store one of their
//! operands, bits unchanged.
//!
//! All are *relaxed* (`atom.relaxed.SCOPE`), like CUDA's `atomicAdd`: they
//! order nothing else. Pair them with [`crate::sync::fence`] to publish data.
//! bf16 add is missing on purpose: `atom.add.bf16` needs sm_90, and warpforge's
//! base PTX targets sm_80.
//!
//! ```
//! use warpforge_device::atomic::Device;
//! use warpforge_device::guard::Out;
//! let mut counts = [0u32; 4];
//! let out = Out::from_mut_slice(&mut counts);
//! let bin = out.atomic::<Device>(2).unwrap();
//! assert_eq!(bin.fetch_add(5), 0); // returns the old value
//! assert_eq!(bin.fetch_max(3), 5);
//! assert!(out.atomic::<Device>(4).is_none()); // out of bounds: no atomic
//! ```

use crate::arch::{self, AtomicOp};
use core::marker::PhantomData;
use half::f16;

pub use crate::arch::Scope;

mod sealed {
    pub trait Sealed {}
}

/// A scope as a type, so that it is part of an [`AtomicRef`]'s type.
pub trait AtomicScope: sealed::Sealed {
    /// The PTX scope.
    const SCOPE: Scope;
}

/// Atomic with respect to the threads of the calling block (`.cta`).
pub struct Block;
/// Atomic with respect to every thread of the device (`.gpu`).
pub struct Device;
/// Atomic with respect to the device, peer devices and the host (`.sys`).
pub struct System;

impl sealed::Sealed for Block {}
impl sealed::Sealed for Device {}
impl sealed::Sealed for System {}
impl AtomicScope for Block {
    const SCOPE: Scope = Scope::Block;
}
impl AtomicScope for Device {
    const SCOPE: Scope = Scope::Device;
}
impl AtomicScope for System {
    const SCOPE: Scope = Scope::System;
}

/// One element in global or shared memory, accessed atomically within scope `S`.
pub struct AtomicRef<'a, T, S> {
    ptr: *mut T,
    _element: PhantomData<(&'a T, S)>,
}

impl<T, S: AtomicScope> AtomicRef<'_, T, S> {
    /// # Safety
    /// `ptr` must be valid and aligned for atomic access to a `T` for the
    /// reference's lifetime (on the GPU, in global or shared memory), and every
    /// access to it that may race with these must be atomic: a plain access
    /// racing with an atomic one is a data race, undefined behaviour. The safe
    /// callers (`Out::atomic`, `SharedArray::atomic`) prove the first part;
    /// the second they cannot, since a kernel may also reach the element
    /// through a plain `Slot` or `store`: ordering those against the atomics
    /// (a barrier, or the end of the launch) is the kernel's discipline, as in
    /// CUDA, and the emulator's race detector reports shared-memory violations.
    #[inline(always)]
    pub(crate) unsafe fn new(ptr: *mut T) -> Self {
        AtomicRef {
            ptr,
            _element: PhantomData,
        }
    }
}

/// Types with an atomic add. Sealed.
pub trait AtomicAdd: Copy + sealed::Sealed {
    #[doc(hidden)]
    /// # Safety
    /// `ptr` valid and aligned for atomic access.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn atomic_add(ptr: *mut Self, v: Self, scope: Scope) -> Self;
}

/// Types with an atomic exchange and compare-and-swap (on their bits). Sealed.
pub trait AtomicValue: Copy + sealed::Sealed {
    #[doc(hidden)]
    /// # Safety
    /// `ptr` valid and aligned for atomic access.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn atomic_swap(ptr: *mut Self, v: Self, scope: Scope) -> Self;
    #[doc(hidden)]
    /// Stores `new` if the bits at `ptr` equal `current`'s; returns the old value.
    /// # Safety
    /// `ptr` valid and aligned for atomic access.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn atomic_cas(ptr: *mut Self, current: Self, new: Self, scope: Scope) -> Self;
    #[doc(hidden)]
    fn same_bits(self, other: Self) -> bool;
}

/// Types with an atomic min and max. Sealed.
pub trait AtomicMinMax: AtomicValue {
    #[doc(hidden)]
    /// # Safety
    /// `ptr` valid and aligned for atomic access.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn atomic_min(ptr: *mut Self, v: Self, scope: Scope) -> Self;
    #[doc(hidden)]
    /// # Safety
    /// `ptr` valid and aligned for atomic access.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn atomic_max(ptr: *mut Self, v: Self, scope: Scope) -> Self;
}

/// Integer types with atomic bitwise and/or/xor. Sealed.
pub trait AtomicBits: AtomicValue {
    #[doc(hidden)]
    /// # Safety
    /// `ptr` valid and aligned for atomic access.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn atomic_bits(ptr: *mut Self, v: Self, op: BitOp, scope: Scope) -> Self;
}

#[doc(hidden)]
#[derive(Clone, Copy)]
pub enum BitOp {
    And,
    Or,
    Xor,
}

impl From<BitOp> for AtomicOp {
    #[inline(always)]
    fn from(op: BitOp) -> Self {
        match op {
            BitOp::And => AtomicOp::And,
            BitOp::Or => AtomicOp::Or,
            BitOp::Xor => AtomicOp::Xor,
        }
    }
}

/// 32- and 64-bit integers: one `atom` per operation. Signed and unsigned share
/// the two's-complement `add`/`exch`/bitwise instructions of their width.
macro_rules! atomic_int {
    ($t:ty, $bits:ty, $unsigned:ident, $cas:ident, $min_max:ident) => {
        impl sealed::Sealed for $t {}
        impl AtomicAdd for $t {
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            unsafe fn atomic_add(ptr: *mut Self, v: Self, scope: Scope) -> Self {
                // SAFETY: the caller's contract; same size and alignment.
                unsafe { arch::$unsigned(AtomicOp::Add, scope, ptr.cast(), v as $bits) as $t }
            }
        }
        impl AtomicValue for $t {
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            unsafe fn atomic_swap(ptr: *mut Self, v: Self, scope: Scope) -> Self {
                // SAFETY: as above.
                unsafe { arch::$unsigned(AtomicOp::Exch, scope, ptr.cast(), v as $bits) as $t }
            }
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            unsafe fn atomic_cas(ptr: *mut Self, current: Self, new: Self, scope: Scope) -> Self {
                // SAFETY: as above.
                unsafe { arch::$cas(scope, ptr.cast(), current as $bits, new as $bits) as $t }
            }
            #[inline(always)]
            fn same_bits(self, other: Self) -> bool {
                self == other
            }
        }
        impl AtomicMinMax for $t {
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            unsafe fn atomic_min(ptr: *mut Self, v: Self, scope: Scope) -> Self {
                // SAFETY: as above.
                unsafe { arch::$min_max(AtomicOp::Min, scope, ptr, v) }
            }
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            unsafe fn atomic_max(ptr: *mut Self, v: Self, scope: Scope) -> Self {
                // SAFETY: as above.
                unsafe { arch::$min_max(AtomicOp::Max, scope, ptr, v) }
            }
        }
        impl AtomicBits for $t {
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            unsafe fn atomic_bits(ptr: *mut Self, v: Self, op: BitOp, scope: Scope) -> Self {
                // SAFETY: as above.
                unsafe { arch::$unsigned(op.into(), scope, ptr.cast(), v as $bits) as $t }
            }
        }
    };
}
atomic_int!(u32, u32, atom_u32, atom_cas_u32, atom_u32);
atomic_int!(i32, u32, atom_u32, atom_cas_u32, atom_i32);
atomic_int!(u64, u64, atom_u64, atom_cas_u64, atom_u64);
atomic_int!(i64, u64, atom_u64, atom_cas_u64, atom_i64);

/// f32 and f64: a native add; exchange and compare-and-swap on the bits; min
/// and max as a compare-and-swap loop (`atom.min.f32` needs sm_90).
macro_rules! atomic_float {
    ($t:ty, $bits:ty, $add:ident, $unsigned:ident, $cas:ident) => {
        impl sealed::Sealed for $t {}
        impl AtomicAdd for $t {
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            unsafe fn atomic_add(ptr: *mut Self, v: Self, scope: Scope) -> Self {
                // SAFETY: the caller's contract.
                unsafe { arch::$add(scope, ptr, v) }
            }
        }
        impl AtomicValue for $t {
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            unsafe fn atomic_swap(ptr: *mut Self, v: Self, scope: Scope) -> Self {
                // SAFETY: the caller's contract; a float has its bits' size and alignment.
                <$t>::from_bits(unsafe {
                    arch::$unsigned(AtomicOp::Exch, scope, ptr.cast(), v.to_bits())
                })
            }
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            unsafe fn atomic_cas(ptr: *mut Self, current: Self, new: Self, scope: Scope) -> Self {
                // SAFETY: as above.
                <$t>::from_bits(unsafe {
                    arch::$cas(scope, ptr.cast(), current.to_bits(), new.to_bits())
                })
            }
            #[inline(always)]
            fn same_bits(self, other: Self) -> bool {
                self.to_bits() == other.to_bits()
            }
        }
        impl AtomicMinMax for $t {
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            unsafe fn atomic_min(ptr: *mut Self, v: Self, scope: Scope) -> Self {
                // SAFETY: the caller's contract.
                unsafe { update(ptr, scope, |old| if v.ptx_less(old) { v } else { old }) }
            }
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            #[inline(always)]
            unsafe fn atomic_max(ptr: *mut Self, v: Self, scope: Scope) -> Self {
                // SAFETY: the caller's contract.
                unsafe { update(ptr, scope, |old| if old.ptx_less(v) { v } else { old }) }
            }
        }
    };
}
atomic_float!(f32, u32, atom_add_f32, atom_u32, atom_cas_u32);
atomic_float!(f64, u64, atom_add_f64, atom_u64, atom_cas_u64);

impl sealed::Sealed for f16 {}
impl AtomicAdd for f16 {
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    unsafe fn atomic_add(ptr: *mut Self, v: Self, scope: Scope) -> Self {
        // SAFETY: the caller's contract; f16 is its u16 bits.
        f16::from_bits(unsafe { arch::atom_add_f16(scope, ptr.cast(), v.to_bits()) })
    }
}

/// The order float min/max use, that of PTX `min.f32`/`max.f32`: a NaN loses
/// to any number (so a NaN is replaced, and never stored over a number), and
/// −0 is less than +0.
#[doc(hidden)]
pub trait PtxOrder: Copy {
    fn ptx_less(self, other: Self) -> bool;
}

macro_rules! ptx_order {
    ($($t:ty),*) => { $(
        impl PtxOrder for $t {
            #[inline(always)]
            fn ptx_less(self, other: Self) -> bool {
                if other.is_nan() {
                    return !self.is_nan();
                }
                self < other
                    || (self == other && self.is_sign_negative() && !other.is_sign_negative())
            }
        }
    )* };
}
ptx_order!(f32, f64);

/// Replaces `*ptr` by `f(*ptr)` atomically with a compare-and-swap loop; returns the old value.
///
/// # Safety
/// `ptr` valid and aligned for atomic access.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
unsafe fn update<T: AtomicValue>(ptr: *mut T, scope: Scope, f: impl Fn(T) -> T) -> T {
    // SAFETY (both): the caller's contract.
    let mut old = unsafe { atomic_load(ptr, scope) };
    loop {
        let new = f(old);
        if new.same_bits(old) {
            return old;
        }
        let seen = unsafe { T::atomic_cas(ptr, old, new, scope) };
        if seen.same_bits(old) {
            return old;
        }
        old = seen;
    }
}

/// Reads `*ptr` atomically: a compare-and-swap whose compare and new values
/// are the same (all-zero bits) changes nothing and returns the value.
///
/// # Safety
/// `ptr` valid and aligned for atomic access.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
unsafe fn atomic_load<T: AtomicValue>(ptr: *mut T, scope: Scope) -> T {
    // SAFETY: only instantiated for the integer and float types above, for
    // which all-zero bits is a valid value.
    let zero: T = unsafe { core::mem::zeroed() };
    // SAFETY: the caller's contract.
    unsafe { T::atomic_cas(ptr, zero, zero, scope) }
}

impl<T: AtomicAdd, S: AtomicScope> AtomicRef<'_, T, S> {
    /// Adds `v`; returns the value before (`atomicAdd`). Floats round to nearest even.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn fetch_add(&self, v: T) -> T {
        // SAFETY: `ptr` is valid and aligned for atomic access (AtomicRef::new's contract).
        unsafe { T::atomic_add(self.ptr, v, S::SCOPE) }
    }
}

impl<T: AtomicValue, S: AtomicScope> AtomicRef<'_, T, S> {
    /// Stores `v`; returns the value before (`atomicExch`).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn swap(&self, v: T) -> T {
        // SAFETY: as in `fetch_add`.
        unsafe { T::atomic_swap(self.ptr, v, S::SCOPE) }
    }

    /// Stores `new` if the element's bits equal `current`'s (`atomicCAS`):
    /// `Ok(previous)` if it did, `Err(actual)` if not.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn compare_exchange(&self, current: T, new: T) -> Result<T, T> {
        // SAFETY: as in `fetch_add`.
        let seen = unsafe { T::atomic_cas(self.ptr, current, new, S::SCOPE) };
        if seen.same_bits(current) {
            Ok(seen)
        } else {
            Err(seen)
        }
    }

    /// Reads the element atomically.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load(&self) -> T {
        // SAFETY: as in `fetch_add`.
        unsafe { atomic_load(self.ptr, S::SCOPE) }
    }
}

impl<T: AtomicMinMax, S: AtomicScope> AtomicRef<'_, T, S> {
    /// Stores the smaller of the element and `v`; returns the value before
    /// (`atomicMin`). Floats: a NaN never replaces a number, −0 < +0.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn fetch_min(&self, v: T) -> T {
        // SAFETY: as in `fetch_add`.
        unsafe { T::atomic_min(self.ptr, v, S::SCOPE) }
    }

    /// Stores the larger of the element and `v`; returns the value before
    /// (`atomicMax`). Floats: a NaN never replaces a number, +0 > −0.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn fetch_max(&self, v: T) -> T {
        // SAFETY: as in `fetch_add`.
        unsafe { T::atomic_max(self.ptr, v, S::SCOPE) }
    }
}

impl<T: AtomicBits, S: AtomicScope> AtomicRef<'_, T, S> {
    /// Bitwise and; returns the value before (`atomicAnd`).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn fetch_and(&self, v: T) -> T {
        // SAFETY: as in `fetch_add`.
        unsafe { T::atomic_bits(self.ptr, v, BitOp::And, S::SCOPE) }
    }

    /// Bitwise or; returns the value before (`atomicOr`).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn fetch_or(&self, v: T) -> T {
        // SAFETY: as in `fetch_add`.
        unsafe { T::atomic_bits(self.ptr, v, BitOp::Or, S::SCOPE) }
    }

    /// Bitwise xor; returns the value before (`atomicXor`).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn fetch_xor(&self, v: T) -> T {
        // SAFETY: as in `fetch_add`.
        unsafe { T::atomic_bits(self.ptr, v, BitOp::Xor, S::SCOPE) }
    }
}
