package views

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The key shown on each decision is the one console.js opens it with.
func TestDecisionKeysMatchTheScript(t *testing.T) {
	js, err := os.ReadFile("../static/assets/console.js")
	require.NoError(t, err)
	for action, key := range decisionKeys {
		assert.True(t, strings.Contains(string(js), key+`: "`+action+`"`), "console.js opens %s with %q", action, key)
	}
}
