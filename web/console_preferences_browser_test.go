package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A reviewer in Tokyo chooses the dark theme and her own time zone: the server renders the
// theme (whatever the system's), and times read in Tokyo's zone, the UTC time kept in the
// title. Choosing System and UTC again undoes both.
func TestBrowserPreferences(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.SQLite, consoletest.Options{})
	con.Tenant(t, "acme")
	op := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1", Tool: "refunds.issue",
		Params: `{"amount_cents":1999,"currency":"EUR","order_id":"1"}`, Unknown: true, Review: true})
	pw := con.User(t, "rita@example.com", models.RoleReviewer)
	run(t, ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Tokyo"})
		return err
	}))
	background := func() string {
		return value(t, ctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	}
	firstTime := func() (text, iso, title string) {
		text = value(t, ctx, chromedp.Evaluate[string](`document.querySelector('main time[datetime]').textContent`))
		iso = value(t, ctx, chromedp.Evaluate[string](`document.querySelector('main time[datetime]').getAttribute('datetime')`))
		title = value(t, ctx, chromedp.Evaluate[string](`document.querySelector('main time[datetime]').getAttribute('title') || ''`))
		return text, iso, title
	}

	signIn(t, ctx, con.URL+"/login?next=%2Foperations%2F"+op.ID, "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("preferences")))
	light := background()
	utcText, _, _ := firstTime()
	require.True(t, strings.HasSuffix(utcText, "UTC"), utcText)

	run(t, ctx,
		chromedp.SetValue(testID("pref-theme"), "dark"),
		chromedp.SetValue(testID("pref-times"), "local"),
		chromedp.Click(testID("pref-apply")),
		chromedp.WaitVisible(`html[data-theme="dark"][data-times="local"]`),
		chromedp.WaitVisible(`main time[data-local="1"]`),
	)
	assert.Contains(t, value(t, ctx, chromedp.Location()), "/operations/"+op.ID, "back on the same page")
	assert.Equal(t, "rgb(20, 24, 29)", background(), "the dark palette's background")
	assert.NotEqual(t, light, background())
	text, iso, title := firstTime()
	at, err := time.Parse(time.RFC3339Nano, iso)
	require.NoError(t, err)
	tokyo := at.In(time.FixedZone("JST", 9*3600)).Format("2006-01-02 15:04:05")
	assert.True(t, strings.HasPrefix(text, tokyo), "%q is %s in Tokyo", text, tokyo)
	assert.True(t, strings.HasSuffix(text, "GMT+9"), text)
	assert.Equal(t, utcText, title, "the UTC time stays in the title")

	run(t, ctx,
		chromedp.SetValue(testID("pref-theme"), ""),
		chromedp.SetValue(testID("pref-times"), "utc"),
		chromedp.Click(testID("pref-apply")),
		chromedp.WaitVisible(`html:not([data-theme]):not([data-times])`),
	)
	assert.Equal(t, light, background(), "the system's scheme again")
	text, _, _ = firstTime()
	assert.Equal(t, utcText, text)
}

// The keyboard: j and k mark reviews in the queue, t ticks the marked one for a decision on
// many, Enter opens it, a letter opens a decision's form at its reason (and deciding still
// needs the reason and a click), g goes back to the queue, "?" shows the shortcuts. A letter
// typed into the reason is text, not a shortcut.
func TestBrowserKeyboard(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.SQLite, consoletest.Options{})
	con.Tenant(t, "acme")
	first := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1", Tool: "refunds.issue",
		Params: `{"amount_cents":1999,"currency":"EUR","order_id":"1"}`, Unknown: true, Review: true})
	con.Clock.Advance(time.Minute)
	second := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-2", Tool: "refunds.issue",
		Params: `{"amount_cents":2999,"currency":"EUR","order_id":"2"}`, Unknown: true, Review: true})
	pw := con.User(t, "rita@example.com", models.RoleReviewer)
	marked := func() string {
		return value(t, ctx, chromedp.Evaluate[string](`(document.querySelector('[data-testid="review-row"].is-marked') || {}).dataset?.operationId || ""`))
	}
	key := func(k string) chromedp.Action[chromedp.Void] { return chromedp.KeyEvent(k) }

	signIn(t, ctx, con.URL+"/login?next=%2Freviews", "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("review-table")), key("j"))
	assert.Equal(t, first.ID, marked(), "the oldest review first")
	run(t, ctx, key("j"))
	assert.Equal(t, second.ID, marked())
	run(t, ctx, key("j"))
	assert.Equal(t, second.ID, marked(), "the last stays marked")
	run(t, ctx, key("k"))
	assert.Equal(t, first.ID, marked())
	ticked := func() []string {
		return value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('[data-testid="bulk-pick"]:checked'), (c) => c.value)`))
	}
	run(t, ctx, key("t"))
	assert.Equal(t, []string{first.ID}, ticked(), "t ticks the marked review")
	run(t, ctx, key("t"))
	assert.Empty(t, ticked(), "and unticks it")

	run(t, ctx, key("\r"), chromedp.WaitVisible(testID("action-panel")))
	assert.Contains(t, value(t, ctx, chromedp.Location()), "/operations/"+first.ID)

	run(t, ctx, key("f"))
	focused := value(t, ctx, chromedp.Evaluate[string](`document.activeElement.dataset.testid || ""`))
	assert.Equal(t, "action-reason-mark_failed", focused, "f opens mark failed at its reason")
	run(t, ctx, key("s"))
	assert.True(t, strings.HasSuffix(value(t, ctx, chromedp.Evaluate[string](`document.activeElement.value`)), "s"), "typed into the reason")
	assert.False(t, value(t, ctx, chromedp.Evaluate[bool](`document.querySelector('details[data-action="confirm_succeeded"]').open`)),
		"s in the reason is text, not the confirm-succeeded shortcut")
	op, err := con.Ledger.Get(t.Context(), "acme", first.ID)
	require.NoError(t, err)
	assert.Equal(t, models.StateUnknown, op.State, "no key decided anything")

	run(t, ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`), key("?"))
	assert.True(t, value(t, ctx, chromedp.Evaluate[bool](`document.getElementById('shortcuts').open`)), "? shows the shortcuts")
	run(t, ctx, key("?"), key("g"), chromedp.WaitVisible(testID("review-table")))
	assert.True(t, strings.HasSuffix(value(t, ctx, chromedp.Location()), "/reviews"), "g goes to the queue")
}

