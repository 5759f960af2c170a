//! `warpforge ptx`: the command-line side of [`warpforge_cli::ptxas`],
//! [`warpforge_cli::sass`] and [`warpforge_cli::ptx_diff`] (a module of the binary,
//! not of the library).
//!
//! Three modes over PTX modules (the embedded families of the library, the
//! embedded Hopper module, or a `.ptx` file):
//! the resource report (default), `--sass` (the disassembly per kernel, with
//! Rust source lines when the PTX has `.loc` line info), and `--diff OLD
//! [NEW]` (registers, spills, stack, shared memory and instruction count
//! before and after). `--kernel NAME` narrows each of them.

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use warpforge::ptx;
use warpforge_cli::ptx_diff::{self, KernelMetrics};
use warpforge_cli::ptxas::{self, EntryReport, Ptxas};
use warpforge_cli::sass::{self, Disassembler};
use warpforge_cli::sass_budget::{Budget, Measured};
use warpforge_cli::sass_loops::{self, LoopReport};

/// The report's architectures when `--arch` is not given.
const REPORT_ARCHS: &[&str] = &["sm_80", "sm_90"];
/// `--sass` and `--diff` look at one architecture unless told otherwise.
const SASS_ARCHS: &[&str] = &["sm_90"];

/// `warpforge ptx` arguments.
#[derive(clap::Args)]
pub struct PtxArgs {
    /// A .ptx file to inspect instead of the embedded module, e.g. a kernels crate's PTX from its
    /// build's OUT_DIR or from `--emit`. PTX with debug info (`-Cdebuginfo=line-tables-only`) is
    /// accepted: its DWARF sections are dropped before ptxas, its line info kept.
    #[arg(value_name = "FILE.ptx")]
    file: Option<PathBuf>,
    /// The embedded Hopper module (`warpforge-kernels-hopper`, sm_90a: the `wgmma` GEMM)
    /// instead of the library's sm_80 families (reduce, gemm-simt, gemm-tensor, conv).
    #[arg(long, conflicts_with_all = ["file", "diff"])]
    hopper: bool,
    /// Only this kernel (repeatable). A name the module lacks exits 2 with the closest names.
    #[arg(long = "kernel", value_name = "NAME")]
    kernels: Vec<String>,
    /// Architecture to assemble for (repeatable) [default: sm_80 and sm_90 for the report, sm_90
    /// for --sass and --diff; the module's own .target when it needs a newer one].
    #[arg(long = "arch", value_name = "ARCH")]
    archs: Vec<String>,
    /// Print each kernel's SASS (ptxas to a cubin, then nvdisasm, or `cuobjdump -sass`), with the
    /// Rust source lines interleaved when the PTX has line info. Without --kernel: every kernel.
    #[arg(long, conflicts_with = "diff")]
    sass: bool,
    /// Compare OLD.ptx with NEW.ptx (default: the embedded module): registers, spills, stack,
    /// static shared memory and instruction count per kernel and arch, with the change.
    #[arg(long, num_args = 1..=2, value_names = ["OLD.ptx", "NEW.ptx"], conflicts_with = "file")]
    diff: Option<Vec<PathBuf>>,
    /// With --diff: also list the kernels that did not change.
    #[arg(long, requires = "diff")]
    all: bool,
    /// Also write each embedded module's .ptx file into this directory.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["file", "diff"])]
    emit: Option<PathBuf>,
    /// Exit 1 if any kernel spills registers (with --diff: any kernel of NEW).
    #[arg(long)]
    deny_spills: bool,
    /// Check each kernel's SASS loops and ptxas figures against the budget table FILE (e.g.
    /// cli/sass-budget.toml): print each budgeted kernel's innermost HMMA or DMMA (or FFMA) loop and
    /// k-tile loop, and exit 1 naming every kernel, figure and limit it exceeds. Needs nvdisasm
    /// (or cuobjdump); runs one ptxas per architecture, as the report does.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["sass", "diff"])]
    budget: Option<PathBuf>,
}

