#!/usr/bin/env bash
# Load benchmark of docketd's Table API with wrk, against a release build on loopback.
#
#   Benchmarks/table-api.sh [duration-seconds] [connections]
#
# Starts a release docketd with demo data on a free port in a temporary data folder, adds incidents so
# that a 100-record page is full, then measures three requests in one run:
#   1. GET /health                                                     (no auth, no database)
#      (1 and 2 alternate three times; the medians are reported)
#   2. GET /api/now/table/incident/<sys_id>                            (Basic auth, one record)
#   3. GET /api/now/table/incident?sysparm_limit=100&sysparm_display_value=all   (Basic auth, 100 records)
# and prints a Markdown table for docs/performance.md. Needs wrk (apt-get install -y wrk) and curl.
set -euo pipefail
duration="${1:-10}"
connections="${2:-32}"
threads=2
source "$(dirname "$0")/common.sh"
start_docketd

auth="admin:admin"
fill_incidents 120
id="$(curl -sf -u "$auth" "$base/api/now/table/incident?number=INC0010001&sysparm_fields=sys_id" | sed 's/.*"sys_id":"\([0-9a-f]*\)".*/\1/')"
header="Authorization: Basic $(printf '%s' "$auth" | base64)"

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$server/stat"; }

run() { # name, path, [auth]
    local out before after
    before="$(cpu_ticks)"
    if [ "${3:-}" = auth ]; then
        out="$(wrk -t"$threads" -c"$connections" -d"${duration}s" --latency -H "$header" "$base$2")"
    else
        out="$(wrk -t"$threads" -c"$connections" -d"${duration}s" --latency "$base$2")"
    fi
    local rps p50 p99 errors
    rps="$(awk '/^Requests\/sec/ {print $2}' <<<"$out")"
    p50="$(awk '$1 == "50%" {print $2}' <<<"$out")"
    p99="$(awk '$1 == "99%" {print $2}' <<<"$out")"
    errors="$(awk '/Non-2xx/ {print $5}' <<<"$out")"
    after="$(cpu_ticks)"
    local total; total="$(awk '/requests in/ {print $1}' <<<"$out")"
    # Server CPU time per request (user + system), far less sensitive to other load than requests/s.
    local cpu; cpu="$(awk -v t="$((after - before))" -v n="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", t / hz / n * 1e6 }')"
    echo "$1|$rps|$p50|$p99|${errors:-0}|$cpu"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# /health and the single-record GET alternate three times and are compared by their medians, so that both
# see the same machine load (a shared 2-core machine drifts by tens of percent between runs).
health_runs=(); one_runs=()
for round in 1 2 3; do
    health_runs+=("$(run "GET /health" "/health")")
    one_runs+=("$(run "GET one incident (Basic)" "/api/now/table/incident/$id" auth)")
done
pick() { # rows on stdin: choose the row whose requests/s is the median
    local rows; rows="$(cat)"
    local m; m="$(cut -d'|' -f2 <<<"$rows" | median)"
    awk -F'|' -v m="$m" '$2 == m { print; exit }' <<<"$rows"
}
health="$(printf '%s\n' "${health_runs[@]}" | pick)"
one="$(printf '%s\n' "${one_runs[@]}" | pick)"
page="$(run "GET 100 incidents, display_value=all (Basic)" "/api/now/table/incident?sysparm_limit=100&sysparm_display_value=all" auth)"

echo "| request | requests/s (median of 3) | p50 | p99 | non-2xx | server CPU µs/request |"
echo "|---|---:|---:|---:|---:|---:|"
for row in "$health" "$one" "$page"; do
    IFS='|' read -r name rps p50 p99 errors cpu <<<"$row"
    echo "| $name | $rps | $p50 | $p99 | $errors | $cpu |"
done
echo
echo "all /health runs: $(printf '%s\n' "${health_runs[@]}" | cut -d'|' -f2 | tr '\n' ' ')"
echo "all single-record runs: $(printf '%s\n' "${one_runs[@]}" | cut -d'|' -f2 | tr '\n' ' ')"
health_rps="$(cut -d'|' -f2 <<<"$health")"
one_rps="$(cut -d'|' -f2 <<<"$one")"
awk -v a="$one_rps" -v b="$health_rps" 'BEGIN { printf "single-record GET = %.0f%% of /health (target: >= 5000 req/s and >= 50%%)\n", 100 * a / b }'
awk -v a="$(cut -d'|' -f6 <<<"$one")" -v b="$(cut -d'|' -f6 <<<"$health")" 'BEGIN { printf "by server CPU per request: a single-record GET costs %.1fx a /health request (50%% of the rate = 2.0x)\n", a / b }'
echo "($threads wrk threads, $connections connections, ${duration}s per run, $(nproc) cores, $(date -u +%Y-%m-%d))"
