//! The parts of the `warpforge` command (`src/main.rs`), as a library so that
//! its tests and doc examples can call them. Not a stable API: programs that
//! launch kernels depend on the `warpforge` library, which compiles none of this
//! (no clap, no npyz).
//!
//! | module | command | what it holds |
//! | --- | --- | --- |
//! | [`npy`] | `run` | reading and writing `.npy` arrays |
//! | [`run`] | `run reduce` | one library operation on a `.npy` array |
//! | [`ptxas`] | `ptx` | finding and running `ptxas`; its per-kernel resource report |
//! | [`sass`] | `ptx --sass` | `nvdisasm`/`cuobjdump`, SASS listings with Rust source lines |
//! | [`sass_loops`] | `ptx --sass`, `--budget` | the innermost HMMA/FFMA loop of a kernel's SASS, per HMMA |
//! | [`sass_budget`] | `ptx --budget` | the SASS budget table and its verdict |
//! | [`ptx_diff`] | `ptx --diff` | per-kernel before/after tables |
//! | [`doctor`] | `doctor` | driver, GPUs, embedded PTX, ptxas and emulator, with a verdict |
//! | [`startup`] | `doctor --timings` | start-up phases in fresh processes, against the driver's floor |
//! | [`bench_table`] | `bench` | [`warpforge_tools::bench`]'s reports as text tables |
//! | [`bench_data`] | `bench --json`, `bench compare`, `bench table` | results as JSON records, compared, as the README's and docs' tables |
//! | [`bench_plot`] | `bench --plot` | results as SVG charts |
//! | [`profile`] | `profile` | the emulator's memory-traffic profile of an operation |
//!
//! `verify` is the library's ([`warpforge_tools::verify`]); the command prints its reports.

pub mod bench_data;
pub mod bench_plot;
pub mod bench_table;
pub mod doctor;
pub mod npy;
pub mod profile;
pub mod ptx_diff;
pub mod ptxas;
pub mod run;
pub mod sass;
pub mod sass_budget;
pub mod sass_loops;
pub mod startup;

/// A name column as wide as its longest cell (at least its six-letter
/// header, `kernel` or `module`), so the columns of a table line up.
pub fn column_width<'a>(cells: impl Iterator<Item = &'a str>) -> usize {
    cells.map(str::len).max().unwrap_or(0).max(6)
}
