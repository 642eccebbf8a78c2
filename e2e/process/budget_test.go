package process_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBudgetSurvivesAKilledReplica (issue 49): two `idemgate serve` processes on one PostgreSQL
// ledger charge one budget scope with 200 refunds at once; one is SIGKILLed mid-run, and every
// request it was answering is sent again, with the same key, to the other, as a careful agent
// does. After recovery nothing is counted past the limit, no operation is charged twice, and
// every operation that counts has exactly its one charge: what the budget counts equals what is
// recomputed from the operations themselves.
func TestBudgetSurvivesAKilledReplica(t *testing.T) {
	s := newStack(t, stackOptions{Extra: `
budgets:
  - name: refunds-per-agent
    tools: [refunds.issue]
    per: [principal]
    amount: params.amount_cents
    limit: 50000
    window: 24h
`})
	a := s.serve(t, "serve-a")
	b := s.serve(t, "serve-b")

	const n = 200
	var wg sync.WaitGroup
	var answered atomic.Int64
	statuses := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key, params := fmt.Sprintf("k-%d", i), fmt.Sprintf(`{"order_id":"o-%d","amount_cents":1000,"currency":"EUR"}`, i)
			base := a.URL
			if i%2 == 1 {
				base = b.URL
			}
			for try := 0; try < 30; try++ {
				r, err := s.post(base, key, "refunds.issue", params, map[string]string{"Prefer": "wait=0"})
				if err == nil && r.Status != http.StatusServiceUnavailable {
					statuses[i] = r.Status
					answered.Add(1)
					return
				}
				base = a.URL // the killed replica's requests go to the live one, same key
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	// Mid-run: once a fifth of the requests have their answers, serve-b dies with the rest of
	// its requests in flight.
	eventually(t, 60*time.Second, "a fifth of the answers", func() (bool, string) {
		return answered.Load() >= n/5, fmt.Sprint(answered.Load())
	})
	b.Kill(t)
	wg.Wait()
	counts := map[int]int{}
	for _, st := range statuses {
		counts[st]++
	}
	require.Zero(t, counts[0], "every request was answered in the end: %v", counts)

	// Recovery: the killed replica's leases run out and are reaped by the live one.
	eventually(t, 60*time.Second, "no operation RUNNING", func() (bool, string) {
		var running int64
		require.NoError(t, s.ledger.DB().Raw("SELECT count(*) FROM operations WHERE state = 'RUNNING'").Scan(&running).Error)
		return running == 0, fmt.Sprintf("%d running", running)
	})
	used, err := s.ledger.BudgetUsage(t.Context(), "acme", "refunds-per-agent", "agent", time.Now().Add(-time.Hour))
	require.NoError(t, err)
	assert.LessOrEqual(t, used, int64(50000), "never past the limit without a person (answers %v)", counts)

	var twice, uncharged, counting int64
	require.NoError(t, s.ledger.DB().Raw("SELECT count(*) FROM (SELECT operation_id FROM budget_charges GROUP BY operation_id HAVING count(*) > 1) x").Scan(&twice).Error)
	assert.Zero(t, twice, "no operation charged twice")
	require.NoError(t, s.ledger.DB().Raw("SELECT count(*) FROM operations o WHERE o.state IN ('PENDING','RUNNING','UNKNOWN','SUCCEEDED') "+
		"AND NOT EXISTS (SELECT 1 FROM budget_charges c WHERE c.operation_id = o.id)").Scan(&uncharged).Error)
	assert.Zero(t, uncharged, "every operation that counts was charged: nothing lost")
	require.NoError(t, s.ledger.DB().Raw("SELECT count(*) FROM operations WHERE state IN ('PENDING','RUNNING','UNKNOWN','SUCCEEDED')").Scan(&counting).Error)
	assert.Equal(t, counting*1000, used, "what the budget counts is what the operations recompute to")
	drifts, err := s.ledger.BudgetDrifts(t.Context())
	require.NoError(t, err)
	assert.Empty(t, drifts, "the budget's counter is what the charges recompute to after the kill")
}
