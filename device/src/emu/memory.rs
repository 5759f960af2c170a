//! The emulator's device memory: allocations zeroed and aligned as
//! `cuMemAlloc`'s are (256 bytes), so alignment-sensitive instructions
//! (`cp.async`, vector loads) see the same addresses they would on a GPU.

use crate::shared::SharedElement;
use core::marker::PhantomData;
use core::ptr::NonNull;
use std::alloc::{Layout, alloc_zeroed, dealloc};

/// Alignment of every emulated allocation, as on the GPU.
pub const ALLOCATION_ALIGN: usize = 256;

/// `len` elements of emulated device memory.
pub struct DeviceMemory<T> {
    ptr: NonNull<T>,
    len: usize,
    _owns: PhantomData<T>,
}

// SAFETY: DeviceMemory owns its elements like a Vec<T> does.
unsafe impl<T: Send> Send for DeviceMemory<T> {}
// SAFETY: as above; shared access gives only `&[T]`.
unsafe impl<T: Sync> Sync for DeviceMemory<T> {}

impl<T: SharedElement> DeviceMemory<T> {
    fn layout(len: usize) -> Option<Layout> {
        let bytes = len.checked_mul(size_of::<T>())?;
        Layout::from_size_align(bytes, ALLOCATION_ALIGN).ok()
    }

    /// `len` zeroed elements; `None` if the size overflows or the host is out of memory.
    ///
    /// ```
    /// use warpforge_device::emu::DeviceMemory;
    /// let m = DeviceMemory::<f32>::zeroed(10).unwrap();
    /// assert_eq!(m.as_slice(), &[0.0; 10]);
    /// assert_eq!(m.as_slice().as_ptr() as usize % 256, 0);
    /// assert!(DeviceMemory::<f64>::zeroed(usize::MAX / 4).is_none());
    /// ```
    pub fn zeroed(len: usize) -> Option<Self> {
        let layout = Self::layout(len)?;
        let ptr = if layout.size() == 0 {
            // An aligned, non-null address for an empty allocation; never dereferenced.
            NonNull::new(core::ptr::without_provenance_mut(ALLOCATION_ALIGN))?
        } else {
            // SAFETY: the layout has a non-zero size.
            NonNull::new(unsafe { alloc_zeroed(layout) }.cast::<T>())?
        };
        Some(DeviceMemory {
            ptr,
            len,
            _owns: PhantomData,
        })
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first element's address, formed without a reference (for emulated
    /// kernels and stream jobs, which access the memory through raw pointers).
    pub fn as_mut_ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }

    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised elements (zeroed, and all-zero
        // bits are a valid T because T: SharedElement), aligned and owned.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The elements, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access unique.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for DeviceMemory<T> {
    fn drop(&mut self) {
        let bytes = self.len * size_of::<T>();
        if bytes != 0 {
            // SAFETY: allocated in `zeroed` with exactly this layout (which was valid then).
            unsafe {
                dealloc(
                    self.ptr.as_ptr().cast(),
                    Layout::from_size_align_unchecked(bytes, ALLOCATION_ALIGN),
                )
            }
        }
    }
}
