//! The Tensor Memory Accelerator's tensor copies, as the emulator performs
//! them (docs/hopper/ptx-semantics.md §2): a box of a global tensor (rank
//! 1 ..= 5, dimension 0 innermost) gathered densely, dimension 0 fastest,
//! with the elements outside the tensor filled with zeros, then stored into
//! shared memory through the tensor map's swizzle.
//!
//! [`TensorDesc`] is a tensor map as the emulator holds it, and the one
//! place its rules live: the host crate validates every map through
//! [`TensorDesc::new`] before it encodes it for the GPU
//! (`cuTensorMapEncodeTiled`), so both backends refuse the same maps.

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
        let mut out = vec![0u8; self.bytes()];
        self.each_inside(|dense, offset| {
            let at = swizzle.apply(dense);
            read(offset, &mut out[at..at + self.elem]);
        });
        out
    }

    /// The inverse, a TMA store: the box's bytes `data`, laid out in shared
    /// memory as [`gather`](Self::gather) lands them, written to the
    /// tensor element by element: `write(offset, bytes)` for each element
    /// inside the tensor (those outside are not written), in dense order.
    pub fn scatter(&self, swizzle: Swizzle, data: &[u8], mut write: impl FnMut(u64, &[u8])) {
        self.each_inside(|dense, offset| {
            let at = swizzle.apply(dense);
            write(offset, &data[at..at + self.elem]);
        });
    }

    /// Calls `visit(dense, offset)` for each element of the box inside the
    /// tensor: its byte offset in the dense box (dimension 0 fastest) and
    /// in the tensor.
    fn each_inside(&self, mut visit: impl FnMut(usize, u64)) {
        let rank = self.dims.len();
        let mut index = vec![0u32; rank];
        for dense in (0..self.bytes()).step_by(self.elem.max(1)) {
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
                visit(dense, offset);
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
    }
}

/// One past the last column a TMA store can write in a row of `cols`
/// elements of `elem` bytes: the copy engine writes a row in whole 16-byte
/// chunks (an H200 wrote columns 90 and 91 of a 90-column f32 row), so
/// `cols` rounded up to a chunk. Equal to `cols` exactly when the row is a
/// multiple of 16 bytes; the host refuses store maps where it is not.
pub fn stored_row_end(cols: u64, elem: usize) -> u64 {
    let elem = elem as u64;
    cols.saturating_mul(elem).div_ceil(16) * 16 / elem
}

/// Most dimensions a tensor map has (`cuTensorMapEncodeTiled`'s rank).
pub const MAX_RANK: usize = 5;

/// A tensor map: a tensor in global memory, the box its copies move and the
/// swizzle they land with. The emulator's form of a `CUtensorMap`, made only
/// by [`TensorDesc::new`], which checks every rule the driver's encoder and
/// the copies rely on.
#[derive(Clone, Copy, Debug)]
pub struct TensorDesc {
    base: *const u8,
    rank: usize,
    dims: [u64; MAX_RANK],
    /// Bytes between consecutive indices of dimensions 1 .. rank.
    strides: [u64; MAX_RANK - 1],
    box_dims: [u32; MAX_RANK],
    elem: usize,
    swizzle: Swizzle,
}

// SAFETY: a description of memory that the launch holding it keeps alive
// and unwritten (the host binds the buffer as read by the launch); the
// copies only read through it.
unsafe impl Send for TensorDesc {}
// SAFETY: as above.
unsafe impl Sync for TensorDesc {}

/// Why [`TensorDesc::new`] refused a map: the field and what it must be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapError {
    /// The field, as `cuTensorMapEncodeTiled` names it (`globalDim[1]`, `boxDim[0]`, …).
    pub field: String,
    /// What it is and what it must be.
    pub detail: String,
}

impl core::fmt::Display for MapError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: {}", self.field, self.detail)
    }
}

