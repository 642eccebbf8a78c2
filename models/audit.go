package models

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/models/fingerprint"

	"gorm.io/gorm"
)

// AuditEntry is one line of the append-only, tamper-evident audit log (docs/AUDIT.md): who did or
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

// Audit entries are hashed in one of two forms, told apart by the hash itself:
//
//   - the canonical form (every entry written by this version on): "event_hash" is the bare hex
//     SHA-256 of the RFC 8785 (JCS) canonical JSON of the entry's AuditRecord without its
//     event_hash, so an auditor recomputes it with sorted-key JSON and sha256sum, no idemgate
//     code (docs/AUDIT.md);
//   - the legacy form (entries written before schema step 21): "sha256:" + the hex SHA-256 of
//     Go's encoding of the fields in declaration order. Those entries are never rehashed: the
//     chain and the checkpoints already vouch for their hashes.
//
// A chain may hold legacy entries and then canonical ones, never the other way round.
const legacyHashPrefix = "sha256:"

// AuditRecord is the wire form of an audit entry, the one shape in which an entry leaves the
// ledger: hashed (without EventHash), carried by exports (with it), and read back by the
// offline checks. It takes the shape of MCP's tamper-evident audit record draft (SEP-3004):
// the core fields under their names there, idemgate's own in one extension. Every value is a
// string or null, so its canonical JSON has a single spelling in every language.
type AuditRecord struct {
	// EventID is the entry's sequence number in decimal: unique, and without gaps in a chain.
	EventID string `json:"event_id"`
	// OccurredAt is UTC with six fractional digits: what the database keeps (microseconds).
	OccurredAt  string `json:"occurred_at"`
	PrincipalID string `json:"principal_id"` // the actor
	EventType   string `json:"event_type"`   // the action
	// ToolName is always null: an entry names an operation (in the extension), not a tool.
	ToolName   *string         `json:"tool_name"`
	Outcome    string          `json:"outcome"` // allowed, denied or error (SEP-3004's words for ok, refused, failed)
	Extensions AuditExtensions `json:"extensions"`
	// PreviousHash is the predecessor's event_hash, null for the first entry of the chain.
	PreviousHash *string `json:"previous_hash"`
	// EventHash is absent from the form that is hashed, and present everywhere else.
	EventHash string `json:"event_hash,omitempty"`
}

// AuditExtensions holds the record's extensions, keyed by type as SEP-3004 keys them.
type AuditExtensions struct {
	Idemgate AuditExtension `json:"idemgate"`
}

// AuditExtension is what idemgate records beyond SEP-3004's core.
type AuditExtension struct {
	Tenant      string `json:"tenant"`
	OperationID string `json:"operation_id"`
	RequestID   string `json:"request_id"`
	// Detail is the entry's detail, a JSON object, as the exact text that was recorded.
	Detail string `json:"detail"`
	// Outcome is idemgate's own outcome, only when SEP-3004 has no word for it.
	Outcome string `json:"outcome,omitempty"`
}

// sepOutcomes maps idemgate's outcomes to SEP-3004's dispositions, one to one.
var sepOutcomes = map[string]string{OutcomeOK: "allowed", OutcomeRefused: "denied", OutcomeFailed: "error"}

// auditTimeLayout writes every entry time with the same number of digits, so that the text
// hashed does not depend on how many trailing zeros a time has.
const auditTimeLayout = "2006-01-02T15:04:05.000000Z"

// Record returns the wire form of e.
func (e *AuditEntry) Record() AuditRecord {
	r := AuditRecord{EventID: strconv.FormatInt(e.Seq, 10), OccurredAt: e.At.UTC().Truncate(time.Microsecond).Format(auditTimeLayout),
		PrincipalID: e.Actor, EventType: e.Action, Outcome: sepOutcomes[e.Outcome],
		Extensions: AuditExtensions{Idemgate: AuditExtension{Tenant: e.Tenant, OperationID: e.OperationID, RequestID: e.RequestID, Detail: e.Detail}},
		EventHash:  e.Hash}
	if r.Outcome == "" {
		r.Outcome, r.Extensions.Idemgate.Outcome = "error", e.Outcome
	}
	if e.PrevHash != GenesisHash {
		prev := e.PrevHash
		r.PreviousHash = &prev
	}
	return r
}

// Entry returns the audit entry r describes.
func (r AuditRecord) Entry() (*AuditEntry, error) {
	seq, err := strconv.ParseInt(r.EventID, 10, 64)
	if err != nil || seq < 1 || strconv.FormatInt(seq, 10) != r.EventID {
		return nil, fmt.Errorf("audit entry %q: event_id is not a sequence number", r.EventID)
	}
	at, err := time.Parse(auditTimeLayout, r.OccurredAt)
	if err != nil {
		return nil, fmt.Errorf("audit entry %d: time %q: %w", seq, r.OccurredAt, err)
	}
	x := r.Extensions.Idemgate
	e := &AuditEntry{Seq: seq, At: at, Actor: r.PrincipalID, Action: r.EventType, Tenant: x.Tenant, OperationID: x.OperationID,
		Outcome: x.Outcome, RequestID: x.RequestID, Detail: x.Detail, PrevHash: GenesisHash, Hash: r.EventHash}
	if e.Outcome == "" {
		for ours, theirs := range sepOutcomes {
			if theirs == r.Outcome {
				e.Outcome = ours
			}
		}
	}
	if e.Outcome == "" {
		return nil, fmt.Errorf("audit entry %d: unknown outcome %q", seq, r.Outcome)
	}
	if r.PreviousHash != nil {
		e.PrevHash = *r.PreviousHash
	}
	return e, nil
}

