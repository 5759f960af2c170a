//! Reductions: `sum`, `mean`, `min`, `max`, `argmin`, `argmax`,
//! `sum_of_squares`, `norm2` and `logsumexp`, over a whole buffer or along
//! one axis of a row-major N-d tensor, with numpy's semantics and the same
//! bits on every run and every grid size.
//!
//! ```
//! use warpforge::{Device, reduce::{self, Op, Reduced}};
//! let dev = Device::emulator();
//! let x = dev.upload(&[1.0f32, 5.0, 3.0, 4.0, 2.0, 6.0])?;
//! assert_eq!(reduce::sum(&x)?, 21.0);
//! assert_eq!(reduce::argmax(&x)?, 5);
//! // As a 2×3 matrix: sum each row (axis 1) and find each column's maximum (axis 0).
//! let Reduced::Values(rows) = reduce::reduce(Op::Sum, &x, &[2, 3], Some(1))? else { unreachable!() };
//! assert_eq!(rows.to_host()?, [9.0, 12.0]);
//! let Reduced::Values(cols) = reduce::reduce(Op::Max, &x, &[2, 3], Some(0))? else { unreachable!() };
//! assert_eq!(cols.to_host()?, [4.0, 5.0, 6.0]);
//! # Ok::<(), warpforge::Error>(())
//! ```
//!
//! # Operations and dtypes
//!
//! | op | f32, f64, f16, bf16 | i32, i64, u32 | output | empty input |
//! | --- | --- | --- | --- | --- |
//! | `sum` | ✓ | ✓ (wraps) | input dtype | 0 |
//! | `mean` | ✓ | — | input dtype | NaN |
//! | `min`, `max` | ✓ | ✓ | input dtype | `Error::EmptyReduction` |
//! | `argmin`, `argmax` | ✓ | ✓ | i64 index along the axis | `Error::EmptyReduction` |
//! | `sum_of_squares` | ✓ | — | input dtype | 0 |
//! | `norm2` | ✓ | — | input dtype | 0 |
//! | `logsumexp` | ✓ | — | input dtype | −inf |
//!
//! An op a dtype does not have is `Error::UnsupportedDType`. "Empty" means the
//! reduced axis has length 0 while there is at least one output; a reduction
//! with no outputs (shape `[0, 5]` along axis 1) returns an empty buffer.
//!
//! # Semantics
//!
//! - Accumulators: f32 for f32, f16 and bf16 inputs (widening is exact), f64
//!   for f64, the input's own type for integers. f16/bf16 results are rounded
//!   from the f32 result once, to nearest even.
//! - Integer sums wrap (two's complement, like `wrapping_add`):
//!   `i32::MAX + 1` is `i32::MIN`. They never fail and never saturate.
//! - NaN propagates through `sum`, `mean`, `min`, `max`, `sum_of_squares`,
//!   `norm2` and `logsumexp` (like numpy), and is always the same NaN: Rust's
//!   `f32::NAN` (`0x7fc0_0000`) and `f64::NAN` (`0x7ff8_0000_0000_0000`),
//!   and `0x7fff` for f16 and bf16 results (the GPU's conversion NaN), on
//!   every path, on the GPU and in the emulator, whatever the input NaN's
//!   payload.
//! - `min`/`max` order `−0 < +0`, so `min(+0, −0)` is `−0` whatever the
//!   order of the elements, and the result's bits never depend on the fold order.
//! - `argmin`/`argmax` return the FIRST index of the extreme value. NaN counts
//!   as the extreme (the first NaN wins) and `−0 == +0` (the smaller index
//!   wins), like numpy's `argmin`/`argmax`.
//! - `logsumexp` is `m + ln Σ exp(x − m)` with `m` the maximum: +inf if any
//!   element is +inf, NaN if any is NaN, −inf if all are −inf (or none).
//! - `mean` divides the f32/f64 sum by the count in f64, then rounds once.
//!
//! # Determinism
//!
//! The input is viewed as `[outer, len, inner]` with the reduced axis in the
//! middle (a whole-tensor reduction is `[1, n, 1]`). The axis is cut into
//! fixed units: 512 items per warp when `inner == 1` (the rows kernel:
//! whole-tensor and inner-axis reductions), 64 items per thread otherwise (the
//! columns kernel: outer and middle axes). In the rows kernel's first pass a
//! unit is cut at the buffer's multiples of `W = 16 / element bytes` into
//! groups (the first and last may be partial when rows start mid-vector); lane
//! `l` folds groups `l, l + 32, …` in order, each group's elements in order
//! (later passes: `W = 1`, items `l, l + 32, …`); then a `shuffle_down` tree
//! over 16, 8, 4, 2, 1 lanes (tested bit for bit against a CPU model of this
//! order in `tests/reduce_vector.rs`). Each unit is folded in a fixed order
//! and writes one partial state; passes over the partials repeat until one
//! state per output is left. The grid only decides which warp or thread
//! handles which unit, so the order of every float operation depends only on
//! the shape: the same input gives the same bits on every run and for every
//! [`ReduceOptions::max_blocks`] (tested at 1, 3, 7, 64 and 1024 blocks and
//! the device's own wave, [`wave_blocks`]: its SM count × blocks per SM from
//! occupancy, the default), on
//! the GPU and in the emulator alike (NaNs included: above). The only
//! atomics are the tickets of the fused path below, which decide which
//! block folds a combine unit, never in what order (the combine unit's
//! states are folded by their indices, as the combine pass does); the small path's block combines its
//! warps' unit states in the combine pass's order, whichever warp folded
//! them.
//!
//! # Launches and memory
//!
//! Three paths, the same bits on each (tested against each other for every
//! op and dtype at the edges of each: [`ReduceOptions::path`] forces one);
//! [`Layout::path`] says which one a shape takes:
//!
//! - **Small** ([`Path::Small`]): a rows reduction (whole tensor, or inner
//!   axis) whose rows have at most [`SMALL_MAX_LEN`] = 2¹⁶ items runs in ONE
//!   launch that writes the outputs, the finish included (mean's division,
//!   norm2's root, logsumexp's `m + ln s`, f16/bf16 rounding, the arg
//!   index), with no partial states in global memory and no scratch. Rows of
//!   one unit (≤ 512 items) take a warp each, so many short rows (`[65536,
//!   64]`) are one launch of warps that each fold one row; rows that touch
//!   at most L ≤ 16 16-byte groups share a warp, 32 / L rows of L lanes each
//!   (`[1 << 20, 8]` f32: 8 rows of 4 lanes per warp, where a warp per row
//!   left 30 of its 32 lanes idle), with the bits of a warp per row; longer rows take a
//!   block of 512 threads each, its 16 warps folding the row's units and
//!   leaving their states in shared memory, where warp 0 folds them as the
//!   combine pass would. Why 2¹⁶: see [`SMALL_MAX_LEN`].
//! - **Fused** ([`Path::Fused`]): every longer rows reduction (a whole
//!   tensor of 2¹⁶ + 1 elements or 2²⁸, rows of any length) runs in ONE
//!   launch too. The blocks grid-stride over tasks of consecutive units
//!   (a power of two of them, at most 512, sized from the grid) and write
//!   their units' states to the scratch; then a block fences and takes a
//!   ticket of the combine unit (512 states) its task feeds, and the block
//!   that takes a combine unit's last ticket folds that unit's states (the
//!   same fold as the combine pass) and takes a ticket one level up, and so
//!   on: "last block done" at every level of the combine tree, the row's
//!   last level finished and written by the block that completes it. A
//!   2²⁸-element sum: 2¹⁹ units, 1024 level-1 and 2 level-2 combines, each
//!   by one warp, a few µs of serial work after the data is read (where the
//!   multi-pass path took three more launches).
//! - **Multi-pass** ([`Path::MultiPass`]): column reductions launch a pass
//!   per level, then a `finish_*` kernel (one thread per output); rows
//!   reductions take it only when forced (the tests check the other paths
//!   against it).
//!
//! The partial states of the last two live in scratch buffers the device
//! keeps between calls (no allocation and no memset per call), and the
//! result comes from the device's cache of kernel outputs, keyed by element
//! type and length, to which a dropped result goes back (no memset either:
//! the kernel writes every output). A warm call (a result of its type and
//! length dropped before it) is one launch on the stream, no allocation, no
//! memset and no synchronisation (counted with
//! [`crate::Device::work_done_by`]). [`crate::Device::release_scratch`]
//! frees both caches.
//!
//! The rule for both caches: an entry is out of the cache while a call (or
//! a result) holds it, so two calls never share one, from any number of
//! threads; the next borrower's work is ordered after the work queued with
//! it (the same stream, which every reduction uses; on another stream, the
//! buffer's events: a result handed to a kernel on another stream and then
//! dropped is not written again before that kernel has read it).
//!
//! The fused path's tickets live in a scratch buffer of their own that
//! only ever holds tickets, every one 0 between launches: each combine
//! unit's ticket is taken once per task or state that feeds it, and the
//! block that takes the last one sets it back to 0, so a launch that
//! completes leaves every ticket it used at 0 (tested), and the next call
//! needs no memset (which would cost a second operation per call). Why
//! that is safe:
//! - Two calls never share tickets while either is in flight: the device
//!   lends a scratch buffer to one call at a time, and the next borrower's
//!   work is ordered after it (the same stream, which every reduction uses;
//!   on another stream, the buffer's events).
//! - A launch that does not complete (a fault, or a kernel aborted) can
//!   leave tickets part-counted, but a kernel fault poisons the device:
//!   every later call is `ContextPoisoned` until [`crate::Device::reset`],
//!   which makes a new device with an empty scratch cache (new, zeroed
//!   tickets). No call ever runs on tickets a failed launch left.
//! - States are never read as tickets: a states buffer is never lent for
//!   tickets (its own cache key), so a shape's tickets are 0 whatever
//!   other shapes' states were left in other buffers.
//!
//! # Why these kernel shapes
//!
//! - Rows kernel (`inner == 1`): a row is contiguous, so each lane reads 16
//!   bytes at a time (one vector load: 4 f32, 8 f16/bf16, 2 f64) and a warp
//!   512 consecutive bytes per load; a lane folds 16 elements of its unit, all
//!   its loads in flight at once, and a 5-level `shuffle_down` tree combines the
//!   lanes. No shared memory: the warps of a block are independent within
//!   a task (a few units each), so all of them stream memory at once; a
//!   barrier per task hands the block's states to its ticket (fused path).
//! - Columns kernel (`inner > 1`): the reduced elements of one output are
//!   `inner` apart, so a warp reading one row of the reduction would touch 32
//!   different cache lines. Instead each thread takes 16 bytes of adjacent
//!   outputs (4 f32, 8 f16/bf16, 2 f64: one vector load per row),
//!   consecutive threads the next 16 bytes, and each folds 64 rows of its
//!   columns: a warp reads 512 consecutive bytes, four whole 128-byte lines,
//!   per row. That needs every row's columns to start at a 16-byte boundary,
//!   as they do when `inner` is a multiple of that count; otherwise each
//!   thread takes one column (scalar loads, a warp reading 32 consecutive
//!   elements of a row). Each column is folded alone in index order, so the
//!   grouping changes no bit. Every pass reads its input through `Global`
//!   loads, which the emulator's memory profile counts.
//!
//! # Error bounds
//!
//! [`Layout::fold_depth`] is `D`, the most roundings any element goes through
//! on its way to its output: per rows pass over `L` items in groups of `W`
//! (see Determinism), with `G = ⌈min(L, 512)/W⌉` groups per unit (one more,
//! up to `min(L, 512)`, when rows start mid-vector), `min(L, W·⌈G/32⌉) − 1`
//! sequential folds in a lane plus `⌈log₂ min(G, 32)⌉` tree levels; per columns pass, `min(L, 64) − 1` sequential folds; passes
//! repeat with `L ← ⌈L/512⌉` (rows) or `⌈L/64⌉` (columns) while `L > 1`. With
//! `u` the accumulator's unit roundoff (2⁻²⁴ for f32, f16 and bf16 inputs,
//! 2⁻⁵³ for f64) and `γ(k) = k·u / (1 − k·u)`, the value before the final
//! rounding to the output dtype is within, of the exact result:
//!
//! | op | bound |
//! | --- | --- |
//! | `sum` | `γ(D)·Σ|xᵢ|` |
//! | `sum_of_squares` | `γ(D + 1)·Σxᵢ² + n·η` (one more rounding for the square; `η` = half the smallest subnormal, for squares that underflow) |
//! | `mean` | the `sum` bound `/ n`, then one f64 division |
//! | `norm2` | `√` of the `sum_of_squares` interval, correctly rounded |
//! | `logsumexp` | `1.01·ε + 2u·ln n + u·|result|`, `ε = γ(D·(4 + ln n))` the relative error of `Σexp`: per fold `exp` (1 ulp), the rounded `x − m` (at most `u·ln n` relative to the sum), one multiply and one add |
//! | `min`, `max`, `argmin`, `argmax`, integer `sum` | exact |
//!
//! Integer sums are exact modulo 2³² or 2⁶⁴. The references and the checks
//! that apply these bounds are in [`crate::reference::reduce`]: the kernel's
//! result must lie between the exact interval's ends rounded to the output
//! dtype (rounding is monotonic, so this also covers f16/bf16 outputs and
//! overflow to infinity).

