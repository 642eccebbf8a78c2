package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/downstream"
	"github.com/idemgate/idemgate/jobs/mcpclient"
	"github.com/idemgate/idemgate/models"
)

// The _meta members every tools/call sent to an MCP server carries (docs/MCP.md).
const (
	MetaOperation     = "idemgate/operation"
	MetaDownstreamKey = "idemgate/downstream_key"
)

// The JSON-RPC errors that say the server did nothing with the call (docs/MCP.md): parse error,
// invalid request, method not found, invalid params.
var rpcNothingRan = map[int64]bool{-32700: true, -32600: true, -32601: true, -32602: true}

// ClassifyMCP maps what a tools/call saw to an outcome class (docs/MCP.md): no session → not
// sent; a JSON-RPC error that says nothing ran, or a result with isError → rejected; a
// result → succeeded; the session ending, the stream breaking, the timeout passing after the
// call was written, or any other JSON-RPC error → ambiguous.
func ClassifyMCP(o mcpclient.Outcome) Class {
	switch {
	case o.NotSent != nil:
		return NotSent
	case o.RPCError != nil && rpcNothingRan[o.RPCError.Code]:
		return Rejected
	case o.RPCError != nil, o.Err != nil:
		return Ambiguous
	case o.IsError:
		return Rejected
	}
	return Succeeded
}

// mcpCall sends one tools/call about op: its params as the arguments (with the downstream key
// in idempotency_argument, when the tool names one) and idemgate's _meta. A call over HTTP
// that ends without an answer (the timeout, the stream broken) resets the connections still
// carrying it before it returns, as an HTTP attempt does (jobs/downstream abort.go); abortedAt
// is when, zero when nothing was reset.
func (e *Executor) mcpCall(ctx context.Context, tool *catalog.Tool, op *models.Operation, name string, args map[string]any, secrets *catalog.Secrets) (res mcpclient.Outcome, traceID string, abortedAt time.Time) {
	h := http.Header{}
	traceID = injectTraceparent(ctx, h)
	meta := map[string]any{MetaOperation: op.ID, MetaDownstreamKey: op.DownstreamKeySent()}
	if tp := h.Get("Traceparent"); tp != "" {
		meta["traceparent"] = tp
	}
	ctx, att := downstream.WithAttempt(ctx, tool.HTTP.Timeout)
	res = e.mcp.Call(ctx, tool.MCP.Server, name, args, meta, tool.HTTP.Timeout, secrets)
	if res.Err != nil || res.NotSent != nil {
		abortedAt = att.Abort()
	}
	return res, traceID, abortedAt
}

// attemptMCP is attempt for a tool of an MCP server.
func (e *Executor) attemptMCP(ctx context.Context, tool *catalog.Tool, c models.Claimed, cd callData) models.AttemptOutcome {
	op := c.Op
	if e.mcp == nil {
		return cannotBuild(fmt.Errorf("%s: this process has no MCP client", tool.MCP.Server.Describe()))
	}
	args := maps.Clone(cd.tmpl.Params)
	if args == nil {
		args = map[string]any{}
	}
	if a := tool.MCP.IdempotencyArgument; a != "" {
		args[a] = op.DownstreamKeySent()
	}
	res, traceID, abortedAt := e.mcpCall(ctx, tool, op, tool.MCP.Upstream, args, cd.secrets)
	class := ClassifyMCP(res)
	res = scrubbedMCP(cd.secrets, res)
	e.meter.Attempt(tool.Name, string(class), res.Latency)
	d := Decide(e.policyInput(ctx, tool, c, class))
	out := models.AttemptOutcome{Class: string(class), Latency: res.Latency, TraceID: traceID, AbortedAt: abortedAt,
		To: d.To, ErrorClass: d.ErrorClass, NextAttemptAt: d.NextAttemptAt, ErrorMessage: describeMCP(class, res)}
	switch {
	case res.NotSent != nil:
		out.Error = res.NotSent.Error()
	case res.Err != nil:
		out.Error = res.Err.Error()
	case res.RPCError != nil:
		out.Error = fmt.Sprintf("JSON-RPC error %d: %s", res.RPCError.Code, res.RPCError.Message)
	}
	if res.Result != nil && (class == Succeeded || class == Rejected) {
		out.UpstreamResult = res.Result
	}
	if d.To == models.StateSucceeded {
		out.Result = mcpRecordedResult(res)
		out.ErrorMessage = ""
		out.DownstreamRef = res.Task // an upstream task's id is the server's handle for the effect
	}
	return out
}