impl TensorDesc {
    /// A map of the tensor at `base` (within `buffer_bytes` readable
    /// bytes): `dims` elements per dimension, innermost first; `strides`
    /// the *bytes* between consecutive indices of dimensions 1.. (one fewer
    /// than `dims`); boxes of `box_dims` elements of `elem` bytes, landing
    /// with `swizzle`. Refused, naming the field, unless: the rank is
    /// 1 ..= 5 and the lists agree with it; `base` is 16-byte aligned; every
    /// dimension is 1 ..= 2^32; every stride a multiple of 16 below 2^40;
    /// the whole tensor lies inside the buffer; every box extent 1 ..= 256;
    /// the box's inner extent a multiple of 16 bytes and, swizzled, at most
    /// the swizzle's span; the whole box at most an mbarrier's tx-count.
    pub fn new(
        base: *const u8,
        buffer_bytes: usize,
        dims: &[u64],
        strides: &[u64],
        box_dims: &[u32],
        elem: usize,
        swizzle: Swizzle,
    ) -> Result<TensorDesc, MapError> {
        let fail = |field: String, detail: String| Err(MapError { field, detail });
        let rank = dims.len();
        if !(1..=MAX_RANK).contains(&rank) {
            return fail(
                "tensorRank".into(),
                format!("is {rank}; a tensor map has 1 ..= 5 dimensions"),
            );
        }
        if strides.len() + 1 != rank || box_dims.len() != rank {
            return fail(
                "globalStrides".into(),
                format!(
                    "{} strides and {} box extents for {rank} dimensions; give rank − 1 \
                     strides (dimension 0's elements are adjacent) and rank box extents",
                    strides.len(),
                    box_dims.len()
                ),
            );
        }
        if !(base as usize).is_multiple_of(16) {
            return fail(
                "globalAddress".into(),
                format!("{base:p} is not 16-byte aligned"),
            );
        }
        if !matches!(elem, 1 | 2 | 4 | 8) {
            return fail(
                "tensorDataType".into(),
                format!("{elem}-byte elements; TMA moves 1, 2, 4 or 8"),
            );
        }
        for (d, &n) in dims.iter().enumerate() {
            if !(1..=1u64 << 32).contains(&n) {
                return fail(
                    format!("globalDim[{d}]"),
                    format!("is {n}; each extent is 1 ..= 2^32"),
                );
            }
        }
        for (d, &s) in strides.iter().enumerate() {
            if !s.is_multiple_of(16) || s >= 1 << 40 {
                return fail(
                    format!("globalStrides[{d}]"),
                    format!(
                        "is {s} bytes (dimension {}'s); strides are multiples of 16 bytes below \
                         2^40 (pad the rows, or use a kernel without TMA)",
                        d + 1
                    ),
                );
            }
        }
        // The last byte the tensor reaches, checked: it must be in the buffer.
        let mut end = dims[0].checked_mul(elem as u64);
        for (d, &s) in strides.iter().enumerate() {
            end = end.and_then(|e| e.checked_add((dims[d + 1] - 1).checked_mul(s)?));
        }
        match end {
            Some(end) if end <= buffer_bytes as u64 => {}
            _ => {
                return fail(
                    "globalDim".into(),
                    format!(
                        "the tensor ({dims:?} elements, strides {strides:?} bytes) reaches past \
                         its buffer of {buffer_bytes} bytes"
                    ),
                );
            }
        }
        for (d, &b) in box_dims.iter().enumerate() {
            if !(1..=256).contains(&b) {
                return fail(
                    format!("boxDim[{d}]"),
                    format!("is {b}; each box extent is 1 ..= 256"),
                );
            }
        }
        let inner = box_dims[0] as usize * elem;
        if !inner.is_multiple_of(16) {
            return fail(
                "boxDim[0]".into(),
                format!("{inner} bytes; the box's rows are multiples of 16 bytes"),
            );
        }
        if let Some(span) = swizzle.span()
            && inner > span
        {
            return fail(
                "boxDim[0]".into(),
                format!("{inner} bytes, over the {span}-byte swizzle's span; split the box"),
            );
        }
        let bytes = box_dims.iter().map(|&b| b as usize).product::<usize>() * elem;
        if bytes > crate::mbarrier::MAX_COUNT as usize {
            return fail(
                "boxDim".into(),
                format!("{bytes} bytes a box; an mbarrier counts at most 2^20 − 1"),
            );
        }
        let mut desc = TensorDesc {
            base,
            rank,
            dims: [1; MAX_RANK],
            strides: [0; MAX_RANK - 1],
            box_dims: [1; MAX_RANK],
            elem,
            swizzle,
        };
        desc.dims[..rank].copy_from_slice(dims);
        desc.strides[..rank - 1].copy_from_slice(strides);
        desc.box_dims[..rank].copy_from_slice(box_dims);
        Ok(desc)
    }

