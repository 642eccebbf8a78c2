package export

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/models"
)

// Trailer is what closes an export: the audit chain head the export was anchored at, the filter
// used, the digest of everything written before it, and the export's own audit entry in full.
// NDJSON writes it as the last line; CSV carries the same facts in its trailer row.
type Trailer struct {
	ChainHead ChainHead `json:"chain_head"`
	// Filter is the filter used, as recorded in the audit entry's detail.
	Filter json.RawMessage `json:"filter"`
	// ExportSHA256 is the hex SHA-256 of every byte written before the trailer.
	ExportSHA256 string `json:"export_sha256"`
	AuditEntry   Entry  `json:"audit_entry"`
}

// ChainHead names an entry of the audit chain by position and hash.
type ChainHead struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// Entry is a models.AuditEntry with every field, in JSON, so its hash can be recomputed offline.
// Detail stays the exact string that was hashed.
type Entry struct {
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
	Hash        string `json:"hash"`
}

// entryOf renders an audit entry; its time is written the way the hash reads it.
func entryOf(e *models.AuditEntry) Entry {
	return Entry{Seq: e.Seq, At: e.At.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano), Actor: e.Actor,
		Action: e.Action, Tenant: e.Tenant, OperationID: e.OperationID, Outcome: e.Outcome, RequestID: e.RequestID,
		Detail: e.Detail, PrevHash: e.PrevHash, Hash: e.Hash}
}

// Model returns the audit entry e describes.
func (e Entry) Model() (*models.AuditEntry, error) {
	at, err := time.Parse(time.RFC3339Nano, e.At)
	if err != nil {
		return nil, fmt.Errorf("audit entry %d: time %q: %w", e.Seq, e.At, err)
	}
	return &models.AuditEntry{Seq: e.Seq, At: at, Actor: e.Actor, Action: e.Action, Tenant: e.Tenant,
		OperationID: e.OperationID, Outcome: e.Outcome, RequestID: e.RequestID, Detail: e.Detail,
		PrevHash: e.PrevHash, Hash: e.Hash}, nil
}

// detail is the detail of an export's audit entry.
type detail struct {
	Filter       json.RawMessage `json:"filter"`
	Format       Format          `json:"format"`
	Operations   int64           `json:"operations"`
	Events       int64           `json:"events"`
	ExportSHA256 string          `json:"export_sha256"`
	Error        string          `json:"error,omitempty"`
}

// newTrailer builds the trailer of an export anchored by entry.
func newTrailer(filter json.RawMessage, sum string, entry *models.AuditEntry) Trailer {
	return Trailer{ChainHead: ChainHead{Seq: entry.Seq, Hash: entry.Hash}, Filter: filter, ExportSHA256: sum,
		AuditEntry: entryOf(entry)}
}
