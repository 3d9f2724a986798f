# Shared by the benchmarks that measure PostgreSQL beside docketd: `source "$(dirname "$0")/measure.sh"`.
#   release_docketd            prints DOCKET_BENCH_BINARY, or builds this tree's release docketd and prints its path
#   ticks_of PID…              user + system clock ticks of the processes, summed
#   postgres_ticks             every PostgreSQL process's ticks, those that ended since included
#   post_lua FILE              writes wrk's script for the benchmarks' POST (an incident, admin by Basic auth)
#   benchmark_postgres PORT    sets `postgres` to DOCKET_BENCH_POSTGRES_URL, or starts a throw-away cluster on PORT
#                              (scripts/postgres-cluster.sh) and sets `started_cluster=1` (stop it on exit)

release_docketd() {
    if [ -n "${DOCKET_BENCH_BINARY:-}" ]; then
        echo "$DOCKET_BENCH_BINARY"
        return
    fi
    swift build -c release --product docketd >&2
    echo "$(swift build -c release --show-bin-path)/docketd"
}

post_lua() {
    cat >"$1" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Basic $(printf 'admin:admin' | base64)"
wrk.body = '{"short_description":"Benchmark write","impact":"2","urgency":"2"}'
LUA
}

ticks_of() {
    local total=0 pid
    for pid in "$@"; do
        [ -r "/proc/$pid/stat" ] && total=$((total + $(awk '{ print $14 + $15 }' "/proc/$pid/stat")))
    done
    echo "$total"
}

# The postmaster's cutime/cstime hold its reaped children's time, so that a worker exiting mid-run does not
# subtract its time.
postgres_ticks() {
    local total=0 pid parent
    for pid in $(pgrep -x postgres || true); do
        parent="$(awk '{ print $4 }' "/proc/$pid/stat" 2>/dev/null || echo 0)"
        if [ "$(cat "/proc/$parent/comm" 2>/dev/null)" = postgres ]; then
            total=$((total + $(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
        else
            total=$((total + $(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
        fi
    done
    echo "$total"
}

started_cluster=""
benchmark_postgres() {
    postgres="${DOCKET_BENCH_POSTGRES_URL:-}"
    if [ -z "$postgres" ]; then
        postgres="$(scripts/postgres-cluster.sh start "$1")"
        started_cluster=1
    fi
}

# The EXIT trap of a script that keeps its docketd pids in `pids` and its files in `work`: stops them, the
# cluster benchmark_postgres started, and removes the files.
pids=()
stop_benchmark() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    [ -n "$started_cluster" ] && scripts/postgres-cluster.sh stop
    rm -rf "$work"
}
