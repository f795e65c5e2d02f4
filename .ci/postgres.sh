#!/usr/bin/env bash
# Starts a throwaway Postgres for the tests from the local binaries and
# prints its URL. Postgres will not run as root, so the cluster belongs to
# the `postgres` user when there is one. Stop it with: .ci/postgres.sh stop DIR
# fsync is off for the tests; a benchmark asks for it on: PG_FSYNC=on.
set -euo pipefail

bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
if [ "${1:-}" = "stop" ]; then
  dir=$2
  as_owner() { if [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1; then runuser -u postgres -- "$@"; else "$@"; fi; }
  as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  exit 0
fi

dir=$(mktemp -d /tmp/argus-pg.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
if [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1; then
  chown postgres "$dir"
  run() { runuser -u postgres -- "$@"; }
else
  run() { "$@"; }
fi
run "$bin/initdb" -D "$dir/data" -U argus --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
run "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w \
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=${PG_FSYNC:-off} -c max_connections=200" start >/dev/null \
  || { cat "$dir/postgres.log" >&2; exit 1; }
echo "postgres://argus@127.0.0.1:$port/postgres $dir"
