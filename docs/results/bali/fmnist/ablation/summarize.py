#!/usr/bin/python3
"""Table of the BALI F-MNIST ablations (run_fmnist_ablations.sh records).

Usage: summarize.py [DIR] > summary.md   (DIR: this folder by default)

One row per record: the ablation's flags as recorded, the iteration count,
the final test accuracy / NLL / ECE (128 samples), the final training NLL
(16 samples, 10,000 fixed training rows) and the best test NLL of the
learning curve with its step. The literal run of the main table
(../classify_bali.json, 4,000 iterations) is the first row.
"""
import json
import pathlib
import sys


def row(name, path):
    record = json.loads(path.read_text())
    split = record["splits"][0]
    curve = split["learning_curve"]
    metrics = split["metrics"]
    best = min(range(len(curve["step"])), key=lambda i: curve["test_nll"][i])
    return (f"| {name} | {record['config'].get('iterations', '?')} | "
            f"{metrics['accuracy']:.4f} | {metrics['nll']:.4f} | "
            f"{metrics['ece']:.4f} | {curve['train_nll'][-1]:.3f} | "
            f"{curve['test_nll'][best]:.3f} at {curve['step'][best]} | "
            f"{split['train_seconds']:.0f} |")


def main():
    here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                        pathlib.Path(__file__).parent)
    print("| ablation | iterations | accuracy | NLL | ECE | train NLL "
          "(end) | best test NLL | train s |")
    print("|---|---|---|---|---|---|---|---|")
    print(row("literal (main run)", here.parent / "classify_bali.json"))
    for path in sorted(here.glob("*.json")):
        print(row(path.stem, path))


if __name__ == "__main__":
    main()
