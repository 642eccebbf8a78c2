package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/idemgate/idemgate/handlers/mcptasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// What bounded does to a request before the SDK reads it, and to the answer after (docs/MCP.md),
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
	// refuse, when set, is the whole answer (with status): a single request for a method not
	// served.
	refuse []byte
	status int
	// tasks is a single tasks/* request, which bounded answers itself (the SDK has no tasks).
	tasks rpcMessage
	// rev is how the request's revision speaks tasks.
	rev mcptasks.Revision
	// advertise: the single request is initialize or server/discover, whose answer gets the
	// idempotency capability (and tasks, where the revision has them).
	advertise bool
	// task: the single request is a tools/call that asks for a task (2025-11-25) or allows
	// one (2026-07-28), whose answer may become one.
	task mcptasks.Revision
	// listing: a tools/list on 2025-11-25, whose tools say they may be called as tasks.
	listing bool
	// renamed maps a tool's name as the client spelled it to its listed name, for the
	// Mcp-Name header (2026-07-28), which the SDK checks against the body.
	renamed map[string]string
}

// prepare reads a request body of protocol revision version. What is not JSON-RPC it passes on
// as it is: the SDK answers it.
func (m *MCP) prepare(body []byte, version string) prepared {
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
	out := prepared{body: body, renamed: map[string]string{}, rev: revisionOf(version)}
	for _, msg := range msgs {
		if msg.method() == "tools/call" && m.rewriteCall(msg, out.renamed) {
			changed = true
		}
	}
	if !batch {
		method, id := msgs[0].method(), msgs[0]["id"]
		switch {
		case id != nil && mcptasks.Handles(method):
			out.tasks = msgs[0]
			return out
		case method == "tools/call" && out.rev != mcptasks.None && mcptasks.Asked(msgs[0]["params"]) == out.rev:
			out.task = out.rev
			if out.rev == mcptasks.Utility && noWaitAsked(msgs[0]) {
				changed = true // a task is answered at once: the call is not waited for
			}
		case method == "tools/list" && out.rev == mcptasks.Utility:
			out.listing = true
		case id != nil && !mcpServed[method] && !strings.HasPrefix(method, "notifications/"):
			out.refuse, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
				"error": map[string]any{"code": jsonrpc.CodeMethodNotFound, "message": "method not found: " + method}})
			out.status = http.StatusOK
			if out.rev == mcptasks.ExtensionRevision {
				// 2026-07-28's Streamable HTTP: a method the server does not serve is a 404.
				out.status = http.StatusNotFound
			}
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

// advertise returns the edit of an initialize or server/discover answer of revision rev: it
// adds capabilities.tools.idempotency, and the tasks this revision speaks
// (capabilities.tasks on 2025-11-25, the extension in capabilities.extensions on 2026-07-28).
// Anything it cannot read it leaves as it is.
func advertise(rev mcptasks.Revision) func([]byte) []byte {
	return func(answer []byte) []byte { return advertiseIn(answer, rev) }
}

func advertiseIn(answer []byte, rev mcptasks.Revision) []byte {
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
	switch rev {
	case mcptasks.Utility:
		caps["tasks"] = mcptasks.Capabilities2025
	case mcptasks.ExtensionRevision:
		ext, _ := caps["extensions"].(map[string]any)
		if ext == nil {
			ext = map[string]any{}
		}
		ext[mcptasks.Extension] = map[string]any{}
		caps["extensions"] = ext
	}
	out, err := json.Marshal(msg)
	if err != nil {
		return answer
	}
	return append(out, '\n')
}

// noWaitAsked makes a tools/call that asked for a task (2025-11-25) answer at once, setting
// _meta "idemgate/wait" to 0 unless the request set it, and reports whether it did.
func noWaitAsked(msg rpcMessage) bool {
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil || params == nil {
		return false
	}
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(params["_meta"], &meta)
	if _, set := meta[MCPMetaWait]; set {
		return false
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[MCPMetaWait] = json.RawMessage("0")
	params["_meta"], _ = json.Marshal(meta)
	raw, err := json.Marshal(params)
	if err != nil {
		return false
	}
	msg["params"] = raw
	return true
}

// taskSupport marks every tool of a tools/list answer as callable as a task (2025-11-25's
// execution.taskSupport; the SDK's Tool has no such field). Anything it cannot read it leaves.
//
// The member is spliced into each tool's object where it starts, the rest of the answer copied
// as it is: decoding and encoding the whole answer again cost as much as building it (with
// Stripe's 594 tools, 2.2 MB, it was 39 % of a tools/list's CPU).
func taskSupport(answer []byte) []byte {
	starts, ok := toolObjects(answer)
	if !ok {
		return answer
	}
	const member = `"execution":{"taskSupport":"optional"}`
	out := make([]byte, 0, len(answer)+len(starts)*(len(member)+1))
	last := 0
	for _, at := range starts {
		out = append(out, answer[last:at+1]...) // up to and with the tool's '{'
		out = append(out, member...)
		if rest := bytes.TrimLeft(answer[at+1:], " \t\r\n"); len(rest) > 0 && rest[0] != '}' {
			out = append(out, ',')
		}
		last = at + 1
	}
	return append(out, answer[last:]...)
}

// toolObjects finds where each tool object of a tools/list answer (result.tools[i]) starts. It
// fails on anything else, and on a tool that already has an execution member (it is not
// written twice).
func toolObjects(answer []byte) (starts []int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(answer))
	enter := func(delim json.Delim) bool {
		tok, err := dec.Token()
		return err == nil && tok == delim
	}
	// seek reads the members of the object just entered until key, skipping the others.
	seek := func(key string) bool {
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return false
			}
			if tok == key {
				return true
			}
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return false
			}
		}
		return false
	}
	if !enter('{') || !seek("result") || !enter('{') || !seek("tools") || !enter('[') {
		return nil, false
	}
	for dec.More() {
		var tool json.RawMessage
		if err := dec.Decode(&tool); err != nil || len(tool) == 0 || tool[0] != '{' {
			return nil, false
		}
		if bytes.Contains(tool, []byte(`"execution"`)) { // rare: decode it to know where the name is
			var members map[string]json.RawMessage
			if json.Unmarshal(tool, &members) != nil {
				return nil, false
			}
			if _, has := members["execution"]; has {
				return nil, false
			}
		}
		starts = append(starts, int(dec.InputOffset())-len(tool))
	}
	return starts, true
}
