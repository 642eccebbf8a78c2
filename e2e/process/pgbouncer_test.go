package process_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The gateway through PgBouncer in transaction pooling mode (docs/CLI.md): each transaction, and
// each statement outside one, runs on whichever server connection PgBouncer lends, so nothing
// the gateway left on a session before is there. The URL says so
// (default_query_exec_mode=exec: no prepared statement outlives its statement), and LISTEN,
// which needs a session, takes a direct connection of its own (IDEMGATE_DATABASE_LISTEN_URL)
// or none (waiters poll). Migrations, claims with SKIP LOCKED, the waits on other replicas,
// recovery, the webhook outbox and the audit chain all go through PgBouncer below.

// pooled is the stack of a test whose gateways reach a database of its own through a private
// PgBouncer (pool_mode = transaction) in front of the test PostgreSQL; with listen, they are
// given a direct IDEMGATE_DATABASE_LISTEN_URL to that database. The test's own reads go
// through PgBouncer too.
func pooled(t *testing.T, listen bool, opts stackOptions) (*stack, *proctest.PgBouncer) {
	t.Helper()
	admin := testdb.AdminDSN()
	if admin == "off" {
		t.Skipf("%s=off: PostgreSQL tests skipped", testdb.PostgresEnv)
	}
	direct := newDatabase(t, admin)
	host, port := proctest.HostPort(admin)
	b, err := proctest.NewPgBouncer(t, host, port)
	needProgram(t, "PgBouncer", err)
	u, _ := url.Parse(direct)
	s := newStackOn(t, b.DSN(strings.TrimPrefix(u.Path, "/")), opts)
	if listen {
		s.env.Extra = append(s.env.Extra, "IDEMGATE_DATABASE_LISTEN_URL="+direct)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("PgBouncer's log:\n%s", tailLines(b.Log(), 40))
		}
	})
	return s, b
}

// needProgram skips the test when err says a program it runs is missing or cannot run here,
// except under CI, where it fails: CI must run these tests.
func needProgram(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "" {
		t.Skipf("cannot run %s on this machine (CI fails instead): %v", what, err)
	}
	t.Fatalf("CI must be able to run %s: %v", what, err)
}

// newDatabase creates an empty database on the server of admin, dropped when the test ends,
// and returns its URL. (Not a schema, as testdb makes: search_path is a startup parameter,
// which PgBouncer does not pass on.)
func newDatabase(t *testing.T, admin string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	exec := func(stmt string) error {
		db, _, err := models.Open(context.Background(), admin)
		if err != nil {
			return err
		}
		sqlDB, _ := db.DB()
		defer sqlDB.Close()
		return db.Exec(stmt).Error
	}
	require.NoError(t, exec("CREATE DATABASE "+name), "PostgreSQL is required")
	t.Cleanup(func() { _ = exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })
	u, err := url.Parse(admin)
	require.NoError(t, err)
	u.Path = "/" + name
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	return u.String()
}

// noPoolerErrors checks a process never met the errors of prepared statements lent to the
// wrong session.
func noPoolerErrors(t *testing.T, procs ...*proctest.Process) {
	t.Helper()
	for _, p := range procs {
		out := p.Output()
		// The codes as PostgreSQL's errors print them: a bare "26000" also matches a log line's
		// nanoseconds (15:51:52.687260003).
		for _, code := range []string{"SQLSTATE 42P05", "SQLSTATE 26000", "prepared statement"} {
			assert.NotContains(t, out, code, "%s met a statement prepared on another session:\n%s", p.Name, tailLines(out, 20))
		}
		t.Logf("%s: warnings and errors besides failed requests: %v", p.Name, complaints(out))
	}
}

// The forty concurrent duplicates of TestTwoReplicasFortyConcurrentDuplicates, through
// PgBouncer, each replica with a direct LISTEN connection: one effect, one operation, and the
// duplicates on the other replica woken by its notification.
func TestPgBouncerTwoReplicasFortyConcurrentDuplicates(t *testing.T) {
	s, _ := pooled(t, true, stackOptions{})
	fortyConcurrentDuplicates(t, s)
}

