#!/usr/bin/env bash
# GET of 100 incidents with sysparm_display_value=all, alone, against a release docketd (for profiling a change).
#
#   Benchmarks/list-display.sh [duration-seconds] [connections]
#
# Starts a release docketd with demo data on a free port, adds 120 incidents so that the page is full, checks one
# answer, then runs wrk as admin (Basic). While it runs, `perf record -g -p PID` shows where the time goes
# (the PID and URL are printed). Needs wrk and curl.
set -euo pipefail
duration="${1:-10}"
connections="${2:-32}"
source "$(dirname "$0")/common.sh"
start_docketd

auth="admin:admin"
fill_incidents 120
url="$base/api/now/table/incident?sysparm_limit=100&sysparm_display_value=all"
size="$(curl -sf -u "$auth" -o /dev/null -w '%{size_download}' "$url")"
echo "docketd pid $server, $url: $size bytes" >&2
before="$(awk '{ print $14 + $15 }' "/proc/$server/stat")"
out="$(wrk -t2 -c"$connections" -d"${duration}s" --latency -H "Authorization: Basic $(printf '%s' "$auth" | base64)" "$url")"
after="$(awk '{ print $14 + $15 }' "/proc/$server/stat")"
total="$(awk '/requests in/ {print $1}' <<<"$out")"
echo "$out" | grep -E 'Requests/sec|Latency|Non-2xx' || true
awk -v t="$((after - before))" -v n="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "server CPU per request: %.0f us\n", t / hz / n * 1e6 }'
