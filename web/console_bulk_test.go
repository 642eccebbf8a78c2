package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bulk decisions (issue 19 item 3) through the console's forms, on both engines: every
// operation goes through its own compare-and-set and gets its own audit entry, and every
// rule of the single action holds for each.

// prepareBulk posts a bulk selection as b and returns the confirmation page's path.
func prepareBulk(t *testing.T, b *consoletest.Browser, filter url.Values, form url.Values) string {
	t.Helper()
	p := b.Post(t, "/bulk/review?"+filter.Encode(), form)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	loc := p.Header.Get("Location")
	require.True(t, strings.HasPrefix(loc, "/bulk/bulk_"), loc)
	require.Equal(t, http.StatusOK, b.Get(t, loc).Status) // the confirmation, and its CSRF token
	return loc
}

// applyBulk posts the confirmation at path as b and returns the page it leads to.
func applyBulk(t *testing.T, b *consoletest.Browser, path string, form url.Values) *consoletest.Page {
	t.Helper()
	p := b.Post(t, path+"/apply", form)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, path, p.Header.Get("Location"))
	page := b.Get(t, path)
	require.Equal(t, http.StatusOK, page.Status)
	return page
}

// auditOf counts the audit entries of action with outcome, by operation.
func auditOf(t *testing.T, con *consoletest.Console, action, outcome string) map[string]int {
	t.Helper()
	es, _, err := con.Ledger.AuditEntries(t.Context(), models.AllTenants(), models.AuditSearch{Action: action, Limit: 500})
	require.NoError(t, err)
	out := map[string]int{}
	for _, e := range es {
		if e.Action == action && e.Outcome == outcome {
			out[e.OperationID]++
		}
	}
	return out
}

// stateOf is op's state in the ledger now.
func stateOf(t *testing.T, con *consoletest.Console, id string) models.State {
	t.Helper()
	rec, err := con.Ledger.OperationRecord(t.Context(), models.AllTenants(), id)
	require.NoError(t, err)
	return rec.Op.State
}

// Sixty UNKNOWN refunds, all matching the queue's filter, marked failed with one reason; one
// is decided by someone else between the confirmation and the apply. 59 are done, each with
// its own audit entry; the one that changed is refused as changed meanwhile and stays as the
// other reviewer left it. Applying the same page again does nothing.
func TestBulkSixtyWithOneChangedMeanwhile(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		var ops []*models.Operation
		for i := range 60 {
			ops = append(ops, desk.unknown(t, "acme", fmt.Sprintf("order-%d:refund", 3000+i)))
		}
		other := desk.unknown(t, "globex", "order-9999:refund") // not matching the filter
		path := prepareBulk(t, desk.ravi, url.Values{"tenant": {"acme"}},
			url.Values{"list": {"reviews"}, "all": {"1"}, "bulk_action": {models.ActionMarkFailed}})
		confirm := desk.ravi.Last
		assert.Len(t, confirm.TestIDs("bulk-row"), 60)
		assert.Contains(t, confirm.TestIDs("bulk-heading")[0], "60 operations")

		// Meanwhile another reviewer retries one of them.
		changed := ops[17]
		_, err := desk.con.Ledger.ConfirmNotExecuted(t.Context(), models.Action{Scope: models.AllTenants(), Tenant: "acme",
			OperationID: changed.ID, Actor: desk.ritaID, Reason: "Not in the payment system.",
			ExpectedState: models.StateUnknown, ExpectedAttempts: changed.Attempts})
		require.NoError(t, err)

		const reason = "The payment provider confirmed none of these refunds went out (incident 4711)."
		result := applyBulk(t, desk.ravi, path, url.Values{"reason": {reason}})
		assert.Equal(t, []string{"59"}, result.TestIDs("bulk-done"))
		assert.Equal(t, []string{"1"}, result.TestIDs("bulk-refused"))
		outcomes := result.Attrs("bulk-row", "data-outcome")
		ids := result.Attrs("bulk-row", "data-operation-id")
		require.Len(t, ids, 60)
		for i, id := range ids {
			if id == changed.ID {
				assert.Equal(t, "refused", outcomes[i])
				assert.Contains(t, result.TestIDs("bulk-outcome")[i], "Changed meanwhile: it is PENDING now, not UNKNOWN")
			} else {
				assert.Equal(t, "done", outcomes[i], id)
			}
		}

		// The ledger agrees, and every decision has its own audit entry.
		for _, op := range ops {
			want := models.StateFailedFinal
			if op.ID == changed.ID {
				want = models.StatePending
			}
			assert.Equal(t, want, stateOf(t, desk.con, op.ID), op.Key)
		}
		assert.Equal(t, models.StateUnknown, stateOf(t, desk.con, other.ID))
		done := auditOf(t, desk.con, "review."+models.ActionMarkFailed, models.OutcomeOK)
		assert.Len(t, done, 59)
		for _, op := range ops {
			if op.ID != changed.ID {
				assert.Equal(t, 1, done[op.ID], op.Key)
			}
		}
		assert.Equal(t, map[string]int{changed.ID: 1}, auditOf(t, desk.con, "review."+models.ActionMarkFailed, models.OutcomeRefused))

		// The same confirmation sent again (the back button, a second click) does nothing.
		again := applyBulk(t, desk.ravi, path, url.Values{"reason": {reason}, "csrf_token": {confirm.CSRF()}})
		assert.Contains(t, again.TestIDs("notice")[0], "already been applied")
		assert.Len(t, auditOf(t, desk.con, "review."+models.ActionMarkFailed, models.OutcomeOK), 59)
		assert.Equal(t, models.StatePending, stateOf(t, desk.con, changed.ID))
	})
}

