//! Runs my-kernels on GPU 0 if there is one, else on warpforge's CPU emulator,
//! and checks every result against a CPU computation, bit for bit (both
//! kernels round exactly once per element, as the CPU does). Exits 1 on a
//! mismatch or an error.

use std::process::ExitCode;

use my_kernels::{bias_relu_clamp, row_maxabs_normalize};
use warpforge::{Device, Dim3, LaunchConfig};

/// The PTX that build.rs compiled from my-kernels, embedded in this binary.
static MY_KERNELS: warpforge::Module = warpforge::include_module!("my-kernels");

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("my-app: results differ from the CPU (see above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("my-app: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> warpforge::Result<bool> {
    let (dev, why_not_gpu) = Device::auto();
    match why_not_gpu {
        None => println!("device: {}", dev.name()),
        Some(why) => println!("device: {} (no GPU: {why})", dev.name()),
    }
    // On a GPU: JIT-compile the PTX and check each kernel's parameters against
    // it. On the emulator there is nothing to load.
    dev.load(&MY_KERNELS)?;

    // Sizes that are multiples of no block side, and a row of zeros.
    let (rows, cols) = (37, 45);
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| if i / cols == 5 { 0.0 } else { sample(i) })
        .collect();
    let bias: Vec<f32> = (0..cols).map(|c| sample(7919 * c + 1)).collect();
    let cap = 6.0f32;

    let x_dev = dev.upload(&x)?;
    let bias_dev = dev.upload(&bias)?;
    let mut y = dev.alloc_zeroed::<f32>(rows * cols)?;

    let cfg = LaunchConfig::for_2d(rows, cols, (16, 8))?;
    dev.launch(
        bias_relu_clamp,
        cfg,
        (rows, cols, cap, &x_dev, &bias_dev, &mut y),
    )?;
    let expected: Vec<f32> = (0..rows * cols)
        .map(|i| (x[i] + bias[i % cols]).max(0.0).min(cap))
        .collect();
    let ok_relu = report("bias_relu_clamp", &dev, cfg, &y.to_host()?, &expected);

    // One warp per row, 4 rows per block (the block the kernel declares).
    let cfg = LaunchConfig::new(
        Dim3::new(1, rows.div_ceil(4) as u32, 1),
        Dim3::new(32, 4, 1),
    );
    dev.launch(row_maxabs_normalize, cfg, (rows, cols, &x_dev, &mut y))?;
    let expected: Vec<f32> = x
        .chunks(cols)
        .flat_map(|row| {
            let largest = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            row.iter()
                .map(move |v| if largest == 0.0 { 0.0 } else { v / largest })
        })
        .collect();
    let ok_norm = report("row_maxabs_normalize", &dev, cfg, &y.to_host()?, &expected);

    Ok(ok_relu && ok_norm)
}

/// A deterministic value in [-8, 8) with 4 fraction bits, so `x + bias` is exact.
fn sample(i: usize) -> f32 {
    let h = (i as u32).wrapping_mul(2_654_435_761) >> 24; // 0..=255
    (h as f32 - 128.0) / 16.0
}

/// Prints one line for a kernel and up to 5 mismatches; true if every element matches.
fn report(kernel: &str, dev: &Device, cfg: LaunchConfig, got: &[f32], expected: &[f32]) -> bool {
    let bad: Vec<usize> = (0..expected.len())
        .filter(|&i| got[i].to_bits() != expected[i].to_bits())
        .collect();
    println!(
        "{kernel:<21} on {}: grid ({}, {}), block ({}, {}): {} of {} elements equal to the CPU's, bit for bit",
        dev.name(),
        cfg.grid.x,
        cfg.grid.y,
        cfg.block.x,
        cfg.block.y,
        expected.len() - bad.len(),
        expected.len()
    );
    for &i in bad.iter().take(5) {
        println!(
            "  MISMATCH at {i}: got {} ({:#010x}), CPU {} ({:#010x})",
            got[i],
            got[i].to_bits(),
            expected[i],
            expected[i].to_bits()
        );
    }
    bad.is_empty()
}
