//! The race detector, for shared and global memory, and the check for reads
//! of shared memory that no thread wrote.
//!
//! # Shared memory
//!
//! Two threads of a block touch the same byte of shared memory, at least one
//! of them writing, with no block barrier between them. CUDA gives such a
//! kernel no defined result; the GPU usually hides it until a different GPU,
//! clock or compiler exposes it.
//!
//! Per byte of the block's shared memory it keeps the last writer and the
//! readers (one, or "several") of the current barrier interval ("epoch");
//! every completed `sync_threads` starts a new epoch. Atomics are not checked
//! for races (they may race with each other by design; a plain access racing
//! with an atomic one to the same shared byte is *not* detected), but they do
//! initialise the bytes they touch. The lanes of a warp are distinct threads
//! (since Volta they are not implicitly ordered): nothing but a block
//! barrier orders two threads of a block — until the block uses an
//! mbarrier ([`crate::mbarrier`]) or a warp sync ([`crate::warp::sync`],
//! which orders the lanes it syncs with the same vector clocks: each lane
//! releases, then each acquires what all released).
//!
//! # mbarriers: vector clocks
//!
//! From a block's first mbarrier operation on, each of its threads also
//! keeps a vector clock: an arrive (or `complete_tx`) *releases* (the
//! thread's clock joins the phase's, then ticks), and a wait that sees the
//! phase complete *acquires* (the phase's clock joins the thread's). Each
//! record then holds the clock of its access too, and two accesses of one
//! barrier interval are ordered when the later thread's clock has reached
//! the earlier access's: a consumer's read after its wait on a producer's
//! "full" barrier is ordered after the producer's writes, and the
//! producer's next write after its wait on the "empty" barrier after the
//! consumers' reads. A byte read by several threads in one interval keeps
//! each reader's clock (a side table, only once the clocks exist), so a
//! write is checked against every read. Several reads recorded before the
//! clocks existed (earlier in the same interval) are not known one by one:
//! a later write that the clocks order is not checked against them (the
//! detector may miss such a race; it never invents one). Before a block's
//! first mbarrier operation every thread is at clock 1 (nothing released
//! yet), so that what a thread did before it releases is published by it.
//!
//! The same records say whether a byte was ever written (by a plain store, a
//! `cp.async` or an atomic). A read of a byte that no thread has written, or
//! an atomic that reads one (every atomic but `swap`), is reported as
//! `Fault::UninitSharedRead` — at the end of the barrier interval, so that a
//! read that merely came before another thread's write in the same interval
//! is reported as the race it is.
//!
//! # Global memory
//!
//! Two threads of the grid touch the same element of an output buffer
//! (`Out`, through a `Slot` or an `AtomicRef`), with nothing ordering them,
//! and at least one of them writes plainly, or one accesses it plainly and
//! the other atomically (the PTX memory model makes that mix a data race too:
//! make every access atomic, or order them). Inputs (`&[T]`) need no check:
//! nothing writes them during a launch.
//!
//! What orders two accesses:
//! - the same thread;
//! - the same block, with a completed block barrier between them (as above);
//! - different blocks: only a *release* by the earlier access's block (a
//!   device- or system-scope fence, then an atomic on global memory) after
//!   its access, and an *acquire* by the later access's block (an atomic on
//!   global memory, then such a fence) after that release and before its
//!   access — the "last block" pattern (`__threadfence()` and an atomic
//!   counter). Which atomic each used is not checked, and the fence of one
//!   thread counts for its whole block, so a kernel that fences and uses
//!   atomics may hide a race from the detector; it never makes one up.
//!
//! Not detected: an atomic whose scope is narrower than the threads sharing
//! the element (a `Block`-scoped atomic on an element that several blocks
//! update); missing fences where atomics alone are used to publish data (the
//! emulator's atomics are sequentially consistent, so such a kernel works
//! here and may not on a GPU); and anything about memory the kernel reaches
//! other than through `Out`, `AtomicRef` and shared memory.
//! Per element it keeps the last plain writer, the last group of plain
//! readers and the last group of atomic accessors (a group: one thread, or
//! several threads of one block in one epoch); it forgets older groups, which
//! can hide a race (e.g. a third block's read), never invent one.
//!
//! Cost: shared memory, 20 bytes of bookkeeping per byte, allocated on a
//! block's first shared access, and a few stores per byte accessed. Global
//! memory, 56 bytes per output element, allocated on a launch's first access
//! to the buffer, and an uncontended lock per access (blocks run on several OS
//! threads at once).

