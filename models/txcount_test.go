package models_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// roundTrip is one call that reaches the database: a statement, BEGIN, COMMIT or ROLLBACK.
type roundTrip struct {
	verb string // BEGIN, COMMIT, ROLLBACK, or the statement's first SQL keyword
	inTx bool
	sql  string
}

// roundTrips records every round trip made through a countingPool. GORM's callbacks see
// statements but not BEGIN and COMMIT, so the counting happens one level lower, at the
// connection pool GORM sends everything through: that also tells statements inside a
// transaction from those outside, whatever the driver.
type roundTrips struct {
	mu   sync.Mutex
	list []roundTrip
}

func (r *roundTrips) add(verb string, inTx bool, query string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, roundTrip{verb: verb, inTx: inTx, sql: query})
}

// take returns what was recorded since the last take and starts afresh.
func (r *roundTrips) take() []roundTrip {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.list
	r.list = nil
	return out
}

// sqlVerb is the first keyword of a statement, upper-cased.
func sqlVerb(query string) string {
	f := strings.Fields(query)
	if len(f) == 0 {
		return "?"
	}
	return strings.ToUpper(f[0])
}

// countingPool wraps the ledger's connection pool. It implements gorm.ConnPoolBeginner so
// that Transaction begins through it, and deliberately not gorm.TxCommitter, so GORM does not
// mistake it for an open transaction.
type countingPool struct {
	inner gorm.ConnPool
	rec   *roundTrips
}

var (
	_ gorm.ConnPool         = (*countingPool)(nil)
	_ gorm.ConnPoolBeginner = (*countingPool)(nil)
	_ gorm.ConnPool         = (*countingTx)(nil)
	_ gorm.TxCommitter      = (*countingTx)(nil)
)

func (p *countingPool) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	p.rec.add("PREPARE", false, query)
	return p.inner.PrepareContext(ctx, query)
}

func (p *countingPool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	p.rec.add(sqlVerb(query), false, query)
	return p.inner.ExecContext(ctx, query, args...)
}

func (p *countingPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	p.rec.add(sqlVerb(query), false, query)
	return p.inner.QueryContext(ctx, query, args...)
}

func (p *countingPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	p.rec.add(sqlVerb(query), false, query)
	return p.inner.QueryRowContext(ctx, query, args...)
}

func (p *countingPool) BeginTx(ctx context.Context, opts *sql.TxOptions) (gorm.ConnPool, error) {
	p.rec.add("BEGIN", true, "")
	var tx gorm.ConnPool
	var err error
	switch b := p.inner.(type) {
	case gorm.TxBeginner:
		tx, err = b.BeginTx(ctx, opts)
	case gorm.ConnPoolBeginner:
		tx, err = b.BeginTx(ctx, opts)
	default:
		return nil, fmt.Errorf("countingPool: %T cannot begin transactions", p.inner)
	}
	if err != nil {
		return nil, err
	}
	return &countingTx{inner: tx, rec: p.rec}, nil
}

// GetDBConn lets db.DB() still reach the *sql.DB behind the wrapper.
func (p *countingPool) GetDBConn() (*sql.DB, error) {
	if db, ok := p.inner.(*sql.DB); ok {
		return db, nil
	}
	return nil, fmt.Errorf("countingPool: %T is not an *sql.DB", p.inner)
}

// countingTx wraps one transaction begun through a countingPool.
type countingTx struct {
	inner gorm.ConnPool
	rec   *roundTrips
}

func (t *countingTx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	t.rec.add("PREPARE", true, query)
	return t.inner.PrepareContext(ctx, query)
}

func (t *countingTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	t.rec.add(sqlVerb(query), true, query)
	return t.inner.ExecContext(ctx, query, args...)
}

func (t *countingTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	t.rec.add(sqlVerb(query), true, query)
	return t.inner.QueryContext(ctx, query, args...)
}

func (t *countingTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	t.rec.add(sqlVerb(query), true, query)
	return t.inner.QueryRowContext(ctx, query, args...)
}

func (t *countingTx) Commit() error {
	t.rec.add("COMMIT", true, "")
	return t.inner.(gorm.TxCommitter).Commit()
}

