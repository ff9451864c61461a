package limiter

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeClock is an injected bucket clock; only the arithmetic uses it, never a wait.
type fakeClock struct{ us atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.us.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.UnixMicro(c.us.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.us.Add(d.Microseconds()) }

type bundle struct {
	url    string
	client *redis.Client
	key    BucketKey
}

func setup(t *testing.T) *bundle {
	t.Helper()
	url, client := testkit.Redis(t)
	// Keys are per test DB, but the wake channel is shared by all DBs: a unique credential
	// keeps even our own logs readable.
	return &bundle{url: url, client: client, key: BucketKey{Credential: "cred-" + rand.Text()[:8], Model: "gpt-test"}}
}

// replica starts a Limiter on its own connection, as another router process would have.
func (b *bundle) replica(t *testing.T, opts Options) *Limiter {
	t.Helper()
	o, err := redis.ParseURL(b.url)
	require.NoError(t, err)
	rdb := redis.NewClient(o)
	l, err := New(rdb, opts)
	require.NoError(t, err)
	require.NoError(t, l.Start(context.Background()))
	t.Cleanup(func() {
		l.Stop()
		_ = rdb.Close()
	})
	return l
}

func TestBucketRefillsContinuously(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l := b.replica(t, Options{Now: clk.Now})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{RPM: 60, TPM: 600}))

	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.True(t, s.Configured)
	require.Equal(t, 60.0, s.Requests, "a new bucket starts full")
	require.Equal(t, 600.0, s.Tokens)

	r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 300})
	require.NoError(t, err)
	require.Equal(t, WakeNone, r.WokenBy)
	s, err = l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, 59.0, s.Requests)
	require.Equal(t, 300.0, s.Tokens)
	require.Equal(t, 1, s.Held)

	// rate = limit / 60 s: 1 request/s and 10 tokens/s, accruing continuously — from the
	// end of the transit allowance of a full bucket's first call (TestFullBucketRefillsAfterTransit).
	for _, step := range []struct {
		d        time.Duration
		req, tok float64
	}{
		{TransitAllowance, 59, 300},
		{250 * time.Millisecond, 59.25, 302.5},
		{250 * time.Millisecond, 59.5, 305},
		{10 * time.Second, 60, 405}, // requests capped at capacity
		{time.Hour, 60, 600},
	} {
		clk.Advance(step.d)
		s, err = l.State(ctx, b.key)
		require.NoError(t, err)
		require.InDelta(t, step.req, s.Requests, 1e-6)
		require.InDelta(t, step.tok, s.Tokens, 1e-6)
	}

	// Lowering a limit cuts the balance to the new capacity.
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{RPM: 10, TPM: 100}))
	s, err = l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, 10.0, s.Requests)
	require.Equal(t, 100.0, s.Tokens)

	// Unlimited is +Inf headroom and takes nothing.
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{}))
	r2, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 1_000_000})
	require.NoError(t, err)
	s, err = l.State(ctx, b.key)
	require.NoError(t, err)
	require.True(t, s.Requests > 1e300 && s.Tokens > 1e300)

	require.NoError(t, r.Release(ctx))
	require.NoError(t, r2.Release(ctx))
	require.NoError(t, r2.Release(ctx), "release is idempotent")
	s, err = l.State(ctx, b.key)
	require.NoError(t, err)
	require.Zero(t, s.Held)
	require.Empty(t, s.Outstanding)
}

