// Package process_test proves recovery (docs/STATES.md, docs/TOOLS.md) with real idemgate
// processes: built once with the race detector, started and killed like production does it,
// against real PostgreSQL, with the sandbox as the downstream in the test process, where the
// side effects that were actually committed are counted.
package process_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/require"
)

// bin is the idemgate binary built by TestMain.
var bin string

func TestMain(m *testing.M) {
	start := time.Now()
	race := proctest.RaceWanted()
	path, cleanup, err := proctest.Build(race)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/process: building idemgate:", err)
		os.Exit(1)
	}
	bin = path
	fmt.Fprintf(os.Stderr, "e2e/process: built idemgate (race=%v) in %s\n", race, time.Since(start).Round(time.Millisecond))
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// Common gateway flags: short leases and fast polling, so recovery happens within a test's
// patience; no rate limit, the tests are the only callers.
var serveFlags = []string{"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--lease-margin", "1s", "--poll", "50ms", "--rate-limit", "0"}

// toolsYAML is the test catalogue. $SANDBOX is the sandbox URL, $TIMEOUT the HTTP timeout of
// the ordinary tools, $ESCALATE their escalate_after; $EXTRA appends more tools.
const toolsYAML = `
tools:
  - name: tickets.create
    description: Create a support ticket (the downstream honours Idempotency-Key)
    effect: write
    params_schema:
      type: object
      required: [subject]
      properties:
        subject: {type: string}
    http:
      url: "$SANDBOX/tickets"
      timeout: $TIMEOUT
      idempotency_header: Idempotency-Key
      result_reference: /id
    reconcile:
      url: "$SANDBOX/tickets?reference={{.OperationID}}"
      settle: 300ms
    retry: {max_attempts: 3, initial_backoff: 50ms, max_backoff: 300ms}
    review: {escalate_after: $ESCALATE}
  - name: refunds.issue
    description: Refund an order (no idempotency key support)
    effect: write
    params_schema: &refund
      type: object
      required: [order_id, amount_cents, currency]
      properties:
        order_id: {type: string}
        amount_cents: {type: integer, minimum: 1}
        currency: {type: string}
    http:
      url: "$SANDBOX/refunds"
      timeout: $TIMEOUT
      result_reference: /id
    reconcile:
      url: "$SANDBOX/refunds?reference={{.OperationID}}"
      settle: 300ms
    retry: {max_attempts: 3, initial_backoff: 50ms, max_backoff: 300ms}
    review: {escalate_after: $ESCALATE}
  - name: refunds.brief
    description: Refund an order, with a record kept for one second only
    effect: write
    params_schema: *refund
    http:
      url: "$SANDBOX/refunds"
      timeout: $TIMEOUT
      result_reference: /id
    reconcile:
      url: "$SANDBOX/refunds?reference={{.OperationID}}"
      settle: 300ms
    retry: {max_attempts: 3, initial_backoff: 50ms, max_backoff: 300ms}
    retention: 1s
  - name: email.send
    description: Send an email (no key support, no look-up)
    effect: write
    params_schema:
      type: object
      required: [to, subject, body]
      properties:
        to: {type: string}
        subject: {type: string}
        body: {type: string}
    http:
      url: "$SANDBOX/emails"
      timeout: $TIMEOUT
    retry: {max_attempts: 3, initial_backoff: 50ms, max_backoff: 300ms}
$EXTRA`

// stackOptions shape a test's gateway environment.
type stackOptions struct {
	Timeout  string // HTTP timeout of the tools; default 1s
	Escalate string // escalate_after of reconcilable tools; default 30s
	Extra    string // more tools, YAML list items indented by two spaces
	// Record is how many requests the sandbox keeps in its log; 0: its default (10000).
	Record int
}

// stack is one test's world: a fresh PostgreSQL schema, the sandbox downstream served from the
// test process, a tools file pointing at it, a tenant and an API key made by the binary itself,
// and a ledger opened on the same database for reading what the processes recorded.
type stack struct {
	env     proctest.Env
	sb      *sandbox.Sandbox
	sbURL   string
	tools   string
	key     string
	tenant  string
	ledger  *models.Ledger
	client  *http.Client
	started time.Time
}

func newStack(t *testing.T, opts stackOptions) *stack {
	t.Helper()
	return newStackOn(t, testdb.DSN(t, models.Postgres), opts)
}

