package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/idemgate/idemgate/client"
	"github.com/idemgate/idemgate/handlers/headers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var ticket = map[string]any{"subject": "Printer on fire"}

// newClient is a client of the gateway at url with apiKey, with short backoffs.
func newClient(t *testing.T, url, apiKey string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, apiKey, append([]client.Option{client.WithBackoff(5*time.Millisecond, 20*time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	return c
}

// TestDoRetriesTheSameKey: a lost answer, 409, 429 and 503 are all retried with the same key
// and body, each after at least its Retry-After, until the operation's answer arrives.
func TestDoRetriesTheSameKey(t *testing.T) {
	t.Parallel()
	f := newFake(t,
		drop,
		problem(http.StatusConflict, "operation-in-progress", 1, "RUNNING"),
		problem(http.StatusTooManyRequests, "rate-limited", 1, ""),
		problem(http.StatusServiceUnavailable, "ledger-unavailable", 1, ""),
		operation(http.StatusOK, "SUCCEEDED", "Idempotent-Replayed", "true"),
	)
	waits := &pauses{f: f}
	op, err := newClient(t, f.URL, "idg_test", client.WithPause(waits.record)).Do(t.Context(), "tickets.create", ticket, client.Key("wf-1", "create-ticket"))
	require.NoError(t, err)
	assert.Equal(t, client.StateSucceeded, op.State)
	assert.True(t, op.Replayed)

	reqs := f.requests()
	require.GreaterOrEqual(t, len(reqs), 5)
	for i, r := range reqs {
		assert.Equal(t, http.MethodPost, r.method)
		assert.Equal(t, `"wf-1:create-ticket"`, r.key, "try %d: one key for every try", i)
		assert.Equal(t, reqs[0].body, r.body, "try %d: the same request every time", i)
		assert.JSONEq(t, `{"tool":"tickets.create","params":{"subject":"Printer on fire"},"workflow_run_id":"wf-1","step_id":"create-ticket"}`, r.body)
		assert.Equal(t, "wait=10", r.prefer)
		if i == 0 {
			continue
		}
		waited := waits.before(i)
		require.Len(t, waited, 1, "try %d follows one wait", i)
		if reqs[i-1].step >= 1 && reqs[i-1].step <= 3 {
			assert.GreaterOrEqual(t, waited[0], time.Second, "try %d came before the Retry-After of the one before", i)
		}
	}
}

// TestDoPollsUntilTerminal: a 202 is followed by polling the operation, Retry-After apart.
func TestDoPollsUntilTerminal(t *testing.T) {
	t.Parallel()
	f := newFake(t,
		operation(http.StatusAccepted, "RUNNING", "Location", "/v1/operations/"+opID, "Retry-After", "1"),
		operation(http.StatusOK, "RUNNING"),
		operation(http.StatusOK, "SUCCEEDED"),
	)
	waits := &pauses{f: f}
	op, err := newClient(t, f.URL, "idg_test", client.WithPause(waits.record)).Do(t.Context(), "tickets.create", ticket, client.Key("wf-1", "create-ticket"))
	require.NoError(t, err)
	assert.Equal(t, client.StateSucceeded, op.State)
	assert.False(t, op.Replayed)
	var result struct{ ID string }
	require.NoError(t, op.DecodeResult(&result))
	assert.Equal(t, "T-1042", result.ID)

	reqs := f.requests()
	require.Len(t, reqs, 3)
	for _, r := range reqs[1:] {
		assert.Equal(t, http.MethodGet, r.method)
		assert.Equal(t, "/v1/operations/"+opID, r.path)
	}
	for i := 1; i < len(reqs); i++ {
		waited := waits.before(i)
		require.Len(t, waited, 1, "poll %d follows one wait", i)
		assert.GreaterOrEqual(t, waited[0], time.Second, "poll %d came before the 202's Retry-After", i)
	}
}

// TestDoReturnsFinalProblems: a problem that another try cannot change is returned at once, as
// a *Problem matching its sentinel.
func TestDoReturnsFinalProblems(t *testing.T) {
	t.Parallel()
	rows := []struct {
		status   int
		slug     string
		state    string
		sentinel error
	}{
		{http.StatusUnprocessableEntity, "idempotency-key-mismatch", "SUCCEEDED", client.ErrKeyMismatch},
		{http.StatusGone, "idempotency-key-expired", "SUCCEEDED", client.ErrKeyExpired},
		{http.StatusBadRequest, "invalid-params", "", client.ErrInvalidParams},
		{http.StatusBadRequest, "idempotency-key-invalid", "", client.ErrKeyInvalid},
		{http.StatusUnprocessableEntity, "idempotency-key-reserved", "", client.ErrKeyReserved},
		{http.StatusUnauthorized, "unauthenticated", "", client.ErrUnauthenticated},
		{http.StatusForbidden, "tool-forbidden", "", client.ErrToolForbidden},
		{http.StatusNotFound, "unknown-tool", "", client.ErrUnknownTool},
		{http.StatusRequestEntityTooLarge, "body-too-large", "", client.ErrBodyTooLarge},
	}
	for _, r := range rows {
		t.Run(r.slug, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, problem(r.status, r.slug, 0, r.state))
			_, err := newClient(t, f.URL, "idg_test").Do(t.Context(), "tickets.create", ticket, client.Key("wf-1", "create-ticket"))
			require.ErrorIs(t, err, r.sentinel)
			var p *client.Problem
			require.ErrorAs(t, err, &p)
			assert.Equal(t, r.status, p.Status)
			assert.Equal(t, r.slug, p.Slug)
			assert.Equal(t, "/problems/"+r.slug, p.Type)
			if r.state != "" {
				assert.Equal(t, opID, p.OperationID)
				assert.Equal(t, client.State(r.state), p.State)
				assert.False(t, p.SafeToRetryWithNewKey)
			}
			if r.slug == "invalid-params" {
				assert.Equal(t, []client.ParamError{{Pointer: "/subject", Message: "expected string, but got number"}}, p.Errors)
			}
			assert.Len(t, f.requests(), 1, "a final problem is not retried")
			assert.NotErrorIs(t, err, client.ErrOperationUncertain)
		})
	}
}

// TestDoStopsWhenTheContextEnds: an operation that stays uncertain is asked about with the
// same key until the context ends, and the error says what is known.
func TestDoStopsWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	f := newFake(t, problem(http.StatusConflict, "operation-uncertain", 1, "UNKNOWN"))
	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	_, err := newClient(t, f.URL, "idg_test").Do(ctx, "tickets.create", ticket, client.Key("wf-1", "create-ticket"))
	require.ErrorIs(t, err, client.ErrOperationUncertain)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	assert.Equal(t, opID, p.OperationID)

	reqs := f.requests()
	require.GreaterOrEqual(t, len(reqs), 2)
	for _, r := range reqs {
		assert.Equal(t, `"wf-1:create-ticket"`, r.key)
	}
	assert.Equal(t, "wait=1", reqs[0].prefer, "the wait is shortened to end before the context")
}

