#!/usr/bin/env bash
# POST on PostgreSQL, one docketd and two sharing the database, for one build or two (a baseline beside it),
# alternating, on loopback with wrk. With DOCKET_BENCH_METHOD=PATCH, updates instead: each run first creates 200
# incidents, and each request changes the short description of one of them, drawn at random (PATCH+NOTE: and adds a
# work note). While each load runs, a probe samples PostgreSQL's lock table every 2 ms:
# how often the cluster-wide write lock (docketd's advisory lock) was held, and how many lock waits there were;
# from the lock's busy share and the writes per second comes how long each write held it.
#
#   DOCKET_BENCH_BINARY=PATH [DOCKET_BENCH_BASELINE=PATH] [DOCKET_BENCH_METHOD=PATCH|PATCH+NOTE] \
#       Benchmarks/postgres-writes.sh [seconds] [connections] [rounds]
#
# Needs wrk, curl and psql; a PostgreSQL server at DOCKET_BENCH_POSTGRES_URL (docketd creates a schema per run),
# or else scripts/postgres-cluster.sh starts a throw-away one. Without DOCKET_BENCH_BINARY, this tree's release
# build. Prints a Markdown table for docs/performance.md: writes/s, p50/p99, docketd's and PostgreSQL's CPU per
# write, the write lock's busy share and hold time per write, the average number of transactions waiting for a lock.
set -euo pipefail
duration="${1:-10}"
connections="${2:-16}"
rounds="${3:-2}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
for tool in wrk curl psql; do
    command -v "$tool" >/dev/null || { echo "$tool is not installed" >&2; exit 1; }
done
source "$root/Benchmarks/measure.sh"
bin="$(release_docketd)"
builds=("after=$bin")
[ -n "${DOCKET_BENCH_BASELINE:-}" ] && builds=("before=$DOCKET_BENCH_BASELINE" "${builds[@]}")
work="$(mktemp -d)"
trap stop_benchmark EXIT
benchmark_postgres 55434
separator="?"; [[ "$postgres" == *\?* ]] && separator="&"

start() { # binary, name, database URL; sets $url and $pid
    local out="$work/$2.out"
    "$1" --port 0 --data-dir "$work/$2" --log-level warning --demo --database "$3" >"$out" 2>"$work/$2.log" &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 300); do grep -q 'listening on' "$out" 2>/dev/null && break; sleep 0.1; done
    url="$(sed -n 's/^docketd listening on //p' "$out")"
    [ -n "$url" ] || { echo "docketd $2 did not start:" >&2; cat "$work/$2.log" >&2; exit 1; }
}

method="${DOCKET_BENCH_METHOD:-POST}"
case "$method" in
    POST) post_lua "$work/post.lua" ;;
    PATCH) note="" ;;
    PATCH+NOTE) note=",\"work_notes\":\"note ' .. n .. '\"" ;;
    *) echo "DOCKET_BENCH_METHOD is POST, PATCH or PATCH+NOTE, not $method" >&2; exit 1 ;;
esac

