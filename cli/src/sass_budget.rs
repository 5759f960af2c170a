//! The SASS budget (`warpforge ptx --budget FILE`): per kernel family, the
//! most its innermost `HMMA`/`FFMA` loop and its k-tile loop may cost
//! ([`crate::sass_loops`]), and ptxas's registers and spills; a kernel over
//! any limit fails the run, naming the kernel, the figure and the limit.
//!
//! The file is TOML, one `[[family]]` table per kernel family, checked in
//! order (a kernel takes the first family whose `kernels` pattern matches;
//! `*` matches any run of characters):
//!
//! ```toml
//! [[family]]
//! kernels = "gemm_*_128x128x32_s4"
//! target = "≤ 2.5 per HMMA in the innermost loop"   # shown beside the figures
//! per = "HMMA"               # what the loops count per (default: the kernel's HGMMA, HMMA,
//!                            # DMMA, else FFMA; "LDG.128": 16-byte global loads)
//! inner_per_op = 11.5        # instructions per HMMA (FFMA) in the innermost loop
//! k_loop_per_op = 30.0       # … in the k-tile loop around it (or the innermost, if none)
//! fast_trip_per_op = 3.0     # … on the shortest trip around the innermost loop through
//!                            # its ops (a reduction's full unit, not its ragged-end path)
//! ops_per_output = 9         # HMMA (FFMA) per output element in those loops (a 3×3 stencil: 9)
//! inner_per_output = 16.0    # instructions per output element in the innermost loop
//! k_loop_per_output = 40.0   # … in the k-tile loop (both need `ops_per_output`)
//! k_loop_calls = 0           # CALLs that return, in the k-tile loop
//! k_loop_panic_paths = 0     # branches out of it to a panic/trap
//! k_loop_warpsync = 0        # WARPSYNC in it
//! inner_warpsync = 0         # WARPSYNC in the innermost loop (where the k-tile loop is a
//!                            # persistent kernel's tile loop, its epilogue's are not in it)
//! k_loop_bssy = 0            # BSSY + BSYNC in it
//! spills = 0                 # spill stores + loads (bytes)
//! registers = 255            # registers per thread
//! register_roles = [[128, 56], [256, 224]]  # (threads, setmaxnreg limit) per role
//! ```
//!
//! `register_roles` is a warp-specialised kernel's roles: the SASS must set
//! exactly those limits (`USETMAXREG`; none would mean ptxas dropped the
//! `setmaxnreg`s), and threads × limit over the roles must fit the block's
//! registers at entry (ptxas's count × the roles' threads): an
//! `setmaxnreg.inc` draws only on what the block's `.dec`s released, and
//! waits for ever for more.
//!
//! Every limit is optional. A kernel whose innermost loop holds `HMMA` must
//! match a family (a new tensor-core configuration gets a budget when it is
//! added); when the whole module is checked, a family that is the first
//! match of no kernel is an error too (a renamed or shadowed family would
//! otherwise check nothing).
//!
//! ```
//! use warpforge_cli::sass_budget::Budget;
//! let budget = Budget::parse("[[family]]\nkernels = \"gemm_*_s3\"\ninner_per_op = 4.0\n").unwrap();
//! assert!(budget.family_of("gemm_f16_f32_nn_64x64x32_s3").is_some());
//! assert!(budget.family_of("conv2d_nhwc_f16_64x64x32_s3").is_none());
//! ```

use crate::ptxas::EntryReport;
use crate::sass_loops::{LoopReport, Op};

