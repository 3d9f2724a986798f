#!/usr/bin/env bash
# What an OpenID access token costs a Table API request, against the other credentials, with wrk against a
# release docketd on loopback.
#
#   Benchmarks/openid.sh [duration-seconds] [connections]
#
# GET /api/now/table/incident/<sys_id> (one record) with, in one run, alternating three times (medians reported):
#   1. Basic (john.doe; the cached credential check, no bcrypt per request)
#   2. the JSESSIONID session cookie of a Basic login
#   3. an OpenID access token (RS256 JWT from the realm's password grant: signature, expiry, session)
#   4. a ServiceNow OAuth access token (opaque, /oauth_token.do)
# and prints a Markdown table for docs/performance.md. Needs wrk and curl.
set -euo pipefail
duration="${1:-10}"
connections="${2:-32}"
threads=2
source "$(dirname "$0")/common.sh"
start_docketd

id="$(curl -sf -u john.doe:password "$base/api/now/table/incident?number=INC0010001&sysparm_fields=sys_id" | sed 's/.*"sys_id":"\([0-9a-f]*\)".*/\1/')"
cookie="$(curl -sf -u john.doe:password -D - -o /dev/null "$base/api/now/table/incident/$id" | sed -n 's/^[Ss]et-[Cc]ookie: \(JSESSIONID=[^;]*\).*/\1/p' | head -1)"
jwt="$(curl -sf -d grant_type=password -d client_id=datasync-starter-client -d username=john.doe -d password=password \
    "$base/realms/docket/protocol/openid-connect/token" | sed 's/.*"access_token":"\([^"]*\)".*/\1/')"
opaque="$(curl -sf -d grant_type=password -d client_id=docket-demo -d client_secret=docket-demo-secret -d username=john.doe \
    -d password=password "$base/oauth_token.do" | sed 's/.*"access_token":"\([^"]*\)".*/\1/')"
for header in "Authorization: Basic $(printf 'john.doe:password' | base64)" "Cookie: $cookie" "Authorization: Bearer $jwt" "Authorization: Bearer $opaque"; do
    status="$(curl -s -o /dev/null -w '%{http_code}' -H "$header" "$base/api/now/table/incident/$id")"
    [ "$status" = 200 ] || { echo "a credential does not work ($status): ${header%%:*}" >&2; exit 1; }
done

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$server/stat"; }
run() { # name, header
    local out before after
    before="$(cpu_ticks)"
    out="$(wrk -t"$threads" -c"$connections" -d"${duration}s" --latency -H "$2" "$base/api/now/table/incident/$id")"
    after="$(cpu_ticks)"
    local rps p50 p99 errors total cpu
    rps="$(awk '/^Requests\/sec/ {print $2}' <<<"$out")"
    p50="$(awk '$1 == "50%" {print $2}' <<<"$out")"
    p99="$(awk '$1 == "99%" {print $2}' <<<"$out")"
    errors="$(awk '/Non-2xx/ {print $5}' <<<"$out")"
    total="$(awk '/requests in/ {print $1}' <<<"$out")"
    cpu="$(awk -v t="$((after - before))" -v n="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", t / hz / n * 1e6 }')"
    echo "$1|$rps|$p50|$p99|${errors:-0}|$cpu"
}
declare -A rows
names=("Basic" "session cookie" "OpenID access token (JWT)" "OAuth access token (opaque)")
headers=("Authorization: Basic $(printf 'john.doe:password' | base64)" "Cookie: $cookie" "Authorization: Bearer $jwt" "Authorization: Bearer $opaque")
for round in 1 2 3; do
    for index in 0 1 2 3; do
        rows[$index]+="$(run "${names[$index]}" "${headers[$index]}")"$'\n'
    done
done
echo
echo "GET one incident, ${duration}s x3 per credential, $connections connections, wrk -t$threads (median of three by requests/s)"
echo
echo "| credential | requests/s | p50 | p99 | non-2xx | server CPU per request (µs) |"
echo "|---|---|---|---|---|---|"
for index in 0 1 2 3; do
    printf '%s' "${rows[$index]}" | sed '/^$/d' | sort -t'|' -k2 -n | sed -n '2p' | awk -F'|' '{ printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }'
done
