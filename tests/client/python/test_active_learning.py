"""ActiveLearningLoop and examples/python/active_learning.py against the real server."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import bnn_serve
from conftest import ADMIN_TOKEN, SOURCE_DIR, TINY_SLANG, unique

EXAMPLE = SOURCE_DIR / "client" / "examples" / "python" / "active_learning.py"


def sine_problem(seed=1, initial=10, pool=40):
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(-3, 3, initial)
    return x0, np.sin(3 * x0), rng.uniform(-3, 3, pool)


@pytest.mark.parametrize("warm_start", [True, False])
def test_loop_rounds_versions_and_parents(client, warm_start):
    x0, y0, pool = sine_problem()
    name = unique("loop")
    client.upload(x0, y0, name=name)
    asked = []

    def oracle(X, indices):
        np.testing.assert_array_equal(X[:, 0], pool[indices])
        asked.append(indices.copy())
        return np.sin(3 * X[:, 0])

    loop = bnn_serve.ActiveLearningLoop(
        client, name, pool, oracle, heuristic="max_variance", batch_size=2, rounds=2,
        warm_start=warm_start, hidden=6, epochs=60, warm_epochs=20, train_params=TINY_SLANG,
        samples=8, seed=1, evaluate=lambda c, snap: float(len(c.snapshot(snap).snapshot_id)))
    history = loop.run()
    assert [r.round for r in history] == [0, 1, 2]
    assert [r.labelled for r in history] == [10, 12, 14]
    assert [r.dataset_version for r in history] == [1, 2, 3]
    assert all(r.score == len(r.snapshot_id) for r in history)
    acquired = np.concatenate([r.acquired for r in history])
    assert len(set(acquired.tolist())) == 4 and loop.remaining.size == 36
    np.testing.assert_array_equal(np.concatenate(asked), acquired)
    for previous, current in zip(history, history[1:]):
        snapshot = client.snapshot(current.snapshot_id)
        assert snapshot.dataset_version == current.dataset_version
        expected_parent = previous.snapshot_id if warm_start else ""
        assert snapshot.parent_snapshot_id == expected_parent


def test_loop_stops_by_rule_and_when_the_pool_runs_out(client):
    x0, y0, pool = sine_problem(seed=2, initial=8, pool=3)
    name = unique("stop")
    client.upload(x0, y0, name=name)
    first = client.train(name, "slang", hidden=4, epochs=40, seed=1, progress=False, **TINY_SLANG)
    loop = bnn_serve.ActiveLearningLoop(
        client, name, pool, lambda X, i: np.sin(3 * X[:, 0]), heuristic="random",
        batch_size=2, rounds=10, warm_epochs=10, train_params=TINY_SLANG,
        initial_snapshot=first.snapshot_id, stop=lambda h: len(h) == 2)
    history = loop.run()
    assert len(history) == 2 and history[0].job is None
    assert history[0].snapshot_id == first.snapshot_id
    history = loop.run()  # continues: the last pool row, then the pool is empty
    assert [r.labelled for r in history] == [8, 10, 11] and loop.remaining.size == 0


def test_example_prints_both_strategies_per_round(server, tmp_path):
    png = tmp_path / "bands.png"
    env = dict(os.environ)
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--server", server.address, "--token", ADMIN_TOKEN,
         "--rounds", "2", "--initial", "10", "--pool", "40", "--test", "50", "--hidden", "8",
         "--epochs", "150", "--warm-epochs", "40", "--samples", "16", "--plot", str(png)],
        capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = lines.index("round  labelled  RMSE max_variance  RMSE random")
    rows = [line.split() for line in lines[header + 1:header + 4]]
    assert [r[:2] for r in rows] == [["0", "10"], ["1", "11"], ["2", "12"]]
    assert rows[0][2] == rows[0][3]  # both start from the same round-0 model
    assert all(0 < float(v) < 5 for r in rows for v in r[2:])
    assert "max_variance ended below random in" in lines[header + 4]
    assert "max_variance round  1: labelled x =" in result.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
