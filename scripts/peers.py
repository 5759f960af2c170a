#!/usr/bin/env python3
"""The peers of warpforge's benchmarks on the same GPU, in the same session.

PyTorch (cuBLAS, cuDNN through its graph API with `benchmark=True`) and, where
CuPy is installed, CUB: the figures a reader compares warpforge with, timed
with CUDA events (median of 7 x 10 calls after 3 warm-ups). The GPU suite runs
it beside `warpforge bench` (scripts/gpu-suite); it needs python3 with torch.

    peers.py [--json OUT.json] [--check-conv-anchor BENCH-CONV2D.json]

--check-conv-anchor: the conv2d bench's anchor (cuDNN's graph API, the
`cudnn` rows of NHWC f16) must reach at least 0.90 of PyTorch's cuDNN on
every layer both measured; exit 1 otherwise (issue 49: an anchor a reader
can trust). The layer list is the bench's (tools/src/bench/conv2d.rs,
RESNET50; cli/tests/suite/gpu_suite.rs checks they agree).
"""

import argparse
import json
import statistics
import sys

# (name, C, H=W, K, R=S, stride, groups) at batch 32: warpforge_tools's RESNET50.
RESNET50 = [
    ("conv1 7x7/2", 3, 224, 64, 7, 2, 1),
    ("res2 3x3", 64, 56, 64, 3, 1, 1),
    ("res3 3x3", 128, 28, 128, 3, 1, 1),
    ("res4 3x3", 256, 14, 256, 3, 1, 1),
    ("res5 3x3", 512, 7, 512, 3, 1, 1),
    ("res2 1x1 reduce", 256, 56, 64, 1, 1, 1),
    ("res2 1x1 expand", 64, 56, 256, 1, 1, 1),
    ("res3 1x1 reduce", 512, 28, 128, 1, 1, 1),
    ("res3 1x1 expand", 128, 28, 512, 1, 1, 1),
    ("res4 1x1 reduce", 1024, 14, 256, 1, 1, 1),
    ("res4 1x1 expand", 256, 14, 1024, 1, 1, 1),
    ("res5 1x1 reduce", 2048, 7, 512, 1, 1, 1),
    ("res5 1x1 expand", 512, 7, 2048, 1, 1, 1),
    ("dw 3x3", 256, 56, 256, 3, 1, 256),
]
BATCH = 32
GEMMS = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 4096, 11008), (8192, 1024, 4096),
         (128, 4096, 4096), (2048, 2048, 2048)]
REDUCE_LOG2 = [16, 20, 24, 26, 28]
# The anchor must reach this fraction of PyTorch's cuDNN.
ANCHOR_FLOOR = 0.90


