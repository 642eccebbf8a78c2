package e2e_test

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRestoredLedgerRunsNothingTwice is the backup drill of issue 15: take a pg_dump of the
// ledger, run operations, restore the dump (the ledger forgets them), and let the agent retry
// the same keys. The retries create the operations anew, but send the downstream keys the
// downstream saw before (docs/STATES.md): the ticket service, which honours keys, makes no second
// ticket; the refund service, which ignores keys, is asked first by the demo catalogue's
// look-up by downstream key and the refund found there is the result, so nobody is paid
// twice. The email service, with neither key support nor a look-up, sends again: no gateway
// can know what a forgotten request did there. With the operation id as downstream key (as
// before downstream keys were derived), this test fails: two tickets, two refunds.
func TestRestoredLedgerRunsNothingTwice(t *testing.T) {
	t.Parallel()
	d := models.Postgres
	for _, tool := range []string{"pg_dump", "psql"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to back up and restore PostgreSQL: %v", tool, err)
		}
	}
	g := gatewaytest.StartWith(t, d, gatewaytest.Options{Catalog: func(sandboxURL string) (*catalog.Catalog, error) {
		return catalog.Demo(sandboxURL), nil
	}})
	var schema string
	require.NoError(t, g.Ledger.DB().Raw("SELECT current_schema()").Scan(&schema).Error)
	require.Regexp(t, `^t_[0-9a-f]+$`, schema, "the test's own schema")
	admin := testdb.AdminDSN()

	// The backup, taken before the operations run (the tenant and its API key are in it).
	dump := filepath.Join(t.TempDir(), "ledger.sql")
	out, err := exec.Command("pg_dump", "--dbname="+admin, "--schema="+schema, "--no-owner", "--file="+dump).CombinedOutput()
	require.NoError(t, err, "pg_dump: %s", out)

	const (
		ticket = `{"subject":"Printer on fire"}`
		refund = `{"order_id":"o-9","amount_cents":1999,"currency":"EUR","card_number":"` + card + `"}`
		email  = `{"to":"ann@example.com","subject":"Your refund","body":"It is on its way."}`
	)
	calls := []struct{ key, tool, params string }{
		{"wf-9:ticket", "tickets.create", ticket}, {"wf-9:refund", "refunds.issue", refund}, {"wf-9:email", "email.send", email},
	}
	before := map[string]map[string]any{}
	for _, c := range calls {
		before[c.key] = requireOp(t, g.Submit(t, c.key, c.tool, c.params, nil), http.StatusCreated)
		require.Equal(t, "SUCCEEDED", before[c.key]["state"], c.key)
	}
	require.Equal(t, 1, g.Sandbox.Committed("tickets"))
	require.Equal(t, 1, g.Sandbox.Committed("refunds"))
	require.Equal(t, 1, g.Sandbox.Committed("emails"))

	// The restore: the schema dropped and loaded from the dump, in one transaction.
	out, err = exec.Command("psql", "--dbname="+admin, "--single-transaction", "--quiet", "-v", "ON_ERROR_STOP=1",
		"-c", "DROP SCHEMA "+schema+" CASCADE", "-f", dump).CombinedOutput()
	require.NoError(t, err, "restore: %s", out)
	for _, c := range calls {
		_, err := g.Ledger.GetByKey(context.Background(), g.Tenant, c.key)
		require.Equal(t, models.CodeNotFound, models.ErrorCode(err), "the restored ledger has no record of %s", c.key)
	}

	for _, c := range calls {
		again := requireOp(t, g.Submit(t, c.key, c.tool, c.params, nil), http.StatusCreated)
		require.Equal(t, "SUCCEEDED", again["state"], c.key)
		assert.NotEqual(t, before[c.key]["id"], again["id"], "%s: a new record", c.key)
		assert.Equal(t, before[c.key]["downstream_key"], again["downstream_key"], "%s: the same downstream key", c.key)
		if c.tool != "email.send" {
			assert.Equal(t, before[c.key]["downstream_ref"], again["downstream_ref"], "%s: the effect made before is the result", c.key)
		}
	}
	assert.Equal(t, 1, g.Sandbox.Committed("tickets"), "the ticket service recognised its key: one ticket")
	assert.Equal(t, 1, g.Sandbox.Committed("refunds"), "the refund was found by its reference: one refund")
	assert.Equal(t, 2, g.Sandbox.Committed("emails"), "a downstream with neither keys nor a look-up sends again")

	lookups := 0
	for _, r := range g.Sandbox.Requests("/refunds") {
		if r.Method == http.MethodGet && r.Query == "reference="+before["wf-9:refund"]["downstream_key"].(string) {
			lookups++
		}
	}
	assert.Equal(t, 2, lookups, "each refund operation looked its downstream key up before sending")
}

// TestRefundLooksBeforeSending: a refund (no key support, a look-up by downstream key) asks
// first; while the look-up fails nothing is sent and the attempt is retried like any request
// that was not sent; once it answers 404 the refund is sent, once. Every request, look-ups
// included, carries the operation's downstream key.
func TestRefundLooksBeforeSending(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Catalog: func(sandboxURL string) (*catalog.Catalog, error) {
			return catalog.Demo(sandboxURL), nil
		}})
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeError, Path: "/refunds", Method: http.MethodGet, Count: 1})
		r := g.Submit(t, "wf-3:refund", "refunds.issue", `{"order_id":"o-3","amount_cents":5,"currency":"EUR"}`,
			map[string]string{"Prefer": "wait=10"})
		op := requireOp(t, r, http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"])
		assert.EqualValues(t, 2, op["attempts"], "the first attempt only asked, and got no answer")
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"))

		var methods []string
		for _, q := range g.Sandbox.Requests("/refunds") {
			methods = append(methods, q.Method)
			assert.Equal(t, op["downstream_key"], q.Header.Get("X-Idemgate-Downstream-Key"), "%s %s", q.Method, q.Path)
			assert.Equal(t, op["id"], q.Header.Get("X-Idemgate-Operation"))
		}
		assert.Equal(t, []string{http.MethodGet, http.MethodGet, http.MethodPost}, methods, "look, look, send")

		evs := g.Do(t, http.MethodGet, "/v1/operations/"+op["id"].(string)+"/events", g.Key, nil, "")
		assert.Contains(t, string(evs.Body), "retry_scheduled")
		assert.Contains(t, string(evs.Body), `"class":"not_sent"`)

		// A card the schema refuses: the refusal does not quote it.
		bad := g.Submit(t, "wf-3:bad-card", "refunds.issue",
			`{"order_id":"o-4","amount_cents":5,"currency":"EUR","card_number":"4242 4242 4242 4242"}`, nil)
		requireProblem(t, g, bad, http.StatusBadRequest, "invalid-params")
		assert.Contains(t, string(bad.Body), "/card_number")
		assert.NotContains(t, string(bad.Body), "4242 4242", "the schema's message quoting the value is masked")
	})
}
