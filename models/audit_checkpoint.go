package models

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// AuditCheckpointSetting names the setting that keeps the last verified chain head.
const AuditCheckpointSetting = "audit.last_verified"

// AuditCheckpoint is a chain head that a verification found sound. Kept between runs, it lets
// the next verification notice what a chain recomputed from scratch cannot: a tail that was cut
// off, or a chain rewritten with fresh hashes.
//
// Once an audit signing key exists, every checkpoint is signed (Statement is what is signed):
// someone who can write the database but has not the key cannot record a checkpoint that a
// rewritten chain would agree with.
type AuditCheckpoint struct {
	Seq  int64     `json:"seq"`
	Hash string    `json:"hash"`
	At   time.Time `json:"at"`
	// KeyID and Signature (base64) sign Statement; both empty when no key existed.
	KeyID     string `json:"key_id,omitempty"`
	Signature string `json:"signature,omitempty"`
}

// checkpointStatement is what a checkpoint's signature covers, as canonical JSON.
type checkpointStatement struct {
	Type  string `json:"type"`
	Seq   string `json:"seq"`
	Hash  string `json:"hash"`
	At    string `json:"at"`
	KeyID string `json:"key_id"`
}

// CheckpointType names the statement a checkpoint's signature covers.
const CheckpointType = "idemgate.audit.checkpoint"

// Statement returns the exact bytes cp's signature covers: the RFC 8785 canonical JSON of its
// type, sequence number (in decimal), head hash, time and key id (docs/AUDIT.md).
func (cp AuditCheckpoint) Statement() []byte {
	return canonicalJSON(checkpointStatement{Type: CheckpointType, Seq: strconv.FormatInt(cp.Seq, 10), Hash: cp.Hash,
		At: cp.At.UTC().Truncate(time.Microsecond).Format(auditTimeLayout), KeyID: cp.KeyID})
}

// VerifySignature checks cp's signature against the published keys.
func (cp AuditCheckpoint) VerifySignature(keys AuditKeySet) error {
	if cp.Signature == "" {
		return errors.New("the checkpoint is not signed")
	}
	sig, err := base64.StdEncoding.DecodeString(cp.Signature)
	if err != nil {
		return fmt.Errorf("the checkpoint's signature is not base64: %w", err)
	}
	return keys.Verify(cp.KeyID, cp.At, cp.Statement(), sig)
}

// signStoredCheckpoint signs the stored checkpoint, if there is one without a signature, with
// a key made at now: the head it names is re-attested at now, the moment the key appears.
func signStoredCheckpoint(tx *gorm.DB, keyID string, priv ed25519.PrivateKey, now time.Time) error {
	var raw []string
	if err := tx.Table("settings").Where("name = ?", AuditCheckpointSetting).Pluck("value", &raw).Error; err != nil {
		return err
	}
	var cp AuditCheckpoint
	if len(raw) == 0 || json.Unmarshal([]byte(raw[0]), &cp) != nil || cp.Signature != "" {
		return nil
	}
	cp.At, cp.KeyID = now, keyID
	cp.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(priv, cp.Statement()))
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	return tx.Table("settings").Where("name = ? AND value = ?", AuditCheckpointSetting, raw[0]).Update("value", string(b)).Error
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
	keys, err := l.AuditKeys(ctx)
	if err != nil {
		return AuditCheckpoint{}, err
	}
	if ok {
		if err := l.checkCheckpoint(ctx, prev, seq); err != nil {
			return AuditCheckpoint{}, err
		}
		if len(keys.Keys) > 0 {
			if err := prev.VerifySignature(keys); err != nil {
				return AuditCheckpoint{}, &ChainBreak{Seq: prev.Seq, Reason: fmt.Sprintf(
					"the head verified last (entry %d) has no valid signature, though an audit signing key exists (the checkpoint was edited): %v", prev.Seq, err)}
			}
		}
	}
	cp := AuditCheckpoint{Seq: seq, Hash: head, At: l.clock()}
	if len(keys.Keys) > 0 {
		if err := l.signCheckpoint(ctx, &cp); err != nil {
			return AuditCheckpoint{}, fmt.Errorf("the audit chain holds up to entry %d, but its checkpoint cannot be signed: %w", seq, err)
		}
	}
	return cp, l.recordCheckpoint(ctx, cp)
}

// signCheckpoint signs cp with the key valid at its time.
func (l *Ledger) signCheckpoint(ctx context.Context, cp *AuditCheckpoint) error {
	s, err := l.openAuditKey(ctx, cp.At)
	if err != nil {
		return err
	}
	cp.KeyID = s.keyID
	cp.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, cp.Statement()))
	return nil
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
		if cp.Signature == "" {
			// A key made since this verification began signed the stored checkpoint: an
			// unsigned one written over it would read as an edit at the next verification.
			var keys int64
			if err := tx.Model(&auditKeyRow{}).Count(&keys).Error; err != nil || keys > 0 {
				return err
			}
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
