//! `wgmma.mma_async` as the emulator performs it (docs/hopper/ptx-semantics.md §3).
//!
//! The instruction is `.sync` per warp and `.aligned` per warpgroup: each
//! warp's 32 lanes meet (a warp collective), and the 4 warps of the
//! warpgroup must issue the same sequence of instructions, in any
//! interleaving. Warp `w` of the warpgroup computes rows `16w .. 16w + 16`
//! of the 64 × N result from those rows of A and all of B, so the emulator
//! completes each warp's instruction when its lanes meet:
//!
//! - the descriptors are decoded exactly (start, leading and stride byte
//!   offsets, swizzle; the canonical K- and MN-major layouts of the ISA),
//!   and every 16-byte chunk they address is checked: inside the block's
//!   shared memory, no copy pending there, no live mbarrier, no race (the
//!   warp's chunks are shared out among its lanes, each read as that lane);
//! - the result is computed in f64 from the exact products and rounded once
//!   to f32 (a NaN is the canonical one), as `mma.sync` is (tf32 inputs:
//!   each f32 with its low 13 fraction bits cleared, which the hardware
//!   ignores; k = 8 per instruction), and written
//!   into each lane's accumulator at once (the Rust API keeps the
//!   registers borrowed until the final wait, so nothing sees them early);
//! - each lane keeps its chunks' bytes as read: a `wait_group` that
//!   retires the group compares them (a changed byte is
//!   [`WgmmaProblem::OperandChanged`]: the GPU reads operands at any time
//!   until then) and reads them again for the race detector, at the wait
//!   (a refill ordered only by an arrive before the wait races with it);
//!   the warp's wait then orders its lanes' reads before any lane's later
//!   accesses (the lanes' clocks are joined: the reads completed for the
//!   whole warp).
//!
//! The warpgroup's agreement is checked as each warp issues (the n-th
//! instruction of every warp must be the same line with the same operands)
//! and when the block ends (every warp issued as many).

use super::fiber::{Site, ThreadState};
use super::scheduler::EmulatedThread;
use super::{Fault, WgmmaProblem};
use crate::swizzle::Swizzle;
use crate::wgmma::Input;
use std::collections::VecDeque;

const LANES: usize = 32;

/// What each lane brings to a `wgmma.mma_async` (on its fiber's stack
/// while it waits in the collective).
pub(crate) struct Issue {
    /// A's descriptor, or (`Err`) this lane's A fragment: the warp's 16 rows
    /// of the k16 slice in the `mma.m16n8k16` A layout.
    pub a: Result<u64, [u32; 4]>,
    pub b: u64,
    /// Columns of the accumulator (N).
    pub n: u32,
    pub input: Input,
    pub tnsp_a: bool,
    pub tnsp_b: bool,
    /// The lane's `N / 2` accumulator registers.
    pub acc: *mut f32,
}

impl Issue {
    fn signature(&self, site: Site) -> Signature {
        Signature {
            site,
            op: Op::Mma {
                // Each lane holds its own fragment: only its presence must agree.
                a: self.a.ok(),
                b: self.b,
                n: self.n,
                input: self.input,
                tnsp: (self.tnsp_a, self.tnsp_b),
            },
        }
    }
}

/// An instruction as the warpgroup's agreement sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Signature {
    site: Site,
    op: Op,
}

/// The warpgroup instructions whose sequence its warps must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Mma {
        /// A's descriptor; `None`: A from registers.
        a: Option<u64>,
        b: u64,
        n: u32,
        input: Input,
        tnsp: (bool, bool),
    },
    SetMaxNreg {
        increase: bool,
        regs: u32,
    },
}

/// 16 shared bytes that a lane's share of an in-flight `wgmma` read, with
/// their value at issue.
pub(crate) struct OperandRead {
    /// The lane's commit count at issue: the group it belongs to.
    group: u32,
    offset: usize,
    data: [u8; 16],
    site: Site,
}

