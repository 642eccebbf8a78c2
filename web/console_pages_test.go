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

const cardNumber = "4242424242424242"

// scoped seeds tenants "acme" and "globex" with an UNKNOWN refund under review, a pending
// ticket in a workflow, and signs in a reviewer limited to acme.
type scoped struct {
	con        *consoletest.Console
	b          *consoletest.Browser
	acmeRefund *models.Operation
	acmeTicket *models.Operation
	globexOp   *models.Operation
}

func seedScoped(t *testing.T, d models.Dialect) scoped {
	con := consoletest.Start(t, d, consoletest.Options{})
	s := scoped{con: con}
	s.acmeRefund = con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1042:refund", Tool: "refunds.issue",
		Params:        `{"amount_cents":1999,"card_number":"` + cardNumber + `","currency":"EUR","order_id":"1042"}`,
		WorkflowRunID: "wf-1", StepID: "refund", Unknown: true, Review: true})
	s.acmeTicket = con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1042:ticket", Tool: "tickets.create",
		Params: `{"subject":"Refund issued"}`, WorkflowRunID: "wf-1", StepID: "ticket"})
	s.globexOp = con.Operation(t, consoletest.Seed{Tenant: "globex", Key: "globex-secret:refund", Tool: "refunds.issue",
		Params: `{"amount_cents":5,"currency":"USD","order_id":"9"}`, WorkflowRunID: "wf-globex", Unknown: true, Review: true})
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
	s.b = con.NewBrowser(t)
	s.b.MustLogin(t, "rita@example.com", pw)
	return s
}

func TestTenantScope(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		s := seedScoped(t, d)
		b := s.b

		t.Run("another tenant's operation is 404 like a missing one", func(t *testing.T) {
			theirs := b.Get(t, "/operations/"+s.globexOp.ID)
			missing := b.Get(t, "/operations/op_01NOSUCHOPERATION000000000")
			assert.Equal(t, http.StatusNotFound, theirs.Status)
			assert.Equal(t, http.StatusNotFound, missing.Status)
			assert.Equal(t, missing.TestIDs("error-message"), theirs.TestIDs("error-message"))
			assert.NotContains(t, theirs.Body, "globex")
			assert.Equal(t, http.StatusNotFound, b.Get(t, "/workflows/wf-globex").Status)
			assert.Equal(t, http.StatusOK, b.Get(t, "/operations/"+s.acmeRefund.ID).Status)
		})
		t.Run("search shows only the user's tenants", func(t *testing.T) {
			p := b.Get(t, "/operations")
			require.Equal(t, http.StatusOK, p.Status)
			assert.ElementsMatch(t, []string{s.acmeRefund.ID, s.acmeTicket.ID}, p.Attrs("operation-row", "data-operation-id"))
			p = b.Get(t, "/operations?tenant=globex")
			assert.Empty(t, p.Attrs("operation-row", "data-operation-id"), "asking for another tenant finds nothing")
			p = b.Get(t, "/operations?key=globex")
			assert.Empty(t, p.Attrs("operation-row", "data-operation-id"))
			assert.NotContains(t, p.Body, `<option value="globex"`, "no other tenant offered in the filter")
		})
		t.Run("reviews show only the user's tenants", func(t *testing.T) {
			p := b.Get(t, "/reviews")
			require.Equal(t, http.StatusOK, p.Status)
			assert.Equal(t, []string{s.acmeRefund.ID}, p.Attrs("review-row", "data-operation-id"))
			p = b.Get(t, "/reviews/list?tenant=globex")
			assert.Empty(t, p.Attrs("review-row", "data-operation-id"))
		})
		t.Run("dashboard counts only the user's tenants", func(t *testing.T) {
			p := b.Get(t, "/")
			require.Equal(t, http.StatusOK, p.Status)
			assert.Equal(t, []string{"1"}, p.TestIDs("open-reviews-count"))
			counts := map[string]string{}
			states := p.Attrs("state-count", "data-state")
			values := p.TestIDs("state-count-value")
			require.Len(t, values, len(states))
			for i, st := range states {
				counts[st] = values[i]
			}
			assert.Equal(t, "1", counts["UNKNOWN"], "globex's UNKNOWN is not counted")
			assert.Equal(t, "1", counts["PENDING"])
		})
	})
}

