package handlers

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
)

// operationPage builds the operation page's view model from the operation's public view
// (opview.RenderForPeople: params masked but for the safe forms people may see, what the downstream sent
// back scrubbed before it was recorded), and one timeline merging events with what their
// attempts recorded.
func operationPage(cat *catalog.Catalog, rec *models.OperationRecord, now time.Time) views.OperationPage {
	op := rec.Op
	view := opview.RenderForPeople(cat, op)
	p := views.OperationPage{
		Op: operationRow(op, now), Fingerprint: view.Fingerprint, DownstreamKey: view.DownstreamKey, Attempts: op.Attempts,
		NextAttemptAt: timePtr(op.NextAttemptAt, now), Completed: timePtr(op.CompletedAt, now),
		DownstreamRef: deref(view.DownstreamRef), Justification: visible(deref(view.Justification)),
	}
	st := stakesOf(cat, op)
	p.Headline, p.Amount, p.Downstream = visible(st.Summary), st.Amount, st.Downstream
	lite := opviewLite{downstreamKey: view.DownstreamKey, downstreamRef: deref(view.DownstreamRef)}
	_ = json.Unmarshal(view.Params, &lite.params) // null (withheld) leaves it nil
	p.Situation = situation(cat, rec, lite, now)
	_, known := cat.Get(op.Tool)
	p.Params, p.ParamsNote = shownDoc(view.Params, op.Params, known, op.PurgedAt != nil, "params")
	p.Result, p.ResultNote = shownDoc(view.Result, op.Result, true, op.PurgedAt != nil, "result")
	if p.ParamsNote == "" && strings.Contains(p.Params, `"***"`) {
		// A masked card or account has no digits left; the downstream's answer may name its
		// last four (Stripe's last4), which a person checks against what they expect.
		if d := endingOf(view.Result); d != "" {
			p.ParamsNote = "Sensitive values are masked (***). The downstream's answer names the card or account ending in " + d + "."
		}
	}
	p.Timeline = buildTimeline(rec.Events, rec.Attempts)
	for _, r := range rec.Reviews {
		info := views.ReviewInfo{ID: r.ID, Reason: reasonLabel(r.Reason), Status: r.Status,
			Opened: views.NewTime(r.OpenedAt, now), OpenedBy: models.ActorName(r.OpenedBy), Resolved: timePtr(r.ResolvedAt, now),
			ResolvedBy: models.ActorName(deref(r.ResolvedBy)), Resolution: deref(r.Resolution)}
		p.Reviews = append(p.Reviews, info)
	}
	for _, a := range rec.Audit {
		p.Audit = append(p.Audit, auditRow(a))
	}
	if rec.Compensates != nil {
		r := operationRow(rec.Compensates, now)
		p.Compensates = &r
	}
	if rec.CompensatedBy != nil {
		r := operationRow(rec.CompensatedBy, now)
		p.CompensatedBy = &r
	}
	return p
}

// shownDoc pretty-prints a member of the operation's public view, or says why there is none:
// stored is what the ledger holds, known whether the tool's masking rules are.
func shownDoc(doc json.RawMessage, stored *string, known, purged bool, what string) (string, string) {
	switch {
	case stored == nil && purged:
		return "", "Removed after the tool's retention period; the key, fingerprint and final state are kept."
	case stored == nil:
		return "", "No " + what + " recorded."
	case !known:
		return "", "Withheld: the tool is no longer in the catalogue, so which fields are sensitive is unknown."
	case bytes.Equal(doc, []byte("null")) && *stored != "null":
		return "", "Withheld: the stored " + what + " could not be read to mask it."
	}
	var out bytes.Buffer
	if err := json.Indent(&out, doc, "", "  "); err != nil {
		return string(doc), ""
	}
	return out.String(), ""
}

// str shows a JSON value: strings as they are, numbers without exponent, the rest as JSON.
func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func deref0(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// lookAlikesBox shows op's look-alikes; nil when it has none. They are urgent while a person
// decides op: an approver is the last defence against an agent that minted a second key.
func lookAlikesBox(op *models.Operation, alikes []models.LookAlike, more bool, rule models.LookAlikeRule, now time.Time) *views.LookAlikes {
	if len(alikes) == 0 {
		return nil
	}
	window := rule.Window
	if window <= 0 {
		window = models.LookAlikeWindow
	}
	box := &views.LookAlikes{More: more, Urgent: op.State == models.StateAwaitingApproval || op.State == models.StateUnknown,
		Equal: equalFields(rule), Window: spanText(window), First: firstOf(op, alikes)}
	for _, a := range alikes {
		names := make([]string, len(a.ApprovedBy))
		for i, p := range a.ApprovedBy {
			names[i] = p.Name()
		}
		box.Rows = append(box.Rows, views.LookAlikeRow{Href: OperationHref(a.ID), Key: a.Key, State: string(a.State),
			Created: views.NewTime(a.CreatedAt, now), ApprovedBy: strings.Join(names, ", ")})
	}
	return box
}
