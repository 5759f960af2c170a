//! The Hopper path of [`Gemm`](super::Gemm): the warp-specialised `wgmma`
//! kernels (`warpforge_kernels_hopper::gemm`, the sm_90a module
//! [`ptx::HOPPER`](crate::ptx::HOPPER)), fed by the TMA from batched tensor
//! maps of `A` and `B`.
//!
//! When it runs (module docs of `gemm`): on a device of compute capability
//! 9.0 whose module variant is there (an H100 or H200, or the emulator of
//! sm_90), for the f16/bf16 pairs into f32 or the input type, without a
//! pinned tile or a pinned split; with leading dimensions (and, for a
//! batch, batch strides) that are multiples of 8 elements (16 bytes: what
//! a tensor map can describe) and sizes within its 32-bit coordinates; and
//! for f32 with TF32, whatever its leading dimensions, on K-major copies
//! ([`tf32`]).
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
//! block walking `C`'s tiles (`TileWalk`), so the tiles must number fewer
//! than 2³². The tiles are 128 × 256, or 128 × 128 where those would leave
//! half the SMs or more idle ([`HopperTile::for_grid`]).

use super::HopperTile;
use crate::{Device, DeviceBuffer, Element, Result, TensorMap};
use warpforge_device::swizzle::Sw128;
use warpforge_kernels_hopper::gemm::{BK, BM, BN, BN_NARROW, BOX};

/// The tensor maps the Hopper kernels take: batched (dimension 2), boxes
/// of `KB` (a stage's K: 64 f16/bf16, 32 tf32) by 64 rows, 128B-swizzled.
pub(super) type OperandMap<'b, T, const KB: usize> = TensorMap<'b, T, 3, KB, BOX, Sw128>;

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
    pub(super) fn map<'b, T: Element, const KB: usize>(
        &self,
        buffer: &'b DeviceBuffer<T>,
    ) -> Result<OperandMap<'b, T, KB>> {
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

impl HopperTile {
    /// Columns of its tile of `C` (both are 128 rows).
    pub const fn columns(self) -> usize {
        match self {
            HopperTile::Wide => BN,
            HopperTile::Narrow => BN_NARROW,
        }
    }

    /// Its tiles of one `m × n` matrix.
    pub(super) fn tiles(self, m: usize, n: usize) -> usize {
        m.div_ceil(BM).saturating_mul(n.div_ceil(self.columns()))
    }

    /// The configuration for `count` batches of `m × n` on `sms` SMs:
    /// narrow where the wide tiles number at most half the SMs (so every
    /// narrow tile, about twice as many, still has an SM of its own, each
    /// doing half the work: 1024 × 2048 × 2048, 64 wide tiles, runs 128 on
    /// 132 SMs; the split-k of 128 × 4096 × 4096 takes 4 ranges of 32 narrow
    /// tiles instead of 8 of 16 wide, half the planes), else wide (its
    /// operand bytes per `wgmma` are 3/4 of the narrow tile's).
    pub(super) fn for_grid(m: usize, n: usize, count: usize, sms: u32) -> HopperTile {
        let wide = HopperTile::Wide.tiles(m, n).saturating_mul(count);
        if wide.saturating_mul(2) <= sms as usize {
            HopperTile::Narrow
        } else {
            HopperTile::Wide
        }
    }
}

/// What the type pair brings: whether it has Hopper kernels, and the
/// shared memory they take, wide and narrow.
#[derive(Clone, Copy)]
pub(super) struct Kernels {
    pub exist: bool,
    pub shared_bytes: [usize; 2],
}

/// A GEMM the Hopper kernels run: its operands' checked geometry, the
/// tile configuration and the persistent grid's blocks.
pub(super) struct Plan {
    pub a: Operand,
    pub b: Operand,
    pub tile: HopperTile,
    pub blocks: u32,
}

