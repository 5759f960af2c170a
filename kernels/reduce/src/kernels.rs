//! The reduction kernels, stamped out by `macro_rules!` from the passes in
//! [`super`]: `reduce_{rows,cols}_OP_DTYPE` read elements, `combine_{rows,cols}_STATE_ACC`
//! read the states of an earlier pass, `finish_*` turn states into outputs,
//! and the one-launch `reduce_{small,fused}_OP_DTYPE` do all three.

use super::state::{
    ArgMax, ArgMin, ArgState, ExtremeState, LogSumExp, LseState, Max, Min, State, Sum,
    SumOfSquares, SumState,
};
use super::{
    Finish, FloatValue, Index, Input, IntValue, Reduction, SMALL_MAX_UNITS, Scalar, cols_fused,
    cols_pass, finish_pass, rows_fused, rows_pass, rows_small, stored, vectored,
};

use warpforge_device::own::{Elements, WarpChunks};
use warpforge_device::{Global, Out, bf16, f16};
use warpforge_macros::kernel;

macro_rules! element_passes {
    ($($rows:ident, $cols:ident: $r:ty, $t:ty;)*) => { $(
        #[doc = concat!("Rows pass of `", stringify!($r), "` over `", stringify!($t), "` elements `[rows, len]` (see [`rows_pass`]).")]
        #[kernel(block = 256)]
        pub fn $rows(x: Global<$t>, rows: u64, len: u64, mut states: Out<u64, WarpChunks<2>>) {
            rows_pass(rows, len, vectored::<$t, $r>(x), &mut states);
        }

        #[doc = concat!("Columns pass of `", stringify!($r), "` over `", stringify!($t), "` elements `[outer, len, inner]` (see [`cols_pass`]).")]
        #[kernel(block = 256)]
        pub fn $cols(x: Global<$t>, outer: u64, len: u64, inner: u64, mut states: Out<u64>) {
            cols_pass(outer, len, inner, vectored::<$t, $r>(x), &mut states);
        }
    )* };
}

element_passes! {
    reduce_rows_sum_f32, reduce_cols_sum_f32: Sum, f32;
    reduce_rows_sumsq_f32, reduce_cols_sumsq_f32: SumOfSquares, f32;
    reduce_rows_min_f32, reduce_cols_min_f32: Min, f32;
    reduce_rows_max_f32, reduce_cols_max_f32: Max, f32;
    reduce_rows_argmin_f32, reduce_cols_argmin_f32: ArgMin, f32;
    reduce_rows_argmax_f32, reduce_cols_argmax_f32: ArgMax, f32;
    reduce_rows_lse_f32, reduce_cols_lse_f32: LogSumExp, f32;
    reduce_rows_sum_f64, reduce_cols_sum_f64: Sum, f64;
    reduce_rows_sumsq_f64, reduce_cols_sumsq_f64: SumOfSquares, f64;
    reduce_rows_min_f64, reduce_cols_min_f64: Min, f64;
    reduce_rows_max_f64, reduce_cols_max_f64: Max, f64;
    reduce_rows_argmin_f64, reduce_cols_argmin_f64: ArgMin, f64;
    reduce_rows_argmax_f64, reduce_cols_argmax_f64: ArgMax, f64;
    reduce_rows_lse_f64, reduce_cols_lse_f64: LogSumExp, f64;
    reduce_rows_sum_f16, reduce_cols_sum_f16: Sum, f16;
    reduce_rows_sumsq_f16, reduce_cols_sumsq_f16: SumOfSquares, f16;
    reduce_rows_min_f16, reduce_cols_min_f16: Min, f16;
    reduce_rows_max_f16, reduce_cols_max_f16: Max, f16;
    reduce_rows_argmin_f16, reduce_cols_argmin_f16: ArgMin, f16;
    reduce_rows_argmax_f16, reduce_cols_argmax_f16: ArgMax, f16;
    reduce_rows_lse_f16, reduce_cols_lse_f16: LogSumExp, f16;
    reduce_rows_sum_bf16, reduce_cols_sum_bf16: Sum, bf16;
    reduce_rows_sumsq_bf16, reduce_cols_sumsq_bf16: SumOfSquares, bf16;
    reduce_rows_min_bf16, reduce_cols_min_bf16: Min, bf16;
    reduce_rows_max_bf16, reduce_cols_max_bf16: Max, bf16;
    reduce_rows_argmin_bf16, reduce_cols_argmin_bf16: ArgMin, bf16;
    reduce_rows_argmax_bf16, reduce_cols_argmax_bf16: ArgMax, bf16;
    reduce_rows_lse_bf16, reduce_cols_lse_bf16: LogSumExp, bf16;
    reduce_rows_sum_i32, reduce_cols_sum_i32: Sum, i32;
    reduce_rows_min_i32, reduce_cols_min_i32: Min, i32;
    reduce_rows_max_i32, reduce_cols_max_i32: Max, i32;
    reduce_rows_argmin_i32, reduce_cols_argmin_i32: ArgMin, i32;
    reduce_rows_argmax_i32, reduce_cols_argmax_i32: ArgMax, i32;
    reduce_rows_sum_i64, reduce_cols_sum_i64: Sum, i64;
    reduce_rows_min_i64, reduce_cols_min_i64: Min, i64;
    reduce_rows_max_i64, reduce_cols_max_i64: Max, i64;
    reduce_rows_argmin_i64, reduce_cols_argmin_i64: ArgMin, i64;
    reduce_rows_argmax_i64, reduce_cols_argmax_i64: ArgMax, i64;
    reduce_rows_sum_u32, reduce_cols_sum_u32: Sum, u32;
    reduce_rows_min_u32, reduce_cols_min_u32: Min, u32;
    reduce_rows_max_u32, reduce_cols_max_u32: Max, u32;
    reduce_rows_argmin_u32, reduce_cols_argmin_u32: ArgMin, u32;
    reduce_rows_argmax_u32, reduce_cols_argmax_u32: ArgMax, u32;
}

