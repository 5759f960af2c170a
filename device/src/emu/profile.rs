//! The memory-traffic profile: every global and shared access of a launch,
//! counted the way the hardware serves it.
//!
//! # What a request is
//!
//! A GPU serves memory per *request*: one load or store instruction executed
//! by the active lanes of a warp together. The emulator runs a warp's lanes
//! one after another (each a fiber), so it rebuilds requests afterwards:
//! each thread logs its accesses in program order, and at every completed
//! block barrier (and when the block ends) the logs of each warp are
//! grouped: lane *i*'s *k*-th access at a call site (file, line and column of
//! the device API call, which is `#[track_caller]`) belongs to the same
//! request as lane *j*'s *k*-th access at that site, counted from the
//! lanes' last warp sync (`bar.warp.sync`, `warp::sync`), where a warp's
//! lanes are in step again: a lane that reached a site more often before
//! the sync (a clipped run written element by element) does not shift its
//! requests at that site after it. A warp-uniform loop
//! therefore gives one request per iteration; lanes that skip an access
//! (a branch, a shorter grid-stride walk) are simply inactive in it. Two
//! accesses on one line at different columns are different instructions.
//! `ldmatrix` is a warp collective, so its request is exact.
//!
//! # How a request is counted
//!
//! - Global loads, stores, atomics and the global side of `cp.async`: the
//!   distinct 32-byte *sectors* and 128-byte *lines* the request's bytes
//!   touch. Bytes requested ÷ bytes moved (sectors × 32) is the coalescing
//!   efficiency. Allocations are 256-byte aligned as on a GPU, so the
//!   sectors are the GPU's.
//! - Shared loads and stores: 32 banks of 4 bytes. The warp is served in
//!   phases: the whole warp for accesses of 4 bytes or fewer, half-warps for
//!   8-byte accesses, quarter-warps for 16-byte ones. In a phase each bank
//!   delivers one 4-byte word per *wavefront* (lanes reading the same word
//!   share it), so the phase takes as many wavefronts as the busiest bank
//!   has distinct words. *Bank conflicts* are the wavefronts beyond one per
//!   phase: a 32-way conflict (32 lanes, one bank, 32 words) is 32
//!   wavefronts, 31 conflicts.
//! - `ldmatrix`: each 8×16-byte matrix is one phase (its 8 row addresses,
//!   from lanes 8k..8k+8), counted as above.
//!
//! The copy engine's traffic is not counted: bulk copies, TMA loads and
//! stores (`bulk`, `tma`) move whole boxes without a thread's request, and
//! `wgmma` reads its shared operands itself.
//!
//! The names follow Nsight Compute's metrics where one exists (see
//! [`GlobalTraffic`] and [`SharedTraffic`]), so a figure here can be set
//! beside `ncu --metrics …` on the same launch.
//!
//! # What it sees
//!
//! Every access made through the device API: [`crate::Slot`] reads and
//! writes (outputs), [`crate::Global::load`] (inputs; 128-bit through
//! [`crate::Global::vectors16`]), atomics, shared-memory views, `ldmatrix`
//! and `cp.async`. A plain read of a `&[T]` input (`x[i]`,
//! `x.get(i)`, an iterator) is an ordinary Rust slice read that nothing can
//! intercept: it is not in the profile. Read inputs through a [`crate::Global`]
//! parameter's `load` to have them counted.
//!
//! # Using it
//!
//! [`super::launch_profiled`] returns a launch's [`MemoryProfile`];
//! `warpforge::Device::profile_memory` collects one per launch of any code
//! (the library's operations or a user's own kernels) on an emulator
//! device, and `warpforge profile OP …` prints them. `MemoryProfile`'s
//! `Display` is a table in Nsight Compute's terms:
//!
//! ```text
//! memory profile of `probe_transpose_tile`, grid (1, 1, 1), block (32, 32, 1) (emulator)
//!   global       requests     sectors  sect/req      lines efficiency  width
//!   ld                 32         128      4.00         32     100.0%  32b×32
//!   st                 32         128      4.00         32     100.0%  32b×32
//!   shared       requests  wavefronts  wave/req  conflicts  width
//!   ld                 32        1024     32.00        992  32b×32
//!   st                 32          32      1.00          0  32b×32
//!   per output element (1024): 4.00 bytes read, 4.00 bytes written
//!   source line                                  global rq   sectors shared rq wavefronts
//!   probes/src/traffic.rs:47                            32       128        32         32
//!   probes/src/traffic.rs:52                            32       128         0          0
//!   probes/src/traffic.rs:50                             0         0        32       1024
//!   (plain reads of `&[T]` inputs are not seen: read through `Global::load` to count them)
//! ```
//!
//! # What it does not model
//!
//! Caches (every request's sectors count as moved, as `l1tex__t_sectors`
//! does; DRAM traffic after L1/L2 hits is smaller), the GPU's merging of
//! half-warp phases of 64-bit shared accesses that fall in the same
//! 128 bytes, and the order of requests in time. Requests are rebuilt from
//! call sites: an access inside a kernel's own helper function (not
//! `#[track_caller]`) carries the helper's line, so the per-line table
//! names the helper, and a helper called twice per iteration gives one site
//! two occurrences per iteration, which pair up across lanes in order.
//!
//! # Cost
//!
//! Off (the default), one test of a per-block pointer per access: see the
//! module docs of [`super`] ("Speed") for the measured figures. On, one push
//! to the thread's log per access, and a sort of each warp's log at each
//! barrier (working memory is reused, so counting allocates nothing per
//! request). The logs hold a barrier interval's accesses: a kernel with no
//! barrier keeps every access of a block until the block ends (32 bytes
//! each), which suits the emulator's small shapes.

