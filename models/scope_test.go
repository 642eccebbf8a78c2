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

// scopeWorld is a ledger holding something of every kind in two tenants, acme and other: an
// UNKNOWN operation with its open review, announced to a subscription, an API key and a
// console user each.
type scopeWorld struct {
	l                   *models.Ledger
	acmeOp, otherOp     *models.Operation
	acmeKey, otherKey   *models.NewKey
	acmeHook, otherHook models.WebhookSubscription
}

var admin = models.Requester{Actor: "user:ada@example.com"}

func newScopeWorld(t *testing.T, d models.Dialect) scopeWorld {
	t.Helper()
	ctx := context.Background()
	l, _, _ := webhookSetup(t, d, testdb.Open(t, d))
	w := scopeWorld{l: l}
	unknown := func(tenant string, k *models.NewKey) *models.Operation {
		c, err := l.Authenticate(ctx, k.Secret)
		require.NoError(t, err)
		in := newOp(c, tenant+"-op")
		in.WorkflowRunID = "wf-" + tenant
		in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1",
			models.AttemptOutcome{Class: models.ErrorAmbiguous, To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous}))
		_, err = l.OpenReview(ctx, s.Op, models.ReasonUnknownOutcome, "worker:w1")
		require.NoError(t, err)
		return s.Op
	}
	for _, tenant := range []string{"acme", "other"} {
		k, err := l.CreateAPIKey(ctx, models.AllTenants(), admin, tenant, "agent-"+tenant, nil)
		require.NoError(t, err)
		hook := subscribe(t, l, tenant, models.WebhookEventTypes...)
		op := unknown(tenant, k)
		_, err = l.CreateUser(ctx, models.AllTenants(), admin, models.NewUser{Email: tenant + "@example.com",
			Password: goodPassword, Role: models.RoleAdmin, Tenants: []string{tenant}})
		require.NoError(t, err)
		if tenant == "acme" {
			w.acmeOp, w.acmeKey, w.acmeHook = op, k, hook
		} else {
			w.otherOp, w.otherKey, w.otherHook = op, k, hook
		}
	}
	_, err := l.CreateUser(ctx, models.AllTenants(), admin, models.NewUser{Email: "ada@example.com", Password: goodPassword, Role: models.RoleAdmin})
	require.NoError(t, err)
	return w
}

// reads is every console read of the ledger, reduced to what it found, so that one table can
// ask each of them with any scope.
func (w scopeWorld) reads() map[string]func(t *testing.T, s models.Scope) []string {
	ctx := context.Background()
	l := w.l
	return map[string]func(t *testing.T, s models.Scope) []string{
		"tenants": func(t *testing.T, s models.Scope) []string {
			ts, err := l.ScopedTenants(ctx, s)
			require.NoError(t, err)
			return collect(ts, func(x models.Tenant) string { return x.Name })
		},
		"operation search": func(t *testing.T, s models.Scope) []string {
			ops, _, err := l.SearchOperations(ctx, s, models.Search{Limit: 100})
			require.NoError(t, err)
			return collect(ops, func(o *models.Operation) string { return o.Tenant })
		},
		"workflow": func(t *testing.T, s models.Scope) []string {
			var out []string
			for _, run := range []string{"wf-acme", "wf-other"} {
				ops, err := l.WorkflowOperations(ctx, s, run)
				if models.ErrorCode(err) == models.CodeNotFound {
					continue
				}
				require.NoError(t, err)
				out = append(out, collect(ops, func(o *models.Operation) string { return o.Tenant })...)
			}
			return out
		},
		"operation record": func(t *testing.T, s models.Scope) []string {
			var out []string
			for _, id := range []string{w.acmeOp.ID, w.otherOp.ID} {
				rec, err := l.OperationRecord(ctx, s, id)
				if models.ErrorCode(err) == models.CodeNotFound {
					continue
				}
				require.NoError(t, err)
				out = append(out, rec.Op.Tenant)
			}
			return out
		},
		"review queue": func(t *testing.T, s models.Scope) []string {
			items, _, err := l.ReviewQueue(ctx, s, models.ReviewFilter{Limit: 100})
			require.NoError(t, err)
			return collect(items, func(i models.QueueItem) string { return i.Tenant })
		},
		"dashboard": func(t *testing.T, s models.Scope) []string {
			d, err := l.Dashboard(ctx, s, models.Windows{UnknownDefault: time.Minute, PendingGrace: time.Minute})
			require.NoError(t, err)
			var out []string
			for state, n := range d.ByState {
				for range n {
					out = append(out, string(state))
				}
			}
			for range d.OpenReviews {
				out = append(out, "review")
			}
			for _, b := range d.Attempts {
				for class, n := range b.Counts {
					for range n {
						out = append(out, "attempt "+class)
					}
				}
			}
			return out
		},
		"audit entries": func(t *testing.T, s models.Scope) []string {
			es, _, err := l.AuditEntries(ctx, s, models.AuditSearch{Limit: 500})
			require.NoError(t, err)
			return collect(es, func(e models.AuditEntry) string { return e.Tenant })
		},
		"api keys": func(t *testing.T, s models.Scope) []string {
			ks, err := l.APIKeys(ctx, s, "")
			require.NoError(t, err)
			return collect(ks, func(k models.APIKeyRow) string { return k.Tenant })
		},
		"users": func(t *testing.T, s models.Scope) []string {
			us, err := l.Users(ctx, s)
			require.NoError(t, err)
			return collect(us, func(u models.User) string { return u.Email })
		},
		"webhooks": func(t *testing.T, s models.Scope) []string {
			ws, err := l.Webhooks(ctx, s, "")
			require.NoError(t, err)
			return collect(ws, func(w models.WebhookSubscription) string { return w.Tenant })
		},
		"webhook deliveries": func(t *testing.T, s models.Scope) []string {
			ds, err := l.WebhookDeliveries(ctx, s, models.DeliveryFilter{})
			require.NoError(t, err)
			return collect(ds, func(d models.DeliveryRow) string { return d.Tenant })
		},
		"export": func(t *testing.T, s models.Scope) []string {
			ops, err := l.ExportBatch(ctx, s, models.ExportFilter{}, "", 100)
			require.NoError(t, err)
			return collect(ops, func(o models.ExportedOperation) string { return o.Op.Tenant })
		},
	}
}

