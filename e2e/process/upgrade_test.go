package process_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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

// previousRelease is the release this one must run beside during a rolling upgrade: the newest
// commit of the release before it (schema 22, the first that records what each step serves).
// Move it forward when a release is cut.
const previousRelease = "faee8bcfe896aae749ccedd38fc7ed6889d81a06"

// buildPreviousRelease builds idemgate at previousRelease from this repository's history. A
// checkout without that history (a source archive) skips the test on a workstation and fails it
// in CI.
func buildPreviousRelease(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	src := t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", previousRelease)
	var tarball, stderr bytes.Buffer
	archive.Stdout, archive.Stderr = &tarball, &stderr
	if err := archive.Run(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("the previous release %s is not in this checkout's history: %v %s", previousRelease[:7], err, stderr.String())
		}
		t.Fatalf("git archive %s (CI must run the upgrade test): %v\n%s", previousRelease[:7], err, stderr.String())
	}
	untar := exec.Command("tar", "-x", "-C", src)
	untar.Stdin = &tarball
	out, err := untar.CombinedOutput()
	require.NoError(t, err, "%s", out)
	prev := filepath.Join(t.TempDir(), "idemgate-previous")
	build := exec.Command("go", "build", "-o", prev, "-ldflags", "-X github.com/idemgate/idemgate/internal/buildinfo.version=previous", "./cmd/idemgate")
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err = build.CombinedOutput()
	require.NoError(t, err, "building the previous release: %s", out)
	return prev
}

// TestRollingUpgrade: two replicas of the previous release serve a ledger of its schema under a
// steady load of new operations and concurrent duplicates sent to old and new replicas at once.
// This release's `migrate` runs in the middle (its index built CONCURRENTLY while writers go on),
// the old replicas stay ready, a replica of this release joins, and an old one is stopped, as an
// orchestrator replaces them one at a time. No request is answered 5xx other than the 503s
// agents retry, every key has one effect at the downstream, and every operation reads the same
// through both releases.
func TestRollingUpgrade(t *testing.T) {
	prev := buildPreviousRelease(t)
	s := newStackWith(t, testdb.DSN(t, models.Postgres), stackOptions{}, prev)
	old := proctest.Env{Bin: prev, DSN: s.env.DSN}
	current := s.env
	current.Bin = bin
	s.env = old
	oldA, oldB := s.serve(t, "old-A"), s.serve(t, "old-B")
	assert.Contains(t, old.Run(t, "version"), "ledger schema 22", "the previous release knows schema 22")

	load := []*agents{startAgents(t, s, oldA.URL, "a", 4), startAgents(t, s, oldB.URL, "b", 4)}
	start := time.Now()
	load[0].waitAcknowledged(t, 50, start)

	// Duplicates: one key sent to an old replica and (once it runs) a new one at the same time.
	var dupMu sync.Mutex
	dupStatus := map[string][]int{}
	dupTargets := []string{oldA.URL, oldB.URL}
	duplicate := func(i int) {
		key := fmt.Sprintf("dup-%04d", i)
		dupMu.Lock()
		targets := append([]string(nil), dupTargets...)
		dupMu.Unlock()
		var wg sync.WaitGroup
		for _, base := range targets[len(targets)-2:] {
			wg.Go(func() {
				r, err := s.post(base, key, "tickets.create", loadParams("tickets.create", key), map[string]string{"Prefer": "wait=5"})
				dupMu.Lock()
				defer dupMu.Unlock()
				if err != nil {
					dupStatus[key] = append(dupStatus[key], -1)
					return
				}
				dupStatus[key] = append(dupStatus[key], r.Status)
			})
		}
		wg.Wait()
	}
	stopDup := make(chan struct{})
	dupDone := make(chan struct{})
	go func() {
		defer close(dupDone)
		for i := 0; ; i++ {
			select {
			case <-stopDup:
				return
			default:
			}
			duplicate(i)
		}
	}()

	out := current.Run(t, "migrate")
	t.Logf("migrate: %s", strings.TrimSpace(out))
	assert.Contains(t, current.Run(t, "version"), fmt.Sprintf("ledger schema %d", models.SchemaVersion()))
	for _, p := range []*proctest.Process{oldA, oldB} {
		r, err := s.do(http.MethodGet, p.URL+"/readyz", nil, "")
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, r.Status, "%s: an old replica stays ready on the migrated ledger: %s", p.Name, r.Body)
	}

	s.env = current
	newC := s.serve(t, "new-C")
	dupMu.Lock()
	dupTargets = append(dupTargets, newC.URL) // duplicates now go to old-B and new-C at once
	dupMu.Unlock()
	load = append(load, startAgents(t, s, newC.URL, "c", 4))
	load[2].waitAcknowledged(t, 50, time.Now())
	load[0].stop()
	oldA.Terminate(t, 10*time.Second)
	load[1].waitAcknowledged(t, 20, time.Now())

	close(stopDup)
	<-dupDone
	for _, a := range load[1:] {
		a.stop()
	}
	settled(t, s)

	effects := effectsByKey(t, s)
	ids := map[string]string{}
	for _, a := range load {
		a.requireNoTransportErrors(t)
		answers, _ := a.snapshot()
		for key, ans := range answers {
			assert.Less(t, ans.Status, 500, "%s answered %d", key, ans.Status)
			if ans.Status/100 == 2 {
				ids[key] = ans.ID
				if ans.State == "SUCCEEDED" {
					assert.Equal(t, 1, effects[key], "%s: one effect", key)
				}
			}
		}
	}
	dupMu.Lock()
	for key, statuses := range dupStatus {
		for _, st := range statuses {
			assert.True(t, st > 0 && st < 500, "%s answered %v", key, statuses)
		}
		assert.LessOrEqual(t, effects[key], 1, "%s: concurrent duplicates on two releases, at most one ticket", key)
	}
	once := 0
	for key := range dupStatus {
		if effects[key] == 1 {
			once++
		}
	}
	assert.Greater(t, once, len(dupStatus)/2, "most duplicated keys made their ticket (once)")
	t.Logf("operations: %d by agents, %d duplicated keys", len(ids), len(dupStatus))
	dupMu.Unlock()
	for key, n := range effects {
		assert.LessOrEqual(t, n, 1, "%s: %d effects", key, n)
	}

	// Every operation reads the same through the old release and the new one.
	for key, id := range ids {
		viaOld, viaNew := s.op(t, oldB.URL, id), s.op(t, newC.URL, id)
		assert.Equal(t, viaNew["state"], viaOld["state"], "%s", key)
		assert.Equal(t, viaNew["result"], viaOld["result"], "%s", key)
		assert.Equal(t, key, viaOld["key"])
	}
	require.GreaterOrEqual(t, len(ids), 150, "enough load to mean something")
}
