package governance

import (
	"context"
	"sync"
	"time"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
)

// StoreQuota reads monthly usage from Postgres, caching each organisation's figure for TTL:
// the router updates the usage asynchronously anyway, and the router enforces the quota
// exactly per call; this pre-check only stops dispatching once the quota is spent.
type StoreQuota struct {
	DB  store.DB
	TTL time.Duration // default 1s

	mu   sync.Mutex
	used map[string]usedEntry
}

type usedEntry struct {
	tokens int64
	at     time.Time
}

// Used implements Quota.
func (q *StoreQuota) Used(ctx context.Context, orgID string) (int64, error) {
	ttl := q.TTL
	if ttl == 0 {
		ttl = time.Second
	}
	q.mu.Lock()
	if e, ok := q.used[orgID]; ok && time.Since(e.at) < ttl {
		q.mu.Unlock()
		return e.tokens, nil
	}
	q.mu.Unlock()
	tokens, err := store.MonthlyTokens(ctx, q.DB, orgID, time.Now())
	if err != nil {
		return 0, err
	}
	q.mu.Lock()
	if q.used == nil {
		q.used = map[string]usedEntry{}
	}
	q.used[orgID] = usedEntry{tokens: tokens, at: time.Now()}
	q.mu.Unlock()
	return tokens, nil
}

// Top implements Quota.
func (q *StoreQuota) Top(ctx context.Context, orgID string) ([]store.SkillUsage, error) {
	return store.TopSkills(ctx, q.DB, orgID, time.Now(), 5)
}
