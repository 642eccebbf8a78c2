package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
)

// BenchmarkRecoveryTickIdle is what one tick of the escalation and retention sweeps costs on
// an idle ledger, with 1, 60 and 600 tools of one policy (as an imported catalogue has): the
// sweeps query once per distinct policy, so the cost must not grow with the catalogue.
// go test ./jobs -run '^$' -bench RecoveryTickIdle
func BenchmarkRecoveryTickIdle(b *testing.B) {
	for _, d := range testdb.Dialects {
		for _, n := range []int{1, 60, 600} {
			b.Run(fmt.Sprintf("%s/tools=%d", d, n), func(b *testing.B) {
				var file strings.Builder
				file.WriteString("tools:\n")
				for i := range n {
					fmt.Fprintf(&file, "  - name: api.op_%d\n    description: An operation\n    effect: write\n"+
						"    params_schema: {type: object}\n    http: {url: \"http://127.0.0.1:1/op\"}\n"+
						"    reconcile: {url: \"http://127.0.0.1:1/op?ref={{.DownstreamKey}}\"}\n", i)
				}
				cat, err := catalog.Load([]byte(file.String()))
				if err != nil {
					b.Fatal(err)
				}
				db := testdb.Open(b, d)
				l := models.New(models.Config{DB: db, Dialect: d, Key: testdb.Key(b, db)})
				r := jobs.NewRecovery(jobs.NewExecutor(jobs.ExecutorConfig{Ledger: l, Catalog: cat, Worker: "bench"}), jobs.RecoveryConfig{})
				ctx := context.Background()
				b.ResetTimer()
				for range b.N {
					if _, err := r.EscalateOnce(ctx); err != nil {
						b.Fatal(err)
					}
					if _, err := r.RetainOnce(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
