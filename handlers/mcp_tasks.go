package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/idemgate/idemgate/handlers/mcptasks"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An MCP task is an operation (docs/MCP.md): its taskId is the operation id, so it survives any
// restart of gateway or client and can also be found by key; its status is read from the
// ledger; a completed task's result is exactly what a plain call (a replay) answers.

// taskStore is the ledger seen as mcptasks.Store, for one caller.
type taskStore struct {
	api    *API
	caller *models.Caller
}

var _ mcptasks.Store = taskStore{}

func (s taskStore) Get(ctx context.Context, id string) (mcptasks.Task, error) {
	op, err := s.visible(ctx, id)
	if err != nil {
		return mcptasks.Task{}, err
	}
	return s.task(op)
}

func (s taskStore) Cancel(ctx context.Context, id string) (mcptasks.Task, error) {
	op, err := s.visible(ctx, id)
	if err != nil {
		return mcptasks.Task{}, err
	}
	cancelled, err := s.api.Ledger.Cancel(ctx, op.Tenant, op.ID, s.caller.Actor())
	if models.ErrorCode(err) == models.CodeNotCancellable {
		return mcptasks.Task{}, &mcptasks.NotCancellable{Reason: "operation " + op.ID + " was sent, or has ended: only what was never sent can be cancelled"}
	}
	if err != nil {
		return mcptasks.Task{}, err
	}
	return s.task(cancelled)
}

// visible is the caller's operation id; another tenant's, or one of a tool the key may not use,
// is not found. The key is checked again first: tasks/result answers long after the request was
// authenticated, and a key revoked meanwhile reads nothing more.
func (s taskStore) visible(ctx context.Context, id string) (*models.Operation, error) {
	active, err := s.api.Ledger.KeyActive(ctx, s.caller.Key.ID)
	if err != nil {
		return nil, err
	}
	if !active {
		return nil, mcptasks.ErrRevoked
	}
	op, err := s.api.Ledger.Get(ctx, s.caller.Tenant, id)
	if models.ErrorCode(err) == models.CodeNotFound || (err == nil && !s.caller.AllowsTool(op.Tool)) {
		return nil, mcptasks.ErrNotFound
	}
	return op, err
}

// task reads op as a task: working while it is not terminal, saying what it waits for;
// cancelled when cancelled; otherwise completed with the result a plain call answers, an
// error result included (the extension's rule for tool errors).
func (s taskStore) task(op *models.Operation) (mcptasks.Task, error) {
	t := mcptasks.Task{ID: op.ID, CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt,
		PollInterval: time.Duration(retryAfter(op)) * time.Second}
	if tool, ok := s.api.Catalog.Get(op.Tool); ok {
		t.TTL = tool.Retention
	}
	switch {
	case !op.State.Terminal():
		t.Status, t.StatusMessage = mcptasks.Working, waitingFor(op, toolOf(s.api.Catalog, op.Tool))
	case op.State == models.StateFailedFinal && op.ErrorClass != nil && *op.ErrorClass == models.ErrorCancelled:
		t.Status, t.StatusMessage = mcptasks.Cancelled, "cancelled before it was sent"
	default:
		res := jobs.SubmitResult{Op: op}
		var out *mcp.CallToolResult
		if tool, ok := s.api.Catalog.Get(op.Tool); ok && tool.MCP != nil {
			out = upstreamResult(tool, res)
		} else {
			out = operationResult(s.api.Catalog, res)
		}
		b, err := json.Marshal(out)
		if err != nil {
			return mcptasks.Task{}, fmt.Errorf("mcp task %s: %w", op.ID, err)
		}
		t.Status, t.Result = mcptasks.Completed, b
		t.StatusMessage = fmt.Sprintf("operation %s is %s", op.ID, op.State)
	}
	return t, nil
}

// waitingFor says what a task that is not terminal waits for.
func waitingFor(op *models.Operation, tool *catalog.Tool) string {
	switch op.State {
	case models.StateAwaitingApproval:
		return "waiting for a reviewer's approval in the idemgate console"
	case models.StateUnknown:
		return "the downstream may have performed it; " + uncertainBy(op, tool)
	case models.StatePending:
		if op.NextAttemptAt != nil {
			return "a retry is scheduled at " + op.NextAttemptAt.UTC().Format(time.RFC3339)
		}
		return "waiting to run"
	}
	return "running"
}

