#!/usr/bin/env bash
# Issue 16: every committed record must name the binary that produced it.
# The records written before the experiment tool compiled in its build
# (each has a `git_commit` field but no `build` block) are re-run here with
# one binary built from a clean commit, cheapest groups first, each group
# by docs/results/rerun.py from the command its record holds. Resumable:
# a group's records already re-run are only compared again. Usage:
#   docs/results/rerun_provenance.sh BNN_EXPERIMENT OUT_DIR [GROUP...]
# GROUP is a folder under docs/results (default: all below, in order).
# OUT_DIR/<group>/ receives the new records (named as rerun.py names them)
# and OUT_DIR/<group>.log the comparison with the committed ones; the
# committed records are replaced, and their reports regenerated, only
# after that comparison has been read.
# Not here: reruns/ (records of what older commits gave, by design),
# bali/fmnist (rerun with run_fmnist.sh, which builds its OOD sets) and
# faults/ (bnn_crash_test records, rerun by the command in faults.md).
set -uo pipefail
BIN=${1:?path to bnn-experiment (built from a clean commit)}
OUT=${2:?folder for the new records}
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
GROUPS_IN_ORDER=(
  nng/table1 nng/table3 bali/diagnosis/mc_dropout
  bali/diagnosis/mc_dropout_400_epochs bali/diagnosis/concrete
  bali/diagnosis/wine-red bali/diagnosis/kin8nm
  bali/diagnosis/mc_dropout_wine_grid_from_1
  bali/diagnosis/table1_u0_standardised
  bali/diagnosis/mc_dropout_narrow_grid bali/table1 slang/table2/pilot
  slang/table2 slang/table2/diagnosis slang/table1 slang/table2_full/pilot
  slang/table2_full nng/table4 nng/table4/tau2
)
[[ $# -gt 0 ]] && GROUPS_IN_ORDER=("$@")
mkdir -p "$OUT"
status=0
for group in "${GROUPS_IN_ORDER[@]}"; do
  records=(docs/results/"$group"/*.json)
  echo "== $group: ${#records[@]} records $(date -u +%FT%TZ)"
  # One HMC reference per dataset, shared by every method of NNG Table 4
  # (as run_table4.sh does); bnn-experiment computes it on first use.
  python3 docs/results/rerun.py --bin "$BIN" --out "$OUT/${group//\//_}" \
    --missing-build --replace "/tmp/blktri_t4/hmc=$OUT/hmc" \
    "${records[@]}" > "$OUT/${group//\//_}.log" 2>&1 || status=1
  grep -c "^== " "$OUT/${group//\//_}.log" | sed 's/^/   re-run or compared: /'
done
exit $status
