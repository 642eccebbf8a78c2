package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Outcome is what one tools/call saw. Exactly one of NotSent, RPCError, Err and Result is
// set.
type Outcome struct {
	// NotSent: there was no session to send on (a stdio server not running, a URL server not
	// connected): the call never left.
	NotSent error
	// RPCError is a JSON-RPC error answer.
	RPCError *jsonrpc.Error
	// Err: the call was sent and no answer came: the session ended, the stream broke, or the
	// timeout passed.
	Err error
	// Result is the answer, as JSON of the CallToolResult the server sent (its content,
	// structuredContent, isError and _meta).
	Result  []byte
	IsError bool
	// Structured is the result's structuredContent as JSON, nil when it has none.
	Structured []byte
	Latency    time.Duration
	// Credentials are the credential values the session's requests carried, for the
	// scrubber.
	Credentials []string
}

// Call sends tools/call of tool with args and meta to spec's server on its session, within
// timeout.
func (p *Pool) Call(ctx context.Context, spec *catalog.MCPServer, tool string, args map[string]any, meta map[string]any, timeout time.Duration) (out Outcome) {
	s := p.serverFor(spec)
	s.mu.Lock()
	cs, creds := s.session, s.creds
	why := s.lastErr
	s.mu.Unlock()
	if creds != nil {
		defer func() { out.Credentials = creds.Used() }()
	}
	if cs == nil {
		if why == nil {
			why = errors.New("not connected yet")
		}
		out.NotSent = fmt.Errorf("%s is not running: %w", spec.Describe(), why)
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	out.Latency = time.Since(start)
	var rpc *jsonrpc.Error
	switch {
	case errors.As(err, &rpc):
		out.RPCError = rpc
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		out.Err = fmt.Errorf("no answer within %s", timeout)
	case err != nil:
		out.Err = err
	default:
		b, merr := json.Marshal(res)
		if merr != nil {
			out.Err = fmt.Errorf("reading the result: %w", merr)
			return out
		}
		out.Result, out.IsError = b, res.IsError
		if res.StructuredContent != nil {
			out.Structured, _ = json.Marshal(res.StructuredContent)
		}
	}
	return out
}
