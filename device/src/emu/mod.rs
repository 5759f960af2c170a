//! The CPU emulator: runs a kernel's own Rust source with CUDA semantics.
//!
//! # How it runs a launch
//!
//! A grid of blocks is spread over a pool of OS threads (one per core); blocks
//! are independent in CUDA, so they run in parallel here too. Inside a block,
//! each CUDA thread is a *fiber*, a stackful coroutine from `corosensei`, and
//! one OS thread runs all of a block's fibers cooperatively. A fiber runs until
//! it reaches a point where CUDA threads meet: a block barrier
//! ([`crate::sync::sync_threads`]) or a warp collective
//! ([`crate::warp`]), or an interleaving point (see "Interleaving"). There
//! it suspends and hands the scheduler a request.
//! When every fiber has stopped, the scheduler completes what can be completed
//! (a warp exchange once every lane of its mask has asked, a barrier once every
//! thread of the block has arrived) and resumes those fibers with their results.
//!
//! Fibers rather than OS threads because CUDA blocks meet at barriers often:
//! a fiber switch costs tens of nanoseconds, an OS-thread handoff microseconds,
//! and cooperative scheduling makes every run of a block deterministic (for a
//! given seed, see "Interleaving").
//!
//! # Interleaving
//!
//! A fiber also yields, to run again in the scheduler's next round (never as
//! a barrier arrival), at two kinds of points: before a plain access to an
//! output element (`Slot::get` / `Slot::set`), and after an atomic
//! (`AtomicRef`, shared or global), each 1 time in 8, chosen by a splitmix64
//! PRNG seeded per block from the block's index and the process's seed:
//! `WARPFORGE_EMU_SEED` (decimal or `0x` hex, read once per process; unset or
//! unparsable: a fixed default). So a plain read-modify-write of an element
//! that several threads share loses updates here as on a GPU (when the race
//! detector, which reports it first, is off), and a run with a given seed
//! replays the same interleaving within each block (blocks run in parallel,
//! so their relative order is the OS's). To reproduce a failure, rerun with
//! the same `WARPFORGE_EMU_SEED`; to look for one, try several. Shared-memory
//! loads and stores are not interleaving points (the race detector orders
//! them by barriers instead).
//!
//! # Spins
//!
//! An atomic that changes nothing and sees the same value at the same
//! element as this thread's previous atomic, with no change to memory by the
//! block in between, is a *poll*: the thread yields at once (then every 64
//! polls), so that a thread that would release it runs. A thread that polls
//! the same element 65 536 times (`SPIN_BOUND`) in a row is *stuck*.
//! A round of the scheduler in which every thread that ran is stuck, the
//! others wait at a barrier or a warp collective that cannot complete, or
//! have exited, and the block changed no memory, is a
//! [`Fault::SpinDeadlock`] when the polled memory is shared (certain: only
//! the block can change it). When a spinner polls global memory another
//! block could change it, so it is reported only once every OS thread of the
//! launch is either stuck the same way or done, for two rounds in a row: a
//! block may wait for another block only while both run, and the emulator
//! runs as many blocks at once as there are cores (a GPU promises no more
//! than one). A spin on a plain load (not an atomic) is not caught; it is a
//! data race anyway.
//!
//! # `cp.async`
//!
//! [`crate::mma::cp_async_16`] reads its 16 source bytes at issue, fills the
//! destination with `0xFF` bytes and writes the data only when the issuing
//! thread waits for the copy's group (`cp_async_wait_all`, or
//! `cp_async_wait_group(n)` for all but the newest `n` committed groups), or
//! exits. A barrier does not complete a copy (nor does it on a GPU). Any
//! access to a destination still in flight, by any thread of the block, is
//! [`Fault::CpAsyncPending`], naming the issuer.
//!
//! # Memory ordering
//!
//! Within a block, fibers run one at a time on one OS thread: every access
//! is immediately visible to the block's other threads, in program order.
//! Atomics are the host's, sequentially consistent, and fences are SeqCst
//! fences; blocks on different OS threads see each other's plain accesses
//! in whatever order the host gives. A GPU is weaker: its plain accesses may
//! be reordered or cached, relaxed atomics order nothing else, and a
//! narrow-scope atomic or fence is not seen by other blocks. So a kernel that
//! publishes data with atomics but no fence, or relies on a block-scope
//! atomic across blocks, can pass here and fail on a GPU; the race detector
//! catches the plain-access cases it can (see `race`), not these.
//!
//! # What it reports
//!
//! A launch returns [`EmuError`] naming the kernel, block and thread when:
//! - a thread panics: a bounds check on an input slice, a shared-memory view or
//!   an index guard, an `assert!`, an overflow (`Fault::Panic`);
//! - a barrier is not reached by every thread of the block, because some
//!   threads exited first (`Fault::DivergentBarrier`) — CUDA would hang or
//!   silently misbehave;
//! - a warp collective names lanes in its mask that never join it
//!   (`Fault::WarpMask`), or the lanes of a mask disagree on the operation;
//! - the block cannot make progress for any other reason (`Fault::Deadlock`);
//! - two threads of a block touch the same shared-memory byte, at least one
//!   writing, with no barrier between (`Fault::SharedRace`);
//! - two threads of the grid touch the same element of an output buffer
//!   (`Out`) with nothing ordering them, at least one writing plainly, or one
//!   plainly and one atomically (`Fault::GlobalRace`, naming the buffer's
//!   parameter, the element, and both threads with their blocks). In a block
//!   a barrier orders; across blocks only a fence-then-atomic release in one
//!   and an atomic-then-fence acquire in the other, after it. Atomics among
//!   themselves never race. Inputs (`&[T]`) are never written in a launch;
//! - a thread reads shared memory that no thread of the block wrote
//!   (`Fault::UninitSharedRead`, reported at the end of that barrier
//!   interval, so that a read before another thread's write is the race it is);
//! - threads spin on an atomic that nothing will change
//!   (`Fault::SpinDeadlock`, see "Spins");
//! - a thread touches the destination of a `cp.async` not yet waited for
//!   (`Fault::CpAsyncPending`, see "`cp.async`"), or of a bulk copy before
//!   a wait on its barrier (`Fault::BulkCopyPending`, see [`crate::bulk`];
//!   a TMA tensor copy, [`crate::tma`], is one: its box is gathered at issue,
//!   zeros outside the tensor, and lands as a bulk copy does);
//! - an mbarrier ([`crate::mbarrier`]) is used against its protocol — more
//!   arrivals than a phase expects, a tx-count out of range, a wait for a
//!   phase that is neither the current one nor the one before it, a plain
//!   access to a live barrier's bytes (`Fault::Mbarrier`) — or waited on
//!   with nothing left to complete it (`Fault::SpinDeadlock`: a wait polls
//!   the barrier as a spin polls an atomic, and counts as stuck once a poll
//!   finds nothing in the block changed since its last).
//! - a `wgmma` ([`crate::wgmma`]) is issued against the warpgroup's rules,
//!   with a descriptor that addresses nothing sensible, changes an operand
//!   before its `wait_group`, or reads through the async proxy a byte whose
//!   last write was a plain store its writer did not follow with
//!   `fence.proxy.async` (`Fault::Wgmma`, `WgmmaProblem::UnfencedOperand`:
//!   the detector counts each thread's proxy fences; bytes a bulk or TMA
//!   copy wrote are the async proxy's own and need none); a
//!   `setmaxnreg.inc` waits for registers that no warp will release
//!   (`WgmmaProblem::RegisterPoolShort`: the block's pool holds only what
//!   `setmaxnreg.dec` released, from at most `65536 / threads` registers a
//!   thread at launch).
//! - a TMA store ([`crate::tma::StoreMatrix`]) reads a staging byte whose
//!   plain store its writer did not fence (`fence.proxy.async`), its staging
//!   tile is written before the issuer's `wait_read` covers it, two of a
//!   thread's stores in flight overlap, or a thread exits with stores not
//!   waited for (`Fault::TmaStore`). The store's global writes are the
//!   issuing thread's for the race detector, made at issue.
//!
//! The shared-race, global-race and uninitialised-read checks are the race
//! detector (see the `race` module for exactly what it does and does not
//! see: it never invents a race, but it can miss one when fences and atomics
//! are involved, and it does not check atomic scopes or plain-vs-atomic
//! mixes in shared memory). It is on by default;
//! `WARPFORGE_EMU_RACECHECK=0` turns it off (read once per process).
//! Global accesses are checked only in launches that name their outputs
//! ([`launch_with_outputs`], which `warpforge::Device` uses).
//!
//! # Where: source locations, and nothing on stderr
//!
//! Every fault names where in the kernel's source it happened, as data
//! ([`SourceLocation`] fields of [`Fault`]) and in its text: the access or
//! call of the faulting thread, and the other side where there is one — the
//! earlier access of a race (the detector keeps each access's location), the
//! `cp_async_16` that issued a pending copy, the barrier each group of
//! threads waits at and the last device call of a thread that exited
//! instead, the lane a collective waits for. On the host the device API's
//! accessors (`load`, `store`, `Slot::get`/`set`, atomics, barriers, warp
//! collectives, `cp_async_16`, the fragment loads) are `#[track_caller]`, so
//! a location is the kernel's own line, not one inside warpforge; on the GPU
//! the attribute is left out and the code is unchanged. A kernel's own
//! panic (a bounds check, an `expect`, an `assert!`) keeps its message and
//! its location.
//!
//! A fault is reported once, by the launch's error. The detectors unwind a
//! fiber with `resume_unwind`, which runs no panic hook, and a kernel's own
//! panic in a fiber is caught by a panic hook that the first launch installs
//! (passing every other panic to the hook that was there before): neither
//! prints anything, nor a backtrace with `RUST_BACKTRACE=1`. The report's
//! [`EmuError::headline`] fits in 160 characters; [`EmuError::details`] and
//! [`EmuError::advice`] follow it on the lines after.
//!
//! The cost: a location is one more pointer passed per call and stored per
//! access in the detector's records, which is within the run-to-run noise:
//! `cargo bench -p warpforge --profile dev --bench emulator` (the bench of
//! "Speed", test-build optimisation, 2 cores; 2026-11-26), million
//! thread-barriers per second before / after, three runs each: barriers
//! only 25.2–25.7 / 26.0–26.1; with shared traffic 17.0–18.5 / 18.5–19.1;
//! with output traffic 11.6–12.4 / 11.5–12.5.
//!
//! # Memory-traffic profile
//!
//! [`launch_profiled`] also counts the launch's memory traffic as a GPU
//! serves it: global loads and stores per warp-level request in 32-byte
//! sectors and 128-byte lines, coalescing efficiency and access width;
//! shared-memory wavefronts and bank conflicts (`ldmatrix` included);
//! `cp.async`, atomics per address, bytes per output element, and the
//! source lines that move the most. See [`profile`] for how requests are
//! rebuilt from the fibers' accesses and what is and is not seen. Off (every
//! other launch), it costs one pointer test per access.
//!
//! Shared memory starts filled with `0xFF` bytes (a NaN for every float type,
//! but −1 for signed integers and the maximum for unsigned ones), so a kernel
//! that reads shared memory it never wrote gets an implausible value even
//! with the detector off.
//!
//! # Speed
//!
//! It is a correctness tool, not a fast path: small shapes, many cases. Its
//! cost scales with thread-barriers (one emulated thread passing one
//! barrier). Measured by `cargo bench -p warpforge --bench emulator` (16
//! blocks × 256 threads × 64 barriers, optimised build, 2 cores, another
//! build running; 2026-11-23), in million thread-barriers per second, race
//! detector on (the default) / off (`WARPFORGE_EMU_RACECHECK=0`):
//!
//! | each barrier interval also … | on | off |
//! | --- | --- | --- |
//! | nothing (barriers only) | 41.8 | 45.9 |
//! | writes and reads shared memory | 31.0 | 41.7 |
//! | writes and reads an output element | 23.1 | 32.3 |
//!
//! The memory-traffic profile ([`profile`]), measured by the same bench
//! (`--profile dev`, 2 cores under a load of about 5; 2026-11-26), million
//! thread-barriers per second, the emulator before it existed / profile off
//! / profile on, two runs each: barriers only 10.5, 10.5 / 10.6, 10.4 /
//! 8.4, 9.0; with shared traffic 7.1, 6.4 / 7.7, 7.4 / 5.1, 5.5; with
//! output traffic 4.6, 4.0 / 4.5, 6.4 / 2.9, 3.5. Off it costs nothing
//! measurable (one pointer test per access); on, 1.2–1.8× the run time.
//! On a whole workload, `warpforge verify --backend emu` (every library
//! kernel, dev build) took 20.0 s, and 25.1 s with `--profile` (1.26×).
//!
//! Warp collectives cost about the same as a barrier. On a whole suite the
//! detector hardly shows: `warpforge/tests/reductions.rs` (debug build, 21
//! property tests) took 13.9 and 16.7 s with it on, 14.8 and 16.0 s off.
//! The interleaving adds a fiber switch at 1 in 8 output accesses and
//! atomics (and at every poll of a spin): `cargo test -p warpforge --test
//! reductions` (debug build) went from 15–17 s to 17–19 s.

