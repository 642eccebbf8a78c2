package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every operation page leads with what is at stake: the tool's summary with the formatted
// amount, the downstream it calls and the agent's reason; the approve and retry buttons name
// the amount. The queue row carries the reason too.
func TestOperationPageLeadsWithTheStakes(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		payout := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-7702:payout", Tool: "payouts.dual",
			Params: `{"amount_cents":480000,"currency":"EUR","order_id":"7702"}`, NeedsApproval: true,
			Justification: "The supplier's invoice 7702 is due today; the contract is in the shared drive."})
		refund := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1044:refund", Tool: "refunds.issue",
			Params: `{"amount_cents":4200,"currency":"EUR","order_id":"1044"}`, Unknown: true, Review: true})
		email := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "reset:maria", Tool: "email.send",
			Params: `{"to":"maria.rossi@example.com","subject":"Reset your password","body":"…"}`, Unknown: true, Review: true})

		page := desk.rita.Get(t, "/operations/"+payout.ID)
		require.Equal(t, http.StatusOK, page.Status)
		assert.Equal(t, []string{"4,800.00 EUR for order 7702"}, page.TestIDs("operation-headline"))
		assert.Equal(t, []string{"order-7702:payout"}, page.TestIDs("operation-key"), "the key is still there, under the headline")
		assert.Contains(t, strings.Join(page.TestIDs("operation-justification"), ""), "invoice 7702 is due today")
		assert.Contains(t, strings.Join(page.TestIDs("operation-downstream"), ""), "calls 127.0.0.1")
		assert.Contains(t, page.Body, "Approve 4,800.00 EUR", "the approve button names the amount")

		page = desk.rita.Get(t, "/operations/"+refund.ID)
		assert.Equal(t, []string{"42.00 EUR to order 1044"}, page.TestIDs("operation-headline"))
		assert.Contains(t, page.Body, "Retry 42.00 EUR: it is not there", "the risky retry names the amount")

		page = desk.rita.Get(t, "/operations/"+email.ID)
		assert.Equal(t, []string{"To maria.rossi@example.com: Reset your password"}, page.TestIDs("operation-headline"))
		assert.Empty(t, page.TestIDs("operation-justification"), "no reason given, none shown")

		queue := desk.rita.Get(t, "/reviews")
		assert.Contains(t, strings.Join(queue.TestIDs("review-justification"), "|"), "invoice 7702 is due today")

		// A reason that reorders itself on screen shows what it holds, on the page and in the queue.
		tricky := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1045:refund", Tool: "refunds.issue",
			Params: `{"amount_cents":100,"currency":"EUR","order_id":"1045"}`, Unknown: true, Review: true,
			Justification: "Refund 1 EUR\u202e00001\u202c as agreed"})
		page = desk.rita.Get(t, "/operations/"+tricky.ID)
		assert.Contains(t, strings.Join(page.TestIDs("operation-justification"), ""), "Refund 1 EUR⟨U+202E⟩00001⟨U+202C⟩ as agreed")
		assert.NotContains(t, page.Body, "\u202e")
		queue = desk.rita.Get(t, "/reviews")
		assert.Contains(t, strings.Join(queue.TestIDs("review-justification"), "|"), "⟨U+202E⟩00001⟨U+202C⟩")
		assert.NotContains(t, queue.Body, "\u202e")
		assert.NotContains(t, queue.Body, `<th scope="col">Tenant</th>`, "a one-tenant viewer has no tenant column")
		assert.Contains(t, desk.ravi.Get(t, "/reviews").Body, `<th scope="col">Tenant</th>`, "a viewer of every tenant has one")

		// The second approver sees the first one's reason, the claim and the deadline.
		require.Equal(t, http.StatusSeeOther, act(t, desk.rita, payout, models.ActionApprove,
			url.Values{"reason": {"Invoice 7702 matches the contract."}}).Status)
		page = desk.ravi.Get(t, "/operations/"+payout.ID)
		assert.Equal(t, []string{"rita@example.com: “Invoice 7702 matches the contract.”"}, page.TestIDs("approver-reason"))
		assert.Equal(t, []string{"Nobody has taken this review."}, page.TestIDs("operation-claim-text"))
		assert.Equal(t, []string{"lapses in 1 h"}, page.TestIDs("operation-lapses"))
		taken := desk.ravi.Post(t, "/operations/"+payout.ID+"/claim", url.Values{"next": {"/operations/" + payout.ID}})
		require.Equal(t, http.StatusSeeOther, taken.Status)
		page = desk.ravi.Get(t, "/operations/"+payout.ID)
		assert.Contains(t, strings.Join(page.TestIDs("operation-claim-text"), ""), "You have it · 30 min left")
		assert.NotEmpty(t, page.TestIDs("operation-release"))
		page = desk.rita.Get(t, "/operations/"+payout.ID)
		assert.Contains(t, strings.Join(page.TestIDs("operation-claim-text"), ""), "ravi@example.com has it")
		assert.Empty(t, page.TestIDs("operation-claim-form"), "someone else's claim offers no form")
	})
}

