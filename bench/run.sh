#!/usr/bin/env bash
# Runs the pgbench floor and idembench back to back on the same PostgreSQL and prints the
# ratios. Usage: bench/run.sh [postgres-url]   (a throwaway database is best)
set -euo pipefail
cd "$(dirname "$0")/.."
URL=${1:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
SCHEMA=bench_$(date +%s)
C=${CONCURRENCY:-16}
T=${SECONDS_PER_RUN:-10}
psql -q "$URL" -c "CREATE SCHEMA $SCHEMA"
trap 'psql -q "$URL" -c "DROP SCHEMA $SCHEMA CASCADE"' EXIT
SURL="$URL&search_path=$SCHEMA"
[[ "$URL" == *\?* ]] || SURL="$URL?search_path=$SCHEMA"
IDEMGATE_DATABASE_URL="$SURL" go run ./cmd/idemgate migrate >/dev/null
PGOPTIONS="-c search_path=$SCHEMA" psql -q "$URL" -f bench/pgbench/setup.sql
floor() { PGOPTIONS="-c search_path=$SCHEMA" pgbench -n -c "$C" -j 2 -T "$T" -f "bench/pgbench/$1.sql" "$URL" | awk '/^tps/ {print int($3)}'; }
NEW_FLOOR=$(floor new_operation)
REPLAY_FLOOR=$(floor replay)
go run ./cmd/idembench --database "$SURL" --concurrency "$C" --duration "${T}s" --json > /tmp/idembench.json
NEW=$(python3 -c 'import json;r={x["name"]:x for x in json.load(open("/tmp/idembench.json"))["results"]};print(int(r["new operations"]["per_second"]))')
REPLAY=$(python3 -c 'import json;r={x["name"]:x for x in json.load(open("/tmp/idembench.json"))["results"]};print(int(r["replays"]["per_second"]))')
printf 'new operations: idemgate %s/s, pgbench floor %s/s, ratio %s\n' "$NEW" "$NEW_FLOOR" "$(python3 -c "print(f'{$NEW/$NEW_FLOOR:.0%}')")"
printf 'replays:        idemgate %s/s, pgbench floor %s/s, ratio %s\n' "$REPLAY" "$REPLAY_FLOOR" "$(python3 -c "print(f'{$REPLAY/$REPLAY_FLOOR:.0%}')")"
