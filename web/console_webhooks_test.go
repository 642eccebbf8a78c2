package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadDelivery records a ticket that succeeds for tenant, through the console's ledger (wired
// as serve wires it), and ends its one delivery dead after a refused attempt, as the publisher
// would once the window closed.
func deadDelivery(t *testing.T, con *consoletest.Console, d models.Dialect, tenant string) models.DeliveryRow {
	t.Helper()
	ctx := context.Background()
	l := con.Ledger
	s, err := l.Submit(ctx, models.NewOperation{Tenant: tenant, PrincipalID: "prn_test", APIKeyID: "key_test", Key: "ticket-1",
		Tool: "tickets.create", Fingerprint: "sha256:01", Params: []byte(`{"subject":"x"}`), Actor: "api:agent",
		Claim: &models.ClaimSpec{Worker: "w", LeaseFor: time.Minute}})
	require.NoError(t, err)
	require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w", models.AttemptOutcome{
		Class: "succeeded", DownstreamStatus: 201, To: models.StateSucceeded, Result: []byte(`{"id":"T-1"}`)}))
	claimed, err := l.ClaimDeliveries(ctx, "publisher", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.NoError(t, l.RecordDelivery(ctx, "publisher", claimed[0], models.DeliveryOutcome{StatusCode: 503,
		Latency: 12 * time.Millisecond, Error: "the receiver answered 503 Service Unavailable", Status: models.DeliveryDead}))
	rows, err := l.WebhookDeliveries(ctx, models.AllTenants(), models.DeliveryFilter{})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	return rows[0]
}

