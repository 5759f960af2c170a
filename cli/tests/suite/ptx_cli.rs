//! `warpforge ptx`: the real binary on the embedded module and on the line-info
//! fixture (`tests/fixtures/lineinfo.ptx`, see `tests/fixtures/README.md`).
//!
//! Tests that need NVIDIA's tools run when they are installed (CI pip-installs
//! `nvidia-cuda-nvcc` and `nvidia-cuda-nvdisasm`); elsewhere they print why
//! they did nothing. The argument checks run everywhere. The fixture is
//! compiled in and written to a scratch directory, so the test binary also
//! runs away from the source tree (`scripts/gpu-suite`).

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use warpforge_cli::ptxas::Ptxas;
use warpforge_cli::sass::{self, Disassembler};

/// rustc's PTX of `fixtures/lineinfo/src/lib.rs`, with line tables and DWARF.
const FIXTURE: &str = include_str!("fixtures/lineinfo.ptx");
/// The source it was compiled from; its `.file` directive names this path.
const FIXTURE_SOURCE: &str = include_str!("fixtures/lineinfo/src/lib.rs");
const FIXTURE_SOURCE_PATH: &str = "cli/tests/fixtures/lineinfo/src/lib.rs";

/// A fresh directory in the temp dir holding `lineinfo.ptx` and, at the path
/// its `.file` directive names, its source; removed on drop.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "warpforge-ptx-cli-{}-{}-{name}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let source = dir.join(FIXTURE_SOURCE_PATH);
        std::fs::create_dir_all(source.parent().unwrap()).unwrap();
        std::fs::write(&source, FIXTURE_SOURCE).unwrap();
        std::fs::write(dir.join("lineinfo.ptx"), FIXTURE).unwrap();
        Scratch { dir }
    }

    /// The fixture, relative to the scratch directory (the commands' working directory).
    fn fixture(&self) -> &'static str {
        "lineinfo.ptx"
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Runs `warpforge ptx ARGS…` in the scratch directory with `env` set.
    fn ptx(&self, args: &[&str], env: &[(&str, &str)]) -> (Output, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_warpforge"))
            .arg("ptx")
            .args(args)
            .envs(env.iter().copied())
            .current_dir(&self.dir)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out, stdout, stderr)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn have_ptxas() -> bool {
    match Ptxas::locate() {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipped: needs ptxas ({e})");
            false
        }
    }
}

fn have_disassembler() -> bool {
    have_ptxas()
        && match Disassembler::locate() {
            Ok(_) => true,
            Err(e) => {
                eprintln!("skipped: needs nvdisasm ({e})");
                false
            }
        }
}

/// The opcodes of the SASS lines of `text`.
fn opcodes(text: &str) -> Vec<&str> {
    text.lines().filter_map(sass::opcode).collect()
}

#[test]
fn an_unknown_kernel_exits_2_naming_close_ones() {
    let scratch = Scratch::new("unknown-kernel");
    let (out, _, stderr) = scratch.ptx(&["--kernel", "axpy_f3"], &[]);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no kernel `axpy_f3` in warpforge-kernels-reduce (embedded)"),
        "{stderr}"
    );
    assert!(stderr.contains("axpy_f32"), "{stderr}");

    let fixture = scratch.fixture();
    let (out, _, stderr) = scratch.ptx(&[fixture, "--sass", "--kernel", "sacpy"], &[]);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("close names: saxpy"), "{stderr}");

    let (out, _, stderr) = scratch.ptx(&["--diff", fixture, "--kernel", "nope_at_all"], &[]);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let both = format!("in {fixture} or warpforge-kernels-reduce (embedded)");
    assert!(stderr.contains(&both), "{stderr}");
}

