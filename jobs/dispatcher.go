package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/idemgate/idemgate/models"
)

// Dispatcher claims due PENDING operations (retries, approved operations) and runs their
// attempts, at most Concurrency at once per process.
type Dispatcher struct {
	exec     *Executor
	ledger   *models.Ledger
	interval time.Duration
	slots    chan struct{}
	log      *slog.Logger
}

// NewDispatcher returns a dispatcher polling every interval with up to concurrency attempts
// in flight.
func NewDispatcher(exec *Executor, ledger *models.Ledger, interval time.Duration, concurrency int, log *slog.Logger) *Dispatcher {
	if log == nil {
		log = slog.Default()
	}
	return &Dispatcher{exec: exec, ledger: ledger, interval: interval, slots: make(chan struct{}, concurrency), log: log}
}

// Run claims and starts attempts until ctx ends. Attempts already started finish on the
// executor's own context, so Run returning does not cut them short.
func (d *Dispatcher) Run(ctx context.Context) {
	ticker := time.NewTicker(d.interval)
	defer ticker.Stop()
	failing := false
	for {
		n, err := d.tick(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			d.log.Error("dispatcher: claim failed; will keep trying", "err", err)
			failing = true
		case err == nil && failing:
			d.log.Info("dispatcher: ledger reachable again")
			failing = false
		}
		if n > 0 && len(d.slots) < cap(d.slots) {
			continue // more may be due right now
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (d *Dispatcher) tick(ctx context.Context) (int, error) {
	free := cap(d.slots) - len(d.slots)
	if free == 0 {
		return 0, nil
	}
	claimed, err := d.ledger.ClaimDue(ctx, d.exec.Worker(), min(free, 32), d.exec.LeaseFor)
	if err != nil {
		return 0, err
	}
	for _, c := range claimed {
		d.slots <- struct{}{}
		done := d.exec.Start(c)
		go func() {
			<-done
			<-d.slots
		}()
	}
	return len(claimed), nil
}
