//! Tensor-core probes: one warp computes D = A·B + C for a 16×16 A, a 16×8 B
//! (k × n, row-major) and a 16×8 C (row-major), loading fragments through the
//! layout tables, or staging the tiles with `cp.async` and loading them with
//! `ldmatrix`. Launch with one block of 32 threads.

use warpforge_device::mma::{self, FragA, FragB, FragC, K, M, MmaInput, N};
use warpforge_device::{Global, Out, bf16, f16, shared, sync};
use warpforge_macros::kernel;

/// Element (r, c) of a row-major matrix with `cols` columns, 0 if missing.
fn element<T: Copy + Default>(m: &[T], cols: usize, r: usize, c: usize) -> T {
    m.get(r * cols + c).copied().unwrap_or_default()
}

fn store(d: &mut Out<f32>, frag: FragC) {
    frag.for_each(|r, c, v| {
        if let Some(mut o) = d.at(r * N + c) {
            o.set(v);
        }
    });
}

fn mma_from_global<T: MmaInput + Default>(a: &[T], b: &[T], c: &[f32], d: &mut Out<f32>) {
    let fa = FragA::from_fn(|r, k| element(a, K, r, k));
    let fb = FragB::from_fn(|k, n| element(b, N, k, n));
    let fc = FragC::from_fn(|r, n| element(c, N, r, n));
    store(d, mma::mma(fa, fb, fc));
}

/// D = A·B + C in f16 (fragments read from global memory through the layout tables).
#[kernel]
pub fn probe_mma_f16(a: &[f16], b: &[f16], c: &[f32], mut d: Out<f32>) {
    mma_from_global(a, b, c, &mut d);
}

/// D = A·B + C in bf16 (fragments read from global memory through the layout tables).
#[kernel]
pub fn probe_mma_bf16(a: &[bf16], b: &[bf16], c: &[f32], mut d: Out<f32>) {
    mma_from_global(a, b, c, &mut d);
}

/// Halves of A then B in the shared tile.
const TILE_HALVES: usize = M * K + K * N;

/// D = A·B + C in f16, with A and B staged into shared memory by `cp.async`
/// (16 bytes per lane) and loaded by `ldmatrix` (A: x4, B: x2.trans). A and B
/// are `Global`: `cp.async` copies from global memory only.
#[kernel(shared = [f16; 384])]
pub fn probe_mma_ldmatrix(a: Global<f16>, b: Global<f16>, c: &[f32], mut d: Out<f32>) {
    let tile = shared::dynamic::<f16>();
    let lane = warpforge_device::thread::lane_id() as usize;
    // 8 halves per copy: A is 32 copies (one per lane), B 16.
    mma::cp_async_16(&tile, 8 * lane, a, 8 * lane);
    if lane < 16 {
        mma::cp_async_16(&tile, M * K + 8 * lane, b, 8 * lane);
    }
    mma::cp_async_commit();
    mma::cp_async_wait_all();
    sync::sync_threads();
    let fa = FragA::load(&tile, 0, K);
    let fb = FragB::load_k_major(&tile, M * K, N);
    let fc = FragC::from_fn(|r, n| element(c, N, r, n));
    store(&mut d, mma::mma(fa, fb, fc));
}

const _: () = assert!(TILE_HALVES == 384);
