package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/idemgate/idemgate/models"
)

// The chat and pager formats of a subscription (docs/WEBHOOKS.md) are written from the standard
// body when a delivery is sent: the outbox keeps one body per message, whatever the
// subscriptions' formats. Each says what a person needs to act: the summary, why a human is
// needed, the state, and a link to the operation's page (with --public-url).

// standardBody is what a format reads of the standard body.
type standardBody struct {
	Type       string    `json:"type"`
	OccurredAt time.Time `json:"occurred_at"`
	Tenant     string    `json:"tenant"`
	Summary    string    `json:"summary"`
	Links      *struct {
		Console string `json:"console"`
	} `json:"links"`
	Data struct {
		Operation *struct {
			ID     string `json:"id"`
			Key    string `json:"key"`
			Tool   string `json:"tool"`
			State  string `json:"state"`
			Review *struct {
				ID     string `json:"id"`
				Reason string `json:"reason"`
			} `json:"review"`
		} `json:"operation"`
		Review *struct {
			ID       string     `json:"id"`
			Reason   string     `json:"reason"`
			Status   string     `json:"status"`
			LapsesAt *time.Time `json:"lapses_at"`
		} `json:"review"`
	} `json:"data"`
}

// message is a notification in words: a headline, what is asked of a person, facts, a link.
//
// Title and Why are idemgate's own words. Summary and the facts' values come from the agent (the
// summary is written from its params, the key is its own): every format shows them as quoted
// data on one line, never as markup or lines of the message, so an agent cannot write a link, a
// mention or an instruction that reads as idemgate's (agentText, and each format's quoting).
type message struct {
	Title    string
	Summary  string
	Why      string
	Facts    [][2]string
	Link     string
	Resolve  bool   // the review this is about has been decided
	ReviewID string // the review it is about, "" before one is opened
}

// eventTitles head a message by its event.
var eventTitles = map[string]string{
	models.WebhookOperationSucceeded:        "Operation succeeded",
	models.WebhookOperationFailed:           "Operation failed",
	models.WebhookOperationUnknown:          "Outcome unknown: a person may need to decide",
	models.WebhookOperationAwaitingApproval: "Waiting for approval",
	models.WebhookReviewOpened:              "A review needs a person",
	models.WebhookReviewResolved:            "Review decided",
	models.WebhookReviewExpiring:            "An approval lapses soon",
	models.WebhookTest:                      "Test event",
}

// reviewWhy says why a person is needed, by review reason.
var reviewWhy = map[string]string{
	models.ReasonUnknownOutcome:       "It is not known whether the call took effect, and the gateway cannot find out alone: confirm, retry or mark it failed.",
	models.ReasonApprovalRequired:     "It runs only once a reviewer approves it.",
	models.ReasonCompensationApproval: "A compensation (an undo) runs only once a reviewer other than its proposer approves it.",
	models.ReasonPolicy:               "A policy of the gateway (a rule on its arguments, or a budget it would pass) holds it until a reviewer approves it.",
	models.ReasonManual:               "A person handed it over for review.",
}

func readMessage(body []byte) (message, error) {
	var b standardBody
	if err := json.Unmarshal(body, &b); err != nil {
		return message{}, fmt.Errorf("reading the standard body: %w", err)
	}
	m := message{Title: eventTitles[b.Type]}
	if m.Title == "" {
		m.Title = b.Type
	}
	m.Summary = agentText(b.Summary)
	if b.Links != nil {
		m.Link = b.Links.Console
	}
	if b.Type == models.WebhookTest {
		m.Why, m.Summary = b.Summary, ""
		return m, nil
	}
	reason := ""
	if op := b.Data.Operation; op != nil {
		m.Facts = append(m.Facts, [2]string{"Operation", agentText(op.Key)}, [2]string{"Tool", op.Tool}, [2]string{"State", op.State})
		if op.Review != nil {
			m.ReviewID, reason = op.Review.ID, op.Review.Reason
		}
	}
	m.Facts = append(m.Facts, [2]string{"Tenant", b.Tenant})
	if r := b.Data.Review; r != nil {
		m.ReviewID, reason = r.ID, r.Reason
		m.Resolve = r.Status != models.ReviewOpen
		if r.LapsesAt != nil {
			m.Facts = append(m.Facts, [2]string{"Lapses at", r.LapsesAt.UTC().Format("2006-01-02 15:04 UTC")})
		}
	}
	if !m.Resolve {
		m.Why = reviewWhy[reason]
	}
	return m, nil
}

