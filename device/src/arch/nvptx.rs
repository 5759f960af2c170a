//! The nvptx64 backend: PTX special registers, `core::arch::nvptx` and inline asm.
//! This is the only file in warpforge with PTX inline assembly.
//!
//! `asm!` options, and why each block has the ones it has:
//! - `pure` tells LLVM the asm is a function of its inputs: it may merge two
//!   with equal inputs, hoist or sink one across branches and loops, or delete
//!   one whose outputs are unused. That is right for arithmetic and
//!   conversions, and for special registers that are constant for a thread
//!   (`%laneid`, `%dynamic_smem_size`). It is wrong for every warp or block
//!   collective: `shfl.sync`, `vote.sync`, `match.sync`, `redux.sync`,
//!   `activemask`, `mma.sync`, `ldmatrix` and `bar.*` depend on which lanes
//!   execute them together, and every lane they name must reach them, so
//!   moving, merging or dropping one in some lanes changes the result or
//!   hangs the warp. None of those is `pure`.
//!
//!   Not being `pure` keeps such an asm from being merged, hoisted or
//!   deleted, but it does not make it `convergent` in LLVM's sense: rustc
//!   emits these call sites as `asm sideeffect` with only a memory attribute,
//!   so a control-flow transform that duplicates code (loop unswitching, tail
//!   duplication) may still put a copy under a thread-dependent condition.
//!   LLVM's NVVM intrinsics (`llvm.nvvm.shfl.sync.*`, `llvm.nvvm.mma.*`, …)
//!   are declared `convergent`; moving the collectives to them is the
//!   complete fix.
//! - `nomem` says the asm touches no memory, so loads and stores may move
//!   across it. Right for register-only instructions (shuffles, votes,
//!   matches, reductions, `mma.sync`, arithmetic). Wrong for barriers,
//!   fences, `cp.async` and its waits, and atomics, which must stay ordered
//!   with the memory accesses around them: those have neither `nomem` nor
//!   `readonly`. `ldmatrix` reads shared memory and writes none: `readonly`.

use super::{AtomicOp, MatchMode, ReduxOp, Scope, ShuffleMode, VoteMode};
use crate::mma::MmaKind;
use crate::thread::Dim3;
use crate::wgmma::Input;
use core::arch::asm;
use core::arch::nvptx;

#[inline(always)]
pub(crate) fn thread_idx() -> Dim3 {
    // SAFETY: reading the %tid special registers has no preconditions.
    unsafe {
        Dim3::new(
            nvptx::_thread_idx_x() as u32,
            nvptx::_thread_idx_y() as u32,
            nvptx::_thread_idx_z() as u32,
        )
    }
}

#[inline(always)]
pub(crate) fn block_idx() -> Dim3 {
    // SAFETY: reading the %ctaid special registers has no preconditions.
    unsafe {
        Dim3::new(
            nvptx::_block_idx_x() as u32,
            nvptx::_block_idx_y() as u32,
            nvptx::_block_idx_z() as u32,
        )
    }
}

#[inline(always)]
pub(crate) fn block_dim() -> Dim3 {
    // SAFETY: reading the %ntid special registers has no preconditions.
    unsafe {
        Dim3::new(
            nvptx::_block_dim_x() as u32,
            nvptx::_block_dim_y() as u32,
            nvptx::_block_dim_z() as u32,
        )
    }
}

#[inline(always)]
pub(crate) fn grid_dim() -> Dim3 {
    // SAFETY: reading the %nctaid special registers has no preconditions.
    unsafe {
        Dim3::new(
            nvptx::_grid_dim_x() as u32,
            nvptx::_grid_dim_y() as u32,
            nvptx::_grid_dim_z() as u32,
        )
    }
}

#[inline(always)]
pub(crate) fn lane_id() -> u32 {
    let lane: u32;
    // SAFETY: reads the %laneid special register; no memory is touched. `pure`
    // is right: the value is constant for the thread, so merging or hoisting
    // the read cannot change it.
    unsafe { asm!("mov.u32 {0}, %laneid;", out(reg32) lane, options(pure, nomem, nostack)) };
    lane
}

#[inline(always)]
pub(crate) fn sync_threads() {
    // SAFETY: `bar.sync 0`, through LLVM's barrier intrinsic, which LLVM knows
    // is convergent and orders memory. It touches no memory of its own. A barrier that not
    // every thread of the block reaches hangs or corrupts the block's barrier
    // state: the one precondition safe code cannot be held to here, documented
    // on `sync::sync_threads` and reported by the emulator as
    // `Fault::DivergentBarrier`.
    unsafe { nvptx::_syncthreads() }
}

#[inline(always)]
pub(crate) fn shuffle_u32(mode: ShuffleMode, value: u32, arg: u32, mask: u32) -> u32 {
    let out: u32;
    // SAFETY: shfl.sync reads registers of the lanes in `mask` only, no memory;
    // the `c` operand comes from `ShuffleMode::clamp_segmask`, which the
    // emulator models too. A warp collective: not `pure` (see the module docs).
    unsafe {
        match mode {
            ShuffleMode::Idx => asm!("shfl.sync.idx.b32 {o}, {v}, {a}, {c}, {m};",
                o = out(reg32) out, v = in(reg32) value, a = in(reg32) arg, m = in(reg32) mask,
                c = const ShuffleMode::Idx.clamp_segmask(), options(nomem, nostack)),
            ShuffleMode::Up => asm!("shfl.sync.up.b32 {o}, {v}, {a}, {c}, {m};",
                o = out(reg32) out, v = in(reg32) value, a = in(reg32) arg, m = in(reg32) mask,
                c = const ShuffleMode::Up.clamp_segmask(), options(nomem, nostack)),
            ShuffleMode::Down => asm!("shfl.sync.down.b32 {o}, {v}, {a}, {c}, {m};",
                o = out(reg32) out, v = in(reg32) value, a = in(reg32) arg, m = in(reg32) mask,
                c = const ShuffleMode::Down.clamp_segmask(), options(nomem, nostack)),
            ShuffleMode::Xor => asm!("shfl.sync.bfly.b32 {o}, {v}, {a}, {c}, {m};",
                o = out(reg32) out, v = in(reg32) value, a = in(reg32) arg, m = in(reg32) mask,
                c = const ShuffleMode::Xor.clamp_segmask(), options(nomem, nostack)),
        }
    }
    out
}

/// Shared-memory accesses are checked for races only in the emulator.
#[inline(always)]
pub(crate) fn shared_access(_ptr: *const u8, _bytes: usize, _write: bool) {}

/// As [`shared_access`] (the emulator's memory profile tells the two apart).
#[inline(always)]
pub(crate) fn shared_operand_access(_ptr: *const u8, _bytes: usize, _write: bool) {}

/// Input loads are counted only by the emulator's memory profile.
#[inline(always)]
pub(crate) fn global_input_load(_ptr: *const u8, _bytes: usize) {}

/// Base and size in bytes of the launch-sized (dynamic) shared memory.
#[inline(always)]
pub(crate) fn dynamic_shared() -> (*mut u8, usize) {
    let bytes: u32;
    // SAFETY: reads the %dynamic_smem_size special register; `pure` is right,
    // the value is constant for the launch.
    unsafe {
        asm!("mov.u32 {0}, %dynamic_smem_size;", out(reg32) bytes, options(pure, nomem, nostack))
    };
    // Typed as u128 so that the block's dynamic shared memory is 16-byte aligned.
    let base = core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<u128>();
    (base.cast::<u8>(), bytes as usize)
}

/// Prints `warpforge kernel panicked at FILE:LINE: MESSAGE` through the CUDA
/// `vprintf`, then traps, so a failing bounds check or `assert!` in a kernel
/// names its source line. Every thread that panics prints its own line.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    // Called through a pointer read from memory, which ptxas cannot see
    // through, so that it does not inline the printing (and its 256-byte
    // buffer) into every kernel: inlined, its frame and registers become the
    // kernel's (a tensor-core GEMM spilled).
    // SAFETY: a volatile read of a static, valid, aligned and initialised.
    let print = unsafe { core::ptr::read_volatile(&raw const PRINT_PANIC) };
    print(info);
    // SAFETY: `trap` ends the kernel with an error the host reports; nothing runs after it.
    unsafe { nvptx::trap() }
}

