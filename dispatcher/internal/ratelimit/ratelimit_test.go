package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// t0 is the start of a fixed window for a one-minute window (a whole minute), so tests can
// place requests at known offsets into it.
var t0 = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

type bundle struct {
	lim *Limiter
	rdb *redis.Client
	ctx context.Context
}

func setup(t *testing.T) bundle {
	t.Helper()
	_, rdb := testkit.Redis(t)
	return bundle{lim: New(rdb), rdb: rdb, ctx: context.Background()}
}

func (b bundle) allow(t *testing.T, req Request) Decision {
	t.Helper()
	d, err := b.lim.Allow(b.ctx, req)
	require.NoError(t, err)
	return d
}

func TestAllowsUpToLimitThenRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := Request{OrgID: "org1", OrgLimit: 5, Window: time.Minute, Now: t0.Add(10 * time.Second)}
	for i := 1; i <= 5; i++ {
		d := b.allow(t, req)
		require.True(t, d.Allowed, "request %d", i)
		require.Equal(t, ScopeOrg, d.Scope)
		require.Equal(t, i, d.Count)
		require.Equal(t, 5, d.Limit)
	}
	d := b.allow(t, req)
	require.Equal(t, Decision{
		Allowed: false, Scope: ScopeOrg, Count: 5, Limit: 5, Window: time.Minute,
		// The previous window is empty, so room only comes back when this window's five
		// become the previous window and decay: at 60s+60s/5 = 72s, 62s from now.
		RetryAfter: 62 * time.Second,
		ResetAt:    t0.Add(72 * time.Second),
	}, normalise(d))
}

// normalise makes ResetAt comparable with == (UnixMilli drops the monotonic reading and
// location).
func normalise(d Decision) Decision {
	if !d.ResetAt.IsZero() {
		d.ResetAt = d.ResetAt.UTC()
	}
	return d
}

func TestUserLimitRefusesWhileOrgHasRoom(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := t0.Add(time.Second)
	alice := Request{OrgID: "org1", UserID: "alice", OrgLimit: 10, UserLimit: 2, Window: time.Minute, Now: now}
	require.True(t, b.allow(t, alice).Allowed)
	require.True(t, b.allow(t, alice).Allowed)
	d := b.allow(t, alice)
	require.False(t, d.Allowed)
	require.Equal(t, ScopeUser, d.Scope)
	require.Equal(t, 2, d.Count)
	require.Equal(t, 2, d.Limit)

	// Alice's refusal did not consume the org window: Bob still gets the other 8.
	bob := alice
	bob.UserID, bob.UserLimit = "bob", 100
	for i := range 8 {
		require.True(t, b.allow(t, bob).Allowed, "bob %d", i)
	}
	d = b.allow(t, bob)
	require.False(t, d.Allowed)
	require.Equal(t, ScopeOrg, d.Scope)
	require.Equal(t, 10, d.Count)
}

func TestOrgLimitRefusesWhileUserHasRoom(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := Request{OrgID: "org1", UserID: "alice", OrgLimit: 3, UserLimit: 10, Window: time.Minute, Now: t0}
	for range 3 {
		require.True(t, b.allow(t, req).Allowed)
	}
	d := b.allow(t, req)
	require.False(t, d.Allowed)
	require.Equal(t, ScopeOrg, d.Scope)

	// The refused request consumed nothing from the user's window either.
	c, err := b.rdb.HGet(b.ctx, userKey("org1", "alice", time.Minute), "c").Int()
	require.NoError(t, err)
	require.Equal(t, 3, c)
}

func TestRefusedRequestConsumesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := Request{OrgID: "org1", UserID: "u", OrgLimit: 2, UserLimit: 2, Window: time.Minute, Now: t0}
	require.True(t, b.allow(t, req).Allowed)
	require.True(t, b.allow(t, req).Allowed)
	before := dump(t, b)
	for range 5 {
		require.False(t, b.allow(t, req).Allowed)
	}
	require.Equal(t, before, dump(t, b))
}

func dump(t *testing.T, b bundle) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	keys, err := b.rdb.Keys(b.ctx, keyPrefix+"*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		out[k], err = b.rdb.HGetAll(b.ctx, k).Result()
		require.NoError(t, err)
	}
	return out
}

func TestWindowSlides(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := Request{OrgID: "org1", OrgLimit: 10, Window: time.Minute}
	at := func(offset time.Duration) Decision {
		r := req
		r.Now = t0.Add(offset)
		return b.allow(t, r)
	}
	// Ten requests early in the first window fill it.
	for range 10 {
		require.True(t, at(5*time.Second).Allowed)
	}
	require.False(t, at(59*time.Second).Allowed)

	// A quarter into the next window the previous ten weigh 7.5: two more fit (9.5), a third
	// would make 10.5.
	require.True(t, at(75*time.Second).Allowed)
	require.True(t, at(75*time.Second).Allowed)
	d := at(75 * time.Second)
	require.False(t, d.Allowed)
	require.Equal(t, 9, d.Count) // 7.5 + 2, rounded down
	// Room returns when 10 × (60−e)/60 + 2 ≤ 9, e ≥ 18s: 3s after 75s.
	require.Equal(t, 3*time.Second, d.RetryAfter)
	require.True(t, at(78*time.Second).Allowed)

	// Two windows later everything has slid out.
	for range 10 {
		require.True(t, at(185*time.Second).Allowed)
	}
}

