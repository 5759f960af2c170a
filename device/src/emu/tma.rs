//! The Tensor Memory Accelerator's tensor copies, as the emulator performs
//! them (docs/hopper/ptx-semantics.md §2): a box of a global tensor (rank
//! 1 ..= 5, dimension 0 innermost) gathered densely, dimension 0 fastest,
//! with the elements outside the tensor filled with zeros, then stored into
//! shared memory through the tensor map's swizzle.
//!
//! Not wired to a kernel-facing API yet (issue 28: the tensor map, built on
//! the host by `cuTensorMapEncodeTiled`, and `cp.async.bulk.tensor`); this is
//! the geometry both will share, tested on its own.

/// A tensor map's shared-memory swizzle: 16-byte chunks permuted within
/// each 128-byte line by the line's index (`CU_TENSOR_MAP_SWIZZLE_*`; the
/// same patterns as `wgmma`'s descriptors). Keyed to address bits 4 and up,
/// so a destination starts on a multiple of [`Swizzle::period`].
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
    /// The bytes of a box's innermost dimension may span at most this (the
    /// swizzle's width; `None`: no limit from the swizzle).
    pub const fn span(self) -> Option<usize> {
        match self {
            Swizzle::None => None,
            Swizzle::B32 => Some(32),
            Swizzle::B64 => Some(64),
            Swizzle::B128 => Some(128),
        }
    }

    /// The pattern repeats every this many bytes; a swizzled destination
    /// starts on a multiple of it (16 for `None`: any copy's alignment).
    pub const fn period(self) -> usize {
        match self {
            Swizzle::None => 16,
            Swizzle::B32 => 256,
            Swizzle::B64 => 512,
            Swizzle::B128 => 1024,
        }
    }

    /// Where byte `offset` of the dense box lands, from a destination that
    /// starts on a multiple of [`period`](Self::period).
    pub const fn apply(self, offset: usize) -> usize {
        let line_bits = match self {
            Swizzle::None => 0,
            Swizzle::B32 => 1,
            Swizzle::B64 => 3,
            Swizzle::B128 => 7,
        };
        offset ^ (((offset >> 7) & line_bits) << 4)
    }
}

/// A box copy's geometry: the tensor's extents and byte strides, the box's
/// extents and start corner, the element size.
#[derive(Clone, Debug)]
pub struct BoxGeometry<'a> {
    /// Elements per dimension, innermost first (each ≥ 1).
    pub dims: &'a [u64],
    /// Bytes between consecutive indices of dimensions 1.. (dimension 0's
    /// elements are adjacent).
    pub strides: &'a [u64],
    /// The box's extent per dimension (each 1 ..= 256).
    pub box_dims: &'a [u32],
    /// The box's start corner, per dimension; may be negative or past the
    /// end (those elements are zero).
    pub corner: &'a [i64],
    /// Bytes per element.
    pub elem: usize,
}

