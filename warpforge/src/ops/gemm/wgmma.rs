//! The Hopper path of [`Gemm`](super::Gemm): the warp-specialised `wgmma`
//! kernels (`warpforge_kernels_hopper::gemm`, the sm_90a module
//! [`ptx::HOPPER`](crate::ptx::HOPPER)), fed by the TMA from batched tensor
//! maps of `A` and `B`.
//!
//! When it runs (module docs of `gemm`): on a device of compute capability
//! 9.0 whose module variant is there (an H100 or H200, or the emulator of
//! sm_90), for the f16/bf16 pairs into f32 or the input type, without a
//! pinned tile, TF32 or a pinned split; with leading dimensions (and, for a
//! batch, batch strides) that are multiples of 8 elements (16 bytes: what
//! a tensor map can describe) and sizes within its 32-bit coordinates.
//! [`Gemm::wgmma`](super::Gemm::wgmma) forces it (refused with the reason
//! when it cannot run) or turns it off; by default it runs where the
//! `mma.sync` heuristic would pick a tile that fills the GPU (`Large` or
//! `Wide`), and the `mma.sync` kernels run everywhere else.

use crate::{Device, DeviceBuffer, Element, Result, TensorMap};
use warpforge_device::swizzle::Sw128;
use warpforge_kernels_hopper::gemm::{BM, BN, BOX};

/// The tensor maps the Hopper kernels take: batched (dimension 2), boxes
/// of 64 × 64, 128B-swizzled.
pub(super) type OperandMap<'b, T> = TensorMap<'b, T, 3, BOX, BOX, Sw128>;

/// Rows and columns of `C` per block.
pub(super) const TILE: (usize, usize) = (BM, BN);

/// The largest size the kernels' 32-bit box coordinates reach past the
/// matrices by a block tile.
const MAX_EXTENT: usize = i32::MAX as usize - BN;

/// A stored operand's geometry: `rows × cols` row-major, `ld` apart,
/// `count` batches `stride` apart.
pub(super) struct Operand {
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    pub count: usize,
    pub stride: usize,
}

impl Operand {
    /// Why a tensor map cannot describe it (`None`: it can).
    fn unsupported(&self, name: &str) -> Option<String> {
        if !self.ld.is_multiple_of(8) {
            return Some(format!(
                "{name}'s leading dimension {} is not a multiple of 8 elements (16 bytes)",
                self.ld
            ));
        }
        if self.count > 1 && !self.stride.is_multiple_of(8) {
            return Some(format!(
                "{name}'s batch stride {} is not a multiple of 8 elements (16 bytes)",
                self.stride
            ));
        }
        if self.rows.max(self.cols).max(self.count) > MAX_EXTENT {
            return Some(format!(
                "{name} ({} × {}, {} batches) is beyond the TMA's 32-bit coordinates",
                self.rows, self.cols, self.count
            ));
        }
        None
    }

    /// Its batched tensor map: dimension 0 the stored columns, 1 the rows,
    /// 2 the batch. One matrix gets the stride of its own extent (rounded
    /// to 16 bytes), which no copy steps by.
    pub(super) fn map<'b, T: Element>(
        &self,
        buffer: &'b DeviceBuffer<T>,
    ) -> Result<OperandMap<'b, T>> {
        let stride = if self.count > 1 {
            self.stride
        } else {
            self.rows.saturating_mul(self.ld).next_multiple_of(8).max(8)
        };
        TensorMap::new(
            buffer,
            [self.cols, self.rows, self.count],
            &[self.ld, stride],
        )
    }
}

/// Why the Hopper kernels cannot run on `dev` with these operands, `k`
/// deep (`None`: they can). `has_kernels`: the type pair has them.
pub(super) fn unsupported(
    dev: &Device,
    has_kernels: bool,
    shared_bytes: usize,
    k: usize,
    a: &Operand,
    b: &Operand,
) -> Option<String> {
    if !has_kernels {
        return Some(
            "the type pair has no Hopper kernels (f16/bf16 into f32 or the input type do)".into(),
        );
    }
    let cc = dev.compute_capability();
    if cc != (9, 0) {
        return Some(format!(
            "wgmma and the TMA need compute capability 9.0 (an H100 or H200); this device is {}.{}",
            cc.0, cc.1
        ));
    }
    if crate::ptx::HOPPER.variant_for(cc).is_none() {
        return Some("the sm_90a module was not built".into());
    }
    if (dev.limits().max_shared_per_block_optin as usize) < shared_bytes {
        return Some(format!(
            "the kernels need {shared_bytes} bytes of shared memory a block; the device allows {}",
            dev.limits().max_shared_per_block_optin
        ));
    }
    if k > MAX_EXTENT {
        return Some(format!("k = {k} is beyond the TMA's 32-bit coordinates"));
    }
    a.unsupported("A").or_else(|| b.unsupported("B"))
}
