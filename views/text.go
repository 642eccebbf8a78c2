package views

import "strings"

// segment is a run of text within a paragraph, shown as code when Code is set.
type segment struct {
	Text string
	Code bool
}

// paragraphs splits text written in the problems table's small markup into paragraphs (separated
// by a blank line) of segments: text between backticks is code. Everything stays plain text and
// is escaped when rendered; the markup only chooses which element wraps it.
func paragraphs(text string) [][]segment {
	var out [][]segment
	for _, para := range strings.Split(text, "\n\n") {
		para = strings.TrimSpace(para)
		if para == "" {
			continue
		}
		var segs []segment
		for i, part := range strings.Split(para, "`") {
			if part == "" {
				continue
			}
			segs = append(segs, segment{Text: part, Code: i%2 == 1})
		}
		out = append(out, segs)
	}
	return out
}

// proseWords splits a sentence that may name identifiers ("Post "http://…/acme-operations":
// context deadline exceeded") into its words, marking those that look like identifiers (a
// URL, an email, a key, a dotted or hyphenated name): textWords renders those whole on one
// line, so that a line never breaks inside one, while the sentence wraps between words.
func proseWords(s string) []segment {
	words := strings.Split(s, " ")
	out := make([]segment, 0, len(words))
	for _, w := range words {
		core := strings.TrimRight(w, ".,;:!?)”\"'")
		out = append(out, segment{Text: w, Code: strings.ContainsAny(core, "/.@_:-")})
	}
	return out
}