func collect[T any](in []T, f func(T) string) []string {
	out := []string{}
	for _, x := range in {
		out = append(out, f(x))
	}
	return out
}

func TestZeroScopeSeesNothing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		w := newScopeWorld(t, d)
		for name, read := range w.reads() {
			t.Run(name, func(t *testing.T) {
				require.NotEmpty(t, read(t, models.AllTenants()), "every tenant's scope finds something")
				assert.Empty(t, read(t, models.Scope{}), "the zero scope finds nothing")
				assert.Empty(t, read(t, models.OnlyTenants()), "a scope of no tenants finds nothing")
			})
		}
	})
}

func TestZeroScopeChangesNothing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		w := newScopeWorld(t, d)
		l, none := w.l, models.Scope{}
		before, _, err := l.AuditEntries(ctx, models.AllTenants(), models.AuditSearch{Limit: 500})
		require.NoError(t, err)

		_, err = l.CreateTenant(ctx, none, admin, "initech")
		assert.Error(t, err, "create tenant")
		_, err = l.CreateAPIKey(ctx, none, admin, "acme", "agent-x", nil)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "create api key")
		_, err = l.RevokeAPIKeyByID(ctx, none, admin, w.acmeKey.Key.ID)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "revoke api key by id")
		_, err = l.RevokeAPIKey(ctx, none, admin, w.acmeKey.Key.Prefix)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "revoke api key by prefix")
		_, err = l.CreateUser(ctx, none, admin, models.NewUser{Email: "x@example.com", Password: goodPassword, Role: models.RoleAdmin})
		assert.Error(t, err, "create user of every tenant")
		_, err = l.CreateUser(ctx, none, admin, models.NewUser{Email: "y@example.com", Password: goodPassword,
			Role: models.RoleReviewer, Tenants: []string{"acme"}})
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "create user of acme")
		_, err = l.CreateWebhook(ctx, none, admin, models.NewWebhook{Tenant: "acme", URL: "https://example.com/hook",
			Events: []string{models.WebhookOperationSucceeded}})
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "create webhook")
		_, err = l.DeleteWebhook(ctx, none, admin, w.acmeHook.ID)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "delete webhook")
		deliveries, err := l.WebhookDeliveries(ctx, models.AllTenants(), models.DeliveryFilter{})
		require.NoError(t, err)
		require.NotEmpty(t, deliveries)
		_, err = l.Redeliver(ctx, none, admin, deliveries[0].ID)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "redeliver")

		for _, s := range []models.Scope{none, models.OnlyTenants("other")} {
			_, err = l.MarkFailed(ctx, models.Action{Scope: s, Tenant: "acme", OperationID: w.acmeOp.ID,
				Actor: admin.Actor, Reason: "gave up", ExpectedState: models.StateUnknown})
			assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "a review action outside the scope")
		}
		rec, err := l.OperationRecord(ctx, models.AllTenants(), w.acmeOp.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StateUnknown, rec.Op.State)

		// Nothing changed: no tenant, key, user or subscription more or less, no audit entry.
		tenants, err := l.ScopedTenants(ctx, models.AllTenants())
		require.NoError(t, err)
		assert.Equal(t, []string{"acme", "other"}, collect(tenants, func(x models.Tenant) string { return x.Name }))
		_, err = l.Authenticate(ctx, w.acmeKey.Secret)
		assert.NoError(t, err, "the key still works")
		keys, err := l.APIKeys(ctx, models.AllTenants(), "")
		require.NoError(t, err)
		assert.Len(t, keys, 3)
		users, err := l.Users(ctx, models.AllTenants())
		require.NoError(t, err)
		assert.Len(t, users, 3)
		hooks, err := l.Webhooks(ctx, models.AllTenants(), "")
		require.NoError(t, err)
		assert.Len(t, hooks, 2)
		after, _, err := l.AuditEntries(ctx, models.AllTenants(), models.AuditSearch{Limit: 500})
		require.NoError(t, err)
		assert.Equal(t, len(before), len(after))
	})
}

