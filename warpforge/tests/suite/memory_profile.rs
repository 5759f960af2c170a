//! The emulator's memory-traffic profile (`Device::profile_memory`), on
//! probe kernels whose cost on a GPU is known exactly: sectors per global
//! request, coalescing efficiency, access width, shared-memory bank
//! conflicts (wavefronts), `ldmatrix` phases, `cp.async`, atomics per
//! address, and the per-line attribution.
//!
//! Expectations come from the access patterns, computed here from the
//! addresses each lane touches (or, for the classic cases, the figures the
//! CUDA programming guide gives: 4 sectors per coalesced f32 request, 32 for
//! a stride of 32 elements, a 32-way conflict down a 32×32 tile's column).

use crate::common;
use std::collections::{BTreeMap, BTreeSet};
use warpforge::{Device, Dim3, Error, LaunchConfig, MemoryProfile};
use warpforge_testkit::{self as probe, PROBES};

/// Runs `launch` on a fresh emulator under `profile_memory`; returns the one profile.
fn profile_one(launch: impl FnOnce(&Device) -> warpforge::Result<()>) -> MemoryProfile {
    let dev = Device::emulator();
    dev.load(&PROBES).unwrap();
    let ((), mut profiles) = dev.profile_memory(|| launch(&dev)).unwrap();
    assert_eq!(profiles.len(), 1, "one launch, one profile");
    profiles.pop().unwrap()
}

/// The line of `needle` (which must occur once) in the traffic probes' source.
fn probe_line(needle: &str) -> u32 {
    let source = include_str!("../../../probes/src/traffic.rs");
    let hits: Vec<usize> = source
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(hits.len(), 1, "{needle:?} in probes/src/traffic.rs");
    hits[0] as u32
}

/// Sectors (32 bytes) and lines (128 bytes) that a warp's lanes touch,
/// each lane `bytes` at `addr(lane)`: the definition, lane by lane.
fn touched(addr: impl Fn(usize) -> usize, bytes: usize, lanes: usize) -> (u64, u64) {
    let units = |size: usize| {
        (0..lanes)
            .flat_map(|l| (addr(l) / size)..=((addr(l) + bytes - 1) / size))
            .collect::<BTreeSet<_>>()
            .len() as u64
    };
    (units(32), units(128))
}

#[test]
fn a_coalesced_f32_copy_is_4_sectors_per_request() {
    let n = 512; // 4 blocks of 128 threads: 16 warps
    let p = profile_one(|dev| {
        let x = dev.upload(&(0..n).map(|i| i as f32).collect::<Vec<_>>())?;
        let mut out = dev.alloc_zeroed::<f32>(n)?;
        let cfg = LaunchConfig::new(Dim3::x(4), Dim3::x(128));
        dev.launch(probe::probe_copy_strided, cfg, (&x, 1u32, &mut out))?;
        assert_eq!(out.to_host()?, x.to_host()?);
        Ok(())
    });
    assert_eq!(p.kernel, "probe_copy_strided");
    for t in [&p.global_load, &p.global_store] {
        assert_eq!(t.requests, 16);
        assert_eq!(t.sectors, 16 * 4);
        assert_eq!(t.sectors_per_request(), 4.0);
        assert_eq!(t.lines, 16);
        assert_eq!(t.bytes_requested, 4 * n as u64);
        assert_eq!(t.efficiency(), 1.0);
        assert_eq!(t.requests_by_width, [0, 0, 16, 0, 0], "all 32-bit");
    }
    assert_eq!(p.output_elements, n as u64);
    assert_eq!(p.bytes_per_output_element(), Some((4.0, 4.0)));
    assert_eq!(p.bank_conflicts(), 0);
}

#[test]
fn a_copy_strided_by_32_elements_is_32_sectors_per_request() {
    let n = 256;
    let p = profile_one(|dev| {
        let x = dev.upload(&(0..32 * n).map(|i| i as f32).collect::<Vec<_>>())?;
        let mut out = dev.alloc_zeroed::<f32>(n)?;
        let cfg = LaunchConfig::new(Dim3::x(2), Dim3::x(128));
        dev.launch(probe::probe_copy_strided, cfg, (&x, 32u32, &mut out))?;
        let expected: Vec<f32> = (0..n).map(|i| (32 * i) as f32).collect();
        assert_eq!(out.to_host()?, expected);
        Ok(())
    });
    let warps = (n / 32) as u64;
    assert_eq!(p.global_load.requests, warps);
    assert_eq!(p.global_load.sectors_per_request(), 32.0);
    assert_eq!(p.global_load.lines, 32 * warps, "each lane its own line");
    assert_eq!(p.global_load.efficiency(), 4.0 / 32.0);
    // The writes stay coalesced.
    assert_eq!(p.global_store.sectors_per_request(), 4.0);
    assert_eq!(p.bytes_per_output_element(), Some((32.0, 4.0)));
}

