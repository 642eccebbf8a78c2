package export_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/require"
)

// toolsYAML is a small catalogue with one sensitive param.
const toolsYAML = `
tools:
  - name: payments.charge
    description: Charge a card
    effect: write
    params_schema:
      type: object
      properties:
        card_number: {type: string}
        memo: {type: string}
        amount: {type: integer}
    sensitive_params: [card_number]
    http:
      url: http://127.0.0.1:9/charge
  - name: tickets.create
    description: Create a ticket
    effect: write
    params_schema:
      type: object
      properties:
        subject: {type: string}
    http:
      url: http://127.0.0.1:9/tickets
`

// Values that must never appear in clear in an export.
const (
	acmeCard   = "4111111111111111"
	globexCard = "5500000000000004"
	legacyPass = "s3cr3t-legacy"
	formula    = `=HYPERLINK("http://x","y")`
)

// t0 is when the fixture's clock starts.
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// fakeClock is the ledger's clock, moved by the fixture.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

// fixture is a ledger seeded with operations of two tenants in known states, at known times.
type fixture struct {
	l     *models.Ledger
	cat   *catalog.Catalog
	ids   map[string]string // fixture name → operation id
	clock *fakeClock
	// keys are the ledger's audit signing keys, as an auditor's KEYFILE holds them.
	keys models.AuditKeySet
}

// seeded op: name, tenant, key, tool, params, hour created (after t0), how it ends.
type seedOp struct {
	name, tenant, key, tool, params string
	hour                            int
	end                             models.State // PENDING: just submitted
	workflow, step                  string
}

var seedOps = []seedOp{
	{"acme-charge", "acme", formula, "payments.charge", `{"amount":1999,"card_number":"` + acmeCard + `","memo":"` + `=HYPERLINK(\"http://x\",\"y\")` + `"}`, 0, models.StateSucceeded, "+wf", "@step"},
	{"acme-ticket-pending", "acme", "k-ticket-1", "tickets.create", `{"subject":"-printer on fire"}`, 1, models.StatePending, "", ""},
	{"acme-ticket-failed", "acme", "k-ticket-2", "tickets.create", `{"subject":"broken"}`, 2, models.StateFailedFinal, "wf-2", "s1"},
	{"acme-legacy", "acme", "k-legacy", "legacy.tool", `{"password":"` + legacyPass + `"}`, 3, models.StateSucceeded, "", ""},
	{"globex-charge", "globex", "k-charge", "payments.charge", `{"amount":5,"card_number":"` + globexCard + `"}`, 4, models.StateSucceeded, "", ""},
}

// justifications are the agents' reasons of some seeded operations, as the ledger records
// them: already masked of the call's sensitive values (jobs masks them on submission).
var justifications = map[string]string{"acme-charge": "refund requested, card ***", "acme-ticket-pending": "-because"}

func newFixture(t *testing.T, d models.Dialect) *fixture {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Load([]byte(toolsYAML))
	require.NoError(t, err)
	clock := &fakeClock{now: t0}
	db := testdb.Open(t, d)
	dk, err := datakey.Parse(datakey.Generate(), "")
	require.NoError(t, err)
	key, err := models.LedgerKey(ctx, db, dk)
	require.NoError(t, err)
	l := models.New(models.Config{DB: db, Dialect: d, Now: clock.Now, DataKeys: dk, Key: key})
	_, err = l.GenerateAuditKey(ctx, models.Requester{Actor: models.ActorCLI})
	require.NoError(t, err)
	callers := map[string]*models.Caller{}
	for _, tenant := range []string{"acme", "globex"} {
		_, err := l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, tenant)
		require.NoError(t, err)
		k, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, tenant, "agent-1", nil)
		require.NoError(t, err)
		callers[tenant], err = l.Authenticate(ctx, k.Secret)
		require.NoError(t, err)
	}
	f := &fixture{l: l, cat: cat, ids: map[string]string{}, clock: clock}
	for _, s := range seedOps {
		clock.Set(t0.Add(time.Duration(s.hour) * time.Hour))
		f.ids[s.name] = seed(t, l, callers[s.tenant], s)
	}
	clock.Set(t0.Add(24 * time.Hour))
	f.keys, err = l.AuditKeys(ctx)
	require.NoError(t, err)
	return f
}

// seed records one operation through the ledger's own functions and drives it to s.end.
func seed(t *testing.T, l *models.Ledger, c *models.Caller, s seedOp) string {
	t.Helper()
	ctx := context.Background()
	in := models.NewOperation{Tenant: c.Tenant, PrincipalID: c.PrincipalID, APIKeyID: c.Key.ID, Key: s.key, Tool: s.tool,
		Fingerprint: "sha256:" + s.name, Params: []byte(s.params), WorkflowRunID: s.workflow, StepID: s.step, Actor: c.Actor(),
		Justification: justifications[s.name]}
	if s.end != models.StatePending {
		in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
	}
	sub, err := l.Submit(ctx, in)
	require.NoError(t, err)
	out := models.AttemptOutcome{Latency: 42 * time.Millisecond, TraceID: "trace-" + s.name, To: s.end}
	switch s.end {
	case models.StatePending:
		return sub.Op.ID
	case models.StateSucceeded:
		out.Class, out.DownstreamStatus, out.Result, out.DownstreamRef = "succeeded", 201, []byte(`{"id":"R-1","note":"-1"}`), "R-1"
	case models.StateFailedFinal:
		out.Class, out.DownstreamStatus, out.ErrorClass, out.ErrorMessage = "rejected", 422, "rejected", "=1+1 is not a subject"
	}
	require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: sub.Op, Attempt: sub.Attempt}, "w1", out))
	return sub.Op.ID
}

// idsOf maps fixture names to operation ids.
func (f *fixture) idsOf(names ...string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, f.ids[n])
	}
	return out
}
