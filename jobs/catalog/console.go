package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"text/template"
	"text/template/parse"
)

// Two optional fields of a tool serve only the review console (docs/DECISIONS.md): summary, a one-line text that says what a call is about ("42.00 EUR to order
// 1044"), and reference_url, a link into the downstream's own console where a reviewer looks
// the operation up. Neither changes what is sent downstream.

// summaryRoots are what a summary may name. A summary is read from the params as people see
// them (RevealCanonical) or as the API does (MaskCanonical); a sensitive param named plainly
// reads "***" either way, and {{reveal .Params.name}} reads its safe form (docs/TOOLS.md) from
// the people's params, "***" from the API's.
var summaryRoots = map[string]bool{"Key": false, "Tenant": false, "Params": true}

// summaryTemplate is a parsed summary: literal text, field references, and money calls.
type summaryTemplate struct {
	parts []summaryPart
}

// summaryPart is literal text, a field reference, or money over an amount and a currency.
type summaryPart struct {
	text     string
	field    []string
	money    bool
	reveal   bool
	currency []string
}

// parseSummary parses a summary template: {{.Params.name}} references and
// {{money .Params.amount_cents .Params.currency}}, which spells an amount in minor units
// ("4200", "EUR" → "42.00 EUR"), and {{reveal .Params.card_number}}, a sensitive param's safe
// form. Nothing else is allowed, as in URL templates.
func parseSummary(src string) (*summaryTemplate, error) {
	funcs := template.FuncMap{"money": func(any, any) string { return "" }, "reveal": func(any) string { return "" }}
	t, err := template.New("summary").Funcs(funcs).Parse(src)
	if err != nil {
		return nil, fmt.Errorf("invalid template %q: %w", src, err)
	}
	if len(t.Templates()) > 1 {
		return nil, fmt.Errorf("invalid template %q: {{define}} and {{block}} are not allowed", src)
	}
	st := &summaryTemplate{}
	if t.Tree == nil || t.Tree.Root == nil {
		return st, nil
	}
	for _, n := range t.Tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			st.parts = append(st.parts, summaryPart{text: string(n.Text)})
		case *parse.CommentNode:
		case *parse.ActionNode:
			part, err := summaryAction(n)
			if err != nil {
				return nil, fmt.Errorf("invalid template %q: %w", src, err)
			}
			st.parts = append(st.parts, part)
		default:
			return nil, fmt.Errorf("invalid template %q: %s is not allowed, only references like {{.Params.name}} and money", src, n)
		}
	}
	return st, nil
}

func summaryAction(n *parse.ActionNode) (summaryPart, error) {
	p := n.Pipe
	if p != nil && len(p.Decl) == 0 && len(p.Cmds) == 1 {
		args := p.Cmds[0].Args
		if id, ok := args[0].(*parse.IdentifierNode); ok && id.Ident == "money" {
			if len(args) != 3 {
				return summaryPart{}, fmt.Errorf("%s: money takes an amount in minor units and a currency", n)
			}
			amount, err1 := summaryField(args[1], n)
			currency, err2 := summaryField(args[2], n)
			if err1 != nil {
				return summaryPart{}, err1
			}
			if err2 != nil {
				return summaryPart{}, err2
			}
			return summaryPart{field: amount, money: true, currency: currency}, nil
		}
		if id, ok := args[0].(*parse.IdentifierNode); ok && id.Ident == "reveal" {
			if len(args) != 2 {
				return summaryPart{}, fmt.Errorf("%s: reveal takes one param, as in reveal .Params.card_number", n)
			}
			field, err := summaryField(args[1], n)
			if err != nil {
				return summaryPart{}, err
			}
			if field[0] != "Params" {
				return summaryPart{}, fmt.Errorf("%s: reveal takes a param, as in reveal .Params.card_number", n)
			}
			return summaryPart{field: field, reveal: true}, nil
		}
	}
	field, err := fieldOf(n, summaryRoots)
	return summaryPart{field: field}, err
}

// summaryField checks one argument of money: a field reference within summaryRoots.
func summaryField(arg parse.Node, n *parse.ActionNode) ([]string, error) {
	f, ok := arg.(*parse.FieldNode)
	if !ok {
		return nil, fmt.Errorf("%s: money's arguments are references like .Params.amount_cents", n)
	}
	needsName, known := summaryRoots[f.Ident[0]]
	switch {
	case !known:
		return nil, fmt.Errorf("%s: unknown field .%s (allowed: %s)", n, f.Ident[0], rootNames(summaryRoots))
	case needsName && len(f.Ident) < 2:
		return nil, fmt.Errorf("%s: name the field, as in .%s.name", n, f.Ident[0])
	}
	return f.Ident, nil
}

// Summary renders the tool's summary of a call from its masked params (MaskCanonical) or its
// params for people (RevealCanonical), and the operation's key and tenant. ok is false when the tool has no summary or the
// params lack what it names; the console then shows the params themselves.
func (t *Tool) Summary(maskedParams []byte, key, tenant string) (string, bool) {
	if t.summary == nil {
		return "", false
	}
	data, ok := summaryData(maskedParams, key, tenant)
	if !ok {
		return "", false
	}
	var sb strings.Builder
	for _, p := range t.summary.parts {
		if p.field == nil {
			sb.WriteString(p.text)
			continue
		}
		if p.money {
			amount, cur, ok := moneyOf(&data, p)
			if !ok {
				return "", false
			}
			sb.WriteString(Money(amount, cur))
			continue
		}
		v, err := lookup(&data, p.field)
		if err != nil {
			return "", false
		}
		s, err := t.summaryText(p, v)
		if err != nil {
			return "", false
		}
		sb.WriteString(s)
	}
	return strings.TrimSpace(sb.String()), true
}

