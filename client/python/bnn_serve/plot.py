"""PNG figures of predictions and jobs (matplotlib, Agg; no display needed).

* :func:`predictive_bands`: 1-D regression, predictive mean with ±1 and ±2
  standard-deviation bands and the training points;
* :func:`reliability_diagram`: accuracy against confidence per bin, with the
  expected calibration error (computed here from predicted probabilities and
  labels: :func:`reliability`);
* :func:`loss_curve`: a job's loss curve (``Client.job(id).loss_curve``);
* :func:`ood_roc`: the ROC curve of an out-of-distribution score (e.g.
  entropy or mutual information: in-distribution rows are negatives,
  out-of-distribution rows positives), with its AUROC (:func:`roc`).

Figures are drawn on a ``matplotlib.figure.Figure`` with the Agg canvas, so
importing this module never changes pyplot's backend.

As a program (``python3 -m bnn_serve.plot``, which ``bnnctl plot`` runs) it
draws from a running server: ``loss JOB_ID``, ``bands MODEL --csv FILE``
(1-D regression over the CSV's x range, its rows drawn as the training
points when ``--target`` names their target column) and ``reliability MODEL
--csv FILE --target COL`` (the bins of Evaluate); ``--help`` lists the
flags. matplotlib is an
optional dependency of the package (Debian: python3-matplotlib).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bnn_serve.types import Evaluation, Job, Prediction, Reliability

PathLike = Union[str, "os.PathLike[str]"]


def _figure(size: Tuple[float, float] = (6.4, 4.2)) -> Tuple[Figure, Any]:
    figure = Figure(figsize=size, dpi=100)
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot(1, 1, 1)


def _save(figure: Figure, path: PathLike) -> str:
    figure.tight_layout()
    figure.savefig(os.fspath(path), format="png")
    return os.fspath(path)


def predictive_bands(x: Sequence[float], prediction: Prediction, path: PathLike, *,
                     x_train: Optional[Sequence[float]] = None,
                     y_train: Optional[Sequence[float]] = None,
                     title: Optional[str] = None) -> str:
    """1-D regression: mean and ±1/±2 std bands over ``x`` (the rows predicted).

    ``x`` is the single feature of the rows ``prediction`` answered; they
    are drawn in order of x. Returns the path written.
    """
    if prediction.mean is None:
        raise ValueError("prediction: predictive bands need a regression prediction")
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    if x.shape[0] != len(prediction):
        raise ValueError(f"x: {x.shape[0]} values for {len(prediction)} predicted rows")
    order = np.argsort(x, kind="stable")
    xs, mean, std = x[order], prediction.mean[order], prediction.std[order]
    figure, axes = _figure()
    axes.fill_between(xs, mean - 2 * std, mean + 2 * std, color="tab:blue", alpha=0.15,
                      linewidth=0, label="±2 std")
    axes.fill_between(xs, mean - std, mean + std, color="tab:blue", alpha=0.3,
                      linewidth=0, label="±1 std")
    axes.plot(xs, mean, color="tab:blue", linewidth=1.5, label="predictive mean")
    if x_train is not None and y_train is not None:
        axes.scatter(np.asarray(x_train).reshape(-1), np.asarray(y_train).reshape(-1), s=12,
                     color="black", zorder=3, label="training points")
    axes.set_xlabel("x")
    axes.set_ylabel("y")
    axes.set_title(title or f"Predictive distribution ({prediction.snapshot_id})")
    axes.legend(loc="best", fontsize="small")
    return _save(figure, path)


def reliability(probabilities: Any, labels: Any, class_values: Optional[Sequence[float]] = None,
                bins: int = 15) -> Reliability:
    """The reliability bins and ECE of predicted ``probabilities`` (n, C).

    ``labels`` are label values (one of ``class_values``, the columns' labels,
    default 0..C-1).
    """
    probabilities = np.asarray(probabilities, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64).reshape(-1)
    if probabilities.ndim != 2 or probabilities.shape[0] != labels.shape[0]:
        raise ValueError(f"probabilities: expected ({labels.shape[0]}, C), got {probabilities.shape}")
    if bins < 1:
        raise ValueError(f"bins: must be >= 1, got {bins}")
    values = (np.arange(probabilities.shape[1], dtype=np.float64) if class_values is None
              else np.asarray(class_values, dtype=np.float64))
    confidence = probabilities.max(axis=1)
    correct = (values[probabilities.argmax(axis=1)] == labels).astype(np.float64)
    edges = np.linspace(0.0, 1.0, bins + 1)
    index = np.clip(np.ceil(confidence * bins).astype(np.int64) - 1, 0, bins - 1)
    count = np.bincount(index, minlength=bins)
    safe = np.maximum(count, 1)
    mean_confidence = np.bincount(index, weights=confidence, minlength=bins) / safe
    accuracy = np.bincount(index, weights=correct, minlength=bins) / safe
    ece = float(np.sum(count / max(labels.shape[0], 1) * np.abs(accuracy - mean_confidence)))
    return Reliability(ece, edges[:-1], edges[1:], count, mean_confidence, accuracy)


def reliability_diagram(probabilities: Any, labels: Any = None, path: Optional[PathLike] = None,
                        *, class_values: Optional[Sequence[float]] = None, bins: int = 15,
                        title: Optional[str] = None) -> Reliability:
    """Draws each non-empty bin's accuracy (bars) and mean confidence (red
    marks) against confidence, with the diagonal; returns the bins.

    ``probabilities`` (n, C) with ``labels`` (n,) are binned here
    (:func:`reliability`); or pass the server's bins instead: an
    :class:`~bnn_serve.types.Evaluation` (``Client.evaluate``) or a
    :class:`~bnn_serve.types.Reliability`, as
    ``reliability_diagram(evaluation, path=...)``.
    """
    if isinstance(probabilities, Evaluation):
        if probabilities.reliability is None:
            raise ValueError(f"the evaluation is of a {probabilities.task} model; only a "
                             "classifier's has reliability bins")
        stats = probabilities.reliability
    elif isinstance(probabilities, Reliability):
        stats = probabilities
    else:
        if labels is None:
            raise ValueError("labels: required with predicted probabilities")
        stats = reliability(probabilities, labels, class_values, bins)
    if labels is not None and isinstance(probabilities, (Evaluation, Reliability)):
        raise ValueError("labels: the bins of an Evaluate result need no labels")
    if path is None:
        raise ValueError("path: the PNG file to write is required")
    figure, axes = _figure((5.0, 5.0))
    width = stats.upper - stats.lower
    filled = stats.count > 0
    axes.bar(stats.lower[filled], stats.accuracy[filled], width=width[filled], align="edge",
             edgecolor="black", color="tab:blue", alpha=0.8, label="accuracy")
    axes.scatter((stats.lower + width / 2)[filled], stats.mean_confidence[filled], marker="_",
                 s=400, linewidths=2.5, color="tab:red", zorder=3, label="mean confidence")
    axes.plot([0, 1], [0, 1], linestyle="--", color="gray", label="perfect calibration")
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.set_xlabel("confidence (top-class probability)")
    axes.set_ylabel("accuracy")
    axes.set_title(title or f"Reliability diagram (ECE {stats.ece:.3f}, {int(stats.count.sum())} rows)")
    axes.legend(loc="upper left", fontsize="small")
    _save(figure, path)
    return stats


def loss_curve(job: Job, path: PathLike, *, title: Optional[str] = None) -> str:
    """A job's loss curve (mean minibatch loss against step)."""
    if not job.loss_curve:
        raise ValueError(f"job {job.job_id} has no loss curve (jobs() listings leave it out; "
                         "use Client.job(id))")
    steps = [p.step for p in job.loss_curve]
    losses = [p.loss for p in job.loss_curve]
    figure, axes = _figure()
    axes.plot(steps, losses, color="tab:blue", linewidth=1.2)
    axes.set_xlabel("step")
    axes.set_ylabel("loss (mean minibatch, epoch so far)")
    axes.set_title(title or f"{job.method} loss, {job.job_id} ({job.state.value})")
    return _save(figure, path)


