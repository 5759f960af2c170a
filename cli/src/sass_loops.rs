//! The loop report of `warpforge ptx --sass` and `--budget`: from a kernel's
//! SASS, its innermost loop that holds tensor-core `HMMA` (or f64 `DMMA`)
//! instructions (or, in a kernel without any, `FFMA`), and the loop around
//! it (the k-tile loop), with what each costs per `HMMA`/`DMMA`/`FFMA`.
//!
//! The loops come from the SASS control flow, not from the layout: the
//! function is cut into basic blocks at labels (nvdisasm) or branch target
//! addresses (cuobjdump), a block's successors are its branch target and,
//! unless it ends in an unconditional branch, `EXIT`, `RET`, a trap or a call
//! of a panic function, the next block; a loop is the natural loop of each
//! back edge (a branch to a block that dominates it). A call of a Rust panic
//! function (`panic_fmt`, `expect_failed`, `slice_index_fail`, …) is a dead
//! end, so a loop's bounds check shows as a **panic path**: an edge out of
//! the loop to blocks that can never reach `EXIT` or `RET`.
//!
//! All counts are static: instructions in the loop body, whatever the trip
//! count of a loop nested in it.
//!
//! ```
//! use warpforge_cli::{sass, sass_loops};
//! let text = "//----- .text.k -----\n\
//!     /*0000*/ MOV R0, RZ ;\n\
//! .L_x_0:\n\
//!     /*0010*/ HMMA.16816.F32 R4, R8, R12, R4 ;\n\
//!     /*0020*/ IADD3 R0, R0, 0x1, RZ ;\n\
//!     /*0030*/ ISETP.NE.AND P0, PT, R0, 0x8, PT ;\n\
//!     /*0040*/ @P0 BRA `(.L_x_0) ;\n\
//!     /*0050*/ EXIT ;\n";
//! let k = &sass::split_functions(text)[0];
//! let report = sass_loops::analyze(k).unwrap();
//! assert_eq!(report.op, sass_loops::Op::Hmma);
//! assert_eq!((report.inner.instructions, report.inner.ops), (4, 1));
//! assert_eq!(report.inner.per_op(), 4.0);
//! assert!(report.outer.is_none());
//! ```

use crate::sass::SassFunction;
use std::collections::HashMap;

/// The instruction a loop report counts per.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Warpgroup tensor-core `HGMMA` (`wgmma.mma_async`, sm_90a): counted
    /// before `HMMA`, in kernels that have it.
    Hgmma,
    /// Tensor-core `HMMA` (f16/bf16/tf32 `mma.sync`).
    Hmma,
    /// FP64 tensor-core `DMMA` (f64 `mma.sync`: `DMMA.884` on sm_80,
    /// `DMMA.8x8x4` on sm_90).
    Dmma,
    /// `FFMA` (f32 fused multiply-add), for kernels without `HMMA`.
    Ffma,
}

impl Op {
    /// `"HGMMA"`, `"HMMA"`, `"DMMA"` or `"FFMA"`.
    pub fn name(self) -> &'static str {
        match self {
            Op::Hgmma => "HGMMA",
            Op::Hmma => "HMMA",
            Op::Dmma => "DMMA",
            Op::Ffma => "FFMA",
        }
    }
}

/// The figures of one loop.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopFigures {
    /// SASS instructions in the loop body (static).
    pub instructions: usize,
    /// `HMMA` (or `FFMA`, as the report's [`Op`]) instructions among them.
    pub ops: usize,
    /// Base opcodes (`IMAD` for `IMAD.MOV.U32`) with their counts, most first.
    pub mix: Vec<(String, usize)>,
    /// `CALL`s that return (a call of a panic function is a panic path).
    pub calls: usize,
    /// Edges out of the loop to code that never reaches `EXIT`/`RET`: a
    /// panic or trap path.
    pub panic_paths: usize,
    /// `WARPSYNC` instructions.
    pub warpsyncs: usize,
    /// `BSSY` and `BSYNC` instructions (divergence reconvergence).
    pub bssy: usize,
}

impl LoopFigures {
    /// Instructions per `HMMA`/`FFMA` (infinite when it has none).
    pub fn per_op(&self) -> f64 {
        self.instructions as f64 / self.ops as f64
    }

    /// The mix as `45 IMAD, 25 BRA, …` (the first `n` opcodes).
    pub fn mix_text(&self, n: usize) -> String {
        let mut parts: Vec<String> = self
            .mix
            .iter()
            .take(n)
            .map(|(op, count)| format!("{count} {op}"))
            .collect();
        if self.mix.len() > n {
            let rest: usize = self.mix[n..].iter().map(|(_, c)| c).sum();
            parts.push(format!("{rest} other"));
        }
        parts.join(", ")
    }
}