use super::SourceLocation;
use super::fiber::Site;
use crate::thread::{Dim3, WARP_SIZE};
use core::cell::{Cell, RefCell};
use core::fmt;
use std::collections::HashMap;

/// Bytes in a sector, the unit global memory moves in.
pub const SECTOR_BYTES: usize = 32;
/// Bytes in a cache line (four sectors).
pub const LINE_BYTES: usize = 128;
/// Shared-memory banks.
pub const BANKS: usize = 32;
/// Bytes a bank delivers per wavefront.
pub const BANK_BYTES: usize = 4;

/// Which memory operation an access is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Op {
    GlobalLoad,
    GlobalStore,
    GlobalAtomic,
    /// The global (source) side of a `cp.async`.
    CpAsync,
    SharedLoad,
    SharedStore,
    SharedAtomic,
}

/// One lane's access, as logged.
#[derive(Clone, Copy)]
struct LaneAccess {
    site: Site,
    op: Op,
    bytes: u32,
    /// The lane's warp syncs (`bar.warp.sync`) before it since the last
    /// flush: its interval.
    interval: u32,
    /// Global: the address; shared: the byte offset in the block's shared memory.
    addr: usize,
}

/// The distinct 32-byte sectors and 128-byte lines that a global request's
/// accesses `(address, bytes)` touch.
///
/// ```text
/// 32 lanes × 4 bytes, consecutive:  4 sectors, 1 line
/// 32 lanes × 4 bytes, 128 apart:   32 sectors, 32 lines
/// ```
/// `scratch` is working memory (its contents are replaced), so that
/// counting a request allocates nothing.
pub(crate) fn sectors_and_lines(
    accesses: impl Iterator<Item = (usize, usize)> + Clone,
    scratch: &mut Vec<usize>,
) -> (u64, u64) {
    let mut distinct = |unit: usize| {
        scratch.clear();
        scratch.extend(
            accesses
                .clone()
                .filter(|&(_, bytes)| bytes > 0)
                .flat_map(|(addr, bytes)| addr / unit..=(addr + bytes - 1) / unit),
        );
        scratch.sort_unstable();
        scratch.dedup();
        scratch.len() as u64
    };
    (distinct(SECTOR_BYTES), distinct(LINE_BYTES))
}

/// Lanes of a warp served together by shared memory for accesses of
/// `bytes` bytes per lane: the whole warp up to 4 bytes, half-warps for 8,
/// quarter-warps for 16.
pub(crate) fn lanes_per_phase(bytes: usize) -> usize {
    match bytes {
        0..=4 => 32,
        5..=8 => 16,
        _ => 8,
    }
}

/// Wavefronts of one phase: the most distinct 4-byte words any bank holds
/// among the accesses `(offset, bytes)` (0 for no access); `scratch` as in
/// [`sectors_and_lines`].
pub(crate) fn phase_wavefronts(
    accesses: impl Iterator<Item = (usize, usize)>,
    scratch: &mut Vec<usize>,
) -> u64 {
    scratch.clear();
    scratch.extend(
        accesses
            .filter(|&(_, bytes)| bytes > 0)
            .flat_map(|(offset, bytes)| offset / BANK_BYTES..=(offset + bytes - 1) / BANK_BYTES),
    );
    scratch.sort_unstable();
    scratch.dedup();
    let mut per_bank = [0u64; BANKS];
    for &w in scratch.iter() {
        per_bank[w % BANKS] += 1;
    }
    per_bank.into_iter().max().unwrap_or(0)
}

/// `(wavefronts, phases)` of a shared request whose lanes access
/// `(lane, offset, bytes)`: each phase (see [`lanes_per_phase`], by the
/// widest access) counted by [`phase_wavefronts`]; `phases` counts the
/// phases with an active lane, the least wavefronts the request can take.
pub(crate) fn shared_wavefronts(
    accesses: &[(u32, usize, usize)],
    scratch: &mut Vec<usize>,
) -> (u64, u64) {
    let width = accesses.iter().map(|a| a.2).max().unwrap_or(0);
    let per_phase = lanes_per_phase(width);
    let (mut wavefronts, mut phases) = (0, 0);
    for phase in 0..WARP_SIZE as usize / per_phase {
        let lanes = (phase * per_phase) as u32..((phase + 1) * per_phase) as u32;
        let in_phase = accesses.iter().filter(|a| lanes.contains(&a.0));
        let w = phase_wavefronts(in_phase.map(|a| (a.1, a.2)), scratch);
        if w > 0 {
            wavefronts += w;
            phases += 1;
        }
    }
    (wavefronts, phases)
}

/// `(wavefronts, phases)` of an `ldmatrix` of `matrices` 8×8 matrices whose
/// row offsets are `rows` (lane order; matrix k's from lanes 8k..8k+8): one
/// phase per matrix, its eight 16-byte rows.
pub(crate) fn ldmatrix_wavefronts(
    matrices: usize,
    rows: &[usize],
    scratch: &mut Vec<usize>,
) -> (u64, u64) {
    let wavefronts = (0..matrices)
        .map(|k| phase_wavefronts(rows[8 * k..8 * k + 8].iter().map(|&r| (r, 16)), scratch))
        .sum();
    (wavefronts, matrices as u64)
}

/// Index of an access width (bytes per lane) in the `by_width` arrays.
fn width_index(bytes: usize) -> usize {
    match bytes {
        0..=1 => 0,
        2 => 1,
        3..=4 => 2,
        5..=8 => 3,
        _ => 4,
    }
}

