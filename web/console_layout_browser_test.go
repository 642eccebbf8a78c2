package web_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Item 5: no console page scrolls sideways, on a desktop (1440 px) or a phone (390 px), over a
// day of history with long keys, long params and a webhook; and on a phone the lists are
// cards, under a header at most 120 px tall. Each page is visited as an admin, who sees every
// page.
func TestBrowserNoPageScrollsSideways(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	pages, longID, pw := everyPage(t, con)
	signIn(t, ctx, con.URL+"/", "ada@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("state-counts")))
	for _, width := range []int64{1440, 390} {
		run(t, ctx, chromedp.EmulateViewport(width, 900))
		for _, path := range pages {
			run(t, ctx, chromedp.Navigate(con.URL+path), chromedp.WaitReady("footer"))
			got := value(t, ctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, document.documentElement.clientWidth]`))
			if !assert.LessOrEqual(t, got[0], got[1], "%s at %d px scrolls sideways", path, width) {
				wide := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('body *')).filter((e) =>
					e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).slice(0, 8)
					.map((e) => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))`))
				t.Logf("too wide on %s at %d: %v", path, width, wide)
			}
			if width == 390 {
				// On a phone the header is at most 120 px, an admin's six sections included.
				header := value(t, ctx, chromedp.Evaluate[float64](`document.querySelector('[data-testid="site-header"]').getBoundingClientRect().height`))
				assert.LessOrEqual(t, header, 120.0, "%s at 390 px: the header's height", path)
			}
		}
	}

	// On a desktop a list row is one line (it was two, ~64 px): its time to the minute, to the
	// second on hover.
	run(t, ctx, chromedp.EmulateViewport(1440, 900), chromedp.Navigate(con.URL+"/operations"), chromedp.WaitVisible(testID("search-results")))
	rows := value(t, ctx, chromedp.Evaluate[[]float64](`Array.from(document.querySelectorAll('[data-testid="operation-row"]'), (r) => r.getBoundingClientRect().height)`))
	t.Logf("/operations at 1440 px: rows %v px tall", rows)
	for _, h := range rows {
		assert.LessOrEqual(t, h, 48.0, "/operations at 1440 px: a row of one line")
	}

	// The search's first result starts on the first screen: the filters beyond key and param
	// fold until one is set, and on a phone so do the saved views and the decision on many
	// (it was at 791 px and 1,782 px).
	for _, vp := range [][2]int64{{1440, 900}, {390, 844}} {
		run(t, ctx, chromedp.EmulateViewport(vp[0], vp[1]), chromedp.Navigate(con.URL+"/operations"), chromedp.WaitVisible(testID("search-results")))
		top := value(t, ctx, chromedp.Evaluate[float64](`document.querySelector('[data-testid="operation-row"]').getBoundingClientRect().top + scrollY`))
		t.Logf("/operations at %d×%d: the first result at %.0f px", vp[0], vp[1], top)
		assert.Less(t, top, float64(vp[1]), "/operations at %d×%d: a result on the first screen", vp[0], vp[1])
	}

	// On a phone the review queue is cards: each cell on its own line, labelled.
	run(t, ctx, chromedp.EmulateViewport(390, 900), chromedp.Navigate(con.URL+"/reviews"), chromedp.WaitVisible(testID("review-table")))
	cell := value(t, ctx, chromedp.Evaluate[[]string](`(() => { const td = document.querySelector('[data-testid="review-row"] td');
		return [getComputedStyle(td).display, getComputedStyle(td, '::before').content,
			getComputedStyle(document.querySelector('[data-testid="review-table"] thead')).display]; })()`))
	assert.Equal(t, []string{"block", `"Waiting"`, "none"}, cell)
	// And so are the search's results, attempts and error class included.
	run(t, ctx, chromedp.Navigate(con.URL+"/operations?key=order-1046"), chromedp.WaitVisible(testID("search-results")))
	cells := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('[data-testid="operation-row"] td')).map((td) =>
		getComputedStyle(td).display + ' ' + getComputedStyle(td, '::before').content)`))
	assert.Contains(t, cells, `block "Attempts"`)
	assert.Contains(t, cells, `block "Error class"`)
	// Compact cards: the key on its line, the facts side by side (each was a 435 px card).
	run(t, ctx, chromedp.Navigate(con.URL+"/operations"), chromedp.WaitVisible(testID("search-results")))
	heights := value(t, ctx, chromedp.Evaluate[[]float64](`Array.from(document.querySelectorAll('[data-testid="operation-row"]'), (r) => r.getBoundingClientRect().height)`))
	require.NotEmpty(t, heights)
	t.Logf("/operations at 390 px: %d rows, %v px tall", len(heights), heights)
	for _, h := range heights {
		assert.LessOrEqual(t, h, 160.0, "/operations at 390 px: a compact row")
	}
	// Long params wrap rather than widen the page.
	run(t, ctx, chromedp.Navigate(con.URL+"/operations/"+longID), chromedp.WaitVisible(testID("params-json")))
	wraps := value(t, ctx, chromedp.Evaluate[bool](`(() => { const p = document.querySelector('[data-testid="params-json"]');
		return p.scrollWidth <= p.clientWidth; })()`))
	assert.True(t, wraps, "long params wrap inside their card")
	screenshot(t, ctx, "phone-operation")
	// The admin's tables are cards too: none scrolls sideways inside its region.
	// So is the audit log: a list, not a table scrolled sideways.
	for path, tables := range map[string][]string{"/admin": {"tenant-table", "user-table"}, "/admin/webhooks": {"webhook-table"}, "/audit": {"audit-table"}} {
		run(t, ctx, chromedp.Navigate(con.URL+path), chromedp.WaitReady("footer"))
		for _, table := range tables {
			got := value(t, ctx, chromedp.Evaluate[[]string](`(() => { const t = document.querySelector('[data-testid="`+table+`"]');
				if (!t) return ['missing'];
				const td = t.querySelector('tbody td');
				return [getComputedStyle(td).display, String(t.scrollWidth <= t.parentElement.clientWidth)]; })()`))
			assert.Equal(t, []string{"block", "true"}, got, "%s %s at 390 px: cards that fit", path, table)
		}
	}
	run(t, ctx, chromedp.Navigate(con.URL+"/reviews"), chromedp.WaitVisible(testID("review-table")))
	screenshot(t, ctx, "phone-reviews")
}

// everyPage seeds con with a day of history with long keys, long params, a proposed
// compensation, a webhook, saved views with long names and two bulk decisions, adds the admin
// ada@example.com, and returns every console page an admin sees (paths), the id of the
// operation with the long key and params, and ada's password.
func everyPage(t *testing.T, con *consoletest.Console) (pages []string, longID, password string) {
	t.Helper()
	refund := seedDay(t, con)
	long := con.Operation(t, consoletest.Seed{Tenant: "demo", Key: "order-1046:a-very-long-idempotency-key-that-an-agent-made-up-from-several-ids-0123456789abcdef",
		Tool: "tickets.create", WorkflowRunID: "workflow-run-with-a-rather-long-identifier-0123456789abcdef-0123456789",
		Params:  `{"subject":"` + fmt.Sprintf("%0200d", 7)[:180] + `","body":"A body without spaces:` + fmt.Sprintf("%0300d", 1) + `"}`,
		Unknown: true, Review: true})
	comp, err := con.Executor.ProposeCompensation(t.Context(), mustSucceed(t, con), models.Requester{Actor: "user:ravi@example.com"},
		"Duplicate of an earlier ticket; the customer wrote twice.")
	require.NoError(t, err)
	pw := con.User(t, "ada@example.com", models.RoleAdmin)
	_, err = con.Ledger.CreateWebhook(t.Context(), models.AllTenants(), models.Requester{Actor: "consoletest"}, models.NewWebhook{
		Tenant: "demo", URL: "http://127.0.0.1:9/idemgate/a-rather-long-path/that-goes-on-and-on/0123456789abcdef0123456789abcdef", AllowPrivate: true,
		Events: models.WebhookEventTypes})
	require.NoError(t, err)

	// Saved views with long names, on both pages that list them; a search showing attempts and
	// error classes.
	ada, err := con.Ledger.UserByEmail(t.Context(), "ada@example.com")
	require.NoError(t, err)
	for _, page := range []string{models.ViewPageOperations, models.ViewPageReviews} {
		for _, name := range []string{"Refunds of the big outage on the first of December", "UNKNOWN-tickets-of-the-demo-tenant-without-any-spaces-in-it"} {
			_, err := con.Ledger.SaveView(t.Context(), ada.ID, page, name, "tool=tickets.create")
			require.NoError(t, err)
		}
	}
	prepared, applied := bulkPages(t, con, "user:ada@example.com", long.ID, refund.ID)
	return []string{"/", "/reviews", "/reviews?tool=tickets.create", "/operations", "/operations?state=UNKNOWN",
		"/operations?key=order-1046&param=subject+%3D+x&tool=tickets.create", "/operations?param=card_number+%3D+1", "/operations/" + refund.ID,
		"/operations/" + long.ID, "/operations/" + comp.ID, "/workflows/" + *long.WorkflowRunID, "/audit", "/exports",
		"/admin", "/admin/webhooks", "/problems", prepared, applied}, long.ID, pw
}

// mustSucceed records a ticket that succeeded, to be compensated.
func mustSucceed(t *testing.T, con *consoletest.Console) *models.Operation {
	t.Helper()
	return con.Operation(t, consoletest.Seed{Tenant: "demo", Key: "order-1047:ticket", Tool: "tickets.create",
		Params: `{"subject":"Parcel lost"}`, Outcome: &models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201,
			To: models.StateSucceeded, Result: []byte(`{"id":"T-47"}`), DownstreamRef: "T-47"}})
}

// bulkPages records, through the ledger, two bulk decisions of actor over ids: a retry
// awaiting confirmation and a mark-failed applied with a long refusal, and returns their
// pages.
func bulkPages(t *testing.T, con *consoletest.Console, actor string, ids ...string) (prepared, applied string) {
	t.Helper()
	ctx, all := t.Context(), models.AllTenants()
	p, err := con.Ledger.PrepareBulk(ctx, all, models.BulkSelection{By: models.Person{Actor: actor}, Action: models.ActionConfirmNotExecuted, IDs: ids})
	require.NoError(t, err)
	a, err := con.Ledger.PrepareBulk(ctx, all, models.BulkSelection{By: models.Person{Actor: actor}, Action: models.ActionMarkFailed, IDs: ids})
	require.NoError(t, err)
	_, err = con.Ledger.StartBulk(ctx, all, models.Person{Actor: actor}, a.ID, "Provider outage 4711: none of these went out, as the provider's own log shows.", time.Hour)
	require.NoError(t, err)
	for _, it := range a.Items {
		require.NoError(t, con.Ledger.RecordBulkOutcome(ctx, a.ID, it.Seq, models.BulkRefused,
			"Changed meanwhile: it has had 2 attempts now, not 1 as when you confirmed. Nothing was changed; open it to decide again."))
	}
	require.NoError(t, con.Ledger.FinishBulk(ctx, a.ID))
	return "/bulk/" + p.ID, "/bulk/" + a.ID
}
