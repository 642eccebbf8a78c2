package handlers

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One API key has at most maxResultWaits tasks/result requests waiting at once (issue 47,
// finding 6: 300 parallel waits were accepted); another key is counted apart, and a wait that
// ends gives its place back.
func TestResultWaitsPerKey(t *testing.T) {
	var w waitCounter
	var releases []func()
	for range maxResultWaits {
		release, ok := w.acquire("key_a")
		require.True(t, ok)
		releases = append(releases, release)
	}
	_, ok := w.acquire("key_a")
	assert.False(t, ok, "one wait more than the bound is refused")
	other, ok := w.acquire("key_b")
	assert.True(t, ok, "another key is counted apart")
	other()
	releases[0]()
	release, ok := w.acquire("key_a")
	assert.True(t, ok, "a place given back is taken again")
	release()
	for _, r := range releases[1:] {
		r()
	}
	assert.Empty(t, w.n, "nothing left counted")
}
