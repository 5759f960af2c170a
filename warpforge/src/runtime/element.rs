//! Element types a device buffer may hold.

use half::{bf16, f16};

/// The element type of a buffer, as a value (for messages and reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE binary16.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE binary32.
    F32,
    /// IEEE binary64.
    F64,
    /// 32-bit signed integer.
    I32,
    /// 32-bit unsigned integer.
    U32,
    /// 64-bit signed integer.
    I64,
    /// 64-bit unsigned integer.
    U64,
}

impl DType {
    /// `f32`, `bf16`, …
    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U64 => "u64",
        }
    }
}

/// A plain-old-data element type: any bit pattern is valid, no padding, no drop.
/// Buffers are typed by it, so mixing dtypes in one launch does not compile.
pub trait Element:
    Copy
    + Default
    + PartialEq
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
    + cudarc::driver::DeviceRepr
    + cudarc::driver::ValidAsZeroBits
    + warpforge_device::shared::SharedElement
{
    /// The dtype tag.
    const DTYPE: DType;
    /// Every bit set (a NaN for floats, -1 or the maximum for integers):
    /// what the emulator puts in an output buffer no kernel wrote yet.
    const UNWRITTEN: Self;
}

macro_rules! element {
    ($($t:ty => $d:ident, $unwritten:expr),*) => { $(
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            const UNWRITTEN: Self = $unwritten;
        }
    )* };
}
element!(
    f16 => F16, f16::from_bits(u16::MAX),
    bf16 => BF16, bf16::from_bits(u16::MAX),
    f32 => F32, f32::from_bits(u32::MAX),
    f64 => F64, f64::from_bits(u64::MAX),
    i32 => I32, -1,
    u32 => U32, u32::MAX,
    i64 => I64, -1,
    u64 => U64, u64::MAX
);
