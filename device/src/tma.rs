//! Tensor copies by the Tensor Memory Accelerator (`cp.async.bulk.tensor`,
//! sm_90): one thread hands the copy engine a *box* of a global tensor —
//! `B0 × B1` elements at a corner the thread names — and a shared
//! destination; the box lands there swizzled, with the elements outside
//! the tensor filled with zeros, and its bytes are counted on an
//! [`MBarrier`]'s transaction count, as a [bulk copy](crate::bulk)'s are.
//!
//! A [`TensorMap`] is a kernel parameter: the host builds it from a device
//! buffer (`warpforge::TensorMap`, which checks every rule of
//! `cuTensorMapEncodeTiled` and encodes it on the GPU), and its type
//! carries what the kernel relies on: the element, the rank, the box and
//! the swizzle. The host's and the kernel's types are the same, so a map
//! whose box or swizzle disagrees with the kernel's is a type error.
//!
//! ```text
//! #[kernel(...)]
//! fn gemm(a: TensorMap<bf16, 2, 64, 128, Sw128>, ...) {
//!     // producer thread:
//!     full.arrive_expect_tx(OperandTile::<bf16, 128, 64, KMajor<Sw128>>::BYTES);
//!     a.load_operand([k0, m0], a_stage, full);   // one box per 128-byte span
//!     // consumers: full.wait(&mut phase), then wgmma on a_stage
//! }
//! ```
//!
//! What the types and checks guarantee: a copy writes only its destination
//! tile (the box's bytes equal the tile's, checked at compile time), which
//! starts where the swizzle needs it (the swizzle's period, at least 128
//! bytes: checked once per copy for a plain tile, once per tile for an
//! [`OperandTile`]); a box reads only the tensor the host described, and
//! the host checked that it lies inside its buffer. What the kernel's
//! protocol upholds, as for every mbarrier (and the emulator checks): that
//! a phase expects exactly the bytes its copies deliver (a whole box,
//! zero-filled elements included), and that nobody touches a destination
//! before waiting for it.
//!
//! On the GPU: `cp.async.bulk.tensor.{1..5}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes`
//! (PTX 8.0, sm_90) with the map's generic address in global memory; in
//! the emulator, the box is gathered at issue and lands as a bulk copy.
//! Facts and sources: docs/hopper/ptx-semantics.md §2.

use crate::arch;
use crate::mbarrier::MBarrier;
use crate::shared::{SharedElement, SharedTile};
use crate::swizzle::Mode;
use crate::wgmma::{self, Layout, OperandTile};
use core::marker::PhantomData;

/// A tensor map as the kernel receives it: on the GPU the generic address
/// of the 128-byte `CUtensorMap` the host encoded; in the emulator the
/// description it was encoded from.
#[cfg(target_arch = "nvptx64")]
#[doc(hidden)]
pub type MapHandle = *const u8;
/// A tensor map as the kernel receives it: on the GPU the generic address
/// of the 128-byte `CUtensorMap` the host encoded; in the emulator the
/// description it was encoded from.
#[cfg(not(target_arch = "nvptx64"))]
#[doc(hidden)]
pub type MapHandle = crate::emu::tma::TensorDesc;

/// A tensor map: a rank-`R` tensor of `T` in global memory whose copies
/// move boxes of `B0 × B1` elements (`× 1` in every further dimension),
/// landing swizzled by `S`. Made by the host and passed as a kernel
/// parameter; the kernel only reads through it.
#[derive(Clone, Copy)]
pub struct TensorMap<'a, T, const R: usize, const B0: usize, const B1: usize, S: Mode> {
    map: MapHandle,
    _tensor: PhantomData<(&'a [T], S)>,
}

