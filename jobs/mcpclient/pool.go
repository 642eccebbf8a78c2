// Package mcpclient is idemgate as a client of the MCP servers its tools file declares
// (docs/MCP.md): one session per server per process, every call multiplexed on it; a stdio server is
// a child process, restarted with backoff when it exits, its standard error in the gateway's
// log; a Streamable HTTP server is reconnected with backoff when its session ends. It sends
// calls and reports what it saw; what that means for an operation is jobs' to decide.
package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/downstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config wires a pool.
type Config struct {
	// Connector builds the HTTP clients of URL servers, with their connections' credentials
	// (nil: one with no tenant secrets, which servers may not use anyway).
	Connector *downstream.Connector
	Log       *slog.Logger
	// StartTimeout bounds the wait for a server's first session when its tools are listed
	// (default one minute: `npx -y` may download the server first).
	StartTimeout time.Duration
	// Version is what idemgate calls itself in the initialize handshake.
	Version string
}

// Pool holds the sessions of a process's MCP servers. It is safe for concurrent use.
type Pool struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	servers map[*catalog.MCPServer]*server
	closing atomic.Bool // Close has begun: a session that ends is not started again
}

// New returns a pool that starts servers as they are first listed. Close stops them.
func New(cfg Config) *Pool {
	if cfg.Connector == nil {
		cfg.Connector = downstream.NewConnector()
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = time.Minute
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{cfg: cfg, ctx: ctx, cancel: cancel, servers: map[*catalog.MCPServer]*server{}}
}

// Close ends every session and stops every child process.
func (p *Pool) Close() {
	// Each session is closed as MCP's stdio transport says (its input closed, a grace, then
	// signals to its process group), all at once; only then is the rest cancelled. Cancelling
	// first would kill every child outright, before it could save what it holds.
	p.closing.Store(true)
	p.mu.Lock()
	var closing sync.WaitGroup
	for _, s := range p.servers {
		closing.Go(s.closeSession)
	}
	p.mu.Unlock()
	closing.Wait()
	p.cancel()
	p.wg.Wait()
}

// server is one supervised session.
type server struct {
	spec *catalog.MCPServer
	log  *slog.Logger

	mu      sync.Mutex
	session *mcp.ClientSession // nil while not connected
	link    *link              // the session's own state
	lastErr error              // why the latest connection attempt failed
	up      chan struct{}      // closed once a session first exists
	creds   *downstream.SessionClient
	// envSecrets are the values of the secret references in a stdio server's env: masked
	// wherever the server echoes them, as a connection's credentials are.
	envSecrets []string
	listed     bool // its tools were listed: answers are bounded by max_result_bytes now
	// taskTools are the tools it lists as callable only as a task (execution.taskSupport
	// "required").
	taskTools map[string]bool
	calls     callSecrets
}

func (s *server) needsTask(tool string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.taskTools[tool]
}

// credentials are every credential value the server's session uses.
func (s *server) credentials() []string {
	s.mu.Lock()
	creds, env := s.creds, s.envSecrets
	s.mu.Unlock()
	var out []string
	if creds != nil {
		out = creds.Used()
	}
	return append(out, env...)
}

// scrub masks, in text about the server (its standard error, why it stopped), its
// credentials and the sensitive params of its recent calls.
func (s *server) scrub(text string) string {
	return s.calls.secrets().With(s.credentials()...).Text(text)
}

// detach takes l's session out of service while it closes: calls are not sent on it (they
// are not_sent, and retried once the supervisor has started a new one).
func (s *server) detach(l *link, why error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.link == l && s.session != nil {
		s.session, s.lastErr = nil, fmt.Errorf("restarting: %w", why)
	}
}

func (s *server) scrubErr(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(s.scrub(err.Error()))
}

func (s *server) current() *mcp.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session
}

func (s *server) closeSession() {
	if cs := s.current(); cs != nil {
		_ = cs.Close()
	}
}

// serverFor returns the supervised server of spec, starting its supervisor on first use.
func (p *Pool) serverFor(spec *catalog.MCPServer) *server {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.servers[spec]; ok {
		return s
	}
	s := &server{spec: spec, log: p.cfg.Log.With("mcp_server", spec.Name), up: make(chan struct{})}
	p.servers[spec] = s
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.supervise(s)
	}()
	return s
}

