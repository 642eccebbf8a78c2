package handlers

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// The review actions (docs/CONSOLE.md) are form posts from the operation page, one route each, allowed
// to reviewers and admins (the routes check the role) on operations within their tenants (any
// other is 404). Every action carries a reason and the state the reviewer saw (expected_state):
// if the operation moved meanwhile the ledger refuses, and nothing changes. A success redirects
// back to a page (post/redirect/get, so reloading repeats nothing) with its outcome in the
// session's flash; so does a refusal, to the operation's page as it is now, the refused form
// open with what was typed, after an audit entry with outcome refused.

// actionRequest is one submitted action form.
type actionRequest struct {
	models.Action
	Rec   *models.OperationRecord
	Input views.ActionInput
	// Confirmed is the form's required confirmation, ticked (an approval of a look-alike).
	Confirmed bool
}

// actionDone is how a successful action is reported: Message in a notice on Redirect (default:
// the operation's page).
type actionDone struct {
	Message  string
	Kind     views.NoticeKind
	Redirect string
}

// actionFunc performs one action through the ledger.
type actionFunc func(ctx context.Context, r actionRequest) (actionDone, error)

// ConfirmSucceeded records a reviewer's finding that an UNKNOWN operation took effect.
func (h *Console) ConfirmSucceeded(c echo.Context) error {
	return h.act(c, models.ActionConfirmSucceeded, func(ctx context.Context, r actionRequest) (actionDone, error) {
		var result []byte
		if s := strings.TrimSpace(r.Input.Result); s != "" {
			result = []byte(s)
		}
		_, err := h.Ledger.ConfirmSucceeded(ctx, r.Action, r.Input.Reference, result)
		return actionDone{Message: "Recorded as SUCCEEDED with downstream reference " + strings.TrimSpace(r.Input.Reference) +
			". Nothing will be sent again."}, err
	})
}

// ConfirmNotExecuted records a reviewer's finding that an UNKNOWN operation did not take effect;
// it is retried.
func (h *Console) ConfirmNotExecuted(c echo.Context) error {
	return h.act(c, models.ActionConfirmNotExecuted, h.confirmNotExecuted)
}

func (h *Console) confirmNotExecuted(ctx context.Context, r actionRequest) (actionDone, error) {
	_, err := h.Ledger.ConfirmNotExecuted(ctx, r.Action)
	return actionDone{Message: "Recorded as not executed. The operation is PENDING again and will be sent to the downstream shortly."}, err
}

// MarkFailed ends an UNKNOWN operation as FAILED_FINAL.
func (h *Console) MarkFailed(c echo.Context) error {
	return h.act(c, models.ActionMarkFailed, h.markFailed)
}

func (h *Console) markFailed(ctx context.Context, r actionRequest) (actionDone, error) {
	_, err := h.Ledger.MarkFailed(ctx, r.Action)
	return actionDone{Message: "Marked FAILED_FINAL. It will not be sent again."}, err
}

// ReconcileNow asks for a reconciliation probe of an UNKNOWN operation at once.
func (h *Console) ReconcileNow(c echo.Context) error {
	return h.act(c, models.ActionReconcileNow, h.reconcileNow)
}

func (h *Console) reconcileNow(ctx context.Context, r actionRequest) (actionDone, error) {
	// Only a tool with reconcile can be asked: promising a look-up that never runs would
	// leave the reviewer waiting for nothing.
	if tool, ok := h.Catalog.Get(r.Rec.Op.Tool); !ok || tool.Reconcile == nil {
		return actionDone{}, &models.Error{Code: models.CodeInvalid,
			Message: "the downstream cannot be asked: " + r.Rec.Op.Tool + " has no reconcile; look in it yourself and confirm what you find"}
	}
	_, err := h.Ledger.ReconcileNow(ctx, r.Action)
	return actionDone{Message: "A look-up will ask the downstream within seconds. Its outcome appears on the timeline; reload to see it.",
		Kind: views.NoticeInfo}, err
}

// Reject ends an operation awaiting approval as FAILED_FINAL.
func (h *Console) Reject(c echo.Context) error { return h.act(c, models.ActionReject, h.reject) }

func (h *Console) reject(ctx context.Context, r actionRequest) (actionDone, error) {
	_, err := h.Ledger.Reject(ctx, r.Action)
	return actionDone{Message: "Rejected. The operation is FAILED_FINAL and will not be sent."}, err
}

