package limiter

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sharer starts a limiter with local admission (10 requests per share unless a says
// more) on b's bucket, with the limits lim, on clk.
func (b *bundle) sharer(t *testing.T, a Allowance, clk *fakeClock, lim Limits) (*Limiter, *roundTrips) {
	t.Helper()
	a.Requests = max(a.Requests, 10)
	l, _, rt := b.counted(t, Options{Allowance: a, FinishLinger: -1, Now: clk.Now})
	require.NoError(t, l.SetLimits(context.Background(), b.key, lim))
	return l, rt
}

// TestShareAdmitsWithoutRoundTrips: with plenty of headroom a replica takes one share and
// admits from it locally; the share comes out of the shared bucket at once, and the next
// share is taken when it runs out.
func TestShareAdmitsWithoutRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l, rt := b.sharer(t, Allowance{TTL: time.Minute}, clk, Limits{RPM: 10_000, TPM: 1_000_000})

	before := rt.single.Load()
	for range 7 {
		r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 100, Group: "run"})
		require.NoError(t, err)
		require.Zero(t, r.Waited())
		require.NotNil(t, r.share)
		require.NoError(t, r.Finish(ctx, 40)) // 60 back into the share
	}
	require.Equal(t, before+1, rt.single.Load(), "one script for seven admissions: the share")
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.InDelta(t, 10_000-10, s.Requests, 0.01, "the share's 10 requests (1% of 100, capped by Requests)")
	require.InDelta(t, 1_000_000-10_000, s.Tokens, 0.01, "and 1% of the tokens left the bucket at once")
	require.Zero(t, s.Held, "calls admitted from a share hold nothing in the bucket")
	require.Empty(t, s.Outstanding)

	// The eighth call leaves 2 of 10 requests: the next share is fetched in the background
	// and the rest of this one (2 requests; 9,680 tokens) goes back.
	r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 100})
	require.NoError(t, err)
	require.NotNil(t, r.share)
	require.NoError(t, r.Finish(ctx, 40))
	require.Eventually(t, func() bool {
		s, err := l.State(ctx, b.key)
		return err == nil && s.Requests > 9_981 && s.Requests < 9_983
	}, 5*time.Second, time.Millisecond, "10,000 - 10 - 10 + 2 requests")
	s, err = l.State(ctx, b.key)
	require.NoError(t, err)
	require.InDelta(t, 1_000_000-10_000-10_000+9_680, s.Tokens, 0.01)

	before = rt.single.Load()
	r, err = l.Acquire(ctx, Request{Key: b.key, Tokens: 100})
	require.NoError(t, err)
	require.NotNil(t, r.share)
	require.Equal(t, before, rt.single.Load(), "admitted from the new share")
}

// TestShareFromAFullBucketKeepsTheProvidersPhase: a call admitted from a share may leave up
// to the share's TTL after the grant, and the provider's bucket refills from that call's
// arrival; a full bucket that grants a share refills only after the TTL and the transit
// allowance, so it never runs ahead of the provider's phase (TestFullBucketRefillsAfterTransit).
func TestShareFromAFullBucketKeepsTheProvidersPhase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l, _ := b.sharer(t, Allowance{TTL: time.Minute}, clk, Limits{RPM: 10_000})
	requests := func() float64 {
		s, err := l.State(ctx, b.key)
		require.NoError(t, err)
		return s.Requests
	}

	r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 1})
	require.NoError(t, err)
	require.NotNil(t, r.share)
	require.InDelta(t, 10_000-10, requests(), 0.01)
	clk.Advance(time.Minute)
	require.InDelta(t, 10_000-10, requests(), 0.01, "refilled while the share's calls may still leave")
	clk.Advance(TransitAllowance + 60*time.Millisecond) // 10,000/min: 10 requests in 60 ms
	require.InDelta(t, 10_000, requests(), 0.01)
	require.NoError(t, r.Finish(ctx, 1))
}

