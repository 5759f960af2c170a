// An owned element borrows the output that minted it: it cannot outlive that
// view (so it cannot be carried to a view made later, of another shape).
use warpforge_device::Out;
use warpforge_device::own::{Elements, Mine};
use warpforge_macros::kernel;

fn keep<'v>(out: Out<'_, f32, Elements>) -> Option<Mine<'v, f32>> {
    let mut out = out;
    out.mine()
}

#[kernel]
pub fn escape(out: Out<f32, Elements>) {
    if let Some(mut mine) = keep(out) {
        mine.set(1.0);
    }
}

fn main() {}