/// Every stride from 1 to 40 elements: sectors and lines per request as the
/// lanes' addresses give them (the buffer starts 256-byte aligned, as on a GPU).
#[test]
fn sectors_and_lines_follow_the_stride() {
    let n = 64; // two warps
    for stride in 1..=40usize {
        let p = profile_one(|dev| {
            let x = dev.alloc_zeroed::<f32>(stride * n)?;
            let mut out = dev.alloc_zeroed::<f32>(n)?;
            let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(n as u32));
            dev.launch(
                probe::probe_copy_strided,
                cfg,
                (&x, stride as u32, &mut out),
            )
        });
        let (mut sectors, mut lines) = (0, 0);
        for warp in 0..n / 32 {
            let (s, l) = touched(|lane| 4 * stride * (32 * warp + lane), 4, 32);
            sectors += s;
            lines += l;
        }
        assert_eq!(p.global_load.requests, 2, "stride {stride}");
        assert_eq!(p.global_load.sectors, sectors, "stride {stride}");
        assert_eq!(p.global_load.lines, lines, "stride {stride}");
        assert_eq!(
            p.global_load.efficiency(),
            (4 * n) as f64 / (32 * sectors) as f64,
            "stride {stride}"
        );
    }
}

/// Lanes that make no access are inactive in the request: 48 elements for 64
/// threads leave the second warp's last 16 lanes without a load or a store.
#[test]
fn inactive_lanes_are_left_out_of_a_request() {
    let n = 48;
    let p = profile_one(|dev| {
        let x = dev.alloc_zeroed::<f32>(n)?;
        let mut out = dev.alloc_zeroed::<f32>(n)?;
        let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(64));
        dev.launch(probe::probe_copy_strided, cfg, (&x, 1u32, &mut out))
    });
    let (full, _) = touched(|lane| 4 * lane, 4, 32);
    let (half, _) = touched(|lane| 4 * (32 + lane), 4, 16);
    for t in [&p.global_load, &p.global_store] {
        assert_eq!(t.requests, 2);
        assert_eq!(t.lane_accesses, n as u64);
        assert_eq!(t.sectors, full + half);
        assert_eq!((full, half), (4, 2));
        assert_eq!(t.efficiency(), 1.0);
    }
}

#[test]
fn a_128_bit_load_per_lane_is_16_sectors_per_request() {
    let threads = 128; // 4 warps, 4 floats each
    let n = 4 * threads;
    let p = profile_one(|dev| {
        let x = dev.upload(&(0..n).map(|i| i as f32).collect::<Vec<_>>())?;
        let mut out = dev.alloc_zeroed::<f32>(n)?;
        let cfg = LaunchConfig::new(Dim3::x(2), Dim3::x(64));
        dev.launch(probe::probe_copy_vector16, cfg, (&x, &mut out))?;
        assert_eq!(out.to_host()?, x.to_host()?);
        Ok(())
    });
    let l = &p.global_load;
    assert_eq!(l.requests, 4);
    assert_eq!(l.sectors_per_request(), 16.0);
    assert_eq!(l.lines, 4 * 4);
    assert_eq!(l.requests_by_width, [0, 0, 0, 0, 4], "all 128-bit");
    assert_eq!(l.efficiency(), 1.0);
    // Four scalar stores per lane, 16 bytes apart: each request spans 512 bytes.
    let s = &p.global_store;
    assert_eq!(s.requests, 4 * 4);
    let (sectors, lines) = touched(|lane| 16 * lane, 4, 32);
    assert_eq!((sectors, lines), (16, 4));
    assert_eq!(s.sectors, 16 * sectors);
    assert_eq!(s.lines, 16 * lines);
    assert_eq!(s.efficiency(), 0.25);
}

/// The transpose through a 32×32 tile and through a 32×33 one.
fn transpose(pitch: u32) -> MemoryProfile {
    profile_one(|dev| {
        let x: Vec<f32> = (0..1024).map(|i| i as f32).collect();
        let input = dev.upload(&x)?;
        let mut out = dev.alloc_zeroed::<f32>(1024)?;
        let cfg = LaunchConfig::new(Dim3::x(1), Dim3::xy(32, 32));
        dev.launch(probe::probe_transpose_tile, cfg, (&input, pitch, &mut out))?;
        let expected: Vec<f32> = (0..1024).map(|i| x[(i % 32) * 32 + i / 32]).collect();
        assert_eq!(out.to_host()?, expected);
        Ok(())
    })
}

