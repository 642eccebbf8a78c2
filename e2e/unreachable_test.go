package e2e_test

import (
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const unreachableTools = `
tools:
  - name: refunds.issue
    description: Refund an order
    effect: write
    params_schema: {type: object, properties: {order: {type: string}}}
    http: {method: POST, url: "{{DOWN}}/refunds", timeout: 2s}
    retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 100ms}
`

// TestUnreachableDownstreamBurnsNoKeys (issue 48 item 3): while the downstream refuses every
// connection, a new operation is answered 202 and stays PENDING far past max_attempts
// attempts, none of which sent anything (they count against retry.unsent_for, 10m by
// default); once the downstream is back, it runs, once.
func TestUnreachableDownstreamBurnsNoKeys(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close()) // down: connections refused

		g := startWithTools(t, d, unreachableTools, "http://"+addr, gatewaytest.Options{})
		r := g.Submit(t, "refund-during-outage", "refunds.issue", `{"order":"o-1"}`, map[string]string{"Prefer": "wait=1"})
		require.Equal(t, http.StatusAccepted, r.Status, "body: %s", r.Body)
		id := r.JSON(t)["id"].(string)
		gatewaytest.Eventually(t, 60*time.Second, "more attempts than max_attempts", func() bool {
			return opState(t, g, id).Attempts > 4
		})
		op := opState(t, g, id)
		assert.Contains(t, []models.State{models.StatePending, models.StateRunning}, op.State, "nothing was sent: not ended")
		evs := string(g.Do(t, http.MethodGet, "/v1/operations/"+id+"/events", g.Key, nil, "").Body)
		assert.Contains(t, evs, `"class":"not_sent"`)
		assert.NotContains(t, evs, "retries_exhausted")

		var hits atomic.Int32
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"re_1"}`))
		})}
		back, err := net.Listen("tcp", addr)
		if err != nil && strings.Contains(err.Error(), "address already in use") {
			t.Skipf("the downstream's port was taken meanwhile: %v", err)
		}
		require.NoError(t, err)
		go func() { _ = srv.Serve(back) }()
		t.Cleanup(func() { srv.Close() })
		done := waitState(t, g, id, "SUCCEEDED", 60*time.Second)
		assert.Equal(t, "re_1", done["result"].(map[string]any)["id"])
		assert.Equal(t, int32(1), hits.Load(), "run once")
	})
}
