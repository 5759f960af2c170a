//! GEMM through criterion: warpforge's f32 and f64 kernels, its TF32 ones
//! (`Gemm::tf32`) and its f16 and bf16 tensor-core kernels into f32 and
//! into their own type (no transposes) on
//! the shapes of `warpforge bench gemm` (squares 2^8 … 2^N and the three
//! rectangles of `GemmBench::with_max_log2`), each with
//! `Throughput::Elements(2·m·n·k)`, so criterion's "elements/s" reads as
//! FLOP/s. Every sample is timed with events on the device's default stream.
//! On GPU 0 if it opens (N = 13: up to 8192³ and 4096×4096×11008), else on the
//! emulator at N = 5 (squares of 32 and their rectangles), whose figures only
//! track emulator speed. It measures; it asserts nothing. The cuBLAS
//! comparison in the same run is `warpforge bench gemm`.
//!
//! `cargo bench -p warpforge --bench gemm`; `WARPFORGE_BENCH_MAX_LOG2=N` sets
//! the largest square's side (2^N).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use half::{bf16, f16};
use std::time::Duration;
use warpforge::gemm::{Gemm, GemmTypes, Tf32Rounding};
use warpforge::{DType, Device, DeviceBuffer, Element, Error};
use warpforge_tools::bench::{self, F32Path, GemmBench, HalfOutput};

/// Largest square side on the emulator (2^N) unless `WARPFORGE_BENCH_MAX_LOG2` says otherwise.
const EMULATOR_MAX_LOG2: u32 = 5;

/// `len` values in [−1, 1].
fn values<T>(len: usize, from: impl Fn(f32) -> T) -> Vec<T> {
    (0..len)
        .map(|i| from((i * 37 % 201) as f32 / 100.0 - 1.0))
        .collect()
}

type Operands<TIn, TOut> = (DeviceBuffer<TIn>, DeviceBuffer<TIn>, DeviceBuffer<TOut>);

fn operands<TIn: Element, TOut: Element>(
    dev: &Device,
    [m, n, k]: [usize; 3],
    from: impl Fn(f32) -> TIn + Copy,
) -> Result<Operands<TIn, TOut>, Error> {
    Ok((
        dev.upload(&values(m * k, from))?,
        dev.upload(&values(k * n, from))?,
        dev.alloc_zeroed(m * n)?,
    ))
}

/// `A`, `B` of `TIn` into `C` of `TOut` at `shape` (through TF32 if `tf32`).
fn bench_shape<TIn: GemmTypes<TOut>, TOut: Element>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    dev: &Device,
    (shape, tf32): ([usize; 3], bool),
    from: impl Fn(f32) -> TIn + Copy,
) {
    let [m, n, k] = shape;
    let gemm = Gemm::<TIn::Scalar>::new(m, n, k).tf32(tf32);
    let kernel = gemm
        .kernel_name_for::<TIn, TOut>(dev)
        .expect("no tile is pinned");
    let name = format!("{kernel} [{m}×{n}×{k}]");
    let (a, b, mut c) = match operands::<TIn, TOut>(dev, shape, from) {
        Ok(ops) => ops,
        Err(e @ Error::OutOfMemory { .. }) => {
            eprintln!("skipping {name}: {e}");
            return;
        }
        Err(e) => panic!("{name}: {e}"),
    };
    let stream = dev.default_stream();
    group.throughput(Throughput::Elements(2 * (m * n * k) as u64));
    group.bench_function(BenchmarkId::from_parameter(&name), |bencher| {
        bencher.iter_custom(|iters| {
            bench::time_iterations(&stream, iters, || gemm.run(dev, &a, &b, &mut c)).expect("gemm")
        })
    });
}

fn bench_gemm(c: &mut Criterion) {
    let (dev, why) = Device::auto();
    if let Some(why) = why {
        eprintln!("no GPU ({why}); benchmarking the emulator at small sizes");
    }
    let max_log2 = match std::env::var("WARPFORGE_BENCH_MAX_LOG2") {
        Ok(v) => v.parse().expect("WARPFORGE_BENCH_MAX_LOG2 is a number"),
        Err(_) if dev.is_gpu() => bench::GEMM_GPU_MAX_LOG2,
        Err(_) => EMULATOR_MAX_LOG2,
    };
    let config = GemmBench::defaults(&dev)
        .with_max_log2(max_log2)
        .expect("shapes fit in usize");
    let mut group = c.benchmark_group(format!("gemm on {}", dev.name()));
    if !dev.is_gpu() {
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
    }
    let half_outputs = |input: DType| -> Vec<DType> {
        config
            .half_outputs
            .iter()
            .map(|o| match o {
                HalfOutput::F32 => DType::F32,
                HalfOutput::Input => input,
            })
            .collect()
    };
    for &input in &config.dtypes {
        let outputs = match input {
            DType::F16 | DType::BF16 => half_outputs(input),
            other => vec![other],
        };
        for output in outputs {
            for &shape in &config.shapes {
                let (g, s) = (&mut group, (shape, false));
                match (input, output) {
                    (DType::F32, _) => {
                        for &path in &config.f32_paths {
                            match path {
                                F32Path::Simt => bench_shape::<f32, f32>(g, &dev, s, |v| v),
                                F32Path::Tf32(Tf32Rounding::Nearest) => {
                                    bench_shape::<f32, f32>(g, &dev, (shape, true), |v| v)
                                }
                                // Hopper only; `warpforge bench gemm` times
                                // it beside cuBLAS TF32.
                                F32Path::Tf32(Tf32Rounding::Truncate) => {}
                            }
                        }
                    }
                    (DType::F64, _) => bench_shape::<f64, f64>(g, &dev, s, f64::from),
                    (DType::F16, DType::F32) => bench_shape::<f16, f32>(g, &dev, s, f16::from_f32),
                    (DType::F16, _) => bench_shape::<f16, f16>(g, &dev, s, f16::from_f32),
                    (DType::BF16, DType::F32) => {
                        bench_shape::<bf16, f32>(g, &dev, s, bf16::from_f32)
                    }
                    (DType::BF16, _) => bench_shape::<bf16, bf16>(g, &dev, s, bf16::from_f32),
                    (other, _) => eprintln!("no GEMM kernels for {}", other.name()),
                }
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench_gemm);
criterion_main!(benches);
