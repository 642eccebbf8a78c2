package netfault_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The idemgate binary the process runs start, built once for the package (with the race
// detector unless IDEMGATE_PROCTEST_RACE=0, as e2e/process does) and removed by TestMain.
var (
	binOnce    sync.Once
	binPath    string
	binErr     error
	binCleanup func()
)

func idemgateBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		start := time.Now()
		binPath, binCleanup, binErr = proctest.Build(proctest.RaceWanted())
		if binErr == nil {
			t.Logf("built idemgate (race=%v) in %s", proctest.RaceWanted(), time.Since(start).Round(time.Millisecond))
		}
	})
	require.NoError(t, binErr)
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binCleanup != nil {
		binCleanup()
	}
	os.Exit(code)
}

// keyed is a downstream honouring idempotency keys: the first request with an
// Idempotency-Key creates a ticket, every later one with that key gets the same answer and
// creates nothing; it can be searched by key, which is how idemgate reconciles.
type keyed struct {
	mu    sync.Mutex
	byKey map[string]string // key → ticket id
	n     int
}

func (d *keyed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.Method {
	case http.MethodPost:
		key := r.Header.Get("Idempotency-Key")
		if _, err := io.Copy(io.Discard, r.Body); err != nil || key == "" {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		d.mu.Lock()
		id, ok := d.byKey[key]
		if !ok {
			d.n++
			id = "tk_" + strconv.Itoa(d.n)
			d.byKey[key] = id
		}
		d.mu.Unlock()
		if ok {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":%q}`, id)
	case http.MethodGet:
		d.mu.Lock()
		id, ok := d.byKey[r.URL.Query().Get("key")]
		d.mu.Unlock()
		if !ok {
			_, _ = w.Write([]byte(`{"data":[]}`))
			return
		}
		_, _ = fmt.Fprintf(w, `{"data":[{"id":%q}]}`, id)
	}
}

// both is the checker's downstream of a run with refunds (no keys) and tickets (keys).
type both struct {
	refunds *refunds
	tickets *keyed
}

func (d both) effectsOf(op *models.Operation) int {
	if op.Tool == "tickets.create" {
		d.tickets.mu.Lock()
		defer d.tickets.mu.Unlock()
		if _, ok := d.tickets.byKey[op.DownstreamKeySent()]; ok {
			return 1
		}
		return 0
	}
	return d.refunds.effectsOf(op)
}

func (d both) total() int {
	d.tickets.mu.Lock()
	n := d.tickets.n
	d.tickets.mu.Unlock()
	return n + d.refunds.total()
}

const replicaTools = `
tools:
  - name: refunds.issue
    description: Refund an order (no key support)
    effect: write
    params_schema: {type: object, properties: {order: {type: string}}}
    http:
      method: POST
      url: http://{{DOWN}}/refunds
      timeout: 400ms
      reference_param: /reference
      result_reference: /id
    reconcile:
      url: http://{{DOWN}}/refunds?reference={{.DownstreamKey}}
      found: /data/0/id
      settle: 1s
    retry: {max_attempts: 3, initial_backoff: 50ms, max_backoff: 400ms}
    review: {escalate_after: 10m}
  - name: tickets.create
    description: Create a ticket (the downstream honours Idempotency-Key)
    effect: write
    params_schema: {type: object, properties: {subject: {type: string}}}
    http:
      method: POST
      url: http://{{KEYED}}/tickets
      timeout: 400ms
      idempotency_header: Idempotency-Key
      result_reference: /id
    reconcile:
      url: http://{{KEYED}}/tickets?key={{.DownstreamKey}}
      found: /data/0/id
      settle: 1s
    retry: {max_attempts: 3, initial_backoff: 50ms, max_backoff: 400ms}
    review: {escalate_after: 10m}
`

// relay relays every connection accepted on ln to target, dialled from the test's own
// namespace: how gateways in a namespace of their own reach the test PostgreSQL. reset
// closes every relayed connection at once, as a PostgreSQL restart does to its clients.
type relay struct {
	mu    sync.Mutex
	conns map[net.Conn]bool
}

func newRelay(ln net.Listener, target string) *relay {
	r := &relay{conns: map[net.Conn]bool{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.pipe(c, target)
		}
	}()
	return r
}

func (r *relay) pipe(c net.Conn, target string) {
	defer c.Close()
	u, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer u.Close()
	r.mu.Lock()
	r.conns[c], r.conns[u] = true, true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.conns, c)
		delete(r.conns, u)
		r.mu.Unlock()
	}()
	go func() {
		_, _ = io.Copy(u, c)
		_ = u.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(c, u)
}

// reset closes every connection relayed so far and returns how many it closed.
func (r *relay) reset() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		c.Close()
	}
	return len(r.conns) / 2
}

