package netfault_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// ledgerDialFrom dials PostgreSQL from namespace ns as the ledger's own dialer does on Linux:
// keepalives every 5 s, 2 unanswered drop the connection, and TCP_USER_TIMEOUT 15 s.
func ledgerDialFrom(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := in(ns, func() error {
			d := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 5 * time.Second, Count: 2}}
			var err error
			if c, err = d.DialContext(ctx, network, addr); err != nil {
				return err
			}
			raw, err := c.(*net.TCPConn).SyscallConn()
			if err != nil {
				return err
			}
			var serr error
			if err := raw.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, 15000)
			}); err != nil {
				return err
			}
			return serr
		})
		return c, err
	}
}

// TestPostgresBlackholed (issue 48 item 2): the gateway's PostgreSQL, in a namespace of its
// own, is cut off both ways for 30 s (IDEMGATE_NETFAULT_LEDGER_SECONDS). Every request sent
// meanwhile is answered 503 ledger-unavailable (ended by the ledger deadline, not by the
// network's minutes), /readyz answers 503; once the network heals the gateway serves again,
// and PostgreSQL soon holds no more idemgate backends than the gateway's pool: the ones whose
// client vanished were dropped by the server's keepalives and tcp_user_timeout, the session
// parameters the ledger sets (without them they live for the kernel's two hours).
func TestPostgresBlackholed(t *testing.T) {
	requireNetAdmin(t)
	seconds := netfaultSeconds(t, "IDEMGATE_NETFAULT_LEDGER_SECONDS", 30, 60)
	l := newLink(t)
	pg, err := proctest.NewPostgresIn(t, l.far, l.farIP)
	if err != nil {
		t.Skipf("cannot run PostgreSQL in a namespace here: %v", err)
	}
	ctx := context.Background()
	db, d, err := models.OpenWith(ctx, pg.DSN, models.Options{Dial: ledgerDialFrom(l.near)})
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	t.Cleanup(func() { sqlDB.Close() })
	require.NoError(t, models.Migrate(ctx, db, d))
	g := gatewaytest.StartWith(t, d, gatewaytest.Options{DB: db})
	const params = `{"subject":"printer on fire"}`
	h := newHistory()
	submit := func(client int, key string) gatewaytest.Response {
		start := time.Now()
		r := g.Submit(t, key, "tickets.create", params, nil)
		h.add(client, key, start, r.Status, r.Body, nil)
		return r
	}
	// Load before the cut, so the pool holds connections the cut leaves without a peer.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			r := submit(i, fmt.Sprintf("before-%d", i))
			assert.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
		})
	}
	wg.Wait()

	require.NoError(t, l.blackhole())
	cut := time.Now()
	healed := false
	defer func() {
		if !healed {
			_ = l.unblackhole()
		}
	}()
	var mu sync.Mutex
	slowest := time.Duration(0)
	statuses := map[int]int{}
	for i := range 16 {
		wg.Go(func() {
			start := time.Now()
			r := submit(i, fmt.Sprintf("during-%d", i))
			mu.Lock()
			defer mu.Unlock()
			slowest = max(slowest, time.Since(start))
			statuses[r.Status]++
		})
	}
	wg.Wait()
	start := time.Now()
	ready := g.Do(t, http.MethodGet, "/readyz", "", nil, "").Status
	readyTook := time.Since(start)
	start = time.Now()
	readyAgain := g.Do(t, http.MethodGet, "/readyz", "", nil, "").Status
	readyAgainTook := time.Since(start)
	assert.Equal(t, map[int]int{http.StatusServiceUnavailable: 16}, statuses, "every request answered 503 during the cut")
	assert.Equal(t, http.StatusServiceUnavailable, ready)
	assert.Equal(t, http.StatusServiceUnavailable, readyAgain)

	time.Sleep(time.Until(cut.Add(time.Duration(seconds) * time.Second)))
	require.NoError(t, l.unblackhole())
	healed = true
	healedAt := time.Now()
	gatewaytest.Eventually(t, time.Minute, "the gateway serves again", func() bool {
		return submit(0, "after").Status == http.StatusCreated
	})
	recovered := time.Since(healedAt)
	var backends, pool int
	gatewaytest.Eventually(t, time.Minute, "no more idemgate backends than the gateway's pool holds", func() bool {
		var n int64
		if err := db.Raw("SELECT count(*) FROM pg_stat_activity WHERE application_name = ?", models.PoolApplicationName).Scan(&n).Error; err != nil {
			return false
		}
		backends, pool = int(n), sqlDB.Stats().OpenConnections
		return backends <= pool
	})
	// Every key's answers agree with the ledger, and every ticket recorded was created once.
	v := h.check(t, settle(t, g.Ledger, g.Tenant, time.Minute, false), sandboxTickets(t, g), false)
	t.Logf("%d s cut: requests answered within %s (all 503), /readyz within %s then %s; serving again %s after the heal; "+
		"%d idemgate backends for a pool of %d, %s after the heal; %s",
		seconds, slowest.Round(time.Millisecond), readyTook.Round(time.Millisecond), readyAgainTook.Round(time.Millisecond),
		recovered.Round(time.Millisecond), backends, pool, time.Since(healedAt).Round(time.Second), v)
}

// tickets is the tickets a sandbox created, by the operation that created each (its
// X-Idemgate-Operation): the checker's downstream for the sandbox's tickets.create.
type tickets struct {
	byOp map[string]int
	n    int
}

func (d tickets) effectsOf(op *models.Operation) int { return d.byOp[op.ID] }
func (d tickets) total() int                         { return d.n }

// sandboxTickets reads the tickets g's sandbox holds.
func sandboxTickets(t *testing.T, g *gatewaytest.Gateway) tickets {
	t.Helper()
	rec := httptest.NewRecorder()
	g.Sandbox.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/tickets", nil))
	require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
	var list struct {
		Tickets []struct {
			Operation string `json:"operation"`
		} `json:"tickets"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
	d := tickets{byOp: map[string]int{}, n: len(list.Tickets)}
	for _, tk := range list.Tickets {
		d.byOp[tk.Operation]++
	}
	return d
}
