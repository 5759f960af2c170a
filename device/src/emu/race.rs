//! The shared-memory race detector: two threads of a block touch the same
//! byte of shared memory, at least one of them writing, with no block
//! barrier between them. CUDA gives such a kernel no defined result; the GPU
//! usually hides it until a different GPU, clock or compiler exposes it.
//!
//! Per byte of the block's shared memory it keeps the last writer and the
//! readers (one, or "several") of the current barrier interval ("epoch");
//! every completed `sync_threads` starts a new epoch. Atomics are not
//! recorded (they may race with each other by design), and the lanes of a
//! warp are distinct threads (since Volta they are not implicitly ordered).
//! Cost: 16 bytes of bookkeeping per byte of shared memory, allocated on a
//! block's first shared access, and a few stores per byte accessed.

use core::cell::{Cell, RefCell};

/// No thread (no access yet in this epoch), or several.
const NOBODY: u32 = u32::MAX;
const SEVERAL: u32 = u32::MAX - 1;

#[derive(Clone, Copy)]
struct Record {
    write_epoch: u32,
    writer: u32,
    read_epoch: u32,
    reader: u32,
}

const FRESH: Record = Record {
    write_epoch: 0,
    writer: NOBODY,
    read_epoch: 0,
    reader: NOBODY,
};

/// A race found: the other thread (linear id in the block) and what each did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Race {
    pub offset: usize,
    pub other: u32,
    pub this_writes: bool,
    pub other_writes: bool,
}

/// One block's detector.
pub(crate) struct RaceDetector {
    epoch: Cell<u32>,
    bytes: usize,
    records: RefCell<Vec<Record>>,
}

impl RaceDetector {
    pub(crate) fn new(shared_bytes: usize) -> Self {
        RaceDetector {
            epoch: Cell::new(1),
            bytes: shared_bytes,
            records: RefCell::new(Vec::new()),
        }
    }

    /// A block barrier completed: accesses before it are ordered before those after.
    pub(crate) fn barrier(&self) {
        self.epoch.set(self.epoch.get() + 1);
    }

    /// Records `thread`'s access to bytes `offset .. offset + len`; the first
    /// conflicting earlier access of this epoch, if any.
    pub(crate) fn access(
        &self,
        thread: u32,
        offset: usize,
        len: usize,
        write: bool,
    ) -> Result<(), Race> {
        let epoch = self.epoch.get();
        let mut records = self.records.borrow_mut();
        if records.is_empty() {
            records.resize(self.bytes, FRESH);
        }
        let end = (offset + len).min(records.len());
        for (i, r) in records[offset.min(end)..end].iter_mut().enumerate() {
            let race = |other, other_writes| Race {
                offset: offset + i,
                other,
                this_writes: write,
                other_writes,
            };
            if r.write_epoch == epoch && r.writer != thread {
                return Err(race(r.writer, true));
            }
            if write {
                if r.read_epoch == epoch && r.reader != thread {
                    // With several readers, at least one of them is another thread.
                    return Err(race(r.reader, false));
                }
                r.write_epoch = epoch;
                r.writer = thread;
            } else if r.read_epoch != epoch {
                r.read_epoch = epoch;
                r.reader = thread;
            } else if r.reader != thread {
                r.reader = SEVERAL;
            }
        }
        Ok(())
    }
}

impl Race {
    /// The other thread, or `None` if several threads read the byte.
    pub(crate) fn other_thread(&self) -> Option<u32> {
        (self.other != SEVERAL).then_some(self.other)
    }
}
