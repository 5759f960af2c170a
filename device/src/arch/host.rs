//! The host backend: every primitive asks the emulator about the calling fiber.
//!
//! Floating-point results follow the NaN rule of `crate::num` ("NaN results"):
//! where the GPU instruction writes its canonical NaN, so does the function
//! here (through `f32_op` and the half conversions), not the host FPU's NaN.

use super::{
    AtomicOp, CANONICAL_NAN_BF16, CANONICAL_NAN_F16, MatchMode, ReduxOp, Scope, ShuffleMode,
    VoteMode, f32_op,
};
use crate::emu::fiber::{
    self, BulkCopy, PendingCopy, PendingStore, Poll, Request, SPIN_BOUND, Site, Spin, WarpOp,
};
use crate::emu::profile::Op;
use crate::emu::race::{Race, RaceDetector, join};
use crate::emu::{Access, Fault, MbarrierProblem, TmaStoreProblem, raise};
use crate::mma::MmaKind;
use crate::thread::Dim3;
use core::panic::Location;
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

// The functions below that a kernel's call reaches are `#[track_caller]`, as
// is the device API above them on the host: `Location::caller()` here is the
// kernel's own line, which the faults name.

#[track_caller]
pub(crate) fn sync_threads() {
    fiber::suspend_at(Location::caller(), Request::SyncThreads { predicate: true });
}

#[track_caller]
pub(crate) fn sync_threads_count(predicate: bool) -> u32 {
    fiber::suspend_at(Location::caller(), Request::SyncThreads { predicate })
}

#[track_caller]
fn warp_op(op: WarpOp, mask: u32, value: u64, arg: u32) -> u32 {
    fiber::suspend_at(
        Location::caller(),
        Request::Warp {
            op,
            mask,
            value,
            arg,
        },
    )
}

/// `bar.warp.sync`: a warp collective whose completion orders the lanes'
/// accesses before it before theirs after it (the race detector's clocks).
#[track_caller]
pub(crate) fn warp_sync(mask: u32) {
    warp_op(WarpOp::Sync, mask, 0, 0);
}

/// `elect.sync`: whether this lane is the one the collective elected.
#[track_caller]
pub(crate) fn elect_sync(mask: u32) -> bool {
    warp_op(WarpOp::Elect, mask, 0, 0) == lane_id()
}

#[track_caller]
pub(crate) fn vote(mode: VoteMode, predicate: bool, mask: u32) -> u32 {
    warp_op(WarpOp::Vote(mode), mask, u64::from(predicate), 0)
}

#[track_caller]
pub(crate) fn match_u64(mode: MatchMode, value: u64, mask: u32) -> u32 {
    warp_op(WarpOp::Match(mode), mask, value, 0)
}

#[track_caller]
pub(crate) fn match_u32(mode: MatchMode, value: u32, mask: u32) -> u32 {
    match_u64(mode, u64::from(value), mask)
}

#[track_caller]
pub(crate) fn redux(op: ReduxOp, value: u32, mask: u32) -> u32 {
    warp_op(WarpOp::Redux(op), mask, u64::from(value), 0)
}

