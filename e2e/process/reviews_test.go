package process_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An UNKNOWN operation is escalated while a reconcile probe of it is in flight; the probe then
// finds the refund. The operation leaves UNKNOWN, so the review that asked about its outcome
// must be closed with it: a SUCCEEDED operation with an open unknown_outcome review sits in the
// review queue forever, asking reviewers a question that was already answered.
func TestReviewOpenedDuringProbeIsClosedWhenProbeSettles(t *testing.T) {
	reviewOpenedDuringProbeIsClosed(t, newStack(t, reviewDuringProbeOptions))
}

// escalate_after 0s: the escalator opens the review at its next tick (≤ 1 s); the look-up
// takes 1.8 s, so the review opens while the probe is in flight.
var reviewDuringProbeOptions = stackOptions{Timeout: "2s", Escalate: "0s"}

// reviewOpenedDuringProbeIsClosed is TestReviewOpenedDuringProbeIsClosedWhenProbeSettles on
// the stack s, made with reviewDuringProbeOptions.
func reviewOpenedDuringProbeIsClosed(t *testing.T, s *stack) {
	a := s.serve(t, "A")
	s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/refunds", Method: "POST", Count: 1})
	s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Path: "/refunds", Method: "GET", Count: 1, Delay: 1800 * time.Millisecond})

	r := s.mustPost(t, a.URL, "order-10:refund", "refunds.issue", refundParams, wait0)
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
	id := r.id()
	s.waitState(t, a.URL, id, "SUCCEEDED", 30*time.Second)
	assert.Equal(t, 1, s.sb.Committed("refunds"))

	evs := s.events(t, a.URL, id)
	types := eventTypes(evs)
	// The premise: escalated between the probe's start and its outcome.
	started, escalated, finished := -1, -1, -1
	for i, e := range evs {
		switch e["type"] {
		case "reconcile_started":
			if started < 0 {
				started = i
			}
		case "escalated":
			escalated = i
		case "reconcile_finished":
			finished = i
		}
	}
	require.True(t, started >= 0 && started < escalated && escalated < finished,
		"premise: the review must open while the probe is in flight: %v", types)

	op := s.op(t, a.URL, id)
	review, ok := op["review"].(map[string]any)
	require.True(t, ok, "the operation shows its review: %v", op["review"])
	assert.Equal(t, "unknown_outcome", review["reason"])
	if !assert.Equal(t, "resolved", review["status"],
		"BUG: the operation is SUCCEEDED but its unknown_outcome review is still open (timeline %v)", types) {
		row := s.row(t, id)
		t.Logf("operation %s: state %s, review_id %v; RecordProbe closes the review only when the probe's copy of "+
			"the row (read by ClaimProbes, before the escalator set review_id) has ReviewID set", id, row.State, *row.ReviewID)
	}
}

// An operation that reaches UNKNOWN after it already had a review (a first UNKNOWN episode a
// reviewer settled, or the approval it needed) must be escalated again: docs/STATES.md wants a review
// for every UNKNOWN older than escalate_after, at once for a tool with no look-up, and the
// recovery invariant is "terminal, or UNKNOWN with an open review". Nothing else can ever
// settle these operations.
func TestUnknownAfterAnEarlierReviewIsEscalated(t *testing.T) {
	payouts := `  - name: payouts.send
    description: Pay out money; needs an approval; no look-up
    effect: write
    params_schema: {type: object}
    http:
      url: "$SANDBOX/refunds"
      timeout: 1s
    review: {require_approval: true}
`
	reviewer := func(s *stack, id, reason string) models.Action {
		return models.Action{Scope: models.AllTenants(), Tenant: s.tenant, OperationID: id, Actor: "user:reviewer@example.com", Reason: reason}
	}

	t.Run("second UNKNOWN after a reviewer confirmed not executed", func(t *testing.T) {
		s := newStack(t, stackOptions{})
		a := s.serve(t, "A")
		// Both attempts answer 500 without sending anything: ambiguous, hence UNKNOWN each time.
		s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeError, Path: "/emails", Method: "POST", Count: 2})

		r := s.mustPost(t, a.URL, "welcome-1:email", "email.send", emailParams, wait0)
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
		id := r.id()
		s.waitRow(t, id, "the first UNKNOWN escalated", 30*time.Second, func(op *models.Operation) bool {
			return op.State == models.StateUnknown && op.Review != nil && op.Review.Status == models.ReviewOpen
		})

		// A reviewer finds that the email was not sent: back to PENDING, retried.
		act := reviewer(s, id, "mail log shows nothing")
		act.ExpectedState, act.ExpectedAttempts = models.StateUnknown, 1 // what the reviewer saw
		_, err := s.ledger.ConfirmNotExecuted(context.Background(), act)
		require.NoError(t, err)
		s.waitRow(t, id, "the retry to end UNKNOWN again", 30*time.Second, func(op *models.Operation) bool {
			return op.State == models.StateUnknown && op.Attempts == 2
		})
		requireEscalated(t, s, a, id)
	})

	t.Run("UNKNOWN after the approval it needed", func(t *testing.T) {
		s := newStack(t, stackOptions{Extra: payouts})
		a := s.serve(t, "A")
		s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeError, Path: "/refunds", Method: "POST", Count: 1})

		r := s.mustPost(t, a.URL, "payout-1", "payouts.send", `{"order_id":"o-1","amount_cents":100,"currency":"EUR"}`, wait0)
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
		id := r.id()
		require.Equal(t, "AWAITING_APPROVAL", r.obj(t)["state"])
		act := reviewer(s, id, "looks right")
		act.ExpectedState = models.StateAwaitingApproval
		_, err := s.ledger.Approve(context.Background(), act, 1, time.Hour)
		require.NoError(t, err)
		s.waitRow(t, id, "the approved payout to end UNKNOWN", 30*time.Second, func(op *models.Operation) bool {
			return op.State == models.StateUnknown
		})
		requireEscalated(t, s, a, id)
	})
}

// requireEscalated gives the escalator (every second) several rounds to open a review of the
// UNKNOWN operation id.
func requireEscalated(t *testing.T, s *stack, a *proctest.Process, id string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var op *models.Operation
	for time.Now().Before(deadline) {
		op = s.row(t, id)
		if op.Review != nil && op.Review.Status == models.ReviewOpen {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, models.StateUnknown, op.State)
	require.NotNil(t, op.Review, "the operation shows a review")
	got := s.op(t, a.URL, id)
	assert.Equal(t, models.ReviewOpen, op.Review.Status,
		"BUG: UNKNOWN with no open review: its only review (%s, %s) was resolved earlier, and the escalator "+
			"(Ledger.Unresolved) and OpenReview only consider operations with review_id IS NULL, while resolving a "+
			"review never clears operations.review_id. API view: state %v, review %v",
		op.Review.ID, op.Review.Reason, got["state"], got["review"])
}
