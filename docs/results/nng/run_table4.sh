#!/usr/bin/env bash
# NNG Table 4 (reference/nng.md §6.3): Pearson correlation of each NNG
# method's predictive variances with HMC's, against ONE shared HMC reference
# per dataset and trial.
# Usage:
#   docs/results/nng/run_table4.sh BNN_EXPERIMENT UCI_DIR [OUT_DIR] [DATASET...]
# Environment: SPLITS (trials per dataset, default 10), EPOCHS (per fit,
# default 20000), METHODS (default "noisy_adam noisy_kfac nng_blktri"),
# REF_DIR (folder for the shared HMC snapshots, default OUT_DIR/hmc, not
# committed), HMC (the HMC settings, see below), NICE (default 10).
# Per dataset and trial (bnn-experiment active-learning --rounds 0):
#   * a seeded shuffle of all rows: 20 labelled training rows and 100 test
#     rows (App. C.3; the same partitions as run_table3.sh, seed 0);
#   * a 1 x 10 ReLU net; NNG methods with a Gaussian likelihood, a
#     Gamma(6, 6) prior on tau and a fitted q(tau), alpha~ = 0.01,
#     beta~ = 0.01, gamma_ex = 0, lambda = 1, prior N(0, I), EPOCHS
#     full-batch epochs (the paper: 20000);
#   * each method's epistemic predictive variances on the 100 test rows from
#     1000 posterior samples, correlated with HMC's;
#   * HMC, shared by every method (--reference-dir): trained once per trial
#     on the same 20 rows by the first method's run and read back by the
#     others. Its settings do not depend on any method: prior N(0, I) on
#     weights and biases (the NNG methods' prior), a FIXED noise precision
#     tau = 1 in standardised units (the mean of the Gamma(6, 6) prior all
#     three methods start q(tau) from; our HMC cannot sample tau), 20 chains
#     x (2000 warm-up + 20000 iterations) of 20 leapfrog steps, every 20th
#     kept (20000 samples; the predictive draws 1000). The paper: 20 chains
#     x 100000 iterations.
set -euo pipefail
BIN=${1:?path to bnn-experiment}
UCI=${2:?folder with the UCI dataset folders}
OUT=${3:-docs/results/nng/table4}
shift $(( $# < 3 ? $# : 3 ))
DATASETS=("$@")
[ ${#DATASETS[@]} -gt 0 ] || DATASETS=(boston concrete energy kin8nm wine-red yacht)
SPLITS=${SPLITS:-10}
EPOCHS=${EPOCHS:-20000}
METHODS=${METHODS:-"noisy_adam noisy_kfac nng_blktri"}
REF_DIR=${REF_DIR:-$OUT/hmc}
HMC=${HMC:-"chains=20,warmup=2000,epochs=22000,thin=20,max_samples=1000,leapfrog_steps=20,noise_precision=1,prior_precision=1,bias_prior_precision=1"}
NICE=${NICE:-10}
mkdir -p "$OUT" "$REF_DIR"

for dataset in "${DATASETS[@]}"; do
  for method in $METHODS; do
    name="${dataset}_${method}"
    echo "== $name" >&2
    nice -n "$NICE" "$BIN" active-learning --data-dir "$UCI" --dataset "$dataset" \
      --method "$method" --param epochs="$EPOCHS" --param batch_size=32 \
      --hidden 10 --acquisition max_variance --rounds 0 --initial 20 \
      --test-points 100 --test-samples 1000 --acquire-samples 1000 \
      --splits "$SPLITS" --threads 1 --seed 0 \
      --reference hmc --reference-dir "$REF_DIR" --reference-params "$HMC" \
      --json-out "$OUT/$name.json" > "$OUT/$name.md"
  done
done