#[track_caller]
pub(crate) fn active_mask() -> u32 {
    let site = Location::caller();
    fiber::suspend_at(site, Request::ActiveMask { site })
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

#[track_caller]
pub(crate) fn shuffle_u32(mode: ShuffleMode, value: u32, arg: u32, mask: u32) -> u32 {
    warp_op(WarpOp::Shuffle(mode), mask, u64::from(value), arg)
}

/// Tells the race detector that this thread reads or writes `bytes` bytes of
/// shared memory at `ptr` with a load or store instruction (counted by the
/// memory profile); a conflicting access unwinds with `Fault::SharedRace`.
#[track_caller]
pub(crate) fn shared_access(ptr: *const u8, bytes: usize, write: bool) {
    shared_access_as(ptr, bytes, write, true);
}

/// As [`shared_access`], for the shared operand of `ldmatrix` or `cp.async`,
/// which the memory profile counts as those instructions instead.
#[track_caller]
pub(crate) fn shared_operand_access(ptr: *const u8, bytes: usize, write: bool) {
    shared_access_as(ptr, bytes, write, false);
}

#[track_caller]
fn shared_access_as(ptr: *const u8, bytes: usize, write: bool, profiled: bool) {
    let site = Location::caller();
    let race = fiber::with_current(|t| {
        t.site.set(Some(site));
        let offset = (ptr as usize).wrapping_sub(t.shared_base as usize);
        if profiled {
            let op = if write {
                Op::SharedStore
            } else {
                Op::SharedLoad
            };
            t.log_access(site, op, offset, bytes);
        }
        shared_checks(t, offset, bytes, write, site)
    });
    if let Err(fault) = race {
        raise(fault);
    }
}

/// The `Fault::SharedRace` of `race`, found at `site` by thread `t`.
fn shared_race(t: &fiber::ThreadState, race: Race, site: Site) -> Fault {
    Fault::SharedRace {
        offset: race.offset,
        other: race
            .other_thread()
            .map(|o| t.block_dim.unflatten(u64::from(o))),
        this_writes: race.this_access == Access::Write,
        other_writes: race.other_access == Access::Write,
        at: site.into(),
        other_at: race.other_site.map(Into::into),
    }
}

/// `Fault::CpAsyncPending` if shared bytes `offset .. offset + bytes` are
/// the destination of a `cp.async` that its thread has not waited for,
/// `Fault::BulkCopyPending` if of a bulk copy that has not landed.
fn pending_copy_check(
    t: &fiber::ThreadState,
    offset: usize,
    bytes: usize,
    write: bool,
    site: Site,
) -> Result<(), Fault> {
    if write
        && let Some(store) = t.block().stores.borrow().iter().find(|s| {
            let (from, len) = s.src;
            from < offset.saturating_add(bytes) && offset < from + len
        })
    {
        return Err(Fault::TmaStore {
            problem: TmaStoreProblem::SourceInUse {
                offset: store.src.0.max(offset),
                issuer: t.block_dim.unflatten(u64::from(store.thread)),
            },
            at: site.into(),
            other_at: Some(store.site.into()),
        });
    }
    let start = t.shared_base as usize + offset;
    let end = start.saturating_add(bytes);
    let bulk = t.block().bulk.borrow();
    if let Some(copy) = bulk
        .iter()
        .find(|c| (c.dst as usize) < end && start < c.dst as usize + c.data.len())
    {
        return Err(Fault::BulkCopyPending {
            offset: (copy.dst as usize).max(start) - t.shared_base as usize,
            issuer: t.block_dim.unflatten(u64::from(copy.thread)),
            barrier: copy.barrier,
            this_writes: write,
            at: site.into(),
            issued_at: copy.site.into(),
        });
    }
    let copies = t.block().copies.borrow();
    if copies.is_empty() {
        return Ok(());
    }
    let Some(copy) = copies
        .iter()
        .find(|c| (c.dst as usize) < end && start < c.dst as usize + 16)
    else {
        return Ok(());
    };
    Err(Fault::CpAsyncPending {
        offset: (copy.dst as usize).max(start) - t.shared_base as usize,
        issuer: t.block_dim.unflatten(u64::from(copy.thread)),
        this_writes: write,
        at: site.into(),
        issued_at: copy.site.into(),
    })
}

/// Seeded interleaving: 1 time in 8 (by the block's PRNG), lets the block's
/// other threads run before this thread goes on.
fn maybe_yield(t: &fiber::ThreadState) -> bool {
    t.block().interleave()
}

/// Suspends the calling fiber with a yield (unless it is unwinding).
fn yield_now(spin: Spin) {
    if !std::thread::panicking() {
        fiber::suspend(Request::Yield { spin });
    }
}

/// Tells the race detector that this thread reads or writes (plainly) `bytes`
/// bytes of global memory at `ptr` (an output element, through a `Slot`); a
/// conflicting access unwinds with `Fault::GlobalRace`. Outside a launch
/// (a `Slot` of a host slice) it does nothing. Before the access, the
/// thread may yield to the block's others (seeded interleaving).
#[track_caller]
pub(crate) fn global_access(ptr: *const u8, bytes: usize, write: bool) {
    let site = Location::caller();
    let interleave = fiber::try_with_current(|t| {
        t.site.set(Some(site));
        maybe_yield(t)
    });
    if interleave == Some(true) {
        yield_now(Spin::No);
    }
    let access = if write { Access::Write } else { Access::Read };
    let race = fiber::try_with_current(|t| {
        let op = if write {
            Op::GlobalStore
        } else {
            Op::GlobalLoad
        };
        t.log_access(site, op, ptr as usize, bytes);
        if write {
            t.block().progressed();
        }
        // SAFETY: the detector lives as long as the block (see the scheduler).
        let Some(detector) = (unsafe { t.race.as_ref() }) else {
            return Ok(());
        };
        detector
            .global_access(t.linear_id, ptr as usize, bytes, access, site)
            .map_err(|race| global_race(t, race, site))
    });
    if let Some(Err(fault)) = race {
        raise(fault);
    }
}

/// A load of `bytes` bytes of a kernel input at `ptr` (`Global::load`):
/// nothing writes inputs during a launch, so only the memory profile sees it.
#[track_caller]
pub(crate) fn global_input_load(ptr: *const u8, bytes: usize) {
    let site = Location::caller();
    fiber::try_with_current(|t| t.log_access(site, Op::GlobalLoad, ptr as usize, bytes));
}

fn global_race(t: &fiber::ThreadState, race: Race, site: Site) -> Fault {
    Fault::GlobalRace {
        buffer: race.buffer,
        element: race.offset,
        other_block: t.grid_dim.unflatten(u64::from(race.other_block)),
        other: race
            .other_thread()
            .map(|o| t.block_dim.unflatten(u64::from(o))),
        this_access: race.this_access,
        other_access: race.other_access,
        at: site.into(),
        other_at: race.other_site.map(Into::into),
    }
}

/// Tells the race detector about an atomic on `bytes` bytes at `ptr`, in shared
/// or global memory, before it runs: in shared memory it initialises the bytes
/// (and reads them, if `reads_old`: every operation but a swap); in global
/// memory it is checked against plain accesses, and after a fence it is a
/// release. A conflict unwinds with `Fault::GlobalRace`.
#[track_caller]
fn atomic_access(ptr: *const u8, bytes: usize, reads_old: bool) {
    let site = Location::caller();
    let race = fiber::try_with_current(|t| {
        t.site.set(Some(site));
        let offset = (ptr as usize).wrapping_sub(t.shared_base as usize);
        if offset < t.shared_len {
            t.log_access(site, Op::SharedAtomic, offset, bytes);
            pending_copy_check(t, offset, bytes, true, site)?;
        } else {
            t.log_access(site, Op::GlobalAtomic, ptr as usize, bytes);
        }
        // SAFETY: the detector lives as long as the block (see the scheduler).
        let Some(detector) = (unsafe { t.race.as_ref() }) else {
            return Ok(());
        };
        if offset < t.shared_len {
            detector.shared_atomic(t.linear_id, offset, bytes, reads_old, site);
            return Ok(());
        }
        detector
            .global_access(t.linear_id, ptr as usize, bytes, Access::Atomic, site)
            .map_err(|race| global_race(t, race, site))
    });
    if let Some(Err(fault)) = race {
        raise(fault);
    }
}

/// After an atomic on `ptr` that saw `old` and `changed` memory or not: the
/// spin rule's bookkeeping, then maybe a yield. A thread that polls the same
/// element and sees the same value again yields at once (and then every 64
/// polls), so that whoever would release it runs; after [`SPIN_BOUND`] such
/// polls with no change to memory in the block it yields as a stuck spinner,
/// and the scheduler decides whether that is a deadlock.
fn after_atomic(ptr: *const u8, old: u64, changed: bool) {
    let spin = fiber::try_with_current(|t| {
        let block = t.block();
        if changed {
            block.progressed();
            t.poll.set(Poll::default());
            return maybe_yield(t).then_some(Spin::No);
        }
        let addr = ptr as usize;
        let mut poll = t.poll.get();
        let progress = block.progress.get();
        if (poll.addr, poll.value, poll.progress) == (addr, old, progress) && addr != 0 {
            poll.repeats = poll.repeats.saturating_add(1);
        } else {
            poll = Poll {
                addr,
                value: old,
                progress,
                repeats: 0,
            };
        }
        t.poll.set(poll);
        if poll.repeats >= SPIN_BOUND {
            let offset = addr.wrapping_sub(t.shared_base as usize);
            Some(if offset < t.shared_len {
                Spin::Shared
            } else {
                Spin::Global
            })
        } else if poll.repeats == 1 || (poll.repeats > 0 && poll.repeats % 64 == 0) {
            Some(Spin::No)
        } else {
            maybe_yield(t).then_some(Spin::No)
        }
    });
    if let Some(Some(spin)) = spin {
        yield_now(spin);
    }
}

pub(crate) fn dynamic_shared() -> (*mut u8, usize) {
    fiber::with_current(|t| (t.shared_base, t.shared_len))
}

/// `unroll::order_point`: the emulator runs in program order anyway.
pub(crate) fn order_point_f32x64(_v: &mut [[f32; 8]; 8]) {}

#[inline(always)]
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
        #[track_caller]
        pub(crate) unsafe fn $name(op: AtomicOp, _scope: Scope, ptr: *mut $t, v: $t) -> $t {
            // SAFETY: the caller's contract; every access to `*ptr` that can race
            // with this one is atomic too, or a kernel bug the GPU would share.
            atomic_access(ptr.cast(), size_of::<$t>(), op != AtomicOp::Exch);
            let a = unsafe { <$atomic>::from_ptr(ptr) };
            let o = Ordering::SeqCst;
            let (old, new) = match op {
                AtomicOp::Add => {
                    let old = a.fetch_add(v, o);
                    (old, old.wrapping_add(v))
                }
                AtomicOp::Min => {
                    let old = a.fetch_min(v, o);
                    (old, old.min(v))
                }
                AtomicOp::Max => {
                    let old = a.fetch_max(v, o);
                    (old, old.max(v))
                }
                AtomicOp::Exch => (a.swap(v, o), v),
                AtomicOp::And => {
                    let old = a.fetch_and(v, o);
                    (old, old & v)
                }
                AtomicOp::Or => {
                    let old = a.fetch_or(v, o);
                    (old, old | v)
                }
                AtomicOp::Xor => {
                    let old = a.fetch_xor(v, o);
                    (old, old ^ v)
                }
            };
            after_atomic(ptr.cast(), old as u64, old != new);
            old
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
        #[track_caller]
        pub(crate) unsafe fn $name(_scope: Scope, ptr: *mut $t, current: $t, new: $t) -> $t {
            atomic_access(ptr.cast(), size_of::<$t>(), true);
            // SAFETY: the caller's contract.
            let a = unsafe { <$atomic>::from_ptr(ptr) };
            let old = a
                .compare_exchange(current, new, Ordering::SeqCst, Ordering::SeqCst)
                .unwrap_or_else(|actual| actual);
            after_atomic(ptr.cast(), old as u64, old == current && new != current);
            old
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
        #[track_caller]
        pub(crate) unsafe fn $name(_scope: Scope, ptr: *mut $t, v: $t) -> $t {
            atomic_access(ptr.cast(), size_of::<$t>(), true);
            // SAFETY: the caller's contract; the float has the size and alignment of its bits.
            let a = unsafe { <$atomic>::from_ptr(ptr.cast::<$bits>()) };
            let add = |b: $bits| $nan(<$t>::from_bits(b) + v).to_bits();
            let old = a
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| Some(add(b)))
                .unwrap_or_else(|b| b);
            after_atomic(ptr.cast(), old as u64, add(old) != old);
            <$t>::from_bits(old)
        }
    };
}
atom_add_float!(atom_add_f32, f32, u32, AtomicU32, f32_op);
atom_add_float!(atom_add_f64, f64, u64, AtomicU64, core::convert::identity);

