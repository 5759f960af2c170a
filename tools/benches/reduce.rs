//! Reductions through criterion: the cases of `warpforge bench reduce`
//! (`sum`, `max`, `argmax` of f32 and bf16, whole-tensor and along each axis
//! of a matrix) and, per tensor, the device-to-device copy that anchors them,
//! each with `Throughput::Bytes` (bytes read; read + written for the copy).
//! Every sample is timed with events on the device's default stream. On GPU 0
//! if it opens (2^16 … 2^28 elements, 8192×8192), else on the emulator at
//! small sizes, whose figures only track emulator speed. It measures; it
//! asserts nothing.
//!
//! `cargo bench -p warpforge --bench reduce`; `WARPFORGE_BENCH_MAX_LOG2=N`
//! sets the largest size (2^N elements).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::time::Duration;
use warpforge::reduce::Op;
use warpforge::{Device, Error};
use warpforge_tools::bench::{self, COPY, ReduceBench, Workload};

/// Largest size on the emulator unless `WARPFORGE_BENCH_MAX_LOG2` says otherwise.
const EMULATOR_MAX_LOG2: u32 = 16;

fn bench_reduce(c: &mut Criterion) {
    let (dev, why) = Device::auto();
    if let Some(why) = why {
        eprintln!("no GPU ({why}); benchmarking the emulator at small sizes");
    }
    let max_log2 = match std::env::var("WARPFORGE_BENCH_MAX_LOG2") {
        Ok(v) => v.parse().expect("WARPFORGE_BENCH_MAX_LOG2 is a number"),
        Err(_) if dev.is_gpu() => bench::GPU_MAX_LOG2,
        Err(_) => EMULATOR_MAX_LOG2,
    };
    let config = ReduceBench::defaults(&dev)
        .with_max_log2(max_log2)
        .expect("sizes fit in usize");
    let stream = dev.default_stream();
    let mut group = c.benchmark_group(format!("reduce on {}", dev.name()));
    if !dev.is_gpu() {
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
    }
    for g in config.groups().expect("cases") {
        let mut work = match Workload::new(&dev, g.dtype, g.elements) {
            Ok(w) => w,
            Err(e @ Error::OutOfMemory { .. }) => {
                eprintln!("skipping {} and its reductions: {e}", g.cases[0]);
                continue;
            }
            Err(e) => panic!("{}: {e}", g.cases[0]),
        };
        for case in &g.cases {
            let id = BenchmarkId::from_parameter(case);
            if case.op == COPY {
                group.throughput(Throughput::Bytes(2 * work.bytes()));
                group.bench_function(id, |b| {
                    b.iter_custom(|iters| {
                        bench::time_iterations(&stream, iters, || work.copy_once()).expect("copy")
                    })
                });
                continue;
            }
            let op = Op::from_name(case.op).expect("cases name ops");
            let once = || work.reduce_once(op, &case.shape, case.axis);
            match once() {
                Ok(()) => {}
                Err(e @ Error::OutOfMemory { .. }) => {
                    eprintln!("skipping {case}: {e}");
                    continue;
                }
                Err(e) => panic!("{case}: {e}"),
            }
            group.throughput(Throughput::Bytes(work.bytes()));
            group.bench_function(id, |b| {
                b.iter_custom(|iters| {
                    bench::time_iterations(&stream, iters, &once).expect("reduce")
                })
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench_reduce
}
criterion_main!(benches);
