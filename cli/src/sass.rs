//! From PTX to SASS: what `warpforge ptx --sass` and `--diff` need besides `ptxas`.
//!
//! `ptxas` turns PTX into a cubin; NVIDIA's `nvdisasm` (pip:
//! `nvidia-cuda-nvdisasm`) or, as a fallback, `cuobjdump -sass` (pip:
//! `nvidia-cuda-cuobjdump`) turns the cubin into SASS, the GPU's own
//! instructions. This module finds and runs the disassembler ([`Disassembler`])
//! and holds the text processing around it, all pure functions:
//!
//! - PTX: [`has_line_info`], [`entries`], [`target`] and
//!   [`ptx_instruction_count`] read a module (made ready for `ptxas` by
//!   [`warpforge_builder::ptxas_ready`], the function the build uses).
//! - SASS: [`split_functions`] cuts a disassembly into one [`SassFunction`]
//!   per kernel, [`SassFunction::instruction_count`] counts its instructions,
//!   [`annotate_sources`] adds the Rust source text under nvdisasm's
//!   `//## File "…", line N` comments.
//! - Names: [`close_names`] suggests kernels for a misspelt `--kernel`.
//!
//! ```
//! use warpforge_cli::sass;
//! let ptx = ".version 7.0\n.target sm_80, debug\n.visible .entry k()\n{\n\tret;\n}\n\
//!            \t.section\t.debug_info\n\t{\n\t}\n";
//! let clean = warpforge_builder::ptxas_ready(ptx);
//! assert_eq!(clean, ".version 7.0\n.target sm_80\n.visible .entry k()\n{\n\tret;\n}\n");
//! assert_eq!(sass::entries(&clean), ["k"]);
//! assert_eq!(sass::target(&clean), Some("sm_80"));
//! assert_eq!(sass::ptx_instruction_count(&clean, "k"), Some(1));
//! ```

use crate::ptxas::{Located, PtxasError, TempFile, ToolSpec, locate_tool};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

/// Environment variable naming the disassembler (`nvdisasm`, or a `cuobjdump`).
pub const ENV_NVDISASM: &str = "WARPFORGE_NVDISASM";

const NVDISASM_TOOL: ToolSpec = ToolSpec {
    exe: "nvdisasm",
    env: ENV_NVDISASM,
    wheel_dirs: &["nvidia/cu13/bin"],
};

const CUOBJDUMP_TOOL: ToolSpec = ToolSpec {
    exe: "cuobjdump",
    // Only nvdisasm has an override variable; WARPFORGE_NVDISASM may name a
    // cuobjdump too (see `Disassembler::locate`).
    env: ENV_NVDISASM,
    wheel_dirs: &["nvidia/cu13/bin"],
};

/// Which program disassembles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisassemblerKind {
    /// `nvdisasm -c [-g]`: the SASS, with Rust source lines when the cubin has line info.
    Nvdisasm,
    /// `cuobjdump -sass`: the SASS only (it cannot show source lines).
    Cuobjdump,
}

/// A located SASS disassembler.
#[derive(Clone, Debug)]
pub struct Disassembler {
    /// Which program it is.
    pub kind: DisassemblerKind,
    /// Its path.
    pub path: PathBuf,
    /// The version it reports, e.g. `"13.5.37"`.
    pub version: String,
}