// TestFullBucketRefillsAfterTransit: the provider's bucket starts refilling when our first
// call arrives, which may be a fresh connection's dial later than we sent it; later calls may
// travel faster. Ours must not refill ahead of the provider's phase: a full bucket that gives
// refills only from TransitAllowance on, while the burst and the rate stay the whole limit.
func TestFullBucketRefillsAfterTransit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l := b.replica(t, Options{Now: clk.Now})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{RPM: 60}))

	var held []*Reservation
	for range 60 { // the whole limit goes at once
		r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 1})
		require.NoError(t, err)
		require.Equal(t, WakeNone, r.WokenBy)
		held = append(held, r)
	}
	requests := func() float64 {
		s, err := l.State(ctx, b.key)
		require.NoError(t, err)
		return s.Requests
	}
	require.InDelta(t, 0, requests(), 1e-9)

	// The first call reached the provider 40 ms after we sent it; the 61st may take 0 ms.
	// The provider has its next token at 1 s + 40 ms: ours must not have one before.
	clk.Advance(time.Second + 40*time.Millisecond)
	require.Less(t, requests(), 1.0, "a token before the provider's phase: a near-miss 429")
	clk.Advance(TransitAllowance - 40*time.Millisecond)
	require.InDelta(t, 1, requests(), 1e-9)

	// The shift happens once per busy period: a bucket that is not full refills at the rate.
	r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 1})
	require.NoError(t, err)
	held = append(held, r)
	clk.Advance(time.Second)
	require.InDelta(t, 1, requests(), 1e-9)
	for _, r := range held {
		require.NoError(t, r.Release(ctx))
	}
}

func TestReconcileRefundsAndTakesOverrun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l := b.replica(t, Options{Now: clk.Now})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{TPM: 6000}))

	r1, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 1000})
	require.NoError(t, err)
	require.NoError(t, r1.Reconcile(ctx, 400)) // 600 unused come back
	require.NoError(t, r1.Reconcile(ctx, 0), "only the first reconcile counts")
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, 5600.0, s.Tokens)

	r2, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 5000})
	require.NoError(t, err)
	require.NoError(t, r2.Reconcile(ctx, 7000)) // 2000 more than reserved: debt
	s, err = l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, -1400.0, s.Tokens)

	clk.Advance(TransitAllowance + 14*time.Second) // 100 tokens/s repays the debt
	s, err = l.State(ctx, b.key)
	require.NoError(t, err)
	require.InDelta(t, 0, s.Tokens, 1e-6)
	require.NoError(t, r1.Release(ctx))
	require.NoError(t, r2.Release(ctx))
}

// TestFinishReconcilesAndReleases: Finish is Reconcile then Release in one script, and
// like them has an effect once.
func TestFinishReconcilesAndReleases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l := b.replica(t, Options{Now: clk.Now})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{RPM: 100, TPM: 6000}))

	r1, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 1000, Group: "run-1"})
	require.NoError(t, err)
	r2, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 1000, Group: "run-1"})
	require.NoError(t, err)
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, 2, s.Held)
	require.Equal(t, 4000.0, s.Tokens)

	require.NoError(t, r1.Finish(ctx, 400)) // 600 unused come back, the hold ends
	require.NoError(t, r1.Finish(ctx, 0), "only the first finish counts")
	require.NoError(t, r1.Reconcile(ctx, 0), "finish reconciled already")
	s, err = l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, 4600.0, s.Tokens)
	require.Equal(t, 1, s.Held)
	require.Equal(t, map[string]int{"run-1": 1}, s.Outstanding)

	// Reconciled first, then finished: only the release is left.
	require.NoError(t, r2.Reconcile(ctx, 1500))
	require.NoError(t, r2.Finish(ctx, 0))
	s, err = l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, 4100.0, s.Tokens)
	require.Zero(t, s.Held)
	require.Empty(t, s.Outstanding)
}

