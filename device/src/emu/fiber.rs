//! One emulated CUDA thread: its indices, and the way it suspends to the scheduler.

use super::profile::BlockProfile;
use super::race::RaceDetector;
use crate::arch::{MatchMode, ReduxOp, ShuffleMode, VoteMode};
use crate::mma::MmaKind;
use crate::thread::Dim3;
use core::cell::{Cell, RefCell};
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
    /// Not a meeting point: the fiber lets the block's other threads run
    /// (seeded interleaving, at a global access or an atomic) and is runnable
    /// again in the scheduler's next round. Resumed with 0.
    Yield { spin: Spin },
}

/// Whether a [`Request::Yield`] comes from a thread that looks stuck in a spin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spin {
    /// Not (yet) a stuck spin.
    No,
    /// Polled one shared-memory atomic [`SPIN_BOUND`] times in a row, seeing
    /// the same value, with no change to memory by any thread of the block.
    Shared,
    /// The same, on global memory (another block may still change it).
    Global,
}

/// Identical polls of one atomic, with no memory change in the block, after
/// which a thread counts as stuck in a spin (see the module doc, "Spins").
pub(crate) const SPIN_BOUND: u32 = 1 << 16;
/// Which warp instruction a [`Request::Warp`] is; lanes of one mask must agree on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WarpOp {
    Shuffle(ShuffleMode),
    Vote(VoteMode),
    Match(MatchMode),
    Redux(ReduxOp),
    /// `elect.sync`: every lane is resumed with the elected lane.
    Elect,
    /// `bar.warp.sync`: orders the lanes' accesses (release, then acquire).
    Sync,
    /// `ldmatrix`: `value` is the lane's row address; results in `collective_out`.
    Ldmatrix {
        matrices: u8,
        trans: bool,
    },
    /// `mma.sync`: operands in `collective_in`, results in `collective_out`.
    Mma(MmaKind),
    /// f64 `mma.sync` of a shape (`crate::mma::dmma::Kind`): operands in
    /// `f64_in` (A's, B's, C's elements), results in `f64_out`.
    MmaF64(crate::mma::dmma::Kind),
    /// `wgmma.mma_async`: `value` points at the lane's `emu::wgmma::Issue`.
    Wgmma,
    /// `wgmma.wait_group N`.
    WgmmaWait(u8),
    /// `setmaxnreg.{inc,dec}` to `regs` registers a thread.
    SetMaxNreg {
        increase: bool,
        regs: u16,
    },
}

impl Request {
    /// Whether the fiber waits in a warp collective (not a block barrier).
    pub(crate) fn is_warp(&self) -> bool {
        matches!(self, Request::Warp { .. } | Request::ActiveMask { .. })
    }
}

pub(crate) type FiberYielder = Yielder<u32, Request>;

/// A call site in a kernel: where a thread made a device call (the device
/// API is `#[track_caller]` on the host, so this is the kernel's own line).
pub(crate) type Site = &'static core::panic::Location<'static>;

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
    /// The block's memory-traffic profiler (null when the launch is not profiled).
    pub profile: *const BlockProfile,
    /// Operands of a fragment collective (`mma`: A's 4, B's 2, C's 4 registers).
    pub collective_in: Cell<[u32; 10]>,
    /// Results of a fragment collective (`ldmatrix`, `mma`), set before resuming.
    pub collective_out: Cell<[u32; 4]>,
    /// Operands of an f64 `mma.sync` (`m16n8k16`: A's 8, B's 4, C's 4 elements).
    pub f64_in: Cell<[f64; 16]>,
    /// Its results (`m16n8k16`: D's 4 elements), set before resuming.
    pub f64_out: Cell<[f64; 4]>,
    /// Set by the fiber when it first runs; null until then.
    pub yielder: Cell<*const FiberYielder>,
    /// What the block's threads share (interleaving, progress, `cp.async`).
    pub block: *const BlockState,
    /// `cp.async` groups this thread has committed.
    pub cp_groups: Cell<u32>,
    /// `wgmma` groups this thread has committed.
    pub wgmma_groups: Cell<u32>,
    /// Bulk async-groups (TMA stores) this thread has committed.
    pub bulk_groups: Cell<u32>,
    /// The shared bytes this thread's share of its warp's `wgmma`s in
    /// flight read (checked again when a wait retires them).
    pub wgmma_reads: RefCell<Vec<super::wgmma::OperandRead>>,
    /// This thread's last atomic that changed nothing, for the spin rule.
    pub poll: Cell<Poll>,
    /// Where this thread last called the device API: the barrier or
    /// collective it waits at, the atomic it polls, or, once it has exited,
    /// its last call.
    pub site: Cell<Option<Site>>,
}