/// [`print_panic`], for [`panic`]'s opaque call.
static PRINT_PANIC: fn(&core::panic::PanicInfo<'_>) = print_panic;

/// What a panic whose message has values (`assert!(c, "{x}")`, a slice index
/// out of bounds) prints in its place on the GPU.
const UNFORMATTED: &str =
    "a message with values, not formatted on the GPU (the emulator prints it in full)";

/// Out of line and cold: the message buffer lives in this function's frame
/// only, not in every kernel that has a panic path. A static message is
/// printed as it is; a message with values is not formatted, because
/// `core::fmt` would be compiled into every kernel that can panic (ptxas
/// gives each kernel its own copy of the functions it calls).
#[inline(never)]
#[cold]
fn print_panic(info: &core::panic::PanicInfo<'_>) {
    use crate::panic_text::CText;
    /// `vprintf`'s argument buffer: each argument at its natural alignment,
    /// in the order of the format's conversions (`%s`, `%u`, `%s`).
    #[repr(C)]
    struct Args {
        file: *const u8,
        line: u32,
        message: *const u8,
    }
    let (file, line) = match info.location() {
        Some(l) => (l.file_as_c_str(), l.line()),
        None => (c"<unknown>", 0),
    };
    let mut message = CText::<256>::new();
    message.set(info.message().as_str().unwrap_or(UNFORMATTED));
    let args = Args {
        file: file.as_ptr().cast(),
        line,
        message: message.as_ptr(),
    };
    // SAFETY: the format string is NUL-terminated; its conversions match `Args`
    // field for field (`%s` a pointer to a NUL-terminated string, `%u` a u32),
    // and both strings are NUL-terminated (a `CStr`, a `CText`) and outlive
    // the call.
    unsafe {
        nvptx::vprintf(
            c"warpforge kernel panicked at %s:%u: %s\n".as_ptr().cast(),
            (&raw const args).cast(),
        );
    }
}

#[inline(always)]
pub(crate) fn order_point_f32x64(v: &mut [[f32; 8]; 8]) {
    // An asm whose text is a PTX comment naming the 64 registers (every
    // operand must appear in it): no instruction, but each value is an
    // output LLVM must take from here. Not `pure` (kept in place and in
    // order with other side effects) and not `nomem` (no load or store
    // moves across it): `unroll::order_point`.
    // SAFETY: a comment executes nothing and reads or writes no memory; the
    // operands come back unchanged.
    unsafe {
        asm!("// order {0} {1} {2} {3} {4} {5} {6} {7} {8} {9} {10} {11} {12} {13} {14} {15} {16} {17} {18} {19} {20} {21} {22} {23} {24} {25} {26} {27} {28} {29} {30} {31} {32} {33} {34} {35} {36} {37} {38} {39} {40} {41} {42} {43} {44} {45} {46} {47} {48} {49} {50} {51} {52} {53} {54} {55} {56} {57} {58} {59} {60} {61} {62} {63}", inout(reg32) v[0][0], inout(reg32) v[0][1], inout(reg32) v[0][2], inout(reg32) v[0][3], inout(reg32) v[0][4], inout(reg32) v[0][5], inout(reg32) v[0][6], inout(reg32) v[0][7], inout(reg32) v[1][0], inout(reg32) v[1][1], inout(reg32) v[1][2], inout(reg32) v[1][3], inout(reg32) v[1][4], inout(reg32) v[1][5], inout(reg32) v[1][6], inout(reg32) v[1][7], inout(reg32) v[2][0], inout(reg32) v[2][1], inout(reg32) v[2][2], inout(reg32) v[2][3], inout(reg32) v[2][4], inout(reg32) v[2][5], inout(reg32) v[2][6], inout(reg32) v[2][7], inout(reg32) v[3][0], inout(reg32) v[3][1], inout(reg32) v[3][2], inout(reg32) v[3][3], inout(reg32) v[3][4], inout(reg32) v[3][5], inout(reg32) v[3][6], inout(reg32) v[3][7], inout(reg32) v[4][0], inout(reg32) v[4][1], inout(reg32) v[4][2], inout(reg32) v[4][3], inout(reg32) v[4][4], inout(reg32) v[4][5], inout(reg32) v[4][6], inout(reg32) v[4][7], inout(reg32) v[5][0], inout(reg32) v[5][1], inout(reg32) v[5][2], inout(reg32) v[5][3], inout(reg32) v[5][4], inout(reg32) v[5][5], inout(reg32) v[5][6], inout(reg32) v[5][7], inout(reg32) v[6][0], inout(reg32) v[6][1], inout(reg32) v[6][2], inout(reg32) v[6][3], inout(reg32) v[6][4], inout(reg32) v[6][5], inout(reg32) v[6][6], inout(reg32) v[6][7], inout(reg32) v[7][0], inout(reg32) v[7][1], inout(reg32) v[7][2], inout(reg32) v[7][3], inout(reg32) v[7][4], inout(reg32) v[7][5], inout(reg32) v[7][6], inout(reg32) v[7][7], options(nostack, preserves_flags))
    }
}

#[inline(always)]
pub(crate) fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    let d: f32;
    // SAFETY: pure register arithmetic.
    unsafe {
        asm!("fma.rn.f32 {d}, {a}, {b}, {c};", d = out(reg32) d, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, options(pure, nomem, nostack))
    };
    d
}

#[inline(always)]
pub(crate) fn fma_f64(a: f64, b: f64, c: f64) -> f64 {
    let d: f64;
    // SAFETY: pure register arithmetic.
    unsafe {
        asm!("fma.rn.f64 {d}, {a}, {b}, {c};", d = out(reg64) d, a = in(reg64) a, b = in(reg64) b, c = in(reg64) c, options(pure, nomem, nostack))
    };
    d
}

/// `bar.warp.sync mask` (`__syncwarp`): the lanes of `mask` meet, and
/// their memory accesses before it are ordered before theirs after it.
#[inline(always)]
pub(crate) fn warp_sync(mask: u32) {
    // SAFETY: bar.warp.sync over the lanes of `mask`; it orders memory
    // accesses, so it is not `nomem` (the compiler keeps loads and stores
    // on their side of it).
    unsafe { asm!("bar.warp.sync {m};", m = in(reg32) mask, options(nostack)) };
}

#[inline(always)]
pub(crate) fn elect_sync(mask: u32) -> bool {
    let out: u32;
    // SAFETY: elect.sync over the lanes of `mask` (PTX 8.0, sm_90);
    // registers only. A warp collective: not `pure`.
    unsafe {
        asm!("{{ .reg .pred %p; elect.sync _|%p, {m}; selp.u32 {o}, 1, 0, %p; }}",
            o = out(reg32) out, m = in(reg32) mask, options(nomem, nostack))
    };
    out != 0
}

#[inline(always)]
pub(crate) fn vote(mode: VoteMode, predicate: bool, mask: u32) -> u32 {
    let p = predicate as u32;
    let out: u32;
    // SAFETY: vote.sync over the lanes of `mask`; registers only. A warp
    // collective: not `pure`.
    unsafe {
        match mode {
            VoteMode::Ballot => asm!(
                "{{ .reg .pred %p; setp.ne.u32 %p, {p}, 0; vote.sync.ballot.b32 {o}, %p, {m}; }}",
                o = out(reg32) out, p = in(reg32) p, m = in(reg32) mask, options(nomem, nostack)),
            VoteMode::All => asm!(
                "{{ .reg .pred %p, %q; setp.ne.u32 %p, {p}, 0; vote.sync.all.pred %q, %p, {m}; selp.u32 {o}, 1, 0, %q; }}",
                o = out(reg32) out, p = in(reg32) p, m = in(reg32) mask, options(nomem, nostack)),
            VoteMode::Any => asm!(
                "{{ .reg .pred %p, %q; setp.ne.u32 %p, {p}, 0; vote.sync.any.pred %q, %p, {m}; selp.u32 {o}, 1, 0, %q; }}",
                o = out(reg32) out, p = in(reg32) p, m = in(reg32) mask, options(nomem, nostack)),
        }
    }
    out
}

/// `bar.red.popc`: a block barrier that also counts the threads whose predicate is true.
#[inline(always)]
pub(crate) fn sync_threads_count(predicate: bool) -> u32 {
    let p = predicate as u32;
    let count: u32;
    // SAFETY: as `sync_threads`; the barrier also reduces one predicate per
    // thread. Neither `pure` nor `nomem`: a barrier orders the block's memory
    // accesses, so LLVM must not move loads or stores across it.
    unsafe {
        asm!("{{ .reg .pred %p; setp.ne.u32 %p, {p}, 0; bar.red.popc.u32 {c}, 0, %p; }}",
            c = out(reg32) count, p = in(reg32) p, options(nostack))
    };
    count
}

