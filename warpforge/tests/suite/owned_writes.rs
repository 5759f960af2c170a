//! Owned outputs (`warpforge_device::own`) on the emulator, for random grids,
//! blocks and lengths: every element is written exactly once (each write
//! adds 1, so a second owner would leave a 2), by the thread, warp or block
//! an independent reference computed from the launch shape says owns it, and
//! nothing outside the view or the owned part is touched.

use proptest::prelude::*;
use warpforge::{Device, Dim3, LaunchConfig};
use warpforge_device::atomic::Device as DeviceScope;
use warpforge_device::mma::{FragC, c_coord};
use warpforge_device::own::{
    BlockChunks, BlockTiles, Elements, ThreadChunks, WarpChunks, WarpGrid, WarpTiles,
};
use warpforge_device::thread::{global_index_x, global_index_y, linear_thread_id};
use warpforge_device::{Out, OutMatrix};
use warpforge_macros::kernel;

/// Adds 1 to every element this thread owns (grid-stride) and records its
/// x-rank + 1 as the owner.
#[kernel]
fn own_elements(mut count: Out<u32, Elements>, mut owner: Out<u32, Elements>) {
    for mut c in count.grid_stride() {
        c.set(c.get() + 1);
    }
    for mut o in owner.grid_stride() {
        o.set(global_index_x() as u32 + 1);
    }
}

/// Adds 1 to the one element this thread owns (`mine`).
#[kernel]
fn own_mine(mut count: Out<u32, Elements>) {
    if let Some(mut c) = count.mine() {
        c.set(c.get() + 1);
    }
}

/// Adds 1 to every element of the 3-element units this thread owns.
#[kernel]
fn own_thread_chunks(units: u64, mut count: Out<u32, ThreadChunks<3>>) {
    for mut chunk in count.chunks(units) {
        for j in 0..3 {
            if let Some(mut s) = chunk.slot(j) {
                s.set(s.get() + 1);
            }
        }
    }
}

/// Every thread of a warp counts its visit to each of the warp's units; the
/// leader adds 1 to the unit's two elements.
#[kernel]
fn own_warp_chunks(units: u64, mut count: Out<u32, WarpChunks<2>>, visits: Out<u32>) {
    for mut unit in count.chunks(units) {
        if let Some(v) = visits.atomic::<DeviceScope>(unit.unit() as usize) {
            v.fetch_add(1);
        }
        if let Some(chunk) = unit.leader() {
            for j in 0..2 {
                if let Some(mut s) = chunk.slot(j) {
                    s.set(s.get() + 1);
                }
            }
        }
    }
}

/// As `own_warp_chunks`, per block.
#[kernel]
fn own_block_chunks(units: u64, mut count: Out<u32, BlockChunks<2>>, visits: Out<u32>) {
    for mut unit in count.chunks(units) {
        if let Some(v) = visits.atomic::<DeviceScope>(unit.unit() as usize) {
            v.fetch_add(1);
        }
        let u = unit.unit() as u32;
        if let Some(chunk) = unit.leader() {
            // write() goes through each element's slot; the values say whose.
            chunk.write([u + 1, u + 1]);
        }
    }
}

/// Adds 1 to every element of the matrix this thread owns (2-D grid-stride)
/// and, through `mine`, records (y, x) of the thread owning (row, col) = (y, x).
#[kernel]
fn own_matrix(mut count: OutMatrix<u32>, mut owner: OutMatrix<u32>) {
    for mut c in count.grid_stride() {
        c.set(c.get() + 1);
    }
    if let Some(mut o) = owner.mine() {
        let (y, x) = (global_index_y() as u32, global_index_x() as u32);
        assert_eq!((o.row(), o.col()), (y as usize, x as usize));
        o.set(y * 1000 + x + 1);
    }
}

/// Adds 1 to every element this thread owns of its block's 4 × 8 tile, and
/// records its linear id + 1 as the owner (a second view of the same tiles).
#[kernel]
fn own_block_tiles(
    mut count: OutMatrix<u32, BlockTiles<4, 8>>,
    mut owner: OutMatrix<u32, BlockTiles<4, 8>>,
) {
    if let Some(mut tile) = count.tile() {
        for mut c in tile.elements() {
            c.set(c.get() + 1);
        }
    }
    if let Some(mut tile) = owner.tile() {
        for mut o in tile.elements() {
            o.set(linear_thread_id() + 1);
        }
    }
}