/// # Safety
/// `ptr` must be valid and 2-byte aligned for atomic access to an f16.
#[track_caller]
pub(crate) unsafe fn atom_add_f16(_scope: Scope, ptr: *mut u16, v: u16) -> u16 {
    atomic_access(ptr.cast(), 2, true);
    // SAFETY: the caller's contract.
    let a = unsafe { AtomicU16::from_ptr(ptr) };
    let add = |b: u16| {
        // f32 has more than 2·11 + 2 bits, so rounding the f32 sum again to f16
        // gives the correctly rounded f16 sum.
        let sum = half::f16::from_bits(b).to_f32() + half::f16::from_bits(v).to_f32();
        f32_to_f16_bits(sum)
    };
    let old = a
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| Some(add(b)))
        .unwrap_or_else(|b| b);
    after_atomic(ptr.cast(), u64::from(old), add(old) != old);
    old
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
#[track_caller]
pub(crate) unsafe fn ldmatrix<const R: usize>(row: *const u8, trans: bool) -> [u32; R] {
    let op = WarpOp::Ldmatrix {
        matrices: R as u8,
        trans,
    };
    warp_op(op, u32::MAX, row as u64, 0);
    let out = fiber::with_current(|t| t.collective_out.get());
    core::array::from_fn(|i| out[i])
}

/// `cvt.rna.tf32.f32`: round to 10 fraction bits, nearest with ties away
/// from zero (half an ulp added to the magnitude, then truncated; overflow
/// rounds to ±inf as on the GPU); a NaN becomes the canonical f32 NaN.
pub(crate) fn f32_to_tf32_bits(x: f32) -> u32 {
    if x.is_nan() {
        crate::arch::CANONICAL_NAN_F32
    } else {
        x.to_bits().wrapping_add(0x1000) & !0x1fff
    }
}

