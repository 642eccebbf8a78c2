package models_test

import (
	"context"
	"fmt"
	"strings"
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
	return models.ParamMatch{Name: name, Value: value, Tools: []string{"refunds.issue", "tickets.create"}}
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

// A search by a param reads that param alone: a guess at a sensitive value stored in clear in
// another param (no data key) matches nothing, and the statement has no test on the whole
// document's text, so a guess that is part of a stored secret is planned and costs the same as
// one that is not. Operations of a tool the caller did not name in Tools (one no longer in the
// catalogue) never match.
func TestSearchByParamReadsOnlyThatParam(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		l, now := consoleLedger(t, d)
		ctx := context.Background()
		for i, tool := range []string{"payments.charge", "payments.retired"} {
			*now = now.Add(time.Minute)
			s, err := l.Submit(ctx, models.NewOperation{Tenant: "acme", PrincipalID: "prn", APIKeyID: "key",
				Key: "k-" + tool, Tool: tool, Fingerprint: "sha256:" + tool, Actor: "api:agent",
				Params: []byte(`{"api_key":"sk_live_Q7hZ2mX9","subject":"refund ` + string(rune('a'+i)) + `"}`)})
			require.NoError(t, err)
			require.NotNil(t, s.Op)
		}
		search := func(value string, tools ...string) models.Search {
			return models.Search{Param: models.ParamMatch{Name: "subject", Value: value, Tools: append([]string{}, tools...)}, Limit: 10}
		}
		count := func(q models.Search) int {
			ops, _, err := l.SearchOperations(ctx, models.AllTenants(), q)
			require.NoError(t, err)
			return len(ops)
		}
		assert.Equal(t, 1, count(search("refund a", "payments.charge")))
		assert.Equal(t, 0, count(search("sk_live_Q7hZ2mX9", "payments.charge")), "another param's value is not the param's")
		assert.Equal(t, 0, count(search("refund b", "payments.charge")), "the retired tool's operation is not searched")
		assert.Equal(t, 0, count(search("refund b")), "no tool may be searched")

		guess, miss := l.SearchSQL(models.AllTenants(), search("sk_live_Q7", "payments.charge")),
			l.SearchSQL(models.AllTenants(), search("nothing-like-it", "payments.charge"))
		for _, stmt := range []string{guess, miss} {
			assert.NotContains(t, stmt, "strpos(params")
			assert.NotContains(t, stmt, "instr(params")
			assert.Contains(t, stmt, "subject", "the named param is read by its path")
		}
		explain := "EXPLAIN "
		if d == models.SQLite {
			explain = "EXPLAIN QUERY PLAN "
		}
		plan := func(stmt string) string {
			rows, err := l.DB().Raw(explain + stmt).Rows()
			require.NoError(t, err)
			defer rows.Close()
			cols, err := rows.Columns()
			require.NoError(t, err)
			var out []string
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				require.NoError(t, rows.Scan(ptrs...))
				out = append(out, fmt.Sprint(vals...))
			}
			return strings.Join(out, "\n")
		}
		// The plans differ only where each spells its own value.
		g, m := plan(guess), plan(miss)
		assert.Equal(t, strings.ReplaceAll(g, "sk_live_Q7", "V"), strings.ReplaceAll(m, "nothing-like-it", "V"))
		assert.NotContains(t, g, "strpos")
	})
}
