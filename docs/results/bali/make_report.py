#!/usr/bin/env python3
"""Builds docs/results/bali/table1.md from table1_template.md and the JSON
records of run_table1.sh. Paper numbers: reference/bali.md §6, Tables 1
(RMSE) and 7 (test LL).  Usage: python3 make_report.py"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import uci_report  # noqa: E402

DATASETS = [("yacht", "Yacht"), ("concrete", "Concrete"),
            ("energy", "Energy"), ("wine-red", "Redwine"),
            ("kin8nm", "Kin8nm"), ("boston", "Boston (not in the paper)")]
PAPER = {  # (RMSE, test LL) as printed
    "bali": {"yacht": ("0.642±0.042", "-0.745±0.033"),
             "concrete": ("4.425±0.153", "-2.976±0.079"),
             "energy": ("0.451±0.016", "-0.610±0.035"),
             "wine-red": ("0.676±0.016", "-1.078±0.033"),
             "kin8nm": ("0.075±0.001", "1.175±0.008")},
    "do": {"yacht": ("0.666±0.049", "-1.250±0.015"),
           "concrete": ("4.826±0.161", "-2.937±0.025"),
           "energy": ("0.539±0.014", "-1.212±0.005"),
           "wine-red": ("0.622±0.008", "-0.928±0.013"),
           "kin8nm": ("0.079±0.001", "1.136±0.007")},
}


def paper(key):
    return {d: {"rmse": r, "test_ll": ll} for d, (r, ll) in PAPER[key].items()}


def main():
    table = uci_report.uci_table(
        HERE, DATASETS,
        [("BALI-W", "table1/{}_bali.json", paper("bali")),
         ("MC dropout", "table1/{}_mc_dropout.json", paper("do"))])
    uci_report.fill(os.path.join(HERE, "table1_template.md"),
                    os.path.join(HERE, "table1.md"), {"table1": table})
    print(uci_report.count_marks(table))


if __name__ == "__main__":
    main()