pub(crate) mod fiber;
pub(crate) mod mbarrier;
mod memory;
pub mod profile;
pub(crate) mod race;
mod scheduler;
pub mod stream;
mod tensor;
pub mod tma;
pub(crate) mod wgmma;

use crate::thread::Dim3;
use core::fmt;

pub use memory::{ALLOCATION_ALIGN, DeviceMemory};
pub use profile::MemoryProfile;
pub use scheduler::{launch, launch_profiled, launch_with_outputs};

/// An output buffer of a launch (an `Out<T>` argument), so that the
/// global-memory race detector can check its elements and name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputBuffer {
    /// The kernel parameter's name.
    pub name: &'static str,
    /// Address of the first element.
    pub addr: usize,
    /// Elements.
    pub len: usize,
    /// Bytes per element.
    pub elem_bytes: usize,
}

/// How a thread touched memory, in a race report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A plain read.
    Read,
    /// A plain write.
    Write,
    /// An atomic read-modify-write (any `AtomicRef` operation).
    Atomic,
}

impl Access {
    fn verb(self) -> &'static str {
        match self {
            Access::Read => "reads",
            Access::Write => "writes",
            Access::Atomic => "atomically updates",
        }
    }

    fn past(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "wrote",
            Access::Atomic => "atomically updated",
        }
    }
}

