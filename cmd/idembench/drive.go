package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// scenario is one kind of request; fn sends request number i and reports whether it got the
// answer the scenario expects.
type scenario struct {
	id   string // as --only names it
	name string
	fn   func(ctx context.Context, i int64) error
}

// result is a scenario's figures.
type result struct {
	Name      string        `json:"name"`
	Requests  int64         `json:"requests"`
	Errors    int64         `json:"errors"`
	PerSecond float64       `json:"per_second"`
	P50       time.Duration `json:"p50_ns"`
	P90       time.Duration `json:"p90_ns"`
	P99       time.Duration `json:"p99_ns"`
	// CPUPerRequest is this process's CPU time (gateway, downstream and load generator
	// together) divided by the requests answered.
	CPUPerRequest time.Duration `json:"cpu_per_request_ns"`
	Note          string        `json:"note,omitempty"`
}

// drive runs sc from concurrency goroutines for d, a bounded loop that stops by itself.
func drive(ctx context.Context, sc scenario, concurrency int, d time.Duration) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var next, errs atomic.Int64
	lat := make([][]time.Duration, concurrency)
	var wg sync.WaitGroup
	start, cpu := time.Now(), processCPU()
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1)
				t0 := time.Now()
				err := sc.fn(ctx, i)
				if ctx.Err() != nil {
					return // cut off by the deadline: neither counted nor timed
				}
				lat[w] = append(lat[w], time.Since(t0))
				if err != nil {
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return summarise(sc.name, slices.Concat(lat...), errs.Load(), time.Since(start), processCPU()-cpu), nil
}

func summarise(name string, all []time.Duration, errs int64, elapsed, cpu time.Duration) result {
	slices.Sort(all)
	r := result{Name: name, Requests: int64(len(all)), Errors: errs}
	if len(all) == 0 {
		return r
	}
	r.PerSecond = float64(len(all)) / elapsed.Seconds()
	q := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	r.P50, r.P90, r.P99 = q(0.50), q(0.90), q(0.99)
	r.CPUPerRequest = cpu / time.Duration(len(all))
	return r
}
