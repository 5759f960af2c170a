//! Reductions: sum, mean, min, max, argmin, argmax, sum of squares, norm2 and
//! logsumexp, whole-tensor or along one axis, deterministic on every grid.
//!
//! The host (`warpforge::reduce`) views the input as `[rows, len]` (reduce
//! each row: the whole tensor, or an inner axis) or as `[outer, len, inner]`
//! (reduce the middle: an outer or middle axis), and cuts the reduced axis
//! into fixed units of work. The grid only decides which warp or thread takes
//! which unit, so the order of every float operation depends on the shape
//! alone, never on the grid, and the result has the same bits on every launch.
//!
//! | kernel shape | unit | fold |
//! | --- | --- | --- |
//! | rows ([`rows_pass`], `reduce_rows_*`, `combine_rows_*`) | one warp per [`ROW_UNIT`] consecutive items of a row | the unit is cut into groups at multiples of [`Items::WIDTH`] in the buffer (16 bytes of elements; 1 state); lane `l` folds groups `l, l+32, …` in order, each group's items in order, then a fixed `shuffle_down` tree (16, 8, 4, 2, 1) to lane 0 |
//! | columns ([`cols_pass`], `reduce_cols_*`, `combine_cols_*`) | one thread per [`COL_UNIT`] items of a group of [`Items::WIDTH`] adjacent columns (16 bytes of elements; 1 state) when every row's groups are whole, aligned vectors, else of one column ([`Singles`]) | each column sequentially, in index order; consecutive threads take consecutive groups (columns), so a warp reads 512 (128) consecutive bytes of a row per load |
//!
//! Every pass writes one [`State`] per unit as two `u64` words: `[rows,
//! units]` or `[outer, units, inner]`, the same layout as its input with a
//! shorter axis. On the multi-pass path the host runs `combine_*` passes
//! (the same shapes over states) until one state per output is left, then a
//! `finish_*` kernel (one thread per output) turns states into values; the
//! library takes that path only when a caller forces it (the tests check
//! the one-launch kernels against it). Every reduction runs in ONE launch:
//! the fused kernels (`reduce_fused_*` over rows, [`rows_fused`];
//! `reduce_fused_cols_*` over columns, [`cols_fused`]) fold the units, and
//! the block that takes the last atomic ticket of a combine unit (the units
//! or states one combine-pass unit folds) folds it in the combine pass's
//! order, level after level, the top level finished ([`Finish`]) into the
//! outputs; and the small kernels
//! (`reduce_small_*`, [`rows_small`], rows of at most [`SMALL_MAX_UNITS`]
//! units): a warp per row of one unit (several rows per warp, [`row_lanes`]
//! lanes each, for rows of at most 16 groups), or a block per longer row whose warps
//! leave their units' states in shared memory for warp 0 to combine, then
//! the finish step ([`Finish`]) in the same launch. Every kernel but the
//! small ones is launched with blocks of [`BLOCK_THREADS`] threads (the small
//! ones: [`SMALL_BLOCK_THREADS`]) and grid-strides over its units.
//!
//! Every kernel reads its input through the device crate's global-memory
//! API: the parameter is a [`Global`] (the host passes the same buffer as for
//! a `&[T]`), read with [`Global::load`] and [`Global::vectors16`], so the
//! emulator's memory profile counts every load (`warpforge profile reduce`,
//! `Device::profile_memory`), and on the GPU they are the same loads.
//!
//! The rows kernels read a whole group of elements with one 16-byte vector
//! load ([`Vectored`], `LDG.E.128`): a full, aligned unit is 16 items per lane
//! in `16 / WIDTH` vectors, all issued before the first is folded. A row that
//! starts mid-vector (`[rows, len]` with `len` not a multiple of the width)
//! begins and ends with a partial group read by scalar loads. The groups are
//! fixed by the shape (buffers start 256-byte aligned), and a group read by
//! scalar loads is folded in the same order as by a vector, so which loads are
//! vectors never changes a bit.
//!
//! The columns kernels read the same 16-byte groups when `inner` is a
//! multiple of `W` (and the buffer is aligned, as every one the host passes
//! is): a thread's `W` columns of one row are one vector load, and a warp's
//! request is 512 consecutive bytes. Otherwise, decided once per launch, a
//! thread takes one column ([`Singles`]) and consecutive lanes read
//! consecutive elements with scalar loads (one 128-byte span per warp and
//! row, where `W` columns per thread would use 4 bytes of every 16 a request
//! touches). A column's fold is the same either way, and the same as with a
//! thread per column, so the mapping never changes a bit. The combine passes
//! and the `finish_*` kernels read each state (two words) with one 16-byte
//! load ([`stored`]; states whose decode uses one word load 8 bytes).
//!
//! Kernels are stamped per reduction and element type (`reduce_*`, and the
//! one-launch `reduce_small_*`, `reduce_fused_*` and `reduce_fused_cols_*`
//! with the output type and [`Finish`] step: 43 of each, from one table, sum serving mean and sum of
//! squares serving norm2 through the runtime finish code), per reduction and
//! accumulator (`combine_*`: f16, bf16 and f32 share the f32 ones), and per
//! accumulator and output type (`finish_*`).
//!
//! This crate is the library's reductions-and-elementwise family, one PTX
//! module of its own (`warpforge-kernels-reduce`; the `reduce` feature of
//! `warpforge`): the reductions above and [`elementwise`]'s `axpy_f32`,
//! `axpy_f64`.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]
#![forbid(unsafe_code)]

pub mod elementwise;
mod kernels;
#[doc(hidden)]
pub mod state;

pub use kernels::*;
pub use state::{Acc, Float, Input, Reduction, State};

use core::marker::PhantomData;
use warpforge_device::own::{Elements, WarpChunks};
use warpforge_device::{Global, Out, atomic, bf16, f16, num, shared, sync, thread};

/// Threads per block of every reduction kernel (8 warps).
pub const BLOCK_THREADS: u32 = 256;
/// Items of a row one warp folds in a rows pass.
pub const ROW_UNIT: u64 = 512;
/// Items each lane folds in a rows pass: `ROW_UNIT / 32`.
pub const LANE_ITEMS: u64 = ROW_UNIT / WARP;
/// Items of a column one thread folds in a columns pass.
pub const COL_UNIT: u64 = 64;
/// Threads per block of the one-launch small kernels (`reduce_small_*`,
/// [`rows_small`]): 16 warps, so one block has 16 units' loads in flight.
/// (Not 1024: the arg kernels use up to 123 registers, and 1024 threads get
/// at most 64.)
pub const SMALL_BLOCK_THREADS: u32 = 512;
/// The most [`ROW_UNIT`]s a row may have for [`rows_small`] (rows of up to
/// 2¹⁶ items): one block folds a row, its unit states in shared memory.
pub const SMALL_MAX_UNITS: u64 = 128;

const WARP: u64 = thread::WARP_SIZE as u64;

