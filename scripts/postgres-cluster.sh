#!/usr/bin/env bash
# A throw-away PostgreSQL cluster for tests and benchmarks.
#
#   scripts/postgres-cluster.sh install        installs PostgreSQL from Debian when missing (start does it too)
#   scripts/postgres-cluster.sh start [PORT]   installs PostgreSQL from Debian when missing, creates a cluster in
#                                              a new temporary folder and starts it on 127.0.0.1:PORT (default
#                                              25432, below Linux's range of ports handed to outgoing connections,
#                                              so a test's client socket never holds it; when it is taken anyway,
#                                              the next ones are tried); prints the URL to use as
#                                              DOCKET_TEST_POSTGRES_URL
#   scripts/postgres-cluster.sh stop           stops it and removes its folder
#   scripts/postgres-cluster.sh pause          stops the server, keeping its data (an outage, for tests)
#   scripts/postgres-cluster.sh resume         starts it again after pause
#
# initdb refuses to run as root, so the cluster belongs to the `postgres` user. It trusts local connections:
# it is for tests only, listens on loopback only, and is removed by `stop`.
#
# The cluster runs with fsync=off (nothing in it needs to survive a crash of the machine, and tests run faster);
# DOCKET_PG_FSYNC=on starts it with durable commits, as a production server has them (for benchmarks of commits).
#
# Where the cluster is recorded: DOCKET_PG_STATE, default a folder per user in /tmp. `start` refuses while the
# cluster recorded there is set up, running or paused (stop it first, or give another DOCKET_PG_STATE for a second
# cluster); it never stops a cluster someone else started.
set -euo pipefail

state=${DOCKET_PG_STATE:-/tmp/docket-postgres-cluster-$(id -un)}
port="${2:-25432}"
fsync="${DOCKET_PG_FSYNC:-off}"
[ "$fsync" = on ] || [ "$fsync" = off ] || { echo "DOCKET_PG_FSYNC is on or off, not '$fsync'" >&2; exit 2; }

bindir() {
    if command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/initdb" ]; then pg_config --bindir; return; fi
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
    [ -n "$dir" ] && echo "$dir"
}

install_postgres() {
    if [ -z "$(bindir)" ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
}

case "${1:-}" in
install)
    install_postgres
    ;;
start)
    install_postgres
    bin=$(bindir)
    if [ -f "$state/port" ]; then
        recorded=$(cat "$state/data")
        if [ -d "$recorded/db" ]; then
            # Running or paused: someone's cluster, which a start must not take away.
            echo "A cluster is already set up on port $(cat "$state/port") (its folder $recorded): stop it with '$0 stop'," \
                "or set DOCKET_PG_STATE to another folder for a second cluster." >&2
            exit 1
        fi
        # Recorded but gone (the machine restarted): forget it.
        rm -rf "$state"
    fi
    data=$(mktemp -d /tmp/docket-pg.XXXXXX)
    mkdir -p "$state"
    chown postgres "$data"
    run() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
    run "'$bin/initdb' -D '$data/db' -U postgres -A trust -E UTF8 --locale=C.UTF-8 >'$data/initdb.log' 2>&1"
    # A port someone else holds: the next one (a few times) rather than no cluster.
    for attempt in 1 2 3 4 5; do
        if run "'$bin/pg_ctl' -D '$data/db' -l '$data/server.log' -w -o \"-p $port -k '$data' -c listen_addresses=127.0.0.1 -c max_connections=1000 -c shared_buffers=64MB -c fsync=$fsync\" start >/dev/null"; then
            break
        fi
        if [ "$attempt" = 5 ] || ! grep -q "could not bind\|could not create any TCP/IP sockets" "$data/server.log"; then
            echo "PostgreSQL did not start; its log:" >&2
            tail -20 "$data/server.log" >&2
            exit 1
        fi
        port=$((port + 1))
    done
    echo "$data" >"$state/data"
    echo "$bin" >"$state/bin"
    echo "$port" >"$state/port"
    echo "$fsync" >"$state/fsync"
    echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
    ;;
stop)
    [ -f "$state/data" ] || exit 0
    data=$(cat "$state/data")
    bin=$(cat "$state/bin")
    if [ "$(id -u)" = 0 ]; then
        su postgres -s /bin/sh -c "'$bin/pg_ctl' -D '$data/db' -m fast -w stop" >/dev/null 2>&1 || true
    else
        "$bin/pg_ctl" -D "$data/db" -m fast -w stop >/dev/null 2>&1 || true
    fi
    # Only a folder this script made.
    case "$data" in /tmp/docket-pg.*) rm -rf "$data" ;; *) echo "not removing $data: not a folder of this script" >&2 ;; esac
    rm -rf "$state"
    ;;
pause | resume)
    [ -f "$state/data" ] || { echo "no cluster is running" >&2; exit 1; }
    data=$(cat "$state/data")
    bin=$(cat "$state/bin")
    port=$(cat "$state/port")
    fsync=$(cat "$state/fsync" 2>/dev/null || echo off)
    if [ "$1" = pause ]; then
        command="'$bin/pg_ctl' -D '$data/db' -m fast -w stop"
    else
        command="'$bin/pg_ctl' -D '$data/db' -l '$data/server.log' -w -o \"-p $port -k '$data' -c listen_addresses=127.0.0.1 -c max_connections=1000 -c shared_buffers=64MB -c fsync=$fsync\" start"
    fi
    if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$command" >/dev/null; else sh -c "$command" >/dev/null; fi
    ;;
*)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