func TestObserveLowersButNeverRaises(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l := b.replica(t, Options{Now: clk.Now})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{RPM: 100, TPM: 6000}))

	lowered, err := l.Observe(ctx, b.key, provider.RateLimit{Known: true, LimitRequests: 100, RemainingRequests: 40,
		LimitTokens: 6000, RemainingTokens: 1000})
	require.NoError(t, err)
	require.True(t, lowered)
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, 40.0, s.Requests)
	require.Equal(t, 1000.0, s.Tokens)

	lowered, err = l.Observe(ctx, b.key, provider.RateLimit{Known: true, LimitRequests: 100, RemainingRequests: 90,
		LimitTokens: 6000, RemainingTokens: 5000})
	require.NoError(t, err)
	require.False(t, lowered)
	s, err = l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, 40.0, s.Requests)
	require.Equal(t, 1000.0, s.Tokens)

	// Without the matching limit header a zero "remaining" is absence, not exhaustion.
	lowered, err = l.Observe(ctx, b.key, provider.RateLimit{Known: true})
	require.NoError(t, err)
	require.False(t, lowered)
}

func TestPenalizeBlocksUntilRetryAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	l := b.replica(t, Options{})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{})) // unlimited: only the penalty gates

	v, err := l.runRaw(ctx, penalizeScript, b.key, (300 * time.Millisecond).Microseconds())
	require.NoError(t, err)
	until := time.UnixMicro(toInt(v))

	r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 10})
	require.NoError(t, err)
	require.False(t, r.AdmittedAt.Before(until), "admitted at %s, penalty until %s", r.AdmittedAt, until)
	require.Equal(t, WakeRefill, r.WokenBy, "the waiter slept exactly until the penalty ended")
	require.NoError(t, r.Release(ctx))

	// The public call, limited bucket: it is emptied and refills only after retry-after.
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{RPM: 600}))
	require.NoError(t, l.Penalize(ctx, b.key, time.Minute))
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, 0.0, s.Requests)
	require.Greater(t, s.BlockedFor, 59*time.Second)
	_, err = l.Acquire(ctx, Request{Key: b.key, Deadline: time.Now().Add(time.Second)})
	var de *DeadlineError
	require.ErrorAs(t, err, &de)
	require.Greater(t, de.Needed, 59*time.Second)
}

func TestDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	l := b.replica(t, Options{})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{TPM: 60})) // 1 token/s
	drain, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 60})
	require.NoError(t, err)

	// At the head, the arithmetic already says 30 s: fail at once, saying so.
	_, err = l.Acquire(ctx, Request{Key: b.key, Tokens: 30, Deadline: time.Now().Add(time.Second)})
	require.ErrorIs(t, err, ErrDeadline)
	var de *DeadlineError
	require.ErrorAs(t, err, &de)
	require.InDelta(t, 30*time.Second, de.Needed, float64(time.Second))

	// Behind another waiter the need is unknown: wait until the deadline, then give up.
	head := make(chan error, 1)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, err := l.Acquire(hctx, Request{Key: b.key, Tokens: 30})
		head <- err
	}()
	waitQueued(t, l, b.key, 1)
	_, err = l.Acquire(ctx, Request{Key: b.key, Tokens: 1, Deadline: time.Now().Add(200 * time.Millisecond)})
	require.ErrorAs(t, err, &de)
	require.Zero(t, de.Needed)
	require.Equal(t, 1, de.Ahead)

	cancel()
	require.ErrorIs(t, <-head, context.Canceled)
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.Zero(t, s.Queued, "waiters that gave up left the queue")
	require.Equal(t, map[string]int{"~" + drain.id: 1}, s.Outstanding)
	require.NoError(t, drain.Release(ctx))
}

// waitQueued polls until n calls wait in the bucket's queue.
// waiters returns start, which acquires 100 tokens in the background, and the channel on
// which each admitted call's group arrives (the call is released at once). Those still
// waiting give up when the test ends.
func waiters(t *testing.T, l *Limiter, key BucketKey) (start func(Request), admitted <-chan string) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	out := make(chan string, 8)
	return func(r Request) {
		r.Key, r.Tokens = key, 100
		wg.Go(func() {
			res, err := l.Acquire(ctx, r)
			if err == nil {
				out <- r.Group
				_ = res.Release(context.Background())
			}
		})
	}, out
}

