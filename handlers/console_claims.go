package handlers

import (
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// ClaimReview takes the operation's open review for the signed-in reviewer, so that the rest
// of the team sees who is on it. It returns to the page the form names (the queue or the
// operation), with the outcome in a notice; someone else's live claim is a refusal there.
func (h *Console) ClaimReview(c echo.Context) error {
	return h.changeClaim(c, func(v *Viewer, tenant, id string) (string, error) {
		r, err := h.Ledger.ClaimReview(c.Request().Context(), v.Scope, requester(c, v), tenant, id, h.ClaimTTL)
		if err != nil {
			return "", err
		}
		return "You have this review until " + r.ClaimedUntil.UTC().Format("15:04 UTC") + ".", nil
	})
}

// ReleaseReview gives the reviewer's claim back.
func (h *Console) ReleaseReview(c echo.Context) error {
	return h.changeClaim(c, func(v *Viewer, tenant, id string) (string, error) {
		_, err := h.Ledger.ReleaseReview(c.Request().Context(), v.Scope, requester(c, v), tenant, id)
		return "You gave the review back; anyone may take it.", err
	})
}

func (h *Console) changeClaim(c echo.Context, do func(v *Viewer, tenant, id string) (string, error)) error {
	v, rec, err := h.viewedOperation(c)
	if err != nil {
		return err
	}
	back := SafeNext(c.FormValue("next"))
	if back == "/" {
		back = OperationHref(rec.Op.ID)
	}
	msg, err := do(v, rec.Op.Tenant, rec.Op.ID)
	if models.ErrorCode(err) == models.CodeNotFound {
		// The operation is there (it was just read), so its review was resolved meanwhile:
		// say so where the person was, not as a 404.
		err = &models.Error{Code: models.CodeConflict, Message: "this operation has no open review any more", Err: err}
	}
	return h.formDone(c, err, msg, back)
}

// claimBox is the operation page's line on its open review: who has it and for how long, a
// form to take or give it back, and when an approval lapses. nil without an open review.
func (h *Console) claimBox(v *Viewer, rec *models.OperationRecord, now time.Time) *views.ClaimBox {
	var open *models.Review
	for i := range rec.Reviews {
		if rec.Reviews[i].Status == models.ReviewOpen {
			open = &rec.Reviews[i]
		}
	}
	if open == nil {
		return nil
	}
	box := &views.ClaimBox{CSRFToken: v.CSRFToken, Next: OperationHref(rec.Op.ID)}
	switch holder, held := open.ClaimHolder(now); {
	case !held:
		box.Free = true
	case holder.Is(v.Person()):
		box.Mine, box.Text = true, "You have it · "+views.Age(open.ClaimedUntil.Sub(now))+" left"
	default:
		box.Text = holder.Name() + " has it · " + views.Age(open.ClaimedUntil.Sub(now)) + " left"
	}
	if mayAct(v) && (box.Free || box.Mine) {
		box.Action = OperationHref(rec.Op.ID) + "/claim"
		if box.Mine {
			box.Action = OperationHref(rec.Op.ID) + "/release"
		}
	}
	box.Lapses, box.LapsesSoon = h.approvalLapse(rec.Op.State, rec.Op.Tool, rec.Op.CreatedAt, now)
	return box
}
