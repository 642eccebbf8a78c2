package models_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixedEntry is an audit entry whose legacy hash was computed by the ledger before entries were
// hashed in the canonical form: chains already in databases must keep verifying.
func fixedEntry() *models.AuditEntry {
	return &models.AuditEntry{Seq: 42, At: time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.FixedZone("CET", 3600)),
		Actor: "user:ada@example.com", Action: "review.approve", Tenant: "acme", OperationID: "op_01JD7X4T6V8Q0W9M3K5N2P1R8S",
		Outcome: "ok", RequestID: "req-1", Detail: `{"reason":"checked with the customer"}`, PrevHash: models.GenesisHash}
}

// TestAuditLegacyHashKeepsVerifying: an entry carrying a legacy-form hash recomputes to it,
// through its wire form too, and an edit changes it.
func TestAuditLegacyHashKeepsVerifying(t *testing.T) {
	t.Parallel()
	const legacy = "sha256:71abecc190582207bd0d1942eb95d3619daa92e38dbdaa4f38d232474c09cc49"
	e := fixedEntry()
	e.Hash = legacy
	assert.True(t, e.Legacy())
	assert.Equal(t, legacy, e.ComputeHash(), "the legacy hash of an entry is what it always was")

	b, err := json.Marshal(e.Record())
	require.NoError(t, err)
	var back models.AuditRecord
	require.NoError(t, json.Unmarshal(b, &back))
	got, err := back.Entry()
	require.NoError(t, err)
	assert.Equal(t, legacy, got.ComputeHash(), "read back from its wire form, it recomputes to its hash")
	got.Detail = `{"reason":"edited"}`
	assert.NotEqual(t, legacy, got.ComputeHash(), "an edit changes the hash")
}

// TestAuditRecordCanonicalHash pins the canonical form against a known answer computed outside
// Go (python3: json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)),
// with characters Go's JSON encoder would escape and RFC 8785 does not.
func TestAuditRecordCanonicalHash(t *testing.T) {
	t.Parallel()
	e := fixedEntry()
	e.Detail = `{"reason":"<checked> & ok"}`
	assert.Equal(t, `{"event_id":"42","event_type":"review.approve","extensions":{"idemgate":{"detail":"{\"reason\":\"<checked> & ok\"}",`+
		`"operation_id":"op_01JD7X4T6V8Q0W9M3K5N2P1R8S","request_id":"req-1","tenant":"acme"}},"occurred_at":"2026-11-29T09:00:00.123456Z",`+
		`"outcome":"allowed","previous_hash":null,"principal_id":"user:ada@example.com","tool_name":null}`, string(e.Canonical()))
	e.Hash = e.ComputeHash()
	assert.Equal(t, "f1544af0fa787d3b216cb229872a6ea5acddf53655017627ec016f31e5f9567a", e.Hash)
	assert.False(t, e.Legacy())

	r := e.Record()
	assert.Equal(t, "2026-11-29T09:00:00.123456Z", r.OccurredAt, "UTC, microseconds: as the database keeps it")
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var back models.AuditRecord
	require.NoError(t, json.Unmarshal(b, &back))
	got, err := back.Entry()
	require.NoError(t, err)
	assert.Equal(t, e.Hash, got.ComputeHash(), "read back, it recomputes to its hash")
	assert.Equal(t, r, got.Record(), "and renders to the same record")

	for _, c := range []struct{ outcome, sep string }{{"ok", "allowed"}, {"refused", "denied"}, {"failed", "error"}} {
		e.Outcome = c.outcome
		r := e.Record()
		assert.Equal(t, c.sep, r.Outcome)
		got, err := r.Entry()
		require.NoError(t, err)
		assert.Equal(t, c.outcome, got.Outcome, "the outcome maps back")
	}
	e.PrevHash = "ab"
	assert.Equal(t, "ab", *e.Record().PreviousHash, "only the first entry has a null previous_hash")

	_, err = models.AuditRecord{EventID: "7", OccurredAt: "yesterday", Outcome: "allowed"}.Entry()
	assert.ErrorContains(t, err, "audit entry 7")
	_, err = models.AuditRecord{EventID: "07", OccurredAt: r.OccurredAt, Outcome: "allowed"}.Entry()
	assert.ErrorContains(t, err, "not a sequence number")
}
