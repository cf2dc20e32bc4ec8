#!/usr/bin/env python3
"""PyTorch peer of bnn-serve's Monte Carlo predictive (issue 15).

A careful PyTorch implementation of what a bnn-serve Predict computes from a
SLANG posterior N(mu, (U U^T + diag(d))^-1) (SLANG, Mishkin et al. 2018):

- cold: draw S weight vectors with the O(D L^2 + D L S) sampler of SLANG's
  Algorithm 3 in its corrected form (peer_common.sample_factor), all S
  samples in one D x S block (two GEMMs), then the forward passes;
- warm: the S samples already drawn (what bnn-serve's sample cache holds),
  forward passes only.

The S forward passes are batched: each layer is one torch.baddbmm over the
S weight matrices (S x rows x in times S x in x out), ReLU between layers;
regression returns the mean and variance over samples (plus the noise
variance), classification the mean of the softmax. Same nets and sizes as
bench/perf/predict_bench.cc (BM_Predict, BM_PredictCold), so
bench/peers/run_peers.sh predict puts both side by side.

Torch must use OpenBLAS (peer_common.require_openblas). The sampler is
checked against the dense covariance before timing.
"""
import argparse
import statistics
import time

import torch

from peer_common import (add_common_args, check_sampler, require_openblas,
                         sample_factor, write_report)

NETS = {
    # name: (input, hidden, outputs, rank L)
    "uci_13_50_1_L1": (13, [50], 1, 1),
    "mnist_784_400_400_10_L32": (784, [400, 400], 10, 32),
}


def layer_sizes(net):
    inputs, hidden, outputs, _ = NETS[net]
    sizes = [inputs] + hidden + [outputs]
    return list(zip(sizes[:-1], sizes[1:]))


class LowRankPosterior:
    """N(mu, (U U^T + diag(d))^-1), sampled with SLANG's sampler
    (peer_common.sample_factor; its L x L work done once)."""

    def __init__(self, mu, u, d):
        self.mu = mu
        self.factor = sample_factor(u, d)

    def sample(self, num_samples, generator):
        e = torch.randn(self.mu.shape[0], num_samples, generator=generator,
                        dtype=self.mu.dtype)
        return self.mu[:, None] + self.factor(e)


def forward(net, theta, x, first_layer="bmm"):
    """Outputs of the S nets in theta's columns on rows x: S x rows x out.

    Every layer is one batched product over the S samples. The first
    layer's input is the same for every sample, so it can also be one GEMM
    of x with the S weight matrices side by side (first_layer="gemm"); which
    is faster depends on the shapes, so the peer times both."""
    num_samples = theta.shape[1]
    rows = x.shape[0]
    offset = 0
    layers = layer_sizes(net)
    h = None
    for i, (n_in, n_out) in enumerate(layers):
        w = theta[offset:offset + n_in * n_out]
        offset += n_in * n_out
        b = theta[offset:offset + n_out].T.reshape(num_samples, 1, n_out)
        offset += n_out
        if i == 0 and first_layer == "gemm":
            # w's rows are (input, output) pairs, input-major: x @ [W_1..W_S]
            wide = w.reshape(n_in, n_out * num_samples)
            h = (x @ wide).reshape(rows, n_out, num_samples).permute(2, 0, 1)
            h = h + b
        else:
            if i == 0:
                h = x.expand(num_samples, rows, n_in).contiguous()
            h = torch.baddbmm(b, h, w.T.reshape(num_samples, n_in, n_out))
        if i + 1 < len(layers):
            h = torch.relu(h)
    return h


def predictive(net, out, noise_variance=0.1):
    if NETS[net][2] == 1:
        mean = out.mean(0)
        return mean, out.var(0, unbiased=False) + noise_variance
    return torch.softmax(out, -1).mean(0), None


def make_posterior(net, dtype, seed=3):
    """Like predict_bench.cc's MakeSnapshot: mu ~ 0.05 N(0,1), d ~ 100 +
    U(0,1), U ~ N(0,1)."""
    g = torch.Generator().manual_seed(seed)
    dim = sum(i * o + o for i, o in layer_sizes(net))
    rank = NETS[net][3]
    mu = 0.05 * torch.randn(dim, generator=g, dtype=dtype)
    d = 100 + torch.rand(dim, generator=g, dtype=dtype)
    u = torch.randn(dim, rank, generator=g, dtype=dtype)
    return LowRankPosterior(mu, u, d), dim


def time_case(net, rows, samples, warm, dtype, first_layer, repetitions,
              min_seconds):
    posterior, dim = make_posterior(net, dtype)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(rows, NETS[net][0], generator=g, dtype=dtype)
    cached = posterior.sample(samples, g) if warm else None

    def call():
        theta = cached if warm else posterior.sample(samples, g)
        return predictive(net, forward(net, theta, x, first_layer))

    call()  # first call: allocator and thread pool warm-up
    per_call = []
    for _ in range(repetitions):
        n, start = 0, time.perf_counter()
        while True:
            call()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        per_call.append(elapsed / n * 1e3)
    return {
        "net": net, "parameters": dim, "rows": rows, "samples": samples,
        "warm": warm, "dtype": str(dtype).replace("torch.", ""),
        "first_layer": first_layer,
        "ms_per_call": per_call,
        "ms_best": min(per_call), "ms_median": statistics.median(per_call),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(ap, "calls")
    ap.add_argument("--first_layer", default="bmm,gemm",
                    help="forward formulations to time (see forward())")
    args = ap.parse_args()
    sampler_error = check_sampler()
    blas = require_openblas(args)
    cases = [
        # (net, rows, samples, warm): BM_PredictCold and BM_Predict's sizes
        ("uci_13_50_1_L1", 1, 100, False),
        ("uci_13_50_1_L1", 1, 64, True),
        ("uci_13_50_1_L1", 1000, 64, False),
        ("uci_13_50_1_L1", 1000, 64, True),
        ("mnist_784_400_400_10_L32", 1, 64, False),
        ("mnist_784_400_400_10_L32", 1, 64, True),
        ("mnist_784_400_400_10_L32", 1000, 64, False),
        ("mnist_784_400_400_10_L32", 1000, 64, True),
    ]
    results = []
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for net, rows, samples, warm in cases:
            if args.only not in net:
                continue
            for first_layer in args.first_layer.split(","):
                r = time_case(net, rows, samples, warm, dtype, first_layer,
                              args.repetitions, args.min_seconds)
                print(f"{net} rows={rows} S={samples} "
                      f"{'warm' if warm else 'cold'} {r['dtype']} "
                      f"{first_layer}: best {r['ms_best']:.3f} ms, "
                      f"median {r['ms_median']:.3f} ms", flush=True)
                results.append(r)
    write_report(args, blas, results,
                 sampler_check_max_abs_error=sampler_error)


if __name__ == "__main__":
    main()
