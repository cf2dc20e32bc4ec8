#!/usr/bin/env python3
"""Builds docs/results/nng/table1.md from table1_template.md and the JSON
records of run_table1.sh (and BBB from the SLANG Table 2 runs). Paper
numbers: reference/nng.md §7, Table 1.  Usage: python3 make_report.py"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import uci_report  # noqa: E402

DATASETS = [("boston", "Boston"), ("concrete", "Concrete"),
            ("energy", "Energy"), ("kin8nm", "Kin8nm"),
            ("wine-red", "Wine"), ("yacht", "Yacht")]
PAPER = {  # Table 1, (RMSE, test LL) as printed
    "ffg": {"boston": ("3.031±0.155", "-2.558±0.032"),
            "concrete": ("5.613±0.113", "-3.145±0.023"),
            "energy": ("0.839±0.046", "-1.629±0.020"),
            "kin8nm": ("0.079±0.001", "1.112±0.008"),
            "wine-red": ("0.644±0.011", "-0.976±0.016"),
            "yacht": ("1.289±0.069", "-2.412±0.006")},
    "mvg": {"boston": ("2.742±0.125", "-2.446±0.029"),
            "concrete": ("5.019±0.127", "-3.039±0.025"),
            "energy": ("0.485±0.023", "-1.421±0.005"),
            "kin8nm": ("0.076±0.001", "1.148±0.007"),
            "wine-red": ("0.637±0.011", "-0.969±0.014"),
            "yacht": ("0.979±0.077", "-2.316±0.006")},
    "bbb": {"boston": ("3.171±0.149", "-2.602±0.031"),
            "concrete": ("5.678±0.087", "-3.149±0.018"),
            "energy": ("0.565±0.018", "-1.500±0.006"),
            "kin8nm": ("0.080±0.001", "1.111±0.007"),
            "wine-red": ("0.643±0.012", "-0.977±0.017"),
            "yacht": ("1.174±0.086", "-2.408±0.007")},
}


def paper(key):
    return {d: {"rmse": r, "test_ll": ll} for d, (r, ll) in PAPER[key].items()}


def main():
    table = uci_report.uci_table(
        os.path.join(HERE), DATASETS,
        [("NNG-FFG (noisy_adam)", "table1/{}_noisy_adam.json", paper("ffg")),
         ("NNG-MVG (noisy_kfac)", "table1/{}_noisy_kfac.json", paper("mvg")),
         ("BBB (SLANG protocol)", "../slang/table2/{}_bbb.json", paper("bbb"))])
    uci_report.fill(os.path.join(HERE, "table1_template.md"),
                    os.path.join(HERE, "table1.md"), {"table1": table})
    print(uci_report.count_marks(table))


if __name__ == "__main__":
    main()
