//! Test support for warpforge's own tests: the probe kernels, one per device
//! primitive (re-exported from `warpforge-probes`), and [`PROBES`], their PTX
//! module, which this crate's `build.rs` compiles with `warpforge-builder`
//! exactly as a user's host crate compiles its own kernels crate.
//!
//! The probes are not in the library's module (`warpforge::ptx::LIBRARY`, one module per family), so
//! a GPU test loads theirs before it launches one:
//!
//! ```no_run
//! use warpforge::{Device, LaunchConfig};
//! use warpforge_testkit::{PROBES, probe_shuffle};
//!
//! let dev = Device::gpu(0)?;
//! dev.load(&PROBES)?; // a no-op on the emulator
//! let x = dev.upload(&[7u32; 32])?;
//! let mut out = dev.alloc_zeroed::<u32>(32)?;
//! let cfg = LaunchConfig::for_elements(32, 32)?;
//! dev.launch(probe_shuffle, cfg, (&x, 0u32, 0u32, &mut out))?;
//! # Ok::<(), warpforge::Error>(())
//! ```
//!
//! After a fault, `Device::reset` (or reopening with `Device::gpu`) gives a
//! fresh context with only the library's module loaded: load [`PROBES`] again.

pub use warpforge_probes::*;

/// The probe kernels' PTX (module `warpforge-probes`), built by this crate's
/// `build.rs` and embedded here.
pub static PROBES: warpforge::ptx::Module = warpforge::include_module!("warpforge-probes");

/// The sm_80 `.ptx` file the build wrote (and [`PROBES`] embeds), for
/// `warpforge ptx FILE --deny-spills`; `cargo run -p warpforge-testkit --bin
/// probes-ptx` prints it.
pub const PROBES_PTX_SM_80: &str = env!("WARPFORGE_PROBES_PTX_SM_80");

/// The sm_90a `.ptx` file (the Hopper probes are only in it), as
/// [`PROBES_PTX_SM_80`].
pub const PROBES_PTX_SM_90A: &str = env!("WARPFORGE_PROBES_PTX_SM_90A");