impl Disassembler {
    /// Finds `nvdisasm`, or `cuobjdump` when there is no `nvdisasm`.
    ///
    /// `WARPFORGE_NVDISASM`, when set, is authoritative: it names the binary
    /// (a file whose name starts with `cuobjdump` is run as cuobjdump), and
    /// nothing else is tried. Otherwise each tool is looked for in turn on
    /// `PATH`, in `$CUDA_PATH/bin`, in `/usr/local/cuda/bin`, and in the pip
    /// wheels (`nvidia-cuda-nvdisasm` and `nvidia-cuda-cuobjdump` install to
    /// `site-packages/nvidia/cu13/bin`, next to the pip `ptxas`).
    pub fn locate() -> Result<Disassembler, PtxasError> {
        let mut searched = Vec::new();
        let overridden = std::env::var_os(ENV_NVDISASM).is_some();
        if let Some(found) = locate_tool(&NVDISASM_TOOL, &mut searched)? {
            let kind = if overridden && file_stem_is(&found, "cuobjdump") {
                DisassemblerKind::Cuobjdump
            } else {
                DisassemblerKind::Nvdisasm
            };
            return Ok(Disassembler::new(kind, found));
        }
        if !overridden && let Some(found) = locate_tool(&CUOBJDUMP_TOOL, &mut searched)? {
            return Ok(Disassembler::new(DisassemblerKind::Cuobjdump, found));
        }
        Err(PtxasError::DisassemblerNotFound { searched })
    }

    fn new(kind: DisassemblerKind, found: Located) -> Disassembler {
        Disassembler {
            kind,
            path: found.path,
            version: found.version,
        }
    }

