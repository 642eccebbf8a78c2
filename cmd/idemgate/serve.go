package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/internal/gctune"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/web"
	"github.com/idemgate/idemgate/web/telemetry"
	"golang.org/x/sync/errgroup"
)

// shutdownGrace is how long requests and attempts in flight may take to finish at shutdown.
const shutdownGrace = 10 * time.Second

// serve runs `idemgate serve` (withHTTP) or `idemgate worker`.
func (env *environment) serve(ctx context.Context, args []string, withHTTP bool) error {
	fs := newFlagSet("serve", env.stderr)
	demo := fs.Bool("demo", env.getenv("IDEMGATE_DEMO") == "1", "create a demo tenant, API key and sandbox downstream")
	addr := fs.String("addr", orDefault(env.getenv("IDEMGATE_ADDR"), "127.0.0.1:8080"), "listen address")
	toolsFile := fs.String("tools", env.getenv("IDEMGATE_TOOLS"), "tools file (default: the built-in demo catalogue)")
	rateLimit := fs.Float64("rate-limit", 100, "requests per second per principal (0: unlimited)")
	poll := fs.Duration("poll", 100*time.Millisecond, "how often the dispatcher looks for due retries")
	leaseMargin := fs.Duration("lease-margin", jobs.DefaultLeaseMargin, "added to a tool's timeout to form an attempt's lease")
	webhookWindow := fs.Duration("webhook-window", jobs.DefaultWebhookWindow, "how long a webhook delivery is retried before it is dead")
	webhookRetention := fs.Duration("webhook-retention", jobs.DefaultWebhookRetention, "how long a webhook delivery (and its outbox message) is kept once delivered or dead (0: forever)")
	trustProxy := fs.Bool("trust-proxy", env.getenv("IDEMGATE_TRUST_PROXY") == "1", "a reverse proxy terminates TLS: trust its X-Forwarded-Proto and X-Forwarded-For")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := newLogger(env.stderr, env.getenv("IDEMGATE_LOG_LEVEL"))
	gctune.Apply(env.getenv)

	var ln net.Listener
	baseURL := "http://" + *addr
	if withHTTP {
		var err error
		if ln, err = net.Listen("tcp", *addr); err != nil {
			return fmt.Errorf("listen on %s: %w", *addr, err)
		}
		defer ln.Close()
		baseURL = "http://" + ln.Addr().String()
	}
	cat, err := loadCatalog(*toolsFile, baseURL+"/sandbox")
	if err != nil {
		return err
	}
	dataKeys, err := env.dataKeys()
	if err != nil {
		return err
	}
	db, dialect, closeDB, err := env.openDB(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	tracing, stopTracing, err := telemetry.SetupTracing(ctx, "idemgate")
	if err != nil {
		return err
	}
	defer func() {
		// Last, after the attempts in flight: their spans are flushed too.
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(fctx); err != nil {
			log.Warn("flushing traces", "err", err)
		}
	}()
	cfg := app.Config{DB: db, Dialect: dialect, ListenDSN: env.getenv("IDEMGATE_DATABASE_URL"), Catalog: cat,
		Log: log, TracerProvider: tracing, LeaseMargin: *leaseMargin, DataKeys: dataKeys,
		Jobs: app.Jobs{Dispatch: true, Poll: *poll, Recovery: &jobs.RecoveryConfig{WebhookRetention: keepFor(*webhookRetention)},
			Publish: true, WebhookWindow: *webhookWindow}}
	if withHTTP {
		cfg.HTTP = &web.Settings{RateLimit: *rateLimit, TrustProxy: *trustProxy}
		if cfg.HTTP.SessionKey, err = env.sessionKey(); err != nil {
			return err
		}
		if *demo {
			cfg.HTTP.Sandbox = sandbox.New()
		}
	}
	gw, err := app.New(ctx, cfg)
	if err != nil {
		return err
	}
	if withHTTP && *demo {
		if err := env.setUpDemo(ctx, gw.Ledger, baseURL); err != nil {
			return err
		}
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { gw.Run(gctx); return nil })
	if withHTTP {
		g.Go(func() error { return web.Serve(gctx, gw.HTTP, ln, shutdownGrace) })
		fmt.Fprintf(env.stdout, "idemgate listening on %s (worker %s, %s ledger)\n", baseURL, gw.Executor.Worker(), dialect)
	} else {
		fmt.Fprintf(env.stdout, "idemgate worker %s running (%s ledger)\n", gw.Executor.Worker(), dialect)
	}
	err = g.Wait()
	// HTTP has stopped and the dispatcher claims nothing more; let attempts in flight finish.
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	gw.Shutdown(sctx)
	return err
}

// keepFor turns a retention flag, where 0 means forever, into the jobs' setting, where
// forever is negative (their zero is the default).
func keepFor(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

func loadCatalog(file, sandboxURL string) (*catalog.Catalog, error) {
	if file == "" {
		return catalog.Demo(sandboxURL), nil
	}
	return catalog.LoadFile(file)
}

// demoKeySetting keeps the demo API key so a restarted demo can print it again. Only the demo
// tenant's key is ever kept in clear, and only because --demo asked for a playground.
const demoKeySetting = "demo.api_key"

func (env *environment) setUpDemo(ctx context.Context, l *models.Ledger, baseURL string) error {
	if _, err := l.CreateTenant(ctx, models.AllTenants(), cli, "demo"); err != nil && models.ErrorCode(err) != models.CodeConflict {
		return err
	}
	secret, err := l.Setting(ctx, demoKeySetting)
	if err != nil {
		return err
	}
	if secret == "" {
		k, err := l.CreateAPIKey(ctx, models.AllTenants(), cli, "demo", "demo-agent", nil)
		if err != nil {
			return err
		}
		if secret, err = l.EnsureSetting(ctx, demoKeySetting, k.Secret); err != nil {
			return err
		}
	}
	password, err := env.demoReviewer(ctx, l)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, `
Demo tenant "demo" is ready.
  API key:  %[2]s
  Sandbox:  %[1]s/sandbox/   (the downstream the demo tools call; inject faults there)
  Console:  %[1]s/login   as %[3]s with password %[4]s

Try a refund (run it twice: the second answer is a replay, and the sandbox counts one refund):
  curl -s %[1]s/v1/operations \
    -H 'Authorization: Bearer %[2]s' \
    -H 'Idempotency-Key: order-1042:refund' \
    -H 'Content-Type: application/json' \
    -d '{"tool":"refunds.issue","params":{"order_id":"1042","amount_cents":1999,"currency":"EUR"}}'

`, baseURL, secret, demoReviewerEmail, password)
	return nil
}

func newLogger(w interface{ Write([]byte) (int, error) }, level string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToUpper(orDefault(level, "info")))); err != nil {
		lv = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv}))
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
