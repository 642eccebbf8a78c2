package process_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// onlyLookupsAfterFirstPost checks that the downstream saw exactly one POST, first, and
// nothing but GET look-ups afterwards.
func onlyLookupsAfterFirstPost(t *testing.T, methods []string) {
	t.Helper()
	require.NotEmpty(t, methods)
	assert.Equal(t, "POST", methods[0], "the first request is the attempt")
	for i, m := range methods[1:] {
		assert.Equal(t, "GET", m, "request %d after the attempt must be a reconcile look-up; all: %v", i+2, methods)
	}
}

// SIGKILL of the process after the downstream committed and before the outcome was recorded.
// A new process on the same database must find the operation through the lease reaper and the
// reconciler, never by sending the refund again.
func TestKilledAfterCommitIsReconciledAfterRestart(t *testing.T) {
	killedAfterCommitIsReconciled(t, newStack(t, killedAfterCommitOptions))
}

// A 2 s timeout leaves ample room between the commit and the SIGKILL on a loaded machine:
// the attempt must still be in flight when the process dies.
var killedAfterCommitOptions = stackOptions{Timeout: "2s"}

// killedAfterCommitIsReconciled is TestKilledAfterCommitIsReconciledAfterRestart on the stack
// s, made with killedAfterCommitOptions.
func killedAfterCommitIsReconciled(t *testing.T, s *stack) {
	a := s.serve(t, "A")
	s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeHangAfterCommit, Path: "/refunds", Method: "POST", Count: 1, Delay: time.Minute})

	r := s.mustPost(t, a.URL, "order-1:refund", "refunds.issue", refundParams, wait0)
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
	id := r.id()
	eventually(t, 30*time.Second, "the downstream to commit the refund", func() (bool, string) {
		return s.sb.Committed("refunds") == 1, ""
	})
	killedAt := time.Now()
	a.Kill(t)

	// The premise: the outcome was never recorded. The row still says RUNNING, leased to A.
	row := s.row(t, id)
	require.Equal(t, models.StateRunning, row.State, "the attempt must have been in flight at the kill")
	require.NotNil(t, row.LeaseExpiresAt)
	leaseLeft := time.Until(*row.LeaseExpiresAt)

	restartAt := time.Now()
	b := s.serve(t, "B")
	readyAt := time.Now()
	s.waitState(t, b.URL, id, "SUCCEEDED", 60*time.Second)
	doneAt := time.Now()
	t.Logf("crash → SUCCEEDED: %s after SIGKILL, %s after restart (process ready after %s), lease had %s left at the kill",
		doneAt.Sub(killedAt).Round(time.Millisecond), doneAt.Sub(restartAt).Round(time.Millisecond),
		readyAt.Sub(restartAt).Round(time.Millisecond), leaseLeft.Round(time.Millisecond))

	op := s.op(t, b.URL, id)
	assert.EqualValues(t, 1, op["attempts"], "no second attempt")
	assert.Equal(t, "R-5001", op["downstream_ref"])
	assert.Equal(t, 1, s.sb.Committed("refunds"), "exactly one refund")
	onlyLookupsAfterFirstPost(t, s.methods("/refunds"))

	evs := s.events(t, b.URL, id)
	assert.True(t, hasEvent(evs, "state_changed", "reason", "lease_expired"), "the reaper moved it to UNKNOWN: %v", eventTypes(evs))
	assert.True(t, hasEvent(evs, "state_changed", "lease_owner", a.Worker), "the reap names the dead worker: %v", eventTypes(evs))
	assert.True(t, hasEvent(evs, "reconcile_finished", "outcome", "found"), "%v", eventTypes(evs))
}

// A tool without key support times out after the downstream committed: UNKNOWN, reconciled,
// and never retried.
func TestDropAfterCommitWithoutKeySupportIsReconciled(t *testing.T) {
	s := newStack(t, stackOptions{})
	a := s.serve(t, "A")
	s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/refunds", Method: "POST", Count: 1})

	r := s.mustPost(t, a.URL, "order-2:refund", "refunds.issue", refundParams, nil)
	// The request may answer inside its wait (SUCCEEDED after reconciliation), or 202.
	require.Contains(t, []int{http.StatusCreated, http.StatusAccepted}, r.Status, "%s", r.Body)
	id := r.id()
	took := s.waitState(t, a.URL, id, "SUCCEEDED", 30*time.Second)
	t.Logf("dropped answer → SUCCEEDED %s after the POST answered", took.Round(time.Millisecond))

	op := s.op(t, a.URL, id)
	assert.EqualValues(t, 1, op["attempts"])
	assert.Equal(t, "R-5001", op["downstream_ref"])
	assert.Equal(t, 1, s.sb.Committed("refunds"))
	onlyLookupsAfterFirstPost(t, s.methods("/refunds"))
	evs := s.events(t, a.URL, id)
	assert.Contains(t, eventTypes(evs), "state_changed[RUNNING→UNKNOWN]")
	assert.True(t, hasEvent(evs, "reconcile_finished", "outcome", "found"), "%v", eventTypes(evs))
}

