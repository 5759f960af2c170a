//! Thread, block and grid indices and dimensions; lanes and warps.
//!
//! ```
//! use warpforge_device::thread;
//! // Outside a launch there is no "current thread": these are for kernel bodies.
//! fn body() -> usize { thread::global_index_x() }
//! # let _ = body;
//! ```

use crate::arch;
use core::fmt;

/// Threads in a warp.
pub const WARP_SIZE: u32 = 32;

/// A CUDA `dim3`: an extent or index in up to three dimensions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// Fastest-varying dimension.
    pub x: u32,
    /// Middle dimension.
    pub y: u32,
    /// Slowest-varying dimension.
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Self { x, y, z }
    }

    /// `(x, 1, 1)`: a 1-D extent.
    pub const fn x(x: u32) -> Self {
        Self { x, y: 1, z: 1 }
    }

    /// `(x, y, 1)`: a 2-D extent.
    pub const fn xy(x: u32, y: u32) -> Self {
        Self { x, y, z: 1 }
    }

    /// `x·y·z`, without overflow.
    ///
    /// ```
    /// # use warpforge_device::Dim3;
    /// assert_eq!(Dim3::new(65535, 65535, 65535).volume(), 65535u64.pow(3));
    /// ```
    pub const fn volume(self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }

    /// The index whose row-major rank in this extent is `linear` (x fastest).
    ///
    /// ```
    /// # use warpforge_device::Dim3;
    /// assert_eq!(Dim3::new(4, 3, 2).unflatten(4 * 3 + 4 + 1), Dim3::new(1, 1, 1));
    /// ```
    pub const fn unflatten(self, linear: u64) -> Dim3 {
        let x = self.x as u64;
        let xy = x * self.y as u64;
        Dim3::new(
            (linear % x) as u32,
            ((linear % xy) / x) as u32,
            (linear / xy) as u32,
        )
    }
}

impl fmt::Display for Dim3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {}, {})", self.x, self.y, self.z)
    }
}

/// This thread's index within its block (`threadIdx`).
#[inline(always)]
pub fn thread_idx() -> Dim3 {
    arch::thread_idx()
}

/// This block's index within the grid (`blockIdx`).
#[inline(always)]
pub fn block_idx() -> Dim3 {
    arch::block_idx()
}

/// Threads per block (`blockDim`).
#[inline(always)]
pub fn block_dim() -> Dim3 {
    arch::block_dim()
}

/// Blocks per grid (`gridDim`).
#[inline(always)]
pub fn grid_dim() -> Dim3 {
    arch::grid_dim()
}

/// `blockIdx.x · blockDim.x + threadIdx.x`, computed in 64 bits (it cannot overflow).
#[inline(always)]
pub fn global_index_x() -> usize {
    block_idx().x as usize * block_dim().x as usize + thread_idx().x as usize
}

/// `blockIdx.y · blockDim.y + threadIdx.y`, computed in 64 bits.
#[inline(always)]
pub fn global_index_y() -> usize {
    block_idx().y as usize * block_dim().y as usize + thread_idx().y as usize
}

/// `gridDim.x · blockDim.x`: the step of a grid-stride loop over x.
#[inline(always)]
pub fn grid_stride_x() -> usize {
    grid_dim().x as usize * block_dim().x as usize
}

/// This thread's rank within its block: `x + y·dim.x + z·dim.x·dim.y`.
#[inline(always)]
pub fn linear_thread_id() -> u32 {
    let (t, d) = (thread_idx(), block_dim());
    t.x + d.x * (t.y + d.y * t.z)
}

/// This thread's lane within its warp, `0..32`.
#[inline(always)]
pub fn lane_id() -> u32 {
    arch::lane_id()
}

/// This thread's warp within its block: `linear_thread_id() / 32`.
#[inline(always)]
pub fn warp_id() -> u32 {
    linear_thread_id() / WARP_SIZE
}

/// Warps in this block, counting a partial last warp.
#[inline(always)]
pub fn warps_per_block() -> u32 {
    let d = block_dim();
    (d.x * d.y * d.z).div_ceil(WARP_SIZE)
}

/// Names the code path this block takes (e.g. a kernel's lean and guarded
/// main loops), for the emulator's memory profile
/// ([`MemoryProfile::paths`](crate::emu::MemoryProfile::paths): blocks per
/// path), so a test can check which path each tile took. Counted once per
/// block, from its thread 0; nothing on the GPU, and nothing in a launch
/// that is not profiled.
#[inline(always)]
pub fn path(name: &'static str) {
    crate::arch::record_path(name);
}
