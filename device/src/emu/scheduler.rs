//! Runs a grid: blocks in parallel on OS threads, a block's threads as fibers.

use super::fiber::{self, BlockState, FiberYielder, Poll, Request, Spin, ThreadState, WarpOp};
use super::profile::{BlockProfile, Counts, MemoryProfile};
use super::race::{GlobalShadow, RaceDetector, UninitRead};
use super::{Detected, EmuError, Fault, LaunchShape, MbarrierWait, OutputBuffer, SourceLocation};
use crate::arch::{MatchMode, ReduxOp, ShuffleMode, VoteMode};
use crate::thread::{Dim3, WARP_SIZE};
use core::cell::{Cell, RefCell};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Stack size of one emulated thread. Kernels are shallow; this leaves room for
/// the panic machinery and unoptimised test builds.
const FIBER_STACK_BYTES: usize = 256 * 1024;

/// Fiber stacks are mmapped; keeping them for the next block saves a syscall pair.
static STACK_POOL: Mutex<Vec<DefaultStack>> = Mutex::new(Vec::new());
const STACK_POOL_MAX: usize = 4096;

fn take_stack() -> DefaultStack {
    let pooled = STACK_POOL.lock().unwrap_or_else(|e| e.into_inner()).pop();
    pooled.unwrap_or_else(|| {
        DefaultStack::new(FIBER_STACK_BYTES).expect("cannot allocate an emulator fiber stack")
    })
}

fn return_stack(stack: DefaultStack) {
    let mut pool = STACK_POOL.lock().unwrap_or_else(|e| e.into_inner());
    if pool.len() < STACK_POOL_MAX {
        pool.push(stack);
    }
}

/// Runs `body` once per thread of the grid described by `shape`, with CUDA semantics.
///
/// `body` is the kernel with its arguments bound; it reads its indices through
/// [`crate::thread`]. Returns the first fault found (lowest block first).
///
/// ```
/// use warpforge_device::emu::{launch, LaunchShape};
/// use warpforge_device::{thread, Dim3};
/// use std::sync::atomic::{AtomicU32, Ordering};
///
/// let count = AtomicU32::new(0);
/// let shape = LaunchShape { grid: Dim3::x(4), block: Dim3::x(64), dynamic_shared_bytes: 0 };
/// launch("count", shape, &|| {
///     warpforge_device::sync::sync_threads();
///     count.fetch_add(thread::global_index_x() as u32, Ordering::Relaxed);
/// }).unwrap();
/// assert_eq!(count.into_inner(), (0..256).sum());
/// ```
///
/// Global memory is not race-checked here; [`launch_with_outputs`] checks it.
pub fn launch(
    kernel: &str,
    shape: LaunchShape,
    body: &(dyn Fn() + Sync),
) -> Result<(), Box<EmuError>> {
    launch_with_outputs(kernel, shape, &[], body)
}

/// As [`launch`], for a kernel whose output buffers are `outputs`: the race
/// detector (unless `WARPFORGE_EMU_RACECHECK=0`) also checks every access to
/// their elements, and names a buffer by its parameter name.
pub fn launch_with_outputs(
    kernel: &str,
    shape: LaunchShape,
    outputs: &[OutputBuffer],
    body: &(dyn Fn() + Sync),
) -> Result<(), Box<EmuError>> {
    run_launch(kernel, shape, outputs, body, None)
}

/// As [`launch_with_outputs`], and returns the launch's memory-traffic
/// profile (see [`super::profile`]): every global and shared access made
/// through the device API, counted per warp-level request as the GPU serves it.
///
/// ```
/// use warpforge_device::emu::{launch_profiled, LaunchShape};
/// use warpforge_device::{shared, Dim3};
///
/// let shape = LaunchShape { grid: Dim3::x(1), block: Dim3::x(32), dynamic_shared_bytes: 32 * 4 };
/// let profile = launch_profiled("store", shape, &[], &|| {
///     let tile = shared::array::<f32, 32>();
///     tile.store(warpforge_device::thread::lane_id() as usize, 1.0);
/// }).unwrap();
/// assert_eq!(profile.shared_store.requests, 1);
/// assert_eq!(profile.shared_store.bank_conflicts, 0);
/// ```
pub fn launch_profiled(
    kernel: &str,
    shape: LaunchShape,
    outputs: &[OutputBuffer],
    body: &(dyn Fn() + Sync),
) -> Result<MemoryProfile, Box<EmuError>> {
    let counts = Mutex::new(Counts::default());
    run_launch(kernel, shape, outputs, body, Some(&counts))?;
    let counts = counts.into_inner().unwrap_or_else(|e| e.into_inner());
    let output_elements = outputs.iter().map(|o| o.len as u64).sum();
    Ok(counts.finish(kernel, shape.grid, shape.block, output_elements))
}

