//! Double precision on the tensor cores (sm_80 and later): `D = A·B + C` for
//! one warp's 8 × 4 `A`, 4 × 8 `B` and 8 × 8 `C`/`D` tiles of f64
//! (`mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64`, SASS `DMMA.884`).
//!
//! Fragments (PTX ISA, "Matrix Fragments for `.m8n8k4` with `.f64`
//! floating point type"): with `g = lane / 4` and `t = lane % 4`, each lane
//! holds **one** f64 of `A`, at `(row, k) = (g, t)` ([`a_coord`]), **one**
//! of `B`, at `(k, col) = (t, g)` ([`b_coord`]), and **two** of `C` and `D`,
//! at `(g, 2t)` and `(g, 2t + 1)` ([`c_coord`]). The same tables serve the
//! emulator, which assembles the warp's tiles from them.
//!
//! **Arithmetic.** DMMA is IEEE double-precision fused multiply-add: the
//! emulator computes each element of `D` as a chain of fused multiply-adds
//! over `k` in order, `d = fma(a[r][3], b[3][c], fma(a[r][2], b[2][c],
//! fma(a[r][1], b[1][c], fma(a[r][0], b[0][c], c[r][c]))))`, each rounded to
//! nearest even — the order of the SIMT kernels' `fma` chain, so a GEMM's
//! element is the same chain over its whole `k` whichever kernel ran it.
//! Whether the GPU's DMMA rounds after each product (this chain) or once
//! for the four is not documented; the two agree whenever every partial
//! sum is exact (integer-valued inputs, as the tests use), and bit-for-bit
//! agreement on other inputs is **unconfirmed until a GPU run** compares
//! them. NaN results keep the host's bits (the GPU's f64 NaN is not
//! documented either: `crate::num`, "f64 arithmetic").
//!
//! **Faults.** All 32 lanes of the warp must call [`dmma`] together, as for
//! [`mma`](super::mma): on the GPU a `mma.sync` from a partial or diverged
//! warp is undefined; the emulator reports it (`Fault::WarpMask`, naming the
//! missing lane and both call sites), as it does for lanes that reach
//! different warp collectives.
//!
//! sm_90 adds `m16n8k4`, `m16n8k8` and `m16n8k16` f64 shapes (PTX ISA 7.8;
//! `ptxas` 13.5 assembles `m16n8k16` to one `DMMA.16x8x16` on sm_90 and
//! refuses it for sm_80). They need an sm_90 module; the library's
//! `mma.sync` module is sm_80 (JIT-compiled on every later GPU), so they are
//! not here (`docs/gemm.md`, "FP64 on the tensor cores").

use super::Stage;
use super::stages::StageRing;
use crate::arch;
use crate::shared::SharedArray;

/// Rows of `A`, `C` and `D`.
pub const M: usize = 8;
/// Columns of `B`, `C` and `D`.
pub const N: usize = 8;
/// Columns of `A`, rows of `B`.
pub const K: usize = 4;

/// `(row, k)` in `A` (8 × 4) of lane `lane`'s element.
#[inline(always)]
pub const fn a_coord(lane: u32) -> (usize, usize) {
    ((lane / 4) as usize, (lane % 4) as usize)
}

/// `(k, col)` in `B` (4 × 8) of lane `lane`'s element.
#[inline(always)]
pub const fn b_coord(lane: u32) -> (usize, usize) {
    ((lane % 4) as usize, (lane / 4) as usize)
}

/// `(row, col)` in `C` and `D` (8 × 8) of element `i` (0..2) of lane `lane`'s
/// fragment.
#[inline(always)]
pub const fn c_coord(lane: u32, i: usize) -> (usize, usize) {
    ((lane / 4) as usize, 2 * (lane % 4) as usize + i)
}

/// This lane's element of `A`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FragA {
    /// `A[g][t]` ([`a_coord`]).
    pub value: f64,
}

/// This lane's element of `B`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FragB {
    /// `B[t][g]` ([`b_coord`]).
    pub value: f64,
}

/// This lane's two elements of `C` or `D`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FragC {
    /// Element `i` is at [`c_coord`]`(lane, i)`.
    pub regs: [f64; 2],
}

impl FragA {
    /// This lane's element of the `A` tile whose element `(row, k)` is `a(row, k)`.
    #[inline(always)]
    pub fn from_fn(a: impl Fn(usize, usize) -> f64) -> Self {
        let (r, k) = a_coord(crate::thread::lane_id());
        FragA { value: a(r, k) }
    }