use super::Access;
use super::OutputBuffer;
use super::fiber::Site;
use core::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// No thread (no access yet), or several.
const NOBODY: u32 = u32::MAX;
const SEVERAL: u32 = u32::MAX - 1;

/// One byte of shared memory.
#[derive(Clone, Copy)]
struct Record {
    write_epoch: u32,
    writer: u32,
    read_epoch: u32,
    reader: u32,
    /// Some thread wrote it (plain, `cp.async` or atomic) since the block started.
    initialised: bool,
    /// Where the last plain write was made.
    writer_site: Option<Site>,
    /// Where the last plain read was made (with several readers, the latest one's).
    reader_site: Option<Site>,
    /// The writer's and the (single) reader's vector-clock entries at their
    /// access (1 before the block's clocks exist).
    write_clock: u32,
    read_clock: u32,
    /// The writer's count of `fence.proxy.async` at the last write, or
    /// [`ASYNC_PROXY`] if the async proxy wrote it (a bulk or TMA copy).
    write_fences: u32,
}

/// [`Record::write_fences`] of a byte the async proxy wrote.
const ASYNC_PROXY: u32 = u32::MAX;

const FRESH: Record = Record {
    write_epoch: 0,
    writer: NOBODY,
    read_epoch: 0,
    reader: NOBODY,
    initialised: false,
    writer_site: None,
    reader_site: None,
    write_clock: 0,
    read_clock: 0,
    write_fences: 0,
};

/// A race found: where, the other thread and what each did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Race {
    /// Shared memory: the byte offset; global memory: the element index.
    pub offset: usize,
    /// Global memory: the other access's block (linear); shared memory: this block.
    pub other_block: u32,
    /// The other thread (linear id in its block), or `SEVERAL`.
    pub other: u32,
    pub this_access: Access,
    pub other_access: Access,
    /// Global memory: the buffer's parameter name.
    pub buffer: &'static str,
    /// Where the other access was made (for a group: the latest one).
    pub other_site: Option<Site>,
}

impl Race {
    /// The other thread, or `None` if several threads of its block accessed the memory.
    pub(crate) fn other_thread(&self) -> Option<u32> {
        (self.other != SEVERAL).then_some(self.other)
    }
}

/// A read of shared memory that no thread wrote: the byte, the reading
/// thread and where it read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UninitRead {
    pub offset: usize,
    pub thread: u32,
    pub site: Site,
}

/// One block's detector: its shared-memory records, its barrier epoch, and
/// its view of the launch's global-memory records.
pub(crate) struct RaceDetector {
    epoch: Cell<u32>,
    bytes: usize,
    records: RefCell<Vec<Record>>,
    /// The first read of never-written shared memory in this epoch, reported at its end.
    uninit: Cell<Option<UninitRead>>,
    global: Option<Arc<GlobalShadow>>,
    /// This block's linear index in the grid.
    block: u32,
    /// Releases (fence, then a global atomic) this block has made.
    releases: Cell<u32>,
    /// The launch clock at this block's last acquire (global atomic, then fence); 0: none.
    acquired: Cell<u64>,
    /// A device- or system-scope fence since this block's last global atomic.
    fenced: Cell<bool>,
    /// This block has made a global atomic.
    atomic_seen: Cell<bool>,
    /// Threads in the block.
    threads: usize,
    /// Per thread, its vector clock (`clocks[t][u]`: the latest clock of
    /// thread `u` that `t` is ordered after; `clocks[t][t]` its own), from
    /// the block's first mbarrier operation; empty before.
    clocks: RefCell<Vec<Vec<u32>>>,
    /// Since the clocks exist: for each byte read by several threads in the
    /// current interval, each reader's clock at its latest read.
    read_sets: RefCell<HashMap<usize, Vec<(u32, u32)>>>,
    /// Per thread, its `fence.proxy.async` count (allocated on the first).
    proxy_fences: RefCell<Vec<u32>>,
}

/// A byte the async proxy reads whose last write, a plain store, its writer
/// has not fenced since (`fence.proxy.async`): the async proxy may read
/// what was there before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UnfencedWrite {
    pub offset: usize,
    pub writer: u32,
    pub writer_site: Option<Site>,
}

