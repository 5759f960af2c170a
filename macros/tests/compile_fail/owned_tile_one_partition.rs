// A block tile has one partition among its threads, fixed by the output's
// mapping: a `BlockTiles` output's tile offers only the element walk, so a
// thread in one branch cannot take a micro-tile of the same tile while a
// thread in another walks its elements (thread 4 by the walk and thread 1 by
// 4 × 4 micro-tiles would both own (0, 4)). Micro-tiles are a mapping of
// their own, `MicroTiles<TM, TN, MR, MC>`.
use warpforge_device::OutMatrix;
use warpforge_device::own::{BlockTiles, MicroTiles};
use warpforge_device::thread;
use warpforge_macros::kernel;

#[kernel]
pub fn mixed_partitions(mut out: OutMatrix<f32, BlockTiles<16, 16>>) {
    if let Some(mut tile) = out.tile() {
        if thread::thread_idx().x % 2 == 0 {
            for mut e in tile.elements() {
                e.set(1.0);
            }
        } else if let Some(mut mine) = tile.micro_tile::<4, 4>() {
            if let Some(mut s) = mine.slot(0, 0) {
                s.set(2.0);
            }
        }
    }
}

// Nor the other way round: a `MicroTiles` output hands out micro-tiles only,
// no block tile to walk.
#[kernel]
pub fn walk_micro_tiles(mut out: OutMatrix<f32, MicroTiles<16, 16, 4, 4>>) {
    if let Some(mut tile) = out.tile() {
        for mut e in tile.elements() {
            e.set(1.0);
        }
    }
}

fn main() {}
