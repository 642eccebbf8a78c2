package export_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/require"
)

// eventsPerOp is how many events each bulk-seeded operation has: created, attempt_started,
// attempt_finished, state_changed and a review_action, as a settled operation might.
const eventsPerOp = 5

// bulkSeed inserts ops operations numbered from first, each with one attempt and eventsPerOp
// events, straight in SQL in large multi-row statements: a million events in seconds, where
// the API would take minutes. It is for volume only; the rows are shaped like the ledger's.
func bulkSeed(t testing.TB, l *models.Ledger, tenant string, first, ops int) {
	t.Helper()
	sqlDB, err := l.DB().DB()
	require.NoError(t, err)
	ph := placeholders(l.Dialect())
	const chunk = 1000
	for start := first; start < first+ops; start += chunk {
		n := min(chunk, first+ops-start)
		tx, err := sqlDB.BeginTx(context.Background(), nil)
		require.NoError(t, err)
		insert(t, tx, ph, "operations", []string{"id", "tenant", "op_key", "tool", "fingerprint", "params", "result", "state",
			"downstream_status", "downstream_ref", "attempts", "principal_id", "api_key_id", "created_at", "updated_at", "completed_at"},
			n, func(i int) []any {
				at := benchTime(start + i)
				return []any{benchOpID(start + i), tenant, fmt.Sprintf("key-%d", start+i), "payments.charge", "sha256:bench",
					`{"amount":1999,"card_number":"` + acmeCard + `","memo":"bench operation ` + fmt.Sprint(start+i) + `"}`,
					`{"id":"R-1","status":"issued"}`, string(models.StateSucceeded), 201, "R-1", 1, "prn_bench", "key_bench", at, at, at}
			})
		insert(t, tx, ph, "attempts", []string{"id", "operation_id", "number", "fence", "worker", "started_at", "finished_at",
			"class", "downstream_status", "latency_ms", "trace_id"},
			n, func(i int) []any {
				at := benchTime(start + i)
				return []any{fmt.Sprintf("att_bench%09d", start+i), benchOpID(start + i), 1, 1, "w1", at, at, "succeeded", 201, 42, "trace"}
			})
		types := [eventsPerOp]string{"created", "attempt_started", "attempt_finished", "state_changed", "review_action"}
		insert(t, tx, ph, "events", []string{"operation_id", "tenant", "at", "type", "to_state", "attempt", "actor", "detail"},
			n*eventsPerOp, func(i int) []any {
				op := start + i/eventsPerOp
				return []any{benchOpID(op), tenant, benchTime(op), types[i%eventsPerOp], string(models.StateSucceeded), 1, "worker:w1",
					`{"attempt_id":"att_bench","class":"succeeded","latency_ms":42}`}
			})
		require.NoError(t, tx.Commit())
	}
}

func benchOpID(i int) string { return fmt.Sprintf("op_bench%09d", i) }

func benchTime(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }

// insert writes n rows into table with multi-row INSERTs of a few hundred parameters each: the
// SQLite driver binds parameters in time quadratic in their number.
func insert(t testing.TB, tx *sql.Tx, ph func(int) string, table string, cols []string, n int, row func(i int) []any) {
	t.Helper()
	per := 500 / len(cols)
	for start := 0; start < n; start += per {
		m := min(per, n-start)
		var sb strings.Builder
		fmt.Fprintf(&sb, "INSERT INTO %s (%s) VALUES ", table, strings.Join(cols, ", "))
		args := make([]any, 0, m*len(cols))
		for i := range m {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(")
			for j := range cols {
				if j > 0 {
					sb.WriteString(", ")
				}
				sb.WriteString(ph(len(args) + j + 1))
			}
			sb.WriteString(")")
			args = append(args, row(start+i)...)
		}
		_, err := tx.Exec(sb.String(), args...)
		require.NoError(t, err, "insert into %s", table)
	}
}

// placeholders returns the engine's spelling of the nth bind parameter.
func placeholders(d models.Dialect) func(int) string {
	if d == models.Postgres {
		return func(n int) string { return fmt.Sprintf("$%d", n) }
	}
	return func(int) string { return "?" }
}