// Through PgBouncer with no LISTEN URL: no listener (it could not hear anything through
// transaction pooling), and a duplicate on the other replica is woken by its poll instead.
func TestPgBouncerWithoutListenURLWaitersPoll(t *testing.T) {
	s, _ := pooled(t, false, stackOptions{})
	a, b := s.serve(t, "A"), s.serve(t, "B")
	assert.Contains(t, b.Output(), "no LISTEN connection", "the gateway says it polls")
	const n = 5
	for i := range n {
		key := fmt.Sprintf("poll-%d", i)
		s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Path: "/tickets", Method: "POST", Count: 1, Delay: 400 * time.Millisecond})
		first := s.mustPost(t, a.URL, key, "tickets.create", ticketParams, wait0)
		require.Equal(t, http.StatusAccepted, first.Status, "%s", first.Body)
		dup := s.mustPost(t, b.URL, key, "tickets.create", ticketParams, map[string]string{"Prefer": "wait=10"})
		require.Equal(t, http.StatusOK, dup.Status, "%s", dup.Body)
		assert.Equal(t, "SUCCEEDED", dup.obj(t)["state"])
		assert.Equal(t, first.id(), dup.id())
	}
	ended := s.waitsEnded(t, b)
	assert.Zero(t, ended[jobs.WaitNotified], "nothing to be notified by: %v", ended)
	assert.EqualValues(t, n, ended[jobs.WaitPolled], "every wait ended at a poll: %v", ended)
	assert.Equal(t, n, s.sb.Committed("tickets"), "one effect per key")
	noPoolerErrors(t, a, b)
}

// TestKilledAfterCommitIsReconciledAfterRestart through PgBouncer: the lease reaper and the
// reconciler.
func TestPgBouncerKilledAfterCommitIsReconciledAfterRestart(t *testing.T) {
	s, _ := pooled(t, true, killedAfterCommitOptions)
	killedAfterCommitIsReconciled(t, s)
}

// TestReviewOpenedDuringProbeIsClosedWhenProbeSettles through PgBouncer: the escalator, a
// reconcile probe and the review it closes.
func TestPgBouncerReviewOpenedDuringProbeIsClosedWhenProbeSettles(t *testing.T) {
	s, _ := pooled(t, true, reviewDuringProbeOptions)
	reviewOpenedDuringProbeIsClosed(t, s)
}

