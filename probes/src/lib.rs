//! Probe kernels: one per device primitive, so every primitive is compiled
//! into PTX (and checked by `ptxas`), and the same test can check it against
//! its definition on the emulator and on the GPU.
//!
//! They are test-only: this crate is not part of the library's PTX module.
//! `warpforge-testkit`'s build compiles it to a module of its own
//! (`warpforge-testkit::PROBES`, module name `warpforge-probes`), which a GPU
//! test loads with `dev.load(&PROBES)` before it launches a probe, as a user's
//! host crate does with its own kernels crate.
//!
//! Each thread `i` reads its inputs at `i` and writes its results at
//! `k·i .. k·i + k` for the probe's `k` results per thread.
//!
//! | module | probes |
//! | --- | --- |
//! | (root) | shuffles, votes, block votes and fences, warp reductions, f16/bf16 conversion, a generic kernel's instances (`probe_window_*`) |
//! | `atomic` | atomics at each scope, the shared-memory histogram |
//! | `masked` | explicit-mask warp collectives, `match_*`, `active_mask` |
//! | `math` | fast and accurate math, packed f16x2/bf16x2 |
//! | `matrix` | 2-D guards (`probe_transpose`), compile-time-sized shared tiles |
//! | `tensor` | `mma.sync`, `ldmatrix`, `cp.async` |
//! | `hopper` | `wgmma`, `setmaxnreg`, TMA tensor copies (sm_90a module only) |
//! | `traffic` | access patterns of known memory cost, for the emulator's memory profile |
//! | [`faults`] | one planted fault per class the emulator reports, with the planted lines |
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]
#![forbid(unsafe_code)]

mod atomic;
pub mod faults;
mod hopper;
mod masked;
mod math;
mod matrix;
mod tensor;
mod traffic;
pub use atomic::*;
pub use hopper::*;
pub use masked::*;
pub use math::*;
pub use matrix::*;
pub use tensor::*;
pub use traffic::*;

use warpforge_device::sync::{self, Scope};
use warpforge_device::warp::{self, FULL_MASK};
use warpforge_device::{Out, bf16, f16, num, thread};
use warpforge_macros::kernel;

/// `out[i]` = the value lane `i` receives from `warp::shuffle_*` in `mode`
/// (0 idx, 1 up, 2 down, 3 xor) with `arg`. Launch with whole warps.
#[kernel]
pub fn probe_shuffle(x: &[u32], mode: u32, arg: u32, mut out: Out<u32>) {
    let i = thread::global_index_x();
    let v = x.get(i).copied().unwrap_or(0);
    let r = match mode {
        0 => warp::shuffle_idx(FULL_MASK, v, arg),
        1 => warp::shuffle_up(FULL_MASK, v, arg),
        2 => warp::shuffle_down(FULL_MASK, v, arg),
        _ => warp::shuffle_xor(FULL_MASK, v, arg),
    };
    if let Some(mut o) = out.at(i) {
        o.set(r);
    }
}

/// 64-bit shuffle (two 32-bit ones): `out[i]` = lane `i ^ arg`'s `x`.
#[kernel]
pub fn probe_shuffle_f64(x: &[f64], arg: u32, mut out: Out<f64>) {
    let i = thread::global_index_x();
    let r = warp::shuffle_xor(FULL_MASK, x.get(i).copied().unwrap_or(0.0), arg);
    if let Some(mut o) = out.at(i) {
        o.set(r);
    }
}

/// Writes thread `i`'s `K` results to `out[K·i .. K·i + K]` (those in bounds).
fn write_results<T: Copy, const K: usize>(out: &mut Out<T>, i: usize, v: [T; K]) {
    for (k, v) in v.into_iter().enumerate() {
        if let Some(mut o) = out.at(K * i + k) {
            o.set(v);
        }
    }
}

/// `#[kernel(instances(...))]`: one generic body, two PTX entries.
/// `out[K·i .. K·i + K]` = `x[i .. i + K]`, `pad` past the end of `x`.
#[kernel(instances(probe_window_f32_2 = <f32, 2>, probe_window_u64_3 = <u64, 3>))]
pub fn probe_window<T: Copy, const K: usize>(x: &[T], pad: T, mut out: Out<T>) {
    let i = thread::global_index_x();
    let window: [T; K] = core::array::from_fn(|k| x.get(i + k).copied().unwrap_or(pad));
    write_results(&mut out, i, window);
}

/// `out[3i..]` = (ballot, all, any) of `pred != 0` over the full warp.
#[kernel]
pub fn probe_vote(pred: &[u32], mut out: Out<u32>) {
    let i = thread::global_index_x();
    let p = pred.get(i).is_some_and(|&p| p != 0);
    let r = [
        warp::ballot(FULL_MASK, p),
        u32::from(warp::all(FULL_MASK, p)),
        u32::from(warp::any(FULL_MASK, p)),
    ];
    write_results(&mut out, i, r);
}

/// `out[3i..]` = (count, and, or) of `pred != 0` over the block, each through a
/// barrier; with device and system fences between, so they are in the PTX too.
#[kernel]
pub fn probe_block_vote(pred: &[u32], mut out: Out<u32>) {
    let i = thread::global_index_x();
    let p = pred.get(i).is_some_and(|&p| p != 0);
    let count = sync::sync_threads_count(p);
    sync::fence(Scope::Block);
    let all = sync::sync_threads_and(p);
    sync::fence(Scope::Device);
    let any = sync::sync_threads_or(p);
    sync::fence(Scope::System);
    write_results(&mut out, i, [count, u32::from(all), u32::from(any)]);
}

/// `out[3i..]` = warp (sum, max, min) of `x`.
#[kernel]
pub fn probe_warp_reduce_f32(x: &[f32], mut out: Out<f32>) {
    let i = thread::global_index_x();
    let v = x.get(i).copied().unwrap_or(0.0);
    write_results(
        &mut out,
        i,
        [warp::sum_f32(v), warp::max_f32(v), warp::min_f32(v)],
    );
}

/// `out[3i..]` = warp (wrapping sum, max, min) of `x`.
#[kernel]
pub fn probe_warp_reduce_i32(x: &[i32], mut out: Out<i32>) {
    let i = thread::global_index_x();
    let v = x.get(i).copied().unwrap_or(0);
    write_results(
        &mut out,
        i,
        [warp::sum_i32(v), warp::max_i32(v), warp::min_i32(v)],
    );
}

/// `h[i]`, `b[i]` = `x[i]` rounded to f16 and bf16; `back[2i..]` = both widened again.
#[kernel]
pub fn probe_convert(x: &[f32], mut h: Out<f16>, mut b: Out<bf16>, mut back: Out<f32>) {
    let i = thread::global_index_x();
    let Some(&v) = x.get(i) else { return };
    let (hv, bv) = (num::f16_from_f32(v), num::bf16_from_f32(v));
    if let Some(mut o) = h.at(i) {
        o.set(hv);
    }
    if let Some(mut o) = b.at(i) {
        o.set(bv);
    }
    if let Some(mut o) = back.at(2 * i) {
        o.set(num::f16_to_f32(hv));
    }
    if let Some(mut o) = back.at(2 * i + 1) {
        o.set(num::bf16_to_f32(bv));
    }
}
