package models

import (
	"context"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// DefaultClaimTTL is how long a claim on a review lasts unless taken again: long enough to
// look into one case, short enough that a reviewer who left does not hide work.
const DefaultClaimTTL = 30 * time.Minute

// Audit actions of claims.
const (
	AuditReviewClaim   = "review.claim"
	AuditReviewRelease = "review.release"
)

// ClaimReview takes the open review of operation opID for by until ttl from now, so that
// others see who has it. A live claim of someone else is CodeConflict, naming them; taking
// one's own claim again extends it. The claim and its audit entry commit together.
func (l *Ledger) ClaimReview(ctx context.Context, s Scope, by Requester, tenant, opID string, ttl time.Duration) (*Review, error) {
	if ttl <= 0 {
		ttl = DefaultClaimTTL
	}
	return l.changeClaim(ctx, s, by, tenant, opID, AuditReviewClaim, func(now time.Time, r *Review) (map[string]any, error) {
		if r.claimedByOther(by.Person(), now) {
			return nil, errorf(CodeConflict, "%s has taken this review until %s", ActorName(*r.ClaimedBy), r.ClaimedUntil.UTC().Format("15:04 UTC"))
		}
		until := now.Add(ttl)
		r.ClaimedBy, r.ClaimedUntil, r.ClaimedByID = &by.Actor, &until, nil
		if by.UserID != "" {
			r.ClaimedByID = &by.UserID
		}
		return map[string]any{"review": r.ID, "until": until.UTC().Format(time.RFC3339)}, nil
	})
}

// ReleaseReview gives back by's claim on the open review of operation opID. Releasing a claim
// that is someone else's and still live is CodeConflict; one that has lapsed or is absent
// releases nothing and is no error.
func (l *Ledger) ReleaseReview(ctx context.Context, s Scope, by Requester, tenant, opID string) (*Review, error) {
	return l.changeClaim(ctx, s, by, tenant, opID, AuditReviewRelease, func(now time.Time, r *Review) (map[string]any, error) {
		if r.claimedByOther(by.Person(), now) {
			return nil, errorf(CodeConflict, "%s has taken this review; only they can give it back", ActorName(*r.ClaimedBy))
		}
		r.ClaimedBy, r.ClaimedUntil, r.ClaimedByID = nil, nil, nil
		return map[string]any{"review": r.ID}, nil
	})
}

// changeClaim locks the open review of the operation, lets fn change its claim, and writes
// the claim and the audit entry fn describes.
func (l *Ledger) changeClaim(ctx context.Context, s Scope, by Requester, tenant, opID, action string,
	fn func(now time.Time, r *Review) (map[string]any, error)) (*Review, error) {
	if !s.Allows(tenant) {
		return nil, errorf(CodeNotFound, "operation not found")
	}
	var r Review
	err := l.txn(ctx, action, func(tx *gorm.DB) ([]string, error) {
		q := tx.Where("tenant = ? AND operation_id = ? AND status = ?", tenant, opID, ReviewOpen)
		if l.dialect == Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		if err := q.Take(&r).Error; err != nil {
			if notFound(err) {
				return nil, errorf(CodeNotFound, "this operation has no open review")
			}
			return nil, err
		}
		now := l.clock()
		detail, err := fn(now, &r)
		if err != nil {
			return nil, err
		}
		if err := tx.Model(&Review{}).Where("id = ?", r.ID).
			Updates(map[string]any{"claimed_by": r.ClaimedBy, "claimed_until": r.ClaimedUntil, "claimed_by_id": r.ClaimedByID}).Error; err != nil {
			return nil, err
		}
		_, err = l.appendAudit(tx, now, AuditInput{Actor: by.Actor, Action: action, Tenant: tenant, OperationID: opID,
			Outcome: OutcomeOK, RequestID: by.RequestID, Detail: detail})
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// claimedByOther reports whether someone other than p holds a live claim on r at now.
func (r *Review) claimedByOther(p Person, now time.Time) bool {
	holder, ok := r.ClaimHolder(now)
	return ok && !holder.Is(p)
}

// ClaimHolder is who holds a live claim on r at now; ok is false when nobody does.
func (r *Review) ClaimHolder(now time.Time) (holder Person, ok bool) {
	return claimHolder(r.ClaimedBy, r.ClaimedByID, r.ClaimedUntil, now)
}

// ClaimHolder is who holds a live claim on the item's review at now; ok is false when nobody
// does.
func (it *QueueItem) ClaimHolder(now time.Time) (holder Person, ok bool) {
	return claimHolder(it.ClaimedBy, it.ClaimedByID, it.ClaimedUntil, now)
}

// claimHolder is the one rule of a claim's life: it holds until its time, not after.
func claimHolder(by, byID *string, until *time.Time, now time.Time) (Person, bool) {
	if by == nil || until == nil || !until.After(now) {
		return Person{}, false
	}
	p := Person{Actor: *by}
	if byID != nil {
		p.UserID = *byID
	}
	return p, true
}

// ActorName is how an actor reads on a page: a person by their email, without the "user:"
// the ledger records; programs keep their prefix (worker:…, api:…), which says what they are.
func ActorName(actor string) string {
	if e, ok := strings.CutPrefix(actor, "user:"); ok {
		return e
	}
	return actor
}
