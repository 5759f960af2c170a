//! Host code that must not compile: the compile-time halves of the failure
//! classes (mixed dtypes, implicit host↔device copies, a read-only buffer as
//! an output, a wrong argument list, aliasing an input with an output, and a
//! host view of pinned memory that a queued download writes), a tensor-core
//! tile copy without the proof of its one check (`InteriorPanel`), and a
//! hand-written safe `impl Kernel` (the trait is `unsafe`: only `#[kernel]`
//! implements it, from the same signature as the PTX entry). Each
//! `compile_fail/*.stderr` holds the error it must give; after an intended
//! change, regenerate with `TRYBUILD=overwrite cargo test -p warpforge --test
//! compile_fail` and read the new files before committing them.
//!
//! The wrong-device class cannot be a type error (devices are values chosen
//! at run time); it is `Error::DeviceMismatch`, tested in `host_api.rs`.

#[test]
fn host_code_that_must_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/compile_fail/*.rs");
}