#[test]
fn a_file_that_is_not_ptx_exits_2() {
    let scratch = Scratch::new("not-ptx");
    std::fs::write(scratch.path("notes.ptx"), "hello\n").unwrap();
    let (out, _, stderr) = scratch.ptx(&["notes.ptx"], &[]);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("notes.ptx is not PTX"), "{stderr}");
    let (out, _, stderr) = scratch.ptx(&["missing.ptx"], &[]);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("reading missing.ptx"), "{stderr}");
}

#[test]
fn sass_of_axpy_f32_has_its_fma_under_rust_source_lines() {
    if !have_disassembler() {
        return;
    }
    let scratch = Scratch::new("axpy-sass");
    let (out, stdout, stderr) = scratch.ptx(&["--sass", "--kernel", "axpy_f32"], &[]);
    assert!(out.status.success(), "{stderr}");
    let headers: Vec<&str> = stdout.lines().filter(|l| l.starts_with("//====")).collect();
    assert_eq!(headers.len(), 1, "{stdout}");
    assert!(
        headers[0].starts_with("//==== axpy_f32 (sm_90): "),
        "{stdout}"
    );
    let ops = opcodes(&stdout);
    assert!(
        ops.iter()
            .any(|op| op.starts_with("FFMA") || op.starts_with("FMUL")),
        "{stdout}"
    );
    assert!(ops.iter().any(|op| op.starts_with("EXIT")), "{stdout}");
    // The library module is built with line info: its SASS maps back to the kernel's Rust file.
    assert!(
        stdout.contains("//## File \"./kernels/reduce/src/elementwise.rs\", line "),
        "{stdout}"
    );
    // The header's count is the number of instructions printed (the padding is not printed).
    let count = format!("; {} SASS instructions", ops.len());
    assert!(headers[0].ends_with(&count), "{} vs {count}", headers[0]);
}

#[test]
fn sass_of_line_info_ptx_interleaves_rust_source_lines() {
    if !have_disassembler() {
        return;
    }
    let scratch = Scratch::new("lineinfo-sass");
    let (out, stdout, stderr) =
        scratch.ptx(&[scratch.fixture(), "--sass", "--kernel", "saxpy"], &[]);
    assert!(out.status.success(), "{stderr}");
    // The fixture is raw rustc output: its DWARF sections go before ptxas sees it.
    assert!(stderr.contains("dropped its DWARF"), "{stderr}");
    assert!(stdout.contains("//==== saxpy (sm_90)"), "{stdout}");
    assert!(!stdout.contains("//==== scale"), "{stdout}");
    if !Disassembler::locate().unwrap().shows_source_lines() {
        eprintln!("cuobjdump found, not nvdisasm: no source lines to check");
        return;
    }
    let file_line = format!("//## File \"{FIXTURE_SOURCE_PATH}\", line ");
    assert!(stdout.contains(&file_line), "{stdout}");
    // The fma's source line, with its text, then the FFMA in the block that follows.
    let lines: Vec<&str> = stdout.lines().collect();
    let fma_text = lines
        .iter()
        .position(|l| l.contains("//   ") && l.contains("core::intrinsics::fmaf32"))
        .unwrap_or_else(|| panic!("no source text of the fma line:\n{stdout}"));
    assert!(lines[fma_text - 1].contains(&file_line), "{stdout}");
    let ffma = lines
        .iter()
        .position(|l| sass::opcode(l) == Some("FFMA"))
        .unwrap_or_else(|| panic!("no FFMA:\n{stdout}"));
    assert!(ffma > fma_text, "{stdout}");
    assert!(
        !lines[fma_text..ffma]
            .iter()
            .any(|l| l.contains("//## File")),
        "another source line between the fma's and the FFMA:\n{stdout}"
    );
}

