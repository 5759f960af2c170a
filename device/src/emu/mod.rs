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
//!   (`Fault::CpAsyncPending`, see "`cp.async`").
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
//! Warp collectives cost about the same as a barrier. On a whole suite the
//! detector hardly shows: `warpforge/tests/reductions.rs` (debug build, 21
//! property tests) took 13.9 and 16.7 s with it on, 14.8 and 16.0 s off.
//! The interleaving adds a fiber switch at 1 in 8 output accesses and
//! atomics (and at every poll of a spin): `cargo test -p warpforge --test
//! reductions` (debug build) went from 15–17 s to 17–19 s.

pub(crate) mod fiber;
mod memory;
pub(crate) mod race;
mod scheduler;
pub mod stream;
mod tensor;

use crate::thread::Dim3;
use core::fmt;

pub use memory::{ALLOCATION_ALIGN, DeviceMemory};
pub use scheduler::{launch, launch_with_outputs};

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

/// What went wrong inside an emulated kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The thread panicked (bounds check, guard, assertion, arithmetic overflow).
    Panic {
        /// The panic message.
        message: String,
    },
    /// Some threads of the block wait at a barrier that others exited without reaching.
    DivergentBarrier {
        /// Threads waiting at the barrier.
        waiting: u32,
        /// Threads that exited without reaching it; `thread` in the error is the first of them.
        exited: u32,
    },
    /// A warp collective whose mask names a lane that does not join it.
    WarpMask {
        /// The mask the calling lanes passed.
        mask: u32,
        /// The first lane of the mask that did not join.
        missing_lane: u32,
        /// Where that lane is instead.
        reason: &'static str,
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
    },
    /// A thread read shared memory that no thread of the block had written
    /// (by the end of the barrier interval of the read).
    UninitSharedRead {
        /// Byte offset in the block's shared memory.
        offset: usize,
    },
    /// No thread of the block can make progress.
    Deadlock {
        /// Threads waiting at a block barrier.
        at_barrier: u32,
        /// Threads waiting in a warp collective.
        at_warp_op: u32,
    },
    /// Threads spin on atomics that nothing will change: each polled one
    /// element, seeing the same value, many times in a row while no thread of
    /// the block changed memory, and every other thread of the block waits or
    /// has exited (for global memory: and no other running block changed it
    /// either). `thread` in the error is the first spinner.
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
    },
}

/// A fault in an emulated launch, with the kernel, block and thread it happened in.
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

impl fmt::Display for EmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel `{}`, block {}, thread {}: ",
            self.kernel, self.block, self.thread
        )?;
        match &self.fault {
            Fault::Panic { message } => write!(f, "{message}"),
            Fault::DivergentBarrier { waiting, exited } => write!(
                f,
                "divergent barrier: {waiting} threads wait at sync_threads() but {exited} \
                 threads (this one first) exited without reaching it; every thread of a \
                 block must reach every barrier — move the early return after the barrier"
            ),
            Fault::WarpMask {
                mask,
                missing_lane,
                reason,
            } => write!(
                f,
                "warp collective with mask {mask:#010x}: lane {missing_lane} {reason}; \
                 a mask may name only lanes that execute the same collective"
            ),
            Fault::SharedRace {
                offset,
                other,
                this_writes,
                other_writes,
            } => {
                let verb = |w: bool| if w { "writes" } else { "reads" };
                let who = match other {
                    Some(t) => format!("thread {t} {}", verb(*other_writes)),
                    None => "several threads read".to_owned(),
                };
                write!(
                    f,
                    "shared-memory race at byte {offset}: this thread {} it, and {who} it \
                     since the last barrier; put sync_threads() between the two accesses \
                     (or use an atomic)",
                    verb(*this_writes)
                )
            }
            Fault::GlobalRace {
                buffer,
                element,
                other_block,
                other,
                this_access,
                other_access,
            } => {
                let who = match other {
                    Some(t) => format!("thread {t} of block {other_block} {}", other_access.verb()),
                    None => format!(
                        "several threads of block {other_block} {}",
                        other_access.verb()
                    ),
                };
                let fix = if this_access != other_access
                    && (*this_access == Access::Atomic || *other_access == Access::Atomic)
                {
                    "make every access to it atomic (`.atomic()`), or order the plain one \
                     (sync_threads() within a block; the output of one launch is the input \
                     of the next)"
                } else if self.block == *other_block {
                    "give each thread its own elements, put sync_threads() between the two \
                     accesses, or use an atomic (`.atomic()`)"
                } else {
                    "blocks are not ordered: give each element one writing thread (index \
                     it by the global thread index), or use an atomic (`.atomic()`)"
                };
                write!(
                    f,
                    "global-memory race on `{buffer}`[{element}]: this thread {} it, and \
                     {who} it, with nothing ordering the two; {fix}",
                    this_access.verb()
                )
            }
            Fault::UninitSharedRead { offset } => write!(
                f,
                "read of uninitialised shared memory at byte {offset}: no thread of the \
                 block wrote it before this read (shared memory starts as 0xFF bytes: NaN \
                 for floats, -1 for integers); store every element before reading it, with \
                 sync_threads() between a store and other threads' reads"
            ),
            Fault::Deadlock {
                at_barrier,
                at_warp_op,
            } => write!(
                f,
                "deadlock: {at_barrier} threads wait at a block barrier and {at_warp_op} in \
                 a warp collective, and none can proceed"
            ),
            Fault::SpinDeadlock {
                spinning,
                spinners,
                global,
                at_barrier,
                at_warp_op,
            } => {
                let list: Vec<String> = spinning.iter().map(ToString::to_string).collect();
                let more = if *spinners as usize > spinning.len() {
                    ", …"
                } else {
                    ""
                };
                write!(
                    f,
                    "spin deadlock: {spinners} threads ({}{more}) poll an atomic in {} memory, \
                     each seeing the same value {} times in a row, while no thread of the block \
                     changes memory ({at_barrier} wait at a block barrier, {at_warp_op} in a \
                     warp collective, the rest exited){}; nothing will ever release them",
                    list.join(", "),
                    if *global { "global" } else { "shared" },
                    fiber::SPIN_BOUND,
                    if *global {
                        ", and no other running block changes it either (blocks may wait \
                         only for blocks that can run at the same time: the emulator runs \
                         one per core, a GPU gives no guarantee)"
                    } else {
                        ""
                    }
                )
            }
            Fault::CpAsyncPending {
                offset,
                issuer,
                this_writes,
            } => write!(
                f,
                "this thread {} shared memory at byte {offset}, the destination of a \
                 cp.async that thread {issuer} issued and has not waited for: the bytes have \
                 not landed; call cp_async_wait_all() (or cp_async_wait_group) in the issuing \
                 thread before the access, and sync_threads() after it before other threads \
                 read them",
                if *this_writes { "writes" } else { "reads" }
            ),
        }
    }
}

impl std::error::Error for EmuError {}