/// Bits per lane of each `by_width` entry.
pub const WIDTH_BITS: [u32; 5] = [8, 16, 32, 64, 128];

/// Global-memory traffic of one kind of operation (loads, stores, atomics
/// or `cp.async`), summed over a launch's requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalTraffic {
    /// Warp-level requests (instructions executed by a warp):
    /// `l1tex__t_requests_pipe_lsu_mem_global_op_{ld,st,atom,ldgsts}.sum`.
    pub requests: u64,
    /// 32-byte sectors the requests touch, each counted once per request:
    /// `l1tex__t_sectors_pipe_lsu_mem_global_op_{ld,st,atom,ldgsts}.sum`.
    pub sectors: u64,
    /// 128-byte lines the requests touch, each counted once per request.
    pub lines: u64,
    /// Bytes the lanes asked for (the sum of their access sizes).
    pub bytes_requested: u64,
    /// Lane accesses (threads' individual loads or stores).
    pub lane_accesses: u64,
    /// Requests by access width per lane, 8/16/32/64/128 bits ([`WIDTH_BITS`]).
    pub requests_by_width: [u64; 5],
}

impl GlobalTraffic {
    /// Sectors per request (`…sectors… / …requests…` in Nsight Compute); 0 without requests.
    pub fn sectors_per_request(&self) -> f64 {
        ratio(self.sectors, self.requests)
    }

    /// Bytes the sectors move (32 per sector).
    pub fn bytes_moved(&self) -> u64 {
        self.sectors * SECTOR_BYTES as u64
    }

    /// Coalescing efficiency: bytes requested ÷ bytes moved (1 at best); 1 without traffic.
    pub fn efficiency(&self) -> f64 {
        if self.sectors == 0 {
            1.0
        } else {
            self.bytes_requested as f64 / self.bytes_moved() as f64
        }
    }

    fn add_request(&mut self, accesses: &[(u32, usize, usize)], scratch: &mut Vec<usize>) -> u64 {
        let (sectors, lines) = sectors_and_lines(accesses.iter().map(|a| (a.1, a.2)), scratch);
        let width = accesses.iter().map(|a| a.2).max().unwrap_or(0);
        self.requests += 1;
        self.sectors += sectors;
        self.lines += lines;
        self.bytes_requested += accesses.iter().map(|a| a.2 as u64).sum::<u64>();
        self.lane_accesses += accesses.len() as u64;
        self.requests_by_width[width_index(width)] += 1;
        sectors
    }

    fn merge(&mut self, o: &GlobalTraffic) {
        self.requests += o.requests;
        self.sectors += o.sectors;
        self.lines += o.lines;
        self.bytes_requested += o.bytes_requested;
        self.lane_accesses += o.lane_accesses;
        for (a, b) in self.requests_by_width.iter_mut().zip(o.requests_by_width) {
            *a += b;
        }
    }
}

/// Shared-memory traffic of one kind of operation (loads, stores or
/// `ldmatrix`), summed over a launch's requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SharedTraffic {
    /// Warp-level requests: `smsp__inst_executed_op_shared_{ld,st}.sum`
    /// (`…op_ldsm…` for `ldmatrix`).
    pub requests: u64,
    /// Wavefronts (bank passes) the requests take:
    /// `l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st,ldsm}.sum`.
    pub wavefronts: u64,
    /// Wavefronts beyond the least each request needs (one per phase):
    /// `l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st,ldsm}.sum`.
    pub bank_conflicts: u64,
    /// Bytes the lanes asked for.
    pub bytes_requested: u64,
    /// Requests by access width per lane, 8/16/32/64/128 bits ([`WIDTH_BITS`]).
    pub requests_by_width: [u64; 5],
}

impl SharedTraffic {
    /// Wavefronts per request (1 for a conflict-free 32-bit request, 32 for a 32-way conflict).
    pub fn wavefronts_per_request(&self) -> f64 {
        ratio(self.wavefronts, self.requests)
    }

    fn add(&mut self, (wavefronts, phases): (u64, u64), bytes: u64, width: usize) {
        self.requests += 1;
        self.wavefronts += wavefronts;
        self.bank_conflicts += wavefronts - phases;
        self.bytes_requested += bytes;
        self.requests_by_width[width_index(width)] += 1;
    }

    fn merge(&mut self, o: &SharedTraffic) {
        self.requests += o.requests;
        self.wavefronts += o.wavefronts;
        self.bank_conflicts += o.bank_conflicts;
        self.bytes_requested += o.bytes_requested;
        for (a, b) in self.requests_by_width.iter_mut().zip(o.requests_by_width) {
            *a += b;
        }
    }
}

/// Atomics on global memory: how many, and how they pile up on addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtomicTraffic {
    /// Lane operations (each thread's atomic counts once).
    pub operations: u64,
    /// Distinct addresses they update.
    pub addresses: u64,
    /// The most operations on one address (they serialise there).
    pub max_per_address: u64,
}

impl AtomicTraffic {
    /// Operations per address, on average; 0 without atomics.
    pub fn per_address(&self) -> f64 {
        ratio(self.operations, self.addresses)
    }
}

/// The traffic of one source line of a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineTraffic {
    /// The file.
    pub file: &'static str,
    /// The line, from 1.
    pub line: u32,
    /// Global requests made there (loads, stores, atomics, `cp.async`).
    pub global_requests: u64,
    /// Global sectors they touch.
    pub sectors: u64,
    /// Shared requests (loads, stores, `ldmatrix`).
    pub shared_requests: u64,
    /// Shared wavefronts they take.
    pub wavefronts: u64,
}

