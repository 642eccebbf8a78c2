package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	// Task is the upstream task the call ran as, "" for a plain call: the server's handle for
	// what it did.
	Task string
	// Credentials are the credential values the session's requests carried, for the
	// scrubber.
	Credentials []string
}

// Call sends tools/call of tool with args and meta to spec's server on its session, within
// timeout. secrets are the call's sensitive values: the server's standard error is scrubbed of
// them while the call runs and a while after.
func (p *Pool) Call(ctx context.Context, spec *catalog.MCPServer, tool string, args, meta map[string]any, timeout time.Duration, secrets *catalog.Secrets) (out Outcome) {
	s := p.serverFor(spec)
	defer s.calls.begin(secrets)()
	s.mu.Lock()
	cs, l := s.session, s.link
	why := s.lastErr
	s.mu.Unlock()
	defer func() { out.Credentials = s.credentials() }()
	if cs == nil {
		if why == nil {
			why = errors.New("not connected yet")
		}
		out.NotSent = fmt.Errorf("%s is not running: %w", spec.Describe(), why)
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	mark, polls := &callMark{}, &callMark{}
	start := time.Now()
	params := &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta}
	var res *mcp.CallToolResult
	var err error
	if s.needsTask(tool) {
		res, out.Task, err = callTask(withMark(ctx, mark), withMark(ctx, polls), l.raw, params, timeout+taskTTLMargin)
	} else {
		res, err = cs.CallTool(withMark(ctx, mark), params)
	}
	out.Latency = time.Since(start)
	var rpc *jsonrpc.Error
	var sent *errTaskSent
	switch {
	case err != nil && (mark.oversize.Load() || polls.oversize.Load() || l.oversize.Load()):
		out.Err = fmt.Errorf("the answer passed max_result_bytes (%d bytes); the gateway stopped reading it", spec.MaxResultBytes)
	case err != nil && mark.notSent.Load():
		out.NotSent = fmt.Errorf("%s refused the connection: %w", spec.Describe(), err)
	case errors.As(err, &sent):
		out.Err = err
	case errors.As(err, &rpc):
		out.RPCError = rpc
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		out.Err = fmt.Errorf("no answer within %s", timeout)
		if len(spec.Command) > 0 {
			// A stdio server that does not answer may never answer anything again: the next
			// call must not wait behind it. Its session ends; the supervisor starts it anew.
			s.log.Warn("mcp server did not answer within the call's timeout; restarting it", "server", spec.Describe(), "timeout", timeout)
			l.abandoned.Store(true)
			s.detach(l, out.Err)
			go func() { _ = cs.Close() }()
		}
	case err != nil:
		out.Err = err
	default:
		for k := range res.Meta {
			if strings.HasPrefix(k, "idemgate/") {
				delete(res.Meta, k) // only the gateway speaks for the gateway
			}
		}
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