// revisionOf says how a request's protocol revision speaks tasks: the 2025-11-25 utility, the
// 2026-07-28 extension, or not at all (2025-06-18 and before).
func revisionOf(protocolVersion string) mcptasks.Revision {
	switch {
	case protocolVersion >= "2026-07-28":
		return mcptasks.ExtensionRevision
	case protocolVersion == "2025-11-25":
		return mcptasks.Utility
	}
	return mcptasks.None
}

// answerTasks answers a tasks/* request itself (the SDK serves no tasks), with its HTTP status.
// On 2026-07-28 the request must declare the extension in its own client capabilities, as
// every request of that revision carries them: one that does not is answered -32021
// (MissingRequiredClientCapability) with HTTP 400, and a tasks method not offered -32601 with
// HTTP 404, as that revision's Streamable HTTP transport answers a method it does not serve.
func (m *MCP) answerTasks(ctx context.Context, rev mcptasks.Revision, msg rpcMessage) ([]byte, int) {
	caller := CallerFrom(ctx)
	if caller != nil && !m.api.Limiter.Allow(caller.PrincipalID) {
		return rpcAnswer(msg["id"], nil, &mcptasks.RPCError{Code: mcpCodeRateLimited,
			Message: "rate limited: too many requests for this principal; call again in a moment"}), http.StatusOK
	}
	if rev == mcptasks.None || caller == nil {
		return rpcAnswer(msg["id"], nil, &mcptasks.RPCError{Code: -32601, Message: "method not found: " + msg.method()}), http.StatusOK
	}
	if rev == mcptasks.ExtensionRevision && mcptasks.Asked(msg["params"]) != mcptasks.ExtensionRevision {
		return rpcAnswer(msg["id"], nil, mcptasks.MissingCapability()), http.StatusBadRequest
	}
	if msg.method() == "tasks/result" {
		release, ok := m.resultWaits.acquire(caller.Key.ID)
		if !ok {
			return rpcAnswer(msg["id"], nil, &mcptasks.RPCError{Code: mcpCodeRateLimited, Message: fmt.Sprintf(
				"too many tasks/result waits for this API key at once (%d): poll with tasks/get, or wait for one to end", maxResultWaits)}), http.StatusOK
		}
		defer release()
	}
	res, rpcErr := mcptasks.Answer(ctx, taskStore{api: m.api, caller: caller}, rev, msg.method(), msg["params"])
	status := http.StatusOK
	if rpcErr != nil && rpcErr.Code == -32601 && rev == mcptasks.ExtensionRevision {
		status = http.StatusNotFound
	}
	return rpcAnswer(msg["id"], res, rpcErr), status
}

func rpcAnswer(id json.RawMessage, result any, rpcErr *mcptasks.RPCError) []byte {
	out := map[string]any{"jsonrpc": "2.0", "id": id}
	if rpcErr != nil {
		out["error"] = rpcErr
	} else {
		out["result"] = result
	}
	b, _ := json.Marshal(out)
	return append(b, '\n')
}

// taskAnswer turns the SDK's answer to a tools/call into a task where the request asked for
// one (2025-11-25: always) or allows one and the call would wait (2026-07-28: the operation is
// not terminal). A refusal stays what it is: there is no operation to follow.
func (m *MCP) taskAnswer(ctx context.Context, rev mcptasks.Revision) func([]byte) []byte {
	return func(answer []byte) []byte {
		var msg struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"result"`
		}
		if json.Unmarshal(answer, &msg) != nil {
			return answer
		}
		var op struct {
			ID    string       `json:"id"`
			State models.State `json:"state"`
		}
		if json.Unmarshal(msg.Result.Meta[MCPMetaOperation], &op) != nil || op.ID == "" {
			return answer
		}
		if rev == mcptasks.ExtensionRevision && op.State.Terminal() {
			return answer
		}
		caller := CallerFrom(ctx)
		if caller == nil {
			return answer
		}
		t, err := taskStore{api: m.api, caller: caller}.Get(ctx, op.ID)
		if err != nil {
			return answer
		}
		return rpcAnswer(msg.ID, mcptasks.CreateResult(rev, t), nil)
	}
}

// maxResultWaits bounds the tasks/result requests one API key may have waiting at once: each
// holds a connection and polls the ledger until its task ends or mcptasks.MaxResultWait passes.
const maxResultWaits = 8

// waitCounter counts the waits in progress per API key.
type waitCounter struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire takes a wait for key, unless it has maxResultWaits already; release gives it back.
func (w *waitCounter) acquire(key string) (release func(), ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[string]int{}
	}
	if w.n[key] >= maxResultWaits {
		return nil, false
	}
	w.n[key]++
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.n[key]--; w.n[key] == 0 {
			delete(w.n, key)
		}
	}, true
}
