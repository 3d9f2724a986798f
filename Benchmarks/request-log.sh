#!/usr/bin/env bash
# What the request log line costs: a single-record GET (Basic, wrk -t2 -c16) against a release docketd on SQLite
# with demo data, at --log-level info (a line per request, stderr to a file) and at warning (none), alternating.
#
#   [DOCKET_BENCH_BINARY=PATH] Benchmarks/request-log.sh [seconds] [rounds]
#
# Prints, per run, requests/s, docketd's CPU per request and how many lines it wrote.
set -euo pipefail
duration="${1:-8}"
rounds="${2:-2}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install -y wrk)" >&2; exit 1; }
source "$root/Benchmarks/measure.sh"
bin="$(release_docketd)"
work="$(mktemp -d)"
trap stop_benchmark EXIT
auth="Authorization: Basic $(printf 'admin:admin' | base64)"
echo "| log level | requests/s | docketd CPU µs/request | lines written |"
echo "|---|---:|---:|---:|"
for round in $(seq 1 "$rounds"); do
    for level in info warning; do
        data="$work/$level-$round"
        mkdir -p "$data"
        "$bin" --demo --port 0 --data-dir "$data/db" --log-level "$level" >"$data/out" 2>"$data/err" &
        pid=$!
        pids+=("$pid")
        for _ in $(seq 1 100); do grep -q 'listening on' "$data/out" 2>/dev/null && break; sleep 0.1; done
        url="$(sed -n 's/^docketd listening on //p' "$data/out")"
        id="$(curl -sf -H "$auth" "$url/api/now/table/incident?number=INC0010001&sysparm_fields=sys_id" | sed 's/.*"sys_id":"\([0-9a-f]*\)".*/\1/')"
        wrk -t2 -c16 -d2s -H "$auth" "$url/api/now/table/incident/$id" >/dev/null
        before="$(ticks_of "$pid")"
        wrk -t2 -c16 -d"${duration}s" -H "$auth" "$url/api/now/table/incident/$id" >"$data/wrk"
        ticks=$(( $(ticks_of "$pid") - before ))
        requests="$(awk '/requests in/ {print $1}' "$data/wrk")"
        cpu="$(awk -v t="$ticks" -v n="$requests" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", t / hz / n * 1e6 }')"
        echo "| $level | $(awk '/^Requests\/sec/ {printf "%.0f", $2}' "$data/wrk") | $cpu | $(wc -l <"$data/err") |"
        kill "$pid"; wait "$pid" 2>/dev/null || true
    done
done