func TestRolesAreEnforced(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		con := consoletest.Start(t, d, consoletest.Options{})
		users := map[models.Role]*consoletest.Browser{}
		for _, role := range models.Roles {
			email := string(role) + "@example.com"
			pw := con.User(t, email, role)
			users[role] = con.NewBrowser(t)
			users[role].MustLogin(t, email, pw)
		}

		t.Run("only admins reach the admin pages (403)", func(t *testing.T) {
			for _, role := range []models.Role{models.RoleAuditor, models.RoleReviewer} {
				p := users[role].Get(t, "/admin")
				assert.Equal(t, http.StatusForbidden, p.Status, role)
				assert.Contains(t, p.Body, "Only admins can use the admin pages.")
			}
			assert.Equal(t, http.StatusOK, users[models.RoleAdmin].Get(t, "/admin").Status)
		})
		t.Run("admin navigation only for admins", func(t *testing.T) {
			for role, b := range users {
				p := b.Get(t, "/")
				assert.Equal(t, role == models.RoleAdmin, strings.Contains(p.Body, `data-testid="nav-admin"`), role)
			}
		})
		t.Run("a reviewer cannot create users", func(t *testing.T) {
			b := users[models.RoleReviewer]
			b.Get(t, "/") // a page with the session's token
			p := b.Post(t, "/admin/users", url.Values{"email": {"mallory@example.com"}, "role": {"admin"}, "password": {"a long enough password"}})
			assert.Equal(t, http.StatusForbidden, p.Status)
			_, err := con.Ledger.UserByEmail(t.Context(), "mallory@example.com")
			assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "no user was created")
		})
	})
}

func TestAdminPages(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		con := consoletest.Start(t, d, consoletest.Options{})
		pw := con.User(t, "ada@example.com", models.RoleAdmin)
		b := con.NewBrowser(t)
		b.MustLogin(t, "ada@example.com", pw)
		b.Get(t, "/admin")

		p := b.Post(t, "/admin/tenants", url.Values{"name": {"acme"}})
		require.Equal(t, http.StatusSeeOther, p.Status)
		p = b.Get(t, "/admin")
		assert.Equal(t, []string{"Tenant acme created."}, p.TestIDs("notice"))
		assert.Equal(t, []string{"acme"}, p.Attrs("tenant-row", "data-tenant"))

		p = b.Post(t, "/admin/tenants", url.Values{"name": {"acme"}})
		require.Equal(t, http.StatusSeeOther, p.Status)
		p = b.Get(t, "/admin")
		assert.Equal(t, []string{`Nothing was changed: tenant "acme" already exists.`}, p.TestIDs("notice"))

		t.Run("a new key is shown once", func(t *testing.T) {
			p := b.Post(t, "/admin/keys", url.Values{"tenant": {"acme"}, "principal": {"billing-agent"}, "tools": {"refunds.issue"}})
			require.Equal(t, http.StatusSeeOther, p.Status)
			p = b.Get(t, "/admin")
			secrets := p.TestIDs("new-key-secret")
			require.Len(t, secrets, 1)
			require.True(t, models.WellFormedAPIKey(secrets[0]), secrets[0])
			assert.Equal(t, []string{"Never"}, p.TestIDs("key-last-used"))
			caller, err := con.Ledger.Authenticate(t.Context(), secrets[0])
			require.NoError(t, err)
			assert.Equal(t, "billing-agent", caller.PrincipalName)
			assert.Equal(t, []string{secrets[0][:models.APIKeyPrefixLen]}, p.Attrs("key-row", "data-key-prefix"))

			p = b.Get(t, "/admin")
			assert.Empty(t, p.TestIDs("new-key-secret"), "gone on reload")
			used := p.TestIDs("key-last-used")
			require.Len(t, used, 1)
			assert.Contains(t, used[0], "UTC", "the key's use is shown once it authenticated a request")
			assert.NotContains(t, p.Body, secrets[0])

			form := strings.Index(p.Body, `action="/admin/keys/`)
			require.Positive(t, form)
			action := p.Body[form+len(`action="`):]
			action = action[:strings.Index(action, `"`)]
			require.Equal(t, http.StatusSeeOther, b.Post(t, action, nil).Status)
			_, err = con.Ledger.Authenticate(t.Context(), secrets[0])
			assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "revoked")
			p = b.Get(t, "/admin")
			assert.Len(t, p.TestIDs("key-revoked"), 1)
		})
		t.Run("users", func(t *testing.T) {
			p := b.Post(t, "/admin/users", url.Values{"email": {"Rita@Example.com"}, "role": {"reviewer"}, "tenants": {"acme"}, "password": {"correct horse battery"}})
			require.Equal(t, http.StatusSeeOther, p.Status)
			p = b.Get(t, "/admin")
			assert.Equal(t, []string{"User rita@example.com (reviewer, acme) created."}, p.TestIDs("notice"))
			assert.Contains(t, p.Attrs("user-row", "data-email"), "rita@example.com")
			b.Post(t, "/admin/users", url.Values{"email": {"short@example.com"}, "role": {"reviewer"}, "tenants": {"acme"}, "password": {"short"}})
			p = b.Get(t, "/admin")
			assert.Equal(t, []string{"Nothing was changed: the password must have at least 12 characters."}, p.TestIDs("notice"))

			rita := con.NewBrowser(t)
			rita.MustLogin(t, "rita@example.com", "correct horse battery")
		})
		t.Run("every tenant is a choice, never an empty field", func(t *testing.T) {
			b.Get(t, "/admin")
			require.Equal(t, http.StatusSeeOther, b.Post(t, "/admin/users", url.Values{"email": {"empty@example.com"}, "role": {"reviewer"},
				"password": {"a long enough password"}}).Status)
			p := b.Get(t, "/admin")
			assert.Equal(t, []string{"Nothing was changed: name the tenants this person may see, or choose every tenant."}, p.TestIDs("notice"))
			_, err := con.Ledger.UserByEmail(t.Context(), "empty@example.com")
			assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "no user was created")
			require.Equal(t, http.StatusSeeOther, b.Post(t, "/admin/users", url.Values{"email": {"every@example.com"}, "role": {"reviewer"},
				"all_tenants": {"1"}, "password": {"a long enough password"}}).Status)
			u, err := con.Ledger.UserByEmail(t.Context(), "every@example.com")
			require.NoError(t, err)
			assert.Nil(t, u.TenantList(), "every tenant, chosen")
		})
		t.Run("a tenant admin cannot grant more than they hold", func(t *testing.T) {
			con.Tenant(t, "globex")
			pw := con.User(t, "tina@example.com", models.RoleAdmin, "acme")
			tina := con.NewBrowser(t)
			tina.MustLogin(t, "tina@example.com", pw)
			tina.Get(t, "/admin")
			assert.Equal(t, http.StatusForbidden, tina.Post(t, "/admin/tenants", url.Values{"name": {"initech"}}).Status)
			assert.Equal(t, http.StatusForbidden, tina.Post(t, "/admin/users", url.Values{"email": {"x@example.com"}, "role": {"admin"},
				"all_tenants": {"1"}, "password": {"a long enough password"}}).Status)
			assert.Equal(t, http.StatusNotFound, tina.Post(t, "/admin/keys", url.Values{"tenant": {"globex"}, "principal": {"p"}, "tools": {"*"}}).Status)
		})
	})
}