// Approve records a reviewer's approval; with the tool's count of distinct reviewers reached,
// the operation runs. A tool no longer in the catalogue cannot be approved: how many approvals
// it needs is unknown.
func (h *Console) Approve(c echo.Context) error { return h.act(c, models.ActionApprove, h.approve) }

func (h *Console) approve(ctx context.Context, r actionRequest) (actionDone, error) {
	tool, ok := h.Catalog.Get(r.Rec.Op.Tool)
	if !ok {
		return actionDone{}, &models.Error{Code: models.CodeInvalid,
			Message: "the tool " + r.Rec.Op.Tool + " is no longer in the catalogue, so it cannot be approved; reject it instead"}
	}
	if err := h.checkLookAlikeConfirmed(ctx, r, r.Confirmed); err != nil {
		return actionDone{}, err
	}
	res, err := h.Ledger.Approve(ctx, r.Action, requiredApprovals(r.Rec.Op, tool), tool.Review.ApprovalTTL)
	if err != nil {
		return actionDone{}, err
	}
	if res.Count < res.Required {
		return actionDone{Message: fmt.Sprintf("Approval recorded: %d of %d. It waits for %s from other reviewers.",
			res.Count, res.Required, moreApprovals(res.Required-res.Count))}, nil
	}
	return actionDone{Message: fmt.Sprintf("Approved (%d of %d). The operation is PENDING and will be sent to the downstream shortly.",
		res.Count, res.Required)}, nil
}

// ProposeCompensation records the compensation of a SUCCEEDED operation, awaiting another
// reviewer's approval, and goes to it. A proposal for an operation already compensated goes to
// the existing compensation, so a repeated form changes nothing.
func (h *Console) ProposeCompensation(c echo.Context) error {
	return h.act(c, ActionProposeCompensation, func(ctx context.Context, r actionRequest) (actionDone, error) {
		op := r.Rec.Op
		switch {
		case h.Executor == nil:
			return actionDone{}, echo.NewHTTPError(http.StatusServiceUnavailable, "This console cannot build compensations; nothing was changed.")
		case op.CompensatedBy != nil:
			return actionDone{Kind: views.NoticeInfo, Redirect: OperationHref(*op.CompensatedBy),
				Message: "This operation already has this compensation; nothing new was proposed."}, nil
		case strings.TrimSpace(r.Reason) == "":
			return actionDone{}, &models.Error{Code: models.CodeInvalid, Message: "a reason is required"}
		case op.State != r.ExpectedState:
			return actionDone{}, &models.Error{Code: models.CodeStale, Op: op}
		}
		// Whether op can be compensated at all is jobs.Compensable's decision, made inside.
		comp, err := h.Executor.ProposeCompensation(ctx, op, models.Requester{Actor: r.Actor, UserID: r.UserID, RequestID: r.RequestID},
			strings.TrimSpace(r.Reason))
		if err != nil {
			return actionDone{}, err
		}
		return actionDone{Redirect: OperationHref(comp.ID),
			Message: "Compensation proposed. It waits for approval by a reviewer other than you before it runs."}, nil
	})
}

