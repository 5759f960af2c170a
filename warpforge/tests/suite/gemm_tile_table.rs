//! docs/gemm.md's tables of the GEMM tile configurations, made here from the
//! constants the kernels and the host use (`MmaTile`, the SIMT `Tile`s,
//! `TileConfig` and each type pair's kernel table), so that the page cannot
//! say what the code does not do. `WARPFORGE_REGENERATE_DOCS=1` rewrites them.

use crate::common::docs::check_generated;
use half::{bf16, f16};
use warpforge::gemm::{GemmTypes, TileConfig};
use warpforge::{DType, Element};
use warpforge_kernels::gemm::tensor::MmaTile;
use warpforge_kernels::gemm::tensor::dgemm::DMMA_TILE;
use warpforge_kernels::gemm::warp_tiled::F32_TILE_LARGE;
use warpforge_kernels::gemm::{F32_TILE, F64_TILE, MICRO};

/// The page that holds the tables.
const DOC: &str = "docs/gemm.md";

const TENSOR_BEGIN: &str = "<!-- generated: from warpforge::gemm::TileConfig and \
                            warpforge_kernels::gemm::tensor by \
                            gemm_tile_table::the_docs_tile_tables_are_the_code (tensor cores) -->\n";
const SIMT_BEGIN: &str = "<!-- generated: from warpforge_kernels::gemm's SIMT tiles by \
                          gemm_tile_table::the_docs_tile_tables_are_the_code (SIMT) -->\n";

/// nn, nt, tn, tt: `(trans_a, trans_b)` in the kernels' order.
const TRANSPOSES: [(bool, bool); 4] = [(false, false), (false, true), (true, false), (true, true)];

