package export_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers/export"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExportMemory proves that an export's memory does not grow with its size. It is opt-in:
//
//	IDEMGATE_EXPORT_EVENTS=1000000 go test ./export -run TestExportMemory -v -timeout 30m
//
// seeds a tenth of the events, exports them in both formats to io.Discard, then seeds the rest
// and exports again, reporting events per second and the peak resident set (VmHWM, reset before
// each export) and peak Go heap of each run. IDEMGATE_EXPORT_ENGINE=postgres runs it on
// PostgreSQL instead of SQLite.
func TestExportMemory(t *testing.T) {
	total, _ := strconv.Atoi(os.Getenv("IDEMGATE_EXPORT_EVENTS"))
	if total <= 0 {
		t.Skip("set IDEMGATE_EXPORT_EVENTS (e.g. 1000000) to run the export memory test")
	}
	d := models.SQLite
	if os.Getenv("IDEMGATE_EXPORT_ENGINE") == "postgres" {
		d = models.Postgres
	}
	ctx := context.Background()
	cat, err := catalog.Load([]byte(toolsYAML))
	require.NoError(t, err)
	l := testdb.Ledger(t, d)
	_, err = l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme")
	require.NoError(t, err)

	seeded := 0
	for _, events := range []int{total / 10, total} {
		ops := events/eventsPerOp - seeded
		start := time.Now()
		bulkSeed(t, l, "acme", seeded, ops)
		seeded += ops
		t.Logf("%s: seeded %d operations, %d events in %s", d, seeded, seeded*eventsPerOp, time.Since(start).Round(time.Millisecond))
		for _, format := range []export.Format{export.NDJSON, export.CSV} {
			m := measure(t, func() {
				x := export.Exporter{Ledger: l, Catalog: cat}
				res, err := x.Write(ctx, io.Discard, export.Request{Format: format, Scope: models.AllTenants(), Actor: "cli"})
				require.NoError(t, err)
				require.Equal(t, int64(seeded*eventsPerOp), res.Events)
			})
			evs := seeded * eventsPerOp
			t.Logf("%s %-6s %8d events: %s, %.0f events/s, peak RSS %.1f MiB, peak heap in use %.1f MiB",
				d, format, evs, m.elapsed.Round(time.Millisecond), float64(evs)/m.elapsed.Seconds(), mib(m.peakRSS), mib(m.peakHeap))
			assert.Less(t, m.peakRSS, uint64(100<<20), "peak RSS must stay under 100 MiB")
		}
	}
}

// usage is what one measured run took.
type usage struct {
	elapsed           time.Duration
	peakRSS, peakHeap uint64
}

// measure runs fn and reports its peak resident set and Go heap. The kernel's high-water mark
// is reset first (clear_refs 5), so what seeding used does not count; sampling VmRSS covers
// kernels without that reset.
func measure(t *testing.T, fn func()) usage {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	reset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	var mu sync.Mutex
	var u usage
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			rss := procStatus(t, "VmRSS")
			mu.Lock()
			u.peakHeap, u.peakRSS = max(u.peakHeap, ms.HeapInuse), max(u.peakRSS, rss)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	fn()
	u.elapsed = time.Since(start)
	close(done)
	wg.Wait()
	if reset {
		u.peakRSS = max(u.peakRSS, procStatus(t, "VmHWM"))
	}
	return u
}

// procStatus reads a size in bytes from /proc/self/status.
func procStatus(t *testing.T, field string) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb uint64
			_, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