// replicas is the two gateway processes; one being restarted has no URL.
type replicas struct {
	mu    sync.Mutex
	procs [2]*proctest.Process
}

func (r *replicas) url(i int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.procs[i] == nil {
		return ""
	}
	return r.procs[i].URL
}

// TestTwoReplicasKilledUnderNetworkFaults (issue 48 item 4): two `idemgate serve` processes
// on one PostgreSQL ledger run in a network namespace of their own; a refunds service
// without key support and a ticket service honouring keys listen in another. The run
// (IDEMGATE_NETFAULT_REPLICAS_SECONDS, default 20) is cut in phases, each with one fault on
// the downstreams' link: 30 % loss each way, then answers lost (requests arrive, nothing
// comes back), then (in a run longer than two phases) requests lost, then both ways cut. In
// the middle of each phase one replica is SIGKILLed, in turn, and started again 2 s later;
// at three quarters of each phase every connection to the ledger is cut, as a PostgreSQL
// restart does. Eight agents submit new keys to one replica and, as careful agents do,
// send the same key again after a timeout, a 5xx or a broken connection (to the other
// replica), and check back with the same key on the other replica. After the heal: every
// key final or in a person's queue within the recovery window, every key recorded sent again,
// and the checker over the whole history (each key's answers consistent with each other
// and with the ledger; no key with two effects, none FAILED_FINAL with one, none SUCCEEDED
// without one). Phases last half the run, or 2 minutes in a run longer than 4 minutes.
func TestTwoReplicasKilledUnderNetworkFaults(t *testing.T) {
	requireNetAdmin(t)
	seconds := netfaultSeconds(t, "IDEMGATE_NETFAULT_REPLICAS_SECONDS", 20, 1200)
	bin := idemgateBinary(t)
	dsn := testdb.DSN(t, models.Postgres)

	l := newLink(t)
	refundsLn := listenIn(t, l.far, l.farIP+":8080")
	ticketsLn := listenIn(t, l.far, l.farIP+":8081")
	down := both{refunds: &refunds{byRef: map[string]int{}}, tickets: &keyed{byKey: map[string]string{}}}
	for _, s := range []struct {
		ln net.Listener
		h  http.Handler
	}{{refundsLn, down.refunds}, {ticketsLn, down.tickets}} {
		srv := &http.Server{Handler: s.h, ReadHeaderTimeout: time.Minute}
		go func() { _ = srv.Serve(s.ln) }()
		t.Cleanup(func() { srv.Close() })
	}

	// The ledger: the test PostgreSQL, reached from the gateways' namespace through a relay.
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	pgLn := listenIn(t, l.near, "127.0.0.1:0")
	pgRelay := newRelay(pgLn, u.Host)
	u.Host = pgLn.Addr().String()
	tools := filepath.Join(t.TempDir(), "tools.yaml")
	require.NoError(t, os.WriteFile(tools, []byte(strings.NewReplacer("{{DOWN}}", l.farIP+":8080", "{{KEYED}}", l.farIP+":8081").Replace(replicaTools)), 0o600))

	admin := proctest.Env{Bin: bin, DSN: dsn}
	admin.Run(t, "tenant", "create", "acme")
	var apiKey string
	for _, f := range strings.Fields(admin.Run(t, "apikey", "create", "--tenant", "acme", "--principal", "agent")) {
		if strings.HasPrefix(f, "idg_") {
			apiKey = f
		}
	}
	require.NotEmpty(t, apiKey)
	db, d, err := models.Open(context.Background(), dsn)
	require.NoError(t, err)
	sqlDB, _ := db.DB()
	sqlDB.SetMaxOpenConns(4)
	t.Cleanup(func() { sqlDB.Close() })
	ledger := models.New(models.Config{DB: db, Dialect: d})

	// The gateways run in the near namespace: `ip netns exec` execs idemgate, so the process
	// proctest signals is the gateway itself.
	gw := proctest.Env{Bin: "ip", DSN: u.String()}
	serve := func(name string) *proctest.Process {
		return gw.Start(t, name, "netns", "exec", l.near, bin, "serve", "--tools", tools, "--addr", "127.0.0.1:0",
			"--lease-margin", "1s", "--poll", "50ms", "--rate-limit", "0")
	}
	reps := &replicas{}
	reps.procs[0], reps.procs[1] = serve("A#0"), serve("B#0")

	// The agents' client: from the gateways' namespace, giving up on an answer after 3 s.
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: dialFrom(l.near), MaxIdleConnsPerHost: 16}}
	t.Cleanup(client.CloseIdleConnections)
	post := func(base, key, tool, params, prefer string) (int, []byte, error) {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/operations", strings.NewReader(`{"tool":"`+tool+`","params":`+params+`}`))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+apiKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Prefer", prefer)
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}

	h := newHistory()
	var mu sync.Mutex
	var latencies []time.Duration
	statuses := map[string]int{}
	// send sends key to replica i and records the answer.
	send := func(client, i int, key, tool, params, prefer string) answer {
		base := reps.url(i)
		if base == "" {
			return answer{Err: "replica down"}
		}
		start := time.Now()
		status, body, err := post(base, key, tool, params, prefer)
		a := h.add(client, key, start, status, body, err)
		mu.Lock()
		if prefer == "wait=0" { // a check-back waits up to a second by asking to
			latencies = append(latencies, time.Since(start))
		}
		if err != nil {
			statuses["no answer"]++
		} else {
			statuses[strconv.Itoa(status)]++
		}
		mu.Unlock()
		return a
	}

	phaseLen := time.Duration(seconds) * time.Second / 2
	if seconds > 240 {
		phaseLen = 2 * time.Minute
	}
	kinds := []string{"loss", "answers-lost", "requests-lost", "blackhole"}
	faulted := false
	defer func() {
		if faulted {
			_ = l.undrop()
		}
	}()
	faultStart := time.Now()
	ctx, stop := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second)
	defer stop()

	// /readyz of both replicas, every 500 ms through the run.
	probe := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialFrom(l.near)}}
	t.Cleanup(probe.CloseIdleConnections)
	ready := probeReadyz(ctx, probe, func() []string {
		var out []string
		for i := range 2 {
			if u := reps.url(i); u != "" {
				out = append(out, u)
			}
		}
		return out
	})

	type sent struct{ key, tool, params string }
	var keysMu sync.Mutex
	var keys []sent
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				s := sent{key: fmt.Sprintf("agent-%d:op-%d", w, n), tool: "refunds.issue", params: fmt.Sprintf(`{"order":"o-%d-%d"}`, w, n)}
				if n%2 == 1 {
					s.tool, s.params = "tickets.create", fmt.Sprintf(`{"subject":"s-%d-%d"}`, w, n)
				}
				keysMu.Lock()
				keys = append(keys, s)
				keysMu.Unlock()
				// A careful agent: the same key again, to the other replica, after no answer
				// or a 5xx, until one names the operation.
				i := w % 2
				var a answer
				for try := 0; try < 20; try++ {
					a = send(w, i, s.key, s.tool, s.params, "wait=0")
					if a.Err == "" && a.Status < 500 && a.Status != http.StatusTooManyRequests {
						break
					}
					i = 1 - i
					time.Sleep(100 * time.Millisecond)
				}
				// And it checks back on the other replica with the same key.
				if a.ID != "" && a.Final == "" {
					time.Sleep(200 * time.Millisecond)
					send(w, 1-i, s.key, s.tool, s.params, "wait=1")
				}
			}
		})
	}

	// The schedule, on the test's goroutine: each phase's fault, a replica killed in its
	// middle and started again 2 s later, the ledger's connections cut at three quarters.
	type phase struct {
		kind       string
		start, end time.Time
		ready      time.Duration
		resets     int
	}
	var phases []*phase
	kills := 0
	sleepUntil := func(at time.Time) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Until(at)):
			return true
		}
	}
	runEnd := faultStart.Add(time.Duration(seconds) * time.Second)
	for n := 0; time.Until(runEnd) >= phaseLen/2; n++ {
		ph := &phase{kind: kinds[n%len(kinds)], start: time.Now()}
		phases = append(phases, ph)
		if faulted {
			require.NoError(t, l.undrop())
		}
		require.NoError(t, l.drop(ph.kind))
		faulted = true
		ready() // the slowest /readyz from here on is this phase's
		if sleepUntil(ph.start.Add(phaseLen / 2)) {
			i := 1 - n%2
			reps.mu.Lock()
			p := reps.procs[i]
			reps.procs[i] = nil
			reps.mu.Unlock()
			p.Kill(t)
			kills++
			time.Sleep(2 * time.Second)
			next := serve(fmt.Sprintf("%c#%d", 'A'+i, n+1))
			reps.mu.Lock()
			reps.procs[i] = next
			reps.mu.Unlock()
		}
		if sleepUntil(ph.start.Add(phaseLen * 3 / 4)) {
			ph.resets = pgRelay.reset()
		}
		sleepUntil(ph.start.Add(phaseLen))
		if time.Until(runEnd) < phaseLen/2 { // too little left for another phase: this one lasts to the end
			sleepUntil(runEnd)
		}
		ph.end = time.Now()
		ph.ready = ready()
	}
	wg.Wait()
	require.NoError(t, l.undrop())
	faulted = false
	faultEnded := time.Now()
	mu.Lock()
	during := append([]time.Duration(nil), latencies...)
	mu.Unlock()

	// Every key final or in a person's queue within the recovery window; then every key the
	// ledger recorded sent once more, to either replica, and the checker over the whole history.
	window := 2 * time.Minute
	if seconds > 240 {
		window = 5 * time.Minute // after a 2-minute phase of faults, look-ups back off further
	}
	settled := settle(t, ledger, "acme", window, true)
	recordedKeys := map[string]bool{}
	for _, op := range settled.ops {
		recordedKeys[op.Key] = true
	}
	for i, s := range keys {
		if !recordedKeys[s.key] { // never recorded: sending it now would start a new operation
			continue
		}
		for try := 0; try < 5; try++ {
			if a := send(100, (i+try)%2, s.key, s.tool, s.params, "wait=0"); a.Err == "" && a.Status < 500 {
				break
			}
		}
	}
	v := h.check(t, settled, down, true)
	assert.Positive(t, kills, "a replica was killed")

	sort.Slice(during, func(i, j int) bool { return during[i] < during[j] })
	p := func(q float64) time.Duration { return during[int(q*float64(len(during)-1))].Round(time.Millisecond) }
	var attempts int
	for _, op := range settled.ops {
		attempts += op.Attempts
	}
	for _, op := range settled.ops {
		if op.State == models.StateFailedFinal {
			t.Logf("FAILED_FINAL (no effect downstream): %s %s %s after %d attempts: %s: %s",
				op.Tool, op.Key, op.ID, op.Attempts, deref(op.ErrorClass), deref(op.ErrorMessage))
		}
	}
	for _, ph := range phases {
		at := h.answerTimes(ph.start, ph.end, 0.5, 0.99, 1)
		t.Logf("phase %s (%s): requests answered in p50 %s, p99 %s, max %s (check-backs waiting up to 1 s included); /readyz within %s; %d ledger connections cut",
			ph.kind, ph.end.Sub(ph.start).Round(time.Second), at[0], at[1], at[2], ph.ready, ph.resets)
	}
	t.Logf("%d s of faults on the downstreams' link in %d phases, %d SIGKILLs of a replica: %d keys sent (answers %v); first sends answered in p50 %s, p99 %s, max %s; "+
		"settled %s after the heal (the faults lasted %s); %d attempts; %s",
		seconds, len(phases), kills, len(keys), statuses, p(0.5), p(0.99), p(1),
		settled.took.Round(100*time.Millisecond), faultEnded.Sub(faultStart).Round(time.Second), attempts, v)
}