/// What one launch moved, counted as the hardware serves it (see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryProfile {
    /// Kernel name.
    pub kernel: String,
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads per block.
    pub block: Dim3,
    /// Global loads through the device API (`Slot::get`, `Global::load`).
    pub global_load: GlobalTraffic,
    /// Global stores (`Slot::set`).
    pub global_store: GlobalTraffic,
    /// Global atomics, as requests.
    pub global_atomic: GlobalTraffic,
    /// Global atomics, per address.
    pub atomics: AtomicTraffic,
    /// The global side of `cp.async` (16 bytes per lane each).
    pub cp_async: GlobalTraffic,
    /// Shared loads (`load`, `load16`).
    pub shared_load: SharedTraffic,
    /// Shared stores (`store`, `store16`).
    pub shared_store: SharedTraffic,
    /// `ldmatrix` requests.
    pub ldmatrix: SharedTraffic,
    /// Shared-memory atomic operations (lanes).
    pub shared_atomic_operations: u64,
    /// Elements of the launch's outputs (`Out` parameters), when the
    /// launcher named them; 0 otherwise.
    pub output_elements: u64,
    /// Per source line, the most sectors first (then the most wavefronts).
    pub lines: Vec<LineTraffic>,
    /// Per code path a kernel names ([`crate::thread::path`]), the blocks
    /// that took it, by name: e.g. the tensor-core GEMM's `"lean"` and
    /// `"guarded"` main loops.
    pub paths: Vec<(String, u64)>,
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

impl MemoryProfile {
    /// Bytes moved from global memory (load and `cp.async` sectors × 32).
    pub fn bytes_read(&self) -> u64 {
        self.global_load.bytes_moved() + self.cp_async.bytes_moved()
    }

    /// Bytes moved to global memory (store and atomic sectors × 32).
    pub fn bytes_written(&self) -> u64 {
        self.global_store.bytes_moved() + self.global_atomic.bytes_moved()
    }

    /// `(read, written)` bytes moved per output element; `None` when the
    /// launch named no outputs.
    pub fn bytes_per_output_element(&self) -> Option<(f64, f64)> {
        (self.output_elements > 0).then(|| {
            let n = self.output_elements as f64;
            (
                self.bytes_read() as f64 / n,
                self.bytes_written() as f64 / n,
            )
        })
    }

    /// Shared-memory bank conflicts of every kind (loads, stores, `ldmatrix`).
    pub fn bank_conflicts(&self) -> u64 {
        self.shared_load.bank_conflicts
            + self.shared_store.bank_conflicts
            + self.ldmatrix.bank_conflicts
    }

    /// Adds `other`'s counts to this profile's (another launch of the same
    /// kernel, say): every count summed, output elements too, lines merged;
    /// atomics' addresses summed as if the launches' addresses were distinct,
    /// and the most per address the larger of the two.
    ///
    /// ```
    /// use warpforge_device::emu::MemoryProfile;
    /// let mut a = MemoryProfile::default();
    /// a.global_load.requests = 2;
    /// a.global_load.sectors = 8;
    /// let mut b = a.clone();
    /// b.global_load.sectors = 64;
    /// a.add(&b);
    /// assert_eq!((a.global_load.requests, a.global_load.sectors_per_request()), (4, 18.0));
    /// ```
    pub fn add(&mut self, other: &MemoryProfile) {
        self.global_load.merge(&other.global_load);
        self.global_store.merge(&other.global_store);
        self.global_atomic.merge(&other.global_atomic);
        self.cp_async.merge(&other.cp_async);
        self.shared_load.merge(&other.shared_load);
        self.shared_store.merge(&other.shared_store);
        self.ldmatrix.merge(&other.ldmatrix);
        self.shared_atomic_operations += other.shared_atomic_operations;
        self.output_elements += other.output_elements;
        self.atomics.operations += other.atomics.operations;
        self.atomics.addresses += other.atomics.addresses;
        self.atomics.max_per_address = self
            .atomics
            .max_per_address
            .max(other.atomics.max_per_address);
        for l in &other.lines {
            match self
                .lines
                .iter_mut()
                .find(|m| (m.file, m.line) == (l.file, l.line))
            {
                Some(m) => {
                    m.global_requests += l.global_requests;
                    m.sectors += l.sectors;
                    m.shared_requests += l.shared_requests;
                    m.wavefronts += l.wavefronts;
                }
                None => self.lines.push(*l),
            }
        }
        sort_lines(&mut self.lines);
        for (name, n) in &other.paths {
            match self.paths.iter_mut().find(|p| p.0 == *name) {
                Some(p) => p.1 += n,
                None => self.paths.push((name.clone(), *n)),
            }
        }
        self.paths.sort();
    }

    /// Coalescing efficiency of all global traffic together (bytes requested ÷ moved).
    pub fn global_efficiency(&self) -> f64 {
        let mut all = self.global_load;
        for t in [&self.global_store, &self.global_atomic, &self.cp_async] {
            all.merge(t);
        }
        all.efficiency()
    }
}

/// The most sectors first, then the most wavefronts, then in source order.
fn sort_lines(lines: &mut [LineTraffic]) {
    lines.sort_by(|a, b| {
        (b.sectors, b.wavefronts)
            .cmp(&(a.sectors, a.wavefronts))
            .then((a.file, a.line).cmp(&(b.file, b.line)))
    });
}

/// How many source lines [`MemoryProfile`]'s `Display` lists.
const LINES_SHOWN: usize = 8;

