//! GEMM: `C ← alpha·op(A)·op(B) + beta·C`: f32 on the SIMT cores, f64 on
//! the FP64 tensor cores (sm_80, sm_90; the SIMT cores elsewhere), f16 and
//! bf16 inputs on the tensor cores (f32 accumulation, output f32, f16 or
//! bf16), and f32 through TF32 tensor cores when asked ([`Gemm::tf32`]).
//!
//! BLAS-style: row-major matrices with leading dimensions, `op(X)` = `X` or
//! `Xᵀ`, and the result written in place of `C` (one input-and-output buffer
//! of at least `(m − 1)·ldc + n` elements). `op(A)` is `m × k`, `op(B)` is
//! `k × n`. `A` is stored `m × k` (or `k × m` with [`Gemm::trans_a`]), rows
//! `lda` apart; `B` is stored `k × n` (or `n × k` with [`Gemm::trans_b`]),
//! rows `ldb` apart; each leading dimension defaults to the stored row
//! length and may be larger.
//!
//! - `beta = 0` never reads `C`: NaN or garbage in it does not leak.
//! - `alpha = 0` or `k = 0`: `C ← beta·C`, without reading `A` or `B`.
//! - `m = 0` or `n = 0`: nothing to do (after the checks).
//!
//! **Strided batch** ([`Gemm::batch`]): `count` GEMMs of one shape, GEMM `z`
//! on `A` at `z·stride_a`, `B` at `z·stride_b` (stride 0 = the same matrix for
//! every batch: broadcast) and `C` at `z·stride_c`, one batch per
//! `blockIdx.z` (so `count ≤ 65535`, else `LaunchConfig`). Each operand's
//! buffer must hold `(count − 1)·stride + its extent` (checked arithmetic).
//! `C`'s batches must not overlap, by one of two rules (refused otherwise,
//! naming the sizes: two batches would write one element): stacked,
//! `stride_c ≥ (m − 1)·ldc + n` (packed `m·ldc`, the default, or padded);
//! or side by side, column ranges of one wider matrix, `stride_c ≥ n` and
//! `(count − 1)·stride_c + n ≤ ldc`. The kernel's output is one `OutMatrix`
//! bound with the batch count and `stride_c`
//! (`DeviceBuffer::batched_matrix_mut`, which checks those rules), and the
//! owned tile views (`MicroTiles`, `WarpGrid`) give block (x, y, z) its
//! tile of batch `z` (`OutMatrix::batch`), so the epilogue stays race-free
//! by construction.
//!
//! Everything is checked before anything runs, with overflow-checked sizes:
//! every buffer on the device (`DeviceMismatch`), each leading dimension at
//! least its row length and each buffer long enough for its matrix
//! (`ShapeMismatch`, naming the operand and the sizes; `SizeOverflow` when a
//! size does not fit a `usize`), and the grid within the device's limits
//! (`LaunchConfig`: at most 65535 row tiles, `m ≤ 65535·64` for every type,
//! and at most 65535 batches).
//!
//! Each element of the result is one fused multiply-add chain over `k` in
//! order (on the tensor cores: the hardware's `mma` order), then
//! `fma(beta, c, alpha·acc)` in the scalar type, rounded once to `C`'s type,
//! so results are deterministic (the same bits on every run) and exact when
//! every partial sum is.
//!
//! **Types.** [`Gemm::run`] takes `A` and `B` of one input type `TIn` and
//! `C` of an output type `TOut`; the supported pairs are the sealed
//! [`GemmTypes`] (any other pair does not compile):
//!
//! | `TIn` | `TOut` | `alpha`, `beta` (`Gemm<S>`) | kernels |
//! |---|---|---|---|
//! | `f32` | `f32` | `f32` | SIMT, `gemm_f32_*` (two configurations); with [`Gemm::tf32`], tensor cores, `gemm_tf32_f32_*` |
//! | `f64` | `f64` | `f64` | FP64 tensor cores on sm_80 and sm_90: `gemm_dmma_f64_*` (`mma.sync.m8n8k4`), on sm_90 `gemm_dmma16_f64_*` (`m16n8k16`, the Hopper module); SIMT elsewhere, `gemm_f64_*` |
//! | `f16`, `bf16` | `f32`, `f16`, `bf16` | `f32` | tensor cores, `gemm_{f16,bf16}_{f32,f16,bf16}_*` |
//!
//! **Which kernel runs.** The SIMT and `mma.sync` kernels come in tile
//! configurations ([`TileConfig`]: `Small`, `Large`, `Wide`);
//! [`TileConfig::choose`] picks one from the grid each would launch and the
//! device's SM count (its docs give the rule), unless [`Gemm::tile`] pins
//! one; [`Gemm::tile_config_for`] and [`Gemm::kernel_name_for`] say which,
//! for a device. On sm_90 (H100, H200) the Hopper kernel
//! (`gemm_wgmma_*_128x256x64_s4`, or `*_128x128x64_s4` where the wide
//! tiles would number at most half the SMs; the sm_90a module
//! [`ptx::HOPPER`](crate::ptx::HOPPER)) runs where leading dimensions and
//! batch strides are multiples of 8 elements and the heuristic would pick
//! the large or wide tile; [`Gemm::wgmma`] pins either way. f32 runs on the
//! TF32 tensor cores only when asked ([`Gemm::tf32`]: operands rounded to
//! tf32, about 2⁻¹⁰ relative error per product); on sm_90 that is the
//! Hopper tf32 kernel (`gemm_wgmma_tf32_f32_nt_128x256x32_s4`, or its
//! 128 × 128 twin by the same tile rule, after two
//! launches that round `op(A)` and `op(B)ᵀ` into K-major temporaries) by the
//! same rule. A GEMM whose grid cannot
//! fill the GPU runs as split-k ([`Gemm::split_k`], [`split_k_count`]; on
//! the Hopper kernels where they can run it, [`wgmma_split_k_count`]: the
//! k-ranges as a batch of the f32-output `gemm_wgmma_*` kernel; not for
//! TF32, which splits on the `mma.sync` kernels):
//! deterministic, but not the unsplit GEMM's bits. The aligned fast path and
//! the guarded path (ragged edges, leading dimensions not a multiple of 8,
//! unaligned buffers) are chosen inside each kernel, per block and per
//! 16-byte chunk, never by the host, with the same bits.
//!
//! The tile configurations' table (block and warp tiles, stages, threads,
//! shared memory and kernels, generated from the code), the reasoning behind
//! the heuristic, the kernels' pipelines, their SASS and their measurements
//! are in the repository's `docs/gemm.md`; the Hopper kernel's in
//! `docs/hopper/README.md`.
//!
//! A pair outside the table is a compile error:
//!
//! ```compile_fail
//! use half::f16;
//! use warpforge::{Device, gemm::Gemm};
//! let dev = Device::emulator();
//! let a = dev.upload(&[f16::ONE; 4]).unwrap();
//! let mut c = dev.upload(&[0.0f64; 4]).unwrap(); // f16 → f64: no kernel
//! Gemm::<f32>::new(2, 2, 2).run(&dev, &a, &a, &mut c).unwrap();
//! ```
//!
//! ```
//! use warpforge::{Device, gemm::Gemm};
//! let dev = Device::emulator();
//! let a = dev.upload(&[1.0f32, 2.0, 3.0, 4.0])?; // 2 × 2
//! let b = dev.upload(&[5.0f32, 6.0, 7.0, 8.0])?; // 2 × 2
//! let mut c = dev.upload(&[1.0f32; 4])?;
//! Gemm::new(2, 2, 2).beta(1.0).run(&dev, &a, &b, &mut c)?;
//! assert_eq!(c.to_host()?, [20.0, 23.0, 44.0, 51.0]);
//! # Ok::<(), warpforge::Error>(())
//! ```

pub(crate) mod wgmma;

use crate::runtime::launch::grid_axis;
use crate::{Device, DeviceBuffer, Element, Error, LaunchConfig, MatrixMut, Result};
use half::{bf16, f16};
use warpforge_device::Dim3;
use warpforge_device::kernel::Kernel;
use warpforge_device::swizzle::Sw128;
use warpforge_kernels::gemm::split_k as sk;
use warpforge_kernels::gemm::tensor::dgemm::{self as dg, DMMA_TILE, DMMA16_TILE};
use warpforge_kernels::gemm::tensor::{
    self as tc, MmaTile, TC_TILE, TC_TILE_LARGE, TC_TILE_WIDE, TF32_TILE, TF32_TILE_LARGE,
};
use warpforge_kernels::gemm::warp_tiled::{self as wt, F32_TILE_LARGE};
use warpforge_kernels::gemm::{self as k, F32_TILE, F64_TILE, Tile};
use warpforge_kernels_hopper::dgemm as hdg;
use warpforge_kernels_hopper::gemm as hp;

/// The SIMT element types, `f32` and `f64`: the scalar of every GEMM
/// (`alpha`, `beta` and the accumulation), and each its own [`GemmTypes`]
/// pair.
pub trait GemmElement: Element + k::Element + GemmTypes<Self, Scalar = Self> {
    /// The block tile of this type's small (f64: only) SIMT kernels.
    const TILE: Tile;
    /// `1`.
    #[doc(hidden)]
    const ONE: Self;
}

impl GemmElement for f32 {
    const TILE: Tile = F32_TILE;
    const ONE: f32 = 1.0;
}

impl GemmElement for f64 {
    const TILE: Tile = F64_TILE;
    const ONE: f64 = 1.0;
}

/// Index of the kernel for these transposes in a family listed
/// `nn, nt, tn, tt`.
const fn trans_index(trans_a: bool, trans_b: bool) -> usize {
    (trans_a as usize) * 2 + trans_b as usize
}

/// A [`GemmTypes`] impl's `kernel_name` and `launch_gemm` from one table:
/// each `(tile, tf32)` pattern to a family of four kernels
/// `module: nn, nt, tn, tt` (the order of [`trans_index`]), so a kernel is
/// named once for both.
macro_rules! kernel_table {
    ($tout:ty; $($pat:pat => $module:ident: $nn:ident, $nt:ident, $tn:ident, $tt:ident;)+) => {
        fn kernel_name(
            trans_a: bool,
            trans_b: bool,
            tile: Option<TileConfig>,
            tf32: bool,
        ) -> &'static str {
            let names = match (tile, tf32) {
                $($pat => [$module::$nn::NAME, $module::$nt::NAME, $module::$tn::NAME, $module::$tt::NAME],)+
            };
            names[trans_index(trans_a, trans_b)]
        }
        fn launch_gemm(
            dev: &Device,
            cfg: LaunchConfig,
            tile: Option<TileConfig>,
            tf32: bool,
            trans: (bool, bool),
            (k, k_last): (usize, usize),
            alpha: Self::Scalar,
            beta: Self::Scalar,
            (a, lda, stride_a): (&DeviceBuffer<Self>, usize, usize),
            (b, ldb, stride_b): (&DeviceBuffer<Self>, usize, usize),
            c: MatrixMut<'_, $tout>,
        ) -> Result<()> {
            let args = (k, k_last, alpha, beta, a, lda, stride_a, b, ldb, stride_b, c);
            match (tile, tf32) {
                $($pat => match trans {
                    (false, false) => dev.launch($module::$nn, cfg, args),
                    (false, true) => dev.launch($module::$nt, cfg, args),
                    (true, false) => dev.launch($module::$tn, cfg, args),
                    (true, true) => dev.launch($module::$tt, cfg, args),
                },)+
            }
        }
    };
}

/// [`GemmTypes::run_split_k`] for every pair: `TIn → S` partial products
/// (the `S`-output kernels of the same tile), summed into `TOut`.
macro_rules! split_k_impl {
    ($tout:ty, $scalar:ty) => {
        fn partial_kernel_name(
            trans_a: bool,
            trans_b: bool,
            tile: Option<TileConfig>,
            tf32: bool,
        ) -> &'static str {
            <Self as GemmTypes<$scalar>>::kernel_name(trans_a, trans_b, tile, tf32)
        }
        fn run_split_k(
            gemm: &Gemm<$scalar>,
            dev: &Device,
            split: SplitK,
            a: (&DeviceBuffer<Self>, usize),
            b: (&DeviceBuffer<Self>, usize),
            partials: &mut DeviceBuffer<$scalar>,
            c: MatrixMut<'_, $tout>,
        ) -> Result<()> {
            run_split_k::<Self, $tout, $scalar>(gemm, dev, split, a, b, partials, c)
        }
        fn sum_partials(
            dev: &Device,
            (m, n): (usize, usize),
            ranges: usize,
            beta: $scalar,
            partials: &DeviceBuffer<$scalar>,
            c: MatrixMut<'_, $tout>,
        ) -> Result<()> {
            sum_partials::<$tout, $scalar>(dev, (m, n), ranges, beta, partials, c)
        }
    };
}

/// The launch shape of a SIMT tile.
const fn simt_shape(tile: Tile) -> BlockShape {
    BlockShape {
        rows: tile.m,
        cols: tile.n,
        threads: tile.threads(),
    }
}

impl sealed::Sealed<f32> for f32 {}

