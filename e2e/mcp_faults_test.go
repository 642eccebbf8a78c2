package e2e_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/mcptest"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faultTools puts our own fault server (this test binary, re-executed) behind the gateway:
// charge is a plain write with a reconcile tool; charge_keyed honours the downstream key.
const faultTools = `
mcp_servers:
  - name: pay
    command: [{{BINARY}}, -test.run=^$]
    env: {IDEMGATE_MCPTEST_STATE: {{STATE}}}
    timeout: 2s
    tools:
      - upstream: charge
        retry: {max_attempts: 8, initial_backoff: 100ms, max_backoff: 1s}
        reconcile:
          tool: find_charge
          arguments: {key: "{{.DownstreamKey}}"}
          found: /charges/0
      - upstream: charge_keyed
        honours_key: true
        # Room for the restart of a server that exited (this test binary, under -race, on a
        # loaded machine): calls while it is down are not sent, and count as attempts.
        retry: {max_attempts: 8, initial_backoff: 100ms, max_backoff: 1s}
      - upstream: find_charge
      - upstream: charge_keyed
        name: pay.charge_by_argument
        idempotency_argument: idempotency_key
        honours_key: true
`

func faultGateway(t *testing.T, d models.Dialect) (*gatewaytest.Gateway, mcptest.State) {
	t.Helper()
	bin, err := os.Executable()
	require.NoError(t, err)
	state := mcptest.State{Dir: t.TempDir()}
	tools := strings.NewReplacer("{{BINARY}}", bin, "{{STATE}}", state.Dir).Replace(faultTools)
	return gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: tools}), state
}

func effectsUnder(t *testing.T, s mcptest.State, key string) int {
	t.Helper()
	effects, err := s.Effects()
	require.NoError(t, err)
	n := 0
	for _, e := range effects {
		if e.Key == key {
			n++
		}
	}
	return n
}

// settle runs the reconciler until op leaves UNKNOWN and returns it as recorded.
func settle(t *testing.T, g *gatewaytest.Gateway, id string) *models.Operation {
	t.Helper()
	r := jobs.NewRecovery(g.Executor, jobs.RecoveryConfig{})
	var op *models.Operation
	gatewaytest.Eventually(t, 20*time.Second, "the reconciler settles "+id, func() bool {
		_, err := r.ReconcileOnce(context.Background())
		require.NoError(t, err)
		op, err = g.Ledger.Get(context.Background(), g.Tenant, id)
		require.NoError(t, err)
		return op.State != models.StateUnknown
	})
	return op
}

// TestMCPServerCommitsThenExits: the server makes the charge and exits before answering. The
// operation is UNKNOWN with exactly one charge (never re-sent: the tool is a write without
// key support); the reconcile tool finds the charge and settles it SUCCEEDED with what it
// found; the server was restarted, and the next call works. Both engines.
func TestMCPServerCommitsThenExits(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g, state := faultGateway(t, d)
		require.NoError(t, state.Cue("exit"))
		r := g.Submit(t, "charge-exit", "pay.charge", `{"amount":4800}`, map[string]string{"Prefer": "wait=3"})
		op := requireOp(t, r, http.StatusAccepted)
		require.Equal(t, "UNKNOWN", op["state"], "%s", r.Body)
		key := downstreamKeyOf(t, g, op["id"].(string))
		assert.Equal(t, 1, effectsUnder(t, state, key), "one charge, and never a second")
		assert.Contains(t, errorMember(t, op)["message"], "not known whether the tool ran")

		settled := settle(t, g, op["id"].(string))
		require.Equal(t, models.StateSucceeded, settled.State)
		require.NotNil(t, settled.Result)
		assert.Contains(t, *settled.Result, `"amount":4800`, "what the reconcile tool found is the result")
		assert.Equal(t, 1, effectsUnder(t, state, key))

		// Restarted: the next charge runs (a call while it restarts is not sent, and retried).
		next := g.Submit(t, "charge-after-restart", "pay.charge", `{"amount":100}`, map[string]string{"Prefer": "wait=30"})
		nop := requireOp(t, next, http.StatusCreated)
		require.Equal(t, "SUCCEEDED", nop["state"], "%s", next.Body)
		assert.Equal(t, 1, effectsUnder(t, state, downstreamKeyOf(t, g, nop["id"].(string))))
	})
}

