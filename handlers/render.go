package handlers

import (
	"context"

	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// operationJSON is the operation object of docs/API.md. Its shape lives in opview, shared with the
// exports, so an exported operation reads exactly as the API renders it.
type operationJSON = opview.Operation

// eventJSON is one event of an operation's timeline (GET /v1/operations/{id}/events).
type eventJSON = opview.Event

// renderOperation builds the public view of op, with sensitive params masked (see
// opview.Render).
func renderOperation(cat *catalog.Catalog, op *models.Operation) operationJSON {
	return opview.Render(cat, op)
}

// render is renderOperation with what the policies decided of op (its `policy` member): the
// decision op carries when this request recorded it (it never changes once recorded), else read,
// only for a tool a policy or budget applies to, so other reads cost nothing more. A decision
// that cannot be read is left out rather than failing the answer: the operation itself was read.
func (a *API) render(ctx context.Context, op *models.Operation) operationJSON {
	view := renderOperation(a.Catalog, op)
	if op.Policy != nil {
		view.Policy = op.Policy
	} else if a.Catalog.Rules().Applies(op.Tool) {
		if p, err := a.Ledger.PolicyOf(ctx, op.ID); err == nil {
			view.Policy = p
		}
	}
	return view
}

func renderEvent(e models.Event) eventJSON { return opview.RenderEvent(e) }
