#!/usr/bin/env bash
# How many POSTs a second PostgreSQL itself can take on this machine: the statements one POST of an incident sends
# (taken from the server's log while docketd answers one), replayed by pgbench from 16 clients for a few seconds,
# unprepared (each statement parsed and planned on each run, as docketd did before 2026-11-27 and does with
# `prepare=off`) and prepared (as docketd does now). pgbench's own client costs almost nothing, so this is the
# most any docketd could reach on the same machine, and the machine's busy share says whether PostgreSQL ran out
# of processor or waited on the write lock.
#
#   Benchmarks/postgres-ceiling.sh [seconds] [clients]
#
# Needs curl and PostgreSQL's pgbench; starts a throw-away cluster (scripts/postgres-cluster.sh, which first stops
# one it started before) and a release docketd (DOCKET_BENCH_BINARY=PATH for another build).
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-8}"
clients="${2:-16}"
work="$(mktemp -d)"
server=""
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
    scripts/postgres-cluster.sh stop
    rm -rf "$work"
}
trap cleanup EXIT

source Benchmarks/measure.sh
bin="$(release_docketd)"
url="$(scripts/postgres-cluster.sh start 55434)"
state=${DOCKET_PG_STATE:-/tmp/docket-postgres-cluster-$(id -un)}
port="$(cat "$state/port")"
pgbin="$(cat "$state/bin")"
log="$(cat "$state/data")/server.log"
sql() { "$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -qAt -c "$1" postgres; }

"$bin" --demo --port 0 --data-dir "$work/data" --database "$url&schema=ceiling" --log-level warning >"$work/out" 2>"$work/err" &
server=$!
for _ in $(seq 1 300); do grep -q 'listening on' "$work/out" 2>/dev/null && break; sleep 0.1; done
base="$(sed -n 's/^docketd listening on //p' "$work/out")"
[ -n "$base" ] || { echo "docketd did not start:" >&2; cat "$work/err" >&2; exit 1; }
post() {
    curl -sf -u admin:admin -H 'Content-Type: application/json' \
        -d '{"short_description":"Benchmark write","impact":"2","urgency":"2"}' "$base/api/now/table/incident" >/dev/null
}
post # the first write of a process reads more (caches); the next one is a POST as the benchmarks see it
# Each line names its backend (`[pid]`): the statements of the connection that wrote are told from the others.
sql "ALTER SYSTEM SET log_line_prefix = '%m [%p] '" && sql "ALTER SYSTEM SET log_statement = 'all'" && sql "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
lines="$(wc -l <"$log")"
post
sleep 0.5
sql "ALTER SYSTEM SET log_statement = 'none'" && sql "SELECT pg_reload_conf()" >/dev/null
tail -n +"$((lines + 1))" "$log" >"$work/post.log"
kill "$server"; wait "$server" 2>/dev/null || true; server=""

# The statements of the pooled connection with their values written in, and the new record's sys_id drawn afresh
# on each run (its primary key).
python3 - "$work/post.log" "$work/post.sql" <<'PY'
import re, sys
statements, current = [], None
for line in open(sys.argv[1]):
    m = re.search(r"\[(\d+)\] LOG:  execute (\S+): (.*)$", line)
    if m:
        current = None
        if m.group(2) == "<unnamed>" or m.group(2).startswith("docket_") and "docket_latest" not in m.group(2):
            current = [m.group(3), {}, m.group(1)]
            statements.append(current)
        continue
    m = re.search(r"DETAIL:  parameters: (.*)$", line)
    if m and current is not None:
        current[1] = {int(n): v for n, v in re.findall(r"\$(\d+) = ('(?:[^']|'')*'|NULL)", m.group(1))}
# Only the statements of the connection that wrote the record: the others in the window are the process's own
# (a presence echo each second, the listener's poll of the log's head), not the POST's.
writer = next(pid for text, _, pid in statements if "INSERT INTO" in text and "nextval(" in text)
texts = [re.sub(r"\$(\d+)\b", lambda m: values[int(m.group(1))], text) for text, values, pid in statements if pid == writer]
others = [" ".join(text.split()[:2]) for text, _, pid in statements if pid != writer]
if others:
    print(f"left out, run on other connections: {', '.join(others)}", file=sys.stderr)
# The insert that draws the number: on its own, or inside the statement that also appends the event (since
# 2026-12-02: `WITH docket_inserted AS (INSERT …) SELECT …, docket_append_event(…)`, run without BEGIN and COMMIT).
inserted = next(t for t in texts if "INSERT INTO" in t and "nextval(" in t)
sys_id = re.search(r"'([0-9a-f]{32})'", inserted[inserted.index("VALUES"):]).group(0)
out = []
for text in texts:
    if text.startswith("WITH appended AS"):
        out.append(text.replace(sys_id, ":id", 1))  # the event's record; its JSON keeps the literal
    else:
        out.append(text.replace(sys_id, ":id"))
open(sys.argv[2], "w").write("\\set id random(1, 9000000000000000000)\n" + ";\n".join(out) + ";\n")
print(f"{len(out)} statements of one POST: " + ", ".join(t.split()[0] for t in out), file=sys.stderr)
PY

echo "| mode | POSTs/s | machine busy | PostgreSQL + pgbench CPU per POST |"
echo "|---|---:|---:|---:|"
hz="$(getconf CLK_TCK)"
for mode in extended prepared; do
    read -r _ a1 a2 a3 a4 a5 a6 a7 _ </proc/stat
    out="$(PGOPTIONS="-c search_path=ceiling" "$pgbin/pgbench" -h 127.0.0.1 -p "$port" -U postgres -n -c "$clients" -j 2 \
        -T "$duration" -M "$mode" -f "$work/post.sql" postgres 2>&1)"
    read -r _ b1 b2 b3 b4 b5 b6 b7 _ </proc/stat
    busy=$(((b1 + b2 + b3 + b6 + b7) - (a1 + a2 + a3 + a6 + a7)))
    idle=$(((b4 + b5) - (a4 + a5)))
    tps="$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")"
    done_count="$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")"
    [ -n "$tps" ] || { echo "pgbench failed:" >&2; echo "$out" >&2; exit 1; }
    name="unprepared (-M extended)"; [ "$mode" = prepared ] && name="prepared (-M prepared)"
    awk -v n="$name" -v t="$tps" -v b="$busy" -v i="$idle" -v c="$done_count" -v hz="$hz" \
        'BEGIN { printf "| %s | %.0f | %.0f %% | %.0f µs |\n", n, t, 100 * b / (b + i), b / hz / c * 1e6 }'
done