func waitQueued(t *testing.T, l *Limiter, key BucketKey, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		s, err := l.State(context.Background(), key)
		return err == nil && s.Queued == n
	}, 10*time.Second, 2*time.Millisecond)
}

func TestWaiterWakesAtRefillTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	l := b.replica(t, Options{LeaseTTL: time.Minute})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{TPM: 6000})) // 100 tokens/s
	drain, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 6000})
	require.NoError(t, err)

	r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 50})
	require.NoError(t, err)
	require.Equal(t, WakeRefill, r.WokenBy)
	require.Equal(t, 1, r.Wakes, "one sleep, to the exact refill time")
	require.GreaterOrEqual(t, r.Waited(), 495*time.Millisecond)
	require.NoError(t, r.Release(ctx))
	require.NoError(t, drain.Release(ctx))
}

// TestQueueOrder builds a queue whose order is fully determined, then hands out capacity
// one call at a time by reconciling each admitted call to zero tokens (a refund that wakes
// the head at once; natural refill would take a minute).
func TestQueueOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.replica(t, Options{LeaseTTL: time.Minute})
	c := b.replica(t, Options{LeaseTTL: time.Minute}) // half the waiters on another replica
	require.NoError(t, a.SetLimits(ctx, b.key, Limits{TPM: 100}))

	// The "busy" run already has two calls in flight (0 tokens: they hold no capacity).
	for range 2 {
		r, err := a.Acquire(ctx, Request{Key: b.key, Group: "busy", Priority: PriorityNormal})
		require.NoError(t, err)
		defer r.Release(ctx) //nolint:errcheck
	}
	drain, err := a.Acquire(ctx, Request{Key: b.key, Tokens: 100, Group: "drain"})
	require.NoError(t, err)

	type admitted struct {
		name string
		r    *Reservation
	}
	out := make(chan admitted, 8)
	enqueue := func(l *Limiter, name string, prio int, group string) {
		go func() {
			r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 100, Priority: prio, Group: group})
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			out <- admitted{name, r}
		}()
	}
	// Arrival order differs from the expected admission order at every level.
	arrivals := []struct {
		l     *Limiter
		name  string
		prio  int
		group string
	}{
		{a, "low", PriorityLow, "g-low"},
		{c, "busy", PriorityNormal, "busy"},    // 3 outstanding with this one
		{a, "idle-1", PriorityNormal, "idle1"}, // 1 outstanding
		{c, "idle-2", PriorityNormal, "idle2"}, // 1 outstanding, arrived later
		{a, "critical", PriorityCritical, "g-crit"},
	}
	for i, w := range arrivals {
		enqueue(w.l, w.name, w.prio, w.group)
		waitQueued(t, a, b.key, i+1)
	}

	require.NoError(t, drain.Reconcile(ctx, 0))
	var order []string
	for range arrivals {
		select {
		case got := <-out:
			order = append(order, got.name)
			require.Equal(t, WakeNotify, got.r.WokenBy, "%s was woken by the refund, not a timer", got.name)
			require.NoError(t, got.r.Reconcile(ctx, 0))
			defer got.r.Release(ctx) //nolint:errcheck
		case <-time.After(10 * time.Second):
			t.Fatalf("admitted so far: %v", order)
		}
	}
	require.Equal(t, []string{"critical", "idle-1", "idle-2", "busy", "low"}, order)
	require.NoError(t, drain.Release(ctx))
}