/// Grid, block and shared-memory size of one emulated launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in each block.
    pub block: Dim3,
    /// Bytes of launch-sized (dynamic) shared memory per block.
    pub dynamic_shared_bytes: usize,
}

/// A place in a kernel's source: the file, line and column of an access or
/// a call of the device API (or of a panic).
///
/// The device API's accessors are `#[track_caller]` on the host, so a
/// location names the kernel's own call (`s.store(i, v)`, `o.set(v)`,
/// `sync_threads()`), not a line inside warpforge. `file` is the path the
/// compiler was given, relative to the workspace root for a workspace's
/// own crates (`probes/src/faults.rs`).
///
/// ```
/// use warpforge_device::emu::SourceLocation;
/// let here = SourceLocation::caller();
/// assert_eq!(here.file, file!());
/// assert_eq!(here.line, line!() - 2);
/// assert_eq!(here.to_string(), format!("{}:{}:{}", here.file, here.line, here.column));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SourceLocation {
    /// The source file.
    pub file: &'static str,
    /// The line, from 1.
    pub line: u32,
    /// The column, from 1.
    pub column: u32,
}

impl SourceLocation {
    /// The location of the call of the calling function (as
    /// [`core::panic::Location::caller`]).
    #[track_caller]
    pub fn caller() -> Self {
        Self::from(core::panic::Location::caller())
    }
}

impl From<&'static core::panic::Location<'static>> for SourceLocation {
    fn from(l: &'static core::panic::Location<'static>) -> Self {
        SourceLocation {
            file: l.file(),
            line: l.line(),
            column: l.column(),
        }
    }
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// The payload a detector unwinds a fiber with: a private type, thrown with
/// `resume_unwind` (which runs no panic hook, so nothing is printed), that a
/// kernel's own `panic_any` cannot imitate.
pub(crate) struct Detected(pub(crate) Fault);

/// Unwinds the calling fiber with `fault`, printing nothing; the scheduler
/// catches it and returns it as the launch's error.
pub(crate) fn raise(fault: Fault) -> ! {
    std::panic::resume_unwind(Box::new(Detected(fault)))
}

/// What went wrong inside an emulated kernel.
///
/// Every variant says where in the kernel's source it happened
/// ([`SourceLocation`]): `at` is the faulting thread's access or call;
/// `other_at`, `issued_at`, … the other side's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The thread panicked (bounds check, guard, assertion, arithmetic overflow).
    Panic {
        /// The panic message.
        message: String,
        /// Where it panicked: for a bounds check in the device API, the
        /// kernel's call (`None` if a panic hook installed after the
        /// emulator's did not pass the panic on to it).
        at: Option<SourceLocation>,
    },
    /// Some threads of the block wait at a barrier that others exited without reaching.
    DivergentBarrier {
        /// Threads waiting at the barrier.
        waiting: u32,
        /// Threads that exited without reaching it; `thread` in the error is the first of them.
        exited: u32,
        /// Where the waiting threads wait: each `sync_threads()` call site
        /// with the number of threads at it, in the order of their first thread.
        waiting_at: Vec<(SourceLocation, u32)>,
        /// The first exited thread's last call of the device API before it
        /// returned (`None` if it made none).
        exited_after: Option<SourceLocation>,
    },
    /// A warp collective whose mask names a lane that does not join it.
    WarpMask {
        /// The mask the calling lanes passed.
        mask: u32,
        /// The first lane of the mask that did not join.
        missing_lane: u32,
        /// Where that lane is instead.
        reason: &'static str,
        /// The collective's call in the named thread.
        at: Option<SourceLocation>,
        /// Where the missing lane is: the barrier or other collective it
        /// waits at, or its last device call (`None` if it has none, or does not exist).
        missing_at: Option<SourceLocation>,
    },
    /// Two threads touched the same shared-memory byte, at least one writing,
    /// with no block barrier between (`thread` in the error is the later one).
    SharedRace {
        /// Byte offset in the block's shared memory.
        offset: usize,
        /// The earlier thread (index within the block); `None` if several threads read it.
        other: Option<Dim3>,
        /// Whether the later access (this thread's) is a write.
        this_writes: bool,
        /// Whether the earlier access is a write.
        other_writes: bool,
        /// This thread's access.
        at: SourceLocation,
        /// The earlier access (with several readers: the latest of their reads).
        other_at: Option<SourceLocation>,
    },
    /// Two threads touched the same element of an output buffer, with
    /// nothing ordering them (no barrier between them in one block; across
    /// blocks, no fence-and-atomic release/acquire), and at least one wrote
    /// it plainly, or one accessed it plainly and the other atomically
    /// (`block` and `thread` in the error are the later one).
    GlobalRace {
        /// The output buffer's parameter name.
        buffer: &'static str,
        /// The element index in that buffer.
        element: usize,
        /// The earlier access's block.
        other_block: Dim3,
        /// The earlier thread (index within `other_block`); `None` if several
        /// threads of that block read it (or updated it atomically).
        other: Option<Dim3>,
        /// What the later access (this thread's) is.
        this_access: Access,
        /// What the earlier access is.
        other_access: Access,
        /// This thread's access.
        at: SourceLocation,
        /// The earlier access (for a group of threads: the latest one's).
        other_at: Option<SourceLocation>,
    },
    /// A thread read shared memory that no thread of the block had written
    /// (by the end of the barrier interval of the read).
    UninitSharedRead {
        /// Byte offset in the block's shared memory.
        offset: usize,
        /// The read (a load, or an atomic that reads the old value).
        at: SourceLocation,
    },
    /// No thread of the block can make progress.
    Deadlock {
        /// Threads waiting at a block barrier.
        at_barrier: u32,
        /// Threads waiting in a warp collective.
        at_warp_op: u32,
        /// Where the named thread waits.
        at: Option<SourceLocation>,
    },
    /// Threads spin on atomics that nothing will change: each polled one
    /// element, seeing the same value, many times in a row while no thread of
    /// the block changed memory, and every other thread of the block waits or
    /// has exited (for global memory: and no other running block changed it
    /// either) — or wait on mbarrier phases that nothing will complete (each
    /// polled twice with no change in the block between). `thread` in the
    /// error is the first spinner.
    SpinDeadlock {
        /// The spinning threads (the first 8, in the block's order).
        spinning: Vec<Dim3>,
        /// How many threads spin.
        spinners: u32,
        /// Whether some of them poll global memory (else all poll shared memory).
        global: bool,
        /// Threads waiting at a block barrier.
        at_barrier: u32,
        /// Threads waiting in a warp collective.
        at_warp_op: u32,
        /// The first spinner's polling atomic (or mbarrier wait).
        at: Option<SourceLocation>,
        /// If the first spinner waits on an mbarrier: the barrier and the
        /// phase.
        mbarrier: Option<MbarrierWait>,
    },
    /// A thread accessed shared memory that is the destination of a
    /// `cp.async` whose issuing thread has not yet waited for it
    /// (`cp_async_wait_all` / `cp_async_wait_group`): the bytes have not landed.
    CpAsyncPending {
        /// Byte offset in the block's shared memory.
        offset: usize,
        /// The thread that issued the copy.
        issuer: Dim3,
        /// Whether this thread's access is a write (or an atomic).
        this_writes: bool,
        /// This thread's access.
        at: SourceLocation,
        /// The `cp_async_16` call that issued the copy.
        issued_at: SourceLocation,
    },
    /// An access to shared bytes that a bulk copy
    /// ([`crate::bulk`]) will write but has not landed: the thread did not
    /// wait on the copy's barrier first (or its phase does not count the
    /// copy yet).
    BulkCopyPending {
        /// Byte offset in the block's shared memory.
        offset: usize,
        /// The thread that issued the copy.
        issuer: Dim3,
        /// Byte offset of the barrier the copy counts its bytes on.
        barrier: usize,
        /// Whether this thread's access is a write (or an atomic).
        this_writes: bool,
        /// This thread's access.
        at: SourceLocation,
        /// The `copy_to_shared` call that issued the copy.
        issued_at: SourceLocation,
    },
    /// An mbarrier operation, or a plain access to a live barrier's bytes,
    /// against the barrier's protocol: the PTX ISA leaves each undefined.
    Mbarrier {
        /// Byte offset of the barrier in the block's shared memory.
        offset: usize,
        /// What was wrong.
        problem: MbarrierProblem,
        /// This thread's operation or access.
        at: SourceLocation,
    },
    /// A warpgroup instruction (`wgmma`, `setmaxnreg`) against its rules
    /// (undefined on the GPU).
    Wgmma {
        /// What was wrong.
        problem: WgmmaProblem,
        /// This warp's instruction (or, for a changed operand, its wait).
        at: SourceLocation,
        /// The other instruction involved: another warp's, or the issue
        /// whose operand changed.
        other_at: Option<SourceLocation>,
    },
    /// A TMA store ([`crate::tma::StoreMatrix`]) against its protocol:
    /// undefined on the GPU (the copy engine reads its shared source
    /// through the async proxy, asynchronously).
    TmaStore {
        /// What was wrong.
        problem: TmaStoreProblem,
        /// This thread's store, access or exit.
        at: SourceLocation,
        /// The other operation involved: the plain store the copy engine
        /// may not see, or the pending TMA store.
        other_at: Option<SourceLocation>,
    },
}

