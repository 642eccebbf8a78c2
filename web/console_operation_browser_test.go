package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// escalatedRefund records the refund of the README's walk-through: sent, the connection closed
// before the answer, every look-up answered 500, and a review opened.
func escalatedRefund(t *testing.T, con *consoletest.Console, tenant, key string, lookups int) *models.Operation {
	t.Helper()
	refund := con.Operation(t, consoletest.Seed{Tenant: tenant, Key: key, Tool: "refunds.issue",
		Params: `{"amount_cents":4200,"currency":"EUR","order_id":"1044"}`,
		Outcome: &models.AttemptOutcome{Class: models.ErrorAmbiguous, Latency: 7 * time.Millisecond,
			Error: `Post "http://127.0.0.1:8080/sandbox/refunds": EOF`, To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous,
			ErrorMessage: `the request was sent but no answer came back: Post "http://127.0.0.1:8080/sandbox/refunds": EOF`}})
	for i := range lookups {
		if i > 0 {
			con.Clock.Advance(30 * time.Second)
		}
		probe(t, con, "refunds.issue", models.ProbeOutcome{Status: 500, Outcome: "error", To: models.StateUnknown,
			NextProbeAt: con.Clock.Now().Add(30 * time.Second)})
	}
	_, err := con.Ledger.OpenReview(t.Context(), refund, models.ReasonUnknownOutcome, "worker:demo-worker")
	require.NoError(t, err)
	return refund
}

