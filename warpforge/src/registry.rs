//! The operations `verify` and `bench` know, in one table.
//!
//! Each [`Operation`] names a family of the library's kernels and carries
//! what the tools need to check and measure it: its verification (the cases,
//! the independent CPU reference and the tolerance, one [`KernelReport`] per
//! kernel) and, where it has one, its benchmark (the sizes and the anchor it
//! is compared with in the same run). `warpforge verify [--op NAME]`,
//! [`crate::verify::run`] and `warpforge bench NAME` walk [`OPERATIONS`], so a
//! new family (GEMM, conv2d) is one more entry here, not another path through
//! the tools.
//!
//! ```
//! use warpforge::registry::{self, OPERATIONS};
//! let names: Vec<&str> = OPERATIONS.iter().map(|op| op.name).collect();
//! assert_eq!(names, ["axpy", "reduce"]);
//! assert!(registry::operation("reduce").unwrap().bench.is_some());
//! let e = registry::operation("gemv").unwrap_err();
//! assert!(e.to_string().contains("axpy, reduce"), "{e}");
//! ```

use crate::bench::{self, AxpyBench, BenchReport, ReduceBench, Timing};
use crate::verify::{self, KernelReport};
use crate::{Device, Error, Result};
use rand::rngs::StdRng;

/// One family of kernels as `verify` and `bench` see it.
#[derive(Debug)]
pub struct Operation {
    /// The name the tools take (`warpforge verify --op NAME`, `warpforge bench NAME`).
    pub name: &'static str,
    /// One line: the kernels it covers and how they are checked.
    pub summary: &'static str,
    /// Runs every kernel of the family on the device at the given lengths
    /// (the edge lengths first, then random ones; see [`verify::lengths`]),
    /// with inputs drawn from the generator, against its CPU reference.
    pub verify: fn(&Device, &mut StdRng, &[usize]) -> Result<Vec<KernelReport>>,
    /// Its benchmark, if it has one.
    pub bench: Option<Bench>,
}

/// An operation's benchmark: its default sizes for the device, optionally
/// capped at 2^`max_log2` elements, timed as [`Timing`] says.
#[derive(Debug)]
pub struct Bench {
    /// One line: what is measured, in which unit, against which anchor.
    pub summary: &'static str,
    /// Runs it: `(device, max_log2, timing)`.
    pub run: fn(&Device, Option<u32>, Timing) -> Result<BenchReport>,
}

/// Every operation, in the order `verify` reports them.
pub static OPERATIONS: &[Operation] = &[
    Operation {
        name: "axpy",
        summary: "axpy_f32 and axpy_f64: each element the exact a·x + y rounded once",
        verify: verify::verify_axpy,
        bench: Some(Bench {
            summary: "axpy_f32 at 2^16 … 2^N elements, GB/s (x, y read, y written) against \
                      the device-to-device copy of the same size",
            run: |dev, max_log2, timing| {
                let mut config = AxpyBench::defaults(dev);
                if let Some(n) = max_log2 {
                    config = config.with_max_log2(n)?;
                }
                config.timing = timing;
                bench::axpy(dev, &config)
            },
        }),
    },
    Operation {
        name: "reduce",
        summary: "every reduction op × dtype, whole-tensor and along an inner, outer and \
                  middle axis, against exact intervals",
        verify: verify::verify_reductions,
        bench: Some(Bench {
            summary: "sum/max/argmax of f32 and bf16, whole-tensor at 2^16 … 2^N elements and \
                      along each axis of a matrix of 2^min(N, 26), GB/s (bytes read) against \
                      the device-to-device copy of the same tensor",
            run: |dev, max_log2, timing| {
                let mut config = ReduceBench::defaults(dev);
                if let Some(n) = max_log2 {
                    config = config.with_max_log2(n)?;
                }
                config.timing = timing;
                bench::reduce(dev, &config)
            },
        }),
    },
];

/// The names of every operation, comma-separated (for messages).
pub fn names() -> String {
    OPERATIONS
        .iter()
        .map(|op| op.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The operation called `name`; an error listing the known ones otherwise.
pub fn operation(name: &str) -> Result<&'static Operation> {
    OPERATIONS
        .iter()
        .find(|op| op.name == name)
        .ok_or_else(|| Error::UnknownOperation {
            name: name.to_owned(),
            known: names(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{AXPY, COPY};
    use rand::SeedableRng;

    #[test]
    fn names_are_unique_and_found() {
        for (i, op) in OPERATIONS.iter().enumerate() {
            assert!(
                OPERATIONS[..i].iter().all(|other| other.name != op.name),
                "{} twice",
                op.name
            );
            assert!(std::ptr::eq(operation(op.name).unwrap(), op));
        }
        assert!(matches!(
            operation("Reduce"),
            Err(Error::UnknownOperation { .. })
        ));
    }

    #[test]
    fn every_operation_verifies_at_the_edge_lengths_with_distinct_kernel_names() {
        let dev = Device::emulator();
        let mut rng = StdRng::seed_from_u64(7);
        let mut seen: Vec<&str> = Vec::new();
        for op in OPERATIONS {
            let reports = (op.verify)(&dev, &mut rng, verify::EDGE_LENGTHS).unwrap();
            assert!(!reports.is_empty(), "{}", op.name);
            for r in reports {
                assert!(r.passed(), "{}: {:?}", r.kernel, r.failure);
                assert!(!r.lengths.is_empty(), "{}", r.kernel);
                assert!(!seen.contains(&r.kernel), "{} reported twice", r.kernel);
                seen.push(r.kernel);
            }
        }
        // `verify::run` over the whole registry reports the same kernels, in order.
        let all: Vec<&Operation> = OPERATIONS.iter().collect();
        let run = verify::run(&dev, &all, 7, 0, 0).unwrap();
        let names: Vec<&str> = run.iter().map(|r| r.kernel).collect();
        assert_eq!(names, seen);
    }

    #[test]
    fn the_axpy_bench_moves_three_vectors_against_a_two_vector_copy() {
        let dev = Device::emulator();
        let timing = Timing {
            warmup: 0,
            iters: 1,
            reps: 1,
        };
        let run = operation("axpy").unwrap().bench.as_ref().unwrap().run;
        let report = run(&dev, Some(11), timing).unwrap();
        let cases: Vec<(&str, Vec<usize>)> = report
            .rows
            .iter()
            .map(|r| (r.op, r.shape.clone()))
            .collect();
        assert_eq!(cases, [(COPY, vec![1 << 11]), (AXPY, vec![1 << 11])]);
        assert_eq!(
            report.rows[0].bytes,
            (2 * 4) << 11,
            "copy: read n, write n f32"
        );
        assert_eq!(
            report.rows[1].bytes,
            (3 * 4) << 11,
            "axpy: read x and y, write y"
        );
        assert_eq!(report.rows[1].anchor_gbps, report.rows[0].gbps);
        assert!(report.skipped.is_empty());
    }
}
