package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

const webhookTools = `
tools:
  - name: tickets.create
    description: Create a ticket
    effect: write
    params_schema: {type: object}
    sensitive_params: [card_number]
    http: {url: "http://127.0.0.1:9/tickets", timeout: 1s}
`

const cardNumber = "4111111111111111"

// webhookSetup returns a ledger wired with the API's renderer over db, the catalogue, and a
// caller of tenant acme.
func webhookSetup(t *testing.T, d models.Dialect, db *gorm.DB) (*models.Ledger, *catalog.Catalog, *models.Caller) {
	t.Helper()
	cat, err := catalog.Load([]byte(webhookTools))
	require.NoError(t, err)
	l := models.New(models.Config{DB: db, Dialect: d, Payloads: opview.Payloads(cat)})
	ctx := context.Background()
	for _, name := range []string{"acme", "other"} {
		_, err := l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, name)
		require.NoError(t, err)
	}
	k, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent-1", nil)
	require.NoError(t, err)
	c, err := l.Authenticate(ctx, k.Secret)
	require.NoError(t, err)
	return l, cat, c
}

// subscribe creates a subscription of tenant to events, on a loopback URL nobody listens to.
func subscribe(t *testing.T, l *models.Ledger, tenant string, events ...string) models.WebhookSubscription {
	t.Helper()
	w, err := l.CreateWebhook(context.Background(), models.AllTenants(), models.Requester{Actor: "cli"},
		models.NewWebhook{Tenant: tenant, URL: "http://127.0.0.1:9/hook", Events: events, AllowPrivate: true})
	require.NoError(t, err)
	return w.Subscription
}

// announced lists the event types of the outbox messages about op, in order.
func announced(t *testing.T, l *models.Ledger, op *models.Operation) []string {
	t.Helper()
	msgs, err := l.OutboxMessages(context.Background(), op.Tenant, op.ID)
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		out = append(out, m.EventType)
	}
	return out
}

// running records an operation straight into RUNNING, as a request that claims it does.
func running(t *testing.T, l *models.Ledger, c *models.Caller, key string) models.Claimed {
	t.Helper()
	in := newOp(c, key)
	in.Params = []byte(`{"subject":"x","card_number":"` + cardNumber + `"}`)
	in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
	s, err := l.Submit(context.Background(), in)
	require.NoError(t, err)
	return models.Claimed{Op: s.Op, Attempt: s.Attempt}
}

var succeeded = models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201, To: models.StateSucceeded, Result: []byte(`{"id":"T-1"}`), DownstreamRef: "T-1"}

