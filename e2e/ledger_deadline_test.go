package e2e_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSilentLedgerAnswers503WithinTheDeadline (issue 48 item 2): PostgreSQL goes silent (a
// partition: connections open, nothing answers). A new operation is answered 503
// ledger-unavailable with Retry-After, ended by the ledger deadline rather than by the
// network's minutes; /readyz answers 503; once the network heals, the retry with the same key
// is served.
func TestSilentLedgerAnswers503WithinTheDeadline(t *testing.T) {
	t.Parallel()
	dsn := testdb.DSN(t, models.Postgres)
	direct, _, err := models.Open(context.Background(), dsn)
	require.NoError(t, err)
	require.NoError(t, models.Migrate(context.Background(), direct, models.Postgres))
	if sqlDB, err := direct.DB(); err == nil {
		sqlDB.Close()
	}
	hole, via := testdb.NewBlackhole(t, dsn)
	db, _, err := models.Open(context.Background(), via)
	require.NoError(t, err)
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	g := gatewaytest.StartWith(t, models.Postgres, gatewaytest.Options{DB: db})
	const params = `{"subject":"printer on fire"}`
	require.Equal(t, http.StatusCreated, g.Submit(t, "warm", "tickets.create", params, nil).Status)

	hole.Silence()
	t.Cleanup(hole.Heal)
	r := g.Submit(t, "during-the-partition", "tickets.create", params, nil)
	p := requireProblem(t, g, r, http.StatusServiceUnavailable, "ledger-unavailable")
	assert.NotEmpty(t, r.Header.Get("Retry-After"), "the agent is told when to come back: %v", p)
	ready := g.Do(t, http.MethodGet, "/readyz", "", nil, "")
	assert.Equal(t, http.StatusServiceUnavailable, ready.Status)

	hole.Heal()
	gatewaytest.Eventually(t, 30*time.Second, "ready again", func() bool {
		return g.Do(t, http.MethodGet, "/readyz", "", nil, "").Status == http.StatusOK
	})
	again := g.Submit(t, "during-the-partition", "tickets.create", params, nil)
	assert.Contains(t, []int{http.StatusOK, http.StatusCreated}, again.Status, "body: %s", again.Body)
}
