package process_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/require"
)

// replicated starts a primary and a streaming standby, both private to the test; synchronous
// makes every commit wait for the standby. Without PostgreSQL binaries the test skips, except
// under CI, where it fails: CI must run the failover tests.
func replicated(t *testing.T, synchronous bool) (primary, standby *proctest.Postgres) {
	t.Helper()
	primary, err := proctest.NewPostgres(t)
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("cannot run a private PostgreSQL on this machine (CI fails instead): %v", err)
		}
		t.Fatalf("CI must be able to run a private PostgreSQL: %v", err)
	}
	standby, err = primary.NewStandby(t)
	require.NoError(t, err, "start a standby with pg_basebackup -R")
	if synchronous {
		require.NoError(t, primary.MakeSynchronous())
	}
	return primary, standby
}

// The tools under load: one whose downstream honours keys, two whose downstreams do not (one
// of them can be reconciled, one cannot). Each operation's params carry its key, so every
// effect the sandbox committed names the key that caused it, whichever operation sent it.
var loadTools = []string{"tickets.create", "refunds.issue", "email.send"}

func loadParams(tool, key string) string {
	switch tool {
	case "tickets.create":
		return `{"subject":"` + key + `"}`
	case "refunds.issue":
		return `{"order_id":"` + key + `","amount_cents":1999,"currency":"EUR"}`
	}
	return `{"to":"ops@example.com","subject":"` + key + `","body":"hi"}`
}

// answer is the last answer an agent got for one key.
type answer struct {
	Key, Tool string
	Status    int
	ID, State string
	At        time.Time
}

// agents keep a steady load of new operations on one gateway, as a fleet of agents would:
// each takes a new key, and retries it (same key, same params) while the gateway answers
// 503, as docs/API.md tells agents to. They stop taking new keys when told, and finish the
// key in hand.
type agents struct {
	s    *stack
	base string
	name string

	next      atomic.Int64
	stopped   atomic.Bool // take no new key
	abandoned atomic.Bool // drop the key in hand too (the test is over)
	wg        sync.WaitGroup

	mu          sync.Mutex
	answers     map[string]answer
	unavailable []time.Time // when each 503 came
	errs        []error
}

func startAgents(t *testing.T, s *stack, base, name string, n int) *agents {
	t.Helper()
	a := &agents{s: s, base: base, name: name, answers: map[string]answer{}}
	for range n {
		a.wg.Add(1)
		go a.run()
	}
	t.Cleanup(func() {
		a.abandoned.Store(true)
		a.stop()
	})
	return a
}

func (a *agents) run() {
	defer a.wg.Done()
	for !a.stopped.Load() {
		i := a.next.Add(1)
		tool := loadTools[int(i)%len(loadTools)]
		a.drive(fmt.Sprintf("%s-%05d", a.name, i), tool)
	}
}

// drive submits one key until the gateway answers something other than 503. The wait is
// short: a load of many keys, not long waits on each.
func (a *agents) drive(key, tool string) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) && !a.abandoned.Load() {
		r, err := a.s.post(a.base, key, tool, loadParams(tool, key), map[string]string{"Prefer": "wait=5"})
		if err != nil {
			a.mu.Lock()
			a.errs = append(a.errs, fmt.Errorf("%s: %w", key, err))
			a.mu.Unlock()
			return
		}
		if r.Status == http.StatusServiceUnavailable {
			a.mu.Lock()
			a.unavailable = append(a.unavailable, r.At)
			a.mu.Unlock()
			time.Sleep(25 * time.Millisecond)
			continue
		}
		var body struct {
			ID          string `json:"id"`
			OperationID string `json:"operation_id"`
			State       string `json:"state"`
		}
		_ = json.Unmarshal(r.Body, &body)
		if body.ID == "" {
			body.ID = body.OperationID
		}
		a.mu.Lock()
		a.answers[key] = answer{Key: key, Tool: tool, Status: r.Status, ID: body.ID, State: body.State, At: r.At}
		a.mu.Unlock()
		return
	}
}

func (a *agents) stop() {
	a.stopped.Store(true)
	a.wg.Wait()
}

// snapshot returns the answers so far, and the 503s.
func (a *agents) snapshot() (map[string]answer, []time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]answer, len(a.answers))
	for k, v := range a.answers {
		out[k] = v
	}
	return out, append([]time.Time(nil), a.unavailable...)
}