impl ThreadState {
    /// Logs this thread's access for the memory-traffic profile, if the
    /// launch is profiled (one pointer test when it is not).
    #[inline]
    pub(crate) fn log_access(&self, site: Site, op: super::profile::Op, addr: usize, bytes: usize) {
        // SAFETY: the scheduler keeps the block's profiler alive, and unmoved,
        // for as long as any of the block's fibers exists.
        if let Some(p) = unsafe { self.profile.as_ref() } {
            p.record(self.linear_id, site, op, addr, bytes);
        }
    }

    /// Counts this thread's block as taking the code path `name`, once: from
    /// its thread 0.
    pub(crate) fn record_path(&self, name: &'static str) {
        // SAFETY: as in `log_access`.
        if self.linear_id == 0
            && let Some(p) = unsafe { self.profile.as_ref() }
        {
            p.record_path(name);
        }
    }

    /// The block's shared state.
    pub(crate) fn block(&self) -> &BlockState {
        // SAFETY: the scheduler keeps the BlockState alive, and unmoved, for
        // as long as any of the block's fibers exists.
        unsafe { &*self.block }
    }
}

/// A thread's run of identical polls: an atomic at `addr` that changed
/// nothing and saw `value`, while the block's progress counter was `progress`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Poll {
    pub addr: usize,
    pub value: u64,
    pub progress: u64,
    /// Identical polls after the first.
    pub repeats: u32,
}

/// A `cp.async` copy issued but not yet waited for: it lands at `dst` when
/// `thread` waits for its group.
pub(crate) struct PendingCopy {
    pub thread: u32,
    pub dst: *mut u8,
    pub data: [u8; 16],
    /// The issuing thread's committed-group count at issue.
    pub group: u32,
    /// The `cp_async_16` call that issued it.
    pub site: Site,
}

/// A bulk copy (`cp.async.bulk`) issued but not landed: its bytes, read at
/// issue, land at `dst` when a wait on the barrier at `barrier` finds the
/// phase incomplete, and then count there (`complete_tx`).
pub(crate) struct BulkCopy {
    pub thread: u32,
    pub dst: *mut u8,
    pub data: Vec<u8>,
    /// Byte offset of the barrier in the block's shared memory.
    pub barrier: usize,
    /// The issuing thread's clock at issue (empty when the race detector is
    /// off): what the landing releases.
    pub clock: Vec<u32>,
    /// The `copy_to_shared` call that issued it.
    pub site: Site,
}

/// A TMA store (shared → global) whose source the copy engine may still
/// read: issued by `thread`, its global writes already made (at issue),
/// until the thread's `wait_read` covers its group.
pub(crate) struct PendingStore {
    pub thread: u32,
    /// Byte offset and length of its source in the block's shared memory.
    pub src: (usize, usize),
    /// The bulk async-group it was committed in (`None`: not committed).
    pub group: Option<u32>,
    /// The box: the tensor's base, its corner and extents (column, row, batch).
    pub base: usize,
    pub corner: [i64; 3],
    pub extent: [i64; 3],
    /// The `store` call that issued it.
    pub site: Site,
}

