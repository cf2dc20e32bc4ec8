#!/usr/bin/env python3
"""PyTorch peer of bnn-serve's Monte Carlo predictive (issue 15).

A careful PyTorch implementation of what a bnn-serve Predict computes from a
SLANG posterior N(mu, (U U^T + diag(d))^-1) (SLANG, Mishkin et al. 2018):

- cold: draw S weight vectors with the O(D L^2 + D L S) sampler of SLANG's
  Algorithm 3 in its corrected form (App. C.4, eqs. 25-29: A = chol(V^T V),
  B = chol(I + A^T A), C = A^-T (B - I) A^-1, K = (C^-T + V^T V)^-1,
  theta = mu + (E - V K V^T E) / sqrt(d), V = U / sqrt(d)), all S samples
  in one D x S block (two GEMMs), then the forward passes;
- warm: the S samples already drawn (what bnn-serve's sample cache holds),
  forward passes only.

The S forward passes are batched: each layer is one torch.baddbmm over the
S weight matrices (S x rows x in times S x in x out), ReLU between layers;
regression returns the mean and variance over samples (plus the noise
variance), classification the mean of the softmax. Same nets and sizes as
bench/perf/predict_bench.cc (BM_Predict, BM_PredictCold), so
bench/peers/run_predict_peers.sh can put both side by side.

Torch must use OpenBLAS (Debian python3-torch with libopenblas0-pthread;
deploy/install-deps.sh --peers): the script records torch's BLAS and
refuses to run on the reference BLAS unless --allow-reference-blas.
"""
import argparse
import json
import statistics
import sys
import time

import torch

NETS = {
    # name: (input, hidden, outputs, rank L)
    "uci_13_50_1_L1": (13, [50], 1, 1),
    "mnist_784_400_400_10_L32": (784, [400, 400], 10, 32),
}


def blas_info():
    """The BLAS library torch's matrix products run on. Debian's torch links
    the generic libblas.so.3, which the alternatives system points at
    OpenBLAS or the reference BLAS, so ask the process's mappings after a
    product rather than torch's build string (BLAS_INFO=generic)."""
    a = torch.ones(64, 64, dtype=torch.float64)
    (a @ a).sum()
    with open("/proc/self/maps") as maps:
        libraries = {line.split()[-1] for line in maps
                     if "blas" in line.lower() and line.split()[-1][0] == "/"}
    return " ".join(sorted(libraries)) or "unknown"


def layer_sizes(net):
    inputs, hidden, outputs, _ = NETS[net]
    sizes = [inputs] + hidden + [outputs]
    return list(zip(sizes[:-1], sizes[1:]))


class LowRankPosterior:
    """N(mu, (U U^T + diag(d))^-1) with SLANG's sampler (see the module doc)."""

    def __init__(self, mu, u, d):
        self.mu = mu
        self.inv_sqrt_d = d.rsqrt()
        self.v = u * self.inv_sqrt_d[:, None]
        rank = u.shape[1]
        eye = torch.eye(rank, dtype=u.dtype)
        p = self.v.T @ self.v
        a = torch.linalg.cholesky(p)
        b = torch.linalg.cholesky(eye + a.T @ a)
        a_inv = torch.linalg.inv(a)
        c = a_inv.T @ (b - eye) @ a_inv
        self.k = torch.linalg.inv(torch.linalg.inv(c).T + p)

    def sample(self, num_samples, generator):
        e = torch.randn(self.mu.shape[0], num_samples, generator=generator,
                        dtype=self.mu.dtype)
        return self.transform(e)

    def transform(self, e):
        """mu + F e for the factor F of the covariance (F F^T = Sigma)."""
        e -= self.v @ (self.k @ (self.v.T @ e))
        e *= self.inv_sqrt_d[:, None]
        e += self.mu[:, None]
        return e


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


def check_sampler():
    """The factor the sampler applies, F (its columns: the transform of the
    identity), satisfies F F^T = (U U^T + diag(d))^-1 on a small dense
    problem; exits if not (so that the peer times the right arithmetic)."""
    g = torch.Generator().manual_seed(1)
    dim, rank = 30, 4
    u = torch.randn(dim, rank, generator=g, dtype=torch.float64)
    d = 0.5 + torch.rand(dim, generator=g, dtype=torch.float64)
    mu = torch.zeros(dim, dtype=torch.float64)
    f = LowRankPosterior(mu, u, d).transform(torch.eye(dim, dtype=torch.float64))
    sigma = torch.linalg.inv(u @ u.T + torch.diag(d))
    error = (f @ f.T - sigma).abs().max().item()
    if error > 1e-10:
        sys.exit(f"sampler check failed: max |F F^T - Sigma| = {error:.3g}")
    return error


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
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--min_seconds", type=float, default=1.0,
                    help="least time each repetition loops over calls")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--only", default="", help="substring of the net names")
    ap.add_argument("--first_layer", default="bmm,gemm",
                    help="forward formulations to time (see forward())")
    ap.add_argument("--json_out", default="")
    ap.add_argument("--allow-reference-blas", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sampler_error = check_sampler()
    blas = blas_info()
    if "open" not in blas.lower() and not args.allow_reference_blas:
        sys.exit(f"torch does not use OpenBLAS ({blas}): install "
                 "libopenblas0-pthread (deploy/install-deps.sh --peers)")
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
    report = {
        "command": " ".join(sys.argv),
        "torch": torch.__version__, "blas": blas,
        "threads": args.threads,
        "sampler_check_max_abs_error": sampler_error, "results": results,
    }
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