// Restart backoff: a server that cannot start is tried less and less often, never given up.
const (
	backoffInitial = 100 * time.Millisecond
	backoffMax     = 30 * time.Second
	// steady is how long a session must last for the next restart to start from
	// backoffInitial again.
	steady = 10 * time.Second
)

// supervise keeps one session to s open until the pool closes: it connects, waits for the
// session to end (the child exits, the stream breaks), and connects again with backoff.
func (p *Pool) supervise(s *server) {
	wait := backoffInitial
	var once sync.Once
	for {
		start := time.Now()
		l := &link{}
		l.broken = func(why error) { s.detach(l, why) }
		cs, err := p.connect(s, l)
		// What the server answered may quote the credentials the session presented.
		err = s.scrubErr(err)
		s.mu.Lock()
		s.session, s.link, s.lastErr = cs, l, err
		s.mu.Unlock()
		if err == nil {
			once.Do(func() { close(s.up) })
			s.log.Info("mcp server session open", "server", s.spec.Describe())
			why := s.scrub(errOrExit(cs.Wait()))
			if l.oversize.Load() {
				why = errAnswerTooLarge.Error()
			}
			s.mu.Lock()
			s.session, s.link, s.lastErr = nil, nil, fmt.Errorf("the session ended: %s", why)
			s.mu.Unlock()
			if p.ctx.Err() != nil || p.closing.Load() {
				return
			}
			s.log.Warn("mcp server session ended; reconnecting", "server", s.spec.Describe(), "err", why)
		} else {
			if p.ctx.Err() != nil {
				return
			}
			s.log.Warn("mcp server not reachable; trying again", "server", s.spec.Describe(), "err", err, "in", wait)
		}
		if time.Since(start) > steady {
			wait = backoffInitial
		}
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, backoffMax)
	}
}

func errOrExit(err error) string {
	if err == nil {
		return "closed"
	}
	return err.Error()
}

// connect opens a session: starts the child (stdio) or initializes over HTTP.
func (p *Pool) connect(s *server, l *link) (*mcp.ClientSession, error) {
	var transport mcp.Transport
	s.mu.Lock()
	limit := int64(MaxListingBytes)
	if s.listed {
		limit = int64(s.spec.MaxResultBytes) + envelope
	}
	s.mu.Unlock()
	l.limit.Store(limit)
	if len(s.spec.Command) > 0 {
		cmd, err := p.command(s)
		if err != nil {
			return nil, err
		}
		transport = &childTransport{cmd: cmd, link: l, terminate: 2 * time.Second}
	} else {
		sc, err := p.cfg.Connector.SessionClient(s.spec.Connection)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.creds = sc
		s.mu.Unlock()
		client := *sc.Client
		base := client.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		client.Transport = limitTransport{base: base, max: int64(s.spec.MaxResultBytes) + envelope}
		// MaxRetries < 0: the transport never re-sends on its own. A call whose stream broke is
		// the executor's to judge (ambiguous), not the transport's to repeat.
		transport = &mcp.StreamableClientTransport{Endpoint: s.spec.URL, HTTPClient: &client, MaxRetries: -1,
			DisableStandaloneSSE: true}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "idemgate", Version: p.cfg.Version}, nil)
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.StartTimeout)
	defer cancel()
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, err
	}
	if st, ok := transport.(*mcp.StreamableClientTransport); ok {
		var version string
		if ir := cs.InitializeResult(); ir != nil {
			version = ir.ProtocolVersion
		}
		l.raw = &httpRaw{client: st.HTTPClient, endpoint: st.Endpoint, session: cs.ID(), version: version}
	}
	return cs, nil
}

