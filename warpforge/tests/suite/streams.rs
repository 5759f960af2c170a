//! Streams, events, pinned copies, and what the device does after a fault or
//! when memory runs out: the missing-synchronisation, OOM and poisoned-context
//! failure classes. Emulator tests always run; the GPU halves are ignored
//! without a GPU.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::{Duration, Instant};
use warpforge::{Device, Dim3, Error, FaultCode, LaunchConfig};
use warpforge_device::own::Elements;
use warpforge_device::{Out, sync, thread};
use warpforge_kernels::elementwise::axpy_f32;
use warpforge_macros::kernel;

/// `out[i] = value + i` after `rounds` block barriers: a kernel whose emulated
/// run takes a while (each barrier is a switch through every thread).
#[kernel]
pub fn slow_fill(rounds: u32, value: f32, mut out: Out<f32>) {
    for _ in 0..rounds {
        sync::sync_threads();
    }
    let i = thread::global_index_x();
    if let Some(mut o) = out.at(i) {
        o.set(value + i as f32);
    }
}

/// Writes one element past the end of `out` on purpose (the guard gives no
/// slot, and the kernel insists): a kernel fault.
#[kernel]
pub fn write_past_the_end(mut out: Out<f32>) {
    let i = thread::global_index_x();
    out.at(i + 1)
        .expect("planted fault: no slot past the end")
        .set(1.0);
}

/// A handshake between two emulated streams, through host memory both
/// kernels see (these test kernels run on the emulator only). It is outside
/// the hazard tracking that orders buffer accesses, so it can show that work
/// on two streams really runs at the same time: each side waits for the
/// other, and a side that waited [`HANDSHAKE_LIMIT`] in vain reports 0.
static KERNEL_STARTED: AtomicBool = AtomicBool::new(false);
static COPY_DONE: AtomicBool = AtomicBool::new(false);

/// Only a guard against a hang when streams are serialised; no assertion reads a time.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(60);

/// Waits until `flag` is set (true) or the limit passes (false).
fn wait_for(flag: &AtomicBool) -> bool {
    let deadline = Instant::now() + HANDSHAKE_LIMIT;
    while !flag.load(SeqCst) && Instant::now() < deadline {
        std::thread::yield_now();
    }
    flag.load(SeqCst)
}

/// Says it started, then runs until the other stream's copy is done:
/// `saw[0]` = 1 if it was.
#[kernel]
pub fn run_until_copy_done(mut saw: Out<u32, Elements>) {
    KERNEL_STARTED.store(true, SeqCst);
    let done = wait_for(&COPY_DONE);
    if let Some(mut s) = saw.mine() {
        s.set(u32::from(done));
    }
}

/// Waits for `run_until_copy_done` to be running: `started[0]` = 1 if it was.
#[kernel]
pub fn wait_for_kernel_start(mut started: Out<u32, Elements>) {
    let started_in_time = wait_for(&KERNEL_STARTED);
    if let Some(mut s) = started.mine() {
        s.set(u32::from(started_in_time));
    }
}

/// Tells `run_until_copy_done` that the copy queued before it has finished.
#[kernel]
pub fn signal_copy_done(mut signalled: Out<u32, Elements>) {
    COPY_DONE.store(true, SeqCst);
    if let Some(mut s) = signalled.mine() {
        s.set(1);
    }
}

const N: usize = 256;

fn expected(value: f32) -> Vec<f32> {
    (0..N).map(|i| value + i as f32).collect()
}

/// About 0.2–0.5 s of emulated work on one block.
const SLOW: u32 = 6000;

#[test]
fn a_host_read_waits_for_the_kernel_that_writes_it_on_another_stream() {
    let dev = Device::emulator();
    let stream = dev.new_stream().unwrap();
    let mut y = dev.alloc_zeroed::<f32>(N).unwrap();
    let cfg = LaunchConfig::for_elements(N, 256).unwrap();
    stream
        .launch(slow_fill, cfg, (SLOW, 5.0f32, &mut y))
        .unwrap();
    // No synchronize: the read itself waits for the queued writer.
    assert_eq!(y.to_host().unwrap(), expected(5.0));
}