/// How a `finish_*` kernel turns a float state into a value.
pub mod finish {
    /// The state's value (sum, sum of squares, min, max).
    pub const VALUE: u32 = 0;
    /// The sum divided by the count, in f64 (mean).
    pub const MEAN: u32 = 1;
    /// The square root of the sum of squares (norm2).
    pub const NORM2: u32 = 2;
    /// `m + ln s` of a logsumexp state.
    pub const LOGSUMEXP: u32 = 3;
}

/// What a rows or columns pass reads: items in groups of [`Items::WIDTH`]
/// consecutive ones, group `g` being items `g·WIDTH .. (g + 1)·WIDTH` of the
/// buffer (so a whole group of elements is one aligned 16-byte vector).
pub trait Items<S: State> {
    /// Items per group: one 16-byte vector of elements ([`Input::WIDTH`]),
    /// or 1 (states, [`Scalar`]).
    const WIDTH: u64;
    /// `f(c, item k + c)` for `c = 0, 1, …, n − 1` in order, item `k + c` at
    /// position `index(c)` along the reduced axis, items past the end
    /// skipped; `n ≤ WIDTH`, and `k` is a multiple of `WIDTH` when `n ==
    /// WIDTH` (a whole group: one vector load where the buffer has it).
    fn each(&mut self, k: u64, n: u64, index: impl Fn(u64) -> u64, f: impl FnMut(usize, S));
    /// `acc` combined with items `k, k + 1, …, k + n − 1` (at positions `j, j +
    /// 1, …` along the reduced axis), in that order; `n ≤ WIDTH`, and `k` is
    /// a multiple of `WIDTH` when `n == WIDTH`. Items past the end are skipped.
    fn fold(&mut self, acc: S, k: u64, j: u64, n: u64) -> S;
    /// `f(r, c, item k + r·stride + c)` for `r < N` in order, each whole
    /// group's `c < WIDTH` in order, item `k + r·stride + c` at position
    /// `j + r` along the reduced axis: `N` whole groups `stride` items apart
    /// (`N` rows of a column group: `k` and `stride` multiples of `WIDTH`),
    /// all `N` loads issued before the first `f` where the buffer has them
    /// as vectors. The same items in the same order as `N` calls of
    /// [`Items::each`].
    #[inline(always)]
    fn each_rows<const N: usize>(
        &mut self,
        k: u64,
        stride: u64,
        j: u64,
        mut f: impl FnMut(usize, usize, S),
    ) {
        for r in 0..N as u64 {
            let row = k + r * stride;
            self.each(row, Self::WIDTH, |_| j + r, |c, s| f(r as usize, c, s));
        }
    }
    /// Whether every whole group at a multiple of `WIDTH` is one vector
    /// load: the buffer starts at a 16-byte boundary (as every buffer the
    /// host passes does). [`cols_pass`] decides on it once per launch.
    #[inline(always)]
    fn aligned(&self) -> bool {
        true
    }
    /// `acc` combined with the whole groups at `k + 32·WIDTH·i` (positions
    /// `j + 32·WIDTH·i`), `i < 16 / WIDTH`, in order: a lane's share of a
    /// full, aligned rows unit (`k` a multiple of `WIDTH`), all of its loads
    /// issued before the first fold. `None` where that cannot be done with
    /// whole vectors (a buffer that does not start at a 16-byte boundary,
    /// which only the emulator can be given): the caller then folds the
    /// unit group by group ([`Items::fold`]), with the same bits.
    #[inline(always)]
    fn fold_lane_unit(&mut self, mut acc: S, k: u64, j: u64) -> Option<S> {
        let stride = WARP * Self::WIDTH;
        for i in 0..LANE_ITEMS / Self::WIDTH {
            acc = self.fold(acc, k + stride * i, j + stride * i, Self::WIDTH);
        }
        Some(acc)
    }
}

/// The elements of a rows or columns pass, read through the global-memory
/// API ([`Global::load`], counted by the emulator's memory profile) as
/// 16-byte vectors where they can be, else as scalars.
pub struct Vectored<'a, T: Input, R> {
    x: Global<'a, T>,
    head: u64,
    vectors: Global<'a, T::Vector>,
    reduction: PhantomData<R>,
}

/// The elements of `x` for a rows or columns pass of `R` ([`Vectored`]).
#[inline(always)]
pub fn vectored<T: Input, R: Reduction<T>>(x: Global<'_, T>) -> Vectored<'_, T, R> {
    let (head, vectors) = T::vectors(x);
    Vectored {
        x,
        head: head as u64,
        vectors,
        reduction: PhantomData,
    }
}

impl<T: Input, R: Reduction<T>> Items<R::State> for Vectored<'_, T, R> {
    const WIDTH: u64 = T::WIDTH;
    #[inline(always)]
    fn each_rows<const N: usize>(
        &mut self,
        k: u64,
        stride: u64,
        j: u64,
        mut f: impl FnMut(usize, usize, R::State),
    ) {
        let w = T::WIDTH;
        if let Some(rel) = k.checked_sub(self.head)
            && rel.is_multiple_of(w)
            && stride.is_multiple_of(w)
            && let Some(loaded) =
                T::load_rows::<N>(self.vectors, (rel / w) as usize, (stride / w) as usize)
        {
            for (r, v) in loaded.iter().enumerate() {
                for c in 0..w {
                    f(r, c as usize, R::load(T::lane(v, c as usize), j + r as u64));
                }
            }
            return;
        }
        for r in 0..N as u64 {
            let row = k + r * stride;
            self.each(row, w, |_| j + r, |c, s| f(r as usize, c, s));
        }
    }
    #[inline(always)]
    fn aligned(&self) -> bool {
        self.head == 0
    }
    #[inline(always)]
    fn each(
        &mut self,
        k: u64,
        n: u64,
        index: impl Fn(u64) -> u64,
        mut f: impl FnMut(usize, R::State),
    ) {
        // A whole group at a 16-byte boundary: one vector load (on the GPU
        // every buffer starts at one, so every whole group does).
        if n == T::WIDTH
            && let Some(rel) = k.checked_sub(self.head)
            && rel % T::WIDTH == 0
            && let Some(v) = self.vectors.load((rel / T::WIDTH) as usize)
        {
            // `v` copied whole: one 16-byte load, not one per element.
            for c in 0..T::WIDTH {
                f(c as usize, R::load(T::lane(&v, c as usize), index(c)));
            }
            return;
        }
        // The same items in the same order, one scalar load each (a constant
        // trip count, so that `c` is a constant for `f` once unrolled).
        for c in 0..T::WIDTH {
            if c < n
                && let Some(x) = self.x.load((k + c) as usize)
            {
                f(c as usize, R::load(x, index(c)));
            }
        }
    }
    #[inline(always)]
    fn fold(&mut self, mut acc: R::State, k: u64, j: u64, n: u64) -> R::State {
        self.each(k, n, |c| j + c, |_, s| acc = R::State::push(acc, s));
        acc
    }
    #[inline(always)]
    fn fold_lane_unit(&mut self, acc: R::State, k: u64, j: u64) -> Option<R::State> {
        // All of the lane's vectors at once, when they are all there (no
        // fallback written out here: `fold_unit`'s group loop is it).
        let rel = k.checked_sub(self.head)?;
        if rel % T::WIDTH != 0 {
            return None;
        }
        let v = self
            .vectors
            .get_range((rel / T::WIDTH) as usize..self.vectors.len())?;
        T::fold_lane_unit::<R>(v, acc, j)
    }
}

