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
	s := schedule(ctx, rate, d, maxInFlight, op)
	return s.result(0)
}

// Paired calls base and op together at every due time, each at rate per second (their
// start order alternates), so both meet the machine in the same moment: a stall of the
// host delays both, and their difference is what op adds over base. It returns each one's
// Result and the per-call differences, op minus base, of the calls where both succeeded.
// maxInFlight bounds each of the two.
func Paired(ctx context.Context, rate float64, d time.Duration, maxInFlight int, base, op func(context.Context) error) (Result, Result, stats.Summary) {
	s := schedule(ctx, rate, d, maxInFlight, base, op)
	var diff []time.Duration
	for i := range s.n {
		if !s.failed[0][i] && !s.failed[1][i] {
			diff = append(diff, s.lat[1][i]-s.lat[0][i])
		}
	}
	return s.result(0), s.result(1), stats.Summarize(diff)
}

// run is one schedule's raw outcome: per op, per due time, the latency and whether it failed.
type run struct {
	rate    float64
	n       int
	lat     [][]time.Duration
	failed  [][]bool
	elapsed time.Duration
}

func schedule(ctx context.Context, rate float64, d time.Duration, maxInFlight int, ops ...func(context.Context) error) run {
	n := int(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	r := run{rate: rate, lat: make([][]time.Duration, len(ops)), failed: make([][]bool, len(ops))}
	sems := make([]chan struct{}, len(ops))
	for k := range ops {
		r.lat[k] = make([]time.Duration, n)
		r.failed[k] = make([]bool, n)
		sems[k] = make(chan struct{}, maxInFlight)
	}
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
		for j := range ops {
			k := (i + j) % len(ops) // alternate which op starts first
			sems[k] <- struct{}{}
			wg.Go(func() {
				defer func() { <-sems[k] }()
				err := ops[k](ctx)
				r.lat[k][i] = time.Since(due)
				r.failed[k][i] = err != nil
			})
		}
	}
	wg.Wait()
	r.n = n
	r.elapsed = time.Since(start)
	return r
}

// result summarises op k of the schedule.
func (r run) result(k int) Result {
	res := Result{Rate: r.rate, Elapsed: r.elapsed, Achieved: float64(r.n) / r.elapsed.Seconds()}
	var ok []time.Duration
	for i := range r.n {
		if r.failed[k][i] {
			res.Errors++
			continue
		}
		ok = append(ok, r.lat[k][i])
	}
	res.Latency = stats.Summarize(ok)
	return res
}

// Closed runs op back to back from workers goroutines for d (closed loop: each worker starts
// its next operation when the previous one answers) and returns what they achieved: the
// most a server delivers at that concurrency, each latency measured from the operation's
// own start. Rate is left zero.
func Closed(ctx context.Context, workers int, d time.Duration, op func(context.Context) error) Result {
	lat := make([][]time.Duration, workers)
	errs := make([]int, workers)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(end) {
				t := time.Now()
				if err := op(ctx); err != nil {
					errs[w]++
					continue
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	res := Result{Elapsed: time.Since(start)}
	var all []time.Duration
	for w := range workers {
		all = append(all, lat[w]...)
		res.Errors += errs[w]
	}
	res.Latency = stats.Summarize(all)
	res.Achieved = float64(len(all)+res.Errors) / res.Elapsed.Seconds()
	return res
}