impl Plan {
    /// The launch of `m × n × k` (batches: the operands' `count`) on `dev`
    /// in `tile`s with at most `sms` blocks, or why the Hopper kernels
    /// cannot run it.
    pub(super) fn new(
        dev: &Device,
        kernels: Kernels,
        tile: HopperTile,
        (m, n, k): (usize, usize, usize),
        a: Operand,
        b: Operand,
        sms: u32,
    ) -> Result<Plan, String> {
        if let Some(why) = unsupported(dev, &kernels, tile, k, &a, &b) {
            return Err(why);
        }
        let bn = tile.columns();
        let tiles = m
            .div_ceil(BM)
            .checked_mul(n.div_ceil(bn))
            .and_then(|t| t.checked_mul(a.count))
            .and_then(|t| u32::try_from(t).ok())
            .ok_or_else(|| {
                format!(
                    "{} batches of {m} × {n} are 2^32 tiles of {BM} × {bn} or more (the \
                     persistent kernel counts them in 32 bits)",
                    a.count
                )
            })?;
        Ok(Plan {
            a,
            b,
            tile,
            blocks: tiles.min(sms).max(1),
        })
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
                (Some(a), Some(b)) => Plan::new(dev, kernels, self.tile, (m, n, depth), a, b, sms),
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
    tile: HopperTile,
    k: usize,
    a: &Operand,
    b: &Operand,
) -> Option<String> {
    if !kernels.exist {
        return Some(
            "the type pair has no Hopper kernels (f16/bf16 into f32 or the input type do)".into(),
        );
    }
    if let Some(why) = hopper_unavailable(dev, kernels.shared_bytes[tile as usize]) {
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

/// The tf32 Hopper GEMM (`Gemm::tf32` on sm_90): `op(A)` and `op(B)`
/// rounded to tf32 and laid out K-major (`tf32_k_major_{rows,cols}`, into
/// temporaries `m × k'` and `n × k'` per batch, `k'` = `k` rounded up to 8
/// elements and zero past `k`), then the NT kernel
/// (`gemm_wgmma_tf32_f32_nt_128x256x32_s4`, or its 128 × 128 twin) over
/// them into `c`.
pub(super) mod tf32 {
    use super::{HopperTile, Operand};
    use crate::runtime::launch::grid_axis;
    use crate::{Device, DeviceBuffer, Error, LaunchConfig, MatrixMut, Result};
    use warpforge_device::Dim3;
    use warpforge_device::kernel::Kernel;
    use warpforge_kernels_hopper::gemm as hp;
    use warpforge_kernels_hopper::tf32::{
        self as kt, TF32_THREADS, TF32_TILE, tf32_k_major_cols, tf32_k_major_rows,
    };

    /// The GEMM's kernels, wide and narrow (indexed by `HopperTile`).
    pub(in crate::ops::gemm) const KERNELS: [&str; 2] = [
        hp::gemm_wgmma_tf32_f32_nt_128x256x32_s4::NAME,
        hp::gemm_wgmma_tf32_f32_nt_128x128x32_s4::NAME,
    ];
    /// Their shared memory per block.
    pub(in crate::ops::gemm) const SHARED_BYTES: [usize; 2] = [
        hp::gemm_wgmma_tf32_f32_nt_128x256x32_s4::SHARED_BYTES,
        hp::gemm_wgmma_tf32_f32_nt_128x128x32_s4::SHARED_BYTES,
    ];

    /// The K-major copy's row pitch for a depth of `k`: whole 16-byte rows
    /// and more (what [`Operand`]'s tensor-map checks ask: 8 elements).
    pub(in crate::ops::gemm) fn pitch(k: usize) -> Option<usize> {
        k.checked_next_multiple_of(8)
    }

    /// The K-major copy of `rows × k` (`count` batches) as the tf32 kernel's
    /// tensor map sees it.
    pub(in crate::ops::gemm) fn packed(rows: usize, k: usize, count: usize) -> Option<Operand> {
        let ld = pitch(k)?;
        Some(Operand {
            rows,
            cols: k,
            ld,
            count,
            stride: rows.checked_mul(ld)?,
            offset: 0,
        })
    }

    /// A stored operand: the buffer, its leading dimension and batch
    /// stride, and whether its stored rows are `op(X)`'s columns.
    pub(in crate::ops::gemm) struct Source<'b> {
        pub buffer: &'b DeviceBuffer<f32>,
        pub ld: usize,
        pub stride: usize,
        pub transposed: bool,
    }

    /// The K-major copy of `rows × k` (`count` batches), or the error
    /// naming its size.
    fn layout(rows: usize, k: usize, count: usize) -> Result<Operand> {
        packed(rows, k, count).ok_or_else(|| Error::SizeOverflow {
            what: format!("gemm (tf32): a K-major copy of {count} batches of {rows} × {k}"),
        })
    }

    /// `op(X)` (`rows × k`, `count` batches, the caller checked every
    /// extent against `x`) rounded to tf32 (copied as it is unless
    /// `round`), K-major, into a new buffer of `count · rows · k'` elements,
    /// with that buffer's layout.
    fn k_major(
        dev: &Device,
        x: &Source<'_>,
        (rows, k, count): (usize, usize, usize),
        round: bool,
    ) -> Result<(Operand, DeviceBuffer<f32>)> {
        let layout = layout(rows, k, count)?;
        let len = layout
            .stride
            .checked_mul(count)
            .ok_or_else(|| Error::SizeOverflow {
                what: format!("gemm (tf32): a K-major copy of {count} batches of {rows} × {k}"),
            })?;
        let mut y = dev.alloc_for_kernel_output::<f32>(len)?;
        let name = if x.transposed {
            tf32_k_major_cols::NAME
        } else {
            tf32_k_major_rows::NAME
        };
        let limits = dev.limits().max_grid_dim;
        let tiles = |n: usize, axis: usize, what: &'static str| {
            grid_axis(
                name,
                what,
                n.div_ceil(TF32_TILE),
                limits[axis].min(65535),
                "split the GEMM over several calls",
            )
        };
        let grid = Dim3::new(
            tiles(layout.ld, 0, "grid.x (⌈k' / 32⌉)")?,
            tiles(rows, 1, "grid.y (⌈rows / 32⌉)")?,
            grid_axis(
                name,
                "grid.z (batches)",
                count,
                limits[2].min(65535),
                "split the batch",
            )?,
        );
        let cfg = LaunchConfig::new(grid, Dim3::x(TF32_THREADS as u32));
        let out = y.batched_matrix_mut(rows, layout.ld, layout.ld, count, layout.stride)?;
        let args = (x.buffer, x.ld, x.stride, k, u32::from(round), out);
        if x.transposed {
            dev.launch(kt::tf32_k_major_cols, cfg, args)?;
        } else {
            dev.launch(kt::tf32_k_major_rows, cfg, args)?;
        }
        Ok((layout, y))
    }

    /// Whether the kernel reads `x` (`rows × k`, `count` batches) where it
    /// is: its stored rows are K-major (`op(X)`'s rows), and its rows and
    /// batches start on 16 bytes, as a tensor map needs.
    fn in_place(x: &Source<'_>, rows: usize, k: usize, count: usize) -> Option<Operand> {
        let aligned = x.ld.is_multiple_of(4) && (count == 1 || x.stride.is_multiple_of(4));
        (!x.transposed && aligned).then_some(Operand {
            rows,
            cols: k,
            ld: x.ld,
            count,
            stride: x.stride,
            offset: 0,
        })
    }

    /// Where the kernel reads an operand from, as laid out there: the
    /// operand's own buffer, or a K-major copy.
    enum Read {
        InPlace(Operand),
        Copied(Operand, DeviceBuffer<f32>),
    }

    impl Read {
        /// The kernel's tensor map of operand `x` as read from here.
        fn map<'b>(
            &'b self,
            x: &Source<'b>,
        ) -> Result<super::OperandMap<'b, f32, { hp::BK_TF32 }>> {
            match self {
                Read::InPlace(operand) => operand.map(x.buffer),
                Read::Copied(operand, copy) => operand.map(copy),
            }
        }
    }

    /// Runs `C = alpha·op(A)·op(B) + beta·C` on the tf32 kernel (module
    /// docs): `(m, n, k)` and `count` batches, every extent checked by the
    /// caller, the Hopper plan made for the K-major copies ([`packed`]),
    /// its tile configuration `tile` and persistent grid `blocks`. With `truncate` (the host's
    /// `Tf32Rounding::Truncate`) the operands are not rounded: the kernel
    /// reads a K-major operand whose rows start on 16 bytes where it is,
    /// and the others are copied K-major as they are; `wgmma` drops each
    /// element's low 13 fraction bits.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::ops::gemm) fn run(
        dev: &Device,
        (tile, blocks): (HopperTile, u32),
        (m, n, k): (usize, usize, usize),
        count: usize,
        (alpha, beta): (f32, f32),
        a: Source<'_>,
        b: Source<'_>,
        truncate: bool,
        c: MatrixMut<'_, f32>,
    ) -> Result<()> {
        // op(A) is m × k as it is; op(B) is k × n, so its K-major copy is
        // op(B)ᵀ: B's stored rows are op(B)ᵀ's rows when B is transposed.
        let b = Source {
            transposed: !b.transposed,
            ..b
        };
        let read = |x: &Source<'_>, rows: usize| -> Result<Read> {
            match in_place(x, rows, k, count).filter(|_| truncate) {
                Some(operand) => Ok(Read::InPlace(operand)),
                None => k_major(dev, x, (rows, k, count), !truncate)
                    .map(|(layout, copy)| Read::Copied(layout, copy)),
            }
        };
        let (read_a, read_b) = (read(&a, m)?, read(&b, n)?);
        let (map_a, map_b) = (read_a.map(&a)?, read_b.map(&b)?);
        let cfg = LaunchConfig::new(Dim3::x(blocks), Dim3::x(hp::THREADS));
        // `unsupported` refused k past 2^31 − 1.
        let args = (&map_a, &map_b, k as u32, alpha, beta, c);
        match tile {
            HopperTile::Wide => dev.launch(hp::gemm_wgmma_tf32_f32_nt_128x256x32_s4, cfg, args),
            HopperTile::Narrow => dev.launch(hp::gemm_wgmma_tf32_f32_nt_128x128x32_s4, cfg, args),
        }
    }
}
