package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
)

// BenchmarkBulkThousand marks 1,000 UNKNOWN operations failed in one bulk decision through the
// console on PostgreSQL: the selection of all matching, the confirmation page, and the apply
// (1,000 compare-and-sets with their audit entries) with its result page. Seeding is not timed.
//
//	go test ./web/ -run '^$' -bench BenchmarkBulkThousand -benchtime 1x
func BenchmarkBulkThousand(b *testing.B) {
	con := consoletest.Start(b, models.Postgres, consoletest.Options{})
	pw := con.User(b, "ravi@example.com", models.RoleReviewer)
	br := con.NewBrowser(b)
	br.MustLogin(b, "ravi@example.com", pw)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tenant := fmt.Sprintf("t%d", i)
		for j := range models.BulkLimit {
			con.Operation(b, consoletest.Seed{Tenant: tenant, Key: fmt.Sprintf("order-%d:refund", j), Tool: "refunds.issue",
				Params: fmt.Sprintf(`{"amount_cents":100,"currency":"EUR","order_id":"%d"}`, j), Unknown: true, Review: true})
		}
		br.Get(b, "/reviews")
		b.StartTimer()
		p := br.Post(b, "/bulk/review?tenant="+tenant, url.Values{"list": {"reviews"}, "all": {"1"}, "bulk_action": {models.ActionMarkFailed}})
		if p.Status != http.StatusSeeOther {
			b.Fatalf("bulk review: %d", p.Status)
		}
		path := p.Header.Get("Location")
		br.Get(b, path)
		if p = br.Post(b, path+"/apply", url.Values{"reason": {"Provider outage 4711."}}); p.Status != http.StatusSeeOther {
			b.Fatalf("apply: %d", p.Status)
		}
		if got := br.Get(b, path).TestIDs("bulk-done"); len(got) != 1 || got[0] != "1000" {
			b.Fatalf("done: %v", got)
		}
	}
}
