#!/usr/bin/env python3
"""First Predict after a job finishes, and after a restart, at the MNIST size.

Issue 15 measured 5.5 s for the first Predict after a job (the server read and
decoded the snapshot it had just written). This script starts bnn-server on a
free loopback port, uploads a synthetic 784-feature, 10-class dataset, trains
a 784-400-400-10 SLANG net (rank 32) for a few steps with --publish, and times:
  1. the first Predict after the job is SUCCEEDED (1 row, S = 1, seed 1);
  2. the same Predict again (the snapshot and the sample are cached);
  3. a Predict with a new seed (the snapshot cached, one new sample drawn);
then restarts the server on the same data directory, waits for the preload
(--preload-models, the default) and times the first Predict on the model.

  PYTHONPATH=client/python:build-test/client/python /usr/bin/python3 \
      bench/perf/first_predict.py --server build-test/server/bnn-server \
      [--json_out docs/results/perf/first_predict.json]
"""
import argparse
import json
import os
import re
import shutil
import signal
import tempfile
import time

import numpy as np

import bnn_serve
from server_proc import provenance, start, timed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--json_out", default="")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bnn_first_predict_")
    data_dir, log_path = os.path.join(tmp, "data"), os.path.join(tmp, "log")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.rows, 784))
    y = rng.integers(0, 10, args.rows)
    result = {"rows": args.rows, "net": "784-400-400-10", "method": "slang",
              "params": {"rank": 32, "mc_samples": 4, "batch_size": 200}}
    proc, address = start(args.server, data_dir, log_path, [])
    try:
        c = bnn_serve.Client(address)
        ds = c.upload(X, y, name="mnist-like", task="classification")
        t = time.perf_counter()
        job = c.train(ds.dataset_id, "slang", hidden=[400, 400], epochs=1,
                      seed=1, model_name="mnist", publish=True, progress=False,
                      rank=32, mc_samples=4, batch_size=200)
        result["training_seconds"] = time.perf_counter() - t
        row = X[:1]
        result["first_predict_after_job_ms"] = timed(
            lambda: c.predict("mnist", row, samples=1, seed=1))
        result["same_predict_again_ms"] = timed(
            lambda: c.predict("mnist", row, samples=1, seed=1))
        result["new_seed_predict_ms"] = timed(
            lambda: c.predict("mnist", row, samples=1, seed=2))
        c.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    t = time.perf_counter()
    log_path = os.path.join(tmp, "log2")
    proc, address = start(args.server, data_dir, log_path, [])
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            with open(log_path) as f:
                log = f.read()
            m = re.findall(r"models preloaded snapshots=(\d+) seconds=(\S+)", log)
            if m:
                result["preload_seconds"] = float(m[-1][1])
                break
            time.sleep(0.05)
        result["restart_to_preloaded_seconds"] = time.perf_counter() - t
        c = bnn_serve.Client(address)
        result["first_predict_after_restart_ms"] = timed(
            lambda: c.predict("mnist", row, samples=1, seed=1))
        c.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    result["load_average"] = os.getloadavg()
    result["build"] = provenance(args.server)
    print(json.dumps(result, indent=2))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=2)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
