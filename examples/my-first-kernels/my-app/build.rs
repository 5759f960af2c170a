//! Compiles the `my-kernels` crate of this workspace (at "..") to PTX and
//! writes `$OUT_DIR/warpforge-modules/my-kernels.rs` for `include_module!`.
//! It reruns when my-kernels (or a path dependency of it) changes; a compile
//! error in a kernel stops the build with rustc's message and its file:line.

fn main() {
    warpforge_builder::PtxBuilder::new("my-kernels", "..").build_or_exit();
}
