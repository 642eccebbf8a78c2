package e2e_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slow is how long the sandbox holds a slow ticket: long enough that a duplicate sent right
// after the original finds it still running on a loaded two-core machine, and well inside the
// timeout of slowTickets' tickets.create.
const slow = 3 * time.Second

// slowTickets starts a gateway whose tickets.create and tickets.close wait 30 s for the
// downstream, so that a ticket held for slow is slow, not timed out.
func slowTickets(t *testing.T, d models.Dialect) *gatewaytest.Gateway {
	t.Helper()
	return gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: slowTicketTools(t)})
}

// slowTicketTools is gatewaytest's tools file with 30 s timeouts for the ticket tools.
func slowTicketTools(t *testing.T) string {
	t.Helper()
	tools := gatewaytest.Tools
	for _, url := range []string{`"{{SANDBOX}}/tickets"`, `"{{SANDBOX}}/tickets/{{.Params.ticket_id}}/close"`} {
		longer := strings.Replace(tools, "url: "+url+"\n      timeout: 1s", "url: "+url+"\n      timeout: 30s", 1)
		require.NotEqual(t, tools, longer, "the timeout of %s was found", url)
		tools = longer
	}
	return tools
}

// requireRetryAfter checks that Retry-After is a positive number of seconds.
func requireRetryAfter(t testing.TB, r gatewaytest.Response) {
	t.Helper()
	n, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", r.Header.Get("Retry-After"))
	assert.Positive(t, n)
}

// TestPreferRespondAsync: an agent that will not wait gets 202 and a place to poll; a
// duplicate that will not wait either gets 409 operation-in-progress; polling then shows the
// outcome, with exactly one side effect.
func TestPreferRespondAsync(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := slowTickets(t, d)
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Path: "/tickets", Count: 1, Delay: slow})

		r := g.Submit(t, "async-1", "tickets.create", ticketParams, map[string]string{"Prefer": "respond-async"})
		op := requireOp(t, r, http.StatusAccepted)
		id := op["id"].(string)
		location := "/v1/operations/" + id
		assert.Equal(t, location, r.Header.Get("Location"))
		requireRetryAfter(t, r)
		assert.Equal(t, "respond-async", r.Header.Get("Preference-Applied"))
		assert.Equal(t, "RUNNING", op["state"])
		assert.Empty(t, r.Header.Get("Idempotent-Replayed"))

		dup := g.Submit(t, "async-1", "tickets.create", ticketParams, map[string]string{"Prefer": "wait=0"})
		p := requireProblem(t, g, dup, http.StatusConflict, "operation-in-progress")
		requireOperationProblem(t, p, id, "RUNNING")
		assert.Equal(t, location, dup.Header.Get("Location"))
		requireRetryAfter(t, dup)

		// Polling the Location shows the outcome.
		var final map[string]any
		gatewaytest.Eventually(t, 20*time.Second, "the operation to succeed", func() bool {
			got := g.Do(t, http.MethodGet, r.Header.Get("Location"), g.Key, nil, "")
			final = requireOp(t, got, http.StatusOK)
			return final["state"] == "SUCCEEDED"
		})
		assert.Equal(t, "T-1001", final["downstream_ref"])

		// Now terminal, a duplicate that will not wait is a replay.
		again := g.Submit(t, "async-1", "tickets.create", ticketParams, map[string]string{"Prefer": "wait=0"})
		requireReplay(t, again, g.Do(t, http.MethodGet, location, g.Key, nil, ""))
		assert.Equal(t, 1, g.Sandbox.Committed("tickets"))
		assert.Len(t, g.Sandbox.Requests("/tickets"), 1)
	})
}