// A reviewer who proposed a compensation approves it in bulk with another operation: the
// other gets the approval, the compensation is refused under four eyes, as on its own page.
func TestBulkApproveFourEyes(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		ticket := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-77:ticket", Tool: "tickets.create",
			Params: `{"subject":"Parcel lost"}`, Outcome: &models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201,
				To: models.StateSucceeded, Result: []byte(`{"id":"T-77"}`), DownstreamRef: "T-77"}})
		comp, err := desk.con.Executor.ProposeCompensation(t.Context(), ticket, models.Requester{Actor: desk.raviID}, "Opened twice.")
		require.NoError(t, err)
		payout := desk.awaiting(t, "payouts.dual", "order-78:payout")

		path := prepareBulk(t, desk.ravi, url.Values{}, url.Values{"list": {"reviews"}, "ids": {comp.ID, payout.ID},
			"bulk_action": {models.ActionApprove}})
		result := applyBulk(t, desk.ravi, path, url.Values{"reason": {"Checked both against the ticket history."}})
		assert.Equal(t, []string{"1"}, result.TestIDs("bulk-done"))
		assert.Equal(t, []string{"1"}, result.TestIDs("bulk-refused"))
		assert.Equal(t, []string{"refused", "done"}, result.Attrs("bulk-row", "data-outcome"))
		assert.Contains(t, result.TestIDs("bulk-outcome")[0], "Four eyes: ravi@example.com proposed this compensation")

		assert.Equal(t, models.StateAwaitingApproval, stateOf(t, desk.con, comp.ID))
		assert.Empty(t, reviewActions(desk.record(t, comp)), "no approval recorded on the compensation")
		assert.Equal(t, []string{desk.raviID + " approve"}, reviewActions(desk.record(t, payout)))
		assert.Equal(t, map[string]int{payout.ID: 1}, auditOf(t, desk.con, "review."+models.ActionApprove, models.OutcomeOK))
	})
}