/// One type pair's kernel names for `tile` (`None`: the pair's only SIMT
/// tile: f64's, or a pair without tensor-core tiles), if the pair has
/// kernels for it.
struct Pair {
    name: String,
    kernels: fn(Option<TileConfig>, bool) -> Option<[&'static str; 4]>,
}

fn pair<TIn: GemmTypes<TOut>, TOut: Element>() -> Pair {
    fn dtype<T: Element>() -> DType {
        T::DTYPE
    }
    Pair {
        name: format!("{} → {}", dtype::<TIn>().name(), dtype::<TOut>().name()),
        kernels: |tile, tf32| {
            let has = match (tile, tf32) {
                (None, _) => TIn::TILES.is_empty() || TIn::HAS_DMMA,
                (Some(t), false) => TIn::TILES.contains(&t),
                (Some(t), true) => TIn::TF32_TILES.contains(&t),
            };
            has.then(|| TRANSPOSES.map(|(ta, tb)| TIn::kernel_name(ta, tb, tile, tf32)))
        },
    }
}

/// The tensor-core pairs, in the order the tables list them.
fn tensor_pairs() -> Vec<Pair> {
    vec![
        pair::<f16, f32>(),
        pair::<f16, f16>(),
        pair::<f16, bf16>(),
        pair::<bf16, f32>(),
        pair::<bf16, bf16>(),
        pair::<bf16, f16>(),
    ]
}

/// `names` as one pattern: the `_`-separated parts every name shares at its
/// start and its end, `*` for the rest (`gemm_*_64x64x32_s3`).
fn pattern(names: &[&str]) -> String {
    let split: Vec<Vec<&str>> = names.iter().map(|n| n.split('_').collect()).collect();
    let first = &split[0];
    if split.iter().all(|s| s == first) {
        return names[0].to_owned();
    }
    let shortest = split.iter().map(Vec::len).min().unwrap();
    let head = (0..shortest)
        .take_while(|&i| split.iter().all(|s| s[i] == first[i]))
        .count();
    let tail = (0..shortest - head)
        .take_while(|&i| {
            split
                .iter()
                .all(|s| s[s.len() - 1 - i] == first[first.len() - 1 - i])
        })
        .count();
    let mut parts = first[..head].to_vec();
    parts.push("*");
    parts.extend_from_slice(&first[first.len() - tail..]);
    parts.join("_")
}

/// Bytes as KiB: whole, or to one decimal.
fn kib(bytes: usize) -> String {
    if bytes.is_multiple_of(1024) {
        format!("{}", bytes / 1024)
    } else {
        format!("{:.1}", bytes as f64 / 1024.0)
    }
}

/// A tile's shared memory per block over the four transposes, `least–most KiB`.
fn shared_range(tile: &MmaTile) -> String {
    let bytes = TRANSPOSES.map(|(ta, tb)| tile.shared_bytes(ta, tb));
    let (least, most) = (*bytes.iter().min().unwrap(), *bytes.iter().max().unwrap());
    assert_eq!(most, tile.max_shared_bytes());
    if least == most {
        format!("{} KiB", kib(most))
    } else {
        format!("{}–{} KiB", kib(least), kib(most))
    }
}

/// The kernels cell: the pattern of every kernel name, their count and the
/// pairs they serve. Each name ends with its tile's `_{m}x{n}x{k}[_s{stages}]`.
fn kernels_cell(kernels: &[(String, [&'static str; 4])], suffix: &str) -> String {
    let names: Vec<&str> = kernels.iter().flat_map(|(_, k)| *k).collect();
    for name in &names {
        assert!(
            name.ends_with(suffix),
            "kernel {name} is not named after its tile ({suffix})"
        );
    }
    let pairs: Vec<&str> = kernels.iter().map(|(p, _)| p.as_str()).collect();
    format!(
        "`{}` ({}: {})",
        pattern(&names),
        names.len(),
        pairs.join(", ")
    )
}

/// The tensor-core (`mma.sync`) configurations: one row per `TileConfig`,
/// then one per TF32 tile, then f64's.
fn tensor_table() -> String {
    let pairs = tensor_pairs();
    let f32_pair = pair::<f32, f32>();
    let mut table = String::from(
        "| `TileConfig` | inputs | block tile (m × n × k) | warps (warp tile) | stages | threads \
         | shared memory per block | kernels (count: type pairs) |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let mut row = |config: TileConfig, tile: MmaTile, inputs: &str, kernels: Vec<(String, _)>| {
        let suffix = format!("_{}x{}x{}_s{}", tile.m, tile.n, tile.k, tile.stages);
        table += &format!(
            "| `{config:?}` | {inputs} | {} × {} × {} | {} × {} ({} × {}) | {} | {} | {} | {} |\n",
            tile.m,
            tile.n,
            tile.k,
            tile.m / tile.warp_m,
            tile.n / tile.warp_n,
            tile.warp_m,
            tile.warp_n,
            tile.stages,
            tile.threads(),
            shared_range(&tile),
            kernels_cell(&kernels, &suffix),
        );
    };
    let configs = [TileConfig::Small, TileConfig::Large, TileConfig::Wide];
    for config in configs {
        let kernels: Vec<(String, [&str; 4])> = pairs
            .iter()
            .filter_map(|p| (p.kernels)(Some(config), false).map(|k| (p.name.clone(), k)))
            .collect();
        row(config, config.tile(), "f16, bf16", kernels);
    }
    for config in configs {
        let Some(tile) = config.tf32_tile() else {
            continue;
        };
        let kernels = (f32_pair.kernels)(Some(config), true)
            .map(|k| vec![("f32 → f32".to_owned(), k)])
            .expect("a TF32 tile has TF32 kernels");
        row(config, tile, "f32 as tf32", kernels);
    }
    // f64 on the FP64 tensor cores (`mma.sync.m8n8k4`): its one tile.
    let kernels = (pair::<f64, f64>().kernels)(Some(TileConfig::Small), false)
        .map(|k| vec![("f64 → f64".to_owned(), k)])
        .expect("f64 has tensor-core kernels");
    row(TileConfig::Small, DMMA_TILE, "f64", kernels);
    table
}

/// The SIMT configurations: f32's two (by `TileConfig`) and f64's one.
fn simt_table() -> String {
    let mut table = String::from(
        "| `TileConfig` | type | block tile (m × n × k) | threads | per thread | stages \
         | shared memory per block | kernels (count) |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let f32_pair = pair::<f32, f32>();
    let f64_pair = pair::<f64, f64>();
    // (config, type, (m, n, k), threads, stages, shared bytes, kernels)
    let rows = [
        (
            "`Small`",
            "f32",
            (F32_TILE.m, F32_TILE.n, F32_TILE.k),
            F32_TILE.threads(),
            F32_TILE.shared_len() / (F32_TILE.k * (F32_TILE.m + F32_TILE.n)),
            F32_TILE.shared_len() * size_of::<f32>(),
            (f32_pair.kernels)(Some(TileConfig::Small), false),
        ),
        (
            "`Large`",
            "f32",
            (F32_TILE_LARGE.m, F32_TILE_LARGE.n, F32_TILE_LARGE.k),
            F32_TILE_LARGE.threads(),
            F32_TILE_LARGE.shared_len() / F32_TILE_LARGE.stage_len(),
            F32_TILE_LARGE.shared_len() * size_of::<f32>(),
            (f32_pair.kernels)(Some(TileConfig::Large), false),
        ),
        (
            "—",
            "f64",
            (F64_TILE.m, F64_TILE.n, F64_TILE.k),
            F64_TILE.threads(),
            F64_TILE.shared_len() / (F64_TILE.k * (F64_TILE.m + F64_TILE.n)),
            F64_TILE.shared_len() * size_of::<f64>(),
            (f64_pair.kernels)(None, false),
        ),
    ];
    for (config, ty, (m, n, k), threads, stages, shared, kernels) in rows {
        let kernels = kernels.expect("every SIMT row has kernels");
        let suffix = format!("_{m}x{n}x{k}");
        for name in kernels {
            assert!(
                name.ends_with(&suffix),
                "kernel {name} is not named after its tile ({suffix})"
            );
        }
        let per_thread = m * n / threads;
        let micro_tiles = per_thread / (MICRO * MICRO);
        let per_thread = if micro_tiles == 1 {
            format!("{MICRO} × {MICRO}")
        } else {
            format!("{micro_tiles} micro-tiles of {MICRO} × {MICRO}")
        };
        table += &format!(
            "| {config} | {ty} | {m} × {n} × {k} | {threads} | {per_thread} | {stages} | {} KiB | `{}` ({}) |\n",
            kib(shared),
            pattern(&kernels),
            kernels.len(),
        );
    }
    table
}

/// docs/gemm.md's two tile tables are `tensor_table` and `simt_table`.
#[test]
fn the_docs_tile_tables_are_the_code() {
    let test = "the_docs_tile_tables_are_the_code";
    check_generated(DOC, TENSOR_BEGIN, &tensor_table(), test);
    check_generated(DOC, SIMT_BEGIN, &simt_table(), test);
}

#[test]
fn a_pattern_keeps_what_every_name_shares() {
    assert_eq!(
        pattern(&[
            "gemm_f16_f32_nn_64x64x32_s3",
            "gemm_bf16_bf16_tt_64x64x32_s3"
        ]),
        "gemm_*_64x64x32_s3"
    );
    assert_eq!(
        pattern(&[
            "gemm_tf32_f32_nn_64x64x16_s3",
            "gemm_tf32_f32_tt_64x64x16_s3"
        ]),
        "gemm_tf32_f32_*_64x64x16_s3"
    );
    assert_eq!(pattern(&["gemm_a", "gemm_a"]), "gemm_a");
    assert_eq!(kib(27 * 1024), "27");
    assert_eq!(kib(79 * 1024 + 512), "79.5");
}