// A steady load on two replicas through PgBouncer, with a webhook subscribed: operations
// answered inline and claimed by the dispatchers (SKIP LOCKED), events into the outbox and
// out to the receiver, the audit chain appended by the administrative commands and verified
// through PgBouncer at the end.
func TestPgBouncerLoadWebhooksAndAuditChain(t *testing.T) {
	s, _ := pooled(t, true, stackOptions{})
	hooks := newHookReceiver(t)
	s.env.Run(t, "webhook", "create", "--tenant", s.tenant, "--url", hooks.url, "--events", models.WebhookOperationSucceeded, "--allow-private")
	a, b := s.serve(t, "A"), s.serve(t, "B")

	// Inline answers (wait=5) from a few agents on each replica, and operations left to the
	// dispatchers (wait=0).
	loadA, loadB := startAgents(t, s, a.URL, "pooled-a", 3), startAgents(t, s, b.URL, "pooled-b", 3)
	var queued []string
	for i := range 40 {
		key := fmt.Sprintf("queued-%02d", i)
		tool := loadTools[i%len(loadTools)]
		r := s.mustPost(t, []string{a.URL, b.URL}[i%2], key, tool, loadParams(tool, key), wait0)
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
		queued = append(queued, key)
	}
	loadA.waitAcknowledged(t, 60, time.Time{})
	loadB.waitAcknowledged(t, 60, time.Time{})
	loadA.stop()
	loadB.stop()
	loadA.requireNoTransportErrors(t)
	loadB.requireNoTransportErrors(t)
	settled(t, s)

	var ops []models.Operation
	require.NoError(t, s.ledger.DB().Where("tenant = ?", s.tenant).Find(&ops).Error)
	effects := effectsByKey(t, s)
	succeeded := map[string]bool{}
	for _, op := range ops {
		if op.State == models.StateSucceeded {
			succeeded[op.ID] = true
			assert.Equal(t, 1, effects[op.Key], "%s (%s) succeeded", op.Key, op.Tool)
		}
		assert.True(t, op.State.Terminal() || op.ReviewID != nil, "%s ends %s", op.Key, op.State)
	}
	for key, n := range effects {
		assert.LessOrEqual(t, n, 1, "%s", key)
	}
	answersA, _ := loadA.snapshot()
	answersB, _ := loadB.snapshot()
	t.Logf("%d operations (%d queued, %d + %d answered inline), %d succeeded", len(ops), len(queued), len(answersA), len(answersB), len(succeeded))
	require.Greater(t, len(succeeded), 100)

	var byWorker []struct {
		Worker string
		N      int
	}
	require.NoError(t, s.ledger.DB().Raw("SELECT worker, count(*) AS n FROM attempts GROUP BY worker").Scan(&byWorker).Error)
	assert.Len(t, byWorker, 2, "both replicas ran attempts: %v", byWorker)

	eventually(t, 30*time.Second, "a webhook for every success", func() (bool, string) {
		got := hooks.succeeded()
		missing := 0
		for id := range succeeded {
			if got[id] == 0 {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d not delivered yet", missing, len(succeeded))
	})
	for id, n := range hooks.succeeded() {
		assert.True(t, succeeded[id], "a webhook for %s, which did not succeed", id)
		assert.Equal(t, 1, n, "%s delivered %d times with no fault", id, n)
	}

	out := s.env.Run(t, "audit", "verify")
	assert.Contains(t, out, "audit chain ok")
	t.Logf("idemgate audit verify: %s", strings.TrimSpace(out))
	noPoolerErrors(t, a, b)
}

// hookReceiver counts the operation.succeeded webhooks it receives, by operation id.
type hookReceiver struct {
	url string
	mu  sync.Mutex
	n   map[string]int
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{n: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p struct {
			Type string `json:"type"`
			Data struct {
				Operation struct {
					ID string `json:"id"`
				} `json:"operation"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &p) == nil && p.Type == models.WebhookOperationSucceeded {
			h.mu.Lock()
			h.n[p.Data.Operation.ID]++
			h.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/hooks"
	return h
}

func (h *hookReceiver) succeeded() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.n))
	for k, v := range h.n {
		out[k] = v
	}
	return out
}

// A new ledger provisioned through PgBouncer with the URL the docs prescribe, as an operator
// does: `migrate` (three at once, as replicas starting together run it, then once more with
// nothing to do), `tenant create` and `apikey create`, every one through the pooler. The
// migration's lock must be free afterwards on every server session PgBouncer holds: a lock
// left on a pooled session would stop the next migration through any other.
func TestPgBouncerMigrateTenantAndAPIKey(t *testing.T) {
	admin := testdb.AdminDSN()
	if admin == "off" {
		t.Skipf("%s=off: PostgreSQL tests skipped", testdb.PostgresEnv)
	}
	direct := newDatabase(t, admin)
	host, port := proctest.HostPort(admin)
	b, err := proctest.NewPgBouncer(t, host, port)
	needProgram(t, "PgBouncer", err)
	u, _ := url.Parse(direct)
	env := proctest.Env{Bin: bin, DSN: b.DSN(strings.TrimPrefix(u.Path, "/"))}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("PgBouncer's log:\n%s", tailLines(b.Log(), 40))
		}
	})

	var wg sync.WaitGroup
	outs := make([]string, 3)
	errs := make([]error, 3)
	for i := range outs {
		wg.Go(func() {
			var stderr string
			outs[i], stderr, errs[i] = env.RunErr("migrate")
			outs[i] += stderr
		})
	}
	wg.Wait()
	for i := range outs {
		require.NoError(t, errs[i], "migrate %d through PgBouncer:\n%s", i+1, outs[i])
	}
	for _, args := range [][]string{{"migrate"}, {"tenant", "create", "acme"}, {"apikey", "create", "--tenant", "acme", "--principal", "agent"}} {
		out, stderr, err := env.RunErr(args...)
		require.NoError(t, err, "idemgate %s through PgBouncer:\n%s%s", strings.Join(args, " "), out, stderr)
		for _, code := range []string{"SQLSTATE 42P05", "SQLSTATE 26000", "prepared statement"} {
			assert.NotContains(t, out+stderr, code, "idemgate %s", strings.Join(args, " "))
		}
		if args[0] == "apikey" {
			assert.Contains(t, out, "idg_", "apikey create printed no key")
		}
	}

	db, _, err := models.Open(context.Background(), direct)
	require.NoError(t, err)
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	var version, advisory int
	require.NoError(t, db.Raw("SELECT MAX(version) FROM schema_migrations").Scan(&version).Error)
	assert.Equal(t, models.SchemaVersion(), version)
	require.NoError(t, db.Raw("SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND d.datname = current_database()").Scan(&advisory).Error)
	assert.Zero(t, advisory, "advisory locks left on the server's sessions after the commands ended")
}
