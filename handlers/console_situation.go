package handlers

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
)

// The top of the operation page answers, before anything else, why a person is needed and
// what is safe: what happened in plain words, why the gateway did not simply try again, where
// reconciliation stands, and what to look for in the downstream. Everything below it (facts,
// params, timeline) is the evidence.

// situation builds the operation page's summary of op as it is at now.
func situation(cat *catalog.Catalog, rec *models.OperationRecord, view opviewLite, now time.Time) views.Situation {
	op := rec.Op
	tool, known := cat.Get(op.Tool)
	last := lastFinished(rec.Attempts)
	s := views.Situation{Tone: views.NoticeInfo}
	service := serviceName(op.Tool)
	switch op.State {
	case models.StateUnknown:
		s.Tone = views.NoticeWarning
		s.Outcome = ambiguousOutcome(last, service, op.Tool, tool, known)
		s.WhyLabel, s.Why = "Why it waits for you", whyNotRetried(op, tool, known)
		s.Reconcile = reconcileStatus(op, rec.Events, tool, known, now)
	case models.StateSucceeded:
		s.Tone = views.NoticeSuccess
		s.Outcome = succeededOutcome(rec, service)
	case models.StateFailedFinal:
		s.Tone = views.NoticeError
		s.Outcome = failedOutcome(op, last, service)
	case models.StatePending:
		s.Outcome = pendingOutcome(op, tool, known, now)
		if op.ErrorClass != nil && last != nil {
			s.WhyLabel, s.Why = "Last attempt", lowerFirst(attemptOutcome(last, service))+"."
		}
	case models.StateRunning:
		s.Outcome = fmt.Sprintf("Being sent now: attempt %d.", op.Attempts)
	case models.StateAwaitingApproval:
		s.Outcome = "Not sent yet: it waits for a reviewer's approval."
		// A policy that held it says why in the operator's words: the first thing to read.
		if why := policyWhy(rec.Events); why != "" {
			s.WhyLabel, s.Why = "Why a policy holds it", why
		}
	}
	// A reviewer's own decision is on the timeline, with its reason: not repeated as an error.
	if op.ErrorMessage != nil && (op.State == models.StateUnknown || op.State == models.StateFailedFinal) &&
		deref(op.ErrorClass) != models.ErrorRejectedByReviewer {
		s.Detail = *op.ErrorMessage
	}
	s.Search = downstreamSearch(tool, known, op, view, rec.Attempts)
	return s
}

// downstreamSearch is what to look for in the downstream of op: its reference once the
// downstream gave one, else the downstream key where the downstream keeps or links it, else
// the call's details and when it was sent; nil for an operation never sent.
func downstreamSearch(tool *catalog.Tool, known bool, op *models.Operation, view opviewLite, attempts []models.Attempt) *views.DownstreamSearch {
	var d views.DownstreamSearch
	switch {
	case len(attempts) == 0 && view.downstreamRef == "":
		// Never sent (awaiting approval, rejected, lapsed, denied): nothing to look for downstream.
		return nil
	case view.downstreamRef != "":
		d = views.DownstreamSearch{Label: "Downstream reference", Value: view.downstreamRef, What: "the downstream reference",
			Hint: "The id the downstream gave it."}
	case !known || keyFindable(tool):
		d = views.DownstreamSearch{Label: "Search the downstream for", Value: view.downstreamKey, What: "the downstream key",
			Hint: "The downstream key: idemgate sent it with the request (X-Idemgate-Downstream-Key), so the downstream can find the call by it."}
	default:
		// The downstream keeps no key of idemgate's for this tool: what to look for is the call
		// itself, by what it was about and when it was sent.
		d = views.DownstreamSearch{Label: "Search the downstream by", Value: callDetails(tool, op, view, attempts), What: "the call's details",
			Hint: "This downstream keeps no key of idemgate's: look for a call with these details, made in this window."}
	}
	if d.Value == "" {
		return nil
	}
	if known {
		d.Link = tool.ReferenceURL(catalog.TemplateData{OperationID: op.ID, DownstreamKey: view.downstreamKey, Key: op.Key,
			Tenant: op.Tenant, Params: view.params})
		d.LinkText = "Look it up in the " + serviceName(op.Tool)
	}
	return &d
}

