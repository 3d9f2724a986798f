#!/usr/bin/env bash
# Runs the README's curl session against `docketd --demo` on a free port and checks each answer, so the
# README's first screen stays true.
set -euo pipefail
cd "$(dirname "$0")/.."
# DOCKET_BIN_DIR: the folder of a build made already (CI passes the debug build it tested, and runs this beside
# other steps that use it); without it, this builds docketd and docket.
if [ -n "${DOCKET_BIN_DIR:-}" ]; then
    bin="$DOCKET_BIN_DIR/docketd"
    docket="$DOCKET_BIN_DIR/docket"
else
    swift build --product docketd
    swift build --product docket
    bin="$(swift build --show-bin-path)/docketd"
    docket="$(swift build --show-bin-path)/docket"
fi
work="$(mktemp -d)"
"$bin" --demo --port 0 --data-dir "$work/data" >"$work/stdout" 2>"$work/stderr" &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 300); do grep -q 'listening on' "$work/stdout" 2>/dev/null && break; sleep 0.1; done
lines="$(wc -l <"$work/stdout")"
[ "$lines" -eq 1 ] || { echo "expected exactly one line on stdout, got $lines" >&2; cat "$work/stdout" "$work/stderr" >&2; exit 1; }
B="$(sed -n 's/^docketd listening on //p' "$work/stdout")"
echo "docketd at $B"
cd "$work"
check() { # description, python expression over `body` (parsed JSON) and `status`
    python3 -c "import json,sys; status=int(sys.argv[1]); body=json.loads(open('body').read() or 'null'); assert $2, sys.argv[2]" "$(cat status)" "$1"
    echo "ok - $1"
}
curl -s -o body -w '%{http_code}' -u john.doe:password -c cookies.txt "$B/api/now/v2/table/sys_user?sysparm_query=user_name%3Djohn.doe" >status
check "login returns john.doe" "status == 200 and body['result'][0]['user_name'] == 'john.doe'"
grep -q JSESSIONID cookies.txt
curl -s -o body -w '%{http_code}' -b cookies.txt "$B/api/x_snc_my_work/v1/tracker/task" >status
check "my tasks grouped by type with the cookie only" "status == 200 and 'Incident' in body['result'] and 'Problem' in body['result']"
T=cdb04ffc53247d4908555def767adca7
curl -s -o body -w '%{http_code}' -b cookies.txt "$B/api/now/v2/table/sys_journal_field?sysparm_query=element_id%3D$T%5EORDERBYDESCsys_created_on" >status
check "journal of INC0010001" "status == 200 and len(body['result']) >= 1 and all(e['element_id'] == '$T' for e in body['result'])"
curl -s -o body -w '%{http_code}' -b cookies.txt -H 'Content-Type: application/json' -d '{"comment":"Hello, world!"}' "$B/api/x_snc_my_work/v1/tracker/task/$T/comment" >status
check "comment is created" "status == 201 and body == {'data': 'Successfully inserted'}"
curl -s -o body -w '%{http_code}' -b cookies.txt "$B/api/now/v2/table/sys_journal_field?sysparm_query=element_id%3D$T%5EORDERBYDESCsys_created_on&sysparm_limit=1" >status
check "the comment reads back first" "status == 200 and body['result'][0]['value'] == 'Hello, world!'"
curl -s -o body -w '%{http_code}' "$B/health" >status
check "health answers without auth" "status == 200 and body['status'] == 'ok'"
# The README's work commands over Compass, with the docket CLI (its own throw-away config folder). Each check is a
# command of its own, so that a failing grep stops the script (errexit does not see failures inside `a && b`).
export XDG_CONFIG_HOME="$work/config"
echo password | "$docket" login "$B" --user john.doe --repo SampleRepository --db SAMPL --password-stdin | grep "Compass SampleRepository/SAMPL" >/dev/null
echo "ok - docket login --repo --db"
"$docket" defects | grep SAMPL00000001 >/dev/null
echo "ok - docket defects lists mine"
id="$("$docket" create defect Headline='Crash on save' Severity=2-Major | sed -n 's/^Created \(SAMPL[0-9]*\) (Submitted).*/\1/p')"
[ -n "$id" ]
echo "ok - docket create defect ($id)"
"$docket" transition "$id" | grep "Assign → Assigned" >/dev/null
echo "ok - docket transition lists the legal actions"
"$docket" transition "$id" Assign Owner=john.doe | grep "is now Assigned" >/dev/null
echo "ok - docket transition Assign"
"$docket" edit "$id" Priority='2-Give High Attention' | grep "Updated $id" >/dev/null
echo "ok - docket edit"
"$docket" choices "$id" Severity | grep '^2-Major$' >/dev/null
echo "ok - docket choices"
"$docket" delete "$id" | grep "Deleted $id" >/dev/null
echo "ok - docket delete"
kill -TERM $server
for _ in $(seq 1 100); do kill -0 $server 2>/dev/null || break; sleep 0.1; done
if kill -0 $server 2>/dev/null; then echo "docketd did not stop on SIGTERM" >&2; exit 1; fi
wait $server && echo "ok - SIGTERM stops docketd cleanly (exit 0)"
echo "readme-smoke: 15 passed, 0 failed"
