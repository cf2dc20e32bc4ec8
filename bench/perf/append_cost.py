#!/usr/bin/env python3
"""What an AppendRows costs as the dataset grows (issue 15: 1,000 rows onto a
1,000,000-row dataset in <= 50 ms).

Starts bnn-server on a free loopback port, uploads a regression dataset of
--base_rows rows, then appends --append_rows rows --appends times and reports
the latency of each append (client call to response: streaming, the new rows'
hash and column ranges continued from the state kept with the latest version,
the write and fsync of the new rows' blob, the metadata commit). The same is
done on a --small_rows dataset: if an append re-read the dataset, the large
dataset's appends would cost ~base_rows / small_rows times more.

  PYTHONPATH=client/python:build-test/client/python /usr/bin/python3 \
      bench/perf/append_cost.py --server build-test/server/bnn-server \
      [--json_out docs/results/perf/append_cost.json]
"""
import argparse
import json
import os
import shutil
import signal
import tempfile
import time

import numpy as np

import bnn_serve
from server_proc import provenance, start, timed


def append_latencies(client, rng, rows, features, append_rows, appends):
    X = rng.standard_normal((rows, features))
    t = time.perf_counter()
    ds = client.upload(X, X.sum(axis=1), name=f"base-{rows}")
    upload_seconds = time.perf_counter() - t
    latencies = []
    for _ in range(appends):
        A = rng.standard_normal((append_rows, features))
        latencies.append(timed(lambda: client.append(ds.dataset_id, A, A.sum(axis=1))))
    info = client.dataset(ds.dataset_id)
    assert info.num_rows == rows + appends * append_rows, info
    latencies.sort()
    return {"base_rows": rows, "upload_seconds": upload_seconds,
            "append_ms": latencies,
            "append_ms_median": latencies[len(latencies) // 2],
            "append_ms_max": latencies[-1]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--base_rows", type=int, default=1_000_000)
    ap.add_argument("--small_rows", type=int, default=10_000)
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--append_rows", type=int, default=1000)
    ap.add_argument("--appends", type=int, default=20)
    ap.add_argument("--json_out", default="")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bnn_append_cost_")
    data_dir, log_path = os.path.join(tmp, "data"), os.path.join(tmp, "log")
    rng = np.random.default_rng(0)
    result = {"features": args.features, "append_rows": args.append_rows,
              "appends": args.appends}
    proc, address = start(args.server, data_dir, log_path, [])
    try:
        c = bnn_serve.Client(address)
        result["small"] = append_latencies(c, rng, args.small_rows, args.features,
                                           args.append_rows, args.appends)
        result["large"] = append_latencies(c, rng, args.base_rows, args.features,
                                           args.append_rows, args.appends)
        c.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    result["large_over_small_median"] = (result["large"]["append_ms_median"] /
                                         result["small"]["append_ms_median"])
    result["load_average"] = os.getloadavg()
    result["build"] = provenance(args.server)
    print(json.dumps(result, indent=2))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=2)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