/// Writes a row's final state, finished by `F` (`finish`: a [`super::finish`]
/// code for float values, else unused; `count` elements per row), to
/// `out[row]`: the last step of the one-launch kernels.
#[inline(always)]
fn finished<'a, S: State, O: Copy, F: Finish<O>>(
    out: &'a mut Out<'_, O>,
    finish: u32,
    count: u64,
) -> impl FnMut(u64, S) + 'a {
    move |row, state| {
        if let Some(mut slot) = out.at(row as usize) {
            slot.set(F::value(finish, state.encode(), count));
        }
    }
}

/// The one-launch kernels, finished (output `O` by [`Finish`] step `F`),
/// one instance of each per reduction `R` and element type `T`: sum serves
/// mean and sum of squares serves norm2 through the runtime `finish` code.
macro_rules! one_launch_kernels {
    ($($small:ident, $fused:ident, $fused_cols:ident: <$t:tt, $r:tt, $o:tt, $f:tt>;)*) => {
        /// `out[r]` = row `r` of `x` (`[rows, len]`, `len ≤ SMALL_MAX_UNITS ·
        /// ROW_UNIT`) reduced by `R` and finished by `F` (`finish`: a
        /// [`super::finish`] code for float values, else unused) in one
        /// launch, with the bits of the rows pass, combine pass and `finish_*`
        /// kernel (see [`rows_small`]). Launch 1-D blocks of
        /// [`super::SMALL_BLOCK_THREADS`] threads.
        #[kernel(
            block = 512,
            shared = [u64; 2 * SMALL_MAX_UNITS as usize],
            instances($($small = <$t, $r, $o, $f>),*)
        )]
        pub fn reduce_small<T: Input, R: Reduction<T>, O: Copy, F: Finish<O>>(
            x: Global<T>,
            rows: u64,
            len: u64,
            finish: u32,
            mut out: Out<O>,
        ) {
            let finish = finished::<R::State, O, F>(&mut out, finish, len);
            rows_small(rows, len, vectored::<T, R>(x), finish);
        }

        /// `out[r]` = row `r` of `x` (`[rows, len]`, `len > ROW_UNIT`)
        /// reduced by `R` and finished by `F` (`finish`: a [`super::finish`]
        /// code for float values, else unused) in one launch, the last block
        /// to finish combining every block's partial states, with the bits
        /// of the rows pass, every combine pass and `finish_*` kernel (see
        /// [`rows_fused`]), for rows of any length. `tickets` and `states`
        /// hold [`super::fused_words`] words, every ticket 0 before the
        /// launch, and 0 again after it. Launch 1-D blocks of
        /// [`super::BLOCK_THREADS`] threads.
        #[kernel(block = 256, instances($($fused = <$t, $r, $o, $f>),*))]
        pub fn reduce_fused<T: Input, R: Reduction<T>, O: Copy, F: Finish<O>>(
            x: Global<T>,
            rows: u64,
            len: u64,
            finish: u32,
            mut tickets: Out<u64>,
            mut states: Out<u64>,
            mut out: Out<O>,
        ) {
            let finish = finished::<R::State, O, F>(&mut out, finish, len);
            rows_fused(rows, len, vectored::<T, R>(x), &mut tickets, &mut states, finish);
        }

        /// `out[o · inner + i]` = column `i` of `x[o]` (`[outer, len,
        /// inner]`) reduced by `R` and finished by `F` (`finish`: a
        /// [`super::finish`] code for float values, else unused) in one
        /// launch, the block that completes each combine unit folding it,
        /// with the bits of the columns pass, every combine pass and
        /// `finish_*` kernel (see [`cols_fused`]). `tickets` and `states`
        /// hold [`super::cols_fused_words`] words, every ticket 0 before the
        /// launch, and 0 again after it. Launch 1-D blocks of
        /// [`super::BLOCK_THREADS`] threads.
        #[kernel(block = 256, instances($($fused_cols = <$t, $r, $o, $f>),*))]
        pub fn reduce_fused_cols<T: Input, R: Reduction<T>, O: Copy, F: Finish<O>>(
            x: Global<T>,
            outer: u64,
            len: u64,
            inner: u64,
            finish: u32,
            mut tickets: Out<u64>,
            mut states: Out<u64>,
            mut out: Out<O>,
        ) {
            let finish = finished::<R::State, O, F>(&mut out, finish, len);
            let shape = [outer, len, inner];
            cols_fused(shape, vectored::<T, R>(x), &mut tickets, &mut states, finish);
        }
    };
}

