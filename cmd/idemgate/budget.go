package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog/rules"
	"github.com/idemgate/idemgate/models"
)

const budgetUsage = "usage: idemgate budget set --tenant T NAME LIMIT | unset --tenant T NAME | list [--tenant T] [--tools FILE]"

// budget runs `idemgate budget set|unset|list` (docs/POLICY.md): a tenant's own limit of a budget
// of the tools file, and what each budget counts now.
func (env *environment) budget(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(budgetUsage)
	}
	switch args[0] {
	case "set", "unset":
		return env.budgetSet(ctx, args[0], args[1:])
	case "list":
		return env.budgetList(ctx, args[1:])
	}
	return fmt.Errorf("unknown budget command %q; %s", args[0], budgetUsage)
}

// fileBudget finds budget name in the tools file at path (the demo catalogue without one).
func (env *environment) fileBudgets(path string) ([]rules.Budget, error) {
	cat, closeCat, err := env.policyCatalog(path)
	if err != nil {
		return nil, err
	}
	defer closeCat()
	return cat.Rules().Budgets(), nil
}

func (env *environment) budgetSet(ctx context.Context, verb string, args []string) error {
	fs := newFlagSet("budget set", env.stderr)
	if verb == "unset" {
		fs = newFlagSet("budget unset", env.stderr)
	}
	tenant := fs.String("tenant", "", "the tenant whose limit it is (required)")
	toolsFile := fs.String("tools", env.getenv("IDEMGATE_TOOLS"), "the tools file that declares the budget (default: the built-in demo catalogue)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	want := 1
	if verb == "set" {
		want = 2
	}
	if *tenant == "" || fs.NArg() != want {
		return errors.New(budgetUsage)
	}
	name := fs.Arg(0)
	budgets, err := env.fileBudgets(*toolsFile)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(budgets, func(b rules.Budget) bool { return b.Name == name }) {
		return fmt.Errorf("the tools file declares no budget %q", name)
	}
	l, closeDB, err := env.openLedger(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	if verb == "unset" {
		if err := l.UnsetBudgetLimit(ctx, models.AllTenants(), cli, *tenant, name); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "budget %s of tenant %s: the tools file's limit applies again\n", name, *tenant)
		return nil
	}
	limit, err := strconv.ParseInt(fs.Arg(1), 10, 64)
	if err != nil || limit < 0 {
		return fmt.Errorf("limit %q: a whole number, 0 or more", fs.Arg(1))
	}
	if err := l.SetBudgetLimit(ctx, models.AllTenants(), cli, *tenant, name, limit); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "budget %s of tenant %s: limit %d, from the next operation on\n", name, *tenant, limit)
	return nil
}

func (env *environment) budgetList(ctx context.Context, args []string) error {
	fs := newFlagSet("budget list", env.stderr)
	tenant := fs.String("tenant", "", "only this tenant")
	toolsFile := fs.String("tools", env.getenv("IDEMGATE_TOOLS"), "the tools file that declares the budgets (default: the built-in demo catalogue)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errors.New("usage: idemgate budget list [--tenant T] [--tools FILE]")
	}
	budgets, err := env.fileBudgets(*toolsFile)
	if err != nil {
		return err
	}
	l, closeDB, err := env.openLedger(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	tenants := []string{*tenant}
	if *tenant == "" {
		all, err := l.ScopedTenants(ctx, models.AllTenants())
		if err != nil {
			return err
		}
		tenants = tenants[:0]
		for _, t := range all {
			tenants = append(tenants, t.Name)
		}
	}
	own, err := l.BudgetLimits(ctx, models.AllTenants(), *tenant)
	if err != nil {
		return err
	}
	if len(budgets) == 0 {
		fmt.Fprintln(env.stdout, "the tools file declares no budget")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUDGET\tTENANT\tLIMIT\tWINDOW\tSCOPE\tUSED")
	for _, b := range budgets {
		for _, t := range tenants {
			limit, whose := b.Limit, ""
			for _, o := range own {
				if o.Tenant == t && o.Budget == b.Name {
					limit, whose = o.LimitAmount, " (tenant's)"
				}
			}
			top, err := l.BudgetTop(ctx, t, b.Name, b.Since(now), 5)
			if err != nil {
				return err
			}
			if len(top) == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%d%s\t%s\t-\t0\n", b.Name, t, limit, whose, b.Describe())
			}
			for _, u := range top {
				fmt.Fprintf(tw, "%s\t%s\t%d%s\t%s\t%s\t%d\n", b.Name, t, limit, whose, b.Describe(), u.Scope, u.Used)
			}
		}
	}
	return tw.Flush()
}
