package process_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// PostgreSQL fails over to a synchronous standby under load (docs/CLI.md): the primary is killed
// (SIGKILL of every server process, as the loss of its host), the standby promoted, and the
// load goes on against the one gateway, whose URL names both hosts. The gateway fails closed
// while no primary answers, finds the promoted one by itself, and loses nothing it
// acknowledged.
func TestFailoverToSynchronousStandbyLosesNothingAcknowledged(t *testing.T) {
	failover(t, "kill", func(primary *proctest.Postgres) error { return primary.Kill() })
}

// A planned switchover leaves the old primary running: operators fence it read-only
// (default_transaction_read_only) and promote the standby. Connections to the old primary
// still work, but it takes no writes: the gateway must leave it on its own, pooled and LISTEN
// connections alike, instead of failing every request on a connection it already holds.
func TestSwitchoverLeavesTheOldPrimaryThatStillRuns(t *testing.T) {
	failover(t, "switchover", func(primary *proctest.Postgres) error {
		return primary.Exec("ALTER SYSTEM SET default_transaction_read_only = on", "SELECT pg_reload_conf()")
	})
}

// failover runs a steady load through one gateway, takes the primary away with lose, waits,
// promotes the synchronous standby, and checks what the gateway did through it all.
func failover(t *testing.T, name string, lose func(primary *proctest.Postgres) error) {
	primary, standby := replicated(t, true)
	s := newStackOn(t, proctest.MultiHostDSN(primary, standby), stackOptions{})
	a := s.serve(t, "A")
	eventually(t, 15*time.Second, "the gateway to LISTEN on the primary", func() (bool, string) {
		return listenersOn(t, primary) == 1, ""
	})

	load := startAgents(t, s, a.URL, name, 6)
	load.waitAcknowledged(t, 60, time.Time{})

	require.NoError(t, lose(primary))
	lostAt := time.Now()
	logBefore := len(a.Output())
	// While no primary answers: the API fails closed and /readyz says so, for several rounds
	// of every job.
	key := name + "-during-gap"
	var refusedAt time.Time // when the gateway was seen to refuse: from here, no server takes writes
	eventually(t, 10*time.Second, "a 503 ledger-unavailable", func() (bool, string) {
		r := s.mustPost(t, a.URL, key, "tickets.create", loadParams("tickets.create", key), nil)
		if r.Status != http.StatusServiceUnavailable {
			return false, string(r.Body)
		}
		refusedAt = r.At
		assert.Equal(t, "/problems/ledger-unavailable", r.obj(t)["type"])
		assert.NotEmpty(t, r.Header.Get("Retry-After"))
		return true, ""
	})
	eventually(t, 10*time.Second, "/readyz 503", func() (bool, string) {
		r, err := s.do(http.MethodGet, a.URL+"/readyz", nil, "")
		require.NoError(t, err)
		return r.Status == http.StatusServiceUnavailable, string(r.Body)
	})
	time.Sleep(time.Until(lostAt.Add(2 * time.Second))) // the gap itself: nothing to wait for
	gapLog := a.Output()[logBefore:]

	// From the promote command on: pg_ctl promote -w returns some time after the promoted
	// server began to take writes.
	promotedAt := time.Now()
	require.NoError(t, standby.Promote())
	eventually(t, 30*time.Second, "/readyz 200 on the promoted standby", func() (bool, string) {
		r, err := s.do(http.MethodGet, a.URL+"/readyz", nil, "")
		if err != nil {
			return false, err.Error()
		}
		return r.Status == http.StatusOK, string(r.Body)
	})
	readyAfter := time.Since(promotedAt)
	// A bound, not a measurement (the figures are logged below): a gateway stuck on the old
	// primary never gets there, one that moved does within seconds.
	eventually(t, 30*time.Second, "operations acknowledged after the promotion", func() (bool, string) {
		return load.acknowledgedSince(promotedAt) >= 60, ""
	})
	load.stop()
	load.requireNoTransportErrors(t)
	answers, refused := load.snapshot()
	firstAfter := time.Time{}
	for _, ans := range answers {
		if ans.Status/100 == 2 && ans.At.After(promotedAt) && (firstAfter.IsZero() || ans.At.Before(firstAfter)) {
			firstAfter = ans.At
		}
	}
	t.Logf("%d keys answered, %d answers 503 during the gap; pg_ctl promote → /readyz 200 in %s, → first new operation acknowledged in %s",
		len(answers), len(refused), readyAfter.Round(time.Millisecond), firstAfter.Sub(promotedAt).Round(time.Millisecond))
	eventually(t, 15*time.Second, "the LISTEN connection to move to the promoted standby", func() (bool, string) {
		return listenersOn(t, standby) == 1, ""
	})

	// From here on, read the new primary alone: the test's own pool, which has only read,
	// may still hold connections to an old primary that runs on.
	s.readFrom(t, standby.DSN)
	settled(t, s)
	nothingRunningPastLease(t, s)

	t.Run("every acknowledged operation is on the new primary with its state", func(t *testing.T) {
		acknowledged := 0
		for key, ans := range answers {
			if ans.Status/100 != 2 {
				continue
			}
			acknowledged++
			op, err := s.ledger.Get(t.Context(), s.tenant, ans.ID)
			if !assert.NoError(t, err, "%s answered %d (%s) is missing", key, ans.Status, ans.ID) {
				continue
			}
			assert.Equal(t, key, op.Key)
			if models.State(ans.State).Terminal() {
				assert.Equal(t, ans.State, string(op.State), "%s", key)
			}
		}
		require.Greater(t, acknowledged, 120)
	})
	t.Run("at most one effect per key, exactly one per success", func(t *testing.T) {
		effects := effectsByKey(t, s)
		var ops []models.Operation
		require.NoError(t, s.ledger.DB().Where("tenant = ?", s.tenant).Find(&ops).Error)
		for _, op := range ops {
			if op.State == models.StateSucceeded {
				assert.Equal(t, 1, effects[op.Key], "%s (%s) succeeded", op.Key, op.Tool)
			}
		}
		for key, n := range effects {
			assert.LessOrEqual(t, n, 1, "%s", key)
		}
	})
	t.Run("nothing was sent downstream that the ledger did not record first", func(t *testing.T) {
		// Synchronous replication keeps every claim: each request the downstream received
		// is an attempt on the new primary, claimed before the primary was lost or after the
		// promotion, never in the gap, and all by the one gateway process.
		sent := 0
		for _, req := range s.sb.Requests("") {
			if req.Method != http.MethodPost {
				continue
			}
			sent++
			var at models.Attempt
			id := req.Header.Get("X-Request-Id")
			if !assert.NoError(t, s.ledger.DB().Where("id = ?", id).Take(&at).Error, "request %s %s is no recorded attempt", req.Path, id) {
				continue
			}
			// (From the first 503, not from lose's return: a reload reaches the server's
			// sessions a few milliseconds after pg_reload_conf() returns.)
			assert.True(t, at.StartedAt.Before(refusedAt) || at.StartedAt.After(promotedAt),
				"attempt %s was claimed at %s, between the first refusal (%s) and the promotion (%s)", id, at.StartedAt, refusedAt, promotedAt)
			assert.Equal(t, a.Worker, at.Worker, "one gateway process throughout")
		}
		t.Logf("%d requests downstream, each a recorded attempt", sent)
	})
	t.Run("the jobs pause quietly while no primary answers", func(t *testing.T) {
		// Each loop polls every 50 ms to 1 s: one that logged each failure would write a line
		// per round. They log once per outage; what is logged per attempt in flight (its
		// outcome could not be recorded) is bounded by the six agents' attempts.
		got := complaints(gapLog)
		t.Logf("warnings and errors besides failed requests in the 2 s gap, by message: %v", got)
		for msg, n := range got {
			assert.LessOrEqual(t, n, 6, "%q: an error storm in the logs:\n%s", msg, tailLines(gapLog, 30))
		}
	})
	assert.False(t, a.Exited(), "the gateway process never restarted")
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
