//! Emulated streams: work queued in order on a worker thread, so that copies
//! and kernels on different streams overlap as they do on a GPU.
//!
//! A GPU stream runs its work in order, and work on different streams may run
//! at the same time. The emulator gives each [`EmuStream`] one OS thread that
//! takes jobs in the order they were queued. Ordering *between* streams comes
//! from the memory itself: every [`Allocation`] remembers the job that last
//! writes it and the jobs that read it since (its hazards). A job waits for
//! the writer of everything it reads, and for the writer and readers of
//! everything it writes, before it runs — the same dependencies a GPU runtime
//! expresses with events. The host side waits the same way before it touches an
//! allocation ([`Allocation::wait_writes`], [`Allocation::wait_all`]), so a
//! host read never sees a half-written buffer.

use super::{DeviceMemory, EmuError};
use std::cell::UnsafeCell;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

/// How a queued job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It ran between these instants.
    Ran {
        /// When it started (after its dependencies were done).
        start: Instant,
        /// When it finished.
        end: Instant,
    },
    /// The kernel faulted.
    Faulted(Box<EmuError>),
    /// It did not run because a job it depends on, or an earlier job, failed.
    Skipped,
}

/// A job's end, which other jobs and the host can wait for (an event).
#[derive(Clone, Debug)]
pub struct Completion {
    inner: Arc<(Mutex<Option<Outcome>>, Condvar)>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Completion {
    /// A completion that has not happened yet.
    pub fn pending() -> Completion {
        Completion {
            inner: Arc::new((Mutex::new(None), Condvar::new())),
        }
    }

    /// A completion that already happened now (work done inline).
    pub fn ran_now() -> Completion {
        let c = Completion::pending();
        let now = Instant::now();
        c.finish(Outcome::Ran {
            start: now,
            end: now,
        });
        c
    }

    /// Records how the job ended and wakes its waiters.
    pub fn finish(&self, outcome: Outcome) {
        let (slot, cv) = &*self.inner;
        *lock(slot) = Some(outcome);
        cv.notify_all();
    }

    /// Waits for the job to end.
    pub fn wait(&self) -> Outcome {
        let (slot, cv) = &*self.inner;
        let mut guard = lock(slot);
        loop {
            if let Some(o) = &*guard {
                return o.clone();
            }
            guard = cv.wait(guard).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// How the job ended, if it has.
    pub fn outcome(&self) -> Option<Outcome> {
        lock(&self.inner.0).clone()
    }
}

/// How a job touches an allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads it: waits for its last writer.
    Read,
    /// Writes it: waits for its last writer and every reader since.
    Write,
}

#[derive(Default)]
struct Hazards {
    write: Option<Completion>,
    reads: Vec<Completion>,
}

/// Emulated memory shared by the host and the streams' worker threads, with
/// the hazards of the work queued on it.
pub struct Allocation<T> {
    memory: UnsafeCell<DeviceMemory<T>>,
    hazards: Mutex<Hazards>,
}

// SAFETY: the elements are accessed by the host only after waiting for the jobs
// that write them (see the `unsafe fn`s' contracts), and by jobs only after
// their dependencies are done, so no two threads write, or read and write, at once.
unsafe impl<T: Send> Send for Allocation<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for Allocation<T> {}

impl<T: crate::shared::SharedElement> Allocation<T> {
    /// Wraps freshly allocated memory (share it in an `Arc` with the jobs that use it).
    pub fn new(memory: DeviceMemory<T>) -> Allocation<T> {
        Allocation {
            memory: UnsafeCell::new(memory),
            hazards: Mutex::new(Hazards::default()),
        }
    }

    /// Elements.
    pub fn len(&self) -> usize {
        // SAFETY: the length is never written after construction.
        unsafe { (*self.memory.get()).len() }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Registers `job` as touching this allocation with `access`, and returns
    /// what it must wait for first. Call it before the job can run.
    pub fn claim(&self, access: Access, job: &Completion) -> Vec<Completion> {
        let mut h = lock(&self.hazards);
        h.reads.retain(|c| c.outcome().is_none());
        let mut deps: Vec<Completion> = h.write.iter().cloned().collect();
        match access {
            Access::Read => h.reads.push(job.clone()),
            Access::Write => {
                deps.append(&mut h.reads);
                h.write = Some(job.clone());
            }
        }
        deps
    }

    /// Waits for every queued job that writes this allocation.
    pub fn wait_writes(&self) {
        let write = lock(&self.hazards).write.clone();
        if let Some(w) = write {
            w.wait();
        }
    }

    /// Waits for every queued job that reads or writes this allocation.
    pub fn wait_all(&self) {
        let (write, reads) = {
            let h = lock(&self.hazards);
            (h.write.clone(), h.reads.clone())
        };
        for c in write.iter().chain(&reads) {
            c.wait();
        }
    }

    /// The first element's address, for a job's kernel arguments.
    pub fn as_ptr(&self) -> *mut T {
        // SAFETY: reads the pointer field only; no reference to the elements is formed.
        unsafe { (*self.memory.get()).as_mut_ptr() }
    }

    /// The elements, for the host.
    ///
    /// # Safety
    /// Call [`wait_writes`](Self::wait_writes) first, and claim no `Write` for
    /// this allocation while the slice lives.
    pub unsafe fn host_slice(&self) -> &[T] {
        // SAFETY: the caller guarantees that no job writes while the slice lives.
        unsafe { (*self.memory.get()).as_slice() }
    }

    /// The elements, mutably, for the host.
    ///
    /// # Safety
    /// Call [`wait_all`](Self::wait_all) first, and claim nothing for this
    /// allocation and make no other host slice of it while the slice lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn host_slice_mut(&self) -> &mut [T] {
        // SAFETY: the caller guarantees that nothing else touches it meanwhile.
        unsafe { (*self.memory.get()).as_mut_slice() }
    }
}

/// Runs one job: waits for `deps`; if each of them ran and `go_ahead()` still
/// says so, runs `work` and records how it ended in `done`, else records
/// `Skipped`. Stream workers and the emulator's inline default stream both
/// run their jobs through this.
pub fn run_after(
    deps: &[Completion],
    done: &Completion,
    go_ahead: impl FnOnce() -> bool,
    work: impl FnOnce() -> Result<(), Box<EmuError>>,
) -> Result<(), Box<EmuError>> {
    let deps_ok = deps.iter().all(|d| matches!(d.wait(), Outcome::Ran { .. }));
    if !deps_ok || !go_ahead() {
        done.finish(Outcome::Skipped);
        return Ok(());
    }
    let start = Instant::now();
    let result = work();
    done.finish(match &result {
        Ok(()) => Outcome::Ran {
            start,
            end: Instant::now(),
        },
        Err(e) => Outcome::Faulted(e.clone()),
    });
    result
}

type Work = Box<dyn FnOnce() -> Result<(), Box<EmuError>> + Send>;

struct Job {
    deps: Vec<Completion>,
    work: Work,
    done: Completion,
}

/// One emulated stream: a worker thread running its jobs in queue order.
pub struct EmuStream {
    queue: Mutex<Option<Sender<Job>>>,
    last: Mutex<Option<Completion>>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl EmuStream {
    /// Starts the worker. `is_poisoned` makes it skip jobs once the device
    /// is unusable (a job reports its own fault through its result and closure).
    pub fn new(is_poisoned: Arc<dyn Fn() -> bool + Send + Sync>) -> EmuStream {
        let (tx, rx) = mpsc::channel::<Job>();
        let worker = std::thread::Builder::new()
            .name("warpforge-emu-stream".into())
            .spawn(move || {
                for job in rx {
                    // A fault is recorded in the job's completion; the queue goes on.
                    let _ = run_after(&job.deps, &job.done, || !is_poisoned(), job.work);
                }
            })
            .ok();
        EmuStream {
            queue: Mutex::new(worker.as_ref().map(|_| tx)),
            last: Mutex::new(None),
            worker: Mutex::new(worker),
        }
    }

    /// Queues `work`, to run after `deps` and after everything queued before it
    /// on this stream. `done` is the job's completion (claimed on its memory already).
    pub fn enqueue(
        &self,
        deps: Vec<Completion>,
        done: Completion,
        work: impl FnOnce() -> Result<(), Box<EmuError>> + Send + 'static,
    ) {
        let job = Job {
            deps,
            work: Box::new(work),
            done: done.clone(),
        };
        let sent = lock(&self.queue)
            .as_ref()
            .is_some_and(|tx| tx.send(job).is_ok());
        if !sent {
            // No worker (the OS refused a thread): the job cannot run.
            done.finish(Outcome::Skipped);
        }
        *lock(&self.last) = Some(done);
    }

    /// The completion of the last job queued, if any.
    pub fn last(&self) -> Option<Completion> {
        lock(&self.last).clone()
    }
}

impl Drop for EmuStream {
    fn drop(&mut self) {
        // Closing the queue lets the worker finish what is queued and exit.
        lock(&self.queue).take();
        if let Some(w) = lock(&self.worker).take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn stream() -> EmuStream {
        EmuStream::new(Arc::new(|| false))
    }

    #[test]
    fn a_reader_on_another_stream_waits_for_the_writer() {
        let alloc = Arc::new(Allocation::new(DeviceMemory::<u32>::zeroed(1).unwrap()));
        let (a, b) = (stream(), stream());
        let write = Completion::pending();
        let deps = alloc.claim(Access::Write, &write);
        let ptr = alloc.as_ptr() as usize;
        a.enqueue(deps, write.clone(), move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            // SAFETY: this job holds the write claim; nothing else touches it.
            unsafe { *(ptr as *mut u32) = 7 };
            Ok(())
        });
        let read = Completion::pending();
        let deps = alloc.claim(Access::Read, &read);
        let seen = Arc::new(Mutex::new(0));
        let seen2 = seen.clone();
        b.enqueue(deps, read.clone(), move || {
            // SAFETY: this job's dependencies include the write.
            *lock(&seen2) = unsafe { *(ptr as *const u32) };
            Ok(())
        });
        assert!(matches!(read.wait(), Outcome::Ran { .. }));
        assert_eq!(*lock(&seen), 7);
    }

    #[test]
    fn a_fault_skips_the_jobs_that_depend_on_it() {
        let s = stream();
        let first = Completion::pending();
        s.enqueue(Vec::new(), first.clone(), || {
            Err(Box::new(EmuError {
                kernel: "k".into(),
                block: crate::thread::Dim3::x(0),
                thread: crate::thread::Dim3::x(0),
                fault: super::super::Fault::Deadlock {
                    at_barrier: 1,
                    at_warp_op: 0,
                    at: None,
                },
            }))
        });
        let second = Completion::pending();
        s.enqueue(vec![first.clone()], second.clone(), || Ok(()));
        assert!(matches!(first.wait(), Outcome::Faulted(_)));
        assert_eq!(second.wait(), Outcome::Skipped);
    }
}