// keyFindable reports whether tool's downstream can be searched by the downstream key: it
// deduplicates or stores it (a header, a body field it keeps), or the tools file links a search
// by it.
func keyFindable(tool *catalog.Tool) bool {
	if tool.MCP != nil {
		return tool.MCP.IdempotencyArgument != "" || tool.HasReferenceURL()
	}
	return tool.HonoursKey() || tool.HTTP.ReferenceParam != "" || tool.HasReferenceURL()
}

// callDetails says what to look for when the downstream keeps no key: the tool's summary (or
// the masked params) and the window the attempts were sent in.
func callDetails(tool *catalog.Tool, op *models.Operation, view opviewLite, attempts []models.Attempt) string {
	masked, _ := json.Marshal(view.params)
	what, ok := tool.Summary(masked, op.Key, op.Tenant)
	if !ok {
		what = string(masked)
	}
	if len(attempts) == 0 {
		return what
	}
	from, to := attempts[0].StartedAt, attempts[len(attempts)-1].StartedAt
	if f := attempts[len(attempts)-1].FinishedAt; f != nil {
		to = *f
	}
	return fmt.Sprintf("%s, sent between %s and %s UTC", what, from.UTC().Format("2006-01-02 15:04:05"), to.UTC().Add(time.Second).Format("15:04:05"))
}

// opviewLite is what situation needs of the operation's public view.
type opviewLite struct {
	downstreamKey string
	downstreamRef string
	params        map[string]any // masked
}

// serviceName names the downstream of tool as people say it: "refunds.issue" → "refunds service".
func serviceName(tool string) string {
	name, _, _ := strings.Cut(tool, ".")
	return name + " service"
}

func lastFinished(attempts []models.Attempt) *models.Attempt {
	for i := len(attempts) - 1; i >= 0; i-- {
		if attempts[i].FinishedAt != nil {
			return &attempts[i]
		}
	}
	return nil
}

// ambiguousOutcome says what is known of the request that left op UNKNOWN, the uncertainty
// first: "sent" alone reads as "it went out", which is exactly what nobody knows.
func ambiguousOutcome(last *models.Attempt, service, toolName string, tool *catalog.Tool, known bool) string {
	unknown := "it is not known whether " + effectOf(toolName) + "."
	if last == nil {
		return "The request may have reached the " + service + ", and the gateway stopped before it recorded an answer: " + unknown
	}
	s := attemptOutcome(last, service)
	if known && strings.Contains(s, "no answer came") {
		s = strings.Replace(s, "no answer came", "no answer came within "+tool.HTTP.Timeout.String(), 1)
	}
	return s + ": " + unknown
}

// effectOf names what a call of the tool does, as a clause: "the email went out". The tool's
// first name says what kind of thing it is; the rest are told apart by what they differ in.
func effectOf(tool string) string {
	kind, _, _ := strings.Cut(tool, ".")
	switch strings.TrimSuffix(kind, "s") {
	case "email", "mail", "message", "sms", "notification":
		return "the " + strings.TrimSuffix(kind, "s") + " went out"
	case "refund":
		return "the refund was made"
	case "payout", "payment", "charge", "transfer":
		return "the money was sent"
	case "ticket", "issue":
		return "the " + strings.TrimSuffix(kind, "s") + " was created"
	}
	return "it took effect"
}

// attemptOutcome says in plain words how one finished attempt ended, without a full stop.
func attemptOutcome(a *models.Attempt, service string) string {
	class, errText := deref(a.Class), strings.ToLower(deref(a.Error))
	status := 0
	if a.DownstreamStatus != nil {
		status = *a.DownstreamStatus
	}
	switch class {
	case models.ErrorNotSent:
		return "Not sent: the " + service + " could not be reached"
	case models.ErrorThrottled:
		return fmt.Sprintf("Not taken: the %s asked to slow down (HTTP %d)", service, status)
	case models.ErrorRejected:
		return fmt.Sprintf("Refused by the %s (HTTP %d)", service, status)
	case "succeeded":
		return fmt.Sprintf("Done: the %s answered HTTP %d", service, status)
	}
	switch {
	case status != 0:
		return fmt.Sprintf("The request reached the %s, which answered HTTP %d", service, status)
	case strings.Contains(errText, "lease expired"):
		return "The request went to the " + service + ", and the worker stopped before it recorded an answer"
	case strings.Contains(errText, "deadline exceeded") || strings.Contains(errText, "timeout"):
		return "The request went to the " + service + ", and no answer came"
	case strings.Contains(errText, "eof") || strings.Contains(errText, "reset") || strings.Contains(errText, "closed"):
		return "The request went to the " + service + ", and the connection closed before it answered"
	}
	return "The request went to the " + service + ", which gave no clear answer"
}