/// A kernel's loop report: its innermost loop holding [`Op`], and the
/// innermost loop around that one.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopReport {
    /// What the loops are counted per.
    pub op: Op,
    /// The loop holding the most `op` of its own (none of it inside a
    /// smaller loop holding `op`): the innermost `op` loop, unless a loop
    /// holds its ops in straight-line code beside an inner one.
    pub inner: LoopFigures,
    /// The loop around it (the k-tile loop), if any.
    pub outer: Option<LoopFigures>,
    /// Other innermost loops holding `op` (e.g. a guarded edge-tile path
    /// beside the proven interior one): the report is the leanest nest's.
    pub others: usize,
}

impl LoopReport {
    /// The k-tile loop: the loop around the innermost one, or the innermost
    /// one itself where nothing encloses it (then it is a whole k-tile
    /// iteration).
    pub fn k_loop(&self) -> &LoopFigures {
        self.outer.as_ref().unwrap_or(&self.inner)
    }

    /// One line: `HMMA loop: 184 instrs / 16 HMMA = 11.50 (45 IMAD, …); k-loop: …`.
    pub fn summary(&self) -> String {
        let op = self.op.name();
        let describe = |f: &LoopFigures| {
            format!(
                "{} instrs / {} {op} = {:.2} per {op}; {} CALL, {} panic paths, {} WARPSYNC, \
                 {} BSSY/BSYNC ({})",
                f.instructions,
                f.ops,
                f.per_op(),
                f.calls,
                f.panic_paths,
                f.warpsyncs,
                f.bssy,
                f.mix_text(8)
            )
        };
        let others = match self.others {
            0 => String::new(),
            n => format!(
                "\n// (and {n} other innermost {op} loop(s), e.g. a guarded edge-tile path: \
                 these figures are the leanest nest's)"
            ),
        };
        match &self.outer {
            Some(outer) => format!(
                "innermost {op} loop: {}\n// enclosing (k-tile) loop: {}{others}",
                describe(&self.inner),
                describe(outer)
            ),
            None => format!(
                "innermost {op} loop (the whole k-tile loop): {}{others}",
                describe(&self.inner)
            ),
        }
    }
}

/// One parsed instruction.
#[derive(Debug)]
struct Instr {
    offset: Option<u64>,
    guarded: bool,
    opcode: String,
    operands: String,
}

impl Instr {
    fn base(&self) -> &str {
        self.opcode.split('.').next().unwrap_or_default()
    }
}

/// How control leaves an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    /// On to the next instruction only.
    Next,
    /// A branch to a known instruction; `conditional` also falls through.
    Branch { target: usize, conditional: bool },
    /// Ends the path normally (`EXIT`, `RET`); falls through when guarded.
    End { guarded: bool },
    /// Ends the path for good: a trap, a panic call (falls through when guarded).
    Dead { guarded: bool },
    /// An indirect branch: successors unknown (treated as an end).
    Indirect,
}

/// Whether a call target is a Rust panic function (never returns).
fn is_panic_function(target: &str) -> bool {
    let t = target.to_ascii_lowercase();
    ["panic", "_fail", "unwind", "abort", "unreachable"]
        .iter()
        .any(|p| t.contains(p))
}

/// The branch target: a label in backquotes (`` `(.L_x_3) ``) or an address (`0x130`).
fn target_of(operands: &str) -> Option<Target<'_>> {
    if let Some(at) = operands.find("`(") {
        let rest = &operands[at + 2..];
        let end = rest.find(')')?;
        return Some(Target::Label(&rest[..end]));
    }
    let last = operands.split([',', ' ']).rev().find(|t| !t.is_empty())?;
    let hex = last.strip_prefix("0x")?;
    u64::from_str_radix(hex, 16).ok().map(Target::Address)
}

enum Target<'a> {
    Label(&'a str),
    Address(u64),
}