/// f32 on the SIMT cores (`Small`: 64 × 64 × 16, `Large`: the warp-tiled
/// 128 × 128 × 8), or with [`Gemm::tf32`] on the tensor cores (the TF32
/// kernels of either configuration).
impl GemmTypes<f32> for f32 {
    type Scalar = f32;
    const SPLIT_LARGE: bool = true;
    const TILES: &'static [TileConfig] = &[TileConfig::Small, TileConfig::Large];
    const TF32_TILES: &'static [TileConfig] = &[TileConfig::Small, TileConfig::Large];
    const WGMMA_TF32: bool = true;
    const WGMMA_SHARED_BYTES: [usize; 2] = wgmma::tf32::SHARED_BYTES;
    fn run_wgmma_tf32(
        dev: &Device,
        grid: (HopperTile, u32),
        mnk: (usize, usize, usize),
        count: usize,
        scale: (f32, f32),
        (a, lda, stride_a, trans_a): (&DeviceBuffer<f32>, usize, usize, bool),
        (b, ldb, stride_b, trans_b): (&DeviceBuffer<f32>, usize, usize, bool),
        truncate: bool,
        c: MatrixMut<'_, f32>,
    ) -> Result<()> {
        let source = |buffer, ld, stride, transposed| wgmma::tf32::Source {
            buffer,
            ld,
            stride,
            transposed,
        };
        wgmma::tf32::run(
            dev,
            grid,
            mnk,
            count,
            scale,
            source(a, lda, stride_a, trans_a),
            source(b, ldb, stride_b, trans_b),
            truncate,
            c,
        )
    }
    fn shape(tile: Option<TileConfig>, tf32: bool) -> BlockShape {
        match (tile, tf32) {
            (Some(tile), true) => tile.shape(),
            (Some(TileConfig::Large), false) => BlockShape {
                rows: F32_TILE_LARGE.m,
                cols: F32_TILE_LARGE.n,
                threads: F32_TILE_LARGE.threads(),
            },
            _ => simt_shape(F32_TILE),
        }
    }
    kernel_table!(f32;
        (Some(TileConfig::Small), true) => tc:
            gemm_tf32_f32_nn_64x64x16_s3,
            gemm_tf32_f32_nt_64x64x16_s3,
            gemm_tf32_f32_tn_64x64x16_s3,
            gemm_tf32_f32_tt_64x64x16_s3;
        (Some(TileConfig::Large), true) => tc:
            gemm_tf32_f32_nn_128x128x16_s4,
            gemm_tf32_f32_nt_128x128x16_s4,
            gemm_tf32_f32_tn_128x128x16_s4,
            gemm_tf32_f32_tt_128x128x16_s4;
        (Some(TileConfig::Large), false) => wt:
            gemm_f32_nn_128x128x8,
            gemm_f32_nt_128x128x8,
            gemm_f32_tn_128x128x8,
            gemm_f32_tt_128x128x8;
        _ => k:
            gemm_f32_nn_64x64x16,
            gemm_f32_nt_64x64x16,
            gemm_f32_tn_64x64x16,
            gemm_f32_tt_64x64x16;
    );
    split_k_impl!(f32, f32);
}

impl sealed::Sealed<f64> for f64 {}

/// f64 on the FP64 tensor cores where the GPU has them, sm_80 (A100, A30)
/// and sm_90 (H100, H200), or pinned with [`Gemm::dmma`]: `tile` `Large`,
/// sm_90's `mma.sync.m16n8k16` f64 kernels (128 × 64 × 16,
/// [`DMMA16_TILE`], the Hopper module) on a device that loads the Hopper
/// module, else `Small`, the `m8n8k4` ones (64 × 64 × 16, [`DMMA_TILE`]);
/// elsewhere on the SIMT cores (one 64 × 64 × 8 tile: `tile` is `None`), as
/// [`Gemm::tile_config_for`] decides.
impl GemmTypes<f64> for f64 {
    type Scalar = f64;
    const TILES: &'static [TileConfig] = &[TileConfig::Small, TileConfig::Large];
    const TF32_TILES: &'static [TileConfig] = &[];
    const HAS_DMMA: bool = true;
    fn shape(tile: Option<TileConfig>, _: bool) -> BlockShape {
        let of = |t: MmaTile| BlockShape {
            rows: t.m,
            cols: t.n,
            threads: t.threads(),
        };
        match tile {
            Some(TileConfig::Large) => of(DMMA16_TILE),
            Some(_) => of(DMMA_TILE),
            None => simt_shape(F64_TILE),
        }
    }
    /// The GPUs with FP64 tensor cores: compute capability 8.0 (A100, A30:
    /// DMMA at twice the FP64 FMA rate) and 9.0 (H100, H200). The others
    /// (8.6, 8.9: GA10x, AD10x) have none: `mma.sync` f64 runs there, at no
    /// more than the SIMT cores' FP64 rate, so the SIMT kernels stay (not
    /// measured on those GPUs).
    fn tensor_cores_on(dev: &Device) -> bool {
        matches!(dev.compute_capability(), (8, 0) | (9, 0))
    }
    kernel_table!(f64;
        (Some(TileConfig::Large), _) => hdg:
            gemm_dmma16_f64_nn_128x64x16_s3,
            gemm_dmma16_f64_nt_128x64x16_s3,
            gemm_dmma16_f64_tn_128x64x16_s3,
            gemm_dmma16_f64_tt_128x64x16_s3;
        (Some(_), _) => dg:
            gemm_dmma_f64_nn_64x64x16_s3,
            gemm_dmma_f64_nt_64x64x16_s3,
            gemm_dmma_f64_tn_64x64x16_s3,
            gemm_dmma_f64_tt_64x64x16_s3;
        _ => k:
            gemm_f64_nn_64x64x8,
            gemm_f64_nt_64x64x8,
            gemm_f64_tn_64x64x8,
            gemm_f64_tt_64x64x8;
    );
    split_k_impl!(f64, f64);
}

/// Whether `dev` runs the Hopper module's kernels (the sm_90a module, which
/// holds the `m16n8k16` f64 GEMM): compute capability 9.0 and a build with
/// the `hopper` feature.
fn hopper_module_on(dev: &Device) -> bool {
    let cc = dev.compute_capability();
    crate::ptx::HOPPER.left_out.is_none() && crate::ptx::HOPPER.variant_for(cc).is_some()
}

/// The error for [`Gemm::tf32`] on a pair without TF32 kernels.
fn tf32_refused(tin: crate::DType, tout: crate::DType) -> Error {
    Error::InvalidParameter {
        op: "gemm",
        parameter: "tf32",
        detail: format!(
            "TF32 rounds f32 inputs for the tensor cores: it applies to f32 A and B into an \
             f32 C only, not to {} → {}; drop .tf32(true)",
            tin.name(),
            tout.name()
        ),
    }
}

/// The refusal of [`Tf32Rounding::Truncate`] where the Hopper kernel cannot
/// run the GEMM, and why.
fn truncation_refused(why: &str) -> Error {
    Error::InvalidParameter {
        op: "gemm",
        parameter: "tf32_rounding",
        detail: format!(
            "truncated TF32 operands run on the Hopper tf32 kernel only, which cannot run \
             this GEMM: {why}; use Tf32Rounding::Nearest"
        ),
    }
}

/// The error of a Hopper launch for a pair of types that has no Hopper
/// kernels (only reached when a pin asks for them: the dispatch checks
/// `GemmTypes::WGMMA_KERNELS` first).
fn no_hopper_kernels(tin: crate::DType, tout: crate::DType) -> Error {
    Error::InvalidParameter {
        op: "gemm",
        parameter: "wgmma",
        detail: format!("{} → {} has no Hopper kernels", tin.name(), tout.name()),
    }
}

mod sealed {
    pub trait Sealed<TOut> {}
}

/// The launch shape of a kernel family: rows and columns of `C` per block,
/// threads per (1-D) block.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockShape {
    pub rows: usize,
    pub cols: usize,
    pub threads: usize,
}

/// A GEMM configuration: the block tile, warp grid and pipeline depth of
/// the kernel, for the tensor cores and for f32 on the SIMT cores
/// ([`choose`](Self::choose) gives the heuristic; the repository's
/// `docs/gemm.md` has the table of every configuration, generated from the
/// constants they are made of).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileConfig {
    /// 64 × 64 × 32, four 64 × 16 warp tiles, 3 stages
    /// ([`TC_TILE`]; f32 SIMT: 64 × 64 × 16, 4 × 4 per thread): many
    /// blocks, for small and skinny shapes. Every tensor-core pair and f32
    /// have it.
    Small,
    /// 128 × 128 × 32, 2 × 2 warps of 64 × 64, 4 stages
    /// ([`TC_TILE_LARGE`]; f32 SIMT: 128 × 128 × 8, warp-tiled 8 × 8 per
    /// thread): for shapes that fill the GPU with its blocks. The
    /// tensor-core pairs with output f32 or their input type, and f32, have
    /// it.
    Large,
    /// 128 × 256 × 32, 2 × 4 warps of 64 × 64, 3 stages ([`TC_TILE_WIDE`]):
    /// the large tile's warp tiles, a quarter fewer global bytes per `mma`,
    /// one block of 8 warps per SM; for shapes that fill the GPU twice over
    /// with its blocks. The f16/bf16 pairs with output f32 or their input
    /// type have it (not TF32, not the SIMT cores).
    Wide,
}

impl TileConfig {
    /// The kernel's tile parameters (f16 and bf16 inputs).
    pub const fn tile(self) -> MmaTile {
        match self {
            TileConfig::Small => TC_TILE,
            TileConfig::Large => TC_TILE_LARGE,
            TileConfig::Wide => TC_TILE_WIDE,
        }
    }

    /// The TF32 kernel's tile parameters ([`Gemm::tf32`]): the same blocks
    /// and warps as [`tile`](Self::tile), half its k-step in f32 elements,
    /// at most its bytes of shared memory (the same at the largest layout);
    /// `None` for [`Wide`](Self::Wide), which has no TF32 kernels.
    pub const fn tf32_tile(self) -> Option<MmaTile> {
        match self {
            TileConfig::Small => Some(TF32_TILE),
            TileConfig::Large => Some(TF32_TILE_LARGE),
            TileConfig::Wide => None,
        }
    }

    /// The heuristic, among `tiles` (the configurations the
    /// type pair has kernels for; [`Small`](Self::Small) when none fits):
    /// [`Wide`](Self::Wide) if the device allows `shared_optin` bytes of
    /// shared memory per block, at least the wide tile's, and its grid of
    /// `⌈m/128⌉·⌈n/256⌉·batch` blocks has at least two blocks per SM
    /// (`multiprocessors`; it runs one block per SM, so at least two full
    /// waves) and its 256-column tiles cover at most an eighth more of `C`
    /// than the large tile's 128-column ones (`2·⌈n/256⌉ ≤ 9/8·⌈n/128⌉`: not
    /// for `n = 64` or `384`); else [`Large`](Self::Large) if its shared memory fits and
    /// its grid of `⌈m/128⌉·⌈n/128⌉·batch` blocks has at least one block per
    /// SM; else [`Small`](Self::Small).
    ///
    /// ```
    /// use warpforge::gemm::TileConfig::{self, Large, Small, Wide};
    /// // An H100: 132 SMs, 227 KiB of shared memory per block.
    /// let h100 = |m, n, batch| TileConfig::choose(m, n, batch, &[Small, Large, Wide], 132, 227 * 1024);
    /// assert_eq!(h100(4096, 4096, 1), Wide); // 512 wide blocks: ~3.9 waves
    /// assert_eq!(h100(2048, 2048, 1), Large); // 128 wide blocks: under 2 per SM
    /// assert_eq!(h100(1024, 1024, 1), Small); // 64 large blocks: half the GPU
    /// assert_eq!(h100(1024, 1024, 4), Large); // 256 with the batch
    /// assert_eq!(h100(65536, 64, 1), Large); // 512 row tiles; n too narrow for 256
    /// assert_eq!(h100(8192, 32, 1), Small); // skinny: 64 blocks
    /// // A pair without wide kernels (f32 on the SIMT cores, TF32, f16 → bf16):
    /// assert_eq!(TileConfig::choose(4096, 4096, 1, &[Small, Large], 132, 227 * 1024), Large);
    /// ```
    pub fn choose(
        m: usize,
        n: usize,
        batch: usize,
        tiles: &[TileConfig],
        multiprocessors: u32,
        shared_optin: u32,
    ) -> TileConfig {
        let sms = multiprocessors.max(1) as usize;
        let usable = |c: TileConfig, blocks_per_sm: usize| {
            let tile = c.tile();
            let blocks = m
                .div_ceil(tile.m)
                .saturating_mul(n.div_ceil(tile.n))
                .saturating_mul(batch);
            tiles.contains(&c)
                && tile.max_shared_bytes() <= shared_optin as usize
                && blocks >= sms.saturating_mul(blocks_per_sm)
        };
        // The wide tile's 256 columns must not cover much more of C than the
        // large tile's 128 (at most an eighth more): a narrow or ragged n
        // would leave a wide block's warp columns idle.
        let (wide, large) = (TC_TILE_WIDE.n, TC_TILE_LARGE.n);
        let columns_fit = n.div_ceil(wide).saturating_mul(wide).saturating_mul(8)
            <= n.div_ceil(large).saturating_mul(large).saturating_mul(9);
        if columns_fit && usable(TileConfig::Wide, 2) {
            TileConfig::Wide
        } else if usable(TileConfig::Large, 1) {
            TileConfig::Large
        } else {
            TileConfig::Small
        }
    }

    /// The launch shape of this configuration's kernels.
    const fn shape(self) -> BlockShape {
        let tile = self.tile();
        BlockShape {
            rows: tile.m,
            cols: tile.n,
            threads: tile.threads(),
        }
    }
}

/// The SMs [`TileConfig::choose`] counts on `dev`: the GPU's, or for the
/// emulator those of its arch's flagship GPU (A100, A40, RTX 4090, H100), so
/// that it picks the configuration that GPU would.
pub(crate) fn multiprocessors(dev: &Device) -> u32 {
    match (dev.gpu_info(), dev.emulated_arch()) {
        (Some(info), _) => info.multiprocessors,
        (None, Some(crate::Arch::Sm80)) => 108,
        (None, Some(crate::Arch::Sm86)) => 84,
        (None, Some(crate::Arch::Sm89)) => 128,
        (None, _) => 132,
    }
}

