package handlers

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/models"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
)

// TestAnswerForEveryLedgerCode pins the one table: what the API, the console's error page and
// the console's form notices answer for each ledger code.
func TestAnswerForEveryLedgerCode(t *testing.T) {
	t.Parallel()
	const said = "ledger says why"
	tests := []struct {
		code    models.Code
		slug    string // the API's problem
		status  int    // the console's
		message string // the error page's
		refusal bool   // a form shows it as a notice
	}{
		{models.CodeNotFound, problems.NotFound, http.StatusNotFound, "", true},
		{models.CodeInvalid, problems.InvalidQuery, http.StatusBadRequest, said, true},
		{models.CodeConflict, problems.Internal, http.StatusConflict, said, true},
		{models.CodeStale, problems.Internal, http.StatusConflict, said, true},
		{models.CodeThrottled, problems.Internal, http.StatusTooManyRequests, "", false},
		{models.CodeKeyMismatch, problems.IdempotencyKeyMismatch, http.StatusUnprocessableEntity, said, true},
		{models.CodeKeyExpired, problems.IdempotencyKeyExpired, http.StatusGone, said, true},
		{models.CodeConnectionNotConfigured, problems.ConnectionNotConfigured, http.StatusUnprocessableEntity, said, true},
		{models.CodePolicyDenied, problems.PolicyDenied, http.StatusForbidden, said, true},
		{models.CodeNotCancellable, problems.NotCancellable, http.StatusConflict, said, true},
		{models.CodeNotCompensable, problems.NotCompensable, http.StatusConflict, said, true},
		{models.CodeUnavailable, problems.LedgerUnavailable, http.StatusServiceUnavailable,
			"The ledger cannot be reached right now; nothing was changed. Try again in a moment.", false},
	}
	assert.Len(t, codeAnswers, len(tests), "every code in the table is pinned here")
	for _, tc := range tests {
		t.Run(string(tc.code), func(t *testing.T) {
			err := fmt.Errorf("handler: %w", &models.Error{Code: tc.code, Message: said, Op: testOp})
			a := AnswerFor(err)
			assert.Equal(t, tc.slug, a.Problem.Slug)
			assert.Equal(t, tc.status, a.Status)
			assert.Equal(t, tc.message, a.Message)
			assert.Equal(t, tc.refusal, a.Refusal)
			assert.ErrorIs(t, a.Problem, err, "the cause is kept for the logs")
			if tc.slug != problems.Internal {
				// The API and the console answer the same status; only errors the API never
				// meets are internal to it and answered for what they are in the console.
				ty, _ := problems.Lookup(tc.slug)
				assert.Equal(t, ty.Status, a.Status, "API and console agree")
			} else {
				assert.NotContains(t, a.Problem.Detail, said, "an internal error tells an agent nothing of its cause")
			}
		})
	}
}

func TestAnswerForFrameworkErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		err     error
		slug    string
		status  int
		message string
	}{
		{"404 route", echo.ErrNotFound, problems.NotFound, http.StatusNotFound, ""},
		{"405 method", echo.ErrMethodNotAllowed, problems.NotFound, http.StatusMethodNotAllowed, ""},
		{"413 body", echo.ErrStatusRequestEntityTooLarge, problems.BodyTooLarge, http.StatusRequestEntityTooLarge, ""},
		{"a message for people", echo.NewHTTPError(http.StatusForbidden, "Only admins can use the admin pages."),
			problems.Internal, http.StatusForbidden, "Only admins can use the admin pages."},
		{"anything else", fmt.Errorf("boom"), problems.Internal, http.StatusInternalServerError, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := AnswerFor(tc.err)
			assert.Equal(t, tc.slug, a.Problem.Slug)
			assert.Equal(t, tc.status, a.Status)
			assert.Equal(t, tc.message, a.Message)
			assert.False(t, a.Refusal)
		})
	}
}

func TestAnswerForAHandlersProblem(t *testing.T) {
	t.Parallel()
	p := &Problem{Slug: problems.RateLimited, Detail: "slow down", RetryAfter: 1}
	a := AnswerFor(fmt.Errorf("wrapped: %w", p))
	assert.Same(t, p, a.Problem)
	assert.Equal(t, http.StatusTooManyRequests, a.Status)
	assert.False(t, a.Refusal)
}
