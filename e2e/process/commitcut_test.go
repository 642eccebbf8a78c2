package process_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The worst moment of a failover for an answer (docs/API.md, 503 ledger-unavailable): the
// connection breaks after the submit's COMMIT reached the server and before its answer came
// back. The operation is recorded, and the gateway cannot know it. Its 503 must not say that
// nothing was recorded; the agent's retry with the same key finds the operation and replays
// it, and the effect happens once.
func TestCommitCutOffInFlightAnswers503ThatMayBeRecordedAndTheRetryReplays(t *testing.T) {
	dsn := testdb.DSN(t, models.Postgres)
	host, port := proctest.HostPort(dsn)
	cutter, err := proctest.NewCommitCutter(t, host, port)
	require.NoError(t, err)
	s := newStackOn(t, cutter.DSN(dsn), stackOptions{})
	a := s.serve(t, "A")
	const key = "order-7:create-ticket"

	cutter.CutNextCommitOf(`INSERT INTO operations (`)
	r := s.mustPost(t, a.URL, key, "tickets.create", ticketParams, map[string]string{"Prefer": "wait=5"})
	require.Equal(t, 1, cutter.Cuts(), "the submit's COMMIT was cut: %d %s", r.Status, r.Body)
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	p := r.obj(t)
	assert.Equal(t, "/problems/ledger-unavailable", p["type"])
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	detail, _ := p["detail"].(string)
	assert.Contains(t, detail, "may have been recorded")
	assert.Contains(t, detail, "same Idempotency-Key")
	assert.NotContains(t, detail, "nothing was recorded")
	t.Logf("503 detail: %s", detail)

	// The premise: the COMMIT did commit.
	var ops []models.Operation
	require.NoError(t, s.ledger.DB().Where("tenant = ? AND op_key = ?", s.tenant, key).Find(&ops).Error)
	require.Len(t, ops, 1, "the cut-off commit recorded the operation")

	// The agent retries with the same key, as the detail says, until the operation is settled.
	var retry reply
	eventually(t, 30*time.Second, "the retry to replay the settled operation", func() (bool, string) {
		retry = s.mustPost(t, a.URL, key, "tickets.create", ticketParams, map[string]string{"Prefer": "wait=5"})
		return retry.Status == http.StatusOK && retry.obj(t)["state"] == "SUCCEEDED", string(retry.Body)
	})
	assert.Equal(t, "true", retry.Header.Get("Idempotent-Replayed"), "the retry found the recorded operation")
	assert.Equal(t, ops[0].ID, retry.id(), "one operation")
	assert.Equal(t, 1, s.sb.Committed("tickets"), "one effect")
	assert.Equal(t, 1, s.count("/tickets", http.MethodPost), "one request downstream")
	require.NoError(t, s.ledger.DB().Where("tenant = ?", s.tenant).Find(&ops).Error)
	assert.Len(t, ops, 1)
}
