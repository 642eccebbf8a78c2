package mcptasks

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// store is a Store of fixed tasks, for the wire shapes; the ledger's own is tested end to end.
type store map[string]Task

func (s store) Get(_ context.Context, id string) (Task, error) {
	t, ok := s[id]
	if !ok {
		return Task{}, ErrNotFound
	}
	return t, nil
}

func (s store) Cancel(ctx context.Context, id string) (Task, error) {
	t, err := s.Get(ctx, id)
	if err != nil {
		return Task{}, err
	}
	if t.Status != Working {
		return Task{}, &NotCancellable{Reason: "it was sent"}
	}
	t.Status = Cancelled
	s[id] = t
	return t, nil
}

var at = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

func TestAsked(t *testing.T) {
	t.Parallel()
	for params, want := range map[string]Revision{
		`{"name":"x"}`:                   None,
		`{"name":"x","task":null}`:       None,
		`{"name":"x","task":{}}`:         Utility,
		`{"name":"x","task":{"ttl":10}}`: Utility,
		`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`: ExtensionRevision,
		`{"name":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"other/ext":{}}}}}`:                                                                            None,
		`not json`: None,
	} {
		assert.Equal(t, want, Asked(json.RawMessage(params)), params)
	}
}

func TestWireShapes(t *testing.T) {
	t.Parallel()
	task := Task{ID: "op_1", Status: Working, StatusMessage: "waiting for a reviewer", CreatedAt: at, UpdatedAt: at.Add(time.Second),
		TTL: time.Hour, PollInterval: 5 * time.Second}
	created, err := json.Marshal(CreateResult(ExtensionRevision, task))
	require.NoError(t, err)
	assert.JSONEq(t, `{"resultType":"task","taskId":"op_1","status":"working","statusMessage":"waiting for a reviewer",
		"createdAt":"2026-12-03T10:00:00Z","lastUpdatedAt":"2026-12-03T10:00:01Z","ttlMs":3600000,"pollIntervalMs":5000}`, string(created))
	created, err = json.Marshal(CreateResult(Utility, task))
	require.NoError(t, err)
	assert.JSONEq(t, `{"task":{"taskId":"op_1","status":"working","statusMessage":"waiting for a reviewer",
		"createdAt":"2026-12-03T10:00:00Z","lastUpdatedAt":"2026-12-03T10:00:01Z","ttl":3600000,"pollInterval":5000}}`, string(created))
	task.TTL = 0
	created, err = json.Marshal(CreateResult(ExtensionRevision, task))
	require.NoError(t, err)
	assert.Contains(t, string(created), `"ttlMs":null`, "unlimited")
}

func TestAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := store{
		"done":    {ID: "done", Status: Completed, CreatedAt: at, UpdatedAt: at, Result: json.RawMessage(`{"content":[],"isError":false}`)},
		"waiting": {ID: "waiting", Status: Working, CreatedAt: at, UpdatedAt: at},
	}
	res, rpcErr := Answer(ctx, s, ExtensionRevision, "tasks/get", json.RawMessage(`{"taskId":"done"}`))
	require.Nil(t, rpcErr)
	b, _ := json.Marshal(res)
	assert.JSONEq(t, `{"resultType":"complete","taskId":"done","status":"completed","createdAt":"2026-12-03T10:00:00Z",
		"lastUpdatedAt":"2026-12-03T10:00:00Z","ttlMs":null,"pollIntervalMs":500,"result":{"content":[],"isError":false}}`, string(b))

	res, rpcErr = Answer(ctx, s, Utility, "tasks/result", json.RawMessage(`{"taskId":"done"}`))
	require.Nil(t, rpcErr)
	b, _ = json.Marshal(res)
	assert.JSONEq(t, `{"content":[],"isError":false,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"done"}}}`, string(b))

	_, rpcErr = Answer(ctx, s, ExtensionRevision, "tasks/cancel", json.RawMessage(`{"taskId":"done"}`))
	require.NotNil(t, rpcErr)
	assert.EqualValues(t, -32602, rpcErr.Code, "what has run cannot be cancelled")
	res, rpcErr = Answer(ctx, s, ExtensionRevision, "tasks/cancel", json.RawMessage(`{"taskId":"waiting"}`))
	require.Nil(t, rpcErr)
	assert.Equal(t, map[string]any{"resultType": "complete"}, res)
	assert.Equal(t, Cancelled, s["waiting"].Status)

	for _, c := range []struct {
		rev    Revision
		method string
		params string
		code   int64
	}{
		{ExtensionRevision, "tasks/get", `{"taskId":"nope"}`, -32602},
		{ExtensionRevision, "tasks/get", `{}`, -32602},
		{ExtensionRevision, "tasks/update", `{"taskId":"done","inputResponses":{}}`, -32601},
		{ExtensionRevision, "tasks/result", `{"taskId":"done"}`, -32601},
		{Utility, "tasks/list", `{}`, -32601},
	} {
		_, rpcErr := Answer(ctx, s, c.rev, c.method, json.RawMessage(c.params))
		require.NotNil(t, rpcErr, "%s %s", c.method, c.params)
		assert.Equal(t, c.code, rpcErr.Code, "%s %s", c.method, c.params)
	}
}
