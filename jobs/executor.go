package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/downstream"
	"github.com/idemgate/idemgate/jobs/mcpclient"
	"github.com/idemgate/idemgate/models"
	"go.opentelemetry.io/otel/trace"
)

// DefaultLeaseMargin is added to a tool's timeout to form the lease of an attempt: long
// enough for the slowest legal answer and its recording, short enough that a crashed worker's
// operation reaches recovery quickly.
const DefaultLeaseMargin = 10 * time.Second

// Meter receives what the jobs measure. The telemetry package implements it; nil measures
// nothing.
type Meter interface {
	Attempt(tool, class string, latency time.Duration)
	Probe(tool, outcome string)
	// Waited counts a wait for an operation (a duplicate's, or the original's beyond its
	// attempt) by what ended it: WaitNotified, WaitPolled, WaitDeadline or WaitCancelled.
	Waited(endedBy string)
	// PolicyDecided counts a decision of the tools file's policies on a new call, by the rule
	// that decided ("" when none matched) and the decision.
	PolicyDecided(rule, decision string)
}

type noMeter struct{}

func (noMeter) PolicyDecided(string, string) {}

func (noMeter) Attempt(string, string, time.Duration) {}
func (noMeter) Probe(string, string)                  {}
func (noMeter) Waited(string)                         {}

// Executor runs claimed attempts: it sends the request, classifies the outcome, applies the
// retry policy and records the result, fenced by the claim's token.
type Executor struct {
	ledger    *models.Ledger
	catalog   *catalog.Catalog
	connector *downstream.Connector
	mcp       *mcpclient.Pool
	worker    string
	margin    time.Duration
	meter     Meter
	now       func() time.Time
	log       *slog.Logger
	tracer    trace.Tracer
	reads     *sharedReads

	// base outlives requests: an attempt started for a request that gives up waiting still
	// finishes and is recorded. It is cancelled only when shutdown's grace period ends.
	base     context.Context
	stopBase context.CancelFunc
	running  sync.WaitGroup
}

// ExecutorConfig wires an executor.
type ExecutorConfig struct {
	Ledger  *models.Ledger
	Catalog *catalog.Catalog
	// Connector sends the requests (nil: one that reads tenant secrets from Ledger).
	Connector *downstream.Connector
	// MCP calls the tools of the catalogue's MCP servers (nil: the catalogue has none).
	MCP    *mcpclient.Pool
	Worker string // this process's name on timelines and leases
	// LeaseMargin is added to a tool's timeout to form a lease (DefaultLeaseMargin if zero).
	LeaseMargin time.Duration
	Meter       Meter
	Now         func() time.Time
	Log         *slog.Logger
	// TracerProvider makes the spans of attempts and probes (nil: spans with real ids that
	// nobody exports, so the traceparent sent downstream is still valid).
	TracerProvider trace.TracerProvider
}

// NewExecutor returns an executor ready to run attempts.
func NewExecutor(cfg ExecutorConfig) *Executor {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Connector == nil {
		cfg.Connector = downstream.New(downstream.Config{TenantSecrets: cfg.Ledger})
	}
	if cfg.Meter == nil {
		cfg.Meter = noMeter{}
	}
	if cfg.LeaseMargin <= 0 {
		cfg.LeaseMargin = DefaultLeaseMargin
	}
	base, stop := context.WithCancel(context.Background())
	return &Executor{ledger: cfg.Ledger, catalog: cfg.Catalog, connector: cfg.Connector, mcp: cfg.MCP, worker: cfg.Worker,
		margin: cfg.LeaseMargin, meter: cfg.Meter, now: cfg.Now, log: cfg.Log, tracer: tracerFrom(cfg.TracerProvider),
		reads: newSharedReads(cfg.Ledger.Get),
		base:  base, stopBase: stop}
}

// Worker is this executor's name in leases and timelines.
func (e *Executor) Worker() string { return e.worker }

// LeaseFor is the lease a claim of tool takes.
func (e *Executor) LeaseFor(tool string) time.Duration {
	if t, ok := e.catalog.Get(tool); ok {
		return t.HTTP.Timeout + e.margin
	}
	return e.margin
}

// Start runs the claimed attempt in the background and returns a channel that yields the
// operation as recorded afterwards (or nil when the lease was lost).
func (e *Executor) Start(c models.Claimed) <-chan *models.Operation {
	return e.start(trace.SpanContext{}, c)
}

