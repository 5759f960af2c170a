//! Deliberately broken kernels: each emulator detector fires, as the right
//! `Fault`, naming the kernel, block and thread.

use warpforge::{Device, Dim3, Error, Fault, LaunchConfig};
use warpforge_device::thread::{global_index_x, lane_id, thread_idx};
use warpforge_device::warp::{self, FULL_MASK};
use warpforge_device::{Out, sync};
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

fn fault_of(result: warpforge::Result<()>) -> warpforge::EmuError {
    match result {
        Err(Error::KernelFault(e)) => e,
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