// TestNoShareNearTheLimitOrWhileSomeoneWaits: below the headroom, or with a call waiting,
// no share is granted and calls take the shared queue — in order, counted for their group.
func TestNoShareNearTheLimitOrWhileSomeoneWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	a := Allowance{TTL: time.Minute, Share: 0.1, Headroom: 0.5}
	l, _ := b.sharer(t, a, clk, Limits{RPM: 100})
	plain := b.replica(t, Options{Now: clk.Now})

	// 45 of 100 requests used: a share of 10 would leave 45, below the headroom of 50.
	for range 45 {
		_, err := plain.Acquire(ctx, Request{Key: b.key})
		require.NoError(t, err)
	}
	r, err := l.Acquire(ctx, Request{Key: b.key, Group: "run"})
	require.NoError(t, err)
	require.Nil(t, r.share, "admitted through the bucket")
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.InDelta(t, 54, s.Requests, 0.01, "no share left the bucket")
	require.Equal(t, 1, s.Outstanding["run"])

	// A waiter: the bucket has headroom for a share (600 of 1,000 tokens, 99 of 100
	// requests), but a call of 900 tokens waits at the head, so no share either.
	b2 := setup(t)
	l2, _ := b2.sharer(t, a, clk, Limits{RPM: 100, TPM: 1000})
	plain2 := b2.replica(t, Options{Now: clk.Now})
	_, err = plain2.Acquire(ctx, Request{Key: b2.key, Tokens: 400})
	require.NoError(t, err)
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = plain2.Acquire(waitCtx, Request{Key: b2.key, Tokens: 900}) }()
	require.Eventually(t, func() bool {
		s, err := l2.State(ctx, b2.key)
		return err == nil && s.Queued == 1
	}, 5*time.Second, time.Millisecond)
	deadline := time.Now().Add(50 * time.Millisecond)
	_, err = l2.Acquire(ctx, Request{Key: b2.key, Tokens: 10, Deadline: deadline})
	require.ErrorIs(t, err, ErrDeadline, "queued behind the waiter, not admitted from a share")
}

// TestShareRemainderGoesBack: an expired share gives back what it did not use, and a call
// that finishes after its share closed corrects the bucket itself.
func TestShareRemainderGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l, _ := b.sharer(t, Allowance{TTL: 100 * time.Millisecond}, clk, Limits{RPM: 10_000, TPM: 1_000_000})

	r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 500})
	require.NoError(t, err)
	require.NotNil(t, r.share)
	require.Eventually(t, func() bool {
		s, err := l.State(ctx, b.key)
		return err == nil && s.Requests > 9_990
	}, 5*time.Second, 5*time.Millisecond, "the expired share's 9 unused requests went back")
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.InDelta(t, 10_000-1, s.Requests, 0.01)
	require.InDelta(t, 1_000_000-500, s.Tokens, 0.01, "the share's unused tokens went back")

	require.NoError(t, r.Finish(ctx, 200)) // the share is gone: the 300 go to the bucket
	s, err = l.State(ctx, b.key)
	require.NoError(t, err)
	require.InDelta(t, 1_000_000-200, s.Tokens, 0.01)
}

// TestPenaltyDropsTheShare: after a provider's 429 this replica admits nothing more from its
// share; Stop gives a share back.
func TestPenaltyDropsTheShare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l, _ := b.sharer(t, Allowance{TTL: time.Minute}, clk, Limits{RPM: 10_000, TPM: 1_000_000})
	_, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 100})
	require.NoError(t, err)

	require.NoError(t, l.Penalize(ctx, b.key, time.Minute))
	_, err = l.Acquire(ctx, Request{Key: b.key, Tokens: 100, Deadline: time.Now().Add(20 * time.Millisecond)})
	require.ErrorIs(t, err, ErrDeadline, "blocked like every replica, not admitted from the old share")

	b2 := setup(t)
	l2, _ := b2.sharer(t, Allowance{TTL: time.Minute}, clk, Limits{RPM: 10_000, TPM: 1_000_000})
	_, err = l2.Acquire(ctx, Request{Key: b2.key, Tokens: 100})
	require.NoError(t, err)
	l2.Stop()
	s, err := l2.State(ctx, b2.key)
	require.NoError(t, err)
	require.InDelta(t, 10_000-1, s.Requests, 0.01, "Stop gave the share's remainder back")
}

