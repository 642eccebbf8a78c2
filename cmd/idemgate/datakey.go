package main

import (
	"context"
	"fmt"

	"github.com/idemgate/idemgate/internal/buildinfo"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/mcpclient"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
)

// dataKeys reads the data keys that seal sensitive params at rest: IDEMGATE_DATA_KEY seals,
// IDEMGATE_DATA_KEYS_OLD (comma-separated) still open what earlier keys sealed. Neither set:
// nil, params stored in clear.
func (env *environment) dataKeys() (*datakey.Keyring, error) {
	return datakey.Parse(env.getenv("IDEMGATE_DATA_KEY"), env.getenv("IDEMGATE_DATA_KEYS_OLD"))
}

const datakeyUsage = "usage: idemgate datakey generate | idemgate datakey rotate [--tools FILE]"

// datakey runs `idemgate datakey generate` (prints a new data key) and `idemgate datakey
// rotate` (seals every stored sensitive value under IDEMGATE_DATA_KEY).
func (env *environment) datakey(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", datakeyUsage)
	}
	switch args[0] {
	case "generate":
		if len(args) > 1 {
			return fmt.Errorf("%s", datakeyUsage)
		}
		fmt.Fprintln(env.stdout, datakey.Generate())
		return nil
	case "rotate":
		return env.datakeyRotate(ctx, args[1:])
	}
	return fmt.Errorf("%s", datakeyUsage)
}

// datakeyRotate re-encrypts what older keys sealed under the current one, and seals the
// sensitive params stored in clear before a data key was set (which tools have them is the
// tools file's to say). Once it has run, the old keys can be dropped from
// IDEMGATE_DATA_KEYS_OLD.
func (env *environment) datakeyRotate(ctx context.Context, args []string) error {
	fs := newFlagSet("datakey rotate", env.stderr)
	toolsFile := fs.String("tools", env.getenv("IDEMGATE_TOOLS"),
		"tools file whose sensitive_params apply, the one the gateway runs with (default: the built-in demo catalogue)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s", datakeyUsage)
	}
	keys, err := env.dataKeys()
	if err != nil {
		return err
	}
	if keys == nil {
		return fmt.Errorf("IDEMGATE_DATA_KEY is not set: set it to the key to seal with (idemgate datakey generate makes one), and list the previous ones in IDEMGATE_DATA_KEYS_OLD")
	}
	// The tools of MCP servers are known from the servers alone: they are asked, then stopped.
	servers := mcpclient.New(mcpclient.Config{Log: newLogger(env.stderr, env.getenv("IDEMGATE_LOG_LEVEL")), Version: buildinfo.Read().Version})
	defer servers.Close()
	cat, err := loadCatalog(*toolsFile, "http://127.0.0.1/sandbox", env.getenv, servers)
	if err != nil {
		return err
	}
	l, closeDB, err := env.openLedgerWith(ctx, keys)
	if err != nil {
		return err
	}
	defer closeDB()
	r, err := l.RotateDataKeys(ctx, masker(cat), 500)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "data key %s: %d values re-encrypted from older keys, %d sealed that were stored in clear",
		keys.ID(), r.Resealed, r.Sealed)
	if r.LedgerKey {
		fmt.Fprint(env.stdout, "; the ledger's key sealed anew")
	}
	if r.TenantSecrets > 0 {
		fmt.Fprintf(env.stdout, "; %d tenant secrets re-encrypted", r.TenantSecrets)
	}
	if r.AuditKeys > 0 {
		fmt.Fprintf(env.stdout, "; %d audit signing keys re-encrypted", r.AuditKeys)
	}
	if r.RoutingKeys > 0 {
		fmt.Fprintf(env.stdout, "; %d webhook routing keys re-encrypted", r.RoutingKeys)
	}
	fmt.Fprintln(env.stdout)
	// A rotation re-encrypts in batches, each its own transaction: its audit entry follows
	// the last one, and says what was done even if a later run must finish the work.
	if _, err := l.Audit(ctx, models.AuditInput{Actor: models.ActorCLI, Outcome: models.OutcomeOK, Action: models.AuditDataKeyRotate,
		Detail: map[string]any{"key_id": keys.ID(), "resealed": r.Resealed, "sealed": r.Sealed, "ledger_key": r.LedgerKey, "tenant_secrets": r.TenantSecrets, "audit_keys": r.AuditKeys, "routing_keys": r.RoutingKeys}}); err != nil {
		return fmt.Errorf("the keys were rotated, but the audit entry could not be written: %w", err)
	}
	return nil
}

// masker masks params with cat's sensitive_params; tools without any, or unknown to cat, are
// left as they are.
func masker(cat *catalog.Catalog) models.Masker {
	return func(tool string, params []byte) ([]byte, bool, error) {
		t, ok := cat.Get(tool)
		if !ok || len(t.SensitiveParams) == 0 {
			return nil, false, nil
		}
		masked, err := t.RevealCanonical(params) // as a new operation's are kept: jobs.newOperation
		return masked, err == nil, err
	}
}
