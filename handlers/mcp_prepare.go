package handlers

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// What bounded does to a request before the SDK reads it, and to the answer after (SPEC §5a),
// where the SDK has no hook: it takes a tool's listed name and its own dotted name as the same
// tool, carries params.idempotencyKey (which the SDK's types drop) into _meta, answers a method
// it does not serve with a JSON-RPC error on every protocol revision, and advertises the
// idempotency capability the SDK's capability types cannot spell.

// mcpServed are the methods /mcp serves: the capabilities it declares (tools) and the
// protocol's own. Prompts, resources, completion and logging are not declared, so not served.
var mcpServed = map[string]bool{"initialize": true, "ping": true, "server/discover": true,
	"tools/list": true, "tools/call": true}

// MCPIdempotencyCapability is advertised under capabilities.tools.idempotency: where a client
// puts the key of a call (MCP's Request Idempotency proposal, SEP-3182).
var MCPIdempotencyCapability = map[string]any{"keyField": "idempotencyKey"}

// rpcMessage is one message of a request, its members as they came.
type rpcMessage map[string]json.RawMessage

func (m rpcMessage) method() string {
	var s string
	_ = json.Unmarshal(m["method"], &s)
	return s
}

// prepared is a request body as the SDK will read it, and what the answer needs.
type prepared struct {
	body []byte
	// refuse, when set, is the whole answer: a single request for a method not served.
	refuse []byte
	// advertise: the single request is initialize or server/discover, whose answer gets the
	// idempotency capability.
	advertise bool
	// renamed maps a tool's name as the client spelled it to its listed name, for the
	// Mcp-Name header (2026-07-28), which the SDK checks against the body.
	renamed map[string]string
}

// prepare reads a request body. What is not JSON-RPC it passes on as it is: the SDK answers it.
func (m *MCP) prepare(body []byte) prepared {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return prepared{body: body}
	}
	var msgs []rpcMessage
	batch := trimmed[0] == '['
	if batch {
		if json.Unmarshal(body, &msgs) != nil {
			return prepared{body: body}
		}
	} else {
		var one rpcMessage
		if json.Unmarshal(body, &one) != nil || one == nil {
			return prepared{body: body}
		}
		msgs = []rpcMessage{one}
	}
	changed := false
	out := prepared{body: body, renamed: map[string]string{}}
	for _, msg := range msgs {
		if msg.method() == "tools/call" && m.rewriteCall(msg, out.renamed) {
			changed = true
		}
	}
	if !batch {
		method, id := msgs[0].method(), msgs[0]["id"]
		switch {
		case id != nil && !mcpServed[method] && !strings.HasPrefix(method, "notifications/"):
			out.refuse, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
				"error": map[string]any{"code": jsonrpc.CodeMethodNotFound, "message": "method not found: " + method}})
			return out
		case method == "initialize" || method == "server/discover":
			out.advertise = true
		}
	}
	if changed {
		var err error
		if batch {
			out.body, err = json.Marshal(msgs)
		} else {
			out.body, err = json.Marshal(msgs[0])
		}
		if err != nil {
			out.body = body
		}
	}
	return out
}

// rewriteCall makes a tools/call's params what the SDK and the tool handler read: the tool's
// listed name for either spelling, and params.idempotencyKey in _meta. It reports a change.
func (m *MCP) rewriteCall(msg rpcMessage, renamed map[string]string) bool {
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil || params == nil {
		return false
	}
	changed := false
	var name string
	if json.Unmarshal(params["name"], &name) == nil {
		if t, ok := m.api.Catalog.Get(name); ok && t.FunctionName() != name {
			params["name"], _ = json.Marshal(t.FunctionName())
			renamed[name] = t.FunctionName()
			changed = true
		}
	}
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(params["_meta"], &meta)
	if _, forged := meta[MCPMetaRuntimeKey]; forged {
		delete(meta, MCPMetaRuntimeKey) // only the request's idempotencyKey may set it
		changed = true
	}
	if key, ok := params["idempotencyKey"]; ok {
		if meta == nil {
			meta = map[string]json.RawMessage{}
		}
		meta[MCPMetaRuntimeKey] = key
		delete(params, "idempotencyKey")
		changed = true
	}
	if !changed {
		return false
	}
	if meta != nil {
		params["_meta"], _ = json.Marshal(meta)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return false
	}
	msg["params"] = raw
	return true
}

// advertiseIdempotency adds capabilities.tools.idempotency to an initialize or server/discover
// answer. Anything it cannot read it leaves as it is.
func advertiseIdempotency(answer []byte) []byte {
	var msg map[string]any
	if json.Unmarshal(answer, &msg) != nil {
		return answer
	}
	result, _ := msg["result"].(map[string]any)
	caps, _ := result["capabilities"].(map[string]any)
	if caps == nil {
		return answer
	}
	tools, _ := caps["tools"].(map[string]any)
	if tools == nil {
		tools = map[string]any{}
	}
	tools["idempotency"] = MCPIdempotencyCapability
	caps["tools"] = tools
	out, err := json.Marshal(msg)
	if err != nil {
		return answer
	}
	return append(out, '\n')
}