use crate::{DeviceBuffer, Element, Error, LaunchConfig, Result};
use half::{bf16, f16};
use warpforge_device::Dim3;
use warpforge_kernels::reduce::{
    self as k, BLOCK_THREADS, COL_UNIT, ROW_UNIT, SMALL_BLOCK_THREADS, SMALL_MAX_UNITS, finish,
};

/// A reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `Σx` (integers wrap).
    Sum,
    /// `Σx / n` (floats only).
    Mean,
    /// The smallest element (`−0 < +0`; NaN propagates).
    Min,
    /// The largest element (`−0 < +0`; NaN propagates).
    Max,
    /// The first index of the smallest element (NaN counts as smallest).
    ArgMin,
    /// The first index of the largest element (NaN counts as largest).
    ArgMax,
    /// `Σx²` (floats only).
    SumOfSquares,
    /// `√Σx²` (floats only).
    Norm2,
    /// `ln Σ exp(x)`, computed without overflow (floats only).
    LogSumExp,
}

impl Op {
    /// Every reduction, in declaration order.
    pub const ALL: [Op; 9] = [
        Op::Sum,
        Op::Mean,
        Op::Min,
        Op::Max,
        Op::ArgMin,
        Op::ArgMax,
        Op::SumOfSquares,
        Op::Norm2,
        Op::LogSumExp,
    ];

    /// The op's name: `sum`, `mean`, `min`, `max`, `argmin`, `argmax`,
    /// `sum_of_squares`, `norm2` or `logsumexp`.
    ///
    /// ```
    /// use warpforge::reduce::Op;
    /// assert_eq!(Op::SumOfSquares.name(), "sum_of_squares");
    /// assert!(Op::ALL.iter().all(|&op| Op::from_name(op.name()) == Some(op)));
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Op::Sum => "sum",
            Op::Mean => "mean",
            Op::Min => "min",
            Op::Max => "max",
            Op::ArgMin => "argmin",
            Op::ArgMax => "argmax",
            Op::SumOfSquares => "sum_of_squares",
            Op::Norm2 => "norm2",
            Op::LogSumExp => "logsumexp",
        }
    }

    /// The op named `s` (as [`Op::name`] writes it), if any.
    ///
    /// ```
    /// use warpforge::reduce::Op;
    /// assert_eq!(Op::from_name("logsumexp"), Some(Op::LogSumExp));
    /// assert_eq!(Op::from_name("median"), None);
    /// ```
    pub fn from_name(s: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.name() == s)
    }

    /// Whether the op returns indices (`argmin`, `argmax`) rather than values.
    ///
    /// ```
    /// use warpforge::reduce::Op;
    /// assert!(Op::ArgMax.returns_indices() && !Op::Max.returns_indices());
    /// ```
    pub fn returns_indices(self) -> bool {
        matches!(self, Op::ArgMin | Op::ArgMax)
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// The ops integers support.
const INT_OPS: &str = "sum, min, max, argmin, argmax";
/// The ops floats support.
const FLOAT_OPS: &str = "sum, mean, min, max, argmin, argmax, sum_of_squares, norm2, logsumexp";

/// One pass over `[rows, len]` (rows kernel) or `[outer, len, inner]`
/// (columns kernel). Internal to the dispatch of [`Reducible`].
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// The rows kernel.
    Rows {
        /// Rows.
        rows: u64,
        /// Items per row.
        len: u64,
    },
    /// The columns kernel.
    Cols {
        /// Outer extent.
        outer: u64,
        /// Items along the reduced axis.
        len: u64,
        /// Inner extent.
        inner: u64,
    },
}

impl Pass {
    /// States the pass writes (one per unit of work), and the blocks that
    /// would give each unit its warp (rows) or each group of `width` columns
    /// its thread (columns: `width` is 16 bytes of the pass's items, 1 for
    /// states). (At most the input's element count for a pass
    /// [`reduce_with`] runs; checked all the same.)
    fn units(self, width: u64) -> Result<(u64, u64)> {
        let overflow = || Error::SizeOverflow {
            what: format!("reduce: the units of work of {self:?}"),
        };
        match self {
            Pass::Rows { rows, len } => {
                let units = rows
                    .checked_mul(len.div_ceil(ROW_UNIT))
                    .ok_or_else(overflow)?;
                Ok((units, units.div_ceil(u64::from(BLOCK_THREADS) / 32)))
            }
            Pass::Cols { outer, len, inner } => {
                let rows = outer
                    .checked_mul(len.div_ceil(COL_UNIT))
                    .ok_or_else(overflow)?;
                let units = rows.checked_mul(inner).ok_or_else(overflow)?;
                let threads = rows * inner.div_ceil(width.max(1)); // at most `units`
                Ok((units, threads.div_ceil(u64::from(BLOCK_THREADS))))
            }
        }
    }

    /// The same shape with the reduced axis cut to this pass's units.
    fn next(self) -> Pass {
        match self {
            Pass::Rows { rows, len } => Pass::Rows {
                rows,
                len: len.div_ceil(ROW_UNIT),
            },
            Pass::Cols { outer, len, inner } => Pass::Cols {
                outer,
                len: len.div_ceil(COL_UNIT),
                inner,
            },
        }
    }

    fn len(self) -> u64 {
        match self {
            Pass::Rows { len, .. } | Pass::Cols { len, .. } => len,
        }
    }
}

/// Element types with reduction kernels: f32, f64, f16, bf16 (every op) and
/// i32, i64, u32 (`sum`, `min`, `max`, `argmin`, `argmax`). Sealed.
pub trait Reducible: Element + sealed::Sealed {
    /// Whether `op` has kernels for this dtype.
    ///
    /// ```
    /// use warpforge::reduce::{Op, Reducible};
    /// assert!(f32::supports(Op::Mean) && !i32::supports(Op::Mean));
    /// ```
    fn supports(op: Op) -> bool;

    /// The ops this dtype supports, for messages.
    #[doc(hidden)]
    const SUPPORTED: &'static str;

    /// Elements per group the element kernels read as one 16-byte vector
    /// ([`k::Input::WIDTH`]): the host sizes their grids by it.
    #[doc(hidden)]
    const WIDTH: u64;

    /// The output of `op` over no elements, if it has one.
    #[doc(hidden)]
    fn empty_result(op: Op) -> Option<Self>;

    /// Launches the first pass of `op` (elements → states).
    #[doc(hidden)]
    fn pass_elements(
        op: Op,
        x: &DeviceBuffer<Self>,
        pass: Pass,
        out: &mut DeviceBuffer<u64>,
        cfg: LaunchConfig,
    ) -> Result<()>;

    /// Launches the one-launch reduction of `op` over `pass` (rows or
    /// columns) on `path` ([`OneLaunch`]), finished: one output per row or
    /// column.
    #[doc(hidden)]
    fn pass_one_launch(
        op: Op,
        x: &DeviceBuffer<Self>,
        pass: Pass,
        path: OneLaunch<'_>,
        cfg: LaunchConfig,
    ) -> Result<Reduced<Self>>;

    /// Launches a pass of `op` over the states of an earlier one.
    #[doc(hidden)]
    fn pass_states(
        op: Op,
        states: &DeviceBuffer<u64>,
        pass: Pass,
        out: &mut DeviceBuffer<u64>,
        cfg: LaunchConfig,
    ) -> Result<()>;

    /// Launches the finish of a value-returning `op`; `count` elements per state.
    #[doc(hidden)]
    fn finish(
        op: Op,
        states: &DeviceBuffer<u64>,
        count: u64,
        out: &mut DeviceBuffer<Self>,
        cfg: LaunchConfig,
    ) -> Result<()>;
}

fn unsupported<T: Reducible>(op: Op) -> Error {
    Error::UnsupportedDType {
        op: op.name(),
        dtype: T::DTYPE.name(),
        supported: T::SUPPORTED,
    }
}

macro_rules! elements {
    ($name:ident, $t:ty: $($op:pat => { $rows:path, $cols:path }),* $(,)?) => {
        fn $name(
            op: Op,
            x: &DeviceBuffer<$t>,
            pass: Pass,
            out: &mut DeviceBuffer<u64>,
            cfg: LaunchConfig,
        ) -> Result<()> {
            let dev = x.device();
            #[allow(unreachable_patterns)]
            match (op, pass) {
                $(
                    ($op, Pass::Rows { rows, len }) => dev.launch($rows, cfg, (x, rows, len, out)),
                    ($op, Pass::Cols { outer, len, inner }) => {
                        dev.launch($cols, cfg, (x, outer, len, inner, out))
                    }
                )*
                _ => Err(unsupported::<$t>(op)),
            }
        }
    };
}

macro_rules! states {
    ($name:ident: $($op:pat => { $rows:path, $cols:path }),* $(,)?) => {
        fn $name(
            op: Op,
            x: &DeviceBuffer<u64>,
            pass: Pass,
            out: &mut DeviceBuffer<u64>,
            cfg: LaunchConfig,
        ) -> Result<()> {
            let dev = x.device();
            #[allow(unreachable_patterns)]
            match (op, pass) {
                $(
                    ($op, Pass::Rows { rows, len }) => dev.launch($rows, cfg, (x, rows, len, out)),
                    ($op, Pass::Cols { outer, len, inner }) => {
                        dev.launch($cols, cfg, (x, outer, len, inner, out))
                    }
                )*
                _ => Err(Error::ShapeMismatch {
                    op: "reduce",
                    detail: format!("no state kernels for {op}"),
                }),
            }
        }
    };
}

