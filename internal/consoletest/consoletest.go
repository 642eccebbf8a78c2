// Package consoletest starts the real HTTP stack with the review console for tests: a real
// database of its own (PostgreSQL or SQLite), the real routes, middleware and session cookie,
// and a clock the test moves. It seeds users and operations straight through the ledger, and
// drives the console as a browser would: a cookie jar, forms with their CSRF token, redirects
// seen rather than followed.
package consoletest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers"
	"github.com/idemgate/idemgate/handlers/sso"
	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/mcpclient"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/idemgate/idemgate/web"
	"golang.org/x/net/html"
)

// Clock is a test clock shared by the ledger and the console. It stands still unless it
// follows the wall clock (Options.Downstream, where attempts must run); either way Advance
// moves it on.
type Clock struct {
	mu   sync.Mutex
	t    time.Time
	wall bool // t is then an offset from the wall clock's start
	base time.Time
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wall {
		return c.t.Add(time.Since(c.base))
	}
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Options change what Start runs.
type Options struct {
	Limits          models.LoginLimits
	SessionIdle     time.Duration
	SessionLifetime time.Duration
	TLS             bool // serve over HTTPS (httptest's certificate)
	// TrustedProxies are the proxies the console believes X-Forwarded-* from; the test's own
	// requests come from 127.0.0.1.
	TrustedProxies web.TrustedProxies
	ReviewRefresh  time.Duration
	// RefusalLimits bound the refusals recorded in the audit log (default: the gateway's).
	RefusalLimits handlers.RefusalLimits
	// SSO, when set, offers single sign-on with this provider configuration; Start fills in
	// its redirect URL (the console's callback) and clock.
	SSO *sso.Config
	// Downstream runs the sandbox downstream and a dispatcher with the executor, so that
	// operations made runnable (a retry, an approval) are really sent, and the clock follows
	// the wall clock.
	Downstream bool
	// Policies, when set, is a policies and budgets block (YAML, docs/POLICY.md) added to the
	// catalogue.
	Policies string
	// MCPServers, when set, is an mcp_servers block (YAML, docs/MCP.md) added to the catalogue:
	// its servers are started for the test and their tools listed.
	MCPServers string
	// Mail, when set, emails reviewers through it (serve --smtp-url); the console's own address
	// is then its public URL, so the emails link to its pages.
	Mail *jobs.MailerConfig
	// DataKeys, when set, seal what the ledger keeps sealed (IDEMGATE_DATA_KEY).
	DataKeys *datakey.Keyring
}

// ExtraTools are added to gatewaytest's catalogue for console tests.
const ExtraTools = `
  - name: payouts.dual
    description: Pay out a large sum; needs two reviewers
    effect: write
    params_schema:
      type: object
      required: [order_id, amount_cents, currency]
      properties:
        order_id: {type: string}
        amount_cents: {type: integer}
        currency: {type: string}
        iban: {type: string}
    summary: "{{money .Params.amount_cents .Params.currency}} for order {{.Params.order_id}}"
    http:
      url: "{{SANDBOX}}/refunds"
      timeout: 1s
    review: {require_approval: true, approvals: 2, approval_ttl: 1h}
  - name: payouts.card
    description: Pay out to a customer's card; people see its last four digits
    effect: write
    params_schema:
      type: object
      required: [order_id, amount_cents, currency, card_number]
      properties:
        order_id: {type: string}
        amount_cents: {type: integer}
        currency: {type: string}
        card_number: {type: string}
    sensitive_params: [{name: card_number, reveal: last4}]
    summary: "{{money .Params.amount_cents .Params.currency}} to card {{reveal .Params.card_number}} for order {{.Params.order_id}}"
    http:
      url: "{{SANDBOX}}/refunds"
      timeout: 1s
    review: {require_approval: true, approvals: 1, approval_ttl: 24h, lookalike_on: [card_number, amount_cents, currency]}
`

// Console is a running console under test.
type Console struct {
	URL      string
	Ledger   *models.Ledger
	Catalog  *catalog.Catalog
	Executor *jobs.Executor
	Clock    *Clock
	// Sandbox is the downstream with Options.Downstream; nil otherwise.
	Sandbox *sandbox.Sandbox
	server  *httptest.Server
}

// Start runs the console on engine d until the test ends. The catalogue is gatewaytest's and
// ExtraTools. Unless opts.Downstream, no downstream runs, so seeded operations stay where the
// test puts them.
func Start(t testing.TB, d models.Dialect, opts Options) *Console {
	t.Helper()
	clock := &Clock{t: time.Now().UTC().Truncate(time.Second), wall: opts.Downstream, base: time.Now()}
	downstream := "http://127.0.0.1:9"
	var sb *sandbox.Sandbox
	if opts.Downstream {
		sb = sandbox.New()
		sbSrv := httptest.NewServer(sb)
		t.Cleanup(sbSrv.Close)
		downstream = sbSrv.URL
	}
	servers := mcpclient.New(mcpclient.Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(servers.Close) // after the gateway's own clean-up, which was registered later
	cat, err := catalog.LoadWith([]byte(strings.ReplaceAll(gatewaytest.Tools+ExtraTools, "{{SANDBOX}}", downstream)+opts.MCPServers+opts.Policies),
		catalog.Options{MCP: servers})
	if err != nil {
		t.Fatalf("consoletest: catalogue: %v", err)
	}
	// The server's address comes first: single sign-on's redirect URL names it.
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(srv.Close)
	scheme := "http://"
	if opts.TLS {
		scheme = "https://"
	}
	var provider *sso.Provider
	if opts.SSO != nil {
		cfg := *opts.SSO
		cfg.RedirectURL, cfg.Now = scheme+srv.Listener.Addr().String()+sso.CallbackPath, clock.Now
		if provider, err = sso.New(cfg); err != nil {
			t.Fatalf("consoletest: single sign-on: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var public string
	if opts.Mail != nil {
		public = scheme + srv.Listener.Addr().String()
	}
	gw, err := app.New(ctx, app.Config{DB: testdb.Open(t, d), Dialect: d, Catalog: cat, MCP: servers, Worker: "test-worker",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: clock.Now, PublicURL: public, DataKeys: opts.DataKeys,
		Jobs: app.Jobs{Dispatch: opts.Downstream, Poll: 20 * time.Millisecond, Concurrency: 4, Mail: opts.Mail},
		HTTP: &web.Settings{SessionKey: "consoletest-session-key-of-at-least-32-characters",
			SessionIdle: opts.SessionIdle, SessionLifetime: opts.SessionLifetime, LoginLimits: opts.Limits,
			TrustedProxies: opts.TrustedProxies, RefusalLimits: opts.RefusalLimits, ReviewRefresh: opts.ReviewRefresh,
			SSO: provider}})
	if err != nil {
		cancel()
		t.Fatalf("consoletest: %v", err)
	}
	done := make(chan struct{})
	go func() { gw.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		gw.Shutdown(sctx)
	})
	ledger, exec := gw.Ledger, gw.Executor
	srv.Config.Handler = gw.HTTP
	if opts.TLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	return &Console{URL: srv.URL, Ledger: ledger, Catalog: cat, Executor: exec, Clock: clock, Sandbox: sb, server: srv}
}

// seeder is who makes the tenants and users a test seeds, in the audit log: not the command
// line, so that tests can tell the entries they record themselves from these.
var seeder = models.Requester{Actor: "consoletest"}

// Tenant creates tenant unless it exists.
func (c *Console) Tenant(t testing.TB, name string) {
	t.Helper()
	if _, err := c.Ledger.CreateTenant(context.Background(), models.AllTenants(), seeder, name); err != nil && models.ErrorCode(err) != models.CodeConflict {
		t.Fatalf("consoletest: tenant %s: %v", name, err)
	}
}

// User creates a user of role limited to tenants (none: every tenant) and returns the
// password.
func (c *Console) User(t testing.TB, email string, role models.Role, tenants ...string) string {
	t.Helper()
	var b [12]byte
	_, _ = rand.Read(b[:])
	password := hex.EncodeToString(b[:])
	if _, err := c.Ledger.CreateUser(context.Background(), models.AllTenants(), seeder, models.NewUser{Email: email, Password: password, Role: role, Tenants: tenants}); err != nil {
		t.Fatalf("consoletest: user %s: %v", email, err)
	}
	return password
}

// Seed describes an operation to record.
type Seed struct {
	Tenant        string
	Key           string
	Tool          string
	Params        string // canonical JSON
	WorkflowRunID string
	StepID        string
	// Justification is the agent's reason, recorded as given.
	Justification string
	// Unknown takes the operation through an ambiguous attempt to UNKNOWN; Review then opens
	// its review.
	Unknown bool
	Review  bool
	// NeedsApproval records it AWAITING_APPROVAL with its approval review open.
	NeedsApproval bool
	// Outcome, when set, finishes the first attempt with it instead (Unknown is the same with
	// an ambiguous 504), so that tests can record any history; Review then opens the review.
	Outcome *models.AttemptOutcome
}

// Operation records s straight through the ledger and returns the operation as it ends up.
func (c *Console) Operation(t testing.TB, s Seed) *models.Operation {
	t.Helper()
	ctx := context.Background()
	c.Tenant(t, s.Tenant)
	in := models.NewOperation{Tenant: s.Tenant, PrincipalID: "prn_test", APIKeyID: "key_test", Key: s.Key, Tool: s.Tool,
		Fingerprint: c.Ledger.Fingerprint(s.Tool, []byte(s.Params)), DownstreamKey: c.Ledger.DownstreamKey(s.Tenant, s.Key),
		Params:        []byte(s.Params),
		WorkflowRunID: s.WorkflowRunID, StepID: s.StepID, Justification: s.Justification, Actor: "api:agent", NeedsApproval: s.NeedsApproval}
	if s.Unknown || s.Outcome != nil {
		in.Claim = &models.ClaimSpec{Worker: "test-worker", LeaseFor: time.Minute}
	}
	sub, err := c.Ledger.Submit(ctx, in)
	if err != nil {
		t.Fatalf("consoletest: submit %s: %v", s.Key, err)
	}
	op := sub.Op
	if in.Claim == nil {
		return op
	}
	if sub.Attempt == nil {
		t.Fatalf("consoletest: %s was recorded before, so it has no attempt to finish", s.Key)
	}
	out := models.AttemptOutcome{Class: models.ErrorAmbiguous, DownstreamStatus: 504, Latency: 1500 * time.Millisecond,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous,
		ErrorMessage: "the downstream answered 504 after the request was sent"}
	if s.Outcome != nil {
		out = *s.Outcome
	}
	if err := c.Ledger.FinishAttempt(ctx, models.Claimed{Op: op, Attempt: sub.Attempt}, "test-worker", out); err != nil {
		t.Fatalf("consoletest: finish attempt of %s: %v", s.Key, err)
	}
	if s.Review {
		if _, err := c.Ledger.OpenReview(ctx, op, models.ReasonUnknownOutcome, "worker:test-worker"); err != nil {
			t.Fatalf("consoletest: open review of %s: %v", s.Key, err)
		}
	}
	return op
}

// Browser is a cookie-keeping client that does not follow redirects, so tests see them.
type Browser struct {
	c      *Console
	Client *http.Client
	// Last is the last page answered with 200, whose forms' CSRF token Post sends.
	Last *Page
	// Header is sent with every request.
	Header http.Header
}

// Page is an answer read whole.
type Page struct {
	Status int
	Header http.Header
	Body   string
}

// NewBrowser returns a browser with an empty cookie jar.
func (c *Console) NewBrowser(t testing.TB) *Browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatalf("consoletest: jar: %v", err)
	}
	// A copy: the server's client is shared, and each browser needs its own jar.
	client := *c.server.Client()
	client.Jar = jar
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Browser{c: c, Client: &client, Header: http.Header{"Accept": {"text/html"}}}
}

// Get asks for path.
func (b *Browser) Get(t testing.TB, path string) *Page {
	t.Helper()
	return b.do(t, http.MethodGet, path, nil)
}

// Post sends form to path as a browser form post. The CSRF token of the last page is added
// unless form sets csrf_token itself (set it to "" to send none).
func (b *Browser) Post(t testing.TB, path string, form url.Values) *Page {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, set := form["csrf_token"]; !set && b.Last != nil {
		form.Set("csrf_token", b.Last.CSRF())
	}
	if form.Get("csrf_token") == "" {
		form.Del("csrf_token")
	}
	return b.do(t, http.MethodPost, path, strings.NewReader(form.Encode()))
}

func (b *Browser) do(t testing.TB, method, path string, body io.Reader) *Page {
	t.Helper()
	req, err := http.NewRequest(method, b.c.URL+path, body)
	if err != nil {
		t.Fatalf("consoletest: %v", err)
	}
	req.Header = b.Header.Clone()
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.Client.Do(req)
	if err != nil {
		t.Fatalf("consoletest: %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("consoletest: read body: %v", err)
	}
	p := &Page{Status: resp.StatusCode, Header: resp.Header, Body: string(raw)}
	if p.Status == http.StatusOK {
		b.Last = p
	}
	return p
}

// Login signs in through the form: it loads /login for the token, then posts the form. It
// returns the answer to the post.
func (b *Browser) Login(t testing.TB, email, password string) *Page {
	t.Helper()
	if p := b.Get(t, "/login"); p.Status != http.StatusOK {
		t.Fatalf("consoletest: GET /login: %d", p.Status)
	}
	return b.Post(t, "/login", url.Values{"email": {email}, "password": {password}})
}

// MustLogin signs in and fails the test unless it worked.
func (b *Browser) MustLogin(t testing.TB, email, password string) {
	t.Helper()
	if p := b.Login(t, email, password); p.Status != http.StatusSeeOther {
		t.Fatalf("consoletest: sign-in of %s answered %d", email, p.Status)
	}
}

// Cookie returns the browser's cookie of that name, or nil.
func (b *Browser) Cookie(name string) *http.Cookie {
	u, _ := url.Parse(b.c.URL)
	for _, ck := range b.Client.Jar.Cookies(u) {
		if ck.Name == name {
			return ck
		}
	}
	return nil
}

// CSRF returns the page's first csrf_token field value.
func (p *Page) CSRF() string {
	for _, n := range p.find(func(n *html.Node) bool { return n.Data == "input" && attr(n, "name") == "csrf_token" }) {
		return attr(n, "value")
	}
	return ""
}

// TestIDs returns the text of every element with data-testid id.
func (p *Page) TestIDs(id string) []string {
	var out []string
	for _, n := range p.find(func(n *html.Node) bool { return attr(n, "data-testid") == id }) {
		out = append(out, strings.TrimSpace(text(n)))
	}
	return out
}

// Attrs returns attribute name of every element with data-testid id.
func (p *Page) Attrs(id, name string) []string {
	var out []string
	for _, n := range p.find(func(n *html.Node) bool { return attr(n, "data-testid") == id }) {
		out = append(out, attr(n, name))
	}
	return out
}

// HasAttr reports, for every element with data-testid id, whether it has attribute name (a
// boolean attribute such as open).
func (p *Page) HasAttr(id, name string) []bool {
	var out []bool
	for _, n := range p.find(func(n *html.Node) bool { return attr(n, "data-testid") == id }) {
		has := false
		for _, a := range n.Attr {
			has = has || a.Key == name
		}
		out = append(out, has)
	}
	return out
}

func (p *Page) find(match func(*html.Node) bool) []*html.Node {
	doc, err := html.Parse(strings.NewReader(p.Body))
	if err != nil {
		return nil
	}
	var out []*html.Node
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
	}
	return out
}

func attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return b.String()
}