one_launch_kernels! {
    reduce_small_sum_f32, reduce_fused_sum_f32, reduce_fused_cols_sum_f32: <f32, Sum, f32, FloatValue>;
    reduce_small_sumsq_f32, reduce_fused_sumsq_f32, reduce_fused_cols_sumsq_f32: <f32, SumOfSquares, f32, FloatValue>;
    reduce_small_min_f32, reduce_fused_min_f32, reduce_fused_cols_min_f32: <f32, Min, f32, FloatValue>;
    reduce_small_max_f32, reduce_fused_max_f32, reduce_fused_cols_max_f32: <f32, Max, f32, FloatValue>;
    reduce_small_argmin_f32, reduce_fused_argmin_f32, reduce_fused_cols_argmin_f32: <f32, ArgMin, i64, Index>;
    reduce_small_argmax_f32, reduce_fused_argmax_f32, reduce_fused_cols_argmax_f32: <f32, ArgMax, i64, Index>;
    reduce_small_lse_f32, reduce_fused_lse_f32, reduce_fused_cols_lse_f32: <f32, LogSumExp, f32, FloatValue>;
    reduce_small_sum_f64, reduce_fused_sum_f64, reduce_fused_cols_sum_f64: <f64, Sum, f64, FloatValue>;
    reduce_small_sumsq_f64, reduce_fused_sumsq_f64, reduce_fused_cols_sumsq_f64: <f64, SumOfSquares, f64, FloatValue>;
    reduce_small_min_f64, reduce_fused_min_f64, reduce_fused_cols_min_f64: <f64, Min, f64, FloatValue>;
    reduce_small_max_f64, reduce_fused_max_f64, reduce_fused_cols_max_f64: <f64, Max, f64, FloatValue>;
    reduce_small_argmin_f64, reduce_fused_argmin_f64, reduce_fused_cols_argmin_f64: <f64, ArgMin, i64, Index>;
    reduce_small_argmax_f64, reduce_fused_argmax_f64, reduce_fused_cols_argmax_f64: <f64, ArgMax, i64, Index>;
    reduce_small_lse_f64, reduce_fused_lse_f64, reduce_fused_cols_lse_f64: <f64, LogSumExp, f64, FloatValue>;
    reduce_small_sum_f16, reduce_fused_sum_f16, reduce_fused_cols_sum_f16: <f16, Sum, f16, FloatValue>;
    reduce_small_sumsq_f16, reduce_fused_sumsq_f16, reduce_fused_cols_sumsq_f16: <f16, SumOfSquares, f16, FloatValue>;
    reduce_small_min_f16, reduce_fused_min_f16, reduce_fused_cols_min_f16: <f16, Min, f16, FloatValue>;
    reduce_small_max_f16, reduce_fused_max_f16, reduce_fused_cols_max_f16: <f16, Max, f16, FloatValue>;
    reduce_small_argmin_f16, reduce_fused_argmin_f16, reduce_fused_cols_argmin_f16: <f16, ArgMin, i64, Index>;
    reduce_small_argmax_f16, reduce_fused_argmax_f16, reduce_fused_cols_argmax_f16: <f16, ArgMax, i64, Index>;
    reduce_small_lse_f16, reduce_fused_lse_f16, reduce_fused_cols_lse_f16: <f16, LogSumExp, f16, FloatValue>;
    reduce_small_sum_bf16, reduce_fused_sum_bf16, reduce_fused_cols_sum_bf16: <bf16, Sum, bf16, FloatValue>;
    reduce_small_sumsq_bf16, reduce_fused_sumsq_bf16, reduce_fused_cols_sumsq_bf16: <bf16, SumOfSquares, bf16, FloatValue>;
    reduce_small_min_bf16, reduce_fused_min_bf16, reduce_fused_cols_min_bf16: <bf16, Min, bf16, FloatValue>;
    reduce_small_max_bf16, reduce_fused_max_bf16, reduce_fused_cols_max_bf16: <bf16, Max, bf16, FloatValue>;
    reduce_small_argmin_bf16, reduce_fused_argmin_bf16, reduce_fused_cols_argmin_bf16: <bf16, ArgMin, i64, Index>;
    reduce_small_argmax_bf16, reduce_fused_argmax_bf16, reduce_fused_cols_argmax_bf16: <bf16, ArgMax, i64, Index>;
    reduce_small_lse_bf16, reduce_fused_lse_bf16, reduce_fused_cols_lse_bf16: <bf16, LogSumExp, bf16, FloatValue>;
    reduce_small_sum_i32, reduce_fused_sum_i32, reduce_fused_cols_sum_i32: <i32, Sum, i32, IntValue>;
    reduce_small_min_i32, reduce_fused_min_i32, reduce_fused_cols_min_i32: <i32, Min, i32, IntValue>;
    reduce_small_max_i32, reduce_fused_max_i32, reduce_fused_cols_max_i32: <i32, Max, i32, IntValue>;
    reduce_small_argmin_i32, reduce_fused_argmin_i32, reduce_fused_cols_argmin_i32: <i32, ArgMin, i64, Index>;
    reduce_small_argmax_i32, reduce_fused_argmax_i32, reduce_fused_cols_argmax_i32: <i32, ArgMax, i64, Index>;
    reduce_small_sum_i64, reduce_fused_sum_i64, reduce_fused_cols_sum_i64: <i64, Sum, i64, IntValue>;
    reduce_small_min_i64, reduce_fused_min_i64, reduce_fused_cols_min_i64: <i64, Min, i64, IntValue>;
    reduce_small_max_i64, reduce_fused_max_i64, reduce_fused_cols_max_i64: <i64, Max, i64, IntValue>;
    reduce_small_argmin_i64, reduce_fused_argmin_i64, reduce_fused_cols_argmin_i64: <i64, ArgMin, i64, Index>;
    reduce_small_argmax_i64, reduce_fused_argmax_i64, reduce_fused_cols_argmax_i64: <i64, ArgMax, i64, Index>;
    reduce_small_sum_u32, reduce_fused_sum_u32, reduce_fused_cols_sum_u32: <u32, Sum, u32, IntValue>;
    reduce_small_min_u32, reduce_fused_min_u32, reduce_fused_cols_min_u32: <u32, Min, u32, IntValue>;
    reduce_small_max_u32, reduce_fused_max_u32, reduce_fused_cols_max_u32: <u32, Max, u32, IntValue>;
    reduce_small_argmin_u32, reduce_fused_argmin_u32, reduce_fused_cols_argmin_u32: <u32, ArgMin, i64, Index>;
    reduce_small_argmax_u32, reduce_fused_argmax_u32, reduce_fused_cols_argmax_u32: <u32, ArgMax, i64, Index>;
}

