package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemgate/idemgate/handlers/export"
	"github.com/idemgate/idemgate/internal/buildinfo"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/mcpclient"
	"github.com/idemgate/idemgate/models"
)

// exportUsage is printed with every export usage error.
const exportUsage = "usage: idemgate export --format csv|ndjson [--tenant T] [--from T] [--to T] [--state S] [--tool N] [--tools FILE]"

// export writes an operation history to standard output (docs/AUDIT.md) and anchors it in the audit
// chain with actor "cli".
func (env *environment) export(ctx context.Context, args []string) error {
	fs := newFlagSet("export", env.stderr)
	format := fs.String("format", "", "csv or ndjson (required)")
	tenant := fs.String("tenant", "", "only this tenant's operations")
	from := fs.String("from", "", "only operations created at or after this time (RFC 3339, or YYYY-MM-DD in UTC)")
	to := fs.String("to", "", "only operations created before this time (RFC 3339), or on or before this day (YYYY-MM-DD in UTC)")
	state := fs.String("state", "", "only operations in this state")
	tool := fs.String("tool", "", "only operations of this tool")
	toolsFile := fs.String("tools", env.getenv("IDEMGATE_TOOLS"),
		"tools file whose masking rules apply, the one the gateway runs with (default: the built-in demo catalogue)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *format == "" || fs.NArg() > 0 {
		return fmt.Errorf("%s", exportUsage)
	}
	f, err := export.ParseFormat(*format)
	if err != nil {
		return err
	}
	filter := export.Filter{Tenant: *tenant, Tool: *tool, State: models.State(strings.ToUpper(*state))}
	if filter.From, err = parseWhen("from", *from, false); err != nil {
		return err
	}
	if filter.To, err = parseWhen("to", *to, true); err != nil {
		return err
	}
	if filter.State != "" && !filter.State.Valid() {
		return fmt.Errorf("invalid --state %q: want one of %v", *state, models.States)
	}
	// The tools of MCP servers are known from the servers alone: they are asked, then stopped.
	servers := mcpclient.New(mcpclient.Config{Log: newLogger(env.stderr, env.getenv("IDEMGATE_LOG_LEVEL")), Version: buildinfo.Read().Version})
	defer servers.Close()
	// An export sends nothing downstream: the connections' credentials are not needed (an
	// auditor has none of them), only the masking rules.
	cat := catalog.Demo("http://127.0.0.1/sandbox")
	if *toolsFile != "" {
		if cat, err = catalog.LoadFileWith(*toolsFile, catalog.Options{Getenv: env.getenv, MCP: servers, SendsNothing: true}); err != nil {
			return err
		}
	}
	// The data keys open the audit signing key, which signs the export.
	l, closeDB, err := env.openSealedLedger(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	if err := knownTenant(ctx, l, *tenant); err != nil {
		return err
	}
	x := export.Exporter{Ledger: l, Catalog: cat}
	res, err := x.Write(ctx, env.stdout, export.Request{Format: f, Filter: filter, Scope: models.AllTenants(), Actor: models.ActorCLI})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "exported %d operations, %d events (sha256 %s); audit entry %d %s\n",
		res.Operations, res.Events, res.SHA256, res.Entry.Seq, res.Entry.Hash)
	return nil
}

// parseWhen reads a --from or --to value: RFC 3339, or a date (UTC). A date given as the end
// of a range includes that whole day.
func parseWhen(name, s string, end bool) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid --%s %q: want RFC 3339 (2026-11-29T10:00:00Z) or YYYY-MM-DD", name, s)
	}
	if end {
		d = d.AddDate(0, 0, 1)
	}
	return d, nil
}

// knownTenant refuses a tenant that does not exist, rather than export nothing silently.
func knownTenant(ctx context.Context, l *models.Ledger, name string) error {
	if name == "" {
		return nil
	}
	tenants, err := l.ScopedTenants(ctx, models.AllTenants())
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(tenants, func(t models.Tenant) bool { return t.Name == name }) {
		return fmt.Errorf("unknown tenant %q", name)
	}
	return nil
}
