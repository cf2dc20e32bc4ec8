"""What the PyTorch peers (torch_predict.py, torch_slang_step.py) share: the
OpenBLAS check, the command line, the report, and SLANG's sampler.

Torch must use OpenBLAS (Debian python3-torch with libopenblas0-pthread;
deploy/install-deps.sh --peers): require_openblas() exits on any other BLAS
unless --allow-reference-blas.
"""
import hashlib
import json
import os
import sys

import torch


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


def add_common_args(ap, unit):
    """The options both peers take; `unit` names what a repetition loops
    over ("calls", "steps")."""
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--min_seconds", type=float, default=1.0,
                    help=f"least time each repetition loops over {unit}")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--only", default="", help="substring of the case names")
    ap.add_argument("--json_out", default="")
    ap.add_argument("--allow-reference-blas", action="store_true")


def require_openblas(args):
    """Sets torch's threads; returns the BLAS in use, or exits if it is not
    OpenBLAS (unless --allow-reference-blas)."""
    torch.set_num_threads(args.threads)
    blas = blas_info()
    if "open" not in blas.lower() and not args.allow_reference_blas:
        sys.exit(f"torch does not use OpenBLAS ({blas}): install "
                 "libopenblas0-pthread (deploy/install-deps.sh --peers)")
    return blas


def script_provenance():
    """The peer has no build: its provenance is the SHA-256 of the script
    that ran and of this module (issue 16), beside torch's version and the
    BLAS in use that the report already records."""
    out = {}
    for path in (sys.argv[0], __file__):
        with open(path, "rb") as f:
            out[os.path.basename(path) + "_sha256"] = \
                hashlib.sha256(f.read()).hexdigest()
    return out


def write_report(args, blas, results, **extra):
    report = {"command": " ".join(sys.argv), "build": script_provenance(),
              "torch": torch.__version__, "blas": blas,
              "threads": args.threads, **extra, "results": results}
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(report, f, indent=1)


def sample_factor(u, d):
    """x -> F x for a factor F of (U U^T + diag d)^-1 (F F^T = Sigma), the
    posterior covariance of SLANG (Mishkin et al. 2018): Algorithm 3 in its
    corrected form (App. C.4, eqs. 25-29: V = U / sqrt(d), A = chol(V^T V),
    B = chol(I + A^T A), C = A^-T (B - I) A^-1, K = (C^-T + V^T V)^-1,
    F x = (x - V K V^T x) / sqrt(d)), or diag(1/sqrt d) while U = 0 (mean
    field). The L x L work is done once; applying F costs O(D L) a column."""
    inv_sqrt_d = d.rsqrt()
    if u.shape[1] == 0 or not bool(u.any()):
        return lambda e: e * inv_sqrt_d[:, None]
    v = u * inv_sqrt_d[:, None]
    p = v.T @ v
    a, info = torch.linalg.cholesky_ex(p)
    if int(info) != 0:
        # Rank-deficient U: drop the null directions of V^T V (U U^T is
        # unchanged), as the reference code's rank reduction does.
        w, q = torch.linalg.eigh(p)
        keep = w > w.max() * 1e-10
        u = u @ q[:, keep]
        v = u * inv_sqrt_d[:, None]
        p = v.T @ v
        a = torch.linalg.cholesky(p)
    eye = torch.eye(p.shape[0], dtype=p.dtype)
    b = torch.linalg.cholesky(eye + a.T @ a)
    a_inv = torch.linalg.solve_triangular(a, eye, upper=False)
    c = a_inv.T @ (b - eye) @ a_inv
    k = torch.linalg.inv(torch.linalg.inv(c).T + p)

    def apply(e):
        return (e - v @ (k @ (v.T @ e))) * inv_sqrt_d[:, None]
    return apply


def check_sampler():
    """F F^T = (U U^T + diag d)^-1 for sample_factor's F, with a rank-4 U,
    a rank-deficient U and U = 0 (mean field); exits if not. Returns the
    largest error."""
    g = torch.Generator().manual_seed(1)
    dim, rank = 50, 4
    worst = 0.0
    u_full = torch.randn(dim, rank, generator=g, dtype=torch.float64)
    d = 0.5 + torch.rand(dim, generator=g, dtype=torch.float64)
    u_deficient = u_full.clone()
    u_deficient[:, 3] = u_deficient[:, 0] - 2 * u_deficient[:, 1]
    for u in (u_full, u_deficient, torch.zeros(dim, rank, dtype=torch.float64)):
        f = sample_factor(u, d)(torch.eye(dim, dtype=torch.float64))
        sigma = torch.linalg.inv(u @ u.T + torch.diag(d))
        worst = max(worst, (f @ f.T - sigma).abs().max().item())
    if worst > 1e-10:
        sys.exit(f"sampler check failed: max |F F^T - Sigma| = {worst:.3g}")
    return worst