// agentText is text an agent wrote, made one line: line breaks (of any kind) and other control
// characters become spaces, so that it can never start a line of its own in any format.
func agentText(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == '\u0085'
	}), " ")
}

// titled is the headline with the agent's summary after it in quotes, in plain text.
func (m message) titled() string {
	if m.Summary == "" {
		return m.Title
	}
	return m.Title + ": \u201c" + m.Summary + "\u201d"
}

// slackBody is a Block Kit message (Slack and Mattermost incoming webhooks): text for
// notifications, a section with the headline and why, the facts, and a button to the console.
// The agent's text is an inline code span in both (slackCode): neither Slack's mrkdwn nor
// Mattermost's Markdown makes a link, a mention or emphasis inside one.
func slackBody(m message) ([]byte, error) {
	headline := slackEscape(m.Title)
	if m.Summary != "" {
		headline += ": " + slackCode(m.Summary)
	}
	text := "*" + slackEscape(m.Title) + "*"
	if m.Summary != "" {
		text += "\n" + slackCode(m.Summary)
	}
	if m.Why != "" {
		text += "\n" + slackEscape(m.Why)
	}
	blocks := []map[string]any{{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": cutText(text, 3000)}}}
	if len(m.Facts) > 0 {
		var fields []map[string]any
		for _, f := range m.Facts[:min(len(m.Facts), 10)] {
			fields = append(fields, map[string]any{"type": "mrkdwn", "text": cutText("*"+f[0]+"*\n"+slackCode(f[1]), 2000)})
		}
		blocks = append(blocks, map[string]any{"type": "section", "fields": fields})
	}
	if m.Link != "" {
		blocks = append(blocks, map[string]any{"type": "actions", "elements": []map[string]any{{
			"type": "button", "text": map[string]any{"type": "plain_text", "text": "Open in idemgate"}, "url": m.Link}}})
	}
	return json.Marshal(map[string]any{"text": cutText(headline, 3000), "blocks": blocks})
}

// slackEscape escapes what mrkdwn reads as markup: &, < and > (a link, a mention, <!channel>).
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// slackCode quotes agent text as an inline code span: escaped as mrkdwn needs, a backtick
// (which would close the span) replaced by a look-alike, and one line (agentText).
func slackCode(s string) string {
	if s == "" {
		return ""
	}
	return "`" + slackEscape(strings.ReplaceAll(agentText(s), "`", "\u02cb")) + "`"
}

// teamsBody is an Adaptive Card in a message attachment (Teams workflows and incoming
// webhooks): the headline, why, the facts, and an action opening the console. The agent's text
// is a TextRun of a RichTextBlock, which Adaptive Cards never read as Markdown (a TextBlock and
// a FactSet's values are), in a monospace font: quoted data, never a link.
func teamsBody(m message) ([]byte, error) {
	body := []map[string]any{{"type": "TextBlock", "text": m.Title, "weight": "Bolder", "size": "Medium", "wrap": true}}
	if m.Summary != "" {
		body = append(body, map[string]any{"type": "RichTextBlock", "inlines": []map[string]any{teamsData(m.Summary)}})
	}
	if m.Why != "" {
		body = append(body, map[string]any{"type": "TextBlock", "text": m.Why, "wrap": true})
	}
	for _, f := range m.Facts {
		body = append(body, map[string]any{"type": "RichTextBlock", "spacing": "Small", "inlines": []map[string]any{
			{"type": "TextRun", "text": f[0] + ": ", "weight": "Bolder"}, teamsData(f[1])}})
	}
	card := map[string]any{"$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard",
		"version": "1.4", "body": body}
	if m.Link != "" {
		card["actions"] = []map[string]any{{"type": "Action.OpenUrl", "title": "Open in idemgate", "url": m.Link}}
	}
	return json.Marshal(map[string]any{"type": "message", "attachments": []map[string]any{{
		"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": nil, "content": card}}})
}

// teamsData is agent text as a plain-text run.
func teamsData(s string) map[string]any {
	return map[string]any{"type": "TextRun", "text": agentText(s), "fontType": "Monospace"}
}

// errNothingToSend is a delivery whose format has nothing to say about its event: it ends
// delivered, with why in its attempt, and no request is made.
var errNothingToSend = errors.New("not sent")

// pagerDutyBody is an Events API v2 event: trigger while a person is needed, resolve once the
// review is decided, deduplicated by the review's id. An operation announced UNKNOWN before any
// review was opened pages nobody yet: the reconciler may still settle it, and the review.opened
// that follows if it cannot is the page (keyed by the review, which its decision resolves).
func pagerDutyBody(m message, event, routingKey string) ([]byte, error) {
	if m.ReviewID == "" && event != models.WebhookTest {
		return nil, fmt.Errorf("%w: no review is open yet; PagerDuty is paged when one opens", errNothingToSend)
	}
	ev := map[string]any{"routing_key": routingKey, "dedup_key": "idemgate:" + m.ReviewID}
	if m.Resolve {
		ev["event_action"] = "resolve"
		return json.Marshal(ev)
	}
	details := map[string]any{}
	for _, f := range m.Facts {
		details[f[0]] = f[1]
	}
	if m.Why != "" {
		details["Why"] = m.Why
	}
	severity := "warning"
	if event == models.WebhookOperationUnknown {
		severity = "error"
	}
	ev["event_action"] = "trigger"
	ev["payload"] = map[string]any{"summary": cutText(m.titled(), 1024), "source": "idemgate", "severity": severity,
		"component": "reviews", "custom_details": details}
	if m.Link != "" {
		ev["links"] = []map[string]any{{"href": m.Link, "text": "Open in idemgate"}}
	}
	if event == models.WebhookTest {
		ev["dedup_key"] = "idemgate:test"
	}
	return json.Marshal(ev)
}

// cutText shortens s to at most n bytes, on a character boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n-len("…")] + "…"
}

// formatted is the body c's subscription takes.
func (p *Publisher) formatted(ctx context.Context, c models.ClaimedDelivery) ([]byte, error) {
	if c.Format == "" || c.Format == models.WebhookFormatStandard {
		return c.Payload, nil
	}
	m, err := readMessage(c.Payload)
	if err != nil {
		return nil, err
	}
	switch c.Format {
	case models.WebhookFormatSlack:
		return slackBody(m)
	case models.WebhookFormatTeams:
		return teamsBody(m)
	case models.WebhookFormatPagerDuty:
		key, err := p.routingKey(ctx, c)
		if err != nil {
			return nil, err
		}
		return pagerDutyBody(m, c.EventType, key)
	}
	return nil, fmt.Errorf("unknown format %q", c.Format)
}

// errNoRoutingKey is a PagerDuty routing key that could not be had.
var errNoRoutingKey = errors.New("the routing key is not available")

// maxRoutingKeyFile bounds what is read of a routing key's file: one short line is wanted.
const maxRoutingKeyFile = 4 << 10

// routingKey returns the PagerDuty routing key of c: its sealed value, opened by the ledger, or
// what its reference names: the publishing process's environment, a file (read now, so a
// rotated one applies at once) or the tenant's secret. A reference is checked against the
// operator's policy every time, whoever stored it: nothing the operator did not set aside for
// notifications is ever read for one.
func (p *Publisher) routingKey(ctx context.Context, c models.ClaimedDelivery) (string, error) {
	if c.RoutingKeyErr != nil {
		return "", fmt.Errorf("%w: %v", errNoRoutingKey, c.RoutingKeyErr)
	}
	if c.RoutingKeyValue != "" {
		return c.RoutingKeyValue, nil
	}
	kind, name, err := p.cfg.SecretRefs.Check(c.RoutingKey)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoRoutingKey, err)
	}
	var v string
	switch kind {
	case "env":
		v = p.cfg.Getenv(name)
	case "file":
		f, err := os.Open(name)
		if err != nil {
			return "", fmt.Errorf("%w: file:%s: %v", errNoRoutingKey, name, errors.Unwrap(err))
		}
		data, err := io.ReadAll(io.LimitReader(f, maxRoutingKeyFile))
		f.Close()
		if err != nil {
			return "", fmt.Errorf("%w: file:%s: %v", errNoRoutingKey, name, err)
		}
		v, _, _ = strings.Cut(strings.TrimRight(string(data), "\r\n"), "\n")
	case "tenant":
		if v, err = p.cfg.Ledger.TenantSecret(ctx, c.Tenant, name); err != nil {
			return "", fmt.Errorf("%w: tenant:%s: %v", errNoRoutingKey, name, err)
		}
	}
	if v == "" {
		return "", fmt.Errorf("%w: %s is empty", errNoRoutingKey, c.RoutingKey)
	}
	return v, nil
}
