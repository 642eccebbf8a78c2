package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// Decision is what a rule or a budget decides of a call. Stricter ones win: deny over
// require_approval over allow.
type Decision string

const (
	Allow           Decision = "allow"
	RequireApproval Decision = "require_approval"
	Deny            Decision = "deny"
)

func (d Decision) rank() int {
	switch d {
	case Deny:
		return 2
	case RequireApproval:
		return 1
	}
	return 0
}

// Stricter returns the stricter of d and o.
func (d Decision) Stricter(o Decision) Decision {
	if o.rank() > d.rank() {
		return o
	}
	return d
}

// Rule is one entry of the tools file's `policies`, as written.
type Rule struct {
	Name      string
	Tools     []string // names or globs; empty: every tool
	When      string   // CEL, bool; "" always
	Decision  Decision
	Approvals int // require_approval: 0 for the tool's own review.approvals
	Reason    string
}

// Budget is one entry of `budgets`, as written.
type Budget struct {
	Name   string
	Tools  []string
	When   string
	Per    []string // principal, tool, or CEL expressions over params
	Amount string   // CEL, int >= 0; "" counts 1 per operation
	Limit  int64
	Window time.Duration // rolling; or Period
	Period string        // day, week, month (calendar, UTC)
	Over   Decision      // require_approval (default) or deny
}

// Tool is what the rules need of a tool: its name and its params' schema.
type Tool struct {
	Name   string
	Schema map[string]any
}