#[track_caller]
pub(crate) fn mma_sync(kind: MmaKind, a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
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

/// An f64 `mma.sync` of shape `kind`: the lane's A, B and C elements, in
/// that order, in `f64_in`; D's back in `f64_out` (`emu::tensor`, which
/// computes it).
#[track_caller]
fn mma_sync_f64_of(kind: crate::mma::dmma::Kind, operands: [f64; 16]) -> [f64; 4] {
    fiber::with_current(|t| t.f64_in.set(operands));
    warp_op(WarpOp::MmaF64(kind), u32::MAX, 0, 0);
    fiber::with_current(|t| t.f64_out.get())
}

/// `mma.sync.m8n8k4` f64 ([`mma_sync_f64_of`]).
#[track_caller]
pub(crate) fn mma_sync_f64(a: f64, b: f64, c: [f64; 2]) -> [f64; 2] {
    let mut operands = [0f64; 16];
    operands[..4].copy_from_slice(&[a, b, c[0], c[1]]);
    let d = mma_sync_f64_of(crate::mma::dmma::Kind::M8n8k4, operands);
    [d[0], d[1]]
}

/// `mma.sync.m16n8k16` f64 (sm_90; [`mma_sync_f64_of`]).
#[track_caller]
pub(crate) fn mma_sync_f64_m16n8k16(a: [f64; 8], b: [f64; 4], c: [f64; 4]) -> [f64; 4] {
    let mut operands = [0f64; 16];
    operands[..8].copy_from_slice(&a);
    operands[8..12].copy_from_slice(&b);
    operands[12..].copy_from_slice(&c);
    mma_sync_f64_of(crate::mma::dmma::Kind::M16n8k16, operands)
}

/// The emulator defers the copy, as the GPU may: it reads the 16 source
/// bytes now, fills the destination with `0xFF` bytes (what has not landed),
/// and writes the data only when this thread waits for the copy's group
/// ([`cp_async_wait_all`], [`cp_async_wait_group`]) or exits. Until then any
/// access to the destination, by any thread of the block, is reported as
/// `Fault::CpAsyncPending`. (A barrier does not complete a `cp.async`.)
/// Outside a launch it copies at once.
///
/// # Safety
/// `dst` and `src` must be valid for 16 bytes and not overlap.
#[track_caller]
pub(crate) unsafe fn cp_async_16(dst: *mut u8, src: *const u8) {
    // SAFETY: the caller's contract, passed on.
    unsafe { cp_async_16_or_zero(dst, Some(src)) }
}

/// [`cp_async_16`] from `src`, or (`None`) 16 zero bytes, read from nowhere
/// (`cp.async`'s zero fill: a source size of 0).
///
/// # Safety
/// `dst` valid for 16 bytes; `src`, if any, as [`cp_async_16`]'s.
#[track_caller]
unsafe fn cp_async_16_or_zero(dst: *mut u8, src: Option<*const u8>) {
    let site = Location::caller();
    let mut data = [0u8; 16];
    if let Some(src) = src {
        // SAFETY: the caller's contract: `src` is valid for 16 bytes.
        unsafe { core::ptr::copy_nonoverlapping(src, data.as_mut_ptr(), 16) };
    }
    let deferred = fiber::try_with_current(|t| {
        t.site.set(Some(site));
        if let Some(src) = src {
            t.log_access(site, Op::CpAsync, src as usize, 16);
        }
        let block = t.block();
        block.copies.borrow_mut().push(PendingCopy {
            thread: t.linear_id,
            dst,
            data,
            group: t.cp_groups.get(),
            site,
        });
        block.progressed();
    });
    let fill = if deferred.is_some() { None } else { Some(data) };
    // SAFETY: the caller's contract: `dst` is valid for 16 bytes.
    unsafe {
        match fill {
            Some(data) => core::ptr::copy_nonoverlapping(data.as_ptr(), dst, 16),
            None => core::ptr::write_bytes(dst, 0xFF, 16),
        }
    }
}

/// [`cp_async_16`] at a shared "address" (the host pointer), if `issue`.
///
/// # Safety
/// If `issue`, as [`cp_async_16`]'s.
#[track_caller]
pub(crate) unsafe fn cp_async_16_at(dst: SharedAddr, src: *const u8, issue: bool) {
    if issue {
        // SAFETY: the caller's contract, passed on.
        unsafe { cp_async_16(dst.cast_mut(), src) }
    }
}

/// [`cp_async_16_at`] that copies 16 zero bytes instead, reading nothing,
/// when `zero` (`cp.async`'s zero fill), if `issue`.
///
/// # Safety
/// If `issue`: `dst` valid for 16 bytes, and unless `zero`, `src` as
/// [`cp_async_16`]'s.
#[track_caller]
pub(crate) unsafe fn cp_async_16_zfill_at(
    dst: SharedAddr,
    src: *const u8,
    zero: bool,
    issue: bool,
) {
    if issue {
        // SAFETY: the caller's contract, passed on.
        unsafe { cp_async_16_or_zero(dst.cast_mut(), (!zero).then_some(src)) }
    }
}

/// Counts the block as taking the code path `name` in a profiled launch.
pub(crate) fn record_path(name: &'static str) {
    fiber::try_with_current(|t| t.record_path(name));
}

/// Ends this thread's current group of copies.
pub(crate) fn cp_async_commit() {
    fiber::try_with_current(|t| t.cp_groups.set(t.cp_groups.get().wrapping_add(1)));
}

/// `cp.async.wait_all`: commits, then waits for every group.
pub(crate) fn cp_async_wait_all() {
    cp_async_commit();
    fiber::try_with_current(|t| land_copies(t, u32::MAX));
}

/// Lands this thread's copies of every group but the newest `pending` committed ones.
pub(crate) fn cp_async_wait_group(pending: u32) {
    fiber::try_with_current(|t| land_copies(t, pending));
}

/// Writes out the copies of `t` that are in a committed group older than the
/// newest `keep` ones (all of them, committed or not, if `keep` is `u32::MAX`).
pub(crate) fn land_copies(t: &fiber::ThreadState, keep: u32) {
    let block = t.block();
    let mut copies = block.copies.borrow_mut();
    let committed = t.cp_groups.get();
    let before = copies.len();
    copies.retain(|c| {
        let lands = c.thread == t.linear_id
            && (keep == u32::MAX || c.group < committed.saturating_sub(keep));
        if lands {
            // SAFETY: `dst` is 16 bytes of the block's shared memory (checked at
            // issue), which outlives every fiber of the block.
            unsafe { core::ptr::copy_nonoverlapping(c.data.as_ptr(), c.dst, 16) };
        }
        !lands
    });
    if copies.len() != before {
        block.progressed();
    }
}

/// On the emulator a shared "address" is the host pointer itself.
pub(crate) type SharedAddr = *const u8;

/// The GPU's `cvta.to.shared`; here the pointer as is.
#[inline(always)]
pub(crate) fn shared_addr(ptr: *const u8) -> SharedAddr {
    ptr
}

/// `addr + bytes`.
#[inline(always)]
pub(crate) fn shared_addr_add(addr: SharedAddr, bytes: u32) -> SharedAddr {
    addr.wrapping_add(bytes as usize)
}

/// The 4 bytes at `addr` (the caller recorded the access).
///
/// # Safety
/// `addr` must be valid for a 4-byte aligned read.
pub(crate) unsafe fn ld_shared_u32_at(addr: SharedAddr) -> u32 {
    // SAFETY: the caller's contract.
    unsafe { addr.cast::<u32>().read() }
}

/// The 8 bytes at `addr` (the caller recorded the access).
///
/// # Safety
/// `addr` must be valid for an 8-byte aligned read.
pub(crate) unsafe fn ld_shared_v2_at(addr: SharedAddr) -> [u32; 2] {
    // The GPU faults on a misaligned vector load: so does the emulator.
    assert!(
        (addr as usize).is_multiple_of(8),
        "ld.shared.v2 at a shared address not 8-byte aligned"
    );
    // SAFETY: the caller's contract.
    unsafe { addr.cast::<[u32; 2]>().read() }
}

/// The 16 bytes at `addr` (the caller recorded the access).
///
/// # Safety
/// `addr` must be valid for a 16-byte aligned read.
pub(crate) unsafe fn ld_shared_v4_at(addr: SharedAddr) -> [u32; 4] {
    // SAFETY: the caller's contract.
    unsafe { addr.cast::<[u32; 4]>().read() }
}

/// Writes the 16 bytes at `addr` (the caller recorded the access).
///
/// # Safety
/// `addr` must be valid for a 16-byte aligned write.
pub(crate) unsafe fn st_shared_v4_at(addr: SharedAddr, v: [u32; 4]) {
    // SAFETY: the caller's contract.
    unsafe { addr.cast::<[u32; 4]>().cast_mut().write(v) }
}

/// [`ldmatrix`] at `addr`.
///
/// # Safety
/// As [`ldmatrix`]'s.
#[track_caller]
pub(crate) unsafe fn ldmatrix_at<const R: usize>(addr: SharedAddr, trans: bool) -> [u32; R] {
    // SAFETY: the caller's contract, passed on.
    unsafe { ldmatrix::<R>(addr, trans) }
}

/// One 16-byte load of global memory, as four 32-bit words (on the GPU a
/// single `ld.global.v4.b32`).
///
/// # Safety
/// `ptr` must be valid for a 16-byte, 16-byte-aligned read.
pub(crate) unsafe fn ld_global_v4(ptr: *const u8) -> [u32; 4] {
    // SAFETY: the caller's contract.
    unsafe { ptr.cast::<[u32; 4]>().read() }
}

/// `ld.global.v4.b32` of an output's memory (the caller records the access).
///
/// # Safety
/// `ptr` must be 16 readable, 16-byte-aligned bytes.
#[inline]
pub(crate) unsafe fn ld_global_v4_output(ptr: *const u8) -> [u32; 4] {
    // SAFETY: the caller's contract.
    unsafe { ptr.cast::<[u32; 4]>().read() }
}

/// `st.global.v4.b32` (the caller records the access).
///
/// # Safety
/// `ptr` must be 16 writable, 16-byte-aligned bytes this thread alone accesses.
#[inline]
pub(crate) unsafe fn st_global_v4(ptr: *mut u8, v: [u32; 4]) {
    // SAFETY: the caller's contract.
    unsafe { ptr.cast::<[u32; 4]>().write(v) }
}

/// Runs mbarrier operation `op` on the barrier at `addr` for the calling
/// thread (its block's barriers, its offset, the block's race detector),
/// noting a change to the block's state; unwinds with `Fault::Mbarrier`,
/// naming the call, if the operation breaks the barrier's protocol.
#[track_caller]
fn mbarrier_op<R>(
    addr: SharedAddr,
    op: impl FnOnce(&fiber::ThreadState, usize, Option<&RaceDetector>) -> Result<R, MbarrierProblem>,
) -> R {
    let site = Location::caller();
    let result = fiber::with_current(|t| {
        t.site.set(Some(site));
        let offset = (addr as usize).wrapping_sub(t.shared_base as usize);
        let outcome = if offset.checked_add(8).is_none_or(|end| end > t.shared_len) {
            Err(MbarrierProblem::NotLive)
        } else if !offset.is_multiple_of(8) {
            Err(MbarrierProblem::Misaligned)
        } else {
            // SAFETY: the detector lives as long as the block (see the scheduler).
            op(t, offset, unsafe { t.race.as_ref() })
        };
        outcome.map_err(|problem| Fault::Mbarrier {
            offset,
            problem,
            at: site.into(),
        })
    });
    result.unwrap_or_else(|fault| raise(fault))
}

/// The release of an arrive or `complete_tx`: this thread's clock, joined
/// into the phase's (nothing when the race detector is off).
fn release<'a>(
    t: &fiber::ThreadState,
    race: Option<&'a RaceDetector>,
) -> impl FnOnce(&mut Vec<u32>) + 'a {
    let thread = t.linear_id;
    move |into| {
        if let Some(r) = race {
            r.release(thread, into);
        }
    }
}

