//! A panel of a stored matrix in global memory, proven in bounds and 16-byte
//! aligned by one check, that a SIMT kernel reads into registers one 16-byte
//! vector per thread per tile, with no check per load.
//!
//! - [`VectorPanel`]: `steps` tiles of `ROWS × COLS` elements of a row-major
//!   matrix in a [`Global`] buffer (rows `ld` apart, tile `s` starting
//!   `s·step` elements after tile 0): the `A` or `B` slices a GEMM block
//!   reads at each of its k-steps. Only [`VectorPanel::check`] makes one.
//! - [`ThreadVectors`]: one thread's vector of each tile, in order (from
//!   [`VectorPanel::thread_vectors`]): its address computed once and advanced
//!   by the panel's step, each load one `LDG.E.128` with no bounds or
//!   alignment check; [`VectorPairs`] steps two of them (a k-step's `A` and
//!   `B`) with one count.
//!
//! The loads cannot be reached without the check, and no safe function gains
//! a precondition: a block whose panel is not proven (an edge tile, an odd
//! leading dimension) reads with checked loads instead
//! ([`Global::vectors16`], [`Global::load`]). This is the register-load twin
//! of [`crate::mma::InteriorPanel`] (which copies by `cp.async`).
//!
//! ```
//! use warpforge_device::global::Vector16;
//! use warpforge_device::{Global, panel::VectorPanel};
//! // A 4 × 8 f32 matrix (rows 8 apart), 16-byte aligned.
//! let data: [Vector16<f32, 4>; 8] = core::array::from_fn(|v| {
//!     Vector16(core::array::from_fn(|i| (4 * v + i) as f32))
//! });
//! // SAFETY (doc example): `data` is valid and unwritten while `g` lives;
//! // host memory is the emulator's global memory.
//! let g = unsafe { Global::from_raw(data.as_ptr().cast::<f32>(), 32) };
//! // 2 tiles of 4 × 4 along the rows (k along the columns: step 4), read by
//! // 4 threads, one vector (a row of the tile) each.
//! let panel = VectorPanel::<f32, 4, 4>::check(g, 0, 8, 4, 2).unwrap();
//! let mut mine = panel.thread_vectors::<4>((1, 4)).unwrap();
//! assert_eq!(mine.load_next(), Some([8.0, 9.0, 10.0, 11.0])); // row 1, tile 0
//! assert_eq!(mine.load_next(), Some([12.0, 13.0, 14.0, 15.0])); // row 1, tile 1
//! assert_eq!(mine.load_next(), None);
//! // A third tile would run past the buffer.
//! assert!(VectorPanel::<f32, 4, 4>::check(g, 0, 8, 4, 3).is_none());
//! // A row stride of 6 f32 (24 bytes) leaves the second row misaligned.
//! assert!(VectorPanel::<f32, 2, 4>::check(g, 0, 6, 4, 1).is_none());
//! ```

use crate::global::{Global, Plain, Vector16};

/// Proof, from one check, that a *panel* of a stored row-major matrix is
/// inside its [`Global`] buffer and that each of its 16-byte vectors is
/// 16-byte aligned: `steps` tiles of `ROWS × COLS` elements (`COLS` whole
/// 16-byte vectors), rows `ld` elements apart, tile `s` starting `s·step`
/// elements after tile 0, which starts at element `origin`.
///
/// Only [`VectorPanel::check`] makes one (the fields are private); the
/// unchecked loads ([`ThreadVectors`]) come from it. See the [module
/// docs](self) for an example.
#[derive(Clone, Copy)]
pub struct VectorPanel<'a, T, const ROWS: usize, const COLS: usize> {
    src: Global<'a, T>,
    origin: usize,
    ld: usize,
    step: usize,
    steps: usize,
}

impl<'a, T: Plain, const ROWS: usize, const COLS: usize> VectorPanel<'a, T, ROWS, COLS> {
    /// Elements of one 16-byte vector; checks the shape at compile time.
    const CHUNK: usize = {
        let size = core::mem::size_of::<T>();
        assert!(
            size != 0 && 16 % size == 0,
            "VectorPanel: the element size must divide 16"
        );
        assert!(
            ROWS > 0 && COLS > 0 && COLS.is_multiple_of(16 / size),
            "VectorPanel: a tile of whole 16-byte vectors per row"
        );
        16 / size
    };

