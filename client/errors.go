package client

import (
	"fmt"
	"strings"
	"time"
)

// problemType is the sentinel of one problem type: its slug. A *Problem of that type matches
// it with errors.Is.
type problemType string

func (t problemType) Error() string { return "idemgate: " + string(t) }

// The sentinels of the API's problem types, one for each; errors.Is(err, ErrKeyMismatch)
// reports whether err is (or wraps) a *Problem of type /problems/idempotency-key-mismatch.
// The pages at /problems/<slug> on the gateway say what each means and what to do.
var (
	ErrUnauthenticated           error = problemType("unauthenticated")
	ErrKeyMissing                error = problemType("idempotency-key-missing")
	ErrKeyInvalid                error = problemType("idempotency-key-invalid")
	ErrKeyReserved               error = problemType("idempotency-key-reserved")
	ErrUnsupportedMediaType      error = problemType("unsupported-media-type")
	ErrBodyTooLarge              error = problemType("body-too-large")
	ErrMalformedBody             error = problemType("malformed-body")
	ErrUnknownTool               error = problemType("unknown-tool")
	ErrToolForbidden             error = problemType("tool-forbidden")
	ErrPolicyDenied              error = problemType("policy-denied")
	ErrInvalidParams             error = problemType("invalid-params")
	ErrOperationInProgress       error = problemType("operation-in-progress")
	ErrOperationUncertain        error = problemType("operation-uncertain")
	ErrOperationAwaitingApproval error = problemType("operation-awaiting-approval")
	ErrKeyMismatch               error = problemType("idempotency-key-mismatch")
	ErrKeyExpired                error = problemType("idempotency-key-expired")
	ErrConnectionNotConfigured   error = problemType("connection-not-configured")
	ErrLedgerUnavailable         error = problemType("ledger-unavailable")
	ErrRateLimited               error = problemType("rate-limited")
	ErrNotFound                  error = problemType("not-found")
	ErrNotCancellable            error = problemType("not-cancellable")
	ErrNotCompensable            error = problemType("not-compensable")
	ErrUnsupportedFormat         error = problemType("unsupported-format")
	ErrInvalidQuery              error = problemType("invalid-query")
	ErrOriginNotAllowed          error = problemType("origin-not-allowed")
	ErrInternal                  error = problemType("internal")
)

// ErrOperationFailed matches the error of an operation that ended FAILED_FINAL (see
// FailedError). It is an outcome, not a problem type: the request was fine.
var ErrOperationFailed = fmt.Errorf("idemgate: operation failed")

// Problem is an RFC 9457 problem details answer of the API.
type Problem struct {
	Type   string // "/problems/<slug>"; "" when the answer was not problem details
	Slug   string // the last segment of Type
	Title  string
	Status int
	Detail string

	// OperationID and State name the existing operation a problem is about (a key in use,
	// in-progress, uncertain, awaiting approval, mismatched or expired; not cancellable or
	// compensable). SafeToRetryWithNewKey is then false: poll that operation instead.
	OperationID           string
	State                 State
	SafeToRetryWithNewKey bool
	// Errors lists what is wrong with the params (invalid-params).
	Errors []ParamError
	// Rule and Reason name the policy rule or budget that refused the call and why
	// (policy-denied): tell the person the agent acts for; do not split the call to get past it.
	Rule, Reason string

	// RetryAfter and Location are the answer's headers, when it had them.
	RetryAfter time.Duration
	Location   string
}

// ParamError is one thing wrong with the params: a JSON pointer into them and a message.
type ParamError struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

func (p *Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "idemgate: %d", p.Status)
	if p.Slug != "" {
		b.WriteString(" " + p.Slug)
	}
	if p.Detail != "" {
		b.WriteString(": " + p.Detail)
	} else if p.Title != "" {
		b.WriteString(": " + p.Title)
	}
	if p.OperationID != "" {
		fmt.Fprintf(&b, " (operation %s, %s)", p.OperationID, p.State)
	}
	for _, e := range p.Errors {
		fmt.Fprintf(&b, "; %s: %s", e.Pointer, e.Message)
	}
	return b.String()
}

// Is reports whether target is the sentinel of p's problem type.
func (p *Problem) Is(target error) bool {
	t, ok := target.(problemType)
	return ok && p.Slug != "" && string(t) == p.Slug
}

// problemTypes lists every sentinel, for the test that keeps them in step with the gateway.
var problemTypes = []error{
	ErrUnauthenticated, ErrKeyMissing, ErrKeyInvalid, ErrKeyReserved, ErrUnsupportedMediaType, ErrBodyTooLarge, ErrMalformedBody, ErrUnknownTool,
	ErrToolForbidden, ErrPolicyDenied, ErrInvalidParams, ErrOperationInProgress, ErrOperationUncertain,
	ErrOperationAwaitingApproval, ErrKeyMismatch, ErrKeyExpired, ErrConnectionNotConfigured, ErrLedgerUnavailable, ErrRateLimited,
	ErrNotFound, ErrNotCancellable, ErrNotCompensable, ErrUnsupportedFormat, ErrInvalidQuery, ErrOriginNotAllowed, ErrInternal,
}