    /// The program's name, `"nvdisasm"` or `"cuobjdump"`.
    pub fn name(&self) -> &'static str {
        match self.kind {
            DisassemblerKind::Nvdisasm => "nvdisasm",
            DisassemblerKind::Cuobjdump => "cuobjdump",
        }
    }

    /// Whether it can interleave source lines (`nvdisasm -g`).
    pub fn shows_source_lines(&self) -> bool {
        self.kind == DisassemblerKind::Nvdisasm
    }

    /// Disassembles `cubin`; `line_info` asks for source lines (`nvdisasm -g`,
    /// ignored by cuobjdump). The text goes to [`split_functions`].
    pub fn disassemble(&self, cubin: &[u8], line_info: bool) -> Result<String, PtxasError> {
        let file = TempFile::create("cubin", cubin)?;
        let mut command = Command::new(&self.path);
        match self.kind {
            DisassemblerKind::Nvdisasm => {
                command.arg("-c");
                if line_info {
                    command.arg("-g");
                }
            }
            DisassemblerKind::Cuobjdump => {
                command.arg("-sass");
            }
        }
        let output = command
            .arg(&file.path)
            .output()
            .map_err(|source| PtxasError::Io {
                what: format!("running {}", self.path.display()),
                source,
            })?;
        if !output.status.success() {
            let mut stderr = String::from_utf8_lossy(&output.stderr)
                .trim_end()
                .to_owned();
            if stderr.is_empty() {
                stderr = format!("(no output; {})", output.status);
            }
            return Err(PtxasError::DisassemblerFailed {
                tool: format!("{} {}", self.name(), self.path.display()),
                stderr,
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

fn file_stem_is(found: &Located, prefix: &str) -> bool {
    found
        .path
        .file_stem()
        .is_some_and(|stem| stem.to_string_lossy().starts_with(prefix))
}

/// Whether the PTX carries source line numbers (`.loc` directives).
pub fn has_line_info(ptx: &str) -> bool {
    ptx.lines().any(|line| {
        line.trim_start()
            .strip_prefix(".loc")
            .is_some_and(|rest| rest.starts_with(char::is_whitespace))
    })
}

/// The kernel entry points (`.entry NAME`) of a PTX module, in order.
pub fn entries(ptx: &str) -> Vec<&str> {
    ptx.lines().filter_map(entry_name).collect()
}

/// The entry a line declares (`.visible .entry NAME(`), if it declares one.
fn entry_name(line: &str) -> Option<&str> {
    let line = line.trim_start();
    if !line.starts_with('.') {
        return None;
    }
    let mut tokens = line.split(|c: char| c.is_whitespace() || c == '(');
    tokens.by_ref().find(|t| *t == ".entry")?;
    tokens.find(|t| !t.is_empty())
}

/// The architecture of the module's `.target` directive (`sm_80` for `.target sm_80, debug`).
pub fn target(ptx: &str) -> Option<&str> {
    ptx.lines().find_map(|line| {
        let rest = line.trim_start().strip_prefix(".target")?;
        rest.split(',')
            .next()
            .map(str::trim)
            .filter(|t| !t.is_empty())
    })
}

/// The number of PTX instructions in the body of `entry`, or `None` if the
/// module has no such entry.
///
/// Counts the statements of the body that are not directives (`.reg`,
/// `.loc`, `.pragma`, …), labels or braces; a statement spanning several
/// lines (a `call` with its argument list) counts once. This is what the
/// kernel asks for, before `ptxas` optimises it; see
/// [`SassFunction::instruction_count`] for what it becomes.
pub fn ptx_instruction_count(ptx: &str, entry: &str) -> Option<usize> {
    let mut lines = ptx.lines();
    lines
        .by_ref()
        .find(|line| entry_name(line) == Some(entry))?;
    // Skip the parameter list up to the body's opening brace.
    let mut depth = 0usize;
    let mut body = String::new();
    let mut started = false;
    for line in lines {
        let code = line.split("//").next().unwrap_or_default();
        for c in code.chars() {
            match c {
                '{' => {
                    depth += 1;
                    started = true;
                    body.push(' ');
                }
                '}' => {
                    depth = depth.saturating_sub(1);
                    body.push(' ');
                }
                _ if started => body.push(c),
                _ => {}
            }
        }
        if started && depth == 0 {
            break;
        }
        if started {
            body.push('\n');
        }
    }
    let count = body
        .split(';')
        .filter(|statement| {
            // A statement's first lines may be labels and `;`-less directives
            // (`.loc`); what is left decides.
            let code: Vec<&str> = statement
                .lines()
                .map(str::trim)
                .filter(|l| {
                    !l.is_empty()
                        && !is_label(l)
                        && !l.starts_with(".loc")
                        && !l.starts_with(".file")
                })
                .collect();
            code.first().is_some_and(|first| !first.starts_with('.'))
        })
        .count();
    Some(count)
}

fn is_label(line: &str) -> bool {
    line.strip_suffix(':').is_some_and(|name| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.' | '%'))
    })
}

/// One function of a disassembly: its name and its lines as printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SassFunction {
    /// The function (kernel) name.
    pub name: String,
    /// Its lines: labels, `//## File "…", line N` comments (nvdisasm `-g`) and
    /// instructions, without section directives, cuobjdump's encoding
    /// comments, or the `NOP` padding after the last instruction.
    pub lines: Vec<String>,
}

impl SassFunction {
    /// The number of SASS instructions, not counting the `NOP`s that pad the
    /// function to its alignment (those after its last other instruction).
    pub fn instruction_count(&self) -> usize {
        self.lines.iter().filter(|l| opcode(l).is_some()).count()
    }

    /// The per-thread register limits its `setmaxnreg`s set (`USETMAXREG`,
    /// `.DEALLOC` or `.TRY_ALLOC`, the limit its last operand), each once,
    /// in ascending order: `[56, 224]` for a producer at 56 and consumers at
    /// 224; empty where there are none (or ptxas dropped them, C7508/C7506).
    pub fn register_limits(&self) -> Vec<u32> {
        let mut limits: Vec<u32> = self
            .lines
            .iter()
            .filter(|l| opcode(l).is_some_and(|op| op.starts_with("USETMAXREG")))
            .filter_map(|l| {
                let operands = l.trim_end().trim_end_matches(';').trim_end();
                let last = operands.rsplit([' ', ',']).next()?;
                u32::from_str_radix(last.strip_prefix("0x")?, 16).ok()
            })
            .collect();
        limits.sort_unstable();
        limits.dedup();
        limits
    }

    /// Each opcode (`FFMA`, `LDG.E`, …) with how often it occurs, most frequent first.
    pub fn opcode_histogram(&self) -> Vec<(String, usize)> {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for op in self.lines.iter().filter_map(|l| opcode(l)) {
            *counts.entry(op).or_default() += 1;
        }
        let mut hist: Vec<(String, usize)> = counts
            .into_iter()
            .map(|(op, n)| (op.to_owned(), n))
            .collect();
        hist.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        hist
    }
}

/// The opcode of a SASS instruction line (`/*0110*/  @!P0 FFMA R7, R2, UR6, R7 ;`
/// → `FFMA`), or `None` for any other line.
pub fn opcode(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("/*")?;
    let (offset, rest) = rest.split_once("*/")?;
    if offset.is_empty() || !offset.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut tokens = rest.split_whitespace();
    let mut op = tokens.next()?;
    if op.starts_with('@') {
        op = tokens.next()?;
    }
    let op = op.trim_end_matches(';');
    (!op.is_empty() && !op.starts_with("/*")).then_some(op)
}

/// Cuts the output of `nvdisasm -c` or `cuobjdump -sass` into functions, in
/// the order printed.
///
/// nvdisasm starts each function with a `//----- .text.NAME -----` rule;
/// cuobjdump with `Function : NAME`. Section directives, the alias labels
/// `NAME:`/`.text.NAME:`, cuobjdump's `/* 0x… */` encodings and the trailing
/// `NOP` padding are left out of [`SassFunction::lines`].
pub fn split_functions(disassembly: &str) -> Vec<SassFunction> {
    let mut functions: Vec<SassFunction> = Vec::new();
    for line in disassembly.lines() {
        if let Some(name) = function_header(line) {
            functions.push(SassFunction {
                name: name.to_owned(),
                lines: Vec::new(),
            });
            continue;
        }
        let Some(function) = functions.last_mut() else {
            continue;
        };
        let trimmed = line.trim();
        let name = function.name.as_str();
        let skip = trimmed.is_empty()
            || trimmed.starts_with("//---")
            || trimmed.chars().all(|c| c == '.')
            || [
                ".section",
                ".align",
                ".global",
                ".type",
                ".size",
                ".other",
                ".headerflags",
            ]
            .iter()
            .any(|d| trimmed.starts_with(d))
            || trimmed
                .strip_suffix(':')
                .is_some_and(|label| label == name || label.strip_prefix(".text.") == Some(name))
            || (trimmed.starts_with("/* 0x") && trimmed.ends_with("*/"));
        if skip {
            continue;
        }
        function.lines.push(strip_encoding(line).to_owned());
    }
    for function in &mut functions {
        trim_padding(&mut function.lines);
    }
    functions
}

fn function_header(line: &str) -> Option<&str> {
    let trimmed = line.trim();
    if let Some(rest) = trimmed.strip_prefix("Function :") {
        return Some(rest.trim()).filter(|n| !n.is_empty());
    }
    let rest = trimmed
        .strip_prefix("//")?
        .trim_start_matches('-')
        .trim_start();
    let name = rest.strip_prefix(".text.")?;
    name.split_whitespace().next()
}

/// `/*0000*/ LDC R1, c[0x0][0x28] ;   /* 0x00000a00ff017b82 */` → the part before the encoding.
fn strip_encoding(line: &str) -> &str {
    match line.rfind("/* 0x") {
        Some(at) if opcode(line).is_some() && line.trim_end().ends_with("*/") => {
            line[..at].trim_end()
        }
        _ => line.trim_end(),
    }
}

/// Drops the `NOP`s, labels and comments after the last instruction that is not a `NOP`.
fn trim_padding(lines: &mut Vec<String>) {
    let keep = lines
        .iter()
        .rposition(|l| opcode(l).is_some_and(|op| op != "NOP"))
        .map_or(0, |i| i + 1);
    lines.truncate(keep);
}

/// Adds the source text under each `//## File "PATH", line N` comment that
/// nvdisasm `-g` prints, as `//   TEXT`, when `read(PATH)` gives the file.
///
/// `read` is called once per distinct path (files that cannot be read, such
/// as remapped standard-library paths, are left as they are).
///
/// ```
/// let lines = vec![r#"    //## File "k.rs", line 2"#.to_owned(), "  /*0000*/ EXIT ;".to_owned()];
/// let out = warpforge_cli::sass::annotate_sources(&lines, |_| Some("fn k() {\n    exit();\n}\n".to_owned()));
/// assert_eq!(out[1], "    //       exit();");
/// ```
pub fn annotate_sources(
    lines: &[String],
    mut read: impl FnMut(&str) -> Option<String>,
) -> Vec<String> {
    let mut files: HashMap<String, Option<Vec<String>>> = HashMap::new();
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        out.push(line.clone());
        let Some((path, number)) = file_line(line) else {
            continue;
        };
        let text = files
            .entry(path.to_owned())
            .or_insert_with(|| read(path).map(|t| t.lines().map(str::to_owned).collect()));
        if let Some(source) = text.as_ref().and_then(|t| t.get(number.checked_sub(1)?)) {
            let indent: String = line.chars().take_while(|c| c.is_whitespace()).collect();
            out.push(format!("{indent}//   {}", source.trim_end()));
        }
    }
    out
}

/// `//## File "PATH", line N` (possibly followed by ` inlined at …`) → `(PATH, N)`.
fn file_line(line: &str) -> Option<(&str, usize)> {
    let rest = line.trim_start().strip_prefix("//##")?.trim_start();
    let rest = rest.strip_prefix("File \"")?;
    let (path, rest) = rest.split_once('"')?;
    let rest = rest
        .trim_start()
        .strip_prefix(',')?
        .trim_start()
        .strip_prefix("line")?;
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((path, digits.parse().ok()?))
}

/// Names in `candidates` close to `name`, best first (at most 5): those that
/// contain it or that it contains, then those within a small edit distance.
pub fn close_names<'a>(name: &str, candidates: &[&'a str]) -> Vec<&'a str> {
    let lower = name.to_ascii_lowercase();
    let budget = (name.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, &'a str)> = candidates
        .iter()
        .filter_map(|&c| {
            let c_lower = c.to_ascii_lowercase();
            if !lower.is_empty() && (c_lower.contains(&lower) || lower.contains(&c_lower)) {
                return Some((0, c));
            }
            let d = edit_distance(&lower, &c_lower);
            (d <= budget).then_some((d, c))
        })
        .collect();
    scored.sort();
    scored.dedup();
    scored.into_iter().take(5).map(|(_, c)| c).collect()
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let substitution = prev[j] + usize::from(ca != cb);
            cur[j + 1] = substitution.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape rustc gives with `-Cdebuginfo=line-tables-only` (abridged).
    const DEBUG_PTX: &str = "\
//
// Generated by LLVM NVPTX Back-End
//

.version 7.0
.target sm_80, debug
.address_size 64

\t// .globl\tk
.visible .entry k(
\t.param .u64 k_param_0
)
{
\t.reg .b32 \t%r<2>;
\t.loc\t1 3 0
$L__func_begin0:
\t.loc\t1 4 5
\tmov.u32 \t%r1, %tid.x;
\tret;
$L__func_end0:

}
\t.file\t1 \"src/lib.rs\"
\t.section\t.debug_abbrev
\t{
.b8 1
\t}
$L__sec_end0:
\t.section\t.debug_aranges
\t{
.b64 $L__sec_end0-$L__func_begin0
\t}
\t.section\t.debug_macinfo\t{\t}
";

    #[test]
    fn register_limits_are_the_usetmaxreg_immediates() {
        let f = SassFunction {
            name: "k".into(),
            lines: [
                "        /*0b10*/                   USETMAXREG.DEALLOC.CTAPOOL 0x38 ;",
                "        /*0b20*/                   IMAD.MOV.U32 R1, RZ, RZ, 0x40 ;",
                "        /*3590*/                   USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe0 ;",
                "        /*3600*/               @!P0 USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe0 ;",
                "        // USETMAXREG.DEALLOC.CTAPOOL 0x18 in a comment",
            ]
            .map(String::from)
            .to_vec(),
        };
        assert_eq!(f.register_limits(), [56, 224]);
        let none = SassFunction {
            name: "k".into(),
            lines: vec!["        /*0000*/                   EXIT ;".into()],
        };
        assert_eq!(none.register_limits(), [0u32; 0]);
    }

    #[test]
    fn a_module_without_loc_has_no_line_info() {
        assert!(!has_line_info(
            ".target sm_80\n// .loc in a comment\n\t.location x;\n"
        ));
        assert!(has_line_info(DEBUG_PTX));
    }

    #[test]
    fn entries_and_target() {
        let ptx = ".target sm_90a\n.visible .entry a(\n)\n.entry b (\n)\n.func c(\n)\n.weak .entry d()\n// .entry e(\n";
        assert_eq!(entries(ptx), ["a", "b", "d"]);
        assert_eq!(target(ptx), Some("sm_90a"));
        assert_eq!(target(DEBUG_PTX), Some("sm_80"));
        assert_eq!(target(".version 7.0\n"), None);
    }

    #[test]
    fn ptx_instructions_are_statements_not_directives_labels_or_braces() {
        assert_eq!(ptx_instruction_count(DEBUG_PTX, "k"), Some(2));
        assert_eq!(ptx_instruction_count(DEBUG_PTX, "nope"), None);
        let ptx = "\
.visible .entry k(
\t.param .u64 p
)
{
\t.reg .pred %p<2>;
\tld.param.b64 %rd1, [p];
\t{ // inline asm
\t.reg .b32 t;
\tmov.b32 t, 1; add.s32 %r1, t, 2;
\t}
$L__BB0_1:
\t@%p1 bra $L__BB0_1;
\tcall.uni (retval0),
\t\tf,
\t\t(param0);
\tret;
}
.visible .entry other()
{
\tret;
}
";
        // ld, mov, add, bra, call, ret.
        assert_eq!(ptx_instruction_count(ptx, "k"), Some(6));
        assert_eq!(ptx_instruction_count(ptx, "other"), Some(1));
    }

    const NVDISASM: &str = "\
\t.target\tsm_90

