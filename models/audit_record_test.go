package models_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixedEntry is an audit entry whose hash was computed by the ledger before its wire form was
// named (AuditRecord): chains already in databases must keep verifying.
func fixedEntry() *models.AuditEntry {
	return &models.AuditEntry{Seq: 42, At: time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.FixedZone("CET", 3600)),
		Actor: "user:ada@example.com", Action: "review.approve", Tenant: "acme", OperationID: "op_01JD7X4T6V8Q0W9M3K5N2P1R8S",
		Outcome: "ok", RequestID: "req-1", Detail: `{"reason":"checked with the customer"}`, PrevHash: models.GenesisHash}
}

// TestAuditRecordIsTheHashedForm: the record's JSON without its hash is what is hashed, so an
// entry read back from an export recomputes offline to the hash it had in the chain.
func TestAuditRecordIsTheHashedForm(t *testing.T) {
	t.Parallel()
	e := fixedEntry()
	e.Hash = e.ComputeHash()
	assert.Equal(t, "sha256:71abecc190582207bd0d1942eb95d3619daa92e38dbdaa4f38d232474c09cc49", e.Hash,
		"the hash of an entry is what it was before the wire form was named")

	r := e.Record()
	assert.Equal(t, "2026-11-29T09:00:00.123456Z", r.At, "UTC, microseconds: as the database keeps it")
	b, err := json.Marshal(r)
	require.NoError(t, err)
	assert.JSONEq(t, `{"seq":42,"at":"2026-11-29T09:00:00.123456Z","actor":"user:ada@example.com","action":"review.approve",
		"tenant":"acme","operation_id":"op_01JD7X4T6V8Q0W9M3K5N2P1R8S","outcome":"ok","request_id":"req-1",
		"detail":"{\"reason\":\"checked with the customer\"}","prev_hash":"`+models.GenesisHash+`","hash":"`+e.Hash+`"}`, string(b))

	var back models.AuditRecord
	require.NoError(t, json.Unmarshal(b, &back))
	got, err := back.Entry()
	require.NoError(t, err)
	assert.Equal(t, e.Hash, got.ComputeHash(), "read back, it recomputes to its hash")
	assert.Equal(t, r, got.Record(), "and renders to the same record")

	got.Detail = `{"reason":"edited"}`
	assert.NotEqual(t, e.Hash, got.ComputeHash(), "an edit changes the hash")
	_, err = models.AuditRecord{Seq: 7, At: "yesterday"}.Entry()
	assert.ErrorContains(t, err, "audit entry 7")
}
