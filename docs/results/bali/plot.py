#!/usr/bin/python3
"""Plots the F-MNIST runs of run_fmnist.sh and prints the Markdown tables of
fmnist.md (Debian python3-matplotlib; run with /usr/bin/python3 if another
python3 comes first on PATH).

  convergence.png  test NLL (solid) and NLL on 10,000 random training rows
                   (dashed, when recorded) against iterations for BALI, MC
                   dropout and MAP, plus test accuracy (the paper's Fig. 2)
  ood_roc.png      ROC curves of the predictive entropy (solid) and mutual
                   information (dotted), one panel per OOD set (Fig. 3)
  reliability.png  reliability diagrams (15 equal-width confidence bins)

Usage: plot.py [DIR]   (DIR holds classify_*.json and ood_*.json; default
                        fmnist/ beside this script; PNGs go to DIR/..)
"""
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "fmnist")
OUT = os.path.dirname(os.path.abspath(DIR))

METHODS = [("bali", "BALI-W", "tab:blue"),
           ("mc_dropout", "MC dropout (p = 0.1)", "tab:orange"),
           ("map", "MAP", "tab:green")]
OOD_SETS = [("digits28", "sklearn digits, 8x8 upsampled to 28x28"),
            ("fmnist_permuted", "pixel-permuted F-MNIST test")]
# Table 2, F-MNIST row (reference/bali.md §6): (mean, s.e.).
PAPER = {"bali": {"accuracy": (0.905, 0.001), "ece": (0.008, 0.001)},
         "mc_dropout": {"accuracy": (0.903, 0.000), "ece": (0.008, 0.000)}}
# Half a unit of the paper's last printed digit floors its s.e.
PAPER_SE_FLOOR = 0.0005


def load(name):
    path = os.path.join(DIR, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def mark(ours, paper, higher_is_better):
    (m, se), (pm, pse) = ours, paper
    if abs(m - pm) <= 2 * max(se, pse, PAPER_SE_FLOOR):
        return "match"
    return "better" if (m > pm) == higher_is_better else "worse"


def convergence():
    fig, (ax_nll, ax_acc) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key, label, color in METHODS:
        run = load(f"classify_{key}.json")
        if run is None:
            continue
        curve = run["splits"][0].get("learning_curve")
        if not curve:
            continue
        ax_nll.plot(curve["step"], curve["test_nll"], color=color,
                    label=f"{label} test")
        if "train_nll" in curve:
            ax_nll.plot(curve["step"], curve["train_nll"], color=color,
                        linestyle="--", label=f"{label} train")
        ax_acc.plot(curve["step"], curve["test_accuracy"], color=color,
                    label=label)
    ax_nll.set_xlabel("iteration (minibatch of 2048)")
    ax_nll.set_ylabel("NLL (nats)")
    ax_nll.set_title("F-MNIST: test (solid) / train (dashed) NLL")
    ax_nll.set_ylim(bottom=0)
    ax_nll.legend(fontsize=8)
    ax_acc.set_xlabel("iteration (minibatch of 2048)")
    ax_acc.set_ylabel("test accuracy")
    ax_acc.set_title("F-MNIST: test accuracy")
    ax_acc.legend(fontsize=8)
    for ax in (ax_nll, ax_acc):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "convergence.png"), dpi=120)
    plt.close(fig)


def ood_roc():
    fig, axes = plt.subplots(1, len(OOD_SETS), figsize=(11, 4.6))
    for ax, (set_key, set_label) in zip(axes, OOD_SETS):
        for key, label, color in METHODS:
            run = load(f"ood_{key}_{set_key}.json")
            if run is None:
                continue
            roc = run["splits"][0]["roc"]
            auc = run["metrics"]
            ax.plot(roc["entropy"]["fpr"], roc["entropy"]["tpr"], color=color,
                    label=f"{label}, entropy (AUROC "
                          f"{auc['auroc_entropy']['mean']:.3f})")
            ax.plot(roc["mutual_information"]["fpr"],
                    roc["mutual_information"]["tpr"], color=color,
                    linestyle=":", label=f"{label}, MI (AUROC "
                                         f"{auc['auroc_mi']['mean']:.3f})")
        ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8)
        ax.set_xlabel("false positive rate (F-MNIST test flagged as OOD)")
        ax.set_ylabel("true positive rate (OOD flagged as OOD)")
        ax.set_title(f"OOD: {set_label}", fontsize=10)
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "ood_roc.png"), dpi=120)
    plt.close(fig)


def reliability():
    fig, ax = plt.subplots(figsize=(5, 4.6))
    for key, label, color in METHODS:
        run = load(f"classify_{key}.json")
        if run is None:
            continue
        r = run["splits"][0]["reliability"]
        xs = [c for c, n in zip(r["confidence"], r["count"]) if n > 0]
        ys = [a for a, n in zip(r["accuracy"], r["count"]) if n > 0]
        ax.plot(xs, ys, marker="o", markersize=3, color=color,
                label=f"{label} (ECE {run['metrics']['ece']['mean']:.4f})")
    ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8)
    ax.set_xlabel("confidence (mean of bin)")
    ax.set_ylabel("accuracy")
    ax.set_title("F-MNIST reliability, 15 equal-width bins")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "reliability.png"), dpi=120)
    plt.close(fig)


def fmt(v, digits=4):
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) \
        else f"{v:.{digits}f}"


def tables():
    print("| method | metric | ours | paper (Table 2) | mark |")
    print("|---|---|---|---|---|")
    for key, label, _ in METHODS:
        run = load(f"classify_{key}.json")
        if run is None:
            continue
        m = run["metrics"]
        for metric, higher in (("accuracy", True), ("ece", False)):
            ours = (m[metric]["mean"], m[metric]["se"])
            if key in PAPER:
                paper = PAPER[key][metric]
                print(f"| {label} | {metric} | {fmt(ours[0])} | "
                      f"{paper[0]:.3f} ± {paper[1]:.3f} | "
                      f"{mark(ours, paper, higher)} |")
            else:
                print(f"| {label} | {metric} | {fmt(ours[0])} | — | — |")
    print()
    print("| method | iterations | train s | accuracy | NLL | ECE | Brier |")
    print("|---|---|---|---|---|---|---|")
    for key, label, _ in METHODS:
        run = load(f"classify_{key}.json")
        if run is None:
            continue
        m, s = run["metrics"], run["splits"][0]
        print(f"| {label} | {s['steps']} | {s['train_seconds']:.0f} | "
              f"{fmt(m['accuracy']['mean'])} | {fmt(m['nll']['mean'])} | "
              f"{fmt(m['ece']['mean'])} | {fmt(m['brier']['mean'])} |")
    print()
    print("| method | OOD set | AUROC entropy | AUROC MI | mean H in / OOD |")
    print("|---|---|---|---|---|")
    for set_key, set_label in OOD_SETS:
        for key, label, _ in METHODS:
            run = load(f"ood_{key}_{set_key}.json")
            if run is None:
                continue
            m, s = run["metrics"], run["splits"][0]
            print(f"| {label} | {set_label} | "
                  f"{fmt(m['auroc_entropy']['mean'], 3)} | "
                  f"{fmt(m['auroc_mi']['mean'], 3)} | "
                  f"{s['mean_entropy_in']:.3f} / {s['mean_entropy_ood']:.3f} |")


if __name__ == "__main__":
    convergence()
    ood_roc()
    reliability()
    tables()
