//! Reduction states: what a lane, a unit of work or a pass has folded so far.
//!
//! A reduction is a [`State`] type (an empty state, an associative `combine`,
//! a warp shuffle, and an encoding as two `u64` words so that the partial
//! states of every reduction live in one `Out<u64>` buffer) plus a
//! [`Reduction`] that turns one element into a state. The kernels in
//! [`super`] only ever call these, so one kernel body serves every reduction.

use warpforge_device::global::{Plain, Vector16};
use warpforge_device::unroll::unroll2;
use warpforge_device::warp::{self, FULL_MASK, ShuffleValue};
use warpforge_device::{Global, num};
use warpforge_device::{bf16, f16};

/// What a reduction has folded so far.
///
/// `combine(a, b)` must be associative and have [`State::empty`] as identity
/// on both sides (up to the bits of a zero: see [`SumState`]). The kernels fold
/// in a fixed order, so a float combine that only associates approximately
/// still gives the same bits on every run and every grid.
pub trait State: Copy {
    /// The state of no elements.
    fn empty() -> Self;
    /// The state of `a`'s elements followed by `b`'s.
    fn combine(a: Self, b: Self) -> Self;
    /// `combine(a, b)` where every index in `b` is larger than every index in
    /// `a` (a lane's own fold, in index order): the same state, possibly in
    /// fewer instructions ([`ArgState`] need not compare indices).
    #[inline(always)]
    fn push(a: Self, b: Self) -> Self {
        Self::combine(a, b)
    }
    /// [`State::push`] where `a` is not the empty state (a lane's fold
    /// after its first element): the same state, possibly in fewer
    /// instructions ([`ArgState`] need not check for the empty index).
    #[inline(always)]
    fn push_nonempty(a: Self, b: Self) -> Self {
        Self::push(a, b)
    }
    /// The state held by lane `lane + delta` (`warp::shuffle_down`; lanes past
    /// the end keep their own). Every lane of the warp must call it.
    fn shuffle_down(self, delta: u32) -> Self;
    /// Two words that [`State::decode`] turns back into this state.
    fn encode(self) -> [u64; 2];
    /// The state [`State::encode`] wrote.
    fn decode(words: [u64; 2]) -> Self;
}

/// A reduction over elements of type `T`: which state it accumulates and how
/// one element (at `index` along the reduced axis) enters it.
pub trait Reduction<T: Input> {
    /// The accumulator state.
    type State: State;
    /// The state of the single element whose widened value
    /// ([`Input::widen`]) is `x`.
    fn load_widened(x: T::Acc, index: u64) -> Self::State;
    /// The state of the single element `x`.
    #[inline(always)]
    fn load(x: T, index: u64) -> Self::State {
        Self::load_widened(x.widen(), index)
    }
    /// What a lane carries while it folds its elements in index order
    /// ([`Reduction::lane_first`], [`Reduction::lane_push`]): the state
    /// (`state_lane!`), or for min and max of floats the running integer
    /// min/max of the raw bits and a NaN flag ([`Acc::ExtremeLane`]).
    type Lane: Copy;
    /// The lane's first element (widened), at position `index`.
    fn lane_first(x: T::Acc, index: u64) -> Self::Lane;
    /// The lane's next element, at a larger position than every one before.
    fn lane_push(lane: Self::Lane, x: T::Acc, index: u64) -> Self::Lane;
    /// The state of the lane's elements: the bits of pushing each one's
    /// state in order onto the empty state.
    fn lane_state(lane: Self::Lane) -> Self::State;
    /// The state of a lane's `V·W ≥ 1` elements, `V` vectors of `W`, in
    /// index order: element `e` of vector `i` (widened) is `x(i, e)`, at
    /// position `base + offset(i, e)`, the offsets increasing in that
    /// order. The bits of pushing each one's state in order onto the empty
    /// state; by default that fold itself ([`Reduction::lane_first`],
    /// [`Reduction::lane_push`]), for argmin and argmax of 4-byte
    /// accumulators two passes ([`ArgState::of_lane`], [`Acc::ARG_TWO_PASSES`]).
    #[inline(always)]
    fn lane_elements<const V: usize, const W: usize>(
        x: impl Fn(usize, usize) -> T::Acc,
        base: u64,
        offset: impl Fn(usize, usize) -> u32,
    ) -> Self::State {
        fold_lane::<T, Self, V, W>(x, base, offset)
    }
}

