package process_test

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The database stops mid-run: the gateway fails closed (503 ledger-unavailable with
// Retry-After, /readyz 503, nothing sent downstream) and resumes by itself when it returns.
func TestDatabaseStoppedMidRunFailsClosedAndRecovers(t *testing.T) {
	pg, err := proctest.NewPostgres(t)
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("cannot run a private PostgreSQL on this machine (CI fails instead): %v", err)
		}
		t.Fatalf("CI must be able to run a private PostgreSQL: %v", err)
	}
	s := newStackOn(t, pg.DSN, stackOptions{})
	a := s.serve(t, "A")

	first := s.mustPost(t, a.URL, "before-outage", "tickets.create", ticketParams, nil)
	require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
	sent := len(s.sb.Requests(""))

	outage := len(a.Output()) // what the gateway says from here on is about the outage
	require.NoError(t, pg.Stop())
	stoppedAt := time.Now()

	// Every check below happens while the database is down.
	r := s.mustPost(t, a.URL, "during-outage", "tickets.create", ticketParams, nil)
	assert.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	assert.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
	assert.Equal(t, "/problems/ledger-unavailable", r.obj(t)["type"])
	assert.NotEmpty(t, r.Header.Get("Retry-After"), "503 carries Retry-After")

	// A replay of the operation recorded before the outage cannot be answered either.
	replay := s.mustPost(t, a.URL, "before-outage", "tickets.create", ticketParams, nil)
	assert.Equal(t, http.StatusServiceUnavailable, replay.Status, "%s", replay.Body)

	ready, err := s.do(http.MethodGet, a.URL+"/readyz", nil, "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, ready.Status, "%s", ready.Body)
	health, err := s.do(http.MethodGet, a.URL+"/healthz", nil, "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, health.Status, "the process lives")

	// Keep the outage up until the dispatcher and every sweep that runs meanwhile has met it:
	// each has tried the ledger, failed, and kept going (each says so once per outage).
	eventually(t, 60*time.Second, "every background job to meet the outage", func() (bool, string) {
		r := s.mustPost(t, a.URL, "during-outage", "tickets.create", ticketParams, nil)
		require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
		return logged(a.Output()[outage:], outageJobs, "failed; will keep trying")
	})
	assert.Equal(t, sent, len(s.sb.Requests("")), "nothing was sent downstream during the outage")
	assert.False(t, a.Exited(), "the gateway keeps running through the outage")

	require.NoError(t, pg.Start())
	backAt := time.Now()
	tookReady := eventually(t, 60*time.Second, "/readyz 200", func() (bool, string) {
		r, err := s.do(http.MethodGet, a.URL+"/readyz", nil, "")
		if err != nil {
			return false, err.Error()
		}
		return r.Status == http.StatusOK, string(r.Body)
	})
	var after reply
	tookPost := eventually(t, 60*time.Second, "a POST to be answered", func() (bool, string) {
		after = s.mustPost(t, a.URL, "during-outage", "tickets.create", ticketParams, nil)
		return after.Status != http.StatusServiceUnavailable, string(after.Body)
	})
	// Every 503 said nothing was recorded: the first real answer creates the operation.
	require.Equal(t, http.StatusCreated, after.Status, "%s", after.Body)
	t.Logf("database back → /readyz 200 in %s, → first POST 201 in %s (outage lasted %s)",
		tookReady.Round(time.Millisecond), (tookReady + tookPost).Round(time.Millisecond), backAt.Sub(stoppedAt).Round(time.Millisecond))
	assert.Equal(t, "SUCCEEDED", after.obj(t)["state"])
	assert.EqualValues(t, 1, after.obj(t)["attempts"])
	assert.Equal(t, 2, s.sb.Committed("tickets"), "one ticket before the outage, one after")

	replay = s.mustPost(t, a.URL, "before-outage", "tickets.create", ticketParams, nil)
	assert.Equal(t, http.StatusOK, replay.Status, "%s", replay.Body)
	assert.Equal(t, first.id(), replay.id())

	// A short outage while an attempt is in flight: the executor keeps trying to record the
	// outcome while its lease holds (or, failing that, recovery reconciles it). One ticket, one
	// request, either way.
	s.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Path: "/tickets", Method: "POST", Count: 1, Delay: 800 * time.Millisecond})
	inflight := s.mustPost(t, a.URL, "in-flight", "tickets.create", ticketParams, wait0)
	require.Equal(t, http.StatusAccepted, inflight.Status, "%s", inflight.Body)
	eventually(t, 30*time.Second, "the attempt to reach the downstream", func() (bool, string) {
		return s.count("/tickets", "POST") == 3, ""
	})
	require.NoError(t, pg.Stop())
	// The outage outlasts the rest of the downstream's delay: the ticket is made, and its
	// answer comes back, while the ledger is down.
	eventually(t, 30*time.Second, "the downstream to make the ticket", func() (bool, string) {
		return s.sb.Committed("tickets") == 3, ""
	})
	require.NoError(t, pg.Start())
	s.waitState(t, a.URL, inflight.id(), "SUCCEEDED", 60*time.Second)
	assert.Equal(t, 3, s.sb.Committed("tickets"))
	assert.Equal(t, 3, s.count("/tickets", "POST"), "the in-flight attempt was not sent again")
	t.Logf("outage during an attempt: timeline %v", eventTypes(s.events(t, a.URL, inflight.id())))
}

// outageJobs are the background loops of serve that meet a ledger outage within seconds
// (retention runs once a minute), as their log lines name them.
var outageJobs = []string{"dispatcher: claim", "lease reaper", "reconciler", "escalator", "webhook publisher"}

// logged reports whether out holds, for every job, its line ending in what; the status names
// the jobs not heard from yet.
func logged(out string, jobs []string, what string) (bool, string) {
	var missing []string
	for _, j := range jobs {
		if !strings.Contains(out, j+" "+what) {
			missing = append(missing, j)
		}
	}
	return len(missing) == 0, "not yet: " + strings.Join(missing, ", ")
}
