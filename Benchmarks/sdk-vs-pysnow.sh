#!/usr/bin/env bash
# Fetch 10,000 incidents from a release docketd with the Docket SDK (through `docket records … --json`) and
# with the Python client pysnow, same fields, same page size; report wall times.
#
#   Benchmarks/sdk-vs-pysnow.sh [records] [page-size] [rounds]
#
# Needs python3 with pip; installs pysnow 0.7.17 if missing. Creates the records it needs.
set -euo pipefail
records="${1:-10000}"
page="${2:-1000}"
rounds="${3:-3}"
fields="sys_id,number,short_description,state,priority,sys_created_on"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

python3 -c 'import pysnow' 2>/dev/null || pip install -q "pysnow==0.7.17" >&2
swift build -c release --product docketd --product docket >&2 2>/dev/null || {
    swift build -c release --product docketd >&2
    swift build -c release --product docket >&2
}
bin="$(swift build -c release --show-bin-path)"

work="$(mktemp -d)"
"$bin/docketd" --demo --port 0 --data-dir "$work/db" --log-level warning >"$work/stdout" 2>"$work/stderr" &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do grep -q 'listening on' "$work/stdout" 2>/dev/null && break; sleep 0.1; done
base="$(sed -n 's/^docketd listening on //p' "$work/stdout")"
port="${base##*:}"

# Create incidents until there are at least $records (one keep-alive connection, admin Basic auth).
python3 - "$base" "$records" <<'PY'
import sys, requests
base, wanted = sys.argv[1], int(sys.argv[2])
s = requests.Session(); s.auth = ("admin", "admin")
have = int(s.get(f"{base}/api/now/table/incident", params={"sysparm_limit": 1}).headers["X-Total-Count"])
for i in range(have, wanted):
    r = s.post(f"{base}/api/now/table/incident", json={"short_description": f"Load test incident {i}", "urgency": "2", "impact": "3"},
               headers={"X-no-response-body": "true"})
    r.raise_for_status()
PY

export XDG_CONFIG_HOME="$work/config"
echo admin | "$bin/docket" login "$base" --user admin --password-stdin >/dev/null

cat >"$work/pysnow_fetch.py" <<'PY'
import sys, time, pysnow
port, records, page, fields = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(",")
client = pysnow.Client(host=f"127.0.0.1:{port}", user="admin", password="admin", use_ssl=False)
incidents = client.resource(api_path="/table/incident")
count = 0
for offset in range(0, records, page):
    count += len(list(incidents.get(query={}, limit=page, offset=offset, fields=fields).all()))
assert count == records, count
PY

now() { date +%s.%N; }
docket_times=(); pysnow_times=()
for round in $(seq 1 "$rounds"); do
    start="$(now)"
    "$bin/docket" records incident --limit "$records" --page-size "$page" --fields "$fields" --json >"$work/out.json"
    end="$(now)"
    # Counted after the clock stops: the check is not part of the client's work.
    count="$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$work/out.json")"
    [ "$count" = "$records" ] || { echo "docket returned $count records" >&2; exit 1; }
    docket_times+=("$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')")
    start="$(now)"
    python3 "$work/pysnow_fetch.py" "$port" "$records" "$page" "$fields"
    end="$(now)"
    pysnow_times+=("$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')")
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
d="$(median "${docket_times[@]}")"; p="$(median "${pysnow_times[@]}")"
echo "| client | wall time, median of $rounds (s) | all runs (s) |"
echo "|---|---:|---|"
echo "| docket records --json (DocketKit, 2 pages in flight) | $d | ${docket_times[*]} |"
echo "| pysnow 0.7.17 (limit/offset loop) | $p | ${pysnow_times[*]} |"
echo
awk -v d="$d" -v p="$p" 'BEGIN { printf "Docket is %.1fx faster (target: >= 3x)\n", p / d }'
echo "($records records, page size $page, fields $fields; $(nproc) cores, $(date -u +%Y-%m-%d))"
