// Package app builds the gateway: the one constructor that `idemgate serve`, `idemgate
// worker`, the load command and every test harness call, so that what the tests and the
// benchmarks run is wired exactly as production is. Every part a piece needs is given to its
// constructor here; nothing is patched in afterwards.
package app

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/downstream"
	"github.com/idemgate/idemgate/jobs/mcpclient"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/web"
	"github.com/idemgate/idemgate/web/telemetry"
	"github.com/labstack/echo/v4"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
)

// Config is what a gateway is built from. DB, Dialect and Catalog are required.
type Config struct {
	// DB is an opened, migrated database of engine Dialect.
	DB      *gorm.DB
	Dialect models.Dialect
	// ListenDSN, when set on PostgreSQL, is the URL the ledger listens on for other
	// replicas' changes and revocations (LISTEN/NOTIFY); empty: no listener, waiters poll.
	ListenDSN string
	Catalog   *catalog.Catalog
	// MCP is the client of the catalogue's MCP servers, the one its tools were listed with
	// (nil when it has none). The caller closes it after Shutdown.
	MCP *mcpclient.Pool
	// Worker names this process on leases and timelines (default: host, pid and a random
	// suffix).
	Worker string
	// Log receives the gateway's log lines (default: slog.Default()).
	Log *slog.Logger
	// Now is the clock of the ledger, the executor and the console (nil: the wall clock).
	Now func() time.Time
	// TracerProvider makes the spans of requests, ledger transactions, attempts and probes
	// (nil: an SDK provider that exports nothing, so ids and the traceparent sent downstream
	// are still real).
	TracerProvider trace.TracerProvider
	// KeyCacheTTL is how long an authenticated API key is believed (see models.Config).
	KeyCacheTTL time.Duration
	// DataKeys seal sensitive params at rest (IDEMGATE_DATA_KEY, see models/datakey); nil
	// keeps them in clear, with a warning at start when the catalogue has any.
	DataKeys *datakey.Keyring
	// LeaseMargin is added to a tool's timeout to form an attempt's lease
	// (jobs.DefaultLeaseMargin if zero).
	LeaseMargin time.Duration
	// LedgerDeadline bounds each ledger call of a request (serve --ledger-deadline;
	// models.DefaultRequestDeadline if zero).
	LedgerDeadline time.Duration
	// DownstreamDial makes the connections to downstreams (nil: a net.Dialer); tests dial
	// from a network namespace of their own with it.
	DownstreamDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Jobs says which background jobs Run runs.
	Jobs Jobs
	// PublicURL is the console's address as people reach it (serve --public-url): webhook
	// payloads link to operations under it. "" links nowhere.
	PublicURL string
	// HTTP, when set, builds the HTTP server (the agent API, MCP, the console); nil builds
	// none (idemgate worker).
	HTTP *web.Settings
}

// Jobs says which background jobs run, and how often. The zero value runs none: a harness
// that wants operations to stay where it put them asks for nothing.
type Jobs struct {
	// Dispatch claims due PENDING operations every Poll (default 100 ms) and runs up to
	// Concurrency (default 64) attempts at once.
	Dispatch    bool
	Poll        time.Duration
	Concurrency int
	// Recovery, when set, runs the lease reaper, reconciler, escalator and retention sweeps.
	Recovery *jobs.RecoveryConfig
	// Publish runs the webhook publisher; WebhookWindow is how long a delivery is retried
	// (jobs.DefaultWebhookWindow if zero).
	Publish       bool
	WebhookWindow time.Duration
	// SecretRefs is what the operator set aside for PagerDuty routing key references
	// (models.SecretRefPolicyFromEnv); the zero value reads none.
	SecretRefs models.SecretRefPolicy
	// BudgetsEvery is how often the budgets' usage gauge is read (default 15 s).
	BudgetsEvery time.Duration
	// Mail, when set, emails reviewers (serve and worker --smtp-url): the ledger writes the
	// emails and this mailer sends them. Ledger, Worker, Now and Log are filled in.
	Mail *jobs.MailerConfig
}

// App is a built gateway.
type App struct {
	Ledger   *models.Ledger
	Catalog  *catalog.Catalog
	Executor *jobs.Executor
	Metrics  *telemetry.Metrics
	// HTTP serves the API, MCP and the console; nil without Config.HTTP.
	HTTP *echo.Echo

	cfg Config
	log *slog.Logger
}

