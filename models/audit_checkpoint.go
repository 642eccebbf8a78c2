package models

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// AuditCheckpointSetting names the setting that keeps the last verified chain head.
const AuditCheckpointSetting = "audit.last_verified"

// AuditCheckpoint is a chain head that a verification found sound. Kept between runs, it lets
// the next verification notice what a chain recomputed from scratch cannot: a tail that was cut
// off, or a chain rewritten with fresh hashes.
type AuditCheckpoint struct {
	Seq  int64     `json:"seq"`
	Hash string    `json:"hash"`
	At   time.Time `json:"at"`
}

// LastAuditVerification returns the last verified head; ok is false when the chain was never
// verified.
func (l *Ledger) LastAuditVerification(ctx context.Context) (cp AuditCheckpoint, ok bool, err error) {
	raw, err := l.Setting(ctx, AuditCheckpointSetting)
	if err != nil || raw == "" {
		return AuditCheckpoint{}, false, err
	}
	if err := json.Unmarshal([]byte(raw), &cp); err != nil {
		return AuditCheckpoint{}, false, fmt.Errorf("ledger: setting %s: %w", AuditCheckpointSetting, err)
	}
	return cp, true, nil
}

// AuditEntryAt returns the entry with sequence number seq, or CodeNotFound.
func (l *Ledger) AuditEntryAt(ctx context.Context, seq int64) (*AuditEntry, error) {
	var e AuditEntry
	err := l.scope(ctx).Where("seq = ?", seq).Take(&e).Error
	if notFound(err) {
		return nil, errorf(CodeNotFound, "audit entry %d not found", seq)
	}
	if err != nil {
		return nil, unavailable(fmt.Sprintf("audit entry %d", seq), err)
	}
	return &e, nil
}

// VerifyAuditChain recomputes the whole chain (VerifyAudit), then checks that it still holds
// the head verified last time: that entry must still exist with the same hash. A missing one
// means the tail was cut off; a different hash means the chain was rewritten up to there. Either
// is a *ChainBreak naming the first entry concerned. A sound chain's head is recorded as the new
// checkpoint and returned.
func (l *Ledger) VerifyAuditChain(ctx context.Context) (AuditCheckpoint, error) {
	seq, head, err := l.VerifyAudit(ctx)
	if err != nil {
		return AuditCheckpoint{}, err
	}
	prev, ok, err := l.LastAuditVerification(ctx)
	if err != nil {
		return AuditCheckpoint{}, err
	}
	if ok {
		if err := l.checkCheckpoint(ctx, prev, seq); err != nil {
			return AuditCheckpoint{}, err
		}
	}
	cp := AuditCheckpoint{Seq: seq, Hash: head, At: l.clock()}
	return cp, l.recordCheckpoint(ctx, cp)
}

// checkCheckpoint checks that the previously verified head prev is still in a chain now ending
// at seq.
func (l *Ledger) checkCheckpoint(ctx context.Context, prev AuditCheckpoint, seq int64) error {
	when := prev.At.UTC().Format(time.RFC3339)
	if prev.Seq > seq {
		return &ChainBreak{Seq: seq + 1, Reason: fmt.Sprintf(
			"entry missing: the chain now ends at %d, but entries up to %d were verified at %s (tail removed)", seq, prev.Seq, when)}
	}
	if prev.Seq == 0 {
		return nil
	}
	e, err := l.AuditEntryAt(ctx, prev.Seq)
	if err != nil {
		return err
	}
	if e.Hash != prev.Hash {
		return &ChainBreak{Seq: prev.Seq, Reason: fmt.Sprintf(
			"its hash is %s, but %s was verified at %s (the chain was rewritten up to here)", e.Hash, prev.Hash, when)}
	}
	return nil
}

// recordCheckpoint stores cp unless a later head is already recorded: chains only grow, so a
// slower concurrent verification never moves the checkpoint back.
func (l *Ledger) recordCheckpoint(ctx context.Context, cp AuditCheckpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("ledger: encode audit checkpoint: %w", err)
	}
	err = l.scope(ctx).Transaction(func(tx *gorm.DB) error {
		var raw []string
		if err := tx.Table("settings").Where("name = ?", AuditCheckpointSetting).Pluck("value", &raw).Error; err != nil {
			return err
		}
		var stored AuditCheckpoint
		if len(raw) > 0 && json.Unmarshal([]byte(raw[0]), &stored) == nil && stored.Seq > cp.Seq {
			return nil
		}
		return tx.Table("settings").Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "name"}},
			DoUpdates: clause.AssignmentColumns([]string{"value"}),
		}).Create(map[string]any{"name": AuditCheckpointSetting, "value": string(b)}).Error
	})
	if err != nil {
		return unavailable("record audit checkpoint", err)
	}
	return nil
}