// lookUpMCP calls an MCP tool's reconcile tool, and reads its answer as lookUp reads an HTTP
// look-up's: a result is a 200 whose body is its structured result (for reconcile.found to
// point into); an error result, a JSON-RPC error or no answer is a failed look-up, which
// proves nothing (docs/MCP.md: still UNKNOWN).
func (e *Executor) lookUpMCP(ctx context.Context, tool *catalog.Tool, op *models.Operation, cd callData) (downstream.Response, bool, string, error) {
	if e.mcp == nil {
		return downstream.Response{}, true, "", fmt.Errorf("%s: this process has no MCP client", tool.MCP.Server.Describe())
	}
	args, err := tool.RenderReconcileArguments(cd.tmpl)
	if err != nil {
		return downstream.Response{}, true, "", err
	}
	res, traceID, abortedAt := e.mcpCall(ctx, tool, op, tool.Reconcile.MCP.Tool, args, cd.secrets)
	res = scrubbedMCP(cd.secrets, res)
	resp := downstream.Response{Latency: res.Latency, AbortedAt: abortedAt}
	switch {
	case res.NotSent != nil:
		resp.Err = res.NotSent
	case res.Err != nil:
		resp.Err = res.Err
	case res.RPCError != nil:
		resp.Err = fmt.Errorf("the reconcile tool %s answered JSON-RPC error %d: %s", tool.Reconcile.MCP.Tool, res.RPCError.Code, res.RPCError.Message)
	case res.IsError:
		resp.Err = fmt.Errorf("the reconcile tool %s answered an error: %s", tool.Reconcile.MCP.Tool, resultText(res.Result))
	default:
		resp.Status, resp.Body = http.StatusOK, mcpRecordedResult(res)
	}
	return resp, resp.Err != nil, traceID, nil
}

// mcpRecordedResult is what the operation's result is (docs/MCP.md): the structuredContent when
// the answer has one, else {"content": [...]}.
func mcpRecordedResult(o mcpclient.Outcome) []byte {
	if o.Structured != nil {
		return o.Structured
	}
	var whole struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(o.Result, &whole) != nil || whole.Content == nil {
		return []byte(`{"content":[]}`)
	}
	b, _ := json.Marshal(map[string]json.RawMessage{"content": whole.Content})
	return b
}

// scrubbedMCP masks the call's sensitive values and the session's credentials wherever the
// answer could echo them, as scrubbed does for an HTTP answer.
func scrubbedMCP(s *catalog.Secrets, o mcpclient.Outcome) mcpclient.Outcome {
	s = s.With(o.Credentials...)
	o.Result, o.Structured = s.Body(o.Result), s.Body(o.Structured)
	o.NotSent, o.Err = s.Error(o.NotSent), s.Error(o.Err)
	if o.RPCError != nil {
		e := *o.RPCError
		e.Message = s.Text(e.Message)
		e.Data = s.Body(e.Data)
		o.RPCError = &e
	}
	o.Credentials = nil
	return o
}

// describeMCP writes the message recorded with a failed or retried MCP attempt, saying what is
// known (docs/MCP.md's classes), never more.
func describeMCP(class Class, o mcpclient.Outcome) string {
	switch {
	case o.NotSent != nil:
		return "the call was not sent: " + o.NotSent.Error()
	case o.Err != nil:
		return "the call reached the MCP server, but no answer came back (" + o.Err.Error() + "): it is not known whether the tool ran"
	case o.RPCError != nil && class == Rejected:
		return fmt.Sprintf("the MCP server refused the call without running it (JSON-RPC error %d: %s)", o.RPCError.Code, o.RPCError.Message)
	case o.RPCError != nil:
		return fmt.Sprintf("the MCP server answered JSON-RPC error %d (%s): it is not known whether the tool ran", o.RPCError.Code, o.RPCError.Message)
	case o.IsError:
		return "the tool answered an error: " + resultText(o.Result)
	}
	return ""
}

// resultText is the text content of an answer, shortened for a message.
func resultText(result []byte) string {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(result, &r)
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" && c.Text != "" {
			parts = append(parts, c.Text)
		}
	}
	text := strings.TrimSpace(strings.Join(parts, " "))
	if text == "" {
		return "(no text)"
	}
	if len(text) > 500 {
		text = text[:500] + "…"
	}
	return text
}
