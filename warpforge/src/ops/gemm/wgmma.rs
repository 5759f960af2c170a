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
//!
//! The kernels are persistent: a 1-D grid of one block per SM (at most
//! [`Gemm::sm_limit`](super::Gemm::sm_limit), at most one per tile), each
//! block walking `C`'s 128 × 256 tiles (`TileWalk`), so the tiles must
//! number fewer than 2³².

use crate::{Device, DeviceBuffer, Element, Result, TensorMap};
use warpforge_device::swizzle::Sw128;
use warpforge_kernels_hopper::gemm::{BM, BN, BOX};

/// The tensor maps the Hopper kernels take: batched (dimension 2), boxes
/// of 64 × 64, 128B-swizzled.
pub(super) type OperandMap<'b, T> = TensorMap<'b, T, 3, BOX, BOX, Sw128>;

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

/// What the type pair brings: whether it has Hopper kernels, and the
/// shared memory they take.
pub(super) struct Kernels {
    pub exist: bool,
    pub shared_bytes: usize,
}

/// A GEMM the Hopper kernels run: its operands' checked geometry and the
/// persistent grid's blocks.
pub(super) struct Plan {
    pub a: Operand,
    pub b: Operand,
    pub blocks: u32,
}

impl Plan {
    /// The launch of `m × n × k` (batches: the operands' `count`) on `dev`
    /// with at most `sms` blocks, or why the Hopper kernels cannot run it.
    pub(super) fn new(
        dev: &Device,
        kernels: Kernels,
        (m, n, k): (usize, usize, usize),
        a: Operand,
        b: Operand,
        sms: u32,
    ) -> Result<Plan, String> {
        if let Some(why) = unsupported(dev, &kernels, k, &a, &b) {
            return Err(why);
        }
        let tiles = m
            .div_ceil(BM)
            .checked_mul(n.div_ceil(BN))
            .and_then(|t| t.checked_mul(a.count))
            .and_then(|t| u32::try_from(t).ok())
            .ok_or_else(|| {
                format!(
                    "{} batches of {m} × {n} are 2^32 tiles of {BM} × {BN} or more (the \
                     persistent kernel counts them in 32 bits)",
                    a.count
                )
            })?;
        Ok(Plan {
            a,
            b,
            blocks: tiles.min(sms).max(1),
        })
    }
}

/// Why the Hopper kernels cannot run on `dev` with these operands, `k`
/// deep (`None`: they can).
fn unsupported(
    dev: &Device,
    kernels: &Kernels,
    k: usize,
    a: &Operand,
    b: &Operand,
) -> Option<String> {
    if !kernels.exist {
        return Some(
            "the type pair has no Hopper kernels (f16/bf16 into f32 or the input type do)".into(),
        );
    }
    if let Some(why) = hopper_unavailable(dev, kernels.shared_bytes) {
        return Some(why);
    }
    if k > MAX_EXTENT {
        return Some(format!("k = {k} is beyond the TMA's 32-bit coordinates"));
    }
    a.unsupported("A").or_else(|| b.unsupported("B"))
}

/// Why `dev` cannot run a kernel of the Hopper module that takes
/// `shared_bytes` of shared memory a block (`None`: it can): it is not of
/// compute capability 9.0, this build left the module out or has no sm_90a
/// variant of it, or the device allows less shared memory a block.
pub(crate) fn hopper_unavailable(dev: &Device, shared_bytes: usize) -> Option<String> {
    let cc = dev.compute_capability();
    if cc != (9, 0) {
        return Some(format!(
            "wgmma and the TMA need compute capability 9.0 (an H100 or H200); this device is {}.{}",
            cc.0, cc.1
        ));
    }
    if let Some(feature) = crate::ptx::HOPPER.left_out {
        return Some(format!(
            "this build of warpforge left the Hopper kernels out (its `{feature}` feature is off)"
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
    None
}