// TestPreferWait: wait=0 is respond-async spelled otherwise; wait beyond 60 is applied as 60;
// a duplicate that may wait long enough waits for the original and gets its outcome.
func TestPreferWait(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := slowTickets(t, d)

		t.Run("wait=0", func(t *testing.T) {
			g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Path: "/tickets", Count: 1, Delay: slow})
			r := g.Submit(t, "wait-0", "tickets.create", ticketParams, map[string]string{"Prefer": "wait=0"})
			op := requireOp(t, r, http.StatusAccepted)
			assert.Equal(t, "wait=0", r.Header.Get("Preference-Applied"))
			assert.Equal(t, "/v1/operations/"+op["id"].(string), r.Header.Get("Location"))
			requireRetryAfter(t, r)

			// A duplicate with its own, long enough wait waits for the original.
			waits := waitsEnded(t, g)
			dup := g.Submit(t, "wait-0", "tickets.create", ticketParams, map[string]string{"Prefer": "wait=15"})
			replay := requireOp(t, dup, http.StatusOK)
			ended := waitsEnded(t, g)
			assert.Equal(t, waits[jobs.WaitDeadline], ended[jobs.WaitDeadline], "the duplicate's wait did not run out")
			assert.Equal(t, waits[jobs.WaitNotified]+waits[jobs.WaitPolled]+1, ended[jobs.WaitNotified]+ended[jobs.WaitPolled],
				"the duplicate was woken by the outcome")
			assert.Equal(t, "true", dup.Header.Get("Idempotent-Replayed"))
			assert.Equal(t, op["id"], replay["id"])
			assert.Equal(t, "SUCCEEDED", replay["state"])
			assert.JSONEq(t, string(getOp(t, g, g.Key, op["id"].(string)).Body), string(dup.Body))
		})
		t.Run("wait=100 applies 60", func(t *testing.T) {
			r := g.Submit(t, "wait-100", "tickets.create", ticketParams, map[string]string{"Prefer": "wait=100"})
			op := requireOp(t, r, http.StatusCreated)
			assert.Equal(t, "SUCCEEDED", op["state"])
			assert.Equal(t, "wait=60", r.Header.Get("Preference-Applied"))
			assert.Empty(t, r.Header.Get("Location"))
		})
		t.Run("no preference", func(t *testing.T) {
			r := g.Submit(t, "wait-default", "tickets.create", ticketParams, nil)
			requireOp(t, r, http.StatusCreated)
			assert.Empty(t, r.Header.Get("Preference-Applied"), "nothing was asked, so nothing is applied")
		})
		t.Run("outcome within a short wait", func(t *testing.T) {
			g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Path: "/tickets", Count: 1, Delay: 200 * time.Millisecond})
			r := g.Submit(t, "wait-1", "tickets.create", ticketParams, map[string]string{"Prefer": "wait=10"})
			// The operation takes 200 ms, well within the wait: the request gets the outcome.
			op := requireOp(t, r, http.StatusCreated)
			assert.Equal(t, "SUCCEEDED", op["state"])
			assert.Equal(t, "wait=10", r.Header.Get("Preference-Applied"))
		})
		assert.Equal(t, 4, g.Sandbox.Committed("tickets"))
		assert.Len(t, g.Sandbox.Requests("/tickets"), 4)
	})
}

// TestApprovalRequired: a tool that needs approval records the operation and sends nothing;
// a duplicate is told it awaits approval; cancelling ends it, once.
func TestApprovalRequired(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)

		r := g.Submit(t, "payout-7", "payments.payout", payoutParams, nil)
		op := requireOp(t, r, http.StatusAccepted)
		id := op["id"].(string)
		assert.Equal(t, "AWAITING_APPROVAL", op["state"])
		assert.EqualValues(t, 0, op["attempts"])
		assert.Nil(t, op["completed_at"])
		assert.Equal(t, "/v1/operations/"+id, r.Header.Get("Location"))
		requireRetryAfter(t, r)

		dup := g.Submit(t, "payout-7", "payments.payout", payoutParams, nil)
		p := requireProblem(t, g, dup, http.StatusConflict, "operation-awaiting-approval")
		requireOperationProblem(t, p, id, "AWAITING_APPROVAL")
		assert.Equal(t, "/v1/operations/"+id, dup.Header.Get("Location"))
		requireRetryAfter(t, dup)
		assert.Empty(t, g.Sandbox.Requests(""), "nothing may be sent before approval")

		c := g.Do(t, http.MethodPost, "/v1/operations/"+id+"/cancel", g.Key, nil, "")
		cancelled := requireOp(t, c, http.StatusOK)
		assert.Equal(t, id, cancelled["id"])
		assert.Equal(t, "FAILED_FINAL", cancelled["state"])
		assert.NotNil(t, cancelled["completed_at"])
		if e := errorMember(t, cancelled); assert.NotNil(t, e) {
			assert.Equal(t, "cancelled", e["class"])
		}

		again := g.Do(t, http.MethodPost, "/v1/operations/"+id+"/cancel", g.Key, nil, "")
		p = requireProblem(t, g, again, http.StatusConflict, "not-cancellable")
		requireOperationProblem(t, p, id, "FAILED_FINAL")

		// The key now replays the cancelled operation.
		replay := g.Submit(t, "payout-7", "payments.payout", payoutParams, nil)
		requireReplay(t, replay, getOp(t, g, g.Key, id))
		assert.Equal(t, "FAILED_FINAL", replay.JSON(t)["state"])

		evs := events(t, g, g.Key, id)
		require.Equal(t, []string{"created", "state_changed"}, eventTypes(evs))
		assert.Equal(t, "AWAITING_APPROVAL", evs[0]["to_state"])
		assert.Equal(t, "AWAITING_APPROVAL", evs[1]["from_state"])
		assert.Equal(t, "FAILED_FINAL", evs[1]["to_state"])
		assert.Equal(t, "api:agent", evs[1]["actor"])

		// A SUCCEEDED operation cannot be cancelled either.
		tk := requireOp(t, g.Submit(t, "ticket-to-keep", "tickets.create", ticketParams, nil), http.StatusCreated)
		tid := tk["id"].(string)
		p = requireProblem(t, g, g.Do(t, http.MethodPost, "/v1/operations/"+tid+"/cancel", g.Key, nil, ""),
			http.StatusConflict, "not-cancellable")
		requireOperationProblem(t, p, tid, "SUCCEEDED")
		assert.Equal(t, "SUCCEEDED", getOp(t, g, g.Key, tid).JSON(t)["state"])

		requireProblem(t, g, g.Do(t, http.MethodPost, "/v1/operations/"+models.NewOperationID()+"/cancel", g.Key, nil, ""),
			http.StatusNotFound, "not-found")

		assert.Len(t, g.Sandbox.Requests("/refunds"), 0, "the payout never reached the downstream")
		assert.Equal(t, 0, g.Sandbox.Committed("refunds"))
		assert.Equal(t, 1, g.Sandbox.Committed("tickets"))
	})
}

