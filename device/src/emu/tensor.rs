//! The fragment collectives, `ldmatrix` and `mma.sync`, computed from the
//! whole warp's operands with the PTX ISA layout tables of [`crate::mma`].

use super::fiber::WarpOp;
use super::scheduler::EmulatedThread;
use crate::mma::{K, M, MmaKind, N, a_coord, a_coord_tf32, b_coord, b_coord_tf32, c_coord};

const LANES: usize = 32;

/// A fragment layout table: `(lane, element)` → `(row, column)`.
type Coord = fn(u32, usize) -> (usize, usize);

/// Completes `op` for a full warp whose lanes brought `value` (ldmatrix: row
/// addresses) and `collective_in` (mma: fragments): sets every lane's `collective_out`.
pub(super) fn complete(warp: &[EmulatedThread], op: WarpOp, value: &[u64; LANES]) {
    match op {
        WarpOp::Ldmatrix { matrices, trans } => ldmatrix(warp, usize::from(matrices), trans, value),
        WarpOp::Mma(kind) => mma(warp, kind),
        WarpOp::MmaF64 => mma_f64(warp),
        _ => unreachable!("not a fragment collective"),
    }
}

/// Reads half `col` of the 8-element row at `row_addr`.
fn half_at(row_addr: u64, col: usize) -> u32 {
    // SAFETY: every lane that supplies a row checked, through `SharedArray::row_ptr`,
    // that its 8 elements lie inside the block's shared memory, which lives
    // until the block ends; col < 8.
    u32::from(unsafe { (row_addr as *const u16).add(col).read() })
}

/// `ldmatrix.m8n8.xR`: matrix k's rows come from lanes 8k..8k+8; register k of
/// lane l holds row l/4, columns 2(l%4) and 2(l%4)+1 of matrix k (with
/// `.trans`, of its transpose).
fn ldmatrix(warp: &[EmulatedThread], matrices: usize, trans: bool, rows: &[u64; LANES]) {
    for (l, t) in warp.iter().enumerate() {
        let mut out = [0u32; 4];
        for (k, reg) in out.iter_mut().enumerate().take(matrices) {
            let (r, c) = (l / 4, 2 * (l % 4));
            let (lo, hi) = if trans {
                (half_at(rows[8 * k + c], r), half_at(rows[8 * k + c + 1], r))
            } else {
                (half_at(rows[8 * k + r], c), half_at(rows[8 * k + r], c + 1))
            };
            *reg = lo | hi << 16;
        }
        t.state.collective_out.set(out);
    }
}

/// `mma.sync` (`m16n8k16` for f16/bf16, `m16n8k8` for tf32): assembles A,
/// B and C from the lanes' fragments, computes each D element in f64
/// (products of halves and of tf32 are exact), rounds once to f32; a NaN
/// element is the canonical `0x7fff_ffff` (`crate::num`, "NaN results").
fn mma(warp: &[EmulatedThread], kind: MmaKind) {
    // Element i of a fragment's registers: a half of register i / 2, or
    // (tf32) register i, whose low 13 bits the hardware ignores.
    let elem = |regs: &[u32], i: usize| match kind {
        MmaKind::F16 => half::f16::from_bits((regs[i / 2] >> (16 * (i % 2))) as u16).to_f64(),
        MmaKind::Bf16 => f64::from(f32::from_bits((regs[i / 2] >> (16 * (i % 2))) << 16)),
        MmaKind::Tf32 => f64::from(f32::from_bits(regs[i] & !0x1fff)),
    };
    let (a_at, b_at): (Coord, Coord) = match kind {
        MmaKind::Tf32 => (a_coord_tf32, b_coord_tf32),
        _ => (a_coord, b_coord),
    };
    // k of one mma: 16 for two elements per register, 8 for one.
    let per_reg = kind.per_reg();
    let depth = 8 * per_reg;
    let (mut a, mut b, mut c) = ([[0f64; K]; M], [[0f64; N]; K], [[0f64; N]; M]);
    for (lane, t) in warp.iter().enumerate() {
        let operands = t.state.collective_in.get();
        let lane = lane as u32;
        for i in 0..4 * per_reg {
            let (r, k) = a_at(lane, i);
            a[r][k] = elem(&operands[0..4], i);
        }
        for i in 0..2 * per_reg {
            let (k, n) = b_at(lane, i);
            b[k][n] = elem(&operands[4..6], i);
        }
        for i in 0..4 {
            let (r, n) = c_coord(lane, i);
            c[r][n] = f64::from(f32::from_bits(operands[6 + i]));
        }
    }
    for (lane, t) in warp.iter().enumerate() {
        let out = core::array::from_fn(|i| {
            let (r, n) = c_coord(lane as u32, i);
            let d = (0..depth).map(|k| a[r][k] * b[k][n]).sum::<f64>() + c[r][n];
            // An f32 accumulator: a NaN is the GPU's canonical f32 NaN.
            crate::arch::f32_op(d as f32).to_bits()
        });
        t.state.collective_out.set(out);
    }
}

/// `mma.sync.m8n8k4.row.col.f64`: assembles the warp's 8 × 4 A, 4 × 8 B and
/// 8 × 8 C from the lanes' fragments (`crate::mma::dmma`'s tables) and
/// computes each D element as the fused multiply-add chain over k in order
/// from C (the arithmetic `crate::mma::dmma` documents).
fn mma_f64(warp: &[EmulatedThread]) {
    use crate::mma::dmma;
    let f64_at = |regs: &[u32], i: usize| {
        f64::from_bits(u64::from(regs[2 * i]) | u64::from(regs[2 * i + 1]) << 32)
    };
    let (mut a, mut b, mut c) = (
        [[0f64; dmma::K]; dmma::M],
        [[0f64; dmma::N]; dmma::K],
        [[0f64; dmma::N]; dmma::M],
    );
    for (lane, t) in warp.iter().enumerate() {
        let operands = t.state.collective_in.get();
        let lane = lane as u32;
        let (r, k) = dmma::a_coord(lane);
        a[r][k] = f64_at(&operands, 0);
        let (k, n) = dmma::b_coord(lane);
        b[k][n] = f64_at(&operands, 1);
        for i in 0..2 {
            let (r, n) = dmma::c_coord(lane, i);
            c[r][n] = f64_at(&operands, 2 + i);
        }
    }
    for (lane, t) in warp.iter().enumerate() {
        let mut out = [0u32; 4];
        for i in 0..2 {
            let (r, n) = dmma::c_coord(lane as u32, i);
            let d = (0..dmma::K).fold(c[r][n], |acc, k| a[r][k].mul_add(b[k][n], acc));
            out[2 * i] = d.to_bits() as u32;
            out[2 * i + 1] = (d.to_bits() >> 32) as u32;
        }
        t.state.collective_out.set(out);
    }
}
