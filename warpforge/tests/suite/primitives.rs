//! Every device primitive, run through its probe kernel, equals its definition
//! (written here from the PTX ISA / CUDA docs, independently of the device
//! crate). On the emulator always; on the GPU the same probes must agree with
//! the emulator bit for bit (ignored without a GPU).

use proptest::prelude::*;
use warpforge::{Device, DeviceBuffer, Dim3, Element, EmuError, Error, Fault, LaunchConfig};
use warpforge_testkit::{self as probe, PROBES};

const WARP: usize = 32;

/// The NaN rule of `warpforge_device::num` ("NaN results"), restated from its
/// sources: every NaN an f32 instruction of the GPU computes is 0x7fffffff
/// (CUDA Programming Guide, "Floating-Point Standard").
const GPU_NAN_F32: u32 = 0x7fff_ffff;
/// The f16/bf16 NaN the GPU's conversions write (`CUDART_NAN_FP16`/`_BF16`).
const GPU_NAN_HALF: u16 = 0x7fff;
/// A NaN with the sign bit and a payload, unlike any canonical NaN: a result
/// with these bits was copied, not computed.
const ODD_NAN: f32 = f32::from_bits(0xffc0_1234);

fn run<T: Element>(
    dev: &Device,
    out_len: usize,
    launch: impl FnOnce(&mut DeviceBuffer<T>),
) -> Vec<T> {
    let mut out = dev.alloc_zeroed::<T>(out_len).unwrap();
    launch(&mut out);
    out.to_host().unwrap()
}

/// The lane that lane `lane` reads in a warpforge shuffle in `mode` (0 idx,
/// 1 up, 2 down, 3 bfly) with lane/offset operand `b`: the PTX ISA's
/// `shfl.sync` pseudo-code, with the `c` operand CUDA uses for a full warp
/// (segment mask 0; clamp 31, or 0 for up).
fn isa_shuffle_source(mode: u32, lane: u32, b: u32) -> u32 {
    let c: u32 = if mode == 1 { 0x00 } else { 0x1f };
    let bval = b & 0x1f; // bval[4:0] = b[4:0]
    let cval = c & 0x1f; // cval[4:0] = c[4:0]
    let segmask = (c >> 8) & 0x1f; // mask[4:0] = c[12:8]
    let max_lane = i64::from((lane & segmask) | (cval & !segmask));
    let min_lane = lane & segmask;
    let lane_i = i64::from(lane);
    let (j, pval) = match mode {
        0 => {
            let j = i64::from(min_lane | (bval & !segmask));
            (j, j <= max_lane)
        }
        1 => {
            let j = lane_i - i64::from(bval);
            (j, j >= max_lane)
        }
        2 => {
            let j = lane_i + i64::from(bval);
            (j, j <= max_lane)
        }
        _ => {
            let j = i64::from(lane ^ bval);
            (j, j <= max_lane)
        }
    };
    // if (!pval) j = lane;
    if pval { j as u32 } else { lane }
}

/// Shuffle operands: the whole u32 range, with the small values (and those
/// just past 31) that exercise every source lane often enough.
fn shuffle_arg() -> impl Strategy<Value = u32> {
    prop_oneof![
        any::<u32>(),
        0u32..70,
        (0u32..32).prop_map(|b| b | 0xffff_ffe0)
    ]
}

fn shuffle_results(dev: &Device, x: &[u32], mode: u32, arg: u32) -> Vec<u32> {
    let xb = dev.upload(x).unwrap();
    let cfg = LaunchConfig::new(Dim3::x((x.len() / WARP) as u32), Dim3::x(WARP as u32));
    run(dev, x.len(), |out| {
        dev.launch(probe::probe_shuffle, cfg, (&xb, mode, arg, out))
            .unwrap()
    })
}

/// `probe_shuffle_in` over whole warps: its output, or the emulator's fault.
fn masked_shuffle_results(
    dev: &Device,
    x: &[u64],
    mode: u32,
    arg: u32,
    mask: u32,
) -> Result<Vec<u64>, Box<EmuError>> {
    let xb = dev.upload(x).unwrap();
    let cfg = LaunchConfig::new(Dim3::x((x.len() / WARP) as u32), Dim3::x(WARP as u32));
    let mut out = dev.alloc_zeroed::<u64>(2 * x.len()).unwrap();
    match dev.launch(
        probe::probe_shuffle_in,
        cfg,
        (&xb, mode, arg, mask, &mut out),
    ) {
        Ok(()) => Ok(out.to_host().unwrap()),
        Err(Error::KernelFault {
            emulated: Some(e), ..
        }) => Err(e),
        Err(other) => panic!("{other}"),
    }
}