/// Each warp stores, into both 16 × 8 sub-tiles of its 16 × 16 tile, an
/// accumulator whose element at tile (r, c) is `16r + c + 1`; sub-tile
/// (1, 0) is outside the tile and skipped.
#[kernel]
fn own_warp_tiles(mut out: OutMatrix<f32, WarpTiles<16, 16>>) {
    let Some(mut tile) = out.tile() else {
        return;
    };
    for sc in 0..2 {
        let frag = FragC::from_fn(|r, c| (r * 16 + sc * 8 + c) as f32 + 1.0);
        tile.store_mma_c(0, sc, &frag, |v| v);
    }
    let poison = FragC::from_fn(|_, _| -1.0);
    tile.store_mma_c(1, 0, &poison, |v| v);
}

/// Each lane adds 1 to every element of its warp's tile in a 32 × 48 block
/// tile of 2 × 3 warp tiles of 16 × 16 (each as two 16 × 8 `mma`
/// sub-tiles), and records its warp's id + 1 as the owner; a sub-tile outside
/// the warp tile is skipped.
#[kernel]
fn own_warp_grid(
    mut count: OutMatrix<f32, WarpGrid<32, 48, 16, 16>>,
    mut owner: OutMatrix<f32, WarpGrid<32, 48, 16, 16>>,
) {
    let warp = warpforge_device::thread::warp_id() as f32;
    if let Some(mut tile) = count.tile() {
        for sc in 0..3 {
            let one = FragC::from_fn(|_, _| 1.0);
            tile.update_mma_c(0, sc, &one, |v, slot| slot.set(slot.get() + v));
        }
    }
    if let Some(mut tile) = owner.tile() {
        for sc in 0..2 {
            tile.store_mma_c(0, sc, &FragC::from_fn(|_, _| 0.0), |_| warp + 1.0);
        }
    }
}

/// As `own_warp_grid`, with the blocks taking their tiles in bands of 2 tile
/// rows (`WarpGrid`'s `G`); each lane records its block's launch-order index
/// `blockIdx.y·gridDim.x + blockIdx.x`, + 1, as the owner.
#[kernel]
fn own_warp_grid_banded(
    mut count: OutMatrix<f32, WarpGrid<32, 48, 16, 16, 2>>,
    mut owner: OutMatrix<f32, WarpGrid<32, 48, 16, 16, 2>>,
) {
    let (b, g) = (
        warpforge_device::thread::block_idx(),
        warpforge_device::thread::grid_dim(),
    );
    let block = (b.y * g.x + b.x) as f32;
    let one = FragC::from_fn(|_, _| 1.0);
    if let Some(mut tile) = count.tile() {
        for sc in 0..3 {
            tile.update_mma_c(0, sc, &one, |v, slot| slot.set(slot.get() + v));
        }
    }
    if let Some(mut tile) = owner.tile() {
        for sc in 0..3 {
            tile.update_mma_c(0, sc, &one, |_, slot| slot.set(block + 1.0));
        }
    }
}

/// As `own_warp_grid` with the accumulators' rows paired (`WarpGrid`'s
/// `RP`: rows `g`, `g + 8` of each 16 at `2g`, `2g + 1`): each lane adds 1
/// to its elements, and stores each element's `mma` coordinates in its warp
/// tile, `row·16 + col` (sub-tile `sc`'s column `c` is column `8·sc + c`),
/// + 1.
#[kernel]
fn own_warp_grid_paired(
    mut count: OutMatrix<f32, WarpGrid<32, 48, 16, 16, 1, true>>,
    mut logical: OutMatrix<f32, WarpGrid<32, 48, 16, 16, 1, true>>,
) {
    let one = FragC::from_fn(|_, _| 1.0);
    if let Some(mut tile) = count.tile() {
        for sc in 0..2 {
            tile.update_mma_c(0, sc, &one, |v, slot| slot.set(slot.get() + v));
        }
    }
    if let Some(mut tile) = logical.tile() {
        for sc in 0..2 {
            let at = FragC::from_fn(|r, c| (r * 16 + sc * 8 + c) as f32 + 1.0);
            tile.store_mma_c(0, sc, &at, |v| v);
        }
    }
}

