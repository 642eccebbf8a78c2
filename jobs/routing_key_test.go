package jobs_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
)

// TestRoutingKeyReadsNoGatewaySecret is the security review's reproduction (issue 47, finding
// 1): a console admin, even one limited to a tenant, made the publisher read
// file:/proc/self/environ or another connection's tenant secret and post it to a URL of their
// choosing. Now a person in the console types the key itself (sealed, shown by its last four
// characters); a reference comes only from the command line, within what the operator set aside;
// and the publisher checks every stored reference against that again, so one an earlier release
// stored reads nothing. Both engines.
func TestRoutingKeyReadsNoGatewaySecret(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		keys, err := datakey.Parse(datakey.Generate(), "")
		require.NoError(t, err)
		clock := newClock()
		db := testdb.Open(t, d)
		l := models.New(models.Config{DB: db, Dialect: d, Now: clock.Now, DataKeys: keys})
		cli := models.Requester{Actor: models.ActorCLI}
		for _, tenant := range []string{"acme", "globex"} {
			_, err = l.CreateTenant(ctx, models.AllTenants(), cli, tenant)
			require.NoError(t, err)
		}
		require.NoError(t, l.SetTenantSecret(ctx, models.AllTenants(), cli, "acme", "stripe_key", "sk_live_connection_secret"))
		require.NoError(t, l.SetTenantSecret(ctx, models.AllTenants(), cli, "acme", "pagerduty", "pd-key-of-acme"))
		rx := &collector{bodies: map[string][]map[string]any{}}
		server := httptest.NewServer(rx)
		t.Cleanup(server.Close)
		srv := server.URL
		events := []string{models.WebhookReviewOpened}
		pd := func(ref, value string) models.NewWebhook {
			return models.NewWebhook{Tenant: "acme", URL: srv + "/pd", Events: events, AllowPrivate: true,
				Format: models.WebhookFormatPagerDuty, RoutingKeyRef: ref, RoutingKey: value,
				RefPolicy: models.SecretRefPolicy{EnvPrefix: models.DefaultNotifyEnvPrefix}}
		}
		tenantAdmin := models.Requester{Actor: "user:gil@example.com"}

		t.Run("a console admin cannot name a reference", func(t *testing.T) {
			for _, ref := range []string{"file:/proc/self/environ", "env:IDEMGATE_DATA_KEY", "tenant:stripe_key"} {
				_, err := l.CreateWebhook(ctx, models.OnlyTenants("acme"), tenantAdmin, pd(ref, ""))
				assert.ErrorContains(t, err, "command line only", ref)
				_, err = l.CreateWebhook(ctx, models.AllTenants(), tenantAdmin, pd("", ref))
				assert.ErrorContains(t, err, "type the routing key itself", "%s typed as a value is not taken for one", ref)
			}
		})

		t.Run("the command line names only what the operator set aside", func(t *testing.T) {
			dir := t.TempDir()
			inside := filepath.Join(dir, "pd.key")
			require.NoError(t, os.WriteFile(inside, []byte("pd-key-from-file\n"), 0o600))
			outside := filepath.Join(t.TempDir(), "secret")
			require.NoError(t, os.WriteFile(outside, []byte("not for notifications\n"), 0o600))
			link := filepath.Join(dir, "link")
			require.NoError(t, os.Symlink(outside, link))
			policy := models.SecretRefPolicy{EnvPrefix: models.DefaultNotifyEnvPrefix, FileDir: dir, TenantSecrets: []string{"pagerduty"}}
			for ref, ok := range map[string]bool{
				"env:IDEMGATE_WEBHOOK_PAGERDUTY": true, "env:IDEMGATE_DATA_KEY": false, "env:IDEMGATE_WEBHOOK_": false,
				"file:" + inside: true, "file:" + outside: false, "file:" + link: false, "file:" + dir + "/../" + filepath.Base(outside): false,
				"file:/proc/self/environ": false, "tenant:pagerduty": true, "tenant:stripe_key": false,
			} {
				in := pd(ref, "")
				in.RefPolicy = policy
				_, err := l.CreateWebhook(ctx, models.AllTenants(), cli, in)
				if ok {
					assert.NoError(t, err, ref)
				} else {
					assert.Error(t, err, ref)
				}
			}
			in := pd("file:"+inside, "")
			_, err := l.CreateWebhook(ctx, models.AllTenants(), cli, in)
			assert.ErrorContains(t, err, "named no directory", "without a directory named, no file is read")
		})

		t.Run("a typed key is sealed, shown by its last four, audited without its value", func(t *testing.T) {
			w, err := l.CreateWebhook(ctx, models.AllTenants(), tenantAdmin, pd("", "R0UT1NGK3Y0F4CME"))
			require.NoError(t, err)
			require.NotNil(t, w.Subscription.RoutingKeyHint)
			assert.Equal(t, "•••• 4CME", *w.Subscription.RoutingKeyHint)
			var stored struct{ RoutingKey, RoutingKeySealed *string }
			require.NoError(t, db.Raw("SELECT routing_key, routing_key_sealed FROM webhook_subscriptions WHERE id = ?", w.Subscription.ID).Scan(&stored).Error)
			assert.Nil(t, stored.RoutingKey)
			require.NotNil(t, stored.RoutingKeySealed)
			assert.NotContains(t, *stored.RoutingKeySealed, "R0UT1NGK3Y", "sealed, never in clear")
			entries, _, err := l.AuditEntries(ctx, models.AllTenants(), models.AuditSearch{Action: "webhook.create", Limit: 50})
			require.NoError(t, err)
			var said []string
			for _, e := range entries {
				assert.NotContains(t, e.Detail, "R0UT1NGK3Y")
				said = append(said, e.Detail)
			}
			assert.Contains(t, strings.Join(said, "\n"), "a value ending •••• 4CME", "the audit says what was configured")
			assert.Contains(t, strings.Join(said, "\n"), "env:IDEMGATE_WEBHOOK_PAGERDUTY")
		})

		t.Run("the publisher reads no reference outside the policy, whoever stored it", func(t *testing.T) {
			require.NoError(t, db.Exec("UPDATE webhook_subscriptions SET deleted_at = ? WHERE deleted_at IS NULL", clock.Now()).Error)
			// What an earlier release let a console admin store.
			var ids []string
			for _, ref := range []string{"file:/proc/self/environ", "tenant:stripe_key", "env:IDEMGATE_DATA_KEY"} {
				w, err := l.CreateWebhook(ctx, models.AllTenants(), cli, pd("env:IDEMGATE_WEBHOOK_PAGERDUTY", ""))
				require.NoError(t, err)
				require.NoError(t, db.Exec("UPDATE webhook_subscriptions SET routing_key = ? WHERE id = ?", ref, w.Subscription.ID).Error)
				ids = append(ids, w.Subscription.ID)
			}
			sealed, err := l.CreateWebhook(ctx, models.AllTenants(), tenantAdmin, pd("", "R0UT1NGK3Y0F4CME"))
			require.NoError(t, err)
			for _, id := range append(ids, sealed.Subscription.ID) {
				_, err := l.SendTestEvent(ctx, models.AllTenants(), cli, id)
				require.NoError(t, err)
			}
			w := &world{ledger: l}
			pub := w.publisher("p1", clock.Now, func(c *jobs.PublisherConfig) {
				c.SecretRefs = models.SecretRefPolicy{EnvPrefix: models.DefaultNotifyEnvPrefix}
				c.Getenv = func(string) string { return "THE-WHOLE-ENVIRONMENT" }
			})
			_, err = pub.PublishOnce(ctx)
			require.NoError(t, err)
			bodies := rx.at("/pd")
			require.Len(t, bodies, 1, "only the sealed key's test event is sent")
			assert.Equal(t, "R0UT1NGK3Y0F4CME", bodies[0]["routing_key"])
			for _, row := range w.deliveries(t) {
				if row.SubscriptionID != sealed.Subscription.ID {
					assert.NotEqual(t, models.DeliveryDelivered, row.Status)
				}
			}
		})
	})
}
