//! Deliberately broken kernels: each emulator detector fires, as the right
//! `Fault`, naming the kernel, block and thread.

use warpforge::{Device, Dim3, Error, Fault, LaunchConfig};
use warpforge_device::thread::{block_dim, block_idx, global_index_x, lane_id, thread_idx};
use warpforge_device::warp::{self, FULL_MASK};
use warpforge_device::{Out, shared, sync};
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
    let Fault::Panic { message } = &e.fault else {
        panic!("{e}")
    };
    assert!(message.contains("index out of bounds"), "{message}");
    assert!(
        e.to_string()
            .contains("kernel `reads_past_end`, block (3, 0, 0), thread (3, 0, 0)")
    );
}

#[test]
fn divergent_barrier_is_reported_not_hung() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<u32>(64).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(2), Dim3::x(32));
    let e = fault_of(dev.launch(early_return_before_barrier, cfg, (&mut out,)));
    assert_eq!(e.thread, Dim3::new(5, 0, 0));
    assert_eq!(e.block, Dim3::new(0, 0, 0));
    assert_eq!(
        e.fault,
        Fault::DivergentBarrier {
            waiting: 31,
            exited: 1
        }
    );
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
    assert!(matches!(&e.fault, Fault::Panic { message } if message.contains("out of bounds")));
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
