package views_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/a-h/templ"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/static"
	"github.com/idemgate/idemgate/views"
)

// render renders c and checks what every page and component must satisfy: it parses as HTML,
// and it carries no inline script and no inline style, which the console's CSP would block.
// The only scripts allowed are embedded files loaded from /static/, with nothing inline.
func render(t *testing.T, c templ.Component) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, c.Render(context.Background(), &buf))
	out := buf.String()
	assert.NotContains(t, strings.ToLower(out), " style=")
	assert.NotContains(t, strings.ToLower(out), "javascript:")

	doc, err := html.Parse(strings.NewReader(out))
	require.NoError(t, err)
	for n := range doc.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		if n.Data == "script" {
			assert.True(t, strings.HasPrefix(attrOf(n, "src"), static.URLPrefix), "a script that is not an embedded file")
			assert.Nil(t, n.FirstChild, "an inline script")
		}
		assert.NotEqual(t, "style", n.Data)
		for _, a := range n.Attr {
			assert.NotEqual(t, "style", a.Key, "inline style on <%s>", n.Data)
			assert.False(t, strings.HasPrefix(a.Key, "on"), "event handler %s on <%s>", a.Key, n.Data)
		}
	}
	return out
}

// problemView is the view of a problem type as handlers.ProblemPage builds it.
func problemView(t problems.Type) views.ProblemType {
	return views.ProblemType{Slug: t.Slug, URI: t.URI(), Status: t.Status, Title: t.Title,
		Explanation: t.Explanation, WhatToDo: t.WhatToDo, Example: t.Example()}
}

func attrOf(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// assertDocument checks the frame the layout gives every page.
func assertDocument(t *testing.T, out, title string) {
	t.Helper()
	assert.True(t, strings.HasPrefix(strings.ToLower(out), "<!doctype html>"), "HTML5 doctype")
	assert.Contains(t, out, `<html lang="en">`)
	assert.Contains(t, out, `<meta name="viewport" content="width=device-width, initial-scale=1">`)
	assert.Contains(t, out, `<link rel="stylesheet" href="`+static.Path("app.css")+`">`)
	assert.Contains(t, out, "<title>"+title+"</title>")
	assert.Contains(t, out, `<main id="main" class="main" data-testid="main">`)
	assert.Contains(t, out, `data-testid="brand"`)
}

func TestLayoutSignedOut(t *testing.T) {
	t.Parallel()
	out := render(t, views.Layout(views.Page{Title: "Sign in"}, templ.Raw(`<p data-testid="body">hello</p>`)))
	assertDocument(t, out, "Sign in · idemgate")
	assert.Contains(t, out, `<p data-testid="body">hello</p>`)
	assert.NotContains(t, out, `data-testid="main-nav"`)
	assert.NotContains(t, out, `data-testid="logout-form"`)
	assert.NotContains(t, out, "csrf_token")
}

func TestLayoutSignedIn(t *testing.T) {
	t.Parallel()
	page := views.Page{
		Title:     "Reviews",
		User:      &views.User{Email: "rita@example.com", Role: "reviewer"},
		CSRFToken: `tok"<en>`,
		Nav:       views.NavReviews,
	}
	out := render(t, views.Layout(page, templ.NopComponent))
	assertDocument(t, out, "Reviews · idemgate")

	for href, id := range map[string]string{
		"/": "nav-dashboard", "/reviews": "nav-reviews", "/operations": "nav-operations",
	} {
		assert.Contains(t, out, `href="`+href+`" data-testid="`+id+`"`)
	}
	assert.NotContains(t, out, `data-testid="nav-admin"`, "only admins see Admin")
	assert.NotContains(t, out, `data-testid="nav-audit"`, "only auditors and admins see Audit")
	assert.NotContains(t, out, `data-testid="nav-exports"`, "only auditors and admins see Exports")

	page.User.Role = views.RoleAuditor
	out = render(t, views.Layout(page, templ.NopComponent))
	for href, id := range map[string]string{"/audit": "nav-audit", "/exports": "nav-exports"} {
		assert.Contains(t, out, `href="`+href+`" data-testid="`+id+`"`, "auditors see the audit log and exports")
	}
	assert.NotContains(t, out, `data-testid="nav-admin"`)
	assert.Contains(t, out, `data-testid="nav-reviews" aria-current="page"`)
	assert.Equal(t, 1, strings.Count(out, `aria-current="page"`))

	assert.Contains(t, out, "rita@example.com")
	assert.Contains(t, out, `<form method="post" action="/logout" data-testid="logout-form">`)
	assert.Contains(t, out, `<input type="hidden" name="csrf_token" value="tok&#34;&lt;en&gt;">`, "token escaped")
}

func TestLayoutAdminSeesAdmin(t *testing.T) {
	t.Parallel()
	page := views.Page{Title: "Admin", User: &views.User{Email: "ada@example.com", Role: views.RoleAdmin}, Nav: views.NavAdmin}
	out := render(t, views.Layout(page, templ.NopComponent))
	assert.Contains(t, out, `href="/admin" data-testid="nav-admin" aria-current="page"`)
}

func TestLayoutEscapesTitle(t *testing.T) {
	t.Parallel()
	out := render(t, views.Layout(views.Page{Title: "<b>x</b>"}, templ.NopComponent))
	assert.Contains(t, out, "<title>&lt;b&gt;x&lt;/b&gt; · idemgate</title>")
	out = render(t, views.Layout(views.Page{}, templ.NopComponent))
	assert.Contains(t, out, "<title>idemgate</title>")
}

func TestProblemPageForEveryType(t *testing.T) {
	t.Parallel()
	for _, pt := range problems.All() {
		t.Run(pt.Slug, func(t *testing.T) {
			t.Parallel()
			out := render(t, views.ProblemPage(problemView(pt)))
			assertDocument(t, out, html.EscapeString(pt.Title)+" · idemgate")
			assert.NotContains(t, out, `data-testid="main-nav"`, "problem pages are public")
			assert.Contains(t, out, `data-testid="problem-title">`+html.EscapeString(pt.Title)+"<")
			assert.Contains(t, out, `data-testid="problem-type">/problems/`+pt.Slug+"<")
			assert.Contains(t, out, `data-testid="problem-status">`)
			assert.Contains(t, out, `data-testid="problem-explanation"`)
			assert.Contains(t, out, `data-testid="problem-what-to-do"`)
			assert.Contains(t, out, "&#34;type&#34;: &#34;/problems/"+pt.Slug+"&#34;", "example body")
			assert.Contains(t, out, "Content-Type: application/problem+json")
			assert.NotContains(t, out, "`", "backticks become <code>")
		})
	}
}

func TestProblemPageExampleMembers(t *testing.T) {
	t.Parallel()
	pt, ok := problems.Lookup(problems.OperationUncertain)
	require.True(t, ok)
	out := render(t, views.ProblemPage(problemView(pt)))
	assert.Contains(t, out, `data-testid="problem-status">409 Conflict<`)
	assert.Contains(t, out, "&#34;state&#34;: &#34;UNKNOWN&#34;")
	assert.Contains(t, out, "&#34;safe_to_retry_with_new_key&#34;: false")
	assert.Contains(t, out, "Retry-After:")
	assert.Contains(t, out, "<code>Idempotency-Key</code>")

	pt, ok = problems.Lookup(problems.InvalidParams)
	require.True(t, ok)
	out = render(t, views.ProblemPage(problemView(pt)))
	assert.Contains(t, out, "&#34;pointer&#34;: &#34;/subject&#34;")
	assert.NotContains(t, out, "operation_id&#34;:", "no operation for a request that failed its checks")
}

func TestProblemIndex(t *testing.T) {
	t.Parallel()
	all := problems.All()
	var pages []views.ProblemType
	for _, pt := range all {
		pages = append(pages, problemView(pt))
	}
	out := render(t, views.ProblemIndex(pages))
	assertDocument(t, out, "API problem types · idemgate")
	assert.Contains(t, out, `data-testid="problem-index"`)
	assert.Equal(t, len(all), strings.Count(out, `data-testid="problem-row"`))
	for _, pt := range all {
		assert.Contains(t, out, `<a href="/problems/`+pt.Slug+`">`+html.EscapeString(pt.Title)+"</a>")
	}
	assert.Contains(t, out, `data-testid="retry-rule"`)

	empty := render(t, views.ProblemIndex(nil))
	assert.Contains(t, empty, "No problem types.")
}

func TestErrorPage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		status  int
		message string
		title   string
		want    []string
	}{
		{"not found with default message", 404, "", "Page not found", []string{"Page not found", "tenant you do not have access to", "Error 404"}},
		{"not found with message", 404, "No operation op_1 <here>.", "Page not found", []string{"No operation op_1 &lt;here&gt;."}},
		{"server error warns about actions", 500, "", "Something went wrong", []string{"Something went wrong", "may or may not have been recorded", `data-testid="error-advice"`}},
		{"conflict", 409, "The operation is no longer UNKNOWN.", "Something changed meanwhile", []string{"Something changed meanwhile", "current state"}},
		{"unusual status", 418, "", "I&#39;m a teapot", []string{"I&#39;m a teapot"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := render(t, views.ErrorPage(tc.status, tc.message))
			assertDocument(t, out, tc.title+" · idemgate")
			assert.Contains(t, out, `data-testid="error-page"`)
			assert.Contains(t, out, `<a class="button button--primary" href="/" data-testid="error-home">`)
			assert.NotContains(t, out, `data-testid="main-nav"`)
			for _, w := range tc.want {
				assert.Contains(t, out, w)
			}
		})
	}
}

