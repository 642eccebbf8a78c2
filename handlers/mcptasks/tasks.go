// Package mcptasks speaks MCP's tasks at the JSON-RPC layer, beside a server that does not (the
// Go SDK has none yet): the Tasks extension of the 2026-07-28 revision
// (io.modelcontextprotocol/tasks, SEP-2663) and the tasks utility of 2025-11-25. It reads what a
// request asks for, shapes tasks and their results on the wire of each revision, and answers
// tasks/get, tasks/cancel and tasks/result from a Store; what a task is (for idemgate: an
// operation of the ledger) is the Store's.
package mcptasks

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Extension is the Tasks extension's identifier (2026-07-28).
const Extension = "io.modelcontextprotocol/tasks"

// MetaClientCapabilities is where a 2026-07-28 request carries its client's capabilities.
const MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"

// MetaRelatedTask names, on 2025-11-25, the task a message is about.
const MetaRelatedTask = "io.modelcontextprotocol/related-task"

// Revision is how a request speaks tasks.
type Revision int

const (
	// None: the request neither declared the extension nor asked for a task; a task must
	// not be answered.
	None Revision = iota
	// Utility: the 2025-11-25 tasks utility; the request asked for a task (params.task),
	// so it gets one, at once.
	Utility
	// ExtensionRevision: the 2026-07-28 extension; the client declared it, so the server
	// may answer a task where the call would wait.
	ExtensionRevision
)

// Status is a task's status on the wire.
type Status string

const (
	Working   Status = "working"
	Completed Status = "completed"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
)

// Terminal reports whether a task in s will change no more.
func (s Status) Terminal() bool { return s == Completed || s == Failed || s == Cancelled }

// Task is what a Store knows of one task.
type Task struct {
	ID            string
	Status        Status
	StatusMessage string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// TTL is how long the task is kept after it was created; 0 for unlimited.
	TTL time.Duration
	// PollInterval is when to ask again.
	PollInterval time.Duration
	// Result is the request's own result (a CallToolResult) when Status is Completed.
	Result json.RawMessage
	// Error is the JSON-RPC error when Status is Failed.
	Error *RPCError
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return e.Message }

// The errors a Store answers with.
var (
	// ErrNotFound: no such task for this caller (another tenant's is not found either).
	ErrNotFound = errors.New("mcptasks: no such task")
	// ErrRevoked: the caller's key was revoked since the request was authenticated.
	ErrRevoked = errors.New("mcptasks: the API key was revoked")
)

// NotCancellable says why a task cannot be cancelled.
type NotCancellable struct{ Reason string }

func (e *NotCancellable) Error() string { return "the task cannot be cancelled: " + e.Reason }

// Store is where tasks live.
type Store interface {
	// Get returns the task taskID of the request's caller.
	Get(ctx context.Context, taskID string) (Task, error)
	// Cancel cancels it, or says why not (*NotCancellable).
	Cancel(ctx context.Context, taskID string) (Task, error)
}

// Asked reads what a tools/call's params ask of tasks: params.task (2025-11-25) asks for
// one; the extension declared in _meta's client capabilities (2026-07-28) allows one.
func Asked(params json.RawMessage) Revision {
	var p struct {
		Task json.RawMessage            `json:"task"`
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return None
	}
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(p.Meta[MetaClientCapabilities], &caps) == nil {
		if _, ok := caps.Extensions[Extension]; ok {
			return ExtensionRevision
		}
	}
	if len(p.Task) > 0 && string(p.Task) != "null" {
		return Utility
	}
	return None
}

// wire is a task as each revision spells it.
func (t Task) wire(rev Revision, detailed bool) map[string]any {
	m := map[string]any{"taskId": t.ID, "status": t.Status,
		"createdAt": t.CreatedAt.UTC().Format(time.RFC3339Nano), "lastUpdatedAt": t.UpdatedAt.UTC().Format(time.RFC3339Nano)}
	if t.StatusMessage != "" {
		m["statusMessage"] = t.StatusMessage
	}
	var ttl any // null: unlimited
	if t.TTL > 0 {
		ttl = t.TTL.Milliseconds()
	}
	poll := max(t.PollInterval, 500*time.Millisecond).Milliseconds()
	if rev == Utility {
		m["ttl"], m["pollInterval"] = ttl, poll
		return m
	}
	m["ttlMs"], m["pollIntervalMs"] = ttl, poll
	if detailed {
		switch {
		case t.Status == Completed && t.Result != nil:
			m["result"] = t.Result
		case t.Status == Failed && t.Error != nil:
			m["error"] = t.Error
		}
	}
	return m
}

// CreateResult is the answer to a tools/call that became task t.
func CreateResult(rev Revision, t Task) map[string]any {
	if rev == Utility {
		return map[string]any{"task": t.wire(rev, false)}
	}
	m := t.wire(rev, false)
	m["resultType"] = "task"
	return m
}