func (t *countingTx) Rollback() error {
	t.rec.add("ROLLBACK", true, "")
	return t.inner.(gorm.TxCommitter).Rollback()
}

// wireTracer records what pgx sends to PostgreSQL, BEGIN and COMMIT included: there round
// trips are counted at the driver, so the ledger's direct pgx reads are seen as well as
// GORM's statements.
type wireTracer struct {
	rec  *roundTrips
	mu   sync.Mutex
	inTx map[*pgx.Conn]bool
}

func (w *wireTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch verb := sqlVerb(data.SQL); verb {
	case "BEGIN":
		w.inTx[conn] = true
		w.rec.add(verb, true, "")
	case "COMMIT", "ROLLBACK":
		delete(w.inTx, conn)
		w.rec.add(verb, true, "")
	default:
		w.rec.add(verb, w.inTx[conn], data.SQL)
	}
	return ctx
}

func (w *wireTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// countedLedger returns a ledger on a fresh database of engine d whose every round trip is
// recorded, with a caller of tenant "acme" already set up (and not counted).
func countedLedger(t *testing.T, d models.Dialect) (*models.Ledger, *models.Caller, *roundTrips) {
	t.Helper()
	l, c, rec, _ := countedLedgerDSN(t, d)
	return l, c, rec
}

// countedLedgerDSN is countedLedger, and the URL of its database.
func countedLedgerDSN(t *testing.T, d models.Dialect) (*models.Ledger, *models.Caller, *roundTrips, string) {
	t.Helper()
	rec := &roundTrips{}
	var l *models.Ledger
	dsn := testdb.DSN(t, d)
	if d == models.Postgres {
		db, _, err := models.OpenWith(context.Background(), dsn,
			models.Options{QueryTracer: &wireTracer{rec: rec, inTx: map[*pgx.Conn]bool{}}})
		require.NoError(t, err)
		sqlDB, _ := db.DB()
		t.Cleanup(func() { sqlDB.Close() })
		require.NoError(t, models.Migrate(context.Background(), db, d))
		l = models.New(models.Config{DB: db, Dialect: d})
	} else {
		// SQLite's driver has no tracer: both connection pools GORM sends statements
		// through, the writer's and the readers', are wrapped instead.
		db, _, err := models.OpenWith(context.Background(), dsn, models.Options{
			WrapSQLite: func(p gorm.ConnPool) gorm.ConnPool { return &countingPool{inner: p, rec: rec} }})
		require.NoError(t, err)
		sqlDB, _ := db.DB()
		t.Cleanup(func() { sqlDB.Close() })
		require.NoError(t, models.Migrate(context.Background(), db, d))
		l = models.New(models.Config{DB: db, Dialect: d})
	}
	ctx := context.Background()
	_, err := l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme")
	require.NoError(t, err)
	k, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent-1", nil)
	require.NoError(t, err)
	c, err := l.Authenticate(ctx, k.Secret)
	require.NoError(t, err)
	require.NotEmpty(t, rec.take(), "the recorder sees the set-up's round trips")
	return l, c, rec, dsn
}

// TestRoundTripsWithTheReplayCache: while the replay cache is live (PostgreSQL, a listener up),
// a new operation is five round trips (the submit's one statement, then the outcome's
// transaction: no look-up first); a replay of an operation this process recorded or read is
// none, and answers what the database holds; the first replay of one another process
// recorded is two (the submit's statement, which writes nothing, then the read).
func TestRoundTripsWithTheReplayCache(t *testing.T) {
	l, c, rec, dsn := countedLedgerDSN(t, models.Postgres)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		l.Listen(ctx, dsn, testLogger(t))
	}()
	defer func() { cancel(); <-stopped }()
	listening(t, l)
	// The key look-up's plan reads the table's statistics at most every 10 s (keyplan.go).
	_, err := l.GetByKey(ctx, c.Tenant, "warm-up")
	require.Equal(t, models.CodeNotFound, models.ErrorCode(err))
	rec.take()

	in := newOp(c, "order-7:refund")
	in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
	s, err := l.Submit(ctx, in)
	require.NoError(t, err)
	require.True(t, s.Created)
	require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1", succeeded))
	created := rec.take()
	got := tallyOf(created)
	assert.Equal(t, []string{"WITH", "WITH"}, got.outside, "no look-up before the claim's statement, then the outcome's:\n%s", describeTrips(created))
	assert.Empty(t, got.inTx, "no transaction:\n%s", describeTrips(created))
	assert.Equal(t, 2, got.total, "%s", describeTrips(created))

	again := newOp(c, "order-7:refund")
	again.Claim = in.Claim
	first, err := l.Submit(ctx, again)
	require.NoError(t, err)
	require.False(t, first.Created)
	assert.Empty(t, rec.take(), "the operation this process recorded is answered from memory")
	stored, err := l.Get(ctx, c.Tenant, s.Op.ID)
	require.NoError(t, err)
	assert.Equal(t, utcTimes(*stored), utcTimes(*first.Op), "and is the row the database holds")
	rec.take()

	// Recorded by another process: the first replay reads it.
	elsewhere := ledgerOn(t, dsn)
	in2 := newOp(c, "order-8:refund")
	in2.Claim = in.Claim
	s2, err := elsewhere.Submit(ctx, in2)
	require.NoError(t, err)
	require.NoError(t, elsewhere.FinishAttempt(ctx, models.Claimed{Op: s2.Op, Attempt: s2.Attempt}, "w2", succeeded))
	rec.take()
	known, err := l.Submit(ctx, in2)
	require.NoError(t, err)
	require.False(t, known.Created)
	require.Equal(t, models.StateSucceeded, known.Op.State)
	firstTrips := rec.take()
	assert.Equal(t, []string{"WITH", "SELECT"}, tallyOf(firstTrips).outside, "the known key, then its read:\n%s", describeTrips(firstTrips))
	_, err = l.Submit(ctx, in2)
	require.NoError(t, err)
	assert.Empty(t, rec.take(), "then from memory")
	for range 3 {
		r, err := l.Submit(ctx, again)
		require.NoError(t, err)
		require.False(t, r.Created)
		require.Equal(t, s.Op.ID, r.Op.ID)
	}
	assert.Empty(t, rec.take(), "replays answered from memory")

	mismatched := again
	mismatched.Fingerprint = "sha256:bb"
	_, err = l.Submit(ctx, mismatched)
	assert.Equal(t, models.CodeKeyMismatch, models.ErrorCode(err), "other params are refused from memory too")
	assert.Empty(t, rec.take())
}

