package catalog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFunctionNameTakesEveryProvidersPattern: a tool's listed name matches what OpenAI and
// Anthropic take, dots written "__", a longer name shortened with a hash that tells it apart.
func TestFunctionNameTakesEveryProvidersPattern(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("stripe.", 12) + "post_customers"
	for name, want := range map[string]string{
		"tickets.create": "tickets__create",
		"a-b_c":          "a-b_c",
	} {
		got := (&Tool{Name: name}).FunctionName()
		assert.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, got)
		assert.Equal(t, want, got)
	}
	short := (&Tool{Name: long}).FunctionName()
	assert.Len(t, short, 64, "55 characters, _ and 8 hex digits")
	assert.Equal(t, strings.ReplaceAll(long, ".", "__")[:55]+"_", short[:56])
	assert.NotEqual(t, short, (&Tool{Name: long + "x"}).FunctionName(), "the hash tells long names apart")
}