/// Runs a launch; with `profile`, each block adds its memory-traffic counts to it.
fn run_launch(
    kernel: &str,
    shape: LaunchShape,
    outputs: &[OutputBuffer],
    body: &(dyn Fn() + Sync),
    profile: Option<&Mutex<Counts>>,
) -> Result<(), Box<EmuError>> {
    let blocks = shape.grid.volume();
    if blocks == 0 || shape.block.volume() == 0 {
        return Ok(());
    }
    install_panic_hook();
    // Block indices are recorded as u32 (below the detector's two markers).
    let global = (race_check_enabled() && !outputs.is_empty() && blocks < u64::from(u32::MAX - 1))
        .then(|| Arc::new(GlobalShadow::new(outputs)));
    let next_block = AtomicU64::new(0);
    let first_error: Mutex<Option<(u64, Box<EmuError>)>> = Mutex::new(None);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(usize::try_from(blocks).unwrap_or(usize::MAX));
    let launch = LaunchState {
        live_workers: AtomicUsize::new(workers.max(1)),
        stalled_workers: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        profile,
    };
    let failed = &launch.failed;

    let work = || {
        /// A worker is live until it returns, however it returns.
        struct Live<'a>(&'a AtomicUsize);
        impl Drop for Live<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let _live = Live(&launch.live_workers);
        loop {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            let linear = next_block.fetch_add(1, Ordering::Relaxed);
            if linear >= blocks {
                return;
            }
            let block_idx = shape.grid.unflatten(linear);
            let ran = run_block(
                kernel,
                shape,
                block_idx,
                linear,
                global.clone(),
                &launch,
                body,
            );
            if let Err(fault) = ran {
                failed.store(true, Ordering::SeqCst);
                let mut slot = first_error.lock().unwrap_or_else(|e| e.into_inner());
                if slot.as_ref().is_none_or(|(b, _)| linear < *b) {
                    *slot = Some((linear, fault));
                }
                return;
            }
        }
    };
    if workers <= 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(work);
            }
        });
    }
    match first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some((_, error)) => Err(error),
        None => Ok(()),
    }
}

/// What the blocks of a launch share: the spin rule's counts on global
/// memory, and the memory-traffic counts if the launch is profiled.
struct LaunchState<'p> {
    /// Workers (OS threads) that have not returned: running a block, or about
    /// to take the next one.
    live_workers: AtomicUsize,
    /// Workers whose block is stuck spinning on global memory.
    stalled_workers: AtomicUsize,
    /// Some block faulted; no new block starts.
    failed: AtomicBool,
    /// Where each block adds its memory-traffic counts (profiled launches only).
    profile: Option<&'p Mutex<Counts>>,
}

/// This block's mark in [`LaunchState::stalled_workers`], removed when the
/// block moves again or ends.
struct StallMark<'a> {
    launch: &'a LaunchState<'a>,
    marked: bool,
    /// Consecutive stuck rounds in which every live worker was stalled.
    confirmed: u32,
}

impl StallMark<'_> {
    fn clear(&mut self) {
        if self.marked {
            self.launch.stalled_workers.fetch_sub(1, Ordering::SeqCst);
            self.marked = false;
        }
        self.confirmed = 0;
    }

    /// Another stuck round of this block: whether every live worker has been
    /// stalled for two of them in a row (each spinner polled again between,
    /// so a change made before another block stalled would have been seen).
    fn all_stalled(&mut self) -> bool {
        if !self.marked {
            self.launch.stalled_workers.fetch_add(1, Ordering::SeqCst);
            self.marked = true;
        }
        let stalled = self.launch.stalled_workers.load(Ordering::SeqCst);
        if stalled >= self.launch.live_workers.load(Ordering::SeqCst) {
            self.confirmed += 1;
        } else {
            self.confirmed = 0;
        }
        self.confirmed >= 2
    }
}

impl Drop for StallMark<'_> {
    fn drop(&mut self) {
        self.clear();
    }
}

enum State {
    /// Ready to run; resumed with this value.
    Runnable(u32),
    /// Let the others run (seeded interleaving, or a spin); runnable in the next round.
    Yielded(Spin),
    /// Suspended at a barrier or warp collective.
    Waiting(Request),
    /// Returned from the kernel.
    Exited,
}

type ThreadFiber = Coroutine<u32, Request, (), DefaultStack>;

pub(super) struct EmulatedThread {
    // Boxed so that its address, which the fiber reads through CURRENT, never moves.
    pub(super) state: Box<ThreadState>,
    fiber: Option<ThreadFiber>,
    status: State,
}

