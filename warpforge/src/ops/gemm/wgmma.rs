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
//! `Wide`), or split along k where their tiles leave SMs idle and the
//! `mma.sync` kernels would split too
//! ([`wgmma_split_k_count`](super::wgmma_split_k_count): [`Split`], the
//! k-ranges as a batch of the f32-output kernel, summed afterwards), and the
//! `mma.sync` kernels run everywhere else.
//!
//! The kernels are persistent: a 1-D grid of one block per SM (at most
//! [`Gemm::sm_limit`](super::Gemm::sm_limit), at most one per tile), each
//! block walking `C`'s 128 × 256 tiles (`TileWalk`), so the tiles must
//! number fewer than 2³².

use crate::{Device, DeviceBuffer, Element, Result, TensorMap};
use warpforge_device::swizzle::Sw128;
use warpforge_kernels_hopper::gemm::{BK, BM, BN, BOX};

/// The tensor maps the Hopper kernels take: batched (dimension 2), boxes
/// of 64 × 64, 128B-swizzled.
pub(super) type OperandMap<'b, T> = TensorMap<'b, T, 3, BOX, BOX, Sw128>;

/// The largest size the kernels' 32-bit box coordinates reach past the
/// matrices by a block tile.
const MAX_EXTENT: usize = i32::MAX as usize - BN;

/// A stored operand's geometry: `rows × cols` row-major, `ld` apart,
/// `count` batches `stride` apart, the first `offset` elements into its
/// buffer.
#[derive(Clone, Copy, Debug)]
pub(super) struct Operand {
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    pub count: usize,
    pub stride: usize,
    pub offset: usize,
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
        TensorMap::new_at(
            buffer,
            self.offset,
            [self.cols, self.rows, self.count],
            &[self.ld, stride],
        )
    }

    /// `count` consecutive k-ranges of this one matrix, `depth` deep, from
    /// k = `start`, as a batch whose stride steps along k: `k_in_cols` says
    /// whether k runs along its stored columns (A not transposed, B
    /// transposed) or its rows.
    /// Each range's extent is its own depth, so the TMA clips every box at
    /// its range's end: no box reads the next range's elements, and the
    /// ranges lie within the matrix (`start + count·depth ≤ k`, which the
    /// caller ensures). `None` if an offset or stride overflows.
    pub(super) fn k_ranges(
        &self,
        k_in_cols: bool,
        start: usize,
        depth: usize,
        count: usize,
    ) -> Option<Operand> {
        let (rows, cols, step) = if k_in_cols {
            (self.rows, depth, 1)
        } else {
            (depth, self.cols, self.ld)
        };
        Some(Operand {
            rows,
            cols,
            ld: self.ld,
            count,
            stride: depth.checked_mul(step)?,
            offset: start.checked_mul(step)?.checked_add(self.offset)?,
        })
    }
}

/// Split-k on the Hopper kernels: k as `ranges` ranges `depth` deep (a
/// multiple of the kernels' k-step, [`BK`]), run as one launch of a batch
/// of `ranges` into as many f32 planes, then the `tail` of k after them
/// (`k − ranges·depth`, less than `ranges·BK`; often 0) as a second launch
/// that adds its product into the first plane (`beta = 1`). The depth is
/// rounded down so that the tail, a launch of the unsplit grid, is
/// shallow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Split {
    pub ranges: usize,
    pub depth: usize,
    pub tail: usize,
}

impl Split {
    /// `k` in at most `ranges` ranges of whole k-steps (fewer when `k` has
    /// fewer than `ranges` steps); `None` when that leaves one range.
    pub(super) fn new(k: usize, ranges: usize) -> Option<Split> {
        let depth = (k / ranges.max(1) / BK).max(1) * BK;
        let ranges = ranges.min(k / depth);
        (ranges > 1).then(|| Split {
            ranges,
            depth,
            tail: k - ranges * depth,
        })
    }
}

/// The Hopper launches of a split GEMM: the ranges' batch, and the tail's
/// launch (`None` without a tail).
pub(super) struct SplitPlan {
    pub split: Split,
    pub ranges: Plan,
    pub tail: Option<Plan>,
}

/// What the type pair brings: whether it has Hopper kernels, and the
/// shared memory they take.
#[derive(Clone, Copy)]
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

    /// The tiles of its grid: `⌈m / 128⌉·⌈n / 256⌉` a batch.
    pub(super) fn tiles(m: usize, n: usize) -> usize {
        m.div_ceil(BM).saturating_mul(n.div_ceil(BN))
    }

    /// The launches of this (one-batch, unsplit) plan's GEMM of `m × n`
    /// split as `split` (`k_in_cols`: whether k runs along A's and B's
    /// stored columns), with at most `sms` blocks each, or why not.
    pub(super) fn split(
        &self,
        dev: &Device,
        kernels: Kernels,
        (m, n): (usize, usize),
        split: Split,
        k_in_cols: (bool, bool),
        sms: u32,
    ) -> Result<SplitPlan, String> {
        let overflow = || format!("the k-ranges of {split:?} overflow a usize");
        let Split {
            ranges,
            depth,
            tail,
        } = split;
        let part = |start, depth, count| {
            let a = self.a.k_ranges(k_in_cols.0, start, depth, count);
            let b = self.b.k_ranges(k_in_cols.1, start, depth, count);
            match (a, b) {
                (Some(a), Some(b)) => Plan::new(dev, kernels, (m, n, depth), a, b, sms),
                _ => Err(overflow()),
            }
        };
        let end = ranges.checked_mul(depth).ok_or_else(overflow)?;
        Ok(SplitPlan {
            split,
            ranges: part(0, depth, ranges)?,
            tail: if tail > 0 {
                Some(part(end, tail, 1)?)
            } else {
                None
            },
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
    let shared_bytes = kernels.shared_bytes;
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
