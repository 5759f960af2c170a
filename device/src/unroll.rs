//! Loops the compiler must unroll: a hot loop over a few fragments or k-slices
//! is only lean when each iteration's offsets are constants (`ldmatrix [r +
//! imm]`), and LLVM keeps a loop of a large body rolled however short it is.

/// Calls `f(0)`, `f(1)`, …, `f(n − 1)` in order. On the GPU they are
/// written out one after another when `n` is a constant up to 8 (the
/// kernels' tile loops: the `match` folds once the caller is inlined), and a
/// plain loop otherwise; on the host (the emulator) always a plain loop.
///
/// Why not the written-out form on the host too: it is for nvptx's register
/// allocation, and the host gains nothing from it, while in a build without
/// optimisation (a user's `cargo build` of their app, which compiles the
/// library's kernels for the emulator) nothing folds the `match` — every arm
/// keeps its copies of `f`, 19 per loop and 361 per [`unroll2`], and the
/// library's kernels took 18 GB and 7 minutes to compile.
#[inline(always)]
pub fn unroll(n: usize, f: impl FnMut(usize)) {
    #[cfg(target_arch = "nvptx64")]
    written_out(n, f);
    #[cfg(not(target_arch = "nvptx64"))]
    (0..n).for_each(f);
}

/// [`unroll`]'s GPU form: `f(0)` … `f(n − 1)` written out for `n` up to 4
/// and 8, a loop otherwise.
#[cfg(any(target_arch = "nvptx64", test))]
#[inline(always)]
fn written_out(n: usize, mut f: impl FnMut(usize)) {
    match n {
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
        _ => (0..n).for_each(f),
    }
}

/// Calls `f(i, j)` for every `i < m` and `j < n`, row by row, each loop
/// written out as by [`unroll`]: a warp tile's `MI × NI` fragments, each a
/// constant index (an indexed loop over them would move them to local
/// memory).
#[inline(always)]
pub fn unroll2(m: usize, n: usize, mut f: impl FnMut(usize, usize)) {
    unroll(
        m,
        #[inline(always)]
        |i| {
            unroll(
                n,
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
    unroll(
        N - 1,
        #[inline(always)]
        |i| out[i + 1] = f(i + 1),
    );
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn unroll_calls_each_index_once_in_order() {
        for n in 0..12 {
            let mut seen = Vec::new();
            super::unroll(n, |i| seen.push(i));
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
            // The GPU's form, checked here on the host.
            let mut written = Vec::new();
            super::written_out(n, |i| written.push(i));
            assert_eq!(written, seen, "written out, n = {n}");
        }
    }

    #[test]
    fn unroll2_calls_each_pair_once_row_by_row() {
        for (m, n) in [(0, 3), (3, 0), (1, 1), (4, 8), (8, 2), (5, 7)] {
            let mut seen = Vec::new();
            super::unroll2(m, n, |i, j| seen.push((i, j)));
            let want: Vec<_> = (0..m).flat_map(|i| (0..n).map(move |j| (i, j))).collect();
            assert_eq!(seen, want, "{m} × {n}");
        }
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
