package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// searchFixture records, for tenants acme and globex, operations that differ in exactly the
// fields the search filters on; the two tenants' operations are alike, so that any filter that
// forgot the scope would find globex's too.
type searchFixture struct {
	l                 *models.Ledger
	refund, ticket    *models.Operation // acme
	theirs, theirsRef *models.Operation // globex: same params and reference as acme's refund
}

func newSearchFixture(t *testing.T, d models.Dialect) searchFixture {
	t.Helper()
	ctx := context.Background()
	l, now := consoleLedger(t, d)
	f := searchFixture{l: l}
	record := func(tenant, key, tool, params string, out models.AttemptOutcome) *models.Operation {
		t.Helper()
		*now = now.Add(time.Minute)
		s, err := l.Submit(ctx, models.NewOperation{Tenant: tenant, PrincipalID: "prn", APIKeyID: "key", Key: key, Tool: tool,
			Fingerprint: "sha256:" + key, Params: []byte(params), WorkflowRunID: "wf-" + key, Actor: "api:agent",
			Claim: &models.ClaimSpec{Worker: "w", LeaseFor: time.Minute}})
		require.NoError(t, err)
		require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w", out))
		return s.Op
	}
	succeeded := func(ref string) models.AttemptOutcome {
		return models.AttemptOutcome{Class: "succeeded", To: models.StateSucceeded, Result: []byte(`{}`), DownstreamRef: ref}
	}
	f.refund = record("acme", "Order-1042:refund", "refunds.issue", `{"amount_cents":1999,"order_id":"1042"}`, succeeded("R-5001"))
	f.ticket = record("acme", "wf-7:ticket", "tickets.create", `{"order_id":10420,"subject":"x","urgent":true}`,
		models.AttemptOutcome{Class: "rejected", To: models.StateFailedFinal, ErrorClass: "rejected", ErrorMessage: "no"})
	f.theirs = record("globex", "Order-1042:refund", "refunds.issue", `{"amount_cents":1999,"order_id":"1042"}`, succeeded("R-5001"))
	f.theirsRef = record("globex", "other", "tickets.create", `{"order_id":1042}`,
		models.AttemptOutcome{Class: "rejected", To: models.StateFailedFinal, ErrorClass: "rejected", ErrorMessage: "no"})
	return f
}

func (f searchFixture) ids(t *testing.T, s models.Scope, q models.Search) []string {
	t.Helper()
	q.Limit = 10
	ops, _, err := f.l.SearchOperations(context.Background(), s, q)
	require.NoError(t, err)
	ids := []string{}
	for _, op := range ops {
		ids = append(ids, op.ID)
	}
	return ids
}

func param(name, value string) models.ParamMatch {
	return models.ParamMatch{Name: name, Value: value, Checked: true}
}

func TestSearchFilters(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		f := newSearchFixture(t, d)
		acme, all := models.OnlyTenants("acme"), models.AllTenants()
		refund, ticket := f.refund.ID, f.ticket.ID

		cases := []struct {
			name string
			q    models.Search
			want []string
		}{
			{"id", models.Search{ID: refund}, []string{refund}},
			{"key anywhere, any case", models.Search{Key: "1042:REF"}, []string{refund}},
			{"key miss", models.Search{Key: "1043"}, []string{}},
			{"reference", models.Search{Reference: "R-5001"}, []string{refund}},
			{"reference is exact", models.Search{Reference: "R-500"}, []string{}},
			{"param string value", models.Search{Param: param("order_id", "1042")}, []string{refund}},
			{"param number value", models.Search{Param: param("order_id", "10420")}, []string{ticket}},
			{"param value is whole", models.Search{Param: param("order_id", "104")}, []string{}},
			{"param of another name", models.Search{Param: param("amount_cents", "1042")}, []string{}},
			{"param number", models.Search{Param: param("amount_cents", "1999")}, []string{refund}},
			{"param value JSON escapes", models.Search{Param: param("subject", `x"`)}, []string{}},
			{"param value is a value, not text", models.Search{Param: param("subject", `"x"`)}, []string{}},
			{"param value plain", models.Search{Param: param("subject", "x")}, []string{ticket}},
			{"param boolean, spelt as JSON", models.Search{Param: param("urgent", "true")}, []string{ticket}},
			{"param boolean is not a number", models.Search{Param: param("urgent", "1")}, []string{}},
			{"error class", models.Search{ErrorClass: "rejected"}, []string{ticket}},
			{"workflow run", models.Search{WorkflowRunID: "wf-wf-7:ticket"}, []string{ticket}},
			{"state and tool", models.Search{State: models.StateSucceeded, Tool: "refunds.issue"}, []string{refund}},
			{"filters combine", models.Search{Key: "1042", ErrorClass: "rejected"}, []string{}},
		}
		for _, c := range cases {
			assert.Equal(t, c.want, f.ids(t, acme, c.q), c.name)
		}
		assert.Equal(t, []string{f.theirs.ID, refund}, f.ids(t, all, models.Search{Reference: "R-5001"}), "the unlimited scope sees both")
		assert.Equal(t, []string{f.theirsRef.ID, f.theirs.ID, refund}, f.ids(t, all, models.Search{Param: param("order_id", "1042")}))
	})
}

// TestSearchScope: a user limited to acme finds none of globex's operations by any filter,
// though each of them matches it.
func TestSearchScope(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		f := newSearchFixture(t, d)
		acme := models.OnlyTenants("acme")
		for name, q := range map[string]models.Search{
			"id":        {ID: f.theirs.ID},
			"key":       {Key: "other"},
			"reference": {Reference: "R-5001", Tenant: "globex"},
			"param":     {Param: param("order_id", "1042"), Tenant: "globex"},
			"workflow":  {WorkflowRunID: "wf-other"},
			"class":     {ErrorClass: "rejected", Tenant: "globex"},
		} {
			assert.Empty(t, f.ids(t, acme, q), name)
			assert.NotEmpty(t, f.ids(t, models.OnlyTenants("globex"), q), name+": globex's own user finds it")
		}
	})
}

func TestSearchRefusals(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		l, _ := consoleLedger(t, d)
		ctx := context.Background()
		for name, q := range map[string]models.Search{
			"param not checked for sensitivity": {Param: models.ParamMatch{Name: "order_id", Value: "1"}},
			"param name not plain":              {Param: param(`a"b`, "1")},
			"param name a path":                 {Param: param("card.number", "1")},
		} {
			q.Limit = 10
			_, _, err := l.SearchOperations(ctx, models.AllTenants(), q)
			assert.Equal(t, models.CodeInvalid, models.ErrorCode(err), name)
		}
	})
}