#[test]
fn work_on_one_stream_waits_for_the_write_it_reads_on_another() {
    let dev = Device::emulator();
    let (a, b) = (dev.new_stream().unwrap(), dev.new_stream().unwrap());
    let mut x = dev.alloc_zeroed::<f32>(N).unwrap();
    let mut y = dev.upload(&vec![1.0f32; N]).unwrap();
    let cfg = LaunchConfig::for_elements(N, 256).unwrap();
    a.launch(slow_fill, cfg, (SLOW, 2.0f32, &mut x)).unwrap();
    b.launch(axpy_f32, cfg, (3.0f32, &x, &mut y)).unwrap();
    let want: Vec<f32> = expected(2.0).iter().map(|v| 3.0 * v + 1.0).collect();
    assert_eq!(y.to_host().unwrap(), want);
}

#[test]
fn a_stream_waits_for_an_event_of_another() {
    let dev = Device::emulator();
    let (a, b) = (dev.new_stream().unwrap(), dev.new_stream().unwrap());
    let mut x = dev.alloc_zeroed::<f32>(N).unwrap();
    let cfg = LaunchConfig::for_elements(N, 256).unwrap();
    a.launch(slow_fill, cfg, (SLOW, 1.0f32, &mut x)).unwrap();
    let written = a.record_event().unwrap();
    b.wait_event(&written).unwrap();
    let after = b.record_event().unwrap();
    after.synchronize().unwrap();
    assert!(
        written.is_complete().unwrap(),
        "b passed a's event before it happened"
    );
}

#[test]
fn a_copy_on_one_stream_overlaps_a_kernel_on_another() {
    let dev = Device::emulator();
    let (compute, copies) = (dev.new_stream().unwrap(), dev.new_stream().unwrap());
    let one = LaunchConfig::for_elements(1, 32).unwrap();
    let big = 1 << 22;
    let mut pinned = dev.alloc_pinned::<f32>(big).unwrap();
    pinned.copy_from_slice(&vec![7.0; big]).unwrap();
    let mut dst = dev.alloc_zeroed::<f32>(big).unwrap();
    let mut saw_copy = dev.alloc_zeroed::<u32>(1).unwrap();
    let mut kernel_started = dev.alloc_zeroed::<u32>(1).unwrap();
    let mut signalled = dev.alloc_zeroed::<u32>(1).unwrap();

    // `compute`: a kernel that runs until told the copy is done.
    compute
        .launch(run_until_copy_done, one, (&mut saw_copy,))
        .unwrap();
    let kernel_end = compute.record_event().unwrap();
    // `copies`: wait until that kernel runs, copy 16 MiB, then say so. The
    // copy therefore starts after the kernel started and ends before it ends,
    // which can only happen if the two streams run at once; serialised, one
    // side would wait for the other in vain and report 0.
    copies
        .launch(wait_for_kernel_start, one, (&mut kernel_started,))
        .unwrap();
    let copy_start = copies.record_event().unwrap();
    copies.upload(&pinned, &mut dst).unwrap();
    let copy_end = copies.record_event().unwrap();
    copies
        .launch(signal_copy_done, one, (&mut signalled,))
        .unwrap();

    kernel_end.synchronize().unwrap();
    assert_eq!(
        kernel_started.to_host().unwrap(),
        [1],
        "the kernel never started"
    );
    assert_eq!(signalled.to_host().unwrap(), [1]);
    assert_eq!(
        saw_copy.to_host().unwrap(),
        [1],
        "the kernel ended without seeing the copy on the other stream finish"
    );
    // Ordered by events too: the copy was complete when the kernel's end was reached.
    assert!(copy_start.is_complete().unwrap() && copy_end.is_complete().unwrap());
    assert_eq!(dst.to_host().unwrap(), vec![7.0; big]);
}