// acknowledgedSince counts the keys answered 2xx at or after since.
func (a *agents) acknowledgedSince(since time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, ans := range a.answers {
		if ans.Status/100 == 2 && !ans.At.Before(since) {
			n++
		}
	}
	return n
}

// waitAcknowledged waits until n keys were answered 2xx at or after since.
func (a *agents) waitAcknowledged(t *testing.T, n int, since time.Time) {
	t.Helper()
	eventually(t, 90*time.Second, fmt.Sprintf("%d operations acknowledged", n), func() (bool, string) {
		got := a.acknowledgedSince(since)
		return got >= n, fmt.Sprintf("%d acknowledged", got)
	})
}

func (a *agents) requireNoTransportErrors(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	require.Empty(t, a.errs, "the gateway answered every request (it never went away)")
}

// effectsByKey counts, per operation key, the side effects the sandbox committed: tickets and
// refunds from its listings, emails (which it cannot list) from the requests that reached it.
// The key is read from the params, so a key that ran twice under two operations counts 2.
func effectsByKey(t *testing.T, s *stack) map[string]int {
	t.Helper()
	out := map[string]int{}
	for kind, field := range map[string]string{"tickets": "subject", "refunds": "order_id"} {
		r, err := s.do(http.MethodGet, s.sbURL+"/"+kind, nil, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var list map[string][]map[string]any
		require.NoError(t, json.Unmarshal(r.Body, &list))
		for _, rec := range list[kind] {
			key, _ := rec[field].(string)
			out[key]++
		}
	}
	for _, r := range s.sb.Requests("/emails") {
		var body struct {
			Subject string `json:"subject"`
		}
		if r.Method == http.MethodPost && r.Fault == "" && json.Unmarshal(r.Body, &body) == nil {
			out[body.Subject]++
		}
	}
	return out
}

// settled waits until no operation is PENDING or RUNNING, and every UNKNOWN one has an open
// review (its tool cannot be reconciled): what recovery can settle, it has.
func settled(t *testing.T, s *stack) {
	t.Helper()
	eventually(t, 90*time.Second, "recovery to settle every operation", func() (bool, string) {
		var rows []struct {
			State string
			N     int
		}
		err := s.ledger.DB().Raw(`SELECT state, count(*) AS n FROM operations
			WHERE state IN ('PENDING', 'RUNNING') OR (state = 'UNKNOWN' AND (review_id IS NULL OR tool <> 'email.send'))
			GROUP BY state`).Scan(&rows).Error
		if err != nil {
			return false, err.Error()
		}
		return len(rows) == 0, fmt.Sprintf("%v", rows)
	})
}

// nothingRunningPastLease checks no operation is RUNNING under a lease that expired.
func nothingRunningPastLease(t *testing.T, s *stack) {
	t.Helper()
	var n int64
	require.NoError(t, s.ledger.DB().Model(&models.Operation{}).
		Where("state = ? AND lease_expires_at < ?", models.StateRunning, time.Now().UTC()).Count(&n).Error)
	require.Zero(t, n, "operations left RUNNING past their lease")
}

// listenersOn counts the sessions on pg that are a gateway's LISTEN connection.
func listenersOn(t *testing.T, pg *proctest.Postgres) int {
	t.Helper()
	return listenersAt(t, pg.DSN)
}

// listenersAt counts the sessions on the server of dsn that are a gateway's LISTEN connection.
func listenersAt(t *testing.T, dsn string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, _, err := models.Open(ctx, dsn)
	require.NoError(t, err)
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	var n int
	require.NoError(t, db.WithContext(ctx).Raw(`SELECT count(*) FROM pg_stat_activity
		WHERE application_name = ? AND query LIKE 'LISTEN%'`, models.ListenerApplicationName).Scan(&n).Error)
	return n
}

// complaints counts, by message, the lines of a process's log at level WARN or ERROR, but for
// the one line each failed request writes.
func complaints(out string) map[string]int {
	n := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		var l struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || (l.Level != "WARN" && l.Level != "ERROR") || l.Msg == "request failed" {
			continue
		}
		n[l.Msg]++
	}
	return n
}
