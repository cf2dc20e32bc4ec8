#!/usr/bin/env python3
"""SLANG Table 5 (docs/results/slang/table5.md): SLANG-OnlineEig on the UCI
sets, from the JSON records in docs/results/slang/table2/ (OnlineEig beside
this repository's SLANG and BBB runs of Table 2, same protocol), with the
paper's values (reference/slang.md). Datasets without an OnlineEig record
yet are listed as not run. Run from the repository root."""
import json
import os

PAPER = {  # Table 5: RMSE BBB, Dropout, OnlineEig; LL BBB, Dropout, OnlineEig
    "boston": (4.04, 2.97, 3.17, -2.75, -2.46, -2.61),
    "concrete": (6.16, 5.23, 5.79, -3.22, -3.04, -3.19),
    "energy": (0.86, 1.66, 0.59, -1.20, -1.99, -1.05),
    "kin8nm": (0.09, 0.10, 0.08, 0.97, 0.95, 1.13),
    "wine-red": (0.66, 0.62, 0.64, -0.99, -0.93, -0.98),
    "yacht": (1.07, 1.11, 0.72, -1.45, -1.55, -1.41),
}
DIR = "docs/results/slang/table2"


def cell(record, metric):
    if record is None:
        return "not run"
    m = record["metrics"][metric]
    return f"{m['mean']:.3f} ± {m['se']:.3f}"


def load(dataset, method):
    path = os.path.join(DIR, f"{dataset}_{method}.json")
    return json.load(open(path)) if os.path.exists(path) else None


print("| dataset | splits | RMSE OnlineEig | paper | RMSE SLANG (ours) | RMSE BBB (ours) "
      "| LL OnlineEig | paper | LL SLANG (ours) | LL BBB (ours) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for dataset, paper in PAPER.items():
    oe, slang, bbb = (load(dataset, m) for m in ("slang_online_eig", "slang", "bbb"))
    splits = len(oe["splits"]) if oe else "-"
    print(f"| {dataset} | {splits} | {cell(oe, 'rmse')} | {paper[2]:.2f} | "
          f"{cell(slang, 'rmse')} | {cell(bbb, 'rmse')} | {cell(oe, 'test_ll')} | "
          f"{paper[5]:.2f} | {cell(slang, 'test_ll')} | {cell(bbb, 'test_ll')} |")
