//! Kernels that must not compile, each with the error it must give
//! (`compile_fail/*.stderr`), and a few that must (`pass/*.rs`). After an
//! intended change to a message, regenerate with
//! `TRYBUILD=overwrite cargo test -p warpforge-macros --test compile_fail`
//! and read the new `.stderr` files before committing them.

#[test]
fn kernels_that_must_not_compile() {
    // One `TestCases` for all files: trybuild builds them in one cargo run.
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/*.rs");
    // And what must compile (and run): `pass/*.rs`, e.g. kernels in a crate
    // that forbids `unsafe_code`.
    cases.pass("tests/pass/*.rs");
}
