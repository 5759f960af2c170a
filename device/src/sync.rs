//! Block-wide barriers.

use crate::arch;

/// Waits until every thread of the block has reached this barrier (`bar.sync 0`,
/// CUDA's `__syncthreads`), and makes their shared- and global-memory writes
/// visible to each other.
///
/// Every thread of the block must reach it: a barrier inside a branch that some
/// threads skip (or after an early `return`) hangs or corrupts on the GPU. The
/// emulator reports it as `Fault::DivergentBarrier`, naming the thread.
#[inline(always)]
pub fn sync_threads() {
    arch::sync_threads()
}