// whyNotRetried says why the gateway left op UNKNOWN rather than sending it again.
func whyNotRetried(op *models.Operation, tool *catalog.Tool, known bool) string {
	switch {
	case !known:
		return op.Tool + " is no longer in the catalogue, so nothing is known about whether a retry is safe."
	case !tool.RetrySafe():
		return op.Tool + " does not honour idempotency keys: a retry could carry it out twice."
	case op.Attempts >= tool.Retry.MaxAttempts:
		return fmt.Sprintf("All %d attempts were used, and one of them may have taken effect.", tool.Retry.MaxAttempts)
	}
	return "The gateway could not tell whether it took effect."
}

// reconcileStatus summarises the look-ups of an UNKNOWN operation: "3 look-ups, all HTTP 500;
// next in 28 s".
func reconcileStatus(op *models.Operation, events []models.Event, tool *catalog.Tool, known bool, now time.Time) string {
	if !known || tool.Reconcile == nil {
		return "No look-up is possible: " + op.Tool + " has no reconcile, so only a person can settle it."
	}
	answers := map[string]int{}
	n := 0
	for _, e := range events {
		if e.Type != models.EventReconcileFinished {
			continue
		}
		n++
		answers[probeAnswer(detailMap(e.Detail))]++
	}
	next := ""
	if op.NextProbeAt != nil {
		if d := op.NextProbeAt.Sub(now); d > 0 {
			next = "next in " + views.Age(d)
		} else {
			next = "next one due now"
		}
	}
	if n == 0 {
		return strings.TrimSpace("No look-up yet; " + next + ".")
	}
	s := lookupTally(n, answers)
	told := false
	for a := range answers {
		told = told || telling(a)
	}
	if !told {
		s += ", which told nothing either way"
	}
	if next != "" {
		s += "; " + next
	}
	return s + "."
}

// lookupTally says how n look-ups went, by answer (counted in answers): "3 look-ups, all HTTP
// 500", "1 look-up: not found", "4 look-ups: 3 × HTTP 500, 1 × no answer".
func lookupTally(n int, answers map[string]int) string {
	s := plural(n, "look-up", "look-ups")
	switch {
	case len(answers) == 1 && n == 1:
		return s + ": " + answersTally(answers)
	case len(answers) == 1:
		return s + ", all " + answersTally(answers)
	}
	return s + ": " + answersTally(answers)
}

