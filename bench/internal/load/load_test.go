package load

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestPairedCallsBothAtEveryDueTimeAndDiffersPerCall(t *testing.T) {
	var baseCalls, opCalls atomic.Int64
	base := func(context.Context) error { baseCalls.Add(1); time.Sleep(time.Millisecond); return nil }
	op := func(context.Context) error {
		if opCalls.Add(1)%10 == 0 {
			return errors.New("every tenth call fails")
		}
		time.Sleep(4 * time.Millisecond)
		return nil
	}
	b, o, added := Paired(context.Background(), 200, 250*time.Millisecond, 64, base, op)
	if baseCalls.Load() != 50 || opCalls.Load() != 50 {
		t.Fatalf("calls: base %d, op %d; want 50 each", baseCalls.Load(), opCalls.Load())
	}
	if b.Errors != 0 || o.Errors != 5 {
		t.Fatalf("errors: base %d, op %d; want 0 and 5", b.Errors, o.Errors)
	}
	if added.N != 45 {
		t.Fatalf("paired differences: %d; want 45 (pairs where both succeeded)", added.N)
	}
	// Every base call takes at least 1 ms, so each difference is at least 1 ms below its op
	// call's own latency: the differences are op minus base of the same due time.
	if added.P50 > o.Latency.P50-time.Millisecond || added.Max > o.Latency.Max-time.Millisecond {
		t.Fatalf("differences p50 %s max %s; op's own latency p50 %s max %s", added.P50, added.Max, o.Latency.P50, o.Latency.Max)
	}
	if added.P50 <= 0 {
		t.Fatalf("median difference %s; op sleeps 3 ms longer than base", added.P50)
	}
}

func TestClosedRunsBackToBackAndCountsErrors(t *testing.T) {
	var calls atomic.Int64
	op := func(context.Context) error {
		time.Sleep(2 * time.Millisecond)
		if calls.Add(1)%4 == 0 {
			return errors.New("every fourth call fails")
		}
		return nil
	}
	r := Closed(context.Background(), 3, 200*time.Millisecond, op)
	n := int(calls.Load())
	// Three workers of 2 ms calls for 200 ms: at most 300 calls, and far more than one each.
	if n < 30 || n > 300 {
		t.Fatalf("calls %d; want 30 to 300 from three back-to-back workers", n)
	}
	if r.Errors != n/4 || r.Latency.N != n-n/4 {
		t.Fatalf("errors %d, ok %d of %d calls; want every fourth failed", r.Errors, r.Latency.N, n)
	}
	if r.Latency.Min < 2*time.Millisecond {
		t.Fatalf("min latency %s; every call sleeps 2 ms", r.Latency.Min)
	}
}