// command builds the child process of a stdio server: its environment is PATH, HOME and the
// file's env, nothing else of the gateway's (which holds its data key and database URL).
func (p *Pool) command(s *server) (*exec.Cmd, error) {
	cmd := exec.CommandContext(p.ctx, s.spec.Command[0], s.spec.Command[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	var secrets []string
	for _, e := range s.spec.Env {
		v, err := e.Value.Resolve(nil)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if e.Value.Literal == "" {
			secrets = append(secrets, v)
		}
		cmd.Env = append(cmd.Env, e.Name+"="+v)
	}
	s.mu.Lock()
	s.envSecrets = secrets
	s.mu.Unlock()
	cmd.Stderr = newStderrLog(s.log, s.scrub)
	// Once the server has exited, its own children may still hold its standard error open:
	// the group is stopped right after, so there is little to wait for.
	cmd.WaitDelay = 250 * time.Millisecond
	return cmd, nil
}

// session waits for spec's session up to the start timeout (for its first listing).
func (p *Pool) session(spec *catalog.MCPServer) (*mcp.ClientSession, error) {
	s := p.serverFor(spec)
	select {
	case <-s.up:
	case <-time.After(p.cfg.StartTimeout):
	case <-p.ctx.Done():
		return nil, p.ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == nil {
		if s.lastErr != nil {
			return nil, s.lastErr
		}
		return nil, fmt.Errorf("%s did not start within %s", spec.Describe(), p.cfg.StartTimeout)
	}
	return s.session, nil
}

// ListTools starts or connects to the server and returns every tool it lists (all pages).
// It implements catalog.MCPLister.
func (p *Pool) ListTools(spec *catalog.MCPServer) ([]catalog.UpstreamTool, error) {
	cs, err := p.session(spec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.StartTimeout)
	defer cancel()
	var out []catalog.UpstreamTool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", p.serverFor(spec).scrubErr(err))
		}
		u, err := upstreamTool(t)
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		out = append(out, u)
	}
	tasks, err := p.taskTools(ctx, spec)
	if err != nil {
		return nil, err
	}
	// From now on an answer is bounded by max_result_bytes: a stdio session reads its lines
	// with that bound from its next start, this one from now.
	srv := p.serverFor(spec)
	srv.mu.Lock()
	srv.listed, srv.taskTools = true, tasks
	if srv.link != nil {
		srv.link.limit.Store(int64(spec.MaxResultBytes) + envelope)
	}
	srv.mu.Unlock()
	return out, nil
}

// taskTools lists the server's tools again, as sent, for what the SDK's Tool does not carry:
// which tools can be called only as a task. (The SDK's own listing is kept: its client reads
// the header annotations of a 2026-07-28 tool's params from it.)
func (p *Pool) taskTools(ctx context.Context, spec *catalog.MCPServer) (map[string]bool, error) {
	s := p.serverFor(spec)
	s.mu.Lock()
	l := s.link
	s.mu.Unlock()
	if l == nil || l.raw == nil {
		return nil, nil
	}
	out := map[string]bool{}
	cursor := ""
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		data, err := l.raw.call(ctx, "tools/list", params)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", s.scrubErr(err))
		}
		var page struct {
			Tools []struct {
				Name      string `json:"name"`
				Execution struct {
					TaskSupport string `json:"taskSupport"`
				} `json:"execution"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(data, &page); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, t := range page.Tools {
			if t.Execution.TaskSupport == "required" {
				out[t.Name] = true
			}
		}
		if page.NextCursor == "" || page.NextCursor == cursor {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// upstreamTool reads an SDK tool into the catalogue's shape, its schemas and annotations as
// plain JSON values (what the server sent, re-read).
func upstreamTool(t *mcp.Tool) (catalog.UpstreamTool, error) {
	u := catalog.UpstreamTool{Name: t.Name, Title: t.Title, Description: t.Description}
	var err error
	if u.InputSchema, err = jsonObject(t.InputSchema); err != nil {
		return u, fmt.Errorf("inputSchema: %w", err)
	}
	if t.OutputSchema != nil {
		if u.OutputSchema, err = jsonObject(t.OutputSchema); err != nil {
			return u, fmt.Errorf("outputSchema: %w", err)
		}
	}
	if t.Annotations != nil {
		if u.Annotations, err = jsonObject(t.Annotations); err != nil {
			return u, fmt.Errorf("annotations: %w", err)
		}
	}
	return u, nil
}

func jsonObject(v any) (map[string]any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}
