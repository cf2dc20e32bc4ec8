#!/usr/bin/env bash
# Runs the fuzz targets of tests/fuzz/ under libFuzzer, with AddressSanitizer
# and UndefinedBehaviorSanitizer, one target at a time.
#
#   bench/fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]
#
# SECONDS_PER_TARGET defaults to 600; TARGET (e.g. csv, request) defaults to
# every tests/fuzz/*_fuzz.cc. Builds with clang (CC=clang CXX=clang++,
# -DBNN_FUZZ=ON) in build-fuzz/ at the repository root; BNN_FUZZ_BUILD_JOBS
# sets the build's parallelism (default 2). Each target starts from its seed
# corpus tests/fuzz/corpus/NAME/ plus what earlier runs found, kept in
# build-fuzz/corpus/NAME/ (the repository's corpus is never written).
# Crashing, hanging (over 10 s) or memory-hungry (over 2 GiB) inputs are
# stored in build-fuzz/artifacts/NAME/; replay one with
# `build-fuzz/tests/fuzz/NAME_fuzz FILE`, and once fixed, keep it as a
# regression input in tests/fuzz/corpus/NAME/. libFuzzer's output is in
# build-fuzz/logs/NAME.log, and a summary table (seconds, executions,
# coverage) is printed at the end and kept in build-fuzz/logs/summary.md.
# Exits 1 if any target found a crash.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-600}
shift || true
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
  echo "usage: $0 [SECONDS_PER_TARGET] [TARGET...]" >&2
  exit 2
fi
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in "$repo"/tests/fuzz/*_fuzz.cc; do
    n=$(basename "$f" _fuzz.cc)
    targets+=("$n")
  done
fi

build=$repo/build-fuzz
CC=clang CXX=clang++ cmake -S "$repo" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBNN_FUZZ=ON \
  -DBNN_BUILD_TESTS=ON -DBNN_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" --parallel "${BNN_FUZZ_BUILD_JOBS:-2}" \
  --target "${targets[@]/%/_fuzz}"

mkdir -p "$build/logs"
summary=$build/logs/summary.md
{
  echo "| target | seconds | executions | execs/s | cov | ft | corpus | crashes |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
} >"$summary"
failed=0
for t in "${targets[@]}"; do
  corpus=$build/corpus/$t
  artifacts=$build/artifacts/$t
  log=$build/logs/$t.log
  mkdir -p "$corpus" "$artifacts"
  cp -n "$repo/tests/fuzz/corpus/$t/"* "$corpus/" 2>/dev/null || true
  before=$(find "$artifacts" -type f | sort)
  echo "==> $t: ${seconds} s (log: $log)"
  status=0
  # One thread per computation (Predict in request_fuzz), as the server's
  # small requests run; the fuzzer itself is single-threaded.
  OMP_NUM_THREADS=1 UBSAN_OPTIONS=print_stacktrace=1 \
    nice -n 10 "$build/tests/fuzz/${t}_fuzz" "$corpus" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=8192 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    >"$log" 2>&1 || status=$?
  found=$(comm -13 <(echo "$before") <(find "$artifacts" -type f | sort) |
    sed '/^$/d')
  crashes=$(sed '/^$/d' <<<"$found" | wc -l)
  final=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$final")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$final")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$final")
  echo "    $final"
  echo "| $t | $seconds | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | $crashes |" >>"$summary"
  if [[ $status -ne 0 || $crashes -gt 0 ]]; then
    failed=1
    echo "    FOUND A CRASH (exit $status); see $log; new inputs:" >&2
    echo "$found" >&2
  fi
done
echo
cat "$summary"
exit $failed