#[test]
fn report_takes_line_info_ptx_raw_or_sanitised_and_narrows_to_a_kernel() {
    if !have_ptxas() {
        return;
    }
    let scratch = Scratch::new("report");
    std::fs::write(
        scratch.path("clean.ptx"),
        warpforge_builder::ptxas_ready(FIXTURE),
    )
    .unwrap();
    for file in [scratch.fixture(), "clean.ptx"] {
        let (out, stdout, stderr) = scratch.ptx(&[file], &[]);
        assert!(out.status.success(), "{file}: {stderr}");
        let rows: Vec<(&str, &str)> = table_rows(&stdout)
            .iter()
            .filter_map(|l| {
                let mut cells = l.split_whitespace();
                Some((cells.next()?, cells.next()?))
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("saxpy", "sm_80"),
                ("scale", "sm_80"),
                ("saxpy", "sm_90"),
                ("scale", "sm_90")
            ],
            "{stdout}"
        );
    }
    let (out, stdout, stderr) = scratch.ptx(
        &[scratch.fixture(), "--kernel", "scale", "--arch", "sm_90"],
        &[],
    );
    assert!(out.status.success(), "{stderr}");
    let rows = table_rows(&stdout);
    assert_eq!(rows.len(), 1, "{stdout}");
    assert!(
        rows[0].starts_with("scale ") && rows[0].contains("sm_90"),
        "{stdout}"
    );
}

/// The data rows of a table (after its `---` rule), up to a diff's summary line.
fn table_rows(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("---"))
        .skip(1)
        .take_while(|l| !l.contains("kernel×arch rows"))
        .collect()
}

/// Writes the fixture with saxpy's fma split into a mul and an add, and
/// `scale` renamed, as `edited.ptx`.
fn write_edited_fixture(scratch: &Scratch) -> &'static str {
    let fma = "fma.rn.f32 \t%r8, %r1, %r6, %r7;";
    assert!(
        FIXTURE.contains(fma),
        "the fixture changed; update this test"
    );
    let edited = FIXTURE
        .replace(
            fma,
            "mul.rn.f32 \t%r8, %r1, %r6;\n\tadd.rn.f32 \t%r8, %r8, %r7;",
        )
        .replace("scale", "scale_v2");
    std::fs::write(scratch.path("edited.ptx"), edited).unwrap();
    "edited.ptx"
}

#[test]
fn diff_shows_changed_added_and_removed_kernels() {
    if !have_ptxas() {
        return;
    }
    let scratch = Scratch::new("diff");
    let edited = write_edited_fixture(&scratch);
    let (out, stdout, stderr) = scratch.ptx(&["--diff", scratch.fixture(), edited], &[]);
    assert!(out.status.success(), "{stderr}");
    let label = if Disassembler::locate().is_ok() {
        "SASS instrs"
    } else {
        "PTX instrs"
    };
    assert!(stdout.contains(label), "{stdout}");
    let rows = table_rows(&stdout);
    assert_eq!(rows.len(), 3, "{stdout}");
    // An fma became a mul and an add: one more instruction, in PTX and in SASS.
    assert!(
        rows[0].starts_with("saxpy ") && rows[0].ends_with("changed"),
        "{stdout}"
    );
    assert!(rows[0].contains("(+1)"), "{stdout}");
    assert!(
        rows[1].starts_with("scale ") && rows[1].ends_with("removed"),
        "{stdout}"
    );
    assert!(
        rows[2].starts_with("scale_v2 ") && rows[2].ends_with("added"),
        "{stdout}"
    );
    assert!(
        stdout.contains("3 kernel×arch rows: 1 changed, 0 unchanged, 1 added, 1 removed"),
        "{stdout}"
    );
}