// A reviewer limited to acme adds a globex operation's id to the form by hand: it is left out
// of the confirmation, never decided, and the bulk decision of another reviewer is not hers to
// see or apply.
func TestBulkOtherTenantRefused(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		mine := desk.unknown(t, "acme", "order-1:refund")
		theirs := desk.unknown(t, "globex", "order-2:refund")

		path := prepareBulk(t, desk.rita, url.Values{}, url.Values{"list": {"reviews"}, "ids": {mine.ID, theirs.ID, mine.ID},
			"bulk_action": {models.ActionMarkFailed}})
		confirm := desk.rita.Last
		assert.Equal(t, []string{mine.ID}, confirm.Attrs("bulk-row", "data-operation-id"))
		assert.Equal(t, []string{"1 operation left out: not found among your tenants' operations."}, confirm.TestIDs("bulk-left-out"))
		result := applyBulk(t, desk.rita, path, url.Values{"reason": {"Not in the provider's records."}})
		assert.Equal(t, []string{"1"}, result.TestIDs("bulk-done"))
		assert.Equal(t, models.StateFailedFinal, stateOf(t, desk.con, mine.ID))
		assert.Equal(t, models.StateUnknown, stateOf(t, desk.con, theirs.ID))
		assert.Empty(t, auditOf(t, desk.con, "review."+models.ActionMarkFailed, models.OutcomeOK)[theirs.ID])

		// Ravi's bulk decision over the globex one is neither visible to nor applicable by Rita.
		ravis := prepareBulk(t, desk.ravi, url.Values{}, url.Values{"list": {"operations"}, "ids": {theirs.ID},
			"bulk_action": {models.ActionMarkFailed}})
		assert.Equal(t, http.StatusNotFound, desk.rita.Get(t, ravis).Status)
		p := desk.rita.Post(t, ravis+"/apply", url.Values{"reason": {"Mine now."}, "csrf_token": {confirm.CSRF()}})
		assert.Equal(t, http.StatusNotFound, p.Status)
		assert.Equal(t, models.StateUnknown, stateOf(t, desk.con, theirs.ID))

		// An admin sees it, without a form to apply it: it is Ravi's decision.
		admin := desk.con.NewBrowser(t)
		admin.MustLogin(t, "ada@example.com", desk.con.User(t, "ada@example.com", models.RoleAdmin))
		page := admin.Get(t, ravis)
		require.Equal(t, http.StatusOK, page.Status)
		assert.Equal(t, []string{theirs.ID}, page.Attrs("bulk-row", "data-operation-id"))
		assert.Empty(t, page.TestIDs("bulk-apply-form"))
		assert.Contains(t, page.TestIDs("bulk-left-out"), "Prepared by ravi@example.com, who alone can apply it.")

		// An admin limited to acme does not open a decision over globex's operations by its id.
		acmeAdmin := desk.con.NewBrowser(t)
		acmeAdmin.MustLogin(t, "adam@example.com", desk.con.User(t, "adam@example.com", models.RoleAdmin, "acme"))
		assert.Equal(t, http.StatusNotFound, acmeAdmin.Get(t, ravis).Status)
	})
}

// A bulk approval shows what each operation does and the total at stake, so that approving
// "all matching" payouts never hides the sums.
func TestBulkApprovalShowsTheStakes(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		a := desk.awaiting(t, "payouts.dual", "order-7702:payout")
		b := desk.awaiting(t, "payouts.dual", "order-7703:payout")
		usd := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-7704:payout", Tool: "payouts.dual",
			Params: `{"amount_cents":12000,"currency":"USD","order_id":"7704"}`, NeedsApproval: true})
		prepareBulk(t, desk.ravi, url.Values{}, url.Values{"list": {"reviews"}, "ids": {a.ID, b.ID, usd.ID},
			"bulk_action": {models.ActionApprove}})
		confirm := desk.ravi.Last
		assert.Equal(t, []string{"At stake: 5,000.00 EUR + 120.00 USD"}, confirm.TestIDs("bulk-at-stake"))
		assert.ElementsMatch(t, []string{"2,500.00 EUR for order order-7702:payout", "2,500.00 EUR for order order-7703:payout",
			"120.00 USD for order 7704"}, confirm.TestIDs("bulk-summary"))
	})
}