/// What the threads of one block share, on the OS thread that runs them.
pub(crate) struct BlockState {
    /// The interleaving PRNG (splitmix64), seeded per block.
    rng: Cell<u64>,
    /// Bumped by every change to memory that a thread of the block makes
    /// (plain stores, atomics that change their element, `cp.async`).
    pub progress: Cell<u64>,
    /// The block's `cp.async` copies in flight.
    pub copies: RefCell<Vec<PendingCopy>>,
    /// The block's bulk copies in flight.
    pub bulk: RefCell<Vec<BulkCopy>>,
    /// The block's TMA stores whose sources may still be read.
    pub stores: RefCell<Vec<PendingStore>>,
    /// The block's live mbarriers.
    pub mbarriers: RefCell<super::mbarrier::Barriers>,
    /// Per warpgroup, the `wgmma`s its warps issued (to check they agree).
    pub warpgroups: RefCell<Vec<super::wgmma::WarpgroupLog>>,
    /// Each warp's register limit and the pool `setmaxnreg` moves them through.
    pub registers: RefCell<super::wgmma::RegisterPool>,
}

impl BlockState {
    /// The state of block `linear_block`, its PRNG seeded from [`seed`] and
    /// the block, so that a block's interleaving does not depend on which OS
    /// thread runs it or when.
    pub(crate) fn new(linear_block: u64) -> Self {
        let state = BlockState {
            rng: Cell::new(seed() ^ linear_block.wrapping_mul(0xD1B5_4A32_D192_ED03)),
            progress: Cell::new(0),
            copies: RefCell::new(Vec::new()),
            bulk: RefCell::new(Vec::new()),
            stores: RefCell::new(Vec::new()),
            mbarriers: RefCell::new(Default::default()),
            warpgroups: RefCell::new(Vec::new()),
            registers: RefCell::new(Default::default()),
        };
        state.next();
        state
    }

    /// splitmix64.
    fn next(&self) -> u64 {
        let s = self.rng.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        self.rng.set(s);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// One lane of `mask` (not empty), picked by the PRNG.
    pub(crate) fn pick_lane(&self, mask: u32) -> u32 {
        let k = (self.next() % u64::from(mask.count_ones().max(1))) as usize;
        (0..32).filter(|l| mask & (1 << l) != 0).nth(k).unwrap_or(0)
    }

    /// Whether to switch fibers at this access: 1 time in 8.
    pub(crate) fn interleave(&self) -> bool {
        self.next() & 7 == 0
    }

    /// Notes a change to memory.
    pub(crate) fn progressed(&self) {
        self.progress.set(self.progress.get().wrapping_add(1));
    }
}

/// The interleaving seed: `WARPFORGE_EMU_SEED` (decimal, or hex with `0x`),
/// read once per process; a fixed value when unset or unparsable.
pub(crate) fn seed() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(|| {
        std::env::var("WARPFORGE_EMU_SEED")
            .ok()
            .and_then(|v| {
                let v = v.trim();
                match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
                    Some(hex) => u64::from_str_radix(hex, 16).ok(),
                    None => v.parse().ok(),
                }
            })
            .unwrap_or(DEFAULT_SEED)
    })
}

/// The seed when `WARPFORGE_EMU_SEED` is not set.
pub(crate) const DEFAULT_SEED: u64 = 0x5EED;

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

/// Whether this OS thread is running an emulated kernel's fiber right now.
pub(crate) fn in_kernel() -> bool {
    CURRENT.with(|c| !c.get().is_null())
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

/// As [`suspend`], for a meeting point at `site` in the kernel (a barrier
/// or a warp collective), which the thread's `site` then names.
pub(crate) fn suspend_at(site: Site, request: Request) -> u32 {
    let yielder = with_current(|t| {
        t.site.set(Some(site));
        t.yielder.get()
    });
    debug_assert!(!yielder.is_null());
    // SAFETY: the yielder belongs to the running coroutine (stored when it started)
    // and lives on that coroutine's stack for as long as the coroutine exists.
    unsafe { &*yielder }.suspend(request)
}
