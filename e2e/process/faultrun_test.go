package process_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fault run's knobs; the seed is logged so a failing run can be replayed.
const (
	faultRunSeedEnv = "IDEMGATE_FAULTRUN_SEED"
	faultRunOpsEnv  = "IDEMGATE_FAULTRUN_OPS"
)

var faultKinds = []string{"none", sandbox.ModeDelay, sandbox.ModeDropAfterCommit, sandbox.ModeHang, sandbox.ModeHangAfterCommit,
	sandbox.ModeError, sandbox.ModeErrorAfterCommit, sandbox.ModeThrottle, sandbox.ModeUnavailable}

// commits says whether a request the sandbox received whole under fault mode committed its
// side effect. A delayed request commits only if its caller is still there when the delay
// ends, which a SIGKILL may prevent: it may or may not have committed.
var commits = map[string]bool{"": true, sandbox.ModeDropAfterCommit: true,
	sandbox.ModeErrorAfterCommit: true, sandbox.ModeHangAfterCommit: true}

// faultTools are the tools of the run: with key support and a look-up, without key support
// and with a look-up, and with neither (only a reviewer can settle it).
var faultTools = []struct{ name, path string }{
	{"tickets.create", "/tickets"}, {"tickets.create", "/tickets"},
	{"refunds.issue", "/refunds"}, {"refunds.issue", "/refunds"},
	{"email.send", "/emails"},
}

type plannedOp struct {
	i            int
	key, tool    string
	path, params string
	fault        string

	// What the client saw.
	ids      map[string]bool
	statuses []int
	tries    int
	err      string
}

// replicaSet is the two gateway processes; a replica being restarted has no URL.
type replicaSet struct {
	mu    sync.Mutex
	procs [2]*proctest.Process
	gen   [2]int
}

func (r *replicaSet) url(i int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.procs[i] == nil {
		return ""
	}
	return r.procs[i].URL
}

func (r *replicaSet) set(i int, p *proctest.Process) {
	r.mu.Lock()
	r.procs[i] = p
	r.mu.Unlock()
}

