#!/usr/bin/env bash
# Measures idemgate against a database floor (a new operation and a replay written minimally,
# on a minimal schema: SQL scripts kept outside this repository, named by FLOOR) on the same PostgreSQL, in the
# same run, and prints every ratio of issue 16 with its round-by-round spread:
#
#   - new operations:  idembench `new` (16 in flight)         ÷ pgbench new_op_spec.sql
#   - replays:         idembench `replay-old` (random keys of
#                      200,000 preloaded operations)          ÷ pgbench replay.sql (after preload.sql)
#   - one at a time:   idembench `new` p50 at concurrency 1   ÷ (new_op_spec.sql's p50 at 1 client
#                                                               + the downstream's p50 at 1: `baseline`)
#   - SQLite:          idembench on SQLite, new and replay-old ÷ idembench --floor sqlite (the same
#                      statements through the same driver, glebarez/sqlite, no gateway)
#
# pgbench runs with -M prepared (the protocol pgx uses), -j 2, on its own database with the
# floor's schema; idemgate runs on another database. Our own SQL's floor (cmd/idembench/pgbench:
# idemgate's statements as pgbench would send them) is printed beside, labelled as such: it says
# how fast the database runs our SQL, not how close our SQL is to what the job needs. Once, at
# the end: the replay plan check (idembench `plan`: a gateway that started on an empty ledger,
# after a burst of new operations, against a fresh process) and the duplicate storm.
#
#   cmd/idembench/run.sh [postgres-url]
#     ROUNDS (3), CONCURRENCY (16), SECONDS_PER_RUN (10), SQLITE_ROWS (20000: preloaded for the
#     SQLite replays, floor and gateway alike), FLOOR (required: the floor scripts' directory), BEFORE (an earlier commit's idembench binary: its PostgreSQL figures are taken in
#     the same rounds, on a database of its own, and printed as "before")
#
# Each round runs floor and gateway back to back, so a ratio compares runs seconds apart: on a
# shared machine throughput drifts by a quarter from one minute to the next, a ratio much less.
# The median round is reported with every round's ratio.
set -euo pipefail
cd "$(dirname "$0")/../.."
URL=${1:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
if [ -z "${FLOOR:-}" ] || [ ! -f "$FLOOR/new_op_spec.sql" ]; then
  echo "set FLOOR to the directory of the floor's SQL scripts (new_op_spec.sql, replay.sql, preload.sql, schema)" >&2
  exit 2
fi
ROUNDS=${ROUNDS:-3}
C=${CONCURRENCY:-16}
T=${SECONDS_PER_RUN:-10}
SQLITE_ROWS=${SQLITE_ROWS:-20000}
STAMP=$(date +%s)
OUT=$(mktemp -d)
export PGOPTIONS="-c client_min_messages=warning"

with_db() { # url database → the url naming that database
	python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$1" "$2"
}
FLOORDB=floor16_$STAMP GWDB=idemgate16_$STAMP PLANDB=plan16_$STAMP BEFOREDB=before16_$STAMP
FURL=$(with_db "$URL" "$FLOORDB") GURL=$(with_db "$URL" "$GWDB") PURL=$(with_db "$URL" "$PLANDB") BURL=$(with_db "$URL" "$BEFOREDB")
psql -q "$URL" -c "CREATE DATABASE $FLOORDB" -c "CREATE DATABASE $GWDB" -c "CREATE DATABASE $PLANDB" -c "CREATE DATABASE $BEFOREDB"
trap 'psql -q "$URL" -c "DROP DATABASE IF EXISTS $FLOORDB" -c "DROP DATABASE IF EXISTS $GWDB" -c "DROP DATABASE IF EXISTS $PLANDB" -c "DROP DATABASE IF EXISTS $BEFOREDB"; rm -rf "$OUT"' EXIT

# The floor's scripts are copied at run time (the directory is read-only, and a run should not
# change if it is edited meanwhile).
mkdir "$OUT/floor" && cp "$FLOOR"/*.sql "$OUT/floor/"
go build -o "$OUT/idemgate" ./cmd/idemgate
go build -o "$OUT/idembench" ./cmd/idembench
[[ -z "${BEFORE:-}" ]] || cp "$BEFORE" "$OUT/before"
echo "preparing: the floor's schema and 200,000 operations; idemgate's schema" >&2
psql -q "$FURL" -f "$OUT/floor/schema.sql"
psql -q "$FURL" -v n=200000 -f "$OUT/floor/preload.sql"
IDEMGATE_DATABASE_URL="$GURL" "$OUT/idemgate" migrate >/dev/null
psql -q "$GURL" -f cmd/idembench/pgbench/setup.sql

pgb() { # database script clients [extra pgbench flags] → tps
	local db=$1 script=$2 clients=$3
	shift 3
	pgbench -n -M prepared -c "$clients" -j "$((clients < 2 ? 1 : 2))" -T "$T" "$@" -f "$script" "$db" 2>/dev/null | awk '/^tps/ {print int($3)}'
}
pgb_p50() { # database script → p50 in ns of one client's scripts (from pgbench's log)
	rm -f "$OUT"/c1log*
	(cd "$OUT" && pgbench -n -M prepared -c 1 -j 1 -T "$T" -l --log-prefix=c1log -f "$1" "$2" >/dev/null 2>&1)
	cat "$OUT"/c1log* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {print int(a[int((NR+1)/2)] * 1000)}'
}
bench() { # output idembench-args…
	local out=$1
	shift
	"$OUT/idembench" --json --duration "${T}s" "$@" >"$OUT/$out.json"
}
before() { # output idembench-args… (the earlier commit's, on its own database), when BEFORE is set
	local out=$1
	shift
	[[ -z "${BEFORE:-}" ]] || "$OUT/before" --json --duration "${T}s" --database "$BURL" --tenant bench16 "$@" >"$OUT/before-$out.json"
}

for r in $(seq "$ROUNDS"); do
	echo "round $r of $ROUNDS" >&2
	pgb "$FURL" "$OUT/floor/new_op_spec.sql" "$C" >"$OUT/floor-new-$r"
	bench "new-$r" --database "$GURL" --tenant bench16 --preload 200000 --concurrency "$C" --only new
	before "new-$r" --preload 200000 --concurrency "$C" --only new
	pgb "$FURL" "$OUT/floor/replay.sql" "$C" >"$OUT/floor-replay-$r"
	bench "replay-$r" --database "$GURL" --tenant bench16 --preload 200000 --concurrency "$C" --only replay-old
	before "replay-$r" --preload 200000 --concurrency "$C" --only replay-old
	pgb_p50 "$OUT/floor/new_op_spec.sql" "$FURL" >"$OUT/floor-one-$r"
	bench "one-$r" --database "$GURL" --tenant bench16 --concurrency 1 --only baseline,new
	before "one-$r" --concurrency 1 --only baseline,new
	"$OUT/idembench" --json --duration "${T}s" --floor sqlite --preload "$SQLITE_ROWS" --concurrency "$C" --only new,replay >"$OUT/sqlite-floor-$r.json"
	bench "sqlite-$r" --database "$OUT/gateway.db" --tenant bench16 --preload "$SQLITE_ROWS" --concurrency "$C" --only new,replay-old
done
echo "our own SQL's floor, the replay plan check, the storm" >&2
pgb "$GURL" cmd/idembench/pgbench/new_operation.sql "$C" >"$OUT/own-new"
pgb "$GURL" cmd/idembench/pgbench/replay.sql "$C" >"$OUT/own-replay"
bench plan --database "$PURL" --concurrency "$C" --only plan
bench storm --database "$GURL" --only storm

python3 - "$OUT" "$ROUNDS" "$C" "$T" <<'PY'
import json, os, statistics, sys
out, rounds, c, t = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
num = lambda name: int(open(f"{out}/{name}").read().strip())
res = lambda name: {x["name"]: x for x in json.load(open(f"{out}/{name}.json"))["results"]}
ms = lambda ns: f"{ns / 1e6:.2f} ms"
has_before = os.path.exists(f"{out}/before-new-1.json")

def line(what, ratios, target, better="higher"):
    ok = (lambda x: x >= target) if better == "higher" else (lambda x: x <= target)
    med = statistics.median(ratios)
    verdict = "meets" if ok(med) else "MISSES"
    print(f"  => {what}: median {med:.2f} (rounds {', '.join(f'{x:.2f}' for x in ratios)}; "
          f"spread {min(ratios):.2f}–{max(ratios):.2f}); target {'≥' if better == 'higher' else '≤'} {target}: {verdict}")

print(f"PostgreSQL, {c} in flight, {t} s per run, {rounds} rounds; floor = {os.environ['FLOOR']}, pgbench -M prepared\n")
print(f"{'round':>5} {'idemgate/s':>10} {'p50':>9} {'CPU/req':>8} {'floor/s':>8} {'ratio':>6}")
for scenario, gw_name, floor_file, target in (
        ("new operations", "new operations", "floor-new", 0.6),
        ("replays (random keys of 200,000)", "replays across the ledger", "floor-replay", 0.5)):
    print(scenario)
    ratios, before = [], []
    key = "new" if floor_file == "floor-new" else "replay"
    for r in range(1, rounds + 1):
        g, f = res(f"{key}-{r}")[gw_name], num(f"{floor_file}-{r}")
        ratios.append(g["per_second"] / f)
        extra = ""
        if has_before:
            b = res(f"before-{key}-{r}")[gw_name]
            before.append(b["per_second"] / f)
            extra = f"   before: {b['per_second']:.0f}/s p50 {ms(b['p50_ns'])}, {before[-1]:.2f}"
        print(f"{r:>5} {g['per_second']:>10.0f} {ms(g['p50_ns']):>9} {g['cpu_per_request_ns'] / 1e3:>6.0f}µs {f:>8} {ratios[-1]:>6.2f}{extra}")
    line(f"{scenario} ÷ SPEC floor", ratios, target)
    if before:
        line(f"before: {scenario} ÷ SPEC floor", before, target)

print("one at a time (concurrency 1): new operation p50 ÷ (floor p50 + downstream p50)")
print(f"{'round':>5} {'idemgate p50':>12} {'floor p50':>10} {'downstream':>10} {'ratio':>6}")
ratios, before = [], []
for r in range(1, rounds + 1):
    one = res(f"one-{r}")
    g, d, f = one["new operations"]["p50_ns"], one["baseline (downstream only)"]["p50_ns"], num(f"floor-one-{r}")
    ratios.append(g / (f + d))
    extra = ""
    if has_before:
        b = res(f"before-one-{r}")
        bg, bd = b["new operations"]["p50_ns"], b["baseline (downstream only)"]["p50_ns"]
        before.append(bg / (f + bd))
        extra = f"   before: {ms(bg)}, {before[-1]:.2f}"
    print(f"{r:>5} {ms(g):>12} {ms(f):>10} {ms(d):>10} {ratios[-1]:>6.2f}{extra}")
line("single-client p50 ÷ (floor + downstream)", ratios, 1.5, better="lower")
if before:
    line("before: single-client p50 ÷ (floor + downstream)", before, 1.5, better="lower")

print(f"SQLite ({c} in flight; floor = idembench --floor sqlite, the same statements through glebarez/sqlite)")
print(f"{'round':>5} {'new/s':>8} {'floor/s':>8} {'ratio':>6} {'replay/s':>9} {'floor/s':>8} {'ratio':>6}")
new_r, rep_r = [], []
for r in range(1, rounds + 1):
    g, f = res(f"sqlite-{r}"), res(f"sqlite-floor-{r}")
    gn, fn = g["new operations"]["per_second"], f["sqlite floor: new operations (new_op_spec.sql)"]["per_second"]
    gr, fr = g["replays across the ledger"]["per_second"], f["sqlite floor: replays (replay.sql)"]["per_second"]
    new_r.append(gn / fn)
    rep_r.append(gr / fr)
    print(f"{r:>5} {gn:>8.0f} {fn:>8.0f} {new_r[-1]:>6.2f} {gr:>9.0f} {fr:>8.0f} {rep_r[-1]:>6.2f}")
line("SQLite new operations ÷ SQLite floor", new_r, 0.5)
line("SQLite replays ÷ SQLite floor", rep_r, 0.5)

own_new, own_rep = num("own-new"), num("own-replay")
print(f"\nfor reference, our own SQL's floor (cmd/idembench/pgbench, pgbench -M prepared, once): new operations {own_new}/s, "
      f"replays of one key {own_rep}/s; the SPEC floor's median: new {statistics.median(num(f'floor-new-{r}') for r in range(1, rounds + 1))}/s, "
      f"replays {statistics.median(num(f'floor-replay-{r}') for r in range(1, rounds + 1))}/s")
plan = json.load(open(f"{out}/plan.json"))["results"]
print("\nreplay plan check (a gateway that started on an empty ledger, autovacuum off, after a burst):")
for p in plan:
    print(f"  {p['name']:<44} {p['per_second']:>8.0f}/s p50 {ms(p['p50_ns'])} {p.get('note', '')}")
storm = json.load(open(f"{out}/storm.json"))["results"][0]
print(f"\nstorm: {storm['requests']} concurrent duplicates of one new key, {storm['errors']} errors, {storm.get('note', '')}, p50 {ms(storm['p50_ns'])}")
PY
