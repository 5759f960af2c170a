// An owned element cannot be sent to another (host) thread: it is not `Send`.
use warpforge_device::Out;
use warpforge_device::own::Elements;
use warpforge_macros::kernel;

#[kernel]
pub fn send_away(mut out: Out<f32, Elements>) {
    if let Some(mut mine) = out.mine() {
        std::thread::scope(|s| {
            s.spawn(move || mine.set(1.0));
        });
    }
}

fn main() {}
