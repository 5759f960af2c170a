//! Before/after tables for `warpforge ptx --diff`: per kernel and arch,
//! registers, spills, stack, static shared memory and instruction count of an
//! old and a new PTX module, with the change.
//!
//! ```
//! use warpforge_cli::ptx_diff::{KernelMetrics, diff, render_diff};
//! use warpforge_cli::ptxas::EntryReport;
//! let m = |kernel: &str, registers, instructions| KernelMetrics {
//!     report: EntryReport {
//!         kernel: kernel.to_owned(),
//!         arch: "sm_90".to_owned(),
//!         registers,
//!         spill_stores: 0,
//!         spill_loads: 0,
//!         stack_frame: 0,
//!         static_shared: 0,
//!         barriers: 0,
//!     },
//!     instructions: Some(instructions),
//! };
//! let rows = diff(&[m("axpy", 20, 30), m("old", 8, 9)], &[m("axpy", 18, 28), m("new", 8, 9)]);
//! let table = render_diff(&rows, "SASS instrs", false);
//! assert!(table.contains("20 → 18 (-2)"));
//! assert!(table.contains("removed") && table.contains("added"));
//! ```

use crate::ptxas::EntryReport;
use std::collections::BTreeMap;

/// What `ptxas` and the disassembly say about one kernel on one arch: the
/// `ptxas -v` row (its fields read through `Deref`) and an instruction count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelMetrics {
    /// The `ptxas -v` row.
    pub report: EntryReport,
    /// Instructions (SASS or PTX, as the table's header says), if counted.
    pub instructions: Option<usize>,
}

impl KernelMetrics {
    /// The metrics of a `ptxas -v` row plus an instruction count.
    pub fn new(report: &EntryReport, instructions: Option<usize>) -> KernelMetrics {
        KernelMetrics {
            report: report.clone(),
            instructions,
        }
    }
}

impl std::ops::Deref for KernelMetrics {
    type Target = EntryReport;
    fn deref(&self) -> &EntryReport {
        &self.report
    }
}

/// How a kernel differs between the two modules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Every figure is the same.
    Same,
    /// In both, with some figure different.
    Changed,
    /// Only in the new module.
    Added,
    /// Only in the old module.
    Removed,
}

impl Change {
    /// `same`, `changed`, `added` or `removed`.
    pub fn label(self) -> &'static str {
        match self {
            Change::Same => "same",
            Change::Changed => "changed",
            Change::Added => "added",
            Change::Removed => "removed",
        }
    }
}

/// One kernel on one arch, before and after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffRow {
    /// Kernel name.
    pub kernel: String,
    /// Architecture.
    pub arch: String,
    /// In the old module, if there.
    pub old: Option<KernelMetrics>,
    /// In the new module, if there.
    pub new: Option<KernelMetrics>,
}

impl DiffRow {
    /// How the kernel changed.
    pub fn change(&self) -> Change {
        match (&self.old, &self.new) {
            (Some(old), Some(new)) if old == new => Change::Same,
            (Some(_), Some(_)) => Change::Changed,
            (None, _) => Change::Added,
            (Some(_), None) => Change::Removed,
        }
    }
}

/// Pairs the kernels of `old` and `new` by name and arch; rows sorted by kernel, then arch.
pub fn diff(old: &[KernelMetrics], new: &[KernelMetrics]) -> Vec<DiffRow> {
    let mut rows: BTreeMap<(String, String), DiffRow> = BTreeMap::new();
    let sides = old
        .iter()
        .map(|m| (m, true))
        .chain(new.iter().map(|m| (m, false)));
    for (m, is_old) in sides {
        let row = rows
            .entry((m.kernel.clone(), m.arch.clone()))
            .or_insert_with(|| DiffRow {
                kernel: m.kernel.clone(),
                arch: m.arch.clone(),
                old: None,
                new: None,
            });
        let side = if is_old { &mut row.old } else { &mut row.new };
        *side = Some(m.clone());
    }
    rows.into_values().collect()
}

