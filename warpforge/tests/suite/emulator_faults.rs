//! Deliberately broken kernels: each emulator detector fires, as the right
//! `Fault`, naming the kernel, block and thread; and their correct versions
//! run clean.

use warpforge::{Device, Dim3, Error, Fault, LaunchConfig};
use warpforge_device::emu::Access;
use warpforge_device::thread::{block_dim, block_idx, global_index_x, lane_id, thread_idx};
use warpforge_device::warp::{self, FULL_MASK};
use warpforge_device::{Global, Out, atomic, mma, shared, sync};
use warpforge_macros::kernel;

/// Reads one element past its input in the last thread.
#[kernel]
fn reads_past_end(x: &[f32], mut out: Out<f32>) {
    let i = global_index_x();
    if let Some(mut o) = out.at(i) {
        o.set(x[i + 1]);
    }
}

/// Thread 5 of every block returns before the barrier the others wait at.
#[kernel]
fn early_return_before_barrier(mut out: Out<u32>) {
    if thread_idx().x == 5 {
        return;
    }
    sync::sync_threads();
    if let Some(mut o) = out.at(global_index_x()) {
        o.set(1);
    }
}

/// Only the low half-warp shuffles, but with the full mask.
#[kernel]
fn half_warp_full_mask(mut out: Out<f32>) {
    if lane_id() < 16 {
        let v = warp::shuffle_xor(FULL_MASK, lane_id() as f32, 1);
        if let Some(mut o) = out.at(global_index_x()) {
            o.set(v);
        }
    }
}

/// Every thread of an oversized grid tries to write its own index.
#[kernel]
fn writes_own_index(mut out: Out<u32>) {
    let i = global_index_x();
    if let Some(mut o) = out.at(i) {
        o.set(i as u32);
    }
}

/// Insists on writing its own index even past the end of the output (a kernel
/// that assumes its grid matches its buffer): the guard gives no slot, and
/// the `expect` turns that into a fault instead of a stray write.
#[kernel]
fn insists_on_writing_past_the_end(mut out: Out<u32>) {
    let i = global_index_x();
    out.at(i).expect("output index out of bounds").set(i as u32);
}

/// Writes one element past its shared array in thread 3 of block 1.
#[kernel(shared = [u32; 64])]
fn writes_past_shared(mut out: Out<u32>) {
    let s = shared::dynamic::<u32>();
    let t = thread_idx().x as usize;
    let i = if block_idx().x == 1 && t == 3 {
        s.len()
    } else {
        t
    };
    s.store(i, 1);
    if let Some(mut o) = out.at(global_index_x()) {
        o.set(1);
    }
}

/// Every thread writes shared[0]: a write-write race.
#[kernel(shared = [u32; 1])]
fn all_write_one_word(mut out: Out<u32>) {
    let s = shared::dynamic::<u32>();
    s.store(0, thread_idx().x);
    if let Some(mut o) = out.at(global_index_x()) {
        o.set(1);
    }
}

/// Each thread writes its slot and reads its neighbour's, with the barrier
/// between them only when `synced` is 1: the unsynced version is a read-after-write race.
#[kernel(shared = [f32; 64])]
fn neighbour_exchange(synced: u32, mut out: Out<f32>) {
    let s = shared::dynamic::<f32>();
    let t = thread_idx().x as usize;
    let n = block_dim().x as usize;
    s.store(t, t as f32);
    if synced == 1 {
        sync::sync_threads();
    }
    let v = s.load((t + n - 1) % n);
    if let Some(mut o) = out.at(global_index_x()) {
        o.set(v);
    }
}

/// Asserts that the error's message contains every one of `parts`.
fn assert_mentions(e: &warpforge::EmuError, parts: &[&str]) {
    let text = e.to_string();
    for part in parts {
        assert!(text.contains(part), "{part:?} not in: {text}");
    }
}

/// Asserts that the report's headline names `kernel`, the fault `class` at a
/// line of this file, and the block and thread.
fn assert_headline(e: &warpforge::EmuError, kernel: &str, class: &str, block: Dim3, thread: Dim3) {
    let headline = e.headline();
    assert!(
        headline.starts_with(&format!("kernel `{kernel}`: {class} at {}:", file!())),
        "{headline}"
    );
    assert!(
        headline.ends_with(&format!(", block {block}, thread {thread}")),
        "{headline}"
    );
    assert!(e.to_string().starts_with(&format!("{headline}\n")), "{e}");
}

fn fault_of(result: warpforge::Result<()>) -> warpforge::EmuError {
    match result {
        Err(Error::KernelFault {
            emulated: Some(e), ..
        }) => *e,
        other => panic!("expected a kernel fault, got {other:?}"),
    }
}

