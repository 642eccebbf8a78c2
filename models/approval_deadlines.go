package models

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// LapsesAt is when an operation created at created, awaiting approval under a window of ttl,
// lapses: the window runs from the operation's creation, as LapseApprovals measures it.
func LapsesAt(created time.Time, ttl time.Duration) time.Time { return created.Add(ttl) }

// WarnExpiringApprovals announces review.expiring, once per review, for operations of tools
// whose approval window (ttl) closes within warn and has not closed yet. The review's
// expiry_warned_at is set by compare-and-set in the same transaction as the outbox message,
// so replicas sweeping together warn once between them.
func (l *Ledger) WarnExpiringApprovals(ctx context.Context, tools []string, ttl, warn time.Duration, limit int) (int, error) {
	if warn <= 0 {
		return 0, nil
	}
	now := l.clock()
	// Warned from ttl-warn after creation (at once when warn is the whole window or more)
	// until the lapse itself, which LapseApprovals handles.
	from := now.Add(-ttl)
	until := now.Add(warn - ttl)
	n := 0
	err := l.txn(ctx, "warn expiring approvals", func(tx *gorm.DB) ([]string, error) {
		ops, err := l.dueRows(tx, "created_at", limit,
			"state = ? AND tool IN ? AND created_at >= ? AND created_at <= ? AND review_id IS NOT NULL AND "+
				"EXISTS (SELECT 1 FROM reviews r WHERE r.id = operations.review_id AND r.status = ? AND r.expiry_warned_at IS NULL)",
			StateAwaitingApproval, tools, from, until, ReviewOpen)
		if err != nil {
			return nil, err
		}
		for _, op := range ops {
			res := tx.Model(&Review{}).Where("id = ? AND expiry_warned_at IS NULL", *op.ReviewID).Update("expiry_warned_at", now)
			if res.Error != nil {
				return nil, res.Error
			}
			if res.RowsAffected != 1 {
				continue // another sweep warned first
			}
			lapses := LapsesAt(op.CreatedAt, ttl).UTC()
			if err := l.announce(tx, now, op, notice{typ: WebhookReviewExpiring, withReview: true, lapsesAt: &lapses}); err != nil {
				return nil, err
			}
			n++
		}
		return nil, nil
	})
	return n, err
}
