//! The two backends behind every primitive, with the same function set:
//! `nvptx` (PTX registers, intrinsics and inline asm) and `host` (the emulator).
//! The public modules call `arch::*` and never look at the target themselves.

/// Which warp shuffle: the PTX `shfl.sync` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShuffleMode {
    /// Read lane `arg` (`shfl.sync.idx`).
    Idx,
    /// Read lane `lane - arg`, own value below lane 0 (`shfl.sync.up`).
    Up,
    /// Read lane `lane + arg`, own value above lane 31 (`shfl.sync.down`).
    Down,
    /// Read lane `lane ^ arg` (`shfl.sync.bfly`).
    Xor,
}

#[cfg(target_arch = "nvptx64")]
mod nvptx;
#[cfg(target_arch = "nvptx64")]
pub(crate) use nvptx::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host;
#[cfg(not(target_arch = "nvptx64"))]
pub(crate) use host::*;