fn run_block(
    kernel: &str,
    shape: LaunchShape,
    block_idx: Dim3,
    linear_block: u64,
    global: Option<Arc<GlobalShadow>>,
    launch: &LaunchState<'_>,
    body: &(dyn Fn() + Sync),
) -> Result<(), Box<EmuError>> {
    // Outlives the fibers (declared first, dropped last), and never moves.
    let block_state = BlockState::new(linear_block);
    let block_ptr: *const BlockState = &block_state;
    let nthreads = u32::try_from(shape.block.volume()).expect("block size checked by the host");
    // Outlives the fibers too (declared before them, dropped after).
    let block_profile = launch.profile.map(|_| BlockProfile::new(nthreads));
    let profile_ptr: *const BlockProfile = block_profile.as_ref().map_or(core::ptr::null(), |p| p);
    // 0xFF bytes: NaN in every float type, so reads of never-written shared memory stand out.
    let mut shared = vec![u128::MAX; shape.dynamic_shared_bytes.div_ceil(16)];
    let shared_base = shared.as_mut_ptr().cast::<u8>();
    let race = race_check_enabled().then(|| {
        // Fits: `global` is None when the grid has too many blocks for u32.
        let block = u32::try_from(linear_block).unwrap_or(u32::MAX);
        let threads = usize::try_from(shape.block.volume()).unwrap_or(usize::MAX);
        RaceDetector::new(shape.dynamic_shared_bytes, threads, block, global)
    });
    let race_ptr: *const RaceDetector = race.as_ref().map_or(core::ptr::null(), |r| r);

    let mut threads: Vec<EmulatedThread> = (0..nthreads)
        .map(|linear_id| {
            let state = Box::new(ThreadState {
                thread_idx: shape.block.unflatten(u64::from(linear_id)),
                block_idx,
                block_dim: shape.block,
                grid_dim: shape.grid,
                linear_id,
                shared_base,
                shared_len: shape.dynamic_shared_bytes,
                race: race_ptr,
                profile: profile_ptr,
                collective_in: Cell::new([0; 10]),
                collective_out: Cell::new([0; 4]),
                f64_in: Cell::new([0.0; 16]),
                f64_out: Cell::new([0.0; 4]),
                yielder: Cell::new(core::ptr::null()),
                block: block_ptr,
                cp_groups: Cell::new(0),
                wgmma_groups: Cell::new(0),
                bulk_groups: Cell::new(0),
                wgmma_reads: RefCell::new(Vec::new()),
                poll: Cell::new(Poll::default()),
                site: Cell::new(None),
            });
            let state_ptr: *const ThreadState = &*state;
            let start = move |yielder: &FiberYielder, _first: u32| {
                // SAFETY: the ThreadState box outlives the fiber (both are fields of
                // EmulatedThread, and the fiber is dropped first, see below).
                unsafe { &*state_ptr }.yielder.set(yielder);
                body();
            };
            // SAFETY: `start` borrows `body` and the boxed ThreadState. Both outlive
            // every fiber: fibers are run to completion or dropped (force-unwound)
            // before this function returns, and before `threads` frees the states.
            let fiber = unsafe { Coroutine::with_stack_unchecked(take_stack(), start) };
            EmulatedThread {
                state,
                fiber: Some(fiber),
                status: State::Runnable(0),
            }
        })
        .collect();

    let result = schedule(
        kernel,
        &mut threads,
        race.as_ref(),
        block_profile.as_ref(),
        &block_state,
        launch,
    );
    fiber::set_current(core::ptr::null());
    for t in &mut threads {
        if let Some(f) = t.fiber.take() {
            if f.done() {
                return_stack(f.into_stack());
            } else {
                // Dropping an unfinished fiber unwinds its stack; the stack itself is freed.
                fiber::set_current(&*t.state);
                drop(f);
                fiber::set_current(core::ptr::null());
            }
        }
    }
    drop(race);
    drop(shared);
    drop(block_state);
    if let (Ok(()), Some(block), Some(counts)) = (&result, block_profile, launch.profile) {
        let block_counts = block.finish();
        counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .merge(block_counts);
    }
    result
}

/// Whether the race detector (shared and global memory) runs: yes unless the environment
/// sets `WARPFORGE_EMU_RACECHECK=0` (read once per process).
fn race_check_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("WARPFORGE_EMU_RACECHECK").map_or(true, |v| v != "0"))
}

