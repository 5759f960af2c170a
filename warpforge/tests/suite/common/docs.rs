//! Generated blocks in the repository's Markdown (`docs/…`): a table made by a
//! test from the code or from recorded figures sits between
//! `<!-- generated: from … by TEST -->` and `<!-- end generated -->`, and the
//! test fails while the text there differs from what it makes.
//! `WARPFORGE_REGENERATE_DOCS=1` makes the test rewrite the block instead.

use std::path::{Path, PathBuf};

/// The environment variable that makes [`check_generated`] rewrite a block.
pub const REGENERATE: &str = "WARPFORGE_REGENERATE_DOCS";

/// Where a generated block ends.
pub const END: &str = "<!-- end generated -->";

/// The repository's root (`warpforge/..`).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("warpforge/ is in the repository")
        .to_path_buf()
}

/// Checks that the block of `doc` (a path from the repository's root) that
/// starts with the line `begin` (its marker, newline included) is `expected`,
/// or rewrites it with `expected` when [`REGENERATE`] is `1`. `test` names the
/// test, for the message saying how to regenerate it.
pub fn check_generated(doc: &str, begin: &str, expected: &str, test: &str) {
    let path = repo().join(doc);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{doc} (with the block `{}`): {e}", begin.trim_end()));
    let start = text
        .find(begin)
        .unwrap_or_else(|| panic!("{doc} has no block starting `{}`", begin.trim_end()))
        + begin.len();
    let end = start
        + text[start..]
            .find(END)
            .unwrap_or_else(|| panic!("{doc}: the block `{}` has no {END}", begin.trim_end()));
    if std::env::var(REGENERATE).is_ok_and(|v| v == "1") {
        let regenerated = format!("{}{expected}{}", &text[..start], &text[end..]);
        std::fs::write(&path, regenerated).unwrap();
        return;
    }
    let shown = &text[start..end];
    let first_difference = shown
        .lines()
        .zip(expected.lines())
        .find(|(s, e)| s != e)
        .map_or(String::new(), |(s, e)| {
            format!("\n  shown:    {s}\n  expected: {e}")
        });
    assert!(
        shown == expected,
        "{doc}'s generated block `{}` is stale ({} lines shown, {} expected):{first_difference}\n\
         regenerate it: {REGENERATE}=1 cargo test -p warpforge --test suite -- {test}",
        begin.trim_end(),
        shown.lines().count(),
        expected.lines().count(),
    );
}
