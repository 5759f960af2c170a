//! The two backends behind every primitive, with the same function set:
//! `nvptx` (PTX registers, intrinsics and inline asm) and `host` (the emulator).
//! The public modules call `arch::*` and never look at the target themselves.

/// Which warp shuffle: the PTX `shfl.sync` mode.
///
/// `shfl.sync` reads only bits 4:0 of its lane/offset operand `b` (`arg`
/// here), in every mode: `arg` 33 acts as 1. `arg & 31` below is that value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShuffleMode {
    /// Read lane `arg & 31` (`shfl.sync.idx`).
    Idx,
    /// Read lane `lane - (arg & 31)`; own value if that is below lane 0 (`shfl.sync.up`).
    Up,
    /// Read lane `lane + (arg & 31)`; own value if that is above lane 31 (`shfl.sync.down`).
    Down,
    /// Read lane `lane ^ (arg & 31)` (`shfl.sync.bfly`).
    Xor,
}

impl ShuffleMode {
    /// The `c` operand warpforge passes to `shfl.sync` in this mode: the GPU
    /// asm takes it from here as a `const` operand and the emulator's
    /// `shfl.sync` model reads it too, so the two cannot drift.
    ///
    /// Bits 12:8 are the segment mask (0: one segment of all 32 lanes); bits
    /// 4:0 the clamp lane (PTX ISA `shfl.sync`: `maxLane`): 31 for `idx`,
    /// `down` and `bfly` (a source may be any lane up to 31), 0 for `up` (a
    /// source may be any lane down to 0). These are the values CUDA's
    /// `__shfl_*_sync` use for a full-warp `width` of 32.
    pub(crate) const fn clamp_segmask(self) -> u32 {
        match self {
            ShuffleMode::Up => 0x00,
            ShuffleMode::Idx | ShuffleMode::Down | ShuffleMode::Xor => 0x1f,
        }
    }
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

/// Bits of the NaN that every f32 arithmetic instruction of the GPU writes,
/// whatever NaNs went in (see `crate::num`, "NaN results").
pub const CANONICAL_NAN_F32: u32 = 0x7fff_ffff;
/// Bits of the NaN that the GPU's f16 arithmetic and conversions to f16 write.
pub const CANONICAL_NAN_F16: u16 = 0x7fff;
/// Bits of the NaN that the GPU's bf16 arithmetic and conversions to bf16 write.
pub const CANONICAL_NAN_BF16: u16 = 0x7fff;

/// `result` as the GPU writes it when its NaN is `nan_bits`: in the emulator
/// a NaN `result` (the host FPU's) becomes `nan_bits`; on the GPU the
/// instruction already wrote them, and this is the identity.
#[inline(always)]
pub(crate) fn gpu_nan_f32(result: f32, nan_bits: u32) -> f32 {
    if cfg!(target_arch = "nvptx64") || !result.is_nan() {
        result
    } else {
        f32::from_bits(nan_bits)
    }
}

/// As [`gpu_nan_f32`], for f64.
#[inline(always)]
pub(crate) fn gpu_nan_f64(result: f64, nan_bits: u64) -> f64 {
    if cfg!(target_arch = "nvptx64") || !result.is_nan() {
        result
    } else {
        f64::from_bits(nan_bits)
    }
}

/// An f32 computed by one GPU arithmetic instruction: a NaN is [`CANONICAL_NAN_F32`].
#[inline(always)]
pub(crate) fn f32_op(result: f32) -> f32 {
    gpu_nan_f32(result, CANONICAL_NAN_F32)
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