#[test]
fn out_of_bounds_read_names_the_thread() {
    let dev = Device::emulator();
    let x = dev.upload(&[1.0f32; 100]).unwrap();
    let mut out = dev.alloc_zeroed::<f32>(100).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(4), Dim3::x(32));
    let e = fault_of(dev.launch(reads_past_end, cfg, (&x, &mut out)));
    assert_eq!(e.kernel, "reads_past_end");
    // Element 99 reads x[100]: thread 3 of block 3.
    assert_eq!(
        (e.block, e.thread),
        (Dim3::new(3, 0, 0), Dim3::new(3, 0, 0))
    );
    let Fault::Panic { message, at } = &e.fault else {
        panic!("{e}")
    };
    assert!(message.contains("index out of bounds"), "{message}");
    // The read `x[i + 1]`, in this file.
    assert_eq!(at.map(|l| l.file), Some(file!()), "{e}");
    assert_headline(&e, "reads_past_end", "panic", idx(3), idx(3));
}

#[test]
fn divergent_barrier_is_reported_not_hung() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(64).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(2), Dim3::x(32));
    let e = fault_of(dev.launch(early_return_before_barrier, cfg, (&mut out,)));
    assert_eq!(e.thread, Dim3::new(5, 0, 0));
    assert_eq!(e.block, Dim3::new(0, 0, 0));
    let Fault::DivergentBarrier {
        waiting,
        exited,
        waiting_at,
        exited_after,
    } = &e.fault
    else {
        panic!("{e}")
    };
    assert_eq!((*waiting, *exited), (31, 1), "{e}");
    // All 31 at the one barrier, in this file; thread 5 made no device call.
    assert_eq!(waiting_at.len(), 1, "{e}");
    assert_eq!(
        (waiting_at[0].0.file, waiting_at[0].1),
        (file!(), 31),
        "{e}"
    );
    assert_eq!(*exited_after, None, "{e}");
}

#[test]
fn warp_collective_with_absent_lanes_names_the_first_missing_lane() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<f32>(32).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(32));
    let e = fault_of(dev.launch(half_warp_full_mask, cfg, (&mut out,)));
    let Fault::WarpMask {
        mask, missing_lane, ..
    } = e.fault
    else {
        panic!("{e}")
    };
    assert_eq!((mask, missing_lane), (FULL_MASK, 16));
}

#[test]
fn guard_drops_writes_past_the_end_of_an_output() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(50).unwrap();
    // 128 threads, 50 elements: 78 threads get no slot and write nothing.
    let cfg = LaunchConfig::new(Dim3::x(2), Dim3::x(64));
    dev.launch(writes_own_index, cfg, (&mut out,)).unwrap();
    assert_eq!(out.to_host().unwrap(), (0..50).collect::<Vec<u32>>());
}

/// A block or thread index along x (y = z = 0).
fn idx(x: u32) -> Dim3 {
    Dim3::new(x, 0, 0)
}

#[test]
fn an_insisted_out_of_bounds_write_is_a_fault_naming_the_thread() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(100).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(2), Dim3::x(64));
    let e = fault_of(dev.launch(insists_on_writing_past_the_end, cfg, (&mut out,)));
    // Element 100 is thread 36 of block 1, the first past the end.
    assert_eq!((e.block, e.thread), (idx(1), idx(36)), "{e}");
    assert!(matches!(&e.fault, Fault::Panic { message, .. } if message.contains("out of bounds")));
    // As on a GPU, the device is unusable afterwards: no garbage is read back.
    assert!(matches!(out.to_host(), Err(Error::ContextPoisoned { .. })));
}

#[test]
fn a_shared_memory_write_out_of_bounds_names_block_and_thread() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(128).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(2), Dim3::x(64));
    let e = fault_of(dev.launch(writes_past_shared, cfg, (&mut out,)));
    assert_eq!((e.block, e.thread), (idx(1), idx(3)), "{e}");
    assert!(
        e.to_string().contains("shared memory write out of bounds"),
        "{e}"
    );
}

#[test]
fn racy_shared_writes_are_reported_with_both_threads() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(64).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(64));
    let e = fault_of(dev.launch(all_write_one_word, cfg, (&mut out,)));
    let Fault::SharedRace {
        offset,
        other,
        this_writes,
        other_writes,
        at,
        other_at,
    } = e.fault.clone()
    else {
        panic!("{e}")
    };
    // Thread 0 wrote first; thread 1 is the first to conflict.
    assert_eq!(
        (offset, other, this_writes, other_writes),
        (0, Some(idx(0)), true, true),
        "{e}"
    );
    // Both at the kernel's one `s.store`, in this file.
    assert_eq!(at.file, file!(), "{e}");
    assert_eq!(other_at, Some(at), "{e}");
    assert_eq!(e.thread, idx(1));
    assert!(e.to_string().contains("put sync_threads() between"), "{e}");
}

