package handlers

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
)

// The operation page's timeline is read in five seconds: one row per attempt (its outcome,
// class, downstream status, latency, and the wait before it with its reason), repeated
// look-ups folded into one row, each kind with its own colour and icon, people's decisions in
// their place among them (each once: the page's other parts do not repeat them), times to the
// millisecond in one format, detail members named in words. The events as recorded stay one
// click away (RawEvents).

// Timeline kinds: each has its colour and icon in the stylesheet.
const (
	kindCreated   = "created"
	kindAttemptOK = "attempt-ok"
	kindAttemptKO = "attempt-failed"
	kindAttemptUN = "attempt-unclear"
	kindWait      = "attempt-running"
	kindProbe     = "probe"
	kindProbeOK   = "probe-settled"
	kindEscalated = "escalated"
	kindDecision  = "decision"
	kindState     = "state"
	kindLink      = "link"
)

// detailWords name detail members as people read them; members not listed are not shown in
// the timeline (the raw events have them all).
var detailWords = map[string]string{
	"reason": "Reason", "downstream_ref": "Downstream reference", "note": "Note", "lease_owner": "Worker",
	"compensated_by": "Compensated by", "compensates": "Compensates", "approvals": "Approvals", "required": "Required",
}

// actionWords name review actions.
var actionWords = map[string]string{
	models.ActionConfirmSucceeded: "confirmed it succeeded", models.ActionConfirmNotExecuted: "confirmed it did not take effect",
	models.ActionMarkFailed: "marked it failed", models.ActionReconcileNow: "asked the downstream now",
	models.ActionApprove: "approved it", models.ActionReject: "rejected it",
}

// buildTimeline turns the operation's events and attempts into the page's timeline.
func buildTimeline(events []models.Event, attempts []models.Attempt) views.Timeline {
	byNumber := make(map[int]models.Attempt, len(attempts))
	for _, a := range attempts {
		byNumber[a.Number] = a
	}
	var tl views.Timeline
	var lastFinish *time.Time
	waitWhy := ""
	for i := 0; i < len(events); i++ {
		e := events[i]
		switch e.Type {
		case models.EventCreated:
			row := views.TimelineRow{Kind: kindCreated, At: views.NewPreciseTime(e.At), Title: "Recorded", Actor: models.ActorName(e.Actor), To: stateOf(e.ToState),
				Quote: str(detailMap(e.Detail)["reason"])}
			row.Approval = row.Quote != "" // a proposal's reason, which its approvals box quotes
			tl.Rows = append(tl.Rows, row)
			if stateOf(e.ToState) == string(models.StateAwaitingApproval) {
				waitWhy = "after approval"
			}
		case models.EventAttemptStarted:
			a, ok := byNumber[deref0(e.Attempt)]
			if !ok {
				continue
			}
			row := attemptRow(a, e)
			if lastFinish != nil && a.StartedAt.After(*lastFinish) {
				row.Facts = append([]views.Detail{{Name: "Waited", Value: msText(a.StartedAt.Sub(*lastFinish)) + waitReason(waitWhy)}}, row.Facts...)
			}
			// The attempt's end and the state change it caused belong to its row.
			for i+1 < len(events) && deref0(events[i+1].Attempt) == a.Number && isAttemptTail(events[i+1].Type) {
				i++
				next := events[i]
				if next.ToState != nil {
					row.From, row.To = stateOf(next.FromState), stateOf(next.ToState)
				}
				if next.Type == models.EventRetryScheduled {
					waitWhy = str(detailMap(next.Detail)["class"])
				}
			}
			if a.FinishedAt != nil {
				lastFinish = a.FinishedAt
			}
			tl.Rows = append(tl.Rows, row)
		case models.EventReconcileStarted, models.EventReconcileFinished:
			j := i
			for j < len(events) && (events[j].Type == models.EventReconcileStarted || events[j].Type == models.EventReconcileFinished) {
				j++
			}
			tl.Rows = append(tl.Rows, probeRows(events[i:j])...)
			i = j - 1
		case models.EventEscalated:
			title := "Handed to a person: a review was opened"
			if why := str(detailMap(e.Detail)["reason"]); why != "" {
				title += " (" + strings.ToLower(reasonLabel(why)) + ")"
			}
			tl.Rows = append(tl.Rows, views.TimelineRow{Kind: kindEscalated, At: views.NewPreciseTime(e.At), Title: title,
				Actor: models.ActorName(e.Actor)})
		case models.EventReviewAction:
			row := decisionRow(e)
			row.Approval = str(detailMap(e.Detail)["action"]) == models.ActionApprove
			tl.Rows = append(tl.Rows, row)
			switch str(detailMap(e.Detail)["action"]) {
			case models.ActionConfirmNotExecuted:
				waitWhy = "reviewer"
			case models.ActionApprove:
				waitWhy = "after approval"
			}
		case models.EventCompensationLinked:
			row := views.TimelineRow{Kind: kindLink, At: views.NewPreciseTime(e.At), Actor: models.ActorName(e.Actor), Title: "Compensation linked",
				Facts: wordDetails(e.Detail)}
			tl.Rows = append(tl.Rows, row)
		case models.EventStateChanged:
			if stateOf(e.ToState) == string(models.StateRunning) {
				continue // a claim: the attempt's row that follows says it
			}
			fallthrough
		default: // state_changed and retry_scheduled outside an attempt: approvals, the reaper, a lapse
			row := views.TimelineRow{Kind: kindState, At: views.NewPreciseTime(e.At), Actor: models.ActorName(e.Actor), Title: "State changed",
				From: stateOf(e.FromState), To: stateOf(e.ToState), Facts: wordDetails(e.Detail)}
			if d := detailMap(e.Detail); str(d["reason"]) == "lease_expired" {
				row.Title, row.Facts = "The worker's lease expired before it recorded the outcome", nil
			}
			tl.Rows = append(tl.Rows, row)
		}
	}
	for _, e := range events {
		raw := views.RawEvent{ID: strconv.FormatInt(e.ID, 10), At: views.NewPreciseTime(e.At), Type: e.Type, Actor: e.Actor,
			From: stateOf(e.FromState), To: stateOf(e.ToState)}
		if e.Attempt != nil {
			raw.Attempt = strconv.Itoa(*e.Attempt)
		}
		if e.Detail != nil {
			raw.Detail = *e.Detail
		}
		tl.Raw = append(tl.Raw, raw)
	}
	return tl
}

