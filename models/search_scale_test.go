package models_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// searchScaleEnv asks TestSearchScale for a ledger of that many operations; unset, the test is
// skipped (it takes minutes and never runs in the normal suite).
const searchScaleEnv = "IDEMGATE_SEARCH_SCALE"

// TestSearchScale preloads a PostgreSQL ledger with N operations (IDEMGATE_SEARCH_SCALE=1000000)
// and times each kind of console search through SearchOperations, as the console runs it (a
// page of 50, newest first), with EXPLAIN ANALYZE of the very statement. It prints the table of
// docs/PERFORMANCE.md's "Console search on 1,000,000 operations"; it asserts nothing about time.
//
//	IDEMGATE_SEARCH_SCALE=1000000 go test -count=1 -timeout 30m -run TestSearchScale -v ./models/
func TestSearchScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(searchScaleEnv))
	if n <= 0 {
		t.Skipf("%s not set: the search is measured on a large ledger only when asked", searchScaleEnv)
	}
	ctx := context.Background()
	db := testdb.Open(t, models.Postgres)
	l := models.New(models.Config{DB: db, Dialect: models.Postgres})
	start := time.Now()
	preloadSearch(t, db, n)
	t.Logf("preloaded %d operations in %s", n, time.Since(start).Round(time.Second))
	var size string
	require.NoError(t, db.Raw("SELECT pg_size_pretty(pg_total_relation_size('operations'))").Scan(&size).Error)
	t.Logf("operations: %s with indexes", size)

	var last string // the statement SearchOperations ran, with its values
	require.NoError(t, db.Callback().Query().After("gorm:query").Register("scale:capture", func(tx *gorm.DB) {
		last = tx.Dialector.Explain(tx.Statement.SQL.String(), tx.Statement.Vars...)
	}))
	old, recent := n/10, n-100 // an operation a tenth of the way in, and one of the last hundred
	all, one := models.AllTenants(), models.OnlyTenants("t1")
	kinds := []struct {
		name  string
		scope models.Scope
		q     models.Search
	}{
		{"id", all, models.Search{ID: opID(old)}},
		{"key substring, recent hit", all, models.Search{Key: fmt.Sprintf("ORDER-%d:", recent)}},
		{"key substring, old hit", all, models.Search{Key: fmt.Sprintf("order-%d:", old)}},
		{"key substring, miss", all, models.Search{Key: "no-such-key"}},
		{"key substring, miss, one tenant", one, models.Search{Key: "no-such-key"}},
		{"reference, old hit", all, models.Search{Reference: fmt.Sprintf("R-%d", old)}},
		{"reference, miss", all, models.Search{Reference: "R-none"}},
		{"param value, recent hit", all, models.Search{Param: param("order_id", strconv.Itoa(recent))}},
		{"param value, old hit", all, models.Search{Param: param("order_id", strconv.Itoa(old))}},
		{"param value, miss", all, models.Search{Param: param("order_id", "none")}},
		{"error class, common (rejected)", all, models.Search{ErrorClass: "rejected"}},
		{"error class, rare (throttled)", all, models.Search{ErrorClass: "throttled"}},
		{"workflow run, old", all, models.Search{WorkflowRunID: fmt.Sprintf("wf-%d", old/3)}},
		{"state + tool, hit (UNKNOWN email.send)", all, models.Search{State: models.StateUnknown, Tool: "email.send"}},
		{"state + tool, miss (UNKNOWN refunds.issue)", all, models.Search{State: models.StateUnknown, Tool: "refunds.issue"}},
		{"time range, one hour mid-ledger", all, models.Search{From: scaleAt(n, n/2), To: scaleAt(n, n/2).Add(time.Hour)}},
		{"time range + key miss, one tenant", one, models.Search{From: scaleAt(n, n/2), To: scaleAt(n, n/2).Add(time.Hour), Key: "no-such-key"}},
		{"no filter (the first page)", all, models.Search{}},
	}
	var table strings.Builder
	table.WriteString("| search | found | time (median of 3) | EXPLAIN ANALYZE | plan |\n|---|---|---|---|---|\n")
	for _, k := range kinds {
		k.q.Limit = 50
		var took []time.Duration
		var found int
		for range 3 {
			s := time.Now()
			ops, _, err := l.SearchOperations(ctx, k.scope, k.q)
			took = append(took, time.Since(s))
			require.NoError(t, err, k.name)
			found = len(ops)
		}
		slices.Sort(took)
		exec, plan := explainAnalyze(t, db, last)
		fmt.Fprintf(&table, "| %s | %d | %s | %s | %s |\n", k.name, found, took[1].Round(100*time.Microsecond), exec, plan)
	}
	t.Logf("\n%s", table.String())
	trigramAlternative(t, db, n)
}

// opID is the id of the i-th preloaded operation: "op_" and 26 digits, so ids sort by i as
// ULIDs sort by time.
func opID(i int) string { return fmt.Sprintf("op_%026d", i) }

// scaleAt is when the i-th of n preloaded operations was created: one a second, up to now.
func scaleAt(n, i int) time.Time {
	return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Add(-time.Duration(n-i) * time.Second)
}

