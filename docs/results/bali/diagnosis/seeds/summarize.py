#!/usr/bin/env python3
"""Issue 16: BALI-W on concrete, wine-red and boston with three seeds
(seed0..seed2, each made by run_table1.sh with SEED=k METHODS=bali
THREADS=1). Prints, per dataset: each seed's mean test RMSE and LL over the
20 splits; per split, the test RMSE and LL across seeds (mean and range),
the fitted noise std and the training RMSE, so that a split that is bad for
every seed (the data) can be told from one bad for one seed (the run).

  docs/results/bali/diagnosis/seeds/summarize.py [DIR] > DIR/summary.md
"""
import json
import os
import statistics as st
import sys

HERE = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


def load(seed, dataset):
    path = os.path.join(HERE, f"seed{seed}", f"{dataset}_bali.json")
    return json.load(open(path)) if os.path.exists(path) else None


def main():
    print("# BALI-W, three seeds: per-split test RMSE, test LL, fitted noise std and training RMSE\n")
    print("Made by `summarize.py` from seed0/ seed1/ seed2/ (run_table1.sh, SEED=k METHODS=bali THREADS=1).")
    print("Units: the dataset's original target units.\n")
    for dataset in ["concrete", "wine-red", "boston"]:
        runs = {k: load(k, dataset) for k in range(3)}
        runs = {k: r for k, r in runs.items() if r is not None}
        if not runs:
            continue
        print(f"## {dataset}\n")
        print("| seed | splits | mean RMSE ± se | mean test LL ± se | binary's commit |")
        print("|---|---:|---|---|---|")
        for k, r in runs.items():
            rm = [s["metrics"]["rmse"] for s in r["splits"]]
            ll = [s["metrics"]["test_ll"] for s in r["splits"]]
            se = lambda v: st.stdev(v) / len(v) ** 0.5
            print(f"| {k} | {len(rm)} | {st.mean(rm):.3f} ± {se(rm):.3f} | "
                  f"{st.mean(ll):.3f} ± {se(ll):.3f} | {r.get('build', {}).get('commit', '?')} |")
        print()
        print("| split | test RMSE mean (min-max over seeds) | test LL mean (min-max) | noise std (mean) | train RMSE (mean) | test RMSE / noise std |")
        print("|---:|---|---|---:|---:|---:|")
        n = min(len(r["splits"]) for r in runs.values())
        for i in range(n):
            ss = [r["splits"][i] for r in runs.values()]
            rm = [s["metrics"]["rmse"] for s in ss]
            ll = [s["metrics"]["test_ll"] for s in ss]
            ns = st.mean(s["noise_std"] for s in ss)
            tr = st.mean(s["train_rmse"] for s in ss)
            print(f"| {i} | {st.mean(rm):.3f} ({min(rm):.3f}-{max(rm):.3f}) | "
                  f"{st.mean(ll):.3f} ({min(ll):.3f}-{max(ll):.3f}) | {ns:.3f} | "
                  f"{tr:.3f} | {st.mean(rm) / ns:.2f} |")
        print()


if __name__ == "__main__":
    main()
