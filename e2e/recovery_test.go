package e2e_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// opState reads an operation's state straight from the ledger.
func opState(t *testing.T, g *gatewaytest.Gateway, id string) *models.Operation {
	t.Helper()
	op, err := g.Ledger.Get(context.Background(), g.Tenant, id)
	require.NoError(t, err)
	return op
}

func TestTimeoutAfterCommitIsReconciledNotRetried(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Recovery: true})
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/refunds", Method: "POST", Count: 1})
		resp := g.Submit(t, "order-7:refund", "refunds.issue", `{"order_id":"7","amount_cents":500,"currency":"EUR"}`,
			map[string]string{"Prefer": "wait=0"})
		require.Equal(t, http.StatusAccepted, resp.Status, string(resp.Body))
		id := resp.JSON(t)["id"].(string)
		gatewaytest.Eventually(t, 10*time.Second, "reconciled to SUCCEEDED", func() bool {
			return opState(t, g, id).State == models.StateSucceeded
		})
		op := opState(t, g, id)
		assert.Equal(t, 1, op.Attempts, "no second attempt was sent")
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"))
		assert.Len(t, g.Sandbox.Requests("/refunds"), 1+op.Probes, "one POST, then only look-ups")
		require.NotNil(t, op.DownstreamRef)
	})
}

func TestTimeoutBeforeCommitIsRetriedAfterSettle(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Recovery: true})
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeHang, Path: "/refunds", Method: "POST", Count: 1})
		resp := g.Submit(t, "order-8:refund", "refunds.issue", `{"order_id":"8","amount_cents":500,"currency":"EUR"}`,
			map[string]string{"Prefer": "wait=0"})
		require.Equal(t, http.StatusAccepted, resp.Status, string(resp.Body))
		id := resp.JSON(t)["id"].(string)
		gatewaytest.Eventually(t, 15*time.Second, "retried to SUCCEEDED", func() bool {
			return opState(t, g, id).State == models.StateSucceeded
		})
		op := opState(t, g, id)
		assert.Equal(t, 2, op.Attempts)
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"))
	})
}

func TestUnreconcilableUnknownIsEscalated(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Recovery: true})
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/emails", Count: 1})
		resp := g.Submit(t, "welcome:mail", "email.send", `{"to":"a@b.c","subject":"hi","body":"hello"}`, nil)
		require.Equal(t, http.StatusAccepted, resp.Status, string(resp.Body))
		id := resp.JSON(t)["id"].(string)
		gatewaytest.Eventually(t, 5*time.Second, "a review", func() bool { return opState(t, g, id).ReviewID != nil })
		got := g.Do(t, http.MethodGet, "/v1/operations/"+id, g.Key, nil, "").JSON(t)
		review := got["review"].(map[string]any)
		assert.Equal(t, "open", review["status"])
		assert.Equal(t, "unknown_outcome", review["reason"])
		assert.Equal(t, "UNKNOWN", got["state"])
		assert.Equal(t, 1, g.Sandbox.Committed("emails"))
	})
}

// An approval nobody gives is announced as expiring (the warning is an hour, longer than this
// tool's whole window, so at once), then lapses FAILED_FINAL, and nothing is paid.
func TestApprovalWarnsThenLapses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		tools := strings.Replace(gatewaytest.Tools, "review: {require_approval: true}",
			"review: {require_approval: true, approval_ttl: 2s}", 1)
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Recovery: true, Tools: tools})
		_, err := g.Ledger.CreateWebhook(context.Background(), models.AllTenants(), models.Requester{Actor: models.ActorCLI},
			models.NewWebhook{Tenant: g.Tenant, URL: "http://127.0.0.1:9/hook", AllowPrivate: true,
				Events: []string{models.WebhookReviewExpiring, models.WebhookOperationFailed}})
		require.NoError(t, err)
		resp := g.Submit(t, "payout-1", "payments.payout", `{"order_id":"1","amount_cents":500,"currency":"EUR"}`, nil)
		require.Equal(t, http.StatusAccepted, resp.Status, string(resp.Body))
		id := resp.JSON(t)["id"].(string)
		gatewaytest.Eventually(t, 10*time.Second, "lapsed", func() bool {
			return opState(t, g, id).State == models.StateFailedFinal
		})
		msgs, err := g.Ledger.OutboxMessages(context.Background(), g.Tenant, id)
		require.NoError(t, err)
		var types []string
		for _, m := range msgs {
			types = append(types, m.EventType)
		}
		assert.Equal(t, []string{models.WebhookReviewExpiring, models.WebhookOperationFailed}, types,
			"warned once before it lapsed")
		assert.Zero(t, g.Sandbox.Committed("refunds"), "an approval not given pays nothing")
	})
}