impl fmt::Display for MemoryProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "memory profile of `{}`, grid {}, block {} (emulator)",
            self.kernel, self.grid, self.block
        )?;
        let widths = |w: &[u64; 5]| {
            let named: Vec<String> = WIDTH_BITS
                .iter()
                .zip(w)
                .filter(|(_, n)| **n > 0)
                .map(|(bits, n)| format!("{bits}b×{n}"))
                .collect();
            if named.is_empty() {
                "-".to_owned()
            } else {
                named.join(" ")
            }
        };
        let global = [
            &self.global_load,
            &self.global_store,
            &self.global_atomic,
            &self.cp_async,
        ];
        if global.iter().any(|t| t.requests > 0) {
            writeln!(
                f,
                "  {:<10} {:>10} {:>11} {:>9} {:>10} {:>10}  width",
                "global", "requests", "sectors", "sect/req", "lines", "efficiency"
            )?;
        }
        for (name, t) in [
            ("ld", &self.global_load),
            ("st", &self.global_store),
            ("atom", &self.global_atomic),
            ("ldgsts", &self.cp_async),
        ] {
            if t.requests == 0 {
                continue;
            }
            writeln!(
                f,
                "  {:<10} {:>10} {:>11} {:>9.2} {:>10} {:>9.1}%  {}",
                name,
                t.requests,
                t.sectors,
                t.sectors_per_request(),
                t.lines,
                100.0 * t.efficiency(),
                widths(&t.requests_by_width)
            )?;
        }
        if self.shared_load.requests + self.shared_store.requests + self.ldmatrix.requests > 0 {
            writeln!(
                f,
                "  {:<10} {:>10} {:>11} {:>9} {:>10}  width",
                "shared", "requests", "wavefronts", "wave/req", "conflicts"
            )?;
        }
        for (name, t) in [
            ("ld", &self.shared_load),
            ("st", &self.shared_store),
            ("ldsm", &self.ldmatrix),
        ] {
            if t.requests == 0 {
                continue;
            }
            writeln!(
                f,
                "  {:<10} {:>10} {:>11} {:>9.2} {:>10}  {}",
                name,
                t.requests,
                t.wavefronts,
                t.wavefronts_per_request(),
                t.bank_conflicts,
                widths(&t.requests_by_width)
            )?;
        }
        if self.atomics.operations > 0 || self.shared_atomic_operations > 0 {
            writeln!(
                f,
                "  atomics: global {} on {} addresses (at most {} on one), shared {}",
                self.atomics.operations,
                self.atomics.addresses,
                self.atomics.max_per_address,
                self.shared_atomic_operations
            )?;
        }
        match self.bytes_per_output_element() {
            Some((read, written)) => writeln!(
                f,
                "  per output element ({}): {read:.2} bytes read, {written:.2} bytes written",
                self.output_elements
            )?,
            None => writeln!(
                f,
                "  bytes: {} read, {} written",
                self.bytes_read(),
                self.bytes_written()
            )?,
        }
        if !self.lines.is_empty() {
            writeln!(
                f,
                "  {:<44} {:>9} {:>9} {:>9} {:>10}",
                "source line", "global rq", "sectors", "shared rq", "wavefronts"
            )?;
        }
        for l in self.lines.iter().take(LINES_SHOWN) {
            let place = format!("{}:{}", l.file, l.line);
            let n = place.chars().count();
            let place: String = if n > 44 {
                let tail: String = place.chars().skip(n - 43).collect();
                format!("…{tail}")
            } else {
                place
            };
            writeln!(
                f,
                "  {:<44} {:>9} {:>9} {:>9} {:>10}",
                place, l.global_requests, l.sectors, l.shared_requests, l.wavefronts
            )?;
        }
        if !self.paths.is_empty() {
            let paths: Vec<String> = self.paths.iter().map(|(n, b)| format!("{n} {b}")).collect();
            writeln!(f, "  blocks per path: {}", paths.join(", "))?;
        }
        // Say what is not there, so a missing load is not read as a free one.
        writeln!(
            f,
            "  (plain reads of `&[T]` inputs are not seen: read through `Global::load` to count them)"
        )
    }
}

/// A site's traffic while a launch runs.
#[derive(Clone, Copy)]
struct SiteCounts {
    /// The call site's address (a `Location` is unique per call site).
    key: usize,
    at: SourceLocation,
    global_requests: u64,
    sectors: u64,
    shared_requests: u64,
    wavefronts: u64,
}

/// The counts of one block, or of a launch's blocks merged.
#[derive(Default)]
pub(crate) struct Counts {
    profile: MemoryProfile,
    /// Few per kernel: searched in order, the last one found first.
    sites: Vec<SiteCounts>,
    last_site: usize,
    atomic_addresses: HashMap<usize, u64>,
    /// Blocks per code path named by the kernel.
    paths: Vec<(&'static str, u64)>,
    /// Working memory of the sector and bank arithmetic.
    scratch: Vec<usize>,
}

impl Counts {
    fn site(&mut self, site: Site) -> &mut SiteCounts {
        let key = core::ptr::from_ref(site) as usize;
        if self.sites.get(self.last_site).is_none_or(|s| s.key != key) {
            self.last_site = match self.sites.iter().position(|s| s.key == key) {
                Some(i) => i,
                None => {
                    self.sites.push(SiteCounts {
                        key,
                        at: site.into(),
                        global_requests: 0,
                        sectors: 0,
                        shared_requests: 0,
                        wavefronts: 0,
                    });
                    self.sites.len() - 1
                }
            };
        }
        &mut self.sites[self.last_site]
    }