/// How a TMA store broke its protocol ([`Fault::TmaStore`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmaStoreProblem {
    /// Source byte `offset` was last written by thread `writer` with a
    /// plain store, and `writer` has not executed `fence.proxy.async`
    /// since: the copy engine reads through the async proxy, which may not
    /// see the store (the other operation named is the store).
    UnfencedSource {
        /// Byte offset in the block's shared memory.
        offset: usize,
        /// The thread that stored it.
        writer: Dim3,
    },
    /// This thread writes byte `offset` of a TMA store's source (or a copy
    /// lands there) before the issuing thread's `wait_read` has covered the
    /// store: the copy engine may still be reading it (the other operation
    /// named is the store).
    SourceInUse {
        /// Byte offset in the block's shared memory.
        offset: usize,
        /// The thread that issued the store.
        issuer: Dim3,
    },
    /// A TMA store of a box that overlaps one this thread stored before and
    /// has not waited for: two writes of the same global elements by the
    /// copy engine, in no defined order.
    Overlapping {
        /// The earlier box's corner (column, row, batch).
        corner: [i64; 3],
    },
    /// The box reaches past the tensor's last column, and the row's extent
    /// (`cols` × `elem` bytes) is not a multiple of 16 bytes: the copy
    /// engine writes a row in whole 16-byte chunks, so a GPU writes columns
    /// `cols .. end` of every row the box covers — outside the tensor, into
    /// the row's padding or the next row (an H200 did; the emulator does
    /// not, and reports it instead).
    PastTheRow {
        /// The tensor's columns (dimension 0).
        cols: u64,
        /// One past the last column a GPU writes: `cols` rounded up to 16
        /// bytes, or the box's end if that comes first.
        end: u64,
        /// Bytes per element.
        elem: usize,
    },
    /// The thread exited with `stores` TMA stores whose source reads it had
    /// not waited for (`wait_read`): the block's shared memory is freed
    /// while the copy engine may still read it (the other operation named
    /// is the oldest of them).
    NotWaited {
        /// The stores not waited for.
        stores: usize,
    },
}

