package catalog

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// A sensitive param may declare a safe form for people (docs/TOOLS.md): the console,
// notifications and exports show it ("•••• 4242") where the API, /mcp, logs and traces keep
// "***". The forms are written so that a form of a form is itself: the ledger keeps the
// people's forms in place of the clear values when it seals params, and reading them again
// changes nothing, so no reader needs to know whether it holds clear or stored values.

// The safe forms a sensitive param may declare.
const (
	RevealNone        = "none"        // "***", as everywhere else
	RevealLast4       = "last4"       // "•••• 4242"
	RevealFirst6Last4 = "first6last4" // "424242 •••• 4242"
	RevealDomain      = "domain"      // "•••@example.com"
)

// hidden stands for what a safe form leaves out.
const hidden = "••••"

// rawSensitive is one sensitive_params entry: a name (or JSON pointer), written alone or as a
// mapping with its reveal.
type rawSensitive struct {
	Name   string `yaml:"name"`
	Reveal string `yaml:"reveal"`
}

// revealForm checks a reveal as written; "" is none.
func revealForm(s string) (string, error) {
	switch s {
	case "":
		return RevealNone, nil
	case RevealNone, RevealLast4, RevealFirst6Last4, RevealDomain:
		return s, nil
	}
	return "", fmt.Errorf("invalid reveal %q: want last4, first6last4, domain or none", s)
}

// Reveals returns the safe form declared for the sensitive param at ptr: RevealNone unless
// the tools file says otherwise.
func (t *Tool) Reveals(ptr string) string {
	if f, ok := t.reveal[ptr]; ok {
		return f
	}
	return RevealNone
}

// RevealValue is the safe form of one sensitive value: Masked for RevealNone, for what is not
// a string, and for a string too short to show part of without showing most of it.
func RevealValue(form string, v any) string {
	s, ok := v.(string)
	if !ok {
		return Masked
	}
	switch form {
	case RevealLast4:
		d := compact(s)
		if utf8.RuneCountInString(d) < 8 { // at least as much hidden as shown
			return Masked
		}
		return hidden + " " + lastRunes(d, 4)
	case RevealFirst6Last4:
		d := compact(s)
		if utf8.RuneCountInString(d) < 14 {
			return Masked
		}
		return firstRunes(d, 6) + " " + hidden + " " + lastRunes(d, 4)
	case RevealDomain:
		at := strings.LastIndexByte(s, '@')
		if at <= 0 || at == len(s)-1 {
			return Masked
		}
		return "•••@" + s[at+1:]
	}
	return Masked
}

// compact drops the spaces and dashes people write numbers with, and the hidden marks of a
// safe form, so that a safe form's form is itself.
func compact(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' {
			return -1
		}
		return r
	}, s)
}

func lastRunes(s string, n int) string {
	r := []rune(s)
	return string(r[len(r)-n:])
}

func firstRunes(s string, n int) string {
	return string([]rune(s)[:n])
}

// Reveal returns a deep copy of params in which every sensitive value holds its safe form for
// people (Masked where the tool declares none). params is not modified.
func (t *Tool) Reveal(params any) any {
	out := deepCopy(params)
	for _, p := range t.SensitiveParams {
		ptr, err := sensitivePointer(p)
		if err != nil {
			continue
		}
		tokens, _ := parsePointer(ptr)
		form := t.Reveals(ptr)
		replaceAt(out, tokens, func(v any) any { return RevealValue(form, v) })
	}
	return out
}

// RevealCanonical is MaskCanonical for people: the console, notifications and exports.
func (t *Tool) RevealCanonical(canonical []byte) ([]byte, error) {
	if len(t.SensitiveParams) == 0 {
		return canonical, nil
	}
	v, err := decodeJSON(canonical)
	if err != nil {
		return nil, fmt.Errorf("reveal params: %w", err)
	}
	out, err := encodeJSON(t.Reveal(v))
	if err != nil {
		return nil, fmt.Errorf("reveal params: %w", err)
	}
	return out, nil
}

// replaceAt replaces the value at tokens in v, when it exists, with f of it.
func replaceAt(v any, tokens []string, f func(any) any) {
	for i, tok := range tokens {
		last := i == len(tokens)-1
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return
			}
			if last {
				c[tok] = f(next)
				return
			}
			v = next
		case []any:
			idx, ok := arrayIndex(tok, len(c))
			if !ok {
				return
			}
			if last {
				c[idx] = f(c[idx])
				return
			}
			v = c[idx]
		default:
			return
		}
	}
}
