#!/usr/bin/env bash
# Measures what PgBouncer in transaction pooling costs the gateway (issue 29): idembench `new`
# and `replay-old` (random keys of PRELOAD preloaded operations), in the same rounds, against
#
#   - direct:              PostgreSQL, pgx's default mode (cache_statement: prepared statements)
#   - direct, exec:        PostgreSQL, default_query_exec_mode=exec (the PgBouncer-safe mode,
#                          without PgBouncer: the protocol's cost alone)
#   - pgbouncer, exec:     through PgBouncer 1.18, pool_mode = transaction, mode exec
#   - pgbouncer, simple:   through PgBouncer, default_query_exec_mode=simple_protocol
#
# idembench's "cpu" is its own process's CPU per request (gateway, in-process downstream and load
# generator: the client side of each mode); PgBouncer's, read from /proc, is printed beside.
# PgBouncer runs with the configuration of the tests (internal/proctest.PgBouncerConfig) on a
# free port, as postgres when run as root. All four share one database and one tenant, so the
# replays read the same 200,000 rows.
#
#   cmd/idembench/pgbouncer.sh [postgres-url]
#     ROUNDS (3), CONCURRENCY (16), SECONDS_PER_RUN (10), PRELOAD (200000)
set -euo pipefail
cd "$(dirname "$0")/../.."
URL=${1:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
ROUNDS=${ROUNDS:-3}
C=${CONCURRENCY:-16}
T=${SECONDS_PER_RUN:-10}
PRELOAD=${PRELOAD:-200000}
DB=pgbouncer29_$(date +%s)
OUT=$(mktemp -d)
export PGOPTIONS="-c client_min_messages=warning" # psql only: idembench runs without it (PgBouncer refuses an options startup parameter)

with_db() { # url database → the url naming that database
	python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$1" "$2"
}
HOST=$(python3 -c 'import sys, urllib.parse as u; print(u.urlsplit(sys.argv[1]).hostname)' "$URL")
PORT=$(python3 -c 'import sys, urllib.parse as u; print(u.urlsplit(sys.argv[1]).port or 5432)' "$URL")
BPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
DIRECT=$(with_db "$URL" "$DB")

psql -q "$URL" -c "CREATE DATABASE $DB"
cat >"$OUT/pgbouncer.ini" <<INI
[databases]
* = host=$HOST port=$PORT
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $BPORT
unix_socket_dir =
auth_type = trust
auth_file = $OUT/userlist.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
ignore_startup_parameters = extra_float_digits
logfile = $OUT/pgbouncer.log
pidfile = $OUT/pgbouncer.pid
INI
echo '"postgres" ""' >"$OUT/userlist.txt"
as=()
if [ "$(id -u)" = 0 ]; then chown -R postgres "$OUT"; as=(runuser -u postgres --); fi
"${as[@]}" pgbouncer -d "$OUT/pgbouncer.ini"
trap 'kill "$(cat "$OUT/pgbouncer.pid")" 2>/dev/null || true; sleep 0.5; psql -q "$URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"; rm -rf "$OUT"' EXIT
POOLED="postgres://postgres@127.0.0.1:$BPORT/$DB?sslmode=disable"
bouncer_ticks() { # PgBouncer's CPU so far, in clock ticks (user + system); fails if it is gone
	local pid
	pid=$(cat "$OUT/pgbouncer.pid" 2>/dev/null) && [ -r "/proc/$pid/stat" ] ||
		{ echo "PgBouncer is not running any more; its log:" >&2; tail -n 20 "$OUT/pgbouncer.log" >&2; return 1; }
	awk '{print $14 + $15}' "/proc/$pid/stat"
}

go build -o "$OUT/idembench" ./cmd/idembench
echo "preloading $PRELOAD operations (directly)" >&2
"$OUT/idembench" --database "$DIRECT" --tenant bench --preload "$PRELOAD" --only baseline --duration 1s >/dev/null

declare -A MODES=(
	["1 direct"]="$DIRECT"
	["2 direct, exec"]="$DIRECT&default_query_exec_mode=exec"
	["3 pgbouncer, exec"]="$POOLED&default_query_exec_mode=exec"
	["4 pgbouncer, simple"]="$POOLED&default_query_exec_mode=simple_protocol"
)
for r in $(seq 1 "$ROUNDS"); do
	for m in "1 direct" "2 direct, exec" "3 pgbouncer, exec" "4 pgbouncer, simple"; do
		b0=$(bouncer_ticks)
		env -u PGOPTIONS "$OUT/idembench" --database "${MODES[$m]}" --tenant bench --preload "$PRELOAD" --only new,replay-old \
			--concurrency "$C" --duration "${T}s" --json >"$OUT/r$r-${m%% *}.json"
		b1=$(bouncer_ticks)
		python3 - "$OUT/r$r-${m%% *}.json" "$r" "$m" "$((b1 - b0))" "$(getconf CLK_TCK)" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rates = {x["name"]: x for x in d["results"]}
line = [f"round {sys.argv[2]}", f"{sys.argv[3][2:]:<20}"]
requests = 0
for name, label in (("new operations", "new"), ("replays across the ledger", "replay-old")):
	x = rates.get(name)
	if x:
		requests += x["requests"]
		line.append(f"{label} {x['per_second']:>7,.0f}/s p50 {x['p50_ns']/1e6:6.2f} ms cpu {x['cpu_per_request_ns']/1e3:5.0f} µs errors {x['errors']}")
ticks, hz = int(sys.argv[4]), int(sys.argv[5])
if ticks and requests:
	line.append(f"pgbouncer cpu {ticks / hz / requests * 1e6:4.0f} µs/request")
print("  ".join(line), flush=True)
PY
	done
done
if grep -q ERROR "$OUT/pgbouncer.log"; then echo "PgBouncer logged errors:"; grep ERROR "$OUT/pgbouncer.log" | tail -n 5; fi
