#!/usr/bin/env bash
# Does a flood of wrong passwords stall other users? Against a release docketd on loopback:
#
#   Benchmarks/login-flood.sh [duration-seconds] [flood-connections]
#
#   1. quiet:     john.doe's GET of one incident (Basic, credentials already verified), 4 connections
#   2. flood:     the same while flood-connections (default 48) send abel.tuter with wrong passwords, each
#                 request a different one (so no two share a bcrypt check), login throttling on (the default)
#   3. unthrottled flood: the same with throttling switched off (--login-free-failures and
#                 --login-free-address-failures 1000000), so every attempt reaches bcrypt: this shows what
#                 keeping bcrypt on its own bounded threads does by itself
# and prints a Markdown table for docs/performance.md: the measured GET's requests/s, p50 and p99, and what the
# flood got back (status counts). Target: the GET's p99 under a flood within 3x of the quiet p99.
# Needs wrk (apt-get install -y wrk) and curl.
set -euo pipefail
duration="${1:-10}"
flood="${2:-48}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install -y wrk)" >&2; exit 1; }
swift build -c release --product docketd >&2
bin="$(swift build -c release --show-bin-path)/docketd"
work="$(mktemp -d)"
server=""
stop() { if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi; server=""; }
trap 'stop; rm -rf "$work"' EXIT

start() { # extra docketd flags
    stop
    rm -rf "$work/db" "$work/stdout"
    "$bin" --demo --port 0 --data-dir "$work/db" --log-level error "$@" >"$work/stdout" 2>"$work/log" &
    server=$!
    for _ in $(seq 1 200); do grep -q 'listening on' "$work/stdout" 2>/dev/null && break; sleep 0.1; done
    base="$(sed -n 's/^docketd listening on //p' "$work/stdout")"
    [ -n "$base" ] || { echo "docketd did not start" >&2; cat "$work/log" >&2; exit 1; }
    id="$(curl -sf -u john.doe:password "$base/api/now/table/incident?number=INC0010001&sysparm_fields=sys_id" | sed 's/.*"sys_id":"\([0-9a-f]*\)".*/\1/')"
}

good="Authorization: Basic $(printf '%s' 'john.doe:password' | base64)"
bad="Authorization: Basic $(printf '%s' 'abel.tuter:wrong-password' | base64)"

# Every flood request carries a different wrong password, so that no two share one bcrypt check.
cat >"$work/flood.lua" <<'LUA'
local chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function base64(data)
    return ((data:gsub(".", function(x)
        local r, b = "", x:byte()
        for i = 8, 1, -1 do r = r .. (b % 2 ^ i - b % 2 ^ (i - 1) > 0 and "1" or "0") end
        return r
    end) .. "0000"):gsub("%d%d%d?%d?%d?%d?", function(x)
        if #x < 6 then return "" end
        local c = 0
        for i = 1, 6 do c = c + (x:sub(i, i) == "1" and 2 ^ (6 - i) or 0) end
        return chars:sub(c + 1, c + 1)
    end) .. ({ "", "==", "=" })[#data % 3 + 1])
end
local counter = 0
request = function()
    counter = counter + 1
    local credentials = "abel.tuter:wrong-" .. counter .. "-" .. math.random(1000000000)
    return wrk.format("GET", nil, { ["Authorization"] = "Basic " .. base64(credentials) })
end
LUA

measure() { # label → "label|rps|p50|p99"
    local out
    out="$(wrk -t1 -c4 -d"${duration}s" --latency -H "$good" "$base/api/now/table/incident/$id")"
    echo "$1|$(awk '/^Requests\/sec/ {print $2}' <<<"$out")|$(awk '$1 == "50%" {print $2}' <<<"$out")|$(awk '$1 == "99%" {print $2}' <<<"$out")"
}

flood_run() { # label → measured row, plus the flood's own summary
    wrk -t1 -c"$flood" -d"$((duration + 2))s" -s "$work/flood.lua" "$base/api/now/table/incident?sysparm_limit=1" >"$work/flood.txt" &
    local flooder=$!
    sleep 1
    measure "$1"
    wait "$flooder" || true
}

flood_summary() {
    local total non2xx
    total="$(awk '/requests in/ {print $1}' "$work/flood.txt")"
    echo "$total wrong-password requests answered in $((duration + 2)) s"
}

# Three rounds; each line of the table is the round with the median p99, so that one noisy run on a shared
# 2-core machine does not decide the figure.
quiet_rows=(); on_rows=(); off_rows=()
for round in 1 2 3; do
    start
    quiet_rows+=("$(measure "quiet")")
    on_rows+=("$(flood_run "$flood connections of wrong passwords, throttling on")")
    throttled_summary="$(flood_summary)"
    after="$(curl -s -o /dev/null -w '%{http_code}' -H "$bad" "$base/api/now/table/incident?sysparm_limit=1")"
    start --login-free-failures 1000000 --login-free-address-failures 1000000
    off_rows+=("$(flood_run "$flood connections of wrong passwords, throttling off")")
    unthrottled_summary="$(flood_summary)"
done
probe="$(for _ in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code} ' -H "$bad" "$base/api/now/table/incident?sysparm_limit=1" & done; wait)"
to_ms() { awk '{ v = $1; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms$/, "", v) } else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 } print v }'; }
pick() { # rows on stdin: the row whose p99 is the median
    local rows; rows="$(cat)"
    local sorted; sorted="$(while IFS='|' read -r name rps p50 p99; do echo "$(to_ms <<<"$p99") $name|$rps|$p50|$p99"; done <<<"$rows" | sort -n)"
    sed -n 2p <<<"$sorted" | cut -d' ' -f2-
}
quiet="$(printf '%s\n' "${quiet_rows[@]}" | pick)"
flooded="$(printf '%s\n' "${on_rows[@]}" | pick)"
unthrottled="$(printf '%s\n' "${off_rows[@]}" | pick)"

echo "| john.doe's GET of one incident (4 connections) | requests/s | p50 | p99 |"
echo "|---|---:|---:|---:|"
for row in "$quiet" "$flooded" "$unthrottled"; do
    IFS='|' read -r name rps p50 p99 <<<"$row"
    echo "| $name | $rps | $p50 | $p99 |"
done
echo
p99s() { for row in "$@"; do cut -d'|' -f4 <<<"$row"; done | tr '\n' ' '; }
echo "all p99s: quiet $(p99s "${quiet_rows[@]}")/ throttling on $(p99s "${on_rows[@]}")/ throttling off $(p99s "${off_rows[@]}")"
q="$(cut -d'|' -f4 <<<"$quiet" | to_ms)"
for row in "$flooded" "$unthrottled"; do
    awk -v f="$(cut -d'|' -f4 <<<"$row" | to_ms)" -v q="$q" -v n="$(cut -d'|' -f1 <<<"$row")" 'BEGIN { printf "%s: p99 %.1fx the quiet p99\n", n, f / q }'
done
echo "last round: throttling on, $throttled_summary; a wrong password after the flood answers $after"
echo "last round: throttling off, $unthrottled_summary; six more at once answer: $probe"
echo "($(nproc) cores, $(date -u +%Y-%m-%d); p99 target: within 3x of quiet)"
