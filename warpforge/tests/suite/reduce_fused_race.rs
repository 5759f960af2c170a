//! The one-launch rows reduction publishes its partial states with a fence
//! and an atomic ticket per combine unit ("last block done" at every level
//! of the combine tree), and the block that completes a combine unit folds
//! it: the emulator's race detector accepts it, every ticket is 0 again
//! after each launch, and the same kernel without its fences is reported.

use warpforge::{Device, Dim3, Error, Fault, LaunchConfig};
use warpforge_device::{Global, Out};
use warpforge_kernels::reduce::State;
use warpforge_kernels::reduce::state::{Sum, SumState};
use warpforge_kernels::reduce::{BLOCK_THREADS, finish, reduce_fused_cols_sum_f32};
use warpforge_kernels::reduce::{
    cols_fused_without_fences, cols_fused_words, reduce_fused_sum_f32,
};
use warpforge_kernels::reduce::{fused_words, rows_fused_without_fences, vectored};
use warpforge_macros::kernel;

#[kernel(block = 256)]
fn fused_sum_without_fences(
    x: Global<f32>,
    rows: u64,
    len: u64,
    mut tickets: Out<u64>,
    mut states: Out<u64>,
    mut out: Out<f32>,
) {
    rows_fused_without_fences(
        rows,
        len,
        vectored::<f32, Sum>(x),
        &mut tickets,
        &mut states,
        |row, state: SumState<f32>| {
            if let Some(mut slot) = out.at(row as usize) {
                slot.set(f32::from_bits(state.encode()[0] as u32));
            }
        },
    );
}

#[kernel(block = 256)]
fn fused_cols_sum_without_fences(
    x: Global<f32>,
    len: u64,
    inner: u64,
    mut tickets: Out<u64>,
    mut states: Out<u64>,
    mut out: Out<f32>,
) {
    cols_fused_without_fences(
        [1, len, inner],
        vectored::<f32, Sum>(x),
        &mut tickets,
        &mut states,
        |k, state: SumState<f32>| {
            if let Some(mut slot) = out.at(k as usize) {
                slot.set(f32::from_bits(state.encode()[0] as u32));
            }
        },
    );
}

/// One combine level (79 units: one combine unit per row), and two (a row
/// of 2 · 512² + 7 items: 1025 units, 3 level-1 combine units, the last of
/// one unit, and one level-2 unit), over 1 and 3 rows, at 1, 4 and 37
/// blocks: the finished sums are exact, and every ticket is 0 after each
/// launch, so the next launch reuses them without a memset.
#[test]
fn every_level_is_race_free_and_leaves_its_tickets_at_zero() {
    let dev = Device::emulator();
    for (rows, len) in [(1u64, 40_000u64), (3, 40_000), (1, 2 * 512 * 512 + 7)] {
        let n = (rows * len) as usize;
        // Row r holds r + 1 in every element: row sums are exact integers.
        let x: Vec<f32> = (0..n).map(|i| (i as u64 / len + 1) as f32).collect();
        let x = dev.upload(&x).unwrap();
        let (ticket_words, state_words) = fused_words(rows, len);
        let mut tickets = dev.alloc_zeroed::<u64>(ticket_words as usize).unwrap();
        let mut states = dev.alloc_zeroed::<u64>(state_words as usize).unwrap();
        let mut out = dev.alloc_zeroed::<f32>(rows as usize).unwrap();
        for (blocks, mean) in [(4, false), (1, true), (37, false), (4, true)] {
            let code = if mean { finish::MEAN } else { finish::VALUE };
            let cfg = LaunchConfig::new(Dim3::x(blocks), Dim3::x(BLOCK_THREADS));
            dev.launch(
                reduce_fused_sum_f32,
                cfg,
                (&x, rows, len, code, &mut tickets, &mut states, &mut out),
            )
            .unwrap();
            let want: Vec<f32> = (1..=rows)
                .map(|r| if mean { r as f32 } else { (r * len) as f32 })
                .collect();
            let ctx = format!("{rows} rows of {len} at {blocks} blocks, mean {mean}");
            assert_eq!(out.to_host().unwrap(), want, "{ctx}");
            let left = tickets.to_host().unwrap();
            assert!(left.iter().all(|&t| t == 0), "{ctx}: tickets {left:?}");
        }
    }
}