/// One family's limits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Family {
    /// The kernel-name pattern (`*` matches any run of characters).
    pub kernels: String,
    /// What the family aims for, printed beside its figures.
    pub target: Option<String>,
    /// What the loop figures count per (`per = "LDG.128"`: 16-byte global
    /// loads, for memory-bound kernels); by default the op the kernel's
    /// SASS holds (HGMMA, HMMA, DMMA, else FFMA).
    pub per: Option<crate::sass_loops::Op>,
    /// Instructions per `HMMA`/`FFMA` in the innermost loop holding them.
    pub inner_per_op: Option<f64>,
    /// Instructions per `HMMA`/`FFMA` in the k-tile loop.
    pub k_loop_per_op: Option<f64>,
    /// Instructions per op on the shortest trip around the innermost loop
    /// through its ops ([`crate::sass_loops::TripFigures`]: a reduction's
    /// full-unit path, without the scalar path for ragged ends).
    pub fast_trip_per_op: Option<f64>,
    /// `HMMA`/`FFMA` per output element in the loops (a depthwise 3 × 3
    /// filter's main loop: 9 FFMA an output): turns the per-op figures into
    /// instructions per output element.
    pub ops_per_output: Option<f64>,
    /// Instructions per output element in the innermost loop
    /// (`ops_per_output` × instructions per op).
    pub inner_per_output: Option<f64>,
    /// Instructions per output element in the k-tile loop.
    pub k_loop_per_output: Option<f64>,
    /// `CALL`s (that return) in the k-tile loop.
    pub k_loop_calls: Option<usize>,
    /// Panic/trap paths out of the k-tile loop.
    pub k_loop_panic_paths: Option<usize>,
    /// `WARPSYNC`s in the k-tile loop.
    pub k_loop_warpsync: Option<usize>,
    /// `WARPSYNC`s in the innermost loop: the k-loop proper, where the loop
    /// around it is a persistent kernel's tile loop (whose epilogue may sync
    /// its warps once a tile).
    pub inner_warpsync: Option<usize>,
    /// `BSSY` + `BSYNC` in the k-tile loop.
    pub k_loop_bssy: Option<usize>,
    /// Spill stores + loads, bytes.
    pub spills: Option<u64>,
    /// Registers per thread.
    pub registers: Option<u32>,
    /// The roles of a warp-specialised block: (threads, `setmaxnreg` limit).
    pub register_roles: Option<Vec<(u32, u32)>>,
}

impl Family {
    /// Instructions per output element of `loop_figures`, if the family
    /// says how many ops an output takes (`ops_per_output`).
    pub fn per_output(&self, loop_figures: &crate::sass_loops::LoopFigures) -> Option<f64> {
        self.ops_per_output.map(|ops| loop_figures.per_op() * ops)
    }

    /// Its `register_roles` summed: (threads, Σ threads × limit).
    pub fn role_totals(&self) -> Option<(u64, u64)> {
        let roles = self.register_roles.as_ref()?;
        let threads = roles.iter().map(|&(t, _)| u64::from(t)).sum();
        let registers = roles
            .iter()
            .map(|&(t, limit)| u64::from(t) * u64::from(limit))
            .sum();
        Some((threads, registers))
    }
}

/// A budget table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Budget {
    /// The families, in file order.
    pub families: Vec<Family>,
}

/// One kernel's figures on one architecture.
#[derive(Clone, Debug)]
pub struct Measured<'a> {
    /// ptxas's resource row (kernel, arch, registers, spills).
    pub entry: &'a EntryReport,
    /// The loop report, if the kernel has an `HMMA`/`FFMA` loop.
    pub loops: Option<&'a LoopReport>,
    /// The limits its `setmaxnreg`s set, ascending
    /// ([`SassFunction::register_limits`](crate::sass::SassFunction::register_limits)).
    pub register_limits: &'a [u32],
}

/// A figure over its limit.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// The kernel.
    pub kernel: String,
    /// The architecture.
    pub arch: String,
    /// What went over, e.g. `instructions per HMMA in the innermost loop`.
    pub figure: String,
    /// Its value (empty when the figure says it all).
    pub value: String,
    /// The limit (and the family).
    pub limit: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.value.is_empty() {
            return write!(f, "{} ({}): {}", self.kernel, self.arch, self.figure);
        }
        write!(
            f,
            "{} ({}): {} is {}, over its limit {}",
            self.kernel, self.arch, self.figure, self.value, self.limit
        )
    }
}

/// Whether `name` matches `pattern` (`*`: any run of characters).
pub fn matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

impl Budget {
    /// Parses a budget file; unknown keys and wrongly typed values are errors.
    pub fn parse(text: &str) -> Result<Budget, String> {
        let table: toml::Table = text.parse().map_err(|e| format!("not TOML: {e}"))?;
        let mut families = Vec::new();
        for (key, value) in &table {
            if key != "family" {
                return Err(format!(
                    "unknown key `{key}`: a budget file holds `[[family]]` tables only"
                ));
            }
            let toml::Value::Array(items) = value else {
                return Err("`family` must be an array of tables: write `[[family]]`".into());
            };
            for (i, item) in items.iter().enumerate() {
                let toml::Value::Table(t) = item else {
                    return Err(format!("family {}: not a table", i + 1));
                };
                families.push(family(t).map_err(|e| format!("family {}: {e}", i + 1))?);
            }
        }
        Ok(Budget { families })
    }

