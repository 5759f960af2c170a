//! Speed of the CPU emulator in the unit its cost scales with: thread-barriers
//! per second (each emulated thread passing one `sync_threads` is one), with
//! and without shared- and global-memory traffic (race-checked unless
//! `WARPFORGE_EMU_RACECHECK=0`), each with the memory-traffic profile off and
//! on (`Device::profile_memory`). It measures, it asserts nothing; the figures
//! are quoted in `warpforge_device::emu`'s module doc.
//!
//! `cargo bench -p warpforge --bench emulator`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use warpforge::{Device, Dim3, LaunchConfig};
use warpforge_device::{Out, shared, sync, thread};
use warpforge_macros::kernel;

/// `rounds` barriers per thread; with `touch` = 1 each round also writes this
/// thread's shared slot and reads its neighbour's; with `touch` = 2 it writes
/// this thread's output element and reads its neighbour's (in the block).
#[kernel(shared = [u32; 256])]
fn barrier_rounds(rounds: u32, touch: u32, mut out: Out<u32>) {
    let s = shared::dynamic::<u32>();
    let t = thread::thread_idx().x as usize;
    let n = thread::block_dim().x as usize;
    let first = thread::block_idx().x as usize * n;
    let mut acc = 0u32;
    for r in 0..rounds {
        if touch == 1 {
            s.store(t, r + t as u32);
        } else if touch == 2
            && let Some(mut o) = out.at(first + t)
        {
            o.set(r + t as u32);
        }
        sync::sync_threads();
        if touch == 1 {
            acc = acc.wrapping_add(s.load((t + 1) % n));
        } else if touch == 2
            && let Some(o) = out.at(first + (t + 1) % n)
        {
            acc = acc.wrapping_add(o.get());
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
    for touch in [0u32, 1, 2] {
        let name = match touch {
            0 => "barriers only",
            1 => "with shared traffic",
            _ => "with global traffic",
        };
        group.bench_with_input(BenchmarkId::from_parameter(name), &touch, |b, &touch| {
            b.iter(|| {
                dev.launch(barrier_rounds, cfg, (rounds, touch, &mut out))
                    .unwrap()
            })
        });
        // The same launch with the memory-traffic profile on.
        let profiled = format!("{name}, memory profile on");
        group.bench_with_input(
            BenchmarkId::from_parameter(profiled),
            &touch,
            |b, &touch| {
                b.iter(|| {
                    dev.profile_memory(|| {
                        dev.launch(barrier_rounds, cfg, (rounds, touch, &mut out))
                    })
                    .unwrap()
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench_barriers);
criterion_main!(benches);
