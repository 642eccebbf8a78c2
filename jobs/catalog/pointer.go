package catalog

import (
	"errors"
	"fmt"
	"strings"
)

// parsePointer splits an RFC 6901 JSON pointer into its unescaped reference tokens. The empty
// pointer "" is the whole document and has no tokens.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, errors.New(`must start with "/"`)
	}
	tokens := strings.Split(p[1:], "/")
	for i, tok := range tokens {
		for j := 0; j < len(tok); j++ {
			if tok[j] == '~' && (j+1 == len(tok) || (tok[j+1] != '0' && tok[j+1] != '1')) {
				return nil, fmt.Errorf(`"~" must be followed by 0 or 1 in %q`, tok)
			}
		}
		// ~1 first, so "~01" becomes "~1" and not "/" (RFC 6901 §4).
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// escapeToken escapes one reference token for use in a JSON pointer.
func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// pointerOf builds a JSON pointer from unescaped tokens.
func pointerOf(tokens []string) string {
	var sb strings.Builder
	for _, tok := range tokens {
		sb.WriteByte('/')
		sb.WriteString(escapeToken(tok))
	}
	return sb.String()
}

// arrayIndex parses an RFC 6901 array index: decimal digits without a leading zero.
func arrayIndex(tok string, n int) (int, bool) {
	if tok == "" || len(tok) > 9 || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	i := 0
	for j := 0; j < len(tok); j++ {
		if tok[j] < '0' || tok[j] > '9' {
			return 0, false
		}
		i = i*10 + int(tok[j]-'0')
	}
	return i, i < n
}
