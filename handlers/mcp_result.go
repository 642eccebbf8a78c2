package handlers

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// More members of a tools/call result's _meta.
const (
	MCPMetaProblem    = "idemgate/problem"     // the problem type's slug, on refusals and in-flight outcomes
	MCPMetaRetryAfter = "idemgate/retry_after" // seconds before asking again, when that helps
)

// operationResult reports an operation as a tools/call result: its structured content is the
// operation object of the API. A success is the one result that is not an error. An outcome
// that is not final (in progress, uncertain, awaiting approval) is an error result, as a tool
// of an MCP server's must be (a result without the structuredContent the upstream's
// outputSchema requires is refused by SDKs), so that both kinds of tool answer it alike and no
// model takes it for a success; its text and _meta (idemgate/problem, idemgate/retry_after) say
// to call again with the same key, never a new one. A client that speaks MCP tasks gets a task
// instead (mcp_tasks.go).
func operationResult(cat *catalog.Catalog, res jobs.SubmitResult) *mcp.CallToolResult {
	op := res.Op
	out := &mcp.CallToolResult{Meta: operationMeta(res), StructuredContent: renderOperation(cat, op)}
	var text string
	switch op.State {
	case models.StateSucceeded:
		text = fmt.Sprintf("%s succeeded (operation %s).", op.Tool, op.ID)
	case models.StateFailedFinal:
		out.IsError = true
		text = fmt.Sprintf("%s failed finally (operation %s)%s. It will not run again under this key: calling again "+
			"with the same operation_key returns this outcome.", op.Tool, op.ID, failure(op))
	default:
		p := inFlightProblem(op, toolOf(cat, op.Tool))
		out.IsError = true
		out.Meta[MCPMetaProblem], out.Meta[MCPMetaRetryAfter] = p.Slug, p.RetryAfter
		text = fmt.Sprintf("Operation %s is %s, not final yet: %s Call this tool again in about %d s with the same "+
			"operation_key and arguments to learn the outcome. Do not retry with a new operation_key: "+
			"that could perform the action twice.", op.ID, op.State, p.Detail, p.RetryAfter)
	}
	if !res.Created {
		text += " This is the operation recorded under this key by an earlier call: nothing ran again."
	}
	out.Content = []mcp.Content{&mcp.TextContent{Text: text + "\n\n" + jsonText(out.StructuredContent)}}
	return out
}

// failure describes why op failed, for the text of its result.
func failure(op *models.Operation) string {
	if op.ErrorClass == nil {
		return ""
	}
	s := ": " + *op.ErrorClass
	if op.ErrorMessage != nil && *op.ErrorMessage != "" {
		s += ", " + *op.ErrorMessage
	}
	return s
}

// problemResult reports a refusal as an error result whose structured content is the problem
// details object the API would answer with. A problem about an existing operation (a key
// reused with other arguments, an expired key) carries its id and state.
func (m *MCP) problemResult(p *Problem, err error) *mcp.CallToolResult {
	if p.Slug == problems.Internal || p.Slug == problems.LedgerUnavailable {
		m.log.Error("mcp tools/call failed", "err", err, "problem", p.Slug)
	}
	body := p.body()
	text := fmt.Sprintf("%s (%s): %s.", body.Title, p.Slug, strings.TrimSuffix(p.Detail, "."))
	if p.RetryAfter > 0 {
		text += fmt.Sprintf(" Call again in %d s with the same operation_key.", p.RetryAfter)
	}
	meta := mcp.Meta{MCPMetaProblem: p.Slug}
	if p.RetryAfter > 0 {
		meta[MCPMetaRetryAfter] = p.RetryAfter
	}
	return &mcp.CallToolResult{Meta: meta, IsError: true, StructuredContent: body,
		Content: []mcp.Content{&mcp.TextContent{Text: text + " See " + body.Type + ".\n\n" + jsonText(body)}}}
}

// jsonText is v as JSON text, for clients that read only a result's text content.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}