func TestEveryEventFiresOncePerCause(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, _, c := webhookSetup(t, d, testdb.Open(t, d))
		ctx := context.Background()
		all := subscribe(t, l, "acme", models.WebhookEventTypes...)
		onlySuccess := subscribe(t, l, "acme", models.WebhookOperationSucceeded)
		subscribe(t, l, "other", models.WebhookEventTypes...)
		gone := subscribe(t, l, "acme", models.WebhookEventTypes...)
		_, err := l.DeleteWebhook(ctx, models.AllTenants(), models.Requester{Actor: "cli"}, gone.ID)
		require.NoError(t, err)

		ok := running(t, l, c, "succeeds")
		assert.Empty(t, announced(t, l, ok.Op), "RUNNING is not announced")
		require.NoError(t, l.FinishAttempt(ctx, ok, "w1", succeeded))
		assert.Equal(t, []string{models.WebhookOperationSucceeded}, announced(t, l, ok.Op))

		bad := running(t, l, c, "fails")
		require.NoError(t, l.FinishAttempt(ctx, bad, "w1", models.AttemptOutcome{Class: "rejected", DownstreamStatus: 422,
			To: models.StateFailedFinal, ErrorClass: models.ErrorRejected, ErrorMessage: "no"}))
		assert.Equal(t, []string{models.WebhookOperationFailed}, announced(t, l, bad.Op))

		retried := running(t, l, c, "retried")
		require.NoError(t, l.FinishAttempt(ctx, retried, "w1", models.AttemptOutcome{Class: "not_sent", To: models.StatePending,
			NextAttemptAt: time.Now()}))
		assert.Empty(t, announced(t, l, retried.Op), "a retry is not announced")

		op := unknownOp(t, l, c, "unknown")
		assert.Equal(t, []string{models.WebhookOperationUnknown}, announced(t, l, op))
		_, err = l.OpenReview(ctx, op, models.ReasonUnknownOutcome, "worker:w1")
		require.NoError(t, err)
		_, err = l.ConfirmSucceeded(ctx, action(op, "ann@x"), "T-9", nil)
		require.NoError(t, err)
		assert.Equal(t, []string{models.WebhookOperationUnknown, models.WebhookReviewOpened, models.WebhookReviewResolved,
			models.WebhookOperationSucceeded}, announced(t, l, op))

		in := newOp(c, "approve-me")
		in.NeedsApproval = true
		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		assert.Equal(t, []string{models.WebhookOperationAwaitingApproval, models.WebhookReviewOpened}, announced(t, l, s.Op))
		_, err = l.Approve(ctx, action(s.Op, "ann@x"), 1, time.Hour)
		require.NoError(t, err)
		assert.Equal(t, []string{models.WebhookOperationAwaitingApproval, models.WebhookReviewOpened, models.WebhookReviewResolved},
			announced(t, l, s.Op), "approval resolves the review; PENDING itself is not announced")

		in = newOp(c, "reject-me")
		in.NeedsApproval = true
		s, err = l.Submit(ctx, in)
		require.NoError(t, err)
		_, err = l.Reject(ctx, action(s.Op, "ann@x"))
		require.NoError(t, err)
		assert.Equal(t, []string{models.WebhookOperationAwaitingApproval, models.WebhookReviewOpened, models.WebhookReviewResolved,
			models.WebhookOperationFailed}, announced(t, l, s.Op))

		s, err = l.Submit(ctx, newOp(c, "cancel-me"))
		require.NoError(t, err)
		_, err = l.Cancel(ctx, "acme", s.Op.ID, c.Actor())
		require.NoError(t, err)
		assert.Equal(t, []string{models.WebhookOperationFailed}, announced(t, l, s.Op))

		// Deliveries: one per message for the catch-all subscription, one per success for the
		// narrow one; none for the other tenant's or the deleted subscription.
		byAll, err := l.WebhookDeliveries(ctx, models.AllTenants(), models.DeliveryFilter{SubscriptionID: all.ID, Limit: 500})
		require.NoError(t, err)
		assert.Len(t, byAll, 14)
		bySuccess, err := l.WebhookDeliveries(ctx, models.AllTenants(), models.DeliveryFilter{SubscriptionID: onlySuccess.ID})
		require.NoError(t, err)
		assert.Len(t, bySuccess, 2)
		for _, r := range bySuccess {
			assert.Equal(t, models.WebhookOperationSucceeded, r.EventType)
		}
		everything, err := l.WebhookDeliveries(ctx, models.AllTenants(), models.DeliveryFilter{Limit: 500})
		require.NoError(t, err)
		assert.Len(t, everything, 16)
		outsider, err := l.WebhookDeliveries(ctx, models.OnlyTenants("other"), models.DeliveryFilter{})
		require.NoError(t, err)
		assert.Empty(t, outsider, "another tenant's changes are not sent to it, and its scope sees none of acme's")
	})
}

func TestNoMessageWithoutSubscriber(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, _, c := webhookSetup(t, d, testdb.Open(t, d))
		ctx := context.Background()
		subscribe(t, l, "acme", models.WebhookReviewOpened)
		ok := running(t, l, c, "quiet")
		require.NoError(t, l.FinishAttempt(ctx, ok, "w1", succeeded))
		assert.Empty(t, announced(t, l, ok.Op), "nobody asked for operation.succeeded")
	})
}