func TestConsoleWebhooks(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		con := consoletest.Start(t, d, consoletest.Options{})
		con.Tenant(t, "acme")
		con.Tenant(t, "globex")
		password := con.User(t, "ada@example.com", models.RoleAdmin)
		b := con.NewBrowser(t)
		b.MustLogin(t, "ada@example.com", password)

		p := b.Get(t, "/admin/webhooks")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		assert.Empty(t, p.TestIDs("webhook-row"))
		assert.NotEmpty(t, p.TestIDs("deliveries-empty"))

		form := url.Values{"tenant": {"acme"}, "url": {"http://127.0.0.1:9/hook"}, "events": {"operation.succeeded", "review.opened"}}
		p = b.Post(t, "/admin/webhooks", form)
		require.Equal(t, http.StatusSeeOther, p.Status)
		p = b.Get(t, "/admin/webhooks")
		assert.Contains(t, strings.Join(p.TestIDs("notice"), " "), "--allow-private", "a loopback target is refused without the box")
		assert.Empty(t, p.TestIDs("webhook-row"))

		b.Get(t, "/admin/webhooks")
		p = b.Post(t, "/admin/webhooks", url.Values{"tenant": {"acme"}, "url": {"http://127.0.0.1:9/hook"},
			"events": {"operation.succeeded"}, "csrf_token": {""}})
		assert.Equal(t, http.StatusForbidden, p.Status, "no CSRF token, no change")

		b.Get(t, "/admin/webhooks")
		form.Set("allow_private", "1")
		p = b.Post(t, "/admin/webhooks", form)
		require.Equal(t, http.StatusSeeOther, p.Status)
		p = b.Get(t, "/admin/webhooks")
		secrets := p.TestIDs("new-webhook-secret")
		require.Len(t, secrets, 1, p.Body)
		secret := secrets[0]
		assert.True(t, strings.HasPrefix(secret, "whsec_"))
		require.Len(t, p.TestIDs("webhook-row"), 1)
		p = b.Get(t, "/admin/webhooks")
		assert.NotContains(t, p.Body, secret, "the secret is shown once")
		assert.NotContains(t, p.Body, "whsec_")

		row := deadDelivery(t, con, d, "acme")
		p = b.Get(t, "/admin/webhooks?status=dead")
		require.Equal(t, http.StatusOK, p.Status)
		assert.Equal(t, []string{models.DeliveryDead}, p.Attrs("delivery-row", "data-status"))
		assert.Equal(t, []string{row.OutboxID}, p.Attrs("delivery-row", "data-webhook-id"))
		assert.Contains(t, strings.Join(p.TestIDs("notice"), " "), "1 delivery listed below is dead")
		assert.Contains(t, p.TestIDs("delivery-error")[0], "503")
		require.Len(t, p.TestIDs("delivery-attempt"), 1)
		assert.Contains(t, p.TestIDs("delivery-attempt")[0], "503")
		assert.Empty(t, b.Get(t, "/admin/webhooks?status=delivered").TestIDs("delivery-row"))

		b.Get(t, "/admin/webhooks")
		p = b.Post(t, "/admin/webhooks/deliveries/"+row.ID+"/redeliver", nil)
		require.Equal(t, http.StatusSeeOther, p.Status)
		p = b.Get(t, "/admin/webhooks")
		assert.Contains(t, strings.Join(p.TestIDs("notice"), " "), "queued again")
		assert.Equal(t, []string{models.DeliveryPending}, p.Attrs("delivery-row", "data-status"))
		assert.Equal(t, []string{row.OutboxID}, p.Attrs("delivery-row", "data-webhook-id"), "same webhook-id")

		// A tenant admin of globex sees neither acme's subscription nor its deliveries.
		other := con.User(t, "gil@example.com", models.RoleAdmin, "globex")
		g := con.NewBrowser(t)
		g.MustLogin(t, "gil@example.com", other)
		p = g.Get(t, "/admin/webhooks")
		require.Equal(t, http.StatusOK, p.Status)
		assert.Empty(t, p.TestIDs("webhook-row"))
		assert.Empty(t, p.TestIDs("delivery-row"))
		p = g.Post(t, "/admin/webhooks/deliveries/"+row.ID+"/redeliver", nil)
		assert.Equal(t, http.StatusNotFound, p.Status)

		// A reviewer is not an admin.
		rp := con.User(t, "rev@example.com", models.RoleReviewer)
		r := con.NewBrowser(t)
		r.MustLogin(t, "rev@example.com", rp)
		assert.Equal(t, http.StatusForbidden, r.Get(t, "/admin/webhooks").Status)

		// Deleting the subscription from the page.
		p = b.Get(t, "/admin/webhooks")
		id := p.Attrs("webhook-row", "data-webhook-id")[0]
		p = b.Post(t, "/admin/webhooks/"+id+"/delete", nil)
		require.Equal(t, http.StatusSeeOther, p.Status)
		p = b.Get(t, "/admin/webhooks")
		assert.Empty(t, p.TestIDs("webhook-row"))
		assert.Equal(t, []string{models.DeliveryDead}, p.Attrs("delivery-row", "data-status"),
			"the pending delivery of a deleted subscription ends dead")
		assert.Empty(t, p.TestIDs("delivery-redeliver"), "and cannot be redelivered")
	})
}

// A tenant admin is not offered private webhook targets, and asking anyway meets the refusal a
// target on loopback gets without the allowance: such targets reach into the operator's network.
func TestTenantAdminCannotAllowPrivateTargets(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		con := consoletest.Start(t, d, consoletest.Options{})
		con.Tenant(t, "acme")
		browse := func(email string, tenants ...string) *consoletest.Browser {
			pw := con.User(t, email, models.RoleAdmin, tenants...)
			b := con.NewBrowser(t)
			b.MustLogin(t, email, pw)
			return b
		}
		ada, gil := browse("ada@example.com"), browse("gil@example.com", "acme")
		loopback := func() url.Values {
			return url.Values{"tenant": {"acme"}, "url": {"http://127.0.0.1:9/hook"}, "events": {"operation.succeeded"}}
		}
		refusal := func(b *consoletest.Browser, form url.Values) string {
			t.Helper()
			require.Equal(t, http.StatusOK, b.Get(t, "/admin/webhooks").Status)
			p := b.Post(t, "/admin/webhooks", form)
			require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
			return strings.Join(b.Get(t, "/admin/webhooks").TestIDs("notice"), " ")
		}

		assert.Len(t, ada.Get(t, "/admin/webhooks").TestIDs("webhook-allow-private"), 1, "offered to an admin of every tenant")
		assert.Empty(t, gil.Get(t, "/admin/webhooks").TestIDs("webhook-allow-private"), "not offered to a tenant admin")
		unasked := refusal(ada, loopback())
		require.Contains(t, unasked, "--allow-private")
		allowed := loopback()
		allowed.Set("allow_private", "1")
		assert.Equal(t, unasked, refusal(gil, allowed), "a tenant admin asking gets the refusal of not asking")
		hooks, err := con.Ledger.Webhooks(t.Context(), models.AllTenants(), "")
		require.NoError(t, err)
		assert.Empty(t, hooks, "nothing was subscribed")
	})
}

