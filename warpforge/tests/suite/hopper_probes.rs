//! The Hopper instructions the tf32 GEMM and the Hopper convolution added,
//! each through a probe kernel (`warpforge-probes`, sm_90a module): its exact
//! result on the emulator against an independent reference, and on an sm_90
//! GPU the same bits as the emulator's (`#[ignore]`d here; the GPU suite runs
//! them).
//!
//! - `probe_wgmma_tf32`: `wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32`
//!   on f32 operands whose low 13 fraction bits hold random bits, which the
//!   instruction must ignore (truncation, not rounding);
//! - `probe_gather_wgmma_{f16,tf32}`: the convolution producer's path — 16-byte
//!   `cp.async` chunk copies with zero fill into 128B-swizzled K-major operand
//!   tiles (`OperandTile::copy_chunk_or_zero`), `cp.async.wait_group`, the proxy
//!   fence, an mbarrier arrival, and a consumer warpgroup's `wgmma` reading
//!   them.
//!
//! Every operand is an integer (times a small power of two) once the bits the
//! tensor cores ignore are dropped, and every sum is exact in f32, so the exact
//! product is the reference and any correct device gives its bits whatever
//! order it adds in.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use warpforge::{Device, DeviceBuffer, Dim3, LaunchConfig};
use warpforge_testkit as probe;

use crate::common::{assert_same, hopper_gpu};

/// The low fraction bits of an f32 that a tf32 read ignores.
const TF32_IGNORED: u32 = 0x1fff;

/// `v` as the tensor cores read it as tf32: its low 13 fraction bits dropped.
fn tf32_truncated(v: f32) -> f32 {
    f32::from_bits(v.to_bits() & !TF32_IGNORED)
}

/// `v` rounded to tf32, nearest, ties away from zero (`cvt.rna.tf32.f32`,
/// for finite `v`): what a device that rounded instead of truncating
/// would read.
fn tf32_rounded(v: f32) -> f32 {
    f32::from_bits((v.to_bits() + 0x1000) & !TF32_IGNORED)
}

/// A small integer times 2^e (`e` in −2 ..= 1), with random bits in its low
/// 13 fraction bits (never all zero): tf32-exact once they are dropped.
fn tf32_with_junk(rng: &mut StdRng) -> f32 {
    let int = rng.random_range(-7i32..=7) as f32;
    let v = int * 2f32.powi(rng.random_range(-2..=1));
    f32::from_bits(v.to_bits() | rng.random_range(1..=TF32_IGNORED))
}

/// The bits of `v`.
fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Operands of `probe_wgmma_tf32` from `seed`: A (64 × 32) and B (32 × 128,
/// k × n) with junk in the ignored bits, C (64 × 128) small integers.
fn tf32_operands(seed: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (n, k) = (probe::WGMMA_N, probe::WGMMA_K_TF32);
    let mut rng = StdRng::seed_from_u64(seed);
    let a = (0..64 * k).map(|_| tf32_with_junk(&mut rng)).collect();
    let b = (0..k * n).map(|_| tf32_with_junk(&mut rng)).collect();
    let c = (0..64 * n)
        .map(|_| rng.random_range(-10i32..=10) as f32)
        .collect();
    (a, b, c)
}

/// `A·B + C` in f64 with each operand read through `read` (exact for these
/// operands), row-major 64 × 128.
fn tf32_reference(a: &[f32], b: &[f32], c: &[f32], read: fn(f32) -> f32) -> Vec<f32> {
    let (n, k) = (probe::WGMMA_N, probe::WGMMA_K_TF32);
    (0..64 * n)
        .map(|i| {
            let (r, col) = (i / n, i % n);
            let dot: f64 = (0..k)
                .map(|j| f64::from(read(a[r * k + j])) * f64::from(read(b[j * n + col])))
                .sum();
            (dot + f64::from(c[i])) as f32
        })
        .collect()
}

/// `probe_wgmma_tf32` on `dev`.
fn run_tf32_probe(dev: &Device, a: &[f32], b: &[f32], c: &[f32]) -> Vec<f32> {
    let (ab, bb, cb) = (
        dev.upload(a).unwrap(),
        dev.upload(b).unwrap(),
        dev.upload(c).unwrap(),
    );
    let mut d = dev.alloc_zeroed::<f32>(64 * probe::WGMMA_N).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(128));
    dev.launch(probe::probe_wgmma_tf32, cfg, (&ab, &bb, &cb, &mut d))
        .unwrap();
    d.to_host().unwrap()
}

