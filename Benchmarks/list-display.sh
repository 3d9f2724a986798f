#!/usr/bin/env bash
# GET of 100 incidents with sysparm_display_value=all, alone, against a release docketd (for profiling a change).
#
#   Benchmarks/list-display.sh [duration-seconds] [connections]
#
# Starts a release docketd with demo data on a free port, adds 120 incidents so that the page is full, checks one
# answer, then runs wrk as admin (Basic). While it runs, `perf record -g -p PID` shows where the time goes
# (the PID and URL are printed). Needs wrk and curl.
#
# Rendered pages are kept between requests while nothing changes (docketd's --list-cache-mb, on by default): with
# DOCKET_BENCH_ARGS="--list-cache-mb 0" every request is read and rendered. DOCKET_BENCH_WRITES=N updates one
# incident N times a second during the run (from Python, over one kept-alive connection), so that kept pages keep
# ending, as on an instance people also write to.
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
writes="${DOCKET_BENCH_WRITES:-0}"
if [ "$writes" -gt 0 ]; then
    id="$(curl -sf -u "$auth" "$base/api/now/table/incident?sysparm_limit=1&sysparm_fields=sys_id" | sed 's/.*"sys_id":"\([0-9a-f]*\)".*/\1/')"
    python3 - "$base" "$id" "$writes" "$duration" <<'PY' &
import base64, http.client, sys, time, urllib.parse
base, sys_id, rate, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
url = urllib.parse.urlparse(base)
connection = http.client.HTTPConnection(url.hostname, url.port)
headers = {"Authorization": "Basic " + base64.b64encode(b"admin:admin").decode(), "Content-Type": "application/json"}
start, done = time.time(), 0
while time.time() - start < seconds:
    connection.request("PATCH", f"/api/now/table/incident/{sys_id}?sysparm_fields=sys_id", body='{"short_description":"w%d"}' % done, headers=headers)
    connection.getresponse().read()
    done += 1
    time.sleep(max(0.0, start + done / rate - time.time()))
print(f"writes during the run: {done} ({done / seconds:.1f}/s)", file=sys.stderr)
PY
    writer=$!
fi
before="$(awk '{ print $14 + $15 }' "/proc/$server/stat")"
out="$(wrk -t2 -c"$connections" -d"${duration}s" --latency -H "Authorization: Basic $(printf '%s' "$auth" | base64)" "$url")"
after="$(awk '{ print $14 + $15 }' "/proc/$server/stat")"
total="$(awk '/requests in/ {print $1}' <<<"$out")"
echo "$out" | grep -E 'Requests/sec|Latency|Non-2xx' || true
awk -v t="$((after - before))" -v n="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "server CPU per request: %.0f us\n", t / hz / n * 1e6 }'
if [ "$writes" -gt 0 ]; then wait "$writer" || true; fi
