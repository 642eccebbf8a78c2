package models

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// rowQuery is a one-row statement of the hot path, written once with '?' placeholders and
// kept in PostgreSQL's numbered spelling too, so nothing is rewritten per call.
type rowQuery struct {
	portable string // '?' placeholders, for GORM on any engine
	numbered string // $1, $2, … for pgx
	// youngPlan has PostgreSQL plan the statement for its values at each execution (pgx
	// sends it as the unnamed statement) while the operations table is young, never from a
	// plan cached on the connection (see keyPlan).
	youngPlan bool
}

// plannedWhileYoung returns q planned afresh at each execution while the ledger is young.
func (q rowQuery) plannedWhileYoung() rowQuery {
	q.youngPlan = true
	return q
}

func newRowQuery(q string) rowQuery {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return rowQuery{portable: q, numbered: b.String()}
}

// queryRow runs q and scans its one row into dest; no row is sql.ErrNoRows.
//
// On PostgreSQL it borrows a connection of the pool and runs q on pgx itself: past GORM's
// statement building and database/sql's per-column conversions, the key look-up that answers
// every replay takes about half the CPU and a third of the allocations
// (BenchmarkReplayLookup). Elsewhere, and when the pool is wrapped (as the SQLite round-trip
// test wraps it), it goes through GORM.
func (l *Ledger) queryRow(ctx context.Context, q rowQuery, args []any, dest ...any) error {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	sqlDB, direct := l.db.Statement.ConnPool.(*sql.DB)
	if !direct || l.dialect != Postgres {
		return l.db.WithContext(ctx).Raw(q.portable, args...).Row().Scan(dest...)
	}
	// Decided before a connection is borrowed: reading the statistics takes one of its own.
	perRun := q.youngPlan && l.keyPlan.perRun(ctx, time.Now(), l.operationsRows)
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	err = conn.Raw(func(driverConn any) error {
		pc, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return errors.New("ledger: the postgres pool does not hold pgx connections")
		}
		// A sessionless mode (a URL for a transaction pooler, see TransactionPooled) plans
		// every statement per run already; the URL's choice of protocol stands.
		if perRun && !sessionless(pc.Conn().Config().DefaultQueryExecMode) {
			// The unnamed statement is parsed and planned with its parameters on every
			// execution (PostgreSQL's choose_custom_plan); the description pgx caches
			// spares the describe round trip.
			args = append([]any{pgx.QueryExecModeCacheDescribe}, args...)
		}
		return pc.Conn().QueryRow(ctx, q.numbered, args...).Scan(dest...)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return sql.ErrNoRows
	}
	return err
}
