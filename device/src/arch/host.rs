//! The host backend: every primitive asks the emulator about the calling fiber.
//!
//! Floating-point results follow the NaN rule of `crate::num` ("NaN results"):
//! where the GPU instruction writes its canonical NaN, so does the function
//! here (through `f32_op` and the half conversions), not the host FPU's NaN.

use super::{
    AtomicOp, CANONICAL_NAN_BF16, CANONICAL_NAN_F16, MatchMode, ReduxOp, Scope, ShuffleMode,
    VoteMode, f32_op,
};
use crate::emu::fiber::{self, Request, WarpOp};
use crate::emu::race::Race;
use crate::emu::{Access, Fault};
use crate::mma::MmaKind;
use crate::thread::Dim3;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU16, AtomicU32, AtomicU64, Ordering};

pub(crate) fn thread_idx() -> Dim3 {
    fiber::with_current(|t| t.thread_idx)
}

pub(crate) fn block_idx() -> Dim3 {
    fiber::with_current(|t| t.block_idx)
}

pub(crate) fn block_dim() -> Dim3 {
    fiber::with_current(|t| t.block_dim)
}

pub(crate) fn grid_dim() -> Dim3 {
    fiber::with_current(|t| t.grid_dim)
}

pub(crate) fn lane_id() -> u32 {
    fiber::with_current(|t| t.linear_id % crate::thread::WARP_SIZE)
}

pub(crate) fn sync_threads() {
    fiber::suspend(Request::SyncThreads { predicate: true });
}

pub(crate) fn sync_threads_count(predicate: bool) -> u32 {
    fiber::suspend(Request::SyncThreads { predicate })
}

fn warp_op(op: WarpOp, mask: u32, value: u64, arg: u32) -> u32 {
    fiber::suspend(Request::Warp {
        op,
        mask,
        value,
        arg,
    })
}

pub(crate) fn vote(mode: VoteMode, predicate: bool, mask: u32) -> u32 {
    warp_op(WarpOp::Vote(mode), mask, u64::from(predicate), 0)
}

pub(crate) fn match_u64(mode: MatchMode, value: u64, mask: u32) -> u32 {
    warp_op(WarpOp::Match(mode), mask, value, 0)
}

pub(crate) fn match_u32(mode: MatchMode, value: u32, mask: u32) -> u32 {
    match_u64(mode, u64::from(value), mask)
}

pub(crate) fn redux(op: ReduxOp, value: u32, mask: u32) -> u32 {
    warp_op(WarpOp::Redux(op), mask, u64::from(value), 0)
}

#[track_caller]
pub(crate) fn active_mask() -> u32 {
    fiber::suspend(Request::ActiveMask {
        site: core::panic::Location::caller(),
    })
}

pub(crate) fn fence(scope: Scope) {
    // Blocks run on different OS threads; a SeqCst fence is at least as strong as any GPU scope.
    std::sync::atomic::fence(Ordering::SeqCst);
    if scope != Scope::Block {
        // A block-scope fence orders nothing across blocks, so the detector ignores it.
        fiber::try_with_current(|t| {
            // SAFETY: the detector lives as long as the block (see the scheduler).
            if let Some(detector) = unsafe { t.race.as_ref() } {
                detector.fence();
            }
        });
    }
}

/// `cvt.rn.f16.f32`: a NaN becomes the canonical f16 NaN (`half` would keep
/// the payload's top bits).
pub(crate) fn f32_to_f16_bits(x: f32) -> u16 {
    if x.is_nan() {
        CANONICAL_NAN_F16
    } else {
        half::f16::from_f32(x).to_bits()
    }
}

/// `cvt.f32.f16`: exact, and a NaN becomes the canonical f32 NaN.
pub(crate) fn f16_bits_to_f32(h: u16) -> f32 {
    f32_op(half::f16::from_bits(h).to_f32())
}