/// [`Reduction::lane_elements`] by the lane fold: the first element's
/// [`Reduction::lane_first`], the others' [`Reduction::lane_push`] in order.
#[inline(always)]
fn fold_lane<T: Input, R: Reduction<T> + ?Sized, const V: usize, const W: usize>(
    x: impl Fn(usize, usize) -> T::Acc,
    base: u64,
    offset: impl Fn(usize, usize) -> u32,
) -> R::State {
    // One loop over every element, the first resolved at compile time
    // once the loops are unrolled (the first element folded apart,
    // ptxas gave logsumexp a fifth more registers).
    let mut lane = None;
    for i in 0..V {
        for e in 0..W {
            let (x, index) = (x(i, e), base + u64::from(offset(i, e)));
            lane = Some(match lane {
                None => R::lane_first(x, index),
                Some(lane) => R::lane_push(lane, x, index),
            });
        }
    }
    lane.map_or(State::empty(), R::lane_state)
}

/// The [`Reduction`] lane methods where a lane carries the state: the first
/// element pushed onto the empty state (the compiler folds that away where
/// it is the identity: `-0 + x` is `x`), the others pushed onto it with
/// [`State::push_nonempty`].
macro_rules! state_lane {
    () => {
        type Lane = Self::State;
        #[inline(always)]
        fn lane_first(x: T::Acc, index: u64) -> Self::State {
            State::push(
                State::empty(),
                <Self as Reduction<T>>::load_widened(x, index),
            )
        }
        #[inline(always)]
        fn lane_push(lane: Self::State, x: T::Acc, index: u64) -> Self::State {
            State::push_nonempty(lane, <Self as Reduction<T>>::load_widened(x, index))
        }
        #[inline(always)]
        fn lane_state(lane: Self::State) -> Self::State {
            lane
        }
    };
}

/// The scalars states accumulate in: `f32`, `f64`, `i32`, `i64`, `u32`.
pub trait Acc: ShuffleValue + PartialOrd {
    /// An integer whose order on non-NaN values is [`Acc::below`]'s.
    type Key: Key;
    /// The exact identity of `add`: `-0.0` for floats (`-0 + x` is `x` for
    /// every `x`, `+0` included), `0` for integers.
    const ADD_IDENTITY: Self;
    /// The lowest value: `-inf`, or the integer minimum.
    const LOWEST: Self;
    /// The highest value: `+inf`, or the integer maximum.
    const HIGHEST: Self;
    /// `self + other`: IEEE addition for floats, two's-complement wrapping for integers.
    fn add(self, other: Self) -> Self;
    /// Whether `self` is a NaN (never, for integers).
    fn is_nan(self) -> bool;
    /// A canonical NaN if `a` or `b` is a NaN (floats), else `None`.
    fn nan_of(a: Self, b: Self) -> Option<Self>;
    /// `self` orders strictly below `other` (neither a NaN), with `-0 < +0`:
    /// a total order, so the extreme of a set does not depend on fold order.
    fn below(self, other: Self) -> bool;
    /// The value's [`Acc::Key`]: `-0 < +0` (a NaN's key is meaningless).
    fn key(self) -> Self::Key;
    /// The value whose [`Acc::key`] is `key`.
    fn from_key(key: Self::Key) -> Self;
    /// The key [`ArgState`] compares: like [`Acc::key`] but `-0 == +0`.
    fn arg_key(self) -> Self::Key;
    /// The larger (`MAX`) or the smaller of `a` and `b` as numbers, a NaN
    /// ignored (the other returned; NaN only if both are), either zero for
    /// `-0` against `+0`: one `FMNMX` or `IMNMX` ([`ArgState::of_lane`]).
    fn extreme<const MAX: bool>(a: Self, b: Self) -> Self;
    /// Whether argmin and argmax find a lane's state in two passes
    /// ([`ArgState::of_lane`]): for 4-byte accumulators. 8-byte ones fold
    /// one by one: two passes keep their 16 values live in twice the
    /// registers (the fused f64 argmax took 79 -> 95, i64 80 -> 97: 3 -> 2
    /// blocks of 256 per SM) for fewer instructions per byte to gain.
    const ARG_TWO_PASSES: bool = size_of::<Self>() == 4;
    /// The value's bits in a word.
    fn to_word(self) -> u64;
    /// The value [`Acc::to_word`] wrote.
    fn from_word(word: u64) -> Self;
    /// A lane's running [`ExtremeState`] fold (min or max of its values so
    /// far, a NaN winning): the key for integers, for floats the signed and
    /// unsigned min/max of the raw bits and whether a NaN was seen.
    type ExtremeLane: Copy;
    /// The lane of the single value `x`.
    fn extreme_first(x: Self) -> Self::ExtremeLane;
    /// `lane` with `x` folded in (`MAX`: the largest, else the smallest).
    fn extreme_push<const MAX: bool>(lane: Self::ExtremeLane, x: Self) -> Self::ExtremeLane;
    /// The [`ExtremeState`] key of the lane's values: what pushing their
    /// states in order onto the empty state gives.
    fn extreme_key<const MAX: bool>(lane: Self::ExtremeLane) -> Self::Key;
}

