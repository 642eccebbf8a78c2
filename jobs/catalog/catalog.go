// Package catalog holds the tool catalogue: the tools operators declare in the tools file
// (docs/TOOLS.md), validated once at start-up, and the built-in demo catalogue.
//
// A Catalog is immutable after Load; every lookup is safe for concurrent use.
package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog/rules"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Effect says what repeating a tool's call does to the world. It decides, with the downstream's
// key support, whether an ambiguous attempt may be retried (docs/STATES.md).
type Effect string

// The effects a tool may declare.
const (
	EffectRead       Effect = "read"
	EffectIdempotent Effect = "idempotent"
	EffectWrite      Effect = "write"
)

// Tool is one validated entry of the tools file.
type Tool struct {
	Name            string
	Description     string
	Effect          Effect
	ParamsSchemaRaw map[string]any // the schema as written, served by GET /v1/tools
	Schema          *jsonschema.Schema
	SensitiveParams []string // normalised to JSON pointers ("/card_number")
	// reveal is the safe form for people of each sensitive pointer that declares one (Reveals).
	reveal map[string]string
	// HTTP says how the tool's request is sent; for a tool of an MCP server only its Timeout
	// (the server's per-call timeout) applies, and MCP says how it is called.
	HTTP         HTTPSpec
	MCP          *MCPCall       // nil: an HTTP tool
	Reconcile    *ReconcileSpec // nil: the tool cannot be reconciled
	Retry        RetryPolicy
	Review       ReviewPolicy
	Compensation *CompensationSpec // nil: the tool cannot be compensated
	Retention    time.Duration

	// Parsed once by Load. A Tool built by hand leaves them nil and its templates are parsed on
	// each call instead.
	urlTmpl       *urlTemplate
	reconcileTmpl *urlTemplate
	compTmpl      *paramsTemplate
	summary       *summaryTemplate // nil: no summary (the console shows the params)
	referenceTmpl *urlTemplate     // nil: no link into the downstream's console
	// memo remembers params that passed (see CheckCanonical); nil in a Tool built by hand.
	memo *paramsMemo
	// nulls says where a null in params means absent (DropAbsentNulls); strict is the params
	// schema for OpenAI's strict mode, nil when it cannot be written (StrictParameters). Both
	// are set by Load; a Tool built by hand keeps every null and is offered non-strict.
	nulls  *nullShape
	strict map[string]any
}

// HTTPSpec says how to call the downstream for one attempt.
type HTTPSpec struct {
	Method            string
	URL               string // a text/template over TemplateData; absolute (base_url joined)
	Timeout           time.Duration
	IdempotencyHeader string // "" when the downstream does not honour keys
	ResultReference   string // JSON pointer into the 2xx body, "" for none
	// Connection is the connection the tool's requests go through (docs/TOOLS.md), nil for none.
	Connection *Connection
	// Body is how the params are sent: BodyJSON, BodyForm, BodyNone, or "" for the default
	// (see Encoding).
	Body string
	// Headers are templated headers (over TemplateData, like URLs), sorted by name.
	Headers []HeaderTemplate
	// IdempotencyParam is a JSON pointer into the body where the downstream key is written for
	// a downstream that deduplicates by it; ReferenceParam one where it is written only so a
	// reconcile can search for it. "" for none.
	IdempotencyParam string
	ReferenceParam   string
	// Query are the params sent in the URL's query, each when given (http.query).
	Query []QueryParam
}

// HeaderTemplate is one templated header of a tool's request.
type HeaderTemplate struct {
	Name string
	tmpl *compiledTemplate
}

// Body encodings (docs/TOOLS.md).
const (
	BodyJSON = "json"
	BodyForm = "form"
	BodyNone = "none"
)

// ReconcileSpec says how to ask the downstream whether an operation took effect.
type ReconcileSpec struct {
	Method string
	URL    string // a text/template over TemplateData
	Settle time.Duration
	// Connection is the connection the look-up goes through: the tool's unless it names
	// another.
	Connection *Connection
	// Found is a JSON pointer that must hold a value in a 2xx answer for it to count as
	// found; that value is then the result. "" for any 2xx. For an MCP tool it points into
	// the reconcile tool's structured result.
	Found string
	// MCP, for a tool of an MCP server, is the upstream tool that answers instead of Method
	// and URL.
	MCP *MCPReconcile
}

// RetryPolicy bounds automatic retries. MaxAttempts counts the first attempt.
type RetryPolicy struct {
	// MaxAttempts bounds the attempts whose request was sent (or may have been), counting
	// the first; attempts that sent nothing (not_sent) count against UnsentFor instead.
	MaxAttempts    int
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// UnsentFor is how long after the operation was recorded attempts that sent nothing
	// (the downstream unreachable) are still retried: an outage shorter than this ends no
	// operation FAILED_FINAL before anything was sent.
	UnsentFor time.Duration
}