fn vote_results(dev: &Device, pred: &[u32], block: u32, kernel_is_block: bool) -> Vec<u32> {
    let pb = dev.upload(pred).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(pred.len() as u32 / block), Dim3::x(block));
    run(dev, 3 * pred.len(), |out| {
        if kernel_is_block {
            dev.launch(probe::probe_block_vote, cfg, (&pb, out))
                .unwrap()
        } else {
            dev.launch(probe::probe_vote, cfg, (&pb, out)).unwrap()
        }
    })
}

fn f32_reduce_results(dev: &Device, x: &[f32]) -> Vec<f32> {
    let xb = dev.upload(x).unwrap();
    let cfg = LaunchConfig::new(Dim3::x((x.len() / WARP) as u32), Dim3::x(WARP as u32));
    run(dev, 3 * x.len(), |out| {
        dev.launch(probe::probe_warp_reduce_f32, cfg, (&xb, out))
            .unwrap()
    })
}

fn i32_reduce_results(dev: &Device, x: &[i32]) -> Vec<i32> {
    let xb = dev.upload(x).unwrap();
    let cfg = LaunchConfig::new(Dim3::x((x.len() / WARP) as u32), Dim3::x(WARP as u32));
    run(dev, 3 * x.len(), |out| {
        dev.launch(probe::probe_warp_reduce_i32, cfg, (&xb, out))
            .unwrap()
    })
}

fn convert_results(dev: &Device, x: &[f32]) -> (Vec<u16>, Vec<u16>, Vec<f32>) {
    let xb = dev.upload(x).unwrap();
    let mut h = dev.alloc_zeroed::<half::f16>(x.len()).unwrap();
    let mut b = dev.alloc_zeroed::<half::bf16>(x.len()).unwrap();
    let mut back = dev.alloc_zeroed::<f32>(2 * x.len()).unwrap();
    let cfg = LaunchConfig::for_elements(x.len(), 64).unwrap();
    dev.launch(probe::probe_convert, cfg, (&xb, &mut h, &mut b, &mut back))
        .unwrap();
    let bits = |v: Vec<half::f16>| v.into_iter().map(half::f16::to_bits).collect();
    let bbits = |v: Vec<half::bf16>| v.into_iter().map(half::bf16::to_bits).collect();
    (
        bits(h.to_host().unwrap()),
        bbits(b.to_host().unwrap()),
        back.to_host().unwrap(),
    )
}

/// Whether `bits` (a 16-bit float with `man` mantissa bits, decoded by `value`) is
/// the round-to-nearest-even of `x`: no neighbour is closer, and on a tie it is even.
fn is_nearest_even(x: f32, bits: u16, value: impl Fn(u16) -> f32) -> bool {
    let r = value(bits);
    if x.is_nan() {
        return r.is_nan();
    }
    if r.is_infinite() {
        // Overflow: x must be beyond the largest finite value's rounding boundary.
        let max = value(bits - 1);
        let next_gap = max - value(bits - 2);
        return r.signum() == x.signum()
            && f64::from(x.abs()) >= f64::from(max.abs()) + f64::from(next_gap.abs()) / 2.0;
    }
    let d = (f64::from(r) - f64::from(x)).abs();
    let neighbours = [bits.wrapping_add(1), bits.wrapping_sub(1)];
    neighbours.into_iter().all(|n| {
        let v = value(n);
        if v.is_nan() || (v.signum() != r.signum() && r != 0.0) {
            return true;
        }
        let dn = (f64::from(v) - f64::from(x)).abs();
        dn > d || (dn == d && bits & 1 == 0)
    })
}

