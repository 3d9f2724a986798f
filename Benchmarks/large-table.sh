#!/usr/bin/env bash
# "My active work, most recently updated first" on a task table of 1,000,000 rows, on SQLite and on PostgreSQL.
#
#   Benchmarks/large-table.sh [rows]
#
# For each storage: starts a release docketd with demo data, stops it, adds ROWS (default 1,000,000) incidents
# straight into `task` with SQL (one in 100 assigned to john.doe, two in three active, updated one second
# apart), starts docketd again and times, with curl, 30 requests of each page of
#   GET /api/now/table/task?sysparm_query=assigned_to=<john>^active=true^ORDERBYDESCsys_updated_on&sysparm_limit=20
# (the first page, the second, the 51st), as john.doe with Basic. Prints a Markdown table (median and slowest).
# Needs curl and sqlite3, and PostgreSQL: DOCKET_BENCH_POSTGRES_URL (without options), else a throw-away cluster.
set -euo pipefail
rows="${1:-1000000}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
for tool in curl sqlite3 psql; do
    command -v "$tool" >/dev/null || { echo "$tool is not installed" >&2; exit 1; }
done
source "$root/Benchmarks/measure.sh"
bin="$(release_docketd)"
work="$(mktemp -d)"
server=""
cleanup() {
    [ -n "$server" ] && { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }
    [ -n "$started_cluster" ] && scripts/postgres-cluster.sh stop
    rm -rf "$work"
}
trap cleanup EXIT
benchmark_postgres 55434
postgres="${postgres%%\?*}"
schema="large_$(date +%s)"

start() { # docketd flags…; sets $server and $url
    "$bin" --port 0 --log-level warning "$@" >"$work/stdout" 2>"$work/stderr" &
    server=$!
    for _ in $(seq 1 600); do grep -q 'listening on' "$work/stdout" 2>/dev/null && break; sleep 0.1; done
    url="$(sed -n 's/^docketd listening on //p' "$work/stdout")"
    [ -n "$url" ] || { echo "docketd did not start:" >&2; cat "$work/stderr" >&2; exit 1; }
}
stop() { kill "$server"; wait "$server" 2>/dev/null || true; server=""; }

john=""
fill() { # storage
    local insert
    if [ "$1" = sqlite ]; then
        insert="WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $rows)
INSERT INTO task (sys_id, sys_class_name, number, short_description, assigned_to, active, state, priority,
    sys_created_on, sys_updated_on, sys_created_by, sys_updated_by, sys_mod_count)
SELECT printf('%032x', i + 1000000000), 'incident', 'BULK' || i, 'Bulk task ' || i,
    CASE WHEN i % 100 = 0 THEN '$john' ELSE printf('%032x', i % 100) END, CASE WHEN i % 3 = 0 THEN 0 ELSE 1 END,
    '2', 4, datetime('2025-01-01', '+' || i || ' seconds'), datetime('2025-01-01', '+' || i || ' seconds'),
    'admin', 'admin', 0 FROM n;
ANALYZE;"
        sqlite3 "$work/sqlite/docket.sqlite" "$insert"
    else
        insert="INSERT INTO task (sys_id, sys_class_name, number, short_description, assigned_to, active, state, priority,
    sys_created_on, sys_updated_on, sys_created_by, sys_updated_by, sys_mod_count)
SELECT lpad(to_hex(i + 1000000000), 32, '0'), 'incident', 'BULK' || i, 'Bulk task ' || i,
    CASE WHEN i % 100 = 0 THEN '$john' ELSE lpad(to_hex(i % 100), 32, '0') END, CASE WHEN i % 3 = 0 THEN 0 ELSE 1 END,
    '2', 4, to_char(timestamp '2025-01-01' + i * interval '1 second', 'YYYY-MM-DD HH24:MI:SS'),
    to_char(timestamp '2025-01-01' + i * interval '1 second', 'YYYY-MM-DD HH24:MI:SS'), 'admin', 'admin', 0
FROM generate_series(1, $rows) AS i;
ANALYZE;"
        PGOPTIONS="-c search_path=$schema" psql -q -v ON_ERROR_STOP=1 "$postgres" -c "$insert" >/dev/null
    fi
}

echo "| storage, page of 20 (of $rows tasks) | median | slowest of 30 |"
echo "|---|---|---|"
for storage in sqlite postgres; do
    if [ "$storage" = sqlite ]; then flags=(--data-dir "$work/sqlite"); else flags=(--data-dir "$work/pg" --database "$postgres?sslmode=disable&schema=$schema"); fi
    start --demo "${flags[@]}"
    john="$(curl -sf -u admin:admin "$url/api/now/table/sys_user?user_name=john.doe&sysparm_fields=sys_id" | sed 's/.*"sys_id":"\([0-9a-f]*\)".*/\1/')"
    stop
    fill "$storage"
    start "${flags[@]}"
    query="sysparm_query=assigned_to%3D$john%5Eactive%3Dtrue%5EORDERBYDESCsys_updated_on&sysparm_limit=20"
    curl -sf -u john.doe:password -o /dev/null "$url/api/now/table/task?$query"
    total="$(curl -sf -u john.doe:password -D - -o /dev/null "$url/api/now/table/task?$query" | tr -d '\r' | sed -n 's/^[Xx]-[Tt]otal-[Cc]ount: //p')"
    for offset in 0 20 1000; do
        for _ in $(seq 1 30); do
            curl -sf -u john.doe:password -o /dev/null -w '%{time_total}\n' "$url/api/now/table/task?$query&sysparm_offset=$offset"
        done | sort -n | awk -v name="$storage: offset $offset ($total match)" '{ v[NR] = $1 * 1000 } END { printf "| %s | %.1f ms | %.1f ms |\n", name, v[int((NR + 1) / 2)], v[NR] }'
    done
    stop
done
