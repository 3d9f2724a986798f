#!/usr/bin/env bash
# Load benchmark of the step-3 APIs with wrk, against a release docketd on loopback.
#
#   Benchmarks/parity-apis.sh [duration-seconds] [connections]
#
# Starts two release docketd instances with demo data (plain HTTP, and HTTPS with a throw-away certificate)
# and measures, one wrk run each:
#   - GET one incident with Basic, with an OAuth bearer token, and with Basic over HTTPS (HTTP/1.1)
#   - GET /api/now/stats/incident grouped by priority with counts and an average
#   - GET a 64 KiB attachment's bytes
#   - POST /api/now/v1/batch holding 10 single-record GETs
# and prints a Markdown table for docs/performance.md. Needs wrk, curl and openssl.
set -euo pipefail
duration="${1:-10}"
connections="${2:-32}"
threads=2
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

for tool in wrk curl openssl; do
    command -v "$tool" >/dev/null || { echo "$tool is not installed (apt-get install -y $tool)" >&2; exit 1; }
done
swift build -c release --product docketd >&2
bin="$(swift build -c release --show-bin-path)/docketd"

work="$(mktemp -d)"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

start() { # name, extra flags…: starts a server in the background
    local name="$1"; shift
    "$bin" --demo --port 0 --data-dir "$work/$name" --log-level warning "$@" >"$work/$name.out" 2>"$work/$name.err" &
    pids+=($!)
}
url_of() { # name: waits for the server's startup line and prints its base URL
    for _ in $(seq 1 100); do
        grep -q 'listening on' "$work/$1.out" 2>/dev/null && break
        sleep 0.1
    done
    sed -n 's/^docketd listening on //p' "$work/$1.out"
}
start http
server_http="${pids[0]}"
start https --tls-cert "$work/cert.pem" --tls-key "$work/key.pem"
server_https="${pids[1]}"
http="$(url_of http)"
https="$(url_of https)"
[ -n "$http" ] && [ -n "$https" ] || { echo "docketd did not start" >&2; cat "$work"/*.err >&2; exit 1; }

incident=cdb04ffc53247d4908555def767adca7
basic="Authorization: Basic $(printf 'john.doe:password' | base64)"
token="$(curl -sf -X POST "$http/oauth_token.do" \
    -d 'grant_type=password&client_id=docket-demo&client_secret=docket-demo-secret&username=john.doe&password=password' \
    | sed 's/.*"access_token":"\([^"]*\)".*/\1/')"
head -c 65536 /dev/urandom >"$work/blob.bin"
attachment="$(curl -sf -u john.doe:password -H 'Content-Type: application/octet-stream' --data-binary @"$work/blob.bin" \
    "$http/api/now/attachment/file?table_name=incident&table_sys_id=$incident&file_name=blob.bin" \
    | sed 's/.*"sys_id":"\([0-9a-f]*\)".*/\1/')"
requests=""
for i in $(seq 1 10); do
    requests+="${requests:+,}{\"id\":\"$i\",\"method\":\"GET\",\"url\":\"/api/now/table/incident/$incident\"}"
done
cat >"$work/batch.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"batch_request_id":"1","rest_requests":[$requests]}'
LUA

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

run() { # name, server pid, url, header, [lua script]
    local before after out
    before="$(cpu_ticks "$2")"
    out="$(wrk -t"$threads" -c"$connections" -d"${duration}s" --latency -H "$4" ${5:+-s "$5"} "$3")"
    after="$(cpu_ticks "$2")"
    local rps p50 p99 errors total cpu
    rps="$(awk '/^Requests\/sec/ {print $2}' <<<"$out")"
    p50="$(awk '$1 == "50%" {print $2}' <<<"$out")"
    p99="$(awk '$1 == "99%" {print $2}' <<<"$out")"
    errors="$(awk '/Non-2xx/ {print $5}' <<<"$out")"
    total="$(awk '/requests in/ {print $1}' <<<"$out")"
    cpu="$(awk -v t="$((after - before))" -v n="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", t / hz / n * 1e6 }')"
    echo "| $1 | $rps | $p50 | $p99 | ${errors:-0} | $cpu |"
}

echo "| request | requests/s | p50 | p99 | non-2xx | server CPU µs/request |"
echo "|---|---:|---:|---:|---:|---:|"
run "GET one incident, Basic" "$server_http" "$http/api/now/table/incident/$incident" "$basic"
run "GET one incident, OAuth bearer" "$server_http" "$http/api/now/table/incident/$incident" "Authorization: Bearer $token"
run "GET one incident, Basic over HTTPS" "$server_https" "$https/api/now/table/incident/$incident" "$basic"
run "GET stats: count + avg grouped by priority" "$server_http" \
    "$http/api/now/stats/incident?sysparm_count=true&sysparm_group_by=priority&sysparm_avg_fields=reassignment_count" "$basic"
run "GET a 64 KiB attachment" "$server_http" "$http/api/now/attachment/$attachment/file" "$basic"
run "POST batch of 10 single-record GETs" "$server_http" "$http/api/now/v1/batch" "$basic" "$work/batch.lua"
echo
echo "($threads wrk threads, $connections connections, ${duration}s per run, $(nproc) cores, $(date -u +%Y-%m-%d); HTTPS keeps connections alive, so the handshake is paid once per connection)"