// start is Start with the span context of the request the attempt runs for, if any: the
// attempt's span becomes its child, though the attempt runs on the executor's own context.
func (e *Executor) start(parent trace.SpanContext, c models.Claimed) <-chan *models.Operation {
	done := make(chan *models.Operation, 1)
	ctx := e.base
	if parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, parent)
	}
	e.running.Add(1)
	go func() {
		defer e.running.Done()
		done <- e.run(ctx, c)
	}()
	return done
}

// Shutdown waits for running attempts until ctx ends, then abandons them: their leases expire
// and the lease reaper hands them to reconciliation, since their requests may have left.
func (e *Executor) Shutdown(ctx context.Context) {
	idle := make(chan struct{})
	go func() { e.running.Wait(); close(idle) }()
	select {
	case <-idle:
	case <-ctx.Done():
		e.stopBase()
		<-idle
	}
	e.stopBase()
}

func (e *Executor) run(ctx context.Context, c models.Claimed) (recorded *models.Operation) {
	op := c.Op
	// The attempt's id is the X-Request-Id sent downstream: the ledger writes it causes are
	// logged under it, with the trace id of its span.
	ctx, span := e.tracer.Start(models.WithRequestID(ctx, c.Attempt.ID), "attempt", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(models.AttrOperationID.String(op.ID), models.AttrTool.String(op.Tool), models.AttrAttempt.Int(c.Attempt.Number)))
	var out models.AttemptOutcome
	defer func() {
		var state models.State
		if recorded != nil {
			state = recorded.State
		}
		endCall(span, out.DownstreamStatus, state)
	}()
	tool, ok := e.catalog.Get(op.Tool)
	if !ok {
		out = models.AttemptOutcome{Class: string(Rejected), To: models.StateFailedFinal, ErrorClass: models.ErrorRejected,
			ErrorMessage: fmt.Sprintf("tool %q is no longer in the catalogue; nothing was sent", op.Tool)}
	} else if refused, err := e.recheckApproved(ctx, tool, c); err != nil || refused != nil {
		if err != nil {
			// The check could not be made: nothing is sent, and the attempt is not_sent, tried
			// again (and checked again) as the retry policy says.
			d := Decide(e.policyInput(ctx, tool, c, NotSent))
			refused = &models.AttemptOutcome{Class: string(NotSent), To: d.To, ErrorClass: d.ErrorClass, NextAttemptAt: d.NextAttemptAt,
				ErrorMessage: "the approval could not be checked against the policy and the key: " + err.Error()}
		}
		out = *refused
	} else {
		hbCtx, stopHeartbeat := context.WithCancel(ctx)
		hbDone := make(chan struct{})
		go func() { e.heartbeat(hbCtx, c); close(hbDone) }()
		out = e.attempt(ctx, tool, c)
		stopHeartbeat()
		<-hbDone // recording rewrites c.Op, which the heartbeat reads
	}
	if err := e.record(ctx, c, out); err != nil {
		if models.ErrorCode(err) == models.CodeStale {
			e.log.Warn("attempt outcome dropped: lease lost", "operation_id", op.ID, "attempt", c.Attempt.Number, "class", out.Class)
		} else {
			e.log.Error("attempt outcome not recorded; the lease reaper will hand the operation to reconciliation",
				"operation_id", op.ID, "attempt", c.Attempt.Number, "class", out.Class, "err", err)
		}
		return nil
	}
	return op
}

// record writes the attempt's outcome. It must not be cut short by the request that started
// the attempt, and it outlasts a short ledger outage: it keeps trying while the lease holds,
// because an outcome we saw is better than the reaper's UNKNOWN.
func (e *Executor) record(ctx context.Context, c models.Claimed, out models.AttemptOutcome) error {
	ctx = context.WithoutCancel(ctx)
	deadline := e.now().Add(e.LeaseFor(c.Op.Tool))
	if c.Op.LeaseExpiresAt != nil {
		deadline = *c.Op.LeaseExpiresAt
	}
	wait := 100 * time.Millisecond
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := e.ledger.FinishAttempt(rctx, c, e.worker, out)
		cancel()
		if models.ErrorCode(err) != models.CodeUnavailable || e.now().Add(wait).After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(wait*2, 2*time.Second)
	}
}

// heartbeat extends the attempt's lease while it runs, so a slow but live attempt is never
// taken for a crashed one.
func (e *Executor) heartbeat(ctx context.Context, c models.Claimed) {
	lease := e.LeaseFor(c.Op.Tool)
	ticker := time.NewTicker(lease / 3)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		err := e.ledger.ExtendLease(ctx, c, e.now().Add(lease))
		if models.ErrorCode(err) == models.CodeStale {
			e.log.Warn("lease lost during attempt", "operation_id", c.Op.ID, "attempt", c.Attempt.Number)
			return
		}
	}
}