/// A signed or unsigned integer that orders accumulator values
/// ([`Acc::Key`]): min/max are one integer instruction each.
pub trait Key: ShuffleValue + Ord {
    /// The smallest key.
    const MIN: Self;
    /// The largest key.
    const MAX: Self;
    /// The key's bits in a word.
    fn to_word(self) -> u64;
    /// The key [`Key::to_word`] wrote.
    fn from_word(word: u64) -> Self;
}

macro_rules! key {
    ($($t:ty, $unsigned:ty);*) => { $(
        impl Key for $t {
            const MIN: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
            #[inline(always)]
            fn to_word(self) -> u64 {
                u64::from(self as $unsigned)
            }
            #[inline(always)]
            fn from_word(word: u64) -> Self {
                word as $unsigned as $t
            }
        }
    )* };
}
key!(i32, u32; i64, u64; u32, u32);

/// The float accumulators, with what `sum_of_squares`, `mean`, `norm2` and
/// `logsumexp` need.
pub trait Float: Acc {
    /// `+inf`.
    const INFINITY: Self;
    /// `1`.
    const ONE: Self;
    /// A NaN.
    const NAN: Self;
    /// `self · other`, rounded once.
    fn mul(self, other: Self) -> Self;
    /// `self − other`, rounded once.
    fn sub(self, other: Self) -> Self;
    /// `eˣ` (libm, within 1 ulp).
    fn exp(self) -> Self;
    /// `ln x` (libm, within 1 ulp).
    fn ln(self) -> Self;
    /// `√x`, correctly rounded.
    fn sqrt(self) -> Self;
    /// `self / count`, computed in f64 and rounded once to `Self`.
    fn mean(self, count: u64) -> Self;
}

macro_rules! float_acc {
    ($($t:ty, $bits:ty, $key:ty, $exp:path, $ln:path, $sqrt:path);*) => { $(
        impl Acc for $t {
            type Key = $key;
            // The bits as a signed integer, with the magnitude bits flipped
            // when negative: more negative values get smaller keys, and
            // `-0` (all magnitude bits set after the flip: -1) sorts below `+0` (0).
            #[inline(always)]
            fn key(self) -> $key {
                let bits = self.to_bits() as $key;
                // One shift and one three-input logic op (`LOP3`).
                bits ^ ((bits >> (<$key>::BITS - 1)) & <$key>::MAX)
            }
            #[inline(always)]
            fn from_key(key: $key) -> Self {
                // The flip is its own inverse (it keeps the sign bit).
                let bits = key ^ ((key >> (<$key>::BITS - 1)) & <$key>::MAX);
                <$t>::from_bits(bits as $bits)
            }
            #[inline(always)]
            fn arg_key(self) -> $key {
                (self + 0.0).key() // -0 + 0 = +0; every other value unchanged
            }
            #[inline(always)]
            fn extreme<const MAX: bool>(a: Self, b: Self) -> Self {
                // IEEE maxNum/minNum (`max.f32`, `min.f32` in PTX).
                if MAX { a.max(b) } else { a.min(b) }
            }
            const ADD_IDENTITY: Self = -0.0;
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                self + other
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline(always)]
            fn nan_of(a: Self, b: Self) -> Option<Self> {
                (<$t>::is_nan(a) || <$t>::is_nan(b)).then_some(<$t>::NAN)
            }
            #[inline(always)]
            fn below(self, other: Self) -> bool {
                self < other || (self == other && self.is_sign_negative() && !other.is_sign_negative())
            }
            #[inline(always)]
            fn to_word(self) -> u64 {
                u64::from(self.to_bits())
            }
            #[inline(always)]
            fn from_word(word: u64) -> Self {
                <$t>::from_bits(word as $bits)
            }
            // Two integer min/max per element on the raw bits and one NaN
            // test, no key per element: a signed max of the bits is the
            // largest non-negative value's (any non-negative beats every
            // negative, and non-negative floats order as their bits), valid
            // when it is non-negative; else every value is negative (`-0`
            // included) and the largest is the one of least magnitude, the
            // unsigned min of the bits. The smallest: signed min, negative
            // as soon as any value is (then the unsigned max, the negative
            // of most magnitude), else the smallest non-negative. `-0 < +0`
            // throughout (`-0`'s bits are negative), as `key`'s order.
            type ExtremeLane = ($key, $bits, bool);
            #[inline(always)]
            fn extreme_first(x: Self) -> Self::ExtremeLane {
                (x.to_bits() as $key, x.to_bits(), x.is_nan())
            }
            #[inline(always)]
            fn extreme_push<const MAX: bool>(
                (signed, unsigned, nan): Self::ExtremeLane,
                x: Self,
            ) -> Self::ExtremeLane {
                let bits = x.to_bits();
                let nan = nan | x.is_nan();
                if MAX {
                    (signed.max(bits as $key), unsigned.min(bits), nan)
                } else {
                    (signed.min(bits as $key), unsigned.max(bits), nan)
                }
            }
            #[inline(always)]
            fn extreme_key<const MAX: bool>((signed, unsigned, nan): Self::ExtremeLane) -> $key {
                let bits = if signed < 0 { unsigned } else { signed as $bits };
                match (nan, MAX) {
                    (true, true) => <$key>::MAX,
                    (true, false) => <$key>::MIN,
                    (false, _) => <$t>::from_bits(bits).key(),
                }
            }
        }

        impl Float for $t {
            const INFINITY: Self = <$t>::INFINITY;
            const ONE: Self = 1.0;
            const NAN: Self = <$t>::NAN;
            #[inline(always)]
            fn mul(self, other: Self) -> Self {
                self * other
            }
            #[inline(always)]
            fn sub(self, other: Self) -> Self {
                self - other
            }
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                $ln(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                $sqrt(self)
            }
            #[inline(always)]
            fn mean(self, count: u64) -> Self {
                (f64::from(self) / count as f64) as $t
            }
        }
    )* };
}
float_acc!(f32, u32, i32, num::exp, num::log, num::sqrt_f32; f64, u64, i64, num::exp_f64, num::log_f64, num::sqrt_f64);