// New builds the gateway cfg describes. It starts nothing: Run runs the background jobs,
// and the caller serves HTTP. It reads the database for the ledger's key, to check that the
// data keys open what the ledger sealed, and for the console's session key when none is
// configured.
func New(ctx context.Context, cfg Config) (*App, error) {
	if cfg.DB == nil || cfg.Dialect == "" || cfg.Catalog == nil {
		return nil, errors.New("app: a database, its dialect and a catalogue are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = sdktrace.NewTracerProvider()
	}
	if cfg.Worker == "" {
		cfg.Worker = WorkerName()
	}
	cat, log := cfg.Catalog, cfg.Log
	// The ledger's key is read once, here: every fingerprint and downstream key this
	// process makes uses the key every other replica uses (docs/STATES.md).
	key, err := models.LedgerKey(ctx, cfg.DB, cfg.DataKeys)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	metrics := telemetry.New(cat.Names(), log)
	ledger := models.New(models.Config{
		DB:          cfg.DB,
		Dialect:     cfg.Dialect,
		Now:         cfg.Now,
		Payloads:    opview.Payloads(cat), // webhook payloads show operations as the API does, masked
		PublicURL:   cfg.PublicURL,
		Mail:        cfg.Jobs.Mail != nil,
		Observer:    metrics,
		Tracer:      cfg.TracerProvider.Tracer("github.com/idemgate/idemgate/models"),
		KeyCacheTTL: cfg.KeyCacheTTL,
		Key:         key,
		DataKeys:    cfg.DataKeys,

		RequestDeadline: cfg.LedgerDeadline,
	})
	if err := ledger.CheckDataKeys(ctx); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if cfg.DataKeys == nil {
		// Tenant secrets are sealed under the data key: without one, none can be read.
		if err := cat.NeedsDataKey(); err != nil {
			return nil, err
		}
	}
	if cfg.DataKeys == nil {
		if names := sensitiveTools(cat); len(names) > 0 {
			log.Warn("IDEMGATE_DATA_KEY is not set: the sensitive params of these tools are stored in clear in the ledger until retention drops them; set it to seal them (AES-256-GCM)",
				"tools", names)
		}
	}
	if names := annotatedRetrySafe(cat); len(names) > 0 {
		log.Warn("these tools' effect comes from their MCP server's annotations (readOnlyHint or idempotentHint), so the gateway repeats their ambiguous attempts on the server's word: write effect: in the tools file for each, after checking",
			"tools", names)
	}
	metrics.WatchLedger(ledger, jobs.Windows(cat))
	exec := jobs.NewExecutor(jobs.ExecutorConfig{Ledger: ledger, Catalog: cat, MCP: cfg.MCP, Worker: cfg.Worker,
		Connector:   downstream.New(downstream.Config{TenantSecrets: ledger, Dial: cfg.DownstreamDial}),
		LeaseMargin: cfg.LeaseMargin, Meter: metrics, Now: cfg.Now, Log: log, TracerProvider: cfg.TracerProvider})
	a := &App{Ledger: ledger, Catalog: cat, Executor: exec, Metrics: metrics, cfg: cfg, log: log}
	if cfg.HTTP != nil {
		settings := *cfg.HTTP
		settings.Mail = cfg.Jobs.Mail != nil
		if settings.SessionKey == "" {
			key, err := keptSessionKey(ctx, ledger, log)
			if err != nil {
				return nil, err
			}
			settings.SessionKey = key
		}
		a.HTTP = web.New(web.Config{Ledger: ledger, Catalog: cat, Executor: exec, Metrics: metrics,
			TracerProvider: cfg.TracerProvider, Log: log, Now: cfg.Now, Settings: settings})
	}
	return a, nil
}

// sensitiveTools names the tools that declare sensitive params.
func sensitiveTools(cat *catalog.Catalog) []string {
	var out []string
	for _, t := range cat.Tools() {
		if len(t.SensitiveParams) > 0 {
			out = append(out, t.Name)
		}
	}
	return out
}

// annotatedRetrySafe names the upstream tools the gateway retries only because their server's
// annotations say they may be.
func annotatedRetrySafe(cat *catalog.Catalog) []string {
	var out []string
	for _, t := range cat.Tools() {
		if t.MCP != nil && t.MCP.EffectFromAnnotations && !t.MCP.HonoursKey {
			out = append(out, t.Name)
		}
	}
	return out
}

// sessionKeySetting keeps the generated console session secret when none is configured, so
// sessions survive restarts and every replica sharing the database agrees on it.
const sessionKeySetting = "session.key"

// keptSessionKey returns the console's session secret kept in the database, generating it
// on first use (docs/CLI.md), with a warning: anyone who can read the database can then forge
// sessions.
func keptSessionKey(ctx context.Context, l *models.Ledger, log *slog.Logger) (string, error) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms (Go 1.24+)
	key, err := l.EnsureSetting(ctx, sessionKeySetting, base64.RawURLEncoding.EncodeToString(b[:]))
	if err != nil {
		return "", fmt.Errorf("app: console session key: %w", err)
	}
	log.Warn("IDEMGATE_SESSION_KEY is not set: using a session key generated and kept in the database; set it in production")
	return key, nil
}

