package models_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What keyPlan rests on, on a real PostgreSQL: once the statistics count the operations, the
// plan a connection caches for the key look-up (the generic plan, made without the values)
// uses the unique (tenant, op_key) index. An index added later that wins this look-up (one
// beginning with tenant, say) fails here rather than in production's replays.
func TestKeyLookupCachedPlanUsesTheKeyIndexOnceAnalyzed(t *testing.T) {
	l, _ := setup(t, models.Postgres)
	ctx := context.Background()
	db := l.DB()

	rows, err := l.OperationsRows(ctx)
	require.NoError(t, err)
	assert.Less(t, rows, 1.0, "a new ledger's statistics hold no rows (-1: never analyzed)")
	t.Logf("empty, never analyzed: generic plan %s", genericKeyPlan(t, l))

	require.NoError(t, db.Exec(`INSERT INTO operations (id, tenant, op_key, tool, fingerprint, params, state, attempts,
		ambiguous, fence, principal_id, api_key_id, probes, created_at, updated_at, downstream_key)
		SELECT 'op_' || g, 'acme', 'k-' || g, 'tickets.create', 'sha256:aa', '{}', 'SUCCEEDED', 1, false, 1, p.id, k.id,
			0, now(), now(), 'dk_' || g
		FROM generate_series(1, 5000) g, (SELECT id FROM principals LIMIT 1) p, (SELECT id FROM api_keys LIMIT 1) k`).Error)
	require.NoError(t, db.Exec("ANALYZE operations").Error)
	rows, err = l.OperationsRows(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rows, 1000.0, "the statistics now count the operations")

	plan := genericKeyPlan(t, l)
	assert.Contains(t, plan, "operations_tenant_op_key_key", "the cached plan finds a key through its unique index: %s", plan)
	op, err := l.GetByKey(ctx, "acme", "k-4242")
	require.NoError(t, err)
	assert.Equal(t, "op_4242", op.ID, "and the look-up finds it")
}

// genericKeyPlan is the plan PostgreSQL caches for the key look-up on a connection of l's pool.
func genericKeyPlan(t *testing.T, l *models.Ledger) string {
	t.Helper()
	sqlDB, err := l.DB().DB()
	require.NoError(t, err)
	conn, err := sqlDB.Conn(context.Background())
	require.NoError(t, err)
	defer conn.Close()
	ctx := context.Background()
	_, err = conn.ExecContext(ctx, "PREPARE keyplan(text, text) AS "+models.KeyLookupSQL)
	require.NoError(t, err)
	defer conn.ExecContext(ctx, "DEALLOCATE keyplan") //nolint:errcheck // the connection goes back to the pool either way
	_, err = conn.ExecContext(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	defer conn.ExecContext(ctx, "RESET plan_cache_mode") //nolint:errcheck
	rs, err := conn.QueryContext(ctx, "EXPLAIN EXECUTE keyplan('acme', 'k-1')")
	require.NoError(t, err)
	defer rs.Close()
	var lines []string
	for rs.Next() {
		var line string
		require.NoError(t, rs.Scan(&line))
		lines = append(lines, strings.TrimSpace(line))
	}
	require.NoError(t, rs.Err())
	return strings.Join(lines, " | ")
}