/// `mbarrier.init`.
///
/// # Safety
/// As the GPU's (the emulator checks what it can).
#[track_caller]
pub(crate) unsafe fn mbarrier_init(addr: SharedAddr, count: u32) {
    mbarrier_op(addr, |t, offset, _| {
        t.block().progressed();
        t.block().mbarriers.borrow_mut().init(offset, count)
    });
}

/// `mbarrier.arrive` (a release).
///
/// # Safety
/// As the GPU's (the emulator checks what it can).
#[track_caller]
pub(crate) unsafe fn mbarrier_arrive(addr: SharedAddr) {
    // SAFETY: forwarded.
    unsafe { mbarrier_arrive_expect_tx(addr, 0) }
}

/// `mbarrier.arrive.expect_tx`: the tx-count raised by `bytes`, then an arrive.
///
/// # Safety
/// As the GPU's (the emulator checks what it can).
#[track_caller]
pub(crate) unsafe fn mbarrier_arrive_expect_tx(addr: SharedAddr, bytes: u32) {
    mbarrier_op(addr, |t, offset, race| {
        t.block().progressed();
        let release = release(t, race);
        t.block()
            .mbarriers
            .borrow_mut()
            .arrive(offset, bytes, release)
    });
}

/// `mbarrier.expect_tx`.
///
/// # Safety
/// As the GPU's (the emulator checks what it can).
#[track_caller]
pub(crate) unsafe fn mbarrier_expect_tx(addr: SharedAddr, bytes: u32) {
    mbarrier_op(addr, |t, offset, _| {
        t.block().progressed();
        t.block()
            .mbarriers
            .borrow_mut()
            .tx(offset, i64::from(bytes), |_| {})
    });
}

/// `mbarrier.complete_tx` (a release, as an async copy's completion is).
///
/// # Safety
/// As the GPU's (the emulator checks what it can).
#[track_caller]
pub(crate) unsafe fn mbarrier_complete_tx(addr: SharedAddr, bytes: u32) {
    mbarrier_op(addr, |t, offset, race| {
        t.block().progressed();
        let release = release(t, race);
        t.block()
            .mbarriers
            .borrow_mut()
            .tx(offset, -i64::from(bytes), release)
    });
}

