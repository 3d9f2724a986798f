#!/usr/bin/env bash
# Where a POST's thread hand-offs happen: one release docketd on PostgreSQL (or SQLite), wrk POSTing as admin by
# Basic auth from 16 connections, and for the middle of the run docketd's CPU and context switches per POST,
# in all and per thread (NIO's event loops, the Swift concurrency pool's threads, Dispatch's timer thread, which
# is named "…-qos.overcommit"). Environment variables given to it reach docketd (for builds made to try things).
#
#   Benchmarks/postgres-post-switches.sh [seconds] [pg|sqlite]
#
# DOCKET_BENCH_BINARY=PATH for another build; DOCKET_BENCH_POSTGRES_URL for a running server (else a throw-away
# cluster on port 55439). Needs wrk and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-12}"
storage="${2:-pg}"
work="$(mktemp -d)"
trap stop_benchmark EXIT
source Benchmarks/measure.sh
export DOCKET_PG_STATE="$work/cluster"
bin="$(release_docketd)"
database=()
if [ "$storage" = pg ]; then
    benchmark_postgres 55439
    database=(--database "$postgres&schema=switches_$(date +%s%N)")
fi
"$bin" --demo --port 0 --data-dir "$work/data" --log-level warning "${database[@]}" >"$work/out" 2>"$work/err" &
pids+=($!)
server=$!
for _ in $(seq 1 300); do grep -q 'listening on' "$work/out" 2>/dev/null && break; sleep 0.1; done
url="$(sed -n 's/^docketd listening on //p' "$work/out")"
[ -n "$url" ] || { echo "docketd did not start:" >&2; cat "$work/err" >&2; exit 1; }
post_lua "$work/post.lua"
# One line per thread: id, name (spaces as _), voluntary and involuntary switches, CPU ticks.
threads() {
    local task
    for task in /proc/"$server"/task/*; do
        echo "$(basename "$task") $(tr ' ' _ <"$task/comm") $(awk '/^voluntary_ctxt/ {v = $2} /^nonvoluntary_ctxt/ {n = $2} END {print v, n}' "$task/status") $(awk '{print $14 + $15}' "$task/stat")"
    done | sort
}
wrk -t1 -c16 -d"${duration}s" -s "$work/post.lua" "$url/api/now/table/incident" >"$work/wrk" &
load=$!
window=$((duration / 2))
sleep $((duration / 4))
threads >"$work/before"
sleep "$window"
threads >"$work/after"
wait "$load"
rate="$(awk '/^Requests\/sec/ {print $2}' "$work/wrk")"
hz="$(getconf CLK_TCK)"
echo "$storage: $rate POSTs/s"
join "$work/before" "$work/after" | awk -v r="$rate" -v w="$window" -v hz="$hz" '
    { v = $7 - $3; n = $8 - $4; t = $9 - $5; posts = r * w
      sv += v; sn += n; st += t
      if (v + n > 0) printf "  %-24s voluntary %5.2f  involuntary %5.2f  CPU %5.0f µs  (per POST)\n", $2, v / posts, n / posts, t / hz / posts * 1e6 }
    END { posts = r * w; printf "  all threads: %.1f switches, %.0f µs of CPU per POST\n", (sv + sn) / posts, st / hz / posts * 1e6 }'