// N operations with random faults across tools with and without key support, submitted
// concurrently to two replicas while one or the other is SIGKILLed at random moments and
// restarted. Afterwards, for every operation: at most one side effect at the downstream; the
// ledger agrees with the downstream; every operation is terminal, or UNKNOWN with an open
// review.
func TestRandomizedFaultRun(t *testing.T) {
	seed := time.Now().UnixNano()
	if v := os.Getenv(faultRunSeedEnv); v != "" {
		var err error
		seed, err = strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
	}
	n := 150
	if v := os.Getenv(faultRunOpsEnv); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	t.Logf("fault run: seed %d (%s=%d to replay), %d operations", seed, faultRunSeedEnv, seed, n)

	// The effects of emails are counted from the sandbox's request log: it must keep every
	// request of the run (a few per operation: attempts, look-ups, probes), not only the
	// default 10000, or a large run loses its first half (as the first 10,000-operation run
	// did: 401 emails "missing").
	s := newStack(t, stackOptions{Escalate: "10s", Record: max(20*n, 10000)})
	reps := &replicaSet{}
	for i := range 2 {
		reps.set(i, s.serve(t, fmt.Sprintf("%c#0", 'A'+i)))
	}

	plan := make([]*plannedOp, n)
	planned := map[string]int{}
	for i := range plan {
		tool := faultTools[rng.IntN(len(faultTools))]
		op := &plannedOp{i: i, key: fmt.Sprintf("run-%d:%s", i, tool.name), tool: tool.name, path: tool.path,
			fault: faultKinds[rng.IntN(len(faultKinds))], ids: map[string]bool{}}
		switch tool.path {
		case "/tickets":
			op.params = fmt.Sprintf(`{"subject":"ticket %d"}`, i)
		case "/refunds":
			op.params = fmt.Sprintf(`{"order_id":"o-%d","amount_cents":%d,"currency":"EUR"}`, i, 100+i)
		default:
			op.params = fmt.Sprintf(`{"to":"u%d@example.com","subject":"s%d","body":"b"}`, i, i)
		}
		plan[i] = op
		planned[op.fault]++
	}

	started := time.Now()
	queue := make(chan *plannedOp)
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		wrng := rand.New(rand.NewPCG(uint64(seed), uint64(w+2)))
		go func() {
			defer wg.Done()
			for op := range queue {
				submitWithFault(s, reps, wrng, op)
			}
		}()
	}
	submitted := make(chan struct{})
	go func() {
		for _, op := range plan {
			queue <- op
		}
		close(queue)
		wg.Wait()
		close(submitted)
	}()

	// Kill one replica or the other at random moments until every operation is submitted, and
	// once more just after, while the last attempts are in flight.
	kills := 0
	killOne := func() {
		// Half the kills wait for the next request to reach the downstream and strike while
		// it may still be in flight, so that crashes hit attempts, not just idle processes.
		if rng.IntN(2) == 0 {
			seen := len(s.sb.Requests(""))
			for end := time.Now().Add(2 * time.Second); len(s.sb.Requests("")) == seen && time.Now().Before(end); {
				time.Sleep(2 * time.Millisecond)
			}
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		}
		i := rng.IntN(2)
		reps.mu.Lock()
		p := reps.procs[i]
		reps.procs[i] = nil
		reps.gen[i]++
		gen := reps.gen[i]
		reps.mu.Unlock()
		p.Kill(t)
		kills++
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		reps.set(i, s.serve(t, fmt.Sprintf("%c#%d", 'A'+i, gen)))
	}
	for done := false; !done; {
		select {
		case <-submitted:
			done = true
		case <-time.After(700*time.Millisecond + time.Duration(rng.IntN(1800))*time.Millisecond):
			killOne()
		}
	}
	submittedIn := time.Since(started)
	time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
	killOne()
	lastKill := time.Now()

	for _, op := range plan {
		require.Len(t, op.ids, 1, "%s: the client must learn exactly one operation id (statuses %v, tries %d, last error %q)",
			op.key, op.statuses, op.tries, op.err)
	}

	// Recovery: every operation terminal, or UNKNOWN with an open review; and the reconcilable
	// ones given the chance to settle.
	ctx := context.Background()
	var ops []*models.Operation
	settled := func(requireReconciled bool) (bool, string) {
		var err error
		if ops, err = allOperations(ctx, s); err != nil {
			return false, err.Error()
		}
		open := map[models.State]int{}
		for _, op := range ops {
			switch {
			case op.State.Terminal():
			case op.State == models.StateUnknown && op.Review != nil && op.Review.Status == models.ReviewOpen &&
				(!requireReconciled || op.Tool == "email.send"):
			default:
				open[op.State]++
			}
		}
		return len(open) == 0 && len(ops) == n, fmt.Sprintf("%d operations, not settled: %v", len(ops), open)
	}
	took := eventually(t, 90*time.Second, "every operation terminal or UNKNOWN with an open review", func() (bool, string) {
		return settled(false)
	})
	// Reconcilable operations normally reach a terminal state; allow them a little longer, but
	// UNKNOWN with an open review is all the invariant asks.
	deadline := time.Now().Add(20 * time.Second)
	for ok, _ := settled(true); !ok && time.Now().Before(deadline); ok, _ = settled(true) {
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("all %d submitted in %s; recovered %s after the last kill (invariant first held after %s of waiting)",
		n, submittedIn.Round(time.Millisecond), time.Since(lastKill).Round(time.Millisecond), took.Round(time.Millisecond))

	// Freeze: stop both replicas gracefully, then compare the ledger with the downstream.
	for i := range 2 {
		reps.mu.Lock()
		p := reps.procs[i]
		reps.mu.Unlock()
		p.Terminate(t, 60*time.Second)
	}
	ok, status := settled(false)
	require.True(t, ok, "after shutdown: %s", status)
	s.sb.ClearFaults()

	effects := downstreamEffects(t, s)
	byID := map[string]*models.Operation{}
	for _, op := range ops {
		byID[op.ID] = op
	}
	for ref := range effects {
		assert.Contains(t, byID, ref, "a side effect names an operation the ledger does not have")
	}
	states := map[string]int{}
	unknownByTool := map[string]int{}
	unknownOpen, terminalOpenReview, duplicates := 0, 0, 0
	// outcomes tallies each tool's final states by the effect behind them: "certain" (a
	// committed request), "maybe" (a delayed one whose caller may have gone) or "none", so the
	// sandbox's own counts can be read against the ledger's states.
	outcomes := map[string]map[string]int{}
	for _, p := range plan {
		var id string
		for k := range p.ids {
			id = k
		}
		op, found := byID[id]
		if !assert.True(t, found, "%s: the ledger has no operation %s", p.key, id) {
			continue
		}
		assert.Equal(t, p.key, op.Key)
		e := effects[id]
		if e == nil {
			e = &effect{}
		}
		states[string(op.State)]++
		if outcomes[op.Tool] == nil {
			outcomes[op.Tool] = map[string]int{}
		}
		outcomes[op.Tool][string(op.State)+"/"+effectKind(e)]++
		what := fmt.Sprintf("%s (%s, fault %s, state %s, attempts %d, effects %v + %d maybe)", p.key, id, p.fault, op.State, op.Attempts, e.refs, e.maybe)
		if len(e.refs)+e.maybe > 1 {
			duplicates++
		}
		assert.LessOrEqual(t, len(e.refs)+e.maybe, 1, "at most one side effect: %s", what)
		switch op.State {
		case models.StateSucceeded:
			assert.Equal(t, 1, len(e.refs)+e.maybe, "SUCCEEDED means the downstream has it: %s", what)
			if p.path != "/emails" && len(e.refs) == 1 && assert.NotNil(t, op.DownstreamRef, what) {
				assert.Equal(t, e.refs[0], *op.DownstreamRef, "the recorded reference is the downstream's: %s", what)
			}
		case models.StateFailedFinal:
			assert.Zero(t, len(e.refs)+e.maybe, "FAILED_FINAL means nothing was done: %s", what)
		case models.StateUnknown:
			unknownOpen++
			unknownByTool[op.Tool]++
			assert.True(t, op.Review != nil && op.Review.Status == models.ReviewOpen, "UNKNOWN needs an open review: %s", what)
		default:
			t.Errorf("not settled: %s", what)
		}
		if op.State.Terminal() && op.Review != nil && op.Review.Status == models.ReviewOpen {
			terminalOpenReview++
		}
	}
	for _, kind := range []string{"tickets", "refunds", "emails"} {
		total, maybe := 0, 0
		for _, e := range effects {
			if e.kind == kind {
				total += len(e.refs)
				maybe += e.maybe
			}
		}
		committed := s.sb.Committed(kind)
		assert.True(t, total <= committed && committed <= total+maybe,
			"%s: the per-operation count accounts for every committed one: %d certain + %d maybe vs %d committed", kind, total, maybe, committed)
		t.Logf("fault run: %s: %d committed by the sandbox's count; from its request log %d certain + %d maybe", kind, committed, total, maybe)
	}
	for tool, m := range outcomes {
		t.Logf("fault run: %s final state/effect %s", tool, sorted(m))
	}
	for _, r := range s.sb.Requests("/tickets") {
		if r.Method == http.MethodPost {
			assert.Regexp(t, `^dk_[0-9a-f]{32}$`, r.Header.Get("Idempotency-Key"), "tickets carry the downstream key")
			assert.Equal(t, r.Header.Get("X-Idemgate-Downstream-Key"), r.Header.Get("Idempotency-Key"), "in both headers")
		}
	}

	applied := map[string]int{}
	posts := 0
	for _, r := range s.sb.Requests("") {
		if r.Method == http.MethodPost {
			posts++
			if r.Fault != "" {
				applied[r.Fault]++
			}
		}
	}
	byTool := map[string]int{}
	for _, p := range plan {
		byTool[p.tool]++
	}
	t.Logf("fault run: %d operations %v; faults planned %s; faults applied to POSTs %s; %d POSTs downstream; "+
		"%d SIGKILLs (and restarts); final states %s; committed: tickets %d, refunds %d, emails %d",
		n, byTool, sorted(planned), sorted(applied), posts, kills, sorted(states),
		s.sb.Committed("tickets"), s.sb.Committed("refunds"), s.sb.Committed("emails"))
	for _, op := range ops {
		if op.State == models.StateFailedFinal {
			t.Logf("FAILED_FINAL: %s %s after %d attempts: %s: %s", op.Key, op.ID, op.Attempts, deref(op.ErrorClass), deref(op.ErrorMessage))
		}
	}
	var reaped, reconciled int64
	require.NoError(t, s.ledger.DB().Model(&models.Event{}).Where("type = ? AND detail LIKE ?", "state_changed", "%lease_expired%").Count(&reaped).Error)
	require.NoError(t, s.ledger.DB().Model(&models.Event{}).Where("type = ? AND to_state IS NOT NULL", "reconcile_finished").Count(&reconciled).Error)
	t.Logf("fault run: %d attempts cut off by a kill and reaped to UNKNOWN; %d operations settled by reconciliation; "+
		"%d UNKNOWN with an open review %s; %d terminal operations still showing an open review; "+
		"%d operations with more than one side effect (duplicates)",
		reaped, reconciled, unknownOpen, sorted(unknownByTool), terminalOpenReview, duplicates)
}