/// The parsed instructions and labels of a function's section, and where
/// the callees that nvdisasm prints in the same section start
/// (`$kernel$callee:` labels). A callee is reached by `CALL`, not by a
/// branch, so its blocks are unreachable in the kernel's flow graph; ptxas
/// may lay blocks of the kernel itself out after them.
fn parse(function: &SassFunction) -> (Vec<Instr>, HashMap<String, usize>, Vec<usize>) {
    let mut instrs = Vec::new();
    let mut labels = HashMap::new();
    let mut callees = Vec::new();
    for line in &function.lines {
        let trimmed = line.trim();
        if trimmed.starts_with('$') && trimmed.ends_with(':') {
            callees.push(instrs.len());
            continue;
        }
        if let Some(label) = trimmed.strip_suffix(':')
            && !label.contains(char::is_whitespace)
            && !trimmed.starts_with("/*")
        {
            labels.insert(label.to_owned(), instrs.len());
            continue;
        }
        let Some(rest) = trimmed.strip_prefix("/*") else {
            continue;
        };
        let Some((offset, rest)) = rest.split_once("*/") else {
            continue;
        };
        if offset.is_empty() || !offset.chars().all(|c| c.is_ascii_hexdigit()) {
            continue;
        }
        let rest = rest.trim().trim_end_matches(';').trim();
        let mut parts = rest.splitn(2, char::is_whitespace);
        let mut opcode = parts.next().unwrap_or_default();
        let mut tail = parts.next().unwrap_or_default().trim();
        let mut guarded = false;
        if let Some(guard) = opcode.strip_prefix('@') {
            guarded = guard != "PT";
            let mut parts = tail.splitn(2, char::is_whitespace);
            opcode = parts.next().unwrap_or_default();
            tail = parts.next().unwrap_or_default().trim();
        }
        if opcode.is_empty() || opcode.starts_with("/*") {
            continue;
        }
        instrs.push(Instr {
            offset: u64::from_str_radix(offset, 16).ok(),
            guarded,
            opcode: opcode.to_owned(),
            operands: tail.to_owned(),
        });
    }
    (instrs, labels, callees)
}

fn flows(instrs: &[Instr], labels: &HashMap<String, usize>) -> Vec<Flow> {
    let by_offset: HashMap<u64, usize> = instrs
        .iter()
        .enumerate()
        .filter_map(|(i, ins)| Some((ins.offset?, i)))
        .collect();
    let resolve = |ins: &Instr| match target_of(&ins.operands)? {
        Target::Label(l) => labels.get(l).copied(),
        Target::Address(a) => by_offset.get(&a).copied(),
    };
    instrs
        .iter()
        .map(|ins| match ins.base() {
            "BRA" | "JMP" => match resolve(ins) {
                Some(target) => Flow::Branch {
                    target,
                    // `@P0 BRA`, `BRA P2, …`, `BRA.DIV UR4, …`: may fall through.
                    conditional: ins.guarded || ins.operands.contains(','),
                },
                None => Flow::Indirect,
            },
            "BRX" | "JMX" => Flow::Indirect,
            // sm_80 code jumps out of a loop with `@!P5 CALL.REL.NOINC
            // `(.L_x_27)`: a call of a label of the function itself, which
            // does not return (NOINC), is a branch.
            "CALL" if resolve(ins).is_some() => Flow::Branch {
                target: resolve(ins).unwrap_or_default(),
                conditional: ins.guarded,
            },
            "EXIT" | "RET" => Flow::End {
                guarded: ins.guarded,
            },
            "BPT" | "KILL" => Flow::Dead {
                guarded: ins.guarded,
            },
            "CALL" if is_panic_function(&ins.operands) => Flow::Dead {
                guarded: ins.guarded,
            },
            _ => Flow::Next,
        })
        .collect()
}

/// The control-flow graph: blocks as instruction ranges, with successors.
struct Cfg {
    /// `[start, end)` of each block.
    ranges: Vec<(usize, usize)>,
    succs: Vec<Vec<usize>>,
    /// Whether the block ends a path normally (`EXIT`/`RET`).
    ends: Vec<bool>,
}

fn build_cfg(
    instrs: &[Instr],
    flows: &[Flow],
    labels: &HashMap<String, usize>,
    callees: &[usize],
) -> Cfg {
    let n = instrs.len();
    let mut leader = vec![false; n + 1];
    leader[0] = true;
    for &at in labels.values().chain(callees) {
        leader[at.min(n)] = true;
    }
    for (i, flow) in flows.iter().enumerate() {
        if let Flow::Branch { target, .. } = flow {
            leader[*target] = true;
        }
        if *flow != Flow::Next {
            leader[i + 1] = true;
        }
    }
    let starts: Vec<usize> = (0..n).filter(|&i| leader[i]).collect();
    let mut block_of = vec![0; n];
    let mut ranges = Vec::with_capacity(starts.len());
    for (b, &s) in starts.iter().enumerate() {
        let e = starts.get(b + 1).copied().unwrap_or(n);
        block_of[s..e].fill(b);
        ranges.push((s, e));
    }
    let mut succs = Vec::with_capacity(ranges.len());
    let mut ends = Vec::with_capacity(ranges.len());
    for (b, &(_, e)) in ranges.iter().enumerate() {
        let last = e - 1;
        // No falling through into a callee.
        let next = (b + 1 < ranges.len() && !callees.contains(&e)).then_some(b + 1);
        let mut s = Vec::new();
        let mut end = false;
        match flows[last] {
            Flow::Next => s.extend(next),
            Flow::Branch {
                target,
                conditional,
            } => {
                s.push(block_of[target]);
                if conditional {
                    s.extend(next);
                }
            }
            Flow::End { guarded } => {
                end = true;
                if guarded {
                    s.extend(next);
                }
            }
            Flow::Dead { guarded } => {
                if guarded {
                    s.extend(next);
                }
            }
            Flow::Indirect => end = true,
        }
        s.dedup();
        succs.push(s);
        ends.push(end);
    }
    Cfg {
        ranges,
        succs,
        ends,
    }
}

