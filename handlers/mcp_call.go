package handlers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/handlers/headers"
	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/fingerprint"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpCall is a tools/call request read into what POST /v1/operations carries in its headers
// and body.
type mcpCall struct {
	key  string
	req  operationRequest
	wait time.Duration
}

// callHandler answers tools/call of tool t for caller. Every outcome, refusals included, is a
// tool result rather than a protocol error, so the agent's model sees it and what to do next.
func (m *MCP) callHandler(t *catalog.Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		caller := CallerFrom(ctx)
		if caller == nil || !caller.AllowsTool(t.Name) {
			// The server is its scope's; a caller reaches it only through that scope.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", req.Params.Name)}
		}
		res, err := m.call(ctx, caller, t, req.Params)
		if t.MCP != nil {
			if err != nil {
				// The problem is in the text and _meta only: as structured content it would
				// break the upstream's outputSchema.
				out := m.problemResult(ProblemFrom(err), err)
				out.StructuredContent = nil
				return out, nil
			}
			return upstreamResult(t, res), nil
		}
		if err != nil {
			return m.problemResult(ProblemFrom(err), err), nil
		}
		return operationResult(m.api.Catalog, res), nil
	}
}

// call applies the checks of POST /v1/operations to a tools/call, in the same order where
// they apply (rate limit, key, arguments, then the tool, the caller's right to it and its
// params), and submits it through the same path.
func (m *MCP) call(ctx context.Context, caller *models.Caller, t *catalog.Tool, p *mcp.CallToolParamsRaw) (jobs.SubmitResult, error) {
	if !m.api.Limiter.Allow(caller.PrincipalID) {
		return jobs.SubmitResult{}, &Problem{Slug: problems.RateLimited, RetryAfter: 1,
			Detail: "too many requests for this principal; call again in a moment with the same operation_key"}
	}
	c, err := readMCPCall(t, p)
	if err != nil {
		return jobs.SubmitResult{}, err
	}
	return m.api.submitCall(ctx, caller, c.key, c.req, c.wait)
}

// readMCPCall takes the operation key, the params and the optional workflow members and wait
// out of a tools/call request.
func readMCPCall(t *catalog.Tool, p *mcp.CallToolParamsRaw) (mcpCall, error) {
	params, argKey, err := splitArguments(p.Arguments)
	if err != nil {
		return mcpCall{}, err
	}
	key, err := callKey(t, p.Meta, argKey)
	if err != nil {
		return mcpCall{}, err
	}
	c := mcpCall{key: key, req: operationRequest{Tool: t.Name, Params: params}}
	if c.wait, err = metaWait(p.Meta); err != nil {
		return mcpCall{}, err
	}
	if c.req.WorkflowRunID, err = metaString(p.Meta, MCPMetaRunID); err != nil {
		return mcpCall{}, err
	}
	if c.req.StepID, err = metaString(p.Meta, MCPMetaStepID); err != nil {
		return mcpCall{}, err
	}
	if c.req.Justification, err = metaJustification(p.Meta); err != nil {
		return mcpCall{}, err
	}
	return c, nil
}

// splitArguments checks the arguments as POST /v1/operations checks its body (I-JSON, an
// object) and returns them canonical, without operation_key, and that key when present.
func splitArguments(raw json.RawMessage) (json.RawMessage, *string, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return json.RawMessage("{}"), nil, nil
	}
	canon, err := fingerprint.Normalize(raw)
	if err != nil {
		return nil, nil, problem(problems.MalformedBody, "arguments: %v", err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(canon, &members); err != nil {
		return nil, nil, problem(problems.MalformedBody, "the arguments must be a JSON object")
	}
	v, ok := members[MCPKeyArgument]
	if !ok {
		return canon, nil, nil
	}
	var key string
	if err := json.Unmarshal(v, &key); err != nil {
		return nil, nil, problem(problems.IdempotencyKeyInvalid, "%s must be a string", MCPKeyArgument)
	}
	delete(members, MCPKeyArgument)
	rest, err := json.Marshal(members)
	if err == nil {
		// encoding/json orders names by bytes, JCS by UTF-16 units: normalise again.
		rest, err = fingerprint.Normalize(rest)
	}
	if err != nil {
		return nil, nil, problem(problems.MalformedBody, "arguments: %v", err)
	}
	return rest, &key, nil
}

// callKey returns the operation key of a call (docs/MCP.md), in order: params.idempotencyKey
// (which bounded has moved into _meta), _meta "idemgate/key", the operation_key argument. The
// first two come from the agent's runtime, where a stable key belongs: when one is present, an
// operation_key the model also filled in is not used, and never makes the call fail. A read
// without a key gets a new one of its own: a repeated read changes nothing, so it needs no
// stable name.
func callKey(t *catalog.Tool, meta mcp.Meta, argKey *string) (string, error) {
	v, inMeta := meta[MCPMetaRuntimeKey]
	if !inMeta {
		v, inMeta = meta[MCPMetaKey]
	}
	metaKey, isString := v.(string)
	switch {
	case inMeta && !isString:
		return "", problem(problems.IdempotencyKeyInvalid, "the key (params.idempotencyKey or _meta %q) must be a string", MCPMetaKey)
	case !inMeta && argKey != nil:
		metaKey, inMeta = *argKey, true
	}
	if !inMeta {
		if needsKey(t) {
			return "", problem(problems.IdempotencyKeyMissing, "pass %s (or _meta %q): a key naming this logical action, "+
				"stable across retries, such as \"workflow-8472:create-ticket\"", MCPKeyArgument, MCPMetaKey)
		}
		return "mcp-read:" + rand.Text(), nil
	}
	if err := headers.CheckKey(metaKey); err != nil {
		return "", keyProblem(err)
	}
	if err := reservedKey(metaKey); err != nil {
		return "", err
	}
	return metaKey, nil
}

// metaWait is how long the call may wait for a terminal outcome: _meta "idemgate/wait" in
// seconds, clamped to 60 as Prefer: wait=N is, or 10 s.
func metaWait(meta mcp.Meta) (time.Duration, error) {
	v, ok := meta[MCPMetaWait]
	if !ok {
		return headers.DefaultWait, nil
	}
	n, ok := v.(float64)
	if !ok || n < 0 {
		return 0, problem(problems.MalformedBody, "_meta %q must be a number of seconds from 0 to 60", MCPMetaWait)
	}
	return time.Duration(min(n, headers.MaxWait.Seconds())) * time.Second, nil
}

// metaString reads an optional string member of _meta of at most 255 bytes.
func metaString(meta mcp.Meta, name string) (string, error) {
	v, ok := meta[name]
	if !ok {
		return "", nil
	}
	s, ok := v.(string)
	if !ok || len(s) > 255 {
		return "", problem(problems.MalformedBody, "_meta %q must be a string of at most 255 bytes", name)
	}
	return s, nil
}

// metaJustification reads _meta "idemgate/justification": a string of at most
// MaxJustification characters, as the JSON API's justification.
func metaJustification(meta mcp.Meta) (string, error) {
	v, ok := meta[MCPMetaReason]
	if !ok {
		return "", nil
	}
	s, ok := v.(string)
	if !ok || utf8.RuneCountInString(s) > MaxJustification {
		return "", problem(problems.MalformedBody, "_meta %q must be a string of at most %d characters", MCPMetaReason, MaxJustification)
	}
	return s, nil
}
