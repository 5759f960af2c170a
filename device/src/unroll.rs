//! Loops the compiler must unroll: a hot loop over a few fragments or k-slices
//! is only lean when each iteration's offsets are constants (`ldmatrix [r +
//! imm]`), and LLVM keeps a loop of a large body rolled however short it is.
//! The counts are const parameters (`unroll::<S>(…)`), so that only the
//! written-out form a kernel uses is compiled (see [`unroll`]).

/// Calls `f(0)`, `f(1)`, …, `f(N − 1)` in order. On the GPU they are
/// written out one after another when `N` is up to 4 or 8 (the kernels' tile
/// loops), and a plain loop otherwise; on the host (the emulator) always a
/// plain loop.
///
/// `N` is a const parameter, not an argument, for the compiler's sake: the
/// written-out form is a `match N`, and rustc generates only the arm a
/// monomorphised `N` takes. With a run-time count the `match` reached LLVM
/// whole, and LLVM inlines every arm's copies of `f` before it folds the
/// `match` — 19 per loop, 361 per [`unroll2`], multiplied again by every loop
/// nested inside `f`. The tensor-core GEMMs took 10 minutes and 6.8 GB of one
/// `rustc` that way, and 66 s and 0.8 GB with plain loops (2026-11-28).
///
/// Why not the written-out form on the host too: it is for nvptx's register
/// allocation, and the host gains nothing from it, while in a build without
/// optimisation (a user's `cargo build` of their app, which compiles the
/// library's kernels for the emulator) every written-out copy is compiled.
#[inline(always)]
pub fn unroll<const N: usize>(f: impl FnMut(usize)) {
    #[cfg(target_arch = "nvptx64")]
    written_out::<N>(f);
    #[cfg(not(target_arch = "nvptx64"))]
    (0..N).for_each(f);
}

/// [`unroll`] for a count `n ≤ MAX` that is a constant the type system cannot
/// pass as a const argument (an expression of const parameters, `BK / T::K`):
/// `unroll::<MAX>` with each call behind `i < n`, which folds away once `n` is
/// a constant. A run-time `n` works too (the calls stay guarded); `n > MAX`
/// panics rather than skip iterations.
#[inline(always)]
pub fn unroll_upto<const MAX: usize>(n: usize, mut f: impl FnMut(usize)) {
    assert!(n <= MAX, "unroll_upto: more iterations than MAX");
    unroll::<MAX>(
        #[inline(always)]
        |i| {
            if i < n {
                f(i)
            }
        },
    );
}

/// [`unroll`]'s GPU form: `f(0)` … `f(N − 1)` written out for `N` up to 4
/// and 8, a loop otherwise.
#[cfg(any(target_arch = "nvptx64", test))]
#[inline(always)]
fn written_out<const N: usize>(mut f: impl FnMut(usize)) {
    match N {
        0 => {}
        1 => f(0),
        2 => {
            f(0);
            f(1);
        }
        3 => {
            f(0);
            f(1);
            f(2);
        }
        4 => {
            f(0);
            f(1);
            f(2);
            f(3);
        }
        8 => {
            f(0);
            f(1);
            f(2);
            f(3);
            f(4);
            f(5);
            f(6);
            f(7);
        }
        _ => (0..N).for_each(f),
    }
}

/// Calls `f(i, j)` for every `i < M` and `j < N`, row by row, each loop
/// written out as by [`unroll`]: a warp tile's `MI × NI` fragments, each a
/// constant index (an indexed loop over them would move them to local
/// memory).
#[inline(always)]
pub fn unroll2<const M: usize, const N: usize>(mut f: impl FnMut(usize, usize)) {
    unroll::<M>(
        #[inline(always)]
        |i| {
            unroll::<N>(
                #[inline(always)]
                |j| f(i, j),
            )
        },
    );
}

/// `[f(0), f(1), …, f(N − 1)]`, the calls written out as by [`unroll`]
/// (`core::array::from_fn`'s loop may stay rolled for 8 elements, and an
/// array indexed in a loop leaves the registers for local memory).
#[inline(always)]
pub fn array<T: Copy, const N: usize>(mut f: impl FnMut(usize) -> T) -> [T; N] {
    const { assert!(N > 0, "unroll::array: at least one element") };
    let mut out = [f(0); N];
    unroll::<N>(
        #[inline(always)]
        |i| {
            if i > 0 {
                out[i] = f(i)
            }
        },
    );
    out
}

/// A point in a written-out loop that an 8 × 8 f32 accumulator tile passes
/// through: no instruction, but every computation of `acc` before it stays
/// before it, every one after it stays after it, and no memory access
/// crosses it. A SIMT GEMM's rows of FMAs written out (`unroll::<8>`, 64
/// FMAs a row) reach ptxas in the order the kernel wrote them: without it,
/// LLVM regrouped the 512 FMAs of a k-step by accumulator (all 8 rows of
/// `acc[0][0]`, then of `acc[0][1]`, …) and moved each shared load to its
/// first use, so ptxas held all 8 rows' fragments at once (174–244
/// registers, or spills under a 128-register cap) where one row ahead
/// needs 32. On the host (the emulator) it does nothing.
#[inline(always)]
pub fn order_point(acc: &mut [[f32; 8]; 8]) {
    crate::arch::order_point_f32x64(acc)
}

#[cfg(test)]
mod tests {
    /// `unroll::<N>` and its GPU form, checked here on the host.
    fn unrolled<const N: usize>() {
        let mut seen = Vec::new();
        super::unroll::<N>(|i| seen.push(i));
        assert_eq!(seen, (0..N).collect::<Vec<_>>(), "N = {N}");
        let mut written = Vec::new();
        super::written_out::<N>(|i| written.push(i));
        assert_eq!(written, seen, "written out, N = {N}");
    }

    #[test]
    fn unroll_calls_each_index_once_in_order() {
        unrolled::<0>();
        unrolled::<1>();
        unrolled::<2>();
        unrolled::<3>();
        unrolled::<4>();
        unrolled::<5>();
        unrolled::<7>();
        unrolled::<8>();
        unrolled::<11>();
    }

    #[test]
    fn unroll_upto_calls_the_first_n_indices_and_refuses_more_than_max() {
        for n in 0..=4 {
            let mut seen = Vec::new();
            super::unroll_upto::<4>(n, |i| seen.push(i));
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
        let over = std::panic::catch_unwind(|| super::unroll_upto::<4>(5, |_| {}));
        assert!(
            over.is_err(),
            "5 iterations of at most 4 must panic, not skip one"
        );
    }

    fn pairs<const M: usize, const N: usize>() {
        let mut seen = Vec::new();
        super::unroll2::<M, N>(|i, j| seen.push((i, j)));
        let want: Vec<_> = (0..M).flat_map(|i| (0..N).map(move |j| (i, j))).collect();
        assert_eq!(seen, want, "{M} × {N}");
    }

    #[test]
    fn unroll2_calls_each_pair_once_row_by_row() {
        pairs::<0, 3>();
        pairs::<3, 0>();
        pairs::<1, 1>();
        pairs::<4, 8>();
        pairs::<8, 2>();
        pairs::<5, 7>();
    }

    #[test]
    fn array_calls_each_index_once_in_order() {
        let mut seen = Vec::new();
        let a: [usize; 8] = super::array(|i| {
            seen.push(i);
            10 * i
        });
        assert_eq!(a, [0, 10, 20, 30, 40, 50, 60, 70]);
        assert_eq!(seen, (0..8).collect::<Vec<_>>());
        let b: [u8; 5] = super::array(|i| i as u8);
        assert_eq!(b, [0, 1, 2, 3, 4]);
    }
}
