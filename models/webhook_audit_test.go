package models_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Slack or Teams incoming webhook URL is a credential: the audit log, which auditors read and
// export, records it masked on create and delete (issue 47, finding 8). Both engines.
func TestWebhookURLMaskedInTheAuditLog(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		l := models.New(models.Config{DB: testdb.Open(t, d), Dialect: d})
		cli := models.Requester{Actor: models.ActorCLI}
		_, err := l.CreateTenant(ctx, models.AllTenants(), cli, "acme")
		require.NoError(t, err)
		const secretPath = "/services/T0AAAA/B0BBBB/xoxSECRETtoken9f3a"
		w, err := l.CreateWebhook(ctx, models.AllTenants(), cli, models.NewWebhook{Tenant: "acme", URL: "http://127.0.0.1:9" + secretPath,
			Events: []string{models.WebhookReviewOpened}, AllowPrivate: true, Format: models.WebhookFormatSlack})
		require.NoError(t, err)
		_, err = l.DeleteWebhook(ctx, models.AllTenants(), cli, w.Subscription.ID)
		require.NoError(t, err)
		entries, _, err := l.AuditEntries(ctx, models.AllTenants(), models.AuditSearch{Limit: 50})
		require.NoError(t, err)
		var webhooks []string
		for _, e := range entries {
			assert.NotContains(t, e.Detail, "SECRET", e.Action)
			if strings.HasPrefix(e.Action, "webhook.") {
				webhooks = append(webhooks, e.Detail)
			}
		}
		require.Len(t, webhooks, 2)
		for _, detail := range webhooks {
			assert.Contains(t, detail, `"url":"http://127.0.0.1:9/…9f3a"`, "scheme, host and the last four characters")
		}
		assert.Equal(t, "https://hooks.example.com", models.AuditedURL("https://hooks.example.com"))
		assert.Equal(t, "https://hooks.example.com/…", models.AuditedURL("https://hooks.example.com/abc"))
	})
}