// TestReleaseReordersByProgress: when a group's calls finish, its remaining waiters move
// ahead of groups with more in flight (seed 003: the straggler that unblocks a barrier).
func TestReleaseReordersByProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	l := b.replica(t, Options{LeaseTTL: time.Minute})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{TPM: 100}))

	var fanout []*Reservation
	for range 3 {
		r, err := l.Acquire(ctx, Request{Key: b.key, Group: "run-a"})
		require.NoError(t, err)
		fanout = append(fanout, r)
	}
	r, err := l.Acquire(ctx, Request{Key: b.key, Group: "run-b"})
	require.NoError(t, err)
	defer r.Release(ctx) //nolint:errcheck
	drain, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 100, Group: "drain"})
	require.NoError(t, err)

	start, out := waiters(t, l, b.key)
	wait := func(group string) { start(Request{Group: group}) }
	wait("run-a") // run-a's straggler: 4 outstanding
	waitQueued(t, l, b.key, 1)
	wait("run-b") // 2 outstanding: ahead of run-a for now
	waitQueued(t, l, b.key, 2)
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"run-a": 4, "run-b": 2, "drain": 1}, s.Outstanding)

	// run-a's other calls finish: its straggler now has 1 outstanding and goes first.
	for _, f := range fanout {
		require.NoError(t, f.Release(ctx))
	}
	require.NoError(t, drain.Reconcile(ctx, 0))
	require.Equal(t, "run-a", <-out)
	require.NoError(t, drain.Release(ctx))
	// run-b would follow on refill (100 tokens at 100/min): it still waits.
	st, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, 1, st.Queued)
}

// TestPendingCountsWithOutstanding: a group's pending calls (a chain's steps not yet
// dispatched) count with its outstanding ones, so the chain nearest completion goes first.
func TestPendingCountsWithOutstanding(t *testing.T) {
	t.Parallel()
	b, ctx := setup(t), t.Context()
	l := b.replica(t, Options{LeaseTTL: time.Minute})
	start, out := waiters(t, l, b.key)
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{TPM: 100}))
	drain, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 100, Group: "drain"})
	require.NoError(t, err)

	wait := func(group string, pending int) { start(Request{Group: group, Pending: pending}) }
	wait("first-step", 5) // a chain's first step, five more to come: weight 6
	waitQueued(t, l, b.key, 1)
	wait("last-step", 0) // another chain's last step, arrived later: weight 1
	waitQueued(t, l, b.key, 2)

	require.NoError(t, drain.Reconcile(ctx, 0))
	require.Equal(t, "last-step", <-out)
	require.NoError(t, drain.Release(ctx))
	_, err = l.Acquire(ctx, Request{Key: b.key, Group: "g", Pending: -1})
	require.ErrorContains(t, err, "Pending")
}

func TestLimitChangeReachesOtherReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.replica(t, Options{LeaseTTL: time.Minute})
	c := b.replica(t, Options{LeaseTTL: time.Minute})
	require.NoError(t, a.SetLimits(ctx, b.key, Limits{RPM: 1})) // one request a minute
	s, err := c.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, Limits{RPM: 1}, s.Limits)

	first, err := c.Acquire(ctx, Request{Key: b.key})
	require.NoError(t, err)
	done := make(chan *Reservation, 1)
	go func() {
		r, err := c.Acquire(ctx, Request{Key: b.key})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	waitQueued(t, c, b.key, 1)
	require.NoError(t, a.SetLimits(ctx, b.key, Limits{RPM: 6000})) // 100/s: the next in 10 ms
	r := <-done
	require.NotNil(t, r)
	require.Contains(t, []WakeReason{WakeNotify, WakeRefill}, r.WokenBy, "not the lease safety net")
	require.Less(t, r.Waited(), 50*time.Second)
	s, err = c.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, Limits{RPM: 6000}, s.Limits)
	require.NoError(t, r.Release(ctx))
	require.NoError(t, first.Release(ctx))
}

