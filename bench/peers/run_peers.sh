#!/usr/bin/env bash
# bnn-serve and its PyTorch peer, side by side in one run (issue 15;
# docs/results/perf.md):
#
#   bench/peers/run_peers.sh predict|slang BNN_PERF_BENCH [OUT_DIR] [THREADS...]
#
# For each thread count (default 1 2), bnn_perf_bench's cases (3
# repetitions, OMP_NUM_THREADS), then the peer on the same sizes
# (torch.set_num_threads), then the table in OUT_DIR:
#   predict  BM_Predict and BM_PredictCold (float64 and float32), and
#            BM_GemmRate (the machine's GEMM rate, the yardstick), against
#            torch_predict.py; make_predict_table.py -> predict_peers.md
#   slang    the SlangStep cases (default, float64/float32 x randomized/
#            exact; '^SlangStep/' leaves out NngStep/slang_*, SmallJob/slang
#            and SlangStepWidth, which have no peer) against
#            torch_slang_step.py (its self-checks run first and stop the run
#            if wrong); make_slang_table.py -> slang_peers.md, files slang_*
# Needs python3-torch with libopenblas0-pthread (deploy/install-deps.sh
# --peers); uses /usr/bin/python3, Debian's modules. Run it on a quiet
# machine: both sides are timed by wall clock.
set -euo pipefail
KIND=${1:?predict or slang}
BENCH=${2:?path to bnn_perf_bench}
OUT=${3:-docs/results/perf/peers}
shift $(( $# < 3 ? $# : 3 ))
THREADS=("$@")
[ ${#THREADS[@]} -gt 0 ] || THREADS=(1 2)
case "$KIND" in
  predict) FILTER='BM_Predict|BM_GemmRate'; PEER=torch_predict.py; PREFIX= ;;
  slang) FILTER='^SlangStep/'; PEER=torch_slang_step.py; PREFIX=slang_ ;;
  *) echo "usage: $0 predict|slang BNN_PERF_BENCH [OUT_DIR] [THREADS...]" >&2
     exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
mkdir -p "$OUT"
uptime > "$OUT/${PREFIX}load_before.txt"
for t in "${THREADS[@]}"; do
  echo "== bnn-serve, $t thread(s)" >&2
  OMP_NUM_THREADS=$t "$BENCH" --benchmark_filter="$FILTER" \
    --benchmark_repetitions=3 --benchmark_out_format=json \
    --benchmark_out="$OUT/${PREFIX}bnn_threads$t.json" >&2
  echo "== PyTorch, $t thread(s)" >&2
  "$PYTHON" "$HERE/$PEER" --threads "$t" \
    --json_out "$OUT/${PREFIX}torch_threads$t.json" >&2
done
uptime > "$OUT/${PREFIX}load_after.txt"
"$PYTHON" "$HERE/make_${KIND}_table.py" "$OUT" > "$OUT/${KIND}_peers.md"
cat "$OUT/${KIND}_peers.md"