// Item 1 of the console's reading order: the top of an operation page says what happened,
// why a person is needed, where reconciliation stands and what to look for downstream; after
// a decision its outcome comes first, and a PENDING page shows no stale warning.
func TestBrowserOperationTopAnswersWhyAndWhatIsSafe(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	refund := escalatedRefund(t, con, "acme", "order-1044:refund", 3)
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
	rec, err := con.Ledger.OperationRecord(t.Context(), models.AllTenants(), refund.ID)
	require.NoError(t, err)
	dk := rec.Op.DownstreamKeySent()

	signIn(t, ctx, con.URL+"/operations/"+refund.ID, "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("situation")))
	assert.Equal(t, "The request went to the refunds service, and the connection closed before it answered: it is not known whether the refund was made.",
		value(t, ctx, chromedp.Text(testID("situation-outcome"))))
	assert.Equal(t, "refunds.issue does not honour idempotency keys: a retry could carry it out twice.",
		value(t, ctx, chromedp.Text(testID("situation-why"))))
	reconcile := value(t, ctx, chromedp.Text(testID("situation-reconcile")))
	assert.True(t, strings.HasPrefix(reconcile, "3 look-ups, all HTTP 500, which told nothing either way; next in "), reconcile)
	assert.Equal(t, dk, value(t, ctx, chromedp.Text(testID("situation-reference"))))
	link := value(t, ctx, chromedp.AttributeValue(testID("reference-link"), "href")).Value
	assert.Equal(t, "http://127.0.0.1:9/refunds?reference="+dk, link, "the tools file's reference_url, rendered")
	assert.Equal(t, "warning", value(t, ctx, chromedp.AttributeValue(testID("situation"), "data-tone")).Value)
	// While a person must decide, the decision comes first (on the first screen), then the
	// situation as the first of the evidence, then the rest of it.
	order := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll(
		'[data-testid="situation"], [data-testid="action-panel"], [data-testid="operation-facts"], [data-testid="timeline"]'),
		(e) => e.getAttribute('data-testid'))`))
	assert.Equal(t, []string{"action-panel", "situation", "operation-facts", "timeline"}, order)

	run(t, ctx, chromedp.Click(testID("copy-reference")),
		chromedp.Poll[chromedp.Void](`document.querySelector('[data-testid="copy-reference"]').textContent === 'Copied'`))

	decide(t, ctx, "confirm_not_executed", "No refund for order 1044 in the payment system.")
	first := value(t, ctx, chromedp.Evaluate[string](`document.querySelector('main').firstElementChild.getAttribute('data-testid')`))
	assert.Equal(t, "notice", first, "the action's result is the first thing on the page")
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("notice"))), "Recorded as not executed")
	assert.Equal(t, "Pending", value(t, ctx, chromedp.Text(stateBadge)))
	assert.Equal(t, "info", value(t, ctx, chromedp.AttributeValue(testID("situation"), "data-tone")).Value, "no UNKNOWN warning on a PENDING page")
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("situation-outcome"))), "Waiting to be sent")
	top := value(t, ctx, chromedp.Text(testID("situation")))
	assert.Contains(t, top, "Last attempt\nthe request went to the refunds service, and the connection closed before it answered")
	assert.NotContains(t, top, "Recorded error", "the old attempt's error is no banner on a PENDING page")
	assert.NotContains(t, top, "Why it waits for you")
}

// A compensated operation says so next to its state, and the compensation names what it undoes.
func TestBrowserCompensatedMarker(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	ticket := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-7:ticket", Tool: "tickets.create",
		Params: `{"subject":"Parcel lost"}`, Outcome: &models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201,
			Latency: 80 * time.Millisecond, To: models.StateSucceeded, Result: []byte(`{"id":"T-7"}`), DownstreamRef: "T-7"}})
	comp, err := con.Executor.ProposeCompensation(t.Context(), ticket, models.Requester{Actor: "user:paul@example.com"}, "Opened by mistake.")
	require.NoError(t, err)
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")

	signIn(t, ctx, con.URL+"/operations/"+ticket.ID, "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("compensated-marker")))
	marker := words(value(t, ctx, chromedp.Text(testID("compensated-marker"))))
	assert.Contains(t, marker, "Compensated by compensate:"+ticket.ID)
	assert.Contains(t, marker, "Awaiting approval")
	assert.Equal(t, "T-7", value(t, ctx, chromedp.Text(testID("situation-reference"))), "the downstream's own id once known")
	assert.Equal(t, "Done: the tickets service answered HTTP 201.", value(t, ctx, chromedp.Text(testID("situation-outcome"))))

	run(t, ctx, chromedp.Click(testID("compensated-marker")+" a"), chromedp.WaitVisible(testID("compensates-marker")))
	assert.Contains(t, value(t, ctx, chromedp.Location()), "/operations/"+comp.ID)
	assert.Equal(t, fmt.Sprintf("Undoes %s", ticket.Key), words(value(t, ctx, chromedp.Text(testID("compensates-marker")))))
}

// Item 2: the actions say what they risk. A retry of a refund, whose downstream does not
// deduplicate, is marked risky and says why; a ticket's, whose downstream does, is not; an
// email, which cannot be looked up, is not offered a look-up, and a forged one is refused.
func TestBrowserActionsHonestAboutRisk(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	refund := escalatedRefund(t, con, "acme", "order-1:refund", 1)
	ticket := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1:ticket", Tool: "tickets.create",
		Params: `{"subject":"Parcel lost"}`, Unknown: true, Review: true})
	email := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1:email", Tool: "email.send",
		Params: `{"to":"ada@example.com","subject":"Your refund","body":"Done."}`, Unknown: true, Review: true})
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
	actions := func() []string {
		return value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('[data-testid="action"]'), (a) => a.getAttribute('data-action'))`))
	}

	signIn(t, ctx, con.URL+"/operations/"+refund.ID, "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("action-panel")))
	assert.Equal(t, []string{"reconcile_now", "confirm_succeeded", "confirm_not_executed", "mark_failed"}, actions())
	assert.Equal(t, "Risky", value(t, ctx, chromedp.TextContent(testID("action-risk-confirm_not_executed"))))
	assert.Contains(t, value(t, ctx, chromedp.AttributeValue(`[data-action="confirm_not_executed"]`, "class")).Value, "action--danger")
	run(t, ctx, chromedp.Click(testID("action-open-confirm_not_executed")), chromedp.WaitVisible(testID("action-caution-confirm_not_executed")))
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("action-caution-confirm_not_executed"))),
		"refunds.issue does not honour idempotency keys: if the first request was carried out, this retry carries it out a second time")

	run(t, ctx, chromedp.Navigate(con.URL+"/operations/"+ticket.ID), chromedp.WaitVisible(testID("action-panel")))
	assert.Equal(t, 0, count(t, ctx, testID("action-risk-confirm_not_executed")), "tickets.create honours keys: a repeat is harmless")
	assert.Contains(t, value(t, ctx, chromedp.AttributeValue(`[data-action="confirm_not_executed"]`, "class")).Value, "action--neutral")

	run(t, ctx, chromedp.Navigate(con.URL+"/operations/"+email.ID), chromedp.WaitVisible(testID("action-panel")))
	assert.Equal(t, []string{"confirm_succeeded", "confirm_not_executed", "mark_failed"}, actions(), "no look-up for a tool without reconcile")
	assert.Equal(t, "No look-up is possible: email.send has no reconcile, so only a person can settle it.",
		value(t, ctx, chromedp.Text(testID("situation-reconcile"))))

	// A forged post of the look-up is refused, and nothing is scheduled.
	before, err := con.Ledger.OperationRecord(t.Context(), models.AllTenants(), email.ID)
	require.NoError(t, err)
	b := con.NewBrowser(t)
	b.MustLogin(t, "rita@example.com", pw)
	b.Get(t, "/operations/"+email.ID)
	p := refused(t, b, email, act(t, b, email, models.ActionReconcileNow, nil))
	assert.Contains(t, p.TestIDs("notice")[0], "email.send has no reconcile")
	rec, err := con.Ledger.OperationRecord(t.Context(), models.AllTenants(), email.ID)
	require.NoError(t, err)
	assert.Equal(t, before.Op.NextProbeAt, rec.Op.NextProbeAt, "no look-up was scheduled")
	assert.Len(t, rec.Events, len(before.Events), "nothing was recorded on the operation")
}

