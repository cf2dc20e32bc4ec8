#!/usr/bin/env bash
# SLANG Tables 2 and 5: SLANG (L = 1), BBB and SLANG-OnlineEig (Table 5) on
# six UCI regression sets, protocol of reference/slang.md §9.4 with a grid
# instead of Bayesian optimisation.
# Usage:
#   docs/results/slang/run_table2.sh BNN_EXPERIMENT UCI_DIR [OUT_DIR] [DATASET...]
# SPLITS (default 0: every split of the dataset, 20 for the shared sets) and
# FOLDS (default 5) override the protocol's split and fold counts, for runs
# that must fit a time budget. Any folder of UCI_DIR in the split layout
# works: minibatch and MC samples come from the paper's rule
# (docs/results/uci_protocol.py slang-table2, which prints what each set got).
# Per dataset and method:
#   1. pilot: on the training part of split 0 only, 5-fold CV over a coarse
#      noise-precision grid tau in {1, 2, 4, ..., 1024} (standardised target
#      units) with lambda = 1. Its best tau^ fixes the search space, as the
#      paper's initial random search fixed its BO spaces; no test data is used.
#   2. main: on each of the 20 splits, 5-fold CV on the training split over
#      lambda in {0.1, 1, 10} (weights and biases, isotropic as eq. 30) x
#      tau in {tau^/sqrt2, tau^, tau^ sqrt2}; the best by mean validation
#      test log-likelihood is retrained on the whole training split and
#      evaluated on the test split (100 posterior samples).
# STATE_DIR=DIR keeps each main run's finished splits in
# DIR/<dataset>_<method>.state (bnn-experiment --splits-state): the same
# command run again continues a stopped run where it stopped (a full
# protocol on kin8nm is longer than a session).
# WIDE=1 widens the main grid where the committed runs' searches chose an
# edge on most splits (README.md, "Grid edges"): lambda in {0.01, 0.1, 1, 10}
# x tau in tau^ x {1/2, 2^-1/2, 1, 2^1/2, 2} (20 points instead of 9).
set -euo pipefail
BIN=${1:?path to bnn-experiment}
UCI=${2:?folder with the UCI dataset folders}
OUT=${3:-docs/results/slang/table2}
shift $(( $# < 3 ? $# : 3 ))
DATASETS=("$@")
[ ${#DATASETS[@]} -gt 0 ] || DATASETS=(boston concrete energy wine-red yacht kin8nm)
THREADS=${THREADS:-2}
SPLITS=${SPLITS:-0}
FOLDS=${FOLDS:-5}
METHODS=${METHODS:-slang bbb slang_online_eig}  # a subset runs only those
HERE=$(cd "$(dirname "$0")" && pwd)
LAMBDAS=0.1,1,10
TAU_FACTORS="2 ** -0.5, 1, 2 ** 0.5"
if [ "${WIDE:-0}" = 1 ]; then
  LAMBDAS=0.01,0.1,1,10
  TAU_FACTORS="0.5, 2 ** -0.5, 1, 2 ** 0.5, 2"
fi
mkdir -p "$OUT/pilot"

for dataset in "${DATASETS[@]}"; do
  # 120 epochs; minibatch 10 and 4 MC samples for the small sets (< 2000
  # rows), 100 and 2 for the larger ones (kin8nm).
  eval "$(python3 "$HERE/../uci_protocol.py" slang-table2 "$UCI/$dataset")"
  SIZE="--param batch_size=$BATCH --param mc_samples=$MC_SAMPLES"
  for method in $METHODS; do
    if [ $method = slang_online_eig ]; then
      # Table 5 (App. B.3): SLANG-OnlineEig with the learning rates fixed
      # for every dataset, alpha = 0.01 and "beta = (0.9, 0.999)", read as
      # the reference code's momentum 0.9 and 1 - beta = 0.999; L = 1; the
      # paper's fast_eig in double, pinned.
      METHOD="--method slang_online_eig --param rank=1 --param learning_rate=0.01 --param beta=0.001 --param momentum=0.9 --param eig_solver=randomized --param precision=float64"
    elif [ $method = slang ]; then
      # Reference-code UCI settings: alpha = beta = 0.01, no decay,
      # momentum 0.9, d_0 = 1 (the SlangOptions defaults); L = 1; the
      # paper's fast_eig in double, pinned (the default eig_solver=auto may
      # pick the exact solver).
      METHOD="--method slang --param rank=1 --param eig_solver=randomized --param precision=float64"
    else
      # Adam, step 0.01 (the paper tuned it per dataset; see README).
      METHOD="--method bbb --param learning_rate=0.01"
    fi
    COMMON="--data-dir $UCI --dataset $dataset $METHOD --param epochs=120 $SIZE --seed 0"
    pilot="$OUT/pilot/${dataset}_${method}.json"
    [ -s "$OUT/${dataset}_${method}.json" ] && continue  # rerun = resume
    echo "== $dataset $method pilot" >&2
    "$BIN" uci $COMMON --splits 1 --param prior_precision=1 \
      --param bias_prior_precision=1 \
      --tune noise_precision=1,2,4,8,16,32,64,128,256,512,1024 --folds "$FOLDS" \
      --json-out "$pilot" > "${pilot%.json}.md"
    TAU=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['splits'][0]['chosen']['noise_precision'])" "$pilot")
    GRID=$(python3 -c "import sys; t=float(sys.argv[1]); print(','.join('%.4g' % (t * f) for f in ($TAU_FACTORS)))" "$TAU")
    echo "== $dataset $method main (tau grid $GRID)" >&2
    STATE=()
    if [ -n "${STATE_DIR:-}" ]; then
      mkdir -p "$STATE_DIR"
      STATE=(--splits-state "$STATE_DIR/${dataset}_${method}.state")
    fi
    "$BIN" uci $COMMON --splits "$SPLITS" --threads "$THREADS" "${STATE[@]}" \
      --tune prior_precision+bias_prior_precision=$LAMBDAS \
      --tune noise_precision=$GRID --folds "$FOLDS" --test-samples 100 \
      --json-out "$OUT/${dataset}_${method}.json" > "$OUT/${dataset}_${method}.md"
  done
done
