#!/usr/bin/env bash
# Load benchmark of docketd's Compass REST API with wrk, against a release build on loopback.
#
#   Benchmarks/compass.sh [duration-seconds] [connections]
#
# Starts a release docketd with demo data, logs in as john.doe through POST /ccmweb/rest/authenticate, saves the
# stock app's "Assigned To Me" query and makes a result set, then measures with the bearer token:
#   1. GET …/records/defect/SAMPL00000001          (one Defect in Compass's shape, with its legal actions)
#   2. GET …/workspace/queryDefs/<q>/resultsets/<rs> (the app's list page: 4 rows)
#   3. GET /api/now/table/defect/<sys_id>            (the same record through the Table API, Basic auth)
# and prints a Markdown table for docs/performance.md. Needs wrk (apt-get install -y wrk), curl and python3.
set -euo pipefail
duration="${1:-10}"
connections="${2:-32}"
source "$(dirname "$0")/common.sh"
start_docketd

db="$base/ccmweb/rest/repos/SampleRepository/databases/SAMPL"
token="$(curl -sf -H 'Content-Type: application/json' \
    -d '{"username":"john.doe","password":"password","repo":"SampleRepository","db":"SAMPL"}' \
    "$base/ccmweb/rest/authenticate" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')"
bearer="Authorization: Bearer $token"
query="$(curl -sf -H "$bearer" -H 'Content-Type: application/json' -d '{"name":"Assigned To Me","dbIdParent":"16777218",
  "primaryEntityDefName":"Defect","queryFieldDefs":[{"fieldPathName":"id","isShown":true,"sortType":"NO_SORT"},
  {"fieldPathName":"Headline","isShown":true,"sortType":"NO_SORT"},{"fieldPathName":"Severity","isShown":true,"sortType":"NO_SORT"},
  {"fieldPathName":"dbid","isShown":true,"sortType":"NO_SORT"},{"fieldPathName":"Submit_Date","isShown":true,"sortType":"SORT_DESC"},
  {"fieldPathName":"State","isShown":true,"sortType":"NO_SORT"},{"fieldPathName":"Submitter","isShown":true,"sortType":"NO_SORT"}],
  "filterNode":{"boolOp":"BOOL_OP_AND","fieldFilters":[{"fieldPath":"Owner","compOp":"COMP_OP_EQ","values":["[CURRENT_USER]"]}]}}' \
    "$db/workspace/queryDefs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["dbId"])')"
set_id="$(curl -sf -H "$bearer" -H 'Content-Type: application/json' -d '{"pageSize":"999"}' \
    "$db/workspace/queryDefs/$query/resultsets" | python3 -c 'import json,sys; print(json.load(sys.stdin)["result_set_id"])')"
sys_id="$(curl -sf -u john.doe:password "$base/api/now/table/defect?number=SAMPL00000001&sysparm_fields=sys_id" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"][0]["sys_id"])')"
basic="Authorization: Basic $(printf '%s' john.doe:password | base64)"

echo "| request | requests/s | p50 | p99 | non-2xx |"
echo "|---|---|---|---|---|"
run() { # name, header, url
    local out
    out="$(wrk -t2 -c"$connections" -d"${duration}s" --latency -H "$2" "$3")"
    printf '| %s | %s | %s | %s | %s |\n' "$1" "$(awk '/^Requests\/sec/ {print $2}' <<<"$out")" \
        "$(awk '$1 == "50%" {print $2}' <<<"$out")" "$(awk '$1 == "99%" {print $2}' <<<"$out")" \
        "$(awk '/Non-2xx/ {print $NF}' <<<"$out" | grep . || echo 0)"
}
run "Compass: GET one Defect (bearer JWT)" "$bearer" "$db/records/defect/SAMPL00000001"
run "Compass: GET a result set page (Assigned To Me, 4 rows)" "$bearer" "$db/workspace/queryDefs/$query/resultsets/$set_id"
run "Table API: GET the same defect (Basic)" "$basic" "$base/api/now/table/defect/$sys_id"
