package models

import (
	"context"
	"time"
)

// Gauges are the ledger-wide figures exported as metrics when scraped: what is waiting, and for
// how long.
type Gauges struct {
	// OpenReviews counts open reviews by reason.
	OpenReviews map[string]int64
	// Oldest is the age of the oldest RUNNING, UNKNOWN and PENDING operation (time in that
	// state) and of the oldest open review ("review"); absent when there is none.
	Oldest map[string]time.Duration
	// UnresolvedBeyondWindow counts operations unresolved beyond their window (see Windows).
	UnresolvedBeyondWindow int64
}

// Gauges reads the figures across all tenants.
func (l *Ledger) Gauges(ctx context.Context, w Windows) (*Gauges, error) {
	now := l.clock()
	db := l.scope(ctx)
	g := &Gauges{OpenReviews: map[string]int64{}, Oldest: map[string]time.Duration{}}
	var rows []struct {
		Reason string
		N      int64
	}
	if err := db.Model(&Review{}).Select("reason, COUNT(*) AS n").Where("status = ?", ReviewOpen).Group("reason").Scan(&rows).Error; err != nil {
		return nil, unavailable("count open reviews", err)
	}
	for _, r := range rows {
		g.OpenReviews[r.Reason] = r.N
	}
	// ORDER BY … LIMIT 1 rather than MIN(): the column keeps its type on both engines.
	oldest := []struct {
		name, column string
		state        State
	}{
		{"RUNNING", "updated_at", StateRunning},
		{"UNKNOWN", "unknown_since", StateUnknown},
		{"PENDING", "updated_at", StatePending},
	}
	for _, o := range oldest {
		var at []time.Time
		if err := db.Model(&Operation{}).Where("state = ?", o.state).Order(o.column).Limit(1).Pluck(o.column, &at).Error; err != nil {
			return nil, unavailable("oldest "+o.name, err)
		}
		if len(at) == 1 {
			g.Oldest[o.name] = now.Sub(at[0])
		}
	}
	var opened []time.Time
	if err := db.Model(&Review{}).Where("status = ?", ReviewOpen).Order("opened_at").Limit(1).Pluck("opened_at", &opened).Error; err != nil {
		return nil, unavailable("oldest review", err)
	}
	if len(opened) == 1 {
		g.Oldest["review"] = now.Sub(opened[0])
	}
	if err := l.overdue(db.Model(&Operation{}), now, w).Count(&g.UnresolvedBeyondWindow).Error; err != nil {
		return nil, unavailable("count unresolved beyond window", err)
	}
	return g, nil
}
