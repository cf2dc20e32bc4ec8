#!/usr/bin/env bash
# bnn-serve's in-process Predict and its PyTorch peer, side by side in one
# run (issue 15; docs/results/perf.md, "Predict against a PyTorch peer"):
#
#   bench/peers/run_predict_peers.sh BNN_PERF_BENCH [OUT_DIR] [THREADS...]
#
# For each thread count (default 1 2): bnn_perf_bench's BM_Predict and
# BM_PredictCold cases (float64 and float32, 3 repetitions, OMP_NUM_THREADS)
# and bench/peers/torch_predict.py on the same nets, sizes and posterior
# (torch.set_num_threads), then the table (make_predict_table.py) in
# OUT_DIR/predict_peers.md. Needs python3-torch with libopenblas0-pthread
# (deploy/install-deps.sh --peers); uses /usr/bin/python3, Debian's modules.
# Run it on a quiet machine: both sides are timed by wall clock.
set -euo pipefail
BENCH=${1:?path to bnn_perf_bench}
OUT=${2:-docs/results/perf/peers}
shift $(( $# < 2 ? $# : 2 ))
THREADS=("$@")
[ ${#THREADS[@]} -gt 0 ] || THREADS=(1 2)
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
mkdir -p "$OUT"
uptime > "$OUT/load_before.txt"
for t in "${THREADS[@]}"; do
  echo "== bnn-serve, $t thread(s)" >&2
  OMP_NUM_THREADS=$t "$BENCH" --benchmark_filter='BM_Predict' \
    --benchmark_repetitions=3 --benchmark_out_format=json \
    --benchmark_out="$OUT/bnn_threads$t.json" >&2
  echo "== PyTorch, $t thread(s)" >&2
  "$PYTHON" "$HERE/torch_predict.py" --threads "$t" \
    --json_out "$OUT/torch_threads$t.json" >&2
done
uptime > "$OUT/load_after.txt"
"$PYTHON" "$HERE/make_predict_table.py" "$OUT" > "$OUT/predict_peers.md"
cat "$OUT/predict_peers.md"