/// The tf32 `wgmma` on the emulator: exactly `A·B + C` of the operands
/// truncated to tf32, bit for bit; and the operands are ones on which
/// reading them rounded would give another D (so the GPU test below
/// tells truncation from rounding).
#[test]
fn tf32_wgmma_probe_ignores_the_low_13_fraction_bits() {
    let dev = Device::emulator();
    for seed in [1, 2] {
        let (a, b, c) = tf32_operands(seed);
        let truncated = tf32_reference(&a, &b, &c, tf32_truncated);
        assert_same(
            &bits(&run_tf32_probe(&dev, &a, &b, &c)),
            &bits(&truncated),
            &format!("seed {seed}: the emulator (left) against A·B + C of the truncated operands"),
        );
        let rounded = tf32_reference(&a, &b, &c, tf32_rounded);
        let differ = truncated
            .iter()
            .zip(&rounded)
            .filter(|(t, r)| t != r)
            .count();
        assert!(
            differ > truncated.len() / 2,
            "seed {seed}: rounding the operands changes only {differ} elements"
        );
    }
}

/// On a Hopper GPU: the tf32 `wgmma` ignores the low 13 fraction bits as the
/// emulator does — D bit for bit the emulator's, and the exact product of
/// the truncated operands.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_tf32_wgmma_matches_the_emulator_bit_for_bit() {
    let gpu = hopper_gpu();
    let emu = Device::emulator();
    for seed in [3, 4] {
        let (a, b, c) = tf32_operands(seed);
        let on_gpu = bits(&run_tf32_probe(&gpu, &a, &b, &c));
        assert_same(
            &on_gpu,
            &bits(&run_tf32_probe(&emu, &a, &b, &c)),
            &format!("seed {seed}: the GPU (left) against the emulator"),
        );
        assert_same(
            &on_gpu,
            &bits(&tf32_reference(&a, &b, &c, tf32_truncated)),
            &format!("seed {seed}: the GPU (left) against the truncated operands' product"),
        );
    }
}

/// An element type of the gather probe: how a test makes one from an
/// integer, what the tensor cores read, and the probe's instance.
trait Gathered: warpforge::Element {
    /// Elements in a 16-byte chunk.
    const PER_CHUNK: usize = 16 / size_of::<Self>();
    /// `int`, with whatever junk the tensor cores ignore (tf32: random low
    /// fraction bits).
    fn make(int: i32, rng: &mut StdRng) -> Self;
    /// The value the tensor cores read.
    fn read(self) -> f64;
    /// Launches `probe_gather_wgmma_*` of this type on `dev`: `(x, map, d)`.
    fn launch(dev: &Device, args: GatherArgs<'_, Self>) -> warpforge::Result<()>;
}

/// The gather probe's arguments: the source, the map, D.
type GatherArgs<'a, T> = (
    &'a DeviceBuffer<T>,
    &'a DeviceBuffer<u32>,
    &'a mut DeviceBuffer<f32>,
);

/// One block of two warpgroups.
fn gather_launch() -> LaunchConfig {
    LaunchConfig::new(Dim3::x(1), Dim3::x(256))
}

impl Gathered for half::f16 {
    fn make(int: i32, _: &mut StdRng) -> Self {
        half::f16::from_f32(int as f32)
    }
    fn read(self) -> f64 {
        self.to_f64()
    }
    fn launch(dev: &Device, args: GatherArgs<'_, Self>) -> warpforge::Result<()> {
        dev.launch(probe::probe_gather_wgmma_f16, gather_launch(), args)
    }
}

impl Gathered for f32 {
    fn make(int: i32, rng: &mut StdRng) -> Self {
        f32::from_bits((int as f32).to_bits() | rng.random_range(1..=TF32_IGNORED))
    }
    fn read(self) -> f64 {
        f64::from(tf32_truncated(self))
    }
    fn launch(dev: &Device, args: GatherArgs<'_, Self>) -> warpforge::Result<()> {
        dev.launch(probe::probe_gather_wgmma_tf32, gather_launch(), args)
    }
}

/// Chunks of the gather probe's source.
const SOURCE_CHUNKS: u32 = 200;

/// A gather from `seed`: the source (`SOURCE_CHUNKS` chunks of integers in
/// −4 ..= 4) and the map of the probe's `GATHER_CHUNKS` destination chunks,
/// about one in four zero-filled, the rest random source chunks (repeats
/// and any order), A's whole row 5 and B's whole row 70 zero-filled.
fn gather_case<T: Gathered>(seed: u64) -> (Vec<T>, Vec<u32>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let x = (0..SOURCE_CHUNKS as usize * T::PER_CHUNK)
        .map(|_| {
            let int = rng.random_range(-4..=4);
            T::make(int, &mut rng)
        })
        .collect();
    let mut map: Vec<u32> = (0..probe::GATHER_CHUNKS)
        .map(|_| {
            if rng.random_range(0..4) == 0 {
                probe::ZERO_FILL
            } else {
                rng.random_range(0..SOURCE_CHUNKS)
            }
        })
        .collect();
    for row in [5, 64 + 70] {
        map[8 * row..8 * row + 8].fill(probe::ZERO_FILL);
    }
    (x, map)
}