func TestRetryAfterIsWhenRoomReturns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := Request{OrgID: "org1", OrgLimit: 4, Window: 10 * time.Second}
	for i := range 4 {
		r := req
		r.Now = t0.Add(time.Duration(i) * time.Second)
		require.True(t, b.allow(t, r).Allowed)
	}
	r := req
	r.Now = t0.Add(7 * time.Second)
	d := b.allow(t, r)
	require.False(t, d.Allowed)
	// Just before ResetAt it is still refused, at ResetAt it is allowed.
	r.Now = d.ResetAt.Add(-time.Millisecond)
	require.False(t, b.allow(t, r).Allowed)
	r.Now = d.ResetAt
	require.True(t, b.allow(t, r).Allowed)
}

func TestUnlimited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 50 {
		d := b.allow(t, Request{OrgID: "org1", UserID: "u", Window: time.Minute, Now: t0})
		require.True(t, d.Allowed)
		require.Empty(t, d.Scope)
	}
	// Org unlimited, user limited.
	req := Request{OrgID: "org1", UserID: "u", UserLimit: 1, Window: time.Minute, Now: t0}
	require.True(t, b.allow(t, req).Allowed)
	d := b.allow(t, req)
	require.False(t, d.Allowed)
	require.Equal(t, ScopeUser, d.Scope)
	// No user: only the org limit (unlimited) applies.
	req.UserID = ""
	require.True(t, b.allow(t, req).Allowed)
	keys, err := b.rdb.Keys(b.ctx, keyPrefix+"*").Result()
	require.NoError(t, err)
	require.Equal(t, []string{userKey("org1", "u", time.Minute)}, keys)
}

func TestKeysExpire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.True(t, b.allow(t, Request{OrgID: "org1", OrgLimit: 5, Window: time.Minute, Now: t0.Add(20 * time.Second)}).Allowed)
	ttl, err := b.rdb.PTTL(b.ctx, orgKey("org1", time.Minute)).Result()
	require.NoError(t, err)
	// Until the end of the next window: 2×60s − 20s.
	require.InDelta(t, (100 * time.Second).Seconds(), ttl.Seconds(), 1)
}

func TestServerClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := Request{OrgID: "org1", OrgLimit: 2, Window: time.Hour}
	require.True(t, b.allow(t, req).Allowed)
	require.True(t, b.allow(t, req).Allowed)
	d := b.allow(t, req)
	require.False(t, d.Allowed)
	serverNow, err := b.rdb.Time(b.ctx).Result()
	require.NoError(t, err)
	require.WithinDuration(t, serverNow.Add(d.RetryAfter), d.ResetAt, 5*time.Second)
	require.Positive(t, d.RetryAfter)
}

func TestValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, tc := range map[string]struct {
		req  Request
		want error
	}{
		"no org":           {Request{OrgLimit: 1, Window: time.Second}, ErrInvalidRequest},
		"no window":        {Request{OrgID: "o", OrgLimit: 1}, ErrInvalidRequest},
		"negative limit":   {Request{OrgID: "o", OrgLimit: -1, Window: time.Second}, ErrInvalidRequest},
		"negative cost":    {Request{OrgID: "o", OrgLimit: 1, Cost: -1, Window: time.Second}, ErrInvalidRequest},
		"cost over org":    {Request{OrgID: "o", OrgLimit: 5, Cost: 6, Window: time.Second}, ErrCostExceedsLimit},
		"cost over user":   {Request{OrgID: "o", UserID: "u", UserLimit: 5, Cost: 6, Window: time.Second}, ErrCostExceedsLimit},
		"nothing to check": {Request{}, nil},
	} {
		_, err := b.lim.Allow(b.ctx, tc.req)
		if tc.want == nil {
			require.NoError(t, err, name)
		} else {
			require.ErrorIs(t, err, tc.want, name)
		}
	}
}

func TestCost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := Request{OrgID: "org1", OrgLimit: 10, Window: time.Minute, Now: t0, Cost: 4}
	require.True(t, b.allow(t, req).Allowed)
	require.True(t, b.allow(t, req).Allowed)
	d := b.allow(t, req) // 8 + 4 > 10
	require.False(t, d.Allowed)
	require.Equal(t, 8, d.Count)
	req.Cost = 2
	require.True(t, b.allow(t, req).Allowed)
}

func TestConcurrentExactlyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const (
		workers = 16
		each    = 50
		limit   = 137
	)
	// One injected instant: the previous window is empty, so the counter is exact and
	// exactly limit requests must pass however the goroutines interleave.
	req := Request{OrgID: "org1", UserID: "u", OrgLimit: limit, UserLimit: 1000, Window: time.Minute, Now: t0.Add(30 * time.Second)}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				d, err := b.lim.Allow(b.ctx, req)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, limit, allowed.Load())
	c, err := b.rdb.HGet(b.ctx, userKey("org1", "u", time.Minute), "c").Int()
	require.NoError(t, err)
	require.Equal(t, limit, c, "refused requests must not count in the user window")
}

func BenchmarkAllow(b *testing.B) {
	_, rdb := testkit.Redis(b)
	lim := New(rdb)
	ctx := context.Background()
	req := Request{OrgID: "org-bench", UserID: "user-bench", OrgLimit: 100_000_000, UserLimit: 100_000_000, Window: time.Minute}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := lim.Allow(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPingBaseline is the round trip Allow cannot beat; read Allow's figure as a ratio
// to it, since the absolute numbers depend on the machine and its load.
func BenchmarkPingBaseline(b *testing.B) {
	_, rdb := testkit.Redis(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllowParallel runs 16 goroutines per CPU, as concurrent dispatch handlers would.
func BenchmarkAllowParallel(b *testing.B) {
	_, rdb := testkit.Redis(b)
	lim := New(rdb)
	ctx := context.Background()
	req := Request{OrgID: "org-bench", UserID: "user-bench", OrgLimit: 100_000_000, UserLimit: 100_000_000, Window: time.Minute}
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := lim.Allow(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