macro_rules! int_acc {
    ($($t:ty, $unsigned:ty);*) => { $(
        impl Acc for $t {
            type Key = $t;
            #[inline(always)]
            fn key(self) -> $t {
                self
            }
            #[inline(always)]
            fn from_key(key: $t) -> Self {
                key
            }
            #[inline(always)]
            fn arg_key(self) -> $t {
                self
            }
            #[inline(always)]
            fn extreme<const MAX: bool>(a: Self, b: Self) -> Self {
                if MAX { a.max(b) } else { a.min(b) }
            }
            const ADD_IDENTITY: Self = 0;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                false
            }
            #[inline(always)]
            fn nan_of(_: Self, _: Self) -> Option<Self> {
                None
            }
            #[inline(always)]
            fn below(self, other: Self) -> bool {
                self < other
            }
            type ExtremeLane = $t;
            #[inline(always)]
            fn extreme_first(x: Self) -> $t {
                x
            }
            #[inline(always)]
            fn extreme_push<const MAX: bool>(lane: $t, x: Self) -> $t {
                if MAX { lane.max(x) } else { lane.min(x) }
            }
            #[inline(always)]
            fn extreme_key<const MAX: bool>(lane: $t) -> $t {
                lane
            }
            #[inline(always)]
            fn to_word(self) -> u64 {
                u64::from(self as $unsigned)
            }
            #[inline(always)]
            fn from_word(word: u64) -> Self {
                word as $unsigned as $t
            }
        }
    )* };
}
int_acc!(i32, u32; i64, u64; u32, u32);