impl RaceDetector {
    /// The detector of block `block` (linear), with `shared_bytes` of shared
    /// memory and the launch's global records, if they are checked.
    pub(crate) fn new(
        shared_bytes: usize,
        threads: usize,
        block: u32,
        global: Option<Arc<GlobalShadow>>,
    ) -> Self {
        RaceDetector {
            epoch: Cell::new(1),
            bytes: shared_bytes,
            records: RefCell::new(Vec::new()),
            uninit: Cell::new(None),
            global,
            block,
            releases: Cell::new(0),
            acquired: Cell::new(0),
            fenced: Cell::new(false),
            atomic_seen: Cell::new(false),
            threads,
            clocks: RefCell::new(Vec::new()),
            read_sets: RefCell::new(HashMap::new()),
            proxy_fences: RefCell::new(Vec::new()),
        }
    }

    /// `thread`'s `fence.proxy.async`: its plain writes so far are visible
    /// to the async proxy.
    pub(crate) fn proxy_fence(&self, thread: u32) {
        let mut fences = self.proxy_fences.borrow_mut();
        if fences.is_empty() {
            fences.resize(self.threads, 0);
        }
        if let Some(n) = fences.get_mut(thread as usize) {
            *n = n.wrapping_add(1) % ASYNC_PROXY;
        }
    }

    /// `thread`'s count of `fence.proxy.async` so far.
    fn proxy_fences_of(&self, thread: u32) -> u32 {
        self.proxy_fences
            .borrow()
            .get(thread as usize)
            .copied()
            .unwrap_or(0)
    }

    /// Marks bytes `offset .. offset + len` as written by the async proxy
    /// (a bulk or TMA copy's destination, recorded as its issuer's write).
    pub(crate) fn async_proxy_wrote(&self, offset: usize, len: usize) {
        self.with_records(offset, len, |records| {
            for r in records {
                r.write_fences = ASYNC_PROXY;
            }
        });
    }

    /// The async proxy reads bytes `offset .. offset + len` (a `wgmma`'s
    /// operand): the first whose last write was a plain store that its
    /// writer has not followed with a `fence.proxy.async`. Whether that
    /// fence is ordered before the read is the race check's part (the
    /// fence comes after the write, and a barrier or mbarrier after the
    /// fence orders it); a fence after the ordering barrier is not told
    /// apart here (a miss, never a false report).
    pub(crate) fn async_read(&self, offset: usize, len: usize) -> Option<UnfencedWrite> {
        self.with_records(offset, len, |records| {
            records.iter().enumerate().find_map(|(i, r)| {
                let unfenced = r.initialised
                    && r.writer != NOBODY
                    && r.write_fences != ASYNC_PROXY
                    && self.proxy_fences_of(r.writer) == r.write_fences;
                unfenced.then_some(UnfencedWrite {
                    offset: offset + i,
                    writer: r.writer,
                    writer_site: r.writer_site,
                })
            })
        })
    }