func newStackOn(t *testing.T, dsn string, opts stackOptions) *stack {
	t.Helper()
	return newStackWith(t, dsn, opts, bin)
}

// newStackWith is newStackOn with the binary that makes the tenant and key (and so migrates the
// database first): another release's, for the upgrade test.
func newStackWith(t *testing.T, dsn string, opts stackOptions, binary string) *stack {
	t.Helper()
	if opts.Timeout == "" {
		opts.Timeout = "1s"
	}
	if opts.Escalate == "" {
		opts.Escalate = "30s"
	}
	var sbOpts []sandbox.Option
	if opts.Record > 0 {
		sbOpts = append(sbOpts, sandbox.RecordRequests(opts.Record))
	}
	s := &stack{env: proctest.Env{Bin: binary, DSN: dsn}, sb: sandbox.New(sbOpts...), tenant: "acme", started: time.Now()}
	srv := httptest.NewServer(s.sb)
	t.Cleanup(func() {
		s.sb.ClearFaults() // frees handlers held by hang faults
		srv.Close()
	})
	s.sbURL = srv.URL
	yaml := strings.NewReplacer("$SANDBOX", srv.URL, "$TIMEOUT", opts.Timeout, "$ESCALATE", opts.Escalate,
		"$EXTRA", strings.ReplaceAll(opts.Extra, "$SANDBOX", srv.URL)).Replace(toolsYAML)
	s.tools = filepath.Join(t.TempDir(), "tools.yaml")
	require.NoError(t, os.WriteFile(s.tools, []byte(yaml), 0o600))

	s.env.Run(t, "tenant", "create", s.tenant)
	out := s.env.Run(t, "apikey", "create", "--tenant", s.tenant, "--principal", "agent")
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "idg_") {
			s.key = f
		}
	}
	require.NotEmpty(t, s.key, "no API key in the output of apikey create:\n%s", out)

	s.readFrom(t, dsn)
	s.client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(s.client.CloseIdleConnections)
	return s
}

// readFrom points the test's own ledger (s.ledger, for reading what the processes recorded)
// at dsn.
func (s *stack) readFrom(t *testing.T, dsn string) {
	t.Helper()
	db, d, err := models.Open(context.Background(), dsn)
	require.NoError(t, err)
	sqlDB, _ := db.DB()
	sqlDB.SetMaxOpenConns(4)
	t.Cleanup(func() { sqlDB.Close() })
	s.ledger = models.New(models.Config{DB: db, Dialect: d})
}

// serve starts `idemgate serve` on a free port with the test tools and fast settings.
func (s *stack) serve(t *testing.T, name string, extra ...string) *proctest.Process {
	t.Helper()
	args := append([]string{"serve", "--tools", s.tools}, serveFlags...)
	p := s.env.Start(t, name, append(args, extra...)...)
	require.NotEmpty(t, p.URL, "%s printed no address", name)
	return p
}

// worker starts `idemgate worker` (the recovery jobs alone).
func (s *stack) worker(t *testing.T, name string) *proctest.Process {
	t.Helper()
	return s.env.Start(t, name, "worker", "--tools", s.tools, "--lease-margin", "1s", "--poll", "50ms")
}

// reply is an HTTP answer read whole, with the moment it arrived.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
	At     time.Time
}

func (r reply) obj(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), "not a JSON object: %s", r.Body)
	return m
}

// id is the operation id an answer names: "id" of an operation, "operation_id" of a problem.
func (r reply) id() string {
	var m map[string]any
	if json.Unmarshal(r.Body, &m) != nil {
		return ""
	}
	if v, ok := m["id"].(string); ok && strings.HasPrefix(v, "op_") {
		return v
	}
	v, _ := m["operation_id"].(string)
	return v
}