/// The `wgmma`s the warps of one warpgroup issued, for the agreement check.
#[derive(Default)]
pub(crate) struct WarpgroupLog {
    /// Instructions each warp issued.
    issued: [u32; 4],
    /// `sigs[i]` is instruction `first + i` as the warp that issued it first did.
    first: u32,
    sigs: VecDeque<(u32, Signature)>,
}

/// A decoded shared-memory matrix descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decoded {
    pub start: usize,
    pub leading: usize,
    pub stride: usize,
    pub swizzle: Swizzle,
}

/// The descriptor's fields, or what is wrong with it.
pub(crate) fn decode(bits: u64) -> Result<Decoded, &'static str> {
    const RESERVED: u64 = 0b11 << 14 | 0b11 << 30 | 0b111 << 46 | 0x3ff << 52;
    if bits & RESERVED != 0 {
        return Err("reserved bits (14-15, 30-31, 46-48, 52-61) are set");
    }
    if (bits >> 49) & 7 != 0 {
        return Err(
            "a non-zero base offset: the emulator models operands that start on their \
                    swizzle's period, as an OperandTile does",
        );
    }
    let field = |at: u32| ((bits >> at) & 0x3fff) as usize * 16;
    Ok(Decoded {
        start: field(0),
        leading: field(16),
        stride: field(32),
        swizzle: Swizzle::from_descriptor_code(bits >> 62),
    })
}

/// The shared offset of element `(mn, k)` (`size`-byte elements, `k` <
/// 32 / `size`) of the k-slice that `d` describes, K-major or
/// (`mn_major`) MN-major: the ISA's canonical layouts (T = 16 / `size`
/// elements to a 16-byte chunk, W = span / 16):
///
/// | layout | (mn, k) ↦ byte, before the swizzle |
/// |---|---|
/// | K-major, none | (mn/8)·SBO + (mn%8)·16 + (k/T)·LBO + (k%T)·size |
/// | K-major, swizzled | (mn/8)·SBO + (mn%8)·span + size·k |
/// | MN-major, none | (mn/T)·SBO + size·(mn%T) + (k/8)·LBO + (k%8)·16 |
/// | MN-major, swizzled | (mn/(W·T))·LBO + size·(mn%(W·T)) + (k/8)·SBO + (k%8)·span |
///
/// then the swizzle of the address itself.
pub(crate) fn element_offset(
    d: &Decoded,
    mn_major: bool,
    size: usize,
    mn: usize,
    k: usize,
) -> usize {
    let (lbo, sbo) = (d.leading, d.stride);
    let t = 16 / size;
    let logical = d.start
        + match (mn_major, d.swizzle.span()) {
            (false, None) => (mn / 8) * sbo + (mn % 8) * 16 + (k / t) * lbo + (k % t) * size,
            (false, Some(span)) => (mn / 8) * sbo + (mn % 8) * span + size * k,
            (true, None) => (mn / t) * sbo + size * (mn % t) + (k / 8) * lbo + (k % 8) * 16,
            (true, Some(span)) => {
                let atom = span / size;
                (mn / atom) * lbo + size * (mn % atom) + (k / 8) * sbo + (k % 8) * span
            }
        };
    d.swizzle.apply(logical)
}

/// The 16-byte chunks of rows `rows` × the 32 bytes of K of an operand of
/// `size`-byte elements: K-major, a chunk is 16 bytes of K of one row;
/// MN-major, 16 bytes of rows of one k. Each is contiguous.
fn chunks(d: &Decoded, mn_major: bool, size: usize, rows: core::ops::Range<usize>) -> Vec<usize> {
    let (t, k) = (16 / size, 32 / size);
    if mn_major {
        rows.step_by(t)
            .flat_map(|mn| (0..k).map(move |k| element_offset(d, true, size, mn, k)))
            .collect()
    } else {
        rows.flat_map(|mn| [0, t].map(|k| element_offset(d, false, size, mn, k)))
            .collect()
    }
}