    /// One request of `op` at `site`, its lanes' `(lane, address or offset, bytes)`.
    fn add_request(&mut self, site: Site, op: Op, accesses: &[(u32, usize, usize)]) {
        let p = &mut self.profile;
        let global = match op {
            Op::GlobalLoad => Some(&mut p.global_load),
            Op::GlobalStore => Some(&mut p.global_store),
            Op::GlobalAtomic => Some(&mut p.global_atomic),
            Op::CpAsync => Some(&mut p.cp_async),
            _ => None,
        };
        if let Some(traffic) = global {
            let sectors = traffic.add_request(accesses, &mut self.scratch);
            if op == Op::GlobalAtomic {
                for a in accesses {
                    *self.atomic_addresses.entry(a.1).or_insert(0) += 1;
                }
            }
            let s = self.site(site);
            s.global_requests += 1;
            s.sectors += sectors;
            return;
        }
        let traffic = match op {
            Op::SharedLoad => &mut p.shared_load,
            Op::SharedStore => &mut p.shared_store,
            _ => {
                p.shared_atomic_operations += accesses.len() as u64;
                return;
            }
        };
        let waves = shared_wavefronts(accesses, &mut self.scratch);
        let width = accesses.iter().map(|a| a.2).max().unwrap_or(0);
        let bytes = accesses.iter().map(|a| a.2 as u64).sum();
        traffic.add(waves, bytes, width);
        let s = self.site(site);
        s.shared_requests += 1;
        s.wavefronts += waves.0;
    }

    /// One `ldmatrix` of `matrices` matrices at `site` with row offsets `rows`.
    pub(crate) fn add_ldmatrix(&mut self, site: Site, matrices: usize, rows: &[usize]) {
        let waves = ldmatrix_wavefronts(matrices, rows, &mut self.scratch);
        self.profile.ldmatrix.add(waves, 128 * matrices as u64, 16);
        let s = self.site(site);
        s.shared_requests += 1;
        s.wavefronts += waves.0;
    }

    /// Adds another block's counts.
    pub(crate) fn merge(&mut self, o: Counts) {
        let (p, q) = (&mut self.profile, &o.profile);
        p.global_load.merge(&q.global_load);
        p.global_store.merge(&q.global_store);
        p.global_atomic.merge(&q.global_atomic);
        p.cp_async.merge(&q.cp_async);
        p.shared_load.merge(&q.shared_load);
        p.shared_store.merge(&q.shared_store);
        p.ldmatrix.merge(&q.ldmatrix);
        p.shared_atomic_operations += q.shared_atomic_operations;
        for s in o.sites {
            let i = match self.sites.iter().position(|m| m.key == s.key) {
                Some(i) => i,
                None => {
                    self.sites.push(SiteCounts {
                        global_requests: 0,
                        sectors: 0,
                        shared_requests: 0,
                        wavefronts: 0,
                        ..s
                    });
                    self.sites.len() - 1
                }
            };
            let mine = &mut self.sites[i];
            mine.global_requests += s.global_requests;
            mine.sectors += s.sectors;
            mine.shared_requests += s.shared_requests;
            mine.wavefronts += s.wavefronts;
        }
        for (a, n) in o.atomic_addresses {
            *self.atomic_addresses.entry(a).or_insert(0) += n;
        }
        for (name, n) in o.paths {
            self.add_path(name, n);
        }
    }

    /// `blocks` more blocks took the path `name`.
    fn add_path(&mut self, name: &'static str, blocks: u64) {
        match self.paths.iter_mut().find(|p| p.0 == name) {
            Some(p) => p.1 += blocks,
            None => self.paths.push((name, blocks)),
        }
    }

    /// The launch's profile.
    pub(crate) fn finish(
        mut self,
        kernel: &str,
        grid: Dim3,
        block: Dim3,
        output_elements: u64,
    ) -> MemoryProfile {
        let mut lines: HashMap<(&'static str, u32), LineTraffic> = HashMap::new();
        for s in &self.sites {
            let l = lines.entry((s.at.file, s.at.line)).or_insert(LineTraffic {
                file: s.at.file,
                line: s.at.line,
                global_requests: 0,
                sectors: 0,
                shared_requests: 0,
                wavefronts: 0,
            });
            l.global_requests += s.global_requests;
            l.sectors += s.sectors;
            l.shared_requests += s.shared_requests;
            l.wavefronts += s.wavefronts;
        }
        let mut lines: Vec<LineTraffic> = lines.into_values().collect();
        sort_lines(&mut lines);
        let p = &mut self.profile;
        p.atomics = AtomicTraffic {
            operations: self.atomic_addresses.values().sum(),
            addresses: self.atomic_addresses.len() as u64,
            max_per_address: self.atomic_addresses.values().copied().max().unwrap_or(0),
        };
        p.kernel = kernel.to_owned();
        p.grid = grid;
        p.block = block;
        p.output_elements = output_elements;
        p.lines = lines;
        p.paths = self.paths.iter().map(|&(n, b)| (n.to_owned(), b)).collect();
        p.paths.sort();
        self.profile
    }
}

/// One block's profiler: each thread's log since the last barrier, and the
/// block's counts so far.
pub(crate) struct BlockProfile {
    logs: Vec<RefCell<Vec<LaneAccess>>>,
    /// Each thread's warp syncs since the last flush.
    intervals: Vec<Cell<u32>>,
    counts: RefCell<Counts>,
    /// Working memory of `flush`, kept so that a flush allocates nothing.
    flush_scratch: RefCell<FlushScratch>,
}

/// A lane's access as `flush` groups it: its request is the accesses with
/// the same `(site, op, interval, occurrence)`.
struct LoggedAccess {
    /// The call site's address (its identity).
    site: usize,
    op: Op,
    interval: u32,
    /// How many times before the lane got to this site and op in this
    /// interval.
    occurrence: u32,
    lane: u32,
    addr: usize,
    bytes: usize,
    at: Site,
}

impl LoggedAccess {
    /// The request it belongs to.
    fn request(&self) -> (usize, Op, u32, u32) {
        (self.site, self.op, self.interval, self.occurrence)
    }
}

/// One warp's accesses while `flush` groups them.
#[derive(Default)]
struct FlushScratch {
    entries: Vec<LoggedAccess>,
    /// Per (site, op, interval): how many times the lane got there so far.
    seen: Vec<(usize, Op, u32, u32)>,
    /// One request's `(lane, address, bytes)`.
    group: Vec<(u32, usize, usize)>,
}

impl BlockProfile {
    pub(crate) fn new(threads: u32) -> Self {
        BlockProfile {
            logs: (0..threads).map(|_| RefCell::new(Vec::new())).collect(),
            intervals: (0..threads).map(|_| Cell::new(0)).collect(),
            counts: RefCell::new(Counts::default()),
            flush_scratch: RefCell::new(FlushScratch::default()),
        }
    }

