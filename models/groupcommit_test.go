package models_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Group commit (models/groupcommit.go) writes the claims and the outcomes of requests in flight
// together. These tests hold the batchers (PauseGroupCommit) so that the requests they send
// share one batch for certain, then check that each is decided as it would be alone.

// claiming is in, recorded straight into RUNNING by worker w1.
func claiming(in models.NewOperation) models.NewOperation {
	in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
	return in
}

// together runs each of fns on its own goroutine once the ledger's batchers hold n requests of
// the kind queued reports, then lets them go as one batch, and waits for all of them.
func together(t *testing.T, l *models.Ledger, n int, queued func(claims, outcomes int) int, fns ...func()) {
	t.Helper()
	resume := l.PauseGroupCommit()
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); fn() }()
	}
	require.Eventually(t, func() bool { return queued(l.GroupCommitQueued()) == n }, 10*time.Second, time.Millisecond,
		"%d requests queue for one batch", n)
	resume()
	wg.Wait()
}

func outcomesQueued(_, outcomes int) int { return outcomes }

// eventTypes lists the types of op's events, in their order.
func eventTypes(t *testing.T, l *models.Ledger, op *models.Operation) []string {
	t.Helper()
	evs, err := l.Events(context.Background(), op.Tenant, op.ID)
	require.NoError(t, err)
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// In one batch of claims: two new keys, one key twice, a key recorded by another replica after
// the look-up, and a key recorded with other params. Each is answered as if it had been alone.
func TestBatchedClaimsDecideEachKeyAlone(t *testing.T) {
	db := testdb.Open(t, models.Postgres)
	l := models.New(models.Config{DB: db, Dialect: models.Postgres, Key: testdb.Key(t, db)})
	other := models.New(models.Config{DB: db, Dialect: models.Postgres, Key: testdb.Key(t, db)}) // a second replica
	ctx := t.Context()
	c := agentOf(ctx, t, l)
	batchesBefore, claimsBefore, _, _ := l.GroupCommitStats()

	mismatched := claiming(newOp(c, "late-other-params"))
	mismatched.Fingerprint = "sha256:bb"
	ins := []models.NewOperation{claiming(newOp(c, "k1")), claiming(newOp(c, "twice")), claiming(newOp(c, "twice")),
		claiming(newOp(c, "late")), mismatched, claiming(newOp(c, "k2"))}
	subs := make([]models.Submitted, len(ins))
	errs := make([]error, len(ins))
	var fns []func()
	for i, in := range ins {
		fns = append(fns, func() { subs[i], errs[i] = l.Submit(ctx, in) })
	}
	resume := l.PauseGroupCommit()
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); fn() }()
	}
	require.Eventually(t, func() bool { c, _ := l.GroupCommitQueued(); return c == len(ins) }, 10*time.Second, time.Millisecond)
	// Another replica records two of the keys after this one looked them up and missed.
	lateHere, err := other.Submit(ctx, claiming(newOp(c, "late")))
	require.NoError(t, err)
	require.True(t, lateHere.Created)
	lateThere, err := other.Submit(ctx, claiming(newOp(c, "late-other-params")))
	require.NoError(t, err)
	require.True(t, lateThere.Created)
	resume()
	wg.Wait()

	batches, claims, _, _ := l.GroupCommitStats()
	assert.Equal(t, uint64(1), batches-batchesBefore, "one batch")
	assert.Equal(t, uint64(len(ins)), claims-claimsBefore, "of every claim")

	for _, i := range []int{0, 5} { // k1, k2: created, claimed
		require.NoError(t, errs[i])
		assert.True(t, subs[i].Created, ins[i].Key)
		require.NotNil(t, subs[i].Attempt)
		assert.Equal(t, models.StateRunning, subs[i].Op.State)
		assert.Equal(t, []string{models.EventCreated, models.EventAttemptStarted}, eventTypes(t, l, subs[i].Op), "%s's timeline", ins[i].Key)
		attempts, err := l.Attempts(ctx, subs[i].Op.ID)
		require.NoError(t, err)
		assert.Len(t, attempts, 1)
	}
	require.NoError(t, errs[1])
	require.NoError(t, errs[2])
	assert.NotEqual(t, subs[1].Created, subs[2].Created, "one of the two requests for one key created it")
	assert.Equal(t, subs[1].Op.ID, subs[2].Op.ID, "and the other has its operation")
	var loser models.Submitted
	if subs[1].Created {
		loser = subs[2]
	} else {
		loser = subs[1]
	}
	assert.Nil(t, loser.Attempt, "the request that did not create the operation claimed nothing")
	assert.Equal(t, []string{models.EventCreated, models.EventAttemptStarted}, eventTypes(t, l, subs[1].Op), "one timeline")

	require.NoError(t, errs[3])
	assert.False(t, subs[3].Created, "the key recorded on the other replica")
	assert.Equal(t, lateHere.Op.ID, subs[3].Op.ID)
	assert.Equal(t, models.CodeKeyMismatch, models.ErrorCode(errs[4]), "the same key with other params: %v", errs[4])

	var count int64
	require.NoError(t, db.Model(&models.Operation{}).Where("tenant = ?", c.Tenant).Count(&count).Error)
	assert.Equal(t, int64(5), count, "k1, k2, twice, late, late-other-params")
}

