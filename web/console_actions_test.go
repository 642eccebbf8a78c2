package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reviewDesk is a console with tenants acme and globex and the people who act on them: Rita,
// a reviewer limited to acme; Ravi, a reviewer of every tenant; and Audrey, an auditor.
type reviewDesk struct {
	con             *consoletest.Console
	rita, ravi, aud *consoletest.Browser
	ritaID, raviID  string
}

func newReviewDesk(t *testing.T, d models.Dialect, opts consoletest.Options) reviewDesk {
	t.Helper()
	con := consoletest.Start(t, d, opts)
	con.Tenant(t, "acme")
	con.Tenant(t, "globex")
	desk := reviewDesk{con: con, ritaID: "user:rita@example.com", raviID: "user:ravi@example.com"}
	signIn := func(email string, role models.Role, tenants ...string) *consoletest.Browser {
		pw := con.User(t, email, role, tenants...)
		b := con.NewBrowser(t)
		b.MustLogin(t, email, pw)
		require.Equal(t, http.StatusOK, b.Get(t, "/").Status) // a page with the new session's token
		return b
	}
	desk.rita = signIn("rita@example.com", models.RoleReviewer, "acme")
	desk.ravi = signIn("ravi@example.com", models.RoleReviewer)
	desk.aud = signIn("audrey@example.com", models.RoleAuditor)
	return desk
}

// unknown seeds an UNKNOWN refund of tenant with an open review.
func (d reviewDesk) unknown(t *testing.T, tenant, key string) *models.Operation {
	return d.con.Operation(t, consoletest.Seed{Tenant: tenant, Key: key, Tool: "refunds.issue",
		Params: `{"amount_cents":1999,"currency":"EUR","order_id":"` + key + `"}`, Unknown: true, Review: true})
}

// awaiting seeds an operation of tool awaiting approval.
func (d reviewDesk) awaiting(t *testing.T, tool, key string) *models.Operation {
	return d.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: key, Tool: tool,
		Params: `{"amount_cents":250000,"currency":"EUR","order_id":"` + key + `"}`, NeedsApproval: true})
}

// act posts an action form about op as b, with the state b saw and a reason unless form says.
func act(t *testing.T, b *consoletest.Browser, op *models.Operation, action string, form url.Values) *consoletest.Page {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["expected_state"]; !ok {
		form.Set("expected_state", string(op.State))
	}
	if _, ok := form["expected_attempts"]; !ok {
		form.Set("expected_attempts", strconv.Itoa(op.Attempts))
	}
	if _, ok := form["reason"]; !ok {
		form.Set("reason", "Checked in the payment system: "+action)
	}
	return b.Post(t, "/operations/"+url.PathEscape(op.ID)+"/actions/"+action, form)
}

// refused checks that the answer p to an action on op is a refusal shown the post/redirect/get
// way: a redirect to the operation's own page, which then shows an error notice. It returns
// that page.
func refused(t *testing.T, b *consoletest.Browser, op *models.Operation, p *consoletest.Page) *consoletest.Page {
	t.Helper()
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/operations/"+url.PathEscape(op.ID), p.Header.Get("Location"), "back to the operation's page")
	page := b.Get(t, p.Header.Get("Location"))
	require.Equal(t, http.StatusOK, page.Status)
	require.Contains(t, page.Attrs("notice", "data-kind"), "error", "the page says nothing was changed")
	return page
}

// record reads op as the ledger has it now.
func (d reviewDesk) record(t *testing.T, op *models.Operation) *models.OperationRecord {
	t.Helper()
	rec, err := d.con.Ledger.OperationRecord(t.Context(), models.AllTenants(), op.ID)
	require.NoError(t, err)
	return rec
}

// reviewActions lists the actions of op's review_action events, as "actor action".
func reviewActions(rec *models.OperationRecord) []string {
	var out []string
	for _, e := range rec.Events {
		if e.Type != models.EventReviewAction || e.Detail == nil {
			continue
		}
		var d struct{ Action string }
		_ = json.Unmarshal([]byte(*e.Detail), &d)
		out = append(out, e.Actor+" "+d.Action)
	}
	return out
}

// audits lists op's audit entries as "actor action outcome".
func audits(rec *models.OperationRecord) []string {
	var out []string
	for _, a := range rec.Audit {
		out = append(out, a.Actor+" "+a.Action+" "+a.Outcome)
	}
	return out
}

