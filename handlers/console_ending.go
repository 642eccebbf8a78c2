package handlers

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
)

// The second approver of a payout checks where the money goes. The console names the last four
// digits of the account or card where the operation's own record gives them: a member the
// downstream's answer or a param calls last4 (Stripe's cards and bank accounts), or the end of
// an IBAN or account number param. Only the masked params and the recorded (scrubbed) result
// are read, so a sensitive param (a card number) never shows its digits here: masked, it has
// none.

// endingNames are members whose value is the last digits themselves.
var endingNames = []string{"last4", "last_four", "last4_digits"}

// accountNames are parts of the names of members whose value is a whole account number.
var accountNames = []string{"iban", "account_number", "bank_account"}

// endingOf returns the last four digits of the account or card in the first of docs (JSON
// objects) that gives one, or "".
func endingOf(docs ...json.RawMessage) string {
	for _, doc := range docs {
		var v any
		if json.Unmarshal(doc, &v) != nil {
			continue
		}
		if d := findEnding(v, 0); d != "" {
			return d
		}
	}
	return ""
}

// findEnding walks v, members in name order so that the answer never depends on the map's
// order, a few levels deep (a result's card is one or two down).
func findEnding(v any, depth int) string {
	if depth > 4 {
		return ""
	}
	switch t := v.(type) {
	case map[string]any:
		for _, name := range slices.Sorted(maps.Keys(t)) {
			if d := endingOfMember(strings.ToLower(name), t[name]); d != "" {
				return d
			}
		}
		for _, name := range slices.Sorted(maps.Keys(t)) {
			if d := findEnding(t[name], depth+1); d != "" {
				return d
			}
		}
	case []any:
		for _, e := range t {
			if d := findEnding(e, depth+1); d != "" {
				return d
			}
		}
	}
	return ""
}

func endingOfMember(name string, v any) string {
	s, ok := v.(string)
	if !ok {
		if f, isNum := v.(float64); isNum && f >= 0 && f < 10000 && f == float64(int(f)) {
			s = fmt.Sprintf("%04d", int(f)) // a last4 of 42 is 0042
		} else {
			return ""
		}
	}
	digits := lastDigits(s, 4)
	switch {
	case digits == "":
		return ""
	case slices.Contains(endingNames, name) || strings.HasSuffix(name, "_last4"):
		return digits
	}
	for _, part := range accountNames {
		if strings.Contains(name, part) && countDigits(s) >= 8 {
			return digits
		}
	}
	return ""
}

// lastDigits is the last n digits of s, spaces and separators left out, or "" when s has fewer.
func lastDigits(s string, n int) string {
	var out []rune
	for _, r := range slices.Backward([]rune(s)) {
		if unicode.IsDigit(r) {
			out = append(out, r)
			if len(out) == n {
				slices.Reverse(out)
				return string(out)
			}
		}
	}
	return ""
}

func countDigits(s string) int {
	n := 0
	for _, r := range s {
		if unicode.IsDigit(r) {
			n++
		}
	}
	return n
}