/// The `finish` code of a float op.
fn finish_code(op: Op) -> u32 {
    match op {
        Op::Mean => finish::MEAN,
        Op::Norm2 => finish::NORM2,
        Op::LogSumExp => finish::LOGSUMEXP,
        _ => finish::VALUE,
    }
}

macro_rules! float_reducible {
    ($($t:ty: $elements:ident, $one_launch:ident, $combine:ident, $finish:path, $from_f32:expr;)*) => { $(
        impl sealed::Sealed for $t {}
        impl Reducible for $t {
            fn supports(_: Op) -> bool {
                true
            }
            const SUPPORTED: &'static str = FLOAT_OPS;
            const WIDTH: u64 = <$t as k::Input>::WIDTH;
            fn empty_result(op: Op) -> Option<Self> {
                match op {
                    Op::Sum | Op::SumOfSquares | Op::Norm2 => Some($from_f32(0.0)),
                    Op::Mean => Some($from_f32(f32::NAN)),
                    Op::LogSumExp => Some($from_f32(f32::NEG_INFINITY)),
                    _ => None,
                }
            }
            fn pass_elements(
                op: Op,
                x: &DeviceBuffer<Self>,
                pass: Pass,
                out: &mut DeviceBuffer<u64>,
                cfg: LaunchConfig,
            ) -> Result<()> {
                $elements(op, x, pass, out, cfg)
            }
            fn pass_one_launch(
                op: Op,
                x: &DeviceBuffer<Self>,
                pass: Pass,
                path: OneLaunch<'_>,
                cfg: LaunchConfig,
            ) -> Result<Reduced<Self>> {
                $one_launch(op, x, pass, path, cfg)
            }
            fn pass_states(
                op: Op,
                states: &DeviceBuffer<u64>,
                pass: Pass,
                out: &mut DeviceBuffer<u64>,
                cfg: LaunchConfig,
            ) -> Result<()> {
                $combine(op, states, pass, out, cfg)
            }
            fn finish(
                op: Op,
                states: &DeviceBuffer<u64>,
                count: u64,
                out: &mut DeviceBuffer<Self>,
                cfg: LaunchConfig,
            ) -> Result<()> {
                let dev = states.device();
                dev.launch($finish, cfg, (states, finish_code(op), count, out))
            }
        }
    )* };
}

float_reducible! {
    f32: elements_f32, one_launch_f32, combine_f32, k::finish_f32, std::convert::identity;
    f64: elements_f64, one_launch_f64, combine_f64, k::finish_f64, f64::from;
    f16: elements_f16, one_launch_f16, combine_f32, k::finish_f32_to_f16, f16::from_f32;
    bf16: elements_bf16, one_launch_bf16, combine_f32, k::finish_f32_to_bf16, bf16::from_f32;
}

macro_rules! int_reducible {
    ($($t:ty: $elements:ident, $one_launch:ident, $combine:ident, $finish:path;)*) => { $(
        impl sealed::Sealed for $t {}
        impl Reducible for $t {
            fn supports(op: Op) -> bool {
                matches!(op, Op::Sum | Op::Min | Op::Max | Op::ArgMin | Op::ArgMax)
            }
            const SUPPORTED: &'static str = INT_OPS;
            const WIDTH: u64 = <$t as k::Input>::WIDTH;
            fn empty_result(op: Op) -> Option<Self> {
                (op == Op::Sum).then_some(0)
            }
            fn pass_elements(
                op: Op,
                x: &DeviceBuffer<Self>,
                pass: Pass,
                out: &mut DeviceBuffer<u64>,
                cfg: LaunchConfig,
            ) -> Result<()> {
                $elements(op, x, pass, out, cfg)
            }
            fn pass_one_launch(
                op: Op,
                x: &DeviceBuffer<Self>,
                pass: Pass,
                path: OneLaunch<'_>,
                cfg: LaunchConfig,
            ) -> Result<Reduced<Self>> {
                $one_launch(op, x, pass, path, cfg)
            }
            fn pass_states(
                op: Op,
                states: &DeviceBuffer<u64>,
                pass: Pass,
                out: &mut DeviceBuffer<u64>,
                cfg: LaunchConfig,
            ) -> Result<()> {
                $combine(op, states, pass, out, cfg)
            }
            fn finish(
                _: Op,
                states: &DeviceBuffer<u64>,
                _: u64,
                out: &mut DeviceBuffer<Self>,
                cfg: LaunchConfig,
            ) -> Result<()> {
                states.device().launch($finish, cfg, (states, out))
            }
        }
    )* };
}

int_reducible! {
    i32: elements_i32, one_launch_i32, combine_i32, k::finish_i32;
    i64: elements_i64, one_launch_i64, combine_i64, k::finish_i64;
    u32: elements_u32, one_launch_u32, combine_u32, k::finish_u32;
}

elements!(elements_f32, f32:
            Op::Sum | Op::Mean => { k::reduce_rows_sum_f32, k::reduce_cols_sum_f32 },
            Op::SumOfSquares | Op::Norm2 => { k::reduce_rows_sumsq_f32, k::reduce_cols_sumsq_f32 },
            Op::Min => { k::reduce_rows_min_f32, k::reduce_cols_min_f32 },
            Op::Max => { k::reduce_rows_max_f32, k::reduce_cols_max_f32 },
            Op::ArgMin => { k::reduce_rows_argmin_f32, k::reduce_cols_argmin_f32 },
            Op::ArgMax => { k::reduce_rows_argmax_f32, k::reduce_cols_argmax_f32 },
            Op::LogSumExp => { k::reduce_rows_lse_f32, k::reduce_cols_lse_f32 }
);

elements!(elements_f64, f64:
            Op::Sum | Op::Mean => { k::reduce_rows_sum_f64, k::reduce_cols_sum_f64 },
            Op::SumOfSquares | Op::Norm2 => { k::reduce_rows_sumsq_f64, k::reduce_cols_sumsq_f64 },
            Op::Min => { k::reduce_rows_min_f64, k::reduce_cols_min_f64 },
            Op::Max => { k::reduce_rows_max_f64, k::reduce_cols_max_f64 },
            Op::ArgMin => { k::reduce_rows_argmin_f64, k::reduce_cols_argmin_f64 },
            Op::ArgMax => { k::reduce_rows_argmax_f64, k::reduce_cols_argmax_f64 },
            Op::LogSumExp => { k::reduce_rows_lse_f64, k::reduce_cols_lse_f64 }
);

elements!(elements_f16, f16:
            Op::Sum | Op::Mean => { k::reduce_rows_sum_f16, k::reduce_cols_sum_f16 },
            Op::SumOfSquares | Op::Norm2 => { k::reduce_rows_sumsq_f16, k::reduce_cols_sumsq_f16 },
            Op::Min => { k::reduce_rows_min_f16, k::reduce_cols_min_f16 },
            Op::Max => { k::reduce_rows_max_f16, k::reduce_cols_max_f16 },
            Op::ArgMin => { k::reduce_rows_argmin_f16, k::reduce_cols_argmin_f16 },
            Op::ArgMax => { k::reduce_rows_argmax_f16, k::reduce_cols_argmax_f16 },
            Op::LogSumExp => { k::reduce_rows_lse_f16, k::reduce_cols_lse_f16 }
);

elements!(elements_bf16, bf16:
            Op::Sum | Op::Mean => { k::reduce_rows_sum_bf16, k::reduce_cols_sum_bf16 },
            Op::SumOfSquares | Op::Norm2 => { k::reduce_rows_sumsq_bf16, k::reduce_cols_sumsq_bf16 },
            Op::Min => { k::reduce_rows_min_bf16, k::reduce_cols_min_bf16 },
            Op::Max => { k::reduce_rows_max_bf16, k::reduce_cols_max_bf16 },
            Op::ArgMin => { k::reduce_rows_argmin_bf16, k::reduce_cols_argmin_bf16 },
            Op::ArgMax => { k::reduce_rows_argmax_bf16, k::reduce_cols_argmax_bf16 },
            Op::LogSumExp => { k::reduce_rows_lse_bf16, k::reduce_cols_lse_bf16 }
);

elements!(elements_i32, i32:
            Op::Sum | Op::Mean => { k::reduce_rows_sum_i32, k::reduce_cols_sum_i32 },
            Op::Min => { k::reduce_rows_min_i32, k::reduce_cols_min_i32 },
            Op::Max => { k::reduce_rows_max_i32, k::reduce_cols_max_i32 },
            Op::ArgMin => { k::reduce_rows_argmin_i32, k::reduce_cols_argmin_i32 },
            Op::ArgMax => { k::reduce_rows_argmax_i32, k::reduce_cols_argmax_i32 }
);

elements!(elements_i64, i64:
            Op::Sum | Op::Mean => { k::reduce_rows_sum_i64, k::reduce_cols_sum_i64 },
            Op::Min => { k::reduce_rows_min_i64, k::reduce_cols_min_i64 },
            Op::Max => { k::reduce_rows_max_i64, k::reduce_cols_max_i64 },
            Op::ArgMin => { k::reduce_rows_argmin_i64, k::reduce_cols_argmin_i64 },
            Op::ArgMax => { k::reduce_rows_argmax_i64, k::reduce_cols_argmax_i64 }
);

elements!(elements_u32, u32:
            Op::Sum | Op::Mean => { k::reduce_rows_sum_u32, k::reduce_cols_sum_u32 },
            Op::Min => { k::reduce_rows_min_u32, k::reduce_cols_min_u32 },
            Op::Max => { k::reduce_rows_max_u32, k::reduce_cols_max_u32 },
            Op::ArgMin => { k::reduce_rows_argmin_u32, k::reduce_cols_argmin_u32 },
            Op::ArgMax => { k::reduce_rows_argmax_u32, k::reduce_cols_argmax_u32 }
);

states!(combine_f32:
            Op::Sum | Op::Mean => { k::combine_rows_sum_f32, k::combine_cols_sum_f32 },
            Op::SumOfSquares | Op::Norm2 => { k::combine_rows_sum_f32, k::combine_cols_sum_f32 },
            Op::Min => { k::combine_rows_min_f32, k::combine_cols_min_f32 },
            Op::Max => { k::combine_rows_max_f32, k::combine_cols_max_f32 },
            Op::ArgMin => { k::combine_rows_argmin_f32, k::combine_cols_argmin_f32 },
            Op::ArgMax => { k::combine_rows_argmax_f32, k::combine_cols_argmax_f32 },
            Op::LogSumExp => { k::combine_rows_lse_f32, k::combine_cols_lse_f32 }
);

states!(combine_f64:
            Op::Sum | Op::Mean => { k::combine_rows_sum_f64, k::combine_cols_sum_f64 },
            Op::SumOfSquares | Op::Norm2 => { k::combine_rows_sum_f64, k::combine_cols_sum_f64 },
            Op::Min => { k::combine_rows_min_f64, k::combine_cols_min_f64 },
            Op::Max => { k::combine_rows_max_f64, k::combine_cols_max_f64 },
            Op::ArgMin => { k::combine_rows_argmin_f64, k::combine_cols_argmin_f64 },
            Op::ArgMax => { k::combine_rows_argmax_f64, k::combine_cols_argmax_f64 },
            Op::LogSumExp => { k::combine_rows_lse_f64, k::combine_cols_lse_f64 }
);