// ReviewPolicy says when humans must act.
type ReviewPolicy struct {
	RequireApproval bool
	Approvals       int
	ApprovalTTL     time.Duration
	EscalateAfter   time.Duration
	// LookalikeOn are the params (JSON pointers) whose equality makes two operations of the
	// tool look alike (docs/CONSOLE.md); nil: every param, the fingerprint.
	LookalikeOn []string
	// LookalikeWindow is how far before and after an operation its look-alikes are looked for.
	LookalikeWindow time.Duration
}

// DefaultLookalikeWindow is review.lookalike_window's default.
const DefaultLookalikeWindow = 24 * time.Hour

// CompensationSpec describes the operation that undoes a success.
type CompensationSpec struct {
	Tool   string
	Params map[string]any // string leaves are text/templates over TemplateData
}

// RetrySafe reports whether an ambiguous attempt of this tool may be repeated: the effect is
// harmless to repeat, or the downstream deduplicates on the key idemgate sends.
func (t *Tool) RetrySafe() bool {
	return t.Effect == EffectRead || t.Effect == EffectIdempotent || t.HonoursKey()
}

// HonoursKey reports whether the downstream deduplicates by the downstream key idemgate sends,
// in a header or a body field (docs/STATES.md).
func (t *Tool) HonoursKey() bool {
	if t.MCP != nil {
		return t.MCP.HonoursKey
	}
	return t.HTTP.IdempotencyHeader != "" || t.HTTP.IdempotencyParam != ""
}

// KeyParams are the body pointers where the downstream key is written (for a tool of an MCP
// server, its idempotency_argument): an agent's params may not set them.
func (t *Tool) KeyParams() []string {
	if t.MCP != nil {
		if t.MCP.IdempotencyArgument == "" {
			return nil
		}
		return []string{"/" + t.MCP.IdempotencyArgument} // argumentRE admits no "/" or "~"
	}
	var out []string
	for _, p := range []string{t.HTTP.IdempotencyParam, t.HTTP.ReferenceParam} {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// TenantSecrets names the {tenant: …} secrets a call of the tool needs, with the connection
// that needs each (its own and its reconcile's).
func (t *Tool) TenantSecrets() []ConnectionSecret {
	var out []ConnectionSecret
	conns := []*Connection{t.HTTP.Connection}
	if t.Reconcile != nil && t.Reconcile.Connection != t.HTTP.Connection {
		conns = append(conns, t.Reconcile.Connection)
	}
	for _, c := range conns {
		if c == nil {
			continue
		}
		for _, name := range c.TenantSecrets() {
			out = append(out, ConnectionSecret{Connection: c.Name, Secret: name})
		}
	}
	return out
}

// ConnectionSecret is a tenant secret a connection needs.
type ConnectionSecret struct {
	Connection string
	Secret     string
}

// TemplateData is what URL and compensation templates may refer to.
type TemplateData struct {
	OperationID string
	// DownstreamKey is the key the operation sends downstream (docs/STATES.md): a reconcile URL that
	// looks it up finds the effect even after the ledger lost the operation's record.
	DownstreamKey string
	Key           string
	Tenant        string
	Params        map[string]any
	Result        map[string]any
}

// Catalog is the validated set of tools, in file order. It is immutable after Load, so it is safe
// for concurrent use; callers must not modify the Tools it hands out.
type Catalog struct {
	tools       []*Tool
	connections []*Connection
	servers     []*MCPServer
	byWire      map[string]*Tool // keyed by the "__" spelling, which is unique per tool
	rules       *rules.Set       // the file's policies and budgets (docs/POLICY.md)
}

// Rules returns the file's policies and budgets, compiled; empty when it declares none.
func (c *Catalog) Rules() *rules.Set {
	if c == nil {
		return nil
	}
	return c.rules
}

// FunctionName is the tool's name as every model provider takes it (^[a-zA-Z0-9_-]{1,64}$):
// each "." written "__", and a name still longer than 64 characters shortened to its first 55,
// "_" and 8 hex digits of the SHA-256 of the whole (docs/MCP.md). OpenAI's and Anthropic's
// formats and idemgate's own /mcp list tools under it.
func (t *Tool) FunctionName() string {
	return wireName(t.Name)
}

func wireName(name string) string {
	w := strings.ReplaceAll(name, ".", "__")
	if len(w) <= MaxFunctionNameLen {
		return w
	}
	sum := sha256.Sum256([]byte(w))
	return w[:55] + "_" + hex.EncodeToString(sum[:4])
}

// Get returns the tool named name, which may be spelled with dots ("tickets.create") or with
// each dot written "__" ("tickets__create"). The returned Tool's Name is always the dotted name.
func (c *Catalog) Get(name string) (*Tool, bool) {
	if c == nil {
		return nil, false
	}
	t, ok := c.byWire[wireName(name)]
	return t, ok
}

// Tools returns the tools in file order. The slice is a copy; the Tools are shared.
func (c *Catalog) Tools() []*Tool {
	if c == nil {
		return nil
	}
	out := make([]*Tool, len(c.tools))
	copy(out, c.tools)
	return out
}

// Names returns the dotted tool names in file order.
func (c *Catalog) Names() []string {
	if c == nil {
		return nil
	}
	out := make([]string, len(c.tools))
	for i, t := range c.tools {
		out[i] = t.Name
	}
	return out
}
