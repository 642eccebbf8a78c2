package handlers

import "testing"

func TestVisible(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"Refund order 1042, as the customer asked.": "Refund order 1042, as the customer asked.",
		"line one\nline two\tend":                   "line one\nline two\tend",
		"refund \u202e0001 EUR":                     "refund ⟨U+202E⟩0001 EUR",
		"a\u2066b\u2069c":                           "a⟨U+2066⟩b⟨U+2069⟩c",
		"mark\u200fhere":                            "mark⟨U+200F⟩here",
		"bell\x07 and escape\x1b[2J":                "bell⟨U+0007⟩ and escape⟨U+001B⟩[2J",
		"zero\u200bwidth":                           "zero⟨U+200B⟩width",
		"family 👨\u200d👩\u200d👧":                    "family 👨\u200d👩\u200d👧",
		"Grüße aus Köln, مرحبا":                     "Grüße aus Köln, مرحبا",
	}
	for in, want := range cases {
		if got := visible(in); got != want {
			t.Errorf("visible(%q) = %q, want %q", in, got, want)
		}
	}
}