// A bulk retry over a tool whose downstream cannot recognise a repeat (refunds.issue) and one
// that can (tickets.create): without the second, explicit choice nothing changes; leaving the
// risky ones out retries only the others, and the result says why the rest were not sent.
func TestBulkRetryNeedsSecondConfirmation(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		refunds := []*models.Operation{desk.unknown(t, "acme", "order-5:refund"), desk.unknown(t, "acme", "order-6:refund")}
		ticket := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-7:ticket", Tool: "tickets.create",
			Params: `{"subject":"Printer on fire"}`, Unknown: true, Review: true})

		path := prepareBulk(t, desk.ravi, url.Values{"tenant": {"acme"}},
			url.Values{"list": {"reviews"}, "all": {"1"}, "bulk_action": {models.ActionConfirmNotExecuted}})
		assert.Equal(t, []string{"2 of these go to refunds.issue, which cannot recognise a repeat; if the first attempt did reach it, " +
			"this sends a second refunds.issue request."}, desk.ravi.Last.TestIDs("bulk-risk-text"))

		refused := applyBulk(t, desk.ravi, path, url.Values{"reason": {"None of them reached the downstream."}})
		assert.Equal(t, []string{"error"}, refused.Attrs("notice", "data-kind"))
		assert.Contains(t, refused.TestIDs("notice")[0], "Nothing was changed")
		assert.Len(t, refused.TestIDs("bulk-apply-form"), 1, "still to be confirmed")
		assert.Equal(t, []string{"None of them reached the downstream."}, refused.TestIDs("bulk-reason"), "the reason is kept")
		for _, op := range append(refunds, ticket) {
			assert.Equal(t, models.StateUnknown, stateOf(t, desk.con, op.ID))
		}
		assert.Empty(t, auditOf(t, desk.con, "review."+models.ActionConfirmNotExecuted, models.OutcomeOK))

		result := applyBulk(t, desk.ravi, path, url.Values{"reason": {"None of them reached the downstream."}, "risk": {"skip"}})
		assert.Equal(t, []string{"1"}, result.TestIDs("bulk-done"))
		assert.Equal(t, []string{"2"}, result.TestIDs("bulk-refused"))
		assert.Equal(t, models.StatePending, stateOf(t, desk.con, ticket.ID))
		for i, op := range refunds {
			assert.Equal(t, models.StateUnknown, stateOf(t, desk.con, op.ID))
			assert.Contains(t, result.TestIDs("bulk-outcome")[i], "refunds.issue cannot recognise a repeat")
		}
		assert.Equal(t, map[string]int{ticket.ID: 1}, auditOf(t, desk.con, "review."+models.ActionConfirmNotExecuted, models.OutcomeOK))
	})
}

// A retry of refunds alone (none can recognise a repeat) offers no "retry only the others",
// since there are none; once every selected refund was settled elsewhere, the page offers no
// retry at all. Both engines.
func TestBulkRetryOffersOnlyWhatIsLeft(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		refunds := []*models.Operation{desk.unknown(t, "acme", "order-8:refund"), desk.unknown(t, "acme", "order-9:refund")}
		path := prepareBulk(t, desk.ravi, url.Values{"tenant": {"acme"}},
			url.Values{"list": {"reviews"}, "all": {"1"}, "bulk_action": {models.ActionConfirmNotExecuted}})
		page := desk.ravi.Last
		assert.Len(t, page.TestIDs("bulk-risk-accept"), 1)
		assert.Empty(t, page.TestIDs("bulk-risk-skip"), "no others to retry alone")
		assert.Equal(t, []string{"Retry (confirm not executed): 2 operations"}, page.TestIDs("bulk-apply"))
		// Each row can be looked up in the downstream first, by its downstream key.
		links := page.Attrs("bulk-lookup", "href")
		require.Len(t, links, 2)
		for _, op := range refunds {
			rec, err := desk.con.Ledger.OperationRecord(t.Context(), models.AllTenants(), op.ID)
			require.NoError(t, err)
			assert.Contains(t, links, "http://127.0.0.1:9/refunds?reference="+rec.Op.DownstreamKeySent())
		}

		for _, op := range refunds {
			_, err := desk.con.Ledger.MarkFailed(t.Context(), models.Action{Scope: models.AllTenants(), Tenant: "acme", OperationID: op.ID,
				Actor: desk.ritaID, Reason: "settled by phone", ExpectedState: models.StateUnknown, ExpectedAttempts: op.Attempts})
			require.NoError(t, err)
		}
		page = desk.ravi.Get(t, path)
		require.Equal(t, http.StatusOK, page.Status)
		assert.Empty(t, page.TestIDs("bulk-apply-form"), "nothing is left to retry")
		assert.Contains(t, strings.Join(page.TestIDs("bulk-left-out"), " "), "Every operation selected has changed since")
	})
}