// words joins the words of a text with single spaces: what a line reads, however it wraps.
func words(s string) string { return strings.Join(strings.Fields(s), " ") }

// Item 3: the timeline is read in five seconds. One row per attempt with the wait before it and
// why, a run of identical look-ups folded into one row, kinds told apart by colour and icon,
// the decision pinned above, every time in one millisecond format, details in words; the
// events as recorded one click away.
func TestBrowserTimelineReadInFiveSeconds(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	refund := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-9:refund", Tool: "refunds.issue",
		Params: `{"amount_cents":900,"currency":"EUR","order_id":"9"}`,
		Outcome: &models.AttemptOutcome{Class: models.ErrorThrottled, DownstreamStatus: 429, Latency: 40 * time.Millisecond,
			To: models.StatePending, NextAttemptAt: con.Clock.Now().Add(1500 * time.Millisecond)}})
	con.Clock.Advance(1500 * time.Millisecond)
	due, err := con.Ledger.ClaimDue(t.Context(), "demo-worker", 10, func(string) time.Duration { return time.Minute })
	require.NoError(t, err)
	require.Len(t, due, 1)
	con.Clock.Advance(250 * time.Millisecond)
	require.NoError(t, con.Ledger.FinishAttempt(t.Context(), due[0], "demo-worker", models.AttemptOutcome{Class: models.ErrorAmbiguous,
		DownstreamStatus: 504, Latency: 250 * time.Millisecond, To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous,
		ErrorMessage: "the downstream answered 504 after the request was sent"}))
	for i := range 12 {
		if i > 0 {
			con.Clock.Advance(30 * time.Second)
		}
		probe(t, con, "refunds.issue", models.ProbeOutcome{Status: 500, Outcome: "error", To: models.StateUnknown,
			NextProbeAt: con.Clock.Now().Add(30 * time.Second)})
	}
	now, err := con.Ledger.OperationRecord(t.Context(), models.AllTenants(), refund.ID)
	require.NoError(t, err)
	_, err = con.Ledger.OpenReview(t.Context(), now.Op, models.ReasonUnknownOutcome, "worker:demo-worker")
	require.NoError(t, err)
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")

	signIn(t, ctx, con.URL+"/operations/"+refund.ID, "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("timeline")))
	decide(t, ctx, "mark_failed", "The payment provider is down for the day; the customer was refunded by hand.")
	kinds := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('[data-testid="timeline-entry"]'), (e) => e.getAttribute('data-kind'))`))
	assert.Equal(t, []string{"created", "attempt-failed", "attempt-unclear", "probe", "escalated", "decision"}, kinds)
	titles := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('[data-testid="timeline-entry"] [data-testid="timeline-title"]'), (e) => e.textContent)`))
	assert.Equal(t, "Attempt 1: throttled", titles[1])
	assert.Equal(t, "Attempt 2: outcome unclear", titles[2])
	assert.Equal(t, "12 look-ups, all HTTP 500: none said whether it took effect", titles[3])
	assert.Equal(t, "rita@example.com marked it failed", titles[5], "a person by their email, without user:")
	second := words(value(t, ctx, chromedp.Text(`[data-kind="attempt-unclear"]`)))
	assert.Contains(t, second, "Waited 1.500 s (the downstream asked to slow down: Retry-After or backoff)")
	assert.Contains(t, second, "Downstream status HTTP 504")
	assert.Contains(t, second, "Latency 250 ms")

	// The decision is in its place, after the escalation, with its reason; the reason is read
	// once on the page (the reviews and the audit log's entries are folded below).
	assert.Contains(t, value(t, ctx, chromedp.Text(decisionRow+" "+testID("timeline-quote"))), "refunded by hand")
	assert.Equal(t, 1, shownTimes(t, ctx, "the customer was refunded by hand"), "the decision's reason once on the page")

	// Every time in the timeline in one format, to the millisecond.
	times := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('[data-testid="timeline"] time'), (e) => e.textContent)`))
	require.NotEmpty(t, times)
	for _, tm := range times {
		assert.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$`, tm)
	}
	// Kinds differ in colour and in icon.
	looks := value(t, ctx, chromedp.Evaluate[[]string](`['attempt-failed', 'attempt-unclear', 'probe', 'decision'].map((k) => {
		const i = document.querySelector('[data-testid="timeline-entry"][data-kind="' + k + '"] .timeline__icon');
		return getComputedStyle(i).color + ' ' + getComputedStyle(i).backgroundColor + ' ' + i.textContent; })`))
	for i := range looks {
		for j := range i {
			assert.NotEqual(t, looks[j], looks[i], "kinds look alike")
		}
	}
	// Details in words; the raw names only in the raw events, which open with one click.
	visible := value(t, ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="timeline"]').innerText`))
	assert.NotContains(t, visible, "next_probe_at")
	assert.NotContains(t, visible, "Reconciliation probe started")
	assert.Equal(t, 1, strings.Count(visible, "the downstream answered 504")+strings.Count(visible, "HTTP 504"), "nothing printed twice")
	run(t, ctx, chromedp.Click(testID("raw-events")+" summary"), chromedp.WaitVisible(testID("raw-event")))
	final, err := con.Ledger.OperationRecord(t.Context(), models.AllTenants(), refund.ID)
	require.NoError(t, err)
	assert.Equal(t, len(final.Events), count(t, ctx, testID("raw-event")), "every event as recorded")
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("raw-events"))), "next_probe_at")
	run(t, ctx, chromedp.Click(testID("raw-events")+" summary"))
	screenshot(t, ctx, "timeline")
}

