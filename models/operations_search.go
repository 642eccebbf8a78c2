package models

import (
	"context"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
)

// Search narrows the console's operation search. Zero fields do not filter.
type Search struct {
	Key    string // operations whose key starts with this
	Tool   string
	State  State
	Tenant string
	From   time.Time // created at or after
	To     time.Time // created before
	Before string    // cursor: ids strictly older than this one
	Limit  int
}

// SearchOperations returns a page of operations within scope matching f, newest first, and
// whether more follow.
func (l *Ledger) SearchOperations(ctx context.Context, s Scope, f Search) ([]*Operation, bool, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		return nil, false, errorf(CodeInvalid, "limit must be between 1 and 500")
	}
	if f.State != "" && !f.State.Valid() {
		return nil, false, errorf(CodeInvalid, "unknown state %q", f.State)
	}
	q := s.apply(l.scope(ctx), "tenant")
	if f.Key != "" {
		// An exact, case-sensitive prefix on both engines (LIKE folds case on SQLite and
		// treats '%' and '_' as wildcards).
		q = q.Where("substr(op_key, 1, ?) = ?", utf8.RuneCountInString(f.Key), f.Key)
	}
	q = whereOperations(q, f.Tenant, f.Tool, f.State, f.From, f.To)
	if f.Before != "" {
		q = q.Where("id < ?", f.Before)
	}
	var ops []*Operation
	if err := q.Order("id DESC").Limit(f.Limit + 1).Find(&ops).Error; err != nil {
		return nil, false, unavailable("search operations", err)
	}
	more := len(ops) > f.Limit
	if more {
		ops = ops[:f.Limit]
	}
	return ops, more, nil
}

// workflowShown bounds the operations shown for one workflow run.
const workflowShown = 1000

// WorkflowOperations returns the operations of one workflow run within scope, in creation
// order. None is CodeNotFound, as is a run of a tenant outside scope.
func (l *Ledger) WorkflowOperations(ctx context.Context, s Scope, runID string) ([]*Operation, error) {
	var ops []*Operation
	err := s.apply(l.scope(ctx), "tenant").Where("workflow_run_id = ?", runID).
		Order("created_at, id").Limit(workflowShown).Find(&ops).Error
	if err != nil {
		return nil, unavailable("workflow operations", err)
	}
	if len(ops) == 0 {
		return nil, errorf(CodeNotFound, "no operations of workflow run %q", runID)
	}
	return ops, nil
}

// whereOperations narrows q to operations of tenant, tool and state created in [from, to); zero
// values do not filter. The console's search and the exports share it, so both read a filter
// the same way.
func whereOperations(q *gorm.DB, tenant, tool string, state State, from, to time.Time) *gorm.DB {
	if tenant != "" {
		q = q.Where("tenant = ?", tenant)
	}
	if tool != "" {
		q = q.Where("tool = ?", tool)
	}
	if state != "" {
		q = q.Where("state = ?", state)
	}
	if !from.IsZero() {
		q = q.Where("created_at >= ?", from.UTC())
	}
	if !to.IsZero() {
		q = q.Where("created_at < ?", to.UTC())
	}
	return q
}
