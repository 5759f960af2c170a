//! One emulated CUDA thread: its indices, and the way it suspends to the scheduler.

use super::race::RaceDetector;
use crate::arch::{MatchMode, ReduxOp, ShuffleMode, VoteMode};
use crate::mma::MmaKind;
use crate::thread::Dim3;
use core::cell::Cell;
use corosensei::Yielder;

/// Why a fiber suspended: the point where it waits for other threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// `bar.sync 0` / `bar.red.popc`: every thread of the block; resumed with
    /// the number of threads whose predicate was true.
    SyncThreads { predicate: bool },
    /// A `*.sync` warp instruction: the lanes of `mask` each bring `value`
    /// (and `arg`); each is resumed with its 32-bit result.
    Warp {
        op: WarpOp,
        mask: u32,
        value: u64,
        arg: u32,
    },
    /// `activemask`: resumed with the set of lanes of the warp that reached it
    /// together: in the emulator, the lanes waiting at the same call site.
    ActiveMask {
        site: &'static core::panic::Location<'static>,
    },
}

/// Which warp instruction a [`Request::Warp`] is; lanes of one mask must agree on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WarpOp {
    Shuffle(ShuffleMode),
    Vote(VoteMode),
    Match(MatchMode),
    Redux(ReduxOp),
    /// `ldmatrix`: `value` is the lane's row address; results in `collective_out`.
    Ldmatrix {
        matrices: u8,
        trans: bool,
    },
    /// `mma.sync`: operands in `collective_in`, results in `collective_out`.
    Mma(MmaKind),
}

impl Request {
    /// Whether the fiber waits in a warp collective (not a block barrier).
    pub(crate) fn is_warp(&self) -> bool {
        !matches!(self, Request::SyncThreads { .. })
    }
}

pub(crate) type FiberYielder = Yielder<u32, Request>;

/// What a primitive may ask about the calling thread.
pub(crate) struct ThreadState {
    pub thread_idx: Dim3,
    pub block_idx: Dim3,
    pub block_dim: Dim3,
    pub grid_dim: Dim3,
    /// `x + y·dim.x + z·dim.x·dim.y`: the thread's rank in the block (lane = rank % 32).
    pub linear_id: u32,
    pub shared_base: *mut u8,
    pub shared_len: usize,
    /// The block's race detector, shared and global memory (null when switched off).
    pub race: *const RaceDetector,
    /// Operands of a fragment collective (`mma`: A's 4, B's 2, C's 4 registers).
    pub collective_in: Cell<[u32; 10]>,
    /// Results of a fragment collective (`ldmatrix`, `mma`), set before resuming.
    pub collective_out: Cell<[u32; 4]>,
    /// Set by the fiber when it first runs; null until then.
    pub yielder: Cell<*const FiberYielder>,
}

thread_local! {
    /// The fiber that this OS thread is running right now (null outside a launch).
    static CURRENT: Cell<*const ThreadState> = const { Cell::new(core::ptr::null()) };
}

/// Makes `state` the current fiber for primitives called on this OS thread.
pub(crate) fn set_current(state: *const ThreadState) {
    CURRENT.with(|c| c.set(state));
}

pub(crate) fn with_current<R>(f: impl FnOnce(&ThreadState) -> R) -> R {
    let ptr = CURRENT.with(Cell::get);
    assert!(
        !ptr.is_null(),
        "a warpforge device primitive was called outside a kernel launch; launch the kernel \
         (on the GPU or the emulator) instead of calling it directly"
    );
    // SAFETY: the scheduler sets CURRENT to a ThreadState that it owns and keeps
    // alive (boxed, not moved) for as long as the fiber runs, and clears it after.
    f(unsafe { &*ptr })
}

/// As [`with_current`], or `None` outside a launch (for primitives that host
/// code may also call, like `Slot::set` on a host slice).
pub(crate) fn try_with_current<R>(f: impl FnOnce(&ThreadState) -> R) -> Option<R> {
    let ptr = CURRENT.with(Cell::get);
    // SAFETY: as in `with_current`: non-null only while the scheduler keeps
    // the ThreadState alive.
    unsafe { ptr.as_ref() }.map(f)
}

/// Suspends the calling fiber with `request`; returns what the scheduler resumes it with.
pub(crate) fn suspend(request: Request) -> u32 {
    let yielder = with_current(|t| t.yielder.get());
    debug_assert!(!yielder.is_null());
    // SAFETY: the yielder belongs to the running coroutine (stored when it started)
    // and lives on that coroutine's stack for as long as the coroutine exists.
    unsafe { &*yielder }.suspend(request)
}