// TestStaleWaiterPruned: a waiter whose replica died stops blocking the queue once its
// lease lapses.
func TestStaleWaiterPruned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	l := b.replica(t, Options{LeaseTTL: 300 * time.Millisecond})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{RPM: 600}))
	// Penalize briefly so the ghost queues instead of being admitted.
	require.NoError(t, l.Penalize(ctx, b.key, 50*time.Millisecond))
	// The ghost: a critical waiter enqueued by a replica that then vanished (nobody renews).
	v, err := l.run(ctx, acquireScript, b.key, "ghost", PriorityCritical, "dead-run", 0,
		(200 * time.Millisecond).Microseconds(), time.Minute.Microseconds(), l.keepMillis(), 0)
	require.NoError(t, err)
	require.Equal(t, int64(codeWaiting), toInt(v[0]))

	r, err := l.Acquire(ctx, Request{Key: b.key, Priority: PriorityLow, Group: "live"})
	require.NoError(t, err)
	require.NotEqual(t, WakeRefill, r.WokenBy, "the penalty's end found the ghost still ahead")
	require.GreaterOrEqual(t, r.AdmittedAt.Sub(r.EnqueuedAt), 100*time.Millisecond)
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.Zero(t, s.Queued)
	require.Equal(t, map[string]int{"live": 1}, s.Outstanding, "the ghost's run no longer counts")
	require.NoError(t, r.Release(ctx))
}

func TestLimitSourceSeedsMissingLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	var calls atomic.Int32
	l := b.replica(t, Options{Source: func(ctx context.Context, key BucketKey) (Limits, bool, error) {
		calls.Add(1)
		return Limits{RPM: 5, TPM: 500}, true, nil
	}})
	r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 100})
	require.NoError(t, err)
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.Equal(t, Limits{RPM: 5, TPM: 500}, s.Limits)
	require.InDelta(t, 400, s.Tokens, 1)
	require.NoError(t, r.Release(ctx))
	require.Equal(t, int32(1), calls.Load())

	bad := b.replica(t, Options{Source: func(context.Context, BucketKey) (Limits, bool, error) {
		return Limits{}, false, errors.New("registry down")
	}})
	_, err = bad.Acquire(ctx, Request{Key: BucketKey{Credential: "other", Model: "m"}})
	require.ErrorContains(t, err, "registry down")
}

func TestRequestValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := b.replica(t, Options{})
	for _, req := range []Request{
		{Key: BucketKey{Model: "m"}},
		{Key: b.key, Tokens: -1},
		{Key: b.key, Priority: 4},
	} {
		_, err := l.Acquire(context.Background(), req)
		require.Error(t, err)
	}
	_, err := New(nil, Options{})
	require.Error(t, err)
	_, err = New(b.client, Options{LeaseTTL: time.Millisecond})
	require.ErrorContains(t, err, "LeaseTTL")
}

