package process_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two replicas on one schema and 40 concurrent duplicates of one new key, 20 to each: one
// side effect, one operation, one answer; duplicates waiting on the replica that did not run
// the attempt wake when the other one records the outcome.
func TestTwoReplicasFortyConcurrentDuplicates(t *testing.T) {
	fortyConcurrentDuplicates(t, newStack(t, stackOptions{}))
}

// fortyConcurrentDuplicates is TestTwoReplicasFortyConcurrentDuplicates on the stack s, whose
// replicas have a LISTEN connection.
func fortyConcurrentDuplicates(t *testing.T, s *stack) {
	procs := []*proctest.Process{s.serve(t, "A"), s.serve(t, "B")}
	replicas := []string{procs[0].URL, procs[1].URL}
	// The one attempt takes 500 ms, so every duplicate arrives while it runs.
	s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Path: "/tickets", Method: "POST", Count: 1, Delay: 500 * time.Millisecond})

	const n = 40
	replies := make([]reply, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i], errs[i] = s.post(replicas[i%2], "workflow-1:create-ticket", "tickets.create", ticketParams,
				map[string]string{"Prefer": "wait=10"})
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "request %d", i)
	}

	assert.Equal(t, 1, s.sb.Committed("tickets"), "exactly one side effect")
	assert.Equal(t, 1, s.count("/tickets", "POST"), "one request downstream")
	var ops int64
	require.NoError(t, s.ledger.DB().Model(&models.Operation{}).Count(&ops).Error)
	assert.EqualValues(t, 1, ops, "one operation")

	var created *reply
	createdOn := -1
	statuses := map[int]int{}
	for i := range replies {
		statuses[replies[i].Status]++
		if replies[i].Status == http.StatusCreated {
			created, createdOn = &replies[i], i%2
		}
	}
	t.Logf("answers by status: %v", statuses)
	require.Equal(t, 1, statuses[http.StatusCreated], "one request created the operation")
	require.NotNil(t, created)
	id := created.id()
	require.NotEmpty(t, id)
	var first map[string]any
	require.NoError(t, json.Unmarshal(created.Body, &first))
	require.Equal(t, "SUCCEEDED", first["state"])
	completed, err := time.Parse(time.RFC3339Nano, first["completed_at"].(string))
	require.NoError(t, err)

	var otherWake []time.Duration
	for i, r := range replies {
		assert.Equal(t, id, r.id(), "request %d names the same operation: %s", i, r.Body)
		switch r.Status {
		case http.StatusCreated:
		case http.StatusOK:
			assert.Equal(t, "true", r.Header.Get("Idempotent-Replayed"), "request %d", i)
			var got map[string]any
			require.NoError(t, json.Unmarshal(r.Body, &got))
			assert.Equal(t, "SUCCEEDED", got["state"])
			assert.Equal(t, first["result"], got["result"], "request %d replays the same result", i)
			assert.True(t, bytes.Equal(created.Body, r.Body), "request %d: the replay is the recorded operation:\n%s\n%s", i, created.Body, r.Body)
			if i%2 != createdOn {
				otherWake = append(otherWake, r.At.Sub(completed))
			}
		case http.StatusConflict:
			p := r.obj(t)
			assert.Equal(t, "/problems/operation-in-progress", p["type"], "request %d", i)
			assert.Equal(t, false, p["safe_to_retry_with_new_key"])
		default:
			t.Errorf("request %d: unexpected %d: %s", i, r.Status, r.Body)
		}
	}
	require.NotEmpty(t, otherWake, "duplicates on the other replica")
	t.Logf("duplicates on the replica that did not run the attempt (%d) answered %s (p50) / %s (max) after the outcome was recorded; min %s",
		len(otherWake), percentile(otherWake, 0.5).Round(time.Millisecond), percentile(otherWake, 1).Round(time.Millisecond),
		percentile(otherWake, 0).Round(time.Millisecond))
	// Waiters poll from every 250 ms as a fallback; LISTEN/NOTIFY should wake them well before
	// their 10 s wait ran out, and typically before their next poll.
	ended := s.waitsEnded(t, procs[1-createdOn])
	inProgress := 0
	for i, r := range replies {
		if i%2 != createdOn && r.Status == http.StatusConflict {
			inProgress++
		}
	}
	assert.EqualValues(t, inProgress, ended[jobs.WaitDeadline], "only the duplicates answered 409 waited out their wait")
	assert.Greater(t, ended[jobs.WaitNotified], ended[jobs.WaitPolled],
		"the other replica's duplicates were woken by the ledger's notification, most before their next poll: %v", ended)
}

// waitsEnded reads idemgate_waits_total of the gateway p from its metrics listener, by what
// ended the waits.
func (s *stack) waitsEnded(t *testing.T, p *proctest.Process) map[string]float64 {
	t.Helper()
	require.NotEmpty(t, p.MetricsURL, "%s serves no metrics", p.Name)
	r, err := s.do(http.MethodGet, p.MetricsURL, nil, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status)
	out := map[string]float64{}
	for _, by := range []string{jobs.WaitNotified, jobs.WaitPolled, jobs.WaitDeadline, jobs.WaitCancelled} {
		re := regexp.MustCompile(`(?m)^idemgate_waits_total\{ended_by="` + by + `"\} ([0-9.e+-]+)$`)
		if m := re.FindSubmatch(r.Body); m != nil {
			v, err := strconv.ParseFloat(string(m[1]), 64)
			require.NoError(t, err)
			out[by] = v
		}
	}
	return out
}

// A single duplicate waiting on replica B for an attempt running on replica A, measured a few
// times: with LISTEN/NOTIFY it wakes within milliseconds of A's commit instead of at its next
// 250 ms poll.
func TestWaiterOnOtherReplicaWakesOnNotify(t *testing.T) {
	s := newStack(t, stackOptions{})
	a, b := s.serve(t, "A"), s.serve(t, "B")
	var lat []time.Duration
	for i := range 7 {
		key := "notify-" + string(rune('a'+i))
		s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Path: "/tickets", Method: "POST", Count: 1, Delay: 400 * time.Millisecond})
		first := s.mustPost(t, a.URL, key, "tickets.create", ticketParams, wait0)
		require.Equal(t, http.StatusAccepted, first.Status, "%s", first.Body)
		dup := s.mustPost(t, b.URL, key, "tickets.create", ticketParams, map[string]string{"Prefer": "wait=10"})
		require.Equal(t, http.StatusOK, dup.Status, "%s", dup.Body)
		got := dup.obj(t)
		completed, err := time.Parse(time.RFC3339Nano, got["completed_at"].(string))
		require.NoError(t, err)
		lat = append(lat, dup.At.Sub(completed))
	}
	t.Logf("wake-up latency of a duplicate on the other replica after the commit: p50 %s, min %s, max %s (all: %v)",
		percentile(lat, 0.5).Round(time.Millisecond), percentile(lat, 0).Round(time.Millisecond),
		percentile(lat, 1).Round(time.Millisecond), lat)
	// Polling alone would find the outcome at the next poll; LISTEN/NOTIFY wakes the waiter as
	// A commits. A poll may still win the race now and then, so: most of the seven, as the
	// median did when this was measured in milliseconds.
	ended := s.waitsEnded(t, b)
	assert.GreaterOrEqual(t, ended[jobs.WaitNotified], 4.0, "woken by the notification: %v", ended)
	assert.Zero(t, ended[jobs.WaitDeadline], "no wait ran out: %v", ended)
	assert.Equal(t, 7, s.sb.Committed("tickets"))
}