#[test]
fn on_one_stream_a_copy_waits_for_the_kernel_before_it() {
    let dev = Device::emulator();
    let stream = dev.new_stream().unwrap();
    let mut y = dev.alloc_zeroed::<f32>(N).unwrap();
    let cfg = LaunchConfig::for_elements(N, 256).unwrap();
    let mut pinned = dev.alloc_pinned::<f32>(N).unwrap();
    stream
        .launch(slow_fill, cfg, (SLOW, 9.0f32, &mut y))
        .unwrap();
    stream.download(&y, &mut pinned).unwrap();
    // Reading pinned memory waits for the download, which waited for the kernel.
    assert_eq!(pinned.as_slice().unwrap(), &expected(9.0)[..]);
}

#[test]
fn events_time_the_work_between_them() {
    let dev = Device::emulator();
    let stream = dev.new_stream().unwrap();
    let mut y = dev.alloc_zeroed::<f32>(N).unwrap();
    let cfg = LaunchConfig::for_elements(N, 256).unwrap();
    let start = stream.record_event().unwrap();
    stream
        .launch(slow_fill, cfg, (SLOW, 0.0f32, &mut y))
        .unwrap();
    let end = stream.record_event().unwrap();
    let t = end.elapsed_since(&start).unwrap();
    assert!(t > Duration::from_millis(1), "{t:?}");
    assert!(end.is_complete().unwrap());
}

#[test]
fn copies_of_different_lengths_or_devices_are_refused() {
    let dev = Device::emulator();
    let other = Device::emulator();
    let stream = dev.new_stream().unwrap();
    let pinned = dev.alloc_pinned::<f32>(4).unwrap();
    let mut short = dev.alloc_zeroed::<f32>(3).unwrap();
    let e = stream.upload(&pinned, &mut short).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                op: "Stream::upload",
                ..
            }
        ),
        "{e}"
    );
    let mut elsewhere = other.alloc_zeroed::<f32>(4).unwrap();
    let e = stream.upload(&pinned, &mut elsewhere).unwrap_err();
    assert!(matches!(e, Error::DeviceMismatch { .. }), "{e}");
    let e = elsewhere.copy_from(&short).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
}

fn assert_poisoned_by(e: &Error, kernel_name: &str) {
    let Error::ContextPoisoned { original } = e else {
        panic!("expected ContextPoisoned, got {e}")
    };
    assert!(
        matches!(&**original, Error::KernelFault { kernel, .. } if kernel == kernel_name),
        "{original}"
    );
}

#[test]
fn a_fault_is_a_kernel_fault_and_then_every_call_is_context_poisoned() {
    let dev = Device::emulator();
    let mut out = dev.alloc_zeroed::<f32>(64).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(64));
    let e = dev
        .launch(write_past_the_end, cfg, (&mut out,))
        .unwrap_err();
    let Error::KernelFault {
        kernel,
        grid,
        block,
        code,
        ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(
        (kernel.as_str(), *grid, *block, *code),
        (
            "write_past_the_end",
            Dim3::x(1),
            Dim3::x(64),
            FaultCode::Trap
        )
    );
    assert!(e.to_string().contains("planted fault"), "{e}");
    // No garbage afterwards: every call names the fault that poisoned the device.
    assert_poisoned_by(&out.to_host().unwrap_err(), "write_past_the_end");
    assert_poisoned_by(
        &dev.alloc_zeroed::<f32>(1).unwrap_err(),
        "write_past_the_end",
    );
    assert_poisoned_by(&dev.synchronize().unwrap_err(), "write_past_the_end");
    // Another device is unaffected.
    assert_eq!(
        Device::emulator()
            .upload(&[1.0f32])
            .unwrap()
            .to_host()
            .unwrap(),
        [1.0]
    );
}

#[test]
fn a_fault_on_a_stream_shows_at_the_next_wait_and_poisons_the_device() {
    let dev = Device::emulator();
    let stream = dev.new_stream().unwrap();
    let mut out = dev.alloc_zeroed::<f32>(64).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(64));
    // Queuing succeeds, as a GPU launch does; the fault surfaces when waited for.
    stream.launch(write_past_the_end, cfg, (&mut out,)).unwrap();
    let e = stream.synchronize().unwrap_err();
    assert!(
        matches!(&e, Error::KernelFault { kernel, code: FaultCode::Trap, .. } if kernel == "write_past_the_end"),
        "{e}"
    );
    assert_poisoned_by(&stream.record_event().err().unwrap(), "write_past_the_end");
    assert_poisoned_by(&out.to_host().unwrap_err(), "write_past_the_end");
}

