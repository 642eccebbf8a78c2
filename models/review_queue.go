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
	// Claims narrows by claim: ClaimsMine (live claims of Viewer) or ClaimsNone (no live claim).
	Claims string
	Viewer Person
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
	ClaimedByID  *string
	ClaimedUntil *time.Time
	// Params are the operation's params as stored (masked when sealed): mask them with the
	// tool's rules before showing them. Fingerprint and Compensates say which approvals count
	// and whether it is a compensation.
	Params      *string
	Fingerprint string
	Compensates *string
	// OpCreatedAt is when the operation was created: an approval's window runs from then.
	OpCreatedAt time.Time `gorm:"column:op_created_at"`
	// Justification is the agent's reason for the operation, as recorded (masked).
	Justification *string
	// Evidence is what its attempts and look-ups saw, so that rows that differ look different.
	Evidence
}

// ReviewQueue returns the open reviews within scope matching f, oldest first, and whether
// more follow. Each carries its operation's Evidence: the last attempt read in the same
// statement, the look-ups tallied in one more for the whole page, never one per row.
func (l *Ledger) ReviewQueue(ctx context.Context, s Scope, f ReviewFilter) ([]QueueItem, bool, error) {
	if f.Limit <= 0 || f.Limit > BulkLimit {
		return nil, false, errorf(CodeInvalid, "limit must be between 1 and %d", BulkLimit)
	}
	q := l.scope(ctx).Table("reviews").
		Select("reviews.id AS review_id, reviews.tenant, reviews.operation_id, reviews.reason, reviews.opened_at, "+
			"reviews.opened_by, operations.op_key, operations.tool, operations.state, operations.workflow_run_id, "+
			"reviews.claimed_by, reviews.claimed_by_id, reviews.claimed_until, operations.params, operations.fingerprint, operations.compensates, "+
			"operations.created_at AS op_created_at, operations.justification, "+evidenceColumns).
		Joins("JOIN operations ON operations.id = reviews.operation_id").
		Joins(lastAttemptJoin).
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
		// By user id; a claim taken before ids were kept, by actor (Person.Is).
		q = q.Where("reviews.claimed_until > ? AND (reviews.claimed_by_id = ? OR (reviews.claimed_by_id IS NULL AND reviews.claimed_by = ?))",
			now, f.Viewer.UserID, f.Viewer.Actor)
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
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.OperationID
	}
	lookups, err := l.lookupCounts(ctx, s, ids)
	if err != nil {
		return nil, false, err
	}
	for i := range items {
		items[i].Lookups = lookups[items[i].OperationID]
	}
	return items, more, nil
}

// OpenReviewCount counts the open reviews within scope: the number the console's navigation
// shows.
func (l *Ledger) OpenReviewCount(ctx context.Context, s Scope) (int64, error) {
	var n int64
	if err := s.apply(l.scope(ctx).Model(&Review{}), "tenant").Where("status = ?", ReviewOpen).Count(&n).Error; err != nil {
		return 0, unavailable("open reviews", err)
	}
	return n, nil
}

// NextReview returns the oldest open review within scope whose operation is not except; ok is
// false when there is none. It is where a reviewer goes after a decision.
func (l *Ledger) NextReview(ctx context.Context, s Scope, except string) (item QueueItem, ok bool, err error) {
	q := l.scope(ctx).Table("reviews").
		Select("reviews.id AS review_id, reviews.tenant, reviews.operation_id, reviews.reason, reviews.opened_at, "+
			"reviews.opened_by, operations.op_key, operations.tool, operations.state").
		Joins("JOIN operations ON operations.id = reviews.operation_id").
		Where("reviews.status = ? AND reviews.operation_id <> ?", ReviewOpen, except)
	q = s.apply(q, "reviews.tenant")
	var items []QueueItem
	if err := q.Order("reviews.opened_at, reviews.id").Limit(1).Scan(&items).Error; err != nil {
		return QueueItem{}, false, unavailable("next review", err)
	}
	if len(items) == 0 {
		return QueueItem{}, false, nil
	}
	return items[0], true, nil
}

// DecisionEvents returns, by operation, the events that say who proposed and who approved the
// operations ids (created and review_action), within scope, oldest first.
func (l *Ledger) DecisionEvents(ctx context.Context, s Scope, ids []string) (map[string][]Event, error) {
	out := make(map[string][]Event, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var evs []Event
	q := s.apply(l.scope(ctx).Model(&Event{}), "tenant").
		Where("operation_id IN ? AND type IN ?", ids, []string{EventCreated, EventReviewAction, EventPolicyDecided})
	if err := q.Order("id").Find(&evs).Error; err != nil {
		return nil, unavailable("decision events", err)
	}
	for _, e := range evs {
		out[e.OperationID] = append(out[e.OperationID], e)
	}
	return out, nil
}