// The bar is offered to reviewers, with a checkbox per row, and not to auditors; a selection
// without rows or action changes nothing.
func TestBulkBarOnLists(t *testing.T) {
	t.Parallel()
	desk := newReviewDesk(t, models.SQLite, consoletest.Options{})
	for i := range 3 {
		desk.unknown(t, "acme", "order-"+strconv.Itoa(i)+":refund")
	}
	for _, path := range []string{"/reviews", "/operations?state=UNKNOWN"} {
		p := desk.ravi.Get(t, path)
		assert.Len(t, p.TestIDs("bulk-bar"), 1, path)
		assert.Len(t, p.TestIDs("bulk-pick"), 3, path)
		assert.Equal(t, []string{"All 3 matching this filter"}, p.TestIDs("bulk-all"+"-label"), path)
		a := desk.aud.Get(t, path)
		assert.Empty(t, a.TestIDs("bulk-bar"), path)
		assert.Empty(t, a.TestIDs("bulk-pick"), path)
	}
	p := desk.ravi.Post(t, "/bulk/review", url.Values{"list": {"reviews"}, "bulk_action": {models.ActionMarkFailed}})
	assert.Equal(t, http.StatusBadRequest, p.Status)
	p = desk.aud.Post(t, "/bulk/review", url.Values{"list": {"reviews"}, "all": {"1"}, "bulk_action": {models.ActionMarkFailed}})
	assert.Equal(t, http.StatusForbidden, p.Status)
}

// "All matching" on the operations list takes the list's filter from the bar's address, not
// the page's cursor: every operation of the filter, and of those only the ones the action
// applies to; the confirmation says how many were left out and why.
func TestBulkAllMatchingOperations(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		a, b := desk.unknown(t, "acme", "order-1:refund"), desk.unknown(t, "acme", "order-2:refund")
		failed := desk.unknown(t, "acme", "order-3:refund")
		_, err := desk.con.Ledger.MarkFailed(t.Context(), models.Action{Scope: models.AllTenants(), Tenant: "acme", OperationID: failed.ID,
			Actor: desk.ritaID, Reason: "Not there.", ExpectedState: models.StateUnknown, ExpectedAttempts: failed.Attempts})
		require.NoError(t, err)
		globex := desk.unknown(t, "globex", "order-4:refund")

		list := desk.ravi.Get(t, "/operations?tenant=acme&before=op_ZZZZZZZZZZZZZZZZZZZZZZZZZZ")
		action := list.Attrs("bulk-bar", "action")
		require.Len(t, action, 1)
		assert.Equal(t, "/bulk/review?tenant=acme", action[0], "the filter without the cursor")
		path := prepareBulk(t, desk.ravi, url.Values{"tenant": {"acme"}},
			url.Values{"list": {"operations"}, "all": {"1"}, "bulk_action": {models.ActionReconcileNow}})
		confirm := desk.ravi.Last
		assert.ElementsMatch(t, []string{a.ID, b.ID}, confirm.Attrs("bulk-row", "data-operation-id"))
		assert.Equal(t, []string{"1 operation left out: not UNKNOWN when selected, so this action does not apply."}, confirm.TestIDs("bulk-left-out"))
		assert.Empty(t, confirm.TestIDs("bulk-risk"), "asking the downstream sends nothing")

		result := applyBulk(t, desk.ravi, path, url.Values{"reason": {"Outage over; ask again."}})
		assert.Equal(t, []string{"2"}, result.TestIDs("bulk-done"))
		for _, op := range []*models.Operation{a, b} {
			rec := desk.record(t, op)
			assert.Equal(t, models.StateUnknown, rec.Op.State)
			assert.Equal(t, []string{desk.raviID + " " + models.ActionReconcileNow}, reviewActions(rec))
		}
		assert.Empty(t, reviewActions(desk.record(t, globex)))

		// The search's own filters mean the same operations here: a param's value finds one,
		// and a sensitive param is refused before anything is read.
		prepareBulk(t, desk.ravi, url.Values{"param": {"order_id = order-2:refund"}},
			url.Values{"list": {"operations"}, "all": {"1"}, "bulk_action": {models.ActionMarkFailed}})
		assert.Equal(t, []string{b.ID}, desk.ravi.Last.Attrs("bulk-row", "data-operation-id"))
		p := desk.ravi.Post(t, "/bulk/review?param=card_number+%3D+4111", url.Values{"list": {"operations"}, "all": {"1"},
			"bulk_action": {models.ActionMarkFailed}})
		assert.Equal(t, http.StatusBadRequest, p.Status)
		assert.Contains(t, p.Body, "sensitive param")
	})
}