// What happened is said as what is known: an ambiguous answer leads with the uncertainty and
// names the effect in question, which differs between an email and a refund.
func TestOutcomeSaysWhatIsKnown(t *testing.T) {
	t.Parallel()
	desk := newReviewDesk(t, models.SQLite, consoletest.Options{})
	email := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "reset:ann", Tool: "email.send",
		Params: `{"to":"ann@example.com","subject":"Reset","body":"…"}`, Unknown: true, Review: true})
	refund := desk.unknown(t, "acme", "order-9:refund")
	for op, want := range map[*models.Operation]string{
		email:  "The request reached the email service, which answered HTTP 504: it is not known whether the email went out.",
		refund: "The request reached the refunds service, which answered HTTP 504: it is not known whether the refund was made.",
	} {
		page := desk.rita.Get(t, "/operations/"+op.ID)
		assert.Equal(t, []string{want}, page.TestIDs("situation-outcome"), op.Key)
		assert.NotContains(t, strings.Join(page.TestIDs("situation-outcome"), ""), "Sent;")
	}
}

// A compensation in the queue is named by what it undoes, not by its own compensate:op_… key.
func TestQueueNamesACompensationByWhatItUndoes(t *testing.T) {
	t.Parallel()
	desk := newReviewDesk(t, models.SQLite, consoletest.Options{})
	ticket := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "support-5514", Tool: "tickets.create",
		Params: `{"subject":"Parcel lost"}`, Outcome: &models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201,
			To: models.StateSucceeded, Result: []byte(`{"id":"T-1003"}`), DownstreamRef: "T-1003"}})
	comp, err := desk.con.Executor.ProposeCompensation(t.Context(), ticket, models.Requester{Actor: desk.raviID}, "Opened twice.")
	require.NoError(t, err)
	queue := desk.rita.Get(t, "/reviews")
	links := queue.TestIDs("review-operation-link")
	require.Len(t, links, 1)
	assert.True(t, strings.HasPrefix(links[0], "Undo support-5514"), links[0])
	assert.Contains(t, queue.Body, comp.Key, "its own key is still shown, under the name")
}

// An error page keeps a signed-in person's menu: a 404 is not a dead end.
func TestErrorPagesKeepTheMenu(t *testing.T) {
	t.Parallel()
	desk := newReviewDesk(t, models.SQLite, consoletest.Options{})
	page := desk.rita.Get(t, "/operations/op_01JD7X4T6V8Q0W9M3K5N2P1R8S")
	require.Equal(t, http.StatusNotFound, page.Status)
	assert.NotEmpty(t, page.TestIDs("error-page"))
	assert.NotEmpty(t, page.TestIDs("nav-reviews"), "the menu is there")
	assert.Equal(t, []string{"rita@example.com"}, page.TestIDs("user-email"))
	anon := desk.con.NewBrowser(t).Get(t, "/problems/nothing-here")
	assert.Empty(t, anon.TestIDs("nav-reviews"), "nobody signed in: no menu")
}
