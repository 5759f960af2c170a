//! Speed of the CPU emulator in the unit its cost scales with: thread-barriers
//! per second (each emulated thread passing one `sync_threads` is one), with
//! and without shared-memory traffic. It measures, it asserts nothing; the
//! figure is quoted in `warpforge_device::emu`'s module doc.
//!
//! `cargo bench -p warpforge --bench emulator`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use warpforge::{Device, Dim3, LaunchConfig};
use warpforge_device::{Out, shared, sync, thread};
use warpforge_macros::kernel;

/// `rounds` barriers per thread; with `touch_shared` = 1 each round also
/// writes this thread's shared slot and reads its neighbour's (race-checked).
#[kernel(shared = [u32; 256])]
fn barrier_rounds(rounds: u32, touch_shared: u32, mut out: Out<u32>) {
    let s = shared::dynamic::<u32>();
    let t = thread::thread_idx().x as usize;
    let n = thread::block_dim().x as usize;
    let mut acc = 0u32;
    for r in 0..rounds {
        if touch_shared == 1 {
            s.store(t, r + t as u32);
        }
        sync::sync_threads();
        if touch_shared == 1 {
            acc = acc.wrapping_add(s.load((t + 1) % n));
        }
        sync::sync_threads();
    }
    if let Some(mut o) = out.at(thread::global_index_x()) {
        o.set(acc);
    }
}

fn bench_barriers(c: &mut Criterion) {
    let dev = Device::emulator();
    let (blocks, threads, rounds) = (16u32, 256u32, 32u32);
    let mut out = dev
        .alloc_zeroed::<u32>((blocks * threads) as usize)
        .unwrap();
    let cfg = LaunchConfig::new(Dim3::x(blocks), Dim3::x(threads));
    let mut group = c.benchmark_group("emulator thread-barriers");
    // Two barriers per round per thread.
    group.throughput(Throughput::Elements(u64::from(
        blocks * threads * rounds * 2,
    )));
    for touch in [0u32, 1] {
        let name = if touch == 1 {
            "with shared traffic"
        } else {
            "barriers only"
        };
        group.bench_with_input(BenchmarkId::from_parameter(name), &touch, |b, &touch| {
            b.iter(|| {
                dev.launch(barrier_rounds, cfg, (rounds, touch, &mut out))
                    .unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_barriers);
criterion_main!(benches);