# PATCH: 200 incidents created through `$1`, and wrk's script that updates one of them, drawn at random, per request.
patch_lua() {
    local ids=() id i
    for i in $(seq 1 200); do
        id="$(curl -sf -u admin:admin -H 'Content-Type: application/json' -d '{"short_description":"to update"}' \
            "$1/api/now/table/incident?sysparm_fields=sys_id" | sed -n 's/.*"sys_id":"\([0-9a-f]*\)".*/\1/p')"
        [ -n "$id" ] || { echo "could not create the incidents to update" >&2; exit 1; }
        ids+=("\"$id\"")
    done
    cat >"$work/post.lua" <<LUA
wrk.method = "PATCH"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Basic $(printf 'admin:admin' | base64)"
local ids = { $(IFS=,; echo "${ids[*]}") }
-- Each wrk process its own draws (a table's address differs between processes).
math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)") or "0", 16) % 1000000)
local n = 0
request = function()
    n = n + 1
    return wrk.format(nil, "/api/now/table/incident/" .. ids[math.random(#ids)], nil, '{"short_description":"update ' .. n .. '"$note}')
end
LUA
}

# Samples pg_locks every 2 ms for `seconds` of the clock (a function of the probe's own session, so that each
# sample reads the lock table anew): the share of samples in which docketd's advisory lock (any of the schema
# `docket:` keys: every advisory lock on this throw-away server is docketd's) was held, and the average number of
# lock requests waiting. The presence keys each instance holds for as long as it runs (PostgresPresence, session
# locks of a connection that stays idle) are left out: only locks of sessions in a transaction count.
probe_sql() {
    cat <<SQL
CREATE FUNCTION pg_temp.docket_probe(seconds float) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE held float := 0; waiting float := 0; samples int := 0; h int; w int;
    deadline timestamptz := clock_timestamp() + seconds * interval '1 second';
BEGIN
    WHILE clock_timestamp() < deadline LOOP
        SELECT count(*) FILTER (WHERE l.locktype = 'advisory' AND l.granted AND a.xact_start IS NOT NULL),
                count(*) FILTER (WHERE NOT l.granted)
            INTO h, w FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid;
        held := held + h;
        waiting := waiting + w;
        samples := samples + 1;
        PERFORM pg_sleep(0.002);
    END LOOP;
    RETURN round((held / samples)::numeric, 3) || ' ' || round((waiting / samples)::numeric, 2);
END
\$\$;
SELECT pg_temp.docket_probe($1);
SQL
}
psql_url="${postgres%%\?*}"

measure() { # label, server pids, urls…
    local label="$1" servers=($2); shift 2
    local urls=("$@") each=$((connections / $#)) outs=() wrkpids=() i=0 u
    local server_before db_before
    server_before="$(ticks_of "${servers[@]}")"
    db_before="$(postgres_ticks)"
    probe_sql "$((duration - 2))" | psql -qAt "$psql_url" >"$work/probe" 2>&1 &
    local probe=$!
    for u in "${urls[@]}"; do
        wrk -t1 -c"$each" -d"${duration}s" --latency -s "$work/post.lua" "$u/api/now/table/incident" >"$work/wrk$i" &
        wrkpids+=($!); outs+=("$work/wrk$i"); i=$((i + 1))
    done
    wait "${wrkpids[@]}"
    wait "$probe" || true
    local server_ticks=$(( $(ticks_of "${servers[@]}") - server_before ))
    local db_ticks=$(( $(postgres_ticks) - db_before ))
    local rps=0 requests=0 errors=0
    for o in "${outs[@]}"; do
        rps="$(awk -v a="$rps" '/^Requests\/sec/ {printf "%.0f", a + $2}' "$o")"
        requests=$((requests + $(awk '/requests in/ {print $1}' "$o")))
        errors=$((errors + $(awk '/Non-2xx/ {n = $5} END {print n + 0}' "$o")))
    done
    local p50 p99 hz cpu db held waiting hold
    p50="$(awk '$1 == "50%" {print $2}' "${outs[0]}")"
    p99="$(awk '$1 == "99%" {print $2}' "${outs[0]}")"
    hz="$(getconf CLK_TCK)"
    cpu="$(awk -v t="$server_ticks" -v n="$requests" -v hz="$hz" 'BEGIN { printf "%.0f", t / hz / n * 1e6 }')"
    db="$(awk -v t="$db_ticks" -v n="$requests" -v hz="$hz" 'BEGIN { printf "%.0f", t / hz / n * 1e6 }')"
    read -r held waiting <"$work/probe" || { held="?"; waiting="?"; }
    hold="$(awk -v b="$held" -v r="$rps" 'BEGIN { if (r > 0 && b + 0 == b) printf "%.2f ms", b / r * 1000; else print "?" }')"
    echo "| $label | $rps | $p50 | $p99 | $errors | $cpu | $db | $held | $hold | $waiting |"
}

echo "| build, instances | writes/s | p50 | p99 | non-2xx | docketd CPU µs/write | PostgreSQL CPU µs/write | write lock busy | lock held per write | lock waits (avg) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for round in $(seq 1 "$rounds"); do
    for build in "${builds[@]}"; do
        name="${build%%=*}"; binary="${build#*=}"
        schema="writes_${name}_${round}_$(date +%s)"
        start "$binary" "$name-$round-a" "$postgres${separator}schema=$schema"
        url_a="$url"; pid_a="$pid"
        [ "$method" != POST ] && patch_lua "$url_a"
        measure "$name, one docketd" "$pid_a" "$url_a"
        start "$binary" "$name-$round-b" "$postgres${separator}schema=$schema"
        url_b="$url"; pid_b="$pid"
        measure "$name, two docketd (load split)" "$pid_a $pid_b" "$url_a" "$url_b"
        kill "$pid_a" "$pid_b"; wait "$pid_a" "$pid_b" 2>/dev/null || true
    done
done
