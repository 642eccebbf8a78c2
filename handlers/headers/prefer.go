package headers

import (
	"strconv"
	"strings"
	"time"
)

const (
	// DefaultWait is how long a request waits for its operation to become
	// terminal when the client expresses no preference.
	DefaultWait = 10 * time.Second
	// MaxWait is the longest wait a client may ask for; longer requests are
	// clamped to it.
	MaxWait = 60 * time.Second
)

// Prefer is what a request's Prefer headers ask of the gateway.
type Prefer struct {
	// Wait is how long the request may wait for its operation to become
	// terminal, between 0 and MaxWait.
	Wait time.Duration
	// Applied is the value of the Preference-Applied response header:
	// "respond-async", "wait=N" with the N actually used, or "" when the
	// client expressed neither preference (then send no header).
	Applied string
}

// ParsePrefer interprets all of a request's Prefer header values (RFC 7240).
//
// Each value is a comma-separated list of preferences, each a token with an
// optional =value (a token or a quoted string) and optional ;parameters,
// which are ignored. Preference names are case-insensitive. As RFC 7240
// asks, only the first occurrence of a preference counts.
//
// respond-async means a wait of 0 and wins over wait. wait=N asks for N
// seconds, clamped to MaxWait; a value that is not a non-negative decimal
// integer is ignored. With neither, Wait is DefaultWait and Applied is "".
// Unknown and malformed preferences are ignored.
func ParsePrefer(values []string) Prefer {
	var (
		async, sawAsync, sawWait bool
		wait                     time.Duration
		waitOK                   bool
	)
	for _, v := range values {
		for len(v) > 0 {
			var pref string
			pref, v = nextElement(v)
			name, value, hasValue := preference(pref)
			switch {
			case strings.EqualFold(name, "respond-async"):
				if !sawAsync {
					sawAsync, async = true, true
				}
			case strings.EqualFold(name, "wait"):
				if !sawWait {
					sawWait = true
					wait, waitOK = parseWait(value, hasValue)
				}
			}
		}
	}
	switch {
	case async:
		return Prefer{Wait: 0, Applied: "respond-async"}
	case waitOK:
		return Prefer{Wait: wait, Applied: "wait=" + strconv.Itoa(int(wait/time.Second))}
	}
	return Prefer{Wait: DefaultWait}
}

// parseWait interprets the value of a wait preference.
func parseWait(value string, hasValue bool) (time.Duration, bool) {
	if !hasValue || value == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n <= int(MaxWait/time.Second) {
			n = n*10 + int(c-'0')
		}
	}
	return time.Duration(min(n, int(MaxWait/time.Second))) * time.Second, true
}

// nextElement splits the first comma-separated element off s, respecting
// quoted strings, and returns it and the rest after the comma.
func nextElement(s string) (elem, rest string) {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == ',':
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// preference parses one preference, token [ BWS "=" BWS word ] followed by
// any parameters, and returns its name and value. The name is "" if the
// element is not a preference.
func preference(s string) (name, value string, hasValue bool) {
	s = trimOWS(s)
	i := 0
	for i < len(s) && isTChar(s[i]) {
		i++
	}
	name, s = s[:i], trimOWS(s[i:])
	if name == "" {
		return "", "", false
	}
	if s == "" || s[0] == ';' {
		return name, "", false
	}
	if s[0] != '=' {
		return "", "", false // not token [= word]
	}
	s = trimOWS(s[1:])
	if s != "" && s[0] == '"' {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			switch c := s[i]; c {
			case '\\':
				if i+1 < len(s) {
					i++
					b.WriteByte(s[i])
				}
			case '"':
				if rest := trimOWS(s[i+1:]); rest != "" && rest[0] != ';' {
					return "", "", false
				}
				return name, b.String(), true
			default:
				b.WriteByte(c)
			}
		}
		return "", "", false // unterminated quoted string
	}
	i = 0
	for i < len(s) && isTChar(s[i]) {
		i++
	}
	value = s[:i]
	if rest := trimOWS(s[i:]); rest != "" && rest[0] != ';' {
		return "", "", false
	}
	return name, value, true
}

// isTChar reports whether c may appear in an RFC 9110 token.
func isTChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
