package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/idemgate/idemgate/models"
)

const secretUsage = "usage: idemgate secret set --tenant T NAME (value: first line of standard input) | list [--tenant T] | delete --tenant T NAME"

// secret runs `idemgate secret set|list|delete` (docs/TOOLS.md, docs/CLI.md): a tenant's own credentials
// for its connections, sealed under IDEMGATE_DATA_KEY. No command ever prints a value.
func (env *environment) secret(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", secretUsage)
	}
	switch args[0] {
	case "set":
		return env.secretSet(ctx, args[1:])
	case "list":
		return env.secretList(ctx, args[1:])
	case "delete":
		return env.secretDelete(ctx, args[1:])
	}
	return fmt.Errorf("unknown secret command %q; %s", args[0], secretUsage)
}

func (env *environment) secretSet(ctx context.Context, args []string) error {
	fs := newFlagSet("secret set", env.stderr)
	tenant := fs.String("tenant", "", "tenant whose secret it is (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tenant == "" || fs.NArg() != 1 {
		return fmt.Errorf("usage: idemgate secret set --tenant T NAME (value: first line of standard input)")
	}
	keys, err := env.dataKeys()
	if err != nil {
		return err
	}
	if keys == nil {
		return errors.New("IDEMGATE_DATA_KEY is not set: tenant secrets are sealed under it and never stored in clear")
	}
	line, err := bufio.NewReader(env.stdin).ReadString('\n')
	if err != nil && line == "" {
		return errors.New("no secret on standard input: give the value as its first line")
	}
	value := strings.TrimRight(line, "\r\n")
	l, closeDB, err := env.openLedgerWith(ctx, keys)
	if err != nil {
		return err
	}
	defer closeDB()
	if err := l.SetTenantSecret(ctx, models.AllTenants(), cli, *tenant, fs.Arg(0), value); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "secret %s of tenant %s set\n", fs.Arg(0), *tenant)
	return nil
}

func (env *environment) secretList(ctx context.Context, args []string) error {
	fs := newFlagSet("secret list", env.stderr)
	tenant := fs.String("tenant", "", "only this tenant's secrets")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("usage: idemgate secret list [--tenant T]")
	}
	l, closeDB, err := env.openLedger(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	list, err := l.TenantSecrets(ctx, models.AllTenants(), *tenant)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tNAME\tSET")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Tenant, s.Name, s.SetAt.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return tw.Flush()
}

func (env *environment) secretDelete(ctx context.Context, args []string) error {
	fs := newFlagSet("secret delete", env.stderr)
	tenant := fs.String("tenant", "", "tenant whose secret it is (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tenant == "" || fs.NArg() != 1 {
		return fmt.Errorf("usage: idemgate secret delete --tenant T NAME")
	}
	l, closeDB, err := env.openLedger(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	if err := l.DeleteTenantSecret(ctx, models.AllTenants(), cli, *tenant, fs.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "secret %s of tenant %s deleted\n", fs.Arg(0), *tenant)
	return nil
}
