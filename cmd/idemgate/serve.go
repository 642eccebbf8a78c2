package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"net/url"
	"strings"
	"time"

	"github.com/idemgate/idemgate/handlers/sso"
	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/internal/buildinfo"
	"github.com/idemgate/idemgate/internal/gctune"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/mcpclient"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/web"
	"github.com/idemgate/idemgate/web/telemetry"
	"golang.org/x/sync/errgroup"
)

// shutdownGrace is how long requests and attempts in flight may take to finish at shutdown.
const shutdownGrace = 10 * time.Second

// serveFlags are the settings of serve and worker.
type serveFlags struct {
	demo, demoForce   bool
	addr, metricsAddr string
	toolsFile         string
	rateLimit         float64
	poll, leaseMargin time.Duration
	ledgerDeadline    time.Duration
	webhookWindow     time.Duration
	webhookRetention  time.Duration
	approvalWarning   time.Duration
	trustProxy        string
	trustedProxies    web.TrustedProxies
	allowOrigins      string
	allowedOrigins    web.AllowedOrigins
	publicURL         string
	smtpURL, smtpFrom string
	smtpPasswordFile  string
	mail              *jobs.MailerConfig
	oidc              sso.Config
	sso               *sso.Provider // nil: passwords only
}

func (env *environment) parseServeFlags(args []string, withHTTP bool) (*serveFlags, error) {
	f := &serveFlags{}
	fs := newFlagSet("serve", env.stderr)
	fs.BoolVar(&f.demo, "demo", env.getenv("IDEMGATE_DEMO") == "1", "create a demo tenant, API key and sandbox downstream")
	fs.BoolVar(&f.demoForce, "demo-force", env.getenv("IDEMGATE_DEMO_FORCE") == "1", "allow --demo on a PostgreSQL database")
	fs.StringVar(&f.addr, "addr", orDefault(env.getenv("IDEMGATE_ADDR"), "127.0.0.1:8080"), "listen address")
	fs.StringVar(&f.metricsAddr, "metrics-addr", env.getenv("IDEMGATE_METRICS_ADDR"), "listen address of /metrics (default: not served)")
	fs.StringVar(&f.toolsFile, "tools", env.getenv("IDEMGATE_TOOLS"), "tools file (default: the built-in demo catalogue)")
	fs.StringVar(&f.smtpURL, "smtp-url", env.getenv("IDEMGATE_SMTP_URL"),
		"email reviewers through this SMTP server: smtp://[user@]host:port (STARTTLS when offered) or smtps://…; the password in IDEMGATE_SMTP_PASSWORD or --smtp-password-file")
	fs.StringVar(&f.smtpPasswordFile, "smtp-password-file", env.getenv("IDEMGATE_SMTP_PASSWORD_FILE"),
		"file whose first line is the SMTP user's password, read for every session (a mounted secret; instead of IDEMGATE_SMTP_PASSWORD)")
	fs.StringVar(&f.smtpFrom, "smtp-from", env.getenv("IDEMGATE_SMTP_FROM"), "the From address of reviewers' emails (required with --smtp-url)")
	fs.StringVar(&f.publicURL, "public-url", env.getenv("IDEMGATE_PUBLIC_URL"),
		"the console's address as people reach it (https://idemgate.example.com): notifications link to operations under it")
	fs.Float64Var(&f.rateLimit, "rate-limit", 100, "requests per second per principal (0: unlimited)")
	fs.DurationVar(&f.poll, "poll", 100*time.Millisecond, "how often the dispatcher looks for due retries")
	fs.DurationVar(&f.leaseMargin, "lease-margin", jobs.DefaultLeaseMargin, "added to a tool's timeout to form an attempt's lease")
	ledgerDeadline, err := durationEnv(env.getenv, "IDEMGATE_LEDGER_DEADLINE", models.DefaultRequestDeadline)
	if err != nil {
		return nil, err
	}
	fs.DurationVar(&f.ledgerDeadline, "ledger-deadline", ledgerDeadline,
		"on PostgreSQL, how long each ledger call of a request may take before the request answers 503 ledger-unavailable")
	fs.DurationVar(&f.webhookWindow, "webhook-window", jobs.DefaultWebhookWindow, "how long a webhook delivery is retried before it is dead")
	fs.DurationVar(&f.webhookRetention, "webhook-retention", jobs.DefaultWebhookRetention,
		"how long a webhook delivery (and its outbox message) is kept once delivered or dead (0: forever)")
	fs.DurationVar(&f.approvalWarning, "approval-warning", jobs.DefaultApprovalWarning,
		"how long before an approval lapses the review.expiring webhook goes out (0: none)")
	fs.StringVar(&f.trustProxy, "trust-proxy", env.getenv("IDEMGATE_TRUST_PROXY"),
		"address ranges of the reverse proxies in front (e.g. 10.0.0.0/8,192.168.0.0/16): their X-Forwarded-Proto and X-Forwarded-For are believed")
	fs.StringVar(&f.allowOrigins, "allowed-origin", env.getenv("IDEMGATE_ALLOWED_ORIGINS"),
		"origins (comma-separated, scheme://host[:port]) besides the gateway's own whose browser pages may call /mcp")
	fs.StringVar(&f.oidc.Issuer, "oidc-issuer", env.getenv("IDEMGATE_OIDC_ISSUER"),
		"OpenID Connect provider's issuer URL: offers single sign-on beside passwords (client secret in IDEMGATE_OIDC_CLIENT_SECRET)")
	fs.StringVar(&f.oidc.ClientID, "oidc-client-id", env.getenv("IDEMGATE_OIDC_CLIENT_ID"), "client id registered at the provider")
	fs.StringVar(&f.oidc.RedirectURL, "oidc-redirect-url", env.getenv("IDEMGATE_OIDC_REDIRECT_URL"),
		"this console's callback as registered at the provider: https://<console>"+sso.CallbackPath)
	fs.StringVar(&f.oidc.Name, "oidc-name", env.getenv("IDEMGATE_OIDC_NAME"), "the provider's name on the sign-in button")
	fs.StringVar(&f.oidc.RoleClaim, "oidc-role-claim", orDefault(env.getenv("IDEMGATE_OIDC_ROLE_CLAIM"), sso.DefaultRoleClaim),
		"claim holding the user's role: reviewer, auditor or admin")
	fs.StringVar(&f.oidc.TenantsClaim, "oidc-tenants-claim", orDefault(env.getenv("IDEMGATE_OIDC_TENANTS_CLAIM"), sso.DefaultTenantsClaim),
		`claim holding the user's tenants: a list, or "*" for every tenant`)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if f.ledgerDeadline <= 0 {
		return nil, fmt.Errorf("--ledger-deadline %s: must be positive", f.ledgerDeadline)
	}
	if f.trustedProxies, err = web.ParseTrustedProxies(f.trustProxy); err != nil {
		return nil, err
	}
	if f.allowedOrigins, err = web.ParseAllowedOrigins(f.allowOrigins); err != nil {
		return nil, fmt.Errorf("--allowed-origin: %w", err)
	}
	if f.publicURL, err = parsePublicURL(f.publicURL); err != nil {
		return nil, err
	}
	if f.smtpURL != "" {
		u, err := jobs.ParseSMTPURL(f.smtpURL)
		if err != nil {
			return nil, err
		}
		if _, err := mail.ParseAddress(f.smtpFrom); err != nil {
			return nil, fmt.Errorf("--smtp-from %q: an address is required with --smtp-url: %v", f.smtpFrom, err)
		}
		f.mail = &jobs.MailerConfig{SMTP: u, Password: env.getenv("IDEMGATE_SMTP_PASSWORD"), PasswordFile: f.smtpPasswordFile, From: f.smtpFrom}
		if err := checkSMTPPassword(f.mail); err != nil {
			return nil, err
		}
	}
	if withHTTP && f.oidc.Enabled() {
		// The secret comes from the environment only: a command line is visible to every
		// user of the machine.
		f.oidc.ClientSecret = env.getenv("IDEMGATE_OIDC_CLIENT_SECRET")
		if f.sso, err = sso.New(f.oidc); err != nil {
			return nil, err
		}
	}
	if withHTTP && f.demo && !f.demoForce && models.IsPostgresURL(env.getenv("IDEMGATE_DATABASE_URL")) {
		return nil, fmt.Errorf("--demo creates a demo tenant, an API key and a reviewer login with a known password; " +
			"IDEMGATE_DATABASE_URL names a PostgreSQL database, which is where production ledgers live. " +
			"Use --demo on SQLite, or add --demo-force if this database is only for trying idemgate out")
	}
	return f, nil
}

