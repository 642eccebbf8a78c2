package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBatchLength(t *testing.T) {
	for body, want := range map[string]int{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`: 0,
		` [{"id":1},{"id":2}]`:                     2,
		"[" + strings.Repeat(`{},`, 99) + `{}]`:    100,
		`[not json`:                                0,
	} {
		assert.Equal(t, want, batchLength([]byte(body)), body)
	}
}

// An answer past the bound is never passed on, whatever the SDK wrote: one JSON-RPC error is.
func TestCappedWriter(t *testing.T) {
	rec := httptest.NewRecorder()
	cw := &cappedWriter{w: rec, limit: 10}
	cw.Header().Set("Content-Type", "application/json")
	cw.WriteHeader(http.StatusOK)
	for range 3 {
		n, err := cw.Write([]byte("0123456"))
		require.NoError(t, err)
		assert.Equal(t, 7, n)
	}
	cw.finish()
	assert.Equal(t, http.StatusInternalServerError, rec.Code)
	var answer struct {
		Error struct {
			Code    int
			Message string
		}
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &answer))
	assert.Equal(t, -32603, answer.Error.Code)
	assert.Contains(t, answer.Error.Message, "larger than 10 bytes")

	rec = httptest.NewRecorder()
	cw = &cappedWriter{w: rec, limit: 10}
	cw.WriteHeader(http.StatusAccepted)
	_, _ = cw.Write([]byte("012"))
	cw.finish()
	assert.Equal(t, http.StatusAccepted, rec.Code)
	assert.Equal(t, "012", rec.Body.String(), "within the bound, passed on as written")
}
