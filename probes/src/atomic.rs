//! Atomic probes: every thread `i` applies one atomic to `acc[bins[i]]` and
//! records the value it returned in `old[i]`, so a test can check both the
//! final values and that the returned values chain (each update saw the
//! previous one). `scope` picks the type-level scope (0 block, 1 device,
//! 2 system), so every `atom.relaxed.SCOPE` form is in the PTX.

use warpforge_device::atomic::{
    AtomicAdd, AtomicBits, AtomicMinMax, AtomicRef, AtomicScope, AtomicValue, Block, Device, System,
};
use warpforge_device::{Out, f16, shared, sync, thread};
use warpforge_macros::kernel;

/// The operation codes of the probes.
pub mod op {
    /// `fetch_add`
    pub const ADD: u32 = 0;
    /// `fetch_min`
    pub const MIN: u32 = 1;
    /// `fetch_max`
    pub const MAX: u32 = 2;
    /// `fetch_and`
    pub const AND: u32 = 3;
    /// `fetch_or`
    pub const OR: u32 = 4;
    /// `fetch_xor`
    pub const XOR: u32 = 5;
    /// `swap`
    pub const EXCH: u32 = 6;
}

/// Runs `f` on thread i's element with the scope `scope` names, and stores what it returned.
fn with_atomic<T: Copy>(
    bins: &[u32],
    scope: u32,
    acc: &Out<T>,
    old: &mut Out<T>,
    f: impl Fn(AtomicRefAnyScope<'_, T>) -> Option<T>,
) {
    let i = thread::global_index_x();
    let Some(&bin) = bins.get(i) else { return };
    let r = match scope {
        0 => acc
            .atomic::<Block>(bin as usize)
            .map(AtomicRefAnyScope::Block),
        1 => acc
            .atomic::<Device>(bin as usize)
            .map(AtomicRefAnyScope::Device),
        _ => acc
            .atomic::<System>(bin as usize)
            .map(AtomicRefAnyScope::System),
    };
    if let (Some(r), Some(mut o)) = (r, old.at(i))
        && let Some(v) = f(r)
    {
        o.set(v);
    }
}

/// An atomic reference with its scope chosen at run time, for the probes.
enum AtomicRefAnyScope<'a, T> {
    Block(AtomicRef<'a, T, Block>),
    Device(AtomicRef<'a, T, Device>),
    System(AtomicRef<'a, T, System>),
}

/// Calls the same generic function on whichever scope the reference has.
macro_rules! each_scope {
    ($r:expr, $f:ident, $($arg:expr),*) => {
        match $r {
            AtomicRefAnyScope::Block(a) => $f(&a, $($arg),*),
            AtomicRefAnyScope::Device(a) => $f(&a, $($arg),*),
            AtomicRefAnyScope::System(a) => $f(&a, $($arg),*),
        }
    };
}

fn int_op<T: AtomicAdd + AtomicMinMax + AtomicBits, S: AtomicScope>(
    a: &AtomicRef<'_, T, S>,
    op: u32,
    v: T,
) -> Option<T> {
    Some(match op {
        op::ADD => a.fetch_add(v),
        op::MIN => a.fetch_min(v),
        op::MAX => a.fetch_max(v),
        op::AND => a.fetch_and(v),
        op::OR => a.fetch_or(v),
        op::XOR => a.fetch_xor(v),
        op::EXCH => a.swap(v),
        _ => return None,
    })
}

fn float_op<T: AtomicAdd + AtomicMinMax, S: AtomicScope>(
    a: &AtomicRef<'_, T, S>,
    op: u32,
    v: T,
) -> Option<T> {
    Some(match op {
        op::ADD => a.fetch_add(v),
        op::MIN => a.fetch_min(v),
        op::MAX => a.fetch_max(v),
        op::EXCH => a.swap(v),
        _ => return None,
    })
}

fn add_only<T: AtomicAdd, S: AtomicScope>(a: &AtomicRef<'_, T, S>, v: T) -> Option<T> {
    Some(a.fetch_add(v))
}

macro_rules! int_probe {
    ($($name:ident: $t:ty),*) => { $(
        /// Thread `i`: `old[i] = acc[bins[i]].OP(vals[i])` for an integer `op` code.
        #[kernel]
        pub fn $name(bins: &[u32], vals: &[$t], op: u32, scope: u32, acc: Out<$t>, mut old: Out<$t>) {
            let v = vals.get(thread::global_index_x()).copied().unwrap_or(0);
            with_atomic(bins, scope, &acc, &mut old, |r| each_scope!(r, int_op, op, v));
        }
    )* };
}
int_probe!(probe_atomic_u32: u32, probe_atomic_i32: i32, probe_atomic_u64: u64, probe_atomic_i64: i64);

macro_rules! float_probe {
    ($($name:ident: $t:ty),*) => { $(
        /// Thread `i`: `old[i] = acc[bins[i]].OP(vals[i])` for `op` add, min, max or exch.
        #[kernel]
        pub fn $name(bins: &[u32], vals: &[$t], op: u32, scope: u32, acc: Out<$t>, mut old: Out<$t>) {
            let v = vals.get(thread::global_index_x()).copied().unwrap_or(0.0);
            with_atomic(bins, scope, &acc, &mut old, |r| each_scope!(r, float_op, op, v));
        }
    )* };
}
float_probe!(probe_atomic_f32: f32, probe_atomic_f64: f64);

/// Thread `i`: `old[i] = acc[bins[i]].fetch_add(vals[i])` in f16.
#[kernel]
pub fn probe_atomic_f16(bins: &[u32], vals: &[f16], scope: u32, acc: Out<f16>, mut old: Out<f16>) {
    let v = vals
        .get(thread::global_index_x())
        .copied()
        .unwrap_or(f16::ZERO);
    with_atomic(bins, scope, &acc, &mut old, |r| each_scope!(r, add_only, v));
}

/// Takes a ticket from a counter with a compare-and-swap loop.
fn take_ticket<T: AtomicValue + PartialEq, S: AtomicScope>(
    a: &AtomicRef<'_, T, S>,
    next: impl Fn(T) -> T,
) -> Option<T> {
    let mut seen = a.load();
    loop {
        match a.compare_exchange(seen, next(seen)) {
            Ok(mine) => return Some(mine),
            Err(actual) => seen = actual,
        }
    }
}

/// Every thread `i` takes a ticket from counter `acc[bins[i]]` by
/// `compare_exchange(t, t + 1)` until it succeeds; `old[i]` = its ticket.
#[kernel]
pub fn probe_atomic_cas_u32(bins: &[u32], scope: u32, acc: Out<u32>, mut old: Out<u32>) {
    with_atomic(bins, scope, &acc, &mut old, |r| {
        each_scope!(r, take_ticket, |t: u32| t.wrapping_add(1))
    });
}

/// As [`probe_atomic_cas_u32`] on 64-bit counters, stepping by 2³².
#[kernel]
pub fn probe_atomic_cas_u64(bins: &[u32], scope: u32, acc: Out<u64>, mut old: Out<u64>) {
    with_atomic(bins, scope, &acc, &mut old, |r| {
        each_scope!(r, take_ticket, |t: u64| t.wrapping_add(1 << 32))
    });
}

/// Bins in the shared-memory histogram probe.
pub const HISTOGRAM_BINS: usize = 64;

/// A block-level histogram in shared memory (`Block`-scoped adds), flushed to
/// the global histogram `out` with `Device`-scoped adds: `out[b]` += the number
/// of `bins[i] % 64 == b`.
#[kernel(shared = [u32; 64])]
pub fn probe_shared_histogram(bins: &[u32], out: Out<u32>) {
    let hist = shared::dynamic::<u32>();
    let t = thread::linear_thread_id() as usize;
    let threads = thread::block_dim().volume() as usize;
    let mut b = t;
    while b < HISTOGRAM_BINS {
        hist.store(b, 0);
        b += threads;
    }
    sync::sync_threads();
    if let Some(&bin) = bins.get(thread::global_index_x()) {
        hist.atomic::<Block>(bin as usize % HISTOGRAM_BINS)
            .fetch_add(1);
    }
    sync::sync_threads();
    let mut b = t;
    while b < HISTOGRAM_BINS {
        if let Some(a) = out.atomic::<Device>(b) {
            a.fetch_add(hist.load(b));
        }
        b += threads;
    }
}
