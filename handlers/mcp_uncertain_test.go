package handlers

import (
	"testing"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUncertainTextSaysWhoSettlesIt (issue 50 item 20): the "not final" text of an UNKNOWN
// operation (the /mcp result, the JSON API's 409 detail, a task's status) says idemgate is
// reconciling it only when it is: a tool without reconcile, or an operation with a review open,
// went to a person, and the text says so. It said "idemgate is reconciling it" for every one.
func TestUncertainTextSaysWhoSettlesIt(t *testing.T) {
	t.Parallel()
	cat, err := catalog.Load([]byte(`
tools:
  - name: tickets.create
    description: Create a ticket
    effect: write
    params_schema: {type: object}
    http: {url: "http://127.0.0.1:9/tickets"}
  - name: refunds.issue
    description: Refund
    effect: write
    params_schema: {type: object}
    http: {url: "http://127.0.0.1:9/refunds"}
    reconcile: {url: "http://127.0.0.1:9/refunds?key={{.DownstreamKey}}"}
`))
	require.NoError(t, err)
	review := "rev_1"
	for _, c := range []struct {
		name   string
		op     *models.Operation
		person bool
	}{
		{"no reconcile", &models.Operation{ID: "op_1", Tool: "tickets.create", State: models.StateUnknown}, true},
		{"reconcile", &models.Operation{ID: "op_2", Tool: "refunds.issue", State: models.StateUnknown}, false},
		{"reconcile, escalated", &models.Operation{ID: "op_3", Tool: "refunds.issue", State: models.StateUnknown, ReviewID: &review}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := operationResult(cat, jobs.SubmitResult{Op: c.op, Created: true})
			text := res.Content[0].(*mcp.TextContent).Text
			detail := inFlightProblem(c.op, toolOf(cat, c.op.Tool)).Detail
			status := waitingFor(c.op, toolOf(cat, c.op.Tool))
			for _, said := range []string{text, detail, status} {
				if c.person {
					assert.Contains(t, said, "a person decides its outcome in the review queue")
					assert.NotContains(t, said, "reconciling")
				} else {
					assert.Contains(t, said, "idemgate is reconciling it with the downstream")
				}
			}
		})
	}
}
