package handlers

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTaskSupportMarksEveryTool: each tool of a tools/list answer gains execution.taskSupport
// "optional", everything else stays as it was (other members, their order, the cursor, an
// empty tool); an answer that is not a tools/list, or a tool that already says how it runs, is
// returned unchanged.
func TestTaskSupportMarksEveryTool(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":3,"result":{"nextCursor":"c","tools":[` +
		`{"name":"a","inputSchema":{"type":"object","properties":{"execution":{"type":"string"}}}},` +
		` {} , {"name":"b","_meta":{"x":[1,2]}}]}}` + "\n"
	out := taskSupport([]byte(in))
	var got struct {
		ID     int `json:"id"`
		Result struct {
			NextCursor string           `json:"nextCursor"`
			Tools      []map[string]any `json:"tools"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	assert.Equal(t, 3, got.ID)
	assert.Equal(t, "c", got.Result.NextCursor)
	require.Len(t, got.Result.Tools, 3)
	for _, tool := range got.Result.Tools {
		assert.Equal(t, map[string]any{"taskSupport": "optional"}, tool["execution"], string(out))
	}
	assert.Equal(t, "a", got.Result.Tools[0]["name"])
	assert.Contains(t, got.Result.Tools[0]["inputSchema"], "properties", "a schema's own execution property is not the tool's")
	assert.Equal(t, map[string]any{"x": []any{1.0, 2.0}}, got.Result.Tools[2]["_meta"])

	for _, same := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","execution":{"taskSupport":"required"}}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":["not an object"]}}`,
		`not json`,
	} {
		assert.Equal(t, same, string(taskSupport([]byte(same))), same)
	}
}