fn dims() -> impl Strategy<Value = (Dim3, Dim3)> {
    (
        (1u32..5, 1u32..3, 1u32..3),
        prop_oneof![
            (1u32..70, Just(1u32), Just(1u32)),
            (1u32..40, 1u32..4, 1u32..3),
        ],
    )
        .prop_map(|((gx, gy, gz), (bx, by, bz))| (Dim3::new(gx, gy, gz), Dim3::new(bx, by, bz)))
}

/// The warps of a block of `threads` threads, and how many threads each has.
fn warp_sizes(threads: u64) -> Vec<u64> {
    (0..threads.div_ceil(32))
        .map(|w| (threads - 32 * w).min(32))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn grid_stride_elements_are_each_written_once_by_their_owner(
        (grid, block) in dims(), len in 0usize..2000,
    ) {
        let dev = Device::emulator();
        let mut count = dev.alloc_zeroed::<u32>(len).unwrap();
        let mut owner = dev.alloc_zeroed::<u32>(len).unwrap();
        dev.launch(own_elements, LaunchConfig::new(grid, block), (&mut count, &mut owner)).unwrap();
        prop_assert!(count.to_host().unwrap().iter().all(|&c| c == 1));
        // The x-line has grid.x · block.x threads; element i is thread i mod n's.
        let n = (grid.x * block.x) as usize;
        let want: Vec<u32> = (0..len).map(|i| (i % n) as u32 + 1).collect();
        prop_assert_eq!(owner.to_host().unwrap(), want);

        let mut count = dev.alloc_zeroed::<u32>(len).unwrap();
        dev.launch(own_mine, LaunchConfig::new(grid, block), (&mut count,)).unwrap();
        let want: Vec<u32> = (0..len).map(|i| u32::from(i < n)).collect();
        prop_assert_eq!(count.to_host().unwrap(), want);
    }

    #[test]
    fn thread_chunks_are_each_written_once(
        (grid, block) in dims(), len in 0usize..600, units in 0u64..250,
    ) {
        let dev = Device::emulator();
        let mut count = dev.alloc_zeroed::<u32>(len).unwrap();
        dev.launch(own_thread_chunks, LaunchConfig::new(grid, block), (units, &mut count)).unwrap();
        // Whole units only, and at most `units` of them.
        let covered = 3 * (units as usize).min(len / 3);
        let want: Vec<u32> = (0..len).map(|i| u32::from(i < covered)).collect();
        prop_assert_eq!(count.to_host().unwrap(), want);
    }

    #[test]
    fn warp_chunks_are_seen_by_the_whole_warp_and_written_once(
        (grid, block) in dims(), len in 0usize..400, units in 0u64..250,
    ) {
        let dev = Device::emulator();
        let mut count = dev.alloc_zeroed::<u32>(len).unwrap();
        let mut visits = dev.alloc_zeroed::<u32>(250).unwrap();
        dev.launch(own_warp_chunks, LaunchConfig::new(grid, block), (units, &mut count, &mut visits)).unwrap();
        let walked = (units as usize).min(len / 2);
        let want: Vec<u32> = (0..len).map(|i| u32::from(i < 2 * walked)).collect();
        prop_assert_eq!(count.to_host().unwrap(), want);
        // Unit u belongs to warp u mod W of the x-line of blocks; all its threads visit.
        let sizes = warp_sizes(block.volume());
        let warps = grid.x as usize * sizes.len();
        let want: Vec<u32> = (0..250)
            .map(|u| if u < walked { sizes[(u % warps) % sizes.len()] as u32 } else { 0 })
            .collect();
        prop_assert_eq!(visits.to_host().unwrap(), want);
    }

    #[test]
    fn block_chunks_are_seen_by_the_whole_block_and_written_by_thread_0(
        (grid, block) in dims(), len in 0usize..300, units in 0u64..200,
    ) {
        let dev = Device::emulator();
        let mut out = dev.alloc_zeroed::<u32>(len).unwrap();
        let mut visits = dev.alloc_zeroed::<u32>(200).unwrap();
        dev.launch(own_block_chunks, LaunchConfig::new(grid, block), (units, &mut out, &mut visits)).unwrap();
        let walked = (units as usize).min(len / 2);
        let want: Vec<u32> = (0..len)
            .map(|i| if i < 2 * walked { (i / 2) as u32 + 1 } else { 0 })
            .collect();
        prop_assert_eq!(out.to_host().unwrap(), want);
        let want: Vec<u32> = (0..200)
            .map(|u| if u < walked { block.volume() as u32 } else { 0 })
            .collect();
        prop_assert_eq!(visits.to_host().unwrap(), want);
    }

    #[test]
    fn matrix_elements_are_each_written_once_inside_the_host_shape(
        (grid, block) in dims(), rows in 0usize..40, cols in 0usize..40, pad in 0usize..3,
    ) {
        let dev = Device::emulator();
        let stride = cols + pad;
        let len = if rows == 0 { 0 } else { (rows - 1) * stride + cols } + 5;
        let mut count = dev.alloc_zeroed::<u32>(len).unwrap();
        let mut owner = dev.alloc_zeroed::<u32>(len).unwrap();
        dev.launch(
            own_matrix,
            LaunchConfig::new(grid, block),
            (count.matrix_mut(rows, cols, stride).unwrap(), owner.matrix_mut(rows, cols, stride).unwrap()),
        )
        .unwrap();
        let (ny, nx) = ((grid.y * block.y) as usize, (grid.x * block.x) as usize);
        let (count, owner) = (count.to_host().unwrap(), owner.to_host().unwrap());
        for k in 0..len {
            let (r, c) = (k / stride.max(1), k % stride.max(1));
            let inside = stride > 0 && r < rows && c < cols;
            prop_assert_eq!(count[k], u32::from(inside), "count at {}", k);
            let mine = inside && r < ny && c < nx;
            prop_assert_eq!(owner[k], if mine { (r * 1000 + c + 1) as u32 } else { 0 }, "owner at {}", k);
        }
    }

    /// Any grid and 1-D block (partial warps, fewer or more warps than the
    /// 6 warp tiles), batches stacked (packed or padded) or side by side
    /// (column ranges of one wider matrix, with or without gaps), a grid
    /// with fewer, as many or more z than batches: every element is written
    /// at most once, exactly by the warp an independent reference names
    /// (block (y, x) of batch z < batches and z < gridDim.z, warp w < 6 at
    /// warp tile (w / 3, w mod 3), the lane that holds the element in the
    /// accumulator layout), nothing else (the gaps between batches and
    /// rows stay 0); and with the blocks in bands of 2 tile rows (`G = 2`),
    /// the same elements, each tile by the block the inverse of the bands'
    /// order names.
    #[test]
    fn warp_grid_tiles_are_written_once_by_the_warp_that_owns_them(
        (gx, gy, gz) in (1u32..4, 1u32..4, 1u32..4),
        threads in 1u32..300,
        rows in 0usize..70,
        cols in 0usize..100,
        batches in 1usize..4,
        side_by_side in any::<bool>(),
        (pad, gap) in (0usize..3, 0usize..3),
    ) {
        let dev = Device::emulator();
        // Stacked: rows `cols + pad` apart, batches the span + gap apart.
        // Side by side: batches `cols + gap` apart along one row.
        let (stride, batch_stride) = if side_by_side {
            ((batches - 1) * (cols + gap) + cols + pad, cols + gap)
        } else {
            let stride = cols + pad;
            (stride, rows.saturating_sub(1) * stride + cols + gap)
        };
        let len = if rows == 0 || cols == 0 {
            0
        } else {
            (batches - 1) * batch_stride + (rows - 1) * stride + cols
        };
        // The independent reference's address map: (batch, row, col) of each element.
        let mut at = vec![None; len];
        for b in 0..batches {
            for r in 0..rows {
                for c in 0..cols {
                    let e = b * batch_stride + r * stride + c;
                    prop_assert!(at[e].is_none(), "the test's layout overlaps at {}", e);
                    at[e] = Some((b, r, c));
                }
            }
        }
        let mut count = dev.alloc_zeroed::<f32>(len).unwrap();
        let mut owner = dev.alloc_zeroed::<f32>(len).unwrap();
        dev.launch(
            own_warp_grid,
            LaunchConfig::new(Dim3::new(gx, gy, gz), Dim3::x(threads)),
            (
                count.batched_matrix_mut(rows, cols, stride, batches, batch_stride).unwrap(),
                owner.batched_matrix_mut(rows, cols, stride, batches, batch_stride).unwrap(),
            ),
        )
        .unwrap();
        let warps = threads.div_ceil(32) as usize;
        // The lane that holds each element of a 16 × 8 accumulator.
        let mut lane_of = [[0u32; 8]; 16];
        for lane in 0..32 {
            for i in 0..4 {
                let (r, c) = c_coord(lane, i);
                lane_of[r][c] = lane;
            }
        }
        let (count, owner) = (count.to_host().unwrap(), owner.to_host().unwrap());
        for e in 0..len {
            // The owner by the reference: batch z = b's block (r / 32, c / 48),
            // warp tile ((r mod 32) / 16, (c mod 48) / 16), warp 3·row + col,
            // if the grid and the block have them, and the lane that holds
            // it is in the (last, maybe partial) warp.
            let owned = at[e].is_some_and(|(b, r, c)| {
                let (by, bx) = (r / 32, c / 48);
                let w = ((r % 32) / 16) * 3 + (c % 48) / 16;
                let lane = lane_of[r % 16][c % 8];
                b < gz as usize
                    && by < gy as usize
                    && bx < gx as usize
                    && w < warps.min(6)
                    && 32 * w as u32 + lane < threads
            });
            let w = at[e].map_or(0, |(_, r, c)| ((r % 32) / 16) * 3 + (c % 48) / 16);
            prop_assert_eq!(count[e], if owned { 1.0 } else { 0.0 }, "count at {} ({:?})", e, at[e]);
            prop_assert_eq!(owner[e], if owned { w as f32 + 1.0 } else { 0.0 }, "owner at {} ({:?})", e, at[e]);
        }

        // Banded (G = 2): the same elements, each once; tile (ty, tx) is
        // taken by the block the bands' order puts there. The reference
        // inverts that order: tile row ty is in band ty / 2 of h rows, and
        // the band's blocks go down its h rows, column by column.
        let mut count = dev.alloc_zeroed::<f32>(len).unwrap();
        let mut owner = dev.alloc_zeroed::<f32>(len).unwrap();
        dev.launch(
            own_warp_grid_banded,
            LaunchConfig::new(Dim3::new(gx, gy, gz), Dim3::x(threads)),
            (
                count.batched_matrix_mut(rows, cols, stride, batches, batch_stride).unwrap(),
                owner.batched_matrix_mut(rows, cols, stride, batches, batch_stride).unwrap(),
            ),
        )
        .unwrap();
        let (count, owner) = (count.to_host().unwrap(), owner.to_host().unwrap());
        for e in 0..len {
            let owned = at[e].is_some_and(|(b, r, c)| {
                let w = ((r % 32) / 16) * 3 + (c % 48) / 16;
                let lane = lane_of[r % 16][c % 8];
                b < gz as usize
                    && r / 32 < gy as usize
                    && c / 48 < gx as usize
                    && w < warps.min(6)
                    && 32 * w as u32 + lane < threads
            });
            let want = match at[e] {
                Some((_, r, c)) if owned => {
                    let (ty, tx, gy, gx) = (r / 32, c / 48, gy as usize, gx as usize);
                    let first = ty / 2 * 2;
                    let h = (gy - first).min(2);
                    (first * gx + tx * h + (ty - first)) as f32 + 1.0
                }
                _ => 0.0,
            };
            prop_assert_eq!(count[e], if owned { 1.0 } else { 0.0 }, "banded count at {} ({:?})", e, at[e]);
            prop_assert_eq!(owner[e], want, "banded owner at {} ({:?})", e, at[e]);
        }
    }

    /// Batches that could share an element are refused at binding, naming
    /// the sizes; the two sufficient layouts at their limits are accepted;
    /// the binding's arithmetic never wraps.
    #[test]
    fn a_batch_binding_that_could_overlap_is_refused(
        rows in 1usize..20, cols in 1usize..20, pad in 0usize..4, batches in 2usize..5,
    ) {
        let dev = Device::emulator();
        let stride = cols + pad;
        let span = (rows - 1) * stride + cols;
        let mut y = dev.alloc_zeroed::<f32>((batches - 1) * span.max(stride) + span).unwrap();
        // Stacked: a batch stride of the span exactly fits; one less overlaps
        // (unless it is still side by side: one row, batches along it).
        prop_assert!(y.batched_matrix_mut(rows, cols, stride, batches, span).is_ok());
        let short = y.batched_matrix_mut(rows, cols, stride, batches, span - 1);
        let side_fits = span > cols && (batches - 1) * (span - 1) + cols <= stride;
        prop_assert_eq!(short.is_ok(), side_fits);
        if let Err(e) = short {
            let msg = e.to_string();
            prop_assert!(msg.contains(&format!("batch stride {}", span - 1)), "{}", msg);
            prop_assert!(msg.contains(&format!("{span} elements")), "{}", msg);
        }
        // Side by side: the batches across one row of `batches·cols`.
        let wide = batches * cols;
        let mut z = dev.alloc_zeroed::<f32>(rows * wide + batches).unwrap();
        prop_assert!(z.batched_matrix_mut(rows, cols, wide, batches, cols).is_ok());
        // A batch stride under the columns overlaps, with several rows or one.
        prop_assert!(z.batched_matrix_mut(rows, cols, wide, batches, cols - 1).is_err());
        // The last batch past the row end: not side by side; stacked only
        // with one row (then the batches follow each other along it).
        let past = z.batched_matrix_mut(rows, cols, wide, batches, cols + 1);
        prop_assert_eq!(past.is_ok(), rows == 1);
        // Sizes whose extent wraps a usize are refused, not wrapped.
        prop_assert!(z.batched_matrix_mut(rows, cols, stride, usize::MAX, usize::MAX).is_err());
    }

    #[test]
    fn block_tiles_are_split_among_the_block_packed_and_written_once(
        (grid, block) in dims(), rows in 0usize..30, cols in 0usize..50,
        batches in 1usize..4, pad in 0usize..3,
    ) {
        // `batches` stacked matrices of rows × cols, rows `cols + pad` apart.
        let stride = cols + pad;
        let per_batch = rows * stride;
        let dev = Device::emulator();
        let mut count = dev.alloc_zeroed::<u32>(batches * per_batch).unwrap();
        let mut owner = dev.alloc_zeroed::<u32>(batches * per_batch).unwrap();
        let args = (
            count.batched_matrix_mut(rows, cols, stride, batches, per_batch).unwrap(),
            owner.batched_matrix_mut(rows, cols, stride, batches, per_batch).unwrap(),
        );
        dev.launch(own_block_tiles, LaunchConfig::new(grid, block), args).unwrap();
        // Block (y, x, z) owns rows 4y.., cols 8x.. of batch z: covered iff
        // inside the grid's tiles; within its clipped tile, element e
        // (row-major, packed) belongs to thread e mod threads.
        let threads = (block.x * block.y * block.z) as usize;
        let (mut want_count, mut want_owner) = (vec![0u32; count.len()], vec![0u32; count.len()]);
        for b in 0..batches.min(grid.z as usize) {
            for r in 0..rows.min(4 * grid.y as usize) {
                for c in 0..cols.min(8 * grid.x as usize) {
                    let (tile_rows, tile_cols) = (4.min(rows - r / 4 * 4), 8.min(cols - c / 8 * 8));
                    let e = (r % 4) * tile_cols + c % 8;
                    prop_assert!(r % 4 < tile_rows);
                    let at = b * per_batch + r * stride + c;
                    want_count[at] = 1;
                    want_owner[at] = (e % threads) as u32 + 1;
                }
            }
        }
        prop_assert_eq!(count.to_host().unwrap(), want_count);
        prop_assert_eq!(owner.to_host().unwrap(), want_owner);
    }
}

