//! Prints the path of the probes' `.ptx` file (sm_80) that the build wrote, so
//! that CI can check it with ptxas:
//!
//! ```sh
//! warpforge ptx "$(cargo run -q -p warpforge-testkit --bin probes-ptx)" --deny-spills
//! ```

fn main() {
    println!("{}", warpforge_testkit::PROBES_PTX_SM_80);
}