#[test]
fn out_of_memory_names_the_sizes_and_the_device_keeps_working() {
    let dev = Device::emulator_with_memory(1 << 20);
    let kept = dev.upload(&[3.0f32; 1024]).unwrap(); // 4 KiB
    let e = dev.alloc_zeroed::<f64>(1 << 18).unwrap_err(); // 2 MiB
    let Error::OutOfMemory {
        requested,
        free,
        total,
    } = e
    else {
        panic!("{e}")
    };
    assert_eq!(
        (requested, free, total),
        (2 << 20, (1 << 20) - 4096, 1 << 20)
    );
    assert!(e.to_string().contains("smaller pieces"), "{e}");
    // Nothing leaked, nothing lost: the failed allocation took no memory, the
    // old buffer is intact, and what fits still allocates and runs.
    assert_eq!(dev.memory_info().unwrap(), ((1 << 20) - 4096, 1 << 20));
    assert_eq!(kept.to_host().unwrap(), vec![3.0; 1024]);
    let x = dev.upload(&[1.0f32; 1024]).unwrap();
    let mut y = dev.alloc_zeroed::<f32>(1024).unwrap();
    dev.launch(
        axpy_f32,
        LaunchConfig::for_elements(1024, 256).unwrap(),
        (2.0f32, &x, &mut y),
    )
    .unwrap();
    assert_eq!(y.to_host().unwrap(), vec![2.0; 1024]);
    drop((x, y, kept));
    assert_eq!(dev.memory_info().unwrap(), (1 << 20, 1 << 20));
}

#[test]
fn pinned_memory_after_a_fault_is_context_poisoned_not_stale_data() {
    let dev = Device::emulator();
    let stream = dev.new_stream().unwrap();
    let mut out = dev.alloc_zeroed::<f32>(64).unwrap();
    let mut pinned = dev.alloc_pinned::<f32>(64).unwrap();
    stream
        .launch(
            write_past_the_end,
            LaunchConfig::new(Dim3::x(1), Dim3::x(64)),
            (&mut out,),
        )
        .unwrap();
    // The download depends on the faulting kernel: its data would be stale.
    stream.download(&out, &mut pinned).unwrap();
    let e = pinned.as_slice().unwrap_err();
    assert!(
        matches!(&e, Error::KernelFault { kernel, .. } if kernel == "write_past_the_end"),
        "{e}"
    );
    assert_poisoned_by(&pinned.as_slice().unwrap_err(), "write_past_the_end");
    assert_poisoned_by(&pinned.as_mut_slice().unwrap_err(), "write_past_the_end");
    assert_poisoned_by(
        &pinned.copy_from_slice(&[0.0; 64]).unwrap_err(),
        "write_past_the_end",
    );
}

