#!/usr/bin/env python3
"""Builds docs/results/nng/table3.md from table3_template.md and the JSON
records that `bnn-experiment active-learning` wrote under table3/
(run_table3.sh).

Each <!-- TABLE:name --> marker in the template is replaced by a generated
Markdown table that puts our mean +- s.e. beside the paper's (reference/
nng.md §7, Tables 3 and 4) and marks the cell:
  match   |ours - paper| <= 2 * max(se_ours, se_paper)
  better  otherwise, and ours is better (lower RMSE / higher correlation)
  worse   otherwise.
A missing run is shown as "not run".

Usage: python3 make_table3.py [DIR]   (DIR defaults to this script's folder)
"""
import json
import math
import os
import sys

HERE = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
    os.path.abspath(__file__))
RUNS = os.path.join(HERE, "table3")

DATASETS = [("boston", "Boston"), ("concrete", "Concrete"),
            ("energy", "Energy"), ("kin8nm", "Kin8nm"),
            ("wine-red", "Wine"), ("yacht", "Yacht")]
METHODS = [("noisy_adam", "NNG-FFG"), ("noisy_kfac", "NNG-MVG")]

# Table 3 (mean, se): (NNG-FFG_R, NNG-FFG_A, NNG-MVG_R, NNG-MVG_A, HMC_R,
# HMC_A).
T3_PAPER = {
    "Boston": [(5.911, 0.250), (5.435, 0.132), (5.831, 0.177), (5.220, 0.132),
               (5.750, 0.222), (5.156, 0.150)],
    "Concrete": [(12.583, 0.168), (12.563, 0.142), (12.301, 0.203),
                 (11.671, 0.175), (10.564, 0.198), (11.484, 0.191)],
    "Energy": [(4.011, 0.087), (3.761, 0.068), (3.635, 0.084), (3.211, 0.076),
               (3.264, 0.067), (3.118, 0.062)],
    "Kin8nm": [(0.246, 0.004), (0.252, 0.003), (0.243, 0.003), (0.244, 0.003),
               (0.226, 0.004), (0.223, 0.003)],
    "Wine": [(0.730, 0.011), (0.748, 0.008), (0.752, 0.014), (0.746, 0.009),
             (0.740, 0.011), (0.749, 0.010)],
    "Yacht": [(7.381, 0.309), (6.583, 0.264), (7.192, 0.280), (6.371, 0.204),
              (4.644, 0.237), (3.211, 0.120)],
}
# Table 4 (mean, se): (PBP, NNG-FFG, NNG-MVG, NNG-BlkTri).
T4_PAPER = {
    "Boston": [(0.761, 0.032), (0.718, 0.035), (0.891, 0.021), (0.889, 0.024)],
    "Concrete": [(0.817, 0.028), (0.811, 0.028), (0.913, 0.010),
                 (0.922, 0.006)],
    "Energy": [(0.471, 0.076), (0.438, 0.075), (0.617, 0.087), (0.646, 0.088)],
    "Kin8nm": [(0.587, 0.021), (0.659, 0.015), (0.731, 0.021), (0.759, 0.023)],
    "Wine": [(0.883, 0.042), (0.918, 0.014), (0.957, 0.009), (0.964, 0.006)],
    "Yacht": [(0.620, 0.053), (0.597, 0.063), (0.717, 0.072), (0.727, 0.070)],
}