macro_rules! state_passes {
    ($($rows:ident, $cols:ident: $s:ty;)*) => { $(
        #[doc = concat!("Rows pass combining `", stringify!($s), "` states `[rows, len]` (see [`rows_pass`]).")]
        #[kernel(block = 256)]
        pub fn $rows(x: Global<u64>, rows: u64, len: u64, mut states: Out<u64, WarpChunks<2>>) {
            rows_pass(rows, len, Scalar(stored::<$s>(x)), &mut states);
        }

        #[doc = concat!("Columns pass combining `", stringify!($s), "` states `[outer, len, inner]` (see [`cols_pass`]).")]
        #[kernel(block = 256)]
        pub fn $cols(x: Global<u64>, outer: u64, len: u64, inner: u64, mut states: Out<u64>) {
            cols_pass(outer, len, inner, Scalar(stored::<$s>(x)), &mut states);
        }
    )* };
}

state_passes! {
    combine_rows_sum_f32, combine_cols_sum_f32: SumState<f32>;
    combine_rows_min_f32, combine_cols_min_f32: ExtremeState<f32, false>;
    combine_rows_max_f32, combine_cols_max_f32: ExtremeState<f32, true>;
    combine_rows_argmin_f32, combine_cols_argmin_f32: ArgState<f32, false>;
    combine_rows_argmax_f32, combine_cols_argmax_f32: ArgState<f32, true>;
    combine_rows_lse_f32, combine_cols_lse_f32: LseState<f32>;
    combine_rows_sum_f64, combine_cols_sum_f64: SumState<f64>;
    combine_rows_min_f64, combine_cols_min_f64: ExtremeState<f64, false>;
    combine_rows_max_f64, combine_cols_max_f64: ExtremeState<f64, true>;
    combine_rows_argmin_f64, combine_cols_argmin_f64: ArgState<f64, false>;
    combine_rows_argmax_f64, combine_cols_argmax_f64: ArgState<f64, true>;
    combine_rows_lse_f64, combine_cols_lse_f64: LseState<f64>;
    combine_rows_sum_i32, combine_cols_sum_i32: SumState<i32>;
    combine_rows_min_i32, combine_cols_min_i32: ExtremeState<i32, false>;
    combine_rows_max_i32, combine_cols_max_i32: ExtremeState<i32, true>;
    combine_rows_argmin_i32, combine_cols_argmin_i32: ArgState<i32, false>;
    combine_rows_argmax_i32, combine_cols_argmax_i32: ArgState<i32, true>;
    combine_rows_sum_i64, combine_cols_sum_i64: SumState<i64>;
    combine_rows_min_i64, combine_cols_min_i64: ExtremeState<i64, false>;
    combine_rows_max_i64, combine_cols_max_i64: ExtremeState<i64, true>;
    combine_rows_argmin_i64, combine_cols_argmin_i64: ArgState<i64, false>;
    combine_rows_argmax_i64, combine_cols_argmax_i64: ArgState<i64, true>;
    combine_rows_sum_u32, combine_cols_sum_u32: SumState<u32>;
    combine_rows_min_u32, combine_cols_min_u32: ExtremeState<u32, false>;
    combine_rows_max_u32, combine_cols_max_u32: ExtremeState<u32, true>;
    combine_rows_argmin_u32, combine_cols_argmin_u32: ArgState<u32, false>;
    combine_rows_argmax_u32, combine_cols_argmax_u32: ArgState<u32, true>;
}

