//! Memory-traffic probes: access patterns whose cost on the GPU is known
//! exactly, for the emulator's memory profile (`emu::profile`) to count.
//! Inputs are `Global` and read with `load`, which the profile sees.

use warpforge_device::mma;
use warpforge_device::{Global, Out, bf16, shared, sync, thread};
use warpforge_macros::kernel;

/// `out[i] = x[i · stride]`: stride 1 is a coalesced copy (4 sectors per
/// 32-lane request), stride 32 touches one sector per lane.
#[kernel]
pub fn probe_copy_strided(x: Global<f32>, stride: u32, mut out: Out<f32>) {
    let i = thread::global_index_x();
    if let (Some(v), Some(mut o)) = (x.load(i * stride as usize), out.at(i)) {
        o.set(v);
    }
}

/// Thread `i` reads elements `4i .. 4i + 4` of `x` with one 128-bit load
/// and writes them to `out[4i ..]` with four 32-bit stores.
#[kernel]
pub fn probe_copy_vector16(x: Global<f32>, mut out: Out<f32>) {
    let i = thread::global_index_x();
    let (head, vectors) = x.vectors16::<4>();
    let Some(v) = vectors.load(i) else {
        return;
    };
    for (k, value) in v.0.into_iter().enumerate() {
        if let Some(mut o) = out.at(head + 4 * i + k) {
            o.set(value);
        }
    }
}

/// Transposes a 32×32 f32 matrix through a shared tile with `pitch` floats
/// per row (32: every column read hits one bank; 33: none conflict).
/// Launch one block of 32×32 threads; thread (c, r) moves element (r, c).
#[kernel(shared = [f32; 32 * 33])]
pub fn probe_transpose_tile(x: Global<f32>, pitch: u32, mut out: Out<f32>) {
    let tile = shared::dynamic::<f32>();
    let pitch = pitch as usize;
    let (c, r) = (
        thread::thread_idx().x as usize,
        thread::thread_idx().y as usize,
    );
    // A warp is one row r: the stores walk a row of the tile.
    tile.store(r * pitch + c, x.load(r * 32 + c).unwrap_or(0.0));
    sync::sync_threads();
    // The loads walk a column: lanes `pitch` floats apart.
    let v = tile.load(c * pitch + r);
    if let Some(mut o) = out.at(r * 32 + c) {
        o.set(v);
    }
}

/// Bits of element (row, column) of the logical 32×64 tile of
/// [`probe_ldmatrix_tile`].
fn tile_bits(row: usize, col: usize) -> u16 {
    (row * 64 + col) as u16
}

/// A 32×64 bf16 tile (128 bytes per row) in shared memory, stored plainly
/// (`swizzle` 0) or with row r's 16-byte chunks XOR-permuted by `r % 8`
/// (`swizzle` 1); one `ldmatrix.x4` then reads columns 0..8 of rows 0..32
/// (lane l supplies row l). `out[4l + k]` is lane l's register k, the same
/// bits either way. Launch one block of 32 threads.
#[kernel(shared = [bf16; 32 * 64])]
pub fn probe_ldmatrix_tile(swizzle: u32, mut out: Out<u32>) {
    let tile = shared::dynamic::<bf16>();
    let lane = thread::lane_id() as usize;
    // Stored chunk `p` of row `r` holds logical chunk `p ^ (r % 8)` when swizzled.
    let logical_chunk = |r: usize, p: usize| if swizzle == 1 { p ^ (r % 8) } else { p };
    // 256 chunks of 8 halves, each lane storing every 32nd.
    for q in (lane..256).step_by(32) {
        let (r, p) = (q / 8, q % 8);
        let c = 8 * logical_chunk(r, p);
        let halves: [bf16; 8] = core::array::from_fn(|e| bf16::from_bits(tile_bits(r, c + e)));
        tile.store16(8 * q, halves);
    }
    sync::sync_threads();
    // Lane l supplies logical row l, chunk 0: stored chunk `0 ^ (l % 8)` when swizzled.
    let stored_chunk = logical_chunk(lane, 0);
    let regs = mma::ldmatrix_x4(&tile, lane * 64 + 8 * stored_chunk);
    for (k, reg) in regs.into_iter().enumerate() {
        if let Some(mut o) = out.at(4 * lane + k) {
            o.set(reg);
        }
    }
}

/// `out[x[i] % bins] += 1` atomically for every `i`: a histogram, whose
/// atomics pile up on the bins.
#[kernel]
pub fn probe_histogram(x: Global<u32>, bins: u32, out: Out<u32>) {
    let i = thread::global_index_x();
    if let Some(v) = x.load(i)
        && let Some(bin) = out.atomic::<warpforge_device::atomic::Device>((v % bins) as usize)
    {
        bin.fetch_add(1);
    }
}
