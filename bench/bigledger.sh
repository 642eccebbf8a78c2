#!/usr/bin/env bash
# Replay latency on a full ledger against an empty one, on the same PostgreSQL, each in a
# throwaway schema: the empty ledger replays its one operation; the full one (OPERATIONS,
# default 10,000,000, written by COPY) replays operations picked at random across it.
#
#   bench/bigledger.sh [postgres-url]    OPERATIONS, CONCURRENCY (16), SECONDS_PER_RUN (20)
#
# Needs about 1 KB of disk per operation, and some minutes to write them.
set -euo pipefail
cd "$(dirname "$0")/.."
URL=${1:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
N=${OPERATIONS:-10000000}
C=${CONCURRENCY:-16}
T=${SECONDS_PER_RUN:-20}
OUT=$(mktemp -d)
EMPTY=bench_empty_$(date +%s)
FULL=bench_full_$(date +%s)
export PGOPTIONS="-c client_min_messages=warning"
psql -q "$URL" -c "CREATE SCHEMA $EMPTY" -c "CREATE SCHEMA $FULL"
trap 'psql -q "$URL" -c "DROP SCHEMA $EMPTY CASCADE" -c "DROP SCHEMA $FULL CASCADE"; rm -rf "$OUT"' EXIT
in_schema() { if [[ "$URL" == *\?* ]]; then echo "$URL&search_path=$1"; else echo "$URL?search_path=$1"; fi; }
go build -o "$OUT/idembench" ./cmd/idembench

"$OUT/idembench" --database "$(in_schema "$FULL")" --preload "$N" --only replay-old \
	--concurrency "$C" --duration "${T}s" --json >"$OUT/full.json"
"$OUT/idembench" --database "$(in_schema "$EMPTY")" --only replay \
	--concurrency "$C" --duration "${T}s" --json >"$OUT/empty.json"
psql -qAt "$URL" -c "SELECT 'operations table and its indexes: ' || pg_size_pretty(pg_total_relation_size('$FULL.operations'))"

python3 - "$OUT/empty.json" "$OUT/full.json" "$N" <<'PY'
import json, sys
empty = json.load(open(sys.argv[1]))["results"][0]
full = json.load(open(sys.argv[2]))["results"][0]
n = int(sys.argv[3])
ms = lambda ns: f"{ns / 1e6:.2f} ms"
print(f"{'ledger':<30} {'req/s':>8} {'p50':>10} {'p90':>10} {'p99':>10}")
print(f"{'empty (1 operation)':<30} {empty['per_second']:>8.0f} {ms(empty['p50_ns']):>10} {ms(empty['p90_ns']):>10} {ms(empty['p99_ns']):>10}")
print(f"{f'{n:,} operations':<30} {full['per_second']:>8.0f} {ms(full['p50_ns']):>10} {ms(full['p90_ns']):>10} {ms(full['p99_ns']):>10}")
for q in ("p50", "p90", "p99"):
    print(f"{q}: full / empty = {full[q + '_ns'] / empty[q + '_ns']:.2f}x")
print(f"errors: empty {empty['errors']}, full {full['errors']}")
PY