// A state badge says the state in words, its code on hover (issue 51 item 5); a state it does
// not know, by its code.
func TestStateBadge(t *testing.T) {
	t.Parallel()
	words := map[string]string{"PENDING": "Pending", "AWAITING_APPROVAL": "Awaiting approval", "RUNNING": "Running",
		"SUCCEEDED": "Succeeded", "FAILED_FINAL": "Failed", "UNKNOWN": "Outcome unknown"}
	for state, class := range map[string]string{
		"PENDING":           "badge--pending",
		"AWAITING_APPROVAL": "badge--awaiting-approval",
		"RUNNING":           "badge--running",
		"SUCCEEDED":         "badge--succeeded",
		"FAILED_FINAL":      "badge--failed-final",
		"UNKNOWN":           "badge--unknown",
		"SOMETHING_ELSE":    "",
	} {
		out := render(t, views.StateBadge(state))
		want, label := "badge", state
		if class != "" {
			want += " badge--state " + class
			label = words[state]
		}
		assert.Equal(t, `<span class="`+want+`" data-testid="state-badge" data-state="`+state+`" title="`+state+`">`+label+`</span>`, out)
	}
}

func TestNotice(t *testing.T) {
	t.Parallel()
	out := render(t, views.Notice(views.NoticeError, "Refused: the operation changed <meanwhile>."))
	assert.Contains(t, out, `class="notice notice--error" role="alert"`)
	assert.Contains(t, out, "&lt;meanwhile&gt;")
	out = render(t, views.Notice(views.NoticeSuccess, "Approved."))
	assert.Contains(t, out, `class="notice notice--success" role="status"`)
	out = render(t, views.Notice("bogus", "x"))
	assert.Contains(t, out, `class="notice notice--info" role="status"`)
}