// Item 4: queue rows show what is at stake: how long each waited (first), the tool's summary
// of the params, approvals so far and what the reviewer did, the proposer's reason for a
// compensation (also on its page); the count in the navigation and the tab; after a
// decision, the way to the next review.
func TestBrowserQueueShowsWhatIsAtStake(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	refund := escalatedRefund(t, con, "acme", "order-1044:refund", 1)
	con.Clock.Advance(10 * time.Minute)
	payout := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1043:payout", Tool: "payouts.dual",
		Params: `{"amount_cents":250000,"currency":"EUR","order_id":"1043"}`, NeedsApproval: true})
	con.Clock.Advance(5 * time.Minute)
	ticket := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1045:ticket", Tool: "tickets.create",
		Params: `{"subject":"Parcel lost"}`, Outcome: &models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201,
			Latency: 80 * time.Millisecond, To: models.StateSucceeded, Result: []byte(`{"id":"T-45"}`), DownstreamRef: "T-45"}})
	const why = "The customer asked twice; this ticket duplicates T-44."
	comp, err := con.Executor.ProposeCompensation(t.Context(), ticket, models.Requester{Actor: "user:rita@example.com"}, why)
	require.NoError(t, err)
	con.Clock.Advance(time.Minute)
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
	row := func(op *models.Operation) string {
		return `[data-testid="review-row"][data-operation-id="` + op.ID + `"] `
	}

	signIn(t, ctx, con.URL+"/login?next=%2Freviews", "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("review-table")))
	assert.Equal(t, "3", value(t, ctx, chromedp.Text(testID("nav-review-count"))))
	assert.True(t, strings.HasPrefix(value(t, ctx, chromedp.Title()), "(3) Reviews"), "the count in the tab's title")
	assert.Equal(t, "Waiting", value(t, ctx, chromedp.Text(testID("review-table")+" thead th:first-child")), "age first")
	assert.Equal(t, "16 min", value(t, ctx, chromedp.Text(row(refund)+testID("review-age"))))
	assert.Equal(t, "42.00 EUR to order 1044", value(t, ctx, chromedp.Text(row(refund)+testID("review-summary"))))
	assert.Equal(t, "2,500.00 EUR for order 1043", value(t, ctx, chromedp.Text(row(payout)+testID("review-summary"))))
	assert.Equal(t, "0 of 2 approvals", value(t, ctx, chromedp.Text(row(payout)+testID("review-approvals"))))
	assert.Equal(t, "you proposed this", value(t, ctx, chromedp.Text(row(comp)+testID("review-you"))))
	assert.Equal(t, "rita@example.com: “"+why+"”", words(value(t, ctx, chromedp.Text(row(comp)+testID("review-proposer-reason")))))

	// The compensation's page shows the proposer's reason beside the approval.
	run(t, ctx, chromedp.Click(row(comp)+testID("review-operation-link")), chromedp.WaitVisible(testID("approvals")))
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("proposer-reason"))), why)
	assert.Equal(t, 1, shownTimes(t, ctx, why), "the proposal's reason once: in the approvals box, not again in the timeline")
	assert.Contains(t, value(t, ctx, chromedp.Text(`[data-testid="timeline-entry"][data-kind="created"]`)), "Their reason is quoted under Approvals, above.")

	// Approving the payout: 1 of 2, and the queue says the reviewer approved.
	run(t, ctx, chromedp.Navigate(con.URL+"/operations/"+payout.ID), chromedp.WaitVisible(testID("action-panel")))
	decide(t, ctx, models.ActionApprove, "Checked the order: 2,500.00 EUR is what the customer is owed.")
	next := value(t, ctx, chromedp.AttributeValue(testID("next-review")+" a", "href")).Value
	assert.Equal(t, "/operations/"+refund.ID, next, "the oldest other review is next")
	run(t, ctx, chromedp.Click(testID("nav-reviews")), chromedp.WaitVisible(testID("review-table")))
	assert.Equal(t, "1 of 2 approvals", value(t, ctx, chromedp.Text(row(payout)+testID("review-approvals"))))
	assert.Equal(t, "you approved", value(t, ctx, chromedp.Text(row(payout)+testID("review-you"))))

	// Deciding the refund leads on, with one click, to the next review.
	run(t, ctx, chromedp.Click(row(refund)+testID("review-operation-link")), chromedp.WaitVisible(testID("action-panel")))
	decide(t, ctx, models.ActionConfirmSucceeded, "R-5001 is in the payment system.", [2]string{"action-reference-confirm_succeeded", "R-5001"})
	assert.Equal(t, "2", value(t, ctx, chromedp.Text(testID("nav-review-count"))), "one fewer waits")
	run(t, ctx, chromedp.Click(testID("next-review")+" a"), chromedp.WaitVisible(testID("operation")))
	assert.Contains(t, value(t, ctx, chromedp.Location()), "/operations/"+payout.ID)
}

