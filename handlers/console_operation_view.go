package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
)

// operationPage builds the operation page's view model from the operation's public view
// (opview.Render, which every representation shows: params masked, what the downstream sent
// back scrubbed before it was recorded), and one timeline merging events with what their
// attempts recorded.
func operationPage(cat *catalog.Catalog, rec *models.OperationRecord, now time.Time) views.OperationPage {
	op := rec.Op
	view := opview.Render(cat, op)
	p := views.OperationPage{
		Op: operationRow(op, now), Fingerprint: view.Fingerprint, DownstreamKey: view.DownstreamKey, Attempts: op.Attempts,
		NextAttemptAt: timePtr(op.NextAttemptAt, now), Completed: timePtr(op.CompletedAt, now),
		DownstreamRef: deref(view.DownstreamRef),
	}
	lite := opviewLite{downstreamKey: view.DownstreamKey, downstreamRef: deref(view.DownstreamRef)}
	_ = json.Unmarshal(view.Params, &lite.params) // null (withheld) leaves it nil
	p.Situation = situation(cat, rec, lite, now)
	_, known := cat.Get(op.Tool)
	p.Params, p.ParamsNote = shownDoc(view.Params, op.Params, known, op.PurgedAt != nil, "params")
	p.Result, p.ResultNote = shownDoc(view.Result, op.Result, true, op.PurgedAt != nil, "result")
	p.Timeline = timeline(rec.Events, rec.Attempts, now)
	p.Probes = probes(rec.Events, now)
	for _, r := range rec.Reviews {
		p.Reviews = append(p.Reviews, views.ReviewInfo{ID: r.ID, Reason: reasonLabel(r.Reason), Status: r.Status,
			Opened: views.NewTime(r.OpenedAt, now), OpenedBy: r.OpenedBy, Resolved: timePtr(r.ResolvedAt, now),
			ResolvedBy: deref(r.ResolvedBy), Resolution: deref(r.Resolution)})
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

// eventLabels name event types as people read them.
var eventLabels = map[string]string{
	models.EventCreated:            "Recorded",
	models.EventStateChanged:       "State changed",
	models.EventAttemptStarted:     "Attempt started",
	models.EventAttemptFinished:    "Attempt finished",
	models.EventRetryScheduled:     "Retry scheduled",
	models.EventReconcileStarted:   "Reconciliation probe started",
	models.EventReconcileFinished:  "Reconciliation probe finished",
	models.EventEscalated:          "Handed to a person",
	models.EventReviewAction:       "Review action",
	models.EventCompensationLinked: "Compensation linked",
}

// timeline merges events with their attempts: an attempt's request id, outcome, downstream
// status, latency and trace id are shown on the event that started or finished it.
func timeline(events []models.Event, attempts []models.Attempt, now time.Time) []views.TimelineEntry {
	byNumber := make(map[int]models.Attempt, len(attempts))
	for _, a := range attempts {
		byNumber[a.Number] = a
	}
	out := make([]views.TimelineEntry, 0, len(events))
	for _, e := range events {
		entry := views.TimelineEntry{At: views.NewPreciseTime(e.At), Type: e.Type, Label: eventLabels[e.Type], Actor: e.Actor,
			Detail: details(e.Detail)}
		if entry.Label == "" {
			entry.Label = e.Type
		}
		if e.FromState != nil {
			entry.From = string(*e.FromState)
		}
		if e.ToState != nil {
			entry.To = string(*e.ToState)
		}
		if a, ok := byNumber[deref0(e.Attempt)]; ok && (e.Type == models.EventAttemptStarted || e.Type == models.EventAttemptFinished) {
			finished := e.Type == models.EventAttemptFinished
			verb := "started"
			if finished {
				verb = "finished"
			}
			entry.Label = fmt.Sprintf("Attempt %d %s", a.Number, verb)
			entry.Attempt = attemptInfo(a, finished)
		}
		out = append(out, entry)
	}
	return out
}

// attemptInfo is what the timeline shows of an attempt: its request id when it started, and
// everything it recorded when it finished.
func attemptInfo(a models.Attempt, finished bool) *views.AttemptInfo {
	info := &views.AttemptInfo{Number: a.Number, RequestID: a.ID, TraceID: deref(a.TraceID)}
	if !finished {
		return info
	}
	info.Class, info.Error = deref(a.Class), deref(a.Error)
	if a.DownstreamStatus != nil {
		info.Status = strconv.Itoa(*a.DownstreamStatus)
	}
	if a.LatencyMS != nil {
		info.Latency = strconv.FormatInt(*a.LatencyMS, 10) + " ms"
	}
	return info
}

// probes lists the finished reconciliation probes, oldest first.
func probes(events []models.Event, now time.Time) []views.ProbeRow {
	var out []views.ProbeRow
	for _, e := range events {
		if e.Type != models.EventReconcileFinished {
			continue
		}
		d := detailMap(e.Detail)
		row := views.ProbeRow{At: views.NewTime(e.At, now), Probe: str(d["probe"]), Outcome: str(d["outcome"]),
			Status: str(d["downstream_status"]), Error: str(d["error"])}
		if e.ToState != nil {
			row.To = string(*e.ToState)
		}
		out = append(out, row)
	}
	return out
}

// hiddenDetails are detail members the page shows elsewhere (the attempt's facts, the
// fingerprint among the facts) or that mean nothing to a reviewer (the fencing token).
var hiddenDetails = map[string]bool{"attempt_id": true, "class": true, "downstream_status": true, "latency_ms": true,
	"fence": true, "fingerprint": true}

// details lists an event's detail members by name.
func details(raw *string) []views.Detail {
	d := detailMap(raw)
	names := make([]string, 0, len(d))
	for k := range d {
		if !hiddenDetails[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	out := make([]views.Detail, len(names))
	for i, k := range names {
		out[i] = views.Detail{Name: k, Value: str(d[k])}
	}
	return out
}

func detailMap(raw *string) map[string]any {
	if raw == nil {
		return nil
	}
	var d map[string]any
	if err := json.Unmarshal([]byte(*raw), &d); err != nil {
		return map[string]any{"detail": *raw}
	}
	return d
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
