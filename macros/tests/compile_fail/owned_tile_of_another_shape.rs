// A tile belongs to the tile shape of the output it came from (its type): a
// 16 × 16 block tile cannot be used where an 8 × 8 one is expected.
use warpforge_device::OutMatrix;
use warpforge_device::own::{BlockTile, BlockTiles};
use warpforge_macros::kernel;

fn fill_8x8(tile: &mut BlockTile<'_, f32, 8, 8>) {
    for mut e in tile.elements() {
        e.set(1.0);
    }
}

#[kernel]
pub fn wrong_shape(mut out: OutMatrix<f32, BlockTiles<16, 16>>) {
    if let Some(mut tile) = out.tile() {
        fill_8x8(&mut tile);
    }
}

fn main() {}
