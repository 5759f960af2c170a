//! conv2d through criterion: warpforge's kernels on the layers of
//! `warpforge bench conv2d` (ResNet-50 at batch 32: conv1 7×7/2, the 3×3 and
//! 1×1 layers, a depthwise 3×3; NHWC f16 and NCHW f32), each with
//! `Throughput::Elements(2·N·P·Q·K·(C/G)·R·S)` so criterion's "elements/s"
//! reads as FLOP/s, except the depthwise layer, whose throughput is its
//! least traffic in bytes. Every sample is timed with events on the device's
//! default stream. On GPU 0 if it opens (full size), else on the emulator
//! with each layer shrunk to 2^12 multiply-adds, whose figures only track
//! emulator speed. It measures; it asserts nothing. The cuDNN comparison in
//! the same run is `warpforge bench conv2d`.
//!
//! `cargo bench -p warpforge --bench conv2d`; `WARPFORGE_BENCH_MAX_LOG2=N`
//! caps each layer at 2^N multiply-adds.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use half::f16;
use std::time::Duration;
use warpforge::conv2d::ConvElement;
use warpforge::{DType, Device, Error};
use warpforge_tools::bench::{self, conv2d::ConvBench, conv2d::ConvCase};

/// Multiply-adds per layer on the emulator (2^N) unless `WARPFORGE_BENCH_MAX_LOG2` says otherwise.
const EMULATOR_MAX_LOG2: u32 = 12;

fn bench_case<T: ConvElement>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    dev: &Device,
    case: &ConvCase,
    from: impl Fn(f32) -> T + Copy,
) {
    let conv = case.conv;
    let (_, _, kernel) = case.report_cases(dev).expect("a valid case");
    let name = kernel.to_string();
    let values = |len: usize| {
        (0..len)
            .map(|i| from((i * 37 % 201) as f32 / 100.0 - 1.0))
            .collect::<Vec<T>>()
    };
    let count = |d: [usize; 4]| d.iter().product::<usize>();
    let buffers = (|| {
        Ok::<_, Error>((
            dev.upload(&values(count(conv.input_dims())))?,
            dev.upload(&values(count(conv.weight_dims())))?,
            dev.alloc_zeroed::<T>(count(conv.output_dims()?))?,
        ))
    })();
    let (x, w, mut y) = match buffers {
        Ok(b) => b,
        Err(e @ Error::OutOfMemory { .. }) => {
            eprintln!("skipping {name}: {e}");
            return;
        }
        Err(e) => panic!("{name}: {e}"),
    };
    let (flops, bytes) = case.work().expect("the work fits a u64");
    group.throughput(if case.layer.depthwise() {
        Throughput::Bytes(bytes)
    } else {
        Throughput::Elements(flops)
    });
    let stream = dev.default_stream();
    group.bench_function(BenchmarkId::from_parameter(&name), |bencher| {
        bencher.iter_custom(|iters| {
            bench::time_iterations(&stream, iters, || conv.run(dev, &x, &w, None, &mut y))
                .expect("conv2d")
        })
    });
}

fn bench_conv2d(c: &mut Criterion) {
    let (dev, why) = Device::auto();
    if let Some(why) = why {
        eprintln!("no GPU ({why}); benchmarking the emulator at small sizes");
    }
    let mut config = ConvBench::defaults(&dev);
    match std::env::var("WARPFORGE_BENCH_MAX_LOG2") {
        Ok(v) => {
            let n = v.parse().expect("WARPFORGE_BENCH_MAX_LOG2 is a number");
            config = config.with_max_log2(n).expect("a cap below 2^127");
        }
        Err(_) if !dev.is_gpu() => {
            config = config
                .with_max_log2(EMULATOR_MAX_LOG2)
                .expect("a cap below 2^127");
        }
        Err(_) => {}
    }
    let mut group = c.benchmark_group(format!("conv2d on {}", dev.name()));
    if !dev.is_gpu() {
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
    }
    for case in config.cases().expect("the layer table is valid") {
        match case.dtype {
            DType::F16 => bench_case::<f16>(&mut group, &dev, &case, f16::from_f32),
            _ => bench_case::<f32>(&mut group, &dev, &case, |v| v),
        }
    }
    group.finish();
}

criterion_group!(benches, bench_conv2d);
criterion_main!(benches);