#[test]
fn without_a_disassembler_diff_counts_ptx_and_sass_says_what_to_install() {
    if !have_ptxas() {
        return;
    }
    let missing = [("WARPFORGE_NVDISASM", "/nonexistent/nvdisasm")];
    let scratch = Scratch::new("no-nvdisasm");
    let edited = write_edited_fixture(&scratch);
    let (out, stdout, stderr) = scratch.ptx(&["--diff", scratch.fixture(), edited], &missing);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("instructions: PTX"), "{stdout}");
    assert!(stdout.contains("PTX instrs"), "{stdout}");
    // saxpy's body has 22 PTX instructions; the edit makes it 23.
    assert!(table_rows(&stdout)[0].contains("22 → 23 (+1)"), "{stdout}");
    assert!(
        stderr.contains("pip install nvidia-cuda-nvdisasm"),
        "{stderr}"
    );

    let (out, _, stderr) = scratch.ptx(&["--sass", "--kernel", "axpy_f32"], &missing);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("WARPFORGE_NVDISASM=/nonexistent/nvdisasm (no such file)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("pip install nvidia-cuda-nvdisasm"),
        "{stderr}"
    );
}

#[test]
fn diff_of_the_embedded_module_against_its_own_emitted_ptx_is_unchanged() {
    if !have_ptxas() {
        return;
    }
    let scratch = Scratch::new("emit");
    let (out, stdout, stderr) = scratch.ptx(&["--emit", "emitted", "--kernel", "axpy_f32"], &[]);
    assert!(out.status.success(), "{stderr}");
    let written = stdout
        .lines()
        .find_map(|l| l.strip_prefix("wrote "))
        .unwrap_or_else(|| panic!("no file written:\n{stdout}"));
    let (out, stdout, stderr) = scratch.ptx(&["--diff", written, "--kernel", "axpy_f32"], &[]);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("new: warpforge-kernels-reduce (embedded)"),
        "{stdout}"
    );
    let rows = table_rows(&stdout);
    assert_eq!(rows.len(), 1, "{stdout}");
    assert!(
        rows[0].starts_with("axpy_f32 ") && rows[0].ends_with("same"),
        "{stdout}"
    );
}

/// `--budget`: the warp-tiled SGEMM's innermost FFMA loop against a limit
/// under its figure (exit 1, naming kernel, figure and limit) and one over
/// it (exit 0, the loop table printed); both architectures, one ptxas each.
#[test]
fn budget_names_the_kernel_figure_and_limit_it_exceeds() {
    if !have_disassembler() {
        return;
    }
    let scratch = Scratch::new("budget");
    let kernel = "gemm_f32_nn_128x128x8";
    let write = |name: &str, limit: &str| {
        let text = format!(
            "[[family]]\nkernels = \"gemm_f32_*_128x128x8\"\ntarget = \"≤ 1.3 per FFMA\"\n\
             inner_per_op = {limit}\nk_loop_calls = 0\nspills = 0\n"
        );
        std::fs::write(scratch.path(name), text).unwrap();
    };
    write("tight.toml", "1.0");
    let (out, stdout, stderr) = scratch.ptx(&["--budget", "tight.toml", "--kernel", kernel], &[]);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    for arch in ["sm_80", "sm_90"] {
        let line = format!(
            "error: SASS budget: {kernel} ({arch}): instructions per FFMA in the innermost loop is "
        );
        assert!(stderr.contains(&line), "{stderr}");
    }
    assert!(
        stderr.contains("over its limit 1.00 (family `gemm_f32_*_128x128x8`)"),
        "{stderr}"
    );
    write("loose.toml", "2.0");
    let (out, stdout, stderr) = scratch.ptx(&["--budget", "loose.toml", "--kernel", kernel], &[]);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with(kernel)).collect();
    // The resource table's two rows and the loop table's two.
    assert_eq!(rows.len(), 4, "{stdout}");
    assert!(
        rows.iter()
            .any(|r| r.contains("sm_90") && r.ends_with("≤ 1.3 per FFMA")),
        "{stdout}"
    );
    assert!(
        stdout.contains("every kernel within its limits"),
        "{stdout}"
    );
    // A malformed table is an error before anything is assembled.
    std::fs::write(scratch.path("bad.toml"), "[[family]]\nkernel = \"x\"\n").unwrap();
    let (out, _, stderr) = scratch.ptx(&["--budget", "bad.toml"], &[]);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown key `kernel`"), "{stderr}");
}