// Run runs the background jobs of Config.Jobs, and the ledger's listener, until ctx ends.
// It returns once they have all stopped; attempts they started may still be in flight (see
// Shutdown).
func (a *App) Run(ctx context.Context) {
	j := a.cfg.Jobs
	var wg sync.WaitGroup
	run := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	if j.Dispatch {
		poll, n := j.Poll, j.Concurrency
		if poll <= 0 {
			poll = 100 * time.Millisecond
		}
		if n <= 0 {
			n = 64
		}
		run(jobs.NewDispatcher(a.Executor, a.Ledger, poll, n, a.log).Run)
	}
	if j.Recovery != nil {
		run(jobs.NewRecovery(a.Executor, *j.Recovery).Run)
	}
	if j.Publish {
		run(jobs.NewPublisher(jobs.PublisherConfig{Ledger: a.Ledger, Worker: a.Executor.Worker(),
			Window: j.WebhookWindow, Now: a.cfg.Now, Log: a.log, SecretRefs: j.SecretRefs}).Run)
	}
	if j.Mail != nil {
		mc := *j.Mail
		mc.Ledger, mc.Worker, mc.Now, mc.Log = a.Ledger, a.Executor.Worker(), a.cfg.Now, a.log
		run(jobs.NewMailer(mc).Run)
	}
	if a.cfg.ListenDSN != "" {
		run(func(ctx context.Context) { a.Ledger.Listen(ctx, a.cfg.ListenDSN, a.log) })
	}
	run(func(ctx context.Context) { a.Ledger.KeepRepeats(ctx, repeatsEvery, settledRepeatsEvery, a.log) })
	run(func(ctx context.Context) {
		every := j.BudgetsEvery
		if every <= 0 {
			every = budgetsEvery
		}
		jobs.WatchBudgets(ctx, a.Ledger, a.Catalog.Rules(), a.Metrics, every, a.log)
	})
	wg.Wait()
}

// budgetsEvery is how often the budgets' usage gauge is read again.
const budgetsEvery = 15 * time.Second

// repeatsEvery is how often the counts of repeated requests of operations not yet settled are
// written (models.Repeats): a reviewer deciding one sees an agent's retries on its page within
// that. settledRepeatsEvery is the same for settled operations, whose repeats are history and,
// under load, nearly every replay: written this rarely they cost a write per operation per 30 s
// instead of per 2 s. (The process that answered a repeat shows it at once either way.)
const (
	repeatsEvery        = 2 * time.Second
	settledRepeatsEvery = 30 * time.Second
)

// Shutdown lets the attempts in flight finish and record their outcomes, until ctx ends, and
// writes the repeated requests counted since Run stopped. Call it after Run has returned and
// HTTP has stopped, so that nothing starts new ones.
func (a *App) Shutdown(ctx context.Context) {
	a.Executor.Shutdown(ctx)
	if _, err := a.Ledger.FlushRepeats(ctx); err != nil {
		a.log.Warn("writing the last counts of repeated requests", "err", err)
	}
}

// WorkerName is a name for this process that no other replica shares: host, pid and a random
// suffix (a restarted process on the same host and pid is another worker).
func WorkerName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), models.NewAttemptID()[len("att_")+20:])
}
