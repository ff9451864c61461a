package governance

import (
	"context"
	"sync"
	"time"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
)

// StoreQuota reads monthly usage from Postgres, caching each organisation's figures for
// TTL: the router updates the usage asynchronously anyway, and the router enforces the quota
// exactly per call; these pre-checks only stop dispatching once the quota or the cost
// budget is spent.
type StoreQuota struct {
	DB  store.DB
	TTL time.Duration // default 1s

	mu     sync.Mutex
	tokens map[string]cached[int64]
	cost   map[string]cached[float64]
}

type cached[V any] struct {
	v  V
	at time.Time
}

// Used implements Quota: this month's tokens.
func (q *StoreQuota) Used(ctx context.Context, orgID string) (int64, error) {
	return readCached(q, &q.tokens, orgID, func() (int64, error) {
		return store.MonthlyTokens(ctx, q.DB, orgID, time.Now())
	})
}

// Cost implements Quota: this month's LLM cost in USD.
func (q *StoreQuota) Cost(ctx context.Context, orgID string) (float64, error) {
	return readCached(q, &q.cost, orgID, func() (float64, error) {
		return store.MonthlyCost(ctx, q.DB, orgID, time.Now())
	})
}

// readCached serves an organisation's figure from m while it is younger than the TTL, and
// loads it otherwise.
func readCached[V any](q *StoreQuota, m *map[string]cached[V], orgID string, load func() (V, error)) (V, error) {
	ttl := q.TTL
	if ttl == 0 {
		ttl = time.Second
	}
	q.mu.Lock()
	if e, ok := (*m)[orgID]; ok && time.Since(e.at) < ttl {
		q.mu.Unlock()
		return e.v, nil
	}
	q.mu.Unlock()
	v, err := load()
	if err != nil {
		return v, err
	}
	q.mu.Lock()
	if *m == nil {
		*m = map[string]cached[V]{}
	}
	(*m)[orgID] = cached[V]{v: v, at: time.Now()}
	q.mu.Unlock()
	return v, nil
}

// Top implements Quota.
func (q *StoreQuota) Top(ctx context.Context, orgID string) ([]store.SkillUsage, error) {
	return store.TopSkills(ctx, q.DB, orgID, time.Now(), 5)
}