fn schedule(
    kernel: &str,
    threads: &mut [EmulatedThread],
    race: Option<&RaceDetector>,
    profile: Option<&BlockProfile>,
    block: &BlockState,
    launch: &LaunchState<'_>,
) -> Result<(), Box<EmuError>> {
    let error = |t: &EmulatedThread, fault: Fault| {
        Box::new(EmuError {
            kernel: kernel.to_owned(),
            block: t.state.block_idx,
            thread: t.state.thread_idx,
            fault,
        })
    };
    let mut stall = StallMark {
        launch,
        marked: false,
        confirmed: 0,
    };
    loop {
        let progress_before = block.progress.get();
        // Some fiber yielded; all that yielded are stuck spinners; some of those poll global memory.
        let (mut yielded, mut stuck, mut on_global) = (false, true, false);
        // Run every runnable fiber until it waits, yields or exits.
        for t in threads.iter_mut() {
            let State::Runnable(input) = t.status else {
                continue;
            };
            let fiber = t.fiber.as_mut().expect("a runnable thread has a fiber");
            fiber::set_current(&*t.state);
            let step = catch_unwind(AssertUnwindSafe(|| fiber.resume(input)));
            fiber::set_current(core::ptr::null());
            t.status = match step {
                Ok(CoroutineResult::Yield(Request::Yield { spin })) => {
                    yielded = true;
                    match spin {
                        Spin::No => stuck = false,
                        Spin::Global => on_global = true,
                        Spin::Shared => {}
                    }
                    State::Yielded(spin)
                }
                Ok(CoroutineResult::Yield(request)) => State::Waiting(request),
                Ok(CoroutineResult::Return(())) => {
                    // Copies still in flight land (the GPU completes them too).
                    crate::arch::land_copies(&t.state, u32::MAX);
                    // A TMA store still reading shared memory is not.
                    if let Some(fault) = crate::arch::stores_not_waited(&t.state) {
                        return Err(error(t, fault));
                    }
                    State::Exited
                }
                Err(payload) => {
                    // A detector unwinds with its fault (printing nothing);
                    // anything else is the kernel's own panic, whose location
                    // the panic hook kept.
                    let at = KERNEL_PANIC_AT.take();
                    let fault = match payload.downcast::<Detected>() {
                        Ok(detected) => detected.0,
                        Err(payload) => Fault::Panic {
                            message: panic_message(payload.as_ref()),
                            at,
                        },
                    };
                    return Err(error(t, fault));
                }
            };
        }

        if yielded {
            if stuck && block.progress.get() == progress_before {
                // Every thread that ran only polled, and nothing changed: unless a
                // warp collective of the others completes, nothing here will change.
                let mut progressed = false;
                for warp in threads.chunks_mut(WARP_SIZE as usize) {
                    progressed |= complete_warp_collective(warp)
                        .map_err(|(lane, fault)| error(&warp[lane], fault))?;
                }
                if progressed {
                    stall.clear();
                } else if let Some((t, fault)) = register_starved(threads) {
                    return Err(error(t, fault));
                } else if !on_global || stall.all_stalled() {
                    return Err(spin_error(kernel, threads, on_global));
                } else if launch.failed.load(Ordering::SeqCst) {
                    // Another block faulted, which is the launch's error; this
                    // block waits for what will never come. Abandon it.
                    return Ok(());
                }
            } else {
                stall.clear();
            }
            for t in threads.iter_mut() {
                if let State::Yielded(_) = t.status {
                    t.status = State::Runnable(0);
                }
            }
            continue;
        }
        stall.clear();

        let mut progressed = false;
        for warp in threads.chunks_mut(WARP_SIZE as usize) {
            progressed |= complete_warp_collective(warp)
                .map_err(|(lane, fault)| error(&warp[lane], fault))?;
        }
        if progressed {
            continue;
        }

        let (mut at_barrier, mut at_warp_op, mut exited) = (0u32, 0u32, 0u32);
        for t in threads.iter() {
            match t.status {
                State::Waiting(Request::SyncThreads { .. }) => at_barrier += 1,
                State::Waiting(_) => at_warp_op += 1,
                State::Exited => exited += 1,
                State::Runnable(_) | State::Yielded(_) => {
                    unreachable!("all runnable fibers were run, and none yielded")
                }
            }
        }
        if exited == threads.len() as u32 {
            if let Some((warp, issued, behind, behind_issued, site)) =
                super::wgmma::unmatched(block)
            {
                let t = &threads[(warp * WARP_SIZE) as usize];
                return Err(error(
                    t,
                    Fault::Wgmma {
                        problem: super::WgmmaProblem::Unmatched {
                            issued,
                            behind,
                            behind_issued,
                        },
                        at: site.into(),
                        other_at: None,
                    },
                ));
            }
            return match race.and_then(RaceDetector::finish) {
                Some(read) => Err(uninit_error(kernel, threads, read)),
                None => Ok(()),
            };
        }
        if at_barrier == threads.len() as u32 {
            // bar.red.popc: every thread gets the number of true predicates.
            let count = threads
                .iter()
                .filter(|t| {
                    matches!(
                        t.status,
                        State::Waiting(Request::SyncThreads { predicate: true })
                    )
                })
                .count() as u32;
            for t in threads.iter_mut() {
                t.status = State::Runnable(count);
            }
            // No request spans a barrier: count those of the interval it ends.
            if let Some(p) = profile {
                p.flush();
            }
            if let Some(read) = race.and_then(RaceDetector::barrier) {
                return Err(uninit_error(kernel, threads, read));
            }
            continue;
        }
        if at_barrier > 0 && at_warp_op == 0 {
            let first_exited = threads
                .iter()
                .find(|t| matches!(t.status, State::Exited))
                .expect("some thread exited");
            // Each barrier call site with its threads, in the order of their first thread.
            let mut waiting_at: Vec<(SourceLocation, u32)> = Vec::new();
            for t in threads.iter() {
                let State::Waiting(Request::SyncThreads { .. }) = t.status else {
                    continue;
                };
                let Some(site) = t.state.site.get().map(SourceLocation::from) else {
                    continue;
                };
                match waiting_at.iter_mut().find(|(l, _)| *l == site) {
                    Some((_, n)) => *n += 1,
                    None => waiting_at.push((site, 1)),
                }
            }
            return Err(error(
                first_exited,
                Fault::DivergentBarrier {
                    waiting: at_barrier,
                    exited,
                    waiting_at,
                    exited_after: site_of(first_exited),
                },
            ));
        }
        if let Some((t, fault)) = register_starved(threads) {
            return Err(error(t, fault));
        }
        // Some warp collective waits for a lane that will never come.
        for warp in threads.chunks(WARP_SIZE as usize) {
            if let Some((lane, fault)) = diagnose_stuck_warp(warp) {
                return Err(error(&warp[lane], fault));
            }
        }
        let first_waiting = threads
            .iter()
            .find(|t| matches!(t.status, State::Waiting(_)))
            .expect("some thread waits");
        return Err(error(
            first_waiting,
            Fault::Deadlock {
                at_barrier,
                at_warp_op,
                at: site_of(first_waiting),
            },
        ));
    }
}

