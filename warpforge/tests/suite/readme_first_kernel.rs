//! The README's "Write your first kernel" walkthrough, so it keeps working.
//!
//! The walkthrough shows excerpts of `examples/my-first-kernels/` (which CI
//! builds and runs in its own workspace, PTX included). Here: every code block
//! the section labels with a file (`// my-kernels/src/lib.rs`) is checked to be
//! that file's text, and the example's kernels run on the emulator against the
//! same CPU computation as its `main`.

use std::path::{Path, PathBuf};
use warpforge::{Device, Dim3, LaunchConfig};

/// The example's kernels crate, compiled into this test for the emulator.
#[path = "../../../examples/my-first-kernels/my-kernels/src/lib.rs"]
mod my_kernels;

use my_kernels::{bias_relu_clamp, row_maxabs_normalize};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("warpforge/ is in the repository")
        .to_path_buf()
}

/// The "Write your first kernel" section of the README.
fn section() -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let start = readme
        .find("## Write your first kernel\n")
        .expect("README has a \"Write your first kernel\" section");
    let rest = &readme[start + 3..];
    let end = rest.find("\n## ").map_or(rest.len(), |i| i + 1);
    rest[..end].to_owned()
}

/// `(file, block)` for each fenced block whose first line is `// FILE` or `# FILE`.
fn labelled_blocks(section: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        if !line.starts_with("```") || line == "```" {
            continue;
        }
        let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        let Some(first) = body.first() else { continue };
        let label = first
            .strip_prefix("// ")
            .or_else(|| first.strip_prefix("# "))
            .filter(|f| f.ends_with(".rs") || f.ends_with(".toml"));
        if let Some(file) = label {
            blocks.push((file.to_owned(), body[1..].join("\n")));
        }
    }
    blocks
}

#[test]
fn the_readme_shows_the_example_as_it_is() {
    let blocks = labelled_blocks(&section());
    let files: Vec<&str> = blocks.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        files,
        [
            "my-kernels/src/lib.rs",
            "my-app/Cargo.toml",
            "my-app/build.rs",
            "my-app/src/main.rs"
        ],
        "the README's labelled code blocks changed: update this test and the example together"
    );
    let example = repo().join("examples/my-first-kernels");
    for (file, block) in &blocks {
        let text = std::fs::read_to_string(example.join(file))
            .unwrap_or_else(|e| panic!("README shows {file}, which the example lacks: {e}"));
        // `// …` (or `# …`) marks lines left out; the pieces between appear in order.
        let mut from = 0;
        let lines: Vec<&str> = block.lines().collect();
        let elided = |l: &&str| matches!(l.trim(), "// …" | "# …");
        for piece in lines.split(elided) {
            let piece = piece.join("\n");
            match text[from..].find(&piece) {
                Some(at) => from += at + piece.len(),
                None => panic!(
                    "README's block for {file} is not the example's text (in order); this part \
                     differs:\n{piece}"
                ),
            }
        }
    }
}

/// A deterministic value in [-8, 8) with 4 fraction bits, as the example's `sample`.
fn sample(i: usize) -> f32 {
    let h = (i as u32).wrapping_mul(2_654_435_761) >> 24;
    (h as f32 - 128.0) / 16.0
}

#[test]
fn the_readme_kernels_match_the_cpu_bit_for_bit_on_the_emulator() -> warpforge::Result<()> {
    let dev = Device::emulator();
    for (rows, cols) in [(37, 45), (1, 1), (4, 33), (9, 32), (0, 5)] {
        let x: Vec<f32> = (0..rows * cols)
            .map(|i| if i / cols == 2 { 0.0 } else { sample(i) })
            .collect();
        let bias: Vec<f32> = (0..cols).map(|c| sample(7919 * c + 1)).collect();
        let cap = 6.0f32;
        let x_dev = dev.upload(&x)?;
        let bias_dev = dev.upload(&bias)?;
        let mut y = dev.alloc_zeroed::<f32>(rows * cols)?;

        let cfg = LaunchConfig::for_2d(rows, cols, (16, 8))?;
        dev.launch(
            bias_relu_clamp,
            cfg,
            (rows, cols, cap, &x_dev, &bias_dev, &mut y),
        )?;
        let expected: Vec<u32> = (0..rows * cols)
            .map(|i| (x[i] + bias[i % cols]).max(0.0).min(cap).to_bits())
            .collect();
        let got: Vec<u32> = y.to_host()?.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, expected, "bias_relu_clamp {rows} × {cols}");

        let cfg = LaunchConfig::new(
            Dim3::new(1, rows.div_ceil(4).max(1) as u32, 1),
            Dim3::new(32, 4, 1),
        );
        dev.launch(row_maxabs_normalize, cfg, (rows, cols, &x_dev, &mut y))?;
        let expected: Vec<u32> = x
            .chunks(cols.max(1))
            .flat_map(|row| {
                let largest = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                row.iter().map(move |v| {
                    let r = if largest == 0.0 { 0.0 } else { v / largest };
                    r.to_bits()
                })
            })
            .collect();
        let got: Vec<u32> = y.to_host()?.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, expected, "row_maxabs_normalize {rows} × {cols}");
    }
    // The declared block shape is enforced before anything runs.
    let x = dev.upload(&[1.0f32; 4])?;
    let mut y = dev.alloc_zeroed::<f32>(4)?;
    let wrong = LaunchConfig::new(Dim3::new(1, 1, 1), Dim3::new(64, 2, 1));
    assert!(
        dev.launch(row_maxabs_normalize, wrong, (2usize, 2usize, &x, &mut y))
            .is_err()
    );
    Ok(())
}