states!(combine_i32:
            Op::Sum | Op::Mean => { k::combine_rows_sum_i32, k::combine_cols_sum_i32 },
            Op::Min => { k::combine_rows_min_i32, k::combine_cols_min_i32 },
            Op::Max => { k::combine_rows_max_i32, k::combine_cols_max_i32 },
            Op::ArgMin => { k::combine_rows_argmin_i32, k::combine_cols_argmin_i32 },
            Op::ArgMax => { k::combine_rows_argmax_i32, k::combine_cols_argmax_i32 }
);

states!(combine_i64:
            Op::Sum | Op::Mean => { k::combine_rows_sum_i64, k::combine_cols_sum_i64 },
            Op::Min => { k::combine_rows_min_i64, k::combine_cols_min_i64 },
            Op::Max => { k::combine_rows_max_i64, k::combine_cols_max_i64 },
            Op::ArgMin => { k::combine_rows_argmin_i64, k::combine_cols_argmin_i64 },
            Op::ArgMax => { k::combine_rows_argmax_i64, k::combine_cols_argmax_i64 }
);

states!(combine_u32:
            Op::Sum | Op::Mean => { k::combine_rows_sum_u32, k::combine_cols_sum_u32 },
            Op::Min => { k::combine_rows_min_u32, k::combine_cols_min_u32 },
            Op::Max => { k::combine_rows_max_u32, k::combine_cols_max_u32 },
            Op::ArgMin => { k::combine_rows_argmin_u32, k::combine_cols_argmin_u32 },
            Op::ArgMax => { k::combine_rows_argmax_u32, k::combine_cols_argmax_u32 }
);

/// Which one-launch kernel [`Reducible::pass_one_launch`] runs.
#[doc(hidden)]
#[derive(Debug)]
pub enum OneLaunch<'a> {
    /// `reduce_small_*` ([`Path::Small`]).
    Small,
    /// `reduce_fused_*` ([`Path::Fused`]), with its scratch: the tickets
    /// (0 between launches) and the partial states.
    Fused {
        /// The tickets, every one 0.
        tickets: &'a mut DeviceBuffer<u64>,
        /// The partial states.
        states: &'a mut DeviceBuffer<u64>,
    },
}

macro_rules! one_launch {
    ($name:ident, $t:ty:
        values { $($op:pat => $small:path, $fused:path, $cols:path;)* }
        indices { $($iop:pat => $ismall:path, $ifused:path, $icols:path;)* }
    ) => {
        fn $name(
            op: Op,
            x: &DeviceBuffer<$t>,
            pass: Pass,
            path: OneLaunch<'_>,
            cfg: LaunchConfig,
        ) -> Result<Reduced<$t>> {
            let dev = x.device();
            // At most x.len() outputs (every output has an element).
            let outputs = match pass {
                Pass::Rows { rows, .. } => Some(rows),
                Pass::Cols { outer, inner, .. } => outer.checked_mul(inner),
            };
            let outputs = outputs
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| Error::SizeOverflow {
                    what: format!("reduce: the outputs of {pass:?}"),
                })?;
            let code = finish_code(op);
            // Allocates the output (no memset: the kernel writes every
            // element) and launches `$small`, `$fused` or `$cols` into it.
            macro_rules! launch {
                ($out:ty, $s:path, $f:path, $c:path) => {{
                    let mut out = dev.cached_output::<$out>(outputs)?;
                    match (path, pass) {
                        (OneLaunch::Small, Pass::Rows { rows, len }) => {
                            dev.launch($s, cfg, (x, rows, len, code, &mut out))?
                        }
                        (OneLaunch::Fused { tickets, states }, Pass::Rows { rows, len }) => {
                            dev.launch($f, cfg, (x, rows, len, code, tickets, states, &mut out))?
                        }
                        (OneLaunch::Fused { tickets, states }, Pass::Cols { outer, len, inner }) => {
                            let args = (x, outer, len, inner, code, tickets, states, &mut out);
                            dev.launch($c, cfg, args)?
                        }
                        (OneLaunch::Small, Pass::Cols { .. }) => {
                            unreachable!("Layout::path never takes the small path for columns")
                        }
                    }
                    out
                }};
            }
            #[allow(unreachable_patterns)]
            match op {
                $($op => Ok(Reduced::Values(launch!($t, $small, $fused, $cols))),)*
                $($iop => Ok(Reduced::Indices(launch!(i64, $ismall, $ifused, $icols))),)*
                _ => Err(unsupported::<$t>(op)),
            }
        }
    };
}

one_launch!(one_launch_f32, f32:
    values {
        Op::Sum | Op::Mean => k::reduce_small_sum_f32, k::reduce_fused_sum_f32, k::reduce_fused_cols_sum_f32;
        Op::SumOfSquares | Op::Norm2 => k::reduce_small_sumsq_f32, k::reduce_fused_sumsq_f32, k::reduce_fused_cols_sumsq_f32;
        Op::Min => k::reduce_small_min_f32, k::reduce_fused_min_f32, k::reduce_fused_cols_min_f32;
        Op::Max => k::reduce_small_max_f32, k::reduce_fused_max_f32, k::reduce_fused_cols_max_f32;
        Op::LogSumExp => k::reduce_small_lse_f32, k::reduce_fused_lse_f32, k::reduce_fused_cols_lse_f32;
    }
    indices {
        Op::ArgMin => k::reduce_small_argmin_f32, k::reduce_fused_argmin_f32, k::reduce_fused_cols_argmin_f32;
        Op::ArgMax => k::reduce_small_argmax_f32, k::reduce_fused_argmax_f32, k::reduce_fused_cols_argmax_f32;
    }
);

one_launch!(one_launch_f64, f64:
    values {
        Op::Sum | Op::Mean => k::reduce_small_sum_f64, k::reduce_fused_sum_f64, k::reduce_fused_cols_sum_f64;
        Op::SumOfSquares | Op::Norm2 => k::reduce_small_sumsq_f64, k::reduce_fused_sumsq_f64, k::reduce_fused_cols_sumsq_f64;
        Op::Min => k::reduce_small_min_f64, k::reduce_fused_min_f64, k::reduce_fused_cols_min_f64;
        Op::Max => k::reduce_small_max_f64, k::reduce_fused_max_f64, k::reduce_fused_cols_max_f64;
        Op::LogSumExp => k::reduce_small_lse_f64, k::reduce_fused_lse_f64, k::reduce_fused_cols_lse_f64;
    }
    indices {
        Op::ArgMin => k::reduce_small_argmin_f64, k::reduce_fused_argmin_f64, k::reduce_fused_cols_argmin_f64;
        Op::ArgMax => k::reduce_small_argmax_f64, k::reduce_fused_argmax_f64, k::reduce_fused_cols_argmax_f64;
    }
);

one_launch!(one_launch_f16, f16:
    values {
        Op::Sum | Op::Mean => k::reduce_small_sum_f16, k::reduce_fused_sum_f16, k::reduce_fused_cols_sum_f16;
        Op::SumOfSquares | Op::Norm2 => k::reduce_small_sumsq_f16, k::reduce_fused_sumsq_f16, k::reduce_fused_cols_sumsq_f16;
        Op::Min => k::reduce_small_min_f16, k::reduce_fused_min_f16, k::reduce_fused_cols_min_f16;
        Op::Max => k::reduce_small_max_f16, k::reduce_fused_max_f16, k::reduce_fused_cols_max_f16;
        Op::LogSumExp => k::reduce_small_lse_f16, k::reduce_fused_lse_f16, k::reduce_fused_cols_lse_f16;
    }
    indices {
        Op::ArgMin => k::reduce_small_argmin_f16, k::reduce_fused_argmin_f16, k::reduce_fused_cols_argmin_f16;
        Op::ArgMax => k::reduce_small_argmax_f16, k::reduce_fused_argmax_f16, k::reduce_fused_cols_argmax_f16;
    }
);

one_launch!(one_launch_bf16, bf16:
    values {
        Op::Sum | Op::Mean => k::reduce_small_sum_bf16, k::reduce_fused_sum_bf16, k::reduce_fused_cols_sum_bf16;
        Op::SumOfSquares | Op::Norm2 => k::reduce_small_sumsq_bf16, k::reduce_fused_sumsq_bf16, k::reduce_fused_cols_sumsq_bf16;
        Op::Min => k::reduce_small_min_bf16, k::reduce_fused_min_bf16, k::reduce_fused_cols_min_bf16;
        Op::Max => k::reduce_small_max_bf16, k::reduce_fused_max_bf16, k::reduce_fused_cols_max_bf16;
        Op::LogSumExp => k::reduce_small_lse_bf16, k::reduce_fused_lse_bf16, k::reduce_fused_cols_lse_bf16;
    }
    indices {
        Op::ArgMin => k::reduce_small_argmin_bf16, k::reduce_fused_argmin_bf16, k::reduce_fused_cols_argmin_bf16;
        Op::ArgMax => k::reduce_small_argmax_bf16, k::reduce_fused_argmax_bf16, k::reduce_fused_cols_argmax_bf16;
    }
);

one_launch!(one_launch_i32, i32:
    values {
        Op::Sum => k::reduce_small_sum_i32, k::reduce_fused_sum_i32, k::reduce_fused_cols_sum_i32;
        Op::Min => k::reduce_small_min_i32, k::reduce_fused_min_i32, k::reduce_fused_cols_min_i32;
        Op::Max => k::reduce_small_max_i32, k::reduce_fused_max_i32, k::reduce_fused_cols_max_i32;
    }
    indices {
        Op::ArgMin => k::reduce_small_argmin_i32, k::reduce_fused_argmin_i32, k::reduce_fused_cols_argmin_i32;
        Op::ArgMax => k::reduce_small_argmax_i32, k::reduce_fused_argmax_i32, k::reduce_fused_cols_argmax_i32;
    }
);

one_launch!(one_launch_i64, i64:
    values {
        Op::Sum => k::reduce_small_sum_i64, k::reduce_fused_sum_i64, k::reduce_fused_cols_sum_i64;
        Op::Min => k::reduce_small_min_i64, k::reduce_fused_min_i64, k::reduce_fused_cols_min_i64;
        Op::Max => k::reduce_small_max_i64, k::reduce_fused_max_i64, k::reduce_fused_cols_max_i64;
    }
    indices {
        Op::ArgMin => k::reduce_small_argmin_i64, k::reduce_fused_argmin_i64, k::reduce_fused_cols_argmin_i64;
        Op::ArgMax => k::reduce_small_argmax_i64, k::reduce_fused_argmax_i64, k::reduce_fused_cols_argmax_i64;
    }
);

one_launch!(one_launch_u32, u32:
    values {
        Op::Sum => k::reduce_small_sum_u32, k::reduce_fused_sum_u32, k::reduce_fused_cols_sum_u32;
        Op::Min => k::reduce_small_min_u32, k::reduce_fused_min_u32, k::reduce_fused_cols_min_u32;
        Op::Max => k::reduce_small_max_u32, k::reduce_fused_max_u32, k::reduce_fused_cols_max_u32;
    }
    indices {
        Op::ArgMin => k::reduce_small_argmin_u32, k::reduce_fused_argmin_u32, k::reduce_fused_cols_argmin_u32;
        Op::ArgMax => k::reduce_small_argmax_u32, k::reduce_fused_argmax_u32, k::reduce_fused_cols_argmax_u32;
    }
);

