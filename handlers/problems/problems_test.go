package problems_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/handlers/problems"
)

// spec lists every problem type docs/API.md and the brief name, with the status each is answered with.
var spec = map[string]int{
	problems.Unauthenticated:           401,
	problems.IdempotencyKeyMissing:     400,
	problems.IdempotencyKeyInvalid:     400,
	problems.IdempotencyKeyReserved:    422,
	problems.BodyTooLarge:              413,
	problems.MalformedBody:             400,
	problems.UnknownTool:               404,
	problems.ToolForbidden:             403,
	problems.PolicyDenied:              403,
	problems.InvalidParams:             400,
	problems.OperationInProgress:       409,
	problems.OperationUncertain:        409,
	problems.OperationAwaitingApproval: 409,
	problems.IdempotencyKeyMismatch:    422,
	problems.IdempotencyKeyExpired:     410,
	problems.ConnectionNotConfigured:   422, // docs/TOOLS.md
	problems.LedgerUnavailable:         503,
	problems.RateLimited:               429,
	problems.NotFound:                  404,
	problems.NotCancellable:            409,
	problems.NotCompensable:            409,
	problems.UnsupportedFormat:         400,
	problems.InvalidQuery:              400,
	problems.UnsupportedMediaType:      415,
	problems.OriginNotAllowed:          403,
	problems.Internal:                  500,
}

func TestEverySpecSlugHasItsStatus(t *testing.T) {
	t.Parallel()
	for slug, status := range spec {
		t.Run(slug, func(t *testing.T) {
			t.Parallel()
			pt, ok := problems.Lookup(slug)
			require.True(t, ok, "missing problem type")
			assert.Equal(t, slug, pt.Slug)
			assert.Equal(t, status, pt.Status)
		})
	}
	assert.Len(t, problems.All(), len(spec), "the table holds a problem type the spec does not name")
}

func TestTableIsWellFormed(t *testing.T) {
	t.Parallel()
	slugPattern := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	seen := map[string]bool{}
	for _, pt := range problems.All() {
		t.Run(pt.Slug, func(t *testing.T) {
			assert.Regexp(t, slugPattern, pt.Slug)
			assert.False(t, seen[pt.Slug], "duplicate slug")
			seen[pt.Slug] = true

			assert.GreaterOrEqual(t, pt.Status, 400, "a problem is an error status")
			assert.LessOrEqual(t, pt.Status, 599, "a problem is an error status")
			assert.NotEmpty(t, http.StatusText(pt.Status), "unknown HTTP status")

			assert.NotEmpty(t, strings.TrimSpace(pt.Title))
			assert.LessOrEqual(t, len(pt.Title), 50, "titles stay short")
			for name, text := range map[string]string{"Explanation": pt.Explanation, "WhatToDo": pt.WhatToDo} {
				assert.NotEmpty(t, strings.TrimSpace(text), name)
				assert.Zero(t, strings.Count(text, "`")%2, "%s has an unbalanced backtick", name)
				assert.True(t, strings.HasSuffix(text, "."), "%s ends with a full sentence", name)
			}
			assert.Equal(t, "/problems/"+pt.Slug, pt.URI())
		})
	}
}

func TestOperationProblemsForbidNewKeys(t *testing.T) {
	t.Parallel()
	// The operation-* problems are where a careless agent does the most harm: each must tell
	// the developer not to invent a new key and to poll the operation instead.
	for _, slug := range []string{problems.OperationInProgress, problems.OperationUncertain, problems.OperationAwaitingApproval} {
		pt, ok := problems.Lookup(slug)
		require.True(t, ok)
		assert.Contains(t, pt.WhatToDo, "new key", slug)
		assert.Contains(t, pt.WhatToDo, "Poll", slug)
		assert.Contains(t, pt.Explanation, "safe_to_retry_with_new_key: false", slug)
	}
}

func TestLookupUnknown(t *testing.T) {
	t.Parallel()
	_, ok := problems.Lookup("no-such-problem")
	assert.False(t, ok)
	_, ok = problems.Lookup("")
	assert.False(t, ok)
}

func TestAllIsStableAndOwnedByCaller(t *testing.T) {
	t.Parallel()
	first := problems.All()
	require.NotEmpty(t, first)
	assert.Equal(t, problems.Unauthenticated, first[0].Slug, "ordered as a request meets the checks")
	first[0].Title = "changed"
	second := problems.All()
	assert.NotEqual(t, "changed", second[0].Title, "All must return a copy")
	for i := range second {
		assert.Equal(t, second[i].Slug, problems.All()[i].Slug)
	}
}
