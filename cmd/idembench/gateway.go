package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/internal/gctune"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/web"
	"github.com/idemgate/idemgate/web/telemetry"
	"github.com/valyala/fasthttp"
	"gorm.io/gorm"
)

// benchTools is the catalogue under test: one write tool whose downstream honours keys.
const benchTools = `
tools:
  - name: bench.write
    description: A write that the instant downstream commits at once
    effect: write
    params_schema:
      type: object
      required: [n]
      properties: {n: {type: integer}, note: {type: string}}
    http: {url: "%s/commit", timeout: 5s, idempotency_header: Idempotency-Key, result_reference: /id}
`

// benchPolicies are the policies of --policy (docs/PERFORMANCE.md, "Policies and budgets"): the
// README's shape, three rules that match nothing in the run and one budget, its scope spread over
// 100 values ("spread", as 100 principals would be) or one for every request ("one", the worst
// case: every new operation locks the same budget row). The limit is never reached.
var benchPolicies = map[string]string{
	"none": "",
	"spread": `
policies:
  - {name: no-huge, when: params.n < 0, decision: deny, reason: never in the run}
  - {name: finance-bot, when: principal == "finance-bot", decision: allow}
  - {name: big-needs-a-person, when: params.n > 1000000000000, decision: require_approval, reason: never in the run}
budgets:
  - {name: per-principal, per: [string(params.n % 100)], limit: 1000000000000, window: 24h}
`,
	"one": `
policies:
  - {name: no-huge, when: params.n < 0, decision: deny, reason: never in the run}
  - {name: finance-bot, when: principal == "finance-bot", decision: allow}
  - {name: big-needs-a-person, when: params.n > 1000000000000, decision: require_approval, reason: never in the run}
budgets:
  - {name: per-principal, per: [principal], limit: 1000000000000, window: 24h}
`,
}

// gateway is a gateway under test and its instant downstream.
type gateway struct {
	url, downstream, key, dialect, run string
	tenant, principalID, keyID         string
	ledger                             *models.Ledger // fingerprints and downstream keys of preloaded rows
	db                                 *gorm.DB
	preloaded                          int64 // operations written by preload
	commits                            atomic.Int64
	client                             *fasthttp.Client
	close                              func()
}

func startGateway(ctx context.Context, dsn, tenant, policy string) (*gateway, error) {
	g := &gateway{run: fmt.Sprintf("%d", time.Now().UnixNano()), client: &fasthttp.Client{
		MaxConnsPerHost:     4096, // the storm opens one per request
		MaxIdleConnDuration: time.Minute,
	}}
	var closers []func()
	g.close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if dsn == "" {
		dir, err := os.MkdirTemp("", "idembench")
		if err != nil {
			return nil, err
		}
		closers = append(closers, func() { os.RemoveAll(dir) })
		dsn = filepath.Join(dir, "bench.db")
	}
	down, err := g.startDownstream()
	if err != nil {
		return nil, err
	}
	closers = append(closers, func() { down.Close() })

	db, dialect, err := models.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	sqlDB, _ := db.DB()
	closers = append(closers, func() { sqlDB.Close() })
	if err := models.Migrate(ctx, db, dialect); err != nil {
		return nil, err
	}
	g.dialect, g.db = string(dialect), db
	policies, ok := benchPolicies[policy]
	if !ok {
		return nil, fmt.Errorf("--policy %q: want none, spread or one", policy)
	}
	cat, err := catalog.Load([]byte(fmt.Sprintf(benchTools, g.downstream) + policies))
	if err != nil {
		return nil, err
	}
	// Wired as serve wires it (collector target, metrics, spans), so the figures are those
	// of production.
	gctune.Apply(os.Getenv)
	tracing, stopTracing, err := telemetry.SetupTracing(ctx, "idembench")
	if err != nil {
		return nil, err
	}
	closers = append(closers, func() { _ = stopTracing(context.Background()) })
	listen := ""
	if dialect == models.Postgres {
		listen = models.ListenURL(dsn, "") // as serve listens: replicas' changes, the replay cache
	}
	gw, err := app.New(ctx, app.Config{DB: db, Dialect: dialect, ListenDSN: listen, Catalog: cat, Worker: "idembench",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), TracerProvider: tracing,
		Jobs: app.Jobs{Dispatch: true}, HTTP: &web.Settings{RateLimit: 0}})
	if err != nil {
		return nil, err
	}
	ledger := gw.Ledger
	g.ledger = ledger
	g.tenant = tenant
	if g.tenant == "" {
		g.tenant = "bench-" + g.run
	}
	if _, err := ledger.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, g.tenant); err != nil && (tenant == "" || models.ErrorCode(err) != models.CodeConflict) {
		return nil, err // a named tenant may exist already: its operations are reused
	}
	k, err := ledger.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, g.tenant, "bench", nil)
	if err != nil {
		return nil, err
	}
	g.key, g.principalID, g.keyID = k.Secret, k.Key.PrincipalID, k.Key.ID
	jctx, stopJobs := context.WithCancel(ctx)
	jobsDone := make(chan struct{})
	go func() { gw.Run(jctx); close(jobsDone) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stopJobs()
		return nil, err
	}
	srv := &http.Server{Handler: gw.HTTP}
	go srv.Serve(ln)
	closers = append(closers, func() {
		srv.Close()
		stopJobs()
		<-jobsDone
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gw.Shutdown(sctx)
	})
	g.url = "http://" + ln.Addr().String()
	return g, nil
}

