package models

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ClaimedDelivery is a delivery a publisher now owns, with what it needs to send it. Its
// Delivery.Attempts is the claim's fencing token.
type ClaimedDelivery struct {
	Delivery     WebhookDelivery
	EventType    string
	Tenant       string
	Payload      []byte
	URL          string
	Secret       string
	AllowPrivate bool
	// Format is the subscription's body format. A PagerDuty subscription's routing key is
	// RoutingKeyValue (opened from its sealed value), or RoutingKey, the reference the publisher
	// reads it from; RoutingKeyErr says why a sealed one could not be opened.
	Format          string
	RoutingKey      string
	RoutingKeyValue string
	RoutingKeyErr   error
}

// claimRow is a due delivery read with its message and subscription.
type claimRow struct {
	WebhookDelivery
	EventType        string
	Tenant           string
	OperationID      string
	Payload          string
	URL              string `gorm:"column:url"`
	Secret           string
	AllowPrivate     bool
	Format           string
	RoutingKey       *string
	RoutingKeySealed *string
	SubDeletedAt     *time.Time
}

// ClaimDeliveries claims up to limit pending deliveries that are due, oldest first, for worker
// and for lease. On PostgreSQL FOR UPDATE SKIP LOCKED lets replicas claim side by side; on
// SQLite the single writer serialises claims; on both, each claim is a compare-and-set that
// bumps the attempt count (the claim's fencing token) and pushes next_attempt_at past the
// lease, so no other replica sends the delivery while this one may be, and a publisher that
// dies mid-send loses nothing: when its lease runs out the delivery is due again. Deliveries
// whose subscription was deleted meanwhile end dead here instead of being sent.
func (l *Ledger) ClaimDeliveries(ctx context.Context, worker string, limit int, lease time.Duration) ([]ClaimedDelivery, error) {
	now := l.clock()
	var claimed []ClaimedDelivery
	err := l.txn(ctx, "claim webhook deliveries", func(tx *gorm.DB) ([]string, error) {
		q := tx.Table("webhook_deliveries AS d").
			Select("d.*, o.event_type, o.tenant, o.payload, s.url, s.secret, s.allow_private, s.format, s.routing_key, s.routing_key_sealed, s.deleted_at AS sub_deleted_at").
			Joins("JOIN outbox o ON o.id = d.outbox_id").
			Joins("JOIN webhook_subscriptions s ON s.id = d.subscription_id").
			// The status is spelled out, not bound, so that the planner can use the partial index
			// webhook_deliveries_due even with a generic plan.
			Where("d.status = 'pending' AND d.next_attempt_at <= ?", now).
			Order("d.next_attempt_at, d.id").Limit(limit)
		if l.dialect == Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Table: clause.Table{Name: "d"}, Options: "SKIP LOCKED"})
		}
		var rows []claimRow
		if err := q.Find(&rows).Error; err != nil {
			return nil, err
		}
		for _, r := range rows {
			d := r.WebhookDelivery
			base := tx.Model(&WebhookDelivery{}).Where("id = ? AND status = ? AND attempts = ?", d.ID, DeliveryPending, d.Attempts)
			if r.SubDeletedAt != nil {
				if err := base.Updates(map[string]any{"status": DeliveryDead, "ended_at": now, "last_error": "the subscription was deleted"}).Error; err != nil {
					return nil, err
				}
				continue
			}
			until := now.Add(lease)
			res := base.Updates(map[string]any{"attempts": d.Attempts + 1, "lease_owner": worker, "lease_expires_at": until, "next_attempt_at": until})
			if res.Error != nil {
				return nil, res.Error
			}
			if res.RowsAffected != 1 {
				continue // another publisher claimed it first
			}
			d.Attempts, d.LeaseOwner, d.LeaseExpiresAt, d.NextAttemptAt = d.Attempts+1, ptr(worker), ptr(until), until
			c := ClaimedDelivery{Delivery: d, EventType: r.EventType, Tenant: r.Tenant,
				Payload: []byte(r.Payload), URL: r.URL, Secret: r.Secret, AllowPrivate: r.AllowPrivate, Format: r.Format}
			if r.RoutingKey != nil {
				c.RoutingKey = *r.RoutingKey
			}
			if r.RoutingKeySealed != nil {
				c.RoutingKeyValue, c.RoutingKeyErr = l.openRoutingKey(d.SubscriptionID, *r.RoutingKeySealed)
			}
			claimed = append(claimed, c)
		}
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// DeliveryOutcome is what one attempt at a delivery found, and what the publisher decided.
type DeliveryOutcome struct {
	StatusCode int // the receiver's status; 0 when no answer came
	Latency    time.Duration
	Error      string // "" when the receiver answered 2xx
	// Status is delivered, pending (retry at NextAttemptAt) or dead.
	Status        string
	NextAttemptAt time.Time
}

