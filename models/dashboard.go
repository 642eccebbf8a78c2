package models

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// Windows say how long an operation may stay in a non-terminal state before the console shows
// it as unresolved beyond its window (docs/STATES.md: nothing is left stuck silently).
type Windows struct {
	// UnknownAfter is each tool's escalate_after: how long its operations may stay UNKNOWN.
	UnknownAfter map[string]time.Duration
	// UnknownDefault applies to tools not in UnknownAfter (tools the catalogue no longer has).
	UnknownDefault time.Duration
	// PendingGrace is how long a PENDING operation may wait past its due time for a worker.
	PendingGrace time.Duration
}

// Bucket is one hour of a series: counts by class (attempts) or outcome (probes).
type Bucket struct {
	Start  time.Time
	Counts map[string]int64
}

// Dashboard is the console's overview of the ledger within a scope.
type Dashboard struct {
	Now         time.Time
	ByState     map[State]int64
	OpenReviews int64
	// OldestUnresolved is the oldest operation not yet terminal, or nil.
	OldestUnresolved *Operation
	// Overdue lists (oldest first, at most 20) the operations unresolved beyond their window,
	// of OverdueCount.
	Overdue      []*Operation
	OverdueCount int64
	// Attempts and Probes cover the last 24 hours, one bucket per clock hour, oldest first.
	Attempts []Bucket
	Probes   []Bucket
}

// overdueShown bounds the dashboard's list of overdue operations; the count is exact.
const overdueShown = 20

// Dashboard gathers the overview within scope, judged against w.
func (l *Ledger) Dashboard(ctx context.Context, s Scope, w Windows) (*Dashboard, error) {
	now := l.clock()
	d := &Dashboard{Now: now, ByState: map[State]int64{}}
	db := l.scope(ctx)

	var rows []struct {
		State State
		N     int64
	}
	if err := s.apply(db.Model(&Operation{}), "tenant").Select("state, COUNT(*) AS n").Group("state").Scan(&rows).Error; err != nil {
		return nil, unavailable("count operations by state", err)
	}
	for _, r := range rows {
		d.ByState[r.State] = r.N
	}
	if err := s.apply(db.Model(&Review{}), "tenant").Where("status = ?", ReviewOpen).Count(&d.OpenReviews).Error; err != nil {
		return nil, unavailable("count open reviews", err)
	}
	var oldest []*Operation
	err := s.apply(db, "tenant").Where("state NOT IN ?", []State{StateSucceeded, StateFailedFinal}).
		Order("created_at, id").Limit(1).Find(&oldest).Error
	if err != nil {
		return nil, unavailable("oldest unresolved", err)
	}
	if len(oldest) == 1 {
		d.OldestUnresolved = oldest[0]
	}
	overdue := func() *gorm.DB { return s.apply(l.overdue(db.Model(&Operation{}), now, w), "tenant") }
	if err := overdue().Count(&d.OverdueCount).Error; err != nil {
		return nil, unavailable("count overdue", err)
	}
	if err := overdue().Order("created_at, id").Limit(overdueShown).Find(&d.Overdue).Error; err != nil {
		return nil, unavailable("list overdue", err)
	}
	start := now.Truncate(time.Hour).Add(-23 * time.Hour)
	if d.Attempts, err = l.attemptSeries(db, s, start); err != nil {
		return nil, err
	}
	if d.Probes, err = l.probeSeries(db, s, start); err != nil {
		return nil, err
	}
	return d, nil
}

// overdue narrows q to operations unresolved beyond their window: UNKNOWN longer than their
// tool's escalate_after, RUNNING past their lease (the reaper has not caught up), PENDING
// past their due time by more than the grace (no worker is taking them).
func (l *Ledger) overdue(q *gorm.DB, now time.Time, w Windows) *gorm.DB {
	unknown := l.db.Where("1 = 0")
	var tools []string
	for tool, after := range w.UnknownAfter {
		tools = append(tools, tool)
		unknown = unknown.Or("tool = ? AND unknown_since < ?", tool, now.Add(-after))
	}
	if len(tools) > 0 {
		unknown = unknown.Or("tool NOT IN ? AND unknown_since < ?", tools, now.Add(-w.UnknownDefault))
	} else {
		unknown = unknown.Or("unknown_since < ?", now.Add(-w.UnknownDefault))
	}
	return q.Where(
		l.db.Where(l.db.Where("state = ?", StateUnknown).Where(unknown)).
			Or("state = ? AND lease_expires_at < ?", StateRunning, now).
			Or("state = ? AND next_attempt_at < ?", StatePending, now.Add(-w.PendingGrace)))
}

// hourExpr is the SQL for the hour (seconds since the epoch / 3600) of a timestamp column.
func (l *Ledger) hourExpr(column string) string {
	if l.dialect == Postgres {
		return "CAST(FLOOR(EXTRACT(EPOCH FROM " + column + ") / 3600) AS BIGINT)"
	}
	return "CAST(strftime('%s', " + column + ") AS INTEGER) / 3600"
}

// attemptSeries counts attempts started since start by hour and class; attempts still
// running are counted as "running".
func (l *Ledger) attemptSeries(db *gorm.DB, s Scope, start time.Time) ([]Bucket, error) {
	q := db.Table("attempts").Joins("JOIN operations ON operations.id = attempts.operation_id").
		Select(l.hourExpr("attempts.started_at")+" AS hour, COALESCE(attempts.class, 'running') AS label, COUNT(*) AS n").
		Where("attempts.started_at >= ?", start).Group("1, 2")
	return l.series(s.apply(q, "operations.tenant"), start, "attempts by hour")
}

// probeSeries counts finished reconcile probes since start by hour and outcome.
func (l *Ledger) probeSeries(db *gorm.DB, s Scope, start time.Time) ([]Bucket, error) {
	outcome := "json_extract(detail, '$.outcome')"
	if l.dialect == Postgres {
		outcome = "(CAST(detail AS JSON) ->> 'outcome')"
	}
	q := db.Table("events").
		Select(l.hourExpr("at")+" AS hour, COALESCE("+outcome+", 'unknown') AS label, COUNT(*) AS n").
		// The type is written into the statement, not bound: events_reconcile_at holds only
		// these events, and a plan can use it only when it sees the type (migration 19).
		Where("type = '"+EventReconcileFinished+"' AND at >= ?", start).Group("1, 2")
	return l.series(s.apply(q, "tenant"), start, "probes by hour")
}

// series runs a (hour, label, n) query into 24 hourly buckets from start.
func (l *Ledger) series(q *gorm.DB, start time.Time, what string) ([]Bucket, error) {
	var rows []struct {
		Hour  int64
		Label string
		N     int64
	}
	if err := q.Scan(&rows).Error; err != nil {
		return nil, unavailable(what, err)
	}
	out := make([]Bucket, 24)
	for i := range out {
		out[i] = Bucket{Start: start.Add(time.Duration(i) * time.Hour), Counts: map[string]int64{}}
	}
	first := start.Unix() / 3600
	for _, r := range rows {
		if i := r.Hour - first; i >= 0 && i < int64(len(out)) {
			out[i].Counts[r.Label] += r.N
		}
	}
	return out, nil
}
