package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is an io.Writer that the program writes from its goroutines while the test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// envFor is the environment of a command run against the database dsn: nothing else of the
// test process's environment leaks in.
func envFor(dsn string) func(string) string {
	vars := map[string]string{"IDEMGATE_DATABASE_URL": dsn, "IDEMGATE_LOG_LEVEL": "warn"}
	return func(k string) string { return vars[k] }
}

// result is what one command run printed and returned.
type result struct {
	stdout, stderr string
	err            error
}

// runCommand runs one short command to completion against dsn.
func runCommand(t *testing.T, dsn string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut syncBuffer
	err := run(ctx, args, envFor(dsn), strings.NewReader(""), &out, &errOut)
	return result{out.String(), errOut.String(), err}
}

var apiKeyRE = regexp.MustCompile(`idg_[A-Za-z0-9_-]+`)

func TestRunWithoutDatabase(t *testing.T) {
	t.Parallel()
	dsn := "/nonexistent-dir/never-opened.db"
	t.Run("no command", func(t *testing.T) {
		r := runCommand(t, dsn)
		require.Error(t, r.err)
		assert.Contains(t, r.stderr, "Usage:")
	})
	t.Run("unknown command", func(t *testing.T) {
		r := runCommand(t, dsn, "frobnicate")
		require.ErrorContains(t, r.err, `unknown command "frobnicate"`)
		assert.Contains(t, r.stderr, "Usage:")
	})
	t.Run("help", func(t *testing.T) {
		r := runCommand(t, dsn, "help")
		require.NoError(t, r.err)
		assert.Contains(t, r.stdout, "idemgate serve")
	})
	t.Run("bad serve flag", func(t *testing.T) {
		r := runCommand(t, dsn, "serve", "--no-such-flag")
		require.Error(t, r.err)
		assert.Contains(t, r.stderr, "no-such-flag")
	})
}

func TestAdminCommands(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		dsn := testdb.DSN(t, d)
		var key string

		t.Run("migrate prints the schema version", func(t *testing.T) {
			r := runCommand(t, dsn, "migrate")
			require.NoError(t, r.err, r.stderr)
			assert.Contains(t, r.stdout, "schema at version ")
			assert.Contains(t, r.stdout, "version "+strconv.Itoa(models.SchemaVersion()))
			require.NoError(t, runCommand(t, dsn, "migrate").err, "migrating again changes nothing")
			require.Error(t, runCommand(t, dsn, "migrate", "extra").err)
		})
		t.Run("tenant create", func(t *testing.T) {
			r := runCommand(t, dsn, "tenant", "create", "acme")
			require.NoError(t, r.err, r.stderr)
			assert.Contains(t, r.stdout, "tenant acme created")
		})
		t.Run("tenant create twice fails", func(t *testing.T) {
			r := runCommand(t, dsn, "tenant", "create", "acme")
			require.ErrorContains(t, r.err, "already exists")
		})
		t.Run("tenant create with a bad name fails", func(t *testing.T) {
			require.Error(t, runCommand(t, dsn, "tenant", "create", "Not A Name").err)
			require.Error(t, runCommand(t, dsn, "tenant", "create").err)
		})
		t.Run("apikey create prints a key", func(t *testing.T) {
			r := runCommand(t, dsn, "apikey", "create", "--tenant", "acme", "--principal", "bot", "--tools", "tickets.create")
			require.NoError(t, r.err, r.stderr)
			assert.Contains(t, r.stdout, "tools: tickets.create")
			key = apiKeyRE.FindString(r.stdout)
			require.Len(t, key, len("idg_")+43, r.stdout)
			assert.True(t, models.WellFormedAPIKey(key))
		})
		t.Run("apikey create for an unknown tenant fails", func(t *testing.T) {
			r := runCommand(t, dsn, "apikey", "create", "--tenant", "nope", "--principal", "bot")
			require.ErrorContains(t, r.err, "does not exist")
			assert.NotContains(t, r.stdout, "idg_")
		})
		t.Run("apikey create with a bad flag fails", func(t *testing.T) {
			r := runCommand(t, dsn, "apikey", "create", "--tenant", "acme", "--principal", "bot", "--bogus")
			require.Error(t, r.err)
			assert.Contains(t, r.stderr, "bogus")
			assert.NotContains(t, r.stdout, "idg_")
		})
		t.Run("apikey create without a principal fails", func(t *testing.T) {
			require.ErrorContains(t, runCommand(t, dsn, "apikey", "create", "--tenant", "acme").err, "usage")
		})
		t.Run("apikey revoke by prefix, then again", func(t *testing.T) {
			require.NotEmpty(t, key)
			if d == models.SQLite {
			}
			prefix := key[:models.APIKeyPrefixLen]
			r := runCommand(t, dsn, "apikey", "revoke", prefix)
			require.NoError(t, r.err, r.stderr)
			assert.Contains(t, r.stdout, "revoked")
			r = runCommand(t, dsn, "apikey", "revoke", prefix)
			require.ErrorContains(t, r.err, "no active API key")
		})
		t.Run("apikey revoke of an unknown prefix fails", func(t *testing.T) {
			require.Error(t, runCommand(t, dsn, "apikey", "revoke", "idg_zzzzzzzz").err)
			require.Error(t, runCommand(t, dsn, "apikey", "revoke").err)
		})
		t.Run("unknown subcommands fail", func(t *testing.T) {
			require.Error(t, runCommand(t, dsn, "apikey", "rotate").err)
			require.Error(t, runCommand(t, dsn, "tenant", "delete", "acme").err)
		})
	})
}