/// Completes a full warp's `wgmma.mma_async`, each lane's [`Issue`] at
/// `values[lane]`. An error names the lane (index into `warp`) at fault.
pub(super) fn issue(warp: &[EmulatedThread], values: &[u64; LANES]) -> Result<(), (usize, Fault)> {
    // SAFETY: each lane waits in the collective with `value` pointing at its
    // `Issue`, on its suspended fiber's stack (`arch::wgmma_mma_async`).
    let issues: [&Issue; LANES] =
        core::array::from_fn(|l| unsafe { &*(values[l] as *const Issue) });
    let t0 = &warp[0].state;
    let site = site_of(t0);
    let at = site.into();
    let fault = |problem| Fault::Wgmma {
        problem,
        at,
        other_at: None,
    };
    let lead = issues[0].signature(site);
    if let Some(lane) = (1..LANES).find(|&l| issues[l].signature(site_of(&warp[l].state)) != lead) {
        return Err((
            lane,
            fault(WgmmaProblem::LanesDisagree { lane: lane as u32 }),
        ));
    }
    warpgroup_agrees(t0, lead)?;
    let w = (t0.linear_id / 32 % 4) as usize;

    let lead = issues[0];
    let decoded = |bits: u64, operand: char| {
        decode(bits).map_err(|reason| {
            (
                0,
                fault(WgmmaProblem::Descriptor {
                    operand,
                    bits,
                    reason,
                }),
            )
        })
    };
    let n = lead.n as usize;
    let da = match lead.a {
        Ok(bits) => Some(decoded(bits, 'A')?),
        Err(_) => None,
    };
    let db = decoded(lead.b, 'B')?;
    let size = if lead.input == Input::Tf32 { 4 } else { 2 };
    if size == 4 && (lead.tnsp_a || lead.tnsp_b) {
        return Err((
            0,
            fault(WgmmaProblem::Descriptor {
                operand: if lead.tnsp_a { 'A' } else { 'B' },
                bits: if lead.tnsp_a {
                    lead.a.unwrap_or(0)
                } else {
                    lead.b
                },
                reason: "a transposed tf32 operand (the instruction transposes only 16-bit types)",
            }),
        ));
    }
    // k per instruction: 32 bytes of K.
    let kk = 32 / size;
    let a_reads = da.map_or_else(Vec::new, |da| {
        chunks(&da, lead.tnsp_a, size, 16 * w..16 * w + 16)
    });
    let b_reads = chunks(&db, lead.tnsp_b, size, 0..n);
    let shared_len = t0.shared_len;
    for (operand, bits, reads) in [
        ('A', lead.a.unwrap_or(0), &a_reads),
        ('B', lead.b, &b_reads),
    ] {
        if reads
            .iter()
            .any(|&o| !o.is_multiple_of(16) || o + 16 > shared_len)
        {
            return Err((
                0,
                fault(WgmmaProblem::Descriptor {
                    operand,
                    bits,
                    reason: "it addresses bytes outside the block's shared memory (or off a \
                             16-byte boundary)",
                }),
            ));
        }
    }
    let a_len = a_reads.len();
    let reads = [a_reads, b_reads].concat();
    let base = t0.shared_base;
    // SAFETY: every chunk read lies inside the block's shared memory (checked above).
    let bytes_at = |o: usize| unsafe { core::ptr::read(base.add(o).cast::<[u8; 16]>()) };
    for (i, &offset) in reads.iter().enumerate() {
        let lane = i % LANES;
        let t = &warp[lane].state;
        crate::arch::shared_checks(t, offset, 16, false, site).map_err(|f| (lane, f))?;
        // SAFETY: the detector lives as long as the block (see the scheduler).
        if let Some(w) = unsafe { t.race.as_ref() }.and_then(|race| race.async_read(offset, 16)) {
            return Err((
                lane,
                Fault::Wgmma {
                    problem: WgmmaProblem::UnfencedOperand {
                        operand: if i < a_len { 'A' } else { 'B' },
                        offset: w.offset,
                        writer: t.block_dim.unflatten(u64::from(w.writer)),
                    },
                    at,
                    other_at: w.writer_site.map(Into::into),
                },
            ));
        }
        t.wgmma_reads.borrow_mut().push(OperandRead {
            group: t.wgmma_groups.get(),
            offset,
            data: bytes_at(offset),
            site,
        });
    }

    let value16 = |bits: u16| {
        if lead.input == Input::Bf16 {
            f64::from(f32::from_bits(u32::from(bits) << 16))
        } else {
            half::f16::from_bits(bits).to_f64()
        }
    };
    // SAFETY: inside a chunk checked above (chunks are 16-byte aligned, so
    // is every element in them). tf32: the 19 bits the hardware reads.
    let at = |offset: usize| unsafe {
        if size == 4 {
            f64::from(f32::from_bits(
                base.add(offset).cast::<u32>().read_unaligned() & !0x1fff,
            ))
        } else {
            value16(base.add(offset).cast::<u16>().read_unaligned())
        }
    };
    let a: Vec<[f64; 16]> = match da {
        Some(da) => (0..16)
            .map(|r| {
                core::array::from_fn(|k| {
                    if k < kk {
                        at(element_offset(&da, lead.tnsp_a, size, 16 * w + r, k))
                    } else {
                        0.0
                    }
                })
            })
            .collect(),
        None => {
            // The fragments, through `mma.sync`'s A table: element i of
            // lane l is half i % 2 of register i / 2 (2-byte types only:
            // the API takes no tf32 A in registers).
            let mut a = vec![[0f64; 16]; 16];
            for (lane, issue) in issues.iter().enumerate() {
                let regs = issue.a.err().unwrap_or_default();
                for i in 0..8 {
                    let (r, k) = crate::mma::a_coord(lane as u32, i);
                    a[r][k] = value16((regs[i / 2] >> (16 * (i % 2))) as u16);
                }
            }
            a
        }
    };
    let b: Vec<[f64; 16]> = (0..n)
        .map(|c| {
            core::array::from_fn(|k| {
                if k < kk {
                    at(element_offset(&db, lead.tnsp_b, size, c, k))
                } else {
                    0.0
                }
            })
        })
        .collect();
    for (lane, issue) in issues.iter().enumerate() {
        // SAFETY: the lane's accumulator, `n / 2` registers (an `[f32; N/2]`
        // on its suspended fiber's stack, borrowed by its `InFlight`).
        let acc = unsafe { core::slice::from_raw_parts_mut(issue.acc, n / 2) };
        for (i, d) in acc.iter_mut().enumerate() {
            // Each 4 registers are the m16n8 C fragment (`mma.sync`'s
            // table) of columns 8·(i/4) .., rows of warp w's 16.
            let (row, col) = crate::mma::c_coord(lane as u32, i % 4);
            let col = 8 * (i / 4) + col;
            let dot: f64 = (0..kk).map(|k| a[row][k] * b[col][k]).sum();
            *d = crate::arch::f32_op((dot + f64::from(*d)) as f32);
        }
    }
    Ok(())
}

