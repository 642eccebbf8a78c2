package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/models"
)

// planScenario measures what a gateway that started on an empty ledger answers replays at,
// once the ledger has grown, against a fresh process on the same ledger (docs/PERFORMANCE.md,
// The replay's plan). PostgreSQL caches a statement's plan per connection; one made while the
// table was empty fits an empty table. The gateway g must have started on a ledger with no
// operations. Autovacuum is switched off for the operations table meanwhile (and on again at
// the end), as on a fresh installation whose first burst has not yet been analysed: an ANALYZE
// would invalidate the cached plans and hide the difference.
//
// Steps: replays of one key warm every connection's plans on the empty table; new operations
// for d grow the ledger; replays of random keys among them for d on this gateway, then on a
// second gateway started now (new connections, nothing cached) on the same ledger, then on this
// gateway again.
func planScenario(ctx context.Context, g *gateway, dsn string, concurrency int, d time.Duration) ([]result, error) {
	if g.dialect != string(models.Postgres) {
		return nil, fmt.Errorf("the plan scenario needs a PostgreSQL --database")
	}
	var ops int64
	if err := g.db.WithContext(ctx).Raw("SELECT count(*) FROM operations").Scan(&ops).Error; err != nil {
		return nil, err
	}
	if ops != 0 {
		return nil, fmt.Errorf("the plan scenario needs an empty ledger; this one holds %d operations", ops)
	}
	if err := g.db.WithContext(ctx).Exec("ALTER TABLE operations SET (autovacuum_enabled = false)").Error; err != nil {
		return nil, err
	}
	defer g.db.Exec("ALTER TABLE operations RESET (autovacuum_enabled)")

	warm, err := drive(ctx, scenario{name: "plan: replays of one key, empty ledger", fn: g.replay}, concurrency, 2*time.Second)
	if err != nil {
		return nil, err
	}
	burst, err := drive(ctx, scenario{name: "plan: new operations into it", fn: g.newOperation}, concurrency, d)
	if err != nil {
		return nil, err
	}
	n := burst.Requests
	if n == 0 {
		return nil, fmt.Errorf("the plan scenario's burst recorded no operation")
	}
	replayOf := func(h *gateway) func(context.Context, int64) error {
		return func(ctx context.Context, _ int64) error {
			i := strconv.FormatInt(rand.Int64N(n)+1, 10)
			status, err := h.post(ctx, h.url+"/v1/operations", "new-"+g.run+"-"+i, `{"tool":"bench.write","params":{"n":`+i+`}}`, true)
			return expect(status, err, http.StatusOK, http.StatusCreated) // the last few may have been cut off
		}
	}
	old, err := drive(ctx, scenario{name: "plan: replays, same process", fn: replayOf(g)}, concurrency, d)
	if err != nil {
		return nil, err
	}
	fresh, err := startGateway(ctx, dsn, g.tenant, "none")
	if err != nil {
		return nil, err
	}
	defer fresh.close()
	fresh.run = g.run
	again, err := drive(ctx, scenario{name: "plan: replays, fresh process", fn: replayOf(fresh)}, concurrency, d)
	if err != nil {
		return nil, err
	}
	// The same process once more: the first leg ran while the burst's writes were still being
	// checkpointed, so drift alone would favour the fresh process.
	later, err := drive(ctx, scenario{name: "plan: replays, same process again", fn: replayOf(g)}, concurrency, d)
	if err != nil {
		return nil, err
	}
	old.Note = fmt.Sprintf("%d operations; %.2f of the fresh process's rate", n, old.PerSecond/again.PerSecond)
	later.Note = fmt.Sprintf("%.2f of the fresh process's rate", later.PerSecond/again.PerSecond)
	return []result{warm, burst, old, again, later}, nil
}
