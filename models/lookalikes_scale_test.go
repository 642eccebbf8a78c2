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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// TestLookAlikesScale preloads a PostgreSQL ledger with N operations (IDEMGATE_SEARCH_SCALE, as
// TestSearchScale) in which every 1,000th operation repeats the params of the one before it
// under another key, and times the look-alike look-ups as the console runs them: an operation's
// panel (LookAlikes) for an old and a recent one, with and without look-alikes, and a queue
// page's marks (HasLookAlikes over 50 operations), with EXPLAIN ANALYZE of the panel's
// statement. It prints docs/PERFORMANCE.md's "Look-alikes on 1,000,000 operations" and asserts
// the index is used, never a time.
//
//	IDEMGATE_SEARCH_SCALE=1000000 go test -count=1 -timeout 30m -run TestLookAlikesScale -v ./models/
func TestLookAlikesScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(searchScaleEnv))
	if n <= 0 {
		t.Skipf("%s not set: the look-alikes are measured on a large ledger only when asked", searchScaleEnv)
	}
	ctx := context.Background()
	db := testdb.Open(t, models.Postgres)
	l := models.New(models.Config{DB: db, Dialect: models.Postgres})
	start := time.Now()
	preloadSearch(t, db, n)
	// Every 1,000th operation takes the fingerprint of the one four before it (the same tenant and
	// tool, four seconds earlier): the same call under a second key.
	require.NoError(t, db.Exec(`UPDATE operations o SET fingerprint = p.fingerprint FROM operations p
		WHERE (substr(o.id, 4))::bigint % 1000 = 0
		AND p.id = 'op_' || lpad(((substr(o.id, 4))::bigint - 4)::text, 26, '0')`).Error)
	require.NoError(t, db.Exec("ANALYZE operations").Error)
	t.Logf("preloaded %d operations in %s", n, time.Since(start).Round(time.Second))

	var last string
	require.NoError(t, db.Callback().Query().After("gorm:query").Register("scale:lookalikes", func(tx *gorm.DB) {
		if strings.Contains(tx.Statement.SQL.String(), "fingerprint = ") {
			last = tx.Dialector.Explain(tx.Statement.SQL.String(), tx.Statement.Vars...)
		}
	}))
	get := func(i int) *models.Operation {
		op, err := l.Get(ctx, "t"+strconv.Itoa(i%4), opID(i))
		require.NoError(t, err)
		return op
	}
	old, recent := (n/10)/1000*1000, (n-100)/1000*1000
	var table strings.Builder
	table.WriteString("| look-up | found | time (median of 3) | EXPLAIN ANALYZE | plan |\n|---|---|---|---|---|\n")
	for _, k := range []struct {
		name string
		op   *models.Operation
		want int
	}{
		{"an old operation with a look-alike", get(old), 1},
		{"an old operation without", get(old + 7), 0},
		{"a recent operation with a look-alike", get(recent), 1},
		{"a recent operation without", get(recent + 7), 0},
	} {
		var took []time.Duration
		var found int
		for range 3 {
			s := time.Now()
			got, _, err := l.LookAlikes(ctx, models.AllTenants(), k.op)
			took = append(took, time.Since(s))
			require.NoError(t, err)
			found = len(got)
		}
		assert.Equal(t, k.want, found, k.name)
		slices.Sort(took)
		exec, plan := explainAnalyze(t, db, last)
		assert.Contains(t, plan, "operations_lookalike", "%s: the look-up is a probe of the index", k.name)
		fmt.Fprintf(&table, "| %s | %d | %s | %s | %s |\n", k.name, found, took[1].Round(10*time.Microsecond), exec, plan)
	}
	var page []*models.Operation
	first := max(1000, recent-49*1000)
	for i := range 50 {
		page = append(page, get(first+(i/2)*1000+(i%2)*7)) // every other one has a look-alike
	}
	var took []time.Duration
	var marked int
	for range 3 {
		s := time.Now()
		m, err := l.HasLookAlikes(ctx, models.AllTenants(), page)
		took = append(took, time.Since(s))
		require.NoError(t, err)
		marked = len(m)
	}
	slices.Sort(took)
	fmt.Fprintf(&table, "| a queue page's marks (50 operations) | %d | %s | | |\n", marked, took[1].Round(10*time.Microsecond))
	t.Logf("\n%s", table.String())
}
