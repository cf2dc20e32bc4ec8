#!/usr/bin/env python3
"""The table of bench/peers/run_peers.sh slang: bnn-serve's SLANG step and
the PyTorch peer per case, precision and thread count, from the JSON files
in OUT_DIR (slang_bnn_threads<T>.json: Google Benchmark's SlangStep cases;
slang_torch_threads<T>.json: torch_slang_step.py). Times are the medians of
the repetitions, in ms per step; "ratio" = PyTorch / bnn-serve.

The peer is the authors' algorithm, SLANG with the randomized fast_eig, so
its like-for-like bnn-serve case is SlangStep/<precision>/randomized/<case>
(same eigensolver, same precision, same sizes); the default configuration
(SlangStep/default/<case>: eig_solver=auto, precision=auto, bnn-serve's own
thread policy) and the exact eigensolver at the same precision are shown
beside it for reference.

  make_slang_table.py OUT_DIR > OUT_DIR/slang_peers.md
"""
import glob
import json
import os
import re
import sys

# Google Benchmark run names, from bnn_perf_bench --benchmark_list_tests:
#   SlangStep/default/<case>[/iterations:5]/real_time
#   SlangStep/<float64|float32>/<randomized|exact>/<case>[/iterations:5]/real_time
NAME = re.compile(r"SlangStep/(?:(default)|(float64|float32)/(randomized|exact))"
                  r"/([A-Za-z0-9_]+)(?:/.*)?$")


def bnn_medians(path):
    """(case, config) -> median real time in ms, config "default" or
    (dtype, solver)."""
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        m = NAME.match(b["run_name"])
        if not m:
            continue
        default, dtype, solver, case = m.groups()
        scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b["time_unit"]]
        out[(case, "default" if default else (dtype, solver))] = (
            b["real_time"] * scale)
    return out


def torch_medians(path):
    return {(r["case"], r["dtype"]): r["ms_median"]
            for r in json.load(open(path))["results"]}


def fmt(ms):
    return "—" if ms is None else f"{ms:.3f}"


def main():
    out_dir = sys.argv[1]
    threads = sorted(
        int(re.search(r"threads(\d+)", os.path.basename(p)).group(1))
        for p in glob.glob(os.path.join(out_dir, "slang_bnn_threads*.json")))
    meta = json.load(open(os.path.join(out_dir,
                                       f"slang_torch_threads{threads[0]}.json")))
    blas = [os.path.basename(lib) for lib in meta["blas"].split()
            if "openblas" in os.path.basename(lib)] or [meta["blas"]]
    print(f"One SLANG step: PyTorch {meta['torch']} on {' '.join(blas)} "
          "(bench/peers/torch_slang_step.py, the authors' algorithm: "
          "randomized fast_eig, K = L + 2 probes, 4 power iterations) against "
          "bnn-serve's SlangStep/<precision>/randomized/<case>, the same "
          "eigensolver at the same precision; medians of 3 repetitions, ms "
          "per step; ratio = PyTorch / bnn-serve (randomized). For "
          "reference: bnn-serve's exact eigensolver at that precision, and "
          "its default configuration (eig_solver=auto, precision=auto, its "
          "own thread policy; the same figure on both precision rows).\n")
    print("| case | precision | threads | bnn-serve randomized | PyTorch "
          "| ratio | bnn-serve exact | bnn-serve default | PyTorch / default |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for t in threads:
        bnn = bnn_medians(os.path.join(out_dir, f"slang_bnn_threads{t}.json"))
        peer = torch_medians(os.path.join(out_dir,
                                          f"slang_torch_threads{t}.json"))
        for case, dtype in sorted(peer):
            ms = peer[(case, dtype)]
            same = bnn.get((case, (dtype, "randomized")))
            exact = bnn.get((case, (dtype, "exact")))
            default = bnn.get((case, "default"))
            if same is None and default is None:
                continue
            ratio = f"{ms / same:.1f}x" if same else "—"
            ratio_default = f"{ms / default:.1f}x" if default else "—"
            print(f"| {case} | {dtype} | {t} | {fmt(same)} | {fmt(ms)} "
                  f"| {ratio} | {fmt(exact)} | {fmt(default)} "
                  f"| {ratio_default} |")


if __name__ == "__main__":
    main()