    /// This lane's element of the `A` tile stored at `tile[base..]`, rows
    /// `row_stride` apart: row-major (`(row, k)` at `row·row_stride + k`),
    /// or k-major if `k_major` (at `k·row_stride + row`). Checked: panics
    /// (traps on the GPU) if the element is outside the view.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load(tile: &SharedArray<f64>, base: usize, row_stride: usize, k_major: bool) -> Self {
        let (r, k) = a_coord(crate::thread::lane_id());
        let (major, minor) = if k_major { (k, r) } else { (r, k) };
        FragA {
            value: tile.load(base + major * row_stride + minor),
        }
    }
}

impl FragB {
    /// This lane's element of the `B` tile whose element `(k, col)` is `b(k, col)`.
    #[inline(always)]
    pub fn from_fn(b: impl Fn(usize, usize) -> f64) -> Self {
        let (k, c) = b_coord(crate::thread::lane_id());
        FragB { value: b(k, c) }
    }

    /// This lane's element of the `B` tile (k × n) stored at `tile[base..]`,
    /// rows `row_stride` apart: k-major (`(k, col)` at `k·row_stride + col`),
    /// or n-major if `n_major` (at `col·row_stride + k`). Checked, as
    /// [`FragA::load`].
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load(tile: &SharedArray<f64>, base: usize, row_stride: usize, n_major: bool) -> Self {
        let (k, c) = b_coord(crate::thread::lane_id());
        let (major, minor) = if n_major { (c, k) } else { (k, c) };
        FragB {
            value: tile.load(base + major * row_stride + minor),
        }
    }
}

impl FragC {
    /// This lane's fragment of the `C` tile whose element `(row, col)` is `c(row, col)`.
    #[inline(always)]
    pub fn from_fn(c: impl Fn(usize, usize) -> f64) -> Self {
        let lane = crate::thread::lane_id();
        FragC {
            regs: core::array::from_fn(|i| {
                let (r, col) = c_coord(lane, i);
                c(r, col)
            }),
        }
    }

    /// Calls `f(row, col, value)` for this lane's 2 elements.
    #[inline(always)]
    pub fn for_each(&self, mut f: impl FnMut(usize, usize, f64)) {
        let lane = crate::thread::lane_id();
        for (i, &v) in self.regs.iter().enumerate() {
            let (r, c) = c_coord(lane, i);
            f(r, c, v);
        }
    }
}

/// `D = A·B + C` for the warp's 8 × 4 `A`, 4 × 8 `B` and 8 × 8 `C` tiles of
/// f64 (`mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64`), each element a
/// fused chain over `k` in order on the emulator (module docs). All 32 lanes
/// of the warp must call it together: `mma.sync` from part of a warp is
/// undefined on the GPU (the emulator reports it as a fault).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn dmma(a: FragA, b: FragB, c: FragC) -> FragC {
    FragC {
        regs: arch::mma_sync_f64(a.value, b.value, c.regs),
    }
}

/// Where a lane's fragment element lies in a stored tile, by the tile's
/// orientation: along its rows at `g·stride + t` (`A` row-major, `B`
/// n-major: the fragment's own row or column `g` is the stored row), or
/// across them at `t·stride + g` (`A` k-major, `B` k-major: `k = t` is the
/// stored row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Orientation {
    /// The stored rows run along k: element `(g, t)` at `g·stride + t`.
    KContiguous,
    /// The stored rows run along m or n: element at `t·stride + g`.
    KMajor,
}

impl Orientation {
    /// Lane `lane`'s element of an 8 × 4 (`A`) or 4 × 8 (`B`) fragment,
    /// elements from the fragment's origin.
    #[inline(always)]
    pub const fn lane_start(self, lane: u32, stride: usize) -> usize {
        let (g, t) = ((lane / 4) as usize, (lane % 4) as usize);
        match self {
            Orientation::KContiguous => g * stride + t,
            Orientation::KMajor => t * stride + g,
        }
    }
}

/// One lane's f64 fragment loads in every stage of a [`StageRing`] (from
/// [`StageRing::dmma_window`]): its element's offset in a stage computed
/// and clamped once, so each load is the stage's address plus a constant
/// (`LDS.64 [r + imm]` once the kernel's loops are written out), with no
/// check or branch: the f64 counterpart of [`super::StageWindow`].
#[derive(Clone, Copy)]
pub struct Window {
    ring: StageRing<f64>,
    /// The lane's element in a stage (elements), clamped so that every load
    /// the window allows stays in the stage.
    start: u32,
    /// The most elements a load may add to `start`.
    reach: u32,
}

