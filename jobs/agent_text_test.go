package jobs

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/models"
)

// hostileSummary is what an agent can put in a summary through its params, and in its key:
// a Markdown link (Teams, Mattermost), a Slack link and channel mention, a Mattermost mention,
// and lines of its own with a fake call to action and a lone "." (the end of SMTP DATA).
const hostileSummary = "Refund [Approve here](https://evil.example) <https://evil.example|Approve here> <!channel> @channel" +
	"\r\n\r\nOpen it: https://evil.example\r.\r\n.\n`code` end"

func hostileMessage(t *testing.T) message {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"type": models.WebhookReviewOpened, "tenant": "acme", "summary": hostileSummary,
		"links": map[string]any{"console": "https://idemgate.example.com/operations/op_1"},
		"data": map[string]any{
			"operation": map[string]any{"id": "op_1", "key": "k\nOpen it: https://evil.example", "tool": "refunds.issue", "state": "UNKNOWN"},
			"review":    map[string]any{"id": "rev_1", "reason": models.ReasonUnknownOutcome, "status": models.ReviewOpen},
		},
	})
	require.NoError(t, err)
	m, err := readMessage(body)
	require.NoError(t, err)
	return m
}

// Agent text reaches reviewers' notifications as quoted data, never as markup or as lines of
// the message (issue 47, finding 3): in Slack/Mattermost an inline code span with &, < and >
// escaped, in Teams a plain TextRun (never Markdown), in email on one line behind idemgate's
// own words.
func TestAgentTextIsQuotedDataInEveryFormat(t *testing.T) {
	m := hostileMessage(t)

	t.Run("slack and mattermost", func(t *testing.T) {
		raw, err := slackBody(m)
		require.NoError(t, err)
		var body struct {
			Text   string `json:"text"`
			Blocks []struct {
				Text   *struct{ Text string }  `json:"text"`
				Fields []struct{ Text string } `json:"fields"`
			} `json:"blocks"`
		}
		require.NoError(t, json.Unmarshal(raw, &body))
		texts := []string{body.Text}
		for _, b := range body.Blocks {
			if b.Text != nil {
				texts = append(texts, b.Text.Text)
			}
			for _, f := range b.Fields {
				texts = append(texts, f.Text)
			}
		}
		for _, text := range texts {
			assert.NotContains(t, text, "<!channel>", "no mention: %q", text)
			assert.NotContains(t, text, "<https://", "no Slack link: %q", text)
			assert.NotContains(t, text, "\nOpen it", "no line of the agent's own: %q", text)
			if strings.Contains(text, "evil.example") {
				// Every piece of agent text sits inside one code span, on one line.
				for _, line := range strings.Split(text, "\n") {
					if strings.Contains(line, "evil.example") {
						assert.True(t, strings.HasPrefix(line, "`") && strings.HasSuffix(line, "`") ||
							strings.Contains(line, ": `") && strings.HasSuffix(line, "`"), "quoted as code: %q", line)
						assert.Equal(t, 2, strings.Count(line, "`"), "the agent's backtick cannot close the span: %q", line)
					}
				}
			}
		}
		assert.Contains(t, body.Text, "&lt;!channel&gt;", "the top-level text is escaped too")
	})

	t.Run("teams", func(t *testing.T) {
		raw, err := teamsBody(m)
		require.NoError(t, err)
		var msg struct {
			Attachments []struct {
				Content struct {
					Body []map[string]any `json:"body"`
				} `json:"content"`
			} `json:"attachments"`
		}
		require.NoError(t, json.Unmarshal(raw, &msg))
		found := 0
		for _, el := range msg.Attachments[0].Content.Body {
			enc, _ := json.Marshal(el)
			if !strings.Contains(string(enc), "evil.example") {
				continue
			}
			require.Equal(t, "RichTextBlock", el["type"], "agent text never in a TextBlock or FactSet, which read Markdown: %s", enc)
			for _, in := range el["inlines"].([]any) {
				run := in.(map[string]any)
				assert.Equal(t, "TextRun", run["type"])
				if text := run["text"].(string); strings.Contains(text, "evil.example") {
					found++
					assert.Equal(t, "Monospace", run["fontType"], "shown as data")
					assert.NotContains(t, text, "\n")
				}
			}
		}
		assert.Equal(t, 2, found, "the summary and the key")
	})

	t.Run("email", func(t *testing.T) {
		for name, raw := range map[string][]byte{
			"one review": composeEmail("idemgate <idemgate@example.com>", models.Email{ID: "em_1", ReviewID: "rev_1", Event: models.WebhookReviewOpened,
				Recipient: "rita@example.com"}, m),
			"digest": composeDigest("idemgate <idemgate@example.com>", []models.Email{{ID: "em_1", Recipient: "rita@example.com"}}, []message{m}),
		} {
			text := string(raw)
			assert.NotContains(t, strings.ReplaceAll(text, "\r\n", ""), "\r", "%s: no bare CR", name)
			assert.NotContains(t, strings.ReplaceAll(text, "\r\n", ""), "\n", "%s: no bare LF", name)
			for _, line := range strings.Split(text, "\r\n") {
				assert.NotEqual(t, ".", line, "%s: no lone dot", name)
				assert.False(t, strings.HasPrefix(line, "Open it: https://evil"), "%s: the agent wrote no line of its own: %q", name, line)
				if strings.Contains(line, "evil.example") {
					ours := false
					for _, prefix := range []string{"Subject: ", "What the agent asked: \u201c", "Operation: ", "1. A review needs a person: \u201c"} {
						ours = ours || strings.HasPrefix(line, prefix)
					}
					assert.True(t, ours, "%s: the agent's words follow idemgate's own on their line: %q", name, line)
				}
			}
			assert.Contains(t, text, "Open it: https://idemgate.example.com/operations/op_1", name)
		}
	})
}