/// Renders `rows` as a fixed-width table with columns kernel, arch,
/// registers, spills (stores/loads, bytes), stack, static smem,
/// `instructions_label` and change, then a summary line.
///
/// A figure that changed reads `old → new (±delta)`; one that did not is
/// printed once. Rows whose kernel is the same on both sides are left out
/// unless `show_unchanged` (the summary still counts them).
pub fn render_diff(rows: &[DiffRow], instructions_label: &str, show_unchanged: bool) -> String {
    let headers = [
        "kernel",
        "arch",
        "registers",
        "spills st/ld",
        "stack",
        "static smem",
        instructions_label,
        "change",
    ];
    let mut cells: Vec<Vec<String>> = Vec::new();
    for row in rows {
        let change = row.change();
        if change == Change::Same && !show_unchanged {
            continue;
        }
        let old = row.old.as_ref();
        let new = row.new.as_ref();
        let count =
            |m: Option<&KernelMetrics>, f: fn(&KernelMetrics) -> Option<i128>| m.and_then(f);
        let spills =
            |m: Option<&KernelMetrics>| m.map(|m| format!("{}/{}", m.spill_stores, m.spill_loads));
        cells.push(vec![
            row.kernel.clone(),
            row.arch.clone(),
            figure(
                count(old, |m| Some(m.registers.into())),
                count(new, |m| Some(m.registers.into())),
            ),
            text_figure(spills(old), spills(new)),
            figure(
                count(old, |m| Some(m.stack_frame.into())),
                count(new, |m| Some(m.stack_frame.into())),
            ),
            figure(
                count(old, |m| Some(m.static_shared.into())),
                count(new, |m| Some(m.static_shared.into())),
            ),
            figure(
                count(old, |m| m.instructions.map(|n| n as i128)),
                count(new, |m| m.instructions.map(|n| n as i128)),
            ),
            change.label().to_owned(),
        ]);
    }

    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    // Kernel, arch and change are text (left-aligned); the figures line up on the right.
    let left = |i: usize| i < 2 || i == headers.len() - 1;
    let mut out = String::new();
    // Nothing to show (every kernel the same): the summary line says so alone.
    if !cells.is_empty() {
        let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
        push_aligned(&mut out, &header, &widths, left);
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        push_aligned(&mut out, &rule, &widths, left);
        for row in &cells {
            push_aligned(&mut out, row, &widths, left);
        }
    }
    out.push_str(&summary(rows, show_unchanged));
    out.push('\n');
    out
}

