#!/usr/bin/python3
"""Splits the Fashion-MNIST training set into a training and a validation
part, as gzip'd IDX files in OUT_DIR (keep it outside the repository), so
that a setting is chosen without looking at the test set:

  train-{images-idx3,labels-idx1}-ubyte.gz       the other 60,000 - ROWS rows
  validation-{images-idx3,labels-idx1}-ubyte.gz  ROWS rows (default 10,000)

The validation rows are numpy default_rng(SEED).permutation(60000)[:ROWS];
both parts keep the original row order. Needs Debian's python3-numpy (run
with /usr/bin/python3 if another python3 comes first on PATH). Usage:
  make_validation_split.py OUT_DIR [--fmnist-dir DIR] [--rows ROWS] [--seed SEED]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_ood_sets import FMNIST_DIR, read_idx, write_idx  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--fmnist-dir", default=FMNIST_DIR)
    parser.add_argument("--rows", type=int, default=10000,
                        help="validation rows (default 10,000)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the row permutation (default 0)")
    args = parser.parse_args()
    images = read_idx(os.path.join(args.fmnist_dir, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(args.fmnist_dir, "train-labels-idx1-ubyte.gz"))
    n = images.shape[0]
    if not 0 < args.rows < n:
        parser.error(f"--rows = {args.rows} must be in [1, {n - 1}]")
    held = np.zeros(n, dtype=bool)
    held[np.random.default_rng(args.seed).permutation(n)[:args.rows]] = True
    os.makedirs(args.out_dir, exist_ok=True)
    for part, rows in (("train", ~held), ("validation", held)):
        write_idx(os.path.join(args.out_dir, f"{part}-images-idx3-ubyte.gz"),
                  images[rows])
        write_idx(os.path.join(args.out_dir, f"{part}-labels-idx1-ubyte.gz"),
                  labels[rows])
    counts = np.bincount(labels[held], minlength=10)
    print(f"train: {n - args.rows} rows, validation: {args.rows} rows "
          f"(per class {counts.min()}..{counts.max()}); in {args.out_dir}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
