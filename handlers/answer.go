package handlers

import (
	"errors"
	"net/http"

	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/models"
	"github.com/labstack/echo/v4"
)

// Answer is how the gateway answers an error, to an agent and to a person alike. AnswerFor is
// the one table behind the API's problems, the console's error page and the console's form
// notices.
type Answer struct {
	// Problem is what the API answers with; its type fixes the API's status.
	Problem *Problem
	// Status is the console's status. It is the problem type's status, except for errors the
	// API never meets (an admin's conflict, a form acted on a changed record, throttled
	// sign-ins), which the API answers as internal errors rather than guess, and the console
	// answers for what they are.
	Status int
	// Message is what a person reads on the error page: the ledger's refusal, which is written
	// for people, or a fixed sentence. "" leaves it to the page to say what Status means, as for
	// "not found", which must read the same whether the record is missing or another tenant's.
	Message string
	// Refusal says the ledger refused the person's input and nothing changed: a form shows the
	// ledger's reason on the page it came from instead of an error page.
	Refusal bool
}

// ledgerRetryAfter is what a caller is told to wait when the ledger is unreachable.
const ledgerRetryAfter = 2

// codeAnswer is the row of the table for one ledger code.
type codeAnswer struct {
	slug string // the API's problem type
	// status is the console's status where it differs from the problem type's: only for
	// codes the API answers as internal errors.
	status  int
	aboutOp bool   // the problem names the operation the error concerns
	detail  string // the API's detail; "" is the ledger's message
	// tell shows a person the ledger's message; say, when set, is shown instead. With neither,
	// the page says what the status means.
	tell    bool
	say     string
	refusal bool
	// retryAfter, when positive, is sent as Retry-After (seconds), to agents and people.
	retryAfter int
	// cutOffDetail and cutOffSay replace detail and say when the error is a commit cut off
	// on its way (models.MaybeRecorded): then the change may have been recorded.
	cutOffDetail, cutOffSay string
}

// codeAnswers is the one table from ledger codes to answers.
var codeAnswers = map[models.Code]codeAnswer{
	models.CodeNotFound: {slug: problems.NotFound, detail: "no such operation", refusal: true},
	models.CodeInvalid:  {slug: problems.InvalidQuery, tell: true, refusal: true},
	// Neither reaches the API from a correct handler: conflicts come from admin changes, and a
	// lost compare-and-set is turned into its own answer by the API's handlers. Should one
	// escape, the API answers an internal error, not a guess.
	models.CodeConflict:  {slug: problems.Internal, detail: internalDetail, status: http.StatusConflict, tell: true, refusal: true},
	models.CodeStale:     {slug: problems.Internal, detail: internalDetail, status: http.StatusConflict, tell: true, refusal: true},
	models.CodeThrottled: {slug: problems.Internal, detail: internalDetail, status: http.StatusTooManyRequests},
	models.CodeKeyMismatch: {slug: problems.IdempotencyKeyMismatch, aboutOp: true, tell: true, refusal: true,
		detail: "this Idempotency-Key was first used with another tool or other params; nothing was run"},
	models.CodeKeyExpired: {slug: problems.IdempotencyKeyExpired, aboutOp: true, tell: true, refusal: true,
		detail: "the record of this Idempotency-Key passed its retention; the key will never run again"},
	models.CodeConnectionNotConfigured: {slug: problems.ConnectionNotConfigured, tell: true, refusal: true},
	models.CodePolicyDenied:            {slug: problems.PolicyDenied, tell: true, refusal: true},
	models.CodeNotCancellable:          {slug: problems.NotCancellable, aboutOp: true, tell: true, refusal: true},
	models.CodeNotCompensable:          {slug: problems.NotCompensable, aboutOp: true, tell: true, refusal: true},
	models.CodeUnavailable: {slug: problems.LedgerUnavailable, retryAfter: ledgerRetryAfter,
		detail: "the ledger cannot be reached; nothing was recorded or executed. Retry with the same Idempotency-Key.",
		say:    "The ledger cannot be reached right now; nothing was changed. Try again in a moment.",
		cutOffDetail: "the connection to the ledger broke while this request's change was being committed: it may have been " +
			"recorded, and if so it goes ahead. Retry with the same Idempotency-Key: that is always safe, and the retry " +
			"answers with whatever was recorded. Do not switch to a new key.",
		cutOffSay: "The connection to the ledger broke while your change was being saved: it may have been saved. Reload the page to see."},
}

// echoProblems are the problem types of the framework's own errors; any other is internal.
// A wrong method is answered as an unknown resource: the API has nothing at that method.
var echoProblems = map[int]struct{ slug, detail string }{
	http.StatusNotFound:              {problems.NotFound, "no such resource"},
	http.StatusMethodNotAllowed:      {problems.NotFound, "no such resource"},
	http.StatusRequestEntityTooLarge: {problems.BodyTooLarge, "the body is larger than 1 MiB"},
}

// AnswerFor is the answer to err: a handler's own problem as it is, a ledger error by its code,
// a framework error by its status, and anything else as an internal error whose cause is only
// logged.
func AnswerFor(err error) Answer {
	var p *Problem
	if errors.As(err, &p) {
		return Answer{Problem: p, Status: problemStatus(p.Slug)}
	}
	if row, ok := codeAnswers[models.ErrorCode(err)]; ok {
		return row.answer(err)
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		a := Answer{Status: he.Code, Problem: &Problem{Slug: problems.Internal, Detail: internalDetail, Err: err}}
		if msg, _ := he.Message.(string); msg != http.StatusText(he.Code) {
			a.Message = msg
		}
		if row, ok := echoProblems[he.Code]; ok {
			a.Problem.Slug, a.Problem.Detail = row.slug, row.detail
		}
		return a
	}
	return Answer{Status: http.StatusInternalServerError, Problem: &Problem{Slug: problems.Internal, Detail: internalDetail, Err: err}}
}

const internalDetail = "an unexpected error occurred; it has been logged"

func (row codeAnswer) answer(err error) Answer {
	msg := errDetail(err)
	detail, say := row.detail, row.say
	if row.cutOffDetail != "" && models.MaybeRecorded(err) {
		detail, say = row.cutOffDetail, row.cutOffSay
	}
	p := &Problem{Slug: row.slug, Detail: detail, RetryAfter: row.retryAfter, Err: err}
	if p.Detail == "" {
		p.Detail = msg
	}
	if row.aboutOp {
		p.Op = models.ErrorOperation(err)
	}
	if denied, ok := models.PolicyDenial(err); ok {
		p.Policy = denied
	}
	a := Answer{Problem: p, Status: row.status, Refusal: row.refusal, Message: say}
	if a.Status == 0 {
		a.Status = problemStatus(row.slug)
	}
	if row.tell && a.Message == "" {
		a.Message = msg
	}
	return a
}

// ProblemFrom turns any error into the problem the API answers with (see AnswerFor).
func ProblemFrom(err error) *Problem { return AnswerFor(err).Problem }

func problemStatus(slug string) int {
	if t, ok := problems.Lookup(slug); ok {
		return t.Status
	}
	return http.StatusInternalServerError
}

func errDetail(err error) string {
	var e *models.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
