package e2e_test

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/toolsimport"
	"github.com/idemgate/idemgate/models"
)

// BenchmarkMCPCatalogueSize measures what one /mcp request costs (wall time and CPU) with 1, 60 and 600 tools in
// the caller's catalogue (the test catalogue's tickets.create, then Stripe's imported tools):
// a ping, a tools/call answered from the ledger (a replay), and a tools/list, whose size it
// reports. The cost of a ping or a call must not grow with the catalogue (docs/MCP.md: within
// 1.5× from 1 to 600 tools). Run it alone: go test ./e2e -run '^$' -bench MCPCatalogueSize.
func BenchmarkMCPCatalogueSize(b *testing.B) {
	doc, err := toolsimport.ReadOpenAPI(stripeSpec(b))
	if err != nil {
		b.Fatal(err)
	}
	_, stripe := importStripe(b, doc)
	items := stripe[strings.Index(stripe, "\ntools:\n")+len("\ntools:\n"):]
	stripeTools := strings.Split(items, "\n  - name: ")
	b.Setenv("STRIPE_SECRET_KEY", "sk_test_bench")
	for _, n := range []int{1, 60, 600} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			tools := stripeConnection + gatewaytest.Tools
			// The test catalogue has five tools of its own: Stripe's fill the rest up to n (594
			// of them at most, so the largest catalogue is 599).
			extra := min(max(n-testCatalogueTools, 0), len(stripeTools)-1)
			if extra > 0 {
				tools += "  - name: " + strings.Join(stripeTools[1:1+extra], "\n  - name: ")
			}
			tools = strings.ReplaceAll(tools, "{{STRIPE}}", "http://127.0.0.1:1")
			// The test catalogue's own tools are five; keep only tickets.create for n = 1.
			g := gatewaytest.StartWith(b, models.SQLite, gatewaytest.Options{Tools: tools})
			key := g.Key
			if n == 1 {
				key = g.NewTenant(b, "acme", "one-tool", []string{"tickets.create"})
			}
			h := map[string]string{"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
			do := func(b *testing.B, body string) int {
				r := g.Do(b, http.MethodPost, "/mcp", key, h, body)
				if r.Status != http.StatusOK {
					b.Fatalf("status %d: %s", r.Status, r.Body)
				}
				return len(r.Body)
			}
			call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tickets__create","arguments":{"subject":"s","operation_key":"bench-1"}}}`
			do(b, call)
			list := do(b, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`)
			b.Run("ping", func(b *testing.B) {
				start := cpuTime(b)
				for range b.N {
					do(b, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
				}
				b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
			})
			b.Run("call", func(b *testing.B) {
				start := cpuTime(b)
				for range b.N {
					do(b, call)
				}
				b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
			})
			b.Run("list", func(b *testing.B) {
				start := cpuTime(b)
				for range b.N {
					do(b, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`)
				}
				b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(list), "list-bytes")
			})
		})
	}
}

// testCatalogueTools is how many tools gatewaytest.Tools declares (tickets.create and .close,
// refunds.issue, email.send, payments.payout).
const testCatalogueTools = 5

// cpuTime is the CPU the process has used so far (user and system), in nanoseconds: client and
// gateway share the process, so per request it is what both sides cost together.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
