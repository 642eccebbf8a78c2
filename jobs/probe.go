package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/downstream"
	"github.com/idemgate/idemgate/models"
)

// Probe outcomes, as recorded on the timeline.
const (
	ProbeFound      = "found"
	ProbeNotFound   = "not_found"
	ProbeNotSettled = "not_settled"
	ProbeError      = "error"
)

// ProbeInput is everything the reconcile decision depends on (docs/TOOLS.md): pure, like Decide.
type ProbeInput struct {
	Status int  // 0 when no answer came
	Failed bool // transport error or unreadable body
	// Missing: a 2xx whose reconcile.found pointer holds no value, which says "not found"
	// as a 404 does (list and search endpoints answer 200 when nothing matches).
	Missing      bool
	SinceUnknown time.Duration
	Settle       time.Duration
	AttemptsLeft bool
	Probes       int // probes made so far, this one included
	Now          time.Time
	Jitter       float64
}

// ProbeDecision is what a probe's answer means for the operation.
type ProbeDecision struct {
	Outcome     string
	To          models.State
	NextProbeAt time.Time // To UNKNOWN
	ErrorClass  string    // To FAILED_FINAL
}

// Reconcile probes back off from probeInitial to probeMax: a struggling downstream is asked
// less and less often, but never forgotten.
const (
	probeInitial = 500 * time.Millisecond
	probeMax     = time.Minute
)

// DecideProbe applies docs/TOOLS.md: 2xx (with a value at reconcile.found, when the tool
// names one) → found (SUCCEEDED); 404, or a 2xx without that value, once settle has passed → proven
// not executed (PENDING if attempts remain, else FAILED_FINAL); a 404 inside the settle window
// proves nothing yet; anything else → still UNKNOWN, asked again with backoff.
func DecideProbe(in ProbeInput) ProbeDecision {
	ok := in.Status >= 200 && in.Status < 300
	notFound := in.Status == 404 || ok && in.Missing
	switch {
	case !in.Failed && ok && !in.Missing:
		return ProbeDecision{Outcome: ProbeFound, To: models.StateSucceeded}
	case !in.Failed && notFound && in.SinceUnknown >= in.Settle:
		if in.AttemptsLeft {
			return ProbeDecision{Outcome: ProbeNotFound, To: models.StatePending}
		}
		return ProbeDecision{Outcome: ProbeNotFound, To: models.StateFailedFinal, ErrorClass: models.ErrorRetriesExhausted}
	case !in.Failed && notFound:
		// The downstream may not show the operation yet: ask again once settle has passed.
		return ProbeDecision{Outcome: ProbeNotSettled, To: models.StateUnknown, NextProbeAt: in.Now.Add(in.Settle - in.SinceUnknown)}
	}
	p := Backoff(probePolicy, in.Probes, in.Jitter)
	return ProbeDecision{Outcome: ProbeError, To: models.StateUnknown, NextProbeAt: in.Now.Add(p)}
}

// lookUp sends the tool's reconcile request about the operation: through the reconcile's
// connection, its answer scrubbed of the call's secrets and credentials. failed says no
// usable answer came.
func (e *Executor) lookUp(ctx context.Context, tool *catalog.Tool, op *models.Operation, cd callData, requestID string) (resp downstream.Response, failed bool, traceID string, err error) {
	if tool.MCP != nil {
		return e.lookUpMCP(ctx, tool, op, cd)
	}
	url, err := tool.RenderReconcileURL(cd.tmpl)
	if err != nil {
		return resp, true, "", err
	}
	h := downstreamHeaders(op, requestID)
	traceID = injectTraceparent(ctx, h)
	resp = e.connector.Do(ctx, downstream.Call{Method: tool.Reconcile.Method, URL: url, Header: h, Timeout: tool.HTTP.Timeout,
		Connection: tool.Reconcile.Connection, Tenant: op.Tenant})
	failed = resp.Err != nil || resp.BodyErr != nil || resp.Unbuildable != nil
	if resp.Unbuildable != nil {
		resp.Err = resp.Unbuildable
	}
	return scrubbed(cd.secrets, resp), failed, traceID, nil
}

// foundReference is the downstream's reference of what a look-up found: at the tool's
// result_reference in the result, or, when the tool's reconcile.found points at a single value
// (a search answering {"data":[{"id":…}]} with found /data/0/id), that value itself.
func foundReference(tool *catalog.Tool, result []byte) string {
	if ref := reference(result, tool.HTTP.ResultReference); ref != "" || tool.Reconcile == nil || tool.Reconcile.Found == "" {
		return ref
	}
	dec := json.NewDecoder(bytes.NewReader(result))
	dec.UseNumber()
	var v any
	if result == nil || dec.Decode(&v) != nil {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	}
	return ""
}

// foundIn reads a reconcile answer: whether it is a 2xx that found the effect (with a value
// at reconcile.found, when the tool names one), and the result it shows. missing says it is
// a 2xx without that value.
func foundIn(tool *catalog.Tool, resp downstream.Response) (result []byte, found, missing bool) {
	if resp.Status < 200 || resp.Status >= 300 {
		return nil, false, false
	}
	body := asJSON(resp.Body)
	if tool.Reconcile.Found == "" {
		return body, true, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if body == nil || dec.Decode(&v) != nil {
		return nil, false, true
	}
	at, ok := catalog.Resolve(v, tool.Reconcile.Found)
	if !ok || at == nil {
		return nil, false, true
	}
	out, err := json.Marshal(at)
	if err != nil {
		return nil, false, true
	}
	return out, true, false
}
