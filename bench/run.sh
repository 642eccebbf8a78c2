#!/usr/bin/env bash
# Runs the pgbench floor and idembench back to back on the same PostgreSQL, in a throwaway
# schema, and prints idembench's table and the ratios.
#
#   bench/run.sh [postgres-url]      CONCURRENCY (16) and SECONDS_PER_RUN (10) override
#
# The floor is pgbench with its default (simple) query protocol, the stated target's basis;
# the same scripts with -M prepared, the protocol idemgate's driver uses, are printed beside
# it as the stricter ceiling.
set -euo pipefail
cd "$(dirname "$0")/.."
URL=${1:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
SCHEMA=bench_$(date +%s)
C=${CONCURRENCY:-16}
T=${SECONDS_PER_RUN:-10}
OUT=$(mktemp -d)
export PGOPTIONS="-c client_min_messages=warning"
psql -q "$URL" -c "CREATE SCHEMA $SCHEMA"
trap 'psql -q "$URL" -c "DROP SCHEMA $SCHEMA CASCADE"; rm -rf "$OUT"' EXIT
SURL="$URL&search_path=$SCHEMA"
[[ "$URL" == *\?* ]] || SURL="$URL?search_path=$SCHEMA"
go build -o "$OUT/idemgate" ./cmd/idemgate
go build -o "$OUT/idembench" ./cmd/idembench
IDEMGATE_DATABASE_URL="$SURL" "$OUT/idemgate" migrate >/dev/null
PGOPTIONS="$PGOPTIONS -c search_path=$SCHEMA" psql -q "$URL" -f bench/pgbench/setup.sql

floor() { # script protocol
	PGOPTIONS="$PGOPTIONS -c search_path=$SCHEMA" pgbench -n -M "$2" -c "$C" -j 2 -T "$T" -f "bench/pgbench/$1.sql" "$URL" 2>/dev/null |
		awk '/^tps/ {print int($3)}'
}
NEW_FLOOR=$(floor new_operation simple)
NEW_PREPARED=$(floor new_operation prepared)
REPLAY_FLOOR=$(floor replay simple)
REPLAY_PREPARED=$(floor replay prepared)
"$OUT/idembench" --database "$SURL" --concurrency "$C" --duration "${T}s" --json >"$OUT/bench.json"

python3 - "$OUT/bench.json" "$NEW_FLOOR" "$NEW_PREPARED" "$REPLAY_FLOOR" "$REPLAY_PREPARED" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
new_floor, new_prep, replay_floor, replay_prep = map(int, sys.argv[2:6])
ms = lambda ns: f"{ns / 1e6:.2f} ms"
print(f"{'scenario':<28} {'req/s':>8} {'p50':>10} {'p90':>10} {'p99':>10} {'CPU/req':>9}  note")
for r in report["results"]:
    print(f"{r['name']:<28} {r['per_second']:>8.0f} {ms(r['p50_ns']):>10} {ms(r['p90_ns']):>10} {ms(r['p99_ns']):>10} "
          f"{r['cpu_per_request_ns'] / 1e3:>7.0f}µs  {r.get('note', '')}")
by = {r["name"]: r for r in report["results"]}
for name, floor, prep in (("new operations", new_floor, new_prep), ("replays", replay_floor, replay_prep)):
    got = by[name]["per_second"]
    print(f"{name}: idemgate {got:.0f}/s; pgbench floor {floor}/s -> {got / floor:.0%} "
          f"(-M prepared {prep}/s -> {got / prep:.0%})")
print(f"(PostgreSQL, concurrency {report['concurrency']}, {report['duration']} per scenario)")
PY
