//! The Tensor Memory Accelerator's tensor copies, as the emulator performs
//! them (docs/hopper/ptx-semantics.md §2): a box of a global tensor (rank
//! 1 ..= 5, dimension 0 innermost) gathered densely, dimension 0 fastest,
//! with the elements outside the tensor filled with zeros, then stored into
//! shared memory through the tensor map's swizzle.
//!
//! Not wired to a kernel-facing API yet (issue 28: the tensor map, built on
//! the host by `cuTensorMapEncodeTiled`, and `cp.async.bulk.tensor`); this is
//! the geometry both will share, tested on its own.

use crate::swizzle::Swizzle;

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
            for (d, &i) in index.iter().enumerate() {
                let c = self.corner[d] + i64::from(i);
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
            for (i, &extent) in index.iter_mut().zip(self.box_dims) {
                *i += 1;
                if *i < extent {
                    break;
                }
                *i = 0;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
