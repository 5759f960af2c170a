//! Atomics, through their probe kernels, against their definitions: the final
//! value of every element is the fold of all updates to it, and the values the
//! updates returned are consistent with some order of those updates. Run on
//! the emulator with several blocks, so updates also race across OS threads.

use crate::common;

use proptest::prelude::*;
use warpforge::{Device, DeviceBuffer, Dim3, Element, LaunchConfig};
use warpforge_testkit::{self as probe, PROBES, op};

const BLOCKS: u32 = 3;
const THREADS: u32 = 64;
const N: usize = (BLOCKS * THREADS) as usize;
const BINS: u32 = 4;

fn config() -> LaunchConfig {
    LaunchConfig::new(Dim3::x(BLOCKS), Dim3::x(THREADS))
}

/// Runs one probe: returns (final accumulators, values each thread's atomic returned).
fn run_probe<T: Element>(
    dev: &Device,
    init: &[T],
    launch: impl FnOnce(&mut DeviceBuffer<T>, &mut DeviceBuffer<T>),
) -> (Vec<T>, Vec<T>) {
    let mut acc = dev.upload(init).unwrap();
    let mut old = dev.alloc_zeroed::<T>(N).unwrap();
    launch(&mut acc, &mut old);
    (acc.to_host().unwrap(), old.to_host().unwrap())
}

macro_rules! probe_fn {
    ($name:ident, $kernel:ident, $t:ty) => {
        fn $name(
            dev: &Device,
            bins: &[u32],
            vals: &[$t],
            op: u32,
            scope: u32,
            init: &[$t],
        ) -> (Vec<$t>, Vec<$t>) {
            let (b, v) = (dev.upload(bins).unwrap(), dev.upload(vals).unwrap());
            run_probe(dev, init, |acc, old| {
                dev.launch(probe::$kernel, config(), (&b, &v, op, scope, acc, old))
                    .unwrap()
            })
        }
    };
}
probe_fn!(u32_probe, probe_atomic_u32, u32);
probe_fn!(i32_probe, probe_atomic_i32, i32);
probe_fn!(u64_probe, probe_atomic_u64, u64);
probe_fn!(i64_probe, probe_atomic_i64, i64);
probe_fn!(f32_probe, probe_atomic_f32, f32);
probe_fn!(f64_probe, probe_atomic_f64, f64);

/// The threads that update bin `b`.
fn members(bins: &[u32], b: u32) -> impl Iterator<Item = usize> + '_ {
    (0..bins.len()).filter(move |&i| bins[i] == b)
}

/// Checks an integer probe's results against the definition of `op`, by
/// folding in u64/i64 so one function serves every width.
fn check_int<T: Copy + PartialEq + std::fmt::Debug + Ord + std::hash::Hash>(
    bins: &[u32],
    vals: &[T],
    init: &[T],
    op: u32,
    fold: impl Fn(T, T) -> T,
    (acc, old): (Vec<T>, Vec<T>),
) -> Result<(), TestCaseError> {
    for b in 0..BINS {
        let i0 = init[b as usize];
        let mine: Vec<usize> = members(bins, b).collect();
        if op == op::EXCH {
            // Each swap returns what the previous one stored: the returned values
            // and the final value are the initial value and the stored ones.
            let mut before: Vec<T> = mine.iter().map(|&i| old[i]).collect();
            before.push(acc[b as usize]);
            let mut stored: Vec<T> = mine.iter().map(|&i| vals[i]).collect();
            stored.push(i0);
            before.sort();
            stored.sort();
            prop_assert_eq!(before, stored, "bin {}", b);
        } else {
            let expect = mine.iter().fold(i0, |a, &i| fold(a, vals[i]));
            prop_assert_eq!(acc[b as usize], expect, "op {} bin {}", op, b);
            if op == op::MIN || op == op::MAX {
                // Every returned value is one the element held: the initial value or an update.
                for &i in &mine {
                    prop_assert!(old[i] == i0 || mine.iter().any(|&j| vals[j] == old[i]));
                    prop_assert_eq!(fold(old[i], acc[b as usize]), acc[b as usize]);
                }
            }
        }
    }
    Ok(())
}

/// For adds of positive values: sorted by the value they returned, the updates
/// form a chain, each returning the previous one's result.
fn check_add_chain(
    bins: &[u32],
    vals: &[u64],
    init: &[u64],
    old: &[u64],
) -> Result<(), TestCaseError> {
    for b in 0..BINS {
        let mut mine: Vec<usize> = members(bins, b).collect();
        mine.sort_by_key(|&i| old[i]);
        let mut expect = init[b as usize];
        for i in mine {
            prop_assert_eq!(
                old[i],
                expect,
                "bin {}: thread {} saw a value no order of the adds produces",
                b,
                i
            );
            expect += vals[i];
        }
    }
    Ok(())
}

