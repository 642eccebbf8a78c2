package jobs

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/downstream"
	"github.com/idemgate/idemgate/models"
	"go.opentelemetry.io/otel/trace"
)

// RecoveryConfig sets the sweeps' cadence. Zero values take the defaults.
type RecoveryConfig struct {
	ReapEvery      time.Duration // default 1s
	ReconcileEvery time.Duration // default 250ms
	EscalateEvery  time.Duration // default 1s
	RetainEvery    time.Duration // default 1m
	Batch          int           // rows a sweep takes at once; default 100
	// WebhookRetention is how long a webhook delivery is kept once it was delivered or went
	// dead (DefaultWebhookRetention if zero; negative keeps them forever).
	WebhookRetention time.Duration
	// ApprovalWarning is how long before an approval lapses review.expiring goes out
	// (DefaultApprovalWarning if zero; negative sends none).
	ApprovalWarning time.Duration
}

// DefaultApprovalWarning warns an hour before an approval lapses: time for a reviewer to act.
const DefaultApprovalWarning = time.Hour

// DefaultWebhookRetention keeps ended webhook deliveries a week: long enough to look into a
// receiver's complaint, short enough that the outbox stays small.
const DefaultWebhookRetention = 7 * 24 * time.Hour

func (c *RecoveryConfig) defaults() {
	c.ReapEvery = orDuration(c.ReapEvery, time.Second)
	c.ReconcileEvery = orDuration(c.ReconcileEvery, 250*time.Millisecond)
	c.EscalateEvery = orDuration(c.EscalateEvery, time.Second)
	c.RetainEvery = orDuration(c.RetainEvery, time.Minute)
	if c.WebhookRetention == 0 {
		c.WebhookRetention = DefaultWebhookRetention
	}
	if c.ApprovalWarning == 0 {
		c.ApprovalWarning = DefaultApprovalWarning
	}
	if c.Batch <= 0 {
		c.Batch = 100
	}
}

func orDuration(v, def time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return v
}

// Recovery runs the background sweeps of docs/STATES.md besides the dispatcher: lease reaper,
// reconciler, escalator and retention. Each is safe with any number of replicas: rows are
// claimed with SKIP LOCKED or changed by compare-and-set, so two sweeps never decide the same
// operation twice.
type Recovery struct {
	exec *Executor
	cfg  RecoveryConfig
}

// NewRecovery returns the sweeps, sharing the executor's ledger, catalogue and connector.
func NewRecovery(exec *Executor, cfg RecoveryConfig) *Recovery {
	cfg.defaults()
	return &Recovery{exec: exec, cfg: cfg}
}

// Run runs every sweep until ctx ends.
func (r *Recovery) Run(ctx context.Context) {
	done := make(chan struct{}, 4)
	for _, s := range []struct {
		name  string
		every time.Duration
		once  func(context.Context) (int, error)
	}{
		{"lease reaper", r.cfg.ReapEvery, r.ReapOnce},
		{"reconciler", r.cfg.ReconcileEvery, r.ReconcileOnce},
		{"escalator", r.cfg.EscalateEvery, r.EscalateOnce},
		{"retention", r.cfg.RetainEvery, r.RetainOnce},
	} {
		go func() {
			defer func() { done <- struct{}{} }()
			r.loop(ctx, s.name, s.every, s.once)
		}()
	}
	for range 4 {
		<-done
	}
}