func isAttemptTail(typ string) bool {
	return typ == models.EventAttemptFinished || typ == models.EventStateChanged || typ == models.EventRetryScheduled
}

// attemptRow is one attempt: outcome, class, downstream status, latency, ids.
func attemptRow(a models.Attempt, started models.Event) views.TimelineRow {
	row := views.TimelineRow{At: views.NewPreciseTime(a.StartedAt), Actor: models.ActorName(started.Actor), Kind: kindWait,
		Title: fmt.Sprintf("Attempt %d", a.Number), Attempt: a.Number}
	class := deref(a.Class)
	switch class {
	case "":
		row.Title += ": no outcome recorded yet"
	case "succeeded":
		row.Kind, row.Title = kindAttemptOK, row.Title+": succeeded"
	case models.ErrorAmbiguous:
		row.Kind, row.Title = kindAttemptUN, row.Title+": outcome unclear"
	default:
		row.Kind, row.Title = kindAttemptKO, row.Title+": "+strings.ReplaceAll(class, "_", " ")
	}
	if class != "" {
		row.Facts = append(row.Facts, views.Detail{Name: "Class", Value: class})
	}
	if a.DownstreamStatus != nil {
		row.Facts = append(row.Facts, views.Detail{Name: "Downstream status", Value: "HTTP " + strconv.Itoa(*a.DownstreamStatus)})
	}
	if a.LatencyMS != nil {
		row.Facts = append(row.Facts, views.Detail{Name: "Latency", Value: strconv.FormatInt(*a.LatencyMS, 10) + " ms"})
	}
	if a.Error != nil {
		row.Note = *a.Error
	}
	row.IDs = append(row.IDs, views.Detail{Name: "Request id", Value: a.ID})
	if a.TraceID != nil {
		row.IDs = append(row.IDs, views.Detail{Name: "Trace id", Value: *a.TraceID})
	}
	return row
}

// waitReason says why an attempt waited: the class of the attempt before it, or a person.
func waitReason(why string) string {
	switch why {
	case "":
		return ""
	case models.ErrorThrottled:
		return " (the downstream asked to slow down: Retry-After or backoff)"
	case "reviewer":
		return " (sent again on a reviewer's decision)"
	case "after approval":
		return " (waited for approval)"
	}
	return " (backoff after " + strings.ReplaceAll(why, "_", " ") + ")"
}

// probeRows folds look-ups: a run of finished look-ups with the same answer that changed
// nothing is one row ("12 look-ups, all HTTP 500"); a look-up that settled the operation is a
// row of its own.
func probeRows(events []models.Event) []views.TimelineRow {
	var out []views.TimelineRow
	var group []models.Event
	flush := func() {
		if len(group) == 0 {
			return
		}
		first, last := group[0], group[len(group)-1]
		answer := probeAnswer(detailMap(last.Detail))
		row := views.TimelineRow{Kind: kindProbe, At: views.NewPreciseTime(first.At), Actor: models.ActorName(last.Actor), Count: len(group)}
		if len(group) == 1 {
			row.Title = "Look-up " + str(detailMap(last.Detail)["probe"]) + ": " + answer
		} else {
			end := views.NewPreciseTime(last.At)
			row.End = &end
			row.Title = fmt.Sprintf("%d look-ups, all %s", len(group), answer)
			if !telling(answer) {
				row.Title += ": none said whether it took effect"
			}
		}
		if errText := str(detailMap(last.Detail)["error"]); errText != "" {
			row.Note = errText
		}
		out = append(out, row)
		group = nil
	}
	for _, e := range events {
		if e.Type != models.EventReconcileFinished {
			continue
		}
		d := detailMap(e.Detail)
		if e.ToState != nil {
			flush()
			row := views.TimelineRow{Kind: kindProbeOK, At: views.NewPreciseTime(e.At), Actor: models.ActorName(e.Actor),
				Title: "Look-up " + str(d["probe"]) + ": " + probeAnswer(d), From: stateOf(e.FromState), To: stateOf(e.ToState)}
			if str(d["outcome"]) == jobs.ProbeError {
				row.Kind = kindProbe
			}
			out = append(out, row)
			continue
		}
		if len(group) > 0 && probeAnswer(detailMap(group[0].Detail)) != probeAnswer(d) {
			flush()
		}
		group = append(group, e)
	}
	flush()
	return out
}