/// One PTX module to assemble.
#[derive(Debug)]
struct Source {
    /// What to call it in output: the file's path or `warpforge-kernels (embedded)`.
    label: String,
    /// The PTX, made ready for ptxas ([`warpforge_builder::ptxas_ready`]).
    text: Cow<'static, str>,
    /// Its `.target` architecture.
    target: String,
}

impl Source {
    fn entries(&self) -> Vec<&str> {
        sass::entries(&self.text)
    }
}

/// Runs `warpforge ptx`; `Err` is printed by `main` and exits 2.
pub fn run(args: &PtxArgs) -> Result<ExitCode, String> {
    if let Some(paths) = &args.diff {
        let old = load_file(&paths[0])?;
        let new = match paths.get(1) {
            Some(path) => load_file(path)?,
            None => embedded_matching(&old)?,
        };
        return run_diff(args, &old, &new);
    }
    let sources = match &args.file {
        Some(path) => vec![load_file(path)?],
        None => {
            let modules = embedded_modules(args.hopper)?;
            if let Some(dir) = &args.emit {
                for module in &modules {
                    emit(dir, module)?;
                }
            }
            modules
                .into_iter()
                .map(embedded)
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .flatten()
                .collect()
        }
    };
    let entries: Vec<&str> = sources.iter().flat_map(Source::entries).collect();
    let labels: Vec<&str> = sources.iter().map(|s| s.label.as_str()).collect();
    check_kernels(&args.kernels, &entries, &labels.join(", "))?;
    if args.sass {
        run_sass(args, &sources)
    } else {
        run_report(args, &sources)
    }
}

/// The embedded modules `--hopper` picks: the library's sm_80 families this
/// build holds, or its Hopper kernels'. A family left out of the build is
/// not among them; none at all is an error naming the feature.
fn embedded_modules(hopper: bool) -> Result<Vec<&'static ptx::Module>, String> {
    let modules: Vec<&'static ptx::Module> = ptx::LIBRARY
        .iter()
        .copied()
        .filter(|m| (m.name == ptx::HOPPER.name) == hopper)
        .collect();
    let built: Vec<&'static ptx::Module> = modules
        .iter()
        .copied()
        .filter(|m| m.left_out.is_none())
        .collect();
    if built.is_empty() {
        let features: Vec<&str> = modules.iter().filter_map(|m| m.left_out).collect();
        return Err(format!(
            "this build of warpforge holds none of these modules: build it with the feature(s) {}",
            features.join(", ")
        ));
    }
    Ok(built)
}

/// An embedded module, one [`Source`] per variant.
fn embedded(module: &'static ptx::Module) -> Result<Vec<Source>, String> {
    module
        .variants
        .iter()
        .map(|variant| {
            let label = format!("{} (embedded)", module.name);
            source(label, Cow::Borrowed(variant.source))
        })
        .collect()
}

/// The embedded variant to compare `old` with: of those with the same
/// `.target` (the Hopper module's for sm_90a PTX), the family that shares
/// the most kernel names with it (the first such family, the reductions, when
/// it shares none).
fn embedded_matching(old: &Source) -> Result<Source, String> {
    let mut all: Vec<Source> = embedded_modules(old.target.ends_with('a'))?
        .into_iter()
        .map(embedded)
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect();
    let old_entries = old.entries();
    let shared = |s: &Source| {
        s.entries()
            .iter()
            .filter(|e| old_entries.contains(e))
            .count()
    };
    if let Some(at) = (0..all.len())
        .filter(|&i| all[i].target == old.target)
        .max_by_key(|&i| (shared(&all[i]), std::cmp::Reverse(i)))
    {
        return Ok(all.swap_remove(at));
    }
    if all.len() == 1 {
        return Ok(all.remove(0));
    }
    let targets: Vec<&str> = all.iter().map(|s| s.target.as_str()).collect();
    Err(format!(
        "{} is PTX for .target {}, and the embedded module has no such variant (it has {}); \
         name the new module too: --diff OLD.ptx NEW.ptx",
        old.label,
        old.target,
        targets.join(", ")
    ))
}

