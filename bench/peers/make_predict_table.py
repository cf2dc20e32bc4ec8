#!/usr/bin/env python3
"""The table of bench/peers/run_peers.sh predict: bnn-serve's Predict and
the PyTorch peer per case, precision and thread count, from the JSON files
in OUT_DIR (bnn_threads<T>.json: Google Benchmark; torch_threads<T>.json:
torch_predict.py). Times are the medians of the repetitions, in ms; the
peer's is its faster forward formulation; "ratio" = PyTorch / bnn-serve.

  make_predict_table.py OUT_DIR > OUT_DIR/predict_peers.md
"""
import glob
import json
import os
import re
import sys


def bnn_medians(path):
    """(net, rows, samples, warm, dtype) -> median real time in ms."""
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
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
            out[key] = b["real_time"] * scale
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
    print("| net | rows | S | samples | precision | threads | bnn-serve | PyTorch (forward) | ratio |")
    print("|---|---:|---:|---|---|---:|---:|---:|---:|")
    for t in threads:
        bnn = bnn_medians(os.path.join(out_dir, f"bnn_threads{t}.json"))
        peer = torch_medians(os.path.join(out_dir, f"torch_threads{t}.json"))
        for key in sorted(peer, key=lambda k: (k[0], k[4], k[3], k[1])):
            net, rows, samples, warm, dtype = key
            if key not in bnn:
                continue
            ms, how = peer[key]
            print(f"| {net} | {rows} | {samples} | {'cached' if warm else 'drawn'} "
                  f"| {dtype} | {t} | {bnn[key]:.3f} | {ms:.3f} ({how}) "
                  f"| {ms / bnn[key]:.1f}x |")


if __name__ == "__main__":
    main()
