package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// preload writes n SUCCEEDED operations of the bench tool straight into the operations table,
// as if agents had made them over months: keys "old-1" … "old-n", params {"n":i}, fingerprints
// computed as the API computes them, so that each replays. It uses COPY (PostgreSQL only) and
// reports progress on w.
//
// Only operations rows are written: a replay reads nothing else. The events and attempts a
// real ledger holds beside them would compete for the database's cache, which on a machine
// whose memory holds the whole operations index does not change what is measured.
func (g *gateway) preload(ctx context.Context, db *gorm.DB, n int64, w io.Writer) error {
	if n <= 0 {
		return nil
	}
	if g.dialect != string(models.Postgres) {
		return errors.New("--preload needs a PostgreSQL --database")
	}
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	var have int64
	if err := sqlDB.QueryRowContext(ctx, "SELECT count(*) FROM operations WHERE tenant = $1 AND op_key LIKE 'old-%'", g.tenant).Scan(&have); err != nil {
		return err
	}
	switch {
	case have == n:
		fmt.Fprintf(w, "tenant %s holds its %d preloaded operations already\n", g.tenant, n)
		return nil
	case have != 0:
		return fmt.Errorf("tenant %s holds %d preloaded operations, not %d: use another --tenant", g.tenant, have, n)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	start := time.Now()
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