#[test]
fn a_read_after_write_without_a_barrier_is_a_race_and_with_one_is_not() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<f32>(64).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(64));
    let e = fault_of(dev.launch(neighbour_exchange, cfg, (0u32, &mut out)));
    let Fault::SharedRace {
        other,
        this_writes,
        other_writes,
        ..
    } = e.fault.clone()
    else {
        panic!("{e}")
    };
    // Thread 0 reads slot 63 (written by nobody yet), thread 1 reads slot 0,
    // which thread 0 wrote in the same barrier interval.
    assert_eq!(
        (e.thread, other, this_writes, other_writes),
        (idx(1), Some(idx(0)), false, true),
        "{e}"
    );

    // The fault poisoned that device; the barrier-separated version runs clean on a new one.
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<f32>(64).unwrap();
    dev.launch(neighbour_exchange, cfg, (1u32, &mut out))
        .unwrap();
    let expect: Vec<f32> = (0..64).map(|t| ((t + 63) % 64) as f32).collect();
    assert_eq!(out.to_host().unwrap(), expect);
}

// ---- Global memory: races on output buffers ----

/// Every thread writes element 0 of `out`: a write-write race within the block.
#[kernel]
fn all_write_element_zero(mut out: Out<u32>) {
    if let Some(mut o) = out.at(0) {
        o.set(thread_idx().x);
    }
}

/// Every thread adds 1 to element 0 atomically: no race.
#[kernel]
fn all_add_to_element_zero(out: Out<u32>) {
    if let Some(a) = out.atomic::<atomic::Device>(0) {
        a.fetch_add(1);
    }
}

/// Block `b` writes `out[b·stride + t]`: blocks overlap when `stride` is
/// less than the block's width, and own disjoint ranges when it is not.
#[kernel]
fn block_ranges(stride: u32, mut out: Out<u32>) {
    let i = (block_idx().x * stride + thread_idx().x) as usize;
    if let Some(mut o) = out.at(i) {
        o.set(block_idx().x);
    }
}

/// Each thread writes `out[t]`, then reads its neighbour's `out[t + 1]` into
/// `seen[t]`, with a barrier between only when `synced` is 1.
#[kernel]
fn reads_neighbours_output(synced: u32, mut out: Out<u32>, mut seen: Out<u32>) {
    let t = thread_idx().x as usize;
    let n = block_dim().x as usize;
    if let Some(mut o) = out.at(t) {
        o.set(t as u32 + 100);
    }
    if synced == 1 {
        sync::sync_threads();
    }
    let v = out.at((t + 1) % n).map_or(0, |o| o.get());
    if let Some(mut s) = seen.at(t) {
        s.set(v);
    }
}

/// Thread 0 zeroes `out[0]` plainly while the others add to it atomically,
/// with a barrier between only when `synced` is 1.
#[kernel]
fn plain_init_then_atomic_adds(synced: u32, mut out: Out<u32>) {
    if thread_idx().x == 0
        && let Some(mut o) = out.at(0)
    {
        o.set(0);
    }
    if synced == 1 {
        sync::sync_threads();
    }
    if thread_idx().x != 0
        && let Some(a) = out.atomic::<atomic::Device>(0)
    {
        a.fetch_add(1);
    }
}

/// The "last block" reduction: thread 0 of each block writes its partial
/// result, and the block that takes the last ticket sums them. With `fenced`
/// 1 each block fences before taking its ticket and the last one after (a
/// release and an acquire); without, the last block's reads race.
#[kernel]
fn last_block_sums(fenced: u32, mut partial: Out<u32>, tickets: Out<u32>, mut total: Out<u32>) {
    if thread_idx().x != 0 {
        return;
    }
    let b = block_idx().x as usize;
    if let Some(mut p) = partial.at(b) {
        p.set(b as u32 + 1);
    }
    if fenced == 1 {
        sync::fence(sync::Scope::Device);
    }
    let blocks = warpforge_device::thread::grid_dim().x;
    let ticket = tickets
        .atomic::<atomic::Device>(0)
        .map_or(0, |a| a.fetch_add(1));
    if ticket + 1 == blocks {
        if fenced == 1 {
            sync::fence(sync::Scope::Device);
        }
        let sum = (0..blocks as usize)
            .map(|j| partial.at(j).map_or(0, |p| p.get()))
            .sum();
        if let Some(mut t) = total.at(0) {
            t.set(sum);
        }
    }
}

/// A global race as (this block, this thread, other block, other thread,
/// this access, other access, buffer, element).
type GlobalRaceView = (
    Dim3,
    Dim3,
    Dim3,
    Option<Dim3>,
    Access,
    Access,
    &'static str,
    usize,
);