fn load_file(path: &Path) -> Result<Source, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "reading {}: {e}; pass a .ptx file (rustc --emit=asm output, or `warpforge ptx --emit DIR`)",
            path.display()
        )
    })?;
    source(path.display().to_string(), Cow::Owned(text))
}

fn source(label: String, text: Cow<'static, str>) -> Result<Source, String> {
    let Some(target) = sass::target(&text).map(str::to_owned) else {
        return Err(format!(
            "{label} is not PTX: it has no `.target` directive; pass the .ptx text rustc writes \
             for nvptx64-nvidia-cuda (--emit=asm)"
        ));
    };
    let ready = warpforge_builder::ptxas_ready(&text);
    let text = if ready == *text {
        text
    } else {
        eprintln!(
            "note: {label}: dropped its DWARF `.section .debug_*` blocks, its `, debug` target \
             option and the labels only they used, as the warpforge build does; its .loc line \
             info is kept"
        );
        Cow::Owned(ready)
    };
    Ok(Source {
        label,
        text,
        target,
    })
}

fn emit(dir: &Path, module: &'static ptx::Module) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for m in module.variants {
        let stem = module.name.replace('-', "_");
        let path = dir.join(format!("{stem}.{}.ptx", m.arch));
        std::fs::write(&path, m.source).map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Every `--kernel` must name an entry of `entries`; otherwise the error lists close names.
fn check_kernels(requested: &[String], entries: &[&str], label: &str) -> Result<(), String> {
    for name in requested {
        if entries.contains(&name.as_str()) {
            continue;
        }
        let close = sass::close_names(name, entries);
        let hint = if close.is_empty() {
            format!(
                "it has {} kernels, none with a similar name; `warpforge ptx` lists them all",
                entries.len()
            )
        } else {
            format!("close names: {}", close.join(", "))
        };
        return Err(format!("no kernel `{name}` in {label}; {hint}"));
    }
    Ok(())
}

/// `--arch` values (or `default`) that PTX for `.target target` can be assembled for.
///
/// PTX assembles for its own architecture and newer ones, and `sm_90a` PTX
/// only for `sm_90a`. When no default fits, the module's own target is used;
/// an explicit `--arch` that fits none of the modules is an error.
fn archs_for(
    requested: &[String],
    default: &[&str],
    targets: &[&str],
) -> Result<Vec<String>, String> {
    for arch in requested {
        if ptx::arch_capability(arch).is_none() {
            return Err(format!(
                "--arch {arch}: not an architecture; write it as sm_XY, e.g. sm_90"
            ));
        }
    }
    let fits_all = |arch: &str| targets.iter().all(|t| runs_on(t, arch));
    if !requested.is_empty() {
        let fitting: Vec<String> = requested.iter().filter(|a| fits_all(a)).cloned().collect();
        if fitting.is_empty() {
            return Err(format!(
                "PTX for .target {} cannot be assembled for {} (PTX assembles for its own \
                 architecture and newer ones; `a` targets only for themselves); use --arch {}",
                targets.join(", "),
                requested.join(", "),
                newest(targets)
            ));
        }
        return Ok(fitting);
    }
    let fitting: Vec<String> = default
        .iter()
        .filter(|a| fits_all(a))
        .map(|a| (*a).to_owned())
        .collect();
    if fitting.is_empty() {
        return Ok(vec![newest(targets).to_owned()]);
    }
    Ok(fitting)
}

fn newest<'a>(targets: &[&'a str]) -> &'a str {
    targets
        .iter()
        .copied()
        .max_by_key(|t| ptx::arch_capability(t))
        .unwrap_or("sm_80")
}

/// Whether PTX for `target` assembles for `arch`.
fn runs_on(target: &str, arch: &str) -> bool {
    let (Some(t), Some(a)) = (ptx::arch_capability(target), ptx::arch_capability(arch)) else {
        return false;
    };
    a >= t && (!target.ends_with('a') || arch == target)
}

