//! Throughput of the pipeline kernels on the best device present (GPU 0, else
//! the emulator, whose numbers only track emulator speed). Reports bytes moved
//! per second; it measures, it asserts nothing.
//!
//! `cargo bench -p warpforge --bench kernels`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use warpforge::{Device, ops, reduce};

fn sizes(dev: &Device) -> Vec<usize> {
    if dev.is_gpu() {
        (16..=26).step_by(2).map(|p| 1usize << p).collect()
    } else {
        vec![1 << 12, 1 << 16]
    }
}

fn bench_axpy(c: &mut Criterion) {
    let (dev, why) = Device::auto();
    if let Some(why) = why {
        eprintln!("no GPU ({why}); benchmarking the emulator");
    }
    let mut group = c.benchmark_group(format!("axpy_f32 on {}", dev.name()));
    for n in sizes(&dev) {
        let x = dev.upload(&vec![1.0f32; n]).expect("upload");
        let mut y = dev.upload(&vec![2.0f32; n]).expect("upload");
        // Reads x and y, writes y.
        group.throughput(Throughput::Bytes(3 * 4 * n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                ops::axpy(1.0001f32, &x, &mut y).expect("axpy");
                dev.synchronize().expect("sync");
            })
        });
    }
    group.finish();
}

fn bench_sum(c: &mut Criterion) {
    let (dev, _) = Device::auto();
    let mut group = c.benchmark_group(format!("reduce::sum f32 on {}", dev.name()));
    for n in sizes(&dev) {
        let x = dev.upload(&vec![0.5f32; n]).expect("upload");
        group.throughput(Throughput::Bytes(4 * n as u64));
        // `reduce::sum` copies the result to the host, so each iteration includes the sync.
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| reduce::sum(&x).expect("sum"))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench_axpy, bench_sum
}
criterion_main!(benches);