#[inline(always)]
pub(crate) fn fence(scope: Scope) {
    // SAFETY: a memory fence has no operands. Not `nomem`: ordering the
    // accesses around it is its whole point.
    unsafe {
        match scope {
            Scope::Block => asm!("fence.acq_rel.cta;", options(nostack)),
            Scope::Device => asm!("fence.acq_rel.gpu;", options(nostack)),
            Scope::System => asm!("fence.sc.sys;", options(nostack)),
        }
    }
}

#[inline(always)]
pub(crate) fn f32_to_f16_bits(x: f32) -> u16 {
    let h: u16;
    // SAFETY: register conversion, round to nearest even.
    unsafe {
        asm!("cvt.rn.f16.f32 {h}, {x};", h = out(reg16) h, x = in(reg32) x, options(pure, nomem, nostack))
    };
    h
}

#[inline(always)]
pub(crate) fn f16_bits_to_f32(h: u16) -> f32 {
    let x: f32;
    // SAFETY: register conversion (exact).
    unsafe {
        asm!("cvt.f32.f16 {x}, {h};", x = out(reg32) x, h = in(reg16) h, options(pure, nomem, nostack))
    };
    x
}

#[inline(always)]
pub(crate) fn f32_to_bf16_bits(x: f32) -> u16 {
    let h: u16;
    // SAFETY: register conversion, round to nearest even (sm_80, PTX 7.0).
    unsafe {
        asm!("cvt.rn.bf16.f32 {h}, {x};", h = out(reg16) h, x = in(reg32) x, options(pure, nomem, nostack))
    };
    h
}

/// One relaxed `atom` per scope: `atom.relaxed.{cta,gpu,sys}.OP` on a generic
/// address, so the same function serves global and shared memory.
macro_rules! atom_scoped {
    ($scope:expr, $op:literal, $reg:ident, $old:ident, $ptr:expr, $($v:expr),+) => {
        match $scope {
            Scope::Block => atom_scoped!(@one "cta", $op, $reg, $old, $ptr, $($v),+),
            Scope::Device => atom_scoped!(@one "gpu", $op, $reg, $old, $ptr, $($v),+),
            Scope::System => atom_scoped!(@one "sys", $op, $reg, $old, $ptr, $($v),+),
        }
    };
    (@one $s:literal, $op:literal, $reg:ident, $old:ident, $ptr:expr, $v:expr) => {
        asm!(concat!("atom.relaxed.", $s, ".", $op, " {o}, [{p}], {v};"),
            o = out($reg) $old, p = in(reg64) $ptr, v = in($reg) $v, options(nostack))
    };
    (@one $s:literal, $op:literal, $reg:ident, $old:ident, $ptr:expr, $c:expr, $v:expr) => {
        asm!(concat!("atom.relaxed.", $s, ".", $op, " {o}, [{p}], {c}, {v};"),
            o = out($reg) $old, p = in(reg64) $ptr, c = in($reg) $c, v = in($reg) $v, options(nostack))
    };
}

/// An integer `atom` function: `op` selects among the PTX operations listed;
/// the callers (the traits of `crate::atomic`) never pass another.
macro_rules! atom_int {
    ($name:ident, $t:ty, $reg:ident, { $($op:ident => $ptx:literal),+ $(,)? }) => {
        /// # Safety
        /// `ptr` must be valid and aligned for atomic access to a `$t`.
        #[inline(always)]
        pub(crate) unsafe fn $name(op: AtomicOp, scope: Scope, ptr: *mut $t, v: $t) -> $t {
            let old: $t;
            // SAFETY: the caller's contract; `atom` touches only `*ptr`.
            unsafe {
                match op {
                    $(AtomicOp::$op => atom_scoped!(scope, $ptx, $reg, old, ptr, v),)+
                    #[allow(unreachable_patterns)]
                    _ => unreachable!("no such atom operation for this type"),
                }
            }
            old
        }
    };
}

atom_int!(atom_u32, u32, reg32, {
    Add => "add.u32", Min => "min.u32", Max => "max.u32", Exch => "exch.b32",
    And => "and.b32", Or => "or.b32", Xor => "xor.b32",
});
atom_int!(atom_i32, i32, reg32, { Add => "add.s32", Min => "min.s32", Max => "max.s32" });
atom_int!(atom_u64, u64, reg64, {
    Add => "add.u64", Min => "min.u64", Max => "max.u64", Exch => "exch.b64",
    And => "and.b64", Or => "or.b64", Xor => "xor.b64",
});
atom_int!(atom_i64, i64, reg64, { Min => "min.s64", Max => "max.s64" });

/// # Safety
/// `ptr` must be valid and aligned for atomic access to a `u32`.
#[inline(always)]
pub(crate) unsafe fn atom_cas_u32(scope: Scope, ptr: *mut u32, current: u32, new: u32) -> u32 {
    let old: u32;
    // SAFETY: the caller's contract.
    unsafe { atom_scoped!(scope, "cas.b32", reg32, old, ptr, current, new) };
    old
}

/// # Safety
/// `ptr` must be valid and aligned for atomic access to a `u64`.
#[inline(always)]
pub(crate) unsafe fn atom_cas_u64(scope: Scope, ptr: *mut u64, current: u64, new: u64) -> u64 {
    let old: u64;
    // SAFETY: the caller's contract.
    unsafe { atom_scoped!(scope, "cas.b64", reg64, old, ptr, current, new) };
    old
}

/// # Safety
/// `ptr` must be valid and aligned for atomic access to an `f32`.
#[inline(always)]
pub(crate) unsafe fn atom_add_f32(scope: Scope, ptr: *mut f32, v: f32) -> f32 {
    let old: f32;
    // SAFETY: the caller's contract.
    unsafe { atom_scoped!(scope, "add.f32", reg32, old, ptr, v) };
    old
}

/// # Safety
/// `ptr` must be valid and aligned for atomic access to an `f64`.
#[inline(always)]
pub(crate) unsafe fn atom_add_f64(scope: Scope, ptr: *mut f64, v: f64) -> f64 {
    let old: f64;
    // SAFETY: the caller's contract.
    unsafe { atom_scoped!(scope, "add.f64", reg64, old, ptr, v) };
    old
}

/// `atom.add.noftz.f16` (sm_70+): `ptr` holds f16 bits.
///
/// # Safety
/// `ptr` must be valid and 2-byte aligned for atomic access to an f16.
#[inline(always)]
pub(crate) unsafe fn atom_add_f16(scope: Scope, ptr: *mut u16, v: u16) -> u16 {
    let old: u16;
    // SAFETY: the caller's contract.
    unsafe { atom_scoped!(scope, "add.noftz.f16", reg16, old, ptr, v) };
    old
}

#[inline(always)]
pub(crate) fn active_mask() -> u32 {
    let m: u32;
    // SAFETY: reads which lanes execute this instruction; registers only. Not
    // `pure`: the answer depends on where in divergent code it runs.
    unsafe { asm!("activemask.b32 {0};", out(reg32) m, options(nomem, nostack)) };
    m
}

#[inline(always)]
pub(crate) fn match_u32(mode: MatchMode, value: u32, mask: u32) -> u32 {
    let out: u32;
    // SAFETY: match.sync over the lanes of `mask` (sm_70+); registers only. A
    // warp collective: not `pure`.
    unsafe {
        match mode {
            MatchMode::Any => asm!("match.any.sync.b32 {o}, {v}, {m};",
                o = out(reg32) out, v = in(reg32) value, m = in(reg32) mask, options(nomem, nostack)),
            MatchMode::All => asm!("match.all.sync.b32 {o}, {v}, {m};",
                o = out(reg32) out, v = in(reg32) value, m = in(reg32) mask, options(nomem, nostack)),
        }
    }
    out
}

#[inline(always)]
pub(crate) fn match_u64(mode: MatchMode, value: u64, mask: u32) -> u32 {
    let out: u32;
    // SAFETY: as `match_u32`.
    unsafe {
        match mode {
            MatchMode::Any => asm!("match.any.sync.b64 {o}, {v}, {m};",
                o = out(reg32) out, v = in(reg64) value, m = in(reg32) mask, options(nomem, nostack)),
            MatchMode::All => asm!("match.all.sync.b64 {o}, {v}, {m};",
                o = out(reg32) out, v = in(reg64) value, m = in(reg32) mask, options(nomem, nostack)),
        }
    }
    out
}