/// A block's registers as `setmaxnreg` moves them: each warp's per-thread
/// limit and the block's pool (PTX ISA, `setmaxnreg`: `.dec` releases
/// registers into a pool kept per CTA, `.inc` blocks until the pool holds
/// what it asks for; nothing else fills the pool).
#[derive(Default)]
pub(crate) struct RegisterPool {
    /// Per warp of the block, its limit after its last `setmaxnreg`
    /// (`None`: none yet, the limit it started with).
    limits: Vec<Option<u32>>,
    /// Registers released and not yet taken.
    free: u64,
}

/// The registers the pool could hold at most, as seen from `threads`
/// threads: a block's registers at launch are its per-thread count (ptxas's,
/// in steps of 8: a warp's allocation unit is 256) times its threads, and
/// the 64 Ki-register file bounds that count by `65536 / threads`. ptxas
/// honours `setmaxnreg` only in a kernel whose launch bounds fix that count
/// (C7508 otherwise) and picks at most the bound: 168 for the Hopper GEMM's
/// `.maxntid 384, .minnctapersm 1`, exactly it; 178 for a 256-thread probe.
/// The emulator uses the bound, so a starved `.inc` it reports starves on
/// the GPU too.
pub(super) fn entry_registers(threads: u64) -> u32 {
    let lanes = threads.div_ceil(LANES as u64).max(1) * LANES as u64;
    (65536 / lanes / 8 * 8).min(256) as u32
}

