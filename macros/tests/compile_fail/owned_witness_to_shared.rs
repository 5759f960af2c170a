// An owned element cannot be handed to another thread of the block through
// shared memory: it is not a `SharedElement`.
use warpforge_device::own::{Elements, Mine};
use warpforge_device::{Out, shared, thread};
use warpforge_macros::kernel;

#[kernel(shared = [u64; 64])]
pub fn hand_over(mut out: Out<f32, Elements>) {
    let board = shared::array::<Option<Mine<'static, f32>>, 32>();
    let _ = (&mut out, board, thread::lane_id());
}

fn main() {}
