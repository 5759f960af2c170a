//! Prints the paths of the probes' `.ptx` files (sm_80, then sm_90a), one a
//! line, that the build wrote, so that CI can check them with ptxas:
//!
//! ```sh
//! for ptx in $(cargo run -q -p warpforge-testkit --bin probes-ptx); do
//!     warpforge ptx "$ptx" --deny-spills
//! done
//! ```

fn main() {
    println!("{}", warpforge_testkit::PROBES_PTX_SM_80);
    println!("{}", warpforge_testkit::PROBES_PTX_SM_90A);
}
