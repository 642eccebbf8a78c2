package views_test

import (
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/idemgate/idemgate/views"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// actionPanel is an UNKNOWN operation's panel whose mark failed form was just refused.
func actionPanel() views.ActionPanel {
	return views.ActionPanel{Heading: "Decide what happened", ExpectedState: "UNKNOWN", CSRFToken: "tok",
		Forms: []views.ActionForm{
			{Name: "confirm_succeeded", URL: "/operations/op_1/actions/confirm_succeeded", Title: "It took effect", Button: "Confirm succeeded",
				Tone: views.ToneNeutral, Reference: true},
			{Name: "mark_failed", URL: "/operations/op_1/actions/mark_failed", Title: "Give up", Button: "Mark failed", Tone: views.ToneDanger,
				Caution: "This cannot be undone.", Open: true, Error: "A reason is required.", Input: views.ActionInput{Reason: " "}},
		}}
}

func TestActionsPanel(t *testing.T) {
	t.Parallel()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(render(t, views.ActionsPanel(actionPanel()))))
	require.NoError(t, err)
	forms := doc.Find("form")
	require.Equal(t, 2, forms.Length())
	forms.Each(func(_ int, f *goquery.Selection) {
		assert.Equal(t, "post", f.AttrOr("method", ""))
		assert.Equal(t, "tok", f.Find(`input[name="csrf_token"]`).AttrOr("value", ""), "every form carries the CSRF token")
		assert.Equal(t, "UNKNOWN", f.Find(`input[name="expected_state"]`).AttrOr("value", ""), "and the state the reviewer saw")
		_, required := f.Find(`textarea[name="reason"]`).Attr("required")
		assert.True(t, required, "a reason is required")
		_, once := f.Attr("data-submit-once")
		assert.True(t, once)
	})
	assert.Equal(t, 1, doc.Find(`input[name="reference"][required]`).Length(), "confirm succeeded asks for the reference")
	assert.Equal(t, "button button--danger", doc.Find(`[data-testid="action-submit-mark_failed"]`).AttrOr("class", ""), "irreversible looks it")
	assert.Equal(t, "button button--primary", doc.Find(`[data-testid="action-submit-confirm_succeeded"]`).AttrOr("class", ""))
	_, open := doc.Find(`details[data-action="mark_failed"]`).Attr("open")
	assert.True(t, open, "the refused form is open")
	_, open = doc.Find(`details[data-action="confirm_succeeded"]`).Attr("open")
	assert.False(t, open)
	assert.Equal(t, "true", doc.Find(`[data-testid="action-reason-mark_failed"]`).AttrOr("aria-invalid", ""))
	assert.Equal(t, "A reason is required.", doc.Find(`[data-testid="action-error"]`).Text())
	assert.Equal(t, "This cannot be undone.", doc.Find(`[data-testid="action-caution-mark_failed"]`).Text())
}

func TestActionsPanelForReaders(t *testing.T) {
	t.Parallel()
	out := render(t, views.ActionsPanel(views.ActionPanel{Heading: "Decide what happened", ReadOnly: "Your role (auditor) can read this operation but not act on it."}))
	assert.NotContains(t, out, "<form")
	assert.Contains(t, out, "can read this operation but not act on it")
	assert.Empty(t, strings.TrimSpace(render(t, views.ActionsPanel(views.ActionPanel{}))), "nothing to show takes no space")
}
