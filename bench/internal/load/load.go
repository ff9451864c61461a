// Package load runs open-loop load: operations are started on a fixed schedule whatever
// the previous ones are doing, and each latency is measured from the moment the operation
// was due, so a slow server cannot hide its queueing (no coordinated omission).
package load

import (
	"context"
	"sync"
	"time"

	"github.com/switchyard-ai/switchyard/bench/internal/stats"
)

// Result of one run at a fixed rate.
type Result struct {
	Rate     float64 // target operations per second
	Achieved float64 // completed operations per second
	Errors   int
	Latency  stats.Summary
	Elapsed  time.Duration
}

// Sustained reports whether the run kept up: every operation succeeded, the achieved
// rate is within 2% of the target, and p99 stayed under maxP99.
func (r Result) Sustained(maxP99 time.Duration) bool {
	return r.Errors == 0 && r.Achieved >= 0.98*r.Rate && r.Latency.P99 <= maxP99
}

// Run calls op at rate per second for d and returns the latencies. At most maxInFlight
// operations run at once; an operation that cannot start because of that bound counts its
// wait in its latency.
func Run(ctx context.Context, rate float64, d time.Duration, maxInFlight int, op func(context.Context) error) Result {
	n := int(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	lat := make([]time.Duration, n)
	errs := make([]bool, n)
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		due := start.Add(time.Duration(i) * interval)
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		if ctx.Err() != nil {
			n = i
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(i int, due time.Time) {
			defer wg.Done()
			defer func() { <-sem }()
			err := op(ctx)
			lat[i] = time.Since(due)
			errs[i] = err != nil
		}(i, due)
	}
	wg.Wait()
	elapsed := time.Since(start)
	res := Result{Rate: rate, Elapsed: elapsed, Achieved: float64(n) / elapsed.Seconds()}
	ok := lat[:0]
	for i := 0; i < n; i++ {
		if errs[i] {
			res.Errors++
			continue
		}
		ok = append(ok, lat[i])
	}
	res.Latency = stats.Summarize(ok)
	return res
}
