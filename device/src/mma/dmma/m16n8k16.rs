//! sm_90's large f64 shape: `mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64`
//! (PTX ISA 7.8, sm_90; SASS `DMMA.16x8x16`), `D = A·B + C` for one warp's
//! 16 × 16 `A`, 16 × 8 `B` and 16 × 8 `C`/`D`: 2048 fused multiply-adds,
//! eight `m8n8k4`s' worth, in one instruction.
//!
//! Fragments (PTX ISA, "Matrix Fragments for `mma.m16n8k16` with
//! floating point type", `.f64`): with `g = lane / 4` and `t = lane % 4`,
//! each lane holds **eight** f64 of `A`, element `i` at `(g + 8·(i mod 2),
//! t + 4·⌊i/2⌋)`; **four** of `B`, element `i` at `(t + 4·i, g)`; **four**
//! of `C` and `D`, element `i` at `(g + 8·⌊i/2⌋, 2t + (i mod 2))` — the
//! `m8n8k4` tables ([`super::a_coord`] and its kin) repeated down the rows
//! and along `k`. The emulator assembles the warp's tiles from these tables.
//!
//! **Arithmetic**, as for [`dmma`](super::dmma): each element of `D` is the
//! chain of fused multiply-adds over `k = 0 .. 16` in order from `C`, each
//! rounded to nearest even (so a GEMM element is the same chain over its
//! whole `k` whichever shape or SIMT kernel ran it). Bit-for-bit agreement
//! with the GPU's `DMMA.16x8x16` on inputs whose partial sums round is
//! **unconfirmed until a GPU run**; on integer-valued inputs any order
//! gives the same bits.
//!
//! **Faults.** All 32 lanes of the warp must execute it together (the
//! emulator reports a partial warp, `Fault::WarpMask`). It exists on sm_90
//! only: ptxas refuses it in an sm_80 module, and the host refuses to load
//! an sm_90a module on an earlier GPU or an emulator of one.

use super::{Fragment, Kind, Shape, sealed};
use crate::arch;

/// `R` f64 of one operand of [`M16n8k16`] (8 for `A`, 4 for `B` and `C`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frag<const R: usize> {
    /// Element `i` is where [`M16n8k16`]'s table for the operand puts it.
    pub regs: [f64; R],
}

impl<const R: usize> Default for Frag<R> {
    #[inline(always)]
    fn default() -> Self {
        Frag { regs: [0.0; R] }
    }
}

impl<const R: usize> sealed::Sealed for Frag<R> {}

impl<const R: usize> Fragment for Frag<R> {
    const LEN: usize = R;
    #[inline(always)]
    fn from_elements(f: impl FnMut(usize) -> f64) -> Self {
        Frag {
            regs: crate::unroll::array(f),
        }
    }
    #[inline(always)]
    fn element(&self, i: usize) -> f64 {
        self.regs[i]
    }
}

/// `mma.sync.aligned.m16n8k16.row.col.f64` (sm_90 only) as a [`Shape`]:
/// the module docs' tables and [`Shape::mma`].
#[derive(Clone, Copy, Debug)]
pub struct M16n8k16;

impl sealed::Sealed for M16n8k16 {}

