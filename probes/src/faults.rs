//! Planted faults: one kernel per class of fault the emulator reports
//! (`probe_fault_*`, as every probe's name starts with `probe_`), each
//! with its faulting access marked in the source by a `planted:` comment
//! beside it, and the line of that comment as a constant (`*_LINE`, found in
//! this file at compile time, so they cannot drift from the code). Every
//! kernel takes `fixed`: 0 plants the fault, 1 runs its correct twin, which
//! must run clean.
//!
//! A test launches each on the emulator and checks that the fault names
//! [`FILE`] and the planted lines (both sides of a race). Launch with one
//! block of [`BLOCK`] threads unless a kernel says otherwise.

use warpforge_device::atomic::Block;
use warpforge_device::thread::{global_index_x, lane_id, thread_idx};
use warpforge_device::warp::{self, FULL_MASK};
use warpforge_device::{Global, Out, mma, shared, sync};
use warpforge_macros::kernel;

/// This file, as the compiler names it (and the emulator's locations do).
pub const FILE: &str = file!();

/// The threads of the one block each planted kernel is launched with.
pub const BLOCK: u32 = 64;

/// This file's text, searched for the markers at compile time.
const SOURCE: &str = include_str!("faults.rs");

/// Whether `text` holds `part` at byte `at`.
const fn holds_at(text: &[u8], at: usize, part: &[u8]) -> bool {
    if at + part.len() > text.len() {
        return false;
    }
    let mut i = 0;
    while i < part.len() {
        if text[at + i] != part[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The line of the comment that marks `name` (the comment's prefix, then
/// `name`, then the end of the word). A missing marker fails the build.
const fn planted_line(name: &str) -> u32 {
    const PREFIX: &[u8] = b"// planted: ";
    let (text, name) = (SOURCE.as_bytes(), name.as_bytes());
    let mut line = 1;
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'\n' {
            line += 1;
        } else if holds_at(text, i, PREFIX) && holds_at(text, i + PREFIX.len(), name) {
            let end = i + PREFIX.len() + name.len();
            if end == text.len() || !(text[end].is_ascii_alphanumeric() || text[end] == b'_') {
                return line;
            }
        }
        i += 1;
    }
    panic!("a planted marker is missing from probes/src/faults.rs")
}

/// The read past the end of an input slice.
pub const INPUT_OOB_LINE: u32 = planted_line("INPUT_OOB");

/// `x[i + 1]` in the last thread (a bounds check on an input slice): a
/// panic. Launch with as many threads as `x` and `out` have elements.
#[kernel]
pub fn probe_fault_input_oob(x: &[u32], fixed: u32, mut out: Out<u32>) {
    let i = global_index_x();
    let j = if fixed == 1 { i } else { i + 1 };
    let v = x[j]; // planted: INPUT_OOB
    if let Some(mut o) = out.at(i) {
        o.set(v);
    }
}

/// The shared-memory store out of bounds.
pub const SHARED_OOB_LINE: u32 = planted_line("SHARED_OOB");

/// Thread `t` stores `s[t + 1]`: the last thread's store is past the end of
/// the shared array (a panic).
#[kernel(shared = [u32; 64])]
pub fn probe_fault_shared_oob(fixed: u32, mut out: Out<u32>) {
    let s = shared::array::<u32, 64>();
    let t = thread_idx().x as usize;
    let i = if fixed == 1 { t } else { t + 1 };
    s.store(i, 1); // planted: SHARED_OOB
    sync::sync_threads();
    if let Some(mut o) = out.at(t) {
        o.set(s.load(t));
    }
}

/// The misaligned 16-byte shared load.
pub const MISALIGNED_LINE: u32 = planted_line("MISALIGNED");

/// 16 threads store 16 bytes each, then load their neighbour's 16 bytes at
/// an element past its start: not 16-byte aligned (a panic).
#[kernel(shared = [u32; 64])]
pub fn probe_fault_misaligned(fixed: u32, mut out: Out<u32>) {
    let s = shared::array::<u32, 64>();
    let t = thread_idx().x as usize;
    if t < 16 {
        s.store16(4 * t, [t as u32; 4]);
    }
    sync::sync_threads();
    if t < 15 {
        let at = 4 * (t + 1) + if fixed == 1 { 0 } else { 1 };
        let v = s.load16::<4>(at); // planted: MISALIGNED
        if let Some(mut o) = out.at(t) {
            o.set(v[0]);
        }
    }
}

/// The guard that gives no slot, turned into a panic by the kernel.
pub const GUARD_LINE: u32 = planted_line("GUARD");

/// Every thread insists on writing `out[global index]`: past the end of
/// `out`, the guard gives no slot and `expect` panics. The twin (`fixed`)
/// skips the elements the guard refuses.
#[kernel]
pub fn probe_fault_guard(fixed: u32, mut out: Out<u32>) {
    let i = global_index_x();
    if fixed == 1 && i >= out.len() {
        return;
    }
    let mut o = out.at(i).expect("planted: output index out of bounds"); // planted: GUARD
    o.set(i as u32);
}

/// The kernel's own `panic!`.
pub const PANIC_LINE: u32 = planted_line("PANIC");

/// Panics in the thread whose input exceeds `limit` (none in the twin,
/// whose limit is the largest `u32`).
#[kernel]
pub fn probe_fault_panic(x: &[u32], fixed: u32, mut out: Out<u32>) {
    let i = global_index_x();
    let limit = if fixed == 1 { u32::MAX } else { 40 };
    let v = x.get(i).copied().unwrap_or(0);
    if v > limit {
        panic!("planted: an input is above the limit"); // planted: PANIC
    }
    if let Some(mut o) = out.at(i) {
        o.set(v);
    }
}

/// The barrier only the first 16 threads reach.
pub const BARRIER_LINE: u32 = planted_line("BARRIER");
/// The last device call of the threads that skip the barrier.
pub const BARRIER_EXIT_LINE: u32 = planted_line("BARRIER_EXIT");

/// A barrier inside `if thread_idx().x < 16`: the other threads write their
/// element and exit without reaching it.
#[kernel]
pub fn probe_fault_divergent_barrier(fixed: u32, mut out: Out<u32>) {
    let t = thread_idx().x;
    if t < 16 || fixed == 1 {
        sync::sync_threads(); // planted: BARRIER
    }
    if let Some(mut o) = out.at(global_index_x()) {
        o.set(t); // planted: BARRIER_EXIT
    }
}

/// The shuffle whose mask names lanes that never join it.
pub const MASK_MISSING_LINE: u32 = planted_line("MASK_MISSING");
/// The last device call of those lanes.
pub const MASK_MISSING_EXIT_LINE: u32 = planted_line("MASK_MISSING_EXIT");

/// The low half-warp shuffles with the full mask; the high half writes
/// and exits. The twin passes the low half's mask.
#[kernel]
pub fn probe_fault_mask_missing(fixed: u32, mut out: Out<u32>) {
    let lane = lane_id();
    let mut v = lane;
    if lane < 16 {
        let mask = if fixed == 1 { 0x0000_ffff } else { FULL_MASK };
        v = warp::shuffle_xor(mask, lane, 1); // planted: MASK_MISSING
    }
    if let Some(mut o) = out.at(global_index_x()) {
        o.set(v); // planted: MASK_MISSING_EXIT
    }
}

/// The shuffle that reads a lane outside its mask.
pub const MASK_READ_LINE: u32 = planted_line("MASK_READ");

/// The low half-warp shuffles among itself (mask `0xffff`) but reads lane
/// `lane + 16`, which is not in the mask; the twin reads `lane ^ 1`.
#[kernel]
pub fn probe_fault_mask_read(fixed: u32, mut out: Out<u32>) {
    let lane = lane_id();
    let mut v = lane;
    if lane < 16 {
        let src = if fixed == 1 { lane ^ 1 } else { lane + 16 };
        v = warp::shuffle_idx(0x0000_ffff, lane, src); // planted: MASK_READ
    }
    if let Some(mut o) = out.at(global_index_x()) {
        o.set(v);
    }
}

/// The store of the shared-memory race.
pub const SHARED_RACE_STORE_LINE: u32 = planted_line("SHARED_RACE_STORE");
/// The load of the shared-memory race.
pub const SHARED_RACE_LOAD_LINE: u32 = planted_line("SHARED_RACE_LOAD");

/// Each thread stores its slot and loads its neighbour's, with no barrier
/// between (the twin has one): thread 1's store races with thread 0's load.
#[kernel(shared = [u32; 64])]
pub fn probe_fault_shared_race(fixed: u32, mut out: Out<u32>) {
    let s = shared::array::<u32, 64>();
    let t = thread_idx().x as usize;
    s.store(t, t as u32); // planted: SHARED_RACE_STORE
    if fixed == 1 {
        sync::sync_threads();
    }
    let v = s.load((t + 1) % 64); // planted: SHARED_RACE_LOAD
    if let Some(mut o) = out.at(t) {
        o.set(v);
    }
}

/// The read of the global-memory race.
pub const GLOBAL_RACE_GET_LINE: u32 = planted_line("GLOBAL_RACE_GET");
/// The write of the global-memory race.
pub const GLOBAL_RACE_SET_LINE: u32 = planted_line("GLOBAL_RACE_SET");

/// A plain read-modify-write of `out[0]` by every thread (a histogram's
/// bin without an atomic); the twin gives each thread its own element.
#[kernel]
pub fn probe_fault_global_race(fixed: u32, mut out: Out<u32>) {
    let i = if fixed == 1 { global_index_x() } else { 0 };
    if let Some(mut o) = out.at(i) {
        let old = o.get(); // planted: GLOBAL_RACE_GET
        o.set(old + 1); // planted: GLOBAL_RACE_SET
    }
}

/// The read of shared memory no thread wrote.
pub const UNINIT_LINE: u32 = planted_line("UNINIT");

/// The first 32 threads store their slot, then every thread loads its own:
/// thread 32's slot was never written (the twin stores all 64).
#[kernel(shared = [u32; 64])]
pub fn probe_fault_uninit(fixed: u32, mut out: Out<u32>) {
    let s = shared::array::<u32, 64>();
    let t = thread_idx().x as usize;
    if t < 32 || fixed == 1 {
        s.store(t, 7);
    }
    sync::sync_threads();
    let v = s.load(t); // planted: UNINIT
    if let Some(mut o) = out.at(t) {
        o.set(v);
    }
}

/// The `cp.async` whose destination is read before the wait.
pub const CP_ASYNC_ISSUE_LINE: u32 = planted_line("CP_ASYNC_ISSUE");
/// The read of that destination.
pub const CP_ASYNC_READ_LINE: u32 = planted_line("CP_ASYNC_READ");

/// Each of the first 16 threads copies 16 bytes of `src` into shared memory
/// with `cp.async` and reads the first element back, without waiting for
/// the copy (the twin waits). `src` holds at least 64 elements.
#[kernel(shared = [u32; 64])]
pub fn probe_fault_cp_async(src: Global<u32>, fixed: u32, mut out: Out<u32>) {
    let s = shared::array::<u32, 64>();
    let t = thread_idx().x as usize;
    if t < 16 {
        mma::cp_async_16(&s, 4 * t, src, 4 * t); // planted: CP_ASYNC_ISSUE
        if fixed == 1 {
            mma::cp_async_wait_all();
        }
        let v = s.load(4 * t); // planted: CP_ASYNC_READ
        if let Some(mut o) = out.at(t) {
            o.set(v);
        }
    }
}

/// The poll of the spin that nothing releases.
pub const SPIN_LINE: u32 = planted_line("SPIN");

/// Thread 0 spins on a shared flag until it is set; only the twin's thread
/// 1 sets it.
#[kernel(shared = [u32; 1])]
pub fn probe_fault_spin(fixed: u32, mut out: Out<u32>) {
    let s = shared::array::<u32, 1>();
    let flag = s.atomic::<Block>(0);
    let t = thread_idx().x;
    if t == 0 {
        flag.swap(0);
    }
    sync::sync_threads();
    if t == 1 && fixed == 1 {
        flag.swap(1);
    }
    if t == 0 {
        while flag.load() == 0 {} // planted: SPIN
    }
    if let Some(mut o) = out.at(global_index_x()) {
        o.set(t);
    }
}
