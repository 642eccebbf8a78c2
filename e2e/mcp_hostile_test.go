package e2e_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/mcptest"
	"github.com/idemgate/idemgate/internal/toolsimport"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/mcpclient"
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
      # Room for calls sent while the server restarts: not sent, and retried.
      - upstream: charge
        retry: {max_attempts: 8, initial_backoff: 100ms, max_backoff: 1s}
  # The same server again, for the huge answer: its bound, not a timeout, must end the call,
  # however slowly a loaded machine writes 3 MB (the first one's 2 s is for the frozen server).
  - name: bighostile
    command: [{{BINARY}}, -test.run=^$]
    env: {IDEMGATE_MCPTEST_STATE: {{STATE}}, FAULT_API_KEY: {file: {{KEYFILE}}}}
    timeout: 60s
    tools:
      - upstream: huge
        effect: write
        retry: {max_attempts: 1}
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
		big := requireOp(t, g.Submit(t, "huge-1", "bighostile.huge", `{"bytes":3000000}`, map[string]string{"Prefer": "wait=60"}), http.StatusAccepted)
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

const hostileHTTPTools = `
connections:
  - name: upstream
    auth: {bearer: {file: {{KEYFILE}}}}
mcp_servers:
  - name: hostile
    url: {{URL}}
    connection: upstream
    timeout: 20s
    tools:
      - upstream: quote
        effect: write
        retry: {max_attempts: 2, initial_backoff: 50ms, max_backoff: 100ms, unsent_for: 500ms}
      - upstream: stream
        effect: write
        retry: {max_attempts: 1}
`

const hostileToken = "mcp_tok_5e4d3c2b1a0f9e8d7c6b"

// startHostileHTTP runs the hand-written Streamable HTTP server and a gateway in front of it.
func startHostileHTTP(t *testing.T, d models.Dialect, h *mcptest.Hostile, log *lockedBuffer) (*gatewaytest.Gateway, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	keyFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(keyFile, []byte(hostileToken+"\n"), 0o600))
	tools := strings.NewReplacer("{{URL}}", srv.URL, "{{KEYFILE}}", keyFile).Replace(hostileHTTPTools)
	return gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: tools, LogTo: log}), srv
}

// TestHostileStreamableHTTPServer: a Streamable HTTP server that refuses the first sessions
// with an error quoting the bearer token, and quotes it in an answer. The token appears in no
// log line and nowhere the gateway records. An answer past max_result_bytes is an ambiguous
// attempt that says so; once the server is gone, calls are not sent (retried, never
// ambiguous). Both engines.
func TestHostileStreamableHTTPServer(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		log := &lockedBuffer{}
		h := &mcptest.Hostile{RefuseFirst: 3}
		g, srv := startHostileHTTP(t, d, h, log)
		assert.Contains(t, log.String(), "invalid token: Bearer ***", "the refusals are logged, masked")

		op := requireOp(t, g.Submit(t, "quote-1", "hostile.quote", `{}`, map[string]string{"Prefer": "wait=10"}), http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"])
		assert.Equal(t, map[string]any{"content": []any{map[string]any{"type": "text", "text": "you sent Bearer ***"}}}, op["result"])

		big := requireOp(t, g.Submit(t, "stream-1", "hostile.stream", `{"bytes":3000000}`, map[string]string{"Prefer": "wait=10"}), http.StatusAccepted)
		require.Equal(t, "UNKNOWN", big["state"])
		assert.Contains(t, errorMember(t, big)["message"], "max_result_bytes")

		srv.Close()
		down := requireOp(t, g.Submit(t, "quote-down", "hostile.quote", `{}`, map[string]string{"Prefer": "wait=10"}), http.StatusCreated)
		require.Equal(t, "FAILED_FINAL", down["state"])
		assert.Equal(t, "retries_exhausted", errorMember(t, down)["class"], "not sent, so retried until unsent_for ran out")
		evs := string(g.Do(t, http.MethodGet, "/v1/operations/"+down["id"].(string)+"/events", g.Key, nil, "").Body)
		assert.Contains(t, evs, `"class":"not_sent"`)
		assert.NotContains(t, evs, `"class":"ambiguous"`)

		var all strings.Builder
		for _, id := range []string{op["id"].(string), big["id"].(string), down["id"].(string)} {
			all.Write(getOp(t, g, g.Key, id).Body)
			all.Write(g.Do(t, http.MethodGet, "/v1/operations/"+id+"/events", g.Key, nil, "").Body)
		}
		all.WriteString(dumpDatabase(t, g.Ledger.DB()))
		all.WriteString(log.String())
		assert.NotContains(t, all.String(), hostileToken)
	})
}

