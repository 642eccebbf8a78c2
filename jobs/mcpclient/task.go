package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An upstream tool that declares execution.taskSupport "required" (MCP 2025-11-25's tasks
// utility) answers a tools/call only as a task: the call asks for one (params.task), the
// server answers a task handle at once, and the result is fetched with tasks/result once
// tasks/get says the task has ended. The pool does that within the call's timeout, so to the
// executor a task tool is a call like any other: one tools/call, one upstream task, per
// attempt. (Tools that merely allow a task are called plainly.)

// taskTTLMargin is how long after the call's timeout the server is asked to keep the task.
const taskTTLMargin = time.Minute

// Poll intervals: the server's suggestion, within these bounds.
const (
	minTaskPoll     = 100 * time.Millisecond
	maxTaskPoll     = 5 * time.Second
	defaultTaskPoll = 500 * time.Millisecond
)

// upstreamTask is a task as the 2025-11-25 utility spells it.
type upstreamTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	PollInterval  *int64 `json:"pollInterval"`
}

func (t upstreamTask) poll() time.Duration {
	if t.PollInterval == nil {
		return defaultTaskPoll
	}
	return min(max(time.Duration(*t.PollInterval)*time.Millisecond, minTaskPoll), maxTaskPoll)
}

// errTaskSent marks an error that came after the server accepted the task: whatever the
// transport or the server says, the call was sent and may have had its effect. (It does not
// unwrap: a JSON-RPC error inside must not read as "nothing ran".)
type errTaskSent struct {
	task string
	err  error
}

func (e *errTaskSent) Error() string { return fmt.Sprintf("upstream task %s: %v", e.task, e.err) }

// callTask runs one tools/call as an upstream task on raw: the creating request under ctx (which
// carries the call's mark), the polls under polls (which does not: by then the call was sent).
// It returns the result and the task's id ("" when the server answered at once).
func callTask(ctx, polls context.Context, raw rawCaller, params *mcp.CallToolParams, ttl time.Duration) (*mcp.CallToolResult, string, error) {
	created, err := raw.call(ctx, "tools/call", map[string]any{
		"name": params.Name, "arguments": params.Arguments, "_meta": params.Meta,
		"task": map[string]any{"ttl": ttl.Milliseconds()},
	})
	if err != nil {
		return nil, "", err
	}
	var handle struct {
		Task *upstreamTask `json:"task"`
	}
	if err := json.Unmarshal(created, &handle); err != nil {
		return nil, "", fmt.Errorf("reading the task: %w", err)
	}
	if handle.Task == nil || handle.Task.TaskID == "" {
		// The server ran the call at once and answered its result.
		res, err := decodeResult(created)
		return res, "", err
	}
	t := *handle.Task
	for !terminal(t.Status) {
		select {
		case <-polls.Done():
			why := fmt.Errorf("still %s after the call's timeout", t.Status)
			if t.Status == "input_required" {
				why = errors.New("it asks for input, which the gateway cannot give")
			}
			return nil, t.TaskID, &errTaskSent{task: t.TaskID, err: errors.Join(why, polls.Err())}
		case <-time.After(t.poll()):
		}
		got, err := raw.call(polls, "tasks/get", map[string]any{"taskId": t.TaskID})
		if err != nil && polls.Err() != nil {
			// The timeout cut the poll short: the task was still running, as far as is known.
			return nil, t.TaskID, &errTaskSent{task: t.TaskID, err: errors.Join(fmt.Errorf("still %s after the call's timeout", t.Status), polls.Err())}
		}
		if err != nil {
			return nil, t.TaskID, &errTaskSent{task: t.TaskID, err: err}
		}
		if err := json.Unmarshal(got, &t); err != nil {
			return nil, t.TaskID, &errTaskSent{task: t.TaskID, err: fmt.Errorf("reading tasks/get: %w", err)}
		}
	}
	if t.Status == "cancelled" {
		// Not by the gateway: whatever it had done by then is unknown.
		return nil, t.TaskID, &errTaskSent{task: t.TaskID, err: errors.New("the server cancelled it")}
	}
	res, err := raw.call(polls, "tasks/result", map[string]any{"taskId": t.TaskID})
	if err != nil {
		// Even a JSON-RPC error here is no proof that nothing ran: the task did run (or its
		// record expired). Ambiguous, with what the server said.
		return nil, t.TaskID, &errTaskSent{task: t.TaskID, err: err}
	}
	out, err := decodeResult(res)
	return out, t.TaskID, err
}

func terminal(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

func decodeResult(data json.RawMessage) (*mcp.CallToolResult, error) {
	var res mcp.CallToolResult
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("reading the result: %w", err)
	}
	return &res, nil
}
