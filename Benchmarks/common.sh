# Shared by the wrk benchmarks: `source "$(dirname "$0")/common.sh"`, then `start_docketd [extra docketd flags]`.
# Builds release docketd, starts it with demo data on a free port in a temporary data folder (removed on exit)
# and sets `root`, `data`, `log`, `server` (its pid) and `base` (its URL).
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

start_docketd() {
    command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install -y wrk)" >&2; exit 1; }
    swift build -c release --product docketd >&2
    local bin
    bin="$(swift build -c release --show-bin-path)/docketd"
    data="$(mktemp -d)"
    log="$data/docketd.log"
    "$bin" --demo --port 0 --data-dir "$data/db" --log-level warning "$@" >"$data/stdout" 2>"$log" &
    server=$!
    trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -rf "$data"' EXIT
    for _ in $(seq 1 100); do
        grep -q 'listening on' "$data/stdout" 2>/dev/null && break
        sleep 0.1
    done
    base="$(sed -n 's/^docketd listening on //p' "$data/stdout")"
    [ -n "$base" ] || { echo "docketd did not start:" >&2; cat "$log" >&2; exit 1; }
}