/// The global race a fault is.
fn global_race(e: &warpforge::EmuError) -> GlobalRaceView {
    let Fault::GlobalRace {
        buffer,
        element,
        other_block,
        other,
        this_access,
        other_access,
        at,
        other_at,
    } = e.fault
    else {
        panic!("expected a global race: {e}")
    };
    // Both accesses are the kernels' own, in this file.
    assert_eq!(
        (at.file, other_at.map(|l| l.file)),
        (file!(), Some(file!())),
        "{e}"
    );
    (
        e.block,
        e.thread,
        other_block,
        other,
        this_access,
        other_access,
        buffer,
        element,
    )
}

#[test]
fn every_thread_writing_element_0_is_a_race_naming_buffer_element_and_both_threads() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(64).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(64));
    let e = fault_of(dev.launch(all_write_element_zero, cfg, (&mut out,)));
    // Thread 0 wrote first; thread 1 is the first to conflict.
    assert_eq!(
        global_race(&e),
        (
            idx(0),
            idx(1),
            idx(0),
            Some(idx(0)),
            Access::Write,
            Access::Write,
            "out",
            0
        ),
        "{e}"
    );
    assert_headline(
        &e,
        "all_write_element_zero",
        "global-memory race",
        idx(0),
        idx(1),
    );
    assert_mentions(
        &e,
        &[
            "this thread writes `out`[0] at",
            "thread (0, 0, 0) of block (0, 0, 0) wrote it at",
            "give each thread its own elements",
        ],
    );
}

#[test]
fn atomic_adds_to_one_element_from_every_block_are_not_a_race() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(1).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(4), Dim3::x(64));
    dev.launch(all_add_to_element_zero, cfg, (&mut out,))
        .unwrap();
    assert_eq!(out.to_host().unwrap(), [256]);
}

#[test]
fn two_blocks_writing_overlapping_ranges_race_and_disjoint_ones_do_not() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(64).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(2), Dim3::x(32));
    // Block 0 writes 0..32, block 1 writes 24..56.
    let e = fault_of(dev.launch(block_ranges, cfg, (24u32, &mut out)));
    let (block, thread, other_block, other, this, that, buffer, element) = global_race(&e);
    assert_eq!((this, that, buffer), (Access::Write, Access::Write, "out"));
    assert!((24..32).contains(&element), "{e}");
    // The blocks run on different OS threads: either may be the later one.
    let mut pair = [(block, thread), (other_block, other.expect("one thread"))];
    pair.sort_by_key(|(b, _)| b.x);
    let element = element as u32;
    assert_eq!(
        pair,
        [(idx(0), idx(element)), (idx(1), idx(element - 24))],
        "{e}"
    );
    assert!(e.to_string().contains("blocks are not ordered"), "{e}");

    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(64).unwrap();
    dev.launch(block_ranges, cfg, (32u32, &mut out)).unwrap();
    let expect: Vec<u32> = (0..64).map(|i| i / 32).collect();
    assert_eq!(out.to_host().unwrap(), expect);
}

#[test]
fn reading_another_threads_output_without_a_barrier_is_a_race_and_with_one_is_not() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(32).unwrap();
    let mut seen = dev.alloc_zeroed::<u32>(32).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(32));
    let e = fault_of(dev.launch(reads_neighbours_output, cfg, (0u32, &mut out, &mut seen)));
    // Thread 0 reads out[1] before thread 1 writes it.
    assert_eq!(
        global_race(&e),
        (
            idx(0),
            idx(1),
            idx(0),
            Some(idx(0)),
            Access::Write,
            Access::Read,
            "out",
            1
        ),
        "{e}"
    );

    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(32).unwrap();
    let mut seen = dev.alloc_zeroed::<u32>(32).unwrap();
    dev.launch(reads_neighbours_output, cfg, (1u32, &mut out, &mut seen))
        .unwrap();
    let expect: Vec<u32> = (0..32).map(|t| (t + 1) % 32 + 100).collect();
    assert_eq!(seen.to_host().unwrap(), expect);
}

#[test]
fn a_plain_write_mixed_with_atomics_is_a_race_unless_a_barrier_orders_it() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(1).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(32));
    let e = fault_of(dev.launch(plain_init_then_atomic_adds, cfg, (0u32, &mut out)));
    assert_eq!(
        global_race(&e),
        (
            idx(0),
            idx(1),
            idx(0),
            Some(idx(0)),
            Access::Atomic,
            Access::Write,
            "out",
            0
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains("make every access to it atomic"),
        "{e}"
    );

    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(1).unwrap();
    dev.launch(plain_init_then_atomic_adds, cfg, (1u32, &mut out))
        .unwrap();
    assert_eq!(out.to_host().unwrap(), [31]);
}

