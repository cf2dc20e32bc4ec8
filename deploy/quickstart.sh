#!/usr/bin/env bash
# README command 1, the demo: installs the dependencies, builds bnn-server and
# bnnctl (Release, in build/), starts the server on a free loopback port with
# its store in var/quickstart/, fits SLANG to the 1-D cubic regression set of
# Mishkin et al. (2018), App. F.1 (30 points, x ~ U[-4, 4], y = x^3 + eps,
# eps ~ N(0, 9)) and prints the predictive mean +- std on x = -8..8, twice the
# width of the data. The server is stopped however the script ends.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# SLANG settings for the demo: one hidden layer of 10 ReLU units, full-batch
# steps with 20 MC samples. Targets are standardised by the server, so
# noise_precision is in standardised units: y has a std of about 28 and the
# noise of 3, i.e. tau ~ 90; tau = 30 leaves room for the misfit of a small
# net.
readonly TRAIN_ARGS=(
  --method slang --hidden 10 --activation relu --epochs 500 --seed 1
  --param rank=1 --param mc_samples=20 --param batch_size=30
  --param learning_rate=0.1 --param beta=0.05 --param noise_precision=30
)
readonly DATA_SEED=20180524
readonly BUILD_DIR=build
readonly DATA_DIR=var/quickstart

step() { printf '\n==> %s\n' "$*"; }

step "Installing dependencies"
deploy/install-deps.sh

step "Building bnn-server and bnnctl (Release, ${BUILD_DIR}/)"
echo "The first build takes about 5 minutes on 2 cores."
configure=(-S . -B "${BUILD_DIR}" -DCMAKE_BUILD_TYPE=Release
  -DBNN_BUILD_TESTS=OFF -DBNN_BUILD_BENCH=OFF)
if [[ ! -f "${BUILD_DIR}/CMakeCache.txt" ]] && command -v ninja >/dev/null; then
  configure+=(-G Ninja)
fi
mkdir -p "${BUILD_DIR}"
build_log="${BUILD_DIR}/quickstart-build.log"
# The compiler's output goes to a log; the demo shows it only on failure.
if ! { cmake "${configure[@]}" &&
  cmake --build "${BUILD_DIR}" --parallel "$(nproc)" \
    --target bnn-server bnnctl; } >"${build_log}" 2>&1; then
  tail -n 40 "${build_log}" >&2
  echo "Build failed; the full log is ${build_log}" >&2
  exit 1
fi
echo "Built; log in ${build_log}"

readonly SERVER_BIN="${BUILD_DIR}/server/bnn-server"
readonly BNNCTL_BIN="${BUILD_DIR}/client/bnnctl"

work_dir="$(mktemp -d)"
server_pid=""
cleanup() {
  if [[ -n "${server_pid}" ]] && kill -0 "${server_pid}" 2>/dev/null; then
    kill "${server_pid}"
    wait "${server_pid}" 2>/dev/null || true
    echo "bnn-server stopped"
  fi
  rm -rf "${work_dir}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "Starting bnn-server (store: ${DATA_DIR}/)"
# A fresh store each run keeps the demo's output reproducible.
rm -rf "${DATA_DIR}"
mkdir -p "${DATA_DIR}"
server_log="${work_dir}/server.log"
"${SERVER_BIN}" --listen 127.0.0.1:0 --data-dir "${DATA_DIR}" \
  --metrics-listen "" >"${server_log}" 2>&1 &
server_pid=$!
address=""
for _ in $(seq 300); do
  address="$(grep -o -m1 'listening on 127\.0\.0\.1:[0-9]*' "${server_log}" \
    | sed 's/^listening on //' || true)"
  [[ -n "${address}" ]] && break
  if ! kill -0 "${server_pid}" 2>/dev/null; then
    echo "bnn-server exited during startup:" >&2
    cat "${server_log}" >&2
    exit 1
  fi
  sleep 0.1
done
if [[ -z "${address}" ]]; then
  echo "bnn-server did not report its port within 30 s:" >&2
  cat "${server_log}" >&2
  exit 1
fi
echo "bnn-server listening on ${address}"

bnnctl() { "${BNNCTL_BIN}" --server "${address}" "$@"; }
# Reads one field of the JSON object on stdin.
json_field() {
  python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

step "Generating the cubic data set (30 points, seed ${DATA_SEED})"
python3 - "${DATA_SEED}" >"${work_dir}/cubic.csv" <<'PY'
import random
import sys

rng = random.Random(int(sys.argv[1]))
print("x,y")
for _ in range(30):
    x = rng.uniform(-4.0, 4.0)
    print(f"{x!r},{x ** 3 + rng.gauss(0.0, 3.0)!r}")
PY
python3 -c 'print("x"); [print(i / 2) for i in range(-16, 17)]' \
  >"${work_dir}/grid.csv"

step "Uploading with bnnctl"
dataset_id="$(bnnctl --json upload --name cubic --task regression \
  --csv "${work_dir}/cubic.csv" --target y | json_field dataset_id)"
bnnctl dataset "${dataset_id}"

step "Training SLANG: bnnctl train ${TRAIN_ARGS[*]}"
job_id="$(bnnctl --json train --dataset "${dataset_id}" "${TRAIN_ARGS[@]}" \
  | json_field job_id)"
bnnctl --json job "${job_id}" --wait --wait-timeout 600 >"${work_dir}/job.json"
snapshot_id="$(json_field snapshot_id <"${work_dir}/job.json")"
python3 - "${work_dir}/job.json" <<'PY'
import json
import sys

with open(sys.argv[1]) as f:
    job = json.load(f)
seconds = (job["finished_unix_ms"] - job["started_unix_ms"]) / 1000
print(f"job {job['job_id']} {job['state']}: {job['step']} steps in "
      f"{seconds:.1f} s, last loss {job['last_loss']:.3f}; "
      f"snapshot {job['snapshot_id']}")
PY

step "Predictive mean ± std on x = -8..8 (training data only in [-4, 4])"
bnnctl --json predict --snapshot "${snapshot_id}" --csv "${work_dir}/grid.csv" \
  --samples 500 --seed 7 >"${work_dir}/predictions.json"
python3 - "${work_dir}/predictions.json" <<'PY'
import json
import math
import statistics
import sys

with open(sys.argv[1]) as f:
    rows = json.load(f)["predictions"]
stds = [row["std"] for row in rows]
if any(s is None or not math.isfinite(s) for s in stds):
    sys.exit("non-finite predictive std in the server's answer")
scale = 40 / max(stds)
print(f"{'x':>6}  {'mean':>9}   {'std':>7}")
for row in rows:
    x, mean, std = row["x"][0], row["mean"], row["std"]
    bar = "#" * max(1, round(std * scale))
    marker = " " if abs(x) <= 4 else "*"
    print(f"{x:6.1f}{marker} {mean:9.2f} ± {std:7.2f}  {bar}")
inside = statistics.mean(s for r, s in zip(rows, stds) if abs(r["x"][0]) <= 4)
outside = statistics.mean(s for r, s in zip(rows, stds) if abs(r["x"][0]) >= 6)
print(f"\n* outside the data. Mean std for |x| <= 4: {inside:.2f}; "
      f"for |x| >= 6: {outside:.2f} ({outside / inside:.1f}x).")
PY
