package models

import (
	"context"
	"time"
)

// ReviewFilter narrows the review queue. Zero fields do not filter.
type ReviewFilter struct {
	Tenant string
	Tool   string
	Reason string
	Limit  int
}

// QueueItem is an open review with what a reviewer needs to pick it: its operation's key,
// tool and state.
type QueueItem struct {
	ReviewID      string
	Tenant        string
	OperationID   string
	Reason        string
	OpenedAt      time.Time
	OpenedBy      string
	Key           string `gorm:"column:op_key"`
	Tool          string
	State         State
	WorkflowRunID *string
}

// ReviewQueue returns the open reviews within scope matching f, oldest first, and whether
// more follow.
func (l *Ledger) ReviewQueue(ctx context.Context, s Scope, f ReviewFilter) ([]QueueItem, bool, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		return nil, false, errorf(CodeInvalid, "limit must be between 1 and 500")
	}
	q := l.scope(ctx).Table("reviews").
		Select("reviews.id AS review_id, reviews.tenant, reviews.operation_id, reviews.reason, reviews.opened_at, "+
			"reviews.opened_by, operations.op_key, operations.tool, operations.state, operations.workflow_run_id").
		Joins("JOIN operations ON operations.id = reviews.operation_id").
		Where("reviews.status = ?", ReviewOpen)
	q = s.apply(q, "reviews.tenant")
	if f.Tenant != "" {
		q = q.Where("reviews.tenant = ?", f.Tenant)
	}
	if f.Tool != "" {
		q = q.Where("operations.tool = ?", f.Tool)
	}
	if f.Reason != "" {
		q = q.Where("reviews.reason = ?", f.Reason)
	}
	var items []QueueItem
	if err := q.Order("reviews.opened_at, reviews.id").Limit(f.Limit + 1).Scan(&items).Error; err != nil {
		return nil, false, unavailable("review queue", err)
	}
	more := len(items) > f.Limit
	if more {
		items = items[:f.Limit]
	}
	return items, more, nil
}
