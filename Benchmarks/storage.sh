#!/usr/bin/env bash
# The same Table API load on SQLite and on PostgreSQL (one docketd, then two sharing the database), with wrk,
# against a release build on loopback.
#
#   Benchmarks/storage.sh [duration-seconds] [connections]
#
# Needs wrk and curl, and a PostgreSQL server: DOCKET_BENCH_POSTGRES_URL (a database docketd may create schemas
# in), or else scripts/postgres-cluster.sh starts a throw-away one. DOCKET_BENCH_BINARY=PATH measures that docketd
# instead of this tree's release build. For each storage it measures:
#   - GET one incident (Basic)                      a cache hit; on PostgreSQL plus the per-request catch-up read
#   - GET 20 incidents, priority<=3, by number      a query through the compiler
#   - POST a new incident (Basic)                   a write: number, journal, event, commit
# and, on PostgreSQL, the POST again with the load split over two docketd on the same database, then the single-
# record GET on one docketd and on two, alternately, three times each (the same connections and wrk threads in
# all: two wrk with one thread each when the load is split), with the ratio of each pair.
# Prints a Markdown table for docs/performance.md, with the CPU time per request of docketd (all instances
# together) and of the PostgreSQL server (all its processes).
set -euo pipefail
duration="${1:-10}"
connections="${2:-16}"
threads=2
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
for tool in wrk curl; do
    command -v "$tool" >/dev/null || { echo "$tool is not installed (apt-get install -y $tool)" >&2; exit 1; }
done
source "$root/Benchmarks/measure.sh"
bin="$(release_docketd)"
work="$(mktemp -d)"
trap stop_benchmark EXIT
declare -A pid_of
benchmark_postgres 55433
separator="?"; [[ "$postgres" == *\?* ]] && separator="&"
schema="bench_$(date +%s)"

start() { # name, database URL (empty for SQLite); sets $url
    local out="$work/$1.out"
    local args=(--port 0 --data-dir "$work/$1" --log-level warning --demo)
    [ -n "$2" ] && args+=(--database "$2")
    "$bin" "${args[@]}" >"$out" 2>"$work/$1.log" &
    pids+=($!)
    for _ in $(seq 1 200); do grep -q 'listening on' "$out" 2>/dev/null && break; sleep 0.1; done
    url="$(sed -n 's/^docketd listening on //p' "$out")"
    [ -n "$url" ] || { echo "docketd $1 did not start:" >&2; cat "$work/$1.log" >&2; exit 1; }
    pid_of[$url]="${pids[-1]}"
}

header="Authorization: Basic $(printf 'admin:admin' | base64)"
post_lua "$work/post.lua"

measure() { # name, urls (space-separated: split the connections), path, [lua]
    local urls=($2) each=$((connections / ${#urls[@]})) outs=() i=0 wrkpids=() servers=() u
    for u in "${urls[@]}"; do servers+=("${pid_of[$u]}"); done
    local server_before db_before
    server_before="$(ticks_of "${servers[@]}")"
    db_before="$(postgres_ticks)"
    for u in "${urls[@]}"; do
        if [ -n "${4:-}" ]; then
            wrk -t1 -c"$each" -d"${duration}s" --latency -s "$4" "$u$3" >"$work/wrk$i" &
        else
            wrk -t"$((threads / ${#urls[@]} > 0 ? threads / ${#urls[@]} : 1))" -c"$each" -d"${duration}s" --latency -H "$header" "$u$3" >"$work/wrk$i" &
        fi
        wrkpids+=($!); outs+=("$work/wrk$i"); i=$((i + 1))
    done
    wait "${wrkpids[@]}"
    local server_ticks=$(( $(ticks_of "${servers[@]}") - server_before ))
    local db_ticks=$(( $(postgres_ticks) - db_before ))
    local rps=0 p50 p99 errors=0 requests=0
    for o in "${outs[@]}"; do
        rps="$(awk -v a="$rps" '/^Requests\/sec/ {printf "%.0f", a + $2}' "$o")"
        requests=$((requests + $(awk '/requests in/ {print $1}' "$o")))
        errors=$((errors + $(awk '/Non-2xx/ {n = $5} END {print n + 0}' "$o")))
    done
    p50="$(awk '$1 == "50%" {print $2}' "${outs[0]}")"
    p99="$(awk '$1 == "99%" {print $2}' "${outs[0]}")"
    local hz; hz="$(getconf CLK_TCK)"
    local cpu db=""
    cpu="$(awk -v t="$server_ticks" -v n="$requests" -v hz="$hz" 'BEGIN { printf "%.0f", t / hz / n * 1e6 }')"
    case "$1" in sqlite*) db="—" ;; *) db="$(awk -v t="$db_ticks" -v n="$requests" -v hz="$hz" 'BEGIN { printf "%.0f", t / hz / n * 1e6 }')" ;; esac
    echo "| $1 | $rps | $p50 | $p99 | $errors | $cpu | $db |"
    last_rps="$rps"
}

echo "| storage, request | requests/s | p50 | p99 | non-2xx | docketd CPU µs/request | PostgreSQL CPU µs/request |"
echo "|---|---|---|---|---|---|---|"
for storage in sqlite postgres; do
    if [ "$storage" = sqlite ]; then start sqlite ""; else start postgres "$postgres${separator}schema=$schema"; fi
    id="$(curl -sf -H "$header" "$url/api/now/table/incident?number=INC0010001&sysparm_fields=sys_id" | sed 's/.*"sys_id":"\([0-9a-f]*\)".*/\1/')"
    measure "$storage: GET one incident" "$url" "/api/now/table/incident/$id"
    measure "$storage: GET 20 incidents, priority<=3, by number" "$url" "/api/now/table/incident?sysparm_limit=20&sysparm_query=priority%3C%3D3%5EORDERBYnumber"
    measure "$storage: POST an incident" "$url" "/api/now/table/incident" "$work/post.lua"
done
first="$url"
start postgres2 "$postgres${separator}schema=$schema"
measure "postgres, two docketd: POST an incident (load split)" "$first $url" "/api/now/table/incident" "$work/post.lua"
ratios=()
for round in 1 2 3; do
    measure "postgres, one docketd: GET one incident (round $round)" "$first" "/api/now/table/incident/$id"
    one="$last_rps"
    measure "postgres, two docketd: GET one incident (load split, round $round)" "$first $url" "/api/now/table/incident/$id"
    ratios+=("$(awk -v a="$last_rps" -v b="$one" 'BEGIN { printf "%.2f", a / b }')")
done
echo
echo "Two docketd against one, single-record GET, per round: ${ratios[*]}"