// TestMCPServerCommitsThenHangs: the charge is made and no answer comes within the server's
// timeout: UNKNOWN, exactly one charge, settled by the reconcile tool. Both engines.
func TestMCPServerCommitsThenHangs(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g, state := faultGateway(t, d)
		require.NoError(t, state.Cue("hang"))
		r := g.Submit(t, "charge-hang", "pay.charge", `{"amount":250}`, map[string]string{"Prefer": "wait=3"})
		op := requireOp(t, r, http.StatusAccepted)
		require.Equal(t, "UNKNOWN", op["state"], "%s", r.Body)
		key := downstreamKeyOf(t, g, op["id"].(string))
		assert.Equal(t, 1, effectsUnder(t, state, key))
		assert.Contains(t, errorMember(t, op)["message"], "no answer within 2s")

		settled := settle(t, g, op["id"].(string))
		require.Equal(t, models.StateSucceeded, settled.State)
		assert.Equal(t, 1, effectsUnder(t, state, key))
	})
}

// TestMCPHonoursKeyMakesTheFaultASafeRetry: the same commit-then-exit on a tool whose server
// dedupes by the downstream key: the gateway retries (the key makes it safe), the server
// answers the charge it made, and the operation SUCCEEDS with one charge. Both engines.
func TestMCPHonoursKeyMakesTheFaultASafeRetry(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g, state := faultGateway(t, d)
		require.NoError(t, state.Cue("exit"))
		r := g.Submit(t, "charge-keyed", "pay.charge_keyed", `{"amount":900}`, map[string]string{"Prefer": "wait=30"})
		op := requireOp(t, r, http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"], "%s", r.Body)
		// The ambiguous attempt, then the safe retry (and, between them, perhaps one not sent
		// while the server restarted).
		assert.GreaterOrEqual(t, op["attempts"], float64(2))
		events := g.Do(t, http.MethodGet, "/v1/operations/"+op["id"].(string)+"/events", g.Key, nil, "")
		assert.Contains(t, string(events.Body), `"class":"ambiguous"`)
		assert.Equal(t, 1, effectsUnder(t, state, downstreamKeyOf(t, g, op["id"].(string))), "one charge")
	})
}

// downstreamKeyOf is the key the gateway sent the server for the operation.
func downstreamKeyOf(t *testing.T, g *gatewaytest.Gateway, id string) string {
	t.Helper()
	op, err := g.Ledger.Get(context.Background(), g.Tenant, id)
	require.NoError(t, err)
	return op.DownstreamKeySent()
}

// TestMCPIdempotencyArgument: a tool with idempotency_argument gets the downstream key in that
// argument too (as Square's tools take it), beside _meta. Both engines.
func TestMCPIdempotencyArgument(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g, state := faultGateway(t, d)
		r := g.Submit(t, "charge-arg", "pay.charge_by_argument", `{"amount":75}`, nil)
		op := requireOp(t, r, http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"], "%s", r.Body)
		effects, err := state.Effects()
		require.NoError(t, err)
		require.Len(t, effects, 1)
		key := downstreamKeyOf(t, g, op["id"].(string))
		assert.Equal(t, key, effects[0].Key, "in _meta")
		assert.Equal(t, key, effects[0].ArgumentKey, "and in the named argument")
		// An agent may not set it: the params are its own, the key is the gateway's.
		bad := g.Submit(t, "charge-arg-2", "pay.charge_by_argument", `{"amount":75,"idempotency_key":"mine"}`, nil)
		assert.Equal(t, http.StatusBadRequest, bad.Status, "%s", bad.Body)
	})
}