/// Items one at a time from `item(k, j)` (`WIDTH` 1): the states of a combine pass.
pub struct Scalar<F>(pub F);

impl<S: State, F: FnMut(usize, u64) -> S> Items<S> for Scalar<F> {
    const WIDTH: u64 = 1;
    #[inline(always)]
    fn each(&mut self, k: u64, n: u64, index: impl Fn(u64) -> u64, mut f: impl FnMut(usize, S)) {
        if n > 0 {
            f(0, (self.0)(k as usize, index(0)));
        }
    }
    #[inline(always)]
    fn fold(&mut self, acc: S, k: u64, j: u64, _: u64) -> S {
        S::combine(acc, (self.0)(k as usize, j))
    }
}

/// Item `k` of a state buffer (words `2k`, `2k + 1`: one 16-byte vector
/// load, the buffer starting at a 16-byte boundary as every one does on the
/// GPU; two scalar loads otherwise), read through [`Global::load`] (counted
/// by the emulator's memory profile); the empty state past the end.
#[inline(always)]
pub fn stored<S: State>(words: Global<'_, u64>) -> impl Fn(usize, u64) -> S + '_ {
    let (head, pairs) = words.vectors16::<2>();
    move |k, _| {
        if head == 0
            && let Some(pair) = pairs.load(k)
        {
            return S::decode(pair.0);
        }
        match (words.load(2 * k), words.load(2 * k + 1)) {
            (Some(a), Some(b)) => S::decode([a, b]),
            _ => S::empty(),
        }
    }
}

/// A rows pass: items `[rows, len]` (`item(k, j)` is item `k = row·len + j`),
/// one warp per unit of [`ROW_UNIT`] items of a row, grid-striding over the
/// `rows · ⌈len / ROW_UNIT⌉` units; unit `u` (`row · units_per_row + c`)
/// writes its state to words `2u, 2u + 1` of `states`.
///
/// The states are warp-owned (`Out<u64, WarpChunks<2>>`): every lane of a
/// warp walks the same units (the walk depends on the warp alone), so the
/// shuffles always have the full warp, and lane 0 alone writes each state.
#[inline(always)]
pub fn rows_pass<S: State>(
    rows: u64,
    len: u64,
    mut items: impl Items<S>,
    states: &mut Out<u64, WarpChunks<2>>,
) {
    let per_row = len.div_ceil(ROW_UNIT);
    if per_row == 0 {
        return; // nothing to reduce (and no division by zero below)
    }
    let units = rows.saturating_mul(per_row);
    let lane = u64::from(thread::lane_id());
    // `for_each`, not `for`: a counted loop that ptxas sees as warp-uniform.
    states.chunks(units).for_each(|mut owned| {
        let unit = owned.unit();
        let acc = fold_unit(unit / per_row, unit % per_row, len, lane, &mut items);
        if let Some(chunk) = owned.leader() {
            chunk.write(acc.encode());
        }
    });
}

/// The state of rows-pass unit `c` of row `row` (its items `c · ROW_UNIT ..`,
/// [`ROW_UNIT`] of them or up to the row's end) at lane 0 of the calling warp.
/// The unit's items are cut at the buffer's group boundaries (multiples of
/// `W =` [`Items::WIDTH`]: the first and last groups may be partial); lane
/// `lane` folds groups `lane, lane + 32, …` of the unit in order, each group's
/// items in order, then a fixed `shuffle_down` tree (16, 8, 4, 2, 1). With
/// `W = 1` (states) that is items `lane, lane + 32, …`. Every lane must call
/// it. [`rows_pass`], [`rows_fused`] and [`rows_small`] all fold with it, so
/// they agree bit for bit; the order depends on the shape alone (every buffer starts at a
/// group boundary), not on which loads are vectors.
#[inline(always)]
fn fold_unit<S: State, I: Items<S>>(row: u64, c: u64, len: u64, lane: u64, items: &mut I) -> S {
    let w = I::WIDTH;
    let start = c * ROW_UNIT;
    let end = len.min(start + ROW_UNIT);
    let base = row * len;
    let (first, last) = (base + start, base + end);
    // A full, aligned unit: whole groups and a constant trip count, which
    // the compiler unrolls, so all of a lane's loads are in flight at once.
    let k = first + w * lane;
    let whole = if end - start == ROW_UNIT && first % w == 0 {
        items.fold_lane_unit(S::empty(), k, k - base)
    } else {
        None
    };
    let mut acc = whole.unwrap_or_else(|| {
        let mut acc = S::empty();
        let mut g = first / w + lane;
        while g * w < last {
            let lo = (g * w).max(first);
            let hi = (g * w + w).min(last);
            acc = items.fold(acc, lo, lo - base, hi - lo);
            g += WARP;
        }
        acc
    });
    let mut delta = 16;
    while delta > 0 {
        acc = S::combine(acc, acc.shuffle_down(delta));
        delta /= 2;
    }
    acc
}

/// Lanes per row of [`rows_small`] for rows of `len` items read in groups
/// of `width` ([`Items::WIDTH`]): the most groups such a row can touch
/// (`⌈(len − 1) / width⌉ + 1`, a row starting at its group's last item),
/// rounded up to a power of two, or 32 (a warp per row) past 16.
pub const fn row_lanes(len: u64, width: u64) -> u64 {
    let groups = len.saturating_sub(1).div_ceil(width) + 1;
    if groups <= WARP / 2 {
        groups.next_power_of_two()
    } else {
        WARP
    }
}

/// The state of row `row` (of `rows`, `len` ≤ `lanes · width` items each,
/// `lanes` = [`row_lanes`] < 32) at sub-lane 0 of the calling lane's group
/// of `lanes` lanes: sub-lane `sub` folds group `sub` of the row, then a
/// `shuffle_down` tree (`lanes / 2`, …, 1). The same bits as [`fold_unit`]:
/// its lanes past the row's groups hold the empty state, and its tree's
/// first levels only combine lane 0's partial state with those (`combine(x,
/// empty)` is `x`). Lanes of a row past `rows` fold nothing; every lane must
/// call it.
#[inline(always)]
fn fold_short_row<S: State, I: Items<S>>(
    row: u64,
    rows: u64,
    len: u64,
    sub: u64,
    lanes: u64,
    items: &mut I,
) -> S {
    let w = I::WIDTH;
    let mut acc = S::empty();
    if row < rows {
        let (first, last) = (row * len, row * len + len);
        let g = first / w + sub;
        if g * w < last {
            let lo = (g * w).max(first);
            let hi = (g * w + w).min(last);
            acc = items.fold(acc, lo, lo - first, hi - lo);
        }
    }
    let mut delta = lanes / 2;
    while delta > 0 {
        acc = S::combine(acc, acc.shuffle_down(delta as u32));
        delta /= 2;
    }
    acc
}

/// Writes `state` to words `at`, `at + 1` of `out` (in bounds).
#[inline(always)]
fn write_state<S: State>(out: &mut Out<u64>, at: u64, state: S) {
    let [a, b] = state.encode();
    if let Some(mut w) = out.at(at as usize) {
        w.set(a);
    }
    if let Some(mut w) = out.at(at as usize + 1) {
        w.set(b);
    }
}

/// States per row at each level of a rows reduction of `len`-item rows:
/// level 0 holds the units' states (`⌈len / ROW_UNIT⌉`), level `ℓ + 1` one
/// state per [`ROW_UNIT`] states of level `ℓ` (`⌈n_ℓ / ROW_UNIT⌉`), up to
/// the level of one state per row (the row's final state).
#[inline(always)]
const fn level_states(len: u64, level: u32) -> u64 {
    let mut n = len.div_ceil(ROW_UNIT);
    let mut l = 0;
    while l < level {
        n = n.div_ceil(ROW_UNIT);
        l += 1;
    }
    n
}

/// Where level `level`'s tickets and states start in [`rows_fused`]'s
/// buffers, for `rows` rows of `len` items: the tickets, one per state of
/// every level from 1 up (`[rows, n_ℓ]` per level, ticket `row · n_ℓ + g`
/// counting the arrivals at state `g` of `row`), and each level's states,
/// two words each (`[rows, n_ℓ]` per level, from level 0). With `level` one
/// past the last, they are the buffers' sizes in words.
#[inline(always)]
const fn fused_offsets(rows: u64, len: u64, level: u32) -> (u64, u64) {
    let (mut tickets, mut states) = (0, 0);
    let mut l = 0;
    while l < level {
        let n = level_states(len, l);
        if l >= 1 {
            tickets += rows * n;
        }
        states += 2 * rows * n;
        l += 1;
    }
    (tickets, states)
}

/// Levels of a rows reduction of `len`-item rows: the first with one state
/// per row (0 when a row is one unit).
#[inline(always)]
const fn top_level(len: u64) -> u32 {
    let mut l = 0;
    while level_states(len, l) > 1 {
        l += 1;
    }
    l
}

/// Words of [`rows_fused`]'s tickets (0 between launches: each is reset by
/// the block that takes its last) and of its partial states, for `rows`
/// rows of `len` items: the tickets, one per combine unit of every level
/// (`rows · (n₁ + n₂ + …)`, `n_ℓ` the states per row at level `ℓ`); the
/// states, two words per state of every level (about `2.004 · rows ·
/// ⌈len / ROW_UNIT⌉`). Two buffers, so that a buffer that once held
/// states never lends a word to a ticket.
pub const fn fused_words(rows: u64, len: u64) -> (u64, u64) {
    fused_offsets(rows, len, top_level(len) + 1)
}

/// Units per task of [`rows_fused`]: a power of two from the warps of a
/// block to [`ROW_UNIT`] (so a task never straddles a combine unit), about
/// a quarter of the units per block, so every block of the grid has tasks
/// and few tasks are left for the last blocks. It decides which block folds
/// which unit, never in what order anything is folded.
#[inline(always)]
fn task_units(units: u64, blocks: u64, warps_per_block: u64) -> u64 {
    let share = units / (4 * blocks).max(1);
    let pow2 = if share == 0 {
        1
    } else {
        1 << (63 - share.leading_zeros())
    };
    pow2.clamp(warps_per_block.next_power_of_two(), ROW_UNIT)
}

/// A whole rows reduction in one launch, finished, for rows of any length:
/// the bits of [`rows_pass`] followed by `rows_pass`es over the states until
/// one per row is left and a `finish_*` kernel, with one launch and no
/// combine or finish kernels. `finish(row, state)` is called once per row
/// with the row's final state, by lane 0 of warp 0 of the block that
/// completed it.
///
/// The units of each row are cut into tasks of `T` consecutive units
/// (`task_units`: a power of two dividing [`ROW_UNIT`], chosen from the
/// grid, so every block has work); the blocks grid-stride over the tasks,
/// warp `w` of a block folding units `w, w + 8, …` of its task
/// (`fold_unit`) into level 0 of `states` (see [`fused_words`]). Then the
/// block climbs the combine tree, "last block done" at each level: a
/// barrier, thread 0 fences (device scope, release) and adds 1 to the
/// ticket (in `tickets`, all 0 before the launch) of the level-1 state its
/// task feeds; the block that takes the
/// last of that state's tickets (one per task of its 512 units) fences
/// again (acquire), sets the ticket back to 0 (ready for the next launch,
/// no memset), and its warp 0 folds the 512 states of that combine unit in
/// the combine pass's order (`fold_unit` over [`Scalar`] states: the order
/// depends on the unit indices alone, never on which block arrived last).
/// It writes the level-1 state and takes a ticket of the level-2 state it
/// feeds in turn, and so on; the block that completes a row's last level
/// hands the state to `finish`. Every ticket taken is one the launch
/// completes, so every ticket is 0 again when the launch ends.
///
/// Needs `len > ROW_UNIT` (at least one combine level) and a 1-D launch of
/// [`BLOCK_THREADS`]-thread blocks.
#[inline(always)]
pub fn rows_fused<S: State>(
    rows: u64,
    len: u64,
    items: impl Items<S>,
    tickets: &mut Out<u64>,
    states: &mut Out<u64>,
    finish: impl FnMut(u64, S),
) {
    rows_fused_fenced::<S, true>(rows, len, items, tickets, states, finish);
}

/// [`rows_fused`] without its fences: a broken kernel, for the test that
/// the emulator's race detector reports the combining block's reads.
#[doc(hidden)]
#[inline(always)]
pub fn rows_fused_without_fences<S: State>(
    rows: u64,
    len: u64,
    items: impl Items<S>,
    tickets: &mut Out<u64>,
    states: &mut Out<u64>,
    finish: impl FnMut(u64, S),
) {
    rows_fused_fenced::<S, false>(rows, len, items, tickets, states, finish);
}

#[inline(always)]
fn rows_fused_fenced<S: State, const FENCE: bool>(
    rows: u64,
    len: u64,
    mut items: impl Items<S>,
    tickets: &mut Out<u64>,
    states: &mut Out<u64>,
    mut finish: impl FnMut(u64, S),
) {
    let per_row = len.div_ceil(ROW_UNIT);
    let units = rows.saturating_mul(per_row);
    let lane = u64::from(thread::lane_id());
    let warps_per_block = u64::from(thread::block_dim().x) / WARP;
    let block = u64::from(thread::block_idx().x);
    let blocks = u64::from(thread::grid_dim().x);
    let warp_in_block = u64::from(thread::thread_idx().x) / WARP;
    let task = task_units(units, blocks, warps_per_block);
    let tasks_per_row = per_row.div_ceil(task);
    let tasks = rows.saturating_mul(tasks_per_row);
    // The walk depends on the block alone, so every thread meets the
    // barriers, and on the warp alone within it, so the shuffles have the
    // full warp.
    let mut t = block;
    while t < tasks {
        let row = t / tasks_per_row;
        let first = t % tasks_per_row * task;
        let end = per_row.min(first + task);
        let mut c = first + warp_in_block;
        while c < end {
            let acc = fold_unit(row, c, len, lane, &mut items);
            if lane == 0 {
                write_state(states, 2 * (row * per_row + c), acc);
            }
            c += warps_per_block;
        }
        // Climb: level `level`'s state `g` of `row` waits for `arrivals`
        // tickets (its tasks at level 1, its 512 states' blocks above).
        let mut level = 1;
        let mut g = first / ROW_UNIT;
        let mut arrivals = (per_row - g * ROW_UNIT).min(ROW_UNIT).div_ceil(task);
        loop {
            // Publish this block's states; the last block to arrive sees everyone's.
            sync::sync_threads();
            let n = level_states(len, level);
            let (at, _) = fused_offsets(rows, len, level);
            let mut last = false;
            if thread::thread_idx().x == 0 {
                if FENCE {
                    sync::fence(sync::Scope::Device);
                }
                if let Some(ticket) = tickets.atomic::<atomic::Device>((at + row * n + g) as usize)
                {
                    last = ticket.fetch_add(1) == arrivals - 1;
                    if last {
                        if FENCE {
                            sync::fence(sync::Scope::Device);
                        }
                        ticket.swap(0); // ready for the next launch: no memset
                    }
                }
            }
            if !sync::sync_threads_or(last) {
                break;
            }
            // This block folds combine unit `g` of the row: states
            // `g·512 ..` of level `level − 1`, as a combine pass would.
            let below = level_states(len, level - 1);
            let from = fused_offsets(rows, len, level - 1).1 + 2 * row * below;
            if warp_in_block == 0 {
                let mut level_below = Scalar(|k: usize, _| {
                    let mut word = |i: usize| states.at(from as usize + i).map_or(0, |w| w.get());
                    S::decode([word(2 * k), word(2 * k + 1)])
                });
                let acc = fold_unit(0, g, below, lane, &mut level_below);
                if lane == 0 {
                    if n == 1 {
                        finish(row, acc);
                    } else {
                        let to = fused_offsets(rows, len, level).1 + 2 * (row * n + g);
                        write_state(states, to, acc);
                    }
                }
            }
            if n == 1 {
                break;
            }
            level += 1;
            g /= ROW_UNIT;
            arrivals = (n - g * ROW_UNIT).min(ROW_UNIT);
        }
        t += blocks;
    }
}

/// A whole rows reduction in one launch, finished: the bits of [`rows_pass`]
/// followed by the combine `rows_pass` (if any) and a `finish_*` kernel, with
/// no partial states in global memory. `finish(row, state)` is called once per
/// row, by lane 0 of the warp that holds the row's final state.
///
/// - `len ≤ ROW_UNIT` (one unit per row): a warp per row, grid-striding over
///   the rows; the unit's state is the row's (`fold_unit`, as in the pass).
///   Rows that touch at most 16 groups ([`row_lanes`] `= L < 32`) share a
///   warp instead: `32 / L` consecutive rows, `L` lanes each
///   (`fold_short_row`: the same bits with fewer idle lanes and tree levels).
/// - `ROW_UNIT < len ≤ SMALL_MAX_UNITS · ROW_UNIT`: a block per row,
///   grid-striding over the rows. Warp `w` folds units `w, w + 16, …` of the
///   row (`fold_unit`) and lane 0 stores each state, encoded, in shared
///   memory; after a barrier warp 0 folds those states like the combine pass
///   does (one unit of `⌈len / ROW_UNIT⌉ ≤ 512` states: `fold_unit` over
///   [`Scalar`] items), then a barrier before the next row reuses them.
///
/// Longer rows trap (the host never launches them). Needs a 1-D launch of
/// [`SMALL_BLOCK_THREADS`]-thread blocks and `2 · SMALL_MAX_UNITS` words of
/// shared memory.
#[inline(always)]
pub fn rows_small<S: State, I: Items<S>>(
    rows: u64,
    len: u64,
    mut items: I,
    mut finish: impl FnMut(u64, S),
) {
    let per_row = len.div_ceil(ROW_UNIT);
    // Uniform over the grid: every thread traps alike, before any barrier.
    assert!(
        per_row <= SMALL_MAX_UNITS,
        "rows_small: a row has more than SMALL_MAX_UNITS units"
    );
    let lane = u64::from(thread::lane_id());
    let warps_per_block = u64::from(thread::block_dim().x) / WARP;
    let warp_in_block = u64::from(thread::thread_idx().x) / WARP;
    let block = u64::from(thread::block_idx().x);
    let blocks = u64::from(thread::grid_dim().x);
    let lanes = row_lanes(len, I::WIDTH);
    if per_row <= 1 && lanes < WARP {
        // Short rows: `32 / lanes` consecutive rows per warp, `lanes` lanes
        // each. The walk depends on the warp alone, so the shuffles have the
        // full warp.
        let per_warp = WARP / lanes;
        let (slot, sub) = (lane / lanes, lane % lanes);
        let mut row0 = (block * warps_per_block + warp_in_block) * per_warp;
        while row0 < rows {
            let row = row0 + slot;
            let acc = fold_short_row(row, rows, len, sub, lanes, &mut items);
            if sub == 0 && row < rows {
                finish(row, acc);
            }
            row0 += blocks * warps_per_block * per_warp;
        }
        return;
    }
    // One unit per row (a row of no items has one, empty): a warp per row,
    // the block's warps on consecutive rows. More: a block per row, its warps
    // on the row's units, their states combined through shared memory.
    let (per_row, rows_per_step) = match per_row {
        0 | 1 => (1, warps_per_block),
        _ => (per_row, 1),
    };
    let states = shared::array::<u64, { 2 * SMALL_MAX_UNITS as usize }>();
    // The walk depends on the block alone, so every thread meets the
    // barriers, and on the warp alone within it, so the shuffles have the
    // full warp.
    let mut row0 = block * rows_per_step;
    while row0 < rows {
        let mut u = warp_in_block;
        while u < rows_per_step * per_row {
            let (row, c) = if per_row == 1 {
                (row0 + u, 0)
            } else {
                (row0, u)
            };
            if row < rows {
                let acc = fold_unit(row, c, len, lane, &mut items);
                if lane == 0 {
                    if per_row == 1 {
                        finish(row, acc);
                    } else {
                        let [a, b] = acc.encode();
                        states.store(2 * c as usize, a);
                        states.store(2 * c as usize + 1, b);
                    }
                }
            }
            u += warps_per_block;
        }
        if per_row > 1 {
            sync::sync_threads();
            if warp_in_block == 0 {
                let mut level =
                    Scalar(|k: usize, _| S::decode([states.load(2 * k), states.load(2 * k + 1)]));
                let acc = fold_unit(0, 0, per_row, lane, &mut level);
                if lane == 0 {
                    finish(row0, acc);
                }
            }
            sync::sync_threads();
        }
        row0 += blocks * rows_per_step;
    }
}

/// How a final state's words become an output of type `O` (the `finish_*`
/// kernels' step, which the one-launch kernels, over [`rows_small`] and
/// [`rows_fused`], apply themselves).
pub trait Finish<O> {
    /// The output of state `words`; `code` is a [`finish`] constant (float
    /// values only), `count` the elements the state covers (for the mean).
    fn value(code: u32, words: [u64; 2], count: u64) -> O;
}

/// A float state finished by its code ([`finish_float`]), rounded once to
/// the output type (f16, bf16 from f32).
pub struct FloatValue;
/// An integer state's value (sum, min, max).
pub struct IntValue;
/// An arg state's index along the reduced axis (argmin, argmax).
pub struct Index;

macro_rules! float_value {
    ($($o:ty: $acc:ty, $round:expr;)*) => { $(
        impl Finish<$o> for FloatValue {
            #[inline(always)]
            fn value(code: u32, words: [u64; 2], count: u64) -> $o {
                $round(finish_float::<$acc>(code, words, count))
            }
        }
    )* };
}
float_value! {
    f32: f32, core::convert::identity;
    f16: f32, num::f16_from_f32;
    bf16: f32, num::bf16_from_f32;
    f64: f64, core::convert::identity;
}

impl<A: Acc> Finish<A> for IntValue {
    #[inline(always)]
    fn value(_: u32, words: [u64; 2], _: u64) -> A {
        A::from_word(words[0])
    }
}

impl Finish<i64> for Index {
    #[inline(always)]
    fn value(_: u32, words: [u64; 2], _: u64) -> i64 {
        words[1] as i64
    }
}

/// The most items of a group ([`Items::WIDTH`]): 8 (f16, bf16 elements).
const MAX_WIDTH: usize = 8;

/// A columns pass: items `[outer, len, inner]` (item
/// `k = (o·len + j)·inner + i` at position `j`), one thread per unit
/// `(o, c, g)` folding items `j ∈ [c·COL_UNIT, min(len, (c+1)·COL_UNIT))`
/// in order for each of the columns `i ∈ [g·W, min(inner, (g+1)·W))`
/// (`W =` [`Items::WIDTH`]: 16 bytes of elements, one state), grid-striding
/// over the `outer · ⌈len / COL_UNIT⌉ · ⌈inner / W⌉` units; column `i` of
/// unit `(o, c, g)` writes its state to words `2u, 2u + 1` of `states`, with
/// `u = (o·⌈len / COL_UNIT⌉ + c)·inner + i`.
///
/// Consecutive threads take consecutive groups of a row, so a warp reads
/// `32 · 16` consecutive bytes (four whole 128-byte lines) per `j`, each
/// group with one 16-byte vector load. That needs every group of every row
/// to be a whole, aligned vector: `inner` a multiple of `W` and the buffer
/// 16-byte aligned ([`Items::aligned`]). Otherwise (decided once per launch)
/// the pass takes one column per thread (`W = 1`, [`Singles`]): consecutive
/// threads read consecutive elements of a row with scalar loads, which a
/// warp still coalesces whole. Each column's fold is the one a thread per
/// column would do, so neither the grouping nor the load width changes a
/// bit.
#[inline(always)]
pub fn cols_pass<S: State, I: Items<S>>(
    outer: u64,
    len: u64,
    inner: u64,
    items: I,
    states: &mut Out<u64>,
) {
    if I::WIDTH == 1 || (inner.is_multiple_of(I::WIDTH) && items.aligned()) {
        cols_walk(outer, len, inner, items, states);
    } else {
        cols_walk(outer, len, inner, Singles(items), states);
    }
}

/// The items of `I` one at a time (`WIDTH` 1, each read by a scalar load):
/// [`cols_pass`]'s thread per column when its groups are not whole vectors.
pub struct Singles<I>(pub I);

impl<S: State, I: Items<S>> Items<S> for Singles<I> {
    const WIDTH: u64 = 1;
    #[inline(always)]
    fn each(&mut self, k: u64, n: u64, index: impl Fn(u64) -> u64, f: impl FnMut(usize, S)) {
        if n > 0 {
            self.0.each(k, 1, index, f);
        }
    }
    #[inline(always)]
    fn fold(&mut self, acc: S, k: u64, j: u64, n: u64) -> S {
        if n > 0 {
            self.0.fold(acc, k, j, 1)
        } else {
            acc
        }
    }
}

/// [`cols_pass`] with groups of `I::WIDTH` columns.
#[inline(always)]
fn cols_walk<S: State>(
    outer: u64,
    len: u64,
    inner: u64,
    mut items: impl Items<S>,
    states: &mut Out<u64>,
) {
    let w = items_width(&items);
    let chunks = len.div_ceil(COL_UNIT);
    if chunks == 0 || inner == 0 {
        return; // nothing to reduce (and no division by zero below)
    }
    let groups = inner.div_ceil(w);
    let units = outer.saturating_mul(chunks).saturating_mul(groups);
    let mut unit = thread::global_index_x() as u64;
    while unit < units {
        let (rest, g) = (unit / groups, unit % groups);
        let (o, c) = (rest / chunks, rest % chunks);
        let i = g * w;
        let n = w.min(inner - i);
        let start = c * COL_UNIT;
        let end = len.min(start + COL_UNIT);
        let mut acc = [S::empty(); MAX_WIDTH];
        for j in start..end {
            let k = (o * len + j) * inner + i;
            items.each(k, n, |_| j, |col, s| acc[col] = S::push(acc[col], s));
        }
        // A constant trip count again: `acc` stays in registers.
        let first = (o * chunks + c) * inner + i;
        for col in 0..w {
            if col < n {
                write_state(states, 2 * (first + col), acc[col as usize]);
            }
        }
        unit += thread::grid_stride_x() as u64;
    }
}

/// States per output at level `level` of a columns reduction over `len`
/// rows: level 0 holds the units' states (`⌈len / COL_UNIT⌉` chunks),
/// level `ℓ + 1` one state per [`COL_UNIT`] states of level `ℓ`.
#[inline(always)]
const fn col_level_states(len: u64, level: u32) -> u64 {
    let mut n = len.div_ceil(COL_UNIT);
    let mut l = 0;
    while l < level {
        n = n.div_ceil(COL_UNIT);
        l += 1;
    }
    n
}

/// The first level of a columns reduction over `len` rows with one state
/// per output (0 when `len ≤ COL_UNIT`).
#[inline(always)]
const fn col_top_level(len: u64) -> u32 {
    let mut l = 0;
    while col_level_states(len, l) > 1 {
        l += 1;
    }
    l
}

/// Column tiles per row of [`cols_fused`]'s tickets: `inner` columns in
/// tiles of up to [`BLOCK_THREADS`] (a power of two), the most any item
/// width makes (a tile holds that many groups of `W ≥ 1` columns).
#[inline(always)]
const fn ticket_tiles(inner: u64) -> u64 {
    let threads = BLOCK_THREADS as u64;
    let tile = if inner.next_power_of_two() < threads {
        inner.next_power_of_two()
    } else {
        threads
    };
    inner.div_ceil(tile)
}

/// Where level `level`'s tickets and states start in [`cols_fused`]'s
/// buffers for `[outer, len, inner]`: the tickets `[outer, n_ℓ, tiles]` of
/// every level from 1 up (`tiles` = `ticket_tiles`), the states `[outer,
/// n_ℓ, inner]`, two words each, of every level from 0. With `level` one
/// past the last, the buffers' sizes in words.
#[inline(always)]
const fn cols_fused_offsets(outer: u64, len: u64, inner: u64, level: u32) -> (u64, u64) {
    let (mut tickets, mut states) = (0, 0);
    let mut l = 0;
    while l < level {
        let n = col_level_states(len, l);
        if l >= 1 {
            tickets += outer * n * ticket_tiles(inner);
        }
        states += 2 * outer * n * inner;
        l += 1;
    }
    (tickets, states)
}

/// Words of [`cols_fused`]'s tickets (0 between launches) and partial
/// states for `[outer, len, inner]` (see `cols_fused_offsets`; none when
/// `len ≤ COL_UNIT`: one unit per column, finished where it is folded).
pub const fn cols_fused_words(outer: u64, len: u64, inner: u64) -> (u64, u64) {
    if len <= COL_UNIT {
        return (0, 0);
    }
    cols_fused_offsets(outer, len, inner, col_top_level(len) + 1)
}

/// Rows of its column group a thread of [`cols_fused`] loads at once (16
/// bytes each): with 2 blocks of 256 threads per SM (its registers), 32 KiB
/// of loads in flight per SM, what 8 blocks of the one-row-at-a-time
/// columns pass have.
const COL_ROWS_IN_FLIGHT: usize = 4;

/// [`cols_fused`]'s tiling of `inner` columns read in groups of `width`
/// by blocks of `threads` threads: `(tile, per_task, tiles)`, a task being
/// `tile` consecutive groups (a power of two, at most `threads`) times
/// `per_task = min(threads / tile, COL_UNIT)` consecutive chunks of
/// [`COL_UNIT`] rows, and `tiles` the tiles of a row.
#[inline(always)]
pub const fn cols_fused_tiling(inner: u64, width: u64, threads: u64) -> (u64, u64, u64) {
    let groups = inner.div_ceil(width);
    let tile = if groups.next_power_of_two() < threads {
        groups.next_power_of_two()
    } else {
        threads
    };
    let per_task = if threads / tile < COL_UNIT {
        threads / tile
    } else {
        COL_UNIT
    };
    (tile, per_task, groups.div_ceil(tile))
}

/// [`cols_fused`]'s tasks for `[outer, len, inner]` read in groups of
/// `width` columns by [`BLOCK_THREADS`]-thread blocks: the most blocks
/// that have work.
pub const fn cols_fused_tasks(outer: u64, len: u64, inner: u64, width: u64) -> u64 {
    let (_, per_task, tiles) = cols_fused_tiling(inner, width, BLOCK_THREADS as u64);
    outer
        .saturating_mul(len.div_ceil(COL_UNIT).div_ceil(per_task))
        .saturating_mul(tiles)
}

/// A whole columns reduction in one launch, finished: the bits of
/// [`cols_pass`] followed by `cols_pass`es over the states until one per
/// output is left and a `finish_*` kernel. `finish(k, state)` is called once
/// per output `k = o · inner + i` with its final state.
///
/// A block's threads take `tile` consecutive groups of `W` columns (a power
/// of two, at most the block, the groups of a row rounded up) and `256 /
/// tile` consecutive chunks of [`COL_UNIT`] rows (at most 64, so a task
/// never straddles a combine unit): a task. A warp reads 32 groups of a row
/// (512 bytes, four whole 128-byte lines) where a row has that many; the
/// blocks grid-stride over the tasks. Each thread folds its unit as
/// [`cols_pass`] does and writes its `W` states (level 0); with one chunk per
/// column (`len ≤ COL_UNIT`) it hands them to `finish` instead, and the
/// launch is done. Else the block climbs the combine tree, "last block
/// done" at each level as in [`rows_fused`]: a barrier, thread 0 fences and
/// takes a ticket of the combine unit (`COL_UNIT` states of every column of
/// the tile) its task feeds; the block that takes its last ticket fences
/// again, resets it to 0, and folds, one thread per column, each column's
/// `COL_UNIT` states in index order (the combine pass's fold), writing the
/// next level's state or, at the top, the output. Needs a 1-D launch of
/// [`BLOCK_THREADS`]-thread blocks; `tickets` all 0 before it, and they are
/// again after.
#[inline(always)]
pub fn cols_fused<S: State, I: Items<S>>(
    shape: [u64; 3],
    items: I,
    tickets: &mut Out<u64>,
    states: &mut Out<u64>,
    finish: impl FnMut(u64, S),
) {
    let inner = shape[2];
    if I::WIDTH == 1 || (inner.is_multiple_of(I::WIDTH) && items.aligned()) {
        cols_fused_walk::<S, true>(shape, items, tickets, states, finish);
    } else {
        cols_fused_walk::<S, true>(shape, Singles(items), tickets, states, finish);
    }
}

/// [`cols_fused`] without its fences: a broken kernel, for the test that the
/// emulator's race detector reports the combining block's reads.
#[doc(hidden)]
#[inline(always)]
pub fn cols_fused_without_fences<S: State, I: Items<S>>(
    shape: [u64; 3],
    items: I,
    tickets: &mut Out<u64>,
    states: &mut Out<u64>,
    finish: impl FnMut(u64, S),
) {
    cols_fused_walk::<S, false>(shape, Singles(items), tickets, states, finish);
}

#[inline(always)]
fn cols_fused_walk<S: State, const FENCE: bool>(
    [outer, len, inner]: [u64; 3],
    mut items: impl Items<S>,
    tickets: &mut Out<u64>,
    states: &mut Out<u64>,
    mut finish: impl FnMut(u64, S),
) {
    let w = items_width(&items);
    let chunks = len.div_ceil(COL_UNIT);
    if chunks == 0 || inner == 0 {
        return; // nothing to reduce (and no division by zero below)
    }
    let threads = u64::from(thread::block_dim().x);
    let tid = u64::from(thread::thread_idx().x);
    let groups = inner.div_ceil(w);
    let (tile, per_task, tiles) = cols_fused_tiling(inner, w, threads);
    let chunk_tasks = chunks.div_ceil(per_task);
    let tasks = outer.saturating_mul(chunk_tasks).saturating_mul(tiles);
    let stride = ticket_tiles(inner);
    let (sub, lane_group) = (tid / tile, tid % tile);
    let word = |states: &mut Out<u64>, i: u64| states.at(i as usize).map_or(0, |w| w.get());
    // The walk depends on the block alone, so every thread meets the barriers.
    let mut t = u64::from(thread::block_idx().x);
    while t < tasks {
        let (rest, tl) = (t / tiles, t % tiles);
        let (o, chunk_task) = (rest / chunk_tasks, rest % chunk_tasks);
        let c = chunk_task * per_task + sub;
        let g = tl * tile + lane_group;
        if sub < per_task && c < chunks && g < groups {
            let i = g * w;
            let n = w.min(inner - i);
            let start = c * COL_UNIT;
            let end = len.min(start + COL_UNIT);
            let mut acc = [S::empty(); MAX_WIDTH];
            let mut j = start;
            // A whole group: `COL_ROWS_IN_FLIGHT` rows at a time, their
            // loads issued together (each column still folded in row order).
            if n == w {
                while j + COL_ROWS_IN_FLIGHT as u64 <= end {
                    let k = (o * len + j) * inner + i;
                    items.each_rows::<COL_ROWS_IN_FLIGHT>(k, inner, j, |_, col, s| {
                        acc[col] = S::push(acc[col], s)
                    });
                    j += COL_ROWS_IN_FLIGHT as u64;
                }
            }
            while j < end {
                let k = (o * len + j) * inner + i;
                items.each(k, n, |_| j, |col, s| acc[col] = S::push(acc[col], s));
                j += 1;
            }
            // A constant trip count again: `acc` stays in registers.
            for col in 0..w {
                if col < n {
                    let column = i + col;
                    if chunks == 1 {
                        finish(o * inner + column, acc[col as usize]);
                    } else {
                        let at = 2 * ((o * chunks + c) * inner + column);
                        write_state(states, at, acc[col as usize]);
                    }
                }
            }
        }
        // Climb: level `level`'s state `cl` of the tile's columns waits for
        // `arrivals` tickets (its tasks at level 1, its 64 states above).
        let mut level = 1;
        let mut cl = chunk_task * per_task / COL_UNIT;
        let mut arrivals = (chunks - cl * COL_UNIT).min(COL_UNIT).div_ceil(per_task);
        if chunks > 1 {
            loop {
                sync::sync_threads();
                let n = col_level_states(len, level);
                let (at, to) = cols_fused_offsets(outer, len, inner, level);
                let mut last = false;
                if tid == 0 {
                    if FENCE {
                        sync::fence(sync::Scope::Device);
                    }
                    let ticket = at + (o * n + cl) * stride + tl;
                    if let Some(ticket) = tickets.atomic::<atomic::Device>(ticket as usize) {
                        last = ticket.fetch_add(1) == arrivals - 1;
                        if last {
                            if FENCE {
                                sync::fence(sync::Scope::Device);
                            }
                            ticket.swap(0); // ready for the next launch: no memset
                        }
                    }
                }
                if !sync::sync_threads_or(last) {
                    break;
                }
                // This block folds combine unit `cl` of every column of its
                // tile: states `cl·64 ..` of level `level − 1`, each column in
                // index order, as a combine pass would.
                let below = col_level_states(len, level - 1);
                let from = cols_fused_offsets(outer, len, inner, level - 1).1;
                let (c0, c1) = (cl * COL_UNIT, below.min(cl * COL_UNIT + COL_UNIT));
                let mut column = tl * tile * w + tid;
                let end_column = inner.min((tl + 1) * tile * w);
                while column < end_column {
                    let mut acc = S::empty();
                    for c in c0..c1 {
                        let at = from + 2 * ((o * below + c) * inner + column);
                        let s = S::decode([word(states, at), word(states, at + 1)]);
                        acc = S::push(acc, s);
                    }
                    if n == 1 {
                        finish(o * inner + column, acc);
                    } else {
                        write_state(states, to + 2 * ((o * n + cl) * inner + column), acc);
                    }
                    column += threads;
                }
                if n == 1 {
                    break;
                }
                level += 1;
                cl /= COL_UNIT;
                arrivals = (n - cl * COL_UNIT).min(COL_UNIT);
            }
        }
        t += u64::from(thread::grid_dim().x);
    }
}

/// `I::WIDTH`, checked at compile time to fit [`cols_pass`]'s accumulators.
#[inline(always)]
fn items_width<S: State, I: Items<S>>(_: &I) -> u64 {
    const {
        assert!(
            I::WIDTH as usize <= MAX_WIDTH,
            "a group has at most MAX_WIDTH items"
        )
    };
    I::WIDTH
}

/// Output `k` = `value(words of state k)` for every `k < out.len()`, one
/// thread per output, grid-striding over the outputs it owns; each state
/// read with one 16-byte load where the buffer is aligned ([`stored`]'s
/// reads).
#[inline(always)]
pub fn finish_pass<T: Copy>(
    states: Global<'_, u64>,
    out: &mut Out<T, Elements>,
    value: impl Fn([u64; 2]) -> T,
) {
    let (head, pairs) = states.vectors16::<2>();
    for mut owned in out.grid_stride() {
        let k = owned.index();
        let words = if head == 0 {
            pairs.load(k).map(|pair| pair.0)
        } else {
            match (states.load(2 * k), states.load(2 * k + 1)) {
                (Some(a), Some(b)) => Some([a, b]),
                _ => None,
            }
        };
        if let Some(words) = words {
            owned.set(value(words));
        }
    }
}

/// The value of a float state finished by `code` (a [`finish`] constant);
/// `count` is the number of elements the state covers (for the mean).
#[inline(always)]
pub fn finish_float<F: Float>(code: u32, words: [u64; 2], count: u64) -> F {
    let value = match code {
        finish::MEAN => F::from_word(words[0]).mean(count),
        finish::NORM2 => F::from_word(words[0]).sqrt(),
        finish::LOGSUMEXP => state::LseState::<F>::decode(words).finish(),
        _ => F::from_word(words[0]),
    };
    // One NaN whatever the path and backend: a NaN's bits depend on which
    // instruction made it (the GPU's adds write 0x7fff_ffff, the host's keep
    // a payload) and on whether LLVM folded an add away (`-0.0 + x` is `x`
    // to it, so a one-element row of the small path kept its input's NaN
    // while the multi-pass path's combine add replaced it, on an H200).
    if value.is_nan() { F::NAN } else { value }
}
