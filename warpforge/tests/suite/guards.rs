//! Index guards in kernels: a 2-D transpose over a 2-D grid whose edge blocks
//! hang over the matrix writes exactly the matrix, nothing beyond it, and a
//! buffer too small for the declared shape is a reported fault, not a write.

use proptest::prelude::*;
use warpforge::{Device, Dim3, Error, LaunchConfig};
use warpforge_device::emu::Fault;
use warpforge_testkit as probe;

const TILE: u32 = 16;

/// Transposes `x` (rows × cols, stride `stride`) into a buffer of `out_len`
/// elements pre-filled with a sentinel; returns the buffer or the launch error.
fn transpose(
    x: &[f32],
    rows: u32,
    cols: u32,
    stride: u32,
    out_len: usize,
) -> Result<Vec<f32>, Error> {
    let dev = Device::emulator();
    let xb = dev.upload(x)?;
    let mut out = dev.upload(&vec![-1.0f32; out_len])?;
    let grid = Dim3::new(cols.div_ceil(TILE).max(1), rows.div_ceil(TILE).max(1), 1);
    let cfg = LaunchConfig::new(grid, Dim3::new(TILE, TILE, 1));
    dev.launch(
        probe::probe_transpose,
        cfg,
        (&xb, rows, cols, stride, &mut out),
    )?;
    out.to_host()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn transpose_writes_the_matrix_and_nothing_past_it(
        rows in 0u32..50, cols in 0u32..50, pad in 0u32..5, slack in 0usize..20,
    ) {
        let stride = cols + pad;
        let n = if rows == 0 { 0 } else { (rows as usize - 1) * stride as usize + cols as usize };
        let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let len = (rows * cols) as usize;
        let got = transpose(&x, rows, cols, stride, len + slack).unwrap();
        for c in 0..cols as usize {
            for r in 0..rows as usize {
                prop_assert_eq!(got[c * rows as usize + r], x[r * stride as usize + c]);
            }
        }
        // Threads beyond the matrix had no slot: the slack keeps its sentinel.
        prop_assert!(got[len..].iter().all(|&v| v == -1.0));
    }
}

#[test]
fn a_too_small_output_is_a_fault_naming_the_kernel_not_a_stray_write() {
    let x = vec![1.0f32; 6];
    let err = transpose(&x, 2, 3, 3, 5).unwrap_err();
    let Error::KernelFault {
        emulated: Some(e), ..
    } = &err
    else {
        panic!("expected a kernel fault, got {err}")
    };
    assert_eq!(e.kernel, "probe_transpose");
    assert!(
        matches!(&e.fault, Fault::Panic { message, at: Some(at) } if message.contains("out is too small") && at.file == "probes/src/matrix.rs"),
        "{err}"
    );
}

#[test]
fn compile_time_sized_shared_tiles_do_not_overlap() {
    let dev = Device::emulator();
    let x: Vec<f32> = (0..128).map(|i| i as f32 * 1000.0).collect();
    let xb = dev.upload(&x).unwrap();
    let mut out = dev.alloc_zeroed::<f32>(128).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(2), Dim3::x(64));
    dev.launch(probe::probe_shared_tiles, cfg, (&xb, &mut out))
        .unwrap();
    let expect: Vec<f32> = (0..128)
        .map(|i| {
            let (block, t) = (i / 64, i % 64);
            x[block * 64 + 63 - t] + ((t + 1) % 32) as f32
        })
        .collect();
    assert_eq!(out.to_host().unwrap(), expect);
    assert_eq!(
        warpforge_device::shared::SharedTile::<f32, 64>::LEN,
        64,
        "the tile's length is a constant"
    );
}