// An admin creates a Slack subscription and a PagerDuty one through the form (the routing key
// typed as a value, sealed, and shown again only by its last four characters; a reference
// refused), sees their formats listed, and sends a test event to the Slack one: one delivery, of
// that subscription alone, and an audit entry. Both engines.
func TestConsoleWebhookFormatsAndTestEvent(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		keys, err := datakey.Parse(datakey.Generate(), "")
		require.NoError(t, err)
		con := consoletest.Start(t, d, consoletest.Options{DataKeys: keys})
		con.Tenant(t, "acme")
		password := con.User(t, "ada@example.com", models.RoleAdmin)
		b := con.NewBrowser(t)
		b.MustLogin(t, "ada@example.com", password)
		require.Equal(t, http.StatusOK, b.Get(t, "/admin/webhooks").Status)

		create := func(form url.Values) *consoletest.Page {
			form.Set("tenant", "acme")
			form.Set("allow_private", "1")
			require.Equal(t, http.StatusSeeOther, b.Post(t, "/admin/webhooks", form).Status)
			return b.Get(t, "/admin/webhooks")
		}
		create(url.Values{"url": {"http://127.0.0.1:9/slack"}, "events": {"review.opened"}, "format": {"slack"}})
		p := create(url.Values{"url": {"http://127.0.0.1:9/pd"}, "events": {"review.opened"}, "format": {"pagerduty"},
			"routing_key": {"tenant:pagerduty_key"}})
		assert.Contains(t, strings.Join(p.TestIDs("notice"), " "), "type the routing key itself", "a reference is refused in the console")
		p = create(url.Values{"url": {"http://127.0.0.1:9/pd"}, "events": {"review.opened", "review.resolved"}, "format": {"pagerduty"},
			"routing_key": {"R0UT1NGK3Y0F4CME"}})
		assert.Equal(t, []string{"routing key •••• 4CME"}, p.TestIDs("webhook-routing-key-hint"), "only the last four characters are shown")
		assert.NotContains(t, p.Body, "R0UT1NGK3Y", "the key is never shown again")

		subs, err := con.Ledger.Webhooks(t.Context(), models.AllTenants(), "acme")
		require.NoError(t, err)
		require.Len(t, subs, 2)
		formats := map[string]string{}
		for _, s := range subs {
			formats[s.URL] = s.Format
		}
		assert.Equal(t, map[string]string{"http://127.0.0.1:9/slack": "slack", "http://127.0.0.1:9/pd": "pagerduty"}, formats)
		slack := subs[0]
		if slack.Format != "slack" {
			slack = subs[1]
		}

		p = b.Post(t, "/admin/webhooks/"+slack.ID+"/test", url.Values{})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		p = b.Get(t, "/admin/webhooks")
		assert.Contains(t, strings.Join(p.TestIDs("notice"), " "), "Test event")
		rows, err := con.Ledger.WebhookDeliveries(t.Context(), models.AllTenants(), models.DeliveryFilter{})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		assert.Equal(t, slack.ID, rows[0].SubscriptionID)
		assert.Equal(t, models.WebhookTest, rows[0].EventType)
		es, _, err := con.Ledger.AuditEntries(t.Context(), models.AllTenants(), models.AuditSearch{Action: "webhook.test", Limit: 10})
		require.NoError(t, err)
		assert.Len(t, es, 1)
	})
}
