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
//! ([`crate::warp`]). There it suspends and hands the scheduler a request.
//! When every fiber has stopped, the scheduler completes what can be completed
//! (a warp exchange once every lane of its mask has asked, a barrier once every
//! thread of the block has arrived) and resumes those fibers with their results.
//!
//! Fibers rather than OS threads because CUDA blocks meet at barriers often:
//! a fiber switch costs tens of nanoseconds, an OS-thread handoff microseconds,
//! and cooperative scheduling makes every run of a launch deterministic.
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
//! - the block cannot make progress for any other reason (`Fault::Deadlock`).
//!
//! - two threads of a block touch the same shared-memory byte, at least one
//!   writing, with no barrier between (`Fault::SharedRace`; on by default,
//!   `WARPFORGE_EMU_RACECHECK=0` turns it off — see the `race` module).
//!
//! Shared memory starts filled with `0xFF` bytes (a NaN for every float type),
//! so a kernel that reads shared memory it never wrote gets NaN, not a
//! plausible zero.
//!
//! # Speed
//!
//! It is a correctness tool, not a fast path: small shapes, many cases. Its
//! cost scales with thread-barriers (one emulated thread passing one
//! barrier). Measured by `cargo bench -p warpforge --bench emulator` (16
//! blocks × 256 threads × 64 barriers, optimised build, 2 cores of the CI
//! machine): 14.7 million thread-barriers per second with barriers only, and
//! 8.7 million when each interval also writes and reads shared memory under
//! the race detector. Warp collectives cost about the same as a barrier.

pub(crate) mod fiber;
mod memory;
mod race;
mod scheduler;
pub mod stream;
mod tensor;

use crate::thread::Dim3;
use core::fmt;

pub use memory::{ALLOCATION_ALIGN, DeviceMemory};
pub use scheduler::launch;

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
    /// No thread of the block can make progress.
    Deadlock {
        /// Threads waiting at a block barrier.
        at_barrier: u32,
        /// Threads waiting in a warp collective.
        at_warp_op: u32,
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
            Fault::Deadlock {
                at_barrier,
                at_warp_op,
            } => write!(
                f,
                "deadlock: {at_barrier} threads wait at a block barrier and {at_warp_op} in \
                 a warp collective, and none can proceed"
            ),
        }
    }
}

impl std::error::Error for EmuError {}