func TestOperationPage(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		s := seedScoped(t, d)
		_, err := s.con.Ledger.Audit(t.Context(), models.AuditInput{Actor: "user:ada@example.com", Action: "review.reconcile_now",
			Tenant: "acme", OperationID: s.acmeRefund.ID, Outcome: "ok"})
		require.NoError(t, err)
		p := s.b.Get(t, "/operations/"+s.acmeRefund.ID)
		require.Equal(t, http.StatusOK, p.Status)
		assert.Len(t, p.TestIDs("audit-entry"), 1)
		assert.Contains(t, p.TestIDs("audit-entry")[0], "review.reconcile_now")
		assert.NotContains(t, p.Body, cardNumber, "the card number is masked")
		params := strings.Join(p.TestIDs("params-json"), "")
		assert.Contains(t, params, `"card_number": "***"`)
		assert.Contains(t, params, `"amount_cents": 1999`)
		assert.Equal(t, []string{"UNKNOWN"}, p.Attrs("state-badge", "data-state")[:1])
		assert.Equal(t, []string{"order-1042:refund"}, p.TestIDs("operation-key"))
		assert.Equal(t, []string{"created", "attempt-unclear", "escalated"}, p.Attrs("timeline-entry", "data-kind"), "one row per attempt")
		assert.Equal(t, []string{"created", "attempt_started", "attempt_finished", "state_changed", "escalated"}, p.Attrs("raw-event", "data-type"),
			"the events as recorded, one click away")
		facts := strings.Join(p.TestIDs("timeline-fact"), " | ")
		assert.Contains(t, facts, "Downstream status HTTP 504")
		assert.Contains(t, facts, "Latency 1500 ms")
		ids := p.TestIDs("timeline-id")
		assert.Contains(t, ids, "4bf92f3577b34da6a3ce929d0e0e4736")
		assert.Len(t, ids, 2, "the attempt's request id and trace id, once each")
		assert.Equal(t, []string{"open"}, p.Attrs("review", "data-status"))
		assert.Equal(t, []string{"reconcile_now", "confirm_succeeded", "confirm_not_executed", "mark_failed"},
			p.Attrs("action", "data-action"), "the UNKNOWN operation's actions, safest first")
		assert.Equal(t, []string{"wf-1"}, p.TestIDs("workflow-link"))
		assert.Empty(t, p.Attrs("operation-deliveries", "data-testid"), "webhook deliveries are an admin's page")

		apw := s.con.User(t, "ada@example.com", models.RoleAdmin)
		admin := s.con.NewBrowser(t)
		admin.MustLogin(t, "ada@example.com", apw)
		ap := admin.Get(t, "/operations/"+s.acmeRefund.ID)
		require.Equal(t, http.StatusOK, ap.Status)
		assert.Contains(t, ap.Body, `href="/admin/webhooks?operation=`+s.acmeRefund.ID+`"`, "an admin is led to the operation's deliveries")

		w := s.b.Get(t, "/workflows/wf-1")
		require.Equal(t, http.StatusOK, w.Status)
		assert.Equal(t, []string{s.acmeRefund.ID, s.acmeTicket.ID}, w.Attrs("workflow-row", "data-operation-id"), "in creation order")
	})
}