/// Split-k's partial-product depth is a multiple of this (every tile's
/// k-step divides it), so every range but the last is whole k-steps and
/// each range's first element keeps its operand's 16-byte alignment.
pub const SPLIT_K_ALIGN: usize = 32;

/// The least depth [`split_k_count`] gives a k-range: below it the extra
/// plane each range writes and the sum reads would cost more than the
/// blocks it adds.
pub const SPLIT_K_MIN_DEPTH: usize = 512;

/// The most k-ranges [`split_k_count`] picks.
pub const SPLIT_K_MAX: usize = 16;

/// The split-k heuristic ([`Gemm::split_k`]): how many k-ranges
/// a GEMM of `k` runs as, when its configuration's tile grid has `blocks`
/// blocks in a batch of `batch` on a GPU of `multiprocessors` SMs. `1` (no
/// split) when the grid already has a block per SM, for a batch (its blocks
/// fill the GPU along z), or when `k` is under two ranges of
/// [`SPLIT_K_MIN_DEPTH`]; otherwise enough ranges for two blocks per SM,
/// at most one per `SPLIT_K_MIN_DEPTH` of `k` and at most [`SPLIT_K_MAX`].
///
/// ```
/// use warpforge::gemm::split_k_count;
/// // An H100 (132 SMs). 128 × 4096 × 4096 in 64 × 64 tiles: 2 · 64 = 128 blocks.
/// assert_eq!(split_k_count(128, 4096, 1, 132), 3); // 384 blocks
/// assert_eq!(split_k_count(1024, 4096, 1, 132), 1); // fills the GPU already
/// assert_eq!(split_k_count(16, 1 << 20, 1, 132), 16); // at most 16
/// assert_eq!(split_k_count(16, 1536, 1, 132), 3); // at most k / 512
/// assert_eq!(split_k_count(16, 1000, 1, 132), 1); // k too shallow
/// assert_eq!(split_k_count(16, 4096, 2, 132), 1); // a batch: no split
/// ```
pub fn split_k_count(blocks: usize, k: usize, batch: usize, multiprocessors: u32) -> usize {
    let sms = multiprocessors.max(1) as usize;
    if batch != 1 || blocks == 0 || blocks >= sms {
        return 1;
    }
    (2 * sms)
        .div_ceil(blocks)
        .min(k / SPLIT_K_MIN_DEPTH)
        .clamp(1, SPLIT_K_MAX)
}

/// The split-k heuristic of the Hopper (`wgmma`) kernels: how many
/// k-ranges a GEMM of `k` runs as when its grid has `tiles` tiles (of the
/// configuration the grid takes: 128 × 128 where 128 × 256 ones would
/// number at most half the SMs, else 128 × 256) in a batch of `batch`, on
/// `multiprocessors` SMs (the
/// persistent grid's blocks: the GPU's, or [`Gemm::sm_limit`]). `1` (no
/// split) for a batch, or when the tiles already give every SM one; else
/// as many ranges as fit in one wave, `⌊SMs / tiles⌋` (a wave that spills
/// over would leave most SMs idle in its second), at most one per
/// [`SPLIT_K_MIN_DEPTH`] of `k` (each range's pipeline fill, and the f32
/// plane it writes and the sum reads, against its k-steps) and at most
/// [`SPLIT_K_MAX`].
///
/// ```
/// use warpforge::gemm::wgmma_split_k_count;
/// // An H100 or H200: 132 SMs.
/// // 128 × 4096 × 4096: 1 × 32 tiles of 128 × 128 (24%): 4 ranges, 128
/// // tiles (97%), 1024 deep (1 × 16 of 128 × 256 would take 8).
/// assert_eq!(wgmma_split_k_count(32, 4096, 1, 132), 4);
/// assert_eq!(wgmma_split_k_count(16, 4096, 1, 132), 8);
/// // 1024 × 1024 × 4096: 8 × 8 = 64 tiles of 128 × 128 (48%): 2 ranges.
/// assert_eq!(wgmma_split_k_count(64, 4096, 1, 132), 2);
/// // 1024 × 2048 × 2048: 8 × 16 = 128 tiles of 128 × 128, one wave.
/// assert_eq!(wgmma_split_k_count(128, 2048, 1, 132), 1);
/// // 2048³: 16 × 8 = 128 tiles of 128 × 256, one wave (97%) already.
/// assert_eq!(wgmma_split_k_count(128, 2048, 1, 132), 1);
/// // 8192 × 1024 × 4096: 64 × 4 = 256 tiles, two waves.
/// assert_eq!(wgmma_split_k_count(256, 4096, 1, 132), 1);
/// assert_eq!(wgmma_split_k_count(100, 4096, 1, 132), 1); // two ranges: 1.5 waves
/// assert_eq!(wgmma_split_k_count(16, 1000, 1, 132), 1); // k under 2 · 512
/// assert_eq!(wgmma_split_k_count(16, 4096, 2, 132), 1); // a batch
/// ```
pub fn wgmma_split_k_count(tiles: usize, k: usize, batch: usize, multiprocessors: u32) -> usize {
    let sms = multiprocessors.max(1) as usize;
    if batch != 1 || tiles == 0 || tiles >= sms {
        return 1;
    }
    (sms / tiles)
        .min(k / SPLIT_K_MIN_DEPTH)
        .clamp(1, SPLIT_K_MAX)
}

/// How a split-k GEMM runs: `ranges` consecutive k-ranges, each `depth`
/// deep but the last, `last` (`0 < last ≤ depth`), as a batch of `ranges`
/// GEMMs on the configuration `tile` ([`Gemm::split_k`]).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitK {
    pub ranges: usize,
    pub depth: usize,
    pub last: usize,
    pub tile: Option<TileConfig>,
}

impl SplitK {
    /// `k` in at most `ranges` ranges of a multiple of [`SPLIT_K_ALIGN`]
    /// (fewer when `k` is too shallow for them); `None` when that leaves
    /// one range.
    fn new(k: usize, ranges: usize, tile: Option<TileConfig>) -> Option<SplitK> {
        let depth = k.div_ceil(ranges.max(1)).next_multiple_of(SPLIT_K_ALIGN);
        let ranges = k.div_ceil(depth);
        (ranges > 1).then(|| SplitK {
            ranges,
            depth,
            last: k - (ranges - 1) * depth,
            tile,
        })
    }
}

/// The sum kernel of split-k for an output type: `gemm_split_k_sum_*`
/// (`warpforge_kernels::gemm::split_k`) from partial planes of `S`.
trait SplitKSum<S: Element>: Element {
    fn launch_sum(
        dev: &Device,
        cfg: LaunchConfig,
        splits: usize,
        beta: S,
        partials: &DeviceBuffer<S>,
        c: MatrixMut<'_, Self>,
    ) -> Result<()>;
    fn sum_name() -> &'static str;
}

macro_rules! split_k_sum {
    ($($tout:ty, $s:ty => $kernel:ident;)+) => { $(
        impl SplitKSum<$s> for $tout {
            fn launch_sum(
                dev: &Device,
                cfg: LaunchConfig,
                splits: usize,
                beta: $s,
                partials: &DeviceBuffer<$s>,
                c: MatrixMut<'_, $tout>,
            ) -> Result<()> {
                dev.launch(sk::$kernel, cfg, (splits, beta, partials, c))
            }
            fn sum_name() -> &'static str {
                sk::$kernel::NAME
            }
        }
    )+ };
}

split_k_sum!(
    f32, f32 => gemm_split_k_sum_f32;
    f16, f32 => gemm_split_k_sum_f16;
    bf16, f32 => gemm_split_k_sum_bf16;
    f64, f64 => gemm_split_k_sum_f64;
);

/// Split-k ([`GemmTypes::run_split_k`]): `split.ranges` GEMMs `TIn → S`
/// over consecutive k-ranges of `A` and `B` (a batch whose strides step
/// along k) into the planes of `partials`, then their sum with `beta·C`
/// into `c` (`gemm_split_k_sum_*`). The caller checked every size and
/// sized `partials` `ranges·m·n`.
fn run_split_k<TIn, TOut, S>(
    gemm: &Gemm<S>,
    dev: &Device,
    split: SplitK,
    (a, lda): (&DeviceBuffer<TIn>, usize),
    (b, ldb): (&DeviceBuffer<TIn>, usize),
    partials: &mut DeviceBuffer<S>,
    c: MatrixMut<'_, TOut>,
) -> Result<()>
where
    S: GemmElement,
    TIn: GemmTypes<TOut, Scalar = S> + GemmTypes<S, Scalar = S>,
    TOut: SplitKSum<S>,
{
    let Gemm {
        m,
        n,
        trans_a,
        trans_b,
        alpha,
        beta,
        ..
    } = *gemm;
    let tf32 = gemm.uses_tf32();
    let SplitK {
        ranges,
        depth,
        last,
        tile,
    } = split;
    // Range z starts at column z·depth of op(A), row z·depth of op(B):
    // along A's stored rows unless A is transposed, across B's unless B is.
    // In bounds: z·depth < k, so within the checked extents.
    let stride_a = if trans_a { depth * lda } else { depth };
    let stride_b = if trans_b { depth } else { depth * ldb };
    let plane = m * n;
    let partial_kernel =
        <TIn as GemmTypes<TOut>>::partial_kernel_name(trans_a, trans_b, tile, tf32);
    let cfg = Gemm {
        batch: ranges,
        ..*gemm
    }
    .config(
        dev,
        <TIn as GemmTypes<S>>::shape(tile, tf32),
        partial_kernel,
    )?;
    <TIn as GemmTypes<S>>::launch_gemm(
        dev,
        cfg,
        tile,
        tf32,
        (trans_a, trans_b),
        (depth, last),
        alpha,
        S::ZERO,
        (a, lda, stride_a),
        (b, ldb, stride_b),
        partials.batched_matrix_mut(m, n, n, ranges, plane)?,
    )?;
    sum_partials(dev, (m, n), ranges, beta, partials, c)
}

/// Split-k's second pass: `C ← Σ partials + beta·C` over the `ranges`
/// planes of `m × n` in `partials` (`gemm_split_k_sum_*`, in plane order).
fn sum_partials<TOut: SplitKSum<S>, S: Element>(
    dev: &Device,
    (m, n): (usize, usize),
    ranges: usize,
    beta: S,
    partials: &DeviceBuffer<S>,
    c: MatrixMut<'_, TOut>,
) -> Result<()> {
    // One thread per element of C, 32 × 8 blocks; the kernel strides over
    // rows beyond the grid's.
    let sum_kernel = TOut::sum_name();
    let limits = dev.limits().max_grid_dim;
    let x = grid_axis(
        sum_kernel,
        "grid.x (⌈n / 32⌉)",
        n.div_ceil(32),
        limits[0],
        "split the columns of C over several calls",
    )?;
    let y = m.div_ceil(8).min(limits[1].min(65535) as usize) as u32;
    let cfg = LaunchConfig::new(Dim3::new(x, y, 1), Dim3::new(32, 8, 1));
    TOut::launch_sum(dev, cfg, ranges, beta, partials, c)
}

/// How the Hopper kernels run a GEMM ([`Gemm::wgmma`]): one launch of the
/// kernel into `C`'s type (`whole`), or with `split` split-k's launches into
/// f32 planes and their sum (`whole` then for when the planes do not fit).
struct Hopper {
    whole: wgmma::Plan,
    split: Option<wgmma::SplitPlan>,
}

/// The Hopper GEMM's tile configurations (`warpforge_kernels_hopper::gemm`'s
/// `WideTile` and `NarrowTile`), the index of their kernels' names in
/// [`GemmTypes::WGMMA_KERNELS`]: chosen per grid (the repository's
/// `docs/hopper/README.md`), named by [`Gemm::kernel_name_for`].
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HopperTile {
    /// 128 × 256 tiles (`*_128x256x64_s4`).
    Wide = 0,
    /// 128 × 128 tiles (`*_128x128x64_s4`), for grids the wide ones leave
    /// half idle.
    Narrow = 1,
}

/// The tensor maps of `A` and `B` the Hopper kernels take (batched, boxes
/// of 64 × 64, 128B-swizzled).
pub type HopperMap<'b, T> = crate::TensorMap<'b, T, 3, { hp::BOX }, { hp::BOX }, Sw128>;