/// The fault for a block whose running threads are all stuck spinning.
fn spin_error(kernel: &str, threads: &[EmulatedThread], global: bool) -> Box<EmuError> {
    let spinners: Vec<&EmulatedThread> = threads
        .iter()
        .filter(|t| matches!(t.status, State::Yielded(Spin::Shared | Spin::Global)))
        .collect();
    let count = |f: fn(&Request) -> bool| {
        threads
            .iter()
            .filter(|t| matches!(&t.status, State::Waiting(r) if f(r)))
            .count() as u32
    };
    // The thread the report is about: one whose mbarrier phase has all its
    // arrivals and waits only for bytes, if any (the bytes nobody will
    // deliver are the cause; the other waiters wait on threads that wait),
    // else the first.
    let first = spinners
        .iter()
        .find(|t| mbarrier_wait(&t.state).is_some_and(|w| w.pending == 0))
        .or(spinners.first())
        .expect("a stuck round has a spinner");
    Box::new(EmuError {
        kernel: kernel.to_owned(),
        block: first.state.block_idx,
        thread: first.state.thread_idx,
        fault: Fault::SpinDeadlock {
            spinning: spinners
                .iter()
                .take(8)
                .map(|t| t.state.thread_idx)
                .collect(),
            spinners: spinners.len() as u32,
            global,
            at_barrier: count(|r| !r.is_warp()),
            at_warp_op: count(Request::is_warp),
            at: site_of(first),
            mbarrier: mbarrier_wait(&first.state),
        },
    })
}

/// The mbarrier wait `t` polls, if it polls one (its poll's address is a
/// live barrier of its block, the value the phase it waits for).
fn mbarrier_wait(t: &ThreadState) -> Option<MbarrierWait> {
    let poll = t.poll.get();
    let offset = poll.addr.wrapping_sub(t.shared_base as usize);
    let (phase, pending, tx) = t.block().mbarriers.borrow().state(offset)?;
    Some(MbarrierWait {
        offset,
        waited: poll.value as u32,
        phase,
        pending,
        tx,
    })
}

/// Where `t` last called the device API.
fn site_of(t: &EmulatedThread) -> Option<SourceLocation> {
    t.state.site.get().map(SourceLocation::from)
}

/// The fault for a read of never-written shared memory, naming the reading thread.
fn uninit_error(kernel: &str, threads: &[EmulatedThread], read: UninitRead) -> Box<EmuError> {
    let t = &threads[read.thread as usize];
    Box::new(EmuError {
        kernel: kernel.to_owned(),
        block: t.state.block_idx,
        thread: t.state.thread_idx,
        fault: Fault::UninitSharedRead {
            offset: read.offset,
            at: read.site.into(),
        },
    })
}

/// A warp of the block whose 32 lanes wait in a `setmaxnreg.inc` that the
/// block's register pool cannot serve, with its fault (its first lane is
/// the thread named). Called when nothing in the block can change: no warp
/// will release registers, so the wait is for ever.
fn register_starved(threads: &[EmulatedThread]) -> Option<(&EmulatedThread, Fault)> {
    threads.chunks(WARP_SIZE as usize).find_map(|warp| {
        let (_, request) = pending_collective(warp)?;
        let Request::Warp {
            op:
                WarpOp::SetMaxNreg {
                    increase: true,
                    regs,
                },
            ..
        } = request
        else {
            return None;
        };
        let all_there = warp.len() == WARP_SIZE as usize
            && warp
                .iter()
                .all(|t| matches!(t.status, State::Waiting(r) if r == request));
        all_there.then(|| (&warp[0], super::wgmma::starved(warp, u32::from(regs))))
    })
}