// Item 6, small truths: people are named by their email; a refused decision leaves the
// browser on the operation's own address with the form kept; the reviews table shows the
// reviewer's reason; a key for a tool the catalogue lacks is refused; revoking asks first.
func TestBrowserSmallTruths(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	refund := escalatedRefund(t, con, "acme", "order-1050:refund", 1)
	pw := con.User(t, "ada@example.com", models.RoleAdmin)
	page := con.URL + "/operations/" + refund.ID

	signIn(t, ctx, page, "ada@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("action-panel")))
	stale := newTab(t, ctx)
	run(t, stale, chromedp.Navigate(page), chromedp.WaitVisible(testID("action-panel")), pauseLive)
	decide(t, ctx, models.ActionConfirmSucceeded, "R-5050 is in the payment system.", [2]string{"action-reference-confirm_succeeded", "R-5050"})

	// The tab left open decides too: refused, and back on the operation's own address.
	decide(t, stale, models.ActionMarkFailed, "Giving up.")
	assert.Equal(t, page, value(t, stale, chromedp.Location()), "not left on a POST-only address")
	assert.Contains(t, value(t, stale, chromedp.Text(testID("notice"))), "it is SUCCEEDED now, not UNKNOWN")
	assert.Equal(t, "Succeeded", value(t, stale, chromedp.Text(stateBadge)))
	// A reload repeats nothing.
	run(t, stale, chromedp.Reload(), chromedp.WaitVisible(stateBadge))
	assert.Zero(t, count(t, stale, testID("notice")))

	decision := words(value(t, ctx, chromedp.Text(decisionRow)))
	assert.Contains(t, decision, "ada@example.com confirmed it succeeded")
	assert.Contains(t, decision, "R-5050 is in the payment system.", "the reviewer's reason on the timeline")
	assert.Equal(t, 1, shownTimes(t, ctx, "R-5050 is in the payment system."), "and nowhere else on the page")
	assert.NotContains(t, value(t, ctx, chromedp.Text("main")), "user:", "people by their email, not the ledger's actor id")

	// Admin: a key for an unknown tool is refused; revoking asks first.
	run(t, ctx, chromedp.Navigate(con.URL+"/admin"), chromedp.WaitVisible(testID("key-form")),
		chromedp.SetValue(testID("key-tenant"), "acme"),
		chromedp.SetValue(testID("key-principal"), "billing-agent"),
		chromedp.SetValue(testID("key-tools"), "refunds.issue,refunds.reverse"),
		chromedp.Click(testID("key-submit")), chromedp.WaitVisible(testID("notice")))
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("notice"))), `the catalogue has no tool "refunds.reverse"`)
	keys, err := con.Ledger.APIKeys(t.Context(), models.AllTenants(), "acme")
	require.NoError(t, err)
	assert.Empty(t, keys, "no key was created")

	run(t, ctx, chromedp.SetValue(testID("key-tenant"), "acme"),
		chromedp.SetValue(testID("key-principal"), "billing-agent"),
		chromedp.SetValue(testID("key-tools"), "refunds.issue"),
		chromedp.Click(testID("key-submit")), chromedp.WaitVisible(testID("key-revoke-open")))
	assert.False(t, value(t, ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid="key-revoke"]').checkVisibility()`)),
		"the revoke button is hidden until asked for")
	run(t, ctx, chromedp.Click(testID("key-revoke-open")), chromedp.WaitVisible(testID("key-revoke")))
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("key-revoke-form"))), "This cannot be undone.")
	run(t, ctx, chromedp.Click(testID("key-revoke")), chromedp.WaitVisible(testID("key-revoked")))
}