// A timeout before anything was committed: the look-up finds nothing; once settle has passed
// that proves the refund was not made, and it is retried once.
func TestTimeoutBeforeCommitIsRetriedOnceAfterSettle(t *testing.T) {
	s := newStack(t, stackOptions{})
	a := s.serve(t, "A")
	s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeHang, Path: "/refunds", Method: "POST", Count: 1})

	r := s.mustPost(t, a.URL, "order-3:refund", "refunds.issue", refundParams, wait0)
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
	id := r.id()
	took := s.waitState(t, a.URL, id, "SUCCEEDED", 30*time.Second)
	t.Logf("hang → SUCCEEDED in %s", took.Round(time.Millisecond))

	op := s.op(t, a.URL, id)
	assert.EqualValues(t, 2, op["attempts"], "retried exactly once")
	assert.Equal(t, 1, s.sb.Committed("refunds"), "one refund")
	assert.Equal(t, 2, s.count("/refunds", "POST"), "two POSTs: the hung one and the retry")

	evs := s.events(t, a.URL, id)
	types := eventTypes(evs)
	assert.Contains(t, types, "state_changed[RUNNING→UNKNOWN]")
	assert.True(t, hasEvent(evs, "reconcile_finished", "outcome", "not_found"), "%v", types)
	assert.Contains(t, types, "reconcile_finished[UNKNOWN→PENDING](not_found)")
	// The retry started only after the settle window had passed since the operation became
	// UNKNOWN.
	var unknownAt, pendingAt time.Time
	for _, e := range evs {
		at, _ := time.Parse(time.RFC3339Nano, e["at"].(string))
		switch {
		case e["to_state"] == "UNKNOWN" && unknownAt.IsZero():
			unknownAt = at
		case e["to_state"] == "PENDING" && pendingAt.IsZero():
			pendingAt = at
		}
	}
	// Two instants the ledger recorded, in order: the not-found was taken as proof only at or
	// after UNKNOWN + settle (300 ms in this catalogue). The rule itself is TestDecideProbe's,
	// on a fixed clock.
	require.False(t, unknownAt.IsZero() || pendingAt.IsZero(), "events: %v", types)
	assert.False(t, pendingAt.Before(unknownAt.Add(300*time.Millisecond)),
		"proven not executed only after settle: UNKNOWN at %s, PENDING at %s", unknownAt, pendingAt)
}

// A restart while an operation is UNKNOWN and its reconcile endpoint fails: the new process
// takes up reconciliation where the old one left it.
func TestRestartWhileReconcileEndpointFails(t *testing.T) {
	s := newStack(t, stackOptions{})
	a := s.serve(t, "A")
	s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/refunds", Method: "POST", Count: 1})
	s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeError, Path: "/refunds", Method: "GET", Count: 0})

	r := s.mustPost(t, a.URL, "order-4:refund", "refunds.issue", refundParams, wait0)
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
	id := r.id()
	eventually(t, 30*time.Second, "two failed look-ups", func() (bool, string) {
		n := 0
		for _, q := range s.sb.Requests("/refunds") {
			if q.Method == "GET" && q.Fault == sandbox.ModeError {
				n++
			}
		}
		return n >= 2, ""
	})
	took := a.Terminate(t, 30*time.Second)
	t.Logf("SIGTERM → exit in %s (exit code %d)", took.Round(time.Millisecond), a.ExitCode())
	assert.Equal(t, 0, a.ExitCode(), "graceful shutdown exits 0")
	row := s.row(t, id)
	require.Equal(t, models.StateUnknown, row.State, "still UNKNOWN while the look-up fails")

	s.sb.ClearFaults()
	restartAt := time.Now()
	b := s.serve(t, "B")
	s.waitState(t, b.URL, id, "SUCCEEDED", 60*time.Second)
	t.Logf("restart → SUCCEEDED in %s (the next probe was due %s after the restart)",
		time.Since(restartAt).Round(time.Millisecond), row.NextProbeAt.Sub(restartAt).Round(time.Millisecond))

	op := s.op(t, b.URL, id)
	assert.EqualValues(t, 1, op["attempts"])
	assert.Equal(t, 1, s.sb.Committed("refunds"))
	onlyLookupsAfterFirstPost(t, s.methods("/refunds"))
	evs := s.events(t, b.URL, id)
	assert.True(t, hasEvent(evs, "reconcile_finished", "outcome", "error"), "%v", eventTypes(evs))
	assert.True(t, hasEvent(evs, "reconcile_finished", "outcome", "found"), "%v", eventTypes(evs))
}

