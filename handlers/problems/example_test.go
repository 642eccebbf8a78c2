package problems

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEveryProblemHasAnExampleDetail(t *testing.T) {
	t.Parallel()
	for _, pt := range All() {
		assert.NotEmpty(t, exampleDetails[pt.Slug], pt.Slug)
	}
	for slug := range exampleDetails {
		_, ok := Lookup(slug)
		assert.True(t, ok, "example for unknown problem %q", slug)
	}
	for slug := range exampleStates {
		_, ok := Lookup(slug)
		assert.True(t, ok, "example state for unknown problem %q", slug)
	}
}
