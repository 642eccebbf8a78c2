package mcptest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Hostile is a Streamable HTTP MCP server, written by hand so that it can do what no SDK
// lets a server do: quote the bearer token it was sent in its errors and answers, refuse the
// first sessions, and stream an answer of any size without holding it. It answers every
// request in one JSON body (no event stream), statelessly.
type Hostile struct {
	// RefuseFirst is how many initialize requests are refused with a JSON-RPC error that
	// quotes the request's Authorization header, as a careless server's "invalid token …"
	// does.
	RefuseFirst int

	mu       sync.Mutex
	refused  int
	requests int
}

// Requests is how many POSTs the server received.
func (h *Hostile) Requests() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests
}

// Tools it lists: quote (answers the token it was sent) and stream (answers a text of
// "bytes" bytes, written as it goes).
var hostileTools = []map[string]any{
	{"name": "quote", "description": "Answers quoting the caller's credentials.", "inputSchema": map[string]any{"type": "object"}},
	{"name": "stream", "description": "Answers a text of the given size.",
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"bytes": map[string]any{"type": "integer"}}}},
}

func (h *Hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string         `json:"protocolVersion"`
			Name            string         `json:"name"`
			Arguments       map[string]any `json:"arguments"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.requests++
	refuse := req.Method == "initialize" && h.refused < h.RefuseFirst
	if refuse {
		h.refused++
	}
	h.mu.Unlock()
	auth := r.Header.Get("Authorization")
	switch {
	case req.ID == nil: // a notification
		w.WriteHeader(http.StatusAccepted)
	case refuse:
		writeRPC(w, http.StatusUnauthorized, req.ID, "error", map[string]any{"code": -32001, "message": "invalid token: " + auth})
	case req.Method == "initialize":
		version := req.Params.ProtocolVersion
		if version == "" {
			version = "2025-06-18"
		}
		writeRPC(w, http.StatusOK, req.ID, "result", map[string]any{"protocolVersion": version,
			"capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "hostile", "version": "1"}})
	case req.Method == "tools/list":
		writeRPC(w, http.StatusOK, req.ID, "result", map[string]any{"tools": hostileTools})
	case req.Method == "tools/call" && req.Params.Name == "quote":
		writeRPC(w, http.StatusOK, req.ID, "result", map[string]any{"content": []any{map[string]any{"type": "text", "text": "you sent " + auth}}})
	case req.Method == "tools/call" && req.Params.Name == "stream":
		n, _ := req.Params.Arguments["bytes"].(float64)
		streamText(w, req.ID, int64(n))
	default:
		writeRPC(w, http.StatusOK, req.ID, "error", map[string]any{"code": -32601, "message": "method not found"})
	}
}

func writeRPC(w http.ResponseWriter, status int, id json.RawMessage, member string, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, member: v})
}

// streamText answers a text result of n bytes, 64 KiB at a time: the server holds none of it.
func streamText(w http.ResponseWriter, id json.RawMessage, n int64) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, id); err != nil {
		return
	}
	chunk := strings.Repeat("x", 64<<10)
	for n > 0 {
		part := chunk[:min(int64(len(chunk)), n)]
		if _, err := io.WriteString(w, part); err != nil {
			return // the client stopped reading
		}
		n -= int64(len(part))
	}
	_, _ = io.WriteString(w, `"}]}}`+"\n")
}