// In one batch of outcomes: two that end their operations, one whose lease was taken over
// meanwhile, and one of a tenant with a webhook subscription. The stale one loses alone; the
// announced one is written alone, with its announcement.
func TestBatchedOutcomesLoseAlone(t *testing.T) {
	db := testdb.Open(t, models.Postgres)
	l, _, acme := webhookSetup(t, models.Postgres, db)
	ctx := t.Context()
	k, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "other", "agent-2", nil)
	require.NoError(t, err)
	otherCaller, err := l.Authenticate(ctx, k.Secret)
	require.NoError(t, err)
	subscribe(t, l, "acme", models.WebhookEventTypes...)

	done, failed, taken := running(t, l, otherCaller, "done"), running(t, l, otherCaller, "failed"), running(t, l, otherCaller, "taken")
	announcedOp := running(t, l, acme, "announced")
	// The lease reaper took "taken" over: its worker's outcome must change nothing.
	reaped := *taken.Op
	require.NoError(t, l.TransitionForTest(ctx, &reaped, models.StateRunning, models.StateUnknown, taken.Attempt.Fence))

	rejected := models.AttemptOutcome{Class: "rejected", DownstreamStatus: 422, To: models.StateFailedFinal,
		ErrorClass: "rejected", ErrorMessage: "the downstream refused the request"}
	claimed := []models.Claimed{done, failed, taken, announcedOp}
	outs := []models.AttemptOutcome{succeeded, rejected, succeeded, succeeded}
	errs := make([]error, len(claimed))
	_, _, batchesBefore, outcomesBefore := l.GroupCommitStats()
	var fns []func()
	for i := range claimed {
		fns = append(fns, func() { errs[i] = l.FinishAttempt(ctx, claimed[i], "w1", outs[i]) })
	}
	together(t, l, len(claimed), outcomesQueued, fns...)
	_, _, batches, outcomes := l.GroupCommitStats()
	assert.Equal(t, uint64(len(claimed)), outcomes-outcomesBefore, "every outcome went to the batch")
	assert.Equal(t, uint64(1), batches-batchesBefore, "one batch")

	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	assert.Equal(t, models.CodeStale, models.ErrorCode(errs[2]), "the outcome of the attempt whose lease was taken over: %v", errs[2])
	require.NoError(t, errs[3])

	want := map[string]models.State{"done": models.StateSucceeded, "failed": models.StateFailedFinal, "taken": models.StateUnknown,
		"announced": models.StateSucceeded}
	for i, cl := range claimed {
		op, err := l.Get(ctx, cl.Op.Tenant, cl.Op.ID)
		require.NoError(t, err)
		assert.Equal(t, want[cl.Op.Key], op.State, cl.Op.Key)
		assert.Nil(t, op.LeaseOwner, cl.Op.Key)
		attempts, err := l.Attempts(ctx, cl.Op.ID)
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		if i == 2 {
			assert.Nil(t, attempts[0].FinishedAt, "the stale outcome closed nothing")
			assert.Equal(t, []string{models.EventCreated, models.EventAttemptStarted, models.EventStateChanged}, eventTypes(t, l, op),
				"the stale outcome wrote no event")
			continue
		}
		require.NotNil(t, attempts[0].FinishedAt, cl.Op.Key)
		assert.Equal(t, outs[i].Class, *attempts[0].Class, cl.Op.Key)
		assert.Equal(t, []string{models.EventCreated, models.EventAttemptStarted, models.EventAttemptFinished, models.EventStateChanged},
			eventTypes(t, l, op), "%s's timeline", cl.Op.Key)
		assert.Equal(t, utcTimes(*op), utcTimes(*cl.Op), "%s: the caller's operation is the row as written", cl.Op.Key)
	}
	assert.Equal(t, `{"id":"T-1"}`, deref(claimed[0].Op.Result))
	assert.Equal(t, []string{models.WebhookOperationSucceeded}, announced(t, l, announcedOp.Op), "announced, as alone")
	assert.Empty(t, announced(t, l, done.Op), "no subscription, no announcement")
}