// startDownstream serves an instant downstream that commits once per Idempotency-Key.
func (g *gateway) startDownstream() (*http.Server, error) {
	var seen sync.Map
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		if _, dup := seen.LoadOrStore(key, true); !dup || key == "" {
			g.commits.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"c-%d","status":"done"}`, g.commits.Load())
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	g.downstream = "http://" + ln.Addr().String()
	return srv, nil
}

// post sends one request and drains the answer. The load is generated with fasthttp's
// client, which allocates next to nothing per request: what the figures measure is the
// gateway, not the load generator, much as pgbench's lean C client stays out of the floor's
// way. Deadlines come from the scenario's loop (fasthttp takes no context).
func (g *gateway) post(_ context.Context, url, key, body string, auth bool) (int, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(url)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+g.key)
	}
	req.SetBodyString(body)
	if err := g.client.DoTimeout(req, resp, time.Minute); err != nil {
		return 0, err
	}
	return resp.StatusCode(), nil
}

func expect(status int, err error, want ...int) error {
	if err != nil {
		return err
	}
	for _, w := range want {
		if status == w {
			return nil
		}
	}
	return fmt.Errorf("status %d", status)
}

func (g *gateway) direct(ctx context.Context, i int64) error {
	status, err := g.post(ctx, g.downstream+"/commit", fmt.Sprintf("direct-%s-%d", g.run, i), fmt.Sprintf(`{"n":%d}`, i), false)
	return expect(status, err, http.StatusCreated)
}

func (g *gateway) newOperation(ctx context.Context, i int64) error {
	status, err := g.post(ctx, g.url+"/v1/operations", fmt.Sprintf("new-%s-%d", g.run, i),
		fmt.Sprintf(`{"tool":"bench.write","params":{"n":%d}}`, i), true)
	return expect(status, err, http.StatusCreated)
}

func (g *gateway) replay(ctx context.Context, _ int64) error {
	status, err := g.post(ctx, g.url+"/v1/operations", "replay-"+g.run, `{"tool":"bench.write","params":{"n":0}}`, true)
	return expect(status, err, http.StatusOK, http.StatusCreated)
}

// storm sends n concurrent requests for one new key and checks the downstream committed once.
func (g *gateway) storm(ctx context.Context, n int) (result, error) {
	before := g.commits.Load()
	key := "storm-" + g.run
	lat := make([]time.Duration, n)
	var errs atomic.Int64
	var wg sync.WaitGroup
	start, cpu := time.Now(), processCPU()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			status, err := g.post(ctx, g.url+"/v1/operations", key, `{"tool":"bench.write","params":{"n":1}}`, true)
			lat[i] = time.Since(t0)
			if expect(status, err, http.StatusCreated, http.StatusOK) != nil {
				errs.Add(1)
			}
		}()
	}
	wg.Wait()
	r := summarise(fmt.Sprintf("storm (%d duplicates)", n), lat, errs.Load(), time.Since(start), processCPU()-cpu)
	r.Note = fmt.Sprintf("side effects: %d", g.commits.Load()-before)
	if g.commits.Load()-before != 1 {
		return r, fmt.Errorf("storm: %d side effects for one key", g.commits.Load()-before)
	}
	return r, nil
}
