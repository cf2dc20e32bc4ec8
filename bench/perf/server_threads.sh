#!/usr/bin/env bash
# Issue 10, finding 11: the small SLANG job (2-50-50-1 net, 2,000 rows, batch
# 32, 20 epochs = 1,260 steps) through a real bnn-server, once per --threads
# value given (default: the server's default, then 1). Prints the job's
# training seconds as the server measured them and the wall time from
# StartTraining to SUCCEEDED.
#
#   bench/perf/server_threads.sh [BUILD_DIR] [THREADS...]
#   e.g. bench/perf/server_threads.sh build default 1 2
set -euo pipefail
build=${1:-build}
shift || true
settings=("$@")
[ ${#settings[@]} -gt 0 ] || settings=(default 1)
server="$build/server/bnn-server"
bnnctl="$build/client/bnnctl"
work=$(mktemp -d)
trap 'kill "${pid:-0}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

python3 - "$work/data.csv" <<'PY'
import math, random, sys
random.seed(7)
with open(sys.argv[1], "w") as f:
    f.write("a,b,y\n")
    for _ in range(2000):
        a, b = random.uniform(-2, 2), random.uniform(-2, 2)
        f.write(f"{a:.6f},{b:.6f},{math.sin(a) * b + random.gauss(0, 0.1):.6f}\n")
PY

for threads in "${settings[@]}"; do
  flags=()
  [ "$threads" = default ] || flags=(--threads "$threads")
  rm -rf "$work/data"
  "$server" --listen 127.0.0.1:0 --metrics-listen '' --data-dir "$work/data" \
    "${flags[@]}" >"$work/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    grep -q "listening on" "$work/server.log" && break
    sleep 0.1
  done
  address=$(sed -n 's/.*listening on //p' "$work/server.log" | head -1)
  ds=$("$bnnctl" --server "$address" --json upload --name small \
         --task regression --csv "$work/data.csv" --target y |
       python3 -c 'import json,sys; print(json.load(sys.stdin)["dataset_id"])')
  start=$(date +%s.%N)
  job=$("$bnnctl" --server "$address" --json train --dataset "$ds" \
          --method slang --hidden 50,50 --epochs 20 --seed 1 \
          --param batch_size=32 |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["job_id"])')
  snap=$("$bnnctl" --server "$address" --json job "$job" --wait |
         python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["snapshot_id"])')
  end=$(date +%s.%N)
  seconds=$("$bnnctl" --server "$address" --json snapshot "$snap" |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["train_seconds"])')
  printf 'threads=%-8s train_seconds=%.2f wall_seconds=%.2f\n' "$threads" \
    "$seconds" "$(echo "$end - $start" | bc)"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
