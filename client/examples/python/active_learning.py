#!/usr/bin/env python3
"""Active learning with bnn_serve: max-variance against random acquisition.

The Python counterpart of ../active_learning_demo.cc, on the same synthetic
task: y = sin(3x) + 0.5x + eps, eps ~ N(0, 0.2^2), x ~ U[-3, 3]. Per trial
(data seed s): ``--initial`` labelled points, a pool of ``--pool`` unlabelled
points whose label noise is drawn up front (both strategies get the same
label for the same point), and a test grid of ``--test`` points over
[-3, 3]. Each strategy gets its own dataset and runs
``bnn_serve.ActiveLearningLoop``: Acquire (``max_variance`` or ``random``,
k = ``--batch``) -> label -> AppendRows -> StartTraining warm-started from the
previous snapshot. Printed: the test RMSE of the predictive mean against the
noise-free function, per round, averaged over ``--repeats`` trials.

    build/server/bnn-server --listen 127.0.0.1:50051 --data-dir /tmp/bnn-al --metrics-listen '' &
    PYTHONPATH=client/python:build/client/python \\
        python3 client/examples/python/active_learning.py --server 127.0.0.1:50051
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from typing import Dict, List, Optional, Sequence

import numpy as np

import bnn_serve

HEURISTICS = ("max_variance", "random")
#: SLANG parameters of ../active_learning_demo.cc.
DEFAULT_PARAMS = {"rank": 5, "mc_samples": 8, "batch_size": 32, "learning_rate": 0.1,
                  "beta": 0.1, "prior_precision": 0.1, "noise_precision": 30}


def truth(x: np.ndarray) -> np.ndarray:
    return np.sin(3 * x) + 0.5 * x


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="127.0.0.1:50051", help="bnn-server HOST:PORT")
    parser.add_argument("--token", default=None, help="bearer token (for a server with --token-file)")
    parser.add_argument("--rounds", type=int, default=10, help="acquisition rounds")
    parser.add_argument("--batch", type=int, default=1, help="points acquired per round")
    parser.add_argument("--initial", type=int, default=20, help="labelled points before round 1")
    parser.add_argument("--pool", type=int, default=500, help="unlabelled pool points")
    parser.add_argument("--test", type=int, default=200, help="test grid points")
    parser.add_argument("--repeats", type=int, default=1, help="trials (data seeds seed..seed+repeats-1)")
    parser.add_argument("--seed", type=int, default=1, help="data and training seed of trial 0")
    parser.add_argument("--hidden", type=int, default=20, help="hidden units (one layer)")
    parser.add_argument("--activation", default="tanh", help="hidden activation")
    parser.add_argument("--epochs", type=int, default=2000, help="epochs of round 0")
    parser.add_argument("--warm-epochs", type=int, default=500, help="epochs of a warm-started round")
    parser.add_argument("--samples", type=int, default=64, help="posterior samples (Acquire, Predict)")
    parser.add_argument("--diversity-power", type=float, default=0.0,
                        help="> 0: stochastic power acquisition")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a SLANG parameter (repeatable), over the defaults")
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="also draw the last max_variance model's predictive bands here")
    return parser.parse_args(argv)


def run_trial(client: bnn_serve.Client, args: argparse.Namespace, seed: int,
              params: Dict[str, object]) -> Dict[str, List[float]]:
    rng = np.random.default_rng(seed)
    x_initial = rng.uniform(-3, 3, args.initial)
    y_initial = truth(x_initial) + rng.normal(0, 0.2, args.initial)
    pool = rng.uniform(-3, 3, args.pool)
    pool_noise = rng.normal(0, 0.2, args.pool)
    x_test = np.linspace(-3, 3, args.test)

    def oracle(x_batch: np.ndarray, indices: np.ndarray) -> np.ndarray:
        return truth(x_batch[:, 0]) + pool_noise[indices]

    def test_rmse(c: bnn_serve.Client, snapshot: str) -> float:
        prediction = c.predict(snapshot, x_test, samples=args.samples, seed=seed)
        return float(np.sqrt(np.mean((prediction.mean - truth(x_test)) ** 2)))

    rmse: Dict[str, List[float]] = {}
    for heuristic in HEURISTICS:
        name = f"al-{heuristic}-{seed}-{uuid.uuid4().hex[:8]}"
        client.upload(x_initial, y_initial, name=name)
        loop = bnn_serve.ActiveLearningLoop(
            client, name, pool, oracle, heuristic=heuristic, batch_size=args.batch,
            rounds=args.rounds, hidden=args.hidden, activations=args.activation,
            epochs=args.epochs, warm_epochs=args.warm_epochs, train_params=params,
            samples=args.samples, seed=seed, diversity_power=args.diversity_power,
            evaluate=test_rmse)
        history = loop.run()
        rmse[heuristic] = [r.score for r in history]
        for r in history[1:]:
            print(f"  seed {seed} {heuristic:<12} round {r.round:2d}: labelled x = "
                  + ", ".join(f"{pool[i]:.2f}" for i in r.acquired), file=sys.stderr)
        if args.plot and heuristic == "max_variance":
            from bnn_serve import plot
            final = history[-1]
            acquired = np.concatenate([r.acquired for r in history])
            x_labelled = np.concatenate([x_initial, pool[acquired]])
            y_labelled = np.concatenate([y_initial, oracle(pool[acquired, None], acquired)])
            grid = np.linspace(-4, 4, 161)
            plot.predictive_bands(grid, client.predict(final.snapshot_id, grid,
                                                       samples=args.samples, seed=seed),
                                  args.plot, x_train=x_labelled, y_train=y_labelled,
                                  title=f"max_variance after {final.round} rounds")
    return rmse


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    params: Dict[str, object] = dict(DEFAULT_PARAMS)
    for assignment in args.param:
        key, sep, value = assignment.partition("=")
        if not sep or not key:
            print(f"--param: {assignment!r} is not KEY=VALUE", file=sys.stderr)
            return 2
        params[key] = value
    start = time.monotonic()
    results: Dict[str, List[List[float]]] = {h: [] for h in HEURISTICS}
    with bnn_serve.Client(args.server, token=args.token) as client:
        for trial in range(args.repeats):
            for heuristic, curve in run_trial(client, args, args.seed + trial, params).items():
                results[heuristic].append(curve)
    rounds = min(len(curve) for curves in results.values() for curve in curves)
    means = {h: np.mean([curve[:rounds] for curve in results[h]], axis=0) for h in HEURISTICS}
    print(f"Test RMSE of the predictive mean ({args.test} test points), "
          f"mean over {args.repeats} trial(s):")
    print("round  labelled  RMSE max_variance  RMSE random")
    for r in range(rounds):
        print(f"{r:5d}  {args.initial + r * args.batch:8d}  {means['max_variance'][r]:17.4f}  "
              f"{means['random'][r]:11.4f}")
    wins = sum(mv[rounds - 1] < rd[rounds - 1]
               for mv, rd in zip(results["max_variance"], results["random"]))
    print(f"max_variance ended below random in {wins} of {args.repeats} trial(s) "
          f"({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
