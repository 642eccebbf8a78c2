package catalog

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// review.lookalike_on names params as sensitive_params does (names or JSON pointers);
// lookalike_window defaults to a day; an empty list is refused rather than read as every param.
func TestLookalikeOnLoads(t *testing.T) {
	cat, err := Load([]byte(strings.Replace(revealTools, "    http: {url:", "    review: {lookalike_on: [card_number, /amount_cents, currency], lookalike_window: 2h}\n    http: {url:", 1)))
	require.NoError(t, err)
	tool, _ := cat.Get("payouts.card")
	assert.Equal(t, []string{"/card_number", "/amount_cents", "/currency"}, tool.Review.LookalikeOn)
	assert.Equal(t, 2*time.Hour, tool.Review.LookalikeWindow)

	cat, err = Load([]byte(revealTools))
	require.NoError(t, err)
	tool, _ = cat.Get("payouts.card")
	assert.Nil(t, tool.Review.LookalikeOn, "every param")
	assert.Equal(t, 24*time.Hour, tool.Review.LookalikeWindow)

	_, err = Load([]byte(strings.Replace(revealTools, "    http: {url:", "    review: {lookalike_on: []}\n    http: {url:", 1)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "review.lookalike_on: empty")
}
