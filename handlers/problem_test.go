package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/models"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testOp is an operation a problem can be about.
var testOp = &models.Operation{ID: "op_01JD7X4T6V8Q0W9M3K5N2P1R8S", State: models.StateUnknown}

func TestProblemFromLedgerCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code       models.Code
		slug       string
		carriesOp  bool
		retryAfter int
	}{
		{models.CodeNotFound, problems.NotFound, false, 0},
		{models.CodeKeyMismatch, problems.IdempotencyKeyMismatch, true, 0},
		{models.CodeKeyExpired, problems.IdempotencyKeyExpired, true, 0},
		{models.CodeNotCancellable, problems.NotCancellable, true, 0},
		{models.CodeNotCompensable, problems.NotCompensable, true, 0},
		{models.CodeInvalid, problems.InvalidQuery, false, 0},
		{models.CodeUnavailable, problems.LedgerUnavailable, false, ledgerRetryAfter},
		// Neither reaches the API from a correct handler: conflicts come from admin commands,
		// and a lost compare-and-set is turned into its own answer by the ledger. Should one
		// escape, it is an internal error, not a guess.
		{models.CodeConflict, problems.Internal, false, 0},
		{models.CodeStale, problems.Internal, false, 0},
	}
	for _, tc := range tests {
		t.Run(string(tc.code), func(t *testing.T) {
			cause := &models.Error{Code: tc.code, Message: "ledger says " + string(tc.code), Op: testOp}
			for name, err := range map[string]error{
				"bare":    cause,
				"wrapped": fmt.Errorf("handler: %w", cause),
			} {
				p := ProblemFrom(err)
				assert.Equal(t, tc.slug, p.Slug, name)
				assert.Equal(t, tc.retryAfter, p.RetryAfter, name)
				assert.ErrorIs(t, p, cause, "%s: the cause is kept for the logs", name)
				assert.NotEmpty(t, p.Detail, name)
				if tc.carriesOp {
					assert.Same(t, testOp, p.Op, "%s: the problem names the operation", name)
				} else {
					assert.Nil(t, p.Op, name)
				}
			}
		})
	}
}

func TestProblemFromKeepsLedgerMessageWhereItHelps(t *testing.T) {
	t.Parallel()
	err := &models.Error{Code: models.CodeNotCancellable, Message: "only PENDING operations can be cancelled", Op: testOp}
	assert.Equal(t, "only PENDING operations can be cancelled", ProblemFrom(err).Detail)
}

func TestProblemFromPassesProblemsThrough(t *testing.T) {
	t.Parallel()
	p := &Problem{Slug: problems.ToolForbidden, Detail: "no"}
	assert.Same(t, p, ProblemFrom(p))
	assert.Same(t, p, ProblemFrom(fmt.Errorf("wrapped: %w", p)))
}

func TestProblemFromFrameworkErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		slug string
	}{
		{"404 route", echo.ErrNotFound, problems.NotFound},
		{"405 method", echo.ErrMethodNotAllowed, problems.NotFound},
		{"413 body", echo.ErrStatusRequestEntityTooLarge, problems.BodyTooLarge},
		{"anything else", errors.New("boom"), problems.Internal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ProblemFrom(tc.err)
			assert.Equal(t, tc.slug, p.Slug)
			assert.Nil(t, p.Op)
			assert.ErrorIs(t, p, tc.err)
		})
	}
}

// writeProblem renders p through WriteProblem and returns the recorded answer.
func writeProblem(t *testing.T, p *Problem) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	c := echo.New().NewContext(httptest.NewRequest(http.MethodPost, "/v1/operations", nil), rec)
	require.NoError(t, WriteProblem(c, p))
	return rec
}

// decodeBody decodes a problem body into a map, so absent members can be told from empty ones.
func decodeBody(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m), rec.Body.String())
	return m
}

