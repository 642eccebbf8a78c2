package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"gorm.io/gorm"
)

// openDB opens and migrates the database (every command does, docs/CLI.md) and returns it with a
// function that closes it.
func (env *environment) openDB(ctx context.Context) (*gorm.DB, models.Dialect, func(), error) {
	dsn := env.getenv("IDEMGATE_DATABASE_URL")
	if path, ok := models.SQLitePath(dsn); ok && !env.createsLedger {
		// Opening would create an empty ledger and answer as if it were the real one (no
		// keys, no operations): only serve, worker and migrate create one.
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			abs, _ := filepath.Abs(path)
			return nil, "", nil, fmt.Errorf("no ledger at %s (IDEMGATE_DATABASE_URL, default %s in the working directory): "+
				"set IDEMGATE_DATABASE_URL to the ledger, or create it with `idemgate migrate`", abs, models.DefaultDSN)
		}
	}
	db, dialect, err := models.Open(ctx, dsn)
	if err != nil {
		return nil, "", nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, "", nil, err
	}
	if err := models.Migrate(ctx, db, dialect); err != nil {
		sqlDB.Close()
		return nil, "", nil, err
	}
	return db, dialect, func() { sqlDB.Close() }, nil
}

// openLedger is openDB for the administrative commands, which read and write tenants, keys,
// users, webhooks and the audit log, and change no operation: their ledger renders no
// webhook payloads and reports to no metrics.
func (env *environment) openLedger(ctx context.Context) (*models.Ledger, func(), error) {
	return env.openLedgerWith(ctx, nil)
}

// openLedgerWith is openLedger with data keys. No command computes a fingerprint or a
// downstream key (serve and worker do, through internal/app), so none reads the ledger's key.
func (env *environment) openLedgerWith(ctx context.Context, keys *datakey.Keyring) (*models.Ledger, func(), error) {
	db, dialect, closeDB, err := env.openDB(ctx)
	if err != nil {
		return nil, nil, err
	}
	return models.New(models.Config{DB: db, Dialect: dialect, DataKeys: keys}), closeDB, nil
}

// openSealedLedger is openLedger with the data keys of the environment: for the commands that
// open what is sealed under them (the audit signing key, tenant secrets).
func (env *environment) openSealedLedger(ctx context.Context) (*models.Ledger, func(), error) {
	keys, err := env.dataKeys()
	if err != nil {
		return nil, nil, err
	}
	return env.openLedgerWith(ctx, keys)
}

func (env *environment) migrate(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("migrate takes no arguments")
	}
	_, closeDB, err := env.openLedger(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	fmt.Fprintf(env.stdout, "schema at version %d\n", models.SchemaVersion())
	return nil
}

func (env *environment) tenant(ctx context.Context, args []string) error {
	if len(args) != 2 || args[0] != "create" {
		return fmt.Errorf("usage: idemgate tenant create NAME")
	}
	l, closeDB, err := env.openLedger(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	t, err := l.CreateTenant(ctx, models.AllTenants(), cli, args[1])
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "tenant %s created\n", t.Name)
	return nil
}

func (env *environment) apikey(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: idemgate apikey create|revoke …")
	}
	switch args[0] {
	case "create":
		return env.apikeyCreate(ctx, args[1:])
	case "revoke":
		if len(args) != 2 {
			return fmt.Errorf("usage: idemgate apikey revoke PREFIX")
		}
		l, closeDB, err := env.openLedger(ctx)
		if err != nil {
			return err
		}
		defer closeDB()
		k, err := l.RevokeAPIKey(ctx, models.AllTenants(), cli, args[1])
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "API key %s… of tenant %s revoked\n", k.Prefix, k.Tenant)
		return nil
	}
	return fmt.Errorf("unknown apikey command %q", args[0])
}

func (env *environment) apikeyCreate(ctx context.Context, args []string) error {
	fs := newFlagSet("apikey create", env.stderr)
	tenant := fs.String("tenant", "", "tenant name (required)")
	principal := fs.String("principal", "", "agent identity the key belongs to (required)")
	tools := fs.String("tools", "*", "comma-separated tools the key may use, or * for all")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tenant == "" || *principal == "" || fs.NArg() > 0 {
		return fmt.Errorf("usage: idemgate apikey create --tenant NAME --principal NAME [--tools a,b|*]")
	}
	l, closeDB, err := env.openLedger(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	k, err := l.CreateAPIKey(ctx, models.AllTenants(), cli, *tenant, *principal, strings.Split(*tools, ","))
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "API key for %s/%s (tools: %s), shown once:\n%s\n", *tenant, *principal, k.Key.Tools, k.Secret)
	return nil
}

// cli is who makes the changes of the command line, in the audit log. The command line acts on
// every tenant (models.AllTenants): whoever runs it holds the database anyway.
var cli = models.Requester{Actor: models.ActorCLI}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