/// The supported pairs of input (`Self`, the type of `A` and `B`) and output
/// (`TOut`, the type of `C`) element types, and the type of `alpha` and
/// `beta` ([`Scalar`](Self::Scalar)): `(f32, f32)`, `(f64, f64)` on the SIMT
/// cores, and `f16` or `bf16` into `f32`, `f16` or `bf16` on the tensor
/// cores (module docs). Sealed.
pub trait GemmTypes<TOut: Element>: Element + sealed::Sealed<TOut> {
    /// The type of `alpha` and `beta`, and of the accumulation.
    type Scalar: GemmElement;
    /// The tensor-core configurations with kernels for this pair; empty for
    /// the SIMT pairs (one tile each, no choice).
    const TILES: &'static [TileConfig];
    /// The configurations with TF32 kernels for this pair ([`Gemm::tf32`]):
    /// both for f32 → f32, none for the others.
    const TF32_TILES: &'static [TileConfig];
    /// The launch shape of the kernels of `tile` (`None` for SIMT, one of
    /// [`TILES`](Self::TILES) for the tensor cores, as the caller checked).
    #[doc(hidden)]
    fn shape(tile: Option<TileConfig>, tf32: bool) -> BlockShape;
    /// Whether [`Gemm::dmma`] applies: f64, whose kernels run on the FP64
    /// tensor cores or the SIMT cores.
    #[doc(hidden)]
    const HAS_DMMA: bool = false;
    /// Whether a skinny GEMM that splits along k runs the large tile rather
    /// than the small one (f32 on the SIMT cores; `Gemm::large_split_fills`).
    #[doc(hidden)]
    const SPLIT_LARGE: bool = false;
    /// Whether an unpinned GEMM of this pair runs its tensor-core kernels
    /// ([`TILES`](Self::TILES)) on `dev`: always, but f64 only where the
    /// GPU has FP64 tensor cores (else its SIMT kernels).
    #[doc(hidden)]
    fn tensor_cores_on(dev: &Device) -> bool {
        let _ = dev;
        true
    }
    /// The kernel's name for these transposes and `tile` (as for `shape`;
    /// with `tf32`, the TF32 kernel of `tile`, one of
    /// [`TF32_TILES`](Self::TF32_TILES)).
    #[doc(hidden)]
    fn kernel_name(
        trans_a: bool,
        trans_b: bool,
        tile: Option<TileConfig>,
        tf32: bool,
    ) -> &'static str;
    /// Launches the kernel for these transposes and `tile` (as for
    /// `kernel_name`); `depth` is `(k, k_last)`: every batch `k` deep but
    /// the last, `k_last` (split-k's remainder; `k` for a plain batch).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn launch_gemm(
        dev: &Device,
        cfg: LaunchConfig,
        tile: Option<TileConfig>,
        tf32: bool,
        trans: (bool, bool),
        depth: (usize, usize),
        alpha: Self::Scalar,
        beta: Self::Scalar,
        a: (&DeviceBuffer<Self>, usize, usize),
        b: (&DeviceBuffer<Self>, usize, usize),
        c: MatrixMut<'_, TOut>,
    ) -> Result<()>;
    /// The Hopper (`wgmma`) kernels' names for this pair, wide then
    /// narrow ([`HopperTile`]), each `nn, nt, tn, tt`, if it has them.
    #[doc(hidden)]
    const WGMMA_KERNELS: Option<[[&'static str; 4]; 2]> = None;
    /// The Hopper kernels' shared memory per block in bytes, wide and
    /// narrow.
    #[doc(hidden)]
    const WGMMA_SHARED_BYTES: [usize; 2] = [0; 2];
    /// Whether [`Gemm::tf32`] runs on the Hopper tf32 kernel for this pair
    /// (f32 → f32; `run_wgmma_tf32`).
    #[doc(hidden)]
    const WGMMA_TF32: bool = false;
    /// Runs the GEMM on the Hopper tf32 kernel (only called when
    /// [`WGMMA_TF32`](Self::WGMMA_TF32)): `a` and `b` are the buffer, its
    /// leading dimension, its batch stride and whether it is transposed.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn run_wgmma_tf32(
        dev: &Device,
        grid: (HopperTile, u32),
        mnk: (usize, usize, usize),
        count: usize,
        scale: (Self::Scalar, Self::Scalar),
        a: (&DeviceBuffer<Self>, usize, usize, bool),
        b: (&DeviceBuffer<Self>, usize, usize, bool),
        truncate: bool,
        c: MatrixMut<'_, TOut>,
    ) -> Result<()> {
        let _ = (dev, grid, mnk, count, scale, a, b, truncate, c);
        Err(tf32_refused(Self::DTYPE, TOut::DTYPE))
    }
    /// Launches the Hopper kernel of `tile` for these transposes (only
    /// called when [`WGMMA_KERNELS`](Self::WGMMA_KERNELS) names them).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn launch_wgmma(
        dev: &Device,
        cfg: LaunchConfig,
        tile: HopperTile,
        trans: (bool, bool),
        k: usize,
        alpha: Self::Scalar,
        beta: Self::Scalar,
        maps: (&HopperMap<'_, Self>, &HopperMap<'_, Self>),
        c: MatrixMut<'_, TOut>,
    ) -> Result<()> {
        let _ = (dev, cfg, tile, trans, k, alpha, beta, maps, c);
        Err(no_hopper_kernels(Self::DTYPE, TOut::DTYPE))
    }
    /// The Hopper kernels that write the scalar type (f32), as
    /// [`WGMMA_KERNELS`](Self::WGMMA_KERNELS): split-k's partial products on
    /// the Hopper path, if the pair has Hopper kernels.
    #[doc(hidden)]
    const WGMMA_PARTIAL_KERNELS: Option<[[&'static str; 4]; 2]> = None;
    /// Launches the Hopper kernel of `tile` into the scalar type for these
    /// transposes (only called when
    /// [`WGMMA_PARTIAL_KERNELS`](Self::WGMMA_PARTIAL_KERNELS) names them).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn launch_wgmma_partial(
        dev: &Device,
        cfg: LaunchConfig,
        tile: HopperTile,
        trans: (bool, bool),
        k: usize,
        alpha: Self::Scalar,
        beta: Self::Scalar,
        maps: (&HopperMap<'_, Self>, &HopperMap<'_, Self>),
        c: MatrixMut<'_, Self::Scalar>,
    ) -> Result<()> {
        let _ = (dev, cfg, tile, trans, k, alpha, beta, maps, c);
        Err(no_hopper_kernels(Self::DTYPE, TOut::DTYPE))
    }
    /// Split-k's sum: the `ranges` planes of `m × n` in `partials`, plus
    /// `beta·C`, into `c` ([`sum_partials`]).
    #[doc(hidden)]
    fn sum_partials(
        dev: &Device,
        m_n: (usize, usize),
        ranges: usize,
        beta: Self::Scalar,
        partials: &DeviceBuffer<Self::Scalar>,
        c: MatrixMut<'_, TOut>,
    ) -> Result<()>;
    /// The kernel of split-k's partial products for these transposes and
    /// tile: the one of the same tile that writes the scalar type.
    #[doc(hidden)]
    fn partial_kernel_name(
        trans_a: bool,
        trans_b: bool,
        tile: Option<TileConfig>,
        tf32: bool,
    ) -> &'static str;
    /// Split-k ([`Gemm::split_k`]): the partial products of `split`'s
    /// k-ranges into `partials` (this input type into the scalar type, one
    /// `m × n` plane each), then their sum into `c`.
    #[doc(hidden)]
    fn run_split_k(
        gemm: &Gemm<Self::Scalar>,
        dev: &Device,
        split: SplitK,
        a: (&DeviceBuffer<Self>, usize),
        b: (&DeviceBuffer<Self>, usize),
        partials: &mut DeviceBuffer<Self::Scalar>,
        c: MatrixMut<'_, TOut>,
    ) -> Result<()>;
}

/// The tensor-core pairs: `$small` the 64 × 64 kernels (nn, nt, tn, tt),
/// `$large` the 128 × 128 ones and `$wide` the 128 × 256 ones where the
/// pair has them, then its Hopper kernels, wide (`$h…`) and narrow
/// (`$n…`).
macro_rules! gemm_tensor {
    ($tin:ty, $tout:ty, [$($small:ident),+] $(, [$($large:ident),+], [$($wide:ident),+], [$hnn:ident, $hnt:ident, $htn:ident, $htt:ident], [$nnn:ident, $nnt:ident, $ntn:ident, $ntt:ident])?) => {
        impl sealed::Sealed<$tout> for $tin {}
        impl GemmTypes<$tout> for $tin {
            type Scalar = f32;
            $(
                const WGMMA_KERNELS: Option<[[&'static str; 4]; 2]> = Some([
                    [hp::$hnn::NAME, hp::$hnt::NAME, hp::$htn::NAME, hp::$htt::NAME],
                    [hp::$nnn::NAME, hp::$nnt::NAME, hp::$ntn::NAME, hp::$ntt::NAME],
                ]);
                const WGMMA_SHARED_BYTES: [usize; 2] =
                    [hp::$hnn::SHARED_BYTES, hp::$nnn::SHARED_BYTES];
                const WGMMA_PARTIAL_KERNELS: Option<[[&'static str; 4]; 2]> =
                    <$tin as GemmTypes<f32>>::WGMMA_KERNELS;
                fn launch_wgmma_partial(
                    dev: &Device,
                    cfg: LaunchConfig,
                    tile: HopperTile,
                    trans: (bool, bool),
                    k: usize,
                    alpha: f32,
                    beta: f32,
                    maps: (&HopperMap<'_, Self>, &HopperMap<'_, Self>),
                    c: MatrixMut<'_, f32>,
                ) -> Result<()> {
                    <$tin as GemmTypes<f32>>::launch_wgmma(dev, cfg, tile, trans, k, alpha, beta, maps, c)
                }
                fn launch_wgmma(
                    dev: &Device,
                    cfg: LaunchConfig,
                    tile: HopperTile,
                    trans: (bool, bool),
                    k: usize,
                    alpha: f32,
                    beta: f32,
                    (a, b): (&HopperMap<'_, Self>, &HopperMap<'_, Self>),
                    c: MatrixMut<'_, $tout>,
                ) -> Result<()> {
                    // `wgmma::unsupported` refused k past 2^31 − 1.
                    let args = (a, b, k as u32, alpha, beta, c);
                    match (tile, trans) {
                        (HopperTile::Wide, (false, false)) => dev.launch(hp::$hnn, cfg, args),
                        (HopperTile::Wide, (false, true)) => dev.launch(hp::$hnt, cfg, args),
                        (HopperTile::Wide, (true, false)) => dev.launch(hp::$htn, cfg, args),
                        (HopperTile::Wide, (true, true)) => dev.launch(hp::$htt, cfg, args),
                        (HopperTile::Narrow, (false, false)) => dev.launch(hp::$nnn, cfg, args),
                        (HopperTile::Narrow, (false, true)) => dev.launch(hp::$nnt, cfg, args),
                        (HopperTile::Narrow, (true, false)) => dev.launch(hp::$ntn, cfg, args),
                        (HopperTile::Narrow, (true, true)) => dev.launch(hp::$ntt, cfg, args),
                    }
                }
            )?
            const TILES: &'static [TileConfig] = gemm_tensor!(@tiles $([$($large),+])?);
            const TF32_TILES: &'static [TileConfig] = &[];
            fn shape(tile: Option<TileConfig>, _: bool) -> BlockShape {
                tile.unwrap_or(TileConfig::Small).shape()
            }
            kernel_table!($tout;
                $((Some(TileConfig::Large), _) => tc: $($large),+;
                (Some(TileConfig::Wide), _) => tc: $($wide),+;)?
                _ => tc: $($small),+;
            );
            split_k_impl!($tout, f32);
        }
    };
    (@tiles) => { &[TileConfig::Small] };
    (@tiles [$($large:ident),+]) => { &[TileConfig::Small, TileConfig::Large, TileConfig::Wide] };
}

gemm_tensor!(
    f16,
    f32,
    [
        gemm_f16_f32_nn_64x64x32_s3,
        gemm_f16_f32_nt_64x64x32_s3,
        gemm_f16_f32_tn_64x64x32_s3,
        gemm_f16_f32_tt_64x64x32_s3
    ],
    [
        gemm_f16_f32_nn_128x128x32_s4,
        gemm_f16_f32_nt_128x128x32_s4,
        gemm_f16_f32_tn_128x128x32_s4,
        gemm_f16_f32_tt_128x128x32_s4
    ],
    [
        gemm_f16_f32_nn_128x256x32_s3,
        gemm_f16_f32_nt_128x256x32_s3,
        gemm_f16_f32_tn_128x256x32_s3,
        gemm_f16_f32_tt_128x256x32_s3
    ],
    [
        gemm_wgmma_f16_f32_nn_128x256x64_s4,
        gemm_wgmma_f16_f32_nt_128x256x64_s4,
        gemm_wgmma_f16_f32_tn_128x256x64_s4,
        gemm_wgmma_f16_f32_tt_128x256x64_s4
    ],
    [
        gemm_wgmma_f16_f32_nn_128x128x64_s4,
        gemm_wgmma_f16_f32_nt_128x128x64_s4,
        gemm_wgmma_f16_f32_tn_128x128x64_s4,
        gemm_wgmma_f16_f32_tt_128x128x64_s4
    ]
);
gemm_tensor!(
    f16,
    f16,
    [
        gemm_f16_f16_nn_64x64x32_s3,
        gemm_f16_f16_nt_64x64x32_s3,
        gemm_f16_f16_tn_64x64x32_s3,
        gemm_f16_f16_tt_64x64x32_s3
    ],
    [
        gemm_f16_f16_nn_128x128x32_s4,
        gemm_f16_f16_nt_128x128x32_s4,
        gemm_f16_f16_tn_128x128x32_s4,
        gemm_f16_f16_tt_128x128x32_s4
    ],
    [
        gemm_f16_f16_nn_128x256x32_s3,
        gemm_f16_f16_nt_128x256x32_s3,
        gemm_f16_f16_tn_128x256x32_s3,
        gemm_f16_f16_tt_128x256x32_s3
    ],
    [
        gemm_wgmma_f16_f16_nn_128x256x64_s4,
        gemm_wgmma_f16_f16_nt_128x256x64_s4,
        gemm_wgmma_f16_f16_tn_128x256x64_s4,
        gemm_wgmma_f16_f16_tt_128x256x64_s4
    ],
    [
        gemm_wgmma_f16_f16_nn_128x128x64_s4,
        gemm_wgmma_f16_f16_nt_128x128x64_s4,
        gemm_wgmma_f16_f16_tn_128x128x64_s4,
        gemm_wgmma_f16_f16_tt_128x128x64_s4
    ]
);
gemm_tensor!(
    f16,
    bf16,
    [
        gemm_f16_bf16_nn_64x64x32_s3,
        gemm_f16_bf16_nt_64x64x32_s3,
        gemm_f16_bf16_tn_64x64x32_s3,
        gemm_f16_bf16_tt_64x64x32_s3
    ]
);
gemm_tensor!(
    bf16,
    f32,
    [
        gemm_bf16_f32_nn_64x64x32_s3,
        gemm_bf16_f32_nt_64x64x32_s3,
        gemm_bf16_f32_tn_64x64x32_s3,
        gemm_bf16_f32_tt_64x64x32_s3
    ],
    [
        gemm_bf16_f32_nn_128x128x32_s4,
        gemm_bf16_f32_nt_128x128x32_s4,
        gemm_bf16_f32_tn_128x128x32_s4,
        gemm_bf16_f32_tt_128x128x32_s4
    ],
    [
        gemm_bf16_f32_nn_128x256x32_s3,
        gemm_bf16_f32_nt_128x256x32_s3,
        gemm_bf16_f32_tn_128x256x32_s3,
        gemm_bf16_f32_tt_128x256x32_s3
    ],
    [
        gemm_wgmma_bf16_f32_nn_128x256x64_s4,
        gemm_wgmma_bf16_f32_nt_128x256x64_s4,
        gemm_wgmma_bf16_f32_tn_128x256x64_s4,
        gemm_wgmma_bf16_f32_tt_128x256x64_s4
    ],
    [
        gemm_wgmma_bf16_f32_nn_128x128x64_s4,
        gemm_wgmma_bf16_f32_nt_128x128x64_s4,
        gemm_wgmma_bf16_f32_tn_128x128x64_s4,
        gemm_wgmma_bf16_f32_tt_128x128x64_s4
    ]
);
gemm_tensor!(
    bf16,
    f16,
    [
        gemm_bf16_f16_nn_64x64x32_s3,
        gemm_bf16_f16_nt_64x64x32_s3,
        gemm_bf16_f16_tn_64x64x32_s3,
        gemm_bf16_f16_tt_64x64x32_s3
    ]
);
gemm_tensor!(
    bf16,
    bf16,
    [
        gemm_bf16_bf16_nn_64x64x32_s3,
        gemm_bf16_bf16_nt_64x64x32_s3,
        gemm_bf16_bf16_tn_64x64x32_s3,
        gemm_bf16_bf16_tt_64x64x32_s3
    ],
    [
        gemm_bf16_bf16_nn_128x128x32_s4,
        gemm_bf16_bf16_nt_128x128x32_s4,
        gemm_bf16_bf16_tn_128x128x32_s4,
        gemm_bf16_bf16_tt_128x128x32_s4
    ],
    [
        gemm_bf16_bf16_nn_128x256x32_s3,
        gemm_bf16_bf16_nt_128x256x32_s3,
        gemm_bf16_bf16_tn_128x256x32_s3,
        gemm_bf16_bf16_tt_128x256x32_s3
    ],
    [
        gemm_wgmma_bf16_bf16_nn_128x256x64_s4,
        gemm_wgmma_bf16_bf16_nt_128x256x64_s4,
        gemm_wgmma_bf16_bf16_tn_128x256x64_s4,
        gemm_wgmma_bf16_bf16_tt_128x256x64_s4
    ],
    [
        gemm_wgmma_bf16_bf16_nn_128x128x64_s4,
        gemm_wgmma_bf16_bf16_nt_128x128x64_s4,
        gemm_wgmma_bf16_bf16_tn_128x128x64_s4,
        gemm_wgmma_bf16_bf16_tt_128x128x64_s4
    ]
);

/// How a TF32 GEMM ([`Gemm::tf32`]) makes tf32 of its f32 operands
/// ([`Gemm::tf32_rounding`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tf32Rounding {
    /// Each element rounded to its nearest tf32, ties away from zero
    /// (`cvt.rna.tf32.f32`), on every kernel: on the `mma.sync` kernels in
    /// a pass over each shared-memory stage, on the Hopper kernel in the
    /// K-major copies it reads. The default.
    #[default]
    Nearest,
    /// Each element's 13 low fraction bits dropped (toward zero): what the
    /// tensor cores do with an f32 they are given as tf32, and so what a
    /// GEMM that reads its f32 operands as they are computes. Runs on the
    /// Hopper kernel only (sm_90, the `hopper` feature), which then reads a
    /// K-major operand whose rows start on 16 bytes (A not transposed, B
    /// transposed) where it is, without a copy, and copies the others
    /// K-major as they are.
    Truncate,
}

/// A GEMM `C ← alpha·op(A)·op(B) + beta·C` of `op(A)`: `m × k`, `op(B)`:
/// `k × n`, `C`: `m × n` (module docs). Defaults: no transposes, `alpha = 1`,
/// `beta = 0`, each leading dimension its stored row length.
///
/// `T` is the type of `alpha` and `beta` ([`GemmTypes::Scalar`]): `f32` for
/// f32 and for the f16/bf16 tensor-core pairs, `f64` for f64.
///
/// ```
/// use half::bf16;
/// use warpforge::{Device, gemm::Gemm};
/// let dev = Device::emulator();
/// let a = dev.upload(&[1.0f32, 2.0, 3.0, 4.0].map(bf16::from_f32))?; // 2 × 2
/// let b = dev.upload(&[5.0f32, 6.0, 7.0, 8.0].map(bf16::from_f32))?; // 2 × 2
/// let mut c = dev.upload(&[1.0f32; 4])?; // f32 output (f16, bf16 too)
/// Gemm::new(2, 2, 2).beta(1.0).run(&dev, &a, &b, &mut c)?;
/// assert_eq!(c.to_host()?, [20.0, 23.0, 44.0, 51.0]);
/// # Ok::<(), warpforge::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gemm<T> {
    m: usize,
    n: usize,
    k: usize,
    trans_a: bool,
    trans_b: bool,
    alpha: T,
    beta: T,
    lda: Option<usize>,
    ldb: Option<usize>,
    ldc: Option<usize>,
    batch: usize,
    stride_a: Option<usize>,
    stride_b: Option<usize>,
    stride_c: Option<usize>,
    tile: Option<TileConfig>,
    /// TF32 ([`Gemm::tf32`]) and how it rounds; `None`: f32 exactly.
    tf32: Option<Tf32Rounding>,
    split_k: Option<usize>,
    wgmma: Option<bool>,
    dmma: Option<bool>,
    sm_limit: Option<u32>,
}

