package handlers

import (
	"fmt"
	"strings"

	"github.com/idemgate/idemgate/models"
)

// evidenceLine says in a few words what an operation's attempts and look-ups saw, for a row of
// a list (the queue, a bulk decision): "14 look-ups told nothing either way (HTTP 500) · 1
// attempt · timeout".
// Rows that differ in what happened then read differently; "" when nothing was tried. The
// look-ups come first: they are the latest word, and a row cut short keeps its start.
func evidenceLine(ev models.Evidence) string { return strings.Join(evidenceParts(ev), " · ") }

// evidenceParts are evidenceLine's parts, for a cell that may wrap between them but not
// inside one ("HTTP" and "504" on two lines).
func evidenceParts(ev models.Evidence) []string {
	var parts []string
	if len(ev.Lookups) > 0 {
		n, answers := 0, map[string]int{}
		for _, c := range ev.Lookups {
			n += c.N
			answers[lookupAnswer(c.Outcome, c.Status)] += c.N
		}
		parts = append(parts, lookupsSaw(n, answers))
	}
	if ev.Attempts > 0 {
		parts = append(parts, plural(ev.Attempts, "attempt", "attempts"))
	}
	if seen := attemptSeen(ev); seen != "" {
		parts = append(parts, seen)
	}
	return parts
}

// lookupsSaw says what n look-ups saw, by answer (counted in answers): look-ups that all
// failed say they told nothing either way, their answers after ("14 look-ups told nothing
// either way (HTTP 500)"), lest "all HTTP 500" read as a verdict; others as lookupTally ("3
// look-ups: 2 × HTTP 500, 1 × not found").
func lookupsSaw(n int, answers map[string]int) string {
	for a := range answers {
		if telling(a) {
			return lookupTally(n, answers)
		}
	}
	return plural(n, "look-up", "look-ups") + " told nothing either way (" + answersTally(answers) + ")"
}

// attemptSeen names, in a word or two, what the last finished attempt saw: the status it got,
// or why it got none. The same reading as the operation page's attemptOutcome, shortened.
func attemptSeen(ev models.Evidence) string {
	if ev.LastClass == nil {
		return ""
	}
	errText := strings.ToLower(deref(ev.LastError))
	switch {
	case ev.LastStatus != nil && *ev.LastStatus != 0:
		return fmt.Sprintf("HTTP %d", *ev.LastStatus)
	case *ev.LastClass == models.ErrorNotSent:
		return "not reached"
	case strings.Contains(errText, "lease expired"):
		return "worker stopped"
	case strings.Contains(errText, "deadline exceeded") || strings.Contains(errText, "timeout"):
		return "timeout"
	case strings.Contains(errText, "eof") || strings.Contains(errText, "reset") || strings.Contains(errText, "closed"):
		return "connection closed"
	}
	return "no clear answer"
}
