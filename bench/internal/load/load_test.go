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
