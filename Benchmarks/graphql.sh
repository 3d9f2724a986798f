#!/usr/bin/env bash
# GraphQL against the Table API for the same 100 records, with wrk, against a release build on loopback.
#
#   Benchmarks/graphql.sh [duration-seconds] [connections]
#
# Starts a release docketd with demo data on a free port in a temporary data folder, adds incidents so that a
# 100-record page is full, then measures (each three times, medians reported):
#   1. GET /api/now/table/incident?sysparm_limit=100&sysparm_display_value=all&sysparm_fields=<10 fields>
#   2. POST /api/now/graphql with GlideRecord_Query for the same 100 incidents and the same 10 fields, each
#      with value and displayValue
# and prints a Markdown table for docs/performance.md. Needs wrk (apt-get install -y wrk) and curl.
set -euo pipefail
duration="${1:-10}"
connections="${2:-8}"
threads=2
source "$(dirname "$0")/common.sh"
start_docketd

auth="admin:admin"
fill_incidents 120
header="Authorization: Basic $(printf '%s' "$auth" | base64)"
fields="number,short_description,state,priority,urgency,impact,caller_id,opened_at,active,sys_updated_on"
selection=""
for field in ${fields//,/ }; do selection="$selection $field { value displayValue }"; done
document="{ GlideRecord_Query { incident(queryConditions: \\\"ORDERBYnumber\\\", pagination: {limit: 100, offset: 0}) { _rowCount _results {$selection } } } }"
body="$data/graphql.json"
printf '{"query": "%s"}' "$document" >"$body"
script="$data/graphql.lua"
cat >"$script" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local file = io.open("$body", "rb")
wrk.body = file:read("*a")
file:close()
LUA
# Both answer 100 records.
curl -sf -u "$auth" "$base/api/now/table/incident?sysparm_limit=100&sysparm_display_value=all&sysparm_query=ORDERBYnumber&sysparm_fields=$fields" \
    | grep -o '"number"' | wc -l | grep -qx 100 || { echo "the Table API did not answer 100 records" >&2; exit 1; }
curl -sf -u "$auth" -H 'Content-Type: application/json' --data-binary "@$body" "$base/api/now/graphql" \
    | grep -o '"number"' | wc -l | grep -qx 100 || { echo "GraphQL did not answer 100 records" >&2; exit 1; }

run() { # name, then wrk arguments
    local name="$1"
    shift
    local out
    out="$(wrk -t"$threads" -c"$connections" -d"${duration}s" --latency -H "$header" "$@")"
    printf '%s %s %s %s\n' "$name" "$(awk '/^Requests\/sec/ {print $2}' <<<"$out")" \
        "$(awk '$1 == "50%" {print $2}' <<<"$out")" "$(awk '$1 == "99%" {print $2}' <<<"$out")"
}

results="$data/results"
for _ in 1 2 3; do
    run table "$base/api/now/table/incident?sysparm_limit=100&sysparm_display_value=all&sysparm_query=ORDERBYnumber&sysparm_fields=$fields" >>"$results"
    run graphql -s "$script" "$base/api/now/graphql" >>"$results"
done

median() { sort -n | sed -n 2p; }
echo "| request (100 incidents, 10 fields, value and display value) | req/s | p50 | p99 |"
echo "|---|---:|---:|---:|"
for name in table graphql; do
    rps="$(awk -v n="$name" '$1 == n {print $2}' "$results" | median)"
    p50="$(awk -v n="$name" '$1 == n {print $3}' "$results" | sort -V | sed -n 2p)"
    p99="$(awk -v n="$name" '$1 == n {print $4}' "$results" | sort -V | sed -n 2p)"
    label="Table API GET"
    [ "$name" = graphql ] && label="GraphQL GlideRecord_Query"
    echo "| $label | $rps | $p50 | $p99 |"
done
