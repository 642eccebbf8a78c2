package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestApprovals(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})

		t.Run("two distinct reviewers are needed; the same one twice is refused", func(t *testing.T) {
			op := desk.awaiting(t, "payouts.dual", "payout-7")
			page := desk.rita.Get(t, "/operations/"+op.ID)
			assert.Equal(t, []string{"0 of 2 approvals"}, page.TestIDs("approvals-count"))
			assert.Equal(t, []string{"approve", "reject"}, page.Attrs("action", "data-action"))

			require.Equal(t, http.StatusSeeOther, act(t, desk.rita, op, models.ActionApprove, nil).Status)
			rec := desk.record(t, op)
			assert.Equal(t, models.StateAwaitingApproval, rec.Op.State, "one approval of two")
			page = desk.rita.Get(t, "/operations/"+op.ID)
			assert.Contains(t, strings.Join(page.TestIDs("notice"), ""), "Approval recorded: 1 of 2.")
			assert.Equal(t, []string{"1 of 2 approvals"}, page.TestIDs("approvals-count"))
			assert.Equal(t, []string{"rita@example.com"}, trimUser(page.TestIDs("approvers")))
			assert.Equal(t, []string{"reject"}, page.Attrs("action", "data-action"), "no approve form for who approved")
			assert.Contains(t, strings.Join(page.TestIDs("approval-note"), ""), "You have approved it.")
			// Her reason is read once: in the approvals box, where the second approver looks; the
			// timeline's row of her approval points there, the audit log's entries are folded.
			why := "Checked in the payment system: " + models.ActionApprove
			assert.Equal(t, []string{"rita@example.com: “" + why + "”"}, page.TestIDs("approver-reason"))
			assert.NotContains(t, strings.Join(page.TestIDs("timeline-quote"), ""), why)
			assert.Contains(t, strings.Join(page.TestIDs("timeline-entry"), ""), "Their reason is quoted under Approvals, above.")
			assert.Equal(t, []bool{false}, page.HasAttr("operation-audit", "open"), "the audit log's entries folded")

			p := refused(t, desk.rita, op, act(t, desk.rita, op, models.ActionApprove, nil))
			assert.Contains(t, strings.Join(p.TestIDs("notice"), ""), "has already approved this operation")
			rec = desk.record(t, op)
			assert.Equal(t, models.StateAwaitingApproval, rec.Op.State)
			assert.Equal(t, []string{desk.ritaID + " approve"}, reviewActions(rec))

			require.Equal(t, http.StatusSeeOther, act(t, desk.ravi, op, models.ActionApprove, nil).Status)
			rec = desk.record(t, op)
			assert.Equal(t, models.StatePending, rec.Op.State, "two distinct approvals")
			assert.Equal(t, []string{desk.ritaID + " approve", desk.raviID + " approve"}, reviewActions(rec))
			assert.Equal(t, []string{desk.ritaID + " review.approve ok", desk.ritaID + " review.approve refused",
				desk.raviID + " review.approve ok"}, audits(rec))
		})
		t.Run("the second approver sees where the money goes", func(t *testing.T) {
			op := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "payout-iban", Tool: "payouts.dual",
				Params: `{"amount_cents":480000,"currency":"EUR","iban":"DE89 3704 0044 0532 0130 00","order_id":"7702"}`, NeedsApproval: true})
			require.Equal(t, http.StatusSeeOther, act(t, desk.rita, op, models.ActionApprove, nil).Status)
			page := desk.ravi.Get(t, "/operations/"+op.ID)
			assert.Equal(t, []string{"To the account or card ending in 3000: check it is the one meant."}, page.TestIDs("approval-ending"))
			assert.Equal(t, []string{"Approve 4,800.00 EUR"}, page.TestIDs("action-submit-approve"), "the amount on the button")
			plain := desk.awaiting(t, "payouts.dual", "payout-no-account")
			assert.Empty(t, desk.ravi.Get(t, "/operations/"+plain.ID).TestIDs("approval-ending"), "nothing said where nothing is known")
		})
		t.Run("reject ends it", func(t *testing.T) {
			op := desk.awaiting(t, "payments.payout", "payout-8")
			require.Equal(t, http.StatusSeeOther, act(t, desk.rita, op, models.ActionReject, nil).Status)
			rec := desk.record(t, op)
			assert.Equal(t, models.StateFailedFinal, rec.Op.State)
			assert.Equal(t, []string{desk.ritaID + " reject"}, reviewActions(rec))
			assert.Equal(t, []string{desk.ritaID + " review.reject ok"}, audits(rec))
			refused(t, desk.ravi, op, act(t, desk.ravi, op, models.ActionApprove, nil)) // too late to approve
		})
		t.Run("approve and reject are refused to auditors and outside the tenant", func(t *testing.T) {
			op := desk.awaiting(t, "payments.payout", "payout-9")
			assert.Equal(t, http.StatusForbidden, act(t, desk.aud, op, models.ActionApprove, nil).Status)
			assert.Equal(t, http.StatusForbidden, act(t, desk.aud, op, models.ActionReject, nil).Status)
			theirs := desk.con.Operation(t, consoletest.Seed{Tenant: "globex", Key: "payout-9", Tool: "payments.payout",
				Params: `{"amount_cents":1,"currency":"EUR","order_id":"9"}`, NeedsApproval: true})
			assert.Equal(t, http.StatusNotFound, act(t, desk.rita, theirs, models.ActionApprove, nil).Status)
			assert.Equal(t, http.StatusNotFound, act(t, desk.rita, theirs, models.ActionReject, nil).Status)
			assert.Equal(t, models.StateAwaitingApproval, desk.record(t, op).Op.State)
			assert.Equal(t, models.StateAwaitingApproval, desk.record(t, theirs).Op.State)
		})
		t.Run("approve needs a reason", func(t *testing.T) {
			op := desk.awaiting(t, "payments.payout", "payout-10")
			refused(t, desk.rita, op, act(t, desk.rita, op, models.ActionApprove, url.Values{"reason": {""}}))
			assert.Empty(t, reviewActions(desk.record(t, op)))
		})
	})
}

