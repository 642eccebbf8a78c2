package jobs

import (
	"context"
	"net/http"

	"github.com/idemgate/idemgate/models"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the instrumentation scope of the jobs' spans.
const tracerName = "github.com/idemgate/idemgate/jobs"

// attrDownstreamStatus is the downstream's HTTP status on attempt and probe spans.
const attrDownstreamStatus = attribute.Key("http.response.status_code")

// tracerFrom returns tp's tracer; without tp, an SDK provider that exports nothing, because a
// no-op tracer's spans have no ids and the traceparent sent downstream must be real.
func tracerFrom(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = sdktrace.NewTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// injectTraceparent writes the W3C traceparent of ctx's span into h and returns its trace id.
func injectTraceparent(ctx context.Context, h http.Header) string {
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	return models.TraceIDFrom(ctx)
}

// endCall ends an attempt's or probe's span with the downstream's status and the state the
// operation was left in ("" when nothing was recorded).
func endCall(span trace.Span, status int, state models.State) {
	if status > 0 {
		span.SetAttributes(attrDownstreamStatus.Int(status))
	}
	if state != "" {
		span.SetAttributes(models.AttrState.String(string(state)))
	} else {
		span.SetStatus(codes.Error, "outcome not recorded")
	}
	span.End()
}