func TestWriteProblemAboutAnOperation(t *testing.T) {
	t.Parallel()
	rec := writeProblem(t, &Problem{Slug: problems.OperationUncertain, Detail: "poll it", Op: testOp,
		Location: "/v1/operations/" + testOp.ID, RetryAfter: 5})
	ty, _ := problems.Lookup(problems.OperationUncertain)

	assert.Equal(t, ty.Status, rec.Code)
	assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	assert.Equal(t, "5", rec.Header().Get("Retry-After"))
	assert.Equal(t, "/v1/operations/"+testOp.ID, rec.Header().Get("Location"))
	assert.Equal(t, map[string]any{
		"type":                       "/problems/operation-uncertain",
		"title":                      ty.Title,
		"status":                     float64(ty.Status),
		"detail":                     "poll it",
		"operation_id":               testOp.ID,
		"state":                      "UNKNOWN",
		"safe_to_retry_with_new_key": false,
	}, decodeBody(t, rec))
}

func TestWriteProblemWithoutAnOperation(t *testing.T) {
	t.Parallel()
	rec := writeProblem(t, &Problem{Slug: problems.MalformedBody, Detail: "tool is required"})
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Empty(t, rec.Header().Get("Retry-After"))
	assert.Empty(t, rec.Header().Get("Location"))
	body := decodeBody(t, rec)
	assert.Equal(t, "/problems/malformed-body", body["type"])
	assert.Equal(t, float64(400), body["status"])
	assert.Equal(t, "tool is required", body["detail"])
	for _, member := range []string{"operation_id", "state", "safe_to_retry_with_new_key", "errors"} {
		assert.NotContains(t, body, member)
	}
}

func TestWriteProblemStatusFollowsTheTable(t *testing.T) {
	t.Parallel()
	for _, ty := range problems.All() {
		rec := writeProblem(t, &Problem{Slug: ty.Slug, Detail: "d"})
		assert.Equal(t, ty.Status, rec.Code, ty.Slug)
		body := decodeBody(t, rec)
		assert.Equal(t, ty.URI(), body["type"], ty.Slug)
		assert.Equal(t, ty.Title, body["title"], ty.Slug)
		assert.Equal(t, float64(ty.Status), body["status"], ty.Slug)
	}
}

func TestWriteProblemLedgerUnavailableSaysWhenToRetry(t *testing.T) {
	t.Parallel()
	rec := writeProblem(t, ProblemFrom(&models.Error{Code: models.CodeUnavailable, Message: "ledger: submit"}))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "2", rec.Header().Get("Retry-After"))
	assert.Equal(t, "/problems/ledger-unavailable", decodeBody(t, rec)["type"])
}

func TestWriteProblemInvalidParamsListsErrors(t *testing.T) {
	t.Parallel()
	errs := []map[string]string{{"pointer": "/subject", "message": "is required"}}
	rec := writeProblem(t, &Problem{Slug: problems.InvalidParams, Detail: "params do not match", Errors: errs})
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Equal(t, []any{map[string]any{"pointer": "/subject", "message": "is required"}}, decodeBody(t, rec)["errors"])
}

func TestWriteProblemUnknownSlugIsInternal(t *testing.T) {
	t.Parallel()
	rec := writeProblem(t, &Problem{Slug: "no-such-problem", Detail: "d"})
	assert.Equal(t, http.StatusInternalServerError, rec.Code)
	assert.Equal(t, "/problems/internal", decodeBody(t, rec)["type"])
}

// A commit cut off on its way may have been recorded: the 503 says so, never that nothing
// was recorded, and tells the agent to retry with the same key (docs/API.md).
func TestLedgerUnavailableAfterACommitCutOffSaysItMayHaveBeenRecorded(t *testing.T) {
	t.Parallel()
	cut := &models.Error{Code: models.CodeUnavailable, Message: "ledger: submit: the commit was cut off", MaybeRecorded: true}
	a := AnswerFor(fmt.Errorf("handler: %w", cut))
	assert.Equal(t, problems.LedgerUnavailable, a.Problem.Slug)
	assert.Equal(t, ledgerRetryAfter, a.Problem.RetryAfter)
	assert.Contains(t, a.Problem.Detail, "may have been recorded")
	assert.Contains(t, a.Problem.Detail, "same Idempotency-Key")
	assert.NotContains(t, a.Problem.Detail, "nothing was recorded")
	assert.NotContains(t, a.Message, "nothing was changed")

	plain := AnswerFor(&models.Error{Code: models.CodeUnavailable, Message: "ledger: submit"})
	assert.Contains(t, plain.Problem.Detail, "nothing was recorded", "before any commit was sent, nothing was")
}