/// `mbarrier.test_wait.parity` for phase number `phase` (the emulator checks
/// the whole number, the GPU sees its parity): whether it completed; if so
/// the thread acquires what its arrivals released.
///
/// # Safety
/// As the GPU's (the emulator checks what it can).
#[track_caller]
pub(crate) unsafe fn mbarrier_test_wait(addr: SharedAddr, phase: u32) -> bool {
    mbarrier_op(addr, |t, offset, race| {
        if t.block()
            .mbarriers
            .borrow_mut()
            .wait(offset, phase)?
            .is_none()
        {
            land_bulk_copies(t, offset)?;
        }
        let mut barriers = t.block().mbarriers.borrow_mut();
        let done = barriers.wait(offset, phase)?;
        if let (Some(clock), Some(race)) = (done, race) {
            race.acquire(t.linear_id, clock);
        }
        Ok(done.is_some())
    })
}

/// `mbarrier.try_wait.parity`: as [`mbarrier_test_wait`]; when the phase is
/// not complete the thread yields to the block's others, and counts as
/// stuck (for `Fault::SpinDeadlock`) if nothing in the block changed since
/// its last poll of the same phase.
///
/// # Safety
/// As the GPU's (the emulator checks what it can).
#[track_caller]
pub(crate) unsafe fn mbarrier_try_wait(addr: SharedAddr, phase: u32) -> bool {
    // SAFETY: forwarded.
    let done = unsafe { mbarrier_test_wait(addr, phase) };
    if !done {
        let spin = fiber::with_current(|t| {
            let progress = t.block().progress.get();
            let key = addr as usize;
            let mut poll = t.poll.get();
            if (poll.addr, poll.value, poll.progress) == (key, u64::from(phase), progress) {
                poll.repeats = poll.repeats.saturating_add(1);
            } else {
                poll = Poll {
                    addr: key,
                    value: u64::from(phase),
                    progress,
                    repeats: 0,
                };
            }
            t.poll.set(poll);
            if poll.repeats > 0 {
                Spin::Shared
            } else {
                Spin::No
            }
        });
        yield_now(spin);
    }
    done
}

/// `fence.proxy.async.shared::cta`: this thread's plain stores to shared
/// memory so far become visible to the async proxy (`wgmma`'s operand
/// reads). The emulator's memory is one, so nothing moves; the race
/// detector counts the fence, and an async-proxy read of a plain store its
/// writer has not fenced since is `WgmmaProblem::UnfencedOperand`.
pub(crate) fn fence_proxy_async_shared() {
    fiber::try_with_current(|t| {
        // SAFETY: the detector lives as long as the block (see the scheduler).
        if let Some(race) = unsafe { t.race.as_ref() } {
            race.proxy_fence(t.linear_id);
        }
    });
}

/// `cp.async.bulk` global → shared, its bytes counted on the barrier at
/// `bar`. The emulator reads the source now and queues the copy; it lands
/// when a wait on `bar` finds the phase incomplete ([`land_bulk_copies`]),
/// the latest a GPU may land it. Until then the destination holds `0xFF`
/// bytes and any access to it is `Fault::BulkCopyPending`. For the race
/// detector the copy writes its destination at issue, as the issuing
/// thread, and its landing releases that thread's clock at issue: a thread
/// that waits for the phase is ordered after the copy, one that does not
/// races with it. Outside a launch it copies at once.
///
/// # Safety
/// `src` valid for `bytes` reads and `dst` for `bytes` writes, not
/// overlapping (the emulator checks the barrier).
#[track_caller]
pub(crate) unsafe fn bulk_copy_to_shared(
    dst: SharedAddr,
    src: *const u8,
    bytes: u32,
    bar: SharedAddr,
) {
    // SAFETY: the caller's contract: `src` is valid for `bytes` reads.
    let data = unsafe { core::slice::from_raw_parts(src, bytes as usize) }.to_vec();
    // SAFETY: the caller's contract: `dst` is valid for `bytes` writes.
    unsafe { queue_bulk_copy(dst, data, bar, Location::caller()) }
}

/// `cp.async.bulk.tensor` global → shared (the TMA's tensor form): the box
/// of `map` at `corner` gathered now (zeros outside the tensor, swizzled as
/// the map says) and queued as a bulk copy of the whole box, which lands as
/// [`bulk_copy_to_shared`]'s do.
///
/// # Safety
/// `dst` valid for the box's bytes; `map`'s buffer readable.
#[track_caller]
pub(crate) unsafe fn tma_load<const R: usize>(
    dst: SharedAddr,
    map: &crate::emu::tma::TensorDesc,
    corner: [i32; R],
    bar: SharedAddr,
) {
    // SAFETY: the caller's contract: the map's buffer is readable.
    let data = unsafe { map.gather(&corner) };
    // SAFETY: the caller's contract: `dst` is valid for the box's bytes.
    unsafe { queue_bulk_copy(dst, data, bar, Location::caller()) }
}