fn int_fold_u64(op: u32) -> impl Fn(u64, u64) -> u64 {
    move |a, v| match op {
        op::ADD => a.wrapping_add(v),
        op::MIN => a.min(v),
        op::MAX => a.max(v),
        op::AND => a & v,
        op::OR => a | v,
        op::XOR => a ^ v,
        _ => v,
    }
}

fn int_fold_i64(op: u32) -> impl Fn(i64, i64) -> i64 {
    move |a, v| match op {
        op::ADD => a.wrapping_add(v),
        op::MIN => a.min(v),
        op::MAX => a.max(v),
        op::AND => a & v,
        op::OR => a | v,
        op::XOR => a ^ v,
        _ => v,
    }
}

/// The order of PTX `min.f32`: a NaN loses to every number, −0 < +0.
fn float_less(a: f64, b: f64) -> bool {
    if b.is_nan() {
        return !a.is_nan();
    }
    a < b || (a == 0.0 && b == 0.0 && a.is_sign_negative() && b.is_sign_positive())
}

fn special_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => -1.0e6f64..1.0e6,
        1 => Just(0.0),
        1 => Just(-0.0),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(f64::NAN),
    ]
}

fn bins_strategy() -> impl Strategy<Value = Vec<u32>> {
    proptest::collection::vec(0..BINS, N)
}

/// An addend for the NaN tests: a small integer, an infinity, or a NaN
/// (`Nan(negative, payload)`), made in each float type below.
#[derive(Clone, Copy, Debug)]
enum Addend {
    Int(i32),
    Inf(bool),
    Nan(bool, u32),
}

impl Addend {
    fn f32(self) -> f32 {
        match self {
            Addend::Int(v) => v as f32,
            Addend::Inf(neg) => {
                if neg {
                    f32::NEG_INFINITY
                } else {
                    f32::INFINITY
                }
            }
            Addend::Nan(neg, p) => {
                f32::from_bits(u32::from(neg) << 31 | 0x7f80_0000 | (p % 0x7f_ffff + 1))
            }
        }
    }
    fn f64(self) -> f64 {
        match self {
            Addend::Nan(neg, p) => {
                f64::from_bits(u64::from(neg) << 63 | 0x7ff0_0000_0000_0000 | u64::from(p) << 3 | 1)
            }
            other => f64::from(other.f32()),
        }
    }
    fn f16(self) -> half::f16 {
        match self {
            Addend::Nan(neg, p) => {
                half::f16::from_bits(u16::from(neg) << 15 | 0x7c00 | (p % 0x3ff + 1) as u16)
            }
            other => half::f16::from_f32(other.f32()),
        }
    }
}

fn addend() -> impl Strategy<Value = Addend> {
    prop_oneof![
        40 => (-4i32..4).prop_map(Addend::Int),
        1 => any::<bool>().prop_map(Addend::Inf),
        1 => (any::<bool>(), any::<u32>()).prop_map(|(n, p)| Addend::Nan(n, p)),
    ]
}

