//! Block-wide barriers.

use crate::arch;

/// Waits until every thread of the block has reached this barrier (`bar.sync 0`,
/// CUDA's `__syncthreads`), and makes their shared- and global-memory writes
/// visible to each other.
///
/// Every thread of the block must reach it: a barrier inside a branch that some
/// threads skip (or after an early `return`) hangs or corrupts on the GPU. The
/// emulator reports it as `Fault::DivergentBarrier`, naming the thread.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn sync_threads() {
    arch::sync_threads()
}

/// A block barrier that also returns how many threads of the block passed a
/// true `predicate` (`bar.red.popc`, CUDA's `__syncthreads_count`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn sync_threads_count(predicate: bool) -> u32 {
    arch::sync_threads_count(predicate)
}

/// A block barrier that returns whether every thread's `predicate` was true
/// (CUDA's `__syncthreads_and`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn sync_threads_and(predicate: bool) -> bool {
    let d = crate::thread::block_dim();
    sync_threads_count(predicate) == d.x * d.y * d.z
}

/// A block barrier that returns whether any thread's `predicate` was true
/// (CUDA's `__syncthreads_or`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn sync_threads_or(predicate: bool) -> bool {
    sync_threads_count(predicate) > 0
}

pub use crate::arch::Scope;

/// Orders this thread's memory accesses before the fence against those after
/// it, as seen by every thread in `scope` (`fence.acq_rel.cta`/`.gpu`,
/// `fence.sc.sys`). Unlike a barrier, it waits for nobody.
#[inline(always)]
pub fn fence(scope: Scope) {
    arch::fence(scope)
}
