package views

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgate/idemgate/problems"
)

func TestEveryProblemHasAnExampleDetail(t *testing.T) {
	t.Parallel()
	for _, pt := range problems.All() {
		assert.NotEmpty(t, exampleDetails[pt.Slug], pt.Slug)
	}
	for slug := range exampleDetails {
		_, ok := problems.Lookup(slug)
		assert.True(t, ok, "example for unknown problem %q", slug)
	}
	for slug := range exampleStates {
		_, ok := problems.Lookup(slug)
		assert.True(t, ok, "example state for unknown problem %q", slug)
	}
}

func TestParagraphs(t *testing.T) {
	t.Parallel()
	got := paragraphs("Send `Idempotency-Key: abc` now.\n\n`Poll` it.")
	assert.Equal(t, [][]segment{
		{{Text: "Send "}, {Text: "Idempotency-Key: abc", Code: true}, {Text: " now."}},
		{{Text: "Poll", Code: true}, {Text: " it."}},
	}, got)
	assert.Empty(t, paragraphs("  \n\n "))
}