impl fmt::Display for TmaStoreProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TmaStoreProblem::UnfencedSource { offset, writer } => write!(
                f,
                "its source byte {offset} was stored by thread {writer}, which has not executed \
                 fence.proxy.async since: the copy engine may not see that store"
            ),
            TmaStoreProblem::SourceInUse { offset, issuer } => write!(
                f,
                "a write of byte {offset} of shared memory, the source of a TMA store that thread \
                 {issuer} issued and has not waited for (wait_read): the copy engine may still \
                 be reading it"
            ),
            TmaStoreProblem::Overlapping { corner } => write!(
                f,
                "the box overlaps the box at {corner:?} (column, row, batch) that this thread \
                 stored and has not waited for: the two writes of those elements are unordered"
            ),
            TmaStoreProblem::PastTheRow { cols, end, elem } => write!(
                f,
                "the box reaches past the tensor's {cols} columns, and a row of {cols} × {elem} \
                 bytes = {} bytes is not a multiple of 16: the copy engine writes whole 16-byte \
                 chunks, so on a GPU this store writes columns {cols}..{end} of each row it \
                 covers, outside the tensor",
                cols * *elem as u64
            ),
            TmaStoreProblem::NotWaited { stores } => write!(
                f,
                "the thread exited with {stores} TMA stores whose source reads it had not waited \
                 for (wait_read): the block's shared memory goes while they may still read it"
            ),
        }
    }
}

/// How a `wgmma` broke the instruction's rules ([`Fault::Wgmma`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WgmmaProblem {
    /// Lane `lane` of the warp issued it with other operands (or from
    /// another line) than lane 0: the instruction is `.sync.aligned`.
    LanesDisagree {
        /// The first lane that differs.
        lane: u32,
    },
    /// The block's threads end before this warp's warpgroup (4 warps from
    /// a multiple of 4) is complete.
    PartialWarpgroup {
        /// Threads in the block.
        threads: u64,
    },
    /// This warp's `nth` warpgroup instruction (from 0; `wgmma` or
    /// `setmaxnreg`) is not the same (line, operands, shape, types) as warp
    /// `other_warp`'s of the warpgroup.
    WarpsDisagree {
        /// Which instruction of the warp's sequence.
        nth: u32,
        /// The warp (in the block) that issued it first.
        other_warp: u32,
    },
    /// When the block ended, this warp had executed `issued` warpgroup
    /// instructions and warp `behind` of its warpgroup only `behind_issued`.
    Unmatched {
        /// This warp's count.
        issued: u32,
        /// The warp (in the block) that issued fewer.
        behind: u32,
        /// Its count.
        behind_issued: u32,
    },
    /// Operand `operand`'s descriptor cannot be what the kernel meant.
    Descriptor {
        /// `'A'` or `'B'`.
        operand: char,
        /// The descriptor.
        bits: u64,
        /// Why.
        reason: &'static str,
    },
    /// Shared byte `offset`, an operand of an issued `wgmma`, changed before
    /// the `wait_group` that retires it.
    OperandChanged {
        /// Byte offset in the block's shared memory.
        offset: usize,
    },
    /// Shared byte `offset` of operand `operand` was last written by
    /// thread `writer` with a plain store (the generic proxy), and `writer`
    /// has not executed `fence.proxy.async` since: `wgmma` reads through
    /// the async proxy, which may not see the store (the PTX ISA's
    /// "async proxy"; the other instruction named is the store).
    UnfencedOperand {
        /// `'A'` or `'B'`.
        operand: char,
        /// Byte offset in the block's shared memory.
        offset: usize,
        /// The thread that stored it.
        writer: Dim3,
    },
    /// This warp's `setmaxnreg.inc` to `regs` registers a thread waits for
    /// ever: the block's pool holds `pool` registers, fewer than the
    /// `32·(regs − from)` it adds, and no warp will release more. The
    /// hardware hangs there (the PTX ISA: `.inc` blocks until the CTA's pool
    /// has enough; only `.dec` fills it); the usual cause is limits that
    /// add up to more than the block has: over all its warps, threads ×
    /// final limit must be at most `threads × entry`.
    RegisterPoolShort {
        /// The limit the warp asked for, per thread.
        regs: u32,
        /// Its limit before, per thread (at launch: `entry`).
        from: u32,
        /// Registers in the block's pool.
        pool: u64,
        /// The most registers a thread of this block can have at launch:
        /// `65536 / threads` in steps of 8 (ptxas's count for the kernel is
        /// at most this; for the Hopper GEMM's 384 threads, exactly it).
        entry: u32,
        /// Threads in the block.
        threads: u64,
    },
}

impl fmt::Display for WgmmaProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WgmmaProblem::LanesDisagree { lane } => write!(
                f,
                "lane {lane} issued it with other operands (or from another line) than lane 0; \
                 the whole warp must issue the same instruction"
            ),
            WgmmaProblem::PartialWarpgroup { threads } => write!(
                f,
                "the block has {threads} threads: this warp's warpgroup (4 warps, the first a \
                 multiple of 4) is incomplete"
            ),
            WgmmaProblem::WarpsDisagree { nth, other_warp } => write!(
                f,
                "this warp's warpgroup instruction number {nth} (wgmma or setmaxnreg) is not \
                 the one (line, operands, shape) that warp {other_warp} of its warpgroup \
                 executed as its number {nth}"
            ),
            WgmmaProblem::Unmatched {
                issued,
                behind,
                behind_issued,
            } => write!(
                f,
                "this warp executed {issued} warpgroup instructions (wgmma, setmaxnreg) and \
                 warp {behind} of its warpgroup {behind_issued}: every warp of a warpgroup \
                 executes each one"
            ),
            WgmmaProblem::Descriptor {
                operand,
                bits,
                reason,
            } => write!(f, "{operand}'s descriptor {bits:#018x}: {reason}"),
            WgmmaProblem::OperandChanged { offset } => write!(
                f,
                "byte {offset} of shared memory, which it reads, changed before the wait_group \
                 that retires it"
            ),
            WgmmaProblem::UnfencedOperand {
                operand,
                offset,
                writer,
            } => write!(
                f,
                "{operand} reads byte {offset} of shared memory through the async proxy, and \
                 thread {writer} stored it with a plain store and no fence.proxy.async since: \
                 the wgmma may read what was there before"
            ),
            WgmmaProblem::RegisterPoolShort {
                regs,
                from,
                pool,
                entry,
                threads,
            } => write!(
                f,
                "setmaxnreg.inc from {from} to {regs} registers a thread needs {} for the \
                 warp, the block's pool holds {pool} and no warp will release more: it waits \
                 for ever (the block has at most {entry} a thread × {threads} threads = {} \
                 registers to share out)",
                u64::from(regs.saturating_sub(*from)) * 32,
                u64::from(*entry) * threads
            ),
        }
    }
}

/// An mbarrier wait that nothing will complete ([`Fault::SpinDeadlock`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MbarrierWait {
    /// Byte offset of the barrier in the block's shared memory.
    pub offset: usize,
    /// The phase waited for.
    pub waited: u32,
    /// The barrier's current phase.
    pub phase: u32,
    /// Arrivals the current phase still expects.
    pub pending: u32,
    /// Its tx-count: bytes of asynchronous copies still expected.
    pub tx: i64,
}