    /// Starts the vector clocks (the block's first mbarrier operation):
    /// every thread at 1, having seen nobody.
    fn start_clocks(&self) -> core::cell::RefMut<'_, Vec<Vec<u32>>> {
        let mut clocks = self.clocks.borrow_mut();
        if clocks.is_empty() {
            *clocks = (0..self.threads)
                .map(|t| {
                    let mut c = vec![0; self.threads];
                    c[t] = 1;
                    c
                })
                .collect();
        }
        clocks
    }

    /// `thread` releases: its clock joins `into`, then ticks (its later
    /// accesses are not covered by this release).
    pub(crate) fn release(&self, thread: u32, into: &mut Vec<u32>) {
        let mut clocks = self.start_clocks();
        let Some(mine) = clocks.get_mut(thread as usize) else {
            return;
        };
        join(into, mine);
        mine[thread as usize] += 1;
    }

    /// `thread` acquires `from` (a completed phase's clock).
    pub(crate) fn acquire(&self, thread: u32, from: &[u32]) {
        let mut clocks = self.start_clocks();
        if let Some(mine) = clocks.get_mut(thread as usize) {
            join(mine, from);
        }
    }

    /// A block barrier completed: accesses before it are ordered before those
    /// after. Returns the epoch's first read of never-written shared memory.
    pub(crate) fn barrier(&self) -> Option<UninitRead> {
        self.epoch.set(self.epoch.get() + 1);
        self.read_sets.borrow_mut().clear();
        self.uninit.take()
    }

    /// The block's threads all exited: the last epoch's uninitialised read, if any.
    pub(crate) fn finish(&self) -> Option<UninitRead> {
        self.uninit.take()
    }

    /// Runs `f` on the shared-memory records of bytes `offset .. offset + len`
    /// (clipped to the block's shared memory), allocating them on first use.
    fn with_records<R>(&self, offset: usize, len: usize, f: impl FnOnce(&mut [Record]) -> R) -> R {
        let mut records = self.records.borrow_mut();
        if records.is_empty() {
            records.resize(self.bytes, FRESH);
        }
        let end = offset.saturating_add(len).min(records.len());
        f(&mut records[offset.min(end)..end])
    }

    /// Records `thread`'s plain access at `site` to shared bytes `offset ..
    /// offset + len`; the first conflicting earlier access of this epoch, if any.
    pub(crate) fn access(
        &self,
        thread: u32,
        offset: usize,
        len: usize,
        write: bool,
        site: Site,
    ) -> Result<(), Race> {
        let epoch = self.epoch.get();
        let kind = |w| if w { Access::Write } else { Access::Read };
        let clocks = self.clocks.borrow();
        // With clocks (an mbarrier in use): this thread's view of the others.
        let seen = clocks.get(thread as usize);
        let now = seen.map_or(1, |c| c[thread as usize]);
        // Whether an access of this interval by `other` at clock `at` is
        // ordered before this one.
        let ordered = |other: u32, at: u32| {
            other == thread || seen.is_some_and(|c| c.get(other as usize).is_some_and(|&c| c >= at))
        };
        let mut read_sets = seen.map(|_| self.read_sets.borrow_mut());
        let mut uninit = None;
        let fences = self.proxy_fences_of(thread);
        let result = self.with_records(offset, len, |records| {
            for (i, r) in records.iter_mut().enumerate() {
                let byte = offset + i;
                let race = |other, other_writes, other_site| Race {
                    offset: byte,
                    other_block: self.block,
                    other,
                    this_access: kind(write),
                    other_access: kind(other_writes),
                    buffer: "",
                    other_site,
                };
                if r.write_epoch == epoch && !ordered(r.writer, r.write_clock) {
                    return Err(race(r.writer, true, r.writer_site));
                }
                if write {
                    if r.read_epoch == epoch {
                        if r.reader != SEVERAL {
                            if !ordered(r.reader, r.read_clock) {
                                return Err(race(r.reader, false, r.reader_site));
                            }
                        } else if let Some(sets) = &read_sets {
                            // Each reader's clock, if they were recorded one by
                            // one (see the module doc).
                            let set = sets.get(&byte).map_or(&[][..], Vec::as_slice);
                            if let Some(&(other, _)) = set.iter().find(|&&(u, at)| !ordered(u, at))
                            {
                                return Err(race(other, false, r.reader_site));
                            }
                        } else {
                            // With several readers, at least one of them is another thread.
                            return Err(race(r.reader, false, r.reader_site));
                        }
                        if let Some(sets) = &mut read_sets {
                            // Ordered after every read of the interval: later
                            // accesses need only be ordered after this write.
                            r.read_epoch = 0;
                            sets.remove(&byte);
                        }
                    }
                    r.write_epoch = epoch;
                    r.writer = thread;
                    r.write_clock = now;
                    r.writer_site = Some(site);
                    r.initialised = true;
                    r.write_fences = fences;
                } else {
                    if !r.initialised && uninit.is_none() {
                        uninit = Some(UninitRead {
                            offset: byte,
                            thread,
                            site,
                        });
                    }
                    if r.read_epoch != epoch {
                        r.read_epoch = epoch;
                        r.reader = thread;
                        r.read_clock = now;
                    } else if r.reader == thread {
                        r.read_clock = now;
                    } else {
                        if let Some(sets) = &mut read_sets {
                            let set = sets.entry(byte).or_default();
                            if r.reader != SEVERAL {
                                set.clear();
                                set.push((r.reader, r.read_clock));
                            }
                            match set.iter_mut().find(|(u, _)| *u == thread) {
                                Some(entry) => entry.1 = now,
                                None => set.push((thread, now)),
                            }
                        }
                        r.reader = SEVERAL;
                    }
                    r.reader_site = Some(site);
                }
            }
            Ok(())
        });
        if self.uninit.get().is_none() {
            self.uninit.set(uninit);
        }
        result
    }

    /// Records `thread`'s atomic access (at `site`) to shared bytes `offset
    /// .. offset + len`: it initialises them; if it reads the old value
    /// (`reads_old`) and a byte was never written, that is an uninitialised read.
    pub(crate) fn shared_atomic(
        &self,
        thread: u32,
        offset: usize,
        len: usize,
        reads_old: bool,
        site: Site,
    ) {
        let first_uninit = self.with_records(offset, len, |records| {
            let mut first = None;
            for (i, r) in records.iter_mut().enumerate() {
                if reads_old && !r.initialised && first.is_none() {
                    first = Some(UninitRead {
                        offset: offset + i,
                        thread,
                        site,
                    });
                }
                r.initialised = true;
            }
            first
        });
        if self.uninit.get().is_none() {
            self.uninit.set(first_uninit);
        }
    }

    /// A device- or system-scope fence by a thread of this block: after a
    /// global atomic it completes an acquire; before one it starts a release.
    pub(crate) fn fence(&self) {
        if let Some(g) = &self.global {
            if self.atomic_seen.get() {
                self.acquired.set(g.clock.load(Ordering::SeqCst));
            }
            self.fenced.set(true);
        }
    }

    /// Records `thread`'s access of kind `access`, at `site`, to `bytes` bytes
    /// of global memory at `addr`; the first conflicting earlier access, if any.
    /// Addresses outside the launch's output buffers are not checked.
    ///
    /// An atomic after a fence is a release, stamped from the launch clock
    /// *before* the atomic itself runs, so that a block whose atomic sees
    /// this one's result reads a clock at least as late when it fences.
    pub(crate) fn global_access(
        &self,
        thread: u32,
        addr: usize,
        bytes: usize,
        access: Access,
        site: Site,
    ) -> Result<(), Race> {
        let Some(g) = &self.global else {
            return Ok(());
        };
        if access == Access::Atomic {
            if self.fenced.replace(false) {
                let stamp = g.clock.fetch_add(1, Ordering::SeqCst) + 1;
                lock(&g.releases).entry(self.block).or_default().push(stamp);
                self.releases.set(self.releases.get() + 1);
            }
            self.atomic_seen.set(true);
        }
        let now = GlobalAccess {
            block: self.block,
            thread,
            epoch: self.epoch.get(),
            releases: self.releases.get(),
            site: Some(site),
        };
        g.access(now, self.acquired.get(), addr, bytes, access)
    }
}

