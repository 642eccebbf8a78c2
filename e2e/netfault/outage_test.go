package netfault_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDownstreamOutageBurnsNoKeys (issue 48 item 3): the refunds service's link is cut both
// ways (connection attempts time out rather than being refused) for 20 s
// (IDEMGATE_NETFAULT_OUTAGE_SECONDS) while agents submit new keys, with max_attempts 2. No
// operation ends FAILED_FINAL: nothing was sent, and those attempts count against
// retry.unsent_for (10m), not max_attempts; the circuit breaker holds them PENDING and bounds
// the connection attempts in flight. Once the link is back every operation runs, once.
func TestDownstreamOutageBurnsNoKeys(t *testing.T) {
	requireNetAdmin(t)
	seconds := netfaultSeconds(t, "IDEMGATE_NETFAULT_OUTAGE_SECONDS", 20, 300)
	l := newLink(t)
	ln := listenIn(t, l.far, l.farIP+":8080")
	down := &refunds{byRef: map[string]int{}}
	srv := &http.Server{Handler: down, ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	tools := strings.ReplaceAll(strings.Replace(lossyTools, "max_attempts: 3", "max_attempts: 2", 1), "{{DOWN}}", l.farIP+":8080")
	g := gatewaytest.StartWith(t, models.Postgres, gatewaytest.Options{Recovery: true, DownstreamDial: dialFrom(l.near),
		Catalog: func(string) (*catalog.Catalog, error) { return catalog.Load([]byte(tools)) }})

	require.NoError(t, l.blackhole())
	healed := false
	defer func() {
		if !healed {
			_ = l.unblackhole()
		}
	}()
	goroutinesBefore := runtime.NumGoroutine()
	ctx, stop := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second)
	defer stop()
	faultStart := time.Now()
	ready := probeReadyz(ctx, g.Client, func() []string { return []string{g.URL} })
	var ids sync.Map
	h := newHistory()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				key := fmt.Sprintf("agent-%d:refund-%d", w, i)
				start := time.Now()
				r := g.Submit(t, key, "refunds.issue", fmt.Sprintf(`{"order":%q}`, key), map[string]string{"Prefer": "wait=0"})
				h.add(w, key, start, r.Status, r.Body, nil)
				if assert.Equal(t, http.StatusAccepted, r.Status, "held PENDING, answered 202: %s", r.Body) {
					ids.Store(key, r.JSON(t)["id"].(string))
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	goroutinesDuring := runtime.NumGoroutine()
	var all []string
	ids.Range(func(_, v any) bool { all = append(all, v.(string)); return true })
	require.NotEmpty(t, all)
	attemptsDuring := 0
	for _, id := range all {
		op, err := g.Ledger.Get(context.Background(), g.Tenant, id)
		require.NoError(t, err)
		attemptsDuring += op.Attempts
		assert.NotEqual(t, models.StateFailedFinal, op.State, "%s ended FAILED_FINAL though nothing was sent", op.Key)
	}

	require.NoError(t, l.unblackhole())
	healed = true
	healedAt := time.Now()
	settled := settle(t, g.Ledger, g.Tenant, 2*time.Minute, false)
	for _, op := range settled.ops {
		assert.Equal(t, models.StateSucceeded, op.State, "%s ran once the link was back", op.Key)
	}
	// Every refund paid once, by the operation that recorded it, and every answer agreeing
	// with the ledger.
	v := h.check(t, settled, down, false)
	at := h.answerTimes(faultStart, healedAt, 0.5, 0.99, 1)
	t.Logf("%d s outage: %d operations held PENDING with %d attempts (none FAILED_FINAL); goroutines %d before, %d at the end of the outage; "+
		"answered in p50 %s, p99 %s, max %s during it, /readyz within %s; all SUCCEEDED, paid once, %s after the link came back; %s",
		seconds, len(all), attemptsDuring, goroutinesBefore, goroutinesDuring, at[0], at[1], at[2], ready(), settled.took.Round(100*time.Millisecond), v)
}
