package models

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Email to reviewers (docs/WEBHOOKS.md "Email"): when a review opens or an approval is about to
// lapse, each reviewer (and admin) of the tenant who has not muted email gets one message,
// written in the same transaction as the change, like the outbox's messages, and sent by a
// mailer. The (review, recipient, event) triple is unique: a replica that announces the same
// change again, or a second sweep, writes nothing more.

// EmailEvents are the events that email reviewers.
var EmailEvents = []string{WebhookReviewOpened, WebhookReviewExpiring}

// The statuses of an email.
const (
	EmailPending = "pending"
	EmailSent    = "sent"
	EmailDead    = "dead"
)

// Email is one message to one person about one review.
type Email struct {
	ID          string `gorm:"primaryKey"`
	Tenant      string
	ReviewID    string
	OperationID string
	Event       string
	Recipient   string
	// Payload is the standard webhook body of the change, which the mailer writes the message
	// from (summary, why, link).
	Payload string
	// Digest: the recipient asked for one message an hour; the email is due at the next hour
	// and goes out with the others due then.
	Digest         bool
	Status         string
	Attempts       int
	NextAttemptAt  time.Time
	LeaseOwner     *string
	LeaseExpiresAt *time.Time
	LastError      *string
	CreatedAt      time.Time
	SentAt         *time.Time
}

// TableName is the emails' table.
func (Email) TableName() string { return "emails" }

// mailSchema is migration step 25's.
const mailSchema = `
CREATE TABLE emails (
	id               TEXT PRIMARY KEY,
	tenant           TEXT NOT NULL,
	review_id        TEXT NOT NULL,
	operation_id     TEXT NOT NULL,
	event            TEXT NOT NULL,
	recipient        TEXT NOT NULL,
	payload          TEXT NOT NULL,
	digest           BOOLEAN NOT NULL DEFAULT FALSE,
	status           TEXT NOT NULL,
	attempts         INTEGER NOT NULL DEFAULT 0,
	next_attempt_at  {{ts}} NOT NULL,
	lease_owner      TEXT,
	lease_expires_at {{ts}},
	last_error       TEXT,
	created_at       {{ts}} NOT NULL,
	sent_at          {{ts}}
);
CREATE UNIQUE INDEX emails_once ON emails (review_id, recipient, event);
CREATE INDEX emails_due ON emails (next_attempt_at) WHERE status = 'pending';
ALTER TABLE users ADD COLUMN email_muted BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE users ADD COLUMN email_digest BOOLEAN NOT NULL DEFAULT FALSE;
`

// enqueueEmails writes, inside tx, one email about notice n of op to each person who reviews
// op's tenant and has not muted email.
func (l *Ledger) enqueueEmails(tx *gorm.DB, now time.Time, op *Operation, n notice) error {
	if err := currentReview(tx, op); err != nil {
		return err
	}
	if op.ReviewID == nil {
		return nil
	}
	var users []struct {
		Email, Tenants string
		EmailDigest    bool
	}
	// Only people who can sign in: an invited user who has not accepted yet gets nothing.
	if err := tx.Model(&User{}).Select("email, tenants, email_digest").Where("disabled_at IS NULL AND email_muted = ? AND role IN ? AND "+canSignIn, false,
		[]Role{RoleReviewer, RoleAdmin}).Find(&users).Error; err != nil {
		return fmt.Errorf("reviewers of %s: %w", op.Tenant, err)
	}
	var rows []Email
	if err := attachPolicy(tx, op); err != nil {
		return err
	}
	body, err := l.payload(now, op, n)
	if err != nil {
		return err
	}
	var recipients []string
	for _, u := range users {
		if ts := (&User{Tenants: u.Tenants}).TenantList(); ts == nil || slices.Contains(ts, op.Tenant) {
			recipients = append(recipients, u.Email)
		}
	}
	sentThisHour, err := emailsThisHour(tx, recipients, now)
	if err != nil {
		return err
	}
	for _, u := range users {
		if !slices.Contains(recipients, u.Email) {
			continue
		}
		due := now
		// Past the hour's cap, a person's reviews fold into their hourly digest: an agent
		// that opens reviews in a loop cannot flood a reviewer's inbox.
		if u.EmailDigest || sentThisHour[u.Email] >= EmailsPerHour {
			u.EmailDigest, due = true, NextDigest(now)
		}
		rows = append(rows, Email{ID: newID("eml"), Tenant: op.Tenant, ReviewID: *op.ReviewID, OperationID: op.ID, Event: n.typ,
			Recipient: u.Email, Payload: string(body), Digest: u.EmailDigest, Status: EmailPending, NextAttemptAt: due, CreatedAt: now})
	}
	if len(rows) == 0 {
		return nil
	}
	return tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error
}

