#!/usr/bin/env python3
"""Builds docs/results/nng/table4.md from table4_template.md and the JSON
records that `bnn-experiment active-learning --rounds 0` wrote under table4/
(run_table4.sh): NNG Table 4, each NNG method's Pearson correlation with one
shared HMC reference per trial.

Markers in the template: <!-- TABLE:table4 --> (ours beside the paper,
marked as make_table3.py marks: match when |ours - paper| <= 2 * max(s.e.),
else better/worse), <!-- TABLE:paired --> (per-trial differences between
methods, possible because all methods share the trials and the reference),
<!-- TABLE:reference --> (the shared HMC runs), <!-- TABLE:runs --> (the
records' provenance) and <!-- COUNTS -->.

Usage: python3 make_table4.py [DIR]   (DIR defaults to this script's folder)
"""
import json
import math
import os
import sys

HERE = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
    os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_table3 import (DATASETS, T4_PAPER, binary_of, fmt,  # noqa: E402
                         mark)

RUNS = os.path.join(HERE, "table4")
# (folder name, label, column of T4_PAPER)
METHODS = [("noisy_adam", "NNG-FFG", 1), ("noisy_kfac", "NNG-MVG", 2),
           ("nng_blktri", "NNG-BlkTri", 3)]
COUNTS = {}


def load(dataset, method, runs=RUNS):
    path = os.path.join(runs, f"{dataset}_{method}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def per_split(run):
    return [s["reference"]["initial"]["pearson"] for s in run["splits"]]


def mean_se(values):
    n = len(values)
    mean = sum(values) / n
    se = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n) \
        if n > 1 else float("nan")
    return mean, se, n


def table4():
    rows = ["| dataset | trials | " + " | ".join(
        f"{label}: ours | paper | mark" for _, label, _ in METHODS) + " |",
        "|---|---|" + "---|---|---|" * len(METHODS)]
    for folder, name in DATASETS:
        cells, trials = [], 0
        for method, _, column in METHODS:
            paper = T4_PAPER[name][column]
            run = load(folder, method)
            if run is None:
                cells.append(f"not run | {fmt(*paper)} |")
                continue
            mean, se, n = mean_se(per_split(run))
            trials = n
            m = mark(mean, se, *paper, True)
            COUNTS[m] = COUNTS.get(m, 0) + 1
            cells.append(f"{fmt(mean, se)} | {fmt(*paper)} | {m}")
        rows.append(f"| {name} | {trials} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def paired():
    pairs = [("nng_blktri", "noisy_kfac", "BlkTri - MVG", 3, 2),
             ("noisy_kfac", "noisy_adam", "MVG - FFG", 2, 1)]
    rows = ["| dataset | difference | trials | ours (paired) | first higher "
            "on | paper (difference of means) |", "|---|---|---|---|---|---|"]
    for folder, name in DATASETS:
        for a, b, label, ca, cb in pairs:
            ra, rb = load(folder, a), load(folder, b)
            if ra is None or rb is None:
                continue
            # The same trials: the same shared reference file per split.
            for sa, sb in zip(ra["splits"], rb["splits"]):
                assert (sa["reference"]["initial"]["reference_file"] ==
                        sb["reference"]["initial"]["reference_file"])
            d = [x - y for x, y in zip(per_split(ra), per_split(rb))]
            mean, se, n = mean_se(d)
            wins = sum(v > 0 for v in d)
            paper = T4_PAPER[name][ca][0] - T4_PAPER[name][cb][0]
            rows.append(f"| {name} | {label} | {n} | {mean:+.3f} ± {se:.3f} | "
                        f"{wins}/{n} | {paper:+.3f} |")
    return "\n".join(rows)


def reference():
    rows = ["| dataset | HMC runs (trained / reused) | HMC test RMSE | HMC mean "
            "variance | " + " | ".join(f"{label} mean variance"
                                       for _, label, _ in METHODS) +
            " | HMC seconds per run |",
            "|---|---|---|---|" + "---|" * len(METHODS) + "---|"]
    for folder, name in DATASETS:
        runs = [load(folder, m) for m, _, _ in METHODS]
        if any(r is None for r in runs):
            continue
        refs = [[s["reference"]["initial"] for s in r["splits"]] for r in runs]
        trained = sum(not x["reference_reused"] for rs in refs for x in rs)
        reused = sum(x["reference_reused"] for rs in refs for x in rs)
        first = refs[0]
        rmse = mean_se([x["reference_rmse"] for x in first])
        var = mean_se([x["reference_mean_variance"] for x in first])
        secs = mean_se([x["reference_seconds"] for x in first])
        methods = [mean_se([x["method_mean_variance"] for x in rs])
                   for rs in refs]
        digits = 3 if var[0] >= 0.1 else 4
        rows.append(
            f"| {name} | {trained} / {reused} | {fmt(rmse[0], rmse[1], digits)}"
            f" | {fmt(var[0], var[1], digits)} | " +
            " | ".join(fmt(m[0], m[1], digits) for m in methods) +
            f" | {secs[0]:.1f} |")
    return "\n".join(rows)


def sensitivity():
    """The same trials against a shared HMC with tau = 2 (table4/tau2/)."""
    rows = ["| dataset | HMC τ | trials | " + " | ".join(
        label for _, label, _ in METHODS) + " | BlkTri - MVG (paired) |",
        "|---|---|---|" + "---|" * len(METHODS) + "---|"]
    for folder, name in DATASETS:
        for tau, runs in [("1", RUNS), ("2", os.path.join(RUNS, "tau2"))]:
            loaded = [load(folder, m, runs) for m, _, _ in METHODS]
            if any(r is None for r in loaded) or not os.path.isdir(
                    os.path.join(RUNS, "tau2")) or load(
                        folder, "noisy_adam", os.path.join(RUNS, "tau2")) is None:
                break
            cells = [fmt(*mean_se(per_split(r))[:2]) for r in loaded]
            d = mean_se([x - y for x, y in zip(per_split(loaded[2]),
                                               per_split(loaded[1]))])
            rows.append(f"| {name} | {tau} | {len(loaded[0]['splits'])} | " +
                        " | ".join(cells) + f" | {d[0]:+.3f} ± {d[1]:.3f} |")
    return "\n".join(rows)


def runs():
    rows = ["| record | trials | wall s | binary's commit |",
            "|---|---|---|---|"]
    records = [(sub, folder, method) for sub in ["", "tau2/"]
               for folder, _ in DATASETS for method, _, _ in METHODS]
    for sub, folder, method in records:
        run = load(folder, method, os.path.join(RUNS, sub))
        if run is None:
            continue
        rows.append(f"| table4/{sub}{folder}_{method}.json | "
                    f"{len(run['splits'])} | {run['wall_seconds']:.0f} | "
                    f"{binary_of(run)} |")
    return "\n".join(rows)


def main():
    with open(os.path.join(HERE, "table4_template.md")) as f:
        text = f.read()
    for marker, fn in [("table4", table4), ("paired", paired),
                       ("reference", reference),
                       ("sensitivity", sensitivity), ("runs", runs)]:
        text = text.replace(f"<!-- TABLE:{marker} -->", fn())
    text = text.replace("<!-- COUNTS -->", ", ".join(
        f"{COUNTS.get(k, 0)} {k}" for k in ("match", "better", "worse")))
    with open(os.path.join(HERE, "table4.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