// attempt sends one request and decides what follows.
func (e *Executor) attempt(ctx context.Context, tool *catalog.Tool, c models.Claimed) models.AttemptOutcome {
	op := c.Op
	cd, err := e.callData(tool, op)
	if err != nil {
		return cannotBuild(err)
	}
	if tool.MCP != nil {
		return e.attemptMCP(ctx, tool, c, cd)
	}
	if tool.ChecksBeforeSending() {
		if out, done := e.lookFirst(ctx, tool, c, cd); done {
			return out
		}
	}
	call, traceID, err := e.buildCall(ctx, tool, c, cd)
	if err != nil {
		return cannotBuild(cd.secrets.Error(err))
	}
	resp := e.connector.Do(ctx, call)
	if resp.Unbuildable != nil {
		return cannotBuild(cd.secrets.With(resp.Credentials...).Error(resp.Unbuildable))
	}
	class := Classify(resp.Status, resp.Wrote, resp.Err, resp.BodyErr)
	// From here on the answer is scrubbed: nothing recorded, logged or traced shows an echo
	// of a sensitive param or of a credential.
	resp = scrubbed(cd.secrets, resp)
	e.meter.Attempt(tool.Name, string(class), resp.Latency)
	in := e.policyInput(ctx, tool, c, class)
	in.RetryAfter = resp.RetryAfter
	d := Decide(in)
	out := models.AttemptOutcome{Class: string(class), DownstreamStatus: resp.Status, Latency: resp.Latency, TraceID: traceID,
		AbortedAt: resp.AbortedAt, To: d.To, ErrorClass: d.ErrorClass, NextAttemptAt: d.NextAttemptAt, ErrorMessage: describe(class, resp)}
	if resp.Err != nil {
		out.Error = resp.Err.Error()
	} else if resp.BodyErr != nil {
		out.Error = "reading the answer: " + resp.BodyErr.Error()
	}
	if d.To == models.StateSucceeded {
		out.Result = asJSON(resp.Body)
		out.DownstreamRef = reference(out.Result, tool.HTTP.ResultReference)
		out.ErrorMessage = ""
	}
	return out
}

// cannotBuild is the outcome of an attempt whose request could not be made: nothing was sent,
// and trying again would fail the same way.
func cannotBuild(err error) models.AttemptOutcome {
	return models.AttemptOutcome{Class: string(Rejected), To: models.StateFailedFinal, ErrorClass: models.ErrorRejected,
		ErrorMessage: "cannot build the downstream request: " + err.Error()}
}

// callData is what every request about one operation is built from.
type callData struct {
	raw     []byte           // the params in clear, as the downstream receives them
	secrets *catalog.Secrets // their sensitive values, scrubbed from every answer
	tmpl    catalog.TemplateData
}

func (e *Executor) callData(tool *catalog.Tool, op *models.Operation) (callData, error) {
	raw, err := e.ledger.Params(op)
	if err != nil {
		return callData{}, err
	}
	params, err := decodeObject(raw)
	if err != nil {
		return callData{}, err
	}
	return callData{raw: raw, secrets: tool.Secrets(params), tmpl: catalog.TemplateData{
		OperationID: op.ID, DownstreamKey: op.DownstreamKeySent(), Key: op.Key, Tenant: op.Tenant, Params: params}}, nil
}

// withQuery adds to the URL the params http.query lists, as their style spells them and only
// when given (any method: an optional query parameter of a write stays optional); and to a GET's
// URL the other params the URL does not carry, spelled as a form (limit=3&starting_after=cus_1,
// metadata[order]=1042): a GET has no body, and a list endpoint's optional filters are params a
// call may or may not give (docs/TOOLS.md).
func withQuery(tool *catalog.Tool, url string, params map[string]any) string {
	if len(params) == 0 {
		return url
	}
	var parts []string
	if q := downstream.EncodeQuery(params, tool.HTTP.Query); q != "" {
		parts = append(parts, q)
	}
	if tool.HTTP.Method == http.MethodGet {
		rest := maps.Clone(params)
		for _, name := range urlParams(tool) {
			delete(rest, name)
		}
		if q := downstream.EncodeForm(rest); q != "" {
			parts = append(parts, q)
		}
	}
	if len(parts) == 0 {
		return url
	}
	if strings.Contains(url, "?") {
		return url + "&" + strings.Join(parts, "&")
	}
	return url + "?" + strings.Join(parts, "&")
}