// A batch whose answer is lost after it committed: every request in it is told its write may
// have been recorded (503 may-have-been-recorded at the API), and each retry finds its
// operation, once.
func TestBatchCutOffMayHaveBeenRecordedForEveryMember(t *testing.T) {
	dsn := testdb.DSN(t, models.Postgres)
	host, port := proctest.HostPort(dsn)
	cutter, err := proctest.NewCommitCutter(t, host, port)
	require.NoError(t, err)
	ctx := t.Context()
	db, d, err := models.Open(ctx, cutter.DSN(dsn))
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	t.Cleanup(func() { sqlDB.Close() })
	require.NoError(t, models.Migrate(ctx, db, d))
	l := models.New(models.Config{DB: db, Dialect: d, Key: testdb.Key(t, db)})
	c := agentOf(ctx, t, l)

	const n = 3
	errs := make([]error, n)
	var fns []func()
	for i := range n {
		fns = append(fns, func() {
			_, errs[i] = l.Submit(ctx, claiming(newOp(c, fmt.Sprintf("cut-%d", i))))
		})
	}
	resume := l.PauseGroupCommit()
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); fn() }()
	}
	require.Eventually(t, func() bool { c, _ := l.GroupCommitQueued(); return c == n }, 10*time.Second, time.Millisecond)
	cutter.CutNextCommitOf("INSERT INTO operations (")
	resume()
	wg.Wait()
	require.Equal(t, 1, cutter.Cuts(), "the batch's commit was cut")

	for i, err := range errs {
		assert.Equal(t, models.CodeUnavailable, models.ErrorCode(err), "member %d: %v", i, err)
		assert.True(t, models.MaybeRecorded(err), "member %d is told its claim may have been recorded: %v", i, err)
	}
	var count int64
	require.NoError(t, db.Model(&models.Operation{}).Where("tenant = ?", c.Tenant).Count(&count).Error)
	assert.Equal(t, int64(n), count, "the premise: the batch committed")
	for i := range n {
		s, err := l.Submit(ctx, claiming(newOp(c, fmt.Sprintf("cut-%d", i))))
		require.NoError(t, err)
		assert.False(t, s.Created, "the retry finds the operation the cut batch recorded")
	}
}

// A storm of new operations and duplicates, claimed and finished through the batchers at full
// concurrency: one operation per key, each with one attempt and its whole timeline in order.
func TestGroupCommitStormKeepsOneOperationPerKey(t *testing.T) {
	l, c := setup(t, models.Postgres)
	ctx := t.Context()
	const keys, copies = 100, 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := map[string]int{}
	for k := range keys {
		for range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := l.Submit(ctx, claiming(newOp(c, fmt.Sprintf("storm-%d", k))))
				if !assert.NoError(t, err) {
					return
				}
				if s.Created {
					mu.Lock()
					created[s.Op.Key]++
					mu.Unlock()
					assert.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1", succeeded))
				}
			}()
		}
	}
	wg.Wait()
	assert.Len(t, created, keys)
	for key, n := range created {
		assert.Equal(t, 1, n, "%s created once", key)
	}
	ops, _, err := l.List(ctx, c.Tenant, models.ListFilter{Limit: keys * 2})
	require.NoError(t, err)
	require.Len(t, ops, keys)
	for _, op := range ops {
		assert.Equal(t, models.StateSucceeded, op.State)
		assert.Equal(t, []string{models.EventCreated, models.EventAttemptStarted, models.EventAttemptFinished, models.EventStateChanged},
			eventTypes(t, l, op), op.Key)
	}
	claimBatches, claims, outcomeBatches, outcomes := l.GroupCommitStats()
	t.Logf("%d claims in %d batches, %d outcomes in %d batches", claims, claimBatches, outcomes, outcomeBatches)
}