def load(dataset, method, acquisition):
    path = os.path.join(RUNS, f"{dataset}_{method}_{acquisition}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def fmt(mean, se, digits=3):
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


COUNTS = {}  # table -> {mark: cells}


def mark(ours, ours_se, paper, paper_se, higher_is_better):
    if abs(ours - paper) <= 2 * max(ours_se, paper_se):
        return "match"
    better = ours > paper if higher_is_better else ours < paper
    return "better" if better else "worse"


def count(table, m):
    COUNTS.setdefault(table, {}).setdefault(m, 0)
    COUNTS[table][m] += 1
    return m


def metric(run, name):
    m = run["metrics"].get(name)
    if m is None or m["mean"] is None or not math.isfinite(m["mean"]):
        return None
    return m["mean"], m["se"], len([v for v in m["per_split"]
                                    if v is not None and math.isfinite(v)])


def digits_for(paper_mean):
    return 3 if paper_mean >= 0.1 else 4


def table3():
    rows = ["| dataset | method | acq. | splits | ours: final RMSE | paper | "
            "mark | ours: mean over rounds |",
            "|---|---|---|---|---|---|---|---|"]
    for folder, name in DATASETS:
        for m, (method, label) in enumerate(METHODS):
            for a, (acquisition, suffix) in enumerate(
                    [("random", "R"), ("max_variance", "A")]):
                paper = T3_PAPER[name][2 * m + a]
                d = digits_for(paper[0])
                run = load(folder, method, acquisition)
                cell = f"| {name} | {label} | _{suffix} |"
                if run is None:
                    rows.append(cell + f" 0 | not run | {fmt(*paper, d)} | | |")
                    continue
                mean, se, n = metric(run, "rmse")
                avg = metric(run, "rmse_mean_rounds")
                rows.append(
                    cell + f" {n} | {fmt(mean, se, d)} | {fmt(*paper, d)} | "
                    f"{count('Table 3', mark(mean, se, *paper, False))} | "
                    f"{fmt(avg[0], avg[1], d)} |")
    return "\n".join(rows)


def paired():
    """max_variance minus random, per split (same partitions and seeds)."""
    rows = ["| dataset | method | splits | ours: RMSE_A - RMSE_R | paper: "
            "A - R |", "|---|---|---|---|---|"]
    for folder, name in DATASETS:
        for m, (method, label) in enumerate(METHODS):
            a = load(folder, method, "max_variance")
            r = load(folder, method, "random")
            paper = T3_PAPER[name][2 * m + 1][0] - T3_PAPER[name][2 * m][0]
            d = digits_for(abs(T3_PAPER[name][2 * m][0]))
            if a is None or r is None:
                rows.append(f"| {name} | {label} | 0 | not run | "
                            f"{paper:+.{d}f} |")
                continue
            diffs = [x - y for x, y in zip(a["metrics"]["rmse"]["per_split"],
                                           r["metrics"]["rmse"]["per_split"])]
            n = len(diffs)
            mean = sum(diffs) / n
            se = (math.sqrt(sum((v - mean) ** 2 for v in diffs) / (n - 1) / n)
                  if n > 1 else 0.0)
            wins = sum(v < 0 for v in diffs)
            rows.append(f"| {name} | {label} | {n} | {mean:+.{d}f} ± "
                        f"{se:.{d}f} (A better on {wins}/{n}) | "
                        f"{paper:+.{d}f} |")
    return "\n".join(rows)


def table4():
    rows = ["| dataset | method | splits | ours: ρ, 20 labelled (Table 4 "
            "trial) | paper | mark | ours: ρ, 30 labelled (after A) |",
            "|---|---|---|---|---|---|---|"]
    for folder, name in DATASETS:
        for m, (method, label) in enumerate(METHODS):
            paper = T4_PAPER[name][1 + m]
            run = load(folder, method, "max_variance")
            cell = f"| {name} | {label} |"
            got = None if run is None else metric(run, "pearson_hmc_initial")
            if got is None:
                rows.append(cell + f" 0 | not run | {fmt(*paper)} | | |")
                continue
            mean, se, n = got
            final = metric(run, "pearson_hmc")
            rows.append(cell + f" {n} | {fmt(mean, se)} | {fmt(*paper)} | "
                        f"{count('Table 4', mark(mean, se, *paper, True))} | "
                        f"{fmt(final[0], final[1]) if final else 'n/a'} |")
    return "\n".join(rows)


def final_tau(run):
    """The noise precision of the last fit (E_q[tau] when fitted, the fixed
    tau otherwise), in standardised units, averaged over the trials."""
    taus = [split["rounds"][-1]["noise_precision"] for split in run["splits"]]
    return sum(taus) / len(taus)


def diagnostics():
    """Reruns of single cells with one setting changed (table3/diagnostics/,
    named <dataset>_<method>_<acquisition>_<change>.json)."""
    folder = os.path.join(RUNS, "diagnostics")
    rows = ["| run | change | splits | ours: final RMSE | main run | paper | "
            "mark | E_q[τ] final fit (main run) |",
            "|---|---|---|---|---|---|---|---|"]
    names = dict(DATASETS)
    labels = dict(METHODS)
    for file in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if not file.endswith(".json"):
            continue
        with open(os.path.join(folder, file)) as f:
            run = json.load(f)
        c = run["config"]
        dataset, method, acquisition = c["dataset"], c["method"], \
            c["acquisition"]
        change = file[:-5].split(f"{dataset}_{method}_{acquisition}_")[-1]
        m = [k for k, _ in METHODS].index(method)
        a = 1 if acquisition == "max_variance" else 0
        paper = T3_PAPER[names[dataset]][2 * m + a]
        d = digits_for(paper[0])
        mean, se, n = metric(run, "rmse")
        main = load(dataset, method, acquisition)
        main_cell = fmt(*metric(main, "rmse")[:2], d) if main else "not run"
        suffix = "A" if a else "R"
        tau = final_tau(run)
        main_tau = final_tau(main) if main else None
        rows.append(f"| {names[dataset]} {labels[method]}_{suffix} | "
                    f"{change} | {n} | {fmt(mean, se, d)} | {main_cell} | "
                    f"{fmt(*paper, d)} | {mark(mean, se, *paper, False)} | "
                    f"{tau:.2f} ({main_tau:.2f}) |")
    return "\n".join(rows)


def binary_of(run):
    """The commit the record's binary was built from and whether its tree
    was clean (its build block, issue 16), or, for records written before
    binaries recorded their build, the tree's HEAD when the run started."""
    build = run.get("build")
    if build:
        return (f"{build['commit'][:12]} "
                f"({'clean' if build.get('tree_clean') else 'dirty'} build)")
    dirty = ", ".join(run.get("modified_sources", [])) or "clean"
    return f"{run['git_commit'][:12]} (HEAD at start; {dirty})"


def runs():
    rows = ["| run | splits | wall s | binary's commit |", "|---|---|---|---|"]
    total = 0.0
    for folder, _ in DATASETS:
        for method, _ in METHODS:
            for acquisition in ("max_variance", "random"):
                run = load(folder, method, acquisition)
                if run is None:
                    continue
                total += run["wall_seconds"]
                rows.append(f"| {folder}_{method}_{acquisition} | "
                            f"{run['config']['splits_used']} | "
                            f"{run['wall_seconds']:.0f} | "
                            f"{binary_of(run)} |")
    rows.append(f"| total | | {total:.0f} | |")
    return "\n".join(rows)


def counts():
    parts = []
    for table in ("Table 3", "Table 4"):
        c = COUNTS.get(table, {})
        parts.append(f"{table}: {c.get('match', 0)} match, "
                     f"{c.get('better', 0)} better, {c.get('worse', 0)} worse")
    return "; ".join(parts)


def main():
    with open(os.path.join(HERE, "table3_template.md")) as f:
        text = f.read()
    for name, fn in [("t3", table3), ("paired", paired), ("t4", table4),
                     ("diagnostics", diagnostics), ("runs", runs),
                     ("counts", counts)]:
        text = text.replace(f"<!-- TABLE:{name} -->", fn())
    with open(os.path.join(HERE, "table3.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