// answersTally names the look-ups' answers, the most frequent first: "HTTP 500" when all got
// the same, "3 × HTTP 500, 1 × no answer" otherwise.
func answersTally(answers map[string]int) string {
	keys := make([]string, 0, len(answers))
	for a := range answers {
		keys = append(keys, a)
	}
	if len(keys) == 1 {
		return keys[0]
	}
	sort.Slice(keys, func(i, j int) bool {
		return answers[keys[i]] > answers[keys[j]] || (answers[keys[i]] == answers[keys[j]] && keys[i] < keys[j])
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = strconv.Itoa(answers[k]) + " × " + k
	}
	return strings.Join(parts, ", ")
}

// telling reports whether a look-up's answer (lookupAnswer) says anything of whether the
// operation took effect: found, or not found. An error or no answer says nothing either way.
func telling(answer string) bool {
	return answer == "found" || strings.HasPrefix(answer, "not found")
}

// probeAnswer names what one look-up got back: "HTTP 500", "not found yet", "no answer".
func probeAnswer(d map[string]any) string {
	return lookupAnswer(str(d["outcome"]), str(d["downstream_status"]))
}

// lookupAnswer names a look-up's answer by its outcome and the downstream's status.
func lookupAnswer(outcome, status string) string {
	switch outcome {
	case jobs.ProbeFound:
		return "found"
	case jobs.ProbeNotFound:
		return "not found"
	case jobs.ProbeNotSettled:
		return "not found yet (within the settle window)"
	}
	if status != "" && status != "0" {
		return "HTTP " + status
	}
	return "no answer"
}

func succeededOutcome(rec *models.OperationRecord, service string) string {
	for i := len(rec.Events) - 1; i >= 0; i-- {
		e := rec.Events[i]
		if e.ToState == nil || *e.ToState != models.StateSucceeded {
			continue
		}
		switch {
		case e.Type == models.EventReconcileFinished:
			return "Done: a look-up found it in the " + service + "."
		case strings.HasPrefix(e.Actor, "user:"):
			return "Done: " + models.ActorName(e.Actor) + " confirmed it in the " + service + "."
		}
		break
	}
	if lf := lastFinished(rec.Attempts); lf != nil && lf.DownstreamStatus != nil {
		return fmt.Sprintf("Done: the %s answered HTTP %d.", service, *lf.DownstreamStatus)
	}
	return "Done: the " + service + " confirmed it."
}

func failedOutcome(op *models.Operation, last *models.Attempt, service string) string {
	switch deref(op.ErrorClass) {
	case models.ErrorRejectedByReviewer:
		return "Rejected by a reviewer: it was never sent, and never will be."
	case models.ErrorRejected:
		if last != nil {
			return "Rejected by the " + service + ": " + lowerFirst(attemptOutcome(last, service)) + "; it will not be sent again."
		}
	case models.ErrorCancelled:
		return "Cancelled; it will never be sent."
	case models.ErrorPermissionRevoked:
		return "Not sent: the agent's API key was revoked before it ran."
	case models.ErrorRetriesExhausted:
		if last != nil {
			return "Given up after " + plural(op.Attempts, "attempt", "attempts") + "; the last: " + lowerFirst(attemptOutcome(last, service)) + "."
		}
		return "Given up: no attempts left."
	}
	if last != nil {
		return attemptOutcome(last, service) + "; it will not be sent again."
	}
	return "Failed; it will not be sent again."
}

func pendingOutcome(op *models.Operation, tool *catalog.Tool, known bool, now time.Time) string {
	next := "shortly"
	if op.NextAttemptAt != nil && op.NextAttemptAt.After(now) {
		next = "in " + views.Age(op.NextAttemptAt.Sub(now))
	}
	if known {
		return fmt.Sprintf("Waiting to be sent %s: attempt %d of %d.", next, op.Attempts+1, tool.Retry.MaxAttempts)
	}
	return fmt.Sprintf("Waiting to be sent %s: attempt %d.", next, op.Attempts+1)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// policyWhy is what held an operation for a person, from its policy_decided event: the rule's
// reason, or the budget it would pass with what was counted. "" when no policy held it.
func policyWhy(events []models.Event) string {
	if p := policyOf(events); p != nil && p.Decision == models.PolicyRequireApproval {
		var parts []string
		if p.Rule != "" && p.Reason != "" {
			parts = append(parts, p.Reason+" (rule "+p.Rule+")")
		}
		for _, b := range p.Budgets {
			if b.Decision == models.PolicyRequireApproval {
				parts = append(parts, fmt.Sprintf("The budget %s of %s has %d of %d counted; this one adds %d.", b.Name, b.Scope, b.Used, b.Limit, b.Amount))
			}
		}
		return strings.Join(parts, " ")
	}
	return ""
}

// policyOf is what the policies decided of an operation, from its policy_decided event; nil
// when none applied.
func policyOf(events []models.Event) *models.PolicyDecision {
	for _, e := range events {
		if e.Type != models.EventPolicyDecided || e.Detail == nil {
			continue
		}
		var p models.PolicyDecision
		if json.Unmarshal([]byte(*e.Detail), &p) != nil {
			return nil
		}
		return &p
	}
	return nil
}
