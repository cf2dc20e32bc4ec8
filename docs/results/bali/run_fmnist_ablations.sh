#!/usr/bin/env bash
# BALI on F-MNIST (issue 16): the recorded ablations behind fmnist.md's
# diagnosis. Each ablation is the Table 5 run of run_fmnist.sh (alpha 0.25,
# beta 0.1, sigma_r^2 10, sigma_u^2 = 0.01 N_eff, N_eff = N/50, B 2048,
# sigma_init 1, 784-256-256-10 leaky tanh, seed 0) with one choice changed,
# at ITERS iterations (BALI's test accuracy plateaus by ~600 of them), and
# writes OUT/<name>_<ITERS>.json and .md. Usage:
#   docs/results/bali/run_fmnist_ablations.sh BNN_EXPERIMENT [OUT_DIR] [NAME...]
# e.g. run_fmnist_ablations.sh build/bench/accuracy/bnn-experiment \
#        docs/results/bali/fmnist/ablation u_from_n
# With no NAME, every ablation runs (one process at a time; run two NAME
# lists side by side on the two cores with THREADS=1 each).
# VALIDATION_DIR=DIR (from bench/accuracy/make_validation_split.py DIR)
# trains on its 50,000 training rows and evaluates on its 10,000 validation
# rows instead of the test set, for choosing a setting without the test set;
# the records are then named <name>_<ITERS>_validation.
# SEED=K (default 0) seeds the run; records of K != 0 are named
# <name>_<ITERS>[_validation]_seedK.
# CHECKPOINT_DIR=DIR keeps each run's state in DIR/<record>.ckpt every
# CHECKPOINT_SECONDS (default 600) of training: the same command run again
# continues a run that was stopped (the 30,000-iteration run is longer than
# a session) and finishes with the record of an uninterrupted run (same
# binary and THREADS).
# SNAPSHOT_DIR=DIR saves each run's model as DIR/<record>.snap (for
# `bnn-experiment ood --snapshot`).
set -euo pipefail
BIN=${1:?path to bnn-experiment}
OUT=${2:-docs/results/bali/fmnist/ablation}
shift $(($# < 2 ? $# : 2))
ITERS=${ITERS:-2000}
EVERY=${EVERY:-200}
THREADS=${THREADS:-1}
SEED=${SEED:-0}
FM=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
mkdir -p "$OUT"
TRAIN="$FM/train-images-idx3-ubyte.gz:$FM/train-labels-idx1-ubyte.gz"
TEST="$FM/t10k-images-idx3-ubyte.gz:$FM/t10k-labels-idx1-ubyte.gz"
SUFFIX=""
if [[ -n ${VALIDATION_DIR:-} ]]; then
  V=$VALIDATION_DIR
  TRAIN="$V/train-images-idx3-ubyte.gz:$V/train-labels-idx1-ubyte.gz"
  TEST="$V/validation-images-idx3-ubyte.gz:$V/validation-labels-idx1-ubyte.gz"
  SUFFIX="_validation"
fi
[[ $SEED == 0 ]] || SUFFIX="${SUFFIX}_seed$SEED"
# 1 / (255 sqrt(785)): the 1/sqrt(D_0 + 1) feature scale of eq. 12 applied to
# the first layer too (except its bias input), the other reading of §1.1.
SCALED="--idx-scale 0.000139967"
# Between the two readings (on a log scale): a half, 1 / (255 785^(1/4)),
# and a quarter of the way, 1 / (255 785^(1/8)). Scaling the inputs by c
# multiplies the first layer's data precision by c^2 against its fixed prior
# R_0^-1, like a first-layer prior variance of sigma_r^2 c^2 in pixel units:
# 10 (literal), 1.9 (quarter), 0.36 (half), 0.013 (scaled).
HALF_SCALED="--idx-scale 0.000740871"
QUARTER_SCALED="--idx-scale 0.00170452"
# An eighth and three eighths of the way: 1 / (255 785^(1/16)) and
# 1 / (255 785^(3/16)) (first-layer prior variance 4.4 and 0.82).
EIGHTH_SCALED="--idx-scale 0.00258542"
THREE_EIGHTHS_SCALED="--idx-scale 0.00112376"
# u = u_0 + N (Algorithm 1 as printed) instead of u_0 + N_eff: prior_dof
# (u_0 - D_y) grows by N - N_eff = 60,000 - 1,200, so the IW mode divides
# U (which scales with N_eff) by ~N: 50x less weight noise.
U_FROM_N="--param prior_dof=58801"

declare -A ABLATION=(
  [literal]=""
  [u_from_n]="$U_FROM_N"
  [scaled_inputs]="$SCALED"
  [scaled_inputs_u_from_n]="$SCALED $U_FROM_N"
  [half_scaled_inputs]="$HALF_SCALED"
  [quarter_scaled_inputs]="$QUARTER_SCALED"
  [eighth_scaled_inputs]="$EIGHTH_SCALED"
  [three_eighths_scaled_inputs]="$THREE_EIGHTHS_SCALED"
  [standardized_inputs]="--param standardize=true"
  [n_eff_from_70k]="--param n_eff_fraction=0.0233333"
  [local_reparameterization]="--param reparameterization=local"
)
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  names=(literal u_from_n scaled_inputs scaled_inputs_u_from_n
         eighth_scaled_inputs quarter_scaled_inputs three_eighths_scaled_inputs
         half_scaled_inputs standardized_inputs n_eff_from_70k
         local_reparameterization)
fi
for name in "${names[@]}"; do
  if [[ -z ${ABLATION[$name]+set} ]]; then
    echo "unknown ablation '$name'; known: ${!ABLATION[*]}" >&2
    exit 2
  fi
  echo "== $name (${ITERS} iterations): ${ABLATION[$name]}" >&2
  record="${name}_$ITERS$SUFFIX"
  CHECKPOINT=()  # and the snapshot flag
  if [[ -n ${CHECKPOINT_DIR:-} ]]; then
    mkdir -p "$CHECKPOINT_DIR"
    CHECKPOINT=(--checkpoint "$CHECKPOINT_DIR/$record.ckpt"
                --checkpoint-seconds "${CHECKPOINT_SECONDS:-600}")
  fi
  if [[ -n ${SNAPSHOT_DIR:-} ]]; then
    mkdir -p "$SNAPSHOT_DIR"
    CHECKPOINT+=(--save-snapshot "$SNAPSHOT_DIR/$record.snap")
  fi
  # shellcheck disable=SC2086  # the flag strings split into words
  "$BIN" classify --method bali --param alpha=0.25 --param beta=0.1 \
    --param prior_variance=10 --param noise_prior_scale=0.01 \
    --param n_eff_fraction=0.02 --param batch_size=2048 --param init_std=1 \
    --hidden 256,256 --activation leaky_tanh ${ABLATION[$name]} \
    --train-idx "$TRAIN" --test-idx "$TEST" \
    --iterations "$ITERS" --eval-every "$EVERY" --curve-samples 16 \
    --curve-train-rows 10000 --test-samples 128 --seed "$SEED" \
    --threads "$THREADS" "${CHECKPOINT[@]}" \
    --json-out "$OUT/$record.json" > "$OUT/$record.md"
done