// A compensation is proposed by one reviewer, cannot be approved by the same one (four eyes),
// is approved by another, and then runs once at the real downstream.
func TestCompensationFourEyes(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{Downstream: true})
		ticket := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1042:ticket", Tool: "tickets.create",
			Params: `{"subject":"Refund for order 1042"}`})
		ticket = waitState(t, desk, ticket, models.StateSucceeded)
		require.Equal(t, 1, desk.con.Sandbox.Committed("tickets"))

		page := desk.rita.Get(t, "/operations/"+ticket.ID)
		assert.Equal(t, []string{"propose_compensation"}, page.Attrs("action", "data-action"))
		assert.Empty(t, desk.aud.Get(t, "/operations/"+ticket.ID).Attrs("action", "data-action"), "auditors cannot propose")
		assert.Equal(t, http.StatusForbidden, act(t, desk.aud, ticket, "propose_compensation", nil).Status)
		refused(t, desk.rita, ticket, act(t, desk.rita, ticket, "propose_compensation", url.Values{"reason": {""}}))

		p := act(t, desk.rita, ticket, "propose_compensation", url.Values{"reason": {"The customer withdrew the request"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		rec := desk.record(t, ticket)
		require.NotNil(t, rec.CompensatedBy)
		comp := rec.CompensatedBy
		assert.Equal(t, "/operations/"+comp.ID, p.Header.Get("Location"), "to the new compensation")
		assert.Equal(t, "compensate:"+ticket.ID, comp.Key)
		assert.Equal(t, models.StateAwaitingApproval, comp.State)
		assert.Equal(t, []string{desk.ritaID + " review.propose_compensation refused", desk.ritaID + " review.propose_compensation ok"},
			audits(rec), "the proposal without a reason was refused")

		again := act(t, desk.rita, ticket, "propose_compensation", nil)
		require.Equal(t, http.StatusSeeOther, again.Status, "a resubmitted proposal goes to the same compensation")
		assert.Equal(t, "/operations/"+comp.ID, again.Header.Get("Location"))

		page = desk.rita.Get(t, "/operations/"+comp.ID)
		assert.Equal(t, []string{"reject"}, page.Attrs("action", "data-action"), "the proposer is not offered approve")
		assert.Contains(t, strings.Join(page.TestIDs("approval-note"), ""), "You proposed this compensation")
		fourEyes := refused(t, desk.rita, comp, act(t, desk.rita, comp, models.ActionApprove, nil))
		assert.Contains(t, strings.Join(fourEyes.TestIDs("notice"), ""), "Four eyes")
		assert.Equal(t, models.StateAwaitingApproval, desk.record(t, comp).Op.State)

		require.Equal(t, http.StatusSeeOther, act(t, desk.ravi, comp, models.ActionApprove, nil).Status)
		waitState(t, desk, comp, models.StateSucceeded)
		assert.Equal(t, 1, desk.con.Sandbox.Committed("closes"), "the compensation ran once")
		assert.Equal(t, []string{desk.ritaID + " review.approve refused", desk.raviID + " review.approve ok"}, audits(desk.record(t, comp)))
	})
}

// waitState waits until op reaches state and returns it as it is then.
func waitState(t *testing.T, desk reviewDesk, op *models.Operation, state models.State) *models.Operation {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		rec := desk.record(t, op)
		if rec.Op.State == state {
			return rec.Op
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s, not %s, after 15 s", op.Key, rec.Op.State, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// trimUser drops the user: prefix of actors.
func trimUser(actors []string) []string {
	var out []string
	for _, a := range actors {
		out = append(out, strings.TrimPrefix(a, "user:"))
	}
	return out
}

// A compensation whose key is already held by another operation (an agent's, recorded before
// the compensate: prefix was reserved) cannot be proposed: the console answers with the
// operation's page and a 409, never a 500, and nothing is recorded or sent downstream.
func TestProposalWhoseKeyIsTaken(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{Downstream: true})
		ticket := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-7:ticket", Tool: "tickets.create",
			Params: `{"subject":"Refund for order 7"}`})
		ticket = waitState(t, desk, ticket, models.StateSucceeded)
		squatter := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "compensate:" + ticket.ID, Tool: "tickets.close",
			Params: `{"ticket_id":"T-0"}`, NeedsApproval: true})
		ops, _, err := desk.con.Ledger.SearchOperations(t.Context(), models.AllTenants(), models.Search{Limit: 100})
		require.NoError(t, err)

		p := refused(t, desk.rita, ticket, act(t, desk.rita, ticket, "propose_compensation", url.Values{"reason": {"The customer withdrew the request"}}))
		assert.Contains(t, strings.Join(p.TestIDs("notice"), ""), "already taken")
		rec := desk.record(t, ticket)
		assert.Nil(t, rec.CompensatedBy, "no compensation was linked")
		assert.Equal(t, []string{desk.ritaID + " review.propose_compensation refused"}, audits(rec))
		after, _, err := desk.con.Ledger.SearchOperations(t.Context(), models.AllTenants(), models.Search{Limit: 100})
		require.NoError(t, err)
		assert.Len(t, after, len(ops), "nothing was recorded")
		assert.Equal(t, models.StateAwaitingApproval, desk.record(t, squatter).Op.State, "the squatter is untouched")
		assert.Equal(t, 0, desk.con.Sandbox.Committed("closes"), "nothing was sent downstream")
	})
}