    /// Dimensions.
    pub fn rank(&self) -> usize {
        self.rank
    }
    /// Elements per dimension, innermost first.
    pub fn dims(&self) -> &[u64] {
        &self.dims[..self.rank]
    }
    /// Bytes between consecutive indices of dimensions 1 .. rank.
    pub fn strides(&self) -> &[u64] {
        &self.strides[..self.rank - 1]
    }
    /// The box's extents.
    pub fn box_dims(&self) -> &[u32] {
        &self.box_dims[..self.rank]
    }
    /// Bytes per element.
    pub fn elem(&self) -> usize {
        self.elem
    }
    /// The swizzle boxes land with.
    pub fn swizzle(&self) -> Swizzle {
        self.swizzle
    }
    /// The tensor's first byte.
    pub fn base(&self) -> *const u8 {
        self.base
    }

    /// The geometry of this map's box at `corner`.
    fn geometry<'a>(&'a self, corner: &'a [i64]) -> BoxGeometry<'a> {
        BoxGeometry {
            dims: self.dims(),
            strides: self.strides(),
            box_dims: self.box_dims(),
            corner,
            elem: self.elem,
        }
    }

    /// For a store of the box whose dimension-0 corner is `corner0`: the
    /// columns past the tensor that a GPU writes, `cols .. end`, or `None`.
    /// The copy engine writes a row in whole 16-byte chunks (an H200 wrote
    /// columns 90 and 91 of a 90-column f32 matrix), so a box that reaches
    /// past the last column of a tensor whose row is not a multiple of 16
    /// bytes writes the rest of the last chunk.
    pub fn store_overrun(&self, corner0: i64) -> Option<(u64, u64)> {
        let cols = self.dims[0];
        let chunked = stored_row_end(cols, self.elem);
        let box_end = corner0.saturating_add(i64::from(self.box_dims[0]));
        let end = chunked.min(u64::try_from(box_end).unwrap_or(0));
        (end > cols).then_some((cols, end))
    }

    /// The box at `corner` as it lands in shared memory.
    ///
    /// # Safety
    /// The buffer `new` was given must still be readable.
    pub(crate) unsafe fn gather(&self, corner: &[i32]) -> Vec<u8> {
        let corner: Vec<i64> = corner.iter().map(|&c| i64::from(c)).collect();
        let geometry = self.geometry(&corner);
        geometry.gather(self.swizzle, |offset, out| {
            // SAFETY: `new` checked that every element of the tensor lies
            // in the buffer; `gather` reads only elements inside it; the
            // caller keeps the buffer alive.
            let src =
                unsafe { core::slice::from_raw_parts(self.base.add(offset as usize), out.len()) };
            out.copy_from_slice(src);
        })
    }

    /// Stores the box at `corner` from `data` (its bytes as a load would
    /// land them in shared memory) into the tensor, clipped to it; before
    /// each element's write, `check(address, bytes)` (the race detector),
    /// whose first error stops the store there.
    ///
    /// # Safety
    /// The buffer `new` was given must be writable, and no Rust reference
    /// to it live (the host made the map from a `&mut` buffer).
    pub(crate) unsafe fn scatter<E>(
        &self,
        corner: &[i32],
        data: &[u8],
        mut check: impl FnMut(usize, usize) -> Result<(), E>,
    ) -> Result<(), E> {
        let corner: Vec<i64> = corner.iter().map(|&c| i64::from(c)).collect();
        let geometry = self.geometry(&corner);
        let mut result = Ok(());
        geometry.scatter(self.swizzle, data, |offset, bytes| {
            if result.is_err() {
                return;
            }
            // `new` checked that every element of the tensor lies in the
            // buffer; `scatter` visits only elements inside it.
            let dst = self.base.wrapping_add(offset as usize).cast_mut();
            result = check(dst as usize, bytes.len());
            if result.is_ok() {
                // SAFETY: as above; the caller's contract makes it writable.
                unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
            }
        });
        result
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