/// `redux.sync` (sm_80): one instruction for an integer reduction over the lanes of `mask`.
#[inline(always)]
pub(crate) fn redux(op: ReduxOp, value: u32, mask: u32) -> u32 {
    macro_rules! redux {
        ($ptx:literal) => {{
            let out: u32;
            // SAFETY: redux.sync over the lanes of `mask`; registers only. A
            // warp collective: not `pure`.
            unsafe {
                asm!(concat!("redux.sync.", $ptx, " {o}, {v}, {m};"),
                    o = out(reg32) out, v = in(reg32) value, m = in(reg32) mask, options(nomem, nostack))
            };
            out
        }};
    }
    match op {
        ReduxOp::Add => redux!("add.u32"),
        ReduxOp::MinU32 => redux!("min.u32"),
        ReduxOp::MaxU32 => redux!("max.u32"),
        ReduxOp::MinI32 => redux!("min.s32"),
        ReduxOp::MaxI32 => redux!("max.s32"),
        ReduxOp::And => redux!("and.b32"),
        ReduxOp::Or => redux!("or.b32"),
        ReduxOp::Xor => redux!("xor.b32"),
    }
}

macro_rules! unary_f32 {
    ($($name:ident => $ptx:literal),* $(,)?) => { $(
        #[inline(always)]
        pub(crate) fn $name(x: f32) -> f32 {
            let y: f32;
            // SAFETY: pure register arithmetic.
            unsafe {
                asm!(concat!($ptx, " {y}, {x};"), y = out(reg32) y, x = in(reg32) x, options(pure, nomem, nostack))
            };
            y
        }
    )* };
}
unary_f32!(
    ex2_approx => "ex2.approx.f32",
    lg2_approx => "lg2.approx.f32",
    rsqrt_approx => "rsqrt.approx.f32",
    rcp_approx => "rcp.approx.f32",
);

macro_rules! binary_x2 {
    ($($name:ident => $ptx:literal),* $(,)?) => { $(
        #[inline(always)]
        pub(crate) fn $name(a: u32, b: u32) -> u32 {
            let d: u32;
            // SAFETY: pure register arithmetic on packed halves.
            unsafe {
                asm!(concat!($ptx, " {d}, {a}, {b};"), d = out(reg32) d, a = in(reg32) a, b = in(reg32) b, options(pure, nomem, nostack))
            };
            d
        }
    )* };
}
binary_x2!(
    add_f16x2 => "add.rn.f16x2",
    sub_f16x2 => "sub.rn.f16x2",
    mul_f16x2 => "mul.rn.f16x2",
    // cvt.rn.f16x2.f32 d, a, b puts a in the upper half: callers pass (hi, lo).
    pack_f16x2 => "cvt.rn.f16x2.f32",
    pack_bf16x2 => "cvt.rn.bf16x2.f32",
);

macro_rules! fma_x2 {
    ($($name:ident => $ptx:literal),* $(,)?) => { $(
        #[inline(always)]
        pub(crate) fn $name(a: u32, b: u32, c: u32) -> u32 {
            let d: u32;
            // SAFETY: pure register arithmetic on packed halves.
            unsafe {
                asm!(concat!($ptx, " {d}, {a}, {b}, {c};"), d = out(reg32) d, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, options(pure, nomem, nostack))
            };
            d
        }
    )* };
}
fma_x2!(fma_f16x2 => "fma.rn.f16x2", fma_bf16x2 => "fma.rn.bf16x2");

/// `ldmatrix.sync.aligned.m8n8.xR{.trans}.shared.b16` with this lane's row address.
///
/// # Safety
/// In lanes that supply a row (the first 8·R), `row` must point at 16 bytes of
/// the block's shared memory, 16-byte aligned, that no thread writes
/// concurrently; other lanes' addresses are ignored. All 32 lanes of the warp
/// must execute it together.
#[inline(always)]
pub(crate) unsafe fn ldmatrix<const R: usize>(row: *const u8, trans: bool) -> [u32; R] {
    let mut d = [0u32; R];
    // SAFETY: the caller's contract; cvta turns the generic address into a
    // shared one. A warp collective that reads shared memory: `readonly`, not
    // `pure` (see the module docs).
    unsafe {
        match (R, trans) {
            (1, false) => {
                asm!("{{ .reg .u64 %s; cvta.to.shared.u64 %s, {p}; ldmatrix.sync.aligned.m8n8.x1.shared.b16 {{{d0}}}, [%s]; }}",
                p = in(reg64) row, d0 = out(reg32) d[0], options(nostack, readonly))
            }
            (1, true) => {
                asm!("{{ .reg .u64 %s; cvta.to.shared.u64 %s, {p}; ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {{{d0}}}, [%s]; }}",
                p = in(reg64) row, d0 = out(reg32) d[0], options(nostack, readonly))
            }
            (2, false) => {
                asm!("{{ .reg .u64 %s; cvta.to.shared.u64 %s, {p}; ldmatrix.sync.aligned.m8n8.x2.shared.b16 {{{d0}, {d1}}}, [%s]; }}",
                p = in(reg64) row, d0 = out(reg32) d[0], d1 = out(reg32) d[1], options(nostack, readonly))
            }
            (2, true) => {
                asm!("{{ .reg .u64 %s; cvta.to.shared.u64 %s, {p}; ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {{{d0}, {d1}}}, [%s]; }}",
                p = in(reg64) row, d0 = out(reg32) d[0], d1 = out(reg32) d[1], options(nostack, readonly))
            }
            (4, false) => {
                asm!("{{ .reg .u64 %s; cvta.to.shared.u64 %s, {p}; ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{d0}, {d1}, {d2}, {d3}}}, [%s]; }}",
                p = in(reg64) row, d0 = out(reg32) d[0], d1 = out(reg32) d[1], d2 = out(reg32) d[2], d3 = out(reg32) d[3], options(nostack, readonly))
            }
            (4, true) => {
                asm!("{{ .reg .u64 %s; cvta.to.shared.u64 %s, {p}; ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{d0}, {d1}, {d2}, {d3}}}, [%s]; }}",
                p = in(reg64) row, d0 = out(reg32) d[0], d1 = out(reg32) d[1], d2 = out(reg32) d[2], d3 = out(reg32) d[3], options(nostack, readonly))
            }
            _ => unreachable!("ldmatrix loads 1, 2 or 4 matrices"),
        }
    }
    d
}

/// `cvt.rna.tf32.f32`: `x` rounded to tf32 (10 fraction bits, nearest with
/// ties away from zero), as the `.b32` an `mma` takes (sm_80, PTX 7.0).
#[inline(always)]
pub(crate) fn f32_to_tf32_bits(x: f32) -> u32 {
    let d: u32;
    // SAFETY: register conversion.
    unsafe {
        asm!("cvt.rna.tf32.f32 {d}, {x};", d = out(reg32) d, x = in(reg32) x, options(pure, nomem, nostack))
    };
    d
}

/// `mma.sync.aligned.{m16n8k16,m16n8k8}.row.col.f32.T.T.f32` for `kind`
/// (f16/bf16: m16n8k16; tf32: m16n8k8, the same registers per lane).
#[inline(always)]
pub(crate) fn mma_sync(kind: MmaKind, a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let mut d = [0f32; 4];
    macro_rules! mma {
        ($shape:literal, $ty:literal) => {
            asm!(concat!("mma.sync.aligned.", $shape, ".row.col.f32.", $ty, ".", $ty, ".f32 ",
                    "{{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};"),
                d0 = out(reg32) d[0], d1 = out(reg32) d[1], d2 = out(reg32) d[2], d3 = out(reg32) d[3],
                a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
                options(nomem, nostack))
        };
    }
    // SAFETY: a register-only warp instruction: `nomem`, but not `pure`, which
    // would let LLVM merge two with equal operands, move one into or out of a
    // branch, or drop one whose result a lane ignores, though all 32 lanes
    // must execute each one together. All lanes calling it together is the
    // caller's rule (`mma::mma`); the emulator checks it.
    unsafe {
        match kind {
            MmaKind::F16 => mma!("m16n8k16", "f16"),
            MmaKind::Bf16 => mma!("m16n8k16", "bf16"),
            MmaKind::Tf32 => mma!("m16n8k8", "tf32"),
        }
    }
    d
}

/// `mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64` (sm_80, PTX 7.0): one
/// f64 of A and of B, two of C and D per lane.
#[inline(always)]
pub(crate) fn mma_sync_f64(a: f64, b: f64, c: [f64; 2]) -> [f64; 2] {
    let mut d = [0f64; 2];
    // SAFETY: a register-only warp instruction: `nomem`, not `pure` (see
    // `mma_sync`: all 32 lanes must execute each one together, the caller's
    // rule, `mma::dmma::dmma`; the emulator checks it).
    unsafe {
        asm!("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {{{d0}, {d1}}}, {{{a}}}, {{{b}}}, {{{c0}, {c1}}};",
            d0 = out(reg64) d[0], d1 = out(reg64) d[1], a = in(reg64) a, b = in(reg64) b,
            c0 = in(reg64) c[0], c1 = in(reg64) c[1], options(nomem, nostack))
    }
    d
}