/// The result of an axis reduction: the input's dtype, or i64 indices for
/// `argmin`/`argmax`.
#[derive(Debug)]
pub enum Reduced<T: Element> {
    /// Values, in the input's dtype.
    Values(DeviceBuffer<T>),
    /// Indices along the reduced axis (`argmin`, `argmax`).
    Indices(DeviceBuffer<i64>),
}

impl<T: Element> Reduced<T> {
    /// Number of outputs.
    pub fn len(&self) -> usize {
        match self {
            Reduced::Values(b) => b.len(),
            Reduced::Indices(b) => b.len(),
        }
    }

    /// Whether there are no outputs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Knobs that never change results: used by the determinism tests and benches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReduceOptions {
    /// The most blocks (of 256 threads) any pass launches; the warps and
    /// threads grid-stride over the units of work.
    /// [`ReduceOptions::AUTO`] (0, the default): one full wave on the device,
    /// [`wave_blocks`].
    pub max_blocks: u32,
    /// Which kernels run ([`Path`]): [`Path::Auto`] (the default) picks the
    /// fewest launches the shape allows; the others force one path, for the
    /// tests that the bits are the same on every path, and for benches.
    pub path: Path,
}

/// How a reduction runs (module docs, "Launches and memory"); every path
/// gives the same bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Path {
    /// [`Path::Small`] where it applies, else [`Path::Fused`] where it
    /// applies, else [`Path::MultiPass`]: see [`Layout::path`].
    #[default]
    Auto,
    /// One launch, finish included, no partial states in global memory
    /// (`reduce_small_*`): rows reductions (`inner == 1`) whose rows have at
    /// most [`SMALL_MAX_LEN`] items.
    Small,
    /// One launch, combines and finish included (the block that completes
    /// each combine unit does it: `reduce_fused_*` for rows reductions with
    /// more than one unit per row, of any size; `reduce_fused_cols_*` for
    /// every columns reduction).
    Fused,
    /// A launch per pass (the main pass, then a combine pass per level), then
    /// the finish: every shape.
    MultiPass,
}

impl Path {
    /// The path's name: `auto`, `small`, `fused` or `multi_pass`.
    pub fn name(self) -> &'static str {
        match self {
            Path::Auto => "auto",
            Path::Small => "small",
            Path::Fused => "fused",
            Path::MultiPass => "multi_pass",
        }
    }
}

/// The longest rows (items along the reduced axis) of a [`Path::Small`]
/// reduction: `SMALL_MAX_UNITS` = 128 units of 512, 2¹⁶ items.
///
/// Rows of one unit (≤ 512 items) take a warp each (several rows per warp
/// when they touch at most 16 16-byte groups); longer ones a block of
/// 512 threads each, its 16 warps taking the units and warp 0 combining
/// their states from shared memory (16 bytes per unit: 2 KiB). The bound is
/// the work of one block: at 2¹⁶ f32 each warp folds 8 units one after the
/// other, 8 round trips to memory of 16 warps × 2 KiB, a few µs, about what
/// the second launch it saves costs (≈ 3 µs per launch on an H100 at this
/// size); at 2¹⁷ that serial part doubles while the fused path spreads the
/// same reads over 32 SMs.
pub const SMALL_MAX_LEN: u64 = SMALL_MAX_UNITS * ROW_UNIT;

impl ReduceOptions {
    /// `max_blocks` for one full wave on the device ([`wave_blocks`]): the default.
    pub const AUTO: u32 = 0;

    /// 1056 = 132 SMs × 8 resident blocks of 256 threads: the wave
    /// [`wave_blocks`] gives a pass of at most 32 registers per thread on an
    /// H100 SXM (the grid every pass used before it came from the device).
    pub const DEFAULT_MAX_BLOCKS: u32 = 8 * 132;
}

/// Registers per thread that [`wave_blocks`] assumes for the one-launch
/// kernels of `op` over `dtype` (`columns`: `reduce_fused_cols_*`, else
/// `reduce_fused_*`), from `ptxas -v` on sm_80 (ptxas 13, no spills): rows
/// 65 to 76, argmin and argmax 74 to 80, min and max of f64 92, logsumexp
/// 79 to 80 (f64 94); columns 107 to 128, but argmin and argmax of f16 and bf16
/// 134, and argmin, argmax, min and max of f64, i64 and i32 129 to 130 (one
/// block of 256 per SM: a launch bound of two spilled the f64 argmin and
/// argmax).
fn fused_registers(op: Op, dtype: crate::DType, columns: bool) -> u32 {
    use crate::DType::{BF16, F16, F64, I32, I64};
    let extreme = matches!(op, Op::ArgMin | Op::ArgMax | Op::Min | Op::Max);
    match op {
        Op::ArgMin | Op::ArgMax if columns && matches!(dtype, F16 | BF16) => 134,
        _ if columns && extreme && matches!(dtype, F64 | I64 | I32) => 130,
        _ if columns => 128,
        Op::LogSumExp | Op::Min | Op::Max if dtype == F64 => 94,
        Op::ArgMin | Op::ArgMax => 82,
        Op::LogSumExp => 80,
        _ => 76,
    }
}

/// Registers per thread that [`wave_blocks`] assumes for the small kernels
/// (`reduce_small_*`) of `op` over `dtype`, from `warpforge ptx
/// --deny-spills` (no spills; the most of sm_80 and sm_90): argmin, argmax
/// 56 to 74 (f64 and i64 on sm_80); logsumexp of f64 97; every other one 48
/// to 59.
fn small_registers(op: Op, dtype: crate::DType) -> u32 {
    match op {
        Op::ArgMin | Op::ArgMax => 80,
        Op::LogSumExp if dtype == crate::DType::F64 => 104,
        _ => 64,
    }
}

/// Resident threads per SM of compute capability `cc` (CUDA's occupancy
/// tables): 1536 on sm_86, sm_87, sm_89 and sm_12x, 1024 on sm_75, else 2048
/// (sm_80, sm_90, sm_100).
fn threads_per_sm(cc: (i32, i32)) -> u32 {
    match cc {
        (8, 6 | 7 | 9) | (12, _) => 1536,
        (7, 5) => 1024,
        _ => 2048,
    }
}

/// Blocks of [`BLOCK_THREADS`] threads in one full wave of a kernel with
/// `registers` registers per thread on `dev`: SMs × blocks per SM, where
///
/// blocks per SM = min(threads per SM / 256, 65536 / (256 · ⌈registers⌉₈), 32)
///
/// (65536 registers per SM on every target; registers are allocated per
/// thread in multiples of 8; at most 32 resident blocks). A GPU reports its
/// SM count and compute capability; the emulator counts one SM per host
/// core (it runs one block per core at a time) with 2048 threads per SM.
/// Units of work, not blocks, fix the order of every float operation, so the
/// results are the same at any grid size.
///
/// ```
/// use warpforge::{Device, reduce::wave_blocks};
/// let dev = Device::emulator();
/// let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
/// assert_eq!(wave_blocks(&dev, 32), cores * 8); // 2048 / 256 = 8 per SM
/// assert_eq!(wave_blocks(&dev, 33), cores * 6); // 40 registers: 65536 / 10240
/// assert_eq!(wave_blocks(&dev, 48), cores * 5);
/// ```
pub fn wave_blocks(dev: &crate::Device, registers: u32) -> u32 {
    let (sms, threads) = match dev.gpu_info() {
        Some(info) => (
            info.multiprocessors,
            threads_per_sm(info.compute_capability),
        ),
        None => (
            std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            2048,
        ),
    };
    let registers = registers.clamp(1, 255).next_multiple_of(8);
    let by_threads = threads / BLOCK_THREADS;
    let by_registers = 65536 / (registers * BLOCK_THREADS);
    sms.max(1) * by_threads.min(by_registers).clamp(1, 32)
}

/// Registers per thread that [`wave_blocks`] assumes for the passes of `op`
/// over elements of `element_bytes` bytes: the most any of its rows kernels
/// (element and combine passes) or, with `columns`, its columns kernels use,
/// on sm_80 or sm_90, from `warpforge ptx --deny-spills` (no spills). Rows:
/// at most 32, but 34 to 36 for 8-byte elements, 42 for argmin and argmax,
/// 47 for logsumexp, 56 for logsumexp of f64. Columns (a thread folds 16 bytes of
/// adjacent columns, so 2-byte elements keep 8 states): at most 32, but 34
/// to 36 for 8-byte elements and 38 to 46 for 2-byte ones; argmin, argmax
/// 40 (2-byte: 62 to 64); logsumexp 47 (8-byte 60, 2-byte 62 to 64).
fn pass_registers(op: Op, element_bytes: usize, columns: bool) -> u32 {
    let (wide, half) = (element_bytes == 8, element_bytes == 2);
    match (op, columns) {
        (Op::ArgMin | Op::ArgMax | Op::LogSumExp, true) if half => 64,
        (Op::LogSumExp, _) if wide => 64,
        (Op::LogSumExp, _) => 48,
        (Op::ArgMin | Op::ArgMax, _) => 44,
        (_, true) if half => 48,
        _ if wide => 40,
        _ => 32,
    }
}

/// How a reduction sees its input: `[outer, len, inner]`, reducing the
/// middle axis (a whole-tensor reduction is `[1, n, 1]`).
///
/// ```
/// use warpforge::reduce::Layout;
/// let l = Layout::new(24, &[2, 3, 4], Some(1))?;
/// assert_eq!((l.outer, l.len, l.inner, l.outputs()), (2, 3, 4, 8));
/// assert!(!l.uses_rows_kernel());
/// assert!(Layout::new(24, &[2, 3, 4], Some(2))?.uses_rows_kernel());
/// assert!(Layout::new(24, &[2, 3, 4], Some(3)).is_err()); // rank 3 has axes 0..3
/// # Ok::<(), warpforge::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Product of the dimensions before the axis.
    pub outer: usize,
    /// Length of the reduced axis.
    pub len: usize,
    /// Product of the dimensions after the axis.
    pub inner: usize,
}