// tally summarises recorded round trips.
type tally struct {
	transactions, rollbacks int
	inTx                    []string // statement verbs inside transactions, in order
	outside                 []string // statement verbs outside transactions, in order
	total                   int      // every round trip, BEGIN and COMMIT included
}

func tallyOf(trips []roundTrip) tally {
	var s tally
	s.total = len(trips)
	for _, rt := range trips {
		switch {
		case rt.verb == "COMMIT":
			s.transactions++
		case rt.verb == "ROLLBACK":
			s.rollbacks++
		case rt.verb == "BEGIN":
		case rt.inTx:
			s.inTx = append(s.inTx, rt.verb)
		default:
			s.outside = append(s.outside, rt.verb)
		}
	}
	return s
}

// describeTrips lists round trips for failure messages and the log.
func describeTrips(trips []roundTrip) string {
	var b strings.Builder
	for _, rt := range trips {
		where := "    "
		if rt.inTx {
			where = " tx "
		}
		q := rt.sql
		if len(q) > 110 {
			q = q[:110] + "…"
		}
		fmt.Fprintf(&b, "%s%-8s %s\n", where, rt.verb, q)
	}
	return b.String()
}

// TestRoundTripsOfTheHappyPath pins the database cost the ledger promises: a new operation is
// the key look-up plus two writes (the claiming submit and the recorded outcome), on
// PostgreSQL three round trips in all, each write one statement that commits as it ends
// (groupcommit.go); a replay of a terminal operation is one read and no transaction (none at
// all while the replay cache holds it: TestReplayCache…).
func TestRoundTripsOfTheHappyPath(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c, rec := countedLedger(t, d)
		ctx := context.Background()
		// On PostgreSQL a young ledger's key look-up reads the table's statistics first, at
		// most once per keyPlanRecheck (10 s) in a process, not once per operation (see
		// models/keyplan.go): a first look-up takes that read before the counting starts.
		_, err := l.GetByKey(ctx, c.Tenant, "warm-up")
		require.Equal(t, models.CodeNotFound, models.ErrorCode(err))
		warm := tallyOf(rec.take())
		if d == models.Postgres {
			assert.Equal(t, []string{"SELECT", "SELECT"}, warm.outside, "the statistics, then the look-up")
		} else {
			assert.Equal(t, []string{"SELECT"}, warm.outside, "SQLite plans every statement afresh: the look-up alone")
		}
		in := newOp(c, "order-1042:refund")
		in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}

		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		require.True(t, s.Created)
		require.NotNil(t, s.Attempt)
		err = l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1", models.AttemptOutcome{
			Class: "succeeded", DownstreamStatus: 201, To: models.StateSucceeded, Result: []byte(`{"id":"R-1"}`), DownstreamRef: "R-1"})
		require.NoError(t, err)
		created := rec.take()
		got := tallyOf(created)
		t.Logf("%s new operation: %d round trips\n%s", d, got.total, describeTrips(created))
		assert.Zero(t, got.rollbacks)
		// Submit writes the operation, the attempt, then its created and attempt_started
		// events; FinishAttempt the operation's compare-and-set (which locks its row before
		// the attempt's, the lease reaper's lock order), the attempt, then its
		// attempt_finished and state_changed events (docs/STATES.md: in the same transaction).
		// SUCCEEDED is announced (docs/WEBHOOKS.md): on PostgreSQL the events' statement also asks
		// whether the tenant has a live webhook subscription, and notifies only operations
		// another replica watches, so with neither nothing more is sent; SQLite reads the
		// subscriptions after the events. On PostgreSQL each write is one statement, which
		// commits as it ends: no BEGIN, no COMMIT. Submit's writes the operation, the attempt
		// and the events (claimBatch); the outcome's locks the operation's row, then the
		// attempt's, writes both and the events, and reads whether the tenant has a live
		// webhook subscription: a member that has one is written again alone, by the
		// transaction that announces it (outcomeBatch).
		if d == models.Postgres {
			assert.Zero(t, got.transactions, "no transaction:\n%s", describeTrips(created))
			assert.Equal(t, []string{"SELECT", "WITH", "WITH"}, got.outside, "the key look-up, the claim, the outcome:\n%s", describeTrips(created))
			assert.Equal(t, 3, got.total)
		} else {
			assert.Equal(t, 2, got.transactions, "a new operation commits exactly two transactions:\n%s", describeTrips(created))
			assert.Equal(t, []string{"SELECT"}, got.outside, "outside transactions, only the key look-up:\n%s", describeTrips(created))
			assert.Equal(t, []string{"INSERT", "INSERT", "INSERT", "UPDATE", "UPDATE", "INSERT", "SELECT"}, got.inTx,
				"statements inside the transactions:\n%s", describeTrips(created))
		}

		r, err := l.Submit(ctx, newOp(c, "order-1042:refund"))
		require.NoError(t, err)
		require.False(t, r.Created)
		require.Equal(t, models.StateSucceeded, r.Op.State)
		replay := rec.take()
		got = tallyOf(replay)
		t.Logf("%s replay: %d round trips\n%s", d, got.total, describeTrips(replay))
		assert.Zero(t, got.transactions, "a replay opens no transaction")
		assert.Equal(t, []string{"SELECT"}, got.outside, "a replay is one read:\n%s", describeTrips(replay))
		assert.Empty(t, got.inTx)
		assert.Equal(t, 1, got.total)
	})
}

// utcTimes is op with every time in UTC, so that an operation read from the database and one
// kept in memory compare by instant.
func utcTimes(op models.Operation) models.Operation {
	op.CreatedAt, op.UpdatedAt = op.CreatedAt.UTC(), op.UpdatedAt.UTC()
	for _, p := range []**time.Time{&op.NextAttemptAt, &op.LeaseExpiresAt, &op.UnknownSince, &op.NextProbeAt, &op.CompletedAt, &op.PurgedAt} {
		if *p != nil {
			t := (*p).UTC()
			*p = &t
		}
	}
	return op
}