// Error is a problem of one rule or budget with one tool, as the loader reports it.
type Error struct {
	Kind  string // "policy" or "budget"
	Name  string
	Tool  string // "" when the problem is the entry's own
	Field string
	Err   error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("tools file: %s %q: ", e.Kind, e.Name)
	if e.Tool != "" {
		msg += fmt.Sprintf("tool %q: ", e.Tool)
	}
	if e.Field != "" {
		msg += e.Field + ": "
	}
	return msg + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Set is the compiled policies and budgets of a tools file. It is immutable and safe for
// concurrent use.
type Set struct {
	rules   []*compiledRule
	budgets []*compiledBudget
}

type compiledRule struct {
	Rule
	when map[string]cel.Program // by tool; nil program: always
}

type compiledBudget struct {
	Budget
	when   map[string]cel.Program
	per    map[string][]cel.Program // by tool, one per CEL part of Per (nil for principal, tool)
	amount map[string]cel.Program
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Compile checks and compiles rules and budgets against tools: every expression is compiled for
// every tool it applies to, so a field one tool lacks is refused naming that tool. All the
// problems are returned together.
func Compile(rules []Rule, budgets []Budget, tools []Tool) (*Set, []error) {
	s := &Set{}
	var errs []error
	names := map[string]bool{}
	name := func(kind, n string) {
		switch {
		case !nameRE.MatchString(n):
			errs = append(errs, &Error{Kind: kind, Name: n, Field: "name", Err: errors.New("use 1-64 lower-case letters, digits, '_' or '-', starting with a letter or digit")})
		case names[n]:
			errs = append(errs, &Error{Kind: kind, Name: n, Field: "name", Err: errors.New("declared twice (names are unique among policies and budgets)")})
		}
		names[n] = true
	}
	for _, r := range rules {
		name("policy", r.Name)
		switch r.Decision {
		case Allow, RequireApproval, Deny:
		default:
			errs = append(errs, &Error{Kind: "policy", Name: r.Name, Field: "decision", Err: fmt.Errorf("%q: use allow, require_approval or deny", r.Decision)})
		}
		if r.Approvals < 0 || (r.Approvals > 0 && r.Decision != RequireApproval) {
			errs = append(errs, &Error{Kind: "policy", Name: r.Name, Field: "approvals", Err: errors.New("a positive count, and only with require_approval")})
		}
		cr := &compiledRule{Rule: r, when: map[string]cel.Program{}}
		matched, gerrs := applies("policy", r.Name, r.Tools, tools)
		errs = append(errs, gerrs...)
		for _, t := range matched {
			if r.When == "" {
				cr.when[t.Name] = nil
				continue
			}
			p, err := compile(t.Name, t.Schema, r.When, types.BoolType)
			if err != nil {
				errs = append(errs, &Error{Kind: "policy", Name: r.Name, Tool: t.Name, Field: "when", Err: err})
				continue
			}
			cr.when[t.Name] = p
		}
		s.rules = append(s.rules, cr)
	}
	for _, b := range budgets {
		name("budget", b.Name)
		if b.Limit < 0 {
			errs = append(errs, &Error{Kind: "budget", Name: b.Name, Field: "limit", Err: errors.New("a limit is 0 or more")})
		}
		switch {
		case b.Window > 0 && b.Period != "":
			errs = append(errs, &Error{Kind: "budget", Name: b.Name, Field: "window", Err: errors.New("give a rolling window or a calendar period, not both")})
		case b.Window <= 0 && b.Period == "":
			errs = append(errs, &Error{Kind: "budget", Name: b.Name, Field: "window", Err: errors.New("give a rolling window (24h) or a calendar period (day, week, month)")})
		case b.Period != "" && b.Period != "day" && b.Period != "week" && b.Period != "month":
			errs = append(errs, &Error{Kind: "budget", Name: b.Name, Field: "period", Err: fmt.Errorf("%q: use day, week or month", b.Period)})
		}
		if b.Over == "" {
			b.Over = RequireApproval
		}
		if b.Over != RequireApproval && b.Over != Deny {
			errs = append(errs, &Error{Kind: "budget", Name: b.Name, Field: "over", Err: fmt.Errorf("%q: use require_approval or deny", b.Over)})
		}
		cb := &compiledBudget{Budget: b, when: map[string]cel.Program{}, per: map[string][]cel.Program{}, amount: map[string]cel.Program{}}
		matched, gerrs := applies("budget", b.Name, b.Tools, tools)
		errs = append(errs, gerrs...)
		for _, t := range matched {
			fail := func(field string, err error) {
				errs = append(errs, &Error{Kind: "budget", Name: b.Name, Tool: t.Name, Field: field, Err: err})
			}
			if b.When != "" {
				p, err := compile(t.Name, t.Schema, b.When, types.BoolType)
				if err != nil {
					fail("when", err)
				}
				cb.when[t.Name] = p
			} else {
				cb.when[t.Name] = nil
			}
			if b.Amount != "" {
				p, err := compile(t.Name, t.Schema, b.Amount, types.IntType)
				if err != nil {
					fail("amount", fmt.Errorf("%w (an amount is an int: use int(...) or a field of type integer)", err))
				}
				cb.amount[t.Name] = p
			}
			progs := make([]cel.Program, len(b.Per))
			for i, part := range b.Per {
				if part == "principal" || part == "tool" {
					continue
				}
				p, err := compile(t.Name, t.Schema, part, nil)
				if err != nil {
					fail(fmt.Sprintf("per[%d]", i), err)
				}
				progs[i] = p
			}
			cb.per[t.Name] = progs
		}
		s.budgets = append(s.budgets, cb)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return s, nil
}

// applies returns the tools a rule's tools list names (every tool when empty); a name or glob
// that matches no tool is an error: it is a typo, or a tool that was removed.
func applies(kind, name string, globs []string, tools []Tool) ([]Tool, []error) {
	if len(globs) == 0 {
		return tools, nil
	}
	var out []Tool
	var errs []error
	for _, g := range globs {
		n := 0
		for _, t := range tools {
			if ok, err := path.Match(g, t.Name); err != nil {
				errs = append(errs, &Error{Kind: kind, Name: name, Field: "tools", Err: fmt.Errorf("%q: %v", g, err)})
				break
			} else if ok {
				n++
				if !contains(out, t.Name) {
					out = append(out, t)
				}
			}
		}
		if n == 0 {
			errs = append(errs, &Error{Kind: kind, Name: name, Field: "tools", Err: fmt.Errorf("%q names no tool of the file", g)})
		}
	}
	return out, errs
}

func contains(ts []Tool, name string) bool {
	for _, t := range ts {
		if t.Name == name {
			return true
		}
	}
	return false
}

// Empty reports whether the set has no rule and no budget.
func (s *Set) Empty() bool { return s == nil || len(s.rules) == 0 && len(s.budgets) == 0 }

// Call is what the rules see of one call.
type Call struct {
	Tool          string
	Params        map[string]any // decoded with numbers typed by the schema (Params)
	Principal     string
	Tenant        string
	Justification string
	Now           time.Time
}

// Charge is what a matching budget would count for a call: its amount against its scope
// value; the ledger adds it up with what was counted before, atomically with the operation.
type Charge struct {
	Budget string   `json:"name"`
	Scope  string   `json:"scope"`
	Amount int64    `json:"amount"`
	Limit  int64    `json:"limit"`
	Over   Decision `json:"-"`
	// Window is a rolling window, or zero with Period a calendar period in UTC.
	Window time.Duration `json:"-"`
	Period string        `json:"-"`
}

// WindowStep is how far a rolling window's start moves at a time: a 1,440th of its length (a
// minute of a day), at least a second. A budget's usage then changes only when a charge is
// made, given back or approved, or once a step when old charges leave, rather than at every
// instant; the window counts charges up to a step older than its length, never fewer.
func WindowStep(window time.Duration) time.Duration { return max(time.Second, window/1440) }

// Since is when the charge's window (or period) began at now: for a rolling window, the whole
// step (WindowStep) at or before now less the window.
func (c Charge) Since(now time.Time) time.Time {
	now = now.UTC()
	switch c.Period {
	case "day":
		return time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	case "week": // ISO weeks start on Monday
		d := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
		return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	case "month":
		return time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return now.Add(-c.Window).Truncate(WindowStep(c.Window))
}

// Outcome is what the rules decided of a call, before the budgets' usage is known.
type Outcome struct {
	Rule      string   // the rule that decided, "" when none matched
	Decision  Decision // the rule's (allow when none)
	Reason    string
	Approvals int
	Charges   []Charge // every budget that matched
	// Failed names the rule or budget whose evaluation failed (or passed the cost limit):
	// the call is denied, and Err says why.
	Failed string
	Err    error
}

// Applies reports whether any rule or budget applies to tool: only then is a call evaluated.
func (s *Set) Applies(tool string) bool {
	if s == nil {
		return false
	}
	for _, r := range s.rules {
		if _, ok := r.when[tool]; ok {
			return true
		}
	}
	for _, b := range s.budgets {
		if _, ok := b.when[tool]; ok {
			return true
		}
	}
	return false
}

// Evaluate runs the rules (the first that matches decides) and the budgets (every one that
// matches is charged) on c. An evaluation that fails or passes the cost limit denies.
func (s *Set) Evaluate(c Call) Outcome {
	out := Outcome{Decision: Allow}
	if s == nil {
		return out
	}
	vars := map[string]any{"params": c.Params, "principal": c.Principal, "tenant": c.Tenant, "tool": c.Tool,
		"now": c.Now.UTC(), "justification": c.Justification}
	fail := func(name string, err error) Outcome {
		return Outcome{Rule: name, Decision: Deny, Failed: name, Err: err,
			Reason: "The policy " + name + " could not be evaluated on this call, so it is refused (fail closed)."}
	}
	for _, r := range s.rules {
		p, ok := r.when[c.Tool]
		if !ok {
			continue
		}
		if p != nil {
			match, err := evalBool(p, vars)
			if err != nil {
				return fail(r.Name, err)
			}
			if !match {
				continue
			}
		}
		out.Rule, out.Decision, out.Reason, out.Approvals = r.Name, r.Decision, r.Reason, r.Approvals
		break
	}
	for _, b := range s.budgets {
		p, ok := b.when[c.Tool]
		if !ok {
			continue
		}
		if p != nil {
			match, err := evalBool(p, vars)
			if err != nil {
				return fail(b.Name, err)
			}
			if !match {
				continue
			}
		}
		ch := Charge{Budget: b.Name, Amount: 1, Limit: b.Limit, Over: b.Over, Window: b.Window, Period: b.Period}
		if ap := b.amount[c.Tool]; ap != nil {
			v, _, err := ap.Eval(vars)
			if err != nil {
				return fail(b.Name, err)
			}
			n, ok := v.Value().(int64)
			if !ok || n < 0 {
				return fail(b.Name, fmt.Errorf("the amount is %v, not an int of 0 or more", v.Value()))
			}
			ch.Amount = n
		}
		scope, err := b.scope(c, vars)
		if err != nil {
			return fail(b.Name, err)
		}
		ch.Scope = scope
		out.Charges = append(out.Charges, ch)
	}
	return out
}

// scope is the budget's scope value for c: its per parts joined, the tenant always implied.
func (b *compiledBudget) scope(c Call, vars map[string]any) (string, error) {
	parts := make([]string, 0, len(b.Per))
	progs := b.per[c.Tool]
	for i, part := range b.Per {
		switch {
		case part == "principal":
			parts = append(parts, c.Principal)
		case part == "tool":
			parts = append(parts, c.Tool)
		default:
			v, _, err := progs[i].Eval(vars)
			if err != nil {
				return "", err
			}
			b, err := json.Marshal(v.Value())
			if err != nil {
				parts = append(parts, fmt.Sprint(v.Value()))
			} else {
				parts = append(parts, strings.Trim(string(b), `"`))
			}
		}
	}
	return strings.Join(parts, "/"), nil
}

func evalBool(p cel.Program, vars map[string]any) (bool, error) {
	v, _, err := p.Eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the condition is %v, not a bool", v.Value())
	}
	return b, nil
}

// Step is one rule or budget as Explain saw it on a call.
type Step struct {
	Kind     string // "policy" or "budget"
	Name     string
	Matched  bool
	Decision Decision // a rule's decision when it matched; "" for a budget (the ledger decides)
	Charge   *Charge  // a budget that matched: what it would charge
	Err      error    // the evaluation failed (the call is denied)
	Skipped  bool     // a rule after the one that decided: not evaluated
}

// Explain evaluates every rule and budget that applies to c's tool, in order, and says what each
// found; the Outcome is Evaluate's.
func (s *Set) Explain(c Call) ([]Step, Outcome) {
	out := s.Evaluate(c)
	if s == nil {
		return nil, out
	}
	vars := map[string]any{"params": c.Params, "principal": c.Principal, "tenant": c.Tenant, "tool": c.Tool,
		"now": c.Now.UTC(), "justification": c.Justification}
	var steps []Step
	decided := false
	for _, r := range s.rules {
		p, ok := r.when[c.Tool]
		if !ok {
			continue
		}
		st := Step{Kind: "policy", Name: r.Name, Skipped: decided}
		if !decided {
			st.Matched = true
			if p != nil {
				st.Matched, st.Err = evalBool(p, vars)
			}
			if st.Matched {
				st.Decision, decided = r.Decision, true
			}
			if st.Err != nil {
				decided = true
			}
		}
		steps = append(steps, st)
	}
	for _, b := range s.budgets {
		if _, ok := b.when[c.Tool]; !ok {
			continue
		}
		st := Step{Kind: "budget", Name: b.Name}
		for i := range out.Charges {
			if out.Charges[i].Budget == b.Name {
				st.Matched, st.Charge = true, &out.Charges[i]
			}
		}
		if out.Failed == b.Name {
			st.Err = out.Err
		}
		steps = append(steps, st)
	}
	return steps, out
}

// Decide is the decision of an outcome once the usage of its budgets is known (spent, by
// budget name; a budget absent from it has used nothing): the strictest of the rule's and of
// each budget's, a budget deciding its over when its charge would pass its limit. It returns the
// decision and the rule or budget that decided it. The ledger decides the same way when it
// charges a new operation (models.Ledger.Submit).
func (o Outcome) Decide(spent map[string]int64) (Decision, string) {
	d, by := o.Decision, o.Rule
	for _, c := range o.Charges {
		if spent[c.Budget]+c.Amount > c.Limit && c.Over.rank() > d.rank() {
			d, by = c.Over, c.Budget
		}
	}
	return d, by
}

// Budgets returns the budgets as written, in file order.
func (s *Set) Budgets() []Budget {
	if s == nil {
		return nil
	}
	out := make([]Budget, 0, len(s.budgets))
	for _, b := range s.budgets {
		out = append(out, b.Budget)
	}
	return out
}

// BudgetTools lists the tools budget name applies to (nil for an unknown budget).
func (s *Set) BudgetTools(name string) []string {
	if s == nil {
		return nil
	}
	for _, b := range s.budgets {
		if b.Name == name {
			tools := make([]string, 0, len(b.when))
			for t := range b.when {
				tools = append(tools, t)
			}
			slices.Sort(tools)
			return tools
		}
	}
	return nil
}

// Describe says a budget's window in words: "24h" or "day".
func (b Budget) Describe() string {
	if b.Period != "" {
		return b.Period
	}
	return b.Window.String()
}

// Since is when b's window began at now.
func (b Budget) Since(now time.Time) time.Time {
	return Charge{Window: b.Window, Period: b.Period}.Since(now)
}
