package handlers

import (
	"fmt"
	"strings"
	"unicode"
)

// visible spells out the characters that make what a reviewer reads differ from what is
// stored: bidirectional overrides, embeddings, isolates and marks (which reorder the text
// around them: "refund 1,000" can show as "refund 000,1") and control characters other than a
// line break or tab (which terminals and some fonts hide). Each becomes a visible ⟨U+XXXX⟩,
// so agent-written text (a justification, a summary built from params) shows what it holds.
func visible(s string) string {
	if !strings.ContainsFunc(s, hidden) {
		return s
	}
	var sb strings.Builder
	for _, r := range s {
		if hidden(r) {
			fmt.Fprintf(&sb, "⟨U+%04X⟩", r)
			continue
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

func hidden(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case unicode.IsControl(r):
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
		return true
	}
	return unicode.Is(unicode.Cf, r) && r != 0x200D // format characters, but the emoji joiner
}