func (s *stack) do(method, url string, header map[string]string, body string) (reply, error) {
	var rd io.Reader
	if body != "" {
		rd = bytes.NewBufferString(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b, At: time.Now()}, nil
}

// post submits an operation to the gateway at base.
func (s *stack) post(base, idemKey, tool, params string, header map[string]string) (reply, error) {
	h := map[string]string{"Idempotency-Key": idemKey}
	for k, v := range header {
		h[k] = v
	}
	return s.do(http.MethodPost, base+"/v1/operations", h, `{"tool":"`+tool+`","params":`+params+`}`)
}

func (s *stack) mustPost(t testing.TB, base, idemKey, tool, params string, header map[string]string) reply {
	t.Helper()
	r, err := s.post(base, idemKey, tool, params, header)
	require.NoError(t, err, "POST %s", idemKey)
	return r
}

// op reads an operation through the API of the gateway at base.
func (s *stack) op(t testing.TB, base, id string) map[string]any {
	t.Helper()
	r, err := s.do(http.MethodGet, base+"/v1/operations/"+id, nil, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "GET operation: %s", r.Body)
	return r.obj(t)
}

// events reads an operation's timeline through the API.
func (s *stack) events(t testing.TB, base, id string) []map[string]any {
	t.Helper()
	r, err := s.do(http.MethodGet, base+"/v1/operations/"+id+"/events", nil, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "GET events: %s", r.Body)
	var out struct {
		Events []map[string]any `json:"events"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &out))
	return out.Events
}

// row reads an operation straight from the database, with no process running.
func (s *stack) row(t testing.TB, id string) *models.Operation {
	t.Helper()
	op, err := s.ledger.Get(context.Background(), s.tenant, id)
	require.NoError(t, err)
	return op
}

// methods lists the methods of the sandbox requests under path, in arrival order.
func (s *stack) methods(path string) []string {
	var out []string
	for _, r := range s.sb.Requests(path) {
		out = append(out, r.Method)
	}
	return out
}

// count counts the requests under path with method.
func (s *stack) count(path, method string) int {
	n := 0
	for _, r := range s.sb.Requests(path) {
		if r.Method == method {
			n++
		}
	}
	return n
}

// eventually polls cond every 10 ms until it holds or timeout passes; status describes the
// last observation for the failure message.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		ok, status := cond()
		if ok {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitState polls the gateway at base until the operation is in state want.
func (s *stack) waitState(t testing.TB, base, id, want string, timeout time.Duration) time.Duration {
	t.Helper()
	return eventually(t, timeout, id+" in "+want, func() (bool, string) {
		r, err := s.do(http.MethodGet, base+"/v1/operations/"+id, nil, "")
		if err != nil {
			return false, err.Error()
		}
		var m map[string]any
		_ = json.Unmarshal(r.Body, &m)
		return m["state"] == want, string(r.Body)
	})
}

// waitRow polls the database until cond holds for the operation.
func (s *stack) waitRow(t testing.TB, id, what string, timeout time.Duration, cond func(*models.Operation) bool) time.Duration {
	t.Helper()
	return eventually(t, timeout, what, func() (bool, string) {
		op, err := s.ledger.Get(context.Background(), s.tenant, id)
		if err != nil {
			return false, err.Error()
		}
		return cond(op), fmt.Sprintf("state %s, attempts %d, probes %d, lease %v", op.State, op.Attempts, op.Probes, op.LeaseExpiresAt)
	})
}

// eventTypes summarises a timeline as "type[from→to]" items, for assertions and logs.
func eventTypes(evs []map[string]any) []string {
	var out []string
	for _, e := range evs {
		s, _ := e["type"].(string)
		if to, ok := e["to_state"].(string); ok {
			from, _ := e["from_state"].(string)
			s += "[" + from + "→" + to + "]"
		}
		if d, ok := e["detail"].(map[string]any); ok {
			if o, ok := d["outcome"].(string); ok {
				s += "(" + o + ")"
			}
			if r, ok := d["reason"].(string); ok {
				s += "(" + r + ")"
			}
		}
		out = append(out, s)
	}
	return out
}

// hasEvent reports whether a timeline has an event of typ whose detail has key = value ("" key:
// any detail).
func hasEvent(evs []map[string]any, typ, key string, value any) bool {
	for _, e := range evs {
		if e["type"] != typ {
			continue
		}
		if key == "" {
			return true
		}
		if d, ok := e["detail"].(map[string]any); ok && d[key] == value {
			return true
		}
	}
	return false
}

// percentile returns the p-th percentile (0..1) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(p*float64(len(s)-1)+0.5)]
}

const (
	refundParams = `{"order_id":"o-1042","amount_cents":1999,"currency":"EUR"}`
	ticketParams = `{"subject":"Printer on fire"}`
	emailParams  = `{"to":"ops@example.com","subject":"hello","body":"hi"}`
)

var wait0 = map[string]string{"Prefer": "wait=0"}