#[test]
fn a_transpose_through_a_32_by_32_tile_has_32_way_conflicts() {
    let p = transpose(32);
    // Rows are written conflict-free: 32 warps, one wavefront each.
    assert_eq!(p.shared_store.requests, 32);
    assert_eq!(p.shared_store.wavefronts, 32);
    assert_eq!(p.shared_store.bank_conflicts, 0);
    // Columns are read 32 floats apart: all 32 lanes in one bank.
    assert_eq!(p.shared_load.requests, 32);
    assert_eq!(p.shared_load.wavefronts_per_request(), 32.0);
    assert_eq!(p.shared_load.bank_conflicts, 32 * 31);
    assert_eq!(p.bank_conflicts(), 32 * 31);
    // The worst line is the column read; it names the probe's own line.
    let line = probe_line("let v = tile.load(c * pitch + r);");
    let worst = p
        .lines
        .iter()
        .max_by_key(|l| l.wavefronts)
        .expect("per-line traffic");
    assert!(worst.file.ends_with("traffic.rs"), "{}", worst.file);
    assert_eq!(
        (worst.line, worst.wavefronts, worst.shared_requests),
        (line, 1024, 32)
    );
    // The global side is two coalesced passes.
    assert_eq!(p.global_load.sectors_per_request(), 4.0);
    assert_eq!(p.global_store.sectors_per_request(), 4.0);
}

#[test]
fn a_transpose_through_a_32_by_33_tile_has_no_conflicts() {
    let p = transpose(33);
    assert_eq!(p.shared_load.requests, 32);
    assert_eq!(p.shared_load.wavefronts, 32);
    assert_eq!(p.shared_store.wavefronts, 32);
    assert_eq!(p.bank_conflicts(), 0);
}

/// `ldmatrix.x4` of rows 128 bytes apart: plainly stored, the 8 rows of each
/// matrix share banks 0–3 (8 wavefronts per matrix); XOR-swizzled, each row
/// is in its own 4 banks (one wavefront per matrix). Both read the same values.
#[test]
fn ldmatrix_from_a_swizzled_tile_is_conflict_free_and_from_a_plain_one_is_not() {
    let run = |swizzle: u32| {
        let mut registers = Vec::new();
        let p = profile_one(|dev| {
            let mut out = dev.alloc_zeroed::<u32>(128)?;
            let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(32));
            dev.launch(probe::probe_ldmatrix_tile, cfg, (swizzle, &mut out))?;
            registers = out.to_host()?;
            Ok(())
        });
        (p, registers)
    };
    // Lane l, register k: row 8k + l/4 of the logical tile, columns 2(l%4) and +1.
    let expected: Vec<u32> = (0..128)
        .map(|i| {
            let (lane, k) = (i / 4, i % 4);
            let (row, col) = (8 * k + lane / 4, 2 * (lane % 4));
            let bits = |c: usize| (row * 64 + c) as u32;
            bits(col) | bits(col + 1) << 16
        })
        .collect();
    let (plain, plain_regs) = run(0);
    let (swizzled, swizzled_regs) = run(1);
    assert_eq!(plain_regs, expected);
    assert_eq!(swizzled_regs, expected);

    assert_eq!(plain.ldmatrix.requests, 1);
    assert_eq!(plain.ldmatrix.wavefronts, 4 * 8);
    assert_eq!(plain.ldmatrix.bank_conflicts, 4 * 7);
    assert_eq!(swizzled.ldmatrix.requests, 1);
    assert_eq!(swizzled.ldmatrix.wavefronts, 4);
    assert_eq!(swizzled.ldmatrix.bank_conflicts, 0);
    // The tile is filled by 128-bit stores of consecutive chunks: 8 requests,
    // a quarter-warp's 128 bytes per wavefront, either way.
    for p in [&plain, &swizzled] {
        assert_eq!(p.shared_store.requests, 8);
        assert_eq!(p.shared_store.wavefronts, 8 * 4);
        assert_eq!(p.shared_store.bank_conflicts, 0);
        assert_eq!(p.shared_store.requests_by_width, [0, 0, 0, 0, 8]);
        // ldmatrix's rows are not counted again as shared loads.
        assert_eq!(p.shared_load.requests, 0);
    }
}

/// The tensor-core probe stages A (32 lanes) and B (16 lanes) with
/// `cp.async` and loads them with `ldmatrix`: A's rows are 32 bytes apart
/// (rows r and r + 4 share banks: 2 wavefronts per matrix), B's 16 (one).
#[test]
fn cp_async_and_ldmatrix_in_the_tensor_core_probe() {
    let p = profile_one(|dev| {
        let a = dev.upload(&vec![half::f16::ONE; 16 * 16])?;
        let b = dev.upload(&vec![half::f16::ONE; 16 * 8])?;
        let c = dev.upload(&vec![0.0f32; 16 * 8])?;
        let mut d = dev.alloc_zeroed::<f32>(16 * 8)?;
        let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(32));
        dev.launch(probe::probe_mma_ldmatrix, cfg, (&a, &b, &c, &mut d))?;
        assert_eq!(d.to_host()?, vec![16.0; 16 * 8]);
        Ok(())
    });
    assert_eq!(p.cp_async.requests, 2);
    assert_eq!(p.cp_async.sectors, 512 / 32 + 256 / 32);
    assert_eq!(p.cp_async.bytes_requested, 512 + 256);
    assert_eq!(p.cp_async.requests_by_width, [0, 0, 0, 0, 2]);
    assert_eq!(p.ldmatrix.requests, 2);
    assert_eq!(p.ldmatrix.wavefronts, 4 * 2 + 2);
    assert_eq!(p.ldmatrix.bank_conflicts, 4);
    assert_eq!(p.bytes_read(), 32 * (512 + 256) / 32);
}