func TestPayloadIsTheMaskedOperationObject(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, cat, c := webhookSetup(t, d, testdb.Open(t, d))
		ctx := context.Background()
		sub, err := l.CreateWebhook(ctx, models.AllTenants(), models.Requester{Actor: "cli"}, models.NewWebhook{Tenant: "acme",
			URL: "http://127.0.0.1:9/hook", Events: models.WebhookEventTypes, AllowPrivate: true})
		require.NoError(t, err)

		cl := running(t, l, c, "masked")
		require.NoError(t, l.FinishAttempt(ctx, cl, "w1", models.AttemptOutcome{Class: "ambiguous", To: models.StateUnknown,
			ErrorClass: models.ErrorAmbiguous, ErrorMessage: "timeout"}))
		_, err = l.OpenReview(ctx, cl.Op, models.ReasonUnknownOutcome, "worker:w1")
		require.NoError(t, err)
		msgs, err := l.OutboxMessages(ctx, "acme", cl.Op.ID)
		require.NoError(t, err)
		require.Len(t, msgs, 2)

		current, err := l.Get(ctx, "acme", cl.Op.ID)
		require.NoError(t, err)
		api, err := json.Marshal(opview.Render(cat, current))
		require.NoError(t, err)
		for _, m := range msgs {
			assert.NotContains(t, m.Payload, cardNumber, "a sensitive param is masked")
			assert.NotContains(t, m.Payload, sub.Secret, "the signing secret never leaves")
			assert.NotContains(t, m.Payload, "whsec_")
			var p struct {
				Type       string    `json:"type"`
				OccurredAt time.Time `json:"occurred_at"`
				Tenant     string    `json:"tenant"`
				Data       struct {
					Operation json.RawMessage `json:"operation"`
					Review    *struct {
						ID, Status, Reason, OperationID string
					} `json:"review"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal([]byte(m.Payload), &p))
			assert.Equal(t, m.EventType, p.Type)
			assert.Equal(t, "acme", p.Tenant)
			assert.True(t, p.OccurredAt.Equal(m.OccurredAt), "occurred_at is the change's time")
			assert.Contains(t, string(p.Data.Operation), `"card_number":"***"`)
			if m.EventType == models.WebhookReviewOpened {
				// The latest message shows the operation exactly as the API answers now.
				assert.JSONEq(t, string(api), string(p.Data.Operation))
				require.NotNil(t, p.Data.Review)
				assert.Equal(t, models.ReviewOpen, p.Data.Review.Status)
				assert.Equal(t, models.ReasonUnknownOutcome, p.Data.Review.Reason)
			} else {
				assert.Nil(t, p.Data.Review, "operation events carry no review detail")
				assert.Contains(t, string(p.Data.Operation), `"state":"UNKNOWN"`)
			}
		}
	})
}

var errInjected = errors.New("injected failure")

// failOn makes INSERTs into table fail while armed is set; with afterOutbox, only once an
// INSERT into the outbox was attempted. writes counts those outbox INSERTs. The events of a
// transaction are written by the statement that ends it (Ledger.flush: on PostgreSQL a raw
// statement, which GORM runs through its row callbacks), so both kinds of callback are watched.
func failOn(t *testing.T, db *gorm.DB, table string, afterOutbox bool, armed *atomic.Bool, writes *atomic.Int32) {
	t.Helper()
	check := func(tx *gorm.DB) {
		if !armed.Load() {
			return
		}
		if tx.Statement.Table == "outbox" {
			writes.Add(1)
		}
		into := tx.Statement.Table == table || strings.Contains(tx.Statement.SQL.String(), "INSERT INTO "+table+" ")
		if into && (!afterOutbox || writes.Load() > 0) {
			_ = tx.AddError(errInjected)
		}
	}
	require.NoError(t, db.Callback().Create().Before("gorm:create").Register("test:fail_"+table, check))
	require.NoError(t, db.Callback().Row().Before("gorm:row").Register("test:fail_row_"+table, check))
}

// TestOutboxCommitsWithTheChange fails the transaction of a state change half-way and finds
// neither the change nor its notification; and a change that commits always has its
// notification.
func TestOutboxCommitsWithTheChange(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		for _, tc := range []struct {
			name, fails  string
			afterOutbox  bool
			outboxWrites int32
		}{
			// The events are written at the transaction's end, before its outbox rows.
			{"the events fail", "events", false, 0},
			{"the deliveries after the outbox row fail", "webhook_deliveries", true, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				db := testdb.Open(t, d)
				var armed atomic.Bool
				var outboxWrites atomic.Int32
				failOn(t, db, tc.fails, tc.afterOutbox, &armed, &outboxWrites)
				l, _, c := webhookSetup(t, d, db)
				subscribe(t, l, "acme", models.WebhookEventTypes...)
				cl := running(t, l, c, "half-way")

				armed.Store(true)
				err := l.FinishAttempt(ctx, cl, "w1", succeeded)
				armed.Store(false)
				require.ErrorIs(t, err, errInjected)
				assert.Equal(t, tc.outboxWrites, outboxWrites.Load(), "outbox rows written before the failure")

				op, err := l.Get(ctx, "acme", cl.Op.ID)
				require.NoError(t, err)
				assert.Equal(t, models.StateRunning, op.State, "no state change without its notification")
				assert.Empty(t, announced(t, l, op), "no notification without its state change")
				rows, err := l.WebhookDeliveries(ctx, models.AllTenants(), models.DeliveryFilter{})
				require.NoError(t, err)
				assert.Empty(t, rows)

				// Once the database lets it, the same change commits with its notification.
				cl.Op = op
				require.NoError(t, l.FinishAttempt(ctx, cl, "w1", succeeded))
				assert.Equal(t, []string{models.WebhookOperationSucceeded}, announced(t, l, op))
			})
		}
	})
}

// TestNoRendererRefusesAWantedChange: a ledger nobody gave a renderer cannot write a payload,
// so it refuses a change a subscription wants rather than commit it silently; changes nobody
// subscribed to are unaffected.
func TestNoRendererRefusesAWantedChange(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		db := testdb.Open(t, d)
		wired, _, c := webhookSetup(t, d, db)
		bare := models.New(models.Config{DB: db, Dialect: d})
		ctx := context.Background()

		cl := running(t, bare, c, "nobody listens")
		require.NoError(t, bare.FinishAttempt(ctx, cl, "w1", succeeded))

		subscribe(t, wired, "acme", models.WebhookOperationSucceeded)
		cl = running(t, bare, c, "someone listens")
		err := bare.FinishAttempt(ctx, cl, "w1", succeeded)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no payload renderer")
		op, err := bare.Get(ctx, "acme", cl.Op.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StateRunning, op.State)
	})
}

func TestSubscriptionsRefuseBadTargetsAndKeepTheirSecret(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, _, _ := webhookSetup(t, d, testdb.Open(t, d))
		ctx := context.Background()
		dns := fakeDNS{"public.example.test": {"93.184.216.34"}, "mixed.example.test": {"93.184.216.34", "10.0.0.7"},
			"localhost.example.test": {"127.0.0.1"}}
		create := func(url string, events []string, allowPrivate bool) (*models.CreatedWebhook, error) {
			return l.CreateWebhook(ctx, models.AllTenants(), models.Requester{Actor: "cli"},
				models.NewWebhook{Tenant: "acme", URL: url, Events: events, AllowPrivate: allowPrivate, Resolver: dns})
		}
		ev := []string{models.WebhookOperationSucceeded}
		for _, url := range []string{
			"http://127.0.0.1:8080/hook", "http://[::1]/hook", "http://10.1.2.3/", "http://192.168.1.1/", "http://172.16.0.1/",
			"http://169.254.169.254/latest/meta-data", "http://[fd00::1]/", "http://0.0.0.0/", "http://[::ffff:127.0.0.1]/",
			"http://localhost.example.test/", "https://mixed.example.test/hook", "http://nowhere.example.test/",
		} {
			_, err := create(url, ev, false)
			assert.Equal(t, models.CodeInvalid, models.ErrorCode(err), "%s must be refused: %v", url, err)
		}
		for _, bad := range []string{"ftp://public.example.test/", "public.example.test/hook", "https://user:pw@public.example.test/"} {
			_, err := create(bad, ev, true)
			assert.Equal(t, models.CodeInvalid, models.ErrorCode(err), "%s must be refused", bad)
		}
		_, err := create("https://public.example.test/hook", []string{"operation.exploded"}, false)
		assert.Equal(t, models.CodeInvalid, models.ErrorCode(err), "unknown event types are refused")
		_, err = l.CreateWebhook(ctx, models.AllTenants(), models.Requester{Actor: "cli"},
			models.NewWebhook{Tenant: "nope", URL: "https://public.example.test/", Events: ev, Resolver: dns})
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))

		pub, err := create("https://public.example.test/hook", []string{" review.opened", "operation.succeeded", "review.opened"}, false)
		require.NoError(t, err)
		assert.Equal(t, "operation.succeeded,review.opened", pub.Subscription.Events)
		assert.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, pub.Secret)
		key, err := models.WebhookKey(pub.Secret)
		require.NoError(t, err)
		assert.Len(t, key, 32)
		assert.Empty(t, pub.Subscription.Secret)

		loop, err := create("http://127.0.0.1:8080/hook", ev, true)
		require.NoError(t, err, "loopback is allowed with allow-private")
		assert.True(t, loop.Subscription.AllowPrivate)

		list, err := l.Webhooks(ctx, models.AllTenants(), "acme")
		require.NoError(t, err)
		require.Len(t, list, 2)
		for _, s := range list {
			assert.Empty(t, s.Secret, "lists never carry the secret")
		}
		_, err = l.DeleteWebhook(ctx, models.OnlyTenants("other"), models.Requester{Actor: "user:x"}, loop.Subscription.ID)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "outside the scope it does not exist")
		_, err = l.DeleteWebhook(ctx, models.AllTenants(), models.Requester{Actor: "cli"}, loop.Subscription.ID)
		require.NoError(t, err)
		list, err = l.Webhooks(ctx, models.AllTenants(), "")
		require.NoError(t, err)
		assert.Len(t, list, 1)
		_, _, err = l.VerifyAudit(ctx)
		require.NoError(t, err)
		entries, _, err := l.AuditEntries(ctx, models.AllTenants(), models.AuditSearch{Action: "webhook", Limit: 100})
		require.NoError(t, err)
		assert.Len(t, entries, 3, "creations and the deletion are audited")
	})
}

// fakeDNS answers look-ups from a fixed table.
type fakeDNS map[string][]string

func (f fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	list, ok := f[strings.ToLower(host)]
	if !ok {
		return nil, errors.New("no such host")
	}
	var out []netip.Addr
	for _, s := range list {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

// TestStaleCopyStillAnnouncesTheCurrentReview: a review opened after the deciding worker read
// the operation is resolved by its change, and the notification shows it as the API would.
func TestStaleCopyStillAnnouncesTheCurrentReview(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, cat, c := webhookSetup(t, d, testdb.Open(t, d))
		ctx := context.Background()
		subscribe(t, l, "acme", models.WebhookEventTypes...)
		op := unknownOp(t, l, c, "stale")
		stale := *op
		_, err := l.OpenReview(ctx, op, models.ReasonUnknownOutcome, "worker:escalator")
		require.NoError(t, err)

		_, err = l.ClaimProbes(ctx, "w2", []string{"tickets.create"}, 10, time.Minute)
		require.NoError(t, err)
		stale.Fence++ // the probe's claim, as the reconciler holds it
		require.Nil(t, stale.ReviewID)
		require.NoError(t, l.RecordProbe(ctx, &stale, "w2", models.ProbeOutcome{Status: 200, Outcome: "found",
			To: models.StateSucceeded, Result: []byte(`{"id":"T-3"}`), DownstreamRef: "T-3"}))

		assert.Equal(t, []string{models.WebhookOperationUnknown, models.WebhookReviewOpened, models.WebhookReviewResolved,
			models.WebhookOperationSucceeded}, announced(t, l, op))
		msgs, err := l.OutboxMessages(ctx, "acme", op.ID)
		require.NoError(t, err)
		current, err := l.Get(ctx, "acme", op.ID)
		require.NoError(t, err)
		api, err := json.Marshal(opview.Render(cat, current))
		require.NoError(t, err)
		var last struct {
			Data struct {
				Operation json.RawMessage `json:"operation"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(msgs[3].Payload), &last))
		assert.JSONEq(t, string(api), string(last.Data.Operation), "the review shows, resolved, as the API has it")
		var resolved struct {
			Data struct {
				Review struct{ Status, Resolution string } `json:"review"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(msgs[2].Payload), &resolved))
		assert.Equal(t, models.ReviewResolved, resolved.Data.Review.Status)
		assert.Equal(t, "operation moved to SUCCEEDED", resolved.Data.Review.Resolution)
	})
}

// TestPayloadSummaryAndLinks: every body carries the tool's summary line, written from the
// masked params (a summary that names a sensitive param shows it masked), and, with a public
// URL, a link to the operation's page; without one, no links member.
func TestPayloadSummaryAndLinks(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		cat, err := catalog.Load([]byte(webhookTools + `    summary: "Ticket {{.Params.subject}} for card {{.Params.card_number}}"` + "\n"))
		require.NoError(t, err)
		db := testdb.Open(t, d)
		for _, public := range []string{"https://idemgate.example.com/", ""} {
			l := models.New(models.Config{DB: db, Dialect: d, Payloads: opview.Payloads(cat), PublicURL: public})
			ctx := context.Background()
			if public != "" {
				for _, name := range []string{"acme", "other"} {
					_, err := l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, name)
					require.NoError(t, err)
				}
				subscribe(t, l, "acme", models.WebhookEventTypes...)
			}
			k, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent", nil)
			require.NoError(t, err)
			c, err := l.Authenticate(ctx, k.Secret)
			require.NoError(t, err)
			cl := running(t, l, c, "linked-"+strconv.FormatBool(public != ""))
			require.NoError(t, l.FinishAttempt(ctx, cl, "w1", succeeded))
			msgs, err := l.OutboxMessages(ctx, "acme", cl.Op.ID)
			require.NoError(t, err)
			require.Len(t, msgs, 1)
			var p struct {
				Summary string          `json:"summary"`
				Links   json.RawMessage `json:"links"`
			}
			require.NoError(t, json.Unmarshal([]byte(msgs[0].Payload), &p))
			assert.Equal(t, "Ticket x for card ***", p.Summary)
			assert.NotContains(t, msgs[0].Payload, cardNumber)
			if public != "" {
				assert.JSONEq(t, `{"console":"https://idemgate.example.com/operations/`+cl.Op.ID+`"}`, string(p.Links))
			} else {
				assert.Nil(t, p.Links, "no public URL, no links: %s", msgs[0].Payload)
			}
		}
	})
}