// server is one `idemgate serve` running in a goroutine.
type server struct {
	url        string
	metricsURL string
	apiKey     string
	stdout     *syncBuffer
	stderr     *syncBuffer
	cancel     context.CancelFunc
	done       chan struct{} // closed when run has returned, with its error in err
	err        error
}

var listeningRE = regexp.MustCompile(`idemgate listening on (http://\S+)`)
var metricsRE = regexp.MustCompile(`metrics at (http://\S+)`)
var demoKeyRE = regexp.MustCompile(`API key:\s+(idg_\S+)`)

// startServe runs `serve --demo` on a free port, with /metrics on another, and waits for it to
// say where it listens. On PostgreSQL the demo needs --demo-force.
func startServe(t *testing.T, dsn string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{stdout: &syncBuffer{}, stderr: &syncBuffer{}, cancel: cancel, done: make(chan struct{})}
	args := []string{"serve", "--demo", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"}
	if models.IsPostgresURL(dsn) {
		args = append(args, "--demo-force")
	}
	go func() {
		defer close(s.done)
		s.err = run(ctx, args, envFor(dsn), strings.NewReader(""), s.stdout, s.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
		}
	})
	deadline := time.After(30 * time.Second)
	for {
		if m := listeningRE.FindStringSubmatch(s.stdout.String()); m != nil {
			s.url = m[1]
			break
		}
		select {
		case <-s.done:
			t.Fatalf("serve stopped before listening: %v\nstdout:\n%s\nstderr:\n%s", s.err, s.stdout, s.stderr)
		case <-deadline:
			t.Fatalf("serve did not print its address in 30s\nstdout:\n%s\nstderr:\n%s", s.stdout, s.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	m := demoKeyRE.FindStringSubmatch(s.stdout.String())
	require.NotNil(t, m, "serve --demo prints the demo API key:\n%s", s.stdout)
	s.apiKey = m[1]
	m = metricsRE.FindStringSubmatch(s.stdout.String())
	require.NotNil(t, m, "serve --metrics-addr prints where /metrics is:\n%s", s.stdout)
	s.metricsURL = m[1]
	return s
}

// stop cancels serve's context and requires a clean return within 15 s.
func (s *server) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case <-s.done:
		require.NoError(t, s.err, "stderr:\n%s", s.stderr)
	case <-time.After(15 * time.Second):
		t.Fatalf("serve did not shut down within 15s\nstderr:\n%s", s.stderr)
	}
}

// answer is one HTTP response read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request to the server.
func (s *server) do(t *testing.T, client *http.Client, method, path string, header map[string]string, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, resp.Header, b}
}

