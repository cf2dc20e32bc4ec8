#!/usr/bin/env python3
"""Every JSON the bench/perf programs write names the binary that produced
it (issue 16): a build block with the compiled-in commit, whether its tree
was clean, and the SHA-256 of the binary that ran (and of the bnn-server it
drove), which must equal the file's actual hash. Runs each program on its
smallest case (a few seconds in all): a smoke of the programs too.

  provenance_test.py BUILD_DIR
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_build(name, build, binary, server=None):
    errors = []
    if not re.fullmatch(r"[0-9a-f]{7,40}|unknown", str(build.get("commit"))):
        errors.append(f"commit {build.get('commit')!r} is not a git hash")
    if build.get("tree_clean") not in (True, False, "true", "false"):
        errors.append(f"tree_clean {build.get('tree_clean')!r} is not a bool")
    if build.get("binary_sha256") != sha256(binary):
        errors.append(f"binary_sha256 {build.get('binary_sha256')!r} is not "
                      f"the SHA-256 of {binary}")
    if server and build.get("server_sha256") != sha256(server):
        errors.append(f"server_sha256 {build.get('server_sha256')!r} is not "
                      f"the SHA-256 of {server}")
    return [f"{name}: {e}" for e in errors]


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=300)


def main():
    build_dir = sys.argv[1]
    perf = os.path.join(build_dir, "bench", "perf")
    server = os.path.join(build_dir, "server", "bnn-server")
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        # The Google Benchmark programs: the block is in the context.
        for program, bench_filter in (("bnn_perf_bench", "BM_CounterRng"),
                                      ("bnn_store_bench", "BM_GetJob")):
            binary = os.path.join(perf, program)
            out = os.path.join(tmp, program + ".json")
            run([binary, f"--benchmark_filter={bench_filter}",
                 "--benchmark_min_time=0.01", f"--benchmark_out={out}",
                 "--benchmark_out_format=json"])
            context = json.load(open(out))["context"]
            errors += check_build(program, {
                "commit": context.get("bnn_build_commit"),
                "tree_clean": context.get("bnn_build_tree_clean"),
                "binary_sha256": context.get("bnn_binary_sha256")}, binary)
        binary = os.path.join(perf, "bnn_train_memory")
        out = os.path.join(tmp, "train_memory.json")
        run([binary, "--rows", "200", "--steps", "2", "--hidden", "8",
             "--param", "rank=2,mc_samples=2,batch_size=20",
             "--json_out", out])
        record = json.load(open(out))
        errors += check_build("bnn_train_memory", record["build"], binary)
        if not record["peak_rss_bytes"] >= record["rss_before_bytes"] > 0:
            errors.append(f"bnn_train_memory: RSS figures {record}")
        binary = os.path.join(perf, "bnn_predict_latency")
        out = os.path.join(tmp, "predict_latency.json")
        run([binary, "--only", "uci", "--seconds", "0.05", "--server", server,
             "--json_out", out])
        record = json.load(open(out))
        errors += check_build("bnn_predict_latency", record["build"], binary,
                              server)
        if not any(r["mode"] == "grpc" for r in record["results"]):
            errors.append("bnn_predict_latency: no gRPC case in the record")
    for e in errors:
        print(e)
    print("FAILED" if errors else "OK: 4 programs' records carry their build")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
