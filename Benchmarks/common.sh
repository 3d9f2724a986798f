# Shared by the wrk benchmarks: `source "$(dirname "$0")/common.sh"`, then `start_docketd [extra docketd flags]`.
# Builds release docketd, starts it with demo data on a free port in a temporary data folder (removed on exit)
# and sets `root`, `data`, `log`, `server` (its pid) and `base` (its URL). DOCKET_BENCH_BINARY=PATH runs that
# docketd instead of building this tree's (to measure two builds side by side).
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

start_docketd() {
    command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install -y wrk)" >&2; exit 1; }
    local bin="${DOCKET_BENCH_BINARY:-}"
    if [ -z "$bin" ]; then
        swift build -c release --product docketd >&2
        bin="$(swift build -c release --show-bin-path)/docketd"
    fi
    data="$(mktemp -d)"
    log="$data/docketd.log"
    # DOCKET_BENCH_ARGS: more flags for every benchmark (split at spaces), e.g. "--otel-endpoint http://127.0.0.1:4318".
    # shellcheck disable=SC2086
    "$bin" --demo --port 0 --data-dir "$data/db" --log-level warning "$@" ${DOCKET_BENCH_ARGS:-} >"$data/stdout" 2>"$log" &
    server=$!
    trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -rf "$data"' EXIT
    for _ in $(seq 1 100); do
        grep -q 'listening on' "$data/stdout" 2>/dev/null && break
        sleep 0.1
    done
    base="$(sed -n 's/^docketd listening on //p' "$data/stdout")"
    [ -n "$base" ] || { echo "docketd did not start:" >&2; cat "$log" >&2; exit 1; }
}

# Adds COUNT incidents (default 120, so that a 100-record page is full) as admin, each with abel.tuter as caller
# (a reference to render). Needs `base` (start_docketd sets it).
fill_incidents() {
    local count="${1:-120}" caller i
    caller="$(curl -sf -u admin:admin "$base/api/now/table/sys_user?user_name=abel.tuter&sysparm_fields=sys_id" | sed 's/.*"sys_id":"\([0-9a-f]*\)".*/\1/')"
    for i in $(seq 1 "$count"); do
        curl -sf -u admin:admin -H 'Content-Type: application/json' -o /dev/null \
            -d "{\"short_description\":\"Benchmark incident $i\",\"impact\":\"2\",\"urgency\":\"2\",\"caller_id\":\"$caller\"}" \
            "$base/api/now/table/incident"
    done
}