/// `mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64` (sm_90, PTX 7.8;
/// ptxas refuses it for an earlier target, so only an sm_90 module holds
/// it): eight f64 of A, four of B, four of C and D per lane.
#[inline(always)]
pub(crate) fn mma_sync_f64_m16n8k16(a: [f64; 8], b: [f64; 4], c: [f64; 4]) -> [f64; 4] {
    let mut d = [0f64; 4];
    // SAFETY: as `mma_sync_f64`: register-only, all 32 lanes together (the
    // caller's rule, `mma::dmma::M16n8k16`; the emulator checks it).
    unsafe {
        asm!("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}, {a4}, {a5}, {a6}, {a7}}}, {{{b0}, {b1}, {b2}, {b3}}}, {{{c0}, {c1}, {c2}, {c3}}};",
            d0 = out(reg64) d[0], d1 = out(reg64) d[1], d2 = out(reg64) d[2], d3 = out(reg64) d[3],
            a0 = in(reg64) a[0], a1 = in(reg64) a[1], a2 = in(reg64) a[2], a3 = in(reg64) a[3],
            a4 = in(reg64) a[4], a5 = in(reg64) a[5], a6 = in(reg64) a[6], a7 = in(reg64) a[7],
            b0 = in(reg64) b[0], b1 = in(reg64) b[1], b2 = in(reg64) b[2], b3 = in(reg64) b[3],
            c0 = in(reg64) c[0], c1 = in(reg64) c[1], c2 = in(reg64) c[2], c3 = in(reg64) c[3],
            options(nomem, nostack))
    }
    d
}

/// # Safety
/// `dst` must be 16 bytes of the block's shared memory and `src` 16 bytes of
/// global memory (a generic address in the global window: `cvta.to.global` of
/// any other address, e.g. a kernel-local array, is undefined), both 16-byte
/// aligned; no thread may access `dst` until this thread's copy has been
/// waited for.
#[inline(always)]
pub(crate) unsafe fn cp_async_16(dst: *mut u8, src: *const u8) {
    // SAFETY: the caller's contract; cvta turns the generic addresses into
    // state-space ones. Not `nomem`: it reads and (later) writes memory.
    unsafe {
        asm!("{{ .reg .u64 %d, %s; cvta.to.shared.u64 %d, {d}; cvta.to.global.u64 %s, {s}; cp.async.cg.shared.global [%d], [%s], 16; }}",
            d = in(reg64) dst, s = in(reg64) src, options(nostack))
    }
}

/// [`cp_async_16`] to a 32-bit `.shared` address (no `cvta` per copy), issued
/// only if `issue` (a predicated instruction: no branch).
///
/// # Safety
/// If `issue`: as [`cp_async_16`]'s, with `dst` the `.shared` address of
/// those 16 bytes. Otherwise nothing is accessed.
#[inline(always)]
pub(crate) unsafe fn cp_async_16_at(dst: SharedAddr, src: *const u8, issue: bool) {
    // SAFETY: the caller's contract. Not `nomem`: it reads and (later) writes memory.
    unsafe {
        asm!("{{ .reg .pred %p; .reg .u64 %s; setp.ne.b32 %p, {c}, 0; cvta.to.global.u64 %s, {s}; @%p cp.async.cg.shared.global [{d}], [%s], 16; }}",
            d = in(reg32) dst, s = in(reg64) src, c = in(reg32) issue as u32, options(nostack))
    }
}

/// [`cp_async_16_at`] that writes 16 zero bytes instead, reading nothing,
/// when `zero` (a source size of 0: `cp.async`'s zero fill), if `issue`.
///
/// # Safety
/// If `issue`: `dst` as [`cp_async_16_at`]'s, and `src` a global address
/// (any, never read, if `zero`; else 16 bytes of global memory, 16-byte
/// aligned).
#[inline(always)]
pub(crate) unsafe fn cp_async_16_zfill_at(
    dst: SharedAddr,
    src: *const u8,
    zero: bool,
    issue: bool,
) {
    let bytes: u32 = if zero { 0 } else { 16 };
    // SAFETY: the caller's contract. Not `nomem`: it reads and (later) writes memory.
    unsafe {
        asm!("{{ .reg .pred %p; .reg .u64 %s; setp.ne.b32 %p, {c}, 0; cvta.to.global.u64 %s, {s}; @%p cp.async.cg.shared.global [{d}], [%s], 16, {n}; }}",
            d = in(reg32) dst, s = in(reg64) src, n = in(reg32) bytes, c = in(reg32) issue as u32, options(nostack))
    }
}

/// The emulator's path count: nothing on the GPU.
#[inline(always)]
pub(crate) fn record_path(_name: &'static str) {}

#[inline(always)]
pub(crate) fn cp_async_commit() {
    // SAFETY: no operands.
    unsafe { asm!("cp.async.commit_group;", options(nostack)) }
}

#[inline(always)]
pub(crate) fn cp_async_wait_all() {
    // SAFETY: no operands. Not `nomem`: the copies land here, so loads of
    // their destinations must not move above it.
    unsafe { asm!("cp.async.wait_all;", options(nostack)) }
}

#[inline(always)]
pub(crate) fn cp_async_wait_group(pending: u32) {
    // SAFETY: no operands; the group count must be an immediate, hence the
    // match. Not `nomem`, as `cp_async_wait_all`.
    unsafe {
        match pending {
            0 => asm!("cp.async.wait_group 0;", options(nostack)),
            1 => asm!("cp.async.wait_group 1;", options(nostack)),
            2 => asm!("cp.async.wait_group 2;", options(nostack)),
            3 => asm!("cp.async.wait_group 3;", options(nostack)),
            4 => asm!("cp.async.wait_group 4;", options(nostack)),
            5 => asm!("cp.async.wait_group 5;", options(nostack)),
            6 => asm!("cp.async.wait_group 6;", options(nostack)),
            _ => asm!("cp.async.wait_group 7;", options(nostack)),
        }
    }
}

/// A 32-bit address in the `.shared` state space (what `ldmatrix` and
/// `cp.async` take; the generic 64-bit one needs a `cvta` per use).
pub(crate) type SharedAddr = u32;

/// The `.shared` address of a generic pointer into the block's shared memory
/// (`cvta.to.shared`), computed once so that accesses add 32-bit offsets to it.
#[inline(always)]
pub(crate) fn shared_addr(ptr: *const u8) -> SharedAddr {
    let a: u32;
    // SAFETY: address arithmetic only (no access).
    unsafe {
        asm!("{{ .reg .u64 %s; cvta.to.shared.u64 %s, {p}; cvt.u32.u64 {a}, %s; }}",
            p = in(reg64) ptr, a = out(reg32) a, options(pure, nomem, nostack))
    };
    a
}

/// `addr + bytes`.
#[inline(always)]
pub(crate) fn shared_addr_add(addr: SharedAddr, bytes: u32) -> SharedAddr {
    addr.wrapping_add(bytes)
}

/// `ld.shared.b32` at a 32-bit `.shared` address.
///
/// # Safety
/// `addr` must be 4 bytes of the block's shared memory, 4-byte aligned, that
/// no thread writes concurrently.
#[inline(always)]
pub(crate) unsafe fn ld_shared_u32_at(addr: SharedAddr) -> u32 {
    let d: u32;
    // SAFETY: the caller's contract. Reads memory: `readonly`.
    unsafe {
        asm!("ld.shared.b32 {d}, [{a}];", a = in(reg32) addr, d = out(reg32) d,
            options(nostack, readonly, pure))
    };
    d
}

/// `ld.shared.v2.b32` at a 32-bit `.shared` address.
///
/// # Safety
/// `addr` must be 8 bytes of the block's shared memory, 8-byte aligned, that
/// no thread writes concurrently.
#[inline(always)]
pub(crate) unsafe fn ld_shared_v2_at(addr: SharedAddr) -> [u32; 2] {
    let (d0, d1): (u32, u32);
    // SAFETY: the caller's contract. Reads memory: `readonly`.
    unsafe {
        asm!("ld.shared.v2.b32 {{{d0}, {d1}}}, [{a}];", a = in(reg32) addr,
            d0 = out(reg32) d0, d1 = out(reg32) d1, options(nostack, readonly, pure))
    };
    [d0, d1]
}

/// `ld.shared.v4.b32` at a 32-bit `.shared` address.
///
/// # Safety
/// `addr` must be 16 bytes of the block's shared memory, 16-byte aligned,
/// that no thread writes concurrently.
#[inline(always)]
pub(crate) unsafe fn ld_shared_v4_at(addr: SharedAddr) -> [u32; 4] {
    let d: [u32; 4];
    // SAFETY: the caller's contract. Reads memory: `readonly`.
    unsafe {
        let (d0, d1, d2, d3): (u32, u32, u32, u32);
        asm!("ld.shared.v4.b32 {{{d0}, {d1}, {d2}, {d3}}}, [{a}];", a = in(reg32) addr,
            d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
            options(nostack, readonly, pure));
        d = [d0, d1, d2, d3];
    }
    d
}

/// `st.shared.v4.b32` at a 32-bit `.shared` address.
///
/// # Safety
/// `addr` must be 16 bytes of the block's shared memory, 16-byte aligned,
/// that no other thread accesses concurrently.
#[inline(always)]
pub(crate) unsafe fn st_shared_v4_at(addr: SharedAddr, v: [u32; 4]) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!("st.shared.v4.b32 [{a}], {{{v0}, {v1}, {v2}, {v3}}};", a = in(reg32) addr,
            v0 = in(reg32) v[0], v1 = in(reg32) v[1], v2 = in(reg32) v[2], v3 = in(reg32) v[3],
            options(nostack))
    };
}