#[test]
fn warp_tiles_take_the_mma_accumulator_layout_one_lane_per_element() {
    // c_coord is one-to-one: the 32 lanes × 4 elements are the 16 × 8 tile.
    let mut seen = [[0u32; 8]; 16];
    for lane in 0..32 {
        for i in 0..4 {
            let (r, c) = c_coord(lane, i);
            seen[r][c] += 1;
        }
    }
    assert!(seen.iter().flatten().all(|&n| n == 1));

    // Grid (2, 2) of 3-warp blocks: warp w of block (y, x) owns the 16 × 16
    // tile at (16y, 16(3x + w)); a 20 × 90 matrix (stride 96) clips the
    // bottom tile row and the last tile column.
    let dev = Device::emulator();
    let (rows, cols, stride) = (20usize, 90usize, 96usize);
    let mut out = dev
        .upload(&vec![0.0f32; (rows - 1) * stride + cols])
        .unwrap();
    let cfg = LaunchConfig::new(Dim3::new(2, 2, 1), Dim3::new(96, 1, 1));
    dev.launch(
        own_warp_tiles,
        cfg,
        (out.matrix_mut(rows, cols, stride).unwrap(),),
    )
    .unwrap();
    let got = out.to_host().unwrap();
    for (k, &v) in got.iter().enumerate() {
        let (r, c) = (k / stride, k % stride);
        let want = if c < cols {
            ((r % 16) * 16 + c % 16) as f32 + 1.0
        } else {
            0.0 // the padding between rows is not in the matrix
        };
        assert_eq!(v, want, "({r}, {c})");
    }
}