// auditDetail decodes the detail of op's last audit entry.
func auditDetail(t *testing.T, rec *models.OperationRecord) map[string]any {
	t.Helper()
	require.NotEmpty(t, rec.Audit)
	var d map[string]any
	require.NoError(t, json.Unmarshal([]byte(rec.Audit[len(rec.Audit)-1].Detail), &d))
	return d
}

func TestUnknownActions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		action string
		form   url.Values
		want   models.State
		notice string
	}{
		{models.ActionConfirmSucceeded, url.Values{"reference": {"re_5001"}, "result": {`{"id":"re_5001"}`}}, models.StateSucceeded,
			"Recorded as SUCCEEDED with downstream reference re_5001."},
		{models.ActionConfirmNotExecuted, nil, models.StatePending, "Recorded as not executed."},
		{models.ActionMarkFailed, nil, models.StateFailedFinal, "Marked FAILED_FINAL."},
		{models.ActionReconcileNow, nil, models.StateUnknown, "A look-up will ask the downstream within seconds."},
	}
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		for _, tc := range cases {
			form := func() url.Values {
				f := url.Values{}
				for k, v := range tc.form {
					f[k] = v
				}
				return f
			}
			t.Run(tc.action+" changes the state and records event and audit entry", func(t *testing.T) {
				op := desk.unknown(t, "acme", "happy:"+tc.action)
				p := act(t, desk.rita, op, tc.action, form())
				require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
				assert.Equal(t, "/operations/"+op.ID, p.Header.Get("Location"), "post/redirect/get back to the operation")
				rec := desk.record(t, op)
				assert.Equal(t, tc.want, rec.Op.State)
				assert.Equal(t, []string{desk.ritaID + " " + tc.action}, reviewActions(rec))
				assert.Equal(t, []string{desk.ritaID + " review." + tc.action + " ok"}, audits(rec))
				page := desk.rita.Get(t, "/operations/"+op.ID)
				require.Equal(t, http.StatusOK, page.Status)
				require.Len(t, page.TestIDs("notice"), 1)
				assert.Contains(t, page.TestIDs("notice")[0], tc.notice)
				assert.Empty(t, desk.rita.Get(t, "/operations/"+op.ID).TestIDs("notice"), "the flash shows once")
			})
			t.Run(tc.action+" on an operation that moved meanwhile is refused", func(t *testing.T) {
				op := desk.unknown(t, "acme", "stale:"+tc.action)
				_, err := desk.con.Ledger.MarkFailed(t.Context(), models.Action{Scope: models.AllTenants(), Tenant: "acme", OperationID: op.ID,
					Actor: desk.raviID, Reason: "gave up", ExpectedState: models.StateUnknown, ExpectedAttempts: op.Attempts})
				require.NoError(t, err)
				p := refused(t, desk.rita, op, act(t, desk.rita, op, tc.action, form()))
				assert.Contains(t, strings.Join(p.TestIDs("notice"), ""), "it is FAILED_FINAL now, not UNKNOWN")
				assert.Empty(t, p.Attrs("action", "data-action"), "no actions on a FAILED_FINAL operation")
				rec := desk.record(t, op)
				assert.Equal(t, models.StateFailedFinal, rec.Op.State)
				assert.Equal(t, []string{desk.raviID + " mark_failed"}, reviewActions(rec), "nothing of Rita's recorded")
				assert.Equal(t, desk.ritaID+" review."+tc.action+" refused", audits(rec)[len(rec.Audit)-1])
				assert.Contains(t, auditDetail(t, rec)["refusal"], "changed while you were deciding")
			})
			if tc.action == models.ActionReconcileNow {
				// Asking the downstream now decides nothing: no reason is needed.
				t.Run(tc.action+" needs no reason", func(t *testing.T) {
					op := desk.unknown(t, "acme", "reason:"+tc.action)
					f := form()
					f.Set("reason", "   ")
					p := act(t, desk.rita, op, tc.action, f)
					require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
					page := desk.rita.Get(t, p.Header.Get("Location"))
					assert.Contains(t, strings.Join(page.TestIDs("notice"), ""), tc.notice)
					assert.Equal(t, []string{desk.ritaID + " " + tc.action}, reviewActions(desk.record(t, op)))
				})
			} else {
				t.Run(tc.action+" needs a reason", func(t *testing.T) {
					op := desk.unknown(t, "acme", "reason:"+tc.action)
					f := form()
					f.Set("reason", "   ")
					p := refused(t, desk.rita, op, act(t, desk.rita, op, tc.action, f))
					assert.Equal(t, []string{"A reason is required."}, p.TestIDs("action-error"))
					assert.Equal(t, []string{"open"}, openAction(p, tc.action), "the refused form opens again")
					if tc.form.Get("reference") != "" {
						assert.Equal(t, []string{tc.form.Get("reference")}, p.Attrs("action-reference-"+tc.action, "value"), "what was typed is kept")
					}
					rec := desk.record(t, op)
					assert.Equal(t, models.StateUnknown, rec.Op.State)
					assert.Empty(t, reviewActions(rec))
					assert.Equal(t, []string{desk.ritaID + " review." + tc.action + " refused"}, audits(rec))
				})
			}
			t.Run(tc.action+" is forbidden to auditors", func(t *testing.T) {
				op := desk.unknown(t, "acme", "auditor:"+tc.action)
				p := act(t, desk.aud, op, tc.action, form())
				assert.Equal(t, http.StatusForbidden, p.Status)
				rec := desk.record(t, op)
				assert.Equal(t, models.StateUnknown, rec.Op.State)
				assert.Empty(t, reviewActions(rec))
				page := desk.aud.Get(t, "/operations/"+op.ID)
				assert.Empty(t, page.Attrs("action", "data-action"), "auditors see no forms")
				assert.Len(t, page.TestIDs("actions-read-only"), 1)
			})
			t.Run(tc.action+" on another tenant's operation is 404", func(t *testing.T) {
				op := desk.unknown(t, "globex", "theirs:"+tc.action)
				p := act(t, desk.rita, op, tc.action, form())
				assert.Equal(t, http.StatusNotFound, p.Status)
				assert.NotContains(t, p.Body, "globex")
				assert.Equal(t, models.StateUnknown, desk.record(t, op).Op.State)
			})
		}
		t.Run("confirm succeeded needs a reference and JSON", func(t *testing.T) {
			op := desk.unknown(t, "acme", "reference")
			p := refused(t, desk.rita, op, act(t, desk.rita, op, models.ActionConfirmSucceeded, url.Values{"reference": {""}}))
			assert.Equal(t, []string{"The downstream reference is required."}, p.TestIDs("action-error"))
			p = refused(t, desk.rita, op, act(t, desk.rita, op, models.ActionConfirmSucceeded, url.Values{"reference": {"re_1"}, "result": {"{not json"}}))
			assert.Equal(t, []string{"The result must be JSON."}, p.TestIDs("action-error"))
			assert.Equal(t, []string{"re_1"}, p.Attrs("action-reference-confirm_succeeded", "value"), "what was typed is kept")
			assert.Equal(t, []string{"{not json"}, p.TestIDs("action-result-confirm_succeeded"))
			assert.Equal(t, models.StateUnknown, desk.record(t, op).Op.State)
		})
		t.Run("a form without the state the reviewer saw is refused", func(t *testing.T) {
			op := desk.unknown(t, "acme", "no-state")
			refused(t, desk.rita, op, act(t, desk.rita, op, models.ActionMarkFailed, url.Values{"expected_state": {""}}))
			assert.Equal(t, models.StateUnknown, desk.record(t, op).Op.State)
		})
		t.Run("a resubmitted form changes nothing twice", func(t *testing.T) {
			op := desk.unknown(t, "acme", "twice")
			require.Equal(t, http.StatusSeeOther, act(t, desk.rita, op, models.ActionConfirmNotExecuted, nil).Status)
			refused(t, desk.rita, op, act(t, desk.rita, op, models.ActionConfirmNotExecuted, nil))
			assert.Equal(t, []string{desk.ritaID + " confirm_not_executed"}, reviewActions(desk.record(t, op)))
		})
		t.Run("a post without the CSRF token is refused and changes nothing", func(t *testing.T) {
			op := desk.unknown(t, "acme", "csrf")
			p := act(t, desk.rita, op, models.ActionMarkFailed, url.Values{"csrf_token": {""}})
			assert.Equal(t, http.StatusForbidden, p.Status)
			assert.Equal(t, models.StateUnknown, desk.record(t, op).Op.State)
		})
	})
}

// openAction reports, for each form of action on the page, whether it is unfolded.
func openAction(p *consoletest.Page, action string) []string {
	var out []string
	open := p.HasAttr("action", "open")
	for i, a := range p.Attrs("action", "data-action") {
		if a != action {
			continue
		}
		if open[i] {
			out = append(out, "open")
		} else {
			out = append(out, "closed")
		}
	}
	return out
}