// urlParams are the params the URL carries, in its path or in http.query: they are not sent
// in the body too.
func urlParams(tool *catalog.Tool) []string {
	return append(tool.PathParams(), tool.QueryParams()...)
}

// downstreamHeaders are the headers every request about op carries (docs/TOOLS.md), but the
// traceparent.
func downstreamHeaders(op *models.Operation, requestID string) http.Header {
	h := http.Header{}
	h.Set("X-Idemgate-Operation", op.ID)
	h.Set("X-Idemgate-Downstream-Key", op.DownstreamKeySent())
	h.Set("X-Request-Id", requestID)
	return h
}

func (e *Executor) buildCall(ctx context.Context, tool *catalog.Tool, c models.Claimed, cd callData) (downstream.Call, string, error) {
	op := c.Op
	url, err := tool.RenderURL(cd.tmpl)
	if err != nil {
		return downstream.Call{}, "", err
	}
	url = withQuery(tool, url, cd.tmpl.Params)
	h, err := tool.RenderHeaders(cd.tmpl)
	if err != nil {
		return downstream.Call{}, "", err
	}
	for k, v := range downstreamHeaders(op, c.Attempt.ID) {
		h[k] = v
	}
	traceID := injectTraceparent(ctx, h)
	if tool.HTTP.IdempotencyHeader != "" {
		// The same on every attempt of one operation, and on the operation made anew after
		// the ledger lost its record (docs/STATES.md).
		h.Set(tool.HTTP.IdempotencyHeader, op.DownstreamKeySent())
	}
	// The same downstream key goes into the body, where the tool says the downstream reads it.
	call := downstream.Call{Method: tool.HTTP.Method, URL: url, Header: h, Timeout: tool.HTTP.Timeout,
		Body: cd.raw, Encoding: tool.HTTP.Encoding(), KeyAt: tool.KeyParams(), Omit: urlParams(tool), Key: op.DownstreamKeySent(),
		Connection: tool.HTTP.Connection, Tenant: op.Tenant}
	return call, traceID, nil
}

// scrubbed returns r with every sensitive value of the call, and every credential the request
// carried, masked in its body and errors: the one place a downstream's answer is scrubbed
// before anything is recorded, logged or traced. Classify the outcome first: the scrubbed
// errors keep only their text.
func scrubbed(s *catalog.Secrets, r downstream.Response) downstream.Response {
	s = s.With(r.Credentials...)
	r.Body, r.Err, r.BodyErr = s.Body(r.Body), s.Error(r.Err), s.Error(r.BodyErr)
	r.Credentials = nil
	return r
}

// decodeObject decodes params for templates, keeping numbers exact.
func decodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode params: %w", err)
	}
	m, _ := v.(map[string]any)
	return m, nil
}

// asJSON returns body when it is JSON, else body as a JSON string; nil for an empty body.
func asJSON(body []byte) []byte {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil
	}
	if json.Valid(trimmed) {
		var buf bytes.Buffer
		if json.Compact(&buf, trimmed) == nil {
			return buf.Bytes()
		}
	}
	s, _ := json.Marshal(string(body))
	return s
}

// reference reads the downstream's id out of a result by JSON pointer.
func reference(result []byte, pointer string) string {
	if pointer == "" || result == nil {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(result))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return ""
	}
	found, ok := catalog.Resolve(v, pointer)
	if !ok {
		return ""
	}
	switch x := found.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	}
	return ""
}

// describe writes the message recorded with a failed or retried attempt.
func describe(class Class, r downstream.Response) string {
	switch {
	case r.Err != nil && class == NotSent:
		return "the request was not sent: " + r.Err.Error()
	case r.Err != nil:
		return "the request was sent but no answer came back: " + r.Err.Error()
	case r.BodyErr != nil:
		return fmt.Sprintf("the downstream answered %d but its body could not be read", r.Status)
	case class == Succeeded:
		return ""
	}
	excerpt := strings.TrimSpace(string(r.Body))
	if len(excerpt) > 500 {
		excerpt = excerpt[:500] + "…"
	}
	answered := fmt.Sprintf("the downstream answered %d", r.Status)
	if r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden {
		answered = fmt.Sprintf("the downstream refused the gateway's credentials (%d)", r.Status)
	}
	if excerpt == "" {
		return answered
	}
	return answered + ": " + excerpt
}
