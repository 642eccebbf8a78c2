package process_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// PostgreSQL as operators run it for high availability: two nodes under Patroni with etcd,
// in synchronous mode, and one gateway whose URL names both (target_session_attrs=read-write).
// Under a steady load of new operations, first a planned switchover (patronictl switchover),
// then the loss of the primary (SIGKILL of its postmaster): each time Patroni makes the
// synchronous standby the primary, and the gateway follows by itself, without a restart.
// Nothing acknowledged is lost, nothing runs twice, and every operation ends terminal or in a
// review.
func TestPatroniSwitchoverAndPrimaryKilledUnderLoad(t *testing.T) {
	cluster, err := proctest.NewPatroni(t, 2)
	needProgram(t, "Patroni with etcd", err)
	t.Logf("Patroni: %s", cluster.Status())
	s := newStackOn(t, cluster.DSN(), stackOptions{})
	a := s.serve(t, "A")

	var all []patroniPhase
	all = append(all, underPatroni(t, s, a, cluster, "switchover", func(leader, standby *proctest.PatroniNode) error {
		return cluster.Switchover(leader.Name, standby.Name)
	}))
	// The old primary comes back as the synchronous standby: the next loss is covered too.
	require.NoError(t, cluster.WaitHealthy(90*time.Second), "the old primary rejoins as a standby")
	all = append(all, underPatroni(t, s, a, cluster, "kill", func(leader, _ *proctest.PatroniNode) error {
		return leader.KillPostmaster()
	}))

	settled(t, s)
	nothingRunningPastLease(t, s)
	var ops []models.Operation
	require.NoError(t, s.ledger.DB().Where("tenant = ?", s.tenant).Find(&ops).Error)
	byKey := map[string]models.Operation{}
	for _, op := range ops {
		byKey[op.Key] = op
		assert.True(t, op.State.Terminal() || op.ReviewID != nil, "%s ends %s, neither terminal nor in a review", op.Key, op.State)
	}
	effects := effectsByKey(t, s)
	for _, op := range ops {
		if op.State == models.StateSucceeded {
			assert.Equal(t, 1, effects[op.Key], "%s (%s) succeeded", op.Key, op.Tool)
		}
	}
	duplicates := 0
	for key, n := range effects {
		if n > 1 {
			duplicates++
			t.Errorf("%s: %d side effects", key, n)
		}
	}
	for _, ph := range all {
		acknowledged, lost := 0, 0
		for key, ans := range ph.answers {
			if ans.Status/100 != 2 {
				continue
			}
			acknowledged++
			op, ok := byKey[key]
			if !ok || op.ID != ans.ID {
				lost++
				t.Errorf("%s: %s answered %d (%s), not in the ledger after it", ph.name, key, ans.Status, ans.ID)
				continue
			}
			if models.State(ans.State).Terminal() {
				assert.Equal(t, ans.State, string(op.State), "%s", key)
			}
		}
		require.Greater(t, acknowledged, 60, "%s: a load worth the name", ph.name)
		t.Logf("Patroni %s: acknowledged %d, refused during the gap %d (503), lost %d, duplicates %d; "+
			"from the %s: first 503 after %.1f s, last after %.1f s, first success after the gap %.1f s (the gap: %.1f s)",
			ph.name, acknowledged, ph.refused, lost, duplicates, ph.name, ph.firstRefusal.Seconds(), ph.lastRefusal.Seconds(),
			ph.resume.Seconds(), (ph.resume - ph.firstRefusal).Seconds())
	}
	assert.False(t, a.Exited(), "the gateway process never restarted")
}

// patroniPhase is what one loss of the primary did to the load.
type patroniPhase struct {
	name    string
	answers map[string]answer
	refused int
	// resume is the time from the loss (the kill, or the switchover command) to the first
	// operation acknowledged after the last 503; firstRefusal and lastRefusal, to the first
	// and the last 503. A switchover's gap begins some time after its command: patronictl
	// checks the cluster, and the leader first waits for the standby to catch up.
	resume, firstRefusal, lastRefusal time.Duration
}

// underPatroni runs a steady load through the gateway a, takes the primary away with lose,
// and waits until Patroni has promoted the synchronous standby and the gateway acknowledges
// new operations again.
func underPatroni(t *testing.T, s *stack, a *proctest.Process, cluster *proctest.Patroni, name string,
	lose func(leader, standby *proctest.PatroniNode) error) patroniPhase {
	t.Helper()
	leader, err := cluster.Leader()
	require.NoError(t, err)
	standby, err := cluster.SyncStandby()
	require.NoError(t, err)
	load := startAgents(t, s, a.URL, "patroni-"+name, 6)
	load.waitAcknowledged(t, 40, time.Time{})

	lostAt := time.Now()
	require.NoError(t, lose(leader, standby), "%s of %s", name, leader.Name)
	promoted, err := cluster.WaitLeader(60*time.Second, leader.Name)
	require.NoError(t, err, "Patroni promotes a standby")
	assert.Equal(t, standby.Name, promoted.Name, "the synchronous standby is promoted")
	t.Logf("%s: %s leads after %s (%s)", name, promoted.Name, time.Since(lostAt).Round(time.Millisecond), cluster.Status())
	eventually(t, 60*time.Second, "/readyz 200 on the new primary", func() (bool, string) {
		r, err := s.do(http.MethodGet, a.URL+"/readyz", nil, "")
		if err != nil {
			return false, err.Error()
		}
		return r.Status == http.StatusOK, string(r.Body)
	})
	load.waitAcknowledged(t, 60, time.Now())
	eventually(t, 15*time.Second, "the LISTEN connection to move to the new primary", func() (bool, string) {
		return listenersAt(t, promoted.DSN()) == 1, ""
	})
	load.stop()
	load.requireNoTransportErrors(t)

	ph := patroniPhase{name: name}
	var refusals []time.Time
	ph.answers, refusals = load.snapshot()
	var last time.Time
	for _, at := range refusals {
		if at.After(lostAt) {
			ph.refused++
			if ph.firstRefusal == 0 {
				ph.firstRefusal = at.Sub(lostAt)
			}
			if at.After(last) {
				last = at
			}
		}
	}
	if !last.IsZero() {
		ph.lastRefusal = last.Sub(lostAt)
	} else {
		last = lostAt
	}
	var first time.Time
	for _, ans := range ph.answers {
		if ans.Status/100 == 2 && ans.At.After(last) && (first.IsZero() || ans.At.Before(first)) {
			first = ans.At
		}
	}
	ph.resume = first.Sub(lostAt)
	return ph
}