def timed(torch, fn, warmup=3, reps=7, iters=10):
    """Median seconds per call of fn(), timed with events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / iters)
    return statistics.median(samples)


def conv_peers(torch, out):
    torch.backends.cudnn.benchmark = True
    rows = []
    print("== conv2d: cuDNN via PyTorch, batch 32, benchmark=True", file=out)
    configs = [("nhwc", torch.float16, torch.channels_last), ("nchw", torch.float32, torch.contiguous_format)]
    for layout, dtype, fmt in configs:
        for name, c, hw, k, rs, stride, groups in RESNET50:
            conv = torch.nn.Conv2d(c, k, rs, stride=stride, padding=rs // 2, groups=groups, bias=False)
            conv = conv.to("cuda", dtype).to(memory_format=fmt)
            x = torch.randn(BATCH, c, hw, hw, device="cuda", dtype=dtype).to(memory_format=fmt)
            with torch.no_grad():
                y = conv(x)
                s = timed(torch, lambda: conv(x))
            p = y.shape[2]
            flops = 2 * BATCH * p * p * k * (c // groups) * rs * rs
            moved = (x.numel() + conv.weight.numel() + y.numel()) * x.element_size()
            rows.append({"layer": name, "layout": layout, "dtype": str(dtype).replace("torch.", ""),
                         "seconds": s, "tflops": flops / s / 1e12, "gbps": moved / s / 1e9})
            print(f"{layout} {rows[-1]['dtype']:8} {name:18} {s * 1e6:9.1f} us {flops / s / 1e12:8.1f} TF/s "
                  f"{moved / s / 1e9:8.1f} GB/s", file=out)
    return rows


def gemm_peers(torch, out):
    rows = []
    print("== GEMM: cuBLAS via PyTorch", file=out)
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64, "tf32"):
        for m, n, k in GEMMS:
            torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
            dt = torch.float32 if dtype == "tf32" else dtype
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(k, n, device="cuda", dtype=dt)
            s = timed(torch, lambda: a @ b)
            name = "tf32" if dtype == "tf32" else str(dtype).replace("torch.", "")
            rows.append({"dtype": name, "shape": [m, n, k], "seconds": s, "tflops": 2 * m * n * k / s / 1e12})
            print(f"{name:9} {m}x{n}x{k:<6} {s * 1e3:9.4f} ms {rows[-1]['tflops']:8.1f} TF/s", file=out)
    torch.backends.cuda.matmul.allow_tf32 = False
    return rows


def reduce_peers(torch, out):
    rows = []
    print("== reductions: PyTorch and CuPy/CUB (GB/s of the input; copy: a device copy's GB/s of in+out)", file=out)
    try:
        import cupy
    except ImportError:
        cupy = None
    for log2 in REDUCE_LOG2:
        n = 1 << log2
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(n, device="cuda", dtype=dtype)
            y = torch.empty_like(x)
            copy = timed(torch, lambda: y.copy_(x))
            for op in ("sum", "max", "argmax"):
                s = timed(torch, getattr(x, op))
                rows.append({"lib": "torch", "op": op, "dtype": str(dtype).replace("torch.", ""), "n": n,
                             "seconds": s, "gbps": x.nbytes / s / 1e9, "copy_gbps": 2 * x.nbytes / copy / 1e9})
            if cupy is not None and dtype == torch.float32:
                cx = cupy.asarray(x)
                s = timed(torch, lambda: cupy.sum(cx))
                rows.append({"lib": "cupy-cub", "op": "sum", "dtype": "float32", "n": n, "seconds": s,
                             "gbps": x.nbytes / s / 1e9, "copy_gbps": 2 * x.nbytes / copy / 1e9})
    m = torch.randn(8192, 8192, device="cuda")
    for axis, label in ((1, "sum-rows"), (0, "sum-cols")):
        s = timed(torch, lambda: m.sum(dim=axis))
        rows.append({"lib": "torch", "op": label, "dtype": "float32", "n": m.numel(), "seconds": s,
                     "gbps": m.nbytes / s / 1e9})
    for r in rows:
        print(f"{r['lib']:9} {r['op']:9} {r['dtype']:9} {r['n']:>10} {r['seconds'] * 1e3:9.4f} ms "
              f"{r['gbps']:8.1f} GB/s", file=out)
    return rows


def check_conv_anchor(bench_json, conv_rows, out):
    """Failures: layers whose NHWC f16 graph-API anchor is below ANCHOR_FLOOR of PyTorch's cuDNN."""
    with open(bench_json) as f:
        records = json.load(f)["records"]
    torch_rate = {r["layer"]: r["tflops"] for r in conv_rows if r["layout"] == "nhwc"}
    failures, compared = [], 0
    print("== the conv2d bench's cuDNN anchor (graph API) against PyTorch's cuDNN, NHWC f16", file=out)
    for r in records:
        if r["kernel"] != "cudnn" or " nhwc cudnn " not in r["case"] or r.get("tflops") is None:
            continue
        layer = r["case"].split(" nhwc cudnn ")[0]
        if layer not in torch_rate:
            continue
        compared += 1
        ratio = r["tflops"] / torch_rate[layer]
        verdict = "ok" if ratio >= ANCHOR_FLOOR else f"BELOW {ANCHOR_FLOOR:.2f}"
        print(f"{layer:18} anchor {r['tflops']:8.1f} TF/s  torch {torch_rate[layer]:8.1f}  {ratio:5.2f}  {verdict}",
              file=out)
        if ratio < ANCHOR_FLOOR:
            failures.append(layer)
    if compared == 0:
        failures.append(f"no NHWC f16 cudnn rows in {bench_json} (anchor not measured?)")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="also write the figures as JSON here")
    parser.add_argument("--check-conv-anchor", metavar="BENCH_CONV2D_JSON")
    parser.add_argument("--only", choices=["conv", "gemm", "reduce"], action="append")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("peers: torch is not importable by this python3", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("peers: torch sees no CUDA GPU", file=sys.stderr)
        return 3
    out = sys.stdout
    only = set(args.only or ["conv", "gemm", "reduce"])
    if args.check_conv_anchor:
        only.add("conv")
    print(f"# PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}: events, median of 7 x 10 after 3 warm-ups", file=out)
    result = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
              "gpu": torch.cuda.get_device_name()}
    if "conv" in only:
        result["conv"] = conv_peers(torch, out)
    if "gemm" in only:
        result["gemm"] = gemm_peers(torch, out)
    if "reduce" in only:
        result["reduce"] = reduce_peers(torch, out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.check_conv_anchor:
        failures = check_conv_anchor(args.check_conv_anchor, result["conv"], out)
        if failures:
            print(f"peers: the cuDNN anchor is below {ANCHOR_FLOOR:.2f} of PyTorch's on: {', '.join(failures)}",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