/// Element types a reduction reads, and the accumulator each widens to:
/// f16, bf16 and f32 accumulate in f32 (both conversions are exact), f64 in
/// f64, integers in their own type.
pub trait Input: Plain {
    /// The accumulator type.
    type Acc: Acc;
    /// Elements per 16-byte vector load: 2 (f64, i64), 4 (f32, i32, u32),
    /// 8 (f16, bf16).
    const WIDTH: u64;
    /// [`Self::WIDTH`] elements at a 16-byte boundary.
    type Vector: Copy;
    /// The element as an accumulator value (exact).
    fn widen(self) -> Self::Acc;
    /// `x` as its unaligned head's length and its aligned vectors
    /// ([`Global::vectors16`]): each vector one 16-byte load, which the
    /// emulator's memory profile counts.
    fn vectors(x: Global<'_, Self>) -> (usize, Global<'_, Self::Vector>);
    /// Element `i` of `v` widened (`v.0[i].widen()`, the same bits): for
    /// bf16 one instruction per element from the loaded words (`w << 16`,
    /// `w & 0xffff_0000`), not an extraction and a shift.
    fn widen_lane(v: &Self::Vector, i: usize) -> Self::Acc;
    /// The state of the elements of vectors `0, 32, 64, …` of `v` (a
    /// lane's share of a full rows unit: `16 / WIDTH` vectors), pushed in
    /// order onto the empty state, the first element at position `j` along
    /// the axis and vector `i` at `j + 32·WIDTH·i`. All the loads are issued
    /// before the first fold; `None` if `v` is shorter than
    /// `32·(16 / WIDTH − 1) + 1`.
    fn fold_lane_unit<R: Reduction<Self>>(v: Global<'_, Self::Vector>, j: u64) -> Option<R::State>;
    /// Vectors `first + step·r` of `v` for `r < N`, all loaded before the
    /// first is returned (one bounds check for the lot, so no branch
    /// between the loads); `None` if `v` is shorter than that.
    fn load_rows<const N: usize>(
        v: Global<'_, Self::Vector>,
        first: usize,
        step: usize,
    ) -> Option<[Self::Vector; N]>;
}

macro_rules! input {
    ($($t:ty => $acc:ty, $n:literal, $widen:expr, $widen_lane:expr);*) => { $(
        impl Input for $t {
            type Acc = $acc;
            const WIDTH: u64 = $n;
            type Vector = Vector16<$t, $n>;
            #[inline(always)]
            fn widen(self) -> $acc {
                $widen(self)
            }
            #[inline(always)]
            fn vectors(x: Global<'_, Self>) -> (usize, Global<'_, Self::Vector>) {
                x.vectors16::<$n>()
            }
            #[inline(always)]
            fn widen_lane(v: &Self::Vector, i: usize) -> $acc {
                $widen_lane(v, i)
            }
            #[inline(always)]
            fn load_rows<const N: usize>(
                v: Global<'_, Self::Vector>,
                first: usize,
                step: usize,
            ) -> Option<[Self::Vector; N]> {
                let last = first.checked_add(step.checked_mul(N.checked_sub(1)?)?)?;
                let v = v.get_range(first..last.checked_add(1)?)?;
                // Every index is in bounds of `v` (checked once, above): each
                // `load` is one unconditional 16-byte load.
                Some(core::array::from_fn(|r| {
                    v.load(step * r).unwrap_or(Vector16([<$t>::default(); $n]))
                }))
            }
            #[inline(always)]
            fn fold_lane_unit<R: Reduction<Self>>(
                v: Global<'_, Self::Vector>,
                j: u64,
            ) -> Option<R::State> {
                const VECTORS: usize = 16 / $n;
                let v = v.get_range(0..32 * (VECTORS - 1) + 1)?;
                // Every index is in bounds of `v` (checked once, above), so
                // each `load` is one unconditional 16-byte load (the default
                // is never used, and compiled away).
                let loaded: [Self::Vector; VECTORS] = core::array::from_fn(|i| {
                    v.load(32 * i).unwrap_or(Vector16([<$t>::default(); $n]))
                });
                // Element `e` of vector `i` is at `j + 32·$n·i + e`.
                Some(R::lane_elements::<VECTORS, $n>(
                    |i, e| <$t>::widen_lane(&loaded[i], e),
                    j,
                    |i, e| (32 * $n * i + e) as u32,
                ))
            }
        }
    )* };
}
/// Element `i` of a loaded bf16 vector as f32, from the vector's words:
/// element `2w` is the low half of word `w` (`<< 16` makes it an f32),
/// element `2w + 1` the high half (`& 0xffff_0000`): the bits of
/// [`num::bf16_to_f32`], one instruction each.
#[inline(always)]
fn bf16_lane_to_f32(v: &Vector16<bf16, 8>, i: usize) -> f32 {
    let word = v.words()[i / 2];
    f32::from_bits(if i.is_multiple_of(2) {
        word << 16
    } else {
        word & 0xffff_0000
    })
}

input!(
    f32 => f32, 4, |x| x, |v: &Vector16<f32, 4>, i: usize| v.0[i];
    f64 => f64, 2, |x| x, |v: &Vector16<f64, 2>, i: usize| v.0[i];
    f16 => f32, 8, num::f16_to_f32, |v: &Vector16<f16, 8>, i: usize| num::f16_to_f32(v.0[i]);
    bf16 => f32, 8, num::bf16_to_f32, bf16_lane_to_f32;
    i32 => i32, 4, |x| x, |v: &Vector16<i32, 4>, i: usize| v.0[i];
    i64 => i64, 2, |x| x, |v: &Vector16<i64, 2>, i: usize| v.0[i];
    u32 => u32, 4, |x| x, |v: &Vector16<u32, 4>, i: usize| v.0[i]
);

/// A running sum (also of squares). Empty: `-0.0`, the exact identity, so a
/// sum of `-0.0`s stays `-0.0`; integer sums wrap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SumState<A>(pub A);

impl<A: Acc> State for SumState<A> {
    #[inline(always)]
    fn empty() -> Self {
        SumState(A::ADD_IDENTITY)
    }
    #[inline(always)]
    fn combine(a: Self, b: Self) -> Self {
        SumState(a.0.add(b.0))
    }
    #[inline(always)]
    fn shuffle_down(self, delta: u32) -> Self {
        SumState(warp::shuffle_down(FULL_MASK, self.0, delta))
    }
    #[inline(always)]
    fn encode(self) -> [u64; 2] {
        [self.0.to_word(), 0]
    }
    #[inline(always)]
    fn decode(words: [u64; 2]) -> Self {
        SumState(A::from_word(words[0]))
    }
}

/// The smallest (`MAX = false`) or largest (`MAX = true`) value so far, in the
/// total order with `-0 < +0`; NaN as soon as any NaN is seen (the canonical
/// NaN when encoded). Held as its [`Acc::key`], a NaN as the key that beats
/// every other ([`Key::MAX`] for max, [`Key::MIN`] for min), so a fold is one
/// integer min/max per element and the NaN test is off the comparison.
/// Empty: the key of `+inf` (min) or `-inf` (max), or the integer extremes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExtremeState<A: Acc, const MAX: bool>(pub A::Key);

impl<A: Acc, const MAX: bool> ExtremeState<A, MAX> {
    /// The state of the single value `x`.
    #[inline(always)]
    pub fn of(x: A) -> Self {
        match (x.is_nan(), MAX) {
            (true, true) => ExtremeState(A::Key::MAX),
            (true, false) => ExtremeState(A::Key::MIN),
            (false, _) => ExtremeState(x.key()),
        }
    }