#[test]
fn fences_with_an_atomic_ticket_order_blocks_and_without_them_the_reads_race() {
    let blocks = 6u32;
    let cfg = LaunchConfig::new(Dim3::x(blocks), Dim3::x(32));
    let run = |fenced: u32| {
        let dev = Device::emulator();
        let mut partial = dev.alloc_zeroed::<u32>(blocks as usize).unwrap();
        let mut tickets = dev.alloc_zeroed::<u32>(1).unwrap();
        let mut total = dev.alloc_zeroed::<u32>(1).unwrap();
        dev.launch(
            last_block_sums,
            cfg,
            (fenced, &mut partial, &mut tickets, &mut total),
        )
        .map(|()| total.to_host().unwrap()[0])
    };
    assert_eq!(run(1).unwrap(), (1..=blocks).sum::<u32>());
    let e = fault_of(run(0).map(drop));
    let (block, thread, other_block, other, this, that, buffer, element) = global_race(&e);
    assert_eq!(
        (thread, other, this, that, buffer),
        (idx(0), Some(idx(0)), Access::Read, Access::Write, "partial"),
        "{e}"
    );
    // The last block read another block's partial result.
    assert_ne!(block, other_block, "{e}");
    assert_eq!(other_block, idx(element as u32), "{e}");
}

// ---- Shared memory: reads of bytes no thread wrote ----

/// Only the first half of the block fills the shared array; then every
/// thread reads its own element.
#[kernel(shared = [f32; 64])]
fn reads_half_filled_shared(mut out: Out<f32>) {
    let s = shared::dynamic::<f32>();
    let t = thread_idx().x as usize;
    if t < 32 {
        s.store(t, t as f32);
    }
    sync::sync_threads();
    let v = s.load(t);
    if let Some(mut o) = out.at(t) {
        o.set(v);
    }
}

/// A shared histogram whose bins nobody zeroed: the atomic adds read 0xFF bytes.
#[kernel(shared = [u32; 4])]
fn unzeroed_shared_histogram(zeroed: u32, out: Out<u32>) {
    let hist = shared::dynamic::<u32>();
    let t = thread_idx().x as usize;
    if zeroed == 1 && t < 4 {
        hist.store(t, 0);
    }
    sync::sync_threads();
    hist.atomic::<atomic::Block>(t % 4).fetch_add(1);
    sync::sync_threads();
    if t < 4
        && let Some(a) = out.atomic::<atomic::Device>(t)
    {
        a.fetch_add(hist.load(t));
    }
}

#[test]
fn reading_shared_memory_no_thread_wrote_names_the_byte_and_the_fix() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<f32>(64).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(64));
    let e = fault_of(dev.launch(reads_half_filled_shared, cfg, (&mut out,)));
    // Thread 32 is the first to read an element (its own, byte 128) that nobody stored.
    assert_eq!(
        (e.thread, &e.fault),
        (
            idx(32),
            &Fault::UninitSharedRead {
                offset: 128,
                at: e.fault.location().unwrap()
            }
        ),
        "{e}"
    );
    assert_headline(
        &e,
        "reads_half_filled_shared",
        "read of uninitialised shared memory",
        idx(0),
        idx(32),
    );
    assert_mentions(
        &e,
        &[
            "this thread reads byte 128 of shared memory at",
            "store every element before reading it",
        ],
    );
}

#[test]
fn an_atomic_add_to_unzeroed_shared_memory_is_an_uninitialised_read() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(4).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(2), Dim3::x(32));
    let e = fault_of(dev.launch(unzeroed_shared_histogram, cfg, (0u32, &mut out)));
    assert_eq!(
        (e.block, e.thread, &e.fault),
        (
            idx(0),
            idx(0),
            &Fault::UninitSharedRead {
                offset: 0,
                at: e.fault.location().unwrap()
            }
        ),
        "{e}"
    );

    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(4).unwrap();
    dev.launch(unzeroed_shared_histogram, cfg, (1u32, &mut out))
        .unwrap();
    assert_eq!(out.to_host().unwrap(), [16; 4]);
}

// ---- Seeded interleaving, spins, cp.async ----

/// A histogram of `t % 4` with a plain read-modify-write of the bin: threads
/// that interleave between the read and the write lose updates on a GPU.
#[kernel]
fn plain_histogram(mut out: Out<u32>) {
    if let Some(mut bin) = out.at(thread_idx().x as usize % 4) {
        let v = bin.get();
        bin.set(v + 1);
    }
}

/// The same histogram with atomic adds.
#[kernel]
fn atomic_histogram(out: Out<u32>) {
    if let Some(bin) = out.atomic::<atomic::Device>(thread_idx().x as usize % 4) {
        bin.fetch_add(1);
    }
}

