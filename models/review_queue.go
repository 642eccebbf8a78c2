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
	// Claims narrows by claim: ClaimsMine (live claims of Actor) or ClaimsNone (no live claim).
	Claims string
	Actor  string
	Limit  int
}

// Claim filters of the review queue.
const (
	ClaimsMine = "mine"
	ClaimsNone = "unclaimed"
)

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
	// ClaimedBy and ClaimedUntil say who has taken the review; a claim past its time is none.
	ClaimedBy    *string
	ClaimedUntil *time.Time
}

// ReviewQueue returns the open reviews within scope matching f, oldest first, and whether
// more follow.
func (l *Ledger) ReviewQueue(ctx context.Context, s Scope, f ReviewFilter) ([]QueueItem, bool, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		return nil, false, errorf(CodeInvalid, "limit must be between 1 and 500")
	}
	q := l.scope(ctx).Table("reviews").
		Select("reviews.id AS review_id, reviews.tenant, reviews.operation_id, reviews.reason, reviews.opened_at, "+
			"reviews.opened_by, operations.op_key, operations.tool, operations.state, operations.workflow_run_id, "+
			"reviews.claimed_by, reviews.claimed_until").
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
	switch now := l.clock(); f.Claims {
	case "":
	case ClaimsMine:
		q = q.Where("reviews.claimed_by = ? AND reviews.claimed_until > ?", f.Actor, now)
	case ClaimsNone:
		q = q.Where("(reviews.claimed_by IS NULL OR reviews.claimed_until <= ?)", now)
	default:
		return nil, false, errorf(CodeInvalid, "claims filter %q: use %s or %s", f.Claims, ClaimsMine, ClaimsNone)
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
