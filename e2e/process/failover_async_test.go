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

// PostgreSQL fails over to an asynchronous standby that had fallen behind: operations the old
// primary acknowledged are not on the new one. That is what asynchronous replication allows
// (docs/OPERATIONS.md says so); what idemgate must still do is keep the agents' retries of
// those keys from paying twice wherever the downstream can tell. The agents re-drive every
// key they were answered before the failure, with the same params, as a workflow engine
// re-drives its steps after an incident.
func TestFailoverToAsynchronousStandbyAgentsRetryLostOperations(t *testing.T) {
	primary, standby := replicated(t, false)
	s := newStackOn(t, proctest.MultiHostDSN(primary, standby), stackOptions{})
	a := s.serve(t, "A")

	load := startAgents(t, s, a.URL, "async", 6)
	load.waitAcknowledged(t, 30, time.Time{})
	// The standby stops receiving (a partition between the two, a slow link): from now on the
	// primary acknowledges commits that only it has.
	require.NoError(t, standby.Detach())
	detachedAt := time.Now()
	load.waitAcknowledged(t, 30, detachedAt)
	require.NoError(t, primary.Kill())
	lostAt := time.Now()
	require.NoError(t, standby.Promote())
	promotedAt := time.Now()
	load.waitAcknowledged(t, 30, promotedAt)
	load.stop()
	load.requireNoTransportErrors(t)
	answers, _ := load.snapshot()
	s.readFrom(t, standby.DSN)
	settled(t, s)

	// The agents retry every key answered before the primary was lost.
	retried := map[string]reply{}
	var lost, kept []answer
	for key, ans := range answers {
		if ans.Status/100 != 2 || !ans.At.Before(lostAt) {
			continue
		}
		r := s.mustPost(t, a.URL, key, ans.Tool, loadParams(ans.Tool, key), map[string]string{"Prefer": "wait=10"})
		retried[key] = r
		switch {
		case r.id() == ans.ID:
			// 200 replayed, or 409 for one the standby had as RUNNING: the reaper made it
			// UNKNOWN, and an email cannot be reconciled, so it waits for a reviewer.
			require.Contains(t, []int{http.StatusOK, http.StatusConflict}, r.Status, "%s: %s", key, r.Body)
			kept = append(kept, ans)
		case r.Status == http.StatusCreated || r.Status == http.StatusAccepted:
			require.NotEqual(t, ans.ID, r.id(), "%s: a creation names a new operation", key)
			lost = append(lost, ans)
		default:
			t.Fatalf("%s retried: unexpected %d: %s", key, r.Status, r.Body)
		}
	}
	t.Logf("of %d operations acknowledged before the primary was lost, %d were on the standby and %d were lost with the primary",
		len(kept)+len(lost), len(kept), len(lost))
	require.NotEmpty(t, lost, "the premise: the standby missed acknowledged commits")
	require.NotEmpty(t, kept, "the premise: the standby had the earlier ones")
	settled(t, s)
	nothingRunningPastLease(t, s)
	effects := effectsByKey(t, s)

	lostOf := func(tool string) []answer {
		var out []answer
		for _, ans := range lost {
			if ans.Tool == tool {
				out = append(out, ans)
			}
		}
		return out
	}
	t.Run("records the standby had are replayed and run nothing", func(t *testing.T) {
		for _, ans := range kept {
			if r := retried[ans.Key]; r.Status == http.StatusOK {
				assert.Equal(t, "true", r.Header.Get("Idempotent-Replayed"), "%s", ans.Key)
			}
			assert.LessOrEqual(t, effects[ans.Key], 1, "%s (%s)", ans.Key, ans.Tool)
		}
	})
	t.Run("downstreams that honour keys see one effect per key", func(t *testing.T) {
		// The downstream key is derived from tenant and key (docs/STATES.md): the re-created
		// operation sends the key the downstream already knows, and it answers with the ticket
		// it made the first time.
		tickets := lostOf("tickets.create")
		require.NotEmpty(t, tickets)
		for _, ans := range tickets {
			op, err := s.ledger.Get(t.Context(), s.tenant, retried[ans.Key].id())
			require.NoError(t, err)
			require.Equal(t, models.StateSucceeded, op.State, "%s ran again", ans.Key)
			assert.Equal(t, 1, effects[ans.Key], "%s: the retry of a lost record sent the key the downstream already knew", ans.Key)
		}
	})
	t.Run("downstreams without key support run a lost operation again", func(t *testing.T) {
		// What asynchronous replication costs: the record that the refund or the email was
		// made is gone, the agent's retry makes the operation anew, and a downstream that
		// takes no key cannot tell the repeat from a new request. Synchronous replication
		// (the other failover tests) is what prevents this; so does a reconcile look-up by
		// {{.DownstreamKey}}, which idemgate then makes before sending (e2e/restore_test.go):
		// this suite's refunds look up by operation id, which a re-created operation does not
		// share.
		n := 0
		for _, tool := range []string{"refunds.issue", "email.send"} {
			for _, ans := range lostOf(tool) {
				op, err := s.ledger.Get(t.Context(), s.tenant, retried[ans.Key].id())
				require.NoError(t, err)
				if op.State == models.StateSucceeded {
					assert.Equal(t, 2, effects[ans.Key], "%s (%s)", ans.Key, tool)
					n++
				}
			}
		}
		require.NotZero(t, n)
		t.Logf("%d operations of tools without key support were lost and ran a second time", n)
	})
	assert.False(t, a.Exited(), "the gateway process never restarted")
}