// TestWaitStopsWhenTheContextEnds: polling returns the last operation read, with its state's
// sentinel.
func TestWaitStopsWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	f := newFake(t, operation(http.StatusAccepted, "AWAITING_APPROVAL", "Retry-After", "1"))
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	op, err := newClient(t, f.URL, "idg_test").Do(ctx, "payments.payout", ticket, client.Key("wf-1", "payout"))
	require.ErrorIs(t, err, client.ErrOperationAwaitingApproval)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotNil(t, op)
	assert.Equal(t, client.StateAwaitingApproval, op.State)
}

// TestDoFailedFinal: a final failure is the operation and an error matching
// ErrOperationFailed.
func TestDoFailedFinal(t *testing.T) {
	t.Parallel()
	f := newFake(t, operation(http.StatusCreated, "FAILED_FINAL"))
	op, err := newClient(t, f.URL, "idg_test").Do(t.Context(), "tickets.create", ticket, client.Key("wf-1", "create-ticket"))
	require.ErrorIs(t, err, client.ErrOperationFailed)
	var failed *client.FailedError
	require.ErrorAs(t, err, &failed)
	assert.Same(t, op, failed.Op)
	assert.Equal(t, "rejected", op.Error.Class)
	assert.Contains(t, err.Error(), "downstream answered 422")
}

