package models

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// AuditEntry is one line of the append-only, tamper-evident audit log (SPEC §8): who did or
// tried what, when, to which tenant and operation, with what outcome. Each entry stores the
// SHA-256 of its canonical form and its predecessor's, so an edit, a removal or a reordering
// anywhere breaks the chain from there on. No code path updates or deletes entries.
type AuditEntry struct {
	Seq         int64 `gorm:"primaryKey;autoIncrement:false"`
	At          time.Time
	Actor       string // user:<email>, api:<principal>, worker:<name>, cli, or anonymous:<ip>
	Action      string // e.g. review.approve, apikey.create, request.key_mismatch
	Tenant      string
	OperationID string
	Outcome     string // ok, refused, failed
	RequestID   string
	Detail      string // JSON object, "" for none
	PrevHash    string
	Hash        string
}

// TableName names the audit table.
func (AuditEntry) TableName() string { return "audit_log" }

// AuditInput is what a caller records; the ledger fills sequence, time and hashes.
type AuditInput struct {
	Actor       string
	Action      string
	Tenant      string
	OperationID string
	Outcome     string
	RequestID   string
	Detail      map[string]any
}

// GenesisHash is the predecessor of the first entry.
const GenesisHash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// auditLockID serialises appends across replicas, so the chain never forks.
const auditLockID = 0x1de3a0d1

// AuditRecord is the wire form of an audit entry, the one shape in which an entry leaves the
// ledger: hashed (without Hash), carried by exports (with it), and read back by the offline
// check of an export. Times are UTC with nanoseconds trimmed to what the database keeps
// (microseconds), so a record read back hashes as it did when written.
type AuditRecord struct {
	Seq         int64  `json:"seq"`
	At          string `json:"at"`
	Actor       string `json:"actor"`
	Action      string `json:"action"`
	Tenant      string `json:"tenant"`
	OperationID string `json:"operation_id"`
	Outcome     string `json:"outcome"`
	RequestID   string `json:"request_id"`
	// Detail is the exact JSON string that was hashed.
	Detail   string `json:"detail"`
	PrevHash string `json:"prev_hash"`
	// Hash is absent from the form that is hashed, and present everywhere else.
	Hash string `json:"hash,omitempty"`
}

// Record returns the wire form of e.
func (e *AuditEntry) Record() AuditRecord {
	return AuditRecord{Seq: e.Seq, At: e.At.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano), Actor: e.Actor,
		Action: e.Action, Tenant: e.Tenant, OperationID: e.OperationID, Outcome: e.Outcome, RequestID: e.RequestID,
		Detail: e.Detail, PrevHash: e.PrevHash, Hash: e.Hash}
}

// Entry returns the audit entry r describes.
func (r AuditRecord) Entry() (*AuditEntry, error) {
	at, err := time.Parse(time.RFC3339Nano, r.At)
	if err != nil {
		return nil, fmt.Errorf("audit entry %d: time %q: %w", r.Seq, r.At, err)
	}
	return &AuditEntry{Seq: r.Seq, At: at, Actor: r.Actor, Action: r.Action, Tenant: r.Tenant,
		OperationID: r.OperationID, Outcome: r.Outcome, RequestID: r.RequestID, Detail: r.Detail,
		PrevHash: r.PrevHash, Hash: r.Hash}, nil
}

// canonical is the exact byte form that is hashed: the record without its hash.
func (e *AuditEntry) canonical() []byte {
	r := e.Record()
	r.Hash = ""
	b, _ := json.Marshal(r) // strings and an integer: encoding cannot fail
	return b
}

// ComputeHash returns the hash an entry must carry.
func (e *AuditEntry) ComputeHash() string {
	sum := sha256.Sum256(e.canonical())
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Audit appends an entry in its own transaction.
func (l *Ledger) Audit(ctx context.Context, in AuditInput) (*AuditEntry, error) {
	var e *AuditEntry
	err := l.txn(ctx, "audit", func(tx *gorm.DB) ([]string, error) {
		var err error
		e, err = l.appendAudit(tx, l.clock(), in)
		return nil, err
	})
	return e, err
}

// appendAudit appends an entry inside tx, so that an action and its audit entry commit
// together. The advisory lock (PostgreSQL) or the single writer (SQLite) makes appends
// sequential: the entry read as the head is still the head when this one is inserted.
func (l *Ledger) appendAudit(tx *gorm.DB, now time.Time, in AuditInput) (*AuditEntry, error) {
	if l.dialect == Postgres {
		if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", auditLockID).Error; err != nil {
			return nil, err
		}
	}
	var head AuditEntry
	prev, seq := GenesisHash, int64(1)
	err := tx.Order("seq DESC").Limit(1).Take(&head).Error
	switch {
	case err == nil:
		prev, seq = head.Hash, head.Seq+1
	case !notFound(err):
		return nil, err
	}
	e := &AuditEntry{Seq: seq, At: now, Actor: in.Actor, Action: in.Action, Tenant: in.Tenant, OperationID: in.OperationID,
		Outcome: in.Outcome, RequestID: in.RequestID, PrevHash: prev}
	if len(in.Detail) > 0 {
		b, err := json.Marshal(in.Detail)
		if err != nil {
			return nil, err
		}
		e.Detail = string(b)
	}
	e.Hash = e.ComputeHash()
	return e, tx.Create(e).Error
}

// AuditHead returns the last entry's sequence and hash: the chain head exports carry.
func (l *Ledger) AuditHead(ctx context.Context) (int64, string, error) {
	var head AuditEntry
	err := l.scope(ctx).Order("seq DESC").Limit(1).Take(&head).Error
	if notFound(err) {
		return 0, GenesisHash, nil
	}
	if err != nil {
		return 0, "", unavailable("audit head", err)
	}
	return head.Seq, head.Hash, nil
}

// ChainBreak names the first entry that does not hold: edited, removed or reordered.
type ChainBreak struct {
	Seq    int64
	Reason string
}

func (b *ChainBreak) Error() string {
	return fmt.Sprintf("audit chain broken at entry %d: %s", b.Seq, b.Reason)
}

// VerifyAudit recomputes the whole chain in order, in batches, and returns the head it
// checked, or a *ChainBreak naming the first entry that fails.
func (l *Ledger) VerifyAudit(ctx context.Context) (int64, string, error) {
	prev, want := GenesisHash, int64(1)
	const batch = 1000
	for {
		var entries []AuditEntry
		if err := l.scope(ctx).Where("seq >= ?", want).Order("seq").Limit(batch).Find(&entries).Error; err != nil {
			return 0, "", unavailable("read audit log", err)
		}
		for i := range entries {
			e := &entries[i]
			if err := CheckLink(e, want, prev); err != nil {
				return 0, "", err
			}
			prev, want = e.Hash, e.Seq+1
		}
		if len(entries) < batch {
			return want - 1, prev, nil
		}
	}
}

// CheckLink checks one entry against its expected position and predecessor's hash.
func CheckLink(e *AuditEntry, wantSeq int64, prevHash string) error {
	switch {
	case e.Seq != wantSeq:
		return &ChainBreak{Seq: wantSeq, Reason: fmt.Sprintf("entry missing (next present is %d)", e.Seq)}
	case e.PrevHash != prevHash:
		return &ChainBreak{Seq: e.Seq, Reason: "its predecessor's hash does not match (an entry before it was edited, removed or reordered)"}
	case e.Hash != e.ComputeHash():
		return &ChainBreak{Seq: e.Seq, Reason: "its content does not match its hash (edited)"}
	}
	return nil
}