// A reaped attempt's late outcome and its retry's outcome of the same operation in one batch of
// outcomes (issue 47, finding 2): only the retry's is written, its result is the operation's,
// the reaped attempt keeps what the reaper left, the late one is told it is stale, and the
// timeline has one success. Before, the batch's writes joined its members by operation id: both
// were told "written" and the operation could take the stale result. On SQLite (no batches)
// the same two outcomes race alone and must end the same way.
func TestBatchedStaleAndFreshOutcomesOfOneOperation(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		db := testdb.Open(t, d)
		l, _, _ := webhookSetup(t, d, db)
		ctx := t.Context()
		k, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "other", "agent-2", nil)
		require.NoError(t, err)
		caller, err := l.Authenticate(ctx, k.Secret)
		require.NoError(t, err)
		for round := range 6 {
			late := running(t, l, caller, fmt.Sprintf("late-%d", round))
			// The lease ran out: the operation went UNKNOWN, then back to PENDING for a retry,
			// which a worker claimed on the next fence; the first worker has not heard.
			op := *late.Op
			require.NoError(t, l.TransitionForTest(ctx, &op, models.StateRunning, models.StateUnknown, late.Attempt.Fence))
			require.NoError(t, l.TransitionForTest(ctx, &op, models.StateUnknown, models.StatePending, op.Fence))
			require.NoError(t, db.Exec("UPDATE operations SET next_attempt_at = ? WHERE id = ?", time.Now().Add(-time.Second), op.ID).Error)
			claimed, err := l.ClaimDue(ctx, "w2", 10, func(string) time.Duration { return time.Minute })
			require.NoError(t, err)
			require.Len(t, claimed, 1)
			retry := claimed[0]
			require.Equal(t, late.Op.ID, retry.Op.ID)

			stale := models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201, To: models.StateSucceeded,
				Result: []byte(`{"id":"STALE"}`), DownstreamRef: "STALE"}
			fresh := models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201, To: models.StateSucceeded,
				Result: []byte(`{"id":"FRESH"}`), DownstreamRef: "FRESH"}
			var lateErr, retryErr error
			finishLate := func() { lateErr = l.FinishAttempt(ctx, late, "w1", stale) }
			finishRetry := func() { retryErr = l.FinishAttempt(ctx, retry, "w2", fresh) }
			if d == models.Postgres {
				_, _, batchesBefore, _ := l.GroupCommitStats()
				together(t, l, 2, outcomesQueued, finishLate, finishRetry)
				_, _, batches, _ := l.GroupCommitStats()
				require.Equal(t, uint64(1), batches-batchesBefore, "both outcomes met in one batch")
			} else {
				var wg sync.WaitGroup
				wg.Add(2)
				go func() { defer wg.Done(); finishLate() }()
				go func() { defer wg.Done(); finishRetry() }()
				wg.Wait()
			}
			assert.Equal(t, models.CodeStale, models.ErrorCode(lateErr), "round %d: the late outcome is stale: %v", round, lateErr)
			require.NoError(t, retryErr, "round %d", round)

			got, err := l.Get(ctx, op.Tenant, op.ID)
			require.NoError(t, err)
			assert.Equal(t, models.StateSucceeded, got.State)
			assert.Equal(t, `{"id":"FRESH"}`, deref(got.Result), "round %d: the retry's result, never the stale one", round)
			assert.Equal(t, "FRESH", deref(got.DownstreamRef), "round %d", round)
			attempts, err := l.Attempts(ctx, op.ID)
			require.NoError(t, err)
			require.Len(t, attempts, 2)
			assert.Nil(t, attempts[0].FinishedAt, "round %d: the late outcome closed nothing", round)
			assert.Nil(t, attempts[0].Class, "round %d: the reaped attempt is not made a success", round)
			require.NotNil(t, attempts[1].Class)
			assert.Equal(t, "succeeded", *attempts[1].Class)
			successes := 0
			for _, e := range eventTypes(t, l, got) {
				if e == models.EventAttemptFinished {
					successes++
				}
			}
			assert.Equal(t, 1, successes, "round %d: one attempt_finished on the timeline", round)
		}
	})
}
