package limiter

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// roundTrips counts the scripts a client sends to Redis: on their own, and in pipelines
// (a new connection's set-up commands are not counted).
type roundTrips struct {
	single, pipelines, piped atomic.Int64
}

func (c *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			c.single.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		scripts := 0
		for _, cmd := range cmds {
			if name := cmd.Name(); name == "evalsha" || name == "eval" {
				scripts++
			}
		}
		if scripts > 0 {
			c.pipelines.Add(1)
			c.piped.Add(int64(scripts))
		}
		return next(ctx, cmds)
	}
}

// counted starts a limiter whose client counts its round trips.
func (b *bundle) counted(t *testing.T, opts Options) (*Limiter, *redis.Client, *roundTrips) {
	t.Helper()
	o, err := redis.ParseURL(b.url)
	require.NoError(t, err)
	rdb := redis.NewClient(o)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	l, err := New(rdb, opts)
	require.NoError(t, err)
	require.NoError(t, l.Start(context.Background()))
	t.Cleanup(func() {
		l.Stop()
		_ = rdb.Close()
	})
	return l, rdb, rt
}

// TestFinishesEndingTogetherShareARoundTrip: calls that finish within the linger go to
// Redis in one pipeline, and each still gets its own correct effect.
func TestFinishesEndingTogetherShareARoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l, _, rt := b.counted(t, Options{Now: clk.Now, FinishLinger: 200 * time.Millisecond})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{RPM: 1000, TPM: 100_000}))

	const n = 40
	rs := make([]*Reservation, n)
	for i := range rs {
		r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 100, Group: "run"})
		require.NoError(t, err)
		rs[i] = r
	}
	before, pipes, piped := rt.single.Load(), rt.pipelines.Load(), rt.piped.Load()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() { require.NoError(t, r.Finish(ctx, 60)) }) // 40 of 100 come back each
	}
	wg.Wait()
	require.Equal(t, before, rt.single.Load(), "no finish went on its own")
	require.Equal(t, pipes+1, rt.pipelines.Load(), "one round trip for all finishes")
	require.Equal(t, piped+n, rt.piped.Load())

	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.Zero(t, s.Held)
	require.Empty(t, s.Outstanding)
	require.InDelta(t, 100_000-n*60, s.Tokens, 1, "every finish returned its unused tokens")
}

// TestFinishAfterRedisLostItsScripts: a batch whose script Redis no longer has cached
// (restart, SCRIPT FLUSH), and a bucket whose limits vanished, still finish.
func TestFinishAfterRedisLostItsScripts(t *testing.T) {
	// Not parallel: SCRIPT FLUSH empties the script cache of the whole server, and the
	// tests that count round trips must not meet it.
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l, rdb, _ := b.counted(t, Options{Now: clk.Now, Source: func(context.Context, BucketKey) (Limits, bool, error) {
		return Limits{RPM: 100, TPM: 10_000}, true, nil
	}})
	r1, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 1000})
	require.NoError(t, err)
	r2, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 1000})
	require.NoError(t, err)

	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	require.NoError(t, r1.Finish(ctx, 500))
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, 1, s.Held)
	require.InDelta(t, 8500, s.Tokens, 1)

	require.NoError(t, rdb.Del(ctx, bucketKeys(b.key)[kLimits]).Err())
	require.NoError(t, r2.Finish(ctx, 1000))
	s, err = l.State(ctx, b.key)
	require.NoError(t, err)
	require.True(t, s.Configured, "the finish read the limits from the source again")
	require.Zero(t, s.Held)
}

// pendingFinishes waits until n finishes wait for their batch.
func pendingFinishes(t *testing.T, l *Limiter, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		l.settle.mu.Lock()
		defer l.settle.mu.Unlock()
		return len(l.settle.pending) == n
	}, 5*time.Second, time.Millisecond)
}

// TestAdmissionCarriesPendingFinishes: a finish waiting for its batch goes to Redis in the
// next admission's pipeline, long before its linger would have sent it, and returns its
// capacity before the admission looks.
func TestAdmissionCarriesPendingFinishes(t *testing.T) {
	// Not parallel: SCRIPT FLUSH empties the script cache of the whole server, and the
	// tests that count round trips must not meet it.
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l, rdb, rt := b.counted(t, Options{Now: clk.Now, FinishLinger: time.Minute})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{RPM: 1000, TPM: 1000}))

	r1, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 800, Group: "run"})
	require.NoError(t, err)
	for i, flush := range []bool{false, true} {
		before, pipes, piped := rt.single.Load(), rt.pipelines.Load(), rt.piped.Load()
		finished := make(chan error, 1)
		go func() { finished <- r1.Finish(ctx, 100) }() // 700 of 800 come back
		pendingFinishes(t, l, 1)
		if flush {
			// Redis lost its scripts: both the carried finish and the admission run again.
			require.NoError(t, rdb.ScriptFlush(ctx).Err())
		}

		// 800 tokens fit only once the finish returned its 700.
		r2, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 800, Group: "run", Deadline: time.Now().Add(5 * time.Second)})
		require.NoError(t, err)
		select {
		case err := <-finished:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("the finish waited for its linger instead of going with the admission")
		}
		require.Equal(t, r2.AdmittedAt, r2.EnqueuedAt, "admitted without waiting: the refund came first")
		require.Equal(t, pipes+1, rt.pipelines.Load(), "one pipeline for the finish and the admission")
		require.Equal(t, piped+2, rt.piped.Load())
		if !flush {
			require.Equal(t, before, rt.single.Load(), "nothing went on its own")
		}
		s, err := l.State(ctx, b.key)
		require.NoError(t, err)
		require.Equal(t, 1, s.Held, "the first call is released, the second held")
		require.InDelta(t, []float64{100, 0}[i], s.Tokens, 1) // 1000-800+700-800, then +700-800
		r1 = r2
	}
}

// TestGivingUpLeavesTheQueueCleanly: a call that gives up at its deadline leaves the queue
// and reports only that (leaving used to be reported as failed too: its script's reply was
// read as an admission's).
func TestGivingUpLeavesTheQueueCleanly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l := b.replica(t, Options{Now: clk.Now})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{RPM: 1}))
	_, err := l.Acquire(ctx, Request{Key: b.key})
	require.NoError(t, err)

	_, err = l.Acquire(ctx, Request{Key: b.key, Deadline: time.Now().Add(10 * time.Millisecond)})
	var de *DeadlineError
	require.ErrorAs(t, err, &de)
	require.Equal(t, de.Error(), err.Error(), "nothing joined to the deadline")
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.Zero(t, s.Queued)
}