#[test]
fn a_plain_read_modify_write_histogram_is_a_race_and_the_atomic_one_is_exact() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(4).unwrap();
    // One block: which race comes first does not depend on how the OS runs blocks.
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(256));
    let e = fault_of(dev.launch(plain_histogram, cfg, (&mut out,)));
    let (block, thread, other_block, other, this, that, buffer, element) = global_race(&e);
    assert_eq!((buffer, block, other_block), ("out", idx(0), idx(0)), "{e}");
    assert!(element < 4 && other != Some(thread), "{e}");
    assert!(this == Access::Write || that == Access::Write, "{e}");
    assert!(e.to_string().contains("kernel `plain_histogram`"), "{e}");

    // A fault poisons the context: a fresh one.
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(4).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(4), Dim3::x(256));
    dev.launch(atomic_histogram, cfg, (&mut out,)).unwrap();
    assert_eq!(out.to_host().unwrap(), [256; 4]);
}

/// Without the race detector (a launch that names no outputs), the seeded
/// interleaving switches threads between a read and its write, so the plain
/// histogram loses updates in the emulator too, as it would on a GPU.
#[test]
fn the_interleaving_makes_a_plain_read_modify_write_lose_updates() {
    use warpforge_device::emu::{LaunchShape, launch};
    let mut bins = [0u32; 4];
    let addr = bins.as_mut_ptr() as usize;
    let shape = LaunchShape {
        grid: Dim3::x(1),
        block: Dim3::x(256),
        dynamic_shared_bytes: 0,
    };
    launch("plain_histogram", shape, &move || {
        // SAFETY: `bins` outlives the launch, and the kernel's accesses to it
        // are the plain read-modify-writes under test.
        let mut out = unsafe { Out::<u32>::from_raw(addr as *mut u32, 4) };
        if let Some(mut bin) = out.at(thread_idx().x as usize % 4) {
            let v = bin.get();
            bin.set(v + 1);
        }
    })
    .unwrap();
    let total: u32 = bins.iter().sum();
    assert!(total < 256, "no update was lost: {bins:?}");
}

/// Thread 0 spins on `flag` until it is non-zero, then writes what it saw to
/// `out[0]`; thread 40 (another warp, after it) sets the flag only if
/// `release` is 1. The flag lives in shared memory (`shared_flag` 1) or in
/// global memory.
#[kernel(shared = [u32; 1])]
fn spins_on_flag(release: u32, shared_flag: u32, flag: Out<u32>, mut out: Out<u32>) {
    let s = shared::dynamic::<u32>();
    let t = thread_idx().x;
    if t == 0 {
        s.store(0, 0);
    }
    sync::sync_threads();
    let poll = || {
        if shared_flag == 1 {
            s.atomic::<atomic::Block>(0).load()
        } else {
            flag.atomic::<atomic::Device>(0).map_or(1, |f| f.load())
        }
    };
    if t == 0 {
        let mut seen = poll();
        while seen == 0 {
            seen = poll();
        }
        if let Some(mut o) = out.at(0) {
            o.set(seen);
        }
    } else if t == 40 && release == 1 {
        if shared_flag == 1 {
            s.atomic::<atomic::Block>(0).swap(7);
        } else if let Some(f) = flag.atomic::<atomic::Device>(0) {
            f.swap(7);
        }
    }
}

/// Launches `spins_on_flag` on a thread of its own, failing the test instead
/// of hanging if it does not end within a minute; returns the result and `out`.
fn spin_launch(release: u32, shared_flag: u32) -> (warpforge::Result<()>, Vec<u32>) {
    let (send, recv) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let dev = Device::emulator();
        let mut flag = dev.alloc_zeroed::<u32>(1).unwrap();
        let mut out = dev.alloc_zeroed::<u32>(1).unwrap();
        let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(64));
        let r = dev.launch(
            spins_on_flag,
            cfg,
            (release, shared_flag, &mut flag, &mut out),
        );
        // After a fault the context is poisoned: no copy back.
        let out = if r.is_ok() {
            out.to_host().unwrap()
        } else {
            Vec::new()
        };
        let _ = send.send((r, out));
    });
    recv.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the spinning kernel hung (no result within 60 s)")
}