/// The sizes of one stored operand, for the checks and their messages.
struct Stored {
    name: &'static str,
    ld_name: &'static str,
    rows: usize,
    cols: usize,
    ld: usize,
    transposed: bool,
}

impl Stored {
    /// Elements the operand needs: `(rows − 1)·ld + cols` (0 if empty), after
    /// checking `ld ≥ cols`.
    fn needed(&self) -> Result<usize> {
        let Stored {
            name,
            ld_name,
            rows,
            cols,
            ld,
            transposed,
        } = *self;
        let how = if transposed { " (transposed)" } else { "" };
        if ld < cols {
            return Err(Error::ShapeMismatch {
                op: "gemm",
                detail: format!(
                    "{ld_name} = {ld} is less than the row length of {name}, stored \
                     {rows} × {cols}{how}: {ld_name} must be at least {cols}"
                ),
            });
        }
        if rows == 0 || cols == 0 {
            return Ok(0);
        }
        (rows - 1)
            .checked_mul(ld)
            .and_then(|x| x.checked_add(cols))
            .ok_or_else(|| Error::SizeOverflow {
                what: format!("gemm: {name}, stored {rows} × {cols}{how} with {ld_name} = {ld}"),
            })
    }

    /// Checks the operand's buffer of `len` elements against its shape.
    fn check(&self, len: usize) -> Result<()> {
        let needed = self.needed()?;
        if len < needed {
            let Stored {
                name,
                ld_name,
                rows,
                cols,
                ld,
                transposed,
            } = *self;
            let how = if transposed { " (transposed)" } else { "" };
            return Err(Error::ShapeMismatch {
                op: "gemm",
                detail: format!(
                    "{name} is stored {rows} × {cols}{how} with {ld_name} = {ld}, which needs \
                     ({rows} − 1)·{ld} + {cols} = {needed} elements, but its buffer has {len}"
                ),
            });
        }
        Ok(())
    }
}

impl Stored {
    /// Checks a batch of `count` of these matrices `stride` elements apart
    /// (default `rows·ld`; 0 = one matrix for all) in a buffer of `len`:
    /// it must hold `(count − 1)·stride + extent`. Returns the stride.
    fn check_batch(
        &self,
        len: usize,
        count: usize,
        stride: Option<usize>,
        stride_name: &'static str,
    ) -> Result<usize> {
        self.check(len)?;
        let extent = self.needed()?;
        let name = self.name;
        let stride = match stride {
            Some(s) => s,
            None => self
                .rows
                .checked_mul(self.ld)
                .ok_or_else(|| Error::SizeOverflow {
                    what: format!(
                        "gemm: {name}'s default {stride_name}, {} × {}",
                        self.rows, self.ld
                    ),
                })?,
        };
        if count <= 1 || stride == 0 || extent == 0 {
            return Ok(stride);
        }
        let needed = (count - 1)
            .checked_mul(stride)
            .and_then(|x| x.checked_add(extent))
            .ok_or_else(|| Error::SizeOverflow {
                what: format!(
                    "gemm: {name}, {count} batches with {stride_name} = {stride} and extent {extent}"
                ),
            })?;
        if len < needed {
            return Err(Error::ShapeMismatch {
                op: "gemm",
                detail: format!(
                    "{name}: a batch of {count} with {stride_name} = {stride} needs \
                     ({count} − 1)·{stride} + {extent} = {needed} elements, but its buffer has {len}"
                ),
            });
        }
        Ok(stride)
    }
}