func TestDashboard(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		s := seedScoped(t, d)
		p := s.b.Get(t, "/")
		require.Equal(t, http.StatusOK, p.Status)
		assert.Equal(t, []string{"0"}, p.TestIDs("overdue-count"), "nothing has passed its window yet")
		assert.Equal(t, []string{"order-1042:refund"}, p.TestIDs("oldest-link"))
		assert.Contains(t, strings.Join(p.TestIDs("chart-summary"), " "), "1 attempts in the last 24 hours: 1 ambiguous.")
		assert.Contains(t, strings.Join(p.TestIDs("attention-note"), " "), "The counts overlap", "the page says how its counts relate")

		s.con.Clock.Advance(2 * 60 * 1e9) // past the default escalate_after (1m) and the pending grace (1m)
		p = s.b.Get(t, "/")
		assert.Equal(t, []string{"2"}, p.TestIDs("overdue-count"))
		assert.ElementsMatch(t, []string{s.acmeRefund.ID, s.acmeTicket.ID}, p.Attrs("operation-row", "data-operation-id"))
	})
}

func TestConsoleErrorsArePages(t *testing.T) {
	t.Parallel()
	s := seedScoped(t, models.SQLite)
	s.b.Header.Del("Accept") // a client that asks for nothing in particular still gets a page
	p := s.b.Get(t, "/operations/op_nope")
	assert.Equal(t, http.StatusNotFound, p.Status)
	assert.Contains(t, p.Header.Get("Content-Type"), "text/html")
	assert.Equal(t, "no-store", p.Header.Get("Cache-Control"))
	assert.Equal(t, []string{"404"}, p.Attrs("error-page", "data-status"))
	assert.Contains(t, p.Header.Get("Content-Security-Policy"), "default-src 'self'")
}

// The operation's timeline says what the agents' requests with its key did after it was
// recorded, which its events do not hold: the requests answered from the record, in one row
// from the first to the last, and a request with other params, refused, from the audit log;
// each in its place in time.
func TestOperationTimelineShowsRepeatsAndRefusedRequests(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		s := seedScoped(t, d)
		op := s.acmeRefund
		s.con.Clock.Advance(time.Minute)
		s.con.Ledger.NoteRepeat(op)
		s.con.Clock.Advance(90 * time.Second)
		_, err := s.con.Ledger.Audit(t.Context(), models.AuditInput{Actor: "api:billing-agent", Action: "api.key_mismatch",
			Tenant: "acme", OperationID: op.ID, Outcome: models.OutcomeRefused, RequestID: "req-mismatch-1"})
		require.NoError(t, err)
		s.con.Clock.Advance(time.Minute)
		s.con.Ledger.NoteRepeat(op)
		_, err = s.con.Ledger.FlushRepeats(t.Context())
		require.NoError(t, err)
		s.con.Ledger.NoteRepeat(op) // not written yet: this process's count is read with the rest

		p := s.b.Get(t, "/operations/"+op.ID)
		require.Equal(t, http.StatusOK, p.Status)
		kinds := p.Attrs("timeline-entry", "data-kind")
		assert.Equal(t, []string{"created", "attempt-unclear", "escalated", "repeat", "refused"}, kinds)
		titles := p.TestIDs("timeline-title")
		require.Len(t, titles, 5)
		assert.Equal(t, "Asked again with this key 3 times: answered from the record, nothing sent again", titles[3])
		assert.Equal(t, "A request with this key and other params was refused (422): nothing ran", titles[4])
		assert.Contains(t, p.Body, "req-mismatch-1", "the refused request's id, to find it in the access log")
	})
}
