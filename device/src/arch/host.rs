//! The host backend: every primitive asks the emulator about the calling fiber.

use super::{FenceScope, ShuffleMode, VoteMode};
use crate::emu::fiber::{self, Request};
use crate::thread::Dim3;

pub(crate) fn thread_idx() -> Dim3 {
    fiber::with_current(|t| t.thread_idx)
}

pub(crate) fn block_idx() -> Dim3 {
    fiber::with_current(|t| t.block_idx)
}

pub(crate) fn block_dim() -> Dim3 {
    fiber::with_current(|t| t.block_dim)
}

pub(crate) fn grid_dim() -> Dim3 {
    fiber::with_current(|t| t.grid_dim)
}

pub(crate) fn lane_id() -> u32 {
    fiber::with_current(|t| t.linear_id % crate::thread::WARP_SIZE)
}

pub(crate) fn sync_threads() {
    fiber::suspend(Request::SyncThreads { predicate: true });
}

pub(crate) fn sync_threads_count(predicate: bool) -> u32 {
    fiber::suspend(Request::SyncThreads { predicate })
}

pub(crate) fn vote(mode: VoteMode, predicate: bool, mask: u32) -> u32 {
    fiber::suspend(Request::Vote {
        mode,
        predicate,
        mask,
    })
}

pub(crate) fn fence(_scope: FenceScope) {
    // Blocks run on different OS threads; a SeqCst fence is at least as strong as any GPU scope.
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

pub(crate) fn f32_to_f16_bits(x: f32) -> u16 {
    half::f16::from_f32(x).to_bits()
}

pub(crate) fn f16_bits_to_f32(h: u16) -> f32 {
    half::f16::from_bits(h).to_f32()
}

pub(crate) fn f32_to_bf16_bits(x: f32) -> u16 {
    half::bf16::from_f32(x).to_bits()
}

pub(crate) fn shuffle_u32(mode: ShuffleMode, value: u32, arg: u32, mask: u32) -> u32 {
    fiber::suspend(Request::Shuffle {
        mode,
        value,
        arg,
        mask,
    })
}

pub(crate) fn dynamic_shared() -> (*mut u8, usize) {
    fiber::with_current(|t| (t.shared_base, t.shared_len))
}

pub(crate) fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    a.mul_add(b, c)
}

pub(crate) fn fma_f64(a: f64, b: f64, c: f64) -> f64 {
    a.mul_add(b, c)
}