// Item 6, users: an admin changes a reviewer's role, sets a new password and disables them;
// each change takes effect at once and is in the audit log. An admin limited to a tenant
// cannot reach a user of another.
func TestBrowserAdminChangesUsers(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	con.Tenant(t, "acme")
	con.Tenant(t, "globex")
	refund := escalatedRefund(t, con, "acme", "order-1060:refund", 1)
	adaPW := con.User(t, "ada@example.com", models.RoleAdmin)
	ritaPW := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
	user := func(email string) string { return `[data-testid="user-row"][data-email="` + email + `"] ` }

	rita := con.NewBrowser(t)
	rita.MustLogin(t, "rita@example.com", ritaPW)
	require.NotEmpty(t, rita.Get(t, "/operations/"+refund.ID).Attrs("action", "data-action"), "a reviewer may act")

	signIn(t, ctx, con.URL+"/admin#users", "ada@example.com", adaPW)
	run(t, ctx, chromedp.WaitVisible(testID("user-table")),
		chromedp.Click(user("rita@example.com")+testID("user-change-open")),
		chromedp.SetValue(user("rita@example.com")+testID("user-change-role"), "auditor"),
		chromedp.Click(user("rita@example.com")+testID("user-role-submit")), chromedp.WaitVisible(testID("notice")))
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("notice"))), "User rita@example.com is now auditor.")
	page := rita.Get(t, "/operations/"+refund.ID)
	assert.Empty(t, page.Attrs("action", "data-action"), "the new role holds at once")
	assert.Len(t, page.TestIDs("actions-read-only"), 1)

	const newPW = "a brand new passphrase"
	run(t, ctx, chromedp.Click(user("rita@example.com")+testID("user-change-open")),
		chromedp.SendKeys(user("rita@example.com")+testID("user-new-password"), newPW),
		dropNotices, chromedp.Click(user("rita@example.com")+testID("user-password-submit")), chromedp.WaitVisible(testID("notice")))
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("notice"))), "has a new password")
	assert.Equal(t, 303, rita.Get(t, "/").Status, "the old session ended")
	assert.NotEqual(t, 303, con.NewBrowser(t).Login(t, "rita@example.com", ritaPW).Status, "the old password fails")
	rita.MustLogin(t, "rita@example.com", newPW)

	run(t, ctx, chromedp.Click(user("rita@example.com")+testID("user-change-open")),
		dropNotices, chromedp.Click(user("rita@example.com")+testID("user-disable")), chromedp.WaitVisible(testID("notice")))
	assert.Contains(t, value(t, ctx, chromedp.Text(user("rita@example.com"))), "(disabled)")
	assert.Equal(t, 303, rita.Get(t, "/").Status, "signed out at once")
	assert.NotEqual(t, 303, con.NewBrowser(t).Login(t, "rita@example.com", newPW).Status, "a disabled user cannot sign in")

	entries, _, err := con.Ledger.AuditEntries(t.Context(), models.AllTenants(), models.AuditSearch{Action: "user", Limit: 100})
	require.NoError(t, err)
	var changes []string
	for _, e := range entries {
		if strings.HasPrefix(e.Action, "user.") && e.Actor == "user:ada@example.com" {
			changes = append(changes, e.Action)
			assert.NotContains(t, e.Detail, newPW, "never the password")
		}
	}
	assert.ElementsMatch(t, []string{models.AuditUserRole, models.AuditUserPassword, models.AuditUserDisable}, changes)

	// An admin of acme only reaches users of acme.
	tinaPW := con.User(t, "tina@example.com", models.RoleAdmin, "acme")
	con.User(t, "gus@example.com", models.RoleReviewer, "globex")
	tina := con.NewBrowser(t)
	tina.MustLogin(t, "tina@example.com", tinaPW)
	tina.Get(t, "/admin")
	g, err := con.Ledger.UserByEmail(t.Context(), "gus@example.com")
	require.NoError(t, err)
	assert.Equal(t, 303, tina.Post(t, "/admin/users/"+g.ID+"/disable", nil).Status)
	g, err = con.Ledger.UserByEmail(t.Context(), "gus@example.com")
	require.NoError(t, err)
	assert.Nil(t, g.DisabledAt, "another tenant's user is untouched")
	assert.Contains(t, strings.Join(tina.Get(t, "/admin").TestIDs("notice"), ""), "user not found")
}

// shownTimes counts how often text is shown on the page: in what is rendered of its main
// part, so that a folded record (the audit log's entries, raw events) does not count.
func shownTimes(t *testing.T, ctx context.Context, text string) int {
	t.Helper()
	main := value(t, ctx, chromedp.Evaluate[string](`document.querySelector('main').innerText`))
	return strings.Count(strings.Join(strings.Fields(main), " "), text)
}
