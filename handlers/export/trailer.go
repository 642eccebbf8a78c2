package export

import (
	"encoding/json"

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
	ExportSHA256 string             `json:"export_sha256"`
	AuditEntry   models.AuditRecord `json:"audit_entry"`
	// KeyID names the audit signing key whose signature of this trailer follows it; "" for an
	// export made while the ledger had no signing key.
	KeyID string `json:"key_id"`
}

// Signature is the line after the trailer: the Ed25519 signature (base64) of the trailer line,
// byte for byte with its newline, by the key the trailer names. Both are "" in an unsigned
// export.
type Signature struct {
	KeyID     string `json:"key_id"`
	Signature string `json:"signature"`
}

// ChainHead names an entry of the audit chain by position and hash.
type ChainHead struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// detail is the detail of an export's audit entry.
type detail struct {
	Filter     json.RawMessage `json:"filter"`
	Format     Format          `json:"format"`
	Operations int64           `json:"operations"`
	Events     int64           `json:"events"`
	// Entries, FirstSeq and LastSeq describe an export of the audit log (ActionAuditExported).
	Entries      int64  `json:"entries,omitempty"`
	FirstSeq     int64  `json:"first_seq,omitempty"`
	LastSeq      int64  `json:"last_seq,omitempty"`
	ExportSHA256 string `json:"export_sha256"`
	Error        string `json:"error,omitempty"`
}

// newTrailer builds the trailer of an export anchored by entry.
func newTrailer(filter json.RawMessage, sum string, entry *models.AuditEntry, keyID string) Trailer {
	return Trailer{ChainHead: ChainHead{Seq: entry.Seq, Hash: entry.Hash}, Filter: filter, ExportSHA256: sum,
		AuditEntry: entry.Record(), KeyID: keyID}
}