    /// The first family whose pattern matches `kernel`.
    pub fn family_of(&self, kernel: &str) -> Option<&Family> {
        self.families.iter().find(|f| matches(&f.kernels, kernel))
    }

    /// Every figure over its limit. `whole_module`: the rows are every kernel
    /// of the module, so a family matching none of them is reported too.
    pub fn check(&self, rows: &[Measured<'_>], whole_module: bool) -> Vec<Violation> {
        let mut out = Vec::new();
        for row in rows {
            let (kernel, arch) = (&row.entry.kernel, &row.entry.arch);
            let violation = |figure: &str, value: String, limit: String| Violation {
                kernel: kernel.clone(),
                arch: arch.clone(),
                figure: figure.to_owned(),
                value,
                limit,
            };
            let Some(family) = self.family_of(kernel) else {
                if row.loops.is_some_and(|l| l.op != Op::Ffma) {
                    out.push(violation(
                        "has a tensor-core (HMMA/DMMA/HGMMA) loop but no budget: add a [[family]] \
                         whose `kernels` pattern matches it",
                        String::new(),
                        String::new(),
                    ));
                }
                continue;
            };
            let within = |limit: String| format!("{limit} (family `{}`)", family.kernels);
            let spills = row.entry.spill_stores + row.entry.spill_loads;
            if let Some(limit) = family.spills
                && spills > limit
            {
                out.push(violation(
                    "spill bytes (stores + loads)",
                    spills.to_string(),
                    within(limit.to_string()),
                ));
            }
            if let Some(limit) = family.registers
                && row.entry.registers > limit
            {
                out.push(violation(
                    "registers",
                    row.entry.registers.to_string(),
                    within(limit.to_string()),
                ));
            }
            if let Some(roles) = &family.register_roles {
                let mut wanted: Vec<u32> = roles.iter().map(|&(_, limit)| limit).collect();
                wanted.sort_unstable();
                wanted.dedup();
                if row.register_limits != wanted.as_slice() {
                    out.push(violation(
                        "setmaxnreg limits in the SASS (USETMAXREG)",
                        format!("{:?}", row.register_limits),
                        within(format!("{wanted:?}, its roles'")),
                    ));
                }
                let (threads, taken) = family.role_totals().unwrap_or_default();
                let held = u64::from(row.entry.registers) * threads;
                if taken > held {
                    out.push(violation(
                        "registers its roles take (threads × setmaxnreg limit; more than the \
                         block holds makes an .inc wait for ever)",
                        taken.to_string(),
                        format!(
                            "{held} = {} at entry × {threads} threads (family `{}`)",
                            row.entry.registers, family.kernels
                        ),
                    ));
                }
            }
            let wants_loop = family.inner_per_op.is_some()
                || family.k_loop_per_op.is_some()
                || family.fast_trip_per_op.is_some()
                || family.inner_per_output.is_some()
                || family.k_loop_per_output.is_some()
                || family.k_loop_calls.is_some()
                || family.k_loop_panic_paths.is_some()
                || family.k_loop_warpsync.is_some()
                || family.inner_warpsync.is_some()
                || family.k_loop_bssy.is_some();
            let Some(loops) = row.loops else {
                if wants_loop {
                    out.push(violation(
                        "its HMMA/FFMA loop",
                        "not found".into(),
                        within("(the family limits one)".into()),
                    ));
                }
                continue;
            };
            let op = loops.op.name();
            let k = loops.k_loop();
            let per_output = |f| family.per_output(f).unwrap_or(f64::NAN);
            let ratios = [
                (
                    format!("instructions per {op} in the innermost loop"),
                    loops.inner.per_op(),
                    family.inner_per_op,
                ),
                (
                    format!("instructions per {op} in the k-tile loop"),
                    k.per_op(),
                    family.k_loop_per_op,
                ),
                (
                    format!("instructions per {op} on the shortest trip around the innermost loop"),
                    loops.fast_trip.map_or(f64::INFINITY, |t| t.per_op()),
                    family.fast_trip_per_op,
                ),
                (
                    "instructions per output element in the innermost loop".to_owned(),
                    per_output(&loops.inner),
                    family.inner_per_output,
                ),
                (
                    "instructions per output element in the k-tile loop".to_owned(),
                    per_output(k),
                    family.k_loop_per_output,
                ),
            ];
            for (figure, value, limit) in ratios {
                // Figures print with two decimals: compare what is printed.
                if let Some(limit) = limit
                    && round2(value) > round2(limit)
                {
                    out.push(violation(
                        &figure,
                        format!("{value:.2}"),
                        within(format!("{limit:.2}")),
                    ));
                }
            }
            let counts = [
                ("CALLs in the k-tile loop", k.calls, family.k_loop_calls),
                (
                    "panic paths out of the k-tile loop",
                    k.panic_paths,
                    family.k_loop_panic_paths,
                ),
                (
                    "WARPSYNCs in the k-tile loop",
                    k.warpsyncs,
                    family.k_loop_warpsync,
                ),
                ("BSSY/BSYNCs in the k-tile loop", k.bssy, family.k_loop_bssy),
                (
                    "WARPSYNCs in the innermost loop",
                    loops.inner.warpsyncs,
                    family.inner_warpsync,
                ),
            ];
            for (figure, value, limit) in counts {
                if let Some(limit) = limit
                    && value > limit
                {
                    out.push(violation(
                        figure,
                        value.to_string(),
                        within(limit.to_string()),
                    ));
                }
            }
        }
        if whole_module {
            for family in &self.families {
                let takes_some = rows.iter().any(|r| {
                    self.family_of(&r.entry.kernel)
                        .is_some_and(|f| std::ptr::eq(f, family))
                });
                if !takes_some {
                    out.push(Violation {
                        kernel: family.kernels.clone(),
                        arch: "any".into(),
                        figure: "kernels the family budgets (the first family that matches)".into(),
                        value: "0".into(),
                        limit: "at least 1 (a stale, misspelt or shadowed pattern checks nothing)"
                            .into(),
                    });
                }
            }
        }
        out
    }
}

/// `x` as it prints with two decimals (`{:.2}` rounds a tie to even: 4.125
/// prints 4.12, where `(x * 100).round()` would make it 4.13 and fail a kernel
/// that is exactly at its printed limit).
fn round2(x: f64) -> f64 {
    format!("{x:.2}").parse().unwrap_or(x)
}

fn family(t: &toml::Table) -> Result<Family, String> {
    let mut f = Family::default();
    for (key, value) in t {
        let float = || match value {
            toml::Value::Float(x) => Ok(*x),
            toml::Value::Integer(i) => Ok(*i as f64),
            _ => Err(format!("`{key}` must be a number")),
        };
        let int = || match value {
            toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
            _ => Err(format!("`{key}` must be a whole number ≥ 0")),
        };
        let string = || match value {
            toml::Value::String(s) => Ok(s.clone()),
            _ => Err(format!("`{key}` must be a string")),
        };
        match key.as_str() {
            "kernels" => f.kernels = string()?,
            "target" => f.target = Some(string()?),
            "per" => {
                let name = string()?;
                f.per = Some(crate::sass_loops::Op::from_name(&name).ok_or_else(|| {
                    format!("`per` = \"{name}\": one of HGMMA, HMMA, DMMA, FFMA, LDG.128")
                })?);
            }
            "inner_per_op" => f.inner_per_op = Some(float()?),
            "k_loop_per_op" => f.k_loop_per_op = Some(float()?),
            "fast_trip_per_op" => f.fast_trip_per_op = Some(float()?),
            "ops_per_output" => f.ops_per_output = Some(float()?),
            "inner_per_output" => f.inner_per_output = Some(float()?),
            "k_loop_per_output" => f.k_loop_per_output = Some(float()?),
            "k_loop_calls" => f.k_loop_calls = Some(int()? as usize),
            "k_loop_panic_paths" => f.k_loop_panic_paths = Some(int()? as usize),
            "k_loop_warpsync" => f.k_loop_warpsync = Some(int()? as usize),
            "inner_warpsync" => f.inner_warpsync = Some(int()? as usize),
            "k_loop_bssy" => f.k_loop_bssy = Some(int()? as usize),
            "spills" => f.spills = Some(int()?),
            "registers" => f.registers = Some(int()? as u32),
            "register_roles" => f.register_roles = Some(roles(value)?),
            other => {
                return Err(format!(
                    "unknown key `{other}` (known: kernels, target, per, inner_per_op, \
                     k_loop_per_op, fast_trip_per_op, ops_per_output, inner_per_output, k_loop_per_output, \
                     k_loop_calls, k_loop_panic_paths, k_loop_warpsync, inner_warpsync, \
                     k_loop_bssy, spills, registers, register_roles)"
                ));
            }
        }
    }
    if f.kernels.is_empty() {
        return Err("no `kernels` pattern".into());
    }
    if (f.inner_per_output.is_some() || f.k_loop_per_output.is_some())
        && !f.ops_per_output.is_some_and(|ops| ops > 0.0)
    {
        return Err(
            "`inner_per_output` and `k_loop_per_output` need `ops_per_output` (> 0): how many \
             HMMA/FFMA an output element takes"
                .into(),
        );
    }
    Ok(f)
}

/// `register_roles`: an array of `[threads, limit]` pairs, whole numbers.
fn roles(value: &toml::Value) -> Result<Vec<(u32, u32)>, String> {
    let shape = || "`register_roles` must be [[threads, limit], …], whole numbers".to_owned();
    let number = |v: &toml::Value| match v {
        toml::Value::Integer(i) => u32::try_from(*i).map_err(|_| shape()),
        _ => Err(shape()),
    };
    let toml::Value::Array(roles) = value else {
        return Err(shape());
    };
    roles
        .iter()
        .map(|role| match role {
            toml::Value::Array(pair) if pair.len() == 2 => {
                Ok((number(&pair[0])?, number(&pair[1])?))
            }
            _ => Err(shape()),
        })
        .collect()
}

#[cfg(test)]
mod rounding_tests {
    #[test]
    fn a_figure_compares_as_it_prints() {
        assert_eq!(super::round2(4.125), 4.12);
        assert_eq!(format!("{:.2}", 4.125), "4.12");
        assert_eq!(super::round2(11.125), 11.12);
        assert_eq!(super::round2(4.126), 4.13);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sass_loops::LoopFigures;

    fn entry(kernel: &str, registers: u32, spills: u64) -> EntryReport {
        EntryReport {
            kernel: kernel.into(),
            arch: "sm_90".into(),
            registers,
            spill_stores: spills,
            spill_loads: 0,
            stack_frame: 0,
            static_shared: 0,
            barriers: 1,
        }
    }

    fn figures(instructions: usize, ops: usize, calls: usize, panics: usize) -> LoopFigures {
        LoopFigures {
            instructions,
            ops,
            mix: Vec::new(),
            calls,
            panic_paths: panics,
            warpsyncs: 0,
            bssy: 0,
        }
    }

    const TABLE: &str = r#"
# the large tile first: the small one's pattern would match it too
[[family]]
kernels = "gemm_*_128x128x32_s4"
target = "≤ 2.5 per HMMA"
inner_per_op = 2.5
k_loop_per_op = 4
k_loop_calls = 0
k_loop_panic_paths = 0
inner_warpsync = 0
spills = 0

[[family]]
kernels = "gemm_*"
registers = 128
"#;

    #[test]
    fn patterns() {
        assert!(matches("gemm_*_s3", "gemm_f16_f32_nn_64x64x32_s3"));
        assert!(matches("*", "x"));
        assert!(matches("a*b*c", "aXbYc"));
        assert!(matches("a*b*c", "abc"));
        assert!(!matches("a*b*c", "ac"));
        assert!(!matches("ab*ba", "aba"));
        assert!(matches("exact", "exact"));
        assert!(!matches("exact", "exactly"));
    }

    #[test]
    fn parses_families_in_order_and_rejects_unknown_keys() {
        let b = Budget::parse(TABLE).unwrap();
        assert_eq!(b.families.len(), 2);
        assert_eq!(b.families[0].k_loop_per_op, Some(4.0));
        assert_eq!(b.families[0].target.as_deref(), Some("≤ 2.5 per HMMA"));
        assert_eq!(
            b.family_of("gemm_f16_f32_nn_128x128x32_s4").unwrap().spills,
            Some(0)
        );
        assert_eq!(
            b.family_of("gemm_f16_f32_nn_64x64x32_s3")
                .unwrap()
                .registers,
            Some(128)
        );
        let e = Budget::parse("[[family]]\nkernels = \"x\"\ninner = 1\n").unwrap_err();
        assert!(e.contains("unknown key `inner`"), "{e}");
        let e = Budget::parse("[[family]]\ninner_per_op = 1\n").unwrap_err();
        assert!(e.contains("no `kernels`"), "{e}");
        let e = Budget::parse("[[family]]\nkernels = \"x\"\nspills = \"0\"\n").unwrap_err();
        assert!(e.contains("`spills` must be a whole number"), "{e}");
        assert!(
            Budget::parse("[limits]\n")
                .unwrap_err()
                .contains("unknown key `limits`")
        );
    }

    #[test]
    fn each_figure_over_its_limit_is_named() {
        let b = Budget::parse(TABLE).unwrap();
        let lean = LoopReport {
            op: Op::Hmma,
            inner: figures(40, 16, 0, 0),
            outer: Some(figures(128, 32, 0, 0)),
            fast_trip: None,
            others: 0,
        };
        let fat = LoopReport {
            op: Op::Hmma,
            inner: LoopFigures {
                warpsyncs: 1,
                ..figures(184, 16, 0, 0)
            },
            outer: Some(figures(934, 16, 2, 12)),
            fast_trip: None,
            others: 1,
        };
        let big = "gemm_f16_f32_nn_128x128x32_s4";
        let (e1, e2, e3) = (
            entry(big, 200, 0),
            entry(big, 200, 8),
            entry("conv_x", 40, 0),
        );
        let ok = [Measured {
            entry: &e1,
            loops: Some(&lean),
            register_limits: &[],
        }];
        assert_eq!(b.check(&ok, false), []);
        let bad = [
            Measured {
                entry: &e2,
                loops: Some(&fat),
                register_limits: &[],
            },
            Measured {
                entry: &e3,
                loops: Some(&lean),
                register_limits: &[],
            },
        ];
        let v = b.check(&bad, false);
        let figures: Vec<&str> = v.iter().map(|v| v.figure.as_str()).collect();
        assert_eq!(
            figures,
            [
                "spill bytes (stores + loads)",
                "instructions per HMMA in the innermost loop",
                "instructions per HMMA in the k-tile loop",
                "CALLs in the k-tile loop",
                "panic paths out of the k-tile loop",
                "WARPSYNCs in the innermost loop",
                "has a tensor-core (HMMA/DMMA/HGMMA) loop but no budget: add a [[family]] \
                 whose `kernels` pattern matches it",
            ]
        );
        assert_eq!(
            v[1].to_string(),
            "gemm_f16_f32_nn_128x128x32_s4 (sm_90): instructions per HMMA in the innermost \
             loop is 11.50, over its limit 2.50 (family `gemm_*_128x128x32_s4`)"
        );
        assert_eq!(v[6].kernel, "conv_x");
        assert!(
            v[6].to_string().starts_with(
                "conv_x (sm_90): has a tensor-core (HMMA/DMMA/HGMMA) loop but no budget"
            )
        );
        // The whole module: the second family is the first match of no kernel
        // (its pattern matches the big kernel, which the first family takes).
        let v = b.check(&ok, true);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].kernel, "gemm_*");
    }