func TestTenantAdminStaysInTheirTenants(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		w := newScopeWorld(t, d)
		l, acme := w.l, models.OnlyTenants("acme")

		t.Run("reads", func(t *testing.T) {
			for name, read := range w.reads() {
				found := read(t, acme)
				assert.NotContains(t, found, "other", name)
				assert.NotContains(t, found, "other@example.com", name)
				assert.NotContains(t, found, "ada@example.com", "%s: an admin of every tenant is not theirs to manage", name)
			}
			users, err := l.Users(ctx, acme)
			require.NoError(t, err)
			assert.Equal(t, []string{"acme@example.com"}, collect(users, func(u models.User) string { return u.Email }))
		})
		t.Run("users", func(t *testing.T) {
			_, err := l.CreateUser(ctx, acme, admin, models.NewUser{Email: "o2@example.com", Password: goodPassword,
				Role: models.RoleAdmin, Tenants: []string{"other"}})
			assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "a user of another tenant")
			_, err = l.CreateUser(ctx, acme, admin, models.NewUser{Email: "o3@example.com", Password: goodPassword,
				Role: models.RoleAdmin, Tenants: []string{"acme", "other"}})
			assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "a user of acme and another tenant")
			_, err = l.CreateUser(ctx, acme, admin, models.NewUser{Email: "o4@example.com", Password: goodPassword, Role: models.RoleAdmin})
			assert.Equal(t, models.CodeInvalid, models.ErrorCode(err), "a user of every tenant")
			for _, email := range []string{"o2@example.com", "o3@example.com", "o4@example.com"} {
				_, err := l.UserByEmail(ctx, email)
				assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), email)
			}
			u, err := l.CreateUser(ctx, acme, admin, models.NewUser{Email: "a2@example.com", Password: goodPassword,
				Role: models.RoleReviewer, Tenants: []string{"acme"}})
			require.NoError(t, err)
			assert.Equal(t, "acme", u.Tenants)
		})
		t.Run("keys", func(t *testing.T) {
			_, err := l.CreateAPIKey(ctx, acme, admin, "other", "intruder", nil)
			assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
			_, err = l.RevokeAPIKeyByID(ctx, acme, admin, w.otherKey.Key.ID)
			assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
			_, err = l.RevokeAPIKey(ctx, acme, admin, w.otherKey.Key.Prefix)
			assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
			_, err = l.Authenticate(ctx, w.otherKey.Secret)
			assert.NoError(t, err, "other's key still works")
			k, err := l.RevokeAPIKey(ctx, acme, admin, w.acmeKey.Key.Prefix)
			require.NoError(t, err)
			assert.NotNil(t, k.RevokedAt)
		})
		t.Run("webhooks", func(t *testing.T) {
			_, err := l.CreateWebhook(ctx, acme, admin, models.NewWebhook{Tenant: "other", URL: "https://example.com/hook",
				Events: []string{models.WebhookOperationSucceeded}})
			assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
			_, err = l.DeleteWebhook(ctx, acme, admin, w.otherHook.ID)
			assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
			hooks, err := l.Webhooks(ctx, models.AllTenants(), "other")
			require.NoError(t, err)
			assert.Len(t, hooks, 1, "other's subscription stays")
		})
		t.Run("private webhook targets are the operator's", func(t *testing.T) {
			loopback := models.NewWebhook{Tenant: "acme", URL: "http://127.0.0.1:9/hook", Events: []string{models.WebhookOperationSucceeded}}
			_, unasked := l.CreateWebhook(ctx, models.AllTenants(), admin, loopback)
			require.Equal(t, models.CodeInvalid, models.ErrorCode(unasked))
			loopback.AllowPrivate = true
			_, err := l.CreateWebhook(ctx, acme, admin, loopback)
			require.Equal(t, models.CodeInvalid, models.ErrorCode(err), "a tenant admin may not allow it")
			assert.Equal(t, unasked.Error(), err.Error(), "the same refusal as without allowing it")

			public := models.NewWebhook{Tenant: "acme", URL: "http://93.184.216.34/hook", Events: []string{models.WebhookOperationSucceeded},
				AllowPrivate: true}
			w, err := l.CreateWebhook(ctx, acme, admin, public)
			require.NoError(t, err)
			assert.False(t, w.Subscription.AllowPrivate, "recorded without the allowance")
			w, err = l.CreateWebhook(ctx, models.AllTenants(), admin, loopback)
			require.NoError(t, err, "an admin of every tenant may")
			assert.True(t, w.Subscription.AllowPrivate)
		})
		t.Run("tenants", func(t *testing.T) {
			_, err := l.CreateTenant(ctx, acme, admin, "initech")
			assert.Equal(t, models.CodeInvalid, models.ErrorCode(err))
			tenants, err := l.ScopedTenants(ctx, models.AllTenants())
			require.NoError(t, err)
			assert.Len(t, tenants, 2)
		})
	})
}
