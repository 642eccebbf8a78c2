package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// growth runs new operations until total have been answered, from concurrency goroutines,
// and reports the rate over each window of operations in the order they finished: the curve
// of a ledger that grows from what it held to total operations more. The first row is the
// rate over the first window, the last the rate over all of them; a gateway whose cost per
// operation grows with its history shows a falling curve (docs/PERFORMANCE.md).
func growth(ctx context.Context, sc scenario, concurrency int, total, window int64) ([]result, error) {
	if total <= 0 || window <= 0 || window > total {
		return nil, fmt.Errorf("growth: want 0 < window (%d) ≤ total (%d)", window, total)
	}
	var next, done, errs atomic.Int64
	finished := make([]time.Time, total) // finished[k]: when the (k+1)-th answer arrived
	var wg sync.WaitGroup
	start, cpu := time.Now(), processCPU()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > total {
					return
				}
				if err := sc.fn(ctx, i); err != nil {
					errs.Add(1)
				}
				finished[done.Add(1)-1] = time.Now()
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cpuUsed := processCPU() - cpu
	rate := func(from, to int64) float64 { // operations from+1 … to
		begin := start
		if from > 0 {
			begin = finished[from-1]
		}
		return float64(to-from) / finished[to-1].Sub(begin).Seconds()
	}
	var out []result
	for from := int64(0); from < total; from += window {
		to := min(from+window, total)
		out = append(out, result{Name: fmt.Sprintf("%s %d–%d", sc.name, from, to), Requests: to - from, PerSecond: rate(from, to)})
	}
	first, all := rate(0, window), rate(0, total)
	out = append(out, result{Name: fmt.Sprintf("%s, all %d", sc.name, total), Requests: total, Errors: errs.Load(),
		PerSecond: all, CPUPerRequest: cpuUsed / time.Duration(total),
		Note: fmt.Sprintf("all ÷ first %d: %.2f", window, all/first)})
	if errs.Load() > 0 {
		return out, fmt.Errorf("growth: %d errors", errs.Load())
	}
	return out, nil
}