/// [`ldmatrix`] at a 32-bit `.shared` address.
///
/// # Safety
/// As [`ldmatrix`]'s, for the 16 bytes at `addr` in the `.shared` space.
#[inline(always)]
pub(crate) unsafe fn ldmatrix_at<const R: usize>(addr: SharedAddr, trans: bool) -> [u32; R] {
    let mut d = [0u32; R];
    // SAFETY: the caller's contract. A warp collective that reads shared
    // memory: `readonly`, not `pure` (see the module docs).
    unsafe {
        match (R, trans) {
            (2, false) => {
                asm!("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {{{d0}, {d1}}}, [{a}];",
                a = in(reg32) addr, d0 = out(reg32) d[0], d1 = out(reg32) d[1], options(nostack, readonly))
            }
            (2, true) => {
                asm!("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {{{d0}, {d1}}}, [{a}];",
                a = in(reg32) addr, d0 = out(reg32) d[0], d1 = out(reg32) d[1], options(nostack, readonly))
            }
            (4, false) => {
                asm!("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{d0}, {d1}, {d2}, {d3}}}, [{a}];",
                a = in(reg32) addr, d0 = out(reg32) d[0], d1 = out(reg32) d[1], d2 = out(reg32) d[2], d3 = out(reg32) d[3], options(nostack, readonly))
            }
            (4, true) => {
                asm!("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{d0}, {d1}, {d2}, {d3}}}, [{a}];",
                a = in(reg32) addr, d0 = out(reg32) d[0], d1 = out(reg32) d[1], d2 = out(reg32) d[2], d3 = out(reg32) d[3], options(nostack, readonly))
            }
            _ => unreachable!("ldmatrix_at loads 2 or 4 matrices"),
        }
    }
    d
}

/// One 128-bit load of global memory (`ld.global.v4.b32`, SASS `LDG.E.128`),
/// as four 32-bit words: a single instruction however the caller uses the
/// words (a plain `read` of a 16-byte vector may be split into scalar loads).
///
/// # Safety
/// `ptr` must be 16 bytes of global memory (a generic address in the global
/// window), 16-byte aligned, that no thread writes during the launch.
#[inline(always)]
pub(crate) unsafe fn ld_global_v4(ptr: *const u8) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller's contract; `cvta.to.global` turns the generic
    // address into a global one. The memory is unwritten during the launch:
    // `pure, readonly`.
    unsafe {
        asm!("{{ .reg .u64 %g; cvta.to.global.u64 %g, {p}; ld.global.v4.b32 {{{a}, {b}, {c}, {d}}}, [%g]; }}",
            p = in(reg64) ptr, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
            options(pure, readonly, nostack))
    };
    [a, b, c, d]
}

/// One 128-bit load of an output's global memory (`ld.global.v4.b32`,
/// SASS `LDG.E.128`): as [`ld_global_v4`], for memory this thread may also
/// write (not `pure`: it stays ordered with the thread's stores).
///
/// # Safety
/// `ptr` must be 16 bytes of global memory (a generic address in the global
/// window), 16-byte aligned, that no other thread writes during the launch.
#[inline(always)]
pub(crate) unsafe fn ld_global_v4_output(ptr: *const u8) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller's contract; `cvta.to.global` turns the generic
    // address into a global one.
    unsafe {
        asm!("{{ .reg .u64 %g; cvta.to.global.u64 %g, {p}; ld.global.v4.b32 {{{a}, {b}, {c}, {d}}}, [%g]; }}",
            p = in(reg64) ptr, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
            options(readonly, nostack))
    };
    [a, b, c, d]
}

/// One 128-bit store to global memory (`st.global.v4.b32`, SASS
/// `STG.E.128`): a single instruction for the four words.
///
/// # Safety
/// `ptr` must be 16 bytes of global memory (a generic address in the global
/// window), 16-byte aligned, that this thread alone accesses during the launch.
#[inline(always)]
pub(crate) unsafe fn st_global_v4(ptr: *mut u8, v: [u32; 4]) {
    // SAFETY: the caller's contract; `cvta.to.global` turns the generic
    // address into a global one.
    unsafe {
        asm!("{{ .reg .u64 %g; cvta.to.global.u64 %g, {p}; st.global.v4.b32 [%g], {{{a}, {b}, {c}, {d}}}; }}",
            p = in(reg64) ptr, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3],
            options(nostack))
    };
}

/// `fence.proxy.async.shared::cta`: orders this thread's generic-proxy
/// accesses to the block's shared memory with the async proxy's (bulk
/// copies, `wgmma`), both ways.
#[inline(always)]
pub(crate) fn fence_proxy_async_shared() {
    // SAFETY: a fence: no operands, no memory of its own. A memory clobber.
    unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) }
}

/// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`:
/// `bytes` from global `src` to shared `dst`, counted on the barrier at
/// `bar` when they land. A block's own `.shared::cta` addresses are
/// `.shared::cluster` addresses of itself (PTX ISA, state spaces), with or
/// without a cluster.
///
/// # Safety
/// `src` must be `bytes` of global memory (a generic address in the global
/// window) and `dst` `bytes` of the block's shared memory, both 16-byte
/// aligned, `bytes` a multiple of 16; `bar` a live barrier whose phase
/// expects the bytes; nobody may access `dst` before waiting on that phase.
#[inline(always)]
pub(crate) unsafe fn bulk_copy_to_shared(
    dst: SharedAddr,
    src: *const u8,
    bytes: u32,
    bar: SharedAddr,
) {
    // SAFETY: the caller's contract; cvta turns the generic source address
    // into a global one. Not `nomem`: it reads and (later) writes memory.
    unsafe {
        asm!("{{ .reg .u64 %s; cvta.to.global.u64 %s, {s}; \
              cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [%s], {n}, [{b}]; }}",
            d = in(reg32) dst, s = in(reg64) src, n = in(reg32) bytes, b = in(reg32) bar,
            options(nostack))
    }
}

/// `cp.async.bulk.tensor.Rd.shared::cluster.global.tile.mbarrier::complete_tx::bytes`:
/// the box of the tensor map at `map` (a generic address of its 128 bytes
/// in global memory) whose start corner is `corner`, into shared `dst`,
/// counted on the barrier at `bar` when it lands.
///
/// # Safety
/// `map` must be a tensor map the host encoded, live for the launch, whose
/// box is as many bytes as `dst` holds; `dst` aligned as TMA requires (128
/// bytes, the swizzle's period when swizzled); `bar` a live barrier whose
/// phase expects the box's bytes; nobody may access `dst` before waiting on
/// that phase.
#[inline(always)]
pub(crate) unsafe fn tma_load<const R: usize>(
    dst: SharedAddr,
    map: *const u8,
    corner: [i32; R],
    bar: SharedAddr,
) {
    let mut c = [0i32; 5];
    c[..R].copy_from_slice(&corner);
    // SAFETY: the caller's contract. Not `nomem`: it reads global memory
    // and (later) writes shared memory.
    unsafe {
        match R {
            1 => {
                asm!("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{c0}}}], [{b}];",
                d = in(reg32) dst, m = in(reg64) map, c0 = in(reg32) c[0], b = in(reg32) bar, options(nostack))
            }
            2 => {
                asm!("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{c0}, {c1}}}], [{b}];",
                d = in(reg32) dst, m = in(reg64) map, c0 = in(reg32) c[0], c1 = in(reg32) c[1], b = in(reg32) bar, options(nostack))
            }
            3 => {
                asm!("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{c0}, {c1}, {c2}}}], [{b}];",
                d = in(reg32) dst, m = in(reg64) map, c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], b = in(reg32) bar, options(nostack))
            }
            4 => {
                asm!("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{c0}, {c1}, {c2}, {c3}}}], [{b}];",
                d = in(reg32) dst, m = in(reg64) map, c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3], b = in(reg32) bar, options(nostack))
            }
            _ => {
                asm!("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{c0}, {c1}, {c2}, {c3}, {c4}}}], [{b}];",
                d = in(reg32) dst, m = in(reg64) map, c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3], c4 = in(reg32) c[4], b = in(reg32) bar, options(nostack))
            }
        }
    }
}

