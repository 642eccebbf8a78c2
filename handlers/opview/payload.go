package opview

import (
	"encoding/json"
	"fmt"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// Payloads returns the renderer of the operation object inside webhook payloads (docs/WEBHOOKS.md): the
// very rendering the API answers with, masked with cat's sensitive_params, so a notification
// never shows more than the API would; and the tool's summary line, from the masked params.
func Payloads(cat *catalog.Catalog) models.PayloadRenderer { return payloads{cat: cat} }

type payloads struct{ cat *catalog.Catalog }

func (p payloads) RenderOperation(op *models.Operation) (json.RawMessage, error) {
	b, err := json.Marshal(Render(p.cat, op))
	if err != nil {
		return nil, fmt.Errorf("opview: render %s: %w", op.ID, err)
	}
	return b, nil
}

// Summary is the tool's summary line of op ("42.00 EUR to card •••• 4242"), as the console
// shows it: written from the params for people, so a sensitive value shows only in the safe
// form its tool declares ("***" by default). "" when the tool has none.
func (p payloads) Summary(op *models.Operation) string {
	tool, ok := p.cat.Get(op.Tool)
	if !ok || op.Params == nil {
		return ""
	}
	masked, err := tool.RevealCanonical([]byte(*op.Params))
	if err != nil {
		return ""
	}
	text, _ := tool.Summary(masked, op.Key, op.Tenant)
	return text
}