\t.elftype\t@\"ET_EXEC\"


//--------------------- .text.scale               --------------------------
\t.section\t.text.scale,\"ax\",@progbits
\t.align\t128
        .global         scale
        .type           scale,@function
        .size           scale,(.L_x_6 - scale)
        .other          scale,@\"STO_CUDA_ENTRY STV_DEFAULT\"
scale:
.text.scale:
\t//## File \"k.rs\", line 2
        /*0000*/                   LDC R1, c[0x0][0x28] ;
.L_x_2:
        /*0080*/               @P0 EXIT ;
        /*00e0*/                   FMUL R5, R0, UR6 ;
        /*00f0*/                   NOP;
        /*0100*/                   EXIT ;
.L_x_0:
        /*0110*/                   BRA `(.L_x_0);
        /*0120*/                   NOP;
        /*0130*/                   NOP;
.L_x_6:


//--------------------- .text.saxpy               --------------------------
\t.section\t.text.saxpy,\"ax\",@progbits
saxpy:
.text.saxpy:
        /*0000*/                   FFMA R7, R2, UR6, R7 ;
        /*0010*/                   EXIT ;
.L_x_7:
";

    #[test]
    fn splits_nvdisasm_output_per_function_and_counts_without_padding() {
        let functions = split_functions(NVDISASM);
        assert_eq!(functions.len(), 2);
        let scale = &functions[0];
        assert_eq!(scale.name, "scale");
        assert_eq!(scale.lines[0], "\t//## File \"k.rs\", line 2");
        assert_eq!(
            scale.lines.last().unwrap().trim(),
            "/*0110*/                   BRA `(.L_x_0);"
        );
        // LDC, EXIT, FMUL, NOP (inside the code: counted), EXIT, BRA.
        assert_eq!(scale.instruction_count(), 6);
        assert!(
            scale
                .lines
                .iter()
                .all(|l| !l.contains(".section") && !l.contains("L_x_6"))
        );
        assert_eq!(functions[1].name, "saxpy");
        assert_eq!(functions[1].instruction_count(), 2);
        assert_eq!(
            scale.opcode_histogram()[..2],
            [("EXIT".to_owned(), 2), ("BRA".to_owned(), 1)]
        );
    }

    #[test]
    fn splits_cuobjdump_output_and_drops_encodings() {
        let text = "
\tcode for sm_90
\t.target\tsm_90

\t\tFunction : scale
\t.headerflags\t@\"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM80)\"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                         /* 0x00000a00ff017b82 */
                                                                                  /* 0x000fe20000000800 */
        /*0010*/              @!P0 FFMA R0, R1, R2, R3 ;                          /* 0x0000000000007919 */
                                                                                  /* 0x000e2e0000002100 */
        /*0020*/                   NOP;                                           /* 0x0000000000007918 */
                                                                                  /* 0x000fc00000000000 */
\t\t..........


\t\tFunction : saxpy
        /*0000*/                   EXIT ;                                         /* 0x000000000000794d */
\t\t..........
";
        let functions = split_functions(text);
        assert_eq!(functions.len(), 2);
        assert_eq!(
            functions[0].lines,
            [
                "        /*0000*/                   LDC R1, c[0x0][0x28] ;",
                "        /*0010*/              @!P0 FFMA R0, R1, R2, R3 ;"
            ]
        );
        assert_eq!(functions[0].instruction_count(), 2);
        assert_eq!(functions[1].instruction_count(), 1);
    }

    #[test]
    fn opcodes() {
        assert_eq!(
            opcode("        /*0110*/                   FFMA R7, R2, UR6, R7 ;"),
            Some("FFMA")
        );
        assert_eq!(
            opcode("        /*0080*/               @!P0 EXIT ;"),
            Some("EXIT")
        );
        assert_eq!(
            opcode("        /*01f0*/                   NOP;"),
            Some("NOP")
        );
        assert_eq!(
            opcode("        /*00d0*/                   LDG.E R0, desc[UR4][R2.64] ;"),
            Some("LDG.E")
        );
        assert_eq!(opcode("\t//## File \"k.rs\", line 2"), None);
        assert_eq!(opcode(".L_x_0:"), None);
        assert_eq!(opcode("        /* 0x000fe20000000800 */"), None);
    }

    #[test]
    fn annotates_readable_sources_once_per_file() {
        let lines: Vec<String> = [
            "\t//## File \"a.rs\", line 2",
            "        /*0000*/ EXIT ;",
            "\t//## File \"a.rs\", line 1 inlined at \"b.rs\", line 9",
            "\t//## File \"/missing.rs\", line 1",
            "\t//## File \"a.rs\", line 99",
        ]
        .map(str::to_owned)
        .to_vec();
        let mut reads = Vec::new();
        let out = annotate_sources(&lines, |path| {
            reads.push(path.to_owned());
            (path == "a.rs").then(|| "fn f() {\n    g();  \n}\n".to_owned())
        });
        assert_eq!(reads, ["a.rs", "/missing.rs"]);
        assert_eq!(
            out,
            [
                "\t//## File \"a.rs\", line 2",
                "\t//       g();",
                "        /*0000*/ EXIT ;",
                "\t//## File \"a.rs\", line 1 inlined at \"b.rs\", line 9",
                "\t//   fn f() {",
                "\t//## File \"/missing.rs\", line 1",
                "\t//## File \"a.rs\", line 99",
            ]
        );
    }

    #[test]
    fn close_names_prefer_substrings_then_small_edits() {
        let kernels = [
            "axpy_f32",
            "axpy_f64",
            "reduce_rows_sum_f32",
            "scale",
            "saxpy",
        ];
        assert_eq!(
            close_names("axpy", &kernels),
            ["axpy_f32", "axpy_f64", "saxpy"]
        );
        assert_eq!(close_names("axpy_f16", &kernels), ["axpy_f32", "axpy_f64"]);
        assert_eq!(close_names("AXPY_F32", &kernels)[0], "axpy_f32");
        assert_eq!(close_names("sacpy", &kernels), ["saxpy"]);
        assert!(close_names("gemm_bf16_tc", &kernels).is_empty());
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