/// `cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group`: the box
/// of the tensor map at `map` whose start corner is `corner` written from
/// the shared tile at `src` (elements outside the tensor are not written),
/// in this thread's current bulk async-group.
///
/// # Safety
/// `map` must be a tensor map the host encoded for a buffer this launch may
/// write, whose box is as many bytes as `src` holds; `src` aligned as TMA
/// requires (128 bytes, the swizzle's period when swizzled), its bytes
/// fenced for the async proxy by their writers and not written again until
/// a `wait_group.read` covers the store; no other write of those global
/// elements unordered with it.
#[inline(always)]
pub(crate) unsafe fn tma_store(src: SharedAddr, map: *const u8, corner: [i32; 3]) {
    // SAFETY: the caller's contract. Not `nomem`: it reads shared memory
    // and writes global memory.
    unsafe {
        asm!("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [{m}, {{{c0}, {c1}, {c2}}}], [{s}];",
            m = in(reg64) map, c0 = in(reg32) corner[0], c1 = in(reg32) corner[1],
            c2 = in(reg32) corner[2], s = in(reg32) src, options(nostack))
    }
}

/// `cp.async.bulk.commit_group`: this thread's bulk stores so far form a group.
#[inline(always)]
pub(crate) fn bulk_commit_group() {
    // SAFETY: no operands.
    unsafe { asm!("cp.async.bulk.commit_group;", options(nostack)) }
}

/// `cp.async.bulk.wait_group.read keep`: waits until at most `keep` of
/// this thread's bulk groups have not finished reading their sources.
/// `keep` must be an immediate, hence the match.
#[inline(always)]
pub(crate) fn bulk_wait_group_read(keep: u32) {
    // SAFETY: no operands. Not `nomem`: shared stores after it must not
    // move above it.
    unsafe {
        match keep {
            0 => asm!("cp.async.bulk.wait_group.read 0;", options(nostack)),
            1 => asm!("cp.async.bulk.wait_group.read 1;", options(nostack)),
            2 => asm!("cp.async.bulk.wait_group.read 2;", options(nostack)),
            _ => asm!("cp.async.bulk.wait_group.read 3;", options(nostack)),
        }
    }
}

/// `prefetch.tensormap`: brings the tensor map at `map` into the cache the
/// TMA reads it through (once per kernel, before the first copy).
#[inline(always)]
pub(crate) fn tma_prefetch_map(map: *const u8) {
    // SAFETY: a prefetch: a hint that reads nothing the program sees and
    // faults on no address.
    unsafe {
        asm!("prefetch.tensormap [{m}];", m = in(reg64) map, options(nostack, readonly, preserves_flags))
    }
}

/// `mbarrier.init.shared::cta.b64`: a fresh barrier expecting `count`
/// arrivals a phase.
///
/// # Safety
/// `addr` is 8 bytes of the block's shared memory, 8-byte aligned, not a
/// live barrier, that no other thread accesses until a barrier publishes it;
/// `count` in 1 ..= 2^20 − 1.
#[inline(always)]
pub(crate) unsafe fn mbarrier_init(addr: SharedAddr, count: u32) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!("mbarrier.init.shared::cta.b64 [{a}], {n};", a = in(reg32) addr, n = in(reg32) count,
            options(nostack))
    };
}

/// `mbarrier.arrive.shared::cta.b64` (release, `.cta`).
///
/// # Safety
/// `addr` is a live barrier.
#[inline(always)]
pub(crate) unsafe fn mbarrier_arrive(addr: SharedAddr) {
    // SAFETY: the caller's contract. A memory clobber: it releases.
    unsafe {
        asm!("mbarrier.arrive.shared::cta.b64 _, [{a}];", a = in(reg32) addr, options(nostack))
    };
}

/// `mbarrier.arrive.expect_tx.shared::cta.b64`.
///
/// # Safety
/// `addr` is a live barrier.
#[inline(always)]
pub(crate) unsafe fn mbarrier_arrive_expect_tx(addr: SharedAddr, bytes: u32) {
    // SAFETY: the caller's contract. A memory clobber: it releases.
    unsafe {
        asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{a}], {b};", a = in(reg32) addr,
            b = in(reg32) bytes, options(nostack))
    };
}

/// `mbarrier.expect_tx.relaxed.cta.shared::cta.b64`.
///
/// # Safety
/// `addr` is a live barrier.
#[inline(always)]
pub(crate) unsafe fn mbarrier_expect_tx(addr: SharedAddr, bytes: u32) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [{a}], {b};", a = in(reg32) addr,
            b = in(reg32) bytes, options(nostack))
    };
}

/// `mbarrier.complete_tx.relaxed.cta.shared::cta.b64`.
///
/// # Safety
/// `addr` is a live barrier.
#[inline(always)]
pub(crate) unsafe fn mbarrier_complete_tx(addr: SharedAddr, bytes: u32) {
    // SAFETY: the caller's contract. A memory clobber.
    unsafe {
        asm!("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [{a}], {b};", a = in(reg32) addr,
            b = in(reg32) bytes, options(nostack))
    };
}

/// `mbarrier.test_wait.parity.shared::cta.b64` for phase `phase`'s parity
/// (acquire, `.cta`, when true).
///
/// # Safety
/// `addr` is a live barrier.
#[inline(always)]
pub(crate) unsafe fn mbarrier_test_wait(addr: SharedAddr, phase: u32) -> bool {
    let done: u32;
    // SAFETY: the caller's contract. A memory clobber: it acquires.
    unsafe {
        asm!("{{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [{a}], {q}; \
              selp.u32 {d}, 1, 0, p; }}",
            a = in(reg32) addr, q = in(reg32) phase & 1, d = out(reg32) done, options(nostack))
    };
    done != 0
}

/// `mbarrier.try_wait.parity.shared::cta.b64` for phase `phase`'s parity: as
/// [`mbarrier_test_wait`], but the hardware may suspend the thread a while
/// before answering false.
///
/// # Safety
/// `addr` is a live barrier.
#[inline(always)]
pub(crate) unsafe fn mbarrier_try_wait(addr: SharedAddr, phase: u32) -> bool {
    let done: u32;
    // SAFETY: the caller's contract. A memory clobber: it acquires.
    unsafe {
        asm!("{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{a}], {q}; \
              selp.u32 {d}, 1, 0, p; }}",
            a = in(reg32) addr, q = in(reg32) phase & 1, d = out(reg32) done, options(nostack))
    };
    done != 0
}

/// `mbarrier.inval.shared::cta.b64`.
///
/// # Safety
/// `addr` is a live barrier that no thread uses afterwards.
#[inline(always)]
pub(crate) unsafe fn mbarrier_inval(addr: SharedAddr) {
    // SAFETY: the caller's contract.
    unsafe { asm!("mbarrier.inval.shared::cta.b64 [{a}];", a = in(reg32) addr, options(nostack)) };
}

/// `.shared` window offset of a generic pointer into the block's shared
/// memory: what a `wgmma` descriptor's address field holds.
#[inline(always)]
pub(crate) fn shared_window_offset(ptr: *const u8) -> u32 {
    shared_addr(ptr)
}

/// `wgmma.fence.sync.aligned`: orders this warp's earlier register accesses
/// to accumulators before the `wgmma.mma_async`s after it.
#[inline(always)]
pub(crate) fn wgmma_fence() {
    // SAFETY: a warpgroup fence: no memory access, no operand.
    unsafe { asm!("wgmma.fence.sync.aligned;", options(nostack)) }
}

/// `wgmma.commit_group.sync.aligned`.
#[inline(always)]
pub(crate) fn wgmma_commit() {
    // SAFETY: closes this warp's group of issued `wgmma`s: no operand.
    unsafe { asm!("wgmma.commit_group.sync.aligned;", options(nostack)) }
}