func (r *Recovery) loop(ctx context.Context, name string, every time.Duration, once func(context.Context) (int, error)) {
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	failing := false
	for {
		n, err := once(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			r.exec.log.Error(name+" failed; will keep trying", "err", err)
			failing = true
		case err == nil && failing:
			r.exec.log.Info(name + " recovered")
			failing = false
		}
		if err == nil && n >= r.cfg.Batch {
			continue // a full batch: more are waiting
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// ReapOnce moves RUNNING operations whose lease expired to UNKNOWN.
func (r *Recovery) ReapOnce(ctx context.Context) (int, error) {
	n, err := r.exec.ledger.ReapExpiredLeases(ctx, r.exec.worker, r.cfg.Batch)
	if n > 0 {
		r.exec.log.Warn("leases expired: operations moved to UNKNOWN", "count", n)
	}
	return n, err
}

// probeConcurrency bounds the reconcile probes in flight per process.
const probeConcurrency = 16

// ReconcileOnce probes due UNKNOWN operations of reconcilable tools.
func (r *Recovery) ReconcileOnce(ctx context.Context) (int, error) {
	var tools []string
	for _, t := range r.exec.catalog.Tools() {
		if t.Reconcile != nil {
			tools = append(tools, t.Name)
		}
	}
	// The probe's claim lasts past its timeout; a probe that overruns it can record nothing.
	ops, err := r.exec.ledger.ClaimProbes(ctx, r.exec.worker, tools, r.cfg.Batch, r.probeLease())
	if err != nil {
		return 0, err
	}
	// Probes run side by side: one slow downstream must not hold the others past their
	// claims.
	sem := make(chan struct{}, probeConcurrency)
	var wg sync.WaitGroup
	for _, op := range ops {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			r.probe(ctx, op)
		}()
	}
	wg.Wait()
	return len(ops), nil
}

func (r *Recovery) probeLease() time.Duration {
	longest := time.Duration(0)
	for _, t := range r.exec.catalog.Tools() {
		longest = max(longest, t.HTTP.Timeout)
	}
	return longest + r.exec.margin
}

// probe asks the downstream whether op took effect and records what that proves.
func (r *Recovery) probe(ctx context.Context, op *models.Operation) {
	tool, _ := r.exec.catalog.Get(op.Tool)
	ctx, span := r.exec.tracer.Start(models.WithRequestID(ctx, probeRequestID(op)), "reconcile probe", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(models.AttrOperationID.String(op.ID), models.AttrTool.String(op.Tool), models.AttrAttempt.Int(op.Attempts)))
	out := r.ask(ctx, tool, op)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := r.exec.ledger.RecordProbe(rctx, op, r.exec.worker, out); err != nil {
		r.exec.log.Warn("reconcile outcome not recorded", "operation_id", op.ID, "err", err)
		endCall(span, out.Status, "")
		return
	}
	endCall(span, out.Status, op.State)
}

// probeRequestID is the X-Request-Id of op's next probe.
func probeRequestID(op *models.Operation) string {
	return fmt.Sprintf("%s-probe-%d", op.ID, op.Probes)
}

func (r *Recovery) ask(ctx context.Context, tool *catalog.Tool, op *models.Operation) models.ProbeOutcome {
	cd, err := r.exec.callData(tool, op)
	// The settle window is measured when the downstream is asked, not when its answer
	// arrives: a "not found" describes the downstream as it was when the question left, and a
	// question asked inside the window proves nothing however late its answer comes.
	asked := r.exec.now()
	var resp downstream.Response
	failed := false
	if err == nil {
		resp, failed, _, err = r.exec.lookUp(ctx, tool, op, cd, probeRequestID(op))
	}
	if err != nil {
		return models.ProbeOutcome{Outcome: ProbeError, Error: "cannot build the look-up: " + cd.secrets.Text(err.Error()),
			To: models.StateUnknown, NextProbeAt: r.exec.now().Add(probeMax)}
	}
	result, _, missing := foundIn(tool, resp)

	now := r.exec.now()
	since := time.Duration(0)
	if op.UnknownSince != nil {
		since = asked.Sub(*op.UnknownSince)
	}
	d := DecideProbe(ProbeInput{Status: resp.Status, Failed: failed, Missing: missing, SinceUnknown: since,
		Settle: tool.Reconcile.Settle, AttemptsLeft: r.exec.attemptsLeft(ctx, tool, op), Probes: op.Probes,
		Now: now, Jitter: rand.Float64()})
	r.exec.meter.Probe(tool.Name, d.Outcome)
	out := models.ProbeOutcome{Status: resp.Status, Outcome: d.Outcome, To: d.To, NextProbeAt: d.NextProbeAt, ErrorClass: d.ErrorClass}
	switch {
	case resp.Err != nil:
		out.Error = resp.Err.Error()
	case resp.BodyErr != nil:
		out.Error = "reading the answer: " + resp.BodyErr.Error()
	}
	switch d.To {
	case models.StateSucceeded:
		out.Result = result
		out.DownstreamRef = foundReference(tool, out.Result)
	case models.StateFailedFinal:
		out.ErrorMessage = "reconciled: the downstream has no record of the operation, and no attempts remain"
	}
	return out
}

// EscalateOnce opens a review for every UNKNOWN operation older than its tool's
// escalate_after, and at once for tools that cannot be reconciled; and it ends operations that
// awaited approval longer than their tool's approval_ttl, after announcing review.expiring
// ApprovalWarning before.
func (r *Recovery) EscalateOnce(ctx context.Context) (int, error) {
	now := r.exec.now()
	opened := 0
	tools := r.exec.catalog.Tools()
	names := r.exec.catalog.Names()
	// One query per distinct policy, not per tool: a catalogue of 600 imported tools usually
	// shares one or two, and the sweep then costs what it costs for one tool.
	for wait, group := range byPolicy(tools, func(t *catalog.Tool) time.Duration {
		if t.Reconcile == nil {
			return 0
		}
		return t.Review.EscalateAfter
	}) {
		n, err := r.escalate(ctx, now.Add(-wait), group, names)
		opened += n
		if err != nil {
			return opened, err
		}
	}
	// Every tool: compensations await approval whatever their tool's own policy.
	for ttl, group := range byPolicy(tools, func(t *catalog.Tool) time.Duration { return t.Review.ApprovalTTL }) {
		if _, err := r.exec.ledger.WarnExpiringApprovals(ctx, group, ttl, r.cfg.ApprovalWarning, r.cfg.Batch); err != nil {
			return opened, err
		}
		if err := r.lapse(ctx, group, ttl); err != nil {
			return opened, err
		}
	}
	n, err := r.escalate(ctx, now, nil, names) // tools the catalogue no longer has
	return opened + n, err
}

// byPolicy groups the names of tools by the value policy gives each, in the order the values
// first appear.
func byPolicy[K comparable](tools []*catalog.Tool, policy func(*catalog.Tool) K) iter.Seq2[K, []string] {
	return func(yield func(K, []string) bool) {
		var order []K
		groups := map[K][]string{}
		for _, t := range tools {
			k := policy(t)
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], t.Name)
		}
		for _, k := range order {
			if !yield(k, groups[k]) {
				return
			}
		}
	}
}