// preloadSearch writes n operations in one INSERT … SELECT generate_series, spread over four
// tenants and four tools, one a second: 95% SUCCEEDED with a downstream reference, 3%
// FAILED_FINAL rejected, 1% UNKNOWN ambiguous, 1 in 10,000 FAILED_FINAL throttled, the rest
// PENDING; params with an order_id, three operations per workflow run.
func preloadSearch(t *testing.T, db *gorm.DB, n int) {
	t.Helper()
	base := scaleAt(n, 0)
	require.NoError(t, db.Exec(`INSERT INTO tenants (name, created_at) SELECT 't' || g, now() FROM generate_series(0, 3) g`).Error)
	require.NoError(t, db.Exec(`
INSERT INTO operations (id, tenant, op_key, tool, fingerprint, params, result, state, error_class, error_message,
	downstream_ref, attempts, principal_id, api_key_id, workflow_run_id, step_id, created_at, updated_at, completed_at, downstream_key)
SELECT 'op_' || lpad(i::text, 26, '0'), 't' || (i % 4), 'order-' || i || ':' || (ARRAY['refund','ticket','email','payout'])[1 + i % 4],
	(ARRAY['refunds.issue','tickets.create','email.send','payments.payout'])[1 + i % 4], 'hmac-sha256:' || md5(i::text),
	'{"amount_cents":' || (i % 10000) || ',"currency":"EUR","order_id":"' || i || '"}', '{"id":"R-' || i || '"}',
	CASE WHEN i % 10000 = 7 THEN 'FAILED_FINAL' WHEN i % 100 < 95 THEN 'SUCCEEDED' WHEN i % 100 < 98 THEN 'FAILED_FINAL'
		WHEN i % 100 = 98 THEN 'UNKNOWN' ELSE 'PENDING' END,
	CASE WHEN i % 10000 = 7 THEN 'throttled' WHEN i % 100 < 95 THEN NULL WHEN i % 100 < 98 THEN 'rejected'
		WHEN i % 100 = 98 THEN 'ambiguous' END,
	NULL, CASE WHEN i % 100 < 95 AND i % 10000 <> 7 THEN 'R-' || i END, 1 + (i % 3), 'prn', 'key', 'wf-' || (i / 3), 'step-' || (i % 3),
	?::timestamptz + i * interval '1 second', ?::timestamptz + i * interval '1 second', ?::timestamptz + i * interval '1 second',
	'dk_' || md5(i::text)
FROM generate_series(1, ?) i`, base, base, base, n).Error)
	require.NoError(t, db.Exec("ANALYZE operations").Error)
}

// explainAnalyze runs EXPLAIN ANALYZE of stmt and returns its execution time and the plan's
// first lines, shortened.
func explainAnalyze(t *testing.T, db *gorm.DB, stmt string) (string, string) {
	t.Helper()
	var lines []string
	require.NoError(t, db.Raw("EXPLAIN (ANALYZE, COSTS OFF) "+stmt).Scan(&lines).Error)
	exec, plan := "", []string{}
	for _, line := range lines {
		switch s := strings.TrimSpace(line); {
		case strings.HasPrefix(s, "Execution Time:"):
			exec = strings.TrimSpace(strings.TrimPrefix(s, "Execution Time:"))
		case strings.Contains(s, "Scan") || strings.Contains(s, "Sort  (") || strings.Contains(s, "BitmapAnd"):
			if i := strings.Index(s, " (actual"); i > 0 {
				s = s[:i]
			}
			plan = append(plan, strings.TrimPrefix(s, "-> "))
		}
	}
	return exec, strings.Join(plan, " ← ")
}

// trigramAlternative measures what a trigram index would buy the key search, and cost: the
// same miss with LIKE over a GIN (pg_trgm) index, and 10,000 inserts without and with it.
func trigramAlternative(t *testing.T, db *gorm.DB, n int) {
	t.Helper()
	insert := func(from int) time.Duration {
		s := time.Now()
		require.NoError(t, db.Exec(`INSERT INTO operations (id, tenant, op_key, tool, fingerprint, params, state, principal_id,
	api_key_id, created_at, updated_at) SELECT 'op_z' || lpad(i::text, 25, '0'), 't1', 'extra-' || i || ':refund', 'refunds.issue',
	'f', '{"order_id":"' || i || '"}', 'PENDING', 'p', 'k', now(), now() FROM generate_series(?::int, ?::int) i`, from, from+9_999).Error)
		return time.Since(s)
	}
	without := insert(1)
	if err := db.Exec("CREATE EXTENSION IF NOT EXISTS pg_trgm").Error; err != nil {
		t.Logf("pg_trgm: %v", err)
		return
	}
	s := time.Now()
	require.NoError(t, db.Exec("CREATE INDEX operations_key_trgm ON operations USING gin (lower(op_key) gin_trgm_ops)").Error)
	require.NoError(t, db.Exec("ANALYZE operations").Error)
	t.Logf("trigram index built in %s", time.Since(s).Round(time.Millisecond))
	with := insert(20_001)
	exec, plan := explainAnalyze(t, db, `SELECT * FROM operations WHERE lower(op_key) LIKE '%no-such-key%' ORDER BY id DESC LIMIT 51`)
	t.Logf("with a trigram index: key miss %s (%s)", exec, plan)
	exec, plan = explainAnalyze(t, db, fmt.Sprintf(`SELECT * FROM operations WHERE lower(op_key) LIKE '%%order-%d:%%' ORDER BY id DESC LIMIT 51`, n/10))
	t.Logf("with a trigram index: key old hit %s (%s)", exec, plan)
	t.Logf("10,000 inserts in one statement: %s without the trigram index, %s with it", without.Round(time.Millisecond), with.Round(time.Millisecond))
}
