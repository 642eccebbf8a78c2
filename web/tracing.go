package web

import (
	"github.com/idemgate/idemgate/models"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceRequests puts the request id on the request's context, for the ledger's state-change
// log lines, and wraps each request in a server span named for its route pattern (never the
// raw path), continuing the caller's trace when it sent a traceparent. Spans carry no
// headers, query or body: an Idempotency-Key or API key never reaches them.
func traceRequests(tracer trace.Tracer) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			ctx := propagation.TraceContext{}.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
			ctx = models.WithRequestID(ctx, c.Response().Header().Get(echo.HeaderXRequestID))
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			ctx, span := tracer.Start(ctx, req.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", req.Method), attribute.String("http.route", route)))
			defer span.End()
			c.SetRequest(req.WithContext(ctx))
			answer(c, next(c))
			status := c.Response().Status
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			if status >= 500 {
				span.SetStatus(codes.Error, "")
			}
			return nil
		}
	}
}