    /// The panel, if every element of its `steps` tiles is inside `src` and
    /// every 16-byte vector of them is 16-byte aligned (the first, and `ld`
    /// and `step` in bytes multiples of 16 wherever they are used); `None`
    /// otherwise, or for no tiles. One check, whatever the panel's size.
    #[inline(always)]
    pub fn check(
        src: Global<'a, T>,
        origin: usize,
        ld: usize,
        step: usize,
        steps: usize,
    ) -> Option<Self> {
        let _ = Self::CHUNK;
        let size = core::mem::size_of::<T>();
        // The farthest element: the last tile's last row's end (every
        // offset is non-negative, so no element lies beyond it).
        let end = steps
            .checked_sub(1)?
            .checked_mul(step)?
            .checked_add((ROWS - 1).checked_mul(ld)?)?
            .checked_add(origin)?
            .checked_add(COLS)?;
        if end > src.len() {
            return None;
        }
        // In bounds, so `origin`, and `ld` and `step` where used, are at most
        // the buffer's length: their byte counts do not overflow.
        let first = (src.as_ptr() as usize).wrapping_add(origin * size);
        let aligned = first.is_multiple_of(16)
            && (ROWS == 1 || (ld * size).is_multiple_of(16))
            && (steps == 1 || (step * size).is_multiple_of(16));
        aligned.then_some(VectorPanel {
            src,
            origin,
            ld,
            step,
            steps,
        })
    }

    /// The number of tiles.
    #[inline(always)]
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Thread `t` of `threads`' vector of each tile, in order: vector `t`
    /// of the tile's `ROWS · COLS/N`, row by row (consecutive threads along
    /// a row: coalesced), so row `t / (COLS/N)`, columns `(t mod (COLS/N))·N
    /// ..`. `None` unless `threads` is exactly the tile's vectors (one per
    /// thread) and the panel has at most `u32::MAX` tiles. Uniform over the
    /// block: the conditions do not depend on `t` (a `t` past the block, a
    /// bug, reads the last thread's vectors). `N · size_of::<T>()` must be
    /// 16 (a compile-time error otherwise).
    #[inline(always)]
    pub fn thread_vectors<const N: usize>(
        &self,
        (t, threads): (usize, usize),
    ) -> Option<ThreadVectors<'a, T, N>> {
        const {
            assert!(
                N * core::mem::size_of::<T>() == 16,
                "a Vector16 is 16 bytes"
            )
        };
        let _ = Self::CHUNK;
        let per_row = COLS / N;
        let fits = threads > 0 && threads == ROWS * per_row && self.steps <= u32::MAX as usize;
        if !fits {
            return None;
        }
        let t = t.min(threads - 1);
        let (r, c) = (t / per_row, (t % per_row) * N);
        // r < ROWS and c + N ≤ COLS: inside tile 0, so in bounds (the
        // panel's check) and no product here overflows.
        Some(ThreadVectors {
            src: self.src,
            next: self
                .src
                .as_ptr()
                .wrapping_add(self.origin + r * self.ld + c)
                .cast(),
            step: self.step,
            left: self.steps as u32,
        })
    }
}

/// One thread's 16-byte vector of each tile of a [`VectorPanel`] (from
/// [`VectorPanel::thread_vectors`]), its address computed once: each
/// [`load_next`](Self::load_next) is one 128-bit global load (`LDG.E.128`) and an
/// add, no check per load.
#[derive(Clone, Copy)]
pub struct ThreadVectors<'a, T, const N: usize> {
    src: Global<'a, T>,
    /// This thread's vector of the next tile (past the panel once none is
    /// left: never read then).
    next: *const Vector16<T, N>,
    /// Elements between tiles.
    step: usize,
    /// Tiles not yet read.
    left: u32,
}

impl<'a, T: Plain, const N: usize> ThreadVectors<'a, T, N> {
    /// Tiles not yet read.
    #[inline(always)]
    pub fn left(&self) -> usize {
        self.left as usize
    }

