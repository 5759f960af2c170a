// Which elements a thread owns is declared in the signature (`Out<T, Elements>`,
// `OutMatrix<T>`), the same for every thread: a plain `Out<T>` (any index,
// not exclusive) and a 2-D view whose shape the thread picked hand out none.
use warpforge_device::Out;
use warpforge_macros::kernel;

#[kernel]
pub fn undeclared(mut out: Out<f32>, rows: usize) {
    for mut y in out.grid_stride() {
        y.set(1.0);
    }
    if let Some(mut m) = out.into_2d(rows, 4, 4)
        && let Some(mut e) = m.mine()
    {
        e.set(1.0);
    }
}

fn main() {}
