#!/usr/bin/env python3
"""The table of bench/peers/run_peers.sh predict: bnn-serve's Predict and
the PyTorch peer per case, precision and thread count, from the JSON files
in OUT_DIR (bnn_threads<T>.json: Google Benchmark; torch_threads<T>.json:
torch_predict.py). Times are the medians of the repetitions, in ms; the
peer's is its faster forward formulation; "ratio" = PyTorch / bnn-serve.
"GEMM %" = the forward pass's GFLOP/s (BM_Predict's counter: the layer
GEMMs' flops) over BM_GemmRate's n = 2048 rate at that precision and thread
count, measured in the same run (issue 15's "% of the float GEMM rate").

  make_predict_table.py OUT_DIR > OUT_DIR/predict_peers.md
"""
import glob
import json
import os
import re
import sys


def bnn_medians(path):
    """(net, rows, samples, warm, dtype) -> (median real time in ms, median
    GFLOP/s or None), and "gemm_<dtype>" -> median BM_GemmRate GFLOP/s."""
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        g = re.match(r"BM_GemmRate<(float|double)>/", name)
        if g:
            dtype = "float32" if g.group(1) == "float" else "float64"
            out["gemm_" + dtype] = b["GFLOP/s"]
            continue
        m = re.match(r"BM_Predict(Cold)?/([A-Za-z0-9_]+?)(_float32)?/(.*)", name)
        if not m:
            continue
        cold, net, f32, args = m.groups()
        fields = dict(kv.split(":") for kv in args.split("/") if ":" in kv)
        dtype = "float32" if f32 else "float64"
        if cold:
            key = (net, 1, int(fields["samples"]), False, dtype)
        else:
            key = (net, int(fields["rows"]), 64, fields["warm"] == "1", dtype)
        scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b["time_unit"]]
        # BM_PredictCold (cache_samples = false, what the server does for a
        # request without a seed) over BM_Predict's cold case of that size.
        if cold or key not in out:
            out[key] = (b["real_time"] * scale, b.get("GFLOP/s"))
    return out


def torch_medians(path):
    out = {}
    for r in json.load(open(path))["results"]:
        key = (r["net"], r["rows"], r["samples"], r["warm"], r["dtype"])
        best = out.get(key)
        if best is None or r["ms_median"] < best[0]:
            out[key] = (r["ms_median"], r["first_layer"])
    return out


def main():
    out_dir = sys.argv[1]
    threads = sorted(int(re.search(r"(\d+)", os.path.basename(p)).group(1))
                     for p in glob.glob(os.path.join(out_dir, "bnn_threads*.json")))
    meta = json.load(open(os.path.join(out_dir, f"torch_threads{threads[0]}.json")))
    blas = [os.path.basename(lib) for lib in meta["blas"].split()
            if "openblas" in os.path.basename(lib)] or [meta["blas"]]
    print(f"PyTorch {meta['torch']} on {' '.join(blas)}; medians of 3 "
          "repetitions, ms; ratio = PyTorch / bnn-serve.\n")
    print("| net | rows | S | samples | precision | threads | bnn-serve | PyTorch (forward) | ratio | GEMM % |")
    print("|---|---:|---:|---|---|---:|---:|---:|---:|---:|")
    gemm_rates = []
    for t in threads:
        bnn = bnn_medians(os.path.join(out_dir, f"bnn_threads{t}.json"))
        for dtype in ("float32", "float64"):
            if "gemm_" + dtype in bnn:
                gemm_rates.append(f"{dtype} {bnn['gemm_' + dtype]:.1f} GFLOP/s "
                                  f"on {t} thread(s)")
        peer = torch_medians(os.path.join(out_dir, f"torch_threads{t}.json"))
        for key in sorted(peer, key=lambda k: (k[0], k[4], k[3], k[1])):
            net, rows, samples, warm, dtype = key
            if key not in bnn:
                continue
            ms, how = peer[key]
            bnn_ms, gflops = bnn[key]
            gemm = bnn.get("gemm_" + dtype)
            # Only the cached passes are pure forward passes; a drawn
            # request's time is mostly sampling.
            share = (f"{100 * gflops / gemm:.0f}%"
                     if warm and gflops and gemm else "")
            print(f"| {net} | {rows} | {samples} | {'cached' if warm else 'drawn'} "
                  f"| {dtype} | {t} | {bnn_ms:.3f} | {ms:.3f} ({how}) "
                  f"| {ms / bnn_ms:.1f}x | {share} |")
    if gemm_rates:
        print("\nGEMM rate (BM_GemmRate, 2048^3, same run): "
              + "; ".join(gemm_rates) + ".")


if __name__ == "__main__":
    main()