fn locate_ptxas() -> Result<Ptxas, String> {
    Ptxas::locate().map_err(|e| e.to_string())
}

fn selection(args: &PtxArgs) -> Vec<&str> {
    args.kernels.iter().map(String::as_str).collect()
}

/// The kernels of `selected` that `source` has (all of them: empty when
/// nothing was selected); `None` when a selection names none of its kernels,
/// so the source is skipped.
fn selected_in<'a>(selected: &[&'a str], source: &Source) -> Option<Vec<&'a str>> {
    if selected.is_empty() {
        return Some(Vec::new());
    }
    let entries = source.entries();
    let here: Vec<&str> = selected
        .iter()
        .copied()
        .filter(|k| entries.contains(k))
        .collect();
    (!here.is_empty()).then_some(here)
}

fn run_report(args: &PtxArgs, sources: &[Source]) -> Result<ExitCode, String> {
    let budget = match &args.budget {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("reading the budget {}: {e}", path.display()))?;
            let budget =
                Budget::parse(&text).map_err(|e| format!("budget {}: {e}", path.display()))?;
            let disassembler = Disassembler::locate().map_err(|e| e.to_string())?;
            Some((budget, disassembler))
        }
        None => None,
    };
    let ptxas = locate_ptxas()?;
    println!("ptxas {} ({})", ptxas.version, ptxas.path.display());
    let selected = selection(args);
    let mut rows = Vec::new();
    // Per row: its loop report and its `setmaxnreg` limits (with a budget).
    let mut loops: Vec<(Option<LoopReport>, Vec<u32>)> = Vec::new();
    for source in sources {
        let Some(selected) = selected_in(&selected, source) else {
            continue;
        };
        if args.file.is_some() {
            println!("module: {} (.target {})", source.label, source.target);
        }
        let archs = archs_for(&args.archs, REPORT_ARCHS, &[&source.target])?;
        // One ptxas per architecture, all at once: a large module takes ptxas
        // a minute or more per architecture, on one core.
        let assembled: Vec<_> = std::thread::scope(|scope| {
            let runs: Vec<_> = archs
                .iter()
                .map(|arch| {
                    let (ptxas, text, selected) = (&ptxas, &source.text, &selected);
                    scope.spawn(move || ptxas.assemble_cubin(text, arch, selected, false))
                })
                .collect();
            runs.into_iter()
                .map(|run| run.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        for (arch, assembled) in archs.iter().zip(assembled) {
            let assembled = assembled.map_err(|e| e.to_string())?;
            let reports = assembled.reports;
            let expected = if selected.is_empty() {
                source.entries()
            } else {
                selected.clone()
            };
            let missing: Vec<&str> = expected
                .into_iter()
                .filter(|e| !reports.iter().any(|r| r.kernel == *e))
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "ptxas reported nothing for entries {missing:?} ({arch})"
                ));
            }
            if let Some((_, disassembler)) = &budget {
                let text = disassembler
                    .disassemble(&assembled.cubin, false)
                    .map_err(|e| e.to_string())?;
                let functions = sass::split_functions(&text);
                loops.extend(reports.iter().map(|r| {
                    let function = functions.iter().find(|f| f.name == r.kernel);
                    (
                        function.and_then(sass_loops::analyze),
                        function.map(|f| f.register_limits()).unwrap_or_default(),
                    )
                }));
            }
            rows.extend(reports);
        }
    }
    print!("{}", ptxas::render_table(&rows));
    let spills = spill_verdict(args.deny_spills, &rows);
    let Some((budget, _)) = &budget else {
        return Ok(spills);
    };
    let measured: Vec<Measured> = rows
        .iter()
        .zip(&loops)
        .map(|(entry, (loops, limits))| Measured {
            entry,
            loops: loops.as_ref(),
            register_limits: limits,
        })
        .collect();
    let path = args.budget.as_deref().unwrap_or(Path::new(""));
    print!("{}", render_loops(budget, &measured, path));
    let violations = budget.check(&measured, selected.is_empty());
    for v in &violations {
        eprintln!("error: SASS budget: {v}");
    }
    if !violations.is_empty() {
        eprintln!(
            "error: {} figure(s) over the SASS budget {}; a kernel that got leaner may lower its \
             limit there, one that got fatter needs its loop fixed",
            violations.len(),
            path.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    println!(
        "SASS budget {}: every kernel within its limits",
        path.display()
    );
    Ok(spills)
}

/// The loop table of `--budget`: one row per kernel a family budgets (or
/// with an HMMA loop), with its family's target.
fn render_loops(budget: &Budget, rows: &[Measured], path: &Path) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nSASS loops (static counts; budget {}): innermost HMMA or DMMA (or FFMA) loop, and the \
         k-tile loop around it (= the innermost where nothing encloses it); of several such \
         nests (`other`: how many more, e.g. a guarded edge-tile path), the leanest",
        path.display()
    );
    let _ = writeln!(
        out,
        "{:<40} {:<6} {:>4} {:>6} {:>15} {:>16} {:>4} {:>5} {:>5} {:>4}  target",
        "kernel",
        "arch",
        "regs",
        "spills",
        "inner instr/op",
        "k-loop instr/op",
        "CALL",
        "panic",
        "WSYNC",
        "BSSY"
    );
    for row in rows {
        let family = budget.family_of(&row.entry.kernel);
        let Some(loops) = row.loops else {
            continue;
        };
        if family.is_none() && loops.op == sass_loops::Op::Ffma {
            continue;
        }
        let k = loops.k_loop();
        let ratio =
            |f: &sass_loops::LoopFigures| format!("{}/{} {:.2}", f.instructions, f.ops, f.per_op());
        let _ = writeln!(
            out,
            "{:<40} {:<6} {:>4} {:>6} {:>15} {:>16} {:>4} {:>5} {:>5} {:>4} {:>5}  {}",
            row.entry.kernel,
            row.entry.arch,
            row.entry.registers,
            row.entry.spill_stores + row.entry.spill_loads,
            ratio(&loops.inner),
            if loops.outer.is_some() {
                ratio(k)
            } else {
                "(same)".into()
            },
            k.calls,
            k.panic_paths,
            k.warpsyncs,
            k.bssy,
            loops.others,
            family.and_then(|f| f.target.as_deref()).unwrap_or("")
        );
        if let Some((family, ops)) = family.and_then(|f| Some((f, f.ops_per_output?))) {
            let _ = writeln!(
                out,
                "{:<47} per output element ({ops} {} an output): inner {:.2}, k-loop {:.2}",
                "",
                loops.op.name(),
                family.per_output(&loops.inner).unwrap_or_default(),
                family.per_output(k).unwrap_or_default(),
            );
        }
    }
    // Registers per warpgroup role, for the families that budget them.
    for family in &budget.families {
        let Some(roles) = &family.register_roles else {
            continue;
        };
        let rows: Vec<&Measured> = rows
            .iter()
            .filter(|r| {
                budget
                    .family_of(&r.entry.kernel)
                    .is_some_and(|f| std::ptr::eq(f, family))
            })
            .collect();
        let Some(first) = rows.first() else {
            continue;
        };
        let (threads, taken) = family.role_totals().unwrap_or_default();
        let parts: Vec<String> = roles.iter().map(|(t, l)| format!("{t} × {l}")).collect();
        let same = |f: fn(&Measured) -> String| rows.iter().all(|r| f(r) == f(first));
        let _ = writeln!(
            out,
            "setmaxnreg roles of `{}`: {} = {taken} registers, of {} at entry × {threads} \
             threads = {}; USETMAXREG limits {:?}{}",
            family.kernels,
            parts.join(" + "),
            first.entry.registers,
            u64::from(first.entry.registers) * threads,
            first.register_limits,
            if same(|r| format!("{} {:?}", r.entry.registers, r.register_limits)) {
                format!(" (all {} kernels)", rows.len())
            } else {
                " (the first kernel's; see the budget check for the others)".into()
            }
        );
    }
    out
}

