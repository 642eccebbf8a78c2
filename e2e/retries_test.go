package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLostResponseRetriedWithSameDownstreamKey: the downstream commits a ticket and the
// answer is lost; the tool's downstream honours keys, so idemgate retries with the same key and
// the downstream answers the stored ticket instead of creating a second one.
func TestLostResponseRetriedWithSameDownstreamKey(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/tickets", Count: 1})

		r := g.Submit(t, "wf-1:create-ticket", "tickets.create", ticketParams, nil)
		op := requireOp(t, r, http.StatusCreated)
		id := op["id"].(string)
		assert.Equal(t, "SUCCEEDED", op["state"])
		assert.EqualValues(t, 2, op["attempts"])
		assert.Nil(t, op["error"], "a success carries no error")
		assert.Equal(t, "T-1001", op["downstream_ref"])
		result, _ := op["result"].(map[string]any)
		assert.Equal(t, "T-1001", result["id"])

		assert.Equal(t, 1, g.Sandbox.Committed("tickets"), "exactly one ticket")
		reqs := g.Sandbox.Requests("/tickets")
		require.Len(t, reqs, 2)
		assert.Equal(t, sandbox.ModeDropAfterCommit, reqs[0].Fault)
		dk := op["downstream_key"].(string)
		assert.Regexp(t, `^dk_[0-9a-f]{32}$`, dk)
		for i, rq := range reqs {
			assert.Equal(t, dk, rq.Header.Get("Idempotency-Key"), "request %d: the downstream key in the tool's key header", i)
			assert.Equal(t, dk, rq.Header.Get("X-Idemgate-Downstream-Key"), "request %d", i)
			assert.Equal(t, id, rq.Header.Get("X-Idemgate-Operation"), "request %d", i)
			assert.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`, rq.Header.Get("Traceparent"), "request %d", i)
			assert.NotEmpty(t, rq.Header.Get("X-Request-Id"), "request %d", i)
			assert.JSONEq(t, ticketParams, string(rq.Body), "request %d: params are the body", i)
		}
		assert.NotEqual(t, reqs[0].Header.Get("X-Request-Id"), reqs[1].Header.Get("X-Request-Id"), "each attempt has its own request id")

		// The request ids are the recorded attempts' ids.
		attempts, err := g.Ledger.Attempts(context.Background(), id)
		require.NoError(t, err)
		require.Len(t, attempts, 2)
		assert.Equal(t, attempts[0].ID, reqs[0].Header.Get("X-Request-Id"))
		assert.Equal(t, attempts[1].ID, reqs[1].Header.Get("X-Request-Id"))

		types := eventTypes(events(t, g, g.Key, id))
		assert.Contains(t, types, "retry_scheduled")
	})
}

// TestServerErrorRetriedOnKeyHonouringTool: a 500 from a downstream that honours keys is
// ambiguous but safe to repeat.
func TestServerErrorRetriedOnKeyHonouringTool(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeError, Path: "/tickets", Count: 1})

		r := g.Submit(t, "wf-2:create-ticket", "tickets.create", ticketParams, nil)
		op := requireOp(t, r, http.StatusCreated)
		assert.Equal(t, "SUCCEEDED", op["state"])
		assert.EqualValues(t, 2, op["attempts"])
		assert.Equal(t, 1, g.Sandbox.Committed("tickets"))
		reqs := g.Sandbox.Requests("/tickets")
		require.Len(t, reqs, 2)
		assert.Equal(t, sandbox.ModeError, reqs[0].Fault)
		assert.Equal(t, reqs[0].Header.Get("Idempotency-Key"), reqs[1].Header.Get("Idempotency-Key"))

		replay := g.Submit(t, "wf-2:create-ticket", "tickets.create", ticketParams, nil)
		requireReplay(t, replay, r)
		assert.Equal(t, 1, g.Sandbox.Committed("tickets"))
		assert.Len(t, g.Sandbox.Requests("/tickets"), 2)
	})
}

// TestDownstreamRejectionIsFinal: a 4xx is final, recorded with its status, and replayed
// identically.
func TestDownstreamRejectionIsFinal(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeReject, Path: "/refunds", Count: 1})

		first := g.Submit(t, "order-5:refund", "refunds.issue", refundParams, nil)
		op := requireOp(t, first, http.StatusCreated)
		assert.Equal(t, "FAILED_FINAL", op["state"])
		assert.EqualValues(t, 1, op["attempts"])
		assert.Nil(t, op["result"])
		assert.NotNil(t, op["completed_at"])
		e := errorMember(t, op)
		require.NotNil(t, e, "a failed operation carries its error: %s", first.Body)
		assert.Equal(t, "rejected", e["class"])
		assert.EqualValues(t, 422, e["downstream_status"])
		assert.NotEmpty(t, e["message"])

		replay := g.Submit(t, "order-5:refund", "refunds.issue", refundParams, nil)
		requireReplay(t, replay, first)

		assert.Equal(t, 0, g.Sandbox.Committed("refunds"))
		assert.Len(t, g.Sandbox.Requests("/refunds"), 1, "a rejection is never retried")
	})
}

// TestThrottledRetriedAfterRetryAfter: a 429 is retried no sooner than its Retry-After.
func TestThrottledRetriedAfterRetryAfter(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeThrottle, Path: "/refunds", Count: 1, RetryAfter: 1})

		r := g.Submit(t, "order-6:refund", "refunds.issue", refundParams, nil)
		op := requireOp(t, r, http.StatusCreated)
		assert.Equal(t, "SUCCEEDED", op["state"])
		assert.EqualValues(t, 2, op["attempts"])
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"))

		reqs := g.Sandbox.Requests("/refunds")
		require.Len(t, reqs, 2)
		assert.Equal(t, sandbox.ModeThrottle, reqs[0].Fault)

		evs := events(t, g, g.Key, op["id"].(string))
		var scheduled map[string]any
		for _, e := range evs {
			if e["type"] == "retry_scheduled" {
				scheduled = e
			}
		}
		require.NotNil(t, scheduled, "events: %v", eventTypes(evs))
		assert.Equal(t, "RUNNING", scheduled["from_state"])
		assert.Equal(t, "PENDING", scheduled["to_state"])
		detail, _ := scheduled["detail"].(map[string]any)
		due, err := time.Parse(time.RFC3339Nano, fmt.Sprint(detail["next_attempt_at"]))
		require.NoError(t, err, "retry_scheduled names when the retry is due: %v", scheduled)
		// What the gateway decided: due Retry-After (1 s) after the throttled request, at the
		// least, and within max_backoff (2 s); and what it did: the retry reached the downstream
		// only once it was due.
		assert.False(t, due.Before(reqs[0].At.Add(time.Second)), "scheduled before Retry-After: due %s, throttled at %s", due, reqs[0].At)
		assert.True(t, due.Before(reqs[0].At.Add(2*time.Second)), "scheduled beyond max_backoff: due %s, throttled at %s", due, reqs[0].At)
		assert.False(t, reqs[1].At.Before(due), "the retry came before it was due: sent %s, due %s", reqs[1].At, due)
	})
}

// TestAmbiguousWriteWithoutKeySupportIsNotRetried: a refund's response is lost after the
// refund was made; the refund downstream ignores keys, so a retry could pay twice. The
// operation goes UNKNOWN and nothing is repeated.
func TestAmbiguousWriteWithoutKeySupportIsNotRetried(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/refunds", Count: 1})

		wait := map[string]string{"Prefer": "wait=1"}
		r := g.Submit(t, "order-7:refund", "refunds.issue", refundParams, wait)
		op := requireOp(t, r, http.StatusAccepted)
		id := op["id"].(string)
		assert.Equal(t, "UNKNOWN", op["state"])
		assert.EqualValues(t, 1, op["attempts"])
		assert.Equal(t, "/v1/operations/"+id, r.Header.Get("Location"))
		assert.NotEmpty(t, r.Header.Get("Retry-After"))
		assert.Equal(t, "wait=1", r.Header.Get("Preference-Applied"))
		if e := errorMember(t, op); assert.NotNil(t, e) {
			assert.Equal(t, "ambiguous", e["class"])
		}

		dup := g.Submit(t, "order-7:refund", "refunds.issue", refundParams, map[string]string{"Prefer": "wait=0"})
		p := requireProblem(t, g, dup, http.StatusConflict, "operation-uncertain")
		requireOperationProblem(t, p, id, "UNKNOWN")
		assert.Equal(t, "/v1/operations/"+id, dup.Header.Get("Location"))
		assert.NotEmpty(t, dup.Header.Get("Retry-After"))

		// The first request waited a second for the operation: a mistaken retry (backoff
		// 20 ms, the dispatcher polls every 20 ms) would have happened by now.
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"), "exactly one refund")
		reqs := g.Sandbox.Requests("/refunds")
		require.Len(t, reqs, 1, "an ambiguous write without key support must not be retried")
		assert.Empty(t, reqs[0].Header.Get("Idempotency-Key"), "the refund tool declares no downstream key header")
		assert.Equal(t, id, reqs[0].Header.Get("X-Idemgate-Operation"))
		still := getOp(t, g, g.Key, id).JSON(t)
		assert.Equal(t, "UNKNOWN", still["state"])
		assert.EqualValues(t, 1, still["attempts"])
	})
}