/// `cvt.rn.bf16.f32`: a NaN becomes the canonical bf16 NaN.
pub(crate) fn f32_to_bf16_bits(x: f32) -> u16 {
    if x.is_nan() {
        CANONICAL_NAN_BF16
    } else {
        half::bf16::from_f32(x).to_bits()
    }
}

pub(crate) fn shuffle_u32(mode: ShuffleMode, value: u32, arg: u32, mask: u32) -> u32 {
    warp_op(WarpOp::Shuffle(mode), mask, u64::from(value), arg)
}

/// Tells the race detector that this thread reads or writes `bytes` bytes of
/// shared memory at `ptr`; a conflicting access unwinds with `Fault::SharedRace`.
pub(crate) fn shared_access(ptr: *const u8, bytes: usize, write: bool) {
    let race = fiber::with_current(|t| {
        // SAFETY: the detector lives as long as the block (see the scheduler).
        let Some(detector) = (unsafe { t.race.as_ref() }) else {
            return Ok(());
        };
        let offset = (ptr as usize).wrapping_sub(t.shared_base as usize);
        detector
            .access(t.linear_id, offset, bytes, write)
            .map_err(|race| Fault::SharedRace {
                offset: race.offset,
                other: race
                    .other_thread()
                    .map(|o| t.block_dim.unflatten(u64::from(o))),
                this_writes: race.this_access == Access::Write,
                other_writes: race.other_access == Access::Write,
            })
    });
    if let Err(fault) = race {
        std::panic::panic_any(fault);
    }
}

/// Tells the race detector that this thread reads or writes (plainly) `bytes`
/// bytes of global memory at `ptr` (an output element, through a `Slot`); a
/// conflicting access unwinds with `Fault::GlobalRace`. Outside a launch
/// (a `Slot` of a host slice) it does nothing.
pub(crate) fn global_access(ptr: *const u8, bytes: usize, write: bool) {
    let access = if write { Access::Write } else { Access::Read };
    let race = fiber::try_with_current(|t| {
        // SAFETY: the detector lives as long as the block (see the scheduler).
        let Some(detector) = (unsafe { t.race.as_ref() }) else {
            return Ok(());
        };
        detector
            .global_access(t.linear_id, ptr as usize, bytes, access)
            .map_err(|race| global_race(t, race))
    });
    if let Some(Err(fault)) = race {
        std::panic::panic_any(fault);
    }
}

fn global_race(t: &fiber::ThreadState, race: Race) -> Fault {
    Fault::GlobalRace {
        buffer: race.buffer,
        element: race.offset,
        other_block: t.grid_dim.unflatten(u64::from(race.other_block)),
        other: race
            .other_thread()
            .map(|o| t.block_dim.unflatten(u64::from(o))),
        this_access: race.this_access,
        other_access: race.other_access,
    }
}

/// Tells the race detector about an atomic on `bytes` bytes at `ptr`, in shared
/// or global memory, before it runs: in shared memory it initialises the bytes
/// (and reads them, if `reads_old`: every operation but a swap); in global
/// memory it is checked against plain accesses, and after a fence it is a
/// release. A conflict unwinds with `Fault::GlobalRace`.
fn atomic_access(ptr: *const u8, bytes: usize, reads_old: bool) {
    let race = fiber::try_with_current(|t| {
        // SAFETY: the detector lives as long as the block (see the scheduler).
        let Some(detector) = (unsafe { t.race.as_ref() }) else {
            return Ok(());
        };
        let offset = (ptr as usize).wrapping_sub(t.shared_base as usize);
        if offset < t.shared_len {
            detector.shared_atomic(t.linear_id, offset, bytes, reads_old);
            return Ok(());
        }
        detector
            .global_access(t.linear_id, ptr as usize, bytes, Access::Atomic)
            .map_err(|race| global_race(t, race))
    });
    if let Some(Err(fault)) = race {
        std::panic::panic_any(fault);
    }
}