/// The first lane of `warp` waiting in a warp collective, and its request.
fn pending_collective(warp: &[EmulatedThread]) -> Option<(usize, Request)> {
    warp.iter().enumerate().find_map(|(i, t)| match t.status {
        State::Waiting(r) if r.is_warp() => Some((i, r)),
        _ => None,
    })
}

/// Completes a warp collective of `warp` if every lane of its mask has joined.
/// Returns whether it did; an error names the lane (index into `warp`) at fault.
///
/// Called only when no fiber of the block can run, so every lane that will
/// join without help from another has joined.
fn complete_warp_collective(warp: &mut [EmulatedThread]) -> Result<bool, (usize, Fault)> {
    let Some((leader, request)) = pending_collective(warp) else {
        return Ok(false);
    };
    let Request::Warp { op, mask, .. } = request else {
        // activemask: the lanes that reached it together are those waiting at the same call now.
        let active = lanes_where(warp, |r| r == request);
        resume(warp, active, |_| active);
        return Ok(true);
    };
    let mut value = [0u64; WARP_SIZE as usize];
    let mut arg = [0u32; WARP_SIZE as usize];
    let leader_at = site_of(&warp[leader]);
    for lane in 0..WARP_SIZE as usize {
        if mask & (1 << lane) == 0 {
            continue;
        }
        let missing = |reason, missing_at| Fault::WarpMask {
            mask,
            missing_lane: lane as u32,
            reason,
            at: leader_at,
            missing_at,
        };
        let Some(t) = warp.get(lane) else {
            return Err((
                leader,
                missing("does not exist (the block ends before it)", None),
            ));
        };
        match t.status {
            State::Waiting(Request::Warp {
                op: o,
                mask: m,
                value: v,
                arg: a,
            }) if o == op && m == mask => (value[lane], arg[lane]) = (v, a),
            State::Waiting(r) if r.is_warp() => {
                return Err((
                    leader,
                    missing(
                        "is in a different warp collective (other kind, mode or mask)",
                        site_of(t),
                    ),
                ));
            }
            // Not there yet (still running, or at a barrier); decided when nothing else can run.
            _ => return Ok(false),
        }
    }
    if let WarpOp::Ldmatrix { .. }
    | WarpOp::Mma(_)
    | WarpOp::MmaF64(_)
    | WarpOp::Wgmma
    | WarpOp::WgmmaWait(_)
    | WarpOp::SetMaxNreg { .. } = op
    {
        if mask != u32::MAX {
            return Err((
                leader,
                Fault::WarpMask {
                    mask,
                    missing_lane: mask.trailing_ones(),
                    reason: "is missing: ldmatrix, mma, wgmma and setmaxnreg need all 32 lanes",
                    at: leader_at,
                    missing_at: warp.get(mask.trailing_ones() as usize).and_then(site_of),
                },
            ));
        }
        match op {
            WarpOp::Wgmma => super::wgmma::issue(warp, &value)?,
            WarpOp::WgmmaWait(pending) => super::wgmma::wait(warp, u32::from(pending))?,
            WarpOp::SetMaxNreg { increase, regs } => {
                if !super::wgmma::setmaxnreg(warp, increase, u32::from(regs))? {
                    // An `.inc` waiting for registers: decided when nothing else can run.
                    return Ok(false);
                }
            }
            _ => {
                if let WarpOp::Ldmatrix { matrices, .. } = op {
                    profile_ldmatrix(warp, usize::from(matrices), &value);
                }
                super::tensor::complete(warp, op, &value);
            }
        }
        resume(warp, mask, |_| 0);
        return Ok(true);
    }
    let lanes = || (0..WARP_SIZE).filter(move |l| mask & (1 << l) != 0);
    if op == WarpOp::Sync {
        // Every lane releases into one clock, then every lane acquires it:
        // each lane's accesses before the sync are ordered before every
        // lane's after it.
        // SAFETY: the detector lives as long as the block (see `run_block`).
        if let Some(detector) = unsafe { warp[0].state.race.as_ref() } {
            let mut clock = Vec::new();
            for lane in lanes() {
                detector.release(warp[lane as usize].state.linear_id, &mut clock);
            }
            for lane in lanes() {
                detector.acquire(warp[lane as usize].state.linear_id, &clock);
            }
        }
        // The lanes are in step here: the profile's requests restart their
        // count (`profile`'s module docs).
        // SAFETY: the profiler lives as long as the block (see `run_block`).
        if let Some(profile) = unsafe { warp[0].state.profile.as_ref() } {
            for lane in lanes() {
                profile.record_warp_sync(warp[lane as usize].state.linear_id);
            }
        }
    }
    let elected = (op == WarpOp::Elect).then(|| warp[0].state.block().pick_lane(mask));
    let mut results = [0u32; WARP_SIZE as usize];
    for lane in lanes() {
        let l = lane as usize;
        results[l] = match op {
            WarpOp::Shuffle(mode) => {
                let src = shuffle_source(mode, lane, arg[l], mode.clamp_segmask());
                if mask & (1 << src) == 0 {
                    // The PTX ISA leaves the value read from a lane outside the mask undefined.
                    return Err((
                        l,
                        Fault::WarpMask {
                            mask,
                            missing_lane: src,
                            reason: "is read by a shuffle but is not in the mask",
                            at: site_of(&warp[l]),
                            missing_at: warp.get(src as usize).and_then(site_of),
                        },
                    ));
                }
                value[src as usize] as u32
            }
            WarpOp::Vote(mode) => {
                let ballot = lanes()
                    .filter(|&k| value[k as usize] != 0)
                    .fold(0, |b, k| b | 1 << k);
                match mode {
                    VoteMode::Ballot => ballot,
                    VoteMode::All => u32::from(ballot == mask),
                    VoteMode::Any => u32::from(ballot != 0),
                }
            }
            WarpOp::Match(mode) => {
                let same = lanes()
                    .filter(|&k| value[k as usize] == value[l])
                    .fold(0, |b, k| b | 1 << k);
                match mode {
                    MatchMode::Any => same,
                    MatchMode::All if same == mask => mask,
                    MatchMode::All => 0,
                }
            }
            WarpOp::Redux(rop) => lanes()
                .map(|k| value[k as usize] as u32)
                .reduce(|a, b| redux(rop, a, b))
                .unwrap_or(0),
            WarpOp::Elect => elected.unwrap_or(0),
            WarpOp::Sync => 0,
            WarpOp::Ldmatrix { .. }
            | WarpOp::Mma(_)
            | WarpOp::MmaF64(_)
            | WarpOp::Wgmma
            | WarpOp::WgmmaWait(_)
            | WarpOp::SetMaxNreg { .. } => unreachable!("completed above"),
        };
    }
    resume(warp, mask, |l| results[l]);
    Ok(true)
}

