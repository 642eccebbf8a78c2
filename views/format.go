package views

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// NewTime formats t for pages, with its age relative to now ("" when now is zero or t is in
// the future). Times are shown in UTC, the ledger's zone, so that everyone reading the same
// page sees the same clock.
func NewTime(t, now time.Time) Time {
	u := t.UTC()
	out := Time{Text: u.Format("2006-01-02 15:04:05 UTC"), ISO: u.Format(time.RFC3339)}
	if !now.IsZero() && !now.Before(t) {
		out.Age = Age(now.Sub(t)) + " ago"
	}
	return out
}

// NewPreciseTime formats t to the millisecond, for timelines whose events often share a
// second. The zone is left out: such tables say "UTC" in their heading.
func NewPreciseTime(t time.Time) Time {
	u := t.UTC()
	return Time{Text: u.Format("2006-01-02 15:04:05.000"), ISO: u.Format(time.RFC3339Nano)}
}

// Age spells a duration as people read it: "12 s", "4 min", "2 h 5 min", "3 d 4 h".
func Age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 24*time.Hour:
		h := int(d.Hours())
		if m := int(d.Minutes()) % 60; m > 0 {
			return fmt.Sprintf("%d h %d min", h, m)
		}
		return fmt.Sprintf("%d h", h)
	}
	days := int(d.Hours()) / 24
	if h := int(d.Hours()) % 24; h > 0 {
		return fmt.Sprintf("%d d %d h", days, h)
	}
	return fmt.Sprintf("%d d", days)
}

func itoa(i int) string { return strconv.Itoa(i) }

// orDash shows "—" for an empty value, so an empty cell reads as "none", not as missing.
func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// timelineIcons are the symbols of the timeline's kinds; they repeat what the colour says.
var timelineIcons = map[string]string{"created": "●", "attempt-ok": "✓", "attempt-failed": "✕", "attempt-unclear": "?",
	"attempt-running": "…", "probe": "↻", "probe-settled": "↻", "escalated": "⚑", "decision": "✎", "state": "→", "link": "⇄",
	"repeat": "↺", "refused": "⊘"}

func timelineIcon(kind string) string {
	if s, ok := timelineIcons[kind]; ok {
		return s
	}
	return "•"
}

// countLabel reads a navigation count aloud: "3 open".
func countLabel(n int64) string { return strconv.FormatInt(n, 10) + " open" }

// justificationFold is how long an agent's reason may be before the operation page folds it
// to its first lines (docs/CONSOLE.md): about three lines on a phone.
const justificationFold = 140

// justificationLong says whether the operation page folds the reason s.
func justificationLong(s string) bool {
	return utf8.RuneCountInString(s) > justificationFold || strings.Count(s, "\n") > 2
}

// grouped writes n with thousands separators: "2,000".
func grouped(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// minuteText is t's text to the minute: "2026-12-07 23:33 UTC".
func minuteText(t Time) string {
	const full = "2006-01-02 15:04:05 UTC"
	if len(t.Text) == len(full) && t.Text[16] == ':' {
		return t.Text[:16] + t.Text[19:]
	}
	return t.Text
}

// rowTimeTitle is what a list row's time says on hover: to the second, and its age.
func rowTimeTitle(t Time) string {
	if t.Age == "" {
		return t.Text
	}
	return t.Text + ", " + t.Age
}

// phrases splits a part of an evidence line where it may wrap, before a parenthesis, so that
// a cell wraps "16 look-ups told nothing either way" and "(HTTP 500)" apart when it must, but
// never "HTTP" from "500".
func phrases(part string) []string {
	if i := strings.Index(part, " ("); i > 0 {
		return []string{part[:i], part[i+1:]}
	}
	return []string{part}
}
