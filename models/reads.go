package models

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// Get returns the operation id of tenant. Another tenant's operation is CodeNotFound, exactly
// as a missing one.
func (l *Ledger) Get(ctx context.Context, tenant, id string) (*Operation, error) {
	return l.take(ctx, "get operation", getOperation, tenant, id)
}

// GetByKey returns the operation recorded under (tenant, key).
func (l *Ledger) GetByKey(ctx context.Context, tenant, key string) (*Operation, error) {
	return l.take(ctx, "get operation by key", getOperationByKey, tenant, key)
}

var (
	getOperation = newRowQuery("SELECT " + operationColumns + " FROM operations WHERE tenant = ? AND id = ?")
	// The key look-up answers every replay. While the ledger is young it is planned for the
	// values it is given, each time: a plan PostgreSQL cached once per connection while the
	// ledger was empty scans every operation of the tenant through another index on tenant,
	// and stays until an ANALYZE invalidates it (see keyPlan; docs/PERFORMANCE.md, The
	// replay's plan).
	getOperationByKey = newRowQuery("SELECT " + operationColumns + " FROM operations WHERE tenant = ? AND op_key = ?").plannedWhileYoung()
	// watchOperation marks an operation as watched by a waiter of another process, returning
	// it as it stands once the mark is committed (see Watch).
	watchOperation = newRowQuery("UPDATE operations SET watched = TRUE WHERE tenant = ? AND id = ? AND NOT watched RETURNING " + operationColumns)
)

// Watch reads operation id for a waiter whose operation another process may change (one
// this process does not hold the lease of): it sets the operation's watched flag, after which
// every committed change of the operation notifies the replicas' listeners (see flush), and
// returns the operation as it stands after the flag is set. The flag and the change are
// ordered by the row lock both take, so no change escapes both the waiter's read and the
// notification. On SQLite (one process, no notifications) it is Get.
func (l *Ledger) Watch(ctx context.Context, tenant, id string) (*Operation, error) {
	if l.dialect != Postgres {
		return l.Get(ctx, tenant, id)
	}
	op, err := l.take(ctx, "watch operation", watchOperation, tenant, id)
	if err == nil {
		return op, nil
	}
	// Not found: already watched (or no such operation, which Get says). Another error
	// (a server that takes no writes): the waiter still reads, and polls.
	return l.Get(ctx, tenant, id)
}

func (l *Ledger) take(ctx context.Context, what string, q rowQuery, args ...any) (*Operation, error) {
	var op Operation
	err := l.queryRow(ctx, q, args, op.columns()...)
	if notFound(err) {
		return nil, errorf(CodeNotFound, "operation not found")
	}
	if err != nil {
		return nil, unavailable(what, err)
	}
	if op.ReviewID != nil { // few operations have a review: most reads stop at one query
		if err := l.loadReviews(ctx, []*Operation{&op}); err != nil {
			return nil, err
		}
	}
	return &op, nil
}

// loadReviews attaches current reviews to the operations that have one (few do).
func (l *Ledger) loadReviews(ctx context.Context, ops []*Operation) error {
	return attachReviews(l.db.WithContext(l.bounded(ctx)), ops)
}

// attachReviews is loadReviews on a given handle, so that a read inside a transaction stays
// on the transaction's connection and snapshot.
func attachReviews(db *gorm.DB, ops []*Operation) error {
	var ids []string
	for _, op := range ops {
		if op.ReviewID != nil {
			ids = append(ids, *op.ReviewID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var reviews []Review
	if err := db.Where("id IN ?", ids).Find(&reviews).Error; err != nil {
		return unavailable("load reviews", err)
	}
	byID := make(map[string]*Review, len(reviews))
	for i := range reviews {
		byID[reviews[i].ID] = &reviews[i]
	}
	for _, op := range ops {
		if op.ReviewID != nil {
			op.Review = byID[*op.ReviewID]
		}
	}
	return nil
}

// ListFilter narrows a tenant's operations. Zero fields do not filter.
type ListFilter struct {
	State         State
	Tools         []string // the tools the caller may see; nil means all
	Tool          string
	WorkflowRunID string
	Before        string // cursor: ids strictly older than this one
	Limit         int
}

// List returns a page of operations, newest first, and whether more follow.
func (l *Ledger) List(ctx context.Context, tenant string, f ListFilter) ([]*Operation, bool, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		return nil, false, errorf(CodeInvalid, "limit must be between 1 and 500")
	}
	q := l.db.WithContext(l.bounded(ctx)).Where("tenant = ?", tenant)
	if f.State != "" {
		q = q.Where("state = ?", f.State)
	}
	if f.Tool != "" {
		q = q.Where("tool = ?", f.Tool)
	}
	if f.Tools != nil {
		q = q.Where("tool IN ?", append([]string{""}, f.Tools...))
	}
	if f.WorkflowRunID != "" {
		q = q.Where("workflow_run_id = ?", f.WorkflowRunID)
	}
	if f.Before != "" {
		q = q.Where("id < ?", f.Before)
	}
	var ops []*Operation
	if err := q.Order("id DESC").Limit(f.Limit + 1).Find(&ops).Error; err != nil {
		return nil, false, unavailable("list operations", err)
	}
	more := len(ops) > f.Limit
	if more {
		ops = ops[:f.Limit]
	}
	return ops, more, l.loadReviews(ctx, ops)
}

// Events returns an operation's timeline in order.
func (l *Ledger) Events(ctx context.Context, tenant, id string) ([]Event, error) {
	var evs []Event
	err := l.db.WithContext(l.bounded(ctx)).Where("tenant = ? AND operation_id = ?", tenant, id).Order("id").Find(&evs).Error
	if err != nil {
		return nil, unavailable(fmt.Sprintf("events of %s", id), err)
	}
	return evs, nil
}

// Attempts returns an operation's attempts in order.
func (l *Ledger) Attempts(ctx context.Context, id string) ([]Attempt, error) {
	var out []Attempt
	if err := l.db.WithContext(l.bounded(ctx)).Where("operation_id = ?", id).Order("number").Find(&out).Error; err != nil {
		return nil, unavailable(fmt.Sprintf("attempts of %s", id), err)
	}
	return out, nil
}

// scope returns a query on the ledger's database bound to ctx; helpers for sibling files.
func (l *Ledger) scope(ctx context.Context) *gorm.DB { return l.db.WithContext(l.bounded(ctx)) }