// decisionRow is a person's review action: who decided what, and why.
func decisionRow(e models.Event) views.TimelineRow {
	d := detailMap(e.Detail)
	action := str(d["action"])
	what, ok := actionWords[action]
	if !ok {
		what = strings.ReplaceAll(action, "_", " ")
	}
	row := views.TimelineRow{Kind: kindDecision, At: views.NewPreciseTime(e.At), Actor: models.ActorName(e.Actor),
		Title: models.ActorName(e.Actor) + " " + what, From: stateOf(e.FromState), To: stateOf(e.ToState), Quote: str(d["reason"])}
	if ref := str(d["downstream_ref"]); ref != "" {
		row.Facts = append(row.Facts, views.Detail{Name: "Downstream reference", Value: ref})
	}
	if n, req := str(d["approvals"]), str(d["required"]); n != "" && req != "" {
		row.Facts = append(row.Facts, views.Detail{Name: "Approvals", Value: n + " of " + req})
	}
	return row
}

// wordDetails lists the detail members people read, named in words.
func wordDetails(raw *string) []views.Detail {
	d := detailMap(raw)
	names := make([]string, 0, len(d))
	for k := range d {
		if detailWords[k] != "" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	out := make([]views.Detail, len(names))
	for i, k := range names {
		out[i] = views.Detail{Name: detailWords[k], Value: str(d[k])}
	}
	return out
}

func stateOf(s *models.State) string {
	if s == nil {
		return ""
	}
	return string(*s)
}

// msText spells a wait: "850 ms", "1.250 s", "2 min 5 s".
func msText(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(float64(d.Milliseconds())/1000, 'f', 3, 64) + " s"
	}
	return views.Age(d)
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

// Timeline kinds of the agents' requests after an operation was recorded.
const (
	kindRepeat  = "repeat"
	kindRefused = "refused"
)

// refusedRequests name the audit log's refusals of a request with the operation's key, by
// action (web/audit.go): what the agent asked that was not the operation.
var refusedRequests = map[string]string{
	"api.key_mismatch":   "A request with this key and other params was refused (422): nothing ran",
	"api.tool_forbidden": "A request with this key for a tool its caller may not use was refused (403): nothing ran",
}

// withRequests adds to tl what the agents' requests with the operation's key did after it was
// recorded, which its events do not hold: the repeats, answered from the record, in one row;
// and each refused request from the audit log. Rows are placed by time.
func withRequests(tl views.Timeline, rep models.Repeats, audit []models.AuditEntry) views.Timeline {
	type timed struct {
		at  time.Time
		row views.TimelineRow
	}
	var extra []timed
	if rep.N > 0 {
		row := views.TimelineRow{Kind: kindRepeat, At: views.NewPreciseTime(rep.First), Count: int(rep.N),
			Title: "Asked again with this key " + plural(int(rep.N), "time", "times") + ": answered from the record, nothing sent again"}
		if rep.N > 1 {
			end := views.NewPreciseTime(rep.Last)
			row.End = &end
		}
		extra = append(extra, timed{rep.First, row})
	}
	for _, e := range audit {
		title, ok := refusedRequests[e.Action]
		if !ok || e.Outcome != models.OutcomeRefused {
			continue
		}
		row := views.TimelineRow{Kind: kindRefused, At: views.NewPreciseTime(e.At), Actor: models.ActorName(e.Actor), Title: title}
		if e.RequestID != "" {
			row.IDs = []views.Detail{{Name: "Request id", Value: e.RequestID}}
		}
		extra = append(extra, timed{e.At, row})
	}
	for _, x := range extra {
		i := sort.Search(len(tl.Rows), func(i int) bool { return rowTime(tl.Rows[i]).After(x.at) })
		tl.Rows = slices.Insert(tl.Rows, i, x.row)
	}
	return tl
}

// rowTime is when a timeline row starts.
func rowTime(r views.TimelineRow) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, r.At.ISO)
	return t
}

// quotedAbove leaves out of tl the reasons of approvals and of the proposal that the approvals
// box above quotes, saying where they are: each reason is read once on the page.
func quotedAbove(tl views.Timeline) views.Timeline {
	for i := range tl.Rows {
		if r := &tl.Rows[i]; r.Approval && r.Quote != "" {
			r.Quote, r.Pointer = "", "Their reason is quoted under Approvals, above."
		}
	}
	return tl
}