// Methods are the methods a revision adds; Handles reports whether method is one of them.
func Handles(method string) bool {
	switch method {
	case "tasks/get", "tasks/cancel", "tasks/result", "tasks/update", "tasks/list":
		return true
	}
	return false
}

// Answer answers one tasks/* request of revision rev (Utility for 2025-11-25, anything else
// for 2026-07-28) with its JSON-RPC result or error.
func Answer(ctx context.Context, s Store, rev Revision, method string, params json.RawMessage) (any, *RPCError) {
	var p struct {
		TaskID string `json:"taskId"`
	}
	if method != "tasks/list" && (json.Unmarshal(params, &p) != nil || p.TaskID == "") {
		return nil, &RPCError{Code: codeInvalidParams, Message: "params.taskId is required"}
	}
	switch {
	case method == "tasks/get":
		t, err := s.Get(ctx, p.TaskID)
		if err != nil {
			return nil, storeError(err)
		}
		if rev == Utility {
			return t.wire(rev, false), nil
		}
		m := t.wire(rev, true)
		m["resultType"] = "complete"
		return m, nil
	case method == "tasks/cancel":
		t, err := s.Cancel(ctx, p.TaskID)
		if err != nil {
			return nil, storeError(err)
		}
		if rev == Utility {
			return t.wire(rev, false), nil
		}
		return map[string]any{"resultType": "complete"}, nil
	case method == "tasks/result" && rev == Utility:
		return result(ctx, s, p.TaskID)
	}
	// tasks/update (no task of ours asks for input), tasks/list (not offered), and
	// tasks/result on 2026-07-28 (where tasks/get carries the result).
	return nil, &RPCError{Code: codeMethodNotFound, Message: "method not found: " + method}
}

// MaxResultWait bounds how long tasks/result waits for a task to end, as Prefer: wait is
// bounded on the JSON API: a client that wants longer asks again (or polls tasks/get).
const MaxResultWait = 60 * time.Second

// resultWait is MaxResultWait, shortened by tests.
var resultWait = MaxResultWait

// result answers tasks/result (2025-11-25): the request's own result once the task is
// terminal, waiting for it while the request lasts, MaxResultWait at most. Every look goes
// through the Store, which answers for the caller as they are now (a key revoked meanwhile).
func result(ctx context.Context, s Store, id string) (any, *RPCError) {
	ctx, cancel := context.WithTimeout(ctx, resultWait)
	defer cancel()
	for {
		t, err := s.Get(ctx, id)
		if err != nil {
			return nil, storeError(err)
		}
		switch {
		case t.Status == Completed && t.Result != nil:
			var r map[string]any
			if json.Unmarshal(t.Result, &r) != nil {
				return nil, &RPCError{Code: codeInternal, Message: "the task's result cannot be read"}
			}
			meta, _ := r["_meta"].(map[string]any)
			if meta == nil {
				meta = map[string]any{}
			}
			meta[MetaRelatedTask] = map[string]any{"taskId": id}
			r["_meta"] = meta
			return r, nil
		case t.Status == Failed && t.Error != nil:
			return nil, t.Error
		case t.Status.Terminal():
			return nil, &RPCError{Code: codeInvalidParams, Message: "the task ended " + string(t.Status) + " without a result"}
		}
		select {
		case <-ctx.Done():
			return nil, &RPCError{Code: codeInternal, Message: "the task is still " + string(t.Status) + ": ask again with tasks/get"}
		case <-time.After(max(t.PollInterval, 200*time.Millisecond)):
		}
	}
}

func storeError(err error) *RPCError {
	var nc *NotCancellable
	switch {
	case errors.Is(err, ErrNotFound):
		return &RPCError{Code: codeInvalidParams, Message: "no such task"}
	case errors.Is(err, ErrRevoked):
		return &RPCError{Code: codeInvalidParams, Message: "the API key was revoked"}
	case errors.As(err, &nc):
		return &RPCError{Code: codeInvalidParams, Message: nc.Error()}
	}
	return &RPCError{Code: codeInternal, Message: "the task could not be read"}
}

// JSON-RPC error codes.
const (
	codeInvalidParams  = -32602
	codeMethodNotFound = -32601
	codeInternal       = -32603
)

// Capabilities2025 is what a server offering the 2025-11-25 utility declares under
// capabilities.tasks: cancelling, and task-augmented tools/call (no tasks/list).
var Capabilities2025 = map[string]any{"cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}

// MissingCapability is the error of a request that needs the extension but did not declare it
// (2026-07-28: -32021, MissingRequiredClientCapability, naming what is required).
func MissingCapability() *RPCError {
	return &RPCError{Code: codeMissingCapability, Message: "Missing required client capability",
		Data: map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{Extension: map[string]any{}}}}}
}

const codeMissingCapability = -32021