impl Layout {
    /// The layout of reducing `axis` (`None`: everything) of a tensor of
    /// `elements` elements with row-major `shape`.
    ///
    /// Errors: `SizeOverflow` if the shape's product or the number of
    /// outputs (`outer · inner`) overflows a `usize` (a shape with a 0 has
    /// product 0 however large its other dimensions, but reducing that 0 away
    /// can leave more outputs than a `usize` counts), `ShapeMismatch` if the
    /// product differs from `elements` or the axis is not below the rank.
    ///
    /// ```
    /// use warpforge::{Error, reduce::Layout};
    /// let huge = [1 << 40, 0, 1 << 40];
    /// assert_eq!(Layout::new(0, &huge, Some(0))?.outputs(), 0);
    /// assert!(matches!(Layout::new(0, &huge, Some(1)), Err(Error::SizeOverflow { .. })));
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn new(elements: usize, shape: &[usize], axis: Option<usize>) -> Result<Layout> {
        // 0 if any dimension is 0 (even after ones whose product overflows), else checked.
        let product = |dims: &[usize]| {
            if dims.contains(&0) {
                return Ok(0);
            }
            dims.iter()
                .try_fold(1usize, |acc, &d| acc.checked_mul(d))
                .ok_or_else(|| Error::SizeOverflow {
                    what: format!(
                        "reduce: shape {shape:?} has more elements than a usize counts \
                         (the product of {dims:?})"
                    ),
                })
        };
        let total = product(shape)?;
        if total != elements {
            return Err(Error::ShapeMismatch {
                op: "reduce",
                detail: format!(
                    "shape {shape:?} has {total} elements but the buffer has {elements}; pass \
                     the buffer's own shape"
                ),
            });
        }
        match axis {
            None => Ok(Layout {
                outer: 1,
                len: elements,
                inner: 1,
            }),
            Some(axis) if axis < shape.len() => {
                let (outer, inner) = (product(&shape[..axis])?, product(&shape[axis + 1..])?);
                if outer.checked_mul(inner).is_none() {
                    let result = output_shape(shape, Some(axis));
                    return Err(Error::SizeOverflow {
                        what: format!(
                            "reduce along axis {axis} of shape {shape:?}: the result, of shape \
                             {result:?}, has more elements than a usize counts"
                        ),
                    });
                }
                Ok(Layout {
                    outer,
                    len: shape[axis],
                    inner,
                })
            }
            Some(axis) => Err(Error::ShapeMismatch {
                op: "reduce",
                detail: format!(
                    "axis {axis} is out of range for a tensor of rank {} (shape {shape:?}); \
                     use an axis in 0..{}, or None to reduce everything",
                    shape.len(),
                    shape.len()
                ),
            }),
        }
    }

    /// Number of outputs: `outer · inner`. [`Layout::new`] only makes layouts
    /// where this fits a `usize`; for a hand-built one where it does not, it
    /// saturates at `usize::MAX` (a count no allocation can satisfy) rather
    /// than wrapping around to a small one.
    ///
    /// ```
    /// use warpforge::reduce::Layout;
    /// let l = Layout { outer: 1 << 40, len: 0, inner: 1 << 40 };
    /// assert_eq!(l.outputs(), usize::MAX);
    /// ```
    pub fn outputs(&self) -> usize {
        self.outer.saturating_mul(self.inner)
    }

    /// [`Layout::outputs`], or `SizeOverflow` if `outer · inner` overflows.
    fn checked_outputs(&self) -> Result<usize> {
        self.outer
            .checked_mul(self.inner)
            .ok_or_else(|| Error::SizeOverflow {
                what: format!(
                    "reduce: {} outer × {} inner outputs",
                    self.outer, self.inner
                ),
            })
    }

    /// Whether the rows kernel runs (`inner == 1`: whole-tensor and
    /// inner-axis reductions); otherwise the columns kernel does.
    pub fn uses_rows_kernel(&self) -> bool {
        self.inner == 1
    }

    /// The path a reduction of this layout takes with [`ReduceOptions::path`]
    /// `requested`: [`Path::Auto`] resolves to [`Path::Small`] for rows
    /// reductions (`inner == 1`) with rows of at most [`SMALL_MAX_LEN`] items
    /// (a whole tensor of up to 2¹⁶ elements; any number of short rows), else
    /// to [`Path::Fused`] for every other reduction: rows of more than one
    /// unit of 512 items, and columns. [`Path::MultiPass`] only when forced. A forced path is returned as it is where it
    /// applies; `InvalidParameter` (naming `path`) where it does not.
    ///
    /// ```
    /// use warpforge::reduce::{Layout, Path};
    /// let whole = |n| Layout::new(n, &[n], None).unwrap().path(Path::Auto).unwrap();
    /// assert_eq!(whole(1 << 16), Path::Small);
    /// assert_eq!(whole((1 << 16) + 1), Path::Fused);
    /// assert_eq!(whole(1 << 28), Path::Fused);
    /// let short_rows = Layout::new(1 << 22, &[1 << 16, 64], Some(1))?;
    /// assert_eq!(short_rows.path(Path::Auto)?, Path::Small);
    /// assert!(short_rows.path(Path::Fused).is_err()); // one unit per row: nothing to combine
    /// let columns = Layout::new(64, &[8, 8], Some(0))?;
    /// assert_eq!(columns.path(Path::Auto)?, Path::Fused);
    /// assert!(columns.path(Path::Small).is_err());
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn path(&self, requested: Path) -> Result<Path> {
        let (rows, len) = (self.outer as u64, self.len as u64);
        let small = self.uses_rows_kernel() && len <= SMALL_MAX_LEN;
        let fused = !self.uses_rows_kernel()
            || (len > ROW_UNIT && rows.checked_mul(len.div_ceil(ROW_UNIT)).is_some());
        let refuse = |why: String| Error::InvalidParameter {
            op: "reduce",
            parameter: "path",
            detail: format!(
                "{} does not apply to [outer, len, inner] = [{}, {}, {}]: {why}",
                requested.name(),
                self.outer,
                self.len,
                self.inner
            ),
        };
        match requested {
            Path::Auto if small => Ok(Path::Small),
            Path::Auto if fused => Ok(Path::Fused),
            Path::Auto => Ok(Path::MultiPass),
            Path::Small if !small => Err(refuse(format!(
                "it needs a rows reduction (inner 1) of at most {SMALL_MAX_LEN} items per row"
            ))),
            Path::Fused if !fused => Err(refuse(format!(
                "it needs a columns reduction (inner > 1) or a rows reduction (inner 1) of \
                 more than {ROW_UNIT} items per row"
            ))),
            path => Ok(path),
        }
    }

    /// The passes that run, first to last (none if there is nothing to reduce).
    fn passes(&self) -> Vec<Pass> {
        if self.len == 0 || self.outputs() == 0 {
            return Vec::new();
        }
        let mut pass = if self.uses_rows_kernel() {
            Pass::Rows {
                rows: self.outer as u64,
                len: self.len as u64,
            }
        } else {
            Pass::Cols {
                outer: self.outer as u64,
                len: self.len as u64,
                inner: self.inner as u64,
            }
        };
        let mut passes = vec![pass];
        while pass.next().len() > 1 {
            pass = pass.next();
            passes.push(pass);
        }
        passes
    }

    /// `D`: the most float roundings on any element's way to its output (see
    /// the module docs' error bounds) for elements of `element_bytes` bytes;
    /// 0 if nothing is reduced.
    ///
    /// ```
    /// use warpforge::reduce::Layout;
    /// // 1000 f32s, rows kernel: 2 units of 512; a lane folds 4 vectors of 4
    /// // (15 roundings), 5 tree levels; then 2 states: 0 + 1 level.
    /// assert_eq!(Layout::new(1000, &[1000], None)?.fold_depth(4), 21);
    /// // 3 rows of 100 bf16s: rows start mid-vector, so a unit has up to 14
    /// // groups of 8 (the first and last partial): 7 roundings, 4 levels.
    /// assert_eq!(Layout::new(300, &[3, 100], Some(1))?.fold_depth(2), 11);
    /// // 100 rows along a column: 64 + 36, then 2 states: 63 + 1.
    /// assert_eq!(Layout::new(200, &[100, 2], Some(0))?.fold_depth(4), 64);
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn fold_depth(&self, element_bytes: usize) -> u32 {
        self.passes()
            .into_iter()
            .enumerate()
            .map(|(i, pass)| match pass {
                Pass::Rows { rows, len } => {
                    // The element pass folds groups of one 16-byte vector
                    // (see `warpforge_kernels::reduce::Items`); state passes
                    // single items.
                    let width = match i {
                        0 => (16 / element_bytes.max(1)).max(1) as u64,
                        _ => 1,
                    };
                    let items = len.min(ROW_UNIT);
                    // Rows that start mid-group add a partial group.
                    let aligned = rows == 1 || len % width == 0;
                    let groups = (items.div_ceil(width) + u64::from(!aligned)).min(items);
                    let per_lane = (width * groups.div_ceil(32)).min(items) - 1;
                    per_lane as u32 + groups.min(32).next_power_of_two().trailing_zeros()
                }
                Pass::Cols { len, .. } => (len.min(COL_UNIT) - 1) as u32,
            })
            .sum()
    }
}

/// A launch of `blocks` blocks of 256 threads (at least 1), capped at
/// `options.max_blocks`, or at one wave of a `registers`-register kernel on
/// `dev` ([`wave_blocks`]) when that is [`ReduceOptions::AUTO`].
fn config(
    dev: &crate::Device,
    blocks: u64,
    registers: u32,
    options: ReduceOptions,
) -> LaunchConfig {
    let cap = match options.max_blocks {
        ReduceOptions::AUTO => wave_blocks(dev, registers),
        cap => cap,
    };
    let blocks = blocks.clamp(1, u64::from(cap.max(1))) as u32;
    LaunchConfig::new(Dim3::x(blocks), Dim3::x(BLOCK_THREADS))
}

/// The shape of the result: `shape` without `axis` (`[]` for `None`; an `axis` past the
/// end removes nothing, and [`reduce()`] rejects it before asking).
///
/// ```
/// use warpforge::reduce::output_shape;
/// assert_eq!(output_shape(&[2, 3, 4], Some(1)), [2, 4]);
/// assert_eq!(output_shape(&[2, 3, 4], None), [0usize; 0]);
/// ```
pub fn output_shape(shape: &[usize], axis: Option<usize>) -> Vec<usize> {
    match axis {
        None => Vec::new(),
        Some(k) => shape
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != k)
            .map(|(_, &d)| d)
            .collect(),
    }
}

/// `outputs` copies of `value`, the result of reducing an axis of length 0
/// (the input is empty, so `outputs` is not bounded by its size).
///
/// Allocated on the device first, where a result too large for the device's
/// memory is `ResultTooLarge` with its shape and bytes; a zero (`sum`,
/// `sum_of_squares`, `norm2`) is the allocation's own zeros, and any other
/// value goes through a host buffer reserved fallibly, never an abort.
fn filled<T: Reducible>(
    op: Op,
    dev: &crate::Device,
    value: T,
    outputs: usize,
    shape: &[usize],
    axis: Option<usize>,
) -> Result<DeviceBuffer<T>> {
    let item_size = size_of::<T>();
    let too_large = |why: String| Error::ResultTooLarge {
        op: op.name(),
        shape: output_shape(shape, axis),
        elements: outputs,
        item_size,
        value: format!("{value:?}"),
        why,
    };
    let mut out = dev.alloc_zeroed::<T>(outputs).map_err(|e| match e {
        Error::OutOfMemory { free, total, .. } => {
            too_large(format!("the device has {free} of its {total} bytes free"))
        }
        Error::SizeOverflow { .. } => too_large("the byte count overflows a usize".to_owned()),
        e => e,
    })?;
    // Every value `empty_result` gives is +0, NaN, −inf or an integer 0, so
    // comparing with the default (+0 or 0) tells the all-zero-bits ones exactly.
    if value != T::default() {
        let mut host = Vec::new();
        host.try_reserve_exact(outputs)
            .map_err(|e| too_large(format!("the host could not allocate a copy: {e}")))?;
        host.resize(outputs, value);
        out.copy_from_host(&host)?;
    }
    Ok(out)
}

/// Words for `units` states (two each), checked.
fn state_words(units: u64) -> Result<usize> {
    units
        .checked_mul(2)
        .and_then(|w| usize::try_from(w).ok())
        .ok_or_else(|| Error::SizeOverflow {
            what: format!("reduce: {units} partial states"),
        })
}

