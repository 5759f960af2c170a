//! The emulator backend's host side: its memory pool (so out-of-memory happens
//! and is reported as on a GPU), its buffers, and launches run inline or as
//! jobs on emulated streams.

use super::element::Element;
use super::error::{Error, FaultCode, Result};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use warpforge_device::Dim3;
use warpforge_device::emu::stream::{self, Access, Allocation, Completion, EmuStream};
use warpforge_device::emu::{DeviceMemory, EmuError};

/// The emulator's "device memory": a byte budget, like a GPU's memory size.
pub(crate) struct Pool {
    pub(crate) capacity: u64,
    used: AtomicU64,
}

impl Pool {
    pub(crate) fn new(capacity: u64) -> Arc<Pool> {
        Arc::new(Pool {
            capacity,
            used: AtomicU64::new(0),
        })
    }

    /// Bytes not allocated.
    pub(crate) fn free(&self) -> u64 {
        self.capacity
            .saturating_sub(self.used.load(Ordering::Relaxed))
    }

    /// Reserves `bytes`, or says how much there was.
    fn reserve(self: &Arc<Pool>, bytes: u64) -> Result<Ticket> {
        let fits = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes).filter(|&u| u <= self.capacity)
            });
        match fits {
            Ok(_) => Ok(Ticket {
                pool: self.clone(),
                bytes,
            }),
            Err(_) => Err(Error::OutOfMemory {
                requested: bytes,
                free: self.free(),
                total: self.capacity,
            }),
        }
    }
}

/// Host memory size, the default capacity of an emulator device.
pub(crate) fn host_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        })
        .unwrap_or(u64::MAX)
}

/// Bytes of a pool, given back when the allocation is freed.
struct Ticket {
    pool: Arc<Pool>,
    bytes: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.pool.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// One emulated allocation: the memory, its hazards, and its share of the pool.
/// Jobs hold an `Arc` of it, so memory a queued job uses outlives its buffer.
pub(crate) struct EmuMemory<T> {
    pub(crate) alloc: Allocation<T>,
    _ticket: Ticket,
}

impl<T: Element> EmuMemory<T> {
    pub(crate) fn zeroed(pool: &Arc<Pool>, len: usize) -> Result<Arc<EmuMemory<T>>> {
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or_else(|| Error::SizeOverflow {
                what: format!("allocating {len} elements of {}", T::DTYPE.name()),
            })?;
        let ticket = pool.reserve(bytes as u64)?;
        let memory = DeviceMemory::zeroed(len).ok_or(Error::OutOfMemory {
            requested: bytes as u64,
            free: pool.free(),
            total: pool.capacity,
        })?;
        Ok(Arc::new(EmuMemory {
            alloc: Allocation::new(memory),
            _ticket: ticket,
        }))
    }

    /// A copy of the elements, after the queued work that writes them.
    pub(crate) fn to_vec(&self) -> Vec<T> {
        self.alloc.wait_writes();
        // SAFETY: waited for every queued writer; a new writer needs `&mut` of
        // the owning buffer, which the caller's `&self` borrow rules out.
        unsafe { self.alloc.host_slice() }.to_vec()
    }

    /// Overwrites the elements with `data` (same length), after all queued work on them.
    pub(crate) fn write(&self, data: &[T]) {
        self.alloc.wait_all();
        // SAFETY: waited for every queued job; the caller holds `&mut` of the
        // owning buffer, so nothing else can queue work on it or read it meanwhile.
        unsafe { self.alloc.host_slice_mut() }.copy_from_slice(data);
    }
}

/// The memory a job touches: its address for the kernel, its claim, and what keeps it alive.
#[doc(hidden)]
pub struct Binding {
    pub(crate) deps: Vec<Completion>,
    keep: Vec<Arc<dyn Send + Sync>>,
    pub(crate) done: Completion,
}

impl Binding {
    pub(crate) fn new() -> Binding {
        Binding {
            deps: Vec::new(),
            keep: Vec::new(),
            done: Completion::pending(),
        }
    }

    /// Claims `memory` for this job; returns its first element's address.
    pub(crate) fn claim<T: Element>(
        &mut self,
        memory: &Arc<EmuMemory<T>>,
        access: Access,
    ) -> *mut T {
        self.deps.extend(memory.alloc.claim(access, &self.done));
        self.keep.push(memory.clone());
        memory.alloc.as_ptr()
    }

    /// Runs `work` here and now, after the work this job depends on.
    pub(crate) fn run_inline(
        self,
        work: impl FnOnce() -> Result<(), Box<EmuError>>,
    ) -> Result<(), Box<EmuError>> {
        stream::run_after(&self.deps, &self.done, || true, work)
    }

    /// Queues `work` on `stream`, keeping the claimed memory alive until it has run.
    pub(crate) fn enqueue(
        self,
        stream: &EmuStream,
        work: impl FnOnce() -> Result<(), Box<EmuError>> + Send + 'static,
    ) {
        let keep = self.keep;
        stream.enqueue(self.deps, self.done, move || {
            let result = work();
            drop(keep);
            result
        });
    }
}

/// The `KernelFault` for an emulator fault in a launch of this shape.
pub(crate) fn kernel_fault(e: Box<EmuError>, grid: Dim3, block: Dim3) -> Error {
    Error::KernelFault {
        kernel: e.kernel.clone(),
        grid,
        block,
        code: FaultCode::from_emulator(&e.fault),
        detail: format!(
            "block {}, thread {}: {}",
            e.block,
            e.thread,
            e.details().join("; ")
        ),
        emulated: Some(e),
    }
}
