#!/usr/bin/env bash
# Checks docs/model/idemgate.pml with spin: the model must hold (safety in both downstream
# configurations, progress under weak fairness), and every mutation must yield a
# counterexample. Exits non-zero if the model fails or a mutation passes. Needs spin and gcc.
# The runs are independent: they run side by side, up to JOBS at once (default: the CPUs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

# check NAME SPINFLAGS CCFLAGS PANARGS: builds pan in NAME/ and runs it; NAME/result holds its
# summary line and NAME/verdict "pass" (no error found) or "fail" (a counterexample).
check() {
	local name=$1 sflags=$2 cflags=$3 pargs=$4
	mkdir -p "$name" && cp "$here/idemgate.pml" "$name/" && cd "$name"
	# shellcheck disable=SC2086
	spin $sflags -a idemgate.pml >spin.log 2>&1 || { echo "$name: spin failed" >result; cat spin.log >>result; echo broken >verdict; return; }
	# shellcheck disable=SC2086
	gcc -O2 -DMEMLIM=4096 -w $cflags -o pan pan.c 2>cc.log || { echo "$name: gcc failed" >result; cat cc.log >>result; echo broken >verdict; return; }
	local start=$SECONDS
	# shellcheck disable=SC2086
	./pan $pargs >pan.log 2>&1 || true
	local stored trans depth errors why
	stored=$(awk '/states, stored/{print $1; exit}' pan.log)
	trans=$(awk '/^ *[0-9.e+]+ transitions/{print $1; exit}' pan.log)
	depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.log | head -n1)
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.log | head -n1)
	why=$(grep -m1 -o 'assertion violated.*\|acceptance cycle.*' pan.log || true)
	printf '%-32s states %-9s transitions %-10s depth %-4s errors %-2s %3ss  %s\n' \
		"$name" "$stored" "$trans" "$depth" "${errors:-?}" "$((SECONDS - start))" "$why" >result
	case "$errors" in
	0) echo pass >verdict ;;
	"") tail -n 20 pan.log >>result; echo broken >verdict ;;
	*) echo fail >verdict ;;
	esac
}

# The bounded runs (CI) leave the reviewer and the caller's cancel out of the runs that must
# hold (-DNOREVIEW): with them the state space is ten times larger. FULL=1 checks safety with
# them too (about 9 million states; minutes). The mutation runs always have them: they stop at
# the first counterexample.
runs=(
	# name|spin flags|cc flags|pan args
	"keyed.safety|-DKEYED=1 -DNOREVIEW|-DSAFETY -DNOCLAIM|-m100000"
	"unkeyed.safety|-DKEYED=0 -DNOREVIEW|-DSAFETY -DNOCLAIM|-m100000"
	"unkeyed.nolook.safety|-DKEYED=0 -DLOOKFIRST=0 -DNOREVIEW|-DSAFETY -DNOCLAIM|-m100000"
	"keyed.progress|-DKEYED=1 -DNOREVIEW|-DNFAIR=3|-a -f -m100000 -N progress"
	"unkeyed.progress|-DKEYED=0 -DNOREVIEW|-DNFAIR=3|-a -f -m100000 -N progress"
	# Group commit: claims and outcomes wait in a batch, commit later, may lose their answers.
	"keyed.batch.safety|-DKEYED=1 -DNOREVIEW -DBATCH|-DSAFETY -DNOCLAIM|-m100000"
	"unkeyed.batch.safety|-DKEYED=0 -DNOREVIEW -DBATCH|-DSAFETY -DNOCLAIM|-m100000"
	"keyed.batch.progress|-DKEYED=1 -DNOREVIEW -DBATCH|-DNFAIR=3|-a -f -m100000 -N progress"
	"unkeyed.batch.progress|-DKEYED=0 -DNOREVIEW -DBATCH|-DNFAIR=3|-a -f -m100000 -N progress"
)
if [ "${FULL:-0}" = 1 ]; then
	runs+=(
		"keyed.safety.people|-DKEYED=1|-DSAFETY -DNOCLAIM|-m100000"
		"unkeyed.safety.people|-DKEYED=0|-DSAFETY -DNOCLAIM|-m100000"
	)
fi
mutations=(
	"MUT_NOFENCE|-DKEYED=0 -DMUT_NOFENCE"
	"MUT_REAPER_RETRY|-DKEYED=0 -DLOOKFIRST=0 -DMUT_REAPER_RETRY"
	"MUT_SETTLE|-DKEYED=0 -DMUT_SETTLE"
	"MUT_SETTLE_AT_RECORD|-DKEYED=0 -DMUT_SETTLE_AT_RECORD"
	"MUT_REVIEW_STALE|-DKEYED=0 -DMUT_REVIEW_STALE"
	"MUT_REJECT_FINAL|-DKEYED=1 -DMUT_REJECT_FINAL"
	"MUT_CANCEL_AMBIGUOUS|-DKEYED=1 -DMUT_CANCEL_AMBIGUOUS"
	"MUT_BATCH_CUT_RUNS|-DKEYED=0 -DBATCH -DMUT_BATCH_CUT_RUNS"
	"MUT_BATCH_CHECK_EARLY|-DKEYED=0 -DBATCH -DMUT_BATCH_CHECK_EARLY"
	# Two outcomes of one operation in one batch (issue 47): written by operation, not attempt.
	"MUT_BATCH_JOIN_OP|-DKEYED=0 -DBATCH -DMUT_BATCH_JOIN_OP"
	"MUT_BATCH_JOIN_OP.keyed|-DKEYED=1 -DBATCH -DMUT_BATCH_JOIN_OP"
	# Late delivery (issue 48): the old rule (close, not reset) and settle counted from the
	# attempt's start. DUP_ONLY leaves the "no false failure" assertion out, so that the
	# counterexample must be a second request while the first may still commit.
	"MUT_LATE_CLOSE|-DKEYED=0 -DMUT_LATE_CLOSE"
	"MUT_LATE_CLOSE.dup|-DKEYED=0 -DMUT_LATE_CLOSE -DDUP_ONLY"
	"MUT_SETTLE_FROM_START|-DKEYED=0 -DMUT_SETTLE_FROM_START"
)
# With batching on, every mutation above must still be caught.
for m in "${mutations[@]}"; do
	case $m in *-DBATCH*) ;; *) mutations+=("${m%%|*}.batch|${m#*|} -DBATCH") ;; esac
done
started=$SECONDS
for r in "${runs[@]}"; do
	IFS='|' read -r name sflags cflags pargs <<<"$r"
	while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 0.2; done
	check "$name" "$sflags" "$cflags" "$pargs" &
done
for m in "${mutations[@]}"; do
	IFS='|' read -r name sflags <<<"$m"
	while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 0.2; done
	check "$name" "$sflags" "-DSAFETY -DNOCLAIM" "-m100000" &
done
wait

fail=0
echo "-- the model (must hold)"
for r in "${runs[@]}"; do
	name=${r%%|*}
	cat "$name/result"
	[ "$(cat "$name/verdict")" = pass ] || { echo "   FAILED: $name"; fail=1; }
done
echo "-- mutations (each must yield a counterexample)"
for m in "${mutations[@]}"; do
	name=${m%%|*}
	cat "$name/result"
	[ "$(cat "$name/verdict")" = fail ] || { echo "   MUTATION NOT CAUGHT: $name"; fail=1; }
done
echo "-- $((SECONDS - started))s with $JOBS at once"
if [ "$fail" != 0 ]; then echo "model check FAILED"; exit 1; fi
echo "model check passed"
