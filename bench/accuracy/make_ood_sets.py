#!/usr/bin/python3
"""Builds two out-of-distribution sets for a Fashion-MNIST classifier, as
gzip'd IDX files of 28 x 28 ubyte images (with labels, which `bnn-experiment
ood` ignores), in OUT_DIR (keep it outside the repository):

  digits28-{images-idx3,labels-idx1}-ubyte.gz
      scikit-learn's 8 x 8 handwritten digits (1,797 images, values 0..16),
      upsampled to 28 x 28 by bilinear interpolation (corner-aligned) and
      rescaled to 0..255 (x * 255 / 16, rounded). Dark background, bright
      strokes, like Fashion-MNIST.
  fmnist-permuted-{images-idx3,labels-idx1}-ubyte.gz
      the 10,000 Fashion-MNIST test images with their 784 pixels shuffled by
      one fixed permutation (numpy default_rng(SEED).permutation(784)): the
      same pixel statistics, no spatial structure.

Needs Debian's python3-numpy and python3-sklearn (run with /usr/bin/python3
if another python3 comes first on PATH). Usage:
  make_ood_sets.py OUT_DIR [--fmnist-dir DIR] [--seed SEED]
"""
import argparse
import gzip
import os
import struct
import sys

import numpy as np
from sklearn.datasets import load_digits

FMNIST_DIR = "/usr/share/datasets/fashion-mnist"
SIDE = 28


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, rank = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def write_idx(path, array):
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = struct.pack(">HBB", 0, 0x08, array.ndim)
    header += struct.pack(">" + "I" * array.ndim, *array.shape)
    # mtime=0: the same input gives byte-identical files.
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(header + array.tobytes())


def bilinear_upsample(images, side):
    """(n, h, w) -> (n, side, side), corner-aligned bilinear interpolation."""
    n, h, w = images.shape
    ys = np.linspace(0.0, h - 1.0, side)
    xs = np.linspace(0.0, w - 1.0, side)
    y0 = np.clip(np.floor(ys).astype(int), 0, h - 2)
    x0 = np.clip(np.floor(xs).astype(int), 0, w - 2)
    wy = (ys - y0)[None, :, None]
    wx = (xs - x0)[None, None, :]
    top_left = images[:, y0][:, :, x0]
    top_right = images[:, y0][:, :, x0 + 1]
    bottom_left = images[:, y0 + 1][:, :, x0]
    bottom_right = images[:, y0 + 1][:, :, x0 + 1]
    top = top_left * (1 - wx) + top_right * wx
    bottom = bottom_left * (1 - wx) + bottom_right * wx
    return top * (1 - wy) + bottom * wy


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--fmnist-dir", default=FMNIST_DIR)
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the pixel permutation (default 0)")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)

    digits = load_digits()
    images = digits.images.astype(np.float64)  # (1797, 8, 8), 0..16
    up = bilinear_upsample(images, SIDE)
    up = np.clip(np.rint(up * 255.0 / 16.0), 0, 255).astype(np.uint8)
    write_idx(os.path.join(args.out_dir, "digits28-images-idx3-ubyte.gz"), up)
    write_idx(os.path.join(args.out_dir, "digits28-labels-idx1-ubyte.gz"),
              digits.target.astype(np.uint8))

    test = read_idx(os.path.join(args.fmnist_dir, "t10k-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(args.fmnist_dir, "t10k-labels-idx1-ubyte.gz"))
    n = test.shape[0]
    permutation = np.random.default_rng(args.seed).permutation(SIDE * SIDE)
    permuted = test.reshape(n, SIDE * SIDE)[:, permutation].reshape(n, SIDE, SIDE)
    write_idx(os.path.join(args.out_dir, "fmnist-permuted-images-idx3-ubyte.gz"),
              permuted)
    write_idx(os.path.join(args.out_dir, "fmnist-permuted-labels-idx1-ubyte.gz"),
              labels)
    print(f"digits28: {up.shape[0]} images, mean pixel {up.mean():.1f}; "
          f"fmnist-permuted: {n} images, mean pixel {permuted.mean():.1f} "
          f"(Fashion-MNIST test: {test.mean():.1f}); in {args.out_dir}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
