package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParsePublicURL: --public-url takes the console's absolute http(s) address, without the
// trailing slash; anything a link could not be made under is refused at start.
func TestParsePublicURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                                    "",
		"https://idemgate.example.com":        "https://idemgate.example.com",
		"https://idemgate.example.com/":       "https://idemgate.example.com",
		"http://10.0.0.5:8080/console/":       "http://10.0.0.5:8080/console",
		"https://review.example.com/idemgate": "https://review.example.com/idemgate",
	} {
		got, err := parsePublicURL(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"idemgate.example.com", "/operations", "ftp://example.com", "https://user:pw@example.com",
		"https://example.com/?a=1", "https://example.com/#x", "https://"} {
		_, err := parsePublicURL(bad)
		assert.Error(t, err, bad)
	}
}
