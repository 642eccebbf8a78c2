package web_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
)

// axePath is axe-core's browser build, which e2e/agents/run.sh installs (npm ci) before
// .ci/run runs the Go tests; the version is pinned in e2e/agents/package-lock.json.
const axePath = "../e2e/agents/node_modules/axe-core/axe.min.js"

// axeScript returns axe-core's source. Without it the test is skipped on a workstation and
// fails in CI (CI set), as a missing Chromium does.
func axeScript(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(axePath)
	if err != nil {
		abs, _ := filepath.Abs(axePath)
		if os.Getenv("CI") == "" {
			t.Skipf("%s not found: axe check skipped (npm ci in e2e/agents)", abs)
		}
		t.Fatalf("%s not found, and CI must run the axe check (e2e/agents/run.sh installs it): %v", abs, err)
	}
	return string(src)
}

// axeViolation is the part of an axe-core result a reader needs to find the fault.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  []json.RawMessage `json:"target"`
		Summary string            `json:"failureSummary"`
	} `json:"nodes"`
}

// String is the rule, its impact and help, and the first few elements it found at fault.
func (v axeViolation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): %s; %d element(s)", v.ID, v.Impact, v.Help, len(v.Nodes))
	for i, n := range v.Nodes {
		if i == 3 {
			b.WriteString("\n      …")
			break
		}
		var sel []string
		for _, raw := range n.Target {
			sel = append(sel, string(raw))
		}
		fmt.Fprintf(&b, "\n      %s: %s", strings.Join(sel, " "), strings.ReplaceAll(n.Summary, "\n", " "))
	}
	return b.String()
}

// Issue 28: axe-core, run in the same Chromium, finds no serious or critical violation on any
// console page, at 1440×900 or 390×844, in the light theme and the dark one, nor (issue 51)
// two landmarks of the same name (landmark-unique, which axe calls moderate): the pages
// TestBrowserNoPageScrollsSideways visits, and the sign-in page, a payout awaiting approval, a
// problem type's page and the not-found page.
func TestBrowserAxeNoSeriousViolations(t *testing.T) {
	t.Parallel()
	axe := axeScript(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	pages, _, pw := everyPage(t, con)
	payout := con.Operation(t, consoletest.Seed{Tenant: "demo", Key: "order-1048:payout", Tool: "payments.payout",
		Params: `{"amount_cents":480000,"currency":"EUR","order_id":"1048"}`, NeedsApproval: true})
	pages = append(pages, "/operations/"+payout.ID, "/problems/"+problems.All()[0].Slug, "/operations/op_not_there")
	sizes := [][2]int64{{1440, 900}, {390, 844}}

	for _, theme := range []string{"light", "dark"} {
		// A browser per theme: each gets the whole of browser's deadline on a loaded machine.
		ctx := browser(t)
		check := func(path string, size [2]int64) {
			t.Helper()
			run(t, ctx, chromedp.Evaluate[chromedp.Void](axe))
			found := value(t, ctx, chromedp.Evaluate[[]axeViolation](`axe.run(document, {resultTypes: ['violations']}).then((r) =>
				r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical' || v.id === 'landmark-unique'))`, chromedp.EvalAwaitPromise))
			for _, v := range found {
				t.Errorf("axe on %s at %d×%d, %s theme: %s", path, size[0], size[1], theme, v)
			}
		}
		if theme == "light" { // signed out: the sign-in page
			for _, size := range sizes {
				run(t, ctx, chromedp.EmulateViewport(size[0], size[1]), chromedp.Navigate(con.URL+"/login"), chromedp.WaitVisible(testID("login-form")))
				check("/login", size)
			}
		}
		signIn(t, ctx, con.URL+"/", "ada@example.com", pw)
		run(t, ctx, chromedp.WaitVisible(testID("state-counts")))
		run(t, ctx, chromedp.EmulateViewport(1440, 900), chromedp.SetValue(testID("pref-theme"), theme),
			chromedp.Click(testID("pref-apply")), chromedp.WaitVisible(`html[data-theme="`+theme+`"]`))
		for _, size := range sizes {
			run(t, ctx, chromedp.EmulateViewport(size[0], size[1]))
			for _, path := range pages {
				run(t, ctx, chromedp.Navigate(con.URL+path), chromedp.WaitReady("body"))
				check(path, size)
			}
		}
	}
}
