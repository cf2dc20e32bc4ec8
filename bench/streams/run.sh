#!/usr/bin/env bash
# Peak server memory of one large upload and the cost of appends, for
# docs/results/streams.md. Usage:
#   bench/streams/run.sh BNN_SERVER BNN_STREAM_BENCH [upload|append|all]
# Starts BNN_SERVER on a free loopback port with a temporary data directory
# for each measurement and stops it afterwards.
set -euo pipefail
server=$1
bench=$2
what=${3:-all}
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT

start_server() {
  rm -rf "$work/data"
  "$server" --listen 127.0.0.1:0 --data-dir "$work/data" --metrics-listen '' \
    --threads 1 >"$work/log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    addr=$(grep -o 'listening on [0-9.:]*' "$work/log" | cut -d' ' -f3 || true)
    [[ -n "$addr" ]] && return
    sleep 0.1
  done
  echo "server did not start" >&2
  cat "$work/log" >&2
  exit 1
}

stop_server() {
  kill "$pid"
  wait "$pid" || true
}

# Upload of 1,000,000 rows x 30 features (240 MB of doubles, ~245 MiB on the
# wire): peak RSS of the server (VmHWM) and its RSS at rest before.
if [[ $what != append ]]; then
start_server
before=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
"$bench" --server "$addr" --mode upload --rows 1000000 --features 30
peak=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
echo "upload peak_rss_kib $peak rss_before_kib $before"
stop_server
fi
[[ $what == upload ]] && exit 0

# 1,000 rows appended to datasets of 100,000 and 1,000,000 rows (1 feature).
for rows in 100000 1000000; do
  start_server
  "$bench" --server "$addr" --mode append --rows "$rows" --features 1 \
    --append_rows 1000 --repeats 5
  stop_server
done