/// Reduces `x` (row-major `shape`) with `op` along `axis` (`None`: everything,
/// one output), with default [`ReduceOptions`]; the output's shape is `shape`
/// without `axis`.
///
/// The kernel shape (rows or columns) is chosen from the shape: see the
/// module docs. Errors: `ShapeMismatch` (shape vs length, bad axis),
/// `UnsupportedDType` (e.g. `mean` of `i32`), `EmptyReduction` (`min`, `max`,
/// `argmin`, `argmax` along an axis of length 0 with outputs to fill),
/// `SizeOverflow` (more outputs than a `usize` counts), `ResultTooLarge`
/// (reducing an axis of length 0 leaves more outputs than the device holds:
/// `[1 << 20, 0, 1 << 20]` along axis 1 is 2⁴⁰ of them).
///
/// ```
/// use warpforge::{Device, reduce::{self, Op, Reduced}};
/// let dev = Device::emulator();
/// let x = dev.upload(&[3i32, 1, 4, 1, 0, 9])?; // rows [3, 1], [4, 1], [0, 9]
/// let Reduced::Indices(first_min) = reduce::reduce(Op::ArgMin, &x, &[3, 2], Some(0))? else {
///     unreachable!()
/// };
/// assert_eq!(first_min.to_host()?, [2, 0]); // columns [3, 4, 0] and [1, 1, 9]: ties → first
/// # Ok::<(), warpforge::Error>(())
/// ```
pub fn reduce<T: Reducible>(
    op: Op,
    x: &DeviceBuffer<T>,
    shape: &[usize],
    axis: Option<usize>,
) -> Result<Reduced<T>> {
    reduce_with(op, x, shape, axis, ReduceOptions::default())
}

/// [`reduce`] with explicit [`ReduceOptions`]; the result does not depend on them.
///
/// ```
/// use warpforge::{Device, reduce::{self, Op, Reduced, ReduceOptions}};
/// let dev = Device::emulator();
/// let x = dev.upload(&(0..5000).map(|i| (i as f32).sin()).collect::<Vec<_>>())?;
/// let bits = |max_blocks| -> warpforge::Result<u32> {
///     let r = reduce::reduce_with(Op::Sum, &x, &[5000], None, ReduceOptions { max_blocks, ..Default::default() })?;
///     let Reduced::Values(v) = r else { unreachable!() };
///     Ok(v.to_host()?[0].to_bits())
/// };
/// assert_eq!(bits(1)?, bits(1024)?);
/// # Ok::<(), warpforge::Error>(())
/// ```
pub fn reduce_with<T: Reducible>(
    op: Op,
    x: &DeviceBuffer<T>,
    shape: &[usize],
    axis: Option<usize>,
    options: ReduceOptions,
) -> Result<Reduced<T>> {
    if !T::supports(op) {
        return Err(unsupported::<T>(op));
    }
    let layout = Layout::new(x.len(), shape, axis)?;
    let dev = x.device();
    let outputs = layout.checked_outputs()?;
    if layout.len == 0 && outputs > 0 {
        let value = T::empty_result(op).ok_or(Error::EmptyReduction { op: op.name() })?;
        let out = filled(op, dev, value, outputs, shape, axis)?;
        return Ok(Reduced::Values(out));
    }
    // From here on every output has at least one element, so `outputs` and
    // every pass's units are at most `x.len()`.
    let passes = layout.passes();
    let path = layout.path(options.path)?;
    if let (Path::Small, [Pass::Rows { rows, len }, ..]) = (path, &passes[..]) {
        // One launch, the finish included: `32 / lanes` rows per warp for
        // rows of one unit, else a block per row.
        let per_block = match len.div_ceil(ROW_UNIT) {
            1 => u64::from(SMALL_BLOCK_THREADS / 32) * (32 / k::row_lanes(*len, T::WIDTH)),
            _ => 1,
        };
        let cap = match options.max_blocks {
            ReduceOptions::AUTO => {
                let registers = small_registers(op, T::DTYPE);
                wave_blocks(dev, registers) / (SMALL_BLOCK_THREADS / BLOCK_THREADS)
            }
            cap => cap,
        };
        let blocks = rows.div_ceil(per_block).clamp(1, u64::from(cap.max(1))) as u32;
        let cfg = LaunchConfig::new(Dim3::x(blocks), Dim3::x(SMALL_BLOCK_THREADS));
        return T::pass_one_launch(op, x, passes[0], OneLaunch::Small, cfg);
    }
    if let (Path::Fused, [pass, ..]) = (path, &passes[..]) {
        // One launch, the combines and the finish included (the block that
        // completes each combine unit does it). The tickets are 0 between
        // launches (each is reset by the block that takes its last), so they
        // have a cache key of their own, never lent for states.
        let (blocks, (ticket_words, state_words), registers) = match *pass {
            Pass::Rows { rows, len } => (
                pass.units(1)?.1,
                k::fused_words(rows, len),
                fused_registers(op, T::DTYPE, false),
            ),
            Pass::Cols { outer, len, inner } => {
                // 16 bytes of columns per thread where every row's groups
                // are whole vectors, else a column per thread (the kernel
                // decides alike).
                let width = if inner.is_multiple_of(T::WIDTH) {
                    T::WIDTH
                } else {
                    1
                };
                (
                    k::cols_fused_tasks(outer, len, inner, width),
                    k::cols_fused_words(outer, len, inner),
                    fused_registers(op, T::DTYPE, true),
                )
            }
        };
        let words = |w: u64, what: &str| {
            usize::try_from(w).map_err(|_| Error::SizeOverflow {
                what: format!("reduce: {w} words of {what}"),
            })
        };
        let mut tickets = dev.scratch(TICKETS, words(ticket_words, "tickets")?)?;
        let mut states = dev.scratch(STATES, words(state_words, "partial states")?)?;
        let cfg = config(dev, blocks, registers, options);
        let path = OneLaunch::Fused {
            tickets: &mut tickets,
            states: &mut states,
        };
        return T::pass_one_launch(op, x, *pass, path, cfg);
    }
    let finish_blocks = (outputs as u64).div_ceil(u64::from(BLOCK_THREADS));
    let finish_cfg = config(dev, finish_blocks, 32, options);
    // The partial states live in two scratch buffers from the device's cache
    // (no allocation and no memset per call: every pass writes each state it
    // leaves before the next reads it): passes 0, 2, 4, … write `even`, the
    // others `odd`, each reading the other's states.
    let registers = pass_registers(op, size_of::<T>(), !layout.uses_rows_kernel());
    let mut words = [0usize; 2];
    for (i, pass) in passes.iter().enumerate() {
        let slot = &mut words[i % 2];
        *slot = (*slot).max(state_words(pass.units(1)?.0)?);
    }
    let mut even = dev.scratch(STATES, words[0])?;
    let mut odd = match passes.len() {
        0 | 1 => None,
        _ => Some(dev.scratch(STATES, words[1])?),
    };
    for (i, &pass) in passes.iter().enumerate() {
        // The element pass's columns kernel reads 16 bytes of a row per
        // thread when every row's groups are whole vectors, else one column
        // per thread (`warpforge_kernels::reduce::cols_pass`).
        let width = match (i, pass) {
            (0, Pass::Cols { inner, .. }) if !inner.is_multiple_of(T::WIDTH) => 1,
            (0, _) => T::WIDTH,
            _ => 1,
        };
        let (_, blocks) = pass.units(width)?;
        let cfg = config(dev, blocks, registers, options);
        match (i, &mut odd) {
            (0, _) => T::pass_elements(op, x, pass, &mut even, cfg)?,
            (_, Some(odd)) if i % 2 == 1 => T::pass_states(op, &even, pass, odd, cfg)?,
            (_, Some(odd)) => T::pass_states(op, odd, pass, &mut even, cfg)?,
            (_, None) => unreachable!("a second pass has its scratch buffer"),
        }
    }
    let states: &DeviceBuffer<u64> = match &odd {
        Some(odd) if passes.len() % 2 == 0 => odd,
        _ => &even,
    };
    finish(op, &layout, outputs, states, finish_cfg)
}

/// The scratch cache key of the partial states (fused and multi-pass paths).
const STATES: &str = "reduce: states";
/// The scratch cache key of the fused path's tickets: every word 0 between
/// launches.
const TICKETS: &str = "reduce: tickets";

/// Launches the finish of `op` over one state per output.
fn finish<T: Reducible>(
    op: Op,
    layout: &Layout,
    outputs: usize,
    states: &DeviceBuffer<u64>,
    cfg: LaunchConfig,
) -> Result<Reduced<T>> {
    let dev = states.device();
    // No memset: the finish writes every output.
    if op.returns_indices() {
        let mut out = dev.cached_output::<i64>(outputs)?;
        dev.launch(k::finish_index, cfg, (states, &mut out))?;
        Ok(Reduced::Indices(out))
    } else {
        let mut out = dev.cached_output::<T>(outputs)?;
        T::finish(op, states, layout.len as u64, &mut out, cfg)?;
        Ok(Reduced::Values(out))
    }
}

/// The single value of a whole-buffer reduction.
fn whole_value<T: Reducible>(op: Op, x: &DeviceBuffer<T>) -> Result<T> {
    match reduce(op, x, &[x.len()], None)? {
        Reduced::Values(v) => Ok(v.to_host()?[0]),
        Reduced::Indices(_) => unreachable!("{op} returns values"),
    }
}

/// The single index of a whole-buffer `argmin`/`argmax`.
fn whole_index<T: Reducible>(op: Op, x: &DeviceBuffer<T>) -> Result<u64> {
    match reduce(op, x, &[x.len()], None)? {
        Reduced::Indices(v) => Ok(v.to_host()?[0] as u64),
        Reduced::Values(_) => unreachable!("{op} returns indices"),
    }
}

/// `Σx` over the whole buffer (0 if empty; integers wrap).
///
/// ```
/// use warpforge::{Device, reduce};
/// let dev = Device::emulator();
/// assert_eq!(reduce::sum(&dev.upload(&[i32::MAX, 1])?)?, i32::MIN); // wraps
/// assert_eq!(reduce::sum(&dev.upload::<f32>(&[])?)?, 0.0);
/// # Ok::<(), warpforge::Error>(())
/// ```
pub fn sum<T: Reducible>(x: &DeviceBuffer<T>) -> Result<T> {
    whole_value(Op::Sum, x)
}

/// `Σx / n` over the whole buffer (NaN if empty; floats only).
///
/// ```
/// use warpforge::{Device, reduce};
/// let dev = Device::emulator();
/// assert_eq!(reduce::mean(&dev.upload(&[1.0f64, 2.0, 6.0])?)?, 3.0);
/// assert!(reduce::mean(&dev.upload(&[1i32])?).is_err()); // UnsupportedDType
/// # Ok::<(), warpforge::Error>(())
/// ```
pub fn mean<T: Reducible>(x: &DeviceBuffer<T>) -> Result<T> {
    whole_value(Op::Mean, x)
}