/// Locks `m`, ignoring poisoning (a panicking kernel thread never holds a
/// detector lock across a panic; the data is plain records either way).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One access, or a group of accesses (`thread` = `SEVERAL`: threads of one
/// block in one epoch), to an element of global memory.
#[derive(Clone, Copy, Debug)]
struct GlobalAccess {
    /// The block (linear), or `NOBODY` if there was no such access.
    block: u32,
    thread: u32,
    /// The block's barrier epoch at the access.
    epoch: u32,
    /// The releases the block had made before the access.
    releases: u32,
    /// Where (for a group: the latest access's).
    site: Option<Site>,
}

const NO_ACCESS: GlobalAccess = GlobalAccess {
    block: NOBODY,
    thread: NOBODY,
    epoch: 0,
    releases: 0,
    site: None,
};

/// One element of an output buffer.
struct GlobalRecord {
    write: GlobalAccess,
    read: GlobalAccess,
    atomic: GlobalAccess,
}

const FRESH_GLOBAL: GlobalRecord = GlobalRecord {
    write: NO_ACCESS,
    read: NO_ACCESS,
    atomic: NO_ACCESS,
};

impl GlobalAccess {
    /// Adds `now` to this group: the same block and epoch make a group of
    /// several threads; otherwise `now` replaces it (anything ordered after
    /// `now` is ordered after an earlier group of the same block; forgetting
    /// another block's group can hide a race, never invent one).
    fn merge(&mut self, now: GlobalAccess) {
        if self.block == now.block && self.epoch == now.epoch {
            if self.thread != now.thread {
                self.thread = SEVERAL;
            }
            self.releases = self.releases.max(now.releases);
            self.site = now.site;
        } else {
            *self = now;
        }
    }
}

/// One record per element of an output buffer, allocated on its first access.
type Records = OnceLock<Box<[Mutex<GlobalRecord>]>>;