impl StageRing<f64> {
    /// This lane's [`Window`] for fragments stored as `orientation` says
    /// from element `origin` of each stage, rows `stride` apart, for loads
    /// at constant offsets of up to `reach` elements from it, if the
    /// farthest lane's load fits in a stage (uniform over the warp for
    /// uniform arguments: the origin, which differs per warp, is clamped
    /// rather than checked, a no-op for the origins a kernel computes from
    /// its tile shape; the emulator reports a clamp that changed it).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn dmma_window(
        &self,
        origin: usize,
        stride: usize,
        orientation: Orientation,
        reach: usize,
    ) -> Option<Window> {
        // Lane 31 (g = 7, t = 3) reads the farthest element either way.
        let farthest = orientation.lane_start(31, stride).checked_add(reach)?;
        let room = self.stage_len().checked_sub(1)?;
        if farthest > room || reach > u32::MAX as usize {
            return None;
        }
        let at = origin.saturating_add(orientation.lane_start(crate::thread::lane_id(), stride));
        let limit = room - reach;
        #[cfg(not(target_arch = "nvptx64"))]
        assert!(
            at <= limit,
            "dmma_window: the lane's element ({at}) is outside the stage"
        );
        Some(Window {
            ring: *self,
            start: at.min(limit) as u32,
            reach: reach as u32,
        })
    }
}