#[test]
fn a_poisoned_device_is_reset_once_its_last_handle_asks_and_old_buffers_cannot_follow() {
    let dev = Device::emulator_with_memory(1 << 20);
    let stream = dev.new_stream().unwrap();
    let mut out = dev.alloc_zeroed::<f32>(64).unwrap();
    dev.launch(
        write_past_the_end,
        LaunchConfig::new(Dim3::x(1), Dim3::x(64)),
        (&mut out,),
    )
    .unwrap_err();
    // Other handles alive (a clone, the buffer, the stream): refused, naming the fault.
    let e = dev.clone().reset().unwrap_err();
    let Error::DeviceInUse {
        handles,
        poisoned_by: Some(fault),
        ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(*handles, 3, "{e}");
    assert!(
        matches!(&**fault, Error::KernelFault { kernel, .. } if kernel == "write_past_the_end"),
        "{e}"
    );
    assert!(e.to_string().contains("drop them all first"), "{e}");
    assert_poisoned_by(
        &dev.alloc_zeroed::<f32>(1).unwrap_err(),
        "write_past_the_end",
    );
    drop((out, stream));
    let fresh = dev.reset().unwrap();
    assert_eq!(fresh.memory_info().unwrap(), (1 << 20, 1 << 20));
    let x = fresh.upload(&[1.0f32; 64]).unwrap();
    let mut y = fresh.alloc_zeroed::<f32>(64).unwrap();
    fresh
        .launch(
            axpy_f32,
            LaunchConfig::for_elements(64, 64).unwrap(),
            (2.0f32, &x, &mut y),
        )
        .unwrap();
    assert_eq!(y.to_host().unwrap(), vec![2.0; 64]);
}

/// `y = 2·x + 0` on `dev`, checked: the device works.
fn assert_axpy_runs(dev: &Device) {
    let n = 4096;
    let x = dev.upload(&vec![1.5f32; n]).unwrap();
    let mut y = dev.alloc_zeroed::<f32>(n).unwrap();
    dev.launch(
        axpy_f32,
        LaunchConfig::for_elements(n, 256).unwrap(),
        (2.0f32, &x, &mut y),
    )
    .unwrap();
    assert_eq!(y.to_host().unwrap(), vec![3.0; n]);
}

/// Plants a trap: probe_transpose insists on an output of rows × cols, and
/// gets one element. Returns the fault the host read reports. Loads the
/// probes' module first: a reset or reopened device has only the library's.
fn plant_trap(dev: &Device) -> Error {
    use warpforge_testkit::{PROBES, probe_transpose};
    dev.load(&PROBES).unwrap();
    let x = dev.upload(&[1.0f32; 6]).unwrap();
    let mut out = dev.alloc_zeroed::<f32>(1).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::new(16, 16, 1));
    dev.launch(probe_transpose, cfg, (&x, 2u32, 3u32, 3u32, &mut out))
        .unwrap();
    out.to_host().unwrap_err()
}

/// Set in the child process that [`gpu_a_trap_is_a_kernel_fault_then_recovered_or_sticky`]
/// starts: the child plants the traps, the parent reads what it printed.
const TRAP_CHILD: &str = "WARPFORGE_TEST_TRAP_CHILD";
/// The child's last line: how many traps it planted.
const TRAPS_PLANTED: &str = "traps planted: ";

/// The trap, in the child: a `KernelFault` naming the kernel (not the
/// launches before it), `ContextPoisoned` for every later call, opening
/// refused while a handle lives; then recovery through the last handle's
/// `reset` and again by dropping every handle and reopening, each followed
/// by a second trap, where the driver clears the fault with a context reset,
/// or `StickyFault` naming the trap, from `reset` and from every reopening
/// (never a hang or a crash), where it keeps the fault for the life of the
/// process (driver 580 on an H200 did). Returns the traps planted.
fn trap_then_recover_or_sticky() -> usize {
    let dev = Device::gpu(0).expect("this test needs a CUDA GPU");
    // Launches and reads before the faulting one: the fault must not be blamed on them.
    assert_axpy_runs(&dev);
    assert_axpy_runs(&dev);
    let e = plant_trap(&dev);
    let Error::KernelFault { kernel, detail, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(kernel, "probe_transpose", "{e}");
    assert!(detail.contains("the only kernel in flight"), "{e}");
    assert_poisoned_by(&dev.alloc_zeroed::<f32>(1).unwrap_err(), "probe_transpose");

    // While a handle of the poisoned context lives, opening the GPU is refused.
    let e = Device::gpu(0).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::DeviceInUse {
                handles: 1,
                poisoned_by: Some(_),
                ..
            }
        ),
        "{e}"
    );
    let sticky = |e: &Error| {
        let Error::StickyFault { original, .. } = e else {
            panic!("expected StickyFault, got {e}")
        };
        assert!(
            matches!(&**original, Error::KernelFault { kernel, .. } if kernel == "probe_transpose"),
            "{e}"
        );
        assert!(e.to_string().contains("restart the process"), "{e}");
    };
    // Recovery 1: the last handle resets the device.
    let dev = match dev.reset() {
        Ok(dev) => dev,
        Err(e) => {
            sticky(&e);
            sticky(&Device::gpu(0).unwrap_err());
            return 1;
        }
    };
    assert_axpy_runs(&dev);
    // Recovery 2: fault again, drop every handle, open again.
    let e = plant_trap(&dev);
    assert!(matches!(&e, Error::KernelFault { .. }), "{e}");
    drop(dev);
    let dev = Device::gpu(0).expect("reopen after every handle was dropped");
    assert_axpy_runs(&dev);
    2
}