    /// Logs thread `thread`'s access.
    pub(crate) fn record(&self, thread: u32, site: Site, op: Op, addr: usize, bytes: usize) {
        self.logs[thread as usize].borrow_mut().push(LaneAccess {
            site,
            op,
            bytes: bytes as u32,
            interval: self.intervals[thread as usize].get(),
            addr,
        });
    }

    /// Thread `thread` passed a warp sync (`bar.warp.sync`, with its warp's
    /// other lanes in the mask): its later accesses start a new interval.
    pub(crate) fn record_warp_sync(&self, thread: u32) {
        let interval = &self.intervals[thread as usize];
        interval.set(interval.get() + 1);
    }

    /// Counts the block as taking the code path `name`.
    pub(crate) fn record_path(&self, name: &'static str) {
        self.counts.borrow_mut().add_path(name, 1);
    }

    /// Counts an `ldmatrix` (a warp collective: already one request).
    pub(crate) fn record_ldmatrix(&self, site: Site, matrices: usize, rows: &[usize]) {
        self.counts.borrow_mut().add_ldmatrix(site, matrices, rows);
    }

    /// Groups the logged accesses of each warp into requests and counts
    /// them; called at every completed block barrier and when the block ends.
    pub(crate) fn flush(&self) {
        let mut counts = self.counts.borrow_mut();
        let mut scratch = self.flush_scratch.borrow_mut();
        let FlushScratch {
            entries,
            seen,
            group,
        } = &mut *scratch;
        for warp in self.logs.chunks(WARP_SIZE as usize) {
            entries.clear();
            for (lane, log) in warp.iter().enumerate() {
                let mut log = log.borrow_mut();
                seen.clear();
                for a in log.drain(..) {
                    let site = core::ptr::from_ref(a.site) as usize;
                    let key = (site, a.op, a.interval);
                    let occurrence = match seen.iter_mut().find(|s| (s.0, s.1, s.2) == key) {
                        Some(s) => {
                            s.3 += 1;
                            s.3
                        }
                        None => {
                            seen.push((site, a.op, a.interval, 0));
                            0
                        }
                    };
                    entries.push(LoggedAccess {
                        site,
                        op: a.op,
                        interval: a.interval,
                        occurrence,
                        lane: lane as u32,
                        addr: a.addr,
                        bytes: a.bytes as usize,
                        at: a.site,
                    });
                }
            }
            entries.sort_unstable_by_key(|e| (e.request(), e.lane));
            for request in entries.chunk_by(|a, b| a.request() == b.request()) {
                group.clear();
                group.extend(request.iter().map(|e| (e.lane, e.addr, e.bytes)));
                counts.add_request(request[0].at, request[0].op, group);
            }
        }
        // A block barrier brings every lane to one point: intervals restart.
        for interval in &self.intervals {
            interval.set(0);
        }
    }

