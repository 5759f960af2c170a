//! Kernels that must not compile, each with the error it must give
//! (`compile_fail/*.stderr`). After an intended change to a message, regenerate
//! with `TRYBUILD=overwrite cargo test -p warpforge-macros --test compile_fail`
//! and read the new `.stderr` files before committing them.

#[test]
fn kernels_that_must_not_compile() {
    // One `TestCases` for all files: trybuild builds them in one cargo run.
    trybuild::TestCases::new().compile_fail("tests/compile_fail/*.rs");
}