/// How an mbarrier was misused ([`Fault::Mbarrier`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MbarrierProblem {
    /// No live barrier there: not initialised, or invalidated (or the
    /// address is outside the block's shared memory).
    NotLive,
    /// Not 8-byte aligned.
    Misaligned,
    /// `init` of a barrier that is live (it must be invalidated first).
    InitLive,
    /// `init` with an arrival count outside 1 ..= 2^20 − 1.
    BadCount {
        /// The count given.
        count: u32,
    },
    /// An arrive on a phase whose expected arrivals have all come.
    TooManyArrivals {
        /// The phase.
        phase: u32,
        /// Arrivals it expects.
        expected: u32,
    },
    /// The tx-count would leave −(2^20 − 1) ..= 2^20 − 1.
    TxOutOfRange {
        /// The tx-count it would have.
        tx: i64,
    },
    /// A wait for a phase that is neither the current one nor the one
    /// before it: the parity it gives names another phase than it means.
    PhaseNotCurrentOrPreceding {
        /// The phase waited for.
        waited: u32,
        /// The barrier's current phase.
        current: u32,
    },
    /// A plain load or store of a live barrier's bytes (or a bulk copy
    /// whose destination covers them).
    PlainAccess,
    /// `inval` of a barrier that bulk copies still count their bytes on.
    CopiesInFlight {
        /// The copies not landed.
        copies: usize,
    },
}

impl fmt::Display for MbarrierProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MbarrierProblem::NotLive => {
                f.write_str("there is no live mbarrier there (not initialised, or invalidated)")
            }
            MbarrierProblem::Misaligned => f.write_str("the mbarrier is not 8-byte aligned"),
            MbarrierProblem::InitLive => {
                f.write_str("init of an mbarrier that is live (invalidate it first)")
            }
            MbarrierProblem::BadCount { count } => write!(
                f,
                "init with {count} arrivals a phase: the count must be 1 ..= 2^20 - 1"
            ),
            MbarrierProblem::TooManyArrivals { phase, expected } => write!(
                f,
                "an arrive on phase {phase}, whose {expected} expected arrivals have all come"
            ),
            MbarrierProblem::TxOutOfRange { tx } => write!(
                f,
                "the tx-count would be {tx}: it must stay within -(2^20 - 1) ..= 2^20 - 1"
            ),
            MbarrierProblem::PhaseNotCurrentOrPreceding { waited, current } => write!(
                f,
                "a wait for phase {} while the barrier is in phase {current}: only the current \
                 phase and the one before it can be waited for (the GPU sees the parity, \
                 which names another phase)",
                *waited as i32
            ),
            MbarrierProblem::PlainAccess => {
                f.write_str("a plain access to a live mbarrier's bytes")
            }
            MbarrierProblem::CopiesInFlight { copies } => write!(
                f,
                "inval while {copies} bulk copies that count on it have not landed (wait for \
                 their phase first)"
            ),
        }
    }
}

impl Fault {
    /// The fault's class in a few words, as the headline names it.
    pub fn class(&self) -> &'static str {
        match self {
            Fault::Panic { .. } => "panic",
            Fault::DivergentBarrier { .. } => "divergent barrier",
            Fault::WarpMask { .. } => "bad warp mask",
            Fault::SharedRace { .. } => "shared-memory race",
            Fault::GlobalRace { .. } => "global-memory race",
            Fault::UninitSharedRead { .. } => "read of uninitialised shared memory",
            Fault::Deadlock { .. } => "deadlock",
            Fault::SpinDeadlock { .. } => "spin deadlock",
            Fault::CpAsyncPending { .. } => "cp.async destination used before its wait",
            Fault::BulkCopyPending { .. } => "bulk copy destination used before its barrier wait",
            Fault::Mbarrier { .. } => "mbarrier misuse",
            Fault::Wgmma { .. } => "wgmma misuse",
            Fault::TmaStore { .. } => "TMA store misuse",
        }
    }

    /// Where the fault happened in the kernel's source, as the headline
    /// names it: the faulting thread's access or call, or for a divergent
    /// barrier the barrier the others wait at.
    pub fn location(&self) -> Option<SourceLocation> {
        match self {
            Fault::Panic { at, .. }
            | Fault::WarpMask { at, .. }
            | Fault::Deadlock { at, .. }
            | Fault::SpinDeadlock { at, .. } => *at,
            Fault::DivergentBarrier { waiting_at, .. } => waiting_at.first().map(|(l, _)| *l),
            Fault::SharedRace { at, .. }
            | Fault::GlobalRace { at, .. }
            | Fault::UninitSharedRead { at, .. }
            | Fault::CpAsyncPending { at, .. }
            | Fault::BulkCopyPending { at, .. }
            | Fault::Mbarrier { at, .. }
            | Fault::Wgmma { at, .. }
            | Fault::TmaStore { at, .. } => Some(*at),
        }
    }
}

/// A fault in an emulated launch, with the kernel, block and thread it happened in.
///
/// Its `Display` is a headline of at most [`EmuError::HEADLINE_MAX`]
/// characters (kernel, fault class, `file:line:column`, block and thread),
/// then the details on the lines after it, then what to change in the kernel:
///
/// ```text
/// kernel `transpose`: shared-memory race at src/lib.rs:14:19, block (0, 0, 0), thread (1, 0, 0)
///   this thread reads byte 0 of shared memory at src/lib.rs:14:19
///   thread (0, 0, 0) wrote it at src/lib.rs:12:7, with no barrier between the two
///   fix: put sync_threads() between the two accesses (or use an atomic)
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmuError {
    /// Kernel name.
    pub kernel: String,
    /// Block index of the faulting thread.
    pub block: Dim3,
    /// Thread index (within the block) of the faulting thread.
    pub thread: Dim3,
    /// What happened.
    pub fault: Fault,
}

/// `at LOCATION`, or `(location unknown)`.
fn at(l: Option<SourceLocation>) -> String {
    l.map_or_else(|| "(location unknown)".to_owned(), |l| format!("at {l}"))
}

/// `s` cut to at most `max` characters, its start replaced by `…` when cut.
fn keep_end(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_owned();
    }
    let tail: String = s.chars().skip(n + 1 - max).collect();
    format!("…{tail}")
}

/// `s` cut to at most `max` characters, its end replaced by `…` when cut.
fn keep_start(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let head: String = s.chars().take(max.saturating_sub(1)).collect();
    format!("{head}…")
}

impl EmuError {
    /// The most characters [`EmuError::headline`] has.
    pub const HEADLINE_MAX: usize = 160;

