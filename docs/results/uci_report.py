#!/usr/bin/env python3
"""Shared by the NNG and BALI reports: a UCI table that puts our mean +- s.e.
(from bnn-experiment JSON records) beside a paper's numbers and marks each
cell, with the rule of every report under docs/results/:
  match   |ours - paper| <= 2 * max(se_ours, se_paper)
  better  otherwise, and ours is better (lower RMSE / higher log-likelihood)
  worse   otherwise.
The paper's s.e. is floored at half a unit of its last printed digit.
"""
import json
import math
import os


def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def mark(ours, se_ours, paper, se_paper, higher_is_better):
    tolerance = 2 * max(se_ours, se_paper)
    if abs(ours - paper) <= tolerance:
        return "match"
    better = ours > paper if higher_is_better else ours < paper
    return "**better**" if better else "**worse**"


def digits_of(text):
    """Decimals printed in a paper number such as '0.485'."""
    return len(text.split(".")[1]) if "." in text else 0


def cell(run, metric, paper_text):
    """(ours, paper, mark) cells; paper_text is 'mean±se' as printed, or ''."""
    if run is None or metric not in run["metrics"]:
        return ["not run", paper_text.replace("±", " ± ") or "-", ""]
    m = run["metrics"][metric]
    if math.isnan(m["mean"]):
        return ["n/a", paper_text or "-", ""]
    ours = f"{m['mean']:.4g} ± {m['se']:.2g} ({len(m['per_split'])})"
    if not paper_text:
        return [ours, "-", ""]
    mean_text, se_text = paper_text.split("±")
    floor = 0.5 * 10 ** -digits_of(se_text)
    verdict = mark(m["mean"], m["se"], float(mean_text),
                   max(float(se_text), floor), metric != "rmse")
    return [ours, paper_text.replace("±", " ± "), verdict]


def uci_table(folder, datasets, columns):
    """datasets: [(file prefix, shown name)]; columns: [(label, file suffix
    relative to folder/<prefix>_, {prefix: {metric: 'mean±se'}})]."""
    lines = ["| dataset | method | RMSE ours (splits) | RMSE paper | mark | "
             "test LL ours (splits) | test LL paper | mark |",
             "|---|---|---|---|---|---|---|---|"]
    for prefix, name in datasets:
        for label, path_fmt, paper in columns:
            run = load(os.path.join(folder, path_fmt.format(prefix)))
            cells = [name, label]
            for metric in ("rmse", "test_ll"):
                cells += cell(run, metric, paper.get(prefix, {}).get(metric, ""))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def count_marks(text):
    return {k: text.count(k) for k in ("match", "**better**", "**worse**")}


def fill(template_path, out_path, tables):
    with open(template_path) as f:
        text = f.read()
    for name, table in tables.items():
        text = text.replace(f"<!-- TABLE:{name} -->", table)
    with open(out_path, "w") as f:
        f.write(text)
