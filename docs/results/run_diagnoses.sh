#!/usr/bin/env bash
# Every diagnosis run the reports quote, re-run from the command its JSON
# record holds (docs/results/rerun.py), with the new metrics compared split
# by split with the committed ones: 84 records, whose recorded wall times add
# up to 184 min (with the threads each was run with). Usage:
#   docs/results/run_diagnoses.sh BNN_EXPERIMENT [OUT_DIR] [DATA_DIR]
# DATA_DIR (default $BNN_DATA_DIR) replaces the recorded datasets root.
set -euo pipefail
BIN=${1:?path to bnn-experiment}
OUT=${2:-/tmp/bnn-diagnoses}
DATA=${3:-${BNN_DATA_DIR:-/work/shared/datasets}}
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
shopt -s globstar nullglob
python3 docs/results/rerun.py --bin "$BIN" --out "$OUT" --data-dir "$DATA" \
  --threads "${THREADS:-1}" \
  docs/results/bali/diagnosis/**/*.json \
  docs/results/slang/table2/diagnosis/*.json \
  docs/results/nng/table3/diagnostics/*.json