macro_rules! float_finish {
    ($($name:ident: $acc:ty => $t:ty;)*) => { $(
        #[doc = concat!("`out[k]` = state `k` (`", stringify!($acc), "`) finished by `finish` (a [`super::finish`] code) as `", stringify!($t), "`; `count` elements per state.")]
        #[kernel(block = 256)]
        pub fn $name(states: Global<u64>, finish: u32, count: u64, mut out: Out<$t, Elements>) {
            finish_pass(states, &mut out, |w| <FloatValue as Finish<$t>>::value(finish, w, count));
        }
    )* };
}

float_finish! {
    finish_f32: f32 => f32;
    finish_f32_to_f16: f32 => f16;
    finish_f32_to_bf16: f32 => bf16;
    finish_f64: f64 => f64;
}

macro_rules! int_finish {
    ($($name:ident: $t:ty;)*) => { $(
        #[doc = concat!("`out[k]` = the `", stringify!($t), "` value of state `k` (sum, min or max).")]
        #[kernel(block = 256)]
        pub fn $name(states: Global<u64>, mut out: Out<$t, Elements>) {
            finish_pass(states, &mut out, |w| <IntValue as Finish<$t>>::value(0, w, 0));
        }
    )* };
}

int_finish! {
    finish_i32: i32;
    finish_i64: i64;
    finish_u32: u32;
}

/// `out[k]` = the index of arg state `k` (argmin, argmax; any accumulator).
#[kernel(block = 256)]
pub fn finish_index(states: Global<u64>, mut out: Out<i64, Elements>) {
    finish_pass(states, &mut out, |w| Index::value(0, w, 0));
}