#[test]
fn atomics_are_counted_per_address() {
    let n = 192;
    let bins = 5u32;
    // Values skewed towards bin 0.
    let x: Vec<u32> = (0..n as u32)
        .map(|i| if i % 3 == 0 { 0 } else { i * 7 })
        .collect();
    let mut histogram = Vec::new();
    let p = profile_one(|dev| {
        let input = dev.upload(&x)?;
        let mut out = dev.alloc_zeroed::<u32>(bins as usize)?;
        let cfg = LaunchConfig::new(Dim3::x(3), Dim3::x(64));
        dev.launch(probe::probe_histogram, cfg, (&input, bins, &mut out))?;
        histogram = out.to_host()?;
        Ok(())
    });
    let mut counts: BTreeMap<u32, u64> = BTreeMap::new();
    for v in &x {
        *counts.entry(v % bins).or_default() += 1;
    }
    let expected: Vec<u32> = (0..bins)
        .map(|b| counts.get(&b).copied().unwrap_or(0) as u32)
        .collect();
    assert_eq!(histogram, expected);
    assert_eq!(p.atomics.operations, n as u64);
    assert_eq!(p.atomics.addresses, counts.len() as u64);
    assert_eq!(p.atomics.max_per_address, *counts.values().max().unwrap());
    assert_eq!(p.global_atomic.requests, (n / 32) as u64);
}

#[test]
fn only_launches_inside_profile_memory_are_profiled_in_order() {
    let dev = Device::emulator();
    dev.load(&PROBES).unwrap();
    let x = dev.upload(&vec![1.0f32; 64]).unwrap();
    let mut out = dev.alloc_zeroed::<f32>(64).unwrap();
    let cfg = LaunchConfig::new(Dim3::x(1), Dim3::x(64));
    dev.launch(probe::probe_copy_strided, cfg, (&x, 1u32, &mut out))
        .unwrap();
    let stream = dev.new_stream().unwrap();
    let ((), profiles) = dev
        .profile_memory(|| {
            dev.launch(
                probe::probe_copy_vector16,
                LaunchConfig::new(Dim3::x(1), Dim3::x(16)),
                (&x, &mut out),
            )?;
            // A stream's launch runs later, on another thread: still collected.
            stream.launch(probe::probe_copy_strided, cfg, (&x, 2u32, &mut out))
        })
        .unwrap();
    let kernels: Vec<&str> = profiles.iter().map(|p| p.kernel.as_str()).collect();
    assert_eq!(kernels, ["probe_copy_vector16", "probe_copy_strided"]);
    // Nested: the inner one takes the launches made while it runs.
    let ((((), inner), ()), outer) = dev
        .profile_memory(|| {
            let inner = dev.profile_memory(|| {
                dev.launch(probe::probe_copy_strided, cfg, (&x, 1u32, &mut out))
            })?;
            Ok((
                inner,
                dev.launch(probe::probe_copy_strided, cfg, (&x, 2u32, &mut out))?,
            ))
        })
        .unwrap();
    assert_eq!((inner.len(), outer.len()), (1, 1));
    assert_eq!(inner[0].global_load.sectors_per_request(), 4.0);
    assert_eq!(outer[0].global_load.sectors_per_request(), 8.0);
    // A panic inside `work` leaves the device launching and profiling as before.
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        dev.profile_memory(|| -> warpforge::Result<()> { panic!("in work") })
    }));
    assert!(panicked.is_err());
    dev.launch(probe::probe_copy_strided, cfg, (&x, 1u32, &mut out))
        .unwrap();
    let ((), after) = dev
        .profile_memory(|| dev.launch(probe::probe_copy_strided, cfg, (&x, 1u32, &mut out)))
        .unwrap();
    assert_eq!(after.len(), 1);
    let ((), none) = dev.profile_memory(|| Ok(())).unwrap();
    assert!(none.is_empty());
    let e = Error::ProfileNeedsEmulator.to_string();
    assert!(e.contains("Device::emulator()"), "{e}");
}

#[test]
fn the_table_names_ncus_quantities() {
    let p = transpose(32);
    let table = p.to_string();
    for needed in [
        "probe_transpose_tile",
        "sect/req",
        "efficiency",
        "wavefronts",
        "conflicts",
        "per output element (1024): 4.00 bytes read, 4.00 bytes written",
        "traffic.rs",
    ] {
        assert!(table.contains(needed), "{needed:?} in\n{table}");
    }
}

