package models_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Repeated requests are counted in memory, written in batches, and added up across the
// processes that share a ledger: each replica counts what it answered, the page shows the sum,
// with the first and the last. A write that fails keeps its counts for the next one. Another
// tenant's reviewer learns nothing.
func TestRepeatsAddUpAcrossProcesses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		db := testdb.Open(t, d)
		clock := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
		now := func() time.Time { return clock }
		a := models.New(models.Config{DB: db, Dialect: d, Key: testdb.Key(t, db), Now: now})
		b := models.New(models.Config{DB: db, Dialect: d, Key: testdb.Key(t, db), Now: now})
		c := agentOf(ctx, t, a)
		s, err := a.Submit(ctx, newOp(c, "ticket-1"))
		require.NoError(t, err)
		op := s.Op
		acme := models.OnlyTenants("acme")

		none, err := a.RepeatsOf(ctx, acme, op.ID)
		require.NoError(t, err)
		assert.Zero(t, none.N, "nobody asked again")

		a.NoteRepeat(op)
		clock = clock.Add(time.Second)
		a.NoteRepeat(op)
		got, err := a.RepeatsOf(ctx, acme, op.ID)
		require.NoError(t, err)
		assert.Equal(t, models.Repeats{N: 2, First: clock.Add(-time.Second), Last: clock}, got, "this process's counts before they are written")
		_, err = a.FlushRepeats(ctx)
		require.NoError(t, err)

		// Another replica answers two more, the first of them earlier than a's last.
		clock = clock.Add(-500 * time.Millisecond)
		b.NoteRepeat(op)
		clock = clock.Add(time.Minute)
		b.NoteRepeat(op)
		_, err = b.FlushRepeats(ctx)
		require.NoError(t, err)
		got, err = a.RepeatsOf(ctx, acme, op.ID)
		require.NoError(t, err)
		first := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
		assert.Equal(t, models.Repeats{N: 4, First: first, Last: clock}, got)

		// The table gone for a moment: the write fails and the count waits for the next one.
		a.NoteRepeat(op)
		require.NoError(t, db.Exec(`ALTER TABLE operation_repeats RENAME TO operation_repeats_away`).Error)
		_, err = a.FlushRepeats(ctx)
		require.Error(t, err)
		require.NoError(t, db.Exec(`ALTER TABLE operation_repeats_away RENAME TO operation_repeats`).Error)
		_, err = a.FlushRepeats(ctx)
		require.NoError(t, err)
		got, err = b.RepeatsOf(ctx, acme, op.ID)
		require.NoError(t, err)
		assert.Equal(t, int64(5), got.N, "kept through the failed write, read by another process")

		other, err := b.RepeatsOf(ctx, models.OnlyTenants("other"), op.ID)
		require.NoError(t, err)
		assert.Zero(t, other.N, "another tenant's reviewer is told nothing")
	})
}

// The counts of operations still open are written at every tick; those of settled ones wait
// for their own, longer cadence, and everything is written when the writer stops. The process
// that answered them shows them at once either way.
func TestRepeatsOfSettledOperationsWaitForTheirCadence(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		db := testdb.Open(t, d)
		a := models.New(models.Config{DB: db, Dialect: d, Key: testdb.Key(t, db)})
		b := models.New(models.Config{DB: db, Dialect: d, Key: testdb.Key(t, db)})
		c := agentOf(ctx, t, a)
		acme := models.OnlyTenants("acme")

		s, err := a.Submit(ctx, newOp(c, "still-open")) // no claim: it waits, not settled
		require.NoError(t, err)
		open := s.Op
		require.False(t, open.State.Terminal())
		succeededOn(t, a, c, "settled")
		r, err := replay(t, a, c, "settled")
		require.NoError(t, err)
		settled := r.Op
		require.True(t, settled.State.Terminal())

		a.NoteRepeat(open)
		a.NoteRepeat(settled)
		a.NoteRepeat(settled)
		keep, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			a.KeepRepeats(keep, 10*time.Millisecond, time.Hour, slog.New(slog.DiscardHandler))
		}()
		require.Eventually(t, func() bool {
			got, err := b.RepeatsOf(ctx, acme, open.ID)
			return err == nil && got.N == 1
		}, 10*time.Second, 10*time.Millisecond, "the open operation's count is written at a tick")
		got, err := b.RepeatsOf(ctx, acme, settled.ID)
		require.NoError(t, err)
		assert.Zero(t, got.N, "the settled operation's count waits for its cadence")
		got, err = a.RepeatsOf(ctx, acme, settled.ID)
		require.NoError(t, err)
		assert.Equal(t, int64(2), got.N, "the process that counted them shows them meanwhile")

		stop()
		<-done
		got, err = b.RepeatsOf(ctx, acme, settled.ID)
		require.NoError(t, err)
		assert.Equal(t, int64(2), got.N, "written when the writer stops")
	})
}