fn f32_strategy() -> impl Strategy<Value = f32> {
    prop_oneof![
        (any::<bool>(), 1u32..0x80_0000).prop_map(|(neg, payload)| f32::from_bits(
            u32::from(neg) << 31 | 0x7f80_0000 | payload
        )),
        -70000.0f32..70000.0,
        -1.0f32..1.0,
        any::<u32>().prop_map(f32::from_bits),
        Just(0.0f32),
        Just(-0.0f32),
        Just(f32::INFINITY),
        Just(65520.0f32),
        Just(65519.99f32),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn shuffles_read_the_lane_the_ptx_isa_defines(
        x in proptest::collection::vec(any::<u32>(), 64), mode in 0u32..4, arg in shuffle_arg()
    ) {
        let got = shuffle_results(&Device::emulator(), &x, mode, arg);
        for (i, &g) in got.iter().enumerate() {
            let (warp, lane) = (i / WARP, i % WARP);
            let src = isa_shuffle_source(mode, lane as u32, arg) as usize;
            prop_assert_eq!(g, x[warp * WARP + src], "mode {} arg {:#x} lane {}", mode, arg, lane);
        }
    }

    #[test]
    fn shuffle_xor_permutes_64_bit_values(x in proptest::collection::vec(any::<f64>(), 32), arg in shuffle_arg()) {
        let dev = Device::emulator();
        let xb = dev.upload(&x).unwrap();
        let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(32));
        let got = run(&dev, 32, |out| dev.launch(probe::probe_shuffle_f64, cfg, (&xb, arg, out)).unwrap());
        for (lane, g) in got.iter().enumerate() {
            // bfly reads b[4:0] only, and every lane ^ b[4:0] is a lane.
            prop_assert_eq!(g.to_bits(), x[lane ^ (arg & 31) as usize].to_bits());
        }
    }

    #[test]
    fn masked_shuffles_of_32_and_64_bit_values_follow_the_ptx_isa(
        x in proptest::collection::vec(any::<u64>(), 64), mode in 0u32..4, arg in shuffle_arg(),
        mask in prop_oneof![Just(u32::MAX), Just(0x0000_ffff), Just(0xffff_0000), Just(0x5555_5555), 1u32..],
    ) {
        let dev = Device::emulator();
        let result = masked_shuffle_results(&dev, &x, mode, arg, mask);
        let members: Vec<u32> = mask_lanes(mask).map(|l| l as u32).collect();
        // The first lane of the mask (blocks are one warp; block 0 is reported
        // first) whose source is outside the mask: undefined on the GPU, a fault here.
        let outside = members.iter().map(|&l| (l, isa_shuffle_source(mode, l, arg))).find(|&(_, s)| mask & (1 << s) == 0);
        match (result, outside) {
            (Ok(got), None) => {
                for (i, pair) in got.chunks(2).enumerate() {
                    let (w, lane) = (i / WARP, (i % WARP) as u32);
                    let expect = if mask & (1 << lane) == 0 {
                        [0, 0] // lanes outside the mask write nothing
                    } else {
                        let v = x[w * WARP + isa_shuffle_source(mode, lane, arg) as usize];
                        [v & 0xffff_ffff, v]
                    };
                    prop_assert_eq!(pair, &expect[..], "mode {} arg {:#x} mask {:#x} lane {}", mode, arg, mask, lane);
                }
            }
            (Err(e), Some((lane, src))) => {
                prop_assert_eq!(e.thread, Dim3::new(lane, 0, 0), "{}", e);
                let is_mask_fault = matches!(e.fault, Fault::WarpMask { mask: m, missing_lane, .. } if m == mask && missing_lane == src);
                prop_assert!(is_mask_fault, "{}", e);
            }
            (got, outside) => prop_assert!(false, "mode {} arg {:#x} mask {:#x}: got {:?}, source outside the mask {:?}", mode, arg, mask, got.map(|_| ()), outside),
        }
    }

    #[test]
    fn ballot_bit_i_is_lane_i_predicate(pred in proptest::collection::vec(0u32..2, 64)) {
        let got = vote_results(&Device::emulator(), &pred, 32, false);
        for (i, r) in got.chunks(3).enumerate() {
            let warp = &pred[i / WARP * WARP..][..WARP];
            let ballot = warp.iter().enumerate().fold(0u32, |b, (l, &p)| b | (p << l));
            prop_assert_eq!(r, &[ballot, u32::from(warp.iter().all(|&p| p != 0)), u32::from(warp.iter().any(|&p| p != 0))][..]);
        }
    }

    #[test]
    fn block_votes_count_the_whole_block(pred in proptest::collection::vec(0u32..2, 192), all_true: bool) {
        let pred: Vec<u32> = if all_true { vec![1; 192] } else { pred };
        let got = vote_results(&Device::emulator(), &pred, 96, true);
        for (i, r) in got.chunks(3).enumerate() {
            let block = &pred[i / 96 * 96..][..96];
            let count = block.iter().filter(|&&p| p != 0).count() as u32;
            prop_assert_eq!(r, &[count, u32::from(count == 96), u32::from(count > 0)][..]);
        }
    }

    #[test]
    fn warp_integer_reductions_are_exact(x in proptest::collection::vec(any::<i32>(), 64)) {
        let got = i32_reduce_results(&Device::emulator(), &x);
        for (i, r) in got.chunks(3).enumerate() {
            let warp = &x[i / WARP * WARP..][..WARP];
            let sum = warp.iter().fold(0i32, |a, &b| a.wrapping_add(b));
            prop_assert_eq!(r, &[sum, *warp.iter().max().unwrap(), *warp.iter().min().unwrap()][..]);
        }
    }

    #[test]
    fn warp_float_reductions_bound_the_sum_and_pick_the_extremes(
        x in proptest::collection::vec(-1.0e6f32..1.0e6, 32), nan_lane in proptest::option::of(0usize..32)
    ) {
        let mut x = x;
        if let Some(l) = nan_lane { x[l] = ODD_NAN; }
        let got = f32_reduce_results(&Device::emulator(), &x);
        let exact: f64 = x.iter().map(|&v| f64::from(v)).sum();
        let abs: f64 = x.iter().map(|&v| f64::from(v).abs()).sum();
        for r in got.chunks(3) {
            if nan_lane.is_some() {
                // The sum is computed (add.f32): the GPU's NaN. Max and min select a
                // lane's value: that lane's NaN, bits unchanged.
                prop_assert_eq!(r[0].to_bits(), GPU_NAN_F32);
                prop_assert_eq!((r[1].to_bits(), r[2].to_bits()), (ODD_NAN.to_bits(), ODD_NAN.to_bits()));
            } else {
                // Five levels of a butterfly: at most 5 roundings of 2⁻²⁴ relative each.
                prop_assert!((f64::from(r[0]) - exact).abs() <= 5.0 * f64::from(f32::EPSILON) / 2.0 * abs * 1.01);
                prop_assert_eq!(r[1], x.iter().copied().fold(f32::MIN, f32::max));
                prop_assert_eq!(r[2], x.iter().copied().fold(f32::MAX, f32::min));
            }
        }
    }

    #[test]
    fn f16_and_bf16_conversions_round_to_nearest_even(x in proptest::collection::vec(f32_strategy(), 64)) {
        let (h, b, back) = convert_results(&Device::emulator(), &x);
        let f16v = |bits: u16| half::f16::from_bits(bits).to_f32();
        let bf16v = |bits: u16| f32::from_bits(u32::from(bits) << 16);
        for i in 0..x.len() {
            prop_assert!(is_nearest_even(x[i], h[i], f16v), "f16 of {:e}: {:#06x}", x[i], h[i]);
            prop_assert!(is_nearest_even(x[i], b[i], bf16v), "bf16 of {:e}: {:#06x}", x[i], b[i]);
            if x[i].is_nan() {
                // cvt writes the GPU's NaN; widening f16 (cvt) too, bf16 (a shift) copies.
                prop_assert_eq!((h[i], b[i]), (GPU_NAN_HALF, GPU_NAN_HALF), "{:#x}", x[i].to_bits());
                prop_assert_eq!(back[2 * i].to_bits(), GPU_NAN_F32);
                prop_assert_eq!(back[2 * i + 1].to_bits(), u32::from(GPU_NAN_HALF) << 16);
            } else {
                // Widening is exact.
                prop_assert_eq!(back[2 * i].to_bits(), f16v(h[i]).to_bits());
                prop_assert_eq!(back[2 * i + 1].to_bits(), bf16v(b[i]).to_bits());
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_primitives_agree_with_the_emulator_bit_for_bit() {
    let (gpu, emu) = (
        Device::gpu(0).expect("this test needs a CUDA GPU"),
        Device::emulator(),
    );
    gpu.load(&PROBES).unwrap();
    let x: Vec<u32> = (0..256u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let shuffle_args = [0, 1, 5, 16, 31, 32, 33, 63, 0xffff_ffe1, u32::MAX];
    for mode in 0..4 {
        for arg in shuffle_args {
            assert_eq!(
                shuffle_results(&gpu, &x, mode, arg),
                shuffle_results(&emu, &x, mode, arg),
                "mode {mode} arg {arg:#x}"
            );
        }
    }
    // Partial masks, where every lane of the mask reads a lane of the mask (the
    // emulator faults on the others, whose result the GPU leaves undefined). A
    // fault poisons the emulator as it would a GPU, so each case gets a fresh one.
    let x64: Vec<u64> = x
        .iter()
        .map(|&v| u64::from(v) << 32 | u64::from(!v))
        .collect();
    for mask in [u32::MAX, 0x0000_ffff, 0xffff_0000, 0x5555_5555] {
        for mode in 0..4 {
            for arg in shuffle_args {
                if let Ok(e) = masked_shuffle_results(&Device::emulator(), &x64, mode, arg, mask) {
                    let g = masked_shuffle_results(&gpu, &x64, mode, arg, mask).unwrap();
                    assert_eq!(g, e, "mode {mode} arg {arg:#x} mask {mask:#x}");
                }
            }
        }
    }
    let pred: Vec<u32> = x.iter().map(|v| v >> 31).collect();
    assert_eq!(
        vote_results(&gpu, &pred, 32, false),
        vote_results(&emu, &pred, 32, false)
    );
    assert_eq!(
        vote_results(&gpu, &pred, 128, true),
        vote_results(&emu, &pred, 128, true)
    );
    let xi: Vec<i32> = x.iter().map(|&v| v as i32).collect();
    assert_eq!(i32_reduce_results(&gpu, &xi), i32_reduce_results(&emu, &xi));
    // The NaN rule fixes every NaN's bits here: one NaN lane in the last warp.
    let mut xf: Vec<f32> = x.iter().map(|&v| (v as i32) as f32 * 1e-3).collect();
    *xf.last_mut().unwrap() = ODD_NAN;
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    assert_eq!(
        bits(f32_reduce_results(&gpu, &xf)),
        bits(f32_reduce_results(&emu, &xf))
    );
    let xc: Vec<f32> = x
        .iter()
        .map(|&v| f32::from_bits(v))
        .chain([f32::NAN, -f32::NAN, ODD_NAN, f32::from_bits(0x7f80_0001)])
        .collect();
    // Bits, not values: the inputs make NaNs, and a NaN is never `==` itself.
    let convert_bits = |d: &Device| {
        let (h, b, back) = convert_results(d, &xc);
        (h, b, bits(back))
    };
    assert_eq!(convert_bits(&gpu), convert_bits(&emu));

    // Explicit-mask collectives, on full and partial masks.
    for mask in [u32::MAX, 0x0000_ffff, 0x8000_0001, 0x5555_5555] {
        let redux = |d: &Device| {
            masked_results(d, &x, 8, |xb, cfg, out| {
                d.launch(probe::probe_redux, cfg, (xb, mask, out)).unwrap()
            })
        };
        assert_eq!(redux(&gpu), redux(&emu), "redux, mask {mask:#x}");
        let x64: Vec<u64> = x.iter().map(|&v| u64::from(v % 5)).collect();
        let matches = |d: &Device| {
            masked_results(d, &x64, 4, |xb, cfg, out| {
                d.launch(probe::probe_match, cfg, (xb, mask, out)).unwrap()
            })
        };
        assert_eq!(matches(&gpu), matches(&emu), "match, mask {mask:#x}");
        let folds = |d: &Device| {
            bits(masked_results(d, &xf, 3, |xb, cfg, out| {
                d.launch(probe::probe_reduce_f32_in, cfg, (xb, mask, out))
                    .unwrap()
            }))
        };
        assert_eq!(
            folds(&gpu),
            folds(&emu),
            "masked float folds, mask {mask:#x}"
        );
    }
    // A converged warp's active mask is every lane.
    let active = |d: &Device| {
        let mut out = d.alloc_zeroed::<u32>(64).unwrap();
        d.launch(
            probe::probe_active_mask,
            LaunchConfig::new(Dim3::x(1), Dim3::x(64)),
            (32u32, &mut out),
        )
        .unwrap();
        out.to_host().unwrap()
    };
    assert_eq!(active(&gpu), vec![u32::MAX; 64]);
}

/// What an H100 returned for `shuffle_up`/`shuffle_down` by 33: `shfl.sync`
/// reads `b[4:0]`, so 33 moves by 1 (lane 0 / lane 31 keep their own).
#[test]
fn shuffles_by_33_move_by_one_as_on_the_gpu() {
    let dev = Device::emulator();
    let x: Vec<u32> = (0..WARP as u32).collect();
    let mut up = vec![0];
    up.extend(0..31);
    let down: Vec<u32> = (1..32).chain([31]).collect();
    assert_eq!(shuffle_results(&dev, &x, 1, 33), up);
    assert_eq!(shuffle_results(&dev, &x, 2, 33), down);
    // 32 has no low bits: no move at all.
    assert_eq!(shuffle_results(&dev, &x, 1, 32), x);
    assert_eq!(shuffle_results(&dev, &x, 2, 32), x);
}

#[test]
fn the_rounding_definition_rejects_wrong_answers() {
    let f16v = |bits: u16| half::f16::from_bits(bits).to_f32();
    let one = 0x3c00u16;
    assert!(is_nearest_even(1.0, one, f16v));
    assert!(!is_nearest_even(1.0, one + 1, f16v));
    // 1 + 2⁻¹¹ is halfway between 1 and 1 + 2⁻¹⁰: the even one (1.0) wins.
    let tie = 1.0 + 2f32.powi(-11);
    assert!(is_nearest_even(tie, one, f16v));
    assert!(!is_nearest_even(tie, one + 1, f16v));
    // 65520 rounds to +inf in f16; 65519 does not.
    assert!(is_nearest_even(65520.0, 0x7c00, f16v));
    assert!(!is_nearest_even(65519.0, 0x7c00, f16v));
}

/// The lanes of each warp in `mask`, as indices into a buffer of whole warps.
fn mask_lanes(mask: u32) -> impl Iterator<Item = usize> + Clone {
    (0..WARP).filter(move |l| mask & (1 << l) != 0)
}

fn masked_results<T: Element, X: Element>(
    dev: &Device,
    x: &[X],
    k: usize,
    launch: impl FnOnce(&DeviceBuffer<X>, LaunchConfig, &mut DeviceBuffer<T>),
) -> Vec<T> {
    let xb = dev.upload(x).unwrap();
    let cfg = LaunchConfig::new(Dim3::x((x.len() / WARP) as u32), Dim3::x(WARP as u32));
    run(dev, k * x.len(), |out| launch(&xb, cfg, out))
}

fn nonzero_mask() -> impl Strategy<Value = u32> {
    prop_oneof![Just(u32::MAX), Just(1u32), Just(0x8000_0000u32), 1u32..]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn redux_reduces_exactly_over_the_mask(x in proptest::collection::vec(any::<u32>(), 64), mask in nonzero_mask()) {
        let dev = Device::emulator();
        let got = masked_results(&dev, &x, 8, |xb, cfg, out| dev.launch(probe::probe_redux, cfg, (xb, mask, out)).unwrap());
        for w in 0..x.len() / WARP {
            let v: Vec<u32> = mask_lanes(mask).map(|l| x[w * WARP + l]).collect();
            let s = || v.iter().map(|&a| a as i32);
            let expect = [
                v.iter().fold(0u32, |a, &b| a.wrapping_add(b)),
                *v.iter().min().unwrap(),
                *v.iter().max().unwrap(),
                s().min().unwrap() as u32,
                s().max().unwrap() as u32,
                v.iter().fold(u32::MAX, |a, &b| a & b),
                v.iter().fold(0, |a, &b| a | b),
                v.iter().fold(0, |a, &b| a ^ b),
            ];
            for l in 0..WARP {
                let r = &got[8 * (w * WARP + l)..][..8];
                if mask & (1 << l) != 0 {
                    prop_assert_eq!(r, &expect[..], "lane {}", l);
                } else {
                    prop_assert_eq!(r, &[0u32; 8][..], "lane {} is not in the mask and must not write", l);
                }
            }
        }
    }

    #[test]
    fn masked_float_reductions_fold_in_lane_order(
        x in proptest::collection::vec(-1.0e6f32..1.0e6, 32), mask in nonzero_mask(), nan_lane in proptest::option::of(0usize..32)
    ) {
        let mut x = x;
        if let Some(l) = nan_lane { x[l] = ODD_NAN; }
        let dev = Device::emulator();
        let got = masked_results(&dev, &x, 3, |xb, cfg, out| dev.launch(probe::probe_reduce_f32_in, cfg, (xb, mask, out)).unwrap());
        let mut lanes = mask_lanes(mask);
        let first = x[lanes.next().unwrap()];
        let sum = lanes.clone().fold(first, |a, l| a + x[l]);
        let has_nan = mask_lanes(mask).any(|l| x[l].is_nan());
        let max = mask_lanes(mask).map(|l| x[l]).fold(f32::MIN, f32::max);
        let min = mask_lanes(mask).map(|l| x[l]).fold(f32::MAX, f32::min);
        for l in mask_lanes(mask) {
            let r = &got[3 * l..][..3];
            if mask.count_ones() == 1 {
                // One lane: nothing is added, so the "sum" is the lane's own bits (a NaN keeps its payload).
                prop_assert_eq!(r[0].to_bits(), first.to_bits());
                prop_assert_eq!((r[1].to_bits(), r[2].to_bits()), (first.to_bits(), first.to_bits()));
            } else if has_nan {
                // A computed NaN sum is the GPU's; max and min select the NaN lane's value.
                prop_assert_eq!(r[0].to_bits(), GPU_NAN_F32);
                prop_assert_eq!((r[1].to_bits(), r[2].to_bits()), (ODD_NAN.to_bits(), ODD_NAN.to_bits()));
            } else {
                prop_assert_eq!(r[0].to_bits(), sum.to_bits(), "the sum is the left fold in lane order");
                prop_assert_eq!((r[1], r[2]), (max, min));
            }
        }
    }

    #[test]
    fn match_groups_lanes_with_equal_bits(
        x in proptest::collection::vec(0u64..4, 64), high in any::<bool>(), mask in nonzero_mask()
    ) {
        // Few distinct values, so groups are large; `high` makes the 64-bit values
        // differ where their low 32 bits agree.
        let x: Vec<u64> = x.iter().enumerate().map(|(i, &v)| if high { v | ((i as u64 % 2) << 40) } else { v }).collect();
        let dev = Device::emulator();
        let got = masked_results(&dev, &x, 4, |xb, cfg, out| dev.launch(probe::probe_match, cfg, (xb, mask, out)).unwrap());
        for w in 0..x.len() / WARP {
            let warp = &x[w * WARP..][..WARP];
            for l in mask_lanes(mask) {
                let same32 = mask_lanes(mask).filter(|&k| warp[k] as u32 == warp[l] as u32).fold(0u32, |m, k| m | 1 << k);
                let same64 = mask_lanes(mask).filter(|&k| warp[k] == warp[l]).fold(0u32, |m, k| m | 1 << k);
                let all = |same: u32| if same == mask { mask } else { 0 };
                prop_assert_eq!(&got[4 * (w * WARP + l)..][..4], &[same32, all(same32), same64, all(same64)][..]);
            }
        }
    }
}

#[test]
fn active_mask_is_the_lanes_at_the_same_call() {
    let dev = Device::emulator();
    for split in [0u32, 1, 13, 31, 32] {
        let mut out = dev.alloc_zeroed::<u32>(64).unwrap();
        let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(64));
        dev.launch(probe::probe_active_mask, cfg, (split, &mut out))
            .unwrap();
        let low = if split == 32 {
            u32::MAX
        } else {
            (1u32 << split) - 1
        };
        // Lanes below `split` see `low`; the others see `!low` and store its complement.
        for (i, &m) in out.to_host().unwrap().iter().enumerate() {
            assert_eq!(m, low, "split {split}, lane {}", i % WARP);
        }
    }
}