#[test]
fn the_last_block_pattern_without_fences_is_a_race() {
    let dev = Device::emulator();
    let len = 40_000u64;
    let x = dev.upload(&vec![1.0f32; len as usize]).unwrap();
    let (ticket_words, state_words) = fused_words(1, len);
    let cfg = LaunchConfig::new(Dim3::x(4), Dim3::x(BLOCK_THREADS));
    let mut tickets = dev.alloc_zeroed::<u64>(ticket_words as usize).unwrap();
    let mut states = dev.alloc_zeroed::<u64>(state_words as usize).unwrap();
    let mut out = dev.alloc_zeroed::<f32>(1).unwrap();
    let e = match dev.launch(
        fused_sum_without_fences,
        cfg,
        (&x, 1u64, len, &mut tickets, &mut states, &mut out),
    ) {
        Err(Error::KernelFault {
            emulated: Some(e), ..
        }) => e,
        other => panic!("expected a kernel fault, got {other:?}"),
    };
    assert!(
        matches!(
            e.fault,
            Fault::GlobalRace {
                buffer: "states",
                ..
            }
        ),
        "{e}"
    );
}

/// The columns kernel: one combine level (200 rows: 4 chunks) and two (4200
/// rows: 66 chunks, 2 level-1 states), one tile of columns and three (600
/// columns read one per thread), at 1, 5 and 64 blocks: exact sums, every
/// ticket 0 after each launch; without its fences, a race.
#[test]
fn the_columns_kernel_is_race_free_and_without_fences_a_race() {
    let dev = Device::emulator();
    for (len, inner) in [(200u64, 7u64), (4200, 3), (200, 600)] {
        let n = (len * inner) as usize;
        // Column i holds i + 1 in every row: column sums are exact integers.
        let x: Vec<f32> = (0..n).map(|k| (k as u64 % inner + 1) as f32).collect();
        let x = dev.upload(&x).unwrap();
        let (ticket_words, state_words) = cols_fused_words(1, len, inner);
        let mut tickets = dev.alloc_zeroed::<u64>(ticket_words as usize).unwrap();
        let mut states = dev.alloc_zeroed::<u64>(state_words as usize).unwrap();
        let mut out = dev.alloc_zeroed::<f32>(inner as usize).unwrap();
        for blocks in [5, 1, 64] {
            let cfg = LaunchConfig::new(Dim3::x(blocks), Dim3::x(BLOCK_THREADS));
            dev.launch(
                reduce_fused_cols_sum_f32,
                cfg,
                (
                    &x,
                    1u64,
                    len,
                    inner,
                    finish::VALUE,
                    &mut tickets,
                    &mut states,
                    &mut out,
                ),
            )
            .unwrap();
            let want: Vec<f32> = (1..=inner).map(|i| (i * len) as f32).collect();
            let ctx = format!("[{len}, {inner}] along 0 at {blocks} blocks");
            assert_eq!(out.to_host().unwrap(), want, "{ctx}");
            let left = tickets.to_host().unwrap();
            assert!(left.iter().all(|&t| t == 0), "{ctx}: tickets {left:?}");
        }
    }
    // Without its fences (a kernel fault poisons the device: the last check):
    // 600 columns in tiles of 256, one chunk of 64 rows per task, so 4
    // blocks' tasks feed each combine unit.
    let (len, inner) = (200u64, 600u64);
    let x = dev.upload(&vec![1.0f32; (len * inner) as usize]).unwrap();
    let (ticket_words, state_words) = cols_fused_words(1, len, inner);
    let mut tickets = dev.alloc_zeroed::<u64>(ticket_words as usize).unwrap();
    let mut states = dev.alloc_zeroed::<u64>(state_words as usize).unwrap();
    let mut out = dev.alloc_zeroed::<f32>(inner as usize).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(5), Dim3::x(BLOCK_THREADS));
    let e = match dev.launch(
        fused_cols_sum_without_fences,
        cfg,
        (&x, len, inner, &mut tickets, &mut states, &mut out),
    ) {
        Err(Error::KernelFault {
            emulated: Some(e), ..
        }) => e,
        other => panic!("expected a kernel fault, got {other:?}"),
    };
    assert!(
        matches!(
            e.fault,
            Fault::GlobalRace {
                buffer: "states",
                ..
            }
        ),
        "{e}"
    );
}