// TestCancelPendingRetry: an operation waiting for its retry can be cancelled, and the retry
// then never happens.
func TestCancelPendingRetry(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		// Retry-After 2 s (the tool's max_backoff): room for the cancel to arrive before the
		// retry is due, even on a loaded machine.
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeThrottle, Path: "/refunds", Count: 1, RetryAfter: 2})

		r := g.Submit(t, "order-8:refund", "refunds.issue", refundParams, map[string]string{"Prefer": "wait=0"})
		id := requireOp(t, r, http.StatusAccepted)["id"].(string)
		pending := waitState(t, g, id, "PENDING", 2*time.Second)
		next, err := time.Parse(time.RFC3339Nano, pending["next_attempt_at"].(string))
		require.NoError(t, err, "a PENDING retry has next_attempt_at: %v", pending)

		c := g.Do(t, http.MethodPost, "/v1/operations/"+id+"/cancel", g.Key, nil, "")
		cancelled := requireOp(t, c, http.StatusOK)
		require.Equal(t, "FAILED_FINAL", cancelled["state"])
		assert.Equal(t, "cancelled", errorMember(t, cancelled)["class"])
		assert.Nil(t, cancelled["next_attempt_at"])

		// A second refund, throttled the same way but later, is due after the cancelled retry
		// would have been. Once the dispatcher has run its retry, it has claimed due work past
		// the cancelled one's time, which it would have claimed with it.
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeThrottle, Path: "/refunds", Count: 1, RetryAfter: 2})
		r = g.Submit(t, "order-9:refund", "refunds.issue", refundParams, map[string]string{"Prefer": "wait=0"})
		later := requireOp(t, r, http.StatusAccepted)["id"].(string)
		due, err := time.Parse(time.RFC3339Nano, waitState(t, g, later, "PENDING", 5*time.Second)["next_attempt_at"].(string))
		require.NoError(t, err)
		require.False(t, due.Before(next), "the second retry is due at %s, not before the cancelled one's %s", due, next)
		waitState(t, g, later, "SUCCEEDED", 30*time.Second)

		sent := map[string]int{}
		for _, q := range g.Sandbox.Requests("/refunds") {
			sent[q.Header.Get("X-Idemgate-Operation")]++
		}
		assert.Equal(t, map[string]int{id: 1, later: 2}, sent, "the cancelled retry never reached the downstream")
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"), "only the second refund")
		assert.Equal(t, "FAILED_FINAL", getOp(t, g, g.Key, id).JSON(t)["state"])
	})
}

// waitsEnded reads idemgate_waits_total from the gateway's metrics, by what ended the waits.
func waitsEnded(t *testing.T, g *gatewaytest.Gateway) map[string]float64 {
	t.Helper()
	text := g.Scrape(t)
	out := map[string]float64{}
	for _, by := range []string{jobs.WaitNotified, jobs.WaitPolled, jobs.WaitDeadline, jobs.WaitCancelled} {
		out[by] = metricValue(t, text, "idemgate_waits_total", `{ended_by="`+by+`"}`)
	}
	return out
}
