package jobs_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// collector keeps every body posted to it, by path.
type collector struct {
	mu     sync.Mutex
	bodies map[string][]map[string]any
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		http.Error(w, "not JSON", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.bodies[r.URL.Path] = append(c.bodies[r.URL.Path], m)
	c.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func (c *collector) at(path string) []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bodies[path]
}

// TestChatAndPagerFormats: an UNKNOWN refund's review opens and is then decided; a Slack, a
// Teams and a PagerDuty subscription get it in their documented shapes, with the summary (never
// the card number), why a person is needed, and the console link; PagerDuty triggers and then
// resolves one incident, its routing key read from the reference. A test event reaches one
// subscription alone. Both engines.
func TestChatAndPagerFormats(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		cat, err := catalog.Load([]byte(webhookCatalogue + `    summary: "{{money .Params.amount_cents .Params.currency}} to order {{.Params.order_id}}"` + "\n"))
		require.NoError(t, err)
		clock := newClock()
		l := models.New(models.Config{DB: testdb.Open(t, d), Dialect: d, Now: clock.Now, Payloads: opview.Payloads(cat),
			PublicURL: "https://idemgate.example.com"})
		_, err = l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme")
		require.NoError(t, err)
		rx := &collector{bodies: map[string][]map[string]any{}}
		srv := httptest.NewServer(rx)
		t.Cleanup(srv.Close)
		events := []string{models.WebhookOperationUnknown, models.WebhookReviewOpened, models.WebhookReviewResolved}
		subs := map[string]string{}
		for _, f := range []string{models.WebhookFormatSlack, models.WebhookFormatTeams, models.WebhookFormatPagerDuty} {
			in := models.NewWebhook{Tenant: "acme", URL: srv.URL + "/" + f, Events: events, AllowPrivate: true, Format: f}
			if f == models.WebhookFormatPagerDuty {
				in.RoutingKeyRef, in.RefPolicy = "env:IDEMGATE_WEBHOOK_PAGERDUTY", models.SecretRefPolicy{EnvPrefix: models.DefaultNotifyEnvPrefix}
			}
			w, err := l.CreateWebhook(ctx, models.AllTenants(), models.Requester{Actor: "cli"}, in)
			require.NoError(t, err)
			subs[f] = w.Subscription.ID
		}
		_, err = l.CreateWebhook(ctx, models.AllTenants(), models.Requester{Actor: "cli"}, models.NewWebhook{Tenant: "acme",
			URL: srv.URL + "/pd", Events: []string{models.WebhookOperationSucceeded}, AllowPrivate: true, Format: models.WebhookFormatPagerDuty,
			RoutingKey: "R0UT1NGK3Y"})
		assert.Error(t, err, "PagerDuty takes only the events that open and close an incident")
		_, err = l.CreateWebhook(ctx, models.AllTenants(), models.Requester{Actor: "cli"}, models.NewWebhook{Tenant: "acme",
			URL: srv.URL + "/pd", Events: events, AllowPrivate: true, Format: models.WebhookFormatPagerDuty, RoutingKey: "R0UT1NGK3Y"})
		assert.ErrorContains(t, err, "IDEMGATE_DATA_KEY", "a routing key's value is sealed under the data key, never kept in clear")

		s, err := l.Submit(ctx, models.NewOperation{Tenant: "acme", PrincipalID: "prn", APIKeyID: "key", Key: "order-1044:refund",
			Tool: "refunds.issue", Fingerprint: "sha256:1044", Actor: "api:agent",
			Params: []byte(`{"amount_cents":4200,"currency":"EUR","order_id":"1044","card_number":"` + cardNumber + `"}`),
			Claim:  &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}})
		require.NoError(t, err)
		require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1", models.AttemptOutcome{
			Class: models.ErrorAmbiguous, To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous, ErrorMessage: "timeout"}))
		review, err := l.OpenReview(ctx, s.Op, models.ReasonUnknownOutcome, "worker:w1")
		require.NoError(t, err)
		op, err := l.Get(ctx, "acme", s.Op.ID)
		require.NoError(t, err)
		_, err = l.ConfirmSucceeded(ctx, models.Action{Scope: models.AllTenants(), Tenant: "acme", OperationID: op.ID,
			Actor: "user:rita@example.com", Reason: "R-5001 is in the dashboard", ExpectedState: models.StateUnknown,
			ExpectedAttempts: op.Attempts}, "R-5001", nil)
		require.NoError(t, err)

		w := &world{ledger: l}
		pub := w.publisher("p1", clock.Now, func(c *jobs.PublisherConfig) {
			c.SecretRefs = models.SecretRefPolicy{EnvPrefix: models.DefaultNotifyEnvPrefix}
			c.Getenv = func(name string) string {
				if name == "IDEMGATE_WEBHOOK_PAGERDUTY" {
					return "routing-key-of-acme"
				}
				return ""
			}
		})
		n, err := pub.PublishOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 9, n, "three events to three subscriptions")
		link := "https://idemgate.example.com/operations/" + op.ID

		slack := rx.at("/" + models.WebhookFormatSlack)
		require.Len(t, slack, 3)
		for _, m := range slack {
			raw, _ := json.Marshal(m)
			assert.NotContains(t, string(raw), cardNumber)
			assert.Contains(t, m["text"], "42.00 EUR to order 1044")
			blocks := m["blocks"].([]any)
			first := blocks[0].(map[string]any)
			assert.Equal(t, "section", first["type"])
			assert.Equal(t, "mrkdwn", first["text"].(map[string]any)["type"])
			last := blocks[len(blocks)-1].(map[string]any)
			require.Equal(t, "actions", last["type"])
			button := last["elements"].([]any)[0].(map[string]any)
			assert.Equal(t, "button", button["type"])
			assert.Equal(t, "plain_text", button["text"].(map[string]any)["type"])
			assert.Equal(t, link, button["url"])
		}
		var opened string
		for _, m := range slack {
			if text := m["blocks"].([]any)[0].(map[string]any)["text"].(map[string]any)["text"].(string); strings.Contains(text, "A review needs a person") {
				opened = text
			}
		}
		assert.Contains(t, opened, "It is not known whether the call took effect", "review.opened says why a person is needed")

		teams := rx.at("/" + models.WebhookFormatTeams)
		require.Len(t, teams, 3)
		for _, m := range teams {
			assert.Equal(t, "message", m["type"])
			att := m["attachments"].([]any)[0].(map[string]any)
			assert.Equal(t, "application/vnd.microsoft.card.adaptive", att["contentType"])
			card := att["content"].(map[string]any)
			assert.Equal(t, "AdaptiveCard", card["type"])
			assert.Equal(t, "1.4", card["version"])
			assert.Equal(t, "http://adaptivecards.io/schemas/adaptive-card.json", card["$schema"])
			body := card["body"].([]any)
			assert.Equal(t, "TextBlock", body[0].(map[string]any)["type"])
			summary := body[1].(map[string]any)
			assert.Equal(t, "RichTextBlock", summary["type"], "the agent's summary, as plain text")
			assert.Equal(t, "42.00 EUR to order 1044", summary["inlines"].([]any)[0].(map[string]any)["text"])
			action := card["actions"].([]any)[0].(map[string]any)
			assert.Equal(t, "Action.OpenUrl", action["type"])
			assert.Equal(t, link, action["url"])
		}

		pd := rx.at("/" + models.WebhookFormatPagerDuty)
		require.Len(t, pd, 2, "operation.unknown came before any review: nobody is paged yet")
		var actions []string
		for _, m := range pd {
			assert.Equal(t, "routing-key-of-acme", m["routing_key"])
			assert.Equal(t, "idemgate:"+review.ID, m["dedup_key"], "one incident per review")
			actions = append(actions, m["event_action"].(string))
			if m["event_action"] == "trigger" {
				p := m["payload"].(map[string]any)
				assert.Contains(t, p["summary"], "42.00 EUR to order 1044")
				assert.Equal(t, "idemgate", p["source"])
				assert.Contains(t, []any{"critical", "error", "warning", "info"}, p["severity"])
				assert.Equal(t, link, m["links"].([]any)[0].(map[string]any)["href"])
			} else {
				assert.NotContains(t, m, "payload", "a resolve carries only the keys")
			}
		}
		assert.ElementsMatch(t, []string{"trigger", "resolve"}, actions)
		var skipped int
		for _, row := range w.deliveries(t) {
			if row.SubscriptionID == subs[models.WebhookFormatPagerDuty] && row.EventType == models.WebhookOperationUnknown {
				skipped++
				assert.Equal(t, models.DeliveryDelivered, row.Status, "nothing to page is not a failure")
			}
		}
		assert.Equal(t, 1, skipped)

		_, err = l.SendTestEvent(ctx, models.AllTenants(), models.Requester{Actor: "cli"}, subs[models.WebhookFormatTeams])
		require.NoError(t, err)
		n, err = pub.PublishOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "a test event goes to one subscription")
		teams = rx.at("/" + models.WebhookFormatTeams)
		require.Len(t, teams, 4)
		card := teams[3]["attachments"].([]any)[0].(map[string]any)["content"].(map[string]any)
		assert.Contains(t, card["body"].([]any)[0].(map[string]any)["text"], "Test event")
	})
}