    /// The block's counts, after a last flush.
    pub(crate) fn finish(self) -> Counts {
        self.flush();
        self.counts.into_inner()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 32 lanes, lane l accessing `bytes` at `base + l·stride`.
    fn warp(base: usize, stride: usize, bytes: usize) -> Vec<(u32, usize, usize)> {
        (0..32)
            .map(|l| (l, base + l as usize * stride, bytes))
            .collect()
    }

    fn sectors(accesses: &[(u32, usize, usize)]) -> (u64, u64) {
        sectors_and_lines(accesses.iter().map(|a| (a.1, a.2)), &mut Vec::new())
    }

    fn shared_wavefronts(accesses: &[(u32, usize, usize)]) -> (u64, u64) {
        super::shared_wavefronts(accesses, &mut vec![7; 3])
    }

    fn ldmatrix_wavefronts(matrices: usize, rows: &[usize]) -> (u64, u64) {
        super::ldmatrix_wavefronts(matrices, rows, &mut Vec::new())
    }

    /// A warp sync starts the lanes' count of a site's accesses afresh: half
    /// the lanes store twice at a site before it, the other half once, then
    /// every lane once after it. Counted from the block's start, the second
    /// request would join the first half's second store (words 48..63,
    /// banks 16..31) with the second half's store after the sync (words
    /// 16..31, the same banks): two words a bank, one conflict. Counted per
    /// interval, three requests (32, 16 and 32 lanes), none with a
    /// conflict.
    #[test]
    fn a_warp_sync_restarts_the_count_of_a_sites_accesses() {
        use crate::emu::{LaunchShape, launch_profiled};
        use crate::{shared, thread, warp};
        // One call site for every store.
        fn put(tile: &shared::SharedTile<f32, 64>, i: usize) {
            tile.store(i, 1.0);
        }
        let shape = LaunchShape {
            grid: Dim3::x(1),
            block: Dim3::x(32),
            dynamic_shared_bytes: 64 * 4,
        };
        let profile = launch_profiled("warp_sync", shape, &[], &|| {
            let tile = shared::array::<f32, 64>();
            let lane = thread::lane_id() as usize;
            put(&tile, lane);
            if lane < 16 {
                put(&tile, 48 + lane);
            }
            warp::sync(u32::MAX);
            put(&tile, lane);
        })
        .unwrap();
        assert_eq!(profile.shared_store.requests, 3);
        assert_eq!(profile.shared_store.bank_conflicts, 0);
    }

    #[test]
    fn global_sectors_and_lines() {
        // Consecutive f32: 128 bytes, 4 sectors, one line (aligned), two lines (offset by 4).
        assert_eq!(sectors(&warp(0, 4, 4)), (4, 1));
        assert_eq!(sectors(&warp(4, 4, 4)), (5, 2));
        // Strided by 32 elements: each lane its own sector and line.
        assert_eq!(sectors(&warp(0, 128, 4)), (32, 32));
        // Strided by 8 f32 (32 bytes): a sector each, four per line.
        assert_eq!(sectors(&warp(0, 32, 4)), (32, 8));
        // 128-bit per lane, consecutive: 512 bytes.
        assert_eq!(sectors(&warp(0, 16, 16)), (16, 4));
        // Every lane the same word: one sector.
        assert_eq!(sectors(&warp(64, 0, 4)), (1, 1));
        // An access straddling a sector boundary touches both.
        assert_eq!(sectors(&[(0, 30, 4)]), (2, 1));
        assert_eq!(sectors(&[]), (0, 0));
    }

    #[test]
    fn shared_banks_32_bit() {
        // Consecutive words: every bank once.
        assert_eq!(shared_wavefronts(&warp(0, 4, 4)), (1, 1));
        // Column of a 32×32 f32 tile: one bank, 32 words.
        assert_eq!(shared_wavefronts(&warp(0, 128, 4)), (32, 1));
        // Column of a 32×33 tile: stride 33 words, every bank once.
        assert_eq!(shared_wavefronts(&warp(0, 132, 4)), (1, 1));
        // Stride 2 words: two words per even bank.
        assert_eq!(shared_wavefronts(&warp(0, 8, 4)), (2, 1));
        // Broadcast: every lane the same word.
        assert_eq!(shared_wavefronts(&warp(12, 0, 4)), (1, 1));
        // 16-bit, consecutive: two lanes per word, 16 words.
        assert_eq!(shared_wavefronts(&warp(0, 2, 2)), (1, 1));
        // One active lane.
        assert_eq!(shared_wavefronts(&[(5, 40, 4)]), (1, 1));
        assert_eq!(shared_wavefronts(&[]), (0, 0));
    }

    #[test]
    fn shared_banks_64_and_128_bit() {
        // 64-bit consecutive: two half-warps, each 128 bytes over all banks.
        assert_eq!(shared_wavefronts(&warp(0, 8, 8)), (2, 2));
        // 128-bit consecutive: four quarter-warps of 128 bytes.
        assert_eq!(shared_wavefronts(&warp(0, 16, 16)), (4, 4));
        // 128-bit, rows 128 bytes apart: the 8 lanes of a quarter all hit banks 0-3.
        assert_eq!(shared_wavefronts(&warp(0, 128, 16)), (32, 4));
        // 64-bit, 256 bytes apart: 16 lanes on banks 0-1 per half-warp.
        assert_eq!(shared_wavefronts(&warp(0, 256, 8)), (32, 2));
        // Only the first quarter-warp active.
        let quarter: Vec<_> = warp(0, 16, 16).into_iter().take(8).collect();
        assert_eq!(shared_wavefronts(&quarter), (1, 1));
    }

    #[test]
    fn ldmatrix_phases() {
        // Four 8×8 bf16 matrices stacked in an 8-column tile of 16-byte rows:
        // rows consecutive, each phase covers all 32 banks once.
        let dense: Vec<usize> = (0..32).map(|r| 16 * r).collect();
        assert_eq!(ldmatrix_wavefronts(4, &dense), (4, 4));
        // Rows of a 64-column bf16 tile (128 bytes apart), unswizzled: the 8
        // rows of a matrix share banks 0-3: 8 wavefronts per matrix.
        let plain: Vec<usize> = (0..32).map(|r| 128 * r).collect();
        assert_eq!(ldmatrix_wavefronts(4, &plain), (32, 4));
        // The same rows with the 16-byte chunk XOR-swizzled by the row (r % 8):
        // 8 rows on 8 different bank groups.
        let swizzled: Vec<usize> = (0..32).map(|r| 128 * r + 16 * (r % 8)).collect();
        assert_eq!(ldmatrix_wavefronts(4, &swizzled), (4, 4));
        assert_eq!(ldmatrix_wavefronts(1, &swizzled[..8]), (1, 1));
    }

    #[test]
    fn widths_index_by_bits() {
        for (bytes, bits) in [(1, 8), (2, 16), (4, 32), (8, 64), (16, 128)] {
            assert_eq!(WIDTH_BITS[width_index(bytes)], bits);
        }
    }
}