    /// `per = "LDG.128"` and `fast_trip_per_op`: parsed, and the trip's
    /// figure checked as printed; a family that limits it fails where the
    /// loop has no trip.
    #[test]
    fn the_fast_trip_is_checked_per_16_byte_load() {
        let b = Budget::parse(
            "[[family]]\nkernels = \"reduce_*\"\nper = \"LDG.128\"\nfast_trip_per_op = 24\n",
        )
        .unwrap();
        assert_eq!(b.families[0].per, Some(Op::Ldg128));
        let report = |trip: Option<crate::sass_loops::TripFigures>| LoopReport {
            op: Op::Ldg128,
            inner: figures(900, 5, 0, 0),
            outer: None,
            fast_trip: trip,
            others: 0,
        };
        let e = entry("reduce_fused_sum_f32", 69, 0);
        let check = |r: &LoopReport| {
            b.check(
                &[Measured {
                    entry: &e,
                    loops: Some(r),
                    register_limits: &[],
                }],
                false,
            )
        };
        let trip = |instructions| {
            Some(crate::sass_loops::TripFigures {
                instructions,
                ops: 4,
            })
        };
        assert_eq!(check(&report(trip(96))), []); // 24.00
        let v = check(&report(trip(97))); // 24.25
        assert_eq!(v.len(), 1);
        assert!(v[0].figure.contains("shortest trip"), "{}", v[0].figure);
        assert_eq!(check(&report(None)).len(), 1);
        let e = Budget::parse("[[family]]\nkernels = \"k\"\nper = \"LDG\"\n").unwrap_err();
        assert!(e.contains("LDG.128"), "{e}");
    }