impl<'a, T: SharedElement, const R: usize, const B0: usize, const B1: usize, S: Mode>
    TensorMap<'a, T, R, B0, B1, S>
{
    /// Bytes one box delivers (zero-filled elements included): what a phase
    /// expects per [`load`](Self::load).
    pub const BOX_BYTES: u32 = {
        assert!(1 <= R && R <= 5, "a tensor map has 1 ..= 5 dimensions");
        assert!(
            1 <= B0 && B0 <= 256 && 1 <= B1 && B1 <= 256,
            "a box extent is 1 ..= 256"
        );
        assert!(R >= 2 || B1 == 1, "a rank-1 map's box is B0 x 1");
        assert!(
            (B0 * size_of::<T>()).is_multiple_of(16),
            "a box's rows are multiples of 16 bytes"
        );
        assert!(
            match S::SWIZZLE.span() {
                Some(span) => B0 * size_of::<T>() <= span,
                None => true,
            },
            "a swizzled box's rows are at most the swizzle's span"
        );
        (B0 * B1 * size_of::<T>()) as u32
    };

    /// The map the launch passed. Only `#[kernel]`'s entry calls this.
    ///
    /// # Safety
    /// `map` must be a tensor map of exactly this type's element, rank,
    /// box and swizzle, of a tensor that stays readable and unwritten for
    /// the launch (the host's `TensorMap` of the same type is).
    #[doc(hidden)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub unsafe fn from_raw(map: MapHandle) -> Self {
        #[cfg(not(target_arch = "nvptx64"))]
        {
            let mut want = [1u32; 5];
            want[0] = B0 as u32;
            if R > 1 {
                want[1] = B1 as u32;
            }
            assert!(
                map.elem() == size_of::<T>()
                    && map.rank() == R
                    && map.box_dims() == &want[..R]
                    && map.swizzle() == S::SWIZZLE,
                "TensorMap::from_raw: the map ({} dimensions, box {:?}, {}-byte elements, {:?}) \
                 is not the kernel's ({R} dimensions, box {:?}, {}-byte elements, {:?})",
                map.rank(),
                map.box_dims(),
                map.elem(),
                map.swizzle(),
                &want[..R],
                size_of::<T>(),
                S::SWIZZLE
            );
        }
        TensorMap {
            map,
            _tensor: PhantomData,
        }
    }

    /// Brings the map into the cache the copy engine reads it through: once,
    /// by the thread that issues the copies, before the first.
    #[inline(always)]
    pub fn prefetch(&self) {
        arch::tma_prefetch_map(self.handle_ptr());
    }

    /// Issues the copy of the box whose start corner is `corner` (element
    /// indices, dimension 0 first; negative or past the end allowed: those
    /// elements are zeros) into `dst`, its [`BOX_BYTES`](Self::BOX_BYTES)
    /// counted on `bar`'s current phase. Called by one thread (e.g. under
    /// [`warp::elect_one`](crate::warp::elect_one)); the phase must expect
    /// the bytes.
    ///
    /// `N` must be the box's elements (a compile-time error otherwise);
    /// panics (a trap on the GPU) unless `dst` starts on the swizzle's
    /// period, and on 128 bytes.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load<const N: usize>(&self, corner: [i32; R], dst: SharedTile<T, N>, bar: MBarrier) {
        const { assert!(N == B0 * B1, "the destination holds one box") };
        let _ = Self::BOX_BYTES;
        let window = arch::shared_window_offset(dst.addr(0) as *const u8);
        assert!(
            (window as usize).is_multiple_of(S::SWIZZLE.period().max(128)),
            "TensorMap::load: the destination must start on 128 bytes and the swizzle's period"
        );
        // SAFETY: the map is the host's, of this type (`from_raw`'s
        // contract): its box is `N` elements of `T`, `dst`'s size; `dst`
        // is aligned as TMA needs (checked); `bar` is a live barrier (an
        // `MBarrier` exists only between `init` and `invalidate`).
        unsafe {
            arch::tma_load(
                arch::shared_addr(dst.addr(0) as *const u8),
                self.handle_ptr(),
                corner,
                bar.addr(),
            )
        }
    }

    /// Fills `dst`, a `wgmma` operand tile, from the tensor: the tile's
    /// contiguous extent (K of a K-major tile, MN of an MN-major one) lies
    /// along dimension 0, its other extent along dimension 1, and the tile
    /// starts at `corner`. One box per swizzle span of the contiguous
    /// extent and per `B1` of the other (`corner[0]` advancing by `B0`,
    /// `corner[1]` by `B1`), all counted on `bar`
    /// ([`OperandTile::BYTES`] in all). The box must be one span wide
    /// (`2·B0` bytes = the tile's swizzle span, the map's swizzle the
    /// tile's) and `B1` a multiple of 8 dividing the other extent
    /// (compile-time errors otherwise). No check at run time: the tile's
    /// start was checked when it was made, and every box lands a whole
    /// number of swizzle periods after it.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn load_operand<const MN: usize, const K: usize, L: Layout>(
        &self,
        corner: [i32; R],
        dst: OperandTile<T, MN, K, L>,
        bar: MBarrier,
    ) where
        T: wgmma::Element,
    {
        const {
            assert!(R >= 2, "an operand tile is two-dimensional");
            assert!(
                matches!(
                    (S::SWIZZLE, L::SWIZZLE),
                    (crate::swizzle::Swizzle::B32, crate::swizzle::Swizzle::B32)
                        | (crate::swizzle::Swizzle::B64, crate::swizzle::Swizzle::B64)
                        | (crate::swizzle::Swizzle::B128, crate::swizzle::Swizzle::B128)
                ),
                "the map's swizzle is the operand tile's"
            );
            let (contiguous, other) = if L::MN_MAJOR { (MN, K) } else { (K, MN) };
            assert!(
                matches!(L::SWIZZLE.span(), Some(span) if span == 2 * B0)
                    && contiguous.is_multiple_of(B0)
                    && B1.is_multiple_of(8)
                    && other.is_multiple_of(B1),
                "the map's box is one swizzle span of the operand tile by a multiple of 8 \
                 dividing its other extent"
            );
        };
        let _ = Self::BOX_BYTES;
        let (contiguous, other) = if L::MN_MAJOR { (MN, K) } else { (K, MN) };
        for span in 0..contiguous / B0 {
            for part in 0..other / B1 {
                let mut at = corner;
                at[0] = corner[0].wrapping_add((span * B0) as i32);
                at[1] = corner[1].wrapping_add((part * B1) as i32);
                // SAFETY: as in `load`: the box is `B0 · B1` elements, a
                // part of the tile (const-checked: the layout's span block
                // `span` holds `other` rows of `B0` elements, and part
                // `part` is `B1` of them), which starts on the swizzle's
                // period (checked by `OperandTile::new`), each box a whole
                // number of periods further (`B1` a multiple of 8 rows of
                // one span).
                unsafe {
                    arch::tma_load(
                        dst.block_addr(span * other * B0 + part * B1 * B0),
                        self.handle_ptr(),
                        at,
                        bar.addr(),
                    )
                };
            }
        }
    }

    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    fn handle_ptr(&self) -> *const u8 {
        self.map
    }

    #[cfg(not(target_arch = "nvptx64"))]
    #[inline(always)]
    fn handle_ptr(&self) -> &crate::emu::tma::TensorDesc {
        &self.map
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::tma::TensorDesc;
    use crate::emu::{EmuError, Fault, LaunchShape, launch};
    use crate::mbarrier::{MBarriers, Phase};
    use crate::swizzle::{Sw64, Sw128, Swizzle, Unswizzled};
    use crate::wgmma::{Accumulator, KMajor, MnMajor, thread_in_warpgroup};
    use crate::{Dim3, shared, thread};
    use half::bf16;
    use std::sync::Mutex;

    /// `len` elements of `T`, 16-byte aligned (a `Vec<T>` need not be),
    /// filled by `f`.
    fn aligned<T: Copy>(len: usize, f: impl Fn(usize) -> T) -> Vec<u128> {
        let mut backing = vec![0u128; (len * size_of::<T>()).div_ceil(16)];
        let elems = backing.as_mut_ptr().cast::<T>();
        for i in 0..len {
            // SAFETY: `backing` holds at least `len` `T`s, and is 16-aligned.
            unsafe { elems.add(i).write(f(i)) };
        }
        backing
    }

    /// The element of a `rows × cols` tensor (rows `ld` apart) at `(r, c)`:
    /// distinct, and never zero inside.
    fn element(r: i64, c: i64) -> f32 {
        (1000 * r + c + 1) as f32
    }

    /// Thread 0 loads the 8 × 16 f32 box at `corner` of a 30 × 20 tensor
    /// (rows 24 elements apart) with swizzle `S`; every thread waits and
    /// reads the tile back through the swizzle. Each element is the
    /// tensor's, or zero outside it.
    fn box_at<S: Mode>(
        corner: [i32; 2],
        read_before_wait: bool,
    ) -> Result<Vec<f32>, Box<EmuError>> {
        let (rows, cols, ld) = (30usize, 20usize, 24usize);
        let tensor = aligned::<f32>(rows * ld, |i| element((i / ld) as i64, (i % ld) as i64));
        let desc = TensorDesc::new(
            tensor.as_ptr().cast(),
            rows * ld * 4,
            &[cols as u64, rows as u64],
            &[ld as u64 * 4],
            &[16, 8],
            4,
            S::SWIZZLE,
        )
        .unwrap();
        let got = Mutex::new(vec![f32::NAN; 128]);
        let shape = LaunchShape {
            grid: Dim3::x(1),
            block: Dim3::x(64),
            dynamic_shared_bytes: 1024 + 8,
        };
        launch("tma_box", shape, &|| {
            // SAFETY: `desc` is of this type, its tensor lives through the launch.
            let map = unsafe { TensorMap::<f32, 2, 16, 8, S>::from_raw(desc) };
            let tile = shared::array::<f32, 128>();
            let bars = MBarriers::init(tile.after::<u64, 1>(), [1]);
            let full = bars.get(0);
            if thread::linear_thread_id() == 0 {
                map.prefetch();
                full.arrive_expect_tx(TensorMap::<f32, 2, 16, 8, S>::BOX_BYTES);
                map.load(corner, tile, full);
            }
            let me = thread::linear_thread_id() as usize;
            if read_before_wait && me == 33 {
                let _ = tile.load(0);
            }
            full.wait(&mut Phase::FIRST.clone());
            for i in (me..128).step_by(64) {
                let dense = 4 * i;
                let v = tile.load(S::SWIZZLE.apply(dense) / 4);
                got.lock().unwrap()[i] = v;
            }
            bars.invalidate();
        })?;
        Ok(got.into_inner().unwrap())
    }

    #[test]
    fn a_box_lands_swizzled_with_zeros_outside_the_tensor() {
        fn check<S: Mode>() {
            for corner in [
                [0, 0],
                [3, 5],
                [-4, -2],
                [10, 25],
                [-20, 0],
                [19, 29],
                [20, 30],
            ] {
                let got = box_at::<S>(corner, false).unwrap();
                for (i, &v) in got.iter().enumerate() {
                    let (r, c) = (
                        i64::from(corner[1]) + (i / 16) as i64,
                        i64::from(corner[0]) + (i % 16) as i64,
                    );
                    let want = if (0..30).contains(&r) && (0..20).contains(&c) {
                        element(r, c)
                    } else {
                        0.0
                    };
                    assert_eq!(
                        v,
                        want,
                        "{:?} corner {corner:?}, box element {i}",
                        S::SWIZZLE
                    );
                }
            }
        }
        check::<Unswizzled>();
        check::<Sw64>();
    }

    /// A thread that reads the box without waiting: before the box lands
    /// that is a read of a pending copy, after it a race with the copy's
    /// writes (which only the wait orders); either way it names thread 0,
    /// the issuer. The correct twin is the test above.
    #[test]
    fn reading_a_box_before_its_wait_is_reported() {
        let err = box_at::<Unswizzled>([0, 0], true).unwrap_err();
        let zero = Some(Dim3::new(0, 0, 0));
        assert!(
            matches!(err.fault, Fault::BulkCopyPending { issuer, .. } if Some(issuer) == zero)
                || matches!(err.fault, Fault::SharedRace { other, other_writes: true, .. } if other == zero),
            "{err}"
        );
    }

    /// Both operands of a 64 × 128 × 64 `wgmma` filled by the TMA from
    /// ragged tensors (A 50 × 40 row-major, so K-major tiles; B 40 × 100
    /// row-major, so MN-major tiles of Bᵀ, two boxes along N; or B stored
    /// transposed, 100 × 40 row-major, so K-major, two boxes along N's
    /// rows), the corners placing the tensors' ends inside the tiles: the
    /// product is exactly `A·B` with the elements outside both tensors zero.
    #[test]
    fn operands_filled_by_the_tma_multiply_exactly() {
        let (m, k, n) = (50usize, 40usize, 100usize);
        let (lda, ldb, ldbt) = (48usize, 104usize, 48usize);
        let a_val = |r: usize, c: usize| ((r * 7 + c * 3) % 7) as f64 - 3.0;
        let b_val = |r: usize, c: usize| ((r * 5 + c * 11) % 5) as f64 - 2.0;
        let a = aligned::<bf16>(m * lda, |i| bf16::from_f64(a_val(i / lda, i % lda)));
        let b = aligned::<bf16>(k * ldb, |i| bf16::from_f64(b_val(i / ldb, i % ldb)));
        let bt = aligned::<bf16>(n * ldbt, |i| bf16::from_f64(b_val(i % ldbt, i / ldbt)));
        let map = |t: &[u128], rows: usize, cols: usize, ld: usize| {
            let dims = [cols as u64, rows as u64];
            let (bytes, strides) = (rows * ld * 2, [ld as u64 * 2]);
            TensorDesc::new(
                t.as_ptr().cast(),
                bytes,
                &dims,
                &strides,
                &[64, 64],
                2,
                Swizzle::B128,
            )
            .unwrap()
        };
        let (map_a, map_b, map_bt) = (map(&a, m, k, lda), map(&b, k, n, ldb), map(&bt, n, k, ldbt));
        // Tile corners: A's rows from -4 (4 zero rows first), k from 0;
        // B's columns from 0 (128 > 100: zeros past the end).
        let (m0, n0) = (-4i32, 0i32);
        type Map<'a> = TensorMap<'a, bf16, 2, 64, 64, Sw128>;
        type A = OperandTile<bf16, 64, 64, KMajor<Sw128>>;
        type B = OperandTile<bf16, 128, 64, MnMajor<Sw128>>;
        type Bt = OperandTile<bf16, 128, 64, KMajor<Sw128>>;
        for transposed in [false, true] {
            let out = Mutex::new(vec![f32::NAN; 64 * 128]);
            let shape = LaunchShape {
                grid: Dim3::x(1),
                block: Dim3::x(128),
                dynamic_shared_bytes: (64 + 128) * 64 * 2 + 8,
            };
            launch("tma_wgmma", shape, &|| {
                // SAFETY: the descriptions are of this type; their tensors
                // live through the launch.
                let (ma, mb) = unsafe {
                    (
                        Map::from_raw(map_a),
                        Map::from_raw(if transposed { map_bt } else { map_b }),
                    )
                };
                let a_tile = shared::array::<bf16, { 64 * 64 }>();
                let b_tile = a_tile.after::<bf16, { 128 * 64 }>();
                let bars = MBarriers::init(b_tile.after::<u64, 1>(), [1]);
                let full = bars.get(0);
                let a_op = A::new(a_tile).unwrap();
                let (b_op, bt_op) = (B::new(b_tile).unwrap(), Bt::new(b_tile).unwrap());
                if thread::linear_thread_id() == 0 {
                    full.arrive_expect_tx(A::BYTES + B::BYTES);
                    ma.load_operand([0, m0], a_op, full);
                    if transposed {
                        mb.load_operand([0, n0], bt_op, full);
                    } else {
                        mb.load_operand([n0, 0], b_op, full);
                    }
                }
                full.wait(&mut Phase::FIRST.clone());
                let mut acc = Accumulator::<128>::zero();
                {
                    let mut run = acc.start();
                    if transposed {
                        run.mma(a_op.descriptor::<0>(), bt_op.descriptor::<0>());
                        run.mma(a_op.descriptor::<1>(), bt_op.descriptor::<1>());
                        run.mma(a_op.descriptor::<2>(), bt_op.descriptor::<2>());
                        run.mma(a_op.descriptor::<3>(), bt_op.descriptor::<3>());
                    } else {
                        run.mma(a_op.descriptor::<0>(), b_op.descriptor::<0>());
                        run.mma(a_op.descriptor::<1>(), b_op.descriptor::<1>());
                        run.mma(a_op.descriptor::<2>(), b_op.descriptor::<2>());
                        run.mma(a_op.descriptor::<3>(), b_op.descriptor::<3>());
                    }
                }
                let t = thread_in_warpgroup();
                let mut out = out.lock().unwrap();
                for (i, &v) in acc.regs().iter().enumerate() {
                    let (row, col) = Accumulator::<128>::coord(t, i);
                    out[row * 128 + col] = v;
                }
            })
            .unwrap();
            let out = out.into_inner().unwrap();
            for row in 0..64 {
                for col in 0..128 {
                    let r = row as i64 + i64::from(m0);
                    let c = col as i64 + i64::from(n0);
                    let want: f64 = if (0..m as i64).contains(&r) && (0..n as i64).contains(&c) {
                        (0..k)
                            .map(|kk| a_val(r as usize, kk) * b_val(kk, c as usize))
                            .sum()
                    } else {
                        0.0
                    };
                    assert_eq!(
                        out[row * 128 + col],
                        want as f32,
                        "element ({row}, {col}), B transposed: {transposed}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_map_of_another_type_is_refused_by_name() {
        let t = aligned::<f32>(64, |i| i as f32);
        let desc = TensorDesc::new(
            t.as_ptr().cast(),
            256,
            &[16, 4],
            &[64],
            &[16, 4],
            4,
            Swizzle::None,
        )
        .unwrap();
        // SAFETY: refused before any use.
        let refused = std::panic::catch_unwind(|| unsafe {
            TensorMap::<f32, 2, 16, 8, Unswizzled>::from_raw(desc)
        });
        let message = *refused.err().unwrap().downcast::<String>().unwrap();
        assert!(
            message.contains("box [16, 4]") && message.contains("box [16, 8]"),
            "{message}"
        );
    }

    /// Each rule of `TensorDesc::new`, broken once, is refused naming its
    /// field; the same map with it kept is accepted.
    #[test]
    fn tensor_maps_are_checked_field_by_field() {
        let t = aligned::<u16>(64 * 64, |_| 0);
        let base: *const u8 = t.as_ptr().cast();
        let bytes = 64 * 64 * 2;
        let ok = |dims: &[u64], strides: &[u64], boxes: &[u32], sw| {
            TensorDesc::new(base, bytes, dims, strides, boxes, 2, sw)
        };
        assert!(ok(&[64, 64], &[128], &[64, 8], Swizzle::B128).is_ok());
        let cases: [(Result<TensorDesc, _>, &str); 9] = [
            (
                ok(
                    &[64, 64, 1, 1, 1, 1],
                    &[128, 128, 128, 128, 128],
                    &[1; 6],
                    Swizzle::None,
                ),
                "tensorRank",
            ),
            (ok(&[64, 64], &[], &[64, 8], Swizzle::None), "globalStrides"),
            (
                TensorDesc::new(
                    base.wrapping_add(2),
                    bytes - 2,
                    &[8, 8],
                    &[128],
                    &[8, 8],
                    2,
                    Swizzle::None,
                ),
                "globalAddress",
            ),
            (ok(&[0, 64], &[128], &[8, 8], Swizzle::None), "globalDim[0]"),
            (
                ok(&[60, 64], &[120], &[8, 8], Swizzle::None),
                "globalStrides[0]",
            ),
            (ok(&[64, 65], &[128], &[8, 8], Swizzle::None), "globalDim"),
            (ok(&[64, 64], &[128], &[8, 257], Swizzle::None), "boxDim[1]"),
            (ok(&[64, 64], &[128], &[4, 8], Swizzle::None), "boxDim[0]"),
            (ok(&[64, 64], &[128], &[64, 8], Swizzle::B64), "boxDim[0]"),
        ];
        for (i, (result, field)) in cases.into_iter().enumerate() {
            let e = result.expect_err(&format!("case {i} accepted"));
            assert_eq!(e.field, field, "case {i}: {e}");
        }
    }
}
