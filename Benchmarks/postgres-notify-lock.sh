#!/usr/bin/env bash
# What a NOTIFY inside a writing transaction costs PostgreSQL's commits: pgbench appends events to the log through
# docketd's own function (`docket_append_event`, one implicit transaction per append), with and without a
# `pg_notify` in the same statement (what every write did until 2026-12-03), from 16 clients. PostgreSQL takes one
# lock for the whole cluster at the commit of any transaction that notified, and holds it until the commit is
# flushed, so those commits go one at a time; without it, commits that come together are flushed together.
# A `pg_notify` on its own (what docketd sends after a write now, one at a time per instance) is measured too.
#
#   [DOCKET_PG_FSYNC=on] Benchmarks/postgres-notify-lock.sh [seconds] [clients] [rounds]
#
# Starts a throw-away cluster (scripts/postgres-cluster.sh; DOCKET_PG_FSYNC=on for durable commits, as production
# has them, off by default) and a release docketd once, to create the schema (DOCKET_BENCH_BINARY=PATH for
# another build). Needs bash 4, curl and PostgreSQL's pgbench.
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-6}"
clients="${2:-16}"
rounds="${3:-2}"
work="$(mktemp -d)"
server=""
export DOCKET_PG_STATE="$work/cluster"
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
    scripts/postgres-cluster.sh stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

source Benchmarks/measure.sh
bin="$(release_docketd)"
url="$(scripts/postgres-cluster.sh start 55438)"
port="$(cat "$DOCKET_PG_STATE/port")"
pgbin="$(cat "$DOCKET_PG_STATE/bin")"

"$bin" --demo --port 0 --data-dir "$work/data" --database "$url&schema=notify_lock" --log-level warning >"$work/out" 2>"$work/err" &
server=$!
for _ in $(seq 1 300); do grep -q 'listening on' "$work/out" 2>/dev/null && break; sleep 0.1; done
grep -q 'listening on' "$work/out" || { echo "docketd did not start:" >&2; cat "$work/err" >&2; exit 1; }
kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; server=""
# The comparison needs the function of a build that no longer notifies in it.
if "$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -qAt -c "SELECT prosrc FROM pg_proc p JOIN pg_namespace n ON \
n.oid = p.pronamespace WHERE proname = 'docket_append_event' AND nspname = 'notify_lock'" postgres | grep -q pg_notify; then
    echo "this docketd's docket_append_event notifies itself: use a build from 2026-12-03 or later" >&2
    exit 1
fi

append="docket_append_event('incident', 'task', md5(random()::text), 'insert', 'short_description', 'admin', \
'2026-12-03 12:00:00', '{\"short_description\":\"Benchmark write\"}', '{}')"
echo "SELECT $append;" >"$work/append.sql"
echo "SELECT $append, pg_notify('docket_notify_lock', '1');" >"$work/append-notify.sql"
echo "SELECT pg_notify('docket_notify_lock', '1');" >"$work/notify.sql"

fsync="$("$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -qAt -c 'SHOW fsync' postgres)"
echo "fsync=$fsync, $clients clients, ${duration} s per run, prepared statements"
echo
echo "| statement | transactions/s (each round) |"
echo "|---|---|"
declare -A rates
for _ in $(seq 1 "$rounds"); do
    for script in append append-notify notify; do
        out="$(PGOPTIONS="-c search_path=notify_lock" "$pgbin/pgbench" -h 127.0.0.1 -p "$port" -U postgres -n \
            -c "$clients" -j 2 -T "$duration" -M prepared -f "$work/$script.sql" postgres 2>&1)"
        tps="$(sed -n 's/^tps = \([0-9]*\).*/\1/p' <<<"$out" | head -1)"
        [ -n "$tps" ] || { echo "pgbench failed:" >&2; echo "$out" >&2; exit 1; }
        rates[$script]="${rates[$script]:-}${rates[$script]:+ · }$tps"
    done
done
echo "| the append alone (a write now) | ${rates[append]} |"
echo "| the append and \`pg_notify\` in one transaction (a write before) | ${rates[append-notify]} |"
echo "| \`pg_notify\` alone (the announcement after a write) | ${rates[notify]} |"