/// Runs [`trap_then_recover_or_sticky`] in a child process (a fault the driver
/// keeps would poison every later GPU test of this process) and reads what the
/// GPU's `vprintf` printed there: the panic's message, file and line, once per
/// faulting thread of each trap, with nothing garbled.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_a_trap_is_a_kernel_fault_then_recovered_or_sticky() {
    if std::env::var_os(TRAP_CHILD).is_some() {
        println!("{TRAPS_PLANTED}{}", trap_then_recover_or_sticky());
        return;
    }
    // The test's name in this binary: its module path without the crate's name.
    let name = format!(
        "{}::gpu_a_trap_is_a_kernel_fault_then_recovered_or_sticky",
        module_path!().split_once("::").map_or("", |(_, m)| m)
    );
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            &name,
            "--test-threads=1",
            "--nocapture",
        ])
        .env(TRAP_CHILD, "1")
        .output()
        .expect("run the test binary");
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
    // libtest writes `test NAME ... ` and then the test's own output on the
    // same line, so what is looked for may start mid-line.
    let from = |l: &'static str| move |line: &str| line.find(l).map(|i| line[i..].to_owned());
    let traps: usize = stdout
        .lines()
        .find_map(from(TRAPS_PLANTED))
        .and_then(|l| l[TRAPS_PLANTED.len()..].trim().parse().ok())
        .unwrap_or_else(|| panic!("the child says how many traps it planted:\n{stdout}"));
    let message = "out is too small for cols × rows";
    let source = include_str!("../../../probes/src/matrix.rs");
    let line = 1 + source
        .lines()
        .position(|l| l.contains(&format!("\"{message}\"")))
        .expect("the message is in the probe's source");
    let want = format!("warpforge kernel panicked at probes/src/matrix.rs:{line}: {message}");
    let printed: Vec<String> = stdout
        .lines()
        .filter_map(from("warpforge kernel panicked at"))
        .collect();
    // Each trap is a 16 × 16 block whose every thread panics.
    assert_eq!(printed.len(), traps * 256, "{stdout}");
    assert!(
        printed.iter().all(|l| *l == want),
        "want {want:?}, got {:?}",
        printed[0]
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_out_of_memory_then_the_device_keeps_working() {
    let dev = Device::gpu(0).expect("this test needs a CUDA GPU");
    let (_, total) = dev.memory_info().unwrap();
    let e = dev
        .alloc_zeroed::<u32>((total as usize + (1 << 30)) / 4)
        .unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
    let x = dev.upload(&[1.0f32; 1024]).unwrap();
    assert_eq!(x.to_host().unwrap(), vec![1.0; 1024]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_streams_order_pinned_copies_and_kernels() {
    let dev = Device::gpu(0).expect("this test needs a CUDA GPU");
    let (a, b) = (dev.new_stream().unwrap(), dev.new_stream().unwrap());
    let n = 1 << 20;
    let mut pinned = dev.alloc_pinned::<f32>(n).unwrap();
    pinned.copy_from_slice(&vec![2.0; n]).unwrap();
    let mut x = dev.alloc_zeroed::<f32>(n).unwrap();
    let mut y = dev.upload(&vec![1.0f32; n]).unwrap();
    a.upload(&pinned, &mut x).unwrap();
    b.launch(
        axpy_f32,
        LaunchConfig::for_elements(n, 256).unwrap(),
        (3.0f32, &x, &mut y),
    )
    .unwrap();
    let mut back = dev.alloc_pinned::<f32>(n).unwrap();
    a.download(&y, &mut back).unwrap();
    assert_eq!(back.as_slice().unwrap(), &vec![7.0; n][..]);
}