pub(crate) fn dynamic_shared() -> (*mut u8, usize) {
    fiber::with_current(|t| (t.shared_base, t.shared_len))
}

pub(crate) fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    f32_op(a.mul_add(b, c))
}

/// The host's NaN: the GPU's f64 NaN bits are not documented (see `crate::num`).
pub(crate) fn fma_f64(a: f64, b: f64, c: f64) -> f64 {
    a.mul_add(b, c)
}

/// The emulator's atomics are the host's: blocks run on different OS threads,
/// and sequentially consistent operations are at least as strong as any scope.
macro_rules! atom_int {
    ($name:ident, $t:ty, $atomic:ty) => {
        /// # Safety
        /// `ptr` must be valid and aligned for atomic access to a `$t`.
        pub(crate) unsafe fn $name(op: AtomicOp, _scope: Scope, ptr: *mut $t, v: $t) -> $t {
            // SAFETY: the caller's contract; every access to `*ptr` that can race
            // with this one is atomic too, or a kernel bug the GPU would share.
            atomic_access(ptr.cast(), size_of::<$t>(), op != AtomicOp::Exch);
            let a = unsafe { <$atomic>::from_ptr(ptr) };
            let o = Ordering::SeqCst;
            match op {
                AtomicOp::Add => a.fetch_add(v, o),
                AtomicOp::Min => a.fetch_min(v, o),
                AtomicOp::Max => a.fetch_max(v, o),
                AtomicOp::Exch => a.swap(v, o),
                AtomicOp::And => a.fetch_and(v, o),
                AtomicOp::Or => a.fetch_or(v, o),
                AtomicOp::Xor => a.fetch_xor(v, o),
            }
        }
    };
}
atom_int!(atom_u32, u32, AtomicU32);
atom_int!(atom_i32, i32, AtomicI32);
atom_int!(atom_u64, u64, AtomicU64);
atom_int!(atom_i64, i64, AtomicI64);

macro_rules! atom_cas {
    ($name:ident, $t:ty, $atomic:ty) => {
        /// # Safety
        /// `ptr` must be valid and aligned for atomic access to a `$t`.
        pub(crate) unsafe fn $name(_scope: Scope, ptr: *mut $t, current: $t, new: $t) -> $t {
            atomic_access(ptr.cast(), size_of::<$t>(), true);
            // SAFETY: the caller's contract.
            let a = unsafe { <$atomic>::from_ptr(ptr) };
            a.compare_exchange(current, new, Ordering::SeqCst, Ordering::SeqCst)
                .unwrap_or_else(|actual| actual)
        }
    };
}
atom_cas!(atom_cas_u32, u32, AtomicU32);
atom_cas!(atom_cas_u64, u64, AtomicU64);

/// A float add as a compare-and-swap loop over the bits, rounding once per add
/// (to nearest even) as `atom.add.f32/.f64/.f16` do; `$nan` gives the sum's
/// NaN the GPU's bits (f32: canonical; f64: the host's, see `crate::num`).
macro_rules! atom_add_float {
    ($name:ident, $t:ty, $bits:ty, $atomic:ty, $nan:expr) => {
        /// # Safety
        /// `ptr` must be valid and aligned for atomic access to a `$t`.
        pub(crate) unsafe fn $name(_scope: Scope, ptr: *mut $t, v: $t) -> $t {
            atomic_access(ptr.cast(), size_of::<$t>(), true);
            // SAFETY: the caller's contract; the float has the size and alignment of its bits.
            let a = unsafe { <$atomic>::from_ptr(ptr.cast::<$bits>()) };
            let add = |b: $bits| Some($nan(<$t>::from_bits(b) + v).to_bits());
            <$t>::from_bits(
                a.fetch_update(Ordering::SeqCst, Ordering::SeqCst, add)
                    .unwrap_or_else(|b| b),
            )
        }
    };
}
atom_add_float!(atom_add_f32, f32, u32, AtomicU32, f32_op);
atom_add_float!(atom_add_f64, f64, u64, AtomicU64, core::convert::identity);