impl BoxGeometry<'_> {
    /// Bytes the box delivers: every element, inside the tensor or not
    /// (zero-filled elements count as delivered, as on the GPU).
    pub fn bytes(&self) -> usize {
        self.box_dims.iter().map(|&b| b as usize).product::<usize>() * self.elem
    }

    /// The box's bytes as they land in shared memory: gathered densely
    /// (dimension 0 fastest), zeros outside the tensor, each 16-byte chunk
    /// moved by `swizzle`. `read(offset, out)` fills `out` with the
    /// tensor's bytes at byte `offset` from its base.
    pub fn gather(&self, swizzle: Swizzle, mut read: impl FnMut(u64, &mut [u8])) -> Vec<u8> {
        let rank = self.dims.len();
        let mut out = vec![0u8; self.bytes()];
        let mut index = vec![0u32; rank];
        let mut element = vec![0u8; self.elem];
        for dense in (0..out.len()).step_by(self.elem.max(1)) {
            // The element's tensor coordinates, and whether they are inside.
            let mut offset = 0u64;
            let mut inside = true;
            for d in 0..rank {
                let c = self.corner[d] + i64::from(index[d]);
                if c < 0 || c as u64 >= self.dims[d] {
                    inside = false;
                    break;
                }
                offset += if d == 0 {
                    c as u64 * self.elem as u64
                } else {
                    c as u64 * self.strides[d - 1]
                };
            }
            if inside {
                read(offset, &mut element);
                let at = swizzle.apply(dense);
                out[at..at + self.elem].copy_from_slice(&element);
            }
            // Next index, dimension 0 fastest.
            for d in 0..rank {
                index[d] += 1;
                if index[d] < self.box_dims[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ISA's tables (PTX ISA §5.5.7), written as they are drawn: in line
    /// `r` (128 bytes) of a swizzled buffer, 16-byte chunk `c` holds the
    /// dense buffer's chunk `c ^ (r mod 8)` (128B), `c ^ (r mod 4)` (64B),
    /// `c ^ (r mod 2)` (32B). Checked for every byte of two periods.
    #[test]
    fn swizzles_permute_chunks_within_lines_as_the_isa_tables_draw() {
        for (swizzle, rows) in [
            (Swizzle::None, 1),
            (Swizzle::B32, 2),
            (Swizzle::B64, 4),
            (Swizzle::B128, 8),
        ] {
            for offset in 0..2 * swizzle.period().max(1024) {
                let (line, chunk, byte) = (offset / 128, offset / 16 % 8, offset % 16);
                let want = line * 128 + (chunk ^ (line % rows)) * 16 + byte;
                assert_eq!(swizzle.apply(offset), want, "{swizzle:?} at {offset}");
            }
        }
    }

    /// A 2-D box of `u16`s over a 5 × 7 tensor (rows padded to 16 bytes),
    /// at corners inside, across every edge and fully outside: each element
    /// is the tensor's or zero exactly as its coordinates say, at its dense
    /// place (no swizzle) and at its swizzled one (128B, a box of 64 × 4).
    #[test]
    fn a_box_gathers_inside_elements_and_zero_fills_the_rest() {
        let (rows, cols, pitch) = (5u64, 7u64, 16u64);
        // Element (r, c) = 1000 + 10·r + c; padding bytes 0xEE (never read).
        let mut tensor = vec![0xEEu8; (rows * pitch) as usize];
        for r in 0..rows {
            for c in 0..cols {
                let v = (1000 + 10 * r + c) as u16;
                let at = (r * pitch + 2 * c) as usize;
                tensor[at..at + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
        let read = |offset: u64, out: &mut [u8]| {
            out.copy_from_slice(&tensor[offset as usize..offset as usize + out.len()]);
        };
        let value = |r: i64, c: i64| {
            if (0..rows as i64).contains(&r) && (0..cols as i64).contains(&c) {
                (1000 + 10 * r + c) as u16
            } else {
                0
            }
        };
        for (box_dims, swizzle) in [([8u32, 3u32], Swizzle::None), ([64, 4], Swizzle::B128)] {
            for corner in [[0i64, 0], [3, 1], [-2, -1], [5, 4], [-9, 0], [0, 6], [7, 5]] {
                let geometry = BoxGeometry {
                    dims: &[cols, rows],
                    strides: &[pitch],
                    box_dims: &box_dims,
                    corner: &corner,
                    elem: 2,
                };
                let got = geometry.gather(swizzle, read);
                assert_eq!(got.len(), geometry.bytes());
                for j in 0..box_dims[1] as i64 {
                    for i in 0..box_dims[0] as i64 {
                        let dense = 2 * (j as usize * box_dims[0] as usize + i as usize);
                        let at = swizzle.apply(dense);
                        let v = u16::from_le_bytes([got[at], got[at + 1]]);
                        assert_eq!(
                            v,
                            value(corner[1] + j, corner[0] + i),
                            "box {box_dims:?} at {corner:?}, element ({i}, {j}), {swizzle:?}"
                        );
                    }
                }
            }
        }
    }
}
