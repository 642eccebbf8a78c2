package models

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Span attribute keys. Spans carry these and nothing else of an operation: never params,
// keys' values or secrets.
const (
	AttrOperationID = attribute.Key("idemgate.operation_id")
	AttrTool        = attribute.Key("idemgate.tool")
	AttrAttempt     = attribute.Key("idemgate.attempt")
	AttrState       = attribute.Key("idemgate.state")
)

type requestIDKey struct{}

// WithRequestID returns ctx carrying the id of the request (or attempt) that causes the
// ledger writes made with it; state-change log lines carry it.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the request id ctx carries, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// TraceIDFrom returns the trace id of the span ctx carries, or "" when it has none.
func TraceIDFrom(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

func (l *Ledger) spanTracer() trace.Tracer {
	if l.tracer == nil {
		return noop.NewTracerProvider().Tracer("")
	}
	return l.tracer
}

// startWrite starts the span of one ledger transaction. Its name is what the transaction
// does without the ids in what (span names must stay few); an operation id becomes its
// attribute.
func (l *Ledger) startWrite(ctx context.Context, what string) (context.Context, trace.Span) {
	var words []string
	var opID string
	for _, w := range strings.Fields(what) {
		if strings.Contains(w, "_") {
			if strings.HasPrefix(w, "op_") {
				opID = w
			}
			continue
		}
		words = append(words, w)
	}
	ctx, span := l.spanTracer().Start(ctx, "ledger "+strings.Join(words, " "), trace.WithSpanKind(trace.SpanKindInternal))
	if opID != "" {
		span.SetAttributes(AttrOperationID.String(opID))
	}
	return ctx, span
}

// endWrite ends a ledger span, noting the state the transaction left its operation in.
func endWrite(span trace.Span, transitions []Transition, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "ledger write failed")
		transitions = nil // rolled back
	}
	if len(transitions) == 1 { // batches (claims, reaps) name no single operation
		t := transitions[0]
		span.SetAttributes(AttrOperationID.String(t.OperationID), AttrTool.String(t.Tool), AttrState.String(string(t.To)))
	}
	span.End()
}
