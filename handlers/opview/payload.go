package opview

import (
	"encoding/json"
	"fmt"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// Payloads returns the renderer of the operation object inside webhook payloads (docs/WEBHOOKS.md): the
// very rendering the API answers with, masked with cat's sensitive_params, so a notification
// never shows more than the API would.
func Payloads(cat *catalog.Catalog) models.PayloadRenderer {
	return models.PayloadRendererFunc(func(op *models.Operation) (json.RawMessage, error) {
		b, err := json.Marshal(Render(cat, op))
		if err != nil {
			return nil, fmt.Errorf("opview: render %s: %w", op.ID, err)
		}
		return b, nil
	})
}
