package models

import (
	"context"
	"time"
)

// DeliveryFilter narrows a list of webhook deliveries. Zero fields do not filter.
type DeliveryFilter struct {
	Tenant         string
	Status         string // pending, delivered or dead
	OperationID    string
	SubscriptionID string
	OutboxID       string
	Limit          int // default 100, at most 500
}

// DeliveryRow is a delivery as lists show it: with its event, operation and target.
type DeliveryRow struct {
	WebhookDelivery
	Tenant       string
	EventType    string
	OperationID  string
	OccurredAt   time.Time
	URL          string `gorm:"column:url"`
	SubDeletedAt *time.Time
}

// WebhookDeliveries lists deliveries within scope s, newest first.
func (l *Ledger) WebhookDeliveries(ctx context.Context, s Scope, f DeliveryFilter) ([]DeliveryRow, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	f.Limit = min(f.Limit, 500)
	q := l.scope(ctx).Table("webhook_deliveries AS d").
		Select("d.*, o.tenant, o.event_type, o.operation_id, o.occurred_at, s.url, s.deleted_at AS sub_deleted_at").
		Joins("JOIN outbox o ON o.id = d.outbox_id").
		Joins("JOIN webhook_subscriptions s ON s.id = d.subscription_id")
	q = s.apply(q, "o.tenant")
	for _, c := range []struct{ col, v string }{{"o.tenant", f.Tenant}, {"d.status", f.Status},
		{"o.operation_id", f.OperationID}, {"d.subscription_id", f.SubscriptionID}, {"d.outbox_id", f.OutboxID}} {
		if c.v != "" {
			q = q.Where(c.col+" = ?", c.v)
		}
	}
	var out []DeliveryRow
	if err := q.Order("d.created_at DESC, d.id DESC").Limit(f.Limit).Find(&out).Error; err != nil {
		return nil, unavailable("list webhook deliveries", err)
	}
	return out, nil
}

// WebhookAttempts returns the attempts of the given deliveries, in order, by delivery. Callers
// pass ids they listed within their scope.
func (l *Ledger) WebhookAttempts(ctx context.Context, deliveryIDs []string) (map[string][]WebhookAttempt, error) {
	out := map[string][]WebhookAttempt{}
	if len(deliveryIDs) == 0 {
		return out, nil
	}
	var list []WebhookAttempt
	if err := l.scope(ctx).Where("delivery_id IN ?", deliveryIDs).Order("id").Find(&list).Error; err != nil {
		return nil, unavailable("list webhook attempts", err)
	}
	for _, a := range list {
		out[a.DeliveryID] = append(out[a.DeliveryID], a)
	}
	return out, nil
}

// OutboxMessages returns the outbox messages about an operation, oldest first: what its
// changes announced.
func (l *Ledger) OutboxMessages(ctx context.Context, tenant, operationID string) ([]OutboxMessage, error) {
	var out []OutboxMessage
	err := l.scope(ctx).Where("tenant = ? AND operation_id = ?", tenant, operationID).Order("id").Find(&out).Error
	if err != nil {
		return nil, unavailable("list outbox messages", err)
	}
	return out, nil
}