func (r *Recovery) lapse(ctx context.Context, tools []string, ttl time.Duration) error {
	n, err := r.exec.ledger.LapseApprovals(ctx, r.exec.worker, tools, ttl, r.cfg.Batch)
	if n > 0 {
		r.exec.log.Warn("approvals lapsed: operations ended FAILED_FINAL", "tools", tools, "count", n)
	}
	return err
}

func (r *Recovery) escalate(ctx context.Context, before time.Time, tools []string, known []string) (int, error) {
	ops, err := r.exec.ledger.Unresolved(ctx, before, tools, known, r.cfg.Batch)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, op := range ops {
		_, err := r.exec.ledger.OpenReview(ctx, op, models.ReasonUnknownOutcome, "worker:"+r.exec.worker)
		switch models.ErrorCode(err) {
		case "":
			n++
			r.exec.log.Warn("escalated to review", "operation_id", op.ID, "tool", op.Tool, "reason", models.ReasonUnknownOutcome)
		case models.CodeStale: // settled or escalated meanwhile
		default:
			return n, err
		}
	}
	return n, nil
}

// RetainOnce purges the params and results of operations past their tool's retention, and
// deletes the webhook deliveries (and outbox messages) that ended longer ago than the webhook
// retention. It returns the larger of the two counts, so that a full batch of either sweeps
// again at once.
func (r *Recovery) RetainOnce(ctx context.Context) (int, error) {
	now := r.exec.now()
	total := 0
	for retention, group := range byPolicy(r.exec.catalog.Tools(), func(t *catalog.Tool) time.Duration { return t.Retention }) {
		n, err := r.exec.ledger.Purge(ctx, group, now.Add(-retention), r.cfg.Batch)
		total += n
		if err != nil {
			return total, err
		}
	}
	if total > 0 {
		r.exec.log.Info("retention: records purged to tombstones", "count", total)
	}
	if r.cfg.WebhookRetention < 0 {
		return total, nil
	}
	pruned, err := r.exec.ledger.PruneWebhooks(ctx, now.Add(-r.cfg.WebhookRetention), r.cfg.Batch)
	if pruned > 0 {
		r.exec.log.Info("retention: ended webhook deliveries deleted", "count", pruned)
	}
	return max(total, pruned), err
}