// EmailsPerHour is how many emails, one per review, a person gets in an hour; the reviews after
// that come in their next hourly digest.
const EmailsPerHour = 10

// canSignIn is the condition on users that they can sign in: a password of their own or an
// identity provider. An invited user has neither until they accept.
const canSignIn = "(COALESCE(password_hash, '') <> '' OR COALESCE(issuer, '') <> '')"

// emailsThisHour counts the single emails (not digests) written to each of recipients in the
// hour before now.
func emailsThisHour(tx *gorm.DB, recipients []string, now time.Time) (map[string]int, error) {
	out := map[string]int{}
	if len(recipients) == 0 {
		return out, nil
	}
	var counts []struct {
		Recipient string
		N         int
	}
	err := tx.Model(&Email{}).Select("recipient, count(*) AS n").
		Where("recipient IN ? AND created_at > ? AND digest = ?", recipients, now.Add(-time.Hour), false).
		Group("recipient").Find(&counts).Error
	if err != nil {
		return nil, fmt.Errorf("emails this hour: %w", err)
	}
	for _, c := range counts {
		out[c.Recipient] = c.N
	}
	return out, nil
}

// How a person gets email about reviews.
const (
	EmailEach   = "each"   // a message per review
	EmailDigest = "digest" // one message an hour, with every review of that hour
	EmailOff    = "off"
)

// NextDigest is when an hourly digest due after now goes out: the next full hour.
func NextDigest(now time.Time) time.Time { return now.Truncate(time.Hour).Add(time.Hour) }

// SetEmailChoice sets how user id gets email about reviews (EmailEach, EmailDigest, EmailOff).
// It holds from the next review.
func (l *Ledger) SetEmailChoice(ctx context.Context, id, choice string) error {
	if choice != EmailEach && choice != EmailDigest && choice != EmailOff {
		return errorf(CodeInvalid, "email: choose each, digest or off")
	}
	return l.txn(ctx, "email choice", func(tx *gorm.DB) ([]string, error) {
		return nil, tx.Model(&User{}).Where("id = ?", id).
			Updates(map[string]any{"email_muted": choice == EmailOff, "email_digest": choice == EmailDigest}).Error
	})
}

// EmailChoice returns how user id gets email about reviews.
func (l *Ledger) EmailChoice(ctx context.Context, id string) (string, error) {
	var r struct{ EmailMuted, EmailDigest bool }
	err := l.scope(ctx).Model(&User{}).Select("email_muted, email_digest").Where("id = ?", id).Scan(&r).Error
	switch {
	case err != nil:
		return "", unavailable("read email preference", err)
	case r.EmailMuted:
		return EmailOff, nil
	case r.EmailDigest:
		return EmailDigest, nil
	}
	return EmailEach, nil
}