    /// The value (the canonical NaN for a NaN).
    #[inline(always)]
    pub fn value(self) -> A {
        let v = A::from_key(self.0);
        A::nan_of(v, v).unwrap_or(v)
    }
}

impl<A: Acc, const MAX: bool> State for ExtremeState<A, MAX> {
    #[inline(always)]
    fn empty() -> Self {
        Self::of(if MAX { A::LOWEST } else { A::HIGHEST })
    }
    #[inline(always)]
    fn combine(a: Self, b: Self) -> Self {
        ExtremeState(if MAX { a.0.max(b.0) } else { a.0.min(b.0) })
    }
    #[inline(always)]
    fn shuffle_down(self, delta: u32) -> Self {
        ExtremeState(warp::shuffle_down(FULL_MASK, self.0, delta))
    }
    #[inline(always)]
    fn encode(self) -> [u64; 2] {
        [self.value().to_word(), 0]
    }
    #[inline(always)]
    fn decode(words: [u64; 2]) -> Self {
        Self::of(A::from_word(words[0]))
    }
}

/// The index an empty [`ArgState`] holds: larger than any real index.
pub const EMPTY_INDEX: u64 = u64::MAX;

/// The extreme value so far and the index where it first occurs. NaN counts
/// as the extreme (the first NaN wins); `-0 == +0` (ties go to the smaller
/// index), like numpy. The value is held as its [`Acc::arg_key`], a NaN as
/// the key that beats every other, so a comparison is one integer compare.
/// Empty: index [`EMPTY_INDEX`] with the key every value beats or ties
/// ([`Key::MIN`] for argmax, [`Key::MAX`] for argmin); an equal key loses to
/// it by index in `combine`, and `push` checks for it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArgState<A: Acc, const MAX: bool> {
    /// The extreme value's key.
    pub key: A::Key,
    /// Its first index along the reduced axis.
    pub index: u64,
}

impl<A: Acc, const MAX: bool> ArgState<A, MAX> {
    /// The state of the single value `x` at `index`.
    #[inline(always)]
    pub fn of(x: A, index: u64) -> Self {
        let key = match (x.is_nan(), MAX) {
            (true, true) => A::Key::MAX,
            (true, false) => A::Key::MIN,
            (false, _) => x.arg_key(),
        };
        ArgState { key, index }
    }

    /// The state of `V·W ≥ 1` values in index order, `V` vectors of `W`
    /// (element `e` of vector `i` being `x(i, e)`, at position `base +
    /// offset(i, e)`, the offsets increasing in that order): the bits of
    /// pushing their states in order onto the empty state, in two passes
    /// instead of a key computed and a key and an index selected per value.
    /// First the extreme as a number ([`Acc::extreme`], NaNs skipped) and
    /// whether any value is a NaN: one min/max and one NaN test per value.
    /// Then, last value first, the position of the first winner: the first
    /// NaN if there is one (the NaN key beats every other, and equal keys
    /// keep the first index), else the first value equal to the extreme as
    /// a number (so `-0 == +0`, as [`Acc::arg_key`] has it): one compare
    /// and one select of a constant offset per value, and the index added
    /// once. Both passes written out ([`unroll2`]): an indexed loop would
    /// send the values to local memory.
    #[inline(always)]
    pub fn of_lane<const V: usize, const W: usize>(
        x: impl Fn(usize, usize) -> A,
        base: u64,
        offset: impl Fn(usize, usize) -> u32,
    ) -> Self {
        let mut best = x(0, 0);
        let mut nan = false;
        unroll2::<V, W>(|i, e| {
            let v = x(i, e);
            best = A::extreme::<MAX>(best, v);
            nan |= v.is_nan();
        });
        // The last element first, so that the first winner's offset is the
        // one left.
        let last = |i: usize, e: usize| (V - 1 - i, W - 1 - e);
        let mut at = offset(0, 0);
        let key = if nan {
            unroll2::<V, W>(|i, e| {
                let (i, e) = last(i, e);
                if x(i, e).is_nan() {
                    at = offset(i, e);
                }
            });
            if MAX { A::Key::MAX } else { A::Key::MIN }
        } else {
            unroll2::<V, W>(|i, e| {
                let (i, e) = last(i, e);
                if x(i, e) == best {
                    at = offset(i, e);
                }
            });
            best.arg_key()
        };
        ArgState {
            key,
            index: base + u64::from(at),
        }
    }
}