    /// The first line of the report: kernel, fault class, where in the
    /// source, block and thread; at most [`Self::HEADLINE_MAX`] characters
    /// (a long path keeps its end, a long kernel name its start).
    pub fn headline(&self) -> String {
        let class = self.fault.class();
        let place = format!(", block {}, thread {}", self.block, self.thread);
        let line = |kernel: &str, location: Option<String>| match location {
            Some(l) => format!("kernel `{kernel}`: {class} at {l}{place}"),
            None => format!("kernel `{kernel}`: {class}{place}"),
        };
        let location = self.fault.location().map(|l| l.to_string());
        let full = line(&self.kernel, location.clone());
        let len = full.chars().count();
        if len <= Self::HEADLINE_MAX {
            return full;
        }
        // Shorten the path first, keeping its end (the file's name, line and
        // column), then the kernel's name, keeping its start.
        let excess = len - Self::HEADLINE_MAX;
        let location = location.map(|l| {
            let n = l.chars().count();
            keep_end(&l, n.saturating_sub(excess).max(48))
        });
        let shorter = line(&self.kernel, location.clone());
        let excess = shorter.chars().count().saturating_sub(Self::HEADLINE_MAX);
        if excess == 0 {
            return shorter;
        }
        let n = self.kernel.chars().count();
        let kernel = keep_start(&self.kernel, n.saturating_sub(excess).max(8));
        keep_start(&line(&kernel, location), Self::HEADLINE_MAX)
    }

    /// The lines after the headline: what each thread involved did, and where.
    pub fn details(&self) -> Vec<String> {
        let verb = |w: bool| if w { "writes" } else { "reads" };
        let past = |w: bool| if w { "wrote" } else { "read" };
        let access = |w: bool, offset: usize, loc: &SourceLocation| {
            format!(
                "this thread {} byte {offset} of shared memory at {loc}",
                verb(w)
            )
        };
        match &self.fault {
            Fault::Panic { message, at: loc } => {
                vec![format!("panicked {}: {message}", at(*loc))]
            }
            Fault::DivergentBarrier {
                waiting,
                exited,
                waiting_at,
                exited_after,
            } => {
                let mut lines: Vec<String> = waiting_at
                    .iter()
                    .map(|(l, n)| format!("{n} threads wait at sync_threads() at {l}"))
                    .collect();
                if waiting_at.is_empty() {
                    lines.push(format!("{waiting} threads wait at sync_threads()"));
                }
                lines.push(format!(
                    "{exited} threads (this one first) exited without reaching it; this one \
                     returned after {}",
                    exited_after.map_or_else(
                        || "no call of the device API".to_owned(),
                        |l| format!("its last device call, at {l}")
                    )
                ));
                lines
            }
            Fault::WarpMask {
                mask,
                missing_lane,
                reason,
                at: loc,
                missing_at,
            } => vec![
                format!(
                    "this lane calls a warp collective with mask {mask:#010x} {}",
                    at(*loc)
                ),
                match missing_at {
                    Some(l) => {
                        format!("lane {missing_lane} {reason} (its last device call is at {l})")
                    }
                    None => format!("lane {missing_lane} {reason}"),
                },
            ],
            Fault::SharedRace {
                offset,
                other,
                this_writes,
                other_writes,
                at: loc,
                other_at,
            } => vec![
                format!(
                    "this thread {} byte {offset} of shared memory at {loc}",
                    verb(*this_writes)
                ),
                match other {
                    Some(t) => format!(
                        "thread {t} {} it {}, with no barrier between the two",
                        past(*other_writes),
                        at(*other_at)
                    ),
                    None => format!(
                        "several threads read it since the last barrier (one {})",
                        at(*other_at)
                    ),
                },
            ],
            Fault::GlobalRace {
                buffer,
                element,
                other_block,
                other,
                this_access,
                other_access,
                at: loc,
                other_at,
            } => {
                let who = match other {
                    Some(t) => format!("thread {t} of block {other_block}"),
                    None => format!(
                        "several threads of block {other_block} (one {})",
                        at(*other_at)
                    ),
                };
                let where_ = if other.is_some() {
                    format!(" {}", at(*other_at))
                } else {
                    String::new()
                };
                vec![
                    format!(
                        "this thread {} `{buffer}`[{element}] at {loc}",
                        this_access.verb()
                    ),
                    format!(
                        "{who} {} it{where_}, with nothing ordering the two",
                        other_access.past()
                    ),
                ]
            }
            Fault::UninitSharedRead { offset, at: loc } => vec![format!(
                "this thread reads byte {offset} of shared memory at {loc}, and no thread of \
                 the block wrote it before (shared memory starts as 0xFF bytes: NaN for \
                 floats, -1 for integers)"
            )],
            Fault::Deadlock {
                at_barrier,
                at_warp_op,
                at: loc,
            } => vec![format!(
                "{at_barrier} threads wait at a block barrier and {at_warp_op} in a warp \
                 collective, and none can proceed; this one waits {}",
                at(*loc)
            )],
            Fault::SpinDeadlock {
                spinning,
                spinners,
                global,
                at_barrier,
                at_warp_op,
                at: loc,
                mbarrier,
            } => {
                let list: Vec<String> = spinning.iter().map(ToString::to_string).collect();
                let more = if *spinners as usize > spinning.len() {
                    ", …"
                } else {
                    ""
                };
                let what = match mbarrier {
                    Some(w) => format!(
                        "{spinners} threads ({}{more}) wait on mbarrier phases nothing will \
                         complete; this one waits {} on the barrier at byte {} of shared memory \
                         for phase {}, and it is in phase {} with {} arrivals and {} bytes still \
                         expected",
                        list.join(", "),
                        at(*loc),
                        w.offset,
                        w.waited as i32,
                        w.phase,
                        w.pending,
                        w.tx
                    ),
                    None => format!(
                        "{spinners} threads ({}{more}) poll an atomic in {} memory, each seeing \
                         the same value {} times in a row; this one polls {}",
                        list.join(", "),
                        if *global { "global" } else { "shared" },
                        fiber::SPIN_BOUND,
                        at(*loc)
                    ),
                };
                let mut lines = vec![
                    what,
                    format!(
                        "no thread of the block changes memory ({at_barrier} wait at a block \
                         barrier, {at_warp_op} in a warp collective, the rest exited)"
                    ),
                ];
                if *global {
                    lines.push(
                        "no other running block changes it either (the emulator runs one \
                         block per core at a time)"
                            .to_owned(),
                    );
                }
                lines
            }
            Fault::CpAsyncPending {
                offset,
                issuer,
                this_writes,
                at: loc,
                issued_at,
            } => vec![
                access(*this_writes, *offset, loc),
                format!(
                    "it is the destination of a cp.async that thread {issuer} issued at \
                     {issued_at} and has not waited for: the bytes have not landed"
                ),
            ],
            Fault::BulkCopyPending {
                offset,
                issuer,
                barrier,
                this_writes,
                at: loc,
                issued_at,
            } => vec![
                access(*this_writes, *offset, loc),
                format!(
                    "it is the destination of a bulk copy that thread {issuer} issued at \
                     {issued_at}, counted on the mbarrier at byte {barrier}: the bytes have \
                     not landed"
                ),
            ],
            Fault::Mbarrier {
                offset,
                problem,
                at: loc,
            } => vec![format!(
                "mbarrier at byte {offset} of shared memory, at {loc}: {problem}"
            )],
            Fault::Wgmma {
                problem,
                at: loc,
                other_at,
            } => {
                let what = match problem {
                    WgmmaProblem::RegisterPoolShort { .. } => "setmaxnreg",
                    _ => "wgmma",
                };
                let mut lines = vec![format!("{what} at {loc}: {problem}")];
                if let Some(other) = other_at {
                    let what = match problem {
                        WgmmaProblem::UnfencedOperand { .. } => "the store",
                        _ => "the other instruction",
                    };
                    lines.push(format!("{what} is at {other}"));
                }
                lines
            }
            Fault::TmaStore {
                problem,
                at: loc,
                other_at,
            } => {
                let mut lines = vec![format!("TMA store at {loc}: {problem}")];
                if let Some(other) = other_at {
                    let what = match problem {
                        TmaStoreProblem::UnfencedSource { .. } => "the plain store",
                        _ => "the earlier TMA store",
                    };
                    lines.push(format!("{what} is at {other}"));
                }
                lines
            }
        }
    }