/// Counts an `ldmatrix` of `warp`, whose lanes brought row addresses
/// `rows`, in the block's memory profile (if the launch is profiled).
fn profile_ldmatrix(warp: &[EmulatedThread], matrices: usize, rows: &[u64; WARP_SIZE as usize]) {
    let state = &warp[0].state;
    // SAFETY: the profiler outlives the block's fibers (see `run_block`).
    let (Some(profile), Some(site)) = (unsafe { state.profile.as_ref() }, state.site.get()) else {
        return;
    };
    let base = state.shared_base as usize;
    let offsets: Vec<usize> = rows
        .iter()
        .map(|&r| (r as usize).wrapping_sub(base))
        .collect();
    profile.record_ldmatrix(site, matrices, &offsets);
}

/// The lanes of `warp` (as a bit set) waiting with a request that satisfies `f`.
fn lanes_where(warp: &[EmulatedThread], f: impl Fn(Request) -> bool) -> u32 {
    warp.iter()
        .enumerate()
        .filter(|(_, t)| matches!(t.status, State::Waiting(r) if f(r)))
        .fold(0, |m, (l, _)| m | 1 << l)
}

/// Makes the lanes of `lanes` runnable, lane `l` resumed with `result(l)`.
fn resume(warp: &mut [EmulatedThread], lanes: u32, result: impl Fn(usize) -> u32) {
    for (l, t) in warp.iter_mut().enumerate() {
        if lanes & (1 << l) != 0 {
            t.status = State::Runnable(result(l));
        }
    }
}

/// One step of `redux.sync`: combines two lanes' values.
fn redux(op: ReduxOp, a: u32, b: u32) -> u32 {
    match op {
        ReduxOp::Add => a.wrapping_add(b),
        ReduxOp::MinU32 => a.min(b),
        ReduxOp::MaxU32 => a.max(b),
        ReduxOp::MinI32 => (a as i32).min(b as i32) as u32,
        ReduxOp::MaxI32 => (a as i32).max(b as i32) as u32,
        ReduxOp::And => a & b,
        ReduxOp::Or => a | b,
        ReduxOp::Xor => a ^ b,
    }
}