impl<A: Acc, const MAX: bool> State for ArgState<A, MAX> {
    #[inline(always)]
    fn empty() -> Self {
        ArgState {
            key: if MAX { A::Key::MIN } else { A::Key::MAX },
            index: EMPTY_INDEX,
        }
    }
    #[inline(always)]
    fn combine(a: Self, b: Self) -> Self {
        let b_wins = if b.key == a.key {
            b.index < a.index
        } else if MAX {
            b.key > a.key
        } else {
            b.key < a.key
        };
        if b_wins { b } else { a }
    }
    #[inline(always)]
    fn push(a: Self, b: Self) -> Self {
        // b's index is the larger: it wins only by a strictly better key,
        // or against the empty state.
        let better = if MAX { b.key > a.key } else { b.key < a.key };
        if better || a.index == EMPTY_INDEX {
            b
        } else {
            a
        }
    }
    #[inline(always)]
    fn push_nonempty(a: Self, b: Self) -> Self {
        let better = if MAX { b.key > a.key } else { b.key < a.key };
        if better { b } else { a }
    }
    #[inline(always)]
    fn shuffle_down(self, delta: u32) -> Self {
        ArgState {
            key: warp::shuffle_down(FULL_MASK, self.key, delta),
            index: warp::shuffle_down(FULL_MASK, self.index, delta),
        }
    }
    #[inline(always)]
    fn encode(self) -> [u64; 2] {
        [self.key.to_word(), self.index]
    }
    #[inline(always)]
    fn decode(words: [u64; 2]) -> Self {
        ArgState {
            key: A::Key::from_word(words[0]),
            index: words[1],
        }
    }
}

/// `Σ exp(x − m) = s` over the elements so far: `m` is their maximum, so no
/// term overflows. Empty (and all `-inf`): `m = -inf`, `s = 0`. A `+inf`
/// element makes the state `(+inf, 1)` and a NaN makes it `(NaN, NaN)`, so no
/// `inf − inf` is ever computed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LseState<F> {
    /// The largest element.
    pub m: F,
    /// `Σ exp(x − m)`, at least 1 unless the state is empty.
    pub s: F,
}

impl<F: Float> LseState<F> {
    /// The state of one element.
    #[inline(always)]
    pub fn of(x: F) -> Self {
        if x == F::LOWEST {
            Self::empty()
        } else {
            LseState { m: x, s: F::ONE }
        }
    }

    /// `m + ln s`: the log-sum-exp of the elements (`-inf` for none, `+inf`
    /// if any is `+inf`, NaN if any is NaN).
    #[inline(always)]
    pub fn finish(self) -> F {
        if self.m.is_nan() || self.m == F::LOWEST || self.m == F::INFINITY {
            self.m
        } else {
            self.m.add(self.s.ln())
        }
    }
}

impl<F: Float> State for LseState<F> {
    #[inline(always)]
    fn empty() -> Self {
        LseState {
            m: F::LOWEST,
            s: F::ADD_IDENTITY,
        }
    }
    #[inline(always)]
    fn combine(a: Self, b: Self) -> Self {
        if a.m.is_nan() || b.m.is_nan() {
            return LseState {
                m: F::NAN,
                s: F::NAN,
            };
        }
        let (hi, lo) = if b.m > a.m { (b, a) } else { (a, b) };
        if lo.m == F::LOWEST {
            return hi;
        }
        if hi.m == F::INFINITY {
            return LseState {
                m: F::INFINITY,
                s: F::ONE,
            };
        }
        // One exp per combine: the larger side's factor is exp(0) = 1.
        LseState {
            m: hi.m,
            s: hi.s.add(lo.s.mul(lo.m.sub(hi.m).exp())),
        }
    }
    #[inline(always)]
    fn shuffle_down(self, delta: u32) -> Self {
        LseState {
            m: warp::shuffle_down(FULL_MASK, self.m, delta),
            s: warp::shuffle_down(FULL_MASK, self.s, delta),
        }
    }
    #[inline(always)]
    fn encode(self) -> [u64; 2] {
        [self.m.to_word(), self.s.to_word()]
    }
    #[inline(always)]
    fn decode(words: [u64; 2]) -> Self {
        LseState {
            m: F::from_word(words[0]),
            s: F::from_word(words[1]),
        }
    }
}

