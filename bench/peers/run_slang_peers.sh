#!/usr/bin/env bash
# bnn-serve's SLANG step and its PyTorch peer, side by side in one run
# (issue 15; docs/results/perf.md):
#
#   bench/peers/run_slang_peers.sh BNN_PERF_BENCH [OUT_DIR] [THREADS...]
#
# For each thread count (default 1 2): bnn_perf_bench's SlangStep cases
# (default, float64/float32 x randomized/exact; 3 repetitions,
# OMP_NUM_THREADS) and bench/peers/torch_slang_step.py on the same sizes and
# synthetic data (torch.set_num_threads; its self-checks run first and stop
# the run if wrong), then the table (make_slang_table.py) in
# OUT_DIR/slang_peers.md. Needs python3-torch with libopenblas0-pthread
# (deploy/install-deps.sh --peers); uses /usr/bin/python3, Debian's modules.
# Run it on a quiet machine: both sides are timed by wall clock. The
# MNIST-size cases dominate (the peer's step holds a 478,410 x 800 gradient
# matrix: 3 GB in float64).
set -euo pipefail
BENCH=${1:?path to bnn_perf_bench}
OUT=${2:-docs/results/perf/peers}
shift $(( $# < 2 ? $# : 2 ))
THREADS=("$@")
[ ${#THREADS[@]} -gt 0 ] || THREADS=(1 2)
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
mkdir -p "$OUT"
uptime > "$OUT/slang_load_before.txt"
for t in "${THREADS[@]}"; do
  echo "== bnn-serve, $t thread(s)" >&2
  # '^SlangStep/' leaves out NngStep/slang_*, SmallJob/slang and
  # SlangStepWidth, which have no peer here.
  OMP_NUM_THREADS=$t "$BENCH" --benchmark_filter='^SlangStep/' \
    --benchmark_repetitions=3 --benchmark_out_format=json \
    --benchmark_out="$OUT/slang_bnn_threads$t.json" >&2
  echo "== PyTorch, $t thread(s)" >&2
  "$PYTHON" "$HERE/torch_slang_step.py" --threads "$t" \
    --json_out "$OUT/slang_torch_threads$t.json" >&2
done
uptime > "$OUT/slang_load_after.txt"
"$PYTHON" "$HERE/make_slang_table.py" "$OUT" > "$OUT/slang_peers.md"
cat "$OUT/slang_peers.md"
