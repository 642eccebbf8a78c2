#!/usr/bin/env bash
# Replay latency on a full ledger against an empty one, on the same PostgreSQL, each in a
# throwaway schema: the empty ledger replays its one operation; the full one (OPERATIONS,
# default 10,000,000, written once by COPY) replays operations picked at random across it.
# Both are measured one request at a time (pure latency) and at CONCURRENCY (16).
#
#   cmd/idembench/bigledger.sh [postgres-url]    OPERATIONS, CONCURRENCY (16), SECONDS_PER_RUN (20);
#                                        KEEP_SCHEMA=name keeps the full ledger there, and reuses it
#
# Needs about 700 bytes of disk per operation, and some minutes to write them.
set -euo pipefail
cd "$(dirname "$0")/../.."
URL=${1:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
N=${OPERATIONS:-10000000}
C=${CONCURRENCY:-16}
T=${SECONDS_PER_RUN:-20}
OUT=$(mktemp -d)
EMPTY=bench_empty_$(date +%s)
FULL=${KEEP_SCHEMA:-bench_full_$(date +%s)}
export PGOPTIONS="-c client_min_messages=warning"
psql -q "$URL" -c "CREATE SCHEMA $EMPTY" -c "CREATE SCHEMA IF NOT EXISTS $FULL"
if [[ -n "${KEEP_SCHEMA:-}" ]]; then # the full ledger stays for the next run (or a closer look)
	trap 'psql -q "$URL" -c "DROP SCHEMA $EMPTY CASCADE"; rm -rf "$OUT"' EXIT
else
	trap 'psql -q "$URL" -c "DROP SCHEMA $EMPTY CASCADE" -c "DROP SCHEMA $FULL CASCADE"; rm -rf "$OUT"' EXIT
fi
in_schema() { if [[ "$URL" == *\?* ]]; then echo "$URL&search_path=$1"; else echo "$URL?search_path=$1"; fi; }
go build -o "$OUT/idembench" ./cmd/idembench

for c in 1 "$C"; do
	"$OUT/idembench" --database "$(in_schema "$FULL")" --tenant bulk --preload "$N" --only replay-old \
		--concurrency "$c" --duration "${T}s" --json >"$OUT/full-$c.json"
	"$OUT/idembench" --database "$(in_schema "$EMPTY")" --only replay \
		--concurrency "$c" --duration "${T}s" --json >"$OUT/empty-$c.json"
done
psql -qAt "$URL" -c "SELECT 'operations: ' || count(*) || ' rows, ' || pg_size_pretty(pg_total_relation_size('$FULL.operations')) || ' with indexes' FROM $FULL.operations"

python3 - "$OUT" "$N" "$C" <<'PY'
import json, sys
out, n, c = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ms = lambda ns: f"{ns / 1e6:.2f} ms"
print(f"{'ledger':<24} {'in flight':>9} {'req/s':>8} {'p50':>10} {'p90':>10} {'p99':>10} {'errors':>6}")
for conc in ("1", c):
    empty = json.load(open(f"{out}/empty-{conc}.json"))["results"][0]
    full = json.load(open(f"{out}/full-{conc}.json"))["results"][0]
    for label, r in (("empty (1 operation)", empty), (f"{n:,} operations", full)):
        print(f"{label:<24} {conc:>9} {r['per_second']:>8.0f} {ms(r['p50_ns']):>10} {ms(r['p90_ns']):>10} {ms(r['p99_ns']):>10} {r['errors']:>6}")
    print("  full / empty: " + ", ".join(f"{q} {full[q + '_ns'] / empty[q + '_ns']:.2f}x" for q in ("p50", "p90", "p99")))
PY
