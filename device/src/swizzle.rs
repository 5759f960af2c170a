//! Shared-memory swizzles: the permutations of 16-byte chunks that the
//! Tensor Memory Accelerator writes and `wgmma` reads (PTX ISA §5.5.7;
//! docs/hopper/ptx-semantics.md §2.5), so that the 8 rows of a tensor-core
//! operand, 128 bytes apart, fall in different banks.
//!
//! [`Swizzle`] is the pattern as a value (what the emulator applies and a
//! descriptor encodes); [`Sw32`], [`Sw64`] and [`Sw128`] are the same
//! patterns as types ([`Pattern`]), so that a shared tile's layout is part
//! of its type and a descriptor or tensor map that disagrees with the tile
//! cannot be built.

/// A swizzle pattern: each 16-byte chunk of a 128-byte line moves by the
/// line's index (bits 4 and up of the address XORed with bits 7 and up).
/// Keyed to the address itself, so a swizzled buffer starts on a multiple
/// of [`Swizzle::period`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swizzle {
    /// Identity.
    None,
    /// Bit 4 ^= bit 7: lines of 32 bytes' span, period 256 bytes.
    B32,
    /// Bits 5:4 ^= bits 8:7: period 512 bytes.
    B64,
    /// Bits 6:4 ^= bits 9:7: period 1024 bytes.
    B128,
}

impl Swizzle {
    /// The bytes of a row that the pattern permutes within (a TMA box's
    /// innermost extent may span at most this; `None`: no limit).
    pub const fn span(self) -> Option<usize> {
        match self {
            Swizzle::None => None,
            Swizzle::B32 => Some(32),
            Swizzle::B64 => Some(64),
            Swizzle::B128 => Some(128),
        }
    }

    /// The pattern repeats every this many bytes (8 rows of its span); a
    /// swizzled buffer starts on a multiple of it (16 for `None`).
    pub const fn period(self) -> usize {
        match self {
            Swizzle::None => 16,
            Swizzle::B32 => 256,
            Swizzle::B64 => 512,
            Swizzle::B128 => 1024,
        }
    }

    /// Where byte `offset` of the dense buffer lands, from a start on a
    /// multiple of [`period`](Self::period).
    pub const fn apply(self, offset: usize) -> usize {
        let line_bits = match self {
            Swizzle::None => 0,
            Swizzle::B32 => 1,
            Swizzle::B64 => 3,
            Swizzle::B128 => 7,
        };
        offset ^ (((offset >> 7) & line_bits) << 4)
    }

    /// The pattern's code in bits 62–63 of a `wgmma` matrix descriptor.
    pub const fn descriptor_code(self) -> u64 {
        match self {
            Swizzle::None => 0,
            Swizzle::B128 => 1,
            Swizzle::B64 => 2,
            Swizzle::B32 => 3,
        }
    }

    /// The pattern a descriptor's bits 62–63 name.
    pub const fn from_descriptor_code(code: u64) -> Swizzle {
        match code & 3 {
            0 => Swizzle::None,
            1 => Swizzle::B128,
            2 => Swizzle::B64,
            _ => Swizzle::B32,
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A swizzle as a type: how a tensor map's boxes land in shared memory.
/// Implemented by [`Unswizzled`], [`Sw32`], [`Sw64`] and [`Sw128`] only.
pub trait Mode: sealed::Sealed + Copy + 'static {
    /// The swizzle.
    const SWIZZLE: Swizzle;
}

/// A swizzle pattern as a type: the layout parameter of a swizzled shared
/// tile (a `wgmma` operand). Implemented by [`Sw32`], [`Sw64`] and
/// [`Sw128`] only.
pub trait Pattern: Mode {
    /// Its span in bytes: a swizzled row.
    const SPAN: usize = match Self::SWIZZLE.span() {
        Some(s) => s,
        None => 16,
    };
}

/// No swizzle (`CU_TENSOR_MAP_SWIZZLE_NONE`): a box lands densely.
#[derive(Clone, Copy, Debug)]
pub struct Unswizzled;
/// The 32-byte swizzle (`CU_TENSOR_MAP_SWIZZLE_32B`).
#[derive(Clone, Copy, Debug)]
pub struct Sw32;
/// The 64-byte swizzle (`CU_TENSOR_MAP_SWIZZLE_64B`).
#[derive(Clone, Copy, Debug)]
pub struct Sw64;
/// The 128-byte swizzle (`CU_TENSOR_MAP_SWIZZLE_128B`), the one whose rows
/// of 64 halves feed `wgmma` without bank conflicts.
#[derive(Clone, Copy, Debug)]
pub struct Sw128;

macro_rules! mode {
    ($($t:ident = $v:ident),*) => { $(
        impl sealed::Sealed for $t {}
        impl Mode for $t {
            const SWIZZLE: Swizzle = Swizzle::$v;
        }
    )* };
}
mode!(Unswizzled = None, Sw32 = B32, Sw64 = B64, Sw128 = B128);
impl Pattern for Sw32 {}
impl Pattern for Sw64 {}
impl Pattern for Sw128 {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ISA's tables (PTX ISA §5.5.7), as drawn: in line `r` (128 bytes)
    /// of a swizzled buffer, 16-byte chunk `c` holds the dense buffer's
    /// chunk `c ^ (r mod 8)` (128B), `c ^ (r mod 4)` (64B), `c ^ (r mod 2)`
    /// (32B). Checked for every byte of two periods.
    #[test]
    fn patterns_permute_chunks_within_lines_as_the_isa_tables_draw() {
        for (s, lines) in [
            (Swizzle::None, 1),
            (Swizzle::B32, 2),
            (Swizzle::B64, 4),
            (Swizzle::B128, 8),
        ] {
            for byte in 0..2 * s.period().max(1024) {
                let (line, chunk, within) = (byte / 128, (byte / 16) % 8, byte % 16);
                let expect = line * 128 + (chunk ^ (line % lines)) * 16 + within;
                assert_eq!(s.apply(byte), expect, "{s:?} byte {byte}");
            }
            assert_eq!(Swizzle::from_descriptor_code(s.descriptor_code()), s);
        }
        assert_eq!((Sw32::SPAN, Sw64::SPAN, Sw128::SPAN), (32, 64, 128));
    }
}