/// Immediate dominators (Cooper, Harvey, Kennedy), `None` for unreachable blocks.
fn dominators(cfg: &Cfg) -> Vec<Option<usize>> {
    let n = cfg.ranges.len();
    // Reverse postorder from block 0, iteratively.
    let mut order = Vec::with_capacity(n);
    let mut seen = vec![false; n];
    let mut stack = vec![(0usize, 0usize)];
    seen[0] = true;
    while let Some((b, i)) = stack.pop() {
        if let Some(&s) = cfg.succs[b].get(i) {
            stack.push((b, i + 1));
            if !seen[s] {
                seen[s] = true;
                stack.push((s, 0));
            }
        } else {
            order.push(b);
        }
    }
    order.reverse();
    let mut rpo = vec![usize::MAX; n];
    for (i, &b) in order.iter().enumerate() {
        rpo[b] = i;
    }
    let mut preds = vec![Vec::new(); n];
    for (b, ss) in cfg.succs.iter().enumerate() {
        for &s in ss {
            preds[s].push(b);
        }
    }
    let mut idom: Vec<Option<usize>> = vec![None; n];
    idom[0] = Some(0);
    let intersect = |idom: &[Option<usize>], mut a: usize, mut b: usize| {
        while a != b {
            while rpo[a] > rpo[b] {
                a = idom[a].expect("processed");
            }
            while rpo[b] > rpo[a] {
                b = idom[b].expect("processed");
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &b in order.iter().skip(1) {
            let mut new = None;
            for &p in &preds[b] {
                if idom[p].is_some() {
                    new = Some(match new {
                        None => p,
                        Some(cur) => intersect(&idom, p, cur),
                    });
                }
            }
            if new.is_some() && idom[b] != new {
                idom[b] = new;
                changed = true;
            }
        }
    }
    idom
}

fn dominates(idom: &[Option<usize>], a: usize, mut b: usize) -> bool {
    loop {
        if a == b {
            return true;
        }
        match idom[b] {
            Some(p) if p != b => b = p,
            _ => return false,
        }
    }
}

/// Natural loops, one per header (back edges to one header merged): each a
/// membership mask over blocks.
fn natural_loops(cfg: &Cfg, idom: &[Option<usize>]) -> Vec<Vec<bool>> {
    let n = cfg.ranges.len();
    let mut preds = vec![Vec::new(); n];
    for (b, ss) in cfg.succs.iter().enumerate() {
        for &s in ss {
            preds[s].push(b);
        }
    }
    let mut by_header: Vec<(usize, Vec<bool>)> = Vec::new();
    for (u, ss) in cfg.succs.iter().enumerate() {
        if idom[u].is_none() {
            continue;
        }
        for &h in ss {
            if !dominates(idom, h, u) {
                continue;
            }
            let at = match by_header.iter().position(|(hh, _)| *hh == h) {
                Some(at) => at,
                None => {
                    let mut body = vec![false; n];
                    body[h] = true;
                    by_header.push((h, body));
                    by_header.len() - 1
                }
            };
            let body = &mut by_header[at].1;
            let mut stack = vec![u];
            while let Some(x) = stack.pop() {
                if body[x] {
                    continue;
                }
                body[x] = true;
                stack.extend(preds[x].iter().copied());
            }
        }
    }
    by_header.into_iter().map(|(_, body)| body).collect()
}

/// Blocks from which a normal end (`EXIT`/`RET`) can be reached.
fn can_end(cfg: &Cfg) -> Vec<bool> {
    let n = cfg.ranges.len();
    let mut preds = vec![Vec::new(); n];
    for (b, ss) in cfg.succs.iter().enumerate() {
        for &s in ss {
            preds[s].push(b);
        }
    }
    let mut reach = vec![false; n];
    let mut stack: Vec<usize> = (0..n).filter(|&b| cfg.ends[b]).collect();
    while let Some(b) = stack.pop() {
        if reach[b] {
            continue;
        }
        reach[b] = true;
        stack.extend(preds[b].iter().copied());
    }
    reach
}

fn figures(
    body: &[bool],
    cfg: &Cfg,
    instrs: &[Instr],
    flow: &[Flow],
    op: Op,
    ends: &[bool],
) -> LoopFigures {
    let mut mix: HashMap<&str, usize> = HashMap::new();
    let (mut instructions, mut calls, mut warpsyncs, mut bssy) = (0, 0, 0, 0);
    let mut dead_targets = Vec::new();
    for (b, _) in body.iter().enumerate().filter(|(_, inside)| **inside) {
        let (s, e) = cfg.ranges[b];
        for (ins, flow) in instrs[s..e].iter().zip(&flow[s..e]) {
            instructions += 1;
            *mix.entry(ins.base()).or_default() += 1;
            match ins.base() {
                "CALL" if *flow == Flow::Next => calls += 1,
                "WARPSYNC" => warpsyncs += 1,
                "BSSY" | "BSYNC" => bssy += 1,
                _ => {}
            }
        }
        for &t in &cfg.succs[b] {
            if !body[t] && !ends[t] && !dead_targets.contains(&t) {
                dead_targets.push(t);
            }
        }
        // A panic call or trap inside the loop's own blocks (a guarded one
        // falls through and stays in the loop) is a panic path too.
        let last = &instrs[e - 1];
        let dead_end = matches!(last.base(), "BPT" | "KILL")
            || (last.base() == "CALL" && is_panic_function(&last.operands));
        if last.guarded && dead_end {
            dead_targets.push(usize::MAX - b);
        }
    }
    let ops = mix.get(op.name()).copied().unwrap_or(0);
    let mut mix: Vec<(String, usize)> = mix.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    mix.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    LoopFigures {
        instructions,
        ops,
        mix,
        calls,
        panic_paths: dead_targets.len(),
        warpsyncs,
        bssy,
    }
}

/// The loop report of `function` (a kernel's SASS), or `None` when no loop
/// holds an `HGMMA` (or, without any in the kernel, an `HMMA`; without
/// either, a `DMMA`; without any of them, an `FFMA`).
pub fn analyze(function: &SassFunction) -> Option<LoopReport> {
    let (instrs, labels, callees) = parse(function);
    if instrs.is_empty() {
        return None;
    }
    let has = |op: &str| instrs.iter().any(|i| i.base() == op);
    let op = if has("HGMMA") {
        Op::Hgmma
    } else if has("HMMA") {
        Op::Hmma
    } else if has("DMMA") {
        Op::Dmma
    } else {
        Op::Ffma
    };
    let flow = flows(&instrs, &labels);
    let cfg = build_cfg(&instrs, &flow, &labels, &callees);
    let idom = dominators(&cfg);
    let loops = natural_loops(&cfg, &idom);
    let ends = can_end(&cfg);
    let count_ops = |body: &[bool]| -> usize {
        body.iter()
            .enumerate()
            .filter(|(_, inside)| **inside)
            .map(|(b, _)| {
                let (s, e) = cfg.ranges[b];
                instrs[s..e]
                    .iter()
                    .filter(|i| i.base() == op.name())
                    .count()
            })
            .sum()
    };
    let size = |body: &[bool]| body.iter().filter(|x| **x).count();
    let subset = |a: &[bool], b: &[bool]| a.iter().zip(b).all(|(x, y)| !*x || *y);
    let holding: Vec<(usize, usize)> = loops
        .iter()
        .enumerate()
        .map(|(i, body)| (i, count_ops(body)))
        .filter(|(_, ops)| *ops > 0)
        .collect();
    // A loop's own ops: those in no smaller loop holding `op` inside it.
    // The loop reported is the one with the most of its own: an innermost
    // loop whose body is all the ops (a GEMM's k-slice loop), or a loop that
    // holds its ops in straight-line code beside a rarely taken inner loop
    // (a stencil's fast path beside its generic one).
    let inside = |j: usize, i: usize| {
        j != i && subset(&loops[j], &loops[i]) && size(&loops[j]) < size(&loops[i])
    };
    let own_ops: Vec<(usize, usize)> = holding
        .iter()
        .map(|&(i, _)| {
            let mut own = loops[i].clone();
            for &(j, _) in &holding {
                if inside(j, i) {
                    for (b, x) in own.iter_mut().enumerate() {
                        *x &= !loops[j][b];
                    }
                }
            }
            (i, count_ops(&own))
        })
        .collect();
    let max_ops = own_ops.iter().map(|(_, ops)| *ops).max()?;
    let richest: Vec<usize> = own_ops
        .iter()
        .filter(|(_, ops)| *ops == max_ops)
        .map(|(i, _)| *i)
        .collect();
    let nest = |inner: usize| {
        let outer = loops
            .iter()
            .enumerate()
            .filter(|(j, body)| {
                *j != inner && subset(&loops[inner], body) && size(body) > size(&loops[inner])
            })
            .min_by_key(|(_, body)| size(body))
            .map(|(j, _)| j);
        (
            figures(&loops[inner], &cfg, &instrs, &flow, op, &ends),
            outer.map(|j| figures(&loops[j], &cfg, &instrs, &flow, op, &ends)),
            first_block(&loops[inner]),
        )
    };
    let nests: Vec<(LoopFigures, Option<LoopFigures>, usize)> =
        richest.iter().map(|&i| nest(i)).collect();
    let others = holding
        .iter()
        .filter(|(i, _)| !holding.iter().any(|(j, _)| inside(*j, *i)))
        .count()
        .saturating_sub(1);
    // Of the nests whose loop holds the most ops of its own, the leanest
    // k-loop (a kernel with a proven interior path and a guarded edge path
    // has a loop nest for each; the budget is the main path's), then the first.
    let k_per_op =
        |n: &(LoopFigures, Option<LoopFigures>, usize)| n.1.as_ref().unwrap_or(&n.0).per_op();
    let (inner, outer, _) = nests.into_iter().min_by(|a, b| {
        k_per_op(a)
            .total_cmp(&k_per_op(b))
            .then_with(|| a.2.cmp(&b.2))
    })?;
    Some(LoopReport {
        op,
        inner,
        outer,
        others,
    })
}

fn first_block(body: &[bool]) -> usize {
    body.iter().position(|x| *x).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sass::split_functions;

    fn report(body: &str) -> Option<LoopReport> {
        let text = format!("//----- .text.k -----\nk:\n.text.k:\n{body}");
        analyze(&split_functions(&text)[0])
    }

    /// A k-tile loop (`.L_x_1`) with an inner ldmatrix → mma loop
    /// (`.L_x_2`), a bounds check in the k-loop branching to a panic call
    /// (laid out after the loop, falling through into unrelated code as
    /// ptxas lays it out), a BSSY/BSYNC pair and a WARPSYNC, and a callee
    /// printed in the same section (not part of the kernel).
    const NESTED: &str = "\
        /*0000*/                   MOV R0, RZ ;
.L_x_1:
        /*0010*/                   ISETP.GE.U32.AND P1, PT, R3, R9, PT ;
        /*0020*/               @P1 BRA `(.L_x_9) ;
        /*0030*/                   BSSY B0, `(.L_x_3) ;
        /*0040*/                   LDGSTS.E.BYPASS.128 [R5], desc[UR4][R6.64] ;
        /*0050*/                   BSYNC B0 ;
.L_x_3:
        /*0060*/                   MOV R1, RZ ;
.L_x_2:
        /*0070*/                   WARPSYNC.ALL ;
        /*0080*/                   LDSM.16.M88.4 R12, [R4] ;
        /*0090*/                   HMMA.16816.F32 R16, R12, R20, R16 ;
        /*00a0*/                   HMMA.16816.F32 R24, R12, R22, R24 ;
        /*00b0*/                   IADD3 R1, R1, 0x1, RZ ;
        /*00c0*/                   ISETP.NE.AND P0, PT, R1, 0x2, PT ;
        /*00d0*/               @P0 BRA `(.L_x_2) ;
        /*00e0*/                   IADD3 R0, R0, 0x1, RZ ;
        /*00f0*/                   ISETP.NE.AND P0, PT, R0, R8, PT ;
        /*0100*/               @P0 BRA `(.L_x_1) ;
        /*0110*/                   EXIT ;
.L_x_9:
        /*0120*/                   MOV R4, 0x140 ;
        /*0130*/                   CALL.REL.NOINC `($k$_RNvNtCs1_4core9panicking9panic_fmt) ;
.L_x_10:
        /*0140*/                   BRA `(.L_x_10);
$k$_RNvNtCs1_4core9panicking9panic_fmt:
        /*0150*/                   HMMA.16816.F32 R16, R12, R20, R16 ;
.L_x_11:
        /*0160*/               @P3 BRA `(.L_x_11) ;
        /*0170*/                   RET.REL.NODEC R4 `(k) ;
";

    #[test]
    fn finds_the_innermost_hmma_loop_and_the_k_loop_around_it() {
        let r = report(NESTED).unwrap();
        assert_eq!(r.op, Op::Hmma);
        // .L_x_2 .. the @P0 BRA: WARPSYNC, LDSM, 2 HMMA, IADD3, ISETP, BRA.
        assert_eq!(r.inner.instructions, 7);
        assert_eq!(r.inner.ops, 2);
        assert_eq!(r.inner.per_op(), 3.5);
        assert_eq!(r.inner.warpsyncs, 1);
        assert_eq!(
            (r.inner.calls, r.inner.panic_paths, r.inner.bssy),
            (0, 0, 0)
        );
        assert_eq!(
            r.inner.mix[..2],
            [("HMMA".to_owned(), 2), ("BRA".to_owned(), 1)]
        );
        let k = r.outer.as_ref().unwrap();
        // 0x10 .. 0x100 without the exit: 16 instructions, the callee's HMMA
        // (and its loop) not counted.
        assert_eq!((k.instructions, k.ops), (16, 2));
        assert_eq!(k.per_op(), 8.0);
        assert_eq!(k.panic_paths, 1);
        assert_eq!(k.bssy, 2);
        assert_eq!(k.warpsyncs, 1);
        assert_eq!(r.k_loop(), k);
        assert!(
            r.summary()
                .contains("enclosing (k-tile) loop: 16 instrs / 2 HMMA = 8.00")
        );
    }

    /// A loop whose ops are straight-line code beside a rarely taken inner
    /// loop holding one op (a stencil's fast path and its generic path): the
    /// report is the outer loop, which holds the most ops of its own, not
    /// the inner loop, which is innermost.
    #[test]
    fn reports_the_loop_with_the_most_ops_of_its_own() {
        let text = "\t\tFunction : k\n\
        /*0000*/                   MOV R0, RZ ;\n\
        /*0010*/               @P1 BRA 0x60 ;\n\
        /*0020*/                   FFMA R1, R2, R3, R1 ;\n\
        /*0030*/                   FFMA R4, R2, R3, R4 ;\n\
        /*0040*/                   FFMA R5, R2, R3, R5 ;\n\
        /*0050*/                   BRA 0x90 ;\n\
        /*0060*/                   FFMA R6, R2, R3, R6 ;\n\
        /*0070*/                   ISETP.NE.AND P2, PT, R6, R8, PT ;\n\
        /*0080*/               @P2 BRA 0x60 ;\n\
        /*0090*/                   ISETP.NE.AND P0, PT, R0, R8, PT ;\n\
        /*00a0*/               @P0 BRA 0x10 ;\n\
        /*00b0*/                   EXIT ;\n";
        let r = analyze(&split_functions(text)[0]).unwrap();
        assert_eq!(r.op, Op::Ffma);
        // 0x10 .. 0xa0: ten instructions, all four FFMA.
        assert_eq!((r.inner.instructions, r.inner.ops), (10, 4));
        assert!(r.outer.is_none());
        assert_eq!(r.others, 0);
    }

    /// An f64 tensor-core loop counts per `DMMA` (the FFMA outside it does
    /// not make it an FFMA report).
    #[test]
    fn counts_per_dmma() {
        let text = "//----- .text.k -----\n\
        /*0000*/                   FFMA R1, R2, R3, R1 ;\n\
        .L_x_0:\n\
        /*0010*/                   LDS.64 R4, [R0] ;\n\
        /*0020*/                   DMMA.884 R8, R4, R6, R8 ;\n\
        /*0030*/                   DMMA.884 R12, R4, R6, R12 ;\n\
        /*0040*/                   ISETP.NE.AND P0, PT, R0, R8, PT ;\n\
        /*0050*/               @P0 BRA `(.L_x_0) ;\n\
        /*0060*/                   EXIT ;\n";
        let r = analyze(&split_functions(text)[0]).unwrap();
        assert_eq!(r.op, Op::Dmma);
        assert_eq!((r.inner.instructions, r.inner.ops), (5, 2));
        assert_eq!(r.inner.per_op(), 2.5);
    }

    /// The same loops in cuobjdump's form: branch targets as addresses, no labels.
    #[test]
    fn reads_cuobjdump_addresses() {
        let text = "\t\tFunction : k\n\
        /*0000*/                   MOV R0, RZ ;\n\
        /*0010*/                   FFMA R1, R2, R3, R1 ;\n\
        /*0020*/                   FFMA R4, R2, R3, R4 ;\n\
        /*0030*/                   ISETP.NE.AND P0, PT, R0, R8, PT ;\n\
        /*0040*/               @P0 BRA 0x10 ;\n\
        /*0050*/                   EXIT ;\n";
        let r = analyze(&split_functions(text)[0]).unwrap();
        assert_eq!(r.op, Op::Ffma);
        assert_eq!((r.inner.instructions, r.inner.ops), (4, 2));
        assert!(r.outer.is_none());
        assert_eq!(r.k_loop(), &r.inner);
    }

    /// A loop whose body returns to its header through an out-of-line block
    /// laid out after the function's exit and after a callee (as ptxas lays
    /// out sm_80 code): the block belongs to the loop; a forward-only region
    /// (a panic call) does not, nor does the callee.
    #[test]
    fn out_of_line_blocks_that_return_belong_to_the_loop() {
        let r = report(
            "\
        /*0000*/                   MOV R0, RZ ;
.L_x_1:
        /*0010*/                   HMMA.16816.F32 R16, R12, R20, R16 ;
        /*0020*/               @P2 CALL.REL.NOINC `($k$_RNvNtCs1_4core6option13expect_failed) ;
        /*0030*/               @P1 BRA `(.L_x_5) ;
.L_x_4:
        /*0040*/                   ISETP.NE.AND P0, PT, R0, R8, PT ;
        /*0050*/               @P0 BRA `(.L_x_1) ;
        /*0060*/                   EXIT ;
$k$_RNvNtCs1_4core9panicking9panic_fmt:
        /*0062*/                   NOP ;
        /*0064*/                   RET.REL.NODEC R4 `(k) ;
.L_x_5:
        /*0070*/                   LDS R3, [R4] ;
        /*0080*/                   CALL.REL.NOINC `(helper) ;
        /*0090*/                   BRA `(.L_x_4) ;
",
        )
        .unwrap();
        // HMMA, CALL, BRA, ISETP, BRA, and the out-of-line LDS, CALL, BRA.
        assert_eq!(r.inner.instructions, 8);
        assert_eq!(r.inner.calls, 1);
        // The guarded panic call.
        assert_eq!(r.inner.panic_paths, 1);
    }

    /// sm_80's loop exit by `CALL.REL.NOINC` of a label of the kernel itself:
    /// a branch, not a call; the code after it is reachable and the loop
    /// around it is found.
    #[test]
    fn a_call_of_a_local_label_is_a_branch() {
        let r = report(
            "\
        /*0000*/                   MOV R0, RZ ;
.L_x_28:
        /*0010*/                   HMMA.16816.F32 R16, R12, R20, R16 ;
        /*0020*/                   ISETP.NE.AND P5, PT, R0, R8, PT ;
        /*0030*/              @!P5 CALL.REL.NOINC `(.L_x_27) ;
        /*0040*/                   BRA `(.L_x_28) ;
.L_x_27:
        /*0050*/                   HMMA.16816.F32 R16, R12, R20, R16 ;
        /*0060*/                   EXIT ;
",
        )
        .unwrap();
        assert_eq!(
            (r.inner.instructions, r.inner.ops, r.inner.calls),
            (4, 1, 0)
        );
        assert_eq!(r.inner.panic_paths, 0);
    }

    #[test]
    fn no_loop_no_report() {
        assert!(
            report(
                "        /*0000*/ HMMA.16816.F32 R16, R12, R20, R16 ;\n        /*0010*/ EXIT ;\n"
            )
            .is_none()
        );
        assert!(report("        /*0000*/ EXIT ;\n").is_none());
    }

    /// Two k-loops with the same HMMAs (an interior and a guarded path): the
    /// report is the leaner one's, and counts the other.
    #[test]
    fn of_two_loop_nests_with_as_many_hmma_the_leaner() {
        let r = report(
            "\
        /*0000*/               @P1 BRA `(.L_x_2) ;
.L_x_1:
        /*0010*/                   HMMA.16816.F32 R16, R12, R20, R16 ;
        /*0020*/                   IMAD R1, R1, R2, R3 ;
        /*0030*/                   IMAD R1, R1, R2, R3 ;
        /*0040*/               @P0 BRA `(.L_x_1) ;
        /*0050*/                   EXIT ;
.L_x_2:
        /*0060*/                   HMMA.16816.F32 R16, R12, R20, R16 ;
        /*0070*/               @P0 BRA `(.L_x_2) ;
        /*0080*/                   EXIT ;
",
        )
        .unwrap();
        assert_eq!((r.inner.instructions, r.inner.ops, r.others), (2, 1, 1));
        assert!(r.summary().contains("1 other innermost HMMA loop"));
    }

    #[test]
    fn of_two_innermost_loops_the_one_with_more_hmma() {
        let r = report(
            "\
.L_x_1:
        /*0000*/                   HMMA.16816.F32 R16, R12, R20, R16 ;
        /*0010*/               @P0 BRA `(.L_x_1) ;
.L_x_2:
        /*0020*/                   HMMA.16816.F32 R16, R12, R20, R16 ;
        /*0030*/                   HMMA.16816.F32 R16, R12, R20, R16 ;
        /*0040*/                   NOP ;
        /*0050*/               @P0 BRA `(.L_x_2) ;
        /*0060*/                   EXIT ;
",
        )
        .unwrap();
        assert_eq!((r.inner.instructions, r.inner.ops, r.others), (4, 2, 1));
    }
}