    #[test]
    fn a_ratio_exactly_at_its_printed_limit_passes() {
        let b = Budget::parse("[[family]]\nkernels = \"k\"\ninner_per_op = 1.17\n").unwrap();
        let r = LoopReport {
            op: Op::Ffma,
            inner: figures(75, 64, 0, 0),
            outer: None,
            fast_trip: None,
            others: 0,
        };
        let e = entry("k", 100, 0);
        let row = [Measured {
            entry: &e,
            loops: Some(&r),
            register_limits: &[],
        }];
        // 75/64 = 1.171875, printed 1.17.
        assert_eq!(b.check(&row, true), []);
        let tight = Budget::parse("[[family]]\nkernels = \"k\"\ninner_per_op = 1.16\n").unwrap();
        assert_eq!(tight.check(&row, true).len(), 1);
    }

    /// Per-output limits: instructions per op × ops per output (a 3 × 3
    /// depthwise strip: 9 FFMA an output), checked as printed; they need
    /// `ops_per_output`.
    #[test]
    fn per_output_limits_scale_the_per_op_figures() {
        let budget = |limit: f64| {
            Budget::parse(&format!(
                "[[family]]\nkernels = \"k\"\nops_per_output = 9\ninner_per_output = \
                 {limit}\nk_loop_per_output = 40\n"
            ))
            .unwrap()
        };
        // 1000 instructions / 504 FFMA × 9 = 17.857…, printed 17.86.
        let r = LoopReport {
            op: Op::Ffma,
            inner: figures(1000, 504, 0, 0),
            outer: Some(figures(2000, 504, 0, 0)),
            fast_trip: None,
            others: 0,
        };
        let e = entry("k", 100, 0);
        let row = [Measured {
            entry: &e,
            loops: Some(&r),
            register_limits: &[],
        }];
        assert_eq!(budget(17.86).check(&row, true), []);
        // 2000 / 504 × 9 = 35.71: within the k-loop's 40.
        let v = budget(17.85).check(&row, true);
        let figures: Vec<&str> = v.iter().map(|v| v.figure.as_str()).collect();
        assert_eq!(
            figures,
            ["instructions per output element in the innermost loop"]
        );
        assert_eq!(v[0].value, "17.86");
        let e = Budget::parse("[[family]]\nkernels = \"k\"\ninner_per_output = 16\n").unwrap_err();
        assert!(e.contains("ops_per_output"), "{e}");
    }

