package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// preload writes n SUCCEEDED operations of the bench tool straight into the operations table,
// as if agents had made them over months: keys "old-1" … "old-n", params {"n":i}, fingerprints
// computed as the API computes them, so that each replays. It uses COPY on PostgreSQL, multi-row
// INSERTs in one transaction on SQLite, and reports progress on w.
//
// Only operations rows are written: a replay reads nothing else. The events and attempts a
// real ledger holds beside them would compete for the database's cache, which on a machine
// whose memory holds the whole operations index does not change what is measured.
func (g *gateway) preload(ctx context.Context, db *gorm.DB, n int64, w io.Writer) error {
	if n <= 0 {
		return nil
	}
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	var have int64
	if err := db.WithContext(ctx).Raw("SELECT count(*) FROM operations WHERE tenant = ? AND op_key LIKE 'old-%'", g.tenant).Scan(&have).Error; err != nil {
		return err
	}
	switch {
	case have == n:
		fmt.Fprintf(w, "tenant %s holds its %d preloaded operations already\n", g.tenant, n)
		return nil
	case have != 0:
		return fmt.Errorf("tenant %s holds %d preloaded operations, not %d: use another --tenant", g.tenant, have, n)
	}
	start := time.Now()
	if g.dialect != string(models.Postgres) {
		return g.preloadSQLite(ctx, sqlDB, n, start, w)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		const batch = 500_000
		for from := int64(1); from <= n; from += batch {
			to := min(from+batch-1, n)
			rows := &preloadRows{g: g, next: from, last: to, at: start.Add(-time.Duration(n-from) * time.Second).UTC()}
			if _, err := pc.CopyFrom(ctx, pgx.Identifier{"operations"}, preloadColumns, rows); err != nil {
				return fmt.Errorf("preload rows %d–%d: %w", from, to, err)
			}
			fmt.Fprintf(w, "preloaded %d of %d operations (%s)\n", to, n, time.Since(start).Round(time.Second))
		}
		_, err := pc.Exec(ctx, "ANALYZE operations")
		return err
	})
}

var preloadColumns = []string{"id", "tenant", "op_key", "tool", "fingerprint", "params", "result", "state",
	"downstream_status", "downstream_ref", "attempts", "ambiguous", "fence", "principal_id", "api_key_id",
	"probes", "created_at", "updated_at", "completed_at", "downstream_key"}

// preloadRows is a pgx.CopyFromSource of the preloaded operations next … last.
type preloadRows struct {
	g          *gateway
	next, last int64
	at         time.Time
	row        []any
}

func (r *preloadRows) Next() bool {
	if r.next > r.last {
		return false
	}
	i := strconv.FormatInt(r.next, 10)
	params := `{"n":` + i + `}`
	r.row = []any{"op_old_" + r.g.tenant + "_" + i, r.g.tenant, "old-" + i, "bench.write",
		r.g.ledger.Fingerprint("bench.write", []byte(params)), params, `{"id":"c-old-` + i + `","status":"done"}`,
		string(models.StateSucceeded), 201, "c-old-" + i, 1, false, 1, r.g.principalID, r.g.keyID,
		0, r.at, r.at, r.at, r.g.ledger.DownstreamKey(r.g.tenant, "old-"+i)}
	r.next++
	r.at = r.at.Add(time.Second)
	return true
}

func (r *preloadRows) Values() ([]any, error) { return r.row, nil }
func (r *preloadRows) Err() error             { return nil }

// replayOld replays a random one of the preloaded operations: each look-up lands on another
// part of the key index, as replays from many agents do.
func (g *gateway) replayOld(ctx context.Context, _ int64) error {
	i := rand.Int64N(g.preloaded) + 1
	status, err := g.post(ctx, g.url+"/v1/operations", "old-"+strconv.FormatInt(i, 10),
		`{"tool":"bench.write","params":{"n":`+strconv.FormatInt(i, 10)+`}}`, true)
	return expect(status, err, http.StatusOK)
}

// preloadSQLite is preload's SQLite path: rows of 500 per INSERT, in one transaction on the
// ledger's writer connection.
func (g *gateway) preloadSQLite(ctx context.Context, db *sql.DB, n int64, start time.Time, w io.Writer) error {
	const rowsPer = 500
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	rows := &preloadRows{g: g, next: 1, last: n, at: start.Add(-time.Duration(n) * time.Second).UTC()}
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(preloadColumns)), ", ") + ")"
	for more := true; more; {
		var args []any
		k := 0
		for ; k < rowsPer && rows.Next(); k++ {
			args = append(args, rows.row...)
		}
		if more = k == rowsPer; k == 0 {
			break
		}
		q := "INSERT INTO operations (" + strings.Join(preloadColumns, ", ") + ") VALUES " + strings.TrimSuffix(strings.Repeat(one+", ", k), ", ")
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("preload: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	fmt.Fprintf(w, "preloaded %d operations (%s)\n", n, time.Since(start).Round(time.Second))
	_, err = db.ExecContext(ctx, "ANALYZE")
	return err
}