// TestWaitingGivesTheShareBack: when a call of this replica has to wait, the replica's
// share goes back at once instead of admitting later calls ahead of the queue.
func TestWaitingGivesTheShareBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l, _ := b.sharer(t, Allowance{TTL: time.Minute}, clk, Limits{RPM: 10_000, TPM: 100_000})
	plain := b.replica(t, Options{Now: clk.Now})
	r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 10}) // a share of 10 requests, 1,000 tokens
	require.NoError(t, err)
	require.NotNil(t, r.share)
	_, err = plain.Acquire(ctx, Request{Key: b.key, Tokens: 98_000}) // 1,000 tokens left in the bucket
	require.NoError(t, err)

	// 2,000 tokens fit neither the share (990) nor the bucket: the call waits at the head.
	_, err = l.Acquire(ctx, Request{Key: b.key, Tokens: 2000, Deadline: time.Now().Add(20 * time.Millisecond)})
	require.ErrorIs(t, err, ErrDeadline)
	s, err := l.State(ctx, b.key)
	require.NoError(t, err)
	require.InDelta(t, 1000+990, s.Tokens, 0.01, "the share's 990 tokens went back when the call had to wait")
	require.InDelta(t, 10_000-2, s.Requests, 0.01, "and its 9 requests")
}

// holdShares holds the share scripts sent through it until released.
type holdShares struct {
	held    chan struct{} // a share script is waiting
	release chan struct{}
}

func (h *holdShares) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdShares) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "evalsha" && len(args) > 1 && args[1] == allowanceScript.Hash() {
			select {
			case <-h.release: // released: everything passes
			default:
				h.held <- struct{}{}
				<-h.release
			}
		}
		return next(ctx, cmd)
	}
}
func (h *holdShares) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestShareCutBeforeALimitChangeGoesBack: a share fetched while the limits change was cut
// from the bucket as it was: it is not used but given back.
func TestShareCutBeforeALimitChangeGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	l, rdb, _ := b.counted(t, Options{Allowance: Allowance{Requests: 10, TTL: time.Minute}, FinishLinger: -1, Now: clk.Now})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{RPM: 10_000, TPM: 1_000_000}))
	h := &holdShares{held: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(h)

	got := make(chan *Reservation, 1)
	go func() {
		r, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 100})
		assert.NoError(t, err)
		got <- r
	}()
	<-h.held // the share script is on its way
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{RPM: 10_000, TPM: 1_000_000}))
	close(h.release)
	r := <-got
	require.Nil(t, r.share, "not admitted from a share cut before the change")
	require.Eventually(t, func() bool {
		s, err := l.State(ctx, b.key)
		return err == nil && s.Requests > 9_998.5 && s.Tokens > 999_899
	}, 5*time.Second, time.Millisecond, "the share went back; only the call's own request and tokens are taken")
}

// outcomes counts the outcomes Metrics.Waited reports.
type outcomes struct {
	nopMetrics
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) Waited(_ BucketKey, _ int, _ time.Duration, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[outcome]++
}

// TestShareAdmissionsAreCountedApart: the wait histogram tells calls admitted from a share
// from calls admitted through the bucket.
func TestShareAdmissionsAreCountedApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clk := newFakeClock()
	m := &outcomes{n: map[string]int{}}
	l, _, _ := b.counted(t, Options{Allowance: Allowance{Requests: 10, TTL: time.Minute}, Metrics: m, Now: clk.Now})
	require.NoError(t, l.SetLimits(ctx, b.key, Limits{RPM: 10_000, TPM: 1_000_000}))
	_, err := l.Acquire(ctx, Request{Key: b.key, Tokens: 100})
	require.NoError(t, err)
	_, err = l.Acquire(ctx, Request{Key: b.key, Tokens: 20_000}) // more than a share's 10,000 tokens
	require.NoError(t, err)
	require.Equal(t, map[string]int{OutcomeShare: 1, OutcomeAdmitted: 1}, m.n)
}
