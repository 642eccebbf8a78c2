package models

import (
	"context"
	"sync/atomic"
	"time"
)

// A PostgreSQL connection caches the plan of a statement it prepared and, after a few runs,
// may keep one generic plan for good. Planned while the operations table is empty and has no
// statistics, the key look-up ties between the unique (tenant, op_key) index and the other
// indexes that begin with tenant, and the tie goes to the newest index: a plan that reads
// every operation of the tenant to find one key. It stays until statistics change (an
// ANALYZE invalidates it). Planning the look-up afresh at every run is robust to that, but
// costs every replay a parse and a plan: half the replay rate (docs/PERFORMANCE.md).
//
// keyPlan chooses between the two: the look-up is planned per run only while the table is
// young, that is, until PostgreSQL's statistics say it holds at least settledRows rows. From
// then on, a plan made with those statistics picks the unique index for any size the table
// can grow to, and the connection's cached plan is used. The statistics come from
// autovacuum's ANALYZE (or an operator's): with autovacuum off, the look-up stays planned per
// run, slower but never wrong.
type keyPlan struct {
	settled atomic.Bool
	// next is when the statistics are read again (Unix nanoseconds), so a young ledger reads
	// them once per keyPlanRecheck at most, whatever the replay rate.
	next atomic.Int64
}

const (
	settledRows    = 1000
	keyPlanRecheck = 10 * time.Second
)

// perRun says whether the key look-up should be planned for its values at this run. rows reads
// the table's row count as PostgreSQL's statistics have it (negative: never analyzed).
func (k *keyPlan) perRun(ctx context.Context, now time.Time, rows func(context.Context) (float64, error)) bool {
	if k.settled.Load() {
		return false
	}
	next := k.next.Load()
	if now.UnixNano() < next || !k.next.CompareAndSwap(next, now.Add(keyPlanRecheck).UnixNano()) {
		return true // read recently, or being read by another request: stay careful meanwhile
	}
	if n, err := rows(ctx); err == nil && n >= settledRows {
		k.settled.Store(true)
		return false
	}
	return true
}

// operationsRows is the operations table's row count in PostgreSQL's statistics (reltuples:
// -1 until the table is first vacuumed or analyzed).
func (l *Ledger) operationsRows(ctx context.Context) (float64, error) {
	var n float64
	err := l.db.WithContext(ctx).Raw("SELECT reltuples FROM pg_class WHERE oid = to_regclass('operations')").Row().Scan(&n)
	return n, err
}