/// The lane that lane `lane` reads in a `shfl.sync` with operands `b` (lane
/// or offset) and `c` (clamp and segment mask): the PTX ISA's pseudo-code for
/// `shfl.sync`, step by step. Only `b[4:0]`, `c[4:0]` and `c[12:8]` are read.
/// A source out of range (`pval` false) is the lane itself.
fn shuffle_source(mode: ShuffleMode, lane: u32, b: u32, c: u32) -> u32 {
    let bval = b & 0x1f;
    let cval = c & 0x1f;
    let segmask = (c >> 8) & 0x1f;
    let max_lane = (lane & segmask) | (cval & !segmask);
    let min_lane = lane & segmask;
    // `up` can go below lane 0: signed arithmetic, as in the pseudo-code.
    let (j, pval) = match mode {
        ShuffleMode::Up => {
            let j = i64::from(lane) - i64::from(bval);
            (j, j >= i64::from(max_lane))
        }
        ShuffleMode::Down => {
            let j = i64::from(lane + bval);
            (j, j <= i64::from(max_lane))
        }
        ShuffleMode::Xor => {
            let j = lane ^ bval;
            (i64::from(j), j <= max_lane)
        }
        ShuffleMode::Idx => {
            let j = min_lane | (bval & !segmask);
            (i64::from(j), j <= max_lane)
        }
    };
    if pval {
        u32::try_from(j).expect("an in-range source is a lane")
    } else {
        lane
    }
}

/// For a warp whose collective cannot complete: the first lane of its mask that is absent.
fn diagnose_stuck_warp(warp: &[EmulatedThread]) -> Option<(usize, Fault)> {
    let (leader, request) = pending_collective(warp)?;
    let Request::Warp { mask, .. } = request else {
        return None;
    };
    (0..warp.len())
        .filter(|l| mask & (1 << l) != 0)
        .find_map(|lane| {
            let reason = match warp[lane].status {
                State::Exited => "exited without joining",
                State::Waiting(Request::SyncThreads { .. }) => "waits at a block barrier instead",
                _ => return None,
            };
            Some((
                leader,
                Fault::WarpMask {
                    mask,
                    missing_lane: lane as u32,
                    reason,
                    at: site_of(&warp[leader]),
                    missing_at: site_of(&warp[lane]),
                },
            ))
        })
}

thread_local! {
    /// Where the kernel running on this OS thread last panicked (set by the
    /// panic hook, taken by the scheduler when it catches the panic).
    static KERNEL_PANIC_AT: Cell<Option<SourceLocation>> = const { Cell::new(None) };
}

/// Installs, once per process, a panic hook that keeps a kernel's panic to
/// itself: a panic in an emulated thread (a fiber) prints nothing, and its
/// location is kept for the launch's `Fault::Panic`, which reports it once.
/// Every other panic goes to the hook that was installed before (the
/// default one prints it as usual). A hook installed after this one
/// replaces it: kernel panics are then printed by that hook and reported
/// without a location.
fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    if std::thread::panicking() {
        // The hook cannot be changed while this thread panics; the next launch installs it.
        return;
    }
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if fiber::in_kernel() {
                let at = info.location().map(|l| SourceLocation {
                    file: intern(l.file()),
                    line: l.line(),
                    column: l.column(),
                });
                KERNEL_PANIC_AT.set(at);
            } else {
                previous(info);
            }
        }));
    });
}

/// `file` as a `&'static str`: a panic's location borrows its file name,
/// and a kernel's files are few, so each is leaked once and reused.
fn intern(file: &str) -> &'static str {
    static FILES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut files = FILES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(f) = files.iter().find(|f| **f == file) {
        return f;
    }
    let leaked: &'static str = Box::leak(file.to_owned().into_boxed_str());
    files.push(leaked);
    leaked
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::shuffle_source;
    use crate::arch::ShuffleMode;

    /// The segment mask half of the `shfl.sync` model, which warpforge's own
    /// shuffles never use (they pass one 32-lane segment): against CUDA's
    /// `__shfl_*_sync(mask, v, b, width)`, which is `shfl.sync` with
    /// `c = (32 - width) << 8`, clamp 31 (idx, down, xor) or 0 (up). The
    /// expected lanes are CUDA's documented rules, not the pseudo-code.
    #[test]
    fn segments_follow_cudas_width_rules() {
        for width in [1u32, 2, 4, 8, 16, 32] {
            let segmask = (32 - width) << 8;
            for lane in 0..32 {
                let start = lane / width * width;
                for b in 0..32 {
                    let idx = start + b % width;
                    let up = if lane % width >= b { lane - b } else { lane };
                    let down = if lane % width + b < width {
                        lane + b
                    } else {
                        lane
                    };
                    // xor may reach earlier segments, not later ones.
                    let xor = if lane ^ b < start + width {
                        lane ^ b
                    } else {
                        lane
                    };
                    let got = |mode, clamp| shuffle_source(mode, lane, b, segmask | clamp);
                    let at = format!("width {width} lane {lane} b {b}");
                    assert_eq!(got(ShuffleMode::Idx, 0x1f), idx, "idx {at}");
                    assert_eq!(got(ShuffleMode::Up, 0), up, "up {at}");
                    assert_eq!(got(ShuffleMode::Down, 0x1f), down, "down {at}");
                    assert_eq!(got(ShuffleMode::Xor, 0x1f), xor, "xor {at}");
                }
            }
        }
    }
}