/// The page on the emulator (docs/emulator.md) documents the memory-traffic
/// profile and holds its generated per-kernel table.
const EMULATOR_DOC: &str = "docs/emulator.md";

/// docs/emulator.md's example table is this profile's `Display`, line for line.
#[test]
fn the_docs_show_the_transposes_table_as_printed() {
    let doc = include_str!("../../../docs/emulator.md");
    let start = doc
        .find("memory profile of `probe_transpose_tile`")
        .expect("docs/emulator.md shows the transpose's profile");
    let shown = &doc[start..start + doc[start..].find("```").unwrap()];
    assert_eq!(shown, transpose(32).to_string());
}

/// One library kernel's recorded traffic figures, over all of `verify`'s
/// edge-length cases: load and store coalescing efficiency, bank conflicts
/// per shared request, bytes read and written per output element (`None`:
/// no such traffic).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Figures {
    load_efficiency: Option<f64>,
    store_efficiency: Option<f64>,
    conflicts_per_request: Option<f64>,
    read_per_element: Option<f64>,
    written_per_element: Option<f64>,
}

impl Figures {
    fn of(p: &MemoryProfile) -> Figures {
        let shared = p.shared_load.requests + p.shared_store.requests + p.ldmatrix.requests;
        let per_element = p.bytes_per_output_element();
        Figures {
            load_efficiency: (p.global_load.requests > 0).then(|| p.global_load.efficiency()),
            store_efficiency: (p.global_store.requests > 0).then(|| p.global_store.efficiency()),
            conflicts_per_request: (shared > 0).then(|| p.bank_conflicts() as f64 / shared as f64),
            read_per_element: per_element.map(|(r, _)| r),
            written_per_element: per_element.map(|(_, w)| w),
        }
    }

    fn columns(&self) -> [Option<f64>; 5] {
        [
            self.load_efficiency,
            self.store_efficiency,
            self.conflicts_per_request,
            self.read_per_element,
            self.written_per_element,
        ]
    }

    /// The line of the recorded table.
    fn line(&self, kernel: &str) -> String {
        let cells: Vec<String> = self
            .columns()
            .iter()
            .map(|c| c.map_or("-".to_owned(), |v| format!("{v:.4}")))
            .collect();
        format!("{kernel:<40} {}", cells.join(" "))
    }

    fn parse(line: &str) -> (String, Figures) {
        let mut words = line.split_whitespace();
        let kernel = words.next().expect("a kernel name").to_owned();
        let cells: Vec<Option<f64>> = words
            .map(|w| (w != "-").then(|| w.parse().expect("a number or -")))
            .collect();
        assert_eq!(cells.len(), 5, "{line}");
        let f = Figures {
            load_efficiency: cells[0],
            store_efficiency: cells[1],
            conflicts_per_request: cells[2],
            read_per_element: cells[3],
            written_per_element: cells[4],
        };
        (kernel, f)
    }

    /// How `self` (measured) is worse than `recorded`, column by column:
    /// lower efficiency, more conflicts, more bytes per element. Figures are
    /// recorded to 4 decimals, so a difference below 1e-4 is none.
    fn worse_than(&self, recorded: &Figures) -> Vec<String> {
        const NAMES: [&str; 5] = [
            "load efficiency",
            "store efficiency",
            "bank conflicts per shared request",
            "bytes read per output element",
            "bytes written per output element",
        ];
        let higher_is_better = [true, true, false, false, false];
        let mut worse = Vec::new();
        for (i, (now, then)) in self
            .columns()
            .into_iter()
            .zip(recorded.columns())
            .enumerate()
        {
            let (Some(now), Some(then)) = (now, then) else {
                continue;
            };
            let regressed = if higher_is_better[i] {
                now < then - 1e-4
            } else {
                now > then + 1e-4
            };
            if regressed {
                worse.push(format!("{} {now:.4}, recorded {then:.4}", NAMES[i]));
            }
        }
        worse
    }
}

/// Where the figures are recorded.
const RECORDED: &str = "tests/suite/memory_profile_figures.txt";

/// The kernels and figures of the recorded table, in its order.
fn parse_figures(text: &str) -> Vec<(String, Figures)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(Figures::parse)
        .collect()
}