/// Exit 1 with the spilling kernels named when `deny` and any row spills.
fn spill_verdict(deny: bool, rows: &[EntryReport]) -> ExitCode {
    let spilling: Vec<String> = rows
        .iter()
        .filter(|r| r.spill_stores + r.spill_loads > 0)
        .map(|r| format!("{} ({})", r.kernel, r.arch))
        .collect();
    if deny && !spilling.is_empty() {
        eprintln!("error: register spills in {}", spilling.join(", "));
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn run_sass(args: &PtxArgs, sources: &[Source]) -> Result<ExitCode, String> {
    let ptxas = locate_ptxas()?;
    let disassembler = Disassembler::locate().map_err(|e| e.to_string())?;
    // The whole library is about 100 000 lines: write through one lock, and
    // stop quietly when the reader (`| head`, `| less`) has had enough.
    let mut out = std::io::stdout().lock();
    let mut rows = Vec::new();
    match print_sass(&mut out, args, sources, &ptxas, &disassembler, &mut rows) {
        Ok(()) => Ok(spill_verdict(args.deny_spills, &rows)),
        Err(SassError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            Ok(ExitCode::SUCCESS)
        }
        Err(SassError::Output(e)) => Err(format!("writing the SASS to stdout: {e}")),
        Err(SassError::Tool(message)) => Err(message),
    }
}

enum SassError {
    /// ptxas or the disassembler failed: the message for the user.
    Tool(String),
    /// Writing to stdout failed.
    Output(std::io::Error),
}

impl From<std::io::Error> for SassError {
    fn from(e: std::io::Error) -> SassError {
        SassError::Output(e)
    }
}

impl From<String> for SassError {
    fn from(message: String) -> SassError {
        SassError::Tool(message)
    }
}

fn print_sass(
    out: &mut impl Write,
    args: &PtxArgs,
    sources: &[Source],
    ptxas: &Ptxas,
    disassembler: &Disassembler,
    rows: &mut Vec<EntryReport>,
) -> Result<(), SassError> {
    let all_selected = selection(args);
    for source in sources {
        let Some(selected) = selected_in(&all_selected, source) else {
            continue;
        };
        // Printed in the order asked for, else in the module's order.
        let order = if selected.is_empty() {
            source.entries()
        } else {
            selected.clone()
        };
        if selected.is_empty() && order.len() > 1 {
            eprintln!(
                "note: printing the SASS of all {} kernels of {}; pick one with --kernel NAME",
                order.len(),
                source.label
            );
        }
        let line_info = sass::has_line_info(&source.text);
        let line_note = match (line_info, disassembler.shows_source_lines()) {
            (true, true) => "ptxas -lineinfo, nvdisasm -g: Rust source lines interleaved",
            (true, false) => {
                "the PTX has line info, but cuobjdump cannot show it: `pip install nvidia-cuda-nvdisasm`"
            }
            (false, _) if args.file.is_none() => {
                "no line info in the embedded PTX: build with WARPFORGE_LINE_INFO=1 \
                 (`WARPFORGE_LINE_INFO=1 cargo run -p warpforge-cli -- ptx --sass …`) \
                 to see Rust source lines"
            }
            (false, _) => {
                "no line info in this PTX: compile the kernels with -Cdebuginfo=line-tables-only \
                 (warpforge-builder: `PtxBuilder::line_info(true)`) to see Rust source lines"
            }
        };
        writeln!(out, "// {} (.target {})", source.label, source.target)?;
        writeln!(out, "// ptxas {} ({})", ptxas.version, ptxas.path.display())?;
        writeln!(
            out,
            "// {} {} ({})",
            disassembler.name(),
            disassembler.version,
            disassembler.path.display()
        )?;
        writeln!(out, "// {line_note}")?;
        for arch in archs_for(&args.archs, SASS_ARCHS, &[&source.target])? {
            let assembled = ptxas
                .assemble_cubin(&source.text, &arch, &selected, line_info)
                .map_err(|e| e.to_string())?;
            let text = disassembler
                .disassemble(&assembled.cubin, line_info)
                .map_err(|e| e.to_string())?;
            let functions = sass::split_functions(&text);
            let mut reports = assembled.reports.clone();
            reports.sort_by_key(|r| order.iter().position(|k| *k == r.kernel));
            for report in &reports {
                let Some(function) = functions.iter().find(|f| f.name == report.kernel) else {
                    return Err(SassError::Tool(format!(
                        "{} printed no SASS for {} ({arch}); its output began:\n{}",
                        disassembler.name(),
                        report.kernel,
                        text.lines().take(20).collect::<Vec<_>>().join("\n")
                    )));
                };
                writeln!(out)?;
                writeln!(out, "{}", sass_header(report, function.instruction_count()))?;
                if let Some(loops) = sass_loops::analyze(function) {
                    writeln!(out, "// {}", loops.summary())?;
                }
                let lines = if line_info {
                    sass::annotate_sources(&function.lines, |path| {
                        std::fs::read_to_string(path).ok()
                    })
                } else {
                    function.lines.clone()
                };
                for line in lines {
                    writeln!(out, "{line}")?;
                }
            }
            rows.extend(assembled.reports);
        }
    }
    out.flush()?;
    Ok(())
}

/// `//==== saxpy (sm_90): 10 registers, spills 0/0 bytes, …; 17 SASS instructions`
fn sass_header(r: &EntryReport, instructions: usize) -> String {
    format!(
        "//==== {} ({}): {} registers, spill stores/loads {}/{} bytes, stack {} bytes, \
         static smem {} bytes, {} barriers; {instructions} SASS instructions",
        r.kernel,
        r.arch,
        r.registers,
        r.spill_stores,
        r.spill_loads,
        r.stack_frame,
        r.static_shared,
        r.barriers
    )
}

fn run_diff(args: &PtxArgs, old: &Source, new: &Source) -> Result<ExitCode, String> {
    let old_entries = old.entries();
    let new_entries = new.entries();
    let mut both: Vec<&str> = old_entries.iter().chain(&new_entries).copied().collect();
    both.sort_unstable();
    both.dedup();
    check_kernels(
        &args.kernels,
        &both,
        &format!("{} or {}", old.label, new.label),
    )?;

    let ptxas = locate_ptxas()?;
    let disassembler = match Disassembler::locate() {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("note: counting PTX instructions, not SASS: {e}");
            None
        }
    };
    println!("old: {} (.target {})", old.label, old.target);
    println!("new: {} (.target {})", new.label, new.target);
    println!("ptxas {} ({})", ptxas.version, ptxas.path.display());
    let label = match &disassembler {
        Some(d) => {
            println!(
                "instructions: SASS, counted in {} {} output (end-of-function NOP padding not counted)",
                d.name(),
                d.version
            );
            "SASS instrs"
        }
        None => {
            println!("instructions: PTX (no disassembler)");
            "PTX instrs"
        }
    };
    let archs = archs_for(&args.archs, SASS_ARCHS, &[&old.target, &new.target])?;
    let mut old_rows = Vec::new();
    let mut new_rows = Vec::new();
    let mut new_reports = Vec::new();
    for arch in &archs {
        old_rows.extend(metrics(&ptxas, disassembler.as_ref(), old, arch, &args.kernels)?.0);
        let (rows, reports) = metrics(&ptxas, disassembler.as_ref(), new, arch, &args.kernels)?;
        new_rows.extend(rows);
        new_reports.extend(reports);
    }
    let rows = ptx_diff::diff(&old_rows, &new_rows);
    print!(
        "{}",
        ptx_diff::render_diff(&rows, label, args.all || !args.kernels.is_empty())
    );
    Ok(spill_verdict(args.deny_spills, &new_reports))
}

/// Assembles `source` for `arch` (only the `kernels` it has, if any are named)
/// and measures every kernel; also returns ptxas's rows.
fn metrics(
    ptxas: &Ptxas,
    disassembler: Option<&Disassembler>,
    source: &Source,
    arch: &str,
    kernels: &[String],
) -> Result<(Vec<KernelMetrics>, Vec<EntryReport>), String> {
    let entries = source.entries();
    let selected: Vec<&str> = kernels
        .iter()
        .map(String::as_str)
        .filter(|k| entries.contains(k))
        .collect();
    if !kernels.is_empty() && selected.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let assembled = ptxas
        .assemble_cubin(&source.text, arch, &selected, false)
        .map_err(|e| format!("{}: {e}", source.label))?;
    let functions = match disassembler {
        Some(d) => Some(sass::split_functions(
            &d.disassemble(&assembled.cubin, false)
                .map_err(|e| e.to_string())?,
        )),
        None => None,
    };
    let rows = assembled
        .reports
        .iter()
        .map(|r| {
            let instructions = match &functions {
                Some(functions) => functions
                    .iter()
                    .find(|f| f.name == r.kernel)
                    .map(|f| f.instruction_count()),
                None => sass::ptx_instruction_count(&source.text, &r.kernel),
            };
            KernelMetrics::new(r, instructions)
        })
        .collect();
    Ok((rows, assembled.reports))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_archs_fit_the_module_or_fall_back_to_its_target() {
        let none: [String; 0] = [];
        assert_eq!(
            archs_for(&none, REPORT_ARCHS, &["sm_80"]).unwrap(),
            ["sm_80", "sm_90"]
        );
        assert_eq!(
            archs_for(&none, REPORT_ARCHS, &["sm_86"]).unwrap(),
            ["sm_90"]
        );
        assert_eq!(
            archs_for(&none, SASS_ARCHS, &["sm_90a"]).unwrap(),
            ["sm_90a"]
        );
        assert_eq!(
            archs_for(&none, SASS_ARCHS, &["sm_100"]).unwrap(),
            ["sm_100"]
        );
        assert_eq!(
            archs_for(&none, SASS_ARCHS, &["sm_80", "sm_100"]).unwrap(),
            ["sm_100"]
        );
    }

    #[test]
    fn explicit_archs_must_fit() {
        let sm75 = ["sm_75".to_owned(), "sm_90".to_owned()];
        assert_eq!(
            archs_for(&sm75, REPORT_ARCHS, &["sm_80"]).unwrap(),
            ["sm_90"]
        );
        let e = archs_for(&["sm_80".to_owned()], REPORT_ARCHS, &["sm_90a"]).unwrap_err();
        assert!(e.contains("use --arch sm_90a"), "{e}");
        let e = archs_for(&["90".to_owned()], REPORT_ARCHS, &["sm_80"]).unwrap_err();
        assert!(e.contains("sm_XY"), "{e}");
    }

    #[test]
    fn unknown_kernels_are_named_with_close_names() {
        let entries = ["axpy_f32", "axpy_f64", "scale"];
        assert!(check_kernels(&["scale".to_owned()], &entries, "m").is_ok());
        let e = check_kernels(&["axpy".to_owned()], &entries, "m.ptx").unwrap_err();
        assert_eq!(
            e,
            "no kernel `axpy` in m.ptx; close names: axpy_f32, axpy_f64"
        );
        let e = check_kernels(&["gemm".to_owned()], &entries, "m").unwrap_err();
        assert!(e.contains("3 kernels, none with a similar name"), "{e}");
    }

    #[test]
    fn a_file_without_target_is_not_ptx() {
        let e = source("x.ptx".to_owned(), Cow::Borrowed("hello")).unwrap_err();
        assert!(e.contains("no `.target`"), "{e}");
        let s = source("x.ptx".to_owned(), Cow::Borrowed(".target sm_80, debug\n")).unwrap();
        assert_eq!((s.target.as_str(), &*s.text), ("sm_80", ".target sm_80\n"));
    }
}
