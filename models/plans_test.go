package models_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// TestHotStatementsDoNotSeqScanAnUnanalyzedLedger: a gateway process started on an empty
// ledger keeps the plans its connections cached then (PostgreSQL switches a prepared statement
// to a generic plan after five runs); on a ledger that has grown to 10,000 operations and was
// never analyzed (autovacuum off, a fresh deployment, a restore), no statement of a new
// operation's path (submit and claim, the attempt's outcome, the events flush with its
// notifications, a watch, a replay) may scan the operations table. Issue 27 measured one
// process making 36,386 sequential scans for 25,000 operations, its rate halving as it grew.
func TestHotStatementsDoNotSeqScanAnUnanalyzedLedger(t *testing.T) {
	if testdb.AdminDSN() == "off" {
		t.Skip("PostgreSQL tests are off")
	}
	ctx := context.Background()
	dsn := testdb.DSN(t, models.Postgres)
	db, _, err := models.Open(ctx, dsn)
	require.NoError(t, err)
	require.NoError(t, models.Migrate(ctx, db, models.Postgres))
	// One connection, as a process's busiest one: it plans every statement, and its counters
	// are reported on demand (reported).
	sqlDB, err := db.DB()
	require.NoError(t, err)
	t.Cleanup(func() { sqlDB.Close() })
	sqlDB.SetMaxOpenConns(1)
	l := models.New(models.Config{DB: db, Dialect: models.Postgres, Key: testdb.Key(t, db)})
	c := agentOf(ctx, t, l)
	require.NoError(t, db.Exec("ALTER TABLE operations SET (autovacuum_enabled = false)").Error)

	n := 0
	newOperation := func() {
		t.Helper()
		n++
		in := newOp(c, fmt.Sprintf("hot-%d", n))
		in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
		sub, err := l.Submit(ctx, in)
		require.NoError(t, err)
		_, err = l.Watch(ctx, c.Tenant, sub.Op.ID)
		require.NoError(t, err)
		require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: sub.Op, Attempt: sub.Attempt}, "w1",
			models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201, To: models.StateSucceeded, Result: []byte(`{"id":"T-1"}`)}))
		_, err = l.Submit(ctx, in) // the replay
		require.NoError(t, err)
	}
	// On the empty ledger, often enough for every statement to be planned generically.
	for range 12 {
		newOperation()
	}
	require.NoError(t, db.Exec(`INSERT INTO operations (id, tenant, op_key, tool, fingerprint, params, state, principal_id, api_key_id,
			created_at, updated_at, completed_at)
		SELECT 'op_bulk' || lpad(g::text, 20, '0'), ?, 'bulk-' || g, 'tickets.create', 'sha256:aa', '{}', 'SUCCEEDED', ?, ?, now(), now(), now()
		FROM generate_series(1, 10000) AS g`, c.Tenant, c.PrincipalID, c.Key.ID).Error)

	// To see which statement scans: LOAD 'auto_explain' and SET auto_explain.log_min_duration = 0
	// here, and read the server's log.
	before := reported(t, db, dsn)
	for range 20 {
		newOperation()
	}
	after := reported(t, db, dsn)
	require.Equal(t, before, after, "sequential scans of operations during 20 new operations on 10,000 unanalyzed rows")
}

// reported has the ledger's connection report its counters (a backend otherwise reports at
// most once a second, when it goes idle), then reads them.
func reported(t *testing.T, db *gorm.DB, dsn string) int64 {
	t.Helper()
	require.NoError(t, db.Exec("SELECT pg_stat_force_next_flush()").Error)
	return seqScans(t, dsn)
}

// seqScans reads how many sequential scans of the test's operations table PostgreSQL has
// counted, on a connection of its own to the schema dsn selects.
func seqScans(t *testing.T, dsn string) int64 {
	t.Helper()
	var n int64
	q := "SELECT seq_scan FROM pg_stat_user_tables WHERE relid = 'operations'::regclass"
	db, _, err := models.Open(context.Background(), dsn)
	require.NoError(t, err)
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	require.NoError(t, db.Raw(q).Scan(&n).Error)
	return n
}
