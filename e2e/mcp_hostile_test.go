package e2e_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/mcptest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostileStdioTools puts the fault server behind the gateway with an API key in its env (a
// secret reference, as a credential must be) and a sensitive param on the tool that quotes.
const hostileStdioTools = `
mcp_servers:
  - name: hostile
    command: [{{BINARY}}, -test.run=^$]
    env: {IDEMGATE_MCPTEST_STATE: {{STATE}}, FAULT_API_KEY: {file: {{KEYFILE}}}}
    timeout: 2s
    tools:
      - upstream: quote_key
        effect: write
        sensitive_params: [card]
        retry: {max_attempts: 8, initial_backoff: 100ms, max_backoff: 1s}
      - upstream: huge
        effect: write
        retry: {max_attempts: 1}
      # Room for calls sent while the server restarts: not sent, and retried.
      - upstream: charge
        retry: {max_attempts: 8, initial_backoff: 100ms, max_backoff: 1s}
`

const (
	hostileAPIKey = "upk_live_9f8e7d6c5b4a39281706"
	hostileCard   = "4242424242424242"
)

// TestHostileStdioServer: a stdio server that quotes the API key of its env in its answers,
// logs every call's arguments (a card number) on standard error, forges idemgate's own _meta,
// answers 3 MB, and stops answering anything. The key and the card appear nowhere the gateway writes (the
// ledger, the API, the log); the forged _meta is dropped and the vendor's kept; the huge
// answer is an ambiguous attempt that says why, and the frozen server is restarted, so the next
// call answers. Both engines.
func TestHostileStdioServer(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		bin, err := os.Executable()
		require.NoError(t, err)
		state := mcptest.State{Dir: t.TempDir()}
		keyFile := filepath.Join(t.TempDir(), "api-key")
		require.NoError(t, os.WriteFile(keyFile, []byte(hostileAPIKey+"\n"), 0o600))
		tools := strings.NewReplacer("{{BINARY}}", bin, "{{STATE}}", state.Dir, "{{KEYFILE}}", keyFile).Replace(hostileStdioTools)
		log := &lockedBuffer{}
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: tools, LogTo: log})

		r := g.Submit(t, "quote-1", "hostile.quote_key", `{"card":"`+hostileCard+`"}`, map[string]string{"Prefer": "wait=10"})
		op := requireOp(t, r, http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"], "%s", r.Body)
		assert.Equal(t, map[string]any{"message": "used API key ***", "card": "***"}, op["result"])
		gatewaytest.Eventually(t, 10*time.Second, "the server's standard error in the log", func() bool {
			return strings.Contains(log.String(), "quote_key called with")
		})

		// 3 MB, past the default max_result_bytes of 1 MiB.
		big := requireOp(t, g.Submit(t, "huge-1", "hostile.huge", `{"bytes":3000000}`, map[string]string{"Prefer": "wait=10"}), http.StatusAccepted)
		require.Equal(t, "UNKNOWN", big["state"])
		assert.Contains(t, errorMember(t, big)["message"], "max_result_bytes")

		// A charge after which the server answers nothing more: no answer within 2 s; the server
		// is restarted, so the next call is answered.
		require.NoError(t, state.Cue("freeze"))
		hung := requireOp(t, g.Submit(t, "hang-1", "hostile.charge", `{"amount":5}`, map[string]string{"Prefer": "wait=15"}), http.StatusAccepted)
		require.Equal(t, "UNKNOWN", hung["state"])
		assert.Contains(t, errorMember(t, hung)["message"], "no answer within 2s")
		start := time.Now()
		next := requireOp(t, g.Submit(t, "quote-2", "hostile.quote_key", `{"card":"`+hostileCard+`"}`, map[string]string{"Prefer": "wait=30"}), http.StatusCreated)
		assert.Equal(t, "SUCCEEDED", next["state"], "the next call is not stuck behind the frozen server")
		t.Logf("the call after the frozen server answered in %s", time.Since(start).Round(time.Millisecond))

		var all strings.Builder
		for _, id := range []string{op["id"].(string), big["id"].(string), hung["id"].(string), next["id"].(string)} {
			all.Write(getOp(t, g, g.Key, id).Body)
			all.Write(g.Do(t, http.MethodGet, "/v1/operations/"+id+"/events", g.Key, nil, "").Body)
		}
		all.WriteString(log.String())
		for _, leak := range []string{hostileAPIKey, hostileCard, "op_forged", `"forged"`} {
			assert.NotContains(t, all.String(), leak)
		}
		// The ledger keeps the params as given (sealed only under a data key: TestSensitive…);
		// what the server sent back is kept scrubbed.
		db := dumpDatabase(t, g.Ledger.DB())
		for _, leak := range []string{hostileAPIKey, "op_forged", `"forged"`} {
			assert.NotContains(t, db, leak)
		}
		assert.Contains(t, db, "vendor/trace", "the upstream's own _meta is kept")
		assert.Contains(t, log.String(), "using key ***", "the stderr line is logged, scrubbed")
	})
}
