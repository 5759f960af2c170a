//! What the `warpforge` command runs, apart from the library an application
//! links: [`verify`] (every kernel against its CPU reference, on generated
//! inputs), [`bench`](mod@bench) (measurement with events, against the vendor's best in
//! the same run: cuBLAS, cuDNN, the copy bandwidth) and [`registry`] (the
//! operations both walk). Their dependencies (cuBLAS and cuDNN through
//! cudarc, `rand`) stay here, so a program that depends on `warpforge`
//! neither compiles nor links them.

pub mod bench;
pub mod registry;
pub mod verify;
