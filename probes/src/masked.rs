//! Probes of the explicit-mask warp collectives: only the lanes of `mask` call
//! them (as a kernel over a partial warp would); the other lanes write nothing.

use super::write_results;
use warpforge_device::warp::{self, ShuffleValue};
use warpforge_device::{Out, thread};
use warpforge_macros::kernel;

/// Thread `i`'s lane, and whether it is in `mask`.
fn lane_in(mask: u32) -> (usize, bool) {
    let i = thread::global_index_x();
    (i, mask & (1 << thread::lane_id()) != 0)
}

/// `out[8i..]` = `redux.sync` add, min.u32, max.u32, min.s32, max.s32, and, or, xor of `x` over `mask`.
#[kernel]
pub fn probe_redux(x: &[u32], mask: u32, mut out: Out<u32>) {
    let (i, member) = lane_in(mask);
    if !member {
        return;
    }
    let v = x.get(i).copied().unwrap_or(0);
    let s = v as i32;
    let r = [
        warp::reduce_add(mask, v),
        warp::reduce_min(mask, v),
        warp::reduce_max(mask, v),
        warp::reduce_min(mask, s) as u32,
        warp::reduce_max(mask, s) as u32,
        warp::reduce_and(mask, v),
        warp::reduce_or(mask, v),
        warp::reduce_xor(mask, v),
    ];
    write_results(&mut out, i, r);
}

/// `out[3i..]` = sum, max, min of `x` over the lanes of `mask`, in ascending lane order.
#[kernel]
pub fn probe_reduce_f32_in(x: &[f32], mask: u32, mut out: Out<f32>) {
    let (i, member) = lane_in(mask);
    if !member {
        return;
    }
    let v = x.get(i).copied().unwrap_or(0.0);
    let r = [
        warp::sum_f32_in(mask, v),
        warp::max_f32_in(mask, v),
        warp::min_f32_in(mask, v),
    ];
    write_results(&mut out, i, r);
}

/// `out[4i..]` = match_any and match_all (0 for `None`) over `mask`, of the low
/// 32 bits of `x` and of all 64.
#[kernel]
pub fn probe_match(x: &[u64], mask: u32, mut out: Out<u32>) {
    let (i, member) = lane_in(mask);
    if !member {
        return;
    }
    let v = x.get(i).copied().unwrap_or(0);
    let r = [
        warp::match_any(mask, v as u32),
        warp::match_all(mask, v as u32).unwrap_or(0),
        warp::match_any(mask, v),
        warp::match_all(mask, v).unwrap_or(0),
    ];
    write_results(&mut out, i, r);
}

/// `out[i]` = `active_mask()` in lanes below `split`; in the others the
/// complement of what a second call site returns (different code, so the
/// compiler cannot merge the two calls): two groups, each at its own call.
#[kernel]
pub fn probe_active_mask(split: u32, mut out: Out<u32>) {
    let i = thread::global_index_x();
    let m = if thread::lane_id() < split {
        warp::active_mask()
    } else {
        !warp::active_mask()
    };
    if let Some(mut o) = out.at(i) {
        o.set(m);
    }
}

/// `warp::shuffle_*` in `mode` (0 idx, 1 up, 2 down, 3 xor) with `arg` over `mask`.
fn shuffle_by<T: ShuffleValue>(mode: u32, mask: u32, v: T, arg: u32) -> T {
    match mode {
        0 => warp::shuffle_idx(mask, v, arg),
        1 => warp::shuffle_up(mask, v, arg),
        2 => warp::shuffle_down(mask, v, arg),
        _ => warp::shuffle_xor(mask, v, arg),
    }
}

/// `out[2i..]` = what lane `i` receives from a shuffle over `mask` in `mode`
/// (0 idx, 1 up, 2 down, 3 xor) with `arg`: of the low 32 bits of `x[i]`,
/// then of all 64 (two 32-bit shuffles).
#[kernel]
pub fn probe_shuffle_in(x: &[u64], mode: u32, arg: u32, mask: u32, mut out: Out<u64>) {
    let (i, member) = lane_in(mask);
    if !member {
        return;
    }
    let v = x.get(i).copied().unwrap_or(0);
    let r = [
        u64::from(shuffle_by(mode, mask, v as u32, arg)),
        shuffle_by(mode, mask, v, arg),
    ];
    write_results(&mut out, i, r);
}