/// One table line: cells padded to `widths`, left-aligned where `left(column)`.
fn push_aligned(
    out: &mut String,
    cells: &[String],
    widths: &[usize],
    left: impl Fn(usize) -> bool,
) {
    let mut line = String::new();
    for (i, (cell, &width)) in cells.iter().zip(widths).enumerate() {
        if i > 0 {
            line.push_str("  ");
        }
        let pad = " ".repeat(width.saturating_sub(cell.chars().count()));
        if left(i) {
            line.push_str(cell);
            line.push_str(&pad);
        } else {
            line.push_str(&pad);
            line.push_str(cell);
        }
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

/// `3 kernels × archs: 1 changed, 1 unchanged (not shown), 1 added, 0 removed`.
fn summary(rows: &[DiffRow], show_unchanged: bool) -> String {
    let n = |c: Change| rows.iter().filter(|r| r.change() == c).count();
    format!(
        "{} kernel×arch rows: {} changed, {} unchanged{}, {} added, {} removed",
        rows.len(),
        n(Change::Changed),
        n(Change::Same),
        if show_unchanged || n(Change::Same) == 0 {
            ""
        } else {
            " (not shown)"
        },
        n(Change::Added),
        n(Change::Removed),
    )
}

/// A number before and after: `20`, `20 → 18 (-2)`, `18` (one side only) or `?` (not counted).
fn figure(old: Option<i128>, new: Option<i128>) -> String {
    match (old, new) {
        (Some(a), Some(b)) if a == b => a.to_string(),
        (Some(a), Some(b)) => format!("{a} → {b} ({:+})", b - a),
        (Some(v), None) | (None, Some(v)) => v.to_string(),
        (None, None) => "?".to_owned(),
    }
}

/// Like [`figure`] for text cells, without a delta.
fn text_figure(old: Option<String>, new: Option<String>) -> String {
    match (old, new) {
        (Some(a), Some(b)) if a == b => a,
        (Some(a), Some(b)) => format!("{a} → {b}"),
        (Some(v), None) | (None, Some(v)) => v,
        (None, None) => "?".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(kernel: &str, arch: &str, registers: u32, instructions: Option<usize>) -> KernelMetrics {
        let report = EntryReport {
            kernel: kernel.to_owned(),
            arch: arch.to_owned(),
            registers,
            spill_stores: 0,
            spill_loads: 0,
            stack_frame: 0,
            static_shared: 0,
            barriers: 0,
        };
        KernelMetrics::new(&report, instructions)
    }

    #[test]
    fn pairs_by_kernel_and_arch() {
        let old = [
            m("b", "sm_90", 10, Some(5)),
            m("a", "sm_90", 20, Some(30)),
            m("gone", "sm_90", 8, Some(9)),
            m("a", "sm_80", 20, Some(31)),
        ];
        let new = [
            m("a", "sm_90", 18, Some(28)),
            m("b", "sm_90", 10, Some(5)),
            m("fresh", "sm_90", 8, Some(9)),
            m("a", "sm_80", 20, Some(31)),
        ];
        let rows = diff(&old, &new);
        let got: Vec<(&str, &str, Change)> = rows
            .iter()
            .map(|r| (r.kernel.as_str(), r.arch.as_str(), r.change()))
            .collect();
        assert_eq!(
            got,
            [
                ("a", "sm_80", Change::Same),
                ("a", "sm_90", Change::Changed),
                ("b", "sm_90", Change::Same),
                ("fresh", "sm_90", Change::Added),
                ("gone", "sm_90", Change::Removed),
            ]
        );
    }

    #[test]
    fn table_shows_changes_with_deltas_and_hides_unchanged_rows() {
        let mut spilled = m("a", "sm_90", 255, Some(28));
        spilled.report.spill_stores = 8;
        spilled.report.spill_loads = 4;
        let rows = diff(
            &[
                m("a", "sm_90", 20, Some(30)),
                m("b", "sm_90", 10, Some(5)),
                m("gone", "sm_90", 8, None),
            ],
            &[
                spilled,
                m("b", "sm_90", 10, Some(5)),
                m("fresh", "sm_90", 8, Some(9)),
            ],
        );
        let table = render_diff(&rows, "SASS instrs", false);
        let lines: Vec<&str> = table.lines().collect();
        assert!(
            lines[0].contains("registers") && lines[0].contains("SASS instrs"),
            "{table}"
        );
        assert!(lines[1].chars().all(|c| c == '-' || c == ' '));
        let a = lines.iter().find(|l| l.starts_with("a ")).expect(&table);
        assert!(a.contains("20 → 255 (+235)"), "{a}");
        assert!(a.contains("0/0 → 8/4"), "{a}");
        assert!(a.contains("30 → 28 (-2)"), "{a}");
        assert!(a.ends_with("changed"), "{a}");
        assert!(!lines.iter().any(|l| l.starts_with("b ")), "{table}");
        let gone = lines.iter().find(|l| l.starts_with("gone")).expect(&table);
        assert!(gone.ends_with("removed") && gone.contains('?'), "{gone}");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("fresh") && l.ends_with("added"))
        );
        assert_eq!(
            *lines.last().unwrap(),
            "4 kernel×arch rows: 1 changed, 1 unchanged (not shown), 1 added, 1 removed"
        );
        // Columns line up (in chars: the arrow is one): the change column starts
        // where its header does, and the figures end where theirs do.
        let column = |l: &str, word: &str| l.find(word).map(|b| l[..b].chars().count());
        let change_at = column(lines[0], "change");
        let instrs_end = column(lines[0], "SASS instrs").map(|c| c + "SASS instrs".len());
        for (line, word, count) in [
            (lines[2], "changed", "30 → 28 (-2)"),
            (lines[3], "added", "9"),
            (lines[4], "removed", "?"),
        ] {
            assert_eq!(column(line, word), change_at, "{table}");
            let end = column(line, &format!("{count}  {word}")).map(|c| c + count.chars().count());
            assert_eq!(end, instrs_end, "{table}");
        }

        let all = render_diff(&rows, "PTX instrs", true);
        assert!(
            all.lines()
                .any(|l| l.starts_with("b ") && l.ends_with("same")),
            "{all}"
        );
        assert!(
            all.lines().last().unwrap().contains("1 unchanged,"),
            "{all}"
        );
    }

    #[test]
    fn a_diff_without_changes_is_just_the_summary() {
        let rows = diff(
            &[m("a", "sm_90", 20, Some(30))],
            &[m("a", "sm_90", 20, Some(30))],
        );
        assert_eq!(
            render_diff(&rows, "SASS instrs", false),
            "1 kernel×arch rows: 0 changed, 1 unchanged (not shown), 0 added, 0 removed\n"
        );
        assert_eq!(render_diff(&rows, "SASS instrs", true).lines().count(), 4);
    }

    #[test]
    fn figures() {
        assert_eq!(figure(Some(3), Some(3)), "3");
        assert_eq!(figure(Some(3), Some(5)), "3 → 5 (+2)");
        assert_eq!(figure(None, Some(5)), "5");
        assert_eq!(figure(None, None), "?");
    }
}
