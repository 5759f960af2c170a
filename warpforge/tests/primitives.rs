//! Every device primitive, run through its probe kernel, equals its definition
//! (written here from the PTX ISA / CUDA docs, independently of the device
//! crate). On the emulator always; on the GPU the same probes must agree with
//! the emulator bit for bit (ignored without a GPU).

use proptest::prelude::*;
use warpforge::{Device, DeviceBuffer, Dim3, Element, LaunchConfig};
use warpforge_kernels::probe;

const WARP: usize = 32;

fn run<T: Element>(
    dev: &Device,
    out_len: usize,
    launch: impl FnOnce(&mut DeviceBuffer<T>),
) -> Vec<T> {
    let mut out = dev.alloc_zeroed::<T>(out_len).unwrap();
    launch(&mut out);
    out.to_host().unwrap()
}

/// The lane `lane` reads in a full-warp shuffle, per the PTX ISA `shfl.sync` pseudocode.
fn shuffle_source(mode: u32, lane: usize, arg: u32) -> usize {
    let arg = arg as usize;
    match mode {
        0 => arg % WARP,
        1 => lane.checked_sub(arg).unwrap_or(lane),
        2 => {
            if lane + arg < WARP {
                lane + arg
            } else {
                lane
            }
        }
        _ => (lane ^ arg) % WARP,
    }
}

fn shuffle_results(dev: &Device, x: &[u32], mode: u32, arg: u32) -> Vec<u32> {
    let xb = dev.upload(x).unwrap();
    let cfg = LaunchConfig::new(Dim3::x((x.len() / WARP) as u32), Dim3::x(WARP as u32));
    run(dev, x.len(), |out| {
        dev.launch(probe::probe_shuffle, cfg, (&xb, mode, arg, out))
            .unwrap()
    })
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
        x in proptest::collection::vec(any::<u32>(), 64), mode in 0u32..4, arg in 0u32..40
    ) {
        let got = shuffle_results(&Device::emulator(), &x, mode, arg);
        for (i, &g) in got.iter().enumerate() {
            let (warp, lane) = (i / WARP, i % WARP);
            prop_assert_eq!(g, x[warp * WARP + shuffle_source(mode, lane, arg)], "mode {} arg {} lane {}", mode, arg, lane);
        }
    }

    #[test]
    fn shuffle_xor_permutes_64_bit_values(x in proptest::collection::vec(any::<f64>(), 32), arg in 0u32..32) {
        let dev = Device::emulator();
        let xb = dev.upload(&x).unwrap();
        let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(32));
        let got = run(&dev, 32, |out| dev.launch(probe::probe_shuffle_f64, cfg, (&xb, arg, out)).unwrap());
        for (lane, g) in got.iter().enumerate() {
            prop_assert_eq!(g.to_bits(), x[lane ^ arg as usize].to_bits());
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
        if let Some(l) = nan_lane { x[l] = f32::NAN; }
        let got = f32_reduce_results(&Device::emulator(), &x);
        let exact: f64 = x.iter().map(|&v| f64::from(v)).sum();
        let abs: f64 = x.iter().map(|&v| f64::from(v).abs()).sum();
        for r in got.chunks(3) {
            if nan_lane.is_some() {
                prop_assert!(r.iter().all(|v| v.is_nan()), "{:?}", r);
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
            // Widening is exact.
            prop_assert_eq!(back[2 * i].to_bits(), f16v(h[i]).to_bits());
            prop_assert_eq!(back[2 * i + 1].to_bits(), bf16v(b[i]).to_bits());
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
    let x: Vec<u32> = (0..256u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    for mode in 0..4 {
        for arg in [0, 1, 5, 16, 31, 33] {
            assert_eq!(
                shuffle_results(&gpu, &x, mode, arg),
                shuffle_results(&emu, &x, mode, arg)
            );
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
    let xf: Vec<f32> = x.iter().map(|&v| (v as i32) as f32 * 1e-3).collect();
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    assert_eq!(
        bits(f32_reduce_results(&gpu, &xf)),
        bits(f32_reduce_results(&emu, &xf))
    );
    let xc: Vec<f32> = x
        .iter()
        .map(|&v| f32::from_bits(v))
        .filter(|v| !v.is_nan())
        .collect();
    assert_eq!(convert_results(&gpu, &xc), convert_results(&emu, &xc));

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
        if let Some(l) = nan_lane { x[l] = f32::NAN; }
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
            prop_assert_eq!(r[0].to_bits(), sum.to_bits(), "the sum is the left fold in lane order");
            if has_nan {
                prop_assert!(r[1].is_nan() && r[2].is_nan());
            } else {
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
