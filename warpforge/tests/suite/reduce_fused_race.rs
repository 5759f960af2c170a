//! The one-launch rows reduction publishes its partial states with a fence
//! and an atomic ticket (the "last block" pattern), and its last block
//! combines them and writes the finished outputs: the emulator's race
//! detector accepts it, and reports the same kernel without its fences.

use warpforge::{Device, Dim3, Error, Fault, LaunchConfig};
use warpforge_device::{Global, Out};
use warpforge_kernels::reduce::State;
use warpforge_kernels::reduce::state::{Sum, SumState};
use warpforge_kernels::reduce::{BLOCK_THREADS, finish, reduce_fused_sum_f32};
use warpforge_kernels::reduce::{fused_scratch_words, rows_fused_without_fences, vectored};
use warpforge_macros::kernel;

#[kernel(block = 256)]
fn fused_sum_without_fences(
    x: Global<f32>,
    rows: u64,
    len: u64,
    mut scratch: Out<u64>,
    mut out: Out<f32>,
) {
    rows_fused_without_fences(
        rows,
        len,
        vectored::<f32, Sum>(x),
        &mut scratch,
        |row, state: SumState<f32>| {
            if let Some(mut slot) = out.at(row as usize) {
                slot.set(f32::from_bits(state.encode()[0] as u32));
            }
        },
    );
}

#[test]
fn the_last_block_pattern_is_race_free_and_without_fences_a_race() {
    let dev = Device::emulator();
    let len = 40_000u64;
    let x = dev.upload(&vec![1.0f32; len as usize]).unwrap();
    let words = fused_scratch_words(1, len) as usize;
    let cfg = LaunchConfig::new(Dim3::x(4), Dim3::x(BLOCK_THREADS));
    let mut scratch = dev.alloc_zeroed::<u64>(words).unwrap();
    let mut out = dev.alloc_zeroed::<f32>(1).unwrap();
    for mean in [false, true, false] {
        // The ticket is back at 0 after each launch: no memset between them.
        let code = if mean { finish::MEAN } else { finish::VALUE };
        dev.launch(
            reduce_fused_sum_f32,
            cfg,
            (&x, 1u64, len, code, &mut scratch, &mut out),
        )
        .unwrap();
        let want = if mean { 1.0 } else { 40_000.0 };
        assert_eq!(out.to_host().unwrap(), [want], "mean {mean}");
        assert_eq!(scratch.to_host().unwrap()[0], 0);
    }
    let e = match dev.launch(
        fused_sum_without_fences,
        cfg,
        (&x, 1u64, len, &mut scratch, &mut out),
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
                buffer: "scratch",
                ..
            }
        ),
        "{e}"
    );
}