/// # Safety
/// `ptr` must be valid and 2-byte aligned for atomic access to an f16.
pub(crate) unsafe fn atom_add_f16(_scope: Scope, ptr: *mut u16, v: u16) -> u16 {
    atomic_access(ptr.cast(), 2, true);
    // SAFETY: the caller's contract.
    let a = unsafe { AtomicU16::from_ptr(ptr) };
    let add = |b: u16| {
        // f32 has more than 2·11 + 2 bits, so rounding the f32 sum again to f16
        // gives the correctly rounded f16 sum.
        let sum = half::f16::from_bits(b).to_f32() + half::f16::from_bits(v).to_f32();
        Some(f32_to_f16_bits(sum))
    };
    a.fetch_update(Ordering::SeqCst, Ordering::SeqCst, add)
        .unwrap_or_else(|b| b)
}

// Fast-math approximations: the emulator computes the exact function, rounded
// once; the GPU's `.approx` instructions are within their PTX ISA error bounds
// of it (ex2: 2 ulp, lg2: 2⁻²² abs/rel, rsqrt: 2⁻²²·⁹ rel, rcp: 1 ulp). Each
// is one f32 instruction there, so a NaN is the canonical one.
pub(crate) fn ex2_approx(x: f32) -> f32 {
    f32_op(libm::exp2f(x))
}

pub(crate) fn lg2_approx(x: f32) -> f32 {
    f32_op(libm::log2f(x))
}

pub(crate) fn rsqrt_approx(x: f32) -> f32 {
    f32_op((1.0 / f64::from(x).sqrt()) as f32)
}

pub(crate) fn rcp_approx(x: f32) -> f32 {
    f32_op(1.0 / x)
}

/// One packed half type: how to widen a half, and round an f32 to it.
struct Half {
    to_f64: fn(u16) -> f64,
    from_f32: fn(f32) -> u16,
    /// The NaN the GPU's packed arithmetic writes.
    nan: u16,
}

const F16: Half = Half {
    to_f64: |h| half::f16::from_bits(h).to_f64(),
    from_f32: f32_to_f16_bits,
    nan: CANONICAL_NAN_F16,
};
const BF16: Half = Half {
    to_f64: |h| f64::from(f32::from_bits(u32::from(h) << 16)),
    from_f32: f32_to_bf16_bits,
    nan: CANONICAL_NAN_BF16,
};

/// Applies `op` to each half of the packed operands. `op` returns the exact
/// result rounded to odd in f64; rounding that to odd in f32 and then to
/// nearest even in the half type gives the correctly rounded half result
/// (rounding to odd with at least two spare bits does not disturb the last
/// rounding). NaN results are the canonical NaN, as on the GPU.
fn lanewise(h: Half, ops: [u32; 3], op: impl Fn(f64, f64, f64) -> f64) -> u32 {
    let half_at = |x: u32, shift: u32| (h.to_f64)((x >> shift) as u16);
    let one = |shift| {
        let r = op(
            half_at(ops[0], shift),
            half_at(ops[1], shift),
            half_at(ops[2], shift),
        );
        if r.is_nan() {
            u32::from(h.nan)
        } else {
            u32::from((h.from_f32)(f32_round_to_odd(r)))
        }
    };
    one(0) | one(16) << 16
}

/// `x` rounded to an f32, to odd: exact values stay, inexact ones land on the
/// neighbour whose last significand bit is 1.
fn f32_round_to_odd(x: f64) -> f32 {
    let t = x as f32;
    if f64::from(t) == x || !t.is_finite() || t.to_bits() & 1 == 1 {
        return t;
    }
    // Sign-magnitude bits: +1 steps away from zero, −1 toward it.
    let away = x.abs() > f64::from(t).abs();
    f32::from_bits(if away {
        t.to_bits() + 1
    } else {
        t.to_bits() - 1
    })
}