/// `cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group` (a TMA
/// store): the box of `map` at `corner` written from the shared tile at
/// `src` (laid out as a load of the box would land it). The emulator
/// checks the source as the issuing thread's read (bounds, pending copies,
/// races) and through the async proxy (each byte's plain store fenced by
/// its writer: `TmaStoreProblem::UnfencedSource`), refuses a box
/// overlapping one of this thread's stores not yet waited for, then writes
/// the global elements at once, as this thread's writes for the race
/// detector, and keeps the source in use (`SourceInUse` for a write to
/// it) until the thread's `wait_read` covers the store's group. Overlap is
/// checked among the stores whose sources are still in use (a store
/// overlapping one already read is not reported: a miss, never a false
/// report).
///
/// # Safety
/// `src` valid for the box's bytes; `map`'s buffer writable (a map the
/// host made from a `&mut` buffer, bound to the launch as written).
#[track_caller]
pub(crate) unsafe fn tma_store(
    src: SharedAddr,
    map: &crate::emu::tma::TensorDesc,
    corner: [i32; 3],
) {
    let site = Location::caller();
    let bytes = map
        .box_dims()
        .iter()
        .map(|&b| b as usize)
        .product::<usize>()
        * map.elem();
    let done = fiber::try_with_current(|t| -> Result<(), Fault> {
        t.site.set(Some(site));
        let offset = (src as usize).wrapping_sub(t.shared_base as usize);
        shared_checks(t, offset, bytes, false, site)?;
        // SAFETY: the detector lives as long as the block (see the scheduler).
        let race = unsafe { t.race.as_ref() };
        if let Some(w) = race.and_then(|race| race.async_read(offset, bytes)) {
            return Err(Fault::TmaStore {
                problem: TmaStoreProblem::UnfencedSource {
                    offset: w.offset,
                    writer: t.block_dim.unflatten(u64::from(w.writer)),
                },
                at: site.into(),
                other_at: w.writer_site.map(Into::into),
            });
        }
        if let Some((cols, end)) = map.store_overrun(i64::from(corner[0])) {
            return Err(Fault::TmaStore {
                problem: TmaStoreProblem::PastTheRow {
                    cols,
                    end,
                    elem: map.elem(),
                },
                at: site.into(),
                other_at: None,
            });
        }
        let base = map.base() as usize;
        let box_corner = corner.map(i64::from);
        let extent = [0, 1, 2].map(|d| i64::from(map.box_dims().get(d).copied().unwrap_or(1)));
        let block = t.block();
        if let Some(earlier) = block.stores.borrow().iter().find(|s| {
            s.thread == t.linear_id
                && s.base == base
                && (0..3).all(|d| {
                    s.corner[d] < box_corner[d] + extent[d]
                        && box_corner[d] < s.corner[d] + s.extent[d]
                })
        }) {
            return Err(Fault::TmaStore {
                problem: TmaStoreProblem::Overlapping {
                    corner: earlier.corner,
                },
                at: site.into(),
                other_at: Some(earlier.site.into()),
            });
        }
        // SAFETY: the caller's contract: `src` is valid for the box's bytes.
        let data = unsafe { core::slice::from_raw_parts(src, bytes) }.to_vec();
        // SAFETY: the caller's contract: the map's buffer is writable.
        unsafe {
            // Not in the memory profile: that counts the threads' own
            // requests, and the copy engine's (TMA and bulk copies) are not.
            map.scatter(&corner, &data, |addr, n| match race {
                Some(detector) => detector
                    .global_access(t.linear_id, addr, n, Access::Write, site)
                    .map_err(|r| global_race(t, r, site)),
                None => Ok(()),
            })?
        };
        block.progressed();
        block.stores.borrow_mut().push(PendingStore {
            thread: t.linear_id,
            src: (offset, bytes),
            group: None,
            base,
            corner: box_corner,
            extent,
            site,
        });
        Ok(())
    });
    match done {
        Some(Err(fault)) => raise(fault),
        Some(Ok(())) => {}
        // Outside a launch: the store, with nobody to race.
        // SAFETY: the caller's contract, as above.
        None => unsafe {
            let data = core::slice::from_raw_parts(src, bytes).to_vec();
            let _ = map.scatter(&corner, &data, |_, _| Ok::<(), ()>(()));
        },
    }
}

/// `cp.async.bulk.commit_group`: this thread's TMA stores not yet in a
/// group form its newest bulk async-group.
pub(crate) fn bulk_commit_group() {
    fiber::try_with_current(|t| {
        let group = t.bulk_groups.get();
        for s in t.block().stores.borrow_mut().iter_mut() {
            if s.thread == t.linear_id && s.group.is_none() {
                s.group = Some(group);
            }
        }
        t.bulk_groups.set(group.wrapping_add(1));
    });
}

/// `cp.async.bulk.wait_group.read keep`: this thread's bulk async-groups
/// but the newest `keep` have read their sources, so their staging tiles
/// are free and they leave the block's list.
pub(crate) fn bulk_wait_group_read(keep: u32) {
    fiber::try_with_current(|t| {
        let committed = t.bulk_groups.get();
        let block = t.block();
        let mut stores = block.stores.borrow_mut();
        let before = stores.len();
        stores.retain(|s| {
            s.thread != t.linear_id || s.group.is_none_or(|g| g >= committed.saturating_sub(keep))
        });
        if stores.len() != before {
            block.progressed();
        }
    });
}

/// The fault for a thread that exits while its TMA stores may still read
/// their sources (`None` if it waited for them all).
pub(crate) fn stores_not_waited(t: &fiber::ThreadState) -> Option<Fault> {
    let stores = t.block().stores.borrow();
    let mut mine = stores.iter().filter(|s| s.thread == t.linear_id);
    let first = mine.next()?;
    Some(Fault::TmaStore {
        problem: TmaStoreProblem::NotWaited {
            stores: 1 + mine.count(),
        },
        at: t.site.get().unwrap_or(first.site).into(),
        other_at: Some(first.site.into()),
    })
}

/// `prefetch.tensormap`: a hint the emulator has no cache for.
pub(crate) fn tma_prefetch_map(_map: &crate::emu::tma::TensorDesc) {}

/// Queues `data` for `dst`, to land when a wait on `bar` needs it (see
/// [`bulk_copy_to_shared`]); outside a launch it lands at once.
///
/// # Safety
/// `dst` valid for `data.len()` writes.
unsafe fn queue_bulk_copy(dst: SharedAddr, data: Vec<u8>, bar: SharedAddr, site: Site) {
    let len = data.len();
    let dst = dst.cast_mut();
    let mut data = Some(data);
    let queued = fiber::try_with_current(|t| {
        t.site.set(Some(site));
        let offset = (dst as usize).wrapping_sub(t.shared_base as usize);
        let barrier = (bar as usize).wrapping_sub(t.shared_base as usize);
        let block = t.block();
        pending_copy_check(t, offset, len, true, site)?;
        let barriers = block.mbarriers.borrow();
        let problem = if barriers.state(barrier).is_none() {
            Some((barrier, MbarrierProblem::NotLive))
        } else {
            barriers
                .overlapping(offset, len)
                .map(|b| (b, MbarrierProblem::PlainAccess))
        };
        drop(barriers);
        if let Some((offset, problem)) = problem {
            return Err(Fault::Mbarrier {
                offset,
                problem,
                at: site.into(),
            });
        }
        let mut clock = Vec::new();
        // SAFETY: the detector lives as long as the block (see the scheduler).
        if let Some(race) = unsafe { t.race.as_ref() } {
            race.access(t.linear_id, offset, len, true, site)
                .map_err(|r| shared_race(t, r, site))?;
            race.async_proxy_wrote(offset, len);
            race.release(t.linear_id, &mut clock);
        }
        block.bulk.borrow_mut().push(BulkCopy {
            thread: t.linear_id,
            dst,
            data: data.take().unwrap_or_default(),
            barrier,
            clock,
            site,
        });
        block.progressed();
        Ok(())
    });
    match (queued, data) {
        (Some(Err(fault)), _) => raise(fault),
        // SAFETY: the caller's contract: `dst` is valid for `len` writes.
        (Some(Ok(())), _) => unsafe { core::ptr::write_bytes(dst, 0xFF, len) },
        // SAFETY: as above; `data` is `len` bytes.
        (None, Some(data)) => unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), dst, len) },
        (None, None) => {}
    }
}