    /// A warp-specialised kernel's roles: the SASS must set exactly their
    /// limits, and threads × limit must fit the block's registers at entry
    /// (168 × 384 = 64512: 56/224 fits exactly, 64/224 is 1024 over).
    #[test]
    fn register_roles_must_be_set_and_fit_the_block() {
        let budget = |producer: u32| {
            Budget::parse(&format!(
                "[[family]]\nkernels = \"k\"\nregister_roles = [[128, {producer}], [256, 224]]\n"
            ))
            .unwrap()
        };
        let e = entry("k", 168, 0);
        let row = |limits: &'static [u32]| Measured {
            entry: &e,
            loops: None,
            register_limits: limits,
        };
        assert_eq!(budget(56).check(&[row(&[56, 224])], true), []);
        let over = budget(64).check(&[row(&[64, 224])], true);
        assert_eq!(over.len(), 1, "{over:?}");
        assert!(
            over[0].figure.starts_with("registers its roles take"),
            "{over:?}"
        );
        assert_eq!(over[0].value, "65536");
        assert!(
            over[0]
                .limit
                .starts_with("64512 = 168 at entry × 384 threads"),
            "{over:?}"
        );
        // ptxas dropped the setmaxnregs (C7508), or set other limits.
        for limits in [&[][..], &[40, 232]] {
            let v = budget(56).check(&[row(limits)], true);
            assert_eq!(v.len(), 1, "{v:?}");
            assert!(v[0].figure.starts_with("setmaxnreg limits"), "{v:?}");
        }
        assert!(
            Budget::parse("[[family]]\nkernels = \"k\"\nregister_roles = [128, 56]\n").is_err()
        );
        assert!(
            Budget::parse("[[family]]\nkernels = \"k\"\nregister_roles = [[128, -56]]\n").is_err()
        );
    }
}