// TestHostileAnswerLeavesMemoryBounded: an upstream that answers 300 MB. The gateway reads up
// to max_result_bytes and stops: its peak resident memory stays within 64 MB of what it was
// idle (VmHWM, reset just before; Linux). Not parallel, so no other test shares the process's
// memory while it measures.
func TestHostileAnswerLeavesMemoryBounded(t *testing.T) {
	if _, err := os.Stat("/proc/self/clear_refs"); err != nil {
		t.Skip("needs Linux's /proc/self/clear_refs to reset the peak")
	}
	log := &lockedBuffer{}
	g, _ := startHostileHTTP(t, models.SQLite, &mcptest.Hostile{}, log)
	requireOp(t, g.Submit(t, "warm", "hostile.quote", `{}`, map[string]string{"Prefer": "wait=10"}), http.StatusCreated)
	runtime.GC()
	require.NoError(t, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0), "reset the peak")
	idle := procStatusKB(t, "VmHWM")
	start := time.Now()
	big := requireOp(t, g.Submit(t, "stream-300mb", "hostile.stream", `{"bytes":300000000}`, map[string]string{"Prefer": "wait=60"}), http.StatusAccepted)
	require.Equal(t, "UNKNOWN", big["state"])
	assert.Contains(t, errorMember(t, big)["message"], "max_result_bytes")
	peak := procStatusKB(t, "VmHWM")
	t.Logf("300 MB answer: resident memory idle %d MB, peak %d MB (+%d MB), answered in %s",
		idle>>10, peak>>10, (peak-idle)>>10, time.Since(start).Round(time.Millisecond))
	assert.Less(t, peak-idle, int64(64<<10), "peak resident memory within 64 MB of idle")
}

// procStatusKB reads a kB field of /proc/self/status.
func procStatusKB(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// TestStoppingTheGatewayStopsTheServersChildren: a stdio server that started a child of its
// own (as npx starts node). Closing the pool, as serve does when it stops, stops the server
// and its child: nothing of the process group is left running.
func TestStoppingTheGatewayStopsTheServersChildren(t *testing.T) {
	t.Parallel()
	bin, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild.pid")
	pgidFile := filepath.Join(dir, "server.pgid")
	tools := `
mcp_servers:
  - name: pay
    command: [sh, -c, 'sleep 300 & echo $! > ` + pidFile + `; read -r _ _ _ _ g _ < /proc/$$/stat; echo $g > ` + pgidFile + `; exec ` + bin + ` -test.run=^$']
    env: {IDEMGATE_MCPTEST_STATE: ` + dir + `}
    tools:
      - upstream: charge
`
	pool := mcpclient.New(mcpclient.Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	_, err = catalog.LoadWith([]byte(tools), catalog.Options{MCP: pool})
	require.NoError(t, err)
	raw, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	require.True(t, running(pid), "the server's own child runs")
	pgid := serversGroup(t, pgidFile)
	childGroup, ok := procGroup(pid)
	require.True(t, ok)
	require.Equal(t, pgid, childGroup, "the server's child is in the server's group")
	require.GreaterOrEqual(t, len(processGroup(pgid)), 2, "the server and its child run in group %d", pgid)

	start := time.Now()
	pool.Close()
	gatewaytest.Eventually(t, 10*time.Second, "the server's child to stop", func() bool { return !running(pid) })
	gatewaytest.Eventually(t, 10*time.Second, "the server's process group to empty", func() bool { return len(processGroup(pgid)) == 0 })
	t.Logf("the server and its child stopped within %s", time.Since(start).Round(time.Millisecond))
}

// serversGroup is the process group the server's shell recorded in file, and requires that it
// is not the test's own group (so counting its members counts only what the server started).
func serversGroup(t *testing.T, file string) int {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	pgid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	require.NotEqual(t, syscall.Getpgrp(), pgid, "the server runs in a process group of its own")
	return pgid
}

// procStat reads pid's state and process group from /proc/<pid>/stat: after the command name
// in parentheses come state, ppid, pgrp, … ("123 (sleep) S 1 123 …").
func procStat(pid int) (state byte, pgid int, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pgid, err = strconv.Atoi(f[2])
	return f[0][0], pgid, err == nil
}

// procGroup is the process group of pid.
func procGroup(pid int) (int, bool) {
	_, pgid, ok := procStat(pid)
	return pgid, ok
}

// processGroup lists the live processes (not zombies) of process group pgid, from /proc/*/stat.
func processGroup(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, g, ok := procStat(pid); ok && g == pgid && alive(state) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// running reports whether pid is a live process (not gone, not a zombie waiting to be reaped).
func running(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && alive(state)
}

// alive says whether a process in this state runs: not a zombie waiting to be reaped, not dead.
func alive(state byte) bool { return state != 'Z' && state != 'X' }

// TestToolsImportLeavesNoProcessBehind: tools import --mcp-command starts the server, lists its
// tools and stops it with everything it started, promptly.
func TestToolsImportLeavesNoProcessBehind(t *testing.T) {
	t.Parallel()
	bin, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild.pid")
	pgidFile := filepath.Join(dir, "server.pgid")
	cmd := []string{"sh", "-c", "sleep 300 & echo $! > " + pidFile + "; read -r _ _ _ _ g _ < /proc/$$/stat; echo $g > " + pgidFile +
		"; IDEMGATE_MCPTEST_STATE=" + dir + " exec " + bin + " -test.run=^$"}
	start := time.Now()
	f, err := toolsimport.MCP(t.Context(), toolsimport.MCPOptions{Command: cmd, Name: "pay"})
	require.NoError(t, err)
	took := time.Since(start)
	require.NotEmpty(t, f.Servers[0].Tools)
	raw, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	gatewaytest.Eventually(t, 5*time.Second, "the server's child to stop", func() bool { return !running(pid) })
	pgid := serversGroup(t, pgidFile)
	gatewaytest.Eventually(t, 5*time.Second, "the server's process group to empty", func() bool { return len(processGroup(pgid)) == 0 })
	t.Logf("imported %d tools and stopped the server's process group in %s", len(f.Servers[0].Tools), took.Round(time.Millisecond))
}
