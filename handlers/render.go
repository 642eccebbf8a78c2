package handlers

import (
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

func renderEvent(e models.Event) eventJSON { return opview.RenderEvent(e) }
