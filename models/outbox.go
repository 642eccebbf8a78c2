package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"gorm.io/gorm"
)

// PayloadRenderer renders the operation object of docs/API.md for webhook payloads, with the tool's
// sensitive params masked, and the tool's summary line. The ledger cannot render them alone: the
// masking rules live in the catalogue.
type PayloadRenderer interface {
	RenderOperation(op *Operation) (json.RawMessage, error)
	// Summary is the tool's summary line of op's masked params ("42.00 EUR to order 1044"), ""
	// when the tool has none.
	Summary(op *Operation) string
}

type webhookPayload struct {
	Type       string    `json:"type"`
	OccurredAt time.Time `json:"occurred_at"`
	Tenant     string    `json:"tenant"`
	// Summary is the tool's summary line ("42.00 EUR to order 1044"), "" when it has none.
	Summary string `json:"summary"`
	// Links point people at the operation; absent without a public URL (Config.PublicURL).
	Links *webhookLinks `json:"links,omitempty"`
	Data  webhookData   `json:"data"`
}

type webhookLinks struct {
	Console string `json:"console"`
}

type webhookData struct {
	Operation json.RawMessage `json:"operation"`
	// Review is the review a review.* event is about; absent from operation.* events, whose
	// operation object already names its review.
	Review *webhookReview `json:"review,omitempty"`
}

type webhookReview struct {
	ID          string     `json:"id"`
	OperationID string     `json:"operation_id"`
	Status      string     `json:"status"`
	Reason      string     `json:"reason"`
	OpenedAt    time.Time  `json:"opened_at"`
	OpenedBy    string     `json:"opened_by"`
	ResolvedAt  *time.Time `json:"resolved_at"`
	ResolvedBy  *string    `json:"resolved_by"`
	Resolution  *string    `json:"resolution"`
	// LapsesAt is when an approval review's window closes; only in review.expiring.
	LapsesAt *time.Time `json:"lapses_at,omitempty"`
}

// errNoRenderer refuses a change a subscription wants on a ledger built without Config.Payloads.
var errNoRenderer = errors.New("a webhook subscription wants it, but no payload renderer is wired")

// notice is one notification a change announces.
type notice struct {
	typ        string
	withReview bool
	lapsesAt   *time.Time // review.expiring: when the approval window closes
}

// announce writes, inside tx, the outbox message of each notice about op (as it stands after
// the change), with one pending delivery per live subscription of op's tenant that wants it.
// A notice nobody subscribes to writes nothing: no message is kept that no one will receive.
// Because it runs in the transaction of the change, the messages exist exactly when the change
// does.
//
// Within Ledger.txn the work is deferred to the transaction's end (see flush), with a copy of
// op as it stands now.
func (l *Ledger) announce(tx *gorm.DB, now time.Time, op *Operation, notices ...notice) error {
	if len(notices) == 0 {
		return nil
	}
	if v, ok := tx.Get(pendingKey); ok {
		p := v.(*pending)
		p.announcements = append(p.announcements, announcement{at: now, op: *op, notices: notices})
		return nil
	}
	return l.announceNow(tx, now, op, notices...)
}

// announceNow is announce, at once.
func (l *Ledger) announceNow(tx *gorm.DB, now time.Time, op *Operation, notices ...notice) error {
	var subs []WebhookSubscription
	if err := tx.Select("id, events").Where("tenant = ? AND deleted_at IS NULL", op.Tenant).Find(&subs).Error; err != nil {
		return fmt.Errorf("ledger: webhook subscriptions of %s: %w", op.Tenant, err)
	}
	for _, n := range notices {
		if l.mail && slices.Contains(EmailEvents, n.typ) {
			if err := l.enqueueEmails(tx, now, op, n); err != nil {
				return fmt.Errorf("ledger: emails of %s of %s: %w", n.typ, op.ID, err)
			}
		}
		var wanted []string
		for i := range subs {
			if subs[i].Wants(n.typ) {
				wanted = append(wanted, subs[i].ID)
			}
		}
		if len(wanted) == 0 {
			continue
		}
		if err := l.enqueue(tx, now, op, n, wanted); err != nil {
			return fmt.Errorf("ledger: %s of %s: %w", n.typ, op.ID, err)
		}
	}
	return nil
}

// enqueue writes one outbox message and its deliveries to the subscriptions subs.
func (l *Ledger) enqueue(tx *gorm.DB, now time.Time, op *Operation, n notice, subs []string) error {
	if l.payloads == nil {
		return errNoRenderer
	}
	if err := currentReview(tx, op); err != nil {
		return err
	}
	if err := attachPolicy(tx, op); err != nil {
		return err
	}
	body, err := l.payload(now, op, n)
	if err != nil {
		return err
	}
	msg := OutboxMessage{ID: newID("msg"), Tenant: op.Tenant, EventType: n.typ, OperationID: op.ID, OccurredAt: now,
		Payload: string(body), CreatedAt: now}
	if err := tx.Create(&msg).Error; err != nil {
		return err
	}
	deliveries := make([]WebhookDelivery, len(subs))
	for i, sub := range subs {
		deliveries[i] = WebhookDelivery{ID: newID("dlv"), OutboxID: msg.ID, SubscriptionID: sub, Status: DeliveryPending,
			NextAttemptAt: now, CreatedAt: now}
	}
	return tx.Create(&deliveries).Error
}

// currentReview sets op's review as the database has it within tx. The caller's copy of op may
// predate a review opened or resolved meanwhile (the CAS that changed op checked its state, not
// its review), and the payload must show the operation as the API will.
func currentReview(tx *gorm.DB, op *Operation) error {
	var r Review
	err := tx.Joins("JOIN operations o ON o.review_id = reviews.id").Where("o.id = ?", op.ID).Take(&r).Error
	switch {
	case notFound(err):
		op.ReviewID, op.Review = nil, nil
	case err != nil:
		return fmt.Errorf("current review of %s: %w", op.ID, err)
	default:
		op.ReviewID, op.Review = &r.ID, &r
	}
	return nil
}

// payload renders the JSON body of notice n about op.
func (l *Ledger) payload(now time.Time, op *Operation, n notice) ([]byte, error) {
	rendered, err := l.payloads.RenderOperation(op)
	if err != nil {
		return nil, fmt.Errorf("render operation: %w", err)
	}
	p := webhookPayload{Type: n.typ, OccurredAt: now.UTC(), Tenant: op.Tenant, Summary: l.payloads.Summary(op),
		Data: webhookData{Operation: rendered}}
	if l.publicURL != "" {
		p.Links = &webhookLinks{Console: l.publicURL + "/operations/" + url.PathEscape(op.ID)}
	}
	if r := op.Review; n.withReview && r != nil {
		p.Data.Review = &webhookReview{ID: r.ID, OperationID: r.OperationID, Status: r.Status, Reason: r.Reason,
			OpenedAt: r.OpenedAt.UTC(), OpenedBy: r.OpenedBy, ResolvedAt: r.ResolvedAt, ResolvedBy: r.ResolvedBy, Resolution: r.Resolution,
			LapsesAt: n.lapsesAt}
		if r.ResolvedAt != nil {
			p.Data.Review.ResolvedAt = ptr(r.ResolvedAt.UTC())
		}
	}
	body, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	return body, nil
}
