#!/usr/bin/env bash
# Runs the pgbench floor and idembench side by side on the same PostgreSQL, in a throwaway
# schema, and prints the ratios.
#
#   cmd/idembench/run.sh [postgres-url]   ROUNDS (3), CONCURRENCY (16), SECONDS_PER_RUN (10) override;
#                                 IDEMBENCH names a prebuilt idembench (an earlier commit's)
#
# Each round measures the floor and idemgate back to back, new operations then replays, so a
# ratio compares two runs a few seconds apart: on a shared machine throughput drifts by a
# quarter from one minute to the next, a ratio much less. The median round is reported.
#
# The floor is pgbench with its default (simple) query protocol, the stated target's basis;
# the same scripts with -M prepared, the protocol idemgate's driver uses, are printed beside
# it as the stricter ceiling. The baseline (downstream alone) and the storm run once.
set -euo pipefail
cd "$(dirname "$0")/../.."
URL=${1:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
SCHEMA=bench_$(date +%s)
ROUNDS=${ROUNDS:-3}
C=${CONCURRENCY:-16}
T=${SECONDS_PER_RUN:-10}
OUT=$(mktemp -d)
export PGOPTIONS="-c client_min_messages=warning"
psql -q "$URL" -c "CREATE SCHEMA $SCHEMA"
trap 'psql -q "$URL" -c "DROP SCHEMA $SCHEMA CASCADE"; rm -rf "$OUT"' EXIT
SURL="$URL&search_path=$SCHEMA"
[[ "$URL" == *\?* ]] || SURL="$URL?search_path=$SCHEMA"
go build -o "$OUT/idemgate" ./cmd/idemgate
if [[ -n "${IDEMBENCH:-}" ]]; then # a prebuilt idembench, e.g. one built from an earlier commit
	cp "$IDEMBENCH" "$OUT/idembench"
else
	go build -o "$OUT/idembench" ./cmd/idembench
fi
IDEMGATE_DATABASE_URL="$SURL" "$OUT/idemgate" migrate >/dev/null
PGOPTIONS="$PGOPTIONS -c search_path=$SCHEMA" psql -q "$URL" -f cmd/idembench/pgbench/setup.sql

floor() { # script protocol
	PGOPTIONS="$PGOPTIONS -c search_path=$SCHEMA" pgbench -n -M "$2" -c "$C" -j 2 -T "$T" -f "cmd/idembench/pgbench/$1.sql" "$URL" 2>/dev/null |
		awk '/^tps/ {print int($3)}'
}
gateway() { # scenarios output
	"$OUT/idembench" --database "$SURL" --concurrency "$C" --duration "${T}s" --only "$1" --json >"$OUT/$2.json"
}
for r in $(seq "$ROUNDS"); do
	echo "round $r of $ROUNDS" >&2
	floor new_operation simple >"$OUT/floor-new-$r"
	gateway new "new-$r"
	floor replay simple >"$OUT/floor-replay-$r"
	gateway replay "replay-$r"
done
floor new_operation prepared >"$OUT/prepared-new"
floor replay prepared >"$OUT/prepared-replay"
gateway baseline,storm extra

python3 - "$OUT" "$ROUNDS" "$C" "$T" <<'PY'
import json, statistics, sys
out, rounds, c, t = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
read = lambda name: open(f"{out}/{name}").read().strip()
result = lambda name: json.load(open(f"{out}/{name}.json"))["results"]
ms = lambda ns: f"{ns / 1e6:.2f} ms"
print(f"{'scenario':<28} {'round':>5} {'req/s':>8} {'p50':>10} {'p90':>10} {'p99':>10} {'CPU/req':>8} {'floor/s':>8} {'ratio':>6}")
for scenario, script in (("new", "new"), ("replay", "replay")):
    ratios = []
    for r in range(1, rounds + 1):
        g = result(f"{scenario}-{r}")[0]
        floor = int(read(f"floor-{script}-{r}"))
        ratios.append((g["per_second"] / floor, r, g, floor))
        print(f"{g['name']:<28} {r:>5} {g['per_second']:>8.0f} {ms(g['p50_ns']):>10} {ms(g['p90_ns']):>10} {ms(g['p99_ns']):>10} "
              f"{g['cpu_per_request_ns'] / 1e3:>6.0f}µs {floor:>8} {g['per_second'] / floor:>6.0%}")
    ratio, r, g, floor = sorted(ratios, key=lambda x: x[0])[len(ratios) // 2]
    prepared = int(read(f"prepared-{script}"))
    print(f"  -> {g['name']}: median round {r}: {g['per_second']:.0f}/s of a {floor}/s floor = {ratio:.0%} "
          f"(rounds {', '.join(f'{x[0]:.0%}' for x in ratios)}; -M prepared floor {prepared}/s)")
for g in result("extra"):
    print(f"{g['name']:<28} {'':>5} {g['per_second']:>8.0f} {ms(g['p50_ns']):>10} {ms(g['p90_ns']):>10} {ms(g['p99_ns']):>10} "
          f"{g['cpu_per_request_ns'] / 1e3:>6.0f}µs  {g.get('note', '')}")
print(f"(PostgreSQL, concurrency {c}, {t} s per run, {rounds} rounds)")
PY