def roc(scores_in: Any, scores_out: Any) -> Tuple[np.ndarray, np.ndarray, float]:
    """(false-positive rates, true-positive rates, AUROC) of a score where
    higher means out of distribution; ties count one half (Mann-Whitney)."""
    scores_in = np.asarray(scores_in, dtype=np.float64).reshape(-1)
    scores_out = np.asarray(scores_out, dtype=np.float64).reshape(-1)
    if scores_in.size == 0 or scores_out.size == 0:
        raise ValueError("roc: needs at least one in- and one out-of-distribution score")
    scores = np.concatenate([scores_out, scores_in])
    positive = np.concatenate([np.ones(scores_out.size), np.zeros(scores_in.size)])
    order = np.argsort(-scores, kind="stable")
    scores, positive = scores[order], positive[order]
    # One ROC point per distinct threshold (the last row of each run of ties).
    last = np.r_[np.nonzero(np.diff(scores))[0], scores.size - 1]
    tpr = np.r_[0.0, np.cumsum(positive)[last] / scores_out.size]
    fpr = np.r_[0.0, np.cumsum(1 - positive)[last] / scores_in.size]
    auroc = float(np.sum((fpr[1:] - fpr[:-1]) * (tpr[1:] + tpr[:-1]) / 2))
    return fpr, tpr, auroc


def ood_roc(scores_in: Any, scores_out: Any, path: PathLike, *, score_name: str = "entropy",
            title: Optional[str] = None) -> float:
    """Draws the ROC of telling out-of-distribution rows (positives) from
    in-distribution ones by a score; returns its AUROC."""
    fpr, tpr, auroc = roc(scores_in, scores_out)
    figure, axes = _figure((5.0, 5.0))
    axes.plot(fpr, tpr, color="tab:blue", linewidth=1.5, label=f"{score_name} (AUROC {auroc:.3f})")
    axes.plot([0, 1], [0, 1], linestyle="--", color="gray", label="chance")
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.set_xlabel("false-positive rate (in-distribution flagged)")
    axes.set_ylabel("true-positive rate (out-of-distribution flagged)")
    axes.set_title(title or f"OOD detection by {score_name}")
    axes.legend(loc="lower right", fontsize="small")
    _save(figure, path)
    return auroc


