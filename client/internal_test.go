package client

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSentinelsCoverEveryProblemType: each problem type the gateway has, and only those, has
// a sentinel that its problems match.
func TestSentinelsCoverEveryProblemType(t *testing.T) {
	t.Parallel()
	all := problems.All()
	require.Len(t, problemTypes, len(all))
	for i, pt := range all {
		p := &Problem{Type: pt.URI(), Slug: pt.Slug, Status: pt.Status}
		assert.ErrorIs(t, p, problemTypes[i], pt.Slug)
		for j, other := range problemTypes {
			if j != i {
				assert.False(t, errors.Is(p, other), "%s matches %v", pt.Slug, other)
			}
		}
	}
}

// TestBackoff: full jitter under a ceiling that doubles up to the maximum, never below the
// gateway's Retry-After.
func TestBackoff(t *testing.T) {
	t.Parallel()
	var asked []int64
	c := &Client{initial: 100 * time.Millisecond, max: time.Second,
		jitter: func(n int64) int64 { asked = append(asked, n); return n - 1 }}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for try, w := range want {
		assert.Equal(t, w*time.Millisecond, c.backoff(try, 0), "try %d", try)
	}
	assert.Equal(t, int64(100*time.Millisecond)+1, asked[0], "jitter covers [0, ceiling]")
	assert.Equal(t, 3*time.Second, c.backoff(0, 3*time.Second), "Retry-After is a floor")
	assert.Equal(t, time.Second, c.backoff(1000, 0), "no overflow")

	c.jitter = func(int64) int64 { return 0 }
	assert.Equal(t, time.Duration(0), c.backoff(3, 0), "full jitter reaches zero")
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	assert.Equal(t, 3*time.Second, parseRetryAfter("3", now))
	assert.Equal(t, 90*time.Second, parseRetryAfter(now.Add(90*time.Second).Format(http.TimeFormat), now))
	for _, v := range []string{"", "soon", "-1", "0", now.Add(-time.Minute).Format(http.TimeFormat)} {
		assert.Zero(t, parseRetryAfter(v, now), v)
	}
}