// TestReplicasNeverExceedLimits drives two replicas far above the limit and checks, on the
// Redis clock that stamped each admission, that no window admitted more than the refill of
// that window plus the burst allowance (the bucket's content at the window's start: after
// draining, at most one request's worth), and that the capacity was used.
func TestReplicasNeverExceedLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		limits    Limits
		tokens    func(i int) int
		perSecond float64 // the binding rate, in its unit
		unit      func(r *Reservation) float64
		allowance float64
	}{
		{"rpm", Limits{RPM: 6000}, func(int) int { return 10 }, 100,
			func(*Reservation) float64 { return 1 }, 1},
		{"tpm", Limits{TPM: 120000}, func(i int) int { return 5 + i%21 }, 2000,
			func(r *Reservation) float64 { return float64(r.Tokens) }, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t)
			replicas := []*Limiter{b.replica(t, Options{}), b.replica(t, Options{})}
			require.NoError(t, replicas[0].SetLimits(ctx, b.key, tc.limits))
			// Drain: a 1 ms penalty empties both buckets; refill starts when it ends.
			v, err := replicas[0].runRaw(ctx, penalizeScript, b.key, int64(1000))
			require.NoError(t, err)
			start := time.UnixMicro(toInt(v))
			stop := start.Add(2 * time.Second)

			var mu sync.Mutex
			var got []*Reservation
			var wg sync.WaitGroup
			for i := range 32 {
				wg.Go(func() {
					l := replicas[i%2]
					for n := 0; ; n++ {
						r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: tc.tokens(i + n), Group: "g" + string(rune('a'+i%5))})
						if err != nil {
							t.Error(err)
							return
						}
						_ = r.Release(ctx)
						mu.Lock()
						got = append(got, r)
						mu.Unlock()
						if r.AdmittedAt.After(stop) {
							return
						}
					}
				})
			}
			wg.Wait()

			var in []*Reservation
			for _, r := range got {
				require.False(t, r.AdmittedAt.Before(start), "admitted during the drain")
				if r.AdmittedAt.Before(stop) {
					in = append(in, r)
				}
			}
			sortByAdmission(in)
			// Exact: from the drain on, what was admitted never exceeds what refilled. Two
			// replicas racing for the same capacity would break this first.
			cum := 0.0
			for _, r := range in {
				cum += tc.unit(r)
				refilled := tc.perSecond * r.AdmittedAt.Sub(start).Seconds()
				require.LessOrEqual(t, cum, refilled+1e-6, "at %s", r.AdmittedAt.Sub(start))
			}
			// Any one-second window: the refill of that second plus the burst allowance, what
			// the bucket held at the window's start (never more than its capacity, one
			// minute's limit). Under steady demand that is only what accrued while the head
			// was being woken: logged, not asserted, as it measures the machine's latency.
			maxSlack, before := 0.0, 0.0
			for i := range in {
				slack := tc.perSecond*in[i].AdmittedAt.Sub(start).Seconds() - before
				maxSlack = max(maxSlack, slack)
				sum := 0.0
				for j := i; j < len(in) && in[j].AdmittedAt.Sub(in[i].AdmittedAt) < time.Second; j++ {
					sum += tc.unit(in[j])
				}
				require.LessOrEqual(t, sum, tc.perSecond+slack+1e-6, "window from %s", in[i].AdmittedAt.Sub(start))
				require.LessOrEqual(t, slack, tc.perSecond*60)
				before += tc.unit(in[i])
			}
			t.Logf("%s: largest burst allowance used: %.1f (%.1f ms of refill)", tc.name, maxSlack, 1000*maxSlack/tc.perSecond)
			used := 0.0
			for _, r := range in {
				used += tc.unit(r)
			}
			last := in[len(in)-1].AdmittedAt
			avail := tc.perSecond * last.Sub(start).Seconds()
			t.Logf("%s: admitted %.0f of %.1f refilled (%.2f%%) in %s, %d calls", tc.name, used, avail,
				100*used/avail, last.Sub(start), len(in))
			// Capacity is not stranded. What goes unused is the time the head of the queue takes
			// to be woken, summed over the run, so the share measures the machine as much as
			// the limiter: alone this test uses 99.6–99.98 %, with the whole suite on two cores
			// it measured 95.5–98.8 %. The floor is for gross stranding — heads left asleep
			// until a lease tick (every 3.3 s) would use well under it in these 2 s; the share
			// under steady load is measured by routerbench -mode replicas (docs/PERFORMANCE.md).
			require.GreaterOrEqual(t, used, 0.8*avail)
		})
	}
}

func sortByAdmission(rs []*Reservation) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].AdmittedAt.Before(rs[j-1].AdmittedAt); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	url, _ := testkit.Redis(b)
	o, err := redis.ParseURL(url)
	require.NoError(b, err)
	rdb := redis.NewClient(o)
	defer rdb.Close()
	l, err := New(rdb, Options{})
	require.NoError(b, err)
	require.NoError(b, l.Start(ctx))
	defer l.Stop()
	key := BucketKey{Credential: "bench-" + rand.Text()[:8], Model: "m"}
	require.NoError(b, l.SetLimits(ctx, key, Limits{RPM: 1 << 30, TPM: 1 << 30}))
	b.ReportAllocs()
	for b.Loop() {
		r, err := l.Acquire(ctx, Request{Key: key, Tokens: 100, Group: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
