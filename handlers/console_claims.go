package handlers

import (
	"github.com/idemgate/idemgate/models"
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