// act runs one action on the operation of the request's :id and answers as described above.
func (h *Console) act(c echo.Context, name string, do actionFunc) error {
	v, rec, err := h.viewedOperation(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	r := actionRequest{Rec: rec, Input: views.ActionInput{Reason: c.FormValue("reason"), Reference: c.FormValue("reference"),
		Result: c.FormValue("result")}}
	r.Confirmed = c.FormValue("confirmed") == "1"
	attempts, attemptsErr := strconv.Atoi(c.FormValue("expected_attempts"))
	r.Action = models.Action{Scope: v.Scope, Tenant: rec.Op.Tenant, OperationID: rec.Op.ID, Actor: v.Actor(), UserID: v.ID, Reason: r.Input.Reason,
		ExpectedState: models.State(c.FormValue("expected_state")), ExpectedAttempts: attempts, RequestID: RequestID(c)}
	var done actionDone
	switch {
	case r.ExpectedState == "":
		err = &models.Error{Code: models.CodeInvalid, Message: "the form did not say which state you saw; reload the page and decide again"}
	case attemptsErr != nil || attempts < 0:
		err = &models.Error{Code: models.CodeInvalid, Message: "the form did not say how many attempts you saw; reload the page and decide again"}
	default:
		done, err = do(ctx, r)
	}
	// A refusal is shown on the operation's page; the operation itself missing is the 404 page.
	if err != nil && AnswerFor(err).Refusal && models.ErrorCode(err) != models.CodeNotFound {
		return h.refuseAction(c, v, name, r, err)
	}
	if err != nil {
		return err
	}
	if done.Kind == "" {
		done.Kind = views.NoticeSuccess
	}
	if done.Redirect == "" {
		done.Redirect = OperationHref(rec.Op.ID)
	}
	fl := Flash{Kind: string(done.Kind), Message: done.Message}
	// After a decision, the way on is the next review (the oldest, as the queue lists them).
	if name != models.ActionReconcileNow && name != ActionProposeCompensation {
		switch next, ok, err := h.Ledger.NextReview(ctx, v.Scope, rec.Op.ID); {
		case err != nil: // the decision is recorded; only the way on is missing
		case ok:
			fl.NextHref, fl.NextText = OperationHref(next.OperationID), next.Key
		default:
			fl.NextText = "No other review is waiting."
		}
	}
	h.Sessions.SetFlash(c, fl)
	return c.Redirect(http.StatusSeeOther, done.Redirect)
}

// refuseAction records the refusal and goes back to the operation's page (post/redirect/get, so
// the browser never rests on a POST-only address and a reload repeats nothing), which shows the
// operation as it is now with why nothing changed. After a conflict (the operation moved, or
// cannot be compensated) the form the reviewer used may no longer apply, so nothing is kept;
// otherwise the form opens again with what was typed.
func (h *Console) refuseAction(c echo.Context, v *Viewer, name string, r actionRequest, cause error) error {
	message := sentence(errDetail(cause))
	ctx := c.Request().Context()
	rec, err := h.Ledger.OperationRecord(ctx, v.Scope, r.OperationID)
	if err != nil {
		return err
	}
	if models.ErrorCode(cause) == models.CodeStale {
		message = staleMessage(r.ExpectedState, rec.Op.State)
	}
	RecordRefusal(c, h.Ledger, h.Log, models.AuditInput{Actor: v.Actor(), Action: "review." + name, Tenant: rec.Op.Tenant,
		OperationID: rec.Op.ID, RequestID: r.RequestID, Detail: map[string]any{"refusal": message,
			"reason": strings.TrimSpace(r.Reason), "expected_state": string(r.ExpectedState), "state": string(rec.Op.State)}})
	fl := Flash{Kind: string(views.NoticeError), Message: "Nothing was changed. " + message}
	if AnswerFor(cause).Status != http.StatusConflict {
		fl.Refused, fl.Input, fl.Why = name, r.Input, message
		// The flash travels in the session cookie, which holds about 4 KB: a long result is
		// not carried, and the form says so rather than losing the rest.
		if len(fl.Input.Result)+len(fl.Input.Reason) > 2500 {
			fl.Input.Result = ""
			fl.Why += " The result you typed was too long to keep here; paste it again."
		}
	}
	h.Sessions.SetFlash(c, fl)
	return c.Redirect(http.StatusSeeOther, OperationHref(rec.Op.ID))
}

// staleMessage explains a refusal because the operation is not, or no longer, in a state the
// action applies to.
func staleMessage(expected, now models.State) string {
	if expected != "" && expected != now {
		return fmt.Sprintf("The operation changed while you were deciding: it is %s now, not %s as when you opened the page. "+
			"Read its timeline below, then decide again.", now, expected)
	}
	return fmt.Sprintf("This action does not apply to an operation that is %s.", now)
}

// userActor is a person as the ledger names them in its messages.
var userActor = regexp.MustCompile(`\buser:([^\s,;:]+@[^\s,;:]+)`)

// sentence turns a ledger message ("a reason is required") into a sentence. People are named
// by their email, as everywhere on the console, and an email or a tool name that begins it
// keeps its case ("rita@example.com has already approved", not "User:rita…").
func sentence(msg string) string {
	msg = userActor.ReplaceAllString(strings.TrimSpace(msg), "$1")
	if msg == "" {
		return msg
	}
	first, _, _ := strings.Cut(msg, " ")
	if !strings.ContainsAny(first, "@.:_") {
		msg = strings.ToUpper(msg[:1]) + msg[1:]
	}
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}