/// The global-memory records of one launch, shared by its blocks (which run
/// on several OS threads at once).
pub(crate) struct GlobalShadow {
    buffers: Vec<(OutputBuffer, Records)>,
    /// Counts releases; a release is stamped with its new value.
    clock: AtomicU64,
    /// Per block (linear) that made any: the stamps of its releases, in order.
    releases: Mutex<HashMap<u32, Vec<u64>>>,
}

impl GlobalShadow {
    /// The records for a launch writing `outputs`.
    pub(crate) fn new(outputs: &[OutputBuffer]) -> Self {
        GlobalShadow {
            buffers: outputs
                .iter()
                .filter(|b| b.len > 0 && b.elem_bytes > 0)
                .map(|&b| (b, OnceLock::new()))
                .collect(),
            clock: AtomicU64::new(0),
            releases: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `prev` is ordered before an access `now` of a block whose last
    /// acquire read the clock at `acquired`.
    fn ordered(&self, prev: &GlobalAccess, now: &GlobalAccess, acquired: u64) -> bool {
        if prev.block == NOBODY {
            return true;
        }
        if prev.block == now.block {
            return prev.epoch < now.epoch || prev.thread == now.thread;
        }
        // The first release of prev's block after the access must come before now's acquire.
        acquired != 0
            && lock(&self.releases)
                .get(&prev.block)
                .and_then(|stamps| stamps.get(prev.releases as usize))
                .is_some_and(|&stamp| stamp <= acquired)
    }

    fn access(
        &self,
        now: GlobalAccess,
        acquired: u64,
        addr: usize,
        bytes: usize,
        access: Access,
    ) -> Result<(), Race> {
        let Some((buffer, records)) = self
            .buffers
            .iter()
            .find(|(b, _)| addr >= b.addr && addr - b.addr < b.len.saturating_mul(b.elem_bytes))
        else {
            return Ok(());
        };
        let records =
            records.get_or_init(|| (0..buffer.len).map(|_| Mutex::new(FRESH_GLOBAL)).collect());
        let first = (addr - buffer.addr) / buffer.elem_bytes;
        let last = (addr - buffer.addr + bytes.max(1) - 1) / buffer.elem_bytes;
        for element in first..=last.min(buffer.len - 1) {
            let mut r = lock(&records[element]);
            let check = |prev: &GlobalAccess, kind| {
                if self.ordered(prev, &now, acquired) {
                    Ok(())
                } else {
                    Err(Race {
                        offset: element,
                        other_block: prev.block,
                        other: prev.thread,
                        this_access: access,
                        other_access: kind,
                        buffer: buffer.name,
                        other_site: prev.site,
                    })
                }
            };
            match access {
                Access::Read => {
                    check(&r.write, Access::Write)?;
                    check(&r.atomic, Access::Atomic)?;
                    r.read.merge(now);
                }
                Access::Write => {
                    check(&r.write, Access::Write)?;
                    check(&r.read, Access::Read)?;
                    check(&r.atomic, Access::Atomic)?;
                    r.write = now;
                }
                Access::Atomic => {
                    check(&r.write, Access::Write)?;
                    check(&r.read, Access::Read)?;
                    r.atomic.merge(now);
                }
            }
        }
        Ok(())
    }
}

/// `into` = the join (elementwise max) of the vector clocks `into` and
/// `from`, as long as the longer.
pub(crate) fn join(into: &mut Vec<u32>, from: &[u32]) {
    into.resize(into.len().max(from.len()), 0);
    for (to, &from) in into.iter_mut().zip(from) {
        *to = (*to).max(from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: OutputBuffer = OutputBuffer {
        name: "out",
        addr: 0x1000,
        len: 8,
        elem_bytes: 4,
    };

    fn blocks(n: u32) -> Vec<RaceDetector> {
        let shadow = Arc::new(GlobalShadow::new(&[OUT]));
        (0..n)
            .map(|b| RaceDetector::new(0, 1, b, Some(shadow.clone())))
            .collect()
    }

    /// The caller's line, as the device API's `#[track_caller]` passes it.
    #[track_caller]
    fn here() -> Site {
        core::panic::Location::caller()
    }

    #[track_caller]
    fn write(d: &RaceDetector, thread: u32, element: usize) -> Result<(), Race> {
        d.global_access(thread, OUT.addr + 4 * element, 4, Access::Write, here())
    }

    #[track_caller]
    fn read(d: &RaceDetector, thread: u32, element: usize) -> Result<(), Race> {
        d.global_access(thread, OUT.addr + 4 * element, 4, Access::Read, here())
    }

    #[track_caller]
    fn atomic(d: &RaceDetector, element: usize) -> Result<(), Race> {
        d.global_access(0, OUT.addr + 4 * element, 4, Access::Atomic, here())
    }

    #[test]
    fn a_barrier_orders_a_block_and_nothing_orders_two_blocks() {
        let b = blocks(2);
        write(&b[0], 3, 1).unwrap();
        let write_line = line!() - 1;
        assert_eq!(b[0].barrier(), None);
        read(&b[0], 4, 1).unwrap();
        // The write is checked first: block 0's thread 3 wrote element 1.
        let race = write(&b[1], 3, 1).unwrap_err();
        let site = race.other_site.expect("the earlier write's site");
        assert_eq!((site.file(), site.line()), (file!(), write_line));
        assert_eq!(
            (race.offset, race.other_block, race.other_thread()),
            (1, 0, Some(3))
        );
        assert_eq!(
            (race.this_access, race.other_access, race.buffer),
            (Access::Write, Access::Write, "out")
        );
        // So does a read from another block.
        let race = read(&b[1], 3, 1).unwrap_err();
        assert_eq!(race.other_access, Access::Write);
        // Outside every output buffer: not checked.
        b[1].global_access(0, 0x900, 4, Access::Write, here())
            .unwrap();
        b[0].global_access(0, 0x900, 4, Access::Write, here())
            .unwrap();
    }

    #[test]
    fn reads_of_several_threads_make_a_group() {
        let b = blocks(1);
        read(&b[0], 1, 0).unwrap();
        read(&b[0], 2, 0).unwrap();
        let race = write(&b[0], 1, 0).unwrap_err();
        assert_eq!(race.other_thread(), None, "{race:?}");
    }

    #[test]
    fn a_release_then_a_later_acquire_orders_two_blocks() {
        let b = blocks(3);
        write(&b[0], 0, 2).unwrap();
        b[0].fence();
        atomic(&b[0], 7).unwrap(); // release
        atomic(&b[1], 7).unwrap();
        b[1].fence(); // acquire, after block 0's release
        read(&b[1], 5, 2).unwrap();
        // Block 2 acquired nothing: its read still races with block 0's write.
        let race = read(&b[2], 0, 2).unwrap_err();
        assert_eq!((race.other_block, race.other_access), (0, Access::Write));
    }

    #[test]
    fn an_acquire_before_the_release_orders_nothing() {
        let b = blocks(2);
        atomic(&b[1], 7).unwrap();
        b[1].fence(); // acquire, before block 0 has released anything
        write(&b[0], 0, 2).unwrap();
        b[0].fence();
        atomic(&b[0], 7).unwrap(); // release, after block 1's acquire
        let race = read(&b[1], 0, 2).unwrap_err();
        assert_eq!((race.other_block, race.other_access), (0, Access::Write));
    }

    #[test]
    fn atomics_do_not_race_with_each_other_but_do_with_plain_accesses() {
        let b = blocks(2);
        atomic(&b[0], 3).unwrap();
        atomic(&b[1], 3).unwrap();
        let race = read(&b[0], 9, 3).unwrap_err();
        assert_eq!(
            (race.other_block, race.other_access, race.this_access),
            (1, Access::Atomic, Access::Read)
        );
    }

    #[test]
    fn an_uninitialised_shared_read_is_kept_until_the_barrier() {
        let d = RaceDetector::new(8, 2, 0, None);
        let (write_at, read_at) = (here(), here());
        d.access(0, 0, 4, true, write_at).unwrap();
        d.access(1, 4, 4, false, read_at).unwrap(); // byte 4: never written
        // A race, reported at once, with the write's site.
        let race = d.access(2, 0, 4, false, here()).unwrap_err();
        assert_eq!(race.other_site, Some(write_at));
        assert_eq!(
            d.barrier(),
            Some(UninitRead {
                offset: 4,
                thread: 1,
                site: read_at,
            })
        );
        assert_eq!(d.finish(), None);
        // An atomic initialises; one that reads the old value of a fresh byte reads it uninitialised.
        let atomic_at = here();
        d.shared_atomic(3, 4, 2, false, here());
        d.shared_atomic(3, 4, 4, true, atomic_at);
        assert_eq!(
            d.finish(),
            Some(UninitRead {
                offset: 6,
                thread: 3,
                site: atomic_at,
            })
        );
    }
}
