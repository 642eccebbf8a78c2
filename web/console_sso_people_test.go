package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/handlers/sso"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/internal/oidctest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ssoSignIn signs a new browser in through the provider as subject with email, a reviewer of
// acme, and returns it.
func ssoSignIn(t *testing.T, con *consoletest.Console, idp *oidctest.Provider, subject, email string) *consoletest.Browser {
	t.Helper()
	idp.SignInAs(oidctest.Identity{Subject: subject, Claims: map[string]any{
		"email": email, "email_verified": true, "idemgate_role": "reviewer", "idemgate_tenants": []string{"acme"}}})
	b := con.NewBrowser(t)
	_, toIdP := ssoLeg(t, b, con.URL+sso.StartPath)
	_, callback := ssoLeg(t, b, toIdP)
	res, _ := ssoLeg(t, b, callback)
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "signed in as %s", email)
	require.Contains(t, b.Get(t, "/reviews").Body, email)
	return b
}

// A person whose identity provider lets them change their email is still one reviewer: a
// second approval under a new email is refused, as is approving the compensation they
// proposed, and their claim stays theirs.
func TestFederatedPersonIsOneReviewer(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		con, idp := ssoConsole(t, d)
		payout := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "payout-1", Tool: "payouts.dual",
			Params: `{"amount_cents":480000,"currency":"EUR","order_id":"7702"}`, NeedsApproval: true})

		asA := ssoSignIn(t, con, idp, "sub-mallory", "a@example.test")
		require.Equal(t, http.StatusSeeOther, act(t, asA, payout, models.ActionApprove, nil).Status)
		asB := ssoSignIn(t, con, idp, "sub-mallory", "b@example.test")
		page := asB.Get(t, "/operations/"+payout.ID)
		assert.Equal(t, []string{"reject"}, page.Attrs("action", "data-action"), "no approve form for who approved, under any email")
		assert.Contains(t, strings.Join(page.TestIDs("approval-note"), ""), "You have approved it.")
		p := refused(t, asB, payout, act(t, asB, payout, models.ActionApprove, nil))
		assert.Contains(t, strings.Join(p.TestIDs("notice"), ""), "has already approved this operation")
		rec, err := con.Ledger.OperationRecord(t.Context(), models.AllTenants(), payout.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StateAwaitingApproval, rec.Op.State, "one person's two approvals are one")
		assert.Equal(t, []string{"user:a@example.test approve"}, reviewActions(rec))

		// A second person does count.
		other := ssoSignIn(t, con, idp, "sub-ann", "ann@example.com")
		require.Equal(t, http.StatusSeeOther, act(t, other, payout, models.ActionApprove, nil).Status)
		rec, err = con.Ledger.OperationRecord(t.Context(), models.AllTenants(), payout.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StatePending, rec.Op.State)

		// Four eyes on a compensation: proposed as b@, approved as c@ by the same person.
		ticket := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1:ticket", Tool: "tickets.create",
			Params: `{"subject":"Parcel lost"}`, Outcome: &models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201,
				To: models.StateSucceeded, Result: []byte(`{"id":"T-1"}`), DownstreamRef: "T-1"}})
		proposed := act(t, asB, ticket, "propose_compensation", url.Values{"reason": {"Opened twice"}})
		require.Equal(t, http.StatusSeeOther, proposed.Status, proposed.Body)
		rec, err = con.Ledger.OperationRecord(t.Context(), models.AllTenants(), ticket.ID)
		require.NoError(t, err)
		require.NotNil(t, rec.CompensatedBy)
		comp := rec.CompensatedBy
		asC := ssoSignIn(t, con, idp, "sub-mallory", "c@example.test")
		fourEyes := refused(t, asC, comp, act(t, asC, comp, models.ActionApprove, nil))
		assert.Contains(t, strings.Join(fourEyes.TestIDs("notice"), ""), "Four eyes")
		rec, err = con.Ledger.OperationRecord(t.Context(), models.AllTenants(), comp.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StateAwaitingApproval, rec.Op.State)
		assert.Empty(t, reviewActions(rec))

		// A claim taken as c@ is still the person's after they sign in as d@: they give it back,
		// and another reviewer is told who has it.
		require.Equal(t, http.StatusSeeOther, asC.Post(t, "/operations/"+comp.ID+"/claim", url.Values{}).Status)
		asD := ssoSignIn(t, con, idp, "sub-mallory", "d@example.test")
		mine := asD.Get(t, "/reviews?claims=mine")
		assert.Contains(t, mine.Body, comp.Key, "the claim is the person's, under their new email")
		other.Post(t, "/operations/"+comp.ID+"/release", url.Values{})
		assert.Contains(t, other.Get(t, "/operations/"+comp.ID).Body, "only they can give it back")
		require.Equal(t, http.StatusSeeOther, asD.Post(t, "/operations/"+comp.ID+"/release", url.Values{}).Status)
		r, _, err := con.Ledger.ReviewQueue(t.Context(), models.AllTenants(), models.ReviewFilter{Claims: models.ClaimsNone, Limit: 10})
		require.NoError(t, err)
		assert.Len(t, r, 1, "the compensation's review is free again")

		// Disabled at the console, the person is signed out at their next request, in every
		// browser, not at their next sign-in.
		u, err := con.Ledger.UserByEmail(t.Context(), "d@example.test")
		require.NoError(t, err)
		disable := true
		_, err = con.Ledger.ChangeUser(t.Context(), models.AllTenants(), models.Requester{Actor: models.ActorCLI}, u.ID, models.UserChange{Disable: &disable})
		require.NoError(t, err)
		for _, b := range []*consoletest.Browser{asA, asD} {
			page := b.Get(t, "/reviews")
			assert.Equal(t, http.StatusSeeOther, page.Status)
			assert.True(t, strings.HasPrefix(page.Header.Get("Location"), "/login"), page.Header.Get("Location"))
		}
		assert.Equal(t, http.StatusOK, other.Get(t, "/reviews").Status, "another person stays signed in")
	})
}