// serve runs `idemgate serve` (withHTTP) or `idemgate worker`.
func (env *environment) serve(ctx context.Context, args []string, withHTTP bool) error {
	f, err := env.parseServeFlags(args, withHTTP)
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, env.getenv("IDEMGATE_LOG_LEVEL"))
	build := buildinfo.Read()
	log.Info("idemgate starting", "version", build.Version, "revision", build.Revision, "go_version", build.GoVersion,
		"schema_version", models.SchemaVersion())
	gctune.Apply(env.getenv)

	var ln, metricsLn net.Listener
	baseURL := "http://" + f.addr
	if withHTTP {
		if ln, err = net.Listen("tcp", f.addr); err != nil {
			return fmt.Errorf("listen on %s: %w", f.addr, err)
		}
		defer ln.Close()
		baseURL = "http://" + ln.Addr().String()
	}
	if f.metricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", f.metricsAddr); err != nil {
			return fmt.Errorf("listen on %s for /metrics: %w", f.metricsAddr, err)
		}
		defer metricsLn.Close()
	}
	// The MCP servers of the tools file are started (or connected to) while it loads: their
	// tools/list is part of the catalogue. Closed last, after the attempts in flight.
	servers := mcpclient.New(mcpclient.Config{Log: log, Version: buildinfo.Read().Version})
	defer servers.Close()
	cat, err := loadCatalog(f.toolsFile, baseURL+"/sandbox", env.getenv, servers)
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
	listenURL := models.ListenURL(env.getenv("IDEMGATE_DATABASE_URL"), env.getenv("IDEMGATE_DATABASE_LISTEN_URL"))
	if dialect == models.Postgres && listenURL == "" {
		log.Info("the database URL goes through a transaction pooler (default_query_exec_mode) and IDEMGATE_DATABASE_LISTEN_URL is not set: " +
			"no LISTEN connection, waiters on other replicas' operations poll")
	}
	cfg := app.Config{DB: db, Dialect: dialect, ListenDSN: listenURL, Catalog: cat, MCP: servers, PublicURL: f.publicURL,
		Log: log, TracerProvider: tracing, LeaseMargin: f.leaseMargin, LedgerDeadline: f.ledgerDeadline, DataKeys: dataKeys,
		Jobs: app.Jobs{Dispatch: true, Poll: f.poll, Recovery: &jobs.RecoveryConfig{WebhookRetention: keepFor(f.webhookRetention),
			ApprovalWarning: keepFor(f.approvalWarning)},
			Publish: true, WebhookWindow: f.webhookWindow, SecretRefs: models.SecretRefPolicyFromEnv(env.getenv), Mail: f.mail}}
	if withHTTP {
		cfg.HTTP = &web.Settings{RateLimit: f.rateLimit, TrustedProxies: f.trustedProxies, AllowedOrigins: f.allowedOrigins, SSO: f.sso,
			ApprovalWarning: keepFor(f.approvalWarning)}
		if cfg.HTTP.SessionKey, err = env.sessionKey(); err != nil {
			return err
		}
		if f.demo {
			if cfg.HTTP.Sandbox, err = demoSandbox(env.getenv("IDEMGATE_DATABASE_URL")); err != nil {
				return err
			}
		}
	}
	gw, err := app.New(ctx, cfg)
	if err != nil {
		return err
	}
	if withHTTP && f.demo {
		if err := env.setUpDemo(ctx, gw.Ledger, baseURL); err != nil {
			return err
		}
	}
	if withHTTP {
		warnUnsignedExports(ctx, log, gw.Ledger)
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { gw.Run(gctx); return nil })
	if metricsLn != nil {
		// Said before the line that says the process is ready, so a reader has both then.
		g.Go(func() error {
			return web.Serve(gctx, web.NewServer(gw.Metrics.Handler(), web.DefaultTimeouts), metricsLn, shutdownGrace)
		})
		fmt.Fprintf(env.stdout, "metrics at http://%s/metrics\n", metricsLn.Addr())
	}
	if withHTTP {
		g.Go(func() error { return web.Serve(gctx, web.NewServer(gw.HTTP, web.DefaultTimeouts), ln, shutdownGrace) })
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

// keepFor turns a flag where 0 means forever (a retention) or never (a warning) into the
// jobs' setting, where that is negative (their zero is the default).
func keepFor(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

func loadCatalog(file, sandboxURL string, getenv func(string) string, servers catalog.MCPLister) (*catalog.Catalog, error) {
	if file == "" {
		return catalog.Demo(sandboxURL), nil
	}
	return catalog.LoadFileWith(file, catalog.Options{Getenv: getenv, MCP: servers})
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
	password, err := env.demoUsers(ctx, l)
	if err != nil {
		return err
	}
	var logins strings.Builder
	for _, u := range demoLogins {
		fmt.Fprintf(&logins, "    %-21s %s\n", u.email, u.opens)
	}
	fmt.Fprintf(env.stdout, `
Demo tenant "demo" is ready.
  API key:  %[2]s
  Sandbox:  %[1]s/sandbox/   (the downstream the demo tools call; inject faults there)
  Console:  %[1]s/login   with password %[4]s as one of
%[3]s
Try a refund (run it twice: the second answer is a replay, and the sandbox counts one refund):
  curl -s %[1]s/v1/operations \
    -H 'Authorization: Bearer %[2]s' \
    -H 'Idempotency-Key: order-1042:refund' \
    -H 'Content-Type: application/json' \
    -d '{"tool":"refunds.issue","params":{"order_id":"1042","amount_cents":1999,"currency":"EUR"}}'

`, baseURL, secret, logins.String(), password)
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

// warnUnsignedExports says at start what the console's exports will be: unsigned without an
// audit signing key, refused with one the data keys cannot open. Neither stops the gateway,
// whose work does not depend on exports.
func warnUnsignedExports(ctx context.Context, log *slog.Logger, l *models.Ledger) {
	switch err := l.AuditSigningReady(ctx); {
	case err == nil:
	case models.ErrorCode(err) == models.CodeNotFound:
		log.Warn("exports are not signed: there is no audit signing key (idemgate audit key generate makes one; docs/AUDIT.md)")
	default:
		log.Error("exports will be refused: the audit signing key cannot be used", "err", err)
	}
}

// parsePublicURL checks --public-url: an absolute http or https URL of the console, which links
// in notifications are made under; "" for none. A trailing slash is dropped.
func parsePublicURL(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("--public-url %q: want the console's address, such as https://idemgate.example.com", raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// checkSMTPPassword refuses two sources of the SMTP password, and a password file that cannot be
// read now: a missing secret stops the gateway at start, as a connection's does, rather than
// failing every email later.
func checkSMTPPassword(cfg *jobs.MailerConfig) error {
	if cfg.PasswordFile == "" {
		return nil
	}
	if cfg.Password != "" {
		return errors.New("--smtp-password-file and IDEMGATE_SMTP_PASSWORD are both set: give the SMTP password one way")
	}
	if _, err := cfg.SMTPPassword(); err != nil {
		return fmt.Errorf("--smtp-password-file: %w", err)
	}
	return nil
}

// demoSandbox is the demo's sandbox. On an SQLite ledger it keeps its records in a file beside
// the ledger's (idemgate.db.sandbox.json), so a restarted demo's sandbox counts what its ledger
// replays (docs in README.md, "Five minutes with the demo"); elsewhere it keeps them in memory.
// Its ids are stamped with its start either way, so a sandbox that lost its file never repeats
// an id the ledger holds.
func demoSandbox(dsn string) (*sandbox.Sandbox, error) {
	stamp := sandbox.StampedIDs(time.Now())
	if path, ok := models.SQLitePath(dsn); ok {
		return sandbox.Load(path+".sandbox.json", stamp)
	}
	return sandbox.New(stamp), nil
}