/// The probe's D from the map: A's row `m` and Bᵀ's row `n` are their 8
/// destination chunks, each its source chunk's elements or zeros; `D[m][n]
/// = Σ_k A[m][k]·Bᵀ[n][k]` in f64 (exact here).
fn gather_reference<T: Gathered>(x: &[T], map: &[u32]) -> Vec<f32> {
    let per = T::PER_CHUNK;
    let depth = 8 * per;
    let operand_row = |row: usize| -> Vec<f64> {
        (0..depth)
            .map(|k| match map[8 * row + k / per] {
                probe::ZERO_FILL => 0.0,
                chunk => x[chunk as usize * per + k % per].read(),
            })
            .collect()
    };
    let a: Vec<Vec<f64>> = (0..64).map(operand_row).collect();
    let b: Vec<Vec<f64>> = (64..64 + probe::WGMMA_N).map(operand_row).collect();
    (0..64 * probe::WGMMA_N)
        .map(|i| {
            let (r, c) = (&a[i / probe::WGMMA_N], &b[i % probe::WGMMA_N]);
            r.iter().zip(c).map(|(p, q)| p * q).sum::<f64>() as f32
        })
        .collect()
}

/// `probe_gather_wgmma_*` on `dev`.
fn run_gather<T: Gathered>(dev: &Device, x: &[T], map: &[u32]) -> Vec<f32> {
    let (xb, mb) = (dev.upload(x).unwrap(), dev.upload(map).unwrap());
    let mut d = dev.alloc_zeroed::<f32>(64 * probe::WGMMA_N).unwrap();
    T::launch(dev, (&xb, &mb, &mut d)).unwrap();
    d.to_host().unwrap()
}

/// On the emulator, each gather probe's D is the exact product of the
/// operands its map describes, zero-filled chunks as zeros (the tiles were
/// NaN before the copies, so a chunk left unwritten would show).
fn check_gather_on_the_emulator<T: Gathered>(what: &str) {
    let dev = Device::emulator();
    for seed in [7, 8] {
        let (x, map) = gather_case::<T>(seed);
        assert_same(
            &bits(&run_gather(&dev, &x, &map)),
            &bits(&gather_reference(&x, &map)),
            &format!("{what}, seed {seed}: the emulator (left) against the gathered product"),
        );
    }
}

#[test]
fn gather_probe_f16_multiplies_the_chunks_it_copied_and_zero_filled() {
    check_gather_on_the_emulator::<half::f16>("f16");
}

#[test]
fn gather_probe_tf32_multiplies_the_chunks_it_copied_and_zero_filled() {
    check_gather_on_the_emulator::<f32>("tf32");
}

/// A wanted chunk past the source is the kernel's bug: the emulator reports
/// it (the GPU would read zeros) rather than gathering a wrong operand.
#[test]
fn gather_probe_chunk_past_the_source_is_a_reported_fault() {
    let dev = Device::emulator();
    let (x, mut map) = gather_case::<half::f16>(9);
    map[100] = SOURCE_CHUNKS;
    let (xb, mb) = (dev.upload(&x).unwrap(), dev.upload(&map).unwrap());
    let mut d = dev.alloc_zeroed::<f32>(64 * probe::WGMMA_N).unwrap();
    let err = half::f16::launch(&dev, (&xb, &mb, &mut d))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("a gathered chunk {SOURCE_CHUNKS} of a buffer")),
        "{err}"
    );
}

/// On a Hopper GPU: the conv producer's path (cp.async with zero fill into a
/// swizzled tile, fence, mbarrier, wgmma) gives the emulator's bits, and the
/// exact product, for f16 and tf32.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_gather_wgmma_matches_the_emulator_bit_for_bit() {
    fn check<T: Gathered>(gpu: &Device, emu: &Device, what: &str) {
        for seed in [10, 11] {
            let (x, map) = gather_case::<T>(seed);
            let on_gpu = bits(&run_gather(gpu, &x, &map));
            assert_same(
                &on_gpu,
                &bits(&run_gather(emu, &x, &map)),
                &format!("{what}, seed {seed}: the GPU (left) against the emulator"),
            );
            assert_same(
                &on_gpu,
                &bits(&gather_reference(&x, &map)),
                &format!("{what}, seed {seed}: the GPU (left) against the gathered product"),
            );
        }
    }
    let (gpu, emu) = (hopper_gpu(), Device::emulator());
    check::<half::f16>(&gpu, &emu, "f16");
    check::<f32>(&gpu, &emu, "tf32");
}