impl Shape for M16n8k16 {
    const M: usize = 16;
    const N: usize = 8;
    const K: usize = 16;
    const KIND: Kind = Kind::M16n8k16;
    type A = Frag<8>;
    type B = Frag<4>;
    type C = Frag<4>;
    #[inline(always)]
    fn a_coord(lane: u32, i: usize) -> (usize, usize) {
        let (g, t) = ((lane / 4) as usize, (lane % 4) as usize);
        (g + 8 * (i % 2), t + 4 * (i / 2))
    }
    #[inline(always)]
    fn b_coord(lane: u32, i: usize) -> (usize, usize) {
        let (g, t) = ((lane / 4) as usize, (lane % 4) as usize);
        (t + 4 * i, g)
    }
    #[inline(always)]
    fn c_coord(lane: u32, i: usize) -> (usize, usize) {
        let (g, t) = ((lane / 4) as usize, (lane % 4) as usize);
        (g + 8 * (i / 2), 2 * t + i % 2)
    }
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    fn mma(a: Frag<8>, b: Frag<4>, c: Frag<4>) -> Frag<4> {
        Frag {
            regs: arch::mma_sync_f64_m16n8k16(a.regs, b.regs, c.regs),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{M8n8k4, Orientation};
    use super::*;
    use crate::emu::{LaunchShape, launch};
    use crate::{Dim3, shared, sync};
    use std::sync::Mutex;

    type S = M16n8k16;

    fn one_warp(threads: u32, shared_elems: usize) -> LaunchShape {
        LaunchShape {
            grid: Dim3::x(1),
            block: Dim3::x(threads),
            dynamic_shared_bytes: shared_elems * 8,
        }
    }

    /// Each table covers its tile once: A's 256 elements, B's 128, C's 128,
    /// one lane and element each.
    #[test]
    fn the_fragment_tables_are_one_to_one() {
        let (mut a, mut b, mut c) = ([[0; 16]; 16], [[0; 8]; 16], [[0; 8]; 16]);
        for lane in 0..32 {
            for i in 0..8 {
                let (r, k) = S::a_coord(lane, i);
                a[r][k] += 1;
            }
            for i in 0..4 {
                let (k, n) = S::b_coord(lane, i);
                b[k][n] += 1;
                let (r, n) = S::c_coord(lane, i);
                c[r][n] += 1;
            }
        }
        assert!(a.iter().flatten().all(|&n| n == 1));
        assert!(b.iter().flatten().all(|&n| n == 1));
        assert!(c.iter().flatten().all(|&n| n == 1));
    }

    /// What the GEMM's fragment windows rely on (`Shape`'s docs), for both
    /// shapes: element 0 of every lane is at its anchor, `(g, t)` in `A` and
    /// `(t, g)` in `B` (where `Orientation::lane_start` points), and element
    /// `i` at a lane-independent offset from it.
    #[test]
    fn every_shapes_tables_are_anchored_at_the_lanes_g_t() {
        fn check<T: Shape>() {
            for lane in 0..32u32 {
                let (g, t) = ((lane / 4) as usize, (lane % 4) as usize);
                assert_eq!(T::a_coord(lane, 0), (g, t));
                assert_eq!(T::b_coord(lane, 0), (t, g));
                for i in 0..T::A::LEN {
                    let (dr, dk) = T::a_coord(0, i);
                    assert_eq!(T::a_coord(lane, i), (g + dr, t + dk), "A {lane} {i}");
                }
                for i in 0..T::B::LEN {
                    let (dk, dn) = T::b_coord(0, i);
                    assert_eq!(T::b_coord(lane, i), (t + dk, g + dn), "B {lane} {i}");
                }
            }
            // Lane 31 holds the farthest anchor, which `dmma_window` checks.
            assert_eq!(Orientation::KContiguous.lane_start(31, 100), 7 * 100 + 3);
        }
        check::<M8n8k4>();
        check::<M16n8k16>();
    }

    /// One warp stores A = (r − k) row-major and k-major and B = (k + 2n)
    /// k-major and n-major, loads each orientation (checked loads), and
    /// multiplies with C = 100r + n. By hand, Σₖ₌₀¹⁵ (r − k)(k + 2n) =
    /// 120r + 32rn − 1240 − 240n (Σk = 120, Σk² = 1240), so D[r][n] =
    /// 220r + 32rn − 1240 − 239n: D[0][0] = −1240, D[15][7] = 3300 +
    /// 3360 − 1240 − 1673 = 3747. Every lane's four elements, from every
    /// pair of orientations, must be that exactly (integers: no rounding).
    #[test]
    fn m16n8k16_computes_a_hand_computed_product_from_every_layout() {
        let want = |r: usize, n: usize| (220 * r + 32 * r * n) as f64 - 1240.0 - 239.0 * n as f64;
        assert_eq!(want(15, 7), 3747.0);
        assert_eq!(want(0, 0), -1240.0);
        let a = |r: usize, k: usize| r as f64 - k as f64;
        let b = |k: usize, n: usize| (k + 2 * n) as f64;
        let c = |r: usize, n: usize| (100 * r + n) as f64;
        // A row-major (stride 18) at 0, k-major (stride 20) at 288; B
        // k-major (stride 11) at 608, n-major (stride 19) at 784.
        let (a_rows, a_kmaj, b_kmaj, b_nmaj) = (0, 288, 608, 784);
        let len = b_nmaj + 8 * 19;
        let errors = Mutex::new(Vec::new());
        launch("dmma16_hand", one_warp(32, len), &|| {
            let tile = shared::dynamic::<f64>();
            if crate::thread::lane_id() == 0 {
                for k in 0..16 {
                    for r in 0..16 {
                        tile.store(a_rows + r * 18 + k, a(r, k));
                        tile.store(a_kmaj + k * 20 + r, a(r, k));
                    }
                    for n in 0..8 {
                        tile.store(b_kmaj + k * 11 + n, b(k, n));
                        tile.store(b_nmaj + n * 19 + k, b(k, n));
                    }
                }
            }
            sync::sync_threads();
            let fas = [
                S::load_a(&tile, a_rows, 18, false),
                S::load_a(&tile, a_kmaj, 20, true),
                S::a_from_fn(a),
            ];
            let fbs = [
                S::load_b(&tile, b_kmaj, 11, false),
                S::load_b(&tile, b_nmaj, 19, true),
                S::b_from_fn(b),
            ];
            for fa in fas {
                for fb in fbs {
                    let d = S::mma(fa, fb, S::c_from_fn(c));
                    S::for_each_c(&d, |r, n, v| {
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

    /// The order, pinned: a fused chain over k = 0 .. 16 from C, each step
    /// rounded. With c = 1 and products of 2⁻⁵³ at k = 3 and k = 12 (the
    /// others 0), each step is a tie that rounds back to 1 (even), so D = 1;
    /// one rounding of the exact sum, or summing the products before adding
    /// C, would give 1 + 2⁻⁵².
    #[test]
    fn m16n8k16_is_a_fused_chain_over_k_in_order() {
        let tiny = f64::powi(2.0, -53);
        let a = |_: usize, k: usize| if k == 3 || k == 12 { tiny } else { 0.0 };
        let out = Mutex::new(Vec::new());
        launch("dmma16_chain", one_warp(32, 0), &|| {
            let d = S::mma(
                S::a_from_fn(a),
                S::b_from_fn(|_, _| 1.0),
                S::c_from_fn(|_, _| 1.0),
            );
            S::for_each_c(&d, |_, _, v| out.lock().unwrap().push(v));
        })
        .unwrap();
        let out = out.into_inner().unwrap();
        assert_eq!(out.len(), 128);
        assert!(out.iter().all(|&v| v == 1.0), "{out:?}");
        assert_ne!(1.0 + 2.0 * tiny, 1.0, "the exact sum is representable");
    }

    /// Reaching it with 24 lanes is a reported fault naming lane 24.
    #[test]
    fn m16n8k16_with_a_partial_warp_is_a_reported_fault() {
        let err = launch("dmma16_partial", one_warp(24, 0), &|| {
            let _ = S::mma(Frag::default(), Frag::default(), Frag::default());
        })
        .unwrap_err();
        assert!(err.to_string().contains("lane 24"), "{err}");
    }

    /// A window's fragment loads (element 0 at an offset, the rest at the
    /// anchored steps) read what the checked loads read.
    #[test]
    fn a_window_loads_the_checked_fragments() {
        use crate::mma::StageRing;
        let (stride, stage_len) = (20usize, 20 * 16 + 8);
        let mismatches = Mutex::new(0usize);
        launch("dmma16_window", one_warp(32, stage_len * 2), &|| {
            let tile = shared::dynamic::<f64>();
            if crate::thread::lane_id() == 0 {
                for i in 0..stage_len * 2 {
                    tile.store(i, i as f64);
                }
            }
            sync::sync_threads();
            let ring = StageRing::check(&tile, stage_len, 2).unwrap();
            // A row-major: (row, k) at row·stride + k; the farthest element
            // is (8, 12) from the anchor.
            let w = ring
                .dmma_window(4, stride, Orientation::KContiguous, 8 * stride + 12)
                .unwrap();
            for s in 0..2 {
                let got: Frag<8> = w.fragment(ring.stage(s), 0, |i| {
                    let (dr, dk) = S::a_coord(0, i);
                    dr * stride + dk
                });
                if got != S::load_a(&tile, s * stage_len + 4, stride, false) {
                    *mismatches.lock().unwrap() += 1;
                }
            }
        })
        .unwrap();
        assert_eq!(*mismatches.lock().unwrap(), 0);
    }
}