/// The NaN rule of `warpforge_device::num` ("NaN results"), restated from its
/// sources: the NaN the GPU's f32 (CUDA Programming Guide, "Floating-Point
/// Standard") and f16 (`CUDART_NAN_FP16`) adds write.
const GPU_NAN_F32: u32 = 0x7fff_ffff;
const GPU_NAN_F16: u16 = 0x7fff;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn integer_atomics_end_at_the_fold_of_their_updates(
        bins in bins_strategy(), vals in proptest::collection::vec(any::<u64>(), N),
        init in proptest::collection::vec(any::<u64>(), BINS as usize), op in 0u32..7, scope in 0u32..3,
    ) {
        let dev = Device::emulator();
        let v32: Vec<u32> = vals.iter().map(|&v| v as u32).collect();
        let i32v: Vec<u32> = init.iter().map(|&v| v as u32).collect();
        let fold32 = |a: u32, v: u32| int_fold_u64(op)(u64::from(a), u64::from(v)) as u32;
        check_int(&bins, &v32, &i32v, op, fold32, u32_probe(&dev, &bins, &v32, op, scope, &i32v))?;

        let s32: Vec<i32> = v32.iter().map(|&v| v as i32).collect();
        let si32: Vec<i32> = i32v.iter().map(|&v| v as i32).collect();
        let folds32 = |a: i32, v: i32| int_fold_i64(op)(i64::from(a), i64::from(v)) as i32;
        check_int(&bins, &s32, &si32, op, folds32, i32_probe(&dev, &bins, &s32, op, scope, &si32))?;

        check_int(&bins, &vals, &init, op, int_fold_u64(op), u64_probe(&dev, &bins, &vals, op, scope, &init))?;

        let s64: Vec<i64> = vals.iter().map(|&v| v as i64).collect();
        let si64: Vec<i64> = init.iter().map(|&v| v as i64).collect();
        check_int(&bins, &s64, &si64, op, int_fold_i64(op), i64_probe(&dev, &bins, &s64, op, scope, &si64))?;
    }

    #[test]
    fn atomic_adds_return_a_chain_of_partial_sums(
        bins in bins_strategy(), vals in proptest::collection::vec(1u64..1000, N),
        init in proptest::collection::vec(0u64..1 << 40, BINS as usize), scope in 0u32..3,
    ) {
        let (_, old) = u64_probe(&Device::emulator(), &bins, &vals, op::ADD, scope, &init);
        check_add_chain(&bins, &vals, &init, &old)?;
    }

    #[test]
    fn float_adds_of_integers_are_exact(
        bins in bins_strategy(), vals in proptest::collection::vec(-1000i32..1000, N),
        init in proptest::collection::vec(-1000i32..1000, BINS as usize), scope in 0u32..3,
    ) {
        let dev = Device::emulator();
        // Every partial sum is an integer below 2²⁴ in magnitude, so every add is exact.
        let f: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
        let fi: Vec<f32> = init.iter().map(|&v| v as f32).collect();
        let (acc, _) = f32_probe(&dev, &bins, &f, op::ADD, scope, &fi);
        let d: Vec<f64> = vals.iter().map(|&v| f64::from(v)).collect();
        let di: Vec<f64> = init.iter().map(|&v| f64::from(v)).collect();
        let (acc64, _) = f64_probe(&dev, &bins, &d, op::ADD, scope, &di);
        for b in 0..BINS {
            let expect: i32 = init[b as usize] + members(&bins, b).map(|i| vals[i]).sum::<i32>();
            prop_assert_eq!(acc[b as usize], expect as f32);
            prop_assert_eq!(acc64[b as usize], f64::from(expect));
        }
    }

    #[test]
    fn float_min_max_follow_ptx_order_with_nan_and_signed_zero(
        bins in bins_strategy(), vals in proptest::collection::vec(special_f64(), N),
        init in proptest::collection::vec(special_f64(), BINS as usize), is_min: bool, scope in 0u32..3,
    ) {
        let dev = Device::emulator();
        let op = if is_min { op::MIN } else { op::MAX };
        let pick = |a: f64, v: f64| {
            let take_v = if is_min { float_less(v, a) } else { float_less(a, v) };
            if take_v { v } else { a }
        };
        let (acc64, _) = f64_probe(&dev, &bins, &vals, op, scope, &init);
        let v32: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
        let i32v: Vec<f32> = init.iter().map(|&v| v as f32).collect();
        let (acc32, _) = f32_probe(&dev, &bins, &v32, op, scope, &i32v);
        for b in 0..BINS {
            let e64 = members(&bins, b).fold(init[b as usize], |a, i| pick(a, vals[i]));
            let e32 = members(&bins, b).fold(f64::from(i32v[b as usize]), |a, i| pick(a, f64::from(v32[i])));
            prop_assert_eq!(acc64[b as usize].to_bits(), e64.to_bits(), "f64 bin {}", b);
            prop_assert_eq!(acc32[b as usize].to_bits(), (e32 as f32).to_bits(), "f32 bin {}", b);
        }
    }

    #[test]
    fn float_swaps_pass_every_value_along(
        bins in bins_strategy(), vals in proptest::collection::vec(special_f64(), N),
        init in proptest::collection::vec(special_f64(), BINS as usize), scope in 0u32..3,
    ) {
        let bits: Vec<u64> = vals.iter().map(|v| v.to_bits()).collect();
        let ibits: Vec<u64> = init.iter().map(|v| v.to_bits()).collect();
        let (acc, old) = f64_probe(&Device::emulator(), &bins, &vals, op::EXCH, scope, &init);
        let as_bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect::<Vec<_>>();
        check_int(&bins, &bits, &ibits, op::EXCH, |_, v| v, (as_bits(acc), as_bits(old)))?;
    }

    #[test]
    fn float_adds_that_make_a_nan_store_the_gpus_nan(
        bins in bins_strategy(), vals in proptest::collection::vec(addend(), N), scope in 0u32..3,
    ) {
        let dev = Device::emulator();
        let init = [Addend::Int(0); BINS as usize];
        let of = |f: fn(Addend) -> f32| (vals.iter().map(|&v| f(v)).collect::<Vec<_>>(), init.map(f).to_vec());
        let (v32, i32v) = of(Addend::f32);
        let (acc32, _) = f32_probe(&dev, &bins, &v32, op::ADD, scope, &i32v);
        let v64: Vec<f64> = vals.iter().map(|v| v.f64()).collect();
        let (acc64, _) = f64_probe(&dev, &bins, &v64, op::ADD, scope, &[0.0; BINS as usize]);
        let h: Vec<half::f16> = vals.iter().map(|v| v.f16()).collect();
        let (b, hv) = (dev.upload(&bins).unwrap(), dev.upload(&h).unwrap());
        let (acc16, _) = run_probe(&dev, &[half::f16::ZERO; BINS as usize], |acc, old| {
            dev.launch(probe::probe_atomic_f16, config(), (&b, &hv, scope, acc, old)).unwrap()
        });
        for bin in 0..BINS {
            let mine: Vec<Addend> = members(&bins, bin).map(|i| vals[i]).collect();
            let has = |a: fn(&Addend) -> bool| mine.iter().any(a);
            let nan = has(|a| matches!(a, Addend::Nan(..)))
                || (has(|a| matches!(a, Addend::Inf(false))) && has(|a| matches!(a, Addend::Inf(true))));
            let (b32, b16) = (acc32[bin as usize].to_bits(), acc16[bin as usize].to_bits());
            if nan {
                prop_assert_eq!(b32, GPU_NAN_F32, "f32 bin {}", bin);
                prop_assert_eq!(b16, GPU_NAN_F16, "f16 bin {}", bin);
                // The rule leaves f64 arithmetic's NaN bits open.
                prop_assert!(acc64[bin as usize].is_nan(), "f64 bin {}", bin);
            } else {
                // Integer partial sums are exact; an infinity absorbs them.
                let exact: f64 = mine.iter().map(|a| a.f64()).sum();
                prop_assert_eq!(f64::from(acc32[bin as usize]), exact, "f32 bin {}", bin);
                prop_assert_eq!(acc16[bin as usize].to_f64(), exact, "f16 bin {}", bin);
                prop_assert_eq!(acc64[bin as usize], exact, "f64 bin {}", bin);
            }
        }
    }

    #[test]
    fn f16_adds_of_small_integers_are_exact(
        bins in bins_strategy(), vals in proptest::collection::vec(-8i32..8, N), scope in 0u32..3,
    ) {
        let dev = Device::emulator();
        // |partial sums| ≤ 8·192 < 2048: integers exactly representable in f16.
        let h: Vec<half::f16> = vals.iter().map(|&v| half::f16::from_f32(v as f32)).collect();
        let (b, v) = (dev.upload(&bins).unwrap(), dev.upload(&h).unwrap());
        let init = vec![half::f16::ZERO; BINS as usize];
        let (acc, _) = run_probe(&dev, &init, |acc, old| {
            dev.launch(probe::probe_atomic_f16, config(), (&b, &v, scope, acc, old)).unwrap()
        });
        for bin in 0..BINS {
            let expect: i32 = members(&bins, bin).map(|i| vals[i]).sum();
            prop_assert_eq!(acc[bin as usize].to_f32(), expect as f32);
        }
    }

    #[test]
    fn compare_exchange_hands_out_each_ticket_once(
        bins in bins_strategy(), init in proptest::collection::vec(any::<u32>(), BINS as usize), scope in 0u32..3,
    ) {
        let dev = Device::emulator();
        let b = dev.upload(&bins).unwrap();
        let (acc, old) = run_probe(&dev, &init, |acc, old| {
            dev.launch(probe::probe_atomic_cas_u32, config(), (&b, scope, acc, old)).unwrap()
        });
        let init64: Vec<u64> = init.iter().map(|&v| u64::from(v) << 32).collect();
        let (acc64, old64) = run_probe(&dev, &init64, |acc, old| {
            dev.launch(probe::probe_atomic_cas_u64, config(), (&b, scope, acc, old)).unwrap()
        });
        for bin in 0..BINS {
            let mine: Vec<usize> = members(&bins, bin).collect();
            let n = mine.len() as u32;
            let mut tickets: Vec<u32> = mine.iter().map(|&i| old[i].wrapping_sub(init[bin as usize])).collect();
            tickets.sort();
            prop_assert_eq!(tickets, (0..n).collect::<Vec<_>>());
            prop_assert_eq!(acc[bin as usize], init[bin as usize].wrapping_add(n));
            let mut t64: Vec<u64> = mine.iter().map(|&i| old64[i].wrapping_sub(init64[bin as usize]) >> 32).collect();
            t64.sort();
            prop_assert_eq!(t64, (0..u64::from(n)).collect::<Vec<_>>());
            prop_assert_eq!(acc64[bin as usize], init64[bin as usize].wrapping_add(u64::from(n) << 32));
        }
    }

    #[test]
    fn shared_memory_histogram_counts_every_element(
        bins in proptest::collection::vec(any::<u32>(), 0..600), block in prop_oneof![Just(32u32), Just(96), Just(256)],
    ) {
        let dev = Device::emulator();
        let b = dev.upload(&bins).unwrap();
        let mut out = dev.alloc_zeroed::<u32>(probe::HISTOGRAM_BINS).unwrap();
        let cfg = LaunchConfig::for_threads(bins.len(), block).unwrap();
        dev.launch(probe::probe_shared_histogram, cfg, (&b, &mut out)).unwrap();
        let mut expect = vec![0u32; probe::HISTOGRAM_BINS];
        for &x in &bins {
            expect[x as usize % probe::HISTOGRAM_BINS] += 1;
        }
        prop_assert_eq!(out.to_host().unwrap(), expect);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_atomics_end_where_the_emulator_does() {
    let (gpu, emu) = (
        Device::gpu(0).expect("this test needs a CUDA GPU"),
        Device::emulator(),
    );
    gpu.load(&PROBES).unwrap();
    let bins: Vec<u32> = (0..N as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) % BINS)
        .collect();
    let vals: Vec<u32> = (0..N as u32)
        .map(|i| i.wrapping_mul(40_503).rotate_left(7))
        .collect();
    let init = vec![0x0f0f_0f0f_u32, 7, u32::MAX, 1 << 31];
    for op in [op::ADD, op::MIN, op::MAX, op::AND, op::OR, op::XOR] {
        for scope in 0..3 {
            // Commutative updates: the final values do not depend on their order.
            let (g, _) = u32_probe(&gpu, &bins, &vals, op, scope, &init);
            let (e, _) = u32_probe(&emu, &bins, &vals, op, scope, &init);
            assert_eq!(g, e, "u32 op {op} scope {scope}");
            let v64: Vec<u64> = vals.iter().map(|&v| u64::from(v) << 17).collect();
            let i64v: Vec<u64> = init.iter().map(|&v| u64::from(v) << 9).collect();
            assert_eq!(
                u64_probe(&gpu, &bins, &v64, op, scope, &i64v).0,
                u64_probe(&emu, &bins, &v64, op, scope, &i64v).0,
                "u64 op {op} scope {scope}"
            );
        }
    }
    let f: Vec<f32> = vals.iter().map(|&v| (v % 2001) as f32 - 1000.0).collect();
    let fi = vec![0.0f32; BINS as usize];
    assert_eq!(
        f32_probe(&gpu, &bins, &f, op::ADD, 1, &fi).0,
        f32_probe(&emu, &bins, &f, op::ADD, 1, &fi).0
    );
    // Sums that become NaN: a NaN addend in bin 0, +inf and -inf in bin 1. The
    // NaN rule fixes the f32 bits; it leaves f64 arithmetic's NaN bits open.
    let mut f = f;
    let bin_of = |b: u32| bins.iter().position(|&x| x == b).unwrap();
    let inf_mates: Vec<usize> = (0..N).filter(|&i| bins[i] == 1).take(2).collect();
    f[bin_of(0)] = f32::from_bits(0xffc0_1234);
    f[inf_mates[0]] = f32::INFINITY;
    f[inf_mates[1]] = f32::NEG_INFINITY;
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    assert_eq!(
        bits(f32_probe(&gpu, &bins, &f, op::ADD, 1, &fi).0),
        bits(f32_probe(&emu, &bins, &f, op::ADD, 1, &fi).0)
    );
    let d: Vec<f64> = f.iter().map(|&v| f64::from(v)).collect();
    let di = vec![0.0f64; BINS as usize];
    let (g, e) = (
        f64_probe(&gpu, &bins, &d, op::ADD, 1, &di).0,
        f64_probe(&emu, &bins, &d, op::ADD, 1, &di).0,
    );
    for (b, (g, e)) in g.iter().zip(&e).enumerate() {
        assert!(
            common::same_bits_or_both_nan_f64(*g, *e),
            "f64 bin {b}: GPU {g:e}, emulator {e:e}"
        );
    }
}
