//! Launches the memory-traffic probes (`warpforge_probes::traffic`, and the
//! `cp.async` + `ldmatrix` tensor-core probe) with the shapes that
//! `warpforge/tests/suite/memory_profile.rs` checks: on GPU 0 (`gpu`), for
//! Nsight Compute to count, or on the emulator (`emu`, the default), printing
//! the emulator's figures under the same metric names, so the two can be set
//! side by side:
//!
//! ```sh
//! ncu --csv --metrics l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,… probe-traffic gpu
//! cargo run -p warpforge-testkit --bin probe-traffic
//! ```

use warpforge::{Device, Dim3, LaunchConfig, MemoryProfile, Result};
use warpforge_testkit::{self as probe, PROBES};

/// Every launch, in order (the order Nsight Compute lists them in).
fn launch_all(dev: &Device) -> Result<()> {
    dev.load(&PROBES)?;
    let floats = |n: usize| dev.upload(&(0..n).map(|i| i as f32).collect::<Vec<_>>());
    let cfg = |blocks: u32, threads: Dim3| LaunchConfig::new(Dim3::x(blocks), threads);
    for (n, stride, blocks) in [(512, 1u32, 4), (256, 32, 2)] {
        let x = floats(n * stride as usize)?;
        let mut out = dev.alloc_zeroed::<f32>(n)?;
        dev.launch(
            probe::probe_copy_strided,
            cfg(blocks, Dim3::x(128)),
            (&x, stride, &mut out),
        )?;
    }
    let x = floats(512)?;
    let mut out = dev.alloc_zeroed::<f32>(512)?;
    dev.launch(
        probe::probe_copy_vector16,
        cfg(2, Dim3::x(64)),
        (&x, &mut out),
    )?;
    let x = floats(1024)?;
    let mut out = dev.alloc_zeroed::<f32>(1024)?;
    for pitch in [32u32, 33] {
        dev.launch(
            probe::probe_transpose_tile,
            cfg(1, Dim3::xy(32, 32)),
            (&x, pitch, &mut out),
        )?;
    }
    let mut registers = dev.alloc_zeroed::<u32>(128)?;
    for swizzle in [0u32, 1] {
        dev.launch(
            probe::probe_ldmatrix_tile,
            cfg(1, Dim3::x(32)),
            (swizzle, &mut registers),
        )?;
    }
    let values: Vec<u32> = (0..192u32)
        .map(|i| if i % 3 == 0 { 0 } else { i * 7 })
        .collect();
    let values = dev.upload(&values)?;
    let mut bins = dev.alloc_zeroed::<u32>(5)?;
    dev.launch(
        probe::probe_histogram,
        cfg(3, Dim3::x(64)),
        (&values, 5u32, &mut bins),
    )?;
    let a = dev.upload(&vec![half::f16::ONE; 16 * 16])?;
    let b = dev.upload(&vec![half::f16::ONE; 16 * 8])?;
    let c = dev.upload(&vec![0.0f32; 16 * 8])?;
    let mut d = dev.alloc_zeroed::<f32>(16 * 8)?;
    dev.launch(
        probe::probe_mma_ldmatrix,
        cfg(1, Dim3::x(32)),
        (&a, &b, &c, &mut d),
    )?;
    dev.synchronize()
}

/// One launch's figures, as Nsight Compute names them.
fn print(p: &MemoryProfile) {
    println!("{} (grid {}, block {})", p.kernel, p.grid, p.block);
    let rows = [
        (
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
            p.global_load.requests,
        ),
        (
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
            p.global_load.sectors,
        ),
        (
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
            p.global_store.requests,
        ),
        (
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
            p.global_store.sectors,
        ),
        (
            "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
            p.global_atomic.requests,
        ),
        (
            "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum",
            p.cp_async.requests,
        ),
        (
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum",
            p.cp_async.sectors,
        ),
        (
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
            p.shared_load.wavefronts,
        ),
        (
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
            p.shared_load.bank_conflicts,
        ),
        (
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
            p.shared_store.wavefronts,
        ),
        (
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
            p.shared_store.bank_conflicts,
        ),
        ("smsp__inst_executed_op_ldsm.sum", p.ldmatrix.requests),
        (
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum",
            p.ldmatrix.wavefronts,
        ),
    ];
    for (name, value) in rows {
        println!("  {name:<58} {value}");
    }
}

fn main() -> Result<()> {
    if std::env::args().nth(1).as_deref() == Some("gpu") {
        return launch_all(&Device::gpu(0)?);
    }
    let dev = Device::emulator();
    let ((), profiles) = dev.profile_memory(|| launch_all(&dev))?;
    for p in &profiles {
        print(p);
    }
    Ok(())
}
