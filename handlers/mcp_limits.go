package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/idemgate/idemgate/handlers/mcptasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of one /mcp request. The SDK takes JSON-RPC batches (protocol versions before
// 2025-06-18) of any length and, answering in JSON, holds every answer in memory: without a
// bound, one key's 223 KB batch of tools/list made a 232 MB answer. A batch is for a few
// messages a client sends together; an answer is a few tool lists or results.
const (
	MCPMaxBatch  = 16
	MCPMaxAnswer = 8 << 20
	// mcpCodeRateLimited is the JSON-RPC error of a method refused by the principal's rate
	// limit: in the range the specification leaves to servers.
	mcpCodeRateLimited = -32029
)

// bounded serves one request with the batch and answer bounds.
func (m *MCP) bounded(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes+mcpMaxBodyMargin))
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
			return
		}
		if err != nil {
			http.Error(w, "failed to read body", http.StatusBadRequest)
			return
		}
		if n := batchLength(body); n > MCPMaxBatch {
			writeRPCError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("a batch of %d messages: at most %d are taken in one request", n, MCPMaxBatch))
			return
		}
		p := m.prepare(body, r.Header.Get("Mcp-Protocol-Version"))
		if p.tasks != nil {
			p.refuse, p.status = m.answerTasks(r.Context(), p.rev, p.tasks)
		}
		if p.refuse != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(p.status)
			_, _ = w.Write(p.refuse)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(p.body))
		r.ContentLength = int64(len(p.body))
		if listed, ok := p.renamed[r.Header.Get("Mcp-Name")]; ok {
			r.Header.Set("Mcp-Name", listed)
		}
		var edit func([]byte) []byte
		switch {
		case p.advertise:
			edit = advertise(p.rev)
		case p.task != mcptasks.None:
			edit = m.taskAnswer(r.Context(), p.task)
		case p.listing:
			edit = taskSupport
		}
		if edit != nil {
			cw := &cappedWriter{w: w, limit: MCPMaxAnswer, edit: edit}
			m.handler.ServeHTTP(cw, r)
			cw.finish()
			return
		}
	}
	cw := &cappedWriter{w: w, limit: MCPMaxAnswer}
	m.handler.ServeHTTP(cw, r)
	cw.finish()
}

// batchLength is the number of messages of a JSON-RPC batch (a JSON array), 0 for anything
// else: the SDK reads what is not a batch.
func batchLength(body []byte) int {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		return 0
	}
	var batch []json.RawMessage
	if json.Unmarshal(body, &batch) != nil {
		return 0
	}
	return len(batch)
}

// writeRPCError answers a request that the SDK never saw with one JSON-RPC error (id null:
// which request it answers cannot be told).
func writeRPCError(w http.ResponseWriter, status int, code int64, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": message}})
}

// cappedWriter holds the SDK's answer (which, in JSON, it writes whole at the end anyway) up to
// limit bytes; a longer one is dropped as it comes and answered with a JSON-RPC error instead,
// so that no request can make the process hold more.
type cappedWriter struct {
	w      http.ResponseWriter
	limit  int
	status int
	buf    bytes.Buffer
	over   bool
	// edit, when set, rewrites a complete answer before it is sent.
	edit func([]byte) []byte
}

func (c *cappedWriter) Header() http.Header { return c.w.Header() }

func (c *cappedWriter) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	if !c.over && c.buf.Len()+len(p) > c.limit {
		c.over, c.buf = true, bytes.Buffer{}
	}
	if !c.over {
		c.buf.Write(p)
	}
	return len(p), nil
}

func (c *cappedWriter) finish() {
	if c.over {
		c.w.Header().Del("Content-Length")
		writeRPCError(c.w, http.StatusInternalServerError, jsonrpc.CodeInternalError,
			fmt.Sprintf("the answer is larger than %d bytes: send fewer messages in one request", c.limit))
		return
	}
	if c.status == 0 {
		return
	}
	answer := c.buf.Bytes()
	if c.edit != nil && c.status == http.StatusOK {
		answer = c.edit(answer)
		c.w.Header().Del("Content-Length")
	}
	c.w.WriteHeader(c.status)
	_, _ = c.w.Write(answer)
}

// limitMethods spends the principal's rate limit on every method but tools/call (which spends
// it in MCP.call, answering as POST /v1/operations does) and notifications, which have no
// answer to refuse with.
func (m *MCP) limitMethods(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		caller := CallerFrom(ctx)
		if caller != nil && method != "tools/call" && !strings.HasPrefix(method, "notifications/") && !m.api.Limiter.Allow(caller.PrincipalID) {
			return nil, &jsonrpc.Error{Code: mcpCodeRateLimited,
				Message: "rate limited: too many requests for this principal; call again in a moment"}
		}
		return next(ctx, method, req)
	}
}