/// `Σx` (and `mean`, which divides it by the count when it finishes).
pub struct Sum;
/// `Σx²` (and `norm2`, its square root).
pub struct SumOfSquares;
/// The smallest element.
pub struct Min;
/// The largest element.
pub struct Max;
/// The first index of the smallest element.
pub struct ArgMin;
/// The first index of the largest element.
pub struct ArgMax;
/// `ln Σ exp(x)`.
pub struct LogSumExp;

impl<T: Input> Reduction<T> for Sum {
    type State = SumState<T::Acc>;
    #[inline(always)]
    fn load_widened(x: T::Acc, _: u64) -> Self::State {
        SumState(x)
    }
    state_lane!();
}

impl<T: Input<Acc: Float>> Reduction<T> for SumOfSquares {
    type State = SumState<T::Acc>;
    #[inline(always)]
    fn load_widened(x: T::Acc, _: u64) -> Self::State {
        SumState(x.mul(x))
    }
    state_lane!();
}

impl<T: Input> Reduction<T> for Min {
    type State = ExtremeState<T::Acc, false>;
    #[inline(always)]
    fn load_widened(x: T::Acc, _: u64) -> Self::State {
        ExtremeState::of(x)
    }
    type Lane = <T::Acc as Acc>::ExtremeLane;
    #[inline(always)]
    fn lane_first(x: T::Acc, _: u64) -> Self::Lane {
        T::Acc::extreme_first(x)
    }
    #[inline(always)]
    fn lane_push(lane: Self::Lane, x: T::Acc, _: u64) -> Self::Lane {
        T::Acc::extreme_push::<false>(lane, x)
    }
    #[inline(always)]
    fn lane_state(lane: Self::Lane) -> Self::State {
        ExtremeState(T::Acc::extreme_key::<false>(lane))
    }
}

impl<T: Input> Reduction<T> for Max {
    type State = ExtremeState<T::Acc, true>;
    #[inline(always)]
    fn load_widened(x: T::Acc, _: u64) -> Self::State {
        ExtremeState::of(x)
    }
    type Lane = <T::Acc as Acc>::ExtremeLane;
    #[inline(always)]
    fn lane_first(x: T::Acc, _: u64) -> Self::Lane {
        T::Acc::extreme_first(x)
    }
    #[inline(always)]
    fn lane_push(lane: Self::Lane, x: T::Acc, _: u64) -> Self::Lane {
        T::Acc::extreme_push::<true>(lane, x)
    }
    #[inline(always)]
    fn lane_state(lane: Self::Lane) -> Self::State {
        ExtremeState(T::Acc::extreme_key::<true>(lane))
    }
}

impl<T: Input> Reduction<T> for ArgMin {
    type State = ArgState<T::Acc, false>;
    #[inline(always)]
    fn load_widened(x: T::Acc, index: u64) -> Self::State {
        ArgState::of(x, index)
    }
    state_lane!();
    #[inline(always)]
    fn lane_elements<const V: usize, const W: usize>(
        x: impl Fn(usize, usize) -> T::Acc,
        base: u64,
        offset: impl Fn(usize, usize) -> u32,
    ) -> Self::State {
        if T::Acc::ARG_TWO_PASSES {
            ArgState::of_lane::<V, W>(x, base, offset)
        } else {
            fold_lane::<T, Self, V, W>(x, base, offset)
        }
    }
}

impl<T: Input> Reduction<T> for ArgMax {
    type State = ArgState<T::Acc, true>;
    #[inline(always)]
    fn load_widened(x: T::Acc, index: u64) -> Self::State {
        ArgState::of(x, index)
    }
    state_lane!();
    #[inline(always)]
    fn lane_elements<const V: usize, const W: usize>(
        x: impl Fn(usize, usize) -> T::Acc,
        base: u64,
        offset: impl Fn(usize, usize) -> u32,
    ) -> Self::State {
        if T::Acc::ARG_TWO_PASSES {
            ArgState::of_lane::<V, W>(x, base, offset)
        } else {
            fold_lane::<T, Self, V, W>(x, base, offset)
        }
    }
}

impl<T: Input<Acc: Float>> Reduction<T> for LogSumExp {
    type State = LseState<T::Acc>;
    #[inline(always)]
    fn load_widened(x: T::Acc, _: u64) -> Self::State {
        LseState::of(x)
    }
    state_lane!();
}