    /// What to change in the kernel.
    pub fn advice(&self) -> &'static str {
        match &self.fault {
            Fault::Panic { .. } => {
                "fix: the kernel panicked at that line (a bounds check, a guard that gave no \
                 slot, an assertion, an overflow): check its indices against the buffer \
                 sizes and the launch shape"
            }
            Fault::DivergentBarrier { .. } => {
                "fix: every thread of a block must reach every barrier — move the early \
                 return, or the branch around the barrier, after it"
            }
            Fault::WarpMask { .. } => {
                "fix: a mask may name only lanes that execute the same collective: pass the \
                 lanes that reach it (or FULL_MASK where the whole warp does)"
            }
            Fault::SharedRace { .. } => {
                "fix: put sync_threads() between the two accesses (or use an atomic)"
            }
            Fault::GlobalRace {
                this_access,
                other_access,
                other_block,
                ..
            } => {
                if this_access != other_access
                    && (*this_access == Access::Atomic || *other_access == Access::Atomic)
                {
                    "fix: make every access to it atomic (`.atomic()`), or order the plain one \
                     (sync_threads() within a block; the output of one launch is the input of \
                     the next)"
                } else if self.block == *other_block {
                    "fix: give each thread its own elements, put sync_threads() between the \
                     two accesses, or use an atomic (`.atomic()`)"
                } else {
                    "fix: blocks are not ordered: give each element one writing thread (index \
                     it by the global thread index), or use an atomic (`.atomic()`)"
                }
            }
            Fault::UninitSharedRead { .. } => {
                "fix: store every element before reading it, with sync_threads() between a \
                 store and other threads' reads"
            }
            Fault::Deadlock { .. } => {
                "fix: every thread of a block must reach the same barriers and every lane of \
                 a mask the same collectives"
            }
            Fault::SpinDeadlock { global, .. } => {
                if *global {
                    "fix: nothing will ever release them: a block may wait only for blocks \
                     that can run at the same time (a GPU gives no such guarantee); set the \
                     flag before spinning on it, or split the work into two launches"
                } else {
                    "fix: nothing will ever release them: make sure a thread that is not \
                     waiting sets the flag they poll (for an mbarrier: that each phase gets the \
                     arrivals and bytes it expects, from threads that do not wait on it first)"
                }
            }
            Fault::CpAsyncPending { .. } => {
                "fix: call cp_async_wait_all() (or cp_async_wait_group) in the issuing thread \
                 before the access, and sync_threads() after it before other threads read them"
            }
            Fault::BulkCopyPending { .. } => {
                "fix: wait on the copy's barrier (MBarrier::wait, for the phase that counts its \
                 bytes) before touching its destination, and refill a stage only after its \
                 readers have arrived on its \"empty\" barrier"
            }
            Fault::Wgmma {
                problem: WgmmaProblem::UnfencedOperand { .. },
                ..
            } => {
                "fix: after storing an operand tile, each storing thread calls \
                 wgmma::fence_operands() (fence.proxy.async) before the barrier that \
                 publishes the tile to the warpgroup"
            }
            Fault::Wgmma {
                problem: WgmmaProblem::RegisterPoolShort { .. },
                ..
            } => {
                "fix: choose the setmaxnreg limits so that, over all warps, threads × final \
                 limit is at most the block's registers at launch (threads × the kernel's \
                 registers: for 384 threads, 168; e.g. a 128-thread producer at 56 and two \
                 consumer warpgroups at 224, or 40 and 232)"
            }
            Fault::Wgmma { .. } => {
                "fix: issue every wgmma from all 4 warps of a warpgroup with the same operands, \
                 and write its shared operands only after the wait_group that covers it (then \
                 arrive on the stage's \"empty\" barrier)"
            }
            Fault::TmaStore {
                problem: TmaStoreProblem::UnfencedSource { .. },
                ..
            } => {
                "fix: after writing the staging tile, each writing thread calls \
                 tma::fence_for_store() (fence.proxy.async) before the barrier that hands the \
                 tile to the storing thread"
            }
            Fault::TmaStore {
                problem: TmaStoreProblem::PastTheRow { .. },
                ..
            } => {
                "fix: store through a map whose rows are a multiple of 16 bytes (pad the \
                 columns: 4 f32, 8 f16), or write the matrix's last columns with plain \
                 stores; warpforge's MatrixMut::tma_store refuses such a matrix"
            }
            Fault::TmaStore { .. } => {
                "fix: the storing thread calls commit() after its stores and wait_read::<0>() \
                 (then a barrier) before anyone rewrites their staging tiles, and \
                 wait_read::<0>() before it exits; a box is stored once per tile"
            }
            Fault::Mbarrier { .. } => {
                "fix: give each phase exactly the arrivals (and bytes) it expects, keep each \
                 waiting thread's Phase in step with the barrier (one wait per phase), and \
                 touch a barrier's bytes only through MBarrier"
            }
        }
    }
}

impl fmt::Display for EmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.headline())?;
        for line in self.details() {
            write!(f, "\n  {line}")?;
        }
        write!(f, "\n  {}", self.advice())
    }
}

impl std::error::Error for EmuError {}