#[test]
fn a_spin_on_a_flag_that_no_thread_sets_is_a_deadlock_naming_the_spinner() {
    for (shared_flag, memory) in [(1, "shared"), (0, "global")] {
        let (r, _) = spin_launch(0, shared_flag);
        let e = fault_of(r);
        let Fault::SpinDeadlock {
            spinning,
            spinners,
            global,
            at_barrier,
            at_warp_op,
            at,
            mbarrier: None,
        } = &e.fault
        else {
            panic!("expected a spin deadlock on an atomic: {e}")
        };
        assert_eq!(at.map(|l| l.file), Some(file!()), "{e}");
        assert_eq!(
            (e.thread, spinning.as_slice(), *spinners, *global),
            (idx(0), &[idx(0)][..], 1, shared_flag == 0),
            "{e}"
        );
        assert_eq!((*at_barrier, *at_warp_op), (0, 0), "{e}");
        assert_headline(&e, "spins_on_flag", "spin deadlock", idx(0), idx(0));
        assert_mentions(
            &e,
            &[
                "1 threads ((0, 0, 0)) poll an atomic",
                &format!("poll an atomic in {memory} memory"),
            ],
        );
    }
}

#[test]
fn a_spin_that_a_later_thread_of_the_block_releases_completes() {
    for shared_flag in [1, 0] {
        let (r, out) = spin_launch(1, shared_flag);
        r.unwrap();
        assert_eq!(out, [7], "shared flag: {shared_flag}");
    }
}

/// Each of 16 threads copies 16 bytes (4 words) of `src` into shared memory
/// with `cp.async`, waits for it only when `wait` is 1, and, after a barrier,
/// reads a word of its neighbour's copy (when `own` is 0) or of its own.
#[kernel(shared = [u32; 64])]
fn cp_async_then_read(wait: u32, own: u32, src: Global<u32>, mut out: Out<u32>) {
    let tile = shared::dynamic::<u32>();
    let t = thread_idx().x as usize;
    mma::cp_async_16(&tile, 4 * t, src, 4 * t);
    mma::cp_async_commit();
    if wait == 1 {
        mma::cp_async_wait_all();
    }
    let i = if own == 1 {
        4 * t + 1
    } else {
        (4 * t + 5) % 64
    };
    if own == 0 {
        sync::sync_threads();
    }
    let v = tile.load(i);
    if let Some(mut o) = out.at(t) {
        o.set(v);
    }
}

/// Where a `CpAsyncPending` fault says its copy was issued, checked to be
/// `cp_async_then_read`'s `cp_async_16` call in this file, and its read after it.
fn cp_async_issued_at(e: &warpforge::EmuError) -> warpforge::SourceLocation {
    let Fault::CpAsyncPending { at, issued_at, .. } = &e.fault else {
        panic!("{e}")
    };
    assert_eq!((at.file, issued_at.file), (file!(), file!()), "{e}");
    assert!(issued_at.line < at.line, "{e}");
    *issued_at
}

#[test]
fn reading_a_cp_async_destination_before_the_wait_is_a_fault_and_after_it_is_not() {
    let dev = Device::emulator();
    let data: Vec<u32> = (100..164).collect();
    let src = dev.upload(&data).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(16));

    // Another thread's copy, read after a barrier but before that thread waited.
    let mut out = dev.alloc_zeroed::<u32>(16).unwrap();
    let e = fault_of(dev.launch(cp_async_then_read, cfg, (0u32, 0u32, &src, &mut out)));
    assert_eq!(
        (e.thread, &e.fault),
        (
            idx(0),
            &Fault::CpAsyncPending {
                offset: 20,
                issuer: idx(1),
                this_writes: false,
                at: e.fault.location().unwrap(),
                issued_at: cp_async_issued_at(&e),
            }
        ),
        "{e}"
    );
    assert_headline(
        &e,
        "cp_async_then_read",
        "cp.async destination used before its wait",
        idx(0),
        idx(0),
    );
    assert_mentions(
        &e,
        &[
            "cp.async that thread (1, 0, 0) issued at",
            "and has not waited for",
            "cp_async_wait_all()",
        ],
    );

    // Its own copy, read before waiting (a fresh context: a fault poisons one).
    let dev = Device::emulator();
    let src = dev.upload(&data).unwrap();
    let mut out = dev.alloc_zeroed::<u32>(16).unwrap();
    let e = fault_of(dev.launch(cp_async_then_read, cfg, (0u32, 1u32, &src, &mut out)));
    assert_eq!(
        (e.thread, &e.fault),
        (
            idx(0),
            &Fault::CpAsyncPending {
                offset: 4,
                issuer: idx(0),
                this_writes: false,
                at: e.fault.location().unwrap(),
                issued_at: cp_async_issued_at(&e),
            }
        ),
        "{e}"
    );

    // With the wait, both read what was copied.
    for own in [0u32, 1] {
        let dev = Device::emulator();
        let src = dev.upload(&data).unwrap();
        let mut out = dev.alloc_zeroed::<u32>(16).unwrap();
        dev.launch(cp_async_then_read, cfg, (1u32, own, &src, &mut out))
            .unwrap();
        let expected: Vec<u32> = (0..16)
            .map(|t| {
                let i = if own == 1 {
                    4 * t + 1
                } else {
                    (4 * t + 5) % 64
                };
                data[i]
            })
            .collect();
        assert_eq!(out.to_host().unwrap(), expected, "own: {own}");
    }
}

