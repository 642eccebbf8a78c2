package models

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// PruneWebhooks deletes up to limit webhook deliveries that ended (delivered or dead) before
// cutoff, with their attempts, and the outbox messages they leave without any delivery. It
// returns how many deliveries it deleted. Pending deliveries and their messages are never
// deleted, however old: the outbox is bounded by the retention, never by losing a message.
//
// A redelivery racing the prune is decided by the row: on PostgreSQL the prune locks the rows
// it takes (skipping those another replica's prune holds) and the redelivery's
// compare-and-set then finds nothing; on SQLite the single writer orders them.
func (l *Ledger) PruneWebhooks(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	n := 0
	err := l.txn(ctx, "prune webhook deliveries", func(tx *gorm.DB) ([]string, error) {
		q := tx.Model(&WebhookDelivery{}).Select("id, outbox_id").
			Where("ended_at IS NOT NULL AND ended_at < ? AND status IN ?", cutoff.UTC(), []string{DeliveryDelivered, DeliveryDead}).
			Order("ended_at").Limit(limit)
		if l.dialect == Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
		}
		var rows []struct{ ID, OutboxID string }
		if err := q.Find(&rows).Error; err != nil || len(rows) == 0 {
			return nil, err
		}
		ids, messages := make([]string, len(rows)), make([]string, len(rows))
		for i, r := range rows {
			ids[i], messages[i] = r.ID, r.OutboxID
		}
		if err := tx.Where("delivery_id IN ?", ids).Delete(&WebhookAttempt{}).Error; err != nil {
			return nil, err
		}
		res := tx.Where("id IN ?", ids).Delete(&WebhookDelivery{})
		if res.Error != nil {
			return nil, res.Error
		}
		n = int(res.RowsAffected)
		return nil, tx.Where("id IN ? AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.outbox_id = outbox.id)", messages).
			Delete(&OutboxMessage{}).Error
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