// ClaimEmails claims up to limit pending emails that are due, for worker and lease, as
// ClaimDeliveries claims deliveries: a compare-and-set on the attempt count, the next attempt
// pushed past the lease, so no two mailers send one at once and a mailer that dies loses none.
func (l *Ledger) ClaimEmails(ctx context.Context, worker string, limit int, lease time.Duration) ([]Email, error) {
	now := l.clock()
	var claimed []Email
	err := l.txn(ctx, "claim emails", func(tx *gorm.DB) ([]string, error) {
		q := tx.Where("status = 'pending' AND next_attempt_at <= ?", now).Order("next_attempt_at, id").Limit(limit)
		if l.dialect == Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
		}
		var rows []Email
		if err := q.Find(&rows).Error; err != nil {
			return nil, err
		}
		// Whoever cannot sign in any more (disabled since the email was written, or removed)
		// gets nothing: the email ends dead, saying why.
		able, err := recipientsAble(tx, rows)
		if err != nil {
			return nil, err
		}
		for _, e := range rows {
			if !able[e.Recipient] {
				err := tx.Model(&Email{}).Where("id = ? AND status = ? AND attempts = ?", e.ID, EmailPending, e.Attempts).
					Updates(map[string]any{"status": EmailDead, "last_error": "the recipient can no longer sign in (disabled or removed): not sent"}).Error
				if err != nil {
					return nil, err
				}
				continue
			}
			until := now.Add(lease)
			res := tx.Model(&Email{}).Where("id = ? AND status = ? AND attempts = ?", e.ID, EmailPending, e.Attempts).
				Updates(map[string]any{"attempts": e.Attempts + 1, "lease_owner": worker, "lease_expires_at": until, "next_attempt_at": until})
			if res.Error != nil {
				return nil, res.Error
			}
			if res.RowsAffected == 1 {
				e.Attempts, e.LeaseOwner, e.LeaseExpiresAt, e.NextAttemptAt = e.Attempts+1, ptr(worker), ptr(until), until
				claimed = append(claimed, e)
			}
		}
		return nil, nil
	})
	return claimed, err
}

// recipientsAble says which recipients of rows are enabled users who can sign in, checked when
// the email is sent rather than when it was written.
func recipientsAble(tx *gorm.DB, rows []Email) (map[string]bool, error) {
	able := map[string]bool{}
	if len(rows) == 0 {
		return able, nil
	}
	var emails []string
	for _, e := range rows {
		emails = append(emails, e.Recipient)
	}
	var ok []string
	if err := tx.Model(&User{}).Where("email IN ? AND disabled_at IS NULL AND "+canSignIn, emails).Pluck("email", &ok).Error; err != nil {
		return nil, fmt.Errorf("recipients: %w", err)
	}
	for _, e := range ok {
		able[e] = true
	}
	return able, nil
}

// RecordEmail records what sending claimed email e found: sent, or pending again at next (nil:
// dead, with why). It is fenced by the claim's attempt count, except a send, which stands.
func (l *Ledger) RecordEmail(ctx context.Context, e Email, sendErr error, next *time.Time) error {
	now := l.clock()
	return l.txn(ctx, "record email "+e.ID, func(tx *gorm.DB) ([]string, error) {
		fields := map[string]any{"lease_owner": nil, "lease_expires_at": nil}
		q := tx.Model(&Email{}).Where("id = ? AND status = ?", e.ID, EmailPending)
		switch {
		case sendErr == nil:
			fields["status"], fields["sent_at"], fields["last_error"] = EmailSent, now, nil
		case next != nil:
			fields["next_attempt_at"], fields["last_error"] = *next, cutError(sendErr.Error())
			q = q.Where("attempts = ?", e.Attempts)
		default:
			fields["status"], fields["last_error"] = EmailDead, cutError(sendErr.Error())
			q = q.Where("attempts = ?", e.Attempts)
		}
		return nil, q.Updates(fields).Error
	})
}

// Emails lists the emails about review id, oldest first.
func (l *Ledger) Emails(ctx context.Context, reviewID string) ([]Email, error) {
	var out []Email
	if err := l.scope(ctx).Where("review_id = ?", reviewID).Order("created_at, id").Find(&out).Error; err != nil {
		return nil, unavailable("read emails", err)
	}
	return out, nil
}

func cutError(s string) string {
	if len(s) > 500 {
		s = s[:500]
	}
	return strings.ToValidUTF8(s, "")
}