# --- command line (python3 -m bnn_serve.plot; bnnctl plot) ---------------------

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m bnn_serve.plot",
        description="PNG figures from a running bnn-server (bnnctl plot runs this).")
    parser.add_argument("--server", default=os.environ.get("BNN_SERVER", "127.0.0.1:50051"),
                        metavar="HOST:PORT", help="server address (env BNN_SERVER)")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                        help="deadline of each call (default 30)")
    parser.add_argument("--tls-ca", metavar="FILE", help="TLS, trusting these authorities")
    parser.add_argument("--tls-cert", metavar="FILE", help="TLS client certificate chain")
    parser.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert")
    parser.add_argument("--json", action="store_true",
                        help='print {"path": FILE} instead of the path (bnnctl --json)')
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    loss = commands.add_parser("loss", help="a job's loss curve")
    loss.add_argument("job_id", metavar="JOB_ID")
    loss.add_argument("--out", default="loss.png", metavar="FILE", help="default loss.png")
    bands = commands.add_parser(
        "bands", help="1-D regression: predictive mean and ±1/±2 std bands")
    bands.add_argument("model", metavar="MODEL", help="snapshot id or model reference")
    bands.add_argument("--csv", required=True, metavar="FILE",
                       help="CSV with a header: one feature column (and --target's)")
    bands.add_argument("--target", metavar="COL",
                       help="target column: its rows are drawn as training points")
    bands.add_argument("--points", type=int, default=200, metavar="N",
                       help="grid points over the x range, widened by a quarter each side")
    bands.add_argument("--samples", type=int, default=0, metavar="S")
    bands.add_argument("--seed", type=int, default=None, metavar="N")
    bands.add_argument("--out", default="bands.png", metavar="FILE", help="default bands.png")
    rel = commands.add_parser("reliability",
                              help="a classifier's reliability diagram (Evaluate's bins)")
    rel.add_argument("model", metavar="MODEL", help="snapshot id or model reference")
    rel.add_argument("--csv", required=True, metavar="FILE", help="labelled rows")
    rel.add_argument("--target", required=True, metavar="COL", help="label column")
    rel.add_argument("--samples", type=int, default=0, metavar="S")
    rel.add_argument("--seed", type=int, default=None, metavar="N")
    rel.add_argument("--bins", type=int, default=0, metavar="B", help="0 = 15")
    rel.add_argument("--out", default="reliability.png", metavar="FILE",
                     help="default reliability.png")
    return parser


def _bands(client: Any, args: argparse.Namespace) -> str:
    from bnn_serve import _wire  # pylint: disable=import-outside-toplevel
    features, targets, _, _ = _wire.read_csv(args.csv, args.target)
    if features.shape[1] != 1:
        raise ValueError(f"{args.csv}: bands need one feature column, it has "
                         f"{features.shape[1]} (name the target with --target)")
    if features.shape[0] == 0:
        raise ValueError(f"{args.csv}: no rows")
    if args.points < 2:
        raise ValueError(f"--points: must be >= 2, got {args.points}")
    low, high = float(features.min()), float(features.max())
    margin = 0.25 * (high - low) if high > low else 1.0
    grid = np.linspace(low - margin, high + margin, args.points)
    prediction = client.predict(args.model, grid, samples=args.samples, seed=args.seed)
    return predictive_bands(grid, prediction, args.out, x_train=features[:, 0] if
                            targets is not None else None, y_train=targets)


def main(argv: Optional[List[str]] = None) -> int:
    """The command line; the bearer token comes from the environment
    (BNN_TOKEN), never from the arguments, which other users can read."""
    from bnn_serve.client import Client  # pylint: disable=import-outside-toplevel
    from bnn_serve.errors import BnnError  # pylint: disable=import-outside-toplevel
    from bnn_serve.types import TlsConfig  # pylint: disable=import-outside-toplevel
    args = _parser().parse_args(argv)
    tls = None
    if args.tls_ca or args.tls_cert or args.tls_key:
        tls = TlsConfig(ca=args.tls_ca, cert=args.tls_cert, key=args.tls_key)
    try:
        with Client(args.server, token=os.environ.get("BNN_TOKEN") or None, tls=tls,
                    timeout=args.timeout) as client:
            if args.command == "loss":
                written = loss_curve(client.job(args.job_id), args.out)
            elif args.command == "bands":
                written = _bands(client, args)
            else:
                evaluation = client.evaluate(args.model, args.csv, label=args.target,
                                             samples=args.samples, seed=args.seed,
                                             bins=args.bins)
                reliability_diagram(evaluation, path=args.out)
                written = args.out
    except (BnnError, ValueError, OSError) as error:
        print(f"bnn_serve.plot {args.command}: {error}", file=sys.stderr)
        return 1
    print(json.dumps({"path": written}) if args.json else written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
