package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chromiumPath is where Debian's chromium package puts the browser; .ci/run installs it.
const chromiumPath = "/usr/bin/chromium"

// browser starts a fresh headless Chromium for the test and returns its context. Without
// Chromium the test is skipped on a workstation and fails in CI (CI set).
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s not found: browser tests skipped (apt-get install chromium)", chromiumPath)
		}
		t.Fatalf("%s not found, and CI must run the browser tests: %v", chromiumPath, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 180*time.Second) // room for a loaded 2-core machine running browser tests side by side
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

// testID is the CSS selector of the element with that data-testid.
func testID(id string) string { return `[data-testid="` + id + `"]` }

// run runs steps in the browser and fails the test on the first error.
func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// value runs one action that reads something from the page.
func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err)
	return v
}

// screenshot saves a full-page screenshot as idemgate-<name>.png in the temporary directory
// (IDEMGATE_SCREENSHOTS=DIR overrides it, except IDEMGATE_SCREENSHOTS=docs, which asks
// TestBrowserScreenshots for the README's pictures and leaves these where they are).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png := value(t, ctx, chromedp.FullScreenshot(100))
	dir := os.Getenv("IDEMGATE_SCREENSHOTS")
	if dir == "" || dir == "docs" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, "idemgate-"+name+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s", path)
}

// signIn signs in through the real form, starting at path.
func signIn(t *testing.T, ctx context.Context, url, email, password string) {
	t.Helper()
	run(t, ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(testID("login-form")),
		chromedp.SendKeys(testID("login-email"), email),
		chromedp.SendKeys(testID("login-password"), password),
		chromedp.Click(testID("login-submit")),
	)
}

// A reviewer signs in through the real form, sees the dashboard, finds an operation, reads it
// with the card number masked, and signs out.
func TestBrowserReviewerJourney(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	refund := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1042:refund", Tool: "refunds.issue",
		Params:        `{"amount_cents":1999,"card_number":"` + cardNumber + `","currency":"EUR","order_id":"1042"}`,
		WorkflowRunID: "order-1042", StepID: "refund", Unknown: true, Review: true})
	con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1042:ticket", Tool: "tickets.create",
		Params: `{"subject":"Refund for order 1042"}`, WorkflowRunID: "order-1042", StepID: "ticket"})
	con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1043:refund", Tool: "refunds.issue",
		Params: `{"amount_cents":500,"currency":"EUR","order_id":"1043"}`, Unknown: true})
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")

	signIn(t, ctx, con.URL+"/", "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("state-counts")))
	assert.Equal(t, "1", value(t, ctx, chromedp.Text(testID("open-reviews-count"))))
	assert.Equal(t, con.URL+"/", value(t, ctx, chromedp.Location()))
	screenshot(t, ctx, "dashboard")

	run(t, ctx,
		chromedp.Click(testID("nav-operations")),
		chromedp.WaitVisible(testID("search-form")),
		chromedp.SendKeys(testID("search-key"), "order-1042:ref"),
		chromedp.Click(testID("search-submit")),
		chromedp.WaitVisible(testID("search-results")),
		chromedp.Click(`[data-operation-id="`+refund.ID+`"] `+testID("operation-link")),
		chromedp.WaitVisible(testID("params-json")),
	)
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("params-json"))), `"card_number": "***"`)
	page := value(t, ctx, chromedp.OuterHTML("html"))
	assert.NotContains(t, page, cardNumber, "the card number is nowhere in the DOM")
	assert.Contains(t, page, "4bf92f3577b34da6a3ce929d0e0e4736", "the attempt's trace id is on the timeline")
	screenshot(t, ctx, "operation")

	run(t, ctx, chromedp.Click(testID("nav-reviews")), chromedp.WaitVisible(testID("review-table")))
	screenshot(t, ctx, "reviews")

	run(t, ctx, chromedp.Click(testID("logout")), chromedp.WaitVisible(testID("login-form")))
	location := value(t, ctx, chromedp.Location())
	assert.True(t, strings.HasSuffix(location, "/login?reason=signed-out"), location)
	run(t, ctx, chromedp.Navigate(con.URL+"/operations/"+refund.ID), chromedp.WaitVisible(testID("login-form")))
	assert.Contains(t, value(t, ctx, chromedp.Location()), "/login?next=", "signed out for good")
}

// The review queue reloads its list by itself, but never while someone is typing in it.
func TestBrowserReviewQueueRefreshKeepsTyping(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{ReviewRefresh: 200 * time.Millisecond})
	con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "first", Tool: "refunds.issue",
		Params: `{"amount_cents":1,"currency":"EUR","order_id":"1"}`, Unknown: true, Review: true})
	pw := con.User(t, "rita@example.com", models.RoleReviewer)
	rows := func() int {
		return value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="review-row"]').length`))
	}

	signIn(t, ctx, con.URL+"/login?next=%2Freviews", "rita@example.com", pw)
	run(t, ctx,
		chromedp.WaitVisible(testID("review-table")),
		// A field inside the list, as a review action's reason will be, focused (in the same
		// script, so no refresh can slip in between) and then half typed.
		chromedp.Evaluate[chromedp.Void](`(() => { const f = document.createElement('textarea');
			f.setAttribute('data-testid', 'reason'); document.getElementById('review-list').append(f); f.focus(); })()`),
		chromedp.SendKeys(testID("reason"), "Checked with the bank: the refu"),
	)
	require.Equal(t, 1, rows())

	// Count the refresh ticks from here on: each one that finds someone typing schedules the
	// next instead of reloading the list.
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => { window.refreshTicks = 0;
		const every = parseInt(document.querySelector('[data-auto-refresh]').getAttribute('data-refresh-ms'), 10);
		const setTimeout = window.setTimeout;
		window.setTimeout = function (fn, ms) { if (ms === every) { window.refreshTicks++; } return setTimeout.apply(window, arguments); };
	})()`))
	con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "second", Tool: "refunds.issue",
		Params: `{"amount_cents":2,"currency":"EUR","order_id":"2"}`, Unknown: true, Review: true})
	// Five ticks after the second review exists: five refreshes that would have shown it.
	ticks := value(t, ctx, chromedp.Evaluate[int](`window.refreshTicks`))
	run(t, ctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(`window.refreshTicks >= %d`, ticks+5)))
	// Read without waiting for the field: a refresh would have removed it.
	typed := value(t, ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="reason"]')?.value ?? "(the field is gone)"`))
	assert.Equal(t, "Checked with the bank: the refu", typed, "the half-typed reason is kept")
	assert.Equal(t, 1, rows(), "no refresh while typing")

	run(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => { const f = document.querySelector('[data-testid="reason"]');
		f.value = ''; f.blur(); })()`),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('[data-testid="review-row"]').length === 2`))
	assert.Equal(t, 2, rows(), "the list refreshed once nobody was typing")
}