/// The smallest element (`−0 < +0`, NaN propagates; `EmptyReduction` if empty).
///
/// ```
/// use warpforge::{Device, reduce};
/// let dev = Device::emulator();
/// assert_eq!(reduce::min(&dev.upload(&[0.0f32, -0.0])?)?.to_bits(), (-0.0f32).to_bits());
/// assert!(reduce::min(&dev.upload::<f32>(&[])?).is_err());
/// # Ok::<(), warpforge::Error>(())
/// ```
pub fn min<T: Reducible>(x: &DeviceBuffer<T>) -> Result<T> {
    whole_value(Op::Min, x)
}

/// The largest element (`−0 < +0`, NaN propagates; `EmptyReduction` if empty).
///
/// ```
/// use warpforge::{Device, reduce};
/// let dev = Device::emulator();
/// assert_eq!(reduce::max(&dev.upload(&[3u32, 7, 5])?)?, 7);
/// assert!(reduce::max(&dev.upload(&[1.0f32, f32::NAN])?)?.is_nan());
/// # Ok::<(), warpforge::Error>(())
/// ```
pub fn max<T: Reducible>(x: &DeviceBuffer<T>) -> Result<T> {
    whole_value(Op::Max, x)
}

/// `Σx²` over the whole buffer (0 if empty; floats only).
///
/// ```
/// use warpforge::{Device, reduce};
/// let dev = Device::emulator();
/// assert_eq!(reduce::sum_of_squares(&dev.upload(&[3.0f32, 4.0])?)?, 25.0);
/// # Ok::<(), warpforge::Error>(())
/// ```
pub fn sum_of_squares<T: Reducible>(x: &DeviceBuffer<T>) -> Result<T> {
    whole_value(Op::SumOfSquares, x)
}

/// `√Σx²` over the whole buffer (0 if empty; floats only).
///
/// ```
/// use warpforge::{Device, reduce};
/// let dev = Device::emulator();
/// assert_eq!(reduce::norm2(&dev.upload(&[3.0f64, 4.0])?)?, 5.0);
/// # Ok::<(), warpforge::Error>(())
/// ```
pub fn norm2<T: Reducible>(x: &DeviceBuffer<T>) -> Result<T> {
    whole_value(Op::Norm2, x)
}

/// `ln Σ exp(x)` over the whole buffer, without overflow (−inf if empty; floats only).
///
/// ```
/// use warpforge::{Device, reduce};
/// let dev = Device::emulator();
/// let lse = reduce::logsumexp(&dev.upload(&[1000.0f32, 1000.0])?)?;
/// assert!((lse - (1000.0 + 2f32.ln())).abs() < 1e-3); // exp(1000) alone would overflow
/// # Ok::<(), warpforge::Error>(())
/// ```
pub fn logsumexp<T: Reducible>(x: &DeviceBuffer<T>) -> Result<T> {
    whole_value(Op::LogSumExp, x)
}

/// The first index of the smallest element (NaN counts as smallest, `−0 == +0`;
/// `EmptyReduction` if empty).
///
/// ```
/// use warpforge::{Device, reduce};
/// let dev = Device::emulator();
/// assert_eq!(reduce::argmin(&dev.upload(&[2.0f32, 0.0, -0.0, 0.0])?)?, 1);
/// # Ok::<(), warpforge::Error>(())
/// ```
pub fn argmin<T: Reducible>(x: &DeviceBuffer<T>) -> Result<u64> {
    whole_index(Op::ArgMin, x)
}

/// The first index of the largest element (NaN counts as largest; `EmptyReduction` if empty).
///
/// ```
/// use warpforge::{Device, reduce};
/// let dev = Device::emulator();
/// assert_eq!(reduce::argmax(&dev.upload(&[1.0f32, f32::NAN, 9.0, f32::NAN])?)?, 1);
/// # Ok::<(), warpforge::Error>(())
/// ```
pub fn argmax<T: Reducible>(x: &DeviceBuffer<T>) -> Result<u64> {
    whole_index(Op::ArgMax, x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;

    const BIG: usize = 1 << 40;

    #[test]
    fn layout_counts_outputs_of_empty_shapes_without_overflow() {
        // A 0 makes the product 0 whatever comes before or after it.
        let l = Layout::new(0, &[usize::MAX, usize::MAX, 0], None).unwrap();
        assert_eq!((l.outer, l.len, l.inner, l.outputs()), (1, 0, 1, 1));
        let l = Layout::new(0, &[BIG, 0, BIG], Some(0)).unwrap();
        assert_eq!((l.outer, l.len, l.inner, l.outputs()), (1, BIG, 0, 0));
        let l = Layout::new(0, &[BIG, 0, BIG], Some(2)).unwrap();
        assert_eq!((l.outer, l.len, l.inner, l.outputs()), (0, BIG, 1, 0));
        let l = Layout::new(0, &[1 << 20, 0, 1 << 20], Some(1)).unwrap();
        assert_eq!((l.len, l.outputs()), (0, 1 << 40));
        assert!(l.passes().is_empty());
        // Reducing the 0 away leaves 2⁸⁰ outputs: refused, naming the result's shape.
        let e = Layout::new(0, &[BIG, 0, BIG], Some(1)).unwrap_err();
        assert!(matches!(e, Error::SizeOverflow { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("axis 1") && msg.contains(&format!("[{BIG}, {BIG}]")),
            "{msg}"
        );
        let e = Layout::new(0, &[usize::MAX, 2, 0], Some(2)).unwrap_err();
        assert!(matches!(e, Error::SizeOverflow { .. }), "{e}");
        // Without a 0 the product itself overflows.
        let e = Layout::new(0, &[1 << 32, 1 << 32, 1 << 32], None).unwrap_err();
        assert!(matches!(e, Error::SizeOverflow { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("[4294967296, 4294967296, 4294967296]"),
            "{e}"
        );
    }

    #[test]
    fn outputs_of_a_hand_built_layout_saturate() {
        let l = Layout {
            outer: BIG,
            len: 0,
            inner: BIG,
        };
        assert_eq!(l.outputs(), usize::MAX);
        assert!(matches!(
            l.checked_outputs(),
            Err(Error::SizeOverflow { .. })
        ));
        let l = Layout {
            outer: 3,
            len: 0,
            inner: 5,
        };
        assert_eq!((l.outputs(), l.checked_outputs().unwrap()), (15, 15));
    }

    #[test]
    fn pass_units_are_checked() {
        let rows = Pass::Rows {
            rows: u64::MAX,
            len: 1024,
        };
        assert!(matches!(rows.units(1), Err(Error::SizeOverflow { .. })));
        let cols = Pass::Cols {
            outer: 1 << 32,
            len: 64,
            inner: 1 << 32,
        };
        assert!(matches!(cols.units(1), Err(Error::SizeOverflow { .. })));
        let cols = Pass::Cols {
            outer: 3,
            len: 65,
            inner: 5,
        };
        assert_eq!(cols.units(1).unwrap(), (30, 1));
        let cols = Pass::Cols {
            outer: 3,
            len: 65,
            inner: 1000,
        };
        // 6000 states; 6 · 250 groups of 4 columns: 1500 threads.
        assert_eq!(cols.units(4).unwrap(), (6000, 6));
    }

    /// The reduction of an empty axis that leaves more outputs than the device
    /// holds: an error naming the result, with nothing allocated afterwards.
    #[test]
    fn an_empty_axis_with_too_many_outputs_is_an_error() {
        let dev = Device::emulator_with_memory(1 << 20);
        let x = dev.upload::<f32>(&[]).unwrap();
        for (op, value) in [(Op::Sum, "0.0"), (Op::Mean, "NaN"), (Op::LogSumExp, "-inf")] {
            let e = reduce(op, &x, &[1 << 20, 0, 1 << 20], Some(1)).unwrap_err();
            let Error::ResultTooLarge {
                shape,
                elements,
                item_size,
                ..
            } = &e
            else {
                panic!("{op}: {e}")
            };
            assert_eq!(
                (shape.as_slice(), *elements),
                (&[1 << 20, 1 << 20][..], 1 << 40)
            );
            assert_eq!(*item_size, 4);
            let msg = e.to_string();
            for needle in [
                "[1048576, 1048576]",
                "1099511627776 elements",
                "4398046511104 bytes",
            ] {
                assert!(msg.contains(needle), "{op}: {msg}");
            }
            assert!(msg.contains(&format!("would be {value}")), "{op}: {msg}");
            // Small enough for usize but not for the device: the non-zero fill
            // fails on the device, before any host buffer.
            let e = reduce(op, &x, &[1000, 0, 1000], Some(1)).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::ResultTooLarge {
                        elements: 1_000_000,
                        ..
                    }
                ),
                "{e}"
            );
            assert_eq!(dev.memory_info().unwrap(), (1 << 20, 1 << 20), "{op}");
        }
        // min and friends have no value for an empty axis, whatever the size.
        let e = reduce(Op::Min, &x, &[1 << 20, 0, 1 << 20], Some(1)).unwrap_err();
        assert!(matches!(e, Error::EmptyReduction { op: "min" }), "{e}");
        // (0, 2⁴⁰) along axis 0: 2⁴⁰ zeros.
        let e = reduce(Op::Sum, &x, &[0, BIG], Some(0)).unwrap_err();
        assert!(
            matches!(e, Error::ResultTooLarge { elements: BIG, .. }),
            "{e}"
        );
    }

    #[test]
    fn empty_results_allocate_nothing_and_fills_are_exact() {
        let dev = Device::emulator_with_memory(1 << 20);
        let x = dev.upload::<f32>(&[]).unwrap();
        for (shape, axis) in [
            (&[0, BIG][..], Some(1)),
            (&[1 << 20, 0, 1 << 20], Some(0)),
            (&[1 << 20, 0, 1 << 20], Some(2)),
        ] {
            let Reduced::Values(v) = reduce(Op::Sum, &x, shape, axis).unwrap() else {
                unreachable!()
            };
            assert!(v.is_empty(), "{shape:?} {axis:?}");
            let Reduced::Indices(i) = reduce(Op::ArgMax, &x, shape, axis).unwrap() else {
                unreachable!()
            };
            assert!(i.is_empty(), "{shape:?} {axis:?}");
        }
        assert_eq!(dev.memory_info().unwrap().0, 1 << 20);
        // Whole-tensor reductions of a 0-element shape: one value.
        let whole = |op| match reduce(op, &x, &[1 << 20, 0, 1 << 20], None) {
            Ok(Reduced::Values(v)) => Ok(v.to_host().unwrap()),
            Ok(Reduced::Indices(_)) => unreachable!(),
            Err(e) => Err(e),
        };
        assert_eq!(whole(Op::Sum).unwrap(), [0.0]);
        assert!(whole(Op::Mean).unwrap()[0].is_nan());
        assert_eq!(whole(Op::LogSumExp).unwrap(), [f32::NEG_INFINITY]);
        assert!(matches!(whole(Op::Max), Err(Error::EmptyReduction { .. })));
        // A fill that fits: every element, in the output dtype.
        let Reduced::Values(v) = reduce(Op::Mean, &x, &[3, 0, 5], Some(1)).unwrap() else {
            unreachable!()
        };
        let v = v.to_host().unwrap();
        assert_eq!(v.len(), 15);
        assert!(v.iter().all(|x| x.is_nan()));
        let xi = dev.upload::<i64>(&[]).unwrap();
        let Reduced::Values(v) = reduce(Op::Sum, &xi, &[4, 0, 2], Some(1)).unwrap() else {
            unreachable!()
        };
        assert_eq!(v.to_host().unwrap(), [0; 8]);
    }
}