// allOperations reads the tenant's whole ledger, page by page (a page holds at most 500), so
// that a run larger than one page is checked in full.
func allOperations(ctx context.Context, s *stack) ([]*models.Operation, error) {
	var all []*models.Operation
	f := models.ListFilter{Limit: 500}
	for {
		page, more, err := s.ledger.List(ctx, s.tenant, f)
		if err != nil {
			return nil, fmt.Errorf("list operations before %q: %w", f.Before, err)
		}
		all = append(all, page...)
		if !more || len(page) == 0 {
			return all, nil
		}
		f.Before = page[len(page)-1].ID
	}
}

// submitWithFault queues op's fault just before sending it, then submits it like an agent:
// to a random replica, and on a dropped connection or a 503 again with the same key, to
// whichever replica is up, until an answer names the operation.
func submitWithFault(s *stack, reps *replicaSet, rng *rand.Rand, op *plannedOp) {
	if op.fault != "none" {
		f := sandbox.Fault{Mode: op.fault, Path: op.path, Method: http.MethodPost, Count: 1}
		if op.fault == sandbox.ModeDelay {
			f.Delay = 200 * time.Millisecond // well inside the 1 s timeout: it commits
		}
		s.sb.AddFault(f)
	}
	deadline := time.Now().Add(60 * time.Second)
	i := rng.IntN(2)
	for time.Now().Before(deadline) {
		op.tries++
		url := reps.url(i)
		i = 1 - i
		if url == "" {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		r, err := s.post(url, op.key, op.tool, op.params, map[string]string{"Prefer": "wait=1"})
		if err != nil {
			op.err = err.Error()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		op.statuses = append(op.statuses, r.Status)
		switch r.Status {
		case http.StatusCreated, http.StatusAccepted, http.StatusOK, http.StatusConflict:
			if id := r.id(); id != "" {
				op.ids[id] = true
				return
			}
			op.err = "no operation id in " + string(r.Body)
			return
		case http.StatusServiceUnavailable, http.StatusTooManyRequests:
			time.Sleep(100 * time.Millisecond)
		default:
			op.err = fmt.Sprintf("unexpected %d: %s", r.Status, r.Body)
			return
		}
	}
}

type effect struct {
	kind  string
	refs  []string // the downstream ids of the committed records
	maybe int      // emails: requests that may have committed (delayed, caller possibly killed)
}

// downstreamEffects lists, per operation id, the side effects the sandbox committed: tickets
// and refunds from its listings, emails (which it cannot list) from the requests that
// committed one.
func downstreamEffects(t *testing.T, s *stack) map[string]*effect {
	t.Helper()
	out := map[string]*effect{}
	add := func(kind, ref, id string) {
		e := out[ref]
		if e == nil {
			e = &effect{kind: kind}
			out[ref] = e
		}
		e.refs = append(e.refs, id)
	}
	for _, kind := range []string{"tickets", "refunds"} {
		r, err := s.do(http.MethodGet, s.sbURL+"/"+kind, nil, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var list map[string][]struct {
			ID        string `json:"id"`
			Operation string `json:"operation"` // X-Idemgate-Operation of the creating request
		}
		require.NoError(t, json.Unmarshal(r.Body, &list))
		for _, rec := range list[kind] {
			add(kind, rec.Operation, rec.ID)
		}
	}
	for _, r := range s.sb.Requests("/emails") {
		if r.Method != http.MethodPost || !json.Valid(r.Body) { // a body cut short commits nothing
			continue
		}
		ref := r.Header.Get("X-Idemgate-Operation")
		switch {
		case commits[r.Fault]:
			add("emails", ref, r.Header.Get("X-Request-Id"))
		case r.Fault == sandbox.ModeDelay:
			if out[ref] == nil {
				out[ref] = &effect{kind: "emails"}
			}
			out[ref].maybe++
		}
	}
	return out
}

// effectKind names what stands behind an operation's outcome downstream.
func effectKind(e *effect) string {
	switch {
	case len(e.refs) > 0:
		return "certain"
	case e.maybe > 0:
		return "maybe"
	}
	return "none"
}

func sorted(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