    /// This thread's vector of the next tile (the first, then each in turn);
    /// `None` once every tile has been read. Uniform over the block.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load_next(&mut self) -> Option<[T; N]> {
        if self.left == 0 {
            return None;
        }
        // SAFETY: a tile is left (checked just above).
        Some(unsafe { self.read() })
    }

    /// The two threads' streams (a k-step's `A` and `B` vectors) as one, if
    /// they have as many tiles left: then one count serves both.
    #[inline(always)]
    pub fn zip<U: Plain, const M: usize>(
        self,
        other: ThreadVectors<'a, U, M>,
    ) -> Option<VectorPairs<'a, T, N, U, M>> {
        (self.left == other.left).then_some(VectorPairs {
            first: self,
            second: other,
        })
    }

    /// Reads this thread's vector of the next tile and moves to the tile
    /// after it.
    ///
    /// # Safety
    /// A tile is left (`left > 0`; a caller may have checked it of a twin
    /// with as many tiles left).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    unsafe fn read(&mut self) -> [T; N] {
        let p = self.next;
        // The emulator checks what the panel's proof claims, so that a
        // wrong proof is an out-of-bounds fault in the tests rather than a
        // silent read past the buffer; the GPU trusts it.
        #[cfg(not(target_arch = "nvptx64"))]
        {
            let size = core::mem::size_of::<T>();
            let at = (p as usize).wrapping_sub(self.src.as_ptr() as usize) / size;
            assert!(
                self.left > 0 && at + N <= self.src.len() && (p as usize).is_multiple_of(16),
                "ThreadVectors: vector at element {at} of a buffer of {} is outside it or \
                 misaligned, or past the panel: the panel's check was wrong",
                self.src.len()
            );
            crate::arch::global_input_load(p.cast(), 16);
        }
        self.next = p.wrapping_byte_add(self.step * core::mem::size_of::<T>());
        self.left -= 1;
        // SAFETY: a tile is left (the caller's contract), so `p` is this
        // thread's vector of tile `steps − left` of the panel: elements
        // origin + s·step + r·ld + c .. + N with s < steps, r < ROWS, c + N ≤
        // COLS (`thread_vectors`), at most origin + (steps − 1)·step +
        // (ROWS − 1)·ld + COLS ≤ src.len() (the panel's check): inside
        // `src`, which is valid and unwritten for 'a (`Global`'s contract).
        // 16-byte aligned: the first vector is, and step·size, ld·size and
        // c·size are multiples of 16 (the check; c is a multiple of N). In
        // the global state space (`Global`'s invariant).
        let words = unsafe { crate::arch::ld_global_v4(p.cast()) };
        // SAFETY: `Vector16<T, N>` is exactly 16 bytes (`thread_vectors`
        // asserts N·size_of::<T>() = 16; `repr(C)`, no padding) and any 16
        // bytes are a valid one (`T: Plain`).
        unsafe { core::mem::transmute_copy::<[u32; 4], Vector16<T, N>>(&words).0 }
    }
}

/// Two [`ThreadVectors`] with as many tiles left (from
/// [`ThreadVectors::zip`]), read together tile by tile: one count, one
/// uniform branch per tile for both.
#[derive(Clone, Copy)]
pub struct VectorPairs<'a, T, const N: usize, U, const M: usize> {
    /// Invariant: `first.left == second.left`.
    first: ThreadVectors<'a, T, N>,
    second: ThreadVectors<'a, U, M>,
}

impl<T: Plain, const N: usize, U: Plain, const M: usize> VectorPairs<'_, T, N, U, M> {
    /// Tiles not yet read.
    #[inline(always)]
    pub fn left(&self) -> usize {
        self.first.left()
    }

    /// Both streams' vectors of the next tile ([`ThreadVectors::load_next`]);
    /// `None` once every tile has been read. Uniform over the block.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load_next(&mut self) -> Option<([T; N], [U; M])> {
        if self.first.left == 0 {
            return None;
        }
        // SAFETY: a tile is left in the first, so in the second (the
        // invariant; both step together here).
        Some(unsafe { (self.first.read(), self.second.read()) })
    }
}