// A bulk decision's result page knows when its operations move on: its version holds still
// while nothing changes, moves when a look-up answers, and the page then shows where each
// operation is now. The confirmation is not live (its form is what the reviewer checks), and
// the version is nobody's but the owner's (and an admin's over all its tenants).
func TestBulkResultFollowsItsOperations(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		a := desk.unknown(t, "acme", "order-1:refund")
		b := desk.unknown(t, "acme", "order-2:refund")
		path := prepareBulk(t, desk.rita, url.Values{}, url.Values{"list": {"reviews"}, "ids": {a.ID, b.ID},
			"bulk_action": {models.ActionReconcileNow}})
		assert.Equal(t, []bool{false}, desk.rita.Last.HasAttr("bulk", "data-live-src"), "the confirmation does not change under the reviewer")
		assert.Equal(t, http.StatusNotFound, desk.ravi.Get(t, path+"/version").Status, "another reviewer's decision")

		result := applyBulk(t, desk.rita, path, url.Values{"reason": {"Provider outage 4711: ask again."}})
		assert.Equal(t, []string{path + "/version"}, result.Attrs("bulk", "data-live-src"))
		assert.Equal(t, []string{"Outcome unknown", "Outcome unknown"}, result.TestIDs("bulk-now"))
		assert.Empty(t, result.TestIDs("bulk-tenant"), "no tenant column for a viewer of one tenant")
		shown := result.Attrs("bulk", "data-live-version")
		require.Len(t, shown, 1)
		version := func() string {
			p := desk.rita.Get(t, path+"/version")
			require.Equal(t, http.StatusOK, p.Status)
			assert.Equal(t, "no-store", p.Header.Get("Cache-Control"))
			return p.Body
		}
		assert.Equal(t, shown[0], version(), "nothing moved since the page was made")
		assert.Equal(t, shown[0], version())

		// The downstream's look-up finds one of them: the version moves, the page says so.
		ops, err := desk.con.Ledger.ClaimProbes(t.Context(), "worker-1", []string{"refunds.issue"}, 1, time.Minute)
		require.NoError(t, err)
		require.Len(t, ops, 1)
		require.NoError(t, desk.con.Ledger.RecordProbe(t.Context(), ops[0], "worker-1", models.ProbeOutcome{Status: 200,
			Outcome: "found", To: models.StateSucceeded, Result: []byte(`{"id":"re_1"}`)}))
		moved := version()
		assert.NotEqual(t, shown[0], moved)
		again := desk.rita.Get(t, path)
		assert.Equal(t, []string{moved}, again.Attrs("bulk", "data-live-version"))
		assert.ElementsMatch(t, []string{"Succeeded", "Outcome unknown"}, again.TestIDs("bulk-now"))
		assert.Equal(t, []string{"Outcome unknown", "Outcome unknown"}, again.TestIDs("bulk-selected"), "what the reviewer decided on stays said")

		// A reviewer of every tenant is told each row's tenant.
		theirs := desk.unknown(t, "globex", "order-3:refund")
		prepareBulk(t, desk.ravi, url.Values{}, url.Values{"list": {"reviews"}, "ids": {theirs.ID}, "bulk_action": {models.ActionReconcileNow}})
		assert.Equal(t, []string{"globex"}, desk.ravi.Last.TestIDs("bulk-tenant"))
	})
}