impl<T: GemmElement> Gemm<T> {
    /// `op(A)·op(B)` of an `m × k` by a `k × n` matrix into the `m × n` `C`.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Gemm {
            m,
            n,
            k,
            trans_a: false,
            trans_b: false,
            alpha: T::ONE,
            beta: T::ZERO,
            lda: None,
            ldb: None,
            ldc: None,
            batch: 1,
            stride_a: None,
            stride_b: None,
            stride_c: None,
            tile: None,
            tf32: None,
            split_k: None,
            wgmma: None,
            dmma: None,
            sm_limit: None,
        }
    }

    /// `op(A) = Aᵀ`: `A` is stored `k × m`.
    pub fn trans_a(mut self, trans: bool) -> Self {
        self.trans_a = trans;
        self
    }

    /// `op(B) = Bᵀ`: `B` is stored `n × k`.
    pub fn trans_b(mut self, trans: bool) -> Self {
        self.trans_b = trans;
        self
    }

    /// The factor of `op(A)·op(B)` (default 1).
    pub fn alpha(mut self, alpha: T) -> Self {
        self.alpha = alpha;
        self
    }

    /// The factor of `C` (default 0: `C` is not read).
    pub fn beta(mut self, beta: T) -> Self {
        self.beta = beta;
        self
    }

    /// Elements between the starts of `A`'s stored rows (default: its row
    /// length, `k`, or `m` when transposed).
    pub fn lda(mut self, lda: usize) -> Self {
        self.lda = Some(lda);
        self
    }

    /// Elements between the starts of `B`'s stored rows (default: its row
    /// length, `n`, or `k` when transposed).
    pub fn ldb(mut self, ldb: usize) -> Self {
        self.ldb = Some(ldb);
        self
    }

    /// Elements between the starts of `C`'s rows (default `n`).
    pub fn ldc(mut self, ldc: usize) -> Self {
        self.ldc = Some(ldc);
        self
    }

    /// A strided batch of `count` GEMMs (default 1): GEMM `z` reads `A` at
    /// `z·stride_a`, `B` at `z·stride_b` and updates `C` at `z·stride_c`
    /// (elements), one batch per `blockIdx.z` (at most the device's grid z,
    /// 65535). `count = 0` does nothing (after the checks).
    pub fn batch(mut self, count: usize) -> Self {
        self.batch = count;
        self
    }

    /// Elements between consecutive batches' `A` (default: its stored rows
    /// × `lda`); 0 broadcasts one `A` to every batch.
    pub fn stride_a(mut self, stride: usize) -> Self {
        self.stride_a = Some(stride);
        self
    }

    /// Elements between consecutive batches' `B` (default: its stored rows
    /// × `ldb`); 0 broadcasts one `B` to every batch.
    pub fn stride_b(mut self, stride: usize) -> Self {
        self.stride_b = Some(stride);
        self
    }

    /// Elements between consecutive batches' `C` (default `m·ldc`). With
    /// more than one batch the batches must not overlap (two batches would
    /// write one element: refused): stacked, at least `C`'s extent
    /// `(m − 1)·ldc + n`; or side by side in one wider matrix, at least `n`
    /// with `(count − 1)·stride_c + n ≤ ldc`.
    pub fn stride_c(mut self, stride: usize) -> Self {
        self.stride_c = Some(stride);
        self
    }

    /// Pins the configuration (default: [`TileConfig::choose`]'s pick for
    /// the shape and device, module docs). For the tensor-core pairs, TF32
    /// and f32 on the SIMT cores; for f64 on the FP64 tensor cores it pins
    /// the shape (`Small`: `m8n8k4`, `Large`: sm_90's `m16n8k16`), and on
    /// its one SIMT tile it does nothing ([`dmma`](Self::dmma) picks the
    /// kind of core). [`run`](Self::run) refuses a configuration the pair
    /// has no kernels for (`InvalidParameter`: `Large` and `Wide` for f16 →
    /// bf16 and bf16 → f16, `Wide` for TF32, f64 and f32 on the SIMT cores,
    /// f64's `Large` on a device that does not load the Hopper module).
    pub fn tile(mut self, tile: TileConfig) -> Self {
        self.tile = Some(tile);
        self
    }

    /// Allows TF32 tensor cores for an f32 GEMM (default `false`: f32 runs
    /// on the SIMT cores in full f32 FMA, as cuBLAS does by default).
    ///
    /// With it, `A` and `B` are rounded to tf32 (10 fraction bits, nearest,
    /// ties away from zero, as cuBLAS's `CUBLAS_COMPUTE_32F_FAST_TF32`
    /// rounds) and multiplied on the tensor cores (`mma.sync.m16n8k8`) with
    /// f32 accumulation; `alpha`, `beta`, `C` and the epilogue stay f32.
    /// Each product then carries a relative error up to about 2⁻¹⁰ (the two
    /// roundings, 2⁻¹¹ each), so results differ from the f32 ones by about
    /// `2⁻¹⁰·Σ|a·b|` per element: for training and inference, not where
    /// f32 accuracy is needed. The configurations and their heuristic are
    /// the f16 ones ([`TileConfig`], [`TileConfig::tf32_tile`]). Only for
    /// f32 `A`, `B` and `C`: [`run`](Self::run) refuses it for any other
    /// pair (`InvalidParameter` naming `tf32`).
    ///
    /// ```
    /// use warpforge::{Device, gemm::Gemm};
    /// let dev = Device::emulator();
    /// // 1 + 2⁻¹² is not a tf32: it rounds to 1.
    /// let a = dev.upload(&[1.0f32 + 1.0 / 4096.0; 4])?; // 2 × 2
    /// let b = dev.upload(&[1.0f32; 4])?;
    /// let mut c = dev.upload(&[0.0f32; 4])?;
    /// let gemm = Gemm::new(2, 2, 2).tf32(true);
    /// assert_eq!(gemm.kernel_name_for::<f32, f32>(&dev)?, "gemm_tf32_f32_nn_64x64x16_s3");
    /// gemm.run(&dev, &a, &b, &mut c)?;
    /// assert_eq!(c.to_host()?, [2.0; 4]);
    /// Gemm::new(2, 2, 2).run(&dev, &a, &b, &mut c)?; // f32 SIMT
    /// assert_eq!(c.to_host()?, [2.0 + 2.0 / 4096.0; 4]);
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn tf32(mut self, allow: bool) -> Self {
        self.tf32 = allow.then_some(self.tf32.unwrap_or_default());
        self
    }

    /// How TF32 makes tf32 of `A` and `B` (default
    /// [`Tf32Rounding::Nearest`], every kernel's); sets [`tf32`](Self::tf32)
    /// too. [`Tf32Rounding::Truncate`] drops each element's 13 low fraction
    /// bits instead, as the tensor cores do with an f32 read as tf32: on the
    /// Hopper kernel, which then reads a K-major operand with rows on 16
    /// bytes (`A` not transposed, `B` transposed: NT, `x·Wᵀ`) where it is
    /// instead of copying it. It runs on the Hopper kernel only: where that
    /// cannot run (another GPU, `.wgmma(false)`, a pinned tile or split),
    /// [`run`](Self::run) refuses it (`InvalidParameter` naming
    /// `tf32_rounding`, with the reason). Each product's relative error is
    /// then up to about 2⁻⁹ (two truncations of 2⁻¹⁰ each) rather than
    /// 2⁻¹⁰, and biased toward zero.
    ///
    /// ```
    /// use warpforge::{Arch, Device, gemm::{Gemm, Tf32Rounding}};
    /// let h100 = Device::emulator_for(Arch::Sm90);
    /// // 1 + 3·2⁻¹² lies between the tf32s 1 and 1 + 2⁻¹⁰, nearer 1 + 2⁻¹⁰.
    /// let a = h100.upload(&[1.0f32 + 3.0 / 4096.0; 4])?; // 2 × 2
    /// let b = h100.upload(&[1.0f32; 4])?;
    /// let mut c = h100.upload(&[0.0f32; 4])?;
    /// let gemm = Gemm::new(2, 2, 2).trans_b(true).wgmma(true);
    /// gemm.tf32(true).run(&h100, &a, &b, &mut c)?;
    /// assert_eq!(c.to_host()?, [2.0 + 2.0 / 1024.0; 4]); // rounded up
    /// gemm.tf32_rounding(Tf32Rounding::Truncate).run(&h100, &a, &b, &mut c)?;
    /// assert_eq!(c.to_host()?, [2.0; 4]); // truncated
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn tf32_rounding(mut self, rounding: Tf32Rounding) -> Self {
        self.tf32 = Some(rounding);
        self
    }

    /// Whether this GEMM runs f32 through TF32.
    fn uses_tf32(&self) -> bool {
        self.tf32.is_some()
    }

    /// Whether this GEMM truncates its TF32 operands (the Hopper kernel's
    /// only).
    fn truncates_tf32(&self) -> bool {
        self.tf32 == Some(Tf32Rounding::Truncate)
    }

    /// Pins the Hopper kernels (`true`: [`run`](Self::run) refuses, naming
    /// the reason, a GEMM they cannot run) or the `mma.sync` ones
    /// (`false`). Unpinned (the default), the Hopper kernels run where they
    /// can and the `mma.sync` heuristic would fill the GPU (module docs).
    /// A GEMM with `k = 0` or `alpha = 0` only scales `C`, which the
    /// `mma.sync` kernels do either way.
    ///
    /// ```
    /// use half::bf16;
    /// use warpforge::{Arch, Device, gemm::Gemm};
    /// let h100 = Device::emulator_for(Arch::Sm90);
    /// let gemm = Gemm::<f32>::new(300, 200, 72).wgmma(true);
    /// // 3 × 2 tiles of 128 × 128 on the 132 SMs (3 × 1 of 128 × 256 on 5).
    /// assert_eq!(gemm.kernel_name_for::<bf16, f32>(&h100)?, "gemm_wgmma_bf16_f32_nn_128x128x64_s4");
    /// let few = gemm.sm_limit(5);
    /// assert_eq!(few.kernel_name_for::<bf16, f32>(&h100)?, "gemm_wgmma_bf16_f32_nn_128x256x64_s4");
    /// // lda = 76: not a multiple of 8 elements, which a tensor map needs.
    /// let e = gemm.lda(76).kernel_name_for::<bf16, f32>(&h100).unwrap_err();
    /// assert!(e.to_string().contains("multiple of 8"), "{e}");
    /// let a100 = Device::emulator_for(Arch::Sm80);
    /// assert!(gemm.kernel_name_for::<bf16, f32>(&a100).is_err());
    /// assert!(Gemm::<f32>::new(300, 200, 72).kernel_name_for::<bf16, f32>(&a100).is_ok());
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn wgmma(mut self, pin: bool) -> Self {
        self.wgmma = Some(pin);
        self
    }

    /// Pins f64 to the FP64 tensor cores (`true`: the `mma.sync` f64
    /// kernels on any device — sm_90's `m16n8k16` ones, `gemm_dmma16_f64_*`,
    /// where the device loads the Hopper module, else the `m8n8k4` ones,
    /// `gemm_dmma_f64_*`; [`tile`](Self::tile) pins either) or to the SIMT
    /// cores (`false`: `gemm_f64_*`). Unpinned (the default), f64 runs on
    /// the tensor cores where the GPU has FP64 ones (compute capability 8.0
    /// and 9.0) and on the SIMT cores elsewhere. Both compute each element
    /// as a fused multiply-add chain over `k` (module docs); on exact
    /// inputs their results are the same bits. Only for f64:
    /// [`run`](Self::run) refuses it for any other pair (`InvalidParameter`
    /// naming `dmma`).
    ///
    /// ```
    /// use warpforge::{Arch, Device, gemm::{Gemm, TileConfig}};
    /// let (a100, h100) = (Device::emulator_for(Arch::Sm80), Device::emulator_for(Arch::Sm90));
    /// let gemm = Gemm::<f64>::new(256, 256, 256);
    /// assert_eq!(gemm.kernel_name_for::<f64, f64>(&a100)?, "gemm_dmma_f64_nn_64x64x16_s3");
    /// if warpforge::ptx::HOPPER.left_out.is_none() {
    ///     // A build with the Hopper module: sm_90's large shape on an H100.
    ///     assert_eq!(gemm.kernel_name_for::<f64, f64>(&h100)?, "gemm_dmma16_f64_nn_128x64x16_s3");
    /// }
    /// let small = gemm.tile(TileConfig::Small);
    /// assert_eq!(small.kernel_name_for::<f64, f64>(&h100)?, "gemm_dmma_f64_nn_64x64x16_s3");
    /// assert_eq!(gemm.dmma(false).kernel_name_for::<f64, f64>(&h100)?, "gemm_f64_nn_64x64x8");
    /// let rtx4090 = Device::emulator_for(Arch::Sm89);
    /// assert_eq!(gemm.kernel_name_for::<f64, f64>(&rtx4090)?, "gemm_f64_nn_64x64x8");
    /// assert!(Gemm::<f32>::new(2, 2, 2).dmma(true).kernel_name_for::<f32, f32>(&h100).is_err());
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn dmma(mut self, pin: bool) -> Self {
        self.dmma = Some(pin);
        self
    }

    /// At most `sms` blocks for the Hopper kernels, which are persistent:
    /// by default one block per SM of the device (fewer for fewer tiles),
    /// each walking its share of `C`'s tiles; a limit leaves the other SMs
    /// to work on other streams (as CUTLASS's `sm_count`). `0` is refused
    /// (`InvalidParameter`) by [`run`](Self::run). No effect on the
    /// `mma.sync` kernels (a block per tile).
    ///
    /// ```
    /// use half::bf16;
    /// use warpforge::{Arch, Device, gemm::Gemm};
    /// let h100 = Device::emulator_for(Arch::Sm90);
    /// let gemm = Gemm::<f32>::new(300, 600, 64).wgmma(true);
    /// // 3 × 3 tiles of 128 × 256 (on fewer than 18 SMs): one block each,
    /// // or 2 blocks walking them; on the 132 SMs 3 × 5 of 128 × 128.
    /// assert_eq!(gemm.sm_limit(9).wgmma_blocks::<bf16, f32>(&h100)?, Some(9));
    /// assert_eq!(gemm.sm_limit(2).wgmma_blocks::<bf16, f32>(&h100)?, Some(2));
    /// assert_eq!(gemm.wgmma_blocks::<bf16, f32>(&h100)?, Some(15));
    /// assert!(gemm.sm_limit(0).wgmma_blocks::<bf16, f32>(&h100).is_err());
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn sm_limit(mut self, sms: u32) -> Self {
        self.sm_limit = Some(sms);
        self
    }

    /// The blocks the Hopper kernel runs with on `dev` (see
    /// [`sm_limit`](Self::sm_limit)), or `None` where the `mma.sync`
    /// kernels run instead; the errors of [`run`](Self::run)'s plan.
    pub fn wgmma_blocks<TIn, TOut>(&self, dev: &Device) -> Result<Option<u32>>
    where
        TIn: GemmTypes<TOut, Scalar = T>,
        TOut: Element,
    {
        let (stride_a, stride_b) = self.default_strides()?;
        Ok(self
            .wgmma_plan::<TIn, TOut>(dev, stride_a, stride_b)?
            .map(|hopper| match hopper.split {
                Some(split) => split.ranges.blocks,
                None => hopper.whole.blocks,
            }))
    }

    /// `A`'s and `B`'s stored geometry (leading dimensions and batch
    /// strides as given, or their defaults: the stored row length, and the
    /// operand's extent).
    fn stored_operands(&self) -> (Stored, Stored) {
        let (m, n, k) = (self.m, self.n, self.k);
        let (a_rows, a_cols) = if self.trans_a { (k, m) } else { (m, k) };
        let (b_rows, b_cols) = if self.trans_b { (n, k) } else { (k, n) };
        (
            Stored {
                name: "A",
                ld_name: "lda",
                rows: a_rows,
                cols: a_cols,
                ld: self.lda.unwrap_or(a_cols),
                transposed: self.trans_a,
            },
            Stored {
                name: "B",
                ld_name: "ldb",
                rows: b_rows,
                cols: b_cols,
                ld: self.ldb.unwrap_or(b_cols),
                transposed: self.trans_b,
            },
        )
    }

    /// The Hopper kernels' launches if [`run`](Self::run) takes them on
    /// `dev`, with `A` and `B` batches `stride_a` and `stride_b` apart (see
    /// [`wgmma`](Self::wgmma)): the operands' checked geometry and the
    /// persistent grid, split along k where [`wgmma_split_k_count`] (or a
    /// pinned [`split_k`](Self::split_k) with `.wgmma(true)`) says so. A
    /// pinned `true` that cannot run is `InvalidParameter` naming the
    /// reason, as is `sm_limit(0)`, and a pinned split that cannot be one
    /// (`split_k(0)`, a batch).
    fn wgmma_plan<TIn, TOut>(
        &self,
        dev: &Device,
        stride_a: usize,
        stride_b: usize,
    ) -> Result<Option<Hopper>>
    where
        TIn: GemmTypes<TOut, Scalar = T>,
        TOut: Element,
    {
        if self.sm_limit == Some(0) {
            return Err(Error::InvalidParameter {
                op: "gemm",
                parameter: "sm_limit",
                detail: "a persistent kernel needs at least one SM".into(),
            });
        }
        let pinned_ranges = self.pinned_split_k()?;
        if self.truncates_tf32() && self.wgmma == Some(false) {
            return Err(truncation_refused(
                ".wgmma(false) pins the mma.sync kernels, which round to nearest",
            ));
        }
        // k = 0 or alpha = 0 only scales C (A and B are not read, and may
        // be empty, which no tensor map describes): the mma.sync kernels
        // do that, pinned or not.
        if self.wgmma == Some(false) || self.k == 0 || self.alpha == T::ZERO {
            return Ok(None);
        }
        let (a, b) = self.stored_operands();
        let operand = |s: &Stored, stride| wgmma::Operand {
            rows: s.rows,
            cols: s.cols,
            ld: s.ld,
            count: self.batch,
            stride,
            offset: 0,
        };
        let pinned = if self.tile.is_some() {
            Some("a tile is pinned (`.tile`), which names an mma.sync kernel".to_owned())
        } else if pinned_ranges.is_some_and(|r| r > 1) && self.wgmma.is_none() {
            // `.split_k` alone pins the mma.sync split (with `.wgmma(true)`,
            // the Hopper one; TF32 has none).
            Some("split-k is pinned".to_owned())
        } else if self.uses_tf32() && pinned_ranges.is_some_and(|r| r > 1) {
            Some(
                "the Hopper tf32 kernel does not split k (TF32 splits on the mma.sync kernels)"
                    .to_owned(),
            )
        } else {
            None
        };
        let sms = multiprocessors(dev).min(self.sm_limit.unwrap_or(u32::MAX));
        let tile = HopperTile::for_grid(self.m, self.n, self.batch, sms);
        let kernels = wgmma::Kernels {
            exist: TIn::WGMMA_KERNELS.is_some() && TIn::WGMMA_PARTIAL_KERNELS.is_some(),
            shared_bytes: TIn::WGMMA_SHARED_BYTES,
        };
        // A pinned mma.sync choice is the reason; only otherwise is the
        // Hopper launch planned.
        let plan = match pinned {
            Some(why) => Err(why),
            // TF32: the kernel reads K-major copies of op(A) and op(B)ᵀ
            // (`wgmma::tf32`), whatever the operands' own layouts.
            None if self.uses_tf32() => match (
                wgmma::tf32::packed(self.m, self.k, self.batch),
                wgmma::tf32::packed(self.n, self.k, self.batch),
            ) {
                (Some(a), Some(b)) => wgmma::Plan::new(
                    dev,
                    wgmma::Kernels {
                        exist: TIn::WGMMA_TF32,
                        shared_bytes: TIn::WGMMA_SHARED_BYTES,
                    },
                    tile,
                    (self.m, self.n, self.k),
                    a,
                    b,
                    sms,
                ),
                _ => Err(format!(
                    "K-major copies of {} batches of {} × {} do not fit a usize",
                    self.batch,
                    self.m.max(self.n),
                    self.k
                )),
            },
            None => wgmma::Plan::new(
                dev,
                kernels,
                tile,
                (self.m, self.n, self.k),
                operand(&a, stride_a),
                operand(&b, stride_b),
                sms,
            ),
        };
        let whole = match (self.wgmma, plan) {
            (Some(true), Err(why)) => {
                return Err(Error::InvalidParameter {
                    op: "gemm",
                    parameter: "wgmma",
                    detail: format!("the Hopper kernels cannot run this GEMM: {why}"),
                });
            }
            (_, Err(why)) if self.truncates_tf32() => return Err(truncation_refused(&why)),
            (_, Err(_)) => return Ok(None),
            (_, Ok(plan)) => plan,
        };
        // Split where the tiles leave SMs idle (or as pinned): k-ranges as a
        // batch of the f32-output kernel, summed afterwards (not TF32's: its
        // one kernel runs whole, a pinned split was refused above).
        let ranges = if self.uses_tf32() {
            Some(1)
        } else {
            pinned_ranges
        };
        let ranges = ranges.unwrap_or_else(|| {
            // Unpinned, only where the mma.sync kernels would split too
            // (their small tile's grid cannot fill the GPU): the split's
            // planes, sum and second launch are not measured against the
            // mma.sync kernels where those fill the GPU unsplit.
            let small = TileConfig::Small.shape();
            let small_blocks = self
                .m
                .div_ceil(small.rows)
                .saturating_mul(self.n.div_ceil(small.cols));
            let mma_sync_splits =
                split_k_count(small_blocks, self.k, self.batch, multiprocessors(dev)) > 1;
            if self.wgmma.is_none() && !mma_sync_splits {
                return 1;
            }
            wgmma_split_k_count(tile.tiles(self.m, self.n), self.k, self.batch, sms)
        });
        if let Some(split) = wgmma::Split::new(self.k, ranges) {
            // k runs along A's stored columns unless A is transposed, along
            // B's stored rows unless B is.
            let k_in_cols = (!self.trans_a, self.trans_b);
            match whole.split(dev, kernels, (self.m, self.n), split, k_in_cols, sms) {
                Ok(split) => {
                    return Ok(Some(Hopper {
                        whole,
                        split: Some(split),
                    }));
                }
                Err(why) if pinned_ranges.is_some() => {
                    return Err(Error::InvalidParameter {
                        op: "gemm",
                        parameter: "split_k",
                        detail: format!("the Hopper kernels cannot run this split: {why}"),
                    });
                }
                Err(_) => {}
            }
        }
        let whole = Hopper { whole, split: None };
        if self.wgmma == Some(true) || self.truncates_tf32() {
            return Ok(Some(whole));
        }
        Ok((TileConfig::choose(
            self.m,
            self.n,
            self.batch,
            TIn::TILES,
            multiprocessors(dev),
            dev.limits().max_shared_per_block_optin,
        ) != TileConfig::Small)
            .then_some(whole))
    }

    /// The pinned k-ranges ([`split_k`](Self::split_k)), after refusing
    /// those that cannot be (`InvalidParameter` naming `split_k`): `0`, and
    /// a split of a batch.
    fn pinned_split_k(&self) -> Result<Option<usize>> {
        let refuse = |detail: String| Error::InvalidParameter {
            op: "gemm",
            parameter: "split_k",
            detail,
        };
        match self.split_k {
            Some(0) => Err(refuse(
                "0 k-ranges: use 1 for no split, or more to split k".into(),
            )),
            Some(r) if r > 1 && self.batch != 1 => Err(refuse(format!(
                "{r} k-ranges for a batch of {}: split-k runs one GEMM's k-ranges as a \
                 batch; drop .split_k or run the GEMMs one by one",
                self.batch
            ))),
            r => Ok(r),
        }
    }

    /// The batch strides of `A` and `B` as given, or their defaults (the
    /// operands' extents), for naming the kernel before any buffer is seen.
    fn default_strides(&self) -> Result<(usize, usize)> {
        let (a, b) = self.stored_operands();
        Ok((
            self.stride_a.map_or_else(|| a.needed(), Ok)?,
            self.stride_b.map_or_else(|| b.needed(), Ok)?,
        ))
    }

    /// Pins split-k: the GEMM runs as at most `ranges` GEMMs over
    /// consecutive k-ranges (each a multiple of [`SPLIT_K_ALIGN`] deep but
    /// the last, so fewer when `k` is shallow), each writing its partial
    /// `alpha·op(A)·op(B)` into a plane of a workspace of `ranges·m·n`
    /// scalars (f32; f64 for f64), then one kernel sums the planes in order
    /// and adds `beta·C` (module docs). `1` turns it off; default:
    /// [`split_k_count`]'s pick for the shape and device. The results are
    /// deterministic, but not the bits of the unsplit GEMM (the ranges' sums
    /// are added afterwards, each rounded). For one GEMM (batch 1) with
    /// `alpha ≠ 0`; [`run`](Self::run) refuses `0` and a split of a batch
    /// (`InvalidParameter`), and `OutOfMemory` if the pinned workspace does
    /// not fit (the default falls back to the unsplit GEMM then). It pins
    /// the `mma.sync` kernels' split; with [`wgmma`](Self::wgmma)`(true)`,
    /// the Hopper kernels' (the repository's `docs/hopper/README.md`: the
    /// ranges as a batch of the f32-output kernel, whole 64-deep k-steps,
    /// a tail of k past them as a second launch into the first plane).
    pub fn split_k(mut self, ranges: usize) -> Self {
        self.split_k = Some(ranges);
        self
    }

    /// The k-ranges [`run`](Self::run) splits this GEMM into on `dev` for
    /// `A` and `B` of `TIn` and `C` of `TOut` (`1`: not split): the pinned
    /// count ([`split_k`](Self::split_k)) or [`split_k_count`]'s for the
    /// configuration's grid ([`tile_config_for`](Self::tile_config_for)),
    /// as [`SPLIT_K_ALIGN`]-deep ranges leave it; on the Hopper kernels
    /// [`wgmma_split_k_count`]'s (or the count pinned with
    /// [`wgmma`](Self::wgmma)`(true)`), as ranges of whole 64-deep k-steps
    /// leave it: the planes, a tail of k past them added into the first.
    /// Errors as `tile_config_for`'s, those of `split_k` and of a pinned
    /// `wgmma`.
    pub fn split_k_for<TIn, TOut>(&self, dev: &Device) -> Result<usize>
    where
        TIn: GemmTypes<TOut, Scalar = T>,
        TOut: Element,
    {
        let (stride_a, stride_b) = self.default_strides()?;
        if let Some(hopper) = self.wgmma_plan::<TIn, TOut>(dev, stride_a, stride_b)? {
            return Ok(hopper.split.map_or(1, |split| split.split.ranges));
        }
        let tile = self.tile_config_for::<TIn, TOut>(dev)?;
        Ok(self
            .split_plan(dev, tile, TIn::shape(tile, self.uses_tf32()))?
            .map_or(1, |split| split.ranges))
    }

    /// The split-k plan for `tile` (of launch shape `shape`), or `None`.
    fn split_plan(
        &self,
        dev: &Device,
        tile: Option<TileConfig>,
        shape: BlockShape,
    ) -> Result<Option<SplitK>> {
        let ranges = match self.pinned_split_k()? {
            Some(r) => r,
            None => {
                let blocks = self
                    .m
                    .div_ceil(shape.rows)
                    .saturating_mul(self.n.div_ceil(shape.cols));
                split_k_count(blocks, self.k, self.batch, multiprocessors(dev))
            }
        };
        // alpha = 0 or k = 0: C ← beta·C, no products to split.
        if ranges <= 1 || self.alpha == T::ZERO || self.k == 0 {
            return Ok(None);
        }
        Ok(SplitK::new(self.k, ranges, tile))
    }

    /// The name of the small-tile SIMT kernel for `A`, `B` and `C` of `T`
    /// and these transposes: what [`run`](Self::run) launches for f64 on a
    /// GPU without FP64 tensor cores, and for f32 with
    /// [`TileConfig::Small`]; [`kernel_name_for`](Self::kernel_name_for)
    /// names what it launches on a device.
    pub fn kernel_name(&self) -> &'static str {
        <T as GemmTypes<T>>::kernel_name(self.trans_a, self.trans_b, None, false)
    }

    /// The tensor-core configuration [`run`](Self::run) uses on `dev` for
    /// `A` and `B` of `TIn` and `C` of `TOut` (the TF32 one with
    /// [`tf32`](Self::tf32)): the pinned one ([`tile`](Self::tile)), else
    /// [`TileConfig::choose`]'s — but for f32 on the SIMT cores `Large`
    /// where `choose` gives `Small` for a grid that cannot fill the GPU and
    /// the large tile's grid splits along k (f32's skinny path: 128 × 4096 ×
    /// 4096 on 132 SMs runs 32 large blocks in 8 k-ranges); for f64 `Small`
    /// on the FP64 tensor cores and `None` on the SIMT cores
    /// ([`dmma`](Self::dmma)).
    /// `InvalidParameter` for a pinned configuration the pair has no kernels
    /// for, and for `tf32` on a pair other than f32 → f32.
    pub fn tile_config_for<TIn, TOut>(&self, dev: &Device) -> Result<Option<TileConfig>>
    where
        TIn: GemmTypes<TOut, Scalar = T>,
        TOut: Element,
    {
        let tiles = if self.uses_tf32() {
            if TIn::TF32_TILES.is_empty() {
                return Err(tf32_refused(TIn::DTYPE, TOut::DTYPE));
            }
            TIn::TF32_TILES
        } else {
            TIn::TILES
        };
        if TIn::HAS_DMMA {
            // f64: `.dmma` picks the kind of core; on the tensor cores
            // `.tile` pins the shape (`Small`: m8n8k4, `Large`: sm_90's
            // m16n8k16), else the large one wherever the device loads the
            // Hopper module that holds it, and m8n8k4 elsewhere.
            let tensor_cores = self.dmma.unwrap_or_else(|| TIn::tensor_cores_on(dev));
            if !tensor_cores {
                return Ok(None);
            }
            let large = hopper_module_on(dev);
            return match self.tile {
                Some(TileConfig::Large) if !large => Err(Error::InvalidParameter {
                    op: "gemm",
                    parameter: "tile",
                    detail: format!(
                        "Large: the f64 Large tile is sm_90's mma.sync.m16n8k16, in the Hopper \
                         module, which this device (compute capability {}.{}) does not load \
                         (it needs 9.0 and a build with the `hopper` feature); drop .tile or \
                         pin Small (m8n8k4)",
                        dev.compute_capability().0,
                        dev.compute_capability().1
                    ),
                }),
                Some(TileConfig::Wide) => Err(Error::InvalidParameter {
                    op: "gemm",
                    parameter: "tile",
                    detail: format!(
                        "Wide: the f64 → f64 tensor-core GEMM has kernels for {:?} only",
                        tiles
                    ),
                }),
                Some(tile) => Ok(Some(tile)),
                None if large => Ok(Some(TileConfig::Large)),
                None => Ok(Some(TileConfig::Small)),
            };
        }
        if self.dmma.is_some() {
            return Err(Error::InvalidParameter {
                op: "gemm",
                parameter: "dmma",
                detail: format!(
                    "the FP64 tensor-core pin applies to f64 A, B and C only, not to {} → {}; \
                     drop .dmma",
                    TIn::DTYPE.name(),
                    TOut::DTYPE.name()
                ),
            });
        }
        if tiles.is_empty() {
            return Ok(None);
        }
        let tile = match self.tile {
            Some(tile) if tiles.contains(&tile) => tile,
            Some(tile) => {
                return Err(Error::InvalidParameter {
                    op: "gemm",
                    parameter: "tile",
                    detail: format!(
                        "{tile:?}: the {} → {} tensor-core GEMM has kernels for {:?} only",
                        TIn::DTYPE.name(),
                        TOut::DTYPE.name(),
                        tiles
                    ),
                });
            }
            None => match TileConfig::choose(
                self.m,
                self.n,
                self.batch,
                tiles,
                multiprocessors(dev),
                dev.limits().max_shared_per_block_optin,
            ) {
                TileConfig::Small
                    if TIn::SPLIT_LARGE && !self.uses_tf32() && self.large_split_fills(dev) =>
                {
                    TileConfig::Large
                }
                tile => tile,
            },
        };
        Ok(Some(tile))
    }

    /// Whether a GEMM whose small-tile grid cannot fill the GPU runs the
    /// large tile split along k instead (the pairs with
    /// [`GemmTypes::SPLIT_LARGE`], f32 on the SIMT cores, whose small
    /// kernel spends 8 bounds-checked scalar shared loads on 16 FMAs where
    /// the warp-tiled large one spends 4 16-byte loads on 64): one GEMM
    /// (batch 1) with the split not pinned, whose 64 × 64 blocks are fewer
    /// than the SMs, whose 128 × 128 tiles cover at most an eighth more of
    /// `C` (`m` or `n` under 128 would leave a large block's threads
    /// idle), and which [`split_k_count`] splits on the large grid (`k` at
    /// least 1024). 128 × 4096 × 4096 on 132 SMs: 128 small blocks; 32
    /// large ones in 8 ranges, 256 blocks (two a SM: one wave), where the
    /// small tile ran 3 ranges of 128.
    fn large_split_fills(&self, dev: &Device) -> bool {
        let sms = multiprocessors(dev);
        // (rows, columns) of the small and large blocks.
        let (small, large) = (
            (F32_TILE.m, F32_TILE.n),
            (F32_TILE_LARGE.m, F32_TILE_LARGE.n),
        );
        let blocks = |(r, c): (usize, usize)| self.m.div_ceil(r).saturating_mul(self.n.div_ceil(c));
        let cover = |(r, c): (usize, usize)| blocks((r, c)).saturating_mul(r * c);
        self.batch == 1
            && self.split_k.is_none()
            && blocks(small) < sms as usize
            && cover(large).saturating_mul(8) <= cover(small).saturating_mul(9)
            && split_k_count(blocks(large), self.k, 1, sms) > 1
    }

    /// The name of the kernel [`run`](Self::run) launches on `dev` on `A`
    /// and `B` of `TIn` and `C` of `TOut` (its configuration:
    /// [`tile_config_for`](Self::tile_config_for), whose errors it returns).
    /// For a split, the kernel of the partial products, which writes the
    /// scalar type (f32 for the tensor-core pairs; the sum kernel follows it;
    /// [`split_k_for`](Self::split_k_for) says into how many ranges).
    pub fn kernel_name_for<TIn, TOut>(&self, dev: &Device) -> Result<&'static str>
    where
        TIn: GemmTypes<TOut, Scalar = T>,
        TOut: Element,
    {
        let (stride_a, stride_b) = self.default_strides()?;
        let hopper = match self.wgmma_plan::<TIn, TOut>(dev, stride_a, stride_b)? {
            Some(Hopper { whole, .. }) if self.uses_tf32() => {
                return Ok(wgmma::tf32::KERNELS[whole.tile as usize]);
            }
            Some(Hopper { whole, split: None }) => {
                TIn::WGMMA_KERNELS.map(|k| k[whole.tile as usize])
            }
            // The partial products' kernel (the sum follows it).
            Some(Hopper {
                whole,
                split: Some(_),
            }) => TIn::WGMMA_PARTIAL_KERNELS.map(|k| k[whole.tile as usize]),
            None => None,
        };
        if let Some(names) = hopper {
            return Ok(names[trans_index(self.trans_a, self.trans_b)]);
        }
        let tile = self.tile_config_for::<TIn, TOut>(dev)?;
        let (trans_a, trans_b, tf32) = (self.trans_a, self.trans_b, self.uses_tf32());
        // A split launches the partial products' kernel (the sum follows it).
        Ok(match self.split_plan(dev, tile, TIn::shape(tile, tf32))? {
            Some(_) => TIn::partial_kernel_name(trans_a, trans_b, tile, tf32),
            None => TIn::kernel_name(trans_a, trans_b, tile, tf32),
        })
    }

    /// The launch [`run`](Self::run) makes for `C` of `m × n`: a 1-D block of
    /// `shape.threads` threads, one per block tile of `C`
    /// (`⌈n / shape.cols⌉ × ⌈m / shape.rows⌉`), checked against `limits`.
    fn config(
        &self,
        dev: &Device,
        shape: BlockShape,
        kernel: &'static str,
    ) -> Result<LaunchConfig> {
        let limits = dev.limits().max_grid_dim;
        let axis = |what, tiles, limit, fix| grid_axis(kernel, what, tiles, limit, fix);
        let x = axis(
            "grid.x (column tiles of C, ⌈n / tile columns⌉)",
            self.n.div_ceil(shape.cols),
            limits[0],
            "split the columns of C over several calls",
        )?;
        let y = axis(
            "grid.y (row tiles of C, ⌈m / tile rows⌉)",
            self.m.div_ceil(shape.rows),
            limits[1],
            "split the rows of C over several calls (m at most the limit × the tile's rows)",
        )?;
        let z = axis(
            "grid.z (the batch count)",
            self.batch,
            limits[2].min(65535),
            "split the batch over several calls",
        )?;
        Ok(LaunchConfig::new(
            Dim3::new(x, y, z),
            Dim3::x(shape.threads as u32),
        ))
    }

    /// `C ← alpha·op(A)·op(B) + beta·C` on `dev`, after checking every size
    /// (module docs). On the emulator it runs to completion; on a GPU it is
    /// queued (reading `c` waits for it).
    ///
    /// `A` and `B` are of `TIn`, `C` of `TOut`, a pair of [`GemmTypes`]
    /// whose scalar is `T` (f32 for the tensor-core pairs).
    pub fn run<TIn, TOut>(
        &self,
        dev: &Device,
        a: &DeviceBuffer<TIn>,
        b: &DeviceBuffer<TIn>,
        c: &mut DeviceBuffer<TOut>,
    ) -> Result<()>
    where
        TIn: GemmTypes<TOut, Scalar = T>,
        TOut: Element,
    {
        for buffer in [a.device(), b.device(), c.device()] {
            dev.check_same(buffer)?;
        }
        let Gemm {
            m,
            n,
            k,
            trans_a,
            trans_b,
            alpha,
            beta,
            ..
        } = *self;
        let (a_shape, b_shape) = self.stored_operands();
        let c_shape = Stored {
            name: "C",
            ld_name: "ldc",
            rows: m,
            cols: n,
            ld: self.ldc.unwrap_or(n),
            transposed: false,
        };
        let count = self.batch;
        let stride_a = a_shape.check_batch(a.len(), count, self.stride_a, "stride_a")?;
        let stride_b = b_shape.check_batch(b.len(), count, self.stride_b, "stride_b")?;
        let stride_c = c_shape.check_batch(c.len(), count, self.stride_c, "stride_c")?;
        if m == 0 || n == 0 || count == 0 {
            return Ok(());
        }
        // C's batches, bound as `count` matrices stride_c apart
        // (`OutMatrix::batch` in the kernel: batch z at z·stride_c), refused
        // unless they cannot overlap: stacked (stride_c ≥ C's extent,
        // (m − 1)·ldc + n) or side by side (column ranges of one row:
        // stride_c ≥ n and (count − 1)·stride_c + n ≤ ldc).
        let ldc = c_shape.ld;
        // C's binding errors, named for the GEMM.
        let c_error = |e| match e {
            Error::ShapeMismatch { detail, .. } => Error::ShapeMismatch {
                op: "gemm",
                detail: format!(
                    "C, {count} batches of {m} × {n} with ldc = {ldc}, stride_c = \
                     {stride_c} apart: {detail}"
                ),
            },
            e => e,
        };
        let whole = match self.wgmma_plan::<TIn, TOut>(dev, stride_a, stride_b)? {
            Some(Hopper { whole, split: None }) => Some(whole),
            Some(Hopper {
                whole,
                split: Some(split),
            }) => {
                // The planes: every element written by the ranges' launch
                // (beta = 0), so no memset. Out of memory: refused when
                // pinned, else the unsplit launch (C untouched either way).
                match alloc_planes::<T>(dev, split.split.ranges, m, n) {
                    Ok(mut partials) => {
                        let c = c.matrix_mut(m, n, ldc)?;
                        return self.run_wgmma_split_k(dev, &split, (a, b), &mut partials, c);
                    }
                    Err(Error::OutOfMemory { .. }) if self.split_k.is_none() => Some(whole),
                    Err(e) => return Err(e),
                }
            }
            None => None,
        };
        if let Some(plan) = whole.as_ref().filter(|_| self.uses_tf32()) {
            let c = c
                .batched_matrix_mut(m, n, ldc, count, stride_c)
                .map_err(c_error)?;
            return TIn::run_wgmma_tf32(
                dev,
                (plan.tile, plan.blocks),
                (m, n, k),
                count,
                (alpha, beta),
                (a, a_shape.ld, stride_a, trans_a),
                (b, b_shape.ld, stride_b, trans_b),
                self.truncates_tf32(),
                c,
            );
        }
        if let Some(plan) = whole {
            let map_a = plan.a.map(a)?;
            let map_b = plan.b.map(b)?;
            let cfg = LaunchConfig::new(Dim3::x(plan.blocks), Dim3::x(hp::THREADS));
            let c = c
                .batched_matrix_mut(m, n, ldc, count, stride_c)
                .map_err(c_error)?;
            return TIn::launch_wgmma(
                dev,
                cfg,
                plan.tile,
                (trans_a, trans_b),
                k,
                alpha,
                beta,
                (&map_a, &map_b),
                c,
            );
        }
        let tile = self.tile_config_for::<TIn, TOut>(dev)?;
        let shape = TIn::shape(tile, self.uses_tf32());
        if let Some(split) = self.split_plan(dev, tile, shape)? {
            // The workspace: a plane of m × n scalars per k-range, each
            // element written by the partial products' launch (beta = 0).
            // Out of memory: refused when pinned, else the unsplit GEMM
            // below (C untouched either way).
            match alloc_planes::<T>(dev, split.ranges, m, n) {
                Ok(mut partials) => {
                    let c = c.matrix_mut(m, n, ldc)?;
                    return TIn::run_split_k(
                        self,
                        dev,
                        split,
                        (a, a_shape.ld),
                        (b, b_shape.ld),
                        &mut partials,
                        c,
                    );
                }
                Err(Error::OutOfMemory { .. }) if self.split_k.is_none() => {}
                Err(e) => return Err(e),
            }
        }
        let kernel = TIn::kernel_name(trans_a, trans_b, tile, self.uses_tf32());
        let cfg = self.config(dev, shape, kernel)?;
        let c = c
            .batched_matrix_mut(m, n, ldc, count, stride_c)
            .map_err(c_error)?;
        TIn::launch_gemm(
            dev,
            cfg,
            tile,
            self.uses_tf32(),
            (trans_a, trans_b),
            (k, k),
            alpha,
            beta,
            (a, a_shape.ld, stride_a),
            (b, b_shape.ld, stride_b),
            c,
        )
    }

    /// Split-k on the Hopper kernels (`split`, planned and checked by
    /// [`wgmma_plan`](Self::wgmma_plan)): the ranges as one launch of a
    /// batch of the f32-output kernel, `alpha·op(A)·op(B)` of range `z` into
    /// plane `z` of `partials`; the tail of k, if any, as a second launch
    /// adding its `alpha·op(A)·op(B)` into plane 0 (`beta = 1`, exact
    /// f32 arithmetic as the sum's); then the planes' sum with `beta·C`
    /// into `c`, rounded once (alpha applied once, in the planes).
    fn run_wgmma_split_k<TIn, TOut>(
        &self,
        dev: &Device,
        plan: &wgmma::SplitPlan,
        (a, b): (&DeviceBuffer<TIn>, &DeviceBuffer<TIn>),
        partials: &mut DeviceBuffer<T>,
        c: MatrixMut<'_, TOut>,
    ) -> Result<()>
    where
        TIn: GemmTypes<TOut, Scalar = T>,
        TOut: Element,
    {
        let (m, n) = (self.m, self.n);
        let trans = (self.trans_a, self.trans_b);
        let split = plan.split;
        let launch = |part: &wgmma::Plan, depth, beta, planes: MatrixMut<'_, T>| {
            let (map_a, map_b) = (part.a.map(a)?, part.b.map(b)?);
            let cfg = LaunchConfig::new(Dim3::x(part.blocks), Dim3::x(hp::THREADS));
            TIn::launch_wgmma_partial(
                dev,
                cfg,
                part.tile,
                trans,
                depth,
                self.alpha,
                beta,
                (&map_a, &map_b),
                planes,
            )
        };
        // Planes m·n apart (alloc_planes checked ranges·m·n).
        let planes = partials.batched_matrix_mut(m, n, n, split.ranges, m * n)?;
        launch(&plan.ranges, split.depth, T::ZERO, planes)?;
        if let Some(tail) = &plan.tail {
            launch(tail, split.tail, T::ONE, partials.matrix_mut(m, n, n)?)?;
        }
        TIn::sum_partials(dev, (m, n), split.ranges, self.beta, partials, c)
    }
}

/// Split-k's workspace: `ranges` planes of `m × n` scalars (checked size),
/// unset: the partial products' launch writes every element.
fn alloc_planes<S: Element>(
    dev: &Device,
    ranges: usize,
    m: usize,
    n: usize,
) -> Result<DeviceBuffer<S>> {
    let len = ranges
        .checked_mul(m)
        .and_then(|x| x.checked_mul(n))
        .ok_or_else(|| Error::SizeOverflow {
            what: format!("gemm: split-k workspace, {ranges} planes of {m} × {n}"),
        })?;
    dev.alloc_for_kernel_output::<S>(len)
}