impl Window {
    /// The f64 at `offset` elements from this lane's element in `stage`,
    /// with no check: the offset is clamped to the window's reach (no work
    /// for a constant; the emulator reports a clamp that changed it).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load(&self, stage: Stage, offset: usize) -> f64 {
        let off = (offset as u32).min(self.reach);
        #[cfg(not(target_arch = "nvptx64"))]
        assert!(
            off as usize == offset,
            "dmma Window::load: offset {offset} is past the window's reach {}",
            self.reach
        );
        // stage ≤ (stages − 1)·stage_len and start + off ≤ room (the clamps):
        // one element inside the ring.
        let at = self.ring.stage_first(stage) + self.start + off;
        // SAFETY: as just said; 8-byte aligned (the ring starts 16-byte
        // aligned and its elements are f64). Ordering: the kernel's barriers.
        f64::from_bits(unsafe { self.ring.load_u64(at) })
    }

    /// An `A` fragment at `offset` (see [`load`](Self::load)).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn a(&self, stage: Stage, offset: usize) -> FragA {
        FragA {
            value: self.load(stage, offset),
        }
    }

    /// A `B` fragment at `offset` (see [`load`](Self::load)).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn b(&self, stage: Stage, offset: usize) -> FragB {
        FragB {
            value: self.load(stage, offset),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::{LaunchShape, launch};
    use crate::{Dim3, shared, sync};
    use std::sync::Mutex;

    fn one_warp(threads: u32, shared_elems: usize) -> LaunchShape {
        LaunchShape {
            grid: Dim3::x(1),
            block: Dim3::x(threads),
            dynamic_shared_bytes: shared_elems * 8,
        }
    }

    /// The layout tables cover each tile once: A's 32 elements, B's 32 and
    /// C's 64, one lane (and element) each.
    #[test]
    fn the_fragment_tables_are_one_to_one() {
        let (mut a, mut b, mut c) = ([[0; K]; M], [[0; N]; K], [[0; N]; M]);
        for lane in 0..32 {
            let (r, k) = a_coord(lane);
            a[r][k] += 1;
            let (k, n) = b_coord(lane);
            b[k][n] += 1;
            for i in 0..2 {
                let (r, n) = c_coord(lane, i);
                c[r][n] += 1;
            }
        }
        assert!(
            a.iter()
                .flatten()
                .chain(b.iter().flatten())
                .all(|&n| n == 1)
        );
        assert!(c.iter().flatten().all(|&n| n == 1));
    }

    /// One warp stores A = (r − k) row-major and k-major and B = (k + 2n)
    /// k-major and n-major in shared memory (row strides past the row
    /// length), loads each orientation, and multiplies with C = 100r + n.
    /// By hand, Σₖ₌₀³ (r − k)(k + 2n) = 6r + 8rn − 14 − 12n (Σk = 6, Σk² =
    /// 14), so D[r][n] = 106r + 8rn − 14 − 11n: e.g. D[0][0] = −14,
    /// D[7][7] = 1043. Every lane's two elements, from every pair of
    /// orientations, must be that exactly (integers: no rounding).
    #[test]
    fn dmma_computes_a_hand_computed_product_from_every_layout() {
        assert_eq!(106 * 7 + 8 * 49 - 14 - 11 * 7, 1043);
        let a = |r: usize, k: usize| r as f64 - k as f64;
        let b = |k: usize, n: usize| (k + 2 * n) as f64;
        let c = |r: usize, n: usize| (100 * r + n) as f64;
        let want = |r: usize, n: usize| (106 * r + 8 * r * n) as f64 - 14.0 - 11.0 * n as f64;
        // A row-major (stride 6) at 0, k-major (stride 10) at 48; B k-major
        // (stride 11) at 88, n-major (stride 5) at 132.
        let (a_rows, a_kmaj, b_kmaj, b_nmaj) = (0, 48, 88, 132);
        let len = b_nmaj + N * 5;
        let errors = Mutex::new(Vec::new());
        launch("dmma_hand", one_warp(32, len), &|| {
            let tile = shared::dynamic::<f64>();
            if crate::thread::lane_id() == 0 {
                for k in 0..K {
                    for r in 0..M {
                        tile.store(a_rows + r * 6 + k, a(r, k));
                        tile.store(a_kmaj + k * 10 + r, a(r, k));
                    }
                    for n in 0..N {
                        tile.store(b_kmaj + k * 11 + n, b(k, n));
                        tile.store(b_nmaj + n * 5 + k, b(k, n));
                    }
                }
            }
            sync::sync_threads();
            let fas = [
                FragA::load(&tile, a_rows, 6, false),
                FragA::load(&tile, a_kmaj, 10, true),
                FragA::from_fn(a),
            ];
            let fbs = [
                FragB::load(&tile, b_kmaj, 11, false),
                FragB::load(&tile, b_nmaj, 5, true),
                FragB::from_fn(b),
            ];
            for fa in fas {
                for fb in fbs {
                    dmma(fa, fb, FragC::from_fn(c)).for_each(|r, n, v| {
                        if v != want(r, n) {
                            errors.lock().unwrap().push((r, n, v));
                        }
                    });
                }
            }
        })
        .unwrap();
        assert_eq!(*errors.lock().unwrap(), Vec::new());
    }

    /// The emulator's order, pinned: D = fma(a₃b₃, fma(a₂b₂, fma(a₁b₁,
    /// fma(a₀b₀, c)))) with every step rounded. With c = 1 and two products
    /// of 2⁻⁵³, each step is a tie that rounds back to 1 (even), so D = 1;
    /// one rounding of the exact sum would give 1 + 2⁻⁵².
    #[test]
    fn dmma_is_a_fused_chain_over_k_in_order() {
        let tiny = f64::powi(2.0, -53);
        let a = |_: usize, k: usize| if k < 2 { tiny } else { 0.0 };
        let out = Mutex::new(Vec::new());
        launch("dmma_chain", one_warp(32, 0), &|| {
            let d = dmma(
                FragA::from_fn(a),
                FragB::from_fn(|_, _| 1.0),
                FragC::from_fn(|_, _| 1.0),
            );
            d.for_each(|_, _, v| out.lock().unwrap().push(v));
        })
        .unwrap();
        let out = out.into_inner().unwrap();
        assert_eq!(out.len(), 64);
        assert!(out.iter().all(|&v| v == 1.0), "{out:?}");
        assert_ne!(1.0 + 2.0 * tiny, 1.0, "the exact sum is representable");
    }

    /// A `dmma` that 20 lanes reach is a reported fault naming lane 20.
    #[test]
    fn dmma_with_a_partial_warp_is_a_reported_fault() {
        let err = launch("dmma_partial", one_warp(20, 0), &|| {
            let _ = dmma(FragA::default(), FragB::default(), FragC::default());
        })
        .unwrap_err();
        assert!(err.to_string().contains("lane 20"), "{err}");
    }

    /// The stage window reads what the checked loads read, in every stage,
    /// for both orientations, and refuses a reach past the stage.
    #[test]
    fn a_stage_window_loads_the_checked_fragments() {
        let (stride, stage_len, stages) = (12usize, 128usize, 3usize);
        let mismatches = Mutex::new(0usize);
        launch("dmma_window", one_warp(32, stage_len * stages), &|| {
            let tile = shared::dynamic::<f64>();
            if crate::thread::lane_id() == 0 {
                for i in 0..stage_len * stages {
                    tile.store(i, i as f64);
                }
            }
            sync::sync_threads();
            let ring = StageRing::check(&tile, stage_len, stages).unwrap();
            assert!(
                ring.dmma_window(0, stride, Orientation::KContiguous, 64)
                    .is_none()
            );
            for (orientation, k_major) in [
                (Orientation::KContiguous, false),
                (Orientation::KMajor, true),
            ] {
                let w = ring.dmma_window(2, stride, orientation, 4).unwrap();
                for s in 0..stages {
                    for off in [0, 4] {
                        let base = s * stage_len + 2 + off;
                        let (a, b) = (w.a(ring.stage(s), off), w.b(ring.stage(s), off));
                        let want_a = FragA::load(&tile, base, stride, k_major);
                        let want_b = FragB::load(&tile, base, stride, !k_major);
                        if a != want_a || b != want_b {
                            *mismatches.lock().unwrap() += 1;
                        }
                    }
                }
            }
        })
        .unwrap();
        assert_eq!(*mismatches.lock().unwrap(), 0);
    }
}
