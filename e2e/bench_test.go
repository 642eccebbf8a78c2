// The benchmarks here measure the agent API end to end: the real HTTP stack, executor and
// ledger on each engine, with the sandbox downstream on loopback.
package e2e_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
)

// ticket is the params of every benchmarked tickets.create call.
const ticket = `{"subject":"Printer on fire","priority":"high"}`

// eachEngine runs fn as a sub-benchmark on every engine, each with a gateway of its own.
func eachEngine(b *testing.B, fn func(b *testing.B, g *gatewaytest.Gateway)) {
	for _, d := range testdb.Dialects {
		b.Run(string(d), func(b *testing.B) {
			g := gatewaytest.Start(b, d)
			b.ReportAllocs()
			fn(b, g)
		})
	}
}

// BenchmarkNewOperation submits a new operation per iteration: key look-up, the claiming
// submit, one downstream call and the recorded outcome, answered 201.
func BenchmarkNewOperation(b *testing.B) {
	eachEngine(b, func(b *testing.B, g *gatewaytest.Gateway) {
		// Start runs once per sub-benchmark call, but the sandbox and ledger live until its
		// end, so keys carry the round as well as the iteration.
		round := models.NewAttemptID()
		b.ResetTimer()
		for i := range b.N {
			r := g.Submit(b, fmt.Sprintf("bench-%s-%d", round, i), "tickets.create", ticket, nil)
			if r.Status != http.StatusCreated {
				b.Fatalf("iteration %d: status %d: %s", i, r.Status, r.Body)
			}
		}
		b.StopTimer()
		if got := g.Sandbox.Committed("tickets"); got != b.N {
			b.Fatalf("%d tickets committed for %d operations", got, b.N)
		}
	})
}

// BenchmarkReplay repeats one terminal operation's key: one ledger read, answered 200.
func BenchmarkReplay(b *testing.B) {
	eachEngine(b, func(b *testing.B, g *gatewaytest.Gateway) {
		const key = "bench-replay"
		if r := g.Submit(b, key, "tickets.create", ticket, nil); r.Status != http.StatusCreated {
			b.Fatalf("first submit: status %d: %s", r.Status, r.Body)
		}
		b.ResetTimer()
		for i := range b.N {
			r := g.Submit(b, key, "tickets.create", ticket, nil)
			if r.Status != http.StatusOK || r.Header.Get("Idempotent-Replayed") != "true" {
				b.Fatalf("iteration %d: status %d: %s", i, r.Status, r.Body)
			}
		}
		b.StopTimer()
		if got := g.Sandbox.Committed("tickets"); got != 1 {
			b.Fatalf("%d tickets committed for one key", got)
		}
	})
}
