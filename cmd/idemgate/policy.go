package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/idemgate/idemgate/internal/buildinfo"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/catalog/rules"
	"github.com/idemgate/idemgate/jobs/mcpclient"
)

const policyUsage = "usage: idemgate policy test [--tools FILE] CASES.yaml | explain [--tools FILE] --tool T --params JSON [--principal P]"

// policy runs `idemgate policy test|explain` (docs/POLICY.md): a tools file's policies and
// budgets tried on calls written down, without a gateway or a ledger.
func (env *environment) policy(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(policyUsage)
	}
	switch args[0] {
	case "test":
		return env.policyTest(ctx, args[1:])
	case "explain":
		return env.policyExplain(ctx, args[1:])
	}
	return fmt.Errorf("unknown policy command %q; %s", args[0], policyUsage)
}

// policyCatalog loads the tools file a policy command tries (the demo catalogue without one).
// Nothing is sent: the connections' credentials are not read.
func (env *environment) policyCatalog(path string) (*catalog.Catalog, func(), error) {
	servers := mcpclient.New(mcpclient.Config{Log: newLogger(env.stderr, env.getenv("IDEMGATE_LOG_LEVEL")), Version: buildinfo.Read().Version})
	if path == "" {
		return catalog.Demo("http://127.0.0.1/sandbox"), servers.Close, nil
	}
	cat, err := catalog.LoadFileWith(path, catalog.Options{Getenv: env.getenv, MCP: servers, SendsNothing: true})
	if err != nil {
		servers.Close()
		return nil, nil, err
	}
	return cat, servers.Close, nil
}

// policyCase is one case of a cases file (docs/POLICY.md, "Testing a policy").
type policyCase struct {
	Name          string           `yaml:"name"`
	Tool          string           `yaml:"tool"`
	Params        map[string]any   `yaml:"params"`
	Principal     string           `yaml:"principal"`
	Tenant        string           `yaml:"tenant"`
	Justification string           `yaml:"justification"`
	Spent         map[string]int64 `yaml:"spent"`
	Expect        string           `yaml:"expect"`
	Rule          string           `yaml:"rule"`
}

// decide evaluates one call on cat: the decision and the rule or budget that made it.
func decide(cat *catalog.Catalog, tool, params, principal, tenant, justification string, spent map[string]int64) (rules.Decision, string, error) {
	t, ok := cat.Get(tool)
	if !ok {
		return "", "", fmt.Errorf("no tool %q in the tools file", tool)
	}
	p, err := rules.Params([]byte(params), t.ParamsSchemaRaw)
	if err != nil {
		return "", "", err
	}
	o := cat.Rules().Evaluate(rules.Call{Tool: t.Name, Params: p, Principal: principal, Tenant: tenant, Justification: justification, Now: time.Now()})
	if o.Err != nil {
		return rules.Deny, o.Failed, fmt.Errorf("%s failed (denied): %w", o.Failed, o.Err)
	}
	d, by := o.Decide(spent)
	return d, by, nil
}

func (env *environment) policyTest(_ context.Context, args []string) error {
	fs := newFlagSet("policy test", env.stderr)
	toolsFile := fs.String("tools", env.getenv("IDEMGATE_TOOLS"), "the tools file whose policies and budgets are tried (default: the built-in demo catalogue)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: idemgate policy test [--tools FILE] CASES.yaml")
	}
	b, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("cases: %w", err)
	}
	var file struct {
		Cases []policyCase `yaml:"cases"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	if len(file.Cases) == 0 {
		return fmt.Errorf("%s: no cases", fs.Arg(0))
	}
	cat, closeCat, err := env.policyCatalog(*toolsFile)
	if err != nil {
		return err
	}
	defer closeCat()
	failed := 0
	for i, c := range file.Cases {
		name := c.Name
		if name == "" {
			name = fmt.Sprintf("case %d", i+1)
		}
		params, _ := json.Marshal(c.Params)
		tenant := c.Tenant
		if tenant == "" {
			tenant = "acme"
		}
		got, by, err := decide(cat, c.Tool, string(params), c.Principal, tenant, c.Justification, c.Spent)
		switch {
		case err != nil && got == "":
			failed++
			fmt.Fprintf(env.stdout, "FAIL %s: %v\n", name, err)
		case string(got) != c.Expect || (c.Rule != "" && by != c.Rule):
			failed++
			fmt.Fprintf(env.stdout, "FAIL %s: %s (decided by %s), expected %s", name, got, orNone(by), c.Expect)
			if c.Rule != "" {
				fmt.Fprintf(env.stdout, " by %s", c.Rule)
			}
			fmt.Fprintln(env.stdout)
		default:
			fmt.Fprintf(env.stdout, "ok   %s: %s (decided by %s)\n", name, got, orNone(by))
		}
	}
	fmt.Fprintf(env.stdout, "%d passed, %d failed\n", len(file.Cases)-failed, failed)
	if failed > 0 {
		return fmt.Errorf("%d of %d cases decided otherwise than expected", failed, len(file.Cases))
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "no rule"
	}
	return s
}

func (env *environment) policyExplain(_ context.Context, args []string) error {
	fs := newFlagSet("policy explain", env.stderr)
	toolsFile := fs.String("tools", env.getenv("IDEMGATE_TOOLS"), "the tools file whose policies and budgets are tried (default: the built-in demo catalogue)")
	tool := fs.String("tool", "", "the tool called (required)")
	params := fs.String("params", "", "the call's params, a JSON object (required)")
	principal := fs.String("principal", "", "the API key's principal")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tool == "" || *params == "" || fs.NArg() > 0 {
		return errors.New("usage: idemgate policy explain [--tools FILE] --tool T --params JSON [--principal P]")
	}
	cat, closeCat, err := env.policyCatalog(*toolsFile)
	if err != nil {
		return err
	}
	defer closeCat()
	t, ok := cat.Get(*tool)
	if !ok {
		return fmt.Errorf("no tool %q in the tools file", *tool)
	}
	p, err := rules.Params([]byte(*params), t.ParamsSchemaRaw)
	if err != nil {
		return err
	}
	steps, o := cat.Rules().Explain(rules.Call{Tool: t.Name, Params: p, Principal: *principal, Tenant: "acme", Now: time.Now()})
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tMATCHED\tWHAT")
	for _, s := range steps {
		matched, what := "no", ""
		switch {
		case s.Skipped:
			matched, what = "-", "not evaluated: an earlier rule decided"
		case s.Err != nil:
			matched, what = "error", "denied (fail closed): "+s.Err.Error()
		case s.Matched && s.Charge != nil:
			matched, what = "yes", fmt.Sprintf("charges %d to %s (limit %d, over the limit: %s)", s.Charge.Amount, s.Charge.Scope, s.Charge.Limit, s.Charge.Over)
		case s.Matched:
			matched, what = "yes", string(s.Decision)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Kind, s.Name, matched, what)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(steps) == 0 {
		fmt.Fprintf(env.stdout, "no policy or budget applies to %s\n", t.Name)
	}
	d, by := o.Decide(nil)
	fmt.Fprintf(env.stdout, "decision: %s (decided by %s; with nothing spent yet on its budgets)\n", d, orNone(by))
	return nil
}