/// Every library kernel's traffic over `verify`'s edge-length cases, against
/// the figures recorded in `memory_profile_figures.txt`: a kernel whose
/// coalescing efficiency drops, whose bank conflicts or bytes per element
/// grow fails here. Kernels added or removed since the recording are listed,
/// not failed. `WARPFORGE_RECORD_TRAFFIC=1` rewrites the file with the
/// figures measured now (after an improvement, or for new kernels); the
/// table of them in docs/emulator.md is then regenerated with `WARPFORGE_REGENERATE_DOCS=1`.
#[test]
fn library_kernels_keep_their_recorded_traffic() {
    let dev = Device::emulator();
    let operations: Vec<_> = warpforge_tools::registry::OPERATIONS.iter().collect();
    let (reports, profiles) = dev
        .profile_memory(|| warpforge_tools::verify::run(&dev, &operations, 0x5eed, 0, 200_000))
        .unwrap();
    assert!(reports.iter().all(|r| r.passed()), "verify failed");
    let mut kernels: Vec<MemoryProfile> = Vec::new();
    for p in &profiles {
        match kernels.iter_mut().find(|k| k.kernel == p.kernel) {
            Some(k) => k.add(p),
            None => kernels.push(p.clone()),
        }
    }
    let measured: Vec<(String, Figures)> = kernels
        .iter()
        .map(|k| (k.kernel.clone(), Figures::of(k)))
        .collect();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(RECORDED);
    if std::env::var("WARPFORGE_RECORD_TRAFFIC").is_ok_and(|v| v == "1") {
        let mut text = String::from(
            "# kernel, then over verify's edge-length cases (emulator): load efficiency, store \
             efficiency,\n# bank conflicts per shared request, bytes read and written per output \
             element (- : none)\n",
        );
        for (kernel, f) in &measured {
            text += &f.line(kernel);
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
    }
    let recorded = parse_figures(&std::fs::read_to_string(&path).unwrap());
    assert!(!recorded.is_empty());
    let mut regressions = Vec::new();
    for (kernel, now) in &measured {
        match recorded.iter().find(|(k, _)| k == kernel) {
            Some((_, then)) => {
                for w in now.worse_than(then) {
                    regressions.push(format!("{kernel}: {w}"));
                }
            }
            None => eprintln!("not recorded yet: {}", now.line(kernel)),
        }
    }
    for (kernel, _) in &recorded {
        if !measured.iter().any(|(k, _)| k == kernel) {
            eprintln!("recorded but not launched any more: {kernel}");
        }
    }
    assert!(
        regressions.is_empty(),
        "memory traffic got worse than {RECORDED} records:\n  {}\n(rerun with \
         WARPFORGE_RECORD_TRAFFIC=1 to record the new figures if the change is intended)",
        regressions.join("\n  ")
    );
}

#[test]
fn a_worse_figure_is_a_regression_and_a_better_one_is_not() {
    let recorded = Figures {
        load_efficiency: Some(0.5),
        store_efficiency: None,
        conflicts_per_request: Some(1.0),
        read_per_element: Some(4.0),
        written_per_element: Some(4.0),
    };
    let better = Figures {
        load_efficiency: Some(1.0),
        conflicts_per_request: Some(0.0),
        read_per_element: Some(2.0),
        ..recorded
    };
    assert!(better.worse_than(&recorded).is_empty());
    let worse = Figures {
        load_efficiency: Some(0.25),
        store_efficiency: Some(0.1), // new traffic: nothing recorded to compare with
        conflicts_per_request: Some(3.0),
        written_per_element: Some(8.0),
        ..recorded
    };
    assert_eq!(
        worse.worse_than(&recorded).len(),
        3,
        "{:?}",
        worse.worse_than(&recorded)
    );
    let (kernel, parsed) = Figures::parse(&recorded.line("k"));
    assert_eq!((kernel.as_str(), parsed), ("k", recorded));
}

/// `names` as brace patterns, `a_{x,y}_b` for `a_x_b` and `a_y_b`: two
/// patterns that differ in one `_`-separated part only are merged, so each
/// pattern stands for exactly the names it was made of and no others.
fn brace_patterns(names: &[&str]) -> Vec<String> {
    let mut patterns: Vec<Vec<Vec<&str>>> = names
        .iter()
        .map(|n| n.split('_').map(|part| vec![part]).collect())
        .collect();
    'merge: loop {
        for i in 0..patterns.len() {
            for j in i + 1..patterns.len() {
                let (a, b) = (&patterns[i], &patterns[j]);
                if a.len() != b.len() {
                    continue;
                }
                let differing: Vec<usize> = (0..a.len()).filter(|&k| a[k] != b[k]).collect();
                if let [k] = differing[..] {
                    let b = patterns.remove(j);
                    patterns[i][k].extend(&b[k]);
                    continue 'merge;
                }
            }
        }
        break;
    }
    patterns
        .iter()
        .map(|parts| {
            let parts: Vec<String> = parts
                .iter()
                .map(|alternatives| match alternatives[..] {
                    [one] => one.to_owned(),
                    _ => format!("{{{}}}", alternatives.join(",")),
                })
                .collect();
            parts.join("_")
        })
        .collect()
}