// TestDoGivesUpAfterMaxAttempts: with a limit, lost answers are retried that many times.
func TestDoGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	f := newFake(t, drop)
	_, err := newClient(t, f.URL, "idg_test", client.WithMaxAttempts(3)).Do(t.Context(), "tickets.create", ticket, client.Key("wf-1", "create-ticket"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "gave up after 3 tries")
	assert.Len(t, f.requests(), 3)
}

// TestResume: Resume asks the ledger by key, and the recorded call is the one asked about.
func TestResume(t *testing.T) {
	t.Parallel()
	f := newFake(t, operation(http.StatusOK, "SUCCEEDED"), problem(http.StatusNotFound, "not-found", 0, ""))
	c := newClient(t, f.URL, "idg_test")
	op, err := c.Resume(t.Context(), "tickets.create", ticket, client.Key("wf-1", "create-ticket"))
	require.NoError(t, err)
	assert.Equal(t, opID, op.ID)
	_, err = c.Resume(t.Context(), "refunds.issue", map[string]any{}, client.Key("wf-1", "refund"))
	require.ErrorIs(t, err, client.ErrNotFound)

	reqs := f.requests()
	require.Len(t, reqs, 2)
	q, err := url.ParseQuery(reqs[0].query)
	require.NoError(t, err)
	assert.Equal(t, "wf-1:create-ticket", q.Get("key"))
	assert.Equal(t, "/v1/operations", reqs[0].path)
}

// TestKeyHeader: every printable key arrives at the gateway exactly as it is.
func TestKeyHeader(t *testing.T) {
	t.Parallel()
	assert.Equal(t, client.OperationKey{Key: "workflow-8472:create-ticket", WorkflowRunID: "workflow-8472", StepID: "create-ticket"},
		client.Key("workflow-8472", "create-ticket"))
	f := newFake(t, operation(http.StatusCreated, "SUCCEEDED"))
	c := newClient(t, f.URL, "idg_test")
	keys := []string{"plain", `"quoted"`, `back\slash`, " spaced ", `a"b\c`}
	for _, k := range keys {
		_, err := c.Do(t.Context(), "tickets.create", ticket, client.PlainKey(k))
		require.NoError(t, err)
	}
	for i, r := range f.requests() {
		got, err := headers.ParseIdempotencyKey([]string{r.key})
		require.NoError(t, err, r.key)
		assert.Equal(t, keys[i], got)
		assert.NotContains(t, r.body, "workflow_run_id", "a plain key belongs to no workflow")
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://x", "http://"} {
		_, err := client.New(bad, "k")
		assert.Error(t, err, bad)
	}
	_, err := client.New("http://127.0.0.1:8080/", "k")
	assert.NoError(t, err)
	assert.False(t, errors.Is(client.ErrOperationFailed, client.ErrInternal))
}

// TestResumeNoticesAnotherCall (issue 50 item 9): an operation recorded under the key for
// another tool or other params is not the step's: Resume says so with ErrKeyMismatch (as POST
// answers 422), returning the recorded operation. The same params spelled differently (key
// order, 1 and 1.0, a null member left out), and a masked sensitive value, are the same call.
func TestResumeNoticesAnotherCall(t *testing.T) {
	t.Parallel()
	key := client.Key("wf-1", "create-ticket")
	for _, c := range []struct {
		name   string
		tool   string
		params any
		same   bool
	}{
		{"the same call", "tickets.create", ticket, true},
		{"a null member left out", "tickets.create", map[string]any{"subject": "Printer on fire", "priority": nil}, true},
		{"other params", "tickets.create", map[string]any{"subject": "Refund for order 1042"}, false},
		{"another param too", "tickets.create", map[string]any{"subject": "Printer on fire", "priority": "high"}, false},
		{"another tool", "refunds.issue", ticket, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, operation(http.StatusOK, "SUCCEEDED"))
			op, err := newClient(t, f.URL, "idg_test").Resume(t.Context(), c.tool, c.params, key)
			if c.same {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, client.ErrKeyMismatch)
			require.NotNil(t, op, "the recorded operation comes with the error")
			assert.Equal(t, opID, op.ID)
			var p *client.Problem
			require.ErrorAs(t, err, &p)
			assert.Equal(t, 422, p.Status)
			assert.Equal(t, opID, p.OperationID)
		})
	}
}
