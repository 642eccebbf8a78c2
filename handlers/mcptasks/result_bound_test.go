package mcptasks

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// workingStore is a task that never ends, read by a caller whose key is revoked after revokeAt
// reads.
type workingStore struct {
	reads    atomic.Int64
	revokeAt int64
}

func (s *workingStore) Get(context.Context, string) (Task, error) {
	if n := s.reads.Add(1); s.revokeAt > 0 && n >= s.revokeAt {
		return Task{}, ErrRevoked
	}
	return Task{ID: "op_1", Status: Working, PollInterval: time.Millisecond}, nil
}

func (s *workingStore) Cancel(context.Context, string) (Task, error) { return Task{}, ErrNotFound }

// tasks/result waits MaxResultWait at most, even for a request whose own context never ends
// (issue 47, finding 6: one waited 200 s), and a key revoked while it waits ends the wait with
// an error instead of a result.
func TestTasksResultIsBounded(t *testing.T) {
	resultWait = 1500 * time.Millisecond
	t.Cleanup(func() { resultWait = MaxResultWait })
	params := json.RawMessage(`{"taskId":"op_1"}`)

	start := time.Now()
	_, rpcErr := Answer(context.Background(), &workingStore{}, Utility, "tasks/result", params)
	require.NotNil(t, rpcErr)
	assert.Contains(t, rpcErr.Message, "still working: ask again")
	assert.Less(t, time.Since(start), 30*time.Second, "bounded by resultWait, not by the request")

	_, rpcErr = Answer(context.Background(), &workingStore{revokeAt: 2}, Utility, "tasks/result", params)
	require.NotNil(t, rpcErr)
	assert.Equal(t, "the API key was revoked", rpcErr.Message)
}
