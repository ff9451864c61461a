package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A caller with a MaxWait never waits longer than that: it leaves the queue with a time to
// come back, and callers sent away together are given slots spread at the bucket's rate.
func TestMaxWaitParksWithSpreadSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	l := drainedBucket(t, b, 60)
	wctx, cancel := context.WithCancel(ctx)
	waiters := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := l.Acquire(wctx, Request{Key: b.key})
			waiters <- err
		}()
	}
	waitQueued(t, l, b.key, 4)

	// Four ahead and one more second for itself: 5 s expected, more than its 2 s.
	started := time.Now()
	_, err := l.Acquire(ctx, Request{Key: b.key, MaxWait: 2 * time.Second})
	require.Less(t, time.Since(started), time.Second, "the queue ahead says so at once: no waiting")
	require.ErrorIs(t, err, ErrBusy)
	var be *BusyError
	require.ErrorAs(t, err, &be)
	require.Equal(t, 4, be.Ahead)
	require.Equal(t, 4*time.Second, be.RetryAfter, "slot now+5 s, back 1 s (MaxWait/2) early")

	_, err = l.Acquire(ctx, Request{Key: b.key, MaxWait: 2 * time.Second})
	require.ErrorAs(t, err, &be)
	require.Equal(t, 5*time.Second, be.RetryAfter, "the next slot is one refill later")

	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, 4, s.Queued, "parked callers left the queue")

	// Without a MaxWait the same call keeps today's behaviour: it waits (here until its
	// deadline, as nothing refills).
	_, err = l.Acquire(ctx, Request{Key: b.key, Deadline: time.Now().Add(100 * time.Millisecond)})
	require.ErrorIs(t, err, ErrDeadline)

	cancel()
	for range 4 {
		require.ErrorIs(t, <-waiters, context.Canceled)
	}
}

// A caller whose expected wait fits its MaxWait waits; if the wait runs longer than the
// estimate, it leaves when its MaxWait is spent, not at its (later) deadline.
func TestMaxWaitSpentWhileWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	l := drainedBucket(t, b, 600)
	started := time.Now()
	_, err := l.Acquire(ctx, Request{Key: b.key, MaxWait: 400 * time.Millisecond, Deadline: time.Now().Add(time.Minute)})
	require.ErrorIs(t, err, ErrBusy, "the frozen clock never refills: the estimate keeps saying 100 ms")
	require.GreaterOrEqual(t, time.Since(started), 300*time.Millisecond, "it waited while the estimate fit")
	require.Less(t, time.Since(started), 5*time.Second)
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.Zero(t, s.Queued)
}

// A caller that can come back is never told its deadline cannot be met: a later attempt
// has a fresh deadline, so it is given a time to come back instead.
func TestMaxWaitParksInsteadOfMissingTheDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	l := drainedBucket(t, b, 60)
	// At the head the refill is 1 s away: within its MaxWait, past its deadline.
	_, err := l.Acquire(ctx, Request{Key: b.key, MaxWait: 5 * time.Second, Deadline: time.Now().Add(300 * time.Millisecond)})
	require.ErrorIs(t, err, ErrBusy)
	require.NotErrorIs(t, err, ErrDeadline)
}

func TestMaxWaitValidated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := b.replica(t, Options{})
	_, err := l.Acquire(context.Background(), Request{Key: b.key, MaxWait: -time.Second})
	require.ErrorContains(t, err, "MaxWait")
}

// drainedBucket is a limiter on a frozen bucket clock — nothing refills, a queue stands
// still — whose bucket of rpm requests a minute was just emptied by held calls.
func drainedBucket(t *testing.T, b *bundle, rpm int) *Limiter {
	t.Helper()
	ctx := context.Background()
	l := b.replica(t, Options{Now: newFakeClock().Now, LeaseTTL: time.Minute})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{RPM: rpm}))
	for range rpm {
		r, err := l.Acquire(ctx, Request{Key: b.key})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, r.Release(context.Background())) })
	}
	return l
}
