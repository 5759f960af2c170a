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

/// Which warp vote: the PTX `vote.sync` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteMode {
    /// 1 if every lane's predicate is true.
    All,
    /// 1 if any lane's predicate is true.
    Any,
    /// Bit i set iff lane i's predicate is true.
    Ballot,
}

/// Which warp match: the PTX `match.sync` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchMode {
    /// The lanes of the mask holding the same value as this lane (`match.any`).
    Any,
    /// The mask if every lane of it holds the same value, else 0 (`match.all`).
    All,
}

/// Which integer warp reduction: the PTX `redux.sync` operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduxOp {
    /// Wrapping sum (`redux.sync.add`).
    Add,
    /// Unsigned minimum (`.min.u32`).
    MinU32,
    /// Unsigned maximum (`.max.u32`).
    MaxU32,
    /// Signed minimum (`.min.s32`).
    MinI32,
    /// Signed maximum (`.max.s32`).
    MaxI32,
    /// Bitwise and (`.and.b32`).
    And,
    /// Bitwise or (`.or.b32`).
    Or,
    /// Bitwise xor (`.xor.b32`).
    Xor,
}

/// Which threads a fence orders for, or an atomic is atomic with respect to:
/// the PTX scope (`.cta`, `.gpu`, `.sys`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The threads of this block (`.cta`).
    Block,
    /// Every thread on the device (`.gpu`).
    Device,
    /// The device, other devices and the host (`.sys`).
    System,
}

#[cfg(target_arch = "nvptx64")]
mod nvptx;
#[cfg(target_arch = "nvptx64")]
pub(crate) use nvptx::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host;
#[cfg(not(target_arch = "nvptx64"))]
pub(crate) use host::*;

/// Which read-modify-write an integer atomic performs: the PTX `atom` operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomicOp {
    Add,
    Min,
    Max,
    Exch,
    And,
    Or,
    Xor,
}