/// docs/emulator.md's table of the recorded figures (`memory_profile_figures.txt`'s
/// text): one row per set of kernels with the same figures, in the order of
/// the file, efficiencies in percent.
fn traffic_table(recorded: &str) -> String {
    let mut groups: Vec<(Figures, Vec<&str>)> = Vec::new();
    let figures = parse_figures(recorded);
    for (kernel, f) in &figures {
        match groups.iter_mut().find(|(g, _)| g == f) {
            Some((_, kernels)) => kernels.push(kernel),
            None => groups.push((*f, vec![kernel])),
        }
    }
    let cell = |v: Option<f64>, scale: f64, digits: usize| {
        v.map_or("-".to_owned(), |v| format!("{:.digits$}", v * scale))
    };
    let mut table = String::from(
        "| kernels | load efficiency (%) | store efficiency (%) | bank conflicts per shared \
         request | bytes read / written per output element |\n| --- | ---: | ---: | ---: | ---: |\n",
    );
    for (f, kernels) in &groups {
        let names: Vec<String> = brace_patterns(kernels)
            .iter()
            .map(|p| format!("`{p}`"))
            .collect();
        table += &format!(
            "| {} | {} | {} | {} | {} / {} |\n",
            names.join(", "),
            cell(f.load_efficiency, 100.0, 1),
            cell(f.store_efficiency, 100.0, 1),
            cell(f.conflicts_per_request, 1.0, 2),
            cell(f.read_per_element, 1.0, 2),
            cell(f.written_per_element, 1.0, 2),
        );
    }
    table
}

/// docs/emulator.md's generated table of the recorded figures starts with this line.
const TRAFFIC_TABLE_BEGIN: &str = concat!(
    "<!-- generated: from warpforge/tests/suite/memory_profile_figures.txt by ",
    "memory_profile::the_docs_traffic_table_is_the_recorded_figures -->\n",
);

/// docs/emulator.md's per-kernel traffic table is `traffic_table` of the
/// recorded figures, so it cannot go stale when they are re-recorded.
/// `WARPFORGE_REGENERATE_DOCS=1` rewrites the block from the figures file.
#[test]
fn the_docs_traffic_table_is_the_recorded_figures() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let recorded = std::fs::read_to_string(root.join(RECORDED)).unwrap();
    common::docs::check_generated(
        EMULATOR_DOC,
        TRAFFIC_TABLE_BEGIN,
        &traffic_table(&recorded),
        "the_docs_traffic_table_is_the_recorded_figures",
    );
}

/// Every name a brace pattern stands for.
fn expand(pattern: &str) -> Vec<String> {
    let mut names = vec![String::new()];
    for (i, part) in pattern.split('_').enumerate() {
        let alternatives: Vec<&str> = match part.strip_prefix('{') {
            Some(inner) => inner.trim_end_matches('}').split(',').collect(),
            None => vec![part],
        };
        let separator = if i == 0 { "" } else { "_" };
        names = names
            .iter()
            .flat_map(|n| {
                alternatives
                    .iter()
                    .map(move |a| format!("{n}{separator}{a}"))
            })
            .collect();
    }
    names
}

#[test]
fn the_traffic_table_merges_exactly_the_kernels_with_the_same_figures() {
    // Not a full product: `sumsq` exists for f32 only, so it stays apart.
    let names = [
        "reduce_sum_f32",
        "reduce_min_f32",
        "reduce_sumsq_f32",
        "reduce_sum_i32",
        "reduce_min_i32",
        "finish_f32",
    ];
    let patterns = brace_patterns(&names);
    assert_eq!(
        patterns,
        [
            "reduce_{sum,min,sumsq}_f32",
            "reduce_{sum,min}_i32",
            "finish_f32"
        ]
    );
    let mut covered: Vec<String> = patterns.iter().flat_map(|p| expand(p)).collect();
    covered.sort();
    let mut sorted = names.map(String::from);
    sorted.sort();
    assert_eq!(covered, sorted);

    let text = "# header\n\
                a_f32 0.5000 1.0000 - 8.0000 4.0000\n\
                b_f32 0.2500 - 0.5000 0.0000 16.0312\n\
                a_f64 0.5000 1.0000 - 8.0000 4.0000\n";
    assert_eq!(
        traffic_table(text).lines().skip(2).collect::<Vec<_>>(),
        [
            "| `a_{f32,f64}` | 50.0 | 100.0 | - | 8.00 / 4.00 |",
            "| `b_f32` | 25.0 | - | 0.50 | 0.00 / 16.03 |",
        ]
    );

    // The recorded file: every kernel in exactly one row, none made up.
    let recorded = include_str!("memory_profile_figures.txt");
    let mut kernels: Vec<String> = parse_figures(recorded)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    kernels.sort();
    let mut shown: Vec<String> = traffic_table(recorded)
        .lines()
        .skip(2)
        .flat_map(|row| {
            let names = row.split(" | ").next().unwrap().trim_start_matches("| ");
            names
                .split(", ")
                .flat_map(|p| expand(p.trim_matches('`')))
                .collect::<Vec<_>>()
        })
        .collect();
    shown.sort();
    assert_eq!(shown, kernels);
}