// RecordDelivery records an attempt at the claimed delivery c and applies out. The attempt is
// always kept: it happened. The decision is fenced by the claim, so a publisher whose lease ran
// out, or whose delivery was deleted or re-queued meanwhile, changes nothing (CodeStale) — except
// a success, which stands whoever claimed last, since the receiver has the message.
func (l *Ledger) RecordDelivery(ctx context.Context, worker string, c ClaimedDelivery, out DeliveryOutcome) error {
	now := l.clock()
	d := c.Delivery
	return l.txn(ctx, "record webhook delivery "+d.ID, func(tx *gorm.DB) ([]string, error) {
		at := WebhookAttempt{DeliveryID: d.ID, At: now, LatencyMS: out.Latency.Milliseconds()}
		if out.StatusCode != 0 {
			at.StatusCode = ptr(out.StatusCode)
		}
		if out.Error != "" {
			at.Error = ptr(out.Error)
		}
		if err := tx.Create(&at).Error; err != nil {
			return nil, err
		}
		fields := map[string]any{"status": out.Status, "lease_owner": nil, "lease_expires_at": nil}
		q := tx.Model(&WebhookDelivery{}).Where("id = ? AND status = ?", d.ID, DeliveryPending)
		switch out.Status {
		case DeliveryDelivered:
			fields["delivered_at"], fields["ended_at"], fields["last_error"] = now, now, nil
		case DeliveryPending:
			fields["next_attempt_at"], fields["last_error"] = out.NextAttemptAt.UTC(), out.Error
			q = q.Where("lease_owner = ? AND attempts = ?", worker, d.Attempts)
		default:
			fields["status"], fields["ended_at"], fields["last_error"] = DeliveryDead, now, out.Error
			q = q.Where("lease_owner = ? AND attempts = ?", worker, d.Attempts)
		}
		res := q.Updates(fields)
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected != 1 {
			return nil, errorf(CodeStale, "delivery %s was claimed again, re-queued or ended meanwhile", d.ID)
		}
		return nil, nil
	})
}

// Redeliver queues a delivery again (an admin's action, within scope s): a dead or delivered
// one, or a pending one not being sent right now, goes out at once with the same webhook-id,
// and gets a fresh retry window, backing off afresh. A delivery of a deleted subscription cannot be redelivered.
func (l *Ledger) Redeliver(ctx context.Context, s Scope, by Requester, id string) (*WebhookDelivery, error) {
	now := l.clock()
	var row claimRow
	err := l.txn(ctx, "redeliver "+id, func(tx *gorm.DB) ([]string, error) {
		q := tx.Table("webhook_deliveries AS d").Select("d.*, o.tenant, o.event_type, o.operation_id, s.deleted_at AS sub_deleted_at").
			Joins("JOIN outbox o ON o.id = d.outbox_id").Joins("JOIN webhook_subscriptions s ON s.id = d.subscription_id").
			Where("d.id = ?", id)
		if err := s.apply(q, "o.tenant").Take(&row).Error; err != nil {
			if notFound(err) {
				return nil, errorf(CodeNotFound, "no webhook delivery %q", id)
			}
			return nil, err
		}
		d := row.WebhookDelivery
		switch {
		case row.SubDeletedAt != nil:
			return nil, errorf(CodeInvalid, "the subscription of delivery %s was deleted", id)
		case d.Status == DeliveryPending && d.LeaseExpiresAt != nil && d.LeaseExpiresAt.After(now):
			return nil, errorf(CodeInvalid, "delivery %s is being sent right now", id)
		}
		res := tx.Model(&WebhookDelivery{}).Where("id = ? AND status = ? AND attempts = ?", id, d.Status, d.Attempts).
			Updates(map[string]any{"status": DeliveryPending, "next_attempt_at": now, "redelivered_at": now, "delivered_at": nil,
				"ended_at": nil, "prior_attempts": d.Attempts, "lease_owner": nil, "lease_expires_at": nil})
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected != 1 {
			return nil, errorf(CodeStale, "delivery %s changed meanwhile; nothing was changed", id)
		}
		_, err := l.appendAudit(tx, now, AuditInput{Actor: by.Actor, Action: "webhook.redeliver", Tenant: row.Tenant, Outcome: "ok",
			RequestID: by.RequestID, OperationID: row.OperationID, Detail: map[string]any{"delivery_id": id, "outbox_id": d.OutboxID,
				"previous_status": d.Status, "event_type": row.EventType}})
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	d := row.WebhookDelivery
	d.Status, d.NextAttemptAt, d.RedeliveredAt, d.DeliveredAt, d.LeaseOwner, d.LeaseExpiresAt = DeliveryPending, now, ptr(now), nil, nil, nil
	d.EndedAt, d.PriorAttempts = nil, d.Attempts
	return &d, nil
}