/// Lands the block's bulk copies that count on the barrier at `offset`, in
/// issue order: writes their bytes, then counts them on the barrier
/// (`complete_tx`, releasing each issuer's clock at issue).
fn land_bulk_copies(t: &fiber::ThreadState, offset: usize) -> Result<(), MbarrierProblem> {
    let block = t.block();
    let landing: Vec<BulkCopy> = {
        let mut bulk = block.bulk.borrow_mut();
        if !bulk.iter().any(|c| c.barrier == offset) {
            return Ok(());
        }
        let (landing, rest) = core::mem::take(&mut *bulk)
            .into_iter()
            .partition(|c| c.barrier == offset);
        *bulk = rest;
        landing
    };
    block.progressed();
    let mut barriers = block.mbarriers.borrow_mut();
    for copy in landing {
        // SAFETY: `dst` is `data.len()` bytes of the block's shared memory
        // (checked at issue: the caller's tile), which outlives its fibers.
        unsafe { core::ptr::copy_nonoverlapping(copy.data.as_ptr(), copy.dst, copy.data.len()) };
        let bytes = copy.data.len() as i64;
        barriers.tx(offset, -bytes, |into| join(into, &copy.clock))?;
    }
    Ok(())
}

/// `mbarrier.inval`.
///
/// # Safety
/// As the GPU's (the emulator checks what it can).
#[track_caller]
pub(crate) unsafe fn mbarrier_inval(addr: SharedAddr) {
    mbarrier_op(addr, |t, offset, _| {
        let copies = t
            .block()
            .bulk
            .borrow()
            .iter()
            .filter(|c| c.barrier == offset)
            .count();
        if copies > 0 {
            return Err(MbarrierProblem::CopiesInFlight { copies });
        }
        t.block().progressed();
        t.block().mbarriers.borrow_mut().inval(offset)
    });
}

/// A shared pointer's offset from the block's shared memory (the
/// emulator's shared window starts at the block's first byte).
pub(crate) fn shared_window_offset(ptr: *const u8) -> u32 {
    fiber::with_current(|t| (ptr as usize).wrapping_sub(t.shared_base as usize) as u32)
}

/// `wgmma.fence`: the emulator's registers are the Rust values themselves,
/// which the borrow of an `InFlight` already keeps untouched.
pub(crate) fn wgmma_fence() {}

/// `wgmma.commit_group`: a new group for this thread's next `mma`s.
pub(crate) fn wgmma_commit() {
    fiber::try_with_current(|t| t.wgmma_groups.set(t.wgmma_groups.get().wrapping_add(1)));
}

/// `wgmma.wait_group PENDING`: a warp collective whose completion retires
/// this warp's older groups (`emu::wgmma::wait`).
#[track_caller]
pub(crate) fn wgmma_wait<const PENDING: u32>() {
    // An `InFlight` dropped while its fiber unwinds (a fault elsewhere, or
    // the block abandoned) waits for nothing: it cannot meet its warp.
    if std::thread::panicking() {
        return;
    }
    warp_op(WarpOp::WgmmaWait(PENDING as u8), u32::MAX, 0, 0);
}

/// `wgmma.mma_async` of `2R` columns: a warp collective that computes the
/// warp's 16 rows into `d` at once (`emu::wgmma::issue`); the operands'
/// bytes are checked again when a wait retires it.
#[track_caller]
pub(crate) fn wgmma_mma_async<const R: usize>(
    d: &mut [f32; R],
    a: u64,
    b: u64,
    input: crate::wgmma::Input,
    tnsp_a: bool,
    tnsp_b: bool,
) {
    wgmma_issue(d, Ok(a), b, input, tnsp_a, tnsp_b);
}

/// [`wgmma_mma_async`] with A from registers: this lane's fragment of its
/// warp's 16 rows (the `mma.m16n8k16` A layout).
#[track_caller]
pub(crate) fn wgmma_mma_async_ra<const R: usize>(
    d: &mut [f32; R],
    a: [u32; 4],
    b: u64,
    input: crate::wgmma::Input,
    tnsp_b: bool,
) {
    wgmma_issue(d, Err(a), b, input, false, tnsp_b);
}

/// Both forms of `wgmma.mma_async`: A's descriptor (`Ok`) or this lane's
/// fragment (`Err`), handed to the warp collective that completes it.
#[track_caller]
fn wgmma_issue<const R: usize>(
    d: &mut [f32; R],
    a: Result<u64, [u32; 4]>,
    b: u64,
    input: crate::wgmma::Input,
    tnsp_a: bool,
    tnsp_b: bool,
) {
    let issue = crate::emu::wgmma::Issue {
        a,
        b,
        n: 2 * R as u32,
        input,
        tnsp_a,
        tnsp_b,
        acc: d.as_mut_ptr(),
    };
    warp_op(WarpOp::Wgmma, u32::MAX, &raw const issue as u64, 0);
}

/// `setmaxnreg`: a warp collective whose completion checks the warpgroup's
/// agreement (the emulator has no register file to resize).
#[track_caller]
pub(crate) fn setmaxnreg<const INCREASE: bool, const REGS: u32>() {
    let op = WarpOp::SetMaxNreg {
        increase: INCREASE,
        regs: REGS as u16,
    };
    warp_op(op, u32::MAX, 0, 0);
}

/// Commits, then waits for every group.
#[track_caller]
pub(crate) fn wgmma_commit_wait_all<const R: usize>(_d: &mut [f32; R]) {
    wgmma_commit();
    wgmma_wait::<0>();
}

/// The checks of an access to `bytes` shared bytes at `offset` by thread
/// `t`, by an instruction or by an asynchronous unit on its behalf (a
/// `wgmma` operand): a copy not landed there, a live mbarrier there, a race.
pub(crate) fn shared_checks(
    t: &fiber::ThreadState,
    offset: usize,
    bytes: usize,
    write: bool,
    site: Site,
) -> Result<(), Fault> {
    pending_copy_check(t, offset, bytes, write, site)?;
    if let Some(barrier) = t.block().mbarriers.borrow().overlapping(offset, bytes) {
        return Err(Fault::Mbarrier {
            offset: barrier,
            problem: MbarrierProblem::PlainAccess,
            at: site.into(),
        });
    }
    if write {
        t.block().progressed();
    }
    // SAFETY: the detector lives as long as the block (see the scheduler).
    let Some(detector) = (unsafe { t.race.as_ref() }) else {
        return Ok(());
    };
    detector
        .access(t.linear_id, offset, bytes, write, site)
        .map_err(|race| shared_race(t, race, site))
}
