// Package telemetry holds what operators watch: Prometheus metrics that follow the operation
// (not the model call), and the structured log line of every state change. Label values are
// bounded: tool names from the catalogue, states, classes and outcomes from fixed sets; never
// keys, tenants' free text or params.
package telemetry

import (
	"github.com/idemgate/idemgate/internal/buildinfo"
	"log/slog"
	"net/http"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the gateway's metric set, on a registry of its own (no global state).
type Metrics struct {
	Registry *prometheus.Registry

	operations   *prometheus.CounterVec
	requests     *prometheus.CounterVec
	attempts     *prometheus.CounterVec
	exhausted    *prometheus.CounterVec
	reconciles   *prometheus.CounterVec
	waits        *prometheus.CounterVec
	policy       *prometheus.CounterVec
	budgetUsage  *prometheus.GaugeVec
	downstream   *prometheus.HistogramVec
	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	knownTools   map[string]bool
	log          *slog.Logger
}

// New registers the metrics. tools are the catalogue's names: any other tool name is
// reported as "other", so a label can never grow without bound.
func New(tools []string, log *slog.Logger) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{Registry: reg, knownTools: map[string]bool{}, log: log}
	for _, t := range tools {
		m.knownTools[t] = true
	}
	f := promFactory{reg}
	m.operations = f.counter("idemgate_operations_total", "Transitions of operations into each state (creation included).", "tool", "state")
	m.requests = f.counter("idemgate_requests_total", "Answers to POST /v1/operations by outcome.", "outcome")
	m.attempts = f.counter("idemgate_attempts_total", "Downstream attempts by outcome class.", "tool", "class")
	m.exhausted = f.counter("idemgate_retries_exhausted_total", "Operations whose automatic retries ran out.", "tool")
	m.reconciles = f.counter("idemgate_reconciliations_total", "Reconcile probes by outcome.", "tool", "outcome")
	m.waits = f.counter("idemgate_waits_total", "Waits of requests for an operation's outcome, by what ended them: notified, polled, deadline or cancelled.", "ended_by")
	m.policy = f.counter("idemgate_policy_decisions_total", "Decisions of the tools file's policies on new calls, by the rule that decided (none: no rule matched) and the decision.", "rule", "decision")
	m.budgetUsage = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "idemgate_budget_usage_ratio",
		Help: "Each budget's highest scope value's usage over its limit (1 is the limit; past it, calls wait for a person)."}, []string{"budget"})
	reg.MustRegister(m.budgetUsage)
	m.downstream = f.histogram("idemgate_downstream_duration_seconds", "Latency of downstream attempts.", "tool", "class")
	m.httpRequests = f.counter("idemgate_http_requests_total", "HTTP requests served, by route and status code.", "method", "route", "code")
	m.httpDuration = f.histogram("idemgate_http_request_duration_seconds", "Time to answer HTTP requests, by route.", "method", "route")
	b := buildinfo.Read()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "idemgate_build_info",
		Help: "The running build: its release, VCS revision and Go version; always 1."}, []string{"version", "revision", "goversion"})
	reg.MustRegister(build)
	build.WithLabelValues(b.Version, b.Revision, b.GoVersion).Set(1)
	return m
}

// Handler serves the metrics at /metrics, and nothing else: it is served on a listener of its
// own (serve --metrics-addr), never on the public port, since the metrics say how busy each
// tool is and how the ledger fares.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	return mux
}

type promFactory struct{ reg *prometheus.Registry }

func (f promFactory) counter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f promFactory) histogram(name, help string, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help,
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, labels)
	f.reg.MustRegister(h)
	return h
}

func (m *Metrics) tool(name string) string {
	if m.knownTools[name] {
		return name
	}
	return "other"
}

// Transitioned counts a committed transition and logs it: one line per state change.
func (m *Metrics) Transitioned(t models.Transition) {
	m.operations.WithLabelValues(m.tool(t.Tool), string(t.To)).Inc()
	if t.To == models.StateFailedFinal && t.ErrorClass == models.ErrorRetriesExhausted {
		m.exhausted.WithLabelValues(m.tool(t.Tool)).Inc()
	}
	if m.log != nil {
		m.log.Info("state changed", "operation_id", t.OperationID, "tool", t.Tool, "from", string(t.From), "to", string(t.To),
			"attempt", t.Attempt, "actor", t.Actor, "error_class", t.ErrorClass, "request_id", t.RequestID, "trace_id", t.TraceID)
	}
}

// Request counts an answer to POST /v1/operations: created, replayed, in_progress, mismatch,
// expired, forbidden or invalid.
func (m *Metrics) Request(outcome string) { m.requests.WithLabelValues(outcome).Inc() }

// Attempt counts a downstream attempt and its latency.
func (m *Metrics) Attempt(tool, class string, latency time.Duration) {
	m.attempts.WithLabelValues(m.tool(tool), class).Inc()
	m.downstream.WithLabelValues(m.tool(tool), class).Observe(latency.Seconds())
}

// Probe counts a reconcile probe's outcome.
func (m *Metrics) Probe(tool, outcome string) {
	m.reconciles.WithLabelValues(m.tool(tool), outcome).Inc()
}

// Waited counts a request's wait for an operation's outcome by what ended it.
func (m *Metrics) Waited(endedBy string) { m.waits.WithLabelValues(endedBy).Inc() }

// PolicyDecided counts a policy decision. Rule names come from the tools file, so the label
// is bounded; a call no rule matched is "none".
func (m *Metrics) PolicyDecided(rule, decision string) {
	if rule == "" {
		rule = "none"
	}
	m.policy.WithLabelValues(rule, decision).Inc()
}

// BudgetUsage sets a budget's highest usage ratio. Budget names come from the tools file.
func (m *Metrics) BudgetUsage(budget string, ratio float64) {
	m.budgetUsage.WithLabelValues(budget).Set(ratio)
}

// HTTP records one served request. route is the matched route pattern, never the raw path.
func (m *Metrics) HTTP(method, route string, code int, d time.Duration) {
	m.httpRequests.WithLabelValues(method, route, itoa(code)).Inc()
	m.httpDuration.WithLabelValues(method, route).Observe(d.Seconds())
}

func itoa(code int) string {
	const digits = "0123456789"
	if code < 100 || code > 999 {
		return "other"
	}
	return string([]byte{digits[code/100], digits[code/10%10], digits[code%10]})
}