/// `wgmma.wait_group.sync.aligned PENDING` (`PENDING` ≤ 7, the caller's
/// compile-time check).
#[inline(always)]
pub(crate) fn wgmma_wait<const PENDING: u32>() {
    macro_rules! wait {
        ($($n:literal)*) => {
            match PENDING {
                // SAFETY: waits for this warp's older `wgmma` groups; reads no
                // register, and the shared memory it orders is the kernel's.
                $($n => unsafe { asm!(concat!("wgmma.wait_group.sync.aligned ", $n, ";"), options(nostack)) },)*
                _ => unreachable!(),
            }
        };
    }
    wait!(0 1 2 3 4 5 6 7)
}

/// One `wgmma.mma_async` per width, element type and pair of transposes;
/// the accumulator's registers listed one by one (`{0}, {1}, …`).
macro_rules! wgmma_widths {
    ($($name:ident, $ra:ident, $wait:ident, $n:literal, $regs:literal, [$first:literal $($i:literal)*];)*) => { $(
        #[inline(always)]
        fn $name(d: &mut [f32; $regs], a: u64, b: u64, input: Input, tnsp_a: bool, tnsp_b: bool) {
            macro_rules! mma {
                ($ty:literal, $ta:literal, $tb:literal) => {
                    asm!(concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty,
                            " {{{", $first, "}" $(, ", {", $i, "}")*, "}}, {a}, {b}, 1, 1, 1, ", $ta, ", ", $tb, ";"),
                        inout(reg32) d[$first], $(inout(reg32) d[$i],)*
                        a = in(reg64) a, b = in(reg64) b, options(nostack))
                };
            }
            // SAFETY: the descriptors are an `OperandTile`'s (in the block's
            // shared memory, on the swizzle's period, strides of its layout);
            // `d` is the accumulator that the `InFlight` holds until the
            // final `wait_group` (`wgmma_commit_wait_all`), whose operands
            // they are again. The warpgroup issuing it together is the
            // kernel's rule (the emulator checks it).
            // tf32: k = 8, no transpose operands (its tiles are K-major,
            // which `OperandTile::new` checks at compile time).
            macro_rules! mma_tf32 {
                () => {
                    asm!(concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k8.f32.tf32.tf32",
                            " {{{", $first, "}" $(, ", {", $i, "}")*, "}}, {a}, {b}, 1, 1, 1;"),
                        inout(reg32) d[$first], $(inout(reg32) d[$i],)*
                        a = in(reg64) a, b = in(reg64) b, options(nostack))
                };
            }
            unsafe {
                match (input, tnsp_a, tnsp_b) {
                    (Input::F16, false, false) => mma!("f16", 0, 0),
                    (Input::F16, false, true) => mma!("f16", 0, 1),
                    (Input::F16, true, false) => mma!("f16", 1, 0),
                    (Input::F16, true, true) => mma!("f16", 1, 1),
                    (Input::Bf16, false, false) => mma!("bf16", 0, 0),
                    (Input::Bf16, false, true) => mma!("bf16", 0, 1),
                    (Input::Bf16, true, false) => mma!("bf16", 1, 0),
                    (Input::Bf16, true, true) => mma!("bf16", 1, 1),
                    (Input::Tf32, _, _) => mma_tf32!(),
                }
            }
        }

        #[inline(always)]
        fn $ra(d: &mut [f32; $regs], a: [u32; 4], b: u64, input: Input, tnsp_b: bool) {
            macro_rules! mma {
                ($ty:literal, $tb:literal) => {
                    asm!(concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty,
                            " {{{", $first, "}" $(, ", {", $i, "}")*, "}}, {{{a0}, {a1}, {a2}, {a3}}}, {b}, 1, 1, 1, ", $tb, ";"),
                        inout(reg32) d[$first], $(inout(reg32) d[$i],)*
                        a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                        b = in(reg64) b, options(nostack))
                };
            }
            // SAFETY: as `$name`'s, with A in this lane's registers (read
            // asynchronously too: ptxas keeps them until the wait).
            // tf32 never comes here: `mma_a_registers` takes 2-byte
            // types only (a compile-time check).
            unsafe {
                match (input, tnsp_b) {
                    (Input::F16, false) => mma!("f16", 0),
                    (Input::F16, true) => mma!("f16", 1),
                    (Input::Bf16, false) | (Input::Tf32, false) => mma!("bf16", 0),
                    (Input::Bf16, true) | (Input::Tf32, true) => mma!("bf16", 1),
                }
            }
        }

        #[inline(always)]
        fn $wait(d: &mut [f32; $regs]) {
            // SAFETY: commits and waits for every group; the registers are
            // operands (named in a PTX comment), so the compiler reads and
            // writes them only after the wait.
            unsafe {
                asm!(concat!("wgmma.commit_group.sync.aligned;\n\twgmma.wait_group.sync.aligned 0; // {", $first, "}" $(, " {", $i, "}")*),
                    inout(reg32) d[$first], $(inout(reg32) d[$i],)* options(nostack))
            }
        }
    )* };
}
wgmma_widths! {
    wgmma_m64n64, wgmma_m64n64_ra, wgmma_wait_all_32, 64, 32, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31];
    wgmma_m64n128, wgmma_m64n128_ra, wgmma_wait_all_64, 128, 64, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63];
    wgmma_m64n256, wgmma_m64n256_ra, wgmma_wait_all_128, 256, 128, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127];
}

/// `d`'s array as `[f32; R2]` when `R == R2`.
#[inline(always)]
fn regs_as<const R: usize, const R2: usize>(d: &mut [f32; R]) -> &mut [f32; R2] {
    assert!(R == R2);
    // SAFETY: the same type when R == R2 (asserted; a constant, folded).
    unsafe { &mut *(d as *mut [f32; R]).cast::<[f32; R2]>() }
}

/// `wgmma.mma_async.sync.aligned.m64n(2R)k16.f32` for `R` ∈ {32, 64, 128}
/// accumulator registers, both operands through descriptors.
#[inline(always)]
pub(crate) fn wgmma_mma_async<const R: usize>(
    d: &mut [f32; R],
    a: u64,
    b: u64,
    input: Input,
    tnsp_a: bool,
    tnsp_b: bool,
) {
    match R {
        32 => wgmma_m64n64(regs_as(d), a, b, input, tnsp_a, tnsp_b),
        64 => wgmma_m64n128(regs_as(d), a, b, input, tnsp_a, tnsp_b),
        128 => wgmma_m64n256(regs_as(d), a, b, input, tnsp_a, tnsp_b),
        _ => unreachable!(),
    }
}

/// [`wgmma_mma_async`] with A in this lane's registers (its fragment of the
/// warp's 16 rows).
#[inline(always)]
pub(crate) fn wgmma_mma_async_ra<const R: usize>(
    d: &mut [f32; R],
    a: [u32; 4],
    b: u64,
    input: Input,
    tnsp_b: bool,
) {
    match R {
        32 => wgmma_m64n64_ra(regs_as(d), a, b, input, tnsp_b),
        64 => wgmma_m64n128_ra(regs_as(d), a, b, input, tnsp_b),
        128 => wgmma_m64n256_ra(regs_as(d), a, b, input, tnsp_b),
        _ => unreachable!(),
    }
}

/// `setmaxnreg.{inc,dec}.sync.aligned.u32 REGS` (`REGS` in 24 ..= 256, a
/// multiple of 8: the caller's compile-time check).
#[inline(always)]
pub(crate) fn setmaxnreg<const INCREASE: bool, const REGS: u32>() {
    // SAFETY: changes this warp's register budget; the warpgroup executing
    // it together, and the kernel's register limit, are the caller's rules.
    unsafe {
        if INCREASE {
            asm!("setmaxnreg.inc.sync.aligned.u32 {r};", r = const REGS, options(nostack));
        } else {
            asm!("setmaxnreg.dec.sync.aligned.u32 {r};", r = const REGS, options(nostack));
        }
    }
}

/// Commits, then `wgmma.wait_group 0` with the accumulator's registers as
/// operands: after it they hold every `mma`'s result.
#[inline(always)]
pub(crate) fn wgmma_commit_wait_all<const R: usize>(d: &mut [f32; R]) {
    match R {
        32 => wgmma_wait_all_32(regs_as(d)),
        64 => wgmma_wait_all_64(regs_as(d)),
        128 => wgmma_wait_all_128(regs_as(d)),
        _ => unreachable!(),
    }
}