/// Completes a full warp's `setmaxnreg` (`increase`: `.inc`; `regs` the new
/// per-thread maximum) if it can: a `.dec` returns the warp's registers
/// above `regs` to the block's pool; an `.inc` takes the registers it adds
/// from the pool, and waits (`Ok(false)`: the warp stays in the
/// collective) while the pool holds fewer — a wait that nothing else ends
/// is reported as [`WgmmaProblem::RegisterPoolShort`] ([`starved`]). Once
/// it completes, the warp must be in a whole warpgroup whose warps all
/// execute the same sequence of warpgroup instructions.
pub(super) fn setmaxnreg(
    warp: &[EmulatedThread],
    increase: bool,
    regs: u32,
) -> Result<bool, (usize, Fault)> {
    let t0 = &warp[0].state;
    {
        let entry = entry_registers(t0.block_dim.volume());
        let w = t0.linear_id as usize / LANES;
        let mut pool = t0.block().registers.borrow_mut();
        if pool.limits.len() <= w {
            pool.limits.resize(w + 1, None);
        }
        let from = pool.limits[w].unwrap_or(entry);
        if increase {
            let need = u64::from(regs.saturating_sub(from)) * LANES as u64;
            if need > pool.free {
                return Ok(false);
            }
            pool.free -= need;
        } else {
            pool.free += u64::from(from.saturating_sub(regs)) * LANES as u64;
        }
        pool.limits[w] = Some(regs);
    }
    let sig = Signature {
        site: site_of(t0),
        op: Op::SetMaxNreg { increase, regs },
    };
    warpgroup_agrees(t0, sig).map(|()| true)
}

/// The fault for `warp`, waiting in a `setmaxnreg.inc` to `regs` when
/// nothing in its block can change any more: no warp will release the
/// registers it needs.
pub(super) fn starved(warp: &[EmulatedThread], regs: u32) -> Fault {
    let t0 = &warp[0].state;
    let threads = t0.block_dim.volume();
    let entry = entry_registers(threads);
    let w = t0.linear_id as usize / LANES;
    let pool = t0.block().registers.borrow();
    let from = pool.limits.get(w).copied().flatten().unwrap_or(entry);
    Fault::Wgmma {
        problem: WgmmaProblem::RegisterPoolShort {
            regs,
            from,
            pool: pool.free,
            entry,
            threads,
        },
        at: site_of(t0).into(),
        other_at: None,
    }
}

/// The checks every warpgroup instruction makes: a whole warpgroup, and
/// this warp's instruction the same as its warpgroup's others' at that
/// place in the sequence.
fn warpgroup_agrees(t0: &ThreadState, sig: Signature) -> Result<(), (usize, Fault)> {
    let at = sig.site.into();
    let warp_index = t0.linear_id / 32;
    let (group, w) = ((warp_index / 4) as usize, (warp_index % 4) as usize);
    let threads = t0.block_dim.volume();
    if (group as u64 + 1) * 128 > threads {
        return Err((
            0,
            Fault::Wgmma {
                problem: WgmmaProblem::PartialWarpgroup { threads },
                at,
                other_at: None,
            },
        ));
    }
    agree(t0, group, w, sig).map_err(|(nth, other, other_site)| {
        (
            0,
            Fault::Wgmma {
                problem: WgmmaProblem::WarpsDisagree {
                    nth,
                    other_warp: (group * 4) as u32 + other,
                },
                at,
                other_at: Some(other_site.into()),
            },
        )
    })
}