/// `a·b + c` rounded to odd in f64: for half inputs `a·b` is exact, and the
/// one rounding of the sum is made sticky.
fn fma_round_to_odd(a: f64, b: f64, c: f64) -> f64 {
    let p = a * b;
    let s = p + c;
    if !s.is_finite() {
        return s;
    }
    // TwoSum: the rounding error of `s`, exactly.
    let bb = s - p;
    let err = (p - (s - bb)) + (c - bb);
    if err == 0.0 || s.to_bits() & 1 == 1 {
        return s;
    }
    // The exact sum is s + err: step to the odd neighbour on its side.
    let away = (err > 0.0) == (s > 0.0);
    f64::from_bits(if away {
        s.to_bits() + 1
    } else {
        s.to_bits() - 1
    })
}

pub(crate) fn add_f16x2(a: u32, b: u32) -> u32 {
    lanewise(F16, [a, b, 0], |a, b, _| fma_round_to_odd(a, 1.0, b))
}

pub(crate) fn sub_f16x2(a: u32, b: u32) -> u32 {
    lanewise(F16, [a, b, 0], |a, b, _| fma_round_to_odd(a, 1.0, -b))
}

pub(crate) fn mul_f16x2(a: u32, b: u32) -> u32 {
    lanewise(F16, [a, b, 0], |a, b, _| fma_round_to_odd(a, b, -0.0))
}

pub(crate) fn fma_f16x2(a: u32, b: u32, c: u32) -> u32 {
    lanewise(F16, [a, b, c], fma_round_to_odd)
}

pub(crate) fn fma_bf16x2(a: u32, b: u32, c: u32) -> u32 {
    lanewise(BF16, [a, b, c], fma_round_to_odd)
}

pub(crate) fn pack_f16x2(hi: u32, lo: u32) -> u32 {
    u32::from(f32_to_f16_bits(f32::from_bits(hi))) << 16
        | u32::from(f32_to_f16_bits(f32::from_bits(lo)))
}

pub(crate) fn pack_bf16x2(hi: u32, lo: u32) -> u32 {
    u32::from(f32_to_bf16_bits(f32::from_bits(hi))) << 16
        | u32::from(f32_to_bf16_bits(f32::from_bits(lo)))
}

/// # Safety
/// As the GPU's: in lanes that supply a row, `row` points at 16 readable bytes
/// of the block's shared memory (the emulator reads them).
pub(crate) unsafe fn ldmatrix<const R: usize>(row: *const u8, trans: bool) -> [u32; R] {
    let op = WarpOp::Ldmatrix {
        matrices: R as u8,
        trans,
    };
    warp_op(op, u32::MAX, row as u64, 0);
    let out = fiber::with_current(|t| t.collective_out.get());
    core::array::from_fn(|i| out[i])
}

pub(crate) fn mma_m16n8k16(kind: MmaKind, a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let mut operands = [0u32; 10];
    operands[..4].copy_from_slice(&a);
    operands[4..6].copy_from_slice(&b);
    for (o, c) in operands[6..].iter_mut().zip(c) {
        *o = c.to_bits();
    }
    fiber::with_current(|t| t.collective_in.set(operands));
    warp_op(WarpOp::Mma(kind), u32::MAX, 0, 0);
    fiber::with_current(|t| t.collective_out.get()).map(f32::from_bits)
}

/// The emulator copies at once; waiting is then a no-op. (A kernel that reads
/// the destination before waiting works here but not on the GPU.)
///
/// # Safety
/// `dst` and `src` must be valid for 16 bytes and not overlap.
pub(crate) unsafe fn cp_async_16(dst: *mut u8, src: *const u8) {
    // SAFETY: the caller's contract.
    unsafe { core::ptr::copy_nonoverlapping(src, dst, 16) }
}

pub(crate) fn cp_async_commit() {}

pub(crate) fn cp_async_wait_all() {}

pub(crate) fn cp_async_wait_group(_pending: u32) {}