/// The rows-paired order (`MmaOrder`, a tf32 GEMM's 64-bit loads of a
/// k-major A) writes every element of a warp tile exactly once, and puts
/// the `mma`'s row `r` at stored row `2·(r mod 8) + r / 8` — checked against
/// that inverse, computed here by hand — clipping a ragged matrix (30 × 44
/// in one 32 × 48 block of 2 × 3 warp tiles, stride 50) without touching
/// its padding.
#[test]
fn paired_warp_tiles_put_each_mma_element_back_in_place_once() {
    let dev = Device::emulator();
    let (rows, cols, stride) = (30usize, 44usize, 50usize);
    let len = (rows - 1) * stride + cols;
    let mut count = dev.upload(&vec![0.0f32; len]).unwrap();
    let mut logical = dev.upload(&vec![0.0f32; len]).unwrap();
    dev.launch(
        own_warp_grid_paired,
        LaunchConfig::new(Dim3::new(1, 1, 1), Dim3::x(192)),
        (
            count.matrix_mut(rows, cols, stride).unwrap(),
            logical.matrix_mut(rows, cols, stride).unwrap(),
        ),
    )
    .unwrap();
    let (count, logical) = (count.to_host().unwrap(), logical.to_host().unwrap());
    for k in 0..len {
        let (r, c) = (k / stride, k % stride);
        if c >= cols {
            assert_eq!((count[k], logical[k]), (0.0, 0.0), "padding ({r}, {c})");
            continue;
        }
        // Stored row R of a 16-row block holds the mma's row (R mod 2)·8 + R / 2.
        let (sr, mc) = (r % 16, c % 16);
        let mr = (sr % 2) * 8 + sr / 2;
        assert_eq!(count[k], 1.0, "count ({r}, {c})");
        assert_eq!(logical[k], (mr * 16 + mc) as f32 + 1.0, "({r}, {c})");
    }
}

#[test]
fn a_matrix_that_does_not_fit_its_buffer_is_refused_before_launch() {
    let dev = Device::emulator();
    let mut y = dev.alloc_zeroed::<f32>(10).unwrap();
    assert!(y.matrix_mut(2, 5, 5).is_ok());
    assert!(y.matrix_mut(3, 4, 4).is_err());
    assert!(y.matrix_mut(1, 6, 5).is_err());
    assert!(y.matrix_mut(usize::MAX, 2, usize::MAX).is_err());
    assert!(y.matrix_mut(0, 0, 0).is_ok());
    // Two 1 × 5 batches: stacked 5 apart fit exactly in 10; 6 apart need 11.
    assert!(y.batched_matrix_mut(1, 5, 5, 2, 5).is_ok());
    let e = y
        .batched_matrix_mut(1, 5, 5, 2, 6)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("needs 11 elements") && e.contains("has 10"),
        "{e}"
    );
}