/// Logs warp `w`'s next instruction in warpgroup `group`'s record; the
/// instruction's index, the warp (0..4) and site of the first issue of it,
/// if they differ.
fn agree(t: &ThreadState, group: usize, w: usize, sig: Signature) -> Result<(), (u32, u32, Site)> {
    let mut groups = t.block().warpgroups.borrow_mut();
    if groups.len() <= group {
        groups.resize_with(group + 1, WarpgroupLog::default);
    }
    let log = &mut groups[group];
    let nth = log.issued[w];
    let at = (nth - log.first) as usize;
    match log.sigs.get(at) {
        Some(&(other, first)) if first != sig => return Err((nth, other, first.site)),
        Some(_) => {}
        None => log.sigs.push_back((w as u32, sig)),
    }
    log.issued[w] += 1;
    while log.issued.iter().all(|&i| i > log.first) {
        log.sigs.pop_front();
        log.first += 1;
    }
    Ok(())
}

/// When the block has ended: the first warpgroup one of whose warps issued
/// more `wgmma`s than another, as (the warp ahead, its count, the warp
/// behind, its count, the site of the first instruction it lacks), warps by
/// their index in the block.
pub(super) fn unmatched(block: &super::fiber::BlockState) -> Option<(u32, u32, u32, u32, Site)> {
    let groups = block.warpgroups.borrow();
    groups.iter().enumerate().find_map(|(g, log)| {
        let (ahead, most) = (0..4).map(|w| (w, log.issued[w])).max_by_key(|&(_, i)| i)?;
        let (behind, least) = (0..4).map(|w| (w, log.issued[w])).min_by_key(|&(_, i)| i)?;
        // The behind warp's next instruction is still logged (the log keeps
        // every instruction some warp has not issued).
        let site = log.sigs.get((least - log.first) as usize)?.1.site;
        let warp = |w: usize| (4 * g + w) as u32;
        (most != least).then_some((warp(ahead), most, warp(behind), least, site))
    })
}

/// Completes a full warp's `wgmma.wait_group pending`: each lane's reads of
/// groups older than its newest `pending` committed ones retire, checked
/// against their bytes at issue and read again at the wait; then the warp's
/// lanes are ordered after each other's reads.
pub(super) fn wait(warp: &[EmulatedThread], pending: u32) -> Result<(), (usize, Fault)> {
    let site = site_of(&warp[0].state);
    let mut retired_any = false;
    for (lane, t) in warp.iter().enumerate() {
        let state = &t.state;
        let keep_from = state.wgmma_groups.get().saturating_sub(pending);
        let mut reads = state.wgmma_reads.borrow_mut();
        let retired: Vec<OperandRead> = reads.extract_if(.., |r| r.group < keep_from).collect();
        drop(reads);
        for r in &retired {
            // SAFETY: checked inside the block's shared memory at issue.
            let now =
                unsafe { core::ptr::read(state.shared_base.add(r.offset).cast::<[u8; 16]>()) };
            let at = site;
            if let Some(byte) = (0..16).find(|&i| now[i] != r.data[i]) {
                return Err((
                    lane,
                    Fault::Wgmma {
                        problem: WgmmaProblem::OperandChanged {
                            offset: r.offset + byte,
                        },
                        at: at.into(),
                        other_at: Some(r.site.into()),
                    },
                ));
            }
            crate::arch::shared_checks(state, r.offset, 16, false, at).map_err(|f| (lane, f))?;
            retired_any = true;
        }
    }
    // SAFETY: the detector lives as long as the block (see the scheduler).
    if let (true, Some(race)) = (retired_any, unsafe { warp[0].state.race.as_ref() }) {
        let mut joint = Vec::new();
        for t in warp {
            race.release(t.state.linear_id, &mut joint);
        }
        for t in warp {
            race.acquire(t.state.linear_id, &joint);
        }
    }
    Ok(())
}

/// Where thread `t` waits in a collective (its lanes set it on the way in).
fn site_of(t: &ThreadState) -> Site {
    t.site
        .get()
        .expect("a thread waiting in a collective has a site")
}
