package periodic

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Loop runs its function from a goroutine of its own; Stop must end it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The loop calls Run every interval; Stop ends the loop once the running call has returned.
func TestLoopRunsUntilStopWaitsForTheRunningCall(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 8)
	var calls, returned atomic.Int32
	l := &Loop{Every: time.Millisecond, Run: func(ctx context.Context) {
		if calls.Add(1) == 2 {
			entered <- struct{}{}
			<-ctx.Done() // the second call runs until Stop
			returned.Add(1)
			return
		}
		returned.Add(1)
	}}
	l.Start(context.Background())
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not call Run twice")
	}
	l.Stop()
	require.Equal(t, calls.Load(), returned.Load(), "Stop returned while a call was running")
	require.Equal(t, int32(2), calls.Load(), "no call after Stop")
}

// Stop without Start does nothing.
func TestStopWithoutStart(t *testing.T) {
	t.Parallel()
	(&Loop{Every: time.Second}).Stop()
}