// SIGTERM while an attempt is in flight: the process lets it end (or, past the grace period,
// abandons it to recovery) and leaves nothing RUNNING under a live-looking lease; a later
// process resolves the operation.
func TestGracefulShutdownDuringAttempt(t *testing.T) {
	t.Run("attempt ends within the grace period", func(t *testing.T) {
		s := newStack(t, stackOptions{})
		a := s.serve(t, "A")
		s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeHang, Path: "/refunds", Method: "POST", Count: 1})
		r := s.mustPost(t, a.URL, "order-5:refund", "refunds.issue", refundParams, wait0)
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
		id := r.id()
		eventually(t, 30*time.Second, "the attempt to reach the downstream", func() (bool, string) {
			return s.count("/refunds", "POST") == 1, ""
		})
		took := a.Terminate(t, 30*time.Second)
		t.Logf("SIGTERM with an attempt in flight → exit in %s", took.Round(time.Millisecond))
		assert.Equal(t, 0, a.ExitCode())
		noLiveLease(t, s.row(t, id))

		b := s.serve(t, "B")
		s.waitState(t, b.URL, id, "SUCCEEDED", 60*time.Second)
		assert.Equal(t, 1, s.sb.Committed("refunds"))
		assert.EqualValues(t, 2, s.op(t, b.URL, id)["attempts"], "the hung attempt committed nothing: retried once")
	})

	t.Run("attempt outlives the grace period", func(t *testing.T) {
		// refunds.slow waits up to 15 s for an answer, longer than serve's 10 s grace: the
		// process must give up on it, record UNKNOWN (the request left), and exit.
		s := newStack(t, stackOptions{Extra: `  - name: refunds.slow
    description: A refund whose downstream may take long
    effect: write
    params_schema: {type: object}
    http:
      url: "$SANDBOX/refunds"
      timeout: 15s
      result_reference: /id
    reconcile:
      url: "$SANDBOX/refunds?reference={{.OperationID}}"
      settle: 300ms
`})
		a := s.serve(t, "A")
		s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeHangAfterCommit, Path: "/refunds", Method: "POST", Count: 1, Delay: time.Minute})
		r := s.mustPost(t, a.URL, "order-6:refund", "refunds.slow", refundParams, wait0)
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
		id := r.id()
		eventually(t, 30*time.Second, "the downstream to commit", func() (bool, string) {
			return s.sb.Committed("refunds") == 1, ""
		})
		took := a.Terminate(t, 60*time.Second)
		t.Logf("SIGTERM with a 15 s attempt in flight → exit in %s", took.Round(time.Millisecond))
		assert.Equal(t, 0, a.ExitCode())
		row := s.row(t, id)
		noLiveLease(t, row)
		assert.Equal(t, models.StateUnknown, row.State, "an abandoned attempt's request left: UNKNOWN")

		b := s.serve(t, "B")
		s.waitState(t, b.URL, id, "SUCCEEDED", 60*time.Second)
		assert.Equal(t, 1, s.sb.Committed("refunds"))
		assert.Equal(t, 1, s.count("/refunds", "POST"), "never sent again")
	})
}

// noLiveLease checks that an operation is not left RUNNING under a lease that still looks
// alive after its process exited.
func noLiveLease(t *testing.T, op *models.Operation) {
	t.Helper()
	if op.State != models.StateRunning {
		t.Logf("after exit: %s (lease owner %v)", op.State, op.LeaseOwner)
		assert.Nil(t, op.LeaseOwner, "a lease outside RUNNING")
		return
	}
	require.NotNil(t, op.LeaseExpiresAt, "RUNNING without a lease")
	assert.False(t, op.LeaseExpiresAt.After(time.Now()), "left RUNNING with a live lease until %s", op.LeaseExpiresAt)
}
