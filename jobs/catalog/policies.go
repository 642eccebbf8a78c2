package catalog

import (
	"errors"
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/idemgate/idemgate/jobs/catalog/rules"
)

// The tools file's policies and budgets (docs/POLICY.md), as written. They are compiled by
// package rules against every tool they apply to.
type rawRule struct {
	Name      string   `yaml:"name"`
	Tools     []string `yaml:"tools"`
	When      string   `yaml:"when"`
	Decision  string   `yaml:"decision"`
	Approvals *int     `yaml:"approvals"`
	Reason    string   `yaml:"reason"`
}

type rawBudget struct {
	Name   string   `yaml:"name"`
	Tools  []string `yaml:"tools"`
	When   string   `yaml:"when"`
	Per    []string `yaml:"per"`
	Amount string   `yaml:"amount"`
	Limit  *int     `yaml:"limit"`
	Window string   `yaml:"window"`
	Period string   `yaml:"period"`
	Over   string   `yaml:"over"`
}

// buildRules decodes the policies and budgets and compiles them against tools.
func buildRules(policies, budgets []*yaml.Node, tools []*Tool) (*rules.Set, []error) {
	var errs []error
	entryErr := func(kind string, i int, node *yaml.Node, field string, err error) {
		name := ""
		if n := mappingValue(node, "name"); n != nil && n.Kind == yaml.ScalarNode {
			name = n.Value
		}
		if name == "" {
			name = fmt.Sprintf("#%d (line %d)", i+1, resolveAlias(node).Line)
		}
		var pe *pathError
		if errors.As(err, &pe) {
			field, err = pe.path, pe.err
		}
		errs = append(errs, &rules.Error{Kind: kind, Name: name, Field: field, Err: err})
	}
	var rs []rules.Rule
	for i, node := range policies {
		var raw rawRule
		if err := decodeStrict(node, &raw); err != nil {
			entryErr("policy", i, node, "", err)
			continue
		}
		r := rules.Rule{Name: raw.Name, Tools: raw.Tools, When: raw.When, Decision: rules.Decision(raw.Decision), Reason: raw.Reason}
		if raw.Approvals != nil {
			if *raw.Approvals < 1 {
				entryErr("policy", i, node, "approvals", errors.New("at least 1"))
				continue
			}
			r.Approvals = *raw.Approvals
		}
		if r.Reason == "" && r.Decision != rules.Allow {
			entryErr("policy", i, node, "reason", errors.New("required: the agent and the reviewers are told it"))
			continue
		}
		rs = append(rs, r)
	}
	var bs []rules.Budget
	for i, node := range budgets {
		var raw rawBudget
		if err := decodeStrict(node, &raw); err != nil {
			entryErr("budget", i, node, "", err)
			continue
		}
		b := rules.Budget{Name: raw.Name, Tools: raw.Tools, When: raw.When, Per: raw.Per, Amount: raw.Amount, Period: raw.Period,
			Over: rules.Decision(raw.Over)}
		if raw.Limit == nil {
			entryErr("budget", i, node, "limit", errors.New("required"))
			continue
		}
		b.Limit = int64(*raw.Limit)
		if raw.Window != "" {
			d, err := time.ParseDuration(raw.Window)
			if err != nil || d <= 0 {
				entryErr("budget", i, node, "window", fmt.Errorf("%q: a positive duration such as 24h", raw.Window))
				continue
			}
			b.Window = d
		}
		bs = append(bs, b)
	}
	// The entries that decoded are compiled even when others did not: every problem of the
	// file is reported in one pass.
	ts := make([]rules.Tool, 0, len(tools))
	for _, t := range tools {
		ts = append(ts, rules.Tool{Name: t.Name, Schema: t.ParamsSchemaRaw})
	}
	set, cerrs := rules.Compile(rs, bs, ts)
	if errs = append(errs, cerrs...); len(errs) > 0 {
		return nil, errs
	}
	return set, nil
}