// legacyRecord is the form legacy entries were hashed in: these fields, in this order, as Go's
// encoding/json writes them.
type legacyRecord struct {
	Seq         int64  `json:"seq"`
	At          string `json:"at"`
	Actor       string `json:"actor"`
	Action      string `json:"action"`
	Tenant      string `json:"tenant"`
	OperationID string `json:"operation_id"`
	Outcome     string `json:"outcome"`
	RequestID   string `json:"request_id"`
	Detail      string `json:"detail"`
	PrevHash    string `json:"prev_hash"`
}

// Legacy reports whether e carries a legacy-form hash (see legacyHashPrefix).
func (e *AuditEntry) Legacy() bool { return strings.HasPrefix(e.Hash, legacyHashPrefix) }

// Canonical returns the exact bytes whose SHA-256 is e's hash in the canonical form: the JCS
// canonical JSON of its record without the hash.
func (e *AuditEntry) Canonical() []byte {
	r := e.Record()
	r.EventHash = ""
	return canonicalJSON(r)
}

// canonicalJSON returns the RFC 8785 canonical JSON of v, a value of strings, nulls and
// objects, which encoding cannot fail on. fingerprint.Normalize sorts the members and
// re-escapes the strings as RFC 8785 does (encoding/json escapes <, > and & besides).
func canonicalJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err == nil {
		b, err = fingerprint.Normalize(b)
	}
	if err != nil {
		panic(fmt.Sprintf("ledger: canonical JSON of %T: %v", v, err)) // only strings: cannot happen
	}
	return b
}

// ComputeHash returns the hash an entry must carry: in the legacy form for an entry that
// carries a legacy hash, in the canonical form for every other (and every new) entry.
func (e *AuditEntry) ComputeHash() string {
	if e.Legacy() {
		b, _ := json.Marshal(legacyRecord{Seq: e.Seq, At: e.At.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano), Actor: e.Actor,
			Action: e.Action, Tenant: e.Tenant, OperationID: e.OperationID, Outcome: e.Outcome, RequestID: e.RequestID,
			Detail: e.Detail, PrevHash: e.PrevHash}) // strings and an integer: encoding cannot fail
		sum := sha256.Sum256(b)
		return legacyHashPrefix + hex.EncodeToString(sum[:])
	}
	sum := sha256.Sum256(e.Canonical())
	return hex.EncodeToString(sum[:])
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
	if _, ok := sepOutcomes[in.Outcome]; !ok {
		return nil, fmt.Errorf("ledger: audit %s: unknown outcome %q", in.Action, in.Outcome)
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
	case e.Legacy() && !strings.HasPrefix(prevHash, legacyHashPrefix):
		return &ChainBreak{Seq: e.Seq, Reason: "it carries a legacy-form hash after entries in the canonical form (rewritten)"}
	case e.Hash != e.ComputeHash():
		return &ChainBreak{Seq: e.Seq, Reason: "its content does not match its hash (edited)"}
	}
	return nil
}

// AuditSeqRange returns the sequence numbers that bound the entries made in [from, to) (a zero
// time does not bound): from the first entry at or after from to the last one before to, every
// entry between included, so that an export of the range is one unbroken piece of the chain
// even where replicas' clocks disagree by a little. Both are 0 when no entry is in the range.
func (l *Ledger) AuditSeqRange(ctx context.Context, from, to time.Time) (first, last int64, err error) {
	bound := func(agg, cond string, t time.Time) (sql.NullInt64, error) {
		var v sql.NullInt64
		q := l.scope(ctx).Model(&AuditEntry{}).Select(agg)
		if !t.IsZero() {
			q = q.Where(cond, t)
		}
		if err := q.Row().Scan(&v); err != nil {
			return v, unavailable("audit range", err)
		}
		return v, nil
	}
	lo, err := bound("MIN(seq)", "at >= ?", from)
	if err != nil {
		return 0, 0, err
	}
	hi, err := bound("MAX(seq)", "at < ?", to)
	if err != nil {
		return 0, 0, err
	}
	if !lo.Valid || !hi.Valid || lo.Int64 > hi.Int64 {
		return 0, 0, nil
	}
	return lo.Int64, hi.Int64, nil
}

// AuditPage returns up to limit entries after sequence number after and up to last, in
// order: one page of an export of the log, read by its primary key.
func (l *Ledger) AuditPage(ctx context.Context, after, last int64, limit int) ([]AuditEntry, error) {
	var page []AuditEntry
	err := l.scope(ctx).Where("seq > ? AND seq <= ?", after, last).Order("seq").Limit(limit).Find(&page).Error
	if err != nil {
		return nil, unavailable("read audit log", err)
	}
	return page, nil
}
