package e2e_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentDuplicatesRunOnce sends 32 identical requests at once while the first attempt
// is held at the downstream: exactly one side effect, one 201, and 31 replays of the same body.
func TestConcurrentDuplicatesRunOnce(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Path: "/refunds", Count: 1, Delay: 300 * time.Millisecond})
		requireRanOnce(t, g, sendAtOnce(t, g, 32, "burst:refund"))
	})
}

// TestDuplicateStorm: a thousand identical requests at once, with nothing holding the first
// back, so they meet the operation in every state it passes through: all answered, none an
// error, one refund. The refund's timeout is long: on a loaded two-core machine the storm
// itself can hold the one real attempt past a second, and a timeout (UNKNOWN) is another
// test's subject.
func TestDuplicateStorm(t *testing.T) {
	t.Parallel()
	tools := strings.Replace(gatewaytest.Tools, "url: \"{{SANDBOX}}/refunds\"\n      timeout: 1s",
		"url: \"{{SANDBOX}}/refunds\"\n      timeout: 30s", 1)
	require.NotEqual(t, gatewaytest.Tools, tools, "the refund's timeout was found")
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: tools})
		requireRanOnce(t, g, sendAtOnce(t, g, 1000, "storm:refund"))
	})
}

// sendAtOnce submits the same refund n times under key from n goroutines released together.
func sendAtOnce(t *testing.T, g *gatewaytest.Gateway, n int, key string) []gatewaytest.Response {
	answers := make([]gatewaytest.Response, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = g.Submit(t, key, "refunds.issue", refundParams, nil)
		})
	}
	close(start)
	wg.Wait()
	return answers
}

// requireRanOnce checks the answers to identical requests: one 201, replays of the same body
// for the rest, and one refund downstream.
func requireRanOnce(t *testing.T, g *gatewaytest.Gateway, answers []gatewaytest.Response) {
	t.Helper()
	var created *gatewaytest.Response
	replays := 0
	for i := range answers {
		switch answers[i].Status {
		case http.StatusCreated:
			require.Nil(t, created, "two requests got 201:\n%s\n%s", answersBody(created), answers[i].Body)
			created = &answers[i]
			assert.Empty(t, answers[i].Header.Get("Idempotent-Replayed"))
		case http.StatusOK:
			replays++
			assert.Equal(t, "true", answers[i].Header.Get("Idempotent-Replayed"))
		default:
			t.Errorf("request %d: %d %s", i, answers[i].Status, answers[i].Body)
		}
	}
	require.NotNil(t, created, "no request got 201")
	assert.Equal(t, len(answers)-1, replays)
	op := requireOp(t, *created, http.StatusCreated)
	assert.Equal(t, "SUCCEEDED", op["state"])
	assert.EqualValues(t, 1, op["attempts"])
	for i := range answers {
		assert.JSONEq(t, string(created.Body), string(answers[i].Body), "request %d", i)
	}

	// The business outcome: one refund, one request downstream, one operation.
	assert.Equal(t, 1, g.Sandbox.Committed("refunds"))
	assert.Len(t, g.Sandbox.Requests("/refunds"), 1)
	assert.EqualValues(t, 1, g.Count(t))
}

func answersBody(r *gatewaytest.Response) string {
	if r == nil {
		return ""
	}
	return string(r.Body)
}

// TestKeyReusedWithOtherParams: a known key with another fingerprint is 422 and runs nothing.
func TestKeyReusedWithOtherParams(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		first := g.Submit(t, "order-1042:refund", "refunds.issue", refundParams, nil)
		op := requireOp(t, first, http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"])
		requests := len(g.Sandbox.Requests(""))

		cases := map[string]struct{ tool, params string }{
			"other amount":   {"refunds.issue", `{"order_id":"o-1042","amount_cents":2000,"currency":"EUR"}`},
			"extra param":    {"refunds.issue", `{"order_id":"o-1042","amount_cents":1999,"currency":"EUR","card_number":"1"}`},
			"other tool":     {"tickets.create", ticketParams},
			"other currency": {"refunds.issue", `{"order_id":"o-1042","amount_cents":1999,"currency":"USD"}`},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				r := g.Submit(t, "order-1042:refund", tc.tool, tc.params, nil)
				p := requireProblem(t, g, r, http.StatusUnprocessableEntity, "idempotency-key-mismatch")
				requireOperationProblem(t, p, op["id"].(string), "SUCCEEDED")
				assert.NotContains(t, string(r.Body), "R-5001", "a mismatch must not leak the result")
			})
		}

		// Nothing ran and nothing changed.
		assert.Len(t, g.Sandbox.Requests(""), requests)
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"))
		assert.Equal(t, 0, g.Sandbox.Committed("tickets"))
		assert.EqualValues(t, 1, g.Count(t))
		again := getOp(t, g, g.Key, op["id"].(string))
		assert.JSONEq(t, string(first.Body), string(again.Body))
	})
}

// TestEquivalentParamsReplay: key order, whitespace and number spelling do not make params
// different.
func TestEquivalentParamsReplay(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		first := g.Submit(t, "order-9:refund", "refunds.issue", `{"order_id":"o-9","amount_cents":10,"currency":"EUR"}`, nil)
		op := requireOp(t, first, http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"])

		for name, params := range map[string]string{
			"key order":       `{"currency":"EUR","order_id":"o-9","amount_cents":10}`,
			"whitespace":      "{ \"order_id\" : \"o-9\",\n\t\"amount_cents\" : 10 , \"currency\":\"EUR\" }",
			"10.0":            `{"order_id":"o-9","amount_cents":10.0,"currency":"EUR"}`,
			"1e1":             `{"order_id":"o-9","amount_cents":1e1,"currency":"EUR"}`,
			"100e-1 reversed": `{"amount_cents":100e-1,"currency":"EUR","order_id":"o-9"}`,
			"string escapes":  `{"order_id":"\u006f-9","amount_cents":10,"currency":"EUR"}`,
		} {
			t.Run(name, func(t *testing.T) {
				r := g.Submit(t, "order-9:refund", "refunds.issue", params, nil)
				replay := requireReplay(t, r, first)
				assert.Equal(t, op["id"], replay["id"])
			})
		}
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"))
		assert.Len(t, g.Sandbox.Requests("/refunds"), 1)
		assert.EqualValues(t, 1, g.Count(t))
	})
}

// The console shows how often an agent asked again (the operation's timeline): every request
// answered from the record is counted, the concurrent ones that waited on the first attempt
// and the replays after it, and a request with other params (refused) is not one of them.
func TestRepeatsAreCountedForTheConsole(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Path: "/refunds", Count: 1, Delay: 200 * time.Millisecond})
		answers := sendAtOnce(t, g, 8, "repeat:refund")
		requireRanOnce(t, g, answers)
		for range 2 {
			require.Equal(t, http.StatusOK, g.Submit(t, "repeat:refund", "refunds.issue", refundParams, nil).Status)
		}
		other := g.Submit(t, "repeat:refund", "refunds.issue", `{"order_id":"o-1042","amount_cents":1,"currency":"EUR"}`, nil)
		require.Equal(t, http.StatusUnprocessableEntity, other.Status)
		op, err := g.Ledger.GetByKey(t.Context(), g.Tenant, "repeat:refund")
		require.NoError(t, err)
		rep, err := g.Ledger.RepeatsOf(t.Context(), models.AllTenants(), op.ID)
		require.NoError(t, err)
		assert.Equal(t, int64(9), rep.N, "seven that came with the first and two after it")
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"))
	})
}