/// Thread 0 of block 0 spins on the global `flag`; thread 0 of the last
/// block sets it if `release` is 1.
#[kernel]
fn spins_across_blocks(release: u32, flag: Out<u32>, mut out: Out<u32>) {
    let last = warpforge_device::thread::grid_dim().x - 1;
    let Some(f) = flag.atomic::<atomic::Device>(0) else {
        return;
    };
    if thread_idx().x != 0 {
        return;
    }
    if block_idx().x == 0 {
        let mut seen = f.load();
        while seen == 0 {
            seen = f.load();
        }
        if let Some(mut o) = out.at(0) {
            o.set(seen);
        }
    } else if block_idx().x == last && release == 1 {
        f.swap(9);
    }
}

#[test]
fn a_spin_on_global_memory_waits_for_other_blocks_and_is_reported_once_none_is_left() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        // With one OS thread, block 0 spins before the releasing block starts.
        return;
    }
    let run = |release: u32| {
        let (send, recv) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let dev = Device::emulator();
            let mut flag = dev.alloc_zeroed::<u32>(1).unwrap();
            let mut out = dev.alloc_zeroed::<u32>(1).unwrap();
            let cfg = LaunchConfig::new(Dim3::x(6), Dim3::x(32));
            let r = dev.launch(spins_across_blocks, cfg, (release, &mut flag, &mut out));
            let out = if r.is_ok() {
                out.to_host().unwrap()
            } else {
                Vec::new()
            };
            let _ = send.send((r, out));
        });
        recv.recv_timeout(std::time::Duration::from_secs(60))
            .expect("the spinning kernel hung (no result within 60 s)")
    };
    let (r, out) = run(1);
    r.unwrap();
    assert_eq!(out, [9]);
    let e = fault_of(run(0).0);
    assert!(
        matches!(
            &e.fault,
            Fault::SpinDeadlock {
                global: true,
                spinners: 1,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!((e.block, e.thread), (idx(0), idx(0)), "{e}");
}

/// Thread `t` stores `[4t, 4t + 1, 4t + 2, 4t + 3]` as one 16-byte vector at
/// element `4t` of shared memory, a barrier, then reads its neighbour's
/// vector back whole, and thread 3 of block 1 also reads the vector at
/// element `extra` (in bounds and aligned for multiples of 4 up to 60).
#[kernel(shared = [f32; 64])]
fn vector_shared_exchange(extra: u32, mut out: Out<f32>) {
    let s = shared::dynamic::<f32>();
    let t = thread_idx().x as usize;
    let n = block_dim().x as usize;
    let base = 4.0 * t as f32;
    s.store16::<4>(4 * t, [base, base + 1.0, base + 2.0, base + 3.0]);
    sync::sync_threads();
    let v: [f32; 4] = s.load16(4 * ((t + 1) % n));
    if block_idx().x == 1 && t == 3 {
        let _: [f32; 4] = s.load16(extra as usize);
    }
    for (q, x) in v.into_iter().enumerate() {
        if let Some(mut o) = out.at(4 * global_index_x() + q) {
            o.set(x);
        }
    }
}

#[test]
fn vector_shared_accesses_move_16_bytes_and_fault_off_bounds_or_alignment() {
    let dev = Device::emulator();
    let cfg = LaunchConfig::new(Dim3::x(2), Dim3::x(16));
    // The correct twin: every thread reads its neighbour's four values.
    let mut out = dev.alloc_zeroed::<f32>(128).unwrap();
    dev.launch(vector_shared_exchange, cfg, (60u32, &mut out))
        .unwrap();
    let got = out.to_host().unwrap();
    for (i, &x) in got.iter().enumerate() {
        let (t, q) = ((i / 4) % 16, i % 4);
        assert_eq!(x, (4 * ((t + 1) % 16) + q) as f32, "out[{i}]");
    }
    // One element past the end (64..68), and one not on a 16-byte boundary.
    // A fault poisons the device, as on a GPU: a fresh one for each.
    for (extra, what) in [(64u32, "past the end"), (2, "misaligned")] {
        let dev = Device::emulator();
        let mut out = dev.alloc_zeroed::<f32>(128).unwrap();
        let e = fault_of(dev.launch(vector_shared_exchange, cfg, (extra, &mut out)));
        assert_eq!((e.block, e.thread), (idx(1), idx(3)), "{what}: {e}");
        assert!(
            e.to_string()
                .contains("shared memory vector access out of bounds or not 16-byte aligned"),
            "{what}: {e}"
        );
    }
}