// summaryText is what a field of a summary shows: a sensitive param's safe form when it is
// revealed (written again: a form of a form is itself, and clear params given by mistake
// still show no more), "***" when it is named plainly, and any other value as it is.
func (t *Tool) summaryText(p summaryPart, v any) (string, error) {
	if p.field[0] == "Params" {
		loc := p.field[1:]
		if ptr, ok := t.sensitiveAt(loc); ok {
			if p.reveal {
				return RevealValue(t.Reveals(ptr), v), nil
			}
			return Masked, nil
		}
		if t.nearSensitive(loc) {
			return Masked, nil // holds a sensitive value
		}
	}
	return scalarString(v)
}

// sensitiveAt returns the sensitive pointer at loc (a field path under Params), if it is one.
func (t *Tool) sensitiveAt(loc []string) (string, bool) {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteString("/" + escapeToken(tok))
	}
	ptr := b.String()
	for _, p := range t.SensitiveParams {
		if q, err := sensitivePointer(p); err == nil && q == ptr {
			return ptr, true
		}
	}
	return "", false
}

// summaryData is what a summary reads: the masked params (numbers exact), key and tenant.
func summaryData(maskedParams []byte, key, tenant string) (TemplateData, bool) {
	data := TemplateData{Key: key, Tenant: tenant}
	dec := json.NewDecoder(bytes.NewReader(maskedParams))
	dec.UseNumber()
	return data, dec.Decode(&data.Params) == nil
}

// moneyOf reads a money part's amount and currency as written in data.
func moneyOf(data *TemplateData, p summaryPart) (amount, currency string, ok bool) {
	v, err1 := lookup(data, p.field)
	c, err2 := lookup(data, p.currency)
	if err1 != nil || err2 != nil {
		return "", "", false
	}
	amount, err1 = scalarString(v)
	currency, err2 = scalarString(c)
	return amount, currency, err1 == nil && err2 == nil
}

// minorDigits are the currencies (ISO 4217) whose minor unit is not a hundredth.
var minorDigits = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0, "RWF": 0,
	"UGX": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
}

// Money spells an amount in minor units of currency for people: "4200", "EUR" → "42.00 EUR",
// "250000", "EUR" → "2,500.00 EUR". What is not a whole number (a masked "***") is shown
// as it is.
func Money(minor, currency string) string {
	n, ok := new(big.Int).SetString(minor, 10)
	if !ok {
		return strings.TrimSpace(minor + " " + currency)
	}
	digits, ok := minorDigits[strings.ToUpper(currency)]
	if !ok {
		digits = 2
	}
	neg := n.Sign() < 0
	s := new(big.Int).Abs(n).String()
	for len(s) <= digits {
		s = "0" + s
	}
	whole, frac := s[:len(s)-digits], s[len(s)-digits:]
	var g strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			g.WriteByte(',')
		}
		g.WriteRune(r)
	}
	out := g.String()
	if digits > 0 {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return strings.TrimSpace(out + " " + currency)
}

// ReferenceURL renders reference_url for an operation: a link to the operation in the
// downstream's own console; "" when the tool gives none or it cannot be rendered. Params are
// the masked ones: a sensitive param may not be named (Load refuses it), so masking changes
// nothing that is used.
func (t *Tool) ReferenceURL(data TemplateData) string {
	if t.referenceTmpl == nil {
		return ""
	}
	u, err := t.referenceTmpl.render(func(field []string) (any, error) { return lookup(&data, field) })
	if err != nil {
		return ""
	}
	return u
}

// HasReferenceURL reports whether the tool links to its downstream's console.
func (t *Tool) HasReferenceURL() bool { return t.referenceTmpl != nil }

// validateConsole checks summary and reference_url.
func validateConsole(t *Tool, raw *rawTool, ec *collector) {
	if raw.Summary != "" {
		if st, err := parseSummary(raw.Summary); err != nil {
			ec.add("summary", err)
		} else {
			t.summary = st
		}
	}
	if raw.ReferenceURL != "" {
		if ut, err := parseURLTemplate(raw.ReferenceURL); err != nil {
			ec.add("reference_url", err)
		} else {
			t.referenceTmpl = ut
		}
	}
}

// Amount reads the amount at stake in a call from its masked params: the first money of the
// tool's summary, in minor units, with its currency. ok is false when the summary has no
// money, or the params lack a whole amount there (a masked one included).
func (t *Tool) Amount(maskedParams []byte) (minor *big.Int, currency string, ok bool) {
	if t.summary == nil {
		return nil, "", false
	}
	data, ok := summaryData(maskedParams, "", "")
	if !ok {
		return nil, "", false
	}
	for _, p := range t.summary.parts {
		if !p.money {
			continue
		}
		s, cur, ok := moneyOf(&data, p)
		if !ok {
			return nil, "", false
		}
		n, whole := new(big.Int).SetString(s, 10)
		if !whole {
			return nil, "", false
		}
		return n, strings.ToUpper(strings.TrimSpace(cur)), true
	}
	return nil, "", false
}

// Downstream names the system the tool calls, for people: the host of its URL ("" when the URL
// names none, as a path of a connection does), or the MCP server and its tool.
func (t *Tool) Downstream() string {
	if t.MCP != nil {
		return fmt.Sprintf("MCP server %s, tool %s", t.MCP.Server.Name, t.MCP.Upstream)
	}
	u, err := url.Parse(strings.SplitN(t.HTTP.URL, "{{", 2)[0])
	if err != nil {
		return ""
	}
	return u.Hostname()
}