// The operation page updates itself in place when its operation changes (no reload: a marker
// set in the page survives), and keeps a decision form the reviewer has started: the typed
// reason stays, the rest of the page shows the new state, and the kept form is marked stale
// where the reviewer is looking, its button disabled and the change stated beside it; sent
// anyway (the server is the judge), it is refused as made on what the page showed before.
func TestBrowserLiveOperationPage(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.SQLite, consoletest.Options{})
	con.Tenant(t, "acme")
	seed := func(key string) *models.Operation {
		return con.Operation(t, consoletest.Seed{Tenant: "acme", Key: key, Tool: "refunds.issue",
			Params: `{"amount_cents":1999,"currency":"EUR","order_id":"` + key + `"}`, Unknown: true, Review: true})
	}
	quiet, busy := seed("order-1"), seed("order-2")
	pw := con.User(t, "rita@example.com", models.RoleReviewer)
	decide := func(op *models.Operation) {
		_, err := con.Ledger.MarkFailed(t.Context(), models.Action{Scope: models.AllTenants(), Tenant: "acme", OperationID: op.ID,
			Actor: "user:ravi@example.com", Reason: "the bank has no record", ExpectedState: models.StateUnknown,
			ExpectedAttempts: op.Attempts})
		require.NoError(t, err)
	}
	mark := chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`)
	sameDocument := func() bool {
		return value(t, ctx, chromedp.Evaluate[bool](`window.sameDocument === true`))
	}

	signIn(t, ctx, con.URL+"/login?next=%2Foperations%2F"+quiet.ID, "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(`[data-testid="operation"] [data-state="UNKNOWN"]`), mark)
	decide(quiet) // another reviewer decides meanwhile
	run(t, ctx, chromedp.WaitVisible(`[data-testid="operation"] [data-state="FAILED_FINAL"]`),
		chromedp.WaitVisible(`[data-testid="live-changed"][data-kept="false"]`))
	assert.True(t, sameDocument(), "updated in place, not reloaded")
	assert.Zero(t, value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="action"]').length`)),
		"a decided operation offers no decisions any more")
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("timeline"))), "the bank has no record", "the timeline has the decision")

	run(t, ctx,
		chromedp.Navigate(con.URL+"/operations/"+busy.ID),
		chromedp.WaitVisible(testID("action-open-mark_failed")),
		mark,
		chromedp.Click(testID("action-open-mark_failed")),
		chromedp.SendKeys(testID("action-reason-mark_failed"), "Checked with the bank: no refu"),
	)
	decide(busy)
	run(t, ctx, chromedp.WaitVisible(`[data-testid="operation"] [data-state="FAILED_FINAL"]`),
		chromedp.WaitVisible(`[data-testid="live-changed"][data-kept="true"]`))
	assert.True(t, sameDocument(), "updated in place, not reloaded")
	assert.Equal(t, "Checked with the bank: no refu", value(t, ctx, chromedp.Value(testID("action-reason-mark_failed"))),
		"the half-typed reason is kept")

	assert.Contains(t, value(t, ctx, chromedp.Text(`[data-testid="action-form-mark_failed"] [data-testid="stale-form"]`)), "now FAILED_FINAL",
		"the change is stated beside the form")
	assert.True(t, value(t, ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid="action-submit-mark_failed"]').disabled`)),
		"the kept form's button is disabled in place")
	// Sent anyway (a script, an old browser): the server refuses it.
	run(t, ctx, chromedp.SendKeys(testID("action-reason-mark_failed"), "nd"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid="action-form-mark_failed"]').submit()`),
		chromedp.WaitVisible(testID("notice")))
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("notice"))), "changed while you were deciding")
	events, err := con.Ledger.Events(t.Context(), "acme", busy.ID)
	require.NoError(t, err)
	decisions := 0
	for _, e := range events {
		if e.Detail != nil && strings.Contains(*e.Detail, "no refund") {
			decisions++
		}
	}
	assert.Zero(t, decisions, "the decision made on the old page was refused, not recorded")
}
