#!/usr/bin/env bash
# What bounds idemgate's rates on this machine: the CPU one request costs, in the gateway's
# process (gateway, in-process downstream and load generator: idembench's cpu_per_request) and
# on the whole machine (busy CPU seconds from /proc/stat before and after each run, so run it
# with nothing else on the machine), beside the bare HTTP ceiling (baseline: the load generator
# against an instant handler) and the database floor's own cost per operation (pgbench).
#
#   cmd/idembench/bound.sh [postgres-url]     FLOOR (required: the floor scripts' directory), SECONDS_PER_RUN (10)
set -euo pipefail
cd "$(dirname "$0")/../.."
URL=${1:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
if [ -z "${FLOOR:-}" ] || [ ! -f "$FLOOR/new_op_spec.sql" ]; then
  echo "set FLOOR to the directory of the floor's SQL scripts (new_op_spec.sql, replay.sql, preload.sql, schema)" >&2
  exit 2
fi
T=${SECONDS_PER_RUN:-10}
STAMP=$(date +%s)
OUT=$(mktemp -d)
export PGOPTIONS="-c client_min_messages=warning"
with_db() { # url database → the url naming that database
	python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$1" "$2"
}
GWDB=bound_$STAMP FLOORDB=boundfloor_$STAMP
GURL=$(with_db "$URL" "$GWDB") FURL=$(with_db "$URL" "$FLOORDB")
psql -q "$URL" -c "CREATE DATABASE $GWDB" -c "CREATE DATABASE $FLOORDB"
trap 'psql -q "$URL" -c "DROP DATABASE IF EXISTS $GWDB" -c "DROP DATABASE IF EXISTS $FLOORDB"; rm -rf "$OUT"' EXIT
go build -o "$OUT/idembench" ./cmd/idembench
cp "$FLOOR"/*.sql "$OUT/"
psql -q "$FURL" -f "$OUT/schema.sql"
psql -q "$FURL" -v n=200000 -f "$OUT/preload.sql"
"$OUT/idembench" --database "$GURL" --tenant bound --preload 200000 --only baseline --duration 1s >/dev/null 2>&1

busy() { # busy CPU seconds of the whole machine so far
	awk -v hz="$(getconf CLK_TCK)" '/^cpu / {printf "%.2f", ($2+$3+$4+$7+$8+$9)/hz}' /proc/stat
}
printf '%-36s %9s %10s %12s %12s %12s\n' "work, 16 in flight" "rate" "p50" "machine CPU" "gw process" "PG + kernel"
for sc in baseline replay-old new; do
	b=$(busy)
	"$OUT/idembench" --json --database "$GURL" --tenant bound --preload 200000 --concurrency 16 --duration "${T}s" --only "$sc" >"$OUT/$sc.json" 2>/dev/null
	a=$(busy)
	python3 - "$OUT/$sc.json" "$b" "$a" "$T" <<'PY'
import json, sys
path, b, a, t = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
for r in json.load(open(path))["results"]:
    machine = (a - b) / max(r["per_second"] * t, 1) * 1e6
    gw = r["cpu_per_request_ns"] / 1e3
    print(f"{r['name']:<36} {r['per_second']:>7.0f}/s {r['p50_ns'] / 1e6:>7.2f} ms {machine:>9.0f} µs {gw:>9.0f} µs {machine - gw:>9.0f} µs"
          f"   ({a - b:.1f} busy CPU-s in {t:.0f} s)")
PY
done
for s in new_op_spec replay; do
	b=$(busy)
	tps=$(pgbench -n -M prepared -c 16 -j 2 -T "$T" -f "$OUT/$s.sql" "$FURL" 2>/dev/null | awk '/^tps/ {print int($3)}')
	a=$(busy)
	python3 - "floor $s" "$tps" "$b" "$a" "$T" <<'PY'
import sys
name, tps, b, a, t = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
blank = ""
print(f"{name:<36} {tps:>7}/s {blank:>10} {(a - b) / (tps * t) * 1e6:>9.0f} µs   ({a - b:.1f} busy CPU-s in {t:.0f} s)")
PY
done
