#!/usr/bin/env python3
"""Replaces committed records by their re-runs (rerun_provenance.sh) and
lists every place a report still quotes an old number. Usage:

  docs/results/swap_reruns.py --group nng/table1 --new OUT/nng_table1 \\
      [--apply] REPORT.md...

For each record docs/results/GROUP/NAME.json with a re-run in --new (named
by rerun.py's record_name: the path under docs/results with "/" replaced by
"_"), every metric's mean and s.e. (with --per-split each split's value
too) are printed as the reports print numbers (3 and 4 decimals, "-" or
"−"; 2 decimals match too much by chance); each old string that the re-run
changes and that occurs in a REPORT is listed with its line, old and new
value. Short numbers still match by chance: the listing is for review. With --apply the re-run's JSON and summary (.md)
replace the committed ones. The tables regenerate from the records
(make_report.py and friends); the listed prose is fixed by hand.
Exit status 0; the listing is the output.
"""
import argparse
import glob
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rerun import record_name  # noqa: E402


def renderings(value):
    """The strings a report may print `value` as, by decimal count."""
    out = {}
    for decimals in (3, 4):
        text = f"{value:.{decimals}f}"
        out[decimals] = {text, text.replace("-", "\u2212")}
    return out


def numbers(record, per_split=False):
    """(label, value) for every metric's mean and s.e. (and per-split
    values)."""
    for name, metric in record.get("metrics", {}).items():
        if not isinstance(metric, dict):
            continue
        for field in ("mean", "se"):
            if isinstance(metric.get(field), (int, float)):
                yield f"{name}.{field}", metric[field]
        for i, v in enumerate(metric.get("per_split") or []
                              if per_split else []):
            if isinstance(v, (int, float)):
                yield f"{name}[split {i}]", v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--group", required=True,
                    help="folder under docs/results, e.g. nng/table1")
    ap.add_argument("--new", required=True, help="the re-runs' folder")
    ap.add_argument("--apply", action="store_true")
    ap.add_argument("--per-split", action="store_true",
                    help="also look for each split's old value")
    ap.add_argument("reports", nargs="*")
    args = ap.parse_args()
    root = os.path.dirname(os.path.abspath(__file__))
    texts = {}
    for path in args.reports:
        with open(path) as f:
            texts[path] = f.read().splitlines()
    swapped = 0
    for path in sorted(glob.glob(os.path.join(root, args.group, "*.json"))):
        rel = os.path.relpath(path, root)
        fresh_path = os.path.join(args.new, record_name(path))
        if not os.path.exists(fresh_path):
            continue
        with open(path) as f:
            old = json.load(f)
        with open(fresh_path) as f:
            new = json.load(f)
        if "build" not in new:
            print(f"{rel}: the re-run has no build block; not swapped")
            continue
        new_values = dict(numbers(new, args.per_split))
        for label, value in numbers(old, args.per_split):
            if label not in new_values:
                continue
            for decimals, old_texts in renderings(value).items():
                new_text = f"{new_values[label]:.{decimals}f}"
                if new_text in old_texts:
                    continue
                for report, lines in texts.items():
                    for n, line in enumerate(lines, 1):
                        for text in old_texts:
                            if re.search(r"(?<![\d.])" + re.escape(text) +
                                         r"(?!\d)", line):
                                print(f"{report}:{n}: {text} -> {new_text} "
                                      f"({rel} {label})")
        if args.apply:
            shutil.copyfile(fresh_path, path)
            summary = fresh_path[:-5] + ".md"
            if os.path.exists(summary) and \
                    os.path.exists(path[:-5] + ".md"):
                shutil.copyfile(summary, path[:-5] + ".md")
            swapped += 1
    if args.apply:
        print(f"{swapped} records replaced in {args.group}")


if __name__ == "__main__":
    main()