func TestServeDemo(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		dsn := testdb.DSN(t, d)
		client := &http.Client{Timeout: 30 * time.Second, Transport: http.DefaultTransport.(*http.Transport).Clone()}
		defer client.CloseIdleConnections()

		s := startServe(t, dsn)
		require.True(t, models.WellFormedAPIKey(s.apiKey), s.apiKey)
		assert.Contains(t, s.stdout.String(), "curl -s "+s.url+"/v1/operations", "a ready-to-paste curl command")

		for _, path := range []string{"/healthz", "/readyz"} {
			a := s.do(t, client, http.MethodGet, path, nil, "")
			assert.Equal(t, http.StatusOK, a.status, "%s: %s", path, a.body)
			assert.Equal(t, "same-origin", a.header.Get("Referrer-Policy"))
			assert.Empty(t, a.header.Get("Strict-Transport-Security"), "plain HTTP, no proxy trusted")
		}
		assert.Equal(t, http.StatusNotFound, s.do(t, client, http.MethodGet, "/metrics", nil, "").status, "not on the public port")

		refund := `{"tool":"refunds.issue","params":{"order_id":"1042","amount_cents":1999,"currency":"EUR"}}`
		h := map[string]string{"Authorization": "Bearer " + s.apiKey, "Idempotency-Key": "order-1042:refund", "Content-Type": "application/json"}
		first := s.do(t, client, http.MethodPost, "/v1/operations", h, refund)
		require.Equal(t, http.StatusCreated, first.status, string(first.body))
		replay := s.do(t, client, http.MethodPost, "/v1/operations", h, refund)
		require.Equal(t, http.StatusOK, replay.status, string(replay.body))
		assert.Equal(t, "true", replay.header.Get("Idempotent-Replayed"))
		assert.JSONEq(t, string(first.body), string(replay.body))
		var op struct{ State string }
		require.NoError(t, json.Unmarshal(first.body, &op))
		assert.Equal(t, "SUCCEEDED", op.State)

		stats := s.do(t, client, http.MethodGet, "/sandbox/_stats", nil, "")
		require.Equal(t, http.StatusOK, stats.status)
		var st struct {
			Committed map[string]int `json:"committed"`
		}
		require.NoError(t, json.Unmarshal(stats.body, &st), string(stats.body))
		assert.Equal(t, 1, st.Committed["refunds"], "one refund for two requests")

		resp, err := client.Get(s.metricsURL)
		require.NoError(t, err)
		scraped, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Contains(t, string(scraped), `idemgate_requests_total{outcome="created"} 1`, "the metrics listener serves the gateway's metrics")

		client.CloseIdleConnections()
		s.stop(t)

		again := startServe(t, dsn)
		assert.Equal(t, s.apiKey, again.apiKey, "a restarted demo prints the same key")
		a := again.do(t, client, http.MethodPost, "/v1/operations", h, refund)
		assert.Equal(t, http.StatusOK, a.status, "the ledger outlived the restart: %s", a.body)
		client.CloseIdleConnections()
		again.stop(t)
	})
}

// serve refuses settings that would expose a production ledger: the demo's known logins on
// PostgreSQL without --demo-force, and the old --trust-proxy switch that named no proxy. It
// refuses before it touches the database or listens.
func TestServeRefusesUnsafeSettings(t *testing.T) {
	dsn := testdb.DSN(t, models.Postgres)
	r := runCommand(t, dsn, "serve", "--demo", "--addr", "127.0.0.1:0")
	require.Error(t, r.err)
	assert.Contains(t, r.err.Error(), "--demo-force")
	db, d, err := models.Open(t.Context(), dsn)
	require.NoError(t, err)
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	require.NoError(t, models.Migrate(t.Context(), db, d))
	tenants, err := models.New(models.Config{DB: db, Dialect: d}).ScopedTenants(t.Context(), models.AllTenants())
	require.NoError(t, err)
	assert.Empty(t, tenants, "no demo tenant, key or login was created")

	for _, args := range [][]string{{"serve", "--trust-proxy", "1"}, {"serve", "--trust-proxy", "true"}, {"serve", "--trust-proxy", "proxy.internal"}} {
		r := runCommand(t, dsn, append(args, "--addr", "127.0.0.1:0")...)
		require.Error(t, r.err, args)
		assert.Contains(t, r.err.Error(), "--trust-proxy", args)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	env := func(k string) string {
		return map[string]string{"IDEMGATE_DATABASE_URL": dsn, "IDEMGATE_TRUST_PROXY": "1"}[k]
	}
	err = run(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, env, strings.NewReader(""), io.Discard, io.Discard)
	require.Error(t, err, "IDEMGATE_TRUST_PROXY=1 is refused too")
	assert.Contains(t, err.Error(), "127.0.0.1/32")
}

// TestVersion: `idemgate version --json` names the build and the newest ledger schema; the text
// form says the same.
func TestVersion(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"version", "--json"}, func(string) string { return "" }, strings.NewReader(""), &out, &errOut))
	var v struct {
		Version, Revision, GoVersion string
		Schema                       int `json:"schema_version"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &v), out.String())
	assert.Equal(t, models.SchemaVersion(), v.Schema)
	assert.NotEmpty(t, v.Version)
	assert.NotEmpty(t, v.Revision)
	out.Reset()
	require.NoError(t, run(context.Background(), []string{"version"}, func(string) string { return "" }, strings.NewReader(""), &out, &errOut))
	assert.Contains(t, out.String(), fmt.Sprintf("ledger schema %d", models.SchemaVersion()))
	assert.Error(t, run(context.Background(), []string{"version", "extra"}, func(string) string { return "" }, strings.NewReader(""), &out, &errOut))
}
