package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's screenshots: the dashboard, the review queue, a payout awaiting approval and an
// UNKNOWN refund's page, over
// a day of a demo tenant's history. `IDEMGATE_SCREENSHOTS=docs go test -run
// TestBrowserScreenshots ./web/` writes them to docs/screenshots/; otherwise they go to the
// test's temporary directory, and the test only checks the pages.
func TestBrowserScreenshots(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	refund := seedDay(t, con)
	pw := con.User(t, "reviewer@demo.local", models.RoleReviewer, "demo")

	signIn(t, ctx, con.URL+"/", "reviewer@demo.local", pw)
	run(t, ctx, chromedp.WaitVisible(testID("state-counts")))
	assert.Equal(t, "3", value(t, ctx, chromedp.Text(testID("open-reviews-count"))))
	assert.Equal(t, "order-1031:email", value(t, ctx, chromedp.Text(testID("oldest-link"))))
	assert.Equal(t, 2, count(t, ctx, testID("overdue-table")+" "+testID("operation-row")))
	docsScreenshot(t, ctx, "dashboard", 1180)

	run(t, ctx, chromedp.Click(testID("nav-reviews")), chromedp.WaitVisible(testID("review-table")))
	keys := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('[data-testid="review-operation-link"]'), (a) => a.textContent)`))
	assert.Equal(t, []string{"order-1031:email", "order-1043:payout", "order-1044:refund"}, keys, "oldest first")
	docsScreenshot(t, ctx, "reviews", 780)

	// The payout awaiting approval leads with its amount, which the approve button names.
	run(t, ctx, chromedp.EmulateViewport(1280, 900),
		chromedp.Click(`[data-testid="review-row"]:nth-child(2) `+testID("review-operation-link")),
		chromedp.WaitVisible(testID("approvals")))
	assert.Equal(t, "2,500.00 EUR for order 1043", value(t, ctx, chromedp.Text(testID("operation-headline"))))
	run(t, ctx, chromedp.Click(testID("action-open-approve")), chromedp.WaitVisible(testID("action-submit-approve")))
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("action-submit-approve"))), "Approve 2,500.00 EUR")
	docsScreenshot(t, ctx, "operation-approval", 1000)
	run(t, ctx, chromedp.Click(testID("nav-reviews")), chromedp.WaitVisible(testID("review-table")))

	run(t, ctx,
		chromedp.Click(`[data-operation-id="`+refund.ID+`"] `+testID("review-operation-link")),
		chromedp.WaitVisible(testID("action-panel")))
	assert.Equal(t, "16 look-ups, all HTTP 500: none said whether it took effect", value(t, ctx, chromedp.Text(`[data-kind="probe"] `+testID("timeline-title"))),
		"the failed look-ups, on one row")
	assert.Equal(t, "The request went to the refunds service, and the connection closed before it answered: it is not known whether the refund was made.", value(t, ctx, chromedp.Text(testID("situation-outcome"))))
	docsScreenshotFull(t, ctx, "operation-escalated")

	run(t, ctx,
		chromedp.Click(testID("action-open-confirm_succeeded")),
		chromedp.WaitVisible(testID("action-reference-confirm_succeeded")),
		chromedp.SendKeys(testID("action-reference-confirm_succeeded"), "R-5001"),
		chromedp.SendKeys(testID("action-reason-confirm_succeeded"), "R-5001 is on the sandbox page, made by this operation."),
		chromedp.Blur(testID("action-reason-confirm_succeeded")),
	)
	assert.Equal(t, "Outcome unknown", value(t, ctx, chromedp.Text(stateBadge)))
	assert.Equal(t, 4, count(t, ctx, testID("action")))
	docsScreenshot(t, ctx, "operation", 1180)
}

// docsScreenshotFull saves the whole page, 1280 pixels wide, like docsScreenshot.
func docsScreenshotFull(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	height := value(t, ctx, chromedp.Evaluate[int64](`document.documentElement.scrollHeight`))
	docsScreenshot(t, ctx, name, height)
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`document.documentElement.style.overflow = ''`))
}

// docsScreenshot saves the top of the page, 1280 pixels wide and height high, as
// docs/screenshots/<name>.png with IDEMGATE_SCREENSHOTS=docs, and in the test's temporary
// directory otherwise.
func docsScreenshot(t *testing.T, ctx context.Context, name string, height int64) {
	t.Helper()
	dir := t.TempDir()
	if os.Getenv("IDEMGATE_SCREENSHOTS") == "docs" {
		dir = filepath.Join("..", "docs", "screenshots") // tests run in the package's directory
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	// No scroll bar: the picture is of the page, not of the window.
	run(t, ctx, chromedp.EmulateViewport(1280, height),
		chromedp.Evaluate[chromedp.Void](`document.documentElement.style.overflow = 'hidden'; window.scrollTo(0, 0)`))
	png := value(t, ctx, chromedp.CaptureScreenshot())
	path := filepath.Join(dir, name+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s", path)
}

// seedDay records 22 hours of the demo tenant's traffic through the ledger, moving the
// console's clock as it goes: mostly successes, a few refusals, retries after throttling, and
// ambiguous outcomes that reconciliation settled. It ends with three things for a person: an
// email whose outcome is unknown, a payout awaiting approval, and the refund order-1044 (its
// response lost, its look-ups failing), which it returns.
func seedDay(t *testing.T, con *consoletest.Console) *models.Operation {
	t.Helper()
	ctx := t.Context()
	const worker = "demo-worker"
	lease := func(string) time.Duration { return time.Minute }
	succeeded := func(ref string) *models.AttemptOutcome {
		return &models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201, Latency: 90 * time.Millisecond,
			To: models.StateSucceeded, Result: []byte(`{"id":"` + ref + `"}`), DownstreamRef: ref}
	}
	order := 900
	for hour := range 22 {
		n := 2 + hour%3
		for range n {
			order++
			tool, key, params, ref := "tickets.create", fmt.Sprintf("order-%d:ticket", order),
				fmt.Sprintf(`{"subject":"Order %d: parcel not delivered"}`, order), fmt.Sprintf("T-%d", order)
			if order%3 == 0 {
				tool, key, params, ref = "refunds.issue", fmt.Sprintf("order-%d:refund", order),
					fmt.Sprintf(`{"amount_cents":%d,"currency":"EUR","order_id":"%d"}`, 500+order%40*100, order), fmt.Sprintf("R-%d", order)
			}
			seed := consoletest.Seed{Tenant: "demo", Key: key, Tool: tool, Params: params, WorkflowRunID: fmt.Sprintf("order-%d", order)}
			switch {
			case order%11 == 0: // the downstream refuses it
				seed.Outcome = &models.AttemptOutcome{Class: models.ErrorRejected, DownstreamStatus: 422, Latency: 60 * time.Millisecond,
					To: models.StateFailedFinal, ErrorClass: models.ErrorRejected, ErrorMessage: "the downstream rejected the request (422)"}
				con.Operation(t, seed)
			case order%7 == 0: // throttled, then retried when due
				seed.Outcome = &models.AttemptOutcome{Class: models.ErrorThrottled, DownstreamStatus: 429, Latency: 40 * time.Millisecond,
					To: models.StatePending, NextAttemptAt: con.Clock.Now().Add(time.Second)}
				con.Operation(t, seed)
				con.Clock.Advance(2 * time.Second)
				due, err := con.Ledger.ClaimDue(ctx, worker, 10, lease)
				require.NoError(t, err)
				for _, c := range due {
					require.NoError(t, con.Ledger.FinishAttempt(ctx, c, worker, *succeeded(ref)))
				}
			case order%9 == 0: // ambiguous, then found by a reconcile probe
				seed.Outcome = &models.AttemptOutcome{Class: models.ErrorAmbiguous, Latency: 2 * time.Second, Error: "context deadline exceeded",
					To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous, ErrorMessage: "the request was sent but no answer came back"}
				con.Operation(t, seed)
				probe(t, con, tool, models.ProbeOutcome{Status: 200, Outcome: "found", To: models.StateSucceeded,
					Result: []byte(`{"id":"` + ref + `"}`), DownstreamRef: ref})
			default:
				seed.Outcome = succeeded(ref)
				con.Operation(t, seed)
			}
			con.Clock.Advance(time.Hour / time.Duration(n))
		}
	}

	email := con.Operation(t, consoletest.Seed{Tenant: "demo", Key: "order-1031:email", Tool: "email.send",
		Params: `{"to":"ada@example.com","subject":"Your refund for order 1031","body":"We have refunded 19.99 EUR."}`,
		Outcome: &models.AttemptOutcome{Class: models.ErrorAmbiguous, Latency: 2 * time.Second, Error: "context deadline exceeded",
			To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous, ErrorMessage: "the request was sent but no answer came back"}})
	_, err := con.Ledger.OpenReview(ctx, email, models.ReasonUnknownOutcome, "worker:"+worker)
	require.NoError(t, err)
	con.Clock.Advance(80 * time.Minute)
	con.Operation(t, consoletest.Seed{Tenant: "demo", Key: "order-1043:payout", Tool: "payments.payout",
		Params: `{"amount_cents":250000,"currency":"EUR","order_id":"1043"}`, NeedsApproval: true})
	con.Clock.Advance(15 * time.Minute)

	refund := con.Operation(t, consoletest.Seed{Tenant: "demo", Key: "order-1044:refund", Tool: "refunds.issue",
		Params: `{"amount_cents":4200,"currency":"EUR","order_id":"1044"}`,
		Outcome: &models.AttemptOutcome{Class: models.ErrorAmbiguous, Latency: 7 * time.Millisecond,
			Error: `Post "http://127.0.0.1:8080/sandbox/refunds": EOF`, To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous,
			ErrorMessage: `the request was sent but no answer came back: Post "http://127.0.0.1:8080/sandbox/refunds": EOF`}})
	for i := range 16 {
		wait := min(time.Second<<i, 30*time.Second)
		probe(t, con, "refunds.issue", models.ProbeOutcome{Status: 500, Outcome: "error", To: models.StateUnknown, NextProbeAt: con.Clock.Now().Add(wait)})
		con.Clock.Advance(wait)
	}
	con.Clock.Advance(time.Minute)
	_, err = con.Ledger.OpenReview(ctx, refund, models.ReasonUnknownOutcome, "worker:"+worker)
	require.NoError(t, err)
	con.Clock.Advance(12 * time.Minute)
	return refund
}

// probe runs one reconcile probe of every UNKNOWN operation of tool due for one, with outcome
// out.
func probe(t *testing.T, con *consoletest.Console, tool string, out models.ProbeOutcome) {
	t.Helper()
	ops, err := con.Ledger.ClaimProbes(t.Context(), "demo-worker", []string{tool}, 10, time.Minute)
	require.NoError(t, err)
	require.NotEmpty(t, ops)
	for _, op := range ops {
		require.NoError(t, con.Ledger.RecordProbe(t.Context(), op, "demo-worker", out))
	}
}