/// The Hopper GEMM's global stores on the emulator of sm_90 at a shape of
/// whole tiles (2 × 128 by 2 × 256, one k-step, a packed C): returns the
/// profile of one launch for output type `O` (made from f32 by `from_f32`), with `beta` (C read when it
/// is not 0), checking the product is exact.
fn wgmma_store_profile<O>(beta: f32, from_f32: fn(f32) -> O) -> MemoryProfile
where
    O: Copy + warpforge::Element + PartialEq + std::fmt::Debug,
    half::bf16: warpforge::gemm::GemmTypes<O, Scalar = f32>,
{
    use half::bf16;
    use warpforge::gemm::Gemm;
    let (m, n, k) = (256usize, 512usize, 64usize);
    let dev = Device::emulator_for(warpforge::Arch::Sm90);
    let a: Vec<bf16> = (0..m * k)
        .map(|i| bf16::from_f32((i % 5) as f32 - 2.0))
        .collect();
    let b: Vec<bf16> = (0..k * n)
        .map(|i| bf16::from_f32((i % 3) as f32 - 1.0))
        .collect();
    let c0: Vec<f32> = (0..m * n).map(|i| (i % 7) as f32).collect();
    let want: Vec<f32> = (0..m * n)
        .map(|e| {
            let (i, j) = (e / n, e % n);
            let dot: f32 = (0..k)
                .map(|p| a[i * k + p].to_f32() * b[p * n + j].to_f32())
                .sum();
            if beta == 0.0 { dot } else { dot + beta * c0[e] }
        })
        .collect();
    let ((), mut profiles) = dev
        .profile_memory(|| {
            let (ab, bb) = (dev.upload(&a)?, dev.upload(&b)?);
            let mut cb = dev.upload(&c0.iter().map(|&x| from_f32(x)).collect::<Vec<O>>())?;
            Gemm::new(m, n, k)
                .beta(beta)
                .wgmma(true)
                .run(&dev, &ab, &bb, &mut cb)?;
            let got = cb.to_host()?;
            for (e, (&g, &w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g, from_f32(w), "C[{e}]");
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(profiles.len(), 1, "one launch, one profile");
    profiles.pop().unwrap()
}

/// The Hopper GEMM's epilogue stages its tile in shared memory and writes
/// C in whole 128-byte lines: at a shape of whole tiles its global stores
/// touch exactly the sectors and lines of C's bytes, no more (Nsight
/// Compute's "excessive sectors" are 0), and with beta ≠ 0 its reads of C
/// too; every output type. (The epilogue that wrote the `mma` fragments
/// straight to C moved 2 sectors per 32 bytes of f32 and 4 per 32 bytes of
/// f16: each request's lanes 8 bytes or 4 apart.)
#[test]
fn the_wgmma_epilogue_writes_whole_lines() {
    fn check<O>(beta: f32, from_f32: fn(f32) -> O)
    where
        O: Copy + warpforge::Element + PartialEq + std::fmt::Debug,
        half::bf16: warpforge::gemm::GemmTypes<O, Scalar = f32>,
    {
        let p = wgmma_store_profile::<O>(beta, from_f32);
        let bytes = (256 * 512 * size_of::<O>()) as u64;
        let name = &p.kernel;
        let st = &p.global_store;
        eprintln!(
            "{name} beta {beta}: {} store requests, {} sectors, {} lines for {} bytes \
             ({:.4} sectors a stored byte, {:.2} lines a request)",
            st.requests,
            st.sectors,
            st.lines,
            st.bytes_requested,
            st.sectors as f64 / st.bytes_requested as f64,
            st.lines as f64 / st.requests as f64,
        );
        assert_eq!(st.bytes_requested, bytes, "{name}: C written once");
        assert_eq!(
            st.sectors * 32,
            bytes,
            "{name}: store sectors, minimum {}",
            bytes / 32
        );
        assert_eq!(
            st.lines * 128,
            bytes,
            "{name}: store lines, minimum {}",
            bytes / 128
        );
        let ld = &p.global_load;
        if beta == 0.0 {
            assert_eq!(ld.requests, 0, "{name}: beta = 0 reads no C");
        } else {
            assert_eq!(ld.bytes_requested, bytes, "{name}: C read once");
            assert_eq!(ld.sectors * 32, bytes, "{name}: load sectors");
            assert_eq!(ld.lines * 128, bytes, "{name}: load lines");
        }
    }
    for beta in [0.0, 2.0] {
        check::<f32>(beta, |x| x);
        check::<half::bf16>(beta, half::bf16::from_f32);
    }
}
